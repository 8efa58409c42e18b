//! Bundles: files of precompiled kernels, so the first call of a shipped kernel compiles
//! nothing.
//!
//! A bundle is built for one host target (`tpukit bundle build`) and holds, per kernel, its
//! [`CacheKey`], its name and IR hash, its [`Artifact`] (object code) and optionally its
//! StableHLO/Mosaic module (the TPU artifact). Layout:
//!
//! ```text
//! "TPKB" | format u32 | index: sealed (checksummed) | entries...
//! index: tpukit version, triple, cpu, features, count, then per entry:
//!        key, name, ir hash, artifact offset/len/sha256, tpu module offset/len
//! ```
//!
//! `TPUKIT_BUNDLE` (paths separated by `:`) names the bundles to load at first use, and
//! [`register`] adds one later (the Python package registers the bundle it ships). Bundles are
//! memory-mapped and only their index is read (and checked) when loaded; an entry's bytes are
//! checksummed when the entry is first used. A bundle for another target or tpukit
//! version, or with a bad checksum, is refused with a message on stderr, and the runtime
//! compiles instead.

use super::artifact::{self, Artifact, Reader, Writer};
use super::cache::{CacheKey, warn_once};
use super::target::HostTarget;
use memmap2::Mmap;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, OnceLock};

const MAGIC: &[u8; 4] = b"TPKB";

/// One kernel to put in a bundle.
pub struct BundleEntry {
    pub key: CacheKey,
    pub name: String,
    pub ir_hash: String,
    pub artifact: Artifact,
    /// The StableHLO module with the kernel's `tpu_custom_call` (text), if lowered.
    pub tpu_module: Option<String>,
}

/// Writes a bundle of `entries` for `target` to `path` (atomically: temp file + rename).
pub fn write(path: &Path, target: &HostTarget, entries: &[BundleEntry]) -> std::io::Result<()> {
    let mut blobs = Writer::default();
    let mut index = Writer::default();
    index.str(env!("CARGO_PKG_VERSION"));
    index.str(&target.triple);
    index.str(&target.cpu);
    index.str(&target.features);
    index.u64(entries.len() as u64);
    for e in entries {
        let art = e.artifact.encode();
        index.str(&e.key.0);
        index.str(&e.name);
        index.str(&e.ir_hash);
        index.u64(blobs.0.len() as u64);
        index.u64(art.len() as u64);
        index.0.extend_from_slice(&Sha256::digest(&art));
        blobs.0.extend_from_slice(&art);
        let module = e.tpu_module.as_deref().unwrap_or("").as_bytes();
        index.u64(blobs.0.len() as u64);
        index.u64(module.len() as u64);
        blobs.0.extend_from_slice(module);
    }
    let mut out = artifact::seal(MAGIC, &index.0);
    out.extend_from_slice(&blobs.0);
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, &out)?;
    std::fs::rename(&tmp, path)
}

/// One entry of a loaded bundle's index.
struct Slot {
    bundle: usize,
    offset: usize,
    len: usize,
    sha: [u8; 32],
}

/// The loaded bundles: their mapped bytes (entries start after the index) and an index of
/// every entry by key.
struct Loaded {
    maps: Vec<(Mmap, usize)>,
    slots: HashMap<CacheKey, Slot>,
}

/// The loaded bundles, starting with those `TPUKIT_BUNDLE` names (read once, at first use).
fn loaded() -> MutexGuard<'static, Loaded> {
    static LOADED: OnceLock<Mutex<Loaded>> = OnceLock::new();
    LOADED
        .get_or_init(|| {
            let mut l = Loaded {
                maps: Vec::new(),
                slots: HashMap::new(),
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
/// Returns false, after a message on stderr, if the bundle was refused.
pub fn register(path: &Path) -> bool {
    add(&mut loaded(), path)
}

/// Maps `path` and indexes its entries, if it was built for this host and tpukit.
fn load(l: &mut Loaded, path: &Path, host: &HostTarget) -> Result<(), String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    // SAFETY: bundles are written once (temp file + rename) and never modified in place.
    let map = unsafe { Mmap::map(&file) }.map_err(|e| e.to_string())?;
    let index = artifact::open(MAGIC, &map)?;
    let blobs_at = artifact::HEADER + index.len();
    let mut r = Reader(index);
    let version = r.str()?;
    if version != env!("CARGO_PKG_VERSION") {
        return Err(format!(
            "built by tpukit {version}, this is tpukit {}",
            env!("CARGO_PKG_VERSION")
        ));
    }
    let (triple, cpu, features) = (r.str()?, r.str()?, r.str()?);
    if (triple.as_str(), cpu.as_str(), features.as_str())
        != (
            host.triple.as_str(),
            host.cpu.as_str(),
            host.features.as_str(),
        )
    {
        return Err(format!(
            "built for {triple} `{cpu}` (or other CPU features); this host is {} `{}`",
            host.triple, host.cpu
        ));
    }
    let bundle = l.maps.len();
    for _ in 0..r.u64()? {
        let key = CacheKey(r.str()?);
        let (_name, _ir) = (r.str()?, r.str()?);
        let (offset, len) = (r.u64()? as usize, r.u64()? as usize);
        let sha: [u8; 32] = r.take(32)?.try_into().expect("32 bytes");
        let (_module_at, _module_len) = (r.u64()?, r.u64()?);
        if blobs_at + offset + len > map.len() {
            return Err(format!("entry {} lies past the end of the file", key.0));
        }
        l.slots.insert(
            key,
            Slot {
                bundle,
                offset,
                len,
                sha,
            },
        );
    }
    l.maps.push((map, blobs_at));
    Ok(())
}

/// The artifact for `key` from a loaded bundle, if one holds it intact.
pub(crate) fn lookup(key: &CacheKey) -> Option<Artifact> {
    let l = loaded();
    if l.slots.is_empty() {
        return None;
    }
    let slot = l.slots.get(key)?;
    let (map, blobs_at) = &l.maps[slot.bundle];
    let bytes = &map[blobs_at + slot.offset..blobs_at + slot.offset + slot.len];
    if Sha256::digest(bytes).as_slice() != slot.sha {
        warn_once(&format!(
            "tpukit: bundle entry {} is corrupt (checksum); compiling instead",
            key.0
        ));
        return None;
    }
    Artifact::decode(bytes).ok()
}
