//! The persistent skiplist: the NVM memtable of the NoveLSM mode (NoveLSM, USENIX ATC 2018;
//! docs/decisions/0023-novelsm-mode.md). Its nodes live in one fast-tier [`Region`] and link by
//! offsets, so a restart remaps the region and follows the offsets from the header: there is no
//! log to replay. The byte layout, the commit protocol and what recovery checks are specified
//! in docs/format/pskiplist.md.
//!
//! Design:
//! - one *node* per distinct user key (height, key, a tower of `next` offsets, and the offset of
//!   the key's newest *version record*); every write of a key adds a version record (sequence
//!   number, kind, value, offset of the next older version of the same key) and publishes the
//!   node's newest-version word. An existing key is thus updated in place (no new node, no
//!   log), and the older versions stay chained behind the new one for snapshot readers;
//! - nodes and version records are bump-allocated, 8-byte aligned, after the header; the
//!   header holds the published allocation end, and bytes after it are garbage by definition;
//! - an insert is persisted before it returns: payload written and persisted, the allocation
//!   end published, then one aligned 8-byte word published as the commit point (the
//!   predecessor's level-0 link for a new key, the node's newest-version word for an update).
//!   Higher levels of a new node are linked after the commit point, bottom up; a crash between
//!   them leaves a node reachable at level 0 only, which searches handle;
//! - a version is visible only once the header's *committed sequence number* reaches it:
//!   [`PSkipList::commit`] publishes it after the inserts of a write batch, so a batch of
//!   several inserts becomes visible (and survives a crash) at one aligned store, and the
//!   versions of a batch whose commit was never published are skipped by readers, iterators
//!   and recovery;
//! - every node and version record carries a CRC32C seeded with the list's id (the region's
//!   file number) and the node's offset, so a pointer that strays to another list's leftovers
//!   or to another key's record is detected, not followed. Every read verifies what it uses.
//!
//! Who calls it: nothing yet; the NoveLSM mode will make it the active memtable of alternate
//! rotations (decision 0023). [`PSkipList::max_seq`] is for the engine's sequence recovery.
//!
//! Concurrency: `PSkipList` is `Send + Sync` and every method takes `&self`. Inserts are
//! serialised by an internal mutex (one writer at a time); [`PSkipList::get`] and iterators
//! take no lock and run concurrently with the writer. A reader only follows offsets it loaded
//! with [`Region::read_u64`] from a commit word, i.e. ones the writer published with
//! [`Region::publish_u64`] (release store, acquire load on a mapped region) after writing
//! everything they lead to, and the `prev` offsets inside records it reached that way. The
//! bytes of a published node or record are never written again, except its commit words,
//! which are only ever published (never written with plain stores). A reader sees a
//! concurrent insert or not, depending on timing; a reader that needs a consistent view
//! filters by sequence number (the engine publishes a sequence number only after the inserts
//! it covers returned). The statistics ([`PSkipList::entries`], ...) are updated by the writer
//! as it publishes (the key and version counts right after the commit point) and may lag a
//! concurrent insert. One process opens a region at a time (the engine's directory lock).
//!
//! Errors: an I/O error while an insert writes or persists *poisons* the list: the insert's
//! fate is decided by the next recovery, and every later insert fails with
//! [`Error::Poisoned`] (reads keep working). Corruption is reported with
//! [`ArtifactKind::PersistentMemtable`], the region's path and the offset of the damaged node,
//! record or pointer word.
#![cfg_attr(
    not(test),
    allow(
        dead_code,
        reason = "wired into the engine by the NoveLSM mode (issue 11, decision 0023)"
    )
)]
#![deny(clippy::indexing_slicing)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::tier::Region;

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
const OFF_VERSION: usize = 8;
const OFF_MAX_HEIGHT: usize = 12;
const OFF_ID: usize = 16;
const OFF_REGION_LEN: usize = 24;
/// The header checksum covers the bytes before it.
const OFF_HEADER_CRC: usize = 32;
/// 4 zero bytes after the checksum.
const OFF_HEADER_PAD: usize = 36;
/// The published allocation end (a commit word).
const OFF_ALLOC_END: u64 = 40;
/// The committed sequence number (a commit word): versions above it belong to a batch whose
/// commit was not published, and no reader sees them.
const OFF_COMMITTED: u64 = 48;
/// The head tower: `MAX_HEIGHT` link words.
const OFF_HEAD: u64 = 56;
/// Where nodes and version records start.
pub const DATA_START: u64 = OFF_HEAD + 8 * MAX_HEIGHT as u64;

// Node fields (offsets from the node's start).
// FORMAT: never change; see docs/format/pskiplist.md
/// crc u32, key length u32, height u8, 7 zero bytes.
const NODE_FIXED_LEN: usize = 16;
/// The node's newest-version word (a commit word).
const NODE_VERSIONS: u64 = 16;
/// `next[0]`; `next[i]` is 8 bytes further per level. The key follows the tower.
const NODE_NEXT: u64 = 24;

// Version record fields (offsets from the record's start).
// FORMAT: never change; see docs/format/pskiplist.md
/// crc u32, value length u32, tag u64 (`seq << 8 | kind`), prev u64; the value follows.
const VERSION_HEADER_LEN: usize = 24;
/// The `prev` word of a version record.
const VERSION_PREV: u64 = 16;

/// Bytes `n` takes once padded to 8.
fn pad8(n: u64) -> u64 {
    n.div_ceil(8) * 8
}

/// Bytes of a node of `height` holding a key of `key_len` bytes.
fn node_len(height: usize, key_len: usize) -> u64 {
    NODE_NEXT + 8 * height as u64 + pad8(key_len as u64)
}

/// Bytes of a version record holding a value of `value_len` bytes.
fn version_len(value_len: usize) -> u64 {
    VERSION_HEADER_LEN as u64 + pad8(value_len as u64)
}

/// The offset `x` as a region offset (an offset that does not fit fails the region's range
/// check as out of range).
fn at(x: u64) -> usize {
    usize::try_from(x).unwrap_or(usize::MAX)
}

/// The seed of the checksums of a node and of its version records: the list's id and the
/// node's offset.
fn seed(id: u64, node_off: u64) -> [u8; 16] {
    let mut s = [0u8; 16];
    s[..8].copy_from_slice(&id.to_le_bytes());
    s[8..].copy_from_slice(&node_off.to_le_bytes());
    s
}

/// The header's first 56 bytes of a new list: fixed fields, checksum, allocation end,
/// committed sequence number (0).
fn encode_header(id: u64, region_len: u64) -> [u8; OFF_HEAD as usize] {
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
fn encode_node(
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
fn encode_version(
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

/// A node read from the region, its checksum verified.
#[derive(Debug, Clone)]
struct Node {
    off: u64,
    height: usize,
    key: Vec<u8>,
}

/// A version record read from the region, its checksum verified.
#[derive(Debug, Clone)]
struct Version {
    off: u64,
    seq: SeqNo,
    kind: ValueKind,
    prev: u64,
    value: Vec<u8>,
}

impl Version {
    fn tag(&self) -> u64 {
        key::pack_tag(self.seq, self.kind)
    }
}

/// A walk down the version chain of one node, newest version first.
struct Chain {
    node_off: u64,
    /// The next record to read (0: the chain ends).
    next: u64,
    /// The word that holds `next` (for error messages).
    from: u64,
    /// The record read last: offset and sequence number (the next one must be older on both).
    last: Option<(u64, SeqNo)>,
}

/// The link words and successors a search passed at each level, and the nodes around the key.
struct Position {
    /// The last node whose key is below the search key (`None`: the head).
    before: Option<Node>,
    /// The first node whose key is at least the search key.
    after: Option<Node>,
    /// At each level, the word that links to `succs[level]` (in `before` or above it).
    links: [u64; MAX_HEIGHT],
    /// At each level, the first node at or after the search key (0: none).
    succs: [u64; MAX_HEIGHT],
}

/// What the writer mutex protects.
#[derive(Debug)]
struct WriterState {
    /// The published allocation end: where the next node or record goes.
    alloc_end: u64,
    /// xorshift64 state for node heights (never 0).
    rng: u64,
    /// Set by the first failed write or persist of an insert: the cause.
    poisoned: Option<String>,
}

/// A persistent skiplist in one region. See the module documentation.
#[derive(Debug)]
pub struct PSkipList {
    region: Arc<dyn Region>,
    /// The region's file (error messages only).
    path: PathBuf,
    /// The list's id, stored in the header; seeds every checksum.
    id: u64,
    writer: Mutex<WriterState>,
    // Statistics, updated by the writer after each commit point (Relaxed counters).
    used: AtomicU64,
    entries: AtomicU64,
    keys: AtomicU64,
    max_seq: AtomicU64,
    /// The smallest committed sequence number found by `open` (`u64::MAX`: none, or a list
    /// made by `create`).
    min_seq: AtomicU64,
    /// The published committed sequence number (readers see no version above it).
    committed: AtomicU64,
}

impl PSkipList {
    /// Makes `region` an empty list with id `id` (the engine passes the region's file number):
    /// writes the header and persists it. `path` is the region's file, for error messages.
    ///
    /// # Preconditions
    ///
    /// Nobody else uses `region`. Its bytes after the header may be anything (a recycled
    /// region): the list never reads bytes it did not write and publish.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the region cannot hold the header; [`Error::Io`] if
    /// writing or persisting it fails.
    pub fn create(region: Arc<dyn Region>, path: impl Into<PathBuf>, id: u64) -> Result<PSkipList> {
        let path = path.into();
        let len = region.len() as u64;
        if len < DATA_START {
            return Err(Error::invalid(format!(
                "persistent memtable region {} has {len} bytes; its header alone needs \
                 {DATA_START}",
                path.display()
            )));
        }
        let mut header = encode_header(id, len).to_vec();
        header.resize(at(DATA_START), 0);
        region
            .write(0, &header)
            .map_err(|e| Error::io(IoOp::Write, &path, e))?;
        region
            .persist(0, header.len())
            .map_err(|e| Error::io(IoOp::Persist, &path, e))?;
        Ok(PSkipList::with_state(region, path, id, DATA_START, [0; 3]))
    }

    /// Opens the list in `region`: checks the header, then walks level 0 checking every node
    /// (checksum, bounds, strictly ascending keys), every version chain (checksums, strictly
    /// decreasing sequence numbers and offsets) and that every higher level links a subsequence
    /// of level 0 in order. Bytes after the published allocation end are ignored (an insert
    /// interrupted by a crash left them there); new inserts overwrite them.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind [`ArtifactKind::PersistentMemtable`], `path`, the offset of
    /// the damaged header field, node, record or pointer word); [`Error::NotSupported`] for
    /// another format version; [`Error::Io`] if the region cannot be read.
    pub fn open(region: Arc<dyn Region>, path: impl Into<PathBuf>) -> Result<PSkipList> {
        let path = path.into();
        let len = region.len() as u64;
        let corrupt = |offset: usize, reason| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentMemtable, &path, offset as u64),
                reason,
            )
        };
        if len < DATA_START {
            return Err(corrupt(0, CorruptionReason::Truncated));
        }
        let mut h = [0u8; OFF_ALLOC_END as usize];
        region
            .read(0, &mut h)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(corrupt(0, CorruptionReason::BadMagic));
        }
        let version = le_u32(&h, OFF_VERSION);
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported {
                what: "persistent memtable",
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
        if le_u32(&h, OFF_MAX_HEIGHT) as usize != MAX_HEIGHT {
            return Err(corrupt(
                OFF_MAX_HEIGHT,
                CorruptionReason::Invalid("the maximum height is not the one of format 1"),
            ));
        }
        if le_u64(&h, OFF_REGION_LEN) != len {
            return Err(corrupt(
                OFF_REGION_LEN,
                CorruptionReason::Invalid("the region's length differs from its header's"),
            ));
        }
        if le_u32(&h, OFF_HEADER_PAD) != 0 {
            return Err(corrupt(
                OFF_HEADER_PAD,
                CorruptionReason::Invalid("nonzero header padding"),
            ));
        }
        let id = le_u64(&h, OFF_ID);
        let alloc_end = region
            .read_u64(at(OFF_ALLOC_END))
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if alloc_end < DATA_START || alloc_end > len || !alloc_end.is_multiple_of(8) {
            return Err(corrupt(
                at(OFF_ALLOC_END),
                CorruptionReason::Invalid("the allocation end is outside the region"),
            ));
        }
        let committed = region
            .read_u64(at(OFF_COMMITTED))
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if committed > SeqNo::MAX.0 {
            return Err(corrupt(
                at(OFF_COMMITTED),
                CorruptionReason::Invalid("the committed sequence number is out of range"),
            ));
        }
        let list = PSkipList::with_state(region, path, id, alloc_end, [0; 3]);
        list.committed.store(committed, Ordering::Relaxed);
        let [keys, entries, max_seq] = list.verify(alloc_end)?;
        list.keys.store(keys, Ordering::Relaxed);
        list.entries.store(entries, Ordering::Relaxed);
        list.max_seq.store(max_seq, Ordering::Relaxed);
        Ok(list)
    }

    fn with_state(
        region: Arc<dyn Region>,
        path: PathBuf,
        id: u64,
        alloc_end: u64,
        [keys, entries, max_seq]: [u64; 3],
    ) -> PSkipList {
        // splitmix64 of the id and the allocation end: a reopened list does not repeat the
        // heights it drew before; `| 1` keeps the xorshift state nonzero.
        let mut z = (id ^ alloc_end.rotate_left(32)).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        PSkipList {
            region,
            path,
            id,
            writer: Mutex::new(WriterState {
                alloc_end,
                rng: (z ^ (z >> 31)) | 1,
                poisoned: None,
            }),
            used: AtomicU64::new(alloc_end),
            entries: AtomicU64::new(entries),
            keys: AtomicU64::new(keys),
            max_seq: AtomicU64::new(max_seq),
            min_seq: AtomicU64::new(u64::MAX),
            committed: AtomicU64::new(0),
        }
    }

    /// The checks of [`PSkipList::open`] on everything below `alloc_end`; returns the number
    /// of keys, of versions and the largest sequence number.
    fn verify(&self, alloc_end: u64) -> Result<[u64; 3]> {
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

    /// Adds version `seq` of `user_key` (`kind`, `value`) and persists it before returning.
    ///
    /// If the key is present, a version record is added in front of its chain (no new node:
    /// the in-place update); otherwise a node is added with the version. See
    /// docs/format/pskiplist.md, "Persistence", for the order of the stores.
    ///
    /// # Errors
    ///
    /// - [`Error::MemtableFull`] if the region has no room for the node and record: nothing
    ///   was stored;
    /// - [`Error::InvalidArgument`] if `seq` is not above every sequence number of the key
    ///   (or above [`SeqNo::MAX`]), or for a key or value of 4 GiB or more: nothing was
    ///   stored;
    /// - [`Error::Io`] if a write or persist fails: the list is poisoned (the insert is kept
    ///   or not by the next recovery) and every later insert returns [`Error::Poisoned`];
    /// - [`Error::Corruption`] if the search reads a damaged node or record.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<()> {
        if seq > SeqNo::MAX {
            return Err(Error::invalid(format!(
                "sequence number {seq} is above the largest one, {}",
                SeqNo::MAX
            )));
        }
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let capacity = self.capacity();
        let pos = self.seek_node(Some(user_key))?;
        let mut buf = Vec::new();
        // The commit words to publish in order (the first is the commit point), and whether
        // a node is added.
        let (commit_words, new_key): (Vec<(u64, u64)>, bool) =
            match pos.after.filter(|n| n.key == user_key) {
                Some(node) => {
                    let mut chain = self.chain(&node)?;
                    let newest = chain.next;
                    if let Some(v) = self.chain_next(&mut chain, capacity)?
                        && v.seq >= seq
                    {
                        return Err(Error::invalid(format!(
                            "sequence number {seq} is not above {}, the newest one of the key",
                            v.seq
                        )));
                    }
                    let off = w.alloc_end;
                    let new_end = self.check_room(off, version_len(value.len()))?;
                    encode_version(&mut buf, self.id, node.off, seq, kind, newest, value)?;
                    self.store(&mut w, off, &buf, new_end)?;
                    // The commit point: the node's newest-version word.
                    (vec![(node.off + NODE_VERSIONS, off)], false)
                }
                None => {
                    let height = random_height(&mut w.rng);
                    let node_off = w.alloc_end;
                    let version_off = node_off + node_len(height, user_key.len());
                    let new_end = self
                        .check_room(node_off, version_off - node_off + version_len(value.len()))?;
                    let next = pos.succs.get(..height).unwrap_or_default();
                    encode_node(&mut buf, self.id, node_off, user_key, version_off, next)?;
                    encode_version(&mut buf, self.id, node_off, seq, kind, 0, value)?;
                    self.store(&mut w, node_off, &buf, new_end)?;
                    // The commit point is the level-0 link; the higher levels follow, bottom up.
                    let links = pos.links.get(..height).unwrap_or_default();
                    (links.iter().map(|&l| (l, node_off)).collect(), true)
                }
            };
        for (i, &(word, target)) in commit_words.iter().enumerate() {
            self.publish(&mut w, word, target)?;
            if i == 0 {
                // Relaxed statistics counters (see the type's fields).
                self.entries.fetch_add(1, Ordering::Relaxed);
                if new_key {
                    self.keys.fetch_add(1, Ordering::Relaxed);
                }
                self.max_seq.fetch_max(seq.0, Ordering::Relaxed);
            }
        }
        Ok(())
    }

    /// The end of an allocation of `len` bytes at `off`, or [`Error::MemtableFull`].
    fn check_room(&self, off: u64, len: u64) -> Result<u64> {
        let capacity = self.capacity();
        match off.checked_add(len) {
            Some(end) if end <= capacity => Ok(end),
            _ => Err(Error::MemtableFull {
                path: self.path.clone(),
                needed: len,
                free: capacity.saturating_sub(off),
            }),
        }
    }

    /// Writes `buf` at `off` (the allocation end), persists it and publishes `new_end` as the
    /// allocation end. A failure poisons the list.
    fn store(&self, w: &mut WriterState, off: u64, buf: &[u8], new_end: u64) -> Result<()> {
        let r = self
            .region
            .write(at(off), buf)
            .map_err(|e| Error::io(IoOp::Write, &self.path, e))
            .and_then(|()| {
                self.region
                    .persist(at(off), buf.len())
                    .map_err(|e| Error::io(IoOp::Persist, &self.path, e))
            });
        self.poison_on_error(w, r)?;
        self.publish(w, OFF_ALLOC_END, new_end)?;
        w.alloc_end = new_end;
        // Relaxed statistics counter.
        self.used.store(new_end, Ordering::Relaxed);
        Ok(())
    }

    /// Publishes `value` at the commit word `word`. A failure poisons the list.
    fn publish(&self, w: &mut WriterState, word: u64, value: u64) -> Result<()> {
        let r = self
            .region
            .publish_u64(at(word), value)
            .map_err(|e| Error::io(IoOp::Persist, &self.path, e));
        self.poison_on_error(w, r)
    }

    fn poison_on_error(&self, w: &mut WriterState, r: Result<()>) -> Result<()> {
        if let Err(e) = &r {
            w.poisoned.get_or_insert_with(|| e.to_string());
        }
        r
    }

    /// Publishes `seq` as the committed sequence number: the versions inserted so far with
    /// sequence numbers up to `seq` become visible to readers and survive a crash; versions
    /// above it (a batch whose commit was not published) are ignored by readers, by iterators
    /// and after recovery. This is the commit point of a batch of several inserts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if `seq` is below the committed sequence number or above
    /// [`SeqNo::MAX`]; [`Error::Poisoned`] after a failed insert; [`Error::Io`] if publishing
    /// fails (the list is then poisoned).
    pub fn commit(&self, seq: SeqNo) -> Result<()> {
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let committed = self.committed();
        if seq < committed || seq > SeqNo::MAX {
            return Err(Error::invalid(format!(
                "cannot commit sequence number {seq}: the list committed {committed}"
            )));
        }
        if seq == committed {
            return Ok(());
        }
        self.publish(&mut w, OFF_COMMITTED, seq.0)?;
        self.committed.store(seq.0, Ordering::Release);
        Ok(())
    }

    /// The committed sequence number (see [`PSkipList::commit`]; 0 for a new list).
    pub fn committed(&self) -> SeqNo {
        SeqNo(self.committed.load(Ordering::Acquire))
    }

    /// The newest version of `user_key` whose sequence number is at most `snapshot`:
    /// `(seq, kind, value)`; `None` if the key has none (a deletion is returned as a version
    /// of kind [`ValueKind::Deletion`]).
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] if a node or record it reads is damaged; [`Error::Io`] if the
    /// region cannot be read.
    pub fn get(
        &self,
        user_key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(SeqNo, ValueKind, Vec<u8>)>> {
        let Some(node) = self.seek_node(Some(user_key))?.after else {
            return Ok(None);
        };
        if node.key != user_key {
            return Ok(None);
        }
        let bound = self.capacity();
        let snapshot = snapshot.min(self.committed());
        let mut chain = self.chain(&node)?;
        while let Some(v) = self.chain_next(&mut chain, bound)? {
            if v.seq <= snapshot {
                return Ok(Some((v.seq, v.kind, v.value)));
            }
        }
        Ok(None)
    }

    /// An iterator over every version in internal-key order (user key ascending, then newest
    /// version first), unpositioned. It implements [`InternalIterator`]; its internal keys
    /// are encoded by [`crate::key`].
    pub fn iter(self: &Arc<Self>) -> PSkipListIter {
        PSkipListIter {
            limit: self.committed(),
            list: Arc::clone(self),
            node: None,
            chain: Vec::new(),
            cur: None,
            ikey: Vec::new(),
        }
    }

    /// Number of versions (entries) in the list.
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// Number of distinct user keys (nodes) in the list.
    pub fn keys(&self) -> u64 {
        self.keys.load(Ordering::Relaxed)
    }

    /// Bytes of the region in use: the header, every node and record, and whatever inserts
    /// interrupted by a crash left allocated (the published allocation end).
    pub fn used_bytes(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Length of the region in bytes.
    pub fn capacity(&self) -> u64 {
        self.region.len() as u64
    }

    /// The largest sequence number in the list (0 when empty).
    pub fn max_seq(&self) -> SeqNo {
        SeqNo(self.max_seq.load(Ordering::Relaxed))
    }

    /// The smallest committed sequence number of a list reopened by [`PSkipList::open`]
    /// (`None` if it has no committed version, or was made by [`PSkipList::create`]).
    pub fn min_seq(&self) -> Option<SeqNo> {
        match self.min_seq.load(Ordering::Relaxed) {
            u64::MAX => None,
            s => Some(SeqNo(s)),
        }
    }

    /// The list's id (from its header).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The region's file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::PersistentMemtable, &self.path, offset),
            reason,
        )
    }

    /// Loads the commit word at `off` (atomic, acquire).
    fn word(&self, off: u64) -> Result<u64> {
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
    fn load_node(&self, off: u64, from: u64, bound: u64) -> Result<Node> {
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
    fn load_version(&self, node_off: u64, off: u64, from: u64, bound: u64) -> Result<Version> {
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
    fn chain(&self, node: &Node) -> Result<Chain> {
        let from = node.off + NODE_VERSIONS;
        Ok(Chain {
            node_off: node.off,
            next: self.word(from)?,
            from,
            last: None,
        })
    }

    /// The next (older) version of the walk, verified; `None` at the end of the chain.
    fn chain_next(&self, c: &mut Chain, bound: u64) -> Result<Option<Version>> {
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
    fn seek_node(&self, key: Option<&[u8]>) -> Result<Position> {
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

/// A random height: 1, then one more with probability 1/4 each time, up to [`MAX_HEIGHT`]
/// (xorshift64, Marsaglia 2003).
fn random_height(state: &mut u64) -> usize {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    let mut height = 1;
    while height < MAX_HEIGHT && (x >> (2 * height)) & 3 == 0 {
        height += 1;
    }
    height
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

    /// Moves forward past versions above the committed sequence number.
    fn skip_uncommitted_forward(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|v| v.seq > self.limit) {
            self.raw_next()?;
        }
        Ok(())
    }

    /// Moves backward past versions above the committed sequence number.
    fn skip_uncommitted_backward(&mut self) -> Result<()> {
        while self.cur.as_ref().is_some_and(|v| v.seq > self.limit) {
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
        self.skip_uncommitted_forward()
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek_to_last()?;
        self.skip_uncommitted_backward()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek(target)?;
        self.skip_uncommitted_forward()
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.limit = self.list.committed();
        self.raw_seek_for_prev(target)?;
        self.skip_uncommitted_backward()
    }

    fn next(&mut self) -> Result<()> {
        self.raw_next()?;
        self.skip_uncommitted_forward()
    }

    fn prev(&mut self) -> Result<()> {
        self.raw_prev()?;
        self.skip_uncommitted_backward()
    }

    fn key(&self) -> &[u8] {
        &self.ikey
    }

    fn value(&self) -> &[u8] {
        self.cur.as_ref().map_or(&[], |v| v.value.as_slice())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::atomic::AtomicBool;

    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::tier::{CrashPolicy, SimulatedRegion};

    const PATH: &str = "fast/000007.psl";

    /// Versions of each user key, oldest first: `(seq, kind, value)`.
    type Model = BTreeMap<Vec<u8>, Vec<(u64, ValueKind, Vec<u8>)>>;

    /// One insert: key, seq, kind, value.
    type Op = (Vec<u8>, u64, ValueKind, Vec<u8>);

    fn new_list(len: usize) -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
        let region = Arc::new(SimulatedRegion::new(len));
        let list = PSkipList::create(region.clone(), PATH, 7).unwrap();
        (region, Arc::new(list))
    }

    fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, Arc<PSkipList>)> {
        let region = Arc::new(SimulatedRegion::from_image(image));
        let list = PSkipList::open(region.clone(), PATH)?;
        Ok((region, Arc::new(list)))
    }

    fn apply(list: &PSkipList, model: &mut Model, (k, seq, kind, v): &Op) {
        committed_insert(list, k, SeqNo(*seq), *kind, v).unwrap();
        model
            .entry(k.clone())
            .or_default()
            .push((*seq, *kind, v.clone()));
    }

    fn model_of(ops: &[Op]) -> Model {
        let mut m = Model::new();
        for (k, seq, kind, v) in ops {
            m.entry(k.clone())
                .or_default()
                .push((*seq, *kind, v.clone()));
        }
        m
    }

    fn model_get(m: &Model, key: &[u8], snapshot: u64) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
        m.get(key)?
            .iter()
            .rev()
            .find(|(s, ..)| *s <= snapshot)
            .map(|(s, kind, v)| (SeqNo(*s), *kind, v.clone()))
    }

    /// Every `(internal key, value)` of the model in internal-key order.
    fn model_entries(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
        m.iter()
            .flat_map(|(k, vs)| {
                vs.iter().rev().map(move |(s, kind, v)| {
                    (key::make_internal_key(k, SeqNo(*s), *kind), v.clone())
                })
            })
            .collect()
    }

    fn scan(list: &Arc<PSkipList>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut it = list.iter();
        it.seek_to_first()?;
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next()?;
        }
        Ok(out)
    }

    /// `list` holds exactly what `model` holds: point reads at `snapshots`, a full scan, stats.
    fn assert_agrees(list: &Arc<PSkipList>, model: &Model, snapshots: &[u64], absent: &[&[u8]]) {
        for k in model
            .keys()
            .map(Vec::as_slice)
            .chain(absent.iter().copied())
        {
            for &s in snapshots.iter().chain([&SeqNo::MAX.0]) {
                assert_eq!(
                    list.get(k, SeqNo(s)).unwrap(),
                    model_get(model, k, s),
                    "key {k:?} at snapshot {s}"
                );
            }
        }
        assert_eq!(scan(list).unwrap(), model_entries(model));
        assert_eq!(list.keys(), model.len() as u64);
        assert_eq!(
            list.entries(),
            model.values().map(|v| v.len() as u64).sum::<u64>()
        );
        let max = model
            .values()
            .flatten()
            .map(|(s, ..)| *s)
            .max()
            .unwrap_or(0);
        assert_eq!(list.max_seq(), SeqNo(max));
    }

    /// Random operations over a pool of `keys` keys of 0..10 bytes from a 3-letter alphabet
    /// (so there are prefixes and the empty key), sequence numbers from `first_seq` up.
    fn random_ops(rng: &mut StdRng, keys: usize, n: usize, first_seq: u64) -> Vec<Op> {
        let mut pool: Vec<Vec<u8>> = (0..keys)
            .map(|_| {
                let len = rng.gen_range(0..10);
                (0..len).map(|_| b"abc"[rng.gen_range(0..3)]).collect()
            })
            .collect();
        pool.sort();
        pool.dedup();
        (0..n as u64)
            .map(|i| {
                let k = pool[rng.gen_range(0..pool.len())].clone();
                let kind = match rng.gen_range(0..10) {
                    0..=6 => ValueKind::Value,
                    7 | 8 => ValueKind::Deletion,
                    _ => ValueKind::Merge,
                };
                let v = match kind {
                    ValueKind::Deletion => Vec::new(),
                    _ => (0..rng.gen_range(0..48))
                        .map(|_| rng.r#gen::<u8>())
                        .collect(),
                };
                (k, first_seq + i, kind, v)
            })
            .collect()
    }

    /// An insert committed on its own (a batch of one).
    fn committed_insert(
        list: &PSkipList,
        key: &[u8],
        seq: SeqNo,
        kind: ValueKind,
        value: &[u8],
    ) -> Result<()> {
        list.insert(key, seq, kind, value)?;
        list.commit(seq.max(list.committed()))
    }

    #[test]
    fn random_inserts_updates_and_deletions_agree_with_a_model_before_and_after_reopen() {
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let ops = random_ops(&mut rng, 400, 3000, 1);
        let (region, list) = new_list(1 << 20);
        let mut model = Model::new();
        let absent: [&[u8]; 3] = [b"d", b"abcabcabcabc", b"\xff"];
        for (i, op) in ops.iter().enumerate() {
            apply(&list, &mut model, op);
            if i % 1000 == 999 {
                assert_agrees(&list, &model, &[0, 1, 500, 1500, 2999], &absent);
            }
        }
        assert!(model.len() > 200, "{} keys", model.len());
        let snapshots = [0, 1, 2, 10, 100, 999, 1500, 2500, 3000];
        assert_agrees(&list, &model, &snapshots, &absent);

        let reopened = Arc::new(PSkipList::open(region.clone(), PATH).unwrap());
        assert_agrees(&reopened, &model, &snapshots, &absent);
        assert_eq!(reopened.used_bytes(), list.used_bytes());
        assert_eq!(reopened.id(), 7);
        assert_eq!(reopened.path(), Path::new(PATH));
        // The reopened list takes more writes.
        drop(list);
        for op in random_ops(&mut rng, 50, 200, 3001) {
            apply(&reopened, &mut model, &op);
        }
        assert_agrees(&reopened, &model, &snapshots, &absent);
    }

    #[test]
    fn seeks_and_backward_moves_follow_the_internal_key_order() {
        let mut rng = StdRng::seed_from_u64(11);
        let ops = random_ops(&mut rng, 60, 400, 1);
        let (_region, list) = new_list(1 << 18);
        let mut model = Model::new();
        for op in &ops {
            apply(&list, &mut model, op);
        }
        let all = model_entries(&model);
        let keys: Vec<&Vec<u8>> = model.keys().collect();
        let mut it = list.iter();
        // Backwards from the last entry.
        it.seek_to_last().unwrap();
        let mut back = Vec::new();
        while it.valid() {
            back.push((it.key().to_vec(), it.value().to_vec()));
            it.prev().unwrap();
        }
        back.reverse();
        assert_eq!(back, all);
        for round in 0..400usize {
            let user_key: Vec<u8> = if round.is_multiple_of(3) {
                (0..rng.gen_range(0..10))
                    .map(|_| b"abcd"[rng.gen_range(0..4)])
                    .collect()
            } else {
                keys[rng.gen_range(0..keys.len())].clone()
            };
            let kind = [ValueKind::Deletion, ValueKind::Value, ValueKind::Merge][round % 3];
            let target = key::make_internal_key(&user_key, SeqNo(rng.gen_range(0..420)), kind);
            let ge = all.partition_point(|(k, _)| key::compare_internal(k, &target).is_lt());
            it.seek(&target).unwrap();
            assert_eq!(it.valid(), ge < all.len(), "seek {target:?}");
            // A few steps forward, then back, from the seek.
            let mut idx = ge;
            for step in 0..6 {
                if !it.valid() {
                    break;
                }
                assert_eq!((it.key(), it.value()), (&all[idx].0[..], &all[idx].1[..]));
                let p = key::parse_internal_key(it.key()).unwrap();
                assert_eq!(
                    (it.user_key(), it.seq(), it.kind()),
                    (p.user_key, p.seq, p.kind)
                );
                if step < 3 {
                    it.next().unwrap();
                    idx += 1;
                } else {
                    it.prev().unwrap();
                    if idx == 0 {
                        assert!(!it.valid());
                        break;
                    }
                    idx -= 1;
                }
            }
            let le = all.partition_point(|(k, _)| !key::compare_internal(k, &target).is_gt());
            it.seek_for_prev(&target).unwrap();
            assert_eq!(it.valid(), le > 0, "seek_for_prev {target:?}");
            if le > 0 {
                assert_eq!(it.key(), &all[le - 1].0[..]);
                it.next().unwrap();
                assert_eq!(it.valid(), le < all.len());
                if le < all.len() {
                    assert_eq!(it.key(), &all[le].0[..]);
                }
            }
        }
        // A target shorter than a tag sorts as its bytes with tag 0: after every version.
        it.seek(keys[0]).unwrap();
        let after_first = model[keys[0]].len();
        assert_eq!(it.key(), &all[after_first].0[..]);
    }

    #[test]
    fn an_update_of_an_existing_key_adds_no_node() {
        let (_region, list) = new_list(4096);
        committed_insert(&list, b"key", SeqNo(1), ValueKind::Value, b"first").unwrap();
        committed_insert(&list, b"other", SeqNo(2), ValueKind::Value, b"x").unwrap();
        let (keys, used) = (list.keys(), list.used_bytes());
        committed_insert(&list, b"key", SeqNo(3), ValueKind::Value, b"second!!!!").unwrap();
        assert_eq!(list.keys(), keys);
        assert_eq!(list.used_bytes(), used + VERSION_HEADER_LEN as u64 + 16);
        assert_eq!(list.entries(), 3);
        // The older version stays for snapshots.
        let got = |s| {
            list.get(b"key", SeqNo(s))
                .unwrap()
                .map(|(s, _, v)| (s.0, v))
        };
        assert_eq!(got(2), Some((1, b"first".to_vec())));
        assert_eq!(got(3), Some((3, b"second!!!!".to_vec())));
        assert_eq!(got(0), None);
    }

    #[test]
    fn a_sequence_number_that_does_not_increase_for_its_key_is_refused() {
        let (region, list) = new_list(4096);
        committed_insert(&list, b"k", SeqNo(5), ValueKind::Value, b"v5").unwrap();
        let image = region.crash_image(CrashPolicy::KeepAll);
        for seq in [5, 4] {
            let e =
                committed_insert(&list, b"k", SeqNo(seq), ValueKind::Value, b"old").unwrap_err();
            assert!(
                matches!(e, Error::InvalidArgument(ref m) if m.contains("not above 5")),
                "{e}"
            );
        }
        let e = committed_insert(&list, b"k", SeqNo(SeqNo::MAX.0 + 1), ValueKind::Value, b"")
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert_eq!(
            region.crash_image(CrashPolicy::KeepAll),
            image,
            "nothing was stored"
        );
        // Sequence numbers only increase per key.
        committed_insert(&list, b"j", SeqNo(3), ValueKind::Value, b"v3").unwrap();
        committed_insert(&list, b"k", SeqNo(6), ValueKind::Deletion, b"").unwrap();
        assert_eq!(
            list.get(b"k", SeqNo::MAX).unwrap(),
            Some((SeqNo(6), ValueKind::Deletion, Vec::new()))
        );
    }

    /// Inserts of new keys and updates (every third op updates an earlier key).
    fn crash_ops(n: u64) -> Vec<Op> {
        (1..=n)
            .map(|seq| {
                let k = if seq.is_multiple_of(3) { seq / 3 } else { seq };
                let v = format!("value {seq} ")
                    .repeat(1 + (seq % 4) as usize)
                    .into_bytes();
                (format!("key{k:03}").into_bytes(), seq, ValueKind::Value, v)
            })
            .collect()
    }

    /// The recovered `list` holds exactly the first `n` of `ops`.
    fn assert_prefix(list: &Arc<PSkipList>, ops: &[Op], n: usize, what: &str) {
        let model = model_of(&ops[..n]);
        assert_eq!(
            scan(list).unwrap(),
            model_entries(&model),
            "{what}: expected {n} inserts"
        );
        assert_eq!(list.entries(), n as u64, "{what}");
        assert_eq!(list.keys(), model.len() as u64, "{what}");
        assert_eq!(list.max_seq(), SeqNo(n as u64), "{what}");
    }

    /// How many of `ops` the recovered `list` holds (it must be a prefix).
    fn recovered_prefix(list: &Arc<PSkipList>, ops: &[Op]) -> usize {
        let n = scan(list).unwrap().len();
        assert_prefix(list, ops, n, "recovered list");
        n
    }

    /// The recovered list takes new inserts (which overwrite whatever an interrupted insert
    /// left after the allocation end) and keeps them across another reopen.
    fn assert_takes_inserts(region: &SimulatedRegion, list: &PSkipList, seq: u64) {
        committed_insert(list, b"key001", SeqNo(seq), ValueKind::Value, b"later").unwrap();
        committed_insert(list, b"zzz", SeqNo(seq + 1), ValueKind::Value, b"new key").unwrap();
        let (_, again) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_eq!(
            again.get(b"key001", SeqNo::MAX).unwrap(),
            Some((SeqNo(seq), ValueKind::Value, b"later".to_vec()))
        );
        assert_eq!(
            again.get(b"zzz", SeqNo::MAX).unwrap(),
            Some((SeqNo(seq + 1), ValueKind::Value, b"new key".to_vec()))
        );
    }

    fn policies(seed: u64) -> [CrashPolicy; 4] {
        [
            CrashPolicy::KeepAll,
            CrashPolicy::DropUnpersisted,
            CrashPolicy::Random { seed },
            CrashPolicy::Random { seed: !seed },
        ]
    }

    #[test]
    fn every_acknowledged_insert_survives_a_crash_under_every_policy() {
        let ops = crash_ops(60);
        let (region, list) = new_list(1 << 16);
        for (i, op) in ops.iter().enumerate() {
            committed_insert(&list, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
            assert!(
                region.unpersisted_ranges().is_empty(),
                "insert {i} returned unpersisted"
            );
            for policy in policies(i as u64) {
                let (r, recovered) = reopen(region.crash_image(policy)).unwrap();
                assert_prefix(
                    &recovered,
                    &ops,
                    i + 1,
                    &format!("after insert {i}, {policy:?}"),
                );
                if i.is_multiple_of(10) {
                    assert_takes_inserts(&r, &recovered, 1000);
                }
            }
        }
    }

    #[test]
    fn a_crash_inside_an_insert_recovers_the_inserts_before_it_and_maybe_it() {
        // Persist calls of a committed insert: 0 the payload, 1 the allocation end, 2 the
        // level-0 link or newest-version word, 3.. the higher levels of a new node, and last
        // the committed sequence number: the commit point. A failure of call k leaves call k's
        // store unpersisted (a publish's word stays visible, as after a failed flush) and
        // makes no later call.
        let ops = crash_ops(45);
        let (region, list) = new_list(1 << 16);
        let mut failures = 0;
        for (i, op) in ops.iter().enumerate() {
            let base = region.crash_image(CrashPolicy::KeepAll);
            // How many persist calls the insert makes when nothing fails.
            let calls = {
                let r = Arc::new(SimulatedRegion::from_image(base.clone()));
                let l = PSkipList::open(r.clone(), PATH).unwrap();
                let before = r.persist_count();
                committed_insert(&l, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
                r.persist_count() - before
            };
            let commit = calls - 1;
            // `None`: the payload's write fails; `Some(k)`: persist call k fails.
            for fault in std::iter::once(None).chain((0..calls).map(Some)) {
                let r = Arc::new(SimulatedRegion::from_image(base.clone()));
                let l = Arc::new(PSkipList::open(r.clone(), PATH).unwrap());
                match fault {
                    None => r.fail_writes_after(Some(0)),
                    Some(k) => r.fail_persist_after(Some(k)),
                }
                let res = committed_insert(&l, &op.0, SeqNo(op.1), op.2, &op.3);
                r.fail_writes_after(None);
                r.fail_persist_after(None);
                failures += 1;
                assert!(
                    matches!(res, Err(Error::Io { .. })),
                    "insert {i}, {fault:?}: {res:?}"
                );
                // Poisoned for writes, readable, and the failed insert is not visible.
                let again = committed_insert(&l, b"key999", SeqNo(999), ValueKind::Value, b"x");
                assert!(matches!(again, Err(Error::Poisoned { .. })), "{again:?}");
                let first = l.get(&ops[0].0, SeqNo::MAX).unwrap();
                assert!(i == 0 || first.is_some(), "insert {i}: {first:?}");
                assert_eq!(scan(&l).unwrap().len(), i, "insert {i}, {fault:?}, live");
                for policy in policies(i as u64 * 31 + fault.unwrap_or(9)) {
                    let what = format!("insert {i}, fault {fault:?}, {policy:?}");
                    let (r2, recovered) =
                        reopen(r.crash_image(policy)).unwrap_or_else(|e| panic!("{what}: {e}"));
                    let n = recovered_prefix(&recovered, &ops);
                    let with_it = match (fault, policy) {
                        (Some(k), CrashPolicy::KeepAll) if k == commit => true,
                        (Some(k), CrashPolicy::Random { .. }) if k == commit => n == i + 1,
                        _ => false,
                    };
                    assert_eq!(n, i + usize::from(with_it), "{what}");
                    if i.is_multiple_of(5) {
                        assert_takes_inserts(&r2, &recovered, 1000);
                    }
                }
            }
            committed_insert(&list, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
        }
        // At least the payload write, the payload persist, the allocation end, the link and
        // the commit.
        assert!(failures >= 5 * ops.len(), "{failures} failed inserts");
    }

    #[test]
    fn an_uncommitted_batch_is_invisible_and_gone_after_a_crash() {
        let (region, list) = new_list(1 << 16);
        committed_insert(&list, b"a", SeqNo(1), ValueKind::Value, b"one").unwrap();
        // A batch of three versions (an update and two new keys) without its commit.
        list.insert(b"a", SeqNo(2), ValueKind::Value, b"two")
            .unwrap();
        list.insert(b"b", SeqNo(3), ValueKind::Value, b"three")
            .unwrap();
        list.insert(b"c", SeqNo(4), ValueKind::Deletion, b"")
            .unwrap();
        let visible = |l: &Arc<PSkipList>| {
            (
                l.get(b"a", SeqNo::MAX).unwrap(),
                l.get(b"b", SeqNo::MAX).unwrap(),
                scan(l).unwrap().len(),
            )
        };
        let before = (Some((SeqNo(1), ValueKind::Value, b"one".to_vec())), None, 1);
        assert_eq!(visible(&list), before);
        for policy in policies(7) {
            let (_, recovered) = reopen(region.crash_image(policy)).unwrap();
            assert_eq!(visible(&recovered), before, "{policy:?}");
            assert_eq!(recovered.committed(), SeqNo(1));
        }
        // The commit makes the whole batch visible at once, and durable.
        list.commit(SeqNo(4)).unwrap();
        let after = (
            Some((SeqNo(2), ValueKind::Value, b"two".to_vec())),
            Some((SeqNo(3), ValueKind::Value, b"three".to_vec())),
            4,
        );
        assert_eq!(visible(&list), after);
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_eq!(visible(&recovered), after);
        // A commit never goes back.
        assert!(matches!(
            list.commit(SeqNo(3)),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_full_region_refuses_the_insert_with_a_distinct_error_and_changes_nothing() {
        let (region, list) = new_list(1024);
        let mut model = Model::new();
        let mut seq = 0;
        let mut full = |list: &Arc<PSkipList>, model: &mut Model, key: &[u8], value: &[u8]| {
            seq += 1;
            let before = region.crash_image(CrashPolicy::KeepAll);
            let stats = (
                list.used_bytes(),
                list.entries(),
                list.keys(),
                list.max_seq(),
            );
            match committed_insert(list, key, SeqNo(seq), ValueKind::Value, value) {
                Ok(()) => {
                    model.entry(key.to_vec()).or_default().push((
                        seq,
                        ValueKind::Value,
                        value.to_vec(),
                    ));
                    false
                }
                Err(Error::MemtableFull { path, needed, free }) => {
                    assert_eq!(path, Path::new(PATH));
                    assert_eq!(free, list.capacity() - list.used_bytes());
                    assert!(needed > free, "needed {needed}, free {free}");
                    assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
                    let after = (
                        list.used_bytes(),
                        list.entries(),
                        list.keys(),
                        list.max_seq(),
                    );
                    assert_eq!(after, stats);
                    true
                }
                Err(e) => panic!("{e}"),
            }
        };
        let mut n = 0;
        while !full(&list, &mut model, format!("key{n:03}").as_bytes(), &[7; 40]) {
            n += 1;
        }
        assert!(n >= 5, "{n} keys fit");
        // Updates need less room than new keys: they go on until the room is below 24 bytes.
        while !full(&list, &mut model, b"key000", b"") {}
        assert!(list.capacity() - list.used_bytes() < VERSION_HEADER_LEN as u64);
        let e =
            committed_insert(&list, b"key001", SeqNo(999), ValueKind::Deletion, b"").unwrap_err();
        assert!(e.to_string().contains("is full"), "{e}");
        assert!(!e.is_no_space(), "no device is full");
        assert_agrees(&list, &model, &[1, 5], &[]);
        let (_, reopened) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_agrees(&reopened, &model, &[1, 5], &[]);
    }

    /// A list with keys `apple`, `banana`, `cherry` (one version each) and its region.
    fn fruit() -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
        let (region, list) = new_list(4096);
        committed_insert(&list, b"apple", SeqNo(1), ValueKind::Value, b"apple-value").unwrap();
        committed_insert(
            &list,
            b"banana",
            SeqNo(2),
            ValueKind::Value,
            b"banana-value",
        )
        .unwrap();
        committed_insert(
            &list,
            b"cherry",
            SeqNo(3),
            ValueKind::Value,
            b"cherry-value",
        )
        .unwrap();
        (region, list)
    }

    fn find(image: &[u8], needle: &[u8]) -> usize {
        image
            .windows(needle.len())
            .position(|w| w == needle)
            .unwrap()
    }

    fn assert_corruption_at(e: &Error, offset: u64, checksum: bool) {
        match e {
            Error::Corruption { site, reason } => {
                assert_eq!(site.kind, ArtifactKind::PersistentMemtable, "{e}");
                assert_eq!(site.path, Path::new(PATH), "{e}");
                assert_eq!(site.offset, offset, "{e}");
                assert_eq!(
                    matches!(reason, CorruptionReason::ChecksumMismatch { .. }),
                    checksum,
                    "{e}"
                );
            }
            _ => panic!("not a corruption: {e}"),
        }
    }

    #[test]
    fn a_damaged_value_is_reported_at_its_version_record_by_open_and_by_reads() {
        let (region, list) = fruit();
        let image = region.crash_image(CrashPolicy::KeepAll);
        let value_at = find(&image, b"banana-value");
        let record = (value_at - VERSION_HEADER_LEN) as u64;
        let mut bad = image.clone();
        bad[value_at + 3] ^= 0x20;
        let e = reopen(bad).unwrap_err();
        assert_corruption_at(&e, record, true);
        assert!(e.to_string().contains(PATH), "{e}");

        // The same damage under a running list: the read that uses the record reports it.
        region.write(value_at + 3, b"X").unwrap();
        assert_corruption_at(&list.get(b"banana", SeqNo::MAX).unwrap_err(), record, true);
        assert!(list.get(b"apple", SeqNo::MAX).unwrap().is_some());
        assert!(list.get(b"cherry", SeqNo::MAX).unwrap().is_some());
        let mut it = list.iter();
        it.seek_to_first().unwrap();
        assert_corruption_at(&it.next().unwrap_err(), record, true);
        assert!(!it.valid(), "an iterator is invalid after an error");
    }

    #[test]
    fn a_damaged_key_is_reported_at_its_node_by_open_and_by_reads() {
        let (region, list) = fruit();
        let image = region.crash_image(CrashPolicy::KeepAll);
        // `apple` is the first node: the head's level-0 link points at it.
        let node = le_u64(&image, at(OFF_HEAD));
        let key_at = find(&image, b"apple\0");
        assert!(key_at as u64 > node && (key_at as u64) < node + NODE_NEXT + 8 * 12 + 8);
        let mut bad = image.clone();
        bad[key_at] = b'A';
        assert_corruption_at(&reopen(bad).unwrap_err(), node, true);

        region.write(key_at, b"A").unwrap();
        for k in [&b"apple"[..], b"banana", b"zzz"] {
            assert_corruption_at(&list.get(k, SeqNo::MAX).unwrap_err(), node, true);
        }
        assert_corruption_at(&list.iter().seek_to_first().unwrap_err(), node, true);
        let e = committed_insert(&list, b"apricot", SeqNo(9), ValueKind::Value, b"").unwrap_err();
        assert_corruption_at(&e, node, true);
    }

    #[test]
    fn a_damaged_header_or_allocation_end_is_refused_at_open() {
        let (region, _list) = fruit();
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
        assert_corruption_at(&damaged(OFF_ID, 8), 0, true);
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
        // The region is longer than the header says.
        let mut longer = image.clone();
        longer.extend_from_slice(&[0; 8]);
        assert_corruption_at(&reopen(longer).unwrap_err(), OFF_REGION_LEN as u64, false);
        assert_corruption_at(&reopen(image[..100].to_vec()).unwrap_err(), 0, false);
        // An allocation end below the nodes: the head's link points past it.
        let mut b = image.clone();
        b[at(OFF_ALLOC_END)..at(OFF_ALLOC_END) + 8].copy_from_slice(&DATA_START.to_le_bytes());
        assert_corruption_at(&reopen(b).unwrap_err(), OFF_HEAD, false);
        // An allocation end beyond the region.
        let mut b = image.clone();
        b[at(OFF_ALLOC_END)..at(OFF_ALLOC_END) + 8].copy_from_slice(&8192u64.to_le_bytes());
        assert_corruption_at(&reopen(b).unwrap_err(), OFF_ALLOC_END, false);
        // A region too small for a header cannot become a list.
        let small: Arc<dyn Region> = Arc::new(SimulatedRegion::new(100));
        let e = PSkipList::create(small, PATH, 1).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }

    #[test]
    fn readers_see_only_written_values_while_a_writer_inserts() {
        const KEYS: u64 = 120;
        const ROUNDS: u64 = 20;
        let key_of = |k: u64| format!("key{k:04}").into_bytes();
        // Every third sequence number deletes; the value names its key and sequence number.
        let version_of = |k: u64, seq: u64| {
            if seq.is_multiple_of(3) {
                (ValueKind::Deletion, Vec::new())
            } else {
                (
                    ValueKind::Value,
                    format!("{k}@{seq}")
                        .repeat(1 + (seq % 5) as usize)
                        .into_bytes(),
                )
            }
        };
        let check = |user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]| {
            let k: u64 = std::str::from_utf8(&user_key[3..])
                .unwrap()
                .parse()
                .unwrap();
            let (want_kind, want_value) = version_of(k, seq.0);
            assert_eq!((kind, value), (want_kind, &want_value[..]));
        };
        let (_region, list) = new_list(1 << 20);
        let done = AtomicBool::new(false);
        let checked = AtomicU64::new(0);
        // The three threads start together; each reader makes a last pass after the writer
        // is done, so the readers always check something.
        let start = std::sync::Barrier::new(3);
        std::thread::scope(|s| {
            s.spawn(|| {
                start.wait();
                let mut seq = 0;
                for _ in 0..ROUNDS {
                    for k in 0..KEYS {
                        seq += 1;
                        let (kind, v) = version_of(k, seq);
                        committed_insert(&list, &key_of(k), SeqNo(seq), kind, &v).unwrap();
                    }
                }
                done.store(true, Ordering::Release);
            });
            s.spawn(|| {
                let mut rng = StdRng::seed_from_u64(1);
                start.wait();
                loop {
                    // Pairs with the writer's release store once it inserted everything.
                    let finished = done.load(Ordering::Acquire);
                    let k = rng.gen_range(0..KEYS);
                    let snapshot = SeqNo(rng.gen_range(0..KEYS * ROUNDS + 10));
                    for snap in [snapshot, SeqNo::MAX] {
                        if let Some((seq, kind, v)) = list.get(&key_of(k), snap).unwrap() {
                            assert!(seq <= snap);
                            check(&key_of(k), seq, kind, &v);
                            checked.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    if finished {
                        break;
                    }
                }
            });
            s.spawn(|| {
                let mut it = list.iter();
                start.wait();
                loop {
                    let finished = done.load(Ordering::Acquire);
                    it.seek_to_first().unwrap();
                    let mut last: Option<Vec<u8>> = None;
                    let mut seen = 0;
                    while it.valid() {
                        seen += 1;
                        check(it.user_key(), it.seq(), it.kind(), it.value());
                        if let Some(l) = &last {
                            assert!(key::compare_internal(l, it.key()).is_lt());
                        }
                        last = Some(it.key().to_vec());
                        checked.fetch_add(1, Ordering::Relaxed);
                        it.next().unwrap();
                    }
                    it.seek(&key::seek_key(&key_of(KEYS / 2), SeqNo::MAX))
                        .unwrap();
                    if it.valid() {
                        check(it.user_key(), it.seq(), it.kind(), it.value());
                    }
                    if finished {
                        assert_eq!(seen, KEYS * ROUNDS, "the last pass sees every version");
                        break;
                    }
                }
            });
        });
        assert!(
            checked.load(Ordering::Relaxed) > 0,
            "the readers checked nothing"
        );
        assert_eq!((list.keys(), list.entries()), (KEYS, KEYS * ROUNDS));
        assert_eq!(scan(&list).unwrap().len() as u64, KEYS * ROUNDS);
    }

    #[test]
    fn a_list_in_a_mapped_file_reads_back_after_reopening_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000009.psl");
        let ops: Vec<Op> = vec![
            (b"b".to_vec(), 1, ValueKind::Value, b"bee".to_vec()),
            (b"a".to_vec(), 2, ValueKind::Value, b"ant".to_vec()),
            (b"c".to_vec(), 3, ValueKind::Merge, b"+1".to_vec()),
            (b"a".to_vec(), 4, ValueKind::Value, b"ape".to_vec()),
            (b"b".to_vec(), 5, ValueKind::Deletion, Vec::new()),
        ];
        {
            let region = Arc::new(matrixkv_pmem::MmapRegion::create(&path, 1 << 16).unwrap());
            let list = PSkipList::create(region, &path, 9).unwrap();
            for (k, seq, kind, v) in &ops {
                committed_insert(&list, k, SeqNo(*seq), *kind, v).unwrap();
            }
        }
        let region = Arc::new(matrixkv_pmem::MmapRegion::open(&path).unwrap());
        let list = Arc::new(PSkipList::open(region, &path).unwrap());
        assert_eq!(list.id(), 9);
        let model = model_of(&ops);
        assert_eq!(scan(&list).unwrap(), model_entries(&model));
        assert_eq!(
            list.get(b"a", SeqNo(3)).unwrap(),
            Some((SeqNo(2), ValueKind::Value, b"ant".to_vec()))
        );
        committed_insert(&list, b"d", SeqNo(6), ValueKind::Value, b"dog").unwrap();
        assert_eq!(
            list.get(b"d", SeqNo::MAX).unwrap(),
            Some((SeqNo(6), ValueKind::Value, b"dog".to_vec()))
        );
        assert_eq!(list.max_seq(), SeqNo(6));
    }

    /// The worked example of docs/format/pskiplist.md.
    fn golden_list() -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
        let (region, list) = new_list(512);
        committed_insert(&list, b"apple", SeqNo(1), ValueKind::Value, b"red").unwrap();
        committed_insert(&list, b"banana", SeqNo(2), ValueKind::Value, b"yellow").unwrap();
        committed_insert(&list, b"cherry", SeqNo(3), ValueKind::Value, b"dark").unwrap();
        committed_insert(&list, b"apple", SeqNo(4), ValueKind::Value, b"green").unwrap();
        committed_insert(&list, b"banana", SeqNo(5), ValueKind::Deletion, b"").unwrap();
        (region, list)
    }

    #[test]
    fn golden_list_matches_the_format_doc() {
        let doc = include_str!("../../../../docs/format/pskiplist.md");
        let want = crate::golden::hex_block(doc);
        let (region, list) = golden_list();
        let image = region.crash_image(CrashPolicy::KeepAll);
        let used = at(list.used_bytes());
        assert!(image[used..].iter().all(|&b| b == 0));
        let got = &image[..used];
        assert_eq!(
            got,
            &want[..],
            "docs/format/pskiplist.md is out of date; the list now holds:\n{}",
            got.chunks(8)
                .enumerate()
                .map(|(i, c)| format!(
                    "{:04x}: {}",
                    i * 8,
                    c.iter()
                        .map(|b| format!("{b:02x}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        // The documented bytes, in a region of the documented length, open and read back.
        let mut documented = want;
        documented.resize(512, 0);
        let (_, list) = reopen(documented).unwrap();
        let get = |k: &[u8], s| list.get(k, SeqNo(s)).unwrap();
        assert_eq!(
            get(b"apple", 9),
            Some((SeqNo(4), ValueKind::Value, b"green".to_vec()))
        );
        assert_eq!(
            get(b"apple", 3),
            Some((SeqNo(1), ValueKind::Value, b"red".to_vec()))
        );
        assert_eq!(
            get(b"banana", 9),
            Some((SeqNo(5), ValueKind::Deletion, Vec::new()))
        );
        assert_eq!(
            get(b"banana", 4),
            Some((SeqNo(2), ValueKind::Value, b"yellow".to_vec()))
        );
        assert_eq!(
            get(b"cherry", 9),
            Some((SeqNo(3), ValueKind::Value, b"dark".to_vec()))
        );
        assert_eq!(
            (list.keys(), list.entries(), list.used_bytes()),
            (3, 5, used as u64)
        );
    }
}
