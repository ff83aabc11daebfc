//! CRC32C, the one checksum algorithm of every matrixkv format.
//!
//! Stored checksums are *masked* (LevelDB `util/crc32c.h`): a CRC stored inside data that is
//! itself covered by a CRC would otherwise make the outer CRC degenerate.

use crate::error::CorruptionReason;

/// Checksum-type byte stored in file headers/footers: 1 = masked CRC32C.
// FORMAT: never change; see docs/format/*.md
pub const CHECKSUM_TYPE_CRC32C: u8 = 1;

const MASK_DELTA: u32 = 0xa282_ead8;

/// Masked CRC32C of `data`.
pub fn checksum(data: &[u8]) -> u32 {
    mask(crc32c::crc32c(data))
}

/// Masked CRC32C of the concatenation of `a` and `b`, without copying.
pub fn checksum2(a: &[u8], b: &[u8]) -> u32 {
    mask(crc32c::crc32c_append(crc32c::crc32c(a), b))
}

/// Masked CRC32C of the concatenation of `a`, `b` and `c`, without copying.
pub fn checksum3(a: &[u8], b: &[u8], c: &[u8]) -> u32 {
    mask(crc32c::crc32c_append(
        crc32c::crc32c_append(crc32c::crc32c(a), b),
        c,
    ))
}

/// A masked CRC32C computed over bytes that arrive in pieces (a structure read page by page,
/// or two areas written by separate cursors): [`ChecksumStream::finish`] equals [`checksum`]
/// of the concatenation of everything passed to [`ChecksumStream::update`] and
/// [`ChecksumStream::append`], in order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChecksumStream {
    /// Unmasked CRC32C of the bytes so far.
    crc: u32,
    /// Number of bytes so far.
    len: u64,
}

impl ChecksumStream {
    /// A stream over no bytes.
    pub fn new() -> ChecksumStream {
        ChecksumStream::default()
    }

    /// Appends `data`.
    pub fn update(&mut self, data: &[u8]) {
        self.crc = crc32c::crc32c_append(self.crc, data);
        self.len += data.len() as u64;
    }

    /// Appends every byte `other` has seen, without reading them again.
    pub fn append(&mut self, other: &ChecksumStream) {
        // `crc32c_combine` takes the length as usize; a stream longer than usize::MAX bytes
        // cannot exist on the platforms this crate builds for.
        let len2 = usize::try_from(other.len).unwrap_or(usize::MAX);
        self.crc = crc32c::crc32c_combine(self.crc, other.crc, len2);
        self.len += other.len;
    }

    #[cfg(test)]
    /// Number of bytes seen.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// The masked CRC32C of every byte seen.
    pub fn finish(&self) -> u32 {
        mask(self.crc)
    }
}

fn mask(crc: u32) -> u32 {
    crc.rotate_right(15).wrapping_add(MASK_DELTA)
}

/// Checks that `stored` is the masked CRC32C of `data`.
pub fn verify(stored: u32, data: &[u8]) -> Result<(), CorruptionReason> {
    let computed = checksum(data);
    if computed == stored {
        Ok(())
    } else {
        Err(CorruptionReason::ChecksumMismatch { stored, computed })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_matches_the_standard_check_value() {
        // RFC 3720 check value for "123456789".
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
    }

    #[test]
    fn verify_detects_a_flipped_bit() {
        let data = b"hello world".to_vec();
        let c = checksum(&data);
        assert!(verify(c, &data).is_ok());
        let mut bad = data.clone();
        bad[3] ^= 1;
        assert!(matches!(
            verify(c, &bad),
            Err(CorruptionReason::ChecksumMismatch { .. })
        ));
    }

    #[test]
    fn checksum_stream_equals_checksum_of_concatenation() {
        let mut a = ChecksumStream::new();
        a.update(b"hello ");
        a.update(b"");
        let mut b = ChecksumStream::new();
        b.update(b"wor");
        b.update(b"ld");
        a.append(&b);
        assert_eq!(a.finish(), checksum(b"hello world"));
        assert_eq!(a.len(), 11);
        assert_eq!(ChecksumStream::new().finish(), checksum(b""));
    }

    #[test]
    fn checksum2_equals_checksum_of_concatenation() {
        assert_eq!(checksum2(b"abc", b"def"), checksum(b"abcdef"));
        assert_eq!(checksum3(b"ab", b"cd", b"ef"), checksum(b"abcdef"));
    }
}
