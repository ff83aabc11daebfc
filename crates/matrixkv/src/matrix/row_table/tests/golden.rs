//! The golden test: docs/format/rowtable.md holds the exact logical bytes of a tiny row, and
//! the builder must write exactly those bytes.

use super::*;

use crate::golden::hex_block;

/// The rows of the worked example: row 1 (`b`, `d`) and row 2 (`a`, `c` deleted, `e`).
fn golden_rows() -> (Model, Model) {
    let row1 = Model::from([
        (
            InternalKey::new(b"b", SeqNo(1), ValueKind::Value),
            b"1".to_vec(),
        ),
        (
            InternalKey::new(b"d", SeqNo(2), ValueKind::Value),
            b"2".to_vec(),
        ),
    ]);
    let row2 = Model::from([
        (
            InternalKey::new(b"a", SeqNo(3), ValueKind::Value),
            b"red".to_vec(),
        ),
        (
            InternalKey::new(b"c", SeqNo(4), ValueKind::Deletion),
            Vec::new(),
        ),
        (
            InternalKey::new(b"e", SeqNo(5), ValueKind::Value),
            b"pie".to_vec(),
        ),
    ]);
    (row1, row2)
}

/// The logical bytes of a row: its pages in logical order, cut at `len`.
fn logical_bytes(pool: &Pool, pages: &PageList, len: u64) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..pages.len() {
        let mut page = vec![0u8; pool.page_bytes];
        let p = pages.physical(i).unwrap() as usize;
        pool.region.read(p * pool.page_bytes, &mut page).unwrap();
        out.extend_from_slice(&page);
    }
    out.truncate(len as usize);
    out
}

#[test]
fn golden_row_matches_the_format_doc() {
    let doc = include_str!("../../../../../../docs/format/rowtable.md");
    let want = hex_block(doc);
    let (m1, m2) = golden_rows();
    let mut pool = Pool::new(8, 256);
    let r1 = pool.row(1, None, &m1);
    // Row 1 took page 0. Row 2 goes on pages 5 then 3: logical order is not address order.
    assert_eq!(r1.pages().physical(0), Some(0));
    let layout = RowLayout::measure(entries(&m2), BLOOM_BITS);
    assert_eq!(layout.pages_needed(256), 2);
    let pages = PageList::new(vec![5, 3]);
    let summary = write_row(
        pool.region.as_ref(),
        256,
        &pages,
        2,
        Some(&r1),
        entries(&m2),
        &layout,
        &pool_path(),
    )
    .unwrap();
    let got = logical_bytes(&pool, &pages, summary.bytes);
    assert_eq!(
        got,
        want,
        "docs/format/rowtable.md is out of date; the builder now writes:\n{}",
        got.chunks(8)
            .map(|c| c
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<Vec<_>>()
                .join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let r2 = pool.open(&Arc::new(pages), 2).unwrap();
    assert_eq!(
        (r2.fwd(0).unwrap(), r2.fwd(1).unwrap(), r2.fwd(2).unwrap()),
        (0, 1, 2)
    );
    assert_eq!(
        r2.get(b"c", SeqNo::MAX, None).unwrap(),
        (Some((ValueKind::Deletion, Vec::new())), (0, 1))
    );
    // The filter admits a, c and e, and rules out b and d (the doc's probe example).
    assert!(r2.has_filter());
    assert!([b"a", b"c", b"e"].iter().all(|u| r2.may_contain(*u)));
    assert!(!r2.may_contain(b"b") && !r2.may_contain(b"d"));
    let (found, window) = r2.get(b"b", SeqNo::MAX, None).unwrap();
    assert_eq!((found, window), (None, (0, 1)));
    assert_eq!(
        r1.get(b"b", SeqNo::MAX, Some(window)).unwrap().0,
        Some((ValueKind::Value, b"1".to_vec()))
    );
}
