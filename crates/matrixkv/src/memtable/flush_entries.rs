//! Flush-entry collection: the entries a flush writes from an immutable memtable, with the
//! versions no snapshot needs dropped and merge operands folded ([`MemTable::flush_entries`]).

use std::sync::atomic::Ordering as AtomicOrdering;

use super::{MemEntry, MemKey, MemTable, kind_of_tag};
use crate::error::Result;
use crate::key::{self, SeqNo, ValueKind};

/// What [`MemTable::flush_entries`] produced.
pub(crate) struct FlushEntries {
    /// The entries to write, in internal-key order.
    pub entries: Vec<MemEntry>,
    /// Versions left out (shadowed, or folded into one).
    pub dropped: u64,
    /// Merges the operator could not fold (kept as they were).
    pub merge_failures: u64,
}

/// Appends to `out` what a flush keeps of `versions` (one user key, newest first, all at or
/// below the smallest snapshot): the newest alone unless it is a merge operand, which is
/// folded as [`MemTable::flush_entries`] describes. Returns how many entries it appended.
fn fold_group(
    user: &[u8],
    versions: &[MemEntry],
    merge: Option<&dyn crate::merge::MergeOperators>,
    out: &mut FlushEntries,
) -> usize {
    let kind_of = |e: &MemEntry| key::split_internal(e.key()).map(|(_, tag)| kind_of_tag(tag));
    let Some(newest) = versions.first() else {
        return 0;
    };
    if kind_of(newest) != Some(ValueKind::Merge) {
        out.entries.push(MemEntry(newest.0.clone()));
        return 1;
    }
    let operands_end = versions
        .iter()
        .take_while(|e| kind_of(e) == Some(ValueKind::Merge))
        .count();
    let base = versions.get(operands_end);
    let keep_all = |out: &mut FlushEntries| {
        let n = operands_end + usize::from(base.is_some());
        out.entries
            .extend(versions.iter().take(n).map(|e| MemEntry(e.0.clone())));
        n
    };
    let (Some(op), strip) = merge.map_or((None, 0), |m| m.for_key(user)) else {
        return keep_all(out);
    };
    // The operator sees the key without its keyspace prefix.
    let user_key = user.get(strip..).unwrap_or(user);
    let operands: Vec<&[u8]> = versions
        .iter()
        .take(operands_end)
        .rev()
        .map(MemEntry::value)
        .collect();
    let seq = key::split_internal(newest.key()).map_or(SeqNo::ZERO, |(_, tag)| SeqNo(tag >> 8));
    let folded = match base {
        // A value separated at write time (`Options::separate_at_write`): the operands stay
        // for compaction, which reads the value to fold them.
        Some(b) if kind_of(b) == Some(ValueKind::BlobIndex) => None,
        Some(b) => {
            let existing = (kind_of(b) == Some(ValueKind::Value)).then(|| b.value());
            match crate::merge::full_merge(Some(op), user_key, existing, &operands) {
                Ok(v) => Some((ValueKind::Value, v)),
                Err(e) => {
                    log::warn!("matrixkv: a flush keeps the operands of a failed merge: {e}");
                    out.merge_failures += 1;
                    None
                }
            }
        }
        None if operands.len() >= 2 => {
            crate::merge::partial_merge(op, user_key, &operands).map(|v| (ValueKind::Merge, v))
        }
        None => None,
    };
    match folded {
        Some((kind, v)) => {
            out.entries
                .push(MemEntry(MemKey::entry(user, seq, kind, &v)));
            1
        }
        None => keep_all(out),
    }
}

impl MemTable {
    /// Every entry in internal-key order, sharing the bytes with the memtable (for a flush,
    /// which passes over an immutable memtable twice without copying its values); a
    /// persistent memtable's entries are copied out of its region.
    pub(crate) fn entries(&self) -> Result<Vec<MemEntry>> {
        if let Some(p) = &self.persistent {
            let mut out = Vec::with_capacity(p.len());
            p.for_each(|user, seq, kind, value| {
                out.push(MemEntry(MemKey::entry(user, seq, kind, value)));
            })?;
            return Ok(out);
        }
        Ok(self.map.iter().map(|e| MemEntry(e.key().clone())).collect())
    }

    /// The entries a flush writes, in order: every version above `smallest_snapshot` as it
    /// is; at or below it only what the newest such version needs, as a compaction keeps it
    /// (the versions it shadows dropped; a newest merge operand folded with the older operands
    /// and the base value or tombstone found in this memtable, or the operands combined by
    /// `partial_merge` when none is, or kept when the operator cannot or fails).
    pub(crate) fn flush_entries(
        &self,
        smallest_snapshot: u64,
        merge: Option<&dyn crate::merge::MergeOperators>,
    ) -> Result<FlushEntries> {
        // Operands are not folded across a range tombstone of the same memtable (it may lie
        // between an operand and its base): with tombstones here they are kept as they are.
        let merge = if self.has_range_dels.load(AtomicOrdering::Acquire) {
            None
        } else {
            merge
        };
        let all = self.entries()?;
        let mut out = FlushEntries {
            entries: Vec::with_capacity(all.len()),
            dropped: 0,
            merge_failures: 0,
        };
        let mut i = 0;
        while let Some(first) = all.get(i) {
            let Some((user, _)) = key::split_internal(first.key()) else {
                out.entries.push(MemEntry(first.0.clone()));
                i += 1;
                continue;
            };
            // The versions of `user`: all[i..end], newest first.
            let end = i + all
                .get(i..)
                .unwrap_or_default()
                .iter()
                .take_while(|e| key::split_internal(e.key()).is_some_and(|(u, _)| u == user))
                .count();
            let group = all.get(i..end).unwrap_or_default();
            let parsed = |e: &MemEntry| {
                key::split_internal(e.key()).map(|(_, tag)| (SeqNo(tag >> 8), kind_of_tag(tag)))
            };
            // Versions above the smallest snapshot stay; `at` is the newest one below it.
            let at = group
                .iter()
                .position(|e| parsed(e).is_some_and(|(s, _)| s.0 <= smallest_snapshot))
                .unwrap_or(group.len());
            out.entries
                .extend(group.iter().take(at).map(|e| MemEntry(e.0.clone())));
            let below = group.get(at..).unwrap_or_default();
            let kept = fold_group(user, below, merge, &mut out);
            out.dropped += (below.len() - kept) as u64;
            i = end;
        }
        Ok(out)
    }
}
