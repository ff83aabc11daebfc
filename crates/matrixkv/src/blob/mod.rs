//! Key-value separation: large values leave the LSM tree for *blob files* on the slow tier.
//!
//! When a compaction writes an L1+ table, each value of at least `Options::min_blob_bytes`
//! is appended to a blob file and the table stores a [`BlobPointer`] under the kind
//! [`crate::key::ValueKind::BlobIndex`] instead. Values are therefore written to the slow tier
//! once, and later compactions move only keys and pointers. A pointer dropped by compaction
//! (an overwritten or deleted version) makes its record garbage; the manifest counts garbage
//! per file and drops a file whose records are all garbage. Records in files whose garbage
//! share passes `Options::blob_gc_ratio` are copied to a new file by the compactions that meet
//! their pointers (relocation), so such files drain. When the blob files hold more than
//! `Options::blob_space_budget` times their live bytes, a blob GC job rewrites the tables that
//! reference the most garbage-heavy files (the last level included, which no compaction passes).
//! See docs/format/blob.md, docs/decisions/0005-key-value-separation.md and
//! docs/decisions/0009-blob-gc.md.
//!
//! A blob file is `header | record* | footer`:
//! - header (24 bytes): magic `MKVBLOB1`, format version (u32 LE), file number (u64 LE),
//!   masked CRC32C of the preceding 20 bytes (u32 LE);
//! - record: masked CRC32C (u32 LE) of the rest of the record, varint key length, varint
//!   value length, user key, value;
//! - footer (28 bytes): record count (u64 LE), record bytes (u64 LE), masked CRC32C of those
//!   16 bytes (u32 LE), magic `MKVBLOB1`.
//!
//! This module holds the format (pure functions); [`writer`] appends records, [`reader`]
//! reads them back. Pure data and functions: thread-safe.
#![deny(clippy::indexing_slicing)]

pub mod reader;
pub mod writer;

use crate::checksum;
use crate::coding::{Decoder, get_u32, get_u64, put_u32, put_u64, put_varint64, varint_len};
use crate::error::CorruptionReason;
use crate::layout::FileNum;

/// Magic bytes at the start and at the end of a blob file.
// FORMAT: never change; see docs/format/blob.md
pub const MAGIC: &[u8; 8] = b"MKVBLOB1";
/// Format version written in the header.
// FORMAT: never change; see docs/format/blob.md
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of the file header.
// FORMAT: never change; see docs/format/blob.md
pub const HEADER_LEN: usize = 24;
/// Bytes of the file footer.
// FORMAT: never change; see docs/format/blob.md
pub const FOOTER_LEN: usize = 28;
/// Largest record the reader accepts (the largest value `Options` allows, 1 GiB, plus the
/// largest key, 1 MiB, and the record header, rounded up): bounds what a corrupt pointer can
/// make it allocate.
pub const MAX_RECORD_BYTES: u64 = (1 << 30) + (2 << 20);

/// Where a separated value lives: the value of a `BlobIndex` entry.
///
/// Encoded as three varints: file number, offset of the record in the file, record length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlobPointer {
    /// The blob file's number.
    pub file: FileNum,
    /// Offset of the record's first byte.
    pub offset: u64,
    /// Length of the whole record (checksum, lengths, key and value).
    pub len: u64,
}

impl BlobPointer {
    /// Appends the encoded pointer to `dst`.
    pub fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.file.0);
        put_varint64(dst, self.offset);
        put_varint64(dst, self.len);
    }

    #[cfg(test)]
    /// The encoded pointer.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(12);
        self.encode_to(&mut v);
        v
    }

    /// Decodes a pointer from untrusted bytes (the whole slice must be consumed).
    pub fn decode(bytes: &[u8]) -> Result<BlobPointer, CorruptionReason> {
        let mut d = Decoder::new(bytes);
        let file = FileNum(d.varint64()?);
        let offset = d.varint64()?;
        let len = d.varint64()?;
        if !d.is_empty() {
            return Err(CorruptionReason::Invalid(
                "trailing bytes after a blob pointer",
            ));
        }
        if len > MAX_RECORD_BYTES || offset < HEADER_LEN as u64 {
            return Err(CorruptionReason::Invalid("blob pointer out of range"));
        }
        Ok(BlobPointer { file, offset, len })
    }
}

/// The encoded file header for blob file `number`.
pub fn encode_header(number: FileNum) -> Vec<u8> {
    let mut h = Vec::with_capacity(HEADER_LEN);
    h.extend_from_slice(MAGIC);
    put_u32(&mut h, FORMAT_VERSION);
    put_u64(&mut h, number.0);
    let crc = checksum::checksum(&h);
    put_u32(&mut h, crc);
    h
}

/// Checks a file header: magic, version, checksum and that it names file `number`.
pub fn check_header(h: &[u8], number: FileNum) -> Result<(), CorruptionReason> {
    let body = h.get(..20).ok_or(CorruptionReason::Truncated)?;
    if body.get(..8) != Some(MAGIC.as_slice()) {
        return Err(CorruptionReason::BadMagic);
    }
    checksum::verify(get_u32(h, 20)?, body)?;
    if get_u32(h, 8)? != FORMAT_VERSION {
        return Err(CorruptionReason::Invalid("unsupported blob file version"));
    }
    if get_u64(h, 12)? != number.0 {
        return Err(CorruptionReason::Invalid(
            "blob file header names another file",
        ));
    }
    Ok(())
}

/// The encoded footer of a file holding `records` records of `record_bytes` bytes in all.
pub fn encode_footer(records: u64, record_bytes: u64) -> Vec<u8> {
    let mut f = Vec::with_capacity(FOOTER_LEN);
    put_u64(&mut f, records);
    put_u64(&mut f, record_bytes);
    let crc = checksum::checksum(&f);
    put_u32(&mut f, crc);
    f.extend_from_slice(MAGIC);
    f
}

/// Decodes a footer: `(records, record_bytes)`.
pub fn decode_footer(f: &[u8]) -> Result<(u64, u64), CorruptionReason> {
    if f.len() != FOOTER_LEN {
        return Err(CorruptionReason::Truncated);
    }
    if f.get(20..) != Some(MAGIC.as_slice()) {
        return Err(CorruptionReason::BadMagic);
    }
    let body = f.get(..16).ok_or(CorruptionReason::Truncated)?;
    checksum::verify(get_u32(f, 16)?, body)?;
    Ok((get_u64(f, 0)?, get_u64(f, 8)?))
}

/// Bytes of the record holding `key` and `value`.
pub fn record_len(key_len: usize, value_len: usize) -> u64 {
    (4 + varint_len(key_len as u64) + varint_len(value_len as u64) + key_len + value_len) as u64
}

/// Sets `dst` to the record's prefix (checksum and lengths): the caller appends `dst`, `key`
/// and `value` in that order. Computing the checksum over the slices avoids copying the
/// value; reusing `dst` avoids an allocation per record.
pub fn record_prefix(key: &[u8], value: &[u8], dst: &mut Vec<u8>) {
    dst.clear();
    put_u32(dst, 0);
    put_varint64(dst, key.len() as u64);
    put_varint64(dst, value.len() as u64);
    let mut s = checksum::ChecksumStream::new();
    s.update(dst.get(4..).unwrap_or_default());
    s.update(key);
    s.update(value);
    if let Some(crc) = dst.get_mut(..4) {
        crc.copy_from_slice(&s.finish().to_le_bytes());
    }
}

/// The length of the record at the start of `rest` (read from its header; not checked
/// against the data).
pub fn record_len_at(rest: &[u8]) -> Result<usize, CorruptionReason> {
    let body = rest.get(4..).ok_or(CorruptionReason::Truncated)?;
    let mut d = Decoder::new(body);
    let key_len = d.varint64()?;
    let value_len = d.varint64()?;
    let total = 4u64
        .saturating_add(d.position() as u64)
        .saturating_add(key_len)
        .saturating_add(value_len);
    if total > MAX_RECORD_BYTES {
        return Err(CorruptionReason::BadLength);
    }
    usize::try_from(total).map_err(|_| CorruptionReason::BadLength)
}

/// Decodes a whole record: checks its checksum and returns `(key, value)`.
pub fn decode_record(rec: &[u8]) -> Result<(&[u8], &[u8]), CorruptionReason> {
    let stored = get_u32(rec, 0)?;
    let body = rec.get(4..).ok_or(CorruptionReason::Truncated)?;
    checksum::verify(stored, body)?;
    let mut d = Decoder::new(body);
    let key_len = d.length()?;
    let value_len = d.length()?;
    let key = d.bytes(key_len)?;
    let value = d.bytes(value_len)?;
    if !d.is_empty() {
        return Err(CorruptionReason::Invalid(
            "blob record longer than its contents",
        ));
    }
    Ok((key, value))
}

#[cfg(test)]
mod tests;
