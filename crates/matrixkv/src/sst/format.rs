//! The SSTable on-disk format: every constant, the block handle, the block trailer, the footer
//! and the properties block. The specification is docs/format/sst.md; keep the two in sync
//! (the golden test in `sst::tests::golden` compares the document's hex dump with the
//! builder's output).
//!
//! Decoders here are pure and return [`CorruptionReason`]; the reader wraps them with the file
//! and offset. Used by `sst::builder` (encode) and `sst::reader` (decode).
//!
//! Thread safety: pure functions and plain data.
#![deny(clippy::indexing_slicing)]

use crate::checksum;
use crate::coding::{Decoder, get_u32, get_u64, put_u32, put_u64, put_varint64};
use crate::error::CorruptionReason;
use crate::key::SeqNo;

use super::compression::Compression;

/// Format version written by this build, and the only one it reads.
// FORMAT: never change; see docs/format/sst.md
pub const FORMAT_VERSION: u32 = 1;

/// Magic number in the last 8 bytes of every SSTable (little-endian).
// FORMAT: never change; see docs/format/sst.md
pub const MAGIC: u64 = 0x8e1f_4b53_5354_764d;

/// Bytes after every block: block type u8 + masked CRC32C u32.
// FORMAT: never change; see docs/format/sst.md
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Block type: stored as is.
// FORMAT: never change; see docs/format/sst.md
pub const BLOCK_TYPE_NONE: u8 = 0;
/// Block type: `varint(uncompressed_len) ++ LZ4 block`.
// FORMAT: never change; see docs/format/sst.md
pub const BLOCK_TYPE_LZ4: u8 = 1;
/// Block type: `varint(uncompressed_len) ++ zstd frame`.
// FORMAT: never change; see docs/format/sst.md
pub const BLOCK_TYPE_ZSTD: u8 = 2;

/// Largest uncompressed length a compressed block may declare. The builder stores larger
/// blocks uncompressed; the reader rejects larger declarations before allocating.
// FORMAT: never change; see docs/format/sst.md
pub const MAX_UNCOMPRESSED_BLOCK_BYTES: usize = 64 << 20;

/// Restart interval of the index block (every entry is a restart point).
// FORMAT: never change; see docs/format/sst.md
pub const INDEX_RESTART_INTERVAL: usize = 1;

/// Largest number of bloom probes a filter block may declare.
// FORMAT: never change; see docs/format/sst.md
pub const MAX_BLOOM_PROBES: u8 = 30;

/// Bytes of the version-independent footer tail:
/// `body_len u16 | checksum_type u8 | reserved u8 | version u32 | footer_crc u32 | magic u64`.
// FORMAT: never change; see docs/format/sst.md
pub const FOOTER_TAIL_LEN: usize = 20;

/// Bytes of the version-1 footer body (three fixed-width block handles).
// FORMAT: never change; see docs/format/sst.md
pub const FOOTER_BODY_LEN_V1: usize = 48;

/// Total bytes of a version-1 footer.
// FORMAT: never change; see docs/format/sst.md
pub const FOOTER_LEN: usize = FOOTER_BODY_LEN_V1 + FOOTER_TAIL_LEN;

/// Largest footer body any version may declare; a larger `body_len` is corruption.
// FORMAT: never change; see docs/format/sst.md
pub const MAX_FOOTER_BODY_LEN: usize = 4096;

/// Property ids of the properties block (`varint id | varint len | value`).
// FORMAT: never change these ids; see docs/format/sst.md
pub mod prop {
    /// Number of entries.
    pub const ENTRIES: u32 = 1;
    /// Number of tombstones.
    pub const DELETIONS: u32 = 2;
    /// Sum of internal-key lengths.
    pub const RAW_KEY_BYTES: u32 = 3;
    /// Sum of value lengths.
    pub const RAW_VALUE_BYTES: u32 = 4;
    /// Smallest sequence number.
    pub const SMALLEST_SEQ: u32 = 5;
    /// Largest sequence number.
    pub const LARGEST_SEQ: u32 = 6;
    /// Number of data blocks.
    pub const DATA_BLOCKS: u32 = 7;
    /// Compression requested for the data blocks (a block-type byte value).
    pub const COMPRESSION: u32 = 8;
    /// Bloom bits per key (0 = no filter block).
    pub const BLOOM_BITS_PER_KEY: u32 = 9;
}

/// Where a block lives in the file: offset of its first byte and its stored size, not
/// counting the 5-byte trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// File offset of the block.
    pub offset: u64,
    /// Stored (possibly compressed) size of the block, without trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the varint encoding used in index entries: `varint offset | varint size`.
    pub fn encode_varint(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.offset);
        put_varint64(dst, self.size);
    }

    /// Decodes an index-entry value; the whole value must be consumed.
    pub fn decode_varint(value: &[u8]) -> Result<BlockHandle, CorruptionReason> {
        let mut d = Decoder::new(value);
        let offset = d.varint64()?;
        let size = d.varint64()?;
        if !d.is_empty() {
            return Err(CorruptionReason::Invalid(
                "trailing bytes after a block handle",
            ));
        }
        Ok(BlockHandle { offset, size })
    }

    /// First byte after the block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Builds the 5-byte trailer of a stored block: type byte and masked CRC32C of
/// `stored ++ [block_type]`.
pub fn block_trailer(stored: &[u8], block_type: u8) -> [u8; BLOCK_TRAILER_LEN] {
    let crc = checksum::checksum2(stored, &[block_type]);
    let c = crc.to_le_bytes();
    [block_type, c[0], c[1], c[2], c[3]]
}

/// Verifies a block read together with its trailer (`stored ++ trailer`); returns the
/// stored bytes and the block type.
pub fn verify_block(with_trailer: &[u8]) -> Result<(&[u8], u8), CorruptionReason> {
    let n = with_trailer
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or(CorruptionReason::Truncated)?;
    let (stored, trailer) = with_trailer.split_at(n);
    let block_type = *trailer.first().ok_or(CorruptionReason::Truncated)?;
    let stored_crc = get_u32(trailer, 1)?;
    let computed = checksum::checksum2(stored, &[block_type]);
    if stored_crc != computed {
        return Err(CorruptionReason::ChecksumMismatch {
            stored: stored_crc,
            computed,
        });
    }
    Ok((stored, block_type))
}

/// The decoded footer of a version-1 table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The filter block; `size == 0` (and `offset == 0`) when the table has no filter.
    pub filter: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
}

/// Why a footer was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FooterError {
    /// Damaged bytes.
    Corrupt(CorruptionReason),
    /// A well-formed footer of a format version this build cannot read.
    UnknownVersion(u32),
}

impl From<CorruptionReason> for FooterError {
    fn from(r: CorruptionReason) -> Self {
        FooterError::Corrupt(r)
    }
}

/// The version-independent tail of a footer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FooterTail {
    /// Bytes of the version-specific body before the tail.
    pub body_len: usize,
    /// The format version.
    pub version: u32,
}

impl Footer {
    /// Encodes the version-1 footer.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        for h in [self.filter, self.properties, self.index] {
            put_u64(&mut b, h.offset);
            put_u64(&mut b, h.size);
        }
        b.extend_from_slice(&(FOOTER_BODY_LEN_V1 as u16).to_le_bytes());
        b.push(checksum::CHECKSUM_TYPE_CRC32C);
        b.push(0); // reserved
        put_u32(&mut b, FORMAT_VERSION);
        let crc = checksum::checksum(&b);
        put_u32(&mut b, crc);
        put_u64(&mut b, MAGIC);
        debug_assert_eq!(b.len(), FOOTER_LEN);
        b
    }

    /// Checks the last [`FOOTER_TAIL_LEN`] bytes of a file (magic, checksum type, body
    /// length) and returns the body length and the (not yet trusted) version.
    ///
    /// `file_len` bounds the declared body length.
    pub fn decode_tail(tail: &[u8], file_len: u64) -> Result<FooterTail, CorruptionReason> {
        if tail.len() != FOOTER_TAIL_LEN {
            return Err(CorruptionReason::Truncated);
        }
        if get_u64(tail, 12)? != MAGIC {
            return Err(CorruptionReason::BadMagic);
        }
        let mut d = Decoder::new(tail);
        let body_len = usize::from(u16::from_le_bytes([d.u8()?, d.u8()?]));
        let checksum_type = d.u8()?;
        if checksum_type != checksum::CHECKSUM_TYPE_CRC32C {
            return Err(CorruptionReason::UnknownType(checksum_type));
        }
        let _reserved = d.u8()?;
        let version = d.u32()?;
        if body_len > MAX_FOOTER_BODY_LEN || (body_len + FOOTER_TAIL_LEN) as u64 > file_len {
            return Err(CorruptionReason::BadLength);
        }
        Ok(FooterTail { body_len, version })
    }

    /// Decodes a whole footer (`body_len + FOOTER_TAIL_LEN` bytes, ending at the file's end):
    /// verifies the footer CRC, then the version, then the version-1 layout.
    ///
    /// `footer_offset` is the file offset of `buf[0]`; every handle must end at or before it.
    pub fn decode(buf: &[u8], footer_offset: u64) -> Result<Footer, FooterError> {
        let crc_at = buf
            .len()
            .checked_sub(12)
            .ok_or(CorruptionReason::Truncated)?;
        let covered = buf.get(..crc_at).ok_or(CorruptionReason::Truncated)?;
        let stored = get_u32(buf, crc_at)?;
        let computed = checksum::checksum(covered);
        if stored != computed {
            return Err(CorruptionReason::ChecksumMismatch { stored, computed }.into());
        }
        let tail_at = buf
            .len()
            .checked_sub(FOOTER_TAIL_LEN)
            .ok_or(CorruptionReason::Truncated)?;
        let version = get_u32(buf, tail_at + 4)?;
        if version != FORMAT_VERSION {
            return Err(FooterError::UnknownVersion(version));
        }
        if tail_at != FOOTER_BODY_LEN_V1 {
            return Err(
                CorruptionReason::Invalid("footer body length is not 48 in version 1").into(),
            );
        }
        if buf.get(tail_at + 3) != Some(&0) {
            return Err(CorruptionReason::Invalid("reserved footer byte is not zero").into());
        }
        let mut d = Decoder::new(buf);
        let mut handle = || -> Result<BlockHandle, CorruptionReason> {
            Ok(BlockHandle {
                offset: d.u64()?,
                size: d.u64()?,
            })
        };
        let footer = Footer {
            filter: handle()?,
            properties: handle()?,
            index: handle()?,
        };
        let within = |h: &BlockHandle| h.end_with_trailer().is_some_and(|e| e <= footer_offset);
        if !within(&footer.properties) || !within(&footer.index) {
            return Err(CorruptionReason::BadLength.into());
        }
        if footer.filter.size == 0 {
            if footer.filter.offset != 0 {
                return Err(
                    CorruptionReason::Invalid("absent filter with a nonzero offset").into(),
                );
            }
        } else if !within(&footer.filter) {
            return Err(CorruptionReason::BadLength.into());
        }
        Ok(footer)
    }
}

/// Statistics of a table, stored in its properties block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TableProperties {
    /// Number of entries (values and tombstones).
    pub entries: u64,
    /// Number of tombstones.
    pub deletions: u64,
    /// Sum of the internal-key lengths of all entries (before prefix compression).
    pub raw_key_bytes: u64,
    /// Sum of the value lengths of all entries.
    pub raw_value_bytes: u64,
    /// Smallest sequence number of any entry.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry.
    pub largest_seq: SeqNo,
    /// Number of data blocks.
    pub data_blocks: u64,
    /// Compression requested for the data blocks (a block may still be stored raw).
    pub compression: Compression,
    /// Bloom filter bits per key (0 = the table has no filter).
    pub bloom_bits_per_key: u32,
}

impl TableProperties {
    /// Encodes the properties block contents: `varint id | varint len | value` records in
    /// ascending id order; every version-1 value is one varint.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(64);
        let fields = [
            (prop::ENTRIES, self.entries),
            (prop::DELETIONS, self.deletions),
            (prop::RAW_KEY_BYTES, self.raw_key_bytes),
            (prop::RAW_VALUE_BYTES, self.raw_value_bytes),
            (prop::SMALLEST_SEQ, self.smallest_seq.0),
            (prop::LARGEST_SEQ, self.largest_seq.0),
            (prop::DATA_BLOCKS, self.data_blocks),
            (prop::COMPRESSION, u64::from(self.compression.block_type())),
            (prop::BLOOM_BITS_PER_KEY, u64::from(self.bloom_bits_per_key)),
        ];
        let mut v = Vec::with_capacity(10);
        for (id, value) in fields {
            v.clear();
            put_varint64(&mut v, value);
            put_varint64(&mut b, u64::from(id));
            put_varint64(&mut b, v.len() as u64);
            b.extend_from_slice(&v);
        }
        b
    }

    /// Decodes a properties block. Unknown ids are skipped (forward compatibility); ids must
    /// ascend; every version-1 id must be present; the values must be consistent.
    pub fn decode(block: &[u8]) -> Result<TableProperties, CorruptionReason> {
        let mut p = TableProperties::default();
        let mut seen: u32 = 0; // bit i set: property id i was present
        let mut last_id: u64 = 0;
        let mut d = Decoder::new(block);
        while !d.is_empty() {
            let id = d.varint64()?;
            if id <= last_id {
                return Err(CorruptionReason::Invalid("property ids out of order"));
            }
            last_id = id;
            let value = d.length_prefixed()?;
            let Ok(id) = u32::try_from(id) else { continue };
            if id == 0 || id > prop::BLOOM_BITS_PER_KEY {
                continue; // a property added by a later writer
            }
            let mut vd = Decoder::new(value);
            let v = vd.varint64()?;
            if !vd.is_empty() {
                return Err(CorruptionReason::Invalid(
                    "trailing bytes in a property value",
                ));
            }
            seen |= 1 << id;
            match id {
                prop::ENTRIES => p.entries = v,
                prop::DELETIONS => p.deletions = v,
                prop::RAW_KEY_BYTES => p.raw_key_bytes = v,
                prop::RAW_VALUE_BYTES => p.raw_value_bytes = v,
                prop::SMALLEST_SEQ => p.smallest_seq = SeqNo(v),
                prop::LARGEST_SEQ => p.largest_seq = SeqNo(v),
                prop::DATA_BLOCKS => p.data_blocks = v,
                prop::COMPRESSION => {
                    let t = u8::try_from(v).map_err(|_| CorruptionReason::BadLength)?;
                    p.compression = Compression::from_block_type(t)?;
                }
                _ => {
                    p.bloom_bits_per_key =
                        u32::try_from(v).map_err(|_| CorruptionReason::BadLength)?;
                }
            }
        }
        let all: u32 = (1..=prop::BLOOM_BITS_PER_KEY).fold(0, |m, id| m | (1 << id));
        if seen & all != all {
            return Err(CorruptionReason::Invalid("a required property is missing"));
        }
        if p.entries == 0
            || p.data_blocks == 0
            || p.deletions > p.entries
            || p.smallest_seq > p.largest_seq
            || p.data_blocks > p.entries
        {
            return Err(CorruptionReason::Invalid("inconsistent table properties"));
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn footer() -> Footer {
        Footer {
            filter: BlockHandle {
                offset: 100,
                size: 20,
            },
            properties: BlockHandle {
                offset: 125,
                size: 30,
            },
            index: BlockHandle {
                offset: 160,
                size: 40,
            },
        }
    }

    #[test]
    fn footer_round_trips() {
        let f = footer();
        let b = f.encode();
        assert_eq!(b.len(), FOOTER_LEN);
        let tail = Footer::decode_tail(&b[FOOTER_BODY_LEN_V1..], 1000).unwrap();
        assert_eq!(tail.body_len, FOOTER_BODY_LEN_V1);
        assert_eq!(tail.version, FORMAT_VERSION);
        assert_eq!(Footer::decode(&b, 205).unwrap(), f);
    }

    #[test]
    fn footer_handle_past_the_footer_is_rejected() {
        let b = footer().encode();
        assert_eq!(
            Footer::decode(&b, 204),
            Err(FooterError::Corrupt(CorruptionReason::BadLength))
        );
    }

    #[test]
    fn footer_with_another_version_and_valid_crc_is_unknown_version() {
        let mut b = footer().encode();
        b[52..56].copy_from_slice(&2u32.to_le_bytes());
        let crc = checksum::checksum(&b[..56]);
        b[56..60].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(Footer::decode(&b, 205), Err(FooterError::UnknownVersion(2)));
    }

    #[test]
    fn every_flipped_footer_byte_is_detected() {
        let b = footer().encode();
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 0x40;
            let r = Footer::decode_tail(&bad[FOOTER_BODY_LEN_V1..], 1000)
                .map_err(FooterError::Corrupt)
                .and_then(|_| Footer::decode(&bad, 205));
            assert!(matches!(r, Err(FooterError::Corrupt(_))), "byte {i}: {r:?}");
        }
    }

    #[test]
    fn properties_round_trip_and_skip_unknown_ids() {
        let p = TableProperties {
            entries: 10,
            deletions: 2,
            raw_key_bytes: 300,
            raw_value_bytes: 5000,
            smallest_seq: SeqNo(3),
            largest_seq: SeqNo(99),
            data_blocks: 2,
            compression: Compression::Lz4,
            bloom_bits_per_key: 10,
        };
        let mut b = p.encode();
        assert_eq!(TableProperties::decode(&b).unwrap(), p);
        // A later writer's property 40 holding a byte string.
        put_varint64(&mut b, 40);
        put_varint64(&mut b, 3);
        b.extend_from_slice(b"xyz");
        assert_eq!(TableProperties::decode(&b).unwrap(), p);
    }

    #[test]
    fn properties_missing_or_inconsistent_are_rejected() {
        let p = TableProperties {
            entries: 1,
            data_blocks: 1,
            ..TableProperties::default()
        };
        let b = p.encode();
        // Drop the last record (bloom bits: id 9, len 1, value 0).
        assert!(TableProperties::decode(&b[..b.len() - 3]).is_err());
        let bad = TableProperties { deletions: 2, ..p };
        assert!(TableProperties::decode(&bad.encode()).is_err());
    }

    #[test]
    fn block_trailer_verifies_and_detects_damage() {
        let mut b = b"block bytes".to_vec();
        b.extend_from_slice(&block_trailer(b"block bytes", BLOCK_TYPE_LZ4));
        assert_eq!(
            verify_block(&b).unwrap(),
            (&b"block bytes"[..], BLOCK_TYPE_LZ4)
        );
        for i in 0..b.len() {
            let mut bad = b.clone();
            bad[i] ^= 1;
            assert!(verify_block(&bad).is_err(), "byte {i}");
        }
    }
}
