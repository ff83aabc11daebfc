//! SLM-DB's memtables (Kaiyrakhmet et al., FAST 2019; `shared/papers/003`;
//! docs/decisions/0025-slmdb-mode.md): every memtable is a persistent skiplist on the fast
//! tier ([`super::pskiplist`]), so no write goes through a WAL; a full one becomes immutable
//! and the next one is a new persistent skiplist. Only the empty DRAM memtable an open starts
//! with is replaced at once.

use super::design::MemtableDesign;

/// Persistent memtables of `bytes` each, and nothing else.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PersistentOnlyMemtables {
    bytes: u64,
}

impl PersistentOnlyMemtables {
    /// Memtables of `bytes` of fast-tier region each.
    pub(crate) fn new(bytes: u64) -> PersistentOnlyMemtables {
        PersistentOnlyMemtables { bytes }
    }
}

impl MemtableDesign for PersistentOnlyMemtables {
    fn persistent_memtable_bytes(&self) -> Option<u64> {
        Some(self.bytes)
    }

    fn only_persistent(&self) -> bool {
        true
    }
}
