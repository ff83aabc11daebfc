//! LightKV's partition-based compaction picker (Han, Jiang, Xiong, MSST 2020; `shared/papers/002`,
//! slide 18): which tables of one key-range partition the next compaction merges, or which
//! partition splits.
//!
//! LightKV cuts the key space into partitions; a flush writes one SSTable into each partition
//! its write buffer has keys for. Every table has a *merge count* (the paper's number in
//! parentheses: 0 for a flushed table). Once a partition holds *compaction size* (CS) tables of
//! the same count, they are merged into one table of the next count, so a byte is rewritten
//! about `log_CS(partition size / flush size)` times: write amplification falls as CS grows,
//! while a range query meets up to `CS - 1` tables of every count.
//!
//! Rules:
//!
//! 1. **Membership.** Partition `i` covers the user keys `[bounds[i-1], bounds[i])` (the first
//!    starts at the empty key, the last is unbounded). A table belongs to every partition its
//!    key range meets (flushes, merges and splits cut their outputs at the bounds; only a
//!    flush that read the bounds before a split installed new ones writes a table spanning
//!    two).
//! 2. **Merge** ([`Pick::Merge`]). Over every partition and every count with at least
//!    [`PartitionConfig::compaction_size`] member tables, the lowest count wins, then the
//!    partition with the most member tables, then the lower partition. The inputs are that
//!    count's CS oldest tables of the partition (lowest largest sequence number, then lowest
//!    file number); the outputs get the count plus one.
//! 3. **Split** ([`Pick::Split`]) when no merge is due: the partition whose member tables hold
//!    the most bytes, if that is above [`PartitionConfig::partition_bytes`] and fewer than
//!    [`PartitionConfig::max_partitions`] partitions exist. The caller chooses the split key
//!    (the middle of the partition's largest table) and rewrites the member tables cut at it
//!    (deviation: the paper does not say how partitions are formed; a split that only moved
//!    the bound would leave the old tables counted in both halves).
//!
//! Pure: a function of the tables, their counts, the bounds and the configuration. Never
//! panics.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::version::edit::FileMeta;
use crate::version::set::Partitions;

/// The knobs of the picker (from `LightKvOptions`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PartitionConfig {
    /// Tables of one count that trigger their merge (at least 2; lower is read as 2).
    pub compaction_size: usize,
    /// The most partitions.
    pub max_partitions: usize,
    /// A partition above this many bytes of member tables splits.
    pub partition_bytes: u64,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pick {
    /// Merge `inputs` (members of `partition`, all of count `run`) into tables of count
    /// `run + 1`.
    Merge {
        /// The partition's index.
        partition: usize,
        /// The merge count of every input.
        run: u32,
        /// The tables, oldest first.
        inputs: Vec<Arc<FileMeta>>,
    },
    /// Split `partition`, whose member tables (oldest first) are `members`.
    Split {
        /// The partition's index.
        partition: usize,
        /// Its member tables, oldest first.
        members: Vec<Arc<FileMeta>>,
    },
}

/// The key range `[lo, hi)` of partition `i` (`hi` `None`: unbounded).
pub(crate) fn range(bounds: &[Vec<u8>], i: usize) -> (&[u8], Option<&[u8]>) {
    let lo = match i.checked_sub(1) {
        Some(j) => bounds.get(j).map_or(&[][..], Vec::as_slice),
        None => &[][..],
    };
    (lo, bounds.get(i).map(Vec::as_slice))
}

/// The partitions table `f` belongs to (rule 1), as a range of indexes.
pub(crate) fn partitions_of(bounds: &[Vec<u8>], f: &FileMeta) -> std::ops::Range<usize> {
    // Partition of a key: the number of bounds at or below it.
    let of = |k: &[u8]| bounds.partition_point(|b| b.as_slice() <= k);
    of(f.smallest_user())..of(f.largest_user()) + 1
}

/// The partition holding `key`.
pub(crate) fn partition_of_key(bounds: &[Vec<u8>], key: &[u8]) -> usize {
    bounds.partition_point(|b| b.as_slice() <= key)
}

/// The member tables of every partition, oldest first.
fn members(files: &[Arc<FileMeta>], bounds: &[Vec<u8>]) -> Vec<Vec<Arc<FileMeta>>> {
    let mut out: Vec<Vec<Arc<FileMeta>>> = vec![Vec::new(); bounds.len() + 1];
    for f in files {
        for p in partitions_of(bounds, f) {
            if let Some(m) = out.get_mut(p) {
                m.push(Arc::clone(f));
            }
        }
    }
    for m in &mut out {
        m.sort_by_key(|f| (f.largest_seq, f.number));
    }
    out
}

/// The next compaction of `files` (the single level) under `partitions`, if any.
pub(crate) fn pick(
    files: &[Arc<FileMeta>],
    partitions: &Partitions,
    cfg: &PartitionConfig,
) -> Option<Pick> {
    let cs = cfg.compaction_size.max(2);
    let by_partition = members(files, &partitions.bounds);
    // (run, Reverse(members), partition) → inputs; the smallest key wins (rule 2).
    type Rank = (u32, std::cmp::Reverse<usize>, usize);
    let mut best: Option<(Rank, Vec<Arc<FileMeta>>)> = None;
    for (p, tables) in by_partition.iter().enumerate() {
        let mut runs: BTreeMap<u32, Vec<Arc<FileMeta>>> = BTreeMap::new();
        for f in tables {
            runs.entry(partitions.run(f.number))
                .or_default()
                .push(Arc::clone(f));
        }
        if let Some((run, group)) = runs.into_iter().find(|(_, g)| g.len() >= cs) {
            let key = (run, std::cmp::Reverse(tables.len()), p);
            if best.as_ref().is_none_or(|(k, _)| key < *k) {
                best = Some((key, group.into_iter().take(cs).collect()));
            }
        }
    }
    if let Some(((run, _, partition), inputs)) = best {
        return Some(Pick::Merge {
            partition,
            run,
            inputs,
        });
    }
    if by_partition.len() >= cfg.max_partitions {
        return None;
    }
    let bytes = |m: &[Arc<FileMeta>]| m.iter().map(|f| f.size).sum::<u64>();
    let (partition, members) = by_partition
        .into_iter()
        .enumerate()
        .filter(|(_, m)| bytes(m) > cfg.partition_bytes)
        .max_by_key(|(p, m)| (bytes(m), std::cmp::Reverse(*p)))?;
    Some(Pick::Split { partition, members })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::testutil::file;

    fn t(spec: &str) -> Arc<FileMeta> {
        Arc::new(file(spec))
    }

    fn cfg(cs: usize) -> PartitionConfig {
        PartitionConfig {
            compaction_size: cs,
            max_partitions: 4,
            partition_bytes: 10 << 20,
        }
    }

    fn numbers(v: &[Arc<FileMeta>]) -> Vec<u64> {
        v.iter().map(|f| f.number.0).collect()
    }

    fn parts(bounds: &[&str], runs: &[(u64, u32)]) -> Partitions {
        Partitions {
            bounds: bounds.iter().map(|b| b.as_bytes().to_vec()).collect(),
            runs: runs.iter().copied().collect(),
        }
    }

    #[test]
    fn compaction_size_tables_of_one_count_merge_oldest_first() {
        let files = [t("4:a-z"), t("2:a-m"), t("3:b-y"), t("1:c-d")];
        let p = parts(&[], &[]);
        assert_eq!(pick(&files[..3], &p, &cfg(4)), None);
        match pick(&files, &p, &cfg(3)) {
            Some(Pick::Merge {
                partition,
                run,
                inputs,
            }) => {
                assert_eq!((partition, run), (0, 0));
                assert_eq!(numbers(&inputs), vec![1, 2, 3]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn tables_of_different_counts_do_not_merge_and_the_lowest_count_goes_first() {
        let files = [t("1:a-b"), t("2:a-b"), t("3:a-b"), t("4:a-b"), t("5:a-b")];
        let p = parts(&[], &[(1, 1), (2, 1), (3, 1)]);
        // Counts: 1, 1, 1, 0, 0: only count 1 has three.
        match pick(&files, &p, &cfg(3)) {
            Some(Pick::Merge { run, inputs, .. }) => {
                assert_eq!(run, 1);
                assert_eq!(numbers(&inputs), vec![1, 2, 3]);
            }
            other => panic!("{other:?}"),
        }
        let p = parts(&[], &[(1, 1), (2, 1)]);
        assert_eq!(pick(&files, &p, &cfg(3)).map(|_| ()), Some(()));
        match pick(&files, &p, &cfg(3)) {
            Some(Pick::Merge { run, inputs, .. }) => {
                assert_eq!(run, 0);
                assert_eq!(numbers(&inputs), vec![3, 4, 5]);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn partitions_merge_apart_and_a_spanning_table_belongs_to_both() {
        let bounds = ["m"];
        // Partition 0 ["", m): 1, 2, 9; partition 1 [m, ..): 3, 4, 9.
        let files = [t("1:a-c"), t("2:b-d"), t("3:n-p"), t("4:o-q"), t("9:b-x")];
        let p = parts(&bounds, &[]);
        assert_eq!(partitions_of(&p.bounds, &files[4]), 0..2);
        assert_eq!(partitions_of(&p.bounds, &files[2]), 1..2);
        assert_eq!(partition_of_key(&p.bounds, b"m"), 1);
        assert_eq!(partition_of_key(&p.bounds, b"l"), 0);
        match pick(&files, &p, &cfg(3)) {
            Some(Pick::Merge {
                partition, inputs, ..
            }) => {
                assert_eq!(partition, 0);
                assert_eq!(numbers(&inputs), vec![1, 2, 9]);
            }
            other => panic!("{other:?}"),
        }
        // Without the spanning table neither partition has three.
        assert_eq!(pick(&files[..4], &p, &cfg(3)), None);
        assert_eq!(range(&p.bounds, 0), (&b""[..], Some(&b"m"[..])));
        assert_eq!(range(&p.bounds, 1), (&b"m"[..], None));
    }

    #[test]
    fn the_largest_partition_above_the_limit_splits_while_partitions_are_left() {
        let files = [t("1:a-c/8M"), t("2:n-p/6M"), t("3:o-q/6M")];
        let p = parts(&["m"], &[]);
        match pick(&files, &p, &cfg(4)) {
            Some(Pick::Split { partition, members }) => {
                assert_eq!(partition, 1);
                assert_eq!(numbers(&members), vec![2, 3]);
            }
            other => panic!("{other:?}"),
        }
        let full = PartitionConfig {
            max_partitions: 2,
            ..cfg(4)
        };
        assert_eq!(pick(&files, &p, &full), None);
        let roomy = PartitionConfig {
            partition_bytes: 12 << 20,
            ..cfg(4)
        };
        assert_eq!(pick(&files, &p, &roomy), None);
        assert_eq!(pick(&[], &parts(&[], &[]), &cfg(2)), None);
    }
}
