//! Decoding of a [`VersionEdit`] from the untrusted bytes of a manifest record: the tag loop
//! and one parser per field payload, each checking what the format requires of it.

use std::collections::HashSet;

use crate::coding::Decoder;
use crate::error::CorruptionReason;
use crate::key::{SeqNo, parse_internal_key};
use crate::layout::FileNum;
use crate::matrix::meta::RowMeta;
use crate::range_del::RangeTombstone;
use crate::version::Drain;

use super::NUM_LEVELS;
use super::{
    BlobFileMeta, BlobGarbage, ColumnDone, FileMeta, MAX_EDIT_PAGES, TAG_BLOB_GARBAGE, TAG_COLUMN,
    TAG_COMPACT_POINTER, TAG_COMPACTOR_ROW, TAG_DB_ID, TAG_DELETED_FILE, TAG_DELETED_RANGE_DEL,
    TAG_DRAIN, TAG_DROP_COMPACTOR, TAG_FIXED_OPTION, TAG_GLOBAL_CURSOR, TAG_INDEX_GENERATION,
    TAG_KEYSPACE, TAG_LAST_SEQUENCE, TAG_LOG_NUMBER, TAG_NEW_BLOB, TAG_NEW_FILE,
    TAG_NEW_FILE_BLOBS, TAG_NEW_ROW, TAG_NEXT_FILE_NUMBER, TAG_NEXT_ROW_NUMBER,
    TAG_PARTITION_BOUNDS, TAG_RANGE_DEL, TAG_SWITCH_ROLES, TAG_TABLE_RUN, VersionEdit, check_row,
};

/// Tag 24's payload: a count, then that many keys, strictly ascending and none empty.
fn decode_bounds(d: &mut Decoder<'_>) -> Result<Vec<Vec<u8>>, CorruptionReason> {
    let n = d.varint64()?;
    let mut out: Vec<Vec<u8>> = Vec::new();
    for _ in 0..n {
        let k = d.length_prefixed()?.to_vec();
        if k.is_empty() || out.last().is_some_and(|p| *p >= k) {
            return Err(CorruptionReason::Invalid(
                "partition bounds not strictly ascending or empty",
            ));
        }
        out.push(k);
    }
    Ok(out)
}

fn decode_level(d: &mut Decoder<'_>) -> Result<usize, CorruptionReason> {
    let level = d.varint64()?;
    match usize::try_from(level) {
        Ok(l) if l < NUM_LEVELS => Ok(l),
        _ => Err(CorruptionReason::Invalid("level number out of range")),
    }
}

fn decode_utf8(bytes: &[u8]) -> Result<String, CorruptionReason> {
    String::from_utf8(bytes.to_vec())
        .map_err(|_| CorruptionReason::Invalid("fixed option is not UTF-8"))
}

fn decode_bool(d: &mut Decoder<'_>) -> Result<bool, CorruptionReason> {
    match d.varint64()? {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(CorruptionReason::Invalid("flag is neither 0 nor 1")),
    }
}

fn decode_keyspace(
    d: &mut Decoder<'_>,
) -> Result<crate::keyspace::registry::KeyspaceRecord, CorruptionReason> {
    let id = d.varint32()?;
    let name = String::from_utf8(d.length_prefixed()?.to_vec())
        .map_err(|_| CorruptionReason::Invalid("keyspace name is not UTF-8"))?;
    let flags = d.varint64()?;
    if id == 0 {
        return Err(CorruptionReason::Invalid(
            "keyspace id 0 is the default keyspace's",
        ));
    }
    if name.is_empty() || name.len() > crate::keyspace::MAX_KEYSPACE_NAME_BYTES {
        return Err(CorruptionReason::Invalid(
            "keyspace name length out of range",
        ));
    }
    if flags > 3 {
        return Err(CorruptionReason::Invalid("unknown keyspace flags"));
    }
    Ok(crate::keyspace::registry::KeyspaceRecord {
        id,
        name,
        ttl: flags & 1 != 0,
        dropped: flags & 2 != 0,
    })
}

fn flag_once(slot: &mut bool) -> Result<(), CorruptionReason> {
    if *slot {
        return Err(CorruptionReason::Invalid("field repeated in one edit"));
    }
    *slot = true;
    Ok(())
}

/// Decodes one row, charging its pages to `pages_left` (the edit's page budget).
fn decode_row(d: &mut Decoder<'_>, pages_left: &mut usize) -> Result<RowMeta, CorruptionReason> {
    let row = RowMeta::decode(d, *pages_left)?;
    *pages_left = pages_left.saturating_sub(row.pages.len());
    check_row(&row)?;
    Ok(row)
}

fn decode_column(d: &mut Decoder<'_>) -> Result<ColumnDone, CorruptionReason> {
    let cursor = d.length_prefixed()?.to_vec();
    let wrapped = decode_bool(d)?;
    let n = d.varint64()?;
    // Each entry takes at least 3 bytes: no allocation up front, the loop fails on
    // truncation.
    let mut freed = Vec::new();
    for _ in 0..n {
        let row = d.varint64()?;
        let first = d.varint32()?;
        let count = d.varint32()?;
        freed.push((row, first, count));
    }
    Ok(ColumnDone {
        cursor,
        wrapped,
        freed,
    })
}

fn once<T>(slot: &mut Option<T>, v: T) -> Result<(), CorruptionReason> {
    if slot.is_some() {
        return Err(CorruptionReason::Invalid("field repeated in one edit"));
    }
    *slot = Some(v);
    Ok(())
}

/// Tag 5's payload: the last sequence number, at most [`SeqNo::MAX`].
fn decode_last_sequence(d: &mut Decoder<'_>) -> Result<SeqNo, CorruptionReason> {
    let s = SeqNo(d.varint64()?);
    if s > SeqNo::MAX {
        return Err(CorruptionReason::Invalid(
            "last sequence number out of range",
        ));
    }
    Ok(s)
}

/// Tag 16's payload: the drain's start, cursor and wrapped flag.
fn decode_drain(d: &mut Decoder<'_>) -> Result<Drain, CorruptionReason> {
    let start = d.length_prefixed()?.to_vec();
    let cursor = d.length_prefixed()?.to_vec();
    let wrapped = decode_bool(d)?;
    Ok(Drain {
        start,
        cursor,
        wrapped,
    })
}

/// Tag 17's payload: a new blob file, with at least one record of at least one byte.
fn decode_new_blob(d: &mut Decoder<'_>) -> Result<BlobFileMeta, CorruptionReason> {
    let m = BlobFileMeta {
        number: FileNum(d.varint64()?),
        records: d.varint64()?,
        record_bytes: d.varint64()?,
    };
    if m.records == 0 || m.record_bytes < m.records {
        return Err(CorruptionReason::Invalid("blob file without records"));
    }
    Ok(m)
}

/// Tag 20's payload: a range tombstone over a non-empty range, its sequence number at most
/// [`SeqNo::MAX`].
fn decode_range_del(d: &mut Decoder<'_>) -> Result<RangeTombstone, CorruptionReason> {
    let start = d.length_prefixed()?.to_vec();
    let end = d.length_prefixed()?.to_vec();
    let seq = SeqNo(d.varint64()?);
    if start >= end {
        return Err(CorruptionReason::Invalid(
            "range tombstone with an empty range",
        ));
    }
    if seq > SeqNo::MAX {
        return Err(CorruptionReason::Invalid(
            "range tombstone sequence number out of range",
        ));
    }
    Ok(RangeTombstone { start, end, seq })
}

/// Tag 25's payload: a table's number and its merge count, below 2^32.
fn decode_table_run(d: &mut Decoder<'_>) -> Result<(FileNum, u32), CorruptionReason> {
    let number = FileNum(d.varint64()?);
    let run = u32::try_from(d.varint64()?)
        .map_err(|_| CorruptionReason::Invalid("a table run above 2^32"))?;
    Ok((number, run))
}

impl VersionEdit {
    /// Parses an edit from untrusted bytes.
    ///
    /// Rejects: unknown tags ([`CorruptionReason::UnknownType`], the tag saturated to a byte),
    /// truncated fields, lengths beyond the input, levels ≥ `NUM_LEVELS`, invalid file or row
    /// metadata, row page lists beyond [`MAX_EDIT_PAGES`] in total, flags other than 0 or 1,
    /// non-UTF-8 or duplicate option names, and single-valued fields given twice.
    pub fn decode(bytes: &[u8]) -> Result<VersionEdit, CorruptionReason> {
        Self::decode_with_max_pages(bytes, MAX_EDIT_PAGES)
    }

    /// [`VersionEdit::decode`] with a different bound on the pages all row page lists of the
    /// edit may expand to (e.g. the container's page count).
    pub fn decode_with_max_pages(
        bytes: &[u8],
        max_pages: usize,
    ) -> Result<VersionEdit, CorruptionReason> {
        let mut d = Decoder::new(bytes);
        let mut e = VersionEdit::default();
        let mut option_names = HashSet::new();
        let mut pages_left = max_pages;
        while !d.is_empty() {
            let tag = d.varint64()?;
            match tag {
                TAG_DB_ID => once(&mut e.db_id, d.varint64()?)?,
                TAG_FIXED_OPTION => {
                    let name = decode_utf8(d.length_prefixed()?)?;
                    let value = decode_utf8(d.length_prefixed()?)?;
                    if !option_names.insert(name.clone()) {
                        return Err(CorruptionReason::Invalid("fixed option named twice"));
                    }
                    e.fixed_options.push((name, value));
                }
                TAG_LOG_NUMBER => once(&mut e.log_number, FileNum(d.varint64()?))?,
                TAG_NEXT_FILE_NUMBER => once(&mut e.next_file_number, d.varint64()?)?,
                TAG_LAST_SEQUENCE => once(&mut e.last_sequence, decode_last_sequence(&mut d)?)?,
                TAG_COMPACT_POINTER => {
                    let level = decode_level(&mut d)?;
                    let key = d.length_prefixed()?;
                    parse_internal_key(key)?;
                    e.compact_pointers.push((level, key.to_vec()));
                }
                TAG_DELETED_FILE => {
                    let level = decode_level(&mut d)?;
                    e.deleted_files.push((level, FileNum(d.varint64()?)));
                }
                TAG_NEW_FILE => {
                    let level = decode_level(&mut d)?;
                    e.new_files.push((level, FileMeta::decode_from(&mut d)?));
                }
                TAG_NEW_FILE_BLOBS => {
                    let level = decode_level(&mut d)?;
                    let mut meta = FileMeta::decode_from(&mut d)?;
                    meta.blob_refs = Some(FileMeta::decode_refs(&mut d)?);
                    e.new_files.push((level, meta));
                }
                TAG_NEW_ROW => e.new_rows.push(decode_row(&mut d, &mut pages_left)?),
                TAG_SWITCH_ROLES => flag_once(&mut e.switch_roles)?,
                TAG_COLUMN => once(&mut e.column, decode_column(&mut d)?)?,
                TAG_DROP_COMPACTOR => flag_once(&mut e.drop_compactor)?,
                TAG_GLOBAL_CURSOR => once(&mut e.global_cursor, d.length_prefixed()?.to_vec())?,
                TAG_NEXT_ROW_NUMBER => once(&mut e.next_row_number, d.varint64()?)?,
                TAG_COMPACTOR_ROW => e.compactor_rows.push(decode_row(&mut d, &mut pages_left)?),
                TAG_DRAIN => once(&mut e.drain, decode_drain(&mut d)?)?,
                TAG_NEW_BLOB => e.new_blobs.push(decode_new_blob(&mut d)?),
                TAG_BLOB_GARBAGE => e.blob_garbage.push(BlobGarbage {
                    number: FileNum(d.varint64()?),
                    records: d.varint64()?,
                    bytes: d.varint64()?,
                }),
                TAG_RANGE_DEL => e.new_range_dels.push(decode_range_del(&mut d)?),
                TAG_DELETED_RANGE_DEL => e.deleted_range_dels.push(SeqNo(d.varint64()?)),
                TAG_KEYSPACE => e.keyspaces.push(decode_keyspace(&mut d)?),
                TAG_INDEX_GENERATION => once(&mut e.index_generation, d.varint64()?)?,
                TAG_PARTITION_BOUNDS => once(&mut e.partition_bounds, decode_bounds(&mut d)?)?,
                TAG_TABLE_RUN => e.table_runs.push(decode_table_run(&mut d)?),
                other => {
                    return Err(CorruptionReason::UnknownType(
                        u8::try_from(other).unwrap_or(u8::MAX),
                    ));
                }
            }
        }
        Ok(e)
    }
}
