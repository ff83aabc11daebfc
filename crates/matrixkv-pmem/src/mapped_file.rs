//! [`MappedFile`]: a file appended to through a shared read-write mapping of fixed capacity,
//! whose pages a [`Populator`] can fault in ahead of the writer.
//!
//! The engine writes the blob files of values separated at write time this way (`StdFs`'s
//! `create_mapped`): the commit path appends each group's values and must hand them to the
//! kernel before the group's WAL record. A `write()` of a fresh record spends most of its time
//! in the kernel zeroing and preparing new page-cache pages under the writer; a copy into a
//! mapped page that a helper thread faulted in beforehand (`MADV_POPULATE_WRITE`) moves that
//! work to the helper, and costs the writer a memory copy (measured in
//! docs/decisions/0028-write-amplification-floor.md, item 2 and its evidence).
//!
//! A store into a shared file mapping is in the page cache at once: a reader of the file
//! (`pread`) sees it, and it survives the death of the process. It is durable after
//! `fdatasync` of the file, as with `write()`.
//!
//! Space: the whole capacity is reserved with `fallocate` at creation (the file is then
//! `capacity` bytes long, zeros past what was written), so a store never has to allocate a
//! block: a full device fails the creation with ENOSPC instead of raising SIGBUS at a store.
//! File systems without `fallocate` are refused (`Unsupported`), and the caller writes the file
//! with `write()` instead.
//!
//! Memory model: as in [`crate::MmapRegion`], no Rust reference into the mapping is ever
//! formed; stores are raw-pointer copies by the one writer (`&mut self`), and the populator
//! only asks the kernel to fault pages in, which never changes their contents.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::mmap::{mmap_raw, page_size};

/// A file of `capacity` reserved bytes, mapped shared and written through the mapping by one
/// writer.
#[derive(Debug)]
pub struct MappedFile {
    map: Arc<Shared>,
    file: Arc<File>,
    path: PathBuf,
}

/// The mapping, of which the first `released` bytes were given back
/// ([`MappedFile::release_below`]).
#[derive(Debug)]
struct Shared {
    base: NonNull<u8>,
    len: usize,
    /// A multiple of the page size; raised only by the writer (`&mut MappedFile`) while it
    /// holds `unmapping`.
    released: AtomicUsize,
    /// Held by [`Populator::populate`] during its call and by `release_below` while it
    /// unmaps, so a range is never unmapped under the populator's advice.
    unmapping: Mutex<()>,
}

// SAFETY: `Shared` owns its mapping exclusively (only its `drop` and `release_below`, under
// `unmapping`, unmap parts of it); moving it to another thread invalidates nothing.
unsafe impl Send for Shared {}

// SAFETY: through `&Shared` the mapping's bytes are never read or written: the populator only
// passes the range to `madvise` under `unmapping`; stores need `&mut MappedFile`.
unsafe impl Sync for Shared {}

impl Drop for Shared {
    fn drop(&mut self) {
        let released = *self.released.get_mut();
        if released >= self.len {
            return;
        }
        let p = self
            .base
            .as_ptr()
            .wrapping_add(released)
            .cast::<libc::c_void>();
        // SAFETY: `[released, len)` is the part of the mapping created in `create` that is
        // still mapped (the front was unmapped by `release_below`), and this is its last owner.
        let rc = unsafe { libc::munmap(p, self.len - released) };
        if rc != 0 {
            log::warn!(
                "munmap of a mapped file failed: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// Faults in pages of a [`MappedFile`]'s mapping from another thread; keeps the mapping (not
/// the file) alive.
#[derive(Debug, Clone)]
pub struct Populator {
    map: Arc<Shared>,
}

impl MappedFile {
    /// Creates (or truncates) `path` (mode 0600), reserves `capacity` bytes for it with
    /// `fallocate` (its length becomes `capacity`, all zeros) and maps it shared, read-write.
    /// Nothing is synced: the caller syncs the file and its directory when it needs them.
    ///
    /// # Errors
    /// `InvalidInput` for a zero capacity; `Unsupported` where the file system has no
    /// `fallocate` (or the platform is not Linux); ENOSPC (`StorageFull`) when the device cannot
    /// hold `capacity` bytes; any error of open or mmap. The file is removed again if a step
    /// after its creation fails.
    pub fn create(path: &Path, capacity: usize) -> io::Result<MappedFile> {
        if capacity == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a mapped file needs a capacity",
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)?;
        let mapped = reserve_exactly(&file, capacity).and_then(|()| {
            let base = mmap_raw(&file, capacity, libc::MAP_SHARED)?;
            Ok(Arc::new(Shared {
                base,
                len: capacity,
                released: AtomicUsize::new(0),
                unmapping: Mutex::new(()),
            }))
        });
        match mapped {
            Ok(map) => Ok(MappedFile {
                map,
                file: Arc::new(file),
                path: path.to_owned(),
            }),
            Err(e) => {
                drop(file);
                if let Err(rm) = std::fs::remove_file(path) {
                    log::warn!("could not remove {} again: {rm}", path.display());
                }
                Err(e)
            }
        }
    }

    /// The mapped (and reserved) length.
    pub fn capacity(&self) -> usize {
        self.map.len
    }

    /// The file, for `fdatasync`, `set_len`, `sync_file_range` and writes past the capacity.
    pub fn file(&self) -> &Arc<File> {
        &self.file
    }

    /// The path the file was created at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies `data` into the file at `offset` through the mapping.
    ///
    /// # Errors
    /// `InvalidInput` if the range passes the capacity or starts below the part given back
    /// ([`MappedFile::release_below`]).
    pub fn write(&mut self, offset: usize, data: &[u8]) -> io::Result<()> {
        let released = self.map.released.load(Ordering::Relaxed);
        match offset.checked_add(data.len()) {
            Some(end) if end <= self.map.len && offset >= released => {}
            _ => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} bytes at offset {offset} are outside the mapped {released}..{} of {}",
                        data.len(),
                        self.map.len,
                        self.path.display()
                    ),
                ));
            }
        }
        let dst = self.map.base.as_ptr().wrapping_add(offset);
        // SAFETY: `[offset, offset + data.len())` lies inside the live mapping (checked above;
        // `self.map` keeps it mapped), and the file is at least `capacity` bytes long while
        // this value owns it (only `into_file` gives it away), so no store reaches past its
        // end (SIGBUS). `data` cannot overlap the mapping: no reference into the mapping is
        // ever formed. The only writer is `&mut self`; a `Populator` never stores.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    /// Unmaps the whole pages below `offset` (the writer is done with them), so that their
    /// writeback need not write-protect them in the page tables: a page still mapped costs the
    /// writeback a TLB shootdown on every CPU running the process (30% of the CPU of a
    /// benchmark that started writeback of 1 MiB ranges behind the writer). Skipped, returning
    /// `Ok(false)`, while a [`Populator`] is at work (the next call catches up); stores below
    /// the part given back are refused from then on.
    ///
    /// # Errors
    /// The kernel's `munmap` error (nothing was given back).
    pub fn release_below(&mut self, offset: usize) -> io::Result<bool> {
        let page = page_size()?;
        let target = (offset.min(self.map.len) / page) * page;
        let released = self.map.released.load(Ordering::Relaxed);
        if target <= released {
            return Ok(true);
        }
        let Ok(_guard) = self.map.unmapping.try_lock() else {
            return Ok(false);
        };
        let p = self
            .map
            .base
            .as_ptr()
            .wrapping_add(released)
            .cast::<libc::c_void>();
        // SAFETY: `[released, target)` is a page-aligned part of the live mapping that is still
        // mapped (`released` only grows, here); no store is in progress (`&mut self`), no
        // populator is advising it (`unmapping` is held), and no reference into the mapping
        // exists. Later stores there are refused by `write`.
        let rc = unsafe { libc::munmap(p, target - released) };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        self.map.released.store(target, Ordering::Relaxed);
        Ok(true)
    }

    /// A handle that faults in pages of this mapping from another thread.
    pub fn populator(&self) -> Populator {
        Populator {
            map: Arc::clone(&self.map),
        }
    }

    /// Gives the mapping up and returns the file (for example to shorten it to what was
    /// written). The pages stay mapped until the last [`Populator`] is dropped; stores made
    /// through the mapping are in the page cache already.
    pub fn into_file(self) -> Arc<File> {
        self.file
    }
}

impl Populator {
    /// Faults in the pages of `[offset, offset + len)` (clamped to the mapping) writable, as a
    /// store would, so the writer's stores there take no page fault. Returns `Ok(false)` where
    /// the kernel has no such call (`MADV_POPULATE_WRITE`, Linux 5.14): populating is then
    /// pointless to repeat.
    ///
    /// # Errors
    /// The kernel's: `EFAULT` once the file was shortened below the range (it is not touched),
    /// `ENOMEM`, `EINTR`.
    pub fn populate(&self, offset: usize, len: usize) -> io::Result<bool> {
        let page = page_size()?;
        let _guard = self
            .map
            .unmapping
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let start = (offset - offset % page).max(self.map.released.load(Ordering::Relaxed));
        let end = offset.saturating_add(len).min(self.map.len);
        if start >= end {
            return Ok(true);
        }
        populate_write(self.map.base.as_ptr(), start, end - start)
    }
}

#[cfg(target_os = "linux")]
fn populate_write(base: *mut u8, start: usize, len: usize) -> io::Result<bool> {
    // Not in every libc crate version: the value of Linux's uapi (asm-generic/mman-common.h).
    const MADV_POPULATE_WRITE: libc::c_int = 23;
    let at = base.wrapping_add(start).cast::<libc::c_void>();
    // SAFETY: `[start, start + len)` lies inside the caller's live mapping (`start` is page
    // aligned and not below the part given back, the end is clamped to the mapping's length,
    // and the caller's `Arc<Shared>` and its `unmapping` lock keep it mapped for the call). This advice only faults pages in as a write would; it
    // stores nothing and reads no memory of ours.
    let rc = unsafe { libc::madvise(at, len, MADV_POPULATE_WRITE) };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EINVAL) {
        // An older kernel: no such advice.
        return Ok(false);
    }
    Err(e)
}

#[cfg(not(target_os = "linux"))]
fn populate_write(_base: *mut u8, _start: usize, _len: usize) -> io::Result<bool> {
    Ok(false)
}

/// Sizes `file` to `len` bytes with every block allocated (`fallocate` mode 0), or
/// `Unsupported`: a sparse file would allocate at the first store to each page, and a full
/// device would then raise SIGBUS there.
#[cfg(target_os = "linux")]
fn reserve_exactly(file: &File, len: usize) -> io::Result<()> {
    let off = libc::off_t::try_from(len)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "capacity too large"))?;
    // SAFETY: fallocate only acts on the open descriptor, which `file` keeps open for the
    // call; it reads and writes no memory of ours.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), 0, 0, off) };
    if rc == 0 {
        return Ok(());
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EOPNOTSUPP | libc::ENOSYS) => Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("no fallocate on this file system: {e}"),
        )),
        _ => Err(e),
    }
}

#[cfg(not(target_os = "linux"))]
fn reserve_exactly(_file: &File, _len: usize) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "mapped files need Linux's fallocate",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    fn dir() -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "matrixkv-pmem-mapped-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn stores_through_the_mapping_are_read_by_pread_at_once_and_after_the_mapping_goes() {
        let d = dir();
        let p = d.join("stores");
        let mut m = MappedFile::create(&p, 3 * 4096 + 100).unwrap();
        assert_eq!(m.capacity(), 3 * 4096 + 100);
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 3 * 4096 + 100);
        let populator = m.populator();
        assert!(populator.populate(4000, 5000).is_ok());
        m.write(4090, b"across a page").unwrap();
        let reader = File::open(&p).unwrap();
        let mut b = [0u8; 13];
        reader.read_exact_at(&mut b, 4090).unwrap();
        assert_eq!(&b, b"across a page", "in the page cache before any sync");
        assert!(m.write(3 * 4096 + 90, b"past the end").is_err());
        // The first page given back: stores there are refused, the rest stays mapped.
        assert!(m.release_below(4096 + 10).unwrap());
        assert!(m.write(4000, b"x").is_err());
        m.write(4096 + 20, b"after").unwrap();
        assert!(populator.populate(0, 3 * 4096).unwrap());
        assert!(m.write(usize::MAX, b"x").is_err());
        let file = m.into_file();
        file.set_len(4103).unwrap();
        // The populator still holds the mapping; the range past the new end is not touched.
        let _ = populator.populate(0, 3 * 4096);
        drop(populator);
        file.sync_data().unwrap();
        let all = std::fs::read(&p).unwrap();
        assert_eq!(all.len(), 4103);
        assert_eq!(&all[4090..4103], b"across a page");
        assert!(all[..4090].iter().all(|&b| b == 0));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_zero_capacity_is_refused_and_leaves_no_file() {
        let d = dir();
        let p = d.join("empty");
        assert_eq!(
            MappedFile::create(&p, 0).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert!(!p.exists());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
