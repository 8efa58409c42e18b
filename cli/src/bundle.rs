//! `tpukit bundle build|inspect`: precompiled kernels for this host, in one file.
//!
//! `build` compiles every shipped kernel (each catalog entry at its bundle shapes, f32 and
//! bf16) for the host CPU, lowers it to its StableHLO/Mosaic module, and writes a bundle the
//! runtime loads with `TPUKIT_BUNDLE=FILE` (see `tpukit::runtime::cpu::bundle`).

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;
use tpukit::catalog::find;
use tpukit::dsl::DType;
use tpukit::runtime::cpu::{self, CacheKey, HostTarget, bundle};
use tpukit_mosaic::{Options, lower};

/// The shapes each catalog kernel is bundled at. Only extents the kernel bakes in statically
/// (softmax's row length, say) distinguish bundle entries: symbolic extents are bound at run
/// time, so one entry serves every value of them.
const BUNDLED: &[(&str, &[usize])] = &[
    ("add_vectors", &[1 << 20]),
    ("softmax", &[4096, 1024]),
    ("layer_norm", &[4096, 1024]),
    ("matmul", &[1024, 1024, 1024]),
    ("row_gather", &[1000, 256, 64]),
];

pub fn command(args: &[String]) -> Result<String, String> {
    match args.first().map(String::as_str) {
        Some("build") => {
            let out = match args.get(1).map(String::as_str) {
                Some("-o") => args.get(2).ok_or("-o needs a file")?.clone(),
                None => "tpukit-host.tpkb".to_string(),
                Some(other) => return Err(format!("bundle build: unknown option `{other}`")),
            };
            build(Path::new(&out))
        }
        _ => Err("usage: tpukit bundle build [-o FILE]".into()),
    }
}

fn build(path: &Path) -> Result<String, String> {
    let host = HostTarget::detect();
    let options = cpu::options_for(&host, false);
    let jobs: Vec<(&str, &[usize], DType)> = BUNDLED
        .iter()
        .flat_map(|&(name, shape)| [DType::F32, DType::BF16].map(|d| (name, shape, d)))
        .collect();
    let mut entries = Vec::new();
    for (i, &(name, shape, dtype)) in jobs.iter().enumerate() {
        let clock = Instant::now();
        let entry = find(name).ok_or(format!("no catalog kernel `{name}`"))?;
        let inst = entry.instantiate(shape, dtype).map_err(|e| e.to_string())?;
        let artifact =
            cpu::compile_artifact(&inst.kernel, &host, options).map_err(|e| e.to_string())?;
        let lowered = lower(
            &inst.kernel,
            &Options {
                bindings: inst.bindings.clone(),
                ..Options::default()
            },
        )
        .map_err(|e| e.to_string())?;
        entries.push(bundle::BundleEntry {
            key: CacheKey::new(&inst.kernel, &host, options),
            name: format!("{name} {dtype}"),
            ir_hash: inst.kernel.structural_hash().to_string(),
            artifact,
            tpu_module: Some(lowered.stablehlo),
        });
        eprint!(
            "\r[{}/{}] {name} {dtype}: compiled and lowered in {:.0?}        ",
            i + 1,
            jobs.len(),
            clock.elapsed()
        );
        let _ = std::io::stderr().flush();
    }
    eprintln!();
    bundle::write(path, &host, &entries).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!(
        "wrote {} kernels for {} ({}) to {}\n",
        entries.len(),
        host.cpu,
        host.triple,
        path.display()
    ))
}
