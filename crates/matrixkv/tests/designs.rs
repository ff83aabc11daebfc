//! The engine's designs (`Options::design`) on real mapped files: X-Engine's semi-persistent
//! memtable keeps values in the WAL records, survives reopen with serial and parallel index
//! rebuilds, never lets a viewed WAL segment be recycled, and is fixed at creation. NoveLSM's
//! persistent memtables take writes without a WAL, alternate with DRAM memtables, come back
//! after a reopen or a crash without replay, and are deleted once flushed.

mod common;

use matrixkv::{Db, Design, Error, NoveLsmOptions, Options, XEngineOptions};

fn xengine(threads: usize, ror_batch: usize) -> Design {
    Design::XEngine(XEngineOptions {
        ror_batch,
        ror_wait: std::time::Duration::from_micros(50),
        recovery_threads: threads,
    })
}

fn options(dir: &std::path::Path, design: Design) -> Options {
    let mut o = common::small_options(dir);
    o.design = design;
    o
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("value {i} round {round} ").into_bytes();
    v.resize(300 + (i as usize % 700), b'a' + (i % 26) as u8);
    v
}

#[test]
fn xengine_values_survive_reopen_with_serial_and_parallel_index_rebuilds() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(options(dir.path(), xengine(0, 1))).unwrap();
        for i in 0..3000 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        for i in (0..3000).step_by(3) {
            db.put(key(i), value(i, 1)).unwrap();
        }
        for i in (0..3000).step_by(7) {
            db.delete(key(i)).unwrap();
        }
        // Close without flushing what the last memtables hold: reopen rebuilds them from the
        // WAL.
        db.close().unwrap();
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> = (0..3000)
        .filter(|i| i % 7 != 0)
        .map(|i| (key(i), value(i, u32::from(i % 3 == 0))))
        .collect();
    for threads in [1, 4] {
        let db = Db::open(options(dir.path(), xengine(threads, 1))).unwrap();
        assert_eq!(common::scan_forward(db.iter().unwrap()), expected);
        assert_eq!(common::scan_backward(db.iter().unwrap()), expected);
        assert_eq!(db.get(key(3)).unwrap(), Some(value(3, 1)));
        assert_eq!(db.get(key(7)).unwrap(), None);
        db.close().unwrap();
    }
}

#[test]
fn a_wal_segment_an_iterator_still_reads_is_never_recycled_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = options(dir.path(), xengine(0, 1));
    o.wal_recycle_segments = 4;
    let db = Db::open(o).unwrap();
    for i in 0..200 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    // The iterator pins the memtable whose values are views of the current WAL segment.
    let pinned = db.iter().unwrap();
    // Many flushes later every older segment is obsolete, and the pool recycles what it can.
    for round in 1..40 {
        for i in 0..200 {
            db.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
    }
    assert!(
        db.stats().wal_segments_recycled > 0,
        "segments not viewed were recycled: {}",
        db.stats()
    );
    let seen = common::scan_forward(pinned);
    let expected: Vec<_> = (0..200).map(|i| (key(i), value(i, 0))).collect();
    assert_eq!(
        seen, expected,
        "the pinned values changed under the iterator"
    );
    db.close().unwrap();
}

#[test]
fn ror_batches_group_concurrent_writers_and_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(Db::open(options(dir.path(), xengine(0, 4))).unwrap());
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = std::sync::Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..500 {
                    let k = t * 1000 + i;
                    db.put_opt(key(k), value(k, 0), &matrixkv::WriteOptions { sync: true })
                        .unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let s = db.stats();
    assert_eq!(s.user_ops, 2000, "{s}");
    assert!(
        s.write_groups < 2000,
        "writers waited for each other into shared groups: {s}"
    );
    for t in 0..4u32 {
        for i in (0..500).step_by(37) {
            let k = t * 1000 + i;
            assert_eq!(db.get(key(k)).unwrap(), Some(value(k, 0)));
        }
    }
}

#[test]
fn the_design_is_fixed_when_the_database_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(options(dir.path(), xengine(0, 1))).unwrap();
    db.put(b"k", b"v").unwrap();
    db.close().unwrap();
    match Db::open(options(dir.path(), Design::MatrixKv)) {
        Err(Error::OptionMismatch {
            option,
            stored,
            given,
        }) => {
            assert_eq!(
                (option, stored.as_str(), given.as_str()),
                ("design", "xengine", "matrixkv")
            );
        }
        other => panic!("expected a design mismatch, got {:?}", other.map(|_| ())),
    }
    // The knobs are not fixed.
    let db = Db::open(options(dir.path(), xengine(2, 8))).unwrap();
    assert_eq!(db.get(b"k").unwrap(), Some(b"v".to_vec()));
    db.close().unwrap();
}

#[test]
fn xengine_knobs_out_of_range_are_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    for bad in [0, 5000] {
        let r = Db::open(options(dir.path(), xengine(0, bad)));
        assert!(
            matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("ror_batch")),
            "{:?}",
            r.map(|_| ())
        );
    }
}

fn novelsm(bytes: u64) -> Design {
    Design::NoveLsm(NoveLsmOptions {
        persistent_memtable_bytes: bytes,
        ..NoveLsmOptions::default()
    })
}

/// Names of the persistent memtable regions in the fast tier.
fn pmt_files(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir.join("fast"))
        .map(|d| {
            d.map(|e| {
                e.expect("helper")
                    .file_name()
                    .to_string_lossy()
                    .into_owned()
            })
            .filter(|n| n.ends_with(".pmt"))
            .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Writes three rounds over `n` keys (puts, overwrites, deletes, a range delete) and returns
/// what the database must hold.
fn novelsm_rounds(db: &Db, n: u32) -> std::collections::BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = std::collections::BTreeMap::new();
    for round in 0..3 {
        for i in 0..n {
            if (i + round) % 3 == 0 {
                db.put(key(i), value(i, round)).expect("helper");
                model.insert(key(i), value(i, round));
            }
        }
        for i in (round..n).step_by(11) {
            db.delete(key(i)).expect("helper");
            model.remove(&key(i));
        }
    }
    // A range delete, and a batch mixing it with puts.
    let mut b = matrixkv::WriteBatch::new();
    b.delete_range(key(100), key(140));
    b.put(key(120), b"inside the range, after it");
    db.write(b).expect("helper");
    model.retain(|k, _| !(key(100) <= *k && *k < key(140)));
    model.insert(key(120), b"inside the range, after it".to_vec());
    model
}

fn assert_holds(db: &Db, model: &std::collections::BTreeMap<Vec<u8>, Vec<u8>>) {
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(common::scan_forward(db.iter().expect("helper")), expected);
    assert_eq!(common::scan_backward(db.iter().expect("helper")), expected);
    for i in (0..3000).step_by(13) {
        assert_eq!(
            db.get(key(i)).expect("helper").as_ref(),
            model.get(&key(i)),
            "key {i}"
        );
    }
}

#[test]
fn novelsm_alternates_dram_and_persistent_memtables_and_loses_nothing_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    // 64 KiB DRAM memtables, 256 KiB persistent ones.
    let o = || options(dir.path(), novelsm(256 << 10));
    let db = Db::open(o()).unwrap();
    let model = novelsm_rounds(&db, 3000);
    let s = db.stats();
    assert!(s.persistent_memtable_bytes > 0, "{s}");
    assert!(s.wal_bytes > 0, "the DRAM memtables log their writes: {s}");
    assert!(s.flushes >= 4, "{s}");
    assert_holds(&db, &model);
    db.close().unwrap();
    // Reopen: unflushed persistent memtables come back from their regions.
    let db = Db::open(o()).unwrap();
    assert_holds(&db, &model);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    // Flushed persistent memtables are deleted.
    assert!(
        pmt_files(dir.path()).len() <= 1,
        "{:?}",
        pmt_files(dir.path())
    );
    assert_holds(&db, &model);
    db.verify().unwrap();
    db.close().unwrap();
}

/// Found by `scripts/crashtest` (seed 107337987453283): a kill -9 between the creation of a
/// persistent memtable's region and the write of its header left a region of zeros, and the
/// next open refused it as corrupt ("bad magic number"). A region that was never started
/// held no write: the open skips it.
#[test]
fn novelsm_a_persistent_memtable_created_but_never_started_is_skipped_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let o = || options(dir.path(), novelsm(256 << 10));
    let db = Db::open(o()).unwrap();
    let model = novelsm_rounds(&db, 3000);
    db.close().unwrap();
    // What the switch to a new persistent memtable leaves when the process dies before the
    // header is written: the region, all zeros, numbered after everything else.
    let blank = dir.path().join("fast").join("900000.pmt");
    std::fs::write(&blank, vec![0u8; 256 << 10]).unwrap();
    let db = Db::open(o()).unwrap_or_else(|e| panic!("reopen with a blank region: {e}"));
    assert_holds(&db, &model);
    db.put(key(1), b"after").unwrap();
    db.close().unwrap();
    // That one is obsolete now (the log number passed it). A region with bytes in it that
    // are not a header is still corruption.
    let garbage = dir.path().join("fast").join("990000.pmt");
    std::fs::write(&garbage, vec![7u8; 256 << 10]).unwrap();
    assert!(Db::open(o()).unwrap_err().is_corruption());
}

#[test]
fn novelsm_writes_in_a_persistent_memtable_survive_a_crash_without_a_wal_record() {
    use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    // A persistent memtable large enough for everything after the first DRAM memtable (and a
    // container that can take it: persistent memtables are capped at half of it).
    let o = |fs: &MemFs, fast: &SimFastTier| {
        let mut opts = options(std::path::Path::new("/db"), novelsm(8 << 20));
        opts.container_bytes = 16 << 20;
        common::on_simulated_tiers(opts, fs, fast)
    };
    let db = Db::open(o(&fs, &fast)).unwrap();
    // Fill the first DRAM memtable; the next writes go to a persistent memtable.
    let mut i = 0;
    while db.stats().flushes == 0 && i < 100_000 {
        db.put(key(i), value(i, 0)).unwrap();
        i += 1;
    }
    let wal_before = db.stats().wal_bytes;
    for j in 0..500 {
        db.put(key(50_000 + j), value(j, 1)).unwrap();
    }
    let s = db.stats();
    assert_eq!(
        s.wal_bytes, wal_before,
        "no WAL record for the persistent memtable: {s}"
    );
    assert!(s.persistent_memtable_bytes > 500 * 300, "{s}");
    // Power loss: unsynced file data and unpersisted stores are dropped. Non-sync writes to
    // the persistent memtable were persisted in place and survive.
    let (fs2, fast2) = fs.crash_with(FsCrashMode::DropUnsynced, 1, || {
        fast.crash(CrashPolicy::DropUnpersisted)
    });
    drop(db);
    let db = Db::open(o(&fs2, &fast2)).unwrap_or_else(|e| panic!("reopen after the crash: {e}"));
    for j in 0..500 {
        assert_eq!(
            db.get(key(50_000 + j)).unwrap(),
            Some(value(j, 1)),
            "key {j}"
        );
    }
    assert_eq!(db.get(key(0)).unwrap(), Some(value(0, 0)));
    db.close().unwrap();
}

#[test]
fn novelsm_parallel_level_reads_answer_as_the_serial_path_does() {
    let dir = tempfile::tempdir().unwrap();
    let design = |parallel_reads| {
        Design::NoveLsm(NoveLsmOptions {
            persistent_memtable_bytes: 256 << 10,
            parallel_reads,
        })
    };
    let mut o = options(dir.path(), design(true));
    o.merge_operator = Some(std::sync::Arc::new(matrixkv::AppendOperator::new(b",")));
    let db = Db::open(o.clone()).unwrap();
    let model = novelsm_rounds(&db, 3000);
    // Merge operands spread over several levels: the parallel path hands them to the serial one.
    for round in 0..3 {
        for i in (0..3000).step_by(97) {
            db.merge(key(i), format!("m{round}")).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
    }
    db.close().unwrap();
    let answers = |parallel: bool| {
        let mut o = o.clone();
        o.design = design(parallel);
        let db = Db::open(o).unwrap();
        let got: Vec<Option<Vec<u8>>> = (0..3100).map(|i| db.get(key(i)).unwrap()).collect();
        let s = db.stats();
        db.close().unwrap();
        (got, s)
    };
    let (serial, _) = answers(false);
    let (parallel, s) = answers(true);
    assert_eq!(parallel, serial);
    assert!(s.get_hits_levels > 0, "{s}");
    // The values the rounds left (merged keys aside) are the model's.
    for (i, got) in serial.iter().enumerate().take(3000) {
        if i % 97 != 0 {
            assert_eq!(got.as_ref(), model.get(&key(i as u32)), "key {i}");
        }
    }
}

#[test]
fn novelsm_a_read_only_handle_reads_the_unflushed_persistent_memtable_beside_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let o = options(dir.path(), novelsm(8 << 20));
    let db = Db::open(o.clone()).unwrap();
    // Past the first DRAM memtable: the later writes are in a persistent memtable only.
    let mut i = 0;
    while db.stats().flushes == 0 && i < 100_000 {
        db.put(key(i), value(i, 0)).unwrap();
        i += 1;
    }
    for j in 0..300 {
        db.put(key(60_000 + j), value(j, 2)).unwrap();
    }
    let ro = Db::open_read_only(o).unwrap();
    for j in (0..300).step_by(17) {
        assert_eq!(
            ro.get(key(60_000 + j)).unwrap(),
            Some(value(j, 2)),
            "key {j}"
        );
    }
    assert_eq!(ro.get(key(0)).unwrap(), Some(value(0, 0)));
    drop(ro);
    db.close().unwrap();
}

/// A persistent memtable larger than the matrix container can take (8 MiB of region, a
/// 1 MiB container) must switch before its flush needs more pages than the container has:
/// the flush of one that held 1.3 MiB poisoned the database ("a memtable needs 326 pages but
/// the container has only 256"), seen when a loaded machine delayed the first flush.
#[test]
fn novelsm_persistent_memtables_never_outgrow_the_container() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(options(dir.path(), novelsm(8 << 20))).expect("open");
    let mut model = std::collections::BTreeMap::new();
    // 3 MiB of writes: the persistent memtables take most of them, whatever the timing.
    for i in 0..5000u32 {
        db.put(key(i), value(i, 1)).expect("put");
        model.insert(key(i), value(i, 1));
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait_for_compactions");
    for (k, v) in &model {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v));
    }
}
