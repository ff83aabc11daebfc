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
mod tests {
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use crate::version::testutil::version;

    fn cfg() -> PickerConfig {
        PickerConfig {
            l0_compaction_trigger: 4,
            l1_target_bytes: 4 << 10,
            level_multiplier: 10,
            num_levels: NUM_LEVELS,
        }
    }

    /// The pointer that says "the last compaction of this level ended at user key `k`".
    fn pointer_after(k: &str) -> Vec<u8> {
        make_internal_key(k.as_bytes(), SeqNo::ZERO, ValueKind::Deletion)
    }

    /// Data-driven cases. Each starts with `# name`; then optional `config:` (overrides of
    /// `trigger=`, `l1=` (bytes), `mult=`, `levels=`) and `pointer: L<n>=<key> ...` lines, the
    /// version in the `testutil` text form, and `=> <rendered plan or none>`.
    const CASES: &str = "
# nothing to do when every level is under target
L0: 3:a-c 2:b-d 1:e-f
L1: 4:a-b/3K
=> none

# empty tree
=> none

# L0 at the trigger takes every L0 file and the overlapping L1 files
L0: 8:b-c 7:c-d 6:h-i 5:m-n
L1: 1:a-a 2:c-e 3:o-p 4:y-z
=> L0->L1 l0=[8,7,6,5] l1=[2]

# L0 into an empty L1
L0: 8:b-c 7:c-d 6:h-i 5:m-n
=> L0->L1 l0=[8,7,6,5] l1=[]

# L1 over target beats L0 at exactly its trigger
L0: 18:b-c 17:c-d 16:h-i 15:m-n
L1: 1:a-b/5K
L2: 2:a-a
=> merge L1->L2 inputs=[1] next=[2]

# L0 beats L1 when its score is higher
L0: 18:b-c 17:c-d 16:h-i 15:m-n 14:a-a 13:a-a 12:a-a 11:a-a
L1: 1:a-b/5K
=> L0->L1 l0=[18,17,16,15,14,13,12,11] l1=[1]

# the level with the highest score wins
L1: 1:a-b/5K
L2: 2:a-b/30K 3:c-d/30K
L3: 4:a-a 5:b-c
=> merge L2->L3 inputs=[2] next=[4,5]

# a file with nothing below it is moved
L1: 1:a-b/5K 2:c-d
L2: 3:c-c
=> move L1->L2 file=1

# round robin starts after the compaction pointer
pointer: L1=b
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c 5:d-e 6:f-g
=> merge L1->L2 inputs=[2] next=[4,5]

# a pointer inside a file's range still picks that file
pointer: L1=c
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c 5:d-e 6:f-g
=> merge L1->L2 inputs=[2] next=[4,5]

# a pointer past the last file wraps to the first
pointer: L1=z
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c
=> merge L1->L2 inputs=[1] next=[4]

# the last level is never compacted
config: levels=3
L2: 1:a-z/1G
=> none

# the level above the last still moves into it
config: levels=3
L1: 1:a-b/5K
=> move L1->L2 file=1

# a small trigger and multiplier change the scores
config: trigger=2 l1=1000 mult=2
L1: 1:a-b/900
L2: 2:a-b/2100
L3: 3:a-a
=> merge L2->L3 inputs=[2] next=[3]
";

    fn run_case(name: &str, body: &str) {
        let mut c = cfg();
        let mut pointers = vec![Vec::new(); NUM_LEVELS];
        let mut tree = String::new();
        let mut expected = None;
        for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("config:") {
                for kv in rest.split_whitespace() {
                    let (k, val) = kv.split_once('=').unwrap();
                    let n: u64 = val.parse().unwrap();
                    match k {
                        "trigger" => c.l0_compaction_trigger = n as usize,
                        "l1" => c.l1_target_bytes = n,
                        "mult" => c.level_multiplier = n,
                        "levels" => c.num_levels = n as usize,
                        other => panic!("{name}: unknown config {other}"),
                    }
                }
            } else if let Some(rest) = line.strip_prefix("pointer:") {
                for kv in rest.split_whitespace() {
                    let (l, k) = kv.split_once('=').unwrap();
                    let l: usize = l.strip_prefix('L').unwrap().parse().unwrap();
                    pointers[l] = pointer_after(k);
                }
            } else if let Some(rest) = line.strip_prefix("=>") {
                expected = Some(rest.trim().to_string());
            } else {
                tree.push_str(line);
                tree.push('\n');
            }
        }
        let v = version(&tree);
        let got = pick(&v, &c, &pointers).map_or_else(|| "none".to_string(), |p| p.describe());
        assert_eq!(got, expected.unwrap(), "case: {name}\n{}", v.describe());
    }

    #[test]
    fn data_driven_picker_cases() {
        let mut n = 0;
        for block in CASES.split("\n# ").skip(1) {
            let (name, body) = block.split_once('\n').unwrap();
            run_case(name, body);
            n += 1;
        }
        assert_eq!(n, 14);
    }

    #[test]
    fn scores_follow_the_level_targets() {
        let v = version("L0: 2:a-b 1:c-d\nL1: 3:a-b/2K\nL2: 4:a-b/80K\nL6: 5:a-b/1G");
        let s = scores(&v, &cfg());
        assert_eq!(s.len(), NUM_LEVELS);
        assert!((s[0] - 0.5).abs() < 1e-9);
        assert!((s[1] - 0.5).abs() < 1e-9);
        assert!((s[2] - 2.0).abs() < 1e-9);
        assert_eq!(s[3], 0.0);
        assert!(s[6] > 1.0, "reported even though never picked");
        assert_eq!(cfg().target_bytes(3), 400 << 10);
        assert_eq!(cfg().target_bytes(0), 0);
        let huge = PickerConfig {
            level_multiplier: u64::MAX,
            ..cfg()
        };
        assert_eq!(huge.target_bytes(6), u64::MAX);
    }

    #[test]
    fn degenerate_config_never_panics() {
        let v = version("L0: 1:a-b");
        let c = PickerConfig {
            l0_compaction_trigger: 0,
            l1_target_bytes: 0,
            level_multiplier: 0,
            num_levels: 0,
        };
        assert!(pick(&v, &c, &[]).is_none());
        let c = PickerConfig {
            num_levels: 100,
            ..c
        };
        assert_eq!(scores(&v, &c).len(), NUM_LEVELS);
        assert_eq!(pick(&v, &c, &[]).unwrap().describe(), "L0->L1 l0=[1] l1=[]");
    }

    #[test]
    fn move_edit_relocates_the_file_and_advances_the_pointer() {
        let v = version("L1: 1:a-b/5K 2:c-d\nL2: 3:c-c");
        let plan = pick(&v, &cfg(), &[]).unwrap();
        assert_eq!(
            plan.compact_pointer(),
            Some((1, v.files(1)[0].largest.clone()))
        );
        let e = plan.move_edit().unwrap();
        let v2 = v.apply(&e).unwrap();
        assert_eq!(v2.describe().lines().nth(1).unwrap(), "L1: 2:c-d");
        assert_eq!(v2.describe().lines().nth(2).unwrap(), "L2: 1:a-b 3:c-c");
        // With the pointer advanced, the next pick starts after file 1.
        let p2 = pick(
            &v2,
            &PickerConfig {
                l1_target_bytes: 1,
                ..cfg()
            },
            &[Vec::new(), pointer_after("b")],
        )
        .unwrap();
        assert_eq!(p2.describe(), "merge L1->L2 inputs=[2] next=[3]");
    }

    #[test]
    fn plan_inputs_list_every_file_with_its_level() {
        let v = version("L0: 5:a-c 4:b-d 3:x-y 2:p-q\nL1: 1:c-e");
        let plan = pick(&v, &cfg(), &[]).unwrap();
        assert_eq!(plan.level(), 0);
        assert_eq!(plan.output_level(), 1);
        let levels: Vec<(usize, u64)> = plan
            .inputs()
            .iter()
            .map(|(l, f)| (*l, f.number.0))
            .collect();
        assert_eq!(levels, vec![(0, 5), (0, 4), (0, 3), (0, 2), (1, 1)]);
        assert_eq!(plan.compact_pointer(), None);
        assert!(plan.move_edit().is_none());
        assert_eq!(plan.input_numbers().len(), 5);
    }

    fn gc_cfg(space_budget: f64) -> BlobGcConfig {
        BlobGcConfig {
            space_budget,
            max_tables: 4,
        }
    }

    fn gc(tree: &str, budget: f64) -> String {
        let v = version(tree);
        pick_blob_gc(&v, &gc_cfg(budget)).map_or_else(|| "none".to_string(), |p| p.describe())
    }

    #[test]
    fn blob_gc_waits_until_the_garbage_passes_the_budget() {
        // 2000 bytes of records, 300 garbage: 2000 <= 1.2 * 1700.
        let tree = "B: 11:1000-200 12:1000-100\nL6: 1:a-c+11 2:d-f+12";
        assert_eq!(gc(tree, 1.2), "none");
        // 1.1 * 1700 = 1870 < 2000: relocate the worse file (11); one is enough.
        assert_eq!(gc(tree, 1.1), "blob-gc L6 inputs=[1] relocate=[11]");
        // No garbage at all, or GC disabled.
        assert_eq!(gc("B: 11:1000-0\nL6: 1:a-c+11", 1.0), "none");
        assert_eq!(gc(tree, f64::INFINITY), "none");
        assert_eq!(gc("", 1.0), "none");
    }

    #[test]
    fn blob_gc_relocates_the_most_garbage_heavy_files_until_the_rest_fits() {
        // 4000 bytes, 1900 garbage, live 2100; budget 1.2 allows 2520. Ratios: 11 0.3, 12 0.8,
        // 13 0.6, 14 0.2. Taking 12 leaves 3200, then 13 leaves 2600, then 11 leaves 2300.
        let tree = "B: 11:1000-300 12:1000-800 13:1000-600 14:1000-200
                    L5: 5:a-z+12
                    L6: 1:a-c+11,12 2:d-f+13 3:g-h+14 4:i-j+12,14";
        assert_eq!(gc(tree, 1.2), "blob-gc L6 inputs=[1,4] relocate=[12,13,11]");
        // Ties on the ratio go to the older file.
        assert_eq!(
            gc("B: 12:1000-500 11:1000-500\nL6: 1:a-c+11 2:d-f+12", 1.0),
            "blob-gc L6 inputs=[1] relocate=[11,12]"
        );
    }

    #[test]
    fn blob_gc_rewrites_the_deepest_level_that_references_the_file() {
        // File 12 is referenced only from L2 and L4: the deeper level goes first.
        let tree = "B: 12:1000-800\nL2: 5:a-c+12 6:d-e+\nL4: 7:a-b+12\nL6: 1:a-z+";
        assert_eq!(gc(tree, 1.2), "blob-gc L4 inputs=[7] relocate=[12]");
        // Once L4 is rewritten, L2 is next.
        let tree = "B: 12:1000-800\nL2: 5:a-c+12 6:d-e+\nL4: 7:a-b+\nL6: 1:a-z+";
        assert_eq!(gc(tree, 1.2), "blob-gc L2 inputs=[5] relocate=[12]");
        // A file no table references (a stale reference list) yields to the next one; with
        // none referenced there is nothing to do (no job that cannot make progress).
        let tree = "B: 12:1000-800 13:1000-700\nL6: 1:a-c+13 2:d-e+";
        assert_eq!(gc(tree, 1.0), "blob-gc L6 inputs=[1] relocate=[12,13]");
        assert_eq!(gc("B: 12:1000-800\nL6: 1:a-c+", 1.0), "none");
    }

    #[test]
    fn blob_gc_takes_tables_without_recorded_references_and_bounds_the_job() {
        // Tables of older manifests may reference anything: rewritten (and recorded) first.
        let tree = "B: 12:1000-800\nL6: 1:a-b 2:c-d+ 3:e-f+12 4:g-h 5:i-j+12 6:k-l+12 7:m-n+12";
        assert_eq!(gc(tree, 1.2), "blob-gc L6 inputs=[1,3,4,5] relocate=[12]");
        let v = version(tree);
        let plan = pick_blob_gc(&v, &gc_cfg(1.2)).unwrap();
        assert_eq!(plan.output_level(), 6);
        assert_eq!(plan.level(), 6);
        assert_eq!(plan.compact_pointer(), None);
        assert!(plan.move_edit().is_none());
        assert_eq!(plan.inputs().len(), 4);
        assert_eq!(blob_space(&v), (1000, 800));
        let one = BlobGcConfig {
            max_tables: 0,
            ..gc_cfg(1.2)
        };
        assert_eq!(pick_blob_gc(&v, &one).unwrap().inputs().len(), 1);
    }

    #[test]
    fn bottommost_means_no_deeper_file_covers_the_key() {
        let v = version("L1: 1:a-z\nL2: 2:c-e\nL4: 3:m-p");
        assert!(!is_bottommost_for(&v, 1, b"d"));
        assert!(is_bottommost_for(&v, 2, b"d"));
        assert!(!is_bottommost_for(&v, 1, b"n"));
        assert!(!is_bottommost_for(&v, 3, b"n"));
        assert!(is_bottommost_for(&v, 4, b"n"));
        assert!(is_bottommost_for(&v, 1, b"f"));
        assert!(is_bottommost_for(&v, NUM_LEVELS - 1, b"a"));
    }

    #[test]
    fn manual_steps_take_the_range_s_files_with_their_next_level_overlaps() {
        let v = version("L1: 1:a-c 2:d-f 3:g-i\nL2: 4:b-b 5:h-z\nL3: 6:a-z");
        let plan = |level, b: Option<&str>, e: Option<&str>| {
            pick_manual(&v, level, b.map(str::as_bytes), e.map(str::as_bytes)).map(|p| p.describe())
        };
        assert_eq!(
            plan(1, None, None).as_deref(),
            Some("merge L1->L2 inputs=[1,2,3] next=[4,5]")
        );
        // [e, g] touches files 2 (d-f) and 3 (g-i) of L1; L2's 5 (h-z) overlaps d-i.
        assert_eq!(
            plan(1, Some("e"), Some("g")).as_deref(),
            Some("merge L1->L2 inputs=[2,3] next=[5]")
        );
        // d-f overlaps nothing in L2: moved down unchanged.
        assert_eq!(
            plan(1, Some("d"), Some("e")).as_deref(),
            Some("move L1->L2 file=2")
        );
        assert_eq!(
            plan(1, Some("j"), Some("k")),
            None,
            "no file of L1 in range"
        );
        assert_eq!(plan(0, None, None), None, "level 0 is not the picker's");
        assert_eq!(deepest_level(&v, &cfg()), 3);
        assert_eq!(deepest_level(&version(""), &cfg()), 0);
    }
}
