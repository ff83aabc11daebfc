//! Persistent memtables behind the [`super::MemTable`] interface: the versions live on the fast
//! tier instead of the DRAM skiplist, in a [`PSkipList`] (NoveLSM, SLM-DB; decision 0023) or in
//! LightKV's write buffer, a log indexed by an RH-tree ([`Pwb`], decision 0027).
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
use super::pwb::{Pwb, PwbIter};
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
pub(crate) enum PersistentVersions {
    /// A persistent skiplist.
    List(Arc<PSkipList>),
    /// A LightKV write buffer.
    Buffer(Arc<Pwb>),
}

/// A cursor over a persistent memtable's versions.
pub(crate) enum PersistentIter {
    /// Over a persistent skiplist.
    List(PSkipListIter),
    /// Over a write buffer's sorted run.
    Buffer(PwbIter),
}

/// `$body` with `$it` bound to the cursor of either kind.
macro_rules! either {
    ($self:expr, $it:ident => $body:expr) => {
        match $self {
            PersistentIter::List($it) => $body,
            PersistentIter::Buffer($it) => $body,
        }
    };
}

impl PersistentIter {
    pub(crate) fn valid(&self) -> bool {
        either!(self, it => it.valid())
    }
    pub(crate) fn seek_to_first(&mut self) -> Result<()> {
        either!(self, it => it.seek_to_first())
    }
    pub(crate) fn seek_to_last(&mut self) -> Result<()> {
        either!(self, it => it.seek_to_last())
    }
    pub(crate) fn seek(&mut self, target: &[u8]) -> Result<()> {
        either!(self, it => it.seek(target))
    }
    pub(crate) fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        either!(self, it => it.seek_for_prev(target))
    }
    pub(crate) fn next(&mut self) -> Result<()> {
        either!(self, it => it.next())
    }
    pub(crate) fn prev(&mut self) -> Result<()> {
        either!(self, it => it.prev())
    }
    pub(crate) fn key(&self) -> &[u8] {
        either!(self, it => it.key())
    }
    pub(crate) fn value(&self) -> &[u8] {
        either!(self, it => it.value())
    }
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
        Ok((PersistentVersions::List(list), tombstones))
    }

    /// Whether a batch costing `cost` (see [`batch_cost`]) fits.
    pub(crate) fn has_room(&self, cost: u64) -> bool {
        match self {
            PersistentVersions::List(l) => l.used_bytes().saturating_add(cost) <= l.capacity(),
            PersistentVersions::Buffer(b) => b.has_room(cost),
        }
    }

    /// Inserts one version (persisted, not yet visible: see [`PersistentVersions::commit`]).
    pub(crate) fn insert(
        &self,
        user_key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        match self {
            PersistentVersions::List(l) => l.insert(user_key, seq, kind, value),
            PersistentVersions::Buffer(b) => b.insert(user_key, seq, kind, value),
        }
    }

    /// Makes every version up to `seq` visible and durable (the commit point of a batch).
    pub(crate) fn commit(&self, seq: SeqNo) -> Result<()> {
        match self {
            PersistentVersions::List(l) => l.commit(seq),
            PersistentVersions::Buffer(b) => b.commit(seq),
        }
    }

    /// The committed sequence number (0: nothing committed).
    pub(crate) fn committed(&self) -> SeqNo {
        match self {
            PersistentVersions::List(l) => l.committed(),
            PersistentVersions::Buffer(b) => b.committed(),
        }
    }

    /// The smallest committed sequence number, `None` if nothing is committed.
    pub(crate) fn min_seq(&self) -> Option<SeqNo> {
        match self {
            PersistentVersions::List(l) => l.min_seq(),
            PersistentVersions::Buffer(b) => b.min_seq(),
        }
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, range deletions left
    /// out, until `stop` says so of one (it is included).
    fn walk(
        list: &Arc<PSkipList>,
        user_key: &[u8],
        snapshot: SeqNo,
        mut stop: impl FnMut(ValueKind, SeqNo, &[u8]) -> bool,
    ) -> Result<()> {
        let mut it = list.iter().points_only();
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
        let list = match self {
            PersistentVersions::List(l) => l,
            PersistentVersions::Buffer(b) => return b.newest(user_key, snapshot),
        };
        let mut found = None;
        Self::walk(list, user_key, snapshot, |kind, seq, value| {
            found = Some((kind, seq, value.to_vec()));
            true
        })?;
        Ok(found)
    }

    /// The versions of `user_key` visible at `snapshot`, newest first, up to and including
    /// the first that is not a merge operand.
    pub(crate) fn versions(&self, user_key: &[u8], snapshot: SeqNo) -> Result<key::Versions> {
        let list = match self {
            PersistentVersions::List(l) => l,
            PersistentVersions::Buffer(b) => return b.versions(user_key, snapshot),
        };
        let mut out = Vec::new();
        Self::walk(list, user_key, snapshot, |kind, _, value| {
            out.push((kind, value.to_vec()));
            kind != ValueKind::Merge
        })?;
        Ok(out)
    }

    /// Every visible version in internal-key order, range deletions left out, as
    /// `(user key, seq, kind, value)`.
    pub(crate) fn for_each(&self, mut f: impl FnMut(&[u8], SeqNo, ValueKind, &[u8])) -> Result<()> {
        let list = match self {
            PersistentVersions::List(l) => l,
            PersistentVersions::Buffer(b) => return b.for_each(f),
        };
        let mut it = list.iter().points_only();
        it.seek_to_first()?;
        while it.valid() {
            f(it.user_key(), it.seq(), it.kind(), it.value());
            it.next()?;
        }
        Ok(())
    }

    /// Bytes of the region in use.
    pub(crate) fn used_bytes(&self) -> usize {
        let used = match self {
            PersistentVersions::List(l) => l.used_bytes(),
            PersistentVersions::Buffer(b) => b.used_bytes(),
        };
        usize::try_from(used).unwrap_or(usize::MAX)
    }

    /// Visible versions (range deletions included).
    pub(crate) fn len(&self) -> usize {
        let n = match self {
            PersistentVersions::List(l) => l.entries(),
            PersistentVersions::Buffer(b) => b.entries(),
        };
        usize::try_from(n).unwrap_or(usize::MAX)
    }

    /// An iterator over the visible versions, range deletions left out.
    pub(crate) fn iter(&self) -> PersistentIter {
        match self {
            PersistentVersions::List(l) => PersistentIter::List(l.iter().points_only()),
            PersistentVersions::Buffer(b) => PersistentIter::Buffer(b.iter()),
        }
    }
}
