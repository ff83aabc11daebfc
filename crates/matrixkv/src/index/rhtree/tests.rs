//! Tests of the Radix Hash Tree: agreement with a `BTreeMap` model through random inserts,
//! updates, removals and reopens; normal and level splits; crash images after every operation
//! and inside one; damaged regions; a full region; the golden bytes of docs/format/rhtree.md.

use std::collections::BTreeMap;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::ArtifactKind;
use crate::tier::{CrashPolicy, SimulatedRegion};

const PATH: &str = "fast/000021.rht";
const ID: u64 = 21;

type Model = BTreeMap<Vec<u8>, Location>;

fn new_tree(pages: usize) -> (Arc<SimulatedRegion>, RhTree) {
    let region = Arc::new(SimulatedRegion::new(pages * PAGE_SIZE));
    let tree = RhTree::create(region.clone(), PATH, ID).unwrap();
    (region, tree)
}

fn reopen(image: Vec<u8>) -> Result<(Arc<SimulatedRegion>, RhTree)> {
    let region = Arc::new(SimulatedRegion::from_image(image));
    let tree = RhTree::open(region.clone(), PATH)?;
    Ok((region, tree))
}

fn loc(file: u64, offset: u64) -> Location {
    Location::with_flags(file, offset, ((file * 7 + offset) % 4096) as u32 + 1, 0)
}

fn policies(seed: u64) -> [CrashPolicy; 4] {
    [
        CrashPolicy::KeepAll,
        CrashPolicy::DropUnpersisted,
        CrashPolicy::Random { seed },
        CrashPolicy::Random { seed: !seed },
    ]
}

/// `tree` holds exactly `model`: point reads of `probes`, every entry, the key count, the
/// per-file counts.
fn assert_agrees(tree: &RhTree, model: &Model, probes: &[Vec<u8>]) {
    for k in probes {
        assert_eq!(tree.get(k).unwrap(), model.get(k).copied(), "{k:?}");
    }
    let want: Vec<_> = model.iter().map(|(k, l)| (k.clone(), *l)).collect();
    assert_eq!(tree.entries().unwrap(), want);
    assert_eq!(tree.len(), model.len() as u64);
    let mut by_file = HashMap::new();
    for l in model.values() {
        *by_file.entry(l.file()).or_insert(0u64) += 1;
    }
    assert_eq!(tree.count_by_file().unwrap(), by_file);
}

/// Keys over a small alphabet with shared prefixes, of 0 to 12 bytes.
fn key_pool(rng: &mut StdRng, n: usize) -> Vec<Vec<u8>> {
    let mut set = std::collections::BTreeSet::new();
    while set.len() < n {
        let len = rng.gen_range(0..=12);
        let k: Vec<u8> = (0..len)
            .map(|_| b"abcd\x00\xff"[rng.gen_range(0..6)])
            .collect();
        set.insert(k);
    }
    set.into_iter().collect()
}

#[derive(Debug, Clone)]
enum Op {
    Put(Vec<u8>, Location),
    Remove(Vec<u8>),
}

fn random_op(rng: &mut StdRng, pool: &[Vec<u8>], i: u64) -> Op {
    let k = pool[rng.gen_range(0..pool.len())].clone();
    if rng.gen_bool(0.25) {
        Op::Remove(k)
    } else {
        Op::Put(k, loc(i % 5, i))
    }
}

fn apply(tree: &RhTree, model: &mut Model, op: &Op) {
    match op {
        Op::Put(k, l) => {
            tree.insert(k, *l).unwrap();
            model.insert(k.clone(), *l);
        }
        Op::Remove(k) => {
            assert_eq!(tree.remove(k).unwrap(), model.remove(k).is_some(), "{k:?}");
        }
    }
}

#[test]
fn random_inserts_updates_and_removes_agree_with_a_model_across_reopens() {
    let mut rng = StdRng::seed_from_u64(5);
    let pool = key_pool(&mut rng, 1500);
    let (region, mut tree) = new_tree(256);
    let mut model = Model::new();
    let mut region = region;
    for i in 0..6000u64 {
        let op = random_op(&mut rng, &pool, i);
        apply(&tree, &mut model, &op);
        if i % 1500 == 1499 {
            assert_agrees(&tree, &model, &pool);
            let (r, t) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
            assert_agrees(&t, &model, &pool);
            assert_eq!(t.leaf_metas(), tree.leaf_metas());
            (region, tree) = (r, t);
        }
    }
    assert!(tree.leaves() > 4, "{} leaves", tree.leaves());
    assert!(region.unpersisted_ranges().is_empty());
}

#[test]
fn normal_and_level_splits_keep_every_key_reachable() {
    let (region, tree) = new_tree(1024);
    let mut model = Model::new();
    // Distinct first bytes: normal splits of the root leaf's range.
    for i in 0..600u64 {
        let k = format!("{:02x}{i:05}", (i * 37) % 256).into_bytes();
        tree.insert(&k, loc(1, i)).unwrap();
        model.insert(k, loc(1, i));
    }
    let after_normal = tree.leaves();
    assert!(after_normal > 2, "{after_normal} leaves");
    // A long shared prefix: level splits, one byte deeper each.
    let prefix = vec![b'p'; 12];
    for i in 0..600u64 {
        let mut k = prefix.clone();
        k.extend_from_slice(format!("{i:05}").as_bytes());
        tree.insert(&k, loc(2, i)).unwrap();
        model.insert(k, loc(2, i));
    }
    // The prefix itself (a terminator leaf deep down) and its shorter prefixes.
    for n in [0, 1, 6, 12, 13] {
        let k = prefix
            .iter()
            .copied()
            .chain(b"0".iter().copied())
            .take(n)
            .collect::<Vec<_>>();
        tree.insert(&k, loc(3, n as u64)).unwrap();
        model.insert(k, loc(3, n as u64));
    }
    let metas = tree.leaf_metas();
    let deepest = metas.iter().map(|m| m.prefix.len()).max().unwrap();
    assert!(deepest >= 12, "deepest leaf at depth {deepest}");
    assert!(
        metas.iter().any(|m| m.prefix.len() >= 12 && m.lo == 0),
        "a deep leaf holds the terminator"
    );
    assert!(tree.leaves() > after_normal + 12);
    assert_eq!(tree.generation() as usize, {
        // Every split replaced one leaf by at least two.
        let g = tree.generation() as usize;
        assert!(tree.leaves() <= 1 + g * 64);
        g
    });
    let probes: Vec<Vec<u8>> = model.keys().cloned().collect();
    assert_agrees(&tree, &model, &probes);
    let (_, t) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&t, &model, &probes);
    assert_eq!(t.get(b"pp").unwrap(), None);
}

#[test]
fn a_crash_image_after_every_operation_reopens_to_all_operations_so_far() {
    let mut rng = StdRng::seed_from_u64(8);
    let pool = key_pool(&mut rng, 600);
    let (region, tree) = new_tree(256);
    let mut model = Model::new();
    for i in 0..900u64 {
        let op = random_op(&mut rng, &pool, i);
        apply(&tree, &mut model, &op);
        assert!(region.unpersisted_ranges().is_empty(), "op {i}");
        if i % 4 == 0 {
            for policy in policies(i) {
                let (_, t) = reopen(region.crash_image(policy))
                    .unwrap_or_else(|e| panic!("op {i}, {policy:?}: {e}"));
                assert_agrees(&t, &model, &[]);
            }
        }
    }
    assert!(tree.generation() > 3, "splits happened");
}

#[test]
fn a_failed_write_inside_an_operation_recovers_to_before_or_after_it() {
    let mut rng = StdRng::seed_from_u64(13);
    let pool = key_pool(&mut rng, 300);
    let (region, tree) = new_tree(64);
    let mut model = Model::new();
    let mut checked = 0;
    for i in 0..300u64 {
        let op = random_op(&mut rng, &pool, i);
        let base = region.crash_image(CrashPolicy::KeepAll);
        let mut after = model.clone();
        // The persists of the operation when nothing fails.
        let persists = {
            let (r, t) = reopen(base.clone()).unwrap();
            let p0 = r.persist_count();
            apply(&t, &mut after, &op);
            r.persist_count() - p0
        };
        for k in 0..persists {
            let (r, t) = reopen(base.clone()).unwrap();
            r.fail_persist_after(Some(k));
            let res = match &op {
                Op::Put(key, l) => t.insert(key, *l),
                Op::Remove(key) => t.remove(key).map(|_| ()),
            };
            r.fail_persist_after(None);
            assert!(
                matches!(res, Err(Error::Io { .. })),
                "op {i}, persist {k}: {res:?}"
            );
            let again = t.insert(b"later", loc(1, 1));
            assert!(matches!(again, Err(Error::Poisoned { .. })), "{again:?}");
            for policy in policies(i * 100 + k) {
                let (_, rec) = reopen(r.crash_image(policy))
                    .unwrap_or_else(|e| panic!("op {i}, persist {k}, {policy:?}: {e}"));
                let got = rec.entries().unwrap();
                let is =
                    |m: &Model| got == m.iter().map(|(k, l)| (k.clone(), *l)).collect::<Vec<_>>();
                assert!(is(&model) || is(&after), "op {i}, persist {k}, {policy:?}");
                if policy == CrashPolicy::DropUnpersisted && k + 1 < persists {
                    assert!(is(&model), "op {i}: before its commit point");
                }
                checked += 1;
            }
        }
        apply(&tree, &mut model, &op);
    }
    assert!(checked > 1000, "{checked} crash images");
}

fn corruption_at(res: Result<(Arc<SimulatedRegion>, RhTree)>) -> u64 {
    match res {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!(site.kind, ArtifactKind::PersistentIndex);
            assert_eq!(site.path, Path::new(PATH));
            site.offset
        }
        Err(e) => panic!("not corruption: {e}"),
        Ok(_) => panic!("opened a damaged region"),
    }
}

#[test]
fn a_damaged_header_directory_slot_or_record_is_detected() {
    let (region, tree) = new_tree(256);
    for i in 0..300u64 {
        tree.insert(format!("key{i}").as_bytes(), loc(i, i))
            .unwrap();
    }
    assert!(tree.generation() > 0);
    let image = region.crash_image(CrashPolicy::KeepAll);
    let layout = tree.layout;
    let flip = |at: usize| {
        let mut im = image.clone();
        im[at] ^= 0x10;
        im
    };
    assert_eq!(corruption_at(reopen(flip(3))), 0);
    assert_eq!(
        corruption_at(reopen(flip(17))),
        format::OFF_HEADER_CRC as u64
    );
    let dir = layout.dir_off(tree.generation());
    assert_eq!(corruption_at(reopen(flip(dir + 30))), dir as u64 + 16);
    // A commit word naming a generation its directory area does not hold.
    let mut im = image.clone();
    im[format::OFF_COMMITTED] ^= 2;
    assert_eq!(corruption_at(reopen(im)), dir as u64);
    // A record: its checksum.
    let (leaf, (b, s, _, ptr)) = tree
        .leaf_metas()
        .into_iter()
        .find_map(|l| {
            let first = occupied(&tree.read_leaf(l.block).unwrap()).first().copied();
            first.map(|slot| (l, slot))
        })
        .unwrap();
    assert_eq!(corruption_at(reopen(flip(ptr as usize + 33))), ptr);
    // A slot: its signature, and a pointer out of the log area.
    let slot = layout.leaf_off(leaf.block) + b * BUCKET_SIZE;
    assert_eq!(
        corruption_at(reopen(flip(slot + sig_at(s)))),
        (slot + ptr_at(s)) as u64
    );
    let mut im = image.clone();
    im[slot + ptr_at(s) + 3] ^= 0x80;
    assert_eq!(corruption_at(reopen(im)), (slot + ptr_at(s)) as u64);
    // A running tree reads the damaged record and reports it.
    let (r, t) = reopen(image.clone()).unwrap();
    let (key, _) = t.read_record(ptr, 0).unwrap();
    r.write(ptr as usize + 33, &[0xee]).unwrap();
    assert!(matches!(t.get(&key), Err(Error::Corruption { .. })));
    // Undamaged, it opens.
    reopen(image).unwrap();
}

#[test]
fn a_full_region_refuses_the_insert_with_index_full_and_changes_nothing() {
    let (region, tree) = new_tree(8);
    assert!(tree.is_empty());
    assert_eq!(tree.path(), Path::new(PATH));
    let mut model = Model::new();
    let mut i = 0u64;
    let e = loop {
        let before = region.crash_image(CrashPolicy::KeepAll);
        let (len, leaves, generation) = (tree.len(), tree.leaves(), tree.generation());
        let k = format!("{i:06}-{}", "x".repeat(40)).into_bytes();
        match tree.insert(&k, loc(i, 0)) {
            Ok(()) => {
                model.insert(k, loc(i, 0));
                i += 1;
            }
            Err(e) => {
                assert_eq!(region.crash_image(CrashPolicy::KeepAll), before);
                assert_eq!(
                    (tree.len(), tree.leaves(), tree.generation()),
                    (len, leaves, generation)
                );
                break e;
            }
        }
    };
    match &e {
        Error::IndexFull { path, needed, free } => {
            assert_eq!(path, Path::new(PATH));
            assert!(needed > free, "needed {needed}, free {free}");
        }
        _ => panic!("not IndexFull: {e}"),
    }
    assert!(i > 50, "{i} keys fit");
    assert_agrees(&tree, &model, &[]);
    // Updates and removals of stored keys still work while records fit; the reopened
    // tree agrees.
    let first = model.keys().next().unwrap().clone();
    assert!(tree.remove(&first).unwrap());
    model.remove(&first);
    let (_, t) = reopen(region.crash_image(CrashPolicy::DropUnpersisted)).unwrap();
    assert_agrees(&t, &model, &[]);
}

#[test]
fn a_key_longer_than_the_limit_is_refused() {
    let (_, tree) = new_tree(8);
    let e = tree
        .insert(&[b'k'; MAX_KEY_LEN + 1], loc(1, 1))
        .unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
    tree.insert(&[b'k'; MAX_KEY_LEN], loc(1, 1)).unwrap();
    assert_eq!(tree.get(&[b'k'; MAX_KEY_LEN]).unwrap(), Some(loc(1, 1)));
}

/// The worked example of docs/format/rhtree.md.
fn golden_tree() -> (Arc<SimulatedRegion>, RhTree) {
    let (region, tree) = new_tree(8);
    tree.insert(b"apple", Location::with_flags(12, 0, 4096, 0))
        .unwrap();
    tree.insert(b"banana", Location::with_flags(12, 4096, 2048, 0))
        .unwrap();
    tree.insert(b"cherry", Location::with_flags(15, 0, 1000, 0))
        .unwrap();
    tree.insert(b"banana", Location::with_flags(16, 8192, 3000, 1))
        .unwrap();
    assert!(tree.remove(b"cherry").unwrap());
    (region, tree)
}

/// The region offsets of the doc's hex blocks: each block's first line is `# at 0xNNNN ...`.
fn block_offsets(doc: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut lines = doc.lines();
    while let Some(l) = lines.next() {
        if l.trim() == "```hex" {
            let first = lines.next().unwrap_or_default();
            let hex = first
                .trim()
                .strip_prefix("# at 0x")
                .and_then(|r| r.split_whitespace().next())
                .expect("a hex block starts with `# at 0x...`");
            out.push(usize::from_str_radix(hex.trim_end_matches(':'), 16).unwrap());
        }
    }
    out
}

#[test]
fn golden_tree_matches_the_format_doc() {
    let (region, tree) = golden_tree();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let doc = include_str!("../../../../../docs/format/rhtree.md");
    let want = crate::golden::hex_blocks(doc);
    let offsets = block_offsets(doc);
    assert_eq!(want.len(), offsets.len());
    assert_eq!(want.len(), 6, "header, directory, 3 buckets, log");
    let mut documented = vec![0u8; image.len()];
    for (&at, want) in offsets.iter().zip(&want) {
        let got = &image[at..at + want.len()];
        assert_eq!(
            got,
            &want[..],
            "docs/format/rhtree.md is out of date; at {at:#x} the region now holds:\n{}",
            crate::golden::hex_lines(&image[at..at + want.len().next_multiple_of(8)])
        );
        documented[at..at + want.len()].copy_from_slice(want);
    }
    assert_eq!(documented, image, "the undocumented bytes are zero");
    assert_eq!((tree.len(), tree.leaves(), tree.generation()), (2, 1, 0));
    let (_, t) = reopen(documented).unwrap();
    assert_eq!(t.id(), ID);
    assert_eq!(
        t.entries().unwrap(),
        vec![
            (b"apple".to_vec(), Location::with_flags(12, 0, 4096, 0)),
            (b"banana".to_vec(), Location::with_flags(16, 8192, 3000, 1)),
        ]
    );
    assert_eq!(t.get(b"cherry").unwrap(), None);
}
