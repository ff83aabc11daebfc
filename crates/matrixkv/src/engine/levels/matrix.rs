//! MatrixKV's level structure (also X-Engine on NVM's): L0 is the matrix container of
//! RowTables on the fast tier (`engine::matrix`), L1 and below are SSTables on the slow tier.
//! A flush writes a row into the receiver; level-0 work is the receiver→compactor role switch
//! and column compaction into L1, which goes before a level over its target only when the
//! container nears full.

use super::LevelDesign;
use crate::engine::jobs::ReservedOutputs;
use crate::engine::matrix::ContainerHandle;
use crate::engine::{DbInner, ImmMem, State};
use crate::error::Result;
use crate::lock_order::MutexGuard;
use crate::stats::{Counters, FlushPhases};

/// Container occupancy above which L0 work (columns) goes before L1+ compaction. Below it a
/// level over its target goes first: an oversized L1 makes every column rewrite more L1 data.
const L0_FIRST_OCCUPANCY: f64 = 0.85;

/// The matrix container and the levels below it.
pub(crate) struct MatrixLevels {
    container: ContainerHandle,
    /// `Options::container_bytes`.
    container_bytes: u64,
}

impl MatrixLevels {
    pub(crate) fn new(container: ContainerHandle, container_bytes: u64) -> MatrixLevels {
        MatrixLevels {
            container,
            container_bytes,
        }
    }
}

impl std::fmt::Debug for MatrixLevels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MatrixLevels")
            .field("container_bytes", &self.container_bytes)
            .finish_non_exhaustive()
    }
}

impl LevelDesign for MatrixLevels {
    fn flush(
        &self,
        db: &DbInner,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64> {
        let written = db.run_flush_matrix(job, outputs, phases)?;
        Counters::add(&db.counters.fast_sst_bytes_written, written);
        Ok(written)
    }

    fn compact_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let (version, plan) = db.leveled_plan(st);
        // L0 work (role switch, column) comes first only when the container nears the
        // occupancy at which writes are throttled.
        let roomy = db.container_occupancy(st) < L0_FIRST_OCCUPANCY;
        if (plan.is_none() || !roomy) && db.matrix_step(st)? {
            return Ok(true);
        }
        db.run_leveled(st, version, plan)
    }

    fn has_compaction_work(&self, db: &DbInner, st: &State) -> bool {
        db.leveled_has_work(st) || db.matrix_has_work(st)
    }

    /// Every row numbered up to the newest one at the request is drained into L1, role
    /// switches forced even below `receiver_switch_ratio`.
    fn drain_l0_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let version = st.versions.current();
        let c = version.container();
        let pending = st
            .manual
            .as_ref()
            .and_then(|m| m.drain_upto)
            .is_some_and(|upto| {
                c.receiver
                    .iter()
                    .chain(c.compactor.iter())
                    .any(|r| r.row <= upto)
            });
        Ok(pending && db.matrix_step_forced(st)?)
    }

    /// At most half the container, so that the row its flush writes always fits once the
    /// compactor drains (a larger one poisoned the database at its flush: "a memtable needs N
    /// pages but the container has only M").
    fn persistent_memtable_cap(&self, bytes: u64) -> u64 {
        bytes.min(self.container_bytes / 2)
    }

    fn container(&self) -> Option<&ContainerHandle> {
        Some(&self.container)
    }
}
