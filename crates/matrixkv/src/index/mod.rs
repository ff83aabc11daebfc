//! The global index designs of the engine's modes: indexes that map every live user key to
//! where its value lies on disk, kept on the fast tier so that a point read needs at most one
//! disk read.
//!
//! - [`pbtree`]: the persistent copy-on-write B+-tree of the SLM-DB mode (SLM-DB, FAST 2019;
//!   docs/format/pbtree.md), mapping a key to its SSTable, block offset and block size;
//! - [`rhtree`]: the Radix Hash Tree of the LightKV mode (LightKV, MSST 2020;
//!   docs/format/rhtree.md): hash-table leaves in a fast-tier region under a DRAM prefix
//!   search tree, mapping a key to its location;
//! - [`radix`]: the RH-tree as LightKV's store: its epoch and the compaction of its log;
//! - [`global`]: either store as the engine uses it, with the live-key counts and leaf scans of
//!   SLM-DB's selective compaction.

pub(crate) mod global;
pub(crate) mod pbtree;
pub(crate) mod radix;
pub(crate) mod rhtree;
