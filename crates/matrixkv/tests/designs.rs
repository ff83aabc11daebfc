//! The engine's designs (`Options::design`) on real mapped files: X-Engine's semi-persistent
//! memtable keeps values in the WAL records, survives reopen with serial and parallel index
//! rebuilds, never lets a viewed WAL segment be recycled, and is fixed at creation.

mod common;

use matrixkv::{Db, Design, Error, Options, XEngineOptions};

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
