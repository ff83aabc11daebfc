//! The byte layout of the persistent skiplist, specified in docs/format/pskiplist.md: every
//! constant marked `FORMAT`, the sizes of nodes and version records, the checksum seed, the
//! encoders of the header, a node and a version record, and the little-endian field helpers.

use crate::checksum;
use crate::error::{Error, Result};
use crate::key::{self, SeqNo, ValueKind};

/// Magic number at offset 0 of the region.
// FORMAT: never change; see docs/format/pskiplist.md
pub const MAGIC: [u8; 8] = *b"mxkv-psl";
/// The format version this build writes and reads.
// FORMAT: never change; see docs/format/pskiplist.md
pub const FORMAT_VERSION: u32 = 1;
/// Height of the head tower, and the largest height of a node.
// FORMAT: never change; see docs/format/pskiplist.md
pub const MAX_HEIGHT: usize = 12;

// Header fields (offsets from the start of the region).
// FORMAT: never change; see docs/format/pskiplist.md
pub(super) const OFF_VERSION: usize = 8;
pub(super) const OFF_MAX_HEIGHT: usize = 12;
pub(super) const OFF_ID: usize = 16;
pub(super) const OFF_REGION_LEN: usize = 24;
/// The header checksum covers the bytes before it.
pub(super) const OFF_HEADER_CRC: usize = 32;
/// 4 zero bytes after the checksum.
pub(super) const OFF_HEADER_PAD: usize = 36;
/// The published allocation end (a commit word).
pub(super) const OFF_ALLOC_END: u64 = 40;
/// The committed sequence number (a commit word): versions above it belong to a batch whose
/// commit was not published, and no reader sees them.
pub(super) const OFF_COMMITTED: u64 = 48;
/// The head tower: `MAX_HEIGHT` link words.
pub(super) const OFF_HEAD: u64 = 56;
/// Where nodes and version records start.
pub const DATA_START: u64 = OFF_HEAD + 8 * MAX_HEIGHT as u64;

// Node fields (offsets from the node's start).
// FORMAT: never change; see docs/format/pskiplist.md
/// crc u32, key length u32, height u8, 7 zero bytes.
pub(super) const NODE_FIXED_LEN: usize = 16;
/// The node's newest-version word (a commit word).
pub(super) const NODE_VERSIONS: u64 = 16;
/// `next[0]`; `next[i]` is 8 bytes further per level. The key follows the tower.
pub(super) const NODE_NEXT: u64 = 24;

// Version record fields (offsets from the record's start).
// FORMAT: never change; see docs/format/pskiplist.md
/// crc u32, value length u32, tag u64 (`seq << 8 | kind`), prev u64; the value follows.
pub(super) const VERSION_HEADER_LEN: usize = 24;
/// The `prev` word of a version record.
pub(super) const VERSION_PREV: u64 = 16;

/// Bytes `n` takes once padded to 8.
fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// Bytes of a node of `height` holding a key of `key_len` bytes.
pub(super) fn node_len(height: usize, key_len: usize) -> u64 {
    NODE_NEXT + 8 * height as u64 + pad8(key_len as u64)
}

/// Bytes of a version record holding a value of `value_len` bytes.
pub(super) fn version_len(value_len: usize) -> u64 {
    VERSION_HEADER_LEN as u64 + pad8(value_len as u64)
}

/// The offset `x` as a region offset (an offset that does not fit fails the region's range
/// check as out of range).
pub(super) fn at(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// The seed of the checksums of a node and of its version records: the list's id and the
/// node's offset.
pub(super) fn seed(id: u64, node_off: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..].copy_from_slice(&node_off.to_le_bytes());
    s
}

/// The header's first 56 bytes of a new list: fixed fields, checksum, allocation end,
/// committed sequence number (0).
pub(super) fn encode_header(id: u64, region_len: u64) -> [u8; OFF_HEAD as usize] {
    let mut h = [0u8; OFF_HEAD as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[OFF_VERSION..OFF_VERSION + 4].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    h[OFF_MAX_HEIGHT..OFF_MAX_HEIGHT + 4].copy_from_slice(&(MAX_HEIGHT as u32).to_le_bytes());
    h[OFF_ID..OFF_ID + 8].copy_from_slice(&id.to_le_bytes());
    h[OFF_REGION_LEN..OFF_REGION_LEN + 8].copy_from_slice(&region_len.to_le_bytes());
    let crc = checksum::checksum(&h[..OFF_HEADER_CRC]);
    h[OFF_HEADER_CRC..OFF_HEADER_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    if let Some(end) = h.get_mut(OFF_ALLOC_END as usize..OFF_COMMITTED as usize) {
        end.copy_from_slice(&DATA_START.to_le_bytes());
    }
    h
}

/// Appends a node at `node_off` to `out`: fixed part, newest-version word, tower, key, padding.
pub(super) fn encode_node(
    out: &mut Vec<u8>,
    id: u64,
    node_off: u64,
    key: &[u8],
    versions: u64,
    next: &[u64],
) -> Result<()> {
    let key_len = u32::try_from(key.len())
        .map_err(|_| Error::invalid(format!("a key of {} bytes is too long", key.len())))?;
    let height = u8::try_from(next.len()).unwrap_or(u8::MAX);
    let mut fixed = [0u8; NODE_FIXED_LEN];
    fixed[4..8].copy_from_slice(&key_len.to_le_bytes());
    fixed[8] = height;
    let crc = checksum::checksum3(&seed(id, node_off), &fixed[4..], key);
    fixed[..4].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&fixed);
    out.extend_from_slice(&versions.to_le_bytes());
    for n in next {
        out.extend_from_slice(&n.to_le_bytes());
    }
    out.extend_from_slice(key);
    out.resize(out.len().next_multiple_of(8), 0);
    Ok(())
}

/// Appends a version record of the node at `node_off` to `out`.
pub(super) fn encode_version(
    out: &mut Vec<u8>,
    id: u64,
    node_off: u64,
    seq: SeqNo,
    kind: ValueKind,
    prev: u64,
    value: &[u8],
) -> Result<()> {
    let value_len = u32::try_from(value.len())
        .map_err(|_| Error::invalid(format!("a value of {} bytes is too long", value.len())))?;
    let mut h = [0u8; VERSION_HEADER_LEN];
    h[4..8].copy_from_slice(&value_len.to_le_bytes());
    h[8..16].copy_from_slice(&key::pack_tag(seq, kind).to_le_bytes());
    h[16..24].copy_from_slice(&prev.to_le_bytes());
    let crc = checksum::checksum3(&seed(id, node_off), &h[4..], value);
    h[..4].copy_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&h);
    out.extend_from_slice(value);
    out.resize(out.len().next_multiple_of(8), 0);
    Ok(())
}

pub(super) use crate::coding::{le_u32, le_u64};
