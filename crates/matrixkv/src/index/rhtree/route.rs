//! The DRAM prefix search tree that routes a key to its leaf, built from the leaf directory at
//! `open` and updated in place by every split, and the leaf images a split writes.

use std::collections::BTreeMap;

use super::format::{
    BUCKET_SIZE, BUCKETS, LEAF_SIZE, LeafMeta, MAX_SYMBOL, PROBE, SLOTS, home_bucket, ptr_at, put,
    sig_at, symbol,
};
use crate::coding::le_u64;

/// A child of an inner node, keyed by its lowest symbol.
#[derive(Debug)]
enum Child {
    /// Leaf `idx` of the directory, covering symbols up to `hi`.
    Leaf { hi: u16, idx: usize },
    /// The inner node one byte deeper, for the single symbol it is keyed by.
    Inner(Box<Inner>),
}

/// An inner node at depth `d`: children for disjoint ranges of the symbol at depth `d` that
/// together cover `[0, 256]`.
#[derive(Debug, Default)]
pub(super) struct Inner {
    children: BTreeMap<u16, Child>,
}

impl Inner {
    /// The tree of the directory `leaves` (a leaf's index in the slice is its id), or why they
    /// do not form one: overlapping ranges, gaps, a bad range.
    pub fn build(leaves: &[LeafMeta]) -> Result<Inner, &'static str> {
        let mut root = Inner::default();
        for (idx, m) in leaves.iter().enumerate() {
            root.insert_leaf(m, idx)?;
        }
        root.check_coverage()?;
        Ok(root)
    }

    /// Replaces leaf `old` (id `old_idx`) by the leaves `new` (with their ids) that a split
    /// planned for its range: O(depth) per leaf instead of a rebuild. Fails, leaving the
    /// tree unusable, if `old` is not a leaf of the tree or the new leaves do not fit.
    pub fn replace(
        &mut self,
        old: &LeafMeta,
        old_idx: usize,
        new: &[(&LeafMeta, usize)],
    ) -> Result<(), &'static str> {
        let mut node = &mut *self;
        for &b in &old.prefix {
            node = match node.children.get_mut(&(u16::from(b) + 1)) {
                Some(Child::Inner(n)) => n,
                _ => return Err("the split leaf is not in the tree"),
            };
        }
        match node.children.remove(&old.lo) {
            Some(Child::Leaf { idx, .. }) if idx == old_idx => {}
            _ => return Err("the split leaf is not in the tree"),
        }
        for (m, idx) in new {
            self.insert_leaf(m, *idx)?;
        }
        Ok(())
    }

    /// Adds leaf `m` with id `idx`, creating the inner nodes of its prefix.
    fn insert_leaf(&mut self, m: &LeafMeta, idx: usize) -> Result<(), &'static str> {
        let mut node = self;
        for &b in &m.prefix {
            let child = node
                .children
                .entry(u16::from(b) + 1)
                .or_insert_with(|| Child::Inner(Box::default()));
            node = match child {
                Child::Inner(n) => n,
                Child::Leaf { .. } => {
                    return Err("a leaf overlaps the prefix of a deeper leaf");
                }
            };
        }
        if m.lo > m.hi || m.hi > MAX_SYMBOL {
            return Err("a leaf with an impossible symbol range");
        }
        if node.children.contains_key(&m.lo) {
            return Err("two leaves start at the same symbol");
        }
        node.children.insert(m.lo, Child::Leaf { hi: m.hi, idx });
        Ok(())
    }

    /// Every inner node's children cover `[0, 256]` without gaps or overlaps.
    fn check_coverage(&self) -> Result<(), &'static str> {
        let mut expected = 0u16;
        for (&lo, child) in &self.children {
            if lo != expected {
                return Err("the leaves of a node leave a gap or overlap");
            }
            expected = match child {
                Child::Leaf { hi, .. } => *hi,
                Child::Inner(n) => {
                    n.check_coverage()?;
                    lo
                }
            } + 1;
        }
        if expected != MAX_SYMBOL + 1 {
            return Err("the leaves of a node do not cover every symbol");
        }
        Ok(())
    }

    /// The directory index of the leaf that covers `key` (`None` only for a tree that
    /// `build` did not check).
    pub fn route(&self, key: &[u8]) -> Option<usize> {
        let mut node = self;
        let mut depth = 0;
        loop {
            let s = symbol(key, depth);
            let (&lo, child) = node.children.range(..=s).next_back()?;
            match child {
                Child::Leaf { hi, idx } => return (s <= *hi).then_some(*idx),
                Child::Inner(n) if lo == s => node = n,
                Child::Inner(_) => return None,
            }
            depth += 1;
        }
    }
}

/// A live key of a leaf: its signature and the offset of its record.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub key: Vec<u8>,
    pub sig: u32,
    pub ptr: u64,
}

/// The occupied slots of the leaf image `leaf`: `(bucket, slot, signature, record offset)`.
pub(super) fn occupied(leaf: &[u8]) -> Vec<(usize, usize, u32, u64)> {
    let mut out = Vec::new();
    for b in 0..BUCKETS {
        for s in 0..SLOTS {
            let at = b * BUCKET_SIZE;
            let ptr = le_u64(leaf, at + ptr_at(s));
            if ptr != 0 {
                let sig = crate::coding::le_u32(leaf, at + sig_at(s));
                out.push((b, s, sig, ptr));
            }
        }
    }
    out
}

/// The buckets a key with signature `sig` may occupy, home bucket first.
pub(super) fn window(sig: u32) -> impl Iterator<Item = usize> {
    let home = home_bucket(sig);
    (0..PROBE).map(move |p| (home + p) % BUCKETS)
}

/// The leaf image holding `entries` (each in the first free slot of its window, in order), or
/// `None` if one does not fit.
pub(super) fn build_image(entries: &[Entry]) -> Option<Vec<u8>> {
    let mut img = vec![0u8; LEAF_SIZE];
    'entry: for e in entries {
        for b in window(e.sig) {
            for s in 0..SLOTS {
                let at = b * BUCKET_SIZE;
                if le_u64(&img, at + ptr_at(s)) == 0 {
                    put(&mut img, at + sig_at(s), &e.sig.to_le_bytes());
                    put(&mut img, at + ptr_at(s), &e.ptr.to_le_bytes());
                    continue 'entry;
                }
            }
        }
        return None;
    }
    Some(img)
}

/// The leaves that replace the full leaf `meta` so that `entries` (its keys and the new one,
/// all distinct and covered by `meta`) fit: `meta` itself if they fit, else the leaves of its
/// normal split (`lo < hi`: halve the range) or level split (`lo == hi`: the node one byte
/// deeper, symbols `[0, 128]` and `[129, 256]`), split again while they do not fit. The blocks
/// of the returned metas are not assigned. `None`: keys that no split separates (only
/// possible with duplicate keys).
pub(super) fn plan(meta: LeafMeta, entries: Vec<Entry>) -> Option<Vec<(LeafMeta, Vec<u8>)>> {
    if let Some(img) = build_image(&entries) {
        return Some(vec![(meta, img)]);
    }
    let halves = if meta.lo < meta.hi {
        let mid = meta.lo + (meta.hi - meta.lo) / 2;
        [
            (meta.prefix.clone(), meta.lo, mid),
            (meta.prefix, mid + 1, meta.hi),
        ]
    } else {
        // A terminator leaf holds at most the one key equal to its prefix.
        let byte = u8::try_from(meta.lo.checked_sub(1)?).ok()?;
        let mut prefix = meta.prefix;
        prefix.push(byte);
        [(prefix.clone(), 0, 128), (prefix, 129, MAX_SYMBOL)]
    };
    let mut out = Vec::new();
    for (prefix, lo, hi) in halves {
        let half = LeafMeta {
            block: 0,
            prefix,
            lo,
            hi,
        };
        let sub = entries
            .iter()
            .filter(|e| half.covers(&e.key))
            .cloned()
            .collect();
        out.extend(plan(half, sub)?);
    }
    Some(out)
}
