//! Tests of the memtable: the `MemTable` facade, flush-entry collection and value backing.

use super::*;

/// A persistent memtable in a simulated region, and a function reopening its image.
fn persistent_mem() -> (Arc<crate::tier::SimulatedRegion>, MemTable) {
    let region = Arc::new(crate::tier::SimulatedRegion::new(64 << 10));
    let list = pskiplist::PSkipList::create(region.clone(), "fast/000009.pmt", 9).unwrap();
    (region, MemTable::persistent(Arc::new(list)).unwrap())
}

#[test]
fn a_memtable_with_a_filter_answers_every_lookup_like_one_without() {
    // A one-block filter saturates (false positives) and a large one rules most absent keys
    // out: both must answer exactly as the unfiltered memtable, for keys with a keyspace
    // prefix, merge chains, tombstones and every snapshot.
    let plain = MemTable::new();
    let small = MemTable::with_filter(64);
    let large = MemTable::with_filter(64 << 10);
    assert!(MemTable::with_filter(63).filter.is_none());
    let mut seq = 0u64;
    for i in 0..3_000u32 {
        let key = format!("k{:05}", i * 7 % 2_000);
        let (kind, value) = match i % 5 {
            0 => (ValueKind::Deletion, Vec::new()),
            1 | 2 => (ValueKind::Merge, vec![i as u8]),
            _ => (ValueKind::Value, i.to_le_bytes().to_vec()),
        };
        seq += 1;
        for m in [&plain, &small, &large] {
            m.add_in(SeqNo(seq), kind, b"ks1/", key.as_bytes(), &value);
        }
    }
    let mut ruled_out = 0;
    for i in 0..4_000u32 {
        let key = format!("ks1/k{i:05}");
        for snap in [1, seq / 2, seq] {
            let want_newest = plain.newest(key.as_bytes(), SeqNo(snap)).unwrap();
            let want_versions = plain.versions(key.as_bytes(), SeqNo(snap)).unwrap();
            for m in [&small, &large] {
                assert_eq!(m.newest(key.as_bytes(), SeqNo(snap)).unwrap(), want_newest);
                assert_eq!(
                    m.versions(key.as_bytes(), SeqNo(snap)).unwrap(),
                    want_versions
                );
            }
        }
        if !large.may_contain(key.as_bytes()) {
            ruled_out += 1;
        }
        // The key without its keyspace prefix was never added.
        assert_eq!(
            large.newest(&key.as_bytes()[4..], SeqNo(seq)).unwrap(),
            None
        );
    }
    // Keys k02000..k03999 were never written: the large filter rules nearly all out, and
    // never a present one (each answer above matched the unfiltered memtable's).
    assert!(
        ruled_out >= 1_950,
        "{ruled_out} of 2,000 absent keys ruled out"
    );
    assert!(
        small.may_contain(b"ks1/k99999"),
        "a saturated filter lets keys through"
    );
}

#[test]
fn a_persistent_memtable_answers_like_a_dram_one_and_keeps_its_range_tombstones_on_reopen() {
    let (region, mem) = persistent_mem();
    let dram = MemTable::new();
    let ops: [(u64, ValueKind, &[u8], &[u8]); 6] = [
        (1, ValueKind::Value, b"a", b"1"),
        (2, ValueKind::Merge, b"b", b"x"),
        (3, ValueKind::RangeDeletion, b"c", b"e"),
        (4, ValueKind::Value, b"d", b"4"),
        (5, ValueKind::Merge, b"b", b"y"),
        (6, ValueKind::Deletion, b"a", b""),
    ];
    for (seq, kind, k, v) in ops {
        mem.add_persistent_in(SeqNo(seq), kind, b"", k, v).unwrap();
        dram.add(SeqNo(seq), kind, k, v);
    }
    // Nothing is visible before the commit.
    assert_eq!(mem.newest(b"a", SeqNo(10)).unwrap(), None);
    mem.commit_persistent(SeqNo(6)).unwrap();
    let reopened = {
        let image = region.crash_image(crate::tier::CrashPolicy::DropUnpersisted);
        let r = Arc::new(crate::tier::SimulatedRegion::from_image(image));
        let list = pskiplist::PSkipList::open(r, "fast/000009.pmt").unwrap();
        Arc::new(MemTable::persistent(Arc::new(list)).unwrap())
    };
    let dram = Arc::new(dram);
    for m in [&Arc::new(mem), &reopened] {
        for k in [&b"a"[..], b"b", b"c", b"d", b"z"] {
            for snap in [1, 2, 5, 6] {
                assert_eq!(
                    m.newest(k, SeqNo(snap)).unwrap(),
                    dram.newest(k, SeqNo(snap)).unwrap()
                );
                assert_eq!(
                    m.versions(k, SeqNo(snap)).unwrap(),
                    dram.versions(k, SeqNo(snap)).unwrap()
                );
            }
        }
        assert_eq!(m.range_tombstones(), dram.range_tombstones());
        let scan = |mem: &Arc<MemTable>| {
            let mut it = mem.iter();
            it.seek_to_first().unwrap();
            let mut out = Vec::new();
            while it.valid() {
                out.push((it.key().to_vec(), it.value().to_vec()));
                it.next().unwrap();
            }
            out
        };
        assert_eq!(scan(m), scan(&dram));
        let flushed = |mem: &MemTable| -> Vec<(Vec<u8>, Vec<u8>)> {
            mem.flush_entries(0, None)
                .unwrap()
                .entries
                .iter()
                .map(|e| (e.key().to_vec(), e.value().to_vec()))
                .collect()
        };
        assert_eq!(flushed(m), flushed(&dram));
        assert!(m.has_entries() && !m.is_empty());
    }
}

#[test]
fn a_persistent_memtable_of_range_deletions_only_has_no_entries_to_flush() {
    let (_region, mem) = persistent_mem();
    mem.add_persistent_in(SeqNo(1), ValueKind::RangeDeletion, b"", b"a", b"k")
        .unwrap();
    mem.commit_persistent(SeqNo(1)).unwrap();
    assert!(!mem.has_entries());
    assert!(!mem.is_empty());
    assert_eq!(mem.range_tombstones().len(), 1);
    assert!(mem.flush_entries(0, None).unwrap().entries.is_empty());
}

fn flushed(
    mem: &MemTable,
    smallest: u64,
    op: bool,
) -> (Vec<(String, u64, ValueKind, String)>, u64) {
    let merge: Option<Arc<dyn crate::merge::MergeOperator>> =
        op.then(|| Arc::new(crate::merge::AppendOperator::new(b",")) as _);
    let f = mem
        .flush_entries(smallest, Some(&merge.as_ref()))
        .expect("a DRAM memtable reads without failing");
    let rows = f
        .entries
        .iter()
        .map(|e| {
            let p = key::parse_internal_key(e.key()).unwrap();
            (
                String::from_utf8_lossy(p.user_key).into_owned(),
                p.seq.0,
                p.kind,
                String::from_utf8_lossy(e.value()).into_owned(),
            )
        })
        .collect();
    (rows, f.dropped)
}

#[test]
fn a_flush_keeps_what_snapshots_need_and_folds_merges() {
    let m = MemTable::new();
    let add = |seq, kind, k: &str, v: &str| m.add(SeqNo(seq), kind, k.as_bytes(), v.as_bytes());
    add(5, ValueKind::Value, "a", "a5");
    add(3, ValueKind::Value, "a", "a3");
    add(9, ValueKind::Merge, "m", "x");
    add(8, ValueKind::Merge, "m", "y");
    add(7, ValueKind::Value, "m", "b");
    add(2, ValueKind::Value, "m", "old");
    add(6, ValueKind::Merge, "p", "p6");
    add(4, ValueKind::Merge, "p", "p4");
    add(12, ValueKind::Merge, "z", "z");
    add(11, ValueKind::Deletion, "z", "");
    add(10, ValueKind::Value, "z", "gone");
    let v = |k: &str, s, kind, val: &str| (k.to_owned(), s, kind, val.to_owned());
    // No snapshot below the writes: one entry per key, operands folded.
    let (rows, dropped) = flushed(&m, 100, true);
    assert_eq!(
        rows,
        [
            v("a", 5, ValueKind::Value, "a5"),
            v("m", 9, ValueKind::Value, "b,y,x"),
            v("p", 6, ValueKind::Merge, "p4,p6"),
            v("z", 12, ValueKind::Value, "z"),
        ]
    );
    assert_eq!(dropped, 7);
    // A snapshot at 5 keeps what it sees apart from what is newer.
    let (rows, _) = flushed(&m, 5, true);
    assert_eq!(
        rows,
        [
            v("a", 5, ValueKind::Value, "a5"),
            v("m", 9, ValueKind::Merge, "x"),
            v("m", 8, ValueKind::Merge, "y"),
            v("m", 7, ValueKind::Value, "b"),
            v("m", 2, ValueKind::Value, "old"),
            v("p", 6, ValueKind::Merge, "p6"),
            v("p", 4, ValueKind::Merge, "p4"),
            v("z", 12, ValueKind::Merge, "z"),
            v("z", 11, ValueKind::Deletion, ""),
            v("z", 10, ValueKind::Value, "gone"),
        ]
    );
    // Without an operator the operands stay with their base; what is below goes.
    let (rows, _) = flushed(&m, 100, false);
    assert_eq!(rows.len(), 1 + 3 + 2 + 2);
}
use crate::iter::vec_iter::testutil::{check_iter_against_model, test_seed};
use crate::key::make_internal_key;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn range_tombstones_answer_like_a_linear_scan_while_they_are_added() {
    // Reads between inserts see the index plus the recent list; past the list's cap the
    // index is rebuilt. Every answer matches a scan of all tombstones.
    let mem = MemTable::new();
    let mut all: Vec<(u8, u8, u64)> = Vec::new();
    let mut x: u64 = 7;
    for seq in 1..400u64 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let a = (x >> 33) as u8 % 50;
        let b = a + 1 + (x >> 45) as u8 % 10;
        mem.add(SeqNo(seq), ValueKind::RangeDeletion, &[a], &[b]);
        all.push((a, b, seq));
        let mut view = RangeDelView::default();
        mem.add_range_dels_to(&mut view);
        for k in [0u8, a, b, (x >> 20) as u8 % 64] {
            for snap in [seq, seq / 2] {
                let want = all
                    .iter()
                    .filter(|&&(s, e, t)| s <= k && k < e && t <= snap)
                    .map(|&(_, _, t)| SeqNo(t))
                    .max();
                assert_eq!(
                    view.max_covering(&[k], SeqNo(snap)),
                    want,
                    "seq {seq} key {k}"
                );
            }
        }
    }
    assert_eq!(mem.range_tombstones().len(), all.len());
    assert!(!mem.has_entries() && !mem.is_empty());
}

fn collect_forward(it: &mut MemTableIter) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    out
}

#[test]
fn entries_order_exactly_as_internal_keys_whatever_their_first_bytes() {
    // Short keys, zero bytes and keys sharing their first 16 bytes are where a prefix
    // comparison could go wrong.
    let mut rng = StdRng::seed_from_u64(test_seed());
    let alphabet = [0u8, 1, 0x7f, 0x80, 0xff];
    let keys: Vec<MemKey> = (0..3000)
        .map(|_| {
            // Half the keys start with a shared stem of 14 to 17 bytes, so prefixes are
            // often equal and the buffers decide.
            let stem = if rng.gen_bool(0.5) {
                vec![0x30u8; rng.gen_range(14..18)]
            } else {
                Vec::new()
            };
            let len = rng.gen_range(0..6);
            let mut user = stem;
            user.extend((0..len).map(|_| alphabet[rng.gen_range(0..alphabet.len())]));
            let seq = SeqNo(rng.gen_range(0..4));
            if rng.gen_bool(0.1) {
                // A probe built from arbitrary bytes, possibly too short for a tag.
                MemKey::probe(&user)
            } else {
                MemKey::entry(&user, seq, ValueKind::Value, b"v")
            }
        })
        .collect();
    for a in keys.iter().take(300) {
        for b in &keys {
            assert_eq!(
                a.cmp(b),
                key::compare_internal(a.ikey(), b.ikey()),
                "{:?} vs {:?}",
                a.ikey(),
                b.ikey()
            );
        }
    }
}

#[test]
fn get_returns_newest_version_visible_at_snapshot() {
    let mem = MemTable::new();
    mem.add(SeqNo(1), ValueKind::Value, b"k", b"v1");
    mem.add(SeqNo(5), ValueKind::Value, b"k", b"v5");
    mem.add(SeqNo(9), ValueKind::Value, b"k", b"v9");
    mem.add(SeqNo(3), ValueKind::Value, b"j", b"j3");
    assert_eq!(mem.get(b"k", SeqNo(0)), None);
    assert_eq!(
        mem.get(b"k", SeqNo(1)),
        Some((ValueKind::Value, b"v1".to_vec()))
    );
    assert_eq!(
        mem.get(b"k", SeqNo(8)),
        Some((ValueKind::Value, b"v5".to_vec()))
    );
    assert_eq!(
        mem.get(b"k", SeqNo::MAX),
        Some((ValueKind::Value, b"v9".to_vec()))
    );
    // Neighbouring and prefix keys are not confused with the key asked for.
    assert_eq!(mem.get(b"", SeqNo::MAX), None);
    assert_eq!(mem.get(b"k\x00", SeqNo::MAX), None);
    assert_eq!(
        mem.get(b"j", SeqNo::MAX),
        Some((ValueKind::Value, b"j3".to_vec()))
    );
    assert_eq!(mem.get(b"j", SeqNo(2)), None);
}

#[test]
fn tombstone_hides_older_values_only_from_later_snapshots() {
    let mem = MemTable::new();
    mem.add(SeqNo(1), ValueKind::Value, b"k", b"old");
    mem.add(SeqNo(2), ValueKind::Deletion, b"k", b"");
    mem.add(SeqNo(3), ValueKind::Value, b"k", b"new");
    assert_eq!(
        mem.get(b"k", SeqNo(1)),
        Some((ValueKind::Value, b"old".to_vec()))
    );
    assert_eq!(
        mem.get(b"k", SeqNo(2)),
        Some((ValueKind::Deletion, Vec::new()))
    );
    assert_eq!(
        mem.get(b"k", SeqNo(3)),
        Some((ValueKind::Value, b"new".to_vec()))
    );
}

#[test]
fn size_estimate_and_length_grow_with_inserts() {
    let mem = MemTable::new();
    assert!(mem.is_empty());
    assert_eq!(mem.approximate_bytes(), 0);
    mem.add(SeqNo(1), ValueKind::Value, b"key", &[7u8; 4096]);
    let one = mem.approximate_bytes();
    assert!(
        one >= 3 + TAG_LEN + 4096,
        "estimate {one} is below the payload"
    );
    mem.add(SeqNo(2), ValueKind::Deletion, b"key", b"");
    assert!(mem.approximate_bytes() > one);
    assert_eq!(mem.len(), 2);
    assert!(!mem.is_empty());
}

#[test]
fn iterator_walks_versions_in_internal_key_order_both_ways() {
    let mem = Arc::new(MemTable::new());
    mem.add(SeqNo(2), ValueKind::Value, b"b", b"b2");
    mem.add(SeqNo(1), ValueKind::Value, b"a", b"a1");
    mem.add(SeqNo(4), ValueKind::Deletion, b"b", b"");
    mem.add(SeqNo(3), ValueKind::Value, b"c", b"c3");
    let expected = vec![
        (
            make_internal_key(b"a", SeqNo(1), ValueKind::Value),
            b"a1".to_vec(),
        ),
        (
            make_internal_key(b"b", SeqNo(4), ValueKind::Deletion),
            Vec::new(),
        ),
        (
            make_internal_key(b"b", SeqNo(2), ValueKind::Value),
            b"b2".to_vec(),
        ),
        (
            make_internal_key(b"c", SeqNo(3), ValueKind::Value),
            b"c3".to_vec(),
        ),
    ];
    let mut it = mem.iter();
    assert!(!it.valid());
    assert_eq!(collect_forward(&mut it), expected);

    let mut backward = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        backward.push((it.key().to_vec(), it.value().to_vec()));
        it.prev().unwrap();
    }
    backward.reverse();
    assert_eq!(backward, expected);

    // seek lands on the first entry >= target, seek_for_prev on the last <= target.
    it.seek(&key::seek_key(b"b", SeqNo(3))).unwrap();
    assert_eq!(it.value(), b"b2");
    it.seek_for_prev(&key::seek_key(b"b", SeqNo(3))).unwrap();
    assert_eq!(it.key(), expected[1].0.as_slice());
    it.seek(b"d").unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"").unwrap();
    assert!(!it.valid());
}

#[test]
fn iterator_matches_sorted_model_under_random_operations() {
    let seed = test_seed();
    let mut rng = StdRng::seed_from_u64(seed);
    for round in 0..4 {
        let mem = Arc::new(MemTable::new());
        let mut model = Vec::new();
        let n = rng.gen_range(0..200);
        for i in 0..n {
            let user = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
            let seq = SeqNo(i + 1);
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let value = if kind == ValueKind::Value {
                format!("v{i}").into_bytes()
            } else {
                Vec::new()
            };
            mem.add(seq, kind, &user, &value);
            model.push((make_internal_key(&user, seq, kind), value));
        }
        model.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
        let mut it = mem.iter();
        check_iter_against_model(
            &mut it,
            &model,
            &mut rng,
            1500,
            &format!("seed {seed} round {round}"),
        );
    }
}

#[test]
fn concurrent_inserts_from_four_threads_give_a_consistent_scan() {
    const PER_THREAD: u64 = 2000;
    let mem = Arc::new(MemTable::new());
    let handles: Vec<_> = (0..4u64)
        .map(|t| {
            let mem = Arc::clone(&mem);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    // Threads interleave in key space; every write has its own sequence.
                    let user = format!("key{:06}", i * 4 + t);
                    let seq = SeqNo(t * PER_THREAD + i + 1);
                    mem.add(seq, ValueKind::Value, user.as_bytes(), &seq.0.to_le_bytes());
                }
            })
        })
        .collect();
    // A reader scanning during the inserts always sees a sorted sequence.
    let mut it = mem.iter();
    for _ in 0..5 {
        let seen = collect_forward(&mut it);
        assert!(
            seen.windows(2)
                .all(|w| key::compare_internal(&w[0].0, &w[1].0).is_lt())
        );
    }
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(mem.len(), 4 * PER_THREAD as usize);
    let seen = collect_forward(&mut it);
    assert_eq!(seen.len(), 4 * PER_THREAD as usize);
    for (i, (ikey, value)) in seen.iter().enumerate() {
        let parsed = key::parse_internal_key(ikey).unwrap();
        assert_eq!(parsed.user_key, format!("key{i:06}").as_bytes());
        assert_eq!(value.as_slice(), &parsed.seq.0.to_le_bytes());
    }
    for i in (0..4 * PER_THREAD).step_by(97) {
        let user = format!("key{i:06}");
        let (kind, value) = mem.get(user.as_bytes(), SeqNo::MAX).unwrap();
        assert_eq!(kind, ValueKind::Value);
        assert_eq!(value.len(), 8);
    }
}

#[test]
fn iterator_keeps_its_entry_readable_while_inserts_continue() {
    let mem = Arc::new(MemTable::new());
    mem.add(SeqNo(1), ValueKind::Value, b"b", b"vb");
    let mut it = mem.iter();
    it.seek_to_first().unwrap();
    mem.add(SeqNo(2), ValueKind::Value, b"a", b"va");
    mem.add(SeqNo(3), ValueKind::Value, b"c", b"vc");
    assert_eq!(it.value(), b"vb");
    it.next().unwrap();
    assert_eq!(it.value(), b"vc");
    it.prev().unwrap();
    it.prev().unwrap();
    assert_eq!(it.value(), b"va");
}
