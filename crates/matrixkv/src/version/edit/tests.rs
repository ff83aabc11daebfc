//! Tests of `VersionEdit`: encoding, decoding and their round trips.

use super::*;
use crate::key::{ValueKind, make_internal_key};
use crate::matrix::meta::{FREED, PageList};
use proptest::prelude::*;

fn meta(n: u64, a: &str, b: &str, seq: u64) -> FileMeta {
    FileMeta {
        number: FileNum(n),
        size: 1000 + n,
        smallest: make_internal_key(a.as_bytes(), SeqNo(seq), ValueKind::Value),
        largest: make_internal_key(b.as_bytes(), SeqNo(seq), ValueKind::Deletion),
        smallest_seq: SeqNo(seq),
        largest_seq: SeqNo(seq + 3),
        entries: 17,
        blob_refs: None,
    }
}

fn full_edit() -> VersionEdit {
    VersionEdit {
        db_id: Some(0xdead_beef),
        fixed_options: vec![("page_bytes".into(), "4096".into())],
        log_number: Some(FileNum(7)),
        next_file_number: Some(12),
        last_sequence: Some(SeqNo(999)),
        compact_pointers: vec![(2, make_internal_key(b"m", SeqNo(4), ValueKind::Value))],
        deleted_files: vec![(1, FileNum(3)), (0, FileNum(4))],
        new_files: vec![
            (0, meta(9, "a", "f", 10)),
            (6, meta(10, "g", "z", 1)),
            (
                6,
                FileMeta {
                    blob_refs: Some(vec![FileNum(5), FileNum(11), FileNum(300)]),
                    ..meta(13, "z1", "z2", 1)
                },
            ),
        ],
        new_rows: vec![row(7, vec![4, 5, 6, 9]), row(8, vec![1])],
        switch_roles: true,
        column: Some(ColumnDone {
            cursor: b"k".to_vec(),
            wrapped: true,
            freed: vec![(3, 0, 2), (4, 1, 1)],
        }),
        drop_compactor: true,
        global_cursor: Some(b"q\x00".to_vec()),
        next_row_number: Some(9),
        compactor_rows: vec![row(3, vec![20, FREED, FREED, 22]), row(4, vec![30])],
        drain: Some(Drain {
            start: b"m".to_vec(),
            cursor: b"c".to_vec(),
            wrapped: true,
        }),
        new_blobs: vec![BlobFileMeta {
            number: FileNum(11),
            records: 3,
            record_bytes: 12_000,
        }],
        blob_garbage: vec![BlobGarbage {
            number: FileNum(5),
            records: 1,
            bytes: 4100,
        }],
        deleted_range_dels: vec![SeqNo(3)],
        new_range_dels: vec![crate::range_del::RangeTombstone {
            start: b"a".to_vec(),
            end: b"b\x00".to_vec(),
            seq: SeqNo(900),
        }],
        keyspaces: vec![crate::keyspace::registry::KeyspaceRecord {
            id: 300,
            name: "users".into(),
            ttl: false,
            dropped: true,
        }],
        index_generation: Some(77),
        partition_bounds: Some(vec![b"g".to_vec(), b"p".to_vec()]),
        table_runs: vec![(FileNum(9), 3)],
    }
}

fn row(n: u64, pages: Vec<u32>) -> RowMeta {
    RowMeta {
        row: n,
        prev_row: n - 1,
        pages: std::sync::Arc::new(PageList::new(pages)),
        entries: 5,
        bytes: 4000,
        smallest: make_internal_key(b"a", SeqNo(n), ValueKind::Value),
        largest: make_internal_key(b"z", SeqNo(n), ValueKind::Deletion),
        smallest_seq: SeqNo(n),
        largest_seq: SeqNo(n + 4),
    }
}

/// The bytes of an edit holding one field: `tag` then `value`.
fn field(tag: u64, value: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint64(&mut b, tag);
    value(&mut b);
    b
}

#[test]
fn row_fields_decode_in_any_order() {
    let e = full_edit();
    // Re-encode the container fields in reverse tag order: the decoder must not care.
    let mut b = VersionEdit {
        drain: e.drain.clone(),
        compactor_rows: e.compactor_rows.clone(),
        ..VersionEdit::default()
    }
    .encode();
    b.extend(
        VersionEdit {
            new_rows: e.new_rows.clone(),
            column: e.column.clone(),
            ..VersionEdit::default()
        }
        .encode(),
    );
    let d = VersionEdit::decode(&b).unwrap();
    assert_eq!(d.drain, e.drain);
    assert_eq!(d.compactor_rows, e.compactor_rows);
    assert_eq!(d.new_rows, e.new_rows);
    assert_eq!(d.column, e.column);
}

#[test]
fn repeated_container_flags_and_fields_are_rejected() {
    let repeated = Err(CorruptionReason::Invalid("field repeated in one edit"));
    for tag in [TAG_SWITCH_ROLES, TAG_DROP_COMPACTOR] {
        assert_eq!(VersionEdit::decode(&[tag as u8, tag as u8]), repeated);
    }
    let mut b = field(TAG_GLOBAL_CURSOR, |b| put_length_prefixed(b, b"a"));
    b.extend(field(TAG_GLOBAL_CURSOR, |b| put_length_prefixed(b, b"b")));
    assert_eq!(VersionEdit::decode(&b), repeated);
    let col = VersionEdit {
        column: Some(ColumnDone::default()),
        ..VersionEdit::default()
    }
    .encode();
    assert_eq!(VersionEdit::decode(&[col.clone(), col].concat()), repeated);
}

#[test]
fn flags_other_than_zero_or_one_are_rejected() {
    let bad = Err(CorruptionReason::Invalid("flag is neither 0 nor 1"));
    let b = field(TAG_COLUMN, |b| {
        put_length_prefixed(b, b"k");
        put_varint64(b, 2);
        put_varint64(b, 0);
    });
    assert_eq!(VersionEdit::decode(&b), bad);
    let b = field(TAG_DRAIN, |b| {
        put_length_prefixed(b, b"a");
        put_length_prefixed(b, b"b");
        put_varint64(b, 7);
    });
    assert_eq!(VersionEdit::decode(&b), bad);
}

#[test]
fn huge_freed_count_fails_on_truncation() {
    let b = field(TAG_COLUMN, |b| {
        put_length_prefixed(b, b"k");
        put_varint64(b, 0);
        put_varint64(b, u64::MAX);
        put_varint64(b, 3);
    });
    assert!(VersionEdit::decode(&b).is_err());
    // A page number beyond 32 bits is a bad varint for the field.
    let b = field(TAG_COLUMN, |b| {
        put_length_prefixed(b, b"k");
        put_varint64(b, 0);
        put_varint64(b, 1);
        put_varint64(b, 3);
        put_varint64(b, 1 << 33);
        put_varint64(b, 1);
    });
    assert_eq!(VersionEdit::decode(&b), Err(CorruptionReason::BadVarint));
}

#[test]
fn row_page_lists_are_bounded_per_edit() {
    let e = VersionEdit {
        new_rows: vec![row(1, (0..40).collect()), row(2, (100..140).collect())],
        compactor_rows: vec![row(3, (200..240).collect())],
        ..VersionEdit::default()
    };
    let b = e.encode();
    assert_eq!(VersionEdit::decode_with_max_pages(&b, 120).unwrap(), e);
    // The budget covers every list of the edit together.
    assert_eq!(
        VersionEdit::decode_with_max_pages(&b, 119),
        Err(CorruptionReason::BadLength)
    );
    // A 12-byte row claiming 2^30 pages fails before expanding them.
    let b = field(TAG_NEW_ROW, |b| {
        for v in [1u64, 0, 1, 0, 1 << 30] {
            put_varint64(b, v);
        }
    });
    assert_eq!(VersionEdit::decode(&b), Err(CorruptionReason::BadLength));
}

#[test]
fn malformed_rows_are_rejected() {
    let mut r = row(2, vec![1]);
    r.smallest = b"abc".to_vec();
    let e = VersionEdit {
        new_rows: vec![r],
        ..VersionEdit::default()
    };
    assert_eq!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Truncated)
    );
    let mut r = row(2, vec![1]);
    std::mem::swap(&mut r.smallest, &mut r.largest);
    let e = VersionEdit {
        compactor_rows: vec![r],
        ..VersionEdit::default()
    };
    assert!(matches!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Invalid(_))
    ));
    let mut r = row(2, vec![1]);
    r.prev_row = 2;
    let e = VersionEdit {
        new_rows: vec![r],
        ..VersionEdit::default()
    };
    assert!(matches!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Invalid(_))
    ));
    let mut r = row(2, vec![1]);
    r.largest_seq = SeqNo(SeqNo::MAX.0 + 1);
    assert!(check_row(&r).is_err());
}

#[test]
fn full_edit_round_trips() {
    let e = full_edit();
    assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
}

#[test]
fn empty_edit_is_empty_bytes_and_decodes() {
    let e = VersionEdit::default();
    assert!(e.is_empty());
    assert!(e.encode().is_empty());
    assert_eq!(VersionEdit::decode(&[]).unwrap(), e);
}

#[test]
fn truncated_edit_never_decodes_as_the_whole_edit() {
    let bytes = full_edit().encode();
    for cut in 1..bytes.len() {
        // A cut may fall exactly between two fields, which is a valid shorter edit.
        if let Ok(e) = VersionEdit::decode(&bytes[..cut]) {
            assert_ne!(e, full_edit(), "cut at {cut} decoded the full edit");
        }
    }
    // Cutting inside the last field is never valid.
    assert!(VersionEdit::decode(&bytes[..bytes.len() - 1]).is_err());
}

#[test]
fn unknown_tag_is_rejected() {
    assert_eq!(
        VersionEdit::decode(&[26, 0]),
        Err(CorruptionReason::UnknownType(26))
    );
    assert_eq!(
        VersionEdit::decode(&[0]),
        Err(CorruptionReason::UnknownType(0))
    );
    let mut b = Vec::new();
    put_varint64(&mut b, 1 << 40);
    assert_eq!(
        VersionEdit::decode(&b),
        Err(CorruptionReason::UnknownType(255))
    );
}

#[test]
fn level_out_of_range_is_rejected() {
    let mut b = Vec::new();
    put_varint64(&mut b, TAG_DELETED_FILE);
    put_varint64(&mut b, NUM_LEVELS as u64);
    put_varint64(&mut b, 5);
    assert_eq!(
        VersionEdit::decode(&b),
        Err(CorruptionReason::Invalid("level number out of range"))
    );
    let mut e = VersionEdit::default();
    e.add_file(NUM_LEVELS + 3, meta(1, "a", "b", 1));
    assert!(VersionEdit::decode(&e.encode()).is_err());
    let mut b = Vec::new();
    put_varint64(&mut b, TAG_COMPACT_POINTER);
    put_varint64(&mut b, u64::MAX);
    assert!(VersionEdit::decode(&b).is_err());
}

#[test]
fn huge_key_length_is_rejected_before_allocating() {
    let mut b = Vec::new();
    put_varint64(&mut b, TAG_NEW_FILE);
    put_varint64(&mut b, 1);
    put_varint64(&mut b, 5); // number
    put_varint64(&mut b, 100); // size
    put_varint64(&mut b, u64::MAX >> 1); // smallest key length
    b.extend_from_slice(b"short");
    assert_eq!(VersionEdit::decode(&b), Err(CorruptionReason::BadLength));
}

#[test]
fn repeated_single_field_is_rejected() {
    let mut b = Vec::new();
    for _ in 0..2 {
        put_varint64(&mut b, TAG_NEXT_FILE_NUMBER);
        put_varint64(&mut b, 5);
    }
    assert_eq!(
        VersionEdit::decode(&b),
        Err(CorruptionReason::Invalid("field repeated in one edit"))
    );
}

#[test]
fn duplicate_or_non_utf8_option_is_rejected() {
    let e = VersionEdit {
        fixed_options: vec![("a".into(), "1".into()), ("a".into(), "2".into())],
        ..VersionEdit::default()
    };
    assert!(VersionEdit::decode(&e.encode()).is_err());
    let mut b = Vec::new();
    put_varint64(&mut b, TAG_FIXED_OPTION);
    put_length_prefixed(&mut b, &[0xff, 0xfe]);
    put_length_prefixed(&mut b, b"v");
    assert_eq!(
        VersionEdit::decode(&b),
        Err(CorruptionReason::Invalid("fixed option is not UTF-8"))
    );
}

#[test]
fn malformed_file_meta_is_rejected() {
    // Key shorter than a tag.
    let mut m = meta(1, "a", "b", 1);
    m.smallest = b"abc".to_vec();
    let mut e = VersionEdit::default();
    e.add_file(1, m);
    assert_eq!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Truncated)
    );
    // Smallest above largest.
    let mut e = VersionEdit::default();
    e.add_file(1, meta(1, "z", "b", 1));
    assert!(matches!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Invalid(_))
    ));
    // Sequence range inverted.
    let mut m = meta(1, "a", "b", 1);
    m.smallest_seq = SeqNo(50);
    let mut e = VersionEdit::default();
    e.add_file(1, m);
    assert!(matches!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::Invalid(_))
    ));
    // Unknown kind byte in a key.
    let mut m = meta(1, "a", "b", 1);
    let n = m.largest.len();
    m.largest[n - 8] = 9;
    let mut e = VersionEdit::default();
    e.add_file(1, m);
    assert_eq!(
        VersionEdit::decode(&e.encode()),
        Err(CorruptionReason::UnknownType(9))
    );
}

#[test]
fn sequence_beyond_56_bits_is_rejected() {
    let mut b = Vec::new();
    put_varint64(&mut b, TAG_LAST_SEQUENCE);
    put_varint64(&mut b, SeqNo::MAX.0 + 1);
    assert!(matches!(
        VersionEdit::decode(&b),
        Err(CorruptionReason::Invalid(_))
    ));
}

#[test]
fn bad_varint_is_rejected() {
    assert_eq!(
        VersionEdit::decode(&[0x80]),
        Err(CorruptionReason::BadVarint)
    );
    assert_eq!(
        VersionEdit::decode(&[TAG_LOG_NUMBER as u8, 0xff]),
        Err(CorruptionReason::BadVarint)
    );
}

fn arb_ikey() -> impl Strategy<Value = (Vec<u8>, u64)> {
    (
        proptest::collection::vec(any::<u8>(), 0..12),
        0..SeqNo::MAX.0,
    )
}

fn arb_meta() -> impl Strategy<Value = FileMeta> {
    (
        any::<u64>(),
        any::<u64>(),
        arb_ikey(),
        arb_ikey(),
        any::<u64>(),
        proptest::option::of(proptest::collection::btree_set(any::<u64>(), 0..5)),
    )
        .prop_map(|(n, size, (a, sa), (b, sb), entries, refs)| {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (s0, s1) = (sa.min(sb), sa.max(sb));
            FileMeta {
                number: FileNum(n),
                size,
                smallest: make_internal_key(&lo, SeqNo(s1), ValueKind::Value),
                largest: make_internal_key(&hi, SeqNo(s0), ValueKind::Deletion),
                smallest_seq: SeqNo(s0),
                largest_seq: SeqNo(s1),
                entries,
                blob_refs: refs.map(|r| r.into_iter().map(FileNum).collect()),
            }
        })
}

fn arb_row() -> impl Strategy<Value = RowMeta> {
    (
        1..u64::MAX,
        any::<u64>(),
        proptest::collection::vec(prop_oneof![4 => 0u32..64, 1 => Just(FREED)], 0..12),
        any::<(u64, u64)>(),
        arb_ikey(),
        arb_ikey(),
    )
        .prop_map(|(n, prev, pages, (entries, bytes), (a, sa), (b, sb))| {
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            let (s0, s1) = (sa.min(sb), sa.max(sb));
            RowMeta {
                row: n,
                prev_row: prev % n,
                pages: std::sync::Arc::new(PageList::new(pages)),
                entries,
                bytes,
                smallest: make_internal_key(&lo, SeqNo(s1), ValueKind::Value),
                largest: make_internal_key(&hi, SeqNo(s0), ValueKind::Deletion),
                smallest_seq: SeqNo(s0),
                largest_seq: SeqNo(s1),
            }
        })
}

fn arb_user_key() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..6)
}

fn arb_container_fields() -> impl Strategy<Value = VersionEdit> {
    (
        proptest::collection::vec(arb_row(), 0..3),
        any::<(bool, bool)>(),
        proptest::option::of((
            arb_user_key(),
            any::<bool>(),
            proptest::collection::vec(any::<(u64, u32, u32)>(), 0..4),
        )),
        proptest::option::of(arb_user_key()),
        proptest::option::of(any::<u64>()),
        proptest::collection::vec(arb_row(), 0..3),
        proptest::option::of((arb_user_key(), arb_user_key(), any::<bool>())),
    )
        .prop_map(
            |(rows, (switch, drop), col, cursor, next_row, crows, drain)| VersionEdit {
                new_rows: rows,
                switch_roles: switch,
                column: col.map(|(cursor, wrapped, freed)| ColumnDone {
                    cursor,
                    wrapped,
                    freed,
                }),
                drop_compactor: drop,
                global_cursor: cursor,
                next_row_number: next_row,
                compactor_rows: crows,
                drain: drain.map(|(start, cursor, wrapped)| Drain {
                    start,
                    cursor,
                    wrapped,
                }),
                ..VersionEdit::default()
            },
        )
}

fn arb_edit() -> impl Strategy<Value = VersionEdit> {
    let level = 0..NUM_LEVELS;
    (
        proptest::option::of(any::<u64>()),
        proptest::collection::btree_map("[a-z_]{1,8}", ".{0,8}", 0..3),
        proptest::option::of(any::<u64>()),
        proptest::option::of(any::<u64>()),
        proptest::option::of(0..=SeqNo::MAX.0),
        proptest::collection::vec((level.clone(), arb_ikey()), 0..3),
        proptest::collection::vec((level.clone(), any::<u64>()), 0..4),
        proptest::collection::vec((level, arb_meta()), 0..4),
        arb_container_fields(),
        arb_range_dels(),
    )
        .prop_map(
            |(id, opts, log, next, last, cps, dels, adds, c, (gone, ranges))| VersionEdit {
                db_id: id,
                fixed_options: opts.into_iter().collect(),
                log_number: log.map(FileNum),
                next_file_number: next,
                last_sequence: last.map(SeqNo),
                compact_pointers: cps
                    .into_iter()
                    .map(|(l, (k, s))| (l, make_internal_key(&k, SeqNo(s), ValueKind::Value)))
                    .collect(),
                deleted_files: dels.into_iter().map(|(l, n)| (l, FileNum(n))).collect(),
                new_files: adds,
                deleted_range_dels: gone,
                new_range_dels: ranges,
                ..c
            },
        )
}

/// Removed tombstones (any sequence number) and added ones (non-empty ranges).
fn arb_range_dels() -> impl Strategy<Value = (Vec<SeqNo>, Vec<RangeTombstone>)> {
    (
        proptest::collection::vec(any::<u64>().prop_map(SeqNo), 0..3),
        proptest::collection::vec(
            (
                proptest::collection::vec(any::<u8>(), 0..6),
                proptest::collection::vec(any::<u8>(), 1..6),
                0..=SeqNo::MAX.0,
            ),
            0..3,
        )
        .prop_map(|ts| {
            ts.into_iter()
                .filter_map(|(a, b, seq)| {
                    let (start, end) = if a < b { (a, b) } else { (b, a) };
                    (start < end).then_some(RangeTombstone {
                        start,
                        end,
                        seq: SeqNo(seq),
                    })
                })
                .collect()
        }),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn random_edits_round_trip(e in arb_edit()) {
        prop_assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
    }

    #[test]
    fn hostile_bytes_fail_cleanly_or_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        // The decoder must return (never panic); anything it accepts must be stable.
        if let Ok(d) = VersionEdit::decode(&bytes) {
            prop_assert_eq!(VersionEdit::decode(&d.encode()).unwrap(), d);
        }
    }

    #[test]
    fn flipped_byte_decodes_or_fails_cleanly(e in arb_edit(), pos in any::<usize>(), bit in 0u8..8) {
        let mut b = e.encode();
        if !b.is_empty() {
            let i = pos % b.len();
            b[i] ^= 1 << bit;
            if let Ok(d) = VersionEdit::decode(&b) {
                // Whatever decoded must re-encode to something that decodes the same.
                prop_assert_eq!(VersionEdit::decode(&d.encode()).unwrap(), d);
            }
        }
    }
}
