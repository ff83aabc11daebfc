//! What a background job holds in `State` while it runs without the state lock, held by
//! guards so that no path out of the job (an early `?`, a failed install, a panicking worker
//! thread) can leave it behind:
//!
//! - [`ReservedOutputs`]: the output file numbers the job reserved in
//!   `State::pending_outputs` (obsolete-file deletion spares them while the job writes them).
//!   The install path releases them under the state lock it already holds
//!   ([`ReservedOutputs::release`]); on any other path the guard's drop takes the state lock
//!   and releases them, and the next pass of obsolete-file deletion removes the files.
//! - [`DbInner::run_job`]: sets a job flag (`State::flushing`, `State::compacting`), runs
//!   the job with the state lock released, and clears the flag when the lock is taken back,
//!   also when the job panics.
//!
//! A `ReservedOutputs` takes the state lock when dropped unreleased, so it must never be
//! dropped while its thread holds `state`: create it in the job's unlocked part and declare
//! it before any state guard of the same scope (locals drop in reverse order), never inside
//! a scope that holds `state`.

use crate::lock_order::MutexGuard;

use super::{DbInner, State};
use crate::layout::FileNum;

/// Output file numbers one job reserved in `State::pending_outputs` (see the module doc).
#[must_use = "dropping the guard releases the reserved numbers"]
pub(crate) struct ReservedOutputs<'a> {
    db: &'a DbInner,
    numbers: Vec<u64>,
}

impl<'a> ReservedOutputs<'a> {
    /// No numbers reserved yet.
    pub(crate) fn new(db: &'a DbInner) -> Self {
        ReservedOutputs {
            db,
            numbers: Vec::new(),
        }
    }

    /// A new file number, protected from obsolete-file deletion until released. Takes the
    /// state lock: never called with it held.
    pub(crate) fn reserve(&mut self) -> FileNum {
        let mut st = self.db.state.lock();
        let n = st.versions.new_file_number();
        st.pending_outputs.insert(n.0);
        self.numbers.push(n.0);
        n
    }

    /// The numbers reserved and not yet released.
    #[cfg(any(test, feature = "testing"))]
    pub(crate) fn numbers(&self) -> &[u64] {
        &self.numbers
    }

    /// Releases every number reserved so far, under the state lock the caller holds: once
    /// the job's edit is installed (its files are in the version now), or once the install
    /// failed (they are orphans now; a failed manifest append keeps them in
    /// `State::unsettled` meanwhile). Numbers reserved later are released by the next call
    /// or by the drop.
    pub(crate) fn release(&mut self, st: &mut State) {
        for n in self.numbers.drain(..) {
            st.pending_outputs.remove(&n);
        }
    }
}

impl Drop for ReservedOutputs<'_> {
    /// Releases what the job did not (it failed): its files become orphans for obsolete-file
    /// deletion. Takes the state lock (see the module doc).
    fn drop(&mut self) {
        if self.numbers.is_empty() {
            return;
        }
        let mut st = self.db.state.lock();
        self.release(&mut st);
    }
}

/// A flag of `State` that says a job is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobFlag {
    /// `State::flushing`.
    Flushing,
    /// `State::compacting`.
    Compacting,
}

impl JobFlag {
    fn of(self, st: &mut State) -> &mut bool {
        match self {
            JobFlag::Flushing => &mut st.flushing,
            JobFlag::Compacting => &mut st.compacting,
        }
    }
}

/// Clears its flag when dropped, with the state lock held (see [`DbInner::run_job`]).
struct Running<'g, 's> {
    st: &'g mut MutexGuard<'s, State>,
    flag: JobFlag,
}

impl Drop for Running<'_, '_> {
    fn drop(&mut self) {
        *self.flag.of(self.st) = false;
    }
}

impl DbInner {
    /// Runs `job` with the state lock released and `flag` set in `State` meanwhile; the flag
    /// is cleared under the lock when `job` returns or panics (`MutexGuard::unlocked` takes
    /// the lock back while unwinding, before the guard clearing the flag drops).
    pub(crate) fn run_job<R>(
        &self,
        st: &mut MutexGuard<'_, State>,
        flag: JobFlag,
        job: impl FnOnce() -> R,
    ) -> R {
        *flag.of(st) = true;
        let running = Running { st, flag };
        MutexGuard::unlocked(&mut *running.st, job)
    }

    /// The tail of a job that wrote outputs (a flush, a compaction, a column compaction):
    /// installs `edit` (see [`DbInner::install_edit`]), then releases the job's reserved
    /// outputs under the same state lock whether the install succeeded (its files are in the
    /// version now) or failed (they are orphans now), and returns the install's result.
    pub(crate) fn install_job_edit(
        &self,
        manifest: MutexGuard<'_, crate::version::manifest::ManifestWriter>,
        st: &mut MutexGuard<'_, State>,
        edit: &mut crate::version::edit::VersionEdit,
        reserved: &mut ReservedOutputs<'_>,
    ) -> crate::error::Result<()> {
        let installed = self.install_edit(manifest, st, edit);
        reserved.release(st);
        installed
    }
}

#[cfg(test)]
mod tests;
