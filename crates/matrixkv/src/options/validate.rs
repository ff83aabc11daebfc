//! [`Options::validate`]: every check of the options, one step per group of options, in the
//! order the groups are checked (the first failing check's message is the error).

use std::time::Duration;

use super::{
    Design, L0Layout, LightKvOptions, MAX_WAL_RETENTION_SEGMENTS, NoveLsmOptions, Options,
    SlmDbOptions, XEngineOptions,
};
use crate::error::{Error, Result};

/// `Ok` if `ok`, else `InvalidArgument` with `msg` (which names the field).
fn check(ok: bool, msg: &str) -> Result<()> {
    if ok { Ok(()) } else { Err(Error::invalid(msg)) }
}

impl Options {
    /// Checks every option; the error names the offending field.
    pub fn validate(&self) -> Result<()> {
        check(
            !self.fast_dir.as_os_str().is_empty(),
            "fast_dir must not be empty",
        )?;
        check(
            !self.slow_dir.as_os_str().is_empty(),
            "slow_dir must not be empty",
        )?;
        self.validate_design()?;
        check(
            self.fast_dir != self.slow_dir,
            "fast_dir and slow_dir must be different directories",
        )?;
        self.validate_memtables_and_wal()?;
        self.validate_levels()?;
        self.validate_background()?;
        self.validate_ttl_and_keyspaces()?;
        self.validate_blob_separation()?;
        self.validate_size_limits()?;
        self.validate_container()?;
        self.table.validate()
    }

    /// The knobs of the design, and the L0 layout the design needs.
    fn validate_design(&self) -> Result<()> {
        match &self.design {
            Design::MatrixKv => Ok(()),
            Design::XEngine(x) => validate_xengine(x),
            Design::NoveLsm(n) => validate_novelsm(n),
            Design::SlmDb(d) => validate_slmdb(d, self.l0_layout),
            Design::LightKv(d) => validate_lightkv(d, self.l0_layout),
        }
    }

    /// The write buffers (DRAM memtables) and the WAL segments kept for reuse or for readers.
    fn validate_memtables_and_wal(&self) -> Result<()> {
        check(
            self.write_buffer_bytes >= 64 << 10,
            "write_buffer_bytes must be at least 64 KiB",
        )?;
        check(
            self.write_buffer_bytes <= 4 << 30,
            "write_buffer_bytes must be at most 4 GiB",
        )?;
        check(
            (2..=16).contains(&self.max_write_buffers),
            "max_write_buffers must be between 2 and 16",
        )?;
        check(
            self.wal_recycle_segments <= 16,
            "wal_recycle_segments must be at most 16",
        )?;
        check(
            self.wal_retention_segments <= MAX_WAL_RETENTION_SEGMENTS,
            "wal_retention_segments must be at most 1024",
        )
    }

    /// The shape of the tree: L0 triggers, level sizes, the number of levels, file sizes.
    fn validate_levels(&self) -> Result<()> {
        check(
            self.l0_compaction_trigger >= 1,
            "l0_compaction_trigger must be at least 1",
        )?;
        check(
            self.l0_slowdown_writes_trigger >= self.l0_compaction_trigger,
            "l0_slowdown_writes_trigger must be >= l0_compaction_trigger",
        )?;
        check(
            self.l0_stop_writes_trigger > self.l0_slowdown_writes_trigger,
            "l0_stop_writes_trigger must be > l0_slowdown_writes_trigger",
        )?;
        check(
            self.l1_target_bytes >= 1 << 20,
            "l1_target_bytes must be at least 1 MiB",
        )?;
        check(
            (2..=100).contains(&self.level_multiplier),
            "level_multiplier must be between 2 and 100",
        )?;
        check(
            (2..=7).contains(&self.num_levels),
            "num_levels must be between 2 and 7",
        )?;
        check(
            self.target_file_bytes >= 64 << 10,
            "target_file_bytes must be at least 64 KiB",
        )
    }

    /// The background threads' priority, the memtable filter's size and the wait for space.
    fn validate_background(&self) -> Result<()> {
        check(
            (0..=19).contains(&self.background_nice),
            "background_nice must be between 0 and 19",
        )?;
        check(
            (0.0..=0.25).contains(&self.memtable_filter_ratio),
            "memtable_filter_ratio must be between 0 and 0.25",
        )?;
        check(
            self.no_space_timeout >= Duration::from_millis(1),
            "no_space_timeout must be at least 1 ms",
        )
    }

    /// The database's TTL and the options of each named keyspace.
    fn validate_ttl_and_keyspaces(&self) -> Result<()> {
        check(
            self.ttl.is_none_or(|t| t >= Duration::from_secs(1)),
            "ttl must be at least 1 s",
        )?;
        for (name, ks) in &self.keyspace_options {
            if ks.ttl.is_some_and(|t| t < Duration::from_secs(1)) {
                return Err(Error::invalid(format!(
                    "keyspace_options[{name:?}].ttl must be at least 1 s"
                )));
            }
            if let Some(c) = ks.compression
                && !c.is_supported()
            {
                return Err(Error::invalid(format!(
                    "keyspace_options[{name:?}].compression `{c}` is not available in this \
                     build (enable the `{c}` feature)"
                )));
            }
            if name == crate::DEFAULT_KEYSPACE {
                return Err(Error::invalid(
                    "keyspace_options cannot name the default keyspace: its options are the \
                     database's (merge_operator, compaction_filter, ttl, min_blob_bytes)",
                ));
            }
        }
        Ok(())
    }

    /// Blob separation: the blob files' size, when they are collected, and their space budget.
    fn validate_blob_separation(&self) -> Result<()> {
        check(
            self.blob_file_bytes >= 4 << 10,
            "blob_file_bytes must be at least 4 KiB",
        )?;
        check(
            self.blob_gc_ratio > 0.0 && self.blob_gc_ratio <= 1.0,
            "blob_gc_ratio must be in (0, 1]",
        )?;
        check(
            self.blob_space_budget >= 1.0,
            "blob_space_budget must be at least 1 (or infinity)",
        )
    }

    /// Open tables, and the largest key, value and batch.
    fn validate_size_limits(&self) -> Result<()> {
        check(
            self.max_open_tables >= 16,
            "max_open_tables must be at least 16",
        )?;
        check(
            (1..=(1 << 20)).contains(&self.max_key_bytes),
            "max_key_bytes must be between 1 and 1 MiB",
        )?;
        check(
            self.max_value_bytes <= 1 << 30,
            "max_value_bytes must be at most 1 GiB",
        )?;
        check(
            self.max_batch_bytes >= self.max_key_bytes + self.max_value_bytes,
            "max_batch_bytes must hold at least one key of max_key_bytes and one value of \
             max_value_bytes",
        )?;
        check(
            self.max_batch_bytes <= 2 << 30,
            "max_batch_bytes must be at most 2 GiB",
        )
    }

    /// The matrix container: pages, its size, the receiver switch and slowdown, and the
    /// column compaction's threads and column bounds.
    fn validate_container(&self) -> Result<()> {
        check(
            self.page_bytes.is_power_of_two() && (512..=1 << 20).contains(&self.page_bytes),
            "page_bytes must be a power of two between 512 B and 1 MiB",
        )?;
        check(
            self.container_bytes.is_multiple_of(self.page_bytes as u64),
            "container_bytes must be a multiple of page_bytes",
        )?;
        check(
            self.container_bytes >= 4 * self.write_buffer_bytes as u64,
            "container_bytes must hold at least 4 memtables (4 * write_buffer_bytes)",
        )?;
        check(
            self.container_bytes / self.page_bytes as u64 <= u64::from(u32::MAX - 1),
            "container_bytes / page_bytes must fit in 32 bits",
        )?;
        check(
            self.receiver_switch_ratio > 0.0 && self.receiver_switch_ratio < 1.0,
            "receiver_switch_ratio must be between 0 and 1 (exclusive)",
        )?;
        check(
            self.container_slowdown_ratio > 0.0 && self.container_slowdown_ratio < 1.0,
            "container_slowdown_ratio must be between 0 and 1 (exclusive)",
        )?;
        check(
            (1..=8).contains(&self.column_threads),
            "column_threads must be between 1 and 8",
        )?;
        let (lo, hi) = self.column_bounds();
        check(lo >= 1 << 16, "column_lower_bytes must be at least 64 KiB")?;
        check(hi >= lo, "column_upper_bytes must be >= column_lower_bytes")
    }
}

/// The knobs of [`Design::XEngine`].
fn validate_xengine(x: &XEngineOptions) -> Result<()> {
    check(
        (1..=1024).contains(&x.ror_batch),
        "XEngineOptions::ror_batch must be 1 to 1024",
    )?;
    check(
        x.ror_wait <= Duration::from_millis(100),
        "XEngineOptions::ror_wait must be at most 100 ms",
    )
}

/// The knobs of [`Design::NoveLsm`].
fn validate_novelsm(n: &NoveLsmOptions) -> Result<()> {
    check(
        n.persistent_memtable_bytes >= 1 << 16 && n.persistent_memtable_bytes <= usize::MAX as u64,
        "NoveLsmOptions::persistent_memtable_bytes must be at least 64 KiB",
    )
}

/// The knobs of [`Design::SlmDb`], whose single level of tables needs `l0_layout` tables.
fn validate_slmdb(d: &SlmDbOptions, l0_layout: L0Layout) -> Result<()> {
    check(
        l0_layout == L0Layout::Tables,
        "the slmdb design keeps one level of SSTables on the slow tier and no matrix \
         container: set l0_layout to tables",
    )?;
    check(
        d.persistent_memtable_bytes >= 1 << 16 && d.persistent_memtable_bytes <= usize::MAX as u64,
        "SlmDbOptions::persistent_memtable_bytes must be at least 64 KiB",
    )?;
    check(
        d.index_bytes >= 1 << 16 && d.index_bytes <= usize::MAX as u64,
        "SlmDbOptions::index_bytes must be at least 64 KiB",
    )?;
    check(
        d.live_key_ratio > 0.0 && d.live_key_ratio <= 1.0,
        "SlmDbOptions::live_key_ratio must be in (0, 1]",
    )?;
    check(
        d.candidate_trigger >= 1 && d.max_merge_tables >= 1,
        "SlmDbOptions::candidate_trigger and max_merge_tables must be at least 1",
    )
}

/// The knobs of [`Design::LightKv`], whose partitions of tables need `l0_layout` tables.
fn validate_lightkv(d: &LightKvOptions, l0_layout: L0Layout) -> Result<()> {
    check(
        l0_layout == L0Layout::Tables,
        "the lightkv design keeps partitions of SSTables on the slow tier and no matrix \
         container: set l0_layout to tables",
    )?;
    check(
        d.write_buffer_bytes >= 1 << 16 && d.write_buffer_bytes <= usize::MAX as u64,
        "LightKvOptions::write_buffer_bytes must be at least 64 KiB",
    )?;
    check(
        d.index_bytes >= 1 << 16 && d.index_bytes <= usize::MAX as u64,
        "LightKvOptions::index_bytes must be at least 64 KiB",
    )?;
    check(
        (2..=64).contains(&d.compaction_size),
        "LightKvOptions::compaction_size must be 2 to 64",
    )?;
    check(
        (1..=4096).contains(&d.max_partitions),
        "LightKvOptions::max_partitions must be 1 to 4096",
    )?;
    check(
        d.partition_bytes >= 64 << 10,
        "LightKvOptions::partition_bytes must be at least 64 KiB",
    )
}
