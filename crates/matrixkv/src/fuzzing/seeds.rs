//! The seed corpus of the fuzz targets, and the tests that run it through every entry point.
//!
//! Seeds come from three places, all made by code in this file so that the corpus can be
//! rebuilt at any time (`scripts/fuzz --write-seeds` runs [`write_seed_corpus`]):
//! - the worked examples of docs/format/*.md (the ```` ```hex ```` blocks the golden tests
//!   check), so every documented field is in the corpus;
//! - files written by the builders with options a default database does not use (LZ4 and
//!   zstd blocks, no filter, one entry per restart, chained rows);
//! - the files of two small real databases (matrix and table layouts, with blob files) after
//!   writes, flushes, compactions and a close: WAL segments (cut after their end marker, with
//!   the header's length adjusted to match, since real segments are megabytes of zeros), WAL
//!   record payloads, SSTables, RowTables (the logical bytes of each row followed by its
//!   previous row's), blob files, the manifest and CURRENT.

use std::path::Path;
use std::sync::Arc;

use super::{TARGETS, check_backup_meta, check_batch, check_blob, check_container_pages};
use super::{check_current, check_manifest, check_rows};
use super::{check_sst, check_wal, repair, run};
use crate::blob::writer::BlobWriter;
use crate::golden::hex_blocks;
use crate::key::{InternalKey, SeqNo, ValueKind};
use crate::layout::{self, FileKind, FileNum};
use crate::matrix::meta::{PageList, RowMeta};
use crate::matrix::pages::PagePool;
use crate::matrix::row_table::{RowLayout, RowReader, write_row};
use crate::record::{self, Decoded};
use crate::sst::{Builder, Compression, TableOptions};
use crate::tier::{FastTier, FileSystem, MemFs, Region, SimFastTier, SimulatedRegion};
use crate::version::manifest;
use crate::{Db, L0Layout, Options, Tiers, WriteBatch, WriteOptions};

/// One seed: the target it is for, a file name and the bytes.
struct Seed {
    target: &'static str,
    name: String,
    bytes: Vec<u8>,
}

fn seed(target: &'static str, name: impl Into<String>, bytes: Vec<u8>) -> Seed {
    Seed {
        target,
        name: name.into(),
        bytes,
    }
}

/// The checksum seed of a WAL segment's records, from its header.
fn wal_seed(segment: &[u8]) -> record::Seed {
    crate::wal::format::decode_header(segment).map_or(record::Seed::None, |h| h.record_seed())
}

/// The payload of every record of a WAL segment.
fn wal_payloads(segment: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut off = 64;
    let seed = wal_seed(segment);
    while let Decoded::Record { payload, next } = record::decode_seeded(segment, off, seed) {
        out.push(payload.to_vec());
        off = next;
    }
    out
}

/// A segment cut 64 bytes after its last record, with the length in its header adjusted.
fn trimmed_wal(segment: &[u8]) -> Vec<u8> {
    let mut off = 64;
    let seed = wal_seed(segment);
    while let Decoded::Record { next, .. } = record::decode_seeded(segment, off, seed) {
        off = next;
    }
    let cut = segment[..(off + 64).min(segment.len())].to_vec();
    repair::wal(&cut).unwrap_or(cut)
}

fn doc_seeds(out: &mut Vec<Seed>) {
    let wal_doc = include_str!("../../../../docs/format/wal.md");
    let mut blocks = hex_blocks(wal_doc);
    // Block 0: the batch example with a merge (section "Batch"); block 1: the batch with a
    // range delete; block 2: the batch with a keyspace record; block 3: the worked example.
    out.push(seed("write_batch", "doc-batch-merge", blocks.remove(0)));
    out.push(seed(
        "write_batch",
        "doc-batch-range-delete",
        blocks.remove(0),
    ));
    out.push(seed("write_batch", "doc-batch-keyspace", blocks.remove(0)));
    let mut wal = blocks.remove(0);
    wal.resize(256, 0); // the doc leaves out the zeros of the 256-byte region
    for (i, p) in wal_payloads(&wal).into_iter().enumerate() {
        out.push(seed("write_batch", format!("doc-wal-batch-{i}"), p));
    }
    out.push(seed("wal_segment", "doc-wal", wal));
    let sst_doc = include_str!("../../../../docs/format/sst.md");
    out.push(seed("sst", "doc-sst", hex_blocks(sst_doc).remove(0)));
    let row_doc = include_str!("../../../../docs/format/rowtable.md");
    let row2 = hex_blocks(row_doc).remove(0);
    out.push(seed("row_table", "doc-row", row2.clone()));
    // The doc's row 2 followed by its previous row 1 (b@1 = "1", d@2 = "2"), as the golden
    // test writes it.
    let row1 = row_bytes(1, None, &[(b"b", 1, Some(b"1")), (b"d", 2, Some(b"2"))]);
    out.push(seed(
        "row_table",
        "doc-row-with-prev",
        [row2, row1].concat(),
    ));
    let blob_doc = include_str!("../../../../docs/format/blob.md");
    out.push(seed(
        "blob_file",
        "doc-blob",
        hex_blocks(blob_doc).remove(0),
    ));
    let manifest_doc = include_str!("../../../../docs/format/manifest.md");
    let mut blocks = hex_blocks(manifest_doc);
    out.push(seed("manifest", "doc-manifest", blocks.remove(0)));
    out.push(seed("current", "doc-current", blocks.remove(0)));
    backup_seeds(out);
}

/// The backup format doc's examples, and a larger metadata file and pages file.
fn backup_seeds(out: &mut Vec<Seed>) {
    use crate::backup::meta::{BackupFile, BackupMeta, Tier};
    let doc = include_str!("../../../../docs/format/backup.md");
    let text = doc
        .split("```text\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .unwrap_or_default();
    out.push(seed("backup_meta", "doc-meta", text.as_bytes().to_vec()));
    let files = (0..6u64)
        .map(|i| BackupFile {
            tier: if i % 2 == 0 { Tier::Slow } else { Tier::Fast },
            name: layout::table_name(FileNum(10 + i)),
            stored: format!(
                "shared/00000000000000ab-{}-{}",
                layout::table_name(FileNum(10 + i)),
                100 * i
            ),
            size: 100 * i,
            crc: 0x0102_0304 * i as u32,
        })
        .collect();
    let meta = BackupMeta {
        id: 12,
        created_ms: 1_700_000_000_123,
        sequence: 999,
        manifest: 41,
        files,
    };
    out.push(seed("backup_meta", "six-files", meta.encode()));
    out.push(seed(
        "container_pages",
        "doc-pages",
        hex_blocks(doc).remove(0),
    ));
    let region = crate::tier::SimulatedRegion::new(64 * 64);
    for p in 0..64usize {
        let _ = crate::tier::Region::write(&region, p * 64, &[p as u8; 64]);
    }
    let fs = crate::tier::MemFs::new();
    let path = Path::new("/b/CONTAINER.pages");
    let _ = crate::tier::FileSystem::create_dir_all(&fs, Path::new("/b"));
    if crate::backup::pages::write(&fs, path, &region, 64, vec![0, 1, 2, 7, 8, 40, 63]).is_ok()
        && let Ok(bytes) = crate::tier::FileSystem::read_all(&fs, path)
    {
        out.push(seed("container_pages", "seven-pages", bytes));
    }
}

type Spec<'a> = (&'a [u8], u64, Option<&'a [u8]>);

/// The logical bytes of a row holding `entries` (user key, sequence number, value or
/// tombstone), written with a bloom filter over a page pool.
fn row_bytes(row: u64, prev: Option<&RowReader>, entries: &[Spec<'_>]) -> Vec<u8> {
    let (region, pages, bytes) = write_test_row(row, prev, entries);
    read_logical(region.as_ref(), 256, &pages, bytes)
}

fn write_test_row(
    row: u64,
    prev: Option<&RowReader>,
    entries: &[Spec<'_>],
) -> (Arc<SimulatedRegion>, PageList, u64) {
    let mut sorted: Vec<(InternalKey, Vec<u8>)> = entries
        .iter()
        .map(|&(k, s, v)| {
            let kind = if v.is_some() {
                ValueKind::Value
            } else {
                ValueKind::Deletion
            };
            (
                InternalKey::new(k, SeqNo(s), kind),
                v.unwrap_or_default().to_vec(),
            )
        })
        .collect();
    sorted.sort();
    let it = || sorted.iter().map(|(k, v)| (k.as_bytes(), v.as_slice()));
    let layout = RowLayout::measure(it(), 10);
    let region = Arc::new(SimulatedRegion::new(1 << 20));
    let mut pool = PagePool::new(4096, 256);
    let pages = PageList::new(
        pool.allocate(layout.pages_needed(256))
            .expect("pool has room"),
    );
    let summary = write_row(
        region.as_ref(),
        256,
        &pages,
        row,
        prev,
        it(),
        &layout,
        Path::new("/fast/CONTAINER"),
    )
    .expect("write_row");
    (region, pages, summary.bytes)
}

/// The logical bytes `[0, len)` of a row stored over `pages` (freed pages read as zeros).
fn read_logical(region: &dyn Region, page_bytes: usize, pages: &PageList, len: u64) -> Vec<u8> {
    let mut out = vec![0u8; len as usize];
    for (i, chunk) in out.chunks_mut(page_bytes).enumerate() {
        if let Some(p) = pages.physical(i) {
            region
                .read(p as usize * page_bytes, chunk)
                .expect("read page");
        }
    }
    out
}

fn builder_seeds(out: &mut Vec<Seed>) {
    // SSTables with each codec, without a filter, with one entry per restart point.
    let variants = [
        ("lz4", Compression::Lz4, 10, 16, 256),
        ("zstd", Compression::Zstd, 10, 16, 256),
        ("nofilter-restart1", Compression::None, 0, 1, 128),
    ];
    for (name, compression, bloom, restart, block) in variants {
        if !compression.is_supported() {
            continue;
        }
        let fs = MemFs::new();
        let path = Path::new("/slow/000001.sst");
        fs.create_dir_all(Path::new("/slow")).expect("dir");
        let opts = TableOptions {
            block_bytes: block,
            restart_interval: restart,
            bloom_bits_per_key: bloom,
            compression,
        };
        let mut b =
            Builder::new(fs.create(path).expect("create"), path.into(), &opts).expect("builder");
        for i in 0..60u64 {
            let kind = if i % 7 == 3 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let k = InternalKey::new(format!("key{:04}", i / 2).as_bytes(), SeqNo(100 - i), kind);
            let v = match kind {
                ValueKind::Deletion => Vec::new(),
                _ => format!("value {i} {}", "abc".repeat(i as usize % 9)).into_bytes(),
            };
            b.add(k.as_bytes(), &v).expect("add");
        }
        b.finish().expect("finish");
        out.push(seed("sst", name, fs.read_all(path).expect("read")));
    }

    // A chain of two rows with many entries over several pages, overlapping keys.
    let keys: Vec<String> = (0..40).map(|i| format!("user{:03}", i * 3)).collect();
    let older: Vec<Spec<'_>> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| (k.as_bytes(), i as u64 + 1, Some(&b"older value"[..])))
        .collect();
    let (region, pages, bytes) = write_test_row(7, None, &older);
    let prev = RowReader::open(region.clone(), 256, Arc::new(pages.clone()), 7, "/f".into())
        .expect("open row 7");
    let newer_keys: Vec<String> = (0..30).map(|i| format!("user{:03}", i * 4 + 1)).collect();
    let newer: Vec<Spec<'_>> = newer_keys
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let v = (i % 4 != 0).then_some(&b"a newer value, longer than the others"[..]);
            (k.as_bytes(), 100 + i as u64, v)
        })
        .collect();
    let newer_bytes = row_bytes(8, Some(&prev), &newer);
    let older_bytes = read_logical(region.as_ref(), 256, &pages, bytes);
    out.push(seed(
        "row_table",
        "chain",
        [newer_bytes, older_bytes].concat(),
    ));

    // A blob file with an empty key, an empty value and a larger value.
    let fs = MemFs::new();
    let path = Path::new("/slow/000012.blob");
    fs.create_dir_all(Path::new("/slow")).expect("dir");
    let mut w = BlobWriter::new(FileNum(12), fs.create(path).expect("create")).expect("w");
    w.add(b"", b"empty key").expect("add");
    w.add(b"k", b"").expect("add");
    w.add(b"large", &[7u8; 300]).expect("add");
    w.finish().expect("finish");
    out.push(seed(
        "blob_file",
        "builder",
        fs.read_all(path).expect("read"),
    ));

    // Batches through the API: empty, a put with empty key and value, long keys.
    let mut b = WriteBatch::new();
    b.set_sequence(SeqNo(1));
    out.push(seed("write_batch", "empty", b.data().to_vec()));
    b.put(b"", b"");
    b.delete(b"gone");
    b.put([0xffu8; 200], [1u8; 300]);
    b.set_sequence(SeqNo(SeqNo::MAX.0 - 2));
    out.push(seed("write_batch", "edges", b.data().to_vec()));
    // A logged blob pointer (`Options::separate_at_write`), empty and real-sized.
    let mut b = WriteBatch::new();
    b.set_sequence(SeqNo(12));
    b.put_blob_index_in(0, b"", b"");
    b.put_blob_index_in(3, b"key", &[0x09, 0x18, 0x0e]);
    b.delete(b"");
    out.push(seed("write_batch", "blob-index", b.data().to_vec()));
    out.push(seed(
        "current",
        "current-7-digits",
        b"MANIFEST-1234567\n".to_vec(),
    ));
}

/// Opens a small database on simulated tiers, writes, flushes and compacts enough to create
/// every kind of file, closes it and returns its files as seeds.
fn db_seeds(out: &mut Vec<Seed>, label: &str, layout: L0Layout, compression: Compression) {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = Options::new("/db");
    o.write_buffer_bytes = 64 << 10;
    o.container_bytes = 256 << 10;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(128 << 10);
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.l0_compaction_trigger = 2;
    o.table.block_bytes = 1024;
    o.table.compression = compression;
    o.l0_layout = layout;
    o.min_blob_bytes = Some(200);
    // Every separable value at write (the default logs those below 2 KiB in the WAL): the
    // seeds hold logged blob pointers.
    o.separate_at_write_min_bytes = None;
    o.blob_file_bytes = 16 << 10;
    o.tiers = Some(Tiers {
        slow_fs: Arc::new(fs.clone()),
        fast_fs: Arc::new(fs.clone()),
        fast: Arc::new(fast.clone()),
    });
    let db = Db::open(o.clone()).expect("open");
    // Keyspaces: WAL records with keyspace ids, tables mixing codecs per block, manifest
    // keyspace records (one dropped: its range deletion too).
    let seeded = db
        .create_keyspace(
            "seeded",
            crate::KeyspaceOptions {
                compression: Some(Compression::Lz4),
                ..crate::KeyspaceOptions::default()
            },
        )
        .expect("create keyspace");
    let gone = db
        .create_keyspace("gone", crate::KeyspaceOptions::default())
        .expect("create keyspace");
    gone.put("k", "v").expect("put");
    db.drop_keyspace("gone").expect("drop keyspace");
    for round in 0..24u32 {
        let mut batch = WriteBatch::new();
        for i in 0..200u32 {
            let k = format!("key{:05}", (i * 37 + round * 11) % 900);
            match (i + round) % 5 {
                0 => batch.delete(k.as_bytes()),
                1 => batch.put(k.as_bytes(), vec![b'a' + (round % 26) as u8; 400]),
                _ => batch.put(k.as_bytes(), format!("v{round}-{i}").as_bytes()),
            }
            if i % 7 == 0 {
                batch.put_cf(&seeded, k.as_bytes(), "abc".repeat(40));
            }
            if i % 40 == 39 {
                db.write(std::mem::take(&mut batch)).expect("write");
            }
        }
        db.flush().expect("flush");
    }
    db.wait_for_compactions().expect("compactions");
    // Two more rows (the second indexes the first), left in the container.
    for round in 0..2u32 {
        for i in 0..150u32 {
            let k = format!("key{:05}", (i * 53 + round * 7) % 900);
            db.put(k.as_bytes(), format!("late{round}-{i}").as_bytes())
                .expect("put");
        }
        db.flush().expect("flush");
    }
    // Records left in the WAL at close.
    for i in 0..20u32 {
        let sync = WriteOptions { sync: i % 2 == 0 };
        db.put_opt(format!("tail{i:03}"), format!("t{i}"), &sync)
            .expect("put");
    }
    db.delete(b"key00001").expect("delete");
    db.close().expect("close");

    let slow = Path::new("/db/slow");
    // The newest few of each kind keep the corpus small.
    let newest = |mut names: Vec<String>, n: usize| {
        names.sort();
        names.split_off(names.len().saturating_sub(n))
    };
    for name in newest(fs.list(slow).expect("list"), 12) {
        let bytes = fs.read_all(&slow.join(&name)).expect("read");
        let target = match layout::parse(&name) {
            Some(FileKind::Table(_)) => "sst",
            Some(FileKind::Blob(_)) => "blob_file",
            Some(FileKind::Manifest(_)) => "manifest",
            Some(FileKind::Current) => "current",
            _ => continue,
        };
        out.push(seed(target, format!("{label}-{name}"), bytes));
    }
    for name in fs.list(Path::new("/db/fast")).expect("list") {
        if let Some(FileKind::Table(_)) = layout::parse(&name) {
            let bytes = fs
                .read_all(&Path::new("/db/fast").join(&name))
                .expect("read");
            out.push(seed("sst", format!("{label}-l0-{name}"), bytes));
        }
    }
    let wals: Vec<String> = fast
        .list()
        .expect("list")
        .into_iter()
        .filter(|n| matches!(layout::parse(n), Some(FileKind::Wal(_))))
        .collect();
    for name in newest(wals, 3) {
        let region = fast.region(&name).expect("region");
        let mut segment = vec![0u8; region.len()];
        region.read(0, &mut segment).expect("read");
        for (i, p) in wal_payloads(&segment).into_iter().take(4).enumerate() {
            out.push(seed("write_batch", format!("{label}-{name}-{i}"), p));
        }
        out.push(seed(
            "wal_segment",
            format!("{label}-{name}"),
            trimmed_wal(&segment),
        ));
    }
    if layout == L0Layout::Matrix {
        let vs = manifest::recover(&fs, slow).expect("recover");
        let v = vs.current();
        let container = fast.region(layout::CONTAINER).expect("container");
        let rows: Vec<&Arc<RowMeta>> = v.container().rows_newest_first().collect();
        let logical =
            |m: &RowMeta| read_logical(container.as_ref(), o.page_bytes, &m.pages, m.bytes);
        // A row that column compaction has partly drained has freed pages, which newer rows
        // may have overwritten: whether one exists at close depends on the background
        // threads' timing, so only intact rows become seeds.
        let intact = |m: &RowMeta| m.pages.live_count() == m.pages.len();
        for m in rows.iter().filter(|m| intact(m)) {
            let mut bytes = logical(m);
            if let Some(prev) = rows.iter().find(|p| p.row == m.prev_row && intact(p)) {
                bytes.extend(logical(prev));
            }
            out.push(seed("row_table", format!("{label}-row-{}", m.row), bytes));
        }
    }
}

fn all_seeds() -> Vec<Seed> {
    let mut out = Vec::new();
    doc_seeds(&mut out);
    builder_seeds(&mut out);
    db_seeds(&mut out, "matrix", L0Layout::Matrix, Compression::Lz4);
    let zstd = if Compression::Zstd.is_supported() {
        Compression::Zstd
    } else {
        Compression::None
    };
    db_seeds(&mut out, "tables", L0Layout::Tables, zstd);
    dump_seeds(&mut out);
    // libFuzzer would cut longer files at -max_len; leave them out instead.
    out.retain(|s| {
        TARGETS
            .iter()
            .any(|&(t, max_len)| t == s.target && s.bytes.len() <= max_len)
    });
    out
}

/// The damaged inputs the CLI's dump tests feed `matrixkv dump` (crates/matrixkv-cli/tests/
/// cli.rs, `dump_tools_name_the_file_and_offset_of_damage`), made from the first seed of each
/// reader: a table cut 10 bytes short, a blob file cut at 500 bytes, a WAL segment with a
/// flipped magic byte. The dumps read through these readers, so the targets cover them.
fn dump_seeds(out: &mut Vec<Seed>) {
    let first = |target: &str| {
        out.iter()
            .find(|s| s.target == target && s.bytes.len() > 600)
            .map(|s| s.bytes.clone())
    };
    let mut add = Vec::new();
    if let Some(mut b) = first("sst") {
        b.truncate(b.len() - 10);
        add.push(seed("sst", "dump-cut-10-bytes-short", b));
    }
    if let Some(mut b) = first("blob_file") {
        b.truncate(500);
        add.push(seed("blob_file", "dump-cut-at-500", b));
    }
    if let Some(mut b) = first("wal_segment") {
        if let Some(x) = b.first_mut() {
            *x ^= 0xff;
        }
        add.push(seed("wal_segment", "dump-bad-magic", b));
    }
    out.extend(add);
}

/// Runs a target's own check on a seed: true if the reader accepted it in full.
fn accepted(target: &str, bytes: &[u8]) -> bool {
    match target {
        "wal_segment" => check_wal(bytes),
        "write_batch" => check_batch(bytes),
        "sst" => check_sst(bytes),
        "row_table" => check_rows(bytes),
        "manifest" => check_manifest(bytes),
        "current" => check_current(bytes),
        "blob_file" => check_blob(bytes),
        "backup_meta" => check_backup_meta(bytes),
        "container_pages" => check_container_pages(bytes),
        other => panic!("no target {other}"),
    }
}

#[test]
fn every_seed_is_accepted_in_full_by_its_target() {
    let seeds = all_seeds();
    for (target, _) in TARGETS {
        let mine: Vec<&Seed> = seeds.iter().filter(|s| s.target == *target).collect();
        assert!(mine.len() >= 2, "{target}: only {} seeds", mine.len());
        for s in mine {
            // The dump tools' damaged inputs are rejected, the others read in full.
            let damaged = s.name.starts_with("dump-");
            assert_eq!(accepted(target, &s.bytes), !damaged, "{target}/{}", s.name);
            assert!(run(target, &s.bytes));
        }
    }
}

#[test]
fn truncated_and_flipped_seeds_are_rejected_without_panicking() {
    // A quick stand-in for the fuzzer in every test run: truncations at a few points and about
    // 24 flipped bits spread over each seed, through the whole entry point.
    for s in all_seeds() {
        let len = s.bytes.len();
        for cut in [0, 1, len / 3, len / 2, len.saturating_sub(1)] {
            run(s.target, &s.bytes[..cut]);
        }
        for at in (0..len).step_by(7.max(len / 24)) {
            let mut b = s.bytes.clone();
            b[at] ^= 0x10;
            run(s.target, &b);
        }
    }
}

/// Writes the seed corpus into `fuzz/seeds/<target>/` (replacing what is there). Run by
/// `scripts/fuzz --write-seeds`.
#[test]
#[ignore = "writes files into the source tree; run by scripts/fuzz --write-seeds"]
fn write_seed_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/seeds");
    for (target, _) in TARGETS {
        let dir = root.join(target);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create seed dir");
    }
    for s in all_seeds() {
        std::fs::write(root.join(s.target).join(&s.name), &s.bytes).expect("write seed");
    }
}
