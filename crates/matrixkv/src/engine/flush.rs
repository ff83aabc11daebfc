//! Flush: an immutable memtable becomes an L0 table on the fast tier, recorded in the manifest,
//! after which its WAL segment is released.

use std::time::Instant;

use super::jobs::{JobFlag, ReservedOutputs};
use super::{DbInner, ImmMem, State};
use crate::error::Result;
use crate::key::SeqNo;
use crate::layout::{self, FileNum};
use crate::memtable::MemTable;
use crate::options::Tiers;
use crate::sst;
use crate::sst::TableOptions;
use crate::stats::{Counters, FlushPhases, Laps};
use crate::version::edit::{FileMeta, VersionEdit};

/// Writes `mem` as table `number` in the fast-tier directory. Returns `None` for a memtable
/// without entries (its range tombstones, if any, go into the flush's edit instead). Runs
/// without any lock.
pub(crate) fn write_l0_table(
    tiers: &Tiers,
    table: &TableOptions,
    entries: &[crate::memtable::MemEntry],
    number: FileNum,
    codecs: Option<std::sync::Arc<dyn crate::sst::compression::BlockCodecs>>,
) -> Result<Option<FileMeta>> {
    let dir = tiers.fast.dir().to_owned();
    let out = TableOut {
        fs: tiers.fast_fs.as_ref(),
        dir: &dir,
        create: &|p| tiers.fast_fs.create(p),
        record_keys: false,
    };
    Ok(write_table(&out, table, entries, number, codecs)?.map(|(m, _)| m))
}

/// Where [`write_table`] writes: the directory, its file system (synced after the table is
/// written) and how the table's file is created (buffered, or direct on the slow tier).
pub(crate) struct TableOut<'a> {
    pub fs: &'a dyn crate::tier::FileSystem,
    pub dir: &'a std::path::Path,
    pub create: &'a dyn Fn(&std::path::Path) -> Result<Box<dyn crate::tier::WritableFile>>,
    /// Record each user key's newest entry and block ([`sst::Builder::recording_keys`]).
    pub record_keys: bool,
}

/// Writes `entries` as table `number` into `out` (see [`write_l0_table`]); with
/// `out.record_keys`, also returns each user key's newest entry and its block.
pub(crate) fn write_table(
    out: &TableOut<'_>,
    table: &TableOptions,
    entries: &[crate::memtable::MemEntry],
    number: FileNum,
    codecs: Option<std::sync::Arc<dyn crate::sst::compression::BlockCodecs>>,
) -> Result<Option<(FileMeta, Vec<sst::builder::KeyBlock>)>> {
    if entries.is_empty() {
        return Ok(None);
    }
    let (fs, dir) = (out.fs, out.dir);
    let path = layout::path(dir, &layout::table_name(number));
    let file = (out.create)(&path)?;
    let mut builder = sst::Builder::new(file, path, table)?.with_codecs(codecs);
    if out.record_keys {
        builder = builder.recording_keys();
    }
    for e in entries {
        builder.add(e.key(), e.value())?;
    }
    let summary = builder.finish()?;
    fs.sync_dir(dir)?;
    Ok(Some((
        FileMeta {
            number,
            size: summary.size,
            smallest: summary.smallest,
            largest: summary.largest,
            smallest_seq: summary.smallest_seq,
            largest_seq: summary.largest_seq,
            entries: summary.entries,
            blob_refs: None,
        },
        summary.keys,
    )))
}

/// Moves the range tombstones of flushed memtable `mem` into the flush's `edit`; returns the
/// largest of their sequence numbers (zero without any), which the version set's last sequence
/// must cover once the WAL segment holding them is gone.
pub(crate) fn add_range_dels(edit: &mut VersionEdit, mem: &MemTable) -> SeqNo {
    let tombstones = mem.range_tombstones();
    let max = tombstones
        .iter()
        .map(|t| t.seq)
        .max()
        .unwrap_or(SeqNo::ZERO);
    // The write path refuses empty ranges; a replayed one (never written by this engine)
    // would only be refused by the version, so it is left out.
    edit.new_range_dels
        .extend(tombstones.into_iter().filter(|t| t.start < t.end));
    max
}

impl DbInner {
    /// Flushes the oldest immutable memtable. Called by the flush thread with `state` locked;
    /// releases and re-takes it around the I/O.
    pub(crate) fn flush_one(
        &self,
        st: &mut crate::lock_order::MutexGuard<'_, State>,
    ) -> Result<()> {
        let Some(job) = st.imm.front().cloned() else {
            return Ok(());
        };
        // The job is dropped before the lock is taken back: once the flush is installed it
        // holds the last reference to the memtable (and its WAL region), and freeing a 64 MiB
        // skiplist takes tens of milliseconds, which writers waiting for the state lock in
        // `make_room` would otherwise spend queued (the open-loop tail at each memtable switch).
        // The outputs' guard drops there too, without the lock (it takes it if the flush
        // failed).
        self.run_job(st, JobFlag::Flushing, move || {
            let mut outputs = ReservedOutputs::new(self);
            let r = self.run_flush(&job, &mut outputs);
            drop(job);
            drop(outputs);
            r
        })
    }

    /// The unlocked part of a flush: write the table, then install the edit. Output numbers
    /// are reserved in `outputs` and released by the install.
    fn run_flush(&self, job: &ImmMem, outputs: &mut ReservedOutputs<'_>) -> Result<()> {
        let start = Instant::now();
        let mut phases = FlushPhases::default();
        let written = self.levels.flush(self, job, outputs, &mut phases)?;
        self.count_flush(start, written, &phases);
        Ok(())
    }

    /// Counts a finished flush of `written` bytes that started at `start`.
    fn count_flush(&self, start: Instant, written: u64, phases: &FlushPhases) {
        Counters::add(&self.counters.flushes, 1);
        Counters::add(&self.counters.flush_bytes, written);
        Counters::add(
            &self.counters.flush_micros,
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        self.counters.record_flush(phases);
    }

    /// The entries a flush of `job` writes: versions no snapshot needs are left out, as a
    /// compaction would; merge operands are folded. Counts what was dropped.
    pub(super) fn flush_fold(&self, job: &ImmMem) -> Result<crate::memtable::FlushEntries> {
        let smallest_snapshot = self.smallest_snapshot(&self.state.lock());
        let fold = job
            .mem
            .flush_entries(smallest_snapshot, Some(&*self.keyspaces()))?;
        Counters::add(&self.counters.flush_dropped_versions, fold.dropped);
        Counters::add(&self.counters.merge_failures, fold.merge_failures);
        Ok(fold)
    }

    /// The edit of a flush of `job` into the level-0 tables `metas` (none for a memtable
    /// without entries; one per partition in the LightKV design): the new log number (every
    /// memtable older than the next unflushed one is now in a table), the memtable's range
    /// tombstones, and the last sequence number raised to cover every table and tombstone.
    pub(super) fn flush_edit(
        st: &mut State,
        job: &ImmMem,
        metas: impl IntoIterator<Item = FileMeta>,
    ) -> VersionEdit {
        let mut edit = VersionEdit {
            log_number: Some(super::log_number_after_flush(st)),
            ..VersionEdit::default()
        };
        edit.new_files.extend(metas.into_iter().map(|m| (0, m)));
        let max_seq = edit
            .new_files
            .iter()
            .map(|(_, m)| m.largest_seq)
            .max()
            .unwrap_or(SeqNo::ZERO);
        let max_seq = add_range_dels(&mut edit, &job.mem).max(max_seq);
        if max_seq > st.versions.last_sequence() {
            st.versions.set_last_sequence(max_seq);
        }
        edit
    }

    /// A flush into an L0 table (the leveled layout). Returns the table's bytes.
    pub(super) fn run_flush_l0(
        &self,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let mut laps = Laps::start();
        let keyspaces = self.keyspaces();
        let fold = self.flush_fold(job)?;
        phases.collect_micros = laps.lap();
        let number = outputs.reserve();
        let meta = write_l0_table(
            &self.tiers,
            &self.opts.table,
            &fold.entries,
            number,
            keyspaces.block_codecs(),
        )?;
        let written = meta.as_ref().map_or(0, |m| m.size);
        phases.table_micros = laps.lap();
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        phases.manifest_wait_micros = laps.lap();
        let mut edit = Self::flush_edit(&mut st, job, meta);
        self.install_job_edit(manifest, &mut st, &mut edit, outputs)?;
        super::wal_recycle::retire_oldest_imm(&mut st);
        self.refresh_view(&st);
        drop(st);
        phases.install_micros = laps.lap();
        Ok(written)
    }

    /// Prepares `edit` under `state`, appends it to the manifest without `state`, and installs it.
    ///
    /// # Preconditions
    /// The caller holds the manifest lock (passed in), which makes it the only thread able to
    /// change the current version, so dropping `state` during the append is safe.
    pub(crate) fn install_edit(
        &self,
        mut manifest: crate::lock_order::MutexGuard<'_, crate::version::manifest::ManifestWriter>,
        st: &mut crate::lock_order::MutexGuard<'_, State>,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        if st.unsettled.roll_due {
            // An earlier append failed: nothing may follow it in that file (bg_error).
            self.roll_manifest(&mut manifest, st)?;
        }
        let version = st.versions.prepare(edit).map_err(|reason| {
            // The edit does not apply to the state the manifest holds up to where it would
            // be appended.
            crate::error::Error::corruption(
                crate::error::CorruptionSite::new(
                    crate::error::ArtifactKind::Manifest,
                    manifest.path(),
                    manifest.size_bytes(),
                ),
                reason,
            )
        })?;
        let before = manifest.size_bytes();
        let appended = crate::lock_order::MutexGuard::unlocked(st, || manifest.append(edit));
        if let Err(e) = appended {
            // The record may or may not be on disk: replace the manifest, or reserve what the
            // edit names until that succeeds. Lack of space is retried by the caller's loop;
            // any other failure stops writes.
            self.manifest_append_failed(&mut manifest, st, edit);
            if !e.is_no_space() {
                self.poison(st, &e);
            }
            return Err(e);
        }
        Counters::add(
            &self.counters.manifest_bytes_written,
            manifest.size_bytes() - before,
        );
        Counters::add(
            &self.counters.slow_bytes_written,
            manifest.size_bytes() - before,
        );
        st.versions.install(edit, version);
        self.gauges.publish(st);
        // A new version may give the compaction thread work (a flushed table or row).
        self.signal_work(st);
        Ok(())
    }
}

#[cfg(test)]
mod tests;
