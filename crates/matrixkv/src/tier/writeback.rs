//! Early writeback for [`StdFs`](super::StdFs) files written front to back through the page
//! cache (`FileSystem::create_streaming`: the tables and blob files of compactions).
//!
//! A buffered file's bytes sit in the page cache until the `fdatasync` that ends the file, and
//! that call then waits for the device to take all of them and flush its cache. In B1 (2M ×
//! 4 KiB fillrandom) the compaction thread, the engine's bottleneck, spent 27% of its time in
//! that wait (`blkdev_issue_flush` under `fdatasync`): about 60 ms for each 64 MiB. This
//! module moves the wait off the appending thread, in two steps per `every` bytes written:
//!
//! - `sync_file_range(SYNC_FILE_RANGE_WRITE)` on the new range: the kernel starts writing it
//!   to the device and returns (RocksDB's `bytes_per_sync`);
//! - a helper thread of the file (`matrixkv:wb`) runs `fdatasync` when it is idle, so the
//!   device flushes its cache while the job keeps merging; requests that arrive while it is
//!   busy are folded into its next call.
//!
//! The file's own `sync` then waits for the helper's call in flight and runs a final
//! `fdatasync`, which has little left to write and flush. Durability is unchanged: bytes are
//! durable after `sync` returns, as before. An error of the helper's `fdatasync` is kept and
//! returned by the next `sync`: Linux reports a writeback error once per open file, so the
//! final call alone could miss it.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::error::{Error, IoOp, Result};
use crate::lock_order::{Condvar, Mutex, Rank};

/// The early writeback of one file.
#[derive(Debug)]
pub(super) struct Writeback {
    every: u64,
    /// Bytes handed to the kernel so far.
    written: u64,
    /// Writeback was started for `0..requested`.
    requested: u64,
    /// `false` once the file system refused `sync_file_range`.
    ranges: bool,
    /// Started at the first request.
    helper: Option<Helper>,
}

#[derive(Debug)]
struct Helper {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

#[derive(Debug)]
struct Shared {
    state: Mutex<HelperState>,
    cv: Condvar,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            state: Mutex::new(Rank::LeafWriteback, HelperState::default()),
            cv: Condvar::new(),
        }
    }
}

#[derive(Debug, Default)]
struct HelperState {
    /// An `fdatasync` is asked for and not yet started.
    wanted: bool,
    /// An `fdatasync` is running.
    busy: bool,
    stop: bool,
    /// The first error of the helper's `fdatasync`, until `sync` reports it.
    error: Option<std::io::Error>,
}

impl Writeback {
    /// Early writeback every `every` bytes (more than 0).
    pub(super) fn new(every: u64) -> Writeback {
        Writeback {
            every,
            written: 0,
            requested: 0,
            ranges: true,
            helper: None,
        }
    }

    /// Records `len` more bytes written to `file`; starts writeback when `every` more have
    /// accumulated since the last start.
    pub(super) fn wrote(&mut self, file: &Arc<File>, path: &Path, len: usize) -> Result<()> {
        self.written += len as u64;
        if self.written - self.requested < self.every {
            return Ok(());
        }
        if self.ranges {
            let started =
                matrixkv_pmem::start_writeback(file, self.requested, self.written - self.requested);
            if let Err(e) = started {
                // Only the hint is lost: the helper's and the final `fdatasync` still write.
                log::debug!("matrixkv: no sync_file_range for {}: {e}", path.display());
                self.ranges = false;
            }
        }
        self.requested = self.written;
        if self.helper.is_none() {
            self.helper = Some(Helper::start(Arc::clone(file), path)?);
        }
        if let Some(h) = &self.helper {
            let mut st = h.shared.state.lock();
            if !st.wanted && st.error.is_none() {
                st.wanted = true;
                h.shared.cv.notify_one();
            }
        }
        Ok(())
    }

    /// Waits until the helper is idle; the error its `fdatasync` met since the last call, if
    /// any. Called by the file's `sync` before its own `fdatasync`.
    pub(super) fn settle(&mut self, path: &Path) -> Result<()> {
        let Some(h) = &self.helper else {
            return Ok(());
        };
        let mut st = h.shared.state.lock();
        // A request not started yet is dropped: the caller's `fdatasync` covers it.
        st.wanted = false;
        while st.busy {
            h.shared.cv.wait(&mut st);
        }
        match st.error.take() {
            Some(e) => Err(Error::io(IoOp::Sync, path, e)),
            None => Ok(()),
        }
    }
}

impl Helper {
    fn start(file: Arc<File>, path: &Path) -> Result<Helper> {
        let shared = Arc::new(Shared::default());
        let s = Arc::clone(&shared);
        let handle = std::thread::Builder::new()
            .name("matrixkv:wb".into())
            .spawn(move || run(&file, &s))
            .map_err(|e| Error::io(IoOp::Open, path, e))?;
        Ok(Helper {
            shared,
            handle: Some(handle),
        })
    }
}

/// The helper thread: one `fdatasync` per request, until told to stop.
fn run(file: &File, shared: &Shared) {
    let mut st = shared.state.lock();
    loop {
        while !st.wanted && !st.stop {
            shared.cv.wait(&mut st);
        }
        if st.stop {
            break;
        }
        st.wanted = false;
        st.busy = true;
        drop(st);
        let r = file.sync_data();
        st = shared.state.lock();
        st.busy = false;
        if let Err(e) = r
            && st.error.is_none()
        {
            st.error = Some(e);
        }
        shared.cv.notify_all();
    }
}

impl Drop for Helper {
    fn drop(&mut self) {
        {
            let mut st = self.shared.state.lock();
            st.stop = true;
            self.shared.cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            // The thread ends after its `fdatasync` in flight, if any.
            let _ = h.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_background_fdatasync_is_reported_by_the_next_sync() {
        // Writes to /dev/null succeed and its `fdatasync` fails (EINVAL): the helper's error
        // must reach the file's `sync` even though the helper, not `sync`, met it.
        let path = Path::new("/dev/null");
        let file = Arc::new(std::fs::OpenOptions::new().write(true).open(path).unwrap());
        let mut w = Writeback::new(1);
        w.wrote(&file, path, 10).unwrap();
        // Let the helper run its call (`settle` drops a request not started yet).
        let shared = Arc::clone(&w.helper.as_ref().unwrap().shared);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while shared.state.lock().error.is_none() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let err = w.settle(path).unwrap_err();
        assert!(
            matches!(err, Error::Io { op: IoOp::Sync, .. }),
            "unexpected error {err:?}"
        );
        // Reported once: the next sync starts clean.
        w.settle(path).unwrap();
    }

    #[test]
    fn settle_without_any_request_does_not_start_a_helper() {
        let path = Path::new("/dev/null");
        let mut w = Writeback::new(1 << 20);
        let file = Arc::new(std::fs::OpenOptions::new().write(true).open(path).unwrap());
        w.wrote(&file, path, 100).unwrap();
        assert!(w.helper.is_none());
        w.settle(path).unwrap();
    }
}
