//! SSTables: the immutable sorted tables of levels L1..Ln on the slow tier.
//!
//! A table is a run of data blocks (prefix-compressed internal keys with restart points,
//! optionally LZ4/zstd-compressed), then a bloom filter over the user keys, a properties
//! block, an index block and a fixed footer. Every block carries a type byte and a masked
//! CRC32C. The byte-level specification is docs/format/sst.md.
//!
//! - [`Builder`] writes a table (flush, compaction);
//! - [`Table`] opens and verifies one, answers point lookups and hands out [`TableIter`]s;
//! - [`crate::sst::cache::BlockCache`] shares decoded data blocks between tables and readers.
//!
//! Thread safety: a `Builder` and a `TableIter` are used by one thread at a time; a `Table`
//! is `Sync` and shared through `Arc`.
#![deny(clippy::indexing_slicing)]

pub(crate) mod block;
pub(crate) mod block_builder;
pub(crate) mod builder;
pub(crate) mod cache;
pub(crate) mod compression;
pub(crate) mod filter;
pub(crate) mod format;
pub(crate) mod reader;

#[cfg(test)]
mod tests;

pub use builder::Builder;
pub use compression::Compression;
pub use reader::Table;

use crate::error::{Error, Result};

/// Options that shape how a table is written. Readers need none of them: everything a
/// reader must know is stored in the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableOptions {
    /// Target size in bytes of an uncompressed data block; a block is cut once it reaches
    /// this size (one entry larger than this gets a block of its own). Default 4096; must be
    /// in `1..=64 MiB`.
    pub block_bytes: usize,
    /// Entries between restart points in data blocks (a larger value gives smaller blocks
    /// and slower seeks). Default 16; must be in `1..=1024`.
    pub restart_interval: usize,
    /// Bloom filter bits per distinct user key; 0 writes no filter. Default 10 (about 1%
    /// false positives); at most 64.
    pub bloom_bits_per_key: u32,
    /// Compression of the data blocks. Default none.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_bytes: 4096,
            restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::None,
        }
    }
}

impl TableOptions {
    /// Checks every field; [`Error::InvalidArgument`] names the first bad one.
    pub fn validate(&self) -> Result<()> {
        if self.block_bytes == 0 || self.block_bytes > format::MAX_UNCOMPRESSED_BLOCK_BYTES {
            return Err(Error::invalid(format!(
                "block_bytes must be between 1 and {} (got {})",
                format::MAX_UNCOMPRESSED_BLOCK_BYTES,
                self.block_bytes
            )));
        }
        if self.restart_interval == 0 || self.restart_interval > 1024 {
            return Err(Error::invalid(format!(
                "restart_interval must be between 1 and 1024 (got {})",
                self.restart_interval
            )));
        }
        if self.bloom_bits_per_key > 64 {
            return Err(Error::invalid(format!(
                "bloom_bits_per_key must be at most 64 (got {})",
                self.bloom_bits_per_key
            )));
        }
        if !self.compression.is_supported() {
            return Err(Error::invalid(format!(
                "compression `{}` is not available in this build (enable the `{}` feature)",
                self.compression, self.compression
            )));
        }
        Ok(())
    }
}
