//! How long threads wait for each rank of lock and how long they hold it (`lock-stats` builds:
//! the stress harness prints them, so the cost of a lock held across I/O, a sleep or a spin
//! is a measurement, not a guess). Process-wide; the engine's ranked locks
//! ([`crate::lock_order`]) report every acquisition and release here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::lock_order::Rank;

/// More slots than ranks.
const SLOTS: usize = 64;

struct Slot {
    acquisitions: AtomicU64,
    wait_nanos: AtomicU64,
    max_wait_nanos: AtomicU64,
    hold_nanos: AtomicU64,
    max_hold_nanos: AtomicU64,
    /// Holds of a millisecond or more.
    long_holds: AtomicU64,
}

#[allow(
    clippy::declare_interior_mutable_const,
    reason = "the initialiser of SLOTS"
)]
const EMPTY: Slot = Slot {
    acquisitions: AtomicU64::new(0),
    wait_nanos: AtomicU64::new(0),
    max_wait_nanos: AtomicU64::new(0),
    hold_nanos: AtomicU64::new(0),
    max_hold_nanos: AtomicU64::new(0),
    long_holds: AtomicU64::new(0),
};

static STATS: [Slot; SLOTS] = [EMPTY; SLOTS];
static NAMES: std::sync::Mutex<[Option<Rank>; SLOTS]> = std::sync::Mutex::new([None; SLOTS]);

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

fn slot(rank: Rank) -> &'static Slot {
    let i = (rank as usize).min(SLOTS - 1);
    &STATS[i]
}

/// A thread waited `d` for a lock of `rank` (and then took it).
pub(crate) fn waited(rank: Rank, d: Duration) {
    let s = slot(rank);
    if s.acquisitions.fetch_add(1, Ordering::Relaxed) == 0 {
        let mut names = NAMES
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        names[(rank as usize).min(SLOTS - 1)] = Some(rank);
    }
    let n = nanos(d);
    s.wait_nanos.fetch_add(n, Ordering::Relaxed);
    s.max_wait_nanos.fetch_max(n, Ordering::Relaxed);
}

/// A thread held a lock of `rank` for `d`.
pub(crate) fn held(rank: Rank, d: Duration) {
    let s = slot(rank);
    let n = nanos(d);
    s.hold_nanos.fetch_add(n, Ordering::Relaxed);
    s.max_hold_nanos.fetch_max(n, Ordering::Relaxed);
    if n >= 1_000_000 {
        s.long_holds.fetch_add(1, Ordering::Relaxed);
    }
}

/// One rank's figures since the process started (or [`reset`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockStat {
    /// The rank (`lock_order::Rank`'s variant name).
    pub rank: String,
    /// Times a lock of the rank was taken.
    pub acquisitions: u64,
    /// Time spent waiting for it, in total.
    pub wait: Duration,
    /// The longest wait.
    pub max_wait: Duration,
    /// Time it was held, in total (condition-variable waits excluded).
    pub hold: Duration,
    /// The longest hold.
    pub max_hold: Duration,
    /// Holds of a millisecond or more.
    pub long_holds: u64,
}

/// Every rank taken so far, in rank order.
pub fn snapshot() -> Vec<LockStat> {
    let names = *NAMES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    names
        .iter()
        .zip(STATS.iter())
        .filter_map(|(name, s)| {
            let rank = (*name)?;
            let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
            Some(LockStat {
                rank: format!("{rank:?}"),
                acquisitions: get(&s.acquisitions),
                wait: Duration::from_nanos(get(&s.wait_nanos)),
                max_wait: Duration::from_nanos(get(&s.max_wait_nanos)),
                hold: Duration::from_nanos(get(&s.hold_nanos)),
                max_hold: Duration::from_nanos(get(&s.max_hold_nanos)),
                long_holds: get(&s.long_holds),
            })
        })
        .collect()
}

/// Zeroes every figure.
pub fn reset() {
    for s in &STATS {
        for a in [
            &s.acquisitions,
            &s.wait_nanos,
            &s.max_wait_nanos,
            &s.hold_nanos,
            &s.max_hold_nanos,
            &s.long_holds,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }
}

/// The figures as a table, one rank per line.
pub fn report() -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut out = format!(
        "{:<24} {:>12} {:>11} {:>10} {:>11} {:>10} {:>9}\n",
        "rank", "taken", "wait ms", "max wait", "hold ms", "max hold", "holds>1ms"
    );
    for s in snapshot() {
        out.push_str(&format!(
            "{:<24} {:>12} {:>11.1} {:>10.2} {:>11.1} {:>10.2} {:>9}\n",
            s.rank,
            s.acquisitions,
            ms(s.wait),
            ms(s.max_wait),
            ms(s.hold),
            ms(s.max_hold),
            s.long_holds
        ));
    }
    out
}
