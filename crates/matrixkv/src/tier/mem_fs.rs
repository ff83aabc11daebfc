//! [`MemFs`]: an in-memory, crash-simulating, fault-injecting [`FileSystem`] for tests
//! (docs/reliability.md T2 and T5; the analogue of LevelDB `FaultInjectionTestEnv`, Pebble
//! `vfs.MemFS` + `CrashClone` + `errorfs`, RocksDB `FaultInjectionTestFS`).
//!
//! Model:
//! - Every file is an *inode* holding its bytes and `synced_len`, the prefix made durable by
//!   [`WritableFile::sync`]. A writable handle appends straight into the inode; the bytes past
//!   `synced_len` are what a crash may lose. `Drop` of a handle does no "I/O".
//! - The *live* namespace maps paths to inodes. Per directory there is also a *durable* mapping,
//!   refreshed from the live one by [`FileSystem::sync_dir`]: creating, renaming and removing a
//!   file become durable only after `sync_dir` of its parent directory.
//! - Directories made by [`FileSystem::create_dir_all`] exist at once *and* durably (a
//!   simplification: the engine creates its directories before anything else and the crash
//!   windows of interest are in file creation and renames).
//! - Open handles keep their inode after the path is removed or replaced, as on unix.
//! - [`FileSystem::create`] of an existing file truncates that inode in place (`O_TRUNC`); its
//!   `synced_len` drops to 0, so a crash image shows it empty until the next sync.
//! - [`MemFs::crash`] returns a new, independent `MemFs` holding a crash image chosen by
//!   [`FsCrashMode`] and a seed (a small in-module splitmix64, so images are reproducible).
//! - A failed `sync` (injected) behaves like Linux after an fsync error: the bytes that were
//!   unsynced at that moment never reach the disk, even if a later `sync` reports success; they
//!   read as zeros in every crash image except [`FsCrashMode::KeepAll`].
//! - Faults ([`Fault`]) fail chosen operations; [`MemFs::set_capacity`] caps the total bytes so
//!   appends fail with ENOSPC; [`MemFs::op_count`] counts calls so a test can fail the i-th one
//!   (the T5 sweep), and [`MemFs::trace_ops`] records where each call came from ([`OpTrace`]).
//!
//! Called by the tests of every module that does slow-tier I/O, and by the crash and fault
//! suites (feature `testing`).
//!
//! Thread safety: `MemFs` is `Send + Sync`; all state sits behind one mutex that is never held
//! across a call out of this module. `Clone` shares the state, so one instance can serve several
//! database directories.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::io;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

mod fault;
mod handles;
use fault::ActiveFault;
pub use fault::{Fault, FaultKind, FaultOp};
use handles::{MemLock, MemRandom, MemWritable};

use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, IoOp, Result};
use crate::lock_order::{Mutex, Rank};

const ENOENT: i32 = 2;
const ENOTDIR: i32 = 20;
const EISDIR: i32 = 21;
const ENOSPC: i32 = 28;

/// Block size of [`FsCrashMode::RandomBlocks`] (a page of the page cache).
const CRASH_BLOCK: usize = 4096;

/// Which crash image [`MemFs::crash`] builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FsCrashMode {
    /// Process crash: every byte written survives and the namespace is the live one.
    KeepAll,
    /// Power loss, LevelDB `RESET_DROP_UNSYNCED_DATA`: the namespace is the durable one
    /// (entries not covered by a `sync_dir` vanish or reappear) and every file is cut to its
    /// synced length.
    DropUnsynced,
    /// Power loss, LevelDB `DropRandomUnsyncedData`: durable namespace; every file keeps its
    /// synced bytes plus a random prefix of its unsynced tail.
    RandomTail,
    /// Power loss on a writeback file system (leveldb#251): durable namespace; the file keeps
    /// its length but the unsynced tail holds random garbage.
    GarbageTail,
    /// Like [`FsCrashMode::GarbageTail`] but the unsynced tail reads as zeros (size updated,
    /// blocks never written).
    ZeroTail,
    /// Power loss with out-of-order writeback (Pebble `UnsyncedDataPercent`): durable
    /// namespace; the file keeps its length and each 4 KiB block of the unsynced tail is kept
    /// or zeroed at random, so the surviving data need not be a prefix.
    RandomBlocks,
}

impl FsCrashMode {
    /// Every mode, for tests that loop over all of them.
    pub const ALL: [FsCrashMode; 6] = [
        FsCrashMode::KeepAll,
        FsCrashMode::DropUnsynced,
        FsCrashMode::RandomTail,
        FsCrashMode::GarbageTail,
        FsCrashMode::ZeroTail,
        FsCrashMode::RandomBlocks,
    ];
}

/// splitmix64: a tiny deterministic generator for crash images (no `rand` in non-test code).
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..=max`.
    fn up_to(&mut self, max: usize) -> usize {
        let bound = (max as u64).saturating_add(1);
        usize::try_from(self.next_u64() % bound).unwrap_or(max)
    }
}

#[derive(Debug, Default)]
struct Inode {
    data: Vec<u8>,
    /// Bytes made durable by `sync` (always `<= data.len()`).
    synced_len: usize,
    /// Ranges whose sync failed: they never reach the disk.
    lost: Vec<Range<usize>>,
    live_links: u32,
    durable_links: u32,
    handles: u32,
}

#[derive(Debug, Default)]
struct State {
    next_ino: u64,
    inodes: HashMap<u64, Inode>,
    live: BTreeMap<PathBuf, u64>,
    durable: BTreeMap<PathBuf, u64>,
    dirs: BTreeSet<PathBuf>,
    locks: HashSet<PathBuf>,
    faults: Vec<ActiveFault>,
    faults_fired: u64,
    capacity: Option<u64>,
    counts: [u64; FaultOp::CONCRETE.len()],
    /// Record every operation in `traces`, not only the failed ones.
    tracing: bool,
    traces: Vec<OpTrace>,
}

/// One operation recorded by [`MemFs`]: every operation an injected fault failed, and every
/// operation while [`MemFs::trace_ops`] is on. The backtrace tells which engine code called it
/// (the T5 sweep counts call sites with it).
#[derive(Debug)]
pub struct OpTrace {
    /// The operation.
    pub op: FaultOp,
    /// An injected fault failed it.
    pub failed: bool,
    /// Where it was called from.
    pub backtrace: std::backtrace::Backtrace,
    /// The name of the calling thread, if it has one.
    pub thread: Option<String>,
}

fn norm(p: &Path) -> PathBuf {
    p.components().collect()
}

fn os_err(op: IoOp, path: &Path, code: i32) -> Error {
    Error::io(op, path, io::Error::from_raw_os_error(code))
}

fn eof_err(path: &Path) -> Error {
    Error::io(
        IoOp::Read,
        path,
        io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer"),
    )
}

fn parent_of(p: &Path) -> &Path {
    p.parent().unwrap_or(Path::new(""))
}

impl State {
    fn new_inode(&mut self) -> u64 {
        self.next_ino += 1;
        self.inodes.insert(self.next_ino, Inode::default());
        self.next_ino
    }

    fn inode(&mut self, ino: u64) -> &mut Inode {
        // Every inode referenced by a link or handle is in the table (see `gc`).
        self.inodes.entry(ino).or_default()
    }

    fn gc(&mut self, ino: u64) {
        if let Some(i) = self.inodes.get(&ino)
            && i.live_links == 0
            && i.durable_links == 0
            && i.handles == 0
        {
            self.inodes.remove(&ino);
        }
    }

    fn dir_exists(&self, dir: &Path) -> bool {
        dir.as_os_str().is_empty() || dir.parent().is_none() || self.dirs.contains(dir)
    }

    /// Counts `op` and returns the kind of the fault that fires on it, if any.
    fn check(&mut self, op: FaultOp, paths: &[&Path]) -> Option<FaultKind> {
        if let Some(c) = self.counts.get_mut(op.index()) {
            *c += 1;
        }
        let mut hit = None;
        for f in &mut self.faults {
            if !f.fault.matches(op, paths) {
                continue;
            }
            f.seen += 1;
            let eligible = f.seen > f.fault.after && f.fault.times.is_none_or(|t| f.fired < t);
            if eligible && hit.is_none() {
                f.fired += 1;
                hit = Some(f.fault.kind);
            }
        }
        if hit.is_some() {
            self.faults_fired += 1;
        }
        if self.tracing || hit.is_some() {
            self.traces.push(OpTrace {
                op,
                failed: hit.is_some(),
                backtrace: std::backtrace::Backtrace::force_capture(),
                thread: std::thread::current().name().map(str::to_owned),
            });
        }
        hit
    }

    /// Like `check`, but turns a firing fault into the operation's error.
    fn check_err(&mut self, op: FaultOp, path: &Path, others: &[&Path]) -> Result<()> {
        let mut paths = vec![path];
        paths.extend_from_slice(others);
        match self.check(op, &paths) {
            Some(kind) => Err(os_err(op.io_op(), path, kind.raw_os_error())),
            None => Ok(()),
        }
    }

    /// Bytes held by files that still take space: linked in the live namespace or open.
    fn used_bytes(&self) -> u64 {
        self.inodes
            .values()
            .filter(|i| i.live_links > 0 || i.handles > 0)
            .map(|i| i.data.len() as u64)
            .sum()
    }

    fn live_inode(&self, path: &Path, op: IoOp) -> Result<u64> {
        let p = norm(path);
        match self.live.get(&p) {
            Some(&ino) => Ok(ino),
            None if self.dirs.contains(&p) => Err(os_err(op, path, EISDIR)),
            None => Err(os_err(op, path, ENOENT)),
        }
    }
}

struct Shared {
    state: Mutex<State>,
}

/// The in-memory, crash-simulating, fault-injecting file system (see the module docs).
///
/// `Clone` shares the state: every clone sees the same files, faults and counters.
#[derive(Clone)]
pub struct MemFs {
    shared: Arc<Shared>,
}

impl Default for MemFs {
    fn default() -> Self {
        MemFs::new()
    }
}

impl fmt::Debug for MemFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.shared.state.lock();
        f.debug_struct("MemFs")
            .field("files", &s.live.len())
            .field("dirs", &s.dirs.len())
            .field("used_bytes", &s.used_bytes())
            .field("capacity", &s.capacity)
            .field("faults", &s.faults.len())
            .finish_non_exhaustive()
    }
}

impl MemFs {
    /// A random-access handle of `path` (see `FileSystem::open` and `open_mapped`).
    fn open_random(&self, path: &Path, mapped: bool) -> Result<Arc<dyn RandomAccessFile>> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Open, path, &[])?;
        let ino = s.live_inode(path, IoOp::Open)?;
        let inode = s.inode(ino);
        inode.handles += 1;
        let len = inode.data.len() as u64;
        Ok(Arc::new(MemRandom {
            shared: Arc::clone(&self.shared),
            ino,
            path: path.to_owned(),
            len,
            mapped,
        }))
    }

    /// An empty file system with no capacity limit and no faults.
    pub fn new() -> Self {
        MemFs::from_state(State::default())
    }

    fn from_state(state: State) -> Self {
        MemFs {
            shared: Arc::new(Shared {
                state: Mutex::new(Rank::LeafMemFs, state),
            }),
        }
    }

    /// Builds the image a crash in `mode` would leave, as a new independent `MemFs`.
    ///
    /// The image holds no locks, no faults and zeroed counters; it keeps the capacity limit
    /// (same device). Every byte in it is durable. The same state, mode and `seed` always give
    /// the same image.
    pub fn crash(&self, mode: FsCrashMode, seed: u64) -> MemFs {
        self.crash_with(mode, seed, || ()).0
    }

    /// Like [`MemFs::crash`], but runs `during` while every operation of this file system is
    /// blocked, and returns its result with the image. Imaging another storage layer (the
    /// fast tier) inside `during` gives a consistent cut of both: an engine that orders a
    /// fast-tier write after a file operation (or the reverse) is seen in that order.
    pub fn crash_with<R>(
        &self,
        mode: FsCrashMode,
        seed: u64,
        during: impl FnOnce() -> R,
    ) -> (MemFs, R) {
        let s = self.shared.state.lock();
        let during_result = during();
        let mut rng = SplitMix64(seed);
        let mut img = State {
            dirs: s.dirs.clone(),
            capacity: s.capacity,
            ..State::default()
        };
        let source = if mode == FsCrashMode::KeepAll {
            &s.live
        } else {
            &s.durable
        };
        let mut mapped: HashMap<u64, u64> = HashMap::new();
        for (path, &ino) in source {
            let new_ino = match mapped.get(&ino) {
                Some(&n) => n,
                None => {
                    let data = match s.inodes.get(&ino) {
                        Some(inode) => crash_contents(inode, mode, &mut rng),
                        None => Vec::new(),
                    };
                    let n = img.new_inode();
                    let inode = img.inode(n);
                    inode.synced_len = data.len();
                    inode.data = data;
                    mapped.insert(ino, n);
                    n
                }
            };
            let inode = img.inode(new_ino);
            inode.live_links += 1;
            inode.durable_links += 1;
            img.live.insert(path.clone(), new_ino);
            img.durable.insert(path.clone(), new_ino);
        }
        (MemFs::from_state(img), during_result)
    }

    /// Adds a fault (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.shared.state.lock().faults.push(ActiveFault {
            fault,
            seen: 0,
            fired: 0,
        });
    }

    /// With `true`, records every operation from now on (see [`OpTrace`]; slow: a backtrace
    /// each); with `false`, only those an injected fault fails.
    pub fn trace_ops(&self, on: bool) {
        self.shared.state.lock().tracing = on;
    }

    /// The operations recorded since the last call (see [`OpTrace`]).
    pub fn take_traces(&self) -> Vec<OpTrace> {
        std::mem::take(&mut self.shared.state.lock().traces)
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.shared.state.lock().faults.clear();
    }

    /// How many operations injected faults have failed so far (a sweep uses it to tell
    /// whether its fault was reached).
    pub fn faults_fired(&self) -> u64 {
        self.shared.state.lock().faults_fired
    }

    /// Caps the bytes of all files (linked or still open); an append that would exceed it fails
    /// with ENOSPC and writes nothing. `None` removes the cap.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        self.shared.state.lock().capacity = capacity;
    }

    /// Operations of kind `op` attempted so far (failed ones included); `FaultOp::Any` gives
    /// the total.
    pub fn op_count(&self, op: FaultOp) -> u64 {
        let s = self.shared.state.lock();
        if op == FaultOp::Any {
            s.counts.iter().sum()
        } else {
            s.counts.get(op.index()).copied().unwrap_or(0)
        }
    }

    /// Bytes of all files that take space (linked in the live namespace or still open).
    pub fn total_bytes(&self) -> u64 {
        self.shared.state.lock().used_bytes()
    }

    /// The synced length of the live file `path` (test helper).
    pub fn synced_len(&self, path: &Path) -> Result<u64> {
        let mut s = self.shared.state.lock();
        let ino = s.live_inode(path, IoOp::Open)?;
        Ok(s.inode(ino).synced_len as u64)
    }

    /// XORs the byte at `offset` of the live file `path` with `xor` (bit rot, for corruption
    /// tests). Not counted and never faulted.
    pub fn corrupt(&self, path: &Path, offset: u64, xor: u8) -> Result<()> {
        let mut s = self.shared.state.lock();
        let ino = s.live_inode(path, IoOp::Write)?;
        let byte = usize::try_from(offset)
            .ok()
            .and_then(|o| s.inode(ino).data.get_mut(o));
        match byte {
            Some(b) => {
                *b ^= xor;
                Ok(())
            }
            None => Err(Error::invalid(format!(
                "cannot corrupt offset {offset} of {}: it is past the end of the file",
                path.display()
            ))),
        }
    }

    /// Sets the length of the live file `path` (shortening, or padding with zeros), like
    /// `ftruncate`; the synced length is clamped to it. Not counted and never faulted.
    pub fn truncate(&self, path: &Path, len: u64) -> Result<()> {
        let mut s = self.shared.state.lock();
        let ino = s.live_inode(path, IoOp::Write)?;
        let len = usize::try_from(len)
            .map_err(|_| Error::invalid(format!("length {len} is too large to truncate to")))?;
        let inode = s.inode(ino);
        inode.data.resize(len, 0);
        inode.synced_len = inode.synced_len.min(len);
        Ok(())
    }
}

/// The bytes of `inode` after a crash in `mode`.
fn crash_contents(inode: &Inode, mode: FsCrashMode, rng: &mut SplitMix64) -> Vec<u8> {
    let len = inode.data.len();
    let synced = inode.synced_len.min(len);
    let tail = len - synced;
    let mut data = inode.data.clone();
    match mode {
        FsCrashMode::KeepAll => return data,
        FsCrashMode::DropUnsynced => data.truncate(synced),
        FsCrashMode::RandomTail => data.truncate(synced + rng.up_to(tail)),
        FsCrashMode::GarbageTail => {
            for b in data.iter_mut().skip(synced) {
                *b = rng.next_u64().to_le_bytes()[0];
            }
        }
        FsCrashMode::ZeroTail => data.iter_mut().skip(synced).for_each(|b| *b = 0),
        FsCrashMode::RandomBlocks => {
            let mut start = synced;
            while start < len {
                let end = ((start / CRASH_BLOCK + 1) * CRASH_BLOCK).min(len);
                if rng.next_u64() & 1 == 0
                    && let Some(block) = data.get_mut(start..end)
                {
                    block.fill(0);
                }
                start = end;
            }
        }
    }
    let kept = data.len();
    for r in &inode.lost {
        if let Some(bytes) = data.get_mut(r.start.min(kept)..r.end.min(kept)) {
            bytes.fill(0);
        }
    }
    data
}

impl MemFs {
    /// A new (or truncated) file `path` for writing, as `create` makes it.
    fn writable(&self, path: &Path) -> Result<MemWritable> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Create, path, &[])?;
        let p = norm(path);
        if s.dirs.contains(&p) {
            return Err(os_err(IoOp::Open, path, EISDIR));
        }
        if !s.dir_exists(parent_of(&p)) {
            return Err(os_err(IoOp::Open, path, ENOENT));
        }
        let ino = match s.live.get(&p) {
            Some(&ino) => {
                let inode = s.inode(ino);
                inode.data.clear();
                inode.synced_len = 0;
                inode.lost.clear();
                ino
            }
            None => {
                let ino = s.new_inode();
                s.inode(ino).live_links = 1;
                s.live.insert(p, ino);
                ino
            }
        };
        s.inode(ino).handles += 1;
        Ok(MemWritable {
            shared: Arc::clone(&self.shared),
            ino,
            path: path.to_owned(),
            len: 0,
            mapped: None,
        })
    }
}

impl FileSystem for MemFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::CreateDir, dir, &[])?;
        let dir = norm(dir);
        let ancestors: Vec<PathBuf> = dir
            .ancestors()
            .filter(|a| !a.as_os_str().is_empty() && a.parent().is_some())
            .map(Path::to_path_buf)
            .collect();
        if let Some(file) = ancestors.iter().find(|a| s.live.contains_key(*a)) {
            return Err(os_err(IoOp::Open, file, ENOTDIR));
        }
        s.dirs.extend(ancestors);
        Ok(())
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(Box::new(self.writable(path)?))
    }

    fn create_mapped(
        &self,
        path: &Path,
        capacity: u64,
        writeback_bytes: u64,
    ) -> Result<Box<dyn WritableFile>> {
        let _ = writeback_bytes;
        let mut w = self.writable(path)?;
        // The reservation: ENOSPC without room for it.
        w.preallocate(capacity)?;
        let capacity = usize::try_from(capacity)
            .map_err(|_| Error::invalid(format!("capacity {capacity} is too large")))?;
        // As `StdFs`'s: the file is its capacity long at once (not synced), zeros.
        self.shared
            .state
            .lock()
            .inode(w.ino)
            .data
            .resize(capacity, 0);
        w.mapped = Some(capacity);
        Ok(Box::new(w))
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path, false)
    }

    /// Reads the live file as `open` does, and aborts the process on a read that would raise
    /// `SIGBUS` on `StdFs`'s mapping: within the length at open, past the current end (the
    /// file was shortened since). The model, crash and fault tests thereby check that the
    /// engine never reads a mapped file past its end.
    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_random(path, true)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Rename, from, &[to])?;
        let ino = s.live_inode(from, IoOp::Rename)?;
        let (f, t) = (norm(from), norm(to));
        if s.dirs.contains(&t) {
            return Err(os_err(IoOp::Rename, to, EISDIR));
        }
        if !s.dir_exists(parent_of(&t)) {
            return Err(os_err(IoOp::Rename, to, ENOENT));
        }
        if f == t {
            return Ok(());
        }
        s.live.remove(&f);
        if let Some(old) = s.live.insert(t, ino) {
            let inode = s.inode(old);
            inode.live_links = inode.live_links.saturating_sub(1);
            s.gc(old);
        }
        Ok(())
    }

    fn remove(&self, path: &Path) -> Result<()> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Remove, path, &[])?;
        let ino = s.live_inode(path, IoOp::Remove)?;
        s.live.remove(&norm(path));
        let inode = s.inode(ino);
        inode.live_links = inode.live_links.saturating_sub(1);
        s.gc(ino);
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::List, dir, &[])?;
        let d = norm(dir);
        if !s.dir_exists(&d) {
            let code = if s.live.contains_key(&d) {
                ENOTDIR
            } else {
                ENOENT
            };
            return Err(os_err(IoOp::List, dir, code));
        }
        let files = s.live.keys();
        let dirs = s.dirs.iter();
        let mut names: Vec<String> = files
            .chain(dirs)
            .filter(|p| p.parent() == Some(d.as_path()))
            .filter_map(|p| p.file_name()?.to_str().map(str::to_owned))
            .collect();
        names.sort();
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Exists, path, &[])?;
        let p = norm(path);
        Ok(s.live.contains_key(&p) || s.dir_exists(&p))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::SyncDir, dir, &[])?;
        let d = norm(dir);
        if !s.dir_exists(&d) {
            return Err(os_err(IoOp::Sync, dir, ENOENT));
        }
        let in_dir = |p: &PathBuf| p.parent() == Some(d.as_path());
        let old: Vec<(PathBuf, u64)> = s
            .durable
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        let new: Vec<(PathBuf, u64)> = s
            .live
            .iter()
            .filter(|(p, _)| in_dir(p))
            .map(|(p, &i)| (p.clone(), i))
            .collect();
        for (p, ino) in &old {
            s.durable.remove(p);
            let inode = s.inode(*ino);
            inode.durable_links = inode.durable_links.saturating_sub(1);
        }
        for (p, ino) in new {
            s.inode(ino).durable_links += 1;
            s.durable.insert(p, ino);
        }
        for (_, ino) in old {
            s.gc(ino);
        }
        Ok(())
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Sync, &[path]);
        let ino = *s
            .live
            .get(&norm(path))
            .ok_or_else(|| os_err(IoOp::Sync, path, ENOENT))?;
        let inode = s.inode(ino);
        let len = inode.data.len();
        match fault {
            Some(kind) => {
                // As a failed `WritableFile::sync`: the unsynced bytes never reach the disk.
                if inode.synced_len < len {
                    inode.lost.push(inode.synced_len..len);
                }
                Err(os_err(IoOp::Sync, path, kind.raw_os_error()))
            }
            None => {
                inode.synced_len = len;
                Ok(())
            }
        }
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let mut s = self.shared.state.lock();
        s.check_err(FaultOp::Lock, path, &[])?;
        let p = norm(path);
        if s.dirs.contains(&p) {
            return Err(os_err(IoOp::Lock, path, EISDIR));
        }
        if !s.dir_exists(parent_of(&p)) {
            return Err(os_err(IoOp::Lock, path, ENOENT));
        }
        if s.locks.contains(&p) {
            return Err(Error::Locked {
                path: path.to_owned(),
            });
        }
        if !s.live.contains_key(&p) {
            let ino = s.new_inode();
            s.inode(ino).live_links = 1;
            s.live.insert(p.clone(), ino);
        }
        s.locks.insert(p.clone());
        Ok(Box::new(MemLock {
            shared: Arc::clone(&self.shared),
            path: p,
        }))
    }
}

#[cfg(test)]
mod tests;
