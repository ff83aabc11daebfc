//! The harness's seeded random stream (SplitMix64): every choice of a run (options, operations,
//! kill times) comes from one, so a seed replays the choices (thread timing aside).

/// A SplitMix64 stream. Not for cryptography; cheap, and the same on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.0)
    }

    /// A number in `0..n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// An index into a slice of `len` elements.
    pub fn index(&mut self, len: usize) -> usize {
        usize::try_from(self.below(len as u64)).unwrap_or(0)
    }

    /// True one time in `n` (never for 0).
    pub fn one_in(&mut self, n: u64) -> bool {
        n != 0 && self.below(n) == 0
    }

    /// One element of `choices` (not empty).
    pub fn pick<T: Copy>(&mut self, choices: &[T]) -> T {
        choices[self.index(choices.len())]
    }

    /// A stream derived from this seed and `salt`, independent of the draws made so far.
    pub fn fork(seed: u64, salt: u64) -> Rng {
        Rng(mix(seed ^ mix(salt.wrapping_add(0x5851_f42d_4c95_7f2d))))
    }
}

/// SplitMix64's finalizer: a bijective mix of 64 bits.
pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
