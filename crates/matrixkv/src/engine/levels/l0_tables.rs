//! The LSM-tree's level structure (LevelDB, RocksDB; NoveLSM; MatrixKV with
//! `L0Layout::Tables`): a flush writes an L0 SSTable on the fast tier, and the picker merges
//! L0 tables into L1 like any level over its target.

use super::LevelDesign;
use crate::compaction::picker;
use crate::engine::jobs::ReservedOutputs;
use crate::engine::{DbInner, ImmMem, State};
use crate::error::Result;
use crate::lock_order::MutexGuard;
use crate::stats::{Counters, FlushPhases};

/// Leveled, with level 0 as overlapping SSTables.
#[derive(Debug)]
pub(crate) struct L0Tables;

impl LevelDesign for L0Tables {
    fn flush(
        &self,
        db: &DbInner,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let written = db.run_flush_l0(job, outputs, phases)?;
        Counters::add(&db.counters.fast_sst_bytes_written, written);
        Ok(written)
    }

    fn compact_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let (version, plan) = db.leveled_plan(st);
        db.run_leveled(st, version, plan)
    }

    fn has_compaction_work(&self, db: &DbInner, st: &State) -> bool {
        db.leveled_has_work(st)
    }

    /// Every L0 table numbered up to the newest one at the request is merged into L1.
    fn drain_l0_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let version = st.versions.current();
        let pending = st
            .manual
            .as_ref()
            .and_then(|m| m.l0_upto)
            .is_some_and(|upto| version.files(0).iter().any(|f| f.number <= upto));
        match picker::pick_l0(&version) {
            Some(plan) if pending => {
                db.run_plan(st, plan)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}
