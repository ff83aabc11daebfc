//! The SLM-DB design (`Design::SlmDb`) on real mapped files: every write goes to a persistent
//! memtable (no WAL), tables land in one level on the slow tier, the global index answers
//! point reads (and absent keys without a table read), selective compaction merges what its
//! triggers pick and the answers never change, merge operands survive compactions of
//! overlapping subsets, and the index is rolled back to the manifest after a crash.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{level_key as key, level_value as value};
use matrixkv::{AppendOperator, Db, Design, L0Layout, Options, SlmDbOptions};

fn knobs() -> SlmDbOptions {
    SlmDbOptions {
        persistent_memtable_bytes: 256 << 10,
        index_bytes: 8 << 20,
        live_key_ratio: 0.7,
        leaf_scan_tables: 2,
        leaf_scan_threshold: 3,
        candidate_trigger: 2,
        max_merge_tables: 3,
        scan_window: 30,
        scan_threshold: 8,
    }
}

fn options(dir: &std::path::Path) -> Options {
    let mut o = common::small_options(dir);
    o.l0_layout = L0Layout::Tables;
    o.design = Design::SlmDb(knobs());
    o.min_blob_bytes = None;
    o.merge_operator = Some(Arc::new(AppendOperator::new(b",")));
    o
}

fn assert_holds(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let got = common::scan_forward(db.iter().expect("iter"));
    if got != want {
        let bad = got
            .iter()
            .zip(&want)
            .position(|(g, w)| g != w)
            .unwrap_or(got.len().min(want.len()));
        let k = got
            .get(bad)
            .or(want.get(bad))
            .map(|(k, _)| k.clone())
            .unwrap_or_default();
        panic!(
            "{ctx}: scan differs at {bad} ({} entries, {} expected): {:?} against {:?}; versions: {}",
            got.len(),
            want.len(),
            got.get(bad)
                .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            want.get(bad)
                .map(|(k, v)| (String::from_utf8_lossy(k), String::from_utf8_lossy(v))),
            db.debug_versions("default", &k)
        );
    }
    for (k, v) in model.iter().step_by(7) {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{ctx}: get");
    }
}

#[test]
fn a_merge_operand_without_a_base_reads_once_after_flush_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    {
        let db = Db::open(options(dir.path())).unwrap();
        db.merge(key(1), b"a").unwrap();
        model.insert(key(1), b"a".to_vec());
        assert_holds(&db, &model, "before the flush");
        db.flush().unwrap();
        assert_holds(&db, &model, "after the flush");
        db.close().unwrap();
    }
    let db = Db::open(options(dir.path())).unwrap();
    assert_holds(&db, &model, "after reopen");
}

#[test]
fn a_merge_operand_in_a_keyspace_reads_once_after_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let ks_opts = || matrixkv::KeyspaceOptions {
        merge_operator: Some(Arc::new(AppendOperator::new(b","))),
        compression: Some(matrixkv::Compression::Lz4),
        ..Default::default()
    };
    let mut o = options(dir.path());
    o.keyspace_options.insert("side".into(), ks_opts());
    {
        let db = Db::open(o.clone()).unwrap();
        db.create_keyspace("side", ks_opts()).unwrap();
        let side = db.keyspace("side").unwrap();
        for round in 0..4 {
            for i in 0..200 {
                db.put(key(i), value(i, round)).unwrap();
            }
            side.merge(key(round), format!("s{round}")).unwrap();
            db.flush().unwrap();
        }
        db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
        db.close().unwrap();
    }
    let db = Db::open(o).unwrap();
    let side = db.keyspace("side").unwrap();
    let got = common::scan_forward(side.iter().unwrap());
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..4)
        .map(|r| (key(r), format!("s{r}").into_bytes()))
        .collect();
    assert_eq!(got, want, "{}", db.debug_versions("side", &key(0)));
}

/// Five rounds of overwrites of keys `0..n`, a flush after each: overlapping tables full of
/// overwritten versions. Returns the model.
fn overwrite_rounds(db: &Db, n: u32, rounds: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for round in 0..rounds {
        for i in 0..n {
            if (i + round) % 3 == 0 {
                db.put(key(i), value(i, round)).expect("put");
                model.insert(key(i), value(i, round));
            }
        }
        db.flush().expect("flush");
    }
    model
}

#[test]
fn point_reads_go_through_the_index_and_absent_keys_read_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.compaction_enabled = false;
    let db = Db::open(o).unwrap();
    let model = overwrite_rounds(&db, 600, 4);
    assert!(db.stats().levels[0].0 >= 4, "{}", db.stats());
    let before = db.stats();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let after = db.stats();
    // Every key came from the level, one block read each at most.
    assert_eq!(
        after.get_hits_levels - before.get_hits_levels,
        model.len() as u64
    );
    assert!(
        after.block_cache_misses - before.block_cache_misses <= model.len() as u64,
        "{after}"
    );
    // Keys never written: the index says no, no block is read.
    let misses = after.block_cache_misses;
    for i in 0..200 {
        assert_eq!(db.get(format!("nokey{i}")).unwrap(), None);
    }
    let s = db.stats();
    assert_eq!(s.index_misses - after.index_misses, 200);
    assert_eq!(s.block_cache_misses, misses, "{s}");
    assert!(s.index_bytes_written > 0, "{s}");
    assert!(s.persistent_memtable_bytes > 0, "{s}");
    assert_eq!(s.wal_bytes, 0, "no write goes through a WAL: {s}");
}

#[test]
fn selective_compaction_reclaims_overwritten_versions_and_answers_stay_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.compaction_enabled = false;
    let db = Db::open(o.clone()).unwrap();
    let old = overwrite_rounds(&db, 600, 1);
    let snap = db.snapshot();
    let mut model = old.clone();
    model.extend(overwrite_rounds(&db, 600, 6));
    db.delete(key(3)).unwrap();
    model.remove(&key(3));
    db.merge(key(4), b"m").unwrap();
    let merged = [
        model.get(&key(4)).cloned().unwrap_or_default(),
        b",m".to_vec(),
    ]
    .concat();
    model.insert(key(4), merged);
    db.flush().unwrap();
    let bytes_before: u64 = db.stats().levels[0].1;
    db.close().unwrap();
    o.compaction_enabled = true;
    let db = Db::open(o).unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.selective_compactions > 0, "{s}");
    assert!(s.levels[0].1 < bytes_before, "no space reclaimed: {s}");
    assert_holds(&db, &model, "after selective compaction");
    drop(snap);
    // A full manual compaction leaves every answer unchanged too.
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_holds(&db, &model, "after compact_range");
    db.close().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    assert_holds(&db, &model, "after reopen");
}

#[test]
fn a_snapshot_reads_its_versions_while_compaction_merges_subsets_of_the_level() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let first = overwrite_rounds(&db, 400, 3);
    let snap = db.snapshot();
    let mut model = first.clone();
    model.extend(overwrite_rounds(&db, 400, 5));
    db.wait_for_compactions().unwrap();
    assert!(db.stats().selective_compactions > 0, "{}", db.stats());
    for (k, v) in &first {
        assert_eq!(
            db.get_opt(k, &snap.read_options()).unwrap().as_ref(),
            Some(v),
            "snapshot get"
        );
    }
    let at_snap = common::scan_forward(db.iter_opt(&snap.read_options()).unwrap());
    assert_eq!(at_snap, first.into_iter().collect::<Vec<_>>());
    assert_holds(&db, &model, "latest");
}

#[test]
fn a_failed_manifest_append_rolls_the_index_back_and_loses_nothing() {
    use matrixkv::tier::{Fault, FaultKind, FaultOp, MemFs, SimFastTier};
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let open = |fs: &MemFs, fast: &SimFastTier| {
        let mut o = options(std::path::Path::new("/db"));
        o.no_space_timeout = std::time::Duration::from_millis(50);
        Db::open(common::on_simulated_tiers(o, fs, fast)).unwrap()
    };
    let db = open(&fs, &fast);
    let mut model = overwrite_rounds(&db, 300, 2);
    // The next manifest appends fail for lack of space: the flush's index commit is undone,
    // and the flush succeeds once space returns.
    fs.inject(
        Fault::new(FaultOp::Write, FaultKind::NoSpace)
            .on_path("MANIFEST")
            .times(3),
    );
    for i in 0..300 {
        db.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    let t = std::time::Instant::now();
    while let Err(e) = db.flush() {
        assert!(e.is_no_space(), "{e}");
        assert!(t.elapsed().as_secs() < 10, "the flush never resumed: {e}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(fs.faults_fired() > 0);
    assert_holds(&db, &model, "after the failed appends");
    // A process crash right now, and a power loss: the index matches the manifest.
    for (mode, policy) in [
        (
            matrixkv::tier::FsCrashMode::KeepAll,
            matrixkv::tier::CrashPolicy::KeepAll,
        ),
        (
            matrixkv::tier::FsCrashMode::DropUnsynced,
            matrixkv::tier::CrashPolicy::DropUnpersisted,
        ),
    ] {
        let (cfs, cfast) = fs.crash_with(mode, 7, || fast.crash(policy));
        let copy = open(&cfs, &cfast);
        assert_holds(&copy, &model, "after a crash");
        copy.close().unwrap();
    }
    db.close().unwrap();
}

#[test]
fn backups_and_read_only_handles_are_refused_with_a_clear_error_and_checkpoints_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let model = overwrite_rounds(&db, 300, 3);
    let backups = tempfile::tempdir().unwrap();
    let engine = matrixkv::BackupEngine::open(backups.path()).unwrap();
    let e = engine.create_backup(&db).unwrap_err();
    assert!(e.to_string().contains("not supported"), "{e}");
    let ro = Db::open_read_only(options(dir.path()))
        .map(|_| ())
        .unwrap_err();
    assert!(ro.to_string().contains("read-only"), "{ro}");
    let ckpt = tempfile::tempdir().unwrap();
    let mut o = options(&ckpt.path().join("db"));
    o.fast_dir = ckpt.path().join("fast");
    db.checkpoint_to(o.clone()).unwrap();
    db.close().unwrap();
    let copy = Db::open(o).unwrap();
    assert_holds(&copy, &model, "checkpoint");
}

#[test]
fn a_scan_over_scattered_tables_makes_them_compaction_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    // Only the range-query trigger makes candidates: no garbage, no leaf scan.
    o.design = Design::SlmDb(SlmDbOptions {
        leaf_scan_tables: 0,
        candidate_trigger: 4,
        scan_window: 30,
        scan_threshold: 3,
        ..knobs()
    });
    let db = Db::open(o).unwrap();
    let mut model = BTreeMap::new();
    // Six tables whose keys interleave: every sub-range of a scan touches all of them.
    for t in 0..6u32 {
        for i in (t..1200).step_by(6) {
            db.put(key(i), value(i, t)).unwrap();
            model.insert(key(i), value(i, t));
        }
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!(s.selective_compactions, 0, "nothing to collect yet: {s}");
    assert_eq!(s.scan_candidates, 0, "{s}");
    // A point lookup reads no sub-range: no candidate.
    assert!(db.get(key(7)).unwrap().is_some());
    assert_eq!(db.stats().scan_candidates, 0);
    // A range query of 100 keys does.
    let mut it = db.iter().unwrap();
    it.seek(&key(300)).unwrap();
    for _ in 0..100 {
        assert!(it.valid());
        it.next().unwrap();
    }
    drop(it);
    let s = db.stats();
    assert!(s.scan_candidates >= 4, "{s}");
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(
        s.selective_compactions > 0,
        "the candidates were not merged: {s}"
    );
    assert_holds(&db, &model, "after the merge the scan triggered");
}

#[test]
fn a_batch_larger_than_a_persistent_memtable_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(options(dir.path())).unwrap());
    let e = common::put_within_20s(&db, b"big", 600 << 10).unwrap_err();
    assert!(e.to_string().contains("write buffer"), "{e}");
    db.put(b"small", b"v").unwrap();
    assert_eq!(db.get(b"small").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Applies a random round of puts, merges, deletes and (one in four rounds) a range delete to
/// `db` and `model`.
fn random_round(
    db: &Db,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut rand::rngs::StdRng,
    round: u32,
) {
    use rand::Rng;
    for _ in 0..400 {
        let i = rng.gen_range(0..600u32);
        let k = key(i);
        match rng.gen_range(0..10) {
            0 => {
                db.delete(&k).expect("delete");
                model.remove(&k);
            }
            1 | 2 => {
                let op = format!("m{round}.{i}").into_bytes();
                db.merge(&k, &op).expect("merge");
                let v = match model.remove(&k) {
                    Some(mut base) => {
                        base.push(b',');
                        base.extend_from_slice(&op);
                        base
                    }
                    None => op,
                };
                model.insert(k, v);
            }
            _ => {
                let v = value(i, round);
                db.put(&k, &v).expect("put");
                model.insert(k, v);
            }
        }
    }
    if round % 4 == 3 {
        let a = rng.gen_range(0..590u32);
        let (start, end) = (key(a), key(a + 10));
        db.delete_range(&start, &end).expect("delete_range");
        model.retain(|k, _| *k < start || *k >= end);
    }
}

/// Seeks in both directions agree with `model` at every probe (present and absent keys),
/// with a step each way after each.
fn assert_seeks(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    use std::ops::Bound::{Excluded, Unbounded};
    let at =
        |it: &matrixkv::DbIterator| it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
    let entry = |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
    let mut it = db.iter().expect("iter");
    for i in (0..620u32).step_by(13) {
        let probe = key(i);
        it.seek(&probe).expect("seek");
        let want = entry(model.range(probe.clone()..).next());
        assert_eq!(at(&it), want, "{ctx}: seek {i}");
        if let Some((k, _)) = &want {
            it.prev().expect("prev");
            assert_eq!(
                at(&it),
                entry(model.range(..k.clone()).next_back()),
                "{ctx}: prev after seek {i}"
            );
        }
        it.seek_for_prev(&probe).expect("seek_for_prev");
        let want = entry(model.range(..=probe.clone()).next_back());
        assert_eq!(at(&it), want, "{ctx}: seek_for_prev {i}");
        if let Some((k, _)) = &want {
            it.next().expect("next");
            let next = entry(model.range((Excluded(k.clone()), Unbounded)).next());
            assert_eq!(at(&it), next, "{ctx}: next after seek_for_prev {i}");
        }
    }
}

#[test]
fn scans_read_the_level_through_the_b_tree_both_ways_and_agree_with_a_model() {
    use rand::SeedableRng;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(40);
    let mut model = BTreeMap::new();
    let mut at_snapshot = None;
    for round in 0..12 {
        random_round(&db, &mut model, &mut rng, round);
        if round % 3 != 2 {
            // Otherwise the round stays in the memtable, above the level.
            db.flush().unwrap();
        }
        let ctx = format!("round {round}");
        assert_holds(&db, &model, &ctx);
        let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(
            common::scan_backward(db.iter().unwrap()),
            want,
            "{ctx}: backward"
        );
        assert_seeks(&db, &model, &ctx);
        if round == 5 {
            at_snapshot = Some((db.snapshot(), model.clone()));
        }
    }
    let s = db.stats();
    assert!(s.index_scans > 0, "no scan went through the index: {s}");
    // A snapshot older than the level's newest table: its scans merge the tables and still
    // see exactly its state.
    let (snap, then) = at_snapshot.unwrap();
    let before = db.stats().index_scans;
    let got = common::scan_forward(db.iter_opt(&snap.read_options()).unwrap());
    let want: Vec<_> = then.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want, "scan at the snapshot");
    assert_eq!(
        db.stats().index_scans,
        before,
        "an old snapshot's scan used the index"
    );
    drop(snap);
    // After a reopen the index is rebuilt from the region and scans agree again.
    drop(db);
    let db = Db::open(options(dir.path())).unwrap();
    assert_holds(&db, &model, "after reopen");
    assert_seeks(&db, &model, "after reopen");
    assert!(db.stats().index_scans > 0);
}
