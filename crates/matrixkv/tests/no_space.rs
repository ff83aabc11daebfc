//! A full tier (docs/reliability.md C4, T5's ENOSPC scenario): writes that cannot make progress
//! return `Error::NoSpace` naming the tier within `no_space_timeout`, reads and `verify` keep
//! working, writes resume without a reopen once space returns, and no acknowledged write is
//! lost by a reopen at any point. The simulated tiers cap their space; the last test fills a
//! real (tmpfs) file system when the machine lets it mount one, and skips otherwise.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use matrixkv::tier::{CrashPolicy, Fault, FaultKind, FaultOp, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Db, Error, L0Layout, Options, TierKind, Tiers};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const TIMEOUT: Duration = Duration::from_millis(300);

mod common;

fn small(path: &Path) -> Options {
    let mut o = common::small_options(path);
    o.min_blob_bytes = Some(512);
    // Every separable value at write (the default logs those below 2 KiB in the WAL): a full slow tier meets the write path's appends too.
    o.separate_at_write_min_bytes = None;
    o.blob_file_bytes = 64 << 10;
    o.no_space_timeout = TIMEOUT;
    o
}

fn sim_options(fs: &MemFs, fast: &SimFastTier, layout: L0Layout) -> Options {
    let mut o = small(Path::new("/db"));
    o.l0_layout = layout;
    common::on_simulated_tiers(o, fs, fast)
}

/// A process crash now: `o` on an image of both tiers (nothing is lost; the image keeps the
/// slow tier's capacity). Returns the image's file system too.
fn crash_image(o: &Options, fs: &MemFs, fast: &SimFastTier) -> (Options, MemFs) {
    let (fs2, fast2) = fs.crash_with(FsCrashMode::KeepAll, 1, || fast.crash(CrashPolicy::KeepAll));
    let o2 = Options {
        tiers: Some(Tiers {
            slow_fs: Arc::new(fs2.clone()),
            fast_fs: Arc::new(fs2.clone()),
            fast: Arc::new(fast2),
        }),
        ..o.clone()
    };
    (o2, fs2)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:06}", i % 5000).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let len = if i.is_multiple_of(3) { 1500 } else { 200 };
    let mut v = format!("value-{i}-").into_bytes();
    v.resize(len, (i % 251) as u8);
    v
}

/// Writes from `*next` until a put fails; returns that error. Every put, failed or not,
/// must return within the no-space timeout plus slack.
fn write_until_error(db: &Db, model: &mut Model, next: &mut u64, limit: u64) -> Option<Error> {
    while *next < limit {
        let (k, v) = (key(*next), value(*next));
        let t = Instant::now();
        let r = db.put(&k, &v);
        assert!(
            t.elapsed() < TIMEOUT + Duration::from_secs(3),
            "a put took {:?}",
            t.elapsed()
        );
        match r {
            Ok(()) => {
                model.insert(k, v);
                *next += 1;
            }
            Err(e) => return Some(e),
        }
    }
    None
}

/// Opens the database again, checks the model and `verify`, and closes it.
fn reopen_and_check(o: Options, model: &Model, ctx: &str) {
    let db = Db::open(o).expect("reopen");
    check_model(&db, model, ctx);
    db.verify().expect("verify");
    db.close().expect("close");
}

fn check_model(db: &Db, model: &Model, ctx: &str) {
    let mut it = db.iter().expect("iter");
    it.seek_to_first().expect("seek");
    let mut n = 0usize;
    while it.valid() {
        assert_eq!(
            model.get(it.key()).map(Vec::as_slice),
            Some(it.value()),
            "{ctx}: scan found a key or value that was not acknowledged"
        );
        n += 1;
        it.next().expect("next");
    }
    assert_eq!(n, model.len(), "{ctx}: scan length");
    for (k, v) in model.iter().step_by(37) {
        assert_eq!(db.get(k).expect("get").as_ref(), Some(v), "{ctx}: get");
    }
}

/// Writes resume by themselves: retries until a put succeeds and the no-space condition is
/// over (a background job succeeded: until then a put that needs background work is refused,
/// and the background retry pause is at most 2 s), then writes `more` puts.
fn writes_resume(db: &Db, model: &mut Model, next: &mut u64, more: u64) -> Duration {
    let t = Instant::now();
    loop {
        let (k, v) = (key(*next), value(*next));
        match db.put(&k, &v) {
            Ok(()) => {
                model.insert(k, v);
                *next += 1;
                if db.stats().no_space.is_none() {
                    break;
                }
            }
            Err(e) => {
                assert!(e.is_no_space(), "{e}");
                assert!(
                    t.elapsed() < Duration::from_secs(15),
                    "writes did not resume after space returned: {e}"
                );
            }
        }
    }
    let resumed = t.elapsed();
    let limit = *next + more;
    if let Some(e) = write_until_error(db, model, next, limit) {
        panic!("a write failed after writes resumed: {e}; {}", db.stats());
    }
    resumed
}

#[test]
fn full_slow_tier_rejects_writes_with_no_space_and_resumes_when_space_returns() {
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let o = sim_options(&fs, &fast, layout);
        let db = Db::open(o.clone()).expect("open");
        let mut model = Model::new();
        let mut next = 0;
        assert!(write_until_error(&db, &mut model, &mut next, 3000).is_none());
        // The slow tier (and the fast tier's L0 tables, which share the MemFs) is full.
        fs.set_capacity(Some(fs.total_bytes() + (64 << 10)));
        let e = write_until_error(&db, &mut model, &mut next, 1_000_000)
            .expect("a full tier must stop writes");
        match &e {
            Error::NoSpace { tier, dir, .. } => {
                let msg = e.to_string();
                assert!(msg.contains("no space left"), "{msg}");
                if *tier == TierKind::Slow {
                    assert_eq!(dir, Path::new("/db/slow"), "{msg}");
                }
            }
            other => panic!("{layout:?}: expected NoSpace, got {other}"),
        }
        // Reads, iterators and verify keep working; the failure is in the stats.
        check_model(&db, &model, "while full");
        db.verify().expect("verify while full");
        let s = db.stats();
        assert!(s.no_space.is_some() && s.poisoned.is_none(), "{s}");
        assert!(s.no_space_errors >= 1 && s.no_space_rejections >= 1, "{s}");
        // Space returns: writes resume without a reopen.
        fs.set_capacity(None);
        writes_resume(&db, &mut model, &mut next, 1500);
        db.flush().expect("flush");
        db.wait_for_compactions().expect("compactions");
        assert!(db.stats().no_space.is_none());
        check_model(&db, &model, "after space returned");
        db.close().expect("close");
        reopen_and_check(o, &model, "after reopen");
    }
}

#[test]
fn full_fast_tier_rejects_writes_that_need_a_new_wal_segment() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = sim_options(&fs, &fast, L0Layout::Matrix);
    // Every memtable switch creates a new region (with recycling, a switch takes a free one
    // and needs no new space: see the next test).
    o.wal_recycle_segments = 0;
    let db = Db::open(o.clone()).expect("open");
    let mut model = Model::new();
    let mut next = 0;
    assert!(write_until_error(&db, &mut model, &mut next, 500).is_none());
    // Settle first: a flush still in flight would delete its WAL segment after the cap and
    // make room for the next one (the test then passed or failed with the timing).
    db.wait_for_compactions().expect("settle");
    // No room for another WAL segment.
    fast.set_capacity(Some(fast.total_bytes()));
    let t = Instant::now();
    let e = write_until_error(&db, &mut model, &mut next, 100_000).expect("full fast tier");
    assert!(
        matches!(
            &e,
            Error::NoSpace {
                tier: TierKind::Fast,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("/db/fast"), "{e}");
    // Refused at once (the write itself needs the space), not after a timeout.
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    check_model(&db, &model, "fast tier full");
    db.verify().expect("verify");
    // A reopen now loses nothing (a crash of the process: no clean close).
    let (crashed, _) = crash_image(&o, &fs, &fast);
    let db2 = Db::open(crashed).expect("open the crash image");
    check_model(&db2, &model, "crash while the fast tier was full");
    db2.close().expect("close");
    fast.set_capacity(None);
    writes_resume(&db, &mut model, &mut next, 300);
    check_model(&db, &model, "fast tier has room again");
    db.close().expect("close");
    let db = Db::open(o).expect("reopen");
    check_model(&db, &model, "reopen");
    db.close().expect("close");
}

#[test]
fn full_fast_tier_does_not_stop_writes_while_wal_segments_are_recycled() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let o = sim_options(&fs, &fast, L0Layout::Matrix);
    let db = Db::open(o.clone()).expect("open");
    let mut model = Model::new();
    let mut next = 0;
    assert!(write_until_error(&db, &mut model, &mut next, 500).is_none());
    db.flush().expect("flush");
    fast.set_capacity(Some(fast.total_bytes()));
    let before = db.stats().wal_segments_recycled;
    assert!(
        write_until_error(&db, &mut model, &mut next, 3000).is_none(),
        "{}",
        db.stats()
    );
    assert!(db.stats().wal_segments_recycled > before, "{}", db.stats());
    check_model(&db, &model, "fast tier full, segments recycled");
    db.close().expect("close");
    fast.set_capacity(None);
    let db = Db::open(o).expect("reopen");
    check_model(&db, &model, "reopen");
    db.close().expect("close");
}

#[test]
fn reopen_during_a_full_disk_loses_no_acknowledged_write() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let o = sim_options(&fs, &fast, L0Layout::Matrix);
    let db = Db::open(o.clone()).expect("open");
    let mut model = Model::new();
    let mut next = 0;
    assert!(write_until_error(&db, &mut model, &mut next, 2000).is_none());
    fs.set_capacity(Some(fs.total_bytes() + (32 << 10)));
    let e = write_until_error(&db, &mut model, &mut next, 1_000_000).expect("full");
    assert!(e.is_no_space(), "{e}");
    // The process dies while background work is failing.
    let (o2, fs2) = crash_image(&o, &fs, &fast);
    drop(db);
    // Opening needs a new manifest: on a still-full disk it fails cleanly...
    match Db::open(o2.clone()) {
        Err(e) => assert!(e.is_no_space(), "{e}"),
        Ok(db) => {
            check_model(&db, &model, "open on a full disk");
            db.close().ok();
        }
    }
    // ...and once space is freed every acknowledged write is there.
    fs2.set_capacity(None);
    let db = Db::open(o2).expect("reopen");
    check_model(&db, &model, "after crash on a full disk");
    db.verify().expect("verify");
    db.close().expect("close");
}

#[test]
fn failed_manifest_write_is_replaced_by_a_new_manifest_and_writes_go_on() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let mut o = sim_options(&fs, &fast, L0Layout::Matrix);
    // Writers wait for the retry rather than give up.
    o.no_space_timeout = Duration::from_secs(10);
    let db = Db::open(o.clone()).expect("open");
    let mut model = Model::new();
    let mut next = 0;
    // The next manifest sync fails for lack of space (the record may be on disk: the edit is
    // ambiguous), and so does the first attempt to create a replacement manifest.
    fs.inject(
        Fault::new(FaultOp::Sync, FaultKind::NoSpace)
            .on_path("MANIFEST")
            .times(1),
    );
    fs.inject(
        Fault::new(FaultOp::Create, FaultKind::NoSpace)
            .on_path("MANIFEST")
            .times(1),
    );
    assert!(write_until_error(&db, &mut model, &mut next, 3000).is_none());
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    let s = db.stats();
    assert!(s.manifest_rolls >= 1 && s.no_space_errors >= 1, "{s}");
    assert!(s.poisoned.is_none(), "{s}");
    db.check_container_accounting()
        .expect("no container page leaked");
    check_model(&db, &model, "after the roll");
    db.close().expect("close");
    reopen_and_check(o, &model, "reopen");
}

#[test]
fn crash_before_the_manifest_is_replaced_keeps_every_file_the_failed_edit_names() {
    // The append of an edit reaches the disk but its sync reports ENOSPC, and no replacement
    // manifest can be written: recovery replays that edit, so the files it adds must still be
    // there after the engine deleted its obsolete files.
    for layout in [L0Layout::Matrix, L0Layout::Tables] {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let o = sim_options(&fs, &fast, layout);
        let db = Db::open(o.clone()).expect("open");
        let mut model = Model::new();
        let mut next = 0;
        assert!(write_until_error(&db, &mut model, &mut next, 1500).is_none());
        db.flush().expect("flush");
        fs.inject(
            Fault::new(FaultOp::Sync, FaultKind::NoSpace)
                .on_path("MANIFEST")
                .times(1),
        );
        fs.inject(Fault::new(FaultOp::Create, FaultKind::NoSpace).on_path("MANIFEST"));
        let fired = fs.faults_fired();
        let _ = write_until_error(&db, &mut model, &mut next, 3000);
        // Let the background retry (each retry meets the create fault again) and delete what
        // it believes obsolete: a condition, not a time, so a loaded machine tests the same.
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while fs.faults_fired() < fired + 3 {
            assert!(
                std::time::Instant::now() < deadline,
                "{layout:?}: the background never retried the manifest ({} faults)",
                fs.faults_fired()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let (o2, _) = crash_image(&o, &fs, &fast);
        drop(db);
        let db = Db::open(o2).expect("reopen after the crash");
        check_model(&db, &model, &format!("{layout:?}: after crash"));
        db.verify()
            .expect("verify: every file the replayed edit names exists");
        db.close().expect("close");
    }
}

#[test]
fn full_real_file_system_rejects_writes_and_recovers_when_a_file_is_deleted() {
    let root = tempfile::tempdir().expect("tempdir");
    let slow_mount = root.path().join("slowfs");
    if let Err(why) = common::mount_tmpfs(&slow_mount, 48) {
        eprintln!("SKIP full_real_file_system_...: cannot mount a small tmpfs here ({why})");
        return;
    }
    let _slow = common::Mount(slow_mount.clone());
    // Ballast the test deletes to give space back, as an operator would.
    let ballast = slow_mount.join("ballast");
    std::fs::write(&ballast, vec![1u8; 12 << 20]).expect("ballast");
    let mut o = Options::new(&slow_mount);
    o.slow_dir = slow_mount.join("db");
    o.fast_dir = root.path().join("fast");
    o.write_buffer_bytes = 1 << 20;
    o.container_bytes = 16 << 20;
    o.l1_target_bytes = 16 << 20;
    o.target_file_bytes = 1 << 20;
    o.blob_file_bytes = 4 << 20;
    o.no_space_timeout = Duration::from_secs(2);
    std::fs::create_dir_all(&o.fast_dir).expect("fast dir");
    let db = Db::open(o.clone()).expect("open");
    let mut model = Model::new();
    let big = |i: u64| {
        let mut v = format!("{i}:").into_bytes();
        v.resize(4096, (i % 251) as u8);
        v
    };
    let start = Instant::now();
    let mut i = 0u64;
    let (err, failed_put) = loop {
        let k = format!("key{i:08}").into_bytes();
        let t = Instant::now();
        match db.put(&k, big(i)) {
            Ok(()) => {
                model.insert(k, big(i));
                i += 1;
            }
            Err(e) => break (e, t.elapsed()),
        }
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the disk never filled"
        );
    };
    eprintln!(
        "real tmpfs: {} acknowledged 4 KiB puts in {:?}; the failing put took {failed_put:?}: {err}",
        model.len(),
        start.elapsed()
    );
    assert!(
        matches!(
            &err,
            Error::NoSpace {
                tier: TierKind::Slow,
                ..
            }
        ),
        "{err}"
    );
    assert!(failed_put < Duration::from_secs(10), "{failed_put:?}");
    check_model(&db, &model, "real disk full");
    db.verify().expect("verify while full");
    std::fs::remove_file(&ballast).expect("delete ballast");
    let t = Instant::now();
    let resumed = loop {
        let k = format!("key{i:08}").into_bytes();
        match db.put(&k, big(i)) {
            Ok(()) => {
                model.insert(k, big(i));
                i += 1;
                break t.elapsed();
            }
            Err(e) => assert!(t.elapsed() < Duration::from_secs(20), "no resume: {e}"),
        }
    };
    for _ in 0..200 {
        let k = format!("key{i:08}").into_bytes();
        db.put(&k, big(i)).expect("writes after space returned");
        model.insert(k, big(i));
        i += 1;
    }
    eprintln!("real tmpfs: writes resumed {resumed:?} after the ballast was deleted");
    db.close().expect("close");
    reopen_and_check(o, &model, "reopen after a full real disk");
}
