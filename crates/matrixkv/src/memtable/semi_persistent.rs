//! X-Engine's semi-persistent memtable (X-Engine on NVM, Alibaba; `shared/papers/004`): a
//! record's bytes are made durable once, in persistent memory, and the memtable's index lives
//! in DRAM, pointing at them. After a crash the index is rebuilt from the persistent records,
//! by several threads at once.
//!
//! Here the persistent records are the WAL's: each batch is appended once to a WAL segment
//! mapped from the fast tier, and the DRAM skiplist entries hold the key (copied: it is small
//! and searched often) and a zero-copy view of the value inside that record
//! ([`Region::view`]). No value is copied into DRAM, and a flush reads the values straight
//! from the mapped segment. A view seals its bytes: the segment cannot be recycled while a
//! memtable (or an iterator that outlives it) still points into it; it is deleted instead, and
//! its mapping lives until the last view goes.
//!
//! What differs from the paper: X-Engine's index is a radix tree with prefix matching (SPM);
//! this one is the engine's skiplist. Its Halloc allocator is not needed: the WAL segment is
//! the allocation. The ROR batch (persisting the records of several writers together) is the
//! group commit, waiting for up to [`XEngineOptions::ror_batch`] writers.

use std::io;
use std::time::Duration;

use bytes::Bytes;

use super::design::MemtableDesign;
use crate::options::XEngineOptions;
use crate::tier::Region;

/// X-Engine's design: values stay in the WAL record; the DRAM index refers to them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SemiPersistentMemtable {
    knobs: XEngineOptions,
}

impl SemiPersistentMemtable {
    /// The design with its knobs.
    pub(crate) fn new(knobs: XEngineOptions) -> SemiPersistentMemtable {
        SemiPersistentMemtable { knobs }
    }
}

impl MemtableDesign for SemiPersistentMemtable {
    fn record_backing(
        &self,
        region: &dyn Region,
        offset: usize,
        len: usize,
    ) -> io::Result<Option<Bytes>> {
        region.view(offset, len).map(Some)
    }

    fn commit_batch(&self) -> (usize, Duration) {
        (self.knobs.ror_batch.max(1), self.knobs.ror_wait)
    }

    fn recovery_threads(&self) -> usize {
        match self.knobs.recovery_threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            n => n,
        }
    }
}
