//! [`PSkipListIter`] (made by [`PSkipList::iter`]): a cursor over every version of a
//! [`PSkipList`] in internal-key order, implementing [`InternalIterator`]; versions above the
//! committed sequence number are skipped.

use std::sync::Arc;

use crate::error::{CorruptionReason, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};

use super::PSkipList;
use super::format::{NODE_NEXT, NODE_VERSIONS, VERSION_PREV};
use super::read::{Chain, Node, Version};

impl PSkipList {
    /// An iterator over every version in internal-key order (user key ascending, then newest
    /// version first), unpositioned. It implements [`InternalIterator`]; its internal keys
    /// are encoded by [`crate::key`].
    pub fn iter(self: &Arc<Self>) -> PSkipListIter {
        PSkipListIter {
            limit: self.committed(),
            points_only: false,
            list: Arc::clone(self),
            node: None,
            chain: Vec::new(),
            cur: None,
            ikey: Vec::new(),
        }
    }
}

/// A cursor over the versions of a [`PSkipList`] in internal-key order (user key ascending,
/// newest version first). Each version it stops at was read whole and its checksum verified.
///
/// It owns an `Arc` of the list, so it carries no lifetime. It is `Send` and used by one
/// thread. Inserts made while it moves are seen or not depending on timing: when it reaches a
/// key it takes the key's chain as published at that moment.
pub struct PSkipListIter {
    list: Arc<PSkipList>,
    /// The committed sequence number at the last seek: versions above it are skipped (each
    /// seek sees the batches committed by then; moving on from there does not).
    limit: SeqNo,
    /// Range deletions are skipped too (see [`PSkipListIter::points_only`]).
    points_only: bool,
    /// The node of the current version.
    node: Option<Node>,
    /// Offsets of the current node's versions from its newest one to the current one.
    chain: Vec<u64>,
    /// The current version (`None`: not valid).
    cur: Option<Version>,
    /// The current internal key.
    ikey: Vec<u8>,
}

impl PSkipListIter {
    /// The iterator over point versions only: range deletions (which a persistent memtable
    /// stores as versions of the range's start key, and serves as range tombstones) are
    /// skipped as uncommitted versions are.
    pub fn points_only(mut self) -> PSkipListIter {
        self.points_only = true;
        self
    }

    /// The current user key. Requires `valid()`.
    pub fn user_key(&self) -> &[u8] {
        self.node.as_ref().map_or(&[], |n| n.key.as_slice())
    }

    /// The current version's sequence number. Requires `valid()`.
    pub fn seq(&self) -> SeqNo {
        self.cur.as_ref().map_or(SeqNo::ZERO, |v| v.seq)
    }

    /// The current version's kind. Requires `valid()`.
    pub fn kind(&self) -> ValueKind {
        self.cur.as_ref().map_or(ValueKind::Deletion, |v| v.kind)
    }

    fn clear(&mut self) {
        self.node = None;
        self.chain.clear();
        self.cur = None;
        self.ikey.clear();
    }

    /// Runs a movement: on error the iterator is invalid.
    fn moving(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.clear();
        }
        r
    }

    fn set(&mut self, node: Node, chain: Vec<u64>, v: Version) {
        self.ikey.clear();
        key::append_internal_key(&mut self.ikey, &node.key, v.seq, v.kind);
        self.node = Some(node);
        self.chain = chain;
        self.cur = Some(v);
    }

    /// Positions at the first version of `node` (newest first) for which `stop` is true;
    /// `false` if there is none.
    fn enter_where(&mut self, node: Node, stop: impl Fn(&Version) -> bool) -> Result<bool> {
        let list = Arc::clone(&self.list);
        let bound = list.capacity();
        let mut c = list.chain(&node)?;
        let mut chain = Vec::new();
        while let Some(v) = list.chain_next(&mut c, bound)? {
            chain.push(v.off);
            if stop(&v) {
                self.set(node, chain, v);
                return Ok(true);
            }
        }
        if chain.is_empty() {
            return Err(list.corrupt(
                node.off + NODE_VERSIONS,
                CorruptionReason::Invalid("a node without a version"),
            ));
        }
        Ok(false)
    }

    /// Positions at the newest version of `node` (none: invalid).
    fn enter_newest(&mut self, node: Option<Node>) -> Result<()> {
        self.clear();
        if let Some(node) = node {
            self.enter_where(node, |_| true)?;
        }
        Ok(())
    }

    /// Positions at the oldest version of `node` whose tag is at least `min_tag` (none:
    /// invalid, and `false`).
    fn enter_last_from(&mut self, node: Node, min_tag: u64) -> Result<bool> {
        self.clear();
        let list = Arc::clone(&self.list);
        let bound = list.capacity();
        let mut c = list.chain(&node)?;
        let mut chain = Vec::new();
        let mut best = None;
        while let Some(v) = list.chain_next(&mut c, bound)? {
            if v.tag() < min_tag {
                break;
            }
            chain.push(v.off);
            best = Some(v);
        }
        if c.last.is_none() {
            return Err(list.corrupt(
                node.off + NODE_VERSIONS,
                CorruptionReason::Invalid("a node without a version"),
            ));
        }
        match best {
            Some(v) => {
                self.set(node, chain, v);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Positions at the oldest version of the last node whose key is below `user_key`
    /// (`None`: of the last node); invalid if there is none.
    fn last_before(&mut self, user_key: Option<&[u8]>) -> Result<()> {
        self.clear();
        if let Some(node) = self.list.seek_node(user_key)?.before {
            self.enter_last_from(node, 0)?;
        }
        Ok(())
    }
}

/// The raw movements, which stop at every version, committed or not.
impl PSkipListIter {
    fn raw_seek_to_first(&mut self) -> Result<()> {
        self.moving(|it| {
            let first = it.list.seek_node(Some(&[]))?.after;
            it.enter_newest(first)
        })
    }

    fn raw_seek_to_last(&mut self) -> Result<()> {
        self.moving(|it| it.last_before(None))
    }

    fn raw_seek(&mut self, target: &[u8]) -> Result<()> {
        self.moving(|it| {
            // A target too short for a tag sorts as its bytes with tag 0 (`compare_internal`).
            let (user_key, tag) = key::split_internal(target).unwrap_or((target, 0));
            it.clear();
            let Some(node) = it.list.seek_node(Some(user_key))?.after else {
                return Ok(());
            };
            if node.key != user_key {
                return it.enter_newest(Some(node));
            }
            let next_off = node.off + NODE_NEXT;
            if !it.enter_where(node, |v| v.tag() <= tag)? {
                // Every version of the key sorts before the target: the next key's newest.
                let next = match it.list.word(next_off)? {
                    0 => None,
                    off => {
                        let n = it.list.load_node(off, next_off, it.list.capacity())?;
                        if n.key.as_slice() <= user_key {
                            return Err(it
                                .list
                                .corrupt(off, CorruptionReason::Invalid("keys out of order")));
                        }
                        Some(n)
                    }
                };
                it.enter_newest(next)?;
            }
            Ok(())
        })
    }

    fn raw_seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.moving(|it| {
            let (user_key, tag) = key::split_internal(target).unwrap_or((target, 0));
            let pos = it.list.seek_node(Some(user_key))?;
            if let Some(node) = pos.after.filter(|n| n.key == user_key)
                && it.enter_last_from(node, tag)?
            {
                return Ok(());
            }
            it.clear();
            if let Some(node) = pos.before {
                it.enter_last_from(node, 0)?;
            }
            Ok(())
        })
    }

    fn raw_next(&mut self) -> Result<()> {
        self.moving(|it| {
            let (Some(node), Some(cur)) = (it.node.take(), it.cur.take()) else {
                return Ok(());
            };
            let list = Arc::clone(&it.list);
            let bound = list.capacity();
            let mut c = Chain {
                node_off: node.off,
                next: cur.prev,
                from: cur.off + VERSION_PREV,
                last: Some((cur.off, cur.seq)),
            };
            if let Some(v) = list.chain_next(&mut c, bound)? {
                let mut chain = std::mem::take(&mut it.chain);
                chain.push(v.off);
                it.set(node, chain, v);
                return Ok(());
            }
            let link = node.off + NODE_NEXT;
            let next = match list.word(link)? {
                0 => None,
                off => {
                    let n = list.load_node(off, link, bound)?;
                    if n.key <= node.key {
                        return Err(
                            list.corrupt(off, CorruptionReason::Invalid("keys out of order"))
                        );
                    }
                    Some(n)
                }
            };
            it.enter_newest(next)
        })
    }

    fn raw_prev(&mut self) -> Result<()> {
        self.moving(|it| {
            let Some(node) = it.node.take() else {
                return Ok(());
            };
            it.cur = None;
            let mut chain = std::mem::take(&mut it.chain);
            chain.pop();
            if let Some(&newer) = chain.last() {
                let list = Arc::clone(&it.list);
                let v = list.load_version(node.off, newer, newer, list.capacity())?;
                it.set(node, chain, v);
                return Ok(());
            }
            it.last_before(Some(&node.key))
        })
    }

    /// Whether the current version is skipped: above the committed sequence number, or a
    /// range deletion of an iterator over point versions only.
    fn skips_current(&self) -> bool {
        self.cur.as_ref().is_some_and(|v| {
            v.seq > self.limit || (self.points_only && v.kind == ValueKind::RangeDeletion)
        })
    }

    /// Moves forward past skipped versions.
    fn skip_hidden_forward(&mut self) -> Result<()> {
        while self.skips_current() {
            self.raw_next()?;
        }
        Ok(())
    }

    /// Moves backward past skipped versions.
    fn skip_hidden_backward(&mut self) -> Result<()> {
        while self.skips_current() {
            self.raw_prev()?;
        }
        Ok(())
    }
}

impl InternalIterator for PSkipListIter {
    fn valid(&self) -> bool {
        self.cur.is_some()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek_to_first()?;
        self.skip_hidden_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek_to_last()?;
        self.skip_hidden_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek(target)?;
        self.skip_hidden_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek_for_prev(target)?;
        self.skip_hidden_backward()
    }

    fn next(&mut self) -> Result<()> {
        self.raw_next()?;
        self.skip_hidden_forward()
    }

    fn prev(&mut self) -> Result<()> {
        self.raw_prev()?;
        self.skip_hidden_backward()
    }

    fn key(&self) -> &[u8] {
        &self.ikey
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |v| v.value.as_slice())
    }
}
