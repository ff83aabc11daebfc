//! Keys: user keys, sequence numbers, entry kinds, and the internal-key encoding and order.
//!
//! An *internal key* is `user_key ++ tag`, where `tag` is 8 little-endian bytes holding
//! `(seqno << 8) | kind`. Internal keys sort by user key ascending, then by tag *descending*,
//! so the newest version of a user key comes first (LevelDB `db/dbformat.h`).
#![deny(clippy::indexing_slicing)]

use std::cmp::Ordering;

use crate::error::CorruptionReason;

/// A sequence number: the position of a write in the database's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNo(pub u64);

impl SeqNo {
    /// The largest representable sequence number (56 bits; the low tag byte holds the kind).
    pub const MAX: SeqNo = SeqNo((1 << 56) - 1);
    /// Zero: before any write.
    pub const ZERO: SeqNo = SeqNo(0);

    /// The next sequence number.
    #[must_use]
    pub fn next(self) -> SeqNo {
        SeqNo(self.0 + 1)
    }
}

impl std::fmt::Display for SeqNo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The kind of an entry. DO NOT CHANGE THESE VALUES: they are embedded in every format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted.
    // FORMAT: never change; see docs/format/sst.md
    Deletion = 0,
    /// A value.
    // FORMAT: never change; see docs/format/sst.md
    Value = 1,
    /// A pointer to a value stored in a blob file on the slow tier (key-value separation;
    /// see docs/format/blob.md). Flushes and compactions that separate values write it, and
    /// so does the write path with `Options::separate_at_write` (its WAL records and memtables
    /// hold it); users never see it.
    // FORMAT: never change; see docs/format/sst.md
    BlobIndex = 2,
    /// A merge operand: combined with the older versions of the key by the database's
    /// `MergeOperator` when read, and folded by compaction.
    // FORMAT: never change; see docs/format/sst.md
    Merge = 3,
    /// A range deletion: in a write batch (and the WAL) only, with the key as the range's
    /// start and the value as its end (exclusive). Never stored in a table or row: the
    /// memtable keeps range tombstones apart and a flush moves them into the version (see
    /// docs/decisions/0015-range-deletes.md).
    // FORMAT: never change; see docs/format/wal.md
    RangeDeletion = 4,
}

impl ValueKind {
    /// Decodes a kind byte.
    pub fn from_u8(b: u8) -> Result<ValueKind, CorruptionReason> {
        match b {
            0 => Ok(ValueKind::Deletion),
            1 => Ok(ValueKind::Value),
            2 => Ok(ValueKind::BlobIndex),
            3 => Ok(ValueKind::Merge),
            other => Err(CorruptionReason::UnknownType(other)),
        }
    }

    /// Decodes the kind byte of a write-batch record: the kinds of [`ValueKind::from_u8`] and
    /// [`ValueKind::RangeDeletion`], which only batches hold.
    pub fn from_batch_u8(b: u8) -> Result<ValueKind, CorruptionReason> {
        match b {
            4 => Ok(ValueKind::RangeDeletion),
            other => ValueKind::from_u8(other),
        }
    }
}

/// The kind used when seeking: with the tag order descending, `Merge` (the largest kind)
/// positions a seek before every entry of the same user key and sequence number.
pub const KIND_FOR_SEEK: ValueKind = ValueKind::Merge;

/// Versions of one user key as a merging point lookup collects them: `(kind, value)`,
/// newest first.
pub(crate) type Versions = Vec<(ValueKind, Vec<u8>)>;

/// Number of tag bytes at the end of an internal key.
pub const TAG_LEN: usize = 8;

/// Packs a sequence number and a kind into a tag.
pub fn pack_tag(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= SeqNo::MAX);
    (seq.0 << 8) | kind as u64
}

/// Builds an internal key.
pub fn make_internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut k = Vec::with_capacity(user_key.len() + TAG_LEN);
    append_internal_key(&mut k, user_key, seq, kind);
    k
}

/// Appends an internal key to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_tag(seq, kind).to_le_bytes());
}

/// The internal key that a seek for `user_key` as of snapshot `seq` starts from: it sorts
/// before every version of `user_key` visible at `seq`.
pub fn seek_key(user_key: &[u8], seq: SeqNo) -> Vec<u8> {
    make_internal_key(user_key, seq, KIND_FOR_SEEK)
}

/// A decoded internal key that borrows its user key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user key.
    pub user_key: &'a [u8],
    /// Sequence number.
    pub seq: SeqNo,
    /// Kind.
    pub kind: ValueKind,
}

/// Splits an internal key into user key and tag without validating the kind.
///
/// Returns `None` if `ikey` is shorter than a tag.
pub fn split_internal(ikey: &[u8]) -> Option<(&[u8], u64)> {
    let n = ikey.len().checked_sub(TAG_LEN)?;
    let (user, tag) = ikey.split_at(n);
    let tag: [u8; 8] = tag.try_into().ok()?;
    Some((user, u64::from_le_bytes(tag)))
}

/// Decodes an internal key read from storage.
pub fn parse_internal_key(ikey: &[u8]) -> Result<ParsedKey<'_>, CorruptionReason> {
    let (user_key, tag) = split_internal(ikey).ok_or(CorruptionReason::Truncated)?;
    let kind = ValueKind::from_u8((tag & 0xff) as u8)?;
    Ok(ParsedKey {
        user_key,
        seq: SeqNo(tag >> 8),
        kind,
    })
}

/// The user-key part of an internal key (the whole slice if it is too short to hold a tag).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    split_internal(ikey).map_or(ikey, |(u, _)| u)
}

/// The sequence number of an internal key (0 if too short).
#[cfg(test)]
pub fn seq_of(ikey: &[u8]) -> SeqNo {
    split_internal(ikey).map_or(SeqNo::ZERO, |(_, t)| SeqNo(t >> 8))
}

/// Orders internal keys: user key ascending, then tag (sequence, kind) descending.
///
/// Slices too short to hold a tag sort as if their tag were 0 (they never occur in valid data).
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    let (ua, ta) = split_internal(a).unwrap_or((a, 0));
    let (ub, tb) = split_internal(b).unwrap_or((b, 0));
    ua.cmp(ub).then_with(|| tb.cmp(&ta))
}

/// An owned internal key with the internal-key order, usable as a map key (tests and fuzz
/// seeds).
#[cfg(any(test, feature = "fuzzing"))]
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct InternalKey(pub Vec<u8>);

#[cfg(any(test, feature = "fuzzing"))]
impl InternalKey {
    /// Builds an internal key.
    pub fn new(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Self {
        InternalKey(make_internal_key(user_key, seq, kind))
    }

    /// The encoded bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The user key.
    pub fn user_key(&self) -> &[u8] {
        user_key(&self.0)
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

#[cfg(any(test, feature = "fuzzing"))]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newer_versions_of_a_key_sort_first() {
        let a = make_internal_key(b"k", SeqNo(5), ValueKind::Value);
        let b = make_internal_key(b"k", SeqNo(3), ValueKind::Value);
        let c = make_internal_key(b"l", SeqNo(9), ValueKind::Value);
        assert_eq!(compare_internal(&a, &b), Ordering::Less);
        assert_eq!(compare_internal(&b, &c), Ordering::Less);
        // User-key order wins over sequence order, also for prefixes.
        let d = make_internal_key(b"k\x00", SeqNo(1), ValueKind::Value);
        assert_eq!(compare_internal(&a, &d), Ordering::Less);
    }

    #[test]
    fn seek_key_sorts_before_every_visible_version() {
        let s = seek_key(b"k", SeqNo(5));
        let del = make_internal_key(b"k", SeqNo(5), ValueKind::Deletion);
        let val = make_internal_key(b"k", SeqNo(5), ValueKind::Value);
        let newer = make_internal_key(b"k", SeqNo(6), ValueKind::Value);
        assert_ne!(compare_internal(&s, &del), Ordering::Greater);
        assert_ne!(compare_internal(&s, &val), Ordering::Greater);
        assert_eq!(compare_internal(&newer, &s), Ordering::Less);
    }

    #[test]
    fn parse_rejects_short_keys_and_unknown_kinds() {
        assert_eq!(parse_internal_key(b"abc"), Err(CorruptionReason::Truncated));
        let mut k = make_internal_key(b"k", SeqNo(1), ValueKind::Value);
        let n = k.len();
        k[n - 8] = 7;
        assert_eq!(
            parse_internal_key(&k),
            Err(CorruptionReason::UnknownType(7))
        );
        let k = make_internal_key(b"key", SeqNo(42), ValueKind::Deletion);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"key"[..], SeqNo(42), ValueKind::Deletion)
        );
    }
}
