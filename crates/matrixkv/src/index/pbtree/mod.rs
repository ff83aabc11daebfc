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

mod batch;
mod format;
mod read;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::tier::Region;

use batch::Batch;
use format::{
    Committed, HEADER_END, MAX_LEVEL, OFF_COMMITTED, OFF_HEADER_CRC, OFF_HEADER_PAD, OFF_ID,
    OFF_PAGE_SIZE, OFF_REGION_LEN, OFF_VERSION, SLOT_CRC, SLOT_HEIGHT, SLOT_KEYS, SLOT_LEN,
    SLOT_PAGES, SLOT_ROOT, SLOT_SPAN, at, encode_header_page, le_u32, le_u64, seed, slot_off,
};
pub use format::{FORMAT_VERSION, MAGIC, MAX_KEY_LEN, PAGE_SIZE};
pub use read::{Iter, Snapshot};
pub use writer::Writer;

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
