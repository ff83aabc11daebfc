//! The level structures of the engine's modes, behind one trait, as the memtable designs are
//! behind [`crate::memtable::design::MemtableDesign`]. A structure decides how a flushed
//! memtable enters the tables, which compaction runs next, how a manual compaction drains
//! the data present at its request, how a point read and a scan go below the memtables, and
//! which fast-tier regions besides the memtables it owns. The engine asks the structure,
//! never the mode:
//!
//! - [`matrix::MatrixLevels`] (MatrixKV, X-Engine on NVM): leveled, L0 as the matrix
//!   container of RowTables on the fast tier, drained by column compaction;
//! - [`l0_tables::L0Tables`] (NoveLSM, and MatrixKV with `L0Layout::Tables`): leveled, L0 as
//!   SSTables;
//! - [`selective::SelectiveLevel`] (SLM-DB): one level of tables on the slow tier described by
//!   a persistent B+-tree on the fast tier, merged by selective compaction;
//! - [`partitioned::PartitionedLevel`] (LightKV): one level cut into key-range partitions,
//!   described by an RH-tree, merged partition by partition.
//!
//! The machinery each one drives lives in the engine module of its concept
//! (`engine::matrix`, `engine::compact`, `engine::single_level`, `engine::partitioned`);
//! [`open`] is the one place that maps the options to a structure.
//!
//! Who calls it: `engine::flush` (every flush), `engine::compact` (the compaction thread's
//! next step), `engine::manual`, `engine::read` (reads below the memtables, scans),
//! `engine::write::room` (persistent memtable sizes), `engine::checkpoint` and backups (the
//! regions to copy), `engine::recovery` (the structure is opened once, before the instance).

use std::fmt::Debug;
use std::sync::Arc;

use super::jobs::ReservedOutputs;
use super::matrix::ContainerHandle;
use super::{DbInner, ImmMem, ReadView, State};
use crate::error::Result;
use crate::index::global::GlobalIndex;
use crate::iter::BoxedIter;
use crate::key::SeqNo;
use crate::keyspace::registry::Settings;
use crate::lock_order::MutexGuard;
use crate::options::{Design, L0Layout, Options};
use crate::stats::FlushPhases;

pub(crate) mod l0_tables;
pub(crate) mod matrix;
pub(crate) mod partitioned;
pub(crate) mod selective;

/// The answer of a point read below the memtables: `Some(value or None for a deleted key)`,
/// or `None` when the structure's fast path cannot decide and the caller's iterator must.
pub(crate) type Lookup = Option<Option<Vec<u8>>>;

/// A point read: the key, at which sequence number, resolved with which keyspace's settings.
#[derive(Clone, Copy)]
pub(crate) struct PointRead<'a> {
    pub ks: &'a Settings,
    pub user_key: &'a [u8],
    pub seq: SeqNo,
}

/// What a level structure decides. Implementations hold their knobs and the fast-tier
/// regions they own (the container, the global index).
pub(crate) trait LevelDesign: Send + Sync + Debug {
    /// Writes the immutable memtable `job` into the structure (numbers reserved in
    /// `outputs`), installs the edit and counts the bytes on the tier they went to. Called by
    /// the flush thread without the state lock.
    fn flush(
        &self,
        db: &DbInner,
        job: &ImmMem,
        outputs: &mut ReservedOutputs<'_>,
        phases: &mut FlushPhases,
    ) -> Result<u64>;

    /// One automatic compaction step of the structure, after range-tombstone cleanup and the
    /// manual request had their turn. Called by the compaction thread with `state` locked
    /// (released around I/O). `Ok(false)`: nothing to do.
    fn compact_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool>;

    /// True when [`LevelDesign::compact_step`] would run a job now.
    fn has_compaction_work(&self, db: &DbInner, st: &State) -> bool;

    /// One step of the manual compaction request in `State::manual`; `Ok(false)` when it has
    /// nothing left. The leveled structures drain level 0 ([`LevelDesign::drain_l0_step`])
    /// and push the range down the levels.
    fn manual_step(&self, db: &DbInner, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        db.manual_leveled_step(st)
    }

    /// In a leveled structure, one step that moves level-0 data written up to the manual
    /// request out of level 0; `Ok(false)` when none is left.
    fn drain_l0_step(&self, _db: &DbInner, _st: &mut MutexGuard<'_, State>) -> Result<bool> {
        Ok(false)
    }

    /// The point read `read` below the memtables of `view`, given `chain`, the
    /// memtables' versions of it (merge operands only, newest first; often none). The leveled
    /// structures search rows and tables level by level.
    fn get_below_memtables(
        &self,
        db: &Arc<DbInner>,
        view: &ReadView,
        read: &PointRead<'_>,
        chain: crate::key::Versions,
        floors: Option<&mut super::matrix::RowFloors>,
    ) -> Result<Lookup> {
        db.get_in_levels(view, read, chain, floors).map(Some)
    }

    /// True when the first source (row or table, newest level first) holding a key below the
    /// memtables holds its newest version, so a read under a range tombstone may stop there.
    /// Not so in a single level, whose tables' sequence ranges interleave.
    fn first_found_is_newest(&self) -> bool {
        true
    }

    /// The iterator of a scan of `view` as of `seq`, merging `memtables` (newest first) with
    /// every source below them.
    fn scan(
        &self,
        db: &Arc<DbInner>,
        view: &ReadView,
        _seq: SeqNo,
        memtables: Vec<BoxedIter>,
    ) -> Result<BoxedIter> {
        Ok(Box::new(db.leveled_sources(view, memtables)?))
    }

    /// Region bytes of a new persistent memtable meant to take `bytes` of writes.
    fn persistent_memtable_cap(&self, bytes: u64) -> u64 {
        bytes
    }

    /// The matrix container, in the structure that has one.
    fn container(&self) -> Option<&ContainerHandle> {
        None
    }

    /// The global index on the fast tier, in the structures that have one.
    fn global_index(&self) -> Option<&GlobalIndex> {
        None
    }

    /// `Err` naming the reason when a backup (`BackupEngine`) of this structure cannot be
    /// taken.
    fn check_backup(&self, _design: &Design) -> Result<()> {
        Ok(())
    }
}

/// The fast-tier regions an open found (or made) for the structure `opts` selects.
pub(crate) struct Regions {
    pub container: Option<ContainerHandle>,
    pub global_index: Option<GlobalIndex>,
}

/// What the options select, before any region is opened: the recovery opens the regions the
/// kind names, then [`open`] assembles the structure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Matrix,
    L0Tables,
    /// A single level under a B+-tree (SLM-DB).
    Selective,
    /// A single level of partitions under an RH-tree (LightKV).
    Partitioned,
}

impl Kind {
    /// The structure `opts` selects.
    pub(crate) fn of(opts: &Options) -> Kind {
        match (opts.design, opts.l0_layout) {
            (Design::SlmDb(_), _) => Kind::Selective,
            (Design::LightKv(_), _) => Kind::Partitioned,
            (_, L0Layout::Matrix) => Kind::Matrix,
            (_, L0Layout::Tables) => Kind::L0Tables,
        }
    }

    /// The structure keeps the matrix container on the fast tier.
    pub(crate) fn has_container(self) -> bool {
        self == Kind::Matrix
    }
}

/// The structure `opts` selects, owning the regions the open found for it.
///
/// # Panics
/// When a region the kind needs is missing (the recovery opens every one [`Kind`] names).
pub(crate) fn open(opts: &Options, regions: Regions) -> Box<dyn LevelDesign> {
    let Regions {
        container,
        global_index,
    } = regions;
    let index = || global_index.expect("the recovery opens the global index of its design");
    match (Kind::of(opts), opts.design) {
        (Kind::Matrix, _) => Box::new(matrix::MatrixLevels::new(
            container.expect("the recovery opens the container of the matrix layout"),
            opts.container_bytes,
        )),
        (Kind::Selective, Design::SlmDb(k)) => Box::new(selective::SelectiveLevel::new(index(), k)),
        (Kind::Partitioned, Design::LightKv(k)) => {
            Box::new(partitioned::PartitionedLevel::new(index(), k))
        }
        _ => Box::new(l0_tables::L0Tables),
    }
}
