//! The golden test: docs/format/sst.md holds the exact bytes of a tiny table, and the
//! builder must write exactly those bytes.

use super::*;

use crate::golden::hex_block;

/// The tiny table of the worked example in docs/format/sst.md.
fn golden_entries() -> Model {
    let mut m = Model::new();
    m.insert(
        InternalKey::new(b"apple", SeqNo(3), ValueKind::Value),
        b"red".to_vec(),
    );
    m.insert(
        InternalKey::new(b"apricot", SeqNo(2), ValueKind::Value),
        b"orange".to_vec(),
    );
    m.insert(
        InternalKey::new(b"banana", SeqNo(1), ValueKind::Deletion),
        Vec::new(),
    );
    m
}

#[test]
fn golden_table_matches_the_format_doc() {
    let doc = include_str!("../../../../../docs/format/sst.md");
    let want = hex_block(doc);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("golden.sst");
    build(&path, &golden_entries(), &TableOptions::default());
    let got = std::fs::read(&path).unwrap();
    assert_eq!(
        got,
        want,
        "docs/format/sst.md is out of date; the builder now writes:\n{}",
        got.iter()
            .map(|b| format!("{b:02x}"))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let t = open(&path, None).unwrap();
    assert_eq!(
        t.get(b"apple", SeqNo::MAX).unwrap(),
        Some((ValueKind::Value, b"red".to_vec()))
    );
    assert_eq!(
        t.get(b"banana", SeqNo::MAX).unwrap(),
        Some((ValueKind::Deletion, Vec::new()))
    );
}
