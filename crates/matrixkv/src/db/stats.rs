//! [`Db::stats`] and the properties (`Db::get_property`, `Db::get_int_property`) computed
//! from them.

use super::Db;
use crate::error::{Error, Result};
use crate::stats::Stats;

impl Db {
    /// A snapshot of the counters and of the shape of the tree.
    pub fn stats(&self) -> Stats {
        let mut s = Stats::from_counters(&self.inner.counters);
        let view = self.inner.read_view();
        s.levels = (0..self.inner.opts.num_levels)
            .map(|l| (view.version.num_files(l), view.version.level_bytes(l)))
            .collect();
        s.memtable_bytes = std::iter::once(&view.mem)
            .chain(view.imm.iter())
            .map(|m| m.approximate_bytes() as u64)
            .sum();
        s.table_memory_bytes = self.inner.tables.memory_bytes() as u64;
        let blobs = view.version.blob_files();
        s.blob_files = blobs.len();
        s.range_tombstones = view.version.range_dels().len();
        s.blob_reads = self.inner.blobs.reads();
        s.blob_bytes = blobs.values().fold((0, 0), |(a, g), b| {
            (a + b.meta.record_bytes, g + b.garbage_bytes)
        });
        {
            let c = view.version.container();
            s.container_rows = (c.receiver.len(), c.compactor.len());
            let st = self.inner.state.lock();
            if let Some(p) = &st.pool {
                let page = p.page_bytes() as u64;
                // In the matrix layout L0 is the container: its rows and the bytes they hold.
                if let Some(l0) = s.levels.first_mut() {
                    *l0 = (
                        c.receiver.len() + c.compactor.len(),
                        c.live_pages() as u64 * page,
                    );
                }
                s.container_used_bytes = p.used_pages() as u64 * page;
                s.container_capacity_bytes = p.total_pages() as u64 * page;
            }
        }
        if let Some(c) = &self.inner.block_cache {
            s.block_cache_bytes = c.usage_bytes() as u64;
            s.block_cache_hits = c.hits();
            s.block_cache_misses = c.misses();
        }
        {
            let st = self.inner.state.lock();
            s.poisoned = st.poison.clone();
            s.no_space = st
                .no_space
                .as_ref()
                .map(|ns| format!("{} (for {:?})", ns.to_error(), ns.since.elapsed()));
        }
        s
    }

    /// The value of property `name` as text: counters, the shape of the tree and of the
    /// matrix container, blob garbage, pending compaction bytes. [`crate::PROPERTY_NAMES`]
    /// lists the names (RocksDB's, with the prefix `matrixkv.`).
    ///
    /// ```
    /// # fn main() -> matrixkv::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = matrixkv::Db::open(matrixkv::Options::new(dir.path()))?;
    /// db.put("k", "v")?;
    /// assert_eq!(db.get_int_property("matrixkv.latest-sequence-number")?, 1);
    /// println!("{}", db.get_property("matrixkv.levelstats")?);
    /// assert!(db.get_property("rocksdb.stats").is_err()); // not one of ours
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// `InvalidArgument` naming the known properties if `name` is not one of them.
    pub fn get_property(&self, name: &str) -> Result<String> {
        crate::property::property(name, &self.property_inputs())
            .ok_or_else(|| unknown_property(name, false))
    }

    /// The value of integer property `name` (every property but the text ones, see
    /// [`crate::property::describe`]).
    ///
    /// # Errors
    /// `InvalidArgument` if `name` is not an integer property.
    pub fn get_int_property(&self, name: &str) -> Result<u64> {
        crate::property::int_property(name, &self.property_inputs())
            .ok_or_else(|| unknown_property(name, true))
    }

    /// What the properties are computed from.
    fn property_inputs(&self) -> crate::property::Inputs {
        let stats = self.stats();
        let (imm_memtables, snapshots) = {
            let st = self.inner.state.lock();
            (st.imm.len(), st.snapshots.values().sum())
        };
        let view = self.inner.read_view();
        let mut entries: u64 = std::iter::once(&view.mem)
            .chain(&view.imm)
            .map(|m| m.len() as u64)
            .sum();
        let c = view.version.container();
        entries += c
            .receiver
            .iter()
            .chain(&c.compactor)
            .map(|r| r.entries)
            .sum::<u64>();
        for level in 0..crate::version::NUM_LEVELS {
            entries += view
                .version
                .files(level)
                .iter()
                .map(|f| f.entries)
                .sum::<u64>();
        }
        crate::property::Inputs {
            stats,
            imm_memtables,
            snapshots,
            latest_seq: self.inner.latest_seq().0,
            l1_target_bytes: self.inner.opts.l1_target_bytes,
            level_multiplier: self.inner.opts.level_multiplier,
            entries,
        }
    }
}

/// The error for a property name that is not known (as an integer property if `int`).
fn unknown_property(name: &str, int: bool) -> Error {
    let names: Vec<&str> = crate::property::PROPERTY_NAMES
        .iter()
        .copied()
        .filter(|n| !int || crate::property::describe(n).is_some_and(|d| !d.starts_with("text:")))
        .collect();
    Error::invalid(format!(
        "unknown {}property {name:?}; known: {}",
        if int { "integer " } else { "" },
        names.join(", ")
    ))
}
