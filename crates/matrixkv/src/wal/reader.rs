//! Reading a WAL segment back at recovery: [`read_segment`] validates the header, then hands
//! every record payload (an encoded write batch, already checked to be well-formed) to a
//! callback, and applies the recovery policy ([`WalRecovery`]) to a damaged record.
//! [`zero_tail`] clears a torn tail so the segment reads cleanly from then on. [`BatchCursor`]
//! reads the batches of a complete segment one at a time while the database runs.
//!
//! Callers: WAL recovery at database open, segment by segment in file-number order;
//! `Db::updates_since` (through [`BatchCursor`]).
//! Thread safety: plain functions; the caller must make sure nobody writes the region while it
//! is read (at open no writer exists yet). [`BatchCursor`] may read a region a writer appends
//! to, up to the records known to be complete (see its doc).
//!
//! Nothing read from the region is trusted: every length is checked against the region before
//! it is used, and no input makes these functions panic.
//!
//! Both format versions are read: version 1 (unseeded record checksums) and version 2
//! (checksums seeded with the segment number, so that an older segment's records left in a
//! recycled region could never be replayed).
#![deny(clippy::indexing_slicing)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, WriteBatch};
use crate::coding::get_u32;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::layout::FileNum;
use crate::record::{self, Decoded};
use crate::tier::Region;

use super::format::{self, HeaderError};

/// What recovery does with a damaged record in the WAL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WalRecovery {
    /// A damaged record in the *last* segment is taken to be a write torn by a crash: it and
    /// everything after it are dropped with a warning. A damaged record in any earlier segment
    /// is still an error. This is the default, and loses only writes that were never synced.
    #[default]
    TolerateTornTail,
    /// Any damaged record fails the open with [`Error::Corruption`], and so does any data
    /// after the end of the log (a zeroed record header with records behind it).
    Strict,
}

/// How a segment ended, as found by [`read_segment`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SegmentEnd {
    /// Offset just after the last valid record (where a writer would append the next one).
    pub end_offset: u64,
    /// Number of valid records handed to the callback.
    pub records: u64,
    /// If the segment ended in a torn record that was dropped: its offset and what was wrong.
    pub torn_tail: Option<(u64, CorruptionReason)>,
}

/// Reads the segment `expected_number` stored in `region` (file `path`), calling `on_record`
/// with the payload of every valid record in order, and the payload's offset in the region.
///
/// Every payload passed to `on_record` has a matching checksum and is a well-formed encoded
/// write batch (so `WriteBatch::decode` on it succeeds). A record whose checksum matches but
/// whose payload is not a valid batch is corruption in every mode: a crash cannot produce it.
///
/// A damaged record (bad checksum, impossible length, truncated header) ends the segment:
/// with [`WalRecovery::TolerateTornTail`] and `is_last_segment`, it is reported in
/// [`SegmentEnd::torn_tail`] and logged with `log::warn!`; otherwise it is an error. A record
/// of an older segment left in a recycled region (version 2) fails its checksum, so it is
/// never replayed: it either lies after the end marker, or it is where a torn record was, and
/// reading stops there. In [`WalRecovery::Strict`] mode the bytes after the end marker must all
/// be zero (the database zeroes a region before recycling it): a zeroed record header followed
/// by data is a damaged record too.
///
/// # Errors
///
/// - [`Error::Corruption`] (kind [`ArtifactKind::Wal`], this `path`) at offset 0 for a bad
///   header (magic, checksum, reserved bytes, a number other than `expected_number`, a length
///   other than the region's), and at the record's offset for a damaged record that is not
///   tolerated or a record that is not a valid batch;
/// - [`Error::NotSupported`] for an unknown format version or checksum type;
/// - [`Error::Io`] with [`IoOp::Read`] if the region cannot be read;
/// - any error returned by `on_record`, unchanged (reading stops there).
pub fn read_segment(
    region: &dyn Region,
    path: &Path,
    expected_number: FileNum,
    mode: WalRecovery,
    is_last_segment: bool,
    mut on_record: impl FnMut(&[u8], usize) -> Result<()>,
) -> Result<SegmentEnd> {
    let region_len = region.len();
    let corrupt = |offset: usize, reason| Error::corruption(site(path, offset as u64), reason);
    let read = |offset: usize, buf: &mut [u8]| {
        region
            .read(offset, buf)
            .map_err(|e| Error::io(IoOp::Read, path, e))
    };
    let h = check_header(region, path, expected_number)?;

    let seed = h.record_seed();
    let mut offset = format::HEADER_LEN;
    let mut records = 0u64;
    // Holds one framed record (header + payload); reused across records.
    let mut buf: Vec<u8> = Vec::new();
    let damaged = loop {
        let Some(frame) = read_frame(region_len, offset, &mut buf, &read)? else {
            break None;
        };
        match record::decode_seeded(frame, 0, seed) {
            Decoded::End if mode == WalRecovery::Strict => {
                // The end marker must be followed only by the zeros of the preallocation: a
                // zeroed record header with records after it is a hole, not the end.
                break (!region_is_zero_from(region_len, offset, &read)?).then_some(
                    CorruptionReason::Invalid("zero record header followed by data"),
                );
            }
            Decoded::End => break None,
            Decoded::Bad(reason) => break Some(reason),
            Decoded::Record { payload, next } => {
                batch::validate(payload).map_err(|reason| corrupt(offset, reason))?;
                on_record(payload, offset + record::HEADER_LEN)?;
                records += 1;
                offset += next;
            }
        }
    };

    let torn_tail = match damaged {
        None => None,
        Some(reason) if is_last_segment && mode == WalRecovery::TolerateTornTail => {
            log::warn!(
                "WAL segment {}: dropping a torn tail at offset {offset} ({reason}) after {records} \
                 valid records; writes after this point were never synced",
                path.display()
            );
            Some((offset as u64, reason))
        }
        Some(reason) => return Err(corrupt(offset, reason)),
    };
    Ok(SegmentEnd {
        end_offset: offset as u64,
        records,
        torn_tail,
    })
}

/// Reads and checks the header of segment `expected_number` stored in `region` (file `path`).
///
/// # Errors
///
/// As [`read_segment`] for the header: [`Error::Corruption`] at offset 0, [`Error::NotSupported`],
/// [`Error::Io`].
fn check_header(
    region: &dyn Region,
    path: &Path,
    expected_number: FileNum,
) -> Result<format::SegmentHeader> {
    let region_len = region.len();
    let corrupt = |reason| Error::corruption(site(path, 0), reason);
    if region_len < format::HEADER_LEN {
        return Err(corrupt(CorruptionReason::Truncated));
    }
    let mut header = [0u8; format::HEADER_LEN];
    region
        .read(0, &mut header)
        .map_err(|e| Error::io(IoOp::Read, path, e))?;
    let h = format::decode_header(&header).map_err(|e| match e {
        HeaderError::Corrupt(reason) => corrupt(reason),
        HeaderError::UnknownVersion(v) => Error::NotSupported {
            what: "WAL segment",
            found_version: v,
        },
        HeaderError::UnknownChecksumType(t) => Error::NotSupported {
            what: "WAL segment checksum type",
            found_version: u32::from(t),
        },
    })?;
    if h.number != expected_number {
        return Err(corrupt(CorruptionReason::Invalid(
            "segment number in the header differs from the file name",
        )));
    }
    if h.region_len != region_len as u64 {
        return Err(corrupt(CorruptionReason::BadLength));
    }
    Ok(h)
}

/// Reads the write batches of one segment in order, one record at a time, while the database
/// runs (`Db::updates_since`). Unlike [`read_segment`] there is no recovery policy: the
/// segments it reads are complete (every record whole, the end marker after the last), so any
/// damaged record is corruption.
///
/// Thread safety: `Send`, used by one thread. A writer may be appending to the same region
/// (the active segment): the caller must stop before the first record that is not known to be
/// completely written (the database reads a record only if its sequence numbers are visible,
/// which the commit leader publishes after the append).
pub struct BatchCursor {
    region: Arc<dyn Region>,
    path: PathBuf,
    seed: record::Seed,
    /// Offset of the next record.
    offset: usize,
    /// True once the end of the log was reached.
    ended: bool,
    /// Holds one framed record; reused across records.
    buf: Vec<u8>,
}

impl BatchCursor {
    /// Opens segment `expected_number` stored in `region` (file `path`, for error messages)
    /// and checks its header; the cursor is before the first record.
    ///
    /// # Errors
    ///
    /// As [`read_segment`] for the header.
    pub fn open(
        region: Arc<dyn Region>,
        path: PathBuf,
        expected_number: FileNum,
    ) -> Result<BatchCursor> {
        let h = check_header(region.as_ref(), &path, expected_number)?;
        Ok(BatchCursor {
            region,
            path,
            seed: h.record_seed(),
            offset: format::HEADER_LEN,
            ended: false,
            buf: Vec::new(),
        })
    }

    /// The segment's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Offset of the next record (after the last one once the end is reached).
    pub fn offset(&self) -> u64 {
        self.offset as u64
    }

    /// The batch of the next record, or `None` at the end of the log (the end marker, or the
    /// end of the region). After `None` or an error, every call returns `None`.
    ///
    /// # Preconditions
    ///
    /// The next record, if there is one, is completely written (see the type's doc).
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind [`ArtifactKind::Wal`], this path, the record's offset) for a
    /// damaged record or a payload that is not a well-formed batch; [`Error::Io`] if the region
    /// cannot be read.
    pub fn next_batch(&mut self) -> Result<Option<WriteBatch>> {
        if self.ended {
            return Ok(None);
        }
        // Ends the cursor whatever happens below; set back when a record is returned.
        self.ended = true;
        let (region, path) = (self.region.as_ref(), self.path.as_path());
        let read = |offset: usize, buf: &mut [u8]| {
            region
                .read(offset, buf)
                .map_err(|e| Error::io(IoOp::Read, path, e))
        };
        let offset = self.offset;
        let Some(frame) = read_frame(region.len(), offset, &mut self.buf, &read)? else {
            return Ok(None);
        };
        let corrupt = |reason| Error::corruption(site(path, offset as u64), reason);
        match record::decode_seeded(frame, 0, self.seed) {
            Decoded::End => Ok(None),
            Decoded::Bad(reason) => Err(corrupt(reason)),
            Decoded::Record { payload, next } => {
                let batch = WriteBatch::decode(payload).map_err(corrupt)?;
                self.offset += next;
                self.ended = false;
                Ok(Some(batch))
            }
        }
    }
}

impl BatchCursor {
    /// The batch of the last record, found by following the record headers from the cursor
    /// to the end marker (only the last record is read whole and verified); `None` if no
    /// record follows the cursor. The cursor is then at the end: [`BatchCursor::offset`] is
    /// just after the last record (where the end marker is).
    ///
    /// # Preconditions
    ///
    /// Every record after the cursor is completely written (a segment no writer appends to).
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] for a record length beyond the region or a damaged last record;
    /// [`Error::Io`] if the region cannot be read.
    pub fn last_batch(&mut self) -> Result<Option<WriteBatch>> {
        if self.ended {
            return Ok(None);
        }
        let region_len = self.region.len();
        let mut last = None;
        let mut at = self.offset;
        let mut header = [0u8; record::HEADER_LEN];
        while at + record::HEADER_LEN <= region_len {
            self.region
                .read(at, &mut header)
                .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
            if header.iter().all(|&b| b == 0) {
                break;
            }
            let len = get_u32(&header, 4).map_or(0, |l| l as usize);
            let next = at + record::HEADER_LEN + len;
            if next > region_len {
                self.ended = true;
                return Err(Error::corruption(
                    site(&self.path, at as u64),
                    CorruptionReason::BadLength,
                ));
            }
            last = Some(at);
            at = next;
        }
        let Some(at) = last else {
            self.ended = true;
            return Ok(None);
        };
        self.offset = at;
        let batch = self.next_batch()?;
        self.ended = true;
        Ok(batch)
    }
}

impl std::fmt::Debug for BatchCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchCursor")
            .field("path", &self.path)
            .field("offset", &self.offset)
            .field("ended", &self.ended)
            .finish()
    }
}

/// Reads the framed record at `offset` into `buf` and returns it, or `None` at the end of the
/// region. The frame may be shorter than the length its header declares (then
/// `record::decode` reports it as bad); the declared length is never used to read or allocate
/// beyond the region.
fn read_frame<'b>(
    region_len: usize,
    offset: usize,
    buf: &'b mut Vec<u8>,
    read: &impl Fn(usize, &mut [u8]) -> Result<()>,
) -> Result<Option<&'b [u8]>> {
    let left = region_len.saturating_sub(offset);
    if left == 0 {
        return Ok(None);
    }
    let header_len = left.min(record::HEADER_LEN);
    buf.clear();
    buf.resize(header_len, 0);
    read(offset, buf)?;
    if header_len < record::HEADER_LEN && buf.iter().all(|&b| b == 0) {
        // Zeros up to the end of the region: an end marker cut short by the region's end.
        return Ok(None);
    }
    let declared = get_u32(buf, 4).map_or(0, |l| l as usize);
    if header_len == record::HEADER_LEN && declared > 0 && buf.iter().any(|&b| b != 0) {
        // Read at most up to the end of the region; a longer declared length is left short,
        // which `record::decode` reports as a bad length.
        let payload_len = declared.min(left - record::HEADER_LEN);
        buf.resize(record::HEADER_LEN + payload_len, 0);
        if let Some(dst) = buf.get_mut(record::HEADER_LEN..) {
            read(offset + record::HEADER_LEN, dst)?;
        }
    }
    Ok(Some(buf.as_slice()))
}

/// True if every byte of the region from `offset` on is zero.
fn region_is_zero_from(
    region_len: usize,
    mut offset: usize,
    read: &impl Fn(usize, &mut [u8]) -> Result<()>,
) -> Result<bool> {
    let mut chunk = vec![0u8; 64 * 1024];
    while offset < region_len {
        let n = chunk.len().min(region_len - offset);
        let buf = chunk.get_mut(..n).unwrap_or_default();
        read(offset, buf)?;
        if buf.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        offset += n;
    }
    Ok(true)
}

/// Overwrites the first `len` bytes of the region (header included) with zeros and persists
/// them: the database clears the bytes an obsolete segment used before it recycles the region,
/// so that every segment's region is zero after its end marker, as in a new region.
///
/// # Errors
///
/// [`Error::InvalidArgument`] if `len` is beyond the region; [`Error::Io`] if writing or
/// persisting fails.
pub fn zero_prefix(region: &dyn Region, path: &Path, len: usize) -> Result<()> {
    if len > region.len() {
        return Err(Error::invalid(format!(
            "cannot clear {len} bytes of WAL segment {}: it has {}",
            path.display(),
            region.len()
        )));
    }
    zero_range(region, path, 0, len)
}

/// Writes zeros over `[start, end)` in chunks and persists them.
fn zero_range(region: &dyn Region, path: &Path, start: usize, end: usize) -> Result<()> {
    const CHUNK: usize = 64 * 1024;
    if start >= end {
        return Ok(());
    }
    let zeros = vec![0u8; CHUNK.min(end - start)];
    let mut at = start;
    while at < end {
        let n = CHUNK.min(end - at);
        region
            .write(at, zeros.get(..n).unwrap_or(&zeros))
            .map_err(|e| Error::io(IoOp::Write, path, e))?;
        at += n;
    }
    region
        .persist(start, end - start)
        .map_err(|e| Error::io(IoOp::Persist, path, e))
}

/// Overwrites `[offset, end of region)` with zeros and persists it, so that the segment ends
/// cleanly at `offset` (normally [`SegmentEnd::end_offset`] of a segment with a torn tail).
///
/// Recovery must do this (or stop using the segment) *before* it writes any newer segment:
/// once a newer segment exists, this one is no longer the last, and a torn record in it would
/// be reported as corruption at the next open.
///
/// # Errors
///
/// [`Error::InvalidArgument`] if `offset` lies inside the header or beyond the region;
/// [`Error::Io`] if writing or persisting fails.
pub fn zero_tail(region: &dyn Region, path: &Path, offset: u64) -> Result<()> {
    let len = region.len();
    let start = usize::try_from(offset)
        .ok()
        .filter(|&o| (format::HEADER_LEN..=len).contains(&o))
        .ok_or_else(|| {
            Error::invalid(format!(
                "cannot clear WAL segment {} from offset {offset}: outside its records",
                path.display()
            ))
        })?;
    zero_range(region, path, start, len)
}

fn site(path: &Path, offset: u64) -> CorruptionSite {
    CorruptionSite::new(ArtifactKind::Wal, path, offset)
}
