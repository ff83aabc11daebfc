//! RowTable tests: round trips of random rows into a simulated region, forward pointers
//! against a brute-force computation, the cross-row hint search through a chain of rows
//! against a `BTreeMap` model, and iterators in both directions. Bad input and crashes are in
//! `bad_input`, the bloom filter in `filter`, the golden bytes of docs/format/rowtable.md in
//! `golden`.
#![allow(
    clippy::big_endian_bytes,
    reason = "test keys are big-endian numbers so they sort numerically"
)]

mod bad_input;
mod filter;
mod golden;

#[allow(unused_imports)]
use crate::matrix::row_table::builder::RowSummary;
#[allow(unused_imports)]
use crate::matrix::row_table::reader::{Found, UNCOMMITTED};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;
use crate::error::{Error, IoOp, Result};
use crate::iter::InternalIterator;
use crate::key::{InternalKey, SeqNo, ValueKind, compare_internal, seek_key, user_key};
use crate::matrix::meta::PageList;
use crate::matrix::pages::PagePool;
use crate::tier::{Region, SimulatedRegion};

type Model = BTreeMap<InternalKey, Vec<u8>>;

/// Bloom filter bits per key of the rows the tests write (the engine's default).
const BLOOM_BITS: u32 = 10;

fn pool_path() -> PathBuf {
    PathBuf::from("/fast/000001.pool")
}

fn entries(m: &Model) -> impl Iterator<Item = (&[u8], &[u8])> {
    m.iter().map(|(k, v)| (k.as_bytes(), v.as_slice()))
}

/// A simulated fast-tier region with its page pool.
struct Pool {
    region: Arc<SimulatedRegion>,
    pool: PagePool,
    page_bytes: usize,
}

impl Pool {
    fn new(pages: u32, page_bytes: usize) -> Pool {
        Pool {
            region: Arc::new(SimulatedRegion::new(pages as usize * page_bytes)),
            pool: PagePool::new(pages, page_bytes),
            page_bytes,
        }
    }

    fn region(&self) -> Arc<dyn Region> {
        self.region.clone()
    }

    /// Allocates pages for `m` and writes it as row `row`, with a bloom filter.
    fn write(
        &mut self,
        row: u64,
        prev: Option<&RowReader>,
        m: &Model,
    ) -> (Arc<PageList>, RowSummary) {
        self.write_with_bloom(row, prev, m, BLOOM_BITS)
    }

    /// [`Pool::write`] with `bloom_bits` bits per key (0: no filter).
    fn write_with_bloom(
        &mut self,
        row: u64,
        prev: Option<&RowReader>,
        m: &Model,
        bloom_bits: u32,
    ) -> (Arc<PageList>, RowSummary) {
        let layout = RowLayout::measure(entries(m), bloom_bits);
        let pages = self
            .pool
            .allocate(layout.pages_needed(self.page_bytes))
            .expect("the pool has room");
        let pages = PageList::new(pages);
        let summary = write_row(
            self.region.as_ref(),
            self.page_bytes,
            &pages,
            row,
            prev,
            entries(m),
            &layout,
            &pool_path(),
        )
        .unwrap();
        (Arc::new(pages), summary)
    }

    fn open(&self, pages: &Arc<PageList>, row: u64) -> Result<Arc<RowReader>> {
        RowReader::open(
            self.region(),
            self.page_bytes,
            pages.clone(),
            row,
            pool_path(),
        )
    }

    /// Writes and opens row `row`.
    fn row(&mut self, row: u64, prev: Option<&RowReader>, m: &Model) -> Arc<RowReader> {
        let (pages, _) = self.write(row, prev, m);
        self.open(&pages, row).unwrap()
    }
}

/// The user key of index `u`: fixed width so the order of `u` is the key order.
fn ukey(u: u64) -> Vec<u8> {
    format!("user{u:08}").into_bytes()
}

/// Forty entries with 100-byte values (entry `i` holds `i` repeated): a row spanning
/// several 128-byte value pages.
fn forty_values() -> Model {
    (0..40u64)
        .map(|i| {
            (
                InternalKey::new(&ukey(i), SeqNo(i + 1), ValueKind::Value),
                vec![i as u8; 100],
            )
        })
        .collect()
}

/// A random row: `n` entries over user keys `users` (each picked at random, several versions
/// of one key allowed), sequence numbers increasing from `*seq`, about 15% tombstones, values
/// of 0..=`value_len` bytes.
fn random_row(
    rng: &mut StdRng,
    n: usize,
    users: std::ops::Range<u64>,
    seq: &mut u64,
    value_len: usize,
) -> Model {
    let mut m = Model::new();
    while m.len() < n {
        let u = ukey(rng.gen_range(users.clone()));
        *seq += 1;
        if rng.gen_ratio(15, 100) {
            m.insert(
                InternalKey::new(&u, SeqNo(*seq), ValueKind::Deletion),
                Vec::new(),
            );
        } else {
            let len = rng.gen_range(0..=value_len);
            let v: Vec<u8> = (0..len).map(|i| (i as u64 ^ *seq) as u8).collect();
            m.insert(InternalKey::new(&u, SeqNo(*seq), ValueKind::Value), v);
        }
    }
    m
}

/// Checks every entry of `r` against `m` through the reader's accessors.
fn assert_row_equals(r: &RowReader, m: &Model) {
    assert_eq!(r.len(), m.len());
    let mut key = Vec::new();
    for (i, (k, v)) in m.iter().enumerate() {
        r.key(i, &mut key).unwrap();
        assert_eq!(key, k.as_bytes(), "key {i}");
        assert_eq!(&r.value(i).unwrap(), v, "value {i}");
        assert_eq!(r.entry(i).unwrap().value_len as usize, v.len());
    }
    r.verify().unwrap();
}

#[test]
fn random_rows_round_trip_at_every_page_size() {
    let mut rng = StdRng::seed_from_u64(1);
    for (page_bytes, value_len) in [(128, 40), (256, 700), (4096, 100), (4096, 9000)] {
        let mut pool = Pool::new(2048, page_bytes);
        let mut seq = 0;
        let m = random_row(&mut rng, 300, 0..100, &mut seq, value_len);
        let (pages, summary) = pool.write(1, None, &m);
        let r = pool.open(&pages, 1).unwrap();
        assert_row_equals(&r, &m);
        assert_eq!(summary.entries, 300);
        assert_eq!(summary.bytes, r.bytes());
        assert_eq!(summary.smallest, m.keys().next().unwrap().as_bytes());
        assert_eq!(summary.largest, m.keys().last().unwrap().as_bytes());
        assert_eq!(summary.smallest_seq, SeqNo(1));
        assert_eq!(summary.largest_seq, SeqNo(300));
        assert_eq!((r.row(), r.prev_row(), r.prev_entries()), (1, 0, 0));
        let meta = summary.to_meta(1, 0, pages.clone());
        assert_eq!(
            (meta.entries, meta.bytes, meta.pages),
            (300, r.bytes(), pages)
        );
    }
}

#[test]
fn values_larger_than_a_page_span_scattered_pages() {
    let mut pool = Pool::new(64, 256);
    // Fragment the pool so the row lands on several runs of pages.
    let hold = pool.pool.allocate(64).unwrap();
    pool.pool.free(
        &hold
            .iter()
            .copied()
            .filter(|p| p % 3 != 0)
            .collect::<Vec<_>>(),
    );
    let mut m = Model::new();
    let big: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    m.insert(
        InternalKey::new(b"a", SeqNo(1), ValueKind::Value),
        big.clone(),
    );
    m.insert(InternalKey::new(b"b", SeqNo(2), ValueKind::Value), vec![]);
    m.insert(
        InternalKey::new(b"c", SeqNo(3), ValueKind::Value),
        big[..257].to_vec(),
    );
    let (pages, _) = pool.write(4, None, &m);
    assert!(pages.runs().len() > 1, "{:?}", pages.runs());
    let r = pool.open(&pages, 4).unwrap();
    assert_row_equals(&r, &m);
    assert_eq!(
        r.get(b"a", SeqNo::MAX, None).unwrap().0,
        Some((ValueKind::Value, big))
    );
}

#[test]
fn hundred_thousand_one_byte_values_round_trip() {
    let mut pool = Pool::new(2048, 4096);
    let m: Model = (0..100_000u64)
        .map(|i| {
            (
                InternalKey::new(&i.to_be_bytes(), SeqNo(i + 1), ValueKind::Value),
                vec![i as u8],
            )
        })
        .collect();
    let r = pool.row(1, None, &m);
    assert_eq!(r.len(), 100_000);
    let mut it = r.iter();
    it.seek_to_first().unwrap();
    let mut n = 0u64;
    while it.valid() {
        assert_eq!(user_key(it.key()), n.to_be_bytes());
        assert_eq!(it.value(), [n as u8]);
        it.next().unwrap();
        n += 1;
    }
    assert_eq!(n, 100_000);
    for i in [0u64, 1, 4_095, 50_000, 99_999] {
        let (found, _) = r.get(&i.to_be_bytes(), SeqNo::MAX, None).unwrap();
        assert_eq!(found, Some((ValueKind::Value, vec![i as u8])));
    }
    assert_eq!(r.get(b"zzz", SeqNo::MAX, None).unwrap().0, None);
}

#[test]
fn empty_row_round_trips() {
    let mut pool = Pool::new(4, 128);
    let (pages, summary) = pool.write(3, None, &Model::new());
    assert_eq!(pages.len(), 1);
    assert_eq!((summary.entries, summary.bytes), (0, 128));
    let r = pool.open(&pages, 3).unwrap();
    assert!(r.is_empty());
    assert_eq!(r.get(b"k", SeqNo::MAX, None).unwrap(), (None, (0, 0)));
    let mut it = r.iter();
    it.seek_to_first().unwrap();
    assert!(!it.valid());
    it.seek_for_prev(b"k\0\0\0\0\0\0\0\0").unwrap();
    assert!(!it.valid());
    r.verify().unwrap();
}

/// Builds a chain of rows newest-last: row `i + 1` has row `i` as its previous row unless
/// `no_prev` says otherwise. Returns the readers (oldest first) and the union model.
fn chain(
    pool: &mut Pool,
    rng: &mut StdRng,
    specs: &[(usize, std::ops::Range<u64>, bool)],
) -> (Vec<Arc<RowReader>>, Vec<Model>, Model) {
    let mut seq = 0;
    let mut rows: Vec<Arc<RowReader>> = Vec::new();
    let mut models = Vec::new();
    let mut all = Model::new();
    for (i, (n, users, no_prev)) in specs.iter().enumerate() {
        let m = random_row(rng, *n, users.clone(), &mut seq, 20);
        let prev = if *no_prev {
            None
        } else {
            rows.last().map(|r| r.as_ref())
        };
        let r = pool.row(i as u64 + 1, prev, &m);
        all.extend(m.clone());
        rows.push(r);
        models.push(m);
    }
    (rows, models, all)
}

#[test]
fn forward_pointers_equal_a_brute_force_computation() {
    let mut rng = StdRng::seed_from_u64(7);
    let mut pool = Pool::new(512, 256);
    let specs = [
        (200, 0..300, false),
        (150, 100..200, false),
        (100, 500..600, false), // above every key of its previous row
        (120, 0..700, false),
        (1, 350..351, false),
    ];
    let (rows, models, _) = chain(&mut pool, &mut rng, &specs);
    for w in 1..rows.len() {
        let (prev, row) = (&rows[w - 1], &rows[w]);
        assert_eq!(row.prev_row(), prev.row());
        assert_eq!(row.prev_entries(), prev.len());
        let prev_keys: Vec<&InternalKey> = models[w - 1].keys().collect();
        for (i, k) in models[w].keys().enumerate() {
            let brute = prev_keys.iter().filter(|p| *p < &k).count();
            assert_eq!(row.fwd(i).unwrap() as usize, brute, "row {w} entry {i}");
        }
        row.verify_forward_pointers(prev).unwrap();
    }
}

/// The newest visible version of `u` as of `snap` in `m`.
fn model_get(m: &Model, u: &[u8], snap: SeqNo) -> Found {
    let seek = InternalKey(seek_key(u, snap));
    let (k, v) = m.range(seek..).next()?;
    (k.user_key() == u).then(|| {
        let p = crate::key::parse_internal_key(k.as_bytes()).unwrap();
        (p.kind, v.clone())
    })
}

/// The hint search as the read path runs it: newest row first, passing each row's window
/// to its previous row when that is the next row searched. Also checks that every windowed
/// search lands where a search of the whole row does.
fn hint_get(rows: &[Arc<RowReader>], u: &[u8], snap: SeqNo) -> Found {
    let seek = seek_key(u, snap);
    let mut window = None;
    let mut result = None;
    for (idx, r) in rows.iter().enumerate().rev() {
        let (i, _) = r.locate(&seek, window).unwrap();
        assert_eq!(
            i,
            r.lower_bound(&seek, 0, r.len()).unwrap(),
            "row {}",
            r.row()
        );
        if let Some((lo, hi)) = window {
            assert_eq!(i, r.lower_bound(&seek, lo, hi).unwrap());
        }
        let (found, w) = r.get(u, snap, window).unwrap();
        if result.is_none() && found.is_some() {
            result = found;
        }
        // Carry on to the oldest row (instead of stopping at the first hit) so every
        // window of the chain is exercised.
        window = (idx > 0 && r.prev_row() == rows[idx - 1].row()).then_some(w);
    }
    result
}

#[test]
fn hint_search_through_five_rows_matches_the_model() {
    for seed in 0..3 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pool = Pool::new(1024, 256);
        let specs = [
            (300, 0..400, false),
            (200, 0..400, false),
            (80, 1000..1100, false), // no overlap with its neighbours
            (150, 50..450, true),    // written without a previous row: no window into row 3
            (250, 0..1200, false),
        ];
        let (rows, _, all) = chain(&mut pool, &mut rng, &specs);
        let max_seq = all
            .keys()
            .map(|k| crate::key::seq_of(k.as_bytes()).0)
            .max()
            .unwrap();
        for q in 0..600 {
            let u = ukey(rng.gen_range(0..1300));
            let snap = if q % 3 == 0 {
                SeqNo::MAX
            } else {
                SeqNo(rng.gen_range(0..=max_seq + 1))
            };
            assert_eq!(
                hint_get(&rows, &u, snap),
                model_get(&all, &u, snap),
                "seed {seed} key {} snapshot {snap}",
                String::from_utf8_lossy(&u)
            );
        }
        // Keys below and above everything.
        assert_eq!(hint_get(&rows, b"", SeqNo::MAX), None);
        assert_eq!(hint_get(&rows, b"\xff", SeqNo::MAX), None);
    }
}

#[test]
fn sorted_lookups_galloping_from_the_previous_key_find_what_full_searches_find() {
    for seed in 0..3 {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut pool = Pool::new(1024, 256);
        let (rows, _, all) = chain(&mut pool, &mut rng, &[(400, 0..500, false)]);
        let r = &rows[0];
        let max_seq = all
            .keys()
            .map(|k| crate::key::seq_of(k.as_bytes()).0)
            .max()
            .unwrap();
        for _ in 0..20 {
            // A sorted batch of keys (duplicates, absent keys, keys past the end) at one
            // snapshot, each searched from where the previous one was found.
            let snap = SeqNo(rng.gen_range(0..=max_seq + 1));
            let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(1..60))
                .map(|_| ukey(rng.gen_range(0..600)))
                .collect();
            keys.sort();
            let mut floor = 0;
            for (i, u) in keys.iter().enumerate() {
                // Galloping and searching the rest of the row, alternately.
                let f = crate::matrix::row_table::Floor {
                    at: floor,
                    gallop: i % 2 == 0,
                };
                let (got, prev, at) = r.versions_from(u, snap, None, f).unwrap();
                let (want, want_prev, want_at) =
                    r.versions_from(u, snap, None, Default::default()).unwrap();
                assert_eq!((&got, prev, at), (&want, want_prev, want_at), "seed {seed}");
                assert_eq!(
                    got.first().cloned(),
                    model_get(&all, u, snap),
                    "seed {seed} key {}",
                    String::from_utf8_lossy(u)
                );
                assert!(at >= floor);
                floor = at;
            }
        }
    }
}

#[test]
fn duplicate_user_keys_across_rows_resolve_to_the_newest_visible_version() {
    let mut pool = Pool::new(64, 256);
    let k = |s, kind| InternalKey::new(b"k", SeqNo(s), kind);
    let r1 = pool.row(
        1,
        None,
        &Model::from([(k(1, ValueKind::Value), b"v1".to_vec())]),
    );
    let r2 = pool.row(
        2,
        Some(&r1),
        &Model::from([(k(2, ValueKind::Deletion), vec![])]),
    );
    let r3 = pool.row(
        3,
        Some(&r2),
        &Model::from([
            (k(4, ValueKind::Value), b"v4".to_vec()),
            (k(3, ValueKind::Value), b"v3".to_vec()),
        ]),
    );
    let rows = [r1, r2, r3];
    let found = |s| hint_get(&rows, b"k", SeqNo(s));
    assert_eq!(found(0), None);
    assert_eq!(found(1), Some((ValueKind::Value, b"v1".to_vec())));
    assert_eq!(found(2), Some((ValueKind::Deletion, vec![])));
    assert_eq!(found(3), Some((ValueKind::Value, b"v3".to_vec())));
    assert_eq!(found(9), Some((ValueKind::Value, b"v4".to_vec())));
    // As of snapshot 1 the seek key k@1 sorts after row 2's only entry k@2, so the window
    // for row 1 runs from fwd(0) = 0 to row 1's end: (0, 1).
    let (found, w) = rows[1].get(b"k", SeqNo(1), None).unwrap();
    assert_eq!((found, w), (None, (0, 1)));
}

#[test]
fn iterator_matches_the_model_in_both_directions() {
    let mut rng = StdRng::seed_from_u64(11);
    let mut pool = Pool::new(1024, 256);
    let mut seq = 0;
    let m = random_row(&mut rng, 400, 0..150, &mut seq, 300);
    let r = pool.row(1, None, &m);
    let want: Vec<(Vec<u8>, Vec<u8>)> = m.iter().map(|(k, v)| (k.0.clone(), v.clone())).collect();

    let mut it = r.iter();
    let mut got = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        got.push((it.key().to_vec(), it.value().to_vec()));
        it.next().unwrap();
    }
    assert_eq!(got, want);

    let mut got = Vec::new();
    it.seek_to_last().unwrap();
    while it.valid() {
        // Key only: values of half the entries are never read.
        got.push(it.key().to_vec());
        it.prev().unwrap();
    }
    got.reverse();
    assert_eq!(got, want.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>());

    for _ in 0..300 {
        let target = InternalKey::new(
            &ukey(rng.gen_range(0..160)),
            SeqNo(rng.gen_range(0..=seq + 1)),
            ValueKind::Value,
        );
        it.seek(target.as_bytes()).unwrap();
        match m.range(target.clone()..).next() {
            Some((k, v)) => {
                assert_eq!(it.key(), k.as_bytes());
                assert_eq!(it.value(), v.as_slice());
                assert_eq!(it.position(), Some(m.range(..target.clone()).count()));
            }
            None => assert!(!it.valid()),
        }
        it.seek_for_prev(target.as_bytes()).unwrap();
        match m.range(..=target.clone()).next_back() {
            Some((k, _)) => {
                assert_eq!(it.key(), k.as_bytes());
                // Step both ways from there.
                it.next().unwrap();
                match m
                    .range((
                        std::ops::Bound::Excluded(k.clone()),
                        std::ops::Bound::Unbounded,
                    ))
                    .next()
                {
                    Some((k2, _)) => assert_eq!(it.key(), k2.as_bytes()),
                    None => assert!(!it.valid()),
                }
            }
            None => assert!(!it.valid()),
        }
    }
}

/// Seeks (`for_prev`: seeks for prev) through a chain of three rows, each narrowed by the
/// window the newer row returned, and checks them against plain seeks.
fn check_windowed_seeks_through_a_chain(seed: u64, seeks: usize, for_prev: bool) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut pool = Pool::new(512, 256);
    let specs = [
        (200, 0..300, false),
        (100, 0..300, false),
        (150, 100..400, false),
    ];
    let (rows, _, _) = chain(&mut pool, &mut rng, &specs);
    let mut iters: Vec<RowIter> = rows.iter().map(|r| r.iter()).collect();
    let mut plain: Vec<RowIter> = rows.iter().map(|r| r.iter()).collect();
    // A seek never lands below its target, a seek for prev never above it.
    let wrong_side = if for_prev {
        std::cmp::Ordering::Greater
    } else {
        std::cmp::Ordering::Less
    };
    for _ in 0..seeks {
        let target = seek_key(&ukey(rng.gen_range(0..450)), SeqNo(rng.gen_range(0..500)));
        let (mut lo, mut hi) = (0, rows[2].len());
        for w in (0..3).rev() {
            let prev_window = iters[w].seek_within(&target, lo, hi, for_prev).unwrap();
            if for_prev {
                plain[w].seek_for_prev(&target).unwrap();
            } else {
                plain[w].seek(&target).unwrap();
            }
            assert_eq!(iters[w].valid(), plain[w].valid());
            assert_eq!(iters[w].key(), plain[w].key());
            if iters[w].valid() {
                assert_ne!(compare_internal(iters[w].key(), &target), wrong_side);
            }
            (lo, hi) = prev_window;
        }
    }
}

#[test]
fn seek_with_window_matches_seek_through_a_chain() {
    check_windowed_seeks_through_a_chain(5, 200, false);
}

#[test]
fn seek_for_prev_with_window_matches_seek_for_prev_through_a_chain() {
    check_windowed_seeks_through_a_chain(6, 300, true);
}

#[test]
fn a_window_that_does_not_fit_the_row_is_rejected() {
    let mut pool = Pool::new(16, 256);
    let m = Model::from([(InternalKey::new(b"a", SeqNo(1), ValueKind::Value), vec![1])]);
    let r = pool.row(1, None, &m);
    assert!(matches!(
        r.get(b"a", SeqNo::MAX, Some((0, 2))),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        r.lower_bound(b"a", 1, 0),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(r.entry(1), Err(Error::InvalidArgument(_))));
    assert!(matches!(
        r.iter().seek_within(b"a", 0, 5, false),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn long_keys_are_searched_and_returned() {
    let mut pool = Pool::new(512, 4096);
    let mut m = Model::new();
    for i in 0..20u8 {
        let mut u = vec![b'x'; 65_536];
        u.push(i);
        m.insert(
            InternalKey::new(&u, SeqNo(u64::from(i) + 1), ValueKind::Value),
            vec![i; 3],
        );
    }
    let r = pool.row(1, None, &m);
    let mut u = vec![b'x'; 65_536];
    u.push(13);
    assert_eq!(
        r.get(&u, SeqNo::MAX, None).unwrap().0,
        Some((ValueKind::Value, vec![13; 3]))
    );
    u.push(0);
    assert_eq!(r.get(&u, SeqNo::MAX, None).unwrap().0, None);
    r.verify().unwrap();
}

#[test]
fn consumed_value_pages_can_be_freed_while_the_keys_stay_searchable() {
    let mut pool = Pool::new(256, 128);
    let m = forty_values();
    let r = pool.row(1, None, &m);
    // Column compaction consumed entries [0, 25).
    let freeable = r.freeable_pages(0, 25).unwrap();
    assert!(
        freeable.start >= r.meta_pages() && !freeable.is_empty(),
        "{freeable:?}"
    );
    // The page holding the end of entry 24 also holds entry 25, so it is kept.
    let (off, len) = r.value_extent(24).unwrap();
    assert!(freeable.end as u64 * 128 <= off + len);
    let (freed_pages, released) = r.pages().with_freed(freeable.clone());
    pool.pool.free(&released);
    let r2 = r.with_pages(Arc::new(freed_pages)).unwrap();
    // Unconsumed entries read as before; keys of consumed ones too; their values are errors.
    for i in 25..40 {
        assert_eq!(r2.value(i).unwrap(), vec![i as u8; 100]);
    }
    let mut key = Vec::new();
    r2.key(3, &mut key).unwrap();
    assert_eq!(user_key(&key), ukey(3));
    let (i, _) = r2.locate(&seek_key(&ukey(3), SeqNo::MAX), None).unwrap();
    assert_eq!(i, 3);
    let err = r2.value(3).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    // The rest of the row is freeable later; the end of the row counts as a value page.
    let rest = r2.freeable_pages(25, 40).unwrap();
    assert_eq!(rest.end, r2.pages().len());
    // A reader over pages that are not the same row's is refused.
    assert!(r.with_pages(Arc::new(PageList::new(vec![1, 2]))).is_err());
    assert!(r.freeable_pages(3, 3).unwrap().is_empty());
}

#[test]
fn iterator_value_on_a_freed_page_is_reported_not_garbage() {
    let mut pool = Pool::new(64, 128);
    let m: Model = (0..10u64)
        .map(|i| {
            (
                InternalKey::new(&ukey(i), SeqNo(i + 1), ValueKind::Value),
                vec![7; 200],
            )
        })
        .collect();
    let r = pool.row(1, None, &m);
    let all = r.freeable_pages(0, 10).unwrap();
    let (freed, _) = r.pages().with_freed(all);
    let r = r.with_pages(Arc::new(freed)).unwrap();
    let mut it = r.iter();
    it.seek_to_first().unwrap();
    assert!(it.valid(), "positioning reads keys only");
    assert!(it.value_checked().is_err());
    it.seek_to_first().unwrap();
    assert_eq!(it.value(), b"");
    assert!(!it.valid());
    assert!(it.value_status().is_err());
    assert!(it.next().is_err(), "the next movement reports the failure");
}

#[test]
fn readers_are_shared_across_threads() {
    fn shareable<T: Send + Sync>() {}
    fn sendable<T: Send>() {}
    shareable::<RowReader>();
    sendable::<RowIter>();
    let mut rng = StdRng::seed_from_u64(21);
    let mut pool = Pool::new(512, 256);
    let mut seq = 0;
    let m = random_row(&mut rng, 300, 0..200, &mut seq, 50);
    let r = pool.row(1, None, &m);
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let (r, m) = (&r, &m);
            s.spawn(move || {
                for u in (t..200).step_by(4) {
                    let u = ukey(u);
                    let (found, _) = r.get(&u, SeqNo::MAX, None).unwrap();
                    assert_eq!(found, model_get(m, &u, SeqNo::MAX));
                }
            });
        }
    });
}
