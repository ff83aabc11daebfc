//! The working tree of a [`Writer`](super::Writer) (`Batch`): the committed tree with the
//! batch's inserts and removals. Every page a write changes is copied, with the path above
//! it, into a DRAM node (copy-on-write); a node that no longer fits in a page splits, an
//! under-full one merges into a neighbour, an empty one is dropped. At the commit, `assign`
//! gives each node a free page and encodes it.

use std::collections::BTreeSet;

use crate::error::{Error, Result};

use super::format::{
    Committed, INNER_ENTRY_FIXED, LEAF_ENTRY_FIXED, MAX_LEVEL, PAGE_CAPACITY, Page, encode_page,
};
use super::{Location, Shared};

/// A node whose entries take fewer bytes than this after a removal is merged into a neighbour
/// when the two fit in one page (not part of the format).
const MERGE_BELOW: usize = PAGE_CAPACITY / 4;

/// An error for a broken internal invariant of the writer (a bug, never bad input).
pub(super) fn bug(what: &'static str) -> Error {
    Error::invalid(format!(
        "persistent index: internal invariant broken: {what}"
    ))
}

/// A pointer of the writer's working tree: a committed page, or a node the batch changed.
#[derive(Debug)]
pub(super) enum Ptr {
    Page(u64),
    Node(Box<WNode>),
}

/// A node the batch changed (a copy of a committed page, or a new node), in DRAM until the
/// commit writes it to a free page.
#[derive(Debug)]
pub(super) struct WNode {
    /// 0 for a leaf.
    level: u8,
    /// A leaf's keys, or an inner node's separators.
    keys: Vec<Vec<u8>>,
    /// A leaf's locations, one per key.
    locs: Vec<Location>,
    /// An inner node's children, one more than its separators (transiently none while a
    /// removal empties it).
    children: Vec<Ptr>,
}

impl WNode {
    fn from_page(p: &Page) -> WNode {
        let n = p.count();
        WNode {
            level: p.level,
            keys: (0..n).map(|i| p.key(i).to_vec()).collect(),
            locs: if p.leaf {
                (0..n).map(|i| p.location(i)).collect()
            } else {
                Vec::new()
            },
            children: if p.leaf {
                Vec::new()
            } else {
                (0..=n).map(|i| Ptr::Page(p.child(i))).collect()
            },
        }
    }

    fn fixed(&self) -> usize {
        if self.level == 0 {
            LEAF_ENTRY_FIXED
        } else {
            INNER_ENTRY_FIXED
        }
    }

    /// Bytes of the node's entries once encoded.
    fn bytes(&self) -> usize {
        self.keys.iter().map(|k| self.fixed() + k.len()).sum()
    }

    fn is_empty(&self) -> bool {
        if self.level == 0 {
            self.keys.is_empty()
        } else {
            self.children.is_empty()
        }
    }

    /// Splits a node whose entries do not fit in a page into two that do, as evenly as the
    /// entry sizes allow; returns the separator (the right node's lowest key; for an inner
    /// node, the middle separator, which moves up) and the right node. `None` if it fits.
    fn split_if_full(&mut self) -> Option<(Vec<u8>, WNode)> {
        let total = self.bytes();
        if total <= PAGE_CAPACITY {
            return None;
        }
        let fixed = self.fixed();
        let leaf = self.level == 0;
        // Left takes entries [0, s); a leaf's right takes [s, n), an inner node's [s + 1, n)
        // (entry s moves up). Every entry is at most a quarter of a page, so some `s` leaves
        // both sides within a page.
        let mut best: Option<(usize, usize)> = None;
        let mut left = 0;
        for (s, k) in self.keys.iter().enumerate() {
            let this = fixed + k.len();
            let right = if leaf {
                total - left
            } else {
                total - left - this
            };
            if s > 0 && left <= PAGE_CAPACITY && right <= PAGE_CAPACITY {
                let worst = left.max(right);
                if best.is_none_or(|(_, w)| worst < w) {
                    best = Some((s, worst));
                }
            }
            left += this;
        }
        let (s, _) = best?;
        if leaf {
            let keys = self.keys.split_off(s);
            let locs = self.locs.split_off(s);
            let sep = keys.first().cloned().unwrap_or_default();
            Some((
                sep,
                WNode {
                    level: 0,
                    keys,
                    locs,
                    children: Vec::new(),
                },
            ))
        } else {
            let keys = self.keys.split_off(s + 1);
            let sep = self.keys.pop().unwrap_or_default();
            let children = self.children.split_off(s + 1);
            Some((
                sep,
                WNode {
                    level: self.level,
                    keys,
                    locs: Vec::new(),
                    children,
                },
            ))
        }
    }

    /// Appends `right`, the node after this one under the separator `sep`.
    fn absorb(&mut self, sep: Vec<u8>, mut right: WNode) {
        if self.level > 0 {
            self.keys.push(sep);
            self.children.append(&mut right.children);
        }
        self.keys.append(&mut right.keys);
        self.locs.append(&mut right.locs);
    }
}

/// The working tree of a writer: the committed tree with the batch's changes.
#[derive(Debug)]
pub(super) struct Batch {
    pub(super) root: Option<Ptr>,
    pub(super) height: u32,
    pub(super) keys: u64,
    /// Nodes of the working tree in DRAM (each needs a free page at the commit).
    pub(super) nodes: u64,
    /// Committed pages the working tree no longer uses (copied or dropped).
    pub(super) released: Vec<u64>,
    /// The batch changed the tree.
    pub(super) changed: bool,
    /// An operation failed after it started changing the working tree: the batch cannot be
    /// committed.
    pub(super) failed: Option<Error>,
}

impl Batch {
    pub(super) fn new(c: &Committed) -> Batch {
        Batch {
            root: (c.root != 0).then_some(Ptr::Page(c.root)),
            height: c.height,
            keys: c.keys,
            nodes: 0,
            released: Vec::new(),
            changed: false,
            failed: None,
        }
    }

    /// The node `ptr` points to, copying the committed page into DRAM first (at `level`).
    fn dirty<'n>(&mut self, shared: &Shared, ptr: &'n mut Ptr, level: u8) -> Result<&'n mut WNode> {
        if let Ptr::Page(no) = *ptr {
            let page = shared.load_at(no, level)?;
            *ptr = Ptr::Node(Box::new(WNode::from_page(&page)));
            self.released.push(no);
            self.nodes += 1;
        }
        match ptr {
            Ptr::Node(node) => Ok(node),
            Ptr::Page(_) => Err(bug("a copied page is still a page")),
        }
    }

    /// Bytes of the entries of the node `ptr` points to (at `level`).
    fn bytes(shared: &Shared, ptr: &Ptr, level: u8) -> Result<usize> {
        match ptr {
            Ptr::Node(n) => Ok(n.bytes()),
            Ptr::Page(no) => Ok(shared.load_at(*no, level)?.used()),
        }
    }

    fn root_level(&self) -> u8 {
        u8::try_from(self.height.saturating_sub(1)).unwrap_or(u8::MAX)
    }

    pub(super) fn insert(&mut self, shared: &Shared, key: &[u8], loc: Location) -> Result<()> {
        self.changed = true;
        let Some(mut root) = self.root.take() else {
            self.root = Some(Ptr::Node(Box::new(WNode {
                level: 0,
                keys: vec![key.to_vec()],
                locs: vec![loc],
                children: Vec::new(),
            })));
            self.nodes += 1;
            self.keys += 1;
            self.height = 1;
            return Ok(());
        };
        let level = self.root_level();
        let split = self
            .dirty(shared, &mut root, level)
            .and_then(|top| Ok((top.level, self.insert_into(shared, top, key, loc)?)));
        let (level, split) = match split {
            Ok(s) => s,
            Err(e) => {
                self.root = Some(root);
                return Err(e);
            }
        };
        self.root = Some(match split {
            None => root,
            Some((sep, right)) => {
                if level >= MAX_LEVEL {
                    return Err(bug("the tree outgrew the largest level"));
                }
                self.nodes += 2;
                self.height += 1;
                Ptr::Node(Box::new(WNode {
                    level: level + 1,
                    keys: vec![sep],
                    locs: Vec::new(),
                    children: vec![root, Ptr::Node(Box::new(right))],
                }))
            }
        });
        Ok(())
    }

    /// Inserts below `node`; returns the split of `node` if it no longer fits in a page.
    fn insert_into(
        &mut self,
        shared: &Shared,
        node: &mut WNode,
        key: &[u8],
        loc: Location,
    ) -> Result<Option<(Vec<u8>, WNode)>> {
        if node.level == 0 {
            match node.keys.binary_search_by(|k| k.as_slice().cmp(key)) {
                Ok(i) => {
                    let slot = node
                        .locs
                        .get_mut(i)
                        .ok_or_else(|| bug("a key without a location"))?;
                    *slot = loc;
                    return Ok(None);
                }
                Err(i) => {
                    node.keys.insert(i, key.to_vec());
                    node.locs.insert(i, loc);
                    self.keys += 1;
                }
            }
        } else {
            let i = node.keys.partition_point(|s| s.as_slice() <= key);
            let level = node.level - 1;
            let slot = node
                .children
                .get_mut(i)
                .ok_or_else(|| bug("a missing child"))?;
            let child = self.dirty(shared, slot, level)?;
            let Some((sep, right)) = self.insert_into(shared, child, key, loc)? else {
                return Ok(None);
            };
            node.keys.insert(i, sep);
            node.children.insert(i + 1, Ptr::Node(Box::new(right)));
            self.nodes += 1;
        }
        Ok(node.split_if_full())
    }

    /// Removes `key` if the working tree holds it; returns whether it did.
    pub(super) fn remove(&mut self, shared: &Shared, key: &[u8]) -> Result<bool> {
        let Some(mut root) = self.root.take() else {
            return Ok(false);
        };
        let level = self.root_level();
        let removed = self
            .dirty(shared, &mut root, level)
            .and_then(|top| self.remove_from(shared, top, key));
        self.root = Some(root);
        if removed? {
            self.changed = true;
            self.collapse_root()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// Removes `key` below `node`, then merges or drops the child it went through if that
    /// became under-full or empty.
    fn remove_from(&mut self, shared: &Shared, node: &mut WNode, key: &[u8]) -> Result<bool> {
        if node.level == 0 {
            let Ok(i) = node.keys.binary_search_by(|k| k.as_slice().cmp(key)) else {
                return Ok(false);
            };
            node.keys.remove(i);
            node.locs.remove(i);
            self.keys -= 1;
            return Ok(true);
        }
        let i = node.keys.partition_point(|s| s.as_slice() <= key);
        let level = node.level - 1;
        let slot = node
            .children
            .get_mut(i)
            .ok_or_else(|| bug("a missing child"))?;
        let child = self.dirty(shared, slot, level)?;
        if !self.remove_from(shared, child, key)? {
            return Ok(false);
        }
        self.rebalance(shared, node, i)?;
        Ok(true)
    }

    /// After a removal below child `i` of `node`: drops the child if it is empty, or merges it
    /// with its right (else left) neighbour if it is under-full and the two fit in one page.
    fn rebalance(&mut self, shared: &Shared, node: &mut WNode, i: usize) -> Result<()> {
        let Some(Ptr::Node(child)) = node.children.get(i) else {
            return Err(bug("the child a removal went through is not in DRAM"));
        };
        if child.is_empty() {
            node.children.remove(i);
            if !node.keys.is_empty() {
                // Child `i` spans separators `i` and `i + 1` (keys `i - 1` and `i`).
                node.keys.remove(i.saturating_sub(1));
            }
            self.nodes -= 1;
            return Ok(());
        }
        let child_bytes = child.bytes();
        if child_bytes >= MERGE_BELOW {
            return Ok(());
        }
        let level = node.level - 1;
        let pairs = [Some(i), i.checked_sub(1)];
        for l in pairs.into_iter().flatten() {
            let (Some(left), Some(right), Some(sep)) = (
                node.children.get(l),
                node.children.get(l + 1),
                node.keys.get(l),
            ) else {
                continue;
            };
            let sep_bytes = if level > 0 {
                INNER_ENTRY_FIXED + sep.len()
            } else {
                0
            };
            let (left_bytes, right_bytes) = if l == i {
                (child_bytes, Self::bytes(shared, right, level)?)
            } else {
                (Self::bytes(shared, left, level)?, child_bytes)
            };
            if left_bytes + right_bytes + sep_bytes > PAGE_CAPACITY {
                continue;
            }
            for j in [l, l + 1] {
                let slot = node
                    .children
                    .get_mut(j)
                    .ok_or_else(|| bug("a missing child"))?;
                self.dirty(shared, slot, level)?;
            }
            let sep = node.keys.remove(l);
            let Ptr::Node(right) = node.children.remove(l + 1) else {
                return Err(bug("a merged node is not in DRAM"));
            };
            let Some(Ptr::Node(left)) = node.children.get_mut(l) else {
                return Err(bug("a merged node is not in DRAM"));
            };
            left.absorb(sep, *right);
            self.nodes -= 1;
            return Ok(());
        }
        Ok(())
    }

    /// Replaces a root with a single child by that child, and an empty root by nothing.
    fn collapse_root(&mut self) -> Result<()> {
        loop {
            let Some(Ptr::Node(root)) = &mut self.root else {
                return Ok(());
            };
            if root.level > 0 && root.children.len() == 1 {
                self.root = root.children.pop();
                self.height -= 1;
            } else if root.is_empty() {
                self.root = None;
                self.height = 0;
            } else {
                return Ok(());
            }
            self.nodes = self
                .nodes
                .checked_sub(1)
                .ok_or_else(|| bug("more nodes dropped than made"))?;
        }
    }

    /// The nodes on the path of `key` in the working tree, from the root down: what a write
    /// of `key` would change (see [`Step`]).
    pub(super) fn path(&self, shared: &Shared, key: &[u8]) -> Result<Vec<Step>> {
        let mut steps = Vec::new();
        let mut ptr = self.root.as_ref();
        let mut level = self.root_level();
        // The nodes in DRAM, then the committed pages below them.
        let mut page = loop {
            match ptr {
                None => return Ok(steps),
                Some(Ptr::Page(no)) => break shared.load_at(*no, level)?,
                Some(Ptr::Node(n)) => {
                    let i = n.keys.partition_point(|s| s.as_slice() <= key);
                    steps.push(Step {
                        clean: false,
                        bytes: n.bytes(),
                        longest_key: n.keys.iter().map(Vec::len).max().unwrap_or(0),
                        has_key: n.level == 0
                            && i.checked_sub(1)
                                .and_then(|j| n.keys.get(j))
                                .is_some_and(|k| k == key),
                    });
                    if n.level == 0 {
                        return Ok(steps);
                    }
                    ptr = n.children.get(i);
                    level = n.level - 1;
                }
            }
        };
        loop {
            let i = page.upper_bound(key);
            steps.push(Step {
                clean: true,
                bytes: page.used(),
                longest_key: (0..page.count())
                    .map(|j| page.key(j).len())
                    .max()
                    .unwrap_or(0),
                has_key: page.leaf && i > 0 && page.key(i - 1) == key,
            });
            if page.leaf {
                return Ok(steps);
            }
            page = shared.load_child(&page, i)?;
        }
    }

    /// The location of `key` in the working tree.
    pub(super) fn get(&self, shared: &Shared, key: &[u8]) -> Result<Option<Location>> {
        let mut ptr = self.root.as_ref();
        let mut level = self.root_level();
        loop {
            match ptr {
                None => return Ok(None),
                Some(Ptr::Page(no)) => return shared.get_below(shared.load_at(*no, level)?, key),
                Some(Ptr::Node(n)) if n.level == 0 => {
                    return Ok(n
                        .keys
                        .binary_search_by(|k| k.as_slice().cmp(key))
                        .ok()
                        .and_then(|i| n.locs.get(i).copied()));
                }
                Some(Ptr::Node(n)) => {
                    ptr = n
                        .children
                        .get(n.keys.partition_point(|s| s.as_slice() <= key));
                    level = n.level - 1;
                }
            }
        }
    }
}

/// A node on the path of a key in a writer's working tree.
#[derive(Debug)]
pub(super) struct Step {
    /// It is a committed page: a write below it copies it into a new node.
    pub(super) clean: bool,
    /// Bytes of its entries.
    bytes: usize,
    /// Its longest key.
    longest_key: usize,
    /// A leaf that holds the key.
    pub(super) has_key: bool,
}

/// The most nodes inserting a key of `key_len` bytes along `path` can add to the working
/// tree: a copy of every clean node on the path, and for each node that may overflow, its
/// split's right node (and a new root above a root that splits). Whether the leaf overflows
/// is exact; a separator moving up is assumed to be the longest key of the node it leaves.
pub(super) fn insert_cost(path: &[Step], key_len: usize) -> u64 {
    let Some(leaf) = path.last() else {
        return 1;
    };
    let mut nodes = path.iter().filter(|s| s.clean).count() as u64;
    let mut grow = if leaf.has_key {
        0
    } else {
        LEAF_ENTRY_FIXED + key_len
    };
    let mut sep_len = key_len;
    for (depth, step) in path.iter().enumerate().rev() {
        if step.bytes + grow <= PAGE_CAPACITY {
            break;
        }
        nodes += if depth == 0 { 2 } else { 1 };
        sep_len = sep_len.max(step.longest_key);
        grow = INNER_ENTRY_FIXED + sep_len;
    }
    nodes
}

/// Counts the nodes of the working tree below `ptr` (pages to allocate at the commit).
pub(super) fn count_nodes(ptr: Option<&Ptr>) -> u64 {
    match ptr {
        Some(Ptr::Node(n)) => 1 + n.children.iter().map(|c| count_nodes(Some(c))).sum::<u64>(),
        _ => 0,
    }
}

/// Gives every node below `ptr` a free page (children before their parent, lowest free page
/// first) and encodes it into `out`; returns the page `ptr` now points to.
pub(super) fn assign(
    id: u64,
    ptr: Ptr,
    generation: u64,
    free: &mut BTreeSet<u64>,
    out: &mut Vec<(u64, Vec<u8>)>,
) -> Result<u64> {
    let node = match ptr {
        Ptr::Page(no) => return Ok(no),
        Ptr::Node(node) => *node,
    };
    let mut children = Vec::with_capacity(node.children.len());
    for c in node.children {
        children.push(assign(id, c, generation, free, out)?);
    }
    let no = free
        .pop_first()
        .ok_or_else(|| bug("fewer free pages than counted"))?;
    out.push((
        no,
        encode_page(
            id, no, generation, node.level, &node.keys, &node.locs, &children,
        ),
    ));
    Ok(no)
}
