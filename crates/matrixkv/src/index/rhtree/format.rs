//! The byte layout of the Radix Hash Tree, specified in docs/format/rhtree.md: every constant
//! marked `FORMAT`, the header, the leaf directory, the entry records of the log area and the
//! buckets of a leaf.

use crate::checksum;
use crate::coding::{le_u32, le_u64};
use crate::index::pbtree::Location;

/// Magic number at offset 0 of the region.
// FORMAT: never change; see docs/format/rhtree.md
pub const MAGIC: [u8; 8] = *b"mxkv-rht";
/// The format version this build writes and reads.
// FORMAT: never change; see docs/format/rhtree.md
pub const FORMAT_VERSION: u32 = 1;
/// Bytes of a page: the header page, the directory areas and the leaf blocks are whole pages.
// FORMAT: never change; see docs/format/rhtree.md
pub const PAGE_SIZE: usize = 4096;
/// Bytes of a leaf block (one page).
// FORMAT: never change; see docs/format/rhtree.md
pub const LEAF_SIZE: usize = PAGE_SIZE;
/// Bytes of a bucket.
// FORMAT: never change; see docs/format/rhtree.md
pub const BUCKET_SIZE: usize = 64;
/// Buckets of a leaf.
pub const BUCKETS: usize = LEAF_SIZE / BUCKET_SIZE;
/// Slots of a bucket.
// FORMAT: never change; see docs/format/rhtree.md
pub const SLOTS: usize = 4;
/// Buckets a key may occupy: its home bucket and the next `PROBE - 1` (wrapping).
// FORMAT: never change; see docs/format/rhtree.md
pub const PROBE: usize = 4;
/// The longest key the index stores.
// FORMAT: never change; see docs/format/rhtree.md
pub const MAX_KEY_LEN: usize = 1024;
/// The largest routing symbol: 0 is the terminator, byte `b` is symbol `b + 1`.
pub const MAX_SYMBOL: u16 = 256;

// Header fields (offsets from the start of the region).
// FORMAT: never change; see docs/format/rhtree.md
pub(super) const OFF_VERSION: usize = 8;
pub(super) const OFF_LEAF_SIZE: usize = 12;
pub(super) const OFF_ID: usize = 16;
pub(super) const OFF_REGION_LEN: usize = 24;
pub(super) const OFF_DIR_PAGES: usize = 32;
pub(super) const OFF_LEAF_BLOCKS: usize = 36;
/// The header checksum covers the bytes before it.
pub(super) const OFF_HEADER_CRC: usize = 40;
/// The committed directory generation: the commit word of splits.
pub(super) const OFF_COMMITTED: usize = 48;
/// The epoch: the engine job the entries belong to (0 at `create`; see `RhTree::set_epoch`).
pub(super) const OFF_EPOCH: usize = 56;
/// Bytes of the header that may be non-zero (the rest of page 0 is zero).
pub(super) const HEADER_LEN: usize = 64;

// Directory fields (offsets from the start of its area).
// FORMAT: never change; see docs/format/rhtree.md
const D_COUNT: usize = 8;
const D_END: usize = 12;
const D_CRC: usize = 16;
/// Where the directory's entries start.
pub(super) const DIR_HEADER_LEN: usize = 24;
/// A directory entry without its prefix: block u32, lo u16, hi u16, depth u16.
const DIR_ENTRY_FIXED: usize = 10;

// Record fields (offsets from the record's start).
// FORMAT: never change; see docs/format/rhtree.md
const R_KEY_LEN: usize = 4;
const R_LOCATION: usize = 8;
/// Where a record's key starts.
pub(super) const RECORD_HEADER_LEN: usize = 32;

/// Offset of the signature of slot `slot` in a bucket.
pub(super) fn sig_at(slot: usize) -> usize {
    4 * slot
}

/// Offset of the record pointer of slot `slot` in a bucket (8-byte aligned).
pub(super) fn ptr_at(slot: usize) -> usize {
    32 + 8 * slot
}

/// A key's signature: its CRC32C (not masked). Its low 6 bits select the home bucket.
pub fn signature(key: &[u8]) -> u32 {
    crc32c::crc32c(key)
}

/// The home bucket of a key with signature `sig`.
pub(super) fn home_bucket(sig: u32) -> usize {
    sig as usize % BUCKETS
}

/// The routing symbol of `key` at `depth`: 0 if the key has no byte there (the terminator),
/// else the byte plus one.
pub fn symbol(key: &[u8], depth: usize) -> u16 {
    key.get(depth).map_or(0, |&b| u16::from(b) + 1)
}

/// Copies `v` to `b` at `at` (a field of a buffer the caller sized).
pub(super) fn put(b: &mut [u8], at: usize, v: &[u8]) {
    if let Some(d) = b.get_mut(at..at + v.len()) {
        d.copy_from_slice(v);
    }
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    let mut w = [0u8; 2];
    if let Some(s) = b.get(at..at + 2) {
        w.copy_from_slice(s);
    }
    u16::from_le_bytes(w)
}

/// Where the areas of a region lie, from the header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    /// Pages of each of the two directory areas.
    pub dir_pages: u32,
    /// Leaf blocks.
    pub leaf_blocks: u32,
    /// Bytes of the region.
    pub region_len: u64,
}

impl Layout {
    /// The default layout of a region of `len` bytes (a whole number of pages): directory areas
    /// of 1/64 of the pages each (at least 1), half the rest leaf blocks, the rest the log.
    pub fn for_len(len: usize) -> Option<Layout> {
        let pages = len / PAGE_SIZE;
        let dir_pages = (pages / 64).max(1);
        let rest = pages.checked_sub(1 + 2 * dir_pages)?;
        let leaf_blocks = rest / 2;
        if leaf_blocks < 2 || rest - leaf_blocks < 1 {
            return None;
        }
        Some(Layout {
            dir_pages: u32::try_from(dir_pages).ok()?,
            leaf_blocks: u32::try_from(leaf_blocks).ok()?,
            region_len: len as u64,
        })
    }

    /// The offset of the directory area of generation `g`.
    pub fn dir_off(&self, g: u64) -> usize {
        PAGE_SIZE * (1 + (g % 2) as usize * self.dir_pages as usize)
    }

    /// Bytes of a directory area.
    pub fn dir_bytes(&self) -> usize {
        self.dir_pages as usize * PAGE_SIZE
    }

    /// The offset of leaf block `block`.
    pub fn leaf_off(&self, block: u32) -> usize {
        PAGE_SIZE * (1 + 2 * self.dir_pages as usize) + block as usize * LEAF_SIZE
    }

    /// The first byte of the log area.
    pub fn log_start(&self) -> u64 {
        self.leaf_off(self.leaf_blocks) as u64
    }
}

/// The header (bytes `[0, HEADER_LEN)`), commit word 0.
pub(super) fn encode_header(id: u64, layout: &Layout) -> Vec<u8> {
    let mut b = vec![0u8; HEADER_LEN];
    put(&mut b, 0, &MAGIC);
    put(&mut b, OFF_VERSION, &FORMAT_VERSION.to_le_bytes());
    put(&mut b, OFF_LEAF_SIZE, &(LEAF_SIZE as u32).to_le_bytes());
    put(&mut b, OFF_ID, &id.to_le_bytes());
    put(&mut b, OFF_REGION_LEN, &layout.region_len.to_le_bytes());
    put(&mut b, OFF_DIR_PAGES, &layout.dir_pages.to_le_bytes());
    put(&mut b, OFF_LEAF_BLOCKS, &layout.leaf_blocks.to_le_bytes());
    let crc = checksum::checksum(b.get(..OFF_HEADER_CRC).unwrap_or_default());
    put(&mut b, OFF_HEADER_CRC, &crc.to_le_bytes());
    b
}

/// What the header stores (decoded, not yet checked beyond its checksum).
pub(super) struct Header {
    pub version: u32,
    pub leaf_size: u32,
    pub id: u64,
    pub layout: Layout,
    pub crc_stored: u32,
    pub crc_computed: u32,
}

pub(super) fn decode_header(b: &[u8]) -> Header {
    Header {
        version: le_u32(b, OFF_VERSION),
        leaf_size: le_u32(b, OFF_LEAF_SIZE),
        id: le_u64(b, OFF_ID),
        layout: Layout {
            dir_pages: le_u32(b, OFF_DIR_PAGES),
            leaf_blocks: le_u32(b, OFF_LEAF_BLOCKS),
            region_len: le_u64(b, OFF_REGION_LEN),
        },
        crc_stored: le_u32(b, OFF_HEADER_CRC),
        crc_computed: checksum::checksum(b.get(..OFF_HEADER_CRC).unwrap_or_default()),
    }
}

/// A live leaf as the directory lists it: the keys that start with `prefix` and whose symbol
/// at depth `prefix.len()` lies in `[lo, hi]`, stored in leaf block `block`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafMeta {
    /// The leaf block.
    pub block: u32,
    /// The bytes every key of the leaf starts with; its length is the leaf's depth.
    pub prefix: Vec<u8>,
    /// Lowest symbol at the depth.
    pub lo: u16,
    /// Highest symbol at the depth.
    pub hi: u16,
}

impl LeafMeta {
    /// True if the leaf covers `key`.
    pub fn covers(&self, key: &[u8]) -> bool {
        let s = symbol(key, self.prefix.len());
        key.starts_with(&self.prefix) && self.lo <= s && s <= self.hi
    }
}

/// The directory of generation `g` listing `leaves` (in the order given), seeded with `id`.
pub(super) fn encode_directory<'a>(
    id: u64,
    g: u64,
    count: usize,
    leaves: impl Iterator<Item = &'a LeafMeta>,
) -> Vec<u8> {
    let mut b = vec![0u8; DIR_HEADER_LEN];
    for l in leaves {
        b.extend_from_slice(&l.block.to_le_bytes());
        b.extend_from_slice(&l.lo.to_le_bytes());
        b.extend_from_slice(&l.hi.to_le_bytes());
        b.extend_from_slice(&(l.prefix.len() as u16).to_le_bytes());
        b.extend_from_slice(&l.prefix);
    }
    let end = b.len() as u32;
    put(&mut b, 0, &g.to_le_bytes());
    put(&mut b, D_COUNT, &(count as u32).to_le_bytes());
    put(&mut b, D_END, &end.to_le_bytes());
    let crc = directory_crc(id, &b);
    put(&mut b, D_CRC, &crc.to_le_bytes());
    b
}

/// The checksum of the directory `b` (its bytes up to its end): the id, bytes `[0, 16)` and
/// the entries.
pub(super) fn directory_crc(id: u64, b: &[u8]) -> u32 {
    checksum::checksum3(
        &id.to_le_bytes(),
        b.get(..D_CRC).unwrap_or_default(),
        b.get(DIR_HEADER_LEN..).unwrap_or_default(),
    )
}

/// The fixed fields of a directory: generation, count, end, stored crc.
pub(super) fn directory_fields(b: &[u8]) -> (u64, u32, u32, u32) {
    (
        le_u64(b, 0),
        le_u32(b, D_COUNT),
        le_u32(b, D_END),
        le_u32(b, D_CRC),
    )
}

/// The entries of the directory `b` (verified bytes up to its end): `None` if they do not
/// decode to exactly `count` entries ending at the end.
pub(super) fn decode_entries(b: &[u8], count: u32) -> Option<Vec<LeafMeta>> {
    let mut at = DIR_HEADER_LEN;
    let mut out = Vec::new();
    for _ in 0..count {
        let fixed = b.get(at..at + DIR_ENTRY_FIXED)?;
        let depth = le_u16(fixed, 8) as usize;
        let prefix = b.get(at + DIR_ENTRY_FIXED..at + DIR_ENTRY_FIXED + depth)?;
        out.push(LeafMeta {
            block: le_u32(fixed, 0),
            lo: le_u16(fixed, 4),
            hi: le_u16(fixed, 6),
            prefix: prefix.to_vec(),
        });
        at += DIR_ENTRY_FIXED + depth;
    }
    (at == b.len()).then_some(out)
}

/// Bytes of the record of a key of `key_len` bytes (a multiple of 8).
pub(super) fn record_len(key_len: usize) -> usize {
    (RECORD_HEADER_LEN + key_len).next_multiple_of(8)
}

/// The record mapping `key` to `loc`, seeded with `id`.
pub(super) fn encode_record(id: u64, key: &[u8], loc: &Location) -> Vec<u8> {
    let mut b = vec![0u8; record_len(key.len())];
    put(&mut b, R_KEY_LEN, &(key.len() as u16).to_le_bytes());
    put(&mut b, R_LOCATION, &loc.file().to_le_bytes());
    put(&mut b, R_LOCATION + 8, &loc.offset().to_le_bytes());
    put(&mut b, R_LOCATION + 16, &loc.size().to_le_bytes());
    put(&mut b, R_LOCATION + 20, &loc.flags().to_le_bytes());
    put(&mut b, RECORD_HEADER_LEN, key);
    let crc = record_crc(id, &b, key.len());
    put(&mut b, 0, &crc.to_le_bytes());
    b
}

/// The key length a record header `b` declares.
pub(super) fn record_key_len(b: &[u8]) -> usize {
    le_u16(b, R_KEY_LEN) as usize
}

/// The checksum of a record whose bytes are `b` and key `key_len` bytes: the id and the bytes
/// `[4, 32 + key_len)`.
pub(super) fn record_crc(id: u64, b: &[u8], key_len: usize) -> u32 {
    checksum::checksum2(
        &id.to_le_bytes(),
        b.get(4..RECORD_HEADER_LEN + key_len).unwrap_or_default(),
    )
}

/// The stored checksum, key and location of a record whose bytes are `b`.
pub(super) fn decode_record(b: &[u8]) -> (u32, &[u8], Location) {
    let key_len = record_key_len(b);
    let loc = Location::with_flags(
        le_u64(b, R_LOCATION),
        le_u64(b, R_LOCATION + 8),
        le_u32(b, R_LOCATION + 16),
        le_u32(b, R_LOCATION + 20),
    );
    let key = b
        .get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + key_len)
        .unwrap_or_default();
    (le_u32(b, 0), key, loc)
}
