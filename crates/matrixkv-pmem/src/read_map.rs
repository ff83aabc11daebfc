//! [`ReadMap`]: a slow-tier file mapped read-only, so that reading a record is a copy out of
//! the page cache instead of a `pread` system call.
//!
//! Called by `StdFs::open_mapped` in the engine (blob files, whose values point reads and scans
//! copy one at a time). A load from a page past the file's *current* end, or an I/O error
//! reading a page that is not in the page cache, raises `SIGBUS` instead of returning an
//! error: the caller reads only ranges that lie within the file when it reads them (a file
//! may grow or shrink while mapped as long as no read reaches past its end). The engine maps
//! files in a directory its LOCK file owns and reads only records it has pointers to; a file
//! removed while mapped stays readable until the mapping is gone.
//!
//! Memory model: as in [`MmapRegion`](crate::MmapRegion), no Rust reference into the mapping is
//! ever formed; reads copy through raw pointers, and every bit pattern is a valid `u8`.
//!
//! Thread safety: `Send + Sync`; reads take `&self`.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::ptr::{self, NonNull};

/// A file mapped read-only (`PROT_READ`, `MAP_SHARED`) over its length at open.
#[derive(Debug)]
pub struct ReadMap {
    base: NonNull<u8>,
    len: usize,
    path: PathBuf,
}

// SAFETY: the mapping is owned exclusively by this value (unmapped only in `drop`) and is only
// read, through raw-pointer copies; moving the owner to another thread invalidates nothing.
unsafe impl Send for ReadMap {}

// SAFETY: `&self` methods only copy bytes out of the read-only mapping through raw pointers
// (no references into it), which any number of threads may do at once.
unsafe impl Sync for ReadMap {}

impl ReadMap {
    /// Maps the open `file` (at `path`) read-only over its current length. The descriptor
    /// may be closed: the mapping keeps the file's pages reachable (the caller may keep it to
    /// read what a writer appends past that length).
    ///
    /// # Errors
    /// `InvalidInput` for an empty file or one larger than the address space; any error of
    /// mmap.
    pub fn map(file: &File, path: &Path) -> io::Result<ReadMap> {
        let len = crate::mmap::mappable_len(file, "a file to map for reading")?;
        let base = crate::mmap::mmap_prot(file, len, libc::PROT_READ, libc::MAP_SHARED)?;
        Ok(ReadMap {
            base,
            len,
            path: path.to_owned(),
        })
    }

    /// The mapped length: the file's length when it was opened.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty mapping (never: [`ReadMap::map`] refuses empty files).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The mapped file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Copies the `buf.len()` bytes at `offset` into `buf`.
    ///
    /// # Errors
    /// `UnexpectedEof` if the range does not lie within the mapping.
    pub fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let in_bounds = offset
            .checked_add(buf.len())
            .is_some_and(|end| end <= self.len);
        if !in_bounds {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "read of {} bytes at {offset} past the end of a {}-byte mapping",
                    buf.len(),
                    self.len
                ),
            ));
        }
        // SAFETY: `offset` is within the mapping (checked above: `offset + buf.len() <= len`),
        // so the pointer stays inside the same allocation.
        let src = unsafe { self.base.as_ptr().add(offset) };
        // SAFETY: `[src, src + buf.len())` lies within the mapping, which lives as long as
        // `self`; `buf` is a distinct, writable Rust buffer, so the ranges cannot overlap. The
        // mapped bytes are only read, through a raw pointer.
        unsafe {
            ptr::copy_nonoverlapping(src, buf.as_mut_ptr(), buf.len());
        }
        Ok(())
    }
}

impl Drop for ReadMap {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` describe exactly the mapping made in `map`, unmapped only here.
        let rc = unsafe { libc::munmap(self.base.as_ptr().cast(), self.len) };
        if rc != 0 {
            log::warn!(
                "munmap of {} failed: {}",
                self.path.display(),
                io::Error::last_os_error()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file `name` in a fresh scratch directory of this test thread.
    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "matrixkv-pmem-read-map-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    #[test]
    fn reads_copy_the_file_bytes_and_refuse_ranges_past_its_end() {
        let path = scratch("f");
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let m = ReadMap::map(&File::open(&path).unwrap(), &path).unwrap();
        assert_eq!(m.len(), bytes.len());
        let mut buf = vec![0u8; 300];
        m.read(4_000, &mut buf).unwrap();
        assert_eq!(buf, bytes[4_000..4_300]);
        m.read(bytes.len() - 300, &mut buf).unwrap();
        assert_eq!(buf, bytes[bytes.len() - 300..]);
        let err = m.read(bytes.len() - 299, &mut buf).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(
            m.read(usize::MAX, &mut buf).unwrap_err().kind(),
            io::ErrorKind::UnexpectedEof
        );
        drop(m);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn a_file_removed_while_mapped_stays_readable() {
        let path = scratch("f");
        std::fs::write(&path, b"hello mapped world").unwrap();
        let m = ReadMap::map(&File::open(&path).unwrap(), &path).unwrap();
        std::fs::remove_file(&path).unwrap();
        let mut buf = [0u8; 6];
        m.read(6, &mut buf).unwrap();
        assert_eq!(&buf, b"mapped");
    }

    #[test]
    fn an_empty_file_is_refused() {
        let path = scratch("f");
        std::fs::write(&path, b"").unwrap();
        let err = ReadMap::map(&File::open(&path).unwrap(), &path).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        std::fs::remove_file(&path).unwrap();
    }
}
