//! Reads a committed RowTable from the fast-tier region: point lookups with the cross-row hint
//! search, and an [`InternalIterator`] over the row.
//!
//! [`RowReader::open`] checks the header, the commit word and the checksum of the metadata
//! (entry array + key area, read once), then keeps only the parsed header and the row's
//! bloom filter (checksum verified at open) in DRAM: every later read goes to the region.
//! The filter answers [`RowReader::may_contain`] without touching the region, so a point
//! lookup skips rows that cannot hold its key. A binary-search probe reads one 32-byte entry
//! and then its key (into a stack buffer for keys up to 128 bytes), so it allocates nothing.
//! Values are read only when asked for, and their checksum is verified then; reading a value
//! whose page column compaction freed is an error, never garbage.
//!
//! Called by the read path (`get` on every L0 lookup, iterators for scans), by column
//! compaction (iterators, [`RowReader::freeable_pages`]) and by the flush path (the newest row
//! is the `prev` of the next row's forward pointers).
//!
//! Thread safety: a `RowReader` is `Send + Sync` and shared through `Arc`; its page list is
//! immutable (freeing pages yields a new reader, [`RowReader::with_pages`]). A [`RowIter`] is
//! used by one thread at a time.
#![deny(clippy::indexing_slicing)]

use std::cell::{Cell, OnceCell};
use std::cmp::Ordering;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use super::format::{
    self, COMMIT_OFFSET, ENTRY_LEN, HEADER_CRC_OFFSET, HEADER_LEN, HeaderError, MAGIC, RowEntry,
    RowHeader,
};
use crate::checksum::{self, ChecksumStream};
use crate::coding;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::iter::InternalIterator;
use crate::key::{KIND_FOR_SEEK, split_internal};
use crate::key::{SeqNo, TAG_LEN, ValueKind, compare_internal, pack_tag, parse_internal_key};
use crate::matrix::meta::PageList;
use crate::sst::filter::{Filter, key_hash};
use crate::tier::Region;

mod iter;
mod verify;

pub use iter::RowIter;

/// The reason [`RowReader::open`] gives for a row whose commit word is not the one of its row
/// number: its flush never finished (a crash before the commit word was published), or the
/// word is damaged.
pub const UNCOMMITTED: CorruptionReason = CorruptionReason::Invalid(
    "the row is not committed: its commit word is missing or wrong (a crash interrupted its \
     flush, or its first page is damaged)",
);

/// Keys up to this length are compared from a stack buffer.
const STACK_KEY: usize = 128;

/// Bytes read at a time when the metadata checksum is verified at open.
const VERIFY_CHUNK: usize = 64 << 10;

/// A point-lookup result: the newest visible version's kind and value (empty for a
/// tombstone), or `None`.
#[cfg(any(test, feature = "fuzzing"))]
pub type Found = Option<(ValueKind, Vec<u8>)>;

/// The byte source of one row: its page list over the region.
#[derive(Debug)]
struct Source {
    region: Arc<dyn Region>,
    page_bytes: usize,
    pages: Arc<PageList>,
    path: PathBuf,
}

impl Source {
    fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::RowTable, &self.path, offset),
            reason,
        )
    }

    /// Fills `buf` with the row's logical bytes at `at`, with one region read per run of
    /// physically contiguous pages. A freed page or one past the list is an error.
    fn read_at(&self, at: u64, buf: &mut [u8]) -> Result<()> {
        let pb = self.page_bytes;
        let mut done = 0usize;
        let mut off = at;
        while done < buf.len() {
            let page = usize::try_from(off / pb as u64).unwrap_or(usize::MAX);
            let in_page = (off % pb as u64) as usize;
            let phys = self.physical(page, off)?;
            let want = buf.len() - done;
            let mut span = pb - in_page;
            let mut next = page + 1;
            while span < want
                && u32::try_from(next - page)
                    .ok()
                    .and_then(|d| phys.checked_add(d))
                    .is_some_and(|p| self.pages.physical(next) == Some(p))
            {
                span += pb;
                next += 1;
            }
            let n = span.min(want);
            let dst = buf
                .get_mut(done..done + n)
                .ok_or_else(|| self.corrupt(off, CorruptionReason::Truncated))?;
            self.region
                .read(phys as usize * pb + in_page, dst)
                .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
            done += n;
            off += n as u64;
        }
        Ok(())
    }

    /// The physical page of logical page `page`, which holds logical offset `off`.
    fn physical(&self, page: usize, off: u64) -> Result<u32> {
        self.pages.physical(page).ok_or_else(|| {
            if page < self.pages.len() {
                self.corrupt(
                    off,
                    CorruptionReason::Invalid(
                        "the bytes are on a page that column compaction freed",
                    ),
                )
            } else {
                self.corrupt(off, CorruptionReason::Truncated)
            }
        })
    }
}

/// An open, verified RowTable. See the module documentation.
#[derive(Debug)]
pub struct RowReader {
    src: Source,
    header: RowHeader,
    /// The row's bloom filter over user keys (`None`: written without one).
    filter: Option<Arc<Filter>>,
}

/// Where a sorted lookup's previous key was found in a row (see
/// [`RowReader::versions_from`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Floor {
    /// The next key's position is at or after this entry.
    pub at: usize,
    /// Gallop from `at` rather than search all of `[at, len)`.
    pub gallop: bool,
}

impl Floor {
    /// The floor for the key after one found at `at`, `gap` entries after the key before it
    /// in a row of `len` entries: gallop when a gap like it costs fewer probes than a search
    /// of the whole row (`2 log2(gap) < log2(len)`).
    pub fn after(at: usize, gap: usize, len: usize) -> Floor {
        Floor {
            at,
            gallop: gap.saturating_mul(gap) < len,
        }
    }
}

impl RowReader {
    /// Opens row `expected_row` stored over `pages` of `region` (pages of `page_bytes`
    /// bytes). `path` (the pool file) names the row in errors.
    ///
    /// Checks, in order: every live page is inside the region; magic and format version
    /// (`NotSupported` for an unknown one); the commit word ([`UNCOMMITTED`]); the header
    /// checksum and fields; the row number; that the page list covers the row; the
    /// checksum of the entry array and key area; the checksum and shape of the bloom filter,
    /// which is then kept in memory. Failures are `Corruption` naming the logical offset in
    /// the row.
    pub fn open(
        region: Arc<dyn Region>,
        page_bytes: usize,
        pages: Arc<PageList>,
        expected_row: u64,
        path: PathBuf,
    ) -> Result<Arc<RowReader>> {
        if !format::page_bytes_ok(page_bytes) {
            return Err(Error::invalid(format!(
                "RowTable pages must be a multiple of 8 bytes and at least {} bytes, not \
                 {page_bytes}",
                format::MIN_PAGE_BYTES
            )));
        }
        let src = Source {
            region,
            page_bytes,
            pages,
            path,
        };
        let region_pages = src.region.len() / page_bytes;
        for i in 0..src.pages.len() {
            if let Some(p) = src.pages.physical(i)
                && p as usize >= region_pages
            {
                return Err(src.corrupt(
                    (i * page_bytes) as u64,
                    CorruptionReason::Invalid("a page of the row is outside the page pool"),
                ));
            }
        }
        let mut hb = [0u8; HEADER_LEN];
        src.read_at(0, &mut hb)?;
        let magic = coding::get_u64(&hb, 0).map_err(|r| src.corrupt(0, r))?;
        let version = coding::get_u32(&hb, 8).map_err(|r| src.corrupt(0, r))?;
        if magic == MAGIC && !format::version_readable(version) {
            return Err(Error::NotSupported {
                what: "RowTable",
                found_version: version,
            });
        }
        let first = src.physical(0, 0)? as usize;
        let commit = src
            .region
            .read_u64(first * page_bytes + COMMIT_OFFSET)
            .map_err(|e| Error::io(IoOp::Read, &src.path, e))?;
        if commit != format::commit_word(expected_row) {
            return Err(src.corrupt(COMMIT_OFFSET as u64, UNCOMMITTED));
        }
        let header = RowHeader::decode(&hb).map_err(|e| match e {
            HeaderError::Corrupt(r) => src.corrupt(0, r),
            HeaderError::UnknownVersion(v) => Error::NotSupported {
                what: "RowTable",
                found_version: v,
            },
            HeaderError::UnknownChecksumType(t) => Error::NotSupported {
                what: "RowTable checksum type",
                found_version: u32::from(t),
            },
        })?;
        if header.row != expected_row {
            return Err(src.corrupt(
                0,
                CorruptionReason::Invalid("the header's row number differs from the manifest's"),
            ));
        }
        let capacity = src.pages.len() as u64 * page_bytes as u64;
        if header.total_len() > capacity {
            return Err(src.corrupt(capacity, CorruptionReason::Truncated));
        }
        let mut reader = RowReader {
            src,
            header,
            filter: None,
        };
        reader.verify_meta_crc()?;
        reader.filter = reader.load_filter()?;
        Ok(Arc::new(reader))
    }

    /// Reads the filter section, checks its checksum and decodes it (`None` for a row
    /// without one). Its length is bounded by the page list (checked by `open`).
    fn load_filter(&self) -> Result<Option<Arc<Filter>>> {
        let len = self.header.filter_bytes;
        if len == 0 {
            return Ok(None);
        }
        let at = self.header.filter_offset();
        let len =
            usize::try_from(len).map_err(|_| self.src.corrupt(at, CorruptionReason::BadLength))?;
        let mut block = vec![0u8; len];
        self.src.read_at(at, &mut block)?;
        checksum::verify(self.header.filter_crc, &block).map_err(|r| self.src.corrupt(at, r))?;
        let filter = Filter::decode(block).map_err(|r| self.src.corrupt(at, r))?;
        Ok(Some(Arc::new(filter)))
    }

    /// The same row over `pages`, a later page list of it in which some value pages were
    /// freed (after column compaction consumed their entries). Shares the verified header;
    /// reads nothing. Every logical page must be the same physical page or freed, and the
    /// pages holding metadata must all be live.
    pub fn with_pages(&self, pages: Arc<PageList>) -> Result<Arc<RowReader>> {
        let old = &self.src.pages;
        let meta_pages = self.meta_pages();
        let same_shape = pages.len() == old.len()
            && (0..pages.len()).all(|i| match pages.physical(i) {
                Some(p) => old.physical(i) == Some(p),
                None => i >= meta_pages,
            });
        if !same_shape {
            return Err(Error::invalid(format!(
                "the new page list of row {} is not the old one with value pages freed",
                self.row()
            )));
        }
        Ok(Arc::new(RowReader {
            src: Source {
                region: Arc::clone(&self.src.region),
                page_bytes: self.src.page_bytes,
                pages,
                path: self.src.path.clone(),
            },
            header: self.header,
            filter: self.filter.clone(),
        }))
    }

    /// Streams the entry array and key area through the checksum.
    fn verify_meta_crc(&self) -> Result<()> {
        let end = self.header.filter_offset();
        let mut stream = ChecksumStream::new();
        let mut buf = vec![0u8; VERIFY_CHUNK.min((end - HEADER_LEN as u64) as usize)];
        let mut at = HEADER_LEN as u64;
        while at < end {
            let n = ((end - at) as usize).min(buf.len());
            let chunk = buf
                .get_mut(..n)
                .ok_or_else(|| self.src.corrupt(at, CorruptionReason::Truncated))?;
            self.src.read_at(at, chunk)?;
            stream.update(chunk);
            at += n as u64;
        }
        let computed = stream.finish();
        if computed != self.header.meta_crc {
            return Err(self.src.corrupt(
                HEADER_LEN as u64,
                CorruptionReason::ChecksumMismatch {
                    stored: self.header.meta_crc,
                    computed,
                },
            ));
        }
        Ok(())
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        // At most MAX_ENTRIES (2^32 - 1), checked when the header was decoded.
        self.header.entries as usize
    }

    #[cfg(test)]
    /// True for a row without entries.
    pub fn is_empty(&self) -> bool {
        self.header.entries == 0
    }

    /// True if the row has a bloom filter (it was written with bloom bits per key > 0).
    pub fn has_filter(&self) -> bool {
        self.filter.is_some()
    }

    /// False if the row certainly holds no version (value or tombstone) of `user_key`,
    /// according to its bloom filter; true if it may (always true without a filter). Reads
    /// nothing from the region.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(user_key))
    }

    /// [`RowReader::may_contain`] for a precomputed `sst::filter::key_hash` of the user key
    /// (every row uses the same hash, so a lookup through many rows hashes once).
    pub fn may_contain_hash(&self, hash: u64) -> bool {
        self.filter
            .as_ref()
            .is_none_or(|f| f.may_contain_hash(hash))
    }

    /// The row number.
    pub fn row(&self) -> u64 {
        self.header.row
    }

    /// The row the forward pointers index (0 = none).
    pub fn prev_row(&self) -> u64 {
        self.header.prev_row
    }

    /// Entry count of [`RowReader::prev_row`] when this row was written.
    pub fn prev_entries(&self) -> usize {
        self.header.prev_entries as usize
    }

    /// The decoded header.
    pub fn header(&self) -> &RowHeader {
        &self.header
    }

    /// Logical length of the row in bytes.
    pub fn bytes(&self) -> u64 {
        self.header.total_len()
    }

    /// The page list this reader reads through.
    pub fn pages(&self) -> &Arc<PageList> {
        &self.src.pages
    }

    /// Number of leading logical pages that hold metadata (header, entries, keys): they are
    /// never freed while the row lives.
    pub fn meta_pages(&self) -> usize {
        self.header
            .values_offset()
            .div_ceil(self.src.page_bytes as u64) as usize
    }

    fn check_index(&self, i: usize) -> Result<()> {
        if i < self.len() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "entry {i} is past the end of row {} ({} entries)",
                self.row(),
                self.len()
            )))
        }
    }

    fn entry_offset(i: usize) -> u64 {
        HEADER_LEN as u64 + (i as u64) * ENTRY_LEN as u64
    }

    /// The metadata entry `i` (value length, forward pointer, offsets...), checked against
    /// the header.
    pub fn entry(&self, i: usize) -> Result<RowEntry> {
        self.check_index(i)?;
        let at = Self::entry_offset(i);
        let mut b = [0u8; ENTRY_LEN];
        self.src.read_at(at, &mut b)?;
        let e = RowEntry::decode(&b).map_err(|r| self.src.corrupt(at, r))?;
        e.check(&self.header).map_err(|r| self.src.corrupt(at, r))?;
        Ok(e)
    }

    /// Copies the internal key of entry `i` into `buf` (replacing its contents).
    pub fn key(&self, i: usize, buf: &mut Vec<u8>) -> Result<()> {
        let e = self.entry(i)?;
        self.key_of(&e, buf)
    }

    fn key_of(&self, e: &RowEntry, buf: &mut Vec<u8>) -> Result<()> {
        buf.clear();
        buf.resize(e.key_len as usize, 0);
        self.src
            .read_at(self.header.keys_offset() + u64::from(e.key_off), buf)
    }

    /// The value of entry `i`, read across pages and checked against its checksum.
    pub fn value(&self, i: usize) -> Result<Vec<u8>> {
        let mut v = Vec::new();
        self.value_into(i, &mut v)?;
        Ok(v)
    }

    /// Like [`RowReader::value`], into `buf` (replacing its contents).
    pub fn value_into(&self, i: usize, buf: &mut Vec<u8>) -> Result<()> {
        let e = self.entry(i)?;
        self.value_of(&e, buf)
    }

    fn value_of(&self, e: &RowEntry, buf: &mut Vec<u8>) -> Result<()> {
        let at = self.header.values_offset() + e.value_off;
        buf.clear();
        buf.resize(e.value_len as usize, 0);
        self.src.read_at(at, buf)?;
        checksum::verify(e.value_crc, buf).map_err(|r| self.src.corrupt(at, r))
    }

    /// The forward pointer of entry `i`: the index of the first entry of the previous row
    /// whose internal key is `>=` entry `i`'s key ([`RowReader::prev_entries`] if none).
    pub fn fwd(&self, i: usize) -> Result<u32> {
        Ok(self.entry(i)?.fwd)
    }

    /// Logical byte range `(offset, length)` of entry `i`'s value.
    pub fn value_extent(&self, i: usize) -> Result<(u64, u64)> {
        let e = self.entry(i)?;
        Ok((
            self.header.values_offset() + e.value_off,
            u64::from(e.value_len),
        ))
    }

    /// Reads the key of `e` into `stack` when it fits, else into `scratch`.
    fn read_key<'b>(
        &self,
        e: &RowEntry,
        stack: &'b mut [u8; STACK_KEY],
        scratch: &'b mut Vec<u8>,
    ) -> Result<&'b [u8]> {
        let at = self.header.keys_offset() + u64::from(e.key_off);
        let len = e.key_len as usize;
        let buf: &mut [u8] = match stack.get_mut(..len) {
            Some(buf) => buf,
            None => {
                scratch.clear();
                scratch.resize(len, 0);
                scratch
            }
        };
        self.src.read_at(at, buf)?;
        Ok(buf)
    }

    /// Compares the key of entry `i` with `target` without allocating (keys longer than
    /// 128 bytes go through `scratch`).
    fn cmp_key(&self, i: usize, target: &[u8], scratch: &mut Vec<u8>) -> Result<Ordering> {
        let e = self.entry(i)?;
        let mut stack = [0u8; STACK_KEY];
        let key = self.read_key(&e, &mut stack, scratch)?;
        Ok(compare_internal(key, target))
    }

    fn check_window(&self, lo: usize, hi: usize) -> Result<()> {
        if lo <= hi && hi <= self.len() {
            Ok(())
        } else {
            Err(Error::invalid(format!(
                "search window [{lo}, {hi}) does not fit row {} of {} entries (a window must \
                 come from the row whose previous row this is)",
                self.row(),
                self.len()
            )))
        }
    }

    /// Binary search in `[lo, hi)` for the first entry whose key is `>= target`
    /// (`strict`: `> target`); `hi` if none. The window is already checked.
    fn search(
        &self,
        target: &[u8],
        mut lo: usize,
        mut hi: usize,
        strict: bool,
        scratch: &mut Vec<u8>,
    ) -> Result<usize> {
        // Loop invariant: every entry before `lo` is below the bound, every entry from `hi`
        // on (up to the caller's `hi`) is at or above it.
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let ord = self.cmp_key(mid, target, scratch)?;
            let below = if strict {
                ord != Ordering::Greater
            } else {
                ord == Ordering::Less
            };
            if below {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }

    /// A window `(lo, hi)` holding the lower bound of `target`, which is at or after `from`:
    /// probes entries `from`, `from + 1`, `from + 3`, `from + 7`, … until one is at or above
    /// `target` (or the row ends), so the window is at most as wide as the last step.
    fn gallop(&self, target: &[u8], from: usize, scratch: &mut Vec<u8>) -> Result<(usize, usize)> {
        let n = self.len();
        let mut lo = from;
        let mut step = 1usize;
        loop {
            let p = lo.saturating_add(step - 1);
            if p >= n {
                return Ok((lo, n));
            }
            if self.cmp_key(p, target, scratch)? != Ordering::Less {
                return Ok((lo, p));
            }
            lo = p + 1;
            step = step.saturating_mul(2);
        }
    }

    /// The first index in `[lo, hi)` whose internal key is `>= target`, else `hi`: a binary
    /// search inside the window. When the window came from the hint search, the result equals
    /// a search over the whole row.
    pub fn lower_bound(&self, target: &[u8], lo: usize, hi: usize) -> Result<usize> {
        self.check_window(lo, hi)?;
        self.search(target, lo, hi, false, &mut Vec::new())
    }

    /// The search window in the previous row for a target whose lower bound in this row is
    /// `i` (`0 <= i <= len`): `(lo, hi)` such that the target's lower bound in the previous
    /// row lies in `[lo, hi]` (both ends inclusive), so a search over entries `[lo, hi)`
    /// that returns `hi` when none matches finds it exactly.
    ///
    /// `lo = fwd(i - 1)` (0 when `i == 0`), `hi = fwd(i)` (the previous row's entry count
    /// when `i == len`).
    ///
    /// Proof. Write `e_j` for this row's keys, `t` for the target and `LB(x)` for the index
    /// of the first key `>= x` in the previous row; `LB` is monotone (`x <= y` implies
    /// `LB(x) <= LB(y)`), and by definition `fwd(j) = LB(e_j)`. Since `i` is the first index
    /// with `e_i >= t`: if `i > 0` then `e_{i-1} < t`, so `fwd(i-1) = LB(e_{i-1}) <= LB(t)`;
    /// if `i < len` then `t <= e_i`, so `LB(t) <= LB(e_i) = fwd(i)`. The remaining bounds
    /// `0 <= LB(t) <= prev_entries` hold for any target. Hence `lo <= LB(t) <= hi`.
    /// The same argument applied row after row keeps every later window exact.
    pub fn prev_window(&self, i: usize) -> Result<(usize, usize)> {
        let at_i = if i < self.len() {
            Some(self.entry(i)?)
        } else {
            None
        };
        self.window_from(i, at_i.as_ref())
    }

    /// [`RowReader::prev_window`] with entry `i` already read (`None` when `i == len`).
    fn window_from(&self, i: usize, at_i: Option<&RowEntry>) -> Result<(usize, usize)> {
        let lo = if i == 0 { 0 } else { self.fwd(i - 1)? as usize };
        let hi = at_i.map_or(self.prev_entries(), |e| e.fwd as usize);
        if lo > hi {
            return Err(self.src.corrupt(
                Self::entry_offset(i),
                CorruptionReason::Invalid("forward pointers decrease"),
            ));
        }
        Ok((lo, hi))
    }

    #[cfg(test)]
    /// The lower bound of `seek` (an internal key) in this row, searched in `window`
    /// (`None`: the whole row), and the window for the previous row
    /// ([`RowReader::prev_window`]). Reads keys only, never values: usable on rows whose
    /// values column compaction already consumed.
    pub fn locate(
        &self,
        seek: &[u8],
        window: Option<(usize, usize)>,
    ) -> Result<(usize, (usize, usize))> {
        let (lo, hi) = window.unwrap_or((0, self.len()));
        self.check_window(lo, hi)?;
        let i = self.search(seek, lo, hi, false, &mut Vec::new())?;
        Ok((i, self.prev_window(i)?))
    }

    /// Point lookup with the cross-row hint search: the newest version of `user_key` with a
    /// sequence number `<= snapshot` in this row (a tombstone is returned as
    /// `(Deletion, empty)`), and the window to pass to the `get` of the previous row
    /// ([`RowReader::prev_row`]).
    ///
    /// `window` must be `None` or the window returned by the `get` (or `locate`) of the row
    /// whose previous row this is, for the same key and snapshot; then the search probes only
    /// the window and finds exactly what a search of the whole row would.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        window: Option<(usize, usize)>,
    ) -> Result<(Found, (usize, usize))> {
        let (i, prev) = self.seek_entry(user_key, snapshot, window)?;
        let found = if i < self.len() {
            self.version_at(i, user_key)?
        } else {
            None
        };
        Ok((found, prev))
    }

    /// Like [`RowReader::get`], but every version of `user_key` visible at `snapshot`, newest
    /// first, up to and including the first that is not a merge operand (what a merging point
    /// lookup needs from this row), with the window for the previous row.
    ///
    /// `floor` (`Floor::default()` when unknown): the key's position in this row is known to be
    /// at or after entry `floor.at` (the position of a smaller key looked up at the same
    /// snapshot: sorted lookups, `Db::multi_get`). Without a window and with `floor.gallop`
    /// the search gallops from there (probes at `at`, `at + 1`, `+ 3`, `+ 7`, … then a binary
    /// search of the last gap), which costs about `2 log2(gap)` probes rather than
    /// `log2(len)`: worth it when keys are dense. Also returns the key's position (the floor
    /// for the next larger key).
    pub fn versions_from(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        window: Option<(usize, usize)>,
        floor: Floor,
    ) -> Result<(crate::key::Versions, (usize, usize), usize)> {
        let (mut i, prev) = self.seek_entry_from(user_key, snapshot, window, floor)?;
        let found_at = i;
        let mut out = Vec::new();
        while i < self.len() {
            let Some((kind, value)) = self.version_at(i, user_key)? else {
                break;
            };
            out.push((kind, value));
            if kind != ValueKind::Merge {
                break;
            }
            i += 1;
        }
        Ok((out, prev, found_at))
    }

    /// The index of the first entry at or after `(user_key, snapshot)` (the row's length if
    /// none), searched within `window` (see [`RowReader::get`]), and the window for the
    /// previous row.
    #[cfg(any(test, feature = "fuzzing"))]
    fn seek_entry(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        window: Option<(usize, usize)>,
    ) -> Result<(usize, (usize, usize))> {
        self.seek_entry_from(user_key, snapshot, window, Floor::default())
    }

    /// [`RowReader::seek_entry`] knowing that the entry is at or after `floor` (see
    /// [`RowReader::versions_from`]).
    fn seek_entry_from(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        window: Option<(usize, usize)>,
        floor: Floor,
    ) -> Result<(usize, (usize, usize))> {
        let tag = pack_tag(snapshot.min(SeqNo::MAX), KIND_FOR_SEEK).to_le_bytes();
        let mut stack = [0u8; STACK_KEY];
        let heap;
        let seek: &[u8] = match stack.get_mut(..user_key.len() + TAG_LEN) {
            Some(buf) => {
                let (u, t) = buf.split_at_mut(user_key.len());
                u.copy_from_slice(user_key);
                t.copy_from_slice(&tag);
                buf
            }
            None => {
                heap = [user_key, &tag[..]].concat();
                &heap
            }
        };
        let mut scratch = Vec::new();
        let at = floor.at.min(self.len());
        let (lo, hi) = match window {
            Some(w) => w,
            None if floor.gallop => self.gallop(seek, at, &mut scratch)?,
            // A search of `[at, len)` probes no fewer entries than one of the whole row, and
            // misses the cache where the whole-row search hits it: its first probes (the
            // middle, the quarters) are the same for every key.
            None => (0, self.len()),
        };
        self.check_window(lo, hi)?;
        let i = self.search(seek, lo, hi, false, &mut scratch)?;
        if i == self.len() {
            return Ok((i, self.window_from(i, None)?));
        }
        let e = self.entry(i)?;
        Ok((i, self.window_from(i, Some(&e))?))
    }

    /// Entry `i` as a version of `user_key` (`(kind, value)`, a tombstone with an empty value),
    /// `None` if it is of another key.
    fn version_at(&self, i: usize, user_key: &[u8]) -> Result<Option<(ValueKind, Vec<u8>)>> {
        let e = self.entry(i)?;
        let mut stack = [0u8; STACK_KEY];
        let mut scratch = Vec::new();
        let key = self.read_key(&e, &mut stack, &mut scratch)?;
        let key_at = self.header.keys_offset() + u64::from(e.key_off);
        let (found_user, found_tag) = split_internal(key)
            .ok_or_else(|| self.src.corrupt(key_at, CorruptionReason::Truncated))?;
        if found_user != user_key {
            return Ok(None);
        }
        let kind = ValueKind::from_u8((found_tag & 0xff) as u8)
            .map_err(|r| self.src.corrupt(key_at, r))?;
        let mut value = Vec::new();
        if kind != ValueKind::Deletion {
            self.value_of(&e, &mut value)?;
        }
        Ok(Some((kind, value)))
    }

    /// The logical pages that hold only values of entries `[lo, hi)`: once column compaction
    /// consumed those entries (and the manifest recorded it), these pages can be freed. Pages
    /// shared with metadata or with values outside the range are excluded; the row's last
    /// page counts as holding only values when the range reaches the end of the row.
    pub fn freeable_pages(&self, lo: usize, hi: usize) -> Result<Range<usize>> {
        self.check_window(lo, hi)?;
        if lo == hi {
            return Ok(0..0);
        }
        let first = self.entry(lo)?;
        let last = self.entry(hi - 1)?;
        let values = self.header.values_offset();
        let start = values + first.value_off;
        let end = values + last.value_off + u64::from(last.value_len);
        let pb = self.src.page_bytes as u64;
        // start >= values_offset, so the first page is never a metadata page.
        let first_page = start.div_ceil(pb) as usize;
        let end_page = if end == self.header.total_len() {
            self.src.pages.len()
        } else {
            (end / pb) as usize
        };
        Ok(first_page..end_page.max(first_page))
    }
}

/// Ensures the constants the reader uses agree with the format module.
const _: () = assert!(HEADER_CRC_OFFSET < COMMIT_OFFSET && COMMIT_OFFSET + 8 == HEADER_LEN);
