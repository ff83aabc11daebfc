//! Fuzzing entry points (docs/reliability.md T11): one function per parser of bytes read from
//! storage, each taking the raw bytes of one artifact. The `fuzz/` crate at the repository
//! root calls them from its libFuzzer targets; `scripts/fuzz` runs those.
//!
//! Each entry point runs the real reader on the bytes the way the engine does (open, read
//! every entry in both directions, point lookups, seeks, `verify`) over in-memory tiers
//! (`MemFs`, `SimulatedRegion`). Rejecting the bytes with an error is the expected outcome
//! for most inputs; a panic, an abort, a timeout or an allocation beyond libFuzzer's limit is
//! a finding. Where the reader accepts the bytes in full (its `verify` passes), the entry
//! point also checks that the answers agree with each other: lookups and seeks against a model
//! built from a full scan, forward against backward scans, encode/decode round trips, the
//! cross-row hint search against an unhinted search. A failed check panics, so it is a finding
//! too.
//!
//! Every format carries CRC32C checksums, and almost every mutation of a valid file breaks one,
//! so a fuzzer would mostly exercise checksum verification. Each entry point therefore also runs
//! the reader a second time on a copy whose checksums were recomputed ([`repair`]), which lets
//! mutations reach the structure behind them.
//!
//! Compiled with the `fuzzing` feature (and in this crate's unit tests, which run every seed
//! of the corpus through every entry point: see `seeds`). Not part of the supported API.
//! Thread safety: plain functions, no shared state.
#![deny(clippy::indexing_slicing)]

mod repair;
mod rows;
#[cfg(test)]
mod seeds;

use std::cmp::Ordering;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::batch::{self, WriteBatch};
use crate::blob::reader::BlobFiles;
use crate::blob::{self, BlobPointer};
use crate::coding::{get_u64, put_varint64};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{SeqNo, ValueKind, compare_internal, parse_internal_key, seek_key};
use crate::layout::{self, FileNum};
use crate::matrix::meta::PageList;
use crate::matrix::row_table::RowReader;
use crate::memtable::MemTable;
use crate::sst::Table;
use crate::sst::cache::BlockCache;
use crate::tier::{FileSystem, MemFs, Region, SimulatedRegion};
use crate::version::manifest;
use crate::version::set::Replay;
use crate::version::{NUM_LEVELS, VersionEdit};
use crate::wal::{self, WalRecovery};
use rows::{check_rows, split_rows};

/// The fuzz targets, by the name of their `fuzz/fuzz_targets/<name>.rs` file and corpus
/// directory, with the largest input (`-max_len`) `scripts/fuzz` gives each.
pub const TARGETS: &[(&str, usize)] = &[
    ("wal_segment", 64 << 10),
    ("write_batch", 16 << 10),
    ("sst", 64 << 10),
    ("row_table", 128 << 10),
    ("manifest", 64 << 10),
    ("current", 128),
    ("blob_file", 64 << 10),
    ("backup_meta", 16 << 10),
    ("container_pages", 64 << 10),
];

/// Scans stop after this many entries (then the model checks are skipped).
const MAX_SCAN: usize = 8192;
/// At most this many lookup targets are probed per input.
const MAX_PROBES: usize = 256;
/// Page size the RowTable target lays rows out with (the format does not depend on it).
const ROW_PAGE_BYTES: usize = 256;

/// A WAL segment (docs/format/wal.md) as recovery reads it: every record in both recovery
/// modes, as the last segment and as an earlier one, each payload decoded and applied to a
/// memtable; a torn tail is cleared with `zero_tail` and the segment must then read cleanly.
/// The expected segment number is the one in the header.
pub fn wal_segment(data: &[u8]) {
    check_wal(data);
    if let Some(fixed) = repair::wal(data) {
        check_wal(&fixed);
    }
}

/// A write batch (the payload of a WAL record, docs/format/wal.md "Batch"): decoded,
/// applied to a memtable and checked against the last operation on each key, rebuilt through
/// the public API and decoded again.
pub fn write_batch(data: &[u8]) {
    check_batch(data);
}

/// A backup's metadata file (docs/format/backup.md): decoding never panics, and what decodes
/// encodes to bytes that decode to the same metadata.
pub fn backup_meta(data: &[u8]) {
    check_backup_meta(data);
}

fn check_backup_meta(data: &[u8]) -> bool {
    use crate::backup::meta::BackupMeta;
    let path = Path::new("/backups/meta/000001");
    let Ok(m) = BackupMeta::decode(data, path) else {
        return false;
    };
    let again = BackupMeta::decode(&m.encode(), path);
    assert!(
        again.is_ok_and(|a| a == m),
        "a decoded metadata file re-encodes differently"
    );
    true
}

/// A backup's container pages file (docs/format/backup.md): restoring it into a fresh region
/// of its declared size (when that is at most 1 MiB) never panics; what restores leaves every
/// page outside the runs zero.
pub fn container_pages(data: &[u8]) {
    check_container_pages(data);
}

fn check_container_pages(data: &[u8]) -> bool {
    let fs = MemFs::new();
    let path = Path::new("/backups/private/000001-CONTAINER.pages");
    if write_file(&fs, path, data).is_err() {
        return false;
    }
    let Ok(file) = fs.open(path) else {
        return false;
    };
    let Ok(h) = crate::backup::pages::read_header(file.as_ref(), path) else {
        return false;
    };
    if h.container_bytes > 1 << 20 {
        return false;
    }
    let region = SimulatedRegion::new(h.container_bytes as usize);
    crate::backup::pages::restore(file.as_ref(), path, &region).is_ok()
}

/// An SSTable (docs/format/sst.md): footer, properties, filter and index at open, then every
/// data block through forward and backward scans, seeks, point lookups and `verify`.
pub fn sst(data: &[u8]) {
    check_sst(data);
    if let Some(fixed) = repair::sst(data) {
        check_sst(&fixed);
    }
}

/// One RowTable (docs/format/rowtable.md) as logical bytes, optionally followed by the
/// logical bytes of its previous row. Each row is laid over non-contiguous pages of a
/// simulated region and opened under the row number of its header; then scans, lookups,
/// seeks, forward-pointer windows, `verify`, freeing value pages, and (with two rows) the
/// cross-row hint search against an unhinted search.
pub fn row_table(data: &[u8]) {
    check_rows(data);
    if let Some(fixed) = repair::rows(data) {
        check_rows(&fixed);
    }
}

/// A manifest (docs/format/manifest.md) named by a valid CURRENT: every edit decoded and
/// round-tripped, the whole log replayed as recovery does; a recovered state must satisfy the
/// version invariants and survive its own snapshot edit.
pub fn manifest(data: &[u8]) {
    check_manifest(data);
    if let Some(fixed) = repair::manifest(data) {
        check_manifest(&fixed);
    }
}

/// A CURRENT file (docs/format/manifest.md, docs/format/filenames.md): accepted only if it
/// is exactly the name of the manifest it resolves to, plus a newline.
pub fn current(data: &[u8]) {
    check_current(data);
}

/// A blob file (docs/format/blob.md) under the number in its header: `verify_file` with the
/// footer's figures, then every record read through a pointer as lookups do, and pointers
/// that miss a record by a byte.
pub fn blob_file(data: &[u8]) {
    check_blob(data);
    if let Some(fixed) = repair::blob(data) {
        check_blob(&fixed);
    }
}

/// Runs the entry point of target `name` on `data`; false for an unknown name.
pub fn run(name: &str, data: &[u8]) -> bool {
    let f: fn(&[u8]) = match name {
        "wal_segment" => wal_segment,
        "write_batch" => write_batch,
        "sst" => sst,
        "row_table" => row_table,
        "manifest" => manifest,
        "current" => current,
        "blob_file" => blob_file,
        "backup_meta" => backup_meta,
        "container_pages" => container_pages,
        _ => return false,
    };
    f(data);
    true
}

// ---------------------------------------------------------------------------------------------
// Shared helpers

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn write_file(fs: &MemFs, path: &Path, data: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs.create_dir_all(dir)?;
    }
    let mut f = fs.create(path)?;
    f.append(data)?;
    f.sync()
}

/// Every entry of `it` in one direction (backward scans come out in reverse order); `None`
/// if the scan was cut at [`MAX_SCAN`] entries.
fn scan(it: &mut dyn InternalIterator, forward: bool) -> Result<Option<Entries>> {
    let mut out = Vec::new();
    if forward {
        it.seek_to_first()?;
    } else {
        it.seek_to_last()?;
    }
    while it.valid() {
        if out.len() == MAX_SCAN {
            return Ok(None);
        }
        let key = it.key().to_vec();
        let value = it.value().to_vec();
        out.push((key, value));
        if forward {
            it.next()?;
        } else {
            it.prev()?;
        }
    }
    Ok(Some(out))
}

/// Lookup targets derived from the keys of a scan: about [`MAX_PROBES`] / 4 keys, evenly
/// spread, each with a key just below and one just above it; and the two extremes.
fn probe_targets(entries: &Entries) -> Vec<Vec<u8>> {
    let step = entries.len().div_ceil(MAX_PROBES / 4).max(1);
    let mut out = vec![Vec::new(), vec![0xff; 9]];
    for (k, _) in entries.iter().step_by(step) {
        out.push(k.clone());
        let mut below = k.clone();
        if let Some(last) = below.last_mut() {
            *last = last.wrapping_sub(1);
        }
        out.push(below);
        let mut above = k.clone();
        above.push(0);
        out.push(above);
    }
    out
}

/// `(user key, snapshot)` pairs to look up: the user key of each target at its own sequence
/// number, one below it and at the newest snapshot.
fn lookups(targets: &[Vec<u8>]) -> Vec<(Vec<u8>, SeqNo)> {
    let mut out = Vec::new();
    for t in targets {
        let Ok(p) = parse_internal_key(t) else {
            continue;
        };
        for s in [p.seq, SeqNo(p.seq.0.saturating_sub(1)), SeqNo::MAX] {
            out.push((p.user_key.to_vec(), s));
        }
    }
    out
}

/// Index of the first entry `>= target` (`> target` when `strict`).
fn model_seek(entries: &Entries, target: &[u8], strict: bool) -> usize {
    entries.partition_point(|(k, _)| match compare_internal(k, target) {
        Ordering::Less => true,
        Ordering::Equal => strict,
        Ordering::Greater => false,
    })
}

/// The newest version of `user_key` visible at `snapshot` in a sorted list of entries.
fn model_get<'a>(
    entries: &'a Entries,
    user_key: &[u8],
    snapshot: SeqNo,
) -> Option<(ValueKind, &'a [u8])> {
    let (k, v) = entries.get(model_seek(entries, &seek_key(user_key, snapshot), false))?;
    let p = parse_internal_key(k).ok()?;
    (p.user_key == user_key).then_some((p.kind, v.as_slice()))
}

fn strictly_increasing(entries: &Entries) -> bool {
    entries
        .windows(2)
        .all(|w| matches!(w, [a, b] if compare_internal(&a.0, &b.0) == Ordering::Less))
}

/// Checks a seek and a seek-for-prev to `target` against the model.
fn check_seeks(it: &mut dyn InternalIterator, entries: &Entries, target: &[u8], what: &str) {
    let want = entries.get(model_seek(entries, target, false));
    assert!(
        it.seek(target).is_ok(),
        "{what}: seek failed on verified data"
    );
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        want.map(|(k, _)| k.clone()),
        "{what}: seek({target:x?})"
    );
    let want = model_seek(entries, target, true)
        .checked_sub(1)
        .and_then(|i| entries.get(i));
    assert!(
        it.seek_for_prev(target).is_ok(),
        "{what}: seek_for_prev failed on verified data"
    );
    assert_eq!(
        it.valid().then(|| it.key().to_vec()),
        want.map(|(k, _)| k.clone()),
        "{what}: seek_for_prev({target:x?})"
    );
}

// ---------------------------------------------------------------------------------------------
// WAL segments and write batches

/// One read of a segment: where it ended, whether in a torn tail, and the payloads handed out.
#[derive(Debug, PartialEq, Eq)]
struct WalRead {
    end_offset: u64,
    torn: bool,
    payloads: Vec<Vec<u8>>,
}

fn read_wal(
    region: &SimulatedRegion,
    path: &Path,
    number: FileNum,
    mode: WalRecovery,
    is_last: bool,
) -> Result<WalRead> {
    let mem = MemTable::new();
    let mut payloads = Vec::new();
    let end = wal::read_segment(region, path, number, mode, is_last, |payload, _| {
        // `read_segment` hands out well-formed batches only.
        let b = match WriteBatch::decode(payload) {
            Ok(b) => b,
            Err(r) => panic!("read_segment passed on a payload that does not decode: {r}"),
        };
        for (seq, op) in (b.sequence().0..).zip(b.ops()) {
            mem.add(SeqNo(seq), op.kind, op.key, op.value);
        }
        payloads.push(payload.to_vec());
        Ok(())
    })?;
    assert_eq!(end.records, payloads.len() as u64);
    let mut it = Arc::new(mem).iter();
    let _ = scan(&mut it, true);
    Ok(WalRead {
        end_offset: end.end_offset,
        torn: end.torn_tail.is_some(),
        payloads,
    })
}

fn check_wal(data: &[u8]) -> bool {
    let number = FileNum(get_u64(data, 16).unwrap_or(0));
    let path = PathBuf::from("/fast").join(layout::wal_name(number));
    let tolerant_region = SimulatedRegion::from_image(data.to_vec());
    let tolerant = read_wal(
        &tolerant_region,
        &path,
        number,
        WalRecovery::TolerateTornTail,
        true,
    );
    let strict_region = SimulatedRegion::from_image(data.to_vec());
    let strict = read_wal(&strict_region, &path, number, WalRecovery::Strict, true);
    let earlier_region = SimulatedRegion::from_image(data.to_vec());
    let earlier = read_wal(
        &earlier_region,
        &path,
        number,
        WalRecovery::TolerateTornTail,
        false,
    );
    // Strict mode also refuses data behind a zeroed record header, which an earlier segment
    // in the default mode tolerates (docs/format/wal.md); otherwise the two are equally strict.
    assert!(
        strict.is_err() || earlier.is_ok(),
        "an earlier segment is read at most as strictly as any segment in Strict mode"
    );
    let t = match (tolerant, strict) {
        (Ok(t), Ok(s)) => {
            assert!(!t.torn, "Strict accepted a torn tail");
            assert_eq!(t, s, "the two modes read a clean segment differently");
            t
        }
        (Ok(t), Err(_)) => {
            // Strict also refuses data behind the zeroed header that ends the segment.
            let data_behind = usize::try_from(t.end_offset)
                .ok()
                .and_then(|o| data.get(o..))
                .is_some_and(|rest| rest.iter().any(|&b| b != 0));
            assert!(
                t.torn || data_behind,
                "Strict refused a segment that the tolerant mode read without a torn tail"
            );
            t
        }
        (Err(_), Ok(_)) => panic!("the tolerant mode refused what Strict accepted"),
        (Err(_), Err(_)) => return false,
    };
    if t.torn {
        // Recovery clears the torn tail; the segment must then read cleanly, as a strict
        // earlier segment, with the same records.
        let cleared = wal::zero_tail(&tolerant_region, &path, t.end_offset);
        assert!(cleared.is_ok(), "zero_tail failed: {cleared:?}");
        match read_wal(&tolerant_region, &path, number, WalRecovery::Strict, false) {
            Ok(again) => {
                assert_eq!(
                    again,
                    WalRead { torn: false, ..t },
                    "zero_tail changed the records"
                );
            }
            Err(e) => panic!("a segment whose torn tail was cleared does not read: {e}"),
        }
    }
    true
}

fn check_batch(data: &[u8]) -> bool {
    let validated = batch::validate(data);
    let decoded = WriteBatch::decode(data);
    assert_eq!(
        validated.is_ok(),
        decoded.is_ok(),
        "validate and decode disagree"
    );
    let Ok(b) = decoded else {
        return false;
    };
    assert_eq!(b.data(), data);
    let ops: Vec<(ValueKind, Vec<u8>, Vec<u8>)> = b
        .ops()
        .map(|op| (op.kind, op.key.to_vec(), op.value.to_vec()))
        .collect();
    assert_eq!(ops.len(), b.len(), "ops() and len() disagree");

    // Rebuilt through the public API, the batch holds the same operations.
    let mut rebuilt = WriteBatch::new();
    for (kind, key, value) in &ops {
        match kind {
            ValueKind::Deletion => rebuilt.delete(key),
            ValueKind::Merge => rebuilt.merge(key, value),
            ValueKind::RangeDeletion => rebuilt.delete_range(key, value),
            ValueKind::Value => rebuilt.put(key, value),
            // A logged pointer (`Options::separate_at_write`): only the write path adds one.
            ValueKind::BlobIndex => rebuilt.put_blob_index_in(0, key, value),
        }
    }
    rebuilt.set_sequence(b.sequence());
    match WriteBatch::decode(rebuilt.data()) {
        Ok(again) => {
            let again: Vec<_> = again
                .ops()
                .map(|op| (op.kind, op.key.to_vec(), op.value.to_vec()))
                .collect();
            assert_eq!(again, ops, "a rebuilt batch decodes differently");
        }
        Err(r) => panic!("a batch rebuilt from decoded operations does not decode: {r}"),
    }

    // Group commit appends batches; the result is well formed while its sequence numbers
    // stay in range.
    let mut twice = b.clone();
    twice.append(&b);
    let last = b
        .sequence()
        .0
        .saturating_add((2 * b.len() as u64).saturating_sub(1));
    assert_eq!(
        batch::validate(twice.data()).is_ok(),
        last <= SeqNo::MAX.0,
        "an appended batch"
    );
    assert_eq!(twice.len(), 2 * b.len());

    // Applied to a memtable, the last operation on each key wins; range deletes go beside
    // the skiplist and cover a key when written after its last operation.
    let mem = MemTable::new();
    let mut last: HashMap<&[u8], (u64, ValueKind, &[u8])> = HashMap::new();
    let mut ranges: Vec<(&[u8], &[u8], u64)> = Vec::new();
    for (seq, op) in (b.sequence().0..).zip(b.ops()) {
        mem.add(SeqNo(seq), op.kind, op.key, op.value);
        if op.kind == ValueKind::RangeDeletion {
            ranges.push((op.key, op.value, seq));
        } else {
            last.insert(op.key, (seq, op.kind, op.value));
        }
    }
    let mut index = crate::range_del::RangeDelView::default();
    mem.add_range_dels_to(&mut index);
    // Empty ranges (a decoded batch may hold them; the write path refuses them) cover nothing.
    assert_eq!(
        index.is_empty(),
        !ranges.iter().any(|(s, e, _)| s < e),
        "range tombstones kept"
    );
    for (key, (seq, kind, value)) in last {
        assert_eq!(
            mem.get(key, SeqNo::MAX),
            Some((kind, value.to_vec())),
            "memtable answer for key {key:x?}"
        );
        let covered = ranges
            .iter()
            .any(|&(s, e, t)| s <= key && key < e && t > seq);
        assert_eq!(
            index
                .max_covering(key, SeqNo::MAX)
                .is_some_and(|t| t.0 > seq),
            covered,
            "range tombstones over key {key:x?}"
        );
    }
    true
}

// ---------------------------------------------------------------------------------------------
// SSTables

fn check_sst(data: &[u8]) -> bool {
    let fs = MemFs::new();
    let path = Path::new("/slow/000005.sst");
    if write_file(&fs, path, data).is_err() {
        return false;
    }
    let Ok(file) = fs.open(path) else {
        return false;
    };
    let cache = Arc::new(BlockCache::new(1 << 20));
    let Ok(table) = Table::open(file, 1, Some(cache)) else {
        return false;
    };
    let _ = table.memory_bytes();
    let forward = scan(&mut table.iter(), true);
    let backward = scan(&mut table.iter(), false);
    let verified = table.verify().is_ok();

    let targets = match &forward {
        Ok(Some(entries)) => probe_targets(entries),
        _ => vec![Vec::new(), b"key\x01\0\0\0\0\0\0\0".to_vec()],
    };
    let model = match (verified, forward, backward) {
        (true, Ok(Some(f)), Ok(Some(mut b))) => {
            assert!(strictly_increasing(&f), "verified table: keys out of order");
            b.reverse();
            assert_eq!(
                f, b,
                "verified table: backward scan differs from forward scan"
            );
            Some(f)
        }
        (true, Ok(None), _) | (true, _, Ok(None)) => None,
        (true, f, b) => panic!(
            "verified table fails a scan: forward {:?}, backward {:?}",
            f.err(),
            b.err()
        ),
        (false, ..) => None,
    };
    let mut it = table.iter();
    for t in &targets {
        match &model {
            Some(m) => check_seeks(&mut it, m, t, "SSTable"),
            None => {
                let _ = it.seek(t);
                let _ = it.seek_for_prev(t);
            }
        }
    }
    for (user_key, snapshot) in lookups(&targets) {
        let got = table.get(&user_key, snapshot);
        if let Some(m) = &model {
            let want = model_get(m, &user_key, snapshot).map(|(k, v)| (k, v.to_vec()));
            match got {
                Ok(got) => assert_eq!(got, want, "SSTable get({user_key:x?}, {snapshot})"),
                Err(e) => panic!("verified table: get failed: {e}"),
            }
        }
    }
    verified
}

// ---------------------------------------------------------------------------------------------
// Manifest and CURRENT

fn check_manifest(data: &[u8]) -> bool {
    let fs = MemFs::new();
    let dir = Path::new("/slow");
    let number = FileNum(1);
    let path = layout::path(dir, &layout::manifest_name(number));
    let current = format!("{}\n", layout::manifest_name(number));
    if write_file(&fs, &layout::path(dir, layout::CURRENT), current.as_bytes()).is_err()
        || write_file(&fs, &path, data).is_err()
    {
        return false;
    }
    if let Ok(edits) = manifest::read_edits(&fs, &path) {
        for (_, edit) in &edits {
            assert_eq!(
                VersionEdit::decode(&edit.encode()).as_ref(),
                Ok(edit),
                "an edit does not survive encode and decode"
            );
        }
    }
    let Ok(vs) = manifest::recover(&fs, dir) else {
        return false;
    };
    let v = vs.current();
    if let Err(e) = v.check_invariants() {
        panic!("a recovered version breaks an invariant: {e}");
    }
    let _ = (
        v.all_file_numbers(),
        (0..NUM_LEVELS).map(|l| v.level_bytes(l)),
    );
    let snapshot = vs.snapshot_edit();
    assert_eq!(
        VersionEdit::decode(&snapshot.encode()).as_ref(),
        Ok(&snapshot),
        "the snapshot edit does not survive encode and decode"
    );
    let mut replay = Replay::new();
    if let Err(r) = replay.apply(&snapshot) {
        panic!("the snapshot edit of a recovered state does not apply: {r}");
    }
    let again = match replay.finish(number) {
        Ok(again) => again,
        Err(r) => panic!("the snapshot edit of a recovered state does not recover: {r}"),
    };
    assert_eq!(
        again.snapshot_edit(),
        snapshot,
        "the snapshot edit of a recovered state does not restore it"
    );
    assert_eq!(again.current().all_file_numbers(), v.all_file_numbers());
    true
}

fn check_current(data: &[u8]) -> bool {
    let fs = MemFs::new();
    let dir = Path::new("/slow");
    if write_file(&fs, &layout::path(dir, layout::CURRENT), data).is_err() {
        return false;
    }
    let Ok(number) = manifest::read_current(&fs, dir) else {
        return false;
    };
    assert_eq!(
        data,
        format!("{}\n", layout::manifest_name(number)).as_bytes(),
        "CURRENT names another file than the manifest it resolves to"
    );
    true
}

// ---------------------------------------------------------------------------------------------
// Blob files

fn check_blob(data: &[u8]) -> bool {
    let fs = MemFs::new();
    let dir = PathBuf::from("/slow");
    let number = FileNum(get_u64(data, 12).unwrap_or(0));
    if write_file(&fs, &layout::path(&dir, &layout::blob_name(number)), data).is_err() {
        return false;
    }
    let files = BlobFiles::new(Arc::new(fs), dir);
    let footer_at = data.len().saturating_sub(blob::FOOTER_LEN);
    let (records, bytes) = data
        .get(footer_at..)
        .and_then(|f| blob::decode_footer(f).ok())
        .unwrap_or((0, 0));
    let verified = files.verify_file(number, records, bytes).is_ok();

    // Walk the records as `verify_file` does and read each through a pointer.
    let mut at = blob::HEADER_LEN;
    let mut reads = 0;
    while at < footer_at && reads < MAX_PROBES {
        reads += 1;
        let Some(rest) = data.get(at..footer_at) else {
            break;
        };
        let Ok(len) = blob::record_len_at(rest) else {
            assert!(
                !verified,
                "verified blob file: a record length does not decode"
            );
            break;
        };
        let record = rest.get(..len).and_then(|r| blob::decode_record(r).ok());
        let ptr = BlobPointer {
            file: number,
            offset: at as u64,
            len: len as u64,
        };
        match record {
            Some((key, value)) => {
                match files.read(key, &ptr) {
                    Ok(v) => assert_eq!(v, value, "blob read returns another value"),
                    Err(e) => assert!(!verified, "verified blob file: read failed: {e}"),
                }
                let mut encoded = Vec::new();
                ptr.encode_to(&mut encoded);
                let _ = files.read_pointer(key, &encoded);
                let mut other = key.to_vec();
                other.push(0);
                assert!(
                    files.read(&other, &ptr).is_err(),
                    "a blob record was returned for another key"
                );
                for (off, l) in [(1i64, 0i64), (0, -1), (0, 1), (-1, 1)] {
                    let near = BlobPointer {
                        file: number,
                        offset: ptr.offset.saturating_add_signed(off),
                        len: ptr.len.saturating_add_signed(l),
                    };
                    if let Ok(v) = files.read(key, &near) {
                        assert_eq!(v, value, "a pointer off by a byte reads another value");
                    }
                }
            }
            None => assert!(!verified, "verified blob file: a record does not decode"),
        }
        at = at.saturating_add(len.max(1));
    }
    // Pointers decoded from the start of the input (the decoder of table values).
    let mut ptr = Vec::new();
    put_varint64(&mut ptr, number.0);
    ptr.extend_from_slice(data.get(..data.len().min(20)).unwrap_or_default());
    let _ = files.read_pointer(b"key", &ptr);
    let _ = files.read_pointer(b"key", data.get(..data.len().min(30)).unwrap_or_default());
    verified
}
