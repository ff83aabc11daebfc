//! The atomics and the mutex of the engine's lock-free parts, as the loom model tests see them.
//!
//! In every ordinary build these are std's atomics and [`lock_order::Mutex`]; in a build with
//! `--cfg loom` (`scripts/test-loom`) they are loom's, so the model tests (`loom_*`, see
//! docs/reliability.md, "T10") run the real code of the persistent skiplist
//! (`memtable::pskiplist`), the memtable filter (`memtable::filter`) and the publication of
//! the visible sequence number (`engine::visible_seq`) under every interleaving and every
//! load result the C11 memory model allows. A lock-free part imports its atomics from here,
//! never from `std::sync::atomic`, or the models stop seeing it.
//!
//! [`lock_order::Mutex`]: crate::lock_order::Mutex

/// `AtomicU64` and `Ordering`: std's, or loom's under `--cfg loom`.
pub(crate) mod atomic {
    #[cfg(loom)]
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
    #[cfg(not(loom))]
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
}

#[cfg(not(loom))]
pub(crate) use crate::lock_order::Mutex;

/// A loom mutex with [`lock_order::Mutex`](crate::lock_order::Mutex)'s interface (the rank is
/// not checked: a model takes one lock at a time).
#[cfg(loom)]
#[derive(Debug)]
pub(crate) struct Mutex<T>(loom::sync::Mutex<T>);

#[cfg(loom)]
impl<T> Mutex<T> {
    /// A mutex holding `value` (`_rank` as [`lock_order::Mutex::new`] takes it).
    ///
    /// [`lock_order::Mutex::new`]: crate::lock_order::Mutex::new
    pub(crate) fn new(_rank: crate::lock_order::Rank, value: T) -> Mutex<T> {
        Mutex(loom::sync::Mutex::new(value))
    }

    /// Takes the lock.
    pub(crate) fn lock(&self) -> loom::sync::MutexGuard<'_, T> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Runs `f` under loom for every interleaving and load result within the preemption bound:
/// `LOOM_MAX_PREEMPTIONS` if set, else `preemptions` (each model picks the bound that keeps
/// it well under a minute; the models' doc comments say how long they take).
#[cfg(all(test, loom))]
pub(crate) fn model(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(preemptions);
    }
    // A search of the persistent skiplist is a few dozen atomic loads; loom's default (1,000
    // branches per execution) is for smaller models.
    b.max_branches = 100_000;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = std::sync::Arc::clone(&runs);
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f();
    });
    // Shown with `--nocapture`: how much a model explores.
    println!(
        "loom: {} executions at a bound of {:?} preemptions",
        runs.load(std::sync::atomic::Ordering::Relaxed),
        b.preemption_bound
    );
}
