//! `Db::delete_range` through the whole engine: memtables, container rows or L0 tables,
//! levels, snapshots, iterators in both directions, merges, reopen, crash images, compaction
//! dropping covered data, tombstone GC and files dropped without a rewrite, and a dense random
//! test against a model (rerun one seed with `MATRIXKV_RANGE_SEED=<seed>`).

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::small_options;
use matrixkv::{Db, Error, L0Layout, Options, U64AddOperator, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn options(path: &std::path::Path, layout: L0Layout) -> Options {
    let mut o = small_options(path);
    o.l0_layout = layout;
    o
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::scan_forward(db.iter().expect("iter"))
}

fn scan_reverse(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::scan_backward(db.iter().expect("iter"))
}

/// Every read path agrees with `model`: gets, multi_get, both scan directions, and seeks
/// around the deleted ranges.
fn check(db: &Db, model: &Model, probes: &[Vec<u8>]) {
    let expect: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scan(db), expect, "forward scan");
    assert_eq!(scan_reverse(db), expect, "reverse scan");
    for p in probes {
        assert_eq!(db.get(p).expect("get"), model.get(p).cloned(), "get {p:?}");
    }
    let got = db.multi_get(probes);
    for (p, r) in probes.iter().zip(got) {
        assert_eq!(
            r.expect("multi_get"),
            model.get(p).cloned(),
            "multi_get {p:?}"
        );
    }
    let mut it = db.iter().expect("iter");
    for p in probes {
        it.seek(p).expect("seek");
        let want = model.range(p.clone()..).next();
        assert_eq!(
            it.valid().then(|| (it.key().to_vec(), it.value().to_vec())),
            want.map(|(k, v)| (k.clone(), v.clone())),
            "seek {p:?}"
        );
        // next then prev comes back to the same key (direction switches over deleted ranges).
        if it.valid() {
            let here = it.key().to_vec();
            it.next().expect("next");
            let after = model.range(here.clone()..).nth(1).map(|(k, _)| k.clone());
            assert_eq!(
                it.valid().then(|| it.key().to_vec()),
                after,
                "next after {p:?}"
            );
            if it.valid() {
                it.prev().expect("prev");
                assert_eq!(it.key(), here.as_slice(), "prev back to {p:?}");
            }
        }
        it.seek_for_prev(p).expect("seek_for_prev");
        let want = model.range(..=p.clone()).next_back();
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            want.map(|(k, _)| k.clone()),
            "seek_for_prev {p:?}"
        );
        if it.valid() {
            let here = it.key().to_vec();
            it.prev().expect("prev");
            let before = model
                .range(..here.clone())
                .next_back()
                .map(|(k, _)| k.clone());
            assert_eq!(
                it.valid().then(|| it.key().to_vec()),
                before,
                "prev before {p:?}"
            );
            if it.valid() {
                it.next().expect("next");
                assert_eq!(it.key(), here.as_slice(), "next back to {p:?}");
            }
        }
    }
}

fn model_delete_range(model: &mut Model, start: &[u8], end: &[u8]) {
    let doomed: Vec<Vec<u8>> = model
        .range(start.to_vec()..end.to_vec())
        .map(|(k, _)| k.clone())
        .collect();
    for k in doomed {
        model.remove(&k);
    }
}

fn probes(n: u32) -> Vec<Vec<u8>> {
    (0..n)
        .step_by(7)
        .map(key)
        .chain([b"".to_vec(), b"zzz".to_vec()])
        .collect()
}

/// Writes `n` keys, then deletes ranges while the data is in the memtable, after a flush
/// (rows or L0 tables) and after compaction into the levels, checking every read path each
/// time; then reopens.
fn ranges_hide_keys_in_every_layer(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = options(dir.path(), layout);
    let db = Db::open(opts.clone()).expect("open");
    let n = 600;
    let mut model = Model::new();
    let value = |i: u32, round: u32| format!("v{round}-{i}").into_bytes();
    for i in 0..n {
        db.put(key(i), value(i, 0)).expect("put");
        model.insert(key(i), value(i, 0));
    }
    // In the memtable (together with the data).
    db.delete_range(key(10), key(20)).expect("delete_range");
    model_delete_range(&mut model, &key(10), &key(20));
    check(&db, &model, &probes(n));
    // Moved into the version by a flush.
    db.flush().expect("flush");
    check(&db, &model, &probes(n));
    // Over flushed data, then flushed itself.
    db.delete_range(key(100), key(150)).expect("delete_range");
    model_delete_range(&mut model, &key(100), &key(150));
    check(&db, &model, &probes(n));
    db.flush().expect("flush");
    check(&db, &model, &probes(n));
    // Rewritten keys inside a deleted range are visible again.
    for i in 105..110 {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    db.delete_range(key(300), key(400)).expect("delete_range");
    model_delete_range(&mut model, &key(300), &key(400));
    check(&db, &model, &probes(n));
    db.compact_range(None, None).expect("compact");
    check(&db, &model, &probes(n));
    // Overlapping ranges and one reaching past the last key.
    db.delete_range(key(390), key(420)).expect("delete_range");
    db.delete_range(key(590), b"zzzz").expect("delete_range");
    model_delete_range(&mut model, &key(390), &key(420));
    model_delete_range(&mut model, &key(590), b"zzzz");
    check(&db, &model, &probes(n));
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    check(&db, &model, &probes(n));
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    check(&db, &model, &probes(n));
    db.close().expect("close");
}

#[test]
fn ranges_hide_keys_in_every_layer_matrix() {
    ranges_hide_keys_in_every_layer(L0Layout::Matrix);
}

#[test]
fn ranges_hide_keys_in_every_layer_tables() {
    ranges_hide_keys_in_every_layer(L0Layout::Tables);
}

#[test]
fn snapshots_before_the_delete_still_see_the_keys() {
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(options(dir.path(), layout)).expect("open");
        for i in 0..100 {
            db.put(key(i), b"old").expect("put");
        }
        let before = db.snapshot();
        db.delete_range(key(20), key(80)).expect("delete_range");
        let after = db.snapshot();
        db.put(key(50), b"new").expect("put");
        for round in 0..3 {
            assert_eq!(
                before.get(key(30)).expect("get"),
                Some(b"old".to_vec()),
                "{round}"
            );
            assert_eq!(before.iter().expect("iter").count(), 100, "{round}");
            assert_eq!(after.get(key(30)).expect("get"), None, "{round}");
            assert_eq!(after.get(key(50)).expect("get"), None, "{round}");
            assert_eq!(after.iter().expect("iter").count(), 40, "{round}");
            assert_eq!(
                db.get(key(50)).expect("get"),
                Some(b"new".to_vec()),
                "{round}"
            );
            assert_eq!(db.get(key(51)).expect("get"), None, "{round}");
            assert_eq!(db.iter().expect("iter").count(), 41, "{round}");
            // The snapshots hold the covered data through flushes and compactions.
            match round {
                0 => db.flush().expect("flush"),
                _ => db.compact_range(None, None).expect("compact"),
            }
        }
    }
}

#[test]
fn inverted_or_empty_range_is_invalid_argument() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(Options::new(dir.path())).expect("open");
    db.put(b"b", b"v").expect("put");
    for (s, e) in [(&b"c"[..], &b"a"[..]), (b"b", b"b")] {
        match db.delete_range(s, e) {
            Err(Error::InvalidArgument(_)) => {}
            other => panic!("delete_range({s:?}, {e:?}) gave {other:?}"),
        }
    }
    let mut batch = WriteBatch::new();
    batch.put(b"x", b"y");
    batch.delete_range(b"z", b"a");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(
        db.get(b"x").expect("get"),
        None,
        "the whole batch is refused"
    );
    assert_eq!(db.get(b"b").expect("get"), Some(b"v".to_vec()));
}

#[test]
fn merge_operands_under_a_range_delete() {
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = options(dir.path(), layout);
        opts.merge_operator = Some(Arc::new(U64AddOperator));
        let db = Db::open(opts.clone()).expect("open");
        let one = 1u64.to_le_bytes();
        for _ in 0..3 {
            db.merge(b"c", one).expect("merge");
        }
        db.put(b"d", 10u64.to_le_bytes()).expect("put");
        db.merge(b"d", one).expect("merge");
        db.flush().expect("flush");
        db.delete_range(b"a", b"z").expect("delete_range");
        // Operands after the delete start from nothing.
        db.merge(b"c", one).expect("merge");
        db.merge(b"c", one).expect("merge");
        db.merge(b"d", one).expect("merge");
        let expect = |db: &Db| {
            assert_eq!(
                db.get(b"c").expect("get"),
                Some(2u64.to_le_bytes().to_vec())
            );
            assert_eq!(
                db.get(b"d").expect("get"),
                Some(1u64.to_le_bytes().to_vec())
            );
            let all = scan(db);
            assert_eq!(
                all,
                vec![
                    (b"c".to_vec(), 2u64.to_le_bytes().to_vec()),
                    (b"d".to_vec(), 1u64.to_le_bytes().to_vec())
                ]
            );
            assert_eq!(scan_reverse(db), all);
        };
        expect(&db);
        db.flush().expect("flush");
        expect(&db);
        db.compact_range(None, None).expect("compact");
        expect(&db);
        db.close().expect("close");
        let db = Db::open(opts).expect("reopen");
        expect(&db);
        db.close().expect("close");
    }
}

#[test]
fn reopen_replays_range_deletes_from_the_wal() {
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = options(dir.path(), layout);
        let db = Db::open(opts.clone()).expect("open");
        for i in 0..50 {
            db.put(key(i), b"v").expect("put");
        }
        db.flush().expect("flush");
        let mut batch = WriteBatch::new();
        batch.delete_range(key(10), key(40));
        batch.put(key(20), b"back");
        db.write(batch).expect("write");
        db.close().expect("close");
        let db = Db::open(opts.clone()).expect("reopen");
        assert_eq!(db.get(key(20)).expect("get"), Some(b"back".to_vec()));
        assert_eq!(db.get(key(21)).expect("get"), None);
        assert_eq!(scan(&db).len(), 50 - 30 + 1);
        // A flush of a memtable holding nothing but the range tombstone keeps it.
        db.delete_range(key(0), key(5)).expect("delete_range");
        db.flush().expect("flush");
        db.close().expect("close");
        let db = Db::open(opts).expect("reopen");
        assert_eq!(scan(&db).len(), 50 - 30 + 1 - 5);
        // New writes after the reopen get sequence numbers above the flushed tombstone.
        db.put(key(1), b"again").expect("put");
        assert_eq!(db.get(key(1)).expect("get"), Some(b"again".to_vec()));
        db.close().expect("close");
    }
}

fn property(db: &Db, name: &str) -> u64 {
    db.get_int_property(name).expect("property")
}

/// Waits (bounded) for background work to reach `done`.
fn eventually(db: &Db, what: &str, done: impl Fn(&Db) -> bool) {
    for _ in 0..500 {
        if done(db) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    panic!("{what}: not reached; stats:\n{}", db.stats());
}

#[test]
fn compact_range_leaves_no_covered_data_and_the_tombstone_is_collected() {
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(options(dir.path(), layout)).expect("open");
        let n = 3000;
        for i in 0..n {
            db.put(key(i), vec![b'v'; 100]).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        db.delete_range(key(500), key(2500)).expect("delete_range");
        db.flush().expect("flush");
        assert_eq!(property(&db, "matrixkv.num-range-deletes"), 1, "{layout:?}");
        let before = property(&db, "matrixkv.estimate-num-keys");
        db.compact_range(None, None).expect("compact");
        assert_eq!(scan(&db).len(), 1000, "{layout:?}");
        // The stored entries are the live keys only: covered ones were dropped or their
        // tables removed whole.
        let stats = db.stats();
        assert!(
            property(&db, "matrixkv.estimate-num-keys") <= 1000,
            "{layout:?}: {before} keys before, after: {stats}"
        );
        eventually(&db, "tombstone collected", |db| {
            property(db, "matrixkv.num-range-deletes") == 0
        });
        let stats = db.stats();
        assert!(stats.range_del_collected >= 1, "{stats}");
        assert_eq!(scan(&db).len(), 1000);
        assert_eq!(db.get(key(499)).expect("get"), Some(vec![b'v'; 100]));
        assert_eq!(db.get(key(500)).expect("get"), None);
        db.close().expect("close");
    }
}

#[test]
fn tables_inside_a_deleted_range_are_dropped_without_a_rewrite() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options(dir.path(), L0Layout::Tables);
    opts.compaction_enabled = true;
    let db = Db::open(opts).expect("open");
    let n = 4000;
    for i in 0..n {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let files_before: u64 = (1..7)
        .map(|l| property(&db, &format!("matrixkv.num-files-at-level{l}")))
        .sum();
    assert!(files_before >= 4, "several L1+ tables: {}", db.stats());
    let written_before = db.stats().compaction_output_bytes;
    db.delete_range(key(0), key(n)).expect("delete_range");
    db.flush().expect("flush");
    // The compaction thread drops every table (all are inside the range and older than the
    // tombstone), then collects the tombstone: nothing is rewritten.
    eventually(&db, "tables dropped", |db| {
        (1..7)
            .map(|l| property(db, &format!("matrixkv.num-files-at-level{l}")))
            .sum::<u64>()
            == 0
            && property(db, "matrixkv.num-range-deletes") == 0
    });
    let stats = db.stats();
    assert!(stats.range_del_dropped_files >= files_before, "{stats}");
    assert_eq!(
        stats.compaction_output_bytes, written_before,
        "no rewrite: {stats}"
    );
    assert!(scan(&db).is_empty());
    db.close().expect("close");
}

#[test]
fn a_snapshot_keeps_the_covered_data_and_the_tombstone_until_released() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(options(dir.path(), L0Layout::Tables)).expect("open");
    for i in 0..2000 {
        db.put(key(i), vec![b'v'; 100]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let snap = db.snapshot();
    db.delete_range(key(0), key(2000)).expect("delete_range");
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(snap.iter().expect("iter").count(), 2000);
    assert_eq!(snap.get(key(7)).expect("get"), Some(vec![b'v'; 100]));
    assert_eq!(property(&db, "matrixkv.num-range-deletes"), 1);
    assert!(scan(&db).is_empty());
    drop(snap);
    db.compact_range(None, None).expect("compact");
    eventually(&db, "tombstone collected", |db| {
        property(db, "matrixkv.num-range-deletes") == 0
    });
    assert!(scan(&db).is_empty());
    db.close().expect("close");
}

#[test]
fn range_deletes_survive_process_crashes_and_power_loss() {
    use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let mut o = options(std::path::Path::new("/db"), layout);
        o.fast_dir = "/db/fast".into();
        o.slow_dir = "/db/slow".into();
        let opts = common::on_simulated_tiers(o, &fs, &fast);
        let db = Db::open(opts.clone()).expect("open");
        let sync = matrixkv::WriteOptions { sync: true };
        let mut model = Model::new();
        for i in 0..800 {
            db.put(key(i), b"v").expect("put");
            model.insert(key(i), b"v".to_vec());
        }
        db.flush().expect("flush");
        // One flushed tombstone (in the manifest) and one only in the WAL, synced.
        db.delete_range(key(100), key(200)).expect("delete_range");
        db.flush().expect("flush");
        db.delete_range_opt(key(300), key(350), &sync)
            .expect("delete_range");
        model_delete_range(&mut model, &key(100), &key(200));
        model_delete_range(&mut model, &key(300), &key(350));
        let expect: Vec<(Vec<u8>, Vec<u8>)> =
            model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        for (mode, policy) in [
            (FsCrashMode::KeepAll, CrashPolicy::KeepAll),
            (FsCrashMode::DropUnsynced, CrashPolicy::DropUnpersisted),
            (FsCrashMode::DropUnsynced, CrashPolicy::Random { seed: 3 }),
        ] {
            let (cfs, cfast) = fs.crash_with(mode, 1, || fast.crash(policy));
            let mut o = opts.clone();
            o = common::on_simulated_tiers(o, &cfs, &cfast);
            let again = Db::open(o).expect("open after crash");
            assert_eq!(scan(&again), expect, "{layout:?} {mode:?} {policy:?}");
            again.compact_range(None, None).expect("compact");
            assert_eq!(
                scan(&again),
                expect,
                "{layout:?} {mode:?} {policy:?} compacted"
            );
            again.close().expect("close");
        }
        db.close().expect("close");
    }
}

#[test]
fn a_ttl_database_takes_range_deletes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options(dir.path(), L0Layout::Tables);
    opts.ttl = Some(std::time::Duration::from_secs(3600));
    let db = Db::open(opts.clone()).expect("open");
    for i in 0..100 {
        db.put(key(i), b"v").expect("put");
    }
    db.delete_range(key(10), key(90)).expect("delete_range");
    assert_eq!(scan(&db).len(), 20);
    assert_eq!(db.get(key(5)).expect("get"), Some(b"v".to_vec()));
    assert_eq!(db.get(key(50)).expect("get"), None);
    // A key written again under the range is read through the covered-key path, which strips
    // the write time like any read.
    db.put(key(60), b"again").expect("put");
    assert_eq!(db.get(key(60)).expect("get"), Some(b"again".to_vec()));
    db.delete(key(60)).expect("delete");
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    assert_eq!(scan(&db).len(), 20);
    db.compact_range(None, None).expect("compact");
    assert_eq!(scan(&db).len(), 20);
    db.close().expect("close");
}

#[test]
fn covered_blob_values_become_garbage() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options(dir.path(), L0Layout::Tables);
    opts.min_blob_bytes = Some(100);
    let db = Db::open(opts).expect("open");
    for i in 0..400 {
        db.put(key(i), vec![b'b'; 500]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    let before = db.stats();
    assert!(before.blob_files > 0, "values were separated: {before}");
    assert_eq!(before.blob_bytes.1, 0, "no garbage yet: {before}");
    db.delete_range(key(0), key(300)).expect("delete_range");
    db.compact_range(None, None).expect("compact");
    let after = db.stats();
    // The dropped pointers are garbage of their blob files (or took whole files away).
    assert!(
        after.blob_bytes.1 > 0 || after.blob_bytes.0 < before.blob_bytes.0,
        "before: {before}\nafter: {after}"
    );
    assert_eq!(scan(&db).len(), 100);
    assert_eq!(db.get(key(350)).expect("get"), Some(vec![b'b'; 500]));
    db.close().expect("close");
}

/// Dense random range deletes mixed with puts, deletes and merges, flushes, compactions,
/// snapshots and reopens, against a model (the model test writes range deletes sparsely; here
/// they overlap each other and the snapshots all the time).
fn random_range_deletes_match_the_model(layout: L0Layout, seed: u64) {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = options(dir.path(), layout);
    opts.merge_operator = Some(Arc::new(matrixkv::AppendOperator::new(",")));
    let mut db = Db::open(opts.clone()).expect("open");
    let mut model = Model::new();
    let mut snaps: Vec<(matrixkv::Snapshot, Model)> = Vec::new();
    let space = 300;
    let k = |rng: &mut StdRng| key(rng.gen_range(0..space));
    // Tombstones collected by every incarnation of the database.
    let mut collected = 0;
    for step in 0..2000 {
        let ctx = format!("{layout:?} seed {seed} step {step}");
        match rng.gen_range(0..100) {
            0..=44 => {
                let (key, v) = (k(&mut rng), format!("v{step}").into_bytes());
                db.put(&key, &v).expect("put");
                model.insert(key, v);
            }
            45..=49 => {
                let key = k(&mut rng);
                db.delete(&key).expect("delete");
                model.remove(&key);
            }
            50..=57 => {
                let key = k(&mut rng);
                let operand = format!("m{step}").into_bytes();
                db.merge(&key, &operand).expect("merge");
                match model.get_mut(&key) {
                    Some(v) => {
                        v.push(b',');
                        v.extend_from_slice(&operand);
                    }
                    None => {
                        model.insert(key, operand);
                    }
                }
            }
            58..=64 => {
                let lo = rng.gen_range(0..space);
                let hi = lo + rng.gen_range(1..40);
                db.delete_range(key(lo), key(hi)).expect("delete_range");
                model_delete_range(&mut model, &key(lo), &key(hi));
            }
            65..=74 => {
                let key = k(&mut rng);
                assert_eq!(
                    db.get(&key).expect("get"),
                    model.get(&key).cloned(),
                    "{ctx}: get"
                );
            }
            75..=78 => {
                if snaps.len() < 3 {
                    snaps.push((db.snapshot(), model.clone()));
                } else {
                    let i = rng.gen_range(0..snaps.len());
                    snaps.remove(i);
                }
            }
            79..=83 => {
                if let Some((snap, smodel)) = snaps.last() {
                    let key = k(&mut rng);
                    assert_eq!(
                        snap.get(&key).expect("get"),
                        smodel.get(&key).cloned(),
                        "{ctx}"
                    );
                    let got: Vec<(Vec<u8>, Vec<u8>)> = snap
                        .iter()
                        .expect("iter")
                        .collect::<matrixkv::Result<_>>()
                        .expect("scan");
                    let want: Vec<(Vec<u8>, Vec<u8>)> =
                        smodel.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                    assert!(got == want, "{ctx}: snapshot scan");
                }
            }
            84..=87 => db.flush().expect("flush"),
            88..=89 => db.compact_range(None, None).expect("compact"),
            90..=91 => {
                let (mut lo, mut hi) = (k(&mut rng), k(&mut rng));
                if lo > hi {
                    std::mem::swap(&mut lo, &mut hi);
                }
                db.compact_range(Some(&lo), Some(&hi))
                    .expect("compact range");
            }
            92..=95 => check(&db, &model, &[k(&mut rng), k(&mut rng), k(&mut rng)]),
            _ => {
                snaps.clear();
                collected += db.stats().range_del_collected;
                db.close().expect("close");
                db = Db::open(opts.clone()).expect("reopen");
            }
        }
    }
    check(&db, &model, &probes(space));
    snaps.clear();
    db.compact_range(None, None).expect("compact");
    check(&db, &model, &probes(space));
    collected += db.stats().range_del_collected;
    assert!(
        collected > 0,
        "{layout:?} seed {seed}: no tombstone was collected"
    );
    db.verify().expect("verify");
    db.close().expect("close");
}

/// The seeds of the random test: `default`, or the one in `MATRIXKV_RANGE_SEED` (a failure
/// prints its seed).
fn seeds(default: &[u64]) -> Vec<u64> {
    match std::env::var("MATRIXKV_RANGE_SEED") {
        Ok(s) => vec![s.parse().expect("MATRIXKV_RANGE_SEED must be a number")],
        Err(_) => default.to_vec(),
    }
}

#[test]
fn random_range_deletes_match_the_model_matrix() {
    for seed in seeds(&[1, 2]) {
        random_range_deletes_match_the_model(L0Layout::Matrix, seed);
    }
}

#[test]
fn random_range_deletes_match_the_model_tables() {
    for seed in seeds(&[3, 4]) {
        random_range_deletes_match_the_model(L0Layout::Tables, seed);
    }
}

fn covered_gets_are_decided_by_the_sources_sequence_numbers(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = options(dir.path(), layout);
    let db = Db::open(opts).expect("open");
    for i in 0..2000 {
        db.put(key(i), format!("old{i}")).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    // Wholly older sources: the covered keys read as deleted without an iterator.
    db.delete_range(key(100), key(900)).expect("delete_range");
    db.flush().expect("flush");
    let before = db.stats().covered_gets_by_source;
    for i in (100..900).step_by(7) {
        assert_eq!(db.get(key(i)).expect("get"), None, "key {i}");
    }
    let after = db.stats().covered_gets_by_source;
    assert!(after - before >= 100, "{before} -> {after}");
    // A key written again after the delete, in a source wholly newer than it.
    db.put(key(200), "new200").expect("put");
    db.flush().expect("flush");
    assert_eq!(
        db.get(key(200)).expect("get").as_deref(),
        Some(&b"new200"[..])
    );
    // One source straddling the tombstone (a put before it and one after, same memtable,
    // flushed together): the iterator decides, and the newest version wins.
    db.put(key(1500), "before").expect("put");
    db.delete_range(key(1400), key(1600)).expect("delete_range");
    assert_eq!(db.get(key(1500)).expect("get"), None);
    db.put(key(1501), "after").expect("put");
    db.flush().expect("flush");
    assert_eq!(db.get(key(1500)).expect("get"), None);
    assert_eq!(
        db.get(key(1501)).expect("get").as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(db.get(key(1599)).expect("get"), None);
    assert_eq!(
        db.get(key(1600)).expect("get").as_deref(),
        Some(&b"old1600"[..])
    );
    let mut model: Model = (0..2000)
        .map(|i| (key(i), format!("old{i}").into_bytes()))
        .collect();
    model_delete_range(&mut model, &key(100), &key(900));
    model.insert(key(200), b"new200".to_vec());
    model_delete_range(&mut model, &key(1400), &key(1600));
    model.insert(key(1501), b"after".to_vec());
    check(&db, &model, &probes(2000));
}

#[test]
fn covered_gets_are_decided_by_the_sources_sequence_numbers_matrix() {
    covered_gets_are_decided_by_the_sources_sequence_numbers(L0Layout::Matrix);
}

#[test]
fn covered_gets_are_decided_by_the_sources_sequence_numbers_tables() {
    covered_gets_are_decided_by_the_sources_sequence_numbers(L0Layout::Tables);
}
