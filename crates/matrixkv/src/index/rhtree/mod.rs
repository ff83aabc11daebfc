//! The Radix Hash Tree (RH-Tree): the global index of the LightKV mode (LightKV, MSST 2020;
//! the engine uses it through `index::radix` and `index::global`) and the index of each of
//! its write buffers (`memtable::pwb`, in a window of the buffer's region). It maps every live
//! user key to its [`Location`] on disk or in the buffer's log. The byte layout, the commit points and what `open` checks
//! are specified in docs/format/rhtree.md.
//!
//! Design:
//! - one fast-tier [`Region`]: a header page, two directory areas, a fixed number of leaf
//!   blocks and a log area. A leaf is a hash table of 64 buckets of 64 bytes; a bucket holds 4
//!   slots, each a 4-byte key signature (CRC32C of the key) and an 8-byte pointer to the key's
//!   entry record (key and location) in the log area. A key lives in one of the 4 buckets
//!   from its home bucket (signature mod 64) on;
//! - a leaf covers the keys that start with its prefix and whose *symbol* at depth
//!   `prefix.len()` lies in `[lo, hi]`; the symbol of a key at depth `d` is its byte `d` plus 1,
//!   or 0 (the terminator) if the key has only `d` bytes. The DRAM prefix search tree
//!   (`route::Inner`) routes a key through inner nodes, each covering the symbols `[0, 256]`
//!   of one depth with disjoint children. It is built from the persistent leaf directory at
//!   `open` and updated in place by each split;
//! - a key that finds no free slot in its window splits its leaf: a normal split halves
//!   `[lo, hi]`, a level split (`lo == hi`) replaces the leaf by a node one byte deeper with
//!   two leaves `[0, 128]` and `[129, 256]`; splits repeat until every key fits. A terminator
//!   leaf (`lo == hi == 0`) holds at most one key (the one equal to its prefix), so it never
//!   splits. Leaves never merge (removals only clear slots);
//! - commit points: an insert or update appends and persists the record, then (a new key)
//!   writes and persists the slot's signature, then publishes the slot's pointer (one aligned
//!   8-byte store). A removal publishes 0. A split writes the record, the new leaves and the new
//!   directory (in the area the committed one does not use) and persists them, then publishes
//!   the directory generation in the header: the new key becomes visible with its leaves. The
//!   old leaf's block is free after that publish. The log area is never compacted: records of
//!   updated and removed keys stay until the region is recreated (the LightKV mode copies the
//!   live entries into a new region, `index::radix`).
//!
//! Concurrency: `RhTree` is `Send + Sync`. The state is behind a read-write lock: writes
//! (`insert`, `remove`) are serialised by its write side, reads (`get`, `len`,
//! `count_by_file`, ...) run concurrently with each other and wait for a running write. One
//! process opens a region at a time.
//!
//! Errors: a write whose record, new leaves or directory do not fit fails with
//! [`Error::IndexFull`] before it stores anything. An I/O error while writing *poisons* the
//! tree: later writes fail with [`Error::Poisoned`], reads keep working; recovery decides the
//! failed write's fate. Corruption is reported with [`ArtifactKind::PersistentIndex`], the
//! region's path and the offset of the damaged field, directory, slot or record.
#![cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "is_empty, leaves, leaf_metas, generation, id and entries serve tests and tools"
    )
)]
#![deny(clippy::indexing_slicing)]

mod format;
mod recovery;
mod route;
#[cfg(test)]
mod tests;

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(doc)]
use crate::error::ArtifactKind;
use crate::error::{CorruptionReason, Error, IoOp, Result};
use crate::index::pbtree::Location;
use crate::lock_order::{Rank, RwLock};
use crate::tier::Region;

use format::{
    BUCKET_SIZE, LEAF_SIZE, Layout, OFF_COMMITTED, OFF_EPOCH, RECORD_HEADER_LEN, SLOTS,
    decode_record, encode_directory, encode_header, encode_record, ptr_at, record_crc,
    record_key_len, record_len, sig_at, signature,
};
pub use format::{LeafMeta, MAX_KEY_LEN, PAGE_SIZE};
use route::{Entry, Inner, occupied, plan, window};

/// What the lock protects.
#[derive(Debug)]
struct State {
    /// The live leaves, in directory order (the prefix tree's leaf ids are indexes here).
    leaves: Vec<LeafMeta>,
    /// The prefix search tree of `leaves`.
    tree: Inner,
    /// The committed directory generation.
    generation: u64,
    /// Leaf blocks no live leaf uses.
    free_blocks: BTreeSet<u32>,
    /// Where the next record goes.
    log_tail: u64,
    /// Live keys.
    keys: u64,
    /// Set by the first failed write or persist: the cause.
    poisoned: Option<String>,
}

/// A Radix Hash Tree in one region. See the module documentation.
#[derive(Debug)]
pub struct RhTree {
    region: Arc<dyn Region>,
    path: PathBuf,
    id: u64,
    layout: Layout,
    state: RwLock<State>,
    /// Bytes written to the region by this process (records, slots, leaves, directories).
    written: std::sync::atomic::AtomicU64,
}

impl RhTree {
    /// Makes `region` an empty tree with id `id` (seeds every checksum): writes the header, an
    /// empty leaf covering every key and the directory of generation 0 listing it, and persists
    /// them. `path` is the region's file, for error messages. The rest of the region may hold
    /// anything: the tree never reads bytes it did not write.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the region is not a whole number of pages or too small
    /// (fewer than 8 pages); [`Error::Io`] if writing or persisting fails.
    pub fn create(region: Arc<dyn Region>, path: impl Into<PathBuf>, id: u64) -> Result<RhTree> {
        let path = path.into();
        let len = region.len();
        let layout = match Layout::for_len(len) {
            Some(l) if len.is_multiple_of(PAGE_SIZE) => l,
            _ => {
                return Err(Error::invalid(format!(
                    "RH-tree region {} has {len} bytes; it needs a whole number of \
                     {PAGE_SIZE}-byte pages, at least 8",
                    path.display()
                )));
            }
        };
        let root = LeafMeta {
            block: 0,
            prefix: Vec::new(),
            lo: 0,
            hi: format::MAX_SYMBOL,
        };
        let leaves = vec![root];
        let tree = Inner::build(&leaves).map_err(Error::invalid)?;
        let t = RhTree {
            region,
            path,
            id,
            layout,
            state: RwLock::new(
                Rank::RhTreeState,
                State {
                    leaves,
                    tree,
                    generation: 0,
                    free_blocks: (1..layout.leaf_blocks).collect(),
                    log_tail: layout.log_start(),
                    keys: 0,
                    poisoned: None,
                },
            ),
            written: std::sync::atomic::AtomicU64::new(0),
        };
        t.write_persist(layout.leaf_off(0), &vec![0u8; LEAF_SIZE])?;
        let dir = {
            let st = t.state.read();
            encode_directory(id, 0, st.leaves.len(), st.leaves.iter())
        };
        t.write_persist(layout.dir_off(0), &dir)?;
        t.write_persist(0, &encode_header(id, &layout))?;
        Ok(t)
    }

    /// The location of `key` (`None`: absent).
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] if a record it reads is damaged; [`Error::Io`] if the region
    /// cannot be read.
    pub fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        let st = self.state.read();
        let leaf = self.leaf_of(&st, key)?;
        Ok(self.find(leaf, key)?.map(|(_, loc)| loc))
    }

    /// Maps `key` to `loc` (inserting or updating it).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a key longer than [`MAX_KEY_LEN`]; [`Error::IndexFull`]
    /// if the record, the leaves of a split or the directory do not fit (nothing is stored);
    /// [`Error::Poisoned`] after an earlier I/O error; [`Error::Io`] (which poisons the tree);
    /// [`Error::Corruption`] as [`RhTree::get`].
    pub fn insert(&self, key: &[u8], loc: Location) -> Result<()> {
        if key.len() > MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "a key of {} bytes is longer than the RH-tree's limit of {MAX_KEY_LEN}",
                key.len()
            )));
        }
        let mut st = self.state.write();
        self.check_poisoned(&st)?;
        let idx = self.leaf_idx(&st, key)?;
        let leaf = st
            .leaves
            .get(idx)
            .cloned()
            .ok_or_else(|| Error::invalid("a routed leaf id outside the directory"))?;
        let record = encode_record(self.id, key, &loc);
        if let Some((word, _)) = self.find(&leaf, key)? {
            let ptr = self.append(&mut st, &record)?;
            return self.publish(&mut st, word, ptr);
        }
        let sig = signature(key);
        let base = self.layout.leaf_off(leaf.block);
        for b in window(sig) {
            let mut bucket = [0u8; BUCKET_SIZE];
            self.read(base + b * BUCKET_SIZE, &mut bucket)?;
            let Some(s) = (0..SLOTS).find(|&s| crate::coding::le_u64(&bucket, ptr_at(s)) == 0)
            else {
                continue;
            };
            let at = base + b * BUCKET_SIZE;
            let ptr = self.append(&mut st, &record)?;
            self.guard(&mut st, |t| {
                t.write_persist(at + sig_at(s), &sig.to_le_bytes())
            })?;
            self.publish(&mut st, at + ptr_at(s), ptr)?;
            st.keys += 1;
            return Ok(());
        }
        self.split_insert(&mut st, idx, leaf, key, sig, &record)
    }

    /// Removes `key`; false if it was absent.
    ///
    /// # Errors
    ///
    /// As [`RhTree::insert`] (never [`Error::IndexFull`]).
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        let mut st = self.state.write();
        self.check_poisoned(&st)?;
        let leaf = self.leaf_of(&st, key)?.clone();
        let Some((word, _)) = self.find(&leaf, key)? else {
            return Ok(false);
        };
        self.publish(&mut st, word, 0)?;
        st.keys -= 1;
        Ok(true)
    }

    /// Live keys.
    pub fn len(&self) -> u64 {
        self.state.read().keys
    }

    /// True if no key is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Live leaves.
    pub fn leaves(&self) -> usize {
        self.state.read().leaves.len()
    }

    /// The live leaves, in directory order.
    pub fn leaf_metas(&self) -> Vec<LeafMeta> {
        self.state.read().leaves.clone()
    }

    /// The committed directory generation: the number of splits since `create`.
    pub fn generation(&self) -> u64 {
        self.state.read().generation
    }

    /// The epoch word of the header (0 after `create`): which job of its owner the entries
    /// belong to. The tree never interprets it; the LightKV mode records there the job it is
    /// about to apply, before the first entry of the job changes, so that `open` can tell a
    /// tree that is ahead of the manifest (docs/format/rhtree.md).
    ///
    /// # Errors
    ///
    /// [`Error::Io`] if the region cannot be read.
    pub fn epoch(&self) -> Result<u64> {
        self.region
            .read_u64(OFF_EPOCH)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))
    }

    /// Publishes `epoch` in the header (one persisted 8-byte store).
    ///
    /// # Errors
    ///
    /// [`Error::Poisoned`] after an earlier I/O error; [`Error::Io`] (which poisons the tree).
    pub fn set_epoch(&self, epoch: u64) -> Result<()> {
        let mut st = self.state.write();
        self.check_poisoned(&st)?;
        self.publish(&mut st, OFF_EPOCH, epoch)
    }

    /// The share of the log area that records occupy, 0 to 1 (records of updated and removed
    /// keys included: the log is never compacted in place).
    pub fn log_fill(&self) -> f64 {
        let start = self.layout.log_start();
        let used = self.state.read().log_tail.saturating_sub(start);
        used as f64 / self.layout.region_len.saturating_sub(start).max(1) as f64
    }

    /// What is left: bytes of the log area and free leaf blocks. An insert needs at most
    /// one record of the log (`record_len`, docs/format/rhtree.md) and, when it splits, a few
    /// blocks and one directory.
    pub fn spare(&self) -> (u64, usize) {
        let st = self.state.read();
        (
            self.layout.region_len.saturating_sub(st.log_tail),
            st.free_blocks.len(),
        )
    }

    /// Bytes this process wrote to the region.
    pub fn bytes_written(&self) -> u64 {
        self.written.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The region.
    pub fn region(&self) -> &dyn Region {
        self.region.as_ref()
    }

    /// The tree's id (from its header).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The region's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Live keys per file number of their locations (reads every record).
    ///
    /// # Errors
    ///
    /// As [`RhTree::get`].
    pub fn count_by_file(&self) -> Result<HashMap<u64, u64>> {
        let st = self.state.read();
        let mut out = HashMap::new();
        for leaf in &st.leaves {
            for (_, _, _, ptr) in occupied(&self.read_leaf(leaf.block)?) {
                let (_, loc) = self.read_record(ptr, 0)?;
                *out.entry(loc.file()).or_insert(0) += 1;
            }
        }
        Ok(out)
    }

    /// Every live key and its location, sorted by key (reads every record; tests and tools).
    ///
    /// # Errors
    ///
    /// As [`RhTree::get`].
    pub fn entries(&self) -> Result<Vec<(Vec<u8>, Location)>> {
        let st = self.state.read();
        let mut out = Vec::new();
        for leaf in &st.leaves {
            for (_, _, _, ptr) in occupied(&self.read_leaf(leaf.block)?) {
                out.push(self.read_record(ptr, 0)?);
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// Splits leaf `leaf` (id `idx`) so that `key` fits. The first new leaf takes the split
    /// leaf's id and place in the directory, the others are appended (directory order is
    /// free), so no other leaf's id changes and the prefix tree is updated in place.
    fn split_insert(
        &self,
        st: &mut State,
        idx: usize,
        leaf: LeafMeta,
        key: &[u8],
        sig: u32,
        record: &[u8],
    ) -> Result<()> {
        let mut entries = Vec::new();
        for (_, _, sig, ptr) in occupied(&self.read_leaf(leaf.block)?) {
            let (key, _) = self.read_record(ptr, 0)?;
            entries.push(Entry { key, sig, ptr });
        }
        entries.push(Entry {
            key: key.to_vec(),
            sig,
            ptr: st.log_tail,
        });
        let old_block = leaf.block;
        let Some(mut planned) = plan(leaf.clone(), entries) else {
            return Err(self.corrupt(
                self.layout.leaf_off(old_block) as u64,
                CorruptionReason::Invalid("a leaf holds keys that no split separates"),
            ));
        };
        if planned.len() > st.free_blocks.len() {
            return Err(self.full(planned.len() as u64, st.free_blocks.len() as u64));
        }
        for ((meta, _), block) in planned.iter_mut().zip(st.free_blocks.iter()) {
            meta.block = *block;
        }
        let (first, rest) = match planned.split_first() {
            Some(((first, _), rest)) => (first.clone(), rest),
            None => return Err(Error::invalid("a split planned no leaf")),
        };
        let n = st.leaves.len();
        let listing = st
            .leaves
            .iter()
            .enumerate()
            .map(|(i, l)| if i == idx { &first } else { l })
            .chain(rest.iter().map(|(m, _)| m));
        let g = st.generation + 1;
        let dir = encode_directory(self.id, g, n + rest.len(), listing);
        if dir.len() > self.layout.dir_bytes() {
            let pages = dir.len().div_ceil(PAGE_SIZE) as u64;
            return Err(self.full(pages, u64::from(self.layout.dir_pages)));
        }
        self.append(st, record)?;
        for (meta, img) in &planned {
            self.guard(st, |t| t.write_persist(t.layout.leaf_off(meta.block), img))?;
        }
        self.guard(st, |t| t.write_persist(t.layout.dir_off(g), &dir))?;
        self.publish(st, OFF_COMMITTED, g)?;
        for (meta, _) in &planned {
            st.free_blocks.remove(&meta.block);
        }
        st.free_blocks.insert(old_block);
        let new: Vec<(&LeafMeta, usize)> = std::iter::once((&first, idx))
            .chain(rest.iter().enumerate().map(|(i, (m, _))| (m, n + i)))
            .collect();
        if let Err(why) = st.tree.replace(&leaf, idx, &new) {
            let e = self.corrupt(
                self.layout.dir_off(g) as u64,
                CorruptionReason::Invalid(why),
            );
            st.poisoned.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        if let Some(slot) = st.leaves.get_mut(idx) {
            *slot = first.clone();
        }
        st.leaves.extend(rest.iter().map(|(m, _)| m.clone()));
        st.generation = g;
        st.keys += 1;
        Ok(())
    }

    /// The id of the leaf covering `key`.
    fn leaf_idx(&self, st: &State, key: &[u8]) -> Result<usize> {
        st.tree
            .route(key)
            .filter(|i| *i < st.leaves.len())
            .ok_or_else(|| {
                self.corrupt(
                    self.layout.dir_off(st.generation) as u64,
                    CorruptionReason::Invalid("no leaf covers a key"),
                )
            })
    }

    /// The leaf covering `key`.
    fn leaf_of<'a>(&self, st: &'a State, key: &[u8]) -> Result<&'a LeafMeta> {
        let idx = self.leaf_idx(st, key)?;
        st.leaves
            .get(idx)
            .ok_or_else(|| Error::invalid("a routed leaf id outside the directory"))
    }

    /// The offset of the pointer word of `key`'s slot in `leaf` and its location.
    fn find(&self, leaf: &LeafMeta, key: &[u8]) -> Result<Option<(usize, Location)>> {
        let sig = signature(key);
        let base = self.layout.leaf_off(leaf.block);
        for b in window(sig) {
            let at = base + b * BUCKET_SIZE;
            let mut bucket = [0u8; BUCKET_SIZE];
            self.read(at, &mut bucket)?;
            for s in 0..SLOTS {
                let ptr = crate::coding::le_u64(&bucket, ptr_at(s));
                if ptr == 0 || crate::coding::le_u32(&bucket, sig_at(s)) != sig {
                    continue;
                }
                let (k, loc) = self.read_record(ptr, (at + ptr_at(s)) as u64)?;
                if k == key {
                    return Ok(Some((at + ptr_at(s), loc)));
                }
            }
        }
        Ok(None)
    }

    /// Reads and verifies the record at `ptr`, whose offset was read from the field at `from`.
    fn read_record(&self, ptr: u64, from: u64) -> Result<(Vec<u8>, Location)> {
        let end = self.layout.region_len;
        if ptr < self.layout.log_start()
            || !ptr.is_multiple_of(8)
            || ptr + RECORD_HEADER_LEN as u64 > end
        {
            return Err(self.corrupt(
                from,
                CorruptionReason::Invalid("a record pointer outside the log area"),
            ));
        }
        let mut head = [0u8; RECORD_HEADER_LEN];
        self.read(ptr as usize, &mut head)?;
        let key_len = record_key_len(&head);
        if key_len > MAX_KEY_LEN || ptr + record_len(key_len) as u64 > end {
            return Err(self.corrupt(ptr, CorruptionReason::BadLength));
        }
        let mut b = vec![0u8; RECORD_HEADER_LEN + key_len];
        self.read(ptr as usize, &mut b)?;
        let (stored, key, loc) = decode_record(&b);
        let computed = record_crc(self.id, &b, key_len);
        if stored != computed {
            return Err(self.corrupt(ptr, CorruptionReason::ChecksumMismatch { stored, computed }));
        }
        Ok((key.to_vec(), loc))
    }

    fn read_leaf(&self, block: u32) -> Result<Vec<u8>> {
        let mut b = vec![0u8; LEAF_SIZE];
        self.read(self.layout.leaf_off(block), &mut b)?;
        Ok(b)
    }

    fn read(&self, at: usize, buf: &mut [u8]) -> Result<()> {
        self.region
            .read(at, buf)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))
    }

    fn write_persist(&self, at: usize, data: &[u8]) -> Result<()> {
        self.written
            .fetch_add(data.len() as u64, std::sync::atomic::Ordering::Relaxed);
        self.region
            .write(at, data)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))?;
        self.region
            .persist(at, data.len())
            .map_err(|e| Error::io(IoOp::Persist, &self.path, e))
    }

    /// Runs the write `f`, poisoning the tree if it fails.
    fn guard(&self, st: &mut State, f: impl FnOnce(&Self) -> Result<()>) -> Result<()> {
        f(self).inspect_err(|e| {
            st.poisoned.get_or_insert_with(|| e.to_string());
        })
    }

    fn publish(&self, st: &mut State, at: usize, value: u64) -> Result<()> {
        self.written
            .fetch_add(8, std::sync::atomic::Ordering::Relaxed);
        self.guard(st, |t| {
            t.region
                .publish_u64(at, value)
                .map_err(|e| Error::io(IoOp::Persist, &t.path, e))
        })
    }

    /// Appends and persists `record` at the log tail; its offset.
    fn append(&self, st: &mut State, record: &[u8]) -> Result<u64> {
        let ptr = st.log_tail;
        let room = self.layout.region_len - ptr;
        if record.len() as u64 > room {
            return Err(self.full(
                record.len().div_ceil(PAGE_SIZE) as u64,
                room / PAGE_SIZE as u64,
            ));
        }
        self.guard(st, |t| t.write_persist(ptr as usize, record))?;
        st.log_tail += record.len() as u64;
        Ok(ptr)
    }

    fn check_poisoned(&self, st: &State) -> Result<()> {
        match &st.poisoned {
            Some(cause) => Err(Error::Poisoned {
                cause: cause.clone(),
            }),
            None => Ok(()),
        }
    }

    fn full(&self, needed: u64, free: u64) -> Error {
        Error::IndexFull {
            path: self.path.clone(),
            needed,
            free,
        }
    }

    fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            crate::error::CorruptionSite::new(
                crate::error::ArtifactKind::PersistentIndex,
                &self.path,
                offset,
            ),
            reason,
        )
    }
}
