//! LightKV's store behind [`super::global::GlobalIndex`]: the RH-tree ([`super::rhtree`]) in
//! region [`crate::layout::INDEX`], the epoch the manifest records, and the compaction of the
//! tree's log.
//!
//! The RH-tree never reclaims the records of updated or removed keys (decision 0026). When its
//! log area is more than half used, the next job first writes the live entries into a new
//! region `INDEX.new` (same size, same epoch), persists it and renames it over `INDEX`, then
//! goes on in the new tree. A crash before the rename leaves `INDEX` as it was (the stray
//! `INDEX.new` is deleted at open); after it, `INDEX` holds the same entries. Readers that
//! took the old tree keep reading it (its mapping outlives the rename) until their next view.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::global::TableKey;
use super::rhtree::RhTree;
use crate::error::{Error, Result};
use crate::lock_order::{Mutex, Rank, RwLock};
use crate::tier::FastTier;

/// The region a log compaction writes before renaming it over [`crate::layout::INDEX`].
const COMPACTING: &str = "INDEX.new";

/// The log share above which a job compacts the tree first.
const COMPACT_AT: f64 = 0.5;

/// The RH-tree store (see the module documentation).
pub(crate) struct RadixStore {
    tree: RwLock<Arc<RhTree>>,
    /// The epoch of the last job whose edit was installed (the manifest's).
    epoch: Mutex<u64>,
    fast: Arc<dyn FastTier>,
    path: PathBuf,
    /// Bytes written by trees replaced by a compaction, and by the compactions.
    retired_written: AtomicU64,
}

impl RadixStore {
    /// Opens (or with `create`, creates with `bytes`) the tree. The second value is true when
    /// the tree did not match `epoch` or did not open and was recreated empty: the caller must
    /// rebuild it ([`RadixStore::rebuild`]).
    pub(crate) fn open(
        fast: Arc<dyn FastTier>,
        bytes: u64,
        create: bool,
        epoch: u64,
        id: u64,
    ) -> Result<(RadixStore, bool)> {
        let name = crate::layout::INDEX;
        let path = crate::layout::path(fast.dir(), name);
        if fast.list()?.iter().any(|n| n == COMPACTING) {
            // A compaction stopped before its rename: `INDEX` is the tree.
            fast.remove(COMPACTING)?;
        }
        let len = usize::try_from(bytes)
            .map_err(|_| Error::invalid("index_bytes does not fit in memory"))?;
        let fresh = |fast: &dyn FastTier| -> Result<RhTree> {
            let region = fast.create_region(name, len)?;
            let tree = RhTree::create(region, &path, id)?;
            fast.sync_dir()?;
            Ok(tree)
        };
        let (tree, stale) = if create {
            (fresh(fast.as_ref())?, false)
        } else {
            match RhTree::open(fast.open_region(name)?, &path) {
                Ok(t) if t.epoch()? == epoch => (t, false),
                Ok(t) => {
                    log::warn!(
                        "the RH-tree index {} is at job {} but the manifest at {epoch}: \
                         rebuilding it from the tables",
                        path.display(),
                        t.epoch()?
                    );
                    drop(t);
                    fast.remove(name)?;
                    (fresh(fast.as_ref())?, true)
                }
                Err(e @ Error::Corruption { .. }) => {
                    log::warn!(
                        "the RH-tree index does not open ({e}): rebuilding it from the tables"
                    );
                    fast.remove(name)?;
                    (fresh(fast.as_ref())?, true)
                }
                Err(e) => return Err(e),
            }
        };
        Ok((
            RadixStore {
                tree: RwLock::new(Rank::LeafRadixTree, Arc::new(tree)),
                epoch: Mutex::new(Rank::LeafRadixEpoch, epoch),
                fast,
                path,
                retired_written: AtomicU64::new(0),
            },
            stale,
        ))
    }

    /// The tree as it is now.
    pub(crate) fn current(&self) -> Arc<RhTree> {
        Arc::clone(&self.tree.read())
    }

    /// The region's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes written to index regions by this process.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.retired_written.load(Ordering::Relaxed) + self.current().bytes_written()
    }

    /// Fills a freshly created tree with `keys` and publishes `epoch`.
    pub(crate) fn rebuild(&self, keys: &[TableKey], epoch: u64) -> Result<()> {
        let tree = self.current();
        for k in keys {
            tree.insert(&k.key, k.loc)?;
        }
        tree.set_epoch(epoch)
    }

    /// Starts a job (the caller holds the index's commit lock): compacts the log if it is
    /// more than half used, publishes the job's epoch (the last one plus 1) and returns the
    /// tree to change and that epoch.
    pub(crate) fn begin(&self) -> Result<(Arc<RhTree>, u64)> {
        let next = *self.epoch.lock() + 1;
        let mut tree = self.current();
        if tree.log_fill() > COMPACT_AT {
            tree = self.compact(&tree)?;
        }
        tree.set_epoch(next)?;
        Ok((tree, next))
    }

    /// The job of `epoch` is installed.
    pub(crate) fn finish(&self, epoch: u64) {
        *self.epoch.lock() = epoch;
    }

    /// Writes the live entries of `old` into a new region and renames it over the index.
    fn compact(&self, old: &RhTree) -> Result<Arc<RhTree>> {
        let fast = self.fast.as_ref();
        let region = fast.create_region(COMPACTING, old.region().len())?;
        let fresh = RhTree::create(region, &self.path, old.id())?;
        let entries = old.entries()?;
        for (key, loc) in &entries {
            fresh.insert(key, *loc)?;
        }
        fresh.set_epoch(old.epoch()?)?;
        fast.rename(COMPACTING, crate::layout::INDEX)?;
        fast.sync_dir()?;
        log::info!(
            "matrixkv: compacted the RH-tree index log: {} live keys, {:.0}% of the log was used",
            entries.len(),
            old.log_fill() * 100.0
        );
        let fresh = Arc::new(fresh);
        self.retired_written
            .fetch_add(old.bytes_written(), Ordering::Relaxed);
        *self.tree.write() = Arc::clone(&fresh);
        Ok(fresh)
    }
}
