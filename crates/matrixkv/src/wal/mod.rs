//! The write-ahead log on the fast tier.
//!
//! The log is a sequence of segments `NNNNNN.wal`, each one preallocated region: created
//! zero-filled through `FastTier::create_region`, or recycled from an obsolete segment and
//! zeroed where that one wrote (engine `wal_recycle`, docs/decisions/0010-wal-recycling.md). A
//! segment starts with a 64-byte header and holds checksummed records ([`crate::record`]
//! framing, checksums seeded with the segment number), one encoded write batch per record.
//! The format (version 2; version 1 is still read), the persistence argument and the recovery
//! rules are in `docs/format/wal.md`.
//!
//! - [`Writer`] appends records to the active segment and persists them on `sync`;
//! - [`read_segment`] replays a segment at open, applying the [`WalRecovery`] policy;
//! - [`BatchCursor`] reads the batches of a segment one at a time while the database runs
//!   (`Db::updates_since`);
//! - [`zero_tail`] clears a torn tail found by recovery;
//! - [`zero_prefix`] clears what an obsolete segment wrote, before its region is recycled.
//!
//! Who calls it: the database write path (one `Writer` at a time, behind its WAL lock), WAL
//! recovery at open, and `Db::updates_since`. Rotation rule for the caller: `sync` the old
//! segment's writer before the first record goes into a new segment, so that only the last
//! segment can hold unsynced (possibly torn) records; recovery relies on that to tell a torn
//! tail from corruption.
//!
//! Thread safety: see each type; nothing here holds a lock of its own.

pub(crate) mod format;
mod reader;
mod writer;

pub use reader::{BatchCursor, SegmentEnd, WalRecovery, read_segment, zero_prefix, zero_tail};
pub use writer::Writer;

#[cfg(test)]
pub(crate) mod mem_region;

#[cfg(test)]
mod tests;
