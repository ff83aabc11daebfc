//! The column picker: which key range (*column*) of the matrix container's compactor the next
//! column compaction drains into L1 (MatrixKV §3.2; DESIGN.md §4 steps 1–4 and 7).
//!
//! 1. The L1 files cut the user-key space into contiguous *L1 ranges*: each file's
//!    `[smallest_user, successor(largest_user))` and the gaps between neighbours, from the empty
//!    key to the end of the key space (`successor(k) = k ++ [0]`, the smallest key above `k`).
//! 2. A column starts at the drain cursor ([`Drain::cursor`]) and takes the L1 range that
//!    contains it (clipped to start at the cursor).
//! 3. While the compactor bytes gathered are below `lower_bytes` (½·AF·S_sst) the next range
//!    joins, unless it would take the column above `upper_bytes` (AF·S_sst); the first range
//!    is always taken.
//! 4. Columns never cross the end of the key space (the cursor then restarts at the empty
//!    key, `wrapped`), nor, once wrapped, the drain's start (that part was drained already).
//!    When the cursor comes back around to the start, or nothing is left to drain, the column
//!    completes the drain and the engine drops the compactor in the same edit.
//!
//! Two refinements avoid rewriting L1 files for no L0 data: L1 ranges holding no compactor
//! bytes at the cursor are skipped (the cursor moves past them, possibly across the end of the
//! key space), and a column stops growing once the rest of its lap holds no compactor bytes.
//! With `all_to_all` a column is the whole rest of the lap (RocksDB's all-to-all L0 → L1).
//!
//! Pure: a function of the [`Version`] and the caller's byte counts. Called by the engine
//! under its state mutex (the byte counts are binary searches over the compactor's rows);
//! no state, no I/O.
#![deny(clippy::indexing_slicing)]

use std::sync::Arc;

use crate::version::{ColumnDone, FileMeta, Version};

/// The caller's count of compactor bytes with user keys in `[lo, hi)` (`hi = None`: to the end
/// of the key space); see [`pick_column`].
pub type BytesIn<'a> = dyn FnMut(&[u8], Option<&[u8]>) -> u64 + 'a;

/// Size bounds of a column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnConfig {
    /// A column grows while it gathers fewer compactor bytes than this (½·AF·S_sst).
    pub lower_bytes: u64,
    /// A column does not grow past this many compactor bytes (AF·S_sst), except that its
    /// first L1 range is always taken.
    pub upper_bytes: u64,
    /// One column is the whole rest of the key space (RocksDB's all-to-all L0 → L1).
    pub all_to_all: bool,
}

/// One column compaction to run: the compactor's entries with user keys in `[lower, upper)`
/// merged with the L1 files `l1`.
#[derive(Debug, Clone)]
pub struct Column {
    /// Smallest user key of the column (inclusive).
    pub lower: Vec<u8>,
    /// End of the column (exclusive user key); `None` = the end of the key space.
    pub upper: Option<Vec<u8>>,
    /// The L1 files inside `[lower, upper)`, whole, in key order.
    pub l1: Vec<Arc<FileMeta>>,
    /// Compactor bytes in the column (as counted by the caller's `bytes_in`).
    pub l0_bytes: u64,
    /// The column ends the drain: the edit that records it also drops the compactor.
    pub completes_drain: bool,
    /// The drain cursor after the column.
    pub next_cursor: Vec<u8>,
    /// The drain's `wrapped` flag after the column.
    pub next_wrapped: bool,
}

impl Column {
    /// A column with nothing to merge that only moves the cursor and completes the drain
    /// (nothing is left in the compactor).
    fn finish_drain(at: Vec<u8>, wrapped: bool) -> Column {
        Column {
            lower: at.clone(),
            upper: Some(at.clone()),
            l1: Vec::new(),
            l0_bytes: 0,
            completes_drain: true,
            next_cursor: at,
            next_wrapped: wrapped,
        }
    }

    /// True if the column has nothing to merge (no compactor bytes, no L1 file): the engine
    /// records it (cursor, drop) without running a merge.
    pub fn is_empty(&self) -> bool {
        self.l0_bytes == 0 && self.l1.is_empty()
    }

    #[cfg(test)]
    /// True if `user_key` lies in `[lower, upper)`.
    pub fn contains(&self, user_key: &[u8]) -> bool {
        self.lower.as_slice() <= user_key && self.upper.as_deref().is_none_or(|u| user_key < u)
    }

    /// The edit field recording this column once its output is written: the new cursor and
    /// the compactor pages it emptied, `(row, first logical page, count)`. Set the edit's
    /// `drop_compactor` to [`Column::completes_drain`].
    pub fn done(&self, freed: Vec<(u64, u32, u32)>) -> ColumnDone {
        ColumnDone {
            cursor: self.next_cursor.clone(),
            wrapped: self.next_wrapped,
            freed,
        }
    }
}

/// The smallest user key above `k`.
fn successor(k: &[u8]) -> Vec<u8> {
    let mut s = Vec::with_capacity(k.len() + 1);
    s.extend_from_slice(k);
    s.push(0);
    s
}

/// The end of the L1 range that contains `lower` (clipped to start there), itself clipped to
/// `limit`; `None` = the end of the key space. With `all_to_all` the range runs to `limit`.
/// The result is above `lower` whenever `lower < limit`.
fn range_end(
    files: &[Arc<FileMeta>],
    lower: &[u8],
    limit: Option<&[u8]>,
    all_to_all: bool,
) -> Option<Vec<u8>> {
    let end = if all_to_all {
        None
    } else {
        // The first file not wholly below `lower`: successor(largest) > lower iff largest ≥
        // lower. Before its smallest key lies a gap; otherwise `lower` is inside the file.
        let i = files.partition_point(|f| f.largest_user() < lower);
        files.get(i).map(|f| {
            if f.smallest_user() > lower {
                f.smallest_user().to_vec()
            } else {
                successor(f.largest_user())
            }
        })
    };
    match (end, limit) {
        (Some(e), Some(l)) if e.as_slice() > l => Some(l.to_vec()),
        (None, Some(l)) => Some(l.to_vec()),
        (end, _) => end,
    }
}

/// Compactor bytes the drain has not consumed, from position (`at`, `wrapped`) to the end of
/// the drain.
fn rest_of_drain(start: &[u8], wrapped: bool, at: &[u8], bytes_in: &mut BytesIn<'_>) -> u64 {
    if wrapped {
        if at < start {
            bytes_in(at, Some(start))
        } else {
            0
        }
    } else {
        let head = if start.is_empty() {
            0
        } else {
            bytes_in(b"", Some(start))
        };
        bytes_in(at, None).saturating_add(head)
    }
}

/// Picks the next column of the compactor, or `None` if there is no compactor.
///
/// `bytes_in(lo, hi)` returns the compactor's bytes with user keys in `[lo, hi)` (`hi = None`:
/// to the end of the key space). It must be additive over adjacent ranges and return more
/// than 0 whenever any compactor entry lies in the range: a drain is completed (and the
/// compactor dropped) when the rest of it counts 0 bytes.
///
/// # Why a column covers whole L1 files
///
/// No L1 file *straddles* a column boundary (holds keys on both sides of it). A boundary is
/// one of:
/// - an L1 range end: a file's smallest key `s`, or `successor(l)` of its largest key `l`.
///   L1 files are user-key disjoint, so every other file lies wholly below `s` or wholly
///   above `l`, and "above `l`" means at or above `successor(l)`;
/// - the empty key or the end of the key space, which nothing straddles;
/// - the drain cursor or the drain start. Each is the upper bound of an earlier column (or
///   the empty key at creation), chosen when no file straddled it. Since then L1 only gained
///   the outputs of later columns, which hold only keys of their own column (compactor
///   entries in the column plus the whole L1 files in it), and such columns lie in the
///   drained range between the start and the cursor, never across either. Leveled
///   compaction only removes L1 files.
///
/// So the L1 files overlapping `[lower, upper)` lie wholly inside it; all versions of a user
/// key fall in one column because boundaries are user keys. (If L1 were ever built another
/// way, or the engine set the global cursor to an arbitrary key, a straddling file is still
/// taken whole; merging it is correct, since keys it holds outside the column are only
/// rewritten: their compactor entries, if any, stay newer in L0.)
pub fn pick_column(v: &Version, cfg: &ColumnConfig, bytes_in: &mut BytesIn<'_>) -> Option<Column> {
    let container = v.container();
    let drain = container.drain.as_ref()?;
    if container.compactor.is_empty() {
        return None;
    }
    let files = v.files(1);
    let start = drain.start.as_slice();
    let mut wrapped = drain.wrapped;
    let mut lower = drain.cursor.clone();
    if rest_of_drain(start, wrapped, &lower, bytes_in) == 0 {
        return Some(Column::finish_drain(lower, wrapped));
    }

    // Skip L1 ranges without compactor bytes: merging them would only rewrite L1 files.
    let (mut upper, mut l0_bytes) = loop {
        let limit = wrapped.then_some(start);
        if limit.is_some_and(|l| lower.as_slice() >= l) {
            // Around the whole circle and every range was empty.
            return Some(Column::finish_drain(lower, wrapped));
        }
        let end = range_end(files, &lower, limit, cfg.all_to_all);
        let b = bytes_in(&lower, end.as_deref());
        if b > 0 {
            break (end, b);
        }
        match end {
            Some(e) => lower = e,
            None => {
                lower = Vec::new();
                wrapped = true;
            }
        }
    };

    // Grow towards the lower bound, never past the upper bound, the lap's limit, or the lap's
    // last compactor byte.
    let limit = wrapped.then_some(start);
    let lap_bytes = bytes_in(&lower, limit);
    while l0_bytes < cfg.lower_bytes && l0_bytes < lap_bytes {
        let Some(u) = upper.as_deref() else { break };
        if limit.is_some_and(|l| u >= l) {
            break;
        }
        let next = range_end(files, u, limit, cfg.all_to_all);
        let add = bytes_in(u, next.as_deref());
        if l0_bytes.saturating_add(add) > cfg.upper_bytes {
            break;
        }
        upper = next;
        l0_bytes = l0_bytes.saturating_add(add);
    }

    let (next_cursor, next_wrapped) = match &upper {
        Some(u) => (u.clone(), wrapped),
        None => (Vec::new(), true),
    };
    let completes_drain = (next_wrapped && next_cursor.as_slice() >= start)
        || rest_of_drain(start, next_wrapped, &next_cursor, bytes_in) == 0;
    let first = files.partition_point(|f| f.largest_user() < lower.as_slice());
    let l1 = files
        .get(first..)
        .unwrap_or(&[])
        .iter()
        .take_while(|f| upper.as_deref().is_none_or(|u| f.smallest_user() < u))
        .cloned()
        .collect();
    Some(Column {
        lower,
        upper,
        l1,
        l0_bytes,
        completes_drain,
        next_cursor,
        next_wrapped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use crate::matrix::meta::{PageList, RowMeta};
    use crate::version::testutil::{file, version};
    use crate::version::{Drain, VersionEdit};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// A compactor row covering `[lo, hi]` on pages `10·n .. 10·n + 3`.
    fn row(n: u64, lo: &[u8], hi: &[u8]) -> RowMeta {
        let p = u32::try_from(n * 10).unwrap();
        RowMeta {
            row: n,
            prev_row: n - 1,
            pages: Arc::new(PageList::new(vec![p, p + 1, p + 2])),
            entries: 3,
            bytes: 3000,
            smallest: make_internal_key(lo, SeqNo(n), ValueKind::Value),
            largest: make_internal_key(hi, SeqNo(n), ValueKind::Value),
            smallest_seq: SeqNo(n),
            largest_seq: SeqNo(n),
        }
    }

    /// The version of `l1` (test text form) with one compactor row and the given drain.
    fn drained(l1: &str, start: &str, cursor: &str, wrapped: bool) -> Version {
        let v = version(l1);
        let e = VersionEdit {
            compactor_rows: vec![row(1, b"a", b"z")],
            drain: Some(Drain {
                start: start.into(),
                cursor: cursor.into(),
                wrapped,
            }),
            ..VersionEdit::default()
        };
        v.apply(&e).unwrap()
    }

    /// Compactor bytes per user key; `bytes_in` sums a key range.
    struct Data(BTreeMap<Vec<u8>, u64>);

    impl Data {
        fn new(sizes: &[(&str, u64)]) -> Data {
            Data(
                sizes
                    .iter()
                    .map(|(k, n)| (k.as_bytes().to_vec(), *n))
                    .collect(),
            )
        }

        fn bytes_in(&self, lo: &[u8], hi: Option<&[u8]>) -> u64 {
            match hi {
                Some(h) if h <= lo => 0,
                Some(h) => self.0.range(lo.to_vec()..h.to_vec()).map(|(_, n)| n).sum(),
                None => self.0.range(lo.to_vec()..).map(|(_, n)| n).sum(),
            }
        }
    }

    fn pick(v: &Version, cfg: &ColumnConfig, data: &Data) -> Option<Column> {
        pick_column(v, cfg, &mut |lo, hi| data.bytes_in(lo, hi))
    }

    fn cfg(lower: u64, upper: u64) -> ColumnConfig {
        ColumnConfig {
            lower_bytes: lower,
            upper_bytes: upper,
            all_to_all: false,
        }
    }

    fn numbers(c: &Column) -> Vec<u64> {
        c.l1.iter().map(|f| f.number.0).collect()
    }

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    /// `s` followed by a zero byte: the successor of `s`.
    fn succ(s: &str) -> Vec<u8> {
        successor(s.as_bytes())
    }

    const L1: &str = "L1: 1:a-c 2:e-g 3:i-k";

    #[test]
    fn column_extends_by_l1_ranges_until_the_lower_bound() {
        let v = drained(L1, "", "", false);
        let data = Data::new(&[("b", 10), ("f", 10), ("j", 10), ("x", 10)]);
        let c = pick(&v, &cfg(25, 100), &data).unwrap();
        // ["", a) holds nothing and is skipped; [a, c\0) has 10, the gap nothing, [e, g\0)
        // brings 20, the next gap nothing, [i, k\0) reaches 30 ≥ 25.
        assert_eq!(c.lower, k("a"));
        assert_eq!(c.upper, Some(succ("k")));
        assert_eq!(numbers(&c), vec![1, 2, 3]);
        assert_eq!(c.l0_bytes, 30);
        assert_eq!((c.next_cursor.clone(), c.next_wrapped), (succ("k"), false));
        assert!(!c.completes_drain, "x is still to drain");
        assert!(c.contains(b"a") && c.contains(b"k") && !c.contains(b"k\x00"));
        assert!(!c.contains(b"\xff") && !c.contains(b""));
    }

    #[test]
    fn column_stops_before_exceeding_the_upper_bound() {
        let v = drained(L1, "", "", false);
        let data = Data::new(&[("b", 10), ("f", 50), ("j", 50)]);
        let c = pick(&v, &cfg(100, 70), &data).unwrap();
        // 10 + 50 = 60 ≤ 70, the empty gap joins too, [i, k\0) would make 110 > 70.
        assert_eq!((c.lower.clone(), c.upper.clone()), (k("a"), Some(k("i"))));
        assert_eq!(numbers(&c), vec![1, 2]);
        assert_eq!(c.l0_bytes, 60);
        assert!(!c.completes_drain);
    }

    #[test]
    fn first_range_is_taken_even_above_the_upper_bound() {
        let v = drained(L1, "", "", false);
        let data = Data::new(&[("f", 500), ("j", 1)]);
        let c = pick(&v, &cfg(100, 70), &data).unwrap();
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (k("e"), Some(succ("g")))
        );
        assert_eq!(numbers(&c), vec![2]);
        assert_eq!(c.l0_bytes, 500);
    }

    #[test]
    fn a_gap_between_l1_files_is_a_column_without_l1_files() {
        let v = drained("L1: 1:a-c 2:x-z", "", "", false);
        let data = Data::new(&[("m", 50), ("y", 50)]);
        let c = pick(&v, &cfg(40, 80), &data).unwrap();
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (succ("c"), Some(k("x")))
        );
        assert!(c.l1.is_empty());
        assert_eq!(c.l0_bytes, 50);
    }

    #[test]
    fn empty_l1_is_one_range_over_the_whole_key_space() {
        let v = drained("", "", "", false);
        let data = Data::new(&[("a", 1), ("m", 1)]);
        let c = pick(&v, &cfg(100, 200), &data).unwrap();
        assert_eq!((c.lower.clone(), c.upper.clone()), (k(""), None));
        assert!(c.l1.is_empty());
        assert_eq!((c.next_cursor.clone(), c.next_wrapped), (k(""), true));
        assert!(c.completes_drain, "the cursor came back to the start");
    }

    #[test]
    fn growth_stops_when_the_rest_of_the_lap_is_empty() {
        let v = drained(L1, "", "", false);
        let data = Data::new(&[("b", 10)]);
        let c = pick(&v, &cfg(100, 200), &data).unwrap();
        // Extending into [e, ...) would only rewrite L1 files 2 and 3.
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (k("a"), Some(succ("c")))
        );
        assert_eq!(numbers(&c), vec![1]);
        assert!(c.completes_drain, "nothing is left after c");
    }

    #[test]
    fn drain_wraps_around_and_never_passes_its_start() {
        let l1 = "L1: 1:a-c 2:n-p 3:x-z";
        let data = Data::new(&[("b", 10), ("o", 10), ("y", 10)]);
        let v = drained(l1, "m", "m", false);
        let c = pick(&v, &cfg(15, 100), &data).unwrap();
        // [m, n) is empty and skipped.
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (k("n"), Some(succ("z")))
        );
        assert_eq!(numbers(&c), vec![2, 3]);
        assert_eq!((c.next_cursor.clone(), c.next_wrapped), (succ("z"), false));
        assert!(!c.completes_drain, "b is before the start");

        let mut e = VersionEdit {
            column: Some(c.done(vec![])),
            ..VersionEdit::default()
        };
        let v = v.apply(&e).unwrap();
        let c = pick(&v, &cfg(15, 100), &data).unwrap();
        // [z\0, end) is empty: the cursor wraps to "" and ["", a) is skipped too. [a, c\0)
        // holds the last 10 bytes before the start (m), so the column stops there although
        // it is below the lower bound: the gap after c would only add nothing.
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (k("a"), Some(succ("c")))
        );
        assert_eq!(numbers(&c), vec![1]);
        assert_eq!((c.next_cursor.clone(), c.next_wrapped), (succ("c"), true));
        assert!(c.completes_drain, "nothing is left before the start");

        e.column = Some(c.done(vec![]));
        e.drop_compactor = c.completes_drain;
        let v = v.apply(&e).unwrap();
        assert!(v.container().compactor.is_empty());
        assert_eq!(
            v.container().cursor,
            succ("c"),
            "the next compactor starts where this one ended"
        );
        assert!(pick(&v, &cfg(15, 100), &data).is_none());
    }

    #[test]
    fn wrapped_column_is_clipped_at_the_start_inside_a_gap() {
        // Drain began at "f" (between files 1 and 2); after the wrap the column may take
        // [a, c\0) and the gap up to f, not up to file 2's smallest key.
        let v = drained("L1: 1:a-c 2:m-p", "f", "", true);
        let data = Data::new(&[("b", 1), ("d", 1), ("g", 100)]);
        let c = pick(&v, &cfg(50, 100), &data).unwrap();
        assert_eq!((c.lower.clone(), c.upper.clone()), (k("a"), Some(k("f"))));
        assert_eq!(
            c.l0_bytes, 2,
            "g lies beyond the start and was drained already"
        );
        assert!(c.completes_drain);
    }

    #[test]
    fn completed_drain_without_data_is_an_empty_column() {
        let v = drained(L1, "m", "q", false);
        // Only keys in the drained range [m, q) have bytes.
        let data = Data::new(&[("n", 10)]);
        let c = pick(&v, &cfg(1, 100), &data).unwrap();
        assert!(c.is_empty());
        assert!(c.completes_drain);
        assert_eq!((c.next_cursor.clone(), c.next_wrapped), (k("q"), false));
        let e = VersionEdit {
            column: Some(c.done(vec![])),
            drop_compactor: true,
            ..VersionEdit::default()
        };
        assert_eq!(v.apply(&e).unwrap().container().cursor, k("q"));
    }

    #[test]
    fn all_to_all_takes_the_rest_of_each_lap() {
        let data = Data::new(&[("b", 10), ("o", 10)]);
        let all = ColumnConfig {
            lower_bytes: 1,
            upper_bytes: 1,
            all_to_all: true,
        };
        let v = drained(L1, "", "", false);
        let c = pick(&v, &all, &data).unwrap();
        assert_eq!((c.lower.clone(), c.upper.clone()), (k(""), None));
        assert_eq!(numbers(&c), vec![1, 2, 3]);
        assert_eq!(c.l0_bytes, 20);
        assert!(c.completes_drain);

        // A drain that began mid-way takes two columns: to the end, then up to the start.
        let v = drained(L1, "f", "f", false);
        let c = pick(&v, &all, &data).unwrap();
        assert_eq!((c.lower.clone(), c.upper.clone()), (k("f"), None));
        assert_eq!(
            numbers(&c),
            vec![2, 3],
            "file 2 straddles f and is taken whole"
        );
        assert!(!c.completes_drain);
        let v = v
            .apply(&VersionEdit {
                column: Some(c.done(vec![])),
                ..VersionEdit::default()
            })
            .unwrap();
        let c = pick(&v, &all, &data).unwrap();
        assert_eq!((c.lower.clone(), c.upper.clone()), (k(""), Some(k("f"))));
        assert_eq!(numbers(&c), vec![1, 2]);
        assert!(c.completes_drain);
    }

    #[test]
    fn no_compactor_means_no_column() {
        let data = Data::new(&[("b", 10)]);
        assert!(pick(&version(L1), &cfg(1, 100), &data).is_none());
        let mut e = VersionEdit::default();
        e.new_rows.push(row(1, b"a", b"b"));
        let v = version(L1).apply(&e).unwrap();
        assert!(
            pick(&v, &cfg(1, 100), &data).is_none(),
            "rows only in the receiver"
        );
    }

    #[test]
    fn l1_range_boundaries_are_successors_of_largest_keys() {
        // Files "a".."a" and "a\0".."b": the range of file 1 ends exactly where file 2
        // starts, so no gap range lies between them.
        let v = drained("L1: 1:a-a 2:a\x00-b", "", "", false);
        let data = Data::new(&[("a", 10), ("a\x00", 10)]);
        let c = pick(&v, &cfg(5, 15), &data).unwrap();
        assert_eq!(
            (c.lower.clone(), c.upper.clone()),
            (k("a"), Some(succ("a")))
        );
        assert_eq!(numbers(&c), vec![1]);
    }

    /// A sorted, user-key-disjoint L1 from distinct keys: consecutive keys are joined into
    /// one file where `join` says so.
    fn build_l1(keys: &[Vec<u8>], join: &[bool]) -> Vec<FileMeta> {
        let mut files = Vec::new();
        let mut i = 0;
        while i < keys.len() {
            let lo = &keys[i];
            let mut j = i;
            if join.get(i).copied().unwrap_or(false) && i + 1 < keys.len() {
                j = i + 1;
            }
            let n = files.len() as u64 + 1;
            let mut f = file(&format!("{n}:x-x"));
            f.smallest = make_internal_key(lo, SeqNo(1), ValueKind::Value);
            f.largest = make_internal_key(&keys[j], SeqNo(1), ValueKind::Value);
            files.push(f);
            i = j + 1;
        }
        files
    }

    fn arb_key() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(
            prop_oneof![Just(0u8), Just(1), Just(b'a'), Just(b'b')],
            0..4,
        )
    }

    /// Drains a compactor holding `data` column by column, the way the engine does, merging
    /// each column into L1 (the outputs replace the column's L1 files) and, where `moves`
    /// says so, removing an L1 file between columns (as leveled compaction does);
    /// checks every column and returns the final version.
    fn drain_fully(
        mut v: Version,
        data: &Data,
        cfg: &ColumnConfig,
        next_file: &mut u64,
        moves: &[usize],
    ) -> Version {
        let d0 = v.container().drain.clone().unwrap();
        let mut drained: BTreeMap<Vec<u8>, u32> = BTreeMap::new();
        for step in 0..10_000 {
            if let Some(&m) = moves.get(step % moves.len().max(1))
                && m % 3 == 0
                && v.num_files(1) > 0
            {
                // Only L1's shape matters here: the file leaves L1 (L2 is not modelled).
                let mut e = VersionEdit::default();
                e.delete_file(1, v.files(1)[m % v.num_files(1)].number);
                v = v.apply(&e).unwrap();
            }
            let d = v.container().drain.clone().unwrap();
            let c = pick(&v, cfg, data).unwrap();
            // The column lies in the undrained part of the circle.
            if !c.is_empty() {
                assert!(!d.consumed(&c.lower), "{c:?} starts in drained keys");
                if let Some(u) = &c.upper {
                    assert!(c.lower < *u);
                    if c.next_wrapped {
                        assert!(*u <= d0.start);
                    }
                }
            }
            assert_eq!(c.l0_bytes, data.bytes_in(&c.lower, c.upper.as_deref()));
            // Above the upper bound only as a single L1 range.
            let lap_limit = match (&c.upper, c.next_wrapped) {
                (Some(_), true) => Some(d0.start.as_slice()),
                _ => None,
            };
            assert!(
                c.l0_bytes <= cfg.upper_bytes
                    || c.upper == range_end(v.files(1), &c.lower, lap_limit, cfg.all_to_all),
                "{c:?} exceeds the upper bound with more than one range"
            );
            // Whole files: a file overlapping the column is taken and lies inside it.
            for f in v.files(1) {
                let overlaps = f.largest_user() >= c.lower.as_slice()
                    && c.upper.as_deref().is_none_or(|u| f.smallest_user() < u);
                let taken = c.l1.iter().any(|g| g.number == f.number);
                assert_eq!(overlaps, taken, "file {f:?} vs column {c:?}");
                if taken {
                    assert!(
                        c.contains(f.smallest_user()) && c.contains(f.largest_user()),
                        "file {f:?} straddles column {c:?}"
                    );
                }
            }
            for (key, _) in data.0.iter().filter(|(key, _)| c.contains(key)) {
                *drained.entry(key.clone()).or_default() += 1;
            }
            // Merge: replace the column's L1 files by one spanning them and the column's data.
            let mut e = VersionEdit {
                column: Some(c.done(vec![])),
                drop_compactor: c.completes_drain,
                ..VersionEdit::default()
            };
            let mut keys: Vec<Vec<u8>> = data
                .0
                .keys()
                .filter(|key| c.contains(key))
                .cloned()
                .collect();
            for f in &c.l1 {
                e.delete_file(1, f.number);
                keys.push(f.smallest_user().to_vec());
                keys.push(f.largest_user().to_vec());
            }
            if let (Some(lo), Some(hi)) = (keys.iter().min(), keys.iter().max()) {
                let mut f = file(&format!("{}:x-x", *next_file));
                *next_file += 1;
                f.smallest = make_internal_key(lo, SeqNo(1), ValueKind::Value);
                f.largest = make_internal_key(hi, SeqNo(1), ValueKind::Value);
                e.add_file(1, f);
            }
            v = v.apply(&e).unwrap();
            v.check_invariants().unwrap();
            if c.completes_drain {
                // Every key of the compactor was drained exactly once.
                for key in data.0.keys() {
                    assert_eq!(drained.get(key), Some(&1), "key {key:?}");
                }
                return v;
            }
        }
        panic!("drain did not complete");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        #[test]
        fn random_drains_cover_every_key_once_and_keep_l1_files_whole(
            l1_keys in proptest::collection::btree_set(arb_key(), 0..12),
            join in proptest::collection::vec(any::<bool>(), 12),
            drains in proptest::collection::vec(
                proptest::collection::btree_map(arb_key(), 1u64..50, 1..10), 1..4),
            lower in 1u64..100,
            extra in 0u64..100,
            all_to_all in any::<bool>(),
            moves in proptest::collection::vec(0usize..64, 0..8),
        ) {
            let keys: Vec<Vec<u8>> = l1_keys.into_iter().collect();
            let mut e = VersionEdit::default();
            for f in build_l1(&keys, &join) {
                e.add_file(1, f);
            }
            let mut v = Version::default().apply(&e).unwrap();
            let cfg = ColumnConfig { lower_bytes: lower, upper_bytes: lower + extra, all_to_all };
            let mut next_file = 1000;
            for (i, sizes) in drains.into_iter().enumerate() {
                let n = i as u64 + 1;
                let switch = VersionEdit {
                    new_rows: vec![row(n, b"a", b"b")],
                    switch_roles: true,
                    ..VersionEdit::default()
                };
                v = v.apply(&switch).unwrap();
                let start = v.container().cursor.clone();
                prop_assert_eq!(&v.container().drain.as_ref().unwrap().start, &start);
                v = drain_fully(v, &Data(sizes), &cfg, &mut next_file, &moves);
                prop_assert!(v.container().compactor.is_empty());
            }
        }
    }
}
