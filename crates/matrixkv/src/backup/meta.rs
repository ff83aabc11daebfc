//! The metadata file of one backup, `meta/NNNNNN` in a backup directory: which files make up
//! the backup, where each is stored and where it goes back on a restore. A short text file,
//! checksummed as a whole; specified in `docs/format/backup.md`.
#![deny(clippy::indexing_slicing)]

use std::fmt::Write as _;
use std::path::Path;

use crate::checksum;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::layout::{self, FileKind};

/// First line of a metadata file (format version 1).
// FORMAT: never change; see docs/format/backup.md
const HEADER: &str = "matrixkv-backup 1";

/// The tier a backed-up file is restored to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tier {
    Fast,
    Slow,
}

impl Tier {
    fn as_str(self) -> &'static str {
        match self {
            Tier::Fast => "fast",
            Tier::Slow => "slow",
        }
    }
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackupFile {
    /// The tier it is restored to.
    pub tier: Tier,
    /// Its name in the restored database (a table, blob file, manifest, `IDENTITY` or
    /// `CONTAINER.pages`).
    pub name: String,
    /// Where it is stored, relative to the backup directory (`shared/…` or `private/…`).
    pub stored: String,
    /// Its length in bytes.
    pub size: u64,
    /// Masked CRC32C of its bytes.
    pub crc: u32,
}

/// The contents of a metadata file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BackupMeta {
    pub id: u64,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The backup holds exactly the writes up to this sequence number.
    pub sequence: u64,
    /// The number of the backup's manifest (CURRENT names it after a restore).
    pub manifest: u64,
    pub files: Vec<BackupFile>,
}

impl BackupMeta {
    /// The file's bytes.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut s = String::new();
        let _ = writeln!(s, "{HEADER}");
        let _ = writeln!(s, "id {}", self.id);
        let _ = writeln!(s, "created-ms {}", self.created_ms);
        let _ = writeln!(s, "sequence {}", self.sequence);
        let _ = writeln!(s, "manifest {}", self.manifest);
        for f in &self.files {
            let _ = writeln!(
                s,
                "file {} {} {} {} {:08x}",
                f.tier.as_str(),
                f.name,
                f.stored,
                f.size,
                f.crc
            );
        }
        let crc = checksum::checksum(s.as_bytes());
        let _ = writeln!(s, "checksum {crc:08x}");
        s.into_bytes()
    }

    /// Parses and checks a metadata file read from `path`.
    pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<BackupMeta> {
        let bad = |what: &'static str| {
            Error::corruption(
                CorruptionSite::new(ArtifactKind::Backup, path, 0),
                CorruptionReason::Invalid(what),
            )
        };
        let text = std::str::from_utf8(bytes).map_err(|_| bad("not UTF-8"))?;
        // The last line is exactly `checksum <8 lowercase hex digits>\n`.
        let without_nl = text
            .strip_suffix('\n')
            .ok_or_else(|| bad("no final newline"))?;
        let body_end = without_nl
            .rfind('\n')
            .map(|i| i + 1)
            .ok_or_else(|| bad("no checksum line"))?;
        let (body, last) = text.split_at(body_end);
        let stored = last
            .strip_suffix('\n')
            .and_then(|l| l.strip_prefix("checksum "))
            .filter(|h| {
                h.len() == 8
                    && h.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            })
            .and_then(|h| u32::from_str_radix(h, 16).ok())
            .ok_or_else(|| bad("malformed checksum line"))?;
        checksum::verify(stored, body.as_bytes()).map_err(|r| {
            Error::corruption(CorruptionSite::new(ArtifactKind::Backup, path, 0), r)
        })?;
        let mut lines = body.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad("not a version-1 backup metadata file"));
        }
        let mut field = |name: &str| -> Result<u64> {
            lines
                .next()
                .and_then(|l| l.strip_prefix(name))
                .and_then(|l| l.strip_prefix(' '))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad("missing or malformed header field"))
        };
        let id = field("id")?;
        let created_ms = field("created-ms")?;
        let sequence = field("sequence")?;
        let manifest = field("manifest")?;
        let mut files = Vec::new();
        for line in lines {
            let parts: Vec<&str> = line.split(' ').collect();
            let [kw, tier, name, stored, size, crc] = parts.as_slice() else {
                return Err(bad("malformed file line"));
            };
            if *kw != "file" {
                return Err(bad("malformed file line"));
            }
            let tier = match *tier {
                "fast" => Tier::Fast,
                "slow" => Tier::Slow,
                _ => return Err(bad("unknown tier")),
            };
            if !valid_name(name) {
                return Err(bad("a file name that is not a database file"));
            }
            if !valid_stored(stored) {
                return Err(bad("a stored path outside shared/ and private/"));
            }
            files.push(BackupFile {
                tier,
                name: (*name).to_owned(),
                stored: (*stored).to_owned(),
                size: size.parse().map_err(|_| bad("malformed size"))?,
                crc: u32::from_str_radix(crc, 16).map_err(|_| bad("malformed checksum"))?,
            });
        }
        Ok(BackupMeta {
            id,
            created_ms,
            sequence,
            manifest,
            files,
        })
    }
}

/// Names a restore may create: tables, blob files, manifests, IDENTITY, the pages file.
fn valid_name(name: &str) -> bool {
    matches!(
        layout::parse(name),
        Some(FileKind::Table(_) | FileKind::Blob(_) | FileKind::Manifest(_))
    ) || name == layout::IDENTITY
        || name == super::PAGES_FILE
}

/// `shared/<name>` or `private/<name>`, one plain component.
fn valid_stored(stored: &str) -> bool {
    let rest = stored
        .strip_prefix("shared/")
        .or_else(|| stored.strip_prefix("private/"));
    rest.is_some_and(|r| {
        !r.is_empty()
            && r != "."
            && r != ".."
            && r.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BackupMeta {
        BackupMeta {
            id: 3,
            created_ms: 1_700_000_000_000,
            sequence: 12_345,
            manifest: 20,
            files: vec![
                BackupFile {
                    tier: Tier::Slow,
                    name: "000012.sst".into(),
                    stored: "shared/00000000000000ab-000012.sst-4096".into(),
                    size: 4096,
                    crc: 0x1a2b_3c4d,
                },
                BackupFile {
                    tier: Tier::Fast,
                    name: "CONTAINER.pages".into(),
                    stored: "private/000003-CONTAINER.pages".into(),
                    size: 72,
                    crc: 0xdead_beef,
                },
            ],
        }
    }

    #[test]
    fn golden_meta_file_matches_the_format_doc() {
        let doc = include_str!("../../../../docs/format/backup.md");
        let text = doc
            .split("```text\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap_or_default();
        let encoded = sample().encode();
        assert_eq!(
            String::from_utf8_lossy(&encoded),
            text,
            "docs/format/backup.md is out of date"
        );
        assert_eq!(
            BackupMeta::decode(text.as_bytes(), Path::new("meta/000003")).unwrap(),
            sample()
        );
    }

    #[test]
    fn a_damaged_or_hostile_meta_file_is_refused() {
        let good = sample().encode();
        let p = Path::new("meta/000003");
        for at in 0..good.len() {
            let mut bad = good.clone();
            bad[at] ^= 0x01;
            assert!(BackupMeta::decode(&bad, p).is_err(), "flip at {at}");
        }
        // A correct checksum does not make an escaping path acceptable.
        let mut hostile = sample();
        hostile.files[0].stored = "shared/../../etc/passwd".into();
        assert!(BackupMeta::decode(&hostile.encode(), p).is_err());
        let mut hostile = sample();
        hostile.files[0].name = "../x".into();
        assert!(BackupMeta::decode(&hostile.encode(), p).is_err());
        assert!(BackupMeta::decode(b"", p).is_err());
    }
}
