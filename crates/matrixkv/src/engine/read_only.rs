//! What a read-only handle (`Db::open_read_only`) needs beside the normal instance: the refusal
//! of every change, the placeholder WAL region its instance is built with, and the private
//! copies of fast-tier bytes it reads.
//!
//! The open itself is `recovery::open_read_only` (the normal open with every write skipped);
//! docs/decisions/0019-read-only-open.md says what such a handle sees.

use std::io;

use parking_lot::RwLock;

use super::DbInner;
use crate::error::{Error, Result};
use crate::tier::{PersistMode, Region};

impl DbInner {
    /// `Err(ReadOnly)` naming `op` when the database was opened read-only.
    pub(crate) fn check_writable(&self, op: &'static str) -> Result<()> {
        if self.read_only {
            Err(Error::ReadOnly { op })
        } else {
            Ok(())
        }
    }
}

/// A region in DRAM: the WAL writer of a read-only instance writes its header here and nothing
/// else, so the instance can be built without creating a segment on the fast tier; the WAL
/// dump reads a segment file copied into one.
#[derive(Debug)]
pub(crate) struct BytesRegion {
    bytes: RwLock<Vec<u8>>,
}

impl BytesRegion {
    /// `len` zero bytes.
    pub(crate) fn new(len: usize) -> BytesRegion {
        BytesRegion::from_bytes(vec![0; len])
    }

    /// A region holding `bytes` (a file read into memory, for `inspect::wal`).
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> BytesRegion {
        BytesRegion {
            bytes: RwLock::new(bytes),
        }
    }

    /// A private copy of `ranges` (offset, length) of `region`, zeros elsewhere: what a
    /// read-only handle reads instead of the fast tier's shared mapping, so a writer in another
    /// process that reuses those bytes later cannot change what the handle reads. The zeroed
    /// rest costs no memory until written (the allocator maps zero pages lazily).
    pub(crate) fn copy_of(
        region: &dyn Region,
        ranges: impl IntoIterator<Item = (usize, usize)>,
    ) -> io::Result<BytesRegion> {
        let mut bytes = vec![0; region.len()];
        for (offset, len) in ranges {
            let dst = offset
                .checked_add(len)
                .and_then(|end| bytes.get_mut(offset..end))
                .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "outside the region"))?;
            region.read(offset, dst)?;
        }
        Ok(BytesRegion::from_bytes(bytes))
    }

    fn range(&self, offset: usize, len: usize) -> io::Result<std::ops::Range<usize>> {
        offset
            .checked_add(len)
            .filter(|&end| end <= self.len())
            .map(|end| offset..end)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "outside the region"))
    }
}

impl Region for BytesRegion {
    fn len(&self) -> usize {
        self.bytes.read().len()
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        let r = self.range(offset, data.len())?;
        if let Some(dst) = self.bytes.write().get_mut(r) {
            dst.copy_from_slice(data);
        }
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let r = self.range(offset, buf.len())?;
        if let Some(src) = self.bytes.read().get(r) {
            buf.copy_from_slice(src);
        }
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        self.range(offset, len).map(|_| ())
    }

    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        self.write(offset, &value.to_le_bytes())
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn persist_mode(&self) -> PersistMode {
        PersistMode::Simulated
    }
}
