use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use crate::iter::merging::MergingIterator;
use crate::iter::vec_iter::VecIter;
use crate::iter::vec_iter::testutil::{FailAfter, test_seed};
use crate::key::make_internal_key;
use crate::memtable::MemTable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// One write of the model history.
#[derive(Debug, Clone)]
struct Write {
    user: Vec<u8>,
    seq: u64,
    kind: ValueKind,
    value: Vec<u8>,
}

fn ikey_entry(w: &Write) -> (Vec<u8>, Vec<u8>) {
    (
        make_internal_key(&w.user, SeqNo(w.seq), w.kind),
        w.value.clone(),
    )
}

/// The user-visible state at `snapshot` within bounds: the writes ≤ snapshot applied in
/// sequence order (merge operands appended with ",", as `AppendOperator::new(",")` does),
/// tombstones removed.
fn visible(
    writes: &[Write],
    snapshot: u64,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut ordered: Vec<&Write> = writes.iter().filter(|w| w.seq <= snapshot).collect();
    ordered.sort_by_key(|w| w.seq);
    let mut state: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    for w in ordered {
        match w.kind {
            ValueKind::Value | ValueKind::BlobIndex => {
                state.insert(w.user.clone(), w.value.clone());
            }
            ValueKind::Deletion | ValueKind::RangeDeletion => {
                state.remove(&w.user);
            }
            ValueKind::Merge => {
                let v = state.entry(w.user.clone()).or_default();
                let fresh = v.is_empty() && !writes_before_have_value(writes, w);
                if !fresh {
                    v.push(b',');
                }
                v.extend_from_slice(&w.value);
            }
        }
    }
    state
        .into_iter()
        .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= l))
        .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < u))
        .collect()
}

/// True when `w.user` has a value just before `w` (its newest older write is a value or a
/// merge operand): distinguishes an empty existing value from none.
fn writes_before_have_value(writes: &[Write], w: &Write) -> bool {
    writes
        .iter()
        .filter(|o| o.user == w.user && o.seq < w.seq)
        .max_by_key(|o| o.seq)
        .is_some_and(|o| o.kind != ValueKind::Deletion)
}

fn random_user_key(rng: &mut StdRng) -> Vec<u8> {
    // Short keys from a small alphabet: many versions per key, prefixes of each other.
    let len = rng.gen_range(0..4);
    (0..len).map(|_| b"abcd"[rng.gen_range(0..4)]).collect()
}

fn random_history(rng: &mut StdRng, n: usize) -> Vec<Write> {
    (0..n)
        .map(|i| {
            let kind = match rng.gen_range(0..10) {
                0..=2 => ValueKind::Deletion,
                3..=5 => ValueKind::Merge,
                _ => ValueKind::Value,
            };
            let value = match kind {
                ValueKind::Value | ValueKind::BlobIndex => format!("v{}", i + 1).into_bytes(),
                ValueKind::Merge => format!("m{}", i + 1).into_bytes(),
                ValueKind::Deletion | ValueKind::RangeDeletion => Vec::new(),
            };
            Write {
                user: random_user_key(rng),
                seq: i as u64 + 1,
                kind,
                value,
            }
        })
        .collect()
}

/// An inner stream over `writes`: a memtable, a single vector, or a merge of a memtable
/// and several vectors holding a random partition of the writes.
fn build_inner(rng: &mut StdRng, writes: &[Write]) -> BoxedIter {
    match rng.gen_range(0..3) {
        0 => {
            let mem = Arc::new(MemTable::new());
            for w in writes {
                mem.add(SeqNo(w.seq), w.kind, &w.user, &w.value);
            }
            Box::new(mem.iter())
        }
        1 => Box::new(VecIter::new(writes.iter().map(ikey_entry).collect())),
        _ => {
            let n = rng.gen_range(1..5);
            let mem = Arc::new(MemTable::new());
            let mut parts = vec![Vec::new(); n];
            for w in writes {
                let c = rng.gen_range(0..=n);
                match parts.get_mut(c) {
                    Some(p) => p.push(ikey_entry(w)),
                    None => mem.add(SeqNo(w.seq), w.kind, &w.user, &w.value),
                }
            }
            let mut children: Vec<BoxedIter> = vec![Box::new(mem.iter())];
            children.extend(
                parts
                    .into_iter()
                    .map(|p| Box::new(VecIter::new(p)) as BoxedIter),
            );
            Box::new(MergingIterator::new(children))
        }
    }
}

fn db_iter(
    inner: BoxedIter,
    snapshot: u64,
    lower: Option<&[u8]>,
    upper: Option<&[u8]>,
) -> DbIterator {
    DbIterator::new(
        inner,
        SeqNo(snapshot),
        lower.map(<[u8]>::to_vec),
        upper.map(<[u8]>::to_vec),
        Resolvers {
            blobs: None,
            merge: Some(Arc::new(crate::merge::AppendOperator::new(","))),
            ttl: None,
            range_dels: Default::default(),
            prefix: Vec::new(),
        },
        Box::new(()),
    )
}

#[test]
fn iterator_matches_model_under_random_snapshots_bounds_and_moves() {
    let seed = test_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..60 {
        let n = rng.gen_range(0..120);
        let writes = random_history(&mut rng, n);
        let snapshot = rng.gen_range(0..=n as u64 + 1);
        let lower = rng.gen_bool(0.4).then(|| random_user_key(&mut rng));
        let upper = rng.gen_bool(0.4).then(|| random_user_key(&mut rng));
        let model = visible(&writes, snapshot, lower.as_deref(), upper.as_deref());
        let inner = build_inner(&mut rng, &writes);
        let mut it = db_iter(inner, snapshot, lower.as_deref(), upper.as_deref());
        let ctx = format!(
            "seed {seed} round {round} snapshot {snapshot} lower {lower:?} upper {upper:?}"
        );
        let mut pos: Option<usize> = None;
        for step in 0..150 {
            let op: String;
            match rng.gen_range(0..10) {
                0 => {
                    op = "seek_to_first".into();
                    it.seek_to_first().unwrap();
                    pos = (!model.is_empty()).then_some(0);
                }
                1 => {
                    op = "seek_to_last".into();
                    it.seek_to_last().unwrap();
                    pos = model.len().checked_sub(1);
                }
                2 => {
                    let t = random_user_key(&mut rng);
                    op = format!("seek({t:?})");
                    it.seek(&t).unwrap();
                    let i = model.partition_point(|(k, _)| k.as_slice() < t.as_slice());
                    pos = (i < model.len()).then_some(i);
                }
                3 => {
                    let t = random_user_key(&mut rng);
                    op = format!("seek_for_prev({t:?})");
                    it.seek_for_prev(&t).unwrap();
                    let i = model.partition_point(|(k, _)| k.as_slice() <= t.as_slice());
                    pos = i.checked_sub(1);
                }
                4..=6 => {
                    op = "next".into();
                    it.next().unwrap();
                    pos = pos.map(|p| p + 1).filter(|&p| p < model.len());
                }
                _ => {
                    op = "prev".into();
                    it.prev().unwrap();
                    pos = pos.and_then(|p| p.checked_sub(1));
                }
            }
            assert_eq!(
                it.valid(),
                pos.is_some(),
                "{ctx} step {step} after {op}: valid"
            );
            if let Some(p) = pos {
                let (k, v) = &model[p];
                assert_eq!(it.key(), k.as_slice(), "{ctx} step {step} after {op}: key");
                assert_eq!(
                    it.value(),
                    v.as_slice(),
                    "{ctx} step {step} after {op}: value"
                );
            }
        }
    }
}

#[test]
fn newest_visible_version_wins_and_tombstones_hide_keys() {
    let writes = [
        (b"a", 1, ValueKind::Value, &b"a1"[..]),
        (b"a", 3, ValueKind::Value, b"a3"),
        (b"b", 2, ValueKind::Value, b"b2"),
        (b"b", 4, ValueKind::Deletion, b""),
        (b"c", 5, ValueKind::Value, b"c5"),
    ];
    let entries = writes
        .iter()
        .map(|(u, s, k, v)| (make_internal_key(*u, SeqNo(*s), *k), v.to_vec()))
        .collect();
    let collect = |snapshot: u64| -> Vec<(Vec<u8>, Vec<u8>)> {
        let inner = Box::new(VecIter::new(Vec::clone(&entries)));
        db_iter(inner, snapshot, None, None)
            .collect::<Result<Vec<_>>>()
            .unwrap()
    };
    let pair = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
    assert_eq!(collect(2), [pair(b"a", b"a1"), pair(b"b", b"b2")]);
    assert_eq!(collect(3), [pair(b"a", b"a3"), pair(b"b", b"b2")]);
    assert_eq!(collect(4), [pair(b"a", b"a3")]);
    assert_eq!(collect(9), [pair(b"a", b"a3"), pair(b"c", b"c5")]);
    assert!(collect(0).is_empty());
}

#[test]
fn seeks_outside_bounds_clamp_to_them() {
    let entries: Vec<_> = [b"a", b"b", b"c", b"d", b"e"]
        .iter()
        .map(|u| {
            (
                make_internal_key(*u, SeqNo(1), ValueKind::Value),
                u.to_vec(),
            )
        })
        .collect();
    let mut it = db_iter(Box::new(VecIter::new(entries)), 1, Some(b"b"), Some(b"d"));
    it.seek(b"a").unwrap();
    assert_eq!(it.key(), b"b");
    it.prev().unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"z").unwrap();
    assert_eq!(it.key(), b"c");
    it.next().unwrap();
    assert!(!it.valid());
    it.seek_to_first().unwrap();
    assert_eq!(it.key(), b"b");
    it.seek_to_last().unwrap();
    assert_eq!(it.key(), b"c");
    it.seek(b"d").unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"a").unwrap();
    assert!(!it.valid());
}

#[test]
fn upper_bound_excludes_even_the_newest_possible_version_of_the_bound() {
    let entries = vec![
        (
            make_internal_key(b"a", SeqNo(1), ValueKind::Value),
            b"a".to_vec(),
        ),
        (
            make_internal_key(b"b", SeqNo::MAX, ValueKind::Value),
            b"b".to_vec(),
        ),
    ];
    let mut it = db_iter(
        Box::new(VecIter::new(entries)),
        SeqNo::MAX.0,
        None,
        Some(b"b"),
    );
    it.seek_to_last().unwrap();
    assert_eq!(it.key(), b"a");
    it.seek_for_prev(b"c").unwrap();
    assert_eq!(it.key(), b"a");
    it.next().unwrap();
    assert!(!it.valid());
}

#[test]
fn iterator_can_be_handed_to_another_thread() {
    let mem = Arc::new(MemTable::new());
    mem.add(SeqNo(1), ValueKind::Value, b"k", b"v");
    let keepalive = Box::new(Arc::clone(&mem));
    let it = DbIterator::new(
        Box::new(mem.iter()),
        SeqNo(1),
        None,
        None,
        Resolvers::default(),
        keepalive,
    );
    drop(mem);
    let items = std::thread::spawn(move || it.collect::<Result<Vec<_>>>())
        .join()
        .unwrap()
        .unwrap();
    assert_eq!(items, [(b"k".to_vec(), b"v".to_vec())]);
}

#[test]
fn std_iterator_starts_at_first_or_at_the_current_seek() {
    let entries: Vec<_> = [b"a", b"b", b"c"]
        .iter()
        .map(|u| {
            (
                make_internal_key(*u, SeqNo(1), ValueKind::Value),
                u.to_vec(),
            )
        })
        .collect();
    let it = db_iter(Box::new(VecIter::new(entries.clone())), 1, None, None);
    let keys: Vec<Vec<u8>> = it.map(|e| e.unwrap().0).collect();
    assert_eq!(keys, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);

    let mut it = db_iter(Box::new(VecIter::new(entries)), 1, None, None);
    it.seek_to_last().unwrap();
    it.prev().unwrap(); // reverse direction, at "b"
    let keys: Vec<Vec<u8>> = it.map(|e| e.unwrap().0).collect();
    assert_eq!(keys, [b"b".to_vec(), b"c".to_vec()]);
}

#[test]
fn storage_error_is_yielded_once_then_iteration_ends() {
    let entries: Vec<_> = [b"a", b"b", b"c", b"d"]
        .iter()
        .map(|u| {
            (
                make_internal_key(*u, SeqNo(1), ValueKind::Value),
                u.to_vec(),
            )
        })
        .collect();
    let inner = FailAfter {
        inner: VecIter::new(entries),
        moves_left: 2,
    };
    let it = db_iter(Box::new(inner), 1, None, None);
    let items: Vec<_> = it.collect();
    assert_eq!(items.len(), 3, "two entries, then the error: {items:?}");
    assert_eq!(items[0].as_ref().unwrap().0, b"a");
    assert_eq!(items[1].as_ref().unwrap().0, b"b");
    assert!(items[2].is_err());
}

#[test]
fn malformed_internal_key_is_an_error_not_a_skip() {
    let entries = vec![(b"abc".to_vec(), b"v".to_vec())];
    let mut it = db_iter(Box::new(VecIter::new(entries)), 1, None, None);
    assert!(it.seek_to_first().is_err());
    assert!(!it.valid());
}
