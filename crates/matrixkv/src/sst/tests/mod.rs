//! Table-level tests: round trips against a `BTreeMap` model, iteration and seeks, every
//! compression, the bloom filter, the block cache and concurrent readers. Bad input is in
//! `bad_input`, the golden bytes of docs/format/sst.md in `golden`.

mod bad_input;
mod golden;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::builder::TableSummary;
use super::*;
use crate::error::Error;
use crate::iter::InternalIterator;
use crate::key::{InternalKey, SeqNo, ValueKind, make_internal_key, seek_key};
use crate::sst::cache::BlockCache;
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

#[test]
fn recorded_keys_name_each_user_keys_newest_entry_and_the_block_an_index_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(11);
    let model = random_model(&mut rng, 3000, 300);
    let opts = TableOptions {
        block_bytes: 2048,
        ..TableOptions::default()
    };
    let file = StdFs.create(&path).unwrap();
    let mut b = Builder::new(file, path.clone(), &opts)
        .unwrap()
        .recording_keys();
    for (k, v) in &model {
        b.add(k.as_bytes(), v).unwrap();
    }
    let summary = b.finish().unwrap();
    let table = open(&path, None).unwrap();
    let number = crate::layout::FileNum(9);
    let recorded = crate::index::global::recorded_keys(number, summary.keys);
    let read_back = crate::index::global::table_keys(&table, number).unwrap();
    assert!(recorded.len() > 500, "{}", recorded.len());
    assert_eq!(recorded, read_back);
    // Without recording, the summary lists nothing.
    assert!(
        build(&dir.path().join("u.sst"), &model, &opts)
            .keys
            .is_empty()
    );
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
            ValueKind::Deletion | ValueKind::RangeDeletion => Vec::new(),
            ValueKind::Value | ValueKind::BlobIndex | ValueKind::Merge => {
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
fn an_iterator_names_the_table_and_block_of_its_entry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.sst");
    let mut rng = StdRng::seed_from_u64(5);
    let model = random_model(&mut rng, 600, 100);
    let opts = TableOptions {
        block_bytes: 1024,
        ..TableOptions::default()
    };
    build(&path, &model, &opts);
    let table = open(&path, None).unwrap();
    let mut it = table.iter();
    assert_eq!(it.site(), None, "not positioned");
    it.seek_to_first().unwrap();
    let first = it.site().unwrap();
    assert_eq!(first.path, path);
    assert_eq!(first.offset, 0, "the first data block starts the file");
    // Walk to the next block: its offset is the one the site names.
    let mut last = 0;
    while it.valid() {
        let site = it.site().unwrap();
        assert!(site.offset >= last, "{} after {last}", site.offset);
        last = site.offset;
        it.next().unwrap();
    }
    assert!(
        last > 0,
        "600 entries of 100 bytes span several 1 KiB blocks"
    );
    assert_eq!(it.site(), None, "past the end");
}
