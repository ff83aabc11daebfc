//! NoveLSM's persistent memtable behind the [`super::MemTable`] interface: the versions live in
//! a [`PSkipList`] on the fast tier instead of the DRAM skiplist (decision 0023).
//!
//! The memtable reads it through this module: point lookups and iterators skip the range
//! deletions the list also stores (kind [`ValueKind::RangeDeletion`] under the range's start
//! key, the end as the value), which the memtable keeps as its range tombstones, rebuilt from
//! the list when a region is reopened. Writes go through [`PersistentVersions::insert`] and
//! become visible, and durable, when [`PersistentVersions::commit`] publishes the batch's last
//! sequence number.
//!
//! Who calls it: `MemTable` only (`memtable/mod.rs`).

use std::sync::Arc;

use super::pskiplist::{PSkipList, PSkipListIter};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::range_del::RangeTombstone;

/// Bytes a node and a version record may take besides the key and the value: the node's
/// fixed part and tallest tower, the record's header, and padding of both to 8 bytes
/// (docs/format/pskiplist.md).
const OP_OVERHEAD: u64 = 24 + 8 * super::pskiplist::MAX_HEIGHT as u64 + 7 + 24 + 7;

/// The most bytes the operations of `batch` can take in a persistent memtable (each key and a
/// range deletion's end with a keyspace prefix of at most `prefix_len` bytes). The write path
/// sizes its groups with it, so an insert never finds the region full halfway through a
/// batch.
pub(crate) fn batch_cost(batch: &crate::batch::WriteBatch, prefix_len: usize) -> u64 {
    batch
        .ops()
        .map(|op| (op.key.len() + op.value.len() + 2 * prefix_len) as u64 + OP_OVERHEAD)
        .sum()
}

/// The versions of a persistent memtable.
#[derive(Debug)]
pub(crate) struct PersistentVersions {
    list: Arc<PSkipList>,
}

impl PersistentVersions {
    /// The memtable's versions in `list`, and the range tombstones `list` holds (a reopened
    /// region: committed ones only).
    pub(crate) fn open(list: Arc<PSkipList>) -> Result<(PersistentVersions, Vec<RangeTombstone>)> {
        let mut tombstones = Vec::new();
        let mut it = list.iter();
        it.seek_to_first()?;
        while it.valid() {
            if it.kind() == ValueKind::RangeDeletion {
                tombstones.push(RangeTombstone {
                    start: it.user_key().to_vec(),
                    end: it.value().to_vec(),
                    seq: it.seq(),
                });
            }
            it.next()?;
        }
        tombstones.sort_by_key(|t| t.seq);
        Ok((PersistentVersions { list }, tombstones))
    }

    /// The list.
    pub(crate) fn list(&self) -> &Arc<PSkipList> {
        &self.list
    }

    /// Inserts one version (persisted, not yet visible: see [`PersistentVersions::commit`]).
    pub(crate) fn insert(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        self.list.insert(user_key, seq, kind, value)
    }

    /// Makes every version up to `seq` visible and durable (the commit point of a batch).
    pub(crate) fn commit(&self, seq: SeqNo) -> Result<()> {
        self.list.commit(seq)
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, range deletions left
    /// out, until `stop` says so of one (it is included).
    fn walk(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
        mut stop: impl FnMut(ValueKind, SeqNo, &[u8]) -> bool,
    ) -> Result<()> {
        let mut it = self.iter();
        it.seek(&key::seek_key(user_key, snapshot))?;
        while it.valid() && it.user_key() == user_key {
            if stop(it.kind(), it.seq(), it.value()) {
                break;
            }
            it.next()?;
        }
        Ok(())
    }

    /// The newest version of `user_key` visible at `snapshot`.
    pub(crate) fn newest(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        let mut found = None;
        self.walk(user_key, snapshot, |kind, seq, value| {
            found = Some((kind, seq, value.to_vec()));
            true
        })?;
        Ok(found)
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, up to and including
    /// the first that is not a merge operand.
    pub(crate) fn versions(&self, user_key: &[u8], snapshot: SeqNo) -> Result<key::Versions> {
        let mut out = Vec::new();
        self.walk(user_key, snapshot, |kind, _, value| {
            out.push((kind, value.to_vec()));
            kind != ValueKind::Merge
        })?;
        Ok(out)
    }

    /// Every visible version in internal-key order, range deletions left out, as
    /// `(user key, seq, kind, value)`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], SeqNo, ValueKind, &[u8])) -> Result<()> {
        let mut it = self.iter();
        it.seek_to_first()?;
        while it.valid() {
            f(it.user_key(), it.seq(), it.kind(), it.value());
            it.next()?;
        }
        Ok(())
    }

    /// Bytes of the region in use.
    pub(crate) fn used_bytes(&self) -> usize {
        usize::try_from(self.list.used_bytes()).unwrap_or(usize::MAX)
    }

    /// Visible versions (range deletions included).
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.list.entries()).unwrap_or(usize::MAX)
    }

    /// An iterator over the visible versions, range deletions left out.
    pub(crate) fn iter(&self) -> PSkipListIter {
        self.list.iter().points_only()
    }
}
