//! Keeping the disk cache bounded: least-recently-used entries are evicted past
//! `TPUKIT_CACHE_MAX_BYTES`, and files left by processes that died (unheld `.lock` files,
//! temporary files of an interrupted write) are removed.
//!
//! "Used" is the entry's modification time: a writer sets it by writing, and a disk hit
//! refreshes it ([`touch`]). Access times are not used, as many file systems do not keep
//! them (`noatime`, `relatime`).
//!
//! Every removal here is safe against other processes using the directory at the same time:
//! a reader that opened an entry before it was unlinked reads it whole, one that opens it
//! after sees a miss and compiles; a lock file is only removed while this process holds its
//! lock (as its holder would), so a waiter that locked it re-checks the path and retries; a
//! temporary file is only removed once it is older than any live write takes.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The cache's size bound when `TPUKIT_CACHE_MAX_BYTES` is not set: 1 GiB, some thousands
/// of kernels (an entry is a few to a few hundred KiB of object code).
pub const DEFAULT_CACHE_MAX_BYTES: u64 = 1 << 30;

/// A temporary file this old belongs to a writer that died: live writes take well under a
/// second.
const STALE_TEMP: Duration = Duration::from_secs(600);

/// A lock file unheld for this long is left over (its holder died before removing it).
const STALE_LOCK: Duration = Duration::from_secs(5);

/// The size bound in bytes: `TPUKIT_CACHE_MAX_BYTES` (a byte count; `0` evicts everything
/// but the entry just written), else [`DEFAULT_CACHE_MAX_BYTES`]. A value that is not a
/// number is reported once and the default is used.
pub fn max_bytes() -> u64 {
    match std::env::var("TPUKIT_CACHE_MAX_BYTES") {
        Err(_) => DEFAULT_CACHE_MAX_BYTES,
        Ok(s) if s.trim().is_empty() => DEFAULT_CACHE_MAX_BYTES,
        Ok(s) => s.trim().parse().unwrap_or_else(|_| {
            super::cache::warn_once(&format!(
                "tpukit: TPUKIT_CACHE_MAX_BYTES={s:?} is not a byte count; using \
                 {DEFAULT_CACHE_MAX_BYTES}"
            ));
            DEFAULT_CACHE_MAX_BYTES
        }),
    }
}

/// Marks `entry` as just used (best effort: a read-only cache stays as it is).
pub fn touch(entry: &Path) {
    if let Ok(f) = File::options().append(true).open(entry) {
        let _ = f.set_modified(SystemTime::now());
    }
}

/// One cache file: path, size, last use.
struct Entry {
    path: PathBuf,
    bytes: u64,
    used: SystemTime,
}

/// Removes left-over lock and temporary files from `dir`, then evicts the least recently
/// used entries until the entries total at most `max` bytes. `keep` (the entry just written)
/// is never evicted, so a bound below one entry still caches the latest kernel. Errors
/// (a read-only directory, a file removed meanwhile by another process) are ignored:
/// bounding the cache is best effort and never fails a launch.
pub fn trim(dir: &Path, max: u64, keep: &Path) {
    let Ok(listing) = fs::read_dir(dir) else {
        return;
    };
    let now = SystemTime::now();
    let age = |m: &fs::Metadata| {
        m.modified()
            .ok()
            .and_then(|t| now.duration_since(t).ok())
            .unwrap_or_default()
    };
    let mut entries = Vec::new();
    for item in listing.flatten() {
        let path = item.path();
        let Ok(meta) = item.metadata() else { continue };
        let name = item.file_name();
        let name = name.to_string_lossy();
        if name.ends_with(".tpkc") {
            entries.push(Entry {
                path,
                bytes: meta.len(),
                used: meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            });
        } else if name.ends_with(".lock") && age(&meta) > STALE_LOCK {
            remove_unheld_lock(&path);
        } else if name.contains(".tmp.") && age(&meta) > STALE_TEMP {
            let _ = fs::remove_file(&path);
        }
    }
    let mut total: u64 = entries.iter().map(|e| e.bytes).sum();
    entries.sort_by_key(|e| e.used);
    for e in entries {
        if total <= max {
            break;
        }
        if e.path != keep && fs::remove_file(&e.path).is_ok() {
            total -= e.bytes;
        }
    }
}

/// Removes the lock file at `path` if no process holds it, holding it while removing it (so
/// a process that locks it meanwhile finds it unlinked and retries, see `Disk::acquire`).
fn remove_unheld_lock(path: &Path) {
    if let Ok(f) = File::open(path)
        && f.try_lock().is_ok()
    {
        let _ = fs::remove_file(path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes `bytes` bytes at `dir/name`, last modified `ago` before now.
    fn file(dir: &Path, name: &str, bytes: usize, ago: Duration) -> PathBuf {
        let path = dir.join(name);
        fs::write(&path, vec![7u8; bytes]).unwrap();
        let f = File::options().append(true).open(&path).unwrap();
        f.set_modified(SystemTime::now() - ago).unwrap();
        path
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn least_recently_used_entries_go_first_and_the_kept_one_stays() {
        let dir = std::env::temp_dir().join(format!("tpukit-evict-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let min = Duration::from_secs(60);
        file(&dir, "a.tpkc", 100, min * 5);
        let b = file(&dir, "b.tpkc", 100, min * 4);
        file(&dir, "c.tpkc", 100, min * 3);
        let d = file(&dir, "d.tpkc", 100, min * 2);
        // `b` was used (a disk hit) after every other entry.
        touch(&b);
        trim(&dir, 250, &d);
        assert_eq!(names(&dir), ["b.tpkc", "d.tpkc"]);
        // A bound below one entry keeps only the one just written.
        trim(&dir, 0, &d);
        assert_eq!(names(&dir), ["d.tpkc"]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn left_over_locks_and_temporary_files_are_removed_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("tpukit-stale-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let hour = Duration::from_secs(3600);
        let kept = file(&dir, "e.tpkc", 10, Duration::ZERO);
        file(&dir, "dead.lock", 0, hour);
        let held = file(&dir, "held.lock", 0, hour);
        let holder = File::open(&held).unwrap();
        holder.lock().unwrap();
        file(&dir, "new.lock", 0, Duration::ZERO);
        file(&dir, "e.tmp.1.0", 10, hour);
        file(&dir, "e.tmp.2.0", 10, Duration::ZERO);
        trim(&dir, u64::MAX, &kept);
        assert_eq!(
            names(&dir),
            ["e.tmp.2.0", "e.tpkc", "held.lock", "new.lock"]
        );
        drop(holder);
        fs::remove_dir_all(&dir).unwrap();
    }
}
