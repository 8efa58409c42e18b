//! The compilation cache and bundles, across processes: each test runs this test binary's
//! `child` as separate processes pointed at one cache directory or bundle, and checks where
//! their compiled kernels came from (`tpukit::runtime::cpu::stats`).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tpukit::catalog;
use tpukit::prelude::*;
use tpukit::runtime::bundle;
use tpukit::runtime::cpu::{self, CacheKey, HostTarget};

/// The kernels every child runs: (catalog name, shape), each in f32 and bf16.
const KERNELS: &[(&str, &[usize])] = &[("add_vectors", &[3000]), ("softmax", &[37, 128])];

fn kernels() -> Vec<catalog::Instance> {
    let mut out = Vec::new();
    for &(name, shape) in KERNELS {
        for dtype in [DType::F32, DType::BF16] {
            out.push(
                catalog::find(name)
                    .unwrap()
                    .instantiate(shape, dtype)
                    .unwrap(),
            );
        }
    }
    out
}

/// Runs every kernel on the CPU, checks it against the interpreter, prints the cache stats.
#[test]
#[ignore = "run as a child process by the other tests in this file"]
fn child() {
    run_and_print_stats();
}

/// [`child`], after truncating the bundle `TPUKIT_BUNDLE` names to half its length in place,
/// once it is loaded (by the warm-up): no entry may be read through stale offsets.
#[test]
#[ignore = "run as a child process by the other tests in this file"]
fn child_truncating_its_bundle() {
    cpu::warm_up().unwrap();
    let path = std::env::var("TPUKIT_BUNDLE").unwrap();
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let len = file.metadata().unwrap().len();
    file.set_len(len / 2).unwrap();
    drop(file);
    run_and_print_stats();
}

fn run_and_print_stats() {
    for inst in kernels() {
        let k = &inst.kernel;
        let inputs: Vec<HostArray> = inst
            .arguments()
            .into_iter()
            .map(|(dtype, shape)| random(&mut rng(1), dtype, &shape, -1.0, 1.0).0)
            .collect();
        let refs: Vec<&HostArray> = inputs.iter().collect();
        let got = launch(k, Device::Cpu, &refs).unwrap();
        let want = launch(k, Device::Interpret, &refs).unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert_close(&k.name, &g.to_f64_vec(), &w.to_f64_vec(), 1e-2);
        }
    }
    let s = cpu::stats();
    println!(
        "STATS {} {} {} {}",
        s.compiled, s.disk_hits, s.bundle_hits, s.corrupt
    );
}

/// Runs `n` children at once (all started before any is waited for) with `env`; returns
/// each one's `[compiled, disk hits, bundle hits, corrupt]`.
fn children(n: usize, env: &[(&str, &Path)]) -> Vec<[usize; 4]> {
    children_running("child", n, env, None)
}

/// [`children`], each running the ignored test `test`, in `cwd` if given.
fn children_running(
    test: &str,
    n: usize,
    env: &[(&str, &Path)],
    cwd: Option<&Path>,
) -> Vec<[usize; 4]> {
    let exe = std::env::current_exe().unwrap();
    let procs: Vec<_> = (0..n)
        .map(|_| {
            let mut c = Command::new(&exe);
            if let Some(cwd) = cwd {
                c.current_dir(cwd);
            }
            c.args([
                "--ignored",
                "--exact",
                test,
                "--nocapture",
                "--test-threads=1",
            ]);
            c.env_remove("TPUKIT_CACHE_DIR").env_remove("TPUKIT_BUNDLE");
            for (k, v) in env {
                c.env(k, v);
            }
            c.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    procs
        .into_iter()
        .map(|p| {
            let out = p.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "child failed:\n{text}\n{err}");
            // libtest prints `test child ... ` on the same line.
            let at = text.find("STATS ").expect("stats line");
            let line = text[at + 6..].lines().next().unwrap_or_default();
            let v: Vec<usize> = line.split(' ').map(|x| x.parse().unwrap()).collect();
            [v[0], v[1], v[2], v[3]]
        })
        .collect()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tpukit-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tpkc"))
        .collect();
    v.sort();
    v
}

#[test]
fn damaged_cache_entries_are_misses_and_get_replaced() {
    let dir = temp_dir("cache");
    let n = kernels().len();
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    assert_eq!(s, [n, 0, 0, 0], "a cold cache compiles every kernel");
    assert_eq!(entries(&dir).len(), n, "one entry per kernel");
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    assert_eq!(s, [0, n, 0, 0], "a warm cache compiles nothing");

    // A damaged entry is a miss: recompiled once, rewritten, reported.
    let victim = &entries(&dir)[0];
    let mut bytes = std::fs::read(victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0xff;
    std::fs::write(victim, &bytes).unwrap();
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    assert_eq!(
        s,
        [1, n - 1, 0, 1],
        "compiled, disk hits, bundle hits, corrupt"
    );
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    assert_eq!(s, [0, n, 0, 0], "the damaged entry was replaced");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn racing_processes_lose_nothing() {
    let dir = temp_dir("race");
    let n = kernels().len();
    let stats = children(4, &[("TPUKIT_CACHE_DIR", &dir)]);
    let compiled: usize = stats.iter().map(|s| s[0]).sum();
    let hits: usize = stats.iter().map(|s| s[1]).sum();
    assert_eq!(
        compiled, n,
        "each key compiled exactly once across processes: {stats:?}"
    );
    assert_eq!(compiled + hits, 4 * n);
    assert_eq!(entries(&dir).len(), n);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TPU artifact as `tpukit bundle build` stores it (the bytes are opaque to the bundle).
fn tpu_artifact(bindings: &tpukit::dsl::Bindings) -> bundle::TpuArtifact {
    bundle::TpuArtifact {
        bindings: bindings.clone(),
        module: "module @jit_kernel {}".into(),
        executables: vec![
            ("v5e:2x2".into(), vec![5; 3000]),
            ("v6e:2x2".into(), vec![6; 2000]),
        ],
    }
}

/// A bundle of every child kernel, compiled and keyed for `target`.
fn build_bundle(path: &Path, target: &HostTarget) {
    let entries: Vec<bundle::BundleEntry> = kernels()
        .into_iter()
        .map(|inst| {
            let k = inst.kernel;
            let options = cpu::options_for(target, false);
            bundle::BundleEntry {
                key: CacheKey::new(&k, target, options),
                name: k.name.clone(),
                ir_hash: k.structural_hash().to_string(),
                artifact: cpu::compile_artifact(&k, target, options).unwrap(),
                tpu: Some(tpu_artifact(&inst.bindings)),
            }
        })
        .collect();
    bundle::write(path, target, &entries).unwrap();
}

fn tpu_bytes(t: &bundle::TpuArtifact) -> usize {
    t.module.len() + t.executables.iter().map(|(_, b)| b.len()).sum::<usize>()
}

#[test]
fn bundles_serve_first_calls_and_bad_ones_are_refused() {
    let dir = temp_dir("bundle");
    let n = kernels().len();
    let good = dir.join("host.tpkb");
    build_bundle(&good, &HostTarget::detect());
    let s = children(1, &[("TPUKIT_BUNDLE", &good)])[0];
    assert_eq!(
        s,
        [0, 0, n, 0],
        "every kernel from the bundle, none compiled"
    );

    let foreign = dir.join("foreign.tpkb");
    build_bundle(&foreign, &beyond_this_cpu());
    let s = children(1, &[("TPUKIT_BUNDLE", &foreign)])[0];
    assert_eq!(
        s,
        [n, 0, 0, 0],
        "a bundle using a feature this CPU lacks is refused"
    );

    let corrupt = dir.join("corrupt.tpkb");
    let mut bytes = std::fs::read(&good).unwrap();
    bytes[60] ^= 0x01; // inside the checksummed index
    std::fs::write(&corrupt, &bytes).unwrap();
    let s = children(1, &[("TPUKIT_BUNDLE", &corrupt)])[0];
    assert_eq!(s, [n, 0, 0, 0], "a bundle with a bad checksum is refused");

    let damaged_entry = dir.join("damaged-entry.tpkb");
    let mut bytes = std::fs::read(&good).unwrap();
    // Inside the last entry's object code, before its TPU module and executables.
    let last = bytes.len() - 100 - tpu_bytes(&tpu_artifact(&kernels()[0].bindings));
    bytes[last] ^= 0x01;
    std::fs::write(&damaged_entry, &bytes).unwrap();
    let s = children(1, &[("TPUKIT_BUNDLE", &damaged_entry)])[0];
    assert_eq!(s[0] + s[2], n, "a damaged entry is compiled instead: {s:?}");
    assert!(s[0] >= 1, "the damaged entry was not served: {s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// This host with one feature it lacks turned on: code for it may not run here.
fn beyond_this_cpu() -> HostTarget {
    let mut t = HostTarget::detect();
    let lacked = t
        .features
        .split(',')
        .find_map(|f| f.strip_prefix('-'))
        .expect("LLVM lists some feature this CPU lacks")
        .to_string();
    t.features = t
        .features
        .replace(&format!("-{lacked}"), &format!("+{lacked}"));
    t
}

/// The portable (x86-64-v3) bundle a wheel ships serves every kernel on a host with those
/// features, ahead of compiling, and is refused with the features named where they lack;
/// loaded beside a host-tuned bundle, each kernel is served once.
#[test]
fn portable_bundles_serve_hosts_with_their_features() {
    let dir = temp_dir("portable");
    let n = kernels().len();
    let (host, portable) = (HostTarget::detect(), HostTarget::portable());
    assert_eq!(portable.cpu, cpu::PORTABLE_CPU);
    let path = dir.join("x86-64-v3.tpkb");
    build_bundle(&path, &portable);
    let header = bundle::inspect(&path).unwrap().header;
    let s = children(1, &[("TPUKIT_BUNDLE", &path)])[0];
    if host.runs_code_for(&portable) {
        assert_eq!(header.refusal(&host), None);
        assert!(!header.is_for(&host));
        assert_eq!(s, [0, 0, n, 0], "every kernel from the portable bundle");
    } else {
        let why = header.refusal(&host).expect("refused");
        assert!(why.contains("avx2") || why.contains("fma"), "{why}");
        assert_eq!(s, [n, 0, 0, 0], "a CPU without AVX2 compiles");
    }
    // Code for this host runs here; code using one more feature does not, and says which.
    assert!(host.runs_code_for(&host));
    let beyond = beyond_this_cpu();
    assert!(!host.runs_code_for(&beyond));
    let lacked = host.missing(&beyond);
    assert_eq!(lacked.len(), 1);
    let mut foreign = header.clone();
    foreign.features = beyond.features.clone();
    let why = foreign.refusal(&host).expect("refused");
    assert!(why.contains(&format!("lacks {}", lacked[0])), "{why}");
    // Both loaded (the key is per target, so both hold every kernel): each served once.
    let tuned = dir.join("host.tpkb");
    build_bundle(&tuned, &host);
    let both = std::env::join_paths([&tuned, &path]).unwrap();
    let s = children(1, &[("TPUKIT_BUNDLE", Path::new(&both))])[0];
    assert_eq!(s, [0, 0, n, 0]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bundles_keep_tpu_artifacts_and_inspect_checks_every_checksum() {
    let dir = temp_dir("inspect");
    let path = dir.join("host.tpkb");
    build_bundle(&path, &HostTarget::detect());
    let info = bundle::inspect(&path).unwrap();
    assert_eq!(info.entries.len(), kernels().len());
    for (e, inst) in info.entries.iter().zip(kernels()) {
        assert_eq!(e.ir_hash, inst.kernel.structural_hash().to_string());
        assert!(e.object_bytes > 0);
        assert_eq!(e.tpu.as_ref(), Some(&tpu_artifact(&inst.bindings)));
    }
    // The last bytes of the file are the last entry's v6e executable.
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x01;
    std::fs::write(&path, &bytes).unwrap();
    let err = bundle::inspect(&path).unwrap_err();
    assert!(err.contains("checksum mismatch"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bundle cut off anywhere — in its header, its index or its blobs — is refused whole: none
/// of its entries is registered (every kernel compiles, none panics), and loaded after a good
/// bundle it overrides none of the good one's entries.
#[test]
fn truncated_bundles_register_nothing() {
    let dir = temp_dir("truncated");
    let n = kernels().len();
    let good = dir.join("host.tpkb");
    build_bundle(&good, &HostTarget::detect());
    let bytes = std::fs::read(&good).unwrap();
    let cut = dir.join("cut.tpkb");
    for at in [0, 10, 60, bytes.len() / 3, bytes.len() / 2, bytes.len() - 1] {
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let s = children(1, &[("TPUKIT_BUNDLE", &cut)])[0];
        assert_eq!(
            s,
            [n, 0, 0, 0],
            "a bundle cut at byte {at} is refused whole"
        );
    }
    // Cut inside the blob area, after a good bundle: the good one serves every kernel.
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let both = std::env::join_paths([&good, &cut]).unwrap();
    let s = children(1, &[("TPUKIT_BUNDLE", Path::new(&both))])[0];
    assert_eq!(s, [0, 0, n, 0], "the refused bundle overrode the good one");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bundle truncated in place while loaded: its entries fail to read (and compile instead)
/// rather than killing the process with SIGBUS.
#[test]
fn bundles_truncated_while_loaded_are_compiled_around() {
    let dir = temp_dir("truncated-live");
    let n = kernels().len();
    let path = dir.join("host.tpkb");
    build_bundle(&path, &HostTarget::detect());
    let s = children_running(
        "child_truncating_its_bundle",
        1,
        &[("TPUKIT_BUNDLE", &path)],
        None,
    )[0];
    assert_eq!(s[0] + s[2], n, "every kernel ran: {s:?}");
    assert!(s[0] >= 1, "entries past the new end were served: {s:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn files_ending(dir: &Path, ext: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|e| e == ext)
        })
        .count()
}

/// A key's lock held by a process that never lets go (here: this one, as a stopped process
/// would): a child waits [`cpu::LOCK_TIMEOUT`] for it, then compiles in memory; the keys not
/// locked are cached as usual, and their lock files are removed once written.
#[test]
fn a_lock_held_forever_times_out_and_lock_files_are_removed() {
    let dir = temp_dir("lock");
    let n = kernels().len();
    let host = HostTarget::detect();
    let k = &kernels()[0].kernel;
    let key = CacheKey::new(k, &host, cpu::options_for(&host, false));
    let held = std::fs::File::create(dir.join(format!("{}.lock", key.0))).unwrap();
    held.lock().unwrap();
    let start = std::time::Instant::now();
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    let took = start.elapsed();
    assert_eq!(s, [n, 0, 0, 0], "every kernel compiled");
    assert!(
        took >= cpu::LOCK_TIMEOUT,
        "did not wait for the lock: {took:?}"
    );
    assert!(took < cpu::LOCK_TIMEOUT * 6, "waited too long: {took:?}");
    assert_eq!(entries(&dir).len(), n - 1, "the locked key is not cached");
    assert_eq!(
        files_ending(&dir, "lock"),
        1,
        "only the held lock file remains"
    );
    drop(held);
    let s = children(1, &[("TPUKIT_CACHE_DIR", &dir)])[0];
    assert_eq!(
        s,
        [1, n - 1, 0, 0],
        "the key is compiled once its lock is free"
    );
    assert_eq!(
        files_ending(&dir, "lock"),
        0,
        "lock files are removed after use"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `TPUKIT_CACHE_DIR=""` means no disk cache: nothing is written to the current directory.
#[test]
fn an_empty_cache_dir_means_no_disk_cache() {
    let dir = temp_dir("empty-dir");
    let n = kernels().len();
    let s = children_running(
        "child",
        1,
        &[("TPUKIT_CACHE_DIR", Path::new(""))],
        Some(&dir),
    )[0];
    assert_eq!(s, [n, 0, 0, 0]);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        0,
        "files written to the cwd"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
