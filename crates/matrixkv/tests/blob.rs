//! Key-value separation end to end: values leave L0 for blob files, reads (gets, iterators in
//! both directions, snapshots) resolve them, overwrites turn records into garbage that
//! relocation drains and obsolete-file deletion removes, reopen keeps everything, and damage
//! is reported with the blob file's name.

use std::collections::BTreeMap;
use std::path::Path;

use matrixkv::{ArtifactKind, Db, Error, Options};

mod common;

fn opts(path: &Path) -> Options {
    let mut o = Options::new(path);
    o.write_buffer_bytes = 64 << 10;
    o.container_bytes = 512 << 10;
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(128 << 10);
    o.column_threads = 2;
    o.min_blob_bytes = Some(100);
    // With `separate_at_write` on (the tests of it turn it on): every separable value at write (the default logs those below 2 KiB in the WAL).
    o.separate_at_write_min_bytes = None;
    o.blob_file_bytes = 32 << 10;
    // Values reach the RowTables and leave L0 by column compaction (the tests of
    // `separate_at_flush` turn it on).
    o.separate_at_flush = false;
    o
}

/// [`opts`] with values separated as they are written, into 256 KiB memtables' blob files.
fn at_write_opts(path: &Path) -> Options {
    Options {
        separate_at_flush: true,
        separate_at_write: true,
        write_buffer_bytes: 256 << 10,
        container_bytes: 1 << 20,
        ..opts(path)
    }
}

/// [`opts`] with blob files read through mappings or with `pread`.
fn read_opts(path: &Path, mmap_blob_reads: bool) -> Options {
    Options {
        mmap_blob_reads,
        ..opts(path)
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// Every third value is below the separation threshold and stays inline.
fn value(i: u32, round: u32) -> Vec<u8> {
    let len = if i.is_multiple_of(3) {
        40
    } else {
        300 + (i % 7) as usize * 50
    };
    let mut v = format!("r{round}i{i}-").into_bytes();
    v.resize(len, b'a' + (i % 26) as u8);
    v
}

fn blob_files_on_disk(dir: &Path) -> usize {
    std::fs::read_dir(dir.join("slow"))
        .expect("helper")
        .filter(|e| {
            e.as_ref()
                .expect("helper")
                .file_name()
                .to_string_lossy()
                .ends_with(".blob")
        })
        .count()
}

/// Closes `db`; the blob files left in `dir` are exactly the live ones of `s` (its stats
/// before the close), and the database reopened with `o` reads `model`.
fn close_and_reopen(
    db: Db,
    o: Options,
    dir: &Path,
    s: &matrixkv::Stats,
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
) {
    db.close().expect("close");
    assert_eq!(blob_files_on_disk(dir), s.blob_files, "{s}");
    let db = Db::open(o).expect("reopen");
    check_model(&db, model);
    db.close().expect("close after the reopen");
}

/// Closes `db`, reopens it with `o`, checks it against `model` and verifies every file.
fn reopen_and_verify(db: Db, o: Options, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    db.close().expect("close");
    let db = Db::open(o).expect("reopen");
    check_model(&db, model);
    db.verify().expect("verify");
    db.close().expect("close after the reopen");
}

fn check_model(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for (k, v) in model {
        assert_eq!(db.get(k).expect("helper").as_ref(), Some(v), "get {k:?}");
    }
    let fwd: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .expect("helper")
        .collect::<matrixkv::Result<_>>()
        .expect("helper");
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(fwd == want, "forward scan differs from the model");
    let mut it = db.iter().expect("helper");
    it.seek_to_last().expect("helper");
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().expect("helper");
    }
    back.reverse();
    assert!(back == want, "backward scan differs from the model");
}

/// Blob files read through mappings (`Options::mmap_blob_reads`, the default) and with
/// `pread`.
#[test]
fn large_values_move_to_blob_files_and_read_back_everywhere() {
    for mmap_blob_reads in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let opts = |path: &Path| read_opts(path, mmap_blob_reads);
        let db = Db::open(opts(dir.path())).unwrap();
        let mut model = BTreeMap::new();
        for i in 0..3000 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        let s = db.stats();
        assert!(s.blob_files > 1, "{s}");
        assert!(s.blob_bytes_written > 0, "{s}");
        assert!(s.levels.iter().skip(1).any(|(n, _)| *n > 0), "{s}");
        // The tables hold pointers: far less than the values they stand for.
        let table_bytes: u64 = s.levels.iter().skip(1).map(|(_, b)| b).sum();
        assert!(table_bytes * 3 < s.blob_bytes.0, "{s}");
        check_model(&db, &model);
        // Seeks land on separated values too.
        let mut it = db.iter().unwrap();
        let (k, v) = model.iter().nth(1234).unwrap();
        it.seek(k).unwrap();
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        it.seek_for_prev(k).unwrap();
        assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
        assert!(db.stats().blob_reads > 0);
        assert!(db.verify().unwrap() > s.blob_files);
        db.close().unwrap();
        // Reopen: the manifest knows the blob files.
        let db = Db::open(opts(dir.path())).unwrap();
        assert_eq!(db.stats().blob_files, s.blob_files);
        check_model(&db, &model);
        db.close().unwrap();
    }
}

#[test]
fn values_separated_at_flush_never_reach_the_container_and_read_back_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.separate_at_flush = true;
    let db = Db::open(o.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut written = 0u64;
    for i in 0..3000 {
        db.put(key(i), value(i, 0)).unwrap();
        written += value(i, 0).len() as u64;
        model.insert(key(i), value(i, 0));
    }
    db.flush().unwrap();
    let s = db.stats();
    // Before any compaction: the blob files hold the large values, the rows their pointers
    // and the small values only.
    assert!(s.flushes > 0 && s.blob_files > 0, "{s}");
    assert!(s.blob_bytes_written * 10 > written * 7, "{s}");
    assert!(s.fast_sst_bytes_written * 3 < written, "{s}");
    check_model(&db, &model);
    // Column compaction moves the pointers into L1 without rewriting a value.
    for i in 0..3000 {
        if i % 2 == 0 {
            db.put(key(i), value(i, 1)).unwrap();
            model.insert(key(i), value(i, 1));
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!(s.container_rows, (0, 0), "{s}");
    assert!(
        s.blob_bytes.1 > 0,
        "overwritten pointers are counted as garbage: {s}"
    );
    check_model(&db, &model);
    db.verify().unwrap();
    db.close().unwrap();
    // Reopen, with and without the option: the blob files are in the manifest.
    for separate in [true, false] {
        let mut o = o.clone();
        o.separate_at_flush = separate;
        let db = Db::open(o).unwrap();
        check_model(&db, &model);
        db.close().unwrap();
    }
    assert!(blob_files_on_disk(dir.path()) > 0);
}

/// `separate_at_write`: the WAL logs pointers (it is a fraction of the user bytes), unflushed
/// values are read from the memtable's growing blob file, a reopen without a flush replays the
/// pointers, the flush installs the file (the versions it drops counted as garbage) and the
/// database reads everything back with the option on or off.
#[test]
fn values_separated_at_write_are_logged_as_pointers_and_read_back_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let o = at_write_opts(dir.path());
    let mut model = BTreeMap::new();
    let mut written = 0u64;
    {
        let db = Db::open(o.clone()).unwrap();
        for i in 0..600 {
            db.put(key(i), value(i, 0)).unwrap();
            written += value(i, 0).len() as u64;
            model.insert(key(i), value(i, 0));
        }
        // Overwritten in the same memtable: the flush drops the older versions.
        for i in 0..300 {
            db.put(key(i), value(i, 1)).unwrap();
            written += value(i, 1).len() as u64;
            model.insert(key(i), value(i, 1));
        }
        let s = db.stats();
        assert_eq!(s.flushes, 0, "{s}");
        assert!(s.blob_bytes_at_write * 10 > written * 6, "{s}");
        assert!(s.wal_bytes * 3 < written, "{s}");
        // Gets and an iterator read the unflushed values from the growing file.
        check_model(&db, &model);
        // Closed without a flush: the WAL's pointers are replayed at the next open.
        db.close().unwrap();
    }
    let db = Db::open(o.clone()).unwrap();
    check_model(&db, &model);
    for i in 600..1200 {
        db.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    for i in 600..700 {
        db.put(key(i), value(i, 2)).unwrap();
        model.insert(key(i), value(i, 2));
    }
    db.flush().unwrap();
    let s = db.stats();
    assert!(s.flushes > 0 && s.blob_files > 0, "{s}");
    assert!(
        s.blob_bytes.1 > 0,
        "the versions the flush dropped are garbage of its blob file: {s}"
    );
    check_model(&db, &model);
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    check_model(&db, &model);
    db.verify().unwrap();
    db.close().unwrap();
    for separate in [true, false] {
        let mut o = o.clone();
        o.separate_at_write = separate;
        let db = Db::open(o).unwrap();
        check_model(&db, &model);
        db.close().unwrap();
    }
}

/// `separate_at_write_min_bytes` sends smaller separable values through the WAL; the flush
/// separates them beside the ones the write path put in the memtable's value file.
#[test]
fn values_below_the_at_write_threshold_are_logged_and_separated_by_the_flush() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = at_write_opts(dir.path());
    o.separate_at_write_min_bytes = Some(400);
    let db = Db::open(o.clone()).unwrap();
    let mut model = BTreeMap::new();
    let (mut small, mut large) = (0u64, 0u64);
    for i in 0..600 {
        let v = value(i, 0);
        // 40 bytes stay inline, 300..=350 go through the WAL, 400..=600 to the value file.
        match v.len() {
            0..100 => {}
            100..400 => small += v.len() as u64,
            _ => large += v.len() as u64,
        }
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    assert!(small > 0 && large > 0);
    let s = db.stats();
    assert_eq!(s.flushes, 0, "{s}");
    // The value file holds the large values (with their keys and record headers) only.
    assert!(
        s.blob_bytes_at_write >= large && s.blob_bytes_at_write < large + small,
        "{s}"
    );
    assert!(s.wal_bytes > small, "{s}");
    check_model(&db, &model);
    db.flush().unwrap();
    let s = db.stats();
    // The flush wrote the logged values to a blob file and installed the value file.
    assert!(s.blob_bytes_written >= small + large, "{s}");
    assert!(s.blob_files >= 1, "{s}");
    check_model(&db, &model);
    close_and_reopen(db, o.clone(), dir.path(), &s, &model);
    // Unflushed writes of both kinds come back from the WAL at the next open.
    let db = Db::open(o.clone()).unwrap();
    for i in 600..900 {
        db.put(key(i), value(i, 1)).unwrap();
        model.insert(key(i), value(i, 1));
    }
    reopen_and_verify(db, o, &model);
}

/// With the default options, values of 1 KiB up to 2 KiB are logged in the WAL and values of
/// 2 KiB or more go to the memtable's value file as they are written (decision 0028, items 1
/// and 4); the flush separates both.
#[test]
fn by_default_values_from_2_kib_are_separated_as_they_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::new(dir.path());
    assert_eq!(o.min_blob_bytes, Some(1024));
    assert_eq!(o.separate_at_write_min_bytes, Some(2048));
    assert!(o.separates_at_write());
    let db = Db::open(o.clone()).unwrap();
    let mut model = BTreeMap::new();
    let sizes = [100usize, 1024, 2047, 2048, 5000];
    let mut large = 0u64;
    for i in 0..100 {
        let len = sizes[i as usize % sizes.len()];
        let v = vec![b'a' + (i % 26) as u8; len];
        if len >= 2048 {
            large += len as u64;
        }
        db.put(key(i), &v).unwrap();
        model.insert(key(i), v);
    }
    let s = db.stats();
    assert_eq!(s.flushes, 0, "{s}");
    // The value file holds the values of 2 KiB or more (with keys and record headers) only:
    // the next smaller ones (2,047 bytes) are a fifth of the writes and would push it past.
    assert!(
        s.blob_bytes_at_write >= large && s.blob_bytes_at_write < large + 20 * 2047,
        "{s}"
    );
    // The WAL logs the 1 KiB and 2,047-byte values in full.
    assert!(s.wal_bytes > 20 * (1024 + 2047), "{s}");
    check_model(&db, &model);
    db.flush().unwrap();
    check_model(&db, &model);
    reopen_and_verify(db, o, &model);
}

/// A sync write keeps its value in the WAL.
#[test]
fn a_sync_write_keeps_its_value_in_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.separate_at_flush = true;
    o.separate_at_write = true;
    let db = Db::open(o).unwrap();
    let wo = matrixkv::WriteOptions { sync: true };
    db.put_opt(key(1), value(1, 0), &wo).unwrap();
    let s = db.stats();
    assert_eq!(s.blob_bytes_at_write, 0, "{s}");
    assert!(s.wal_bytes >= value(1, 0).len() as u64, "{s}");
    db.put(key(2), value(2, 0)).unwrap();
    assert!(db.stats().blob_bytes_at_write > 0);
    assert_eq!(db.get(key(1)).unwrap(), Some(value(1, 0)));
    assert_eq!(db.get(key(2)).unwrap(), Some(value(2, 0)));
}

#[test]
fn overwritten_values_become_garbage_and_their_files_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.blob_gc_ratio = 0.3;
    let db = Db::open(o).unwrap();
    let mut model = BTreeMap::new();
    let mut peak_files = 0;
    for round in 0..8 {
        for i in 0..1500 {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
        // Deleted keys make garbage too.
        for i in (0..1500).step_by(11) {
            db.delete(key(i)).unwrap();
            model.remove(&key(i));
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        // Right after the wait, the files the last jobs dropped are already gone.
        let files = db.stats().blob_files;
        assert_eq!(blob_files_on_disk(dir.path()), files, "round {round}");
        peak_files = peak_files.max(files);
    }
    let s = db.stats();
    // 8 rounds of ~1300 separated values of ~450 B each were written; live data is one
    // round's worth. Garbage was counted, files were deleted, and relocation ran.
    assert!(s.blob_bytes_written > 4 * s.blob_bytes.0, "{s}");
    assert!(s.blob_relocated_bytes > 0, "{s}");
    let live = s.blob_bytes.0 - s.blob_bytes.1;
    assert!(live <= s.blob_bytes.0);
    check_model(&db, &model);
    // Every blob file on disk is live: the dropped ones were deleted.
    assert_eq!(blob_files_on_disk(dir.path()), s.blob_files, "{s}");
    assert!(s.blob_files < peak_files.max(1) * 4, "{s}");
    db.verify().unwrap();
    db.close().unwrap();
}

#[test]
fn a_snapshot_keeps_overwritten_blob_values_readable() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path())).unwrap();
    for i in 0..1000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let snap = db.snapshot();
    for round in 1..4 {
        for i in 0..1000 {
            db.put(key(i), value(i, round)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
    }
    for i in (0..1000).step_by(7) {
        assert_eq!(snap.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 3)), "key {i}");
    }
    let old: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter_opt(&snap.read_options())
        .unwrap()
        .collect::<matrixkv::Result<_>>()
        .unwrap();
    assert_eq!(old.len(), 1000);
    assert!(old.iter().all(|(k, v)| {
        let i = (0..1000).find(|&i| key(i) == *k).unwrap();
        *v == value(i, 0)
    }));
    drop(snap);
    db.close().unwrap();
}

#[test]
fn without_min_blob_bytes_every_value_stays_in_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.min_blob_bytes = None;
    let db = Db::open(o).unwrap();
    for i in 0..2000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!((s.blob_files, s.blob_bytes_written), (0, 0), "{s}");
    assert_eq!(blob_files_on_disk(dir.path()), 0);
    assert_eq!(db.get(key(5)).unwrap(), Some(value(5, 0)));
    db.close().unwrap();
    // Turning separation on later keeps the inline values readable and separates new ones.
    let db = Db::open(opts(dir.path())).unwrap();
    for i in 2000..4000 {
        db.put(key(i), value(i, 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert!(db.stats().blob_files > 0);
    for i in (0..4000).step_by(13) {
        assert_eq!(db.get(key(i)).unwrap(), Some(value(i, 0)), "key {i}");
    }
    db.close().unwrap();
}

/// Blob files read through mappings (`Options::mmap_blob_reads`, the default) and with
/// `pread`.
#[test]
fn a_damaged_blob_file_is_reported_with_its_name() {
    for mmap_blob_reads in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let opts = |path: &Path| read_opts(path, mmap_blob_reads);
        let db = Db::open(opts(dir.path())).unwrap();
        for i in 0..2000 {
            db.put(key(i), value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_compactions().unwrap();
        db.close().unwrap();
        // Flip one byte in the middle of every blob file.
        for e in std::fs::read_dir(dir.path().join("slow")).unwrap() {
            let path = e.unwrap().path();
            if path.extension().is_some_and(|x| x == "blob") {
                let mut data = std::fs::read(&path).unwrap();
                let mid = data.len() / 2;
                data[mid] ^= 0x55;
                std::fs::write(&path, data).unwrap();
            }
        }
        let db = Db::open(opts(dir.path())).unwrap();
        match db.verify() {
            Err(Error::Corruption { site, .. }) => {
                assert_eq!(site.kind, ArtifactKind::Blob);
                assert!(site.path.to_string_lossy().ends_with(".blob"), "{site:?}");
            }
            other => panic!("verify missed the damage: {other:?}"),
        }
        // Reads of the damaged records fail with corruption; no read returns wrong bytes.
        let mut failures = 0;
        for i in 0..2000 {
            match db.get(key(i)) {
                Ok(v) => assert_eq!(v, Some(value(i, 0)), "key {i}"),
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    failures += 1;
                }
            }
        }
        assert!(failures > 0);
        db.close().unwrap();
    }
}

/// Options for the blob GC tests: two levels, so every table is in the last level (L1) and
/// overwrites leave garbage in its blob files, and no relocation by passing compactions
/// (`blob_gc_ratio` 1), so only the GC job can drain a file that still holds live records.
fn gc_opts(path: &Path, budget: f64) -> Options {
    let mut o = opts(path);
    o.num_levels = 2;
    o.blob_gc_ratio = 1.0;
    o.blob_space_budget = budget;
    o
}

/// The round whose value key `i` holds after `rounds` rounds of [`overwrite_cold_keys`] (and
/// later ones): round 0 writes every key, round r ≥ 1 the keys with `i % 3 == 1` (odd r) or
/// `i % 3 == 2` (even r). Keys with `i % 3 == 0` hold small inline values.
fn round_of(i: u32, rounds: u32) -> u32 {
    (0..rounds)
        .filter(|&r| r == 0 || i % 3 == if r % 2 == 1 { 1 } else { 2 })
        .max()
        .unwrap_or(0)
}

/// Writes one round (see [`round_of`]) of `n` keys, flushes and waits for compactions.
fn write_round(db: &Db, n: u32, round: u32, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in (0..n).filter(|&i| round_of(i, round + 1) == round) {
        db.put(key(i), value(i, round)).expect("helper");
        model.insert(key(i), value(i, round));
    }
    db.flush().expect("helper");
    db.wait_for_compactions().expect("helper");
}

/// Rounds 0 and 1, a snapshot, round 2: the overwrites leave about half of the first blob
/// files' records garbage (the other half stays live, so no file drains by itself), and
/// round 2's overwrites are needed by the snapshot. Returns the snapshot.
fn overwrite_cold_keys(
    db: &Db,
    n: u32,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) -> matrixkv::Snapshot {
    write_round(db, n, 0, model);
    write_round(db, n, 1, model);
    let snap = db.snapshot();
    write_round(db, n, 2, model);
    snap
}

fn space_ratio(s: &matrixkv::Stats) -> f64 {
    s.blob_bytes.0 as f64 / (s.blob_bytes.0 - s.blob_bytes.1).max(1) as f64
}

#[test]
fn blob_gc_drains_garbage_in_last_level_files_under_the_space_budget() {
    const N: u32 = 3000;
    // Without the GC job the garbage of the cold files stays.
    let control = tempfile::tempdir().unwrap();
    let db = Db::open(gc_opts(control.path(), f64::INFINITY)).unwrap();
    let snap = overwrite_cold_keys(&db, N, &mut BTreeMap::new());
    let s = db.stats();
    assert_eq!(s.blob_gc_jobs, 0, "{s}");
    assert!(
        space_ratio(&s) > 1.25,
        "the workload must leave garbage: {s}"
    );
    assert!(s.levels[1].0 > 0, "data must reach the last level: {s}");
    drop(snap);
    db.close().unwrap();

    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(gc_opts(dir.path(), 1.1)).unwrap();
    let mut model = BTreeMap::new();
    let snap = overwrite_cold_keys(&db, N, &mut model);
    let s = db.stats();
    assert!(s.blob_gc_jobs > 0, "{s}");
    assert!(s.blob_gc_relocated_bytes > 0, "{s}");
    assert!(space_ratio(&s) <= 1.1, "{s}");
    // Every value is readable, the older ones through the snapshot.
    check_model(&db, &model);
    for i in 0..N {
        assert_eq!(
            snap.get(key(i)).unwrap(),
            Some(value(i, round_of(i, 2))),
            "key {i}"
        );
    }
    let old: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter_opt(&snap.read_options())
        .unwrap()
        .collect::<matrixkv::Result<_>>()
        .unwrap();
    assert_eq!(old.len(), N as usize);
    // Releasing the snapshot lets round 2's overwrites turn round 0 into garbage as well;
    // the files stay within the budget (whether by GC jobs or by whole files draining
    // depends on timing).
    drop(snap);
    write_round(&db, N, 3, &mut model);
    let s2 = db.stats();
    assert!(space_ratio(&s2) <= 1.1, "{s2}");
    check_model(&db, &model);
    db.verify().unwrap();
    db.close().unwrap();
    // Reopen: the tables' blob references come back from the manifest; the files GC dropped
    // are gone from the disk.
    let db = Db::open(gc_opts(dir.path(), 1.1)).unwrap();
    check_model(&db, &model);
    let s3 = db.stats();
    assert_eq!(blob_files_on_disk(dir.path()), s3.blob_files, "{s3}");
    db.wait_for_compactions().unwrap();
    db.close().unwrap();
}

/// `separate_at_write`: a clean close makes every acknowledged write durable, the values in
/// the memtable's blob file included, so a power loss right after it (every unsynced byte of
/// both tiers dropped) loses nothing.
#[test]
fn a_close_makes_values_separated_at_write_durable() {
    use matrixkv::tier::{MemFs, SimFastTier};
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let o = at_write_opts(Path::new("/db"));
    let mut model = BTreeMap::new();
    {
        let db = Db::open(common::on_simulated_tiers(o.clone(), &fs, &fast)).unwrap();
        for i in 0..300 {
            db.put(key(i), value(i, 0)).unwrap();
            model.insert(key(i), value(i, 0));
        }
        let s = db.stats();
        assert_eq!(s.flushes, 0, "{s}");
        assert!(s.blob_bytes_at_write > 0, "{s}");
        db.close().unwrap();
    }
    let (fs, fast) = common::power_loss(&fs, &fast, 7);
    let db = Db::open(common::on_simulated_tiers(o, &fs, &fast)).unwrap();
    check_model(&db, &model);
    db.close().unwrap();
}

/// Each memtable after the first takes a value file made ahead on a thread of its own (so
/// the switch does not create, reserve and fault in a file on the commit path); close removes
/// the unused one, and every value reads back after a reopen.
#[test]
fn memtables_take_value_files_made_ahead_and_close_removes_the_unused_one() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = at_write_opts(dir.path());
    o.container_bytes = 4 << 20;
    let db = Db::open(o.clone()).unwrap();
    let mut model = BTreeMap::new();
    let mut n = 0;
    // Five memtables' worth of separated values.
    while db.stats().flushes < 5 {
        for _ in 0..200 {
            db.put(key(n), value(n, 1)).unwrap();
            model.insert(key(n), value(n, 1));
            n += 1;
        }
        db.wait_for_compactions().unwrap();
    }
    let s = db.stats();
    assert!(s.blob_bytes_at_write > 0, "{s}");
    // On disk: the installed files, the active memtable's, and at most one spare.
    let on_disk = blob_files_on_disk(dir.path());
    assert!(
        on_disk > s.blob_files && on_disk <= s.blob_files + 2,
        "{on_disk} blob files on disk, {s}"
    );
    check_model(&db, &model);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    // The active memtable's file was installed by the flush; the spare is gone.
    close_and_reopen(db, o, dir.path(), &s, &model);
}

/// A memtable whose values were mostly overwritten before its flush: the flush copies the
/// live values out of its value file (in key order) and drops the file instead of installing
/// it for blob GC to relocate later; every value reads back, after a reopen and after a
/// power loss right after the flush.
#[test]
fn a_value_file_mostly_overwritten_in_its_memtable_is_copied_out_at_its_flush_and_dropped() {
    use matrixkv::tier::{MemFs, SimFastTier};
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let o = at_write_opts(Path::new("/db"));
    let mut model = BTreeMap::new();
    let db = Db::open(common::on_simulated_tiers(o.clone(), &fs, &fast)).unwrap();
    // 60 keys written 5 times each: four fifths of the value file's records are garbage
    // when the flush comes (the memtable holds 256 KiB, these ~100 KiB).
    for round in 0..5 {
        for i in 0..60 {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    let before = db.stats();
    assert_eq!(before.flushes, 0, "{before}");
    assert!(before.blob_bytes_at_write > 0, "{before}");
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.value_files_relocated, 1, "{s}");
    assert!(s.blob_relocated_bytes > 0, "{s}");
    assert!(
        s.blob_relocated_bytes * 3 < before.blob_bytes_at_write,
        "only the live fifth is copied out: {s}"
    );
    // The flush's own blob file holds the live values; the dropped file is not garbage of
    // any live file.
    assert_eq!(s.blob_bytes.1, 0, "{s}");
    check_model(&db, &model);
    // A crash right after the flush: the copied values were durable before the flush's
    // edit named their file.
    let (fs, fast) = common::power_loss(&fs, &fast, 11);
    drop(db);
    let db = Db::open(common::on_simulated_tiers(o.clone(), &fs, &fast)).unwrap();
    check_model(&db, &model);
    db.verify().unwrap();
    db.close().unwrap();
    let db = Db::open(common::on_simulated_tiers(o, &fs, &fast)).unwrap();
    check_model(&db, &model);
    db.close().unwrap();
}

/// A value file with few overwritten records is installed as it is; one mostly overwritten is
/// deleted from the disk once its flush installed.
#[test]
fn a_value_file_with_little_garbage_is_installed_and_a_mostly_garbage_one_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let o = at_write_opts(dir.path());
    let db = Db::open(o.clone()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..300 {
        db.put(key(i), value(i, 0)).unwrap();
        model.insert(key(i), value(i, 0));
    }
    for i in 0..30 {
        db.put(key(i), value(i, 1)).unwrap();
        model.insert(key(i), value(i, 1));
    }
    db.flush().unwrap();
    let s = db.stats();
    assert_eq!(s.value_files_relocated, 0, "{s}");
    assert!(
        s.blob_bytes.1 > 0,
        "the overwritten tenth is its garbage: {s}"
    );
    for round in 2..7 {
        for i in 0..60 {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert_eq!(s.value_files_relocated, 1, "{s}");
    check_model(&db, &model);
    close_and_reopen(db, o, dir.path(), &s, &model);
}

/// A sync write makes the values written before it into the active memtable's value file
/// durable and leaves that file mapped for the writes after it (`sync_appended`): after a
/// power loss everything up to the last sync write is there, and of the writes after it, at
/// most a prefix in write order (recovery ends at the first value the power loss took).
#[test]
fn sync_writes_between_values_separated_at_write_keep_every_earlier_write_through_a_power_loss() {
    use matrixkv::tier::{FsCrashMode, MemFs, SimFastTier};
    let sync = matrixkv::WriteOptions { sync: true };
    for (seed, mode) in [
        (1, FsCrashMode::DropUnsynced),
        (2, FsCrashMode::RandomTail),
        (3, FsCrashMode::GarbageTail),
        (4, FsCrashMode::ZeroTail),
    ] {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let o = at_write_opts(Path::new("/db"));
        let mut order = Vec::new();
        let mut durable = 0;
        {
            let db = Db::open(common::on_simulated_tiers(o.clone(), &fs, &fast)).unwrap();
            // Three sync writes, each after a run of writes whose values went to the file.
            for i in 0..240u32 {
                if i % 80 == 79 {
                    db.put_opt(key(i), value(i, 0), &sync).unwrap();
                    durable = order.len() + 1;
                } else {
                    db.put(key(i), value(i, 0)).unwrap();
                }
                order.push(i);
            }
            let s = db.stats();
            assert_eq!(s.flushes, 0, "one memtable, one value file: {s}");
            assert!(s.blob_bytes_at_write > 0, "{s}");
            // The process dies with the database open: only what was synced is promised.
            let fs2 = fs.crash_with(mode, seed, || {
                fast.crash(matrixkv::tier::CrashPolicy::DropUnpersisted)
            });
            drop(db);
            let db = Db::open(common::on_simulated_tiers(o.clone(), &fs2.0, &fs2.1)).unwrap();
            let present: Vec<bool> = order
                .iter()
                .map(|&i| db.get(key(i)).unwrap() == Some(value(i, 0)))
                .collect();
            assert!(
                present[..durable].iter().all(|&p| p),
                "{mode:?}: a write up to the last sync write is missing: {present:?}"
            );
            let kept = present[durable..].iter().take_while(|&&p| p).count();
            assert!(
                present[durable + kept..].iter().all(|&p| !p),
                "{mode:?}: the writes after the last sync write are not a prefix: {present:?}"
            );
            // The reopened database goes on writing and reading.
            db.put_opt(key(1000), value(1000, 1), &sync).unwrap();
            assert_eq!(db.get(key(1000)).unwrap(), Some(value(1000, 1)));
            db.close().unwrap();
        }
    }
}
