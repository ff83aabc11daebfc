//! Checksummed record framing shared by the WAL and the manifest.
//!
//! A record is `crc: u32 | len: u32 | payload[len]`, little-endian, where `crc` is the masked
//! CRC32C of the 4 `len` bytes followed by the payload. A header whose 8 bytes are all zero
//! marks the end of written data in a zero-filled preallocated region.
//!
//! WAL segments of format version 2 *seed* the checksum with the segment number
//! ([`Seed`]): `crc` is then the masked CRC32C of the 8-byte number, the 4 `len` bytes and the
//! payload, so a record left in a recycled region by an earlier segment (another number) never
//! verifies. The manifest and version-1 WAL segments use no seed.
//! See docs/format/wal.md and docs/format/manifest.md.
#![deny(clippy::indexing_slicing)]

use crate::checksum;
use crate::coding::get_u32;
use crate::error::CorruptionReason;

/// Bytes of a record header.
// FORMAT: never change; see docs/format/wal.md
pub const HEADER_LEN: usize = 8;

/// What a record's checksum covers besides its `len` bytes and payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seed {
    /// Nothing: the manifest and version-1 WAL segments.
    None,
    /// The 8 little-endian bytes of this number, first: version-2 WAL segments, seeded with
    /// their segment number.
    Number(u64),
}

/// The masked checksum of a record with `len_bytes` and `payload` under `seed`.
pub fn record_checksum(seed: Seed, len_bytes: &[u8; 4], payload: &[u8]) -> u32 {
    match seed {
        Seed::None => checksum::checksum2(len_bytes, payload),
        Seed::Number(n) => checksum::checksum3(&n.to_le_bytes(), len_bytes, payload),
    }
}

/// Appends a framed record holding `payload` (no seed).
pub fn encode(dst: &mut Vec<u8>, payload: &[u8]) {
    encode_seeded(dst, Seed::None, payload);
}

/// Appends a framed record holding `payload`, its checksum seeded with `seed`.
pub fn encode_seeded(dst: &mut Vec<u8>, seed: Seed, payload: &[u8]) {
    let len = u32::try_from(payload.len()).unwrap_or(u32::MAX);
    debug_assert_eq!(len as usize, payload.len(), "record payload over 4 GiB");
    let len_bytes = len.to_le_bytes();
    dst.extend_from_slice(&record_checksum(seed, &len_bytes, payload).to_le_bytes());
    dst.extend_from_slice(&len_bytes);
    dst.extend_from_slice(payload);
}

/// Framed size of a payload of `len` bytes.
pub fn framed_len(len: usize) -> usize {
    HEADER_LEN + len
}

/// Result of decoding the record at an offset.
#[derive(Debug, PartialEq, Eq)]
pub enum Decoded<'a> {
    /// A valid record; the next one starts at `next`.
    Record {
        /// The payload.
        payload: &'a [u8],
        /// Offset of the following record.
        next: usize,
    },
    /// End of data: the buffer ends here, or the header is all zeros.
    End,
    /// The bytes at this offset are not a valid record.
    Bad(CorruptionReason),
}

/// Decodes the record starting at `off` in `buf` (no seed).
pub fn decode(buf: &[u8], off: usize) -> Decoded<'_> {
    decode_seeded(buf, off, Seed::None)
}

/// Decodes the record starting at `off` in `buf`, whose checksum is seeded with `seed`: a
/// record written under another seed is [`Decoded::Bad`] (a checksum mismatch).
pub fn decode_seeded(buf: &[u8], off: usize, seed: Seed) -> Decoded<'_> {
    let Some(header) = buf.get(off..off.saturating_add(HEADER_LEN)) else {
        return if off >= buf.len() {
            Decoded::End
        } else {
            Decoded::Bad(CorruptionReason::Truncated)
        };
    };
    if header.iter().all(|&b| b == 0) {
        return Decoded::End;
    }
    let (Ok(crc), Ok(len)) = (get_u32(header, 0), get_u32(header, 4)) else {
        return Decoded::Bad(CorruptionReason::Truncated);
    };
    let start = off + HEADER_LEN;
    let Some(end) = start.checked_add(len as usize) else {
        return Decoded::Bad(CorruptionReason::BadLength);
    };
    let Some(payload) = buf.get(start..end) else {
        return Decoded::Bad(CorruptionReason::BadLength);
    };
    let computed = record_checksum(seed, &len.to_le_bytes(), payload);
    if computed != crc {
        return Decoded::Bad(CorruptionReason::ChecksumMismatch {
            stored: crc,
            computed,
        });
    }
    Decoded::Record { payload, next: end }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_zero_header_ends() {
        let mut b = Vec::new();
        encode(&mut b, b"one");
        encode(&mut b, b"");
        let end = b.len();
        b.extend_from_slice(&[0u8; 32]);
        let Decoded::Record { payload, next } = decode(&b, 0) else {
            panic!()
        };
        assert_eq!(payload, b"one");
        let Decoded::Record { payload, next } = decode(&b, next) else {
            panic!()
        };
        assert_eq!((payload, next), (&b""[..], end));
        assert_eq!(decode(&b, next), Decoded::End);
        assert_eq!(decode(&b[..end], end), Decoded::End);
    }

    #[test]
    fn a_record_verifies_only_under_the_seed_it_was_written_with() {
        let mut b = Vec::new();
        encode_seeded(&mut b, Seed::Number(7), b"payload");
        assert!(matches!(
            decode_seeded(&b, 0, Seed::Number(7)),
            Decoded::Record {
                payload: b"payload",
                ..
            }
        ));
        for other in [Seed::Number(6), Seed::Number(8), Seed::None] {
            assert!(
                matches!(
                    decode_seeded(&b, 0, other),
                    Decoded::Bad(CorruptionReason::ChecksumMismatch { .. })
                ),
                "{other:?}"
            );
        }
        let mut plain = Vec::new();
        encode(&mut plain, b"payload");
        assert!(matches!(
            decode_seeded(&plain, 0, Seed::Number(0)),
            Decoded::Bad(_)
        ));
    }

    #[test]
    fn flipped_payload_bit_is_a_checksum_mismatch() {
        let mut b = Vec::new();
        encode(&mut b, b"payload");
        b[10] ^= 0x40;
        assert!(matches!(
            decode(&b, 0),
            Decoded::Bad(CorruptionReason::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn length_beyond_buffer_is_bad_length_and_short_header_is_truncated() {
        let mut b = Vec::new();
        encode(&mut b, b"payload");
        b.truncate(b.len() - 1);
        assert_eq!(decode(&b, 0), Decoded::Bad(CorruptionReason::BadLength));
        assert_eq!(
            decode(&b[..5], 0),
            Decoded::Bad(CorruptionReason::Truncated)
        );
    }
}
