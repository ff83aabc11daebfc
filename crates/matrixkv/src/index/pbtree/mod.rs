//! The persistent B+-tree: the global index of the SLM-DB mode (SLM-DB, FAST 2019). It maps
//! every live user key to its [`Location`] on disk (SSTable file, block offset, block size), so
//! a point read needs at most one disk read, and its iterators scan the keys in order. It lives
//! in one fast-tier [`Region`]; a restart reopens the region and walks the tree from the
//! header: there is no log to replay. The byte layout, the commit protocol, what `open`
//! checks and how the latest commit is undone are specified in docs/format/pbtree.md.
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
//!   (live snapshots are counted per committed tree in DRAM). The free pages are not
//!   persisted: `open` walks the tree and every page it does not reach is free;
//! - every node page and both superblock slots carry a CRC32C seeded with the tree's id and the
//!   page number (slot offset), so a pointer that strays into another tree's leftovers or into a
//!   stale page of this one is detected, not followed. Every page is verified when it is read
//!   from the region; verified pages are kept in a page cache of up to [`PAGE_CACHE_PAGES`]
//!   (a committed page never changes while a readable tree uses it, and a commit evicts the
//!   free pages it writes), so a lookup copies and checks no page twice. Damage that strikes a
//!   cached page after it was verified is found by the next read of the region (an open).
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
//! Undoing the latest commit: the engine commits the index before it records the commit's
//! generation in its manifest, so the index may be one commit ahead of the manifest. The slot
//! of the commit before the latest one is untouched until the next commit, and the pages of its
//! tree are not reused while a snapshot of it is alive, so one commit can be undone:
//! - at open, [`PBTree::open_at_most`] with the manifest's generation `m`: a commit word of
//!   `m + 1` is republished as `m` once the tree of slot `m % 2` passed every check of `open`
//!   (more than one commit ahead, or behind, is corruption);
//! - in the running process, [`PBTree::rollback`] with a live snapshot of the tree the latest
//!   commit started from (the engine holds one until the manifest record is durable):
//!   republishes that generation and makes its tree the committed one again. Snapshots of the
//!   undone tree keep reading it: live snapshots are counted per DRAM sequence number of their
//!   tree, not per generation, since the next commit reuses the undone generation's number.
//!
//! The engine must not start commit `g + 1` before `g` is recorded: that commit overwrites
//! the slot of `g - 1`, and only one commit can be undone.
//!
//! Who calls it: `index::global`, the SLM-DB mode's index that maps keys to the blocks of its
//! single level of SSTables; [`PBTree::count_files_in_leaf_range`] is its leaf-scan
//! selective-compaction trigger, and [`Snapshot::count_by_file`] the source of its per-file
//! live-key counts at open. A [`Location`] flag, [`LOCATION_MERGE`], marks a key whose
//! newest version in its SSTable is a merge operand.
//!
//! Concurrency: `PBTree` is `Send + Sync`. One [`Writer`] exists at a time (it holds the
//! internal writer mutex: [`PBTree::writer`] waits for the previous writer to commit or drop).
//! Readers take a [`Snapshot`] ([`PBTree::read`]) of the latest committed tree and run
//! concurrently with the writer without taking the writer mutex; the snapshot keeps the pages
//! of its tree from being reused until it is dropped. Lock order: the writer mutex, then the
//! readers mutex (held only for a few statements: registering a snapshot, publishing a commit
//! or a rollback, computing which freed pages can be reused). A thread that holds a `Writer` must not ask for
//! another one. One process opens a region at a time (the engine's directory lock).
//!
//! Errors: an I/O error while a commit writes or persists (or a rollback publishes) *poisons*
//! the tree: the commit's fate is decided by the next recovery, and every later write fails with [`Error::Poisoned`] (reads
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
mod recovery;
#[cfg(test)]
mod tests;
mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(doc)]
use crate::error::ArtifactKind;
use crate::error::{Error, IoOp, Result};
use crate::lock_order::{Mutex, Rank};
use crate::tier::Region;

use batch::Batch;
pub(crate) use format::LOCATION_MERGE;
use format::{Committed, encode_header_page, le_u32, le_u64};
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
    /// [`LOCATION_MERGE`] or 0 (format version 1 refuses every other bit).
    pub(crate) flags: u32,
}

impl Location {
    /// The block of `size` bytes at `offset` in SSTable `file`, no flags.
    pub(crate) fn new(file: u64, offset: u64, size: u32) -> Location {
        Location::with_flags(file, offset, size, 0)
    }

    /// The block of `size` bytes at `offset` in SSTable `file`, with `flags`
    /// ([`LOCATION_MERGE`] or 0; [`Writer::insert`] refuses any other bit).
    pub(crate) fn with_flags(file: u64, offset: u64, size: u32, flags: u32) -> Location {
        Location {
            file,
            offset,
            size,
            flags,
        }
    }

    /// The file number of the SSTable that holds the key.
    pub(crate) fn file(&self) -> u64 {
        self.file
    }

    /// Offset of the data block that holds the key, in that file.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Bytes of the data block that holds the key.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The location's flags.
    pub(crate) fn flags(&self) -> u32 {
        self.flags
    }

    /// True if the key's newest version in that SSTable is a merge operand
    /// ([`LOCATION_MERGE`]).
    pub(crate) fn is_merge(&self) -> bool {
        self.flags & LOCATION_MERGE != 0
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

/// Pages the page cache holds at most (64 MiB); it is emptied when full.
const PAGE_CACHE_PAGES: usize = 16_384;

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
    /// Node pages the commits that returned wrote since `create` or `open` (statistics).
    pages_written: AtomicU64,
    /// Verified pages by number (at most [`PAGE_CACHE_PAGES`]): a committed page never
    /// changes while a tree that can be read uses it, and a commit evicts every page it is
    /// about to write, so a cached page is always the one its readers would read.
    cache: Mutex<std::collections::HashMap<u64, format::Page>>,
    readers: Mutex<Readers>,
}

/// What the readers mutex protects.
#[derive(Debug)]
struct Readers {
    /// The latest committed tree: what a new snapshot reads.
    current: Committed,
    /// The sequence number of `current` (see [`WriterState::seq`]).
    seq: u64,
    /// Live snapshots per sequence number. The pages released when the tree of sequence
    /// number `s` became current are reused only when every live snapshot has a sequence
    /// number of at least `s`.
    live: BTreeMap<u64, usize>,
}

/// What the writer mutex protects.
#[derive(Debug)]
struct WriterState {
    /// The latest committed tree (the same as the readers' `current`).
    committed: Committed,
    /// The sequence number of `committed` in DRAM (0 at `create` or `open`): every commit and
    /// every rollback makes the next one current. Unlike generations, sequence numbers are
    /// never reused, so a snapshot of a rolled-back generation `g` and one of the generation
    /// `g` committed after the rollback (two different trees) are told apart.
    seq: u64,
    /// Pages no committed tree and no live snapshot uses: the next commit writes here, lowest
    /// first.
    free: BTreeSet<u64>,
    /// Pages released when the tree of each sequence number became current (used by older
    /// trees only), not yet in `free` because a snapshot of an older tree may still read them.
    pending: BTreeMap<u64, Vec<u64>>,
    /// The pages written by rolled-back commits, with the sequence number of their tree: only
    /// snapshots of that tree read them, and they are free once none is alive.
    rolled_back: Vec<(u64, Vec<u64>)>,
    /// The latest commit, while [`PBTree::rollback`] may still undo it.
    last: Option<LastCommit>,
    /// Set by the first failed write or persist of a commit: the cause.
    poisoned: Option<String>,
    /// The highest page written since the tree was created or opened (statistics).
    highest_written: u64,
}

/// What [`PBTree::rollback`] needs of the latest commit.
#[derive(Debug)]
struct LastCommit {
    /// The tree the commit started from.
    parent: Committed,
    /// The pages the commit wrote: those of its tree that its parent does not use.
    written: Vec<u64>,
}

impl WriterState {
    /// Moves to `free` the pages released by commits that every live snapshot is at or after,
    /// and the pages of rolled-back trees no live snapshot reads.
    fn reclaim(&mut self, shared: &Shared) {
        let readers = shared.readers.lock();
        let oldest = readers.live.keys().next().copied();
        // Pages released at sequence number `s` are used by older trees only.
        let still_read = match oldest {
            Some(s) => self.pending.split_off(&s.saturating_add(1)),
            None => BTreeMap::new(),
        };
        for (_, pages) in std::mem::replace(&mut self.pending, still_read) {
            self.free.extend(pages);
        }
        let (kept, gone): (Vec<_>, Vec<_>) = std::mem::take(&mut self.rolled_back)
            .into_iter()
            .partition(|(seq, _)| readers.live.contains_key(seq));
        drop(readers);
        self.rolled_back = kept;
        for (_, pages) in gone {
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
    /// It writes nothing: it is [`PBTree::open_at_most`] with no bound (`u64::MAX`), for a
    /// caller that keeps no record of the generations it committed.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind [`ArtifactKind::PersistentIndex`], `path`, the offset of the
    /// damaged header field, slot, page or child pointer); [`Error::NotSupported`] for another
    /// format version; [`Error::Io`] if the region cannot be read.
    pub fn open(region: Arc<dyn Region>, path: impl Into<PathBuf>) -> Result<PBTree> {
        PBTree::open_at_most(region, path, u64::MAX)
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
                pages_written: AtomicU64::new(0),
                cache: Mutex::new(Rank::LeafPBTreePages, std::collections::HashMap::new()),
                readers: Mutex::new(
                    Rank::LeafPBTreeReaders,
                    Readers {
                        current: committed,
                        seq: 0,
                        live: BTreeMap::new(),
                    },
                ),
            }),
            writer: Mutex::new(
                Rank::PBTreeWriter,
                WriterState {
                    committed,
                    seq: 0,
                    free,
                    pending: BTreeMap::new(),
                    rolled_back: Vec::new(),
                    last: None,
                    poisoned: None,
                    highest_written: 0,
                },
            ),
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

    /// Empties the page cache, so that the next read of every page reads and verifies the
    /// region again (tests that damage the region of a running tree).
    #[cfg(test)]
    pub(crate) fn forget_cached_pages(&self) {
        self.shared.cache.lock().clear();
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

    /// The region the tree lives in. Its bytes are stable only while no commit or rollback
    /// runs (a caller that copies them holds off the writer).
    pub fn region(&self) -> &Arc<dyn Region> {
        &self.shared.region
    }

    /// Bytes of the node pages the commits that returned wrote since the tree was created or
    /// opened (statistics: the index's write traffic; the superblock slots and the commit word
    /// are not counted).
    pub fn bytes_written(&self) -> u64 {
        self.shared.pages_written.load(Ordering::Relaxed) * PAGE_SIZE as u64
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
