//! The matrix container: L0 on the fast tier as RowTables in a page pool, with
//! receiver/compactor roles, column compaction and cross-row hints (MatrixKV, ATC'20).
//!
//! - [`meta`]: what the manifest records about a row (its pages, sizes, key range).
//! - [`pages`]: the page pool, the free pages of the container's region.
//! - [`row_table`]: the RowTable format, its builder and its reader.

pub(crate) mod meta;
pub(crate) mod pages;
pub(crate) mod row_table;
