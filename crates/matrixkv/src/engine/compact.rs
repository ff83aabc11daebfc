//! Executes a compaction plan chosen by the pure picker (`crate::compaction::picker`):
//! merge the input tables, drop versions no snapshot can see and tombstones that hide nothing,
//! write the output tables to the slow tier, and install one version edit.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Instant;

use super::jobs::{JobFlag, ReservedOutputs};
use super::{DbInner, State};
use crate::blob::BlobPointer;
use crate::blob::writer::{BlobSummary, BlobWriter};
use crate::compaction::picker::{self, Plan};
use crate::compaction_filter::Decision;
use crate::error::{ArtifactKind, CorruptionSite, Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, SeqNo, ValueKind};
use crate::layout::{self, FileNum};
use crate::sst;
use crate::stats::Counters;
use crate::version::edit::{BlobFileMeta, BlobGarbage, FileMeta, VersionEdit};
use crate::version::version::Version;

/// Container occupancy above which L0 work (columns) goes before L1+ compaction. Below it a
/// level over its target goes first: an oversized L1 makes every column rewrite more L1 data.
const L0_FIRST_OCCUPANCY: f64 = 0.85;

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
        if let Some(ix) = &self.global_index {
            // The single level (SLM-DB, LightKV) knows only its own compactions.
            return self.level_step(st, ix);
        }
        let version = st.versions.current();
        let plan = picker::pick(
            &version,
            &self.picker_config(),
            st.versions.compact_pointers(),
        );
        if self.is_matrix() {
            // L0 work (role switch, column) comes first only when the container nears the
            // occupancy at which writes are throttled; otherwise a level over its target goes
            // first (an oversized L1 makes every column rewrite more L1 data).
            let roomy = self.container_occupancy(st) < L0_FIRST_OCCUPANCY;
            if (plan.is_none() || !roomy) && self.matrix_step(st)? {
                return Ok(true);
            }
        }
        let smallest_snapshot = self.smallest_snapshot(st);
        // Lowest priority: the edges of ranges every snapshot sees deleted.
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
    /// waits out): a level, L0, blob GC or range-tombstone job, or in the SLM-DB design a
    /// selective compaction its picker chooses.
    pub(crate) fn has_compaction_work(&self, st: &State) -> bool {
        if let Some(ix) = &self.global_index {
            return self.level_has_work(ix, st);
        }
        let v = st.versions.current();
        picker::pick(&v, &self.picker_config(), st.versions.compact_pointers()).is_some()
            || self.matrix_has_work(st)
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
        let Some(handle) = self.container.as_ref() else {
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
        let installed = self.install_edit(manifest, &mut st, &mut edit);
        reserved.release(&mut st);
        installed?;
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

    /// Writes the entries of `it` (internal-key order) as new tables of `output_level` (slow
    /// tier), dropping versions no snapshot can see and tombstones that hide nothing. Output
    /// tables are split near `target_file_bytes`, never between two versions of one user key.
    ///
    /// Key-value separation: a value of at least `min_blob_bytes` goes to a blob file and the
    /// table keeps a pointer; a pointer into a blob file whose garbage share reached
    /// `blob_gc_ratio` is relocated (its value copied to this job's blob file). Dropped and
    /// relocated pointers are counted as garbage of their files in the output.
    ///
    /// `extras` (blob GC): more blob files whose pointers are relocated whatever their
    /// garbage share, and user keys at which a new output table must start.
    ///
    /// Each output table records the blob files its pointers reference (`FileMeta::blob_refs`).
    ///
    /// Output numbers are reserved in `reserved`, which the caller releases once the edit
    /// naming the outputs is installed; on error (here or later in the job) the caller's drop
    /// of `reserved` leaves the outputs orphans that obsolete-file deletion removes.
    pub(crate) fn merge_into_level(
        &self,
        version: &Version,
        mut it: BoxedIter,
        output_level: usize,
        smallest_snapshot: u64,
        extras: &MergeExtras,
        reserved: &mut ReservedOutputs<'_>,
    ) -> Result<MergeOutput> {
        it.seek_to_first()?;
        // Snapshots taken from here on see every input; the filter leaves the versions of
        // those taken before alone.
        let newest_snapshot: Option<u64> = self.state.lock().snapshots.keys().next_back().copied();
        // The settings of each key's keyspace: filter, TTL, merge operator, blob threshold.
        let keyspaces = self.keyspaces();
        let filtering = keyspaces.any_filtering();
        let now = self.opts.clock.now_millis();
        let mut out = MergeOutput::default();
        let mut builder: Option<(FileNum, sst::Builder)> = None;
        let mut blob: Option<BlobWriter> = None;
        let mut garbage: BTreeMap<u64, (u64, u64)> = BTreeMap::new();
        let relocate: HashSet<u64> = version
            .blob_files()
            .values()
            .filter(|b| b.garbage_ratio() >= self.opts.blob_gc_ratio)
            .map(|b| b.meta.number.0)
            .chain(extras.relocate.iter().map(|n| n.0))
            .collect();
        // Blob files the current output table references.
        let mut refs: BTreeSet<u64> = BTreeSet::new();
        let mut next_split = 0;
        let mut current_user: Vec<u8> = Vec::new();
        let mut has_current = false;
        let mut last_seq_for_key = u64::MAX;
        let mut split_pending = false;
        let mut rewritten_key: Vec<u8> = Vec::new();
        // Blob bytes the current output table points to: tables are split by the data they
        // stand for, so a level of pointers keeps as many key ranges as a level of values
        // (column compaction picks its columns by L1 key ranges).
        let mut referenced: u64 = 0;
        let mut pointer: Vec<u8> = Vec::new();
        let slow_dir = self.opts.slow_dir.clone();
        // The version's range tombstones: every input entry is older than any tombstone a
        // later flush adds, so these are all that can cover one.
        let range_dels = Arc::clone(version.range_dels());
        let result: Result<()> = (|| {
            while it.valid() {
                let parsed = parse_input(it.as_ref())?;
                let new_user_key = !has_current || parsed.user_key != current_user.as_slice();
                if new_user_key {
                    current_user.clear();
                    current_user.extend_from_slice(parsed.user_key);
                    if extras.record_keys {
                        out.input_keys.push(current_user.clone());
                    }
                    has_current = true;
                    last_seq_for_key = u64::MAX;
                    let mut forced = false;
                    while extras
                        .split_at
                        .get(next_split)
                        .is_some_and(|k| parsed.user_key >= k.as_slice())
                    {
                        next_split += 1;
                        forced = true;
                    }
                    if split_pending || forced {
                        if let Some((number, b)) = builder.take() {
                            out.finish_table(number, b, &mut refs)?;
                        }
                        split_pending = false;
                        referenced = 0;
                    }
                }
                let seq = parsed.seq.0;
                let kind = parsed.kind;
                // The settings of the key's keyspace (every entry written below is this key's).
                let ks = keyspaces.for_key(parsed.user_key);
                let min_blob_bytes = ks.min_blob_bytes.or(self.opts.min_blob_bytes);
                let first_of_key = last_seq_for_key == u64::MAX;
                if first_of_key
                    && let Some(Superseded(newer)) = &extras.superseded
                    && let Some(bound) = newer(parsed.user_key)?
                {
                    // A newer version outside the inputs (SLM-DB): where every snapshot sees
                    // it, it stands for the newest version of the key here.
                    last_seq_for_key = bound.0;
                }
                let drop_entry = if last_seq_for_key <= smallest_snapshot {
                    // A newer version of this key is visible to every snapshot.
                    true
                } else if !range_dels.is_empty()
                    && range_dels
                        .max_covering(parsed.user_key, SeqNo(smallest_snapshot))
                        .is_some_and(|t| parsed.seq < t)
                {
                    // A range tombstone every snapshot sees deletes it (and the key's older
                    // versions, dropped here in turn).
                    true
                } else {
                    kind == ValueKind::Deletion
                        && seq <= smallest_snapshot
                        && extras.bottommost(version, output_level, parsed.user_key)
                };
                last_seq_for_key = seq;
                if drop_entry {
                    if kind == ValueKind::BlobIndex {
                        let p = decode_pointer(it.value(), || input_site(it.as_ref()))?;
                        let g = garbage.entry(p.file.0).or_default();
                        g.0 += 1;
                        g.1 += p.len;
                    }
                    it.next()?;
                    continue;
                }
                // The newest operand no snapshot separates from the older versions: fold them
                // (this advances `it` past what it folds; older versions left are dropped above).
                let mut advanced = false;
                let folded = if kind == ValueKind::Merge && seq <= smallest_snapshot {
                    advanced = true;
                    let at = (version, output_level, extras);
                    Some(self.fold_merge(&mut it, at, ks, &mut garbage)?)
                } else if filtering
                    && first_of_key
                    && matches!(kind, ValueKind::Value | ValueKind::BlobIndex)
                    && newest_snapshot.is_none_or(|s| seq > s)
                    && ks.filtering()
                {
                    // The key's newest version here, which no snapshot can read: the
                    // compaction filter and the TTL decide (`compaction_filter.rs`).
                    let at = Filtering {
                        version,
                        extras,
                        output_level,
                        smallest_snapshot,
                        keyspace: ks,
                        now,
                    };
                    self.filter_entry(it.as_ref(), &at, &mut garbage)?
                } else {
                    None
                };
                let single = [(it.key(), it.value())];
                let owned: Vec<(&[u8], &[u8])>;
                let items: &[(&[u8], &[u8])] = match &folded {
                    Some(f) => {
                        owned = f
                            .iter()
                            .map(|(k, v)| (k.as_slice(), v.as_slice()))
                            .collect();
                        &owned
                    }
                    None => &single,
                };
                for &(ikey, value) in items {
                    let parsed = parse_key(ikey, ArtifactKind::Sst, "compaction input")?;
                    // The entry as written: unchanged, or with its value moved to a blob file.
                    let (out_key, out_value): (&[u8], &[u8]) = match parsed.kind {
                        ValueKind::Value
                            if min_blob_bytes.is_some_and(|min| value.len() >= min) =>
                        {
                            let w = self.blob_writer(&mut blob, reserved)?;
                            let p = w.add(parsed.user_key, value)?;
                            rewritten_key.clear();
                            key::append_internal_key(
                                &mut rewritten_key,
                                parsed.user_key,
                                parsed.seq,
                                ValueKind::BlobIndex,
                            );
                            pointer.clear();
                            p.encode_to(&mut pointer);
                            referenced += p.len;
                            refs.insert(p.file.0);
                            (&rewritten_key, &pointer)
                        }
                        ValueKind::BlobIndex => {
                            // The entry `it` is at, or one a fold read (and `it` passed).
                            let p = decode_pointer(value, || match folded {
                                None => input_site(it.as_ref()),
                                Some(_) => unknown_input_site(),
                            })?;
                            if relocate.contains(&p.file.0) {
                                let value = self.blobs.read(parsed.user_key, &p)?;
                                let w = self.blob_writer(&mut blob, reserved)?;
                                let moved = w.add(parsed.user_key, &value)?;
                                out.relocated_bytes += moved.len;
                                let g = garbage.entry(p.file.0).or_default();
                                g.0 += 1;
                                g.1 += p.len;
                                pointer.clear();
                                moved.encode_to(&mut pointer);
                                referenced += moved.len;
                                refs.insert(moved.file.0);
                                (ikey, &pointer)
                            } else {
                                referenced += p.len;
                                refs.insert(p.file.0);
                                (ikey, value)
                            }
                        }
                        _ => (ikey, value),
                    };
                    if builder.is_none() {
                        let number = reserved.reserve();
                        let path = layout::path(&slow_dir, &layout::table_name(number));
                        let file = self.create_output(&path)?;
                        let mut b = sst::Builder::new(file, path, &self.opts.table)?
                            .with_codecs(keyspaces.block_codecs());
                        if extras.record_keys {
                            b = b.recording_keys();
                        }
                        builder = Some((number, b));
                    }
                    if let Some((_, b)) = builder.as_mut() {
                        b.add(out_key, out_value)?;
                        if b.estimated_size() + referenced
                            >= extras.target_bytes.unwrap_or(self.opts.target_file_bytes)
                        {
                            split_pending = true;
                        }
                    }
                    if blob
                        .as_ref()
                        .is_some_and(|w| w.len() >= self.opts.blob_file_bytes)
                        && let Some(w) = blob.take()
                    {
                        out.finish_blob(w)?;
                    }
                }
                if !advanced {
                    it.next()?;
                }
            }
            if let Some((number, b)) = builder.take() {
                out.finish_table(number, b, &mut refs)?;
            }
            if let Some(w) = blob.take() {
                out.finish_blob(w)?;
            }
            Ok(())
        })();
        // On error the partial outputs stay in `reserved` until the caller drops it.
        result?;
        out.garbage = garbage
            .into_iter()
            .map(|(n, (records, bytes))| BlobGarbage {
                number: FileNum(n),
                records,
                bytes,
            })
            .collect();
        if !out.tables.is_empty() || !out.blobs.is_empty() {
            self.tiers.slow_fs.sync_dir(&slow_dir)?;
        }
        Counters::add(&self.counters.blob_bytes_written, out.blob_bytes());
        Counters::add(&self.counters.blob_relocated_bytes, out.relocated_bytes);
        Ok(out)
    }

    /// Folds merge operands for one user key. `it` is at the key's newest entry at or below the
    /// smallest snapshot, a merge operand; the operands after it and the first non-operand
    /// (the base: a value, a blob pointer or a tombstone) are read and `it` is left after the
    /// last one read. Returns the entries to write, newest first:
    ///
    /// - with a base, or none anywhere below (`is_bottommost_for`): one value, the operator's
    ///   full merge, at the newest operand's sequence number (a base blob pointer becomes
    ///   garbage);
    /// - otherwise one operand combining them (`partial_merge`), or the operands unchanged
    ///   when the operator cannot combine them without the base;
    /// - when the operator fails (an error or a panic): everything read, unchanged (counted in
    ///   `merge_failures`; reads of the key report the error).
    fn fold_merge(
        &self,
        it: &mut BoxedIter,
        (version, output_level, extras): (&Version, usize, &MergeExtras),
        ks: &crate::keyspace::registry::Settings,
        garbage: &mut BTreeMap<u64, (u64, u64)>,
    ) -> Result<Entries> {
        let newest = it.key().to_vec();
        let (user, seq) = parse_input(it.as_ref()).map(|p| (p.user_key.to_vec(), p.seq))?;
        // Everything read, newest first, and the base if one was found.
        let mut read: Vec<(Vec<u8>, Vec<u8>)> = vec![(newest, it.value().to_vec())];
        let mut base_kind: Option<ValueKind> = None;
        // Where the base was read (for a damaged blob pointer).
        let mut base_site: Option<CorruptionSite> = None;
        // A range tombstone at or below the newest operand ends the chain at the first version
        // it covers, as a tombstone there would (that version is left in `it`; the caller
        // drops it and the older ones below the folded value).
        let cut = version.range_dels().max_covering(&user, seq);
        let mut cut_by_range = false;
        it.next()?;
        while it.valid() {
            // A key that does not parse is corruption: read as some other key or kind, it
            // would end the chain early or become its base.
            let parsed = parse_input(it.as_ref())?;
            if parsed.user_key != user.as_slice() {
                break;
            }
            if cut.is_some_and(|t| parsed.seq < t) {
                cut_by_range = true;
                break;
            }
            let kind = parsed.kind;
            read.push((it.key().to_vec(), it.value().to_vec()));
            if kind != ValueKind::Merge {
                base_kind = Some(kind);
                if kind == ValueKind::BlobIndex {
                    base_site = it.site();
                }
                it.next()?;
                break;
            }
            it.next()?;
        }
        let operands_end = read.len() - usize::from(base_kind.is_some());
        let operands: Vec<&[u8]> = read
            .get(..operands_end)
            .unwrap_or_default()
            .iter()
            .rev()
            .map(|(_, v)| v.as_slice())
            .collect();
        let base_value = read.last().map(|(_, v)| v.as_slice()).unwrap_or_default();
        if extras.beside.iter().any(|f| f.contains_user_key(&user)) {
            // A table beside the inputs (SLM-DB's single level) may hold versions of the key
            // between the ones read here: neither the base nor the order of the operands
            // read is known, so nothing is combined.
            return Ok(read);
        }
        // The operator of the key's keyspace (`ks`) sees the key without the keyspace prefix.
        let full =
            base_kind.is_some() || cut_by_range || extras.bottommost(version, output_level, &user);
        if full {
            let (existing, pointer) = match base_kind {
                Some(ValueKind::Value) => (Some(base_value.to_vec()), None),
                Some(ValueKind::BlobIndex) => {
                    let site = || base_site.unwrap_or_else(unknown_input_site);
                    let p = decode_pointer(base_value, site)?;
                    (Some(self.blobs.read(&user, &p)?), Some(p))
                }
                _ => (None, None),
            };
            match crate::merge::full_merge(
                ks.merge_operator.as_ref(),
                ks.user_key(&user),
                existing.as_deref(),
                &operands,
            ) {
                Ok(v) => {
                    if let Some(p) = pointer {
                        let g = garbage.entry(p.file.0).or_default();
                        g.0 += 1;
                        g.1 += p.len;
                    }
                    return Ok(vec![(
                        key::make_internal_key(&user, seq, ValueKind::Value),
                        v,
                    )]);
                }
                Err(e) => {
                    log::warn!("matrixkv: compaction keeps the operands of a failed merge: {e}");
                    Counters::add(&self.counters.merge_failures, 1);
                    return Ok(read);
                }
            }
        }
        if operands.len() >= 2
            && let Some(op) = &ks.merge_operator
            && let Some(v) = crate::merge::partial_merge(op, ks.user_key(&user), &operands)
        {
            return Ok(vec![(
                key::make_internal_key(&user, seq, ValueKind::Merge),
                v,
            )]);
        }
        Ok(read)
    }

    /// What the compaction filter and the TTL decide for the value entry `it` is at (a value
    /// or a blob pointer; a key that does not parse is corruption): `None` to keep it, or the entries that replace it (a tombstone of the
    /// same sequence number for a removal, none at the last level with no snapshot, or the
    /// changed value with the original write time). A replaced blob pointer becomes garbage.
    fn filter_entry(
        &self,
        it: &dyn InternalIterator,
        at: &Filtering<'_>,
        garbage: &mut BTreeMap<u64, (u64, u64)>,
    ) -> Result<Option<Entries>> {
        let parsed = parse_input(it)?;
        let value = it.value();
        let user = parsed.user_key;
        let (stored, pointer): (std::borrow::Cow<'_, [u8]>, _) = match parsed.kind {
            ValueKind::BlobIndex => {
                let p = decode_pointer(value, || input_site(it))?;
                (self.blobs.read(user, &p)?.into(), Some(p))
            }
            _ => (value.into(), None),
        };
        let ks = at.keyspace;
        let ttl = ks
            .ttl
            .map(|t| crate::compaction_filter::TtlCheck::at(t, at.now));
        let (user_value, written, expired) = match ttl {
            Some(ttl) => match crate::compaction_filter::split(&stored) {
                Some((v, t)) => (v, Some(t), ttl.expired(t)),
                // Too short to hold a write time: reads report it; keep it as it is.
                None => return Ok(None),
            },
            None => (&stored[..], None, false),
        };
        let decision = if expired {
            Decision::Remove
        } else if let Some(f) = &ks.compaction_filter {
            match crate::compaction_filter::call(f, at.output_level, ks.user_key(user), user_value)
            {
                Some(d) => d,
                None => {
                    Counters::add(&self.counters.filter_failures, 1);
                    Decision::Keep
                }
            }
        } else {
            Decision::Keep
        };
        let replaced = match decision {
            Decision::Keep => return Ok(None),
            Decision::Remove => {
                let last = parsed.seq.0 <= at.smallest_snapshot
                    && at.extras.bottommost(at.version, at.output_level, user);
                if last {
                    Vec::new()
                } else {
                    vec![(
                        key::make_internal_key(user, parsed.seq, ValueKind::Deletion),
                        Vec::new(),
                    )]
                }
            }
            Decision::ChangeValue(v) => {
                let v = match written {
                    Some(t) => crate::compaction_filter::stamp(&v, t),
                    None => v,
                };
                vec![(
                    key::make_internal_key(user, parsed.seq, ValueKind::Value),
                    v,
                )]
            }
        };
        if let Some(p) = pointer {
            let g = garbage.entry(p.file.0).or_default();
            g.0 += 1;
            g.1 += p.len;
        }
        Counters::add(&self.counters.filtered_entries, 1);
        Ok(Some(replaced))
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

/// Entries (internal key, value) a compaction writes instead of what it read.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

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

/// Where a compaction applies its filter and TTL (see `filter_entry`).
struct Filtering<'a> {
    version: &'a Version,
    extras: &'a MergeExtras,
    output_level: usize,
    smallest_snapshot: u64,
    /// The settings of the entry's keyspace.
    keyspace: &'a crate::keyspace::registry::Settings,
    /// The time TTLs are checked against (milliseconds).
    now: u64,
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
mod tests {
    use super::*;
    use crate::iter::vec_iter::VecIter;
    use crate::range_del::RangeTombstone;
    use crate::version::testutil::version;

    /// A database on simulated tiers whose keys merge with an appending operator.
    fn merging_db() -> crate::Db {
        let mut o = crate::Options::new("/db");
        o.merge_operator = Some(Arc::new(crate::merge::AppendOperator::new(",")));
        crate::engine::testutil::open_simulated(o)
    }

    /// An internal key of `user` at `seq` whose kind byte is `kind`, known or not.
    fn raw_key(user: &[u8], seq: u64, kind: u8) -> Vec<u8> {
        let mut k = key::make_internal_key(user, SeqNo(seq), ValueKind::Value);
        let at = k.len() - 8;
        k[at] = kind;
        k
    }

    /// Asserts `r` is a corruption of `file` at `offset`.
    fn assert_corruption_at<T: std::fmt::Debug>(r: Result<T>, file: &str, offset: u64) {
        match r {
            Err(Error::Corruption { site, .. }) => {
                assert_eq!(site.path, std::path::Path::new(file), "{site:?}");
                assert_eq!(site.offset, offset, "{site:?}");
            }
            other => panic!("expected a corruption of {file} at {offset}, got {other:?}"),
        }
    }

    /// Merges `input` into L1 of `v` as a compaction would; the number of tables written.
    fn merge_to_l1(inner: &DbInner, v: &Version, input: VecIter) -> Result<usize> {
        let mut outputs = crate::engine::jobs::ReservedOutputs::new(inner);
        inner
            .merge_into_level(
                v,
                Box::new(input),
                1,
                10,
                &MergeExtras::default(),
                &mut outputs,
            )
            .map(|o| o.tables.len())
    }

    #[test]
    fn a_merge_base_of_unknown_kind_is_corruption_not_a_value() {
        let db = merging_db();
        let inner = db.inner();
        let v = inner.state.lock().versions.current();
        // A merge operand over an entry whose kind byte no version of the format defines:
        // read as a value, it became the base of the merge ("base,op").
        let input = VecIter::new(vec![
            (raw_key(b"k", 5, ValueKind::Merge as u8), b"op".to_vec()),
            (raw_key(b"k", 3, 0x7f), b"base".to_vec()),
        ])
        .read_from("/db/000009.sst");
        assert_corruption_at(merge_to_l1(inner, &v, input), "/db/000009.sst", 1);
    }

    #[test]
    fn a_truncated_key_in_a_merge_chain_is_corruption_not_an_empty_key() {
        let db = merging_db();
        let inner = db.inner();
        let v = inner.state.lock().versions.current();
        // Operands of the empty user key, then a key too short to hold a tag: split as the
        // empty key with tag 0 (a tombstone), it ended the chain as its base.
        let input = VecIter::new(vec![
            (raw_key(b"", 5, ValueKind::Merge as u8), b"op".to_vec()),
            (b"\x01".to_vec(), b"x".to_vec()),
        ])
        .read_from("/db/000009.sst");
        assert_corruption_at(merge_to_l1(inner, &v, input), "/db/000009.sst", 1);
    }

    #[test]
    fn the_filter_reports_a_key_that_does_not_parse_instead_of_keeping_it() {
        let db = merging_db();
        let inner = db.inner();
        let v = inner.state.lock().versions.current();
        let keyspaces = inner.keyspaces();
        let extras = MergeExtras::default();
        let at = Filtering {
            version: &v,
            extras: &extras,
            output_level: 1,
            smallest_snapshot: 10,
            keyspace: keyspaces.for_key(b"k"),
            now: 0,
        };
        let mut input =
            VecIter::new(vec![(raw_key(b"k", 3, 0x7f), b"v".to_vec())]).read_from("/db/000012.sst");
        input.seek_to_first().unwrap();
        let r = inner.filter_entry(&input, &at, &mut BTreeMap::new());
        assert_corruption_at(r, "/db/000012.sst", 0);
    }

    fn with_tombstones(v: &Version, ts: &[(&str, &str, u64)]) -> Version {
        let e = VersionEdit {
            new_range_dels: ts
                .iter()
                .map(|&(s, e, seq)| RangeTombstone {
                    start: s.as_bytes().to_vec(),
                    end: e.as_bytes().to_vec(),
                    seq: SeqNo(seq),
                })
                .collect(),
            ..VersionEdit::default()
        };
        v.apply(&e).unwrap()
    }

    #[test]
    fn cleanup_drops_covered_tables_then_the_tombstone() {
        // File 5 lies inside ["a", "m") and is older: dropped. File 6 has blob references, 7
        // reaches past the range, 8 is newer than the tombstone: all kept.
        let v = version("L1: 5:b-d@10+ 7:k-p@12+\nL2: 6:e-f@11+9 8:g-h@30+");
        let v = with_tombstones(&v, &[("a", "m", 20)]);
        // Not yet visible to every snapshot: nothing.
        assert_eq!(range_del_cleanup(&v, SeqNo(19)), None);
        let e = range_del_cleanup(&v, SeqNo(25)).unwrap();
        assert_eq!(e.deleted_files, vec![(1, FileNum(5))]);
        assert!(
            e.deleted_range_dels.is_empty(),
            "files 6 and 7 are older and overlap"
        );
        // Without the older overlapping files, the tombstone goes too.
        let v = with_tombstones(
            &version("L1: 5:b-d@10+\nL2: 8:g-h@30+ 9:x-z@1+"),
            &[("a", "m", 20)],
        );
        let e = range_del_cleanup(&v, SeqNo(25)).unwrap();
        assert_eq!(e.deleted_files, vec![(1, FileNum(5))]);
        assert_eq!(e.deleted_range_dels, vec![SeqNo(20)]);
        let v = v.apply(&e).unwrap();
        assert!(v.range_dels().is_empty());
        assert_eq!(range_del_cleanup(&v, SeqNo(25)), None);
    }

    #[test]
    fn tables_whose_edges_a_visible_tombstone_covers_are_rewritten_once() {
        // File 5 (b@10..d@10) lies inside ["b", "m") and has blob references: rewritten, not
        // dropped. File 6 ends inside the range (k), file 7 only spans it (its edges a and z
        // are outside): only 5 and 6. File 8 is newer than the tombstone.
        let v = version("L1: 5:b-d@10+9 6:e-k@11\nL2: 7:a-z@3\nL3: 8:g-h@30");
        let v = with_tombstones(&v, &[("b", "m", 20)]);
        // Not yet visible to every snapshot: nothing.
        assert!(picker::pick_range_del_rewrite(&v, SeqNo(19)).is_none());
        let plan = picker::pick_range_del_rewrite(&v, SeqNo(25)).expect("a plan");
        let Plan::Rewrite { level, inputs } = plan else {
            panic!("{plan:?}");
        };
        assert_eq!(level, 1);
        let numbers: Vec<u64> = inputs.iter().map(|f| f.number.0).collect();
        assert_eq!(numbers, [5, 6]);
        // After the rewrite, file 6's last entry is one before the range: nothing left to do
        // at L1, and L2's tables do not qualify.
        let v = with_tombstones(
            &version("L1: 9:a1-a9@11\nL2: 7:a-z@3\nL3: 8:g-h@30"),
            &[("b", "m", 20)],
        );
        assert!(picker::pick_range_del_rewrite(&v, SeqNo(25)).is_none());
    }

    #[test]
    fn cleanup_keeps_l0_tables_and_tables_of_unknown_blob_references() {
        // L0 tables are never dropped whole; `None` blob references may point into blob files.
        let v = with_tombstones(&version("L0: 5:b-d@10\nL1: 6:e-f@11"), &[("a", "m", 20)]);
        assert_eq!(range_del_cleanup(&v, SeqNo(25)), None);
    }
}
