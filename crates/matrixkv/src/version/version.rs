//! [`Version`]: an immutable snapshot of which table files make up each level, and
//! [`Builder`], the pure function from (version, edits) to the next version.
//!
//! Level 0 holds tables on the fast tier; they may overlap and are kept newest first
//! (largest sequence number, then file number, descending). Levels 1.. hold tables on the slow
//! tier, sorted by smallest key, and *user-key disjoint*: no user key appears in two files of
//! one level (compaction never splits the versions of a user key across output files), so a
//! point lookup reads at most one file per level.
//!
//! Readers hold an `Arc<Version>` without any lock; a `Version` never changes after it is
//! built (`Send + Sync`). `VersionSet` (under the DB state mutex) builds and installs them.
#![deny(clippy::indexing_slicing)]

use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use crate::error::CorruptionReason;
use crate::key::compare_internal;
use crate::layout::FileNum;

use super::NUM_LEVELS;
use super::edit::{FileMeta, VersionEdit};

/// The set of live table files, per level. Immutable once built.
#[derive(Debug, Default)]
pub struct Version {
    levels: [Vec<Arc<FileMeta>>; NUM_LEVELS],
    /// How many edits were applied since the empty version: lets `VersionSet::install` check
    /// that a prepared version was built from the version it replaces.
    generation: u64,
}

impl Version {
    /// The files of `level` (empty for a level ≥ `NUM_LEVELS`). L0 newest first; L1+ sorted by
    /// key.
    pub fn files(&self, level: usize) -> &[Arc<FileMeta>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// Total bytes of the files of `level`.
    pub fn level_bytes(&self, level: usize) -> u64 {
        self.files(level).iter().map(|f| f.size).sum()
    }

    /// Number of files in `level`.
    pub fn num_files(&self, level: usize) -> usize {
        self.files(level).len()
    }

    /// The number of edits applied since the empty version.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The version that results from applying `edit` to this one. Pure: nothing is installed.
    ///
    /// Deletes are applied before adds (so one edit can move a file between levels). A delete
    /// must name a file present in that level; an added number must not be live already; L1+
    /// must stay user-key disjoint. Violations are [`CorruptionReason::Invalid`].
    pub fn apply(&self, edit: &VersionEdit) -> Result<Version, CorruptionReason> {
        let mut b = Builder::new(self);
        b.apply(edit)?;
        b.build()
    }

    /// Files of `level` whose user-key range intersects `[smallest_user, largest_user]`.
    ///
    /// For L0 the range grows transitively: a file that overlaps the range and extends past it
    /// widens the range, and the search restarts, so the result can be compacted without
    /// leaving an older overlapping L0 file behind (LevelDB `GetOverlappingInputs`). L0 results
    /// are newest first; L1+ results are in key order.
    pub fn overlapping(
        &self,
        level: usize,
        smallest_user: &[u8],
        largest_user: &[u8],
    ) -> Vec<Arc<FileMeta>> {
        let files = self.files(level);
        if level == 0 {
            let mut lo = smallest_user.to_vec();
            let mut hi = largest_user.to_vec();
            let mut out: Vec<Arc<FileMeta>> = Vec::new();
            let mut i = 0;
            // Loop invariant: `out` holds the files before `i` that overlap [lo, hi].
            while let Some(f) = files.get(i) {
                i += 1;
                if !f.overlaps_user_range(&lo, &hi) {
                    continue;
                }
                if f.smallest_user() < lo.as_slice() {
                    lo = f.smallest_user().to_vec();
                    out.clear();
                    i = 0;
                } else if f.largest_user() > hi.as_slice() {
                    hi = f.largest_user().to_vec();
                    out.clear();
                    i = 0;
                } else {
                    out.push(Arc::clone(f));
                }
            }
            out
        } else {
            let start = files.partition_point(|f| f.largest_user() < smallest_user);
            files
                .get(start..)
                .unwrap_or(&[])
                .iter()
                .take_while(|f| f.smallest_user() <= largest_user)
                .cloned()
                .collect()
        }
    }

    /// The files of `level` that may hold `user_key`: for L0 every file whose range covers the
    /// key, newest first; for L1+ at most one file (binary search).
    pub fn files_for_key<'a>(
        &'a self,
        level: usize,
        user_key: &'a [u8],
    ) -> impl Iterator<Item = &'a Arc<FileMeta>> + 'a {
        let files = self.files(level);
        let candidates = if level == 0 {
            files
        } else {
            let i = files.partition_point(|f| f.largest_user() < user_key);
            files.get(i..i.saturating_add(1)).unwrap_or(&[])
        };
        candidates
            .iter()
            .filter(move |f| f.contains_user_key(user_key))
    }

    #[cfg(test)]
    /// The level and metadata of file `number`, if it is in this version.
    pub fn find_file(&self, number: FileNum) -> Option<(usize, &Arc<FileMeta>)> {
        self.levels
            .iter()
            .enumerate()
            .find_map(|(l, files)| files.iter().find(|f| f.number == number).map(|f| (l, f)))
    }

    /// The numbers of every file in this version.
    pub fn all_file_numbers(&self) -> Vec<FileNum> {
        self.levels
            .iter()
            .flat_map(|files| files.iter().map(|f| f.number))
            .collect()
    }

    /// Checks every structural invariant; returns a description of the first violation.
    ///
    /// 1. every file's metadata is valid (keys parse, smallest ≤ largest, seq range ordered);
    /// 2. a file number appears at most once in the version;
    /// 3. L0 is ordered by largest sequence number, then file number, both descending;
    /// 4. each of L1.. is sorted by key and user-key disjoint.
    pub fn check_invariants(&self) -> Result<(), String> {
        let mut seen = HashSet::new();
        for (level, files) in self.levels.iter().enumerate() {
            for f in files {
                f.validate()
                    .map_err(|r| format!("L{level} file {}: {r}", f.number))?;
                if !seen.insert(f.number) {
                    return Err(format!("file {} appears twice", f.number));
                }
            }
            for pair in files.windows(2) {
                let [a, b] = pair else { continue };
                if level == 0 {
                    if (b.largest_seq, b.number) >= (a.largest_seq, a.number) {
                        return Err(format!(
                            "L0 files {} and {} are not newest first",
                            a.number, b.number
                        ));
                    }
                } else if a.largest_user() >= b.smallest_user() {
                    return Err(format!(
                        "L{level} files {} and {} overlap or are out of order",
                        a.number, b.number
                    ));
                }
            }
        }
        Ok(())
    }

    #[cfg(test)]
    /// An ASCII picture, one line per level: `L1: 7:a-f 9:g-k` (number, then the user-key
    /// range; bytes other than printable ASCII, space, `-` and `\` are shown as `\xNN`), `-` for
    /// an empty level.
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (level, files) in self.levels.iter().enumerate() {
            let _ = write!(s, "L{level}:");
            if files.is_empty() {
                s.push_str(" -");
            }
            for f in files {
                let _ = write!(
                    s,
                    " {}:{}-{}",
                    f.number.0,
                    render_key(f.smallest_user()),
                    render_key(f.largest_user())
                );
            }
            s.push('\n');
        }
        s
    }
}

#[cfg(test)]
/// Renders a user key for [`Version::describe`] and test output.
pub fn render_key(key: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(key.len());
    for &b in key {
        if b.is_ascii_graphic() && b != b'-' && b != b'\\' {
            s.push(char::from(b));
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
    }
    s
}

/// Accumulates edits on top of a base version and builds the result once (recovery replays
/// a whole manifest through one builder instead of building a version per edit).
#[derive(Debug)]
pub struct Builder {
    files: HashMap<FileNum, (usize, Arc<FileMeta>)>,
    generation: u64,
}

impl Builder {
    /// A builder starting from `base`.
    pub fn new(base: &Version) -> Builder {
        let mut files = HashMap::new();
        for (level, fs) in base.levels.iter().enumerate() {
            for f in fs {
                files.insert(f.number, (level, Arc::clone(f)));
            }
        }
        Builder {
            files,
            generation: base.generation,
        }
    }

    /// Applies the file changes of `edit`: deletes first, then adds.
    pub fn apply(&mut self, edit: &VersionEdit) -> Result<(), CorruptionReason> {
        for &(level, number) in &edit.deleted_files {
            match self.files.get(&number) {
                Some((l, _)) if *l == level => {
                    self.files.remove(&number);
                }
                _ => {
                    return Err(CorruptionReason::Invalid(
                        "edit deletes a file that is not in the named level",
                    ));
                }
            }
        }
        for (level, meta) in &edit.new_files {
            if *level >= NUM_LEVELS {
                return Err(CorruptionReason::Invalid("level number out of range"));
            }
            meta.validate()?;
            if self.files.contains_key(&meta.number) {
                return Err(CorruptionReason::Invalid(
                    "edit adds a file number that is already live",
                ));
            }
            self.files
                .insert(meta.number, (*level, Arc::new(meta.clone())));
        }
        self.generation += 1;
        Ok(())
    }

    /// Builds the version: L0 newest first, L1+ sorted and checked user-key disjoint.
    pub fn build(self) -> Result<Version, CorruptionReason> {
        let mut levels: [Vec<Arc<FileMeta>>; NUM_LEVELS] = Default::default();
        for (level, f) in self.files.into_values() {
            let slot = levels
                .get_mut(level)
                .ok_or(CorruptionReason::Invalid("level number out of range"))?;
            slot.push(f);
        }
        let mut it = levels.iter_mut();
        if let Some(l0) = it.next() {
            l0.sort_by_key(|f| std::cmp::Reverse((f.largest_seq, f.number)));
        }
        for files in it {
            files.sort_by(|a, b| compare_internal(&a.smallest, &b.smallest));
            for pair in files.windows(2) {
                if let [a, b] = pair
                    && a.largest_user() >= b.smallest_user()
                {
                    return Err(CorruptionReason::Invalid(
                        "files of one level L1+ overlap in user keys",
                    ));
                }
            }
        }
        Ok(Version {
            levels,
            generation: self.generation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::testutil::{file, version};

    fn numbers(files: &[Arc<FileMeta>]) -> Vec<u64> {
        files.iter().map(|f| f.number.0).collect()
    }

    #[test]
    fn apply_adds_and_orders_each_level() {
        let v = version(
            "L0: 4:a-c@4 5:b-d@5 3:x-z@9\n\
             L1: 2:m-p 1:a-f",
        );
        assert_eq!(
            v.describe(),
            "L0: 3:x-z 5:b-d 4:a-c\nL1: 1:a-f 2:m-p\nL2: -\nL3: -\nL4: -\nL5: -\nL6: -\n"
        );
        v.check_invariants().unwrap();
        assert_eq!(v.num_files(0), 3);
        assert_eq!(v.level_bytes(1), 2 * 1024);
        assert_eq!(v.files(NUM_LEVELS).len(), 0);
    }

    #[test]
    fn l0_ties_on_sequence_are_broken_by_file_number() {
        let v = version("L0: 4:a-c@7 6:b-d@7 5:x-z@7");
        assert_eq!(numbers(v.files(0)), vec![6, 5, 4]);
    }

    #[test]
    fn delete_then_add_moves_a_file_between_levels() {
        let v = version("L1: 1:a-f 2:g-k\nL2: 3:a-c");
        let mut e = VersionEdit::default();
        let moved = v.files(1)[1].as_ref().clone();
        e.delete_file(1, FileNum(2));
        e.add_file(2, moved);
        let v2 = v.apply(&e).unwrap();
        assert_eq!(v2.describe().lines().nth(1).unwrap(), "L1: 1:a-f");
        assert_eq!(v2.describe().lines().nth(2).unwrap(), "L2: 3:a-c 2:g-k");
        assert_eq!(v2.generation(), v.generation() + 1);
        // The base is untouched.
        assert_eq!(v.num_files(1), 2);
    }

    #[test]
    fn deleting_a_missing_file_or_from_the_wrong_level_is_invalid() {
        let v = version("L1: 1:a-f");
        let mut e = VersionEdit::default();
        e.delete_file(1, FileNum(9));
        assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
        let mut e = VersionEdit::default();
        e.delete_file(2, FileNum(1));
        assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
    }

    #[test]
    fn adding_a_live_number_twice_is_invalid() {
        let v = version("L1: 1:a-f");
        let mut e = VersionEdit::default();
        e.add_file(3, file("1:x-y"));
        assert!(matches!(v.apply(&e), Err(CorruptionReason::Invalid(_))));
    }

    #[test]
    fn overlapping_files_in_l1_are_invalid() {
        let v = version("L1: 1:a-f");
        for spec in ["2:e-k", "2:f-k", "2:0-a", "2:b-c"] {
            let mut e = VersionEdit::default();
            e.add_file(1, file(spec));
            assert_eq!(
                v.apply(&e).err(),
                Some(CorruptionReason::Invalid(
                    "files of one level L1+ overlap in user keys"
                )),
                "{spec}"
            );
        }
        // Touching ranges in L0 are fine.
        let mut e = VersionEdit::default();
        e.add_file(0, file("2:a-f"));
        e.add_file(0, file("3:a-f"));
        assert!(v.apply(&e).is_ok());
    }

    #[test]
    fn overlapping_in_l1_is_a_contiguous_key_range() {
        let v = version("L1: 1:a-c 2:e-g 3:i-k 4:m-o");
        assert_eq!(numbers(&v.overlapping(1, b"d", b"i")), vec![2, 3]);
        assert_eq!(numbers(&v.overlapping(1, b"c", b"c")), vec![1]);
        assert_eq!(numbers(&v.overlapping(1, b"p", b"z")), Vec::<u64>::new());
        assert_eq!(numbers(&v.overlapping(1, b"0", b"z")), vec![1, 2, 3, 4]);
        assert_eq!(numbers(&v.overlapping(1, b"d", b"d")), Vec::<u64>::new());
    }

    #[test]
    fn overlapping_in_l0_expands_transitively() {
        // 7 overlaps [e,e]; it widens the range to [d,h], which pulls in 6 ([g,k]) and then
        // 5 ([a,d]); 8 stays out.
        let v = version("L0: 8:x-z@8 7:d-h@7 6:g-k@6 5:a-d@5");
        assert_eq!(numbers(&v.overlapping(0, b"e", b"e")), vec![7, 6, 5]);
        assert_eq!(numbers(&v.overlapping(0, b"x", b"x")), vec![8]);
        assert_eq!(numbers(&v.overlapping(0, b"l", b"w")), Vec::<u64>::new());
    }

    #[test]
    fn files_for_key_finds_covering_files() {
        let v = version("L0: 3:a-m@3 2:k-z@2 1:a-c@1\nL2: 4:a-c 5:e-g");
        let l0: Vec<u64> = v.files_for_key(0, b"l").map(|f| f.number.0).collect();
        assert_eq!(l0, vec![3, 2]);
        let l2: Vec<u64> = v.files_for_key(2, b"f").map(|f| f.number.0).collect();
        assert_eq!(l2, vec![5]);
        assert_eq!(v.files_for_key(2, b"d").count(), 0);
        assert_eq!(v.files_for_key(2, b"zz").count(), 0);
        assert_eq!(v.files_for_key(5, b"a").count(), 0);
    }

    #[test]
    fn find_file_and_all_file_numbers_cover_every_level() {
        let v = version("L0: 3:a-m\nL4: 9:a-c");
        assert_eq!(v.find_file(FileNum(9)).map(|(l, _)| l), Some(4));
        assert!(v.find_file(FileNum(1)).is_none());
        let mut all = v.all_file_numbers();
        all.sort();
        assert_eq!(all, vec![FileNum(3), FileNum(9)]);
    }

    #[test]
    fn check_invariants_reports_a_broken_version() {
        let mut v = version("L1: 1:a-f 2:g-k");
        v.check_invariants().unwrap();
        v.levels[1] = vec![Arc::new(file("3:a-f")), Arc::new(file("4:c-z"))];
        let err = v.check_invariants().unwrap_err();
        assert!(err.contains("overlap"), "{err}");
        let mut v = version("L0: 1:a-f@1 2:a-f@2");
        v.levels[0].reverse();
        assert!(v.check_invariants().unwrap_err().contains("newest first"));
        let mut v = version("L1: 1:a-f\nL2: 2:a-f");
        v.levels[2] = vec![Arc::new(file("1:a-f"))];
        assert!(v.check_invariants().unwrap_err().contains("twice"));
    }

    #[test]
    fn describe_escapes_unprintable_bytes() {
        assert_eq!(render_key(b"a-b\x00 \\"), "a\\x2db\\x00\\x20\\x5c");
    }
}
