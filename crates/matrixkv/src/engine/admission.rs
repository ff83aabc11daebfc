//! Admission without the state lock: what `make_room` must know on every write, mirrored in
//! atomics the write path reads without taking the state mutex.
//!
//! Every write used to lock the state mutex in `make_room` to read three things: whether the
//! database is poisoned, how many L0 tables there are and how full the matrix container is.
//! The background threads take that mutex too, many times per flush and column. On a host with
//! fewer cores than busy threads, one of them is sometimes preempted while it holds the mutex,
//! and the writer then waits, milliseconds at a time, for the scheduler to run the holder
//! again. Reading the gauges instead keeps the writer off that mutex unless admission control
//! may act (measured in docs/decisions/0004-admission-control-and-compaction-priority.md,
//! "Evidence").
//!
//! [`Gauges`] holds copies of those three facts. They are published under the state lock
//! whenever one changes (a version install, a page-pool change, a poisoning) and by every pass
//! of `make_room`'s locked path. The writer still takes the lock whenever a gauge says it may
//! have to pace, wait or switch memtables, so admission control decides exactly as before.
//! A gauge may lag the state by the time between a change and its publication under the same
//! lock; only the poison flag needs to be exact, and it is set before `poison` returns.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use super::State;
use crate::options::Options;

/// Copies of the state `make_room` checks (see the module doc).
#[derive(Debug)]
pub(crate) struct Gauges {
    poisoned: AtomicBool,
    l0_files: AtomicUsize,
    used_pages: AtomicUsize,
    total_pages: AtomicUsize,
}

impl Gauges {
    /// Gauges that send every write through the locked path until the first
    /// [`Gauges::publish`].
    pub(crate) fn unpublished() -> Gauges {
        Gauges {
            poisoned: AtomicBool::new(false),
            l0_files: AtomicUsize::new(usize::MAX),
            used_pages: AtomicUsize::new(0),
            total_pages: AtomicUsize::new(0),
        }
    }

    /// Copies the current facts from `st` (the caller holds the state lock).
    pub(crate) fn publish(&self, st: &State) {
        self.l0_files.store(st.l0_backlog(), Ordering::Relaxed);
        let (used, total) = st
            .pool
            .as_ref()
            .map_or((0, 0), |p| (p.used_pages(), p.total_pages()));
        self.used_pages.store(used, Ordering::Relaxed);
        self.total_pages.store(total, Ordering::Relaxed);
        if st.poison.is_some() {
            self.poisoned.store(true, Ordering::Release);
        }
    }

    /// Marks the database poisoned (the caller has just recorded the cause in the state).
    pub(crate) fn set_poisoned(&self) {
        self.poisoned.store(true, Ordering::Release);
    }

    /// What the last published gauges let a write do without the state lock: go on
    /// ([`Admission::Free`]), pay a container pacing delay ([`Admission::Paced`]), or take the
    /// locked path (poisoned, unpublished, or L0 at its slowdown trigger).
    pub(crate) fn admission(&self, opts: &Options) -> Admission {
        if self.poisoned.load(Ordering::Acquire) {
            return Admission::Locked;
        }
        let l0 = self.l0_files.load(Ordering::Relaxed);
        if l0 == usize::MAX {
            return Admission::Locked;
        }
        if !opts.compaction_enabled {
            return Admission::Free;
        }
        if l0 >= opts.l0_slowdown_writes_trigger {
            return Admission::Locked;
        }
        let total = self.total_pages.load(Ordering::Relaxed);
        let used = self.used_pages.load(Ordering::Relaxed);
        container_overshoot(used, total, opts.container_slowdown_ratio)
            .map_or(Admission::Free, |overshoot| Admission::Paced { overshoot })
    }
}

/// What a write may do without the state lock (see [`Gauges::admission`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Admission {
    /// Nothing to refuse, pace or wait for.
    Free,
    /// The container is past its slowdown ratio: pace by `overshoot`, the fraction of the way
    /// from the slowdown ratio to full (0 to 1).
    Paced { overshoot: f64 },
    /// Only the locked path can decide.
    Locked,
}

/// How far `used` of `total` pages is past the slowdown ratio `soft`, as a fraction of the way
/// to full; `None` below the ratio or without a container.
pub(crate) fn container_overshoot(used: usize, total: usize, soft: f64) -> Option<f64> {
    if total == 0 {
        return None;
    }
    let occupancy = used as f64 / total as f64;
    (occupancy >= soft).then(|| ((occupancy - soft) / (1.0 - soft)).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpublished_gauges_send_writes_through_the_lock() {
        let g = Gauges::unpublished();
        assert_eq!(g.admission(&Options::new("/db")), Admission::Locked);
    }

    #[test]
    fn poisoned_gauges_never_admit_freely() {
        let g = Gauges::unpublished();
        g.l0_files.store(0, Ordering::Relaxed);
        assert_eq!(g.admission(&Options::new("/db")), Admission::Free);
        g.set_poisoned();
        assert_eq!(g.admission(&Options::new("/db")), Admission::Locked);
    }

    #[test]
    fn a_container_past_its_slowdown_ratio_paces_and_a_deep_l0_takes_the_lock() {
        let opts = Options::new("/db");
        let g = Gauges::unpublished();
        g.l0_files.store(0, Ordering::Relaxed);
        g.total_pages.store(100, Ordering::Relaxed);
        g.used_pages.store(69, Ordering::Relaxed);
        assert_eq!(
            g.admission(&opts),
            Admission::Free,
            "below 0.7 of the container"
        );
        g.used_pages.store(70, Ordering::Relaxed);
        assert_eq!(
            g.admission(&opts),
            Admission::Paced { overshoot: 0.0 },
            "at the slowdown ratio"
        );
        g.used_pages.store(85, Ordering::Relaxed);
        match g.admission(&opts) {
            Admission::Paced { overshoot } => assert!((overshoot - 0.5).abs() < 1e-9),
            other => panic!("halfway to full: {other:?}"),
        }
        g.used_pages.store(100, Ordering::Relaxed);
        assert_eq!(g.admission(&opts), Admission::Paced { overshoot: 1.0 });
        g.used_pages.store(0, Ordering::Relaxed);
        g.l0_files
            .store(opts.l0_slowdown_writes_trigger, Ordering::Relaxed);
        assert_eq!(
            g.admission(&opts),
            Admission::Locked,
            "L0 at the slowdown trigger"
        );
        let off = Options {
            compaction_enabled: false,
            ..Options::new("/db")
        };
        assert_eq!(
            g.admission(&off),
            Admission::Free,
            "no pacing without compaction"
        );
    }

    #[test]
    fn no_container_means_no_overshoot() {
        assert_eq!(container_overshoot(0, 0, 0.7), None);
        assert_eq!(container_overshoot(10, 100, 0.7), None);
        assert_eq!(container_overshoot(100, 100, 0.7), Some(1.0));
    }
}
