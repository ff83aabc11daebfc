//! The read side of the persistent skiplist: loading verified nodes and version records,
//! walking a node's version chain, the search from the top level down, and the walk of the
//! whole list that `open` checks.

use crate::sync::atomic::Ordering;
use std::collections::HashMap;

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::key::{self, SeqNo, ValueKind};

use super::PSkipList;
use super::format::{
    DATA_START, MAX_HEIGHT, NODE_FIXED_LEN, NODE_NEXT, NODE_VERSIONS, OFF_HEAD, VERSION_HEADER_LEN,
    VERSION_PREV, at, le_u32, le_u64, node_len, seed, version_len,
};

/// A node read from the region, its checksum verified.
#[derive(Debug, Clone)]
pub(super) struct Node {
    pub(super) off: u64,
    height: usize,
    pub(super) key: Vec<u8>,
}

/// A version record read from the region, its checksum verified.
#[derive(Debug, Clone)]
pub(super) struct Version {
    pub(super) off: u64,
    pub(super) seq: SeqNo,
    pub(super) kind: ValueKind,
    pub(super) prev: u64,
    pub(super) value: Vec<u8>,
}

impl Version {
    pub(super) fn tag(&self) -> u64 {
        key::pack_tag(self.seq, self.kind)
    }
}

/// A walk down the version chain of one node, newest version first.
pub(super) struct Chain {
    pub(super) node_off: u64,
    /// The next record to read (0: the chain ends).
    pub(super) next: u64,
    /// The word that holds `next` (for error messages).
    pub(super) from: u64,
    /// The record read last: offset and sequence number (the next one must be older on both).
    pub(super) last: Option<(u64, SeqNo)>,
}

/// The link words and successors a search passed at each level, and the nodes around the key.
pub(super) struct Position {
    /// The last node whose key is below the search key (`None`: the head).
    pub(super) before: Option<Node>,
    /// The first node whose key is at least the search key.
    pub(super) after: Option<Node>,
    /// At each level, the word that links to `succs[level]` (in `before` or above it).
    pub(super) links: [u64; MAX_HEIGHT],
    /// At each level, the first node at or after the search key (0: none).
    pub(super) succs: [u64; MAX_HEIGHT],
}

impl PSkipList {
    /// The checks of [`PSkipList::open`] on everything below `alloc_end`; returns the number
    /// of keys, of versions and the largest sequence number.
    pub(super) fn verify(&self, alloc_end: u64) -> Result<[u64; 3]> {
        let (mut keys, mut entries, mut max_seq) = (0u64, 0u64, 0u64);
        let mut min_seq = u64::MAX;
        // Versions above the committed sequence number (an uncommitted batch) are checked
        // but not counted; nor are keys that have only such versions.
        let committed = self.committed().0;
        let mut visible_keys = 0u64;
        // Level-0 position and height of every node, to check the higher levels.
        let mut nodes: HashMap<u64, (u64, usize)> = HashMap::new();
        let mut last: Option<Node> = None;
        let mut link = OFF_HEAD;
        loop {
            let off = self.word(link)?;
            if off == 0 {
                break;
            }
            let node = self.load_node(off, link, alloc_end)?;
            if last.as_ref().is_some_and(|l| l.key >= node.key) {
                return Err(self.corrupt(off, CorruptionReason::Invalid("keys out of order")));
            }
            let mut chain = self.chain(&node)?;
            let mut visible = false;
            while let Some(v) = self.chain_next(&mut chain, alloc_end)? {
                if v.seq.0 <= committed {
                    entries += 1;
                    max_seq = max_seq.max(v.seq.0);
                    min_seq = min_seq.min(v.seq.0);
                    visible = true;
                }
            }
            if chain.last.is_none() {
                return Err(self.corrupt(
                    off + NODE_VERSIONS,
                    CorruptionReason::Invalid("a node without a version"),
                ));
            }
            nodes.insert(off, (keys, node.height));
            keys += 1;
            visible_keys += u64::from(visible);
            link = off + NODE_NEXT;
            last = Some(node);
        }
        for level in 1..MAX_HEIGHT {
            let mut link = OFF_HEAD + 8 * level as u64;
            let mut pos: Option<u64> = None;
            loop {
                let off = self.word(link)?;
                if off == 0 {
                    break;
                }
                match nodes.get(&off) {
                    Some(&(p, height)) if height > level && pos.is_none_or(|q| q < p) => {
                        pos = Some(p);
                    }
                    _ => {
                        return Err(self.corrupt(
                            link,
                            CorruptionReason::Invalid(
                                "a higher level links a node that is not after the previous \
                                 one at level 0, or is not that high",
                            ),
                        ));
                    }
                }
                link = off + NODE_NEXT + 8 * level as u64;
            }
        }
        self.min_seq.store(min_seq, Ordering::Relaxed);
        Ok([visible_keys, entries, max_seq])
    }

    pub(super) fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::PersistentMemtable, &self.path, offset),
            reason,
        )
    }

    /// Loads the commit word at `off` (atomic, acquire).
    pub(super) fn word(&self, off: u64) -> Result<u64> {
        self.region
            .read_u64(at(off))
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))
    }

    fn read(&self, off: u64, buf: &mut [u8]) -> Result<()> {
        self.region
            .read(at(off), buf)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))
    }

    /// True if a structure of `len` bytes at `off` lies in the data area below `bound`.
    fn in_bounds(off: u64, len: u64, bound: u64) -> bool {
        off >= DATA_START
            && off.is_multiple_of(8)
            && off.checked_add(len).is_some_and(|e| e <= bound)
    }

    /// Reads and verifies the node at `off`, reached through the word at `from`; everything
    /// it reads must lie below `bound`.
    pub(super) fn load_node(&self, off: u64, from: u64, bound: u64) -> Result<Node> {
        if !Self::in_bounds(off, NODE_NEXT, bound) {
            return Err(self.corrupt(
                from,
                CorruptionReason::Invalid("a node pointer outside the allocated bytes"),
            ));
        }
        let mut fixed = [0u8; NODE_FIXED_LEN];
        self.read(off, &mut fixed)?;
        let key_len = le_u32(&fixed, 4) as usize;
        let height = usize::from(fixed.get(8).copied().unwrap_or(0));
        if height == 0
            || height > MAX_HEIGHT
            || !Self::in_bounds(off, node_len(height, key_len), bound)
        {
            return Err(self.corrupt(off, CorruptionReason::BadLength));
        }
        let mut key = vec![0u8; key_len];
        self.read(off + NODE_NEXT + 8 * height as u64, &mut key)?;
        let stored = le_u32(&fixed, 0);
        let computed = checksum::checksum3(
            &seed(self.id, off),
            fixed.get(4..).unwrap_or_default(),
            &key,
        );
        if stored != computed {
            return Err(self.corrupt(off, CorruptionReason::ChecksumMismatch { stored, computed }));
        }
        Ok(Node { off, height, key })
    }

    /// Reads and verifies the version record at `off` of the node at `node_off`, reached
    /// through the word at `from`; everything it reads must lie below `bound`.
    pub(super) fn load_version(
        &self,
        node_off: u64,
        off: u64,
        from: u64,
        bound: u64,
    ) -> Result<Version> {
        if !Self::in_bounds(off, VERSION_HEADER_LEN as u64, bound) {
            return Err(self.corrupt(
                from,
                CorruptionReason::Invalid("a version pointer outside the allocated bytes"),
            ));
        }
        let mut h = [0u8; VERSION_HEADER_LEN];
        self.read(off, &mut h)?;
        let value_len = le_u32(&h, 4) as usize;
        if !Self::in_bounds(off, version_len(value_len), bound) {
            return Err(self.corrupt(off, CorruptionReason::BadLength));
        }
        let mut value = vec![0u8; value_len];
        self.read(off + VERSION_HEADER_LEN as u64, &mut value)?;
        let stored = le_u32(&h, 0);
        let computed = checksum::checksum3(
            &seed(self.id, node_off),
            h.get(4..).unwrap_or_default(),
            &value,
        );
        if stored != computed {
            return Err(self.corrupt(off, CorruptionReason::ChecksumMismatch { stored, computed }));
        }
        let tag = le_u64(&h, 8);
        let kind =
            ValueKind::from_batch_u8((tag & 0xff) as u8).map_err(|r| self.corrupt(off, r))?;
        Ok(Version {
            off,
            seq: SeqNo(tag >> 8),
            kind,
            prev: le_u64(&h, at(VERSION_PREV)),
            value,
        })
    }

    /// A walk of the version chain of `node`, from its newest version as published now.
    pub(super) fn chain(&self, node: &Node) -> Result<Chain> {
        let from = node.off + NODE_VERSIONS;
        Ok(Chain {
            node_off: node.off,
            next: self.word(from)?,
            from,
            last: None,
        })
    }

    /// The next (older) version of the walk, verified; `None` at the end of the chain.
    pub(super) fn chain_next(&self, c: &mut Chain, bound: u64) -> Result<Option<Version>> {
        if c.next == 0 {
            return Ok(None);
        }
        if let Some((last_off, _)) = c.last
            && c.next >= last_off
        {
            // Records are bump-allocated: an older version lies before a newer one, which
            // also makes every walk end.
            return Err(self.corrupt(
                c.from,
                CorruptionReason::Invalid("a version chain that does not go back in the region"),
            ));
        }
        let v = self.load_version(c.node_off, c.next, c.from, bound)?;
        if let Some((_, last_seq)) = c.last
            && v.seq >= last_seq
        {
            return Err(self.corrupt(
                v.off,
                CorruptionReason::Invalid("a version not older than the one before it"),
            ));
        }
        c.last = Some((v.off, v.seq));
        c.from = v.off + VERSION_PREV;
        c.next = v.prev;
        Ok(Some(v))
    }

    /// Searches from the top level down for `key` (`None`: past the last node), recording at
    /// each level the link word and the successor where the search went down. Verifies every
    /// node it reads and that keys ascend along each level.
    pub(super) fn seek_node(&self, key: Option<&[u8]>) -> Result<Position> {
        let bound = self.capacity();
        let mut before: Option<Node> = None;
        // The node the search stopped at on the level above (often the same one again).
        let mut stopped: Option<Node> = None;
        let mut links = [0u64; MAX_HEIGHT];
        let mut succs = [0u64; MAX_HEIGHT];
        for level in (0..MAX_HEIGHT).rev() {
            loop {
                let link = match &before {
                    None => OFF_HEAD + 8 * level as u64,
                    Some(n) => n.off + NODE_NEXT + 8 * level as u64,
                };
                let next = self.word(link)?;
                if let (Some(l), Some(s)) = (links.get_mut(level), succs.get_mut(level)) {
                    (*l, *s) = (link, next);
                }
                if next == 0 {
                    stopped = None;
                    break;
                }
                let node = match stopped.take() {
                    Some(n) if n.off == next => n,
                    _ => self.load_node(next, link, bound)?,
                };
                if node.height <= level {
                    return Err(self.corrupt(
                        link,
                        CorruptionReason::Invalid("a node linked above its height"),
                    ));
                }
                if before.as_ref().is_some_and(|b| b.key >= node.key) {
                    return Err(self.corrupt(next, CorruptionReason::Invalid("keys out of order")));
                }
                if key.is_none_or(|k| node.key.as_slice() < k) {
                    before = Some(node);
                } else {
                    stopped = Some(node);
                    break;
                }
            }
        }
        Ok(Position {
            before,
            after: stopped,
            links,
            succs,
        })
    }
}
