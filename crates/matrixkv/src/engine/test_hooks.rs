//! Points inside operations where a test runs code of its own, fails on purpose, or pauses,
//! to force an interleaving that threads would hit only by chance, or a failure no tier fault
//! can reach (the crate's unit tests and the `testing` feature; absent from other builds).
//! The one mechanism for both: hooks belong to one database instance.
//!
//! Each hook is one-shot: the next operation to pass the point takes it and runs it, with no
//! engine lock held unless its doc says otherwise, so the hook may itself call into the
//! database (its own calls find the point empty). Taking it clears it, which also drops
//! anything the closure holds.

use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};
use crate::lock_order::{Mutex, MutexGuard, Rank};

/// A hook's body.
pub(crate) type Hook = Box<dyn FnOnce() + Send>;

/// Where a column compaction that failed after its merge records its outputs.
pub(crate) type Recorded = Arc<parking_lot::Mutex<Option<Vec<u64>>>>;

/// A pause the compaction thread takes, once, without the state lock after a step that found
/// nothing to do: `entered` is signalled when it starts, and it ends once the test sends on
/// `release` (or drops it).
#[cfg(test)]
pub(crate) struct IdleWindow {
    pub entered: std::sync::mpsc::Receiver<()>,
    pub release: std::sync::mpsc::SyncSender<()>,
}

/// The compaction thread's ends of an [`IdleWindow`].
type WindowEnds = (
    std::sync::mpsc::SyncSender<()>,
    std::sync::mpsc::Receiver<()>,
);

/// The hooks of one database instance.
pub(crate) struct TestHooks {
    /// Between a read taking its read view and its sequence number (`DbInner::read_point`).
    pub after_read_view: Mutex<Option<Hook>>,
    /// The next column compaction that wrote outputs fails after its merge (as a failed row
    /// read or a panicking gathering thread would), recording its outputs here.
    fail_after_column_merge: Mutex<Option<Recorded>>,
    /// The next compaction step that finds no work pauses before the thread's wait.
    idle_window: Mutex<Option<WindowEnds>>,
}

impl Default for TestHooks {
    fn default() -> TestHooks {
        TestHooks {
            after_read_view: Mutex::new(Rank::LeafTestHook, None),
            fail_after_column_merge: Mutex::new(Rank::LeafTestHook, None),
            idle_window: Mutex::new(Rank::LeafTestHook, None),
        }
    }
}

impl TestHooks {
    /// Runs (and clears) the hook set at `slot`, if any.
    pub(crate) fn run(slot: &Mutex<Option<Hook>>) {
        let hook = slot.lock().take();
        if let Some(f) = hook {
            f();
        }
    }

    /// Makes the next column compaction that writes outputs fail after its merge; its
    /// outputs' numbers are recorded in the returned cell.
    #[cfg(test)]
    pub(crate) fn fail_next_column_after_merge(&self) -> Recorded {
        let cell = Recorded::default();
        *self.fail_after_column_merge.lock() = Some(Arc::clone(&cell));
        cell
    }

    /// Widens, once, the window between a compaction step that found no work and the
    /// compaction thread's wait (the window a step's own unlocked I/O or lock hand-off
    /// leaves).
    #[cfg(test)]
    pub(crate) fn open_idle_window(&self) -> IdleWindow {
        let (entered_tx, entered) = std::sync::mpsc::sync_channel(1);
        let (release, release_rx) = std::sync::mpsc::sync_channel(1);
        *self.idle_window.lock() = Some((entered_tx, release_rx));
        IdleWindow { entered, release }
    }
}

/// Called by a column compaction after its merge, with the outputs it reserved.
pub(crate) fn after_column_merge(db: &DbInner, outputs: &[u64]) -> Result<()> {
    if outputs.is_empty() {
        return Ok(());
    }
    let Some(cell) = db.test_hooks.fail_after_column_merge.lock().take() else {
        return Ok(());
    };
    *cell.lock() = Some(outputs.to_vec());
    Err(Error::invalid("injected failure after a column merge"))
}

/// Called by the compaction thread, holding `state`, after a step that found no work: runs
/// the idle window, if one is open, with `state` released.
pub(crate) fn idle_window(db: &DbInner, st: &mut MutexGuard<'_, super::State>) {
    let Some(ends) = db.test_hooks.idle_window.lock().take() else {
        return;
    };
    MutexGuard::unlocked(st, || {
        let _ = ends.0.send(());
        let _ = ends.1.recv();
    });
}
