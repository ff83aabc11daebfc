//! The background threads a writable open starts: flush and compaction.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::super::DbInner;
use super::super::bg_error::Job;
use crate::error::{Error, Result};

/// Starts the flush thread and the compaction thread.
pub(super) fn start_background(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let spawn = |name: &str, f: fn(&DbInner)| -> Result<JoinHandle<()>> {
        let db = Arc::clone(inner);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let nice = db.opts.background_nice;
                if nice > 0
                    && let Err(e) = matrixkv_pmem::set_current_thread_nice(nice)
                {
                    log::warn!("matrixkv: cannot lower the priority of a background thread: {e}");
                }
                f(&db)
            })
            .map_err(|e| Error::Io {
                op: crate::error::IoOp::Open,
                path: None,
                source: e,
            })
    };
    Ok(vec![
        spawn("matrixkv:flush", flush_loop)?,
        spawn("matrixkv:compact", compaction_loop)?,
    ])
}

/// The flush thread: flushes immutable memtables oldest first until shutdown. A flush that
/// fails for lack of space is retried after a growing pause (see `bg_error`); any other
/// failure poisons the database.
fn flush_loop(db: &DbInner) {
    let mut st = db.state.lock();
    // Free WAL regions are prepared once, when the thread is first idle after the open; later,
    // recycling keeps the pool filled (preparing after every flush would race with switches
    // that took a region and have not yet made their memtable immutable, creating regions
    // that recycling then has no room for).
    let mut prepare = true;
    loop {
        if st.poison.is_none() && !st.imm.is_empty() {
            // Memtables left at shutdown are flushed first, unless flushes are failing.
            if let Some(pause) = st.flush_retry.remaining(Instant::now()) {
                if st.shutting_down {
                    break;
                }
                db.work_cv.wait_for(&mut st, pause);
                continue;
            }
            match db.flush_one(&mut st) {
                Ok(()) => db.background_succeeded(&mut st, Job::Flush),
                // Abandoned at shutdown while waiting for container pages.
                Err(Error::Closed) => break,
                Err(e) => db.background_failed(&mut st, Job::Flush, &e),
            }
            db.bg_cv.notify_all();
            db.work_cv.notify_all();
            drop(st);
            db.delete_obsolete_files(false);
            st = db.state.lock();
            continue;
        }
        if st.shutting_down {
            break;
        }
        if prepare && st.poison.is_none() {
            prepare = false;
            drop(st);
            db.prepare_free_wal_regions();
            st = db.state.lock();
            continue;
        }
        db.work_cv.wait(&mut st);
    }
}

/// The compaction thread: runs the picker's plans until there is nothing to do, then waits.
/// A failure other than corruption (for example a full disk) is counted and retried after a
/// growing pause (see `bg_error`); writes continue until L0 fills up. Corruption stops writes.
fn compaction_loop(db: &DbInner) {
    let mut st = db.state.lock();
    loop {
        if st.shutting_down {
            break;
        }
        if let Some(pause) = st.compaction_retry.remaining(Instant::now()) {
            db.work_cv.wait_for(&mut st, pause);
            continue;
        }
        if (db.opts.compaction_enabled || DbInner::manual_pending(&st)) && st.poison.is_none() {
            let generation = st.work_gen;
            let step = db.compact_one(&mut st);
            // The job dropped the version it read: pages it released can return to the pool
            // now (writers are throttled by container occupancy until they do).
            db.release_deferred_pages(&mut st);
            match step {
                Ok(true) => db.background_succeeded(&mut st, Job::Compaction),
                Ok(false) => {
                    db.bg_cv.notify_all();
                    #[cfg(any(test, feature = "testing"))]
                    super::super::test_hooks::idle_window(db, &mut st);
                    // The step (and the release of deferred pages) may have released the lock:
                    // new work, a shutdown or a manual compaction signalled meanwhile found no
                    // thread waiting, so the predicate is checked again before the wait.
                    if st.work_gen == generation
                        && !st.shutting_down
                        && !DbInner::manual_pending(&st)
                    {
                        db.work_cv.wait(&mut st);
                    }
                    continue;
                }
                Err(e) => db.background_failed(&mut st, Job::Compaction, &e),
            }
            db.bg_cv.notify_all();
            drop(st);
            db.delete_obsolete_files(false);
            st = db.state.lock();
            continue;
        }
        db.bg_cv.notify_all();
        db.work_cv.wait(&mut st);
    }
}
