//! What a location carries: the per-file key counts of a snapshot (`count_by_file`) and the
//! merge flag, the only location flag format 1 knows.

use std::collections::HashMap;

use super::*;

/// The key count per file of `model`.
fn counts(model: &Model) -> HashMap<u64, u64> {
    let mut c = HashMap::new();
    for l in model.values() {
        *c.entry(l.file).or_insert(0) += 1;
    }
    c
}

#[test]
fn count_by_file_counts_the_keys_of_each_file_across_commits_inserts_and_removals() {
    let mut rng = StdRng::seed_from_u64(17);
    let pool = key_pool(&mut rng, 1500);
    let (region, tree) = new_tree(2048);
    assert!(tree.read().count_by_file().unwrap().is_empty());
    let mut model = Model::new();
    let mut old: Vec<(Snapshot, HashMap<u64, u64>)> = Vec::new();
    let mut max_height = 0;
    for round in 0..30 {
        let remove_p = if round < 15 { 0.2 } else { 0.6 };
        let n = rng.gen_range(1..300);
        let ops = random_batch(&mut rng, &pool, n, remove_p);
        commit_ops(&tree, &ops);
        model = model_after(&model, &ops);
        max_height = max_height.max(tree.height());
        let snap = tree.read();
        let got = snap.count_by_file().unwrap();
        assert_eq!(got, counts(&model), "round {round}");
        assert_eq!(got.values().sum::<u64>(), tree.keys());
        if round % 5 == 0 {
            old.push((snap, got));
        }
    }
    assert!(max_height >= 2, "height {max_height}");
    // Snapshots count their own tree.
    for (snap, want) in &old {
        assert_eq!(&snap.count_by_file().unwrap(), want);
    }
    let (_, reopened) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_eq!(reopened.read().count_by_file().unwrap(), counts(&model));
    // Removing every key of one file drops it from the counts.
    let file = *model.values().next().map(|l| &l.file).unwrap();
    let ops: Vec<Op> = model
        .iter()
        .filter(|(_, l)| l.file == file)
        .map(|(k, _)| Op::Remove(k.clone()))
        .collect();
    commit_ops(&tree, &ops);
    model = model_after(&model, &ops);
    let got = tree.read().count_by_file().unwrap();
    assert!(!got.contains_key(&file));
    assert_eq!(got, counts(&model));
}

#[test]
fn the_merge_flag_roundtrips_through_commit_and_reopen_and_other_flags_are_refused() {
    let (region, tree) = new_tree(64);
    let merge = Location::with_flags(3, 4096, 100, LOCATION_MERGE);
    assert!(merge.is_merge());
    assert_eq!(
        (merge.file(), merge.offset(), merge.size(), merge.flags()),
        (3, 4096, 100, 1)
    );
    assert!(!loc(3, 4096).is_merge());
    let key = |i: u64| format!("key{i:04}").into_bytes();
    let mut model = Model::new();
    let mut w = tree.writer();
    for i in 0..300 {
        let l = if i % 3 == 0 {
            Location::with_flags(i, i * 10, 7, LOCATION_MERGE)
        } else {
            loc(i, i * 10)
        };
        w.insert(&key(i), l).unwrap();
        model.insert(key(i), l);
    }
    // Every other bit is refused, alone or beside the merge flag; the batch is unchanged.
    for flags in [2, 3, 4, 0x8000_0000, u32::MAX] {
        let e = w
            .insert(b"other", Location::with_flags(1, 1, 1, flags))
            .unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{flags:#x}: {e}");
    }
    w.commit().unwrap();
    assert!(tree.height() >= 2);
    assert_agrees(&tree, &model, &[key(0), key(1), b"other".to_vec()]);
    assert!(tree.get(&key(0)).unwrap().unwrap().is_merge());
    assert!(!tree.get(&key(1)).unwrap().unwrap().is_merge());
    for policy in policies(1) {
        let (_, t) = reopen(region.crash_image(policy)).unwrap();
        assert_agrees(&t, &model, &[key(0), key(1), b"other".to_vec()]);
    }
    // A newer version replaces the flag both ways.
    let ops = [
        Op::Put(key(0), loc(500, 0)),
        Op::Put(key(1), Location::with_flags(500, 1, 2, LOCATION_MERGE)),
    ];
    commit_ops(&tree, &ops);
    model = model_after(&model, &ops);
    let (_, t) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&t, &model, &[key(0), key(1)]);
    assert!(!t.get(&key(0)).unwrap().unwrap().is_merge());
    assert!(t.get(&key(1)).unwrap().unwrap().is_merge());
}
