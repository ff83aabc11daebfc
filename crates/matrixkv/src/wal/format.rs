//! The byte layout of a WAL segment: the 64-byte segment header and the limits that follow
//! from it. Records after the header use the shared framing of [`crate::record`]; their payload
//! is one encoded [`crate::batch::WriteBatch`]. Specified in `docs/format/wal.md`.
//!
//! Callers: [`super::writer::Writer`] encodes the header, [`super::reader::read_segment`]
//! decodes it. Pure functions, no I/O; thread-safe.
#![deny(clippy::indexing_slicing)]

use crate::checksum::{self, CHECKSUM_TYPE_CRC32C};
use crate::coding::{self, Decoder};
use crate::error::CorruptionReason;
use crate::layout::FileNum;
use crate::record;

/// Magic number at offset 0: the bytes `mxkv-wal` read as a little-endian u64.
// FORMAT: never change; see docs/format/wal.md
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"mxkv-wal");

/// The segment format version this build writes: record checksums seeded with the segment
/// number, and an end marker after every record (so a recycled region needs no zeroing).
// FORMAT: never change; see docs/format/wal.md
pub(crate) const FORMAT_VERSION: u32 = 2;

/// The first format version: record checksums without a seed, regions always zero-filled.
/// Still read (databases written by older builds); never written.
// FORMAT: never change; see docs/format/wal.md
pub(crate) const FORMAT_VERSION_1: u32 = 1;

/// Bytes of the segment header; the first record starts here.
// FORMAT: never change; see docs/format/wal.md
pub(crate) const HEADER_LEN: usize = 64;

/// Offset of the header checksum, which covers bytes `[0, HEADER_CRC_OFFSET)`.
// FORMAT: never change; see docs/format/wal.md
pub(crate) const HEADER_CRC_OFFSET: usize = 32;

/// Bytes of zeros the writer always leaves after the last record: the end marker (an all-zero
/// record header, see [`crate::record`]).
// FORMAT: never change; see docs/format/wal.md
pub(crate) const END_MARKER_LEN: usize = record::HEADER_LEN;

/// Smallest region that can hold a segment: the header, one empty record and the end marker.
pub(crate) const MIN_REGION_LEN: usize = HEADER_LEN + record::HEADER_LEN + END_MARKER_LEN;

/// The decoded header of a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SegmentHeader {
    /// The format version ([`FORMAT_VERSION_1`] or [`FORMAT_VERSION`]).
    pub(crate) version: u32,
    /// The segment's file number (the `NNNNNN` of `NNNNNN.wal`).
    pub(crate) number: FileNum,
    /// Length of the region in bytes, as created.
    pub(crate) region_len: u64,
}

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HeaderError {
    /// The bytes are damaged or not a WAL segment.
    Corrupt(CorruptionReason),
    /// A well-formed header of a format version this build does not know.
    UnknownVersion(u32),
    /// A checksum type this build does not know.
    UnknownChecksumType(u8),
}

impl From<CorruptionReason> for HeaderError {
    fn from(r: CorruptionReason) -> Self {
        HeaderError::Corrupt(r)
    }
}

impl SegmentHeader {
    /// The seed of the segment's record checksums: none in version 1, the segment number
    /// from version 2 on.
    pub(crate) fn record_seed(&self) -> record::Seed {
        if self.version == FORMAT_VERSION_1 {
            record::Seed::None
        } else {
            record::Seed::Number(self.number.0)
        }
    }
}

/// Encodes the 64-byte header of segment `number` in a region of `region_len` bytes, in the
/// current format version.
pub(crate) fn encode_header(number: FileNum, region_len: u64) -> [u8; HEADER_LEN] {
    encode_header_version(FORMAT_VERSION, number, region_len)
}

/// Encodes a header of format `version` (tests write version 1 with it).
pub(crate) fn encode_header_version(
    version: u32,
    number: FileNum,
    region_len: u64,
) -> [u8; HEADER_LEN] {
    let mut v = Vec::with_capacity(HEADER_LEN);
    coding::put_u64(&mut v, MAGIC);
    coding::put_u32(&mut v, version);
    v.push(CHECKSUM_TYPE_CRC32C);
    v.extend_from_slice(&[0; 3]);
    coding::put_u64(&mut v, number.0);
    coding::put_u64(&mut v, region_len);
    debug_assert_eq!(v.len(), HEADER_CRC_OFFSET);
    let crc = checksum::checksum(&v);
    coding::put_u32(&mut v, crc);
    v.resize(HEADER_LEN, 0);
    let mut out = [0u8; HEADER_LEN];
    out.copy_from_slice(&v);
    out
}

/// Decodes and validates a header. `bytes` may be longer than the header.
///
/// Order of checks: magic, version (a version this build does not know is reported as such
/// even if other fields look damaged, because a later version may move them), checksum type,
/// checksum, then the reserved bytes must be zero.
pub(crate) fn decode_header(bytes: &[u8]) -> Result<SegmentHeader, HeaderError> {
    let header = bytes.get(..HEADER_LEN).ok_or(CorruptionReason::Truncated)?;
    let mut dec = Decoder::new(header);
    if dec.u64()? != MAGIC {
        return Err(CorruptionReason::BadMagic.into());
    }
    let version = dec.u32()?;
    if version != FORMAT_VERSION && version != FORMAT_VERSION_1 {
        return Err(HeaderError::UnknownVersion(version));
    }
    let checksum_type = dec.u8()?;
    if checksum_type != CHECKSUM_TYPE_CRC32C {
        return Err(HeaderError::UnknownChecksumType(checksum_type));
    }
    let padding = dec.bytes(3)?;
    let number = FileNum(dec.u64()?);
    let region_len = dec.u64()?;
    let stored = dec.u32()?;
    let covered = header
        .get(..HEADER_CRC_OFFSET)
        .ok_or(CorruptionReason::Truncated)?;
    checksum::verify(stored, covered)?;
    let reserved = dec.rest();
    if padding.iter().chain(reserved).any(|&b| b != 0) {
        return Err(CorruptionReason::Invalid("reserved header bytes are not zero").into());
    }
    Ok(SegmentHeader {
        version,
        number,
        region_len,
    })
}

#[cfg(test)]
/// Largest batch payload that fits in an empty segment of a region of `region_len` bytes
/// (0 if the region is too small to hold a segment at all).
pub(crate) fn max_payload_len(region_len: usize) -> usize {
    region_len
        .saturating_sub(HEADER_LEN + record::HEADER_LEN + END_MARKER_LEN)
        .min(u32::MAX as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = encode_header(FileNum(42), 4096);
        assert_eq!(&h[..8], b"mxkv-wal");
        assert_eq!(
            decode_header(&h),
            Ok(SegmentHeader {
                version: 2,
                number: FileNum(42),
                region_len: 4096
            })
        );
        let v1 = encode_header_version(FORMAT_VERSION_1, FileNum(42), 4096);
        let h1 = decode_header(&v1).unwrap();
        assert_eq!((h1.version, h1.record_seed()), (1, record::Seed::None));
        assert_eq!(
            decode_header(&h).unwrap().record_seed(),
            record::Seed::Number(42)
        );
    }

    #[test]
    fn every_single_bit_flip_in_the_header_is_detected() {
        let h = encode_header(FileNum(7), 1 << 20);
        for byte in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut bad = h;
                bad[byte] ^= 1 << bit;
                assert!(
                    decode_header(&bad).is_err(),
                    "flip of bit {bit} in byte {byte} was accepted"
                );
            }
        }
    }

    #[test]
    fn unknown_version_and_checksum_type_are_not_corruption() {
        let mut h = encode_header(FileNum(1), 4096);
        h[8] = 3;
        assert_eq!(decode_header(&h), Err(HeaderError::UnknownVersion(3)));
        let mut h = encode_header(FileNum(1), 4096);
        h[12] = 9;
        assert_eq!(decode_header(&h), Err(HeaderError::UnknownChecksumType(9)));
    }

    #[test]
    fn short_header_is_truncated() {
        let h = encode_header(FileNum(1), 4096);
        assert_eq!(
            decode_header(&h[..63]),
            Err(HeaderError::Corrupt(CorruptionReason::Truncated))
        );
    }

    #[test]
    fn max_payload_leaves_room_for_framing_and_end_marker() {
        assert_eq!(max_payload_len(256), 256 - 80);
        assert_eq!(max_payload_len(MIN_REGION_LEN), 0);
        assert_eq!(max_payload_len(10), 0);
    }
}
