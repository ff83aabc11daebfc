//! Range tombstones (`Db::delete_range`): a deletion of every key in `[start, end)` written at
//! one sequence number, and [`RangeDelIndex`], the structure that answers "the newest
//! tombstone visible at a snapshot that covers this key" in O(log n).
//!
//! Range tombstones never live in SSTables or rows: the memtable keeps its own in a small side
//! structure, and a flush moves them into the version (manifest tags 20 and 21, see
//! docs/format/manifest.md and docs/decisions/0015-range-deletes.md).
//!
//! Index: the tombstones are *fragmented* into non-overlapping intervals `[a, b)` cut at
//! every tombstone boundary; each fragment holds the ascending sequence numbers of the
//! tombstones that cover it whole. A query finds the fragment by binary search over the
//! starts, then the largest sequence ≤ the snapshot by binary search over its sequences.
//!
//! Plain data: `Send + Sync`, immutable once built.
#![deny(clippy::indexing_slicing)]

use crate::key::SeqNo;

/// A deletion of every key `k` with `start <= k < end`, for versions older than `seq`.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RangeTombstone {
    /// First key deleted.
    pub start: Vec<u8>,
    /// First key after the range (exclusive).
    pub end: Vec<u8>,
    /// Sequence number of the delete: versions with a smaller sequence number are covered.
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// True if `[start, end)` intersects the closed user-key range `[lo, hi]`.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.start.as_slice() <= hi && lo < self.end.as_slice()
    }

    /// True if the closed range `[lo, hi]` lies inside `[start, end)`.
    pub fn contains_range(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.start.as_slice() <= lo && hi < self.end.as_slice()
    }
}

/// One interval of the fragmented index: the sequence numbers of the tombstones that cover
/// all of `[start, end)`, ascending.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fragment {
    start: Vec<u8>,
    end: Vec<u8>,
    seqs: Vec<u64>,
}

/// A set of range tombstones with an O(log n) coverage query.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeDelIndex {
    /// The tombstones, sorted by sequence number (unique per write).
    tombstones: Vec<RangeTombstone>,
    /// Non-overlapping fragments sorted by start.
    fragments: Vec<Fragment>,
}

impl RangeDelIndex {
    /// The index of `tombstones` (any order; empty ranges are ignored).
    pub fn new(mut tombstones: Vec<RangeTombstone>) -> RangeDelIndex {
        tombstones.retain(|t| t.start < t.end);
        tombstones.sort_by_key(|t| t.seq);
        let fragments = fragment(&tombstones);
        RangeDelIndex {
            tombstones,
            fragments,
        }
    }

    /// True when there is no tombstone.
    pub fn is_empty(&self) -> bool {
        self.tombstones.is_empty()
    }

    /// Number of tombstones.
    pub fn len(&self) -> usize {
        self.tombstones.len()
    }

    /// The tombstones, by ascending sequence number.
    pub fn tombstones(&self) -> &[RangeTombstone] {
        &self.tombstones
    }

    /// The largest sequence number ≤ `snapshot` of a tombstone covering `key`, if any.
    pub fn max_covering(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let i = self
            .fragments
            .partition_point(|f| f.start.as_slice() <= key)
            .checked_sub(1)?;
        let f = self.fragments.get(i)?;
        if key >= f.end.as_slice() {
            return None;
        }
        let j = f
            .seqs
            .partition_point(|&s| s <= snapshot.0)
            .checked_sub(1)?;
        f.seqs.get(j).map(|&s| SeqNo(s))
    }
}

/// Cuts `tombstones` at every boundary into non-overlapping fragments (a sweep over the
/// sorted boundaries; fragments no tombstone covers are left out).
fn fragment(tombstones: &[RangeTombstone]) -> Vec<Fragment> {
    let mut bounds: Vec<&[u8]> = tombstones
        .iter()
        .flat_map(|t| [t.start.as_slice(), t.end.as_slice()])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut by_start: Vec<&RangeTombstone> = tombstones.iter().collect();
    by_start.sort_by(|a, b| a.start.cmp(&b.start));
    let mut next = by_start.into_iter().peekable();
    // (end, seq) of the tombstones that started at or before the current boundary.
    let mut active: Vec<(&[u8], u64)> = Vec::new();
    let mut out: Vec<Fragment> = Vec::new();
    for pair in bounds.windows(2) {
        let [a, b] = pair else { continue };
        while let Some(t) = next.next_if(|t| t.start.as_slice() <= *a) {
            active.push((t.end.as_slice(), t.seq.0));
        }
        active.retain(|&(end, _)| end > *a);
        if active.is_empty() {
            continue;
        }
        let mut seqs: Vec<u64> = active.iter().map(|&(_, s)| s).collect();
        seqs.sort_unstable();
        seqs.dedup();
        // Adjacent fragments with the same tombstones are one.
        if let Some(last) = out.last_mut()
            && last.end.as_slice() == *a
            && last.seqs == seqs
        {
            last.end = b.to_vec();
            continue;
        }
        out.push(Fragment {
            start: a.to_vec(),
            end: b.to_vec(),
            seqs,
        });
    }
    out
}

/// The range tombstones of several sources (memtables, the version) as one reader sees them:
/// indexes, and short lists scanned linearly (a memtable's tombstones added since its index
/// was built). Empty (and free to ask) when no source has any.
#[derive(Clone, Debug, Default)]
pub(crate) struct RangeDelView {
    parts: Vec<std::sync::Arc<RangeDelIndex>>,
    lists: Vec<std::sync::Arc<Vec<RangeTombstone>>>,
}

impl RangeDelView {
    /// Adds a source's tombstones (ignored when it has none).
    pub(crate) fn push(&mut self, part: std::sync::Arc<RangeDelIndex>) {
        if !part.is_empty() {
            self.parts.push(part);
        }
    }

    /// Adds a short list of tombstones, scanned linearly by every query (ignored when empty).
    pub(crate) fn push_list(&mut self, list: std::sync::Arc<Vec<RangeTombstone>>) {
        if !list.is_empty() {
            self.lists.push(list);
        }
    }

    /// True when no source has a tombstone.
    pub(crate) fn is_empty(&self) -> bool {
        self.parts.is_empty() && self.lists.is_empty()
    }

    /// The largest sequence number ≤ `snapshot` of a tombstone covering `key`, if any.
    pub(crate) fn max_covering(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let indexed = self
            .parts
            .iter()
            .filter_map(|p| p.max_covering(key, snapshot))
            .max();
        let listed = self
            .lists
            .iter()
            .flat_map(|l| l.iter())
            .filter(|t| t.seq <= snapshot && t.start.as_slice() <= key && key < t.end.as_slice())
            .map(|t| t.seq)
            .max();
        indexed.max(listed)
    }

    /// True if the version of `key` at `seq` is deleted by a tombstone visible at `snapshot`.
    pub(crate) fn covers(&self, key: &[u8], seq: SeqNo, snapshot: SeqNo) -> bool {
        self.max_covering(key, snapshot).is_some_and(|t| seq < t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn t(start: &str, end: &str, seq: u64) -> RangeTombstone {
        RangeTombstone {
            start: start.as_bytes().to_vec(),
            end: end.as_bytes().to_vec(),
            seq: SeqNo(seq),
        }
    }

    #[test]
    fn overlapping_tombstones_are_fragmented() {
        let idx = RangeDelIndex::new(vec![t("b", "f", 5), t("d", "h", 9), t("x", "x", 20)]);
        assert_eq!(idx.len(), 2, "the empty range is ignored");
        assert_eq!(idx.max_covering(b"a", SeqNo(100)), None);
        assert_eq!(idx.max_covering(b"b", SeqNo(100)), Some(SeqNo(5)));
        assert_eq!(idx.max_covering(b"d", SeqNo(100)), Some(SeqNo(9)));
        assert_eq!(idx.max_covering(b"d", SeqNo(8)), Some(SeqNo(5)));
        assert_eq!(idx.max_covering(b"d", SeqNo(4)), None);
        assert_eq!(idx.max_covering(b"g", SeqNo(8)), None);
        assert_eq!(idx.max_covering(b"h", SeqNo(100)), None);
    }

    proptest! {
        #[test]
        fn index_agrees_with_a_linear_scan(
            ts in proptest::collection::vec((0u8..20, 0u8..20, 1u64..50), 0..12),
            key in 0u8..22,
            snap in 0u64..60,
        ) {
            let ts: Vec<RangeTombstone> = ts
                .into_iter()
                .enumerate()
                .map(|(i, (a, b, s))| RangeTombstone {
                    start: vec![a],
                    end: vec![b],
                    seq: SeqNo(s * 100 + i as u64),
                })
                .collect();
            let idx = RangeDelIndex::new(ts.clone());
            let expect = ts
                .iter()
                .filter(|t| t.start.as_slice() <= [key].as_slice()
                    && [key].as_slice() < t.end.as_slice()
                    && t.seq.0 <= snap * 100)
                .map(|t| t.seq)
                .max();
            prop_assert_eq!(idx.max_covering(&[key], SeqNo(snap * 100)), expect);
        }
    }
}
