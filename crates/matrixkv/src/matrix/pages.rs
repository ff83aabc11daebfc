//! The page pool of the matrix container: which fixed-size pages of the fast-tier region are
//! free. RowTables are written into pages taken from it, and column compaction returns the
//! pages it emptied.
//!
//! The pool is pure DRAM bookkeeping, no I/O. The manifest is the single source of truth for
//! which pages are live: at open, [`PagePool::rebuild`] derives the pool from the page lists of
//! the rows the manifest records, and rejects a page claimed twice.
//!
//! Free space is a map of maximal runs `start -> length`; adjacent runs are always coalesced,
//! so two pools with the same free pages are equal (`==`), whatever history led to them.
//!
//! Thread safety: plain data; the owner serialises access (the database keeps the pool under
//! its state mutex).
#![deny(clippy::indexing_slicing)]

use std::collections::BTreeMap;

use crate::error::CorruptionReason;

/// Free-page bookkeeping of one region of `total_pages` pages of `page_bytes` bytes each.
/// Physical page `p` occupies region bytes `[p * page_bytes, (p + 1) * page_bytes)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PagePool {
    total: u32,
    page_bytes: usize,
    /// Maximal free runs: start page -> number of pages (never 0). No two runs touch.
    runs: BTreeMap<u32, u32>,
    /// Sum of the run lengths.
    free: u32,
}

impl PagePool {
    #[cfg(test)]
    /// A pool of `total_pages` pages, all free.
    pub fn new(total_pages: u32, page_bytes: usize) -> PagePool {
        let mut runs = BTreeMap::new();
        if total_pages > 0 {
            runs.insert(0, total_pages);
        }
        PagePool {
            total: total_pages,
            page_bytes,
            runs,
            free: total_pages,
        }
    }

    /// The pool in which exactly the pages `used` are allocated (the live pages of every row
    /// the manifest records). A page listed twice, or not below `total_pages`, is corruption:
    /// two rows would share storage.
    pub fn rebuild(
        total_pages: u32,
        page_bytes: usize,
        used: impl IntoIterator<Item = u32>,
    ) -> Result<PagePool, CorruptionReason> {
        let mut bits = vec![0u64; (total_pages as usize).div_ceil(64)];
        let mut used_count = 0u32;
        for p in used {
            if p >= total_pages {
                return Err(CorruptionReason::Invalid(
                    "a row uses a page beyond the end of the page pool",
                ));
            }
            let word = bits
                .get_mut(p as usize / 64)
                .ok_or(CorruptionReason::BadLength)?;
            let bit = 1u64 << (p % 64);
            if *word & bit != 0 {
                return Err(CorruptionReason::Invalid(
                    "two rows (or one row twice) use the same page",
                ));
            }
            *word |= bit;
            used_count += 1;
        }
        let mut runs = BTreeMap::new();
        let mut p = 0u32;
        while p < total_pages {
            if is_set(&bits, p) {
                p += 1;
                continue;
            }
            let start = p;
            while p < total_pages && !is_set(&bits, p) {
                p += 1;
            }
            runs.insert(start, p - start);
        }
        Ok(PagePool {
            total: total_pages,
            page_bytes,
            runs,
            free: total_pages - used_count,
        })
    }

    /// Takes `n` free pages, or returns `None` (taking nothing) if fewer than `n` are free:
    /// the pool never hands out more than its budget.
    ///
    /// Prefers one contiguous run (the first free run that is long enough, by address);
    /// otherwise it takes the longest runs first, so the row spans as few runs as possible.
    /// The pages are returned in increasing address order; the caller uses that order as the
    /// row's logical page order.
    pub fn allocate(&mut self, n: usize) -> Option<Vec<u32>> {
        if n == 0 {
            return Some(Vec::new());
        }
        let n = u32::try_from(n).ok().filter(|&n| n <= self.free)?;
        if let Some((&start, &len)) = self.runs.iter().find(|&(_, &len)| len >= n) {
            self.take(start, len, n);
            return Some((start..start + n).collect());
        }
        // No single run is long enough: every run is shorter than `n`, so all but the last
        // chosen run are taken whole.
        let mut by_len: Vec<(u32, u32)> = self.runs.iter().map(|(&s, &l)| (s, l)).collect();
        by_len.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut need = n;
        let mut picked = Vec::new();
        for (start, len) in by_len {
            let k = len.min(need);
            picked.push((start, len, k));
            need -= k;
            if need == 0 {
                break;
            }
        }
        picked.sort_unstable();
        let mut pages = Vec::with_capacity(n as usize);
        for (start, len, k) in picked {
            self.take(start, len, k);
            pages.extend(start..start + k);
        }
        Some(pages)
    }

    /// Returns `pages` to the pool. Each page must be allocated, and listed once; a page that
    /// is not (an engine bug) is skipped with an error log, and panics in debug builds, so
    /// the accounting never goes wrong.
    pub fn free(&mut self, pages: &[u32]) {
        let mut sorted = pages.to_vec();
        sorted.sort_unstable();
        let mut i = 0;
        while let Some(&start) = sorted.get(i) {
            let mut len = 1u32;
            while sorted.get(i + len as usize) == Some(&(start.wrapping_add(len))) {
                len += 1;
            }
            i += len as usize;
            if self.is_allocated_run(start, len) {
                self.insert_run(start, len);
            } else {
                // Some page of the run is bad: fall back to page by page.
                for p in start..start.saturating_add(len) {
                    if self.is_allocated_run(p, 1) {
                        self.insert_run(p, 1);
                    } else {
                        log::error!(
                            "page pool: page {p} freed but not allocated (pool of {} pages)",
                            self.total
                        );
                        if cfg!(debug_assertions) {
                            panic!("page {p} freed but not allocated");
                        }
                    }
                }
            }
        }
    }

    #[cfg(test)]
    /// Number of free pages.
    pub fn free_pages(&self) -> usize {
        self.free as usize
    }

    /// Number of allocated pages.
    pub fn used_pages(&self) -> usize {
        (self.total - self.free) as usize
    }

    /// Number of pages the pool manages.
    pub fn total_pages(&self) -> usize {
        self.total as usize
    }

    /// Bytes per page.
    pub fn page_bytes(&self) -> usize {
        self.page_bytes
    }

    #[cfg(test)]
    /// Length of the longest free run, in pages (0 when full): the largest row that can be
    /// written without spanning several runs.
    pub fn largest_free_run(&self) -> usize {
        self.runs.values().copied().max().unwrap_or(0) as usize
    }

    #[cfg(test)]
    /// Number of free runs: a measure of fragmentation.
    pub fn free_runs(&self) -> usize {
        self.runs.len()
    }

    #[cfg(any(test, feature = "testing"))]
    /// True if page `p` is allocated (below the total and in no free run).
    pub fn is_allocated(&self, p: u32) -> bool {
        self.is_allocated_run(p, 1)
    }

    /// True if every page of `[start, start + len)` exists and is allocated.
    fn is_allocated_run(&self, start: u32, len: u32) -> bool {
        let Some(end) = start.checked_add(len) else {
            return false;
        };
        if end > self.total {
            return false;
        }
        // The last free run starting before `end` is the only one that can overlap.
        match self.runs.range(..end).next_back() {
            Some((&s, &l)) => s + l <= start,
            None => true,
        }
    }

    /// Removes the first `k` pages of the free run `(start, len)`.
    fn take(&mut self, start: u32, len: u32, k: u32) {
        self.runs.remove(&start);
        if k < len {
            self.runs.insert(start + k, len - k);
        }
        self.free -= k;
    }

    /// Adds the allocated run `[start, start + len)` to the free runs, coalescing neighbours.
    fn insert_run(&mut self, start: u32, len: u32) {
        let mut s = start;
        let mut l = len;
        if let Some((&ps, &pl)) = self.runs.range(..start).next_back()
            && ps + pl == start
        {
            self.runs.remove(&ps);
            s = ps;
            l += pl;
        }
        if let Some(nl) = self.runs.remove(&(start + len)) {
            l += nl;
        }
        self.runs.insert(s, l);
        self.free += len;
    }
}

fn is_set(bits: &[u64], p: u32) -> bool {
    bits.get(p as usize / 64)
        .is_some_and(|w| w & (1u64 << (p % 64)) != 0)
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn one_contiguous_run_is_preferred() {
        let mut pool = PagePool::new(16, 4096);
        assert_eq!(pool.allocate(4), Some(vec![0, 1, 2, 3]));
        assert_eq!(pool.allocate(2), Some(vec![4, 5]));
        pool.free(&[0, 1, 2, 3]);
        // First fit: the hole at 0..4 is long enough for 3 pages.
        assert_eq!(pool.allocate(3), Some(vec![0, 1, 2]));
        // 5 pages do not fit the 1-page hole at 3, so they come from 6..11.
        assert_eq!(pool.allocate(5), Some(vec![6, 7, 8, 9, 10]));
        assert_eq!(pool.used_pages(), 10);
        assert_eq!(pool.free_pages(), 6);
    }

    #[test]
    fn fragmented_free_space_is_used_longest_runs_first() {
        let mut pool = PagePool::new(10, 64);
        let all = pool.allocate(10).unwrap();
        assert_eq!(all, (0..10).collect::<Vec<_>>());
        pool.free(&[0, 3, 4, 5, 8, 9]);
        assert_eq!(pool.free_runs(), 3);
        assert_eq!(pool.largest_free_run(), 3);
        // 5 pages: the 3-run at 3, then the 2-run at 8, returned in address order.
        assert_eq!(pool.allocate(5), Some(vec![3, 4, 5, 8, 9]));
        assert_eq!(pool.allocate(1), Some(vec![0]));
        assert_eq!(pool.allocate(1), None);
    }

    #[test]
    fn allocation_never_exceeds_the_budget() {
        let mut pool = PagePool::new(8, 64);
        assert_eq!(pool.allocate(9), None);
        assert_eq!(pool.free_pages(), 8, "a failed allocation takes nothing");
        assert!(pool.allocate(8).is_some());
        assert_eq!(pool.allocate(1), None);
        assert_eq!(pool.allocate(0), Some(Vec::new()));
        assert_eq!(PagePool::new(0, 64).allocate(1), None);
        assert_eq!(pool.allocate(usize::MAX), None);
    }

    #[test]
    fn freed_neighbours_coalesce_into_one_run() {
        let mut pool = PagePool::new(12, 64);
        let a = pool.allocate(4).unwrap();
        let b = pool.allocate(4).unwrap();
        let c = pool.allocate(4).unwrap();
        pool.free(&a);
        pool.free(&c);
        assert_eq!(pool.free_runs(), 2);
        pool.free(&b);
        assert_eq!(pool, PagePool::new(12, 64));
        // Freed out of order and unsorted.
        let all = pool.allocate(12).unwrap();
        pool.free(&[7, 3, 11, 0, 5]);
        pool.free(&[1, 2, 4, 6, 8, 9, 10]);
        assert_eq!(all.len(), 12);
        assert_eq!(pool, PagePool::new(12, 64));
    }

    #[test]
    fn rebuild_rejects_shared_and_out_of_range_pages() {
        assert!(matches!(
            PagePool::rebuild(8, 64, [1, 2, 1]),
            Err(CorruptionReason::Invalid(_))
        ));
        assert!(matches!(
            PagePool::rebuild(8, 64, [8]),
            Err(CorruptionReason::Invalid(_))
        ));
        let pool = PagePool::rebuild(8, 64, [7, 0, 3]).unwrap();
        assert_eq!(pool.used_pages(), 3);
        assert!(pool.is_allocated(0) && pool.is_allocated(3) && pool.is_allocated(7));
        assert!(!pool.is_allocated(1) && !pool.is_allocated(8));
    }

    #[test]
    #[cfg(not(debug_assertions))]
    fn freeing_a_free_page_is_ignored_in_release_builds() {
        let mut pool = PagePool::new(4, 64);
        let a = pool.allocate(2).unwrap();
        pool.free(&[a[0], 3]);
        assert_eq!(pool.free_pages(), 3);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "freed but not allocated")]
    fn freeing_a_free_page_panics_in_debug_builds() {
        let mut pool = PagePool::new(4, 64);
        pool.free(&[2]);
    }

    /// Seeded random workload: rows of random sizes come and go; after every step the counts
    /// add up, no page is held twice, and rebuilding from the live set gives the same pool.
    #[test]
    fn no_leak_after_thousands_of_random_allocate_free_cycles() {
        for seed in 0..4u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let total = 257u32;
            let mut pool = PagePool::new(total, 4096);
            let mut live: Vec<Vec<u32>> = Vec::new();
            for step in 0..3000 {
                if rng.gen_bool(0.55) || live.is_empty() {
                    let n = rng.gen_range(0..40);
                    let before = pool.free_pages();
                    match pool.allocate(n) {
                        Some(pages) => {
                            assert_eq!(pages.len(), n);
                            assert_eq!(pool.free_pages(), before - n);
                            live.push(pages);
                        }
                        None => assert!(n > before, "seed {seed} step {step}"),
                    }
                } else {
                    let victim = live.swap_remove(rng.gen_range(0..live.len()));
                    // Sometimes free only part of a row, as column compaction does.
                    let cut = rng.gen_range(0..=victim.len());
                    pool.free(&victim[..cut]);
                    if cut < victim.len() {
                        live.push(victim[cut..].to_vec());
                    }
                }
                let held: usize = live.iter().map(Vec::len).sum();
                assert_eq!(pool.used_pages(), held, "seed {seed} step {step}");
                assert_eq!(pool.used_pages() + pool.free_pages(), total as usize);
                if step % 97 == 0 {
                    let rebuilt =
                        PagePool::rebuild(total, 4096, live.iter().flatten().copied()).unwrap();
                    assert_eq!(rebuilt, pool, "seed {seed} step {step}");
                }
            }
            for pages in live.drain(..) {
                pool.free(&pages);
            }
            assert_eq!(pool, PagePool::new(total, 4096), "seed {seed}");
        }
    }
}
