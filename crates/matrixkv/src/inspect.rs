//! Reading single files of a database for inspection (the CLI's `dump` commands), through the
//! engine's own readers: every check the engine makes is made here, and damaged input is an
//! [`Error`] naming the file and offset, never a panic.
//!
//! Plain data only: what each file holds, as owned values. Nothing here writes.

use std::path::{Path, PathBuf};

use crate::batch::WriteBatch;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, ValueKind};
use crate::layout::{self, FileKind};
use crate::tier::{FileSystem, StdFs};

/// The name of a kind of entry as the dumps print it.
fn kind_name(kind: ValueKind) -> &'static str {
    match kind {
        ValueKind::Deletion => "delete",
        ValueKind::Value => "value",
        ValueKind::BlobIndex => "blob-pointer",
        ValueKind::Merge => "merge",
        ValueKind::RangeDeletion => "range-delete",
    }
}

/// One version of a key in a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The key as stored (with its keyspace prefix).
    pub key: Vec<u8>,
    /// Its sequence number.
    pub seq: u64,
    /// `value`, `delete`, `merge` or `blob-pointer`.
    pub kind: &'static str,
    /// The value (a blob pointer's encoded bytes for `blob-pointer`).
    pub value: Vec<u8>,
}

/// What an SSTable's properties and index say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SstSummary {
    /// The file.
    pub path: PathBuf,
    /// Its size in bytes.
    pub size: u64,
    /// Versions stored.
    pub entries: u64,
    /// Of which tombstones.
    pub deletions: u64,
    /// Bytes of keys and of values.
    pub raw_key_bytes: u64,
    /// Bytes of values.
    pub raw_value_bytes: u64,
    /// Sequence number range.
    pub smallest_seq: u64,
    /// Sequence number range.
    pub largest_seq: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// The codec of the data blocks.
    pub compression: String,
    /// Bloom filter bits per key (0: no filter).
    pub bloom_bits_per_key: u32,
}

/// Reads the SSTable at `path`: its summary and, with `entries`, every version in order.
///
/// # Errors
/// Corruption (file and offset), an unsupported format, I/O errors.
pub fn sst(path: &Path, entries: bool) -> Result<(SstSummary, Vec<Entry>)> {
    let file = StdFs.open(path)?;
    let table = crate::sst::Table::open(file, 0, None)?;
    let p = table.properties();
    let summary = SstSummary {
        path: path.to_owned(),
        size: table.size(),
        entries: p.entries,
        deletions: p.deletions,
        raw_key_bytes: p.raw_key_bytes,
        raw_value_bytes: p.raw_value_bytes,
        smallest_seq: p.smallest_seq.0,
        largest_seq: p.largest_seq.0,
        data_blocks: p.data_blocks,
        compression: p.compression.to_string(),
        bloom_bits_per_key: p.bloom_bits_per_key,
    };
    let mut out = Vec::new();
    if entries {
        let mut it = table.iter();
        it.seek_to_first()?;
        while it.valid() {
            let parsed = key::parse_internal_key(it.key()).map_err(|r| {
                Error::corruption(CorruptionSite::new(ArtifactKind::Sst, path, 0), r)
            })?;
            out.push(Entry {
                key: parsed.user_key.to_vec(),
                seq: parsed.seq.0,
                kind: kind_name(parsed.kind),
                value: it.value().to_vec(),
            });
            it.next()?;
        }
    }
    Ok((summary, out))
}

/// One operation of a WAL record's batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalOp {
    /// The keyspace's id (0: the default keyspace).
    pub keyspace: u32,
    /// `value`, `delete`, `merge` or `range-delete`.
    pub kind: &'static str,
    /// The key (a range deletion's start).
    pub key: Vec<u8>,
    /// The value (a range deletion's end).
    pub value: Vec<u8>,
}

/// One WAL record: a write batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    /// Offset of the payload in the segment.
    pub offset: u64,
    /// Sequence number of the batch's first operation.
    pub sequence: u64,
    /// The operations, in order.
    pub ops: Vec<WalOp>,
}

/// What a WAL segment holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalSummary {
    /// The file.
    pub path: PathBuf,
    /// The segment number (from the file name, checked against the header).
    pub number: u64,
    /// The region's length.
    pub size: u64,
    /// Valid records.
    pub records: u64,
    /// Where the log ends (the offset a writer would append at).
    pub end_offset: u64,
    /// A torn last record that was left out: its offset and what was wrong.
    pub torn_tail: Option<(u64, String)>,
}

/// Reads the WAL segment at `path` (`NNNNNN.wal`, or a recycled `NNNNNN.walfree` that holds
/// no record) as recovery does, tolerating a torn last record: its summary and its records.
///
/// # Errors
/// A file name that is not a segment's, corruption (file and offset), I/O errors.
pub fn wal(path: &Path) -> Result<(WalSummary, Vec<WalRecord>)> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let number = match layout::parse(&name) {
        Some(FileKind::Wal(n) | FileKind::WalFree(n)) => n,
        _ => {
            return Err(Error::invalid(format!(
                "{} is not named as a WAL segment (NNNNNN.wal)",
                path.display()
            )));
        }
    };
    let bytes = StdFs.read_all(path)?;
    let size = bytes.len() as u64;
    let region = crate::engine::BytesRegion::from_bytes(bytes);
    let mut records = Vec::new();
    let end = crate::wal::read_segment(
        &region,
        path,
        number,
        crate::WalRecovery::TolerateTornTail,
        true,
        |payload, at| {
            let batch = WriteBatch::decode(payload).map_err(|r| {
                Error::corruption(CorruptionSite::new(ArtifactKind::Wal, path, at as u64), r)
            })?;
            records.push(WalRecord {
                offset: at as u64,
                sequence: batch.sequence().0,
                ops: batch
                    .ops()
                    .map(|op| WalOp {
                        keyspace: op.keyspace,
                        kind: kind_name(op.kind),
                        key: op.key.to_vec(),
                        value: op.value.to_vec(),
                    })
                    .collect(),
            });
            Ok(())
        },
    )?;
    let summary = WalSummary {
        path: path.to_owned(),
        number: number.0,
        size,
        records: end.records,
        end_offset: end.end_offset,
        torn_tail: end.torn_tail.map(|(at, r)| (at, r.to_string())),
    };
    Ok((summary, records))
}

/// One record of a blob file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobRecord {
    /// Offset of the record in the file.
    pub offset: u64,
    /// The key it belongs to (with its keyspace prefix).
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
}

/// Reads the blob file at `path` (`NNNNNN.blob`): every record, checked against its checksum
/// and the footer's counts.
///
/// # Errors
/// A file name that is not a blob file's, corruption (file and offset), I/O errors.
pub fn blob(path: &Path) -> Result<Vec<BlobRecord>> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let Some(FileKind::Blob(number)) = layout::parse(&name) else {
        return Err(Error::invalid(format!(
            "{} is not named as a blob file (NNNNNN.blob)",
            path.display()
        )));
    };
    let data = StdFs.read_all(path)?;
    let corrupt = |at: usize, r: CorruptionReason| {
        Error::corruption(CorruptionSite::new(ArtifactKind::Blob, path, at as u64), r)
    };
    let header = data
        .get(..crate::blob::HEADER_LEN)
        .ok_or_else(|| corrupt(0, CorruptionReason::Truncated))?;
    crate::blob::check_header(header, number).map_err(|r| corrupt(0, r))?;
    let footer_at = data
        .len()
        .checked_sub(crate::blob::FOOTER_LEN)
        .filter(|&at| at >= crate::blob::HEADER_LEN)
        .ok_or_else(|| corrupt(0, CorruptionReason::Truncated))?;
    let (n, bytes) = crate::blob::decode_footer(data.get(footer_at..).unwrap_or_default())
        .map_err(|r| corrupt(footer_at, r))?;
    let mut out = Vec::new();
    let mut at = crate::blob::HEADER_LEN;
    while at < footer_at {
        let rest = data.get(at..footer_at).unwrap_or_default();
        let len = crate::blob::record_len_at(rest).map_err(|r| corrupt(at, r))?;
        let rec = rest
            .get(..len)
            .ok_or_else(|| corrupt(at, CorruptionReason::Truncated))?;
        let (k, v) = crate::blob::decode_record(rec).map_err(|r| corrupt(at, r))?;
        out.push(BlobRecord {
            offset: at as u64,
            key: k.to_vec(),
            value: v.to_vec(),
        });
        at += len;
    }
    if out.len() as u64 != n || (footer_at - crate::blob::HEADER_LEN) as u64 != bytes {
        return Err(corrupt(
            footer_at,
            CorruptionReason::Invalid("the footer's record count or bytes differ from the file"),
        ));
    }
    Ok(out)
}

/// One version edit of a manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestEdit {
    /// Offset of its record.
    pub offset: u64,
    /// The edit, field by field.
    pub text: String,
}

/// What the live manifest of a database says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestSummary {
    /// The manifest file CURRENT names.
    pub path: PathBuf,
    /// Its edits in order.
    pub edits: Vec<ManifestEdit>,
    /// A last record dropped as a torn write: its offset.
    pub dropped_tail: Option<u64>,
    /// The parameters fixed at creation.
    pub fixed_options: Vec<(String, String)>,
    /// The last sequence number and the WAL log number.
    pub last_sequence: u64,
    /// Oldest WAL segment still needed.
    pub log_number: u64,
    /// The resulting version: levels, files and the matrix container's rows.
    pub layout: Layout,
}

/// A table of the current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutFile {
    /// Its file number (`NNNNNN.sst`).
    pub number: u64,
    /// Bytes.
    pub size: u64,
    /// Versions stored.
    pub entries: u64,
    /// Smallest and largest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
}

/// A RowTable of the matrix container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutRow {
    /// Row number.
    pub row: u64,
    /// `receiver` or `compactor`.
    pub role: &'static str,
    /// Pages of the container it spans (freed ones included).
    pub pages: usize,
    /// Versions stored.
    pub entries: u64,
    /// Bytes of keys and values.
    pub bytes: u64,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
}

/// The levels and the container rows of a version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// The tables of each level, L0 first.
    pub levels: Vec<Vec<LayoutFile>>,
    /// The container's rows, receiver then compactor, oldest first.
    pub rows: Vec<LayoutRow>,
}

fn layout_of(v: &crate::version::version::Version) -> Layout {
    let levels = (0..crate::version::NUM_LEVELS)
        .map(|l| {
            v.files(l)
                .iter()
                .map(|f| LayoutFile {
                    number: f.number.0,
                    size: f.size,
                    entries: f.entries,
                    smallest: key::user_key(&f.smallest).to_vec(),
                    largest: key::user_key(&f.largest).to_vec(),
                })
                .collect()
        })
        .collect();
    let c = v.container();
    let row = |role: &'static str, m: &crate::matrix::meta::RowMeta| LayoutRow {
        row: m.row,
        role,
        pages: m.pages.len(),
        entries: m.entries,
        bytes: m.bytes,
        smallest: key::user_key(&m.smallest).to_vec(),
        largest: key::user_key(&m.largest).to_vec(),
    };
    let rows = c
        .receiver
        .iter()
        .map(|m| row("receiver", m))
        .chain(c.compactor.iter().map(|m| row("compactor", m)))
        .collect();
    Layout { levels, rows }
}

/// Reads the live manifest of the database whose slow tier is `slow_dir` (CURRENT names it).
///
/// # Errors
/// A missing or damaged CURRENT or manifest (file and offset), I/O errors.
pub fn manifest(slow_dir: &Path) -> Result<ManifestSummary> {
    let fs = StdFs;
    let number = crate::version::manifest::read_current(&fs, slow_dir)?;
    let path = layout::path(slow_dir, &layout::manifest_name(number));
    let (edits, dropped) = crate::version::manifest::read_manifest(&fs, &path)?;
    let (vs, _) = crate::version::manifest::recover_with_tail(&fs, slow_dir)?;
    Ok(ManifestSummary {
        path,
        edits: edits
            .into_iter()
            .map(|(offset, e)| ManifestEdit {
                offset,
                text: format!("{e:?}"),
            })
            .collect(),
        dropped_tail: dropped.map(|d| d.offset),
        fixed_options: vs.fixed_options().to_vec(),
        last_sequence: vs.last_sequence().0,
        log_number: vs.log_number().0,
        layout: layout_of(&vs.current()),
    })
}

/// What a RowTable's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowSummary {
    /// The row number.
    pub row: u64,
    /// `receiver` or `compactor`.
    pub role: &'static str,
    /// The row its forward pointers (the cross-row hints) point into, and its entry count.
    pub prev_row: u64,
    /// Entries of the previous row.
    pub prev_entries: u64,
    /// Entries of this row.
    pub entries: u64,
    /// Bytes of keys and of values.
    pub key_bytes: u64,
    /// Bytes of values.
    pub value_bytes: u64,
    /// Sequence number range.
    pub smallest_seq: u64,
    /// Sequence number range.
    pub largest_seq: u64,
    /// Logical length of the row.
    pub bytes: u64,
    /// Pages of the container it spans, and how many of them hold metadata.
    pub pages: usize,
    /// Leading pages with the header, entries and keys.
    pub meta_pages: usize,
    /// Whether the row has a bloom filter over its user keys.
    pub has_filter: bool,
}

/// One entry of a RowTable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RowTableEntry {
    /// The key as stored (with its keyspace prefix).
    pub key: Vec<u8>,
    /// Its sequence number.
    pub seq: u64,
    /// `value`, `delete`, `merge` or `blob-pointer`.
    pub kind: &'static str,
    /// The value, checked against its checksum (empty when `freed`).
    pub value: Vec<u8>,
    /// The value's pages were freed: column compaction moved this entry to L1 already.
    pub freed: bool,
    /// The cross-row hint: the index of the first entry of the previous row whose key is at
    /// or after this one's.
    pub hint: u32,
}

/// Reads RowTable `row` of the database with tiers `fast_dir` and `slow_dir`: the manifest
/// names its pages, the container file holds them. Every check of the engine's reader is
/// made (header, commit word, checksums of the metadata, filter and each value read).
///
/// # Errors
/// No such row in the current version, corruption (file and offset), I/O errors.
pub fn rowtable(
    fast_dir: &Path,
    slow_dir: &Path,
    row: u64,
    entries: bool,
) -> Result<(RowSummary, Vec<RowTableEntry>)> {
    let (vs, _) = crate::version::manifest::recover_with_tail(&StdFs, slow_dir)?;
    let page_bytes: usize = vs
        .fixed_options()
        .iter()
        .find(|(n, _)| n == "page_bytes")
        .and_then(|(_, v)| v.parse().ok())
        .ok_or_else(|| Error::invalid("the database has no matrix container (page_bytes)"))?;
    let v = vs.current();
    let c = v.container();
    let found = c
        .receiver
        .iter()
        .map(|m| ("receiver", m))
        .chain(c.compactor.iter().map(|m| ("compactor", m)))
        .find(|(_, m)| m.row == row);
    let Some((role, meta)) = found else {
        let rows: Vec<u64> = c
            .receiver
            .iter()
            .chain(c.compactor.iter())
            .map(|m| m.row)
            .collect();
        return Err(Error::invalid(format!(
            "no row {row} in the current version (rows: {rows:?})"
        )));
    };
    let tier = crate::tier::DirFastTier::new(fast_dir);
    let region = crate::tier::FastTier::open_region(&tier, layout::CONTAINER)?;
    let path = layout::path(fast_dir, layout::CONTAINER);
    let reader = crate::matrix::row_table::RowReader::open(
        region,
        page_bytes,
        std::sync::Arc::clone(&meta.pages),
        row,
        path.clone(),
    )?;
    let h = reader.header();
    let summary = RowSummary {
        row,
        role,
        prev_row: h.prev_row,
        prev_entries: h.prev_entries,
        entries: h.entries,
        key_bytes: h.key_bytes,
        value_bytes: h.value_bytes,
        smallest_seq: h.smallest_seq.0,
        largest_seq: h.largest_seq.0,
        bytes: reader.bytes(),
        pages: reader.pages().len(),
        meta_pages: reader.meta_pages(),
        has_filter: reader.has_filter(),
    };
    let mut out = Vec::new();
    if entries {
        let mut k = Vec::new();
        for i in 0..reader.len() {
            reader.key(i, &mut k)?;
            let parsed = key::parse_internal_key(&k).map_err(|r| {
                Error::corruption(CorruptionSite::new(ArtifactKind::RowTable, &path, 0), r)
            })?;
            // Column compaction frees the pages of the entries it moved to L1: their values
            // are gone from the container (the key area stays until the row is dropped).
            let (at, len) = reader.value_extent(i)?;
            let page_bytes = page_bytes as u64;
            let freed = len > 0
                && (at / page_bytes..(at + len).div_ceil(page_bytes))
                    .any(|p| reader.pages().physical(p as usize).is_none());
            out.push(RowTableEntry {
                key: parsed.user_key.to_vec(),
                seq: parsed.seq.0,
                kind: kind_name(parsed.kind),
                value: if freed { Vec::new() } else { reader.value(i)? },
                freed,
                hint: reader.fwd(i)?,
            });
        }
    }
    Ok((summary, out))
}
