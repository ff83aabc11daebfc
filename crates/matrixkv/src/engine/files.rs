//! The open-table cache and obsolete-file deletion.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::lock_order::{Mutex, Rank};

use super::DbInner;
use crate::error::Result;
use crate::layout::{self, FileKind, FileNum};
use crate::sst::Table;
use crate::sst::cache::BlockCache;
use crate::tier::FileSystem;
use crate::version::edit::FileMeta;

/// Open SSTables, bounded by a count, evicting the least recently used.
///
/// L0 tables live in the fast-tier directory (the slow-tier one in the SLM-DB design), L1+
/// tables in the slow-tier directory; a table keeps its number when it moves between levels
/// of the same tier.
pub(crate) struct TableCache {
    /// L0 tables are in the fast-tier directory.
    l0_on_fast: bool,
    fast_dir: PathBuf,
    slow_dir: PathBuf,
    fast_fs: Arc<dyn FileSystem>,
    slow_fs: Arc<dyn FileSystem>,
    block_cache: Option<Arc<BlockCache>>,
    capacity: usize,
    inner: Mutex<CacheInner>,
}

struct CacheInner {
    tables: HashMap<u64, (Arc<Table>, u64)>,
    tick: u64,
}

impl TableCache {
    pub(crate) fn new(
        fast_dir: PathBuf,
        slow_dir: PathBuf,
        fast_fs: Arc<dyn FileSystem>,
        slow_fs: Arc<dyn FileSystem>,
        block_cache: Option<Arc<BlockCache>>,
        capacity: usize,
        l0_on_fast: bool,
    ) -> TableCache {
        TableCache {
            l0_on_fast,
            fast_dir,
            slow_dir,
            fast_fs,
            slow_fs,
            block_cache,
            capacity,
            inner: Mutex::new(
                Rank::LeafTableCache,
                CacheInner {
                    tables: HashMap::new(),
                    tick: 0,
                },
            ),
        }
    }

    /// The open table of `meta`, which lives at `level`. The file is opened without the cache
    /// lock held.
    pub(crate) fn get(&self, level: usize, meta: &FileMeta) -> Result<Arc<Table>> {
        {
            let mut g = self.inner.lock();
            g.tick += 1;
            let tick = g.tick;
            if let Some((t, used)) = g.tables.get_mut(&meta.number.0) {
                *used = tick;
                return Ok(Arc::clone(t));
            }
        }
        let (fs, dir) = if level == 0 && self.l0_on_fast {
            (&self.fast_fs, &self.fast_dir)
        } else {
            (&self.slow_fs, &self.slow_dir)
        };
        let path = layout::path(dir, &layout::table_name(meta.number));
        let file = fs.open(&path)?;
        let table = Table::open(file, meta.number.0, self.block_cache.clone())?;
        if table.size() != meta.size || table.properties().entries != meta.entries {
            // The file is not the table the manifest recorded (truncated, replaced, or lost
            // its tail on a device that does not honour fsync).
            return Err(crate::error::Error::corruption(
                crate::error::CorruptionSite::new(crate::error::ArtifactKind::Sst, path, 0),
                crate::error::CorruptionReason::Invalid(
                    "size or entry count differs from the manifest",
                ),
            ));
        }
        let mut g = self.inner.lock();
        g.tick += 1;
        let tick = g.tick;
        g.tables.insert(meta.number.0, (Arc::clone(&table), tick));
        if g.tables.len() > self.capacity
            && let Some(victim) = g
                .tables
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(n, _)| *n)
        {
            g.tables.remove(&victim);
        }
        Ok(table)
    }

    /// Table `number` if it is open, without opening it (a job's output the version does not
    /// hold yet: the job opens its outputs before the global index names them).
    pub(crate) fn cached(&self, number: u64) -> Option<Arc<Table>> {
        self.inner
            .lock()
            .tables
            .get(&number)
            .map(|(t, _)| Arc::clone(t))
    }

    /// Heap bytes pinned by the open tables (index blocks and filters).
    pub(crate) fn memory_bytes(&self) -> usize {
        self.inner
            .lock()
            .tables
            .values()
            .map(|(t, _)| t.memory_bytes())
            .sum()
    }

    /// Forgets table `number` (after its file was deleted).
    pub(crate) fn evict(&self, number: u64) {
        self.inner.lock().tables.remove(&number);
    }
}

impl DbInner {
    /// Deletes files no live version, job or reader needs: tables and blob files not
    /// referenced by any live version (nor reserved by a failed manifest append), WAL segments
    /// older than the log number (except the retained ones and those a live `UpdatesIter`
    /// pins, see `updates`; after keeping some as free regions for recycling, see
    /// `wal_recycle`), old manifests, and (at open) temporary files. The live set is computed
    /// under `state`; renaming, listing and deleting happen without it, under `obsolete_files`.
    pub(crate) fn delete_obsolete_files(&self, at_open: bool) {
        // One pass at a time: another could list and delete a WAL segment this one is
        // recycling (between its zeroing and its rename).
        let _pass = self.obsolete_files.lock();
        let (live, log_number, manifest_number, next_file, retired, kept_wals, pins) = {
            let mut st = self.state.lock();
            let log_number = st.versions.log_number();
            let aged = super::wal_recycle::take_aged_wals(
                &mut st,
                self.opts.wal_retention_segments,
                log_number,
            );
            let retired = self.reserve_for_recycling(aged);
            // Obsolete segments still retained, and any pinned: never deleted below. An iterator
            // created meanwhile pins only segments it finds in `st` (these, or segments at or
            // above this log number), never one deleted below.
            let kept_wals: HashSet<FileNum> = st.retired_wals.iter().map(|w| w.number).collect();
            let pins: Vec<(FileNum, FileNum)> = st.wal_pins.keys().copied().collect();
            let mut live: HashSet<u64> =
                st.versions.live_files().into_iter().map(|n| n.0).collect();
            live.extend(st.pending_outputs.iter().copied());
            // Value files of memtables a reader or job still holds (`separate_at_write`).
            live.extend(self.value_files.pinned_by_memtables());
            // Named by a failed manifest append that a crash could still replay (bg_error).
            live.extend(st.unsettled.files.iter().copied());
            live.extend(st.unsettled.manifests.iter().copied());
            (
                live,
                log_number,
                st.versions.manifest_number(),
                st.versions.next_file_number(),
                retired,
                kept_wals,
                pins,
            )
        };
        self.recycle_retired_wals(retired);
        // WAL segments are regions of the fast tier: listed (and removed) there.
        match self.tiers.fast.list() {
            Ok(names) => {
                for name in names {
                    let obsolete = match layout::parse(&name) {
                        Some(FileKind::Wal(n)) => {
                            n < log_number
                                && !kept_wals.contains(&n)
                                && !pins.iter().any(|&(lo, hi)| (lo..=hi).contains(&n))
                        }
                        // A flushed persistent memtable (readers still holding it keep the
                        // region mapped).
                        Some(FileKind::PersistentMemtable(n)) => n < log_number,
                        // A region whose making a crash cut short (`layout::temp_name`).
                        Some(FileKind::Temp) => at_open,
                        _ => false,
                    };
                    if !obsolete {
                        continue;
                    }
                    match self.tiers.fast.remove(&name) {
                        Ok(()) => log::debug!("matrixkv: deleted obsolete {name}"),
                        Err(e) => log::warn!("matrixkv: cannot delete obsolete {name}: {e}"),
                    }
                }
            }
            Err(e) => log::warn!("matrixkv: cannot list the fast tier's regions: {e}"),
        }
        let fast_dir = self.tiers.fast.dir().to_owned();
        for (fs, dir, is_fast) in [
            (&self.tiers.fast_fs, fast_dir.clone(), true),
            (&self.tiers.slow_fs, self.opts.slow_dir.clone(), false),
        ] {
            let names = match fs.list(&dir) {
                Ok(n) => n,
                Err(e) => {
                    log::warn!("matrixkv: cannot list {}: {e}", dir.display());
                    continue;
                }
            };
            for name in names {
                let remove = match layout::parse(&name) {
                    Some(FileKind::Table(n)) => !live.contains(&n.0) && n.0 < next_file,
                    Some(FileKind::Blob(n)) => !is_fast && !live.contains(&n.0) && n.0 < next_file,
                    // A manifest numbered from `next_file` on was created after the live set
                    // was taken (a roll may have made it current meanwhile).
                    Some(FileKind::Manifest(n)) => {
                        !is_fast && n != manifest_number && !live.contains(&n.0) && n.0 < next_file
                    }
                    Some(FileKind::Temp) => at_open,
                    _ => false,
                };
                if !remove {
                    continue;
                }
                let result = fs.remove(&layout::path(&dir, &name));
                match result {
                    Ok(()) => {
                        match layout::parse(&name) {
                            Some(FileKind::Table(n)) => self.tables.evict(n.0),
                            Some(FileKind::Blob(n)) => self.blobs.evict(n.0),
                            _ => {}
                        }
                        log::debug!("matrixkv: deleted obsolete {}", name);
                    }
                    Err(e) => log::warn!("matrixkv: cannot delete obsolete {name}: {e}"),
                }
            }
        }
    }
}
