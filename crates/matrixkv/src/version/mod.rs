//! Versions: which table files and container rows make up the tree, how that changes, and the
//! manifest that makes the changes durable.
//!
//! - [`edit`]: [`VersionEdit`] (one change, the manifest record payload), [`FileMeta`] and
//!   [`ColumnDone`];
//! - [`version`]: [`Version`], an immutable file set plus the matrix [`Container`] (rows,
//!   roles, [`Drain`] progress), and the pure edit application;
//! - [`set`]: [`VersionSet`], the current version plus counters, kept under the DB state
//!   mutex; [`Replay`] rebuilds it from edits;
//! - [`manifest`]: the edit log on the slow tier, the CURRENT pointer and recovery.
//!
//! Everything except [`manifest`] is pure in-memory work. Format: docs/format/manifest.md.

pub mod edit;
pub mod manifest;
pub mod set;
#[expect(
    clippy::module_inception,
    reason = "the task layout names the file version/version.rs"
)]
pub mod version;

pub use edit::{ColumnDone, FileMeta, VersionEdit};
pub use version::{Drain, Version};

/// Number of levels: L0 on the fast tier, L1..L6 on the slow tier.
// FORMAT: level numbers ≥ this are rejected by the manifest decoder; see docs/format/manifest.md
pub const NUM_LEVELS: usize = 7;

/// Test helpers: versions and files from a compact text form.
///
/// A version is one line per non-empty level, `L<n>: <file> <file> ...`; a file is
/// `<number>:<smallest>-<largest>[@<seq>][/<size>][+<blob>,<blob>...]` with single-word user
/// keys, the sequence number defaulting to the file number, the size (bytes, suffix K/M/G
/// allowed) to 1K, and the blob references to "not recorded" (`+` alone: none). Blob files
/// are one line `B: <number>:<record bytes>-<garbage bytes> ...` (one byte per record).
#[cfg(test)]
pub(crate) mod testutil {
    use super::edit::{BlobFileMeta, BlobGarbage};
    use super::{FileMeta, NUM_LEVELS, Version, VersionEdit};
    use crate::key::{SeqNo, ValueKind, make_internal_key};
    use crate::layout::FileNum;

    fn parse_size(s: &str) -> u64 {
        let (digits, mult) = match s.chars().last() {
            Some('K') => (&s[..s.len() - 1], 1u64 << 10),
            Some('M') => (&s[..s.len() - 1], 1 << 20),
            Some('G') => (&s[..s.len() - 1], 1 << 30),
            _ => (s, 1),
        };
        digits.parse::<u64>().unwrap() * mult
    }

    /// A file from `<number>:<smallest>-<largest>[@<seq>][/<size>]`.
    pub(crate) fn file(spec: &str) -> FileMeta {
        let (spec, blob_refs) = match spec.split_once('+') {
            Some((a, refs)) => (
                a,
                Some(
                    refs.split(',')
                        .filter(|r| !r.is_empty())
                        .map(|r| FileNum(r.parse().unwrap()))
                        .collect(),
                ),
            ),
            None => (spec, None),
        };
        let (spec, size) = match spec.split_once('/') {
            Some((a, s)) => (a, parse_size(s)),
            None => (spec, 1024),
        };
        let (spec, seq) = match spec.split_once('@') {
            Some((a, s)) => (a, Some(s.parse::<u64>().unwrap())),
            None => (spec, None),
        };
        let (num, range) = spec.split_once(':').unwrap();
        let (lo, hi) = range.split_once('-').unwrap();
        let number: u64 = num.parse().unwrap();
        let seq = seq.unwrap_or(number);
        FileMeta {
            number: FileNum(number),
            size,
            smallest: make_internal_key(lo.as_bytes(), SeqNo(seq), ValueKind::Value),
            largest: make_internal_key(hi.as_bytes(), SeqNo(seq), ValueKind::Value),
            smallest_seq: SeqNo(seq),
            largest_seq: SeqNo(seq),
            entries: 1,
            blob_refs,
        }
    }

    /// The edit that adds every file of the text description.
    pub(crate) fn edit(text: &str) -> VersionEdit {
        let mut e = VersionEdit::default();
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            let (level, files) = line.split_once(':').unwrap();
            if level == "B" {
                for spec in files.split_whitespace() {
                    let (num, sizes) = spec.split_once(':').unwrap();
                    let (total, garbage) = sizes.split_once('-').unwrap();
                    let number = FileNum(num.parse().unwrap());
                    let total = parse_size(total);
                    let garbage = parse_size(garbage);
                    e.new_blobs.push(BlobFileMeta {
                        number,
                        records: total,
                        record_bytes: total,
                    });
                    if garbage > 0 {
                        e.blob_garbage.push(BlobGarbage {
                            number,
                            records: garbage,
                            bytes: garbage,
                        });
                    }
                }
                continue;
            }
            let level: usize = level.trim().strip_prefix('L').unwrap().parse().unwrap();
            assert!(level < NUM_LEVELS);
            for spec in files.split_whitespace().filter(|s| *s != "-") {
                e.add_file(level, file(spec));
            }
        }
        e
    }

    /// A version holding the files of the text description (validated like any edit).
    pub(crate) fn version(text: &str) -> Version {
        Version::default().apply(&edit(text)).unwrap()
    }
}
