//! [`VersionEdit`]: one change to the set of live files and container rows, [`FileMeta`]: what
//! the manifest knows about one table, and [`ColumnDone`]: the record of one column
//! compaction. See docs/format/manifest.md for the byte layout.
//!
//! An edit is a list of tagged fields (`varint tag`, then the field's value). [`VersionEdit::encode`]
//! writes them in a fixed order; [`VersionEdit::decode`] reads untrusted bytes, accepts any
//! order, rejects unknown tags, out-of-range levels and malformed keys, and never panics. It
//! allocates at most the input's length, except for row page lists, whose runs expand to at
//! most [`MAX_EDIT_PAGES`] page numbers per edit.
//!
//! Called by `VersionSet` (building edits, the snapshot edit) and by `manifest` (framing and
//! replay). Plain data: `Send + Sync`, no interior mutability.
#![deny(clippy::indexing_slicing)]

use crate::coding::{Decoder, put_length_prefixed, put_varint64};
use crate::error::CorruptionReason;
use crate::key::{self, SeqNo, compare_internal, parse_internal_key};
use crate::layout::FileNum;
use crate::matrix::meta::RowMeta;
use crate::range_del::RangeTombstone;

use super::Drain;
use super::NUM_LEVELS;

mod decode;

/// Tag: database id (varint64). At most once per edit.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DB_ID: u64 = 1;
/// Tag: one fixed option (length-prefixed UTF-8 name, length-prefixed UTF-8 value).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_FIXED_OPTION: u64 = 2;
/// Tag: WAL segments numbered below this are obsolete (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_LOG_NUMBER: u64 = 3;
/// Tag: the next unused file number (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEXT_FILE_NUMBER: u64 = 4;
/// Tag: the last used sequence number (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_LAST_SEQUENCE: u64 = 5;
/// Tag: a level's compaction pointer (varint level, length-prefixed internal key).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_COMPACT_POINTER: u64 = 6;
/// Tag: a file removed from a level (varint level, varint file number).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DELETED_FILE: u64 = 7;
/// Tag: a file added to a level (varint level, then the [`FileMeta`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEW_FILE: u64 = 8;
/// Tag: a row appended to the container's receiver (the [`RowMeta`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEW_ROW: u64 = 9;
/// Tag: the receiver becomes the compactor (no value). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_SWITCH_ROLES: u64 = 10;
/// Tag: a column compaction's effect on the compactor (see [`ColumnDone`]). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_COLUMN: u64 = 11;
/// Tag: every compactor row is removed (no value). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DROP_COMPACTOR: u64 = 12;
/// Tag: the global column cursor (length-prefixed user key). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_GLOBAL_CURSOR: u64 = 13;
/// Tag: the next unused row number (varint64). At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEXT_ROW_NUMBER: u64 = 14;
/// Tag: a row restored straight into an empty compactor (snapshot edits; [`RowMeta`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_COMPACTOR_ROW: u64 = 15;
/// Tag: the drain state of restored compactor rows (snapshot edits; start, cursor, wrapped).
/// At most once.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DRAIN: u64 = 16;

/// Tag: a blob file added (the [`BlobFileMeta`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEW_BLOB: u64 = 17;
/// Tag: records of a blob file became garbage (the [`BlobGarbage`] fields).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_BLOB_GARBAGE: u64 = 18;
/// Tag: a file added to a level with the blob files it references (varint level, the
/// [`FileMeta`] fields, then the blob file numbers).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_NEW_FILE_BLOBS: u64 = 19;
/// Tag: a range tombstone added to the version (length-prefixed start, length-prefixed end,
/// varint64 sequence number).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_RANGE_DEL: u64 = 20;
/// Tag: a range tombstone removed from the version (varint64 sequence number).
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_DELETED_RANGE_DEL: u64 = 21;
/// A keyspace created, or dropped: id, name, flags (bit 0: TTL, bit 1: dropped); format v5.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_KEYSPACE: u64 = 22;
/// The generation of the persistent global index (SLM-DB design) that this edit's files
/// match (varint64); format v6.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_INDEX_GENERATION: u64 = 23;
/// The partition bounds of the LightKV design (varint n, n × length-prefixed key, strictly
/// ascending, none empty): they replace the previous ones; format v7.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_PARTITION_BOUNDS: u64 = 24;
/// The merge count of a table of the LightKV design (varint64 number, varint32 count);
/// format v7.
// FORMAT: never change; see docs/format/manifest.md
pub const TAG_TABLE_RUN: u64 = 25;

/// Most page numbers the row page lists of one edit may expand to when decoded (2^26: a
/// 256 GiB container of 4 KiB pages). Bounds what a hostile manifest record can make the
/// decoder allocate (4 bytes per page).
// FORMAT: see docs/format/manifest.md
pub const MAX_EDIT_PAGES: usize = 1 << 26;

/// What one column compaction did to the compactor: the drain cursor's new position and the
/// value pages it emptied.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct ColumnDone {
    /// The drain cursor after the column: the next column starts at this user key.
    pub cursor: Vec<u8>,
    /// The cursor passed the end of the key space and restarted at the empty key.
    pub wrapped: bool,
    /// Logical pages emptied by the column: `(row, first logical page, count)`; each row
    /// must be in the compactor and the range inside its page list. Freeing a page that is
    /// already freed is a no-op.
    pub freed: Vec<(u64, u32, u32)>,
}

/// What the manifest records about one blob file (docs/format/blob.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobFileMeta {
    /// The file's number (names `NNNNNN.blob` on the slow tier).
    pub number: FileNum,
    /// Number of records (at least one).
    pub records: u64,
    /// Bytes of all records.
    pub record_bytes: u64,
}

/// Records of one blob file that no table references any more (their pointers were dropped
/// or relocated by the compaction of the same edit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlobGarbage {
    /// The blob file.
    pub number: FileNum,
    /// Number of records that became garbage.
    pub records: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// What the manifest records about one table file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileMeta {
    /// The file's number (names `NNNNNN.sst` on the tier of its level).
    pub number: FileNum,
    /// File size in bytes.
    pub size: u64,
    /// Smallest internal key in the file.
    pub smallest: Vec<u8>,
    /// Largest internal key in the file.
    pub largest: Vec<u8>,
    /// Smallest sequence number of any entry in the file.
    pub smallest_seq: SeqNo,
    /// Largest sequence number of any entry in the file.
    pub largest_seq: SeqNo,
    /// Number of entries (values and tombstones).
    pub entries: u64,
    /// The blob files the table's pointers reference, ascending and distinct; `None` when not
    /// recorded (L0 tables, which never hold pointers, and tables of manifests written before
    /// tag 19). Blob GC picks the tables to rewrite by it (docs/decisions/0009-blob-gc.md).
    pub blob_refs: Option<Vec<FileNum>>,
}

impl FileMeta {
    /// The user key of [`FileMeta::smallest`].
    pub fn smallest_user(&self) -> &[u8] {
        key::user_key(&self.smallest)
    }

    /// The user key of [`FileMeta::largest`].
    pub fn largest_user(&self) -> &[u8] {
        key::user_key(&self.largest)
    }

    /// True if the file's user-key range `[smallest_user, largest_user]` contains `user_key`.
    pub fn contains_user_key(&self, user_key: &[u8]) -> bool {
        self.smallest_user() <= user_key && user_key <= self.largest_user()
    }

    /// True if the file's user-key range intersects `[smallest_user, largest_user]`.
    pub fn overlaps_user_range(&self, smallest_user: &[u8], largest_user: &[u8]) -> bool {
        !(self.largest_user() < smallest_user || self.smallest_user() > largest_user)
    }

    /// Checks the metadata's own consistency (keys parse, smallest ≤ largest, sequence range
    /// ordered and representable).
    pub fn validate(&self) -> Result<(), CorruptionReason> {
        parse_internal_key(&self.smallest)?;
        parse_internal_key(&self.largest)?;
        if compare_internal(&self.smallest, &self.largest).is_gt() {
            return Err(CorruptionReason::Invalid(
                "file's smallest key is above its largest",
            ));
        }
        if self.smallest_seq > self.largest_seq || self.largest_seq > SeqNo::MAX {
            return Err(CorruptionReason::Invalid(
                "file's sequence-number range is invalid",
            ));
        }
        Ok(())
    }

    /// True when the table may hold pointers into blob file `number` (unrecorded references
    /// count as "may").
    pub fn may_reference_blob(&self, number: FileNum) -> bool {
        self.blob_refs
            .as_ref()
            .is_none_or(|refs| refs.binary_search(&number).is_ok())
    }

    fn encode_to(&self, dst: &mut Vec<u8>) {
        put_varint64(dst, self.number.0);
        put_varint64(dst, self.size);
        put_length_prefixed(dst, &self.smallest);
        put_length_prefixed(dst, &self.largest);
        put_varint64(dst, self.smallest_seq.0);
        put_varint64(dst, self.largest_seq.0);
        put_varint64(dst, self.entries);
    }

    fn decode_from(d: &mut Decoder<'_>) -> Result<FileMeta, CorruptionReason> {
        let number = FileNum(d.varint64()?);
        let size = d.varint64()?;
        let smallest = d.length_prefixed()?.to_vec();
        let largest = d.length_prefixed()?.to_vec();
        let smallest_seq = SeqNo(d.varint64()?);
        let largest_seq = SeqNo(d.varint64()?);
        let entries = d.varint64()?;
        let meta = FileMeta {
            number,
            size,
            smallest,
            largest,
            smallest_seq,
            largest_seq,
            entries,
            blob_refs: None,
        };
        meta.validate()?;
        Ok(meta)
    }

    /// Appends the blob references of a tag-19 field: a count, then the numbers as deltas
    /// from the previous one (the first from 0).
    fn encode_refs_to(refs: &[FileNum], dst: &mut Vec<u8>) {
        put_varint64(dst, refs.len() as u64);
        let mut prev = 0;
        for n in refs {
            put_varint64(dst, n.0.wrapping_sub(prev));
            prev = n.0;
        }
    }

    /// Decodes the blob references of a tag-19 field: strictly ascending numbers, at most
    /// one per remaining input byte.
    fn decode_refs(d: &mut Decoder<'_>) -> Result<Vec<FileNum>, CorruptionReason> {
        let count = d.varint64()?;
        if count > d.remaining() as u64 {
            return Err(CorruptionReason::BadLength);
        }
        let mut refs = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
        let mut prev: Option<u64> = None;
        for _ in 0..count {
            let delta = d.varint64()?;
            let n = match prev {
                None => delta,
                Some(p) if delta > 0 => p
                    .checked_add(delta)
                    .ok_or(CorruptionReason::Invalid("blob reference out of range"))?,
                Some(_) => {
                    return Err(CorruptionReason::Invalid(
                        "blob references not strictly ascending",
                    ));
                }
            };
            prev = Some(n);
            refs.push(FileNum(n));
        }
        Ok(refs)
    }
}

/// Checks a row's own consistency: numbers in range (`row ≥ 1`, `prev_row < row`), keys parse,
/// smallest ≤ largest, sequence range ordered and representable.
pub(crate) fn check_row(r: &RowMeta) -> Result<(), CorruptionReason> {
    if r.row == 0 || r.prev_row >= r.row {
        return Err(CorruptionReason::Invalid("row number out of range"));
    }
    parse_internal_key(&r.smallest)?;
    parse_internal_key(&r.largest)?;
    if compare_internal(&r.smallest, &r.largest).is_gt() {
        return Err(CorruptionReason::Invalid(
            "row's smallest key is above its largest",
        ));
    }
    if r.smallest_seq > r.largest_seq || r.largest_seq > SeqNo::MAX {
        return Err(CorruptionReason::Invalid(
            "row's sequence-number range is invalid",
        ));
    }
    Ok(())
}

/// One change to the database's file set and counters, as logged in the manifest.
///
/// Every field is optional or a list; an empty edit is valid. The first record of a manifest
/// is a *snapshot* edit that states the whole state (see `VersionSet::snapshot_edit`).
#[derive(Default, Clone, Debug, PartialEq, Eq)]
pub struct VersionEdit {
    /// The database's random id (ties the tier directories together).
    pub db_id: Option<u64>,
    /// Parameters fixed when the database was created: `(name, value)`, names unique.
    pub fixed_options: Vec<(String, String)>,
    /// WAL segments numbered below this are obsolete (their data is in tables).
    pub log_number: Option<FileNum>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The last sequence number used by a write recorded in a table.
    pub last_sequence: Option<SeqNo>,
    /// New compaction pointers: `(level, internal key)`; the next compaction of that level
    /// starts after the key.
    pub compact_pointers: Vec<(usize, Vec<u8>)>,
    /// Files removed: `(level, number)`.
    pub deleted_files: Vec<(usize, FileNum)>,
    /// Files added: `(level, meta)`.
    pub new_files: Vec<(usize, FileMeta)>,
    /// Rows appended to the container's receiver, oldest first; every number must be above
    /// every row's in the container.
    pub new_rows: Vec<RowMeta>,
    /// The receiver becomes the compactor (after `new_rows` are appended); the compactor must
    /// be empty. The drain starts at the global cursor.
    pub switch_roles: bool,
    /// A column compaction: advances the drain cursor and frees compactor pages.
    pub column: Option<ColumnDone>,
    /// Every compactor row is removed (after `column`) and the global cursor becomes the
    /// drain cursor; the compactor must not be empty.
    pub drop_compactor: bool,
    /// Sets the global cursor (applied last, after `drop_compactor`).
    pub global_cursor: Option<Vec<u8>>,
    /// The next unused row number (filled in by `VersionSet::prepare` for edits that add
    /// rows, and by snapshot edits).
    pub next_row_number: Option<u64>,
    /// Snapshot edits only: rows restored straight into the compactor, oldest first (with
    /// their freed pages). The container must be empty; `drain` must come with them.
    pub compactor_rows: Vec<RowMeta>,
    /// Snapshot edits only: the drain state of `compactor_rows`.
    pub drain: Option<Drain>,
    /// Blob files added (before `blob_garbage` is applied).
    pub new_blobs: Vec<BlobFileMeta>,
    /// Garbage added to blob files; a file whose records are all garbage leaves the version.
    pub blob_garbage: Vec<BlobGarbage>,
    /// Range tombstones removed from the version, by sequence number (before
    /// `new_range_dels` are added).
    pub deleted_range_dels: Vec<SeqNo>,
    /// Range tombstones added to the version (a flush moves its memtable's here).
    pub new_range_dels: Vec<RangeTombstone>,
    /// Keyspaces created or dropped (a record replaces the one of the same id).
    pub keyspaces: Vec<crate::keyspace::registry::KeyspaceRecord>,
    /// The generation of the persistent global index (the SLM-DB design,
    /// docs/format/pbtree.md) that describes the files once this edit is applied: the index
    /// commits before the edit is appended, and recovery rolls a newer index generation back
    /// to this one.
    pub index_generation: Option<u64>,
    /// The LightKV design's partition bounds: the smallest user key of every partition but
    /// the first, ascending (replaces the previous bounds; `Some(empty)`: one partition).
    pub partition_bounds: Option<Vec<Vec<u8>>>,
    /// The LightKV design's merge counts of tables this edit adds (a table without one has
    /// count 0).
    pub table_runs: Vec<(FileNum, u32)>,
}

impl VersionEdit {
    /// Records that `meta` is added to `level`.
    pub fn add_file(&mut self, level: usize, meta: FileMeta) {
        self.new_files.push((level, meta));
    }

    /// Records that file `number` is removed from `level`.
    pub fn delete_file(&mut self, level: usize, number: FileNum) {
        self.deleted_files.push((level, number));
    }

    #[cfg(test)]
    /// True if the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == VersionEdit::default()
    }

    /// Serializes the edit (the payload of one manifest record).
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.encode_db_fields(&mut b);
        self.encode_level_changes(&mut b);
        self.encode_container_changes(&mut b);
        self.encode_blob_and_range_del_changes(&mut b);
        self.encode_layout_fields(&mut b);
        b
    }

    /// The database-wide fields: id, fixed options, log and file numbers, last sequence.
    fn encode_db_fields(&self, b: &mut Vec<u8>) {
        if let Some(id) = self.db_id {
            put_varint64(b, TAG_DB_ID);
            put_varint64(b, id);
        }
        for (name, value) in &self.fixed_options {
            put_varint64(b, TAG_FIXED_OPTION);
            put_length_prefixed(b, name.as_bytes());
            put_length_prefixed(b, value.as_bytes());
        }
        if let Some(n) = self.log_number {
            put_varint64(b, TAG_LOG_NUMBER);
            put_varint64(b, n.0);
        }
        if let Some(n) = self.next_file_number {
            put_varint64(b, TAG_NEXT_FILE_NUMBER);
            put_varint64(b, n);
        }
        if let Some(s) = self.last_sequence {
            put_varint64(b, TAG_LAST_SEQUENCE);
            put_varint64(b, s.0);
        }
    }

    /// The level changes: compaction pointers, deleted and new table files.
    fn encode_level_changes(&self, b: &mut Vec<u8>) {
        for (level, key) in &self.compact_pointers {
            put_varint64(b, TAG_COMPACT_POINTER);
            put_varint64(b, *level as u64);
            put_length_prefixed(b, key);
        }
        for (level, number) in &self.deleted_files {
            put_varint64(b, TAG_DELETED_FILE);
            put_varint64(b, *level as u64);
            put_varint64(b, number.0);
        }
        for (level, meta) in &self.new_files {
            let tag = if meta.blob_refs.is_some() {
                TAG_NEW_FILE_BLOBS
            } else {
                TAG_NEW_FILE
            };
            put_varint64(b, tag);
            put_varint64(b, *level as u64);
            meta.encode_to(b);
            if let Some(refs) = &meta.blob_refs {
                FileMeta::encode_refs_to(refs, b);
            }
        }
    }

    /// The matrix container and global index changes: rows, role switch, column, drop,
    /// global cursor, row number, compactor rows, drain.
    fn encode_container_changes(&self, b: &mut Vec<u8>) {
        for row in &self.new_rows {
            put_varint64(b, TAG_NEW_ROW);
            row.encode(b);
        }
        if self.switch_roles {
            put_varint64(b, TAG_SWITCH_ROLES);
        }
        if let Some(c) = &self.column {
            put_varint64(b, TAG_COLUMN);
            put_length_prefixed(b, &c.cursor);
            put_varint64(b, u64::from(c.wrapped));
            put_varint64(b, c.freed.len() as u64);
            for &(row, first, count) in &c.freed {
                put_varint64(b, row);
                put_varint64(b, u64::from(first));
                put_varint64(b, u64::from(count));
            }
        }
        if self.drop_compactor {
            put_varint64(b, TAG_DROP_COMPACTOR);
        }
        if let Some(k) = &self.global_cursor {
            put_varint64(b, TAG_GLOBAL_CURSOR);
            put_length_prefixed(b, k);
        }
        if let Some(n) = self.next_row_number {
            put_varint64(b, TAG_NEXT_ROW_NUMBER);
            put_varint64(b, n);
        }
        for row in &self.compactor_rows {
            put_varint64(b, TAG_COMPACTOR_ROW);
            row.encode(b);
        }
        if let Some(d) = &self.drain {
            put_varint64(b, TAG_DRAIN);
            put_length_prefixed(b, &d.start);
            put_length_prefixed(b, &d.cursor);
            put_varint64(b, u64::from(d.wrapped));
        }
    }

    /// The blob file and range tombstone changes.
    fn encode_blob_and_range_del_changes(&self, b: &mut Vec<u8>) {
        for m in &self.new_blobs {
            put_varint64(b, TAG_NEW_BLOB);
            put_varint64(b, m.number.0);
            put_varint64(b, m.records);
            put_varint64(b, m.record_bytes);
        }
        for g in &self.blob_garbage {
            put_varint64(b, TAG_BLOB_GARBAGE);
            put_varint64(b, g.number.0);
            put_varint64(b, g.records);
            put_varint64(b, g.bytes);
        }
        for seq in &self.deleted_range_dels {
            put_varint64(b, TAG_DELETED_RANGE_DEL);
            put_varint64(b, seq.0);
        }
        for t in &self.new_range_dels {
            put_varint64(b, TAG_RANGE_DEL);
            put_length_prefixed(b, &t.start);
            put_length_prefixed(b, &t.end);
            put_varint64(b, t.seq.0);
        }
    }

    /// Keyspaces, the index generation, partition bounds and table runs.
    fn encode_layout_fields(&self, b: &mut Vec<u8>) {
        for k in &self.keyspaces {
            put_varint64(b, TAG_KEYSPACE);
            put_varint64(b, u64::from(k.id));
            put_length_prefixed(b, k.name.as_bytes());
            put_varint64(b, u64::from(k.ttl) | u64::from(k.dropped) << 1);
        }
        if let Some(g) = self.index_generation {
            put_varint64(b, TAG_INDEX_GENERATION);
            put_varint64(b, g);
        }
        if let Some(bounds) = &self.partition_bounds {
            put_varint64(b, TAG_PARTITION_BOUNDS);
            put_varint64(b, bounds.len() as u64);
            for k in bounds {
                put_length_prefixed(b, k);
            }
        }
        for (number, run) in &self.table_runs {
            put_varint64(b, TAG_TABLE_RUN);
            put_varint64(b, number.0);
            put_varint64(b, u64::from(*run));
        }
    }
}

#[cfg(test)]
mod tests;
