//! The disk cache stays within `TPUKIT_CACHE_MAX_BYTES` through real launches: entries of
//! kernels compiled earlier are evicted, the latest stay, results stay right; lock and
//! temporary files left by dead processes are removed. (Which entries go first, by last use,
//! is unit-tested in `runtime/src/cpu/eviction.rs`.)
//!
//! One test per binary: it sets the process's environment.

mod common;

use std::fs::{self, File};
use std::path::Path;
use std::time::{Duration, SystemTime};
use tpukit_dsl::*;
use tpukit_runtime::{Device, HostArray, cpu, launch};

/// `o = x + c` over (8, 128) blocks: one cache key per `c`.
fn add_constant(c: f32) -> Kernel {
    let spec = common::rows_spec();
    let mut b = KernelBuilder::new("bounded", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let cv = b.full(c as f64, DType::F32, &[8, 128]);
    let s = b.binary(BinaryOp::Add, xv, cv).unwrap();
    b.store(o, &[], s).unwrap();
    b.finish().unwrap()
}

fn entries(dir: &Path) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "tpkc"))
        .map(|e| (e.path().display().to_string(), e.metadata().unwrap().len()))
        .collect();
    v.sort();
    v
}

/// A file at `dir/name`, last modified an hour ago.
fn old_file(dir: &Path, name: &str) {
    let path = dir.join(name);
    fs::write(&path, b"").unwrap();
    let f = File::options().append(true).open(&path).unwrap();
    f.set_modified(SystemTime::now() - Duration::from_secs(3600))
        .unwrap();
}

#[test]
fn the_disk_cache_stays_within_its_bound() {
    let dir = std::env::temp_dir().join(format!("tpukit-bound-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    // SAFETY: this binary's only test; no other thread reads the environment yet.
    unsafe { std::env::set_var("TPUKIT_CACHE_DIR", &dir) };
    let data: Vec<f64> = (0..20 * 128).map(|i| i as f64).collect();
    let x = HostArray::from_f64(DType::F32, &[20, 128], &data);
    let run = |c: f32| {
        let out = launch(&add_constant(c), Device::Cpu, &[&x]).unwrap();
        let want: Vec<f64> = (0..20 * 128).map(|i| (i as f32 + c) as f64).collect();
        assert_eq!(out[0].to_f64_vec(), want, "x + {c}");
    };
    run(0.0);
    let one = entries(&dir)[0].1;
    // Room for two and a half entries: at most two stay (they are about the same size).
    let max = one * 5 / 2;
    unsafe { std::env::set_var("TPUKIT_CACHE_MAX_BYTES", max.to_string()) };
    old_file(&dir, "dead.lock");
    old_file(&dir, "dead.tmp.1.0");
    for c in 1..6 {
        run(c as f32);
        let now = entries(&dir);
        let total: u64 = now.iter().map(|e| e.1).sum();
        assert!(total <= max, "{total} bytes cached, bound {max}: {now:?}");
        assert!(!now.is_empty());
    }
    assert_eq!(entries(&dir).len(), 2, "{:?}", entries(&dir));
    assert!(!dir.join("dead.lock").exists() && !dir.join("dead.tmp.1.0").exists());
    assert_eq!(cpu::stats().compiled, 6);
    fs::remove_dir_all(&dir).unwrap();
}
