//! Helpers shared by the integration tests (each test file includes this module with
//! `mod common;` and uses what it needs).
#![allow(
    dead_code,
    reason = "each test crate uses a different subset of the helpers"
)]

use std::path::Path;
use std::sync::Arc;

use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Options, Tiers};

/// Options at `path` scaled down so that small tests flush, switch container roles and run
/// column compactions: 64 KiB memtables and tables, a 1 MiB container and L1, columns of
/// 64–256 KiB.
pub fn small_options(path: &Path) -> Options {
    let mut o = Options::new(path);
    o.write_buffer_bytes = 64 << 10;
    o.l0_compaction_trigger = 2;
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.container_bytes = 1 << 20;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(256 << 10);
    o
}

/// Puts `o` on simulated tiers: `fs` for both directories' files, `fast` for the mapped
/// regions (crash images and fault injection come from them).
pub fn on_simulated_tiers(mut o: Options, fs: &MemFs, fast: &SimFastTier) -> Options {
    o.tiers = Some(Tiers {
        slow_fs: Arc::new(fs.clone()),
        fast_fs: Arc::new(fs.clone()),
        fast: Arc::new(fast.clone()),
    });
    o
}

/// The images of `fs` and `fast` after a power loss that drops every unsynced byte of both
/// tiers (`seed` chooses among what the crash mode leaves open).
pub fn power_loss(fs: &MemFs, fast: &SimFastTier, seed: u64) -> (MemFs, SimFastTier) {
    fs.crash_with(FsCrashMode::DropUnsynced, seed, || {
        fast.crash(CrashPolicy::DropUnpersisted)
    })
}

/// Every entry `it` yields from its first key on, in order.
pub fn scan_forward(mut it: matrixkv::DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.seek_to_first().expect("seek_to_first");
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().expect("next");
    }
    out
}

/// Every entry `it` yields from its last key back, returned in key order.
pub fn scan_backward(mut it: matrixkv::DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.seek_to_last().expect("seek_to_last");
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().expect("prev");
    }
    out.reverse();
    out
}

/// Key `i` of the single-level designs' tests (`slmdb.rs`, `lightkv.rs`): `key000042`.
pub fn level_key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The value of key `i` in overwrite round `round`: 100–399 bytes that name both.
pub fn level_value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(100 + (i as usize % 300), b'a' + (i % 26) as u8);
    v
}

/// Puts `value` of `len` bytes under `key` from another thread and returns what the put
/// returned; panics when it has not returned within 20 seconds (a hung write).
pub fn put_within_20s(db: &Arc<matrixkv::Db>, key: &[u8], len: usize) -> matrixkv::Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let (db, key) = (Arc::clone(db), key.to_vec());
    std::thread::spawn(move || {
        let _ = tx.send(db.put(&key, vec![7u8; len]));
    });
    rx.recv_timeout(std::time::Duration::from_secs(20))
        .expect("the write returns instead of hanging")
}

/// Mounts a tmpfs of `mib` MiB at `dir` (needs root and a kernel that allows it).
pub fn mount_tmpfs(dir: &Path, mib: u64) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let out = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "tmpfs"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run mount: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Unmounts its directory when dropped.
pub struct Mount(pub std::path::PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}
