//! LightKV's level structure (Han, Jiang, Xiong, MSST 2020; decision 0027): the single level
//! of `engine::single_level` (its index commits, merges and read path) cut into key-range
//! partitions (`engine::partitioned`, `crate::compaction::partition`), described by an
//! RH-tree on the fast tier. A flush writes one table per partition it has keys for;
//! partition compaction merges a partition's tables of one merge count and splits partitions
//! grown above `partition_bytes`.

use std::sync::Arc;

use super::{LevelDesign, Lookup, PointRead};
use crate::compaction::partition::PartitionConfig;
use crate::engine::flush::TableOut;
use crate::engine::jobs::ReservedOutputs;
use crate::engine::matrix::RowFloors;
use crate::engine::{DbInner, ImmMem, ReadView, State};
use crate::error::Result;
use crate::index::global::GlobalIndex;
use crate::key::Versions;
use crate::lock_order::MutexGuard;
use crate::memtable::MemEntry;
use crate::options::LightKvOptions;
use crate::stats::{Counters, FlushPhases};

/// The partitioned single level under LightKV's RH-tree.
#[derive(Debug)]
pub(crate) struct PartitionedLevel {
    index: GlobalIndex,
    cfg: PartitionConfig,
}

impl PartitionedLevel {
    pub(crate) fn new(index: GlobalIndex, k: LightKvOptions) -> PartitionedLevel {
        let cfg = PartitionConfig {
            compaction_size: k.compaction_size as usize,
            max_partitions: k.max_partitions as usize,
            partition_bytes: k.partition_bytes,
        };
        PartitionedLevel { index, cfg }
    }
}

impl LevelDesign for PartitionedLevel {
    fn flush(
        &self,
        db: &DbInner,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let write =
            |entries: &[MemEntry], outputs: &mut ReservedOutputs<'_>, out: &TableOut<'_>| {
                let bounds = db.state.lock().versions.partitions().bounds.clone();
                db.write_partitioned(entries, outputs, out, &bounds)
            };
        let written = db.run_flush_single_level(&self.index, job, outputs, phases, &write)?;
        Counters::add(&db.counters.slow_bytes_written, written);
        Ok(written)
    }

    fn compact_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        db.partition_step(st, &self.index, &self.cfg)
    }

    fn has_compaction_work(&self, db: &DbInner, st: &State) -> bool {
        db.partition_pick(st, &self.index, &self.cfg).is_some()
    }

    /// Up to `compaction_size` of the tables at the request merge into the next merge count,
    /// cut at the partition bounds.
    fn manual_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        db.manual_single_level_step(st, &self.index, &|st, inputs| {
            db.manual_partition_shape(st, &self.cfg, inputs)
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

    fn global_index(&self) -> Option<&GlobalIndex> {
        Some(&self.index)
    }
}
