//! Damaged regions: a damaged page, header or slot, and structural damage behind valid
//! checksums, are reported with the offset of the damage by `open`, reads and writers.

use super::super::format::{
    Committed, INNER_ENTRY_FIXED, KIND_LEAF, LEAF_ENTRY_FIXED, OFF_COMMITTED, OFF_ID,
    OFF_PAGE_SIZE, OFF_REGION_LEN, OFF_SLOT, OFF_VERSION, P_CHILD0, P_GENERATION, PAGE_HEADER_LEN,
    Page, SLOT_KEYS, SLOT_LEN, SLOT_ROOT, at, encode_slot, page_off, seed,
};
use super::*;
use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason};

/// A tree of two levels (a root inner page over leaves of 300-byte keys).
fn two_level_tree() -> (Arc<SimulatedRegion>, PBTree, Model) {
    let (region, tree) = new_tree(64);
    let key = |i: u64| {
        let mut k = format!("key{i:03}").into_bytes();
        k.resize(300, b'-');
        k
    };
    let ops: Vec<Op> = (0..40).map(|i| Op::Put(key(i), loc(i, 0))).collect();
    commit_ops(&tree, &ops);
    assert_eq!(tree.height(), 2);
    let model = model_after(&Model::new(), &ops);
    (region, tree, model)
}

/// The root page of `tree` and its child `i`.
fn root_and_child(tree: &PBTree, i: usize) -> (Page, Page) {
    let shared = &tree.shared;
    let root = shared.load_root(&tree.current()).unwrap().unwrap();
    let child = shared.load_child(&root, i).unwrap();
    (root, child)
}

/// Recomputes the checksum of page `no` of `image` (to test the checks behind it).
fn reseal(image: &mut [u8], no: u64) {
    let off = no as usize * PAGE_SIZE;
    let crc = checksum::checksum2(&seed(ID, no), &image[off + 4..off + PAGE_SIZE]);
    image[off..off + 4].copy_from_slice(&crc.to_le_bytes());
}

fn assert_corruption_at(e: &Error, offset: u64, checksum: bool) {
    match e {
        Error::Corruption { site, reason } => {
            assert_eq!(site.kind, ArtifactKind::PersistentIndex, "{e}");
            assert_eq!(site.path, Path::new(PATH), "{e}");
            assert_eq!(site.offset, offset, "{e}");
            assert_eq!(
                matches!(reason, CorruptionReason::ChecksumMismatch { .. }),
                checksum,
                "{e}"
            );
            assert!(e.to_string().contains("persistent index"), "{e}");
        }
        _ => panic!("not a corruption: {e}"),
    }
}

#[test]
fn a_damaged_leaf_is_reported_at_its_page_by_open_reads_and_writers() {
    let (region, tree, model) = two_level_tree();
    let (_, left) = root_and_child(&tree, 0);
    let (_, leaf) = root_and_child(&tree, 1);
    let off = page_off(leaf.no);
    let victim = leaf.key(0).to_vec();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let mut bad = image.clone();
    bad[at(off) + 40] ^= 0x10;
    assert_corruption_at(&reopen(bad).unwrap_err(), off, true);

    // The same damage under a running tree: whatever reads the page next reports it (a page
    // is verified when it enters the page cache; this one is not cached).
    let mut byte = [0u8];
    region.read(at(off) + 40, &mut byte).unwrap();
    region.write(at(off) + 40, &[byte[0] ^ 0x10]).unwrap();
    tree.forget_cached_pages();
    assert_corruption_at(&tree.get(&victim).unwrap_err(), off, true);
    let first = model.keys().next().unwrap();
    assert_eq!(tree.get(first).unwrap(), model.get(first).copied());
    let mut it = tree.iter();
    it.seek_to_first().unwrap();
    let e = loop {
        match it.next() {
            Ok(()) => assert!(it.valid(), "the scan ended before the damaged leaf"),
            Err(e) => break e,
        }
    };
    assert_corruption_at(&e, off, true);
    assert!(!it.valid(), "an iterator is not valid after an error");
    // A write on the damaged leaf fails before it changes the batch.
    let mut w = tree.writer();
    assert_corruption_at(&w.insert(&victim, loc(1, 1)).unwrap_err(), off, true);
    w.insert(b"a", loc(1, 1)).unwrap();
    assert_eq!(w.commit().unwrap(), 2);
    // Emptying the leaf left of it makes the removal merge it with the damaged one: the
    // removal fails halfway, and the batch can no longer be committed.
    let mut w = tree.writer();
    let e = (0..left.count())
        .find_map(|i| w.remove(left.key(i)).err())
        .expect("a removal reads the damaged neighbour");
    assert_corruption_at(&e, off, true);
    assert_corruption_at(&w.insert(b"b", loc(1, 1)).unwrap_err(), off, true);
    assert_corruption_at(&w.commit().unwrap_err(), off, true);
    assert_eq!(tree.generation(), 2);
    assert_eq!(
        tree.get(left.key(0)).unwrap(),
        model.get(left.key(0)).copied()
    );
}

#[test]
fn a_damaged_inner_page_is_reported_at_its_page() {
    let (region, tree, model) = two_level_tree();
    let (root, _) = root_and_child(&tree, 0);
    let off = page_off(root.no);
    let mut bad = region.crash_image(CrashPolicy::KeepAll);
    bad[at(off) + 50] ^= 1;
    assert_corruption_at(&reopen(bad).unwrap_err(), off, true);
    region.write(at(off) + 4, &[KIND_LEAF]).unwrap();
    tree.forget_cached_pages();
    for k in model.keys().take(3) {
        assert_corruption_at(&tree.get(k).unwrap_err(), off, true);
    }
    assert_corruption_at(&tree.iter().seek_to_first().unwrap_err(), off, true);
}

#[test]
fn a_damaged_header_or_slot_is_refused_at_open() {
    let (region, _tree, _model) = two_level_tree();
    let image = region.crash_image(CrashPolicy::KeepAll);
    let damaged = |at: usize, byte: u8| {
        let mut b = image.clone();
        b[at] = byte;
        reopen(b).unwrap_err()
    };
    let e = damaged(0, b'X');
    assert_corruption_at(&e, 0, false);
    assert!(
        matches!(
            &e,
            Error::Corruption {
                reason: CorruptionReason::BadMagic,
                ..
            }
        ),
        "{e}"
    );
    assert_corruption_at(&damaged(OFF_ID, 9), 0, true);
    assert_corruption_at(&damaged(OFF_PAGE_SIZE + 1, 0), 0, true);
    let e = damaged(OFF_VERSION, 2);
    assert!(
        matches!(
            e,
            Error::NotSupported {
                found_version: 2,
                ..
            }
        ),
        "{e}"
    );
    // The committed generation is 1: slot 1 is active.
    assert_corruption_at(
        &damaged(OFF_SLOT[1] + SLOT_KEYS, 0),
        OFF_SLOT[1] as u64,
        true,
    );
    // Damage to the inactive slot does not matter.
    let mut b = image.clone();
    b[OFF_SLOT[0] + SLOT_ROOT] ^= 0xff;
    reopen(b).unwrap();
    // A commit word naming a generation the other slot does not hold.
    let mut b = image.clone();
    b[OFF_COMMITTED] = 2;
    assert_corruption_at(&reopen(b).unwrap_err(), OFF_SLOT[0] as u64, false);
    // A region longer than the header says, or shorter than two pages.
    let mut longer = image.clone();
    longer.extend_from_slice(&[0; PAGE_SIZE]);
    assert_corruption_at(&reopen(longer).unwrap_err(), OFF_REGION_LEN as u64, false);
    assert_corruption_at(&reopen(image[..PAGE_SIZE].to_vec()).unwrap_err(), 0, false);
    // A region that is not whole pages cannot become a tree.
    let odd: Arc<dyn Region> = Arc::new(SimulatedRegion::new(3 * PAGE_SIZE - 8));
    let e = PBTree::create(odd, PATH, 1).unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
}

#[test]
fn structural_damage_behind_valid_checksums_is_refused_at_open() {
    let (region, tree, _model) = two_level_tree();
    let (root, child1) = root_and_child(&tree, 1);
    let (_, child0) = root_and_child(&tree, 0);
    let image = region.crash_image(CrashPolicy::KeepAll);
    let root_off = at(page_off(root.no));

    // Child 0 points at child 1's page: reachable twice (open visits child 1 first).
    let mut b = image.clone();
    b[root_off + P_CHILD0..root_off + P_CHILD0 + 8].copy_from_slice(&child1.no.to_le_bytes());
    reseal(&mut b, root.no);
    let e = reopen(b).unwrap_err();
    assert_corruption_at(&e, page_off(root.no) + P_CHILD0 as u64, false);
    assert!(e.to_string().contains("reachable twice"), "{e}");

    // A leaf newer than its parent.
    let mut b = image.clone();
    let leaf_off = at(page_off(child0.no));
    b[leaf_off + P_GENERATION] = 9;
    reseal(&mut b, child0.no);
    assert_corruption_at(&reopen(b).unwrap_err(), page_off(child0.no), false);

    // A separator below the keys of the child left of it.
    let mut b = image.clone();
    let sep_at = root_off + root.entries[0] + INNER_ENTRY_FIXED;
    b[sep_at] = b'a';
    reseal(&mut b, root.no);
    let e = reopen(b).unwrap_err();
    assert_corruption_at(&e, page_off(child0.no), false);
    assert!(e.to_string().contains("outside the range"), "{e}");

    // A cycle: the root points at itself.
    let mut b = image.clone();
    b[root_off + P_CHILD0..root_off + P_CHILD0 + 8].copy_from_slice(&root.no.to_le_bytes());
    reseal(&mut b, root.no);
    let e = reopen(b).unwrap_err();
    assert_corruption_at(&e, page_off(root.no) + P_CHILD0 as u64, false);
    assert!(e.to_string().contains("reachable twice"), "{e}");

    // A root at another level than the slot's height says.
    let mut b = image.clone();
    let c = Committed {
        height: 3,
        ..tree.current()
    };
    b[OFF_SLOT[1]..OFF_SLOT[1] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[1], &c));
    let e = reopen(b).unwrap_err();
    assert_corruption_at(&e, page_off(root.no), false);
    assert!(e.to_string().contains("another level"), "{e}");

    // Keys out of order within a leaf (the first key made the largest).
    let mut b = image.clone();
    let key_at = leaf_off + PAGE_HEADER_LEN + LEAF_ENTRY_FIXED;
    b[key_at] = b'z';
    reseal(&mut b, child0.no);
    let e = reopen(b).unwrap_err();
    assert_corruption_at(
        &e,
        page_off(child0.no) + (PAGE_HEADER_LEN + 326) as u64,
        false,
    );

    // A slot whose key count differs from the tree's.
    let mut b = image.clone();
    let c = Committed {
        keys: tree.keys() + 1,
        ..tree.current()
    };
    b[OFF_SLOT[1]..OFF_SLOT[1] + SLOT_LEN].copy_from_slice(&encode_slot(ID, OFF_SLOT[1], &c));
    assert_corruption_at(
        &reopen(b).unwrap_err(),
        (OFF_SLOT[1] + SLOT_KEYS) as u64,
        false,
    );
}

#[test]
fn unknown_location_flags_on_disk_are_refused_by_open_and_reads() {
    let (region, tree) = new_tree(8);
    let mut w = tree.writer();
    w.insert(b"a", Location::with_flags(1, 2, 3, LOCATION_MERGE))
        .unwrap();
    w.insert(b"b", loc(1, 1)).unwrap();
    w.commit().unwrap();
    let leaf = tree.shared.load_root(&tree.current()).unwrap().unwrap();
    let page = at(page_off(leaf.no));
    // The flags of entry 0 ("a", the merge flag set).
    let flags_at = page + leaf.entries[0] + LEAF_ENTRY_FIXED - 4;
    let image = region.crash_image(CrashPolicy::KeepAll);
    assert_eq!(image[flags_at..flags_at + 4], LOCATION_MERGE.to_le_bytes());
    for flags in [2u32, 3, 0x8000_0000] {
        let mut b = image.clone();
        b[flags_at..flags_at + 4].copy_from_slice(&flags.to_le_bytes());
        reseal(&mut b, leaf.no);
        let e = reopen(b.clone()).unwrap_err();
        assert_corruption_at(&e, flags_at as u64, false);
        assert!(e.to_string().contains("unknown location flags"), "{e}");
        // The same page under the running tree: reads report it once it leaves the cache.
        region.write(page, &b[page..page + PAGE_SIZE]).unwrap();
        tree.forget_cached_pages();
        assert_corruption_at(&tree.get(b"b").unwrap_err(), flags_at as u64, false);
        assert_corruption_at(
            &tree.iter().seek_to_first().unwrap_err(),
            flags_at as u64,
            false,
        );
    }
}
