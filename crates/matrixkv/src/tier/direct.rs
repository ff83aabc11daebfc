//! Direct I/O writes (`O_DIRECT`) for [`StdFs`](super::StdFs): the table and blob files that
//! flushes and compactions write to the slow tier bypass the page cache.
//!
//! Buffered writes cost a copy into the page cache per byte, page-cache management, and
//! writeback later; a compaction's output is not read again soon (its reads come from the
//! block cache or from disk either way), so that copy is wasted CPU: 27% of all CPU on the B1
//! benchmark before this module (docs/decisions/0008-direct-io-writes.md).
//!
//! `O_DIRECT` needs the buffer address, the file offset and the length aligned to the device's
//! logical block. The writer keeps an aligned buffer (a `Vec` sliced at an aligned offset: no
//! unsafe code) and writes whole blocks at block-aligned offsets. `sync` writes the partial last
//! block padded with zeros, truncates the file to its logical length and keeps the partial
//! block in the buffer, so the next write rewrites that block whole. Bytes appended after the
//! last `sync` are lost on a crash, as with [`StdFs`](super::StdFs).
//!
//! A file system that refuses `O_DIRECT` at open (tmpfs, some FUSE and network file systems)
//! gets buffered writes instead, with one log line per process.
//!
//! Called by `StdFs::create_direct`. A writer has one owner; its full buffers are written by a
//! helper thread per file, at most [`IN_FLIGHT`] at a time (see [`DirectWritable`]).

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, channel, sync_channel};
use std::thread::JoinHandle;

use super::WritableFile;
use super::writeback::Writeback;
use crate::error::{Error, IoOp, Result};

/// Alignment of buffers, offsets and lengths: the largest logical block size in common use.
pub(super) const ALIGN: usize = 4096;
/// Bytes buffered before a write to the file (a multiple of [`ALIGN`]).
const BUFFER_BYTES: usize = 1 << 20;

/// Full buffers handed to the file's I/O thread and not yet written; the appending thread
/// waits only when this many are in flight.
const IN_FLIGHT: usize = 3;

/// A writer of one file opened with `O_DIRECT`.
///
/// Full buffers are written by a helper thread of the file (`matrixkv:dio`), so the job that
/// appends (a compaction) keeps computing while the device writes: a direct write blocks until
/// the device has the data, where a buffered write returned after the copy. `sync` waits for
/// the buffers in flight, then writes the partial last block itself.
#[derive(Debug)]
pub(super) struct DirectWritable {
    file: Arc<File>,
    path: PathBuf,
    buf: AlignedBuf,
    /// File offset of the buffer's first byte (a multiple of [`ALIGN`]).
    base: u64,
    /// Logical length: every byte appended.
    len: u64,
    /// `Some` until drop.
    io: Option<IoThread>,
    /// Buffers back from the I/O thread, ready to fill.
    spare: Vec<AlignedBuf>,
    in_flight: usize,
    /// Bytes from offset 0 already handed to the kernel's readahead after a sync.
    prefetched: u64,
    /// Background device flushes as buffers are written (`bytes_per_sync`), or `None`.
    writeback: Option<Writeback>,
}

#[derive(Debug)]
struct IoThread {
    jobs: SyncSender<(AlignedBuf, u64)>,
    done: Receiver<(AlignedBuf, std::io::Result<()>)>,
    handle: JoinHandle<()>,
}

impl DirectWritable {
    /// A writer of `file`, with its I/O thread (an error if the thread cannot be started).
    pub(super) fn new(
        file: File,
        path: PathBuf,
        writeback: Option<Writeback>,
    ) -> Result<DirectWritable> {
        let file = Arc::new(file);
        let (jobs, rx) = sync_channel::<(AlignedBuf, u64)>(IN_FLIGHT);
        let (tx, done) = channel();
        let f = Arc::clone(&file);
        let handle = std::thread::Builder::new()
            .name("matrixkv:dio".into())
            .spawn(move || {
                for (buf, offset) in rx {
                    let r = f.write_all_at(buf.prefix(buf.capacity()), offset);
                    if tx.send((buf, r)).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| Error::io(IoOp::Open, &path, e))?;
        Ok(DirectWritable {
            file,
            path,
            buf: AlignedBuf::new(BUFFER_BYTES),
            base: 0,
            len: 0,
            io: Some(IoThread { jobs, done, handle }),
            spare: Vec::new(),
            in_flight: 0,
            prefetched: 0,
            writeback,
        })
    }

    fn write_error(&self, e: std::io::Error) -> Error {
        Error::io(IoOp::Write, &self.path, e)
    }

    fn thread_stopped(&self) -> Error {
        self.write_error(std::io::Error::other("the direct-I/O thread stopped"))
    }

    /// Waits for one buffer in flight to be written; keeps it, emptied, as a spare.
    fn reap_one(&mut self) -> Result<()> {
        let io = self.io.as_ref().ok_or_else(|| self.thread_stopped())?;
        let (mut buf, r) = io.done.recv().map_err(|_| self.thread_stopped())?;
        self.in_flight -= 1;
        let written = buf.capacity();
        buf.clear();
        self.spare.push(buf);
        r.map_err(|e| self.write_error(e))?;
        // The device has these bytes in its cache: let the helper flush it meanwhile.
        match self.writeback.as_mut() {
            Some(w) => w.wrote(&self.file, &self.path, written),
            None => Ok(()),
        }
    }

    /// Hands the full buffer to the I/O thread, to be written at `base`, and starts an empty
    /// one.
    fn write_full_buffer(&mut self) -> Result<()> {
        if self.spare.is_empty() && self.in_flight >= IN_FLIGHT {
            self.reap_one()?;
        }
        let next = self
            .spare
            .pop()
            .unwrap_or_else(|| AlignedBuf::new(BUFFER_BYTES));
        let full = std::mem::replace(&mut self.buf, next);
        let offset = self.base;
        self.base += full.capacity() as u64;
        let io = self.io.as_ref().ok_or_else(|| self.thread_stopped())?;
        io.jobs
            .send((full, offset))
            .map_err(|_| self.thread_stopped())?;
        self.in_flight += 1;
        Ok(())
    }
}

impl Drop for DirectWritable {
    fn drop(&mut self) {
        if let Some(io) = self.io.take() {
            drop(io.jobs);
            // The thread finishes the buffers already handed to it, then ends.
            let _ = io.handle.join();
        }
    }
}

impl WritableFile for DirectWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        while !data.is_empty() {
            let taken = self.buf.fill_from(data);
            data = data.get(taken..).unwrap_or_default();
            if self.buf.is_full() {
                self.write_full_buffer()?;
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        while self.in_flight > 0 {
            self.reap_one()?;
        }
        let filled = self.buf.len();
        if filled > 0 {
            let whole = filled / ALIGN * ALIGN;
            let padded = filled.div_ceil(ALIGN) * ALIGN;
            self.buf.zero_after(filled, padded);
            self.file
                .write_all_at(self.buf.prefix(padded), self.base)
                .map_err(|e| self.write_error(e))?;
            if padded > filled {
                self.file
                    .set_len(self.len)
                    .map_err(|e| self.write_error(e))?;
            }
            // Keep the partial last block: the next write rewrites it whole.
            self.buf.drop_front(whole);
            self.base += whole as u64;
        }
        if let Some(w) = self.writeback.as_mut() {
            w.settle(&self.path)?;
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(IoOp::Sync, &self.path, e))?;
        self.prefetch_synced();
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        // A partial block can reach the file only by the padded write `sync` makes.
        self.sync()
    }

    fn preallocate(&mut self, _bytes: u64) -> Result<()> {
        // Direct writes go out in whole buffers, allocated as they land.
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl DirectWritable {
    /// Asks the kernel to read what was synced since the last call back into the page cache
    /// (`POSIX_FADV_WILLNEED`: asynchronous readahead by DMA, no copy by this thread). The
    /// outputs of flushes and compactions are read soon after they are written; a buffered
    /// write leaves them cached at the price of a CPU copy of every byte on the compaction
    /// thread (the largest item of B1's profile), a direct write leaves them uncached, which
    /// made reads after a load 5× slower (docs/decisions/0008-direct-io-writes.md). A refused
    /// advice only costs the cache, so it is logged and ignored.
    fn prefetch_synced(&mut self) {
        // Linux reads at most a few MiB per advice (8 MiB seen here), so the range is advised
        // in pieces.
        const PIECE: u64 = 4 << 20;
        while self.prefetched < self.len {
            let from = self.prefetched;
            let n = (self.len - from).min(PIECE);
            let (Ok(off), Ok(len)) = (i64::try_from(from), i64::try_from(n)) else {
                return;
            };
            if let Err(e) = nix::fcntl::posix_fadvise(
                &*self.file,
                off,
                len,
                nix::fcntl::PosixFadviseAdvice::POSIX_FADV_WILLNEED,
            ) {
                log::debug!(
                    "matrixkv: readahead of {} refused: {e}",
                    self.path.display()
                );
                return;
            }
            self.prefetched = from + n;
        }
    }
}

/// A byte buffer whose first byte is [`ALIGN`]-aligned in memory.
#[derive(Debug)]
struct AlignedBuf {
    mem: Vec<u8>,
    /// Offset in `mem` of the aligned start.
    start: usize,
    capacity: usize,
    filled: usize,
}

impl AlignedBuf {
    fn new(capacity: usize) -> AlignedBuf {
        let mem = vec![0u8; capacity + ALIGN];
        // Always below ALIGN for a byte pointer; 0 would only misalign, never overrun.
        let start = mem.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf {
            mem,
            start,
            capacity,
            filled: 0,
        }
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn len(&self) -> usize {
        self.filled
    }

    fn is_full(&self) -> bool {
        self.filled == self.capacity
    }

    fn clear(&mut self) {
        self.filled = 0;
    }

    /// Copies as much of `data` as fits; returns how much.
    fn fill_from(&mut self, data: &[u8]) -> usize {
        let n = data.len().min(self.capacity - self.filled);
        let at = self.start + self.filled;
        if let (Some(dst), Some(src)) = (self.mem.get_mut(at..at + n), data.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.filled += n;
        n
    }

    /// The first `n` bytes (padding included).
    fn prefix(&self, n: usize) -> &[u8] {
        self.mem.get(self.start..self.start + n).unwrap_or_default()
    }

    /// Zeroes the bytes `from..to` (the padding of a partial block).
    fn zero_after(&mut self, from: usize, to: usize) {
        if let Some(pad) = self.mem.get_mut(self.start + from..self.start + to) {
            pad.fill(0);
        }
    }

    /// Drops the first `n` bytes, moving the rest to the front.
    fn drop_front(&mut self, n: usize) {
        let (s, f) = (self.start, self.filled);
        self.mem.copy_within(s + n..s + f, s);
        self.filled -= n;
    }
}

/// Logs, once per process, that a file system refused `O_DIRECT`.
pub(super) fn log_fallback(path: &std::path::Path, e: &std::io::Error) {
    static LOGGED: AtomicBool = AtomicBool::new(false);
    if !LOGGED.swap(true, Ordering::Relaxed) {
        log::warn!(
            "matrixkv: the file system of {} refuses O_DIRECT ({e}); table and blob files are \
             written through the page cache instead",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_buffer_starts_on_an_aligned_address() {
        let b = AlignedBuf::new(ALIGN * 4);
        assert_eq!(b.prefix(ALIGN).as_ptr() as usize % ALIGN, 0);
    }
}
