//! [`Version`]: an immutable snapshot of which table files make up each level and which rows
//! make up the matrix container, and [`Builder`], the pure function from (version, edits) to
//! the next version.
//!
//! Level 0 holds tables on the fast tier; they may overlap and are kept newest first
//! (largest sequence number, then file number, descending). Levels 1.. hold tables on the slow
//! tier, sorted by smallest key, and *user-key disjoint*: no user key appears in two files of
//! one level (compaction never splits the versions of a user key across output files), so a
//! point lookup reads at most one file per level.
//!
//! A database created with the matrix layout keeps its L0 in the [`Container`] instead of
//! `files(0)`: RowTables ("rows") in a page pool, split into the *receiver* (where flushes go)
//! and the *compactor* (being drained into L1 one column at a time, see [`Drain`]). The two L0
//! layouts share this type; the engine uses one of them.
//!
//! Readers hold an `Arc<Version>` without any lock; a `Version` never changes after it is
//! built (`Send + Sync`). `VersionSet` (under the DB state mutex) builds and installs them.
#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashMap, HashSet};

use std::sync::Arc;

use crate::error::CorruptionReason;
#[cfg(test)]
use crate::error::render_key;
use crate::key::{SeqNo, compare_internal};
use crate::layout::FileNum;
#[cfg(test)]
use crate::matrix::meta::RowMeta;
use crate::range_del::{RangeDelIndex, RangeTombstone};

use super::NUM_LEVELS;
#[cfg(test)]
use super::edit::ColumnDone;
use super::edit::{BlobFileMeta, FileMeta, VersionEdit};

mod container;
pub use container::{Container, Drain};

/// A live blob file and how much of it is garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFile {
    /// What the file holds.
    pub meta: BlobFileMeta,
    /// Records no table references any more.
    pub garbage_records: u64,
    /// Their bytes.
    pub garbage_bytes: u64,
}

impl BlobFile {
    /// Share of the file's record bytes that are garbage (0 to 1).
    pub fn garbage_ratio(&self) -> f64 {
        if self.meta.record_bytes == 0 {
            return 1.0;
        }
        self.garbage_bytes as f64 / self.meta.record_bytes as f64
    }
}

/// The set of live table files, per level, the matrix container's rows, and the live blob
/// files. Immutable once built.
#[derive(Debug, Default)]
pub struct Version {
    levels: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    container: Container,
    blobs: Arc<BTreeMap<u64, BlobFile>>,
    /// Range tombstones moved here by flushes (docs/decisions/0015-range-deletes.md).
    range_dels: Arc<RangeDelIndex>,
    /// How many edits were applied since the empty version: lets `VersionSet::install` check
    /// that a prepared version was built from the version it replaces.
    generation: u64,
}

impl Version {
    /// The files of `level` (empty for a level ≥ `NUM_LEVELS`). L0 newest first; L1+ sorted by
    /// key.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Total bytes of the files of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.size).sum()
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files(level).len()
    }

    /// The number of edits applied since the empty version.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The range tombstones of the version.
    pub fn range_dels(&self) -> &Arc<RangeDelIndex> {
        &self.range_dels
    }

    /// The matrix container (empty for a database with the table layout of L0).
    pub fn container(&self) -> &Container {
        &self.container
    }

    #[cfg(test)]
    /// Every row of the container, newest first (receiver newest to oldest, then compactor
    /// newest to oldest).
    pub fn rows_newest_first(&self) -> impl Iterator<Item = &Arc<RowMeta>> + '_ {
        self.container.rows_newest_first()
    }

    /// True if `user_key` was already drained from the compactor into L1: reads must skip the
    /// compactor's rows for it (see [`Drain::consumed`]).
    pub fn consumed(&self, user_key: &[u8]) -> bool {
        self.container.consumed(user_key)
    }

    #[cfg(test)]
    /// Sum of the logical sizes of all rows (`RowMeta::bytes`, drained parts included).
    pub fn row_bytes(&self) -> u64 {
        self.container.receiver_bytes() + self.container.compactor_bytes()
    }

    #[cfg(test)]
    /// Physical pages held by all rows (times the page size: the container's occupancy).
    pub fn live_pages(&self) -> usize {
        self.container.live_pages()
    }

    /// Every physical page referenced by a row (freed pages excluded): the pages the pool
    /// must treat as allocated.
    pub fn all_row_pages(&self) -> Vec<u32> {
        self.container.all_row_pages()
    }

    /// The version that results from applying `edit` to this one. Pure: nothing is installed.
    ///
    /// Deletes are applied before adds (so one edit can move a file between levels). A delete
    /// must name a file present in that level; an added number must not be live already; L1+
    /// must stay user-key disjoint. The container fields follow the rules of
    /// [`Builder::apply`]. Violations are [`CorruptionReason::Invalid`].
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version, CorruptionReason> {
        let mut b = Builder::new(self);
        b.apply(edit)?;
        b.build()
    }

    /// Files of `level` whose user-key range intersects `[smallest_user, largest_user]`.
    ///
    /// For L0 the range grows transitively: a file that overlaps the range and extends past it
    /// widens the range, and the search restarts, so the result can be compacted without
    /// leaving an older overlapping L0 file behind (LevelDB `GetOverlappingInputs`). L0 results
    /// are newest first; L1+ results are in key order.
    pub fn overlapping(
        &self,
        level: usize,
        smallest_user: &[u8],
        largest_user: &[u8],
    ) -> Vec<Arc<FileMeta>> {
        let files = self.files(level);
        if level == 0 {
            let mut lo = smallest_user.to_vec();
            let mut hi = largest_user.to_vec();
            let mut out: Vec<Arc<FileMeta>> = Vec::new();
            let mut i = 0;
            // Loop invariant: `out` holds the files before `i` that overlap [lo, hi].
            while let Some(f) = files.get(i) {
                i += 1;
                if !f.overlaps_user_range(&lo, &hi) {
                    continue;
                }
                if f.smallest_user() < lo.as_slice() {
                    lo = f.smallest_user().to_vec();
                    out.clear();
                    i = 0;
                } else if f.largest_user() > hi.as_slice() {
                    hi = f.largest_user().to_vec();
                    out.clear();
                    i = 0;
                } else {
                    out.push(Arc::clone(f));
                }
            }
            out
        } else {
            let start = files.partition_point(|f| f.largest_user() < smallest_user);
            files
                .get(start..)
                .unwrap_or(&[])
                .iter()
                .take_while(|f| f.smallest_user() <= largest_user)
                .cloned()
                .collect()
        }
    }

    /// The files of `level` that may hold `user_key`: for L0 every file whose range covers the
    /// key, newest first; for L1+ at most one file (binary search).
    pub fn files_for_key<'a>(
        &'a self,
        level: usize,
        user_key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
        let files = self.files(level);
        let candidates = if level == 0 {
            files
        } else {
            let i = files.partition_point(|f| f.largest_user() < user_key);
            files.get(i..i.saturating_add(1)).unwrap_or(&[])
        };
        candidates
            .iter()
            .filter(move |f| f.contains_user_key(user_key))
    }

    #[cfg(test)]
    /// The level and metadata of file `number`, if it is in this version.
    pub fn find_file(&self, number: FileNum) -> Option<(usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .find_map(|(l, files)| files.iter().find(|f| f.number == number).map(|f| (l, f)))
    }

    /// The numbers of every file in this version: tables and blob files.
    pub fn all_file_numbers(&self) -> Vec<FileNum> {
        self.levels
            .iter()
            .flat_map(|files| files.iter().map(|f| f.number))
            .chain(self.blobs.keys().map(|&n| FileNum(n)))
            .collect()
    }

    /// The live blob files, by number.
    pub fn blob_files(&self) -> &BTreeMap<u64, BlobFile> {
        &self.blobs
    }

    /// Checks every structural invariant; returns a description of the first violation.
    ///
    /// 1. every file's metadata is valid (keys parse, smallest ≤ largest, seq range ordered);
    /// 2. a file number appears at most once in the version;
    /// 3. L0 is ordered by largest sequence number, then file number, both descending;
    /// 4. each of L1.. is sorted by key and user-key disjoint;
    /// 5. every row's metadata is valid; row numbers strictly increase from the oldest
    ///    compactor row to the newest receiver row;
    /// 6. receiver rows have no freed pages; the compactor is non-empty exactly when a drain
    ///    is recorded, and the drain cursor is consistent with its start;
    /// 7. no physical page is referenced twice (across rows or within one).
    pub fn check_invariants(&self) -> Result<(), String> {
        self.container.check()?;
        let mut seen = HashSet::new();
        for (level, files) in self.levels.iter().enumerate() {
            for f in files {
                f.validate()
                    .map_err(|r| format!("L{level} file {}: {r}", f.number))?;
                if !seen.insert(f.number) {
                    return Err(format!("file {} appears twice", f.number));
                }
            }
            for pair in files.windows(2) {
                let [a, b] = pair else { continue };
                if level == 0 {
                    if (b.largest_seq, b.number) >= (a.largest_seq, a.number) {
                        return Err(format!(
                            "L0 files {} and {} are not newest first",
                            a.number, b.number
                        ));
                    }
                } else if a.largest_user() >= b.smallest_user() {
                    return Err(format!(
                        "L{level} files {} and {} overlap or are out of order",
                        a.number, b.number
                    ));
                }
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// An ASCII picture, one line per level: `L1: 7:a-f 9:g-k` (number, then the user-key
    /// range; bytes other than printable ASCII, space, `-` and `\` are shown as `\xNN`), `-` for
    /// an empty level.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (level, files) in self.levels.iter().enumerate() {
            let _ = write!(s, "L{level}:");
            if files.is_empty() {
                s.push_str(" -");
            }
            for f in files {
                let _ = write!(
                    s,
                    " {}:{}-{}",
                    f.number.0,
                    render_key(f.smallest_user()),
                    render_key(f.largest_user())
                );
            }
            s.push('\n');
        }
        let c = &self.container;
        if !c.is_empty() || !c.cursor.is_empty() {
            let rows = |rows: &[Arc<RowMeta>]| -> String {
                rows.iter().map(|r| format!(" {}", r.row)).collect()
            };
            let _ = write!(
                s,
                "receiver:{}\ncompactor:{}\n",
                rows(&c.receiver),
                rows(&c.compactor)
            );
            if let Some(d) = &c.drain {
                let _ = writeln!(
                    s,
                    "drain: {}..{}{}",
                    render_key(&d.start),
                    render_key(&d.cursor),
                    if d.wrapped { " wrapped" } else { "" }
                );
            }
            let _ = writeln!(s, "cursor: {}", render_key(&c.cursor));
        }
        s
    }
}

#[cfg(test)]
/// Row `n` (previous row `n - 1`) with user keys `[lo, hi]` at sequence number `n`, on the
/// given physical pages; `bytes` is `1000·n`.
pub(crate) fn test_row(n: u64, lo: &str, hi: &str, pages: Vec<u32>) -> RowMeta {
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    RowMeta {
        row: n,
        prev_row: n - 1,
        pages: Arc::new(crate::matrix::meta::PageList::new(pages)),
        entries: 10,
        bytes: 1000 * n,
        smallest: make_internal_key(lo.as_bytes(), SeqNo(n), ValueKind::Value),
        largest: make_internal_key(hi.as_bytes(), SeqNo(n), ValueKind::Value),
        smallest_seq: SeqNo(n),
        largest_seq: SeqNo(n),
    }
}

/// Accumulates edits on top of a base version and builds the result once (recovery replays
/// a whole manifest through one builder instead of building a version per edit).
#[derive(Debug)]
pub struct Builder {
    files: HashMap<FileNum, (usize, Arc<FileMeta>)>,
    container: Container,
    blobs: Arc<BTreeMap<u64, BlobFile>>,
    /// The range tombstones by sequence number, when an edit changed them (else the base's
    /// index is kept).
    range_dels: Option<BTreeMap<u64, RangeTombstone>>,
    base_range_dels: Arc<RangeDelIndex>,
    generation: u64,
}

impl Builder {
    /// A builder starting from `base`.
    pub fn new(base: &Version) -> Builder {
        let mut files = HashMap::new();
        for (level, fs) in base.levels.iter().enumerate() {
            for f in fs {
                files.insert(f.number, (level, Arc::clone(f)));
            }
        }
        Builder {
            files,
            container: base.container.clone(),
            blobs: Arc::clone(&base.blobs),
            range_dels: None,
            base_range_dels: Arc::clone(&base.range_dels),
            generation: base.generation,
        }
    }

    /// Removes the edit's deleted range tombstones (each must be present), then adds its new
    /// ones (each sequence number must be new).
    fn apply_range_dels(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        if edit.deleted_range_dels.is_empty() && edit.new_range_dels.is_empty() {
            return Ok(());
        }
        let base = &self.base_range_dels;
        let map = self.range_dels.get_or_insert_with(|| {
            base.tombstones()
                .iter()
                .map(|t| (t.seq.0, t.clone()))
                .collect()
        });
        for seq in &edit.deleted_range_dels {
            if map.remove(&seq.0).is_none() {
                return Err(CorruptionReason::Invalid(
                    "edit removes a range tombstone that is not in the version",
                ));
            }
        }
        for t in &edit.new_range_dels {
            if t.start >= t.end || t.seq > SeqNo::MAX {
                return Err(CorruptionReason::Invalid("invalid range tombstone"));
            }
            if map.insert(t.seq.0, t.clone()).is_some() {
                return Err(CorruptionReason::Invalid(
                    "edit adds a range tombstone whose sequence number is already live",
                ));
            }
        }
        Ok(())
    }

    /// Applies `edit`: file deletes first, then file adds, then the container fields in this
    /// order: restored compactor (snapshot only), new rows (appended to the receiver), role
    /// switch, column (cursor advance and freed pages), compactor drop, global cursor.
    ///
    /// Rejected with [`CorruptionReason::Invalid`]: a delete of a file not in the named level,
    /// an added file number already live, invalid file or row metadata, a new row whose
    /// number is not above every row's or that has freed pages, a switch while the compactor
    /// is not empty or with an empty receiver, a column or drop without a compactor, a column
    /// that moves the drain cursor back or past the drain's start, freed pages of a row not in
    /// the compactor or outside the row, a restored compactor in a non-empty container or
    /// without its drain state. Pages referenced twice are not checked here (that costs a
    /// pass over every page): see [`Container::duplicate_page`].
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        for &(level, number) in &edit.deleted_files {
            match self.files.get(&number) {
                Some((l, _)) if *l == level => {
                    self.files.remove(&number);
                }
                _ => {
                    return Err(CorruptionReason::Invalid(
                        "edit deletes a file that is not in the named level",
                    ));
                }
            }
        }
        for (level, meta) in &edit.new_files {
            if *level >= NUM_LEVELS {
                return Err(CorruptionReason::Invalid("level number out of range"));
            }
            meta.validate()?;
            // Tables and blob files share one number space, as `apply_blobs` checks from the
            // other side: a snapshot edit lists tables before blob files, so a state that
            // accepted a table numbered like a live blob file could not be restated.
            if self.files.contains_key(&meta.number) || self.blobs.contains_key(&meta.number.0) {
                return Err(CorruptionReason::Invalid(
                    "edit adds a file number that is already live",
                ));
            }
            self.files
                .insert(meta.number, (*level, Arc::new(meta.clone())));
        }
        self.container.apply(edit)?;
        self.apply_blobs(edit)?;
        self.apply_range_dels(edit)?;
        self.generation += 1;
        Ok(())
    }

    /// Adds the edit's blob files, then its garbage; drops files that became all garbage.
    fn apply_blobs(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        if edit.new_blobs.is_empty() && edit.blob_garbage.is_empty() {
            return Ok(());
        }
        let blobs = Arc::make_mut(&mut self.blobs);
        for m in &edit.new_blobs {
            if blobs.contains_key(&m.number.0) || self.files.contains_key(&m.number) {
                return Err(CorruptionReason::Invalid(
                    "edit adds a blob file number that is already live",
                ));
            }
            if m.records == 0 {
                return Err(CorruptionReason::Invalid("blob file without records"));
            }
            blobs.insert(
                m.number.0,
                BlobFile {
                    meta: *m,
                    garbage_records: 0,
                    garbage_bytes: 0,
                },
            );
        }
        for g in &edit.blob_garbage {
            let Some(b) = blobs.get_mut(&g.number.0) else {
                return Err(CorruptionReason::Invalid(
                    "edit adds garbage to a blob file that is not live",
                ));
            };
            b.garbage_records = b.garbage_records.saturating_add(g.records);
            b.garbage_bytes = b.garbage_bytes.saturating_add(g.bytes);
            if b.garbage_records > b.meta.records || b.garbage_bytes > b.meta.record_bytes {
                return Err(CorruptionReason::Invalid(
                    "blob file garbage exceeds its records",
                ));
            }
            if b.garbage_records == b.meta.records {
                blobs.remove(&g.number.0);
            }
        }
        Ok(())
    }

    /// Builds the version: L0 newest first, L1+ sorted and checked user-key disjoint.
    pub fn build(self) -> Result<Version, CorruptionReason> {
        let mut levels: [Vec<Arc<FileMeta>>; NUM_LEVELS] = Default::default();
        for (level, f) in self.files.into_values() {
            let slot = levels
                .get_mut(level)
                .ok_or(CorruptionReason::Invalid("level number out of range"))?;
            slot.push(f);
        }
        let mut it = levels.iter_mut();
        if let Some(l0) = it.next() {
            l0.sort_by_key(|f| std::cmp::Reverse((f.largest_seq, f.number)));
        }
        for files in it {
            files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
            for pair in files.windows(2) {
                if let [a, b] = pair
                    && a.largest_user() >= b.smallest_user()
                {
                    return Err(CorruptionReason::Invalid(
                        "files of one level L1+ overlap in user keys",
                    ));
                }
            }
        }
        let range_dels = match self.range_dels {
            Some(map) => Arc::new(RangeDelIndex::new(map.into_values().collect())),
            None => self.base_range_dels,
        };
        Ok(Version {
            levels,
            container: self.container,
            blobs: self.blobs,
            range_dels,
            generation: self.generation,
        })
    }
}

#[cfg(test)]
mod tests;
