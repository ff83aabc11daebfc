//! Background errors: what the flush and compaction threads do when their I/O fails, and what
//! writers waiting for them see (docs/reliability.md C4; decision 0007 in docs/decisions/).
//!
//! - **No space** (ENOSPC/EDQUOT on either tier, or a matrix flush needing container pages
//!   nothing can free: `container_stuck` in `matrix.rs`) is *soft*: the job's partial outputs
//!   become orphans, the job is retried after a pause that doubles from [`Retry::FIRST`] up to
//!   [`Retry::MAX`], and the database keeps serving reads and the writes that need no
//!   background work. A writer that must wait for background work while the condition lasts
//!   gives up with [`Error::NoSpace`] once it has lasted `Options::no_space_timeout`. The first
//!   job that succeeds clears the condition: writes resume without a reopen (RocksDB's
//!   auto-recovery from a no-space background error is the model).
//! - **Corruption**, a full global index region ([`Error::IndexFull`]: no retry can make room)
//!   and any other failure of a flush poison the database (writes stop, reads continue; a
//!   reopen recovers). Other compaction failures are retried like no space.
//! - **A failed manifest append** leaves the manifest's tail unknown: the record may be on disk
//!   or not. Nothing more is appended to that file; the next install first *rolls* to a new
//!   manifest (a snapshot of the current version, then CURRENT). Until a roll succeeds, a crash
//!   could replay the failed edit, so the files and container pages it names stay reserved
//!   ([`Unsettled`]): obsolete-file deletion skips them and their pages are not reused.
//!
//! Called by the background loops (`recovery.rs`), `install_edit` (`flush.rs`), the write path
//! and `Db::flush`/`Db::wait_for_compactions`. Everything here runs under the state lock except
//! the manifest roll's I/O.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock_order::MutexGuard;

use super::{DbInner, State};
use crate::error::{Error, Result, TierKind};
use crate::stats::Counters;
use crate::version::edit::VersionEdit;
use crate::version::manifest::{self, ManifestWriter};

/// A background job failed for lack of space and has not succeeded since.
#[derive(Debug, Clone)]
pub(crate) struct NoSpace {
    /// The full tier.
    pub tier: TierKind,
    /// Its directory.
    pub dir: PathBuf,
    /// The first failure's message.
    pub cause: String,
    /// When the condition began (the first failure since the last success).
    pub since: Instant,
}

impl NoSpace {
    /// The error a writer that gave up waiting receives.
    pub fn to_error(&self) -> Error {
        Error::NoSpace {
            tier: self.tier,
            dir: self.dir.clone(),
            cause: self.cause.clone(),
        }
    }
}

/// The pause before a failed background job runs again.
#[derive(Debug, Clone, Default)]
pub(crate) struct Retry {
    delay: Duration,
    at: Option<Instant>,
}

impl Retry {
    /// The pause after the first failure.
    pub const FIRST: Duration = Duration::from_millis(100);
    /// The longest pause: also the longest time writes wait to resume once space is freed.
    pub const MAX: Duration = Duration::from_secs(2);

    /// Records a failure at `now`: the next attempt waits twice as long as the last one.
    pub fn failed(&mut self, now: Instant) {
        self.delay = if self.delay.is_zero() {
            Self::FIRST
        } else {
            (self.delay * 2).min(Self::MAX)
        };
        self.at = Some(now + self.delay);
    }

    /// Records a success: the next failure starts again at [`Retry::FIRST`].
    pub fn succeeded(&mut self) {
        *self = Retry::default();
    }

    /// How long to wait before the next attempt (`None`: run now).
    pub fn remaining(&self, now: Instant) -> Option<Duration> {
        self.at
            .and_then(|at| at.checked_duration_since(now))
            .filter(|d| !d.is_zero())
    }
}

/// What a manifest edit whose append failed names, kept until a new manifest replaces the
/// failed one (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct Unsettled {
    /// A roll is due: no edit may be installed before it succeeds.
    pub roll_due: bool,
    /// Table and blob file numbers the failed edits added.
    pub files: BTreeSet<u64>,
    /// Manifest files a failed roll created (CURRENT may or may not name them).
    pub manifests: BTreeSet<u64>,
    /// Container pages of rows the failed edits added.
    pub pages: Vec<u32>,
}

/// Which background loop a failure belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Job {
    Flush,
    Compaction,
}

impl DbInner {
    /// The tier and directory an error's path lies in (the slow tier when it names no path).
    fn tier_of(&self, err: &Error) -> (TierKind, PathBuf) {
        let fast = self.tiers.fast.dir();
        match err {
            Error::NoSpace { tier, dir, .. } => (*tier, dir.clone()),
            Error::Io { path: Some(p), .. } if p.starts_with(fast) => {
                (TierKind::Fast, fast.to_owned())
            }
            _ => (TierKind::Slow, self.opts.slow_dir.clone()),
        }
    }

    /// The error for a write that needs space on the fast tier and got `err` (ENOSPC).
    pub(crate) fn no_space_error(&self, err: &Error) -> Error {
        let (tier, dir) = self.tier_of(err);
        Error::NoSpace {
            tier,
            dir,
            cause: err.to_string(),
        }
    }

    /// Handles a failed background job: no space and transient compaction failures are
    /// retried after a pause; everything else poisons the database.
    pub(crate) fn background_failed(&self, st: &mut State, job: Job, err: &Error) {
        Counters::add(&self.counters.background_errors, 1);
        let now = Instant::now();
        let retry = match job {
            Job::Flush => &mut st.flush_retry,
            Job::Compaction => &mut st.compaction_retry,
        };
        if err.is_no_space() {
            retry.failed(now);
            Counters::add(&self.counters.no_space_errors, 1);
            if st.no_space.is_none() {
                let (tier, dir) = self.tier_of(err);
                log::warn!(
                    "matrixkv: background {job:?} failed for lack of space on the {tier} tier; \
                     retrying with a growing pause: {err}"
                );
                st.no_space = Some(NoSpace {
                    tier,
                    dir,
                    cause: err.to_string(),
                    since: now,
                });
            }
        } else if job == Job::Compaction
            && !err.is_corruption()
            && !matches!(err, Error::IndexFull { .. })
        {
            retry.failed(now);
            log::warn!("matrixkv: compaction failed, retrying: {err}");
        } else {
            self.poison(st, err);
        }
        self.bg_cv.notify_all();
    }

    /// Handles a background job that made progress: a no-space condition is over.
    pub(crate) fn background_succeeded(&self, st: &mut State, job: Job) {
        match job {
            Job::Flush => st.flush_retry.succeeded(),
            Job::Compaction => st.compaction_retry.succeeded(),
        }
        if let Some(ns) = st.no_space.take() {
            log::info!(
                "matrixkv: space is available again on the {} tier after {:?}",
                ns.tier,
                ns.since.elapsed()
            );
        }
    }

    /// One wait of a writer (or `flush`) for background work: returns when woken or when the
    /// no-space deadline passes; `Err(NoSpace)` once background work has failed for lack of
    /// space for `no_space_timeout`, and the poison error once the database is poisoned.
    pub(crate) fn wait_for_background(&self, st: &mut MutexGuard<'_, State>) -> Result<()> {
        super::check_poison(st)?;
        // No background thread is left to do the work (or to signal).
        if st.shutting_down {
            return Err(crate::error::Error::Closed);
        }
        let deadline = self.no_space_deadline(st)?;
        self.work_cv.notify_all();
        match deadline {
            Some(d) => {
                self.bg_cv.wait_until(st, d);
            }
            None => self.bg_cv.wait(st),
        }
        Ok(())
    }

    /// When a wait for background work must give up: `None` while no job is failing for lack
    /// of space, `Err(NoSpace)` once the condition has lasted `no_space_timeout`.
    pub(crate) fn no_space_deadline(&self, st: &State) -> Result<Option<Instant>> {
        let Some(ns) = &st.no_space else {
            return Ok(None);
        };
        let deadline = ns.since + self.opts.no_space_timeout;
        if Instant::now() >= deadline {
            Counters::add(&self.counters.no_space_rejections, 1);
            return Err(ns.to_error());
        }
        Ok(Some(deadline))
    }

    /// Returns the pages of a row whose install failed to the pool, or keeps them reserved
    /// while a failed manifest append may still name them.
    pub(crate) fn discard_row_pages(&self, st: &mut State, pages: &[u32]) {
        if st.unsettled.roll_due {
            st.unsettled.pages.extend_from_slice(pages);
        } else if let Some(pool) = st.pool.as_mut() {
            pool.free(pages);
        }
    }

    /// After the manifest append of `edit` failed: tries to replace the manifest at once; if
    /// that fails too, reserves what the edit names until a later roll succeeds.
    pub(crate) fn manifest_append_failed(
        &self,
        manifest: &mut ManifestWriter,
        st: &mut MutexGuard<'_, State>,
        edit: &VersionEdit,
    ) {
        st.unsettled.roll_due = true;
        st.unsettled
            .files
            .extend(edit.new_files.iter().map(|(_, f)| f.number.0));
        st.unsettled
            .files
            .extend(edit.new_blobs.iter().map(|b| b.number.0));
        if let Err(e) = self.roll_manifest(manifest, st) {
            log::warn!("matrixkv: cannot replace the manifest after a failed write yet: {e}");
        }
    }

    /// Replaces the manifest by a new one holding a snapshot of the current version, and
    /// points CURRENT at it. The caller holds the manifest lock (so the version cannot change
    /// while the state lock is released for the I/O). On success, whatever failed edits named
    /// is released: those edits are now definitely not part of the database.
    pub(crate) fn roll_manifest(
        &self,
        manifest: &mut ManifestWriter,
        st: &mut MutexGuard<'_, State>,
    ) -> Result<()> {
        let number = st.versions.new_file_number();
        let first = st.versions.snapshot_edit();
        let fs = Arc::clone(&self.tiers.slow_fs);
        let dir = self.opts.slow_dir.clone();
        st.unsettled.manifests.insert(number.0);
        let rolled = MutexGuard::unlocked(st, || -> Result<ManifestWriter> {
            let w = ManifestWriter::create(fs.as_ref(), &dir, number, &first)?;
            manifest::set_current(fs.as_ref(), &dir, number)?;
            Ok(w)
        });
        *manifest = rolled?;
        st.versions.set_manifest_number(number);
        let settled = std::mem::take(&mut st.unsettled);
        if let Some(pool) = st.pool.as_mut() {
            pool.free(&settled.pages);
        }
        Counters::add(&self.counters.manifest_rolls, 1);
        log::info!("matrixkv: replaced the manifest after a failed write");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_pause_doubles_up_to_the_maximum_and_resets_on_success() {
        let t0 = Instant::now();
        let mut r = Retry::default();
        assert_eq!(r.remaining(t0), None);
        r.failed(t0);
        assert_eq!(r.remaining(t0), Some(Retry::FIRST));
        r.failed(t0);
        assert_eq!(r.remaining(t0), Some(Retry::FIRST * 2));
        for _ in 0..20 {
            r.failed(t0);
        }
        assert_eq!(r.remaining(t0), Some(Retry::MAX));
        assert_eq!(r.remaining(t0 + Retry::MAX), None);
        r.succeeded();
        assert_eq!(r.remaining(t0), None);
        r.failed(t0);
        assert_eq!(r.remaining(t0), Some(Retry::FIRST));
    }
}
