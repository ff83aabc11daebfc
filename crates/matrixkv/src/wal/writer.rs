//! [`Writer`]: appends framed records (encoded write batches) to one WAL segment, a
//! preallocated region on the fast tier (fresh and zero-filled, or recycled from an obsolete
//! segment and holding its old bytes), and persists them on [`Writer::sync`].
//!
//! Every record's checksum is seeded with the segment number, and every record is followed by
//! an 8-byte zero end marker (the next record overwrites it), so the log ends at the first
//! all-zero record header even in a recycled region, and an older segment's records left
//! behind it never verify (format version 2).
//!
//! Callers: the database write path (the group-commit leader) owns the writer of the active
//! segment. Thread safety: `Writer` is `Send` but needs `&mut self` for every change, so one
//! thread appends at a time (the write path serializes appends with its WAL lock).
//!
//! Durability: [`Writer::add_record`] copies the record into the mapping, so it survives a
//! process crash (contract C1) but not a power loss; [`Writer::sync`] persists every byte
//! written since the previous sync (contract C2). See `docs/format/wal.md`, "Persistence".
#![deny(clippy::indexing_slicing)]

use std::path::PathBuf;
use std::sync::Arc;

use crate::error::{Error, IoOp, Result};
use crate::layout::FileNum;
use crate::record;
use crate::tier::Region;

use super::format;

/// Appends records to one WAL segment.
#[derive(Debug)]
pub struct Writer {
    region: Arc<dyn Region>,
    number: FileNum,
    path: PathBuf,
    /// Offset where the next record goes (everything before it is written, and the end
    /// marker is at it).
    offset: usize,
    /// Everything before this offset is persistent, and so is the end marker that was at it.
    persisted: usize,
    /// The record checksum seed: the segment number.
    seed: record::Seed,
}

/// The 8 zero bytes written after every record.
const END_MARKER: [u8; format::END_MARKER_LEN] = [0; format::END_MARKER_LEN];

impl Writer {
    /// Starts segment `number` in `region`: writes the segment header and the first end
    /// marker (8 zero bytes at offset 64) and persists both.
    ///
    /// `path` is the segment's file (used in error messages only).
    ///
    /// # Preconditions
    ///
    /// Nobody else writes `region`. Its bytes after offset 72 may be anything: zeros of a fresh
    /// region, or the records of an obsolete segment whose region is recycled (their checksums
    /// are seeded with another number, and the end marker ends the log before them).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the region is too small to hold a segment header, one
    /// record and the end marker; [`Error::Io`] if writing or persisting the header fails.
    pub fn create(region: Arc<dyn Region>, number: FileNum, path: PathBuf) -> Result<Writer> {
        let len = region.len();
        if len < format::MIN_REGION_LEN {
            return Err(Error::invalid(format!(
                "WAL segment region {} has {len} bytes; at least {} are needed",
                path.display(),
                format::MIN_REGION_LEN
            )));
        }
        let header = format::encode_header(number, len as u64);
        region
            .write(0, &header)
            .map_err(|e| Error::io(IoOp::Write, &path, e))?;
        region
            .write(format::HEADER_LEN, &END_MARKER)
            .map_err(|e| Error::io(IoOp::Write, &path, e))?;
        region
            .persist(0, format::HEADER_LEN + format::END_MARKER_LEN)
            .map_err(|e| Error::io(IoOp::Persist, &path, e))?;
        Ok(Writer {
            region,
            number,
            path,
            offset: format::HEADER_LEN,
            persisted: format::HEADER_LEN,
            seed: record::Seed::Number(number.0),
        })
    }

    /// True if a record with a payload of `payload_len` bytes fits in the rest of the segment,
    /// leaving the 8 zero bytes of the end marker after it.
    pub fn fits(&self, payload_len: usize) -> bool {
        u32::try_from(payload_len).is_ok()
            && record::framed_len(payload_len)
                .checked_add(format::END_MARKER_LEN)
                .is_some_and(|need| need <= self.remaining())
    }

    /// Appends one record holding `payload` (an encoded write batch).
    ///
    /// When this returns, the record is in the mapping: it survives a process crash, but not
    /// a power loss until [`Writer::sync`] covers it. The payload and the end marker after it
    /// are stored before the record header (which overwrites the previous end marker), so a
    /// process crash in the middle leaves either no record or a record whose checksum fails;
    /// neither is ever replayed.
    ///
    /// Returns the offset of the payload in the region (the record's bytes are
    /// `[offset, offset + payload.len())`).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the record does not [fit](Writer::fits) (nothing is
    /// written); [`Error::Io`] with [`IoOp::Write`] if the region refuses the store.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<usize> {
        if !self.fits(payload.len()) {
            return Err(Error::invalid(format!(
                "a WAL record of {} payload bytes does not fit in segment {} ({} bytes left)",
                payload.len(),
                self.path.display(),
                self.remaining()
            )));
        }
        let len = u32::try_from(payload.len())
            .map_err(|_| Error::invalid("WAL record payload over 4 GiB"))?;
        // Same framing as `record::encode_seeded`, written in pieces to avoid copying the
        // payload.
        let len_bytes = len.to_le_bytes();
        let crc = record::record_checksum(self.seed, &len_bytes, payload);
        let mut header = [0u8; record::HEADER_LEN];
        let (crc_dst, len_dst) = header.split_at_mut(4);
        crc_dst.copy_from_slice(&crc.to_le_bytes());
        len_dst.copy_from_slice(&len_bytes);

        let payload_at = self.offset + record::HEADER_LEN;
        let end = payload_at + payload.len();
        self.region
            .write(payload_at, payload)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.region
            .write(end, &END_MARKER)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.region
            .write(self.offset, &header)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.offset = end;
        Ok(payload_at)
    }

    /// Persists every byte written since the previous sync, the end marker after the last
    /// record included, so that every record added so far survives a power loss and the log
    /// ends right after them (whatever a recycled region holds further on). Does nothing if
    /// nothing was added.
    ///
    /// # Errors
    ///
    /// [`Error::Io`] with [`IoOp::Persist`]. After an error the records are in an unknown
    /// state; the caller must stop writing to this database (poison) rather than retry.
    pub fn sync(&mut self) -> Result<()> {
        if self.persisted == self.offset {
            return Ok(());
        }
        self.region
            .persist(
                self.persisted,
                self.offset + format::END_MARKER_LEN - self.persisted,
            )
            .map_err(|e| Error::io(IoOp::Persist, &self.path, e))?;
        self.persisted = self.offset;
        Ok(())
    }

    /// The segment's file number.
    pub fn number(&self) -> FileNum {
        self.number
    }

    /// The segment's region (kept by the caller to recycle it once the segment is obsolete).
    pub fn region(&self) -> &Arc<dyn Region> {
        &self.region
    }

    /// The segment's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Bytes of the segment used so far, header included: the offset of the next record (the
    /// end marker follows it).
    pub fn bytes_written(&self) -> u64 {
        self.offset as u64
    }

    /// Bytes of the region after the last record (the end marker's 8 bytes included, so the
    /// largest payload that still fits is `remaining() - 16`).
    pub fn remaining(&self) -> usize {
        self.region.len().saturating_sub(self.offset)
    }

    #[cfg(test)]
    /// Every byte before this offset is persistent.
    pub fn persisted_offset(&self) -> u64 {
        self.persisted as u64
    }
}
