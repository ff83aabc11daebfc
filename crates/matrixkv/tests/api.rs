//! Behaviour of the public API: bad input gives clear errors, the database lock, parameters
//! fixed at creation, a lost fast tier, injected I/O errors, snapshots and statistics.

use std::sync::Arc;

use matrixkv::tier::{Fault, FaultKind, FaultOp, MemFs, SimFastTier};
use matrixkv::{Db, Error, Options, ReadOptions, WriteBatch, WriteOptions};

mod common;

fn small(path: &std::path::Path) -> Options {
    common::small_options(path)
}

fn sim_options(fs: &MemFs, fast: &SimFastTier) -> Options {
    common::on_simulated_tiers(small(std::path::Path::new("/db")), fs, fast)
}

#[test]
fn get_of_a_missing_key_is_none_and_delete_hides_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    assert_eq!(db.get(b"nope").unwrap(), None);
    db.put(b"a", b"1").unwrap();
    assert_eq!(db.get(b"a").unwrap(), Some(b"1".to_vec()));
    db.delete(b"a").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.close().unwrap();
}

#[test]
fn oversized_keys_values_and_batches_are_rejected_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small(dir.path());
    o.max_key_bytes = 100;
    o.max_value_bytes = 1000;
    o.max_batch_bytes = 5000;
    let db = Db::open(o).unwrap();
    let e = db.put(vec![0u8; 101], b"v").unwrap_err();
    assert!(e.to_string().contains("max_key_bytes"), "{e}");
    let e = db.put(b"k", vec![0u8; 1001]).unwrap_err();
    assert!(e.to_string().contains("max_value_bytes"), "{e}");
    let mut b = WriteBatch::new();
    for i in 0..10 {
        b.put(format!("k{i}"), vec![0u8; 900]);
    }
    let e = db.write(b).unwrap_err();
    assert!(e.to_string().contains("max_batch_bytes"), "{e}");
    // Nothing of the rejected writes is visible, and the database still works.
    assert_eq!(db.get(b"k0").unwrap(), None);
    db.put(b"ok", b"fine").unwrap();
    db.close().unwrap();
}

#[test]
fn invalid_options_are_rejected_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small(dir.path());
    o.max_write_buffers = 1;
    let e = Db::open(o).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn a_second_open_of_the_same_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    let e = Db::open(small(dir.path())).unwrap_err();
    assert!(matches!(e, Error::Locked { .. }), "{e}");
    db.close().unwrap();
    Db::open(small(dir.path())).unwrap().close().unwrap();
}

#[test]
fn reopening_with_a_different_fixed_parameter_is_an_option_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(small(dir.path())).unwrap().close().unwrap();
    let mut o = small(dir.path());
    o.num_levels = 5;
    let e = Db::open(o).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OptionMismatch {
                option: "num_levels",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn a_fast_tier_that_lost_its_contents_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    // What a reboot does to a fast tier on tmpfs.
    std::fs::remove_dir_all(dir.path().join("fast")).unwrap();
    let e = Db::open(small(dir.path())).unwrap_err();
    assert!(e.to_string().contains("IDENTITY"), "{e}");
}

/// A closed database whose flush wrote its edit and then deleted the WAL segment it covered.
fn closed_database_with_a_flushed_memtable(dir: &std::path::Path) -> std::path::PathBuf {
    let db = Db::open(small(dir)).expect("setup");
    for i in 0..200u32 {
        db.put(format!("k{i:04}").as_bytes(), [7u8; 100])
            .expect("setup");
    }
    db.flush().expect("setup");
    db.close().expect("setup");
    let current = std::fs::read_to_string(dir.join("slow").join("CURRENT")).expect("setup");
    dir.join("slow").join(current.trim_end())
}

fn assert_keys_read_back(dir: &std::path::Path) {
    let db = Db::open(small(dir)).expect("setup");
    for i in 0..200u32 {
        let got = db.get(format!("k{i:04}").as_bytes()).expect("setup");
        assert_eq!(got.as_deref(), Some(&[7u8; 100][..]), "k{i:04}");
    }
    db.close().expect("setup");
}

#[test]
fn a_damaged_last_manifest_record_is_refused_rather_than_rolled_back() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = closed_database_with_a_flushed_memtable(dir.path());
    let mut bytes = std::fs::read(&manifest).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    std::fs::write(&manifest, bytes).unwrap();
    // The reader drops the bad last record as if a crash had torn it, but the state before it
    // names a WAL segment that was deleted after the record was written: opening that state
    // would silently forget the flushed writes.
    match Db::open(small(dir.path())) {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!(site.path, manifest);
            assert!(site.offset > 0);
        }
        Err(e) => panic!("expected a corruption of the manifest, got {e}"),
        Ok(_) => panic!("a rolled-back database opened without an error"),
    }
}

#[test]
fn a_torn_record_at_the_end_of_the_manifest_is_dropped_and_the_database_opens() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = closed_database_with_a_flushed_memtable(dir.path());
    // What a crash in the middle of an append leaves: a record header and part of a payload.
    let mut bytes = std::fs::read(&manifest).unwrap();
    bytes.extend_from_slice(&[0x11, 0x22, 0x33, 0x44, 200, 0, 0, 0, 1, 5, 9]);
    std::fs::write(&manifest, bytes).unwrap();
    assert_keys_read_back(dir.path());
}

#[test]
fn a_blank_wal_segment_left_by_a_crash_is_skipped_at_every_open() {
    let dir = tempfile::tempdir().unwrap();
    closed_database_with_a_flushed_memtable(dir.path());
    // A segment created but never written: a crash right after the file was made.
    std::fs::write(
        dir.path().join("fast").join("999999.wal"),
        vec![0u8; 64 << 10],
    )
    .unwrap();
    assert_keys_read_back(dir.path());
    assert_keys_read_back(dir.path());
}

#[test]
fn tier_directories_of_different_databases_do_not_mix() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    Db::open(small(a.path())).unwrap().close().unwrap();
    Db::open(small(b.path())).unwrap().close().unwrap();
    let mut o = small(a.path());
    o.fast_dir = b.path().join("fast");
    let e = Db::open(o).unwrap_err();
    assert!(e.to_string().contains("do not belong together"), "{e}");
}

#[test]
fn open_without_create_if_missing_fails_on_an_empty_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small(dir.path());
    o.create_if_missing = false;
    let e = Db::open(o).unwrap_err();
    assert!(e.to_string().contains("create_if_missing"), "{e}");
}

#[test]
fn data_survives_flush_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    for i in 0..5000u32 {
        db.put(format!("key{i:06}"), vec![(i % 251) as u8; 100])
            .unwrap();
    }
    for i in (0..5000u32).step_by(7) {
        db.delete(format!("key{i:06}")).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.flushes > 0 && s.compactions > 0, "{s}");
    assert!(
        s.levels.iter().skip(1).any(|(n, _)| *n > 0),
        "nothing reached L1+: {s}"
    );
    assert!(db.verify().unwrap() > 0);
    db.close().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    for i in 0..5000u32 {
        let want = (i % 7 != 0).then(|| vec![(i % 251) as u8; 100]);
        assert_eq!(db.get(format!("key{i:06}")).unwrap(), want, "key {i}");
    }
    db.close().unwrap();
}

#[test]
fn snapshots_keep_old_versions_through_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    db.put(b"k", b"old").unwrap();
    let snap = db.snapshot();
    db.put(b"k", b"new").unwrap();
    for i in 0..3000u32 {
        db.put(format!("fill{i:06}"), [7u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(snap.get(b"k").unwrap(), Some(b"old".to_vec()));
    assert_eq!(db.get(b"k").unwrap(), Some(b"new".to_vec()));
    let ro = ReadOptions {
        snapshot: Some(snap.sequence()),
        ..Default::default()
    };
    assert_eq!(db.get_opt(b"k", &ro).unwrap(), Some(b"old".to_vec()));
    drop(snap);
    db.close().unwrap();
}

#[test]
fn iterators_go_both_ways_within_bounds() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    for i in 0..100u32 {
        db.put(format!("{i:03}"), format!("v{i}")).unwrap();
    }
    db.flush().unwrap();
    db.delete(b"050").unwrap();
    let ro = ReadOptions {
        lower_bound: Some(b"040".to_vec()),
        upper_bound: Some(b"060".to_vec()),
        ..Default::default()
    };
    let mut it = db.iter_opt(&ro).unwrap();
    it.seek_to_first().unwrap();
    let mut fwd = Vec::new();
    while it.valid() {
        fwd.push(String::from_utf8(it.key().to_vec()).unwrap());
        it.next().unwrap();
    }
    let want: Vec<String> = (40..60)
        .filter(|i| *i != 50)
        .map(|i| format!("{i:03}"))
        .collect();
    assert_eq!(fwd, want);
    it.seek_for_prev(b"050").unwrap();
    assert_eq!(it.key(), b"049");
    it.seek(b"050").unwrap();
    assert_eq!(it.key(), b"051");
    it.prev().unwrap();
    assert_eq!(it.key(), b"049");
    db.close().unwrap();
}

#[test]
fn concurrent_writers_are_all_applied() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let db = &db;
            s.spawn(move || {
                for i in 0..2000u32 {
                    let sync = i % 100 == 0;
                    db.put_opt(
                        format!("t{t}-{i:05}"),
                        [t as u8; 50],
                        &WriteOptions { sync },
                    )
                    .unwrap();
                }
            });
        }
    });
    for t in 0..4u32 {
        for i in 0..2000u32 {
            assert_eq!(
                db.get(format!("t{t}-{i:05}")).unwrap(),
                Some(vec![t as u8; 50])
            );
        }
    }
    assert_eq!(db.stats().user_ops, 8000);
    db.close().unwrap();
}

#[test]
fn a_failed_flush_stops_writes_but_reads_keep_working() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = sim_options(&fs, &fast);
    o.l0_layout = matrixkv::L0Layout::Tables;
    let db = Db::open(o.clone()).unwrap();
    db.put(b"before", b"1").unwrap();
    // An I/O error that is not a full device stops writes (a full device is retried: see
    // tests/no_space.rs).
    fs.inject(Fault::new(FaultOp::Create, FaultKind::Eio).on_path(".sst"));
    let e = db.flush().unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    let e = db.put(b"after", b"2").unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    assert!(db.stats().poisoned.is_some());
    assert!(db.close().is_err());
    // After the fault clears, a reopen recovers every acknowledged write.
    fs.clear_faults();
    let db = Db::open(o).unwrap();
    assert_eq!(db.get(b"before").unwrap(), Some(b"1".to_vec()));
    db.put(b"after", b"2").unwrap();
    db.close().unwrap();
}

#[test]
fn a_failed_wal_persist_fails_the_sync_write_and_poisons() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast)).unwrap();
    fast.fail_persist_after(Some(0));
    let e = db
        .put_opt(b"k", b"v", &WriteOptions { sync: true })
        .unwrap_err();
    assert!(e.to_string().contains("persist"), "{e}");
    assert!(matches!(
        db.put(b"x", b"y").unwrap_err(),
        Error::Poisoned { .. }
    ));
    fast.fail_persist_after(None);
    drop(db);
}

#[test]
fn compaction_retries_after_a_full_disk() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast)).unwrap();
    // Every compaction output fails with ENOSPC twice, then the disk has room again.
    fs.inject(
        Fault::new(FaultOp::Create, FaultKind::NoSpace)
            .on_path("slow")
            .times(2),
    );
    for i in 0..4000u32 {
        db.put(format!("key{i:06}"), [1u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.background_errors >= 1, "{s}");
    assert!(s.compactions >= 1 && s.poisoned.is_none(), "{s}");
    for i in (0..4000u32).step_by(97) {
        assert_eq!(db.get(format!("key{i:06}")).unwrap(), Some(vec![1u8; 100]));
    }
    db.close().unwrap();
}

#[test]
fn stats_count_user_bytes_and_tier_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    for i in 0..3000u32 {
        db.put(format!("key{i:06}"), [0u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!(s.user_ops, 3000);
    assert_eq!(s.user_bytes, 3000 * (9 + 100));
    assert!(s.wal_bytes >= s.user_bytes);
    assert!(s.fast_sst_bytes_written > 0 && s.slow_bytes_written > 0);
    assert!(s.write_amplification() > 0.0);
    assert!(s.to_string().contains("write amplification"));
    // The flush's phases were timed; the slowest flush is part of the sum.
    assert!(s.flushes > 0 && s.flush_phases.total_micros() > 0, "{s}");
    assert!(s.slowest_flush.total_micros() <= s.flush_phases.total_micros());
    assert!(s.to_string().contains("slowest flush"), "{s}");
    db.close().unwrap();
}

#[test]
fn verify_reports_a_corrupted_table_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    for i in 0..20000u32 {
        db.put(format!("key{i:06}"), [3u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
    // Flip one byte in the middle of the first data block of every slow-tier table.
    let slow = dir.path().join("slow");
    let mut flipped = 0;
    for e in std::fs::read_dir(&slow).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "sst") {
            let mut b = std::fs::read(&p).unwrap();
            b[100] ^= 0x55;
            std::fs::write(&p, b).unwrap();
            flipped += 1;
        }
    }
    assert!(flipped > 0);
    let db = Db::open(small(dir.path())).unwrap();
    let e = db.verify().unwrap_err();
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(".sst"), "{e}");
    db.close().unwrap();
}

#[test]
fn multi_get_answers_in_the_order_asked_with_duplicates_and_absent_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    // Old values pushed through flushes and compactions (rows, L1, blob files), new ones in
    // the memtable.
    for i in 0..3000u32 {
        db.put(format!("k{i:05}"), vec![b'a' + (i % 26) as u8; 700])
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    db.put("k00007", "fresh").unwrap();
    db.delete("k00008").unwrap();
    let keys = ["k02999", "zz", "k00007", "k00008", "k02999", "k00000", ""];
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get(keys)
        .into_iter()
        .collect::<matrixkv::Result<_>>()
        .unwrap();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    assert_eq!(got, want);
    assert_eq!(got[2].as_deref(), Some(&b"fresh"[..]));
    assert_eq!(got[3], None);
    assert_eq!(got[0], got[4]);
    assert!(db.multi_get(Vec::<Vec<u8>>::new()).is_empty());
    // At a snapshot, through read options and through the handle.
    let snap = db.snapshot();
    db.put("k00007", "newer").unwrap();
    let at_snap = db.multi_get_opt(["k00007"], &snap.read_options());
    assert_eq!(at_snap[0].as_ref().unwrap().as_deref(), Some(&b"fresh"[..]));
    let through = snap.multi_get(["k00007", "k00008"]);
    assert_eq!(through[0].as_ref().unwrap().as_deref(), Some(&b"fresh"[..]));
    assert_eq!(through[1].as_ref().unwrap(), &None);
    drop(snap);
    db.close().unwrap();
}

#[test]
fn multi_get_sees_each_batch_whole_while_writers_run() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(small(dir.path())).unwrap());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut round = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Both keys of a pair always change together.
                let mut b = WriteBatch::new();
                for pair in 0..20 {
                    let v = format!("{round:08}{}", "x".repeat(300));
                    b.put(format!("a{pair:02}"), &v);
                    b.put(format!("b{pair:02}"), &v);
                }
                db.write(b).unwrap();
                round += 1;
            }
        })
    };
    for _ in 0..300 {
        let keys: Vec<String> = (0..20)
            .flat_map(|p| [format!("a{p:02}"), format!("b{p:02}")])
            .collect();
        let got = db.multi_get(&keys);
        let values: Vec<Option<Vec<u8>>> = got.into_iter().map(Result::unwrap).collect();
        let first = values[0].clone();
        assert!(
            values.iter().all(|v| *v == first),
            "a multi_get mixed two batches"
        );
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}

#[test]
fn properties_describe_the_tree_and_unknown_names_are_refused_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(dir.path())).unwrap();
    // Values above the default separation threshold (1 KiB) reach blob files.
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), vec![7u8; 1500]).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(
        db.get_int_property("matrixkv.latest-sequence-number")
            .unwrap(),
        2000
    );
    assert_eq!(
        db.get_int_property("matrixkv.num-immutable-mem-table")
            .unwrap(),
        0
    );
    let capacity = db
        .get_int_property("matrixkv.container-capacity-bytes")
        .unwrap();
    assert_eq!(capacity, 1 << 20);
    let rows = db
        .get_int_property("matrixkv.container-receiver-rows")
        .unwrap()
        + db.get_int_property("matrixkv.container-compactor-rows")
            .unwrap();
    let level0 = db.get_int_property("matrixkv.num-files-at-level0").unwrap();
    assert_eq!(
        rows, level0,
        "level 0 of the matrix layout is the container's rows"
    );
    let snap = db.snapshot();
    assert_eq!(db.get_int_property("matrixkv.num-snapshots").unwrap(), 1);
    drop(snap);
    assert_eq!(db.get_int_property("matrixkv.num-snapshots").unwrap(), 0);
    db.wait_for_compactions().unwrap();
    assert!(
        db.get_int_property("matrixkv.total-sst-files-size")
            .unwrap()
            > 0
    );
    assert!(db.get_int_property("matrixkv.num-blob-files").unwrap() > 0);
    assert!(
        db.get_property("matrixkv.levelstats")
            .unwrap()
            .starts_with("Level Files")
    );
    assert!(db.get_property("matrixkv.stats").unwrap().contains("user:"));
    assert_eq!(db.get_property("matrixkv.is-write-stopped").unwrap(), "0");
    for bad in ["rocksdb.stats", "matrixkv.num-files-at-level99", ""] {
        let e = db.get_property(bad).unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(_)) && e.to_string().contains("matrixkv.levelstats"),
            "{bad}: {e}"
        );
    }
    let e = db.get_int_property("matrixkv.levelstats").unwrap_err();
    assert!(e.to_string().contains("integer property"), "{e}");
    db.close().unwrap();
}

#[test]
fn compact_range_drains_the_container_even_with_automatic_compaction_off() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = small(dir.path());
    o.compaction_enabled = false;
    o.container_bytes = 8 << 20;
    let db = Db::open(o).unwrap();
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), format!("old{i}")).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    for i in (0..2000u32).step_by(3) {
        db.put(format!("k{i:05}"), vec![b'n'; 1500]).unwrap();
    }
    assert!(db.get_int_property("matrixkv.num-files-at-level0").unwrap() > 0);
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get_int_property("matrixkv.num-files-at-level0").unwrap(),
        0,
        "{}",
        db.get_property("matrixkv.levelstats").unwrap()
    );
    assert!(db.get_int_property("matrixkv.num-files-at-level1").unwrap() > 0);
    for i in 0..2000u32 {
        let k = format!("k{i:05}");
        let want = if i % 3 == 0 {
            vec![b'n'; 1500]
        } else {
            format!("old{i}").into_bytes()
        };
        assert_eq!(db.get(&k).unwrap(), Some(want), "{k}");
        // The snapshot still sees the values from before the overwrites.
        assert_eq!(
            snap.get(&k).unwrap(),
            Some(format!("old{i}").into_bytes()),
            "{k}"
        );
    }
    drop(snap);
    db.close().unwrap();
}

#[test]
fn compact_range_leaves_only_the_deepest_level_in_range_and_every_value() {
    for layout in [matrixkv::L0Layout::Matrix, matrixkv::L0Layout::Tables] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = small(dir.path());
        o.l0_layout = layout;
        let db = Db::open(o).unwrap();
        let mut model = std::collections::BTreeMap::new();
        for round in 0..4u32 {
            for i in (round..6000).step_by(4) {
                let (k, v) = (
                    format!("k{i:05}"),
                    format!("{round}-{i}-{}", "v".repeat(200)),
                );
                db.put(&k, &v).unwrap();
                model.insert(k, v);
            }
        }
        db.compact_range(Some(b"k01000"), Some(b"k02000")).unwrap();
        db.compact_range(None, None).unwrap();
        let level0 = db.get_int_property("matrixkv.num-files-at-level0").unwrap();
        assert_eq!(
            level0,
            0,
            "{layout:?}: {}",
            db.get_property("matrixkv.levelstats").unwrap()
        );
        for (k, v) in &model {
            assert_eq!(
                db.get(k).unwrap().as_deref(),
                Some(v.as_bytes()),
                "{layout:?} {k}"
            );
        }
        let e = db.compact_range(Some(b"z"), Some(b"a")).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        db.close().unwrap();
    }
}

/// `sync_wal` makes the writes acknowledged before it survive a power loss, with values
/// logged in the WAL and with values written to the memtable's blob file (`separate_at_write`,
/// whose file it syncs first); without it the same power loss takes some of them.
#[test]
fn sync_wal_makes_every_earlier_write_survive_a_power_loss() {
    for separate_at_write in [false, true] {
        for call in [true, false] {
            let fs = MemFs::new();
            let fast = SimFastTier::new("/db/fast");
            let mut o = sim_options(&fs, &fast);
            o.separate_at_flush = separate_at_write;
            o.separate_at_write = separate_at_write;
            o.min_blob_bytes = Some(100);
            // With `separate_at_write`: every separable value at write (the default logs those below 2 KiB in the WAL).
            o.separate_at_write_min_bytes = None;
            let db = Db::open(o.clone()).unwrap();
            let value = |i: u32| vec![b'a' + (i % 26) as u8; 50 + (i as usize % 4) * 100];
            for i in 0..200u32 {
                db.put(format!("key{i:04}"), value(i)).unwrap();
            }
            if call {
                let syncs = db.stats().wal_syncs;
                db.sync_wal().unwrap();
                assert_eq!(db.stats().wal_syncs, syncs + 1);
            }
            db.put(b"later", b"not promised").unwrap();
            let (fs2, fast2) = common::power_loss(&fs, &fast, 5);
            drop(db);
            let db = Db::open(common::on_simulated_tiers(o.clone(), &fs2, &fast2)).unwrap();
            let kept = (0..200u32)
                .filter(|i| db.get(format!("key{i:04}")).unwrap() == Some(value(*i)))
                .count();
            let what = format!("separate_at_write {separate_at_write}, sync_wal {call}");
            if call {
                assert_eq!(kept, 200, "{what}");
            } else {
                assert!(kept < 200, "{what}: the power loss took nothing");
            }
            db.close().unwrap();
        }
    }
}

#[test]
fn sync_wal_on_a_read_only_handle_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(small(dir.path())).unwrap().close().unwrap();
    let db = Db::open_read_only(small(dir.path())).unwrap();
    assert!(matches!(db.sync_wal(), Err(Error::ReadOnly { .. })));
}
