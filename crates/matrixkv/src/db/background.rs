//! Waiting for background work: the flush of every memtable and a manual compaction.

use std::sync::Arc;

#[cfg(doc)]
use super::Db;
use crate::engine::{self, DbInner};
use crate::error::{Error, Result};

/// Flushes every memtable of `inner` (see [`Db::flush`]).
pub(crate) fn flush_inner(inner: &Arc<DbInner>) -> Result<()> {
    {
        let mut ctx = inner.writer.lock();
        inner.make_room(&mut ctx, 0, 0, true)?;
    }
    let mut st = inner.state.lock();
    inner.work_cv.notify_all();
    while !st.imm.is_empty() {
        inner.wait_for_background(&mut st)?;
    }
    engine::check_poison(&st)
}

/// Compacts the engine keys in `[begin, end]` (see [`Db::compact_range`]).
pub(crate) fn compact_engine_range(
    inner: &Arc<DbInner>,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<()> {
    flush_inner(inner)?;
    let mut st = inner.state.lock();
    // One manual compaction at a time: wait for another caller's to be taken (its caller
    // signals `bg_cv` when it takes the result, as do a poison and the shutdown).
    while st.manual.is_some() {
        still_running(&st)?;
        inner.bg_cv.wait(&mut st);
    }
    let v = st.versions.current();
    let drain_upto = v.container().max_row();
    let l0_upto = v.files(0).iter().map(|f| f.number).max();
    st.manual = Some(engine::ManualCompaction::new(
        begin, end, drain_upto, l0_upto,
    ));
    inner.work_cv.notify_all();
    loop {
        if let Some(result) = st.manual.as_ref().and_then(|m| m.result.as_ref()) {
            let result = match result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            };
            st.manual = None;
            inner.bg_cv.notify_all();
            return result;
        }
        if let Err(e) = still_running(&st) {
            st.manual = None;
            inner.bg_cv.notify_all();
            return Err(e);
        }
        // The compaction thread signals `bg_cv` when it sets the result (`manual_step`).
        inner.bg_cv.wait(&mut st);
    }
}

/// `Err` once the database is poisoned or shutting down: a caller waiting for background work
/// stops waiting.
fn still_running(st: &engine::State) -> Result<()> {
    engine::check_poison(st)?;
    if st.shutting_down {
        return Err(Error::Closed);
    }
    Ok(())
}
