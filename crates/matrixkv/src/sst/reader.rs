//! [`Table`]: an open SSTable, and [`TableIter`], its two-level cursor.
//!
//! `Table::open` reads and verifies the footer, the properties, filter and index blocks (and
//! checks that the index describes contiguous data blocks), and keeps them in memory. Data
//! blocks are read on demand, checksum-verified before they are decompressed or parsed, and
//! kept in the shared [`BlockCache`]. Every corruption is reported as
//! [`Error::Corruption`] with the table's path and the offset of the damaged block (the
//! footer's offset, `file_len - 68`, for footer damage). Format: docs/format/sst.md.
//!
//! Called by the read path (`get`), iterators and compaction. Thread safety: `Table` is
//! `Send + Sync` and may be shared through `Arc`; each `TableIter` is used by one thread and
//! keeps the table alive through its `Arc`.
#![deny(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, compare_internal, parse_internal_key, seek_key};
use crate::sst::cache::BlockCache;
use crate::tier::RandomAccessFile;

use super::block::{Block, BlockIter};
use super::compression::{Compression, DecompressError, decompress_block};
use super::filter::Filter;
use super::format::{
    BlockHandle, FOOTER_LEN, FOOTER_TAIL_LEN, FORMAT_VERSION, Footer, FooterError, TableProperties,
    verify_block,
};

/// An open, verified SSTable.
#[derive(Debug)]
pub struct Table {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    cache_id: u64,
    cache: Option<Arc<BlockCache>>,
    size: u64,
    /// End of the data region: no data block extends past it.
    data_end: u64,
    index_offset: u64,
    properties_offset: u64,
    filter_offset: u64,
    index: Arc<Block>,
    filter: Option<Filter>,
    properties: TableProperties,
}

impl Table {
    /// Opens the table in `file`, verifying its footer and its filter, properties and index
    /// blocks. `cache_id` must be unique among the tables sharing `cache`.
    ///
    /// Errors: [`Error::Corruption`] for damaged or truncated files, [`Error::NotSupported`]
    /// for a well-formed table of another format version (or zstd data without the `zstd`
    /// feature), [`Error::Io`] for read failures.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        cache_id: u64,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Table>> {
        let path = file.path().to_path_buf();
        let size = file.len();
        let footer = read_footer(&*file, &path, size)?;
        let corrupt = |offset: u64, r: CorruptionReason| corruption(&path, offset, r);

        let props_raw = read_block_contents(&*file, &path, footer.properties, size)?;
        let properties = TableProperties::decode(&props_raw)
            .map_err(|r| corrupt(footer.properties.offset, r))?;
        if !properties.compression.is_supported() {
            return Err(unsupported_codec(properties.compression));
        }

        let filter = if footer.filter.size == 0 {
            None
        } else {
            let raw = read_block_contents(&*file, &path, footer.filter, size)?;
            Some(Filter::decode(raw).map_err(|r| corrupt(footer.filter.offset, r))?)
        };

        let index_raw = read_block_contents(&*file, &path, footer.index, size)?;
        let index = Block::new(index_raw).map_err(|r| corrupt(footer.index.offset, r))?;
        let data_end = if footer.filter.size == 0 {
            footer.properties.offset
        } else {
            footer.filter.offset
        };
        let index = Arc::new(index);
        check_index(&index, data_end, properties.data_blocks)
            .map_err(|r| corrupt(footer.index.offset, r))?;

        Ok(Arc::new(Table {
            file,
            path,
            cache_id,
            cache,
            size,
            data_end,
            index_offset: footer.index.offset,
            properties_offset: footer.properties.offset,
            filter_offset: footer.filter.offset,
            index,
            filter,
            properties,
        }))
    }

    /// The table's properties.
    pub fn properties(&self) -> &TableProperties {
        &self.properties
    }

    /// File size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Heap bytes pinned by this open table (index block and filter).
    pub fn memory_bytes(&self) -> usize {
        self.index.charge() + self.filter.as_ref().map_or(0, Filter::memory_bytes)
    }

    /// False if the table certainly holds no version of `user_key` (bloom filter); true if
    /// it may (always true without a filter).
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// The newest version of `user_key` with sequence number ≤ `snapshot` in this table, as
    /// `(kind, value)`; the value of a tombstone is empty. `None` if the table holds no such
    /// version. Checks the bloom filter first.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<(ValueKind, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let target = seek_key(user_key, snapshot);
        let mut index = BlockIter::new(Arc::clone(&self.index));
        index.seek(&target).map_err(|r| self.index_corruption(r))?;
        while index.valid() {
            let handle =
                BlockHandle::decode_varint(index.value()).map_err(|r| self.index_corruption(r))?;
            let mut data = BlockIter::new(self.read_data_block(handle)?);
            let at = |r| corruption(&self.path, handle.offset, r);
            data.seek(&target).map_err(at)?;
            if data.valid() {
                let parsed = parse_internal_key(data.key()).map_err(at)?;
                if parsed.user_key != user_key {
                    return Ok(None);
                }
                return Ok(Some((parsed.kind, data.value().to_vec())));
            }
            // The target lies between this block's last key and its (shortened) separator:
            // the answer, if any, starts the next block.
            index.next().map_err(|r| self.index_corruption(r))?;
        }
        Ok(None)
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, up to and including
    /// the first that is not a merge operand (empty if the table holds none). Checks the
    /// bloom filter first.
    pub fn versions(
        self: &Arc<Self>,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<crate::key::Versions> {
        let mut out = Vec::new();
        if !self.may_contain(user_key) {
            return Ok(out);
        }
        let mut it = self.iter();
        it.seek(&seek_key(user_key, snapshot))?;
        while it.valid() {
            let parsed = parse_internal_key(it.key()).map_err(|r| corruption(&self.path, 0, r))?;
            if parsed.user_key != user_key {
                break;
            }
            out.push((parsed.kind, it.value().to_vec()));
            if parsed.kind != ValueKind::Merge {
                break;
            }
            it.next()?;
        }
        Ok(out)
    }

    /// The newest version of `user_key` with sequence number ≤ `snapshot`, as `(kind,
    /// sequence number, value)`: [`Table::get`] with the version's sequence number, for
    /// callers that compare versions across tables whose sequence ranges interleave (the
    /// single level of the SLM-DB design).
    pub fn newest(
        self: &Arc<Self>,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        if !self.may_contain(user_key) {
            return Ok(None);
        }
        let mut it = self.iter();
        it.seek(&seek_key(user_key, snapshot))?;
        if !it.valid() {
            return Ok(None);
        }
        let parsed = parse_internal_key(it.key()).map_err(|r| corruption(&self.path, 0, r))?;
        if parsed.user_key != user_key {
            return Ok(None);
        }
        Ok(Some((parsed.kind, parsed.seq, it.value().to_vec())))
    }

    /// The newest version of `user_key` with sequence number ≤ `snapshot` in the data block
    /// at `offset` of `size` bytes (a location the global index gave), as `(kind, sequence
    /// number, value)`; `None` if that block holds no such version. One block read at most
    /// (none when the block is cached). A handle outside the data region is corruption.
    pub fn get_in_block(
        &self,
        offset: u64,
        size: u64,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        let handle = BlockHandle { offset, size };
        if handle
            .end_with_trailer()
            .is_none_or(|end| end > self.data_end)
        {
            return Err(corruption(&self.path, offset, CorruptionReason::BadLength));
        }
        let mut data = BlockIter::new(self.read_data_block(handle)?);
        let at = |r| corruption(&self.path, offset, r);
        data.seek(&seek_key(user_key, snapshot)).map_err(at)?;
        if !data.valid() {
            return Ok(None);
        }
        let parsed = parse_internal_key(data.key()).map_err(at)?;
        if parsed.user_key != user_key {
            return Ok(None);
        }
        Ok(Some((parsed.kind, parsed.seq, data.value().to_vec())))
    }

    /// A cursor over every entry, unpositioned.
    pub fn iter(self: &Arc<Self>) -> TableIter {
        TableIter {
            table: Arc::clone(self),
            index: BlockIter::new(Arc::clone(&self.index)),
            data: None,
            data_offset: 0,
        }
    }

    /// The user key of the index separator of the first data block that ends past the middle
    /// of the data region: a key at or above every key of the blocks before it and below
    /// every key after it, found from the index block alone (no data read). `None` for an
    /// empty table.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] if the index block is damaged.
    pub fn middle_key(&self) -> Result<Option<Vec<u8>>> {
        let mut index = BlockIter::new(Arc::clone(&self.index));
        index
            .seek_to_first()
            .map_err(|r| self.index_corruption(r))?;
        let half = self.data_end / 2;
        while index.valid() {
            let handle =
                BlockHandle::decode_varint(index.value()).map_err(|r| self.index_corruption(r))?;
            if handle.offset + handle.size >= half {
                let parsed =
                    parse_internal_key(index.key()).map_err(|r| self.index_corruption(r))?;
                return Ok(Some(parsed.user_key.to_vec()));
            }
            index.next().map_err(|r| self.index_corruption(r))?;
        }
        Ok(None)
    }

    /// Reads every data block and checks the invariants a full scan can see
    /// (docs/format/sst.md, "Invariants" 5–8): keys strictly increase, each block's keys lie
    /// between the neighbouring index separators, the filter holds every user key, and the
    /// properties match the contents. For `matrixkv-cli verify` and tests; bypasses the cache.
    pub fn verify(&self) -> Result<()> {
        let mut index = BlockIter::new(Arc::clone(&self.index));
        index
            .seek_to_first()
            .map_err(|r| self.index_corruption(r))?;
        let mut prev_key: Vec<u8> = Vec::new();
        let mut prev_separator: Vec<u8> = Vec::new();
        let mut seen = TableProperties {
            smallest_seq: SeqNo::MAX,
            ..TableProperties::default()
        };
        while index.valid() {
            let handle =
                BlockHandle::decode_varint(index.value()).map_err(|r| self.index_corruption(r))?;
            let at = |r| corruption(&self.path, handle.offset, r);
            let raw = read_block_contents(&*self.file, &self.path, handle, self.data_end)?;
            let block = Block::new(raw).map_err(at)?;
            block.check_restarts().map_err(at)?;
            let mut data = BlockIter::new(Arc::new(block));
            data.seek_to_first().map_err(at)?;
            if !data.valid() {
                return Err(at(CorruptionReason::Invalid("empty data block")));
            }
            if seen.data_blocks > 0
                && compare_internal(&prev_separator, data.key()) != Ordering::Less
            {
                return Err(at(CorruptionReason::Invalid(
                    "first key of a block is not above the previous separator",
                )));
            }
            while data.valid() {
                let key = data.key();
                let parsed = parse_internal_key(key).map_err(at)?;
                if seen.entries > 0 && compare_internal(&prev_key, key) != Ordering::Less {
                    return Err(at(CorruptionReason::Invalid("keys out of order")));
                }
                if !self.may_contain(parsed.user_key) {
                    let filter_at = corruption(
                        &self.path,
                        self.filter_offset,
                        CorruptionReason::Invalid("filter misses a user key"),
                    );
                    return Err(filter_at);
                }
                seen.entries += 1;
                if parsed.kind == ValueKind::Deletion {
                    seen.deletions += 1;
                }
                seen.raw_key_bytes += key.len() as u64;
                seen.raw_value_bytes += data.value().len() as u64;
                seen.smallest_seq = seen.smallest_seq.min(parsed.seq);
                seen.largest_seq = seen.largest_seq.max(parsed.seq);
                prev_key.clear();
                prev_key.extend_from_slice(key);
                data.next().map_err(at)?;
            }
            if compare_internal(&prev_key, index.key()) == Ordering::Greater {
                return Err(at(CorruptionReason::Invalid(
                    "last key of a block is above its separator",
                )));
            }
            prev_separator.clear();
            prev_separator.extend_from_slice(index.key());
            seen.data_blocks += 1;
            index.next().map_err(|r| self.index_corruption(r))?;
        }
        let p = &self.properties;
        if (
            seen.entries,
            seen.deletions,
            seen.raw_key_bytes,
            seen.raw_value_bytes,
        ) != (p.entries, p.deletions, p.raw_key_bytes, p.raw_value_bytes)
            || (seen.smallest_seq, seen.largest_seq, seen.data_blocks)
                != (p.smallest_seq, p.largest_seq, p.data_blocks)
        {
            return Err(corruption(
                &self.path,
                self.properties_offset,
                CorruptionReason::Invalid("properties do not match the table's contents"),
            ));
        }
        Ok(())
    }

    fn index_corruption(&self, r: CorruptionReason) -> Error {
        corruption(&self.path, self.index_offset, r)
    }

    /// The decoded data block at `handle`, from the cache or the file.
    fn read_data_block(&self, handle: BlockHandle) -> Result<Arc<Block>> {
        if let Some(c) = &self.cache
            && let Some(b) = c.get(self.cache_id, handle.offset)
        {
            return Ok(b);
        }
        let raw = read_block_contents(&*self.file, &self.path, handle, self.data_end)?;
        let block =
            Arc::new(Block::new(raw).map_err(|r| corruption(&self.path, handle.offset, r))?);
        if let Some(c) = &self.cache {
            c.insert(self.cache_id, handle.offset, Arc::clone(&block));
        }
        Ok(block)
    }
}

fn corruption(path: &Path, offset: u64, reason: CorruptionReason) -> Error {
    Error::corruption(CorruptionSite::new(ArtifactKind::Sst, path, offset), reason)
}

fn unsupported_codec(c: Compression) -> Error {
    log::warn!("SSTable uses {c} compression, which this build does not include");
    Error::NotSupported {
        what: "SSTable compressed with zstd (this build lacks the `zstd` feature)",
        found_version: FORMAT_VERSION,
    }
}

/// Reads and verifies the footer of a file of `size` bytes.
fn read_footer(file: &dyn RandomAccessFile, path: &Path, size: u64) -> Result<Footer> {
    // Footer damage is reported at the offset where a version-1 footer starts.
    let site = size.saturating_sub(FOOTER_LEN as u64);
    if size < FOOTER_TAIL_LEN as u64 {
        return Err(corruption(path, 0, CorruptionReason::Truncated));
    }
    let first_read = size.min(FOOTER_LEN as u64);
    let mut buf = vec![0u8; first_read as usize];
    file.read_exact_at(size - first_read, &mut buf)?;
    let tail_at = buf.len() - FOOTER_TAIL_LEN;
    let tail = Footer::decode_tail(buf.get(tail_at..).unwrap_or_default(), size)
        .map_err(|r| corruption(path, site, r))?;
    let footer_len = tail.body_len + FOOTER_TAIL_LEN;
    if footer_len > buf.len() {
        // A later version's larger footer: read it whole (bounded by MAX_FOOTER_BODY_LEN).
        buf = vec![0u8; footer_len];
        file.read_exact_at(size - footer_len as u64, &mut buf)?;
    }
    let start = buf.len() - footer_len;
    let footer_offset = size - footer_len as u64;
    Footer::decode(buf.get(start..).unwrap_or_default(), footer_offset).map_err(|e| match e {
        FooterError::Corrupt(r) => corruption(path, site, r),
        FooterError::UnknownVersion(v) => Error::NotSupported {
            what: "SSTable",
            found_version: v,
        },
    })
}

/// Reads the block at `handle` with its trailer, verifies the checksum, and returns the
/// decompressed contents. The block must end (with trailer) at or before `limit`, which is
/// checked before anything is allocated.
fn read_block_contents(
    file: &dyn RandomAccessFile,
    path: &Path,
    handle: BlockHandle,
    limit: u64,
) -> Result<Vec<u8>> {
    let at = |r| corruption(path, handle.offset, r);
    let len = handle
        .end_with_trailer()
        .filter(|&end| end <= limit)
        .and_then(|_| usize::try_from(handle.size).ok())
        .ok_or_else(|| at(CorruptionReason::BadLength))?;
    let mut buf = vec![0u8; len + super::format::BLOCK_TRAILER_LEN];
    file.read_exact_at(handle.offset, &mut buf)?;
    let (stored, block_type) = verify_block(&buf).map_err(at)?;
    let codec = Compression::from_block_type(block_type).map_err(at)?;
    if codec == Compression::None {
        buf.truncate(len);
        return Ok(buf);
    }
    decompress_block(codec, stored).map_err(|e| match e {
        DecompressError::Corrupt(r) => at(r),
        DecompressError::Unsupported(c) => unsupported_codec(c),
    })
}

/// Checks the index block: keys are valid internal keys in strictly increasing order, and
/// the handles describe `data_blocks` contiguous blocks covering `[0, data_end)`.
fn check_index(
    index: &Arc<Block>,
    data_end: u64,
    data_blocks: u64,
) -> Result<(), CorruptionReason> {
    index.check_restarts()?;
    let mut it = BlockIter::new(Arc::clone(index));
    let mut expected_offset = 0u64;
    let mut count = 0u64;
    let mut prev: Vec<u8> = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        parse_internal_key(it.key())?;
        if count > 0 && compare_internal(&prev, it.key()) != Ordering::Less {
            return Err(CorruptionReason::Invalid("index keys out of order"));
        }
        let h = BlockHandle::decode_varint(it.value())?;
        if h.offset != expected_offset {
            return Err(CorruptionReason::Invalid("data blocks are not contiguous"));
        }
        expected_offset = h
            .end_with_trailer()
            .filter(|&e| e <= data_end)
            .ok_or(CorruptionReason::BadLength)?;
        count += 1;
        prev.clear();
        prev.extend_from_slice(it.key());
        it.next()?;
    }
    if expected_offset != data_end || count != data_blocks {
        return Err(CorruptionReason::Invalid(
            "index does not describe every data block",
        ));
    }
    Ok(())
}

/// A two-level cursor (index block → data block) over one table. Implements
/// [`InternalIterator`]; after an error it is unpositioned.
#[derive(Debug)]
pub struct TableIter {
    table: Arc<Table>,
    index: BlockIter,
    /// Cursor in the current data block (its key buffer is reused across blocks).
    data: Option<BlockIter>,
    /// Offset of the data block `data` walks.
    data_offset: u64,
}

impl TableIter {
    /// Offset and stored size of the data block holding the current entry (meaningful only
    /// while the cursor is valid).
    pub fn block_handle(&self) -> (u64, u64) {
        match BlockHandle::decode_varint(self.index.value()) {
            Ok(h) => (h.offset, h.size),
            Err(_) => (self.data_offset, 0),
        }
    }

    fn data_valid(&self) -> bool {
        self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn invalidate(&mut self) {
        if let Some(d) = &mut self.data {
            d.invalidate();
        }
    }

    fn index_err(&self, r: CorruptionReason) -> Error {
        self.table.index_corruption(r)
    }

    fn data_err(&self, r: CorruptionReason) -> Error {
        corruption(&self.table.path, self.data_offset, r)
    }

    /// Points `data` at the block the index cursor names; returns false (and unpositions
    /// `data`) when the index cursor is exhausted.
    fn load_block(&mut self) -> Result<bool> {
        if !self.index.valid() {
            self.invalidate();
            return Ok(false);
        }
        let handle =
            BlockHandle::decode_varint(self.index.value()).map_err(|r| self.index_err(r))?;
        if let Some(d) = &mut self.data
            && self.data_offset == handle.offset
        {
            d.invalidate();
            return Ok(true);
        }
        let block = self.table.read_data_block(handle)?;
        match &mut self.data {
            Some(d) => d.reset(block),
            None => self.data = Some(BlockIter::new(block)),
        }
        self.data_offset = handle.offset;
        Ok(true)
    }

    /// Runs a block-cursor operation on `data`, mapping its error to this block's site.
    fn with_data(
        &mut self,
        op: impl FnOnce(&mut BlockIter) -> Result<(), CorruptionReason>,
    ) -> Result<()> {
        match &mut self.data {
            Some(d) => op(d).map_err(|r| self.data_err(r)),
            None => Ok(()),
        }
    }

    fn skip_forward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                return Ok(());
            }
            self.index.next().map_err(|r| self.index_err(r))?;
            if !self.load_block()? {
                return Ok(());
            }
            self.with_data(BlockIter::seek_to_first)?;
        }
        Ok(())
    }

    fn skip_backward(&mut self) -> Result<()> {
        while !self.data_valid() {
            if !self.index.valid() {
                return Ok(());
            }
            self.index.prev().map_err(|r| self.index_err(r))?;
            if !self.load_block()? {
                return Ok(());
            }
            self.with_data(BlockIter::seek_to_last)?;
        }
        Ok(())
    }

    /// Unpositions the cursor if `r` is an error, and passes `r` on.
    fn guard(&mut self, r: Result<()>) -> Result<()> {
        if r.is_err() {
            self.index.invalidate();
            self.invalidate();
        }
        r
    }

    fn seek_inner(&mut self, target: &[u8]) -> Result<()> {
        self.index.seek(target).map_err(|r| self.index_err(r))?;
        if self.load_block()? {
            self.with_data(|d| d.seek(target))?;
        }
        self.skip_forward()
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.data_valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        let r = (|| {
            self.index.seek_to_first().map_err(|r| self.index_err(r))?;
            if self.load_block()? {
                self.with_data(BlockIter::seek_to_first)?;
            }
            self.skip_forward()
        })();
        self.guard(r)
    }

    fn seek_to_last(&mut self) -> Result<()> {
        let r = (|| {
            self.index.seek_to_last().map_err(|r| self.index_err(r))?;
            if self.load_block()? {
                self.with_data(BlockIter::seek_to_last)?;
            }
            self.skip_backward()
        })();
        self.guard(r)
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        let r = self.seek_inner(target);
        self.guard(r)
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        let r = (|| {
            self.seek_inner(target)?;
            if !self.data_valid() {
                self.index.seek_to_last().map_err(|r| self.index_err(r))?;
                if self.load_block()? {
                    self.with_data(BlockIter::seek_to_last)?;
                }
                return self.skip_backward();
            }
            if compare_internal(self.key(), target) == Ordering::Greater {
                self.with_data(BlockIter::prev)?;
                self.skip_backward()?;
            }
            Ok(())
        })();
        self.guard(r)
    }

    fn next(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        let r = (|| {
            self.with_data(BlockIter::next)?;
            self.skip_forward()
        })();
        self.guard(r)
    }

    fn prev(&mut self) -> Result<()> {
        debug_assert!(self.valid());
        let r = (|| {
            self.with_data(BlockIter::prev)?;
            self.skip_backward()
        })();
        self.guard(r)
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::key)
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::value)
    }

    fn site(&self) -> Option<crate::error::CorruptionSite> {
        self.valid().then(|| {
            crate::error::CorruptionSite::new(
                crate::error::ArtifactKind::Sst,
                &self.table.path,
                self.data_offset,
            )
        })
    }
}
