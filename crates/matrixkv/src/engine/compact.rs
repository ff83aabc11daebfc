//! Executes a compaction plan chosen by the pure picker (`crate::compaction::picker`):
//! merge the input tables, drop versions no snapshot can see and tombstones that hide nothing,
//! write the output tables to the slow tier, and install one version edit.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::jobs::{JobFlag, ReservedOutputs};
use super::{DbInner, State};
use crate::blob::BlobPointer;
use crate::blob::writer::{BlobSummary, BlobWriter};
use crate::compaction::picker::{self, Plan};
use crate::error::{ArtifactKind, CorruptionSite, Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo};
use crate::layout::{self, FileNum};
use crate::sst;
use crate::stats::Counters;
use crate::version::edit::{BlobFileMeta, BlobGarbage, FileMeta, VersionEdit};
use crate::version::version::Version;

mod fold;
mod merge;

#[cfg(test)]
use fold::Filtering;

/// Most tables one blob GC job rewrites: with tables split near `target_file_bytes` of
/// referenced data, a job relocates at most about this many times that.
const BLOB_GC_MAX_TABLES: usize = 4;

impl DbInner {
    /// The picker configuration from the options.
    pub(crate) fn picker_config(&self) -> picker::PickerConfig {
        picker::PickerConfig {
            l0_compaction_trigger: self.opts.l0_compaction_trigger,
            l1_target_bytes: self.opts.l1_target_bytes,
            level_multiplier: self.opts.level_multiplier,
            num_levels: self.opts.num_levels,
        }
    }

    /// The blob GC configuration from the options.
    pub(crate) fn blob_gc_config(&self) -> picker::BlobGcConfig {
        picker::BlobGcConfig {
            space_budget: self.opts.blob_space_budget,
            max_tables: BLOB_GC_MAX_TABLES,
        }
    }

    /// Picks and runs one compaction: a step of a manual compaction when one was requested,
    /// else a level or L0 compaction when one is due, else a blob GC job (lowest priority).
    /// Called by the compaction thread with `state` locked; releases it around the I/O.
    /// Returns `Ok(false)` when there was nothing to do.
    pub(crate) fn compact_one(
        &self,
        st: &mut crate::lock_order::MutexGuard<'_, State>,
    ) -> Result<bool> {
        // Files a range tombstone emptied, and tombstones with nothing left to delete, leave
        // the version first (an edit without table I/O; nothing when there is no tombstone).
        if self.range_del_step(st)? {
            return Ok(true);
        }
        // A manual compaction (Db::compact_range) goes first; it also runs with automatic
        // compactions disabled.
        if self.manual_step(st)? {
            return Ok(true);
        }
        if !self.opts.compaction_enabled {
            return Ok(false);
        }
        self.levels.compact_step(self, st)
    }

    /// The leveled structures' next plan (a level over its target, L0 tables to merge) on
    /// the current version.
    pub(super) fn leveled_plan(&self, st: &State) -> (Arc<Version>, Option<Plan>) {
        let version = st.versions.current();
        let plan = picker::pick(
            &version,
            &self.picker_config(),
            st.versions.compact_pointers(),
        );
        (version, plan)
    }

    /// Runs `plan` (from [`DbInner::leveled_plan`] on `version`) or, without one, the
    /// lower-priority work of the leveled structures: blob GC, then the edges of ranges every
    /// snapshot sees deleted. `Ok(false)` when there is none.
    pub(super) fn run_leveled(
        &self,
        st: &mut crate::lock_order::MutexGuard<'_, State>,
        version: Arc<Version>,
        plan: Option<Plan>,
    ) -> Result<bool> {
        let smallest_snapshot = self.smallest_snapshot(st);
        let Some(plan) = plan
            .or_else(|| picker::pick_blob_gc(&version, &self.blob_gc_config()))
            .or_else(|| picker::pick_range_del_rewrite(&version, SeqNo(smallest_snapshot)))
        else {
            return Ok(false);
        };
        let result = self.run_job(st, JobFlag::Compacting, || {
            if matches!(plan, Plan::BlobGc { .. }) {
                self.run_blob_gc(&version, plan, smallest_snapshot)
            } else {
                self.run_compaction(&version, plan, smallest_snapshot)
            }
        });
        result.map(|()| true)
    }

    /// True when an automatic compaction would run now (what `Db::wait_for_compactions`
    /// waits out), as the level structure decides.
    pub(crate) fn has_compaction_work(&self, st: &State) -> bool {
        self.levels.has_compaction_work(self, st)
    }

    /// True when [`DbInner::run_leveled`] would run a job on the current version: a level,
    /// L0 tables, blob GC or a range-tombstone rewrite.
    pub(super) fn leveled_has_work(&self, st: &State) -> bool {
        let v = st.versions.current();
        picker::pick(&v, &self.picker_config(), st.versions.compact_pointers()).is_some()
            || picker::pick_blob_gc(&v, &self.blob_gc_config()).is_some()
            || picker::pick_range_del_rewrite(&v, SeqNo(self.smallest_snapshot(st))).is_some()
    }

    /// Installs the edit of [`range_del_cleanup`] for the current version, if it has one.
    /// Called with `state` locked by the compaction thread (so no compaction is writing
    /// outputs meanwhile); takes the manifest lock in order (releasing `state`) only when there
    /// is something to do, and decides again under both locks.
    fn range_del_step(&self, st: &mut crate::lock_order::MutexGuard<'_, State>) -> Result<bool> {
        if st.versions.current().range_dels().is_empty() || st.compacting {
            return Ok(false);
        }
        let cleanup = |st: &State| {
            range_del_cleanup(&st.versions.current(), SeqNo(self.smallest_snapshot(st)))
        };
        if cleanup(st).is_none() {
            return Ok(false);
        }
        let manifest = crate::lock_order::MutexGuard::unlocked(st, || self.manifest.lock());
        let Some(mut edit) = cleanup(st) else {
            return Ok(false);
        };
        let files = edit.deleted_files.len() as u64;
        let tombstones = edit.deleted_range_dels.len() as u64;
        self.install_edit(manifest, st, &mut edit)?;
        self.refresh_view(st);
        Counters::add(&self.counters.range_del_dropped_files, files);
        Counters::add(&self.counters.range_del_collected, tombstones);
        Ok(true)
    }

    /// True when the matrix container has L0 work: a compactor to drain, or a receiver due
    /// to become the compactor.
    pub(crate) fn matrix_has_work(&self, st: &State) -> bool {
        let Some(handle) = self.levels.container() else {
            return false;
        };
        let v = st.versions.current();
        let c = v.container();
        if !c.compactor.is_empty() {
            return true;
        }
        let capacity = st.pool.as_ref().map_or(0, |p| p.total_pages()) * handle.page_bytes;
        let receiver = c.receiver_pages() * handle.page_bytes;
        // A flush waiting for pages switches roles whatever the receiver's size: pages that
        // an iterator's version pins stay allocated, and with enough of them the receiver
        // could never reach the switch ratio while the flush waits forever.
        !c.receiver.is_empty()
            && (st.flush_needs_pages
                || receiver as f64 >= self.opts.receiver_switch_ratio * capacity as f64
                || c.receiver.len() >= self.receiver_switch_rows())
    }

    /// Rows after which the receiver becomes the compactor whatever its pages. With values
    /// separated at flush a row holds keys and pointers only, and the receiver would reach
    /// `receiver_switch_ratio` of the container after tens of times more data than with
    /// values. Twice the memtables that fill the receiver to the ratio: a row of values takes
    /// more than half its memtable's bytes, so rows of values still switch by their pages, as
    /// before, and rows of pointers switch after at most twice the same user data.
    fn receiver_switch_rows(&self) -> usize {
        if !self.opts.separate_at_flush {
            return usize::MAX;
        }
        let memtables = self.opts.receiver_switch_ratio * self.opts.container_bytes as f64
            / self.opts.write_buffer_bytes.max(1) as f64;
        ((2.0 * memtables).ceil() as usize).max(1)
    }

    /// Runs a blob GC plan: an in-place compaction of its tables that relocates their
    /// pointers into the plan's blob files. A function of its own so that fault-injection
    /// traces (tests/fault_sweep.rs) tell its I/O apart from ordinary compactions'.
    #[inline(never)]
    fn run_blob_gc(
        &self,
        version: &Arc<Version>,
        plan: Plan,
        smallest_snapshot: u64,
    ) -> Result<()> {
        log::debug!("matrixkv: blob gc {}", plan.describe());
        self.run_compaction(version, plan, smallest_snapshot)
    }

    pub(crate) fn run_compaction(
        &self,
        version: &Arc<Version>,
        plan: Plan,
        smallest_snapshot: u64,
    ) -> Result<()> {
        let start = Instant::now();
        log::debug!("matrixkv: compaction {}", plan.describe());
        // Declared before any state guard of this function: dropped (on an error) after it.
        let mut reserved = ReservedOutputs::new(self);
        let (mut edit, in_bytes, outputs) = match plan.move_edit() {
            Some(edit) => {
                Counters::add(&self.counters.trivial_moves, 1);
                (edit, 0, MergeOutput::default())
            }
            None => {
                let inputs = plan.inputs();
                let in_bytes: u64 = inputs.iter().map(|(_, f)| f.size).sum();
                let split_at = |inputs: &[Arc<FileMeta>]| -> Vec<Vec<u8>> {
                    inputs
                        .iter()
                        .skip(1)
                        .map(|f| f.smallest_user().to_vec())
                        .collect()
                };
                let extras = match &plan {
                    Plan::BlobGc {
                        inputs, relocate, ..
                    } => MergeExtras {
                        relocate: relocate.clone(),
                        split_at: split_at(inputs),
                        ..MergeExtras::default()
                    },
                    Plan::Rewrite { inputs, .. } => MergeExtras {
                        split_at: split_at(inputs),
                        ..MergeExtras::default()
                    },
                    _ => MergeExtras::default(),
                };
                let outputs = self.merge_to_level(
                    version,
                    &inputs,
                    plan.output_level(),
                    smallest_snapshot,
                    &extras,
                    &mut reserved,
                )?;
                let mut edit = VersionEdit::default();
                edit.deleted_files
                    .extend(inputs.iter().map(|(level, f)| (*level, f.number)));
                edit.compact_pointers.extend(plan.compact_pointer());
                if plan.level() == 0 {
                    let l0: u64 = inputs
                        .iter()
                        .filter(|(l, _)| *l == 0)
                        .map(|(_, f)| f.size)
                        .sum();
                    Counters::add(&self.counters.l0_compactions, 1);
                    Counters::add(&self.counters.l0_compaction_input_bytes, l0);
                }
                (edit, in_bytes, outputs)
            }
        };
        let out_bytes = outputs.table_bytes() + outputs.blob_bytes();
        let gc = matches!(plan, Plan::BlobGc { .. }).then_some((in_bytes, outputs.relocated_bytes));
        let _ = outputs.add_to(&mut edit, plan.output_level());
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        self.install_job_edit(manifest, &mut st, &mut edit, &mut reserved)?;
        self.refresh_view(&st);
        drop(st);
        if let Some((tables, relocated)) = gc {
            Counters::add(&self.counters.blob_gc_jobs, 1);
            Counters::add(&self.counters.blob_gc_table_bytes, tables);
            Counters::add(&self.counters.blob_gc_relocated_bytes, relocated);
        }
        Counters::add(&self.counters.compactions, 1);
        Counters::add(&self.counters.compaction_input_bytes, in_bytes);
        Counters::add(&self.counters.compaction_output_bytes, out_bytes);
        Counters::add(&self.counters.slow_bytes_written, out_bytes);
        Counters::add(
            &self.counters.compaction_micros,
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        Ok(())
    }

    /// Merges the input files into new tables of `output_level` (slow tier).
    fn merge_to_level(
        &self,
        version: &Version,
        inputs: &[(usize, &Arc<FileMeta>)],
        output_level: usize,
        smallest_snapshot: u64,
        extras: &MergeExtras,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<MergeOutput> {
        let mut children: Vec<BoxedIter> = Vec::new();
        for (level, f) in inputs {
            let t = self.tables.get(*level, f)?;
            children.push(Box::new(t.iter()));
        }
        let merged = MergingIterator::new(children);
        self.merge_into_level(
            version,
            Box::new(merged),
            output_level,
            smallest_snapshot,
            extras,
            reserved,
        )
    }

    /// A new file number, protected from obsolete-file deletion until
    /// [`DbInner::forget_pending`] releases it: for files that outlive a job (a memtable's
    /// value file, `separate_at_write`). A job reserves its outputs in a
    /// [`ReservedOutputs`] instead.
    pub(super) fn new_output_number(&self) -> FileNum {
        let mut st = self.state.lock();
        let n = st.versions.new_file_number();
        st.pending_outputs.insert(n.0);
        n
    }

    /// Creates an output file (table or blob file) of a compaction on the slow tier.
    pub(super) fn create_output(
        &self,
        path: &std::path::Path,
    ) -> Result<Box<dyn crate::tier::WritableFile>> {
        if self.opts.direct_writes {
            self.tiers
                .slow_fs
                .create_direct(path, self.opts.bytes_per_sync)
        } else {
            self.tiers
                .slow_fs
                .create_streaming(path, self.opts.bytes_per_sync)
        }
    }

    /// Removes files from `pending_outputs`: installed in the version, or orphans for
    /// obsolete-file deletion to remove.
    pub(crate) fn forget_pending(&self, numbers: impl IntoIterator<Item = u64>) {
        let mut numbers = numbers.into_iter().peekable();
        if numbers.peek().is_none() {
            return;
        }
        let mut st = self.state.lock();
        for n in numbers {
            st.pending_outputs.remove(&n);
        }
    }

    /// The job's open blob file, creating one (numbered in `reserved`) when there is none.
    pub(crate) fn blob_writer<'a>(
        &self,
        blob: &'a mut Option<BlobWriter>,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<&'a mut BlobWriter> {
        if let Some(w) = blob {
            return Ok(w);
        }
        let number = reserved.reserve();
        let path = layout::path(&self.opts.slow_dir, &layout::blob_name(number));
        let file = self.create_output(&path)?;
        Ok(blob.insert(BlobWriter::new(number, file)?))
    }
}

/// The edit that range tombstones every snapshot sees (sequence number ≤
/// `smallest_snapshot`) allow on `version` without rewriting anything, or `None`:
///
/// - an L1+ table whose user keys all lie inside one such tombstone, whose every entry is
///   older than it and that references no blob file is removed (RocksDB's
///   `DeleteFilesInRange`; a table with blob pointers is left to compaction, which counts
///   their garbage);
/// - such a tombstone is removed once no table or row left in the version overlapping its
///   range holds an entry older than it (memtables only hold newer entries: the tombstone
///   reached the version by the flush of an older memtable).
pub(crate) fn range_del_cleanup(
    version: &Version,
    smallest_snapshot: SeqNo,
) -> Option<VersionEdit> {
    let tombstones: Vec<&crate::range_del::RangeTombstone> = version
        .range_dels()
        .tombstones()
        .iter()
        .filter(|t| t.seq <= smallest_snapshot)
        .collect();
    if tombstones.is_empty() {
        return None;
    }
    let mut edit = VersionEdit::default();
    let mut dropped: HashSet<FileNum> = HashSet::new();
    for level in 1..crate::version::NUM_LEVELS {
        for f in version.files(level) {
            let no_blobs = f.blob_refs.as_ref().is_some_and(Vec::is_empty);
            if no_blobs
                && tombstones.iter().any(|t| {
                    f.largest_seq < t.seq && t.contains_range(f.smallest_user(), f.largest_user())
                })
            {
                edit.deleted_files.push((level, f.number));
                dropped.insert(f.number);
            }
        }
    }
    let c = version.container();
    for t in tombstones {
        let in_tables = (0..crate::version::NUM_LEVELS).any(|level| {
            version.files(level).iter().any(|f| {
                !dropped.contains(&f.number)
                    && f.smallest_seq < t.seq
                    && t.overlaps(f.smallest_user(), f.largest_user())
            })
        });
        let in_rows = c.receiver.iter().chain(c.compactor.iter()).any(|r| {
            r.smallest_seq < t.seq
                && t.overlaps(key::user_key(&r.smallest), key::user_key(&r.largest))
        });
        if !in_tables && !in_rows {
            edit.deleted_range_dels.push(t.seq);
        }
    }
    (!edit.deleted_files.is_empty() || !edit.deleted_range_dels.is_empty()).then_some(edit)
}
/// What a blob GC merge or a selective compaction adds to an ordinary one (`Default`:
/// nothing).
#[derive(Debug, Default)]
pub(crate) struct MergeExtras {
    /// Blob files whose pointers are relocated whatever their garbage share.
    pub relocate: Vec<FileNum>,
    /// Ascending user keys at which a new output table starts (the input tables' smallest
    /// keys), so that rewriting some tables of a level in place never makes an output span a
    /// table that was not rewritten.
    pub split_at: Vec<Vec<u8>>,
    /// Tables of the output level that are not inputs (SLM-DB's single level, whose tables
    /// overlap): a key one of them may hold is not at the bottom, its tombstones stay.
    pub beside: Vec<Arc<FileMeta>>,
    /// SLM-DB: whether the global index maps the user key to a table outside the inputs,
    /// which then holds a newer version; `Some(s)` bounds that version's sequence number
    /// from above (the table's largest), and the inputs' versions of the key are dropped
    /// once every snapshot sees it.
    pub superseded: Option<Superseded>,
    /// Output tables are cut at this size instead of `Options::target_file_bytes` (LightKV
    /// cuts only at its partition bounds, `split_at`).
    pub target_bytes: Option<u64>,
    /// Record what a global index needs (SLM-DB, LightKV): each output table's keys and
    /// blocks ([`MergeOutput::keys`]) and every user key of the inputs
    /// ([`MergeOutput::input_keys`]), so that no table is read back.
    pub record_keys: bool,
}

/// See [`MergeExtras::superseded`].
pub(crate) struct Superseded(pub Box<NewerElsewhere>);

/// The question [`Superseded`] answers for a user key.
pub(crate) type NewerElsewhere = dyn Fn(&[u8]) -> Result<Option<SeqNo>> + Send + Sync;

impl std::fmt::Debug for Superseded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Superseded(..)")
    }
}

impl MergeExtras {
    /// True when no table below `output_level`, and none beside the inputs in it, may hold
    /// `user_key`: a tombstone for it (and what it hides) may go once every snapshot sees it.
    fn bottommost(&self, version: &Version, output_level: usize, user_key: &[u8]) -> bool {
        picker::is_bottommost_for(version, output_level, user_key)
            && self.beside.iter().all(|f| !f.contains_user_key(user_key))
    }
}

/// What a merge wrote: tables, blob files, and the garbage it made in older blob files.
#[derive(Debug, Default)]
pub(crate) struct MergeOutput {
    /// The new tables, in key order.
    pub tables: Vec<FileMeta>,
    /// The new blob files, with their sizes.
    pub blobs: Vec<(BlobFileMeta, u64)>,
    /// Records of older blob files whose pointers the merge dropped or relocated.
    pub garbage: Vec<BlobGarbage>,
    /// Record bytes copied out of mostly-garbage blob files.
    pub relocated_bytes: u64,
    /// With [`MergeExtras::record_keys`]: the keys and blocks of each table of `tables`.
    pub keys: Vec<Vec<sst::builder::KeyBlock>>,
    /// With [`MergeExtras::record_keys`]: every distinct user key the inputs held, in order.
    pub input_keys: Vec<Vec<u8>>,
}

impl MergeOutput {
    /// Finishes output table `number` (see [`finish_output`]), keeping its recorded keys.
    fn finish_table(
        &mut self,
        number: FileNum,
        b: sst::Builder,
        refs: &mut BTreeSet<u64>,
    ) -> Result<()> {
        let (meta, keys) = finish_output(number, b, refs)?;
        self.tables.push(meta);
        self.keys.push(keys);
        Ok(())
    }

    pub(crate) fn finish_blob(&mut self, w: BlobWriter) -> Result<()> {
        let s = w.finish()?;
        self.push_blob(s);
        Ok(())
    }

    /// Adds a blob file written before the job (a memtable's value file, see
    /// `separate_at_write`) and the garbage its job found in it.
    pub(crate) fn adopt_blob(&mut self, s: BlobSummary, garbage: BlobGarbage) {
        self.push_blob(s);
        if garbage.records > 0 {
            self.garbage.push(garbage);
        }
    }

    fn push_blob(&mut self, s: BlobSummary) {
        self.blobs.push((
            BlobFileMeta {
                number: s.number,
                records: s.records,
                record_bytes: s.record_bytes,
            },
            s.file_bytes,
        ));
    }

    /// Numbers of every file written.
    pub fn numbers(&self) -> Vec<u64> {
        self.tables
            .iter()
            .map(|f| f.number.0)
            .chain(self.blobs.iter().map(|(b, _)| b.number.0))
            .collect()
    }

    /// Bytes of the tables written.
    pub fn table_bytes(&self) -> u64 {
        self.tables.iter().map(|f| f.size).sum()
    }

    /// Bytes of the blob files written.
    pub fn blob_bytes(&self) -> u64 {
        self.blobs.iter().map(|(_, size)| size).sum()
    }

    /// Moves the outputs into `edit`: tables to `level`, blob files, garbage. Returns the
    /// numbers of the files written (to drop from `pending_outputs` once installed).
    pub fn add_to(self, edit: &mut VersionEdit, level: usize) -> Vec<u64> {
        let numbers = self.numbers();
        edit.new_files
            .extend(self.tables.into_iter().map(|f| (level, f)));
        edit.new_blobs
            .extend(self.blobs.into_iter().map(|(b, _)| b));
        edit.blob_garbage.extend(self.garbage);
        numbers
    }
}

/// Parses internal key `ikey` of an entry read from `name` (an artifact of `kind`): a key that
/// does not parse is corruption there.
pub(crate) fn parse_key<'k>(
    ikey: &'k [u8],
    kind: ArtifactKind,
    name: &'static str,
) -> Result<key::ParsedKey<'k>> {
    key::parse_internal_key(ikey).map_err(|reason| {
        Error::corruption(crate::error::CorruptionSite::new(kind, name, 0), reason)
    })
}

/// Where the entry `it` is at was read: its file and block ([`InternalIterator::site`]), or
/// for a source that does not know, [`unknown_input_site`].
fn input_site(it: &dyn InternalIterator) -> CorruptionSite {
    it.site().unwrap_or_else(unknown_input_site)
}

/// The site of a compaction input entry whose source names no file (a memtable, a column's
/// gathered stream).
fn unknown_input_site() -> CorruptionSite {
    CorruptionSite::new(ArtifactKind::Sst, "compaction input", 0)
}

/// Parses the internal key of the entry `it` is at: one that does not parse is corruption
/// where `it` read it.
fn parse_input(it: &dyn InternalIterator) -> Result<key::ParsedKey<'_>> {
    key::parse_internal_key(it.key()).map_err(|reason| Error::corruption(input_site(it), reason))
}

/// Decodes the blob pointer of a compaction input entry read at `site()`.
fn decode_pointer(bytes: &[u8], site: impl FnOnce() -> CorruptionSite) -> Result<BlobPointer> {
    BlobPointer::decode(bytes).map_err(|reason| Error::corruption(site(), reason))
}

/// Finishes an output table; takes the blob files it references from `refs` (left empty for
/// the next table). Returns its metadata and the keys its builder recorded.
fn finish_output(
    number: FileNum,
    b: sst::Builder,
    refs: &mut BTreeSet<u64>,
) -> Result<(FileMeta, Vec<sst::builder::KeyBlock>)> {
    let s = b.finish()?;
    let blob_refs = Some(std::mem::take(refs).into_iter().map(FileNum).collect());
    Ok((
        FileMeta {
            number,
            size: s.size,
            smallest: s.smallest,
            largest: s.largest,
            smallest_seq: s.smallest_seq,
            largest_seq: s.largest_seq,
            entries: s.entries,
            blob_refs,
        },
        s.keys,
    ))
}

#[cfg(test)]
mod tests;
