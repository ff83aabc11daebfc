//! `matrixkv stats`: what a database holds (its design, levels and their sizes, the matrix
//! container's use, the memtables replayed from the WAL, blob files and their garbage, an
//! estimate of the keys), from the engine's properties (`Db::get_int_property`) and its
//! manifest (`matrixkv::inspect`), and with `--counters` the counters of this open.
//!
//! The counters (`Db::stats`) count what one open did; the read-only open `stats` makes has
//! done nothing, so they read zero there and are not the default.

use std::fmt::Write as _;

use anyhow::Result;
use matrixkv::Db;

use crate::locate::Located;

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1u32 << 20)
}

/// The text `matrixkv stats` prints for the open database `db` at `at`.
pub fn content(db: &Db, at: &Located, counters: bool) -> Result<String> {
    let int = |name: &str| db.get_int_property(name);
    let mut out = String::new();
    let fixed = matrixkv::inspect::manifest(&at.slow_dir)
        .map(|m| m.fixed_options)
        .unwrap_or_default();
    let fixed_of = |name: &str| {
        fixed
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    writeln!(
        out,
        "database: slow tier {}, fast tier {}",
        at.slow_dir.display(),
        at.fast_dir.display()
    )?;
    let design = fixed_of("design").unwrap_or("matrixkv");
    writeln!(
        out,
        "design {design}: {}",
        match (design, fixed_of("l0_layout")) {
            ("slmdb" | "lightkv", _) =>
                "every table on the slow tier, the global index on the fast tier",
            (_, Some("tables")) => "level 0 in tables on the fast tier",
            _ => "level 0 in the matrix container on the fast tier",
        }
    )?;
    writeln!(
        out,
        "keys: about {} (entries stored: every version, tombstone and merge operand, so an \
         upper bound on the live keys); latest sequence number {}",
        int("matrixkv.estimate-num-keys")?,
        int("matrixkv.latest-sequence-number")?
    )?;
    let imm = int("matrixkv.num-immutable-mem-table")?;
    writeln!(
        out,
        "memtables: {:.1} MiB ({imm} immutable), the writes not yet flushed, replayed from the \
         WAL",
        mib(int("matrixkv.cur-size-all-mem-tables")?)
    )?;
    let capacity = int("matrixkv.container-capacity-bytes")?;
    if capacity > 0 {
        writeln!(
            out,
            "matrix container: {:.1} of {:.1} MiB used ({}%), {} receiver rows, {} compactor \
             rows",
            mib(int("matrixkv.container-used-bytes")?),
            mib(capacity),
            int("matrixkv.container-occupancy-percent")?,
            int("matrixkv.container-receiver-rows")?,
            int("matrixkv.container-compactor-rows")?
        )?;
    }
    let levels = db.stats().levels.len();
    for level in 0..levels {
        let files = int(&format!("matrixkv.num-files-at-level{level}"))?;
        let bytes = int(&format!("matrixkv.bytes-at-level{level}"))?;
        if files == 0 && bytes == 0 {
            continue;
        }
        if level == 0 && capacity > 0 {
            writeln!(
                out,
                "L0: {files} rows, {:.1} MiB (in the matrix container)",
                mib(bytes)
            )?;
        } else {
            writeln!(out, "L{level}: {files} tables, {:.1} MiB", mib(bytes))?;
        }
    }
    writeln!(
        out,
        "SSTables: {:.1} MiB; compaction pending: {:.1} MiB",
        mib(int("matrixkv.total-sst-files-size")?),
        mib(int("matrixkv.estimate-pending-compaction-bytes")?)
    )?;
    let blob_files = int("matrixkv.num-blob-files")?;
    if blob_files > 0 {
        let live = int("matrixkv.live-blob-file-size")?;
        let garbage = int("matrixkv.live-blob-file-garbage-size")?;
        writeln!(
            out,
            "blob files: {blob_files}, {:.1} MiB of values, {:.1} MiB of it garbage ({:.0}%)",
            mib(live),
            mib(garbage),
            if live == 0 {
                0.0
            } else {
                100.0 * garbage as f64 / live as f64
            }
        )?;
    }
    let tombstones = int("matrixkv.num-range-deletes")?;
    if tombstones > 0 {
        writeln!(out, "range tombstones: {tombstones}")?;
    }
    let keyspaces = db.list_keyspaces();
    if keyspaces.len() > 1 {
        writeln!(out, "keyspaces: {}", keyspaces.join(", "))?;
    }
    if counters {
        writeln!(
            out,
            "\ncounters of this open (read-only: nothing written yet, so mostly zero):"
        )?;
        write!(out, "{}", db.stats())?;
    }
    Ok(out)
}
