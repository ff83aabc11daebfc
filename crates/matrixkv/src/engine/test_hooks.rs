//! Points inside operations where a test runs code of its own, to force an interleaving that
//! threads would hit only by chance (the `testing` feature; absent from other builds).
//!
//! Each hook is one-shot: the next operation to pass the point takes it and runs it, with no
//! engine lock held, so the hook may itself call into the database (its own calls find the
//! point empty). Taking it clears it, which also drops anything the closure holds.

use crate::lock_order::{Mutex, Rank};

/// A hook's body.
pub(crate) type Hook = Box<dyn FnOnce() + Send>;

/// The hooks of one database instance.
pub(crate) struct TestHooks {
    /// Between a read taking its read view and its sequence number (`DbInner::read_point`).
    pub after_read_view: Mutex<Option<Hook>>,
}

impl Default for TestHooks {
    fn default() -> TestHooks {
        TestHooks {
            after_read_view: Mutex::new(Rank::LeafTestHook, None),
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
}
