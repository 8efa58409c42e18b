//! Fingerprints the compiled backend's sources (`src/cpu/`) into `TPUKIT_CODEGEN_FINGERPRINT`,
//! which every compilation-cache key and bundle includes: machine code depends on the code
//! generator as much as on the kernel, and a changed generator must never be served code an
//! older one compiled (tpukit's version number does not change between development builds).

use sha2::{Digest, Sha256};
use std::path::Path;

fn main() {
    let root = Path::new("src/cpu");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    collect(root, &mut files);
    files.sort();
    let mut hash = Sha256::new();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        hash.update(f.to_string_lossy().as_bytes());
        hash.update(std::fs::read(f).expect("a readable source file"));
    }
    let hex: String = hash
        .finalize()
        .iter()
        .take(12)
        .map(|b| format!("{b:02x}"))
        .collect();
    println!("cargo:rustc-env=TPUKIT_CODEGEN_FINGERPRINT={hex}");
}

fn collect(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("a readable source directory") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}
