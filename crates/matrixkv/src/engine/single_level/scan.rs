//! Scans of SLM-DB's single level (Kaiyrakhmet et al., FAST 2019, §3.3):
//!
//! - [`IndexScan`]: the level's part of a scan read through the B+-tree: its leaves give the
//!   keys in order, each with the block of its newest version, so a scan reads one block per
//!   key instead of merging every table of the level (which may be hundreds). Used when the
//!   scan's snapshot sees every table's versions (at or above the level's newest sequence
//!   number): then the newest version is the only one a scan needs, except for a key whose
//!   newest version is a merge operand, whose versions are all read from the tables that may
//!   hold it.
//! - [`ScanProbe`]: a scan at an older snapshot merges every table, as before, watched by the
//!   same trigger.
//! - [`RangeTrigger`]: the range-query compaction trigger both feed: per sub-range of
//!   `scan_window` entries read from tables, the distinct tables they came from; when the scan
//!   ends, the tables of its most scattered sub-range become selective-compaction candidates
//!   if they are more than `scan_threshold`.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::DbInner;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::index::pbtree::{Iter as TreeIter, Location, Snapshot};
use crate::iter::InternalIterator;
use crate::iter::merging::MergingIterator;
use crate::key::{SeqNo, compare_internal, make_internal_key, seek_key, user_key};
use crate::layout::{self, FileNum};
use crate::options::SlmDbOptions;
use crate::stats::Counters;
use crate::version::edit::FileMeta;
use crate::version::version::Version;

/// The range-query trigger (see the module documentation). Only forward movement counts.
#[derive(Debug)]
pub(crate) struct RangeTrigger {
    window: usize,
    threshold: usize,
    /// Tables of the entries read in the current sub-range (with repeats).
    seen: Vec<u64>,
    /// The distinct tables of the most scattered sub-range so far.
    worst: Vec<u64>,
}

impl RangeTrigger {
    pub(crate) fn new(k: &SlmDbOptions) -> RangeTrigger {
        RangeTrigger {
            window: k.scan_window as usize,
            threshold: k.scan_threshold as usize,
            seen: Vec::new(),
            worst: Vec::new(),
        }
    }

    /// Counts an entry read from `table`.
    fn record(&mut self, table: u64) {
        if self.window == 0 {
            return;
        }
        self.seen.push(table);
        if self.seen.len() >= self.window {
            self.close_window();
        }
    }

    /// Ends the current sub-range (a seek starts a new one).
    fn close_window(&mut self) {
        self.seen.sort_unstable();
        self.seen.dedup();
        if self.seen.len() > self.worst.len() {
            std::mem::swap(&mut self.seen, &mut self.worst);
        }
        self.seen.clear();
    }

    /// The scan ended: its most scattered sub-range's tables become candidates of `db`'s
    /// index if they are more than the threshold.
    fn finish(&mut self, db: &DbInner) {
        self.close_window();
        if self.worst.len() > self.threshold
            && self.window > 0
            && let Some(ix) = db.levels.global_index()
        {
            ix.add_candidates(&self.worst);
            Counters::add(&db.counters.scan_candidates, self.worst.len() as u64);
        }
    }
}

/// A scan's merged sources at an older snapshot, whose first children are memtables and the
/// next ones the level's tables, in order, feeding the trigger.
pub(crate) struct ScanProbe {
    inner: MergingIterator,
    db: Arc<DbInner>,
    /// The table number of each child of `inner` (`None`: a memtable).
    tables: Vec<Option<u64>>,
    trigger: RangeTrigger,
}

impl ScanProbe {
    /// A probe over `inner`, whose first `memtables` children are memtables and the next
    /// ones the tables `level`, in order.
    pub(crate) fn new(
        db: Arc<DbInner>,
        inner: MergingIterator,
        memtables: usize,
        level: &[Arc<FileMeta>],
        k: &SlmDbOptions,
    ) -> ScanProbe {
        let tables = std::iter::repeat_n(None, memtables)
            .chain(level.iter().map(|f| Some(f.number.0)))
            .collect();
        ScanProbe {
            inner,
            db,
            tables,
            trigger: RangeTrigger::new(k),
        }
    }

    /// Counts the current entry if it comes from a table.
    fn record(&mut self) {
        if !self.inner.valid() {
            return;
        }
        let table = self
            .inner
            .current_child()
            .and_then(|c| self.tables.get(c).copied().flatten());
        if let Some(t) = table {
            self.trigger.record(t);
        }
    }
}

impl Drop for ScanProbe {
    fn drop(&mut self) {
        self.trigger.finish(&self.db);
    }
}

impl InternalIterator for ScanProbe {
    fn valid(&self) -> bool {
        self.inner.valid()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.trigger.close_window();
        self.inner.seek_to_first()?;
        self.record();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.trigger.close_window();
        self.inner.seek_to_last()
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.trigger.close_window();
        self.inner.seek(target)?;
        self.record();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.trigger.close_window();
        self.inner.seek_for_prev(target)
    }

    fn next(&mut self) -> Result<()> {
        self.inner.next()?;
        self.record();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.inner.prev()
    }

    fn key(&self) -> &[u8] {
        self.inner.key()
    }

    fn value(&self) -> &[u8] {
        self.inner.value()
    }

    fn value_status(&self) -> Result<()> {
        self.inner.value_status()
    }

    fn site(&self) -> Option<CorruptionSite> {
        self.inner.site()
    }
}

/// One version of the current key: its internal key, value, and where it was read.
struct Entry {
    ikey: Vec<u8>,
    value: Vec<u8>,
    table: u64,
    block: u64,
}

/// The single level read through a B+-tree snapshot (see the module documentation). Its
/// entries are the newest version of each key the tree maps (every version, newest first, of
/// a key whose newest is a merge operand); keys the tree does not map (deleted or never
/// written) have none. After an error it is not valid.
pub(crate) struct IndexScan {
    db: Arc<DbInner>,
    cursor: TreeIter,
    version: Arc<Version>,
    /// The version's tables by number.
    tables: Arc<HashMap<u64, Arc<FileMeta>>>,
    /// The index region (for errors).
    index_path: PathBuf,
    /// The current key's versions, newest first (empty: not valid).
    entries: Vec<Entry>,
    pos: usize,
    trigger: RangeTrigger,
}

impl IndexScan {
    /// A scan of `version`'s level through `snapshot`, the tree of the same generation.
    pub(crate) fn new(
        db: Arc<DbInner>,
        snapshot: &Snapshot,
        version: Arc<Version>,
        tables: Arc<HashMap<u64, Arc<FileMeta>>>,
        index_path: PathBuf,
        k: &SlmDbOptions,
    ) -> IndexScan {
        Counters::add(&db.counters.index_scans, 1);
        IndexScan {
            db,
            cursor: snapshot.iter(),
            version,
            tables,
            index_path,
            entries: Vec::new(),
            pos: 0,
            trigger: RangeTrigger::new(k),
        }
    }

    /// Runs a movement: on error the scan is not valid.
    fn moving(&mut self, f: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        let r = f(self);
        if r.is_err() {
            self.entries.clear();
        }
        r
    }

    /// Reads the versions of the key at the cursor (none when the cursor is not valid).
    fn load(&mut self) -> Result<()> {
        self.entries.clear();
        self.pos = 0;
        if !self.cursor.valid() {
            return Ok(());
        }
        let key = self.cursor.key().to_vec();
        let loc = self.cursor.location();
        if loc.is_merge() {
            return self.load_every_version(&key);
        }
        let entry = self.newest_at(&key, &loc)?;
        self.entries.push(entry);
        Ok(())
    }

    /// The newest version of `key`, in the block `loc` names.
    fn newest_at(&self, key: &[u8], loc: &Location) -> Result<Entry> {
        let missing = |what| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentIndex, &self.index_path, 0),
                CorruptionReason::Invalid(what),
            )
        };
        let Some(meta) = self.tables.get(&loc.file()) else {
            return Err(missing("the index names a table the version does not hold"));
        };
        let table = self.db.tables.get(0, meta)?;
        let found = table.get_in_block(loc.offset(), u64::from(loc.size()), key, SeqNo::MAX)?;
        let Some((kind, seq, value)) = found else {
            return Err(missing("the block the index names does not hold the key"));
        };
        Ok(Entry {
            ikey: make_internal_key(key, seq, kind),
            value,
            table: loc.file(),
            block: loc.offset(),
        })
    }

    /// Every version of `key` in the tables that may hold it, newest first (a merge
    /// operand's base and older operands).
    fn load_every_version(&mut self, key: &[u8]) -> Result<()> {
        for f in self.version.files_for_key(0, key) {
            let table = self.db.tables.get(0, f)?;
            if !table.may_contain(key) {
                continue;
            }
            let mut it = table.iter();
            it.seek(&seek_key(key, SeqNo::MAX))?;
            while it.valid() && user_key(it.key()) == key {
                self.entries.push(Entry {
                    ikey: it.key().to_vec(),
                    value: it.value().to_vec(),
                    table: f.number.0,
                    block: it.site().map_or(0, |s| s.offset),
                });
                it.next()?;
            }
        }
        self.entries
            .sort_by(|a, b| compare_internal(&a.ikey, &b.ikey));
        if self.entries.is_empty() {
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::PersistentIndex, &self.index_path, 0),
                CorruptionReason::Invalid("no table holds a key the index maps"),
            ));
        }
        Ok(())
    }

    /// Counts the current entry for the trigger.
    fn record(&mut self) {
        if let Some(e) = self.entries.get(self.pos) {
            self.trigger.record(e.table);
        }
    }

    /// Positions at the first entry at or after `target` from the cursor's key on.
    fn forward_to(&mut self, target: Option<&[u8]>) -> Result<()> {
        self.load()?;
        if let Some(t) = target {
            self.pos = self
                .entries
                .partition_point(|e| compare_internal(&e.ikey, t) == Ordering::Less);
        }
        if self.pos >= self.entries.len() && self.cursor.valid() {
            self.cursor.next()?;
            self.load()?;
        }
        Ok(())
    }

    /// Positions at the last entry at or before `target` from the cursor's key back.
    fn backward_to(&mut self, target: Option<&[u8]>) -> Result<()> {
        self.load()?;
        let n = match target {
            Some(t) => self
                .entries
                .partition_point(|e| compare_internal(&e.ikey, t) != Ordering::Greater),
            None => self.entries.len(),
        };
        if n == 0 {
            if self.cursor.valid() {
                self.cursor.prev()?;
            }
            self.load()?;
            self.pos = self.entries.len().saturating_sub(1);
        } else {
            self.pos = n - 1;
        }
        Ok(())
    }
}

impl Drop for IndexScan {
    fn drop(&mut self) {
        self.trigger.finish(&self.db);
    }
}

impl InternalIterator for IndexScan {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) -> Result<()> {
        self.trigger.close_window();
        self.moving(|s| {
            s.cursor.seek_to_first()?;
            s.forward_to(None)
        })?;
        self.record();
        Ok(())
    }

    fn seek_to_last(&mut self) -> Result<()> {
        self.trigger.close_window();
        self.moving(|s| {
            s.cursor.seek_to_last()?;
            s.backward_to(None)
        })
    }

    fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.trigger.close_window();
        self.moving(|s| {
            s.cursor.seek(user_key(target))?;
            s.forward_to(Some(target))
        })?;
        self.record();
        Ok(())
    }

    fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.trigger.close_window();
        self.moving(|s| {
            s.cursor.seek_for_prev(user_key(target))?;
            s.backward_to(Some(target))
        })
    }

    fn next(&mut self) -> Result<()> {
        self.moving(|s| {
            if s.pos + 1 < s.entries.len() {
                s.pos += 1;
                return Ok(());
            }
            s.cursor.next()?;
            s.load()
        })?;
        self.record();
        Ok(())
    }

    fn prev(&mut self) -> Result<()> {
        self.moving(|s| {
            if s.pos > 0 {
                s.pos -= 1;
                return Ok(());
            }
            s.cursor.prev()?;
            s.load()?;
            s.pos = s.entries.len().saturating_sub(1);
            Ok(())
        })
    }

    fn key(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |e| &e.ikey)
    }

    fn value(&self) -> &[u8] {
        self.entries.get(self.pos).map_or(&[], |e| &e.value)
    }

    fn site(&self) -> Option<CorruptionSite> {
        let e = self.entries.get(self.pos)?;
        let path = layout::path(
            &self.db.opts.slow_dir,
            &layout::table_name(FileNum(e.table)),
        );
        Some(CorruptionSite::new(ArtifactKind::Sst, path, e.block))
    }
}
