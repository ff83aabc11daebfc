//! The one error type of the engine.
//!
//! Decoders are pure and return `Result<T, CorruptionReason>`; the caller, which knows the
//! file and offset, wraps the reason into [`Error::Corruption`] with a [`CorruptionSite`].
//! `Display` is written by hand: every message is a sentence that says what failed and where.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// `Result` with the engine's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The I/O operation that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IoOp {
    /// Opening or creating a file or directory.
    Open,
    /// Reading.
    Read,
    /// Writing or appending.
    Write,
    /// Persisting a fast-tier range (msync or cache-line flush).
    Persist,
    /// fsync / fdatasync of a file or directory.
    Sync,
    /// Renaming a file.
    Rename,
    /// Removing a file.
    Remove,
    /// Listing a directory.
    List,
    /// Mapping a fast-tier file.
    Map,
    /// Taking the database lock.
    Lock,
    /// Creating a hard link (checkpoints share immutable files this way).
    Link,
}

impl fmt::Display for IoOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            IoOp::Open => "open",
            IoOp::Read => "read",
            IoOp::Write => "write",
            IoOp::Persist => "persist",
            IoOp::Sync => "sync",
            IoOp::Rename => "rename",
            IoOp::Remove => "remove",
            IoOp::List => "list",
            IoOp::Map => "map",
            IoOp::Lock => "lock",
            IoOp::Link => "link",
        };
        f.write_str(s)
    }
}

/// One of the two storage tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TierKind {
    /// The fast, byte-addressable tier (WAL segments, the matrix container, L0 tables).
    Fast,
    /// The slow disk tier (SSTables of L1 and below, blob files, the manifest).
    Slow,
}

impl fmt::Display for TierKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TierKind::Fast => "fast",
            TierKind::Slow => "slow",
        })
    }
}

/// What kind of persistent artifact a corruption was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ArtifactKind {
    /// A write-ahead log segment on the fast tier.
    Wal,
    /// An SSTable (either tier).
    Sst,
    /// The manifest (version edit log).
    Manifest,
    /// The CURRENT pointer file.
    Current,
    /// The IDENTITY file that ties the two tier directories together.
    Identity,
    /// A RowTable of the matrix container.
    RowTable,
    /// A blob file (separated values, slow tier).
    Blob,
    /// A file of a backup directory (metadata, exported container pages).
    Backup,
    /// The region of a persistent memtable (the NVM skiplist of the NoveLSM mode).
    PersistentMemtable,
    /// The region of a persistent index (the B+-tree global index of the SLM-DB mode).
    PersistentIndex,
}

impl fmt::Display for ArtifactKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            ArtifactKind::Wal => "WAL segment",
            ArtifactKind::Sst => "SSTable",
            ArtifactKind::Manifest => "manifest",
            ArtifactKind::Current => "CURRENT file",
            ArtifactKind::Identity => "IDENTITY file",
            ArtifactKind::RowTable => "RowTable",
            ArtifactKind::Blob => "blob file",
            ArtifactKind::Backup => "backup file",
            ArtifactKind::PersistentMemtable => "persistent memtable",
            ArtifactKind::PersistentIndex => "persistent index",
        };
        f.write_str(s)
    }
}

/// Where a corruption was found: the artifact, its file and the byte offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptionSite {
    /// Kind of artifact.
    pub kind: ArtifactKind,
    /// The file that holds it.
    pub path: PathBuf,
    /// Byte offset inside the file of the damaged record/block.
    pub offset: u64,
}

impl CorruptionSite {
    /// A site in `path` at `offset`.
    pub fn new(kind: ArtifactKind, path: impl Into<PathBuf>, offset: u64) -> Self {
        CorruptionSite {
            kind,
            path: path.into(),
            offset,
        }
    }
}

/// Why bytes read from storage were rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionReason {
    /// The stored checksum does not match the bytes.
    ChecksumMismatch {
        /// Checksum stored in the artifact.
        stored: u32,
        /// Checksum computed over the bytes.
        computed: u32,
    },
    /// A magic number did not match.
    BadMagic,
    /// The bytes end before a declared structure does.
    Truncated,
    /// A declared length or count is impossible (larger than the data, or than a limit).
    BadLength,
    /// An unknown record, block or entry type.
    UnknownType(u8),
    /// A varint longer than allowed or not terminated.
    BadVarint,
    /// Data that decoded but violates an invariant (e.g. keys out of order).
    Invalid(&'static str),
}

impl fmt::Display for CorruptionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CorruptionReason::ChecksumMismatch { stored, computed } => {
                write!(
                    f,
                    "checksum mismatch (stored {stored:#010x}, computed {computed:#010x})"
                )
            }
            CorruptionReason::BadMagic => f.write_str("bad magic number"),
            CorruptionReason::Truncated => f.write_str("data is truncated"),
            CorruptionReason::BadLength => f.write_str("impossible length or count"),
            CorruptionReason::UnknownType(t) => write!(f, "unknown type byte {t}"),
            CorruptionReason::BadVarint => f.write_str("malformed varint"),
            CorruptionReason::Invalid(what) => write!(f, "invalid data: {what}"),
        }
    }
}

/// The error type of every fallible matrixkv operation.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O error.
    Io {
        /// What was being done.
        op: IoOp,
        /// The file or directory concerned, if any.
        path: Option<PathBuf>,
        /// The underlying error (ENOSPC, EIO, ...).
        source: io::Error,
    },
    /// Bytes read from storage failed validation.
    Corruption {
        /// Where.
        site: CorruptionSite,
        /// Why.
        reason: CorruptionReason,
    },
    /// A caller passed a bad argument or option; the message says which and why.
    InvalidArgument(String),
    /// The database was created with a different value of a parameter that is fixed at creation.
    OptionMismatch {
        /// Name of the option.
        option: &'static str,
        /// Value stored in the database.
        stored: String,
        /// Value given at this open.
        given: String,
    },
    /// A format version this build cannot read.
    NotSupported {
        /// The artifact.
        what: &'static str,
        /// The version found.
        found_version: u32,
    },
    /// An earlier persist, sync or background write failed; the database accepts no more writes
    /// (reads keep working). Reopen to recover.
    Poisoned {
        /// Description of the first failure.
        cause: String,
    },
    /// A write could not make progress because a tier is full (ENOSPC or EDQUOT): either the
    /// write itself needed space there (a new WAL segment), or it had to wait for background
    /// work (flush, compaction) that keeps failing for lack of space, for longer than
    /// `Options::no_space_timeout`. Nothing of the rejected write was applied; acknowledged
    /// writes are safe, reads keep working, and writes resume by themselves once space is freed.
    NoSpace {
        /// The full tier.
        tier: TierKind,
        /// Its directory.
        dir: PathBuf,
        /// The failure that reported the full device.
        cause: String,
    },
    /// The database was closed.
    Closed,
    /// Another process (or another handle in this one) holds the database lock.
    Locked {
        /// The lock file.
        path: PathBuf,
    },
    /// The database was opened with [`crate::Db::open_read_only`]: writes, flushes, compactions,
    /// checkpoints and keyspace changes are refused.
    ReadOnly {
        /// What was refused (`"write"`, `"flush"`, ...).
        op: &'static str,
    },
    /// The keyspace was dropped: its handle no longer reads or writes.
    KeyspaceDropped {
        /// The keyspace's name.
        name: String,
    },
    /// A persistent memtable's region has no room left for a write: nothing of the write was
    /// stored, and the memtable stays readable and unchanged. The caller starts a new memtable.
    /// Unlike [`Error::NoSpace`], no device is full.
    MemtableFull {
        /// The region's file.
        path: PathBuf,
        /// Bytes the write needed.
        needed: u64,
        /// Bytes that were free.
        free: u64,
    },
    /// A persistent index's region has too few free pages for a write: the insert or removal
    /// was not applied (the batch keeps its earlier operations), or the commit stored nothing
    /// and the committed index is unchanged. The pages a commit releases become free again
    /// once no snapshot older than that commit is alive. Unlike [`Error::NoSpace`], no device
    /// is full.
    IndexFull {
        /// The region's file.
        path: PathBuf,
        /// Pages the write could need (with the batch's earlier operations).
        needed: u64,
        /// Pages that were free.
        free: u64,
    },
    /// The merge operator returned an error (or panicked) combining a key's operands; the
    /// operands are kept, nothing is lost.
    MergeFailed {
        /// The operator's name.
        operator: String,
        /// The key whose operands could not be combined.
        key: Vec<u8>,
        /// What the operator said.
        message: String,
    },
}

impl Error {
    /// An I/O error for `op` on `path`.
    pub fn io(op: IoOp, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: Some(path.into()),
            source,
        }
    }

    /// A corruption at `site` for `reason`.
    pub fn corruption(site: CorruptionSite, reason: CorruptionReason) -> Self {
        Error::Corruption { site, reason }
    }

    /// An invalid-argument error with a message.
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    /// True if this is an I/O error reporting a full device (ENOSPC or EDQUOT).
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                matches!(
                    source.kind(),
                    io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
                ) || matches!(source.raw_os_error(), Some(28 | 122))
            }
            Error::NoSpace { .. } => true,
            _ => false,
        }
    }

    /// True for corruption errors.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy of this error suitable for reporting to a second caller (the source `io::Error`
    /// is not `Clone`, so it is rebuilt from its kind and message).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op: *op,
                path: path.clone(),
                source: io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption { site, reason } => Error::Corruption {
                site: site.clone(),
                reason: reason.clone(),
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::OptionMismatch {
                option,
                stored,
                given,
            } => Error::OptionMismatch {
                option,
                stored: stored.clone(),
                given: given.clone(),
            },
            Error::NotSupported {
                what,
                found_version,
            } => Error::NotSupported {
                what,
                found_version: *found_version,
            },
            Error::Poisoned { cause } => Error::Poisoned {
                cause: cause.clone(),
            },
            Error::NoSpace { tier, dir, cause } => Error::NoSpace {
                tier: *tier,
                dir: dir.clone(),
                cause: cause.clone(),
            },
            Error::Closed => Error::Closed,
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::KeyspaceDropped { name } => Error::KeyspaceDropped { name: name.clone() },
            Error::ReadOnly { op } => Error::ReadOnly { op },
            Error::MemtableFull { path, needed, free } => Error::MemtableFull {
                path: path.clone(),
                needed: *needed,
                free: *free,
            },
            Error::IndexFull { path, needed, free } => Error::IndexFull {
                path: path.clone(),
                needed: *needed,
                free: *free,
            },
            Error::MergeFailed {
                operator,
                key,
                message,
            } => Error::MergeFailed {
                operator: operator.clone(),
                key: key.clone(),
                message: message.clone(),
            },
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io {
                op,
                path: Some(p),
                source,
            } => {
                write!(f, "I/O error during {op} of {}: {source}", p.display())
            }
            Error::Io {
                op,
                path: None,
                source,
            } => write!(f, "I/O error during {op}: {source}"),
            Error::Corruption { site, reason } => write!(
                f,
                "corruption in {} {} at offset {}: {reason}",
                site.kind,
                site.path.display(),
                site.offset
            ),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::OptionMismatch {
                option,
                stored,
                given,
            } => write!(
                f,
                "option `{option}` is fixed when the {} is created: the database has \
                 {stored}, this open asked for {given}",
                if option.starts_with("keyspace") {
                    "keyspace"
                } else {
                    "database"
                }
            ),
            Error::NotSupported {
                what,
                found_version,
            } => {
                write!(
                    f,
                    "{what} has format version {found_version}, which this build cannot read"
                )
            }
            Error::Poisoned { cause } => write!(
                f,
                "the database refuses writes after an earlier failure ({cause}); reads still \
                 work; reopen it to recover"
            ),
            Error::NoSpace { tier, dir, cause } => write!(
                f,
                "no space left on the {tier} tier ({}): {cause}; the write was not applied, \
                 reads still work, and writes resume once space is freed",
                dir.display()
            ),
            Error::Closed => f.write_str("the database is closed"),
            Error::Locked { path } => write!(
                f,
                "the database is already open (lock {} is held by another process or handle)",
                path.display()
            ),
            Error::KeyspaceDropped { name } => write!(f, "keyspace {name:?} was dropped"),
            Error::ReadOnly { op } => write!(
                f,
                "{op} refused: the database was opened read-only (Db::open_read_only); open it \
                 with Db::open to change it"
            ),
            Error::MemtableFull { path, needed, free } => write!(
                f,
                "the persistent memtable {} is full: the write needs {needed} bytes and {free} \
                 are free; nothing of it was stored",
                path.display()
            ),
            Error::IndexFull { path, needed, free } => write!(
                f,
                "the persistent index {} is full: the write could need {needed} pages and \
                 {free} are free; nothing of it was stored",
                path.display()
            ),
            Error::MergeFailed {
                operator,
                key,
                message,
            } => write!(
                f,
                "merge operator {operator} failed on key {}: {message}",
                render_key(key)
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Renders a user key for error messages, `Version::describe` and test output: printable
/// ASCII as is, other bytes (and `-`, `\\`) as `\xNN`.
pub(crate) fn render_key(key: &[u8]) -> String {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corruption_message_names_file_and_offset() {
        let e = Error::corruption(
            CorruptionSite::new(ArtifactKind::Wal, "/x/000007.wal", 4096),
            CorruptionReason::ChecksumMismatch {
                stored: 1,
                computed: 2,
            },
        );
        let s = e.to_string();
        assert!(s.contains("/x/000007.wal"), "{s}");
        assert!(s.contains("offset 4096"), "{s}");
        assert!(s.contains("checksum mismatch"), "{s}");
    }

    #[test]
    fn enospc_is_recognised_as_no_space() {
        let e = Error::io(IoOp::Write, "/x", io::Error::from_raw_os_error(28));
        assert!(e.is_no_space());
        assert!(!Error::Closed.is_no_space());
    }

    #[test]
    fn no_space_message_names_tier_and_directory() {
        let e = Error::NoSpace {
            tier: TierKind::Slow,
            dir: "/data/db/slow".into(),
            cause: "No space left on device".into(),
        };
        let s = e.to_string();
        assert!(s.contains("slow tier"), "{s}");
        assert!(s.contains("/data/db/slow"), "{s}");
        assert!(e.is_no_space());
        assert!(matches!(
            e.duplicate(),
            Error::NoSpace {
                tier: TierKind::Slow,
                ..
            }
        ));
    }
}
