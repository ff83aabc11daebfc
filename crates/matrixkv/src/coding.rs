//! Little-endian fixed-width and varint encoding: the only module that deals with byte order.
//!
//! Encoders append to a `Vec<u8>`. [`Decoder`] is a cursor over untrusted bytes: every read
//! checks the remaining length first and returns [`CorruptionReason`] instead of panicking.
#![deny(clippy::indexing_slicing)]

use crate::error::CorruptionReason;

/// Appends `v` as 4 little-endian bytes.
pub fn put_u32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_u64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as a LEB128 varint (at most 5 bytes).
pub fn put_varint32(dst: &mut Vec<u8>, v: u32) {
    put_varint64(dst, u64::from(v));
}

/// Appends `v` as a LEB128 varint (at most 10 bytes).
pub fn put_varint64(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Number of bytes `put_varint64(v)` appends.
pub fn varint_len(mut v: u64) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint64(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// The little-endian u32 at `at` of a buffer the caller sized for it (0 if it is shorter:
/// a field of a fixed layout, read without a bounds error to handle).
pub fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

/// The little-endian u64 at `at`, as [`le_u32`].
pub fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Reads 4 little-endian bytes at `off` of `buf`.
pub fn get_u32(buf: &[u8], off: usize) -> Result<u32, CorruptionReason> {
    let b = buf.get(off..off.checked_add(4).ok_or(CorruptionReason::Truncated)?);
    let b: [u8; 4] = b
        .and_then(|s| s.try_into().ok())
        .ok_or(CorruptionReason::Truncated)?;
    Ok(u32::from_le_bytes(b))
}

/// Reads 8 little-endian bytes at `off` of `buf`.
pub fn get_u64(buf: &[u8], off: usize) -> Result<u64, CorruptionReason> {
    let b = buf.get(off..off.checked_add(8).ok_or(CorruptionReason::Truncated)?);
    let b: [u8; 8] = b
        .and_then(|s| s.try_into().ok())
        .ok_or(CorruptionReason::Truncated)?;
    Ok(u64::from_le_bytes(b))
}

/// A bounds-checked cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// A decoder at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Current position from the start of the buffer.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// True when every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// The unconsumed bytes.
    pub fn rest(&self) -> &'a [u8] {
        self.buf.get(self.pos..).unwrap_or(&[])
    }

    /// Takes the next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], CorruptionReason> {
        let end = self.pos.checked_add(n).ok_or(CorruptionReason::BadLength)?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(CorruptionReason::Truncated)?;
        self.pos = end;
        Ok(s)
    }

    /// Takes one byte.
    pub fn u8(&mut self) -> Result<u8, CorruptionReason> {
        let b = *self.buf.get(self.pos).ok_or(CorruptionReason::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// Takes 4 little-endian bytes.
    pub fn u32(&mut self) -> Result<u32, CorruptionReason> {
        let v = get_u32(self.buf, self.pos)?;
        self.pos += 4;
        Ok(v)
    }

    /// Takes 8 little-endian bytes.
    pub fn u64(&mut self) -> Result<u64, CorruptionReason> {
        let v = get_u64(self.buf, self.pos)?;
        self.pos += 8;
        Ok(v)
    }

    /// Takes a varint of at most 10 bytes.
    pub fn varint64(&mut self) -> Result<u64, CorruptionReason> {
        let mut v: u64 = 0;
        for i in 0..10u32 {
            let b = self.u8().map_err(|_| CorruptionReason::BadVarint)?;
            if i == 9 && b > 1 {
                return Err(CorruptionReason::BadVarint);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(CorruptionReason::BadVarint)
    }

    /// Takes a varint that must fit in 32 bits.
    pub fn varint32(&mut self) -> Result<u32, CorruptionReason> {
        u32::try_from(self.varint64()?).map_err(|_| CorruptionReason::BadVarint)
    }

    /// Takes a varint that is used as a length: it must not exceed the remaining bytes.
    pub fn length(&mut self) -> Result<usize, CorruptionReason> {
        let n = usize::try_from(self.varint64()?).map_err(|_| CorruptionReason::BadLength)?;
        if n > self.remaining() {
            return Err(CorruptionReason::BadLength);
        }
        Ok(n)
    }

    /// Takes a varint length and that many bytes.
    pub fn length_prefixed(&mut self) -> Result<&'a [u8], CorruptionReason> {
        let n = self.length()?;
        self.bytes(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_at_every_width() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint64(&mut b, v);
            assert_eq!(b.len(), varint_len(v));
            let mut d = Decoder::new(&b);
            assert_eq!(d.varint64().unwrap(), v);
            assert!(d.is_empty());
        }
    }

    #[test]
    fn overlong_varint_is_rejected() {
        let b = [0xffu8; 11];
        assert_eq!(
            Decoder::new(&b).varint64(),
            Err(CorruptionReason::BadVarint)
        );
        let b = [0x80u8, 0x80];
        assert_eq!(
            Decoder::new(&b).varint64(),
            Err(CorruptionReason::BadVarint)
        );
    }

    #[test]
    fn length_larger_than_remaining_is_rejected_before_reading() {
        let mut b = Vec::new();
        put_varint64(&mut b, 1 << 40);
        b.extend_from_slice(b"abc");
        assert_eq!(
            Decoder::new(&b).length_prefixed(),
            Err(CorruptionReason::BadLength)
        );
    }

    #[test]
    fn fixed_reads_past_end_are_truncated() {
        assert_eq!(get_u32(&[1, 2, 3], 0), Err(CorruptionReason::Truncated));
        assert_eq!(get_u64(&[0; 8], 1), Err(CorruptionReason::Truncated));
        assert_eq!(get_u32(&[1, 0, 0, 0], 0), Ok(1));
    }
}
