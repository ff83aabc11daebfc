//! [`StdFs`](super::StdFs)'s mapped files (`FileSystem::create_mapped`): a file the commit path
//! appends to and hands to the kernel after every group (the blob files of values separated at
//! write time), written by copying into a shared mapping instead of calling `write()`.
//!
//! A helper thread of the file (`matrixkv:prefault`) faults the mapping's pages in a few MiB
//! ahead of the writer, so the writer's copy meets a page that is already in the page cache,
//! zeroed and writable: the zeroing and the file system's page bookkeeping that a `write()`
//! does under the caller move to the helper. Behind the writer the filled pages are unmapped
//! every 2 MiB, and the mapping is gone before the `sync` that ends the file writes it back:
//! writing back a page that is still mapped write-protects it, a TLB shootdown on every CPU of
//! the process. No writeback is started early (`sync_file_range`, as `create_streaming` does
//! every `writeback_bytes`): it costs TLB shootdowns even for unmapped ranges (31% of all CPU
//! in B1, decision 0028, item 2), and it would clean the zeroed pages ahead of the writer,
//! whose stores would fault again.
//!
//! The file keeps its reserved capacity as its length (zeros past the written bytes) until
//! its first `sync`, which shortens it to the bytes appended and leaves the mapping; appends
//! from then on, and those past the capacity, use `write()`. `sync_appended` (a sync write
//! while the file is the active memtable's) makes the appends durable and, at the file's
//! first sync and at later ones [`KEEP_MAPPED_GAP`] apart, keeps the mapping and the length:
//! it writes back the whole file, the zeros faulted in ahead of the writer included, and the
//! writer's next stores fault those pages writable again; a sync sooner after the previous
//! one is a `sync` (the zeros would reach the disk about as often as the values). A crash
//! before the shortening `sync` leaves the file at its capacity: whoever reads it after a
//! crash must only trust records it has pointers to (as WAL replay does with value files).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Sender, channel};
use std::thread::JoinHandle;

use matrixkv_pmem::{MappedFile, Populator};

use super::WritableFile;
use crate::error::{Error, IoOp, Result};

/// Pages are faulted in this many bytes at a time...
const STEP: u64 = 2 << 20;
/// ...to keep this many bytes ahead of the writer.
const AHEAD: u64 = 8 << 20;
/// The pages behind the writer are unmapped in whole ranges of this many bytes, at multiples
/// of it in the file: the page cache may hold the file in large folios
/// (ext4 since Linux 6.16, up to 2 MiB on x86_64), and unmapping part of one unmaps the rest
/// of it too, so the writer faulted again on pages the helper had faulted in (in YCSB's load
/// with 1 KiB values, unmapping at 64 KiB multiples cost the writer 18% of its time in page
/// faults; at 2 MiB multiples, none).
const RELEASE: u64 = 2 << 20;

/// `sync_appended` keeps the mapping at the file's first sync, and at a later one only when
/// this many bytes were appended since the previous: each such sync also writes back the
/// zeros faulted in ahead of the writer (up to [`AHEAD`] + [`STEP`]), which frequent syncs
/// would write about as often as the values themselves (1,000 writes of 4 KiB between sync
/// writes: 2.35 bytes reached the disk per user byte, against 1.32 leaving the mapping).
const KEEP_MAPPED_GAP: u64 = 4 * AHEAD;

/// A range of the mapping for the helper to fault in: offset and length.
type Range = (u64, u64);

/// A file written through a mapping of its reserved capacity, then (after `sync`, or past the
/// capacity) with `write()`.
pub(super) struct MappedWritable {
    /// The mapping, until the first `sync` or the first append past the capacity.
    mapped: Option<MappedFile>,
    file: Arc<File>,
    path: PathBuf,
    capacity: u64,
    /// Bytes appended.
    len: u64,
    /// Bytes appended with `write()` not yet written (after leaving the mapping).
    buf: Vec<u8>,
    /// The prefault helper (`None` without one, and after leaving the mapping).
    helper: Option<Helper>,
    /// Pages are faulted in (or asked for) below this offset.
    populated: u64,
    /// Pages below this offset are unmapped (the capacity once unmapping failed: no more
    /// is tried).
    released: u64,
    /// The length at the last `sync_appended` that kept the mapping.
    synced_at: Option<u64>,
}

/// The helper thread of a mapped file and its queue. Its populator holds the mapping, so
/// leaving the mapping joins it.
struct Helper {
    tx: Sender<Range>,
    thread: JoinHandle<()>,
}

impl std::fmt::Debug for MappedWritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedWritable")
            .field("path", &self.path)
            .field("capacity", &self.capacity)
            .field("len", &self.len)
            .field("mapped", &self.mapped.is_some())
            .finish_non_exhaustive()
    }
}

impl MappedWritable {
    /// Creates `path` with `capacity` bytes reserved and mapped, and starts its helper.
    /// `Err` with the mapping's error where the file system cannot (the caller then writes
    /// the file with `write()`); a full device is ENOSPC.
    pub(super) fn create(path: &Path, capacity: u64) -> std::io::Result<MappedWritable> {
        let cap = usize::try_from(capacity).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "capacity too large")
        })?;
        let mapped = MappedFile::create(path, cap)?;
        let file = Arc::clone(mapped.file());
        let helper = start_helper(mapped.populator(), path);
        let mut w = MappedWritable {
            mapped: Some(mapped),
            file,
            path: path.to_owned(),
            capacity,
            len: 0,
            buf: Vec::new(),
            helper,
            populated: 0,
            released: 0,
            synced_at: None,
        };
        w.ask_helper();
        Ok(w)
    }

    /// Keeps the pages ahead of the writer faulted in, and gives the filled ones back.
    fn ask_helper(&mut self) {
        if self.len.saturating_sub(self.released) >= RELEASE
            && let Some(m) = self.mapped.as_mut()
        {
            let to = self.len / RELEASE * RELEASE;
            match m.release_below(usize::try_from(to).unwrap_or(usize::MAX)) {
                Ok(true) => self.released = to,
                // A populate in progress: the next append tries again.
                Ok(false) => {}
                Err(e) => {
                    // Only the writeback of these pages pays for it: their page-table entries
                    // are write-protected one by one.
                    log::debug!(
                        "matrixkv: could not unmap the front of {}: {e}",
                        self.path.display()
                    );
                    self.released = self.capacity;
                }
            }
        }
        let Some(h) = &self.helper else {
            return;
        };
        let mut sent = true;
        while sent && self.populated < (self.len + AHEAD).min(self.capacity) {
            sent = h.tx.send((self.populated, STEP)).is_ok();
            self.populated += STEP;
        }
        if !sent {
            // The helper is gone: the writer faults its pages in itself.
            self.helper = None;
        }
    }

    /// Leaves the mapping: the file is shortened to the bytes appended (if they are fewer
    /// than the capacity) and written with `write()` from now on. The mapping is gone when
    /// this returns (the helper, which holds it too, is joined), so the writeback of an
    /// `fdatasync` that follows has no page-table entries to write-protect.
    fn leave_mapping(&mut self) -> Result<()> {
        if let Some(m) = self.mapped.take() {
            if let Some(Helper { tx, thread }) = self.helper.take() {
                drop(tx);
                if thread.join().is_err() {
                    log::warn!(
                        "matrixkv: the prefault thread of {} panicked",
                        self.path.display()
                    );
                }
            }
            drop(m.into_file());
            if self.len < self.capacity {
                self.file
                    .set_len(self.len)
                    .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
            }
        }
        Ok(())
    }

    fn write_buf(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let at = self.len - self.buf.len() as u64;
            self.file
                .write_all_at(&self.buf, at)
                .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
            self.buf.clear();
        }
        Ok(())
    }
}

impl WritableFile for MappedWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if let Some(m) = self.mapped.as_mut() {
            let end = self.len + data.len() as u64;
            if end <= self.capacity {
                let at = usize::try_from(self.len).map_err(|_| {
                    Error::io(
                        IoOp::Write,
                        &self.path,
                        std::io::Error::from(std::io::ErrorKind::InvalidInput),
                    )
                })?;
                m.write(at, data)
                    .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
                self.len = end;
                self.ask_helper();
                return Ok(());
            }
            // Past the capacity: the rest goes with write() (the file grows past it).
            self.mapped = None;
            self.helper = None;
        }
        self.len += data.len() as u64;
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 1 << 20 {
            self.write_buf()?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.leave_mapping()?;
        self.write_buf()?;
        self.file
            .sync_data()
            .map_err(|e| Error::io(IoOp::Sync, &self.path, e))
    }

    fn sync_appended(&mut self) -> Result<()> {
        let gap = self.synced_at.map_or(u64::MAX, |at| self.len - at);
        if self.mapped.is_none() || gap < KEEP_MAPPED_GAP {
            return self.sync();
        }
        // The whole file, its capacity long: the appends, and the zeros the helper faulted in
        // ahead of them (written back too; the writer's stores fault those pages writable
        // again one by one). Leaving the mapping instead would send every later append of the
        // file through write() (decision 0028).
        self.file
            .sync_data()
            .map_err(|e| Error::io(IoOp::Sync, &self.path, e))?;
        self.synced_at = Some(self.len);
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // Stores through the mapping are in the page cache already.
        self.write_buf()
    }

    fn preallocate(&mut self, _bytes: u64) -> Result<()> {
        // The capacity was reserved at creation.
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

/// Starts the helper thread of the file at `path`; `None` (logged) if no thread starts.
fn start_helper(populator: Populator, path: &Path) -> Option<Helper> {
    let (tx, rx) = channel::<Range>();
    let name = path.display().to_string();
    let started = std::thread::Builder::new()
        .name("matrixkv:prefault".into())
        .spawn(move || {
            for (offset, len) in rx {
                let (Ok(offset), Ok(len)) = (usize::try_from(offset), usize::try_from(len)) else {
                    continue;
                };
                match populator.populate(offset, len) {
                    Ok(true) => {}
                    // No such advice: the writer's stores fault pages in themselves.
                    Ok(false) => return,
                    Err(e) => {
                        // Shortened under us (the writer left the mapping), or out of memory.
                        log::debug!("matrixkv: no prefault of {name}: {e}");
                        return;
                    }
                }
            }
        });
    match started {
        Ok(thread) => Some(Helper { tx, thread }),
        Err(e) => {
            log::warn!("matrixkv: no prefault thread for {}: {e}", path.display());
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_read_back_before_sync_and_the_file_is_shortened_at_sync() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = MappedWritable::create(&p, 64 << 10).unwrap();
        let mut expected = Vec::new();
        for i in 0..10u8 {
            let piece = vec![i; 4120];
            w.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
        }
        w.flush().unwrap();
        assert_eq!(w.len(), expected.len() as u64);
        // Before the first sync the file is its capacity long, zeros past the appends.
        let before = std::fs::read(&p).unwrap();
        assert_eq!(before.len(), 64 << 10);
        assert_eq!(&before[..expected.len()], &expected[..]);
        assert!(before[expected.len()..].iter().all(|&b| b == 0));
        w.sync().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expected);
        // After the sync appends go on with write().
        w.append(b"after the sync").unwrap();
        w.sync().unwrap();
        expected.extend_from_slice(b"after the sync");
        assert_eq!(std::fs::read(&p).unwrap(), expected);
    }

    #[test]
    fn a_sync_of_the_appends_keeps_the_mapping_and_the_last_sync_shortens_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let cap = 2 * KEEP_MAPPED_GAP + (1 << 20);
        let mut w = MappedWritable::create(&p, cap).unwrap();
        let mut expected = Vec::new();
        let append = |w: &mut MappedWritable, expected: &mut Vec<u8>, bytes: u64, fill: u8| {
            let piece = vec![fill; 4096];
            for _ in 0..bytes / 4096 {
                w.append(&piece).unwrap();
                expected.extend_from_slice(&piece);
            }
        };
        let on_disk = |expected: &[u8]| {
            let now = std::fs::read(&p).unwrap();
            assert_eq!(now.len() as u64, cap, "still its capacity long");
            assert_eq!(&now[..expected.len()], expected);
            assert!(now[expected.len()..].iter().all(|&b| b == 0));
        };
        // The first sync keeps the mapping, and so does one a long gap after it.
        append(&mut w, &mut expected, 64 << 10, 1);
        w.sync_appended().unwrap();
        assert!(w.mapped.is_some());
        on_disk(&expected);
        append(&mut w, &mut expected, KEEP_MAPPED_GAP, 2);
        w.sync_appended().unwrap();
        assert!(w.mapped.is_some());
        on_disk(&expected);
        // One soon after leaves it: appends go on with write().
        append(&mut w, &mut expected, 64 << 10, 3);
        w.sync_appended().unwrap();
        assert!(w.mapped.is_none());
        append(&mut w, &mut expected, 8192, 4);
        w.sync().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expected);
    }

    #[test]
    fn pages_behind_the_writer_are_given_back_and_everything_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = MappedWritable::create(&p, 12 << 20).unwrap();
        let mut expected = Vec::new();
        for i in 0..2500u32 {
            let piece = vec![(i % 251) as u8; 4120];
            w.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
            if i % 250 == 0 {
                // Time for the helper to finish its populates: the next append unmaps.
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        assert!(w.released >= 8 << 20, "released below {}", w.released);
        // Whole large folios only: never part of a 2 MiB-aligned range of the file.
        assert_eq!(w.released % RELEASE, 0);
        w.flush().unwrap();
        assert_eq!(&std::fs::read(&p).unwrap()[..expected.len()], &expected[..]);
        w.sync().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expected);
    }

    #[test]
    fn appends_past_the_capacity_grow_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = MappedWritable::create(&p, 8192).unwrap();
        let mut expected = Vec::new();
        for i in 0..5u8 {
            let piece = vec![i + 1; 3000];
            w.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
            w.flush().unwrap();
            let now = std::fs::read(&p).unwrap();
            assert_eq!(
                &now[..expected.len()],
                &expected[..],
                "after {} appends",
                i + 1
            );
        }
        w.sync().unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), expected);
    }
}
