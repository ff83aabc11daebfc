//! Writes a RowTable (one flushed memtable) into pages of the fast-tier region.
//!
//! Two phases, so the caller can take pages from the pool in between:
//! 1. [`RowLayout::measure`] sizes the row from its entries;
//! 2. [`write_row`] lays the same entries over the allocated pages: entry array, key area,
//!    bloom filter and value area (one `Region::write` per page where possible), then the
//!    header, then persists every page (one persist per contiguous physical run), then
//!    publishes the commit word. Persist order: payload -> persist -> commit word.
//!
//! Forward pointers are computed while writing, by a merge walk over the previous row's keys
//! (O(n + m) key reads). The bloom filter over the distinct user keys is the SSTable filter
//! (`sst::filter`); its size is fixed by `measure`, so it is written after the key area once
//! every key was seen.
//!
//! Called by the flush path. Thread safety: a write touches only the row's own pages, so rows
//! may be written while other rows of the same region are read.
#![deny(clippy::indexing_slicing)]

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use super::format::{
    self, COMMIT_OFFSET, ENTRY_LEN, HEADER_LEN, MAX_ENTRIES, MAX_KEY_AREA, MAX_VALUE_LEN, RowEntry,
    RowHeader,
};
use super::reader::RowReader;
use crate::checksum::{self, ChecksumStream};
use crate::error::{Error, IoOp, Result};
use crate::key::{SeqNo, TAG_LEN, compare_internal, parse_internal_key, user_key};
use crate::matrix::meta::{PageList, RowMeta};
use crate::sst::filter::FilterBuilder;
use crate::tier::Region;

/// The sizes of a row, measured before pages are allocated for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLayout {
    /// Number of entries.
    pub entries: u64,
    /// Sum of the internal-key lengths (the key area).
    pub key_bytes: u64,
    /// Sum of the value lengths (the value area).
    pub value_bytes: u64,
    /// Length of the bloom filter section (0: no filter).
    pub filter_bytes: u64,
    /// Bloom filter bits per distinct user key (0: no filter).
    pub bloom_bits_per_key: u32,
    /// Logical length of the row: header, entry array, keys, filter and values (saturates
    /// at `u64::MAX` for impossible sizes, which [`RowLayout::check`] rejects).
    pub total_bytes: u64,
    /// Longest value seen.
    pub(crate) max_value_len: u64,
    /// Shortest internal key seen (`u64::MAX` for an empty row).
    pub(crate) min_key_len: u64,
}

impl RowLayout {
    /// Measures the entries `(internal key, value)` that [`write_row`] will be given, for a
    /// row with a bloom filter of `bloom_bits_per_key` bits per distinct user key (0: no
    /// filter; an empty row never gets one).
    pub fn measure<'a>(
        entries: impl Iterator<Item = (&'a [u8], &'a [u8])>,
        bloom_bits_per_key: u32,
    ) -> RowLayout {
        let mut l = RowLayout {
            entries: 0,
            key_bytes: 0,
            value_bytes: 0,
            filter_bytes: 0,
            bloom_bits_per_key,
            total_bytes: 0,
            max_value_len: 0,
            min_key_len: u64::MAX,
        };
        let mut distinct = 0u64;
        let mut last_user: Option<&[u8]> = None;
        for (k, v) in entries {
            let u = user_key(k);
            if last_user != Some(u) {
                distinct += 1;
                last_user = Some(u);
            }
            l.entries = l.entries.saturating_add(1);
            l.key_bytes = l.key_bytes.saturating_add(k.len() as u64);
            l.value_bytes = l.value_bytes.saturating_add(v.len() as u64);
            l.max_value_len = l.max_value_len.max(v.len() as u64);
            l.min_key_len = l.min_key_len.min(k.len() as u64);
        }
        if bloom_bits_per_key > 0 && l.entries > 0 {
            l.filter_bytes = FilterBuilder::block_bytes(distinct, bloom_bits_per_key);
        }
        l.total_bytes = l
            .entries
            .checked_mul(ENTRY_LEN as u64)
            .and_then(|e| e.checked_add(HEADER_LEN as u64))
            .and_then(|t| t.checked_add(l.key_bytes))
            .and_then(|t| t.checked_add(l.filter_bytes))
            .and_then(|t| t.checked_add(l.value_bytes))
            .unwrap_or(u64::MAX);
        l
    }

    /// Checks that the format can hold the row: at most 2^32 - 1 entries, a key area of at
    /// most 2^32 - 1 bytes, values of at most 2^32 - 1 bytes, keys of at least 8 bytes.
    pub fn check(&self) -> Result<()> {
        if self.entries > MAX_ENTRIES {
            return Err(Error::invalid(format!(
                "a RowTable holds at most {MAX_ENTRIES} entries, this memtable has {}",
                self.entries
            )));
        }
        if self.key_bytes > MAX_KEY_AREA {
            return Err(Error::invalid(format!(
                "a RowTable holds at most {MAX_KEY_AREA} bytes of keys, this memtable has {}",
                self.key_bytes
            )));
        }
        if self.max_value_len > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "a RowTable value is at most {MAX_VALUE_LEN} bytes, one has {}",
                self.max_value_len
            )));
        }
        if self.entries > 0 && self.min_key_len < TAG_LEN as u64 {
            return Err(Error::invalid(format!(
                "an internal key must have at least {TAG_LEN} bytes, one has {}",
                self.min_key_len
            )));
        }
        if self.total_bytes == u64::MAX {
            return Err(Error::invalid("the row's size overflows 64 bits"));
        }
        Ok(())
    }

    /// Number of pages of `page_bytes` bytes the row occupies (`usize::MAX` if impossible).
    pub fn pages_needed(&self, page_bytes: usize) -> usize {
        if page_bytes == 0 {
            return usize::MAX;
        }
        usize::try_from(self.total_bytes.div_ceil(page_bytes as u64)).unwrap_or(usize::MAX)
    }
}

/// What a written row holds: what the manifest records about it besides its pages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSummary {
    /// Number of entries.
    pub entries: u64,
    /// Logical length of the row in bytes.
    pub bytes: u64,
    /// Smallest internal key (empty for an empty row).
    pub smallest: Vec<u8>,
    /// Largest internal key (empty for an empty row).
    pub largest: Vec<u8>,
    /// Smallest sequence number (0 for an empty row).
    pub smallest_seq: SeqNo,
    /// Largest sequence number (0 for an empty row).
    pub largest_seq: SeqNo,
}

impl RowSummary {
    /// The manifest record of this row, written as row `row` over `pages`.
    pub fn to_meta(&self, row: u64, prev_row: u64, pages: Arc<PageList>) -> RowMeta {
        RowMeta {
            row,
            prev_row,
            pages,
            entries: self.entries,
            bytes: self.bytes,
            smallest: self.smallest.clone(),
            largest: self.largest.clone(),
            smallest_seq: self.smallest_seq,
            largest_seq: self.largest_seq,
        }
    }
}

/// Writes row `row` over `pages` and commits it.
///
/// `entries` must be the sequence given to [`RowLayout::measure`] (`layout`), sorted by
/// internal key with no duplicates. `prev`, if any, is the newest older row: the forward
/// pointers index it and the header records its number and entry count. `pages` must hold
/// exactly `layout.pages_needed(page_bytes)` allocated pages, each inside `region`.
///
/// Persist order: every byte of the row is written and persisted (one persist per
/// contiguous physical run) before the commit word is published with `publish_u64`, so a
/// crash leaves either a committed row or one that [`RowReader::open`] reports uncommitted.
///
/// Errors: `InvalidArgument` for input the format cannot hold or that does not match
/// `layout` (nothing is committed then), `Io` (`Write`/`Persist`, naming `path`) when the
/// region fails.
#[expect(
    clippy::too_many_arguments,
    reason = "the flush path passes the region, the pages and the row identity separately"
)]
pub fn write_row<'a>(
    region: &dyn Region,
    page_bytes: usize,
    pages: &PageList,
    row: u64,
    prev: Option<&RowReader>,
    entries: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    layout: &RowLayout,
    path: &Path,
) -> Result<RowSummary> {
    let (summary, commit_at) =
        write_payload(region, page_bytes, pages, row, prev, entries, layout, path)?;
    region
        .publish_u64(commit_at, format::commit_word(row))
        .map_err(|e| Error::io(IoOp::Persist, path, e))?;
    Ok(summary)
}

/// Everything [`write_row`] does except publishing the commit word: returns the summary and
/// the region offset of the commit word. Crash tests stop here.
#[expect(
    clippy::too_many_arguments,
    reason = "same arguments as write_row, whose first half this is"
)]
pub(crate) fn write_payload<'a>(
    region: &dyn Region,
    page_bytes: usize,
    pages: &PageList,
    row: u64,
    prev: Option<&RowReader>,
    entries: impl Iterator<Item = (&'a [u8], &'a [u8])>,
    layout: &RowLayout,
    path: &Path,
) -> Result<(RowSummary, usize)> {
    layout.check()?;
    check_placement(region, page_bytes, pages, row, prev, layout)?;
    let (prev_row, prev_entries) = prev.map_or((0, 0), |p| (p.row(), p.len() as u64));

    let keys_off = HEADER_LEN as u64 + layout.entries * ENTRY_LEN as u64;
    let filter_off = keys_off + layout.key_bytes;
    let values_off = filter_off + layout.filter_bytes;
    let sink = Sink {
        region,
        page_bytes,
        pages,
        path,
    };
    let mut entry_w = PageWriter::new(&sink, HEADER_LEN as u64);
    let mut key_w = PageWriter::new(&sink, keys_off);
    let mut value_w = PageWriter::new(&sink, values_off);
    let mut entry_crc = ChecksumStream::new();
    let mut key_crc = ChecksumStream::new();
    let mut walk = prev.map(ForwardWalk::new);
    let mut filter =
        (layout.filter_bytes > 0).then(|| FilterBuilder::new(layout.bloom_bits_per_key));

    let mut count = 0u64;
    let mut key_pos = 0u64;
    let mut value_pos = 0u64;
    let mut smallest = Vec::new();
    let mut last: Vec<u8> = Vec::new();
    let mut smallest_seq = SeqNo::MAX;
    let mut largest_seq = SeqNo::ZERO;
    for (key, value) in entries {
        let parsed = parse_internal_key(key).map_err(|r| {
            Error::invalid(format!(
                "RowTable entry {count} has a malformed internal key: {r}"
            ))
        })?;
        if count > 0 && compare_internal(&last, key) != Ordering::Less {
            return Err(Error::invalid(format!(
                "RowTable entries must be sorted by internal key without duplicates; entry \
                 {count} is not greater than the one before"
            )));
        }
        let key_end = key_pos + key.len() as u64;
        let value_end = value_pos + value.len() as u64;
        if count >= layout.entries || key_end > layout.key_bytes || value_end > layout.value_bytes {
            return Err(mismatch());
        }
        if let Some(f) = filter.as_mut()
            && (count == 0 || user_key(&last) != parsed.user_key)
        {
            f.add(parsed.user_key);
        }
        let fwd = match walk.as_mut() {
            Some(w) => w.advance_to(key)?,
            None => 0,
        };
        // The range checks above (layout.check and the area sizes) make these conversions
        // lossless: key_pos < key_bytes <= u32::MAX, value.len() <= max_value_len.
        let e = RowEntry {
            value_off: value_pos,
            value_len: u32::try_from(value.len()).map_err(|_| mismatch())?,
            key_off: u32::try_from(key_pos).map_err(|_| mismatch())?,
            key_len: u32::try_from(key.len()).map_err(|_| mismatch())?,
            fwd,
            value_crc: checksum::checksum(value),
        };
        let eb = e.encode();
        entry_crc.update(&eb);
        entry_w.put(&eb)?;
        key_crc.update(key);
        key_w.put(key)?;
        value_w.put(value)?;

        smallest_seq = smallest_seq.min(parsed.seq);
        largest_seq = largest_seq.max(parsed.seq);
        if count == 0 {
            smallest = key.to_vec();
        }
        last.clear();
        last.extend_from_slice(key);
        key_pos = key_end;
        value_pos = value_end;
        count += 1;
    }
    if count != layout.entries || key_pos != layout.key_bytes || value_pos != layout.value_bytes {
        return Err(mismatch());
    }
    entry_w.finish()?;
    key_w.finish()?;
    value_w.finish()?;
    let (filter_bytes, filter_crc) = match filter {
        Some(f) => {
            let block = f.finish();
            if block.len() as u64 != layout.filter_bytes {
                return Err(mismatch());
            }
            let mut filter_w = PageWriter::new(&sink, filter_off);
            filter_w.put(&block)?;
            filter_w.finish()?;
            (layout.filter_bytes, checksum::checksum(&block))
        }
        None => (0, 0),
    };
    if count == 0 {
        smallest_seq = SeqNo::ZERO;
    }

    entry_crc.append(&key_crc);
    let header = RowHeader {
        row,
        prev_row,
        prev_entries,
        entries: count,
        key_bytes: key_pos,
        value_bytes: value_pos,
        smallest_seq,
        largest_seq,
        meta_crc: entry_crc.finish(),
        filter_bytes,
        filter_crc,
    };
    debug_assert_eq!(header.total_len(), layout.total_bytes);
    let first = pages
        .physical(0)
        .ok_or_else(|| Error::invalid("empty page list"))? as usize;
    let header_at = first * page_bytes;
    // The whole header, commit word included as 0: a stale commit word left in the page by
    // an earlier row is cleared before anything is persisted.
    region
        .write(header_at, &header.encode())
        .map_err(|e| Error::io(IoOp::Write, path, e))?;
    persist_row(region, page_bytes, pages, layout.total_bytes, path)?;
    Ok((
        RowSummary {
            entries: count,
            bytes: layout.total_bytes,
            smallest,
            largest: last,
            smallest_seq,
            largest_seq,
        },
        header_at + COMMIT_OFFSET,
    ))
}

fn mismatch() -> Error {
    Error::invalid("the entries given to write_row differ from those RowLayout::measure saw")
}

/// Checks the page size, the page list (exactly the pages needed, all live, all inside the
/// region), the row numbers and the previous row before anything is written.
fn check_placement(
    region: &dyn Region,
    page_bytes: usize,
    pages: &PageList,
    row: u64,
    prev: Option<&RowReader>,
    layout: &RowLayout,
) -> Result<()> {
    if !format::page_bytes_ok(page_bytes) {
        return Err(Error::invalid(format!(
            "RowTable pages must be a multiple of 8 bytes and at least {} bytes, not {page_bytes}",
            format::MIN_PAGE_BYTES
        )));
    }
    let needed = layout.pages_needed(page_bytes);
    if pages.len() != needed {
        return Err(Error::invalid(format!(
            "a row of {} bytes needs {needed} pages of {page_bytes} bytes, {} were given",
            layout.total_bytes,
            pages.len()
        )));
    }
    let region_pages = region.len() / page_bytes;
    for i in 0..pages.len() {
        match pages.physical(i) {
            Some(p) if (p as usize) < region_pages => {}
            _ => {
                return Err(Error::invalid(format!(
                    "logical page {i} of the row is freed or outside the {region_pages}-page \
                     region"
                )));
            }
        }
    }
    if row == 0 {
        return Err(Error::invalid("row number 0 is reserved for \"no row\""));
    }
    if let Some(p) = prev
        && p.row() >= row
    {
        return Err(Error::invalid(format!(
            "the previous row {} is not older than row {row}",
            p.row()
        )));
    }
    Ok(())
}

/// Persists the first `total` logical bytes of the row, one persist per contiguous run of
/// physical pages.
fn persist_row(
    region: &dyn Region,
    page_bytes: usize,
    pages: &PageList,
    total: u64,
    path: &Path,
) -> Result<()> {
    let mut logical = 0u64;
    for (start, n) in pages.runs() {
        let run_bytes = u64::from(n) * page_bytes as u64;
        let used = run_bytes.min(total.saturating_sub(logical));
        if used > 0 {
            let used = usize::try_from(used).map_err(|_| Error::invalid("row too large"))?;
            region
                .persist(start as usize * page_bytes, used)
                .map_err(|e| Error::io(IoOp::Persist, path, e))?;
        }
        logical += run_bytes;
    }
    Ok(())
}

/// Where a row's logical bytes go.
struct Sink<'a> {
    region: &'a dyn Region,
    page_bytes: usize,
    pages: &'a PageList,
    path: &'a Path,
}

impl Sink<'_> {
    /// Writes `data`, which lies inside one logical page, at logical offset `at`.
    fn write_in_page(&self, at: u64, data: &[u8]) -> Result<()> {
        let pb = self.page_bytes as u64;
        let page = usize::try_from(at / pb).map_err(|_| Error::invalid("row too large"))?;
        let phys = self
            .pages
            .physical(page)
            .ok_or_else(|| Error::invalid(format!("logical page {page} is not in the row")))?;
        let region_off = phys as usize * self.page_bytes + (at % pb) as usize;
        self.region
            .write(region_off, data)
            .map_err(|e| Error::io(IoOp::Write, self.path, e))
    }
}

/// A sequential writer of one area of the row: assembles page-sized pieces and writes each
/// with one `Region::write`.
struct PageWriter<'a> {
    sink: &'a Sink<'a>,
    /// Bytes not yet written; they start at logical offset `buf_at` and never cross a page
    /// boundary.
    buf: Vec<u8>,
    buf_at: u64,
    /// Logical offset of the next byte.
    pos: u64,
}

impl<'a> PageWriter<'a> {
    fn new(sink: &'a Sink<'a>, at: u64) -> PageWriter<'a> {
        PageWriter {
            sink,
            buf: Vec::new(),
            buf_at: at,
            pos: at,
        }
    }

    fn put(&mut self, mut data: &[u8]) -> Result<()> {
        let pb = self.sink.page_bytes;
        while !data.is_empty() {
            let in_page = (self.pos % pb as u64) as usize;
            let n = (pb - in_page).min(data.len());
            let (now, rest) = data.split_at(n);
            if self.buf.is_empty() && in_page + n == pb {
                // A piece that ends the page with nothing buffered: write it directly.
                self.sink.write_in_page(self.pos, now)?;
            } else {
                if self.buf.is_empty() {
                    self.buf_at = self.pos;
                }
                self.buf.extend_from_slice(now);
                if in_page + n == pb {
                    self.flush()?;
                }
            }
            self.pos += n as u64;
            data = rest;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            self.sink.write_in_page(self.buf_at, &self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    fn finish(mut self) -> Result<()> {
        self.flush()
    }
}

/// The merge walk that computes forward pointers: keys arrive in increasing order, and the
/// cursor into the previous row only moves forward, so the whole row costs O(n + m) reads.
struct ForwardWalk<'a> {
    prev: &'a RowReader,
    /// Loop invariant: every key of `prev` before `idx` is smaller than the last key passed
    /// to `advance_to`.
    idx: usize,
    /// The key of `prev` at `idx`, when loaded.
    key: Vec<u8>,
    loaded: bool,
}

impl<'a> ForwardWalk<'a> {
    fn new(prev: &'a RowReader) -> ForwardWalk<'a> {
        ForwardWalk {
            prev,
            idx: 0,
            key: Vec::new(),
            loaded: false,
        }
    }

    /// The index of the first key of `prev` that is `>= key`.
    fn advance_to(&mut self, key: &[u8]) -> Result<u32> {
        while self.idx < self.prev.len() {
            if !self.loaded {
                self.prev.key(self.idx, &mut self.key)?;
                self.loaded = true;
            }
            if compare_internal(&self.key, key) != Ordering::Less {
                break;
            }
            self.idx += 1;
            self.loaded = false;
        }
        // prev.len() <= MAX_ENTRIES (checked when prev was opened).
        u32::try_from(self.idx).map_err(|_| Error::invalid("previous row too long"))
    }
}
