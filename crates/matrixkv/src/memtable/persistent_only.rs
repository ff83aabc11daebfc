//! Designs whose every memtable is a persistent skiplist on the fast tier
//! ([`super::pskiplist`]), so no write goes through a WAL; a full one becomes immutable and the
//! next one is a new persistent skiplist. Only the empty DRAM memtable an open starts with is
//! replaced at once.
//!
//! - SLM-DB (Kaiyrakhmet et al., FAST 2019; `shared/papers/003`): its persistent memtables
//!   (docs/decisions/0025-slmdb-mode.md);
//! - LightKV (Han et al., MSST 2020; `shared/papers/002`): its persistent write buffer, here a
//!   persistent skiplist rather than the paper's append-only segment indexed by the RH-tree
//!   (docs/decisions/0027-lightkv-mode.md).

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
