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
//! Who calls it: `memtable::persistent` (a persistent memtable of the NoveLSM design, decision
//! 0023); the write path creates lists and recovery reopens them, taking the sequence numbers
//! from [`PSkipList::committed`] and [`PSkipList::min_seq`].
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

mod format;
mod insert;
mod iter;
#[cfg(all(test, loom))]
mod loom_tests;
mod read;
#[cfg(test)]
mod tests;

use crate::lock_order::Rank;
use std::path::{Path, PathBuf};
use std::sync::Arc;
// Loom's atomics and mutex under `--cfg loom` (the `loom_` model tests).
use crate::sync::Mutex;
use crate::sync::atomic::{AtomicU64, Ordering};

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::key::{SeqNo, ValueKind};
use crate::tier::Region;

pub use format::{DATA_START, FORMAT_VERSION, MAGIC, MAX_HEIGHT};
use format::{
    OFF_ALLOC_END, OFF_COMMITTED, OFF_HEADER_CRC, OFF_HEADER_PAD, OFF_ID, OFF_MAX_HEIGHT,
    OFF_REGION_LEN, OFF_VERSION, at, encode_header, le_u32, le_u64,
};
pub use iter::PSkipListIter;

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
            writer: Mutex::new(
                Rank::PSkipListWriter,
                WriterState {
                    alloc_end,
                    rng: (z ^ (z >> 31)) | 1,
                    poisoned: None,
                },
            ),
            used: AtomicU64::new(alloc_end),
            entries: AtomicU64::new(entries),
            keys: AtomicU64::new(keys),
            max_seq: AtomicU64::new(max_seq),
            min_seq: AtomicU64::new(u64::MAX),
            committed: AtomicU64::new(0),
        }
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
}
