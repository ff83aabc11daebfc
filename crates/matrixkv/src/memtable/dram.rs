//! The DRAM memtable of MatrixKV (and LevelDB/RocksDB): each value is written to the WAL on
//! the fast tier, then copied into the skiplist's entry in DRAM. Reads and flushes never touch
//! the WAL; the WAL is only read at recovery.

use super::design::MemtableDesign;

/// The default design: values copied into DRAM.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DramMemtable;

impl MemtableDesign for DramMemtable {}
