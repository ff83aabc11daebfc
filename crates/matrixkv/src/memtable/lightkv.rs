//! LightKV's write buffers (Han et al., MSST 2020; `shared/papers/002`;
//! docs/decisions/0027-lightkv-mode.md): every memtable is a persistent write buffer on the
//! fast tier ([`super::pwb`]: an append-only log indexed by an RH-tree of its own), so no write
//! goes through a WAL; a full one becomes immutable and the next one is a new buffer. Only the
//! empty DRAM memtable an open starts with is replaced at once.

use std::path::Path;
use std::sync::Arc;

use super::MemTable;
use super::design::MemtableDesign;
use super::pwb::{self, Pwb};
use crate::error::Result;
use crate::tier::Region;

/// Write buffers whose logs take `bytes` each, and nothing else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LightKvWriteBuffers {
    bytes: u64,
}

impl LightKvWriteBuffers {
    /// Buffers of `bytes` of log each.
    pub(crate) fn new(bytes: u64) -> LightKvWriteBuffers {
        LightKvWriteBuffers { bytes }
    }
}

impl MemtableDesign for LightKvWriteBuffers {
    fn persistent_memtable_bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }

    fn only_persistent(&self) -> bool {
        true
    }

    fn persistent_region_len(&self, bytes: u64) -> u64 {
        pwb::region_len(bytes)
    }

    fn create_persistent(
        &self,
        region: Arc<dyn Region>,
        path: &Path,
        number: u64,
    ) -> Result<MemTable> {
        let buffer = Pwb::create(region, path, number)?;
        Ok(MemTable::write_buffer(Arc::new(buffer), Vec::new()))
    }

    fn open_persistent(&self, region: Arc<dyn Region>, path: &Path) -> Result<MemTable> {
        let (buffer, tombstones) = Pwb::open(region, path)?;
        Ok(MemTable::write_buffer(Arc::new(buffer), tombstones))
    }
}
