//! The compaction picker: a pure function from a [`Version`] to the next compaction [`Plan`].
//!
//! Each level gets a score: L0 = file count / `l0_compaction_trigger`; Ln (n ≥ 1) = bytes /
//! (`l1_target_bytes` · `level_multiplier`^(n-1)). The highest score ≥ 1 wins (ties go to the
//! upper level); the last level is never compacted.
//!
//! - L0 → L1 takes *all* L0 files (RocksDB all-to-all) and the L1 files overlapping their
//!   combined user-key range.
//! - Ln → Ln+1 takes one file, the first after the level's compaction pointer (round robin,
//!   wrapping to the first file), plus the Ln+1 files overlapping it. If none overlaps, the file
//!   is moved down without rewriting (`Plan::Move`; grandparent overlap is not considered yet).
//!
//! Blob GC ([`pick_blob_gc`], run only when [`pick`] and the matrix container have nothing to
//! do): when the blob files' record bytes exceed `space_budget` times their live bytes, the
//! most garbage-heavy files are chosen for relocation until the rest fits the budget, and the
//! tables of one level that reference the first of them that any table references are
//! rewritten in place (`Plan::BlobGc`), a few at a time. See docs/decisions/0009-blob-gc.md.
//!
//! Called by the DB under its state mutex; no I/O, no state. The plan assumes no other
//! compaction is running (the DB runs one compaction at a time).
#![deny(clippy::indexing_slicing)]

use std::fmt::Write as _;
use std::sync::Arc;

use crate::key::compare_internal;
use crate::layout::FileNum;
use crate::version::version::BlobFile;
use crate::version::{FileMeta, NUM_LEVELS, Version, VersionEdit};

/// Sizing knobs of the leveled tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PickerConfig {
    /// Number of L0 files at which L0 → L1 compaction starts (score 1).
    pub l0_compaction_trigger: usize,
    /// Target size of L1 in bytes.
    pub l1_target_bytes: u64,
    /// Each level below L1 targets this many times the size of the level above.
    pub level_multiplier: u64,
    /// Number of levels in use (2..=`NUM_LEVELS`); the last one is never compacted.
    pub num_levels: usize,
}

impl PickerConfig {
    /// Target size in bytes of `level` (≥ 1): `l1_target_bytes · level_multiplier^(level-1)`,
    /// saturating. Level 0 has no byte target (returns 0).
    pub fn target_bytes(&self, level: usize) -> u64 {
        if level == 0 {
            return 0;
        }
        let exp = u32::try_from(level - 1).unwrap_or(u32::MAX);
        self.level_multiplier
            .max(1)
            .saturating_pow(exp)
            .saturating_mul(self.l1_target_bytes)
    }

    /// Levels in use, clamped to `NUM_LEVELS`.
    fn levels(&self) -> usize {
        self.num_levels.min(NUM_LEVELS)
    }
}

/// What to compact next.
#[derive(Debug, Clone)]
pub enum Plan {
    /// Merge every L0 file with the overlapping L1 files into new L1 files.
    L0ToL1 {
        /// All L0 files, newest first.
        l0: Vec<Arc<FileMeta>>,
        /// The L1 files overlapping the L0 files' combined key range, in key order.
        l1: Vec<Arc<FileMeta>>,
    },
    /// Merge files of `level` with the overlapping files of `level + 1`.
    Merge {
        /// The upper level (≥ 1).
        level: usize,
        /// The chosen files of `level`, in key order.
        inputs: Vec<Arc<FileMeta>>,
        /// The overlapping files of `level + 1`, in key order (never empty).
        next: Vec<Arc<FileMeta>>,
    },
    /// Move one file from `level` to `level + 1` unchanged (nothing overlaps it there; both
    /// levels are on the slow tier).
    Move {
        /// The upper level (≥ 1).
        level: usize,
        /// The file.
        file: Arc<FileMeta>,
    },
    /// Blob GC: rewrite tables of `level` in place (each output within its input's key
    /// range), relocating their pointers into the blob files of `relocate`.
    BlobGc {
        /// The level (≥ 1) read and written.
        level: usize,
        /// The tables to rewrite, in key order (never empty).
        inputs: Vec<Arc<FileMeta>>,
        /// The blob files whose live records move to the job's new blob file, most
        /// garbage-heavy first.
        relocate: Vec<FileNum>,
    },
    /// Rewrite tables of `level` in place (each output within its input's key range) so
    /// that the compaction filter and the TTL see them: the last step of a manual compaction
    /// when either is set (RocksDB's `kIfHaveCompactionFilter`).
    Rewrite {
        /// The level (≥ 1) read and written.
        level: usize,
        /// The tables to rewrite, in key order (never empty).
        inputs: Vec<Arc<FileMeta>>,
    },
}

impl Plan {
    /// The level the plan reads from (0 for L0 → L1).
    pub fn level(&self) -> usize {
        match self {
            Plan::L0ToL1 { .. } => 0,
            Plan::Merge { level, .. }
            | Plan::Move { level, .. }
            | Plan::BlobGc { level, .. }
            | Plan::Rewrite { level, .. } => *level,
        }
    }

    /// The level the plan writes to (the next one, or the same for blob GC).
    pub fn output_level(&self) -> usize {
        match self {
            Plan::BlobGc { level, .. } | Plan::Rewrite { level, .. } => *level,
            _ => self.level() + 1,
        }
    }

    /// Every input file with its level, upper level first: the deletions of the plan's edit.
    pub fn inputs(&self) -> Vec<(usize, &Arc<FileMeta>)> {
        match self {
            Plan::L0ToL1 { l0, l1 } => l0
                .iter()
                .map(|f| (0, f))
                .chain(l1.iter().map(|f| (1, f)))
                .collect(),
            Plan::Merge {
                level,
                inputs,
                next,
            } => inputs
                .iter()
                .map(|f| (*level, f))
                .chain(next.iter().map(|f| (*level + 1, f)))
                .collect(),
            Plan::Move { level, file } => vec![(*level, file)],
            Plan::BlobGc { level, inputs, .. } | Plan::Rewrite { level, inputs } => {
                inputs.iter().map(|f| (*level, f)).collect()
            }
        }
    }

    /// The compaction pointer to record for the upper level once the plan is installed: its
    /// largest input key. `None` for L0 → L1 (it always takes every L0 file).
    pub fn compact_pointer(&self) -> Option<(usize, Vec<u8>)> {
        match self {
            Plan::L0ToL1 { .. } | Plan::BlobGc { .. } | Plan::Rewrite { .. } => None,
            Plan::Merge { level, inputs, .. } => inputs
                .iter()
                .map(|f| &f.largest)
                .max_by(|a, b| compare_internal(a, b))
                .map(|k| (*level, k.clone())),
            Plan::Move { level, file } => Some((*level, file.largest.clone())),
        }
    }

    /// For a [`Plan::Move`], the complete edit that performs it (delete, add one level down,
    /// advance the pointer); `None` for plans that rewrite data.
    pub fn move_edit(&self) -> Option<VersionEdit> {
        let Plan::Move { level, file } = self else {
            return None;
        };
        let mut e = VersionEdit::default();
        e.delete_file(*level, file.number);
        e.add_file(*level + 1, file.as_ref().clone());
        e.compact_pointers.push((*level, file.largest.clone()));
        Some(e)
    }

    /// One line for logs and tests, e.g. `merge L1->L2 inputs=[3] next=[7,8]`.
    pub fn describe(&self) -> String {
        fn list(files: &[Arc<FileMeta>]) -> String {
            let nums: Vec<String> = files.iter().map(|f| f.number.0.to_string()).collect();
            format!("[{}]", nums.join(","))
        }
        let mut s = String::new();
        let _ = match self {
            Plan::L0ToL1 { l0, l1 } => write!(s, "L0->L1 l0={} l1={}", list(l0), list(l1)),
            Plan::Merge {
                level,
                inputs,
                next,
            } => write!(
                s,
                "merge L{level}->L{} inputs={} next={}",
                level + 1,
                list(inputs),
                list(next)
            ),
            Plan::Move { level, file } => {
                write!(s, "move L{level}->L{} file={}", level + 1, file.number.0)
            }
            Plan::Rewrite { level, inputs } => {
                write!(s, "rewrite L{level} inputs={}", list(inputs))
            }
            Plan::BlobGc {
                level,
                inputs,
                relocate,
            } => {
                let nums: Vec<String> = relocate.iter().map(|n| n.0.to_string()).collect();
                write!(
                    s,
                    "blob-gc L{level} inputs={} relocate=[{}]",
                    list(inputs),
                    nums.join(",")
                )
            }
        };
        s
    }

    #[cfg(test)]
    /// The numbers of all input files.
    pub fn input_numbers(&self) -> Vec<crate::layout::FileNum> {
        self.inputs().into_iter().map(|(_, f)| f.number).collect()
    }
}

/// The compaction score of each level in use (index = level). The last level's score is
/// reported for statistics but never acted on.
pub fn scores(v: &Version, cfg: &PickerConfig) -> Vec<f64> {
    (0..cfg.levels())
        .map(|level| {
            if level == 0 {
                v.num_files(0) as f64 / cfg.l0_compaction_trigger.max(1) as f64
            } else {
                v.level_bytes(level) as f64 / cfg.target_bytes(level).max(1) as f64
            }
        })
        .collect()
}

/// The next compaction to run, or `None` if every level is within its target.
///
/// `compact_pointers[level]` is the largest internal key of the previous compaction of that
/// level (empty = start at the first file).
pub fn pick(v: &Version, cfg: &PickerConfig, compact_pointers: &[Vec<u8>]) -> Option<Plan> {
    let s = scores(v, cfg);
    let last = cfg.levels().checked_sub(1)?;
    let mut best: Option<(usize, f64)> = None;
    for (level, &score) in s.iter().enumerate().take(last) {
        if score >= 1.0 && best.is_none_or(|(_, b)| score > b) {
            best = Some((level, score));
        }
    }
    let (level, _) = best?;
    if level == 0 {
        return pick_l0(v);
    }
    let files = v.files(level);
    let pointer = compact_pointers.get(level).filter(|p| !p.is_empty());
    let idx = pointer.map_or(0, |p| {
        files
            .iter()
            .position(|f| compare_internal(&f.largest, p).is_gt())
            .unwrap_or(0)
    });
    let file = Arc::clone(files.get(idx)?);
    let next = v.overlapping(level + 1, file.smallest_user(), file.largest_user());
    if next.is_empty() {
        Some(Plan::Move { level, file })
    } else {
        Some(Plan::Merge {
            level,
            inputs: vec![file],
            next,
        })
    }
}

/// Every L0 file merged with the overlapping L1 files; `None` when L0 is empty.
pub fn pick_l0(v: &Version) -> Option<Plan> {
    let l0 = v.files(0);
    let lo = l0.iter().map(|f| f.smallest_user()).min()?;
    let hi = l0.iter().map(|f| f.largest_user()).max()?;
    Some(Plan::L0ToL1 {
        l0: l0.to_vec(),
        l1: v.overlapping(1, lo, hi),
    })
}

/// Knobs of the blob garbage collector.
#[derive(Debug, Clone, PartialEq)]
pub struct BlobGcConfig {
    /// GC runs while the live blob files' record bytes exceed this many times their live
    /// (non-garbage) record bytes (≥ 1; infinity disables GC).
    pub space_budget: f64,
    /// Most tables one job rewrites (at least 1): bounds the job, which cannot be preempted
    /// by the flushes and column compactions it yields to.
    pub max_tables: usize,
}

/// Record bytes and garbage bytes of the live blob files.
pub fn blob_space(v: &Version) -> (u64, u64) {
    v.blob_files().values().fold((0, 0), |(t, g), b| {
        (t + b.meta.record_bytes, g + b.garbage_bytes)
    })
}

/// The next blob GC job, or `None` while the blob files are within the space budget (or no
/// table references the files worth relocating).
///
/// The files to relocate are the most garbage-heavy ones (ties: the older file), taken until
/// the remaining garbage fits the budget. The job rewrites the tables of the deepest level
/// that may reference the first of them referenced by any table, at most `max_tables` of them
/// in key order; the next job continues where references remain. Tables whose references
/// are not recorded (older manifests) count as referencing every file, so they are rewritten
/// once and recorded from then on.
pub fn pick_blob_gc(v: &Version, cfg: &BlobGcConfig) -> Option<Plan> {
    let (total, garbage) = blob_space(v);
    let live = total.saturating_sub(garbage);
    let fits = |t: u64| t as f64 <= cfg.space_budget * live as f64;
    if garbage == 0 || fits(total) {
        return None;
    }
    let mut files: Vec<&BlobFile> = v
        .blob_files()
        .values()
        .filter(|b| b.garbage_bytes > 0)
        .collect();
    files.sort_by(|a, b| {
        b.garbage_ratio()
            .total_cmp(&a.garbage_ratio())
            .then(a.meta.number.cmp(&b.meta.number))
    });
    let mut relocate = Vec::new();
    let mut left = total;
    for b in files {
        if fits(left) {
            break;
        }
        relocate.push(b.meta.number);
        left = left.saturating_sub(b.garbage_bytes);
    }
    for target in &relocate {
        for level in (1..NUM_LEVELS).rev() {
            let inputs: Vec<Arc<FileMeta>> = v
                .files(level)
                .iter()
                .filter(|f| f.may_reference_blob(*target))
                .take(cfg.max_tables.max(1))
                .cloned()
                .collect();
            if !inputs.is_empty() {
                return Some(Plan::BlobGc {
                    level,
                    inputs,
                    relocate,
                });
            }
        }
    }
    None
}

/// True if no level below `output_level` has a file whose range covers `user_key`: a
/// compaction writing to `output_level` may then drop a tombstone for the key (and older
/// versions) not needed by a snapshot. The output level's own overlapping files are always
/// inputs of the compaction, so they need no check.
pub fn is_bottommost_for(v: &Version, output_level: usize, user_key: &[u8]) -> bool {
    (output_level + 1..NUM_LEVELS).all(|level| v.files_for_key(level, user_key).next().is_none())
}

/// The next step of a manual compaction (`Db::compact_range`) of user keys `[begin, end]`
/// (`None`: unbounded on that side) at `level` ≥ 1: every file of `level` overlapping the
/// range merged with the overlapping files of `level + 1`; when nothing overlaps them there,
/// the first of them moved down unchanged (one per step). `None` when no file of `level`
/// overlaps the range: the level is done.
pub fn pick_manual(
    v: &Version,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<Plan> {
    if level == 0 {
        return None;
    }
    let inputs = files_in_range(v, level, begin, end);
    let lo = inputs.iter().map(|f| f.smallest_user()).min()?;
    let hi = inputs.iter().map(|f| f.largest_user()).max()?;
    let next = v.overlapping(level + 1, lo, hi);
    if next.is_empty() {
        let file = Arc::clone(inputs.first()?);
        return Some(Plan::Move { level, file });
    }
    Some(Plan::Merge {
        level,
        inputs,
        next,
    })
}

/// The tables of `level` overlapping the user-key range `[begin, end]` (`None`: unbounded).
fn files_in_range(
    v: &Version,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Vec<Arc<FileMeta>> {
    v.files(level)
        .iter()
        .filter(|f| {
            begin.is_none_or(|b| f.largest_user() >= b)
                && end.is_none_or(|e| f.smallest_user() <= e)
        })
        .cloned()
        .collect()
}

/// The tables of `level` overlapping `[begin, end]` rewritten in place (`Plan::Rewrite`),
/// `None` if there are none.
pub fn pick_rewrite(
    v: &Version,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Option<Plan> {
    let inputs = files_in_range(v, level, begin, end);
    (level > 0 && !inputs.is_empty()).then_some(Plan::Rewrite { level, inputs })
}

/// A rewrite (`Plan::Rewrite`) of the L1+ tables of the shallowest such level whose first
/// or last entry a range tombstone visible to every snapshot (`smallest_snapshot`) covers: the
/// covered entries go (with their blob records, as garbage), and the tables at the edges of a
/// deleted range, a dropped keyspace for one, shrink to what the tombstone leaves. Tables wholly
/// inside without blob references are dropped without a rewrite before this runs
/// (`range_del_cleanup`). A rewritten table's new first and last entries are not covered, so
/// no table is picked twice for one tombstone. Tables covered only in their middle are left to
/// the ordinary compactions.
pub fn pick_range_del_rewrite(v: &Version, smallest_snapshot: crate::key::SeqNo) -> Option<Plan> {
    let dels = v.range_dels();
    if dels.is_empty() {
        return None;
    }
    let covered = |ikey: &[u8]| {
        crate::key::parse_internal_key(ikey).is_ok_and(|p| {
            dels.max_covering(p.user_key, smallest_snapshot)
                .is_some_and(|t| p.seq < t)
        })
    };
    (1..NUM_LEVELS).find_map(|level| {
        let inputs: Vec<Arc<FileMeta>> = v
            .files(level)
            .iter()
            .filter(|f| covered(&f.smallest) || covered(&f.largest))
            .cloned()
            .collect();
        (!inputs.is_empty()).then_some(Plan::Rewrite { level, inputs })
    })
}

/// The deepest level holding a file (0 if none): where a manual compaction ends.
pub fn deepest_level(v: &Version, cfg: &PickerConfig) -> usize {
    (0..cfg.levels())
        .rev()
        .find(|&l| v.num_files(l) > 0)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
