//! The RowTable format: every constant, the 128-byte header and the 32-byte metadata entry.
//! The specification is docs/format/rowtable.md; keep the two in sync (the golden test in
//! `row_table::tests` compares the document's hex dump with the builder's output).
//!
//! A row is one logical byte stream laid over its page list:
//! `header | entry array | key area | filter | value area` (the filter, a bloom filter over the
//! row's user keys, is empty in rows written without one and in version 1 rows).
//!
//! Decoders here are pure and return [`CorruptionReason`]; the reader wraps them with the row
//! and the logical offset. Used by `row_table::builder` (encode) and `row_table::reader`
//! (decode).
//!
//! Thread safety: pure functions and plain data.
#![deny(clippy::indexing_slicing)]

use crate::checksum::{self, CHECKSUM_TYPE_CRC32C};
use crate::coding::{self, Decoder};
use crate::error::CorruptionReason;
use crate::key::{SeqNo, TAG_LEN};

/// Magic number at offset 0: the bytes `mxkv-row` read as a little-endian u64.
// FORMAT: never change; see docs/format/rowtable.md
pub const MAGIC: u64 = u64::from_le_bytes(*b"mxkv-row");

/// The RowTable format version this build writes. Version 2 added the bloom filter section
/// (header bytes 84..96); this build also reads version 1, whose rows have no filter.
// FORMAT: never change; see docs/format/rowtable.md
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version this build reads: version 1 is version 2 without a filter
/// (its header bytes 84..96 are reserved zeros).
// FORMAT: never change; see docs/format/rowtable.md
pub const OLDEST_READ_VERSION: u32 = 1;

/// Bytes of the header; the entry array starts here.
// FORMAT: never change; see docs/format/rowtable.md
pub const HEADER_LEN: usize = 128;

/// Offset of the header checksum, which covers bytes `[0, HEADER_CRC_OFFSET)`.
// FORMAT: never change; see docs/format/rowtable.md
pub const HEADER_CRC_OFFSET: usize = 116;

/// Offset of the 8-byte aligned commit word, the last thing written.
// FORMAT: never change; see docs/format/rowtable.md
pub const COMMIT_OFFSET: usize = 120;

/// XORed with the row number to form the commit word: the bytes `mxkv-cmt` as a LE u64.
// FORMAT: never change; see docs/format/rowtable.md
pub const COMMIT_MAGIC: u64 = u64::from_le_bytes(*b"mxkv-cmt");

/// Bytes of one metadata entry.
// FORMAT: never change; see docs/format/rowtable.md
pub const ENTRY_LEN: usize = 32;

/// Largest entry count: a forward pointer (u32) must be able to hold `entries`.
// FORMAT: never change; see docs/format/rowtable.md
pub const MAX_ENTRIES: u64 = u32::MAX as u64;

/// Largest key area: every key offset and key end must fit the u32 `key_off`.
// FORMAT: never change; see docs/format/rowtable.md
pub const MAX_KEY_AREA: u64 = u32::MAX as u64;

/// Largest value: `value_len` is a u32.
// FORMAT: never change; see docs/format/rowtable.md
pub const MAX_VALUE_LEN: u64 = u32::MAX as u64;

/// Smallest page size: the header must fit in the first page, so the commit word is one
/// aligned word of one physical page.
pub const MIN_PAGE_BYTES: usize = HEADER_LEN;

/// True for the format versions this build reads.
pub fn version_readable(version: u32) -> bool {
    (OLDEST_READ_VERSION..=FORMAT_VERSION).contains(&version)
}

/// The commit word of row `row`.
pub fn commit_word(row: u64) -> u64 {
    COMMIT_MAGIC ^ row
}

/// Checks that rows can be laid over pages of `page_bytes` bytes: at least
/// [`MIN_PAGE_BYTES`] and a multiple of 8 (so the commit word is 8-byte aligned in the
/// region).
pub fn page_bytes_ok(page_bytes: usize) -> bool {
    page_bytes >= MIN_PAGE_BYTES && page_bytes.is_multiple_of(8)
}

/// The decoded header of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowHeader {
    /// Row number (never 0).
    pub row: u64,
    /// The row the forward pointers index (0 = none).
    pub prev_row: u64,
    /// Entry count of `prev_row` when this row was written (0 when none): the forward
    /// pointer of an entry greater than every key of `prev_row`.
    pub prev_entries: u64,
    /// Number of entries.
    pub entries: u64,
    /// Length of the key area in bytes.
    pub key_bytes: u64,
    /// Length of the value area in bytes.
    pub value_bytes: u64,
    /// Smallest sequence number of any entry (0 when empty).
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry (0 when empty).
    pub largest_seq: SeqNo,
    /// Masked CRC32C of the entry array followed by the key area.
    pub meta_crc: u32,
    /// Length of the filter section (0: the row has no bloom filter).
    pub filter_bytes: u64,
    /// Masked CRC32C of the filter section (0 when there is none).
    pub filter_crc: u32,
}

/// Why a header was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderError {
    /// The bytes are damaged or not a RowTable.
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

impl RowHeader {
    /// Logical offset of the key area.
    pub fn keys_offset(&self) -> u64 {
        HEADER_LEN as u64 + self.entries * ENTRY_LEN as u64
    }

    /// Logical offset of the filter section (where the value area starts when there is no
    /// filter).
    pub fn filter_offset(&self) -> u64 {
        self.keys_offset() + self.key_bytes
    }

    /// Logical offset of the value area.
    pub fn values_offset(&self) -> u64 {
        self.filter_offset() + self.filter_bytes
    }

    /// Logical length of the row: header, entries, keys, filter and values.
    pub fn total_len(&self) -> u64 {
        self.values_offset() + self.value_bytes
    }

    /// Encodes the header with a zero commit word (the builder publishes it last).
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut v = Vec::with_capacity(HEADER_LEN);
        coding::put_u64(&mut v, MAGIC);
        coding::put_u32(&mut v, FORMAT_VERSION);
        v.push(CHECKSUM_TYPE_CRC32C);
        v.extend_from_slice(&[0; 3]);
        coding::put_u64(&mut v, self.row);
        coding::put_u64(&mut v, self.prev_row);
        coding::put_u64(&mut v, self.prev_entries);
        coding::put_u64(&mut v, self.entries);
        coding::put_u64(&mut v, self.key_bytes);
        coding::put_u64(&mut v, self.value_bytes);
        coding::put_u64(&mut v, self.smallest_seq.0);
        coding::put_u64(&mut v, self.largest_seq.0);
        coding::put_u32(&mut v, self.meta_crc);
        coding::put_u64(&mut v, self.filter_bytes);
        coding::put_u32(&mut v, self.filter_crc);
        v.resize(HEADER_CRC_OFFSET, 0);
        let crc = checksum::checksum(&v);
        coding::put_u32(&mut v, crc);
        v.resize(HEADER_LEN, 0);
        let mut out = [0u8; HEADER_LEN];
        out.copy_from_slice(&v);
        out
    }

    /// Decodes and validates a header (the commit word is not looked at: the reader checks
    /// it with an atomic load). `bytes` may be longer than the header.
    ///
    /// Order of checks: magic, version (an unknown version is reported as such even if other
    /// fields look damaged, because a later version may move them), checksum type, checksum,
    /// then the zero bytes and the ranges of the fields. A version 1 header decodes with no
    /// filter (its filter fields are reserved bytes, which must be zero).
    pub fn decode(bytes: &[u8]) -> Result<RowHeader, HeaderError> {
        let header = bytes.get(..HEADER_LEN).ok_or(CorruptionReason::Truncated)?;
        let mut d = Decoder::new(header);
        if d.u64()? != MAGIC {
            return Err(CorruptionReason::BadMagic.into());
        }
        let version = d.u32()?;
        if !version_readable(version) {
            return Err(HeaderError::UnknownVersion(version));
        }
        let checksum_type = d.u8()?;
        if checksum_type != CHECKSUM_TYPE_CRC32C {
            return Err(HeaderError::UnknownChecksumType(checksum_type));
        }
        let covered = header
            .get(..HEADER_CRC_OFFSET)
            .ok_or(CorruptionReason::Truncated)?;
        let stored = coding::get_u32(header, HEADER_CRC_OFFSET)?;
        checksum::verify(stored, covered)?;
        if d.bytes(3)? != [0; 3] {
            return Err(CorruptionReason::Invalid("non-zero header padding").into());
        }
        let h = RowHeader {
            row: d.u64()?,
            prev_row: d.u64()?,
            prev_entries: d.u64()?,
            entries: d.u64()?,
            key_bytes: d.u64()?,
            value_bytes: d.u64()?,
            smallest_seq: SeqNo(d.u64()?),
            largest_seq: SeqNo(d.u64()?),
            meta_crc: d.u32()?,
            filter_bytes: d.u64()?,
            filter_crc: d.u32()?,
        };
        if version == 1 && (h.filter_bytes != 0 || h.filter_crc != 0) {
            return Err(CorruptionReason::Invalid("non-zero reserved header bytes").into());
        }
        if d.bytes(HEADER_CRC_OFFSET - d.position())?
            .iter()
            .any(|&b| b != 0)
        {
            return Err(CorruptionReason::Invalid("non-zero reserved header bytes").into());
        }
        h.check()?;
        Ok(h)
    }

    /// The range checks of [`RowHeader::decode`].
    fn check(&self) -> Result<(), CorruptionReason> {
        if self.row == 0 || self.prev_row >= self.row {
            return Err(CorruptionReason::Invalid("row numbers out of order"));
        }
        if self.prev_row == 0 && self.prev_entries != 0 {
            return Err(CorruptionReason::Invalid(
                "entries of a previous row declared without a previous row",
            ));
        }
        if self.entries > MAX_ENTRIES
            || self.prev_entries > MAX_ENTRIES
            || self.key_bytes > MAX_KEY_AREA
            || self.key_bytes < self.entries * TAG_LEN as u64
        {
            return Err(CorruptionReason::BadLength);
        }
        if self.filter_bytes == 0 && self.filter_crc != 0 {
            return Err(CorruptionReason::Invalid(
                "a filter checksum without a filter section",
            ));
        }
        // Cannot overflow: entries <= 2^32, key_bytes <= 2^32; the filter and value lengths
        // are checked.
        if self
            .filter_offset()
            .checked_add(self.filter_bytes)
            .and_then(|v| v.checked_add(self.value_bytes))
            .is_none()
        {
            return Err(CorruptionReason::BadLength);
        }
        if self.smallest_seq > self.largest_seq || self.largest_seq > SeqNo::MAX {
            return Err(CorruptionReason::Invalid("sequence range out of order"));
        }
        Ok(())
    }
}

/// One metadata entry: where an entry's key and value are, its forward pointer and the
/// checksum of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowEntry {
    /// Offset of the value inside the value area.
    pub value_off: u64,
    /// Length of the value (0 for tombstones and empty values).
    pub value_len: u32,
    /// Offset of the internal key inside the key area.
    pub key_off: u32,
    /// Length of the internal key (at least 8, the tag).
    pub key_len: u32,
    /// Forward pointer: index of the first entry of the previous row whose internal key is
    /// `>=` this entry's key; the previous row's entry count if there is none.
    pub fwd: u32,
    /// Masked CRC32C of the value.
    pub value_crc: u32,
}

impl RowEntry {
    /// Encodes the entry into its 32 bytes.
    pub fn encode(&self) -> [u8; ENTRY_LEN] {
        let mut out = [0u8; ENTRY_LEN];
        let fields: [(usize, &[u8]); 6] = [
            (0, &self.value_off.to_le_bytes()),
            (8, &self.value_len.to_le_bytes()),
            (12, &self.key_off.to_le_bytes()),
            (16, &self.key_len.to_le_bytes()),
            (20, &self.fwd.to_le_bytes()),
            (24, &self.value_crc.to_le_bytes()),
        ];
        for (off, bytes) in fields {
            if let Some(dst) = out.get_mut(off..off + bytes.len()) {
                dst.copy_from_slice(bytes);
            }
        }
        out
    }

    /// Decodes 32 bytes. Only the reserved word is checked here; the reader checks the
    /// offsets against the header.
    pub fn decode(bytes: &[u8; ENTRY_LEN]) -> Result<RowEntry, CorruptionReason> {
        let mut d = Decoder::new(bytes);
        let e = RowEntry {
            value_off: d.u64()?,
            value_len: d.u32()?,
            key_off: d.u32()?,
            key_len: d.u32()?,
            fwd: d.u32()?,
            value_crc: d.u32()?,
        };
        if d.u32()? != 0 {
            return Err(CorruptionReason::Invalid("non-zero reserved entry bytes"));
        }
        Ok(e)
    }

    /// Checks the entry against the header: key and value inside their areas, a key long
    /// enough for a tag, a forward pointer inside the previous row.
    pub fn check(&self, h: &RowHeader) -> Result<(), CorruptionReason> {
        let key_end = u64::from(self.key_off) + u64::from(self.key_len);
        let value_end = self.value_off.checked_add(u64::from(self.value_len));
        if (self.key_len as usize) < TAG_LEN
            || key_end > h.key_bytes
            || value_end.is_none_or(|end| end > h.value_bytes)
            || u64::from(self.fwd) > h.prev_entries
        {
            return Err(CorruptionReason::BadLength);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> RowHeader {
        RowHeader {
            row: 7,
            prev_row: 6,
            prev_entries: 3,
            entries: 2,
            key_bytes: 20,
            value_bytes: 5,
            smallest_seq: SeqNo(10),
            largest_seq: SeqNo(11),
            meta_crc: 0xdead_beef,
            filter_bytes: 9,
            filter_crc: 0x1234_5678,
        }
    }

    #[test]
    fn header_round_trips_and_every_byte_is_protected() {
        let h = header();
        let b = h.encode();
        assert_eq!(RowHeader::decode(&b), Ok(h));
        assert_eq!(h.total_len(), 128 + 64 + 20 + 9 + 5);
        assert_eq!(h.filter_offset(), 128 + 64 + 20);
        for i in 0..COMMIT_OFFSET {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(RowHeader::decode(&bad).is_err(), "flip at {i} accepted");
        }
    }

    #[test]
    fn unknown_version_and_checksum_type_are_reported_as_such() {
        for version in [0, 3] {
            let mut b = header().encode();
            b[8] = version;
            assert_eq!(
                RowHeader::decode(&b),
                Err(HeaderError::UnknownVersion(u32::from(version)))
            );
        }
        let mut b = header().encode();
        b[12] = 9;
        assert_eq!(
            RowHeader::decode(&b),
            Err(HeaderError::UnknownChecksumType(9))
        );
    }

    #[test]
    fn impossible_header_fields_are_rejected_even_with_a_valid_checksum() {
        let bad = [
            RowHeader {
                row: 0,
                prev_row: 0,
                prev_entries: 0,
                ..header()
            },
            RowHeader {
                prev_row: 7,
                ..header()
            },
            RowHeader {
                prev_row: 0,
                ..header()
            },
            RowHeader {
                entries: 3,
                key_bytes: 20,
                ..header()
            },
            RowHeader {
                entries: MAX_ENTRIES + 1,
                key_bytes: MAX_KEY_AREA,
                ..header()
            },
            RowHeader {
                value_bytes: u64::MAX,
                ..header()
            },
            RowHeader {
                smallest_seq: SeqNo(12),
                ..header()
            },
            RowHeader {
                filter_bytes: 0,
                ..header()
            },
            RowHeader {
                filter_bytes: u64::MAX - 200,
                ..header()
            },
        ];
        for h in bad {
            assert!(
                matches!(RowHeader::decode(&h.encode()), Err(HeaderError::Corrupt(_))),
                "{h:?} accepted"
            );
        }
    }

    /// Re-encodes `b` as format version `version` (a valid header checksum).
    fn with_version(mut b: [u8; HEADER_LEN], version: u32) -> [u8; HEADER_LEN] {
        b[8..12].copy_from_slice(&version.to_le_bytes());
        let crc = checksum::checksum(&b[..HEADER_CRC_OFFSET]);
        b[HEADER_CRC_OFFSET..HEADER_CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
        b
    }

    #[test]
    fn version_1_headers_decode_without_a_filter() {
        let v1 = RowHeader {
            filter_bytes: 0,
            filter_crc: 0,
            ..header()
        };
        let b = with_version(v1.encode(), 1);
        assert_eq!(RowHeader::decode(&b), Ok(v1));
        // In version 1 the filter fields are reserved bytes: a filter there is corruption.
        let b = with_version(header().encode(), 1);
        assert!(matches!(
            RowHeader::decode(&b),
            Err(HeaderError::Corrupt(CorruptionReason::Invalid(_)))
        ));
    }

    #[test]
    fn entry_round_trips_and_is_checked_against_the_header() {
        let e = RowEntry {
            value_off: 2,
            value_len: 3,
            key_off: 10,
            key_len: 10,
            fwd: 3,
            value_crc: 42,
        };
        let b = e.encode();
        assert_eq!(RowEntry::decode(&b), Ok(e));
        assert_eq!(e.check(&header()), Ok(()));
        let mut reserved = b;
        reserved[31] = 1;
        assert!(RowEntry::decode(&reserved).is_err());
        for bad in [
            RowEntry { key_len: 7, ..e },
            RowEntry { key_off: 11, ..e },
            RowEntry { value_off: 3, ..e },
            RowEntry {
                value_off: u64::MAX,
                ..e
            },
            RowEntry { fwd: 4, ..e },
        ] {
            assert_eq!(
                bad.check(&header()),
                Err(CorruptionReason::BadLength),
                "{bad:?}"
            );
        }
    }
}
