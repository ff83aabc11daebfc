//! [`BlockCache`]: a bounded, sharded LRU cache of decoded SSTable blocks.
//!
//! Keyed by `(cache_id, block offset)`, where the cache id names one table for the lifetime
//! of the cache (the owner hands out a distinct id per opened table, e.g. its file number).
//! Values are `Arc<Block>`: verified, decompressed blocks ready for iteration. Each entry is
//! charged [`Block::charge`] bytes; inserting evicts least-recently-used entries of the same
//! shard until the shard is within its share of the capacity. A block larger than a shard's
//! share is not cached. Capacity 0 disables the cache (every lookup misses, nothing is kept).
//! Blocks handed out stay alive while an iterator holds them, even after eviction.
//!
//! Called by `sst::reader` on every data-block read; owned by the database instance (no
//! globals). Thread safety: `Sync`; 16 shards, each behind its own mutex (rank
//! `LeafBlockCache` of [`crate::lock_order`]), held only for the map/list update (never across
//! I/O).
#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::block::Block;
use crate::lock_order::{Mutex, Rank};

const SHARD_BITS: u32 = 4;
const SHARDS: usize = 1 << SHARD_BITS;
const NIL: usize = usize::MAX;

/// Key of a cached block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct CacheKey {
    cache_id: u64,
    offset: u64,
}

impl CacheKey {
    /// A well-mixed 64-bit hash (MurmurHash3 finalizer over both words); the top bits pick
    /// the shard.
    fn hash(&self) -> u64 {
        mix(self.cache_id.rotate_left(32) ^ self.offset)
    }
}

fn mix(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    h
}

/// A fast hasher for `CacheKey` (two u64 writes), much cheaper than SipHash; the keys are
/// not attacker-controlled.
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = self.0.rotate_left(32) ^ v;
    }

    fn finish(&self) -> u64 {
        mix(self.0)
    }
}

/// One LRU list entry, linked by slot index.
#[derive(Debug)]
struct Slot {
    key: CacheKey,
    block: Option<Arc<Block>>,
    charge: usize,
    prev: usize,
    next: usize,
}

/// One shard: a hash map into a slab of slots forming a doubly linked LRU list
/// (`head` = most recently used). Guarded by the shard's mutex.
#[derive(Debug)]
struct Shard {
    map: HashMap<CacheKey, usize, BuildHasherDefault<KeyHasher>>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    head: usize,
    tail: usize,
    usage: usize,
    capacity: usize,
}

impl Shard {
    fn new(capacity: usize) -> Shard {
        Shard {
            map: HashMap::default(),
            slots: Vec::new(),
            free: Vec::new(),
            head: NIL,
            tail: NIL,
            usage: 0,
            capacity,
        }
    }

    fn unlink(&mut self, i: usize) {
        let (prev, next) = match self.slots.get(i) {
            Some(s) => (s.prev, s.next),
            None => return,
        };
        match self.slots.get_mut(prev) {
            Some(p) => p.next = next,
            None => self.head = next,
        }
        match self.slots.get_mut(next) {
            Some(n) => n.prev = prev,
            None => self.tail = prev,
        }
    }

    fn push_front(&mut self, i: usize) {
        let old_head = self.head;
        if let Some(s) = self.slots.get_mut(i) {
            s.prev = NIL;
            s.next = old_head;
        }
        match self.slots.get_mut(old_head) {
            Some(h) => h.prev = i,
            None => self.tail = i,
        }
        self.head = i;
    }

    fn get(&mut self, key: &CacheKey) -> Option<Arc<Block>> {
        let i = *self.map.get(key)?;
        self.unlink(i);
        self.push_front(i);
        self.slots.get(i).and_then(|s| s.block.clone())
    }

    fn insert(&mut self, key: CacheKey, block: Arc<Block>) {
        let charge = block.charge();
        if charge > self.capacity {
            return;
        }
        if let Some(&i) = self.map.get(&key) {
            self.unlink(i);
            if let Some(s) = self.slots.get_mut(i) {
                self.usage = self.usage - s.charge + charge;
                s.charge = charge;
                s.block = Some(block);
            }
            self.push_front(i);
        } else {
            let slot = Slot {
                key,
                block: Some(block),
                charge,
                prev: NIL,
                next: NIL,
            };
            let i = match self.free.pop() {
                Some(i) => {
                    if let Some(s) = self.slots.get_mut(i) {
                        *s = slot;
                    }
                    i
                }
                None => {
                    self.slots.push(slot);
                    self.slots.len() - 1
                }
            };
            self.map.insert(key, i);
            self.usage += charge;
            self.push_front(i);
        }
        while self.usage > self.capacity && self.tail != NIL {
            let victim = self.tail;
            self.unlink(victim);
            if let Some(s) = self.slots.get_mut(victim) {
                self.usage -= s.charge;
                s.charge = 0;
                s.block = None;
                self.map.remove(&s.key);
            }
            self.free.push(victim);
        }
    }
}

/// A sharded LRU cache of decoded blocks, bounded in bytes.
#[derive(Debug)]
pub struct BlockCache {
    shards: Vec<Mutex<Shard>>,
    capacity_bytes: usize,
    /// Statistics only (`Relaxed`).
    hits: AtomicU64,
    /// Statistics only (`Relaxed`).
    misses: AtomicU64,
}

impl BlockCache {
    /// A cache holding at most `capacity_bytes` of block charge; 0 disables it.
    pub fn new(capacity_bytes: usize) -> BlockCache {
        let per_shard = capacity_bytes.div_ceil(SHARDS);
        BlockCache {
            shards: (0..SHARDS)
                .map(|_| Mutex::new(Rank::LeafBlockCache, Shard::new(per_shard)))
                .collect(),
            capacity_bytes,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &CacheKey) -> Option<&Mutex<Shard>> {
        self.shards.get((key.hash() >> (64 - SHARD_BITS)) as usize)
    }

    /// The cached block at `offset` of table `cache_id`, marking it recently used.
    pub fn get(&self, cache_id: u64, offset: u64) -> Option<Arc<Block>> {
        if self.capacity_bytes == 0 {
            return None;
        }
        let key = CacheKey { cache_id, offset };
        let found = self.shard(&key).and_then(|s| s.lock().get(&key));
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Caches `block` as the block at `offset` of table `cache_id` (replacing any previous
    /// one), evicting least-recently-used blocks as needed.
    pub fn insert(&self, cache_id: u64, offset: u64, block: Arc<Block>) {
        if self.capacity_bytes == 0 {
            return;
        }
        let key = CacheKey { cache_id, offset };
        if let Some(s) = self.shard(&key) {
            s.lock().insert(key, block);
        }
    }

    /// Bytes of block charge currently cached.
    pub fn usage_bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().usage).sum()
    }

    /// Number of lookups that found their block.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Number of lookups that did not find their block.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sst::block_builder::BlockBuilder;

    fn block(value_len: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(16);
        b.add(b"key\x01\0\0\0\0\0\0\0", &vec![7u8; value_len]);
        Arc::new(Block::new(b.finish().to_vec()).unwrap())
    }

    #[test]
    fn cached_block_is_returned_and_counted() {
        let c = BlockCache::new(1 << 20);
        assert!(c.get(1, 0).is_none());
        let b = block(100);
        c.insert(1, 0, b.clone());
        let got = c.get(1, 0).unwrap();
        assert!(Arc::ptr_eq(&got, &b));
        assert!(c.get(2, 0).is_none(), "another table's block");
        assert_eq!((c.hits(), c.misses()), (1, 2));
        assert_eq!(c.usage_bytes(), b.charge());
    }

    #[test]
    fn usage_stays_within_capacity_and_recent_blocks_survive() {
        let cap = 64 * 1024;
        let c = BlockCache::new(cap);
        let charge = block(1000).charge();
        for off in 0..1000u64 {
            c.insert(9, off * 4096, block(1000));
            // Keep touching block 0 so it stays most recently used in its shard.
            assert!(c.get(9, 0).is_some(), "block 0 evicted at {off}");
            assert!(c.usage_bytes() <= cap + SHARDS * charge);
        }
        let per_shard = cap.div_ceil(SHARDS);
        for s in &c.shards {
            assert!(s.lock().usage <= per_shard);
        }
        assert!(c.usage_bytes() > cap / 2, "cache should be well used");
    }

    #[test]
    fn reinserting_a_key_replaces_its_charge() {
        let c = BlockCache::new(1 << 20);
        c.insert(1, 0, block(100));
        c.insert(1, 0, block(5000));
        assert_eq!(c.usage_bytes(), block(5000).charge());
    }

    #[test]
    fn zero_capacity_disables_the_cache() {
        let c = BlockCache::new(0);
        c.insert(1, 0, block(10));
        assert!(c.get(1, 0).is_none());
        assert_eq!(c.usage_bytes(), 0);
        assert_eq!(c.hits(), 0);
    }

    #[test]
    fn block_larger_than_a_shard_is_not_cached() {
        let c = BlockCache::new(16 * 1024);
        c.insert(1, 0, block(8 * 1024));
        assert!(c.get(1, 0).is_none());
        assert_eq!(c.usage_bytes(), 0);
    }
}
