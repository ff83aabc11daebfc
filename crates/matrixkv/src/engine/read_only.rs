//! What a read-only handle (`Db::open_read_only`) needs beside the normal instance: the refusal
//! of every change, the placeholder WAL region its instance is built with, and the private
//! copies of fast-tier bytes it reads.
//!
//! The open itself is `recovery::open_read_only` (the normal open with every write skipped);
//! docs/decisions/0019-read-only-open.md says what such a handle sees.

use std::io;

use std::collections::HashMap;
use std::sync::Arc;

use super::DbInner;
use crate::error::{Error, Result};
use crate::layout::FileNum;
use crate::lock_order::{Rank, RwLock};
use crate::tier::{PersistMode, Region};

impl DbInner {
    /// `Err(ReadOnly)` naming `op` when the database was opened read-only, `Err(Closed)` once
    /// it is closed.
    pub(crate) fn check_writable(&self, op: &'static str) -> Result<()> {
        self.check_open()?;
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
            bytes: RwLock::new(Rank::LeafBytesRegion, bytes),
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
        let copy = BytesRegion::new(region.len());
        for (offset, len) in ranges {
            copy.copy_from(region, offset, len)?;
        }
        Ok(copy)
    }

    /// Overwrites `offset..offset + len` with the same bytes of `region`, a chunk at a time
    /// read outside this region's lock: `region` may be another `BytesRegion` (both locks have
    /// one rank, so neither may be held while the other is taken).
    pub(crate) fn copy_from(
        &self,
        region: &dyn Region,
        offset: usize,
        len: usize,
    ) -> io::Result<()> {
        const CHUNK: usize = 1 << 20;
        let r = self.range(offset, len)?;
        let mut buf = vec![0u8; CHUNK.min(len)];
        let mut at = r.start;
        while at < r.end {
            let chunk = buf.get_mut(..CHUNK.min(r.end - at)).unwrap_or_default();
            region.read(at, chunk)?;
            self.write(at, chunk)?;
            at += chunk.len();
        }
        Ok(())
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

/// The private copies a read-only open made, kept across its attempts (`open_read_only` starts
/// again when the manifest moved during an attempt): an attempt copies only what the previous
/// ones could not have copied correctly, so under a busy writer each retry is short and one
/// soon falls between two of the writer's manifest edits.
///
/// Why a kept copy is still right when an attempt reuses it:
/// - a container page is kept with the row it was copied for. Rows are written once, at their
///   flush, under a row number never used again; a writer rewrites a page only after an edit
///   frees it from its row, and a page freed from a row never returns to that row. So if the
///   attempt's version still lists the page live in the same row, the page was not freed when
///   the attempt read the manifest, hence not rewritten before, and the copy (made after that
///   row was installed) holds the row's bytes. A reuse after the manifest read moves the
///   manifest, and the attempt starts again.
/// - a WAL segment is kept once a newer segment existed when it was copied (the writer had
///   moved on: it was complete). A writer zeroes a segment only after an edit makes it
///   obsolete, and an attempt replays only segments its manifest still needs.
#[derive(Default)]
pub(crate) struct PrivateCopies {
    /// The container copy and, per page, the row it was copied for (`u64::MAX`: none).
    container: Option<(Arc<BytesRegion>, Vec<u64>)>,
    /// Complete WAL segments.
    wal: HashMap<FileNum, Arc<BytesRegion>>,
    /// Bytes copied by the attempts so far (for the log).
    pub(crate) copied_bytes: u64,
}

impl PrivateCopies {
    /// The container as the version with `rows` (row number, live physical pages) sees it:
    /// pages already copied for the same row are kept, the others are copied from `region`.
    pub(crate) fn container(
        &mut self,
        region: &dyn Region,
        page_bytes: usize,
        rows: impl IntoIterator<Item = (u64, Vec<u32>)>,
    ) -> io::Result<Arc<dyn Region>> {
        let (copy, owner) = self.container.get_or_insert_with(|| {
            let pages = region.len() / page_bytes.max(1);
            (
                Arc::new(BytesRegion::new(region.len())),
                vec![u64::MAX; pages],
            )
        });
        for (row, pages) in rows {
            for p in pages {
                let i = p as usize;
                let known = owner.get(i).is_some_and(|&r| r == row);
                if !known {
                    copy.copy_from(region, i * page_bytes, page_bytes)?;
                    self.copied_bytes += page_bytes as u64;
                    if let Some(o) = owner.get_mut(i) {
                        *o = row;
                    }
                }
            }
        }
        Ok(Arc::clone(copy) as Arc<dyn Region>)
    }

    /// A copy of WAL segment `number` (in `region`); `complete` when a newer segment exists, so
    /// the copy can serve later attempts.
    pub(crate) fn wal_segment(
        &mut self,
        number: FileNum,
        region: &dyn Region,
        complete: bool,
    ) -> io::Result<Arc<dyn Region>> {
        if let Some(c) = self.wal.get(&number) {
            return Ok(Arc::clone(c) as Arc<dyn Region>);
        }
        let copy = Arc::new(BytesRegion::copy_of(region, [(0, region.len())])?);
        self.copied_bytes += region.len() as u64;
        if complete {
            self.wal.insert(number, Arc::clone(&copy));
        }
        Ok(copy as Arc<dyn Region>)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_page(r: &dyn Region, page: usize) -> Vec<u8> {
        let mut b = vec![0u8; 4];
        r.read(page * 4, &mut b).unwrap();
        b
    }

    #[test]
    fn a_page_is_copied_again_only_when_another_row_holds_it() {
        let source = BytesRegion::new(16);
        source.write(0, &[1; 16]).unwrap();
        let mut copies = PrivateCopies::default();
        let c = copies.container(&source, 4, [(7, vec![0, 1])]).unwrap();
        assert_eq!(read_page(c.as_ref(), 1), vec![1; 4]);
        assert_eq!(copies.copied_bytes, 8);
        // The writer frees page 1 from row 7 and reuses it for row 9; page 0 stays in row 7.
        source.write(0, &[2; 16]).unwrap();
        let c = copies
            .container(&source, 4, [(7, vec![0]), (9, vec![1])])
            .unwrap();
        assert_eq!(read_page(c.as_ref(), 0), vec![1; 4], "row 7's page 0 kept");
        assert_eq!(
            read_page(c.as_ref(), 1),
            vec![2; 4],
            "page 1 copied for row 9"
        );
        assert_eq!(copies.copied_bytes, 12);
    }

    #[test]
    fn only_complete_wal_segments_are_kept_for_later_attempts() {
        let source = BytesRegion::new(8);
        source.write(0, &[1; 8]).unwrap();
        let mut copies = PrivateCopies::default();
        copies.wal_segment(FileNum(5), &source, true).unwrap();
        copies.wal_segment(FileNum(6), &source, false).unwrap();
        source.write(0, &[2; 8]).unwrap();
        let sealed = copies.wal_segment(FileNum(5), &source, true).unwrap();
        let active = copies.wal_segment(FileNum(6), &source, false).unwrap();
        assert_eq!(read_page(sealed.as_ref(), 0), vec![1; 4]);
        assert_eq!(
            read_page(active.as_ref(), 0),
            vec![2; 4],
            "the newest segment is re-read"
        );
    }
}
