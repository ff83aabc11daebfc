//! The two storage seams: [`FileSystem`] for directory/file I/O (slow tier, and file-based
//! artifacts on the fast tier) and [`FastTier`] for mapped fast-tier regions.
//!
//! Every byte the engine stores goes through one of these traits, so tests can substitute
//! in-memory implementations that drop unsynced data or inject errors (feature `testing`).
//!
//! Thread safety: implementations are `Send + Sync`; a [`WritableFile`] is used by one thread
//! at a time; a [`RandomAccessFile`] may be read concurrently.

use std::fmt::Debug;
use std::path::Path;
use std::sync::Arc;

pub use matrixkv_pmem::{PersistMode, Region};

mod direct;
mod mapped;
#[cfg(any(test, feature = "testing"))]
mod mem_fs;
mod std_fs;
mod writeback;
#[cfg(any(test, feature = "testing"))]
pub use mem_fs::{Fault, FaultKind, FaultOp, FsCrashMode, MemFs, OpTrace};
pub use std_fs::StdFs;

mod fast_dir;
pub use fast_dir::DirFastTier;
mod slice;
pub(crate) use slice::RegionSlice;

#[cfg(any(test, feature = "testing"))]
mod sim_fast;
#[cfg(any(test, feature = "testing"))]
pub use matrixkv_pmem::{CrashPolicy, FaultPlan, SimulatedRegion};
#[cfg(any(test, feature = "testing"))]
pub use sim_fast::SimFastTier;

use crate::error::Result;

/// A file being written sequentially (SSTable, manifest, CURRENT temp file).
pub trait WritableFile: Send {
    /// Appends bytes (may be buffered until [`WritableFile::sync`] or drop).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Makes every appended byte durable (flush buffers + fdatasync).
    fn sync(&mut self) -> Result<()>;
    /// Makes every appended byte durable, as [`WritableFile::sync`], in a file that more
    /// appends will follow (a sync write into the blob file of the active memtable): a file
    /// written through a mapping ([`FileSystem::create_mapped`]) may keep its mapping and its
    /// reserved length, so later appends stay copies into the mapping; its last `sync`
    /// shortens it. The default is `sync`.
    fn sync_appended(&mut self) -> Result<()> {
        self.sync()
    }
    /// Hands every appended byte to the kernel (no sync): a process crash no longer loses
    /// them, and a reader of the file sees them.
    fn flush(&mut self) -> Result<()>;
    /// Reserves space for the first `bytes` of the file without changing its length, so a
    /// full file system fails here rather than in a later append, and appends into the
    /// reservation skip the file system's block allocation. Best effort where the file system
    /// has no such call; what stays unused is given back at the next `sync`.
    fn preallocate(&mut self, bytes: u64) -> Result<()>;
    /// Bytes appended so far.
    fn len(&self) -> u64;
    /// True when nothing was appended.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A file read at arbitrary offsets.
pub trait RandomAccessFile: Send + Sync + Debug {
    /// Fills `buf` with the bytes at `offset`; reading past the end is an error.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// File length in bytes.
    fn len(&self) -> u64;
    /// True for an empty file.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The path the file was opened from (for error messages).
    fn path(&self) -> &Path;
}

/// [`FileSystem::create_streaming`] with the first `capacity` bytes reserved
/// ([`WritableFile::preallocate`]): what [`FileSystem::create_mapped`] does by default and where
/// a file cannot be mapped.
fn create_reserved<F: FileSystem + ?Sized>(
    fs: &F,
    path: &Path,
    capacity: u64,
    writeback_bytes: u64,
) -> Result<Box<dyn WritableFile>> {
    let mut file = fs.create_streaming(path, writeback_bytes)?;
    file.preallocate(capacity)?;
    Ok(file)
}

/// An exclusive lock on a database directory; released on drop.
pub trait FileLock: Send + Sync + Debug {}

/// Directory and file operations.
pub trait FileSystem: Send + Sync + Debug {
    /// Creates `dir` and its parents (mode 0700 where supported).
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Creates (or truncates) `path` for sequential writing.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Like [`FileSystem::create`], for a large file written once and not read back soon
    /// (tables and blob files written by flushes and compactions): [`StdFs`] bypasses the page
    /// cache (`O_DIRECT`) where the file system allows it, and flushes the device every
    /// `writeback_bytes` in the background (0: only at `sync`; see
    /// [`FileSystem::create_streaming`]). Same contract as `create`; the default is `create`.
    fn create_direct(&self, path: &Path, writeback_bytes: u64) -> Result<Box<dyn WritableFile>> {
        let _ = writeback_bytes;
        self.create(path)
    }
    /// Like [`FileSystem::create`], for a large file written front to back through the page
    /// cache (tables and blob files of compactions): [`StdFs`] starts writing back and flushing
    /// each `writeback_bytes` in the background as they are written (`sync_file_range` and a
    /// helper thread's `fdatasync`), so the final `sync` waits for the last piece instead of
    /// the whole file. Same contract as `create` (bytes are durable after `sync`); the default
    /// is `create`.
    fn create_streaming(&self, path: &Path, writeback_bytes: u64) -> Result<Box<dyn WritableFile>> {
        let _ = writeback_bytes;
        self.create(path)
    }
    /// Like [`FileSystem::create_streaming`], for a file the commit path appends small records
    /// to and hands to the kernel after each group (the blob files of
    /// `Options::separate_at_write`), with `capacity` bytes reserved at once so a full file
    /// system fails here. [`StdFs`] writes it through a shared mapping of the capacity whose
    /// pages a helper thread faults in ahead of the writer (an append is a memory copy,
    /// `flush` does nothing), and with `write()` after its first `sync` and past the
    /// capacity; until that `sync` the file is `capacity` bytes long, zeros past the appended
    /// bytes, and a crash may leave it so. Where the file system cannot map it, and by
    /// default: `create_streaming` and [`WritableFile::preallocate`].
    fn create_mapped(
        &self,
        path: &Path,
        capacity: u64,
        writeback_bytes: u64,
    ) -> Result<Box<dyn WritableFile>> {
        create_reserved(self, path, capacity, writeback_bytes)
    }
    /// Opens `path` for random reads.
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Like [`FileSystem::open`], for a file whose reads are small and many (blob files,
    /// `Options::mmap_blob_reads`): [`StdFs`] maps its length at open read-only, so a read
    /// there is a copy from the page cache without a system call (and `pread` past it, where a
    /// writer appended since), and an I/O error of the device under it stops the process
    /// (`SIGBUS`) instead of returning an error. The caller must never read past the file's
    /// current end (a file shortened under the mapping would raise `SIGBUS` there). The
    /// default, and where the file cannot be mapped: `open`.
    fn open_mapped(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open(path)
    }
    /// Reads a whole (small) file.
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let f = self.open(path)?;
        let len = usize::try_from(f.len()).map_err(|_| {
            crate::error::Error::invalid(format!("{} is too large to read", path.display()))
        })?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(0, &mut buf)?;
        Ok(buf)
    }
    /// Atomically renames `from` to `to` (replacing `to`).
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes `new` a second name of the existing file `existing` (a hard link), so that an
    /// immutable file is shared instead of copied (checkpoints). Fails where the file system
    /// cannot, for example across devices; callers then copy. The default cannot link.
    fn link(&self, existing: &Path, new: &Path) -> Result<()> {
        let _ = existing;
        Err(crate::error::Error::io(
            crate::error::IoOp::Link,
            new,
            std::io::Error::from(std::io::ErrorKind::Unsupported),
        ))
    }
    /// Names (not paths) of the entries of `dir`.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// True if `path` exists.
    fn exists(&self, path: &Path) -> Result<bool>;
    /// Makes the directory entries of `dir` durable (fsync of the directory).
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Makes the data of the existing file `path` durable (fdatasync): a file written by an
    /// earlier process that a recovery relies on.
    fn sync_file(&self, path: &Path) -> Result<()>;
    /// Takes an exclusive lock on `path` (created if missing); [`crate::Error::Locked`] if held.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
}

/// The fast tier: a directory of preallocated, mapped regions (WAL segments, page pools).
pub trait FastTier: Send + Sync + Debug {
    /// The directory holding the regions.
    fn dir(&self) -> &Path;
    /// Creates a zero-filled region file `name` of `len` bytes and maps it. Fails if it exists.
    /// The region appears under `name` only once complete (a crash during creation leaves no
    /// region of that name).
    fn create_region(&self, name: &str, len: usize) -> Result<Arc<dyn Region>>;
    /// Maps an existing region file.
    fn open_region(&self, name: &str) -> Result<Arc<dyn Region>>;
    /// Removes a region file. The caller guarantees no mapping of it is still used.
    fn remove(&self, name: &str) -> Result<()>;
    /// Renames region file `from` to `to` (replacing `to` if it exists), atomically. Mappings
    /// of the region stay valid and keep mapping it. Like the other directory operations, the
    /// new name is durable only after [`FastTier::sync_dir`]. Used to recycle WAL segments.
    fn rename(&self, from: &str, to: &str) -> Result<()>;
    /// Names of the files in the fast-tier directory.
    fn list(&self) -> Result<Vec<String>>;
    /// Makes the directory entries durable.
    fn sync_dir(&self) -> Result<()>;
    /// Bytes that new regions can still take (`statvfs`'s blocks available to the process,
    /// for a directory), so an open can refuse with a clear message before it maps a region
    /// the tier has no room for. `None` when the tier cannot tell; the default.
    fn free_bytes(&self) -> Result<Option<u64>> {
        Ok(None)
    }
}
