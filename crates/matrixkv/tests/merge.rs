//! Merge operators through the whole engine: memtables, container rows or L0 tables, levels,
//! snapshots, iterators, compaction folding, reopen, and operators that fail.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use common::small_options;
use matrixkv::{
    AppendOperator, Db, Error, L0Layout, MergeOperator, Options, U64AddOperator, WriteBatch,
};

fn count(n: u64) -> Vec<u8> {
    n.to_le_bytes().to_vec()
}

fn counter_options(path: &std::path::Path, layout: L0Layout) -> Options {
    let mut o = small_options(path);
    o.l0_layout = layout;
    o.merge_operator = Some(Arc::new(U64AddOperator));
    o
}

fn scan(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::scan_forward(db.iter().expect("iter"))
}

fn scan_reverse(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::scan_backward(db.iter().expect("iter"))
}

fn counters_add_up_through_every_layer(layout: L0Layout) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = counter_options(dir.path(), layout);
    let db = Db::open(opts.clone()).expect("open");
    let keys = 200u64;
    let key = |k: u64| format!("counter{k:04}");
    // Rounds of increments with flushes and compactions in between, plus filler so that
    // memtables switch, rows fill and columns compact on their own.
    let mut snapshots = Vec::new();
    for round in 1..=6u64 {
        for k in 0..keys {
            db.merge(key(k), count(k + round)).expect("merge");
            db.put(format!("filler{round}-{k:04}"), vec![b'f'; 300])
                .expect("put");
        }
        match round {
            2 => db.flush().expect("flush"),
            3 => db.compact_range(None, None).expect("compact"),
            4 => snapshots.push((round, db.snapshot())),
            _ => {}
        }
    }
    // A put resets a counter; a delete removes it and the next merge starts from zero.
    db.put(key(1), count(1000)).expect("put");
    db.merge(key(1), count(1)).expect("merge");
    db.delete(key(2)).expect("delete");
    db.merge(key(2), count(5)).expect("merge");
    db.delete(key(3)).expect("delete");
    let want = |k: u64, rounds: u64| -> Option<Vec<u8>> {
        match k {
            1 if rounds == 6 => Some(count(1001)),
            2 if rounds == 6 => Some(count(5)),
            3 if rounds == 6 => None,
            _ => Some(count((1..=rounds).map(|r| k + r).sum())),
        }
    };
    let check = |db: &Db, ctx: &str| {
        for k in 0..keys {
            assert_eq!(db.get(key(k)).expect("get"), want(k, 6), "{ctx}: key {k}");
        }
        let counters: Vec<_> = scan(db)
            .into_iter()
            .filter(|(k, _)| k.starts_with(b"counter"))
            .collect();
        assert_eq!(
            counters.len(),
            keys as usize - 1,
            "{ctx}: counters in a scan"
        );
        for (k, v) in &counters {
            let i: u64 = std::str::from_utf8(&k[7..])
                .expect("utf8")
                .parse()
                .expect("n");
            assert_eq!(Some(v.clone()), want(i, 6), "{ctx}: scanned key {i}");
        }
        let reverse: Vec<_> = scan_reverse(db)
            .into_iter()
            .filter(|(k, _)| k.starts_with(b"counter"))
            .collect();
        assert!(reverse == counters, "{ctx}: reverse scan differs");
        let keys_asked: Vec<String> = (0..keys).map(key).collect();
        let got = db.multi_get(&keys_asked);
        for (k, r) in got.into_iter().enumerate() {
            assert_eq!(
                r.expect("multi_get"),
                want(k as u64, 6),
                "{ctx}: multi_get {k}"
            );
        }
    };
    check(&db, "live");
    // The snapshot taken after round 4 sees four rounds, through a compaction that folds.
    db.compact_range(None, None).expect("compact");
    for (rounds, snap) in &snapshots {
        for k in [0u64, 7, 150] {
            assert_eq!(
                snap.get(key(k)).expect("snapshot get"),
                want(k, *rounds),
                "snapshot key {k}"
            );
        }
    }
    drop(snapshots);
    // One more (neutral) operand per live counter, so that the compaction below rewrites the
    // counters' tables of the last level, where the versions the snapshot needed still are.
    for k in (0..keys).filter(|&k| k != 3) {
        db.merge(key(k), count(0)).expect("merge");
    }
    db.compact_range(None, None).expect("compact");
    check(&db, "after compaction");
    // With no snapshot left, compaction folded every counter's operands into one value and
    // dropped the tombstone: one entry per live key remains.
    let live = scan(&db).len() as u64;
    assert_eq!(
        db.get_int_property("matrixkv.estimate-num-keys")
            .expect("property"),
        live
    );
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    check(&db, "after reopen");
    db.close().expect("close");
}

#[test]
fn counters_add_up_through_memtables_rows_levels_and_snapshots() {
    counters_add_up_through_every_layer(L0Layout::Matrix);
}

#[test]
fn counters_add_up_through_memtables_l0_tables_levels_and_snapshots() {
    counters_add_up_through_every_layer(L0Layout::Tables);
}

#[test]
fn merge_without_an_operator_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(small_options(dir.path())).expect("open");
    let e = db.merge("k", "v").expect_err("no operator");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert!(e.to_string().contains("merge_operator"), "{e}");
    let mut b = WriteBatch::new();
    b.put("other", "x");
    b.merge("k", "v");
    let e = db.write(b).expect_err("batch with a merge");
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(
        db.get("other").expect("get"),
        None,
        "the batch is all or nothing"
    );
    db.close().expect("close");
}

#[test]
fn operands_written_with_an_operator_need_one_to_be_read_after_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut opts = small_options(dir.path());
    opts.merge_operator = Some(Arc::new(AppendOperator::new(b"+")));
    let db = Db::open(opts.clone()).expect("open");
    db.put("k", "a").expect("put");
    db.merge("k", "b").expect("merge");
    db.put("plain", "p").expect("put");
    db.close().expect("close");
    let mut without = opts.clone();
    without.merge_operator = None;
    let db = Db::open(without).expect("open without operator");
    let e = db.get("k").expect_err("operands but no operator");
    assert!(e.to_string().contains("no merge operator"), "{e}");
    assert_eq!(db.get("plain").expect("get").as_deref(), Some(&b"p"[..]));
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    assert_eq!(db.get("k").expect("get").as_deref(), Some(&b"a+b"[..]));
    db.close().expect("close");
}

/// Appends, but fails (or panics) on an operand `bad` while `broken` is set.
struct Fragile {
    broken: Arc<AtomicBool>,
    panic: bool,
}

impl MergeOperator for Fragile {
    fn name(&self) -> &str {
        "fragile"
    }

    fn full_merge(
        &self,
        key: &[u8],
        existing: Option<&[u8]>,
        operands: &[&[u8]],
    ) -> Result<Vec<u8>, String> {
        if self.broken.load(Ordering::SeqCst) && operands.contains(&&b"bad"[..]) {
            if self.panic {
                panic!("cannot merge bad");
            }
            return Err("cannot merge bad".into());
        }
        AppendOperator::new(b",").full_merge(key, existing, operands)
    }
}

fn a_failing_operator_loses_nothing(panic: bool) {
    let dir = tempfile::tempdir().expect("tempdir");
    let broken = Arc::new(AtomicBool::new(true));
    let mut opts = small_options(dir.path());
    opts.merge_operator = Some(Arc::new(Fragile {
        broken: Arc::clone(&broken),
        panic,
    }));
    let db = Db::open(opts.clone()).expect("open");
    db.put("victim", "base").expect("put");
    db.merge("victim", "bad").expect("merge");
    db.merge("victim", "ok").expect("merge");
    db.put("bystander", "fine").expect("put");
    db.merge("good", "1").expect("merge");
    db.merge("good", "2").expect("merge");
    let e = db.get("victim").expect_err("the operator fails");
    assert!(
        matches!(&e, Error::MergeFailed { operator, .. } if operator == "fragile"),
        "{e}"
    );
    assert!(e.to_string().contains("cannot merge bad"), "{e}");
    // Compaction keeps the operands it cannot fold; everything else compacts normally.
    db.compact_range(None, None)
        .expect("compaction survives the operator");
    assert!(db.stats().merge_failures > 0, "{}", db.stats());
    assert_eq!(
        db.get("bystander").expect("get").as_deref(),
        Some(&b"fine"[..])
    );
    assert_eq!(db.get("good").expect("get").as_deref(), Some(&b"1,2"[..]));
    let mut it = db.iter().expect("iter");
    it.seek_to_first().expect("first key");
    assert!(
        it.seek(b"victim").is_err(),
        "an iterator reports the failure too"
    );
    // Once the operator works again, nothing was lost.
    broken.store(false, Ordering::SeqCst);
    assert_eq!(
        db.get("victim").expect("get").as_deref(),
        Some(&b"base,bad,ok"[..])
    );
    db.compact_range(None, None).expect("compact");
    db.close().expect("close");
    let db = Db::open(opts).expect("reopen");
    assert_eq!(
        db.get("victim").expect("get").as_deref(),
        Some(&b"base,bad,ok"[..])
    );
    db.close().expect("close");
}

#[test]
fn an_operator_that_returns_an_error_loses_nothing() {
    a_failing_operator_loses_nothing(false);
}

#[test]
fn an_operator_that_panics_loses_nothing() {
    a_failing_operator_loses_nothing(true);
}
