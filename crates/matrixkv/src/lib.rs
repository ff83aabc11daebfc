//! matrixkv: an embedded key-value store for a machine with a small, fast, byte-addressable
//! tier (persistent memory, CXL, tmpfs standing in) and a large, slower disk tier.
//!
//! The WAL lives on the fast tier, the memtable in DRAM, L0 on the fast tier and L1..Ln as
//! SSTables on the disk tier. See `docs/design.md`.
#![forbid(unsafe_code)]

pub mod error;
pub mod key;
pub mod tier;

pub(crate) mod cache;
pub(crate) mod checksum;
pub(crate) mod coding;
pub(crate) mod iter;
pub(crate) mod layout;
pub(crate) mod record;
pub(crate) mod sst;

pub use error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, IoOp, Result};
pub use key::SeqNo;
pub use sst::{Compression, TableOptions};
