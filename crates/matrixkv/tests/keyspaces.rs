//! Keyspaces through the whole engine: separation of keys, atomic batches across keyspaces,
//! snapshots, per-keyspace merge operators, filters and TTLs, drops that reclaim space,
//! reopen, power loss, and databases created before keyspaces existed.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{scan_backward, scan_forward, small_options};
use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};
use matrixkv::{
    AppendOperator, Db, Error, KeyspaceOptions, L0Layout, Options, ReadOptions, U64AddOperator,
    WriteBatch, WriteOptions,
};

fn entries(prefix: &str, n: usize, value: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            (
                format!("k{i:05}").into_bytes(),
                format!("{prefix}-{value}-{i}").into_bytes(),
            )
        })
        .collect()
}

fn keys_of_each_keyspace_stay_apart(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.l0_layout = layout;
    opts.min_blob_bytes = Some(200);
    // Every separable value at write (the default logs those below 2 KiB in the WAL).
    opts.separate_at_write_min_bytes = None;
    let db = Db::open(opts.clone()).expect("open");
    let a = db
        .create_keyspace("a", KeyspaceOptions::default())
        .expect("create a");
    let b = db
        .create_keyspace("b", KeyspaceOptions::default())
        .expect("create b");
    assert_eq!(db.list_keyspaces(), ["default", "a", "b"]);
    // The same keys in three keyspaces, values large enough to reach blob files, written in
    // rounds so that memtables flush, rows switch and columns compact.
    let n = 600;
    let pad = "x".repeat(250);
    for round in 0..3 {
        let v = format!("{round}{pad}");
        for (i, (k, _)) in entries("", n, "").iter().enumerate() {
            if i % 3 == round {
                continue;
            }
            db.put(k, format!("d-{v}-{i}")).expect("put default");
            a.put(k, format!("a-{v}-{i}")).expect("put a");
            if i % 2 == 0 {
                b.put(k, format!("b-{v}-{i}")).expect("put b");
            }
        }
    }
    let expect = |name: &str, every: usize| -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..n)
            .filter(|i| i % every == 0)
            .map(|i| {
                // The last round that wrote key i.
                let round = (0..3).rev().find(|r| i % 3 != *r).expect("a round");
                (
                    format!("k{i:05}").into_bytes(),
                    format!("{name}-{round}{pad}-{i}").into_bytes(),
                )
            })
            .collect()
    };
    let check = |db: &Db, ctx: &str| {
        let a = db.keyspace("a").expect("a");
        let b = db.keyspace("b").expect("b");
        assert_eq!(
            scan_forward(db.iter().expect("iter")),
            expect("d", 1),
            "{ctx}"
        );
        assert_eq!(
            scan_forward(a.iter().expect("iter")),
            expect("a", 1),
            "{ctx}"
        );
        assert_eq!(
            scan_backward(a.iter().expect("iter")),
            expect("a", 1),
            "{ctx}"
        );
        assert_eq!(
            scan_forward(b.iter().expect("iter")),
            expect("b", 2),
            "{ctx}"
        );
        assert_eq!(
            scan_backward(b.iter().expect("iter")),
            expect("b", 2),
            "{ctx}"
        );
        // Bounds, seeks and point reads stay inside the keyspace.
        let ro = ReadOptions {
            lower_bound: Some(b"k00100".to_vec()),
            upper_bound: Some(b"k00110".to_vec()),
            snapshot: None,
        };
        let got = scan_forward(b.iter_opt(&ro).expect("iter"));
        assert_eq!(got.len(), 5, "{ctx}: bounded scan of b");
        let mut it = b.iter().expect("iter");
        it.seek(b"k00101").expect("seek");
        assert_eq!(it.key(), b"k00102", "{ctx}: seek");
        it.seek_for_prev(b"k00101").expect("seek_for_prev");
        assert_eq!(it.key(), b"k00100", "{ctx}: seek_for_prev");
        it.seek_for_prev(b"\xff\xff")
            .expect("seek_for_prev past the end");
        assert_eq!(it.key(), format!("k{:05}", n - 2).as_bytes(), "{ctx}");
        it.seek(b"").expect("seek to the start");
        assert_eq!(it.key(), b"k00000", "{ctx}");
        assert_eq!(b.get(b"k00001").expect("get"), None, "{ctx}");
        let got = a.multi_get([b"k00001".as_slice(), b"nope", b"k00000"]);
        let got: Vec<_> = got.into_iter().map(|r| r.expect("multi_get")).collect();
        assert!(
            got[0].as_ref().is_some_and(|v| v.starts_with(b"a-")),
            "{ctx}"
        );
        assert_eq!(got[1], None, "{ctx}");
    };
    check(&db, "before compaction");
    db.compact_range(None, None).expect("compact everything");
    check(&db, "after compaction");
    a.compact_range(Some(b"k00100"), None).expect("compact a");
    check(&db, "after compacting a");
    db.verify().expect("verify");
    drop((a, b));
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    check(&db, "after reopen");
    assert_eq!(db.list_keyspaces(), ["default", "a", "b"]);
}

#[test]
fn keys_of_each_keyspace_stay_apart_in_the_matrix_layout() {
    keys_of_each_keyspace_stay_apart(L0Layout::Matrix);
}

#[test]
fn keys_of_each_keyspace_stay_apart_with_l0_tables() {
    keys_of_each_keyspace_stay_apart(L0Layout::Tables);
}

#[test]
fn snapshots_see_every_keyspace_as_of_their_time() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(small_options(dir.path())).expect("open");
    let users = db
        .create_keyspace("users", KeyspaceOptions::default())
        .expect("create");
    users.put("alice", "1").expect("put");
    db.put("alice", "default").expect("put");
    let snap = db.snapshot();
    users.put("alice", "2").expect("put");
    users.delete_range("a", "b").expect("delete_range");
    users.put("bob", "3").expect("put");
    let ro = snap.read_options();
    assert_eq!(
        users.get_opt("alice", &ro).expect("get").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(users.get("alice").expect("get"), None);
    assert_eq!(
        scan_forward(users.iter_opt(&ro).expect("iter")),
        [(b"alice".to_vec(), b"1".to_vec())]
    );
    assert_eq!(
        scan_forward(users.iter().expect("iter")),
        [(b"bob".to_vec(), b"3".to_vec())]
    );
    assert_eq!(
        db.get("alice").expect("get").as_deref(),
        Some(&b"default"[..])
    );
    db.flush().expect("flush");
    db.compact_range(None, None).expect("compact");
    assert_eq!(
        users.get_opt("alice", &ro).expect("get").as_deref(),
        Some(&b"1"[..])
    );
}

/// A merge operator that refuses every merge.
struct Refuses;

impl matrixkv::MergeOperator for Refuses {
    fn name(&self) -> &str {
        "refuses"
    }
    fn full_merge(
        &self,
        _key: &[u8],
        _existing: Option<&[u8]>,
        _operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        Err("never".into())
    }
}

/// Removes the values that start with "tmp".
struct DropTmp;

impl matrixkv::CompactionFilter for DropTmp {
    fn name(&self) -> &str {
        "drop-tmp"
    }
    fn filter(&self, _level: usize, key: &[u8], value: &[u8]) -> matrixkv::Decision {
        // Keys reach the filter without the keyspace prefix.
        assert!(key.starts_with(b"k"), "{key:?}");
        if value.starts_with(b"tmp") {
            matrixkv::Decision::Remove
        } else {
            matrixkv::Decision::Keep
        }
    }
}

fn counters() -> KeyspaceOptions {
    KeyspaceOptions {
        merge_operator: Some(Arc::new(U64AddOperator)),
        ..KeyspaceOptions::default()
    }
}

fn logs() -> KeyspaceOptions {
    KeyspaceOptions {
        merge_operator: Some(Arc::new(AppendOperator::new(b"|"))),
        ..KeyspaceOptions::default()
    }
}

fn filtered() -> KeyspaceOptions {
    KeyspaceOptions {
        compaction_filter: Some(Arc::new(DropTmp)),
        ..KeyspaceOptions::default()
    }
}

fn expiring() -> KeyspaceOptions {
    KeyspaceOptions {
        ttl: Some(Duration::from_secs(1)),
        ..KeyspaceOptions::default()
    }
}

#[test]
fn each_keyspace_merges_filters_and_expires_with_its_own_options() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.merge_operator = Some(Arc::new(Refuses));
    let db = Db::open(opts.clone()).expect("open");
    let c = db.create_keyspace("counters", counters()).expect("create");
    let l = db.create_keyspace("logs", logs()).expect("create");
    let f = db.create_keyspace("filtered", filtered()).expect("create");
    let t = db.create_keyspace("expiring", expiring()).expect("create");
    let plain = db
        .create_keyspace("plain", KeyspaceOptions::default())
        .expect("create");
    for i in 0..3u64 {
        c.merge("k", (i + 1).to_le_bytes()).expect("merge counters");
        l.merge("k", format!("e{i}")).expect("merge logs");
        db.merge("k", "x").expect("merge default");
    }
    f.put("k1", "tmp value").expect("put");
    f.put("k2", "kept").expect("put");
    t.put("k", "short-lived").expect("put");
    // A merge needs the keyspace's own operator; a TTL keyspace takes none.
    let err = plain.merge("k", "x").expect_err("no operator");
    assert!(err.to_string().contains("\"plain\""), "{err}");
    assert!(t.merge("k", "x").is_err());
    let mut batch = WriteBatch::new();
    batch.put("ok", "1");
    batch.merge_cf(&plain, "k", "x");
    assert!(
        db.write(batch).is_err(),
        "a batch with a bad operation is refused whole"
    );
    assert_eq!(db.get("ok").expect("get"), None);
    let check = |db: &Db, ctx: &str| {
        let c = db.keyspace("counters").expect("counters");
        let l = db.keyspace("logs").expect("logs");
        assert_eq!(
            c.get("k").expect("get"),
            Some(6u64.to_le_bytes().to_vec()),
            "{ctx}"
        );
        assert_eq!(
            l.get("k").expect("get").as_deref(),
            Some(&b"e0|e1|e2"[..]),
            "{ctx}"
        );
        assert!(
            matches!(db.get("k"), Err(Error::MergeFailed { .. })),
            "{ctx}: the default keyspace's operator decides there"
        );
        assert_eq!(
            scan_forward(l.iter().expect("iter")),
            [(b"k".to_vec(), b"e0|e1|e2".to_vec())],
            "{ctx}"
        );
    };
    check(&db, "in the memtable");
    db.compact_range(None, None).expect("compact");
    check(&db, "after compaction");
    assert_eq!(f.get("k1").expect("get"), None, "the filter removed it");
    assert_eq!(f.get("k2").expect("get").as_deref(), Some(&b"kept"[..]));
    assert!(
        db.stats().merge_failures > 0,
        "the default keyspace's operands stay"
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(t.get("k").expect("get"), None, "expired");
    assert_eq!(scan_forward(t.iter().expect("iter")), []);
    drop((c, l, f, t, plain));
    db.close().expect("close");
    // Reopened with each keyspace's options.
    let mut reopen = opts.clone();
    for (name, o) in [
        ("counters", counters()),
        ("logs", logs()),
        ("filtered", filtered()),
        ("expiring", expiring()),
    ] {
        reopen.keyspace_options.insert(name.into(), o);
    }
    let db = Db::open(reopen.clone()).expect("reopen");
    check(&db, "after reopen");
    db.close().expect("close");
    // A keyspace TTL under a second, or options for the default keyspace, are refused.
    let mut short = reopen.clone();
    short.keyspace_options.insert(
        "expiring".into(),
        KeyspaceOptions {
            ttl: Some(Duration::ZERO),
            ..KeyspaceOptions::default()
        },
    );
    assert!(matches!(Db::open(short), Err(Error::InvalidArgument(_))));
    let mut default = reopen.clone();
    default
        .keyspace_options
        .insert("default".into(), KeyspaceOptions::default());
    assert!(matches!(Db::open(default), Err(Error::InvalidArgument(_))));
    // A keyspace created with a TTL cannot be opened without one.
    let mut no_ttl = reopen;
    no_ttl.keyspace_options.remove("expiring");
    match Db::open(no_ttl) {
        Err(Error::OptionMismatch { stored, .. }) => {
            assert!(stored.contains("expiring"), "{stored}")
        }
        other => panic!("expected OptionMismatch, got {other:?}"),
    }
}

#[test]
fn a_keyspace_compresses_its_blocks_with_its_own_codec() {
    // The same compressible data in the default keyspace (no compression) and in keyspace
    // "cold", compressed with LZ4 or not: only cold's blocks shrink.
    let table_bytes = |cold: Option<matrixkv::Compression>| {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut opts = small_options(dir.path());
        opts.min_blob_bytes = None;
        let db = Db::open(opts.clone()).expect("open");
        let ks = KeyspaceOptions {
            compression: cold,
            ..KeyspaceOptions::default()
        };
        let c = db.create_keyspace("cold", ks.clone()).expect("create");
        for i in 0..3000 {
            let v = format!("{i:08}").repeat(40);
            db.put(format!("k{i:05}"), &v).expect("put");
            c.put(format!("k{i:05}"), &v).expect("put");
        }
        db.compact_range(None, None).expect("compact");
        let bytes: u64 = db.stats().levels.iter().skip(1).map(|(_, b)| b).sum();
        drop(c);
        db.close().expect("close");
        // Readable after a reopen, both keyspaces.
        let mut reopen = opts;
        reopen.keyspace_options.insert("cold".into(), ks);
        let db = Db::open(reopen).expect("reopen");
        let c = db.keyspace("cold").expect("cold");
        for i in (0..3000).step_by(97) {
            let v = format!("{i:08}").repeat(40).into_bytes();
            assert_eq!(c.get(format!("k{i:05}")).expect("get"), Some(v.clone()));
            assert_eq!(db.get(format!("k{i:05}")).expect("get"), Some(v));
        }
        assert_eq!(scan_forward(c.iter().expect("iter")).len(), 3000);
        db.verify().expect("verify");
        bytes
    };
    let plain = table_bytes(None);
    let lz4 = table_bytes(Some(matrixkv::Compression::Lz4));
    assert!(
        lz4 * 10 < plain * 7,
        "cold compressed: {lz4} table bytes, uncompressed: {plain}"
    );
}

#[test]
fn dropping_a_keyspace_reclaims_its_space_and_frees_its_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.min_blob_bytes = Some(512);
    // Every separable value at write (the default logs those below 2 KiB in the WAL).
    opts.separate_at_write_min_bytes = None;
    let db = Db::open(opts.clone()).expect("open");
    let big = db
        .create_keyspace("big", KeyspaceOptions::default())
        .expect("create");
    for i in 0..2000 {
        big.put(format!("k{i:05}"), vec![b'v'; 1000]).expect("put");
        if i % 10 == 0 {
            db.put(format!("k{i:05}"), "small").expect("put");
        }
    }
    db.compact_range(None, None).expect("compact");
    let before = db.stats();
    let level_bytes = |s: &matrixkv::Stats| s.levels.iter().skip(1).map(|(_, b)| b).sum::<u64>();
    assert!(before.blob_bytes.0 > 1_500_000, "{before}");
    let snap = db.snapshot();
    db.drop_keyspace("big").expect("drop");
    assert!(matches!(big.get("k00001"), Err(Error::KeyspaceDropped { ref name }) if name == "big"));
    assert!(matches!(
        big.put("k", "v"),
        Err(Error::KeyspaceDropped { .. })
    ));
    let mut batch = WriteBatch::new();
    batch.put_cf(&big, "k", "v");
    assert!(matches!(
        db.write(batch),
        Err(Error::KeyspaceDropped { .. })
    ));
    assert!(db.keyspace("big").is_err());
    assert!(db.drop_keyspace("big").is_err());
    assert!(db.drop_keyspace("default").is_err());
    assert_eq!(db.list_keyspaces(), ["default"]);
    // Reclaimed once no snapshot from before the drop is left.
    drop(snap);
    db.compact_range(None, None).expect("compact");
    db.wait_for_compactions().expect("wait");
    let after = db.stats();
    assert!(
        level_bytes(&after) < level_bytes(&before) / 10,
        "levels: before {before}\nafter {after}"
    );
    assert!(
        after.blob_bytes.0 - after.blob_bytes.1 < before.blob_bytes.0 / 10,
        "live blob bytes: before {before}\nafter {after}"
    );
    assert_eq!(
        db.get_int_property("matrixkv.estimate-num-keys")
            .expect("prop"),
        200
    );
    assert_eq!(scan_forward(db.iter().expect("iter")).len(), 200);
    // The name is free again; the new keyspace is empty, also after a reopen.
    let again = db
        .create_keyspace("big", KeyspaceOptions::default())
        .expect("create again");
    assert!(again.id() > big.id());
    assert_eq!(again.get("k00001").expect("get"), None);
    again.put("fresh", "1").expect("put");
    drop((big, again));
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    let again = db.keyspace("big").expect("big");
    assert_eq!(
        scan_forward(again.iter().expect("iter")),
        [(b"fresh".to_vec(), b"1".to_vec())]
    );
}

#[test]
fn a_dropped_keyspace_is_reclaimed_by_background_compaction_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.min_blob_bytes = Some(512);
    // Every separable value at write (the default logs those below 2 KiB in the WAL).
    opts.separate_at_write_min_bytes = None;
    let db = Db::open(opts).expect("open");
    // Keyspaces 1 ("a") and 3 ("c") around the one dropped, so that tables span the
    // boundaries of its key range.
    let a = db
        .create_keyspace("a", KeyspaceOptions::default())
        .expect("a");
    let b = db
        .create_keyspace("b", KeyspaceOptions::default())
        .expect("b");
    let c = db
        .create_keyspace("c", KeyspaceOptions::default())
        .expect("c");
    for i in 0..1500 {
        for ks in [&a, &b, &c] {
            ks.put(format!("k{i:05}"), vec![b'v'; 1000]).expect("put");
        }
    }
    db.compact_range(None, None).expect("compact");
    let before = db.stats();
    db.drop_keyspace("b").expect("drop");
    // The drop's range deletion reaches the levels with the next flush; compaction does the
    // rest on its own (no compact_range).
    db.flush().expect("flush");
    db.wait_for_compactions().expect("wait");
    let after = db.stats();
    let level_bytes = |s: &matrixkv::Stats| s.levels.iter().skip(1).map(|(_, b)| b).sum::<u64>();
    let live_blob = |s: &matrixkv::Stats| s.blob_bytes.0 - s.blob_bytes.1;
    assert!(
        live_blob(&after) * 10 < live_blob(&before) * 7,
        "a third of the values were dropped: before {before}\nafter {after}"
    );
    assert!(
        level_bytes(&after) < level_bytes(&before),
        "before {before}\nafter {after}"
    );
    assert_eq!(
        db.get_int_property("matrixkv.estimate-num-keys")
            .expect("prop"),
        3000
    );
    for ks in [&a, &c] {
        assert_eq!(scan_forward(ks.iter().expect("iter")).len(), 1500);
    }
}

#[test]
fn writes_racing_a_drop_never_outlive_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Arc::new(Db::open(small_options(dir.path())).expect("open"));
    for round in 0..5 {
        let ks = db
            .create_keyspace("racy", KeyspaceOptions::default())
            .expect("create");
        let writers: Vec<_> = (0..2)
            .map(|w| {
                let ks = ks.clone();
                std::thread::spawn(move || {
                    let mut i = 0u64;
                    loop {
                        match ks.put(format!("{round}-{w}-{i}"), "v") {
                            Ok(()) => i += 1,
                            Err(Error::KeyspaceDropped { .. }) => return i,
                            Err(e) => panic!("{e}"),
                        }
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(30));
        db.drop_keyspace("racy").expect("drop");
        let written: u64 = writers.into_iter().map(|t| t.join().expect("writer")).sum();
        assert!(written > 0);
    }
    db.put("only", "key").expect("put");
    db.compact_range(None, None).expect("compact");
    // Every write to the dropped keyspaces went before their deletion: nothing is left.
    assert_eq!(
        db.get_int_property("matrixkv.estimate-num-keys")
            .expect("prop"),
        1
    );
}

#[test]
fn a_batch_across_keyspaces_survives_a_power_loss_whole_or_not_at_all() {
    for seed in 0..6u64 {
        let fs = MemFs::new();
        let fast = SimFastTier::new("/db/fast");
        let mut opts = common::on_simulated_tiers(small_options("/db".as_ref()), &fs, &fast);
        opts.fast_dir = "/db/fast".into();
        let db = Db::open(opts.clone()).expect("open");
        let ks = db
            .create_keyspace("side", KeyspaceOptions::default())
            .expect("create");
        let mut synced = 0;
        for i in 0..300u64 {
            let mut b = WriteBatch::new();
            b.put(format!("k{i:04}"), i.to_le_bytes());
            b.put_cf(&ks, format!("k{i:04}"), i.to_le_bytes());
            let sync = i % 37 == 0;
            db.write_opt(b, &WriteOptions { sync }).expect("write");
            if sync {
                synced = i;
            }
        }
        let (fs2, fast2) = fs.crash_with(FsCrashMode::DropUnsynced, seed, || {
            fast.crash(CrashPolicy::Random { seed })
        });
        drop((ks, db));
        let opts = common::on_simulated_tiers(opts, &fs2, &fast2);
        let db = Db::open(opts).expect("open after power loss");
        let ks = db.keyspace("side").expect("the keyspace survives");
        let default = scan_forward(db.iter().expect("iter"));
        let side = scan_forward(ks.iter().expect("iter"));
        assert_eq!(default, side, "seed {seed}: a batch was torn");
        assert!(
            default.len() as u64 > synced,
            "seed {seed}: a synced write was lost"
        );
    }
}

#[test]
fn names_are_checked() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(small_options(dir.path())).expect("open");
    for bad in ["", "default"] {
        assert!(
            db.create_keyspace(bad, KeyspaceOptions::default()).is_err(),
            "{bad:?}"
        );
    }
    assert!(
        db.create_keyspace(&"n".repeat(256), KeyspaceOptions::default())
            .is_err()
    );
    db.create_keyspace("ünïcode ok", KeyspaceOptions::default())
        .expect("create");
    assert!(
        db.create_keyspace("ünïcode ok", KeyspaceOptions::default())
            .is_err()
    );
    let short_ttl = KeyspaceOptions {
        ttl: Some(Duration::from_millis(10)),
        ..KeyspaceOptions::default()
    };
    assert!(db.create_keyspace("t", short_ttl).is_err());
    let err = db.keyspace("missing").expect_err("missing");
    assert!(err.to_string().contains("ünïcode ok"), "{err}");
    assert_eq!(db.keyspace("default").expect("default").id(), 0);
}

#[test]
fn a_database_created_before_keyspaces_opens_as_the_default_keyspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.create_without_keyspaces = true;
    let db = Db::open(opts.clone()).expect("create");
    for i in 0..500 {
        db.put(format!("k{i:04}"), "v").expect("put");
    }
    db.delete_range("k0100", "k0200").expect("delete_range");
    let err = db
        .create_keyspace("new", KeyspaceOptions::default())
        .expect_err("refused");
    assert!(err.to_string().contains("before keyspaces"), "{err}");
    db.close().expect("close");
    // Opened as a build with keyspaces opens it: the flag only matters at creation.
    let mut reopen: Options = opts;
    reopen.create_without_keyspaces = false;
    let db = Db::open(reopen).expect("reopen");
    assert_eq!(db.list_keyspaces(), ["default"]);
    db.compact_range(None, None).expect("compact");
    let all = scan_forward(db.iter().expect("iter"));
    assert_eq!(all.len(), 400);
    assert_eq!(all[0].0, b"k0000");
    assert!(
        db.create_keyspace("new", KeyspaceOptions::default())
            .is_err()
    );
}

#[test]
fn updates_since_names_each_operations_keyspace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.wal_retention_segments = 4;
    let db = Db::open(opts).expect("open");
    let from = db.last_sequence().next();
    let users = db
        .create_keyspace("users", KeyspaceOptions::default())
        .expect("create");
    let mut b = WriteBatch::new();
    b.put("k", "default");
    b.put_cf(&users, "k", "users");
    db.write(b).expect("write");
    db.drop_keyspace("users").expect("drop");
    let mut seen = Vec::new();
    for r in db.updates_since(from).expect("updates_since") {
        let (_, batch) = r.expect("batch");
        for (id, op) in batch.iter_with_keyspace() {
            let (name, dropped) = db.keyspace_name(id).expect("a known id");
            seen.push((name, dropped, format!("{op:?}")));
        }
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!(seen[0].0, "default");
    assert_eq!((seen[1].0.as_str(), seen[1].1), ("users", true));
    assert!(seen[2].2.contains("DeleteRange"), "the drop: {seen:?}");
    assert_eq!(db.keyspace_name(999), None);
}
