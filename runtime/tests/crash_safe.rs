//! Crash-safe artifacts: processes writing cache entries and bundles are killed (SIGKILL) at
//! random moments while reader processes read the same files in a loop. A reader must never
//! be served a torn or partial file: every cache entry it finds reads back whole
//! (`cpu::read_entry`, what the disk cache serves) and every bundle it finds passes
//! `bundle::inspect` (every checksum), whatever moment the writers died at.
//!
//! Writers write large artifacts (a few MiB) so that kills often land mid-write. Rounds (one
//! writer started and killed each) are `TPUKIT_KILL_ROUNDS`: 12 by default (a few seconds);
//! `make fuzz` runs more. The writer and reader roles are ignored tests this binary re-runs
//! as child processes.

mod common;

use rand::Rng;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tpukit_dsl::*;
use tpukit_runtime::bundle;
use tpukit_runtime::cpu::{self, Artifact, CacheKey, HostTarget};

/// Keys the cache writer cycles through (a few, so that writes often replace an entry).
const KEYS: usize = 3;

fn rounds() -> usize {
    std::env::var("TPUKIT_KILL_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12)
}

/// `o = x * 2` over (8, 128) blocks, compiled once: the artifact the writers enlarge.
fn artifact() -> Artifact {
    let spec = common::rows_spec();
    let mut b = KernelBuilder::new("crash_safe", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let s = b.binary(BinaryOp::Add, xv, xv).unwrap();
    b.store(o, &[], s).unwrap();
    let k = b.finish().unwrap();
    let host = HostTarget::detect();
    cpu::compile_artifact(&k, &host, cpu::options_for(&host, false)).unwrap()
}

/// `base` with `n` MiB of filler appended to its object, each byte `fill`.
fn enlarged(base: &Artifact, n: usize, fill: u8) -> Artifact {
    let mut a = base.clone();
    a.object.extend(std::iter::repeat_n(fill, n << 20));
    a
}

/// Tells the parent the writer is set up: the kill is timed from here.
fn ready() {
    println!("writer ready");
    std::io::stdout().flush().unwrap();
}

/// Waits until the writer `w` says it is ready (or has died).
fn wait_ready(w: &mut Child) {
    let out = w.stdout.as_mut().expect("piped");
    let mut seen = Vec::new();
    let mut byte = [0u8];
    while !String::from_utf8_lossy(&seen).contains("writer ready") {
        if out.read(&mut byte).unwrap_or(0) == 0 {
            return;
        }
        seen.push(byte[0]);
    }
}

fn dir() -> PathBuf {
    PathBuf::from(std::env::var("CRASH_SAFE_DIR").expect("CRASH_SAFE_DIR"))
}

#[test]
#[ignore = "a child role of kill_nine_writers_never_leave_a_file_readers_are_served"]
fn cache_writer() {
    let (dir, base) = (dir(), artifact());
    let mut rng = rand::rng();
    ready();
    for i in 0.. {
        let key = CacheKey(format!("{:064x}", i % KEYS));
        let a = enlarged(&base, rng.random_range(1..4), i as u8);
        cpu::store(&dir.join("cache"), &key, &a).unwrap();
    }
}

#[test]
#[ignore = "a child role of kill_nine_writers_never_leave_a_file_readers_are_served"]
fn bundle_writer() {
    let (dir, base, host) = (dir(), artifact(), HostTarget::detect());
    let mut rng = rand::rng();
    ready();
    for i in 0u64.. {
        let entry = bundle::BundleEntry {
            key: CacheKey(format!("{i:064x}")),
            name: "crash_safe".into(),
            ir_hash: "0".repeat(64),
            artifact: enlarged(&base, rng.random_range(1..4), i as u8),
            tpu: None,
        };
        bundle::write(&dir.join("kernels.tpkb"), &host, &[entry]).unwrap();
    }
}

/// Reads every entry and the bundle until `stop` appears; exits non-zero on a torn file.
#[test]
#[ignore = "a child role of kill_nine_writers_never_leave_a_file_readers_are_served"]
fn reader() {
    let dir = dir();
    let (mut entries, mut bundles) = (0usize, 0usize);
    while !dir.join("stop").exists() {
        if let Ok(listing) = std::fs::read_dir(dir.join("cache")) {
            for item in listing.flatten() {
                let path = item.path();
                if path.extension().is_some_and(|e| e == "tpkc") {
                    // Evicted or replaced between the listing and the read: not served.
                    let Ok(bytes) = std::fs::read(&path) else {
                        continue;
                    };
                    if let Err(e) = cpu::read_entry(&bytes) {
                        panic!("served a torn cache entry {} ({e})", path.display());
                    }
                    entries += 1;
                }
            }
        }
        // Once written, the bundle's path always names a whole bundle (renames replace it).
        let path = dir.join("kernels.tpkb");
        if path.exists() {
            if let Err(e) = bundle::inspect(&path) {
                panic!("served a torn bundle ({e})");
            }
            bundles += 1;
        }
    }
    println!("reader: {entries} entries and {bundles} bundles read whole");
}

/// Removes the dead writers' temporary files (the cache would remove them once stale: a
/// long run would otherwise fill the disk) and returns how many there were: writes the kill
/// interrupted.
fn remove_temporary_files(dir: &Path) -> usize {
    let mut n = 0;
    for d in [dir.to_path_buf(), dir.join("cache")] {
        for item in std::fs::read_dir(d).unwrap().flatten() {
            if item.file_name().to_string_lossy().contains(".tmp.") {
                n += usize::from(std::fs::remove_file(item.path()).is_ok());
            }
        }
    }
    n
}

fn spawn(role: &str, dir: &Path) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            role,
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CRASH_SAFE_DIR", dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Each round starts a cache writer and a bundle writer and kills both with SIGKILL a random
/// 0–150 ms after they are set up (a write takes a few ms: kills land before, during and
/// between writes); two readers run throughout and must finish cleanly.
#[test]
fn kill_nine_writers_never_leave_a_file_readers_are_served() {
    let dir = std::env::temp_dir().join(format!("tpukit-crash-safe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("cache")).unwrap();
    let readers: Vec<Child> = (0..2).map(|_| spawn("reader", &dir)).collect();
    let mut rng = rand::rng();
    let started = Instant::now();
    let mut interrupted = 0;
    for _ in 0..rounds() {
        let mut writers = [spawn("cache_writer", &dir), spawn("bundle_writer", &dir)];
        for w in &mut writers {
            wait_ready(w);
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..150)));
        for w in &mut writers {
            w.kill().unwrap();
            let status = w.wait().unwrap();
            // Killed, or exited by itself: only a writer's own failure (exit code 101) counts.
            assert_ne!(status.code(), Some(101), "a writer failed: {status:?}");
        }
        interrupted += remove_temporary_files(&dir);
    }
    std::fs::write(dir.join("stop"), b"").unwrap();
    for r in readers {
        let out = r.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "a reader failed:\n{text}");
        let report = text
            .find("reader:")
            .map(|at| text[at..].lines().next().unwrap_or(""));
        eprintln!("{}", report.unwrap_or("reader: no report"));
    }
    // Writers died mid-write: their temporary files may remain, never under an entry's name.
    for item in std::fs::read_dir(dir.join("cache")).unwrap().flatten() {
        let bytes = std::fs::read(item.path()).unwrap();
        if item.path().extension().is_some_and(|e| e == "tpkc") {
            cpu::read_entry(&bytes).unwrap();
        }
    }
    eprintln!(
        "{} rounds in {:?}, {interrupted} writes interrupted by the kill",
        rounds(),
        started.elapsed()
    );
    // The kills must land mid-write at times, or the test shows nothing.
    assert!(
        rounds() < 10 || interrupted > 0,
        "no kill interrupted a write"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
