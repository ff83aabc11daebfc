//! [`StdFs`]: the [`FileSystem`] over the operating system's files (`std::fs`, `pread`).
//!
//! Files are created with mode 0600 and directories 0700. Writes are buffered in the
//! [`WritableFile`] and reach the OS at `sync()` or when the buffer fills; `Drop` does no I/O,
//! so bytes appended after the last `sync()` may be lost, exactly like unsynced data.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use matrixkv_pmem::ReadMap;

use super::direct::{DirectWritable, log_fallback};
use super::mapped::MappedWritable;
use super::writeback::Writeback;
use super::{FileLock, FileSystem, RandomAccessFile, WritableFile};
use crate::error::{Error, IoOp, Result};

const WRITE_BUFFER_BYTES: usize = 1 << 20;

/// The operating system's file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct StdFs;

#[derive(Debug)]
struct StdWritable {
    file: Arc<File>,
    path: PathBuf,
    buf: Vec<u8>,
    len: u64,
    /// Early writeback (`create_streaming`), or `None`.
    writeback: Option<Writeback>,
    /// Blocks reserved past the end by `preallocate`, given back at the next `sync`.
    reserved: bool,
}

impl StdWritable {
    fn new(file: File, path: &Path, writeback: Option<Writeback>) -> StdWritable {
        StdWritable {
            file: Arc::new(file),
            path: path.to_owned(),
            buf: Vec::new(),
            len: 0,
            writeback,
            reserved: false,
        }
    }

    fn write_out(&mut self, data: &[u8]) -> Result<()> {
        (&*self.file)
            .write_all(data)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        match self.writeback.as_mut() {
            Some(w) => w.wrote(&self.file, &self.path, data.len()),
            None => Ok(()),
        }
    }

    fn flush_buf(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            let written = self.write_out(&buf);
            self.buf = buf;
            self.buf.clear();
            written?;
        }
        Ok(())
    }
}

impl WritableFile for StdWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.len += data.len() as u64;
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush_buf()?;
            if data.len() >= WRITE_BUFFER_BYTES {
                return self.write_out(data);
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.flush_buf()?;
        if self.reserved {
            // The file ends at what was appended: blocks reserved past it are freed.
            self.file
                .set_len(self.len)
                .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
            self.reserved = false;
        }
        if let Some(w) = self.writeback.as_mut() {
            w.settle(&self.path)?;
        }
        self.file
            .sync_data()
            .map_err(|e| Error::io(IoOp::Sync, &self.path, e))
    }

    fn flush(&mut self) -> Result<()> {
        self.flush_buf()
    }

    fn preallocate(&mut self, bytes: u64) -> Result<()> {
        let Ok(len) = i64::try_from(bytes) else {
            return Ok(());
        };
        match nix::fcntl::fallocate(
            &*self.file,
            nix::fcntl::FallocateFlags::FALLOC_FL_KEEP_SIZE,
            0,
            len,
        ) {
            Ok(()) => {
                self.reserved = true;
                Ok(())
            }
            Err(nix::errno::Errno::ENOSPC | nix::errno::Errno::EDQUOT) => Err(Error::io(
                IoOp::Write,
                &self.path,
                std::io::Error::from_raw_os_error(nix::errno::Errno::ENOSPC as i32),
            )),
            // No such call on this file system: appends allocate as they go.
            Err(_) => Ok(()),
        }
    }

    fn len(&self) -> u64 {
        self.len
    }
}

#[derive(Debug)]
struct StdRandom {
    file: File,
    path: PathBuf,
    len: u64,
}

impl RandomAccessFile for StdRandom {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// A file read through a read-only mapping of its length at open
/// ([`FileSystem::open_mapped`]), and with `pread` past it (what a writer appended since).
#[derive(Debug)]
struct StdMapped {
    map: ReadMap,
    file: File,
}

impl RandomAccessFile for StdMapped {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let mapped = usize::try_from(offset).ok().filter(|&at| {
            at.checked_add(buf.len())
                .is_some_and(|end| end <= self.map.len())
        });
        match mapped {
            Some(at) => self.map.read(at, buf),
            None => self.file.read_exact_at(buf, offset),
        }
        .map_err(|e| Error::io(IoOp::Read, self.map.path(), e))
    }

    fn len(&self) -> u64 {
        self.map.len() as u64
    }

    fn path(&self) -> &Path {
        self.map.path()
    }
}

#[derive(Debug)]
struct StdLock {
    _file: File,
}

impl FileLock for StdLock {}

/// Creates (or truncates) `path` for writing, owner-only, with the extra open `flags`.
fn open_new(path: &Path, flags: i32) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(flags)
        .open(path)
}

/// The early writeback of a file written with `writeback_bytes` (0: none).
fn writeback(writeback_bytes: u64) -> Option<Writeback> {
    (writeback_bytes > 0).then(|| Writeback::new(writeback_bytes))
}
impl FileSystem for StdFs {
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| Error::io(IoOp::Open, dir, e))
    }

    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_streaming(path, 0)
    }

    fn create_streaming(&self, path: &Path, writeback_bytes: u64) -> Result<Box<dyn WritableFile>> {
        let file = open_new(path, 0).map_err(|e| Error::io(IoOp::Open, path, e))?;
        Ok(Box::new(StdWritable::new(
            file,
            path,
            writeback(writeback_bytes),
        )))
    }

    fn create_direct(&self, path: &Path, writeback_bytes: u64) -> Result<Box<dyn WritableFile>> {
        match open_new(path, libc::O_DIRECT) {
            Ok(file) => {
                let writeback = writeback(writeback_bytes);
                Ok(Box::new(DirectWritable::new(
                    file,
                    path.to_owned(),
                    writeback,
                )?))
            }
            // EINVAL: the file system does not do direct I/O (tmpfs).
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                log_fallback(path, &e);
                self.create_streaming(path, writeback_bytes)
            }
            Err(e) => Err(Error::io(IoOp::Open, path, e)),
        }
    }

    fn create_mapped(
        &self,
        path: &Path,
        capacity: u64,
        writeback_bytes: u64,
    ) -> Result<Box<dyn WritableFile>> {
        // No early writeback while mapped (see the `mapped` module).
        match MappedWritable::create(path, capacity) {
            Ok(w) => Ok(Box::new(w)),
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => {
                Err(Error::io(IoOp::Write, path, e))
            }
            Err(e) => {
                log_mapped_fallback(path, &e);
                super::create_reserved(self, path, capacity, writeback_bytes)
            }
        }
    }

    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(IoOp::Open, path, e))?;
        let len = file
            .metadata()
            .map_err(|e| Error::io(IoOp::Open, path, e))?
            .len();
        Ok(Arc::new(StdRandom {
            file,
            path: path.to_owned(),
            len,
        }))
    }

    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io(IoOp::Open, path, e))?;
        match ReadMap::map(&file, path) {
            Ok(map) => Ok(Arc::new(StdMapped { map, file })),
            Err(e) => {
                log_read_map_fallback(path, &e);
                self.open(path)
            }
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        fs::rename(from, to).map_err(|e| Error::io(IoOp::Rename, from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        fs::remove_file(path).map_err(|e| Error::io(IoOp::Remove, path, e))
    }

    fn link(&self, existing: &Path, new: &Path) -> Result<()> {
        fs::hard_link(existing, new).map_err(|e| Error::io(IoOp::Link, new, e))
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in fs::read_dir(dir).map_err(|e| Error::io(IoOp::List, dir, e))? {
            let entry = entry.map_err(|e| Error::io(IoOp::List, dir, e))?;
            if let Some(name) = entry.file_name().to_str() {
                names.push(name.to_owned());
            }
        }
        Ok(names)
    }

    fn exists(&self, path: &Path) -> Result<bool> {
        path.try_exists()
            .map_err(|e| Error::io(IoOp::Open, path, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| Error::io(IoOp::Sync, dir, e))
    }

    fn sync_file(&self, path: &Path) -> Result<()> {
        File::open(path)
            .and_then(|f| f.sync_data())
            .map_err(|e| Error::io(IoOp::Sync, path, e))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(path)
            .map_err(|e| Error::io(IoOp::Lock, path, e))?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(StdLock { _file: file })),
            Err(fs::TryLockError::WouldBlock) => Err(Error::Locked {
                path: path.to_owned(),
            }),
            Err(fs::TryLockError::Error(e)) => Err(Error::io(IoOp::Lock, path, e)),
        }
    }
}

/// Logs, once per process, that files meant to be mapped are written with `write()`.
fn log_mapped_fallback(path: &Path, e: &std::io::Error) {
    static LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        log::warn!(
            "matrixkv: {} cannot be written through a mapping ({e}); blob files of values \
             separated at write time are written with write() instead",
            path.display()
        );
    }
}

/// Logs, once per process, that files are read with `pread` because one could not be mapped.
fn log_read_map_fallback(path: &Path, e: &std::io::Error) {
    static LOGGED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !LOGGED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        log::warn!(
            "matrixkv: {} cannot be mapped for reading ({e}); blob files are read with \
             pread() instead",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mapped_file_reads_what_was_appended_after_it_was_opened_and_survives_shortening() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        // A writer's file at its reserved length: records, then zeros.
        let mut first: Vec<u8> = (0..20_000u32).map(|i| (i % 253) as u8).collect();
        first.resize(64 << 10, 0);
        std::fs::write(&path, &first).unwrap();
        let f = StdFs.open_mapped(&path).unwrap();
        assert_eq!(f.len(), 64 << 10);
        let mut buf = vec![0u8; 1000];
        f.read_exact_at(19_000, &mut buf).unwrap();
        assert_eq!(buf, first[19_000..20_000]);
        // Its first sync shortens it to the records, then appends go on past the old length.
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(20_000).unwrap();
        f.read_exact_at(19_000, &mut buf).unwrap();
        assert_eq!(buf, first[19_000..20_000]);
        let tail: Vec<u8> = (0..100_000u32).map(|i| (i % 241) as u8).collect();
        file.write_all_at(&tail, 20_000).unwrap();
        // Inside the mapping, and past it (pread).
        f.read_exact_at(30_000, &mut buf).unwrap();
        assert_eq!(buf, tail[10_000..11_000]);
        f.read_exact_at(100_000, &mut buf).unwrap();
        assert_eq!(buf, tail[80_000..81_000]);
        f.read_exact_at((64 << 10) - 500, &mut buf).unwrap();
        assert_eq!(
            buf,
            tail[(64 << 10) - 500 - 20_000..(64 << 10) + 500 - 20_000]
        );
        // Past the end of the file: an error, not a signal.
        let err = f.read_exact_at(120_000, &mut buf).unwrap_err();
        assert!(!err.is_corruption(), "{err}");
    }

    #[test]
    fn a_preallocated_file_keeps_its_length_and_gives_unused_space_back_at_sync() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = StdFs.create_streaming(&p, 0).unwrap();
        w.preallocate(8 << 20).unwrap();
        w.append(b"hello").unwrap();
        w.flush().unwrap();
        let reserved = fs::metadata(&p).unwrap();
        assert_eq!(
            reserved.len(),
            5,
            "the reservation does not change the length"
        );
        w.append(b" world").unwrap();
        w.sync().unwrap();
        let synced = fs::metadata(&p).unwrap();
        assert_eq!(synced.len(), 11);
        // 512-byte blocks: the reservation (where the file system made one) is gone.
        assert!(synced.blocks() <= reserved.blocks());
        assert!(
            synced.blocks() < (8 << 20) / 512,
            "{} blocks",
            synced.blocks()
        );
        assert_eq!(StdFs.read_all(&p).unwrap(), b"hello world");
    }

    #[test]
    fn written_bytes_read_back_after_sync() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = StdFs.create(&p).unwrap();
        w.append(b"hello ").unwrap();
        w.append(&vec![7u8; WRITE_BUFFER_BYTES + 3]).unwrap();
        w.sync().unwrap();
        let r = StdFs.open(&p).unwrap();
        assert_eq!(r.len(), 6 + WRITE_BUFFER_BYTES as u64 + 3);
        let mut b = [0u8; 6];
        r.read_exact_at(0, &mut b).unwrap();
        assert_eq!(&b, b"hello ");
        assert!(r.read_exact_at(r.len() - 1, &mut [0u8; 2]).is_err());
    }

    #[test]
    fn streaming_file_starts_writeback_as_it_grows_and_reads_back_whole() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        let mut w = StdFs.create_streaming(&p, 64 << 10).unwrap();
        let mut expected = Vec::new();
        for i in 0..40u32 {
            // Pieces of uneven sizes, some above the write buffer, so writeback requests
            // start at arbitrary offsets.
            let piece = vec![
                u8::try_from(i).unwrap();
                4096 * (i as usize % 7) + 100 + (i as usize) * 37_000
            ];
            w.append(&piece).unwrap();
            expected.extend_from_slice(&piece);
        }
        w.sync().unwrap();
        assert_eq!(w.len(), expected.len() as u64);
        assert_eq!(std::fs::read(&p).unwrap(), expected);
    }

    #[test]
    fn second_lock_on_same_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("LOCK");
        let l = StdFs.lock(&p).unwrap();
        assert!(matches!(StdFs.lock(&p), Err(Error::Locked { .. })));
        drop(l);
        assert!(StdFs.lock(&p).is_ok());
    }

    #[test]
    fn rename_and_list_and_remove() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        StdFs.create(&a).unwrap().sync().unwrap();
        StdFs.rename(&a, &dir.path().join("b")).unwrap();
        assert_eq!(StdFs.list(dir.path()).unwrap(), vec!["b".to_string()]);
        StdFs.remove(&dir.path().join("b")).unwrap();
        assert!(!StdFs.exists(&dir.path().join("b")).unwrap());
        StdFs.sync_dir(dir.path()).unwrap();
    }
}
