//! [`Writer`]: appends framed records (encoded write batches) to one WAL segment, a
//! preallocated zero-filled region on the fast tier, and persists them on [`Writer::sync`].
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

use crate::checksum;
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
    /// Offset where the next record goes (everything before it is written).
    offset: usize,
    /// Everything before this offset is persistent.
    persisted: usize,
}

impl Writer {
    /// Starts segment `number` in `region`: writes the segment header and persists it.
    ///
    /// `path` is the segment's file (used in error messages only).
    ///
    /// # Preconditions
    ///
    /// `region` was just created by `FastTier::create_region` and is therefore zero-filled:
    /// the format relies on the zeros after the last record to mark the end of data.
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
            .persist(0, format::HEADER_LEN)
            .map_err(|e| Error::io(IoOp::Persist, &path, e))?;
        Ok(Writer {
            region,
            number,
            path,
            offset: format::HEADER_LEN,
            persisted: format::HEADER_LEN,
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
    /// a power loss until [`Writer::sync`] covers it. The payload is stored before the record
    /// header, so a process crash in the middle leaves either no record or a record whose
    /// checksum fails; neither is ever replayed.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the record does not [fit](Writer::fits) (nothing is
    /// written); [`Error::Io`] with [`IoOp::Write`] if the region refuses the store.
    pub fn add_record(&mut self, payload: &[u8]) -> Result<()> {
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
        // Same framing as `record::encode`, written in two pieces to avoid copying the payload.
        let len_bytes = len.to_le_bytes();
        let crc = checksum::checksum2(&len_bytes, payload);
        let mut header = [0u8; record::HEADER_LEN];
        let (crc_dst, len_dst) = header.split_at_mut(4);
        crc_dst.copy_from_slice(&crc.to_le_bytes());
        len_dst.copy_from_slice(&len_bytes);

        let payload_at = self.offset + record::HEADER_LEN;
        self.region
            .write(payload_at, payload)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.region
            .write(self.offset, &header)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.offset = payload_at + payload.len();
        Ok(())
    }

    /// Persists every byte written since the previous sync, so that every record added so far
    /// survives a power loss. Does nothing if nothing was added.
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
            .persist(self.persisted, self.offset - self.persisted)
            .map_err(|e| Error::io(IoOp::Persist, &self.path, e))?;
        self.persisted = self.offset;
        Ok(())
    }

    /// The segment's file number.
    pub fn number(&self) -> FileNum {
        self.number
    }

    #[cfg(test)]
    /// The segment's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    #[cfg(test)]
    /// Bytes of the segment used so far, header included: the offset of the next record.
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
