//! LightKV's persistent write buffer (PWB): an append-only log of versions on the fast tier,
//! indexed by a Radix Hash Tree of its own (LightKV, MSST 2020, slides 12 and 16;
//! docs/decisions/0027-lightkv-mode.md). The byte layout, the commit protocol and what `open`
//! checks and repairs are specified in docs/format/pwb.md.
//!
//! Design:
//! - one fast-tier [`Region`]: a header page, the log area, then an RH-tree
//!   ([`crate::index::rhtree::RhTree`]) in the rest of the region. Each write appends one
//!   *record* (sequence number, kind, key, value and the log offset of the key's older
//!   version in this buffer); the RH-tree maps each key to its newest record. There is no
//!   DRAM index: a point read is a hash probe and a walk back along the key's versions to the
//!   newest one its snapshot sees; the prefix search tree the RH-tree keeps in DRAM is
//!   rebuilt from its leaf directory at open;
//! - commit protocol of a batch ([`Pwb::insert`] for each operation, then [`Pwb::commit`]):
//!   the records are appended and persisted, then each key's slot in the RH-tree is pointed at
//!   its record (the RH-tree persists its own records and slots), then the *committed tail*
//!   word is published: the batch is durable at that one aligned store. A reader that finds a
//!   record above the committed sequence number (a batch still committing) walks on to the
//!   older version, so a batch becomes visible at once. At open, the records after the
//!   committed tail (a batch a crash interrupted, all persisted before the RH-tree pointed at
//!   them) are undone in the RH-tree, newest first: a key whose slot names such a record is
//!   pointed back at the record's older version or removed;
//! - range deletions are records too (start key, end as the value) but not in the RH-tree;
//!   `open` collects them while it verifies every committed record;
//! - iterators and flushes need key order, which a hash index does not give: the first
//!   iterator sorts the committed records' keys (the values stay in the region) and later ones
//!   merge the records committed since into that sorted run (`sorted.rs`).
//!
//! Who calls it: `memtable::persistent` (a persistent memtable of the LightKV design); the
//! write path creates buffers through the memtable design, recovery reopens them.
//!
//! Concurrency: `Pwb` is `Send + Sync`. Inserts and commits are serialised by the writer
//! mutex; reads take the RH-tree's read lock for the probe and read records the writer
//! persisted before it pointed the tree at them, and `prev` offsets inside those records;
//! a record's bytes are never written again.
//!
//! Errors: an I/O error or a full RH-tree while a batch commits *poisons* the buffer (the
//! batch's RH-tree changes are undone as far as possible; recovery decides the rest); later
//! inserts fail with [`Error::Poisoned`], reads keep working. The write path checks
//! [`Pwb::has_room`] before a batch, so a full log or tree ends the buffer instead. Corruption
//! is reported with [`ArtifactKind::PersistentMemtable`], the region's path and the offset of
//! the damaged field or record.

mod format;
mod sorted;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::lock_order::{Mutex, Rank};

use crate::checksum;
use crate::coding::{le_u32, le_u64};
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
use crate::index::pbtree::Location;
use crate::index::rhtree::{self, RhTree};
use crate::key::{SeqNo, ValueKind};
use crate::range_del::RangeTombstone;
use crate::tier::{Region, RegionSlice};

use format::{
    Damage, LOG_START, NO_PREV, OFF_COMMITTED, OFF_HEADER_CRC, OFF_ID, OFF_LOG_LEN, OFF_REGION_LEN,
    OFF_VERSION, RECORD_HEADER_LEN, Record, decode_record, encode_header, encode_record_header,
    payload_lens, record_len,
};
pub use format::{FORMAT_VERSION, MAGIC};
pub(crate) use sorted::PwbIter;

/// Leaf blocks the RH-tree must have free before a batch: splits take a few each.
const SPARE_LEAF_BLOCKS: usize = 64;

/// The least `persistent::batch_cost` charges an operation.
const OP_MIN_COST: u64 = 128;

/// Bytes of the smallest RH-tree area (about 500 leaf blocks: the first splits of keys with a
/// long common prefix take some 9 blocks per prefix byte, most of them empty leaves).
const MIN_INDEX_LEN: u64 = 4 << 20;

/// The region length of a buffer whose log area holds `log_bytes`: the header page, the log
/// and an RH-tree area as large as the log (at least [`MIN_INDEX_LEN`]), in whole pages. Half
/// the tree area is leaf blocks, which hold 256 slots each, so a buffer of small records (at
/// least 40 bytes each) has a leaf block for every 100 or so of them.
pub(crate) fn region_len(log_bytes: u64) -> u64 {
    let log = log_bytes.next_multiple_of(4096).max(4096);
    LOG_START as u64 + log + log.max(MIN_INDEX_LEN)
}

/// The log and RH-tree lengths of a region of `len` bytes ([`region_len`] inverted).
fn areas(len: u64) -> (u64, u64) {
    let body = len.saturating_sub(LOG_START as u64);
    let index = (body / 2).next_multiple_of(4096).max(MIN_INDEX_LEN);
    (body.saturating_sub(index), index)
}

/// One operation of the batch being committed.
#[derive(Debug)]
struct Pending {
    key: Vec<u8>,
    offset: u64,
    len: u32,
    kind: ValueKind,
    seq: SeqNo,
    prev: u64,
    /// Whether its RH-tree slot was pointed at it (undone if the commit fails).
    indexed: bool,
}

/// What the writer mutex protects.
#[derive(Debug)]
struct Writer {
    /// Where the next record goes (log offset).
    tail: u64,
    pending: Vec<Pending>,
    /// The newest pending record of each key of the batch (its `prev` for the next one).
    batch_keys: HashMap<Vec<u8>, u64>,
    poisoned: Option<String>,
}

/// A write buffer in one region. See the module documentation.
#[derive(Debug)]
pub struct Pwb {
    region: Arc<dyn Region>,
    path: PathBuf,
    id: u64,
    log_len: u64,
    index: RhTree,
    writer: Mutex<Writer>,
    /// The published committed tail.
    committed_tail: AtomicU64,
    /// The largest committed sequence number (0: none).
    committed: AtomicU64,
    /// The smallest committed sequence number (`u64::MAX`: none).
    min_seq: AtomicU64,
    /// Committed records (range deletions included).
    entries: AtomicU64,
    sorted: sorted::SortedCache,
}

impl Pwb {
    /// Makes `region` an empty buffer with id `id` (the region's file number), its areas as
    /// [`region_len`] lays them out. `path` is the region's file, for error messages.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] if the region is too small or not a whole number of pages;
    /// [`Error::Io`] if writing or persisting the header or the empty tree fails.
    pub fn create(region: Arc<dyn Region>, path: impl Into<PathBuf>, id: u64) -> Result<Pwb> {
        let path = path.into();
        let len = region.len() as u64;
        let (log_len, _) = areas(len);
        if !len.is_multiple_of(4096) || log_len < 4096 {
            return Err(Error::invalid(format!(
                "write buffer region {} has {len} bytes; it needs a whole number of 4096-byte \
                 pages, at least {}",
                path.display(),
                region_len(4096)
            )));
        }
        let header = encode_header(id, len, log_len);
        region
            .write(0, &header)
            .and_then(|()| region.persist(0, header.len()))
            .map_err(|e| Error::io(IoOp::Write, &path, e))?;
        let index = RhTree::create(Self::index_region(&region, log_len, &path)?, &path, id)?;
        Ok(Pwb::with(region, path, id, log_len, index, 0))
    }

    fn index_region(
        region: &Arc<dyn Region>,
        log_len: u64,
        path: &Path,
    ) -> Result<Arc<dyn Region>> {
        let base = LOG_START + usize::try_from(log_len).unwrap_or(usize::MAX);
        let len = region.len().saturating_sub(base);
        RegionSlice::new(Arc::clone(region), base, len)
            .map(|s| Arc::new(s) as Arc<dyn Region>)
            .map_err(|e| Error::io(IoOp::Open, path, e))
    }

    fn with(
        region: Arc<dyn Region>,
        path: PathBuf,
        id: u64,
        log_len: u64,
        index: RhTree,
        tail: u64,
    ) -> Pwb {
        Pwb {
            region,
            path,
            id,
            log_len,
            index,
            writer: Mutex::new(
                Rank::PwbWriter,
                Writer {
                    tail,
                    pending: Vec::new(),
                    batch_keys: HashMap::new(),
                    poisoned: None,
                },
            ),
            committed_tail: AtomicU64::new(tail),
            committed: AtomicU64::new(0),
            min_seq: AtomicU64::new(u64::MAX),
            entries: AtomicU64::new(0),
            sorted: sorted::SortedCache::default(),
        }
    }

    /// Reopens the buffer in `region` after a restart or a crash: checks the header, opens the
    /// RH-tree (recreated from the log when it does not open), verifies every committed record
    /// and collects the range deletions, and undoes in the RH-tree a batch whose commit was
    /// not published. Returns the buffer and its range tombstones in commit order.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] (kind [`ArtifactKind::PersistentMemtable`], `path`, the offset of
    /// the damaged header field or record); [`Error::NotSupported`] for another format
    /// version; [`Error::Io`] if the region cannot be read or the RH-tree repaired.
    pub fn open(
        region: Arc<dyn Region>,
        path: impl Into<PathBuf>,
    ) -> Result<(Pwb, Vec<RangeTombstone>)> {
        let path = path.into();
        let len = region.len() as u64;
        let corrupt = |offset: u64, reason| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentMemtable, &path, offset),
                reason,
            )
        };
        let mut h = [0u8; OFF_COMMITTED];
        if len < LOG_START as u64 {
            return Err(corrupt(0, CorruptionReason::Truncated));
        }
        region
            .read(0, &mut h)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if h.get(..8) != Some(&MAGIC[..]) {
            return Err(corrupt(0, CorruptionReason::BadMagic));
        }
        let version = le_u32(&h, OFF_VERSION);
        if version != FORMAT_VERSION {
            return Err(Error::NotSupported {
                what: "LightKV write buffer",
                found_version: version,
            });
        }
        let stored = le_u32(&h, OFF_HEADER_CRC);
        let computed = checksum::checksum(h.get(..OFF_HEADER_CRC).unwrap_or_default());
        if stored != computed || le_u32(&h, OFF_HEADER_CRC + 4) != 0 {
            return Err(corrupt(
                OFF_HEADER_CRC as u64,
                CorruptionReason::ChecksumMismatch { stored, computed },
            ));
        }
        if le_u64(&h, OFF_REGION_LEN) != len {
            return Err(corrupt(
                OFF_REGION_LEN as u64,
                CorruptionReason::Invalid("the region's length differs from its header's"),
            ));
        }
        let id = le_u64(&h, OFF_ID);
        let log_len = le_u64(&h, OFF_LOG_LEN);
        if log_len < 4096 || LOG_START as u64 + log_len > len || !log_len.is_multiple_of(4096) {
            return Err(corrupt(
                OFF_LOG_LEN as u64,
                CorruptionReason::Invalid("the log area does not fit the region"),
            ));
        }
        let tail = region
            .read_u64(OFF_COMMITTED)
            .map_err(|e| Error::io(IoOp::Read, &path, e))?;
        if tail > log_len || !tail.is_multiple_of(8) {
            return Err(corrupt(
                OFF_COMMITTED as u64,
                CorruptionReason::Invalid("the committed tail is outside the log"),
            ));
        }
        let slice = Self::index_region(&region, log_len, &path)?;
        let (index, rebuild) = match RhTree::open(Arc::clone(&slice), &path) {
            Ok(t) => (t, false),
            Err(c @ Error::Corruption { .. }) => {
                log::warn!(
                    "matrixkv: the RH-tree of write buffer {} is damaged ({c}); rebuilding it \
                     from the log",
                    path.display()
                );
                (RhTree::create(slice, &path, id)?, true)
            }
            Err(e) => return Err(e),
        };
        let pwb = Pwb::with(region, path, id, log_len, index, tail);
        let mut tombstones = Vec::new();
        let (mut entries, mut min, mut max) = (0u64, u64::MAX, 0u64);
        let mut at = 0;
        while at < tail {
            let (rec, len) = pwb.record(at)?;
            entries += 1;
            min = min.min(rec.seq.0);
            max = max.max(rec.seq.0);
            if rec.kind == ValueKind::RangeDeletion {
                tombstones.push(RangeTombstone {
                    start: rec.key,
                    end: rec.value,
                    seq: rec.seq,
                });
            } else if rebuild {
                pwb.index.insert(&rec.key, pwb.location(at, len))?;
            }
            at += len;
        }
        if at != tail {
            return Err(pwb.corrupt(
                tail,
                CorruptionReason::Invalid("the committed tail is inside a record"),
            ));
        }
        pwb.undo_uncommitted(tail)?;
        pwb.entries.store(entries, Ordering::Relaxed);
        pwb.min_seq.store(min, Ordering::Relaxed);
        pwb.committed.store(max, Ordering::Release);
        tombstones.sort_by_key(|t| t.seq);
        Ok((pwb, tombstones))
    }

    /// Points the RH-tree slots that name a record after the committed tail (the batch a
    /// crash interrupted, persisted before the tree named it) back at their older versions,
    /// newest record first. Records that do not decode end the batch (the tree never named
    /// them: they were persisted before it did).
    fn undo_uncommitted(&self, tail: u64) -> Result<()> {
        let mut batch = Vec::new();
        let mut at = tail;
        while let Ok((rec, len)) = self.record(at) {
            batch.push((at, len, rec));
            at += len;
        }
        for (at, len, rec) in batch.into_iter().rev() {
            if rec.kind == ValueKind::RangeDeletion {
                continue;
            }
            if self.index.get(&rec.key)? == Some(self.location(at, len)) {
                self.restore(&rec.key, rec.prev)?;
            }
        }
        Ok(())
    }

    /// Points `key`'s slot at the record at `prev`, or removes the key for [`NO_PREV`].
    fn restore(&self, key: &[u8], prev: u64) -> Result<()> {
        if prev == NO_PREV {
            self.index.remove(key)?;
            return Ok(());
        }
        let (_, len) = self.record(prev)?;
        self.index.insert(key, self.location(prev, len))
    }

    /// The RH-tree location of the record of `len` bytes at log offset `at`.
    fn location(&self, at: u64, len: u64) -> Location {
        Location::new(self.id, at, u32::try_from(len).unwrap_or(u32::MAX))
    }

    fn corrupt(&self, offset: u64, reason: CorruptionReason) -> Error {
        Error::corruption(
            CorruptionSite::new(
                ArtifactKind::PersistentMemtable,
                &self.path,
                LOG_START as u64 + offset,
            ),
            reason,
        )
    }

    /// The header of the record at log offset `at` and the record's length (both inside the
    /// log, else corruption).
    fn record_header(&self, at: u64) -> Result<([u8; RECORD_HEADER_LEN], u64)> {
        let bad = |reason| self.corrupt(at, reason);
        if at.saturating_add(RECORD_HEADER_LEN as u64) > self.log_len {
            return Err(bad(CorruptionReason::Truncated));
        }
        let mut header = [0u8; RECORD_HEADER_LEN];
        self.region
            .read(LOG_START + at as usize, &mut header)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
        let (k, v) = payload_lens(&header);
        let len = record_len(k, v) as u64;
        if at.saturating_add(len) > self.log_len {
            return Err(bad(CorruptionReason::Truncated));
        }
        Ok((header, len))
    }

    /// The record at log offset `at` and its length, checked.
    fn record(&self, at: u64) -> Result<(Record, u64)> {
        let bad = |reason| self.corrupt(at, reason);
        let (_, len) = self.record_header(at)?;
        let mut b = vec![0u8; len as usize];
        self.region
            .read(LOG_START + at as usize, &mut b)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
        match decode_record(self.id, at, &b) {
            Ok(r) => Ok((r, len)),
            Err(Damage::Checksum { stored, computed }) => {
                Err(bad(CorruptionReason::ChecksumMismatch { stored, computed }))
            }
            Err(Damage::Kind) => Err(bad(CorruptionReason::Invalid("an unknown record kind"))),
            Err(Damage::Padding) => Err(bad(CorruptionReason::Invalid("nonzero record padding"))),
        }
    }

    /// The sequence number, kind, key and length of the record at log offset `at`, without
    /// its value and unchecked (for sorting records `open` or a commit already checked; the
    /// value's reader checks the record).
    fn record_key(&self, at: u64) -> Result<(SeqNo, ValueKind, Vec<u8>, u64)> {
        let bad = |reason| self.corrupt(at, reason);
        let (header, len) = self.record_header(at)?;
        let (k, _) = payload_lens(&header);
        let base = LOG_START + at as usize;
        let (seq, kind) = format::seq_and_kind(&header)
            .ok_or_else(|| bad(CorruptionReason::Invalid("an unknown record kind")))?;
        let mut key = vec![0u8; k];
        self.region
            .read(base + RECORD_HEADER_LEN, &mut key)
            .map_err(|e| Error::io(IoOp::Read, &self.path, e))?;
        Ok((seq, kind, key, len))
    }

    /// Appends one version of a write batch (persisted with the batch and visible only after
    /// [`Pwb::commit`]).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a key longer than the RH-tree's limit
    /// ([`rhtree::MAX_KEY_LEN`]); [`Error::MemtableFull`] if the log has no room (nothing is
    /// stored); [`Error::Poisoned`] after a failed commit; [`Error::Io`] (which poisons it).
    pub fn insert(&self, key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) -> Result<()> {
        if kind != ValueKind::RangeDeletion && key.len() > rhtree::MAX_KEY_LEN {
            return Err(Error::invalid(format!(
                "a key of {} bytes is longer than the LightKV index's limit of {} bytes",
                key.len(),
                rhtree::MAX_KEY_LEN
            )));
        }
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let len = record_len(key.len(), value.len()) as u64;
        if w.tail + len > self.log_len {
            return Err(Error::MemtableFull {
                path: self.path.clone(),
                needed: len,
                free: self.log_len - w.tail,
            });
        }
        let prev = if kind == ValueKind::RangeDeletion {
            NO_PREV
        } else if let Some(&p) = w.batch_keys.get(key) {
            p
        } else {
            match self.index.get(key)? {
                Some(loc) if loc.file() == self.id => loc.offset(),
                Some(_) => {
                    return Err(self.corrupt(
                        0,
                        CorruptionReason::Invalid("the write buffer's RH-tree names another file"),
                    ));
                }
                None => NO_PREV,
            }
        };
        let at = w.tail;
        let header = encode_record_header(self.id, at, seq, kind, prev, key, value);
        let base = LOG_START + at as usize;
        let payload = RECORD_HEADER_LEN + key.len() + value.len();
        let written = self
            .region
            .write(base, &header)
            .and_then(|()| self.region.write(base + RECORD_HEADER_LEN, key))
            .and_then(|()| {
                self.region
                    .write(base + RECORD_HEADER_LEN + key.len(), value)
            })
            .and_then(|()| {
                let pad = [0u8; 8];
                self.region
                    .write(base + payload, &pad[..len as usize - payload])
            });
        if let Err(e) = written {
            let err = Error::io(IoOp::Write, &self.path, e);
            w.poisoned = Some(err.to_string());
            return Err(err);
        }
        w.tail += len;
        if kind != ValueKind::RangeDeletion {
            w.batch_keys.insert(key.to_vec(), at);
        }
        w.pending.push(Pending {
            key: key.to_vec(),
            offset: at,
            len: len as u32,
            kind,
            seq,
            prev,
            indexed: false,
        });
        Ok(())
    }

    /// Commits the batch inserted since the last commit: persists its records, points the
    /// RH-tree at them and publishes the committed tail. `seq` is the batch's last sequence
    /// number (the commit of an empty batch only raises the committed sequence number).
    ///
    /// # Errors
    ///
    /// [`Error::Poisoned`] after an earlier failure; [`Error::Io`] or [`Error::IndexFull`]
    /// (which poison the buffer; the batch's tree changes are undone where possible).
    pub fn commit(&self, seq: SeqNo) -> Result<()> {
        let mut w = self.writer.lock();
        if let Some(cause) = &w.poisoned {
            return Err(Error::Poisoned {
                cause: cause.clone(),
            });
        }
        let result = self.commit_locked(&mut w);
        w.batch_keys.clear();
        match result {
            Ok(()) => {
                let pending = std::mem::take(&mut w.pending);
                if let Some(first) = pending.first() {
                    self.min_seq.fetch_min(first.seq.0, Ordering::Relaxed);
                }
                self.entries
                    .fetch_add(pending.len() as u64, Ordering::Relaxed);
                self.committed_tail.store(w.tail, Ordering::Release);
                self.committed.fetch_max(seq.0, Ordering::Release);
                Ok(())
            }
            Err(e) => {
                let pending = std::mem::take(&mut w.pending);
                for p in pending.iter().rev().filter(|p| p.indexed) {
                    if self.restore(&p.key, p.prev).is_err() {
                        break;
                    }
                }
                w.poisoned = Some(e.to_string());
                Err(e)
            }
        }
    }

    fn commit_locked(&self, w: &mut Writer) -> Result<()> {
        let Some(first) = w.pending.first() else {
            return Ok(());
        };
        let from = LOG_START + first.offset as usize;
        self.region
            .persist(from, LOG_START + w.tail as usize - from)
            .map_err(|e| Error::io(IoOp::Sync, &self.path, e))?;
        for i in 0..w.pending.len() {
            let Some(p) = w.pending.get(i) else { break };
            if p.kind == ValueKind::RangeDeletion {
                continue;
            }
            self.index
                .insert(&p.key, self.location(p.offset, u64::from(p.len)))?;
            if let Some(p) = w.pending.get_mut(i) {
                p.indexed = true;
            }
        }
        if let Err(e) = self.region.publish_u64(OFF_COMMITTED, w.tail) {
            // The word may have been stored: the batch's fate is recovery's to decide, and its
            // RH-tree slots stay (open undoes them if the word did not persist).
            for p in &mut w.pending {
                p.indexed = false;
            }
            return Err(Error::io(IoOp::Sync, &self.path, e));
        }
        Ok(())
    }

    /// Whether a batch of `cost` bytes (see `persistent::batch_cost`, which charges every
    /// operation more than its record and its RH-tree record take) fits: the log and the
    /// RH-tree's log have room for it and the tree has spare leaf blocks for splits.
    pub fn has_room(&self, cost: u64) -> bool {
        let tail = self.writer.lock().tail;
        let (tree_log, blocks) = self.index.spare();
        // Each operation costs at least `OP_MIN_COST`; a split takes two blocks and frees
        // one, and about one insert in a hundred splits.
        let ops = usize::try_from(cost / OP_MIN_COST).unwrap_or(usize::MAX);
        tail.saturating_add(cost) <= self.log_len
            && cost <= tree_log
            && blocks >= SPARE_LEAF_BLOCKS + ops / 8
    }

    /// Walks the versions of `key` newest first from its RH-tree slot, skipping the ones above
    /// `snapshot` (and above the committed sequence number: a batch still committing), until
    /// `stop` says so of one (it is included). Range deletions are not in the walk.
    fn walk(
        &self,
        key: &[u8],
        snapshot: SeqNo,
        mut stop: impl FnMut(&Record) -> bool,
    ) -> Result<()> {
        let visible = snapshot.0.min(self.committed.load(Ordering::Acquire));
        let mut at = match self.index.get(key)? {
            None => return Ok(()),
            Some(loc) if loc.file() == self.id => loc.offset(),
            Some(_) => {
                return Err(self.corrupt(
                    0,
                    CorruptionReason::Invalid("the write buffer's RH-tree names another file"),
                ));
            }
        };
        while at != NO_PREV {
            let (rec, _) = self.record(at)?;
            if rec.key != key {
                return Err(self.corrupt(
                    at,
                    CorruptionReason::Invalid("a version of another key in a key's chain"),
                ));
            }
            if rec.seq.0 <= visible && stop(&rec) {
                break;
            }
            if rec.prev != NO_PREV && rec.prev >= at {
                return Err(self.corrupt(
                    at,
                    CorruptionReason::Invalid("an older version after the newer one"),
                ));
            }
            at = rec.prev;
        }
        Ok(())
    }

    /// The newest version of `key` visible at `snapshot`: `(kind, seq, value)`.
    ///
    /// # Errors
    ///
    /// [`Error::Corruption`] for a damaged record or chain; [`Error::Io`].
    pub fn newest(
        &self,
        key: &[u8],
        snapshot: SeqNo,
    ) -> Result<Option<(ValueKind, SeqNo, Vec<u8>)>> {
        let mut found = None;
        self.walk(key, snapshot, |r| {
            found = Some((r.kind, r.seq, r.value.clone()));
            true
        })?;
        Ok(found)
    }

    /// The versions of `key` visible at `snapshot`, newest first, up to and including the first
    /// that is not a merge operand.
    ///
    /// # Errors
    ///
    /// As [`Pwb::newest`].
    pub fn versions(&self, key: &[u8], snapshot: SeqNo) -> Result<crate::key::Versions> {
        let mut out = Vec::new();
        self.walk(key, snapshot, |r| {
            out.push((r.kind, r.value.clone()));
            r.kind != ValueKind::Merge
        })?;
        Ok(out)
    }

    /// The committed sequence number (0: nothing committed).
    pub fn committed(&self) -> SeqNo {
        SeqNo(self.committed.load(Ordering::Acquire))
    }

    /// The smallest committed sequence number, `None` if nothing is committed.
    pub fn min_seq(&self) -> Option<SeqNo> {
        let s = self.min_seq.load(Ordering::Relaxed);
        (s != u64::MAX).then_some(SeqNo(s))
    }

    /// Committed records, range deletions included.
    pub fn entries(&self) -> u64 {
        self.entries.load(Ordering::Relaxed)
    }

    /// Bytes of the log in use (what the memtable reports as its size).
    pub fn used_bytes(&self) -> u64 {
        self.committed_tail.load(Ordering::Acquire)
    }

    /// The RH-tree (tests and tools).
    #[cfg(test)]
    fn index(&self) -> &RhTree {
        &self.index
    }
}
