//! The persistent B+-tree: the global index of the SLM-DB mode (SLM-DB, FAST 2019). It maps
//! every live user key to its [`Location`] on disk (SSTable file, block offset, block size), so
//! a point read needs at most one disk read, and its iterators scan the keys in order. It lives
//! in one fast-tier [`Region`]; a restart reopens the region and walks the tree from the
//! header: there is no log to replay. The byte layout, the commit protocol and what `open`
//! checks are specified in docs/format/pbtree.md.
//!
//! Design:
//! - fixed pages of [`PAGE_SIZE`] bytes: page 0 is the header, every other page is a node
//!   (a leaf of sorted `(key, location)` entries, or an inner page of separator keys and child
//!   page numbers) or free. Keys are byte strings of at most [`MAX_KEY_LEN`] bytes, compared
//!   bytewise and stored inline; a page splits when its entries no longer fit;
//! - copy-on-write (shadow paging): a [`Writer`] collects a batch of inserts and removals in
//!   DRAM, copying every page it changes (and the path above it) into DRAM nodes.
//!   [`Writer::commit`] writes each changed node to a page that no committed tree uses,
//!   persists them, writes and persists the new superblock (root, counts, generation) in the
//!   header slot the committed one does not use, and publishes the new generation in one
//!   aligned word: the commit point. A crash before it leaves the previous tree, after it the
//!   new one; a committed page is never written again while a tree that can still be read
//!   uses it;
//! - pages a commit releases are reused once no snapshot older than that commit is alive
//!   (live snapshots are counted per generation in DRAM). The free pages are not persisted:
//!   `open` walks the tree and every page it does not reach is free;
//! - every node page and both superblock slots carry a CRC32C seeded with the tree's id and the
//!   page number (slot offset), so a pointer that strays into another tree's leftovers or into a
//!   stale page of this one is detected, not followed. Every read verifies what it uses.
//!
//! Leaves carry no right-sibling link. Under copy-on-write a sibling link costs a rewrite of
//! the left neighbour whenever a leaf is rewritten, which in turn changes that neighbour's page
//! number and so its own left neighbour's link, up to the leftmost leaf: every commit would
//! rewrite every leaf left of a change (Rodeh, "B-trees, shadowing, and clones", ACM TOS 2008,
//! drops leaf chaining for this reason). An iterator instead keeps the path from the root to
//! its leaf and moves to the next leaf through it (every page on it belongs to its snapshot).
//!
//! Deletions merge an under-full node (below a quarter of a page) into a neighbour when the two
//! fit in one page; nothing is redistributed, so a non-root inner page may be left with a single
//! child. Empty nodes are removed and a root with a single child is replaced by that child.
//!
//! Who calls it: nothing yet; the SLM-DB mode (issue 11) will make it the index that maps keys
//! to the blocks of its single level of SSTables, and [`PBTree::count_files_in_leaf_range`] its
//! leaf-scan selective-compaction trigger.
//!
//! Concurrency: `PBTree` is `Send + Sync`. One [`Writer`] exists at a time (it holds the
//! internal writer mutex: [`PBTree::writer`] waits for the previous writer to commit or drop).
//! Readers take a [`Snapshot`] ([`PBTree::read`]) of the latest committed tree and run
//! concurrently with the writer without taking the writer mutex; the snapshot keeps the pages
//! of its tree from being reused until it is dropped. Lock order: the writer mutex, then the
//! readers mutex (held only for a few statements: registering a snapshot, publishing a commit,
//! computing which freed pages can be reused). A thread that holds a `Writer` must not ask for
//! another one. One process opens a region at a time (the engine's directory lock).
//!
//! Errors: an I/O error while a commit writes or persists *poisons* the tree: the commit's fate
//! is decided by the next recovery, and every later write fails with [`Error::Poisoned`] (reads
//! keep working, on the last commit that returned). A region without enough free pages for a
//! write fails it with [`Error::IndexFull`] and stores nothing. Corruption is reported with
//! [`ArtifactKind::PersistentIndex`], the region's path and the offset of the damaged page,
//! slot or field.
#![cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "wired into the engine by the SLM-DB mode (issue 11)"
    )
)]
#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, MutexGuard};

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::tier::Region;

/// Magic number at offset 0 of the region.
// FORMAT: never change; see docs/format/pbtree.md
pub const MAGIC: [u8; 8] = *b"mxkv-pbt";
/// The format version this build writes and reads.
// FORMAT: never change; see docs/format/pbtree.md
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of a page; the region is a whole number of pages.
// FORMAT: never change; see docs/format/pbtree.md
pub const PAGE_SIZE: usize = 4096;
/// The longest key the index stores.
// FORMAT: never change; see docs/format/pbtree.md
pub const MAX_KEY_LEN: usize = 1024;

// Header fields (offsets from the start of the region, in page 0).
// FORMAT: never change; see docs/format/pbtree.md
const OFF_VERSION: usize = 8;
const OFF_PAGE_SIZE: usize = 12;
const OFF_ID: usize = 16;
const OFF_REGION_LEN: usize = 24;
/// The header checksum covers the bytes before it.
const OFF_HEADER_CRC: usize = 32;
/// 4 zero bytes after the checksum.
const OFF_HEADER_PAD: usize = 36;
/// The committed generation: the commit word. Its parity selects the active slot.
const OFF_COMMITTED: usize = 40;
/// The two superblock slots: generation `g` lives in slot `g % 2`.
const OFF_SLOT: [usize; 2] = [64, 128];
/// End of the bytes of page 0 that are not zero (the end of slot 1's reserved bytes).
const HEADER_END: usize = 192;

// Superblock slot fields (offsets from the slot's start).
// FORMAT: never change; see docs/format/pbtree.md
const SLOT_ROOT: usize = 8;
const SLOT_KEYS: usize = 16;
const SLOT_PAGES: usize = 24;
const SLOT_HEIGHT: usize = 32;
/// The slot checksum covers the bytes before it.
const SLOT_CRC: usize = 36;
/// Bytes of a slot: the fields and the checksum.
const SLOT_LEN: usize = 40;
/// Bytes from one slot to the next (a slot's bytes `[SLOT_LEN, SLOT_SPAN)` are zero).
const SLOT_SPAN: usize = 64;

// Node page fields (offsets from the page's start).
// FORMAT: never change; see docs/format/pbtree.md
const P_KIND: usize = 4;
const P_LEVEL: usize = 5;
const P_COUNT: usize = 6;
const P_GENERATION: usize = 8;
/// Inner page: child 0 (the subtree below separator 1). Leaf: 0.
const P_CHILD0: usize = 16;
/// End of the last entry (from the page's start).
const P_END: usize = 24;
/// 6 zero bytes.
const P_RESERVED: usize = 26;
/// Where the entries start.
const PAGE_HEADER_LEN: usize = 32;
const KIND_LEAF: u8 = 1;
const KIND_INNER: u8 = 2;
/// A leaf entry: key length u16, the location, then the key.
const LEAF_ENTRY_FIXED: usize = 2 + LOCATION_LEN;
/// An inner entry: key length u16, the child page, then the key.
const INNER_ENTRY_FIXED: usize = 2 + 8;
/// Bytes of an encoded [`Location`].
const LOCATION_LEN: usize = 24;
/// Bytes of a page that hold entries.
const PAGE_CAPACITY: usize = PAGE_SIZE - PAGE_HEADER_LEN;
/// A node whose entries take fewer bytes than this after a removal is merged into a neighbour
/// when the two fit in one page (not part of the format).
const MERGE_BELOW: usize = PAGE_CAPACITY / 4;
/// The largest level of a page (a bound for `open`; real trees stay far below it).
const MAX_LEVEL: u8 = 63;

/// Where a key's value lies on disk: what the index maps a key to (24 bytes in a leaf).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Location {
    /// The file number of the SSTable that holds the key.
    pub(crate) file: u64,
    /// Offset of the data block that holds the key, in that file.
    pub(crate) offset: u64,
    /// Bytes of that block.
    pub(crate) size: u32,
    /// Reserved: 0 (format version 1 refuses anything else).
    pub(crate) flags: u32,
}

impl Location {
    /// The block of `size` bytes at `offset` in SSTable `file`.
    pub(crate) fn new(file: u64, offset: u64, size: u32) -> Location {
        Location {
            file,
            offset,
            size,
            flags: 0,
        }
    }

    fn encode_into(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.file.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.flags.to_le_bytes());
    }

    /// The location encoded at `at` in `b`.
    fn decode(b: &[u8], at: usize) -> Location {
        Location {
            file: le_u64(b, at),
            offset: le_u64(b, at + 8),
            size: le_u32(b, at + 16),
            flags: le_u32(b, at + 20),
        }
    }
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    let mut w = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        w.copy_from_slice(s);
    }
    u16::from_le_bytes(w)
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        w.copy_from_slice(s);
    }
    u32::from_le_bytes(w)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// Copies `v` to `b` at `at` (a field of a buffer the caller sized).
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

/// The offset `x` as a region offset (an offset that does not fit fails the region's range
/// check as out of range).
fn at(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// The byte offset of page `no`.
fn page_off(no: u64) -> u64 {
    no.saturating_mul(PAGE_SIZE as u64)
}

/// The offset of the slot of generation `g`.
fn slot_off(g: u64) -> usize {
    if g.is_multiple_of(2) {
        OFF_SLOT[0]
    } else {
        OFF_SLOT[1]
    }
}

/// The seed of a checksum: the tree's id and the page number (or slot offset).
fn seed(id: u64, n: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..].copy_from_slice(&n.to_le_bytes());
    s
}

/// An `InvalidArgument` error for a key longer than [`MAX_KEY_LEN`].
fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "a key of {} bytes is longer than the persistent index's limit of {MAX_KEY_LEN}",
            key.len()
        )));
    }
    Ok(())
}

/// An error for a broken internal invariant of the writer (a bug, never bad input).
fn bug(what: &'static str) -> Error {
    Error::invalid(format!(
        "persistent index: internal invariant broken: {what}"
    ))
}

/// A committed tree, as a superblock slot records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Committed {
    /// The number of the commit (0: the empty tree `create` writes).
    generation: u64,
    /// The root page (0: the tree is empty).
    root: u64,
    /// Keys in the tree.
    keys: u64,
    /// Node pages of the tree.
    pages: u64,
    /// Levels of the tree (0: empty; 1: a root leaf).
    height: u32,
}

impl Committed {
    const EMPTY: Committed = Committed {
        generation: 0,
        root: 0,
        keys: 0,
        pages: 0,
        height: 0,
    };
}

/// The slot recording `c`, at offset `off` of a tree with id `id`.
fn encode_slot(id: u64, off: usize, c: &Committed) -> [u8; SLOT_LEN] {
    let mut s = [0u8; SLOT_LEN];
    s[..8].copy_from_slice(&c.generation.to_le_bytes());
    s[SLOT_ROOT..SLOT_ROOT + 8].copy_from_slice(&c.root.to_le_bytes());
    s[SLOT_KEYS..SLOT_KEYS + 8].copy_from_slice(&c.keys.to_le_bytes());
    s[SLOT_PAGES..SLOT_PAGES + 8].copy_from_slice(&c.pages.to_le_bytes());
    s[SLOT_HEIGHT..SLOT_HEIGHT + 4].copy_from_slice(&c.height.to_le_bytes());
    let crc = checksum::checksum2(&seed(id, off as u64), &s[..SLOT_CRC]);
    s[SLOT_CRC..].copy_from_slice(&crc.to_le_bytes());
    s
}

/// Page 0 of a new tree: the fixed header fields, generation 0 and slot 0 holding the empty
/// tree; the rest zero.
fn encode_header_page(id: u64, region_len: u64) -> Vec<u8> {
    let mut h = vec![0u8; PAGE_SIZE];
    put(&mut h, 0, &MAGIC);
    put(&mut h, OFF_VERSION, &FORMAT_VERSION.to_le_bytes());
    put(&mut h, OFF_PAGE_SIZE, &(PAGE_SIZE as u32).to_le_bytes());
    put(&mut h, OFF_ID, &id.to_le_bytes());
    put(&mut h, OFF_REGION_LEN, &region_len.to_le_bytes());
    let crc = checksum::checksum(h.get(..OFF_HEADER_CRC).unwrap_or_default());
    put(&mut h, OFF_HEADER_CRC, &crc.to_le_bytes());
    put(
        &mut h,
        OFF_SLOT[0],
        &encode_slot(id, OFF_SLOT[0], &Committed::EMPTY),
    );
    h
}

/// A node page: the header, the entries in key order, zeros to the end of the page, and the
/// checksum over everything after it. `children` are the child pages of an inner page (one
/// more than `keys`); `locs` the locations of a leaf's keys.
fn encode_page(
    id: u64,
    no: u64,
    generation: u64,
    level: u8,
    keys: &[Vec<u8>],
    locs: &[Location],
    children: &[u64],
) -> Vec<u8> {
    let leaf = level == 0;
    let mut b = vec![0u8; PAGE_HEADER_LEN];
    put(&mut b, P_KIND, &[if leaf { KIND_LEAF } else { KIND_INNER }]);
    put(&mut b, P_LEVEL, &[level]);
    let count = u16::try_from(keys.len()).unwrap_or(u16::MAX);
    put(&mut b, P_COUNT, &count.to_le_bytes());
    put(&mut b, P_GENERATION, &generation.to_le_bytes());
    if !leaf {
        put(
            &mut b,
            P_CHILD0,
            &children.first().copied().unwrap_or(0).to_le_bytes(),
        );
    }
    for (i, key) in keys.iter().enumerate() {
        let key_len = u16::try_from(key.len()).unwrap_or(u16::MAX);
        b.extend_from_slice(&key_len.to_le_bytes());
        if leaf {
            locs.get(i).copied().unwrap_or_default().encode_into(&mut b);
        } else {
            let child = children.get(i + 1).copied().unwrap_or(0);
            b.extend_from_slice(&child.to_le_bytes());
        }
        b.extend_from_slice(key);
    }
    let end = u16::try_from(b.len()).unwrap_or(u16::MAX);
    put(&mut b, P_END, &end.to_le_bytes());
    b.resize(PAGE_SIZE, 0);
    let crc = checksum::checksum2(&seed(id, no), b.get(4..).unwrap_or_default());
    put(&mut b, 0, &crc.to_le_bytes());
    b
}

/// A node page read from the region: its checksum and structure verified.
#[derive(Debug, Clone)]
struct Page {
    no: u64,
    buf: Vec<u8>,
    leaf: bool,
    level: u8,
    generation: u64,
    /// Where each entry starts in `buf`.
    entries: Vec<usize>,
    /// End of the last entry.
    end: usize,
}

impl Page {
    fn count(&self) -> usize {
        self.entries.len()
    }

    fn fixed(&self) -> usize {
        if self.leaf {
            LEAF_ENTRY_FIXED
        } else {
            INNER_ENTRY_FIXED
        }
    }

    /// Key `i` (an entry's key in a leaf, separator `i + 1` in an inner page).
    fn key(&self, i: usize) -> &[u8] {
        let Some(&e) = self.entries.get(i) else {
            return &[];
        };
        let len = usize::from(le_u16(&self.buf, e));
        let start = e + self.fixed();
        self.buf.get(start..start + len).unwrap_or_default()
    }

    /// The location of entry `i` of a leaf.
    fn location(&self, i: usize) -> Location {
        self.entries
            .get(i)
            .map_or_else(Location::default, |&e| Location::decode(&self.buf, e + 2))
    }

    /// Where child `i` of an inner page is stored, from the page's start.
    fn child_field(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            None => P_CHILD0,
            Some(j) => self.entries.get(j).map_or(P_CHILD0, |&e| e + 2),
        }
    }

    /// Child `i` of an inner page (`0..=count`).
    fn child(&self, i: usize) -> u64 {
        le_u64(&self.buf, self.child_field(i))
    }

    /// Bytes of the page's entries.
    fn used(&self) -> usize {
        self.end - PAGE_HEADER_LEN
    }

    /// The first entry whose key is at least `key` (`count` if none).
    fn lower_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key(mid) < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The number of keys at most `key`: in an inner page, the child whose subtree holds `key`.
    fn upper_bound(&self, key: &[u8]) -> usize {
        let (mut lo, mut hi) = (0, self.count());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.key(mid) <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

/// What every thread shares: the region and the readers' state.
#[derive(Debug)]
struct Shared {
    region: Arc<dyn Region>,
    /// The region's file (error messages only).
    path: PathBuf,
    /// The tree's id, stored in the header; seeds every checksum.
    id: u64,
    /// Pages of the region, the header page included.
    total_pages: u64,
    readers: Mutex<Readers>,
}

/// What the readers mutex protects.
#[derive(Debug)]
struct Readers {
    /// The latest committed tree: what a new snapshot reads.
    current: Committed,
    /// Live snapshots per generation. The pages a commit of generation `g` released are reused
    /// only when every live snapshot has a generation of at least `g`.
    live: BTreeMap<u64, usize>,
}

impl Shared {
    fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
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
        let mut buf = vec![0u8; PAGE_SIZE];
        self.region
            .read(at(page_off(no)), &mut buf)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
        self.parse(no, buf)
    }

    /// Verifies page `no`: checksum, kind and level, entries within the page and in strictly
    /// ascending key order, keys of at most [`MAX_KEY_LEN`] bytes, zero reserved bytes and
    /// tail, child pages inside the region, zero location flags, a leaf not empty.
    fn parse(&self, no: u64, buf: Vec<u8>) -> Result<Page> {
        let off = page_off(no);
        let bad = |field: usize, what: &'static str| {
            self.corrupt(off + field as u64, CorruptionReason::Invalid(what))
        };
        let stored = le_u32(&buf, 0);
        let computed = checksum::checksum2(&seed(self.id, no), buf.get(4..).unwrap_or_default());
        if stored != computed {
            return Err(self.corrupt(off, CorruptionReason::ChecksumMismatch { stored, computed }));
        }
        let kind = buf.get(P_KIND).copied().unwrap_or(0);
        let leaf = match kind {
            KIND_LEAF => true,
            KIND_INNER => false,
            k => {
                return Err(self.corrupt(off + P_KIND as u64, CorruptionReason::UnknownType(k)));
            }
        };
        let level = buf.get(P_LEVEL).copied().unwrap_or(0);
        if leaf != (level == 0) || level > MAX_LEVEL {
            return Err(bad(P_LEVEL, "a level that does not match the page's kind"));
        }
        let child_ok = |child: u64| child != 0 && child < self.total_pages;
        let child0 = le_u64(&buf, P_CHILD0);
        if leaf && child0 != 0 {
            return Err(bad(P_CHILD0, "a leaf with a child"));
        }
        if !leaf && !child_ok(child0) {
            return Err(bad(
                P_CHILD0,
                "a child page outside the region's node pages",
            ));
        }
        if buf
            .get(P_RESERVED..PAGE_HEADER_LEN)
            .is_none_or(|r| r.iter().any(|&b| b != 0))
        {
            return Err(bad(P_RESERVED, "nonzero reserved bytes"));
        }
        let count = usize::from(le_u16(&buf, P_COUNT));
        if leaf && count == 0 {
            return Err(bad(P_COUNT, "an empty leaf"));
        }
        let fixed = if leaf {
            LEAF_ENTRY_FIXED
        } else {
            INNER_ENTRY_FIXED
        };
        let mut entries = Vec::with_capacity(count);
        let mut pos = PAGE_HEADER_LEN;
        let mut prev: Option<&[u8]> = None;
        for _ in 0..count {
            let len = usize::from(le_u16(&buf, pos));
            let Some(key) = buf
                .get(pos + fixed..pos + fixed + len)
                .filter(|_| len <= MAX_KEY_LEN)
            else {
                return Err(self.corrupt(off + pos as u64, CorruptionReason::BadLength));
            };
            if leaf && le_u32(&buf, pos + 2 + 20) != 0 {
                return Err(bad(pos + 2 + 20, "nonzero location flags"));
            }
            if !leaf && !child_ok(le_u64(&buf, pos + 2)) {
                return Err(bad(pos + 2, "a child page outside the region's node pages"));
            }
            if prev.is_some_and(|p| p >= key) {
                return Err(bad(pos, "keys out of order within the page"));
            }
            prev = Some(key);
            entries.push(pos);
            pos += fixed + len;
        }
        if usize::from(le_u16(&buf, P_END)) != pos {
            return Err(bad(
                P_END,
                "an entry end that is not the end of the entries",
            ));
        }
        if buf.get(pos..).is_none_or(|t| t.iter().any(|&b| b != 0)) {
            return Err(bad(pos, "nonzero bytes after the entries"));
        }
        Ok(Page {
            no,
            leaf,
            level,
            generation: le_u64(&buf, P_GENERATION),
            entries,
            end: pos,
            buf,
        })
    }

    /// Reads and verifies page `no`, a child at `level` of a node of the writer's working tree
    /// (its number was verified in range when its parent page was read).
    fn load_at(&self, no: u64, level: u8) -> Result<Page> {
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
    fn load_root(&self, c: &Committed) -> Result<Option<Page>> {
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
    fn load_child(&self, parent: &Page, i: usize) -> Result<Page> {
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
    fn get_below(&self, mut page: Page, key: &[u8]) -> Result<Option<Location>> {
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
    fn snapshot(self: &Arc<Self>) -> Snapshot {
        let mut r = self.readers.lock();
        let committed = r.current;
        *r.live.entry(committed.generation).or_insert(0) += 1;
        drop(r);
        Snapshot {
            shared: Arc::clone(self),
            committed,
        }
    }

    /// The checks of [`PBTree::open`] on the tree of `c`: returns which pages it uses.
    fn verify(&self, c: &Committed) -> Result<Vec<bool>> {
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

/// What the writer mutex protects.
#[derive(Debug)]
struct WriterState {
    /// The latest committed tree (the same as the readers' `current`).
    committed: Committed,
    /// Pages no committed tree and no live snapshot uses: the next commit writes here, lowest
    /// first.
    free: BTreeSet<u64>,
    /// Pages released by the commit of each generation, not yet in `free` because a snapshot
    /// of an older generation may still read them.
    pending: BTreeMap<u64, Vec<u64>>,
    /// Set by the first failed write or persist of a commit: the cause.
    poisoned: Option<String>,
    /// The highest page written since the tree was created or opened (statistics).
    highest_written: u64,
}

impl WriterState {
    /// Moves to `free` the pages released by commits that every live snapshot is at or after.
    fn reclaim(&mut self, shared: &Shared) {
        let oldest = shared.readers.lock().live.keys().next().copied();
        // Pages released by generation `g` are used by trees older than `g` only.
        let still_read = match oldest {
            Some(g) => self.pending.split_off(&g.saturating_add(1)),
            None => BTreeMap::new(),
        };
        for (_, pages) in std::mem::replace(&mut self.pending, still_read) {
            self.free.extend(pages);
        }
    }
}

/// A persistent B+-tree in one region. See the module documentation.
#[derive(Debug)]
pub struct PBTree {
    shared: Arc<Shared>,
    writer: Mutex<WriterState>,
}

impl PBTree {
    /// Makes `region` an empty tree with id `id` (the engine passes the region's file number):
    /// writes the header page and persists it. `path` is the region's file, for error messages.
    ///
    /// # Preconditions
    ///
    /// Nobody else uses `region`. Its pages after the header may hold anything (a recycled
    /// region): the tree never reads a page it did not write.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the region is not a whole number of pages or has no room
    /// for a node page; [`Error::Io`] if writing or persisting the header fails.
    pub fn create(region: Arc<dyn Region>, path: impl Into<PathBuf>, id: u64) -> Result<PBTree> {
        let path = path.into();
        let len = region.len();
        if len < 2 * PAGE_SIZE || !len.is_multiple_of(PAGE_SIZE) {
            return Err(Error::invalid(format!(
                "persistent index region {} has {len} bytes; it needs a whole number of \
                 {PAGE_SIZE}-byte pages, at least 2",
                path.display()
            )));
        }
        let header = encode_header_page(id, len as u64);
        region
            .write(0, &header)
            .map_err(|e| Error::io(IoOp::Write, &path, e))?;
        region
            .persist(0, header.len())
            .map_err(|e| Error::io(IoOp::Persist, &path, e))?;
        let total_pages = (len / PAGE_SIZE) as u64;
        let free = (1..total_pages).collect();
        Ok(PBTree::with_state(region, path, id, Committed::EMPTY, free))
    }

    /// Opens the tree in `region`: checks the header (magic, version, page size, id, region
    /// length, checksum), the superblock slot the committed generation selects (checksum and
    /// generation), then walks the whole tree: every page's checksum and structure, keys in
    /// strictly ascending order within each page and inside the range the parent's separators
    /// give it, each child one level below its parent and not newer than it, no page reachable
    /// twice, and the key and page counts of the slot. Every page the tree does not use is free.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind [`ArtifactKind::PersistentIndex`], `path`, the offset of the
    /// damaged header field, slot, page or child pointer); [`Error::NotSupported`] for another
    /// format version; [`Error::Io`] if the region cannot be read.
    pub fn open(region: Arc<dyn Region>, path: impl Into<PathBuf>) -> Result<PBTree> {
        let path = path.into();
        let len = region.len();
        let corrupt = |offset: usize, reason| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentIndex, &path, offset as u64),
                reason,
            )
        };
        let invalid = |offset: usize, what| corrupt(offset, CorruptionReason::Invalid(what));
        if len < 2 * PAGE_SIZE {
            return Err(corrupt(0, CorruptionReason::Truncated));
        }
        let mut h = vec![0u8; HEADER_END];
        region
            .read(0, &mut h)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(corrupt(0, CorruptionReason::BadMagic));
        }
        let version = le_u32(&h, OFF_VERSION);
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported {
                what: "persistent index",
                found_version: version,
            });
        }
        let stored = le_u32(&h, OFF_HEADER_CRC);
        let computed = checksum::checksum(h.get(..OFF_HEADER_CRC).unwrap_or_default());
        if stored != computed {
            return Err(corrupt(
                0,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        if le_u32(&h, OFF_PAGE_SIZE) as usize != PAGE_SIZE {
            return Err(invalid(OFF_PAGE_SIZE, "a page size other than format 1's"));
        }
        if le_u64(&h, OFF_REGION_LEN) != len as u64 || !len.is_multiple_of(PAGE_SIZE) {
            return Err(invalid(
                OFF_REGION_LEN,
                "the region's length differs from its header's",
            ));
        }
        if le_u32(&h, OFF_HEADER_PAD) != 0 {
            return Err(invalid(OFF_HEADER_PAD, "nonzero header padding"));
        }
        let id = le_u64(&h, OFF_ID);
        let generation = region
            .read_u64(OFF_COMMITTED)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        let off = slot_off(generation);
        let slot = h.get(off..off + SLOT_LEN).unwrap_or_default();
        let stored = le_u32(slot, SLOT_CRC);
        let computed = checksum::checksum2(
            &seed(id, off as u64),
            slot.get(..SLOT_CRC).unwrap_or_default(),
        );
        if stored != computed {
            return Err(corrupt(
                off,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        let committed = Committed {
            generation: le_u64(slot, 0),
            root: le_u64(slot, SLOT_ROOT),
            keys: le_u64(slot, SLOT_KEYS),
            pages: le_u64(slot, SLOT_PAGES),
            height: le_u32(slot, SLOT_HEIGHT),
        };
        if committed.generation != generation {
            return Err(invalid(
                off,
                "the active slot holds another generation than the committed one",
            ));
        }
        if h.get(off + SLOT_LEN..off + SLOT_SPAN)
            .is_none_or(|r| r.iter().any(|&b| b != 0))
        {
            return Err(invalid(off + SLOT_LEN, "nonzero reserved slot bytes"));
        }
        let empty = committed.root == 0;
        if empty != (committed.height == 0)
            || empty != (committed.keys == 0)
            || empty != (committed.pages == 0)
            || committed.height > u32::from(MAX_LEVEL) + 1
        {
            return Err(invalid(
                off + SLOT_ROOT,
                "a root, key count, page count and height that do not agree",
            ));
        }
        let total_pages = (len / PAGE_SIZE) as u64;
        let tree = PBTree::with_state(region, path, id, committed, BTreeSet::new());
        let used = tree.shared.verify(&committed)?;
        tree.writer.lock().free = (1..total_pages)
            .filter(|&p| !used.get(at(p)).copied().unwrap_or(true))
            .collect();
        Ok(tree)
    }

    fn with_state(
        region: Arc<dyn Region>,
        path: PathBuf,
        id: u64,
        committed: Committed,
        free: BTreeSet<u64>,
    ) -> PBTree {
        let total_pages = (region.len() / PAGE_SIZE) as u64;
        PBTree {
            shared: Arc::new(Shared {
                region,
                path,
                id,
                total_pages,
                readers: Mutex::new(Readers {
                    current: committed,
                    live: BTreeMap::new(),
                }),
            }),
            writer: Mutex::new(WriterState {
                committed,
                free,
                pending: BTreeMap::new(),
                poisoned: None,
                highest_written: 0,
            }),
        }
    }

    /// Starts a batch of writes on the latest committed tree, waiting until the previous
    /// [`Writer`] committed or was dropped. Nothing of the batch is visible or stored before
    /// [`Writer::commit`]; dropping the writer discards it.
    pub fn writer(&self) -> Writer<'_> {
        let state = self.writer.lock();
        let batch = Batch::new(&state.committed);
        Writer {
            shared: &self.shared,
            state,
            batch,
        }
    }

    /// A snapshot of the latest committed tree: it reads that tree, unchanged by later commits,
    /// until it is dropped (and keeps its pages from being reused until then).
    pub fn read(&self) -> Snapshot {
        self.shared.snapshot()
    }

    /// The location of `key` in the latest committed tree (`None`: absent).
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] if a page it reads is damaged; [`Error::Io`] if the region cannot
    /// be read.
    pub fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        self.read().get(key)
    }

    /// An unpositioned iterator over a snapshot of the latest committed tree.
    pub fn iter(&self) -> Iter {
        self.read().iter()
    }

    /// SLM-DB's leaf scan on the latest committed tree: see
    /// [`Snapshot::count_files_in_leaf_range`].
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn count_files_in_leaf_range(
        &self,
        start_key: &[u8],
        n_keys: u64,
    ) -> Result<(Vec<u64>, Option<Vec<u8>>)> {
        self.read().count_files_in_leaf_range(start_key, n_keys)
    }

    fn current(&self) -> Committed {
        self.shared.readers.lock().current
    }

    /// Keys in the latest committed tree.
    pub fn keys(&self) -> u64 {
        self.current().keys
    }

    /// Node pages of the latest committed tree.
    pub fn pages_used(&self) -> u64 {
        self.current().pages
    }

    /// Levels of the latest committed tree (0: empty; 1: a single leaf).
    pub fn height(&self) -> u32 {
        self.current().height
    }

    /// The generation of the latest commit (0: none since `create`).
    pub fn generation(&self) -> u64 {
        self.current().generation
    }

    /// Node pages of the region (every page but the header).
    pub fn capacity_pages(&self) -> u64 {
        self.shared.total_pages - 1
    }

    /// The tree's id (from its header).
    pub fn id(&self) -> u64 {
        self.shared.id
    }

    /// The region's file.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// The highest page any commit wrote since the tree was created or opened (waits for the
    /// writer).
    #[cfg(test)]
    fn highest_written(&self) -> u64 {
        self.writer.lock().highest_written
    }

    /// Node pages that are not free: the committed tree's and those released pages that a live
    /// snapshot may still read (waits for the writer).
    #[cfg(test)]
    fn pages_in_use(&self) -> u64 {
        let mut state = self.writer.lock();
        state.reclaim(&self.shared);
        self.capacity_pages() - state.free.len() as u64
    }
}

/// A pointer of the writer's working tree: a committed page, or a node the batch changed.
#[derive(Debug)]
enum Ptr {
    Page(u64),
    Node(Box<WNode>),
}

/// A node the batch changed (a copy of a committed page, or a new node), in DRAM until the
/// commit writes it to a free page.
#[derive(Debug)]
struct WNode {
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
struct Batch {
    root: Option<Ptr>,
    height: u32,
    keys: u64,
    /// Nodes of the working tree in DRAM (each needs a free page at the commit).
    nodes: u64,
    /// Committed pages the working tree no longer uses (copied or dropped).
    released: Vec<u64>,
    /// The batch changed the tree.
    changed: bool,
    /// An operation failed after it started changing the working tree: the batch cannot be
    /// committed.
    failed: Option<Error>,
}

impl Batch {
    fn new(c: &Committed) -> Batch {
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

    fn insert(&mut self, shared: &Shared, key: &[u8], loc: Location) -> Result<()> {
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
    fn remove(&mut self, shared: &Shared, key: &[u8]) -> Result<bool> {
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
    fn path(&self, shared: &Shared, key: &[u8]) -> Result<Vec<Step>> {
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
    fn get(&self, shared: &Shared, key: &[u8]) -> Result<Option<Location>> {
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
struct Step {
    /// It is a committed page: a write below it copies it into a new node.
    clean: bool,
    /// Bytes of its entries.
    bytes: usize,
    /// Its longest key.
    longest_key: usize,
    /// A leaf that holds the key.
    has_key: bool,
}

/// The most nodes inserting a key of `key_len` bytes along `path` can add to the working
/// tree: a copy of every clean node on the path, and for each node that may overflow, its
/// split's right node (and a new root above a root that splits). Whether the leaf overflows
/// is exact; a separator moving up is assumed to be the longest key of the node it leaves.
fn insert_cost(path: &[Step], key_len: usize) -> u64 {
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
fn count_nodes(ptr: Option<&Ptr>) -> u64 {
    match ptr {
        Some(Ptr::Node(n)) => 1 + n.children.iter().map(|c| count_nodes(Some(c))).sum::<u64>(),
        _ => 0,
    }
}

/// Gives every node below `ptr` a free page (children before their parent, lowest free page
/// first) and encodes it into `out`; returns the page `ptr` now points to.
fn assign(
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

/// A batch of writes on the tree: see [`PBTree::writer`]. It holds the writer mutex until it
/// is committed or dropped.
#[derive(Debug)]
pub struct Writer<'a> {
    shared: &'a Arc<Shared>,
    state: MutexGuard<'a, WriterState>,
    batch: Batch,
}

impl Writer<'_> {
    /// Refuses writes on a poisoned tree or a failed batch.
    fn check_usable(&self) -> Result<()> {
        if let Some(cause) = &self.state.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        if let Some(e) = &self.batch.failed {
            return Err(e.duplicate());
        }
        Ok(())
    }

    /// [`Error::IndexFull`] unless the free pages can hold the batch's nodes and `worst` more.
    fn ensure_room(&mut self, worst: u64) -> Result<()> {
        self.state.reclaim(self.shared);
        let needed = self.batch.nodes + worst;
        let free = self.state.free.len() as u64;
        if needed > free {
            return Err(Error::IndexFull {
                path: self.shared.path.clone(),
                needed,
                free,
            });
        }
        Ok(())
    }

    /// Records a failure of an operation that may have changed the working tree halfway.
    fn fail_on_error<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r {
            self.batch.failed.get_or_insert_with(|| e.duplicate());
        }
        r
    }

    /// Maps `key` to `loc` in the batch (adding the key or replacing its location).
    ///
    /// # Errors
    ///
    /// - [`Error::InvalidArgument`] for a key longer than [`MAX_KEY_LEN`] or nonzero
    ///   `loc.flags`: the batch is unchanged;
    /// - [`Error::IndexFull`] if the free pages might not hold the batch with this insert (a
    ///   copy of every committed page on the key's path, and the splits the insert may cause
    ///   up to a new root, assuming that each separator moving up is the longest key of its
    ///   node): the batch is unchanged and can still be committed;
    /// - [`Error::Poisoned`] after a failed commit; the error of an earlier failed operation of
    ///   this batch;
    /// - [`Error::Corruption`] if a page it reads is damaged: the batch can no longer be
    ///   committed.
    pub fn insert(&mut self, key: &[u8], loc: Location) -> Result<()> {
        self.check_usable()?;
        check_key(key)?;
        if loc.flags != 0 {
            return Err(Error::invalid(format!(
                "location flags {:#x} are reserved and must be 0",
                loc.flags
            )));
        }
        let path = self.batch.path(self.shared, key)?;
        self.ensure_room(insert_cost(&path, key.len()))?;
        let r = self.batch.insert(self.shared, key, loc);
        self.fail_on_error(r)
    }

    /// Removes `key` from the batch's tree; returns whether it was there.
    ///
    /// # Errors
    ///
    /// As [`Writer::insert`]; [`Error::IndexFull`] if the free pages might not hold copies of
    /// the pages on the key's path.
    pub fn remove(&mut self, key: &[u8]) -> Result<bool> {
        self.check_usable()?;
        check_key(key)?;
        let path = self.batch.path(self.shared, key)?;
        if !path.last().is_some_and(|leaf| leaf.has_key) {
            return Ok(false);
        }
        // Copies of the clean nodes on the path; merges and dropped nodes only take nodes away.
        self.ensure_room(path.iter().filter(|s| s.clean).count() as u64)?;
        let r = self.batch.remove(self.shared, key);
        self.fail_on_error(r)
    }

    /// The location of `key` in the batch's tree (the committed tree with the batch's writes).
    ///
    /// # Errors
    ///
    /// As [`PBTree::get`].
    pub fn get(&self, key: &[u8]) -> Result<Option<Location>> {
        self.batch.get(self.shared, key)
    }

    /// Commits the batch: writes every node it changed to a free page and persists them,
    /// writes and persists the superblock of the new tree in the slot the committed tree does
    /// not use, then publishes the new generation (the commit point; see
    /// docs/format/pbtree.md, "Persistence"). Returns the new generation (the committed one,
    /// unchanged, for a batch that changed nothing). Snapshots taken from then on read the new
    /// tree; the pages the old tree used and the new one does not are reused once no older
    /// snapshot is alive.
    ///
    /// # Errors
    ///
    /// - [`Error::IndexFull`] if the free pages cannot hold the batch's nodes: nothing was
    ///   stored;
    /// - [`Error::Io`] if a write or persist fails: the tree is poisoned (the batch is kept or
    ///   not by the next recovery; readers keep the last committed tree) and every later write
    ///   returns [`Error::Poisoned`];
    /// - [`Error::Poisoned`]; the error of a failed operation of this batch.
    pub fn commit(mut self) -> Result<u64> {
        self.check_usable()?;
        let committed = self.state.committed;
        if !self.batch.changed {
            return Ok(committed.generation);
        }
        self.state.reclaim(self.shared);
        let needed = count_nodes(self.batch.root.as_ref());
        debug_assert_eq!(needed, self.batch.nodes, "the batch's running node count");
        let free = self.state.free.len() as u64;
        if needed > free {
            return Err(Error::IndexFull {
                path: self.shared.path.clone(),
                needed,
                free,
            });
        }
        let generation = committed.generation + 1;
        let mut pages = Vec::new();
        let root = match self.batch.root.take() {
            None => 0,
            Some(ptr) => assign(
                self.shared.id,
                ptr,
                generation,
                &mut self.state.free,
                &mut pages,
            )?,
        };
        let new = Committed {
            generation,
            root,
            keys: self.batch.keys,
            pages: (committed.pages + needed)
                .checked_sub(self.batch.released.len() as u64)
                .ok_or_else(|| bug("more pages released than the tree had"))?,
            height: self.batch.height,
        };
        if let Err(e) = self.store(&pages, &new) {
            self.state.poisoned.get_or_insert_with(|| e.to_string());
            return Err(e);
        }
        let highest = pages.iter().map(|(no, _)| *no).max().unwrap_or(0);
        let state = &mut *self.state;
        state.highest_written = state.highest_written.max(highest);
        state.committed = new;
        state
            .pending
            .insert(generation, std::mem::take(&mut self.batch.released));
        // Snapshots registered from now on read the new tree (the mutex orders this after
        // the stores above for them).
        self.shared.readers.lock().current = new;
        Ok(generation)
    }

    /// The stores of a commit: the pages, their persists (one per run of adjacent pages), the
    /// slot and its persist, then the commit word.
    fn store(&self, pages: &[(u64, Vec<u8>)], new: &Committed) -> Result<()> {
        let region = &self.shared.region;
        let path = &self.shared.path;
        for (no, bytes) in pages {
            region
                .write(at(page_off(*no)), bytes)
                .map_err(|e| Error::io(IoOp::Write, path, e))?;
        }
        let mut nos: Vec<u64> = pages.iter().map(|(no, _)| *no).collect();
        nos.sort_unstable();
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for no in nos {
            match runs.last_mut() {
                Some((first, n)) if *first + *n == no => *n += 1,
                _ => runs.push((no, 1)),
            }
        }
        for (first, n) in runs {
            region
                .persist(at(page_off(first)), at(n) * PAGE_SIZE)
                .map_err(|e| Error::io(IoOp::Persist, path, e))?;
        }
        let off = slot_off(new.generation);
        region
            .write(off, &encode_slot(self.shared.id, off, new))
            .map_err(|e| Error::io(IoOp::Write, path, e))?;
        region
            .persist(off, SLOT_LEN)
            .map_err(|e| Error::io(IoOp::Persist, path, e))?;
        // The commit point.
        region
            .publish_u64(OFF_COMMITTED, new.generation)
            .map_err(|e| Error::io(IoOp::Persist, path, e))
    }
}

/// A committed tree as of [`PBTree::read`], readable until dropped, whatever the writer
/// commits meanwhile: the pages it may visit are not reused while it is alive. `Send + Sync`;
/// cloning it registers another reader of the same tree.
#[derive(Debug)]
pub struct Snapshot {
    shared: Arc<Shared>,
    committed: Committed,
}

impl Clone for Snapshot {
    fn clone(&self) -> Snapshot {
        *self
            .shared
            .readers
            .lock()
            .live
            .entry(self.committed.generation)
            .or_insert(0) += 1;
        Snapshot {
            shared: Arc::clone(&self.shared),
            committed: self.committed,
        }
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        let mut r = self.shared.readers.lock();
        let g = self.committed.generation;
        if let Some(n) = r.live.get_mut(&g) {
            *n -= 1;
            if *n == 0 {
                r.live.remove(&g);
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

/// A cursor over the keys of a snapshot in ascending order. It keeps the pages on the path
/// from the root to its leaf and moves to the next leaf through them. Every page it reads
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::tier::{CrashPolicy, SimulatedRegion};

    const PATH: &str = "fast/000011.pbt";
    const ID: u64 = 11;

    type Model = BTreeMap<Vec<u8>, Location>;

    /// One operation of a batch.
    #[derive(Debug, Clone)]
    enum Op {
        Put(Vec<u8>, Location),
        Remove(Vec<u8>),
    }

    fn new_tree(pages: usize) -> (Arc<SimulatedRegion>, PBTree) {
        let region = Arc::new(SimulatedRegion::new(pages * PAGE_SIZE));
        let tree = PBTree::create(region.clone(), PATH, ID).unwrap();
        (region, tree)
    }

    fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, PBTree)> {
        let region = Arc::new(SimulatedRegion::from_image(image));
        let tree = PBTree::open(region.clone(), PATH)?;
        Ok((region, tree))
    }

    /// A location in `file` at `offset`, with a size derived from both.
    fn loc(file: u64, offset: u64) -> Location {
        Location::new(file, offset, ((file * 7 + offset) % 4096) as u32 + 1)
    }

    /// A key for messages: its length and first bytes.
    fn short(k: &[u8]) -> String {
        format!("{} bytes {:?}", k.len(), &k[..k.len().min(12)])
    }

    fn scan_iter(mut it: Iter) -> Result<Vec<(Vec<u8>, Location)>> {
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.location()));
            it.next()?;
        }
        Ok(out)
    }

    fn scan(tree: &PBTree) -> Vec<(Vec<u8>, Location)> {
        scan_iter(tree.iter()).unwrap()
    }

    fn entries(m: &Model) -> Vec<(Vec<u8>, Location)> {
        m.iter().map(|(k, l)| (k.clone(), *l)).collect()
    }

    /// `tree` holds exactly `model`: point reads and seeks of `probes`, a full scan, the key
    /// count.
    fn assert_agrees(tree: &PBTree, model: &Model, probes: &[Vec<u8>]) {
        for k in probes {
            assert_eq!(tree.get(k).unwrap(), model.get(k).copied(), "{}", short(k));
        }
        assert_eq!(scan(tree), entries(model));
        assert_eq!(tree.keys(), model.len() as u64);
        let mut it = tree.iter();
        for k in probes.iter().take(30) {
            it.seek(k).unwrap();
            let want = model
                .range(k.clone()..)
                .next()
                .map(|(k, l)| (k.clone(), *l));
            let got = it.valid().then(|| (it.key().to_vec(), it.location()));
            assert_eq!(got, want, "seek {}", short(k));
        }
    }

    /// `n` distinct keys: the empty key, the largest key of the longest length, and random
    /// keys over a small alphabet (shared prefixes), one in twenty of 900..=1024 bytes and a
    /// tenth of 100..400 bytes, so pages split often.
    fn key_pool(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
        let mut pool = BTreeSet::new();
        pool.insert(Vec::new());
        pool.insert(vec![0xff; MAX_KEY_LEN]);
        while pool.len() < n {
            let len = match rng.gen_range(0..20) {
                0 => rng.gen_range(900..=MAX_KEY_LEN),
                1 | 2 => rng.gen_range(100..400),
                _ => rng.gen_range(1..24),
            };
            pool.insert(
                (0..len)
                    .map(|_| b"abcd\x00\xff"[rng.gen_range(0..6)])
                    .collect::<Vec<u8>>(),
            );
        }
        pool.into_iter().collect()
    }

    /// `n` operations on keys of `pool`: removals with probability `remove_p`, else puts.
    fn random_batch(rng: &mut StdRng, pool: &[Vec<u8>], n: usize, remove_p: f64) -> Vec<Op> {
        (0..n)
            .map(|_| {
                let k = pool[rng.gen_range(0..pool.len())].clone();
                if rng.gen_bool(remove_p) {
                    Op::Remove(k)
                } else {
                    Op::Put(k, loc(rng.gen_range(0..50), rng.gen_range(0..1 << 30)))
                }
            })
            .collect()
    }

    fn apply_ops(w: &mut Writer<'_>, ops: &[Op]) -> Result<()> {
        for op in ops {
            match op {
                Op::Put(k, l) => w.insert(k, *l)?,
                Op::Remove(k) => {
                    w.remove(k)?;
                }
            }
        }
        Ok(())
    }

    fn model_after(model: &Model, ops: &[Op]) -> Model {
        let mut m = model.clone();
        for op in ops {
            match op {
                Op::Put(k, l) => {
                    m.insert(k.clone(), *l);
                }
                Op::Remove(k) => {
                    m.remove(k);
                }
            }
        }
        m
    }

    fn commit_ops(tree: &PBTree, ops: &[Op]) -> u64 {
        let mut w = tree.writer();
        apply_ops(&mut w, ops).unwrap();
        w.commit().unwrap()
    }

    fn policies(seed: u64) -> [CrashPolicy; 4] {
        [
            CrashPolicy::KeepAll,
            CrashPolicy::DropUnpersisted,
            CrashPolicy::Random { seed },
            CrashPolicy::Random { seed: !seed },
        ]
    }

    /// Keys absent from every pool (`l`, `z` are outside the pools' alphabet).
    fn absent_keys() -> Vec<Vec<u8>> {
        vec![b"l".to_vec(), b"abcdz".to_vec(), b"zzz".to_vec()]
    }

    /// The recovered `tree` takes a commit, which survives another crash.
    fn assert_takes_commits(region: &SimulatedRegion, tree: &PBTree, model: &Model) {
        let mut model = model.clone();
        let mut w = tree.writer();
        w.insert(b"later", loc(99, 1)).unwrap();
        if let Some(first) = model.keys().next().cloned() {
            assert!(w.remove(&first).unwrap());
            model.remove(&first);
        }
        w.commit().unwrap();
        model.insert(b"later".to_vec(), loc(99, 1));
        let (_, again) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_agrees(&again, &model, &[b"later".to_vec()]);
    }

    #[test]
    fn random_inserts_updates_and_removals_agree_with_a_model_before_and_after_reopen() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let pool = key_pool(&mut rng, 2000);
        let (region, tree) = new_tree(2048);
        let mut model = Model::new();
        let (mut max_height, mut max_keys, mut generation) = (0, 0, 0);
        for round in 0..150u64 {
            // Growth, then mostly removals (merges, dropped leaves, a shrinking root), then
            // growth again.
            let remove_p = match round {
                0..60 => 0.25,
                60..100 => 0.85,
                _ => 0.3,
            };
            let n = rng.gen_range(1..=120);
            let ops = random_batch(&mut rng, &pool, n, remove_p);
            let mut w = tree.writer();
            let mut changed = false;
            for op in &ops {
                match op {
                    Op::Put(k, l) => w.insert(k, *l).unwrap(),
                    Op::Remove(k) => assert_eq!(w.remove(k).unwrap(), model.contains_key(k)),
                }
                let before = model.len();
                model = model_after(&model, std::slice::from_ref(op));
                changed |= matches!(op, Op::Put(..)) || model.len() != before;
            }
            // The writer reads its own batch.
            for _ in 0..20 {
                let k = &pool[rng.gen_range(0..pool.len())];
                assert_eq!(w.get(k).unwrap(), model.get(k).copied());
            }
            // A batch that only removed absent keys commits no generation.
            generation += u64::from(changed);
            assert_eq!(w.commit().unwrap(), generation);
            let mut probes: Vec<Vec<u8>> = (0..40)
                .map(|_| pool[rng.gen_range(0..pool.len())].clone())
                .collect();
            probes.extend(absent_keys());
            assert_agrees(&tree, &model, &probes);
            assert_eq!(tree.generation(), generation);
            max_height = max_height.max(tree.height());
            max_keys = max_keys.max(model.len());
            if round % 25 == 24 {
                let (_, reopened) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
                assert_agrees(&reopened, &model, &probes);
                assert_eq!(
                    (reopened.pages_used(), reopened.height()),
                    (tree.pages_used(), tree.height())
                );
            }
        }
        assert!(max_height >= 3, "height {max_height}: too few splits");
        assert!(max_keys > 1000, "{max_keys} keys at most");
        assert!(tree.height() < max_height, "removals never shrank the tree");

        // `open` on the same region.
        let reopened = PBTree::open(region.clone(), PATH).unwrap();
        assert_agrees(&reopened, &model, &pool);
        assert_eq!(
            (reopened.id(), reopened.path(), reopened.generation()),
            (ID, Path::new(PATH), tree.generation())
        );
        assert_eq!(reopened.capacity_pages(), 2047);
        drop(tree);
        // The reopened tree takes more writes.
        for _ in 0..10 {
            let ops = random_batch(&mut rng, &pool, 100, 0.3);
            commit_ops(&reopened, &ops);
            model = model_after(&model, &ops);
        }
        assert_agrees(&reopened, &model, &pool);
    }

    #[test]
    fn every_commit_survives_a_crash_under_every_policy() {
        let mut rng = StdRng::seed_from_u64(7);
        let pool = key_pool(&mut rng, 300);
        let (region, tree) = new_tree(512);
        let mut model = Model::new();
        let probes: Vec<Vec<u8>> = pool.iter().step_by(7).cloned().collect();
        for i in 0..30u64 {
            let n = rng.gen_range(1..80);
            let ops = random_batch(&mut rng, &pool, n, if i % 4 == 3 { 0.7 } else { 0.2 });
            commit_ops(&tree, &ops);
            model = model_after(&model, &ops);
            assert!(
                region.unpersisted_ranges().is_empty(),
                "commit {i} returned unpersisted"
            );
            for policy in policies(i) {
                let (r, recovered) = reopen(region.crash_image(policy))
                    .unwrap_or_else(|e| panic!("commit {i}, {policy:?}: {e}"));
                assert_agrees(&recovered, &model, &probes);
                assert_eq!(
                    (recovered.generation(), recovered.pages_used()),
                    (tree.generation(), tree.pages_used())
                );
                if i.is_multiple_of(7) {
                    assert_takes_commits(&r, &recovered, &model);
                }
            }
        }
    }

    #[test]
    fn a_crash_inside_a_commit_recovers_the_tree_before_it_or_after_its_commit_point() {
        // The stores of a commit: the page writes, the slot write; persists: one per run of
        // adjacent pages, the slot, and last the publish of the generation (the commit point).
        // A failure of call k leaves its store unpersisted (a publish's word stays visible, as
        // after a failed flush) and makes no later call.
        let mut rng = StdRng::seed_from_u64(99);
        let pool = key_pool(&mut rng, 200);
        let (region, tree) = new_tree(256);
        let mut model = Model::new();
        // A first leaf, leaf and root splits, updates, removals (merges, a collapsing root).
        let shapes = [
            (1, 0.0),
            (40, 0.1),
            (80, 0.1),
            (5, 0.0),
            (60, 0.8),
            (30, 0.5),
            (150, 0.9),
            (3, 0.0),
        ];
        let mut failures = 0;
        for (b, &(n, remove_p)) in shapes.iter().enumerate() {
            let ops = random_batch(&mut rng, &pool, n, remove_p);
            let base = region.crash_image(CrashPolicy::KeepAll);
            let new_model = model_after(&model, &ops);
            // The writes and persists of the commit when nothing fails.
            let (writes, persists) = {
                let (r, t) = reopen(base.clone()).unwrap();
                let mut w = t.writer();
                apply_ops(&mut w, &ops).unwrap();
                let (p0, w0, _) = r.fault_plan().op_counts();
                w.commit().unwrap();
                let (p1, w1, _) = r.fault_plan().op_counts();
                (w1 - w0, p1 - p0)
            };
            assert!(
                writes >= 2 && persists >= 3,
                "batch {b}: {writes} writes, {persists} persists"
            );
            let faults = (0..writes)
                .map(|k| (true, k))
                .chain((0..persists).map(|k| (false, k)));
            for (write, k) in faults {
                let what = format!("batch {b}, {} {k}", if write { "write" } else { "persist" });
                let (r, t) = reopen(base.clone()).unwrap();
                let mut w = t.writer();
                apply_ops(&mut w, &ops).unwrap();
                if write {
                    r.fail_writes_after(Some(k));
                } else {
                    r.fail_persist_after(Some(k));
                }
                let res = w.commit();
                r.fail_writes_after(None);
                r.fail_persist_after(None);
                failures += 1;
                assert!(matches!(res, Err(Error::Io { .. })), "{what}: {res:?}");
                // Poisoned for writes; readers keep the last committed tree.
                let again = t.writer().insert(b"later", loc(1, 1));
                assert!(matches!(again, Err(Error::Poisoned { .. })), "{again:?}");
                assert!(matches!(
                    t.writer().commit(),
                    Ok(_) | Err(Error::Poisoned { .. })
                ));
                assert_eq!(scan(&t), entries(&model), "{what}: live readers");
                assert_eq!(t.generation(), b as u64, "{what}");
                let commit_point = !write && k == persists - 1;
                for policy in policies(b as u64 * 1000 + k) {
                    let what = format!("{what}, {policy:?}");
                    let (r2, recovered) =
                        reopen(r.crash_image(policy)).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let is_new = scan(&recovered) == entries(&new_model);
                    let new = match policy {
                        CrashPolicy::KeepAll => commit_point,
                        CrashPolicy::DropUnpersisted => false,
                        CrashPolicy::Random { .. } => commit_point && is_new,
                    };
                    let want = if new { &new_model } else { &model };
                    assert_agrees(&recovered, want, &pool);
                    assert_eq!(recovered.generation(), b as u64 + u64::from(new), "{what}");
                    if k.is_multiple_of(3) {
                        assert_takes_commits(&r2, &recovered, want);
                    }
                }
            }
            commit_ops(&tree, &ops);
            model = new_model;
        }
        assert!(failures >= shapes.len() * 5, "{failures} failed commits");
    }

    #[test]
    fn a_dropped_writer_leaves_nothing_in_reads_or_in_the_region() {
        let (region, tree) = new_tree(64);
        let mut model = Model::new();
        let key = |i: u64| {
            format!("key{i:03}")
                .repeat(1 + (i % 5) as usize)
                .into_bytes()
        };
        let ops: Vec<Op> = (0..40).map(|i| Op::Put(key(i), loc(i, 0))).collect();
        commit_ops(&tree, &ops);
        model = model_after(&model, &ops);
        let before = region.crash_image(CrashPolicy::KeepAll);
        {
            let mut w = tree.writer();
            // Enough new keys to split leaves, updates and removals.
            for i in 40..300 {
                w.insert(&key(i), loc(i, 1)).unwrap();
            }
            w.insert(&key(3), loc(3, 9)).unwrap();
            assert!(w.remove(&key(5)).unwrap());
            assert_eq!(w.get(&key(3)).unwrap(), Some(loc(3, 9)));
            assert_eq!(w.get(&key(5)).unwrap(), None);
            assert_eq!(w.get(&key(250)).unwrap(), Some(loc(250, 1)));
            // Readers do not see the batch.
            assert_agrees(&tree, &model, &[key(3), key(5), key(250)]);
        }
        assert_eq!(
            region.crash_image(CrashPolicy::KeepAll),
            before,
            "an uncommitted batch stores nothing"
        );
        assert_agrees(&tree, &model, &[key(3), key(5), key(250)]);
        for policy in policies(3) {
            let (_, recovered) = reopen(region.crash_image(policy)).unwrap();
            assert_agrees(&recovered, &model, &[key(3), key(5), key(250)]);
        }
        // The next writer starts from the committed tree, and its commit is the next
        // generation.
        let mut w = tree.writer();
        assert_eq!(w.get(&key(5)).unwrap(), Some(loc(5, 0)));
        assert_eq!(w.get(&key(250)).unwrap(), None);
        w.insert(&key(250), loc(250, 2)).unwrap();
        assert_eq!(w.commit().unwrap(), 2);
        model.insert(key(250), loc(250, 2));
        assert_agrees(&tree, &model, &[key(250)]);
    }

    #[test]
    fn a_batch_that_changes_nothing_commits_no_generation() {
        let (region, tree) = new_tree(8);
        commit_ops(&tree, &[Op::Put(b"a".to_vec(), loc(1, 1))]);
        let before = region.crash_image(CrashPolicy::KeepAll);
        let mut w = tree.writer();
        assert!(!w.remove(b"b").unwrap());
        assert_eq!(w.commit().unwrap(), 1);
        assert_eq!(tree.writer().commit().unwrap(), 1);
        assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
    }

    /// 600 keys, one in ten 700 bytes longer, all at `loc(i, round)`; every seventh key
    /// (shifting with the round) absent.
    fn round_state(round: u64) -> Model {
        (0..600u64)
            .filter(|i| !(i + round).is_multiple_of(7))
            .map(|i| (round_key(i), loc(i, round)))
            .collect()
    }

    fn round_key(i: u64) -> Vec<u8> {
        let mut k = format!("key{i:05}").into_bytes();
        if i.is_multiple_of(10) {
            k.resize(k.len() + 700, b'.');
        }
        k
    }

    /// Commits the change from `round_state(round - 1)` to `round_state(round)`.
    fn commit_round(tree: &PBTree, round: u64) {
        let mut w = tree.writer();
        for i in 0..600 {
            if (i + round).is_multiple_of(7) {
                w.remove(&round_key(i)).unwrap();
            } else {
                w.insert(&round_key(i), loc(i, round)).unwrap();
            }
        }
        w.commit().unwrap();
    }

    #[test]
    fn a_snapshot_reads_its_tree_while_commits_release_and_reuse_pages() {
        let (_region, tree) = new_tree(2048);
        commit_round(&tree, 0);
        let old = entries(&round_state(0));
        let snap = tree.read();
        let mut it = snap.iter();
        it.seek_to_first().unwrap();
        for want in &old[..200] {
            assert_eq!((it.key(), it.location()), (&want.0[..], want.1));
            it.next().unwrap();
        }
        let mut mid = None;
        for round in 1..=30 {
            commit_round(&tree, round);
            if round == 15 {
                mid = Some(tree.read());
            }
        }
        let mid = mid.unwrap();
        // The snapshot still reads its tree completely, and so does the iterator.
        assert_eq!(snap.generation(), 1);
        assert_eq!(snap.keys(), old.len() as u64);
        for (k, l) in &old {
            assert_eq!(snap.get(k).unwrap(), Some(*l));
        }
        let mut rest = Vec::new();
        while it.valid() {
            rest.push((it.key().to_vec(), it.location()));
            it.next().unwrap();
        }
        assert_eq!(rest, old[200..]);
        assert_eq!(scan_iter(mid.iter()).unwrap(), entries(&round_state(15)));
        assert_eq!(scan(&tree), entries(&round_state(30)));
        // Every page released since the oldest snapshot waited for it.
        let used = tree.pages_used();
        assert!(used > 10, "{used} pages");
        let held = tree.pages_in_use();
        assert!(held > 25 * used, "{held} pages in use, the tree has {used}");
        let highest = tree.highest_written();
        drop((it, snap, mid));
        // Without snapshots, a commit's released pages are reused by the next one: the pages in
        // use stay at about twice the tree's, and no commit writes beyond the pages written so
        // far.
        for round in 31..=130 {
            commit_round(&tree, round);
            let (used, held) = (tree.pages_used(), tree.pages_in_use());
            assert!(
                held <= 2 * used + 2,
                "round {round}: {held} pages in use for {used}"
            );
        }
        assert_eq!(tree.highest_written(), highest);
        assert_eq!(scan(&tree), entries(&round_state(130)));
    }

    #[test]
    fn pages_released_by_a_commit_wait_for_every_older_snapshot() {
        // Three node pages: a one-leaf tree and two released copies at most.
        let (_region, tree) = new_tree(4);
        let put = |tree: &PBTree, n: u64| {
            let mut w = tree.writer();
            w.insert(b"k", loc(n, n))?;
            w.commit()
        };
        put(&tree, 1).unwrap();
        let s1 = tree.read();
        put(&tree, 2).unwrap();
        let s2 = tree.read();
        put(&tree, 3).unwrap();
        assert_eq!(tree.pages_in_use(), 3);
        // Both released pages are still read by a snapshot: no room for another copy.
        let e = put(&tree, 4).unwrap_err();
        assert!(
            matches!(
                e,
                Error::IndexFull {
                    needed: 1,
                    free: 0,
                    ..
                }
            ),
            "{e}"
        );
        drop(s1);
        // The page released by commit 2 held only the tree of s1; the one released by commit 3
        // holds s2's.
        assert_eq!(tree.pages_in_use(), 2);
        assert_eq!(put(&tree, 4).unwrap(), 4);
        assert_eq!(s2.get(b"k").unwrap(), Some(loc(2, 2)));
        assert_eq!(tree.get(b"k").unwrap(), Some(loc(4, 4)));
        let e = put(&tree, 5).unwrap_err();
        assert!(matches!(e, Error::IndexFull { .. }), "{e}");
        let s2_copy = s2.clone();
        drop(s2);
        assert_eq!(tree.pages_in_use(), 3, "a clone keeps the snapshot's pages");
        drop(s2_copy);
        assert_eq!(tree.pages_in_use(), 1);
        assert_eq!(put(&tree, 5).unwrap(), 5);
        assert_eq!(tree.get(b"k").unwrap(), Some(loc(5, 5)));
    }

    #[test]
    fn a_full_region_refuses_the_write_with_a_distinct_error_and_keeps_the_tree() {
        let (region, tree) = new_tree(8);
        let mut model = Model::new();
        let big = |i: u64| {
            let mut k = format!("{i:04}").into_bytes();
            k.resize(1000, b'.');
            k
        };
        let mut i = 0;
        let e = loop {
            let before = region.crash_image(CrashPolicy::KeepAll);
            let (keys, pages, generation) = (tree.keys(), tree.pages_used(), tree.generation());
            let mut w = tree.writer();
            match w.insert(&big(i), loc(i, 0)) {
                Ok(()) => {
                    w.commit().unwrap();
                    model.insert(big(i), loc(i, 0));
                    i += 1;
                }
                Err(e) => {
                    drop(w);
                    assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
                    assert_eq!(
                        (tree.keys(), tree.pages_used(), tree.generation()),
                        (keys, pages, generation)
                    );
                    break e;
                }
            }
        };
        match &e {
            Error::IndexFull { path, needed, free } => {
                assert_eq!(path, Path::new(PATH));
                assert!(needed > free, "needed {needed}, free {free}");
                assert_eq!(*free, tree.capacity_pages() - tree.pages_used());
            }
            _ => panic!("not IndexFull: {e}"),
        }
        assert!(e.to_string().contains("is full"), "{e}");
        assert!(!e.is_no_space(), "no device is full");
        assert!(i >= 3, "{i} keys fit");
        let probes: Vec<Vec<u8>> = (0..=i).map(big).collect();
        assert_agrees(&tree, &model, &probes);
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_agrees(&recovered, &model, &probes);
        // A refused insert leaves the batch as it was: its earlier removal commits.
        let mut w = tree.writer();
        assert!(w.remove(&big(0)).unwrap());
        let e = w.insert(&big(i), loc(i, 0)).unwrap_err();
        assert!(matches!(e, Error::IndexFull { .. }), "{e}");
        w.commit().unwrap();
        model.remove(&big(0));
        assert_agrees(&tree, &model, &probes);
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_agrees(&recovered, &model, &probes);
    }

    #[test]
    fn keys_longer_than_1_kib_and_reserved_flags_are_refused_and_change_nothing() {
        let (_region, tree) = new_tree(8);
        let mut w = tree.writer();
        w.insert(b"a", loc(1, 1)).unwrap();
        let long = vec![b'x'; MAX_KEY_LEN + 1];
        for e in [
            w.insert(&long, loc(1, 1)).unwrap_err(),
            w.remove(&long).unwrap_err(),
            w.insert(
                b"b",
                Location {
                    flags: 1,
                    ..loc(1, 1)
                },
            )
            .unwrap_err(),
        ] {
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        }
        w.insert(&long[..MAX_KEY_LEN], loc(2, 2)).unwrap();
        w.commit().unwrap();
        let model: Model = [
            (b"a".to_vec(), loc(1, 1)),
            (long[..MAX_KEY_LEN].to_vec(), loc(2, 2)),
        ]
        .into();
        assert_agrees(&tree, &model, &[b"b".to_vec()]);
    }

    #[test]
    fn removing_every_key_empties_the_tree_and_frees_its_pages() {
        let (region, tree) = new_tree(256);
        let key = |i: u64| format!("{i:06}").repeat(1 + (i % 30) as usize).into_bytes();
        let ops: Vec<Op> = (0..500).map(|i| Op::Put(key(i), loc(i, 0))).collect();
        commit_ops(&tree, &ops);
        assert!(tree.height() >= 2, "height {}", tree.height());
        // Remove in key order in a few batches, then the rest.
        for chunk in (0..500).collect::<Vec<u64>>().chunks(150) {
            let ops: Vec<Op> = chunk.iter().map(|&i| Op::Remove(key(i))).collect();
            commit_ops(&tree, &ops);
        }
        assert_eq!((tree.keys(), tree.height(), tree.pages_used()), (0, 0, 0));
        assert_eq!(tree.pages_in_use(), 0);
        assert!(scan(&tree).is_empty());
        let mut it = tree.iter();
        it.seek(b"").unwrap();
        assert!(!it.valid());
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_eq!((recovered.keys(), recovered.height()), (0, 0));
        assert_eq!(recovered.generation(), tree.generation());
        commit_ops(&tree, &[Op::Put(b"again".to_vec(), loc(3, 3))]);
        assert_eq!(tree.get(b"again").unwrap(), Some(loc(3, 3)));
    }

    #[test]
    fn nodes_emptied_by_removals_are_dropped_and_a_root_with_one_child_collapses() {
        // Keys of 1000 bytes: three fit in a leaf, and a leaf with one key is not under-full,
        // so removing a leaf's keys empties it instead of merging it.
        let big = |i: u64| {
            let mut k = format!("{i:03}").into_bytes();
            k.resize(1000, b'.');
            k
        };
        let (region, tree) = new_tree(256);
        let ops: Vec<Op> = (0..10).map(|i| Op::Put(big(i), loc(i, 0))).collect();
        commit_ops(&tree, &ops);
        let mut model = model_after(&Model::new(), &ops);
        // Appends split leaves two and two: five leaves under one root.
        assert_eq!((tree.height(), tree.pages_used()), (2, 6));
        let probes: Vec<Vec<u8>> = (0..12).map(big).collect();
        // The middle leaf, the first one, the last one: each dropped with its separator.
        for (keys, pages) in [([4, 5], 5), ([0, 1], 4), ([8, 9], 3)] {
            let ops: Vec<Op> = keys.iter().map(|&i| Op::Remove(big(i))).collect();
            commit_ops(&tree, &ops);
            model = model_after(&model, &ops);
            assert_eq!((tree.height(), tree.pages_used()), (2, pages));
            assert_agrees(&tree, &model, &probes);
            let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
            assert_agrees(&recovered, &model, &probes);
        }
        // Two leaves left ([2, 3] and [6, 7]); emptying one leaves the root a single child,
        // which becomes the root.
        let ops = [Op::Remove(big(2)), Op::Remove(big(6)), Op::Remove(big(3))];
        commit_ops(&tree, &ops);
        model = model_after(&model, &ops);
        assert_eq!((tree.height(), tree.pages_used(), tree.keys()), (1, 1, 1));
        assert_agrees(&tree, &model, &probes);
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
        assert_agrees(&recovered, &model, &probes);

        // Taller trees of such keys, emptied in random batches.
        let mut rng = StdRng::seed_from_u64(3);
        let mut order: Vec<u64> = (0..120).collect();
        for round in 0..4 {
            let (region, tree) = new_tree(512);
            let mut model = Model::new();
            for chunk in order.chunks(40) {
                let ops: Vec<Op> = chunk.iter().map(|&i| Op::Put(big(i), loc(i, 1))).collect();
                commit_ops(&tree, &ops);
                model = model_after(&model, &ops);
            }
            assert!(tree.height() >= 3, "height {}", tree.height());
            rand::seq::SliceRandom::shuffle(&mut order[..], &mut rng);
            let probes: Vec<Vec<u8>> = (0..121).map(big).collect();
            for chunk in order.chunks(7 + round * 10) {
                let ops: Vec<Op> = chunk.iter().map(|&i| Op::Remove(big(i))).collect();
                commit_ops(&tree, &ops);
                model = model_after(&model, &ops);
                assert_agrees(&tree, &model, &probes);
                let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
                assert_agrees(&recovered, &model, &probes);
            }
            assert_eq!((tree.keys(), tree.height(), tree.pages_used()), (0, 0, 0));
        }
    }

    /// A tree of two levels (a root inner page over leaves of 300-byte keys).
    fn two_level_tree() -> (Arc<SimulatedRegion>, PBTree, Model) {
        let (region, tree) = new_tree(64);
        let key = |i: u64| {
            let mut k = format!("key{i:03}").into_bytes();
            k.resize(300, b'-');
            k
        };
        let ops: Vec<Op> = (0..40).map(|i| Op::Put(key(i), loc(i, 0))).collect();
        commit_ops(&tree, &ops);
        assert_eq!(tree.height(), 2);
        let model = model_after(&Model::new(), &ops);
        (region, tree, model)
    }

    /// The root page of `tree` and its child `i`.
    fn root_and_child(tree: &PBTree, i: usize) -> (Page, Page) {
        let shared = &tree.shared;
        let root = shared.load_root(&tree.current()).unwrap().unwrap();
        let child = shared.load_child(&root, i).unwrap();
        (root, child)
    }

    /// Recomputes the checksum of page `no` of `image` (to test the checks behind it).
    fn reseal(image: &mut [u8], no: u64) {
        let off = no as usize * PAGE_SIZE;
        let crc = checksum::checksum2(&seed(ID, no), &image[off + 4..off + PAGE_SIZE]);
        image[off..off + 4].copy_from_slice(&crc.to_le_bytes());
    }

    fn assert_corruption_at(e: &Error, offset: u64, checksum: bool) {
        match e {
            Error::Corruption { site, reason } => {
                assert_eq!(site.kind, ArtifactKind::PersistentIndex, "{e}");
                assert_eq!(site.path, Path::new(PATH), "{e}");
                assert_eq!(site.offset, offset, "{e}");
                assert_eq!(
                    matches!(reason, CorruptionReason::ChecksumMismatch { .. }),
                    checksum,
                    "{e}"
                );
                assert!(e.to_string().contains("persistent index"), "{e}");
            }
            _ => panic!("not a corruption: {e}"),
        }
    }

    #[test]
    fn a_damaged_leaf_is_reported_at_its_page_by_open_reads_and_writers() {
        let (region, tree, model) = two_level_tree();
        let (_, left) = root_and_child(&tree, 0);
        let (_, leaf) = root_and_child(&tree, 1);
        let off = page_off(leaf.no);
        let victim = leaf.key(0).to_vec();
        let image = region.crash_image(CrashPolicy::KeepAll);
        let mut bad = image.clone();
        bad[at(off) + 40] ^= 0x10;
        assert_corruption_at(&reopen(bad).unwrap_err(), off, true);

        // The same damage under a running tree: whatever reads the page reports it.
        let mut byte = [0u8];
        region.read(at(off) + 40, &mut byte).unwrap();
        region.write(at(off) + 40, &[byte[0] ^ 0x10]).unwrap();
        assert_corruption_at(&tree.get(&victim).unwrap_err(), off, true);
        let first = model.keys().next().unwrap();
        assert_eq!(tree.get(first).unwrap(), model.get(first).copied());
        let mut it = tree.iter();
        it.seek_to_first().unwrap();
        let e = loop {
            match it.next() {
                Ok(()) => assert!(it.valid(), "the scan ended before the damaged leaf"),
                Err(e) => break e,
            }
        };
        assert_corruption_at(&e, off, true);
        assert!(!it.valid(), "an iterator is not valid after an error");
        // A write on the damaged leaf fails before it changes the batch.
        let mut w = tree.writer();
        assert_corruption_at(&w.insert(&victim, loc(1, 1)).unwrap_err(), off, true);
        w.insert(b"a", loc(1, 1)).unwrap();
        assert_eq!(w.commit().unwrap(), 2);
        // Emptying the leaf left of it makes the removal merge it with the damaged one: the
        // removal fails halfway, and the batch can no longer be committed.
        let mut w = tree.writer();
        let e = (0..left.count())
            .find_map(|i| w.remove(left.key(i)).err())
            .expect("a removal reads the damaged neighbour");
        assert_corruption_at(&e, off, true);
        assert_corruption_at(&w.insert(b"b", loc(1, 1)).unwrap_err(), off, true);
        assert_corruption_at(&w.commit().unwrap_err(), off, true);
        assert_eq!(tree.generation(), 2);
        assert_eq!(
            tree.get(left.key(0)).unwrap(),
            model.get(left.key(0)).copied()
        );
    }

    #[test]
    fn a_damaged_inner_page_is_reported_at_its_page() {
        let (region, tree, model) = two_level_tree();
        let (root, _) = root_and_child(&tree, 0);
        let off = page_off(root.no);
        let mut bad = region.crash_image(CrashPolicy::KeepAll);
        bad[at(off) + 50] ^= 1;
        assert_corruption_at(&reopen(bad).unwrap_err(), off, true);
        region.write(at(off) + 4, &[KIND_LEAF]).unwrap();
        for k in model.keys().take(3) {
            assert_corruption_at(&tree.get(k).unwrap_err(), off, true);
        }
        assert_corruption_at(&tree.iter().seek_to_first().unwrap_err(), off, true);
    }

    #[test]
    fn a_damaged_header_or_slot_is_refused_at_open() {
        let (region, _tree, _model) = two_level_tree();
        let image = region.crash_image(CrashPolicy::KeepAll);
        let damaged = |at: usize, byte: u8| {
            let mut b = image.clone();
            b[at] = byte;
            reopen(b).unwrap_err()
        };
        let e = damaged(0, b'X');
        assert_corruption_at(&e, 0, false);
        assert!(
            matches!(
                &e,
                Error::Corruption {
                    reason: CorruptionReason::BadMagic,
                    ..
                }
            ),
            "{e}"
        );
        assert_corruption_at(&damaged(OFF_ID, 9), 0, true);
        assert_corruption_at(&damaged(OFF_PAGE_SIZE + 1, 0), 0, true);
        let e = damaged(OFF_VERSION, 2);
        assert!(
            matches!(
                e,
                Error::NotSupported {
                    found_version: 2,
                    ..
                }
            ),
            "{e}"
        );
        // The committed generation is 1: slot 1 is active.
        assert_corruption_at(
            &damaged(OFF_SLOT[1] + SLOT_KEYS, 0),
            OFF_SLOT[1] as u64,
            true,
        );
        // Damage to the inactive slot does not matter.
        let mut b = image.clone();
        b[OFF_SLOT[0] + SLOT_ROOT] ^= 0xff;
        reopen(b).unwrap();
        // A commit word naming a generation the other slot does not hold.
        let mut b = image.clone();
        b[OFF_COMMITTED] = 2;
        assert_corruption_at(&reopen(b).unwrap_err(), OFF_SLOT[0] as u64, false);
        // A region longer than the header says, or shorter than two pages.
        let mut longer = image.clone();
        longer.extend_from_slice(&[0; PAGE_SIZE]);
        assert_corruption_at(&reopen(longer).unwrap_err(), OFF_REGION_LEN as u64, false);
        assert_corruption_at(&reopen(image[..PAGE_SIZE].to_vec()).unwrap_err(), 0, false);
        // A region that is not whole pages cannot become a tree.
        let odd: Arc<dyn Region> = Arc::new(SimulatedRegion::new(3 * PAGE_SIZE - 8));
        let e = PBTree::create(odd, PATH, 1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn structural_damage_behind_valid_checksums_is_refused_at_open() {
        let (region, tree, _model) = two_level_tree();
        let (root, child1) = root_and_child(&tree, 1);
        let (_, child0) = root_and_child(&tree, 0);
        let image = region.crash_image(CrashPolicy::KeepAll);
        let root_off = at(page_off(root.no));

        // Child 0 points at child 1's page: reachable twice (open visits child 1 first).
        let mut b = image.clone();
        b[root_off + P_CHILD0..root_off + P_CHILD0 + 8].copy_from_slice(&child1.no.to_le_bytes());
        reseal(&mut b, root.no);
        let e = reopen(b).unwrap_err();
        assert_corruption_at(&e, page_off(root.no) + P_CHILD0 as u64, false);
        assert!(e.to_string().contains("reachable twice"), "{e}");

        // A leaf newer than its parent.
        let mut b = image.clone();
        let leaf_off = at(page_off(child0.no));
        b[leaf_off + P_GENERATION] = 9;
        reseal(&mut b, child0.no);
        assert_corruption_at(&reopen(b).unwrap_err(), page_off(child0.no), false);

        // A separator below the keys of the child left of it.
        let mut b = image.clone();
        let sep_at = root_off + root.entries[0] + INNER_ENTRY_FIXED;
        b[sep_at] = b'a';
        reseal(&mut b, root.no);
        let e = reopen(b).unwrap_err();
        assert_corruption_at(&e, page_off(child0.no), false);
        assert!(e.to_string().contains("outside the range"), "{e}");

        // A cycle: the root points at itself.
        let mut b = image.clone();
        b[root_off + P_CHILD0..root_off + P_CHILD0 + 8].copy_from_slice(&root.no.to_le_bytes());
        reseal(&mut b, root.no);
        let e = reopen(b).unwrap_err();
        assert_corruption_at(&e, page_off(root.no) + P_CHILD0 as u64, false);
        assert!(e.to_string().contains("reachable twice"), "{e}");

        // A root at another level than the slot's height says.
        let mut b = image.clone();
        let c = Committed {
            height: 3,
            ..tree.current()
        };
        b[OFF_SLOT[1]..OFF_SLOT[1] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[1], &c));
        let e = reopen(b).unwrap_err();
        assert_corruption_at(&e, page_off(root.no), false);
        assert!(e.to_string().contains("another level"), "{e}");

        // Keys out of order within a leaf (the first key made the largest).
        let mut b = image.clone();
        let key_at = leaf_off + PAGE_HEADER_LEN + LEAF_ENTRY_FIXED;
        b[key_at] = b'z';
        reseal(&mut b, child0.no);
        let e = reopen(b).unwrap_err();
        assert_corruption_at(
            &e,
            page_off(child0.no) + (PAGE_HEADER_LEN + 326) as u64,
            false,
        );

        // A slot whose key count differs from the tree's.
        let mut b = image.clone();
        let c = Committed {
            keys: tree.keys() + 1,
            ..tree.current()
        };
        b[OFF_SLOT[1]..OFF_SLOT[1] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[1], &c));
        assert_corruption_at(
            &reopen(b).unwrap_err(),
            (OFF_SLOT[1] + SLOT_KEYS) as u64,
            false,
        );
    }

    #[test]
    fn readers_see_whole_commits_while_a_writer_commits() {
        // Commit `r` holds `round_state(r)`: every present key's location names its key and the
        // round, so a reader can tell a location that was never written for a key, and a scan
        // can tell a state that mixes rounds.
        const ROUNDS: u64 = 40;
        let (_region, tree) = new_tree(4096);
        commit_round(&tree, 0);
        let done = AtomicBool::new(false);
        let checked = AtomicU64::new(0);
        // The three threads start together; each reader makes a last pass after the writer is
        // done, so the readers always check something.
        let start = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                for round in 1..=ROUNDS {
                    commit_round(&tree, round);
                }
                done.store(true, Ordering::Release);
            });
            s.spawn(|| {
                let mut rng = StdRng::seed_from_u64(1);
                start.wait();
                loop {
                    // Pairs with the writer's release store once it committed everything.
                    let finished = done.load(Ordering::Acquire);
                    let i = rng.gen_range(0..600);
                    if let Some(l) = tree.get(&round_key(i)).unwrap() {
                        assert_eq!(l, loc(i, l.offset), "key {i}");
                        assert!(
                            l.offset <= ROUNDS && !(i + l.offset).is_multiple_of(7),
                            "key {i}: {l:?}"
                        );
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                    let snap = tree.read();
                    let round = snap.generation() - 1;
                    let want = round_state(round).get(&round_key(i)).copied();
                    assert_eq!(
                        snap.get(&round_key(i)).unwrap(),
                        want,
                        "key {i}, round {round}"
                    );
                    if finished {
                        break;
                    }
                }
            });
            s.spawn(|| {
                start.wait();
                loop {
                    let finished = done.load(Ordering::Acquire);
                    let it = tree.iter();
                    let round = it.snapshot().generation() - 1;
                    let all = scan_iter(it).unwrap();
                    assert_eq!(all, entries(&round_state(round)), "round {round}");
                    checked.fetch_add(all.len() as u64, Ordering::Relaxed);
                    let (files, next) = tree.count_files_in_leaf_range(b"key00300", 50).unwrap();
                    assert!(files.len() <= 50 && next.is_some());
                    if finished {
                        assert_eq!(round, ROUNDS, "the last pass reads the last commit");
                        break;
                    }
                }
            });
        });
        assert!(
            checked.load(Ordering::Relaxed) > 0,
            "the readers checked nothing"
        );
        assert_eq!(scan(&tree), entries(&round_state(ROUNDS)));
    }

    #[test]
    fn a_tree_in_a_mapped_file_reads_back_after_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000012.pbt");
        let key = |i: u64| format!("sst-key-{i:04}").into_bytes();
        let mut model = Model::new();
        {
            let region =
                Arc::new(matrixkv_pmem::MmapRegion::create(&path, 64 * PAGE_SIZE).unwrap());
            let tree = PBTree::create(region, &path, 12).unwrap();
            for batch in 0..3 {
                let ops: Vec<Op> = (0..300)
                    .map(|i| match (i + batch) % 5 {
                        0 => Op::Remove(key(i)),
                        _ => Op::Put(key(i), loc(i, batch)),
                    })
                    .collect();
                commit_ops(&tree, &ops);
                model = model_after(&model, &ops);
            }
            assert!(tree.height() >= 2);
        }
        let region = Arc::new(matrixkv_pmem::MmapRegion::open(&path).unwrap());
        let tree = PBTree::open(region, &path).unwrap();
        assert_eq!((tree.id(), tree.generation()), (12, 3));
        let probes: Vec<Vec<u8>> = (0..310).map(key).collect();
        for k in &probes {
            assert_eq!(tree.get(k).unwrap(), model.get(k).copied());
        }
        assert_eq!(scan(&tree), entries(&model));
        commit_ops(&tree, &[Op::Put(b"z".to_vec(), loc(13, 0))]);
        assert_eq!(tree.get(b"z").unwrap(), Some(loc(13, 0)));
    }

    #[test]
    fn leaf_range_scans_count_distinct_files_and_resume_after_the_last_key() {
        let (_region, tree) = new_tree(8);
        let empty = tree.count_files_in_leaf_range(b"", 10).unwrap();
        assert_eq!(empty, (Vec::new(), None));
        let key = |i: u64| format!("k{i:02}").into_bytes();
        // k00..k19 in files 0..=6 (three keys a file).
        let ops: Vec<Op> = (0..20).map(|i| Op::Put(key(i), loc(i / 3, i))).collect();
        commit_ops(&tree, &ops);
        let scan_from = |start: &[u8], n| tree.count_files_in_leaf_range(start, n).unwrap();
        assert_eq!(scan_from(b"k05", 4), (vec![1, 2], Some(key(9))));
        // From between keys: the first key after.
        assert_eq!(scan_from(b"k055", 2), (vec![2], Some(key(8))));
        // Wrapping around after the last key.
        assert_eq!(scan_from(b"k18", 5), (vec![0, 6], Some(key(3))));
        assert_eq!(scan_from(b"k19", 1), (vec![6], Some(key(0))));
        // A start after the last key starts at the first.
        assert_eq!(scan_from(b"z", 2), (vec![0], Some(key(2))));
        // More keys than the tree has: each once, and the next scan starts where this one did.
        assert_eq!(scan_from(b"k10", 100), ((0..=6).collect(), Some(key(10))));
        assert_eq!(scan_from(b"k10", 0), (Vec::new(), Some(key(10))));
    }

    #[test]
    fn leaf_range_scans_across_many_leaves_agree_with_a_model() {
        let mut rng = StdRng::seed_from_u64(5);
        let pool = key_pool(&mut rng, 1500);
        let (_region, tree) = new_tree(1024);
        let ops = random_batch(&mut rng, &pool, 1200, 0.0);
        commit_ops(&tree, &ops);
        let model = model_after(&Model::new(), &ops);
        assert!(tree.height() >= 2);
        let keys: Vec<&Vec<u8>> = model.keys().collect();
        for _ in 0..200 {
            let start = &pool[rng.gen_range(0..pool.len())];
            let n = rng.gen_range(0..keys.len() + 5);
            let first = keys.partition_point(|k| *k < start) % keys.len();
            let scanned = n.min(keys.len());
            let files: BTreeSet<u64> = (0..scanned)
                .map(|j| model[keys[(first + j) % keys.len()]].file)
                .collect();
            let next = keys[(first + scanned) % keys.len()].clone();
            let got = tree.count_files_in_leaf_range(start, n as u64).unwrap();
            assert_eq!(
                got,
                (files.into_iter().collect(), Some(next)),
                "{}",
                short(start)
            );
        }
    }

    #[test]
    fn the_tree_and_its_readers_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<PBTree>();
        send_sync::<Snapshot>();
        send_sync::<Iter>();
    }

    /// The worked example of docs/format/pbtree.md.
    fn golden_tree() -> (Arc<SimulatedRegion>, PBTree) {
        let region = Arc::new(SimulatedRegion::new(3 * PAGE_SIZE));
        let tree = PBTree::create(region.clone(), PATH, 7).unwrap();
        let mut w = tree.writer();
        w.insert(b"apple", Location::new(12, 0, 4096)).unwrap();
        w.insert(b"banana", Location::new(12, 4096, 2048)).unwrap();
        w.insert(b"cherry", Location::new(15, 0, 1000)).unwrap();
        w.commit().unwrap();
        let mut w = tree.writer();
        w.insert(b"banana", Location::new(16, 8192, 3000)).unwrap();
        assert!(w.remove(b"cherry").unwrap());
        w.commit().unwrap();
        (region, tree)
    }

    fn hex_lines(bytes: &[u8]) -> String {
        bytes
            .chunks(8)
            .enumerate()
            .map(|(i, c)| {
                let hex: Vec<String> = c.iter().map(|b| format!("{b:02x}")).collect();
                format!("{:04x}: {}", i * 8, hex.join(" "))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn golden_tree_matches_the_format_doc() {
        let doc = include_str!("../../../../docs/format/pbtree.md");
        let want = crate::golden::hex_blocks(doc);
        assert_eq!(want.len(), 3, "the header page, page 1 and page 2");
        let (region, tree) = golden_tree();
        let image = region.crash_image(CrashPolicy::KeepAll);
        for (no, want) in want.iter().enumerate() {
            let page = &image[no * PAGE_SIZE..(no + 1) * PAGE_SIZE];
            let end = page.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
            // The documented bytes may end with zeros (a field's zero high bytes).
            let got = &page[..end.max(want.len())];
            assert_eq!(
                got,
                &want[..],
                "docs/format/pbtree.md is out of date; page {no} now holds:\n{}",
                hex_lines(&page[..end.next_multiple_of(8)])
            );
        }
        assert_eq!(
            (tree.generation(), tree.pages_used(), tree.keys()),
            (2, 1, 2)
        );
        // The documented bytes, in a region of the documented length, open and read back.
        let mut documented = Vec::new();
        for block in &want {
            let mut page = block.clone();
            page.resize(PAGE_SIZE, 0);
            documented.extend_from_slice(&page);
        }
        let (_, tree) = reopen(documented).unwrap();
        assert_eq!(tree.id(), 7);
        assert_eq!(
            scan(&tree),
            vec![
                (b"apple".to_vec(), Location::new(12, 0, 4096)),
                (b"banana".to_vec(), Location::new(16, 8192, 3000)),
            ]
        );
        assert_eq!(tree.get(b"cherry").unwrap(), None);
        // Page 1 (generation 1) is free: the next commit writes there.
        let mut w = tree.writer();
        w.insert(b"date", Location::new(17, 0, 10)).unwrap();
        w.commit().unwrap();
        assert_eq!(tree.current().root, 1);
    }
}
