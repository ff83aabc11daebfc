//! Crashes and failed writes: every commit survives a crash under every policy, a crash or
//! an I/O error inside a commit recovers the tree before it or after its commit point, and a
//! full region refuses a write with a distinct error and keeps the tree.

use super::*;

#[test]
fn every_commit_survives_a_crash_under_every_policy() {
    let mut rng = StdRng::seed_from_u64(7);
    let pool = key_pool(&mut rng, 300);
    let (region, tree) = new_tree(512);
    let mut model = Model::new();
    let probes: Vec<Vec<u8>> = pool.iter().step_by(7).cloned().collect();
    for i in 0..30u64 {
        let n = rng.gen_range(1..80);
        let ops = random_batch(&mut rng, &pool, n, if i % 4 == 3 { 0.7 } else { 0.2 });
        commit_ops(&tree, &ops);
        model = model_after(&model, &ops);
        assert!(
            region.unpersisted_ranges().is_empty(),
            "commit {i} returned unpersisted"
        );
        for policy in policies(i) {
            let (r, recovered) = reopen(region.crash_image(policy))
                .unwrap_or_else(|e| panic!("commit {i}, {policy:?}: {e}"));
            assert_agrees(&recovered, &model, &probes);
            assert_eq!(
                (recovered.generation(), recovered.pages_used()),
                (tree.generation(), tree.pages_used())
            );
            if i.is_multiple_of(7) {
                assert_takes_commits(&r, &recovered, &model);
            }
        }
    }
}

#[test]
fn a_crash_inside_a_commit_recovers_the_tree_before_it_or_after_its_commit_point() {
    // The stores of a commit: the page writes, the slot write; persists: one per run of
    // adjacent pages, the slot, and last the publish of the generation (the commit point).
    // A failure of call k leaves its store unpersisted (a publish's word stays visible, as
    // after a failed flush) and makes no later call.
    let mut rng = StdRng::seed_from_u64(99);
    let pool = key_pool(&mut rng, 200);
    let (region, tree) = new_tree(256);
    let mut model = Model::new();
    // A first leaf, leaf and root splits, updates, removals (merges, a collapsing root).
    let shapes = [
        (1, 0.0),
        (40, 0.1),
        (80, 0.1),
        (5, 0.0),
        (60, 0.8),
        (30, 0.5),
        (150, 0.9),
        (3, 0.0),
    ];
    let mut failures = 0;
    for (b, &(n, remove_p)) in shapes.iter().enumerate() {
        let ops = random_batch(&mut rng, &pool, n, remove_p);
        let base = region.crash_image(CrashPolicy::KeepAll);
        let new_model = model_after(&model, &ops);
        // The writes and persists of the commit when nothing fails.
        let (writes, persists) = {
            let (r, t) = reopen(base.clone()).unwrap();
            let mut w = t.writer();
            apply_ops(&mut w, &ops).unwrap();
            let (p0, w0, _) = r.fault_plan().op_counts();
            w.commit().unwrap();
            let (p1, w1, _) = r.fault_plan().op_counts();
            (w1 - w0, p1 - p0)
        };
        assert!(
            writes >= 2 && persists >= 3,
            "batch {b}: {writes} writes, {persists} persists"
        );
        let faults = (0..writes)
            .map(|k| (true, k))
            .chain((0..persists).map(|k| (false, k)));
        for (write, k) in faults {
            let what = format!("batch {b}, {} {k}", if write { "write" } else { "persist" });
            let (r, t) = reopen(base.clone()).unwrap();
            let mut w = t.writer();
            apply_ops(&mut w, &ops).unwrap();
            if write {
                r.fail_writes_after(Some(k));
            } else {
                r.fail_persist_after(Some(k));
            }
            let res = w.commit();
            r.fail_writes_after(None);
            r.fail_persist_after(None);
            failures += 1;
            assert!(matches!(res, Err(Error::Io { .. })), "{what}: {res:?}");
            // Poisoned for writes; readers keep the last committed tree.
            let again = t.writer().insert(b"later", loc(1, 1));
            assert!(matches!(again, Err(Error::Poisoned { .. })), "{again:?}");
            assert!(matches!(
                t.writer().commit(),
                Ok(_) | Err(Error::Poisoned { .. })
            ));
            assert_eq!(scan(&t), entries(&model), "{what}: live readers");
            assert_eq!(t.generation(), b as u64, "{what}");
            let commit_point = !write && k == persists - 1;
            for policy in policies(b as u64 * 1000 + k) {
                let what = format!("{what}, {policy:?}");
                let (r2, recovered) =
                    reopen(r.crash_image(policy)).unwrap_or_else(|e| panic!("{what}: {e}"));
                let is_new = scan(&recovered) == entries(&new_model);
                let new = match policy {
                    CrashPolicy::KeepAll => commit_point,
                    CrashPolicy::DropUnpersisted => false,
                    CrashPolicy::Random { .. } => commit_point && is_new,
                };
                let want = if new { &new_model } else { &model };
                assert_agrees(&recovered, want, &pool);
                assert_eq!(recovered.generation(), b as u64 + u64::from(new), "{what}");
                if k.is_multiple_of(3) {
                    assert_takes_commits(&r2, &recovered, want);
                }
            }
        }
        commit_ops(&tree, &ops);
        model = new_model;
    }
    assert!(failures >= shapes.len() * 5, "{failures} failed commits");
}

#[test]
fn a_full_region_refuses_the_write_with_a_distinct_error_and_keeps_the_tree() {
    let (region, tree) = new_tree(8);
    let mut model = Model::new();
    let big = |i: u64| {
        let mut k = format!("{i:04}").into_bytes();
        k.resize(1000, b'.');
        k
    };
    let mut i = 0;
    let e = loop {
        let before = region.crash_image(CrashPolicy::KeepAll);
        let (keys, pages, generation) = (tree.keys(), tree.pages_used(), tree.generation());
        let mut w = tree.writer();
        match w.insert(&big(i), loc(i, 0)) {
            Ok(()) => {
                w.commit().unwrap();
                model.insert(big(i), loc(i, 0));
                i += 1;
            }
            Err(e) => {
                drop(w);
                assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
                assert_eq!(
                    (tree.keys(), tree.pages_used(), tree.generation()),
                    (keys, pages, generation)
                );
                break e;
            }
        }
    };
    match &e {
        Error::IndexFull { path, needed, free } => {
            assert_eq!(path, Path::new(PATH));
            assert!(needed > free, "needed {needed}, free {free}");
            assert_eq!(*free, tree.capacity_pages() - tree.pages_used());
        }
        _ => panic!("not IndexFull: {e}"),
    }
    assert!(e.to_string().contains("is full"), "{e}");
    assert!(!e.is_no_space(), "no device is full");
    assert!(i >= 3, "{i} keys fit");
    let probes: Vec<Vec<u8>> = (0..=i).map(big).collect();
    assert_agrees(&tree, &model, &probes);
    let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&recovered, &model, &probes);
    // A refused insert leaves the batch as it was: its earlier removal commits.
    let mut w = tree.writer();
    assert!(w.remove(&big(0)).unwrap());
    let e = w.insert(&big(i), loc(i, 0)).unwrap_err();
    assert!(matches!(e, Error::IndexFull { .. }), "{e}");
    w.commit().unwrap();
    model.remove(&big(0));
    assert_agrees(&tree, &model, &probes);
    let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&recovered, &model, &probes);
}
