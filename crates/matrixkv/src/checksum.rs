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
    fn checksum2_equals_checksum_of_concatenation() {
        assert_eq!(checksum2(b"abc", b"def"), checksum(b"abcdef"));
    }
}
