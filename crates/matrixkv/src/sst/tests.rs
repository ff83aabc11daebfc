//! Table-level tests: round trips against a `BTreeMap` model, iteration and seeks, every
//! compression, the bloom filter, the block cache, bad input of every kind, and the golden
//! bytes of docs/format/sst.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::block::{Block, BlockIter};
use super::format::{BLOCK_TRAILER_LEN, BlockHandle, FOOTER_LEN, Footer};
use super::*;
use crate::cache::BlockCache;
use crate::checksum;
use crate::coding::put_varint64;
use crate::error::{CorruptionReason, Error};
use crate::iter::InternalIterator;
use crate::key::{InternalKey, SeqNo, ValueKind, make_internal_key, seek_key};
use crate::tier::{FileSystem, StdFs};

type Model = BTreeMap<InternalKey, Vec<u8>>;

fn build(path: &Path, entries: &Model, opts: &TableOptions) -> TableSummary {
    let file = StdFs.create(path).unwrap();
    let mut b = Builder::new(file, path.to_path_buf(), opts).unwrap();
    for (k, v) in entries {
        b.add(k.as_bytes(), v).unwrap();
    }
    b.finish().unwrap()
}

fn open(path: &Path, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
    Table::open(StdFs.open(path).unwrap(), 1, cache)
}

/// Random entries: `n` internal keys over about `n / 3` user keys, each user key with one or
/// more versions at distinct sequence numbers, about 15% tombstones.
fn random_model(rng: &mut StdRng, n: usize, value_len: usize) -> Model {
    let mut m = Model::new();
    let users = (n / 3).max(1);
    let mut seq = 1u64;
    while m.len() < n {
        let u = format!("user{:07}", rng.gen_range(0..users) * 7);
        seq += rng.gen_range(1..4);
        let kind = if rng.gen_ratio(15, 100) {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let value = match kind {
            ValueKind::Deletion => Vec::new(),
            ValueKind::Value => {
                let len = rng.gen_range(0..=value_len);
                // Compressible but not constant.
                (0..len)
                    .map(|i| b"abcdxyz"[(i + seq as usize) % 7])
                    .collect()
            }
        };
        m.insert(InternalKey::new(u.as_bytes(), SeqNo(seq), kind), value);
    }
    m
}

/// The model's answer to `Table::get`.
fn model_get(m: &Model, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
    let from = InternalKey(seek_key(user_key, snapshot));
    let (k, v) = m.range(from..).next()?;
    let p = crate::key::parse_internal_key(k.as_bytes()).unwrap();
    (p.user_key == user_key).then(|| (p.kind, v.clone()))
}

fn scan_forward(t: &Arc<Table>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut it = t.iter();
    let mut out = Vec::new();
    it.seek_to_first()?;
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

fn model_pairs(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect()
}

fn codecs() -> Vec<Compression> {
    let mut v = vec![Compression::None, Compression::Lz4];
    if Compression::Zstd.is_supported() {
        v.push(Compression::Zstd);
    }
    v
}

fn check_gets(t: &Table, m: &Model, rng: &mut StdRng, max_seq: u64) {
    let users: Vec<Vec<u8>> = m.keys().map(|k| k.user_key().to_vec()).collect();
    for i in 0..3000 {
        let mut u = users[rng.gen_range(0..users.len())].clone();
        if i % 5 == 0 {
            u.push(b'!'); // absent key, between existing ones
        }
        for snap in [
            SeqNo(0),
            SeqNo(rng.gen_range(0..=max_seq)),
            SeqNo(max_seq),
            SeqNo::MAX,
        ] {
            assert_eq!(
                t.get(&u, snap).unwrap(),
                model_get(m, &u, snap),
                "key {:?} at {snap}",
                String::from_utf8_lossy(&u)
            );
        }
    }
}

#[test]
fn ten_thousand_versions_match_the_model_at_several_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000001.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0001);
    let m = random_model(&mut rng, 10_000, 40);
    let summary = build(&path, &m, &TableOptions::default());
    let t = open(&path, Some(Arc::new(BlockCache::new(1 << 20)))).unwrap();

    let max_seq = m
        .keys()
        .map(|k| crate::key::seq_of(k.as_bytes()).0)
        .max()
        .unwrap();
    assert_eq!(summary.entries, 10_000);
    assert_eq!(summary.smallest, m.keys().next().unwrap().0);
    assert_eq!(summary.largest, m.keys().next_back().unwrap().0);
    assert_eq!(summary.largest_seq, SeqNo(max_seq));
    assert_eq!(summary.size, t.size());
    let p = t.properties();
    assert_eq!(p.entries, 10_000);
    assert_eq!(
        p.deletions,
        m.keys()
            .filter(|k| k.as_bytes()[k.as_bytes().len() - 8] == 0)
            .count() as u64
    );
    assert!(p.data_blocks > 10);
    check_gets(&t, &m, &mut rng, max_seq);
    t.verify().unwrap();
}

#[test]
fn forward_and_reverse_iteration_match_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0002);
    let m = random_model(&mut rng, 5000, 60);
    build(&path, &m, &TableOptions::default());
    let t = open(&path, None).unwrap();
    let want = model_pairs(&m);
    assert_eq!(scan_forward(&t).unwrap(), want);

    let mut it = t.iter();
    it.seek_to_last().unwrap();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    back.reverse();
    assert_eq!(back, want);

    // Direction changes in the middle of the table.
    it.seek_to_first().unwrap();
    for (k, _) in &want[..want.len() - 1] {
        assert_eq!(it.key(), k);
        it.next().unwrap();
        it.prev().unwrap();
        assert_eq!(it.key(), k);
        it.next().unwrap();
    }
}

#[test]
fn seek_and_seek_for_prev_match_the_model_at_random_targets() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0003);
    let m = random_model(&mut rng, 4000, 30);
    let opts = TableOptions {
        block_bytes: 512,
        restart_interval: 4,
        ..TableOptions::default()
    };
    build(&path, &m, &opts);
    let t = open(&path, Some(Arc::new(BlockCache::new(64 << 10)))).unwrap();
    let keys: Vec<&InternalKey> = m.keys().collect();
    let mut it = t.iter();
    for i in 0..3000 {
        let base = keys[rng.gen_range(0..keys.len())].user_key().to_vec();
        let mut u = base.clone();
        match i % 4 {
            0 => u.push(0),
            1 => {
                u.pop();
            }
            _ => {}
        }
        let target = make_internal_key(&u, SeqNo(rng.gen_range(0..40_000)), ValueKind::Value);
        let ik = InternalKey(target.clone());

        it.seek(&target).unwrap();
        match m.range(ik.clone()..).next() {
            Some((k, v)) => {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (k.as_bytes(), &v[..]));
            }
            None => assert!(!it.valid()),
        }
        it.seek_for_prev(&target).unwrap();
        match m.range(..=ik).next_back() {
            Some((k, v)) => {
                assert!(it.valid());
                assert_eq!((it.key(), it.value()), (k.as_bytes(), &v[..]));
            }
            None => assert!(!it.valid()),
        }
    }
    // Exact hits on every stored key.
    for k in keys.iter().step_by(7) {
        it.seek_for_prev(k.as_bytes()).unwrap();
        assert_eq!(it.key(), k.as_bytes());
        it.seek(k.as_bytes()).unwrap();
        assert_eq!(it.key(), k.as_bytes());
    }
}

#[test]
fn every_compression_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(0x5eed_0004);
    let m = random_model(&mut rng, 2000, 200);
    let max_seq = m
        .keys()
        .map(|k| crate::key::seq_of(k.as_bytes()).0)
        .max()
        .unwrap();
    let mut sizes = Vec::new();
    for c in codecs() {
        let path = dir.path().join(format!("{c}.sst"));
        let opts = TableOptions {
            compression: c,
            ..TableOptions::default()
        };
        let s = build(&path, &m, &opts);
        let t = open(&path, Some(Arc::new(BlockCache::new(1 << 20)))).unwrap();
        assert_eq!(t.properties().compression, c);
        assert_eq!(scan_forward(&t).unwrap(), model_pairs(&m), "{c}");
        t.verify().unwrap();
        check_gets(&t, &m, &mut rng, max_seq);
        sizes.push(s.size);
    }
    assert!(
        sizes[1] < sizes[0],
        "lz4 should shrink compressible data: {sizes:?}"
    );
}

#[test]
fn values_larger_than_a_block_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for c in codecs() {
        let path = dir.path().join(format!("big-{c}.sst"));
        let mut m = Model::new();
        for (i, len) in [10usize, 100_000, 5, 1 << 20, 3000, 70_000]
            .iter()
            .enumerate()
        {
            let v: Vec<u8> = (0..*len).map(|j| (j % 251) as u8 ^ i as u8).collect();
            let k = InternalKey::new(
                format!("k{i}").as_bytes(),
                SeqNo(i as u64 + 1),
                ValueKind::Value,
            );
            m.insert(k, v);
        }
        let opts = TableOptions {
            compression: c,
            ..TableOptions::default()
        };
        build(&path, &m, &opts);
        let t = open(&path, None).unwrap();
        assert_eq!(scan_forward(&t).unwrap(), model_pairs(&m), "{c}");
        for (k, v) in &m {
            let got = t.get(k.user_key(), SeqNo::MAX).unwrap().unwrap();
            assert_eq!(got, (ValueKind::Value, v.clone()));
        }
    }
}

#[test]
fn bloom_filter_has_no_false_negatives_and_few_false_positives() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut m = Model::new();
    for i in 0..10_000u32 {
        m.insert(
            InternalKey::new(
                format!("present{i:06}").as_bytes(),
                SeqNo(1),
                ValueKind::Value,
            ),
            b"v".to_vec(),
        );
    }
    build(&path, &m, &TableOptions::default());
    let t = open(&path, None).unwrap();
    for k in m.keys() {
        assert!(t.may_contain(k.user_key()));
    }
    let fp = (0..10_000u32)
        .filter(|i| t.may_contain(format!("absent{i:06}").as_bytes()))
        .count();
    assert!(fp < 200, "false-positive rate {fp}/10000 is above 2%");

    // Without a filter every key may be present, and lookups still answer correctly.
    let path = dir.path().join("nofilter.sst");
    build(
        &path,
        &m,
        &TableOptions {
            bloom_bits_per_key: 0,
            ..TableOptions::default()
        },
    );
    let t = open(&path, None).unwrap();
    assert!(t.may_contain(b"absent000001"));
    assert_eq!(t.get(b"absent000001", SeqNo::MAX).unwrap(), None);
    assert_eq!(
        t.get(b"present000042", SeqNo::MAX).unwrap(),
        Some((ValueKind::Value, b"v".to_vec()))
    );
}

#[test]
fn repeated_reads_are_served_from_the_block_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0005);
    let m = random_model(&mut rng, 1000, 20);
    build(&path, &m, &TableOptions::default());
    let cache = Arc::new(BlockCache::new(1 << 20));
    let t = open(&path, Some(Arc::clone(&cache))).unwrap();
    scan_forward(&t).unwrap();
    let blocks = t.properties().data_blocks;
    assert_eq!(cache.misses(), blocks);
    assert!(cache.usage_bytes() > 0);
    scan_forward(&t).unwrap();
    assert_eq!(cache.misses(), blocks);
    assert_eq!(cache.hits(), blocks);
}

#[test]
fn empty_table_and_bad_options_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let b = Builder::new(
        StdFs.create(&path).unwrap(),
        path.clone(),
        &TableOptions::default(),
    );
    assert!(matches!(
        b.unwrap().finish(),
        Err(Error::InvalidArgument(_))
    ));
    for bad in [
        TableOptions {
            block_bytes: 0,
            ..TableOptions::default()
        },
        TableOptions {
            restart_interval: 0,
            ..TableOptions::default()
        },
        TableOptions {
            bloom_bits_per_key: 1000,
            ..TableOptions::default()
        },
    ] {
        assert!(matches!(bad.validate(), Err(Error::InvalidArgument(_))));
        let f = StdFs.create(&path).unwrap();
        assert!(matches!(
            Builder::new(f, path.clone(), &bad),
            Err(Error::InvalidArgument(_))
        ));
    }
    let zstd = TableOptions {
        compression: Compression::Zstd,
        ..TableOptions::default()
    };
    let f = StdFs.create(&path).unwrap();
    let r = Builder::new(f, path.clone(), &zstd);
    if cfg!(feature = "zstd") {
        assert!(r.is_ok());
    } else {
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
    }
}

#[test]
fn keys_that_are_not_internal_keys_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let f = StdFs.create(&path).unwrap();
    let mut b = Builder::new(f, path.clone(), &TableOptions::default()).unwrap();
    assert!(matches!(
        b.add(b"short", b"v"),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
#[cfg_attr(debug_assertions, should_panic(expected = "strictly increase"))]
fn out_of_order_keys_are_a_caller_bug() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let f = StdFs.create(&path).unwrap();
    let mut b = Builder::new(f, path.clone(), &TableOptions::default()).unwrap();
    b.add(&make_internal_key(b"b", SeqNo(1), ValueKind::Value), b"")
        .unwrap();
    let r = b.add(&make_internal_key(b"a", SeqNo(1), ValueKind::Value), b"");
    assert!(matches!(r, Err(Error::InvalidArgument(_))));
}

// ---------------------------------------------------------------------------------------
// Bad input.

/// `(start, end)` of every block with its trailer, and of the footer, of a valid table.
fn regions(bytes: &[u8]) -> Vec<(u64, u64)> {
    let size = bytes.len() as u64;
    let footer_at = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[footer_at..], footer_at as u64).unwrap();
    let span = |h: BlockHandle| (h.offset, h.end_with_trailer().unwrap());
    let mut out = vec![
        span(footer.properties),
        span(footer.index),
        (footer_at as u64, size),
    ];
    if footer.filter.size > 0 {
        out.push(span(footer.filter));
    }
    let ix = footer.index;
    let raw = bytes[ix.offset as usize..(ix.offset + ix.size) as usize].to_vec();
    let mut it = BlockIter::new(Arc::new(Block::new(raw).unwrap()));
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push(span(BlockHandle::decode_varint(it.value()).unwrap()));
        it.next().unwrap();
    }
    out.sort_unstable();
    out
}

fn corruption_site(e: &Error) -> (PathBuf, u64, CorruptionReason) {
    match e {
        Error::Corruption { site, reason } => (site.path.clone(), site.offset, reason.clone()),
        other => panic!("expected a corruption error, got {other}"),
    }
}

fn small_table(dir: &Path, opts: &TableOptions) -> (PathBuf, Model, Vec<u8>) {
    let path = dir.join("good.sst");
    let mut m = Model::new();
    for i in 0..40u32 {
        let kind = if i % 9 == 4 {
            ValueKind::Deletion
        } else {
            ValueKind::Value
        };
        let v = if kind == ValueKind::Value {
            format!("value-{i}-{}", "x".repeat(i as usize % 13)).into_bytes()
        } else {
            Vec::new()
        };
        m.insert(
            InternalKey::new(
                format!("key{i:03}").as_bytes(),
                SeqNo(u64::from(i) + 1),
                kind,
            ),
            v,
        );
    }
    build(&path, &m, opts);
    let bytes = std::fs::read(&path).unwrap();
    (path, m, bytes)
}

/// Overwrites one byte of a file in place.
fn poke(path: &Path, offset: usize, byte: u8) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&[byte], offset as u64).unwrap();
}

/// Restores one byte of a file when dropped.
struct Repair<'a>(&'a Path, usize, u8);

impl Drop for Repair<'_> {
    fn drop(&mut self) {
        poke(self.0, self.1, self.2);
    }
}

#[test]
fn a_flipped_byte_anywhere_is_reported_with_its_block_offset() {
    let dir = tempfile::tempdir().unwrap();
    for c in [Compression::None, Compression::Lz4] {
        let opts = TableOptions {
            block_bytes: 128,
            compression: c,
            ..TableOptions::default()
        };
        let (_, m, good) = small_table(dir.path(), &opts);
        let regions = regions(&good);
        // The regions tile the file exactly.
        assert_eq!(regions.first().unwrap().0, 0);
        assert!(regions.windows(2).all(|w| w[0].1 == w[1].0));
        assert_eq!(regions.last().unwrap().1, good.len() as u64);
        assert!(regions.len() >= 6, "several data blocks expected");

        let bad_path = dir.path().join("bad.sst");
        std::fs::write(&bad_path, &good).unwrap();
        // Every byte of the raw table; every third byte of the compressed one (the blocks
        // differ only in their bytes, not in how damage is found).
        let stride = if c == Compression::None { 1 } else { 2 };
        for i in (0..good.len()).step_by(stride) {
            // Damage one byte in place (rewriting the whole file each time is much slower),
            // and repair it before the next round.
            poke(&bad_path, i, good[i] ^ 0x20);
            let _repair = Repair(&bad_path, i, good[i]);
            let want = regions
                .iter()
                .find(|r| r.0 <= i as u64 && (i as u64) < r.1)
                .unwrap()
                .0;
            let t = match open(&bad_path, None) {
                Err(e) => {
                    let (p, off, _) = corruption_site(&e);
                    assert_eq!(
                        (p.as_path(), off),
                        (bad_path.as_path(), want),
                        "byte {i}: {e}"
                    );
                    continue;
                }
                Ok(t) => t,
            };
            // The damage is in a data block: a scan must report it, and point lookups give
            // either the right answer or the error, never a wrong value.
            let e = scan_forward(&t).unwrap_err();
            assert_eq!(corruption_site(&e).1, want, "byte {i}: {e}");
            for k in m.keys().step_by(3) {
                match t.get(k.user_key(), SeqNo::MAX) {
                    Ok(got) => assert_eq!(got, model_get(&m, k.user_key(), SeqNo::MAX)),
                    Err(e) => assert_eq!(corruption_site(&e).1, want, "byte {i}: {e}"),
                }
            }
        }
    }
}

#[test]
fn truncated_files_are_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, good) = small_table(dir.path(), &TableOptions::default());
    let bad_path = dir.path().join("bad.sst");
    for len in [0, 1, 19, 20, 67, 68, good.len() / 2, good.len() - 1] {
        std::fs::write(&bad_path, &good[..len]).unwrap();
        let e = open(&bad_path, None).unwrap_err();
        let (_, _, reason) = corruption_site(&e);
        if len < 20 {
            assert_eq!(reason, CorruptionReason::Truncated, "len {len}");
        } else {
            assert_eq!(reason, CorruptionReason::BadMagic, "len {len}");
        }
    }
}

#[test]
fn bad_magic_is_corruption_at_the_footer() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    let n = bytes.len();
    bytes[n - 1] ^= 0xff;
    let path = dir.path().join("bad.sst");
    std::fs::write(&path, &bytes).unwrap();
    let (_, off, reason) = corruption_site(&open(&path, None).unwrap_err());
    assert_eq!(
        (off, reason),
        ((n - FOOTER_LEN) as u64, CorruptionReason::BadMagic)
    );
}

#[test]
fn unknown_format_version_is_not_supported() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    let f = bytes.len() - FOOTER_LEN;
    bytes[f + 52..f + 56].copy_from_slice(&2u32.to_le_bytes());
    let crc = checksum::checksum(&bytes[f..f + 56]);
    bytes[f + 56..f + 60].copy_from_slice(&crc.to_le_bytes());
    let path = dir.path().join("v2.sst");
    std::fs::write(&path, &bytes).unwrap();
    match open(&path, None) {
        Err(Error::NotSupported { found_version, .. }) => assert_eq!(found_version, 2),
        other => panic!("expected NotSupported, got {other:?}"),
    }
}

/// Rewrites the first data block of an LZ4 table so it declares `declared` uncompressed
/// bytes (keeping its stored size and fixing its checksum), and returns the lookup error.
fn lookup_with_declared_length(declared: u64) -> Error {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        compression: Compression::Lz4,
        ..TableOptions::default()
    };
    let path = dir.path().join("t.sst");
    let mut m = Model::new();
    for i in 0..200u32 {
        m.insert(
            InternalKey::new(format!("key{i:05}").as_bytes(), SeqNo(1), ValueKind::Value),
            vec![b'z'; 64],
        );
    }
    build(&path, &m, &opts);
    let mut bytes = std::fs::read(&path).unwrap();
    let first = regions(&bytes)[0];
    let size = (first.1 - first.0) as usize - BLOCK_TRAILER_LEN;
    assert_eq!(
        bytes[size],
        format::BLOCK_TYPE_LZ4,
        "first block should be compressed"
    );
    let mut prefix = Vec::new();
    put_varint64(&mut prefix, declared);
    bytes[..prefix.len()].copy_from_slice(&prefix);
    let trailer = format::block_trailer(&bytes[..size], format::BLOCK_TYPE_LZ4);
    bytes[size..size + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
    std::fs::write(&path, &bytes).unwrap();
    let t = open(&path, None).unwrap();
    t.get(b"key00000", SeqNo::MAX).unwrap_err()
}

#[test]
fn compressed_block_declaring_a_terabyte_is_rejected_without_allocating() {
    let e = lookup_with_declared_length(1 << 40);
    assert_eq!(corruption_site(&e).1, 0);
    assert_eq!(corruption_site(&e).2, CorruptionReason::BadLength);
}

#[test]
fn compressed_block_declaring_the_wrong_length_is_rejected() {
    let e = lookup_with_declared_length(100);
    assert_eq!(corruption_site(&e).1, 0);
}

// ---------------------------------------------------------------------------------------
// Golden bytes.

/// Parses the first ```` ```hex ```` block of a markdown document: `#` starts a comment,
/// an `NNNN:` offset prefix is ignored, the rest are two-digit hex bytes.
fn hex_block(doc: &str) -> Vec<u8> {
    let start = doc.find("```hex\n").expect("doc has a hex block") + 7;
    let end = start + doc[start..].find("```").expect("hex block is closed");
    let mut out = Vec::new();
    for line in doc[start..end].lines() {
        let line = line.split('#').next().unwrap();
        let line = line.split_once(':').map_or(line, |(_, rest)| rest);
        for tok in line.split_whitespace() {
            out.push(u8::from_str_radix(tok, 16).expect("hex byte"));
        }
    }
    out
}

/// The tiny table of the worked example in docs/format/sst.md.
fn golden_entries() -> Model {
    let mut m = Model::new();
    m.insert(
        InternalKey::new(b"apple", SeqNo(3), ValueKind::Value),
        b"red".to_vec(),
    );
    m.insert(
        InternalKey::new(b"apricot", SeqNo(2), ValueKind::Value),
        b"orange".to_vec(),
    );
    m.insert(
        InternalKey::new(b"banana", SeqNo(1), ValueKind::Deletion),
        Vec::new(),
    );
    m
}

#[test]
fn golden_table_matches_the_format_doc() {
    let doc = include_str!("../../../../docs/format/sst.md");
    let want = hex_block(doc);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("golden.sst");
    build(&path, &golden_entries(), &TableOptions::default());
    let got = std::fs::read(&path).unwrap();
    assert_eq!(
        got,
        want,
        "docs/format/sst.md is out of date; the builder now writes:\n{}",
        got.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let t = open(&path, None).unwrap();
    assert_eq!(
        t.get(b"apple", SeqNo::MAX).unwrap(),
        Some((ValueKind::Value, b"red".to_vec()))
    );
    assert_eq!(
        t.get(b"banana", SeqNo::MAX).unwrap(),
        Some((ValueKind::Deletion, Vec::new()))
    );
}

/// Replaces the contents of the block at `region` (with trailer) by `rng` bytes and gives it
/// a valid trailer, so only the block parsers stand between the garbage and the reader.
fn plant_garbage(bytes: &mut [u8], region: (u64, u64), rng: &mut StdRng) {
    let start = region.0 as usize;
    let size = (region.1 - region.0) as usize - BLOCK_TRAILER_LEN;
    let keep_some = rng.gen_bool(0.5);
    for (i, b) in bytes[start..start + size].iter_mut().enumerate() {
        // Sometimes keep a valid-looking prefix so the damage sits deeper in the block.
        if !(keep_some && i < size / 2) || rng.gen_ratio(1, 8) {
            *b = rng.r#gen();
        }
    }
    let block_type = bytes[start + size];
    let trailer = format::block_trailer(&bytes[start..start + size], block_type);
    bytes[start + size..start + size + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
}

#[test]
fn garbage_blocks_with_valid_checksums_give_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let opts = TableOptions {
        block_bytes: 256,
        restart_interval: 3,
        ..TableOptions::default()
    };
    let (_, m, good) = small_table(dir.path(), &opts);
    let regions = regions(&good);
    let footer_at = (good.len() - FOOTER_LEN) as u64;
    let bad_path = dir.path().join("bad.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0006);
    let mut errors = 0;
    for round in 0..400 {
        let mut bad = good.clone();
        let blocks: Vec<_> = regions.iter().filter(|r| r.0 != footer_at).collect();
        plant_garbage(&mut bad, *blocks[round % blocks.len()], &mut rng);
        std::fs::write(&bad_path, &bad).unwrap();
        let t = match open(&bad_path, None) {
            Ok(t) => t,
            Err(e) => {
                corruption_site(&e);
                errors += 1;
                continue;
            }
        };
        match scan_forward(&t) {
            Ok(_) => {}
            Err(e) => {
                corruption_site(&e);
                errors += 1;
            }
        }
        if let Err(e) = t.verify() {
            corruption_site(&e);
        }
        let mut it = t.iter();
        if it.seek_to_last().is_ok() {
            for _ in 0..50 {
                if !it.valid() || it.prev().is_err() {
                    break;
                }
            }
        }
        for k in m.keys().step_by(5) {
            if let Err(e) = t.get(k.user_key(), SeqNo::MAX) {
                corruption_site(&e);
            }
            if let Err(e) = it.seek_for_prev(k.as_bytes()) {
                corruption_site(&e);
            }
        }
    }
    assert!(
        errors > 200,
        "most garbage should be detected, got {errors} errors"
    );
}

#[test]
fn concurrent_readers_share_one_table_and_cache() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(0x5eed_0007);
    let m = Arc::new(random_model(&mut rng, 3000, 30));
    build(&path, &m, &TableOptions::default());
    let cache = Arc::new(BlockCache::new(128 << 10));
    let t = open(&path, Some(Arc::clone(&cache))).unwrap();
    let threads: Vec<_> = (0..4u64)
        .map(|id| {
            let (t, m) = (Arc::clone(&t), Arc::clone(&m));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(id);
                let keys: Vec<&InternalKey> = m.keys().collect();
                for _ in 0..2000 {
                    let k = keys[rng.gen_range(0..keys.len())];
                    let snap = SeqNo(rng.gen_range(0..12_000));
                    assert_eq!(
                        t.get(k.user_key(), snap).unwrap(),
                        model_get(&m, k.user_key(), snap)
                    );
                }
                assert_eq!(scan_forward(&t).unwrap().len(), m.len());
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    assert!(cache.hits() > 0 && cache.misses() > 0);
    assert!(cache.usage_bytes() <= 128 << 10);
}

#[test]
fn verify_reports_properties_that_do_not_match_the_contents() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, mut bytes) = small_table(dir.path(), &TableOptions::default());
    open(&path, None).unwrap().verify().unwrap();
    // Rewrite the properties block to claim one more tombstone, with a valid checksum.
    let f = bytes.len() - FOOTER_LEN;
    let footer = Footer::decode(&bytes[f..], f as u64).unwrap();
    let h = footer.properties;
    let (start, end) = (h.offset as usize, (h.offset + h.size) as usize);
    let mut props = TableProperties::decode(&bytes[start..end]).unwrap();
    props.deletions += 1;
    let encoded = props.encode();
    assert_eq!(encoded.len(), end - start, "same-size rewrite");
    bytes[start..end].copy_from_slice(&encoded);
    let trailer = format::block_trailer(&bytes[start..end], format::BLOCK_TYPE_NONE);
    bytes[end..end + BLOCK_TRAILER_LEN].copy_from_slice(&trailer);
    let bad_path = dir.path().join("bad.sst");
    std::fs::write(&bad_path, &bytes).unwrap();
    let t = open(&bad_path, None).unwrap();
    let e = t.verify().unwrap_err();
    assert_eq!(corruption_site(&e).1, h.offset, "{e}");
}
