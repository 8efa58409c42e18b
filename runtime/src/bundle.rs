//! Bundles: files of precompiled kernels, so the first call of a shipped kernel compiles
//! nothing.
//!
//! A bundle is built for one host target (`tpukit bundle build`) and holds, per kernel, its
//! [`CacheKey`], its name and IR hash, its [`Artifact`] (object code, which serves every
//! shape: extents are run-time values) and, where it was lowered, its TPU artifact: the
//! StableHLO module with the Mosaic `tpu_custom_call` for one binding of its symbols (a TPU
//! kernel is specialised to its shapes) and the executables libtpu compiled from it, per
//! topology. Layout:
//!
//! ```text
//! "TPKB" | format u32 | index: sealed (checksummed) | blobs...
//! index: tpukit version, code generator fingerprint, triple, cpu, features, count, then per entry:
//!        key, name, ir hash, artifact blob,
//!        tpu module blob, bindings (count, then symbol and value each),
//!        executables (count, then topology and blob each)
//! blob:  offset, length, SHA-256 (of bytes in the blob area after the index)
//! ```
//!
//! `TPUKIT_BUNDLE` (paths separated by `:`) names the bundles to load at first use, and
//! [`register`] adds one later (the Python package registers the bundle it ships). Only a
//! bundle's index is read (and checked) when it is loaded, with every entry's place checked
//! against the file's length (a bundle refused registers none of its entries); an entry's
//! bytes are read (through checked offsets, never a memory map) and checksummed when the
//! entry is first used. A bundle for another target or tpukit
//! version, or with a bad checksum, is refused with a message on stderr, and the runtime
//! compiles instead. [`inspect`] reads a whole bundle and checks every checksum.

use crate::cpu::artifact::{self, Artifact, Reader, Writer};
use crate::cpu::cache::warn_once;
use crate::cpu::{CacheKey, HostTarget, options_for};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};
use tpukit_dsl::{Bindings, KernelHash};

const MAGIC: &[u8; 4] = b"TPKB";

/// The tpukit version and code generator fingerprint this runtime writes into bundles and
/// requires of the bundles it loads.
pub const BUILT_BY: (&str, &str) = (
    env!("CARGO_PKG_VERSION"),
    env!("TPUKIT_CODEGEN_FINGERPRINT"),
);

/// One kernel to put in a bundle.
pub struct BundleEntry {
    pub key: CacheKey,
    pub name: String,
    pub ir_hash: String,
    pub artifact: Artifact,
    pub tpu: Option<TpuArtifact>,
}

/// A kernel lowered for a TPU: the StableHLO module (text) for `bindings`, and the
/// executables libtpu compiled from it, as `(topology, serialized executable)`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TpuArtifact {
    pub bindings: Bindings,
    pub module: String,
    pub executables: Vec<(String, Vec<u8>)>,
}

/// Appends `bytes` to the blob area and records where in the index, with their checksum.
fn blob(index: &mut Writer, blobs: &mut Writer, bytes: &[u8]) {
    index.u64(blobs.0.len() as u64);
    index.u64(bytes.len() as u64);
    index.0.extend_from_slice(&Sha256::digest(bytes));
    blobs.0.extend_from_slice(bytes);
}

/// Writes a bundle of `entries` for `target` to `path` atomically: a temporary file, synced,
/// then renamed over `path`, so a writer killed at any moment leaves at worst a stray
/// temporary file and readers see the old bundle or the new one, whole.
pub fn write(path: &Path, target: &HostTarget, entries: &[BundleEntry]) -> std::io::Result<()> {
    let mut blobs = Writer::default();
    let mut index = Writer::default();
    index.str(BUILT_BY.0);
    index.str(BUILT_BY.1);
    index.str(&target.triple);
    index.str(&target.cpu);
    index.str(&target.features);
    index.u64(entries.len() as u64);
    for e in entries {
        index.str(&e.key.0);
        index.str(&e.name);
        index.str(&e.ir_hash);
        blob(&mut index, &mut blobs, &e.artifact.encode());
        let tpu = e.tpu.clone().unwrap_or_default();
        blob(&mut index, &mut blobs, tpu.module.as_bytes());
        index.u64(tpu.bindings.len() as u64);
        for (sym, value) in &tpu.bindings {
            index.str(sym);
            index.u64(*value as u64);
        }
        index.u64(tpu.executables.len() as u64);
        for (topology, exe) in &tpu.executables {
            index.str(topology);
            blob(&mut index, &mut blobs, exe);
        }
    }
    let mut out = artifact::seal(MAGIC, &index.0);
    out.extend_from_slice(&blobs.0);
    // Unique per process and call: two threads writing one path never share a temp file.
    static WRITES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_extension(format!("tmp.{}.{n}", std::process::id()));
    let mut f = File::create(&tmp)?;
    std::io::Write::write_all(&mut f, &out)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Where a blob lies in the blob area, and its checksum.
#[derive(Copy, Clone, Debug)]
struct Blob {
    offset: usize,
    len: usize,
    sha: [u8; 32],
}

impl Blob {
    fn read(r: &mut Reader<'_>) -> Result<Blob, String> {
        let (offset, len) = (r.u64()? as usize, r.u64()? as usize);
        let sha = r.take(32)?.try_into().expect("32 bytes");
        Ok(Blob { offset, len, sha })
    }

    /// The blob's bytes, read from `file` whose blob area starts at `blobs_at`, if they are
    /// there and intact.
    fn read_from(&self, file: &File, blobs_at: u64) -> Result<Vec<u8>, String> {
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(self.len)
            .map_err(|_| "an entry larger than memory".to_string())?;
        bytes.resize(self.len, 0);
        let at = blobs_at
            .checked_add(self.offset as u64)
            .ok_or("an entry lies past the end of the file")?;
        file.read_exact_at(&mut bytes, at)
            .map_err(|e| format!("cannot read the entry ({e}); was the file changed?"))?;
        self.check(&bytes)?;
        Ok(bytes)
    }

    fn check(&self, bytes: &[u8]) -> Result<(), String> {
        if Sha256::digest(bytes).as_slice() != self.sha {
            return Err("checksum mismatch (the entry is corrupt)".into());
        }
        Ok(())
    }

    /// The blob's bytes in `blobs`, if they are there and intact.
    fn bytes<'a>(&self, blobs: &'a [u8]) -> Result<&'a [u8], String> {
        let bytes = blobs
            .get(self.offset..self.offset.saturating_add(self.len))
            .ok_or("an entry lies past the end of the file")?;
        self.check(bytes)?;
        Ok(bytes)
    }
}

/// One entry of a bundle's index.
struct IndexEntry {
    key: CacheKey,
    name: String,
    ir_hash: String,
    artifact: Blob,
    module: Blob,
    bindings: Bindings,
    executables: Vec<(String, Blob)>,
}

/// Who built a bundle, and for which target.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    pub version: String,
    /// The fingerprint of the code generator that compiled the entries.
    pub codegen: String,
    pub triple: String,
    pub cpu: String,
    pub features: String,
}

impl Header {
    /// The target the bundle's code was compiled for.
    pub fn target(&self) -> HostTarget {
        HostTarget {
            triple: self.triple.clone(),
            cpu: self.cpu.clone(),
            features: self.features.clone(),
        }
    }

    /// Why this process cannot use a bundle with this header on `host`, if it cannot: built
    /// by another tpukit or code generator ([`BUILT_BY`]), or for a target whose code uses
    /// features `host` lacks (see [`HostTarget::runs_code_for`]).
    pub fn refusal(&self, host: &HostTarget) -> Option<String> {
        if (self.version.as_str(), self.codegen.as_str()) != BUILT_BY {
            return Some(format!(
                "built by tpukit {} (code generator {}), this is tpukit {} (code generator {})",
                self.version, self.codegen, BUILT_BY.0, BUILT_BY.1
            ));
        }
        let target = self.target();
        if host.runs_code_for(&target) {
            return None;
        }
        let lacks = if self.triple == host.triple {
            format!("lacks {}", host.missing(&target).join(", "))
        } else {
            format!("is {}", host.triple)
        };
        Some(format!(
            "built for {} `{}`; this CPU (`{}`) {lacks}",
            self.triple, self.cpu, host.cpu
        ))
    }

    /// Whether the bundle was compiled for exactly `host` (not only a target it can run).
    pub fn is_for(&self, host: &HostTarget) -> bool {
        self.target() == *host
    }
}

/// A bundle's header and index, read from its checksummed index.
struct Index {
    header: Header,
    entries: Vec<IndexEntry>,
    /// Where the blob area starts in the file.
    blobs_at: usize,
}

fn read_index(bytes: &[u8]) -> Result<Index, String> {
    let body = artifact::open(MAGIC, bytes)?;
    let mut r = Reader(body);
    let header = Header {
        version: r.str()?,
        codegen: r.str()?,
        triple: r.str()?,
        cpu: r.str()?,
        features: r.str()?,
    };
    let mut entries = Vec::new();
    for _ in 0..r.u64()? {
        let (key, name, ir_hash) = (CacheKey(r.str()?), r.str()?, r.str()?);
        let (artifact, module) = (Blob::read(&mut r)?, Blob::read(&mut r)?);
        let mut bindings = Bindings::new();
        for _ in 0..r.u64()? {
            bindings.insert(r.str()?, r.u64()? as usize);
        }
        let mut executables = Vec::new();
        for _ in 0..r.u64()? {
            executables.push((r.str()?, Blob::read(&mut r)?));
        }
        entries.push(IndexEntry {
            key,
            name,
            ir_hash,
            artifact,
            module,
            bindings,
            executables,
        });
    }
    Ok(Index {
        header,
        entries,
        blobs_at: artifact::HEADER + body.len(),
    })
}

/// What [`inspect`] reports of one entry.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryInfo {
    pub name: String,
    pub key: CacheKey,
    pub ir_hash: String,
    pub object_bytes: usize,
    /// The TPU artifact, if the kernel was lowered.
    pub tpu: Option<TpuArtifact>,
}

/// What [`inspect`] reports of a bundle.
#[derive(Clone, Debug, PartialEq)]
pub struct BundleInfo {
    pub header: Header,
    pub entries: Vec<EntryInfo>,
}

/// Reads the bundle at `path` whole, checking every checksum (whatever target it was built
/// for): what `tpukit bundle inspect` prints.
pub fn inspect(path: &Path) -> Result<BundleInfo, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let index = read_index(&bytes)?;
    let blobs = &bytes[index.blobs_at..];
    let mut entries = Vec::new();
    for e in index.entries {
        let what = |m: String| format!("entry `{}`: {m}", e.name);
        let object_bytes = Artifact::decode(e.artifact.bytes(blobs).map_err(what)?)
            .map_err(what)?
            .object
            .len();
        let module = String::from_utf8(e.module.bytes(blobs).map_err(what)?.to_vec())
            .map_err(|_| what("the TPU module is not UTF-8".into()))?;
        let mut executables = Vec::new();
        for (topology, blob) in &e.executables {
            executables.push((topology.clone(), blob.bytes(blobs).map_err(what)?.to_vec()));
        }
        let tpu = (!module.is_empty()).then_some(TpuArtifact {
            bindings: e.bindings,
            module,
            executables,
        });
        entries.push(EntryInfo {
            name: e.name,
            key: e.key,
            ir_hash: e.ir_hash,
            object_bytes,
            tpu,
        });
    }
    Ok(BundleInfo {
        header: index.header,
        entries,
    })
}

/// The loaded bundles: their open files (and where their blob area starts), and every
/// entry's object code by key.
///
/// Entries are read with positioned reads (`pread`), not through a memory map: a bundle
/// truncated or rewritten in place while loaded makes a read fail (and the kernel compile),
/// where a mapped page past the new end of the file would kill the process with `SIGBUS`.
struct Loaded {
    files: Vec<(File, u64)>,
    /// Each loaded bundle's path and target, in load order (parallel to `files`).
    bundles: Vec<(PathBuf, HostTarget)>,
    slots: HashMap<CacheKey, (usize, Blob)>,
    /// The kernel hash and key of the [`WARM_UP`] entry, if a bundle has one.
    warm_up: Option<(KernelHash, CacheKey)>,
}

/// The loaded bundles, starting with those `TPUKIT_BUNDLE` names (read once, at first use).
fn loaded() -> MutexGuard<'static, Loaded> {
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let mut l = Loaded {
                files: Vec::new(),
                bundles: Vec::new(),
                slots: HashMap::new(),
                warm_up: None,
            };
            let paths = std::env::var_os("TPUKIT_BUNDLE").unwrap_or_default();
            for path in std::env::split_paths(&paths).filter(|p| !p.as_os_str().is_empty()) {
                add(&mut l, &path);
            }
            Mutex::new(l)
        })
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

fn add(l: &mut Loaded, path: &Path) -> bool {
    match load(l, path, &HostTarget::detect()) {
        Ok(()) => true,
        Err(e) => {
            warn_once(&format!(
                "tpukit: bundle {} refused: {e}; kernels will be compiled instead",
                path.display()
            ));
            false
        }
    }
}

/// Loads the bundle at `path` (as `TPUKIT_BUNDLE` would): its kernels are served from now on.
/// Returns false, after a message on stderr, if the bundle was refused; a refused bundle
/// registers none of its entries (and so overrides none of an earlier bundle's).
pub fn register(path: &Path) -> bool {
    let _gate = crate::fork::section();
    add(&mut loaded(), path)
}

/// Loads the first of `candidates` this process can use (the best first: a package lists
/// the bundle tuned for its build host, then the portable one) and returns its path. Others
/// refused before it are silent (a wheel's host-tuned bundle does not fit most machines, and
/// need not); if none fits, each refusal is said once on stderr and kernels compile.
pub fn register_first(candidates: &[PathBuf]) -> Option<PathBuf> {
    let mut l = loaded();
    let host = HostTarget::detect();
    let mut refusals = Vec::new();
    for path in candidates {
        match load(&mut l, path, &host) {
            Ok(()) => return Some(path.clone()),
            Err(e) => refusals.push(format!("{}: {e}", path.display())),
        }
    }
    if !refusals.is_empty() {
        warn_once(&format!(
            "tpukit: no bundle fits this machine ({}); kernels will be compiled instead",
            refusals.join("; ")
        ));
    }
    None
}

/// The loaded bundles' paths and the targets they were compiled for, in load order.
pub fn loaded_bundles() -> Vec<(PathBuf, HostTarget)> {
    loaded().bundles.clone()
}

/// Reads the sealed index at the start of `file` (`len` bytes long): only its own bytes.
fn read_index_of(file: &File, len: u64) -> Result<Index, String> {
    let mut head = [0u8; artifact::HEADER];
    file.read_exact_at(&mut head, 0)
        .map_err(|_| "truncated: shorter than a bundle header".to_string())?;
    let body_len = u64::from_le_bytes(head[artifact::HEADER - 8..].try_into().expect("8 bytes"));
    let index_len = body_len
        .checked_add(artifact::HEADER as u64)
        .filter(|&n| n <= len)
        .ok_or("truncated: the index lies past the end of the file")?;
    let mut bytes = vec![0u8; index_len as usize];
    file.read_exact_at(&mut bytes, 0)
        .map_err(|e| e.to_string())?;
    read_index(&bytes)
}

/// Opens `path` and indexes its entries, if this host runs its code, it was built by this
/// tpukit and every entry lies inside the file; registers them all, or none.
fn load(l: &mut Loaded, path: &Path, host: &HostTarget) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let len = file.metadata().map_err(|e| e.to_string())?.len();
    let index = read_index_of(&file, len)?;
    if let Some(why) = index.header.refusal(host) {
        return Err(why);
    }
    let blobs_len = len - index.blobs_at as u64;
    let inside = |b: &Blob| {
        (b.offset as u64)
            .checked_add(b.len as u64)
            .is_some_and(|end| end <= blobs_len)
    };
    for e in &index.entries {
        let executables = e.executables.iter().map(|(_, b)| b);
        if !std::iter::once(&e.artifact)
            .chain([&e.module])
            .chain(executables)
            .all(inside)
        {
            return Err(format!(
                "entry `{}` lies past the end of the file (truncated?)",
                e.name
            ));
        }
    }
    let bundle = l.files.len();
    for e in index.entries {
        if e.name == WARM_UP
            && let Some(hash) = parse_hash(&e.ir_hash)
        {
            l.warm_up = Some((hash, e.key.clone()));
        }
        l.slots.insert(e.key, (bundle, e.artifact));
    }
    l.files.push((file, index.blobs_at as u64));
    l.bundles.push((path.to_path_buf(), index.header.target()));
    Ok(())
}

fn parse_hash(hex: &str) -> Option<KernelHash> {
    let mut bytes = [0u8; 32];
    if hex.len() != 64 {
        return None;
    }
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = u8::from_str_radix(hex.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(KernelHash(bytes))
}

/// The name of the entry `tpukit bundle build` adds for [`crate::cpu::warm_up`] to link: a
/// trivial kernel no caller uses, whose first link sets up the JIT's linking layer (about
/// 0.1 ms a first call would otherwise pay) without giving any real kernel a head start.
pub const WARM_UP: &str = "warm-up";

/// The [`WARM_UP`] entry of the loaded bundles, as `(kernel hash, artifact)`.
pub(crate) fn warm_up_entry() -> Option<(KernelHash, Artifact)> {
    let _gate = crate::fork::section();
    let l = loaded();
    let (hash, key) = l.warm_up.clone()?;
    Some((hash, read(&l, &key)?))
}

/// The compiled form of the kernel whose structural hash is `hash` (`debug`: with bounds
/// checks) from a loaded bundle, if one holds it intact. Each bundle's entries are keyed for
/// the target it was compiled for (which this host runs), so the key is computed per
/// bundle target, in load order: the first loaded bundle that has the kernel serves it.
pub(crate) fn lookup(hash: KernelHash, debug: bool) -> Option<Artifact> {
    let _gate = crate::fork::section();
    let l = loaded();
    let mut targets: Vec<&HostTarget> = Vec::new();
    for (_, t) in &l.bundles {
        if !targets.contains(&t) {
            targets.push(t);
        }
    }
    targets
        .into_iter()
        .find_map(|t| read(&l, &CacheKey::from_hash(hash, t, options_for(t, debug))))
}

/// The artifact for `key` from a loaded bundle, if one holds it intact (its bytes read from
/// the file and checksummed at each lookup: the runtime looks an entry up once, then keeps
/// the linked kernel).
fn read(l: &Loaded, key: &CacheKey) -> Option<Artifact> {
    let (bundle, blob) = *l.slots.get(key)?;
    let (file, blobs_at) = &l.files[bundle];
    match blob
        .read_from(file, *blobs_at)
        .and_then(|b| Artifact::decode(&b))
    {
        Ok(a) => Some(a),
        Err(e) => {
            warn_once(&format!(
                "tpukit: bundle entry {} is unusable ({e}); compiling instead",
                key.0
            ));
            None
        }
    }
}
