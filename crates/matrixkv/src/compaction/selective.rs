//! SLM-DB's selective compaction picker (Kaiyrakhmet et al., FAST 2019, §3.3): which files of
//! the single, overlapping level of SSTables the next compaction merges.
//!
//! SLM-DB keeps one level of SSTables whose key ranges may overlap, and a global index that maps
//! every live key to the file holding its newest version. A file's *live keys* are the index
//! entries pointing into it; its *live ratio* is live keys ÷ entries (a file with no entries
//! has ratio 0).
//!
//! Rules, with the paper's §3.3 behind each:
//!
//! 1. **Candidates** ([`candidates`]). The paper keeps a compaction candidate list fed by three
//!    selection schemes: the live-key ratio (a file below the *live-key threshold* holds too
//!    much garbage), the B+-tree leaf scan and the sequentiality of range queries (files one
//!    run of keys points into too many of). Here the candidates are the files of `files` whose
//!    live ratio is below [`SelectiveConfig::live_key_ratio`], plus those the caller's leaf-scan
//!    and range-query triggers put in `extra`; numbers in `extra` that name no file of `files`
//!    are ignored (the file is gone). A file without live keys has ratio 0, so it is a
//!    candidate at any threshold above 0 (`SlmDbOptions` requires one in `(0, 1]`).
//! 2. **Trigger.** The paper schedules a compaction when the candidate list grows past a
//!    threshold. Here it runs once there are at least (not more than)
//!    [`SelectiveConfig::candidate_trigger`] candidates, *or* as soon as some candidate has no
//!    live key at all (deviation: such a file is pure garbage, dropped without writing
//!    anything, so it is always worth it).
//! 3. **Garbage first** (deviation). If candidates without live keys exist, the compaction
//!    takes up to [`SelectiveConfig::max_merge_files`] of them (lowest numbers first) and
//!    nothing else: their compaction writes no output.
//! 4. **Overlap ratio** ([`overlap_ratio`]). For files `s` and `t` with user-key ranges
//!    `[s_1, s_p]` and `[t_1, t_q]` the paper's ratio is
//!    `(MIN(s_p, t_q) − MAX(s_1, t_1)) / (MAX(s_p, t_q) − MIN(s_1, t_1))`, set to 0 when
//!    negative. The paper's keys are numbers; ours are byte strings, so each of the four keys is
//!    mapped to the number formed by the 8 bytes that follow the four keys' common prefix (zero
//!    padded, big-endian). The differences are taken exactly (in `i128`) before the division.
//!    The mapping is monotone but coarse: keys that agree on the 8 bytes after the prefix map to
//!    the same number, and the ratio is linear in the bytes, not in, say, decimal digits.
//!    Consequences, all within `[0, 1]` and never NaN:
//!    - disjoint ranges give 0; ranges that touch only at an endpoint (`[a, c]` and `[c, e]`)
//!      also give exactly 0: the intersection has length 0 (they share at most one key);
//!    - a range inside another gives `len_inner / len_outer`, so a single-key range inside a
//!      wider one gives 0;
//!    - when the union has length 0 (both ranges the same single point, or all four keys equal
//!      after the mapping) the ratio is 1 if the byte ranges intersect and 0 otherwise;
//!    - a range whose smallest key is above its largest (not a valid [`FileMeta`]) is read
//!      with its ends swapped.
//! 5. **Choosing `s'`.** As in the paper, each candidate's total is the sum of its overlap
//!    ratios with the other candidates, and `s'` is the candidate with the largest total (ties,
//!    not in the paper: lower live ratio, then lower file number). The paper limits the number
//!    of files merged at once so that foreground operations do not suffer but does not say
//!    which files join `s'`; here they are the other candidates whose ratio with `s'` is above
//!    0, in descending ratio order (ties: lower number first), `s'` included, at most
//!    [`SelectiveConfig::max_merge_files`] in all.
//! 6. **A lone `s'`** (deviation). If `s'` overlaps no other candidate, merging gains no
//!    sequentiality: it is compacted alone only if its live ratio is below the threshold
//!    (rewriting it drops its garbage); otherwise the next candidate in the same order is
//!    tried, and if none qualifies there is no compaction.
//! 7. **Result.** The inputs, sorted by file number, distinct, a subset of the candidates, at
//!    least 1 and at most `max_merge_files` of them (0 counts as 1). [`Reason::Garbage`] when
//!    any input's live ratio is below the threshold, [`Reason::Sequentiality`] otherwise.
//!
//! Pure: a function of the files, the live-key counts, the extra candidates and the
//! configuration. No I/O, no state; never panics (any input, including empty keys, zero
//! entries, NaN thresholds and a zero trigger or cap). Each pick costs O(n²) overlap ratios for
//! n candidates.
#![cfg_attr(
    not(test),
    allow(dead_code, reason = "wired into the SLM-DB engine next")
)]
#![deny(clippy::indexing_slicing)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::version::FileMeta;

/// Knobs of selective compaction.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SelectiveConfig {
    /// A file whose live keys / entries falls below this is a candidate (paper default 0.7).
    pub live_key_ratio: f64,
    /// Compaction runs once this many files are candidates (≥1).
    pub candidate_trigger: usize,
    /// At most this many files are merged by one compaction (≥1; the paper limits it so
    /// foreground operations are not hurt). 0 counts as 1.
    pub max_merge_files: usize,
}

/// Why a [`Pick`] was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reason {
    /// Some input has no live key, or a live ratio below `live_key_ratio`: the compaction
    /// reclaims space.
    Garbage,
    /// Every input is healthy: the compaction only merges overlapping files (candidates of the
    /// leaf-scan or range-query triggers) to make their keys sequential.
    Sequentiality,
}

/// The files one selective compaction merges.
#[derive(Debug, Clone)]
pub(crate) struct Pick {
    /// The inputs, sorted by file number, distinct, never empty.
    pub inputs: Vec<Arc<FileMeta>>,
    /// Why they were picked.
    pub reason: Reason,
}

/// One candidate file with its live-key count and live ratio.
struct Cand<'a> {
    file: &'a Arc<FileMeta>,
    number: u64,
    live: u64,
    ratio: f64,
}

impl Cand<'_> {
    /// True if the live ratio is below the threshold (false for a NaN threshold).
    fn below(&self, cfg: &SelectiveConfig) -> bool {
        self.ratio < cfg.live_key_ratio
    }
}

/// Live keys ÷ entries; 0 for a file without entries.
fn live_ratio(entries: u64, live: u64) -> f64 {
    if entries == 0 {
        0.0
    } else {
        live as f64 / entries as f64
    }
}

/// The candidates, ordered by file number (the first file of `files` wins for a repeated
/// number).
fn candidate_files<'a>(
    files: &'a [Arc<FileMeta>],
    live_keys: &HashMap<u64, u64>,
    extra: &BTreeSet<u64>,
    cfg: &SelectiveConfig,
) -> Vec<Cand<'a>> {
    let mut by_number: BTreeMap<u64, &'a Arc<FileMeta>> = BTreeMap::new();
    for f in files {
        by_number.entry(f.number.0).or_insert(f);
    }
    by_number
        .into_iter()
        .filter_map(|(number, file)| {
            let live = live_keys.get(&number).copied().unwrap_or(0);
            let ratio = live_ratio(file.entries, live);
            (extra.contains(&number) || ratio < cfg.live_key_ratio).then_some(Cand {
                file,
                number,
                live,
                ratio,
            })
        })
        .collect()
}

/// The numbers of the candidate files: the files of `files` in `extra`, and those whose live
/// ratio (`live_keys[number]` ÷ entries; missing = 0 live keys, 0 entries = ratio 0) is below
/// `cfg.live_key_ratio`. See the module doc, rule 1.
pub(crate) fn candidates(
    files: &[Arc<FileMeta>],
    live_keys: &HashMap<u64, u64>,
    extra: &BTreeSet<u64>,
    cfg: &SelectiveConfig,
) -> BTreeSet<u64> {
    candidate_files(files, live_keys, extra, cfg)
        .iter()
        .map(|c| c.number)
        .collect()
}

/// The next selective compaction, or `None` when the trigger is not reached or no candidate
/// qualifies. See the module doc, rules 2–7.
pub(crate) fn pick(
    files: &[Arc<FileMeta>],
    live_keys: &HashMap<u64, u64>,
    extra: &BTreeSet<u64>,
    cfg: &SelectiveConfig,
) -> Option<Pick> {
    let cands = candidate_files(files, live_keys, extra, cfg);
    let max = cfg.max_merge_files.max(1);
    let has_dead = cands.iter().any(|c| c.live == 0);
    if cands.len() < cfg.candidate_trigger && !has_dead {
        return None;
    }
    if has_dead {
        let inputs: Vec<Arc<FileMeta>> = cands
            .iter()
            .filter(|c| c.live == 0)
            .take(max)
            .map(|c| Arc::clone(c.file))
            .collect();
        return Some(Pick {
            inputs,
            reason: Reason::Garbage,
        });
    }
    // ratios[i][j] = overlap_ratio(cands[i], cands[j]), 0 on the diagonal.
    let ratios: Vec<Vec<f64>> = cands
        .iter()
        .map(|s| {
            cands
                .iter()
                .map(|t| {
                    if s.number == t.number {
                        0.0
                    } else {
                        overlap_ratio(s.file, t.file)
                    }
                })
                .collect()
        })
        .collect();
    let mut order: Vec<(&Cand<'_>, &Vec<f64>, f64)> = cands
        .iter()
        .zip(&ratios)
        .map(|(c, row)| (c, row, row.iter().sum::<f64>()))
        .collect();
    order.sort_by(|a, b| {
        b.2.total_cmp(&a.2)
            .then(a.0.ratio.total_cmp(&b.0.ratio))
            .then(a.0.number.cmp(&b.0.number))
    });
    for (s, row, _) in order {
        let mut others: Vec<(&Cand<'_>, f64)> = cands
            .iter()
            .zip(row.iter().copied())
            .filter(|(t, r)| t.number != s.number && *r > 0.0)
            .collect();
        if others.is_empty() && !s.below(cfg) {
            continue;
        }
        others.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.number.cmp(&b.0.number)));
        let mut chosen: Vec<&Cand<'_>> = std::iter::once(s)
            .chain(others.into_iter().map(|(t, _)| t))
            .take(max)
            .collect();
        chosen.sort_by_key(|c| c.number);
        let reason = if chosen.iter().any(|c| c.below(cfg)) {
            Reason::Garbage
        } else {
            Reason::Sequentiality
        };
        return Some(Pick {
            inputs: chosen.iter().map(|c| Arc::clone(c.file)).collect(),
            reason,
        });
    }
    None
}

/// The paper's overlap ratio of the user-key ranges of `a` and `b`, in `[0, 1]`: intersection
/// length ÷ union length, with keys mapped to numbers (module doc, rule 4). Symmetric.
pub(crate) fn overlap_ratio(a: &FileMeta, b: &FileMeta) -> f64 {
    range_overlap_ratio(
        a.smallest_user(),
        a.largest_user(),
        b.smallest_user(),
        b.largest_user(),
    )
}

/// [`overlap_ratio`] of `[s1, sp]` and `[t1, tq]`.
fn range_overlap_ratio(s1: &[u8], sp: &[u8], t1: &[u8], tq: &[u8]) -> f64 {
    let (s1, sp) = if s1 <= sp { (s1, sp) } else { (sp, s1) };
    let (t1, tq) = if t1 <= tq { (t1, tq) } else { (tq, t1) };
    let prefix = common_prefix_len(&[s1, sp, t1, tq]);
    let [s1n, spn, t1n, tqn] = [s1, sp, t1, tq].map(|k| key_number(k, prefix));
    let inter = i128::from(spn.min(tqn)) - i128::from(s1n.max(t1n));
    let union = i128::from(spn.max(tqn)) - i128::from(s1n.min(t1n));
    if union <= 0 {
        // All four keys map to one number: decide by the bytes.
        return if s1 <= tq && t1 <= sp { 1.0 } else { 0.0 };
    }
    if inter <= 0 {
        return 0.0;
    }
    (inter as f64 / union as f64).clamp(0.0, 1.0)
}

/// Length of the longest prefix shared by every key.
fn common_prefix_len(keys: &[&[u8]]) -> usize {
    let Some((first, rest)) = keys.split_first() else {
        return 0;
    };
    rest.iter()
        .map(|k| {
            first
                .iter()
                .zip(k.iter())
                .take_while(|(a, b)| a == b)
                .count()
        })
        .min()
        .unwrap_or(first.len())
}

/// The 8 bytes of `key` after `prefix` bytes, zero padded, as a big-endian number.
fn key_number(key: &[u8], prefix: usize) -> u64 {
    key.iter()
        .skip(prefix)
        .chain(std::iter::repeat(&0u8))
        .take(8)
        .fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use crate::layout::FileNum;

    /// A file numbered `number` with user keys `[lo, hi]` and `entries` entries.
    fn file_b(number: u64, lo: &[u8], hi: &[u8], entries: u64) -> Arc<FileMeta> {
        Arc::new(FileMeta {
            number: FileNum(number),
            size: 1024,
            smallest: make_internal_key(lo, SeqNo(number), ValueKind::Value),
            largest: make_internal_key(hi, SeqNo(number), ValueKind::Value),
            smallest_seq: SeqNo(number),
            largest_seq: SeqNo(number),
            entries,
            blob_refs: None,
        })
    }

    fn file(number: u64, lo: &str, hi: &str, entries: u64) -> Arc<FileMeta> {
        file_b(number, lo.as_bytes(), hi.as_bytes(), entries)
    }

    fn cfg(trigger: usize, max: usize) -> SelectiveConfig {
        SelectiveConfig {
            live_key_ratio: 0.7,
            candidate_trigger: trigger,
            max_merge_files: max,
        }
    }

    fn live(pairs: &[(u64, u64)]) -> HashMap<u64, u64> {
        pairs.iter().copied().collect()
    }

    fn set(nums: &[u64]) -> BTreeSet<u64> {
        nums.iter().copied().collect()
    }

    fn numbers(p: &Pick) -> Vec<u64> {
        p.inputs.iter().map(|f| f.number.0).collect()
    }

    fn ratio(a: (&str, &str), b: (&str, &str)) -> f64 {
        overlap_ratio(&file(1, a.0, a.1, 1), &file(2, b.0, b.1, 1))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn candidates_are_low_live_ratio_files_and_extra_files() {
        let files = [
            file(1, "a", "b", 10),
            file(2, "c", "d", 10),
            file(3, "e", "f", 10),
            file(4, "g", "h", 0),
        ];
        // 1: 0.5 < 0.7; 2: 0.7 is not below; 3: healthy but in extra; 4: no entries = ratio 0.
        let lk = live(&[(1, 5), (2, 7), (3, 10), (4, 3)]);
        let c = candidates(&files, &lk, &set(&[3]), &cfg(1, 8));
        assert_eq!(c, set(&[1, 3, 4]));
    }

    #[test]
    fn extra_numbers_not_in_files_are_ignored() {
        let files = [file(1, "a", "b", 10), file(2, "c", "d", 10)];
        let lk = live(&[(1, 10), (2, 10)]);
        let extra = set(&[2, 7, 99]);
        assert_eq!(candidates(&files, &lk, &extra, &cfg(1, 8)), set(&[2]));
        // Two extra numbers but only one real candidate: below a trigger of 2.
        assert!(pick(&files, &lk, &extra, &cfg(2, 8)).is_none());
    }

    #[test]
    fn no_pick_below_the_trigger() {
        let files = [
            file(1, "a", "d", 10),
            file(2, "b", "e", 10),
            file(3, "x", "z", 10),
        ];
        let lk = live(&[(1, 1), (2, 1), (3, 10)]);
        assert!(pick(&files, &lk, &BTreeSet::new(), &cfg(3, 8)).is_none());
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(2, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
        assert_eq!(p.reason, Reason::Garbage);
        // Nothing at all.
        assert!(pick(&[], &HashMap::new(), &BTreeSet::new(), &cfg(0, 8)).is_none());
    }

    #[test]
    fn zero_live_files_are_picked_first_and_capped() {
        let files = [
            file(5, "a", "z", 10),
            file(4, "b", "y", 10),
            file(3, "m", "n", 10),
            file(2, "p", "q", 10),
            file(1, "r", "s", 10),
        ];
        // 5 and 4 overlap heavily, but 3, 2 and 1 hold no live key (1 is missing from the map).
        let lk = live(&[(5, 1), (4, 1), (3, 0), (2, 0)]);
        // One dead file is enough to run below the trigger.
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(100, 2)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
        assert_eq!(p.reason, Reason::Garbage);
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(100, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2, 3]);
    }

    #[test]
    fn the_most_overlapping_candidate_is_chosen_with_its_overlapping_candidates() {
        // 2 (c-g) overlaps 1 (a-e) and 3 (f-k); 4 (x-z) overlaps nothing.
        let files = [
            file(1, "a", "e", 10),
            file(2, "c", "g", 10),
            file(3, "f", "k", 10),
            file(4, "x", "z", 10),
        ];
        let lk = live(&[(1, 5), (2, 5), (3, 5), (4, 5)]);
        let all = candidates(&files, &lk, &BTreeSet::new(), &cfg(4, 8));
        assert_eq!(all, set(&[1, 2, 3, 4]));
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(4, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2, 3]);
        assert_eq!(p.reason, Reason::Garbage);
    }

    #[test]
    fn healthy_overlapping_candidates_are_merged_for_sequentiality() {
        let files = [
            file(1, "a", "e", 10),
            file(2, "c", "g", 10),
            file(3, "x", "z", 10),
        ];
        let lk = live(&[(1, 10), (2, 9), (3, 10)]);
        let p = pick(&files, &lk, &set(&[1, 2, 3]), &cfg(3, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
        assert_eq!(p.reason, Reason::Sequentiality);
    }

    #[test]
    fn the_cap_keeps_the_most_overlapping_partners() {
        // s' = 1 (a-z) contains the other, pairwise disjoint, ranges; its ratios: 2 (a-l)
        // 11/25, 3 (m-r) 5/25, 5 (v-x) 2/25, 4 (s-t) 1/25.
        let files = [
            file(1, "a", "z", 10),
            file(2, "a", "l", 10),
            file(3, "m", "r", 10),
            file(4, "s", "t", 10),
            file(5, "v", "x", 10),
        ];
        let lk = live(&[(1, 5), (2, 5), (3, 5), (4, 5), (5, 5)]);
        let none = BTreeSet::new();
        let got = |max| numbers(&pick(&files, &lk, &none, &cfg(5, max)).unwrap());
        assert_eq!(got(3), [1, 2, 3]);
        assert_eq!(got(4), [1, 2, 3, 5]);
        assert_eq!(got(8), [1, 2, 3, 4, 5]);
        assert_eq!(got(1), [1]);
        assert_eq!(got(0), [1], "a cap of 0 counts as 1");
    }

    #[test]
    fn ties_go_to_the_lower_live_ratio_then_the_lower_number() {
        // Two disjoint identical pairs: every file's total is 1.
        let files = [
            file(1, "a", "c", 10),
            file(2, "a", "c", 10),
            file(3, "x", "z", 10),
            file(4, "x", "z", 10),
        ];
        let lk = live(&[(1, 6), (2, 6), (3, 6), (4, 6)]);
        let none = BTreeSet::new();
        assert_eq!(
            numbers(&pick(&files, &lk, &none, &cfg(4, 8)).unwrap()),
            [1, 2]
        );
        let lk = live(&[(1, 6), (2, 6), (3, 6), (4, 2)]);
        assert_eq!(
            numbers(&pick(&files, &lk, &none, &cfg(4, 8)).unwrap()),
            [3, 4]
        );
    }

    #[test]
    fn a_healthy_candidate_overlapping_no_other_is_skipped() {
        // 1 is healthy (leaf-scan candidate) and alone; 2 is garbage-heavy and alone too.
        let files = [file(1, "a", "c", 10), file(2, "x", "z", 10)];
        let lk = live(&[(1, 10), (2, 6)]);
        let p = pick(&files, &lk, &set(&[1]), &cfg(2, 8)).unwrap();
        assert_eq!(numbers(&p), vec![2]);
        // Both healthy and disjoint: nothing worth doing.
        let lk = live(&[(1, 10), (2, 10)]);
        assert!(pick(&files, &lk, &set(&[1, 2]), &cfg(2, 8)).is_none());
        // A lone healthy extra candidate alone is skipped, too.
        assert!(pick(&files, &lk, &set(&[1]), &cfg(1, 8)).is_none());
    }

    #[test]
    fn a_lone_garbage_heavy_candidate_is_picked_alone() {
        let files = [file(1, "a", "c", 10), file(2, "b", "z", 10)];
        let lk = live(&[(1, 3), (2, 10)]);
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(1, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1], "2 overlaps 1 but is no candidate");
        assert_eq!(p.reason, Reason::Garbage);
    }

    #[test]
    fn repeated_file_numbers_are_taken_once() {
        let files = [
            file(1, "a", "c", 10),
            file(1, "a", "c", 10),
            file(2, "b", "d", 10),
        ];
        let lk = live(&[(1, 5), (2, 5)]);
        let p = pick(&files, &lk, &BTreeSet::new(), &cfg(2, 8)).unwrap();
        assert_eq!(numbers(&p), vec![1, 2]);
    }

    #[test]
    fn overlap_ratio_of_disjoint_and_touching_ranges_is_zero() {
        assert_eq!(ratio(("a", "b"), ("c", "d")), 0.0);
        assert_eq!(ratio(("c", "d"), ("a", "b")), 0.0);
        assert_eq!(ratio(("a", "c"), ("c", "e")), 0.0, "touching at one key");
        assert_eq!(ratio(("a", "a"), ("b", "b")), 0.0);
    }

    #[test]
    fn overlap_ratio_of_identical_ranges_is_one() {
        assert_eq!(ratio(("b", "d"), ("b", "d")), 1.0);
        assert_eq!(ratio(("c", "c"), ("c", "c")), 1.0, "one single point");
        assert_eq!(ratio(("", ""), ("", "")), 1.0, "empty keys");
        assert_eq!(
            ratio(("k", "k"), ("k\0", "k\0")),
            0.0,
            "distinct points that map to one number"
        );
    }

    #[test]
    fn overlap_ratio_of_nested_ranges_is_inner_over_outer() {
        // [b, c] inside [a, e]: 1/4.
        assert!(close(ratio(("a", "e"), ("b", "c")), 0.25));
        assert!(close(ratio(("b", "c"), ("a", "e")), 0.25));
        // A single key inside a range has length 0.
        assert_eq!(ratio(("a", "e"), ("c", "c")), 0.0);
        // Sharing one end: [a, b] inside [a, e].
        assert!(close(ratio(("a", "e"), ("a", "b")), 0.25));
    }

    #[test]
    fn overlap_ratio_of_partially_overlapping_ranges() {
        // [a, c] and [b, d]: (c - b) / (d - a) = 1/3.
        assert!(close(ratio(("a", "c"), ("b", "d")), 1.0 / 3.0));
        assert!(close(ratio(("b", "d"), ("a", "c")), 1.0 / 3.0));
        // Zero padding: "a\x80" is halfway between "a" and "b".
        assert!(close(ratio(("a", "b"), ("a\u{0}", "b")), 1.0));
        let r = overlap_ratio(&file_b(1, b"a", b"b", 1), &file_b(2, b"a\x80", b"b", 1));
        assert!(close(r, 0.5));
    }

    #[test]
    fn overlap_ratio_skips_the_shared_prefix() {
        // A 20-byte shared prefix: only the bytes after it count.
        let p = "user:0000000000:item:";
        let k = |s: &str| format!("{p}{s}");
        assert!(close(
            ratio((&k("a"), &k("c")), (&k("b"), &k("d"))),
            1.0 / 3.0
        ));
        assert!(close(ratio((&k("a"), &k("e")), (&k("b"), &k("c"))), 0.25));
        assert_eq!(ratio((&k("a"), &k("b")), (&k("c"), &k("d"))), 0.0);
        // The 8th byte after the prefix counts and the 9th does not; differences between
        // numbers far from zero stay exact (they are taken as integers before dividing).
        let key = |tail: &[u8]| [p.as_bytes(), b"\x61\xff\xff\xff\xff\xff\xff", tail].concat();
        let (s1, sp, t1, tq) = (key(b"\xfc"), key(b"\xfe"), key(b"\xfd"), k("b"));
        // s1..tq spans 4, s1..sp and t1..tq share 1: 1/4.
        let r = overlap_ratio(&file_b(1, &s1, &sp, 1), &file_b(2, &t1, tq.as_bytes(), 1));
        assert!(close(r, 0.25), "{r}");
        let t1_longer = key(b"\xfd\x55\x55");
        let r = overlap_ratio(
            &file_b(1, &s1, &sp, 1),
            &file_b(2, &t1_longer, tq.as_bytes(), 1),
        );
        assert!(close(r, 0.25), "{r}");
    }

    #[test]
    fn overlap_ratio_reads_reversed_ranges_with_their_ends_swapped() {
        assert!(close(ratio(("c", "a"), ("b", "d")), 1.0 / 3.0));
    }

    /// SplitMix64: a small deterministic generator for the property test.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }

        fn key(&mut self) -> Vec<u8> {
            let len = self.below(5) as usize;
            let alphabet = [0u8, 1, b'a', b'b', b'c', 0x7f, 0xff];
            (0..len)
                .map(|_| alphabet[self.below(alphabet.len() as u64) as usize])
                .collect()
        }
    }

    #[test]
    fn random_inputs_give_well_formed_picks_and_never_panic() {
        let mut rng = Rng(0x5eed);
        let ratios = [0.0, 0.3, 0.7, 1.0, 1.5, f64::NAN];
        let (mut garbage, mut sequential) = (0, 0);
        for round in 0..3000 {
            let n = rng.below(12);
            let mut files = Vec::new();
            let mut lk = HashMap::new();
            for _ in 0..n {
                let number = rng.below(16);
                let (mut lo, mut hi) = (rng.key(), rng.key());
                if rng.below(10) != 0 && lo > hi {
                    std::mem::swap(&mut lo, &mut hi);
                }
                let entries = rng.below(12);
                files.push(file_b(number, &lo, &hi, entries));
                if rng.below(4) != 0 {
                    lk.insert(number, rng.below(14));
                }
            }
            let extra: BTreeSet<u64> = (0..rng.below(5)).map(|_| rng.below(20)).collect();
            let c = SelectiveConfig {
                live_key_ratio: ratios[rng.below(ratios.len() as u64) as usize],
                candidate_trigger: rng.below(6) as usize,
                max_merge_files: rng.below(5) as usize,
            };
            let cands = candidates(&files, &lk, &extra, &c);
            assert!(cands.iter().all(|n| files.iter().any(|f| f.number.0 == *n)));
            let dead = |n: u64| lk.get(&n).copied().unwrap_or(0) == 0;
            let has_dead = cands.iter().any(|&n| dead(n));
            let Some(p) = pick(&files, &lk, &extra, &c) else {
                continue;
            };
            let nums = numbers(&p);
            assert!(!nums.is_empty(), "round {round}");
            assert!(nums.len() <= c.max_merge_files.max(1), "round {round}");
            assert!(
                nums.windows(2).all(|w| w[0] < w[1]),
                "round {round}: {nums:?}"
            );
            assert!(nums.iter().all(|n| cands.contains(n)), "round {round}");
            assert!(
                cands.len() >= c.candidate_trigger || has_dead,
                "round {round}"
            );
            if has_dead {
                assert!(nums.iter().all(|&n| dead(n)), "round {round}");
                assert_eq!(p.reason, Reason::Garbage);
            }
            match p.reason {
                Reason::Garbage => garbage += 1,
                Reason::Sequentiality => sequential += 1,
            }
        }
        assert!(garbage > 100 && sequential > 20, "{garbage} {sequential}");
        // Overlap ratios of random ranges: within [0, 1], symmetric.
        for _ in 0..3000 {
            let a = file_b(1, &rng.key(), &rng.key(), 1);
            let b = file_b(2, &rng.key(), &rng.key(), 1);
            let r = overlap_ratio(&a, &b);
            assert!((0.0..=1.0).contains(&r), "{r}");
            assert_eq!(r.to_bits(), overlap_ratio(&b, &a).to_bits());
        }
    }
}
