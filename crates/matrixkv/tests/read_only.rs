//! `Db::open_read_only`: takes the fixed options from the database, changes nothing on either
//! tier, refuses every change, and reads a consistent view as of the open, also beside a live
//! read-write handle.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::SystemTime;

use matrixkv::{Db, Error, KeyspaceOptions, Options, WriteBatch};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let mut v = format!("{i}/{round}/").into_bytes();
    v.resize(100 + (i as usize % 1500), b'x');
    v
}

/// Every file under `dir`: its length, modification time and bytes.
fn files(dir: &Path) -> BTreeMap<String, (u64, SystemTime, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("list") {
            let e = e.expect("entry");
            let p = e.path();
            let m = e.metadata().expect("metadata");
            if m.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).expect("read");
                let name = p
                    .strip_prefix(dir)
                    .expect("under dir")
                    .display()
                    .to_string();
                out.insert(name, (m.len(), m.modified().expect("mtime"), bytes));
            }
        }
    }
    out
}

/// A database made with non-default fixed options: a 1 MiB container, data in L1, in the
/// container, in a keyspace, and in the WAL only (the last writes are never flushed).
fn make_db(dir: &Path) -> Vec<(Vec<u8>, Vec<u8>)> {
    let db = Db::open(common::small_options(dir)).expect("make_db");
    let side = db
        .create_keyspace("side", KeyspaceOptions::default())
        .expect("make_db");
    for i in 0..3000 {
        db.put(key(i), value(i, 0)).expect("make_db");
    }
    db.compact_range(None, None).expect("make_db");
    for i in (0..3000).step_by(2) {
        db.put(key(i), value(i, 1)).expect("make_db");
    }
    db.flush().expect("make_db");
    for i in (0..3000).step_by(5) {
        db.delete(key(i)).expect("make_db");
    }
    side.put(b"s", b"side value").expect("make_db");
    drop(side);
    db.close().expect("make_db");
    (0..3000)
        .filter(|i| i % 5 != 0)
        .map(|i| (key(i), value(i, u32::from(i % 2 == 0))))
        .collect()
}

#[test]
fn a_read_only_session_changes_no_byte_of_either_tier() {
    let dir = tempfile::tempdir().unwrap();
    let expected = make_db(dir.path());
    let before = files(dir.path());
    {
        // Default options: the container size and the rest come from the database.
        let db = Db::open_read_only(Options::new(dir.path())).unwrap();
        assert!(db.is_read_only());
        assert_eq!(common::scan_forward(db.iter().unwrap()), expected);
        assert_eq!(common::scan_backward(db.iter().unwrap()), expected);
        assert_eq!(db.get(key(2)).unwrap(), Some(value(2, 1)));
        assert_eq!(db.get(key(5)).unwrap(), None);
        assert_eq!(
            db.keyspace("side").unwrap().get(b"s").unwrap(),
            Some(b"side value".to_vec())
        );
        let snap = db.snapshot();
        assert_eq!(snap.get(key(3)).unwrap(), Some(value(3, 0)));
        drop(snap);
        assert!(db.verify().unwrap() > 0);
        let _ = db.stats().to_string();
        db.get_property("matrixkv.levelstats").unwrap();
        db.close().unwrap();
    }
    let after = files(dir.path());
    assert_eq!(
        before.keys().collect::<Vec<_>>(),
        after.keys().collect::<Vec<_>>(),
        "no file was created or deleted"
    );
    for (name, b) in &before {
        assert!(after[name] == *b, "{name} changed");
    }
}

#[test]
fn every_change_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    make_db(dir.path());
    let db = Db::open_read_only(Options::new(dir.path())).unwrap();
    let refused = |r: matrixkv::Result<()>, what: &str| match r {
        Err(Error::ReadOnly { op }) => {
            assert!(!op.is_empty());
            let msg = Error::ReadOnly { op }.to_string();
            assert!(msg.contains("read-only"), "{msg}");
        }
        other => panic!("{what}: expected ReadOnly, got {other:?}"),
    };
    refused(db.put(b"a", b"b"), "put");
    refused(db.delete(b"a"), "delete");
    refused(db.delete_range(b"a", b"b"), "delete_range");
    refused(db.merge(b"a", b"b"), "merge");
    let mut b = WriteBatch::new();
    b.put(b"a", b"b");
    refused(db.write(b), "write");
    refused(db.flush(), "flush");
    refused(db.compact_range(None, None), "compact_range");
    refused(db.wait_for_compactions(), "wait_for_compactions");
    refused(
        db.create_keyspace("new", KeyspaceOptions::default())
            .map(|_| ()),
        "create_keyspace",
    );
    refused(db.drop_keyspace("side"), "drop_keyspace");
    refused(db.keyspace("side").unwrap().put(b"a", b"b"), "keyspace put");
    let target = dir.path().join("copy");
    refused(db.checkpoint(&target).map(|_| ()), "checkpoint");
    assert!(!target.exists());
    db.close().unwrap();
}

#[test]
fn nothing_is_created_where_there_is_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("none");
    let r = Db::open_read_only(Options::new(&path));
    assert!(
        matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("creates nothing")),
        "{:?}",
        r.map(|_| ())
    );
    assert!(!path.exists());
}

#[test]
fn beside_a_live_writer_it_reads_the_view_as_of_its_open() {
    view_beside_a_live_writer(matrixkv::Design::MatrixKv);
}

#[test]
fn beside_a_live_writer_the_x_engine_design_reads_its_own_copy_of_the_log() {
    // The semi-persistent memtable's values point into WAL segments, which the writer
    // recycles: the read-only handle's must point into its private copies.
    view_beside_a_live_writer(matrixkv::Design::XEngine(Default::default()));
}

fn view_beside_a_live_writer(design: matrixkv::Design) {
    let dir = tempfile::tempdir().expect("beside a live writer");
    let mut o = common::small_options(dir.path());
    o.design = design;
    let writer = Db::open(o).expect("beside a live writer");
    for i in 0..2000 {
        writer
            .put(key(i), value(i, 0))
            .expect("beside a live writer");
    }
    // The writer holds the database's lock; the read-only handle takes none.
    let ro = Db::open_read_only(Options::new(dir.path())).expect("beside a live writer");
    for i in (0..2000).step_by(7) {
        assert_eq!(
            ro.get(key(i)).expect("beside a live writer"),
            Some(value(i, 0)),
            "acknowledged write {i}"
        );
    }
    // Writes after the open are not seen; a new read-only handle sees them.
    writer.put(b"later", b"1").expect("beside a live writer");
    assert_eq!(ro.get(b"later").expect("beside a live writer"), None);
    let ro2 = Db::open_read_only(Options::new(dir.path())).expect("beside a live writer");
    assert_eq!(
        ro2.get(b"later").expect("beside a live writer"),
        Some(b"1".to_vec())
    );
    // The writer rewrites everything (flushes, compactions, deleted files, reused container
    // pages): the old view then reads its data or fails, never returns other data.
    for i in 0..2000 {
        writer
            .put(key(i), value(i, 1))
            .expect("beside a live writer");
    }
    writer
        .compact_range(None, None)
        .expect("beside a live writer");
    for i in 0..2000 {
        match ro.get(key(i)) {
            Ok(v) => assert_eq!(v, Some(value(i, 0)), "key {i} through the old view"),
            Err(e) => assert!(
                !matches!(e, Error::ReadOnly { .. }),
                "a stale view fails with the storage error, got {e}"
            ),
        }
    }
    ro.close().expect("beside a live writer");
    ro2.close().expect("beside a live writer");
    writer.close().expect("beside a live writer");
}
