//! Direct I/O writes of tables and blob files (`Options::direct_writes`, `tier/direct.rs`):
//! what is written reads back byte for byte on a disk file system, tmpfs falls back to the page
//! cache, and a database written with direct I/O survives reopen and `verify`.

use matrixkv::tier::{FileSystem, StdFs};
use matrixkv::{Db, Options};

const MIB: usize = 1 << 20;

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

/// Appends of sizes that straddle 4 KiB blocks and the 1 MiB buffer, with a sync after every
/// other one (a partial last block is rewritten whole by the next write).
fn write_and_check(dir: &std::path::Path) {
    let path = dir.join("t.sst");
    let mut w = StdFs.create_direct(&path, 1 << 20).expect("direct io");
    let mut expect = Vec::new();
    for (i, len) in [1, 4095, 4096, 4097, 10, MIB, 3 * MIB + 17, 0, 5, MIB - 1]
        .into_iter()
        .enumerate()
    {
        let data = pattern(len, i as u8);
        w.append(&data).expect("direct io");
        expect.extend_from_slice(&data);
        if i % 2 == 0 {
            w.sync().expect("direct io");
            assert_eq!(
                std::fs::read(&path).expect("direct io"),
                expect,
                "after append {i}"
            );
        }
    }
    w.sync().expect("direct io");
    assert_eq!(w.len(), expect.len() as u64);
    assert_eq!(std::fs::read(&path).expect("direct io"), expect);
    let r = StdFs.open(&path).expect("direct io");
    let mut tail = vec![0u8; 100];
    r.read_exact_at(r.len() - 100, &mut tail)
        .expect("direct io");
    assert_eq!(tail, expect[expect.len() - 100..]);
}

#[test]
fn direct_writes_read_back_exactly_on_a_disk_file_system() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("direct io");
    write_and_check(dir.path());
}

#[test]
fn direct_writes_fall_back_to_the_page_cache_on_tmpfs() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("SKIP: no /dev/shm on this machine");
        return;
    }
    let dir = tempfile::tempdir_in(shm).expect("direct io");
    write_and_check(dir.path());
}

#[test]
fn an_empty_direct_file_is_empty_after_sync() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("direct io");
    let path = dir.path().join("e");
    let mut w = StdFs.create_direct(&path, 1 << 20).expect("direct io");
    w.sync().expect("direct io");
    assert_eq!(std::fs::metadata(&path).expect("direct io").len(), 0);
}

#[test]
fn a_database_written_with_direct_io_survives_reopen_and_verify() {
    let dir = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("direct io");
    let options = || {
        let mut o = Options::new(dir.path());
        o.direct_writes = true;
        o.write_buffer_bytes = 256 << 10;
        o.container_bytes = 4 << 20;
        o.target_file_bytes = 256 << 10;
        o.l1_target_bytes = 1 << 20;
        o.min_blob_bytes = Some(512);
        o.blob_file_bytes = 256 << 10;
        o
    };
    let value = |i: u32| {
        let len = if i.is_multiple_of(3) { 100 } else { 1500 };
        let mut v = format!("value-{i}-").into_bytes();
        v.resize(len, (i % 251) as u8);
        v
    };
    let db = Db::open(options()).expect("direct io");
    for round in 0..3u32 {
        for i in 0..3000u32 {
            db.put(
                format!("key{:05}", (i * 7 + round) % 3000).as_bytes(),
                value(i),
            )
            .expect("direct io");
        }
        db.flush().expect("direct io");
    }
    db.wait_for_compactions().expect("direct io");
    assert!(db.stats().compactions > 0, "the workload must compact");
    db.close().expect("direct io");
    let db = Db::open(options()).expect("direct io");
    db.verify().expect("direct io");
    for i in 0..3000u32 {
        let key = format!("key{:05}", (i * 7 + 2) % 3000);
        assert_eq!(
            db.get(key.as_bytes()).expect("direct io"),
            Some(value(i)),
            "{key}"
        );
    }
    db.close().expect("direct io");
}
