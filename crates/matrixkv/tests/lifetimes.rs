//! What handles and reads may rely on while other threads flush, compact and close: a read's
//! view and sequence number agree whatever installs between them, and a handle that outlives
//! its `Db` (a `Keyspace`, a `Snapshot`) answers `Error::Closed` at once and writes nothing.

use std::sync::Arc;
use std::sync::mpsc;
use std::time::Duration;

use matrixkv::{Db, Error, KeyspaceOptions, Options};

mod common;

fn opts(path: &std::path::Path) -> Options {
    common::small_options(path)
}

/// Runs `f` on a thread and returns its result, failing the test if it does not return
/// within 20 s (a hang is the defect these tests look for).
fn within_deadline<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(20))
        .unwrap_or_else(|_| panic!("{what} did not return within 20 s"))
}

/// Issue 37 item 1: a write and a flush that install between a read's view and its sequence
/// number must not make the read miss the key. With the sequence number taken first, the
/// flush keeps only the newest version (its `smallest_snapshot` is past the read's unregistered
/// sequence number) and the read finds nothing at its older sequence number.
#[test]
fn a_flush_between_a_reads_view_and_its_sequence_number_hides_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(opts(dir.path())).expect("open"));
    type Read = fn(&Db) -> Option<Vec<u8>>;
    let reads: [(&str, Read); 3] = [
        ("get", |db| db.get(b"k").expect("get")),
        ("multi_get", |db| {
            db.multi_get([b"k"]).pop().expect("one").expect("multi_get")
        }),
        ("iterator", |db| {
            let mut it = db.iter().expect("iter");
            it.seek(b"k").expect("seek");
            (it.valid() && it.key() == b"k").then(|| it.value().to_vec())
        }),
    ];
    for (round, (name, read)) in reads.into_iter().enumerate() {
        let old = format!("old-{round}");
        let new = format!("new-{round}");
        db.put(b"k", old.as_bytes()).expect("put");
        let writer = Arc::clone(&db);
        let new_value = new.clone();
        db.hook_after_read_view(move || {
            writer.put(b"k", new_value.as_bytes()).expect("put in hook");
            writer.flush().expect("flush in hook");
        });
        let got = read(&db);
        assert!(
            got.as_deref() == Some(old.as_bytes()) || got.as_deref() == Some(new.as_bytes()),
            "{name}: the key read as {:?}",
            got.map(|v| String::from_utf8_lossy(&v).into_owned())
        );
    }
}

/// Issue 37 item 2: operations through handles cloned before `Db::close` return
/// `Error::Closed` at once (they used to append to the WAL after the lock was released, and
/// `compact_range` waited forever for a background thread that was gone); nothing they did
/// is in the database when it is opened again.
#[test]
fn handles_outliving_close_answer_closed_and_write_nothing() {
    for close in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(opts(dir.path())).expect("open");
        let ks = db
            .create_keyspace("ks", KeyspaceOptions::default())
            .expect("create_keyspace");
        ks.put(b"before", b"1").expect("put");
        let snapshot = db.snapshot();
        if close {
            db.close().expect("close");
        } else {
            drop(db);
        }
        let ks2 = ks.clone();
        let results = within_deadline("operations after close", move || {
            vec![
                ("put", ks2.put(b"after", b"2").err()),
                ("delete", ks2.delete(b"before").err()),
                ("merge", ks2.merge(b"m", b"x").err()),
                ("delete_range", ks2.delete_range(b"a", b"z").err()),
                ("compact_range", ks2.compact_range(None, None).err()),
                ("get", ks2.get(b"before").err()),
                ("iter", ks2.iter().err()),
                (
                    "multi_get",
                    ks2.multi_get([b"before"]).pop().and_then(|r| r.err()),
                ),
                ("snapshot get", snapshot.get(b"before").err()),
            ]
        });
        for (op, err) in results {
            assert!(
                matches!(err, Some(Error::Closed)),
                "{op} after {}: {err:?}",
                if close { "close" } else { "drop" }
            );
        }
        drop(ks);
        let mut o = opts(dir.path());
        o.keyspace_options
            .insert("ks".into(), KeyspaceOptions::default());
        let db = Db::open(o).expect("reopen");
        let ks = db.keyspace("ks").expect("keyspace");
        assert_eq!(ks.get(b"before").expect("get").as_deref(), Some(&b"1"[..]));
        assert_eq!(
            ks.get(b"after").expect("get"),
            None,
            "a write after close landed"
        );
    }
}

/// A value of `len` bytes naming `tag`.
fn big(tag: &str, len: usize) -> Vec<u8> {
    let mut v = tag.as_bytes().to_vec();
    v.resize(len, b'.');
    v
}

/// Values separated as they are written (3000 B, above the 2 KiB default threshold) into
/// 256 KiB memtables' value files.
fn at_write_opts(path: &std::path::Path) -> Options {
    let mut o = Options::new(path);
    o.write_buffer_bytes = 256 << 10;
    o.container_bytes = 16 << 20;
    o
}

/// Issue 37: a read holding a view whose memtable points into a value file (values separated
/// at write) must find the file whatever happens to it meanwhile: copied out and dropped by
/// the memtable's flush (mostly garbage), or installed and later emptied by compaction and
/// blob GC. The memtable keeps its value file alive (docs/design.md, "Blob file lifetime").
#[test]
fn a_memtables_value_file_outlives_every_view_that_holds_the_memtable() {
    for relocated in [true, false] {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Arc::new(Db::open(at_write_opts(dir.path())).expect("open"));
        db.put(b"k", big("v0", 3000)).expect("put");
        let writer = Arc::clone(&db);
        db.hook_after_read_view(move || {
            // Overwrites in the same memtable make its value file mostly garbage (its flush
            // copies the live value out and drops the file); without them the file installs.
            let rounds = if relocated { 40 } else { 0 };
            for i in 1..=rounds {
                writer.put(b"k", big(&format!("v{i}"), 3000)).expect("put");
            }
            // Two syncs close together shorten the mapped value file to its records (no room
            // for a footer follows the last one): the read of the last record must still find
            // it once the file is dropped unfinished.
            writer.sync_wal().expect("sync_wal");
            writer.put(b"k", big("v-last", 3000)).expect("put");
            writer.sync_wal().expect("sync_wal");
            writer.flush().expect("flush");
            // Later memtables overwrite the key, and compactions drop every older value.
            for i in 0..200 {
                writer.put(b"k", big(&format!("w{i}"), 3000)).expect("put");
                writer
                    .put(format!("f{i}"), big("filler", 3000))
                    .expect("put");
            }
            writer.flush().expect("flush");
            writer.compact_range(None, None).expect("compact_range");
            writer.wait_for_compactions().expect("wait_for_compactions");
        });
        let got = db
            .get(b"k")
            .unwrap_or_else(|e| panic!("relocated={relocated}: {e}"));
        let got = got.expect("k exists");
        assert!(
            got.starts_with(b"v"),
            "relocated={relocated}: the view's value"
        );
    }
}

/// An iterator pins the container pages of the version it reads. A thread that holds one
/// and keeps writing must not wait forever for pages only its own iterator keeps: the writes
/// either go on or fail with a clear error once `no_space_timeout` passes.
#[test]
fn writes_behind_an_old_iterator_go_on_or_fail_they_never_hang() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = opts(dir.path());
    o.no_space_timeout = Duration::from_secs(2);
    let db = Arc::new(Db::open(o).expect("open"));
    for i in 0..2000u32 {
        db.put(format!("k{i:05}"), vec![b'a'; 300]).expect("put");
    }
    db.flush().expect("flush");
    let writer = Arc::clone(&db);
    let outcome = within_deadline("writes behind an old iterator", move || {
        let it = writer.iter().expect("iter");
        let mut failed = None;
        for i in 0..20_000u32 {
            if let Err(e) = writer.put(format!("k{:05}", i % 2000), vec![b'b'; 300]) {
                failed = Some(e);
                break;
            }
        }
        drop(it);
        failed
    });
    if let Some(e) = outcome {
        assert!(
            matches!(e, Error::NoSpace { .. }) && e.to_string().contains("iterator"),
            "a write behind an old iterator failed with an unclear error: {e}"
        );
    }
    db.put(b"after", b"1")
        .expect("writes go on once the iterator is gone");
}
