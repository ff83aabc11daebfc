//! The matrix container: L0 on the fast tier as RowTables in a page pool, with
//! receiver/compactor roles, column compaction and cross-row hints (MatrixKV, ATC'20).
//!
//! - [`meta`]: what the manifest records about a row (its pages, sizes, key range).

pub(crate) mod meta;
