//! Compaction filters and TTL through the engine: what compaction removes or rewrites, what
//! snapshots keep seeing, what reads hide at once, and filters that misbehave.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::small_options;
use matrixkv::{CompactionFilter, Db, Decision, Error, L0Layout, Options};

/// Removes keys under `tmp/`, upper-cases values of keys under `up/`; counts its calls.
struct Rules {
    calls: AtomicU64,
}

impl CompactionFilter for Rules {
    fn name(&self) -> &str {
        "rules"
    }

    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> Decision {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if key.starts_with(b"tmp/") {
            Decision::Remove
        } else if key.starts_with(b"up/") {
            Decision::ChangeValue(value.to_ascii_uppercase())
        } else {
            Decision::Keep
        }
    }
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    db.iter()
        .expect("iter")
        .collect::<matrixkv::Result<_>>()
        .expect("scan")
}

fn a_filter_removes_and_rewrites_but_never_under_a_snapshot(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rules = Arc::new(Rules {
        calls: AtomicU64::new(0),
    });
    let mut opts = small_options(dir.path());
    opts.l0_layout = layout;
    opts.compaction_filter = Some(rules.clone());
    // Compactions only when asked (compact_range runs anyway): the snapshot below must be
    // taken before any compaction saw the keys.
    opts.compaction_enabled = false;
    let db = Db::open(opts).expect("open");
    // An older version of a tmp/ key below the one the filter removes must not come back.
    db.put("tmp/a", "old").expect("put");
    db.compact_range(None, None).expect("compact");
    for i in 0..300 {
        db.put(format!("tmp/{i:03}"), "scratch").expect("put");
        db.put(format!("up/{i:03}"), "lower").expect("put");
        db.put(format!("keep/{i:03}"), vec![b'k'; 1500])
            .expect("put");
    }
    db.put("tmp/a", "new").expect("put");
    let snap = db.snapshot();
    db.compact_range(None, None).expect("compact");
    // The snapshot predates the compaction: everything it sees is untouched.
    assert_eq!(
        snap.get("tmp/a").expect("get").as_deref(),
        Some(&b"new"[..])
    );
    assert_eq!(
        snap.get("up/007").expect("get").as_deref(),
        Some(&b"lower"[..])
    );
    drop(snap);
    // New keys inside each range make the next compaction rewrite the last level's tables.
    for key in ["keep/150x", "tmp/150x", "up/150x"] {
        db.put(key, "x").expect("put");
    }
    db.compact_range(None, None).expect("compact");
    assert!(rules.calls.load(Ordering::Relaxed) > 0);
    assert_eq!(
        db.get("tmp/a").expect("get"),
        None,
        "no older version reappears"
    );
    assert_eq!(db.get("tmp/007").expect("get"), None);
    assert_eq!(
        db.get("up/007").expect("get").as_deref(),
        Some(&b"LOWER"[..])
    );
    let all = scan(&db);
    assert!(all.iter().all(|(k, _)| !k.starts_with(b"tmp/")));
    assert_eq!(all.len(), 602, "up/ and keep/ keys");
    assert!(db.stats().filtered_entries >= 601, "{}", db.stats());
    db.close().expect("close");
}

#[test]
fn a_filter_removes_and_rewrites_but_never_under_a_snapshot_in_the_matrix_layout() {
    a_filter_removes_and_rewrites_but_never_under_a_snapshot(L0Layout::Matrix);
}

#[test]
fn a_filter_removes_and_rewrites_but_never_under_a_snapshot_in_the_table_layout() {
    a_filter_removes_and_rewrites_but_never_under_a_snapshot(L0Layout::Tables);
}

struct Panics;

impl CompactionFilter for Panics {
    fn name(&self) -> &str {
        "panics"
    }

    fn filter(&self, _level: usize, _key: &[u8], _value: &[u8]) -> Decision {
        panic!("the filter fails")
    }
}

#[test]
fn a_filter_that_panics_keeps_every_entry() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.compaction_filter = Some(Arc::new(Panics));
    let db = Db::open(opts).expect("open");
    for i in 0..500 {
        db.put(format!("k{i:04}"), vec![b'v'; 200]).expect("put");
    }
    db.compact_range(None, None).expect("compaction goes on");
    assert_eq!(scan(&db).len(), 500);
    assert!(db.stats().filter_failures > 0, "{}", db.stats());
    db.close().expect("close");
}

fn ttl_options(path: &std::path::Path, ttl_secs: u64) -> Options {
    let mut o = small_options(path);
    o.ttl = Some(Duration::from_secs(ttl_secs));
    o
}

#[test]
fn expired_values_vanish_from_reads_at_once_and_compaction_reclaims_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock(AtomicU64::new(1_000_000)));
    let mut opts = ttl_options(dir.path(), 3);
    opts.clock = clock.clone();
    let db = Db::open(opts.clone()).expect("open");
    // Separated values too (min_blob_bytes 1024 by default): their blob records become
    // garbage.
    for i in 0..200 {
        db.put(format!("old{i:03}"), vec![b'o'; 2000]).expect("put");
    }
    db.compact_range(None, None).expect("compact");
    assert!(
        db.get("old007").expect("get") == Some(vec![b'o'; 2000]),
        "the write time is not part of the value"
    );
    clock.0.fetch_add(3200, Ordering::SeqCst);
    for i in 0..200 {
        db.put(format!("new{i:03}"), vec![b'n'; 2000]).expect("put");
    }
    // Reads hide the expired values at once, in every direction.
    assert_eq!(db.get("old007").expect("get"), None);
    let keys = ["old001", "new001"];
    let got: Vec<_> = db
        .multi_get(keys)
        .into_iter()
        .map(|r| r.expect("get"))
        .collect();
    assert!(got == [None, Some(vec![b'n'; 2000])]);
    let all = scan(&db);
    assert_eq!(all.len(), 200);
    assert!(
        all.iter()
            .all(|(k, v)| k.starts_with(b"new") && v.len() == 2000)
    );
    let mut it = db.iter().expect("iter");
    it.seek_to_last().expect("last");
    let mut back = 0;
    while it.valid() {
        assert!(it.key().starts_with(b"new"));
        back += 1;
        it.prev().expect("prev");
    }
    assert_eq!(back, 200);
    // Compaction removes them (the last level is rewritten for the TTL); their blob records
    // become garbage, and a blob file holding only garbage is deleted.
    let blob_bytes = || {
        db.get_int_property("matrixkv.live-blob-file-size")
            .expect("property")
    };
    assert!(
        blob_bytes() >= 200 * 2000,
        "the old values are in blob files"
    );
    db.compact_range(None, None).expect("compact");
    let s = db.stats();
    assert!(s.filtered_entries >= 200, "{s}");
    assert!(
        blob_bytes() < 250 * 2100,
        "the old records were reclaimed: {s}"
    );
    db.close().expect("close");
    // The TTL is part of the database: opening it without one is refused.
    let mut without = opts.clone();
    without.ttl = None;
    let e = Db::open(without).expect_err("ttl is fixed");
    assert!(
        matches!(e, Error::OptionMismatch { option: "ttl", .. }),
        "{e}"
    );
    // Its duration may change: with a long TTL the new values stay.
    let mut longer = ttl_options(dir.path(), 3600);
    longer.clock = clock;
    let db = Db::open(longer).expect("reopen");
    assert_eq!(scan(&db).len(), 200);
    db.close().expect("close");
}

#[test]
fn a_database_with_a_ttl_refuses_merges_and_one_without_refuses_a_ttl() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = ttl_options(&dir.path().join("ttl"), 60);
    opts.merge_operator = Some(Arc::new(matrixkv::U64AddOperator));
    let db = Db::open(opts).expect("open");
    let e = db
        .merge("k", 1u64.to_le_bytes())
        .expect_err("merge with a TTL");
    assert!(e.to_string().contains("TTL"), "{e}");
    db.close().expect("close");
    let plain = small_options(&dir.path().join("plain"));
    Db::open(plain.clone())
        .expect("create")
        .close()
        .expect("close");
    let e = Db::open(ttl_options(&dir.path().join("plain"), 60)).expect_err("no TTL stored");
    assert!(
        matches!(e, Error::OptionMismatch { option: "ttl", .. }),
        "{e}"
    );
    let mut bad = plain;
    bad.ttl = Some(Duration::from_millis(10));
    assert!(Db::open(bad).is_err(), "a TTL under a second is invalid");
}

/// A clock the test moves by hand (`Options::clock`).
#[derive(Debug)]
struct ManualClock(AtomicU64);

impl matrixkv::Clock for ManualClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

#[test]
fn ttl_reads_the_injected_clock_for_stamps_reads_iterators_and_compaction() {
    let dir = tempfile::tempdir().expect("tempdir");
    let clock = Arc::new(ManualClock(AtomicU64::new(1_000_000)));
    let mut opts = ttl_options(dir.path(), 10);
    opts.clock = clock.clone();
    let db = Db::open(opts).expect("open");
    db.put("old", "1").expect("put");
    clock.0.fetch_add(9_999, Ordering::SeqCst);
    db.put("new", "2").expect("put");
    assert_eq!(db.get("old").expect("get").as_deref(), Some(&b"1"[..]));
    // 10 s after the first write by the injected clock, with no sleep: it expired.
    clock.0.fetch_add(1, Ordering::SeqCst);
    assert_eq!(db.get("old").expect("get"), None);
    assert_eq!(scan(&db), vec![(b"new".to_vec(), b"2".to_vec())]);
    db.compact_range(None, None).expect("compact");
    clock.0.fetch_sub(5_000, Ordering::SeqCst);
    // Compaction removed it as of the injected now: a clock moved back does not revive it.
    assert_eq!(db.get("old").expect("get"), None);
    assert_eq!(db.get("new").expect("get").as_deref(), Some(&b"2"[..]));
}
