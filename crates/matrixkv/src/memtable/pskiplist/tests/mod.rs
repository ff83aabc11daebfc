//! Tests of the persistent skiplist: agreement with a `BTreeMap` model before and after
//! reopening, seeks and backward moves, in-place updates, crashes and uncommitted batches, a
//! full region, concurrent readers, a mapped file, and the golden bytes of
//! docs/format/pskiplist.md; damaged nodes, records and headers in `corruption`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::format::{NODE_NEXT, OFF_HEAD, VERSION_HEADER_LEN};
use super::*;

mod corruption;
use crate::iter::InternalIterator;
use crate::key;
use crate::tier::{CrashPolicy, SimulatedRegion};

const PATH: &str = "fast/000007.psl";

/// Versions of each user key, oldest first: `(seq, kind, value)`.
type Model = BTreeMap<Vec<u8>, Vec<(u64, ValueKind, Vec<u8>)>>;

/// One insert: key, seq, kind, value.
type Op = (Vec<u8>, u64, ValueKind, Vec<u8>);

fn new_list(len: usize) -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
    let region = Arc::new(SimulatedRegion::new(len));
    let list = PSkipList::create(region.clone(), PATH, 7).unwrap();
    (region, Arc::new(list))
}

fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, Arc<PSkipList>)> {
    let region = Arc::new(SimulatedRegion::from_image(image));
    let list = PSkipList::open(region.clone(), PATH)?;
    Ok((region, Arc::new(list)))
}

fn apply(list: &PSkipList, model: &mut Model, (k, seq, kind, v): &Op) {
    committed_insert(list, k, SeqNo(*seq), *kind, v).unwrap();
    model
        .entry(k.clone())
        .or_default()
        .push((*seq, *kind, v.clone()));
}

fn model_of(ops: &[Op]) -> Model {
    let mut m = Model::new();
    for (k, seq, kind, v) in ops {
        m.entry(k.clone())
            .or_default()
            .push((*seq, *kind, v.clone()));
    }
    m
}

fn model_get(m: &Model, key: &[u8], snapshot: u64) -> Option<(SeqNo, ValueKind, Vec<u8>)> {
    m.get(key)?
        .iter()
        .rev()
        .find(|(s, ..)| *s <= snapshot)
        .map(|(s, kind, v)| (SeqNo(*s), *kind, v.clone()))
}

/// Every `(internal key, value)` of the model in internal-key order.
fn model_entries(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter()
        .flat_map(|(k, vs)| {
            vs.iter()
                .rev()
                .map(move |(s, kind, v)| (key::make_internal_key(k, SeqNo(*s), *kind), v.clone()))
        })
        .collect()
}

fn scan(list: &Arc<PSkipList>) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut it = list.iter();
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next()?;
    }
    Ok(out)
}

/// `list` holds exactly what `model` holds: point reads at `snapshots`, a full scan, stats.
fn assert_agrees(list: &Arc<PSkipList>, model: &Model, snapshots: &[u64], absent: &[&[u8]]) {
    for k in model
        .keys()
        .map(Vec::as_slice)
        .chain(absent.iter().copied())
    {
        for &s in snapshots.iter().chain([&SeqNo::MAX.0]) {
            assert_eq!(
                list.get(k, SeqNo(s)).unwrap(),
                model_get(model, k, s),
                "key {k:?} at snapshot {s}"
            );
        }
    }
    assert_eq!(scan(list).unwrap(), model_entries(model));
    assert_eq!(list.keys(), model.len() as u64);
    assert_eq!(
        list.entries(),
        model.values().map(|v| v.len() as u64).sum::<u64>()
    );
    let max = model
        .values()
        .flatten()
        .map(|(s, ..)| *s)
        .max()
        .unwrap_or(0);
    assert_eq!(list.max_seq(), SeqNo(max));
}

/// Random operations over a pool of `keys` keys of 0..10 bytes from a 3-letter alphabet
/// (so there are prefixes and the empty key), sequence numbers from `first_seq` up.
fn random_ops(rng: &mut StdRng, keys: usize, n: usize, first_seq: u64) -> Vec<Op> {
    let mut pool: Vec<Vec<u8>> = (0..keys)
        .map(|_| {
            let len = rng.gen_range(0..10);
            (0..len).map(|_| b"abc"[rng.gen_range(0..3)]).collect()
        })
        .collect();
    pool.sort();
    pool.dedup();
    (0..n as u64)
        .map(|i| {
            let k = pool[rng.gen_range(0..pool.len())].clone();
            let kind = match rng.gen_range(0..10) {
                0..=6 => ValueKind::Value,
                7 | 8 => ValueKind::Deletion,
                _ => ValueKind::Merge,
            };
            let v = match kind {
                ValueKind::Deletion => Vec::new(),
                _ => (0..rng.gen_range(0..48))
                    .map(|_| rng.r#gen::<u8>())
                    .collect(),
            };
            (k, first_seq + i, kind, v)
        })
        .collect()
}

/// An insert committed on its own (a batch of one).
fn committed_insert(
    list: &PSkipList,
    key: &[u8],
    seq: SeqNo,
    kind: ValueKind,
    value: &[u8],
) -> Result<()> {
    list.insert(key, seq, kind, value)?;
    list.commit(seq.max(list.committed()))
}

#[test]
fn random_inserts_updates_and_deletions_agree_with_a_model_before_and_after_reopen() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let ops = random_ops(&mut rng, 400, 3000, 1);
    let (region, list) = new_list(1 << 20);
    let mut model = Model::new();
    let absent: [&[u8]; 3] = [b"d", b"abcabcabcabc", b"\xff"];
    for (i, op) in ops.iter().enumerate() {
        apply(&list, &mut model, op);
        if i % 1000 == 999 {
            assert_agrees(&list, &model, &[0, 1, 500, 1500, 2999], &absent);
        }
    }
    assert!(model.len() > 200, "{} keys", model.len());
    let snapshots = [0, 1, 2, 10, 100, 999, 1500, 2500, 3000];
    assert_agrees(&list, &model, &snapshots, &absent);

    let reopened = Arc::new(PSkipList::open(region.clone(), PATH).unwrap());
    assert_agrees(&reopened, &model, &snapshots, &absent);
    assert_eq!(reopened.used_bytes(), list.used_bytes());
    assert_eq!(reopened.id(), 7);
    assert_eq!(reopened.path(), Path::new(PATH));
    // The reopened list takes more writes.
    drop(list);
    for op in random_ops(&mut rng, 50, 200, 3001) {
        apply(&reopened, &mut model, &op);
    }
    assert_agrees(&reopened, &model, &snapshots, &absent);
}

#[test]
fn seeks_and_backward_moves_follow_the_internal_key_order() {
    let mut rng = StdRng::seed_from_u64(11);
    let ops = random_ops(&mut rng, 60, 400, 1);
    let (_region, list) = new_list(1 << 18);
    let mut model = Model::new();
    for op in &ops {
        apply(&list, &mut model, op);
    }
    let all = model_entries(&model);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    let mut it = list.iter();
    // Backwards from the last entry.
    it.seek_to_last().unwrap();
    let mut back = Vec::new();
    while it.valid() {
        back.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    back.reverse();
    assert_eq!(back, all);
    for round in 0..400usize {
        let user_key: Vec<u8> = if round.is_multiple_of(3) {
            (0..rng.gen_range(0..10))
                .map(|_| b"abcd"[rng.gen_range(0..4)])
                .collect()
        } else {
            keys[rng.gen_range(0..keys.len())].clone()
        };
        let kind = [ValueKind::Deletion, ValueKind::Value, ValueKind::Merge][round % 3];
        let target = key::make_internal_key(&user_key, SeqNo(rng.gen_range(0..420)), kind);
        let ge = all.partition_point(|(k, _)| key::compare_internal(k, &target).is_lt());
        it.seek(&target).unwrap();
        assert_eq!(it.valid(), ge < all.len(), "seek {target:?}");
        // A few steps forward, then back, from the seek.
        let mut idx = ge;
        for step in 0..6 {
            if !it.valid() {
                break;
            }
            assert_eq!((it.key(), it.value()), (&all[idx].0[..], &all[idx].1[..]));
            let p = key::parse_internal_key(it.key()).unwrap();
            assert_eq!(
                (it.user_key(), it.seq(), it.kind()),
                (p.user_key, p.seq, p.kind)
            );
            if step < 3 {
                it.next().unwrap();
                idx += 1;
            } else {
                it.prev().unwrap();
                if idx == 0 {
                    assert!(!it.valid());
                    break;
                }
                idx -= 1;
            }
        }
        let le = all.partition_point(|(k, _)| !key::compare_internal(k, &target).is_gt());
        it.seek_for_prev(&target).unwrap();
        assert_eq!(it.valid(), le > 0, "seek_for_prev {target:?}");
        if le > 0 {
            assert_eq!(it.key(), &all[le - 1].0[..]);
            it.next().unwrap();
            assert_eq!(it.valid(), le < all.len());
            if le < all.len() {
                assert_eq!(it.key(), &all[le].0[..]);
            }
        }
    }
    // A target shorter than a tag sorts as its bytes with tag 0: after every version.
    it.seek(keys[0]).unwrap();
    let after_first = model[keys[0]].len();
    assert_eq!(it.key(), &all[after_first].0[..]);
}

#[test]
fn an_update_of_an_existing_key_adds_no_node() {
    let (_region, list) = new_list(4096);
    committed_insert(&list, b"key", SeqNo(1), ValueKind::Value, b"first").unwrap();
    committed_insert(&list, b"other", SeqNo(2), ValueKind::Value, b"x").unwrap();
    let (keys, used) = (list.keys(), list.used_bytes());
    committed_insert(&list, b"key", SeqNo(3), ValueKind::Value, b"second!!!!").unwrap();
    assert_eq!(list.keys(), keys);
    assert_eq!(list.used_bytes(), used + VERSION_HEADER_LEN as u64 + 16);
    assert_eq!(list.entries(), 3);
    // The older version stays for snapshots.
    let got = |s| {
        list.get(b"key", SeqNo(s))
            .unwrap()
            .map(|(s, _, v)| (s.0, v))
    };
    assert_eq!(got(2), Some((1, b"first".to_vec())));
    assert_eq!(got(3), Some((3, b"second!!!!".to_vec())));
    assert_eq!(got(0), None);
}

#[test]
fn a_sequence_number_that_does_not_increase_for_its_key_is_refused() {
    let (region, list) = new_list(4096);
    committed_insert(&list, b"k", SeqNo(5), ValueKind::Value, b"v5").unwrap();
    let image = region.crash_image(CrashPolicy::KeepAll);
    for seq in [5, 4] {
        let e = committed_insert(&list, b"k", SeqNo(seq), ValueKind::Value, b"old").unwrap_err();
        assert!(
            matches!(e, Error::InvalidArgument(ref m) if m.contains("not above 5")),
            "{e}"
        );
    }
    let e =
        committed_insert(&list, b"k", SeqNo(SeqNo::MAX.0 + 1), ValueKind::Value, b"").unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(
        region.crash_image(CrashPolicy::KeepAll),
        image,
        "nothing was stored"
    );
    // Sequence numbers only increase per key.
    committed_insert(&list, b"j", SeqNo(3), ValueKind::Value, b"v3").unwrap();
    committed_insert(&list, b"k", SeqNo(6), ValueKind::Deletion, b"").unwrap();
    assert_eq!(
        list.get(b"k", SeqNo::MAX).unwrap(),
        Some((SeqNo(6), ValueKind::Deletion, Vec::new()))
    );
}

/// Inserts of new keys and updates (every third op updates an earlier key).
fn crash_ops(n: u64) -> Vec<Op> {
    (1..=n)
        .map(|seq| {
            let k = if seq.is_multiple_of(3) { seq / 3 } else { seq };
            let v = format!("value {seq} ")
                .repeat(1 + (seq % 4) as usize)
                .into_bytes();
            (format!("key{k:03}").into_bytes(), seq, ValueKind::Value, v)
        })
        .collect()
}

/// The recovered `list` holds exactly the first `n` of `ops`.
fn assert_prefix(list: &Arc<PSkipList>, ops: &[Op], n: usize, what: &str) {
    let model = model_of(&ops[..n]);
    assert_eq!(
        scan(list).unwrap(),
        model_entries(&model),
        "{what}: expected {n} inserts"
    );
    assert_eq!(list.entries(), n as u64, "{what}");
    assert_eq!(list.keys(), model.len() as u64, "{what}");
    assert_eq!(list.max_seq(), SeqNo(n as u64), "{what}");
}

/// How many of `ops` the recovered `list` holds (it must be a prefix).
fn recovered_prefix(list: &Arc<PSkipList>, ops: &[Op]) -> usize {
    let n = scan(list).unwrap().len();
    assert_prefix(list, ops, n, "recovered list");
    n
}

/// The recovered list takes new inserts (which overwrite whatever an interrupted insert
/// left after the allocation end) and keeps them across another reopen.
fn assert_takes_inserts(region: &SimulatedRegion, list: &PSkipList, seq: u64) {
    committed_insert(list, b"key001", SeqNo(seq), ValueKind::Value, b"later").unwrap();
    committed_insert(list, b"zzz", SeqNo(seq + 1), ValueKind::Value, b"new key").unwrap();
    let (_, again) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_eq!(
        again.get(b"key001", SeqNo::MAX).unwrap(),
        Some((SeqNo(seq), ValueKind::Value, b"later".to_vec()))
    );
    assert_eq!(
        again.get(b"zzz", SeqNo::MAX).unwrap(),
        Some((SeqNo(seq + 1), ValueKind::Value, b"new key".to_vec()))
    );
}

fn policies(seed: u64) -> [CrashPolicy; 4] {
    [
        CrashPolicy::KeepAll,
        CrashPolicy::DropUnpersisted,
        CrashPolicy::Random { seed },
        CrashPolicy::Random { seed: !seed },
    ]
}

#[test]
fn every_acknowledged_insert_survives_a_crash_under_every_policy() {
    let ops = crash_ops(60);
    let (region, list) = new_list(1 << 16);
    for (i, op) in ops.iter().enumerate() {
        committed_insert(&list, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
        assert!(
            region.unpersisted_ranges().is_empty(),
            "insert {i} returned unpersisted"
        );
        for policy in policies(i as u64) {
            let (r, recovered) = reopen(region.crash_image(policy)).unwrap();
            assert_prefix(
                &recovered,
                &ops,
                i + 1,
                &format!("after insert {i}, {policy:?}"),
            );
            if i.is_multiple_of(10) {
                assert_takes_inserts(&r, &recovered, 1000);
            }
        }
    }
}

#[test]
fn a_crash_inside_an_insert_recovers_the_inserts_before_it_and_maybe_it() {
    // Persist calls of a committed insert: 0 the payload, 1 the allocation end, 2 the
    // level-0 link or newest-version word, 3.. the higher levels of a new node, and last
    // the committed sequence number: the commit point. A failure of call k leaves call k's
    // store unpersisted (a publish's word stays visible, as after a failed flush) and
    // makes no later call.
    let ops = crash_ops(45);
    let (region, list) = new_list(1 << 16);
    let mut failures = 0;
    for (i, op) in ops.iter().enumerate() {
        let base = region.crash_image(CrashPolicy::KeepAll);
        // How many persist calls the insert makes when nothing fails.
        let calls = {
            let r = Arc::new(SimulatedRegion::from_image(base.clone()));
            let l = PSkipList::open(r.clone(), PATH).unwrap();
            let before = r.persist_count();
            committed_insert(&l, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
            r.persist_count() - before
        };
        let commit = calls - 1;
        // `None`: the payload's write fails; `Some(k)`: persist call k fails.
        for fault in std::iter::once(None).chain((0..calls).map(Some)) {
            let r = Arc::new(SimulatedRegion::from_image(base.clone()));
            let l = Arc::new(PSkipList::open(r.clone(), PATH).unwrap());
            match fault {
                None => r.fail_writes_after(Some(0)),
                Some(k) => r.fail_persist_after(Some(k)),
            }
            let res = committed_insert(&l, &op.0, SeqNo(op.1), op.2, &op.3);
            r.fail_writes_after(None);
            r.fail_persist_after(None);
            failures += 1;
            assert!(
                matches!(res, Err(Error::Io { .. })),
                "insert {i}, {fault:?}: {res:?}"
            );
            // Poisoned for writes, readable, and the failed insert is not visible.
            let again = committed_insert(&l, b"key999", SeqNo(999), ValueKind::Value, b"x");
            assert!(matches!(again, Err(Error::Poisoned { .. })), "{again:?}");
            let first = l.get(&ops[0].0, SeqNo::MAX).unwrap();
            assert!(i == 0 || first.is_some(), "insert {i}: {first:?}");
            assert_eq!(scan(&l).unwrap().len(), i, "insert {i}, {fault:?}, live");
            for policy in policies(i as u64 * 31 + fault.unwrap_or(9)) {
                let what = format!("insert {i}, fault {fault:?}, {policy:?}");
                let (r2, recovered) =
                    reopen(r.crash_image(policy)).unwrap_or_else(|e| panic!("{what}: {e}"));
                let n = recovered_prefix(&recovered, &ops);
                let with_it = match (fault, policy) {
                    (Some(k), CrashPolicy::KeepAll) if k == commit => true,
                    (Some(k), CrashPolicy::Random { .. }) if k == commit => n == i + 1,
                    _ => false,
                };
                assert_eq!(n, i + usize::from(with_it), "{what}");
                if i.is_multiple_of(5) {
                    assert_takes_inserts(&r2, &recovered, 1000);
                }
            }
        }
        committed_insert(&list, &op.0, SeqNo(op.1), op.2, &op.3).unwrap();
    }
    // At least the payload write, the payload persist, the allocation end, the link and
    // the commit.
    assert!(failures >= 5 * ops.len(), "{failures} failed inserts");
}

#[test]
fn an_uncommitted_batch_is_invisible_and_gone_after_a_crash() {
    let (region, list) = new_list(1 << 16);
    committed_insert(&list, b"a", SeqNo(1), ValueKind::Value, b"one").unwrap();
    // A batch of three versions (an update and two new keys) without its commit.
    list.insert(b"a", SeqNo(2), ValueKind::Value, b"two")
        .unwrap();
    list.insert(b"b", SeqNo(3), ValueKind::Value, b"three")
        .unwrap();
    list.insert(b"c", SeqNo(4), ValueKind::Deletion, b"")
        .unwrap();
    let visible = |l: &Arc<PSkipList>| {
        (
            l.get(b"a", SeqNo::MAX).unwrap(),
            l.get(b"b", SeqNo::MAX).unwrap(),
            scan(l).unwrap().len(),
        )
    };
    let before = (Some((SeqNo(1), ValueKind::Value, b"one".to_vec())), None, 1);
    assert_eq!(visible(&list), before);
    for policy in policies(7) {
        let (_, recovered) = reopen(region.crash_image(policy)).unwrap();
        assert_eq!(visible(&recovered), before, "{policy:?}");
        assert_eq!(recovered.committed(), SeqNo(1));
    }
    // The commit makes the whole batch visible at once, and durable.
    list.commit(SeqNo(4)).unwrap();
    let after = (
        Some((SeqNo(2), ValueKind::Value, b"two".to_vec())),
        Some((SeqNo(3), ValueKind::Value, b"three".to_vec())),
        4,
    );
    assert_eq!(visible(&list), after);
    let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_eq!(visible(&recovered), after);
    // A commit never goes back.
    assert!(matches!(
        list.commit(SeqNo(3)),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_full_region_refuses_the_insert_with_a_distinct_error_and_changes_nothing() {
    let (region, list) = new_list(1024);
    let mut model = Model::new();
    let mut seq = 0;
    let mut full = |list: &Arc<PSkipList>, model: &mut Model, key: &[u8], value: &[u8]| {
        seq += 1;
        let before = region.crash_image(CrashPolicy::KeepAll);
        let stats = (
            list.used_bytes(),
            list.entries(),
            list.keys(),
            list.max_seq(),
        );
        match committed_insert(list, key, SeqNo(seq), ValueKind::Value, value) {
            Ok(()) => {
                model.entry(key.to_vec()).or_default().push((
                    seq,
                    ValueKind::Value,
                    value.to_vec(),
                ));
                false
            }
            Err(Error::MemtableFull { path, needed, free }) => {
                assert_eq!(path, Path::new(PATH));
                assert_eq!(free, list.capacity() - list.used_bytes());
                assert!(needed > free, "needed {needed}, free {free}");
                assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
                let after = (
                    list.used_bytes(),
                    list.entries(),
                    list.keys(),
                    list.max_seq(),
                );
                assert_eq!(after, stats);
                true
            }
            Err(e) => panic!("{e}"),
        }
    };
    let mut n = 0;
    while !full(&list, &mut model, format!("key{n:03}").as_bytes(), &[7; 40]) {
        n += 1;
    }
    assert!(n >= 5, "{n} keys fit");
    // Updates need less room than new keys: they go on until the room is below 24 bytes.
    while !full(&list, &mut model, b"key000", b"") {}
    assert!(list.capacity() - list.used_bytes() < VERSION_HEADER_LEN as u64);
    let e = committed_insert(&list, b"key001", SeqNo(999), ValueKind::Deletion, b"").unwrap_err();
    assert!(e.to_string().contains("is full"), "{e}");
    assert!(!e.is_no_space(), "no device is full");
    assert_agrees(&list, &model, &[1, 5], &[]);
    let (_, reopened) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&reopened, &model, &[1, 5], &[]);
}

#[test]
fn readers_see_only_written_values_while_a_writer_inserts() {
    const KEYS: u64 = 120;
    const ROUNDS: u64 = 20;
    let key_of = |k: u64| format!("key{k:04}").into_bytes();
    // Every third sequence number deletes; the value names its key and sequence number.
    let version_of = |k: u64, seq: u64| {
        if seq.is_multiple_of(3) {
            (ValueKind::Deletion, Vec::new())
        } else {
            (
                ValueKind::Value,
                format!("{k}@{seq}")
                    .repeat(1 + (seq % 5) as usize)
                    .into_bytes(),
            )
        }
    };
    let check = |user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]| {
        let k: u64 = std::str::from_utf8(&user_key[3..])
            .unwrap()
            .parse()
            .unwrap();
        let (want_kind, want_value) = version_of(k, seq.0);
        assert_eq!((kind, value), (want_kind, &want_value[..]));
    };
    let (_region, list) = new_list(1 << 20);
    let done = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    // The three threads start together; each reader makes a last pass after the writer
    // is done, so the readers always check something.
    let start = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        s.spawn(|| {
            start.wait();
            let mut seq = 0;
            for _ in 0..ROUNDS {
                for k in 0..KEYS {
                    seq += 1;
                    let (kind, v) = version_of(k, seq);
                    committed_insert(&list, &key_of(k), SeqNo(seq), kind, &v).unwrap();
                }
            }
            done.store(true, Ordering::Release);
        });
        s.spawn(|| {
            let mut rng = StdRng::seed_from_u64(1);
            start.wait();
            loop {
                // Pairs with the writer's release store once it inserted everything.
                let finished = done.load(Ordering::Acquire);
                let k = rng.gen_range(0..KEYS);
                let snapshot = SeqNo(rng.gen_range(0..KEYS * ROUNDS + 10));
                for snap in [snapshot, SeqNo::MAX] {
                    if let Some((seq, kind, v)) = list.get(&key_of(k), snap).unwrap() {
                        assert!(seq <= snap);
                        check(&key_of(k), seq, kind, &v);
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if finished {
                    break;
                }
            }
        });
        s.spawn(|| {
            let mut it = list.iter();
            start.wait();
            loop {
                let finished = done.load(Ordering::Acquire);
                it.seek_to_first().unwrap();
                let mut last: Option<Vec<u8>> = None;
                let mut seen = 0;
                while it.valid() {
                    seen += 1;
                    check(it.user_key(), it.seq(), it.kind(), it.value());
                    if let Some(l) = &last {
                        assert!(key::compare_internal(l, it.key()).is_lt());
                    }
                    last = Some(it.key().to_vec());
                    checked.fetch_add(1, Ordering::Relaxed);
                    it.next().unwrap();
                }
                it.seek(&key::seek_key(&key_of(KEYS / 2), SeqNo::MAX))
                    .unwrap();
                if it.valid() {
                    check(it.user_key(), it.seq(), it.kind(), it.value());
                }
                if finished {
                    assert_eq!(seen, KEYS * ROUNDS, "the last pass sees every version");
                    break;
                }
            }
        });
    });
    assert!(
        checked.load(Ordering::Relaxed) > 0,
        "the readers checked nothing"
    );
    assert_eq!((list.keys(), list.entries()), (KEYS, KEYS * ROUNDS));
    assert_eq!(scan(&list).unwrap().len() as u64, KEYS * ROUNDS);
}

#[test]
fn a_list_in_a_mapped_file_reads_back_after_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000009.psl");
    let ops: Vec<Op> = vec![
        (b"b".to_vec(), 1, ValueKind::Value, b"bee".to_vec()),
        (b"a".to_vec(), 2, ValueKind::Value, b"ant".to_vec()),
        (b"c".to_vec(), 3, ValueKind::Merge, b"+1".to_vec()),
        (b"a".to_vec(), 4, ValueKind::Value, b"ape".to_vec()),
        (b"b".to_vec(), 5, ValueKind::Deletion, Vec::new()),
    ];
    {
        let region = Arc::new(matrixkv_pmem::MmapRegion::create(&path, 1 << 16).unwrap());
        let list = PSkipList::create(region, &path, 9).unwrap();
        for (k, seq, kind, v) in &ops {
            committed_insert(&list, k, SeqNo(*seq), *kind, v).unwrap();
        }
    }
    let region = Arc::new(matrixkv_pmem::MmapRegion::open(&path).unwrap());
    let list = Arc::new(PSkipList::open(region, &path).unwrap());
    assert_eq!(list.id(), 9);
    let model = model_of(&ops);
    assert_eq!(scan(&list).unwrap(), model_entries(&model));
    assert_eq!(
        list.get(b"a", SeqNo(3)).unwrap(),
        Some((SeqNo(2), ValueKind::Value, b"ant".to_vec()))
    );
    committed_insert(&list, b"d", SeqNo(6), ValueKind::Value, b"dog").unwrap();
    assert_eq!(
        list.get(b"d", SeqNo::MAX).unwrap(),
        Some((SeqNo(6), ValueKind::Value, b"dog".to_vec()))
    );
    assert_eq!(list.max_seq(), SeqNo(6));
}

/// The worked example of docs/format/pskiplist.md.
fn golden_list() -> (Arc<SimulatedRegion>, Arc<PSkipList>) {
    let (region, list) = new_list(512);
    committed_insert(&list, b"apple", SeqNo(1), ValueKind::Value, b"red").unwrap();
    committed_insert(&list, b"banana", SeqNo(2), ValueKind::Value, b"yellow").unwrap();
    committed_insert(&list, b"cherry", SeqNo(3), ValueKind::Value, b"dark").unwrap();
    committed_insert(&list, b"apple", SeqNo(4), ValueKind::Value, b"green").unwrap();
    committed_insert(&list, b"banana", SeqNo(5), ValueKind::Deletion, b"").unwrap();
    (region, list)
}

#[test]
fn golden_list_matches_the_format_doc() {
    let doc = include_str!("../../../../../../docs/format/pskiplist.md");
    let want = crate::golden::hex_block(doc);
    let (region, list) = golden_list();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let used = at(list.used_bytes());
    assert!(image[used..].iter().all(|&b| b == 0));
    let got = &image[..used];
    assert_eq!(
        got,
        &want[..],
        "docs/format/pskiplist.md is out of date; the list now holds:\n{}",
        got.chunks(8)
            .enumerate()
            .map(|(i, c)| format!(
                "{:04x}: {}",
                i * 8,
                c.iter()
                    .map(|b| format!("{b:02x}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The documented bytes, in a region of the documented length, open and read back.
    let mut documented = want;
    documented.resize(512, 0);
    let (_, list) = reopen(documented).unwrap();
    let get = |k: &[u8], s| list.get(k, SeqNo(s)).unwrap();
    assert_eq!(
        get(b"apple", 9),
        Some((SeqNo(4), ValueKind::Value, b"green".to_vec()))
    );
    assert_eq!(
        get(b"apple", 3),
        Some((SeqNo(1), ValueKind::Value, b"red".to_vec()))
    );
    assert_eq!(
        get(b"banana", 9),
        Some((SeqNo(5), ValueKind::Deletion, Vec::new()))
    );
    assert_eq!(
        get(b"banana", 4),
        Some((SeqNo(2), ValueKind::Value, b"yellow".to_vec()))
    );
    assert_eq!(
        get(b"cherry", 9),
        Some((SeqNo(3), ValueKind::Value, b"dark".to_vec()))
    );
    assert_eq!(
        (list.keys(), list.entries(), list.used_bytes()),
        (3, 5, used as u64)
    );
}
