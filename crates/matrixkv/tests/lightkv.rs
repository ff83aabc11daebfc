//! The LightKV design (`Design::LightKv`) on real mapped files and on simulated tiers: every
//! write goes to a persistent write buffer (no WAL), flushes cut their tables at the
//! partition bounds, partition compaction merges `compaction_size` tables of one merge count,
//! partitions split as they grow, the RH-tree index answers point reads, and an index that
//! does not match the manifest (a crash between the two, a missing or damaged region) is
//! rebuilt from the tables with every answer unchanged.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use common::{level_key as key, level_value as value};
use matrixkv::{AppendOperator, Db, Design, L0Layout, LightKvOptions, Options};

fn knobs() -> LightKvOptions {
    LightKvOptions {
        write_buffer_bytes: 256 << 10,
        index_bytes: 16 << 20,
        compaction_size: 2,
        max_partitions: 4,
        partition_bytes: 1 << 20,
    }
}

fn options(dir: &std::path::Path) -> Options {
    let mut o = common::small_options(dir);
    o.l0_layout = L0Layout::Tables;
    o.design = Design::LightKv(knobs());
    o.min_blob_bytes = None;
    o.merge_operator = Some(Arc::new(AppendOperator::new(b",")));
    o
}

fn assert_holds(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, ctx: &str) {
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let got = common::scan_forward(db.iter().expect("iter"));
    assert_eq!(got.len(), want.len(), "{ctx}: entries");
    if let Some(bad) = got.iter().zip(&want).position(|(g, w)| g != w) {
        let k = want.get(bad).map(|(k, _)| k.clone()).unwrap_or_default();
        panic!(
            "{ctx}: scan differs at {bad}: {:?}; versions: {}",
            String::from_utf8_lossy(&k),
            db.debug_versions("default", &k)
        );
    }
    for (k, v) in model.iter().step_by(5) {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{ctx}: get");
    }
}

/// `rounds` rounds over keys `0..n`, each writing a third of them and flushing.
fn overwrite_rounds(db: &Db, n: u32, rounds: u32, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for round in 0..rounds {
        for i in 0..n {
            if (i + round) % 3 == 0 {
                db.put(key(i), value(i, round)).expect("put");
                model.insert(key(i), value(i, round));
            }
        }
        db.flush().expect("flush");
    }
}

#[test]
fn partitions_split_as_data_grows_and_partition_compaction_keeps_every_answer() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let mut model = BTreeMap::new();
    overwrite_rounds(&db, 6000, 9, &mut model);
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
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.partition_compactions > 0, "{s}");
    assert!(s.partition_splits > 0, "{s}");
    assert_eq!(s.selective_compactions, 0, "{s}");
    assert!(s.index_bytes_written > 0, "{s}");
    assert!(s.persistent_memtable_bytes > 0, "{s}");
    assert_eq!(s.wal_bytes, 0, "no write goes through a WAL: {s}");
    assert_holds(&db, &model, "after compactions");
    db.compact_range(None::<&[u8]>, None::<&[u8]>).unwrap();
    assert_holds(&db, &model, "after compact_range");
    db.close().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    assert_holds(&db, &model, "after reopen");
}

#[test]
fn point_reads_go_through_the_index_and_absent_keys_read_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.compaction_enabled = false;
    let db = Db::open(o).unwrap();
    let mut model = BTreeMap::new();
    overwrite_rounds(&db, 600, 4, &mut model);
    assert!(db.stats().levels[0].0 >= 4, "{}", db.stats());
    let before = db.stats();
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_ref(), Some(v));
    }
    let after = db.stats();
    assert_eq!(
        after.get_hits_levels - before.get_hits_levels,
        model.len() as u64
    );
    // With no job running, the index answers every lookup: none takes the slow path.
    assert_eq!(after.index_fallbacks, before.index_fallbacks, "{after}");
    assert!(
        after.block_cache_misses - before.block_cache_misses <= model.len() as u64,
        "{after}"
    );
    let misses = after.block_cache_misses;
    for i in 0..200 {
        assert_eq!(db.get(format!("nokey{i}")).unwrap(), None);
    }
    let s = db.stats();
    assert_eq!(s.index_misses - after.index_misses, 200);
    assert_eq!(s.block_cache_misses, misses, "{s}");
}

#[test]
fn a_larger_compaction_size_rewrites_fewer_bytes() {
    let mut written = Vec::new();
    for cs in [2, 6] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = options(dir.path());
        o.design = Design::LightKv(LightKvOptions {
            compaction_size: cs,
            max_partitions: 1,
            ..knobs()
        });
        let db = Db::open(o).unwrap();
        let mut model = BTreeMap::new();
        overwrite_rounds(&db, 3000, 12, &mut model);
        db.wait_for_compactions().unwrap();
        assert_holds(&db, &model, &format!("compaction size {cs}"));
        let s = db.stats();
        assert!(s.partition_compactions > 0, "{s}");
        assert_eq!(s.partition_splits, 0, "{s}");
        written.push(s.compaction_output_bytes);
    }
    assert!(
        written[1] < written[0],
        "compaction size 6 wrote {} bytes, 2 wrote {}",
        written[1],
        written[0]
    );
}

#[test]
fn a_snapshot_reads_its_versions_while_partitions_merge_and_split() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let mut first = BTreeMap::new();
    overwrite_rounds(&db, 3000, 3, &mut first);
    let snap = db.snapshot();
    let mut model = first.clone();
    overwrite_rounds(&db, 3000, 6, &mut model);
    db.wait_for_compactions().unwrap();
    assert!(db.stats().partition_compactions > 0, "{}", db.stats());
    for (k, v) in first.iter().step_by(3) {
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
fn a_failed_manifest_append_undoes_the_index_change_and_a_crash_rebuilds_it() {
    use matrixkv::tier::{Fault, FaultKind, FaultOp, MemFs, SimFastTier};
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let open = |fs: &MemFs, fast: &SimFastTier| {
        let mut o = options(std::path::Path::new("/db"));
        o.no_space_timeout = std::time::Duration::from_millis(50);
        Db::open(common::on_simulated_tiers(o, fs, fast)).unwrap()
    };
    let db = open(&fs, &fast);
    let mut model = BTreeMap::new();
    overwrite_rounds(&db, 300, 2, &mut model);
    fs.inject(
        Fault::new(FaultOp::Write, FaultKind::NoSpace)
            .on_path("MANIFEST")
            .times(3),
    );
    for i in 0..300 {
        db.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    db.delete(key(7)).unwrap();
    model.remove(&key(7));
    let t = std::time::Instant::now();
    while let Err(e) = db.flush() {
        assert!(e.is_no_space(), "{e}");
        assert!(t.elapsed().as_secs() < 10, "the flush never resumed: {e}");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(fs.faults_fired() > 0);
    assert_holds(&db, &model, "after the failed appends");
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
    // A crash while the index is ahead of the manifest: the flush's index change is made,
    // its manifest append fails, and the image is taken before the undo could matter.
    fs.inject(
        Fault::new(FaultOp::Write, FaultKind::NoSpace)
            .on_path("MANIFEST")
            .times(1),
    );
    for i in 0..300 {
        db.put(key(i), value(i, 10)).unwrap();
        model.insert(key(i), value(i, 10));
    }
    let _ = db.flush();
    let (cfs, cfast) = fs.crash_with(matrixkv::tier::FsCrashMode::KeepAll, 8, || {
        fast.crash(matrixkv::tier::CrashPolicy::KeepAll)
    });
    let copy = open(&cfs, &cfast);
    assert_holds(&copy, &model, "after a crash behind a failed append");
    copy.close().unwrap();
    db.close().unwrap();
}

#[test]
fn a_missing_or_damaged_index_region_is_rebuilt_from_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(dir.path());
    let mut model = BTreeMap::new();
    {
        let db = Db::open(o.clone()).unwrap();
        overwrite_rounds(&db, 2000, 4, &mut model);
        db.delete(key(5)).unwrap();
        model.remove(&key(5));
        db.close().unwrap();
    }
    let index = o.fast_dir.join("INDEX");
    assert!(index.exists(), "{index:?}");
    // Damaged header: the region does not open as a tree.
    let mut bytes = std::fs::read(&index).unwrap();
    bytes[3] ^= 0xff;
    std::fs::write(&index, &bytes).unwrap();
    {
        let db = Db::open(o.clone()).unwrap();
        assert_holds(&db, &model, "after a damaged index");
        db.close().unwrap();
    }
    std::fs::remove_file(&index).unwrap();
    let db = Db::open(o).unwrap();
    assert_holds(&db, &model, "after a missing index");
    assert_eq!(db.get(key(5)).unwrap(), None);
}

#[test]
fn a_small_index_region_compacts_its_log_instead_of_filling_up() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    // About 500 KiB of log: the rounds below change the index far more than that.
    o.design = Design::LightKv(LightKvOptions {
        index_bytes: 1 << 20,
        ..knobs()
    });
    let mut model = BTreeMap::new();
    {
        let db = Db::open(o.clone()).unwrap();
        overwrite_rounds(&db, 3000, 30, &mut model);
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        assert!(s.index_bytes_written > 2 << 20, "{s}");
        assert_holds(&db, &model, "after log compactions");
        db.close().unwrap();
    }
    assert!(!o.fast_dir.join("INDEX.new").exists());
    let db = Db::open(o).unwrap();
    assert_holds(&db, &model, "after reopen");
}

#[test]
fn an_index_region_too_small_for_the_keys_fails_with_a_clear_error_instead_of_hanging() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.design = Design::LightKv(LightKvOptions {
        index_bytes: 64 << 10,
        ..knobs()
    });
    let db = Db::open(o).unwrap();
    // A flush fails (in the background once a buffer fills, or at the end): the database
    // stops writes with the cause.
    let failed = (0..20_000)
        .find_map(|i| db.put(key(i), b"v").err())
        .or_else(|| db.flush().err())
        .expect("the index cannot hold 20,000 keys");
    assert!(failed.to_string().contains("full"), "{failed}");
    let e = db.put(key(1), b"w").unwrap_err();
    assert!(e.to_string().contains("full"), "{e}");
    // Writes stop with the same cause; nothing waits forever.
    let w = db.wait_for_compactions().unwrap_err();
    assert!(w.to_string().contains("full"), "{w}");
    assert_eq!(db.get(key(7)).unwrap().as_deref(), Some(&b"v"[..]));
}

#[test]
fn backups_restore_with_a_rebuilt_index_read_only_handles_are_refused_and_checkpoints_work() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let mut model = BTreeMap::new();
    overwrite_rounds(&db, 300, 3, &mut model);
    // Unflushed writes in the write buffer: the backup flushes them first.
    for i in 0..50 {
        db.put(key(i), value(i, 9)).unwrap();
        model.insert(key(i), value(i, 9));
    }
    let backups = tempfile::tempdir().unwrap();
    let engine = matrixkv::BackupEngine::open(backups.path()).unwrap();
    let info = engine.create_backup(&db).unwrap();
    db.put(key(1), b"after the backup").unwrap();
    let restored = tempfile::tempdir().unwrap();
    let mut r = options(&restored.path().join("slow"));
    r.fast_dir = restored.path().join("fast");
    engine.restore(info.id, r.clone()).unwrap();
    {
        let copy = Db::open(r.clone()).unwrap();
        assert_holds(&copy, &model, "restored backup");
        copy.put(key(2), b"written to the copy").unwrap();
        copy.flush().unwrap();
        copy.close().unwrap();
    }
    let copy = Db::open(r).unwrap();
    assert_eq!(
        copy.get(key(2)).unwrap().as_deref(),
        Some(&b"written to the copy"[..])
    );
    assert_eq!(copy.get(key(1)).unwrap().as_ref(), model.get(&key(1)));
    drop(copy);
    let ro = Db::open_read_only(options(dir.path()))
        .map(|_| ())
        .unwrap_err();
    assert!(ro.to_string().contains("read-only"), "{ro}");
    let ckpt = tempfile::tempdir().unwrap();
    let mut o = options(&ckpt.path().join("db"));
    o.fast_dir = ckpt.path().join("fast");
    db.checkpoint_to(o.clone()).unwrap();
    db.close().unwrap();
    model.insert(key(1), b"after the backup".to_vec());
    let copy = Db::open(o).unwrap();
    assert_holds(&copy, &model, "checkpoint");
}

#[test]
fn writes_reach_the_write_buffer_without_a_wal_and_survive_a_reopen_unflushed() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(dir.path());
    let mut model = BTreeMap::new();
    {
        let db = Db::open(o.clone()).unwrap();
        for i in 0..500 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        db.delete(key(7)).unwrap();
        model.remove(&key(7));
        let s = db.stats();
        assert_eq!(s.wal_bytes, 0, "{s}");
        assert!(s.persistent_memtable_bytes > 0, "{s}");
        // Closing does not flush a persistent buffer (the .pmt below is still there).
        db.close().unwrap();
    }
    let names: Vec<String> = std::fs::read_dir(&o.fast_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().any(|n| n.ends_with(".pmt")), "{names:?}");
    // The writer's WAL segments after the first switch are never written: one page each.
    let wal_lens: Vec<u64> = names
        .iter()
        .filter(|n| n.ends_with(".wal"))
        .map(|n| std::fs::metadata(o.fast_dir.join(n)).unwrap().len())
        .collect();
    assert!(wal_lens.contains(&4096), "{names:?} {wal_lens:?}");
    assert!(
        wal_lens.iter().filter(|&&l| l > 4096).count() <= 1,
        "{wal_lens:?}"
    );
    let db = Db::open(o).unwrap();
    assert_holds(&db, &model, "after a reopen without a flush");
}

#[test]
fn a_key_longer_than_the_index_takes_is_refused_and_writes_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path())).unwrap();
    let long = vec![b'k'; 1100];
    let e = db.put(&long, b"v").unwrap_err();
    assert!(
        e.to_string()
            .contains("too long for the lightkv design's index"),
        "{e}"
    );
    db.put(vec![b'k'; 1000], b"v").unwrap();
    db.flush().unwrap();
    assert_eq!(
        db.get(vec![b'k'; 1000]).unwrap().as_deref(),
        Some(&b"v"[..])
    );
    assert_eq!(db.get(&long).unwrap(), None);
}

/// The round a value of [`value`] names.
fn round_of(v: &[u8]) -> u32 {
    let s = String::from_utf8_lossy(v);
    s.split("round ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|r| r.parse().ok())
        .unwrap_or_else(|| panic!("not a round value: {s}"))
}

#[test]
fn readers_racing_flushes_merges_and_splits_see_every_completed_round() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(options(dir.path())).unwrap());
    let n = 3000u32;
    let done_round = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    for i in 0..n {
        db.put(key(i), value(i, 0)).unwrap();
    }
    let before = db.stats();
    let readers: Vec<_> = (0..2)
        .map(|t| {
            let (db, done_round, stop) = (db.clone(), done_round.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut reads = 0u64;
                let mut i: u32 = t;
                while !stop.load(std::sync::atomic::Ordering::Acquire) {
                    let k = i.wrapping_mul(7919) % n;
                    let floor = done_round.load(std::sync::atomic::Ordering::Acquire);
                    let v = db.get(key(k)).unwrap().expect("every key has a value");
                    let r = round_of(&v);
                    assert!(
                        r >= floor,
                        "key {k}: round {r} read after round {floor} completed"
                    );
                    assert_eq!(v, value(k, r));
                    reads += 1;
                    i += 2;
                }
                reads
            })
        })
        .collect();
    for round in 1..=12 {
        for i in 0..n {
            db.put(key(i), value(i, round)).unwrap();
        }
        done_round.store(round, std::sync::atomic::Ordering::Release);
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Release);
    let reads: u64 = readers.into_iter().map(|r| r.join().unwrap()).sum();
    let s = db.stats();
    assert!(reads > 1000, "{reads} reads");
    assert!(
        s.partition_compactions > before.partition_compactions
            && s.partition_splits > before.partition_splits,
        "{s}"
    );
    for i in (0..n).step_by(7) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 12)));
    }
}

#[test]
fn a_batch_larger_than_a_write_buffer_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path());
    o.design = Design::LightKv(LightKvOptions {
        write_buffer_bytes: 64 << 10,
        ..knobs()
    });
    let db = Arc::new(Db::open(o).unwrap());
    let e = common::put_within_20s(&db, b"big", 200 << 10).unwrap_err();
    assert!(e.to_string().contains("write buffer"), "{e}");
    db.put(b"small", b"v").unwrap();
    assert_eq!(db.get(b"small").unwrap().as_deref(), Some(&b"v"[..]));
}
