//! SLM-DB's level structure (Kaiyrakhmet et al., FAST 2019; decision 0025): one level of
//! tables on the slow tier whose keys a persistent B+-tree on the fast tier maps to their
//! newest version's block (`engine::single_level`, `crate::index::pbtree`). A flush writes one
//! table; selective compaction merges the tables the leaf scan and the live-key ratios pick;
//! scans feed the range-query trigger ([`ScanProbe`]).

use std::sync::Arc;

use super::{LevelDesign, Lookup, PointRead};
use crate::engine::flush::TableOut;
use crate::engine::jobs::ReservedOutputs;
use crate::engine::matrix::RowFloors;
use crate::engine::single_level::Shape;
use crate::engine::{DbInner, ImmMem, ReadView, State};
use crate::error::{Error, Result};
use crate::index::global::GlobalIndex;
use crate::iter::BoxedIter;
use crate::key::{SeqNo, Versions};
use crate::lock_order::MutexGuard;
use crate::memtable::MemEntry;
use crate::options::{Design, SlmDbOptions};
use crate::stats::{Counters, FlushPhases};

/// The single level under SLM-DB's B+-tree.
#[derive(Debug)]
pub(crate) struct SelectiveLevel {
    index: GlobalIndex,
    knobs: SlmDbOptions,
}

impl SelectiveLevel {
    pub(crate) fn new(index: GlobalIndex, knobs: SlmDbOptions) -> SelectiveLevel {
        SelectiveLevel { index, knobs }
    }
}

impl LevelDesign for SelectiveLevel {
    fn flush(
        &self,
        db: &DbInner,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let write =
            |entries: &[MemEntry], outputs: &mut ReservedOutputs<'_>, out: &TableOut<'_>| {
                db.write_level_table(entries, outputs, out)
            };
        let written = db.run_flush_single_level(&self.index, job, outputs, phases, &write)?;
        Counters::add(&db.counters.slow_bytes_written, written);
        Ok(written)
    }

    fn compact_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        db.selective_step(st, &self.index, &self.knobs)
    }

    fn has_compaction_work(&self, db: &DbInner, st: &State) -> bool {
        db.selective_pick(&self.index, &st.versions.current(), &self.knobs)
            .is_some()
    }

    /// Up to `max_merge_tables` of the tables at the request are merged, a few at a time,
    /// and that is all (there is no deeper level).
    fn manual_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let most = self.knobs.max_merge_tables.max(2) as usize;
        db.manual_single_level_step(st, &self.index, &|_, inputs| {
            inputs.truncate(most);
            Shape::default()
        })
    }

    fn get_below_memtables(
        &self,
        db: &Arc<DbInner>,
        view: &ReadView,
        read: &PointRead<'_>,
        chain: Versions,
        _floors: Option<&mut RowFloors>,
    ) -> Result<Lookup> {
        db.get_below_memtables_single_level(view, read, &chain)
    }

    fn first_found_is_newest(&self) -> bool {
        false
    }

    /// The level through the B+-tree when the scan's snapshot sees all of it, else every
    /// table merged; both watched by the range-query trigger.
    fn scan(
        &self,
        db: &Arc<DbInner>,
        view: &ReadView,
        seq: SeqNo,
        memtables: Vec<BoxedIter>,
    ) -> Result<BoxedIter> {
        db.single_level_scan(view, seq, memtables, &self.knobs)
    }

    fn global_index(&self) -> Option<&GlobalIndex> {
        Some(&self.index)
    }

    /// SLM-DB's B+-tree is versioned with the manifest and cannot be rebuilt from the tables
    /// yet, and a backup does not copy it.
    fn check_backup(&self, design: &Design) -> Result<()> {
        Err(Error::invalid(format!(
            "backups of the {design} design are not supported yet (its global index is not \
             copied): take a checkpoint (Db::checkpoint_to) instead"
        )))
    }
}
