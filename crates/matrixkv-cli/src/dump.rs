//! `matrixkv dump sst|wal|blob|manifest` and `matrixkv layout`: what one persistent file holds,
//! read through the engine's own readers (`matrixkv::inspect`), as text or JSON. Damaged input
//! is an error naming the file and offset (exit status 1), never a panic; nothing is written.

use std::path::PathBuf;

use anyhow::{Context, Result};
use matrixkv::inspect;
use serde_json::{Value, json};

/// How keys and values are shown.
#[derive(clap::Args, Debug, Clone, Copy)]
pub struct Show {
    /// Print every entry, not only the summary.
    #[arg(long)]
    entries: bool,
    /// Keys and values as hex instead of escaped text.
    #[arg(long)]
    hex: bool,
    /// One JSON object on stdout (keys and values as escaped strings, or hex with --hex).
    #[arg(long)]
    json: bool,
}

impl Show {
    fn bytes(&self, b: &[u8]) -> String {
        if self.hex {
            b.iter().map(|x| format!("{x:02x}")).collect()
        } else {
            b.escape_ascii().to_string()
        }
    }
}

/// The files `dump` reads.
#[derive(clap::Subcommand, Debug)]
pub enum DumpCommand {
    /// An SSTable: its properties and, with --entries, every version.
    Sst {
        /// The `NNNNNN.sst` file.
        file: PathBuf,
        #[command(flatten)]
        show: Show,
    },
    /// A WAL segment: its records (write batches with sequence numbers and keyspace ids).
    Wal {
        /// The `NNNNNN.wal` file (on the fast tier).
        file: PathBuf,
        #[command(flatten)]
        show: Show,
    },
    /// A blob file: its records (the values separated from their keys).
    Blob {
        /// The `NNNNNN.blob` file.
        file: PathBuf,
        #[command(flatten)]
        show: Show,
    },
    /// A RowTable of the matrix container: its header, bloom filter and, with --entries,
    /// every entry with its cross-row hint (`matrixkv layout` lists the rows).
    Rowtable {
        /// The database directory (tiers `<db>/fast` and `<db>/slow`, or a `matrixkv bench`
        /// database's `<bench --db>/<engine>`, unless given).
        #[arg(long)]
        db: PathBuf,
        /// The fast tier's directory, if not `<db>/fast` (or the one a bench database names).
        #[arg(long)]
        fast_dir: Option<PathBuf>,
        /// The slow tier's directory, if not `<db>/slow`.
        #[arg(long)]
        slow_dir: Option<PathBuf>,
        /// The row number.
        #[arg(long)]
        row: u64,
        #[command(flatten)]
        show: Show,
    },
    /// The live manifest of a database: its version edits and the resulting layout.
    Manifest {
        /// The database directory (its slow tier is `<db>/slow`, or `<db>` itself for a
        /// `matrixkv bench` database, unless --slow-dir says).
        #[arg(long)]
        db: PathBuf,
        /// The slow tier's directory, if not `<db>/slow`.
        #[arg(long)]
        slow_dir: Option<PathBuf>,
        #[command(flatten)]
        show: Show,
    },
}

/// The slow tier of `--db` (a bench database's `--db` is its slow tier; see `locate`).
fn slow_dir(db: &std::path::Path, slow: Option<&PathBuf>) -> PathBuf {
    crate::locate::slow_dir(db, slow.map(PathBuf::as_path))
}

fn print_json(v: &Value) -> Result<()> {
    emit(&format!("{}\n", serde_json::to_string_pretty(v)?))
}

/// Writes `text` to stdout; a reader that went away (`| head`) is not an error.
fn emit(text: &str) -> Result<()> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Runs one `dump` command.
pub fn run(cmd: DumpCommand) -> Result<()> {
    use std::fmt::Write as _;
    let mut out = String::new();
    match cmd {
        DumpCommand::Sst { file, show } => {
            let (s, entries) = inspect::sst(&file, show.entries || show.json)
                .with_context(|| format!("reading {}", file.display()))?;
            let items: Vec<Value> = entries
                .iter()
                .map(|e| {
                    json!({"key": show.bytes(&e.key), "seq": e.seq, "kind": e.kind,
                           "value": show.bytes(&e.value)})
                })
                .collect();
            if show.json {
                return print_json(&json!({
                    "file": file, "size": s.size, "entries": s.entries, "deletions": s.deletions,
                    "raw_key_bytes": s.raw_key_bytes, "raw_value_bytes": s.raw_value_bytes,
                    "smallest_seq": s.smallest_seq, "largest_seq": s.largest_seq,
                    "data_blocks": s.data_blocks, "compression": s.compression,
                    "bloom_bits_per_key": s.bloom_bits_per_key,
                    "versions": if show.entries { Value::Array(items) } else { Value::Null },
                }));
            }
            let _ = writeln!(
                out,
                "{}: {} bytes, {} entries ({} deletions), keys {} B, values {} B, sequence {}..={}, \
                 {} data blocks, compression {}, bloom {} bits/key",
                file.display(),
                s.size,
                s.entries,
                s.deletions,
                s.raw_key_bytes,
                s.raw_value_bytes,
                s.smallest_seq,
                s.largest_seq,
                s.data_blocks,
                s.compression,
                s.bloom_bits_per_key
            );
            if show.entries {
                for e in &entries {
                    let _ = writeln!(
                        out,
                        "{} @{} {} => {}",
                        show.bytes(&e.key),
                        e.seq,
                        e.kind,
                        show.bytes(&e.value)
                    );
                }
            }
        }
        DumpCommand::Wal { file, show } => {
            let (s, records) =
                inspect::wal(&file).with_context(|| format!("reading {}", file.display()))?;
            if show.json {
                let recs: Vec<Value> = records
                    .iter()
                    .map(|r| {
                        let ops: Vec<Value> = r
                            .ops
                            .iter()
                            .map(|o| {
                                json!({"keyspace": o.keyspace, "kind": o.kind,
                                       "key": show.bytes(&o.key), "value": show.bytes(&o.value)})
                            })
                            .collect();
                        json!({"offset": r.offset, "sequence": r.sequence, "ops": ops})
                    })
                    .collect();
                return print_json(&json!({
                    "file": file, "segment": s.number, "size": s.size, "records": s.records,
                    "end_offset": s.end_offset,
                    "torn_tail": s.torn_tail.as_ref().map(|(at, why)| json!({"offset": at, "reason": why})),
                    "batches": if show.entries { Value::Array(recs) } else { Value::Null },
                }));
            }
            let _ = writeln!(
                out,
                "{}: segment {}, {} bytes, {} records, log ends at offset {}{}",
                file.display(),
                s.number,
                s.size,
                s.records,
                s.end_offset,
                s.torn_tail
                    .as_ref()
                    .map(|(at, why)| format!(", torn record at {at} left out ({why})"))
                    .unwrap_or_default()
            );
            if show.entries {
                for r in &records {
                    let _ = writeln!(out, "@{} seq {}: {} ops", r.offset, r.sequence, r.ops.len());
                    for o in &r.ops {
                        let _ = writeln!(
                            out,
                            "  [{}] {} {} => {}",
                            o.keyspace,
                            o.kind,
                            show.bytes(&o.key),
                            show.bytes(&o.value)
                        );
                    }
                }
            }
        }
        DumpCommand::Blob { file, show } => {
            let records =
                inspect::blob(&file).with_context(|| format!("reading {}", file.display()))?;
            let bytes: usize = records.iter().map(|r| r.value.len()).sum();
            if show.json {
                let recs: Vec<Value> = records
                    .iter()
                    .map(|r| {
                        json!({"offset": r.offset, "key": show.bytes(&r.key),
                               "value": show.bytes(&r.value)})
                    })
                    .collect();
                return print_json(&json!({
                    "file": file, "records": records.len(), "value_bytes": bytes,
                    "values": if show.entries { Value::Array(recs) } else { Value::Null },
                }));
            }
            let _ = writeln!(
                out,
                "{}: {} records, {} bytes of values",
                file.display(),
                records.len(),
                bytes
            );
            if show.entries {
                for r in &records {
                    let _ = writeln!(
                        out,
                        "@{} {} => {}",
                        r.offset,
                        show.bytes(&r.key),
                        show.bytes(&r.value)
                    );
                }
            }
        }
        DumpCommand::Rowtable {
            db,
            fast_dir,
            slow_dir: s,
            row,
            show,
        } => {
            let at = crate::locate::existing(&db, fast_dir.as_deref(), s.as_deref())?;
            let (r, entries) = inspect::rowtable(&at.fast_dir, &at.slow_dir, row, show.entries)
                .with_context(|| format!("reading row {row} of {}", db.display()))?;
            if show.json {
                let items: Vec<Value> = entries
                    .iter()
                    .map(|e| {
                        json!({"key": show.bytes(&e.key), "seq": e.seq, "kind": e.kind,
                               "value": if e.freed { Value::Null } else { Value::String(show.bytes(&e.value)) },
                               "value_freed": e.freed, "hint": e.hint})
                    })
                    .collect();
                return print_json(&json!({
                    "row": r.row, "role": r.role, "prev_row": r.prev_row,
                    "prev_entries": r.prev_entries, "entries": r.entries,
                    "key_bytes": r.key_bytes, "value_bytes": r.value_bytes,
                    "smallest_seq": r.smallest_seq, "largest_seq": r.largest_seq,
                    "bytes": r.bytes, "pages": r.pages, "meta_pages": r.meta_pages,
                    "bloom_filter": r.has_filter,
                    "versions": if show.entries { Value::Array(items) } else { Value::Null },
                }));
            }
            let _ = writeln!(
                out,
                "row {} ({}): {} entries, keys {} B, values {} B, sequence {}..={}, {} bytes in \
                 {} pages ({} of metadata), bloom filter {}; hints point into row {} ({} entries)",
                r.row,
                r.role,
                r.entries,
                r.key_bytes,
                r.value_bytes,
                r.smallest_seq,
                r.largest_seq,
                r.bytes,
                r.pages,
                r.meta_pages,
                if r.has_filter { "yes" } else { "no" },
                r.prev_row,
                r.prev_entries
            );
            for e in &entries {
                let _ = writeln!(
                    out,
                    "{} @{} {} => {} (hint {})",
                    show.bytes(&e.key),
                    e.seq,
                    e.kind,
                    if e.freed {
                        "(freed: moved to L1 by column compaction)".to_owned()
                    } else {
                        show.bytes(&e.value)
                    },
                    e.hint
                );
            }
        }
        DumpCommand::Manifest {
            db,
            slow_dir: s,
            show,
        } => {
            let dir = slow_dir(&db, s.as_ref());
            let m =
                inspect::manifest(&dir).with_context(|| format!("reading {}", dir.display()))?;
            if show.json {
                let edits: Vec<Value> = m
                    .edits
                    .iter()
                    .map(|e| json!({"offset": e.offset, "edit": e.text}))
                    .collect();
                return print_json(&json!({
                    "file": m.path, "edits": edits, "dropped_tail": m.dropped_tail,
                    "fixed_options": m.fixed_options.iter().map(|(k, v)| json!([k, v])).collect::<Vec<_>>(),
                    "last_sequence": m.last_sequence, "log_number": m.log_number,
                    "layout": layout_json(&m.layout, show),
                }));
            }
            let _ = writeln!(
                out,
                "{}: {} edits{}; last sequence {}, log number {}",
                m.path.display(),
                m.edits.len(),
                m.dropped_tail
                    .map(|at| format!(" (a torn last record at {at} left out)"))
                    .unwrap_or_default(),
                m.last_sequence,
                m.log_number
            );
            for (k, v) in &m.fixed_options {
                let _ = writeln!(out, "fixed option {k} = {v}");
            }
            if show.entries {
                for e in &m.edits {
                    let _ = writeln!(out, "@{} {}", e.offset, e.text);
                }
            }
            out.push_str(&layout_text(&m.layout, show));
        }
    }
    emit(&out)
}

fn layout_json(l: &inspect::Layout, show: Show) -> Value {
    let levels: Vec<Value> = l
        .levels
        .iter()
        .enumerate()
        .map(|(i, files)| {
            let fs: Vec<Value> = files
                .iter()
                .map(|f| {
                    json!({"number": f.number, "size": f.size, "entries": f.entries,
                           "smallest": show.bytes(&f.smallest), "largest": show.bytes(&f.largest)})
                })
                .collect();
            json!({"level": i, "bytes": files.iter().map(|f| f.size).sum::<u64>(), "files": fs})
        })
        .collect();
    let rows: Vec<Value> = l
        .rows
        .iter()
        .map(|r| {
            json!({"row": r.row, "role": r.role, "pages": r.pages, "entries": r.entries,
                   "bytes": r.bytes, "smallest": show.bytes(&r.smallest),
                   "largest": show.bytes(&r.largest)})
        })
        .collect();
    json!({"levels": levels, "container_rows": rows})
}

/// The layout as text: one bar per level and per container row, its width the share of the
/// largest level's (or row's) bytes.
fn layout_text(l: &inspect::Layout, show: Show) -> String {
    const WIDTH: u64 = 40;
    let mut out = String::new();
    let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
    let bar = |b: u64, max: u64| "#".repeat(((b * WIDTH).div_ceil(max.max(1))) as usize);
    let level_bytes: Vec<u64> = l
        .levels
        .iter()
        .map(|f| f.iter().map(|x| x.size).sum())
        .collect();
    let max = level_bytes.iter().copied().max().unwrap_or(0);
    out.push_str("levels:\n");
    for (i, files) in l.levels.iter().enumerate() {
        if files.is_empty() && i > 0 {
            continue;
        }
        out.push_str(&format!(
            "  L{i} {:>4} files {:>10.1} MiB |{:<40}|\n",
            files.len(),
            mib(level_bytes[i]),
            bar(level_bytes[i], max)
        ));
        if show.entries {
            for f in files {
                out.push_str(&format!(
                    "      {:06}.sst {:>8.1} MiB {} .. {}\n",
                    f.number,
                    mib(f.size),
                    show.bytes(&f.smallest),
                    show.bytes(&f.largest)
                ));
            }
        }
    }
    let row_max = l.rows.iter().map(|r| r.bytes).max().unwrap_or(0);
    out.push_str(&format!("matrix container: {} rows\n", l.rows.len()));
    for r in &l.rows {
        out.push_str(&format!(
            "  row {:>5} {:<9} {:>6} pages {:>8.1} MiB |{:<40}| {} .. {}\n",
            r.row,
            r.role,
            r.pages,
            mib(r.bytes),
            bar(r.bytes, row_max),
            show.bytes(&r.smallest),
            show.bytes(&r.largest)
        ));
    }
    out
}

/// `matrixkv layout`: the levels and the container rows of a database, from its manifest.
pub fn layout(db: &std::path::Path, slow: Option<&PathBuf>, show: Show) -> Result<()> {
    let dir = slow_dir(db, slow);
    let m = inspect::manifest(&dir).with_context(|| format!("reading {}", dir.display()))?;
    if show.json {
        return print_json(&layout_json(&m.layout, show));
    }
    emit(&layout_text(&m.layout, show))
}
