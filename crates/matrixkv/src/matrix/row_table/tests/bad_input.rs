//! Bad input: damaged headers, entries, keys and values; uncommitted rows; page lists that do
//! not match the row; input the builder must refuse; crashes and failed persists.

use super::*;
use crate::error::CorruptionReason;
#[allow(unused_imports)]
use crate::matrix::row_table::builder::RowSummary;
#[allow(unused_imports)]
use crate::matrix::row_table::reader::{Found, UNCOMMITTED};
use crate::tier::CrashPolicy;

use super::super::builder::write_payload;
use super::super::format::{COMMIT_OFFSET, HEADER_LEN};

pub(super) fn small_model() -> Model {
    (0..30u64)
        .map(|i| {
            let kind = if i % 5 == 0 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let v = if kind == ValueKind::Value {
                vec![i as u8; (i * 9) as usize]
            } else {
                vec![]
            };
            (InternalKey::new(&ukey(i), SeqNo(i + 1), kind), v)
        })
        .collect()
}

/// Writes `small_model()` as row 5 and returns the pool and its pages.
fn written() -> (Pool, Arc<PageList>) {
    let mut pool = Pool::new(64, 256);
    let (pages, _) = pool.write(5, None, &small_model());
    (pool, pages)
}

/// Region offset of logical byte `off` of the row.
pub(super) fn region_offset(pool: &Pool, pages: &PageList, off: u64) -> usize {
    let pb = pool.page_bytes as u64;
    pages.physical((off / pb) as usize).unwrap() as usize * pool.page_bytes + (off % pb) as usize
}

pub(super) fn flip(pool: &Pool, pages: &PageList, off: u64) {
    let at = region_offset(pool, pages, off);
    let mut b = [0u8];
    pool.region.read(at, &mut b).unwrap();
    pool.region.write(at, &[b[0] ^ 0x40]).unwrap();
}

pub(super) fn corruption_offset(e: &Error) -> Option<u64> {
    match e {
        Error::Corruption { site, .. } => Some(site.offset),
        _ => None,
    }
}

fn is_uncommitted(e: &Error) -> bool {
    matches!(e, Error::Corruption { reason, site } if *reason == UNCOMMITTED
        && site.offset == COMMIT_OFFSET as u64)
}

#[test]
fn every_flipped_header_byte_is_refused() {
    let (pool, pages) = written();
    for off in 0..HEADER_LEN as u64 {
        flip(&pool, &pages, off);
        let err = pool.open(&pages, 5).unwrap_err();
        match &err {
            Error::NotSupported { .. } => assert!((8..13).contains(&off), "offset {off}"),
            Error::Corruption { site, .. } => {
                assert!(site.offset < HEADER_LEN as u64, "offset {off}: {err}");
                assert!(err.to_string().contains("000001.pool"), "{err}");
            }
            other => panic!("offset {off}: unexpected {other}"),
        }
        flip(&pool, &pages, off);
    }
    pool.open(&pages, 5).unwrap();
}

#[test]
fn flipped_entry_and_key_bytes_fail_the_metadata_checksum() {
    let (pool, pages) = written();
    let r = pool.open(&pages, 5).unwrap();
    let keys_off = r.header().keys_offset();
    let keys_end = r.header().filter_offset();
    for off in [
        HEADER_LEN as u64,
        HEADER_LEN as u64 + 45,
        keys_off - 1,
        keys_off,
        keys_end - 1,
    ] {
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
        assert_eq!(corruption_offset(&err), Some(HEADER_LEN as u64));
        assert!(err.to_string().contains("offset 128"), "{err}");
        flip(&pool, &pages, off);
    }
}

#[test]
fn a_flipped_value_byte_is_found_when_the_value_is_read() {
    let (pool, pages) = written();
    let r = pool.open(&pages, 5).unwrap();
    let (off, len) = r.value_extent(7).unwrap();
    assert!(len > 0);
    flip(&pool, &pages, off + len - 1);
    let r = pool.open(&pages, 5).unwrap();
    let err = r.value(7).unwrap_err();
    assert_eq!(corruption_offset(&err), Some(off), "{err}");
    assert!(r.get(&ukey(7), SeqNo::MAX, None).is_err());
    assert_eq!(
        r.get(&ukey(8), SeqNo::MAX, None).unwrap().0,
        Some((ValueKind::Value, vec![8; 72]))
    );
    assert!(r.verify().is_err());
}

/// Found by the corruption campaign (tests/corruption.rs): a forward user iterator landed on
/// the damaged value, reported `valid()` with an empty value, and only the next movement
/// failed; the std `Iterator` yielded `Ok((key, ""))`.
#[test]
fn a_flipped_value_byte_fails_the_user_iterator_that_lands_on_it() {
    use crate::iter::db_iter::DbIterator;
    use crate::iter::merging::MergingIterator;

    let (pool, pages) = written();
    let r = pool.open(&pages, 5).unwrap();
    let (off, len) = r.value_extent(7).unwrap();
    flip(&pool, &pages, off + len - 1);
    let user_iter = || {
        let r = pool.open(&pages, 5).unwrap();
        let merged = MergingIterator::new(vec![Box::new(r.iter())]);
        DbIterator::new(
            Box::new(merged),
            SeqNo::MAX,
            None,
            None,
            crate::iter::db_iter::Resolvers::default(),
            Box::new(()),
        )
    };
    let mut it = user_iter();
    let err = it.seek(&ukey(7)).unwrap_err();
    assert_eq!(corruption_offset(&err), Some(off), "{err}");
    assert!(!it.valid());
    assert_eq!(it.value(), b"");
    // Walking onto it from the entry before, in both directions.
    let mut it = user_iter();
    it.seek(&ukey(6)).unwrap();
    assert_eq!(it.value(), vec![6; 54]);
    assert!(it.next().is_err());
    let mut it = user_iter();
    it.seek(&ukey(8)).unwrap();
    assert!(it.prev().is_err());
    // The std iterator yields every value before the damaged one, then the error.
    let items: Vec<_> = user_iter().collect();
    let last = items.last().unwrap();
    assert!(last.is_err(), "ends in the error");
    for item in &items[..items.len() - 1] {
        let (k, v) = item.as_ref().unwrap();
        assert!(k.as_slice() < ukey(7).as_slice(), "{k:?}");
        assert!(
            !v.is_empty() || k == &ukey(0),
            "{k:?} yielded an empty value"
        );
    }
}

#[test]
fn a_row_without_its_commit_word_is_uncommitted() {
    let (pool, pages) = written();
    let at = region_offset(&pool, &pages, COMMIT_OFFSET as u64);
    pool.region.write(at, &[0; 8]).unwrap();
    let err = pool.open(&pages, 5).unwrap_err();
    assert!(is_uncommitted(&err), "{err}");
    assert!(err.to_string().contains("not committed"), "{err}");
    // The commit word names the row: the same bytes opened as another row are refused.
    let (pool, pages) = written();
    assert!(is_uncommitted(&pool.open(&pages, 6).unwrap_err()));
}

#[test]
fn a_truncated_page_list_is_refused() {
    let (pool, pages) = written();
    let short: Vec<u32> = (0..pages.len() - 1)
        .map(|i| pages.physical(i).unwrap())
        .collect();
    let err = pool.open(&Arc::new(PageList::new(short)), 5).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Corruption {
                reason: CorruptionReason::Truncated,
                ..
            }
        ),
        "{err}"
    );
    assert!(pool.open(&Arc::new(PageList::new(vec![])), 5).is_err());
}

#[test]
fn a_page_outside_the_region_or_a_freed_metadata_page_is_refused() {
    let (pool, pages) = written();
    let mut bad: Vec<u32> = (0..pages.len())
        .map(|i| pages.physical(i).unwrap())
        .collect();
    *bad.last_mut().unwrap() = 64;
    let err = pool.open(&Arc::new(PageList::new(bad)), 5).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let (freed, _) = pages.with_freed(1..2);
    let err = pool.open(&Arc::new(freed), 5).unwrap_err();
    assert_eq!(corruption_offset(&err), Some(256), "{err}");
}

#[test]
fn pages_of_the_wrong_size_are_refused() {
    let (pool, pages) = written();
    for pb in [0, 64, 100, 260] {
        let err = RowReader::open(pool.region(), pb, pages.clone(), 5, pool_path()).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{pb}: {err}");
    }
}

fn try_write(m: &[(Vec<u8>, Vec<u8>)], layout_of: &[(Vec<u8>, Vec<u8>)]) -> Result<RowSummary> {
    let pool = Pool::new(64, 256);
    let layout = RowLayout::measure(
        layout_of.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
        BLOOM_BITS,
    );
    let n = layout.pages_needed(256).min(64);
    let pages = PageList::new((0..n as u32).collect());
    write_row(
        pool.region.as_ref(),
        256,
        &pages,
        1,
        None,
        m.iter().map(|(k, v)| (k.as_slice(), v.as_slice())),
        &layout,
        &pool_path(),
    )
}

#[test]
fn the_builder_refuses_input_it_cannot_store_faithfully() {
    let k = |u: &[u8], s| crate::key::make_internal_key(u, SeqNo(s), ValueKind::Value);
    let a = (k(b"a", 1), b"1".to_vec());
    let b = (k(b"b", 2), b"2".to_vec());
    let invalid = |r: Result<RowSummary>| matches!(r, Err(Error::InvalidArgument(_)));
    // Unsorted, duplicated.
    assert!(invalid(try_write(
        &[b.clone(), a.clone()],
        &[b.clone(), a.clone()]
    )));
    assert!(invalid(try_write(
        &[a.clone(), a.clone()],
        &[a.clone(), a.clone()]
    )));
    // A key too short for a tag; an unknown kind byte.
    let short = (b"abc".to_vec(), vec![]);
    assert!(invalid(try_write(
        std::slice::from_ref(&short),
        std::slice::from_ref(&short)
    )));
    let mut bad_kind = a.clone();
    let n = bad_kind.0.len();
    bad_kind.0[n - 8] = 9;
    assert!(invalid(try_write(
        std::slice::from_ref(&bad_kind),
        std::slice::from_ref(&bad_kind)
    )));
    // Entries differing from what was measured: one more, one fewer, a longer value.
    assert!(invalid(try_write(
        &[a.clone(), b.clone()],
        std::slice::from_ref(&a)
    )));
    assert!(invalid(try_write(
        std::slice::from_ref(&a),
        &[a.clone(), b.clone()]
    )));
    let longer = (a.0.clone(), vec![0; 2]);
    assert!(invalid(try_write(&[longer], std::slice::from_ref(&a))));
    assert!(try_write(&[a.clone(), b.clone()], &[a, b]).is_ok());
}

#[test]
fn the_builder_refuses_bad_placement() {
    let m = small_model();
    let layout = RowLayout::measure(entries(&m), BLOOM_BITS);
    let pool = Pool::new(64, 256);
    let needed = layout.pages_needed(256);
    let write = |pages: &PageList, page_bytes, row, prev: Option<&RowReader>| {
        write_row(
            pool.region.as_ref(),
            page_bytes,
            pages,
            row,
            prev,
            entries(&m),
            &layout,
            &pool_path(),
        )
    };
    let ok_pages = PageList::new((0..needed as u32).collect());
    let invalid = |r: Result<RowSummary>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(
        invalid(write(&PageList::new(vec![0]), 256, 1, None)),
        "too few pages"
    );
    assert!(
        invalid(write(
            &PageList::new((0..needed as u32 + 1).collect()),
            256,
            1,
            None
        )),
        "too many"
    );
    assert!(invalid(write(&ok_pages, 100, 1, None)), "page size");
    assert!(invalid(write(&ok_pages, 256, 0, None)), "row 0");
    let mut outside: Vec<u32> = (0..needed as u32).collect();
    outside[0] = 64;
    assert!(
        invalid(write(&PageList::new(outside), 256, 1, None)),
        "outside the region"
    );
    let (freed, _) = ok_pages.with_freed(0..1);
    assert!(invalid(write(&freed, 256, 1, None)), "freed page");
    write(&ok_pages, 256, 3, None).unwrap();
    let r3 = RowReader::open(
        pool.region(),
        256,
        Arc::new(ok_pages.clone()),
        3,
        pool_path(),
    )
    .unwrap();
    assert!(
        invalid(write(&ok_pages, 256, 3, Some(&r3))),
        "prev not older"
    );
}

#[test]
fn layouts_the_format_cannot_hold_are_refused() {
    let base = RowLayout::measure(std::iter::empty(), BLOOM_BITS);
    assert!(base.check().is_ok());
    let too_many = RowLayout {
        entries: 1 << 32,
        key_bytes: 8 << 32,
        ..base
    };
    assert!(matches!(too_many.check(), Err(Error::InvalidArgument(_))));
    let big_keys = RowLayout {
        entries: 1,
        key_bytes: 1 << 32,
        min_key_len: 8,
        ..base
    };
    assert!(big_keys.check().is_err());
    let big_value = RowLayout {
        entries: 1,
        key_bytes: 9,
        max_value_len: 1 << 32,
        min_key_len: 9,
        ..base
    };
    assert!(big_value.check().is_err());
    let overflow = RowLayout {
        total_bytes: u64::MAX,
        ..base
    };
    assert!(overflow.check().is_err());
    assert!(overflow.pages_needed(4096) > 1 << 40);
    assert_eq!(base.pages_needed(0), usize::MAX);
}

#[test]
fn a_row_survives_a_power_loss_after_write_row_returns() {
    let (pool, pages) = written();
    let want = small_model();
    for policy in [
        CrashPolicy::DropUnpersisted,
        CrashPolicy::KeepAll,
        CrashPolicy::Random { seed: 3 },
    ] {
        let image = pool.region.crash_image(policy);
        let region: Arc<dyn Region> = Arc::new(SimulatedRegion::from_image(image));
        let r = RowReader::open(region, 256, pages.clone(), 5, pool_path()).unwrap();
        assert_row_equals(&r, &want);
    }
}

#[test]
fn a_row_whose_commit_word_was_not_published_is_uncommitted_after_a_crash() {
    let m = small_model();
    let layout = RowLayout::measure(entries(&m), BLOOM_BITS);
    for stale in [false, true] {
        let pool = Pool::new(64, 256);
        let pages = PageList::new((0..layout.pages_needed(256) as u32).collect());
        if stale {
            // The pages held an earlier, committed row with another number.
            write_row(
                pool.region.as_ref(),
                256,
                &pages,
                2,
                None,
                entries(&m),
                &layout,
                &pool_path(),
            )
            .unwrap();
        }
        write_payload(
            pool.region.as_ref(),
            256,
            &pages,
            5,
            None,
            entries(&m),
            &layout,
            &pool_path(),
        )
        .unwrap();
        for seed in 0..4 {
            for policy in [
                CrashPolicy::DropUnpersisted,
                CrashPolicy::KeepAll,
                CrashPolicy::Random { seed },
            ] {
                let image = pool.region.crash_image(policy);
                let region: Arc<dyn Region> = Arc::new(SimulatedRegion::from_image(image));
                let err = RowReader::open(region, 256, Arc::new(pages.clone()), 5, pool_path())
                    .unwrap_err();
                assert!(is_uncommitted(&err), "stale {stale} {policy:?}: {err}");
            }
        }
    }
}

#[test]
fn a_failed_persist_or_write_never_leaves_a_committed_row() {
    let m = small_model();
    let layout = RowLayout::measure(entries(&m), BLOOM_BITS);
    let pages = PageList::new((0..layout.pages_needed(256) as u32).collect());
    let write = |pool: &Pool| {
        write_row(
            pool.region.as_ref(),
            256,
            &pages,
            5,
            None,
            entries(&m),
            &layout,
            &pool_path(),
        )
    };
    // Count the persists of a successful write (the payload runs plus the commit word).
    let probe = Pool::new(64, 256);
    write(&probe).unwrap();
    let persists = probe.region.persist_count();
    assert_eq!(persists, 2, "one contiguous run, then the commit word");
    for k in 0..persists {
        let pool = Pool::new(64, 256);
        pool.region.fail_persist_after(Some(k));
        let err = write(&pool).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Io {
                    op: IoOp::Persist,
                    ..
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("000001.pool"), "{err}");
        let image = pool.region.crash_image(CrashPolicy::DropUnpersisted);
        let region: Arc<dyn Region> = Arc::new(SimulatedRegion::from_image(image));
        let err =
            RowReader::open(region, 256, Arc::new(pages.clone()), 5, pool_path()).unwrap_err();
        assert!(is_uncommitted(&err), "persist {k}: {err}");
    }
    for k in [0, 1, 3] {
        let pool = Pool::new(64, 256);
        pool.region.fail_writes_after(Some(k));
        let err = write(&pool).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Io {
                    op: IoOp::Write,
                    ..
                }
            ),
            "{err}"
        );
        pool.region.fail_writes_after(None);
        assert!(is_uncommitted(
            &pool.open(&Arc::new(pages.clone()), 5).unwrap_err()
        ));
    }
}
