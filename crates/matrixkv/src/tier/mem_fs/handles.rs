//! The handles [`MemFs`] gives out: writable files, random-access files and locks.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fault::{FaultKind, FaultOp};
use super::{ENOSPC, Shared, eof_err, os_err};
use crate::error::{IoOp, Result};
use crate::tier::{FileLock, RandomAccessFile, WritableFile};

pub(super) struct MemWritable {
    pub(super) shared: Arc<Shared>,
    pub(super) ino: u64,
    pub(super) path: PathBuf,
    pub(super) len: u64,
    /// A mapped file's capacity (`FileSystem::create_mapped`), until its first `sync`
    /// (`sync_appended` keeps it): the file is that long, zeros past the appends, which
    /// overwrite them in place.
    pub(super) mapped: Option<usize>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Write, &[&self.path]);
        let data = match fault {
            Some(FaultKind::ShortWrite) => data.get(..data.len() / 2).unwrap_or_default(),
            Some(kind) => return Err(os_err(IoOp::Write, &self.path, kind.raw_os_error())),
            None => {
                if let Some(cap) = s.capacity
                    && self.in_place(data.len()).is_none()
                    && s.used_bytes().saturating_add(data.len() as u64) > cap
                {
                    return Err(os_err(IoOp::Write, &self.path, ENOSPC));
                }
                data
            }
        };
        match self.in_place(data.len()) {
            // Into the reserved capacity: no new space.
            Some(at) => s.inode(self.ino).data[at..at + data.len()].copy_from_slice(data),
            None => {
                // Past it: the rest of the file is appended (the real file leaves the mapping).
                self.mapped = None;
                let inode = s.inode(self.ino);
                let len = self.len as usize;
                inode.data.truncate(len);
                inode.synced_len = inode.synced_len.min(len);
                inode.data.extend_from_slice(data);
            }
        }
        self.len += data.len() as u64;
        match fault {
            Some(kind) => Err(os_err(IoOp::Write, &self.path, kind.raw_os_error())),
            None => Ok(()),
        }
    }

    fn sync(&mut self) -> Result<()> {
        self.sync_keeping_mapping(false)
    }

    fn sync_appended(&mut self) -> Result<()> {
        self.sync_keeping_mapping(true)
    }

    fn flush(&mut self) -> Result<()> {
        // Appends reach the file's data at once (the kernel's page cache, in the model).
        Ok(())
    }

    fn preallocate(&mut self, bytes: u64) -> Result<()> {
        // Modelled by its failure only: no room for the reservation is ENOSPC.
        let s = self.shared.state.lock();
        match s.capacity {
            Some(cap) if s.used_bytes().saturating_add(bytes) > cap => {
                Err(os_err(IoOp::Write, &self.path, ENOSPC))
            }
            _ => Ok(()),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl MemWritable {
    /// `sync` (`keep`: `sync_appended`): a mapped file is shortened to its appends and written
    /// with write() from then on, unless `keep`, when it stays its capacity long and only its
    /// appends count as synced: what is appended in place after this call is the unsynced
    /// tail a crash may drop, zero or garble (on StdFs the zeros past the appends are durable
    /// too, which tells a reader nothing more: it trusts only records it has pointers to).
    fn sync_keeping_mapping(&mut self, keep: bool) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Sync, &[&self.path]);
        let inode = s.inode(self.ino);
        if !keep && self.mapped.take().is_some() {
            let len = self.len as usize;
            inode.data.truncate(len);
            inode.synced_len = inode.synced_len.min(len);
        }
        // Still mapped only if `keep`.
        let len = if self.mapped.is_some() {
            usize::try_from(self.len)
                .unwrap_or(usize::MAX)
                .min(inode.data.len())
        } else {
            inode.data.len()
        };
        match fault {
            Some(kind) => {
                if inode.synced_len < len {
                    inode.lost.push(inode.synced_len..len);
                }
                Err(os_err(IoOp::Sync, &self.path, kind.raw_os_error()))
            }
            None => {
                inode.synced_len = inode.synced_len.max(len);
                Ok(())
            }
        }
    }

    /// Where `n` appended bytes go into a mapped file's reserved capacity, if they fit.
    fn in_place(&self, n: usize) -> Option<usize> {
        let at = usize::try_from(self.len).ok()?;
        self.mapped.filter(|&cap| at + n <= cap).map(|_| at)
    }
}

impl Drop for MemWritable {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock();
        let inode = s.inode(self.ino);
        inode.handles = inode.handles.saturating_sub(1);
        s.gc(self.ino);
    }
}

pub(super) struct MemRandom {
    pub(super) shared: Arc<Shared>,
    pub(super) ino: u64,
    pub(super) path: PathBuf,
    pub(super) len: u64,
    /// Opened with `open_mapped`: a read of the first `len` bytes (the mapped length) past
    /// the file's current end is what raises `SIGBUS` on a real mapping, so it aborts the
    /// process here too (see `RandomAccessFile::read_exact_at`).
    pub(super) mapped: bool,
}

impl fmt::Debug for MemRandom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemRandom")
            .field("path", &self.path)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl RandomAccessFile for MemRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mut s = self.shared.state.lock();
        let fault = s.check(FaultOp::Read, &[&self.path]);
        if let Some(kind) = fault
            && kind != FaultKind::CorruptRead
        {
            return Err(os_err(IoOp::Read, &self.path, kind.raw_os_error()));
        }
        let end = offset.checked_add(buf.len() as u64);
        let now = s.inode(self.ino).data.len() as u64;
        if self.mapped && end.is_some_and(|e| e <= self.len && e > now) {
            // A read past the end of a shortened mapped file: `SIGBUS` on `StdFs`.
            eprintln!(
                "MemFs: a read of {} bytes at {offset} of {}, mapped at {} bytes, passes its \
                 end at {now}: a real mapping raises SIGBUS here",
                buf.len(),
                self.path.display(),
                self.len
            );
            std::process::abort();
        }
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| Some(o..o.checked_add(buf.len())?))
            .and_then(|r| s.inode(self.ino).data.get(r))
            .ok_or_else(|| eof_err(&self.path))?;
        buf.copy_from_slice(src);
        if fault.is_some()
            && let Some(last) = buf.last_mut()
        {
            *last ^= 0x01;
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for MemRandom {
    fn drop(&mut self) {
        let mut s = self.shared.state.lock();
        let inode = s.inode(self.ino);
        inode.handles = inode.handles.saturating_sub(1);
        s.gc(self.ino);
    }
}

pub(super) struct MemLock {
    pub(super) shared: Arc<Shared>,
    pub(super) path: PathBuf,
}

impl fmt::Debug for MemLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemLock").field("path", &self.path).finish()
    }
}

impl FileLock for MemLock {}

impl Drop for MemLock {
    fn drop(&mut self) {
        self.shared.state.lock().locks.remove(&self.path);
    }
}
