//! The engine side of the matrix container (L0 as RowTables on the fast tier): flush into the
//! receiver, the receiver→compactor role switch, column compaction into L1, lazy page freeing,
//! and point reads through the rows with cross-row hints.
//!
//! Pages: the [`PagePool`] lives in `State` (the manifest is the single source of truth; the
//! pool is rebuilt from it at open). Pages released by an edit (consumed value pages, dropped
//! rows) are *deferred*: they return to the pool only once no live version older than that
//! edit remains, so no reader or iterator can still reach them (lazy deletion, DESIGN §3).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use crate::lock_order::{Mutex, MutexGuard, Rank};

use super::jobs::{JobFlag, ReservedOutputs};
use super::separate_at_write::FlushedValueFile;
use super::{DbInner, ImmMem, State};
use crate::error::{Error, Result};
use crate::iter::exclude::{ExcludeRanges, KeyRange};
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{SeqNo, ValueKind};
use crate::matrix::meta::{PageList, RowMeta};
use crate::matrix::pages::PagePool;
use crate::matrix::row_table::{Floor, RowIter, RowLayout, RowReader, write_row};
use crate::sst::filter::key_hash;
use crate::stats::{Counters, FlushPhases, Laps};
use crate::tier::Region;
use crate::version::edit::VersionEdit;
use crate::version::version::Version;

mod column_job;

/// How long a flush waiting for container pages waits before it looks again at pages released
/// but still referenced by an older version (nothing signals when its last reader drops it).
const DEFERRED_PAGES_RECHECK: std::time::Duration = std::time::Duration::from_millis(100);

/// The mapped page pool and the open row readers.
pub(crate) struct ContainerHandle {
    pub region: Arc<dyn Region>,
    pub page_bytes: usize,
    pub path: PathBuf,
    /// Open readers by row number, with the page list they were opened on.
    readers: Mutex<HashMap<u64, Arc<RowReader>>>,
}

impl ContainerHandle {
    pub(crate) fn new(region: Arc<dyn Region>, page_bytes: usize, path: PathBuf) -> Self {
        ContainerHandle {
            region,
            page_bytes,
            path,
            readers: Mutex::new(Rank::LeafContainerReaders, HashMap::new()),
        }
    }

    /// The reader of `row` as recorded by `meta` (reopened when its page list changed).
    pub(crate) fn reader(&self, meta: &RowMeta) -> Result<Arc<RowReader>> {
        let cached = self.readers.lock().get(&meta.row).cloned();
        let open = || {
            RowReader::open(
                Arc::clone(&self.region),
                self.page_bytes,
                Arc::clone(&meta.pages),
                meta.row,
                self.path.clone(),
            )
        };
        let r = match cached {
            Some(r) if Arc::ptr_eq(r.pages(), &meta.pages) => return Ok(r),
            // Same row, more pages freed by a column compaction: no need to verify it again.
            // (A reader of an older version asks for fewer freed pages: open that afresh.)
            Some(r) => r.with_pages(Arc::clone(&meta.pages)).or_else(|_| open())?,
            None => open()?,
        };
        self.readers.lock().insert(meta.row, Arc::clone(&r));
        Ok(r)
    }

    /// Forgets readers of rows no longer in `version`.
    pub(crate) fn retain(&self, version: &Version) {
        let c = version.container();
        let live: std::collections::HashSet<u64> = c
            .receiver
            .iter()
            .chain(c.compactor.iter())
            .map(|m| m.row)
            .collect();
        self.readers.lock().retain(|row, _| live.contains(row));
    }
}

/// Writes a memtable's `entries` (in order) as row `row` into `pages`, with hints against
/// `prev`.
pub(crate) fn write_mem_row<'e>(
    handle: &ContainerHandle,
    entries: impl Iterator<Item = (&'e [u8], &'e [u8])> + Clone,
    layout: &RowLayout,
    pages: Vec<u32>,
    row: u64,
    prev: Option<(&RowMeta, Arc<RowReader>)>,
) -> Result<RowMeta> {
    let pages = Arc::new(PageList::new(pages));
    let prev_row = prev.as_ref().map_or(0, |(m, _)| m.row);
    let prev_reader = prev.as_ref().map(|(_, r)| r.as_ref());
    let summary = write_row(
        handle.region.as_ref(),
        handle.page_bytes,
        &pages,
        row,
        prev_reader,
        entries,
        layout,
        &handle.path,
    )?;
    Ok(summary.to_meta(row, prev_row, pages))
}

/// The newest row of the container (the one a new row's hints point into).
pub(crate) fn newest_row(v: &Version) -> Option<Arc<RowMeta>> {
    let c = v.container();
    c.receiver.last().or(c.compactor.last()).cloned()
}

/// Positions of the last key a sorted multi-key lookup found in each row, by row number (see
/// `DbInner::versions_in_container`).
pub(crate) type RowFloors = std::collections::HashMap<u64, Floor>;

/// The newest version of a key in the container and the smallest sequence number of its row
/// (`DbInner::newest_in_container`).
pub(crate) struct NewestInRow {
    pub kind: ValueKind,
    pub value: Vec<u8>,
    pub smallest_seq: SeqNo,
}

impl DbInner {
    fn container(&self) -> Result<&ContainerHandle> {
        self.levels
            .container()
            .ok_or_else(|| Error::invalid("the database does not use the matrix L0 layout"))
    }

    /// Moves deferred page releases whose versions are gone back into the pool.
    pub(crate) fn release_deferred_pages(&self, st: &mut MutexGuard<'_, State>) {
        if st.deferred_pages.is_empty() || st.releasing_pages {
            return;
        }
        // Released pages are never in the current version (nor in any version built later):
        // only older versions still held by readers can reference them.
        let older = st.versions.older_live_versions();
        if older.is_empty() {
            let free = std::mem::take(&mut st.deferred_pages);
            if let Some(pool) = st.pool.as_mut() {
                pool.free(&free);
            }
            self.gauges.publish(st);
            return;
        }
        // Scanning the older versions' pages takes milliseconds for a large container: do it
        // without the lock (writers take it on every write). The pages stay in
        // `deferred_pages` meanwhile, and the flag keeps a second thread from freeing them
        // twice.
        st.releasing_pages = true;
        let deferred: HashSet<u32> = st.deferred_pages.iter().copied().collect();
        let free: HashSet<u32> = MutexGuard::unlocked(st, || {
            let mut held: HashSet<u32> = HashSet::new();
            for v in &older {
                let c = v.container();
                for m in c.receiver.iter().chain(c.compactor.iter()) {
                    held.extend(m.pages.live().filter(|p| deferred.contains(p)));
                }
            }
            drop(older);
            deferred.difference(&held).copied().collect()
        });
        st.releasing_pages = false;
        st.deferred_pages.retain(|p| !free.contains(p));
        let free: Vec<u32> = free.into_iter().collect();
        if let Some(pool) = st.pool.as_mut() {
            pool.free(&free);
        }
        self.gauges.publish(st);
    }

    /// Flushes immutable memtable `job` into the receiver. Runs without the state lock except
    /// to allocate pages and to install.
    pub(crate) fn run_flush_matrix(
        &self,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let mut laps = Laps::start();
        if !job.mem.has_entries() {
            // No entries to write; the log number moves past this memtable's WAL segment and
            // its range tombstones (if any) move into the version.
            let manifest = self.manifest.lock();
            let mut st = self.state.lock();
            let mut edit = VersionEdit {
                log_number: Some(super::log_number_after_flush(&st)),
                ..VersionEdit::default()
            };
            let max_seq = super::flush::add_range_dels(&mut edit, &job.mem);
            if max_seq > st.versions.last_sequence() {
                st.versions.set_last_sequence(max_seq);
            }
            self.install_edit(manifest, &mut st, &mut edit)?;
            super::wal_recycle::retire_oldest_imm(&mut st);
            self.refresh_view(&st);
            drop(st);
            self.release_value_files(job.wal);
            return Ok(0);
        }
        // Shared with the memtable, not copied (but for folded merges): the builder passes over
        // them twice. Versions no snapshot needs are left out, as a compaction would.
        let smallest_snapshot = self.smallest_snapshot(&self.state.lock());
        let keyspaces = self.keyspaces();
        let fold = job
            .mem
            .flush_entries(smallest_snapshot, Some(&*keyspaces))?;
        Counters::add(&self.counters.flush_dropped_versions, fold.dropped);
        Counters::add(&self.counters.merge_failures, fold.merge_failures);
        phases.collect_micros = laps.lap();
        let value_file = self.finish_value_file(job.wal, &fold.entries)?;
        let inlined;
        let entries = match value_file.inlined() {
            Some(file) => {
                inlined = self.inline_values(&fold.entries, file)?;
                &inlined
            }
            None => &fold.entries,
        };
        let mut flushed = self.flushed_entries(entries, outputs)?;
        phases.values_micros = laps.lap();
        let relocated = match value_file {
            FlushedValueFile::Install(summary, garbage) => {
                flushed.blobs.adopt_blob(summary, garbage);
                None
            }
            FlushedValueFile::Relocate {
                file_bytes,
                live_bytes,
                ..
            } => Some((file_bytes, live_bytes)),
            FlushedValueFile::None | FlushedValueFile::Inline(_) => None,
        };
        // The blob files written here are released by the install (or, if it fails, by the
        // caller's drop of `outputs`: orphans for obsolete-file deletion). The memtable's
        // value file is not among them: it stays pending until an install names it (its
        // segment still points into it).
        let result = self.install_flushed_row(job, flushed, relocated, outputs, phases, laps);
        if result.is_ok() {
            self.release_value_files(job.wal);
        }
        result
    }

    /// Writes the entries of a flush into a new row of the container and installs it with the
    /// blob files its pointers reference; `relocated`: the bytes written to the memtable's
    /// value file and those of them copied out, when the flush drops that file. Returns the
    /// bytes of the row's pages.
    fn install_flushed_row(
        &self,
        job: &ImmMem,
        flushed: super::separation::FlushedEntries<'_>,
        relocated: Option<(u64, u64)>,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
        mut laps: Laps,
    ) -> Result<u64> {
        let handle = self.container()?;
        let layout = RowLayout::measure(flushed.pairs(), self.opts.table.bloom_bits_per_key);
        let needed = layout.pages_needed(handle.page_bytes);
        // Allocate pages, waiting for column compaction to free some if the container is full.
        let (pages, row, prev) = {
            let mut st = self.state.lock();
            loop {
                self.release_deferred_pages(&mut st);
                super::check_poison(&st)?;
                let pool = st
                    .pool
                    .as_mut()
                    .ok_or_else(|| Error::invalid("no page pool"))?;
                if needed > pool.total_pages() {
                    return Err(Error::invalid(format!(
                        "a memtable needs {needed} pages but the container has only {}",
                        pool.total_pages()
                    )));
                }
                if let Some(p) = pool.allocate(needed) {
                    st.flush_needs_pages = false;
                    self.gauges.publish(&st);
                    let row = st.versions.new_row_number();
                    let prev = newest_row(&st.versions.current());
                    break (p, row, prev);
                }
                if st.shutting_down {
                    st.flush_needs_pages = false;
                    return Err(Error::Closed);
                }
                if let Some(e) = self.container_stuck(&st, handle, needed) {
                    st.flush_needs_pages = false;
                    return Err(e);
                }
                st.flush_needs_pages = true;
                self.signal_work(&mut st);
                if st.deferred_pages.is_empty() {
                    // Pages come back through the compaction thread (a role switch, column
                    // compactions, the release of their pages), which signals `bg_cv` after
                    // each step; so do a poison and the shutdown.
                    self.bg_cv.wait(&mut st);
                } else {
                    // Timed: released pages that an older version still references return
                    // to the pool once its last reader (an iterator, a snapshot read) drops
                    // it, which signals nothing; they are looked at again after this pause.
                    self.bg_cv.wait_for(&mut st, DEFERRED_PAGES_RECHECK);
                }
            }
        };
        phases.pages_wait_micros = laps.lap();
        let prev = match prev {
            Some(m) => Some((Arc::clone(&m), handle.reader(&m)?)),
            None => None,
        };
        let written = write_mem_row(
            handle,
            flushed.pairs(),
            &layout,
            pages.clone(),
            row,
            prev.as_ref().map(|(m, r)| (m.as_ref(), Arc::clone(r))),
        );
        let meta = match written {
            Ok(m) => m,
            Err(e) => {
                if let Some(pool) = self.state.lock().pool.as_mut() {
                    pool.free(&pages);
                }
                return Err(e);
            }
        };
        let bytes = (meta.pages.len() * handle.page_bytes) as u64;
        phases.table_micros = laps.lap();
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        phases.manifest_wait_micros = laps.lap();
        let mut edit = VersionEdit {
            log_number: Some(super::log_number_after_flush(&st)),
            ..VersionEdit::default()
        };
        let max_seq = super::flush::add_range_dels(&mut edit, &job.mem).max(meta.largest_seq);
        if max_seq > st.versions.last_sequence() {
            st.versions.set_last_sequence(max_seq);
        }
        let row_pages: Vec<u32> = meta.pages.live().collect();
        edit.new_rows.push(meta);
        let blob_bytes = flushed.blobs.blob_bytes();
        // Blob files only (a flush writes no table).
        let _ = flushed.blobs.add_to(&mut edit, 0);
        if let Err(e) = self.install_job_edit(manifest, &mut st, &mut edit, outputs) {
            self.discard_row_pages(&mut st, &row_pages);
            return Err(e);
        }
        super::wal_recycle::retire_oldest_imm(&mut st);
        self.refresh_view(&st);
        // Counted before the state lock goes, so whoever waits for this flush (`Db::flush`)
        // reads them.
        Counters::add(&self.counters.blob_bytes_written, blob_bytes);
        Counters::add(&self.counters.slow_bytes_written, blob_bytes);
        if let Some((file_bytes, live_bytes)) = relocated {
            // The dropped file's bytes went to the slow tier's page cache (and may have been
            // written back): counted as written, as if it had been installed.
            Counters::add(&self.counters.blob_bytes_written, file_bytes);
            Counters::add(&self.counters.slow_bytes_written, file_bytes);
            Counters::add(&self.counters.blob_relocated_bytes, live_bytes);
            Counters::add(&self.counters.value_files_relocated, 1);
        }
        drop(st);
        phases.install_micros = laps.lap();
        Ok(bytes)
    }

    /// The error for a flush that needs `needed` pages the pool lacks when nothing can free
    /// any (`None` while something can): no page waits for an older version's readers to go,
    /// and the compaction thread may not run (`Options::compaction_enabled` is false and no
    /// manual compaction is pending) or has no row to drain. The flush fails with
    /// [`Error::NoSpace`] on the fast tier instead of waiting forever: it is retried after
    /// the usual growing pause, and writers waiting for it give up after
    /// `Options::no_space_timeout` (bg_error).
    fn container_stuck(
        &self,
        st: &State,
        handle: &ContainerHandle,
        needed: usize,
    ) -> Option<Error> {
        if !st.deferred_pages.is_empty() {
            return None;
        }
        let v = st.versions.current();
        let c = v.container();
        let has_rows = !c.receiver.is_empty() || !c.compactor.is_empty();
        let compaction_runs = self.opts.compaction_enabled || Self::manual_pending(st);
        if compaction_runs && has_rows {
            return None;
        }
        let (used, total) = st
            .pool
            .as_ref()
            .map_or((0, 0), |p| (p.used_pages(), p.total_pages()));
        let why = if compaction_runs {
            "no row is left to drain".to_owned()
        } else {
            "Options::compaction_enabled is false, so nothing drains it into L1 (reopen with \
             compactions enabled)"
                .to_owned()
        };
        Some(Error::NoSpace {
            tier: crate::error::TierKind::Fast,
            dir: handle.path.clone(),
            cause: format!(
                "a flush needs {needed} pages of the matrix container but {used} of its \
                 {total} are in use and {why}"
            ),
        })
    }

    /// One step of L0 work in the matrix layout: a role switch when due, else one column
    /// compaction. Called by the compaction thread with `state` locked. `Ok(false)`: nothing to do.
    pub(crate) fn matrix_step(&self, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        self.matrix_step_with(st, false)
    }

    /// [`DbInner::matrix_step`] that also switches roles when the receiver is below
    /// `receiver_switch_ratio` (but not empty): a manual compaction drains every row.
    pub(crate) fn matrix_step_forced(&self, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        self.matrix_step_with(st, true)
    }

    fn matrix_step_with(&self, st: &mut MutexGuard<'_, State>, force: bool) -> Result<bool> {
        // A role switch is due: forced, whenever the receiver holds a row.
        let due = |st: &State| {
            if force {
                !st.versions.current().container().receiver.is_empty()
            } else {
                self.matrix_has_work(st)
            }
        };
        let version = st.versions.current();
        let c = version.container();
        if c.compactor.is_empty() {
            if !due(st) {
                return Ok(false);
            }
            // Lock order is manifest → state: release state to take the manifest lock, then
            // check again (only this thread switches roles, but the receiver may have grown).
            let manifest = MutexGuard::unlocked(st, || self.manifest.lock());
            if !st.versions.current().container().compactor.is_empty() || !due(st) {
                return Ok(false);
            }
            let mut edit = VersionEdit {
                switch_roles: true,
                ..VersionEdit::default()
            };
            self.install_edit(manifest, st, &mut edit)?;
            self.refresh_view(st);
            Counters::add(&self.counters.role_switches, 1);
            return Ok(true);
        }
        let smallest_snapshot = self.smallest_snapshot(st);
        let result = self.run_job(st, JobFlag::Compacting, || {
            self.run_column(&version, smallest_snapshot)
        });
        result.map(|()| true)
    }

    /// Point lookup in the container as of `seq`: the versions of `user_key` in the rows,
    /// newest first, appended to `chain` up to and including the first that is not a merge
    /// operand (usually just the newest version). Rows are walked newest first, rows whose
    /// bloom filter rules the key out skipped, compactor rows skipped for drained keys, each
    /// search narrowed by the window the newer row's forward pointers give (when hints are on
    /// and the previous row searched is the one the forward pointers index).
    ///
    /// `floors` (sorted lookups at one sequence number, `Db::multi_get`): where in each row
    /// (by row number) the previous, smaller key of the lookup was found. A row searched
    /// without a hint window gallops from there instead of searching the whole row, and the
    /// key's own position is recorded for the next one.
    pub(crate) fn versions_in_container(
        &self,
        version: &Version,
        user_key: &[u8],
        seq: SeqNo,
        chain: &mut crate::key::Versions,
        mut floors: Option<&mut RowFloors>,
    ) -> Result<()> {
        self.walk_container(
            version,
            user_key,
            |_| false,
            |reader, meta, window| {
                let row = meta.row;
                let floor = floors
                    .as_deref()
                    .and_then(|f| f.get(&row).copied())
                    .unwrap_or_default();
                if window.is_none() && floor.gallop {
                    Counters::add(&self.counters.finger_row_searches, 1);
                }
                let (versions, next, at) = reader.versions_from(user_key, seq, window, floor)?;
                if let Some(f) = floors.as_deref_mut() {
                    // The first key found in a row gives no gap yet: its successor searches the
                    // whole row, and gallops from then on if the keys are dense.
                    let gap = if f.contains_key(&row) {
                        at.saturating_sub(floor.at)
                    } else {
                        usize::MAX
                    };
                    f.insert(row, Floor::after(at, gap, reader.len()));
                }
                chain.extend(versions);
                let done = chain.last().is_some_and(|(k, _)| *k != ValueKind::Merge);
                Ok((done, next))
            },
        )
    }

    /// The newest version of `user_key` at or below `seq` in the container (merge operands
    /// included, as found), with the smallest sequence number of the row holding it.
    ///
    /// Rows whose every entry is older than `older_than` are not searched (a covering range
    /// tombstone of that sequence number deletes whatever they hold).
    pub(crate) fn newest_in_container(
        &self,
        version: &Version,
        user_key: &[u8],
        seq: SeqNo,
        older_than: SeqNo,
    ) -> Result<Option<NewestInRow>> {
        let mut newest = None;
        let skip = |meta: &RowMeta| meta.largest_seq < older_than;
        self.walk_container(version, user_key, skip, |reader, meta, window| {
            let (versions, next, _) =
                reader.versions_from(user_key, seq, window, Floor::default())?;
            match versions.into_iter().next() {
                Some((kind, value)) => {
                    newest = Some(NewestInRow {
                        kind,
                        value,
                        smallest_seq: meta.smallest_seq,
                    });
                    Ok((true, next))
                }
                None => Ok((false, next)),
            }
        })?;
        Ok(newest)
    }

    /// Walks the rows that may hold `user_key`, newest first (filters, drained compactor rows
    /// and hint windows as described at [`Self::versions_in_container`]), calling `search` with each
    /// row's reader and window until it says it is done; `search` returns the window for the
    /// previous row.
    fn walk_container(
        &self,
        version: &Version,
        user_key: &[u8],
        skip: impl Fn(&RowMeta) -> bool,
        mut search: impl FnMut(
            &RowReader,
            &RowMeta,
            Option<(usize, usize)>,
        ) -> Result<(bool, (usize, usize))>,
    ) -> Result<()> {
        let Some(handle) = self.levels.container() else {
            return Ok(());
        };
        let c = version.container();
        let consumed = version.consumed(user_key);
        // The window applies to the row named by its first element.
        let mut hint: Option<(u64, (usize, usize))> = None;
        let rows = c
            .receiver
            .iter()
            .rev()
            .map(|m| (m, false))
            .chain(c.compactor.iter().rev().map(|m| (m, true)));
        // Every row's filter uses the same hash: compute it once per lookup.
        let hash = key_hash(user_key);
        for (meta, in_compactor) in rows {
            if in_compactor && consumed {
                // The key's column is in L1 now, and every row from here on is a compactor
                // row: none of them can answer.
                break;
            }
            if skip(meta) {
                hint = None;
                continue;
            }
            let reader = handle.reader(meta)?;
            if !reader.may_contain_hash(hash) {
                // Filter policy: a skipped row is not searched at all, so it leaves no window
                // and the next row that passes its filter is searched whole. Keeping the
                // hint chain alive instead would cost a windowed search (two forward pointers
                // plus a probe or two) in every skipped row, to save at most one full binary
                // search (log2 n probes) in a later row that passes its filter; with about
                // 1% false positives most lookups search a single row, the one holding the
                // key, so the chain would almost never pay off. Windows still apply when
                // consecutive rows both pass their filters (several versions of a key, or
                // snapshot reads past newer versions).
                Counters::add(&self.counters.row_filter_skips, 1);
                hint = None;
                continue;
            }
            let window = match hint {
                Some((row, w)) if self.opts.hints && row == meta.row => Some(w),
                _ => None,
            };
            if window.is_some() {
                Counters::add(&self.counters.hinted_row_searches, 1);
            }
            Counters::add(&self.counters.row_searches, 1);
            let (done, next) = search(&reader, meta, window)?;
            if done {
                return Ok(());
            }
            hint = Some((meta.prev_row, next));
        }
        Ok(())
    }

    /// Iterators over the container's rows (newest first), compactor rows without their
    /// drained key range. With hints on, the rows of one iterator share a [`SeekHint`], so a
    /// seek in a row narrows the seek in the row after it (the merging iterator seeks its
    /// children in order, newest first).
    pub(crate) fn container_iters(self: &Arc<Self>, version: &Version) -> Result<Vec<BoxedIter>> {
        let Some(handle) = self.levels.container() else {
            return Ok(Vec::new());
        };
        let c = version.container();
        let shared = Arc::new(Mutex::new(Rank::LeafSeekHint, SeekHint::default()));
        let row_iter = |m: &Arc<RowMeta>| -> Result<BoxedIter> {
            let it = handle.reader(m)?.iter();
            Ok(if self.opts.hints {
                Box::new(HintedRowIter {
                    inner: it,
                    row: m.row,
                    prev_row: m.prev_row,
                    shared: Arc::clone(&shared),
                    db: Arc::clone(self),
                })
            } else {
                Box::new(it)
            })
        };
        let mut out: Vec<BoxedIter> = Vec::new();
        for m in c.receiver.iter().rev() {
            out.push(row_iter(m)?);
        }
        let drained = drained_ranges(c.drain.as_ref());
        for m in c.compactor.iter().rev() {
            let it = row_iter(m)?;
            out.push(if drained.is_empty() {
                it
            } else {
                Box::new(ExcludeRanges::new(it, drained.clone()))
            });
        }
        Ok(out)
    }
}

/// The window the last seek of a row left for the row before it (its `prev_row`), for the
/// same target.
#[derive(Default)]
struct SeekHint {
    target: Vec<u8>,
    /// The window is for `seek_for_prev` (the first entry > target) rather than `seek`.
    for_prev: bool,
    row: u64,
    window: (usize, usize),
}

/// A row iterator whose seeks (both directions) use and leave cross-row hint windows.
struct HintedRowIter {
    inner: RowIter,
    row: u64,
    prev_row: u64,
    shared: Arc<Mutex<SeekHint>>,
    db: Arc<DbInner>,
}

impl InternalIterator for HintedRowIter {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) -> Result<()> {
        self.inner.seek_to_first()
    }
    fn seek_to_last(&mut self) -> Result<()> {
        self.inner.seek_to_last()
    }
    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.hinted_seek(target, false)
    }
    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.hinted_seek(target, true)
    }
    fn next(&mut self) -> Result<()> {
        self.inner.next()
    }
    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn value_status(&self) -> Result<()> {
        self.inner.value_status()
    }
    fn site(&self) -> Option<crate::error::CorruptionSite> {
        self.inner.site()
    }
}

impl HintedRowIter {
    /// A seek (`for_prev`: a seek for the last entry ≤ target) narrowed by the window the
    /// newer row left for this row and the same target, leaving the window for the older row.
    fn hinted_seek(&mut self, target: &[u8], for_prev: bool) -> Result<()> {
        let window = {
            let h = self.shared.lock();
            (h.row == self.row && h.for_prev == for_prev && h.target == target).then_some(h.window)
        };
        Counters::add(&self.db.counters.row_searches, 1);
        let (lo, hi) = match window {
            Some(w) => {
                Counters::add(&self.db.counters.hinted_row_searches, 1);
                w
            }
            None => (0, self.inner.reader().len()),
        };
        let next = self.inner.seek_within(target, lo, hi, for_prev)?;
        let mut h = self.shared.lock();
        h.target.clear();
        h.target.extend_from_slice(target);
        h.for_prev = for_prev;
        h.row = self.prev_row;
        h.window = next;
        Ok(())
    }
}

/// The user-key ranges a drain has consumed so far (circular `[start, cursor)`).
pub(crate) fn drained_ranges(drain: Option<&crate::version::version::Drain>) -> Vec<KeyRange> {
    let Some(d) = drain else { return Vec::new() };
    if d.wrapped {
        let mut v = vec![KeyRange {
            lower: d.start.clone(),
            upper: None,
        }];
        if !d.cursor.is_empty() {
            v.push(KeyRange {
                lower: Vec::new(),
                upper: Some(d.cursor.clone()),
            });
        }
        v
    } else if d.cursor > d.start {
        vec![KeyRange {
            lower: d.start.clone(),
            upper: Some(d.cursor.clone()),
        }]
    } else {
        Vec::new()
    }
}

/// Allocates the page pool of a recovered version.
pub(crate) fn rebuild_pool(
    version: &Version,
    total_pages: u32,
    page_bytes: usize,
    path: &std::path::Path,
) -> Result<PagePool> {
    PagePool::rebuild(total_pages, page_bytes, version.all_row_pages()).map_err(|reason| {
        Error::corruption(
            crate::error::CorruptionSite::new(crate::error::ArtifactKind::Manifest, path, 0),
            reason,
        )
    })
}
