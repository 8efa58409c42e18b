//! `tpukit bundle build|inspect`: precompiled kernels for this host, in one file.
//!
//! `build` compiles every kernel the sources ship (`crate::SOURCES`: each catalog entry at
//! its shipped shape, and every kernel every tpuBLAS operator declares), f32 and bf16, for
//! the host CPU (or, with `--portable`, for the x86-64-v3 baseline any AVX2 machine runs:
//! the bundle a wheel ships), lowers it to its StableHLO/Mosaic module, and, where libtpu is installed,
//! compiles that module for v5e and v6e (through `python -m tpukit.tpu`, with `TPUKIT_PYTHON` or `python3`). The runtime loads
//! the bundle with `TPUKIT_BUNDLE=FILE` (see `tpukit::runtime::bundle`); the Python
//! package loads the one it ships at import.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tpukit::dsl::{Bindings, DType, Kernel};
use tpukit::prelude::{ArraySpec, CallSpec, tpu_kernel};
use tpukit::runtime::bundle;
use tpukit::runtime::cpu::{self, CacheKey, HostTarget};
use tpukit_mosaic::{Options, lower};

use crate::usage;

pub fn command(args: &[String]) -> Result<String, String> {
    match args.first().map(String::as_str) {
        Some("build") => {
            let mut out = PathBuf::from("tpukit-host.tpkb");
            let mut tpu = true;
            let mut target = HostTarget::detect();
            let mut it = args[1..].iter();
            while let Some(a) = it.next() {
                match a.as_str() {
                    "-o" => out = it.next().ok_or("-o needs a file")?.into(),
                    "--no-tpu" => tpu = false,
                    "--portable" => target = HostTarget::portable(),
                    other => {
                        return Err(format!(
                            "bundle build: unknown option `{other}`\n{}",
                            usage::BUNDLE_BUILD
                        ));
                    }
                }
            }
            build(&out, &target, tpu)
        }
        Some("inspect") => match args.get(1) {
            Some(path) => inspect(Path::new(path)),
            None => Err(usage::BUNDLE_INSPECT.into()),
        },
        _ => Err(usage::BUNDLE.into()),
    }
}

/// One kernel to bundle, with the bindings its TPU module is lowered for.
struct Job {
    name: String,
    kernel: Kernel,
    bindings: Bindings,
}

/// The bundle's warm-up entry (see `bundle::WARM_UP`): a copy of one element.
#[tpu_kernel]
fn warm_up(x: In, o: Out) {
    o[..] = x[..];
}

/// Every kernel to bundle, each once.
fn jobs() -> Result<Vec<Job>, String> {
    let spec = CallSpec {
        inputs: vec![ArraySpec::new(DType::F32, [1usize])],
        outputs: vec![ArraySpec::new(DType::F32, [1usize])],
        ..Default::default()
    };
    let mut jobs = vec![Job {
        name: bundle::WARM_UP.to_string(),
        kernel: warm_up(&spec).map_err(|e| e.to_string())?,
        bindings: Bindings::new(),
    }];
    // Each kernel's CPU code serves every shape; its TPU module is lowered at the bindings the
    // source ships it with (a TPU kernel is specialised to shapes).
    for dtype in [DType::F32, DType::BF16] {
        for source in crate::SOURCES {
            for k in source.kernels(dtype).map_err(|e| e.to_string())? {
                jobs.push(Job {
                    name: format!("{} {} {dtype}", k.id, k.instance.kernel.name),
                    kernel: k.instance.kernel,
                    bindings: k.instance.bindings,
                });
            }
        }
    }
    Ok(jobs)
}

fn build(path: &Path, host: &HostTarget, tpu: bool) -> Result<String, String> {
    let options = cpu::options_for(host, false);
    let jobs = jobs()?;
    let mut entries = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let clock = Instant::now();
        let artifact =
            cpu::compile_artifact(&job.kernel, host, options).map_err(|e| e.to_string())?;
        let options_tpu = Options {
            bindings: job.bindings.clone(),
            ..Options::default()
        };
        let lowered = lower(&job.kernel, &options_tpu).map_err(|e| format!("{}: {e}", job.name))?;
        entries.push(bundle::BundleEntry {
            key: CacheKey::new(&job.kernel, host, options),
            name: job.name.clone(),
            ir_hash: job.kernel.structural_hash().to_string(),
            artifact,
            tpu: Some(bundle::TpuArtifact {
                bindings: job.bindings.clone(),
                module: lowered.stablehlo,
                executables: Vec::new(),
            }),
        });
        let what = format!(
            "{}: compiled and lowered in {:.0?}",
            job.name,
            clock.elapsed()
        );
        progress(i + 1, jobs.len(), &what);
    }
    let tpu_note = if tpu {
        match crate::tpu::executables(&mut entries) {
            Ok(n) => format!(
                ", {n} TPU executables ({})",
                tpukit_mosaic::TOPOLOGIES.join(", ")
            ),
            Err(e) => {
                eprintln!("tpukit: no TPU executables in the bundle: {e}");
                String::new()
            }
        }
    } else {
        String::new()
    };
    bundle::write(path, host, &entries).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(format!(
        "wrote {} kernels for {} ({}){tpu_note} to {}\n",
        entries.len(),
        host.cpu,
        host.triple,
        path.display()
    ))
}

/// Shows `[done/total] what`: rewritten in place on a terminal, else a line every 10%.
pub(crate) fn progress(done: usize, total: usize, what: &str) {
    use std::io::IsTerminal as _;
    if std::io::stderr().is_terminal() {
        eprint!("\r{:<100.100}", format!("[{done}/{total}] {what}"));
        if done == total {
            eprintln!();
        }
        let _ = std::io::stderr().flush();
    } else if done == total || done.is_multiple_of(total.div_ceil(10)) {
        eprintln!("[{done}/{total}] {what}");
    }
}

/// `tpukit bundle inspect FILE`: the bundle's target and entries, every checksum checked.
fn inspect(path: &Path) -> Result<String, String> {
    use std::fmt::Write as _;
    let info = bundle::inspect(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let h = &info.header;
    let host = HostTarget::detect();
    let usable = match h.refusal(&host) {
        None if h.is_for(&host) => "usable on this host".to_string(),
        None => "usable on this host, which has every feature its code uses".to_string(),
        Some(why) => format!("not usable on this host: {why}"),
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}: tpukit {}, {} `{}`, {} kernels ({usable})",
        path.display(),
        h.version,
        h.triple,
        h.cpu,
        info.entries.len(),
    );
    for e in &info.entries {
        let tpu = match &e.tpu {
            None => "no TPU module".to_string(),
            Some(t) => {
                let bindings: Vec<String> =
                    t.bindings.iter().map(|(s, v)| format!("{s}={v}")).collect();
                let exes: Vec<String> = t
                    .executables
                    .iter()
                    .map(|(topology, b)| format!("{topology} {} KiB", b.len() / 1024))
                    .collect();
                format!(
                    "TPU module {} KiB at {}; executables: {}",
                    t.module.len() / 1024,
                    bindings.join(","),
                    if exes.is_empty() {
                        "none".into()
                    } else {
                        exes.join(", ")
                    }
                )
            }
        };
        let _ = writeln!(
            out,
            "  {:<58}  object {:>4} KiB  {tpu}",
            e.name,
            e.object_bytes / 1024
        );
    }
    Ok(out)
}
