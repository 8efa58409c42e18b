//! TPU executables for a bundle: every entry's StableHLO module compiled by libtpu for the
//! bundled topologies, in one Python process (`python -m tpukit.tpu`, with `TPUKIT_PYTHON` or
//! `python3`): libtpu ships as a Python wheel, and the package's compile-only client drives it.

use crate::bundle::progress;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use tpukit::runtime::bundle::BundleEntry;
use tpukit_mosaic::TOPOLOGIES;

/// Compiles every entry's TPU module with libtpu for [`TOPOLOGIES`] (one Python process,
/// `python -m tpukit.tpu`) and adds the executables. Returns how many were added; an error
/// says why none could be (no Python, no libtpu). A module libtpu rejects is reported and
/// bundled without executables.
pub fn executables(entries: &mut [BundleEntry]) -> Result<usize, String> {
    let dir = std::env::temp_dir().join(format!("tpukit-bundle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let result = compile_in(&dir, entries);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn compile_in(dir: &Path, entries: &mut [BundleEntry]) -> Result<usize, String> {
    let mut files = Vec::new();
    for (i, e) in entries.iter().enumerate() {
        let file = dir.join(format!("{i:05}.mlir"));
        let module = e.tpu.as_ref().map_or("", |t| t.module.as_str());
        std::fs::write(&file, module).map_err(|e| e.to_string())?;
        files.push(file);
    }
    let python = std::env::var("TPUKIT_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = Command::new(&python);
    cmd.args(["-m", "tpukit.tpu", "--out"]).arg(dir);
    for t in TOPOLOGIES {
        cmd.args(["--topology", t]);
    }
    let mut child = cmd
        .args(&files)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {python}: {e}"))?;
    let total = files.len() * TOPOLOGIES.len();
    let mut done = 0;
    let mut failures = Vec::new();
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line.map_err(|e| e.to_string())?;
        done += 1;
        if line.contains("\"ok\": false") {
            failures.push(line);
        }
        progress(done, total, "compiled for TPU with libtpu");
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    if done == 0 || output.status.code() == Some(2) {
        let why = failures.first().cloned().unwrap_or_else(|| {
            String::from_utf8_lossy(&output.stderr)
                .lines()
                .last()
                .unwrap_or("no output")
                .to_string()
        });
        return Err(format!("{python} -m tpukit.tpu: {why}"));
    }
    for f in &failures {
        eprintln!("tpukit: libtpu rejected a bundled module: {f}");
    }
    let mut added = 0;
    for (e, file) in entries.iter_mut().zip(&files) {
        let Some(tpu) = e.tpu.as_mut() else { continue };
        for t in TOPOLOGIES {
            let exe = dir.join(format!(
                "{}.{}.tpu",
                file.file_stem().expect("a file").to_string_lossy(),
                t.replace(':', "-")
            ));
            if let Ok(bytes) = std::fs::read(&exe) {
                tpu.executables.push((t.to_string(), bytes));
                added += 1;
            }
        }
    }
    Ok(added)
}
