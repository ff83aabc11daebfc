//! Value placement of the paper runs: every series of a figure runs with key-value separation
//! off (the papers' setting, the default) or, with `--separation on`, on for every series that
//! can separate; and what each series keeps on the fast tier, for the figures' captions.
//!
//! `off` passes `--enable_blob_files=false --separate_at_flush=false --separate_at_write=false`
//! to every bench command (matrixkv's designs then keep every value with its key: in the WAL,
//! the memtable, L0 and the SSTables); RocksDB's BlobDB setups and fjall, which always
//! separate, are left out. `on` passes `=true` for the three (the engine's defaults: values of
//! at least `--min_blob_size` go to blob files on the slow tier when their memtable is flushed,
//! the large ones already as they are written), and runs `rocksdb-ssd` as `rocksdb-blob`
//! (RocksDB-SSD with its integrated BlobDB, the same threshold). The designs without
//! separation (NoveLSM, SLM-DB, LightKV, RocksDB-L0-fast) keep their values with their keys in
//! both settings, and the caption says so.

use std::fmt::Write as _;

use anyhow::{Result, bail};

use crate::bench::args::BenchArgs;

/// `--separation`: key-value separation for every series of every figure.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Separation {
    /// Values stay with their keys in every series (the papers' setting).
    #[default]
    Off,
    /// Values of at least `--min_blob_size` go to blob files in every series that can.
    On,
}

/// The bench flags `--separation` owns; `--bench-flag` may not set them.
const OWNED_FLAGS: [&str; 3] = [
    "--enable_blob_files",
    "--separate_at_flush",
    "--separate_at_write",
];

/// Engines that always separate values (no setting of theirs keeps values with their keys).
const ALWAYS_SEPARATE: [&str; 3] = ["rocksdb-blob", "rocksdb-best", "fjall"];

impl Separation {
    /// `on` or `off`.
    pub fn name(self) -> &'static str {
        match self {
            Separation::Off => "off",
            Separation::On => "on",
        }
    }

    /// The flags every bench command of the paper carries.
    pub fn flags(self) -> Vec<String> {
        let on = self == Separation::On;
        OWNED_FLAGS.iter().map(|f| format!("{f}={on}")).collect()
    }
}

/// Refuses `--bench-flag`s that would change the value placement behind the label's back.
pub fn check_bench_flags(flags: &[String]) -> Result<()> {
    for f in flags {
        let name = f.split('=').next().unwrap_or_default().replace('-', "_");
        if let Some(owned) = OWNED_FLAGS.iter().find(|o| o.replace('-', "_") == name) {
            bail!(
                "`--bench-flag={f}`: {owned} is set by `--separation on|off` for every series, \
                 so that the report's label stays true"
            );
        }
    }
    Ok(())
}

/// The series of a figure in the setting `sep`: those that cannot run in it are left out
/// (with the reason), `rocksdb-ssd` becomes `rocksdb-blob` with separation on.
pub fn like_for_like(engines: &[String], sep: Separation) -> Result<(Vec<String>, Vec<String>)> {
    let mut out: Vec<String> = Vec::new();
    let mut notes = Vec::new();
    for e in engines {
        let e = e.as_str();
        let run = match sep {
            Separation::Off if ALWAYS_SEPARATE.contains(&e) => {
                notes.push(format!(
                    "{e} left out: it always separates values, and separation is off for every \
                     series (`--separation on` runs it)"
                ));
                continue;
            }
            Separation::On if e == "rocksdb-ssd" => {
                notes.push(
                    "rocksdb-ssd runs as rocksdb-blob: RocksDB-SSD with its integrated BlobDB \
                     (the same --min_blob_size), RocksDB's separation"
                        .to_owned(),
                );
                "rocksdb-blob"
            }
            _ => e,
        };
        if !out.iter().any(|o| o == run) {
            out.push(run.to_owned());
        }
    }
    if out.is_empty() {
        bail!(
            "no series of --engines can run with separation {}",
            sep.name()
        );
    }
    Ok((out, notes))
}

/// Where `engine` keeps its values in the setting `sep` (`b`: the bench's other flags).
fn values(engine: &str, sep: Separation, b: &BenchArgs) -> String {
    let min = b.min_blob_size;
    let with_keys = "with their keys (WAL, memtables, L0 and the SSTables)";
    match (engine, sep) {
        (
            "matrixkv" | "matrixkv-values-in-wal" | "matrixkv-values-in-wal-pread",
            Separation::On,
        ) => {
            format!(
                "values ≥ {min} B in blob files on the slow tier, separated as their memtable is \
                 flushed{}",
                if engine == "matrixkv" {
                    " (the large ones, ≥ `--separate_at_write_min_bytes`, default 2 KiB, already \
                     as they are written)"
                } else {
                    " (logged in the WAL first)"
                }
            )
        }
        ("matrixkv-separate-at-write", Separation::On) => {
            format!("values ≥ {min} B in blob files on the slow tier, as they are written")
        }
        ("matrixkv-xengine", Separation::On) => {
            format!("values ≥ {min} B in blob files on the slow tier, separated at flush")
        }
        ("rocksdb-blob" | "rocksdb-best", _) => {
            format!("values ≥ {min} B in BlobDB blob files on the slow tier")
        }
        ("fjall", _) => format!("values ≥ {min} B in fjall's blob files on the slow tier"),
        ("append-log", _) => "with their keys, in one log".to_owned(),
        ("matrixkv-novelsm" | "matrixkv-slmdb" | "matrixkv-lightkv", Separation::On) => {
            format!("{with_keys}: the design has no separation, as in its paper")
        }
        ("rocksdb-l0-fast", Separation::On) => {
            format!("{with_keys}: the bench has no BlobDB setup with L0 on the fast tier")
        }
        _ => with_keys.to_owned(),
    }
}

/// What `engine` keeps on the fast tier, beside the paper's description.
fn fast_tier(engine: &str, b: &BenchArgs) -> String {
    match engine {
        "matrixkv"
        | "matrixkv-separate-at-write"
        | "matrixkv-values-in-wal"
        | "matrixkv-values-in-wal-pread" => format!(
            "the WAL and L0, the matrix container of RowTables ({} MiB), as MatrixKV's L0 in \
             NVM; L1 and below on the slow tier",
            b.container_bytes >> 20
        ),
        "matrixkv-xengine" => "the WAL holding the semi-persistent memtable's records and L0 \
                               (the matrix container, which stands in for X-Engine's global \
                               index); L1 and below on the slow tier"
            .to_owned(),
        "matrixkv-novelsm" => format!(
            "the WAL and the persistent mutable memtables ({} MiB each; the MatrixKV paper gives \
             NoveLSM 2 × 4 GB of NVM memtables), and its L0 SSTables too (the engine's `tables` \
             layout; NoveLSM keeps L0 on the SSD, so this favours it); L1 and below on the slow \
             tier",
            b.persistent_memtable_bytes >> 20
        ),
        "matrixkv-slmdb" => "its persistent memtable and the B+-tree index (SLM-DB's PM); the \
                             single level of tables on the slow tier"
            .to_owned(),
        "matrixkv-lightkv" => "its persistent write buffers and the RH-tree index (LightKV's \
                               PM); the partitions' tables on the slow tier"
            .to_owned(),
        "rocksdb-ssd" | "rocksdb-blob" => {
            "nothing: WAL and every level on the slow tier (RocksDB-SSD)".to_owned()
        }
        "rocksdb-l0-fast" => format!(
            "the WAL and its first `db_paths` entry, up to {} MiB of SSTables (L0 and what \
             follows while it has room), as RocksDB-L0-NVM",
            b.rocksdb_fast_path_bytes >> 20
        ),
        "rocksdb-best" => "the WAL; tables and blob files on the slow tier".to_owned(),
        "fjall" => "the journal; tables and blob files on the slow tier".to_owned(),
        _ => "nothing: one log on the slow tier".to_owned(),
    }
}

/// The caption of a figure: the value-placement setting, the flags, and per series where
/// values go and what the fast tier holds. `extra`: a remark of the figure's own.
pub fn caption(engines: &[String], sep: Separation, b: &BenchArgs, extra: &str) -> String {
    let mut md = format!(
        "\n*Value placement: separation {} for every series* (each command carries `{}`; \
         `matrixkv paper --separation {}` runs the other setting).{extra}\n\n",
        sep.name(),
        sep.flags().join(" "),
        match sep {
            Separation::Off => "on",
            Separation::On => "off",
        }
    );
    for (i, e) in engines.iter().enumerate() {
        if engines[..i].contains(e) {
            continue;
        }
        let _ = writeln!(
            md,
            "- `{e}`: {}; fast tier: {}.",
            values(e, sep, b),
            fast_tier(e, b)
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(s: &[&str]) -> Vec<String> {
        s.iter().map(|e| (*e).to_owned()).collect()
    }

    #[test]
    fn separation_off_leaves_out_the_engines_that_always_separate() {
        let (run, notes) = like_for_like(
            &list(&["matrixkv", "rocksdb-best", "fjall", "matrixkv-novelsm"]),
            Separation::Off,
        )
        .unwrap();
        assert_eq!(run, list(&["matrixkv", "matrixkv-novelsm"]));
        assert_eq!(notes.len(), 2);
        assert!(like_for_like(&list(&["fjall"]), Separation::Off).is_err());
    }

    #[test]
    fn separation_on_runs_rocksdb_ssd_with_blobdb() {
        let (run, notes) = like_for_like(
            &list(&["matrixkv", "rocksdb-ssd", "rocksdb-blob"]),
            Separation::On,
        )
        .unwrap();
        assert_eq!(run, list(&["matrixkv", "rocksdb-blob"]));
        assert!(notes[0].contains("BlobDB"), "{notes:?}");
    }

    #[test]
    fn the_flags_separation_owns_are_refused_as_bench_flags() {
        let e = check_bench_flags(&list(&["--enable-blob-files=true"])).unwrap_err();
        assert!(e.to_string().contains("--separation"), "{e}");
        assert!(check_bench_flags(&list(&["--separate_at_write_min_bytes=0"])).is_ok());
        assert!(check_bench_flags(&list(&["--threads=2"])).is_ok());
    }

    #[test]
    fn the_caption_names_the_setting_and_every_series() {
        let b = BenchArgs::parse_words(["bench"]).unwrap();
        let c = caption(
            &list(&["matrixkv", "matrixkv-novelsm"]),
            Separation::On,
            &b,
            "",
        );
        assert!(c.contains("separation on for every series"), "{c}");
        assert!(c.contains("--enable_blob_files=true"), "{c}");
        assert!(c.contains("- `matrixkv-novelsm`: with their keys"), "{c}");
        assert!(c.contains("L0 SSTables"), "{c}");
    }
}
