//! RowTables: L0 of the matrix container. Each flushed memtable becomes one *row*, a sorted
//! table laid over fixed-size pages of the fast-tier region: a header, a sorted array of
//! 32-byte metadata entries (each locating one key and value and carrying a *forward
//! pointer* into the previous row), the key area and the value area. The byte-level
//! specification is docs/format/rowtable.md.
//!
//! - [`RowLayout`] and [`write_row`] write a row (flush);
//! - [`RowReader`] opens and verifies one, answers point lookups with the cross-row hint
//!   search ([`RowReader::get`]) and hands out [`RowIter`]s (reads, column compaction).
//!
//! Keys live in the metadata, so searches never touch value pages, which column compaction
//! may free while the row's metadata stays.
//!
//! Thread safety: writing a row touches only its own pages; a `RowReader` is `Sync` and
//! shared through `Arc`; a `RowIter` is used by one thread at a time.
#![deny(clippy::indexing_slicing)]

pub(crate) mod builder;
pub(crate) mod format;
pub(crate) mod reader;

#[cfg(test)]
mod tests;

pub use builder::{RowLayout, write_row};
pub use reader::{Floor, RowIter, RowReader};
