//! Reads racing writes, flushes, compactions and blob GC on real files: every read of a key
//! that always exists returns one of the values written to it, never an error or `None`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use matrixkv::{Db, Options};

const KEYS: u32 = 200;

fn key(i: u32) -> Vec<u8> {
    format!("key{i:04}").into_bytes()
}

/// 200 B to 3.2 KiB, naming key and round, so some are separated at write and some at flush.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = 200 + ((i.wrapping_mul(31).wrapping_add(round.wrapping_mul(17))) % 16) as usize * 200;
    let mut v = format!("key{i:04}@{round};").into_bytes();
    v.resize(len, b'v');
    v
}

fn opts(dir: &std::path::Path, fast: &std::path::Path) -> Options {
    let mut o = Options::new(dir);
    o.fast_dir = fast.to_owned();
    o.write_buffer_bytes = 256 << 10;
    o.container_bytes = 16 << 20;
    o
}

#[test]
fn reads_never_see_a_blob_file_deleted_under_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fast =
        tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().expect("tempdir"));
    let db = Arc::new(Db::open(opts(dir.path(), fast.path())).expect("open"));
    for i in 0..KEYS {
        db.put(key(i), value(i, 0)).expect("put");
    }
    let stop = Arc::new(AtomicBool::new(false));
    let secs = std::env::var("MATRIXKV_RACE_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(6);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let readers: Vec<_> = (0..3)
        .map(|t| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut x = 0x9e37_79b9_u32.wrapping_add(t);
                let mut reads = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    let i = x % KEYS;
                    let got = db
                        .get(key(i))
                        .unwrap_or_else(|e| panic!("get key{i:04}: {e}"));
                    let v = got.unwrap_or_else(|| panic!("key{i:04} missing"));
                    assert!(
                        v.starts_with(format!("key{i:04}@").as_bytes()),
                        "key{i:04} wrong value"
                    );
                    reads += 1;
                }
                reads
            })
        })
        .collect();
    let mut round = 1;
    while Instant::now() < deadline {
        for i in 0..KEYS {
            db.put(key(i), value(i, round)).expect("put");
        }
        round += 1;
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        assert!(r.join().expect("reader") > 0);
    }
}
