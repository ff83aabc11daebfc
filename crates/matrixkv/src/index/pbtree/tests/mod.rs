//! Tests of the persistent B+-tree: agreement with a `BTreeMap` model before and after
//! reopening, dropped and empty batches, refused keys, removals down to an empty tree, a
//! mapped file, the leaf-range scan. Crashes, failed commits and a full region are in
//! `crash`, snapshots and the reuse of released pages in `snapshots`, damaged regions in
//! `corruption`, the golden bytes of docs/format/pbtree.md in `golden`, undoing the latest
//! commit (`open_at_most`, `rollback`) in `recovery`, per-file counts and the merge flag in
//! `locations`.

mod corruption;
mod crash;
mod golden;
mod locations;
mod recovery;
mod snapshots;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::tier::{CrashPolicy, SimulatedRegion};

const PATH: &str = "fast/000011.pbt";
const ID: u64 = 11;

type Model = BTreeMap<Vec<u8>, Location>;

/// One operation of a batch.
#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Location),
    Remove(Vec<u8>),
}

fn new_tree(pages: usize) -> (Arc<SimulatedRegion>, PBTree) {
    let region = Arc::new(SimulatedRegion::new(pages * PAGE_SIZE));
    let tree = PBTree::create(region.clone(), PATH, ID).unwrap();
    (region, tree)
}

fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, PBTree)> {
    let region = Arc::new(SimulatedRegion::from_image(image));
    let tree = PBTree::open(region.clone(), PATH)?;
    Ok((region, tree))
}

/// A location in `file` at `offset`, with a size derived from both.
fn loc(file: u64, offset: u64) -> Location {
    Location::new(file, offset, ((file * 7 + offset) % 4096) as u32 + 1)
}

/// A key for messages: its length and first bytes.
fn short(k: &[u8]) -> String {
    format!("{} bytes {:?}", k.len(), &k[..k.len().min(12)])
}

fn scan_iter(mut it: Iter) -> Result<Vec<(Vec<u8>, Location)>> {
    it.seek_to_first()?;
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.location()));
        it.next()?;
    }
    Ok(out)
}

fn scan(tree: &PBTree) -> Vec<(Vec<u8>, Location)> {
    scan_iter(tree.iter()).unwrap()
}

fn entries(m: &Model) -> Vec<(Vec<u8>, Location)> {
    m.iter().map(|(k, l)| (k.clone(), *l)).collect()
}

/// `tree` holds exactly `model`: point reads and seeks of `probes`, a full scan, the key
/// count.
fn assert_agrees(tree: &PBTree, model: &Model, probes: &[Vec<u8>]) {
    for k in probes {
        assert_eq!(tree.get(k).unwrap(), model.get(k).copied(), "{}", short(k));
    }
    assert_eq!(scan(tree), entries(model));
    assert_eq!(tree.keys(), model.len() as u64);
    let mut it = tree.iter();
    for k in probes.iter().take(30) {
        it.seek(k).unwrap();
        let want = model
            .range(k.clone()..)
            .next()
            .map(|(k, l)| (k.clone(), *l));
        let got = it.valid().then(|| (it.key().to_vec(), it.location()));
        assert_eq!(got, want, "seek {}", short(k));
    }
    assert_agrees_backwards(tree, model, probes);
}

/// Backward movement agrees with `model`: a reverse scan, `seek_for_prev` of `probes`, and a
/// step back and forth at each (the cursor crosses leaves both ways).
fn assert_agrees_backwards(tree: &PBTree, model: &Model, probes: &[Vec<u8>]) {
    let at = |it: &Iter| it.valid().then(|| (it.key().to_vec(), it.location()));
    let mut it = tree.iter();
    it.seek_to_last().unwrap();
    let mut reversed = Vec::new();
    while let Some(e) = at(&it) {
        reversed.push(e);
        it.prev().unwrap();
    }
    reversed.reverse();
    assert_eq!(reversed, entries(model), "reverse scan");
    for k in probes.iter().take(30) {
        it.seek_for_prev(k).unwrap();
        let want = model
            .range(..=k.clone())
            .next_back()
            .map(|(k, l)| (k.clone(), *l));
        assert_eq!(at(&it), want, "seek_for_prev {}", short(k));
        if it.valid() {
            it.next().unwrap();
            let next = at(&it);
            let want_next = model
                .range((
                    std::ops::Bound::Excluded(k.clone()),
                    std::ops::Bound::Unbounded,
                ))
                .next()
                .map(|(k, l)| (k.clone(), *l));
            assert_eq!(next, want_next, "next after seek_for_prev {}", short(k));
            if it.valid() {
                it.prev().unwrap();
                assert_eq!(at(&it), want, "prev back {}", short(k));
            }
        }
    }
}

/// `n` distinct keys: the empty key, the largest key of the longest length, and random
/// keys over a small alphabet (shared prefixes), one in twenty of 900..=1024 bytes and a
/// tenth of 100..400 bytes, so pages split often.
fn key_pool(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    let mut pool = BTreeSet::new();
    pool.insert(Vec::new());
    pool.insert(vec![0xff; MAX_KEY_LEN]);
    while pool.len() < n {
        let len = match rng.gen_range(0..20) {
            0 => rng.gen_range(900..=MAX_KEY_LEN),
            1 | 2 => rng.gen_range(100..400),
            _ => rng.gen_range(1..24),
        };
        pool.insert(
            (0..len)
                .map(|_| b"abcd\x00\xff"[rng.gen_range(0..6)])
                .collect::<Vec<u8>>(),
        );
    }
    pool.into_iter().collect()
}

/// `n` operations on keys of `pool`: removals with probability `remove_p`, else puts.
fn random_batch(rng: &mut StdRng, pool: &[Vec<u8>], n: usize, remove_p: f64) -> Vec<Op> {
    (0..n)
        .map(|_| {
            let k = pool[rng.gen_range(0..pool.len())].clone();
            if rng.gen_bool(remove_p) {
                Op::Remove(k)
            } else {
                Op::Put(k, loc(rng.gen_range(0..50), rng.gen_range(0..1 << 30)))
            }
        })
        .collect()
}

fn apply_ops(w: &mut Writer<'_>, ops: &[Op]) -> Result<()> {
    for op in ops {
        match op {
            Op::Put(k, l) => w.insert(k, *l)?,
            Op::Remove(k) => {
                w.remove(k)?;
            }
        }
    }
    Ok(())
}

fn model_after(model: &Model, ops: &[Op]) -> Model {
    let mut m = model.clone();
    for op in ops {
        match op {
            Op::Put(k, l) => {
                m.insert(k.clone(), *l);
            }
            Op::Remove(k) => {
                m.remove(k);
            }
        }
    }
    m
}

fn commit_ops(tree: &PBTree, ops: &[Op]) -> u64 {
    let mut w = tree.writer();
    apply_ops(&mut w, ops).unwrap();
    w.commit().unwrap()
}

fn policies(seed: u64) -> [CrashPolicy; 4] {
    [
        CrashPolicy::KeepAll,
        CrashPolicy::DropUnpersisted,
        CrashPolicy::Random { seed },
        CrashPolicy::Random { seed: !seed },
    ]
}

/// Keys absent from every pool (`l`, `z` are outside the pools' alphabet).
fn absent_keys() -> Vec<Vec<u8>> {
    vec![b"l".to_vec(), b"abcdz".to_vec(), b"zzz".to_vec()]
}

/// The recovered `tree` takes a commit, which survives another crash.
fn assert_takes_commits(region: &SimulatedRegion, tree: &PBTree, model: &Model) {
    let mut model = model.clone();
    let mut w = tree.writer();
    w.insert(b"later", loc(99, 1)).unwrap();
    if let Some(first) = model.keys().next().cloned() {
        assert!(w.remove(&first).unwrap());
        model.remove(&first);
    }
    w.commit().unwrap();
    model.insert(b"later".to_vec(), loc(99, 1));
    let (_, again) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&again, &model, &[b"later".to_vec()]);
}

#[test]
fn random_inserts_updates_and_removals_agree_with_a_model_before_and_after_reopen() {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    let pool = key_pool(&mut rng, 2000);
    let (region, tree) = new_tree(2048);
    let mut model = Model::new();
    let (mut max_height, mut max_keys, mut generation) = (0, 0, 0);
    for round in 0..150u64 {
        // Growth, then mostly removals (merges, dropped leaves, a shrinking root), then
        // growth again.
        let remove_p = match round {
            0..60 => 0.25,
            60..100 => 0.85,
            _ => 0.3,
        };
        let n = rng.gen_range(1..=120);
        let ops = random_batch(&mut rng, &pool, n, remove_p);
        let mut w = tree.writer();
        let mut changed = false;
        for op in &ops {
            match op {
                Op::Put(k, l) => w.insert(k, *l).unwrap(),
                Op::Remove(k) => assert_eq!(w.remove(k).unwrap(), model.contains_key(k)),
            }
            let before = model.len();
            model = model_after(&model, std::slice::from_ref(op));
            changed |= matches!(op, Op::Put(..)) || model.len() != before;
        }
        // The writer reads its own batch.
        for _ in 0..20 {
            let k = &pool[rng.gen_range(0..pool.len())];
            assert_eq!(w.get(k).unwrap(), model.get(k).copied());
        }
        // A batch that only removed absent keys commits no generation.
        generation += u64::from(changed);
        assert_eq!(w.commit().unwrap(), generation);
        let mut probes: Vec<Vec<u8>> = (0..40)
            .map(|_| pool[rng.gen_range(0..pool.len())].clone())
            .collect();
        probes.extend(absent_keys());
        assert_agrees(&tree, &model, &probes);
        assert_eq!(tree.generation(), generation);
        max_height = max_height.max(tree.height());
        max_keys = max_keys.max(model.len());
        if round % 25 == 24 {
            let (_, reopened) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
            assert_agrees(&reopened, &model, &probes);
            assert_eq!(
                (reopened.pages_used(), reopened.height()),
                (tree.pages_used(), tree.height())
            );
        }
    }
    assert!(max_height >= 3, "height {max_height}: too few splits");
    assert!(max_keys > 1000, "{max_keys} keys at most");
    assert!(tree.height() < max_height, "removals never shrank the tree");

    // `open` on the same region.
    let reopened = PBTree::open(region.clone(), PATH).unwrap();
    assert_agrees(&reopened, &model, &pool);
    assert_eq!(
        (reopened.id(), reopened.path(), reopened.generation()),
        (ID, Path::new(PATH), tree.generation())
    );
    assert_eq!(reopened.capacity_pages(), 2047);
    drop(tree);
    // The reopened tree takes more writes.
    for _ in 0..10 {
        let ops = random_batch(&mut rng, &pool, 100, 0.3);
        commit_ops(&reopened, &ops);
        model = model_after(&model, &ops);
    }
    assert_agrees(&reopened, &model, &pool);
}

#[test]
fn a_dropped_writer_leaves_nothing_in_reads_or_in_the_region() {
    let (region, tree) = new_tree(64);
    let mut model = Model::new();
    let key = |i: u64| {
        format!("key{i:03}")
            .repeat(1 + (i % 5) as usize)
            .into_bytes()
    };
    let ops: Vec<Op> = (0..40).map(|i| Op::Put(key(i), loc(i, 0))).collect();
    commit_ops(&tree, &ops);
    model = model_after(&model, &ops);
    let before = region.crash_image(CrashPolicy::KeepAll);
    {
        let mut w = tree.writer();
        // Enough new keys to split leaves, updates and removals.
        for i in 40..300 {
            w.insert(&key(i), loc(i, 1)).unwrap();
        }
        w.insert(&key(3), loc(3, 9)).unwrap();
        assert!(w.remove(&key(5)).unwrap());
        assert_eq!(w.get(&key(3)).unwrap(), Some(loc(3, 9)));
        assert_eq!(w.get(&key(5)).unwrap(), None);
        assert_eq!(w.get(&key(250)).unwrap(), Some(loc(250, 1)));
        // Readers do not see the batch.
        assert_agrees(&tree, &model, &[key(3), key(5), key(250)]);
    }
    assert_eq!(
        region.crash_image(CrashPolicy::KeepAll),
        before,
        "an uncommitted batch stores nothing"
    );
    assert_agrees(&tree, &model, &[key(3), key(5), key(250)]);
    for policy in policies(3) {
        let (_, recovered) = reopen(region.crash_image(policy)).unwrap();
        assert_agrees(&recovered, &model, &[key(3), key(5), key(250)]);
    }
    // The next writer starts from the committed tree, and its commit is the next
    // generation.
    let mut w = tree.writer();
    assert_eq!(w.get(&key(5)).unwrap(), Some(loc(5, 0)));
    assert_eq!(w.get(&key(250)).unwrap(), None);
    w.insert(&key(250), loc(250, 2)).unwrap();
    assert_eq!(w.commit().unwrap(), 2);
    model.insert(key(250), loc(250, 2));
    assert_agrees(&tree, &model, &[key(250)]);
}

#[test]
fn a_batch_that_changes_nothing_commits_no_generation() {
    let (region, tree) = new_tree(8);
    commit_ops(&tree, &[Op::Put(b"a".to_vec(), loc(1, 1))]);
    let before = region.crash_image(CrashPolicy::KeepAll);
    let mut w = tree.writer();
    assert!(!w.remove(b"b").unwrap());
    assert_eq!(w.commit().unwrap(), 1);
    assert_eq!(tree.writer().commit().unwrap(), 1);
    assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
}

#[test]
fn keys_longer_than_1_kib_and_unknown_location_flags_are_refused_and_change_nothing() {
    let (_region, tree) = new_tree(8);
    let mut w = tree.writer();
    w.insert(b"a", loc(1, 1)).unwrap();
    let long = vec![b'x'; MAX_KEY_LEN + 1];
    for e in [
        w.insert(&long, loc(1, 1)).unwrap_err(),
        w.remove(&long).unwrap_err(),
        w.insert(
            b"b",
            Location {
                flags: 2,
                ..loc(1, 1)
            },
        )
        .unwrap_err(),
    ] {
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    }
    w.insert(&long[..MAX_KEY_LEN], loc(2, 2)).unwrap();
    w.commit().unwrap();
    let model: Model = [
        (b"a".to_vec(), loc(1, 1)),
        (long[..MAX_KEY_LEN].to_vec(), loc(2, 2)),
    ]
    .into();
    assert_agrees(&tree, &model, &[b"b".to_vec()]);
}

#[test]
fn removing_every_key_empties_the_tree_and_frees_its_pages() {
    let (region, tree) = new_tree(256);
    let key = |i: u64| format!("{i:06}").repeat(1 + (i % 30) as usize).into_bytes();
    let ops: Vec<Op> = (0..500).map(|i| Op::Put(key(i), loc(i, 0))).collect();
    commit_ops(&tree, &ops);
    assert!(tree.height() >= 2, "height {}", tree.height());
    // Remove in key order in a few batches, then the rest.
    for chunk in (0..500).collect::<Vec<u64>>().chunks(150) {
        let ops: Vec<Op> = chunk.iter().map(|&i| Op::Remove(key(i))).collect();
        commit_ops(&tree, &ops);
    }
    assert_eq!((tree.keys(), tree.height(), tree.pages_used()), (0, 0, 0));
    assert_eq!(tree.pages_in_use(), 0);
    assert!(scan(&tree).is_empty());
    let mut it = tree.iter();
    it.seek(b"").unwrap();
    assert!(!it.valid());
    let (_, recovered) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_eq!((recovered.keys(), recovered.height()), (0, 0));
    assert_eq!(recovered.generation(), tree.generation());
    commit_ops(&tree, &[Op::Put(b"again".to_vec(), loc(3, 3))]);
    assert_eq!(tree.get(b"again").unwrap(), Some(loc(3, 3)));
}

#[test]
fn nodes_emptied_by_removals_are_dropped_and_a_root_with_one_child_collapses() {
    // Keys of 1000 bytes: three fit in a leaf, and a leaf with one key is not under-full,
    // so removing a leaf's keys empties it instead of merging it.
    let big = |i: u64| {
        let mut k = format!("{i:03}").into_bytes();
        k.resize(1000, b'.');
        k
    };
    let (region, tree) = new_tree(256);
    let ops: Vec<Op> = (0..10).map(|i| Op::Put(big(i), loc(i, 0))).collect();
    commit_ops(&tree, &ops);
    let mut model = model_after(&Model::new(), &ops);
    // Appends split leaves two and two: five leaves under one root.
    assert_eq!((tree.height(), tree.pages_used()), (2, 6));
    let probes: Vec<Vec<u8>> = (0..12).map(big).collect();
    // The middle leaf, the first one, the last one: each dropped with its separator.
    for (keys, pages) in [([4, 5], 5), ([0, 1], 4), ([8, 9], 3)] {
        let ops: Vec<Op> = keys.iter().map(|&i| Op::Remove(big(i))).collect();
        commit_ops(&tree, &ops);
        model = model_after(&model, &ops);
        assert_eq!((tree.height(), tree.pages_used()), (2, pages));
        assert_agrees(&tree, &model, &probes);
        let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
        assert_agrees(&recovered, &model, &probes);
    }
    // Two leaves left ([2, 3] and [6, 7]); emptying one leaves the root a single child,
    // which becomes the root.
    let ops = [Op::Remove(big(2)), Op::Remove(big(6)), Op::Remove(big(3))];
    commit_ops(&tree, &ops);
    model = model_after(&model, &ops);
    assert_eq!((tree.height(), tree.pages_used(), tree.keys()), (1, 1, 1));
    assert_agrees(&tree, &model, &probes);
    let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
    assert_agrees(&recovered, &model, &probes);

    // Taller trees of such keys, emptied in random batches.
    let mut rng = StdRng::seed_from_u64(3);
    let mut order: Vec<u64> = (0..120).collect();
    for round in 0..4 {
        let (region, tree) = new_tree(512);
        let mut model = Model::new();
        for chunk in order.chunks(40) {
            let ops: Vec<Op> = chunk.iter().map(|&i| Op::Put(big(i), loc(i, 1))).collect();
            commit_ops(&tree, &ops);
            model = model_after(&model, &ops);
        }
        assert!(tree.height() >= 3, "height {}", tree.height());
        rand::seq::SliceRandom::shuffle(&mut order[..], &mut rng);
        let probes: Vec<Vec<u8>> = (0..121).map(big).collect();
        for chunk in order.chunks(7 + round * 10) {
            let ops: Vec<Op> = chunk.iter().map(|&i| Op::Remove(big(i))).collect();
            commit_ops(&tree, &ops);
            model = model_after(&model, &ops);
            assert_agrees(&tree, &model, &probes);
            let (_, recovered) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
            assert_agrees(&recovered, &model, &probes);
        }
        assert_eq!((tree.keys(), tree.height(), tree.pages_used()), (0, 0, 0));
    }
}

#[test]
fn a_tree_in_a_mapped_file_reads_back_after_reopening_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("000012.pbt");
    let key = |i: u64| format!("sst-key-{i:04}").into_bytes();
    let mut model = Model::new();
    {
        let region = Arc::new(matrixkv_pmem::MmapRegion::create(&path, 64 * PAGE_SIZE).unwrap());
        let tree = PBTree::create(region, &path, 12).unwrap();
        for batch in 0..3 {
            let ops: Vec<Op> = (0..300)
                .map(|i| match (i + batch) % 5 {
                    0 => Op::Remove(key(i)),
                    _ => Op::Put(key(i), loc(i, batch)),
                })
                .collect();
            commit_ops(&tree, &ops);
            model = model_after(&model, &ops);
        }
        assert!(tree.height() >= 2);
    }
    let region = Arc::new(matrixkv_pmem::MmapRegion::open(&path).unwrap());
    let tree = PBTree::open(region, &path).unwrap();
    assert_eq!((tree.id(), tree.generation()), (12, 3));
    let probes: Vec<Vec<u8>> = (0..310).map(key).collect();
    for k in &probes {
        assert_eq!(tree.get(k).unwrap(), model.get(k).copied());
    }
    assert_eq!(scan(&tree), entries(&model));
    commit_ops(&tree, &[Op::Put(b"z".to_vec(), loc(13, 0))]);
    assert_eq!(tree.get(b"z").unwrap(), Some(loc(13, 0)));
}

#[test]
fn leaf_range_scans_count_distinct_files_and_resume_after_the_last_key() {
    let (_region, tree) = new_tree(8);
    let empty = tree.count_files_in_leaf_range(b"", 10).unwrap();
    assert_eq!(empty, (Vec::new(), None));
    let key = |i: u64| format!("k{i:02}").into_bytes();
    // k00..k19 in files 0..=6 (three keys a file).
    let ops: Vec<Op> = (0..20).map(|i| Op::Put(key(i), loc(i / 3, i))).collect();
    commit_ops(&tree, &ops);
    let scan_from = |start: &[u8], n| tree.count_files_in_leaf_range(start, n).unwrap();
    assert_eq!(scan_from(b"k05", 4), (vec![1, 2], Some(key(9))));
    // From between keys: the first key after.
    assert_eq!(scan_from(b"k055", 2), (vec![2], Some(key(8))));
    // Wrapping around after the last key.
    assert_eq!(scan_from(b"k18", 5), (vec![0, 6], Some(key(3))));
    assert_eq!(scan_from(b"k19", 1), (vec![6], Some(key(0))));
    // A start after the last key starts at the first.
    assert_eq!(scan_from(b"z", 2), (vec![0], Some(key(2))));
    // More keys than the tree has: each once, and the next scan starts where this one did.
    assert_eq!(scan_from(b"k10", 100), ((0..=6).collect(), Some(key(10))));
    assert_eq!(scan_from(b"k10", 0), (Vec::new(), Some(key(10))));
}

#[test]
fn leaf_range_scans_across_many_leaves_agree_with_a_model() {
    let mut rng = StdRng::seed_from_u64(5);
    let pool = key_pool(&mut rng, 1500);
    let (_region, tree) = new_tree(1024);
    let ops = random_batch(&mut rng, &pool, 1200, 0.0);
    commit_ops(&tree, &ops);
    let model = model_after(&Model::new(), &ops);
    assert!(tree.height() >= 2);
    let keys: Vec<&Vec<u8>> = model.keys().collect();
    for _ in 0..200 {
        let start = &pool[rng.gen_range(0..pool.len())];
        let n = rng.gen_range(0..keys.len() + 5);
        let first = keys.partition_point(|k| *k < start) % keys.len();
        let scanned = n.min(keys.len());
        let files: BTreeSet<u64> = (0..scanned)
            .map(|j| model[keys[(first + j) % keys.len()]].file)
            .collect();
        let next = keys[(first + scanned) % keys.len()].clone();
        let got = tree.count_files_in_leaf_range(start, n as u64).unwrap();
        assert_eq!(
            got,
            (files.into_iter().collect(), Some(next)),
            "{}",
            short(start)
        );
    }
}

#[test]
fn bytes_written_counts_the_node_pages_of_the_commits_that_returned() {
    let (region, tree) = new_tree(64);
    assert_eq!(tree.bytes_written(), 0);
    assert_eq!(tree.region().len(), 64 * PAGE_SIZE);
    let ops: Vec<Op> = (0..200u64)
        .map(|i| Op::Put(format!("key{i:04}").into_bytes().repeat(8), loc(i, 0)))
        .collect();
    commit_ops(&tree, &ops);
    let first = tree.pages_used();
    assert!(first > 1, "{first} pages");
    assert_eq!(tree.bytes_written(), first * PAGE_SIZE as u64);
    // One key changed: its leaf and the root are copied.
    commit_ops(&tree, &[Op::Put(b"key0000".to_vec(), loc(1, 1))]);
    assert_eq!(tree.bytes_written(), (first + 2) * PAGE_SIZE as u64);
    // A failed commit counts nothing; a reopened tree counts from zero.
    let mut w = tree.writer();
    w.insert(b"x", loc(2, 2)).unwrap();
    region.fail_writes_after(Some(0));
    assert!(w.commit().is_err());
    region.fail_writes_after(None);
    assert_eq!(tree.bytes_written(), (first + 2) * PAGE_SIZE as u64);
    let (_, reopened) = reopen(region.crash_image(CrashPolicy::KeepAll)).unwrap();
    assert_eq!(reopened.bytes_written(), 0);
}

#[test]
fn the_tree_and_its_readers_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<PBTree>();
    send_sync::<Snapshot>();
    send_sync::<Iter>();
}
