//! Key, value and distribution generators shared by every engine: the same seed gives the same
//! key sequence whichever engine runs it.
//!
//! - [`Rng`]: splitmix64, seeded per benchmark and per thread;
//! - [`make_key`]: db_bench-like fixed-size keys (the number, zero-padded decimal);
//! - [`Permutation`]: a seeded bijection on `[0, n)` (the `--unique` fill, YCSB record keys);
//! - [`Zipfian`], [`ScrambledZipfian`], [`SkewedLatest`]: YCSB's generators, transcribed from
//!   its `ZipfianGenerator`, `ScrambledZipfianGenerator` and `SkewedLatestGenerator`.
//!
//! Called by the workload code (`workload.rs`, `ycsb.rs`). Every generator is owned by one
//! thread; nothing here is shared.

/// splitmix64: tiny, fast, and good enough for key choice.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of thread `thread` of benchmark number `bench` of a run seeded `seed`
    /// (each benchmark draws its own sequence, as db_bench's do).
    pub fn for_thread(seed: u64, bench: u64, thread: u64) -> Rng {
        let mut r = Rng(seed ^ 0x5eed);
        let a = r.next_u64();
        Rng(a
            ^ (bench + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
            ^ (thread + 1).wrapping_mul(0xd1b5_4a32_d192_ed03))
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[0, n)` (0 when `n == 0`). Lemire's multiply-shift: no modulo bias worth
    /// mentioning at 64 bits.
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// db_bench's key layout in readable form: the number `k`, zero-padded to `key_size` decimal
/// digits (the lowest `key_size` digits when the number is longer).
pub fn make_key(k: u64, key_size: usize) -> Vec<u8> {
    let mut out = vec![b'0'; key_size];
    let mut v = k;
    for b in out.iter_mut().rev() {
        *b = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out
}

/// The largest number of bits `b` such that every number below `2^b` has a distinct
/// `key_size`-digit key.
pub fn key_bits(key_size: usize) -> u32 {
    // log2(10) = 3.3219...; 10^19 < 2^64.
    let digits = key_size.min(19) as f64;
    ((digits * std::f64::consts::LOG2_10).floor() as u32).min(63)
}

/// Random value bytes, sliced from a pregenerated buffer (as db_bench's `RandomGenerator`).
#[derive(Debug)]
pub struct ValueGen {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGen {
    /// A buffer of 1 MiB + 64 KiB of seeded random bytes (grown to hold at least one value).
    pub fn new(seed: u64, value_size: usize) -> ValueGen {
        let mut r = Rng::new(seed ^ 0x7a1e);
        let len = ((1 << 20) + 65536).max(value_size * 2);
        let data = (0..len).map(|_| (r.next_u64() & 0xff) as u8).collect();
        ValueGen { data, pos: 0 }
    }

    /// The next `len` bytes (at most the buffer's length).
    pub fn next(&mut self, len: usize) -> &[u8] {
        let len = len.min(self.data.len());
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        let s = self.data.get(self.pos..self.pos + len).unwrap_or(&[]);
        self.pos += len;
        s
    }
}

/// A seeded bijection on `[0, n)`: a mixer that is a bijection on `b`-bit numbers
/// (multiplication by odd constants and xor-shifts, all modulo `2^b`), cycle-walked back into
/// `[0, n)`. Needs no memory, so it serves any `n`.
#[derive(Debug, Clone)]
pub struct Permutation {
    n: u64,
    bits: u32,
    mask: u64,
    salt: u64,
}

impl Permutation {
    /// A permutation of `[0, n)` chosen by `seed`.
    pub fn new(n: u64, seed: u64) -> Permutation {
        let bits = (64 - n.saturating_sub(1).leading_zeros()).max(2);
        Permutation::with_bits(n, bits, seed)
    }

    /// A permutation of `[0, n)` whose walk happens on `bits`-bit numbers; with
    /// `n = 2^bits` it spreads `[0, n)` over the whole `bits`-bit range.
    pub fn with_bits(n: u64, bits: u32, seed: u64) -> Permutation {
        let bits = bits.clamp(2, 64);
        let mask = if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        let salt = Rng::new(seed).next_u64() & mask;
        Permutation {
            n,
            bits,
            mask,
            salt,
        }
    }

    fn mix(&self, x: u64) -> u64 {
        let s = self.bits.div_ceil(2);
        let mut x = (x ^ self.salt) & self.mask;
        x = x.wrapping_mul(0x9e37_79b9_7f4a_7c15) & self.mask;
        x ^= x >> s;
        x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9) & self.mask;
        x ^= x >> s;
        x = x.wrapping_mul(0x94d0_49bb_1331_11eb) & self.mask;
        x ^ (x >> s)
    }

    /// The image of `i` (`i < n`; larger values are reduced modulo `n` first).
    pub fn get(&self, i: u64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let mut x = self.mix(i % self.n);
        while x >= self.n {
            x = self.mix(x);
        }
        x
    }
}

/// The key number of YCSB record `i`: records are spread over the whole key space of
/// `key_size` digits by a bijection, as YCSB's "hashed" insert order does, so record numbers
/// never collide.
#[derive(Debug, Clone)]
pub struct RecordKeys {
    perm: Permutation,
}

impl RecordKeys {
    /// Record keys for `key_size`-digit keys.
    pub fn new(key_size: usize, seed: u64) -> RecordKeys {
        let bits = key_bits(key_size);
        let n = if bits >= 64 { u64::MAX } else { 1u64 << bits };
        RecordKeys {
            perm: Permutation::with_bits(n, bits, seed ^ 0x7ec0),
        }
    }

    /// The number of distinct records these keys can hold.
    pub fn capacity(&self) -> u64 {
        self.perm.n
    }

    /// The key of record `i`.
    pub fn key(&self, i: u64, key_size: usize) -> Vec<u8> {
        make_key(self.perm.get(i), key_size)
    }
}

/// YCSB's `Utils.fnvhash64`: FNV-1a over the 8 little-endian bytes of `v`, made non-negative as
/// Java's `Math.abs` does.
pub fn fnvhash64(v: u64) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut v = v;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(1_099_511_628_211);
        v >>= 8;
    }
    (h as i64).wrapping_abs() as u64
}

/// The zeta function of YCSB's Zipfian generator: `sum_{i=st+1..=n} 1/i^theta` added to
/// `initial` (the value for the first `st` items).
fn zeta(st: u64, n: u64, theta: f64, initial: f64) -> f64 {
    let mut sum = initial;
    for i in st..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

/// YCSB's `ZipfianGenerator`: item 0 is the most popular; popularity falls as `1/rank^theta`.
/// The item count may grow (YCSB's latest distribution); zeta is then extended incrementally.
#[derive(Debug, Clone)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    count_for_zeta: u64,
}

/// YCSB's default Zipfian constant.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

impl Zipfian {
    /// A generator over `[0, items)` with constant `theta` (computes zeta: O(items)).
    pub fn new(items: u64, theta: f64) -> Zipfian {
        let zetan = zeta(0, items, theta, 0.0);
        Zipfian::with_zetan(items, theta, zetan)
    }

    /// A generator over `[0, items)` with a precomputed `zetan`.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Zipfian {
        let zeta2theta = zeta(0, 2, theta, 0.0);
        let mut z = Zipfian {
            items,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: 0.0,
            count_for_zeta: items,
        };
        z.eta = z.compute_eta(items);
        z
    }

    fn compute_eta(&self, items: u64) -> f64 {
        (1.0 - (2.0 / items.max(1) as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta2theta / self.zetan)
    }

    /// The next item of the configured range.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        self.next_of(self.items, rng)
    }

    /// The next item of `[0, items)`, extending zeta when `items` grew (YCSB's `nextLong`).
    pub fn next_of(&mut self, items: u64, rng: &mut Rng) -> u64 {
        if items == 0 {
            return 0;
        }
        if items != self.count_for_zeta {
            self.zetan = if items > self.count_for_zeta {
                zeta(self.count_for_zeta, items, self.theta, self.zetan)
            } else {
                zeta(0, items, self.theta, 0.0)
            };
            self.count_for_zeta = items;
            self.eta = self.compute_eta(items);
        }
        let u = rng.next_f64();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1.min(items - 1);
        }
        let r = (items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        r.min(items - 1)
    }
}

/// YCSB's `ScrambledZipfianGenerator`: Zipfian popularity, but the popular items are scattered
/// over `[0, items)` by an FNV hash (so hot keys are not neighbours). Uses YCSB's fixed
/// 10^10-item generator and its precomputed zeta.
#[derive(Debug, Clone)]
pub struct ScrambledZipfian {
    gen_: Zipfian,
    items: u64,
}

impl ScrambledZipfian {
    /// YCSB's `ITEM_COUNT`.
    const ITEM_COUNT: u64 = 10_000_000_000;
    /// YCSB's `ZETAN`: zeta(10^10, 0.99).
    const ZETAN: f64 = 26.469_028_201_783_02;

    /// A generator over `[0, items)` with theta 0.99.
    pub fn new(items: u64) -> ScrambledZipfian {
        ScrambledZipfian {
            gen_: Zipfian::with_zetan(Self::ITEM_COUNT, ZIPFIAN_CONSTANT, Self::ZETAN),
            items: items.max(1),
        }
    }

    /// The next item.
    pub fn next(&mut self, rng: &mut Rng) -> u64 {
        fnvhash64(self.gen_.next(rng)) % self.items
    }
}

/// YCSB's `SkewedLatestGenerator`: the most recently inserted records are the most popular.
#[derive(Debug, Clone)]
pub struct SkewedLatest {
    zipf: Zipfian,
}

impl SkewedLatest {
    /// A generator for a table of `count` records (more may be inserted later).
    pub fn new(count: u64) -> SkewedLatest {
        SkewedLatest {
            zipf: Zipfian::new(count.max(1), ZIPFIAN_CONSTANT),
        }
    }

    /// A record of `[0, count)`, skewed towards `count - 1`.
    pub fn next(&mut self, count: u64, rng: &mut Rng) -> u64 {
        let max = count.saturating_sub(1);
        max - self.zipf.next_of(count.max(1), rng).min(max)
    }
}

/// How a workload picks existing records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distribution {
    /// Every record equally likely.
    Uniform,
    /// Scrambled Zipfian, theta 0.99.
    Zipfian,
    /// Skewed towards the latest inserted record.
    Latest,
}

impl std::str::FromStr for Distribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "uniform" => Ok(Distribution::Uniform),
            "zipfian" => Ok(Distribution::Zipfian),
            "latest" => Ok(Distribution::Latest),
            o => Err(format!(
                "unknown distribution `{o}` (uniform, zipfian, latest)"
            )),
        }
    }
}

impl Distribution {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Distribution::Uniform => "uniform",
            Distribution::Zipfian => "zipfian",
            Distribution::Latest => "latest",
        }
    }
}

/// Picks existing record numbers by a [`Distribution`] from a table that may grow.
#[derive(Debug, Clone)]
pub enum Chooser {
    /// Uniform over the current records.
    Uniform,
    /// Scrambled Zipfian over `[0, space)`, redrawn while the draw is not inserted yet (YCSB
    /// sizes `space` as the records plus twice the expected inserts).
    Zipfian(ScrambledZipfian),
    /// Skewed towards the latest record.
    Latest(SkewedLatest),
}

impl Chooser {
    /// A chooser for a table of `records` records expected to reach `space` records.
    pub fn new(dist: Distribution, records: u64, space: u64) -> Chooser {
        match dist {
            Distribution::Uniform => Chooser::Uniform,
            Distribution::Zipfian => Chooser::Zipfian(ScrambledZipfian::new(space.max(records))),
            Distribution::Latest => Chooser::Latest(SkewedLatest::new(records)),
        }
    }

    /// A record number below `count`.
    pub fn next(&mut self, count: u64, rng: &mut Rng) -> u64 {
        match self {
            Chooser::Uniform => rng.below(count),
            Chooser::Latest(g) => g.next(count, rng),
            Chooser::Zipfian(g) => {
                for _ in 0..64 {
                    let k = g.next(rng);
                    if k < count {
                        return k;
                    }
                }
                rng.below(count)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn keys_are_fixed_size_zero_padded_decimal() {
        assert_eq!(make_key(42, 8), b"00000042");
        assert_eq!(make_key(0, 4), b"0000");
        assert_eq!(make_key(123_456, 4), b"3456");
        assert_eq!(make_key(7, 16).len(), 16);
    }

    #[test]
    fn same_seed_gives_same_sequence_and_threads_differ() {
        let a: Vec<u64> = {
            let mut r = Rng::for_thread(301, 0, 0);
            (0..100).map(|_| r.below(1000)).collect()
        };
        let b: Vec<u64> = {
            let mut r = Rng::for_thread(301, 0, 0);
            (0..100).map(|_| r.below(1000)).collect()
        };
        let c: Vec<u64> = {
            let mut r = Rng::for_thread(301, 0, 1);
            (0..100).map(|_| r.below(1000)).collect()
        };
        let d: Vec<u64> = {
            let mut r = Rng::for_thread(301, 1, 0);
            (0..100).map(|_| r.below(1000)).collect()
        };
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert_ne!(a, d);
    }

    #[test]
    fn uniform_draws_cover_the_range_evenly() {
        let mut r = Rng::new(1);
        let mut counts = [0u32; 10];
        for _ in 0..100_000 {
            let v = r.below(10);
            counts[v as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
        for _ in 0..1000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
        }
    }

    #[test]
    fn permutation_is_a_bijection_and_depends_on_the_seed() {
        for n in [1u64, 2, 3, 10, 1000, 4097] {
            let p = Permutation::new(n, 7);
            let seen: HashSet<u64> = (0..n).map(|i| p.get(i)).collect();
            assert_eq!(seen.len() as u64, n);
            assert!(seen.iter().all(|&x| x < n));
        }
        let a: Vec<u64> = (0..50).map(|i| Permutation::new(1000, 1).get(i)).collect();
        let b: Vec<u64> = (0..50).map(|i| Permutation::new(1000, 2).get(i)).collect();
        assert_ne!(a, b);
    }

    #[test]
    fn record_keys_are_distinct_and_fit_the_key_size() {
        let rk = RecordKeys::new(16, 3);
        assert!(rk.capacity() >= 1 << 50);
        let keys: HashSet<Vec<u8>> = (0..5000).map(|i| rk.key(i, 16)).collect();
        assert_eq!(keys.len(), 5000);
        assert!(keys.iter().all(|k| k.len() == 16));
    }

    #[test]
    fn fnvhash64_matches_ycsb() {
        // Golden values of FNV-1a-64 over the 8 little-endian bytes, then Math.abs.
        assert_eq!(fnvhash64(0), 0x5738_07cd_d7e5_c63b);
        assert_eq!(fnvhash64(1), 0x7632_ced6_e2d5_105c);
        assert_eq!(fnvhash64(0x0123_4567_89ab_cdef), 0x37eb_3f33_4776_1c55);
        assert_eq!(fnvhash64(9_999_999_999), 0x3207_ffb3_a7ba_cce2);
    }

    #[test]
    fn zipfian_favours_small_items_with_the_expected_skew() {
        let n = 1000;
        let mut z = Zipfian::new(n, ZIPFIAN_CONSTANT);
        let mut r = Rng::new(9);
        let draws = 200_000;
        let mut counts = vec![0u64; n as usize];
        for _ in 0..draws {
            let v = z.next(&mut r);
            assert!(v < n);
            counts[v as usize] += 1;
        }
        // P(0) = 1/zeta(1000, 0.99) ~ 0.133; P(1) ~ P(0) / 2^0.99.
        let zn = zeta(0, n, ZIPFIAN_CONSTANT, 0.0);
        let p0 = counts[0] as f64 / draws as f64;
        assert!((p0 - 1.0 / zn).abs() < 0.01, "p0 {p0} vs {}", 1.0 / zn);
        let ratio = counts[0] as f64 / counts[1] as f64;
        assert!((1.8..2.2).contains(&ratio), "ratio {ratio}");
        // The top 10% of items take far more than 10% of the draws.
        let top: u64 = counts[..100].iter().sum();
        assert!(top as f64 / draws as f64 > 0.6);
    }

    #[test]
    fn zipfian_extends_zeta_when_the_table_grows() {
        let mut grown = Zipfian::new(100, ZIPFIAN_CONSTANT);
        let mut r = Rng::new(1);
        let _ = grown.next_of(500, &mut r);
        let fresh = Zipfian::new(500, ZIPFIAN_CONSTANT);
        assert!((grown.zetan - fresh.zetan).abs() < 1e-9);
    }

    #[test]
    fn scrambled_zipfian_has_hot_items_scattered_over_the_range() {
        let n = 10_000;
        let mut z = ScrambledZipfian::new(n);
        let mut r = Rng::new(5);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..100_000 {
            let v = z.next(&mut r);
            assert!(v < n);
            *counts.entry(v).or_insert(0u64) += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.into_iter().map(|(k, c)| (c, k)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        // Skewed: the hottest item is drawn far more often than the uniform 10.
        assert!(by_count[0].0 > 500, "{:?}", &by_count[..5]);
        // Scattered: the 10 hottest items are not the 10 smallest numbers.
        assert!(by_count[..10].iter().any(|&(_, k)| k > n / 10));
    }

    #[test]
    fn latest_favours_recent_records() {
        // P(one of the 10 newest) = zeta(10) / zeta(count).
        let expect =
            |count: u64| zeta(0, 10, ZIPFIAN_CONSTANT, 0.0) / zeta(0, count, ZIPFIAN_CONSTANT, 0.0);
        let mut g = SkewedLatest::new(1000);
        let mut r = Rng::new(3);
        let draws = 20_000;
        let recent = (0..draws).filter(|_| g.next(1000, &mut r) >= 990).count();
        let got = recent as f64 / draws as f64;
        assert!(
            (got - expect(1000)).abs() < 0.02,
            "{got} vs {}",
            expect(1000)
        );
        // After inserts, the newest records become the hot ones.
        let newest = (0..draws).filter(|_| g.next(2000, &mut r) >= 1990).count();
        let got = newest as f64 / draws as f64;
        assert!(
            (got - expect(2000)).abs() < 0.02,
            "{got} vs {}",
            expect(2000)
        );
        assert!((0..1000).all(|_| g.next(2000, &mut r) < 2000));
    }

    #[test]
    fn zipfian_chooser_only_returns_inserted_records() {
        let mut c = Chooser::new(Distribution::Zipfian, 100, 300);
        let mut r = Rng::new(2);
        for _ in 0..10_000 {
            assert!(c.next(100, &mut r) < 100);
        }
        let mut u = Chooser::new(Distribution::Uniform, 50, 50);
        for _ in 0..1000 {
            assert!(u.next(50, &mut r) < 50);
        }
    }
}
