//! The engine stages of the designs with one level of tables on the slow tier (level 0 of the
//! version, whose tables may overlap and whose sequence ranges interleave), described by the
//! global index on the fast tier ([`crate::index::global`]): SLM-DB (Kaiyrakhmet et al., FAST
//! 2019; decision 0025) here, LightKV's partitions and their compaction in
//! [`super::partitioned`] (decision 0027). Which one runs is decided in [`DbInner::level_step`]
//! and the two functions beside it, from the design; the read path is shared.
//!
//! - flush: the memtable becomes one table of the level; its keys enter the index;
//! - selective compaction: the leaf scan and the live-key ratios make candidates, the pure
//!   picker ([`crate::compaction::selective`]) chooses the tables to merge; versions the index
//!   shows superseded elsewhere are dropped; the keys the index still maps into the inputs
//!   move to the outputs;
//! - point reads: the memtables, then the index, then at most one block of one table. A read
//!   at a snapshot older than the level's newest version, or one meeting a merge operand,
//!   takes the slow path (every table that may hold the key, the newest version wins).
//!
//! Each job holds the index's commit lock from its index commit until its manifest edit is
//! installed (lock order: index commit lock, manifest, state).

use std::collections::{HashMap, HashSet};

mod scan;

pub(crate) use scan::{IndexScan, ScanProbe};
use std::sync::Arc;
use std::time::Instant;

use crate::lock_order::MutexGuard;

use super::compact::{MergeExtras, Superseded};
use super::jobs::{JobFlag, ReservedOutputs};
use super::{DbInner, ImmMem, State};
use crate::compaction::selective;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::index::global::IndexReader;
use crate::index::global::{GlobalIndex, Staged, TableKey, recorded_keys};
use crate::iter::BoxedIter;
use crate::iter::merging::MergingIterator;
use crate::key::{SeqNo, ValueKind};
use crate::keyspace::registry::Settings;
use crate::layout::FileNum;
use crate::options::SlmDbOptions;
use crate::sst::builder::KeyBlock;
use crate::stats::{Counters, FlushPhases, Laps};
use crate::version::edit::{FileMeta, VersionEdit};
use crate::version::version::Version;

/// What reads see of the index: the tree as of the version they read, and that version's
/// tables by number. Built whenever an SLM-DB job installs its edit.
#[derive(Debug)]
pub(crate) struct IndexView {
    snapshot: IndexReader,
    /// The index region's path (for errors).
    path: std::path::PathBuf,
    /// The largest sequence number of any table of the level: a read at or above it finds
    /// the key's newest version where the index says.
    max_seq: SeqNo,
    tables: Arc<HashMap<u64, Arc<FileMeta>>>,
}

impl IndexView {
    /// The view of `index` as of `version` (the caller holds the index's commit lock or is
    /// opening the database, so the tree's generation is the one the version records).
    pub(crate) fn new(index: &GlobalIndex, version: &Version) -> IndexView {
        let files = version.files(0);
        IndexView {
            snapshot: index.snapshot(),
            path: index.path().to_owned(),
            max_seq: files
                .iter()
                .map(|f| f.largest_seq)
                .max()
                .unwrap_or(SeqNo::ZERO),
            tables: Arc::new(files.iter().map(|f| (f.number.0, Arc::clone(f))).collect()),
        }
    }
}

/// How a merge of the single level shapes its outputs (the default: SLM-DB's, tables cut at
/// the target file size).
#[derive(Debug, Default)]
pub(super) struct Shape {
    /// Outputs start a new table at these user keys and are cut nowhere else (LightKV: the
    /// partition bounds, one table per partition).
    pub cut_at: Option<Vec<Vec<u8>>>,
    /// The outputs' merge count (LightKV).
    pub run: Option<u32>,
    /// Partition bounds the edit records (a LightKV split).
    pub bounds: Option<Vec<Vec<u8>>>,
}

/// Writes the tables of a flush of entries (sorted), numbered in the outputs, as `out` says.
pub(super) type TableWriter<'a> = dyn Fn(
        &[crate::memtable::MemEntry],
        &mut ReservedOutputs<'_>,
        &super::flush::TableOut<'_>,
    ) -> Result<Vec<(FileMeta, Vec<KeyBlock>)>>
    + 'a;

impl DbInner {
    /// Writes the single table of a flush of `entries` into the slow tier (SLM-DB), numbered
    /// in `outputs`.
    pub(super) fn write_level_table(
        &self,
        entries: &[crate::memtable::MemEntry],
        outputs: &mut ReservedOutputs<'_>,
        out: &super::flush::TableOut<'_>,
    ) -> Result<Vec<(FileMeta, Vec<KeyBlock>)>> {
        let codecs = self.keyspaces().block_codecs();
        let number = outputs.reserve();
        Ok(
            super::flush::write_table(out, &self.opts.table, entries, number, codecs)?
                .into_iter()
                .collect(),
        )
    }

    /// Installs `edit` (which records `staged`'s generation) and sets the index view the next
    /// read view takes, or rolls the index back when the edit could not be appended. The
    /// caller holds the index's commit lock and publishes the read view.
    fn install_with_index(
        &self,
        ix: &GlobalIndex,
        staged: Option<Staged<'_>>,
        st: &mut MutexGuard<'_, State>,
        edit: &mut VersionEdit,
    ) -> Result<()> {
        edit.index_generation = staged.as_ref().map(|s| s.generation);
        let manifest = MutexGuard::unlocked(st, || self.manifest.lock());
        match self.install_edit(manifest, st, edit) {
            Ok(()) => {
                if let Some(s) = staged {
                    s.finish();
                }
                // The caller publishes the read view (a flush first retires its memtable,
                // which the new table now holds).
                st.index_view = Some(Arc::new(IndexView::new(ix, &st.versions.current())));
                Ok(())
            }
            Err(e) => {
                if let Some(s) = staged
                    && let Err(rollback) = s.abort()
                {
                    self.poison(st, &rollback);
                }
                Err(e)
            }
        }
    }

    /// A flush into tables of the single level (slow tier), written by `write` (one table,
    /// or one per partition), whose keys enter the index. Returns the tables' bytes.
    pub(super) fn run_flush_single_level(
        &self,
        ix: &GlobalIndex,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
        write: &TableWriter<'_>,
    ) -> Result<u64> {
        let mut laps = Laps::start();
        let fold = self.flush_fold(job)?;
        phases.collect_micros = laps.lap();
        // A table of the slow tier, written as compactions write theirs (direct I/O with
        // `Options::direct_writes`).
        let out = super::flush::TableOut {
            fs: self.tiers.slow_fs.as_ref(),
            dir: &self.opts.slow_dir,
            create: &|p| self.create_output(p),
            record_keys: true,
        };
        // The tables stay pending outputs until the edit holding them installs.
        let tables: Vec<(FileMeta, Vec<TableKey>)> = write(&fold.entries, outputs, &out)?
            .into_iter()
            .map(|(m, keys)| {
                let keys = recorded_keys(m.number, keys);
                (m, keys)
            })
            .collect();
        let result = (|| {
            let (metas, keys): (Vec<FileMeta>, Vec<Vec<TableKey>>) = tables.into_iter().unzip();
            // Opened here (footer, index and filter read) rather than by the first reader the
            // index sends to them.
            for m in &metas {
                self.tables.get(0, m)?;
            }
            let keys: Vec<TableKey> = keys.into_iter().flatten().collect();
            let written: u64 = metas.iter().map(|m| m.size).sum();
            phases.table_micros = laps.lap();
            let _commit = ix.lock();
            let before = ix.bytes_written();
            let staged = if keys.is_empty() {
                None
            } else {
                Some(ix.stage_flush(&keys)?)
            };
            Counters::add(
                &self.counters.index_bytes_written,
                ix.bytes_written() - before,
            );
            let mut st = self.state.lock();
            phases.manifest_wait_micros = laps.lap();
            let mut edit = Self::flush_edit(&mut st, job, metas);
            let installed = self.install_with_index(ix, staged, &mut st, &mut edit);
            outputs.release(&mut st);
            installed?;
            super::wal_recycle::retire_oldest_imm(&mut st);
            self.refresh_view(&st);
            Ok(written)
        })();
        let written = result?;
        phases.install_micros = laps.lap();
        Ok(written)
    }

    /// One step of selective compaction: a leaf scan, then the picker; runs the merge it
    /// picks. `Ok(false)` when there is nothing to do. Called by the compaction thread with
    /// `state` locked; releases it around the I/O.
    pub(super) fn selective_step(
        &self,
        st: &mut MutexGuard<'_, State>,
        ix: &GlobalIndex,
        k: &SlmDbOptions,
    ) -> Result<bool> {
        let tables = st.versions.current().num_files(0) as u64;
        if tables == 0 {
            return Ok(false);
        }
        // The paper scans the average key count of `leaf_scan_tables` tables.
        let n_keys = ix.keys() / tables * u64::from(k.leaf_scan_tables);
        MutexGuard::unlocked(st, || ix.leaf_scan(n_keys, k.leaf_scan_threshold as usize))?;
        let version = st.versions.current();
        let Some(pick) = self.selective_pick(ix, &version, k) else {
            return Ok(false);
        };
        self.run_selective_job(st, ix, &version, pick.inputs, &Shape::default())?;
        Ok(true)
    }

    /// What selective compaction would merge in `version` now (no leaf scan: the
    /// candidates it found so far). Settled tables count as fully live and are no leaf-scan
    /// candidates ([`GlobalIndex::exempt`]).
    pub(super) fn selective_pick(
        &self,
        ix: &GlobalIndex,
        version: &Version,
        k: &SlmDbOptions,
    ) -> Option<selective::Pick> {
        let cfg = selective::SelectiveConfig {
            live_key_ratio: k.live_key_ratio,
            candidate_trigger: k.candidate_trigger as usize,
            max_merge_files: k.max_merge_tables as usize,
        };
        let exempt = ix.exempt();
        let mut live = ix.live_keys();
        for f in version.files(0) {
            if exempt.contains(&f.number.0) {
                live.insert(f.number.0, f.entries);
            }
        }
        let mut candidates = ix.candidates();
        candidates.retain(|t| !exempt.contains(t));
        selective::pick(version.files(0), &live, &candidates, &cfg)
    }

    /// Runs a merge of `inputs` (tables of `version`'s level) shaped by `shape` without the
    /// state lock.
    pub(super) fn run_selective_job(
        &self,
        st: &mut MutexGuard<'_, State>,
        ix: &GlobalIndex,
        version: &Arc<Version>,
        inputs: Vec<Arc<FileMeta>>,
        shape: &Shape,
    ) -> Result<()> {
        let smallest_snapshot = self.smallest_snapshot(st);
        self.run_job(st, JobFlag::Compacting, || {
            self.run_selective(ix, version, &inputs, smallest_snapshot, shape)
        })
    }

    /// Merges `inputs` into new tables of the level, moves their keys in the index, installs.
    fn run_selective(
        &self,
        ix: &GlobalIndex,
        version: &Arc<Version>,
        inputs: &[Arc<FileMeta>],
        smallest_snapshot: u64,
        shape: &Shape,
    ) -> Result<()> {
        let start = Instant::now();
        let input_set: HashSet<u64> = inputs.iter().map(|f| f.number.0).collect();
        let largest: HashMap<u64, SeqNo> = version
            .files(0)
            .iter()
            .map(|f| (f.number.0, f.largest_seq))
            .collect();
        let snapshot = ix.snapshot();
        let outside = input_set.clone();
        let superseded = move |user_key: &[u8]| -> Result<Option<SeqNo>> {
            Ok(snapshot.get(user_key)?.and_then(|loc| {
                (!outside.contains(&loc.file()) && !loc.is_merge())
                    .then(|| largest.get(&loc.file()).copied())
                    .flatten()
            }))
        };
        let extras = MergeExtras {
            beside: version
                .files(0)
                .iter()
                .filter(|f| !input_set.contains(&f.number.0))
                .cloned()
                .collect(),
            superseded: Some(Superseded(Box::new(superseded))),
            split_at: shape.cut_at.clone().unwrap_or_default(),
            target_bytes: shape.cut_at.as_ref().map(|_| u64::MAX),
            record_keys: true,
            ..MergeExtras::default()
        };
        let mut children: Vec<BoxedIter> = Vec::new();
        for f in inputs {
            children.push(Box::new(self.tables.get(0, f)?.iter()));
        }
        let merged = MergingIterator::new(children);
        let mut reserved = ReservedOutputs::new(self);
        let mut outputs = self.merge_into_level(
            version,
            Box::new(merged),
            0,
            smallest_snapshot,
            &extras,
            &mut reserved,
        )?;
        // What the builders recorded: no table is read back.
        let keys: Vec<TableKey> = outputs
            .tables
            .iter()
            .zip(std::mem::take(&mut outputs.keys))
            .flat_map(|(m, k)| recorded_keys(m.number, k))
            .collect();
        let input_keys = std::mem::take(&mut outputs.input_keys);
        // Opened before the index points readers at them (see the flush).
        let opened = outputs
            .tables
            .iter()
            .try_for_each(|m| self.tables.get(0, m).map(|_| ()));
        let in_bytes: u64 = inputs.iter().map(|f| f.size).sum();
        let out_bytes = outputs.table_bytes() + outputs.blob_bytes();
        let mut edit = VersionEdit::default();
        edit.deleted_files
            .extend(inputs.iter().map(|f| (0, f.number)));
        let out_numbers = outputs.add_to(&mut edit, 0);
        if let Some(run) = shape.run {
            edit.table_runs = out_numbers.iter().map(|n| (FileNum(*n), run)).collect();
        }
        edit.partition_bounds.clone_from(&shape.bounds);
        let result = opened.and_then(|()| {
            let _commit = ix.lock();
            let before = ix.bytes_written();
            let staged = ix.stage_compaction(&input_set, &input_keys, &keys)?;
            Counters::add(
                &self.counters.index_bytes_written,
                ix.bytes_written() - before,
            );
            let mut st = self.state.lock();
            let installed = self.install_with_index(ix, Some(staged), &mut st, &mut edit);
            reserved.release(&mut st);
            installed?;
            self.refresh_view(&st);
            ix.settle(&out_numbers);
            Ok::<(), Error>(())
        });
        result?;
        Counters::add(&self.counters.compactions, 1);
        let kind = match (shape.run, &shape.bounds) {
            (None, _) => &self.counters.selective_compactions,
            (Some(_), None) => &self.counters.partition_compactions,
            (Some(_), Some(_)) => &self.counters.partition_splits,
        };
        Counters::add(kind, 1);
        Counters::add(&self.counters.compaction_input_bytes, in_bytes);
        Counters::add(&self.counters.compaction_output_bytes, out_bytes);
        Counters::add(&self.counters.slow_bytes_written, out_bytes);
        Counters::add(
            &self.counters.compaction_micros,
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        Ok(())
    }

    /// A manual compaction step in the single level: some of the tables numbered up to the
    /// request's newest that overlap its range, chosen and shaped by `shape` from the
    /// candidates (oldest first), are merged (their outputs are numbered above, so the request
    /// ends). `Ok(false)` when none is left.
    pub(super) fn manual_single_level_step(
        &self,
        st: &mut MutexGuard<'_, State>,
        ix: &GlobalIndex,
        shape: &dyn Fn(&State, &mut Vec<Arc<FileMeta>>) -> Shape,
    ) -> Result<bool> {
        let Some(m) = st.manual.as_ref() else {
            return Ok(false);
        };
        let upto = m.l0_upto.unwrap_or(FileNum(0));
        let (begin, end) = (m.begin.clone(), m.end.clone());
        let (begin, end) = (begin.as_deref(), end.as_deref());
        let version = st.versions.current();
        let mut inputs: Vec<Arc<FileMeta>> = version
            .files(0)
            .iter()
            .filter(|f| {
                f.number <= upto
                    && begin.is_none_or(|b| f.largest_user() >= b)
                    && end.is_none_or(|e| f.smallest_user() <= e)
            })
            .cloned()
            .collect();
        if inputs.is_empty() {
            return Ok(false);
        }
        inputs.sort_by_key(|f| f.number);
        let shape = shape(st, &mut inputs);
        self.run_selective_job(st, ix, &version, inputs, &shape)?;
        Ok(true)
    }

    /// Point lookup below the memtables through the global index: `Some(answer)`, or `None`
    /// when the slow path must decide (a read older than the level's newest version, or a
    /// merge operand).
    pub(super) fn get_by_index(
        &self,
        view: &IndexView,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let answer = self.index_answer(view, ks, user_key, seq);
        if matches!(answer, Ok(None)) {
            Counters::add(&self.counters.index_fallbacks, 1);
        }
        answer
    }

    /// [`Self::get_by_index`] before it counts the lookups sent to the slow path.
    fn index_answer(
        &self,
        view: &IndexView,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<Option<Vec<u8>>>> {
        if seq < view.max_seq {
            return Ok(None);
        }
        let Some(loc) = view.snapshot.get(user_key)? else {
            // Not in the index: deleted or never written; no table is read.
            Counters::add(&self.counters.index_misses, 1);
            return Ok(Some(None));
        };
        if loc.is_merge() {
            return Ok(None);
        }
        let missing = |what| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentIndex, &view.path, 0),
                CorruptionReason::Invalid(what),
            )
        };
        let Some(meta) = view.tables.get(&loc.file()) else {
            if view.snapshot.may_be_ahead() {
                // A job changed the index before its edit reached this view.
                return self.ahead_of_view(ks, &loc, user_key, seq);
            }
            return Err(missing("the index names a table the version does not hold"));
        };
        let table = self.tables.get(0, meta)?;
        match table.get_in_block(loc.offset(), u64::from(loc.size()), user_key, seq)? {
            Some((ValueKind::Merge, _, _)) => Ok(None),
            Some((kind, _, v)) => {
                Counters::add(&self.counters.get_hits_levels, 1);
                self.resolve_found(ks, user_key, kind, v).map(Some)
            }
            None => Err(missing("the block the index names does not hold the key")),
        }
    }

    /// A lookup whose location names a table a job wrote but this reader's view does not
    /// hold (LightKV's RH-tree changes before the job's edit installs): the key's newest
    /// version in that table answers if the reader's snapshot covers it, else (or when the
    /// table is no longer open, or the version is a merge operand) `None`, the slow path.
    ///
    /// Why the newest version there is the answer: the index names the table holding the
    /// key's newest version among all tables, so no table of the view holds a newer one; the
    /// memtables of the view, searched first, hold none up to `seq`; a newer range tombstone
    /// up to `seq` would be in the view and was checked before. An older version kept there
    /// for a snapshot is never used: the view may hold versions between it and the newest
    /// that the job dropped.
    fn ahead_of_view(
        &self,
        ks: &Settings,
        loc: &crate::index::pbtree::Location,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let Some(table) = self.tables.cached(loc.file()) else {
            return Ok(None);
        };
        match table.get_in_block(loc.offset(), u64::from(loc.size()), user_key, SeqNo::MAX)? {
            Some((kind, found, v)) if kind != ValueKind::Merge && found <= seq => {
                Counters::add(&self.counters.get_hits_levels, 1);
                self.resolve_found(ks, user_key, kind, v).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// A point read below the memtables in the single level: the index, else every table
    /// that may hold the key. `None` (the caller's iterator decides, seeing every version)
    /// when the memtables gave merge operands (`chain`) or the level's newest version of the
    /// key is one.
    pub(super) fn get_below_memtables_single_level(
        &self,
        view: &super::ReadView,
        read: &super::levels::PointRead<'_>,
        chain: &crate::key::Versions,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let &super::levels::PointRead { ks, user_key, seq } = read;
        let Some(index) = view.index.as_deref().filter(|_| chain.is_empty()) else {
            return Ok(None);
        };
        if let Some(answer) = self.get_by_index(index, ks, user_key, seq)? {
            return Ok(Some(answer));
        }
        self.get_in_single_level(&view.version, ks, user_key, seq)
    }

    /// A scan of `view` as of `seq` in SLM-DB's level (knobs `k`): `memtables` (newest first)
    /// merged with the level read through the B+-tree when `seq` sees every table's versions,
    /// else with every table of the level ([`ScanProbe`]).
    pub(super) fn single_level_scan(
        self: &Arc<Self>,
        view: &super::ReadView,
        seq: SeqNo,
        memtables: Vec<BoxedIter>,
        k: &SlmDbOptions,
    ) -> Result<BoxedIter> {
        if let Some(ix) = view.index.as_deref()
            && seq >= ix.max_seq
            && let IndexReader::BTree(snapshot) = &ix.snapshot
        {
            let mut children = memtables;
            children.push(Box::new(IndexScan::new(
                Arc::clone(self),
                snapshot,
                Arc::clone(&view.version),
                Arc::clone(&ix.tables),
                ix.path.clone(),
                k,
            )));
            return Ok(Box::new(MergingIterator::new(children)));
        }
        let n = memtables.len();
        let inner = self.leveled_sources(view, memtables)?;
        Ok(Box::new(ScanProbe::new(
            Arc::clone(self),
            inner,
            n,
            view.version.files(0),
            k,
        )))
    }

    /// The slow path of a point lookup in the single level: the newest version at `seq` among
    /// every table that may hold the key (their sequence ranges interleave, so the first one
    /// found need not be the newest). `None` when that version is a merge operand.
    pub(super) fn get_in_single_level(
        &self,
        version: &Version,
        ks: &Settings,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<Option<Vec<u8>>>> {
        let mut best: Option<(ValueKind, SeqNo, Vec<u8>)> = None;
        for f in version.files_for_key(0, user_key) {
            if f.smallest_seq > seq || best.as_ref().is_some_and(|b| f.largest_seq < b.1) {
                continue;
            }
            if let Some(found) = self.tables.get(0, f)?.newest(user_key, seq)?
                && best.as_ref().is_none_or(|b| found.1 > b.1)
            {
                best = Some(found);
            }
        }
        match best {
            None => Ok(Some(None)),
            Some((ValueKind::Merge, _, _)) => Ok(None),
            Some((kind, _, v)) => {
                Counters::add(&self.counters.get_hits_levels, 1);
                self.resolve_found(ks, user_key, kind, v).map(Some)
            }
        }
    }
}
