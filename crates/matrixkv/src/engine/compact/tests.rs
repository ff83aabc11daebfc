use std::collections::BTreeMap;

use super::*;
use crate::iter::vec_iter::VecIter;
use crate::key::ValueKind;
use crate::range_del::RangeTombstone;
use crate::version::testutil::version;

/// A database on simulated tiers whose keys merge with an appending operator.
fn merging_db() -> crate::Db {
    let mut o = crate::Options::new("/db");
    o.merge_operator = Some(Arc::new(crate::merge::AppendOperator::new(",")));
    crate::engine::testutil::open_simulated(o)
}

/// An internal key of `user` at `seq` whose kind byte is `kind`, known or not.
fn raw_key(user: &[u8], seq: u64, kind: u8) -> Vec<u8> {
    let mut k = key::make_internal_key(user, SeqNo(seq), ValueKind::Value);
    let at = k.len() - 8;
    k[at] = kind;
    k
}

/// Asserts `r` is a corruption of `file` at `offset`.
fn assert_corruption_at<T: std::fmt::Debug>(r: Result<T>, file: &str, offset: u64) {
    match r {
        Err(Error::Corruption { site, .. }) => {
            assert_eq!(site.path, std::path::Path::new(file), "{site:?}");
            assert_eq!(site.offset, offset, "{site:?}");
        }
        other => panic!("expected a corruption of {file} at {offset}, got {other:?}"),
    }
}

/// Merges `input` into L1 of `v` as a compaction would; the number of tables written.
fn merge_to_l1(inner: &DbInner, v: &Version, input: VecIter) -> Result<usize> {
    let mut outputs = crate::engine::jobs::ReservedOutputs::new(inner);
    inner
        .merge_into_level(
            v,
            Box::new(input),
            1,
            10,
            &MergeExtras::default(),
            &mut outputs,
        )
        .map(|o| o.tables.len())
}

#[test]
fn a_merge_base_of_unknown_kind_is_corruption_not_a_value() {
    let db = merging_db();
    let inner = db.inner();
    let v = inner.state.lock().versions.current();
    // A merge operand over an entry whose kind byte no version of the format defines:
    // read as a value, it became the base of the merge ("base,op").
    let input = VecIter::new(vec![
        (raw_key(b"k", 5, ValueKind::Merge as u8), b"op".to_vec()),
        (raw_key(b"k", 3, 0x7f), b"base".to_vec()),
    ])
    .read_from("/db/000009.sst");
    assert_corruption_at(merge_to_l1(inner, &v, input), "/db/000009.sst", 1);
}

#[test]
fn a_truncated_key_in_a_merge_chain_is_corruption_not_an_empty_key() {
    let db = merging_db();
    let inner = db.inner();
    let v = inner.state.lock().versions.current();
    // Operands of the empty user key, then a key too short to hold a tag: split as the
    // empty key with tag 0 (a tombstone), it ended the chain as its base.
    let input = VecIter::new(vec![
        (raw_key(b"", 5, ValueKind::Merge as u8), b"op".to_vec()),
        (b"\x01".to_vec(), b"x".to_vec()),
    ])
    .read_from("/db/000009.sst");
    assert_corruption_at(merge_to_l1(inner, &v, input), "/db/000009.sst", 1);
}

#[test]
fn the_filter_reports_a_key_that_does_not_parse_instead_of_keeping_it() {
    let db = merging_db();
    let inner = db.inner();
    let v = inner.state.lock().versions.current();
    let keyspaces = inner.keyspaces();
    let extras = MergeExtras::default();
    let at = Filtering {
        version: &v,
        extras: &extras,
        output_level: 1,
        smallest_snapshot: 10,
        keyspace: keyspaces.for_key(b"k"),
        now: 0,
    };
    let mut input =
        VecIter::new(vec![(raw_key(b"k", 3, 0x7f), b"v".to_vec())]).read_from("/db/000012.sst");
    input.seek_to_first().unwrap();
    let r = inner.filter_entry(&input, &at, &mut BTreeMap::new());
    assert_corruption_at(r, "/db/000012.sst", 0);
}

fn with_tombstones(v: &Version, ts: &[(&str, &str, u64)]) -> Version {
    let e = VersionEdit {
        new_range_dels: ts
            .iter()
            .map(|&(s, e, seq)| RangeTombstone {
                start: s.as_bytes().to_vec(),
                end: e.as_bytes().to_vec(),
                seq: SeqNo(seq),
            })
            .collect(),
        ..VersionEdit::default()
    };
    v.apply(&e).unwrap()
}

#[test]
fn cleanup_drops_covered_tables_then_the_tombstone() {
    // File 5 lies inside ["a", "m") and is older: dropped. File 6 has blob references, 7
    // reaches past the range, 8 is newer than the tombstone: all kept.
    let v = version("L1: 5:b-d@10+ 7:k-p@12+\nL2: 6:e-f@11+9 8:g-h@30+");
    let v = with_tombstones(&v, &[("a", "m", 20)]);
    // Not yet visible to every snapshot: nothing.
    assert_eq!(range_del_cleanup(&v, SeqNo(19)), None);
    let e = range_del_cleanup(&v, SeqNo(25)).unwrap();
    assert_eq!(e.deleted_files, vec![(1, FileNum(5))]);
    assert!(
        e.deleted_range_dels.is_empty(),
        "files 6 and 7 are older and overlap"
    );
    // Without the older overlapping files, the tombstone goes too.
    let v = with_tombstones(
        &version("L1: 5:b-d@10+\nL2: 8:g-h@30+ 9:x-z@1+"),
        &[("a", "m", 20)],
    );
    let e = range_del_cleanup(&v, SeqNo(25)).unwrap();
    assert_eq!(e.deleted_files, vec![(1, FileNum(5))]);
    assert_eq!(e.deleted_range_dels, vec![SeqNo(20)]);
    let v = v.apply(&e).unwrap();
    assert!(v.range_dels().is_empty());
    assert_eq!(range_del_cleanup(&v, SeqNo(25)), None);
}

#[test]
fn tables_whose_edges_a_visible_tombstone_covers_are_rewritten_once() {
    // File 5 (b@10..d@10) lies inside ["b", "m") and has blob references: rewritten, not
    // dropped. File 6 ends inside the range (k), file 7 only spans it (its edges a and z
    // are outside): only 5 and 6. File 8 is newer than the tombstone.
    let v = version("L1: 5:b-d@10+9 6:e-k@11\nL2: 7:a-z@3\nL3: 8:g-h@30");
    let v = with_tombstones(&v, &[("b", "m", 20)]);
    // Not yet visible to every snapshot: nothing.
    assert!(picker::pick_range_del_rewrite(&v, SeqNo(19)).is_none());
    let plan = picker::pick_range_del_rewrite(&v, SeqNo(25)).expect("a plan");
    let Plan::Rewrite { level, inputs } = plan else {
        panic!("{plan:?}");
    };
    assert_eq!(level, 1);
    let numbers: Vec<u64> = inputs.iter().map(|f| f.number.0).collect();
    assert_eq!(numbers, [5, 6]);
    // After the rewrite, file 6's last entry is one before the range: nothing left to do
    // at L1, and L2's tables do not qualify.
    let v = with_tombstones(
        &version("L1: 9:a1-a9@11\nL2: 7:a-z@3\nL3: 8:g-h@30"),
        &[("b", "m", 20)],
    );
    assert!(picker::pick_range_del_rewrite(&v, SeqNo(25)).is_none());
}

#[test]
fn cleanup_keeps_l0_tables_and_tables_of_unknown_blob_references() {
    // L0 tables are never dropped whole; `None` blob references may point into blob files.
    let v = with_tombstones(&version("L0: 5:b-d@10\nL1: 6:e-f@11"), &[("a", "m", 20)]);
    assert_eq!(range_del_cleanup(&v, SeqNo(25)), None);
}
