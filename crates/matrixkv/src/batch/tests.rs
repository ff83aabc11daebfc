use super::*;

fn sample() -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(b"k1", b"v1");
    b.delete(b"k2");
    b.put(b"", b"");
    b.put(vec![7u8; 200], vec![9u8; 300]);
    b
}

fn collect(b: &WriteBatch) -> Vec<(ValueKind, Vec<u8>, Vec<u8>)> {
    b.ops()
        .map(|op| (op.kind, op.key.to_vec(), op.value.to_vec()))
        .collect()
}

#[test]
fn the_values_durable_marker_is_an_empty_batch_at_sequence_zero() {
    let m = WriteBatch::values_durable_marker();
    assert_eq!(
        m.data(),
        &[0u8; 12],
        "docs/format/wal.md, values-durable marker"
    );
    let decoded = WriteBatch::decode(m.data()).unwrap();
    assert!(decoded.is_values_durable_marker());
    assert!(decoded.is_empty());
    // A write's batch never is one.
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    b.set_sequence(SeqNo(1));
    assert!(
        !WriteBatch::decode(b.data())
            .unwrap()
            .is_values_durable_marker()
    );
    let mut empty = WriteBatch::new();
    empty.set_sequence(SeqNo(7));
    assert!(!empty.is_values_durable_marker());
}

#[test]
fn empty_batch_is_just_a_header() {
    let b = WriteBatch::default();
    assert!(b.is_empty());
    assert_eq!(b.len(), 0);
    assert_eq!(b.size_bytes(), BATCH_HEADER_LEN);
    assert_eq!(b.data(), &[0u8; 12]);
    assert_eq!(b.ops().count(), 0);
    assert_eq!(WriteBatch::decode(b.data()).unwrap(), b);
}

#[test]
fn encoding_matches_the_documented_layout() {
    let mut b = WriteBatch::new();
    b.set_sequence(SeqNo(0x0102));
    b.put(b"ab", b"xyz");
    b.delete(b"c");
    let expected: Vec<u8> = [
        &[0x02, 0x01, 0, 0, 0, 0, 0, 0][..], // sequence
        &[2, 0, 0, 0],                       // count
        &[1, 2, b'a', b'b', 3, b'x', b'y', b'z'],
        &[0, 1, b'c'],
    ]
    .concat();
    assert_eq!(b.data(), &expected[..]);
    assert_eq!(b.size_bytes(), expected.len());
}

#[test]
fn operations_come_back_in_order_with_kinds() {
    let b = sample();
    assert_eq!(b.len(), 4);
    assert_eq!(b.ops().len(), 4);
    let ops = collect(&b);
    assert_eq!(ops[0], (ValueKind::Value, b"k1".to_vec(), b"v1".to_vec()));
    assert_eq!(ops[1], (ValueKind::Deletion, b"k2".to_vec(), vec![]));
    assert_eq!(ops[2], (ValueKind::Value, vec![], vec![]));
    assert_eq!(ops[3], (ValueKind::Value, vec![7; 200], vec![9; 300]));
    assert_eq!(b.max_key_len(), 200);
    assert_eq!(b.max_value_len(), 300);
}

#[test]
fn encode_decode_round_trips() {
    let mut b = sample();
    b.set_sequence(SeqNo(77));
    let d = WriteBatch::decode(b.data()).unwrap();
    assert_eq!(d, b);
    assert_eq!(d.sequence(), SeqNo(77));
    assert_eq!(collect(&d), collect(&b));
    assert_eq!((d.max_key_len(), d.max_value_len()), (200, 300));
    assert_eq!(
        validate(b.data()).unwrap(),
        BatchSummary {
            sequence: SeqNo(77),
            count: 4,
            max_key_len: 200,
            max_value_len: 300,
            merges: 0,
            bad_ranges: 0,
            keyspace_ops: 0,
        }
    );
}

#[test]
fn a_range_delete_encodes_as_the_format_doc_shows() {
    let doc = include_str!("../../../../docs/format/wal.md");
    let golden = crate::golden::hex_blocks(doc).remove(1);
    let mut b = WriteBatch::new();
    b.delete_range(b"b", b"d");
    b.put(b"c", b"x");
    b.set_sequence(SeqNo(12));
    assert_eq!(
        b.data(),
        golden.as_slice(),
        "docs/format/wal.md is out of date"
    );
    let d = WriteBatch::decode(&golden).unwrap();
    assert!(!d.has_bad_range());
    assert_eq!(d.max_key_len(), 1);
    assert_eq!(d.max_value_len(), 1);
    let ops: Vec<_> = d.iter().collect();
    assert_eq!(
        ops,
        [
            BatchOp::DeleteRange {
                start: b"b",
                end: b"d"
            },
            BatchOp::Put {
                key: b"c",
                value: b"x"
            }
        ]
    );
    let mut bad = WriteBatch::new();
    bad.delete_range(b"d", b"b");
    assert!(bad.has_bad_range());
    assert!(WriteBatch::decode(bad.data()).unwrap().has_bad_range());
}

#[test]
fn a_keyspace_record_encodes_as_the_format_doc_shows() {
    let doc = include_str!("../../../../docs/format/wal.md");
    let golden = crate::golden::hex_blocks(doc).remove(2);
    let mut b = WriteBatch::new();
    b.put_in(3, b"a", b"1");
    b.delete(b"a");
    b.set_sequence(SeqNo(20));
    assert_eq!(
        b.data(),
        golden.as_slice(),
        "docs/format/wal.md is out of date"
    );
    let d = WriteBatch::decode(&golden).unwrap();
    assert!(d.has_keyspace_ops());
    let ops: Vec<_> = d.iter_with_keyspace().collect();
    assert_eq!(
        ops,
        [
            (
                3,
                BatchOp::Put {
                    key: b"a",
                    value: b"1"
                }
            ),
            (0, BatchOp::Delete { key: b"a" })
        ]
    );
    // The deletion of a whole keyspace is the one empty range the decoder accepts.
    let mut whole = WriteBatch::new();
    whole.delete_keyspace(3);
    let d = WriteBatch::decode(whole.data()).unwrap();
    assert!(!d.has_bad_range());
    assert!(d.ops().all(|op| op.deletes_keyspace()));
    let mut empty = WriteBatch::new();
    empty.delete_range_in(3, b"", b"");
    assert!(WriteBatch::decode(empty.data()).is_ok());
    assert!(empty.has_bad_range(), "users cannot write an empty range");
}

#[test]
fn a_merge_encodes_as_the_format_doc_shows() {
    let doc = include_str!("../../../../docs/format/wal.md");
    let golden = crate::golden::hex_blocks(doc).remove(0);
    let mut b = WriteBatch::new();
    b.merge(b"n", b"x");
    b.put(b"k", b"");
    b.set_sequence(SeqNo(9));
    assert_eq!(
        b.data(),
        golden.as_slice(),
        "docs/format/wal.md is out of date"
    );
    let d = WriteBatch::decode(&golden).unwrap();
    assert!(d.has_merge());
    let ops: Vec<_> = d.ops().map(|op| (op.kind, op.key, op.value)).collect();
    assert_eq!(
        ops,
        [
            (ValueKind::Merge, &b"n"[..], &b"x"[..]),
            (ValueKind::Value, &b"k"[..], &b""[..])
        ]
    );
}

#[test]
fn public_iteration_yields_puts_and_deletes_in_order() {
    let b = sample();
    let ops: Vec<BatchOp<'_>> = b.iter().collect();
    assert_eq!(
        ops,
        vec![
            BatchOp::Put {
                key: b"k1",
                value: b"v1"
            },
            BatchOp::Delete { key: b"k2" },
            BatchOp::Put {
                key: b"",
                value: b""
            },
            BatchOp::Put {
                key: &[7; 200],
                value: &[9; 300]
            },
        ]
    );
    assert_eq!(WriteBatch::new().iter().count(), 0);
}

#[test]
fn clear_resets_operations_and_sequence() {
    let mut b = sample();
    b.set_sequence(SeqNo(5));
    b.clear();
    assert!(b.is_empty());
    assert_eq!(b.sequence(), SeqNo::ZERO);
    assert_eq!(b, WriteBatch::new());
    b.put(b"a", b"b");
    assert_eq!(collect(&b).len(), 1);
}

#[test]
fn append_adds_counts_and_keeps_the_first_sequence() {
    let mut a = WriteBatch::new();
    a.put(b"a", b"1");
    a.set_sequence(SeqNo(10));
    let mut b = sample();
    b.set_sequence(SeqNo(99));
    a.append(&b);
    assert_eq!(a.len(), 5);
    assert_eq!(a.sequence(), SeqNo(10));
    let ops = collect(&a);
    assert_eq!(ops[0].1, b"a");
    assert_eq!(ops[1..], collect(&b)[..]);
    assert_eq!(a.max_value_len(), 300);
    // The merged encoding is itself a valid batch.
    assert_eq!(WriteBatch::decode(a.data()).unwrap(), a);
}

#[test]
fn debug_output_summarises_instead_of_dumping_bytes() {
    let mut b = sample();
    b.set_sequence(SeqNo(3));
    let s = format!("{b:?}");
    assert!(s.contains("sequence: 3") && s.contains("ops: 4"), "{s}");
}

#[test]
fn truncated_batches_are_rejected_at_every_length() {
    let b = sample();
    let data = b.data();
    for n in 0..data.len() {
        let r = WriteBatch::decode(&data[..n]);
        assert!(r.is_err(), "prefix of {n} bytes was accepted");
    }
    assert_eq!(
        WriteBatch::decode(&data[..5]),
        Err(CorruptionReason::Truncated)
    );
}

#[test]
fn count_that_disagrees_with_the_records_is_rejected() {
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    b.delete(b"d");
    let mut more = b.data().to_vec();
    more[COUNT_OFFSET] = 3;
    assert_eq!(WriteBatch::decode(&more), Err(CorruptionReason::Truncated));
    let mut fewer = b.data().to_vec();
    fewer[COUNT_OFFSET] = 1;
    assert!(matches!(
        WriteBatch::decode(&fewer),
        Err(CorruptionReason::Invalid(_))
    ));
    let mut huge = b.data().to_vec();
    huge[COUNT_OFFSET..BATCH_HEADER_LEN].copy_from_slice(&u32::MAX.to_le_bytes());
    assert_eq!(WriteBatch::decode(&huge), Err(CorruptionReason::Truncated));
}

#[test]
fn unknown_kind_is_rejected() {
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    let mut data = b.data().to_vec();
    data[BATCH_HEADER_LEN] = 9;
    assert_eq!(
        WriteBatch::decode(&data),
        Err(CorruptionReason::UnknownType(9))
    );
}

#[test]
fn a_logged_blob_pointer_decodes_as_a_blob_index() {
    let mut b = WriteBatch::new();
    b.put_blob_index_in(0, b"k", b"pointer");
    b.delete(b"d");
    let d = WriteBatch::decode(b.data()).unwrap();
    let ops: Vec<_> = d.ops().map(|op| (op.kind, op.key, op.value)).collect();
    assert_eq!(
        ops,
        vec![
            (ValueKind::BlobIndex, &b"k"[..], &b"pointer"[..]),
            (ValueKind::Deletion, &b"d"[..], &b""[..]),
        ]
    );
}

#[test]
fn overlong_varint_is_rejected() {
    let mut data = WriteBatch::new().data().to_vec();
    data[COUNT_OFFSET] = 1;
    data.push(ValueKind::Deletion as u8);
    data.extend_from_slice(&[0xff; 11]);
    assert_eq!(WriteBatch::decode(&data), Err(CorruptionReason::BadVarint));
}

#[test]
fn length_beyond_the_end_is_rejected_without_allocating_it() {
    let mut data = WriteBatch::new().data().to_vec();
    data[COUNT_OFFSET] = 1;
    data.push(ValueKind::Value as u8);
    coding::put_varint64(&mut data, u64::MAX >> 1);
    data.extend_from_slice(b"key");
    assert_eq!(WriteBatch::decode(&data), Err(CorruptionReason::BadLength));
    // The value length of a put is checked too.
    let mut b = WriteBatch::new();
    b.put(b"k", b"value");
    let mut data = b.data().to_vec();
    data[BATCH_HEADER_LEN + 3] = 100;
    assert_eq!(WriteBatch::decode(&data), Err(CorruptionReason::BadLength));
}

#[test]
fn sequence_beyond_the_maximum_is_rejected() {
    let mut b = WriteBatch::new();
    b.put(b"k", b"v");
    b.put(b"l", b"w");
    b.set_sequence(SeqNo::MAX);
    assert!(matches!(
        WriteBatch::decode(b.data()),
        Err(CorruptionReason::Invalid(_))
    ));
    b.set_sequence(SeqNo(SeqNo::MAX.0 - 1));
    assert!(WriteBatch::decode(b.data()).is_ok());
}

#[test]
fn random_bytes_never_panic_the_decoder() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed_ba7c);
    let valid = sample();
    for _ in 0..2000 {
        // Mutate a valid encoding (more interesting than pure noise), or take noise.
        let mut data = if rng.gen_bool(0.5) {
            valid.data().to_vec()
        } else {
            (0..rng.gen_range(0..64)).map(|_| rng.r#gen()).collect()
        };
        for _ in 0..rng.gen_range(1..4) {
            if !data.is_empty() {
                let i = rng.gen_range(0..data.len());
                data[i] = rng.r#gen();
            }
        }
        if let Ok(b) = WriteBatch::decode(&data) {
            // Whatever decodes must iterate to exactly its count.
            assert_eq!(b.ops().count(), b.len());
        }
    }
}
