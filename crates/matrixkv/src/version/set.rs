//! [`VersionSet`]: the current [`Version`] plus the database's counters (file numbers, row
//! numbers, sequence numbers, WAL and manifest numbers, compaction pointers), and [`Replay`], which
//! rebuilds a `VersionSet` from the edits of a manifest.
//!
//! Thread safety: the DB keeps the `VersionSet` inside its state mutex; every method is plain
//! in-memory work. Manifest I/O happens outside that mutex (serialized by the DB's manifest
//! mutex), which is why installing an edit has two steps:
//!
//! 1. under the state lock: [`VersionSet::prepare`] fills the counters into the edit and builds
//!    the next version without installing it;
//! 2. without it: append the edit to the manifest (`manifest::ManifestWriter::append`);
//! 3. under the state lock again: [`VersionSet::install`].
//!
//! The manifest mutex must be held from step 1 to step 3, so no other edit is installed in
//! between (checked by [`VersionSet::install`]).
#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Weak};

use crate::error::CorruptionReason;
use crate::key::SeqNo;
use crate::keyspace::registry::KeyspaceRecord;
use crate::layout::FileNum;

use super::NUM_LEVELS;
use super::edit::VersionEdit;
use super::version::{Builder, Version};

/// The current version and the counters the manifest persists.
#[derive(Debug)]
pub struct VersionSet {
    current: Arc<Version>,
    next_file_number: u64,
    /// Row numbers start at 1 (0 means "no row" in `RowMeta::prev_row`).
    next_row_number: u64,
    last_sequence: SeqNo,
    log_number: FileNum,
    manifest_number: FileNum,
    compact_pointers: [Vec<u8>; NUM_LEVELS],
    db_id: u64,
    fixed_options: Vec<(String, String)>,
    /// Every keyspace created (dropped ones included), by id.
    keyspaces: BTreeMap<u32, KeyspaceRecord>,
    /// The global index generation the last edit recorded (0: none, or no index).
    index_generation: u64,
    /// The LightKV design's partitions and table merge counts.
    partitions: Partitions,
    /// Versions replaced by `install` that may still be referenced by readers.
    live: Vec<Weak<Version>>,
}

impl VersionSet {
    /// The state of a brand-new, empty database: no files, file numbers start at 1, no
    /// manifest yet (number 0 until [`VersionSet::set_manifest_number`]).
    pub fn new(db_id: u64, fixed_options: Vec<(String, String)>) -> VersionSet {
        VersionSet {
            current: Arc::new(Version::default()),
            next_file_number: 1,
            next_row_number: 1,
            last_sequence: SeqNo::ZERO,
            log_number: FileNum(0),
            manifest_number: FileNum(0),
            compact_pointers: Default::default(),
            db_id,
            fixed_options,
            keyspaces: BTreeMap::new(),
            index_generation: 0,
            partitions: Partitions::default(),
            live: Vec::new(),
        }
    }

    /// The global index generation the manifest records (SLM-DB design; 0 without one).
    pub fn index_generation(&self) -> u64 {
        self.index_generation
    }

    /// The LightKV design's partition bounds and table merge counts.
    pub fn partitions(&self) -> &Partitions {
        &self.partitions
    }

    /// Every keyspace created (dropped ones included), by id.
    pub fn keyspaces(&self) -> Vec<KeyspaceRecord> {
        self.keyspaces.values().cloned().collect()
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        Arc::clone(&self.current)
    }

    /// Allocates a new file number (tables, WAL segments, manifests share one counter).
    pub fn new_file_number(&mut self) -> FileNum {
        let n = self.next_file_number;
        self.next_file_number += 1;
        FileNum(n)
    }

    /// Makes sure `number` will not be allocated again (recovery calls this for every WAL
    /// segment found on disk, since segments may be newer than the last manifest edit).
    pub fn mark_file_number_used(&mut self, number: FileNum) {
        self.next_file_number = self.next_file_number.max(number.0.saturating_add(1));
    }

    /// The next file number [`VersionSet::new_file_number`] will return.
    pub fn next_file_number(&self) -> u64 {
        self.next_file_number
    }

    /// Allocates a new row number for a RowTable about to be flushed (row numbers are never
    /// reused: an edit may only add rows numbered below [`VersionSet::next_row_number`]).
    pub fn new_row_number(&mut self) -> u64 {
        let n = self.next_row_number;
        self.next_row_number += 1;
        n
    }

    #[cfg(test)]
    /// The next row number [`VersionSet::new_row_number`] will return.
    pub fn next_row_number(&self) -> u64 {
        self.next_row_number
    }

    /// The last sequence number used.
    pub fn last_sequence(&self) -> SeqNo {
        self.last_sequence
    }

    /// Records the last sequence number used. Sequence numbers never go back: a smaller value
    /// is ignored.
    pub fn set_last_sequence(&mut self, seq: SeqNo) {
        debug_assert!(seq >= self.last_sequence, "sequence number went back");
        self.last_sequence = self.last_sequence.max(seq);
    }

    /// WAL segments numbered below this are obsolete.
    pub fn log_number(&self) -> FileNum {
        self.log_number
    }

    /// The number of the manifest edits are appended to (0 before the first one exists).
    pub fn manifest_number(&self) -> FileNum {
        self.manifest_number
    }

    /// Records that a new manifest `number` is now the one named by CURRENT.
    pub fn set_manifest_number(&mut self, number: FileNum) {
        self.mark_file_number_used(number);
        self.manifest_number = number;
    }

    /// Compaction pointers per level (internal keys; empty = start at the beginning).
    pub fn compact_pointers(&self) -> &[Vec<u8>] {
        &self.compact_pointers
    }

    /// The database id.
    pub fn db_id(&self) -> u64 {
        self.db_id
    }

    /// Parameters fixed when the database was created, `(name, value)`.
    pub fn fixed_options(&self) -> &[(String, String)] {
        &self.fixed_options
    }

    /// Fills the counters into `edit` and returns the version it produces, without
    /// installing anything (step 1 of the protocol in the module docs).
    ///
    /// The next row number is filled in only when the edit adds rows.
    ///
    /// Fails with [`CorruptionReason::Invalid`] if the edit does not apply to the current
    /// version, moves the WAL log number backwards, or adds a row whose number was not
    /// allocated by [`VersionSet::new_row_number`]; all are bugs in the caller.
    pub fn prepare(&self, edit: &mut VersionEdit) -> Result<Version, CorruptionReason> {
        if edit.log_number.is_some_and(|n| n < self.log_number) {
            return Err(CorruptionReason::Invalid("edit moves the log number back"));
        }
        if edit.new_rows.iter().any(|r| r.row >= self.next_row_number) {
            return Err(CorruptionReason::Invalid(
                "edit adds a row number that was never allocated",
            ));
        }
        if !edit.new_rows.is_empty() {
            edit.next_row_number = Some(self.next_row_number);
        }
        edit.next_file_number = Some(self.next_file_number);
        edit.last_sequence = Some(self.last_sequence);
        self.current.apply(edit)
    }

    /// Installs `v` (built by [`VersionSet::prepare`] from `edit`) as the current version,
    /// after the edit is durable in the manifest. The replaced version is tracked while
    /// readers still hold it (see [`VersionSet::live_files`]).
    ///
    /// # Preconditions
    /// No other version was installed since `prepare` (the DB holds its manifest mutex over
    /// both). Checked in debug builds; logged otherwise.
    pub fn install(&mut self, edit: &VersionEdit, v: Version) {
        if v.generation() != self.current.generation() + 1 {
            log::error!(
                "version generation {} installed over {}: an edit was installed between \
                 prepare and install",
                v.generation(),
                self.current.generation()
            );
            debug_assert!(false, "version installed out of order");
        }
        self.live.retain(|w| w.strong_count() > 0);
        debug_assert!(
            v.check_invariants().is_ok(),
            "installed version breaks an invariant: {:?}",
            v.check_invariants()
        );
        for k in &edit.keyspaces {
            self.keyspaces.insert(k.id, k.clone());
        }
        let old = std::mem::replace(&mut self.current, Arc::new(v));
        self.live.push(Arc::downgrade(&old));
        drop(old);
        if let Some(n) = edit.log_number {
            self.log_number = self.log_number.max(n);
        }
        if let Some(n) = edit.next_file_number {
            self.next_file_number = self.next_file_number.max(n);
        }
        if let Some(n) = edit.next_row_number {
            self.next_row_number = self.next_row_number.max(n);
        }
        if let Some(s) = edit.last_sequence {
            self.last_sequence = self.last_sequence.max(s);
        }
        if let Some(g) = edit.index_generation {
            self.index_generation = g;
        }
        self.partitions.apply(edit);
        for (level, key) in &edit.compact_pointers {
            if let Some(slot) = self.compact_pointers.get_mut(*level) {
                slot.clone_from(key);
            }
        }
    }

    /// Every table file that the current version or any older version still held by a
    /// reader references. Obsolete-file deletion removes only tables outside this set.
    pub fn live_files(&self) -> HashSet<FileNum> {
        let mut set: HashSet<FileNum> = self.current.all_file_numbers().into_iter().collect();
        for v in self.live.iter().filter_map(Weak::upgrade) {
            set.extend(v.all_file_numbers());
        }
        set
    }

    /// The older versions still held by readers (not the current one).
    pub fn older_live_versions(&self) -> Vec<Arc<Version>> {
        self.live
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|v| !Arc::ptr_eq(v, &self.current))
            .collect()
    }

    #[cfg(test)]
    /// Number of versions alive (the current one plus older ones still referenced).
    pub fn live_versions(&self) -> usize {
        1 + self.live.iter().filter(|w| w.strong_count() > 0).count()
    }

    /// An edit stating the whole state; it is the first record of every new manifest.
    ///
    /// The container is restored exactly: compactor rows (with their freed pages) and drain
    /// state through the snapshot-only fields, receiver rows as new rows, the global cursor
    /// when it is not the empty key.
    pub fn snapshot_edit(&self) -> VersionEdit {
        let c = self.current.container();
        let mut e = VersionEdit {
            db_id: Some(self.db_id),
            fixed_options: self.fixed_options.clone(),
            log_number: Some(self.log_number),
            next_file_number: Some(self.next_file_number),
            last_sequence: Some(self.last_sequence),
            next_row_number: Some(self.next_row_number),
            new_rows: c.receiver.iter().map(|r| r.as_ref().clone()).collect(),
            compactor_rows: c.compactor.iter().map(|r| r.as_ref().clone()).collect(),
            drain: c.drain.clone(),
            global_cursor: (!c.cursor.is_empty()).then(|| c.cursor.clone()),
            index_generation: (self.index_generation != 0).then_some(self.index_generation),
            partition_bounds: (!self.partitions.bounds.is_empty())
                .then(|| self.partitions.bounds.clone()),
            table_runs: self
                .partitions
                .runs
                .iter()
                .map(|(n, r)| (FileNum(*n), *r))
                .collect(),
            ..VersionEdit::default()
        };
        for (level, key) in self.compact_pointers.iter().enumerate() {
            if !key.is_empty() {
                e.compact_pointers.push((level, key.clone()));
            }
        }
        for level in 0..NUM_LEVELS {
            for f in self.current.files(level) {
                e.new_files.push((level, f.as_ref().clone()));
            }
        }
        e.new_range_dels = self.current.range_dels().tombstones().to_vec();
        e.keyspaces = self.keyspaces.values().cloned().collect();
        for b in self.current.blob_files().values() {
            e.new_blobs.push(b.meta);
            if b.garbage_records > 0 {
                e.blob_garbage.push(crate::version::edit::BlobGarbage {
                    number: b.meta.number,
                    records: b.garbage_records,
                    bytes: b.garbage_bytes,
                });
            }
        }
        e
    }
}

/// The LightKV design's partitions (docs/decisions/0027-lightkv-mode.md): key-range bounds
/// and the merge count of every table that has one (tables without one count 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partitions {
    /// The smallest user key of every partition but the first, ascending.
    pub bounds: Vec<Vec<u8>>,
    /// Table number → merge count (above 0 only).
    pub runs: BTreeMap<u64, u32>,
}

impl Partitions {
    /// Applies the partition fields of `edit`: deleted tables lose their counts, new bounds
    /// replace the old ones, new counts are recorded.
    fn apply(&mut self, edit: &VersionEdit) {
        for (_, n) in &edit.deleted_files {
            self.runs.remove(&n.0);
        }
        if let Some(b) = &edit.partition_bounds {
            self.bounds.clone_from(b);
        }
        for (n, r) in &edit.table_runs {
            if *r > 0 {
                self.runs.insert(n.0, *r);
            }
        }
    }

    /// The merge count of table `number`.
    pub fn run(&self, number: FileNum) -> u32 {
        self.runs.get(&number.0).copied().unwrap_or(0)
    }
}

/// Rebuilds a [`VersionSet`] from manifest edits, in order (pure; `manifest::recover` does
/// the reading and attaches file and offset to errors).
#[derive(Debug)]
pub struct Replay {
    builder: Builder,
    db_id: Option<u64>,
    fixed_options: Vec<(String, String)>,
    log_number: Option<FileNum>,
    next_file_number: Option<u64>,
    next_row_number: Option<u64>,
    last_sequence: Option<SeqNo>,
    compact_pointers: [Vec<u8>; NUM_LEVELS],
    keyspaces: BTreeMap<u32, KeyspaceRecord>,
    index_generation: Option<u64>,
    partitions: Partitions,
}

impl Default for Replay {
    fn default() -> Self {
        Replay::new()
    }
}

impl Replay {
    /// An empty replay (before the first edit).
    pub fn new() -> Replay {
        Replay {
            builder: Builder::new(&Version::default()),
            db_id: None,
            fixed_options: Vec::new(),
            log_number: None,
            next_file_number: None,
            next_row_number: None,
            last_sequence: None,
            compact_pointers: Default::default(),
            keyspaces: BTreeMap::new(),
            index_generation: None,
            partitions: Partitions::default(),
        }
    }

    /// Applies the next edit of the manifest.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        if let Some(id) = edit.db_id {
            if self.db_id.is_some_and(|old| old != id) {
                return Err(CorruptionReason::Invalid("edit changes the database id"));
            }
            self.db_id = Some(id);
        }
        for (name, value) in &edit.fixed_options {
            match self.fixed_options.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1.clone_from(value),
                None => self.fixed_options.push((name.clone(), value.clone())),
            }
        }
        self.log_number = edit.log_number.or(self.log_number);
        self.next_file_number = edit.next_file_number.or(self.next_file_number);
        self.next_row_number = edit.next_row_number.or(self.next_row_number);
        self.last_sequence = edit.last_sequence.or(self.last_sequence);
        self.index_generation = edit.index_generation.or(self.index_generation);
        self.partitions.apply(edit);
        for (level, key) in &edit.compact_pointers {
            if let Some(slot) = self.compact_pointers.get_mut(*level) {
                slot.clone_from(key);
            }
        }
        for k in &edit.keyspaces {
            if self
                .keyspaces
                .values()
                .any(|o| o.id != k.id && !o.dropped && !k.dropped && o.name == k.name)
            {
                return Err(CorruptionReason::Invalid("two live keyspaces share a name"));
            }
            self.keyspaces.insert(k.id, k.clone());
        }
        self.builder.apply(edit)
    }

    /// The recovered state; `manifest_number` is the manifest the edits came from.
    ///
    /// Fails if a required field (database id, log number, next file number, last sequence)
    /// never appeared, the file set is invalid, or a container page is referenced twice. If
    /// the recorded next file number is not above every file and the manifest, it is raised
    /// (with a warning) so no number is reused; likewise the next row number (which may be
    /// absent: it defaults to 1).
    pub fn finish(self, manifest_number: FileNum) -> Result<VersionSet, CorruptionReason> {
        let db_id = self.db_id.ok_or(CorruptionReason::Invalid(
            "manifest never records the database id",
        ))?;
        let log_number = self.log_number.ok_or(CorruptionReason::Invalid(
            "manifest never records the log number",
        ))?;
        let recorded_next = self.next_file_number.ok_or(CorruptionReason::Invalid(
            "manifest never records the next file number",
        ))?;
        let last_sequence = self.last_sequence.ok_or(CorruptionReason::Invalid(
            "manifest never records the last sequence number",
        ))?;
        let version = self.builder.build()?;
        if version.container().duplicate_page().is_some() {
            return Err(CorruptionReason::Invalid(
                "a container page is referenced twice",
            ));
        }
        let recorded_next_row = self.next_row_number.unwrap_or(1);
        let mut next_row_number = recorded_next_row.max(1);
        if let Some(max_row) = version.container().max_row()
            && max_row >= next_row_number
        {
            log::warn!(
                "manifest records next row number {recorded_next_row} but row {max_row} is \
                 live; continuing from {}",
                max_row.saturating_add(1)
            );
            next_row_number = max_row.saturating_add(1);
        }
        let highest_used = version
            .all_file_numbers()
            .into_iter()
            .chain([manifest_number, log_number])
            .map(|n| n.0)
            .max()
            .unwrap_or(0);
        let mut next_file_number = recorded_next;
        if highest_used >= next_file_number {
            log::warn!(
                "manifest records next file number {recorded_next} but number {highest_used} \
                 is in use; continuing from {}",
                highest_used.saturating_add(1)
            );
            next_file_number = highest_used.saturating_add(1);
        }
        Ok(VersionSet {
            current: Arc::new(version),
            next_file_number,
            next_row_number,
            last_sequence,
            log_number,
            manifest_number,
            compact_pointers: self.compact_pointers,
            db_id,
            fixed_options: self.fixed_options,
            keyspaces: self.keyspaces,
            index_generation: self.index_generation.unwrap_or(0),
            partitions: self.partitions,
            live: Vec::new(),
        })
    }
}

#[cfg(test)]
mod tests;
