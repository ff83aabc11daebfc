//! [`WriteBatch`]: an ordered group of puts, deletes and merges that is applied atomically, and its
//! byte encoding, which is both the in-memory representation and the payload of a WAL record.
//!
//! Callers: applications build batches and pass them to the database's `write`; the write
//! path assigns the sequence number (`WriteBatch::set_sequence`), merges the batches of a
//! commit group (`WriteBatch::append`), appends `WriteBatch::data` to the WAL and applies
//! `WriteBatch::ops` to the memtable; WAL recovery rebuilds batches with
//! `WriteBatch::decode`; consumers of committed batches (`Db::updates_since`) read the
//! operations with [`WriteBatch::iter`]. The encoding is specified in `docs/format/wal.md`,
//! section "Batch".
//!
//! Thread safety: a `WriteBatch` is a plain value (`Send + Sync`); mutation needs `&mut`.
#![deny(clippy::indexing_slicing)]

use std::fmt;

use crate::coding::{self, Decoder};
use crate::error::CorruptionReason;
use crate::key::{SeqNo, ValueKind};

/// Bytes of the batch header: sequence number (u64 LE) then operation count (u32 LE).
// FORMAT: never change; see docs/format/wal.md
pub(crate) const BATCH_HEADER_LEN: usize = 12;
/// Offset of the operation count inside the header.
// FORMAT: never change; see docs/format/wal.md
const COUNT_OFFSET: usize = 8;

/// An ordered group of writes that the database applies atomically: after a crash either
/// every operation of the batch is visible or none is.
///
/// Operations are applied in the order they were added, so a later operation on the same key
/// wins. The batch keeps its operations in their encoded form (see `docs/format/wal.md`,
/// section "Batch"), so [`WriteBatch::size_bytes`] is exactly what the write-ahead log stores.
///
/// # Example
///
/// ```
/// use matrixkv::WriteBatch;
///
/// let mut batch = WriteBatch::new();
/// batch.put(b"apple", b"red");
/// batch.put("banana", "yellow");
/// batch.delete(b"cherry");
/// assert_eq!(batch.len(), 3);
/// assert!(!batch.is_empty());
///
/// batch.clear();
/// assert!(batch.is_empty());
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    /// The encoding: header, then the records. Always at least `BATCH_HEADER_LEN` bytes; the
    /// count in the header always equals `count`.
    rep: Vec<u8>,
    /// Number of operations (mirrors the header).
    count: u32,
    /// Length of the longest key added.
    max_key_len: usize,
    /// Length of the longest value added (deletes count as 0).
    max_value_len: usize,
    /// Number of merge operations.
    merges: u32,
    /// Number of range deletions with `start >= end` (rejected by the write path).
    bad_ranges: u32,
    /// Number of operations on a keyspace other than the default one.
    keyspace_ops: u32,
}

/// The flag of a record's kind byte that says a keyspace id (varint32) follows it.
// FORMAT: never change; see docs/format/wal.md
const KEYSPACE_FLAG: u8 = 0x80;

/// One operation of a batch as the engine applies it, borrowed from its encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawOp<'a> {
    /// The keyspace (0: the default one).
    pub(crate) keyspace: u32,
    /// Put ([`ValueKind::Value`]), delete ([`ValueKind::Deletion`]), merge
    /// ([`ValueKind::Merge`]) or range deletion ([`ValueKind::RangeDeletion`]).
    pub(crate) kind: ValueKind,
    /// The user key.
    pub(crate) key: &'a [u8],
    /// The value or merge operand; empty for a delete; the end of the range (exclusive) for
    /// a range deletion, whose `key` is the start.
    pub(crate) value: &'a [u8],
}

impl RawOp<'_> {
    /// True for the deletion of a whole keyspace ([`WriteBatch::delete_keyspace`]).
    pub(crate) fn deletes_keyspace(&self) -> bool {
        self.kind == ValueKind::RangeDeletion
            && self.keyspace != 0
            && self.key.is_empty()
            && self.value.is_empty()
    }
}

/// One operation of a [`WriteBatch`], borrowed from it, as [`WriteBatch::iter`] yields it.
///
/// New kinds of operations may be added: match with a wildcard arm.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Set `key` to `value`.
    Put {
        /// The user key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// Delete `key`.
    Delete {
        /// The user key.
        key: &'a [u8],
    },
    /// Merge `operand` into `key` (see [`WriteBatch::merge`]).
    Merge {
        /// The user key.
        key: &'a [u8],
        /// The merge operand.
        operand: &'a [u8],
    },
    /// Delete every key in `[start, end)` (see [`WriteBatch::delete_range`]).
    DeleteRange {
        /// First key deleted.
        start: &'a [u8],
        /// First key kept after the range (exclusive).
        end: &'a [u8],
    },
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> WriteBatch {
        WriteBatch::with_capacity(0)
    }

    /// An empty batch with room for `bytes` bytes of records before it reallocates (the
    /// header, 12 bytes, comes on top).
    pub fn with_capacity(bytes: usize) -> WriteBatch {
        let mut rep = Vec::with_capacity(BATCH_HEADER_LEN + bytes);
        rep.resize(BATCH_HEADER_LEN, 0);
        WriteBatch {
            rep,
            count: 0,
            max_key_len: 0,
            max_value_len: 0,
            merges: 0,
            bad_ranges: 0,
            keyspace_ops: 0,
        }
    }

    /// Starts a record of `kind` in `keyspace`.
    fn push_kind(&mut self, kind: ValueKind, keyspace: u32) {
        if keyspace == 0 {
            self.rep.push(kind as u8);
        } else {
            self.rep.push(kind as u8 | KEYSPACE_FLAG);
            coding::put_varint32(&mut self.rep, keyspace);
            self.keyspace_ops = self.keyspace_ops.saturating_add(1);
        }
    }

    /// Adds "set `key` to `value`".
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_in(0, key.as_ref(), value.as_ref());
    }

    /// A put whose value is in a blob file already (`Options::separate_at_write`): `pointer`
    /// is the encoded [`crate::blob::BlobPointer`]. Only the write path adds one, to the
    /// batch it logs; recovery replays it as the value it points to.
    pub(crate) fn put_blob_index_in(&mut self, keyspace: u32, key: &[u8], pointer: &[u8]) {
        self.push_kind(ValueKind::BlobIndex, keyspace);
        coding::put_length_prefixed(&mut self.rep, key);
        coding::put_length_prefixed(&mut self.rep, pointer);
        self.max_key_len = self.max_key_len.max(key.len());
        self.add_count(1);
    }

    pub(crate) fn put_in(&mut self, keyspace: u32, key: &[u8], value: &[u8]) {
        self.push_kind(ValueKind::Value, keyspace);
        coding::put_length_prefixed(&mut self.rep, key);
        coding::put_length_prefixed(&mut self.rep, value);
        self.max_key_len = self.max_key_len.max(key.len());
        self.max_value_len = self.max_value_len.max(value.len());
        self.add_count(1);
    }

    /// Adds "delete `key`" (a tombstone; deleting an absent key is not an error).
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.delete_in(0, key.as_ref());
    }

    pub(crate) fn delete_in(&mut self, keyspace: u32, key: &[u8]) {
        self.push_kind(ValueKind::Deletion, keyspace);
        coding::put_length_prefixed(&mut self.rep, key);
        self.max_key_len = self.max_key_len.max(key.len());
        self.add_count(1);
    }

    /// Adds "merge `operand` into `key`": the database's
    /// [`MergeOperator`](crate::MergeOperator) combines it with the key's older value (and
    /// other operands) when the key is read, and compaction folds them. Writing a batch with a
    /// merge to a database opened without a merge operator is an `InvalidArgument` error.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) {
        self.merge_in(0, key.as_ref(), operand.as_ref());
    }

    pub(crate) fn merge_in(&mut self, keyspace: u32, key: &[u8], operand: &[u8]) {
        self.push_kind(ValueKind::Merge, keyspace);
        coding::put_length_prefixed(&mut self.rep, key);
        coding::put_length_prefixed(&mut self.rep, operand);
        self.max_key_len = self.max_key_len.max(key.len());
        self.max_value_len = self.max_value_len.max(operand.len());
        self.merges = self.merges.saturating_add(1);
        self.add_count(1);
    }

    /// Adds "delete every key in `[start, end)`" (RocksDB's `DeleteRange`): one operation,
    /// one sequence number, however many keys the range holds. A range with `start >= end`
    /// deletes nothing; writing it is an `InvalidArgument` error. Keys written later in the
    /// same batch (or after it) are not affected.
    ///
    /// ```
    /// use matrixkv::{BatchOp, WriteBatch};
    ///
    /// let mut batch = WriteBatch::new();
    /// batch.delete_range(b"a", b"m");
    /// assert_eq!(batch.iter().next(), Some(BatchOp::DeleteRange { start: b"a", end: b"m" }));
    /// ```
    pub fn delete_range(&mut self, start: impl AsRef<[u8]>, end: impl AsRef<[u8]>) {
        self.delete_range_in(0, start.as_ref(), end.as_ref());
    }

    pub(crate) fn delete_range_in(&mut self, keyspace: u32, start: &[u8], end: &[u8]) {
        self.push_kind(ValueKind::RangeDeletion, keyspace);
        coding::put_length_prefixed(&mut self.rep, start);
        coding::put_length_prefixed(&mut self.rep, end);
        self.max_key_len = self.max_key_len.max(start.len()).max(end.len());
        if start >= end {
            self.bad_ranges = self.bad_ranges.saturating_add(1);
        }
        self.add_count(1);
    }

    /// Adds "delete every key of `keyspace`": a range deletion from the empty key to the end of
    /// the keyspace, encoded with an empty end (which no user range has: `start < end`).
    /// Written when a keyspace is dropped.
    pub(crate) fn delete_keyspace(&mut self, keyspace: u32) {
        self.push_kind(ValueKind::RangeDeletion, keyspace);
        coding::put_length_prefixed(&mut self.rep, &[]);
        coding::put_length_prefixed(&mut self.rep, &[]);
        self.add_count(1);
    }

    /// Appends `op` (of another batch) with `value` in place of its value.
    pub(crate) fn push_op(&mut self, op: &RawOp<'_>, value: &[u8]) {
        match op.kind {
            ValueKind::Value => self.put_in(op.keyspace, op.key, value),
            ValueKind::Deletion => self.delete_in(op.keyspace, op.key),
            ValueKind::Merge => self.merge_in(op.keyspace, op.key, value),
            ValueKind::RangeDeletion if op.deletes_keyspace() => self.delete_keyspace(op.keyspace),
            ValueKind::RangeDeletion => self.delete_range_in(op.keyspace, op.key, op.value),
            ValueKind::BlobIndex => self.put_blob_index_in(op.keyspace, op.key, value),
        }
    }

    /// True if some operation is on a keyspace other than the default one.
    pub(crate) fn has_keyspace_ops(&self) -> bool {
        self.keyspace_ops > 0
    }

    /// True if the batch holds a range deletion whose start is not below its end.
    pub(crate) fn has_bad_range(&self) -> bool {
        self.bad_ranges > 0
    }

    /// True if the batch holds a merge operation.
    pub(crate) fn has_merge(&self) -> bool {
        self.merges > 0
    }

    /// Removes every operation (and resets the sequence number), keeping the allocation.
    pub fn clear(&mut self) {
        self.rep.clear();
        self.rep.resize(BATCH_HEADER_LEN, 0);
        self.count = 0;
        self.max_key_len = 0;
        self.max_value_len = 0;
        self.merges = 0;
        self.bad_ranges = 0;
        self.keyspace_ops = 0;
    }

    /// Number of operations in the batch.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Size of the encoded batch in bytes (header included): what a WAL record stores.
    pub fn size_bytes(&self) -> usize {
        self.rep.len()
    }

    /// The encoded batch (header and records), as written into a WAL record.
    pub(crate) fn data(&self) -> &[u8] {
        &self.rep
    }

    /// Sets the sequence number of the first operation; operation `i` gets `seq + i`.
    pub(crate) fn set_sequence(&mut self, seq: SeqNo) {
        if let Some(dst) = self.rep.get_mut(..COUNT_OFFSET) {
            dst.copy_from_slice(&seq.0.to_le_bytes());
        }
    }

    /// The sequence number of the first operation (zero until the write path sets it).
    pub(crate) fn sequence(&self) -> SeqNo {
        SeqNo(coding::get_u64(&self.rep, 0).unwrap_or(0))
    }

    /// The WAL record that says the values every earlier record points to are durable
    /// (`Options::separate_at_write`; docs/format/wal.md): a batch of no operation at sequence
    /// number 0, which no write produces (an empty write logs nothing, and sequence numbers
    /// start at 1).
    pub(crate) fn values_durable_marker() -> WriteBatch {
        WriteBatch::new()
    }

    /// True for [`WriteBatch::values_durable_marker`].
    pub(crate) fn is_values_durable_marker(&self) -> bool {
        self.is_empty() && self.sequence().0 == 0
    }

    /// Length of the longest key in the batch (0 for an empty batch).
    pub(crate) fn max_key_len(&self) -> usize {
        self.max_key_len
    }

    /// Length of the longest value in the batch (0 for an empty batch or only deletes).
    pub(crate) fn max_value_len(&self) -> usize {
        self.max_value_len
    }

    /// Appends every operation of `other` after the operations of `self`: the counts add up
    /// and the sequence number of `self` stays (group commit merges batches this way).
    pub(crate) fn append(&mut self, other: &WriteBatch) {
        self.rep
            .extend_from_slice(other.rep.get(BATCH_HEADER_LEN..).unwrap_or(&[]));
        self.max_key_len = self.max_key_len.max(other.max_key_len);
        self.max_value_len = self.max_value_len.max(other.max_value_len);
        self.merges = self.merges.saturating_add(other.merges);
        self.bad_ranges = self.bad_ranges.saturating_add(other.bad_ranges);
        self.keyspace_ops = self.keyspace_ops.saturating_add(other.keyspace_ops);
        self.add_count(other.count);
    }

    /// The operations in the order they were added.
    /// Where `part` (a key or value of an [`WriteBatch::ops`] item) starts in
    /// [`WriteBatch::data`], or `None` if it does not lie inside it. Compares addresses only.
    pub(crate) fn offset_of(&self, part: &[u8]) -> Option<usize> {
        let start = self.rep.as_ptr().addr();
        let at = part.as_ptr().addr().checked_sub(start)?;
        (at.checked_add(part.len())? <= self.rep.len()).then_some(at)
    }

    pub(crate) fn ops(&self) -> BatchIter<'_> {
        BatchIter {
            dec: Decoder::new(self.rep.get(BATCH_HEADER_LEN..).unwrap_or(&[])),
            left: self.count,
        }
    }

    /// The operations in the order they were added (and are applied), for consumers of
    /// batches such as replication (`Db::updates_since`).
    ///
    /// ```
    /// use matrixkv::{BatchOp, WriteBatch};
    ///
    /// let mut batch = WriteBatch::new();
    /// batch.put(b"k1", b"v1");
    /// batch.delete(b"k2");
    /// let ops: Vec<BatchOp<'_>> = batch.iter().collect();
    /// assert_eq!(ops[0], BatchOp::Put { key: b"k1", value: b"v1" });
    /// assert_eq!(ops[1], BatchOp::Delete { key: b"k2" });
    /// ```
    pub fn iter(&self) -> impl Iterator<Item = BatchOp<'_>> {
        self.iter_with_keyspace().map(|(_, op)| op)
    }

    /// The operations with the id of the keyspace each applies to (0 for the default
    /// keyspace; [`crate::Keyspace::id`]). A range deletion with an empty `start` and `end`
    /// deletes the whole keyspace (the keyspace was dropped).
    pub fn iter_with_keyspace(&self) -> impl Iterator<Item = (u32, BatchOp<'_>)> {
        self.ops()
            .filter_map(|op| public_op(op).map(|p| (op.keyspace, p)))
    }

    /// Rebuilds a batch from its encoding (a WAL record payload), validating the header, every
    /// record and the count. Never panics; allocates only a copy of `bytes`.
    pub(crate) fn decode(bytes: &[u8]) -> Result<WriteBatch, CorruptionReason> {
        let summary = validate(bytes)?;
        Ok(WriteBatch {
            rep: bytes.to_vec(),
            count: summary.count,
            max_key_len: summary.max_key_len,
            max_value_len: summary.max_value_len,
            merges: summary.merges,
            bad_ranges: summary.bad_ranges,
            keyspace_ops: summary.keyspace_ops,
        })
    }

    fn add_count(&mut self, n: u32) {
        // A batch would need more than 12 GiB of encoding to reach 2^32 operations; the write
        // path rejects batches far smaller than that, so saturating never loses a real count.
        self.count = self.count.saturating_add(n);
        if let Some(dst) = self.rep.get_mut(COUNT_OFFSET..BATCH_HEADER_LEN) {
            dst.copy_from_slice(&self.count.to_le_bytes());
        }
    }
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch::new()
    }
}

impl fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WriteBatch")
            .field("sequence", &self.sequence().0)
            .field("ops", &self.count)
            .field("size_bytes", &self.rep.len())
            .finish()
    }
}

/// The public form of an operation (`None` for a kind never in a batch).
fn public_op(op: RawOp<'_>) -> Option<BatchOp<'_>> {
    match op.kind {
        ValueKind::Value => Some(BatchOp::Put {
            key: op.key,
            value: op.value,
        }),
        ValueKind::Deletion => Some(BatchOp::Delete { key: op.key }),
        ValueKind::Merge => Some(BatchOp::Merge {
            key: op.key,
            operand: op.value,
        }),
        ValueKind::RangeDeletion => Some(BatchOp::DeleteRange {
            start: op.key,
            end: op.value,
        }),
        // Only in a logged batch (`Options::separate_at_write`), whose pointers are resolved
        // before a user sees it (`updates_since`).
        ValueKind::BlobIndex => {
            debug_assert!(false, "a blob index in a user's write batch");
            None
        }
    }
}

/// What [`validate`] learned about a well-formed batch encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchSummary {
    /// Sequence number of the first operation.
    pub(crate) sequence: SeqNo,
    /// Number of operations.
    pub(crate) count: u32,
    /// Longest key.
    pub(crate) max_key_len: usize,
    /// Longest value.
    pub(crate) max_value_len: usize,
    /// Number of merge operations.
    pub(crate) merges: u32,
    /// Number of range deletions with `start >= end`.
    pub(crate) bad_ranges: u32,
    /// Number of operations on a keyspace other than the default one.
    pub(crate) keyspace_ops: u32,
}

/// Checks that `bytes` is a well-formed batch encoding without copying it: a 12-byte header,
/// exactly `count` well-formed records and nothing after them, and sequence numbers that stay
/// within [`SeqNo::MAX`].
pub(crate) fn validate(bytes: &[u8]) -> Result<BatchSummary, CorruptionReason> {
    let mut dec = Decoder::new(bytes);
    let sequence = SeqNo(dec.u64()?);
    let count = dec.u32()?;
    // The last operation gets `sequence + count - 1`, which must be a valid sequence number.
    let last = sequence.0.checked_add(u64::from(count.saturating_sub(1)));
    if sequence > SeqNo::MAX || last.is_none_or(|l| l > SeqNo::MAX.0) {
        return Err(CorruptionReason::Invalid(
            "batch sequence number out of range",
        ));
    }
    let mut summary = BatchSummary {
        sequence,
        count,
        max_key_len: 0,
        max_value_len: 0,
        merges: 0,
        bad_ranges: 0,
        keyspace_ops: 0,
    };
    let mut found: u32 = 0;
    while !dec.is_empty() {
        if found == count {
            return Err(CorruptionReason::Invalid(
                "batch holds more records than its count",
            ));
        }
        let op = decode_op(&mut dec)?;
        summary.max_key_len = summary.max_key_len.max(op.key.len());
        if op.kind == ValueKind::RangeDeletion {
            // The end of the range is a key, not a value.
            summary.max_key_len = summary.max_key_len.max(op.value.len());
            // An empty range in a keyspace other than the default one is the deletion of the
            // whole keyspace (`WriteBatch::delete_keyspace`).
            if op.key >= op.value && !op.deletes_keyspace() {
                summary.bad_ranges += 1;
            }
        } else {
            summary.max_value_len = summary.max_value_len.max(op.value.len());
        }
        if op.kind == ValueKind::Merge {
            summary.merges += 1;
        }
        if op.keyspace != 0 {
            summary.keyspace_ops += 1;
        }
        found += 1;
    }
    if found != count {
        return Err(CorruptionReason::Truncated);
    }
    Ok(summary)
}

/// Decodes one record: kind (with, when flagged, the keyspace id), length-prefixed key and,
/// for a put, a merge or a range deletion, the length-prefixed value (or range end).
fn decode_op<'a>(dec: &mut Decoder<'a>) -> Result<RawOp<'a>, CorruptionReason> {
    let byte = dec.u8()?;
    let keyspace = if byte & KEYSPACE_FLAG != 0 {
        dec.varint32()?
    } else {
        0
    };
    let kind = ValueKind::from_batch_u8(byte & !KEYSPACE_FLAG)?;
    let key = dec.length_prefixed()?;
    let value = match kind {
        // A range deletion's "value" is the end of its range.
        // A blob index's value is its pointer (logged with `Options::separate_at_write`).
        ValueKind::Value | ValueKind::Merge | ValueKind::RangeDeletion | ValueKind::BlobIndex => {
            dec.length_prefixed()?
        }
        ValueKind::Deletion => &[],
    };
    Ok(RawOp {
        keyspace,
        kind,
        key,
        value,
    })
}

/// Iterator over the operations of a [`WriteBatch`], from [`WriteBatch::ops`].
#[derive(Debug, Clone)]
pub(crate) struct BatchIter<'a> {
    dec: Decoder<'a>,
    left: u32,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = RawOp<'a>;

    fn next(&mut self) -> Option<RawOp<'a>> {
        if self.left == 0 {
            return None;
        }
        // A batch built through the API or returned by `decode` always decodes: both keep the
        // encoding well-formed. Stop rather than panic if that invariant were ever broken.
        match decode_op(&mut self.dec) {
            Ok(op) => {
                self.left -= 1;
                Some(op)
            }
            Err(reason) => {
                debug_assert!(false, "WriteBatch encoding is malformed: {reason}");
                self.left = 0;
                None
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for BatchIter<'_> {}

#[cfg(test)]
mod tests;
