//! Fuzzing the readers of bytes from disk: bundles (`bundle::inspect`, which checks every
//! checksum, and `bundle::register`, what `TPUKIT_BUNDLE` uses) and compiled artifacts as
//! cache entries and bundle blobs hold them (`Artifact::decode`), and whole disk-cache
//! entries as read from their files (`cpu::read_entry`). Mutated bytes of a real
//! small bundle — byte flips, truncations, extensions — are refused or loaded, never a panic.
//!
//! The case count is `TPUKIT_FUZZ_CASES` (default 256, a few seconds in a debug build);
//! `make fuzz` runs 1,000,000.

use proptest::prelude::*;
use proptest::test_runner::Config;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use tpukit_dsl::*;
use tpukit_runtime::bundle;
use tpukit_runtime::cpu::{self, Artifact, CacheKey, HostTarget};

fn config() -> Config {
    let cases = std::env::var("TPUKIT_FUZZ_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// `o = x + y` over (8, 128) blocks: a kernel small enough to compile once per test binary.
fn add() -> Kernel {
    let rows = || {
        ArraySpec::new(DType::F32, [Dim::sym("m"), Dim::Static(128)])
            .blocked([8, 128], [grid(0), 0.into()])
    };
    let spec = CallSpec {
        grid: vec![GridAxis::parallel(Extent::cdiv("m", 8))],
        inputs: vec![rows(), rows()],
        outputs: vec![rows()],
        ..Default::default()
    };
    let mut b = KernelBuilder::new("fuzz_add", &spec).unwrap();
    let x = b.declare(Role::Input, "x").unwrap();
    let y = b.declare(Role::Input, "y").unwrap();
    let o = b.declare(Role::Output, "o").unwrap();
    let xv = b.load(x, &[]).unwrap();
    let yv = b.load(y, &[]).unwrap();
    let s = b.binary(BinaryOp::Add, xv, yv).unwrap();
    b.store(o, &[], s).unwrap();
    b.finish().unwrap()
}

/// The artifact of [`add`] and the bytes of a bundle holding it (with a TPU entry).
fn originals() -> &'static (Artifact, Vec<u8>) {
    static ORIGINALS: OnceLock<(Artifact, Vec<u8>)> = OnceLock::new();
    ORIGINALS.get_or_init(|| {
        let k = add();
        let host = HostTarget::detect();
        let options = cpu::options_for(&host, false);
        let artifact = cpu::compile_artifact(&k, &host, options).unwrap();
        let entry = bundle::BundleEntry {
            key: CacheKey::new(&k, &host, options),
            name: k.name.clone(),
            ir_hash: k.structural_hash().to_string(),
            artifact: artifact.clone(),
            tpu: Some(bundle::TpuArtifact {
                bindings: Bindings::default(),
                module: "module @jit_kernel {}".into(),
                executables: vec![("v5e:2x2".into(), vec![5; 64])],
            }),
        };
        let path = scratch("original");
        bundle::write(&path, &host, &[entry]).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        (artifact, bytes)
    })
}

/// A fresh file name under the test's target directory.
fn scratch(what: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fuzz-artifacts");
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(format!("{what}-{}-{n}.tpkb", std::process::id()))
}

/// One edit of a byte string; positions are taken modulo its length.
#[derive(Clone, Debug)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Extend(Vec<u8>),
    /// Overwrites 8 bytes with a little-endian length or offset: where a reader trusts one.
    Word(usize, u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let word = prop_oneof![
        any::<u64>(),
        Just(u64::MAX),
        Just(0),
        Just(1 << 32),
        Just(i64::MAX as u64)
    ];
    prop_oneof![
        (any::<usize>(), 1u8..=255).prop_map(|(i, b)| Mutation::Flip(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..64).prop_map(Mutation::Extend),
        (any::<usize>(), word).prop_map(|(i, w)| Mutation::Word(i, w)),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len().max(1);
    match m {
        Mutation::Flip(i, b) => {
            if !bytes.is_empty() {
                bytes[i % n] ^= b;
            }
        }
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::Extend(tail) => bytes.extend_from_slice(tail),
        Mutation::Word(i, w) => {
            if bytes.len() >= 8 {
                let at = i % (bytes.len() - 7);
                bytes[at..at + 8].copy_from_slice(&w.to_le_bytes());
            }
        }
    }
}

/// Runs `f`; a panic saves `bytes` for reproduction and fails the test.
fn no_panic<T>(what: &str, bytes: &[u8], f: impl FnOnce() -> T) -> T {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(v) => v,
        Err(_) => {
            let path = scratch(&format!("panic-{what}"));
            std::fs::write(&path, bytes).unwrap();
            panic!("{what} panicked; input saved to {}", path.display());
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_bundles_are_refused_or_loaded(
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = originals().1.clone();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let path = scratch("mutated");
        std::fs::write(&path, &bytes).unwrap();
        let inspected = no_panic("inspect", &bytes, || bundle::inspect(&path));
        // A registered bundle keeps its file open for the process's life (and `register`
        // checks less than `inspect`, so many damaged ones load): after 1000 loaded, a long
        // `make fuzz` stops registering rather than run out of files.
        static LOADED: AtomicUsize = AtomicUsize::new(0);
        if LOADED.load(Ordering::Relaxed) < 1000 {
            let registered = no_panic("register", &bytes, || bundle::register(&path));
            if registered {
                LOADED.fetch_add(1, Ordering::Relaxed);
            }
            if inspected.is_ok() {
                prop_assert!(registered, "inspect accepted what register refused");
            }
        }
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn mutated_artifacts_are_refused_or_decoded(
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let mut bytes = originals().0.encode();
        for m in &mutations {
            apply(&mut bytes, m);
        }
        let _ = no_panic("decode", &bytes, || Artifact::decode(&bytes).map(|a| a.object.len()));
    }

    /// The bytes of a disk-cache entry as the cache reads them from its file (the sealed
    /// container: magic, format, checksum, length, then the artifact): a mutated entry is
    /// refused, or read back as exactly the artifact written (bytes appended after the
    /// sealed body are ignored), never a different kernel.
    #[test]
    fn mutated_cache_entries_are_refused_or_read_unchanged(
        mutations in prop::collection::vec(mutation(), 1..4),
    ) {
        let original = &originals().0;
        let mut bytes = cpu::entry_bytes(original);
        for m in &mutations {
            apply(&mut bytes, m);
        }
        if let Ok(a) = no_panic("read_entry", &bytes, || cpu::read_entry(&bytes)) {
            prop_assert_eq!(&a.object, &original.object);
            prop_assert_eq!(&a.entry, &original.entry);
            prop_assert_eq!(a.workspace_bytes, original.workspace_bytes);
        }
    }
}

#[test]
fn the_unmutated_bundle_is_accepted() {
    let path = scratch("good");
    std::fs::write(&path, &originals().1).unwrap();
    let info = bundle::inspect(&path).unwrap();
    assert_eq!(info.entries.len(), 1);
    assert_eq!(info.entries[0].name, "fuzz_add");
    let decoded = Artifact::decode(&originals().0.encode()).unwrap();
    assert_eq!(decoded.object, originals().0.object);
    assert_eq!(decoded.entry, originals().0.entry);
}
