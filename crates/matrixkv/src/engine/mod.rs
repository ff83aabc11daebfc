//! The engine behind [`crate::Db`]: shared state, background threads, and the pipeline stages
//! (write path, flush, compaction, reads, recovery), one file each.
//!
//! # Locks and their order
//!
//! The one list is [`crate::lock_order::Rank`]: every engine lock is made with its rank, and
//! debug and `testing` builds panic when a thread takes a lock out of that order
//! (docs/concurrency.md says what each guards and which are held across I/O).
//!
//! Condition variables: `bg_cv` (with `state`) is signalled when background work finished or
//! failed; `work_cv` (with `state`) when there is new background work or shutdown, which also
//! bumps `State::work_gen` for the compaction thread to check after a step that released
//! `state` (docs/concurrency.md, "Condition variables").

mod admission;
mod bg_error;
pub(crate) mod checkpoint;
mod compact;
mod fast_room;
mod files;
mod flush;
mod jobs;
mod keyspaces;
pub(crate) mod level_readers;
pub(crate) mod levels;
mod manual;
pub(crate) mod matrix;
pub(crate) mod partitioned;
mod read;
mod read_only;
mod recovery;
pub(crate) mod separate_at_write;
mod separation;
pub(crate) mod single_level;
#[cfg(any(test, feature = "testing"))]
pub(crate) mod test_hooks;
pub(crate) mod updates;
pub(crate) mod visible_seq;
mod wal_recycle;
mod write;

/// Helpers for the engine's unit tests.
#[cfg(test)]
pub(crate) mod testutil {
    use std::sync::Arc;

    use crate::tier::{MemFs, SimFastTier};

    /// Opens `o` at `/db` on simulated tiers (an in-memory file system and fast tier).
    pub(crate) fn open_simulated(mut o: crate::Options) -> crate::Db {
        let fs = MemFs::new();
        o.tiers = Some(crate::Tiers {
            slow_fs: Arc::new(fs.clone()),
            fast_fs: Arc::new(fs),
            fast: Arc::new(SimFastTier::new("/db/fast")),
        });
        crate::Db::open(o).unwrap()
    }
}

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use crate::lock_order::{Condvar, Mutex, RwLock};

use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::layout::FileNum;
use crate::memtable::MemTable;
use crate::options::{Options, Tiers};
use crate::sst::cache::BlockCache;
use crate::stats::Counters;
use crate::tier::FileLock;
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::version::version::Version;
use crate::wal;

pub(crate) use files::TableCache;
pub(crate) use manual::ManualCompaction;
pub(crate) use read_only::BytesRegion;
pub(crate) use recovery::{open, open_read_only};
pub(crate) use write::{Waiter, single};

/// An immutable memtable waiting for its flush, with the WAL segment that holds its data.
#[derive(Clone)]
pub(crate) struct ImmMem {
    pub mem: Arc<MemTable>,
    pub wal: FileNum,
    /// The segment's sequence numbers start here: its records' are all at least this, every
    /// older segment's below it (its first record's, if it has one).
    pub first_seq: SeqNo,
    /// The segment's mapped region, recycled once the flush is recorded.
    pub region: Option<wal_recycle::SegmentRegion>,
}

/// What readers see: the memtables and the version, swapped atomically as one.
pub(crate) struct ReadView {
    pub mem: Arc<MemTable>,
    /// Immutable memtables, newest first.
    pub imm: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
    /// The global index as of `version` (the SLM-DB design).
    pub index: Option<Arc<single_level::IndexView>>,
}

impl ReadView {
    /// The range tombstones of every memtable and of the version (empty, and cheap, when
    /// there are none).
    pub fn range_dels(&self) -> crate::range_del::RangeDelView {
        let mut v = crate::range_del::RangeDelView::default();
        for m in std::iter::once(&self.mem).chain(&self.imm) {
            m.add_range_dels_to(&mut v);
        }
        if !self.version.range_dels().is_empty() {
            v.push(Arc::clone(self.version.range_dels()));
        }
        v
    }
}

/// State guarded by `DbInner::state`.
pub(crate) struct State {
    pub versions: VersionSet,
    /// Immutable memtables, oldest first.
    pub imm: VecDeque<ImmMem>,
    /// The active memtable (also held by the writer context).
    pub mem: Arc<MemTable>,
    /// WAL segment of the active memtable.
    pub mem_wal: FileNum,
    /// The active segment's sequence numbers start here (set at the memtable switch: the
    /// sequence after the last committed one).
    pub mem_wal_first_seq: SeqNo,
    /// Live snapshots: sequence number → number of handles.
    pub snapshots: BTreeMap<u64, usize>,
    /// First failure that stopped writes.
    pub poison: Option<String>,
    /// Table numbers being written by a job, protected from obsolete-file deletion.
    pub pending_outputs: BTreeSet<u64>,
    /// A flush job is running.
    pub flushing: bool,
    /// A compaction job is running.
    pub compacting: bool,
    /// Bumped (with `work_cv` notified) by every change that may give the compaction thread
    /// work ([`DbInner::signal_work`]): the thread compares it across a step that released
    /// the lock, so a notification sent while it was not waiting is not lost.
    pub work_gen: u64,
    /// Pause before the flush job runs again after a no-space failure.
    pub flush_retry: bg_error::Retry,
    /// Pause before a compaction runs again after a failure.
    pub compaction_retry: bg_error::Retry,
    /// Background work is failing for lack of space (writers waiting for it give up after
    /// `no_space_timeout`).
    pub no_space: Option<bg_error::NoSpace>,
    /// What a failed manifest append named, reserved until a new manifest replaces it.
    pub unsettled: bg_error::Unsettled,
    /// Close was requested.
    pub shutting_down: bool,
    /// The manual compaction requested by `Db::compact_range` (one at a time), until its
    /// caller takes the result.
    pub manual: Option<manual::ManualCompaction>,
    /// Free pages of the matrix container (`None` in the SSTable L0 layout).
    pub pool: Option<crate::matrix::pages::PagePool>,
    /// A flush is waiting for container pages: a role switch is due even below
    /// `receiver_switch_ratio` (pages an old reader pins may keep the receiver from ever
    /// reaching it).
    pub flush_needs_pages: bool,
    /// Pages no longer in the current version, returned to the pool once no live version
    /// (reader, iterator) references them.
    pub deferred_pages: Vec<u32>,
    /// A thread is deciding which deferred pages to free (without the lock); others skip.
    pub releasing_pages: bool,
    /// Obsolete WAL segments (below the log number) not yet recycled or deleted, oldest
    /// first: handed over by flushes, or kept from the previous run at open. The newest
    /// `Options::wal_retention_segments` of them that hold records and every one a live
    /// `UpdatesIter` pins stay readable (for `Db::updates_since`); obsolete-file deletion
    /// recycles (or deletes) the others (`wal_recycle::take_aged_wals`).
    pub retired_wals: VecDeque<wal_recycle::RetiredWal>,
    /// The oldest segment number new `UpdatesIter`s may read from `retired_wals`: a newer
    /// segment with records went while older ones stayed pinned, so the history below it has
    /// a gap (those are kept only for the iterators that pin them).
    pub wal_history_from: FileNum,
    /// The global index as of the current version (the SLM-DB design): replaced when one of
    /// its jobs installs an edit, under the index's commit lock.
    pub index_view: Option<Arc<single_level::IndexView>>,
    /// WAL segments pinned by live `UpdatesIter`s: (oldest, newest) segment number of each
    /// iterator's range → number of iterators with that range. Obsolete-file deletion neither
    /// recycles nor deletes a segment inside a pinned range (see `updates`).
    pub wal_pins: BTreeMap<(FileNum, FileNum), usize>,
}

/// The group-commit leader's context.
pub(crate) struct WriterCtx {
    pub wal: wal::Writer,
    pub mem: Arc<MemTable>,
    pub last_seq: u64,
    /// Container admission control: delay owed by the writes admitted so far, paid in short
    /// sleeps (see `make_room`).
    pub pacing_debt: std::time::Duration,
    /// The active memtable's blob file of values separated at write time
    /// (`Options::separate_at_write`).
    pub value_file: Option<separate_at_write::ValueFile>,
}

/// Everything a database instance owns.
pub(crate) struct DbInner {
    pub opts: Options,
    pub tiers: Tiers,
    pub queue: Mutex<VecDeque<Arc<Waiter>>>,
    /// Notified when a writer joins `queue` (a commit leader waiting for its ROR batch).
    pub arrivals: Condvar,
    /// Opened by `Db::open_read_only`: every change is refused (`check_writable`).
    pub read_only: bool,
    /// The memtable design of the database's mode (`memtable::design`).
    pub memtable_design: Box<dyn crate::memtable::design::MemtableDesign>,
    /// The threads that search the levels of a point lookup in parallel, in designs that ask
    /// for it (`level_readers`; NoveLSM).
    pub level_readers: Option<level_readers::LevelReaders>,
    pub writer: Mutex<WriterCtx>,
    /// Value files of immutable memtables and replayed segments (`separate_at_write`).
    pub value_files: separate_at_write::ValueFiles,
    pub manifest: Mutex<ManifestWriter>,
    pub state: Mutex<State>,
    pub bg_cv: Condvar,
    pub work_cv: Condvar,
    pub view: RwLock<Arc<ReadView>>,
    /// Highest sequence number whose write is fully applied to the memtable. Published
    /// (`Release`) by the commit leader after the memtable insert; loaded (`Acquire`) by readers
    /// taking a snapshot, so every entry with a smaller sequence is visible to them
    /// (`visible_seq.rs`, checked by a loom model).
    pub visible_seq: visible_seq::VisibleSeq,
    /// What `make_room` checks, readable without the state lock (`admission.rs`).
    pub gauges: admission::Gauges,
    pub tables: Arc<TableCache>,
    /// Open blob files (separated values, slow tier).
    pub blobs: Arc<crate::blob::reader::BlobFiles>,
    /// The level structure of the database's mode (`levels`), with the fast-tier regions it
    /// owns (the matrix container, the global index).
    pub levels: Box<dyn levels::LevelDesign>,
    pub block_cache: Option<Arc<BlockCache>>,
    pub counters: Counters,
    pub locks: Mutex<Vec<Box<dyn FileLock>>>,
    /// Free WAL regions kept for recycling (leaf lock, see the module doc).
    pub free_wal_regions: Mutex<wal_recycle::FreeRegions>,
    /// Held by a pass of obsolete-file deletion (see the module doc).
    pub obsolete_files: Mutex<()>,
    /// Keys start with their keyspace's id (fixed at creation).
    pub keyspaces_prefixed: bool,
    /// The keyspaces; replaced whole when one is created or dropped (leaf lock).
    pub keyspaces: RwLock<Arc<crate::keyspace::registry::Registry>>,
    /// Held shared by a writer from the check of its batch's keyspaces until the batch is
    /// queued, and exclusively by `drop_keyspace` while it marks a keyspace dropped: every
    /// write to the keyspace that passed the check is queued before the deletion of the
    /// keyspace's keys, so none of them outlives it.
    pub keyspace_gate: RwLock<()>,
    /// Held by a keyspace creation or drop (first in the lock order, see `keyspaces.rs`).
    pub keyspace_ddl: Mutex<()>,
    /// The default keyspace (never changes).
    pub default_keyspace: Arc<crate::keyspace::registry::Settings>,
    /// Set (with `Release`) when `Db::close` or the drop of the `Db` begins: from then on every
    /// operation through a handle that outlived the `Db` (a `Keyspace`, a `Snapshot`) returns
    /// `Error::Closed`, and no commit leader appends to the WAL (`lead_commit` checks it under
    /// `writer`, which the close takes after setting it).
    pub closed: std::sync::atomic::AtomicBool,
    /// Code a test runs at chosen points of an operation.
    #[cfg(any(test, feature = "testing"))]
    pub test_hooks: test_hooks::TestHooks,
}

impl DbInner {
    /// The current keyspaces.
    pub fn keyspaces(&self) -> Arc<crate::keyspace::registry::Registry> {
        Arc::clone(&self.keyspaces.read())
    }

    /// Error to return to writers once the database is poisoned.
    pub fn poisoned_error(cause: &str) -> Error {
        Error::Poisoned {
            cause: cause.to_owned(),
        }
    }

    /// Records the first background failure: writes stop, reads continue.
    pub fn poison(&self, st: &mut State, err: &Error) {
        if st.poison.is_none() {
            log::error!("matrixkv: stopping writes after a failure: {err}");
            st.poison = Some(err.to_string());
        }
        self.gauges.set_poisoned();
        self.bg_cv.notify_all();
    }

    /// Signals that background work may be due: bumps `State::work_gen` and wakes the
    /// threads waiting on `work_cv`.
    pub fn signal_work(&self, st: &mut State) {
        st.work_gen = st.work_gen.wrapping_add(1);
        self.work_cv.notify_all();
    }

    /// Publishes a new read view built from `st`.
    pub fn refresh_view(&self, st: &State) {
        let view = ReadView {
            mem: Arc::clone(&st.mem),
            imm: st.imm.iter().rev().map(|m| Arc::clone(&m.mem)).collect(),
            version: st.versions.current(),
            index: st.index_view.clone(),
        };
        *self.view.write() = Arc::new(view);
    }

    /// The current read view.
    pub fn read_view(&self) -> Arc<ReadView> {
        Arc::clone(&self.view.read())
    }

    /// `Err(Closed)` once the database is closed (see `closed`).
    pub fn check_open(&self) -> Result<()> {
        if self.closed.load(std::sync::atomic::Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    /// Share of the container's pages in use (0 in the SSTable layout).
    pub fn container_occupancy(&self, st: &State) -> f64 {
        st.pool.as_ref().map_or(0.0, |p| {
            p.used_pages() as f64 / p.total_pages().max(1) as f64
        })
    }

    /// Oldest sequence number any reader may still need.
    pub fn smallest_snapshot(&self, st: &State) -> u64 {
        let visible = self.visible_seq.load().0;
        st.snapshots
            .keys()
            .next()
            .copied()
            .map_or(visible, |s| s.min(visible))
    }
}

/// The log number once the oldest immutable memtable is flushed: the WAL segment of the next
/// unflushed memtable (every older segment is then in L0).
pub(crate) fn log_number_after_flush(st: &State) -> FileNum {
    st.imm.get(1).map_or(st.mem_wal, |m| m.wal)
}

impl State {
    /// L0 tables waiting for compaction, for admission control: none in the SLM-DB design,
    /// whose single level is where tables stay.
    pub fn l0_backlog(&self) -> usize {
        if self.index_view.is_some() {
            0
        } else {
            self.versions.current().num_files(0)
        }
    }
}

/// Result helper: turn a poisoned state into an error.
pub(crate) fn check_poison(st: &State) -> Result<()> {
    match &st.poison {
        Some(c) => Err(DbInner::poisoned_error(c)),
        None => Ok(()),
    }
}
