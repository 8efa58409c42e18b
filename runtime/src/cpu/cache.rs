//! Where compiled kernels come from, in order: this process's memory, a loaded bundle, the
//! disk cache, the compiler.
//!
//! **Key.** A [`CacheKey`] is the SHA-256 of everything that decides the machine code: the
//! kernel's structural hash (its printed IR, locations excluded), tpukit's version, a
//! fingerprint of the code generator's sources (`build.rs`: a changed generator never gets
//! code an older one compiled), LLVM's version, the target (triple, CPU name, feature string)
//! and the codegen options. The
//! environment is accounted for explicitly: `TPUKIT_DEBUG` sets an option (hashed);
//! `TPUKIT_DUMP_LLVM` and `TPUKIT_TIMINGS` only print diagnostics and `TPUKIT_CACHE_DIR` and
//! `TPUKIT_BUNDLE` only say where to look (all ignored). Array shapes are not in the key: a
//! compiled kernel serves every shape.
//!
//! **Disk.** With `TPUKIT_CACHE_DIR` set (and not empty: empty means no disk cache, as an
//! empty `TPUKIT_BUNDLE` means no bundle), each key is one file `<key>.tpkc` (a checksummed
//! [`Artifact`]). Writers hold `<key>.lock` (an exclusive file lock) while they compile, so
//! concurrent processes compile each key once, and remove it when done. A writer waits at
//! most [`LOCK_TIMEOUT`] for the lock (its holder may be stopped or hung): then it compiles
//! in memory, without the cache, and says so once. Entries appear atomically (a temporary
//! file, synced, then renamed over the entry), so a writer killed at any moment leaves at
//! worst a stray temporary file, never a partial entry under an entry's name; an entry that
//! fails its checksum or does not decode is a miss, is reported once, and is replaced. A
//! shared directory (NFS, a mounted bucket) shares the cache across hosts: the key includes
//! the target, so hosts with different CPUs never use each other's code.
//!
//! **Bound.** After each write the directory is trimmed (`eviction`): least-recently-used
//! entries go until the entries total at most `TPUKIT_CACHE_MAX_BYTES`
//! ([`DEFAULT_CACHE_MAX_BYTES`], 1 GiB, when unset), and lock and temporary files left by
//! processes that died are removed.

use super::artifact::{self, Artifact};
use super::codegen::CodegenOptions;
use super::eviction;
pub use super::eviction::DEFAULT_CACHE_MAX_BYTES;
use super::target::HostTarget;
use sha2::{Digest, Sha256};
use std::fs::{self, File, TryLockError};
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tpukit_dsl::{Kernel, KernelHash};

/// The identity of a compiled kernel (hex SHA-256).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey(pub String);

impl CacheKey {
    pub fn new(kernel: &Kernel, target: &HostTarget, options: CodegenOptions) -> CacheKey {
        CacheKey::from_hash(kernel.structural_hash(), target, options)
    }

    /// The key of a kernel whose structural hash is `hash`.
    pub fn from_hash(hash: KernelHash, target: &HostTarget, options: CodegenOptions) -> CacheKey {
        let (major, minor, patch) = inkwell::support::get_llvm_version();
        let text = format!(
            "tpukit-cpu {} codegen {}\nllvm {major}.{minor}.{patch}\ntarget {} {} {}\ndebug {} lanes {} bf16dot {} bf16cvt {} range {} erf {}\nkernel {}\n",
            env!("CARGO_PKG_VERSION"),
            env!("TPUKIT_CODEGEN_FINGERPRINT"),
            target.triple,
            target.cpu,
            target.features,
            options.debug,
            options.vector_lanes,
            options.bf16_dot,
            options.bf16_convert,
            options.minmax_range,
            options.erf_table,
            hash,
        );
        CacheKey(format!("{:x}", Sha256::digest(text.as_bytes())))
    }
}

/// Counters of where this process's compiled kernels came from.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    pub compiled: usize,
    pub disk_hits: usize,
    pub bundle_hits: usize,
    /// Disk entries that failed their checksum or did not decode (and were replaced).
    pub corrupt: usize,
}

static COMPILED: AtomicUsize = AtomicUsize::new(0);
static DISK_HITS: AtomicUsize = AtomicUsize::new(0);
static BUNDLE_HITS: AtomicUsize = AtomicUsize::new(0);
static CORRUPT: AtomicUsize = AtomicUsize::new(0);

pub fn stats() -> CacheStats {
    CacheStats {
        compiled: COMPILED.load(Ordering::Relaxed),
        disk_hits: DISK_HITS.load(Ordering::Relaxed),
        bundle_hits: BUNDLE_HITS.load(Ordering::Relaxed),
        corrupt: CORRUPT.load(Ordering::Relaxed),
    }
}

const MAGIC: &[u8; 4] = b"TPKC";

/// The artifact for `key`, the host's key of the kernel whose structural hash is `hash`
/// (compiled with bounds checks if `debug`): from a bundle (keyed by each bundle's target), from
/// the disk cache, or from `compile` (then stored in the disk cache).
pub(crate) fn artifact(
    key: &CacheKey,
    (hash, debug): (KernelHash, bool),
    compile: impl FnOnce() -> Result<Artifact, crate::RuntimeError>,
) -> Result<Artifact, crate::RuntimeError> {
    if let Some(a) = crate::bundle::lookup(hash, debug) {
        BUNDLE_HITS.fetch_add(1, Ordering::Relaxed);
        return Ok(a);
    }
    let dir = std::env::var_os("TPUKIT_CACHE_DIR").filter(|d| !d.is_empty());
    let Some(dir) = dir.map(PathBuf::from) else {
        COMPILED.fetch_add(1, Ordering::Relaxed);
        return compile();
    };
    match Disk::new(&dir, key) {
        Ok(disk) => disk.get_or_compile(compile),
        Err(e) => {
            warn_once(&format!(
                "tpukit: the compilation cache at {} is unusable ({e}); compiling without it",
                dir.display()
            ));
            COMPILED.fetch_add(1, Ordering::Relaxed);
            compile()
        }
    }
}

/// The artifact in a disk-cache entry's bytes (a sealed, checksummed [`Artifact`]), or why
/// they are not one. What the disk cache serves goes through here.
pub fn read_entry(bytes: &[u8]) -> Result<Artifact, String> {
    artifact::open(MAGIC, bytes).and_then(Artifact::decode)
}

/// The bytes of a disk-cache entry holding `a` (what [`read_entry`] reads).
pub fn entry_bytes(a: &Artifact) -> Vec<u8> {
    artifact::seal(MAGIC, &a.encode())
}

/// Writes `a` as the entry for `key` in the cache directory `dir`, as a launch does after
/// compiling: atomically, then trims the directory to its bound. For filling a cache ahead
/// of time (and for tests of concurrent writers).
pub fn store(dir: &Path, key: &CacheKey, a: &Artifact) -> std::io::Result<()> {
    let disk = Disk::new(dir, key)?;
    disk.store(a)?;
    eviction::trim(dir, eviction::max_bytes(), &disk.entry);
    Ok(())
}

/// One key's files in the cache directory.
struct Disk {
    dir: PathBuf,
    entry: PathBuf,
    lock: PathBuf,
}

impl Disk {
    fn new(dir: &Path, key: &CacheKey) -> std::io::Result<Disk> {
        fs::create_dir_all(dir)?;
        Ok(Disk {
            dir: dir.to_path_buf(),
            entry: dir.join(format!("{}.tpkc", key.0)),
            lock: dir.join(format!("{}.lock", key.0)),
        })
    }

    fn get_or_compile(
        &self,
        compile: impl FnOnce() -> Result<Artifact, crate::RuntimeError>,
    ) -> Result<Artifact, crate::RuntimeError> {
        if let Some(a) = self.load(false) {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            eviction::touch(&self.entry);
            return Ok(a);
        }
        // Whoever holds the lock compiles; the others wait, then find the entry.
        let lock = match self.acquire(LOCK_TIMEOUT) {
            Ok(Some(lock)) => Some(lock),
            Ok(None) => {
                warn_once(&format!(
                    "tpukit: {} has been locked for over {} s (its holder may be stopped); \
                     compiling without the cache",
                    self.lock.display(),
                    LOCK_TIMEOUT.as_secs()
                ));
                COMPILED.fetch_add(1, Ordering::Relaxed);
                return compile();
            }
            // Cannot lock (a read-only directory): compile, and try to store anyway.
            Err(_) => None,
        };
        let result = self.fill(compile);
        if let Some(lock) = lock {
            // Unlinked while held: a waiter that then locks the old file sees it is stale.
            let _ = fs::remove_file(&self.lock);
            drop(lock);
        }
        result
    }

    /// With the lock held (or unlockable): the entry if another process wrote it meanwhile,
    /// else compiled and stored.
    fn fill(
        &self,
        compile: impl FnOnce() -> Result<Artifact, crate::RuntimeError>,
    ) -> Result<Artifact, crate::RuntimeError> {
        if let Some(a) = self.load(true) {
            DISK_HITS.fetch_add(1, Ordering::Relaxed);
            return Ok(a);
        }
        COMPILED.fetch_add(1, Ordering::Relaxed);
        let a = compile()?;
        match self.store(&a) {
            Ok(()) => eviction::trim(&self.dir, eviction::max_bytes(), &self.entry),
            Err(e) => warn_once(&format!(
                "tpukit: cannot write {} ({e}); the kernel is compiled but not cached",
                self.entry.display()
            )),
        }
        Ok(a)
    }

    /// Takes the key's lock file, waiting at most `timeout`: `Ok(None)` if it stayed locked.
    /// Lock files are removed by their holder when done, so a file locked after its holder
    /// unlinked it is stale: then the lock is taken again on the file now at the path.
    fn acquire(&self, timeout: Duration) -> std::io::Result<Option<File>> {
        let deadline = Instant::now() + timeout;
        loop {
            let f = File::create(&self.lock)?;
            loop {
                match f.try_lock() {
                    Ok(()) => break,
                    Err(TryLockError::WouldBlock) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                    Err(TryLockError::WouldBlock) => return Ok(None),
                    Err(TryLockError::Error(e)) => return Err(e),
                }
            }
            let held = f.metadata()?;
            match fs::metadata(&self.lock) {
                Ok(now) if (now.dev(), now.ino()) == (held.dev(), held.ino()) => {
                    return Ok(Some(f));
                }
                _ if Instant::now() < deadline => continue,
                _ => return Ok(None),
            }
        }
    }

    /// The entry, if present and intact. A damaged entry is a miss (counted and reported when
    /// `report`, i.e. once per lookup).
    fn load(&self, report: bool) -> Option<Artifact> {
        let bytes = fs::read(&self.entry).ok()?;
        match read_entry(&bytes) {
            Ok(a) => Some(a),
            Err(_) if !report => None,
            Err(e) => {
                CORRUPT.fetch_add(1, Ordering::Relaxed);
                warn_once(&format!(
                    "tpukit: ignoring damaged cache entry {} ({e}); recompiling",
                    self.entry.display()
                ));
                None
            }
        }
    }

    /// Writes the entry atomically: a unique temporary file, then a rename over the entry.
    fn store(&self, a: &Artifact) -> std::io::Result<()> {
        // Unique per process and write: concurrent writers never share a temporary file.
        static WRITES: AtomicUsize = AtomicUsize::new(0);
        let tmp = self.entry.with_extension(format!(
            "tmp.{}.{}",
            std::process::id(),
            WRITES.fetch_add(1, Ordering::Relaxed)
        ));
        let mut f = File::create(&tmp)?;
        f.write_all(&entry_bytes(a))?;
        f.sync_all()?;
        fs::rename(&tmp, &self.entry)
    }
}

/// How long a process waits for another to finish compiling a key before compiling it
/// itself, without the cache.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(5);

/// The messages [`warn_once`] printed.
static SEEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Holds the warn-once lock (for the fork handler, see `crate::fork`).
pub(crate) fn hold_warnings() -> std::sync::MutexGuard<'static, Vec<String>> {
    SEEN.lock().unwrap_or_else(|e| e.into_inner())
}

/// Prints `message` to stderr the first time it is seen in this process.
pub(crate) fn warn_once(message: &str) {
    let mut seen = hold_warnings();
    if !seen.iter().any(|m| m == message) {
        eprintln!("{message}");
        seen.push(message.to_string());
    }
}
