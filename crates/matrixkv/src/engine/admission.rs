//! Admission without the state lock: what `make_room` must know on every write, mirrored in
//! atomics the write path reads without taking the state mutex.
//!
//! Every write used to lock the state mutex in `make_room` to read three things: whether the
//! database is poisoned, how many L0 tables there are and how full the matrix container is.
//! The background threads take that mutex too, many times per flush and column. On a host with
//! fewer cores than busy threads, one of them is sometimes preempted while it holds the mutex,
//! and the writer then waits for the scheduler to run the holder again: 4–6 ms on this
//! 2-core machine. In the open-loop benchmark (B5, docs/results/README.md, 2026-11-25) the
//! gauges cut the calls served in 1 ms or more from 70 to 41; the rest wait for a CPU, not a
//! lock.
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

    /// True when, as last published, a write needs neither to be refused nor to be paced:
    /// not poisoned, and with compaction on, L0 below the slowdown trigger and the container
    /// below its slowdown ratio.
    pub(crate) fn admits_freely(&self, opts: &Options) -> bool {
        if self.poisoned.load(Ordering::Acquire) {
            return false;
        }
        let l0 = self.l0_files.load(Ordering::Relaxed);
        if l0 == usize::MAX {
            return false;
        }
        if !opts.compaction_enabled {
            return true;
        }
        if l0 >= opts.l0_slowdown_writes_trigger {
            return false;
        }
        let total = self.total_pages.load(Ordering::Relaxed);
        let used = self.used_pages.load(Ordering::Relaxed);
        total == 0 || (used as f64 / total as f64) < opts.container_slowdown_ratio
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unpublished_gauges_send_writes_through_the_lock() {
        let g = Gauges::unpublished();
        assert!(!g.admits_freely(&Options::new("/db")));
    }

    #[test]
    fn poisoned_gauges_never_admit_freely() {
        let g = Gauges::unpublished();
        g.l0_files.store(0, Ordering::Relaxed);
        assert!(g.admits_freely(&Options::new("/db")));
        g.set_poisoned();
        assert!(!g.admits_freely(&Options::new("/db")));
    }

    #[test]
    fn a_container_past_its_slowdown_ratio_or_a_deep_l0_takes_the_lock() {
        let opts = Options::new("/db");
        let g = Gauges::unpublished();
        g.l0_files.store(0, Ordering::Relaxed);
        g.total_pages.store(100, Ordering::Relaxed);
        g.used_pages.store(69, Ordering::Relaxed);
        assert!(g.admits_freely(&opts), "below 0.7 of the container");
        g.used_pages.store(70, Ordering::Relaxed);
        assert!(!g.admits_freely(&opts), "at the slowdown ratio");
        g.used_pages.store(0, Ordering::Relaxed);
        g.l0_files
            .store(opts.l0_slowdown_writes_trigger, Ordering::Relaxed);
        assert!(!g.admits_freely(&opts), "L0 at the slowdown trigger");
        let off = Options {
            compaction_enabled: false,
            ..Options::new("/db")
        };
        assert!(g.admits_freely(&off), "no pacing without compaction");
    }
}
