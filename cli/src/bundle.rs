//! `tpukit bundle build|inspect`: precompiled kernels for this host, in one file.
//!
//! `build` compiles every shipped kernel (each catalog entry at its bundle shapes and every
//! tpuBLAS kernel, f32 and bf16) for the host CPU, lowers it to its StableHLO/Mosaic module, and writes a bundle the
//! runtime loads with `TPUKIT_BUNDLE=FILE` (see `tpukit::runtime::cpu::bundle`).

use std::io::Write as _;
use std::path::Path;
use std::time::Instant;
use tpukit::catalog::find;
use tpukit::dsl::{Bindings, DType, Kernel};
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

/// Every kernel to bundle: (name, kernel, bindings to lower it with).
fn jobs() -> Result<Vec<(String, Kernel, Bindings)>, String> {
    let mut jobs = Vec::new();
    for dtype in [DType::F32, DType::BF16] {
        for &(name, shape) in BUNDLED {
            let entry = find(name).ok_or(format!("no catalog kernel `{name}`"))?;
            let inst = entry.instantiate(shape, dtype).map_err(|e| e.to_string())?;
            jobs.push((format!("{name} {dtype}"), inst.kernel, inst.bindings));
        }
        // Each tpuBLAS operator's kernel at a problem size off its blocks (symbolic extents
        // make it serve every other size; static ones, such as a row length, are part of the
        // kernel).
        for op in tpukit_blas::ops() {
            let shape = vec![300; op.shape.len()];
            match op.instantiate(&shape, dtype) {
                Ok(inst) => jobs.push((format!("{} {dtype}", op.name), inst.kernel, inst.bindings)),
                Err(e) => eprintln!("tpukit: skipping {} {dtype} in the bundle: {e}", op.name),
            }
        }
    }
    Ok(jobs)
}

fn build(path: &Path) -> Result<String, String> {
    let host = HostTarget::detect();
    let options = cpu::options_for(&host, false);
    let jobs = jobs()?;
    let mut entries = Vec::new();
    for (i, (name, kernel, bindings)) in jobs.iter().enumerate() {
        let clock = Instant::now();
        let artifact = cpu::compile_artifact(kernel, &host, options).map_err(|e| e.to_string())?;
        let lowered = lower(
            kernel,
            &Options {
                bindings: bindings.clone(),
                ..Options::default()
            },
        )
        .map_err(|e| e.to_string())?;
        entries.push(bundle::BundleEntry {
            key: CacheKey::new(kernel, &host, options),
            name: name.clone(),
            ir_hash: kernel.structural_hash().to_string(),
            artifact,
            tpu_module: Some(lowered.stablehlo),
        });
        eprint!(
            "\r[{}/{}] {name}: compiled and lowered in {:.0?}        ",
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
