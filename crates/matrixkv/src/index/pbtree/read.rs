//! The read side of the persistent B+-tree: loading verified pages and descending through
//! them (`Shared`), the walk of the whole tree that `open` checks, and the readers: a
//! [`Snapshot`] of a committed tree (point reads, SLM-DB's leaf-range scan, per-file key
//! counts) and its [`Iter`].

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};

#[cfg(doc)]
use super::PBTree;
use super::format::{
    Committed, PAGE_SIZE, Page, SLOT_KEYS, SLOT_PAGES, SLOT_ROOT, at, page_off, slot_off,
};
use super::{Location, Shared};

impl Shared {
    pub(super) fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::PersistentIndex, &self.path, offset),
            reason,
        )
    }

    /// Reads and verifies page `no`, whose number was read from the field at offset `from`.
    fn load(&self, no: u64, from: u64) -> Result<Page> {
        if no == 0 || no >= self.total_pages {
            return Err(self.corrupt(
                from,
                CorruptionReason::Invalid("a page number outside the region's node pages"),
            ));
        }
        if let Some(page) = self.cache.lock().get(&no) {
            return Ok(page.clone());
        }
        let mut buf = vec![0u8; PAGE_SIZE];
        self.region
            .read(at(page_off(no)), &mut buf)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
        let page = self.parse(no, buf)?;
        let mut cache = self.cache.lock();
        if cache.len() >= super::PAGE_CACHE_PAGES {
            cache.clear();
        }
        cache.insert(no, page.clone());
        Ok(page)
    }

    /// Reads and verifies page `no`, a child at `level` of a node of the writer's working tree
    /// (its number was verified in range when its parent page was read).
    pub(super) fn load_at(&self, no: u64, level: u8) -> Result<Page> {
        let page = self.load(no, page_off(no))?;
        if page.level != level {
            return Err(self.corrupt(
                page_off(no),
                CorruptionReason::Invalid("a page at another level than its parent's child"),
            ));
        }
        Ok(page)
    }

    /// The root page of `c` (`None`: the tree is empty), at level `height - 1` and not newer
    /// than `c`.
    pub(super) fn load_root(&self, c: &Committed) -> Result<Option<Page>> {
        if c.root == 0 {
            return Ok(None);
        }
        let from = (slot_off(c.generation) + SLOT_ROOT) as u64;
        let page = self.load(c.root, from)?;
        if u32::from(page.level) + 1 != c.height {
            return Err(self.corrupt(
                page_off(page.no),
                CorruptionReason::Invalid("a root page at another level than the tree's height"),
            ));
        }
        if page.generation > c.generation {
            return Err(self.corrupt(
                page_off(page.no),
                CorruptionReason::Invalid("a page newer than the page or slot that points to it"),
            ));
        }
        Ok(Some(page))
    }

    /// Child `i` of the inner page `parent`: one level below it and not newer than it.
    pub(super) fn load_child(&self, parent: &Page, i: usize) -> Result<Page> {
        let from = page_off(parent.no) + parent.child_field(i) as u64;
        let page = self.load(parent.child(i), from)?;
        if page.level + 1 != parent.level {
            return Err(self.corrupt(
                page_off(page.no),
                CorruptionReason::Invalid("a page at another level than its parent's child"),
            ));
        }
        if page.generation > parent.generation {
            return Err(self.corrupt(
                page_off(page.no),
                CorruptionReason::Invalid("a page newer than the page or slot that points to it"),
            ));
        }
        Ok(page)
    }

    /// The location of `key` in the subtree of `page`.
    pub(super) fn get_below(&self, mut page: Page, key: &[u8]) -> Result<Option<Location>> {
        loop {
            if page.leaf {
                let i = page.lower_bound(key);
                return Ok((i < page.count() && page.key(i) == key).then(|| page.location(i)));
            }
            let i = page.upper_bound(key);
            page = self.load_child(&page, i)?;
        }
    }

    /// Registers a snapshot of the latest committed tree.
    pub(super) fn snapshot(self: &Arc<Self>) -> Snapshot {
        let mut r = self.readers.lock();
        let (committed, seq) = (r.current, r.seq);
        *r.live.entry(seq).or_insert(0) += 1;
        drop(r);
        Snapshot {
            shared: Arc::clone(self),
            committed,
            seq,
        }
    }

    /// The checks of [`PBTree::open`] on the tree of `c`: returns which pages it uses.
    pub(super) fn verify(&self, c: &Committed) -> Result<Vec<bool>> {
        let mut seen = vec![false; at(self.total_pages)];
        let slot = slot_off(c.generation) as u64;
        /// A page to visit: its number, where that was read, its level, the newest generation
        /// it may have, and the range its keys must lie in (`lo` inclusive, `hi` exclusive).
        struct Visit {
            no: u64,
            from: u64,
            level: u32,
            max_generation: u64,
            lo: Option<Vec<u8>>,
            hi: Option<Vec<u8>>,
        }
        let mut stack = Vec::new();
        if c.root != 0 {
            stack.push(Visit {
                no: c.root,
                from: slot + SLOT_ROOT as u64,
                level: c.height.saturating_sub(1),
                max_generation: c.generation,
                lo: None,
                hi: None,
            });
        }
        let (mut keys, mut pages) = (0u64, 0u64);
        while let Some(v) = stack.pop() {
            let page = self.load(v.no, v.from)?;
            let off = page_off(page.no);
            let bad = |what: &'static str| self.corrupt(off, CorruptionReason::Invalid(what));
            match seen.get_mut(at(v.no)) {
                Some(s) if !*s => *s = true,
                _ => {
                    return Err(
                        self.corrupt(v.from, CorruptionReason::Invalid("a page reachable twice"))
                    );
                }
            }
            if u32::from(page.level) != v.level {
                return Err(bad("a page at another level than its parent's child"));
            }
            if page.generation > v.max_generation || page.generation == 0 {
                return Err(bad("a page newer than the page or slot that points to it"));
            }
            let n = page.count();
            if !page.leaf && n == 0 && v.no == c.root {
                return Err(bad("a root inner page with a single child"));
            }
            if n > 0 {
                let (first, last) = (page.key(0), page.key(n - 1));
                // A separator is above the page's lower bound (the subtree left of it is not
                // empty); a leaf's first key may equal it.
                let above_lo =
                    v.lo.as_deref()
                        .is_none_or(|lo| if page.leaf { first >= lo } else { first > lo });
                if !above_lo || v.hi.as_deref().is_some_and(|hi| last >= hi) {
                    return Err(bad("a key outside the range its parent gives the page"));
                }
            }
            pages += 1;
            if page.leaf {
                keys += n as u64;
                continue;
            }
            for i in 0..=n {
                stack.push(Visit {
                    no: page.child(i),
                    from: off + page.child_field(i) as u64,
                    level: v.level - 1,
                    max_generation: page.generation,
                    lo: match i {
                        0 => v.lo.clone(),
                        _ => Some(page.key(i - 1).to_vec()),
                    },
                    hi: if i == n {
                        v.hi.clone()
                    } else {
                        Some(page.key(i).to_vec())
                    },
                });
            }
        }
        if keys != c.keys {
            return Err(self.corrupt(
                slot + SLOT_KEYS as u64,
                CorruptionReason::Invalid("a key count that differs from the tree's"),
            ));
        }
        if pages != c.pages {
            return Err(self.corrupt(
                slot + SLOT_PAGES as u64,
                CorruptionReason::Invalid("a page count that differs from the tree's"),
            ));
        }
        Ok(seen)
    }
}

/// A committed tree as of [`PBTree::read`], readable until dropped, whatever the writer
/// commits meanwhile: the pages it may visit are not reused while it is alive. `Send + Sync`;
/// cloning it registers another reader of the same tree.
#[derive(Debug)]
pub struct Snapshot {
    pub(super) shared: Arc<Shared>,
    pub(super) committed: Committed,
    /// The sequence number of its tree (see `WriterState::seq`): what the live snapshots are
    /// counted by.
    pub(super) seq: u64,
}

impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        *self.shared.readers.lock().live.entry(self.seq).or_insert(0) += 1;
        Snapshot {
            shared: Arc::clone(&self.shared),
            committed: self.committed,
            seq: self.seq,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut r = self.shared.readers.lock();
        if let Some(n) = r.live.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                r.live.remove(&self.seq);
            }
        }
    }
}

impl Snapshot {
    /// The generation of the snapshot's tree.
    pub fn generation(&self) -> u64 {
        self.committed.generation
    }

    /// Keys in the snapshot's tree.
    pub fn keys(&self) -> u64 {
        self.committed.keys
    }

    /// The location of `key` in the snapshot's tree (`None`: absent).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        match self.shared.load_root(&self.committed)? {
            None => Ok(None),
            Some(root) => self.shared.get_below(root, key),
        }
    }

    /// An unpositioned iterator over the snapshot's tree (it holds a clone of the snapshot).
    pub fn iter(&self) -> Iter {
        Iter {
            snapshot: self.clone(),
            path: Vec::new(),
            leaf: None,
        }
    }

    /// The number of keys of the snapshot's tree in each SSTable (by [`Location::file`]; a
    /// file without keys is absent). It reads every leaf once (the engine rebuilds its
    /// per-file live-key counts with it at open).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn count_by_file(&self) -> Result<HashMap<u64, u64>> {
        let mut counts = HashMap::new();
        let Some(root) = self.shared.load_root(&self.committed)? else {
            return Ok(counts);
        };
        // The inner pages from the root down, each with the next child to visit.
        let mut path = vec![(root, 0usize)];
        while let Some((page, next)) = path.pop() {
            if page.leaf {
                for i in 0..page.count() {
                    *counts.entry(page.location(i).file).or_insert(0) += 1;
                }
                continue;
            }
            // An inner page has `count + 1` children.
            if next <= page.count() {
                let child = self.shared.load_child(&page, next)?;
                path.push((page, next + 1));
                path.push((child, 0));
            }
        }
        Ok(counts)
    }

    /// SLM-DB's leaf scan: the distinct SSTables (file numbers, ascending) that `n_keys`
    /// consecutive keys refer to, starting at the first key at or after `start_key` and
    /// wrapping around to the first key after the last; and the key the next scan starts at
    /// (the one after the last key scanned, wrapping around; `None` for an empty tree). At
    /// most every key is scanned once: with `n_keys` at least the key count, the scan covers
    /// the whole tree and the next one starts where this one did.
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn count_files_in_leaf_range(
        &self,
        start_key: &[u8],
        n_keys: u64,
    ) -> Result<(Vec<u64>, Option<Vec<u8>>)> {
        let mut it = self.iter();
        it.seek(start_key)?;
        if !it.valid() {
            it.seek_to_first()?;
        }
        if !it.valid() {
            return Ok((Vec::new(), None));
        }
        let mut files = BTreeSet::new();
        for _ in 0..n_keys.min(self.committed.keys) {
            files.insert(it.location().file);
            it.next()?;
            if !it.valid() {
                it.seek_to_first()?;
            }
        }
        let next = it.valid().then(|| it.key().to_vec());
        Ok((files.into_iter().collect(), next))
    }
}

/// A cursor over the keys of a snapshot, in either direction. It keeps the pages on the path
/// from the root to its leaf and moves to the next or previous leaf through them. Every page it reads
/// was verified (checksum, structure, level, generation). It owns a clone of its snapshot, so
/// it carries no lifetime and stays valid whatever the writer commits; `Send`, used by one
/// thread. After an error it is not valid.
#[derive(Debug)]
pub struct Iter {
    snapshot: Snapshot,
    /// The inner pages from the root down, each with the index of the child the cursor is in.
    path: Vec<(Page, usize)>,
    /// The current leaf and entry (`None`: not valid).
    leaf: Option<(Page, usize)>,
}

impl Iter {
    /// True if the iterator is at a key.
    pub fn valid(&self) -> bool {
        self.leaf.is_some()
    }

    /// Positions at the first key (not valid if the tree is empty).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.moving(|it| it.seek_from_root(None))
    }

    /// Positions at the first key at or after `key` (not valid if there is none).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn seek(&mut self, key: &[u8]) -> Result<()> {
        self.moving(|it| it.seek_from_root(Some(key)))
    }

    /// Moves to the next key (not valid after the last one). Requires `valid()`.
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn next(&mut self) -> Result<()> {
        self.moving(|it| {
            let Some((page, i)) = it.leaf.take() else {
                return Ok(());
            };
            if i + 1 < page.count() {
                it.leaf = Some((page, i + 1));
                return Ok(());
            }
            it.next_leaf()
        })
    }

    /// Positions at the last key (not valid if the tree is empty).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.moving(|it| {
            it.path.clear();
            it.leaf = None;
            match it.snapshot.shared.load_root(&it.snapshot.committed)? {
                None => Ok(()),
                Some(root) => it.descend_last(root),
            }
        })
    }

    /// Positions at the last key at or before `key` (not valid if there is none).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn seek_for_prev(&mut self, key: &[u8]) -> Result<()> {
        self.seek(key)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if self.key() != key {
            return self.prev();
        }
        Ok(())
    }

    /// Moves to the previous key (not valid before the first one). Requires `valid()`.
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn prev(&mut self) -> Result<()> {
        self.moving(|it| {
            let Some((page, i)) = it.leaf.take() else {
                return Ok(());
            };
            if i > 0 {
                it.leaf = Some((page, i - 1));
                return Ok(());
            }
            it.prev_leaf()
        })
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        self.leaf.as_ref().map_or(&[], |(p, i)| p.key(*i))
    }

    /// The current key's location. Requires `valid()`.
    pub fn location(&self) -> Location {
        self.leaf
            .as_ref()
            .map_or_else(Location::default, |(p, i)| p.location(*i))
    }

    /// The snapshot the iterator reads.
    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    /// Runs a movement: on error the iterator is not valid.
    fn moving(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.path.clear();
            self.leaf = None;
        }
        r
    }

    fn seek_from_root(&mut self, key: Option<&[u8]>) -> Result<()> {
        self.path.clear();
        self.leaf = None;
        match self.snapshot.shared.load_root(&self.snapshot.committed)? {
            None => Ok(()),
            Some(root) => self.descend(root, key),
        }
    }

    /// Goes down from `page` to the first key at or after `key` (`None`: the first key).
    fn descend(&mut self, mut page: Page, key: Option<&[u8]>) -> Result<()> {
        loop {
            if page.leaf {
                let i = key.map_or(0, |k| page.lower_bound(k));
                if i < page.count() {
                    self.leaf = Some((page, i));
                    return Ok(());
                }
                return self.next_leaf();
            }
            let i = key.map_or(0, |k| page.upper_bound(k));
            let child = self.snapshot.shared.load_child(&page, i)?;
            self.path.push((page, i));
            page = child;
        }
    }

    /// Goes down from `page` to the last key below it.
    fn descend_last(&mut self, mut page: Page) -> Result<()> {
        loop {
            if page.leaf {
                return match page.count() {
                    0 => self.prev_leaf(),
                    n => {
                        self.leaf = Some((page, n - 1));
                        Ok(())
                    }
                };
            }
            // An inner page has `count + 1` children.
            let i = page.count();
            let child = self.snapshot.shared.load_child(&page, i)?;
            self.path.push((page, i));
            page = child;
        }
    }

    /// Moves to the last key of the leaf before the current one (not valid if none).
    fn prev_leaf(&mut self) -> Result<()> {
        while let Some((page, i)) = self.path.pop() {
            if i > 0 {
                let child = self.snapshot.shared.load_child(&page, i - 1)?;
                self.path.push((page, i - 1));
                return self.descend_last(child);
            }
        }
        Ok(())
    }

    /// Moves to the first key of the leaf after the current one (not valid if none).
    fn next_leaf(&mut self) -> Result<()> {
        while let Some((page, i)) = self.path.pop() {
            // An inner page has `count + 1` children.
            if i < page.count() {
                let child = self.snapshot.shared.load_child(&page, i + 1)?;
                self.path.push((page, i + 1));
                return self.descend(child, None);
            }
        }
        Ok(())
    }
}
