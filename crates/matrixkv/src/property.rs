//! Named properties of an open database ([`crate::Db::get_property`],
//! [`crate::Db::get_int_property`]): RocksDB's `GetProperty` names where RocksDB has one, with
//! the prefix `matrixkv.` instead of `rocksdb.`, plus the matrix container's.
//!
//! Pure: a function of the `Inputs` (counters and shape) that the database takes (under
//! its locks, briefly); the names and formulas live here, one table, unit-tested.

use std::fmt::Write as _;

use crate::stats::Stats;

/// Every property name. A name ending in `<N>` takes a level number (`0` … `num_levels - 1`).
/// Those marked "text" in [`describe`] are only strings; the others are integers, readable
/// through [`crate::Db::get_int_property`] as well.
pub const PROPERTY_NAMES: &[&str] = &[
    "matrixkv.num-files-at-level<N>",
    "matrixkv.bytes-at-level<N>",
    "matrixkv.levelstats",
    "matrixkv.stats",
    "matrixkv.num-immutable-mem-table",
    "matrixkv.cur-size-all-mem-tables",
    "matrixkv.estimate-pending-compaction-bytes",
    "matrixkv.total-sst-files-size",
    "matrixkv.container-capacity-bytes",
    "matrixkv.container-used-bytes",
    "matrixkv.container-occupancy-percent",
    "matrixkv.container-receiver-rows",
    "matrixkv.container-compactor-rows",
    "matrixkv.num-blob-files",
    "matrixkv.num-range-deletes",
    "matrixkv.live-blob-file-size",
    "matrixkv.live-blob-file-garbage-size",
    "matrixkv.num-snapshots",
    "matrixkv.latest-sequence-number",
    "matrixkv.background-errors",
    "matrixkv.block-cache-usage",
    "matrixkv.is-write-stopped",
    "matrixkv.estimate-num-keys",
];

/// What the properties are computed from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Inputs {
    /// Counters and shape ([`crate::Db::stats`]).
    pub stats: Stats,
    /// Immutable memtables waiting for their flush.
    pub imm_memtables: usize,
    /// Live snapshots.
    pub snapshots: usize,
    /// Sequence number of the last acknowledged write.
    pub latest_seq: u64,
    /// Target size of L1 (`Options::l1_target_bytes`).
    pub l1_target_bytes: u64,
    /// Size ratio between adjacent levels (`Options::level_multiplier`).
    pub level_multiplier: u64,
    /// Entries stored in the memtables, container rows and tables (every version).
    pub entries: u64,
}

/// One-line description of `name`'s meaning (for the CLI and the error listing names).
pub fn describe(name: &str) -> Option<&'static str> {
    Some(match name {
        "matrixkv.num-files-at-level<N>" => {
            "files at level N (level 0 in the matrix layout: container rows)"
        }
        "matrixkv.bytes-at-level<N>" => {
            "bytes at level N (level 0 in the matrix layout: container pages in use by rows)"
        }
        "matrixkv.levelstats" => "text: files and MiB per level",
        "matrixkv.stats" => "text: every counter (the Display of Db::stats)",
        "matrixkv.num-immutable-mem-table" => "immutable memtables waiting for their flush",
        "matrixkv.cur-size-all-mem-tables" => "approximate bytes of all memtables",
        "matrixkv.estimate-pending-compaction-bytes" => {
            "bytes compaction must rewrite to bring every level within its target"
        }
        "matrixkv.total-sst-files-size" => "bytes of SSTables (L0 tables and L1 and below)",
        "matrixkv.container-capacity-bytes" => "size of the matrix container (0: tables layout)",
        "matrixkv.container-used-bytes" => "container pages allocated to rows, in bytes",
        "matrixkv.container-occupancy-percent" => "container-used-bytes as a percentage",
        "matrixkv.container-receiver-rows" => "rows of the receiver (newest data)",
        "matrixkv.container-compactor-rows" => "rows of the compactor (being drained to L1)",
        "matrixkv.num-blob-files" => "live blob files",
        "matrixkv.num-range-deletes" => "range tombstones in the current version",
        "matrixkv.live-blob-file-size" => "record bytes in live blob files",
        "matrixkv.live-blob-file-garbage-size" => "bytes of unreferenced records in them",
        "matrixkv.num-snapshots" => "live snapshots",
        "matrixkv.latest-sequence-number" => "sequence number of the last acknowledged write",
        "matrixkv.background-errors" => "background job failures so far",
        "matrixkv.block-cache-usage" => "bytes held by the block cache",
        "matrixkv.is-write-stopped" => "1 when writes fail (poisoned database or full disk)",
        "matrixkv.estimate-num-keys" => {
            "entries stored in memtables, container rows and tables (every version, tombstone \
             and merge operand): an upper bound on the live keys"
        }
        _ => return None,
    })
}

/// The value of integer property `name`, `None` if there is no such integer property.
pub(crate) fn int_property(name: &str, s: &Inputs) -> Option<u64> {
    let st = &s.stats;
    if let Some(level) = level_arg(name, "matrixkv.num-files-at-level") {
        return st.levels.get(level).map(|(files, _)| *files as u64);
    }
    if let Some(level) = level_arg(name, "matrixkv.bytes-at-level") {
        return st.levels.get(level).map(|(_, bytes)| *bytes);
    }
    let matrix = st.container_capacity_bytes > 0;
    Some(match name {
        "matrixkv.num-immutable-mem-table" => s.imm_memtables as u64,
        "matrixkv.cur-size-all-mem-tables" => st.memtable_bytes,
        "matrixkv.estimate-pending-compaction-bytes" => {
            pending_compaction_bytes(&st.levels, s.l1_target_bytes, s.level_multiplier)
        }
        "matrixkv.total-sst-files-size" => st
            .levels
            .iter()
            .enumerate()
            .filter(|(level, _)| *level > 0 || !matrix)
            .map(|(_, (_, bytes))| bytes)
            .sum(),
        "matrixkv.container-capacity-bytes" => st.container_capacity_bytes,
        "matrixkv.container-used-bytes" => st.container_used_bytes,
        "matrixkv.container-occupancy-percent" => st
            .container_used_bytes
            .saturating_mul(100)
            .checked_div(st.container_capacity_bytes)
            .unwrap_or(0),
        "matrixkv.container-receiver-rows" => st.container_rows.0 as u64,
        "matrixkv.container-compactor-rows" => st.container_rows.1 as u64,
        "matrixkv.num-blob-files" => st.blob_files as u64,
        "matrixkv.num-range-deletes" => st.range_tombstones as u64,
        "matrixkv.live-blob-file-size" => st.blob_bytes.0,
        "matrixkv.live-blob-file-garbage-size" => st.blob_bytes.1,
        "matrixkv.num-snapshots" => s.snapshots as u64,
        "matrixkv.latest-sequence-number" => s.latest_seq,
        "matrixkv.background-errors" => st.background_errors,
        "matrixkv.block-cache-usage" => st.block_cache_bytes,
        "matrixkv.is-write-stopped" => u64::from(st.poisoned.is_some() || st.no_space.is_some()),
        "matrixkv.estimate-num-keys" => s.entries,
        _ => return None,
    })
}

/// The value of property `name` as text, `None` if there is no such property.
pub(crate) fn property(name: &str, s: &Inputs) -> Option<String> {
    match name {
        "matrixkv.stats" => Some(s.stats.to_string()),
        "matrixkv.levelstats" => {
            let mut out = String::from("Level Files Size(MiB)\n");
            for (level, (files, bytes)) in s.stats.levels.iter().enumerate() {
                let mib = *bytes as f64 / f64::from(1u32 << 20);
                let _ = writeln!(out, "{level:>5} {files:>5} {mib:>9.1}");
            }
            Some(out)
        }
        _ => int_property(name, s).map(|v| v.to_string()),
    }
}

/// The level number of `name` = `prefix` followed by decimal digits.
fn level_arg(name: &str, prefix: &str) -> Option<usize> {
    let digits = name.strip_prefix(prefix)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// Bytes compaction must rewrite to bring every level within its target, RocksDB's estimate
/// adapted to matrixkv's levels (`levels[l] = (files, bytes)`):
/// - level 0 (the container's rows, or L0 tables): all of it, plus L1's bytes when level 0 is
///   not empty (its compactions merge with L1);
/// - each level `l ≥ 1` but the last non-empty one: its excess over its target
///   (`l1_target · multiplier^(l-1)`), times `1 + bytes(l+1) / bytes(l)` (moving a byte
///   down rewrites the next level's overlapping bytes).
pub(crate) fn pending_compaction_bytes(
    levels: &[(usize, u64)],
    l1_target: u64,
    multiplier: u64,
) -> u64 {
    let bytes = |l: usize| levels.get(l).map_or(0, |(_, b)| *b);
    let mut pending = 0u64;
    if bytes(0) > 0 {
        pending = pending.saturating_add(bytes(0)).saturating_add(bytes(1));
    }
    let last = (0..levels.len()).rev().find(|&l| bytes(l) > 0).unwrap_or(0);
    let mut target = l1_target.max(1);
    for l in 1..last {
        let size = bytes(l);
        if size > target {
            let excess = size - target;
            let ratio = bytes(l + 1) as f64 / size as f64;
            pending = pending.saturating_add((excess as f64 * (1.0 + ratio)) as u64);
        }
        target = target.saturating_mul(multiplier.max(1));
    }
    pending
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(levels: Vec<(usize, u64)>) -> Inputs {
        let mut s = Inputs {
            l1_target_bytes: 100,
            level_multiplier: 10,
            imm_memtables: 1,
            snapshots: 2,
            latest_seq: 77,
            ..Inputs::default()
        };
        s.stats.levels = levels;
        s.stats.container_capacity_bytes = 1000;
        s.stats.container_used_bytes = 250;
        s.stats.container_rows = (3, 1);
        s.stats.blob_files = 4;
        s.stats.blob_bytes = (900, 300);
        s
    }

    #[test]
    fn every_listed_name_has_a_value_and_a_description() {
        let s = inputs(vec![(2, 50), (3, 120), (1, 80)]);
        for name in PROPERTY_NAMES {
            assert!(describe(name).is_some(), "{name} has no description");
            let concrete = name.replace("<N>", "1");
            assert!(property(&concrete, &s).is_some(), "{concrete} has no value");
            let text_only = describe(name).is_some_and(|d| d.starts_with("text:"));
            assert_eq!(
                int_property(&concrete, &s).is_some(),
                !text_only,
                "{concrete}: integer or text"
            );
        }
    }

    #[test]
    fn level_properties_take_a_level_number_and_nothing_else() {
        let s = inputs(vec![(2, 50), (3, 120), (1, 80)]);
        assert_eq!(int_property("matrixkv.num-files-at-level1", &s), Some(3));
        assert_eq!(int_property("matrixkv.bytes-at-level2", &s), Some(80));
        assert_eq!(int_property("matrixkv.bytes-at-level3", &s), None);
        for bad in [
            "matrixkv.num-files-at-level",
            "matrixkv.num-files-at-level-1",
            "matrixkv.num-files-at-level1x",
            "matrixkv.num-files-at-level+1",
            "matrixkv.num-files-at-level99999999999999999999999",
            "rocksdb.num-files-at-level1",
        ] {
            assert_eq!(property(bad, &s), None, "{bad}");
        }
    }

    #[test]
    fn container_and_blob_properties_come_from_the_stats() {
        let s = inputs(vec![(2, 50), (3, 120), (1, 80)]);
        assert_eq!(
            int_property("matrixkv.container-occupancy-percent", &s),
            Some(25)
        );
        assert_eq!(
            int_property("matrixkv.container-receiver-rows", &s),
            Some(3)
        );
        assert_eq!(
            int_property("matrixkv.live-blob-file-garbage-size", &s),
            Some(300)
        );
        // In the matrix layout level 0 is the container, not SSTables.
        assert_eq!(int_property("matrixkv.total-sst-files-size", &s), Some(200));
        let mut tables = s.clone();
        tables.stats.container_capacity_bytes = 0;
        assert_eq!(
            int_property("matrixkv.total-sst-files-size", &tables),
            Some(250)
        );
        assert_eq!(
            int_property("matrixkv.container-occupancy-percent", &tables),
            Some(0)
        );
        assert!(property("matrixkv.levelstats", &s).is_some_and(|t| t.lines().count() == 4));
    }

    #[test]
    fn pending_bytes_count_level0_with_l1_and_each_levels_excess_scaled_by_the_next() {
        // Nothing anywhere.
        assert_eq!(pending_compaction_bytes(&[(0, 0), (0, 0)], 100, 10), 0);
        // Level 0 data merges with all of L1.
        assert_eq!(pending_compaction_bytes(&[(1, 40), (2, 60)], 100, 10), 100);
        // L1 over its target by 50 with L2 twice L1's size: 50 * (1 + 2).
        assert_eq!(
            pending_compaction_bytes(&[(0, 0), (1, 150), (1, 300)], 100, 10),
            150
        );
        // The last non-empty level has no level to move to.
        assert_eq!(pending_compaction_bytes(&[(0, 0), (1, 150)], 100, 10), 0);
        // L2's target is L1's times the multiplier.
        assert_eq!(
            pending_compaction_bytes(&[(0, 0), (1, 10), (1, 1100), (1, 1100)], 100, 10),
            200
        );
    }
}
