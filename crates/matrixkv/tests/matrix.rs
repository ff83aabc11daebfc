//! The matrix container end to end: role switches and column compactions under load, page
//! accounting, and one test per knob (DESIGN §9).

use matrixkv::{Db, Error, L0Layout, Options, ReadOptions};

fn opts(path: &std::path::Path) -> Options {
    let mut o = Options::new(path);
    o.write_buffer_bytes = 64 << 10;
    o.container_bytes = 512 << 10; // 128 pages of 4 KiB
    o.l1_target_bytes = 1 << 20;
    o.target_file_bytes = 64 << 10;
    o.column_lower_bytes = Some(64 << 10);
    o.column_upper_bytes = Some(128 << 10);
    o.column_threads = 2;
    o
}

fn key(i: u32) -> Vec<u8> {
    // Scrambled so writes land all over the key space.
    format!("k{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000).into_bytes()
}

/// Writes `n` keys (each three times, so versions shadow each other), deletes every 5th, and
/// checks every key. Returns the stats.
fn churn(db: &Db, n: u32) -> matrixkv::Stats {
    for round in 0..3u32 {
        for i in 0..n {
            db.put(key(i), format!("v{round}-{i}").repeat(8))
                .expect("churn");
        }
    }
    for i in (0..n).step_by(5) {
        db.delete(key(i)).expect("churn");
    }
    db.flush().expect("churn");
    db.wait_for_compactions().expect("churn");
    for i in 0..n {
        let want = (i % 5 != 0).then(|| format!("v2-{i}").repeat(8).into_bytes());
        assert_eq!(db.get(key(i)).expect("churn"), want, "key {i}");
    }
    db.stats()
}

#[test]
fn hundreds_of_column_compactions_leak_no_page() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path())).unwrap();
    let mut columns = 0;
    for batch in 0..6u32 {
        let s = churn(&db, 4000 + batch * 100);
        db.check_container_accounting().unwrap();
        columns = s.l0_compactions;
    }
    let s = db.stats();
    assert!(s.role_switches >= 10, "{s}");
    assert!(columns >= 100, "only {columns} column compactions: {s}");
    assert!(s.container_used_bytes <= s.container_capacity_bytes, "{s}");
    assert!(s.levels.iter().skip(1).any(|(n, _)| *n > 0), "{s}");
    assert!(db.verify().unwrap() > 0);
    db.close().unwrap();
    // After a reopen the pool is rebuilt from the manifest alone.
    let db = Db::open(opts(dir.path())).unwrap();
    db.check_container_accounting().unwrap();
    db.close().unwrap();
}

#[test]
fn an_iterator_keeps_the_pages_it_reads_alive_through_columns() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path())).unwrap();
    for i in 0..3000u32 {
        db.put(key(i), vec![b'a'; 100]).unwrap();
    }
    let snap = db.snapshot();
    let mut it = snap.iter().unwrap();
    it.seek_to_first().unwrap();
    // Overwrite everything many times: columns free and reuse pages meanwhile.
    for round in 0..4u8 {
        for i in 0..3000u32 {
            db.put(key(i), vec![b'b' + round; 100]).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert!(db.stats().l0_compactions > 0);
    let mut n = 0;
    while it.valid() {
        assert_eq!(
            it.value(),
            vec![b'a'; 100].as_slice(),
            "the iterator read reused pages"
        );
        n += 1;
        it.next().unwrap();
    }
    assert_eq!(n, 3000);
    drop(it);
    drop(snap);
    db.check_container_accounting().unwrap();
    db.close().unwrap();
}

#[test]
fn knob_container_bytes_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(opts(dir.path())).unwrap().close().unwrap();
    let mut o = opts(dir.path());
    o.container_bytes = 1 << 20;
    let e = Db::open(o).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OptionMismatch {
                option: "container_bytes",
                ..
            }
        ),
        "{e}"
    );
    let mut o = opts(dir.path());
    o.page_bytes = 8192;
    let e = Db::open(o).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OptionMismatch {
                option: "page_bytes",
                ..
            }
        ),
        "{e}"
    );
    let mut o = opts(dir.path());
    o.l0_layout = L0Layout::Tables;
    let e = Db::open(o).unwrap_err();
    assert!(
        matches!(
            e,
            Error::OptionMismatch {
                option: "l0_layout",
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn knob_container_budget_is_never_exceeded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path())).unwrap();
    let mut peak = 0;
    for i in 0..20000u32 {
        db.put(key(i), vec![7u8; 200]).unwrap();
        if i % 500 == 0 {
            let s = db.stats();
            assert!(s.container_used_bytes <= 512 << 10, "{s}");
            peak = peak.max(s.container_used_bytes);
        }
    }
    assert!(peak > 0);
    let file = std::fs::metadata(dir.path().join("fast/CONTAINER"))
        .unwrap()
        .len();
    assert_eq!(file, 512 << 10, "the container file is exactly the budget");
    db.close().unwrap();
}

#[test]
fn knob_switch_ratio_controls_how_full_the_receiver_gets() {
    let mut switches = Vec::new();
    for ratio in [0.3, 0.8] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.receiver_switch_ratio = ratio;
        let db = Db::open(o).unwrap();
        switches.push(churn(&db, 3000).role_switches);
        db.close().unwrap();
    }
    assert!(
        switches[0] > switches[1],
        "ratio 0.3 should switch more often: {switches:?}"
    );
}

#[test]
fn knob_all_to_all_drains_the_compactor_in_one_compaction() {
    let mut per_switch = Vec::new();
    for column in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.column_compaction = column;
        let db = Db::open(o).unwrap();
        let s = churn(&db, 3000);
        assert!(s.role_switches > 0, "{s}");
        per_switch.push(s.l0_compactions as f64 / s.role_switches as f64);
        db.close().unwrap();
    }
    assert!(
        per_switch[1] <= 1.01,
        "all-to-all: one L0 compaction per compactor: {per_switch:?}"
    );
    assert!(
        per_switch[0] > 1.5,
        "columns: several per compactor: {per_switch:?}"
    );
}

#[test]
fn knob_column_bounds_set_the_size_of_a_column() {
    let mut avg = Vec::new();
    for (lo, hi) in [(64 << 10, 96 << 10), (192 << 10, 256 << 10)] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.column_lower_bytes = Some(lo);
        o.column_upper_bytes = Some(hi);
        let db = Db::open(o).unwrap();
        avg.push(churn(&db, 3000).avg_l0_compaction_bytes());
        db.close().unwrap();
    }
    assert!(avg[0] < avg[1], "smaller bounds, smaller columns: {avg:?}");
}

#[test]
fn knob_column_threads_and_hints_do_not_change_results() {
    let mut hinted = Vec::new();
    for (threads, hints) in [(1, true), (4, true), (2, false)] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.column_threads = threads;
        o.hints = hints;
        // Keep data in L0 so reads go through the rows.
        o.receiver_switch_ratio = 0.9;
        let db = Db::open(o).unwrap();
        let s = churn(&db, 2000);
        hinted.push((hints, s.hinted_row_searches, s.row_searches));
        db.close().unwrap();
    }
    for (hints, h, rows) in &hinted {
        assert!(*rows > 0);
        assert_eq!(
            *h > 0,
            *hints,
            "hinted searches only with hints on: {hinted:?}"
        );
    }
}

#[test]
fn knob_l1_size_and_level_multiplier_shape_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.l1_target_bytes = 1 << 20;
    o.level_multiplier = 4;
    let db = Db::open(o).unwrap();
    // 4 MiB of unique data: four times the L1 target.
    for i in 0..20000u32 {
        db.put(format!("u{i:08}"), vec![(i % 251) as u8; 200])
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let s = db.stats();
    assert!(s.levels[1].1 <= 2 << 20, "L1 stays near its target: {s}");
    assert!(
        s.levels.iter().skip(2).any(|(n, _)| *n > 0),
        "data moved below L1: {s}"
    );
    db.close().unwrap();
}

#[test]
fn reads_see_tombstones_and_snapshots_in_the_container() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.receiver_switch_ratio = 0.9;
    let db = Db::open(o).unwrap();
    db.put(b"k", b"v1").unwrap();
    db.flush().unwrap();
    let snap = db.snapshot();
    db.delete(b"k").unwrap();
    db.flush().unwrap();
    db.put(b"j", b"x").unwrap();
    db.flush().unwrap();
    assert_eq!(
        db.get(b"k").unwrap(),
        None,
        "a tombstone in a newer row hides the older value"
    );
    assert_eq!(snap.get(b"k").unwrap(), Some(b"v1".to_vec()));
    let mut it = db.iter_opt(&ReadOptions::default()).unwrap();
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"j");
    it.next().unwrap();
    assert!(!it.valid());
    assert!(db.stats().container_rows.0 >= 3);
    drop(snap);
    db.close().unwrap();
}

#[test]
fn iterator_seeks_are_narrowed_by_hints_across_rows() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.container_bytes = 2 << 20;
    o.receiver_switch_ratio = 0.9;
    let db = Db::open(o).unwrap();
    // Several overlapping rows in the receiver.
    for round in 0..5u32 {
        for i in 0..1000u32 {
            db.put(key(i * 7 + round), format!("{round}")).unwrap();
        }
        db.flush().unwrap();
    }
    assert!(db.stats().container_rows.0 >= 5);
    let before = db.stats().hinted_row_searches;
    for i in 0..200u32 {
        let mut it = db.iter().unwrap();
        let k = key(i * 7 + 2);
        it.seek(&k).unwrap();
        assert_eq!(it.key(), k.as_slice());
        assert_eq!(it.value(), b"2");
    }
    assert!(
        db.stats().hinted_row_searches - before >= 200 * 3,
        "{}",
        db.stats()
    );
    db.close().unwrap();
}

#[test]
fn seeks_for_prev_are_narrowed_by_hints_across_rows_and_match_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut o = opts(dir.path());
    o.container_bytes = 2 << 20;
    o.receiver_switch_ratio = 0.9;
    let db = Db::open(o).unwrap();
    let mut model = std::collections::BTreeMap::new();
    for round in 0..5u32 {
        for i in 0..1000u32 {
            db.put(key(i * 7 + round), format!("{round}")).unwrap();
            model.insert(key(i * 7 + round), format!("{round}").into_bytes());
        }
        // A few tombstones, so a seek for prev must skip deleted keys.
        for i in (0..1000u32).step_by(97) {
            db.delete(key(i * 7 + round)).unwrap();
            model.remove(&key(i * 7 + round));
        }
        db.flush().unwrap();
    }
    assert!(db.stats().container_rows.0 >= 5);
    let before = db.stats().hinted_row_searches;
    for i in 0..300u32 {
        let mut it = db.iter().unwrap();
        // Existing keys, and targets between keys.
        let mut target = key(i * 7 + i % 5);
        if i % 2 == 1 {
            target.push(0);
        }
        it.seek_for_prev(&target).unwrap();
        match model.range(..=target.clone()).next_back() {
            Some((k, v)) => {
                assert!(it.valid(), "target {target:?}");
                assert_eq!((it.key(), it.value()), (k.as_slice(), v.as_slice()));
            }
            None => assert!(!it.valid()),
        }
    }
    assert!(
        db.stats().hinted_row_searches - before >= 300 * 3,
        "{}",
        db.stats()
    );
    db.close().unwrap();
}

#[test]
fn point_reads_skip_rows_whose_bloom_filter_rules_the_key_out() {
    for bloom_bits in [10, 0] {
        let dir = tempfile::tempdir().unwrap();
        let mut o = opts(dir.path());
        o.container_bytes = 2 << 20;
        o.receiver_switch_ratio = 0.9;
        o.table.bloom_bits_per_key = bloom_bits;
        let db = Db::open(o).unwrap();
        // Five rows of disjoint keys, each with a tombstone, all kept in the receiver.
        for round in 0..5u32 {
            for i in 0..500u32 {
                db.put(key(i * 5 + round), format!("{round}")).unwrap();
            }
            db.delete(key(round)).unwrap();
            db.flush().unwrap();
        }
        let rows = db.stats().container_rows.0 as u64;
        assert!(rows >= 5, "{}", db.stats());
        let before = db.stats();
        for i in 0..500u32 {
            assert_eq!(db.get(format!("absent{i:05}")).unwrap(), None);
        }
        let after = db.stats();
        let skips = after.row_filter_skips - before.row_filter_skips;
        let searches = after.row_searches - before.row_searches;
        if bloom_bits > 0 {
            assert_eq!(skips + searches, 500 * rows, "{after}");
            assert!(searches < 500 * rows / 20, "false positives: {after}");
        } else {
            assert_eq!((skips, searches), (0, 500 * rows), "{after}");
        }
        // Values and tombstones read the same with and without filters.
        for round in 0..5u32 {
            assert_eq!(db.get(key(round)).unwrap(), None);
            for i in 1..500u32 {
                assert_eq!(
                    db.get(key(i * 5 + round)).unwrap(),
                    Some(format!("{round}").into_bytes()),
                    "round {round} key {i}"
                );
            }
        }
        assert!(db.verify().unwrap() >= 5);
        db.close().unwrap();
    }
}

#[test]
fn multi_get_searches_each_row_from_the_previous_keys_position() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut o = opts(dir.path());
    o.container_bytes = 8 << 20;
    // Rows stay in the container: every lookup searches them.
    o.compaction_enabled = false;
    let db = Db::open(o).expect("open");
    for round in 0..2u32 {
        for i in 0..6000u32 {
            if i % 3 != round {
                db.put(key(i), format!("v{round}-{i}")).expect("put");
            }
        }
    }
    db.flush().expect("flush");
    assert!(db.stats().container_rows.0 > 2, "{}", db.stats());
    let keys: Vec<Vec<u8>> = (0..1500u32)
        .map(|i| key(i * 4 + 1))
        .chain([b"absent".to_vec()])
        .collect();
    let before = db.stats();
    let got: Vec<Option<Vec<u8>>> = db
        .multi_get(&keys)
        .into_iter()
        .collect::<matrixkv::Result<_>>()
        .expect("multi_get");
    let after = db.stats();
    for (k, v) in keys.iter().zip(&got) {
        assert_eq!(
            v,
            &db.get(k).expect("get"),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    assert!(got.iter().filter(|v| v.is_some()).count() >= 1400);
    let fingers = after.finger_row_searches - before.finger_row_searches;
    let searches = after.row_searches - before.row_searches;
    assert!(
        fingers * 2 > searches,
        "{fingers} of {searches} row searches galloped from the previous key"
    );
}
