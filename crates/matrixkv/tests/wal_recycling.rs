//! WAL segment recycling (`Options::wal_recycle_segments`, docs/decisions/0010): after many
//! memtable switches, segments are recycled, every acknowledged write is found after a reopen,
//! a process crash or a power loss, and no value written before it resurfaces (each generation
//! writes every key with a value naming the generation, so a replayed older record would show).

use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{Db, Options, WriteBatch, WriteOptions};

const KEYS: u32 = 300;

mod common;

fn sim_options(fs: &MemFs, fast: &SimFastTier, recycle: usize) -> Options {
    let mut o = common::small_options(std::path::Path::new("/db"));
    o.wal_recycle_segments = recycle;
    common::on_simulated_tiers(o, fs, fast)
}

fn key(k: u32) -> Vec<u8> {
    format!("key{k:05}").into_bytes()
}

/// The value of `k` in generation `gen`: names both, padded so a generation fills more than
/// one memtable.
fn value(k: u32, generation: u32) -> Vec<u8> {
    let mut v = format!("gen{generation:04}-key{k:05}-").into_bytes();
    v.resize(300, b'a' + (generation % 26) as u8);
    v
}

/// Writes every key with generation `generation`'s value, in batches of 10 (synced if `sync`).
fn write_generation(db: &Db, generation: u32, sync: bool) {
    for chunk in (0..KEYS).collect::<Vec<_>>().chunks(10) {
        let mut b = WriteBatch::new();
        for &k in chunk {
            b.put(key(k), value(k, generation));
        }
        db.write_opt(b, &WriteOptions { sync }).expect("write");
    }
}

/// Every key holds generation `generation`'s value.
fn check_generation(db: &Db, generation: u32, ctx: &str) {
    for k in 0..KEYS {
        let got = db.get(key(k)).expect("get");
        assert_eq!(
            got.as_deref(),
            Some(&value(k, generation)[..]),
            "{ctx}: key {k} (want generation {generation}, got {:?})",
            got.as_ref()
                .map(|v| String::from_utf8_lossy(&v[..16]).into_owned())
        );
    }
}

fn region_names(fast: &SimFastTier, suffix: &str) -> usize {
    use matrixkv::tier::FastTier;
    fast.list()
        .expect("list")
        .iter()
        .filter(|n| n.ends_with(suffix))
        .count()
}

#[test]
fn reopen_after_many_memtable_switches_with_recycling_finds_every_write_and_no_older_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = || common::small_options(dir.path());
    let db = Db::open(opts()).expect("open");
    for generation in 0..12 {
        write_generation(&db, generation, false);
    }
    let s = db.stats();
    assert!(
        s.wal_segments_recycled >= 10,
        "segments were not recycled: {s}"
    );
    assert!(
        s.wal_segments_created <= 4,
        "new regions created in steady state: {s}"
    );
    check_generation(&db, 11, "before reopen");
    db.close().expect("close");
    let free = std::fs::read_dir(dir.path().join("fast"))
        .expect("list")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".walfree"))
        })
        .count();
    assert!((1..=2).contains(&free), "{free} free regions kept");
    // The free regions are reused after the reopen, never replayed.
    for round in 0..3 {
        let db = Db::open(opts()).expect("reopen");
        check_generation(&db, 11 + round, &format!("reopen {round}"));
        write_generation(&db, 12 + round, false);
        let s = db.stats();
        assert!(s.wal_segments_recycled > 0, "reopen {round}: {s}");
        db.close().expect("close");
    }
}

#[test]
fn recycling_off_deletes_obsolete_segments_as_before() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 0)).expect("open");
    for generation in 0..6 {
        write_generation(&db, generation, false);
    }
    db.flush().expect("flush");
    let s = db.stats();
    assert_eq!(s.wal_segments_recycled, 0, "{s}");
    assert_eq!(region_names(&fast, ".walfree"), 0);
    assert!(region_names(&fast, ".wal") <= 3, "{:?}", fast.list_names());
    db.close().expect("close");
    let db = Db::open(sim_options(&fs, &fast, 0)).expect("reopen");
    check_generation(&db, 5, "reopen");
    db.close().expect("close");
}

trait Names {
    fn list_names(&self) -> Vec<String>;
}

impl Names for SimFastTier {
    fn list_names(&self) -> Vec<String> {
        use matrixkv::tier::FastTier;
        self.list().expect("list")
    }
}

/// Crashes (process crash or power loss) in the middle of generations of writes, with segments
/// recycled all the time: every write acknowledged before the crash (every synced one, for a
/// power loss) is found, and every key holds a value of the last generation written or later
/// than the durable one, never an older one.
#[test]
fn crashes_with_recycled_segments_lose_no_acknowledged_write_and_resurrect_no_older_one() {
    for (mode, policy, sync) in [
        (FsCrashMode::KeepAll, CrashPolicy::KeepAll, false),
        (
            FsCrashMode::DropUnsynced,
            CrashPolicy::DropUnpersisted,
            true,
        ),
        (
            FsCrashMode::RandomTail,
            CrashPolicy::Random { seed: 0x5eed },
            true,
        ),
    ] {
        let mut fs = MemFs::new();
        let mut fast = SimFastTier::new("/db/fast");
        let mut generation = 0;
        for round in 0..4u64 {
            let ctx = format!("{mode:?} round {round}");
            let db = Db::open(sim_options(&fs, &fast, 2)).expect("open");
            if round > 0 {
                check_generation(&db, generation - 1, &ctx);
            }
            for _ in 0..5 {
                write_generation(&db, generation, sync);
                generation += 1;
            }
            assert!(
                db.stats().wal_segments_recycled > 0,
                "{ctx}: {}",
                db.stats()
            );
            // A crash image taken while the database runs (no close).
            let (crashed_fs, crashed_fast) = fs.crash_with(mode, round, || fast.crash(policy));
            drop(db);
            fs = crashed_fs;
            fast = crashed_fast;
            assert!(
                region_names(&fast, ".walfree") <= 2,
                "{ctx}: {:?}",
                fast.list_names()
            );
        }
        let db = Db::open(sim_options(&fs, &fast, 2)).expect("final open");
        check_generation(&db, generation - 1, &format!("{mode:?} final"));
        db.close().expect("close");
    }
}

#[test]
fn free_regions_found_at_open_are_reused_up_to_the_limit_and_the_rest_deleted() {
    use matrixkv::tier::FastTier;
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("open");
    write_generation(&db, 0, false);
    db.close().expect("close");
    // Leftovers: more free regions of the standard size than the limit, one of another size.
    let standard = (64 << 10) + (16 << 10) + (1 << 20);
    for n in 900_001..=900_003 {
        drop(
            fast.create_region(&format!("{n}.walfree"), standard)
                .expect("create"),
        );
    }
    drop(fast.create_region("900004.walfree", 4096).expect("create"));
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("reopen");
    check_generation(&db, 0, "reopen");
    let names = fast.list_names();
    assert!(!names.contains(&"900004.walfree".to_string()), "{names:?}");
    assert!(region_names(&fast, ".walfree") <= 2, "{names:?}");
    // The segment started at open took a free region, and file numbers continue after the
    // free regions' numbers (never handed out again).
    assert_eq!(db.stats().wal_segments_recycled, 1, "{}", db.stats());
    let newest_wal = names
        .iter()
        .filter_map(|n| n.strip_suffix(".wal"))
        .filter_map(|n| n.parse::<u64>().ok())
        .max()
        .expect("a WAL segment");
    assert!(newest_wal > 900_004, "{names:?}");
    write_generation(&db, 1, false);
    db.close().expect("close");
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("reopen");
    check_generation(&db, 1, "second reopen");
    db.close().expect("close");
}

/// Waits (up to 10 s) until the fast tier holds `want` free regions.
fn wait_for_free_regions(fast: &SimFastTier, want: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while region_names(fast, ".walfree") < want {
        assert!(
            std::time::Instant::now() < deadline,
            "free regions never prepared: {:?}",
            fast.list_names()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

#[test]
fn a_new_database_prepares_free_regions_so_the_first_switches_create_none() {
    let fs = MemFs::new();
    let fast = SimFastTier::new("/db/fast");
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("open");
    wait_for_free_regions(&fast, 2);
    // The first segment and two prepared regions (a region's file exists a moment before the
    // counter counts it).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while db.stats().wal_segments_created < 3 {
        assert!(std::time::Instant::now() < deadline, "{}", db.stats());
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let before = db.stats();
    assert_eq!(before.wal_segments_created, 3, "{before}");
    assert_eq!(
        region_names(&fast, ".walfree"),
        2,
        "{:?}",
        fast.list_names()
    );
    // One generation fills more than one memtable: its switches take the prepared regions.
    write_generation(&db, 0, false);
    let s = db.stats();
    assert!(s.wal_segments_recycled >= 1, "{s}");
    assert_eq!(
        s.wal_segments_created, before.wal_segments_created,
        "a switch created a region although prepared ones were free: {s}"
    );
    check_generation(&db, 0, "before reopen");
    db.close().expect("close");
    // A prepared region left at close is reused after the reopen, never replayed.
    let db = Db::open(sim_options(&fs, &fast, 2)).expect("reopen");
    check_generation(&db, 0, "after reopen");
    db.close().expect("close");
}

#[test]
fn a_crash_while_free_regions_are_prepared_loses_nothing() {
    for seed in 0..8u64 {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let db = Db::open(sim_options(&fs, &fast, 2)).expect("open");
        write_generation(&db, 0, true);
        // A crash image at some point of the background preparation (timing varies by seed).
        std::thread::sleep(std::time::Duration::from_micros(200 * seed));
        let (crashed_fs, crashed_fast) = fs.crash_with(FsCrashMode::DropUnsynced, seed, || {
            fast.crash(CrashPolicy::DropUnpersisted)
        });
        drop(db);
        let db = Db::open(sim_options(&crashed_fs, &crashed_fast, 2)).expect("reopen");
        check_generation(&db, 0, &format!("seed {seed}"));
        write_generation(&db, 1, false);
        check_generation(&db, 1, &format!("seed {seed}, after writing on"));
        db.close().expect("close");
    }
}
