//! The only crate of matrixkv that contains `unsafe` code: mapping fast-tier files and making
//! stores to them persistent, appending to a slow-tier file through a mapping
//! ([`MappedFile`]), reading a slow-tier file through a read-only mapping ([`ReadMap`]),
//! setting a thread's scheduling priority, sleeping with a thread's timer slack lowered, and
//! starting a file's writeback early.
//!
//! It exposes a safe protocol, [`Region`]: `write` bytes, `persist` a range, `publish_u64` a
//! commit word (aligned 8-byte store + persist). Readers trust only published ranges.
//!
//! Implementations: [`MmapRegion`] (a real file mapped with `mmap`) and [`SimulatedRegion`]
//! (an in-memory region that tracks unpersisted stores and can produce crash images).
#![deny(missing_docs)]
#![allow(
    unsafe_code,
    reason = "this crate exists to hold the unsafe mapping and flush code"
)]

use std::fmt::Debug;
use std::io;

use bytes::Bytes;

mod mapped_file;
mod mmap;
mod read_map;
mod sim;
mod thread;
mod writeback;

pub use mapped_file::{MappedFile, Populator};
pub use mmap::{FORCE_MSYNC_ENV, MmapRegion};
pub use read_map::ReadMap;
pub use sim::{CrashPolicy, FaultPlan, RegionOpTrace, SimulatedRegion};
pub use thread::{set_current_thread_nice, sleep_precisely};
pub use writeback::start_writeback;

/// How a region makes stores persistent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PersistMode {
    /// `msync(MS_SYNC)` on the page range (ordinary file mapping, including tmpfs).
    Msync,
    /// DAX mapping with `MAP_SYNC`: `clwb` + `sfence`.
    Clwb,
    /// DAX mapping with `MAP_SYNC`: `clflushopt` + `sfence`.
    ClflushOpt,
    /// DAX mapping with `MAP_SYNC`: `clflush` (+ `sfence`).
    Clflush,
    /// In-memory simulation.
    Simulated,
}

/// A fixed-size, mapped fast-tier region.
///
/// Concurrency: all methods take `&self`. Concurrent `write`s to *disjoint* ranges are allowed;
/// reading a range while another thread writes it returns unspecified bytes (never UB), so
/// readers must only read ranges whose publication they observed.
pub trait Region: Send + Sync + Debug {
    /// Length in bytes.
    fn len(&self) -> usize;
    /// True for a zero-length region.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Copies `data` to `offset`. Not persistent until [`Region::persist`] covers it.
    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()>;
    /// Copies the bytes at `offset` into `buf`.
    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()>;
    /// Makes every store to `[offset, offset+len)` persistent (flush + fence, or msync).
    fn persist(&self, offset: usize, len: usize) -> io::Result<()>;
    /// Stores `value` at the 8-byte aligned `offset` as one atomic store, then persists it.
    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()>;
    /// Loads the 8-byte aligned word at `offset` atomically.
    fn read_u64(&self, offset: usize) -> io::Result<u64>;
    /// How this region persists.
    fn persist_mode(&self) -> PersistMode;
    /// The bytes `[offset, offset + len)` as an immutable shared buffer.
    ///
    /// A mapped region returns a view of the mapping itself (no copy) and *seals* the range:
    /// while any view of the region is alive, a store below the highest end of a view taken
    /// so far fails (`PermissionDenied`), so a view's bytes never change under a reader.
    /// Stores above the seal (appending after the viewed records) are unaffected; once every
    /// view is dropped the whole region is writable again (recycling). Other regions may
    /// return a copy. Callers view only bytes they wrote (or whose publication they saw).
    fn view(&self, offset: usize, len: usize) -> io::Result<Bytes> {
        let mut buf = vec![0u8; len];
        self.read(offset, &mut buf)?;
        Ok(Bytes::from(buf))
    }
    /// How many [`Region::view`]s of this region that share its memory are alive (0 for
    /// regions whose views are copies).
    fn live_views(&self) -> usize {
        0
    }
}
