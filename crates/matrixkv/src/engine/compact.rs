//! Executes a compaction plan chosen by the pure picker (`crate::compaction::picker`):
//! merge the input tables, drop versions no snapshot can see and tombstones that hide nothing,
//! write the output tables to the slow tier, and install one version edit.

use std::sync::Arc;
use std::time::Instant;

use super::{DbInner, State};
use crate::compaction::picker::{self, Plan};
use crate::error::{Error, Result};
use crate::iter::merging::MergingIterator;
use crate::iter::{BoxedIter, InternalIterator};
use crate::key::{self, ValueKind};
use crate::layout::{self, FileNum};
use crate::sst;
use crate::stats::Counters;
use crate::version::edit::{FileMeta, VersionEdit};
use crate::version::version::Version;

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

    /// Picks and runs one compaction. Called by the compaction thread with `state` locked;
    /// releases it around the I/O. Returns `Ok(false)` when there was nothing to do.
    pub(crate) fn compact_one(&self, st: &mut parking_lot::MutexGuard<'_, State>) -> Result<bool> {
        let version = st.versions.current();
        let Some(plan) = picker::pick(&version, &self.picker_config(), st.versions.compact_pointers())
        else {
            return Ok(false);
        };
        let smallest_snapshot = self.smallest_snapshot(st);
        st.compacting = true;
        let result = parking_lot::MutexGuard::unlocked(st, || {
            self.run_compaction(&version, plan, smallest_snapshot)
        });
        st.compacting = false;
        result.map(|()| true)
    }

    fn run_compaction(&self, version: &Arc<Version>, plan: Plan, smallest_snapshot: u64) -> Result<()> {
        let start = Instant::now();
        let mut edit = VersionEdit::default();
        let (in_bytes, out_bytes, outputs) = match plan {
            Plan::Move { level, file } => {
                edit.deleted_files.push((level, file.number));
                edit.new_files.push((level + 1, (*file).clone()));
                edit.compact_pointers.push((level, file.largest.clone()));
                Counters::add(&self.counters.trivial_moves, 1);
                (0, 0, Vec::new())
            }
            Plan::L0ToL1 { l0, l1 } => {
                let inputs = [(0usize, l0), (1usize, l1)];
                let in_bytes: u64 = inputs.iter().flat_map(|(_, f)| f.iter()).map(|f| f.size).sum();
                let l0_bytes: u64 = inputs[0].1.iter().map(|f| f.size).sum();
                let outputs = self.merge_to_level(version, &inputs, 1, smallest_snapshot)?;
                for (level, files) in &inputs {
                    for f in files {
                        edit.deleted_files.push((*level, f.number));
                    }
                }
                Counters::add(&self.counters.l0_compactions, 1);
                Counters::add(&self.counters.l0_compaction_input_bytes, l0_bytes);
                let out: u64 = outputs.iter().map(|(_, f)| f.size).sum();
                (in_bytes, out, outputs)
            }
            Plan::Merge { level, inputs, next } => {
                if let Some(last) = inputs.iter().map(|f| &f.largest).max_by(|a, b| key::compare_internal(a, b)) {
                    edit.compact_pointers.push((level, last.clone()));
                }
                let inputs = [(level, inputs), (level + 1, next)];
                let in_bytes: u64 = inputs.iter().flat_map(|(_, f)| f.iter()).map(|f| f.size).sum();
                let outputs = self.merge_to_level(version, &inputs, level + 1, smallest_snapshot)?;
                for (lvl, files) in &inputs {
                    for f in files {
                        edit.deleted_files.push((*lvl, f.number));
                    }
                }
                let out: u64 = outputs.iter().map(|(_, f)| f.size).sum();
                (in_bytes, out, outputs)
            }
        };
        let output_level = edit.new_files.first().map(|(l, _)| *l);
        let out_numbers: Vec<u64> = outputs.iter().map(|(_, f)| f.number.0).collect();
        edit.new_files.extend(outputs);
        let manifest = self.manifest.lock();
        let mut st = self.state.lock();
        let installed = self.install_edit(manifest, &mut st, &mut edit);
        for n in &out_numbers {
            st.pending_outputs.remove(n);
        }
        installed?;
        self.refresh_view(&st);
        drop(st);
        let _ = output_level;
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

    /// Merges the input files into new tables of `output_level` (slow tier). Output tables are
    /// split near `target_file_bytes`, never between two versions of one user key. On error the
    /// partial outputs stay in `pending_outputs` until the caller clears them, and become
    /// orphans that obsolete-file deletion removes.
    fn merge_to_level(
        &self,
        version: &Version,
        inputs: &[(usize, Vec<Arc<FileMeta>>)],
        output_level: usize,
        smallest_snapshot: u64,
    ) -> Result<Vec<(usize, FileMeta)>> {
        let mut children: Vec<BoxedIter> = Vec::new();
        for (level, files) in inputs {
            for f in files {
                let t = self.tables.get(*level, f)?;
                children.push(Box::new(t.iter()));
            }
        }
        let mut it = MergingIterator::new(children);
        it.seek_to_first()?;
        let mut outputs: Vec<(usize, FileMeta)> = Vec::new();
        let mut builder: Option<(FileNum, sst::Builder)> = None;
        let mut current_user: Vec<u8> = Vec::new();
        let mut has_current = false;
        let mut last_seq_for_key = u64::MAX;
        let mut split_pending = false;
        let slow_dir = self.opts.slow_dir.clone();
        let result: Result<()> = (|| {
            while it.valid() {
                let ikey = it.key();
                let parsed = key::parse_internal_key(ikey).map_err(|reason| {
                    Error::corruption(
                        crate::error::CorruptionSite::new(crate::error::ArtifactKind::Sst, "compaction input", 0),
                        reason,
                    )
                })?;
                let new_user_key = !has_current || parsed.user_key != current_user.as_slice();
                if new_user_key {
                    current_user.clear();
                    current_user.extend_from_slice(parsed.user_key);
                    has_current = true;
                    last_seq_for_key = u64::MAX;
                    if split_pending {
                        if let Some((number, b)) = builder.take() {
                            outputs.push((output_level, finish_output(number, b)?));
                        }
                        split_pending = false;
                    }
                }
                let seq = parsed.seq.0;
                let drop_entry = if last_seq_for_key <= smallest_snapshot {
                    // A newer version of this key is visible to every snapshot.
                    true
                } else {
                    parsed.kind == ValueKind::Deletion
                        && seq <= smallest_snapshot
                        && is_base_level_for_key(version, output_level, parsed.user_key)
                };
                last_seq_for_key = seq;
                if !drop_entry {
                    if builder.is_none() {
                        let number = {
                            let mut st = self.state.lock();
                            let n = st.versions.new_file_number();
                            st.pending_outputs.insert(n.0);
                            n
                        };
                        let path = layout::path(&slow_dir, &layout::table_name(number));
                        let file = self.tiers.slow_fs.create(&path)?;
                        builder = Some((number, sst::Builder::new(file, path, &self.opts.table)?));
                    }
                    if let Some((_, b)) = builder.as_mut() {
                        b.add(ikey, it.value())?;
                        if b.estimated_size() >= self.opts.target_file_bytes {
                            split_pending = true;
                        }
                    }
                }
                it.next()?;
            }
            if let Some((number, b)) = builder.take() {
                outputs.push((output_level, finish_output(number, b)?));
            }
            Ok(())
        })();
        if let Err(e) = result {
            // Forget the partial outputs: they are orphans now, removed by obsolete-file deletion.
            let mut st = self.state.lock();
            for (_, f) in &outputs {
                st.pending_outputs.remove(&f.number.0);
            }
            if let Some((n, _)) = &builder {
                st.pending_outputs.remove(&n.0);
            }
            return Err(e);
        }
        if !outputs.is_empty() {
            self.tiers.slow_fs.sync_dir(&slow_dir)?;
        }
        Ok(outputs)
    }
}

fn finish_output(number: FileNum, b: sst::Builder) -> Result<FileMeta> {
    let s = b.finish()?;
    Ok(FileMeta {
        number,
        size: s.size,
        smallest: s.smallest,
        largest: s.largest,
        smallest_seq: s.smallest_seq,
        largest_seq: s.largest_seq,
        entries: s.entries,
    })
}

/// True when no level below `output_level` can hold `user_key`, so a tombstone for it that
/// every snapshot sees can be dropped.
fn is_base_level_for_key(version: &Version, output_level: usize, user_key: &[u8]) -> bool {
    (output_level + 1..crate::version::NUM_LEVELS).all(|level| {
        version.files(level).iter().all(|f| {
            user_key < key::user_key(&f.smallest) || user_key > key::user_key(&f.largest)
        })
    })
}
