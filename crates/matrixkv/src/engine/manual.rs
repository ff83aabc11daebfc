//! Manual compaction ([`crate::Db::compact_range`]): the caller flushes, then hands the
//! request to the compaction thread through `State::manual` and waits for its result. The
//! compaction thread runs it before automatic work, one step at a time (so automatic
//! compactions and the request never touch the same files at once):
//!
//! 1. Level 0: the data that existed at the request leaves level 0. In the matrix layout
//!    every container row numbered up to the newest one at the request is drained into L1
//!    (role switches are forced even below `receiver_switch_ratio`); in the SSTable layout
//!    every L0 table up to the newest one at the request is merged into L1. Rows and tables
//!    written after the request are left alone, so a steady stream of writes cannot keep the
//!    request from finishing.
//! 2. Levels 1 to the deepest non-empty level minus one: the files overlapping the range are
//!    pushed one level down ([`crate::compaction::picker::pick_manual`]) until none is left
//!    at that level, then the next level. The data ends in the deepest level, as RocksDB's
//!    `CompactRange` leaves it.
//! 3. With a compaction filter or a TTL, the deepest level's files in the range are rewritten
//!    in place once, so that the filter sees every value (RocksDB's
//!    `BottommostLevelCompaction::kIfHaveCompactionFilter`).
//!
//! Versions a snapshot needs are kept, as in every compaction.

use crate::lock_order::MutexGuard;

use super::{DbInner, State};
use crate::compaction::picker::{self, Plan};
use crate::error::Result;
use crate::layout::FileNum;

/// A manual compaction requested by `Db::compact_range`, in `State::manual`.
#[derive(Debug)]
pub(crate) struct ManualCompaction {
    /// Smallest user key of the range (`None`: unbounded).
    pub begin: Option<Vec<u8>>,
    /// Largest user key of the range, inclusive (`None`: unbounded).
    pub end: Option<Vec<u8>>,
    /// Matrix layout: container rows numbered up to this are drained first.
    pub drain_upto: Option<u64>,
    /// SSTable layout: L0 tables numbered up to this are merged into L1 first.
    pub l0_upto: Option<FileNum>,
    /// The level whose files in the range are being pushed down; 0 while level 0 is done.
    pub level: usize,
    /// The deepest non-empty level once level 0 is done: where the data ends.
    pub target: usize,
    /// The last level's tables in the range were rewritten for the compaction filter / TTL
    /// (or need not be).
    pub rewritten: bool,
    /// Set by the compaction thread when the request is finished (or failed).
    pub result: Option<Result<()>>,
}

impl ManualCompaction {
    /// A request for `[begin, end]` made when the newest container row was `drain_upto` and
    /// the newest L0 table `l0_upto`.
    pub(crate) fn new(
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
        drain_upto: Option<u64>,
        l0_upto: Option<FileNum>,
    ) -> ManualCompaction {
        ManualCompaction {
            begin: begin.map(<[u8]>::to_vec),
            end: end.map(<[u8]>::to_vec),
            drain_upto,
            l0_upto,
            level: 0,
            target: 0,
            rewritten: false,
            result: None,
        }
    }
}

impl DbInner {
    /// True while a manual compaction waits for the compaction thread.
    pub(crate) fn manual_pending(st: &State) -> bool {
        st.manual.as_ref().is_some_and(|m| m.result.is_none())
    }

    /// Runs one step of the pending manual compaction, if any. `Ok(false)`: none is pending
    /// (a finished one gets its result here). A failed step fails the request with the same
    /// error and returns it (the caller handles it as any failed compaction).
    pub(crate) fn manual_step(&self, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        if !Self::manual_pending(st) {
            return Ok(false);
        }
        match self.manual_progress(st) {
            Ok(true) => Ok(true),
            Ok(false) => {
                if let Some(m) = st.manual.as_mut() {
                    m.result = Some(Ok(()));
                }
                self.bg_cv.notify_all();
                Ok(false)
            }
            Err(e) => {
                if let Some(m) = st.manual.as_mut() {
                    m.result = Some(Err(e.duplicate()));
                }
                self.bg_cv.notify_all();
                Err(e)
            }
        }
    }

    /// One unit of work of the pending request; `Ok(false)` when it has nothing left. The
    /// level structure decides ([`super::levels::LevelDesign::manual_step`]).
    fn manual_progress(&self, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        self.levels.manual_step(self, st)
    }

    /// The leveled structures' manual step: level 0 is drained first (see the module
    /// documentation), then the range is pushed down the levels.
    pub(super) fn manual_leveled_step(&self, st: &mut MutexGuard<'_, State>) -> Result<bool> {
        let version = st.versions.current();
        let Some(m) = st.manual.as_ref() else {
            return Ok(false);
        };
        let (level, target) = (m.level, m.target);
        if level == 0 {
            if self.levels.drain_l0_step(self, st)? {
                return Ok(true);
            }
            let deepest = picker::deepest_level(&version, &self.picker_config());
            if let Some(m) = st.manual.as_mut() {
                m.level = 1;
                m.target = deepest;
            }
            return Ok(true);
        }
        let Some(m) = st.manual.as_ref() else {
            return Ok(false);
        };
        if level >= target {
            // With a compaction filter or a TTL, the last level's tables are rewritten in
            // place once so that the filter sees them (RocksDB's kIfHaveCompactionFilter).
            let filtering = self.keyspaces().any_filtering();
            // Likewise when a range tombstone overlaps the range: the last level's covered
            // data goes only by a rewrite (or by dropping whole tables, `range_del_cleanup`).
            let range_dels = version.range_dels().tombstones().iter().any(|t| {
                m.begin.as_deref().is_none_or(|b| b < t.end.as_slice())
                    && m.end.as_deref().is_none_or(|e| t.start.as_slice() <= e)
            });
            if !(filtering || range_dels) || m.rewritten {
                return Ok(false);
            }
            let plan = picker::pick_rewrite(&version, target, m.begin.as_deref(), m.end.as_deref());
            if let Some(m) = st.manual.as_mut() {
                m.rewritten = true;
            }
            if let Some(plan) = plan {
                self.run_plan(st, plan)?;
            }
            return Ok(true);
        }
        let plan = picker::pick_manual(&version, level, m.begin.as_deref(), m.end.as_deref());
        match plan {
            Some(plan) => self.run_plan(st, plan)?,
            None => {
                if let Some(m) = st.manual.as_mut() {
                    m.level += 1;
                }
            }
        }
        Ok(true)
    }

    /// Runs `plan` on the current version without the state lock (a compaction job).
    pub(super) fn run_plan(&self, st: &mut MutexGuard<'_, State>, plan: Plan) -> Result<()> {
        let version = st.versions.current();
        let smallest_snapshot = self.smallest_snapshot(st);
        self.run_job(st, super::jobs::JobFlag::Compacting, || {
            self.run_compaction(&version, plan, smallest_snapshot)
        })
    }
}
