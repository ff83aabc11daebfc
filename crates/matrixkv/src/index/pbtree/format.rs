//! The byte layout of the persistent B+-tree, specified in docs/format/pbtree.md: every
//! constant marked `FORMAT`, the little-endian field helpers, the superblock slot
//! (`Committed`), the encoders of the header page, a slot and a node page, and the decoder of
//! a node page (`Page`, read and verified by `Shared::parse`).

use crate::checksum;
use crate::error::{CorruptionReason, Result};
use std::sync::Arc;

use super::{Location, Shared};

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
pub(super) const OFF_VERSION: usize = 8;
pub(super) const OFF_PAGE_SIZE: usize = 12;
pub(super) const OFF_ID: usize = 16;
pub(super) const OFF_REGION_LEN: usize = 24;
/// The header checksum covers the bytes before it.
pub(super) const OFF_HEADER_CRC: usize = 32;
/// 4 zero bytes after the checksum.
pub(super) const OFF_HEADER_PAD: usize = 36;
/// The committed generation: the commit word. Its parity selects the active slot.
pub(super) const OFF_COMMITTED: usize = 40;
/// The two superblock slots: generation `g` lives in slot `g % 2`.
pub(super) const OFF_SLOT: [usize; 2] = [64, 128];
/// End of the bytes of page 0 that are not zero (the end of slot 1's reserved bytes).
pub(super) const HEADER_END: usize = 192;

// Superblock slot fields (offsets from the slot's start).
// FORMAT: never change; see docs/format/pbtree.md
pub(super) const SLOT_ROOT: usize = 8;
pub(super) const SLOT_KEYS: usize = 16;
pub(super) const SLOT_PAGES: usize = 24;
pub(super) const SLOT_HEIGHT: usize = 32;
/// The slot checksum covers the bytes before it.
pub(super) const SLOT_CRC: usize = 36;
/// Bytes of a slot: the fields and the checksum.
pub(super) const SLOT_LEN: usize = 40;
/// Bytes from one slot to the next (a slot's bytes `[SLOT_LEN, SLOT_SPAN)` are zero).
pub(super) const SLOT_SPAN: usize = 64;

// Node page fields (offsets from the page's start).
// FORMAT: never change; see docs/format/pbtree.md
const P_KIND: usize = 4;
const P_LEVEL: usize = 5;
const P_COUNT: usize = 6;
pub(super) const P_GENERATION: usize = 8;
/// Inner page: child 0 (the subtree below separator 1). Leaf: 0.
pub(super) const P_CHILD0: usize = 16;
/// End of the last entry (from the page's start).
const P_END: usize = 24;
/// 6 zero bytes.
const P_RESERVED: usize = 26;
/// Where the entries start.
pub(super) const PAGE_HEADER_LEN: usize = 32;
pub(super) const KIND_LEAF: u8 = 1;
const KIND_INNER: u8 = 2;
/// A leaf entry: key length u16, the location, then the key.
pub(super) const LEAF_ENTRY_FIXED: usize = 2 + LOCATION_LEN;
/// An inner entry: key length u16, the child page, then the key.
pub(super) const INNER_ENTRY_FIXED: usize = 2 + 8;
/// Bytes of an encoded [`Location`].
const LOCATION_LEN: usize = 24;
/// Where a leaf entry's location flags are, from the entry's start (after the key length,
/// file number, block offset and block size).
const LOCATION_FLAGS_AT: usize = 2 + 20;
/// Location flag bit 0: the key's newest version in the location's SSTable is a merge operand.
pub(crate) const LOCATION_MERGE: u32 = 1;
/// Every location flag format 1 knows; any other bit is refused by writers and by reads.
pub(super) const LOCATION_FLAGS: u32 = LOCATION_MERGE;
/// Bytes of a page that hold entries.
pub(super) const PAGE_CAPACITY: usize = PAGE_SIZE - PAGE_HEADER_LEN;
/// The largest level of a page (a bound for `open`; real trees stay far below it).
pub(super) const MAX_LEVEL: u8 = 63;

fn le_u16(b: &[u8], at: usize) -> u16 {
    let mut w = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        w.copy_from_slice(s);
    }
    u16::from_le_bytes(w)
}

pub(super) use crate::coding::{le_u32, le_u64};

/// Copies `v` to `b` at `at` (a field of a buffer the caller sized).
fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

/// The offset `x` as a region offset (an offset that does not fit fails the region's range
/// check as out of range).
pub(super) fn at(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// The byte offset of page `no`.
pub(super) fn page_off(no: u64) -> u64 {
    no.saturating_mul(PAGE_SIZE as u64)
}

/// The offset of the slot of generation `g`.
pub(super) fn slot_off(g: u64) -> usize {
    if g.is_multiple_of(2) {
        OFF_SLOT[0]
    } else {
        OFF_SLOT[1]
    }
}

/// The seed of a checksum: the tree's id and the page number (or slot offset).
pub(super) fn seed(id: u64, n: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..].copy_from_slice(&n.to_le_bytes());
    s
}

/// A committed tree, as a superblock slot records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Committed {
    /// The number of the commit (0: the empty tree `create` writes).
    pub(super) generation: u64,
    /// The root page (0: the tree is empty).
    pub(super) root: u64,
    /// Keys in the tree.
    pub(super) keys: u64,
    /// Node pages of the tree.
    pub(super) pages: u64,
    /// Levels of the tree (0: empty; 1: a root leaf).
    pub(super) height: u32,
}

impl Committed {
    pub(super) const EMPTY: Committed = Committed {
        generation: 0,
        root: 0,
        keys: 0,
        pages: 0,
        height: 0,
    };
}

/// The slot recording `c`, at offset `off` of a tree with id `id`.
pub(super) fn encode_slot(id: u64, off: usize, c: &Committed) -> [u8; SLOT_LEN] {
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
pub(super) fn encode_header_page(id: u64, region_len: u64) -> Vec<u8> {
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
pub(super) fn encode_page(
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
pub(super) struct Page {
    pub(super) no: u64,
    /// Shared: a page is immutable once verified, so the page cache hands out clones.
    buf: Arc<[u8]>,
    pub(super) leaf: bool,
    pub(super) level: u8,
    pub(super) generation: u64,
    /// Where each entry starts in `buf`.
    pub(super) entries: Arc<[usize]>,
    /// End of the last entry.
    end: usize,
}

impl Page {
    pub(super) fn count(&self) -> usize {
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
    pub(super) fn key(&self, i: usize) -> &[u8] {
        let Some(&e) = self.entries.get(i) else {
            return &[];
        };
        let len = usize::from(le_u16(&self.buf, e));
        let start = e + self.fixed();
        self.buf.get(start..start + len).unwrap_or_default()
    }

    /// The location of entry `i` of a leaf.
    pub(super) fn location(&self, i: usize) -> Location {
        self.entries
            .get(i)
            .map_or_else(Location::default, |&e| Location::decode(&self.buf, e + 2))
    }

    /// Where child `i` of an inner page is stored, from the page's start.
    pub(super) fn child_field(&self, i: usize) -> usize {
        match i.checked_sub(1) {
            None => P_CHILD0,
            Some(j) => self.entries.get(j).map_or(P_CHILD0, |&e| e + 2),
        }
    }

    /// Child `i` of an inner page (`0..=count`).
    pub(super) fn child(&self, i: usize) -> u64 {
        le_u64(&self.buf, self.child_field(i))
    }

    /// Bytes of the page's entries.
    pub(super) fn used(&self) -> usize {
        self.end - PAGE_HEADER_LEN
    }

    /// The first entry whose key is at least `key` (`count` if none).
    pub(super) fn lower_bound(&self, key: &[u8]) -> usize {
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
    pub(super) fn upper_bound(&self, key: &[u8]) -> usize {
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

impl Shared {
    /// Verifies page `no`: checksum, kind and level, entries within the page and in strictly
    /// ascending key order, keys of at most [`MAX_KEY_LEN`] bytes, zero reserved bytes and
    /// tail, child pages inside the region, no unknown location flag, a leaf not empty.
    pub(super) fn parse(&self, no: u64, buf: Vec<u8>) -> Result<Page> {
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
            if leaf && le_u32(&buf, pos + LOCATION_FLAGS_AT) & !LOCATION_FLAGS != 0 {
                return Err(bad(pos + LOCATION_FLAGS_AT, "unknown location flags"));
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
            entries: entries.into(),
            end: pos,
            buf: buf.into(),
        })
    }
}
