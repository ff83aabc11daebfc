//! The memtable: a concurrent skiplist of internal keys in DRAM, the first stop of every write
//! (or, in the NoveLSM and SLM-DB designs, a persistent skiplist on the fast tier, and in the
//! LightKV design a write buffer indexed by an RH-tree, behind the same interface:
//! `persistent.rs`, `pskiplist/`, `pwb/`).
//!
//! Writers apply each batch entry with `MemTable::add_in`; point reads use [`MemTable::get`]
//! (in the engine `MemTable::versions`, which asks the memtable's bloom filter first:
//! `filter.rs`, decision 0030);
//! iterators ([`MemTable::iter`]) feed the merged read path and the flush that turns an immutable
//! memtable into a RowTable. The DB owns the active memtable and the immutable ones behind
//! `Arc`s and decides when a memtable is full from [`MemTable::approximate_bytes`].
//!
//! Representation: one skiplist entry per version. Its key is a `MemKey`: a single shared
//! buffer (`Bytes`) holding `internal key ++ value`, the internal-key length, and the first 16
//! bytes of the user key as a big-endian integer. One allocation per entry (besides the
//! skiplist node), filled by one copy of each part (no zero-filling), and iterators that move
//! by cloning a reference-counted handle instead of copying values. A search step compares
//! the integers stored in the nodes first and reads a node's buffer only when they are equal:
//! with random keys that is one cache miss per step instead of two (the skiplist search was 9%
//! of all CPU in B1, most of it waiting for the buffers of 4 KiB entries). `MemKey` and its
//! arena live in `entry.rs`; what a flush takes out of a memtable, in `flush_entries.rs`.
//!
//! Thread safety: `MemTable` is `Send + Sync`. Any number of threads may call `add`, `get` and
//! iterate at the same time (the skiplist is lock-free, crossbeam-epoch reclaims nothing since
//! entries are never removed). An iterator sees entries inserted concurrently or not, depending
//! on timing; readers that need a consistent view filter by sequence number, which the DB only
//! publishes after the inserts it covers have completed.

pub(crate) mod design;
pub(crate) mod dram;
mod entry;
pub(crate) mod filter;
mod flush_entries;
pub(crate) mod lightkv;
pub(crate) mod novelsm;
pub(crate) mod persistent;
pub(crate) mod persistent_only;
pub(crate) mod pskiplist;
pub(crate) mod pwb;
pub(crate) mod semi_persistent;

use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering as AtomicOrdering};

use crate::lock_order::{Mutex, Rank};
use bytes::{Bytes, BytesMut};
use crossbeam_skiplist::SkipMap;

use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, TAG_LEN, ValueKind};
use crate::range_del::{RangeDelIndex, RangeDelView, RangeTombstone};

pub(crate) use entry::MemEntry;
use entry::MemKey;
pub(crate) use flush_entries::FlushEntries;

/// Estimated memory per entry besides key and value: the skiplist node (key handle, height,
/// reference count, about 1.33 tower pointers on average), the `Arc` header and allocator
/// rounding of both allocations.
const ENTRY_OVERHEAD: usize = 64;

/// Fewest entries a forward-moving iterator prefetches after a seek.
const MIN_PREFETCH: usize = 4;
/// Most entries a forward-moving iterator prefetches at once.
const MAX_PREFETCH: usize = 64;

/// An in-memory sorted table of versions, shared by concurrent writers and readers.
#[derive(Debug)]
pub struct MemTable {
    map: SkipMap<MemKey, ()>,
    bytes: AtomicUsize,
    /// Set (Release) once a range tombstone was added: readers check it (Acquire) before
    /// taking `range_dels`, so a memtable without range deletes costs one load.
    has_range_dels: AtomicBool,
    /// The range tombstones, apart from the skiplist (docs/decisions/0015-range-deletes.md).
    range_dels: Mutex<MemRangeDels>,
    /// The block new entries are carved from (see [`entry::ARENA_BLOCK`]).
    arena: Mutex<BytesMut>,
    /// NoveLSM's persistent memtable (decision 0023): the versions live in a persistent
    /// skiplist on the fast tier instead of `map`, which stays empty; range tombstones are
    /// kept in `range_dels` as well.
    persistent: Option<persistent::PersistentVersions>,
    /// The bloom filter over the user keys in `map` (`Options::memtable_filter_ratio`), set
    /// before each insert; `None` without one.
    filter: Option<filter::MemFilter>,
}

/// The range tombstones of a memtable: an index of the first `indexed` (built lazily) and the
/// ones added since as a short list readers scan linearly. The index is rebuilt (at the next
/// read) only once the list outgrows [`MemRangeDels::list_cap`], so a workload alternating range
/// deletes and reads pays O(log n + √n) per read and O(√n log n) amortized per insert, not a
/// rebuild per read.
#[derive(Debug, Default)]
struct MemRangeDels {
    list: Vec<RangeTombstone>,
    index: Option<Arc<RangeDelIndex>>,
    /// `list[..indexed]` is in `index` (when it is `Some`).
    indexed: usize,
    /// `list[indexed..]`, shared with readers; `None` after an insert.
    recent: Option<Arc<Vec<RangeTombstone>>>,
}

impl MemRangeDels {
    /// Most tombstones left out of the index: 32, or √(indexed) when larger.
    fn list_cap(&self) -> usize {
        self.indexed.isqrt().max(32)
    }
}

impl Default for MemTable {
    fn default() -> MemTable {
        MemTable {
            map: SkipMap::new(),
            bytes: AtomicUsize::new(0),
            has_range_dels: AtomicBool::new(false),
            range_dels: Mutex::new(Rank::LeafRangeDels, MemRangeDels::default()),
            arena: Mutex::new(Rank::LeafMemtableArena, BytesMut::new()),
            persistent: None,
            filter: None,
        }
    }
}

impl MemTable {
    /// An empty memtable without a filter (tests and fuzzing; the engine makes its memtables
    /// with [`MemTable::with_filter`]).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn new() -> MemTable {
        MemTable::default()
    }

    /// An empty memtable with a bloom filter of about `filter_bytes` over its user keys
    /// (none below 64 bytes), which point lookups of absent keys answer from.
    pub(crate) fn with_filter(filter_bytes: usize) -> MemTable {
        MemTable {
            filter: filter::MemFilter::new(filter_bytes),
            ..MemTable::default()
        }
    }

    /// Whether the filter (if any) lets a version of `user_key` be here.
    fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| f.may_contain(crate::sst::filter::key_hash(user_key)))
    }

    /// The persistent memtable in `list` (new, or a region reopened after a restart: its
    /// committed versions and range tombstones come back without any log replay).
    pub(crate) fn persistent(list: Arc<pskiplist::PSkipList>) -> Result<MemTable> {
        let (versions, tombstones) = persistent::PersistentVersions::open(list)?;
        Ok(MemTable::over(versions, tombstones))
    }

    /// LightKV's write buffer `pwb` (new, or a region reopened after a restart with its range
    /// tombstones `tombstones`, from [`pwb::Pwb::open`]).
    pub(crate) fn write_buffer(pwb: Arc<pwb::Pwb>, tombstones: Vec<RangeTombstone>) -> MemTable {
        MemTable::over(persistent::PersistentVersions::Buffer(pwb), tombstones)
    }

    /// A persistent memtable of `versions`, holding `tombstones` as its range tombstones.
    fn over(versions: persistent::PersistentVersions, tombstones: Vec<RangeTombstone>) -> MemTable {
        let mem = MemTable {
            persistent: Some(versions),
            ..MemTable::default()
        };
        for t in tombstones {
            mem.add_range_del(t.seq, &t.start, &t.end);
        }
        mem
    }

    /// The committed sequence numbers of a persistent memtable: the smallest (`None`: nothing
    /// committed) and the largest; `None` for a DRAM memtable.
    pub(crate) fn persistent_seqs(&self) -> Option<(Option<SeqNo>, SeqNo)> {
        self.persistent
            .as_ref()
            .map(|p| (p.min_seq(), p.committed()))
    }

    /// True for a persistent memtable (its writes need no WAL record).
    pub(crate) fn is_persistent(&self) -> bool {
        self.persistent.is_some()
    }

    /// Whether the memtable takes more writes: a DRAM memtable while it holds less than
    /// `dram_bytes`; a persistent one while its region has room for `persistent_cost` more
    /// bytes (see [`persistent::batch_cost`]).
    pub(crate) fn has_room(&self, dram_bytes: usize, persistent_cost: u64) -> bool {
        match &self.persistent {
            Some(p) => p.has_room(persistent_cost),
            None => self.approximate_bytes() < dram_bytes,
        }
    }

    /// Adds one operation of a write batch to a persistent memtable: the version (a range
    /// deletion both as a version, for recovery, and as a range tombstone), persisted but
    /// visible only after [`MemTable::commit_persistent`]. The key is `prefix ++ user_key`
    /// (a range deletion's end gets the prefix too).
    pub(crate) fn add_persistent_in(
        &self,
        seq: SeqNo,
        kind: ValueKind,
        prefix: &[u8],
        user_key: &[u8],
        value: &[u8],
    ) -> Result<()> {
        let Some(p) = &self.persistent else {
            self.add_in(seq, kind, prefix, user_key, value);
            return Ok(());
        };
        let prefixed = |b: &[u8]| -> Vec<u8> { [prefix, b].concat() };
        let (k, v) = if prefix.is_empty() {
            (user_key.to_vec(), value.to_vec())
        } else if kind == ValueKind::RangeDeletion {
            (prefixed(user_key), prefixed(value))
        } else {
            (prefixed(user_key), value.to_vec())
        };
        p.insert(&k, seq, kind, &v)?;
        if kind == ValueKind::RangeDeletion {
            self.add_range_del(seq, &k, &v);
        }
        Ok(())
    }

    /// Publishes `seq` as a persistent memtable's committed sequence number: the versions
    /// added up to it become visible and durable at once (nothing for a DRAM memtable).
    pub(crate) fn commit_persistent(&self, seq: SeqNo) -> Result<()> {
        match &self.persistent {
            Some(p) => p.commit(seq),
            None => Ok(()),
        }
    }

    /// Inserts one version of `user_key`: `value` at `seq` with `kind` (tombstones, kind
    /// [`ValueKind::Deletion`], are stored with the value given, normally empty).
    ///
    /// Sequence numbers are unique per write, so `(user_key, seq, kind)` never repeats; if it
    /// does (the same write applied twice), the later value replaces the earlier one and the
    /// size estimate counts both.
    /// A [`ValueKind::RangeDeletion`] (`user_key` the start, `value` the end) goes to the
    /// range tombstones instead (see [`MemTable::add_range_del`]). The engine inserts through
    /// [`MemTable::add_in`] (with a keyspace prefix); this form serves tests and fuzzing.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        self.add_in(seq, kind, &[], user_key, value);
    }

    /// `MemTable::add` of the key `prefix ++ user_key` (a keyspace's prefix and a key of
    /// it), concatenated in the entry's one allocation. A range deletion's end gets the prefix
    /// too.
    pub(crate) fn add_in(
        &self,
        seq: SeqNo,
        kind: ValueKind,
        prefix: &[u8],
        user_key: &[u8],
        value: &[u8],
    ) {
        debug_assert!(seq <= SeqNo::MAX, "sequence number {seq} exceeds 56 bits");
        if kind == ValueKind::RangeDeletion {
            if prefix.is_empty() {
                self.add_range_del(seq, user_key, value);
            } else {
                self.add_range_del(seq, &[prefix, user_key].concat(), &[prefix, value].concat());
            }
            return;
        }
        let entry = MemKey::entry_in(Some(&self.arena), prefix, user_key, seq, kind, value);
        self.insert(entry);
    }

    /// [`MemTable::add_in`] of a version whose value is shared, not copied: `value` is kept by
    /// reference (the semi-persistent design passes a slice of the WAL record holding it). A
    /// range deletion is copied as [`MemTable::add_in`] does.
    pub(crate) fn add_shared_in(
        &self,
        seq: SeqNo,
        kind: ValueKind,
        prefix: &[u8],
        user_key: &[u8],
        value: Bytes,
    ) {
        if kind == ValueKind::RangeDeletion || value.is_empty() {
            self.add_in(seq, kind, prefix, user_key, &value);
            return;
        }
        debug_assert!(seq <= SeqNo::MAX, "sequence number {seq} exceeds 56 bits");
        self.insert(MemKey::entry_shared(
            Some(&self.arena),
            prefix,
            user_key,
            seq,
            kind,
            value,
        ));
    }

    /// Inserts `entry`, charging its key, its value and the per-entry overhead (a shared value
    /// is charged too: the memtable's size measures what a flush writes).
    fn insert(&self, entry: MemKey) {
        let charge = entry.buf.len() + entry.shared.len() + ENTRY_OVERHEAD;
        if let Some(f) = &self.filter {
            // Before the insert: see the filter's module documentation.
            let user = entry
                .buf
                .get(..entry.key_len.saturating_sub(TAG_LEN))
                .unwrap_or_default();
            f.add(crate::sst::filter::key_hash(user));
        }
        self.map.insert(entry, ());
        self.bytes.fetch_add(charge, AtomicOrdering::Relaxed);
    }

    /// Adds the range tombstone `[start, end)` at `seq` (an empty range is kept but covers
    /// nothing; the write path rejects them).
    pub fn add_range_del(&self, seq: SeqNo, start: &[u8], end: &[u8]) {
        let mut r = self.range_dels.lock();
        r.list.push(RangeTombstone {
            start: start.to_vec(),
            end: end.to_vec(),
            seq,
        });
        r.recent = None;
        if r.list.len() - r.indexed > r.list_cap() {
            r.index = None;
        }
        self.bytes.fetch_add(
            start.len() + end.len() + ENTRY_OVERHEAD,
            AtomicOrdering::Relaxed,
        );
        self.has_range_dels.store(true, AtomicOrdering::Release);
    }

    /// Adds the range tombstones to `view` (an index and a short list of recent ones); nothing
    /// when the memtable has none (the cheap case: one atomic load).
    pub(crate) fn add_range_dels_to(&self, view: &mut RangeDelView) {
        if !self.has_range_dels.load(AtomicOrdering::Acquire) {
            return;
        }
        let mut r = self.range_dels.lock();
        if r.index.is_none() {
            r.index = Some(Arc::new(RangeDelIndex::new(r.list.clone())));
            r.indexed = r.list.len();
            r.recent = None;
        }
        if r.recent.is_none() {
            let recent = r.list.get(r.indexed..).unwrap_or_default().to_vec();
            r.recent = Some(Arc::new(recent));
        }
        if let Some(i) = &r.index {
            view.push(Arc::clone(i));
        }
        if let Some(l) = &r.recent {
            view.push_list(Arc::clone(l));
        }
    }

    /// Every range tombstone, in insertion order (for a flush).
    pub(crate) fn range_tombstones(&self) -> Vec<RangeTombstone> {
        if !self.has_range_dels.load(AtomicOrdering::Acquire) {
            return Vec::new();
        }
        self.range_dels.lock().list.clone()
    }

    /// The newest version of `user_key` whose sequence number is ≤ `snapshot`, as
    /// `(kind, value)`; `None` if this memtable holds no such version.
    ///
    /// A [`ValueKind::Deletion`] result means the key is deleted as of `snapshot`: the caller
    /// must stop searching older sources.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
        self.newest(user_key, snapshot)
            .ok()
            .flatten()
            .map(|(kind, _, v)| (kind, v))
    }

    /// The newest version of `user_key` visible at `snapshot` with its sequence number.
    pub(crate) fn newest(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        if let Some(p) = &self.persistent {
            return p.newest(user_key, snapshot);
        }
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let probe = MemKey::probe(&key::seek_key(user_key, snapshot));
        let Some(entry) = self.map.lower_bound(Bound::Included(&probe)) else {
            return Ok(None);
        };
        let found = entry.key();
        let Some((found_user, tag)) = key::split_internal(found.ikey()) else {
            return Ok(None);
        };
        if found_user != user_key {
            return Ok(None);
        }
        Ok(Some((
            kind_of_tag(tag),
            SeqNo(tag >> 8),
            found.value().to_vec(),
        )))
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, up to and including
    /// the first that is not a merge operand (what a merging point lookup needs from this
    /// memtable).
    ///
    /// # Errors
    ///
    /// Corruption or an I/O error reading a persistent memtable's region.
    pub fn versions(&self, user_key: &[u8], snapshot: SeqNo) -> Result<key::Versions> {
        if let Some(p) = &self.persistent {
            return p.versions(user_key, snapshot);
        }
        if !self.may_contain(user_key) {
            return Ok(Vec::new());
        }
        let probe = MemKey::probe(&key::seek_key(user_key, snapshot));
        let mut out = Vec::new();
        let mut entry = self.map.lower_bound(Bound::Included(&probe));
        while let Some(e) = entry {
            let found = e.key();
            let Some((found_user, tag)) = key::split_internal(found.ikey()) else {
                break;
            };
            if found_user != user_key {
                break;
            }
            let kind = kind_of_tag(tag);
            out.push((kind, found.value().to_vec()));
            if kind != ValueKind::Merge {
                break;
            }
            entry = e.next();
        }
        Ok(out)
    }

    /// Estimated memory held by the entries: keys, values and per-entry overhead.
    ///
    /// A persistent memtable reports the bytes of its region in use.
    pub fn approximate_bytes(&self) -> usize {
        match &self.persistent {
            Some(p) => p.used_bytes(),
            None => self.bytes.load(AtomicOrdering::Relaxed),
        }
    }

    /// Number of versions stored (a persistent memtable's range deletions included).
    pub fn len(&self) -> usize {
        match &self.persistent {
            Some(p) => p.len(),
            None => self.map.len(),
        }
    }

    /// True when at least one version is stored in the skiplist (range tombstones aside: a
    /// persistent memtable stores them as versions too, and they are not counted here).
    pub fn has_entries(&self) -> bool {
        match &self.persistent {
            Some(p) => p.len() > self.range_dels.lock().list.len(),
            None => !self.map.is_empty(),
        }
    }

    /// True when no version and no range tombstone is stored.
    pub fn is_empty(&self) -> bool {
        !self.has_entries() && !self.has_range_dels.load(AtomicOrdering::Acquire)
    }

    /// An iterator over every version in internal-key order; it keeps the memtable alive.
    /// The iterator starts unpositioned: call a seek first.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            mem: Arc::clone(self),
            current: None,
            ahead: Vec::new(),
            prefetch: MIN_PREFETCH,
            persistent: self
                .persistent
                .as_ref()
                .map(persistent::PersistentVersions::iter),
        }
    }
}

/// The kind stored in a tag. Memtable tags are built from a [`ValueKind`] (users write
/// values, tombstones and merge operands; the write path's blob pointers with
/// `Options::separate_at_write`), so every low byte other than those of `Deletion`,
/// `BlobIndex` and `Merge` is `Value`.
fn kind_of_tag(tag: u64) -> ValueKind {
    match tag & 0xff {
        t if t == ValueKind::Deletion as u64 => ValueKind::Deletion,
        t if t == ValueKind::BlobIndex as u64 => ValueKind::BlobIndex,
        t if t == ValueKind::Merge as u64 => ValueKind::Merge,
        _ => ValueKind::Value,
    }
}

/// A cursor over a [`MemTable`] implementing [`InternalIterator`]; it never fails.
///
/// It holds the current entry (a cheap `Arc` clone, so the key and value stay readable whatever
/// happens to the map) and, when moving forward, a small batch of the following entries, so
/// a full scan costs one skiplist search per batch rather than one per step. `prev` re-finds
/// its position with a skiplist search.
pub struct MemTableIter {
    mem: Arc<MemTable>,
    current: Option<MemKey>,
    /// Entries after `current` in reverse order (the next one is last), valid only while
    /// moving forward; cleared by every seek and by `prev`.
    ahead: Vec<MemKey>,
    /// Size of the next forward batch; doubles up to [`MAX_PREFETCH`] while scanning.
    prefetch: usize,
    /// The cursor of a persistent memtable (then the fields above are unused).
    persistent: Option<persistent::PersistentIter>,
}

impl MemTableIter {
    fn reset(&mut self, current: Option<MemKey>) {
        self.current = current;
        self.ahead.clear();
        self.prefetch = MIN_PREFETCH;
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        match &self.persistent {
            Some(p) => p.valid(),
            None => self.current.is_some(),
        }
    }

    fn seek_to_first(&mut self) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.seek_to_first();
        }
        let first = self.mem.map.front().map(|e| e.key().clone());
        self.reset(first);
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.seek_to_last();
        }
        let last = self.mem.map.back().map(|e| e.key().clone());
        self.reset(last);
        Ok(())
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.seek(target);
        }
        let probe = MemKey::probe(target);
        let found = self
            .mem
            .map
            .lower_bound(Bound::Included(&probe))
            .map(|e| e.key().clone());
        self.reset(found);
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.seek_for_prev(target);
        }
        let probe = MemKey::probe(target);
        let found = self
            .mem
            .map
            .upper_bound(Bound::Included(&probe))
            .map(|e| e.key().clone());
        self.reset(found);
        Ok(())
    }

    fn next(&mut self) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.next();
        }
        if let Some(next) = self.ahead.pop() {
            self.current = Some(next);
            return Ok(());
        }
        let Some(current) = self.current.take() else {
            return Ok(());
        };
        let batch = self.prefetch;
        self.prefetch = (batch * 2).min(MAX_PREFETCH);
        self.ahead.extend(
            self.mem
                .map
                .range((Bound::Excluded(&current), Bound::Unbounded))
                .take(batch)
                .map(|e| e.key().clone()),
        );
        self.ahead.reverse();
        self.current = self.ahead.pop();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        if let Some(p) = self.persistent.as_mut() {
            return p.prev();
        }
        let Some(current) = self.current.take() else {
            return Ok(());
        };
        let found = self
            .mem
            .map
            .upper_bound(Bound::Excluded(&current))
            .map(|e| e.key().clone());
        self.reset(found);
        Ok(())
    }

    fn key(&self) -> &[u8] {
        match &self.persistent {
            Some(p) => p.key(),
            None => self.current.as_ref().map_or(&[], MemKey::ikey),
        }
    }

    fn value(&self) -> &[u8] {
        match &self.persistent {
            Some(p) => p.value(),
            None => self.current.as_ref().map_or(&[], MemKey::value),
        }
    }
}

#[cfg(test)]
mod tests;
