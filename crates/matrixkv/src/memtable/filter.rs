//! A bloom filter over the user keys of a DRAM memtable (`Options::memtable_filter_ratio`,
//! RocksDB's `memtable_prefix_bloom_size_ratio` with `memtable_whole_key_filtering`): a point
//! lookup whose key the filter rules out skips the memtable's skiplist search, which costs a
//! cache miss or more per level (31.7% of all CPU samples of `readrandom` after a fill of
//! 1M × 1 KiB, most of them for keys the memtables do not hold; decision 0030).
//!
//! Layout: blocked, one 64-byte block (512 bits) per key, so a probe costs one cache line.
//! The block is chosen by the high 32 bits of [`key_hash`](crate::sst::filter::key_hash),
//! the [`PROBES`] bits inside it by the low 32 bits, remixed per probe. Nothing of it is
//! stored: the filter is rebuilt with the memtable (WAL replay inserts through the same path).
//!
//! Concurrency. [`MemFilter::add`] sets the bits (a relaxed `fetch_or` on each word lacking
//! one; a word whose bits it already reads as set is left alone, and bits are never cleared,
//! so a later reader that sees this thread's publication also sees them) before the entry
//! enters the skiplist; the write path publishes the entry's sequence number (`visible_seq`,
//! Release) only after the insert, and a reader loads it (Acquire) before its lookup, so a
//! reader whose snapshot includes a version also sees that version's bits. A reader racing
//! the insert of a version newer than its snapshot may miss the bits, and that version is
//! invisible to it anyway. Bits are never cleared.

// Loom's atomics under `--cfg loom` (the `loom_` model tests).
use crate::sync::atomic::{AtomicU64, Ordering};

/// Bits set per key: with the default ratio (1/64 of the write buffer) a memtable of
/// 4 KiB values separated at write (about 100 bytes an entry) gets about 12 bits a key,
/// where six probes in a 512-bit block miss about 1.5% of absent keys.
const PROBES: u32 = 6;

/// One cache line of filter bits.
#[repr(align(64))]
#[derive(Default)]
struct Block([AtomicU64; 8]);

/// The filter of one memtable. See the module documentation.
pub(crate) struct MemFilter {
    blocks: Box<[Block]>,
}

impl std::fmt::Debug for MemFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemFilter")
            .field("bytes", &self.bytes())
            .finish()
    }
}

/// The word and the bit within it of each probe of `h` in its block.
fn probes(h: u64) -> impl Iterator<Item = (usize, u64)> {
    let mut x = h as u32;
    (0..PROBES).map(move |_| {
        // The top 9 bits pick one of the block's 512 bits; the multiply moves fresh bits up.
        let bit = x >> 23;
        x = x.wrapping_mul(0x9e37_79b9);
        ((bit >> 6) as usize, 1u64 << (bit & 63))
    })
}

impl MemFilter {
    /// A filter of about `bytes` bytes (whole 64-byte blocks), or `None` below one block or
    /// beyond 2^32 blocks.
    pub(crate) fn new(bytes: usize) -> Option<MemFilter> {
        let n = bytes / std::mem::size_of::<Block>();
        if n == 0 || u32::try_from(n).is_err() {
            return None;
        }
        Some(MemFilter {
            blocks: std::iter::repeat_with(Block::default).take(n).collect(),
        })
    }

    /// Bytes of filter bits.
    pub(crate) fn bytes(&self) -> usize {
        self.blocks.len() * std::mem::size_of::<Block>()
    }

    /// The block of hash `h`: the high 32 bits scaled to the block count (multiply-shift, no
    /// power of two needed).
    fn block(&self, h: u64) -> Option<&Block> {
        let i = ((h >> 32) * self.blocks.len() as u64) >> 32;
        self.blocks.get(usize::try_from(i).ok()?)
    }

    /// Records the user key whose [`key_hash`](crate::sst::filter::key_hash) is `h`.
    pub(crate) fn add(&self, h: u64) {
        let Some(b) = self.block(h) else {
            return;
        };
        // One read-modify-write per word that lacks a bit (a locked instruction each, on the
        // commit path), not one per probe.
        let mut masks = [0u64; 8];
        for (word, mask) in probes(h) {
            if let Some(m) = masks.get_mut(word) {
                *m |= mask;
            }
        }
        for (w, mask) in b.0.iter().zip(masks) {
            if mask != 0 && w.load(Ordering::Relaxed) & mask != mask {
                w.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// False only if no key with hash `h` was added (see the module documentation for the
    /// ordering this relies on).
    pub(crate) fn may_contain(&self, h: u64) -> bool {
        let Some(b) = self.block(h) else {
            return true;
        };
        probes(h).all(|(word, mask)| {
            b.0.get(word)
                .is_none_or(|w| w.load(Ordering::Relaxed) & mask != 0)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::filter::key_hash;

    #[test]
    fn every_added_key_may_be_contained() {
        let f = MemFilter::new(4096).unwrap();
        for i in 0..10_000u32 {
            f.add(key_hash(format!("key{i:08}").as_bytes()));
        }
        for i in 0..10_000u32 {
            assert!(f.may_contain(key_hash(format!("key{i:08}").as_bytes())));
        }
    }

    #[test]
    fn absent_keys_are_mostly_ruled_out_at_twelve_bits_a_key() {
        // 12 bits a key: 16 KiB for 10,922 keys.
        let f = MemFilter::new(16 << 10).unwrap();
        let keys = (16 << 10) * 8 / 12;
        for i in 0..keys {
            f.add(key_hash(format!("present{i:08}").as_bytes()));
        }
        let trials = 100_000;
        let false_positives = (0..trials)
            .filter(|i| f.may_contain(key_hash(format!("absent{i:08}").as_bytes())))
            .count();
        let rate = false_positives as f64 / f64::from(trials);
        assert!(rate < 0.03, "false-positive rate {rate}");
    }

    #[test]
    fn a_filter_needs_one_whole_block() {
        assert!(MemFilter::new(63).is_none());
        assert_eq!(MemFilter::new(64).map(|f| f.bytes()), Some(64));
        assert_eq!(MemFilter::new(1000).map(|f| f.bytes()), Some(960));
    }

    #[test]
    fn concurrent_adds_lose_no_bits() {
        let f = std::sync::Arc::new(MemFilter::new(1024).unwrap());
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let f = std::sync::Arc::clone(&f);
                std::thread::spawn(move || {
                    for i in 0..2_000u32 {
                        f.add(key_hash(format!("t{t}-{i}").as_bytes()));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        for t in 0..4u32 {
            for i in 0..2_000u32 {
                assert!(f.may_contain(key_hash(format!("t{t}-{i}").as_bytes())));
            }
        }
    }
}

/// Loom models of the filter's concurrency contract (module documentation): the real
/// [`MemFilter`], its atomics loom's under `--cfg loom` (`crate::sync`). Run:
/// `scripts/test-loom` (all models), or `scripts/test-loom loom_filter`.
#[cfg(all(test, loom))]
mod loom_tests {
    use std::sync::Arc;

    use loom::sync::atomic::AtomicBool;
    use loom::thread;

    use super::*;
    use crate::sst::filter::key_hash;

    /// No false negative under concurrency: a reader that synchronized with the end of an
    /// `add` (a Release flag, standing for the write path's `visible_seq`) finds the key.
    /// Two threads add the same key, so the second may read the first one's bits (Relaxed)
    /// and skip its `fetch_or` on those words; a reader that synchronized with the second
    /// only must still see them (read-read coherence: the skipping thread's load happens
    /// before the reader's). A one-block filter puts every probe in one cache line. The
    /// adders are the model's main thread and the first spawned one, the reader is spawned
    /// last (loom's search misses races of an earlier load with a later store otherwise: see
    /// `memtable::pskiplist::loom_tests`). Fails if `done` is stored `Relaxed`.
    ///
    /// About a second at the default bound of 2 preemptions (`scripts/test-loom`'s build).
    #[test]
    fn loom_filter_no_false_negative_after_add() {
        crate::sync::model(2, || {
            let f = Arc::new(MemFilter::new(64).unwrap());
            let k = key_hash(b"key");
            let done: Arc<[AtomicBool; 2]> =
                Arc::new([AtomicBool::new(false), AtomicBool::new(false)]);
            let adder = {
                let (f, done) = (Arc::clone(&f), Arc::clone(&done));
                thread::spawn(move || {
                    f.add(k);
                    done[1].store(true, Ordering::Release);
                })
            };
            let reader = {
                let (f, done) = (Arc::clone(&f), Arc::clone(&done));
                thread::spawn(move || {
                    for d in done.iter() {
                        if d.load(Ordering::Acquire) {
                            assert!(f.may_contain(k), "a completed add is not seen");
                        }
                    }
                })
            };
            f.add(k);
            done[0].store(true, Ordering::Release);
            adder.join().unwrap();
            reader.join().unwrap();
            assert!(f.may_contain(k));
        });
    }
}
