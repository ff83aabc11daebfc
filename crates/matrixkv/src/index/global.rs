//! The global index as the engine uses it (the SLM-DB and LightKV designs): a persistent map
//! from every live key to the block of its newest version, plus what the designs keep beside
//! it in DRAM, the live-key count of every table and the selective-compaction candidates
//! SLM-DB's leaf scan found. Two stores ([`Store`]):
//!
//! - SLM-DB's persistent B+-tree ([`super::pbtree`]): copy-on-write, every commit a new
//!   generation, so a job's change can be undone (below);
//! - LightKV's Radix Hash Tree ([`super::rhtree`]): updated in place. A job first publishes
//!   its number (the *epoch*) in the tree's header, then changes entries; the manifest edit
//!   records the same number. A failed append undoes the changes from the old values the job
//!   kept; at open a tree whose epoch differs from the manifest's (a crash between the two,
//!   or during an undo) is rebuilt from the tables ([`GlobalIndex::stale`]): the index holds
//!   nothing the tables do not. Readers see the changes as they are made, so a location
//!   naming a table outside a reader's version sends the read to the slow path.
//!
//! Every change comes from a job that wrote tables: a flush ([`GlobalIndex::stage_flush`]) maps
//! each key of its tables to the block holding the key's newest version (a tombstone removes
//! the key from the B+-tree, and maps it to the tombstone in the RH-tree, see
//! [`GlobalIndex::keeps_tombstones`]); a compaction ([`GlobalIndex::stage_compaction`]) moves to its outputs only the keys
//! the index still maps into its inputs (a flush may have mapped them to a newer table
//! meanwhile). A staged change is committed to the store *before* the job's manifest edit is
//! appended, and the edit records the new generation (B+-tree) or epoch (RH-tree); for the
//! B+-tree the previous generation stays pinned by a snapshot until the edit is durable
//! ([`Staged::finish`]), so a failed append can roll the tree back ([`Staged::abort`]) and a
//! crash in between is rolled back at open ([`GlobalIndex::open`] with the manifest's
//! generation). One job at a time holds the commit
//! lock ([`GlobalIndex::lock`]) from staging to finish (lock order: before the manifest lock).
//!
//! Live-key counts are not persisted: open rebuilds them from the store (one walk, which the
//! B+-tree's own open already does), as SLM-DB recovers them from its manifest.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::pbtree::{self, Location, PBTree, Snapshot};
use super::radix::RadixStore;
use super::rhtree::RhTree;
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::SeqNo;
use crate::key::{ValueKind, parse_internal_key};
use crate::layout::FileNum;
use crate::lock_order::{Mutex, Rank};
use crate::sst::Table;
use crate::sst::builder::KeyBlock;
use crate::tier::FastTier;

/// One key of a new table, for the index: the block holding the key's newest version in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TableKey {
    /// The engine key.
    pub key: Vec<u8>,
    /// The table and block.
    pub loc: Location,
    /// The newest version is a point tombstone.
    pub tombstone: bool,
    /// The newest version's sequence number.
    pub seq: SeqNo,
}

/// The keys of table `number`: one per user key, its newest version's block (read back from
/// the table just written; the reads hit the page cache).
pub(crate) fn table_keys(table: &Arc<Table>, number: FileNum) -> Result<Vec<TableKey>> {
    let mut out: Vec<TableKey> = Vec::new();
    let mut it = table.iter();
    it.seek_to_first()?;
    while it.valid() {
        let parsed = parse_internal_key(it.key()).map_err(|r| {
            crate::error::Error::corruption(
                crate::error::CorruptionSite::new(
                    crate::error::ArtifactKind::Sst,
                    crate::layout::table_name(number),
                    0,
                ),
                r,
            )
        })?;
        if out
            .last()
            .is_none_or(|k| k.key.as_slice() != parsed.user_key)
        {
            let (offset, size) = it.block_handle();
            out.push(table_key(
                number,
                parsed.user_key.to_vec(),
                parsed.kind,
                parsed.seq,
                (offset, size),
            ));
        }
        it.next()?;
    }
    Ok(out)
}

/// Which persistent structure holds the index.
pub(crate) enum Store {
    /// SLM-DB's copy-on-write B+-tree.
    BTree(Box<PBTree>),
    /// LightKV's in-place Radix Hash Tree.
    Radix(RadixStore),
}

/// The index as a reader sees it: a B+-tree generation, or the live RH-tree.
#[derive(Debug, Clone)]
pub(crate) enum IndexReader {
    /// A committed generation of the B+-tree.
    BTree(Snapshot),
    /// The RH-tree, changing in place.
    Radix(Arc<RhTree>),
}

impl IndexReader {
    /// The location of `key`'s newest version (`None`: no table holds a live one).
    pub(crate) fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        match self {
            IndexReader::BTree(s) => s.get(key),
            IndexReader::Radix(t) => t.get(key),
        }
    }

    /// True when a location can name a table of a later version than the reader's (the
    /// RH-tree changes before the job's edit installs).
    pub(crate) fn may_be_ahead(&self) -> bool {
        matches!(self, IndexReader::Radix(_))
    }
}

/// One job's changes, as they are made.
enum Txn<'a> {
    /// The writer, and the generation before it, pinned so that it can be restored.
    BTree(pbtree::Writer<'a>, Snapshot),
    /// Applied at once; the old values, to undo them.
    Radix(Arc<RhTree>, Vec<(Vec<u8>, Option<Location>)>),
}

impl Txn<'_> {
    fn get(&mut self, key: &[u8]) -> Result<Option<Location>> {
        match self {
            Txn::BTree(w, _) => w.get(key),
            Txn::Radix(t, _) => t.get(key),
        }
    }

    /// Maps `key` to `loc`; `old` is what [`Txn::get`] just returned for it (kept to undo
    /// the change, so the RH-tree is not searched twice).
    fn insert_over(&mut self, key: &[u8], old: Option<Location>, loc: Location) -> Result<()> {
        match self {
            Txn::BTree(w, _) => w.insert(key, loc),
            Txn::Radix(t, undo) => {
                undo.push((key.to_vec(), old));
                t.insert(key, loc)
            }
        }
    }

    /// Removes `key`, which [`Txn::get`] just found at `old`.
    fn remove_found(&mut self, key: &[u8], old: Location) -> Result<()> {
        match self {
            Txn::BTree(w, _) => w.remove(key).map(|_| ()),
            Txn::Radix(t, undo) => {
                undo.push((key.to_vec(), Some(old)));
                t.remove(key).map(|_| ())
            }
        }
    }
}

/// How to take a job's changes back.
enum Undo {
    BTree(Snapshot),
    Radix(Vec<(Vec<u8>, Option<Location>)>),
}

/// The keys of table `number` as its builder recorded them ([`crate::sst::Builder`] with
/// `recording_keys`): what [`table_keys`] reads back, without reading the table.
pub(crate) fn recorded_keys(number: FileNum, keys: Vec<KeyBlock>) -> Vec<TableKey> {
    keys.into_iter()
        .map(|k| table_key(number, k.user_key, k.kind, k.seq, (k.offset, k.size)))
        .collect()
}

/// The index entry of a key whose newest entry in table `number` is of `kind` and `seq`, in
/// the block at `(offset, size)`.
fn table_key(
    number: FileNum,
    key: Vec<u8>,
    kind: ValueKind,
    seq: SeqNo,
    (offset, size): (u64, u64),
) -> TableKey {
    let flags = if kind == ValueKind::Merge {
        pbtree::LOCATION_MERGE
    } else {
        0
    };
    TableKey {
        key,
        loc: Location::with_flags(number.0, offset, u32::try_from(size).unwrap_or(0), flags),
        tombstone: kind == ValueKind::Deletion,
        seq,
    }
}

/// The engine's global index: the store, the live-key counts, the leaf-scan state.
pub(crate) struct GlobalIndex {
    store: Store,
    /// The store was found ahead of or behind the manifest at open (RH-tree only): it is
    /// empty and the engine must rebuild it from the tables before use.
    stale: bool,
    /// Serializes jobs from staging a change until its manifest edit is installed.
    commit: Mutex<()>,
    /// Table number → keys the index maps into it.
    live: Mutex<HashMap<u64, u64>>,
    /// Where the next leaf scan starts.
    scan_from: Mutex<Vec<u8>>,
    /// Tables the leaf scan found too scattered: selective-compaction candidates.
    candidates: Mutex<BTreeSet<u64>>,
    /// Tables a compaction wrote, with their live-key counts then: exempt from selective
    /// compaction until that count changes (see [`GlobalIndex::exempt`]).
    settled: Mutex<HashMap<u64, u64>>,
    /// LightKV: lower bounds of partitions found without a usable split key (this process).
    no_split: Mutex<HashSet<Vec<u8>>>,
}

impl std::fmt::Debug for GlobalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalIndex")
            .field("keys", &self.keys())
            .finish_non_exhaustive()
    }
}

/// A committed change whose manifest edit is not yet durable.
#[must_use = "finish the change once its edit is installed, or abort it"]
pub(crate) struct Staged<'a> {
    index: &'a GlobalIndex,
    /// How to restore the index as it was before the change.
    undo: Undo,
    /// The committed generation or epoch (recorded by the job's edit).
    pub generation: u64,
    /// Live-key count changes per table.
    delta: HashMap<u64, i64>,
    /// Tables the change retires (a compaction's inputs).
    retired: Vec<u64>,
}

impl GlobalIndex {
    /// Opens region [`crate::layout::INDEX`] of `fast` holding SLM-DB's B+-tree (creating a
    /// tree of `bytes` if `create`), rolled back to `generation`, the one the manifest
    /// records, when the tree is one commit ahead of it.
    pub(crate) fn open(
        fast: &dyn FastTier,
        bytes: u64,
        create: bool,
        generation: u64,
        id: u64,
    ) -> Result<GlobalIndex> {
        let name = crate::layout::INDEX;
        let path = crate::layout::path(fast.dir(), name);
        let tree = if create {
            let region = fast.create_region(name, region_len(bytes)?)?;
            let tree = PBTree::create(region, &path, id)?;
            fast.sync_dir()?;
            tree
        } else {
            PBTree::open_at_most(fast.open_region(name)?, &path, generation)?
        };
        let live = tree.read().count_by_file()?;
        Ok(GlobalIndex::with_store(
            Store::BTree(Box::new(tree)),
            live,
            false,
        ))
    }

    /// Opens region [`crate::layout::INDEX`] of `fast` holding LightKV's RH-tree (creating a
    /// tree of `bytes` if `create`). A tree whose epoch is not `epoch` (the manifest's), or
    /// that does not open as a valid tree, is recreated empty and [`GlobalIndex::stale`].
    pub(crate) fn open_radix(
        fast: Arc<dyn FastTier>,
        bytes: u64,
        create: bool,
        epoch: u64,
        id: u64,
    ) -> Result<GlobalIndex> {
        let (store, stale) = RadixStore::open(fast, bytes, create, epoch, id)?;
        let live = store.current().count_by_file()?;
        Ok(GlobalIndex::with_store(Store::Radix(store), live, stale))
    }

    fn with_store(store: Store, live: HashMap<u64, u64>, stale: bool) -> GlobalIndex {
        GlobalIndex {
            store,
            stale,
            commit: Mutex::new(Rank::IndexCommit, ()),
            live: Mutex::new(Rank::LeafIndexLive, live),
            scan_from: Mutex::new(Rank::LeafIndexScanFrom, Vec::new()),
            candidates: Mutex::new(Rank::LeafIndexCandidates, BTreeSet::new()),
            settled: Mutex::new(Rank::LeafIndexSettled, HashMap::new()),
            no_split: Mutex::new(Rank::LeafIndexNoSplit, HashSet::new()),
        }
    }

    /// Records that the partition starting at `lo` has no usable split key (LightKV).
    pub(crate) fn refuse_split(&self, lo: Vec<u8>) {
        self.no_split.lock().insert(lo);
    }

    /// True when [`GlobalIndex::refuse_split`] recorded `lo`.
    pub(crate) fn split_refused(&self, lo: &[u8]) -> bool {
        self.no_split.lock().contains(lo)
    }

    /// True when the store must be rebuilt from the tables before use (see
    /// [`GlobalIndex::rebuild`]).
    pub(crate) fn stale(&self) -> bool {
        self.stale
    }

    /// Fills a stale RH-tree with `keys` (for each key, the newest version among every table
    /// of the version, tombstones included: see [`GlobalIndex::keeps_tombstones`]) and
    /// publishes the manifest's `epoch`.
    pub(crate) fn rebuild(&mut self, keys: &[TableKey], epoch: u64) -> Result<()> {
        let Store::Radix(store) = &self.store else {
            return Ok(());
        };
        store.rebuild(keys, epoch)?;
        *self.live.lock() = store.current().count_by_file()?;
        self.stale = false;
        Ok(())
    }

    /// True when a key whose newest version in the tables is a point tombstone stays mapped
    /// to it (the RH-tree) rather than leaving the index (the B+-tree). The RH-tree changes
    /// while older read views still use it: a flush that removed a deleted key would make a
    /// reader at an older sequence number find it absent before its view holds the table;
    /// mapped to the new table, the key sends that reader to the slow path instead. A
    /// compaction that drops the tombstone removes the key.
    pub(crate) fn keeps_tombstones(&self) -> bool {
        matches!(self.store, Store::Radix(..))
    }

    fn tree_path(&self) -> &Path {
        match &self.store {
            Store::BTree(t) => t.path(),
            Store::Radix(r) => r.path(),
        }
    }

    /// The path of the index region.
    pub(crate) fn path(&self) -> &Path {
        self.tree_path()
    }

    /// Runs `f` on the index region.
    fn with_region<R>(&self, f: impl FnOnce(&dyn crate::tier::Region) -> R) -> R {
        match &self.store {
            Store::BTree(t) => f(t.region().as_ref()),
            Store::Radix(r) => f(r.current().region()),
        }
    }

    /// Bytes of the index region.
    pub(crate) fn region_len(&self) -> usize {
        self.with_region(|r| r.len())
    }

    /// Copies the region into `to` (a new region of the same length, zero-filled), skipping
    /// chunks that are all zeros, and persists it; the caller holds the commit lock. Returns
    /// the bytes copied.
    pub(crate) fn copy_to(&self, to: &dyn crate::tier::Region) -> Result<u64> {
        const CHUNK: usize = 1 << 20;
        let io = |e: std::io::Error| {
            crate::error::Error::io(crate::error::IoOp::Write, self.tree_path(), e)
        };
        self.with_region(|from| {
            let mut buf = vec![0u8; CHUNK];
            let mut copied = 0u64;
            let mut off = 0;
            while off < from.len() {
                let n = CHUNK.min(from.len() - off);
                let chunk = buf.get_mut(..n).unwrap_or_default();
                from.read(off, chunk).map_err(io)?;
                if chunk.iter().any(|&b| b != 0) {
                    to.write(off, chunk).map_err(io)?;
                    copied += n as u64;
                }
                off += n;
            }
            to.persist(0, to.len()).map_err(io)?;
            Ok(copied)
        })
    }

    /// The latest committed tree (B+-tree), or the live tree (RH-tree).
    pub(crate) fn snapshot(&self) -> IndexReader {
        match &self.store {
            Store::BTree(t) => IndexReader::BTree(t.read()),
            Store::Radix(r) => IndexReader::Radix(r.current()),
        }
    }

    /// Keys in the index.
    pub(crate) fn keys(&self) -> u64 {
        match &self.store {
            Store::BTree(t) => t.keys(),
            Store::Radix(r) => r.current().len(),
        }
    }

    /// Bytes the store's changes wrote so far (this process): B+-tree pages, or RH-tree
    /// records, slots and leaves.
    pub(crate) fn bytes_written(&self) -> u64 {
        match &self.store {
            Store::BTree(t) => t.bytes_written(),
            Store::Radix(r) => r.bytes_written(),
        }
    }

    /// Starts a job's changes: the B+-tree's writer (the current generation pinned), or
    /// (RH-tree) the next epoch published. Returns the transaction and the epoch.
    fn begin(&self) -> Result<(Txn<'_>, u64)> {
        match &self.store {
            Store::BTree(t) => Ok((Txn::BTree(t.writer(), t.read()), 0)),
            Store::Radix(r) => {
                let (tree, next) = r.begin()?;
                Ok((Txn::Radix(tree, Vec::new()), next))
            }
        }
    }

    /// Ends a job's changes: its generation (B+-tree commit) or epoch, and how to undo them.
    fn end(txn: Txn<'_>, epoch: u64) -> Result<(u64, Undo)> {
        match txn {
            Txn::BTree(w, previous) => Ok((w.commit()?, Undo::BTree(previous))),
            Txn::Radix(_, undo) => Ok((epoch, Undo::Radix(undo))),
        }
    }

    /// Takes the commit lock: held from staging a change until it is finished or aborted.
    pub(crate) fn lock(&self) -> crate::lock_order::MutexGuard<'_, ()> {
        self.commit.lock()
    }

    /// Commits a flush of table `keys` (every key of the flush's tables): each key now maps to
    /// its block there; a tombstone removes it (B+-tree) or is mapped too (RH-tree).
    pub(crate) fn stage_flush(&self, keys: &[TableKey]) -> Result<Staged<'_>> {
        let mut delta: HashMap<u64, i64> = HashMap::new();
        let (mut w, epoch) = self.begin()?;
        for k in keys {
            let old = w.get(&k.key)?;
            if let Some(old) = old {
                *delta.entry(old.file()).or_default() -= 1;
            }
            if k.tombstone && !self.keeps_tombstones() {
                if let Some(old) = old {
                    w.remove_found(&k.key, old)?;
                }
            } else {
                w.insert_over(&k.key, old, k.loc)?;
                *delta.entry(k.loc.file()).or_default() += 1;
            }
        }
        let (generation, undo) = Self::end(w, epoch)?;
        Ok(Staged {
            index: self,
            undo,
            generation,
            delta,
            retired: Vec::new(),
        })
    }

    /// Commits a compaction of tables `inputs` (whose keys are `input_keys`) into tables of
    /// `keys`: a key moves to its new block only while the index still maps it into one of
    /// the inputs; a key the index maps into an input but the outputs dropped (a range
    /// tombstone, the compaction filter or the TTL removed it) leaves the index.
    pub(crate) fn stage_compaction(
        &self,
        inputs: &HashSet<u64>,
        input_keys: &[Vec<u8>],
        keys: &[TableKey],
    ) -> Result<Staged<'_>> {
        let mut delta: HashMap<u64, i64> = HashMap::new();
        let (mut w, epoch) = self.begin()?;
        for k in keys {
            if k.tombstone && !self.keeps_tombstones() {
                continue;
            }
            let old = w.get(&k.key)?;
            if old.is_some_and(|old| inputs.contains(&old.file())) {
                w.insert_over(&k.key, old, k.loc)?;
                *delta.entry(k.loc.file()).or_default() += 1;
            }
        }
        for k in input_keys {
            if let Some(old) = w.get(k)?
                && inputs.contains(&old.file())
            {
                w.remove_found(k, old)?;
            }
        }
        let (generation, undo) = Self::end(w, epoch)?;
        Ok(Staged {
            index: self,
            undo,
            generation,
            delta,
            retired: inputs.iter().copied().collect(),
        })
    }

    /// Keys the index maps into each table.
    pub(crate) fn live_keys(&self) -> HashMap<u64, u64> {
        self.live.lock().clone()
    }

    /// The candidates the leaf scans found.
    pub(crate) fn candidates(&self) -> BTreeSet<u64> {
        self.candidates.lock().clone()
    }

    /// SLM-DB's leaf-scan trigger: scans the next `n_keys` keys of the index (round robin)
    /// and, when they lie in more than `threshold` distinct tables, makes those tables
    /// candidates. Returns the number of distinct tables seen.
    pub(crate) fn leaf_scan(&self, n_keys: u64, threshold: usize) -> Result<usize> {
        if n_keys == 0 {
            return Ok(0);
        }
        let Store::BTree(tree) = &self.store else {
            return Ok(0);
        };
        let from = self.scan_from.lock().clone();
        let (files, next) = tree.read().count_files_in_leaf_range(&from, n_keys)?;
        *self.scan_from.lock() = next.unwrap_or_default();
        if files.len() > threshold {
            self.candidates.lock().extend(files.iter().copied());
        }
        Ok(files.len())
    }

    /// Makes `tables` candidates (SLM-DB's range-query trigger found them too scattered).
    pub(crate) fn add_candidates(&self, tables: &[u64]) {
        self.candidates.lock().extend(tables.iter().copied());
    }

    /// Forgets tables that left the version (compaction inputs).
    fn retire(&self, tables: &[u64]) {
        let mut c = self.candidates.lock();
        let mut live = self.live.lock();
        let mut settled = self.settled.lock();
        for t in tables {
            c.remove(t);
            live.remove(t);
            settled.remove(t);
        }
    }

    /// Marks `tables` (a compaction's outputs, installed) as settled at their present
    /// live-key counts.
    pub(crate) fn settle(&self, tables: &[u64]) {
        let live = self.live.lock();
        let mut settled = self.settled.lock();
        for t in tables {
            settled.insert(*t, live.get(t).copied().unwrap_or(0));
        }
    }

    /// The settled tables whose live-key count has not changed since a compaction wrote
    /// them: merging them again would drop nothing more (what they hold that the index does
    /// not map is kept for a snapshot, or shadows a table beside them) and could not order
    /// them better than the merge that wrote them, so neither trigger picks them until a
    /// newer write makes one of their keys garbage. Without this, a snapshot or an unmergeable
    /// tombstone makes selective compaction rewrite the same data forever.
    pub(crate) fn exempt(&self) -> HashSet<u64> {
        let live = self.live.lock();
        self.settled
            .lock()
            .iter()
            .filter(|(t, n)| live.get(t).copied().unwrap_or(0) == **n)
            .map(|(t, _)| *t)
            .collect()
    }
}

impl Staged<'_> {
    /// The job's edit is durable and installed: the live counts follow, the previous
    /// generation is released.
    pub(crate) fn finish(self) {
        if let Store::Radix(r) = &self.index.store {
            r.finish(self.generation);
        }
        {
            let mut live = self.index.live.lock();
            for (file, d) in &self.delta {
                let n = live.entry(*file).or_default();
                *n = n.saturating_add_signed(*d);
            }
        }
        self.index.retire(&self.retired);
    }

    /// The job's edit could not be appended: the B+-tree returns to the previous generation;
    /// the RH-tree gets its old values back, newest change undone first (its header keeps
    /// the job's epoch, so a crash before the next job's edit rebuilds it at open).
    pub(crate) fn abort(self) -> Result<()> {
        match (&self.index.store, self.undo) {
            (Store::BTree(t), Undo::BTree(previous)) => t.rollback(&previous),
            (Store::Radix(r), Undo::Radix(undo)) => {
                let t = r.current();
                for (key, old) in undo.iter().rev() {
                    match old {
                        Some(loc) => t.insert(key, *loc)?,
                        None => {
                            t.remove(key)?;
                        }
                    }
                }
                Ok(())
            }
            _ => Err(crate::error::Error::invalid(
                "an index undo of the other store",
            )),
        }
    }
}

/// The region length for `bytes` of index.
fn region_len(bytes: u64) -> Result<usize> {
    usize::try_from(bytes)
        .map_err(|_| crate::error::Error::invalid("index_bytes does not fit in memory"))
}

/// For each key, the newest entry among `tables` (their keys, from [`table_keys`]): what an
/// index built job by job maps (a tombstone: the key is absent).
pub(crate) fn newest_keys(tables: Vec<Vec<TableKey>>) -> Vec<TableKey> {
    let mut best: HashMap<Vec<u8>, TableKey> = HashMap::new();
    for k in tables.into_iter().flatten() {
        match best.get(&k.key) {
            Some(b) if b.seq >= k.seq => {}
            _ => {
                best.insert(k.key.clone(), k);
            }
        }
    }
    best.into_values().collect()
}
