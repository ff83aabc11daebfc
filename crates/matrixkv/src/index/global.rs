//! The global index as the engine uses it (the SLM-DB design): the persistent B+-tree
//! ([`super::pbtree`]) plus what SLM-DB keeps beside it in DRAM, the live-key count of every
//! table and the selective-compaction candidates its leaf scan found.
//!
//! Every change comes from a job that wrote tables: a flush ([`GlobalIndex::stage_flush`]) maps
//! each key of its table to the block holding the key's newest version (a tombstone removes
//! the key); a compaction ([`GlobalIndex::stage_compaction`]) moves to its outputs only the keys
//! the index still maps into its inputs (a flush may have mapped them to a newer table
//! meanwhile). A staged change is committed to the tree *before* the job's manifest edit is
//! appended, and the edit records the new generation; the previous generation stays pinned by a
//! snapshot until the edit is durable ([`Staged::finish`]), so a failed append can roll the
//! tree back ([`Staged::abort`]) and a crash in between is rolled back at open
//! ([`GlobalIndex::open`] with the manifest's generation). One job at a time holds the commit
//! lock ([`GlobalIndex::lock`]) from staging to finish (lock order: before the manifest lock).
//!
//! Live-key counts are not persisted: open rebuilds them from the tree (one walk, which the
//! tree's own open already does), as SLM-DB recovers them from its manifest.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use super::pbtree::{self, Location, PBTree, Snapshot};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{ValueKind, parse_internal_key};
use crate::layout::FileNum;
use crate::sst::Table;
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
            let flags = if parsed.kind == ValueKind::Merge {
                pbtree::LOCATION_MERGE
            } else {
                0
            };
            out.push(TableKey {
                key: parsed.user_key.to_vec(),
                loc: Location::with_flags(
                    number.0,
                    offset,
                    u32::try_from(size).unwrap_or(0),
                    flags,
                ),
                tombstone: parsed.kind == ValueKind::Deletion,
            });
        }
        it.next()?;
    }
    Ok(out)
}

/// The engine's global index: the tree, the live-key counts, the leaf-scan state.
pub(crate) struct GlobalIndex {
    tree: PBTree,
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
}

impl std::fmt::Debug for GlobalIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalIndex")
            .field("generation", &self.tree.generation())
            .field("keys", &self.tree.keys())
            .finish_non_exhaustive()
    }
}

/// A committed change whose manifest edit is not yet durable.
#[must_use = "finish the change once its edit is installed, or abort it"]
pub(crate) struct Staged<'a> {
    index: &'a GlobalIndex,
    /// The generation before the change, pinned so that it can be restored.
    previous: Snapshot,
    /// The committed generation (recorded by the job's edit).
    pub generation: u64,
    /// Live-key count changes per table.
    delta: HashMap<u64, i64>,
    /// Tables the change retires (a compaction's inputs).
    retired: Vec<u64>,
}

impl GlobalIndex {
    /// Opens region [`crate::layout::INDEX`] of `fast` (creating a tree of `bytes` if `create`),
    /// rolled back to `generation`, the one the manifest records, when the tree is one commit
    /// ahead of it.
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
            let len = usize::try_from(bytes)
                .map_err(|_| crate::error::Error::invalid("index_bytes does not fit in memory"))?;
            let region = fast.create_region(name, len)?;
            let tree = PBTree::create(region, &path, id)?;
            fast.sync_dir()?;
            tree
        } else {
            PBTree::open_at_most(fast.open_region(name)?, &path, generation)?
        };
        let live = tree.read().count_by_file()?;
        Ok(GlobalIndex {
            tree,
            commit: Mutex::new(()),
            live: Mutex::new(live),
            scan_from: Mutex::new(Vec::new()),
            candidates: Mutex::new(BTreeSet::new()),
            settled: Mutex::new(HashMap::new()),
        })
    }

    /// The path of the index region.
    pub(crate) fn path(&self) -> &Path {
        self.tree.path()
    }

    /// Bytes of the index region.
    pub(crate) fn region_len(&self) -> usize {
        self.tree.region().len()
    }

    /// Copies the region into `to` (a new region of the same length, zero-filled), skipping
    /// chunks that are all zeros, and persists it; the caller holds the commit lock. Returns
    /// the bytes copied.
    pub(crate) fn copy_to(&self, to: &dyn crate::tier::Region) -> Result<u64> {
        const CHUNK: usize = 1 << 20;
        let from = self.tree.region();
        let io = |e: std::io::Error| {
            crate::error::Error::io(crate::error::IoOp::Write, self.tree.path(), e)
        };
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
    }

    /// The latest committed tree.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.tree.read()
    }

    /// Keys in the index.
    pub(crate) fn keys(&self) -> u64 {
        self.tree.keys()
    }

    /// Bytes of pages the tree's commits wrote so far (this process).
    pub(crate) fn bytes_written(&self) -> u64 {
        self.tree.bytes_written()
    }

    /// Takes the commit lock: held from staging a change until it is finished or aborted.
    pub(crate) fn lock(&self) -> MutexGuard<'_, ()> {
        self.commit.lock()
    }

    /// Commits a flush of table `keys` (every key of one new table): each key now maps to its
    /// block there, a tombstone removes it.
    pub(crate) fn stage_flush(&self, keys: &[TableKey]) -> Result<Staged<'_>> {
        let previous = self.tree.read();
        let mut delta: HashMap<u64, i64> = HashMap::new();
        let mut w = self.tree.writer();
        for k in keys {
            if let Some(old) = w.get(&k.key)? {
                *delta.entry(old.file()).or_default() -= 1;
            }
            if k.tombstone {
                w.remove(&k.key)?;
            } else {
                w.insert(&k.key, k.loc)?;
                *delta.entry(k.loc.file()).or_default() += 1;
            }
        }
        let generation = w.commit()?;
        Ok(Staged {
            index: self,
            previous,
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
        input_keys: &[TableKey],
        keys: &[TableKey],
    ) -> Result<Staged<'_>> {
        let previous = self.tree.read();
        let mut delta: HashMap<u64, i64> = HashMap::new();
        let mut w = self.tree.writer();
        for k in keys {
            if k.tombstone {
                continue;
            }
            if w.get(&k.key)?
                .is_some_and(|old| inputs.contains(&old.file()))
            {
                w.insert(&k.key, k.loc)?;
                *delta.entry(k.loc.file()).or_default() += 1;
            }
        }
        for k in input_keys {
            if w.get(&k.key)?
                .is_some_and(|old| inputs.contains(&old.file()))
            {
                w.remove(&k.key)?;
            }
        }
        let generation = w.commit()?;
        Ok(Staged {
            index: self,
            previous,
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
        let from = self.scan_from.lock().clone();
        let (files, next) = self.tree.read().count_files_in_leaf_range(&from, n_keys)?;
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
        {
            let mut live = self.index.live.lock();
            for (file, d) in &self.delta {
                let n = live.entry(*file).or_default();
                *n = n.saturating_add_signed(*d);
            }
        }
        self.index.retire(&self.retired);
    }

    /// The job's edit could not be appended: the tree returns to the previous generation.
    pub(crate) fn abort(self) -> Result<()> {
        self.index.tree.rollback(&self.previous)
    }
}
