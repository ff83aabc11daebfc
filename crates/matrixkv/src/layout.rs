//! Every path and file name of a database: the only module that builds or parses them
//! (LevelDB `db/filename.h`). See docs/format/filenames.md.
//!
//! Slow-tier directory: `CURRENT`, `LOCK`, `IDENTITY`, `MANIFEST-NNNNNN`, `NNNNNN.sst` (L1+).
//! Fast-tier directory: `IDENTITY`, `NNNNNN.wal` (WAL segments), `NNNNNN.walfree` (regions of
//! obsolete WAL segments kept for recycling), `NNNNNN.sst` (L0 tables in the SSTable L0
//! layout). Temporary files end in `.tmp`. Numbers come from one counter per
//! database, so a number names at most one file.

use std::path::{Path, PathBuf};

/// A file number, allocated from the database's counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct FileNum(pub u64);

impl std::fmt::Display for FileNum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:06}", self.0)
    }
}

/// What a file name denotes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `CURRENT`.
    Current,
    /// `LOCK`.
    Lock,
    /// `IDENTITY`.
    Identity,
    /// `CONTAINER`.
    Container,
    /// `INDEX`: the persistent B+-tree global index (the SLM-DB design).
    Index,
    /// `MANIFEST-NNNNNN`.
    Manifest(FileNum),
    /// `NNNNNN.sst`.
    Table(FileNum),
    /// `NNNNNN.wal`.
    Wal(FileNum),
    /// `NNNNNN.walfree`: the region of obsolete WAL segment `NNNNNN` (or one prepared after an
    /// open under new file number `NNNNNN`), kept to be recycled as a later segment. Never
    /// replayed.
    WalFree(FileNum),
    /// `NNNNNN.blob`: values separated from their keys (slow tier).
    Blob(FileNum),
    /// `NNNNNN.pmt`: a persistent memtable (the NoveLSM design; docs/format/pskiplist.md),
    /// numbered like the WAL segments it alternates with.
    PersistentMemtable(FileNum),
    /// `NNNNNN.tmp` or `CURRENT.tmp`.
    Temp,
}

/// `CURRENT`: names the live manifest.
pub const CURRENT: &str = "CURRENT";
/// `LOCK`: held exclusively while the database is open.
pub const LOCK: &str = "LOCK";
/// `IDENTITY`: the database id, in both tier directories.
pub const IDENTITY: &str = "IDENTITY";
/// `CONTAINER`: the matrix container's page region (fast tier).
pub const CONTAINER: &str = "CONTAINER";
/// `INDEX`: the global index's region (fast tier; the SLM-DB design, docs/format/pbtree.md).
pub const INDEX: &str = "INDEX";

/// Name of the manifest with number `n`.
pub fn manifest_name(n: FileNum) -> String {
    format!("MANIFEST-{n}")
}

/// Name of the blob file with number `n`.
pub fn blob_name(n: FileNum) -> String {
    format!("{n}.blob")
}

/// Name of the SSTable with number `n`.
pub fn table_name(n: FileNum) -> String {
    format!("{n}.sst")
}

/// Name of the WAL segment with number `n`.
pub fn wal_name(n: FileNum) -> String {
    format!("{n}.wal")
}

/// `NNNNNN.pmt`.
pub fn pmt_name(n: FileNum) -> String {
    format!("{n}.pmt")
}

/// Name of a file or region `n` while it is being made (`NNNNNN.tmp`), renamed to its own
/// name once complete; an open deletes what a crash left under it.
pub fn temp_name(n: FileNum) -> String {
    format!("{n}.tmp")
}

/// Name of the free region left by obsolete WAL segment `n` (kept for recycling).
pub fn wal_free_name(n: FileNum) -> String {
    format!("{n}.walfree")
}

/// Path of `name` inside `dir`.
pub fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn parse_number(digits: &str) -> Option<FileNum> {
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // Only the spelling this module writes: with more leading zeros, the name would parse to
    // the number of another name (`0000030` to 30, whose file is `000030`).
    let n: u64 = digits.parse().ok()?;
    (format!("{n:06}") == digits).then_some(FileNum(n))
}

/// Parses a file name produced by this module; `None` for anything else.
pub fn parse(name: &str) -> Option<FileKind> {
    match name {
        CURRENT => return Some(FileKind::Current),
        LOCK => return Some(FileKind::Lock),
        IDENTITY => return Some(FileKind::Identity),
        CONTAINER => return Some(FileKind::Container),
        INDEX => return Some(FileKind::Index),
        "CURRENT.tmp" | "IDENTITY.tmp" | "CONTAINER.tmp" => return Some(FileKind::Temp),
        _ => {}
    }
    if let Some(d) = name.strip_prefix("MANIFEST-") {
        return parse_number(d).map(FileKind::Manifest);
    }
    let (stem, ext) = name.split_once('.')?;
    let n = parse_number(stem)?;
    match ext {
        "sst" => Some(FileKind::Table(n)),
        "wal" => Some(FileKind::Wal(n)),
        "walfree" => Some(FileKind::WalFree(n)),
        "blob" => Some(FileKind::Blob(n)),
        "pmt" => Some(FileKind::PersistentMemtable(n)),
        "tmp" => Some(FileKind::Temp),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in the first column of docs/format/filenames.md's table, `NNNNNN` as 12.
    fn documented_names() -> Vec<String> {
        let doc = include_str!("../../../docs/format/filenames.md");
        doc.lines()
            .filter(|l| l.starts_with("| `"))
            .flat_map(|l| {
                let first = l.split('|').nth(1).unwrap_or_default();
                first
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(|n| n.replace("NNNNNN", "000012"))
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    #[test]
    fn golden_every_documented_name_parses_and_every_kind_is_documented() {
        let names = documented_names();
        let kinds: Vec<FileKind> = names
            .iter()
            .map(|n| parse(n).unwrap_or_else(|| panic!("{n} is documented but does not parse")))
            .collect();
        let n = FileNum(12);
        // Every kind the code knows appears in the document (a new kind must be documented).
        for k in [
            FileKind::Current,
            FileKind::Lock,
            FileKind::Identity,
            FileKind::Container,
            FileKind::Index,
            FileKind::Manifest(n),
            FileKind::Table(n),
            FileKind::Wal(n),
            FileKind::WalFree(n),
            FileKind::Blob(n),
            FileKind::PersistentMemtable(n),
            FileKind::Temp,
        ] {
            // Exhaustive: a new variant fails to compile here until it is listed.
            match k {
                FileKind::Current
                | FileKind::Lock
                | FileKind::Identity
                | FileKind::Container
                | FileKind::Index
                | FileKind::Manifest(_)
                | FileKind::Table(_)
                | FileKind::Wal(_)
                | FileKind::WalFree(_)
                | FileKind::Blob(_)
                | FileKind::PersistentMemtable(_)
                | FileKind::Temp => {}
            }
            assert!(
                kinds.contains(&k),
                "{k:?} is not in docs/format/filenames.md"
            );
        }
        // The names the code builds are the documented spellings.
        for built in [
            manifest_name(n),
            table_name(n),
            blob_name(n),
            wal_name(n),
            wal_free_name(n),
            pmt_name(n),
        ] {
            assert!(
                names.contains(&built),
                "{built} is not spelled as documented"
            );
        }
        for bad in [
            "../x",
            "/etc/passwd",
            "12.sst",
            "000012.SST",
            "MANIFEST-",
            "000012",
        ] {
            assert_eq!(parse(bad), None, "{bad} must not parse");
        }
    }

    #[test]
    fn names_round_trip_through_parse() {
        let n = FileNum(42);
        assert_eq!(parse(&manifest_name(n)), Some(FileKind::Manifest(n)));
        assert_eq!(parse(&table_name(n)), Some(FileKind::Table(n)));
        assert_eq!(parse(&blob_name(n)), Some(FileKind::Blob(n)));
        assert_eq!(parse(&wal_name(n)), Some(FileKind::Wal(n)));
        assert_eq!(parse(&wal_free_name(n)), Some(FileKind::WalFree(n)));
        assert_eq!(wal_free_name(n), "000042.walfree");
        assert_eq!(parse("000042.tmp"), Some(FileKind::Temp));
        assert_eq!(parse("CONTAINER.tmp"), Some(FileKind::Temp));
        assert_eq!(table_name(n), "000042.sst");
        assert_eq!(parse("CURRENT"), Some(FileKind::Current));
    }

    #[test]
    fn foreign_and_hostile_names_are_not_recognised() {
        for bad in [
            "../000001.sst",
            "1.sst",
            "000001.sst.bak",
            "MANIFEST-x",
            "abc",
            "/etc/passwd",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    // Found by the `current` fuzz target (docs/results/fuzz/README.md): CURRENT holding
    // `MANIFEST-0000030` was accepted as manifest 30, whose file is `MANIFEST-000030`.
    #[test]
    fn names_with_extra_leading_zeros_are_not_recognised() {
        for bad in [
            "MANIFEST-0000030",
            "0000030.sst",
            "0000000.wal",
            "01234567.blob",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert_eq!(
            parse("MANIFEST-1234567"),
            Some(FileKind::Manifest(FileNum(1234567)))
        );
        assert_eq!(parse("000000.sst"), Some(FileKind::Table(FileNum(0))));
    }
}
