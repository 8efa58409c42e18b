//! First-call latency in a fresh process: how long the first launch of a shipped kernel takes
//! when its machine code comes from a bundle, from a warm disk cache, or from the compiler
//! (cold), beside the same kernel's steady-state launch time.
//!
//! `cargo bench --bench first_call` prints one JSON line per kernel and source:
//! `{"kernel", "source", "first_ms", "steady_ms"}`, medians over fresh child processes. Each
//! child first does what `import tpukit` does (register the bundle, warm up the JIT), then
//! times its own first call, so process start-up is not counted. `benches/compare.py`
//! puts them beside XLA CPU's first call and libtpu's compile time. Not a timed test.

use std::path::Path;
use std::process::Command;
use std::time::Instant;
use tpukit::catalog::find;
use tpukit::prelude::*;
use tpukit::runtime::bundle;
use tpukit::runtime::cpu::{self, CacheKey, HostTarget};

/// (catalog name, shape) of each kernel timed; f32 and bf16 each.
const KERNELS: &[(&str, &[usize])] = &[
    ("add_vectors", &[1 << 20]),
    ("softmax", &[4096, 1024]),
    ("layer_norm", &[4096, 1024]),
    ("matmul", &[1024, 1024, 1024]),
];
const DTYPES: [DType; 2] = [DType::F32, DType::BF16];
const RUNS: usize = 5;

fn instance(name: &str, shape: &[usize], dtype: DType) -> tpukit::catalog::Instance {
    find(name).unwrap().instantiate(shape, dtype).unwrap()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child") {
        return child(&args[i + 1], DType::parse(&args[i + 2]).unwrap());
    }
    let dir = std::env::temp_dir().join(format!("tpukit-first-call-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let bundle_path = dir.join("host.tpkb");
    build_bundle(&bundle_path);
    let cache = dir.join("cache");
    for &(name, _) in KERNELS {
        for dtype in DTYPES {
            // Warm the disk cache for this kernel.
            run_child(name, dtype, &[("TPUKIT_CACHE_DIR", &cache)]);
            for (source, env) in [
                ("bundle", vec![("FIRST_CALL_BUNDLE", bundle_path.as_path())]),
                ("disk cache", vec![("TPUKIT_CACHE_DIR", cache.as_path())]),
                ("cold compile", vec![]),
            ] {
                let mut firsts = Vec::new();
                let mut steadies = Vec::new();
                for _ in 0..RUNS {
                    let (f, s) = run_child(name, dtype, &env);
                    firsts.push(f);
                    steadies.push(s);
                }
                println!(
                    r#"{{"kernel": "{name}_{dtype}", "source": "{source}", "first_ms": {:.3}, "steady_ms": {:.3}}}"#,
                    median(firsts),
                    median(steadies)
                );
            }
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn build_bundle(path: &Path) {
    let host = HostTarget::detect();
    let options = cpu::options_for(&host, false);
    let entries: Vec<bundle::BundleEntry> = KERNELS
        .iter()
        .flat_map(|&(name, shape)| DTYPES.map(|d| instance(name, shape, d)))
        .map(|inst| bundle::BundleEntry {
            key: CacheKey::new(&inst.kernel, &host, options),
            name: inst.kernel.name.clone(),
            ir_hash: inst.kernel.structural_hash().to_string(),
            artifact: cpu::compile_artifact(&inst.kernel, &host, options).unwrap(),
            tpu: None,
        })
        .collect();
    bundle::write(path, &host, &entries).unwrap();
}

/// Runs one child; returns its (first call, steady state) in ms.
fn run_child(name: &str, dtype: DType, env: &[(&str, &Path)]) -> (f64, f64) {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--child", name, dtype.name()]);
    c.env_remove("TPUKIT_BUNDLE").env_remove("TPUKIT_CACHE_DIR");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    (v[0], v[1])
}

/// In a fresh process: time the first launch, then the steady state.
fn child(name: &str, dtype: DType) {
    let shape = KERNELS.iter().find(|k| k.0 == name).unwrap().1;
    let inst = instance(name, shape, dtype);
    let k = &inst.kernel;
    let inputs: Vec<HostArray> = inst
        .arguments()
        .into_iter()
        .map(|(dtype, s)| HostArray::from_f64(dtype, &s, &vec![0.5; s.iter().product()]))
        .collect();
    let refs: Vec<&HostArray> = inputs.iter().collect();
    // What `import tpukit` does in Python: register the shipped bundle and warm up the JIT.
    if let Some(path) = std::env::var_os("FIRST_CALL_BUNDLE") {
        assert!(bundle::register(Path::new(&path)), "bundle refused");
    }
    cpu::warm_up().unwrap();
    let t = Instant::now();
    launch(k, Device::Cpu, &refs).unwrap();
    let first = t.elapsed().as_secs_f64() * 1e3;
    let mut steady = Vec::new();
    for _ in 0..9 {
        let t = Instant::now();
        launch(k, Device::Cpu, &refs).unwrap();
        steady.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("{first} {}", median(steady));
}
