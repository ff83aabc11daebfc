//! The golden test: docs/format/pbtree.md holds the exact bytes of a small tree, and the
//! tree must write exactly those bytes and read them back.

use super::*;

/// The worked example of docs/format/pbtree.md.
fn golden_tree() -> (Arc<SimulatedRegion>, PBTree) {
    let region = Arc::new(SimulatedRegion::new(3 * PAGE_SIZE));
    let tree = PBTree::create(region.clone(), PATH, 7).unwrap();
    let mut w = tree.writer();
    w.insert(b"apple", Location::new(12, 0, 4096)).unwrap();
    w.insert(b"banana", Location::new(12, 4096, 2048)).unwrap();
    w.insert(b"cherry", Location::new(15, 0, 1000)).unwrap();
    w.commit().unwrap();
    let mut w = tree.writer();
    w.insert(b"banana", Location::new(16, 8192, 3000)).unwrap();
    assert!(w.remove(b"cherry").unwrap());
    w.commit().unwrap();
    (region, tree)
}

#[test]
fn golden_tree_matches_the_format_doc() {
    let doc = include_str!("../../../../../../docs/format/pbtree.md");
    let want = crate::golden::hex_blocks(doc);
    assert_eq!(want.len(), 3, "the header page, page 1 and page 2");
    let (region, tree) = golden_tree();
    let image = region.crash_image(CrashPolicy::KeepAll);
    for (no, want) in want.iter().enumerate() {
        let page = &image[no * PAGE_SIZE..(no + 1) * PAGE_SIZE];
        let end = page.iter().rposition(|&b| b != 0).map_or(0, |p| p + 1);
        // The documented bytes may end with zeros (a field's zero high bytes).
        let got = &page[..end.max(want.len())];
        assert_eq!(
            got,
            &want[..],
            "docs/format/pbtree.md is out of date; page {no} now holds:\n{}",
            crate::golden::hex_lines(&page[..end.next_multiple_of(8)])
        );
    }
    assert_eq!(
        (tree.generation(), tree.pages_used(), tree.keys()),
        (2, 1, 2)
    );
    // The documented bytes, in a region of the documented length, open and read back.
    let mut documented = Vec::new();
    for block in &want {
        let mut page = block.clone();
        page.resize(PAGE_SIZE, 0);
        documented.extend_from_slice(&page);
    }
    let (_, tree) = reopen(documented).unwrap();
    assert_eq!(tree.id(), 7);
    assert_eq!(
        scan(&tree),
        vec![
            (b"apple".to_vec(), Location::new(12, 0, 4096)),
            (b"banana".to_vec(), Location::new(16, 8192, 3000)),
        ]
    );
    assert_eq!(tree.get(b"cherry").unwrap(), None);
    // Page 1 (generation 1) is free: the next commit writes there.
    let mut w = tree.writer();
    w.insert(b"date", Location::new(17, 0, 10)).unwrap();
    w.commit().unwrap();
    assert_eq!(tree.current().root, 1);
}
