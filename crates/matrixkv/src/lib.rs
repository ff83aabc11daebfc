//! matrixkv: an embedded key-value store for a machine with a small, fast, byte-addressable
//! tier (persistent memory, CXL memory, a fast NVMe used through `mmap`, or tmpfs standing in)
//! and a large, slower disk tier.
//!
//! The WAL lives on the fast tier, the memtable in DRAM, L0 on the fast tier and L1..Ln as
//! SSTables on the disk tier. See `docs/design.md` for the architecture and
//! [`Db`] for the API: point reads and writes, atomic [`WriteBatch`]es, [`Snapshot`]s,
//! iterators, [`Db::delete_range`], [`Db::merge`] with a [`MergeOperator`], compaction filters
//! and TTL, [`Db::checkpoint`], [`BackupEngine`], [`Db::updates_since`], and keyspaces
//! ([`Db::create_keyspace`], [`Keyspace`]: RocksDB's column families).
//!
//! ```
//! # fn main() -> matrixkv::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
//! db.put(b"hello", b"world")?;
//! assert_eq!(db.get(b"hello")?, Some(b"world".to_vec()));
//! db.close()?;
//! # Ok(()) }
//! ```
#![forbid(unsafe_code)]

pub mod backup;
pub mod batch;
pub mod compaction_filter;
pub mod error;
pub mod key;
pub mod keyspace;
pub mod merge;
pub mod tier;

mod db;
mod engine;
mod options;
mod stats;

pub(crate) mod blob;
pub(crate) mod cache;
pub(crate) mod checksum;
pub(crate) mod coding;
pub(crate) mod compaction;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
pub(crate) mod golden;
pub(crate) mod iter;
pub(crate) mod layout;
pub(crate) mod matrix;
pub(crate) mod memtable;
pub mod property;
pub(crate) mod range_del;
pub(crate) mod record;
pub(crate) mod sst;
pub(crate) mod version;
pub(crate) mod wal;

pub use backup::{BackupEngine, BackupInfo};
pub use batch::{BatchOp, WriteBatch};
pub use compaction_filter::{CompactionFilter, Decision};
pub use db::{Db, Snapshot};
pub use engine::checkpoint::CheckpointInfo;
pub use engine::updates::UpdatesIter;
pub use error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result, TierKind};
pub use iter::db_iter::DbIterator;
pub use key::SeqNo;
pub use keyspace::{DEFAULT_KEYSPACE, Keyspace, KeyspaceOptions};
pub use merge::{AppendOperator, MergeOperator, U64AddOperator};
pub use options::{
    Design, L0Layout, MAX_WAL_RETENTION_SEGMENTS, Options, ReadOptions, Tiers, WriteOptions,
    XEngineOptions,
};
pub use property::PROPERTY_NAMES;
pub use sst::{Compression, TableOptions};
pub use stats::{StallCause, Stats};
pub use wal::WalRecovery;
