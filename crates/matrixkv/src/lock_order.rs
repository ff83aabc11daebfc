//! The engine's one lock order, and the locks that enforce it.
//!
//! Every lock of the engine is a [`Mutex`] or [`RwLock`] of this module, made with its
//! [`Rank`]. A thread takes locks in increasing rank only: while it holds a lock, it may take
//! only locks of a higher rank (a lock of rank `Leaf*` takes nothing under it). In debug and
//! `testing` builds every acquisition is checked against the ranks the thread holds, and one
//! out of order panics naming both locks, so a test that reaches the path shows the cycle
//! before a deadlock can; release builds keep no record and cost what `parking_lot` does
//! (unless the `lock-stats` feature times every wait and hold, see `lock_stats`).
//! [`Rank`]'s variants, in their order, are the list (docs/concurrency.md describes what each
//! lock guards and which may be held across I/O).
//!
//! A condition variable wait keeps the rank recorded: the thread takes nothing while it
//! waits.

use std::ops::{Deref, DerefMut};
use std::time::{Duration, Instant};

/// A lock's place in the order: locks are taken in increasing rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Rank {
    /// `keyspace_ddl`: a keyspace creation or drop, for its whole length (it writes and
    /// installs a manifest edit under it).
    KeyspaceDdl,
    /// `obsolete_files`: a pass of obsolete-file deletion (listing and deleting under it).
    ObsoleteFiles,
    /// `keyspace_gate`: shared by a writer from its keyspace check until its batch is queued,
    /// exclusive while `drop_keyspace` marks a keyspace dropped.
    KeyspaceGate,
    /// `writer`: the group-commit leader for a whole commit (WAL append, memtable insert,
    /// memtable switch, value-file appends and syncs).
    Writer,
    /// `queue`: the group-commit queue (the leader gathers its group under `writer`).
    Queue,
    /// A queued writer's batch (taken by the leader under `writer`).
    WaiterBatch,
    /// A queued writer's result (set by the leader under `queue`).
    WaiterDone,
    /// The next memtable's spare value file (its number is reserved under it, in `state`).
    SpareValueFile,
    /// The global index's commit lock (SLM-DB, LightKV): from a job's index change until its
    /// edit installs; a checkpoint copies the index under it.
    IndexCommit,
    /// `manifest`: version changes (its holder may drop `state` around the manifest I/O).
    Manifest,
    /// `state`: versions, immutable memtables, snapshots, job flags. No I/O under it.
    State,
    /// `view`: the read view (a pointer copy or swap).
    View,
    /// The LightKV write buffer's writer: the commit leader appends, persists and indexes a
    /// batch under it (region I/O: the buffer is the batch's only durable copy); `make_room`
    /// asks it for room under `state`.
    PwbWriter,
    /// The NoveLSM persistent skiplist's writer (the commit leader's inserts).
    PSkipListWriter,
    /// The value files sealed under their memtables' WAL numbers (the memtable switch seals
    /// one under `state`).
    ValueFileMap,
    /// One sealed value file (`separate_at_write::Sealed`), under the map when it is removed;
    /// held across the file's finish (footer, fdatasync) and a sync group's sync of it.
    ValueFile,
    /// SLM-DB's B+-tree writer (`index::pbtree`): a job's staged index change under
    /// `IndexCommit`, and its rollback under `state`; region I/O, the tree's readers and its
    /// page cache under it.
    PBTreeWriter,
    /// An RH-tree's state (`index::rhtree`): LightKV's global index, changed under
    /// `IndexCommit` (undone under `state`), and the write buffer's hash index, changed under
    /// `PwbWriter`; region I/O under it.
    RhTreeState,
    /// `free_wal_regions`: free WAL regions for recycling (taken under `writer` or `state`).
    LeafFreeWalRegions,
    /// Value files pinned by their memtables (taken under `state`).
    LeafMemtablePins,
    /// Value files replayed at open, by WAL segment.
    LeafReplayedValueFiles,
    /// `keyspaces`: the keyspace registry (replaced whole; read under any lock).
    LeafKeyspaces,
    /// A memtable's range tombstones (pushed by the commit leader, indexed by readers, copied
    /// by a flush under `manifest` and `state`).
    LeafRangeDels,
    /// A memtable's arena block (taken by the commit leader for each insert).
    LeafMemtableArena,
    /// The table cache's map (no I/O under it).
    LeafTableCache,
    /// The matrix container's open row readers.
    LeafContainerReaders,
    /// The level-reader pool's job queue, sender and threads (NoveLSM; never two at once).
    LeafLevelReaders,
    /// The database's LOCK files.
    LeafFileLocks,
    /// The B+-tree's registry of readers (current tree, live snapshots): a snapshot is taken
    /// and dropped under any engine lock (read views are swapped under `view`).
    LeafPBTreeReaders,
    /// The B+-tree's cache of verified pages (no I/O under it).
    LeafPBTreePages,
    /// The RH-tree store's current tree (`index::radix`; a pointer copy or swap).
    LeafRadixTree,
    /// The RH-tree store's installed epoch.
    LeafRadixEpoch,
    /// The global index's selective-compaction candidates (before `LeafIndexLive` when a job
    /// retires tables).
    LeafIndexCandidates,
    /// The global index's live-key counts by table (before `LeafIndexSettled`).
    LeafIndexLive,
    /// The global index's settled tables.
    LeafIndexSettled,
    /// Where the global index's next leaf scan starts.
    LeafIndexScanFrom,
    /// The partitions LightKV found without a split key.
    LeafIndexNoSplit,
    /// The write buffer's sorted runs (`memtable::pwb::sorted`): built from the region's
    /// records under it (region reads only).
    LeafPwbSorted,
    /// The cross-row seek hint a container iterator's rows share.
    LeafSeekHint,
    /// One shard of the block cache (a map and list update; a block may be dropped under it).
    LeafBlockCache,
    /// The blob reader's open files (an evicted file may be closed under it).
    LeafBlobOpen,
    /// The blob reader's growing files.
    LeafBlobGrowing,
    /// The flush-phase statistics.
    LeafFlushPhases,
    /// A test hook's slot (`testing` builds).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    LeafTestHook,
    /// A buffered file's early-writeback state (`tier::writeback`; its helper's fdatasync
    /// runs without it, a file's sync waits for that call under it, with its caller's locks).
    LeafWriteback,
    /// A DRAM region's bytes (`engine::read_only::BytesRegion`): region I/O under any lock;
    /// a copy reads the fast tier's region under it.
    LeafBytesRegion,
    /// The simulated slow tier's state (`tier::mem_fs`, `testing` builds): file operations
    /// under any engine lock.
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    LeafMemFs,
    /// The simulated fast tier's regions (`tier::sim_fast`, `testing` builds).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    LeafSimFastRegions,
    /// The simulated fast tier's capacity (taken under its regions when one is created).
    #[cfg_attr(not(any(test, feature = "testing")), allow(dead_code))]
    LeafSimFastCapacity,
}

#[cfg(any(debug_assertions, feature = "testing"))]
mod held {
    use super::Rank;
    use std::cell::RefCell;

    thread_local! {
        /// The ranks of the locks this thread holds, in the order it took them.
        static HELD: RefCell<Vec<Rank>> = const { RefCell::new(Vec::new()) };
    }

    /// Records that the thread takes `rank`; panics when it holds a lock of the same or a
    /// higher rank.
    pub(super) fn acquire(rank: Rank) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(&top) = h.iter().max() {
                assert!(
                    rank > top,
                    "lock order violated: taking {rank:?} while holding {top:?} (held: {h:?}); \
                     see lock_order::Rank"
                );
            }
            h.push(rank);
        });
    }

    /// Records that the thread released `rank`.
    pub(super) fn release(rank: Rank) {
        HELD.with(|h| {
            let mut h = h.borrow_mut();
            if let Some(i) = h.iter().rposition(|&r| r == rank) {
                h.remove(i);
            }
        });
    }
}

#[cfg(not(any(debug_assertions, feature = "testing")))]
mod held {
    use super::Rank;
    #[inline(always)]
    pub(super) fn acquire(_: Rank) {}
    #[inline(always)]
    pub(super) fn release(_: Rank) {}
}

/// The record of one held lock: taking it checks the order, dropping it forgets the rank.
/// In `lock-stats` builds it also times the wait for the lock and the hold
/// (`lock_stats`).
struct Held {
    rank: Rank,
    #[cfg(feature = "lock-stats")]
    since: Instant,
}

impl Held {
    /// Checks the order before the thread asks for the lock (so a cycle panics instead of
    /// deadlocking).
    fn take(rank: Rank) -> Held {
        held::acquire(rank);
        Held {
            rank,
            #[cfg(feature = "lock-stats")]
            since: Instant::now(),
        }
    }

    /// The lock was obtained: the wait ends and the hold starts.
    #[inline]
    fn obtained(&mut self) {
        #[cfg(feature = "lock-stats")]
        {
            let now = Instant::now();
            crate::lock_stats::waited(self.rank, now - self.since);
            self.since = now;
        }
    }

    /// The lock is released for a while (a condition variable wait, `unlocked`): the hold
    /// so far counts.
    #[inline]
    fn pause(&mut self) {
        #[cfg(feature = "lock-stats")]
        crate::lock_stats::held(self.rank, self.since.elapsed());
    }

    /// The lock is held again after [`Held::pause`].
    #[inline]
    fn resume(&mut self) {
        #[cfg(feature = "lock-stats")]
        {
            self.since = Instant::now();
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        held::release(self.rank);
        #[cfg(feature = "lock-stats")]
        crate::lock_stats::held(self.rank, self.since.elapsed());
    }
}

/// A mutex with a place in the lock order.
pub(crate) struct Mutex<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::Mutex<T>,
}

/// A held [`Mutex`].
pub(crate) struct MutexGuard<'a, T: ?Sized> {
    // Field order: the lock is released before its rank is forgotten.
    inner: parking_lot::MutexGuard<'a, T>,
    held: Held,
}

impl<T> Mutex<T> {
    /// A mutex of rank `rank` holding `value`.
    pub(crate) const fn new(rank: Rank, value: T) -> Mutex<T> {
        Mutex {
            rank,
            inner: parking_lot::Mutex::new(value),
        }
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Takes the lock (checking the order in debug builds).
    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        let mut held = Held::take(self.rank);
        let inner = self.inner.lock();
        held.obtained();
        MutexGuard { inner, held }
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mutex")
            .field("rank", &self.rank)
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: ?Sized + std::fmt::Debug> std::fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&*self.inner, f)
    }
}

impl<T: ?Sized> MutexGuard<'_, T> {
    /// Runs `f` with the lock released (its rank forgotten meanwhile), then takes it again.
    pub(crate) fn unlocked<U>(guard: &mut Self, f: impl FnOnce() -> U) -> U {
        let rank = guard.held.rank;
        held::release(rank);
        guard.held.pause();
        let out = parking_lot::MutexGuard::unlocked(&mut guard.inner, f);
        guard.held.resume();
        held::acquire(rank);
        out
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

/// A condition variable for [`MutexGuard`]s.
#[derive(Debug, Default)]
pub(crate) struct Condvar(parking_lot::Condvar);

impl Condvar {
    /// A condition variable no one waits on.
    pub(crate) const fn new() -> Condvar {
        Condvar(parking_lot::Condvar::new())
    }

    /// Waits for a notification (the guard's lock is released meanwhile).
    pub(crate) fn wait<T: ?Sized>(&self, guard: &mut MutexGuard<'_, T>) {
        guard.held.pause();
        self.0.wait(&mut guard.inner);
        guard.held.resume();
    }

    /// Waits for a notification or `timeout`.
    pub(crate) fn wait_for<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        timeout: Duration,
    ) -> parking_lot::WaitTimeoutResult {
        guard.held.pause();
        let r = self.0.wait_for(&mut guard.inner, timeout);
        guard.held.resume();
        r
    }

    /// Waits for a notification or `deadline`.
    pub(crate) fn wait_until<T: ?Sized>(
        &self,
        guard: &mut MutexGuard<'_, T>,
        deadline: Instant,
    ) -> parking_lot::WaitTimeoutResult {
        guard.held.pause();
        let r = self.0.wait_until(&mut guard.inner, deadline);
        guard.held.resume();
        r
    }

    /// Wakes one waiter.
    pub(crate) fn notify_one(&self) -> bool {
        self.0.notify_one()
    }

    /// Wakes every waiter.
    pub(crate) fn notify_all(&self) -> usize {
        self.0.notify_all()
    }
}

/// A reader-writer lock with a place in the lock order (shared and exclusive holds alike).
pub(crate) struct RwLock<T: ?Sized> {
    rank: Rank,
    inner: parking_lot::RwLock<T>,
}

/// A shared hold of an [`RwLock`].
pub(crate) struct RwLockReadGuard<'a, T: ?Sized> {
    inner: parking_lot::RwLockReadGuard<'a, T>,
    _held: Held,
}

/// An exclusive hold of an [`RwLock`].
pub(crate) struct RwLockWriteGuard<'a, T: ?Sized> {
    inner: parking_lot::RwLockWriteGuard<'a, T>,
    _held: Held,
}

impl<T> RwLock<T> {
    /// A lock of rank `rank` holding `value`.
    pub(crate) const fn new(rank: Rank, value: T) -> RwLock<T> {
        RwLock {
            rank,
            inner: parking_lot::RwLock::new(value),
        }
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Takes the lock shared.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, T> {
        let mut held = Held::take(self.rank);
        let inner = self.inner.read();
        held.obtained();
        RwLockReadGuard { inner, _held: held }
    }

    /// Takes the lock exclusively.
    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, T> {
        let mut held = Held::take(self.rank);
        let inner = self.inner.write();
        held.obtained();
        RwLockWriteGuard { inner, _held: held }
    }

    /// The value, through the exclusive borrow of the lock (no lock is taken).
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.inner.get_mut()
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RwLock")
            .field("rank", &self.rank)
            .field("inner", &self.inner)
            .finish()
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.inner
    }
}

impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locks_taken_in_rank_order_pass() {
        let (a, b) = (Mutex::new(Rank::Writer, 1), Mutex::new(Rank::State, 2));
        let ga = a.lock();
        let gb = b.lock();
        assert_eq!(*ga + *gb, 3);
        drop(gb);
        drop(ga);
        // Released: the higher one may be taken first now that nothing is held.
        let _gb = b.lock();
    }

    #[test]
    #[cfg_attr(
        any(debug_assertions, feature = "testing"),
        should_panic(expected = "lock order violated: taking Writer while holding State")
    )]
    fn a_lower_rank_under_a_higher_one_panics() {
        let (a, b) = (Mutex::new(Rank::Writer, ()), Mutex::new(Rank::State, ()));
        let _gb = b.lock();
        let _ga = a.lock();
    }

    #[test]
    #[cfg_attr(
        any(debug_assertions, feature = "testing"),
        should_panic(expected = "taking LeafTableCache while holding LeafTableCache")
    )]
    fn two_locks_of_one_rank_panic() {
        let (a, b) = (
            RwLock::new(Rank::LeafTableCache, ()),
            RwLock::new(Rank::LeafTableCache, ()),
        );
        let _ga = a.read();
        let _gb = b.write();
    }

    #[test]
    fn unlocked_forgets_the_rank_while_it_runs() {
        let (a, b) = (Mutex::new(Rank::Writer, ()), Mutex::new(Rank::State, ()));
        let mut gb = b.lock();
        MutexGuard::unlocked(&mut gb, || drop(a.lock()));
    }

    #[test]
    fn a_condvar_wait_returns_with_the_lock_held() {
        let m = Mutex::new(Rank::State, false);
        let cv = Condvar::new();
        let mut g = m.lock();
        let r = cv.wait_for(&mut g, Duration::from_millis(1));
        assert!(r.timed_out());
        *g = true;
        assert!(*g);
    }
}
