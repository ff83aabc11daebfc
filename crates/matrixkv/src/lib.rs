//! matrixkv: an embedded key-value store for a machine with a small, fast, byte-addressable
//! tier (persistent memory, CXL memory, a fast NVMe used through `mmap`, or tmpfs standing in)
//! and a large, slower disk tier.
//!
//! # The two tiers
//!
//! [`Options::fast_dir`] names the fast tier. It holds the write-ahead log (segments mapped into
//! memory and made durable with cache-line flushes on DAX persistent memory, or `msync`
//! elsewhere) and L0: the *matrix container* of MatrixKV (USENIX ATC 2020), RowTables in a page
//! pool that a receiver fills with flushed memtables while a compactor is merged into L1
//! column by column, so no compaction ever merges all of L0 with all of L1. The memtable is in
//! DRAM. [`Options::slow_dir`] names the slow tier: the SSTables of L1..Ln, blob files holding
//! large values ([`Options::min_blob_bytes`]) and the manifest. [`Options::new`] puts both under
//! one directory (`<path>/fast`, `<path>/slow`); on a machine with real persistent memory, point
//! `fast_dir` at a DAX mount. tmpfs (`/dev/shm`) survives a process crash but not a reboot:
//! it is for benchmarks only.
//!
//! [`Options::design`] runs another published design on the same tiers: X-Engine's
//! semi-persistent memtable ([`Design::XEngine`]), NoveLSM's persistent memtable
//! ([`Design::NoveLsm`]), SLM-DB's single level and B+-tree index ([`Design::SlmDb`]) and
//! LightKV's partitions and Radix Hash Tree ([`Design::LightKv`]).
//!
//! # The API
//!
//! [`Db`] has point reads and writes, atomic [`WriteBatch`]es, [`Snapshot`]s, iterators,
//! [`Db::delete_range`], [`Db::merge`] with a [`MergeOperator`], compaction filters and TTL,
//! [`Db::checkpoint`], [`BackupEngine`], [`Db::updates_since`], and keyspaces
//! ([`Db::create_keyspace`], [`Keyspace`]: RocksDB's column families). Every error is an
//! [`Error`]; corruption names the file and offset ([`CorruptionSite`]). The repository's
//! `docs/design.md` and `docs/format/` describe the design and every file format, and
//! `examples/` holds runnable programs.
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
#![deny(missing_docs)]

pub mod backup;
pub mod batch;
pub mod compaction_filter;
pub mod error;
pub mod inspect;
pub(crate) mod key;
pub mod keyspace;
pub mod merge;
pub mod tier;

mod db;
mod engine;
mod options;
mod stats;

pub(crate) mod blob;
pub(crate) mod checksum;
pub(crate) mod coding;
pub(crate) mod compaction;
#[cfg(any(test, feature = "fuzzing"))]
#[doc(hidden)]
pub mod fuzzing;
#[cfg(test)]
pub(crate) mod golden;
pub(crate) mod index;
pub(crate) mod iter;
pub(crate) mod layout;
pub(crate) mod lock_order;
/// Lock wait and hold times per rank (`lock-stats` builds; not a supported API).
#[cfg(feature = "lock-stats")]
#[doc(hidden)]
pub mod lock_stats;
pub(crate) mod matrix;
pub(crate) mod memtable;
pub mod property;
pub(crate) mod range_del;
pub(crate) mod record;
pub(crate) mod sst;
pub(crate) mod sync;
pub(crate) mod version;
pub(crate) mod wal;

pub use backup::{BackupEngine, BackupInfo};
pub use batch::{BatchOp, WriteBatch};
pub use compaction_filter::{Clock, CompactionFilter, Decision, SystemClock};
pub use db::{Db, Keyspace, Snapshot};
pub use engine::checkpoint::CheckpointInfo;
pub use engine::updates::UpdatesIter;
pub use error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result, TierKind};
pub use iter::db_iter::DbIterator;
pub use key::SeqNo;
pub use keyspace::{DEFAULT_KEYSPACE, KeyspaceOptions};
pub use merge::{AppendOperator, MergeOperator, U64AddOperator};
pub use options::{
    Design, L0Layout, LightKvOptions, MAX_WAL_RETENTION_SEGMENTS, NoveLsmOptions, Options,
    ReadOptions, SlmDbOptions, Tiers, WriteOptions, XEngineOptions,
};
pub use property::PROPERTY_NAMES;
pub use sst::{Compression, TableOptions};
pub use stats::{FlushPhases, StallCause, Stats};
pub use wal::WalRecovery;

/// The repository's README.md, whose Rust examples run as doc tests (`cargo test --doc`), so
/// the example a newcomer copies first compiles and its assertions hold. `cfg(doctest)` keeps
/// it out of normal builds and of the published package, which does not contain that file.
#[cfg(doctest)]
#[doc = include_str!("../../../README.md")]
pub struct ReadmeDoctests;
