//! Snapshots: a snapshot reads its tree while later commits release and reuse pages, the
//! pages a commit releases wait for every older snapshot, and concurrent readers see whole
//! commits.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::*;

/// 600 keys, one in ten 700 bytes longer, all at `loc(i, round)`; every seventh key
/// (shifting with the round) absent.
fn round_state(round: u64) -> Model {
    (0..600u64)
        .filter(|i| !(i + round).is_multiple_of(7))
        .map(|i| (round_key(i), loc(i, round)))
        .collect()
}

fn round_key(i: u64) -> Vec<u8> {
    let mut k = format!("key{i:05}").into_bytes();
    if i.is_multiple_of(10) {
        k.resize(k.len() + 700, b'.');
    }
    k
}

/// Commits the change from `round_state(round - 1)` to `round_state(round)`.
fn commit_round(tree: &PBTree, round: u64) {
    let mut w = tree.writer();
    for i in 0..600 {
        if (i + round).is_multiple_of(7) {
            w.remove(&round_key(i)).unwrap();
        } else {
            w.insert(&round_key(i), loc(i, round)).unwrap();
        }
    }
    w.commit().unwrap();
}

#[test]
fn a_snapshot_reads_its_tree_while_commits_release_and_reuse_pages() {
    let (_region, tree) = new_tree(2048);
    commit_round(&tree, 0);
    let old = entries(&round_state(0));
    let snap = tree.read();
    let mut it = snap.iter();
    it.seek_to_first().unwrap();
    for want in &old[..200] {
        assert_eq!((it.key(), it.location()), (&want.0[..], want.1));
        it.next().unwrap();
    }
    let mut mid = None;
    for round in 1..=30 {
        commit_round(&tree, round);
        if round == 15 {
            mid = Some(tree.read());
        }
    }
    let mid = mid.unwrap();
    // The snapshot still reads its tree completely, and so does the iterator.
    assert_eq!(snap.generation(), 1);
    assert_eq!(snap.keys(), old.len() as u64);
    for (k, l) in &old {
        assert_eq!(snap.get(k).unwrap(), Some(*l));
    }
    let mut rest = Vec::new();
    while it.valid() {
        rest.push((it.key().to_vec(), it.location()));
        it.next().unwrap();
    }
    assert_eq!(rest, old[200..]);
    assert_eq!(scan_iter(mid.iter()).unwrap(), entries(&round_state(15)));
    assert_eq!(scan(&tree), entries(&round_state(30)));
    // Every page released since the oldest snapshot waited for it.
    let used = tree.pages_used();
    assert!(used > 10, "{used} pages");
    let held = tree.pages_in_use();
    assert!(held > 25 * used, "{held} pages in use, the tree has {used}");
    let highest = tree.highest_written();
    drop((it, snap, mid));
    // Without snapshots, a commit's released pages are reused by the next one: the pages in
    // use stay at about twice the tree's, and no commit writes beyond the pages written so
    // far.
    for round in 31..=130 {
        commit_round(&tree, round);
        let (used, held) = (tree.pages_used(), tree.pages_in_use());
        assert!(
            held <= 2 * used + 2,
            "round {round}: {held} pages in use for {used}"
        );
    }
    assert_eq!(tree.highest_written(), highest);
    assert_eq!(scan(&tree), entries(&round_state(130)));
}

#[test]
fn pages_released_by_a_commit_wait_for_every_older_snapshot() {
    // Three node pages: a one-leaf tree and two released copies at most.
    let (_region, tree) = new_tree(4);
    let put = |tree: &PBTree, n: u64| {
        let mut w = tree.writer();
        w.insert(b"k", loc(n, n))?;
        w.commit()
    };
    put(&tree, 1).unwrap();
    let s1 = tree.read();
    put(&tree, 2).unwrap();
    let s2 = tree.read();
    put(&tree, 3).unwrap();
    assert_eq!(tree.pages_in_use(), 3);
    // Both released pages are still read by a snapshot: no room for another copy.
    let e = put(&tree, 4).unwrap_err();
    assert!(
        matches!(
            e,
            Error::IndexFull {
                needed: 1,
                free: 0,
                ..
            }
        ),
        "{e}"
    );
    drop(s1);
    // The page released by commit 2 held only the tree of s1; the one released by commit 3
    // holds s2's.
    assert_eq!(tree.pages_in_use(), 2);
    assert_eq!(put(&tree, 4).unwrap(), 4);
    assert_eq!(s2.get(b"k").unwrap(), Some(loc(2, 2)));
    assert_eq!(tree.get(b"k").unwrap(), Some(loc(4, 4)));
    let e = put(&tree, 5).unwrap_err();
    assert!(matches!(e, Error::IndexFull { .. }), "{e}");
    let s2_copy = s2.clone();
    drop(s2);
    assert_eq!(tree.pages_in_use(), 3, "a clone keeps the snapshot's pages");
    drop(s2_copy);
    assert_eq!(tree.pages_in_use(), 1);
    assert_eq!(put(&tree, 5).unwrap(), 5);
    assert_eq!(tree.get(b"k").unwrap(), Some(loc(5, 5)));
}

#[test]
fn readers_see_whole_commits_while_a_writer_commits() {
    // Commit `r` holds `round_state(r)`: every present key's location names its key and the
    // round, so a reader can tell a location that was never written for a key, and a scan
    // can tell a state that mixes rounds.
    const ROUNDS: u64 = 40;
    let (_region, tree) = new_tree(4096);
    commit_round(&tree, 0);
    let done = AtomicBool::new(false);
    let checked = AtomicU64::new(0);
    // The three threads start together; each reader makes a last pass after the writer is
    // done, so the readers always check something.
    let start = std::sync::Barrier::new(3);
    std::thread::scope(|s| {
        s.spawn(|| {
            start.wait();
            for round in 1..=ROUNDS {
                commit_round(&tree, round);
            }
            done.store(true, Ordering::Release);
        });
        s.spawn(|| {
            let mut rng = StdRng::seed_from_u64(1);
            start.wait();
            loop {
                // Pairs with the writer's release store once it committed everything.
                let finished = done.load(Ordering::Acquire);
                let i = rng.gen_range(0..600);
                if let Some(l) = tree.get(&round_key(i)).unwrap() {
                    assert_eq!(l, loc(i, l.offset), "key {i}");
                    assert!(
                        l.offset <= ROUNDS && !(i + l.offset).is_multiple_of(7),
                        "key {i}: {l:?}"
                    );
                    checked.fetch_add(1, Ordering::Relaxed);
                }
                let snap = tree.read();
                let round = snap.generation() - 1;
                let want = round_state(round).get(&round_key(i)).copied();
                assert_eq!(
                    snap.get(&round_key(i)).unwrap(),
                    want,
                    "key {i}, round {round}"
                );
                if finished {
                    break;
                }
            }
        });
        s.spawn(|| {
            start.wait();
            loop {
                let finished = done.load(Ordering::Acquire);
                let it = tree.iter();
                let round = it.snapshot().generation() - 1;
                let all = scan_iter(it).unwrap();
                assert_eq!(all, entries(&round_state(round)), "round {round}");
                checked.fetch_add(all.len() as u64, Ordering::Relaxed);
                let (files, next) = tree.count_files_in_leaf_range(b"key00300", 50).unwrap();
                assert!(files.len() <= 50 && next.is_some());
                if finished {
                    assert_eq!(round, ROUNDS, "the last pass reads the last commit");
                    break;
                }
            }
        });
    });
    assert!(
        checked.load(Ordering::Relaxed) > 0,
        "the readers checked nothing"
    );
    assert_eq!(scan(&tree), entries(&round_state(ROUNDS)));
}
