//! [`MmapRegion`]: a fast-tier file mapped into memory with `mmap`, the real [`Region`].
//!
//! Called by the engine's `DirFastTier` (WAL segments and L0 pools live in these regions).
//!
//! Mapping: on x86_64 Linux the file is first mapped `MAP_SHARED_VALIDATE | MAP_SYNC`, which only
//! succeeds on a DAX file system (persistent memory). Then stores are made persistent from user
//! space by flushing each 64-byte cache line of the range (`clwb`, else `clflushopt`, else
//! `clflush`, chosen from CPUID) followed by `sfence`. Where the kernel refuses `MAP_SYNC`
//! (`EOPNOTSUPP`/`EINVAL`: tmpfs, ordinary files) the file is mapped `MAP_SHARED` and persisted
//! with `msync(MS_SYNC)` on the page range. Setting the environment variable
//! `MATRIXKV_PMEM_FORCE_MSYNC=1` skips the `MAP_SYNC` attempt (useful to test the msync path on
//! DAX hardware). Other targets always use msync.
//!
//! Memory model: the mapping is shared with the file, so its bytes may change under us (another
//! process, or another thread of the caller writing a range it owns). This module therefore never
//! forms Rust references (`&[u8]` / `&mut [u8]`) into the mapping: every access goes through raw
//! pointers (`copy_nonoverlapping`) or `AtomicU64` for the commit words, and every bit pattern is
//! a valid `u8`. The [`Region`] contract makes callers confine concurrent writers to disjoint
//! ranges and read only ranges whose publication they observed.
//!
//! Thread safety: `MmapRegion` is `Send + Sync`; all methods take `&self`.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;

use crate::{PersistMode, Region};

/// Environment variable that forces the plain `MAP_SHARED` + `msync` path when set to `1`.
pub const FORCE_MSYNC_ENV: &str = "MATRIXKV_PMEM_FORCE_MSYNC";

/// Cache-line size assumed for flushes (every x86_64 CPU with these instructions uses 64).
#[cfg(target_arch = "x86_64")]
const CACHE_LINE: usize = 64;

/// A fast-tier file mapped read-write and shared, with the persist method chosen at map time.
///
/// The mapping lives until the value and every [`Region::view`] of it are dropped (`munmap`). The file itself is not kept open:
/// a shared mapping stays valid after its descriptor is closed.
#[derive(Debug)]
pub struct MmapRegion {
    /// The mapping, shared with the [`Region::view`]s taken of it (which keep it mapped).
    map: Arc<Mapping>,
    /// Start of the mapping (page aligned, `len` bytes long); a copy of `map.base`.
    base: NonNull<u8>,
    len: usize,
    mode: PersistMode,
    path: PathBuf,
    /// The end of the sealed prefix: every view lies below it, and while a view is alive no
    /// store may go below it (see [`Region::view`]). Taken by every store and every view, so
    /// a view and a store to the same bytes can never overlap in time.
    sealed: Mutex<usize>,
}

/// One `mmap`ed range, unmapped when the region and its last view are gone.
#[derive(Debug)]
struct Mapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: a `Mapping` owns its mapping exclusively (only its `drop` unmaps it) and exposes no
// way to write through it; moving it to another thread invalidates nothing.
unsafe impl Send for Mapping {}

// SAFETY: `Mapping` has no `&self` method that accesses the bytes; readers go through
// `MappedBytes`, whose soundness argument is there.
unsafe impl Sync for Mapping {}

impl Drop for Mapping {
    fn drop(&mut self) {
        let p = self.base.as_ptr().cast::<libc::c_void>();
        // SAFETY: `base`/`len` describe exactly the mapping created in `map_file`, it is unmapped
        // only here, and this is the last owner (the region and every view hold an `Arc`).
        let rc = unsafe { libc::munmap(p, self.len) };
        if rc != 0 {
            log::warn!(
                "munmap of a fast-tier region failed: {}",
                io::Error::last_os_error()
            );
        }
    }
}

/// The owner behind a [`Bytes`] view: a sealed range of a mapping, kept mapped while it lives.
struct MappedBytes {
    map: Arc<Mapping>,
    offset: usize,
    len: usize,
}

impl AsRef<[u8]> for MappedBytes {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `[offset, offset + len)` was bounds-checked against the mapping when the view
        // was made, and `map` keeps the mapping alive. The bytes are immutable while this
        // owner lives: the range lies below the region's seal, and `MmapRegion::write` and
        // `publish_u64` refuse every store below the seal while a view exists (the view count
        // is this `Arc`'s strong count, checked under the same lock that made the view). The
        // mapping is shared with the file: another process writing the file could still
        // change them, which the database's LOCK file excludes for every process that writes.
        let start = unsafe { self.map.base.as_ptr().add(self.offset) };
        // SAFETY: as above: `start` begins `len` readable bytes that stay mapped and unchanged
        // for the lifetime of `&self`.
        unsafe { std::slice::from_raw_parts(start, self.len) }
    }
}

// SAFETY: `MmapRegion` owns its mapping (through `map`, shared only with views, which never
// write), and the pointer is only dereferenced through raw-pointer copies and atomics or, for
// views, through immutable slices of sealed ranges that no store may touch while they live;
// moving the owner to another thread cannot invalidate any borrow.
unsafe impl Send for MmapRegion {}

// SAFETY: every `&self` method accesses the mapping through raw-pointer copies or `AtomicU64`,
// like memory shared with another process, except `view`, whose ranges are frozen while the
// view lives (see `MappedBytes`); the mapping stays valid until the last `Arc<Mapping>` is
// dropped. Concurrent writes to overlapping ranges are excluded by the `Region` contract.
unsafe impl Sync for MmapRegion {}

impl MmapRegion {
    /// Creates the file `path` (it must not exist; mode 0600), sizes it to `len` zero bytes
    /// with its storage reserved (see `reserve`), fsyncs it and maps it.
    ///
    /// The directory entry is not synced here: the caller syncs the directory. If a step after
    /// the file's creation fails, the file is removed again so the name can be reused.
    ///
    /// # Errors
    /// `InvalidInput` for `len == 0`; any error of create/fallocate/fsync/mmap (`AlreadyExists`
    /// if the file exists, `StorageFull` (ENOSPC) when the device cannot hold `len` bytes).
    pub fn create(path: &Path, len: usize) -> io::Result<MmapRegion> {
        if len == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a fast-tier region must not be empty",
            ));
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)?;
        let sized = u64::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region length too large"))
            .and_then(|len64| reserve(&file, len64))
            .and_then(|()| file.sync_all())
            .and_then(|()| map_file(&file, path, len));
        match sized {
            Ok(region) => Ok(region),
            Err(e) => {
                if let Err(rm) = fs::remove_file(path) {
                    log::warn!(
                        "could not remove partially created region {}: {rm}",
                        path.display()
                    );
                }
                Err(e)
            }
        }
    }

    /// Maps the existing file `path`; the region's length is the file's length.
    ///
    /// # Errors
    /// `NotFound` if the file is missing, `InvalidInput` if it is empty or larger than the
    /// address space, or the error of open/mmap.
    pub fn open(path: &Path) -> io::Result<MmapRegion> {
        let file = OpenOptions::new().read(true).write(true).open(path)?;
        let len = mappable_len(&file, "region file")?;
        map_file(&file, path, len)
    }

    /// The file this region maps.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The seal, locked (a poisoned lock still holds a valid offset).
    fn lock_seal(&self) -> MutexGuard<'_, usize> {
        self.sealed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Admits a store to `[offset, offset + len)`: refused if it reaches below the seal while
    /// a view is alive; without views the seal drops to `offset`. The returned guard must be
    /// held during the store, so no view of these bytes can be taken meanwhile.
    fn admit_store(&self, offset: usize, len: usize) -> io::Result<MutexGuard<'_, usize>> {
        let mut sealed = self.lock_seal();
        if offset < *sealed {
            if self.live_views() > 0 {
                return Err(io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    format!(
                        "store of {len} bytes at offset {offset} of {} reaches below its sealed \
                         prefix ({} bytes) while {} view(s) of it are alive",
                        self.path.display(),
                        *sealed,
                        self.live_views()
                    ),
                ));
            }
            *sealed = offset;
        }
        Ok(sealed)
    }

    /// Checks that `[offset, offset + len)` lies inside the region.
    fn check_range(&self, offset: usize, len: usize) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range of {len} bytes at offset {offset} is outside the {} byte region {}",
                    self.len,
                    self.path.display()
                ),
            )),
        }
    }

    /// Checks that the 8-byte word at `offset` is aligned and inside the region.
    fn check_word(&self, offset: usize) -> io::Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("commit word offset {offset} is not 8-byte aligned"),
            ));
        }
        self.check_range(offset, 8)
    }

    /// Pointer to byte `offset`; `offset <= len` must have been checked.
    fn ptr_at(&self, offset: usize) -> *mut u8 {
        debug_assert!(offset <= self.len);
        // SAFETY: callers check `offset <= self.len`, so the result stays inside the mapping or
        // one past its end, which is allowed for `add`; the mapping is one allocation of `len`
        // bytes (len < isize::MAX, as the kernel never maps more).
        unsafe { self.base.as_ptr().add(offset) }
    }

    /// The 8-byte aligned word at `offset` as an atomic; `check_word` must have passed.
    fn word_at(&self, offset: usize) -> &AtomicU64 {
        let p = self.ptr_at(offset).cast::<u64>();
        // SAFETY: `p` is inside the mapping (checked by `check_word`), valid for 8 bytes for as
        // long as `&self` lives (the mapping is only unmapped in `drop`), and 8-byte aligned
        // (the mapping is page aligned and `offset` is a multiple of 8). Mixed non-atomic access
        // to the same word is excluded by the `Region` contract (commit words are only written
        // with `publish_u64`).
        unsafe { AtomicU64::from_ptr(p) }
    }

    /// Flushes every cache line of `[offset, offset + len)` with `flush`, then fences.
    #[cfg(target_arch = "x86_64")]
    fn flush_lines(&self, offset: usize, len: usize) {
        let mode = self.mode;
        let start = offset & !(CACHE_LINE - 1);
        let end = offset + len;
        let mut line = start;
        while line < end {
            let p = self.ptr_at(line).cast_const();
            flush_line(mode, p);
            line += CACHE_LINE;
        }
        sfence();
    }

    /// `msync(MS_SYNC)` of the pages covering `[offset, offset + len)`.
    fn msync_range(&self, offset: usize, len: usize) -> io::Result<()> {
        let page = page_size()?;
        let start = offset - offset % page;
        let sync_len = offset + len - start;
        let p = self.ptr_at(start).cast::<libc::c_void>();
        // SAFETY: `[start, start + sync_len)` lies inside our mapping (start is `offset` rounded
        // down to the page containing it, the mapping is page aligned, and the end was
        // range-checked), and msync does not touch memory contents.
        let rc = unsafe { libc::msync(p, sync_len, libc::MS_SYNC) };
        if rc == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }
}

impl Region for MmapRegion {
    fn len(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.check_range(offset, data.len())?;
        let _sealed = self.admit_store(offset, data.len())?;
        let dst = self.ptr_at(offset);
        // SAFETY: the destination range was bounds-checked against the live mapping; `data` is a
        // Rust slice and cannot overlap the mapping because no reference into the mapping is
        // ever created; `u8` has no alignment requirement.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.check_range(offset, buf.len())?;
        let src = self.ptr_at(offset).cast_const();
        // SAFETY: the source range was bounds-checked against the live mapping; `buf` is a
        // unique Rust slice that cannot overlap the mapping (no references into it exist); every
        // byte value is a valid `u8`.
        unsafe { ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len()) };
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        self.check_range(offset, len)?;
        if len == 0 {
            return Ok(());
        }
        match self.mode {
            #[cfg(target_arch = "x86_64")]
            PersistMode::Clwb | PersistMode::ClflushOpt | PersistMode::Clflush => {
                self.flush_lines(offset, len);
                Ok(())
            }
            _ => self.msync_range(offset, len),
        }
    }

    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        self.check_word(offset)?;
        {
            let _sealed = self.admit_store(offset, 8)?;
            self.word_at(offset).store(value, Ordering::Release);
        }
        self.persist(offset, 8)
    }

    fn view(&self, offset: usize, len: usize) -> io::Result<Bytes> {
        self.check_range(offset, len)?;
        let mut sealed = self.lock_seal();
        *sealed = (*sealed).max(offset + len);
        Ok(Bytes::from_owner(MappedBytes {
            map: Arc::clone(&self.map),
            offset,
            len,
        }))
    }

    fn live_views(&self) -> usize {
        Arc::strong_count(&self.map) - 1
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        self.check_word(offset)?;
        Ok(self.word_at(offset).load(Ordering::Acquire))
    }

    fn persist_mode(&self) -> PersistMode {
        self.mode
    }
}

/// True when `MATRIXKV_PMEM_FORCE_MSYNC=1`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn force_msync() -> bool {
    std::env::var_os(FORCE_MSYNC_ENV).is_some_and(|v| v == "1")
}

/// Maps `len` bytes of `file` shared and read-write, preferring `MAP_SYNC`.
fn map_file(file: &File, path: &Path, len: usize) -> io::Result<MmapRegion> {
    let (base, mode) = match map_sync(file, len)? {
        Some(base) => (base, flush_mode()),
        None => (mmap_raw(file, len, libc::MAP_SHARED)?, PersistMode::Msync),
    };
    log::info!(
        "mapped fast-tier region {} ({len} bytes), persist mode {mode:?}",
        path.display()
    );
    Ok(MmapRegion {
        map: Arc::new(Mapping { base, len }),
        base,
        len,
        mode,
        path: path.to_owned(),
        sealed: Mutex::new(0),
    })
}

/// Tries a `MAP_SHARED_VALIDATE | MAP_SYNC` mapping; `None` if the kernel or the file system
/// refuses it (or it is disabled), so the caller falls back to `MAP_SHARED`.
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn map_sync(file: &File, len: usize) -> io::Result<Option<NonNull<u8>>> {
    if force_msync() {
        return Ok(None);
    }
    match mmap_raw(file, len, libc::MAP_SHARED_VALIDATE | libc::MAP_SYNC) {
        Ok(base) => Ok(Some(base)),
        Err(e) if matches!(e.raw_os_error(), Some(libc::EOPNOTSUPP | libc::EINVAL)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Without x86_64 Linux there is no user-space flush path: always msync.
#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn map_sync(_file: &File, _len: usize) -> io::Result<Option<NonNull<u8>>> {
    Ok(None)
}

/// `mmap(NULL, len, PROT_READ | PROT_WRITE, flags, fd, 0)`.
/// Sizes `file` to `len` bytes and reserves their storage, so that a full device shows up here
/// as ENOSPC rather than later, as SIGBUS, when a store to the mapping touches a hole (tmpfs,
/// ext4 and xfs allocate holes on first write). Falls back to a sparse `set_len` on file
/// systems without `fallocate`.
fn reserve(file: &File, len: u64) -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        let off = libc::off_t::try_from(len)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "region length too large"))?;
        // SAFETY: posix_fallocate only acts on the open descriptor, which `file` keeps open for
        // the duration of the call; it reads and writes no memory of ours.
        let rc = unsafe { libc::posix_fallocate(file.as_raw_fd(), 0, off) };
        match rc {
            0 => return Ok(()),
            libc::EOPNOTSUPP | libc::EINVAL => {}
            e => return Err(io::Error::from_raw_os_error(e)),
        }
    }
    file.set_len(len)
}

/// A read-write mapping of the first `len` bytes of `file` with `flags`.
pub(crate) fn mmap_raw(file: &File, len: usize, flags: libc::c_int) -> io::Result<NonNull<u8>> {
    mmap_prot(file, len, libc::PROT_READ | libc::PROT_WRITE, flags)
}

/// A mapping of the first `len` bytes of `file` with protection `prot` and `flags`.
pub(crate) fn mmap_prot(
    file: &File,
    len: usize,
    prot: libc::c_int,
    flags: libc::c_int,
) -> io::Result<NonNull<u8>> {
    let fd = file.as_raw_fd();
    // SAFETY: a fresh mapping at an address chosen by the kernel (NULL hint, no MAP_FIXED) cannot
    // alias any existing Rust memory; `fd` is a valid open descriptor for the duration of the
    // call; the result is checked for MAP_FAILED below.
    let p = unsafe { libc::mmap(ptr::null_mut(), len, prot, flags, fd, 0) };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned a null mapping"))
}

/// The length of `file` (`what`, for the error) as a mapping length: `InvalidInput` if it is
/// empty or does not fit the address space.
pub(crate) fn mappable_len(file: &File, what: &str) -> io::Result<usize> {
    let len64 = file.metadata()?.len();
    let len = usize::try_from(len64).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} of {len64} bytes does not fit the address space"),
        )
    })?;
    if len == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} is empty"),
        ));
    }
    Ok(len)
}

/// The page size used to align msync ranges.
pub(crate) fn page_size() -> io::Result<usize> {
    // SAFETY: sysconf only reads a system constant.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(v)
        .ok()
        .filter(|p| p.is_power_of_two())
        .ok_or_else(|| io::Error::other(format!("sysconf(_SC_PAGESIZE) returned {v}")))
}

/// The best cache-line flush instruction of this CPU (CPUID leaf 7, sub-leaf 0, EBX).
#[cfg(target_arch = "x86_64")]
#[allow(
    unused_unsafe,
    reason = "the CPUID intrinsics are safe from Rust 1.94 on, unsafe in older toolchains of the MSRV range"
)]
fn flush_mode() -> PersistMode {
    use std::arch::x86_64::{__cpuid_count, __get_cpuid_max};
    // SAFETY: CPUID exists on every x86_64 CPU.
    let max_leaf = unsafe { __get_cpuid_max(0) }.0;
    if max_leaf < 7 {
        return PersistMode::Clflush;
    }
    // SAFETY: as above; leaf 7 is supported (checked against the maximum leaf).
    let ebx = unsafe { __cpuid_count(7, 0) }.ebx;
    if ebx & (1 << 24) != 0 {
        PersistMode::Clwb
    } else if ebx & (1 << 23) != 0 {
        PersistMode::ClflushOpt
    } else {
        PersistMode::Clflush
    }
}

/// Never called: `map_sync` never succeeds off x86_64.
#[cfg(not(target_arch = "x86_64"))]
fn flush_mode() -> PersistMode {
    PersistMode::Msync
}

/// Flushes the cache line holding `p` with the instruction of `mode`.
#[cfg(target_arch = "x86_64")]
fn flush_line(mode: PersistMode, p: *const u8) {
    use std::arch::asm;
    match mode {
        PersistMode::Clwb => {
            // SAFETY: `flush_mode` saw CLWB in CPUID; the instruction only writes the line back
            // to memory and does not change its contents or any Rust-visible state; `p` points
            // into our live mapping.
            unsafe { asm!("clwb [{0}]", in(reg) p, options(nostack, preserves_flags)) };
        }
        PersistMode::ClflushOpt => {
            // SAFETY: `flush_mode` saw CLFLUSHOPT in CPUID; the instruction only writes back and
            // evicts the line, leaving its contents unchanged; `p` points into our live mapping.
            unsafe { asm!("clflushopt [{0}]", in(reg) p, options(nostack, preserves_flags)) };
        }
        _ => {
            // SAFETY: CLFLUSH is part of SSE2, which every x86_64 CPU has; it leaves the line's
            // contents unchanged; `p` points into our live mapping.
            unsafe { asm!("clflush [{0}]", in(reg) p, options(nostack, preserves_flags)) };
        }
    }
}

/// Orders the preceding flushes before any later store (`sfence`).
#[cfg(target_arch = "x86_64")]
fn sfence() {
    // SAFETY: SFENCE (SSE, present on every x86_64 CPU) only orders stores and flushes.
    unsafe { std::arch::asm!("sfence", options(nostack, preserves_flags)) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// A unique directory under `base`, removed on drop.
    struct TestDir(PathBuf);

    impl TestDir {
        fn new_in(base: &Path) -> TestDir {
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let p = base.join(format!("matrixkv-pmem-test-{}-{n}", std::process::id()));
            fs::create_dir_all(&p).unwrap();
            TestDir(p)
        }

        fn new() -> TestDir {
            TestDir::new_in(&std::env::temp_dir())
        }
    }

    impl Drop for TestDir {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn persisted_bytes_are_read_back_after_reopen() {
        let d = TestDir::new();
        let p = d.0.join("r");
        {
            let r = MmapRegion::create(&p, 10_000).unwrap();
            assert_eq!(r.len(), 10_000);
            assert_eq!(r.path(), p);
            r.write(4093, b"across a page").unwrap();
            r.persist(4093, 13).unwrap();
            r.write(9_990, b"0123456789").unwrap();
            r.persist(0, 10_000).unwrap();
        }
        let r = MmapRegion::open(&p).unwrap();
        assert_eq!(r.len(), 10_000);
        let mut b = [0u8; 13];
        r.read(4093, &mut b).unwrap();
        assert_eq!(&b, b"across a page");
        let mut t = [0u8; 10];
        r.read(9_990, &mut t).unwrap();
        assert_eq!(&t, b"0123456789");
        let mut z = [1u8; 16];
        r.read(0, &mut z).unwrap();
        assert_eq!(z, [0u8; 16], "a new region is zero-filled");
    }

    #[test]
    fn a_view_shares_the_mapping_and_freezes_its_bytes_while_it_lives() {
        let d = TestDir::new();
        let r = MmapRegion::create(&d.0.join("r"), 1 << 16).unwrap();
        r.write(100, b"record one").unwrap();
        let v = r.view(100, 10).unwrap();
        assert_eq!(&v[..], b"record one");
        assert_eq!(r.live_views(), 1);
        // Appending after the sealed prefix is allowed; rewriting inside it is not.
        r.write(110, b"record two").unwrap();
        let err = r.write(0, b"x").unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
        assert!(
            r.publish_u64(104, 7).is_err(),
            "a commit word inside the seal"
        );
        assert_eq!(&v[..], b"record one");
        // Slices share the view; the view outlives the region (the mapping stays mapped).
        let part = v.slice(7..);
        drop(v);
        assert_eq!(r.live_views(), 1);
        drop(r);
        assert_eq!(&part[..], b"one");
    }

    #[test]
    fn without_views_the_whole_region_is_writable_again() {
        let d = TestDir::new();
        let r = MmapRegion::create(&d.0.join("r"), 1 << 16).unwrap();
        r.write(0, b"old bytes").unwrap();
        drop(r.view(0, 9).unwrap());
        assert_eq!(r.live_views(), 0);
        r.write(0, b"new bytes").unwrap();
        let v = r.view(4, 5).unwrap();
        assert_eq!(&v[..], b"bytes");
        assert!(r.write(3, b"!").is_err());
    }

    #[test]
    fn create_reserves_the_storage_of_the_whole_region() {
        use std::os::unix::fs::MetadataExt;
        let d = TestDir::new();
        let p = d.0.join("r");
        let _r = MmapRegion::create(&p, 1 << 20).unwrap();
        let meta = fs::metadata(&p).unwrap();
        assert_eq!(meta.len(), 1 << 20);
        // Blocks are 512-byte units: the whole length is allocated, not a sparse hole.
        assert!(meta.blocks() * 512 >= 1 << 20, "{} blocks", meta.blocks());
    }

    #[test]
    fn create_refuses_existing_file_and_empty_length() {
        let d = TestDir::new();
        let p = d.0.join("r");
        let _r = MmapRegion::create(&p, 64).unwrap();
        let e = MmapRegion::create(&p, 64).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        let e = MmapRegion::create(&d.0.join("empty"), 0).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert!(!d.0.join("empty").exists());
    }

    #[test]
    fn open_of_missing_or_empty_file_fails() {
        let d = TestDir::new();
        let e = MmapRegion::open(&d.0.join("missing")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        fs::write(d.0.join("empty"), b"").unwrap();
        let e = MmapRegion::open(&d.0.join("empty")).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }

    #[test]
    fn out_of_range_access_is_rejected() {
        let d = TestDir::new();
        let r = MmapRegion::create(&d.0.join("r"), 100).unwrap();
        let kind = |res: io::Result<()>| res.unwrap_err().kind();
        assert_eq!(kind(r.write(99, b"ab")), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.write(usize::MAX, b"a")), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.read(101, &mut [])), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.read(96, &mut [0u8; 5])), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.persist(50, 51)), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.persist(usize::MAX, 2)), io::ErrorKind::InvalidInput);
        assert_eq!(
            r.read_u64(96).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(kind(r.publish_u64(96, 1)), io::ErrorKind::InvalidInput);
        r.write(98, b"ab").unwrap();
        r.read(100, &mut []).unwrap();
        r.persist(100, 0).unwrap();
    }

    #[test]
    fn published_word_is_read_back_little_endian() {
        let d = TestDir::new();
        let p = d.0.join("r");
        {
            let r = MmapRegion::create(&p, 4096).unwrap();
            r.publish_u64(8, 0x0102_0304_0506_0708).unwrap();
            assert_eq!(r.read_u64(8).unwrap(), 0x0102_0304_0506_0708);
            assert_eq!(r.read_u64(0).unwrap(), 0);
        }
        let r = MmapRegion::open(&p).unwrap();
        assert_eq!(r.read_u64(8).unwrap(), 0x0102_0304_0506_0708);
        let mut b = [0u8; 8];
        r.read(8, &mut b).unwrap();
        assert_eq!(u64::from_le_bytes(b), 0x0102_0304_0506_0708);
    }

    #[test]
    fn unaligned_commit_word_is_rejected() {
        let d = TestDir::new();
        let r = MmapRegion::create(&d.0.join("r"), 64).unwrap();
        assert_eq!(
            r.publish_u64(4, 7).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            r.read_u64(12).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        assert_eq!(
            r.read_u64(0).unwrap(),
            0,
            "a rejected publish stores nothing"
        );
    }

    #[test]
    fn tmpfs_mapping_persists_with_msync() {
        let shm = Path::new("/dev/shm");
        if !shm.is_dir() {
            return;
        }
        let d = TestDir::new_in(shm);
        let r = MmapRegion::create(&d.0.join("r"), 8192).unwrap();
        assert_eq!(r.persist_mode(), PersistMode::Msync);
        r.write(5000, b"x").unwrap();
        r.persist(5000, 1).unwrap();
        r.publish_u64(4096, 3).unwrap();
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn cache_line_flush_persist_runs_on_this_cpu() {
        // A DAX file system is rarely available in tests, so run the flush path of the CPU's
        // best instruction (and of every weaker one it has) on an ordinary shared mapping:
        // the instructions are valid on any memory.
        let d = TestDir::new();
        let mut r = MmapRegion::create(&d.0.join("r"), 4096).unwrap();
        let best = flush_mode();
        let usable: &[PersistMode] = match best {
            PersistMode::Clwb => &[
                PersistMode::Clwb,
                PersistMode::ClflushOpt,
                PersistMode::Clflush,
            ],
            PersistMode::ClflushOpt => &[PersistMode::ClflushOpt, PersistMode::Clflush],
            _ => &[PersistMode::Clflush],
        };
        for &mode in usable {
            r.mode = mode;
            r.write(60, b"spans two lines").unwrap();
            r.persist(60, 15).unwrap();
            r.publish_u64(4088, 11).unwrap();
            r.persist(0, 4096).unwrap();
        }
        let mut b = [0u8; 15];
        r.read(60, &mut b).unwrap();
        assert_eq!(&b, b"spans two lines");
        assert_eq!(r.read_u64(4088).unwrap(), 11);
    }
}
