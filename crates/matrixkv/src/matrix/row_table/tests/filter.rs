//! The RowTable bloom filter: present and used, never a false negative, damage detected at
//! open (or by `verify`), rows without a filter (bloom off, format version 1) still read
//! correctly, and the engine's skip policy (a skipped row leaves no window) matches a model.

use proptest::prelude::*;
use rand::Rng;

use super::bad_input::{corruption_offset, flip, region_offset, small_model};
use super::*;
use crate::checksum;
use crate::error::CorruptionReason;
use crate::matrix::row_table::format::{HEADER_CRC_OFFSET, HEADER_LEN};
use crate::sst::filter::FilterBuilder;

/// Offset of the filter checksum in the header (after the u64 filter length at 84).
const FILTER_CRC_AT: usize = 92;

fn read_logical(pool: &Pool, pages: &PageList, off: u64, len: usize) -> Vec<u8> {
    (0..len as u64)
        .map(|i| {
            let mut b = [0u8];
            pool.region
                .read(region_offset(pool, pages, off + i), &mut b)
                .unwrap();
            b[0]
        })
        .collect()
}

fn write_logical(pool: &Pool, pages: &PageList, off: u64, bytes: &[u8]) {
    for (i, b) in bytes.iter().enumerate() {
        let at = region_offset(pool, pages, off + i as u64);
        pool.region.write(at, &[*b]).unwrap();
    }
}

/// Applies `edit` to the header of the row over `pages` and rewrites it with a valid header
/// checksum (the commit word is kept).
fn patch_header(pool: &Pool, pages: &PageList, edit: impl FnOnce(&mut [u8; HEADER_LEN])) {
    let mut h = [0u8; HEADER_LEN];
    h.copy_from_slice(&read_logical(pool, pages, 0, HEADER_LEN));
    edit(&mut h);
    let crc = checksum::checksum(&h[..HEADER_CRC_OFFSET]);
    h[HEADER_CRC_OFFSET..HEADER_CRC_OFFSET + 4].copy_from_slice(&crc.to_le_bytes());
    write_logical(pool, pages, 0, &h);
}

/// Replaces the row's filter section with `block` (of the same length) and stores its
/// checksum in the header, so only the filter's contents are wrong.
fn replace_filter(pool: &Pool, pages: &PageList, r: &RowReader, block: &[u8]) {
    assert_eq!(block.len() as u64, r.header().filter_bytes);
    write_logical(pool, pages, r.header().filter_offset(), block);
    let crc = checksum::checksum(block);
    patch_header(pool, pages, |h| {
        h[FILTER_CRC_AT..FILTER_CRC_AT + 4].copy_from_slice(&crc.to_le_bytes());
    });
}

/// A lookup through `rows` (oldest first) as `walk_container` runs it: rows whose filter
/// rules the key out are skipped and leave no window; a searched row passes its window to
/// the next row when that is its previous row. Returns the answer and the rows searched.
fn filtered_get(rows: &[Arc<RowReader>], u: &[u8], snap: SeqNo) -> (Found, usize) {
    let mut hint: Option<(u64, (usize, usize))> = None;
    let mut searched = 0;
    for r in rows.iter().rev() {
        if !r.may_contain(u) {
            hint = None;
            continue;
        }
        let window = hint.and_then(|(row, w)| (row == r.row()).then_some(w));
        searched += 1;
        let (found, next) = r.get(u, snap, window).unwrap();
        if found.is_some() {
            return (found, searched);
        }
        hint = Some((r.prev_row(), next));
    }
    (None, searched)
}

#[test]
fn a_row_filter_admits_every_key_and_rules_out_most_absent_ones() {
    let mut pool = Pool::new(1024, 4096);
    let mut m = Model::new();
    let mut seq = 0;
    for i in 0..10_000u64 {
        let versions = if i % 3 == 0 { 2 } else { 1 };
        for _ in 0..versions {
            seq += 1;
            let kind = if seq % 7 == 0 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            m.insert(InternalKey::new(&ukey(2 * i), SeqNo(seq), kind), vec![1]);
        }
    }
    let (pages, _) = pool.write(1, None, &m);
    let r = pool.open(&pages, 1).unwrap();
    assert!(r.has_filter());
    // One filter over the 10,000 distinct user keys, not the entries.
    assert_eq!(
        r.header().filter_bytes,
        FilterBuilder::block_bytes(10_000, BLOOM_BITS)
    );
    for i in 0..10_000u64 {
        assert!(r.may_contain(&ukey(2 * i)), "key {i} ruled out");
    }
    let false_positives = (0..10_000u64)
        .filter(|i| r.may_contain(&ukey(2 * i + 1)))
        .count();
    // About 0.8% in theory at 10 bits per key.
    assert!(false_positives < 200, "{false_positives} false positives");
    r.verify().unwrap();
}

fn arb_row() -> impl Strategy<Value = (Vec<(Vec<u8>, u8)>, u32)> {
    (
        proptest::collection::btree_map(
            proptest::collection::vec(any::<u8>(), 0..24),
            1..=3u8,
            1..150,
        )
        .prop_map(|m| m.into_iter().collect()),
        1..=24u32,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn no_user_key_of_a_row_is_ever_ruled_out((keys, bits) in arb_row()) {
        let mut m = Model::new();
        let mut seq = 0;
        for (u, versions) in &keys {
            for v in 0..*versions {
                seq += 1;
                let (kind, value) = if v == 1 {
                    (ValueKind::Deletion, vec![])
                } else {
                    (ValueKind::Value, vec![v])
                };
                m.insert(InternalKey::new(u, SeqNo(seq), kind), value);
            }
        }
        let mut pool = Pool::new(512, 256);
        let (pages, _) = pool.write_with_bloom(1, None, &m, bits);
        let r = pool.open(&pages, 1).unwrap();
        prop_assert!(r.has_filter());
        for (u, _) in &keys {
            prop_assert!(r.may_contain(u));
            let (found, _) = filtered_get(std::slice::from_ref(&r), u, SeqNo::MAX);
            prop_assert_eq!(found, model_get(&m, u, SeqNo::MAX));
        }
    }
}

#[test]
fn a_lookup_that_skips_filtered_rows_matches_the_model() {
    let mut rng = StdRng::seed_from_u64(17);
    let mut pool = Pool::new(2048, 256);
    let mut seq = 0;
    let mut rows: Vec<Arc<RowReader>> = Vec::new();
    let mut all = Model::new();
    // Overlapping rows, one of them without a filter, chained by forward pointers.
    for (row, users, bits) in [
        (1u64, 0..400u64, BLOOM_BITS),
        (2, 100..300, BLOOM_BITS),
        (3, 0..400, 0),
        (4, 350..800, BLOOM_BITS),
        (5, 0..800, BLOOM_BITS),
    ] {
        let m = random_row(&mut rng, 150, users, &mut seq, 20);
        let prev = rows.last().cloned();
        let (pages, _) = pool.write_with_bloom(row, prev.as_deref(), &m, bits);
        rows.push(pool.open(&pages, row).unwrap());
        all.extend(m);
    }
    assert!(!rows[2].has_filter());
    let mut searched = 0;
    let queries = 1500;
    for q in 0..queries {
        let u = ukey(rng.gen_range(0..900));
        let snap = if q % 2 == 0 {
            SeqNo::MAX
        } else {
            SeqNo(rng.gen_range(0..=seq + 1))
        };
        let (found, n) = filtered_get(&rows, &u, snap);
        assert_eq!(
            found,
            model_get(&all, &u, snap),
            "key {u:?} snapshot {snap}"
        );
        assert_eq!(found, hint_get(&rows, &u, snap));
        searched += n;
    }
    // Without filters every query would search up to five rows; the filters skip most.
    assert!(searched < queries * 5 / 2, "{searched} rows searched");
}

#[test]
fn rows_written_with_bloom_off_have_no_filter_and_read_correctly() {
    let mut rng = StdRng::seed_from_u64(3);
    let mut pool = Pool::new(1024, 256);
    let mut seq = 0;
    let m = random_row(&mut rng, 300, 0..200, &mut seq, 40);
    let (pages, summary) = pool.write_with_bloom(1, None, &m, 0);
    let r = pool.open(&pages, 1).unwrap();
    assert!(!r.has_filter());
    assert_eq!((r.header().filter_bytes, r.header().filter_crc), (0, 0));
    let keys: u64 = m.keys().map(|k| k.as_bytes().len() as u64).sum();
    let values: u64 = m.values().map(|v| v.len() as u64).sum();
    assert_eq!(summary.bytes, 128 + 32 * 300 + keys + values);
    assert_eq!(r.header().values_offset(), r.header().filter_offset());
    assert_row_equals(&r, &m);
    // Without a filter every key may be present; lookups search the row.
    assert!(r.may_contain(b"not a key"));
    for u in 0..220 {
        let u = ukey(u);
        let (found, searched) = filtered_get(std::slice::from_ref(&r), &u, SeqNo::MAX);
        assert_eq!(found, model_get(&m, &u, SeqNo::MAX));
        assert_eq!(searched, 1);
    }
}

#[test]
fn a_version_1_row_without_a_filter_still_opens() {
    let mut pool = Pool::new(64, 256);
    let m = small_model();
    let (pages, _) = pool.write_with_bloom(5, None, &m, 0);
    patch_header(&pool, &pages, |h| {
        h[8..12].copy_from_slice(&1u32.to_le_bytes())
    });
    let r = pool.open(&pages, 5).unwrap();
    assert!(!r.has_filter());
    assert_row_equals(&r, &m);
}

#[test]
fn every_flipped_filter_byte_is_refused_at_open() {
    let mut pool = Pool::new(64, 256);
    let (pages, _) = pool.write(5, None, &small_model());
    let r = pool.open(&pages, 5).unwrap();
    let at = r.header().filter_offset();
    let len = r.header().filter_bytes;
    assert!(len > 0);
    for off in at..at + len {
        flip(&pool, &pages, off);
        let err = pool.open(&pages, 5).unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Corruption {
                    reason: CorruptionReason::ChecksumMismatch { .. },
                    ..
                }
            ),
            "offset {off}: {err}"
        );
        assert_eq!(corruption_offset(&err), Some(at), "{err}");
        flip(&pool, &pages, off);
    }
    pool.open(&pages, 5).unwrap();
}

#[test]
fn a_filter_with_a_valid_checksum_but_a_bad_probe_count_is_refused() {
    for probes in [0u8, 31, 255] {
        let mut pool = Pool::new(64, 256);
        let (pages, _) = pool.write(5, None, &small_model());
        let r = pool.open(&pages, 5).unwrap();
        let mut block = read_logical(
            &pool,
            &pages,
            r.header().filter_offset(),
            r.header().filter_bytes as usize,
        );
        *block.last_mut().unwrap() = probes;
        replace_filter(&pool, &pages, &r, &block);
        let err = pool.open(&pages, 5).unwrap_err();
        assert!(
            matches!(
                &err,
                Error::Corruption {
                    reason: CorruptionReason::Invalid(_),
                    ..
                }
            ),
            "probes {probes}: {err}"
        );
        assert_eq!(corruption_offset(&err), Some(r.header().filter_offset()));
    }
}

#[test]
fn a_filter_that_rules_out_a_key_of_the_row_fails_verify() {
    let mut pool = Pool::new(64, 256);
    let m = small_model();
    let (pages, _) = pool.write(5, None, &m);
    let r = pool.open(&pages, 5).unwrap();
    // Clear every bit, keep the probe count: a well-formed filter that admits nothing.
    let mut block = vec![0u8; r.header().filter_bytes as usize];
    *block.last_mut().unwrap() = 7;
    replace_filter(&pool, &pages, &r, &block);
    let r = pool.open(&pages, 5).unwrap();
    assert!(!r.may_contain(&ukey(3)));
    let err = r.verify().unwrap_err();
    assert_eq!(
        corruption_offset(&err),
        Some(r.header().filter_offset()),
        "{err}"
    );
}

#[test]
fn the_filter_stays_readable_after_value_pages_are_freed() {
    let mut pool = Pool::new(256, 128);
    let m = forty_values();
    let (pages, _) = pool.write(1, None, &m);
    let r = pool.open(&pages, 1).unwrap();
    let filter_end = r.header().values_offset();
    assert!(filter_end <= r.meta_pages() as u64 * 128);
    let freeable = r.freeable_pages(0, 40).unwrap();
    assert!(freeable.start >= r.meta_pages(), "{freeable:?}");
    let (freed, _) = pages.with_freed(freeable);
    let freed = Arc::new(freed);
    // Shared by the reader of the new page list, and read again by a fresh open.
    let shared = r.with_pages(Arc::clone(&freed)).unwrap();
    let reopened = pool.open(&freed, 1).unwrap();
    for r in [shared, reopened] {
        assert!(r.has_filter());
        assert!((0..40).all(|i| r.may_contain(&ukey(i))));
    }
}

#[test]
fn entries_whose_filter_differs_in_size_from_the_layout_are_refused() {
    let k = |u: &[u8], s| crate::key::make_internal_key(u, SeqNo(s), ValueKind::Value);
    // Measured: one user key in two versions; written: two user keys of the same sizes.
    let measured = [(k(b"a", 2), vec![1]), (k(b"a", 1), vec![2])];
    let written = [(k(b"a", 2), vec![1]), (k(b"b", 1), vec![2])];
    // 64 bits per key: 64 bits of filter for one key, 128 for two.
    let layout = RowLayout::measure(measured.iter().map(|(k, v)| (&k[..], &v[..])), 64);
    let pool = Pool::new(16, 256);
    let pages = PageList::new((0..layout.pages_needed(256) as u32).collect());
    let err = write_row(
        pool.region.as_ref(),
        256,
        &pages,
        1,
        None,
        written.iter().map(|(k, v)| (&k[..], &v[..])),
        &layout,
        &pool_path(),
    )
    .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}
