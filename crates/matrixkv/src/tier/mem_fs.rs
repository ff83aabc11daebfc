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
use fault::ActiveFault;
pub use fault::{Fault, FaultKind, FaultOp};

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

struct MemWritable {
    shared: Arc<Shared>,
    ino: u64,
    path: PathBuf,
    len: u64,
    /// A mapped file's capacity (`FileSystem::create_mapped`), until its first `sync`
    /// (`sync_appended` keeps it): the file is that long, zeros past the appends, which
    /// overwrite them in place.
    mapped: Option<usize>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Write, &[&self.path]);
        let data = match fault {
            Some(FaultKind::ShortWrite) => data.get(..data.len() / 2).unwrap_or_default(),
            Some(kind) => return Err(os_err(IoOp::Write, &self.path, kind.raw_os_error())),
            None => {
                if let Some(cap) = s.capacity
                    && self.in_place(data.len()).is_none()
                    && s.used_bytes().saturating_add(data.len() as u64) > cap
                {
                    return Err(os_err(IoOp::Write, &self.path, ENOSPC));
                }
                data
            }
        };
        match self.in_place(data.len()) {
            // Into the reserved capacity: no new space.
            Some(at) => s.inode(self.ino).data[at..at + data.len()].copy_from_slice(data),
            None => {
                // Past it: the rest of the file is appended (the real file leaves the mapping).
                self.mapped = None;
                let inode = s.inode(self.ino);
                let len = self.len as usize;
                inode.data.truncate(len);
                inode.synced_len = inode.synced_len.min(len);
                inode.data.extend_from_slice(data);
            }
        }
        self.len += data.len() as u64;
        match fault {
            Some(kind) => Err(os_err(IoOp::Write, &self.path, kind.raw_os_error())),
            None => Ok(()),
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.sync_keeping_mapping(false)
    }

    fn sync_appended(&mut self) -> Result<()> {
        self.sync_keeping_mapping(true)
    }

    fn flush(&mut self) -> Result<()> {
        // Appends reach the file's data at once (the kernel's page cache, in the model).
        Ok(())
    }

    fn preallocate(&mut self, bytes: u64) -> Result<()> {
        // Modelled by its failure only: no room for the reservation is ENOSPC.
        let s = self.shared.state.lock();
        match s.capacity {
            Some(cap) if s.used_bytes().saturating_add(bytes) > cap => {
                Err(os_err(IoOp::Write, &self.path, ENOSPC))
            }
            _ => Ok(()),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl MemWritable {
    /// `sync` (`keep`: `sync_appended`): a mapped file is shortened to its appends and written
    /// with write() from then on, unless `keep`, when it stays its capacity long and only its
    /// appends count as synced: what is appended in place after this call is the unsynced
    /// tail a crash may drop, zero or garble (on StdFs the zeros past the appends are durable
    /// too, which tells a reader nothing more: it trusts only records it has pointers to).
    fn sync_keeping_mapping(&mut self, keep: bool) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Sync, &[&self.path]);
        let inode = s.inode(self.ino);
        if !keep && self.mapped.take().is_some() {
            let len = self.len as usize;
            inode.data.truncate(len);
            inode.synced_len = inode.synced_len.min(len);
        }
        // Still mapped only if `keep`.
        let len = if self.mapped.is_some() {
            usize::try_from(self.len)
                .unwrap_or(usize::MAX)
                .min(inode.data.len())
        } else {
            inode.data.len()
        };
        match fault {
            Some(kind) => {
                if inode.synced_len < len {
                    inode.lost.push(inode.synced_len..len);
                }
                Err(os_err(IoOp::Sync, &self.path, kind.raw_os_error()))
            }
            None => {
                inode.synced_len = inode.synced_len.max(len);
                Ok(())
            }
        }
    }

    /// Where `n` appended bytes go into a mapped file's reserved capacity, if they fit.
    fn in_place(&self, n: usize) -> Option<usize> {
        let at = usize::try_from(self.len).ok()?;
        self.mapped.filter(|&cap| at + n <= cap).map(|_| at)
    }
}

impl Drop for MemWritable {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock();
        let inode = s.inode(self.ino);
        inode.handles = inode.handles.saturating_sub(1);
        s.gc(self.ino);
    }
}

struct MemRandom {
    shared: Arc<Shared>,
    ino: u64,
    path: PathBuf,
    len: u64,
    /// Opened with `open_mapped`: a read of the first `len` bytes (the mapped length) past
    /// the file's current end is what raises `SIGBUS` on a real mapping, so it aborts the
    /// process here too (see `RandomAccessFile::read_exact_at`).
    mapped: bool,
}

impl fmt::Debug for MemRandom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemRandom")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Read, &[&self.path]);
        if let Some(kind) = fault
            && kind != FaultKind::CorruptRead
        {
            return Err(os_err(IoOp::Read, &self.path, kind.raw_os_error()));
        }
        let end = offset.checked_add(buf.len() as u64);
        let now = s.inode(self.ino).data.len() as u64;
        if self.mapped && end.is_some_and(|e| e <= self.len && e > now) {
            // A read past the end of a shortened mapped file: `SIGBUS` on `StdFs`.
            eprintln!(
                "MemFs: a read of {} bytes at {offset} of {}, mapped at {} bytes, passes its \
                 end at {now}: a real mapping raises SIGBUS here",
                buf.len(),
                self.path.display(),
                self.len
            );
            std::process::abort();
        }
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(buf.len())?))
            .and_then(|r| s.inode(self.ino).data.get(r))
            .ok_or_else(|| eof_err(&self.path))?;
        buf.copy_from_slice(src);
        if fault.is_some()
            && let Some(last) = buf.last_mut()
        {
            *last ^= 0x01;
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemRandom {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock();
        let inode = s.inode(self.ino);
        inode.handles = inode.handles.saturating_sub(1);
        s.gc(self.ino);
    }
}

struct MemLock {
    shared: Arc<Shared>,
    path: PathBuf,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock").field("path", &self.path).finish()
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.shared.state.lock().locks.remove(&self.path);
    }
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
mod tests {
    use super::*;

    const DIR: &str = "/db";

    fn fs_with_dir() -> MemFs {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new(DIR)).unwrap();
        fs
    }

    fn p(name: &str) -> PathBuf {
        Path::new(DIR).join(name)
    }

    fn write(fs: &MemFs, name: &str, data: &[u8], sync: bool) -> Box<dyn WritableFile> {
        let mut w = fs.create(&p(name)).unwrap();
        w.append(data).unwrap();
        if sync {
            w.sync().unwrap();
        }
        w
    }

    fn read(fs: &MemFs, name: &str) -> Vec<u8> {
        fs.read_all(&p(name)).unwrap()
    }

    fn raw_os_error(e: &Error) -> Option<i32> {
        match e {
            Error::Io { source, .. } => source.raw_os_error(),
            _ => None,
        }
    }

    #[test]
    fn synced_data_survives_drop_unsynced_and_unsynced_data_does_not() {
        let fs = fs_with_dir();
        let mut w = write(&fs, "a", b"durable", true);
        w.append(b" volatile").unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        assert_eq!(read(&fs, "a"), b"durable volatile");
        let img = fs.crash(FsCrashMode::DropUnsynced, 1);
        assert_eq!(read(&img, "a"), b"durable");
        let img = fs.crash(FsCrashMode::KeepAll, 1);
        assert_eq!(read(&img, "a"), b"durable volatile");
    }

    #[test]
    fn created_file_without_dir_sync_vanishes_in_drop_unsynced_but_not_keep_all() {
        let fs = fs_with_dir();
        drop(write(&fs, "new", b"data", true));
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert!(!img.exists(&p("new")).unwrap());
        assert!(img.list(Path::new(DIR)).unwrap().is_empty());
        let img = fs.crash(FsCrashMode::KeepAll, 0);
        assert_eq!(read(&img, "new"), b"data");
    }

    #[test]
    fn rename_is_durable_only_after_dir_sync() {
        let fs = fs_with_dir();
        drop(write(&fs, "tmp", b"v1", true));
        fs.sync_dir(Path::new(DIR)).unwrap();
        fs.rename(&p("tmp"), &p("CURRENT")).unwrap();
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert_eq!(img.list(Path::new(DIR)).unwrap(), vec!["tmp".to_string()]);
        assert_eq!(read(&img, "tmp"), b"v1");
        fs.sync_dir(Path::new(DIR)).unwrap();
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert_eq!(
            img.list(Path::new(DIR)).unwrap(),
            vec!["CURRENT".to_string()]
        );
        assert_eq!(read(&img, "CURRENT"), b"v1");
    }

    #[test]
    fn removed_file_reappears_after_crash_without_dir_sync() {
        let fs = fs_with_dir();
        drop(write(&fs, "old.sst", b"table", true));
        fs.sync_dir(Path::new(DIR)).unwrap();
        fs.remove(&p("old.sst")).unwrap();
        assert!(!fs.exists(&p("old.sst")).unwrap());
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert_eq!(read(&img, "old.sst"), b"table");
        fs.sync_dir(Path::new(DIR)).unwrap();
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert!(!img.exists(&p("old.sst")).unwrap());
    }

    #[test]
    fn random_tail_keeps_a_prefix_of_the_unsynced_tail_deterministically() {
        let fs = fs_with_dir();
        let data: Vec<u8> = (0..200u8).collect();
        let mut w = write(&fs, "log", data.get(..50).unwrap(), true);
        w.append(data.get(50..).unwrap()).unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        let mut lengths = BTreeSet::new();
        for seed in 0..64 {
            let got = read(&fs.crash(FsCrashMode::RandomTail, seed), "log");
            assert!((50..=200).contains(&got.len()), "len {}", got.len());
            assert_eq!(got.as_slice(), data.get(..got.len()).unwrap());
            let again = read(&fs.crash(FsCrashMode::RandomTail, seed), "log");
            assert_eq!(got, again, "seed {seed} must give the same image");
            lengths.insert(got.len());
        }
        assert!(
            lengths.len() > 10,
            "tails should vary with the seed: {lengths:?}"
        );
    }

    #[test]
    fn garbage_tail_keeps_the_length_but_changes_unsynced_bytes() {
        let fs = fs_with_dir();
        let mut w = write(&fs, "log", b"synced--", true);
        w.append(&[0xAB; 64]).unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        let got = read(&fs.crash(FsCrashMode::GarbageTail, 7), "log");
        assert_eq!(got.len(), 8 + 64);
        assert_eq!(got.get(..8).unwrap(), b"synced--");
        assert_ne!(got.get(8..).unwrap(), &[0xAB; 64][..]);
        let zeroed = read(&fs.crash(FsCrashMode::ZeroTail, 7), "log");
        assert_eq!(zeroed.get(8..).unwrap(), &[0u8; 64][..]);
    }

    #[test]
    fn random_blocks_keeps_the_length_and_zeroes_or_keeps_whole_blocks() {
        let fs = fs_with_dir();
        let mut w = write(&fs, "sst", &[1u8; 100], true);
        w.append(&[9u8; 8 * CRASH_BLOCK]).unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        let got = read(&fs.crash(FsCrashMode::RandomBlocks, 3), "sst");
        assert_eq!(got.len(), 100 + 8 * CRASH_BLOCK);
        assert_eq!(got.get(..100).unwrap(), &[1u8; 100][..]);
        let mut kept = 0;
        let mut zeroed = 0;
        // Blocks are aligned to file offsets, so the first unsynced piece is short.
        for piece in got
            .get(100..CRASH_BLOCK)
            .into_iter()
            .chain(got.get(CRASH_BLOCK..).unwrap().chunks(CRASH_BLOCK))
        {
            if piece.iter().all(|&b| b == 9) {
                kept += 1;
            } else if piece.iter().all(|&b| b == 0) {
                zeroed += 1;
            } else {
                panic!("a block was partly kept");
            }
        }
        assert!(kept > 0 && zeroed > 0, "kept {kept}, zeroed {zeroed}");
    }

    #[test]
    fn second_lock_is_refused_until_the_guard_is_dropped() {
        let fs = fs_with_dir();
        let guard = fs.lock(&p("LOCK")).unwrap();
        let err = fs.lock(&p("LOCK")).unwrap_err();
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        assert!(fs.clone().lock(&p("LOCK")).is_err(), "clones share locks");
        assert!(fs.exists(&p("LOCK")).unwrap(), "lock file is created");
        fs.sync_dir(Path::new(DIR)).unwrap();
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert!(img.lock(&p("LOCK")).is_ok(), "crash image holds no locks");
        drop(guard);
        assert!(fs.lock(&p("LOCK")).is_ok());
    }

    #[test]
    fn fault_fires_after_n_matching_ops_then_stops() {
        let fs = fs_with_dir();
        fs.inject(
            Fault::new(FaultOp::Write, FaultKind::Eio)
                .on_path("sst")
                .after(2)
                .times(1),
        );
        let mut log = fs.create(&p("x.log")).unwrap();
        for _ in 0..5 {
            log.append(b"l").unwrap();
        }
        let mut w = fs.create(&p("1.sst")).unwrap();
        w.append(b"a").unwrap();
        w.append(b"b").unwrap();
        let err = w.append(b"c").unwrap_err();
        assert_eq!(raw_os_error(&err), Some(5), "EIO");
        assert!(matches!(
            err,
            Error::Io {
                op: IoOp::Write,
                ..
            }
        ));
        w.append(b"d").unwrap();
        assert_eq!(read(&fs, "1.sst"), b"abd", "a failed append writes nothing");
        assert_eq!(fs.faults_fired(), 1);
        fs.inject(Fault::new(FaultOp::Sync, FaultKind::NoSpace));
        assert!(w.sync().unwrap_err().is_no_space());
        fs.clear_faults();
        w.sync().unwrap();
    }

    #[test]
    fn sweep_fails_each_counted_operation_in_turn() {
        fn workload(fs: &MemFs) -> Result<()> {
            fs.create_dir_all(Path::new(DIR))?;
            let mut w = fs.create(&p("t"))?;
            w.append(b"abc")?;
            w.sync()?;
            drop(w);
            fs.rename(&p("t"), &p("f"))?;
            fs.sync_dir(Path::new(DIR))?;
            let r = fs.open(&p("f"))?;
            r.read_exact_at(0, &mut [0u8; 3])
        }
        let counting = MemFs::new();
        workload(&counting).unwrap();
        let n = counting.op_count(FaultOp::Any);
        assert_eq!(n, 8);
        assert_eq!(counting.op_count(FaultOp::Write), 1);
        for i in 0..n {
            let fs = MemFs::new();
            fs.inject(Fault::new(FaultOp::Any, FaultKind::Eio).after(i).times(1));
            assert!(workload(&fs).is_err(), "op {i} should fail");
            assert_eq!(fs.faults_fired(), 1);
        }
    }

    #[test]
    fn appends_beyond_capacity_fail_with_no_space_and_write_nothing() {
        let fs = fs_with_dir();
        fs.set_capacity(Some(10));
        let mut w = fs.create(&p("a")).unwrap();
        w.append(b"12345678").unwrap();
        let err = w.append(b"abc").unwrap_err();
        assert!(err.is_no_space(), "{err}");
        assert_eq!(fs.total_bytes(), 8);
        assert_eq!(w.len(), 8);
        drop(w);
        let mut w2 = fs.create(&p("b")).unwrap();
        assert!(w2.append(b"abc").is_err());
        fs.remove(&p("a")).unwrap();
        assert_eq!(fs.total_bytes(), 0, "removing frees space");
        w2.append(b"abc").unwrap();
    }

    #[test]
    fn open_handle_reads_the_file_after_removal_and_replacement() {
        let fs = fs_with_dir();
        drop(write(&fs, "f", b"first", false));
        let r = fs.open(&p("f")).unwrap();
        fs.remove(&p("f")).unwrap();
        assert!(matches!(
            fs.open(&p("f")).unwrap_err(),
            Error::Io { op: IoOp::Open, .. }
        ));
        drop(write(&fs, "g", b"other", false));
        fs.rename(&p("g"), &p("f")).unwrap();
        let mut buf = [0u8; 5];
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"first");
        assert_eq!(r.len(), 5);
        assert_eq!(
            fs.total_bytes(),
            10,
            "the open removed file still takes space"
        );
        drop(r);
        assert_eq!(fs.total_bytes(), 5);
    }

    #[test]
    fn missing_files_are_not_found_and_reads_past_the_end_are_eof() {
        let fs = fs_with_dir();
        let err = fs.open(&p("nope")).unwrap_err();
        match &err {
            Error::Io {
                op: IoOp::Open,
                source,
                ..
            } => assert_eq!(source.kind(), io::ErrorKind::NotFound),
            other => panic!("unexpected {other}"),
        }
        assert!(
            fs.create(Path::new("/nodir/f")).is_err(),
            "parent must exist"
        );
        assert!(fs.rename(&p("nope"), &p("x")).is_err());
        assert!(fs.remove(&p("nope")).is_err());
        drop(write(&fs, "f", b"abc", false));
        let r = fs.open(&p("f")).unwrap();
        match r.read_exact_at(2, &mut [0u8; 2]).unwrap_err() {
            Error::Io { source, .. } => {
                assert_eq!(source.kind(), io::ErrorKind::UnexpectedEof);
            }
            other => panic!("unexpected {other}"),
        }
        assert!(r.read_exact_at(u64::MAX, &mut [0u8; 1]).is_err());
    }

    #[test]
    fn list_names_files_and_subdirectories_of_one_directory() {
        let fs = fs_with_dir();
        fs.create_dir_all(&p("sub/deeper")).unwrap();
        drop(write(&fs, "b", b"", false));
        drop(write(&fs, "a", b"", false));
        drop(write(&fs, "sub/inner", b"", false));
        assert_eq!(fs.list(Path::new(DIR)).unwrap(), vec!["a", "b", "sub"]);
        assert_eq!(fs.list(&p("sub")).unwrap(), vec!["deeper", "inner"]);
        assert!(fs.list(Path::new("/missing")).is_err());
        assert!(fs.exists(&p("sub")).unwrap());
        // Directories are durable at once.
        let img = fs.crash(FsCrashMode::DropUnsynced, 0);
        assert_eq!(img.list(Path::new(DIR)).unwrap(), vec!["sub"]);
    }

    #[test]
    fn corrupt_flips_a_byte_and_truncate_shortens() {
        let fs = fs_with_dir();
        drop(write(&fs, "f", b"abcd", true));
        fs.corrupt(&p("f"), 1, 0x20).unwrap();
        assert_eq!(read(&fs, "f"), b"aBcd");
        assert!(fs.corrupt(&p("f"), 4, 1).is_err());
        fs.truncate(&p("f"), 2).unwrap();
        assert_eq!(read(&fs, "f"), b"aB");
        assert_eq!(fs.synced_len(&p("f")).unwrap(), 2);
        fs.truncate(&p("f"), 3).unwrap();
        assert_eq!(read(&fs, "f"), b"aB\0");
    }

    #[test]
    fn failed_sync_loses_the_tail_even_if_a_retry_succeeds() {
        let fs = fs_with_dir();
        let mut w = write(&fs, "m", b"ok", true);
        w.append(b"lost").unwrap();
        fs.inject(Fault::new(FaultOp::Sync, FaultKind::Eio).times(1));
        assert!(w.sync().is_err());
        w.append(b"new").unwrap();
        w.sync().unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        assert_eq!(read(&fs, "m"), b"oklostnew", "the page cache still has it");
        assert_eq!(
            read(&fs.crash(FsCrashMode::DropUnsynced, 0), "m"),
            b"ok\0\0\0\0new"
        );
        assert_eq!(read(&fs.crash(FsCrashMode::KeepAll, 0), "m"), b"oklostnew");
    }

    #[test]
    fn short_write_appends_half_and_corrupt_read_flips_the_last_byte() {
        let fs = fs_with_dir();
        fs.inject(Fault::new(FaultOp::Write, FaultKind::ShortWrite).times(1));
        let mut w = fs.create(&p("f")).unwrap();
        assert!(w.append(b"abcdef").is_err());
        assert_eq!(read(&fs, "f"), b"abc");
        fs.inject(Fault::new(FaultOp::Read, FaultKind::CorruptRead).times(1));
        let r = fs.open(&p("f")).unwrap();
        let mut buf = [0u8; 3];
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"abb");
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(&buf, b"abc");
    }

    #[test]
    fn a_mapped_file_is_its_capacity_long_until_its_first_sync_and_a_crash_may_keep_it_so() {
        let fs = MemFs::new();
        fs.create_dir_all(Path::new("/d")).unwrap();
        let p = Path::new("/d/m");
        let mut w = fs.create_mapped(p, 100, 0).unwrap();
        w.append(b"abc").unwrap();
        w.append(b"def").unwrap();
        let mut expected = b"abcdef".to_vec();
        expected.resize(100, 0);
        assert_eq!(fs.read_all(p).unwrap(), expected);
        fs.sync_dir(Path::new("/d")).unwrap();
        let crashed = fs.crash(FsCrashMode::KeepAll, 1);
        assert_eq!(crashed.read_all(p).unwrap(), expected, "a process crash");
        assert!(
            fs.crash(FsCrashMode::DropUnsynced, 1)
                .read_all(p)
                .unwrap()
                .is_empty(),
            "nothing was synced"
        );
        w.sync().unwrap();
        assert_eq!(fs.read_all(p).unwrap(), b"abcdef");
        w.append(b"ghi").unwrap();
        w.sync().unwrap();
        assert_eq!(fs.read_all(p).unwrap(), b"abcdefghi");
        // Past the capacity the file grows as any other.
        let mut w = fs.create_mapped(Path::new("/d/n"), 4, 0).unwrap();
        w.append(b"abc").unwrap();
        w.append(b"defg").unwrap();
        assert_eq!(fs.read_all(Path::new("/d/n")).unwrap(), b"abcdefg");
    }

    #[test]
    fn a_sync_of_the_appends_keeps_a_mapped_file_its_capacity_long_and_durable() {
        let fs = fs_with_dir();
        let mut w = fs.create_mapped(&p("v"), 32, 0).unwrap();
        w.append(b"abc").unwrap();
        w.sync_appended().unwrap();
        fs.sync_dir(Path::new(DIR)).unwrap();
        let mut expected = b"abc".to_vec();
        expected.resize(32, 0);
        assert_eq!(read(&fs, "v"), expected, "still its capacity long");
        assert_eq!(
            read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
            b"abc",
            "the appends survive a power loss"
        );
        // Later appends still overwrite the reserved zeros in place, and are the unsynced
        // tail until the next sync...
        w.append(b"def").unwrap();
        expected[3..6].copy_from_slice(b"def");
        assert_eq!(read(&fs, "v"), expected);
        assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"), b"abc");
        w.sync_appended().unwrap();
        assert_eq!(
            read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
            b"abcdef"
        );
        // ...and the last sync shortens the file to them.
        w.sync().unwrap();
        assert_eq!(
            read(&fs.crash(FsCrashMode::DropUnsynced, 0), "v"),
            b"abcdef"
        );
    }

    #[test]
    fn a_mapped_handle_reads_the_live_file_and_what_was_appended_past_its_length() {
        let fs = fs_with_dir();
        let mut w = fs.create_mapped(&p("v"), 64, 0).unwrap();
        w.append(b"0123456789").unwrap();
        w.flush().unwrap();
        // The file is its capacity long until its first sync: the mapping covers it.
        let f = fs.open_mapped(&p("v")).unwrap();
        assert_eq!(f.len(), 64);
        let mut buf = [0u8; 4];
        f.read_exact_at(3, &mut buf).unwrap();
        assert_eq!(&buf, b"3456");
        // The sync shortens it to the bytes appended; reads below them go on, and so do reads
        // of what is appended after it, past the mapped length too.
        w.sync().unwrap();
        f.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"6789");
        w.append(&[b'x'; 100]).unwrap();
        w.flush().unwrap();
        let mut tail = [0u8; 20];
        f.read_exact_at(60, &mut tail).unwrap();
        assert_eq!(tail, [b'x'; 20]);
        // Past the current end and the mapped length: an error, as `pread` gives.
        assert!(f.read_exact_at(200, &mut buf).is_err());
    }

    #[test]
    fn create_over_an_existing_file_truncates_it() {
        let fs = fs_with_dir();
        drop(write(&fs, "f", b"old contents", true));
        fs.sync_dir(Path::new(DIR)).unwrap();
        let mut w = fs.create(&p("f")).unwrap();
        assert_eq!(read(&fs, "f"), b"");
        w.append(b"new").unwrap();
        assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "f"), b"");
        w.sync().unwrap();
        assert_eq!(read(&fs.crash(FsCrashMode::DropUnsynced, 0), "f"), b"new");
    }

    #[test]
    fn crash_image_is_independent_and_fully_durable() {
        let fs = fs_with_dir();
        let mut w = write(&fs, "f", b"abc", false);
        let img = fs.crash(FsCrashMode::KeepAll, 0);
        w.append(b"def").unwrap();
        assert_eq!(read(&img, "f"), b"abc");
        assert_eq!(
            img.op_count(FaultOp::Any),
            2,
            "only the open and read of read_all"
        );
        let again = img.crash(FsCrashMode::DropUnsynced, 0);
        assert_eq!(read(&again, "f"), b"abc");
    }

    #[test]
    fn clones_share_files_across_threads() {
        let fs = fs_with_dir();
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let fs = fs.clone();
                std::thread::spawn(move || {
                    let mut w = fs.create(&p(&format!("t{t}"))).unwrap();
                    for _ in 0..100 {
                        w.append(&[t; 10]).unwrap();
                    }
                    w.sync().unwrap();
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(fs.total_bytes(), 4000);
        assert_eq!(fs.op_count(FaultOp::Write), 400);
    }
}
