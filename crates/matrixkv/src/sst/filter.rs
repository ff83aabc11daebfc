//! The table-wide bloom filter over user keys, and the fixed 64-bit hash it uses.
//!
//! The builder feeds every distinct user key to a [`FilterBuilder`]; the reader wraps the
//! verified filter block in a [`Filter`] and asks [`Filter::may_contain`] before touching the
//! index. The hash ([`key_hash`]) and the probe sequence are part of the on-disk format
//! (docs/format/sst.md, section "Filter block"): never replace them with a std hasher.
//!
//! Thread safety: `Filter` is immutable and `Sync`; `FilterBuilder` is used by one thread.
#![deny(clippy::indexing_slicing)]

use crate::error::CorruptionReason;

use super::format::MAX_BLOOM_PROBES;

// FORMAT: never change; see docs/format/sst.md
const P1: u64 = 0x9e37_79b9_7f4a_7c15;
// FORMAT: never change; see docs/format/sst.md
const P2: u64 = 0xc2b2_ae3d_27d4_eb4f;
// FORMAT: never change; see docs/format/sst.md
const SEED: u64 = 0xcbf2_9ce4_8422_2325;

/// Smallest filter, in bits, so tiny tables still get a useful false-positive rate.
// FORMAT: never change; see docs/format/sst.md
const MIN_FILTER_BITS: u64 = 64;

/// MurmurHash3's 64-bit finalizer: every input bit affects every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

fn absorb(h: u64, word: u64) -> u64 {
    (h ^ word.wrapping_mul(P1)).rotate_left(31).wrapping_mul(P2)
}

/// The 64-bit hash of a user key that the bloom filter is built from.
///
/// `h = SEED ^ (len * P1)`; every 8-byte little-endian word `w` (the last one zero-padded)
/// is absorbed as `h = rotl(h ^ (w * P1), 31) * P2`; the result is `fmix64(h)`. All
/// arithmetic wraps modulo 2^64. Mixing in the length keeps `"a"` and `"a\0"` apart.
pub fn key_hash(key: &[u8]) -> u64 {
    let mut h = SEED ^ (key.len() as u64).wrapping_mul(P1);
    let mut chunks = key.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        h = absorb(h, u64::from_le_bytes(w));
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut w = [0u8; 8];
        for (d, s) in w.iter_mut().zip(rest) {
            *d = *s;
        }
        h = absorb(h, u64::from_le_bytes(w));
    }
    fmix64(h)
}

/// Number of probes for `bits_per_key`: `round(bits_per_key * 0.69)` clamped to `1..=30`.
pub fn probes_for(bits_per_key: u32) -> u8 {
    // ln 2 ≈ 0.69 minimises the false-positive rate; integer arithmetic keeps it exact.
    let k = (u64::from(bits_per_key) * 69 + 50) / 100;
    u8::try_from(k.clamp(1, u64::from(MAX_BLOOM_PROBES))).unwrap_or(MAX_BLOOM_PROBES)
}

/// The bit positions probed for hash `h` in a filter of `m` bits: `(a + i*b) mod m` for
/// `i in 0..k`, with `a` the low and `b` the high 32 bits of `h` (Kirsch–Mitzenmacher).
fn probe_positions(h: u64, k: u8, m: u64) -> impl Iterator<Item = u64> {
    let a = h & 0xffff_ffff;
    let b = h >> 32;
    (0..u64::from(k)).map(move |i| (a + i * b) % m)
}

/// Collects user-key hashes and produces the filter block.
pub struct FilterBuilder {
    bits_per_key: u32,
    hashes: Vec<u64>,
}

impl std::fmt::Debug for FilterBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FilterBuilder")
            .field("bits_per_key", &self.bits_per_key)
            .field("keys", &self.hashes.len())
            .finish()
    }
}

impl FilterBuilder {
    /// A builder for `bits_per_key` (> 0).
    pub fn new(bits_per_key: u32) -> FilterBuilder {
        FilterBuilder {
            bits_per_key,
            hashes: Vec::new(),
        }
    }

    /// Adds a user key. The caller adds each distinct user key once.
    pub fn add(&mut self, user_key: &[u8]) {
        self.hashes.push(key_hash(user_key));
    }

    /// Bytes the filter block will have (for size estimates).
    pub fn estimated_bytes(&self) -> u64 {
        Self::block_bytes(self.hashes.len() as u64, self.bits_per_key)
    }

    /// Exactly the length of [`FilterBuilder::finish`]'s block for `distinct_keys` keys at
    /// `bits_per_key`: for writers that must reserve the space before adding the keys.
    pub fn block_bytes(distinct_keys: u64, bits_per_key: u32) -> u64 {
        Self::filter_bits(distinct_keys, bits_per_key) / 8 + 1
    }

    fn filter_bits(keys: u64, bits_per_key: u32) -> u64 {
        let bits = keys
            .saturating_mul(u64::from(bits_per_key))
            .max(MIN_FILTER_BITS);
        bits.div_ceil(8) * 8
    }

    /// The filter block contents: the bit array followed by the probe count byte.
    pub fn finish(&self) -> Vec<u8> {
        let m = Self::filter_bits(self.hashes.len() as u64, self.bits_per_key);
        let k = probes_for(self.bits_per_key);
        let bytes = usize::try_from(m / 8).unwrap_or(usize::MAX);
        let mut out = vec![0u8; bytes + 1];
        for &h in &self.hashes {
            for bit in probe_positions(h, k, m) {
                if let Some(byte) = out.get_mut((bit / 8) as usize) {
                    *byte |= 1 << (bit % 8);
                }
            }
        }
        if let Some(last) = out.last_mut() {
            *last = k;
        }
        out
    }
}

/// A verified filter block, ready for queries.
#[derive(Clone)]
pub struct Filter {
    bits: Vec<u8>,
    probes: u8,
}

impl std::fmt::Debug for Filter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filter")
            .field("bits", &(self.bits.len() * 8))
            .field("probes", &self.probes)
            .finish()
    }
}

impl Filter {
    /// Parses filter block contents: at least one byte of bits, then a probe count in
    /// `1..=30`.
    pub fn decode(mut block: Vec<u8>) -> Result<Filter, CorruptionReason> {
        let probes = block.pop().ok_or(CorruptionReason::Truncated)?;
        if block.is_empty() {
            return Err(CorruptionReason::BadLength);
        }
        if probes == 0 || probes > MAX_BLOOM_PROBES {
            return Err(CorruptionReason::Invalid("bloom probe count out of range"));
        }
        Ok(Filter {
            bits: block,
            probes,
        })
    }

    /// False if `user_key` is certainly not in the table; true if it may be.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.may_contain_hash(key_hash(user_key))
    }

    /// [`Filter::may_contain`] for a precomputed [`key_hash`].
    pub fn may_contain_hash(&self, h: u64) -> bool {
        let m = self.bits.len() as u64 * 8;
        probe_positions(h, self.probes, m).all(|bit| {
            self.bits
                .get((bit / 8) as usize)
                .is_some_and(|b| b & (1 << (bit % 8)) != 0)
        })
    }

    /// Heap bytes held.
    pub fn memory_bytes(&self) -> usize {
        self.bits.capacity()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hash_is_pinned_by_test_vectors() {
        // These values are part of the on-disk format: a change breaks every filter written.
        // They are also listed in docs/format/sst.md.
        assert_eq!(key_hash(b""), 0xefd0_1f60_ba99_2926);
        assert_eq!(key_hash(b"a"), 0x69c4_3f44_ec90_41ac);
        assert_eq!(key_hash(b"apple"), 0x64ea_41d5_51d5_1a6c);
        assert_eq!(key_hash(b"0123456789abcdef!"), 0xee96_e611_3513_8b95);
        assert_ne!(key_hash(b"a"), key_hash(b"a\0"));
        assert_ne!(key_hash(b"12345678"), key_hash(b"12345678\0"));
    }

    #[test]
    fn probes_follow_the_rounding_rule() {
        assert_eq!(probes_for(0), 1);
        assert_eq!(probes_for(1), 1);
        assert_eq!(probes_for(10), 7);
        assert_eq!(probes_for(20), 14);
        assert_eq!(probes_for(100), 30);
    }

    #[test]
    fn no_false_negatives_and_few_false_positives_at_ten_bits() {
        let mut b = FilterBuilder::new(10);
        let n = 10_000u32;
        for i in 0..n {
            b.add(format!("key{i:08}").as_bytes());
        }
        let f = Filter::decode(b.finish()).unwrap();
        for i in 0..n {
            assert!(f.may_contain(format!("key{i:08}").as_bytes()), "{i}");
        }
        let fp = (0..n)
            .filter(|i| f.may_contain(format!("other{i:08}").as_bytes()))
            .count();
        // The theoretical rate at 10 bits/key and 7 probes is about 0.8%.
        assert!(fp < (n / 50) as usize, "false positives: {fp} of {n}");
    }

    #[test]
    fn block_bytes_predicts_the_finished_block_length() {
        for bits in [1, 7, 10, 64] {
            for keys in [0u32, 1, 6, 7, 100, 1001] {
                let mut b = FilterBuilder::new(bits);
                for i in 0..keys {
                    b.add(&i.to_le_bytes());
                }
                let len = b.finish().len() as u64;
                assert_eq!(FilterBuilder::block_bytes(u64::from(keys), bits), len);
                assert_eq!(b.estimated_bytes(), len);
            }
        }
    }

    #[test]
    fn damaged_filter_blocks_are_rejected() {
        assert!(Filter::decode(vec![]).is_err());
        assert!(Filter::decode(vec![7]).is_err());
        assert!(Filter::decode(vec![0xff, 0]).is_err());
        assert!(Filter::decode(vec![0xff, 31]).is_err());
        assert!(Filter::decode(vec![0xff, 30]).is_ok());
    }
}
