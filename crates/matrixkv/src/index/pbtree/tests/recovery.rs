//! Undoing the latest commit: `open_at_most` against the generation the engine's manifest
//! recorded (one commit ahead returns the commit before, more or behind is corruption), and
//! `rollback` in the running process (the previous tree restored, snapshots of the undone
//! one still reading it, the next commit and a reopen seeing the new commit).

use super::super::format::{Committed, OFF_COMMITTED, OFF_SLOT, SLOT_LEN, encode_slot};
use super::*;
use crate::error::{ArtifactKind, CorruptionReason};

/// Opens `image` with `max_generation` as the manifest's generation.
fn reopen_at_most(image: Vec<u8>, max_generation: u64) -> Result<(Arc<SimulatedRegion>, PBTree)> {
    let region = Arc::new(SimulatedRegion::from_image(image));
    let tree = PBTree::open_at_most(region.clone(), PATH, max_generation)?;
    Ok((region, tree))
}

fn commit_word(region: &SimulatedRegion) -> u64 {
    region.read_u64(OFF_COMMITTED).unwrap()
}

/// `e` is a corruption of the index at `offset` whose message contains `what`.
fn assert_corruption(e: &Error, offset: usize, what: &str) {
    match e {
        Error::Corruption { site, reason } => {
            assert_eq!(site.kind, ArtifactKind::PersistentIndex, "{e}");
            assert_eq!(site.offset, offset as u64, "{e}");
            assert!(
                matches!(reason, CorruptionReason::Invalid(_)),
                "not a structural corruption: {e}"
            );
            assert!(e.to_string().contains(what), "{e}");
        }
        _ => panic!("not a corruption: {e}"),
    }
}

/// A key of batch-friendly size: about ten keys a leaf for one in four keys.
fn key(i: u64) -> Vec<u8> {
    let mut k = format!("key{i:05}").into_bytes();
    if i.is_multiple_of(4) {
        k.resize(300, b'.');
    }
    k
}

/// The writes of commit `round` of a tree of 400 keys: every key `i` with `i % 5 == round % 5`
/// removed, every other third key updated to `loc(i, round)`.
fn round_ops(round: u64) -> Vec<Op> {
    (0..400)
        .filter_map(|i| {
            if i % 5 == round % 5 {
                Some(Op::Remove(key(i)))
            } else if (i + round).is_multiple_of(3) {
                Some(Op::Put(key(i), loc(i, round)))
            } else {
                None
            }
        })
        .collect()
}

/// A tree of several levels: 400 keys in generation 1, then rounds 2..=`rounds`.
fn grown_tree(pages: usize, rounds: u64) -> (Arc<SimulatedRegion>, PBTree, Model) {
    let (region, tree) = new_tree(pages);
    let ops: Vec<Op> = (0..400).map(|i| Op::Put(key(i), loc(i, 1))).collect();
    commit_ops(&tree, &ops);
    let mut model = model_after(&Model::new(), &ops);
    for round in 2..=rounds {
        commit_ops(&tree, &round_ops(round));
        model = model_after(&model, &round_ops(round));
    }
    assert!(tree.height() >= 2, "height {}", tree.height());
    assert_eq!(tree.generation(), rounds);
    (region, tree, model)
}

fn probes() -> Vec<Vec<u8>> {
    (0..405).map(key).collect()
}

#[test]
fn open_at_most_with_the_index_one_commit_ahead_returns_the_previous_tree_and_takes_commits() {
    let (region, tree, before) = grown_tree(256, 3);
    let ops = round_ops(4);
    commit_ops(&tree, &ops);
    let ahead = model_after(&before, &ops);
    for policy in policies(4) {
        let image = region.crash_image(policy);
        // The manifest's generation: as `open`.
        let (_, t) = reopen_at_most(image.clone(), 4).unwrap();
        assert_eq!(t.generation(), 4);
        assert_agrees(&t, &ahead, &probes());
        let (_, t) = reopen_at_most(image.clone(), u64::MAX).unwrap();
        assert_eq!(t.generation(), 4);

        // One commit ahead of the manifest: generation 3, published and persisted.
        let (r, t) = reopen_at_most(image.clone(), 3).unwrap();
        assert_eq!(t.generation(), 3, "{policy:?}");
        assert_agrees(&t, &before, &probes());
        assert_eq!(commit_word(&r), 3);
        assert!(r.unpersisted_ranges().is_empty(), "{policy:?}");
        // Only generation 3's pages are in use: generation 4's are free.
        assert_eq!(t.pages_in_use(), t.pages_used());
        let (_, again) = reopen(r.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
        assert_eq!(again.generation(), 3);
        assert_agrees(&again, &before, &probes());

        // The next commit is generation 4 again, and survives a crash.
        let other = round_ops(9);
        assert_eq!(commit_ops(&t, &other), 4);
        let after = model_after(&before, &other);
        assert_agrees(&t, &after, &probes());
        let image = r.crash_image(CrashPolicy::DropUnpersisted);
        let (r2, t2) = reopen_at_most(image.clone(), 4).unwrap();
        assert_agrees(&t2, &after, &probes());
        assert_takes_commits(&r2, &t2, &after);
        // That commit can be undone at open in turn.
        let (_, t3) = reopen_at_most(image, 3).unwrap();
        assert_agrees(&t3, &before, &probes());
    }
}

#[test]
fn open_at_most_undoes_the_first_commit_back_to_the_empty_tree() {
    let (region, tree) = new_tree(16);
    let ops: Vec<Op> = (0..30).map(|i| Op::Put(key(i), loc(i, 1))).collect();
    commit_ops(&tree, &ops);
    let image = region.crash_image(CrashPolicy::DropUnpersisted);
    // Slot 0 holds generation 0, the empty tree `create` wrote.
    let (r, t) = reopen_at_most(image.clone(), 0).unwrap();
    assert_eq!((t.generation(), t.keys(), t.height()), (0, 0, 0));
    assert_eq!(t.pages_in_use(), 0);
    assert_eq!(commit_word(&r), 0);
    assert_eq!(commit_ops(&t, &ops[..3]), 1);
    let (_, t) = reopen_at_most(r.crash_image(CrashPolicy::DropUnpersisted), 1).unwrap();
    assert_agrees(&t, &model_after(&Model::new(), &ops[..3]), &probes());

    // Slot 0 damaged: nothing to go back to.
    let mut bad = image;
    bad[OFF_SLOT[0] + 8] ^= 1;
    let e = reopen_at_most(bad, 0).unwrap_err();
    assert!(
        matches!(
            &e,
            Error::Corruption {
                reason: CorruptionReason::ChecksumMismatch { .. },
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn an_index_two_commits_ahead_of_the_manifest_is_corruption_and_changes_nothing() {
    let (region, _tree, _) = grown_tree(256, 3);
    let image = region.crash_image(CrashPolicy::KeepAll);
    for max in [0, 1] {
        let (r, e) = {
            let r = Arc::new(SimulatedRegion::from_image(image.clone()));
            let e = PBTree::open_at_most(r.clone(), PATH, max).unwrap_err();
            (r, e)
        };
        assert_corruption(
            &e,
            OFF_COMMITTED,
            "more than one commit ahead of the manifest",
        );
        assert_eq!(r.crash_image(CrashPolicy::KeepAll), image, "max {max}");
    }
}

#[test]
fn an_index_behind_the_manifest_is_corruption() {
    let (region, _tree, _) = grown_tree(256, 2);
    let image = region.crash_image(CrashPolicy::KeepAll);
    for max in [3, 4, 1000] {
        let e = reopen_at_most(image.clone(), max).unwrap_err();
        assert_corruption(&e, OFF_COMMITTED, "behind the manifest");
    }
}

#[test]
fn an_index_one_commit_ahead_whose_previous_commit_is_gone_or_damaged_is_corruption() {
    let (region, tree, _) = grown_tree(256, 3);
    let image = region.crash_image(CrashPolicy::KeepAll);
    // A later commit wrote its slot over generation 2's, then crashed before its commit
    // point: generation 2 cannot be restored.
    let mut b = image.clone();
    let later = Committed {
        generation: 4,
        ..tree.current()
    };
    b[OFF_SLOT[0]..OFF_SLOT[0] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[0], &later));
    reopen(b.clone()).unwrap();
    let (r, e) = {
        let r = Arc::new(SimulatedRegion::from_image(b));
        (r.clone(), PBTree::open_at_most(r, PATH, 2).unwrap_err())
    };
    assert_corruption(&e, OFF_COMMITTED, "does not hold the manifest's generation");
    assert_eq!(commit_word(&r), 3, "a failed open writes nothing");

    // Generation 2's tree fails the checks of `open`: the commit word is left at 3. Here the
    // slot of generation 2 points at generation 3's root, a page newer than the slot.
    let mut b = image;
    let c = Committed {
        generation: 2,
        ..tree.current()
    };
    b[OFF_SLOT[0]..OFF_SLOT[0] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[0], &c));
    let r = Arc::new(SimulatedRegion::from_image(b));
    let e = PBTree::open_at_most(r.clone(), PATH, 2).unwrap_err();
    assert!(e.to_string().contains("newer than"), "{e}");
    assert_eq!(commit_word(&r), 3);
}

#[test]
fn rollback_restores_the_previous_tree_then_a_new_commit_and_a_reopen_see_the_new_commit() {
    let (region, tree, before) = grown_tree(256, 3);
    let pages_before = tree.pages_used();
    let previous = tree.read();
    let ops = round_ops(4);
    assert_eq!(commit_ops(&tree, &ops), 4);
    let undone = model_after(&before, &ops);
    assert_agrees(&tree, &undone, &probes());

    tree.rollback(&previous).unwrap();
    assert_eq!(tree.generation(), 3);
    assert_agrees(&tree, &before, &probes());
    assert_eq!(tree.pages_used(), pages_before);
    // The undone commit's pages are free at once (no snapshot reads its tree), and what it
    // released is the restored tree's again.
    assert_eq!(tree.pages_in_use(), pages_before);
    assert_eq!(commit_word(&region), 3);
    assert!(region.unpersisted_ranges().is_empty());
    for policy in policies(3) {
        let (_, t) = reopen(region.crash_image(policy)).unwrap();
        assert_eq!(t.generation(), 3, "{policy:?}");
        assert_agrees(&t, &before, &probes());
    }
    drop(previous);

    // The next commit writes generation 4 again (in the slot the undone one used).
    let ops = round_ops(7);
    assert_eq!(commit_ops(&tree, &ops), 4);
    let after = model_after(&before, &ops);
    assert_agrees(&tree, &after, &probes());
    for policy in policies(4) {
        let image = region.crash_image(policy);
        let (r, t) = reopen_at_most(image.clone(), 4).unwrap();
        assert_eq!(t.generation(), 4);
        assert_agrees(&t, &after, &probes());
        assert_takes_commits(&r, &t, &after);
        // Unrecorded, it would be undone at open like any commit.
        let (_, t) = reopen_at_most(image, 3).unwrap();
        assert_agrees(&t, &before, &probes());
    }
    // Later commits and their snapshots work as before.
    let mut model = after;
    for round in 8..20 {
        let snap = tree.read();
        commit_ops(&tree, &round_ops(round));
        assert_eq!(snap.keys(), model.len() as u64);
        model = model_after(&model, &round_ops(round));
    }
    assert_agrees(&tree, &model, &probes());
    assert_eq!(tree.pages_in_use(), tree.pages_used());
}

#[test]
fn rollback_is_refused_without_a_live_snapshot_of_the_tree_the_last_commit_started_from() {
    let (region, tree) = new_tree(64);
    let empty = tree.read();
    commit_ops(&tree, &[Op::Put(key(1), loc(1, 1))]);
    let first = tree.read();
    commit_ops(&tree, &[Op::Put(key(2), loc(2, 2))]);
    let latest = tree.read();
    let model: Model = [(key(1), loc(1, 1)), (key(2), loc(2, 2))].into();
    let (_other_region, other) = new_tree(64);
    commit_ops(&other, &[Op::Put(key(1), loc(1, 1))]);
    let foreign = other.read();
    let image = region.crash_image(CrashPolicy::KeepAll);
    // Of the committed generation, of two generations back, of another tree of the right
    // generation.
    for snap in [&latest, &empty, &foreign] {
        let e = tree.rollback(snap).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        assert!(e.to_string().contains("cannot roll"), "{e}");
    }
    assert_eq!(tree.generation(), 2);
    assert_agrees(&tree, &model, &[key(3)]);
    assert_eq!(region.crash_image(CrashPolicy::KeepAll), image);

    // Once only: after a rollback, the tree before it is not the last commit's parent.
    tree.rollback(&first).unwrap();
    assert!(matches!(
        tree.rollback(&empty).unwrap_err(),
        Error::InvalidArgument(_)
    ));
    assert_eq!(tree.generation(), 1);

    // A snapshot of a generation 1 that was itself rolled back is not the parent of a
    // generation 2 committed on the generation 1 that replaced it.
    let (_region, tree) = new_tree(64);
    let empty = tree.read();
    commit_ops(&tree, &[Op::Put(key(1), loc(1, 1))]);
    let undone = tree.read();
    tree.rollback(&empty).unwrap();
    commit_ops(&tree, &[Op::Put(key(5), loc(5, 5))]);
    commit_ops(&tree, &[Op::Put(key(6), loc(6, 6))]);
    assert_eq!(undone.generation(), 1);
    let e = tree.rollback(&undone).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    assert_eq!(tree.get(&key(6)).unwrap(), Some(loc(6, 6)));

    // A tree just opened has no commit to undo.
    let (_, reopened) = reopen(image).unwrap();
    let e = reopened.rollback(&reopened.read()).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn a_poisoned_tree_refuses_rollback_and_a_failed_rollback_poisons_it() {
    let (region, tree) = new_tree(64);
    commit_ops(&tree, &[Op::Put(key(1), loc(1, 1))]);
    let previous = tree.read();
    commit_ops(&tree, &[Op::Put(key(2), loc(2, 2))]);
    // The publish of the commit word fails.
    region.fail_persist_after(Some(0));
    let e = tree.rollback(&previous).unwrap_err();
    region.fail_persist_after(None);
    assert!(matches!(e, Error::Io { .. }), "{e}");
    // Readers keep the latest commit; writes and rollbacks are refused.
    assert_eq!(tree.generation(), 2);
    assert_eq!(tree.get(&key(2)).unwrap(), Some(loc(2, 2)));
    let e = tree.rollback(&previous).unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    let e = tree.writer().insert(b"x", loc(3, 3)).unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    // The recovery decides with the manifest's generation (1): either word gives
    // generation 1.
    for policy in policies(5) {
        let (_, t) = reopen_at_most(region.crash_image(policy), 1).unwrap();
        assert_eq!(t.generation(), 1);
        assert_eq!(t.get(&key(2)).unwrap(), None);
    }

    // A commit that failed poisons the tree: rollback is refused.
    let (region, tree) = new_tree(64);
    commit_ops(&tree, &[Op::Put(key(1), loc(1, 1))]);
    let previous = tree.read();
    commit_ops(&tree, &[Op::Put(key(2), loc(2, 2))]);
    let mut w = tree.writer();
    w.insert(&key(3), loc(3, 3)).unwrap();
    region.fail_writes_after(Some(0));
    assert!(matches!(w.commit(), Err(Error::Io { .. })));
    region.fail_writes_after(None);
    let e = tree.rollback(&previous).unwrap_err();
    assert!(matches!(e, Error::Poisoned { .. }), "{e}");
    assert_eq!(commit_word(&region), 2);
}

#[test]
fn a_live_snapshot_of_the_rolled_back_generation_reads_its_keys_after_later_commits() {
    let (_region, tree, before) = grown_tree(1024, 3);
    let previous = tree.read();
    // The undone commit changes two leaves: its tree shares every other page with
    // generation 3's.
    let ops = [Op::Put(key(1), loc(1, 4)), Op::Remove(key(398))];
    commit_ops(&tree, &ops);
    let undone = entries(&model_after(&before, &ops));
    let snap = tree.read();
    let mut it = snap.iter();
    it.seek_to_first().unwrap();
    for want in &undone[..100] {
        assert_eq!((it.key(), it.location()), (&want.0[..], want.1));
        it.next().unwrap();
    }
    tree.rollback(&previous).unwrap();
    drop(previous);
    // Commits of generation 4 and later: each releases pages of generation 3's tree that
    // the undone tree shares; none may be reused while `snap` is alive.
    let mut model = before;
    for round in 5..40 {
        commit_ops(&tree, &round_ops(round));
        model = model_after(&model, &round_ops(round));
    }
    assert_eq!(tree.generation(), 38);
    assert_eq!(snap.generation(), 4);
    for (k, l) in &undone {
        assert_eq!(snap.get(k).unwrap(), Some(*l), "{}", short(k));
    }
    let mut rest = Vec::new();
    while it.valid() {
        rest.push((it.key().to_vec(), it.location()));
        it.next().unwrap();
    }
    assert_eq!(rest, undone[100..]);
    assert_agrees(&tree, &model, &probes());
    let held = tree.pages_in_use();
    drop((it, snap));
    // Its pages and those it held back are free once it is gone.
    assert!(tree.pages_in_use() < held);
    assert_eq!(tree.pages_in_use(), tree.pages_used());
}

#[test]
fn pages_of_a_rolled_back_commit_wait_for_its_snapshots_then_are_reused() {
    // Three node pages: one-leaf trees.
    let (region, tree) = new_tree(4);
    let put = |n: u64| {
        let mut w = tree.writer();
        w.insert(b"k", loc(n, n))?;
        w.commit()
    };
    put(1).unwrap();
    let previous = tree.read();
    put(2).unwrap();
    let undone = tree.read();
    tree.rollback(&previous).unwrap();
    drop(previous);
    assert_eq!(tree.get(b"k").unwrap(), Some(loc(1, 1)));
    // The undone leaf is held for `undone`; the committed one is in use.
    assert_eq!(tree.pages_in_use(), 2);
    assert_eq!(put(3).unwrap(), 2);
    // The leaf of generation 1, released by the new generation 2, waits for `undone` (a
    // snapshot of an older tree than the new generation 2).
    assert_eq!(tree.pages_in_use(), 3);
    let e = put(4).unwrap_err();
    assert!(matches!(e, Error::IndexFull { free: 0, .. }), "{e}");
    assert_eq!(undone.get(b"k").unwrap(), Some(loc(2, 2)));
    drop(undone);
    assert_eq!(tree.pages_in_use(), 1);
    assert_eq!(put(4).unwrap(), 3);
    assert_eq!(tree.get(b"k").unwrap(), Some(loc(4, 4)));
    let (_, t) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_eq!(t.get(b"k").unwrap(), Some(loc(4, 4)));
}
