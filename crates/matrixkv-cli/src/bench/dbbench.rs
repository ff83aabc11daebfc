//! The cross-check: runs Debian's `db_bench` (package rocksdb-tools, RocksDB 7.8.3) on the same
//! workload as the in-process engines, one process per benchmark on one database, and parses
//! its output — summary line, histogram, interval reports, statistics tickers, compaction
//! stats — into [`BenchResult`]s for the same report, with the process's I/O counters and CPU
//! time.
//!
//! Debian builds db_bench with assertions enabled (it prints "WARNING: Assertions are enabled;
//! benchmarks unnecessarily slow"); every result says so in its notes.
//!
//! Called by `mod.rs` for the `db_bench` engine and by `bench parse-db-bench`. Single-threaded.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::args::BenchArgs;
use super::engine::{Placement, remove_dir};
use super::metrics::{BenchResult, CpuTime, Latency, ProcIo, series_stats};

/// The db_bench benchmarks the cross-check can run (YCSB and open loop are ours only).
const SUPPORTED: &[&str] = &[
    "fillrandom",
    "fillseq",
    "overwrite",
    "deleterandom",
    "readrandom",
    "readseq",
    "seekrandom",
    "flush",
    "waitforcompaction",
];

const CPU_NOTE: &str = "CPU µs/op is the db_bench process's user + system time over its whole \
                        run (opening the database, the benchmark, `stats`, closing) ÷ the \
                        benchmark's operations";

const ASSERTIONS_NOTE: &str = "Debian's db_bench (rocksdb-tools) is built with assertions \
                               enabled, which slows it: quote it as a cross-check only";

/// The db_bench flags equivalent to `a` for benchmark `name`, the `index`-th on the database.
pub fn db_bench_flags(a: &BenchArgs, name: &str, index: usize, place: &Placement) -> Vec<String> {
    let mut f = vec![
        format!("--benchmarks={name},stats"),
        format!("--db={}", place.slow_dir.display()),
        format!(
            "--use_existing_db={}",
            u8::from(index > 0 || a.use_existing_db)
        ),
        format!("--num={}", a.num),
        format!("--reads={}", a.reads()),
        format!("--key_size={}", a.key_size),
        format!("--value_size={}", a.value_size),
        format!("--threads={}", a.threads.max(1)),
        format!("--seed={}", a.seed.max(1) + index as u64),
        format!("--write_buffer_size={}", a.write_buffer_size),
        format!("--max_write_buffer_number={}", a.max_write_buffer_number),
        format!("--target_file_size_base={}", a.target_file_size_base),
        format!(
            "--max_bytes_for_level_base={}",
            a.max_bytes_for_level_base.unwrap_or(256 << 20)
        ),
        format!(
            "--max_bytes_for_level_multiplier={}",
            a.max_bytes_for_level_multiplier
        ),
        format!(
            "--level0_file_num_compaction_trigger={}",
            a.level0_file_num_compaction_trigger
        ),
        format!(
            "--level0_slowdown_writes_trigger={}",
            a.level0_slowdown_writes_trigger
        ),
        format!(
            "--level0_stop_writes_trigger={}",
            a.level0_stop_writes_trigger
        ),
        format!("--compression_type={}", a.compression_type),
        format!("--bloom_bits={}", a.bloom_bits),
        format!("--cache_size={}", a.cache_size),
        format!("--sync={}", u8::from(a.sync)),
        format!("--max_background_jobs={}", a.max_background_jobs),
        format!("--seek_nexts={}", a.seek_nexts),
        format!("--batch_size={}", a.batch_size.max(1)),
        format!("--duration={}", a.duration),
        "--histogram=1".to_owned(),
        "--statistics=1".to_owned(),
        "--stats_interval_seconds=1".to_owned(),
        "--stats_interval=100".to_owned(),
    ];
    if let Some(n) = a.num_levels {
        f.push(format!("--num_levels={n}"));
    }
    f.extend(a.db_bench_extra.split_whitespace().map(str::to_owned));
    f
}

/// Runs every supported benchmark of `benchmarks` through db_bench on a database at `place`
/// (everything on the slow tier, as "RocksDB-SSD"); returns the results and a description.
pub fn run(
    a: &BenchArgs,
    benchmarks: &[String],
    place: &Placement,
    log_dir: Option<&Path>,
) -> Result<(Vec<BenchResult>, String)> {
    if !a.use_existing_db {
        remove_dir(&place.slow_dir)?;
    }
    std::fs::create_dir_all(&place.slow_dir)
        .with_context(|| format!("creating {}", place.slow_dir.display()))?;
    let mut results = Vec::new();
    let mut desc = format!(
        "db_bench ({}): everything under {} (RocksDB-SSD placement)",
        a.db_bench_path.display(),
        place.slow_dir.display()
    );
    let outcome = (|| -> Result<()> {
        let mut index = 0;
        for name in benchmarks {
            if !SUPPORTED.contains(&name.as_str()) {
                eprintln!("db_bench: skipping `{name}` (not a db_bench workload here)");
                continue;
            }
            let flags = db_bench_flags(a, name, index, place);
            index += 1;
            desc.push_str(&format!(
                "\n  {} {}",
                a.db_bench_path.display(),
                flags.join(" ")
            ));
            let ChildRun { text, io, cpu } = run_process(&a.db_bench_path, &flags)?;
            if let Some(dir) = log_dir {
                std::fs::create_dir_all(dir)?;
                std::fs::write(dir.join(format!("db_bench-{index}-{name}.log")), &text)?;
            }
            if !text.contains(" micros/op ")
                && !matches!(name.as_str(), "flush" | "waitforcompaction")
            {
                bail!(
                    "db_bench printed no result for {name}; its output ends with:\n{}",
                    tail(&text, 20)
                );
            }
            for mut r in parse_output(&text, io, cpu) {
                if r.benchmark != *name {
                    continue;
                }
                if a.rate > 0.0 {
                    r.notes
                        .push("db_bench has no open-loop mode: this run is closed-loop".into());
                }
                if a.unique && name == "fillrandom" {
                    r.notes
                        .push("db_bench has no --unique: keys drawn with replacement".into());
                }
                super::print_result(&r);
                results.push(r);
            }
        }
        Ok(())
    })();
    if !a.use_existing_db {
        remove_dir(&place.slow_dir)?;
    }
    outcome?;
    Ok((results, desc))
}

fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What a finished db_bench process left.
struct ChildRun {
    /// Its stdout and stderr, interleaved.
    text: String,
    /// Its `/proc/<pid>/io`, read at exit (while the process is a zombie, so every write is
    /// counted).
    io: Option<ProcIo>,
    /// Its CPU time, all threads: the growth of this process's `RUSAGE_CHILDREN` across its run
    /// and wait (the harness runs no other child meanwhile).
    cpu: Option<CpuTime>,
}

/// Runs db_bench (or any program) with `flags` and waits for it.
fn run_process(bin: &Path, flags: &[String]) -> Result<ChildRun> {
    let out_file = tempfile_path("out");
    let children_before = CpuTime::of_waited_children();
    let file = std::fs::File::create(&out_file)?;
    let mut child = Command::new(bin)
        .args(flags)
        .stdin(Stdio::null())
        .stdout(file.try_clone()?)
        .stderr(file)
        .spawn()
        .with_context(|| format!("starting {} (apt-get install rocksdb-tools)", bin.display()))?;
    let pid = child.id();
    let mut io = None;
    loop {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let state = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .unwrap_or("");
        if let Some(x) = ProcIo::read(Some(pid)) {
            io = Some(x);
        }
        if state == "Z" || state.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let status = child.wait()?;
    let cpu = match (CpuTime::of_waited_children(), children_before) {
        (Some(after), Some(before)) => Some(after.delta(&before)),
        _ => None,
    };
    let text = std::fs::read_to_string(&out_file).unwrap_or_default();
    let _ = std::fs::remove_file(&out_file);
    if !status.success() {
        bail!("db_bench failed ({status}):\n{}", tail(&text, 30));
    }
    Ok(ChildRun { text, io, cpu })
}

fn tempfile_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("matrixkv-dbbench-{}-{tag}.txt", std::process::id()))
}

fn num_after(line: &str, label: &str) -> Option<f64> {
    let rest = &line[line.find(label)? + label.len()..];
    rest.split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

/// Parses the output of a db_bench process into one result per summary line. Each result's
/// latency is the histogram db_bench prints right after its summary line ("Microseconds per
/// write:" etc., see [`OpHistogram`]); the other histograms of the log (per-level read latency
/// of `stats`, statistics histograms) are not the benchmark's. Counters (statistics tickers,
/// compaction stats, the process's `io` and `cpu`) are attributed to the last benchmark, so the
/// cross-check runs one measured benchmark per process.
pub fn parse_output(text: &str, io: Option<ProcIo>, cpu: Option<CpuTime>) -> Vec<BenchResult> {
    let mut results: Vec<BenchResult> = Vec::new();
    let assertions = text.contains("Assertions are enabled");
    let version = text
        .lines()
        .find_map(|l| l.strip_prefix("RocksDB:"))
        .map(|v| v.trim().trim_start_matches("version").trim().to_owned());
    let (mut key_size, mut value_size) = (0u64, 0u64);
    let mut intervals: Vec<(u64, f64, f64, u64)> = Vec::new(); // (thread, start, end, ops)
    let mut hist: Option<OpHistogram> = None;
    let mut tickers = std::collections::HashMap::new();
    let mut levels: Vec<(u64, u64)> = Vec::new();
    let mut level_header: Vec<String> = Vec::new();
    let mut compactions = 0u64;
    for line in text.lines() {
        let t = line.trim();
        if let Some(h) = hist.as_mut() {
            if h.take_line(t) {
                continue;
            }
            // The block ended; the line that ended it is parsed below.
            if let (Some(h), Some(r)) = (hist.take(), results.last_mut()) {
                h.attach_to(r);
            }
        }
        if let Some(op) = t
            .strip_prefix("Microseconds per ")
            .and_then(|rest| rest.strip_suffix(':'))
        {
            // Printed only by db_bench's report of a benchmark, after its summary line.
            if !results.is_empty() {
                hist = Some(OpHistogram::new(op));
            }
        } else if let Some(v) = t.strip_prefix("Keys:") {
            key_size = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
        } else if let Some(v) = t.strip_prefix("Values:") {
            value_size = v
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok())
                .unwrap_or(0);
        } else if let Some(r) = parse_summary_line(t) {
            let mut r = r;
            r.engine = "db_bench".to_owned();
            let series = spread_intervals(&intervals);
            r.series = series_stats(&series, r.ops, r.seconds);
            r.per_second = series;
            if matches!(
                r.benchmark.as_str(),
                "fillrandom" | "fillseq" | "overwrite" | "deleterandom"
            ) {
                r.user_bytes = r.ops
                    * (key_size
                        + if r.benchmark == "deleterandom" {
                            0
                        } else {
                            value_size
                        });
            }
            results.push(r);
            intervals.clear();
        } else if let Some(p) = t.find("thread ").filter(|_| t.contains("ops/second in (")) {
            if let Some(iv) = parse_interval(&t[p..]) {
                intervals.push(iv);
            }
        } else if t.starts_with("rocksdb.") && t.contains(" COUNT : ") {
            let mut it = t.split(" COUNT : ");
            // Tickers: "name COUNT : n"; histograms: "name P50 : .. COUNT : n SUM : s".
            let k = it.next().and_then(|k| k.split_whitespace().next());
            let v = it.next().and_then(|v| v.split_whitespace().next());
            if let (Some(k), Some(Ok(v))) = (k, v.map(str::parse::<u64>)) {
                tickers.insert(k.to_owned(), v);
            }
        } else if t.starts_with("Level") && t.contains("Files") && t.contains("Comp(cnt)") {
            level_header = t.split_whitespace().map(str::to_owned).collect();
            levels.clear();
        } else if !level_header.is_empty() && (t.starts_with('L') || t.starts_with("Sum")) {
            let tok: Vec<&str> = t.split_whitespace().collect();
            // Row tokens: Level, Files, size, unit, then the header's columns from Score on.
            let col = |name: &str| -> Option<&str> {
                let i = level_header.iter().position(|h| h == name)?;
                tok.get(if i > 2 { i + 1 } else { i }).copied()
            };
            let Some(first) = tok.first() else { continue };
            if *first == "Sum" {
                compactions = col("Comp(cnt)").and_then(|x| x.parse().ok()).unwrap_or(0);
                level_header.clear();
            } else if let Ok(lv) = first.trim_start_matches('L').parse::<usize>() {
                let files: u64 = tok
                    .get(1)
                    .and_then(|x| x.split('/').next())
                    .and_then(|x| x.parse().ok())
                    .unwrap_or(0);
                let size: f64 = tok.get(2).and_then(|x| x.parse().ok()).unwrap_or(0.0);
                let unit = match tok.get(3).copied().unwrap_or("B") {
                    "KB" => 1024.0,
                    "MB" => 1_048_576.0,
                    "GB" => 1_073_741_824.0,
                    "TB" => 1_099_511_627_776.0,
                    _ => 1.0,
                };
                if levels.len() <= lv {
                    levels.resize(lv + 1, (0, 0));
                }
                if let Some(l) = levels.get_mut(lv) {
                    *l = (files, (size * unit) as u64);
                }
            }
        }
    }
    if let (Some(h), Some(r)) = (hist.take(), results.last_mut()) {
        h.attach_to(r);
    }
    let tick = |k: &str| tickers.get(k).copied().unwrap_or(0);
    if let Some(r) = results.last_mut() {
        r.stall_seconds = tick("rocksdb.stall.micros") as f64 / 1e6;
        r.slow_tier_bytes = tick("rocksdb.flush.write.bytes") + tick("rocksdb.compact.write.bytes");
        r.wal_bytes = tick("rocksdb.wal.bytes");
        r.compaction_input_bytes = tick("rocksdb.compact.read.bytes");
        r.compaction_output_bytes = tick("rocksdb.compact.write.bytes");
        r.compactions = compactions;
        r.flushes = tick("rocksdb.db.flush.micros");
        r.levels = levels;
        r.proc_io = io;
        r.cpu = cpu;
        if cpu.is_some() {
            r.notes.push(CPU_NOTE.to_owned());
        }
    }
    for r in &mut results {
        r.notes.push(format!(
            "RocksDB {} db_bench run as a separate process; per-second series rebuilt from its \
             --stats_interval_seconds reports (spread over the seconds each report spans)",
            version.as_deref().unwrap_or("(unknown version)")
        ));
        if assertions {
            r.notes.push(ASSERTIONS_NOTE.to_owned());
        }
    }
    results
}

/// The operation type whose histogram db_bench prints as "Microseconds per <op>:" for a
/// benchmark (its `OperationType` names); None for benchmarks that mix types.
fn own_operation(benchmark: &str) -> Option<&'static str> {
    match benchmark {
        "fillrandom" | "fillseq" | "fillsync" | "fill100K" | "overwrite" | "filluniquerandom" => {
            Some("write")
        }
        "readrandom" | "readseq" | "readreverse" | "readmissing" | "multireadrandom" => {
            Some("read")
        }
        "seekrandom" => Some("seek"),
        "deleterandom" | "deleteseq" => Some("delete"),
        _ => None,
    }
}

/// One "Microseconds per <op>:" block of db_bench's report, as its `HistogramStat::ToString`
/// prints it:
///
/// ```text
/// Count: 2000000 Average: 21.2601  StdDev: 310.85
/// Min: 2  Median: 8.4903  Max: 61234
/// Percentiles: P50: 8.49 P75: 11.62 P99: 52.13 P99.9: 2726.66 P99.99: 9821.45
/// ------------------------------------------------------
/// (       6,      10 ]   803200  40.160%  65.160% ########
/// ```
///
/// ending at the first line of another shape (a blank line). db_bench prints no P90, so `p90`
/// stays None (P75 is not a stand-in for it).
#[derive(Debug)]
struct OpHistogram {
    op: String,
    latency: Latency,
    cdf: Vec<(f64, f64)>,
}

impl OpHistogram {
    fn new(op: &str) -> OpHistogram {
        OpHistogram {
            op: op.trim().to_owned(),
            latency: Latency::default(),
            cdf: Vec::new(),
        }
    }

    /// Takes one trimmed line if it belongs to the block; false ends the block.
    fn take_line(&mut self, t: &str) -> bool {
        let l = &mut self.latency;
        if t.starts_with("Count:") {
            l.count = num_after(t, "Count:").unwrap_or(0.0) as u64;
            l.mean = num_after(t, "Average:").unwrap_or(0.0);
        } else if t.starts_with("Min:") {
            l.max = num_after(t, "Max:").unwrap_or(0.0);
        } else if t.starts_with("Percentiles:") {
            l.p50 = num_after(t, "P50:").unwrap_or(0.0);
            l.p99 = num_after(t, "P99:").unwrap_or(0.0);
            l.p999 = num_after(t, "P99.9:").unwrap_or(0.0);
            l.p9999 = num_after(t, "P99.99:").unwrap_or(0.0);
        } else if t.starts_with("---") {
            // The rule between the percentiles and the bucket table.
        } else if let Some(point) = parse_bucket(t) {
            self.cdf.push(point);
        } else {
            return false;
        }
        true
    }

    /// Records the block in `r`'s per-operation latency; it is `r`'s latency and CDF when its
    /// operation is the benchmark's own, or when it is the first block and no later one is.
    fn attach_to(self, r: &mut BenchResult) {
        let own = own_operation(&r.benchmark);
        let have_own = r
            .latency_by_op
            .iter()
            .any(|(op, _)| Some(op.as_str()) == own);
        if r.latency_by_op.is_empty() || (!have_own && Some(self.op.as_str()) == own) {
            r.latency = self.latency.clone();
            r.cdf = self.cdf;
        }
        if own.is_none() && r.latency_by_op.len() == 1 {
            r.notes.push(format!(
                "db_bench printed one histogram per operation type: the overall latency is \
                 that of `{}`, the first one",
                r.latency_by_op
                    .first()
                    .map_or(self.op.as_str(), |(op, _)| op.as_str())
            ));
        }
        r.latency_by_op.push((self.op, self.latency));
    }
}

/// Parses a histogram bucket row, `(      10,      15 ]   607400  30.370%  95.530% ######`
/// (the first bucket opens with `[`), into (cumulative fraction, bucket's upper bound).
fn parse_bucket(t: &str) -> Option<(f64, f64)> {
    let inner = t.strip_prefix(['(', '['])?;
    let (bounds, rest) = inner.split_once(']')?;
    let hi: f64 = bounds.split(',').nth(1)?.trim().parse().ok()?;
    let cum: f64 = rest
        .split_whitespace()
        .nth(2)?
        .strip_suffix('%')?
        .parse()
        .ok()?;
    Some((cum / 100.0, hi))
}

/// Parses `name : X micros/op Y ops/sec Z seconds N operations; M MB/s (F of N found)`.
fn parse_summary_line(t: &str) -> Option<BenchResult> {
    if !t.contains(" micros/op ") || !t.contains(" ops/sec") {
        return None;
    }
    let (name, rest) = t.split_once(':')?;
    let tok: Vec<&str> = rest.split_whitespace().collect();
    let at = |label: &str| -> Option<f64> {
        let i = tok.iter().position(|w| w.trim_end_matches(';') == label)?;
        tok.get(i.checked_sub(1)?)?.parse().ok()
    };
    let micros = at("micros/op")?;
    let seconds = at("seconds")?;
    let ops = at("operations")? as u64;
    let mb = at("MB/s").unwrap_or(0.0);
    let found = rest.find('(').and_then(|p| {
        let inner = &rest[p + 1..];
        inner.split_whitespace().next()?.parse::<u64>().ok()
    });
    let threads_time = micros * ops as f64 / 1e6;
    Some(BenchResult {
        benchmark: name.trim().to_owned(),
        ops,
        seconds,
        thread_seconds: threads_time,
        bytes: (mb * 1_048_576.0 * seconds) as u64,
        found: found.filter(|_| rest.contains("found")),
        threads: 1,
        latency: Latency::default(),
        ..BenchResult::default()
    })
}

/// Parses `thread 0: (100,5000) ops and (x,y) ops/second in (0.01,0.2) seconds` into
/// (thread, interval start, interval end, interval ops).
fn parse_interval(s: &str) -> Option<(u64, f64, f64, u64)> {
    let rest = s.strip_prefix("thread ")?;
    let (tid, rest) = rest.split_once(':')?;
    let thread = tid.trim().parse().ok()?;
    let ops_part = rest.split_once('(')?.1;
    let (ops, _) = ops_part.split_once(',')?;
    let secs_part = rest.rsplit_once("in (")?.1;
    let (dt, total) = secs_part.split_once(',')?;
    let total: f64 = total
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    let dt: f64 = dt.trim().parse().ok()?;
    Some((
        thread,
        (total - dt).max(0.0),
        total,
        ops.trim().parse().ok()?,
    ))
}

/// Per-second operation counts from interval reports, each interval's operations spread
/// evenly over the time it spans.
pub fn spread_intervals(intervals: &[(u64, f64, f64, u64)]) -> Vec<u64> {
    let end = intervals.iter().map(|i| i.2).fold(0.0, f64::max);
    let mut bins = vec![0f64; end.ceil() as usize];
    for &(_, s, e, ops) in intervals {
        let len = e - s;
        if len <= 0.0 {
            if let Some(b) = bins.get_mut(s as usize) {
                *b += ops as f64;
            }
            continue;
        }
        let mut t = s;
        while t < e {
            let sec = t.floor();
            let next = (sec + 1.0).min(e);
            if let Some(b) = bins.get_mut(sec as usize) {
                *b += ops as f64 * (next - t) / len;
            }
            t = next;
        }
    }
    bins.into_iter().map(|b| b.round() as u64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "RocksDB:    version 7.8.3
Keys:       16 bytes each (+ 0 bytes user-defined timestamp)
Values:     1024 bytes each (512 bytes after compression)
WARNING: Assertions are enabled; benchmarks unnecessarily slow
2026/11/22-03:51:45  ... thread 0: (30000,30000) ops and (30000.0,30000.0) ops/second in (1.000000,1.000000) seconds
2026/11/22-03:51:48  ... thread 0: (3000,33000) ops and (1000.0,11000.0) ops/second in (3.000000,4.000000) seconds
DB path: [/tmp/dbb]
fillrandom   :      15.010 micros/op 66617 ops/sec 4.500 seconds 40000 operations;   66.1 MB/s
Microseconds per write:
Count: 40000 Average: 15.0044  StdDev: 64.41
Min: 5  Median: 12.7192  Max: 5626
Percentiles: P50: 12.72 P75: 15.74 P99: 32.66 P99.9: 107.77 P99.99: 3900.00
------------------------------------------------------
(       6,      10 ]     4636  23.180%  23.235% #####
(      10,      15 ]     9843  49.215%  72.450% ##########
(    4400,    6600 ]        1   0.005% 100.000%

** File Read Latency Histogram By Level [default] **
(       1,       2 ]     2623  13.115%  14.370% ###

Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)
----------------------------------------------------------------------------------------------------------------------------------------------------------------------------------
  L0      3/0   178.45 MB   0.8      0.0     0.0      0.0       0.2      0.2       0.0   1.0      0.0     92.6      1.93              1.73         3    0.643       0      0       0.0       0.0
  L1      2/0    1.50 GB   0.8      0.0     0.0      0.0       0.2      0.2       0.0   1.0      0.0     92.6      1.93              1.73         7    0.643       0      0       0.0       0.0
 Sum      5/0    1.67 GB   0.0      0.0     0.0      0.0       0.0      0.0       0.0   0.0      0.0      0.0      0.00              0.00        10    0.000       0      0       0.0       0.0
rocksdb.stall.micros COUNT : 2500000
rocksdb.wal.bytes COUNT : 21120000
rocksdb.compact.write.bytes COUNT : 1000
rocksdb.flush.write.bytes COUNT : 2000
rocksdb.db.flush.micros P50 : 1.000000 P95 : 2.000000 P99 : 3.000000 P100 : 4.000000 COUNT : 26 SUM : 1234
";

    #[test]
    fn db_bench_output_is_parsed_into_a_result() {
        let io = ProcIo {
            write_bytes: 4096,
            ..ProcIo::default()
        };
        let rs = parse_output(SAMPLE, Some(io), None);
        assert_eq!(rs.len(), 1);
        let r = &rs[0];
        assert_eq!(r.engine, "db_bench");
        assert_eq!(r.benchmark, "fillrandom");
        assert_eq!(r.ops, 40_000);
        assert!((r.seconds - 4.5).abs() < 1e-9);
        assert!((r.mb_per_sec() - 66.1).abs() < 0.1);
        assert_eq!(r.latency.count, 40_000);
        assert!((r.latency.p99 - 32.66).abs() < 1e-9);
        assert!((r.latency.p9999 - 3900.0).abs() < 1e-9);
        assert!((r.latency.max - 5626.0).abs() < 1e-9);
        assert_eq!(r.cdf.last(), Some(&(1.0, 6600.0)));
        assert!((r.stall_seconds - 2.5).abs() < 1e-9);
        assert_eq!(r.slow_tier_bytes, 3000);
        assert_eq!(r.wal_bytes, 21_120_000);
        assert_eq!(r.user_bytes, 40_000 * 1040);
        assert_eq!(r.compactions, 10);
        assert_eq!(r.flushes, 26);
        assert_eq!(r.levels.len(), 2);
        assert_eq!(r.levels[0].0, 3);
        assert_eq!(r.levels[1].1, (1.5 * 1_073_741_824.0) as u64);
        assert_eq!(r.proc_io, Some(io));
        // Interval 2 (1 s to 4 s, 3000 ops) is spread as 1000 per second.
        assert_eq!(r.per_second, vec![30_000, 1000, 1000, 1000]);
        assert_eq!(r.series.windows, 4);
        // Mean 40000 / 4.5 s = 8889 ops/s: the three 1000-op seconds are below 50%, not 10%.
        assert_eq!(r.series.below_50pct, 3);
        assert_eq!(r.series.below_10pct, 0);
        assert!(r.notes.iter().any(|n| n.contains("assertions enabled")));
        assert!(r.notes.iter().any(|n| n.contains("RocksDB 7.8.3")));
    }

    /// A db_bench 7.8.3 log of `--benchmarks=fillrandom,stats --histogram=1 --statistics=1
    /// --stats_interval_seconds=1` in its real layout: the summary line, the benchmark's own
    /// "Microseconds per write:" histogram, then `stats` (compaction stats, per-level read
    /// latency histograms in the same format, DB stats) and the statistics histograms.
    const FILLRANDOM_WITH_STATS: &str = "\
Set seed to 302 because --seed was 302
Initializing RocksDB Options from the specified file
Initializing RocksDB Options from command-line flags
Integrated BlobDB: blob cache disabled
RocksDB:    version 7.8.3
Date:       Sun Nov 22 03:51:44 2026
CPU:        2 * AMD EPYC 7B13
CPUCache:   512 KB
Keys:       16 bytes each (+ 0 bytes user-defined timestamp)
Values:     4096 bytes each (2048 bytes after compression)
Entries:    2000000
Prefix:    0 bytes
Keys per prefix:    0
RawSize:    7843.0 MB (estimated)
FileSize:   3936.6 MB (estimated)
Write rate: 0 bytes/second
Read rate: 0 ops/second
Compression: NoCompression
Compression sampling rate: 0
Memtablerep: SkipListFactory
Perf Level: 1
WARNING: Assertions are enabled; benchmarks unnecessarily slow
------------------------------------------------
Initializing RocksDB Options from the specified file
Initializing RocksDB Options from command-line flags
Integrated BlobDB: blob cache disabled
DB path: [/work/bench-data/db_bench]
2026/11/22-03:51:45 ... thread 0: (47100,47100) ops and (47100.0,47100.0) ops/second in (1.000000,1.000000) seconds
2026/11/22-03:51:46 ... thread 0: (46900,94000) ops and (46900.0,47000.0) ops/second in (1.000000,2.000000) seconds
fillrandom   :      21.265 micros/op 47025 ops/sec 42.531 seconds 2000000 operations;  184.4 MB/s
Microseconds per write:
Count: 2000000 Average: 21.2601  StdDev: 310.85
Min: 2  Median: 8.4903  Max: 61234
Percentiles: P50: 8.49 P75: 11.62 P99: 52.13 P99.9: 2726.66 P99.99: 9821.45
------------------------------------------------------
(       2,       3 ]     1200   0.060%   0.060% 
(       3,       4 ]    38800   1.940%   2.000% 
(       4,       6 ]   460000  23.000%  25.000% #####
(       6,      10 ]   803200  40.160%  65.160% ########
(      10,      15 ]   607400  30.370%  95.530% ######
(      15,      22 ]    40000   2.000%  97.530% 
(      22,      34 ]    20000   1.000%  98.530% 
(      34,      51 ]     9000   0.450%  98.980% 
(      51,      76 ]     8850   0.443%  99.422% 
(      76,     110 ]     3900   0.195%  99.618% 
(     110,     170 ]     1800   0.090%  99.707% 
(     170,     250 ]     1050   0.052%  99.760% 
(     250,     380 ]      700   0.035%  99.795% 
(     380,     580 ]      520   0.026%  99.821% 
(     580,     870 ]      420   0.021%  99.842% 
(     870,    1300 ]      330   0.017%  99.859% 
(    1300,    1900 ]      230   0.011%  99.870% 
(    1900,    2900 ]      726   0.036%  99.906% 
(    2900,    4400 ]      950   0.048%  99.954% 
(    4400,    6600 ]      519   0.026%  99.980% 
(    6600,    9900 ]      210   0.011%  99.990% 
(    9900,   14000 ]      150   0.007%  99.998% 
(   14000,   22000 ]       31   0.002%  99.999% 
(   22000,   33000 ]        9   0.000% 100.000% 
(   33000,   50000 ]        4   0.000% 100.000% 
(   50000,   75000 ]        1   0.000% 100.000% 


** Compaction Stats [default] **
Level    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)
----------------------------------------------------------------------------------------------------------------------------------------------------------------------------------
  L0      3/0   189.42 MB   0.8      0.0     0.0      0.0       7.6      7.6       0.0   1.0      0.0    181.3     42.93             31.02       121    0.355       0      0       0.0       0.0
  L1      4/0   251.77 MB   1.0     10.1     7.4      2.7      10.0      7.3       0.0   1.4    142.7    141.2     72.48             58.61        30    2.416     39M      0       0.0       0.0
  L2     28/0    1.73 GB   0.7      5.9     2.5      3.4       5.9      2.5       0.1   2.3    118.2    117.9     51.10             40.77        53    0.964     11M      0       0.0       0.0
 Sum     35/0    2.16 GB   0.0     16.0     9.9      6.1      23.5     17.4       0.1   3.1     96.6    141.9    166.51            130.40       204    0.816     50M      0       0.0       0.0
 Int      0/0    0.00 KB   0.0      0.0     0.0      0.0       0.0      0.0       0.0   0.0      0.0      0.0      0.00              0.00         0    0.000       0      0       0.0       0.0

** Compaction Stats [default] **
Priority    Files   Size     Score Read(GB)  Rn(GB) Rnp1(GB) Write(GB) Wnew(GB) Moved(GB) W-Amp Rd(MB/s) Wr(MB/s) Comp(sec) CompMergeCPU(sec) Comp(cnt) Avg(sec) KeyIn KeyDrop Rblob(GB) Wblob(GB)
---------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------
 Low      0/0    0.00 KB   0.0     16.0     9.9      6.1      15.9      9.8       0.0   0.0    121.8    121.1    123.58             99.38        83    1.489     50M      0       0.0       0.0
High      0/0    0.00 KB   0.0      0.0     0.0      0.0       7.6      7.6       0.0   0.0      0.0    181.3     42.93             31.02       121    0.355       0      0       0.0       0.0

Blob file count: 0, total size: 0.0 GB, garbage size: 0.0 GB, space amp: 0.0

Uptime(secs): 43.0 total, 0.4 interval
Flush(GB): cumulative 7.600, interval 0.000
AddFile(GB): cumulative 0.000, interval 0.000
Cumulative compaction: 23.52 GB write, 560.31 MB/s write, 16.03 GB read, 381.86 MB/s read, 166.5 seconds
Stalls(count): 0 level0_slowdown, 0 level0_slowdown_with_compaction, 0 level0_numfiles, 0 level0_numfiles_with_compaction, 0 stop for pending_compaction_bytes, 412 slowdown for pending_compaction_bytes, 0 memtable_compaction, 0 memtable_slowdown, interval 0 total count

** File Read Latency Histogram By Level [default] **
** Level 0 read latency histogram (micros):
Count: 184320 Average: 0.7342  StdDev: 1.83
Min: 0  Median: 0.5134  Max: 412
Percentiles: P50: 0.51 P75: 0.77 P99: 3.42 P99.9: 16.90 P99.99: 87.14
------------------------------------------------------
[       0,       1 ]   179478  97.373%  97.373% ###################
(       1,       2 ]     3012   1.634%  99.007% 
(       2,       3 ]      812   0.441%  99.447% 
(      10,      15 ]      900   0.488%  99.936% 
(     380,     580 ]      118   0.064% 100.000% 

** Level 1 read latency histogram (micros):
Count: 90112 Average: 0.9012  StdDev: 2.10
Min: 0  Median: 0.5302  Max: 96
Percentiles: P50: 0.53 P75: 0.80 P99: 4.10 P99.9: 18.22 P99.99: 60.03
------------------------------------------------------
[       0,       1 ]    84977  94.302%  94.302% ###################
(      76,     110 ]     5135   5.698% 100.000% #


** DB Stats **
Uptime(secs): 43.0 total, 0.4 interval
Cumulative writes: 2000K writes, 2000K keys, 1950K commit groups, 1.0 writes per commit group, ingest: 7.87 GB, 187.33 MB/s
Cumulative WAL: 2000K writes, 0 syncs, 2000000.00 writes per sync, written: 7.87 GB, 187.33 MB/s
Cumulative stall: 00:00:8.412 H:M:S, 19.6 percent
Interval writes: 0 writes, 0 keys, 0 commit groups, 0.0 writes per commit group, ingest: 0.00 MB, 0.00 MB/s
Interval stall: 00:00:0.000 H:M:S, 0.0 percent

STATISTICS:
rocksdb.block.cache.miss COUNT : 2871
rocksdb.stall.micros COUNT : 8412000
rocksdb.wal.bytes COUNT : 8448000000
rocksdb.flush.write.bytes COUNT : 8160437248
rocksdb.compact.read.bytes COUNT : 17211973632
rocksdb.compact.write.bytes COUNT : 17071636480
rocksdb.db.get.micros P50 : 0.000000 P95 : 0.000000 P99 : 0.000000 P100 : 0.000000 COUNT : 0 SUM : 0
rocksdb.db.write.micros P50 : 8.000000 P95 : 14.371094 P99 : 50.931818 P100 : 61234.000000 COUNT : 2000000 SUM : 42520200
rocksdb.compaction.times.micros P50 : 1204512.000000 P95 : 3912000.000000 P99 : 5822000.000000 P100 : 6102331.000000 COUNT : 83 SUM : 123580000
rocksdb.db.flush.micros P50 : 341000.000000 P95 : 512000.000000 P99 : 690000.000000 P100 : 702131.000000 COUNT : 121 SUM : 42930000
rocksdb.sst.read.micros P50 : 0.510000 P95 : 1.650000 P99 : 3.420000 P100 : 412.000000 COUNT : 274432 SUM : 221312
";

    #[test]
    fn the_latency_is_the_benchmarks_own_histogram_not_the_later_ones() {
        let rs = parse_output(FILLRANDOM_WITH_STATS, None, None);
        assert_eq!(rs.len(), 1);
        let r = &rs[0];
        let l = &r.latency;
        assert_eq!(l.count, 2_000_000);
        assert!((l.mean - 21.2601).abs() < 1e-9, "{}", l.mean);
        assert!((l.p50 - 8.49).abs() < 1e-9, "{}", l.p50);
        assert!((l.p99 - 52.13).abs() < 1e-9, "{}", l.p99);
        assert!((l.p999 - 2726.66).abs() < 1e-9, "{}", l.p999);
        assert!((l.p9999 - 9821.45).abs() < 1e-9, "{}", l.p9999);
        assert!((l.max - 61_234.0).abs() < 1e-9, "{}", l.max);
        // db_bench prints no P90; its P75 is not reported as one.
        assert_eq!(l.p90, None);
        assert_eq!(r.latency_by_op.len(), 1);
        assert_eq!(r.latency_by_op[0].0, "write");
        // The CDF is the write histogram's 26 buckets, not the per-level read histograms'.
        assert_eq!(r.cdf.len(), 26);
        assert_eq!(r.cdf.first(), Some(&(0.0006, 3.0)));
        assert_eq!(r.cdf.last(), Some(&(1.0, 75_000.0)));
        // The counters after the histograms are still read.
        assert!((r.stall_seconds - 8.412).abs() < 1e-9);
        assert_eq!(r.wal_bytes, 8_448_000_000);
        assert_eq!(r.slow_tier_bytes, 8_160_437_248 + 17_071_636_480);
        assert_eq!(r.flushes, 121);
        assert_eq!(r.compactions, 204);
        assert_eq!(r.levels.len(), 3);
        assert_eq!(r.per_second, vec![47_100, 46_900]);
        let json = r.to_json();
        assert!(json["latency_us"]["p90"].is_null());
        assert_eq!(json["latency_us"]["p999"].as_f64(), Some(2726.66));
    }

    #[test]
    fn each_operation_histogram_is_kept_and_the_benchmarks_own_is_the_latency() {
        let block = |op: &str, p50: f64| {
            format!(
                "Microseconds per {op}:\nCount: 100 Average: {p50:.4}  StdDev: 1.00\n\
                 Min: 1  Median: {p50:.4}  Max: 90\nPercentiles: P50: {p50:.2} P75: 20.00 \
                 P99: 80.00 P99.9: 90.00 P99.99: 90.00\n\
                 ------------------------------------------------------\n\
                 (       6,      10 ]      100 100.000% 100.000% ####################\n\n"
            )
        };
        let seek = format!(
            "seekrandom   :      10.000 micros/op 100000 ops/sec 0.001 seconds 100 \
             operations; (100 of 100 found)\n{}{}",
            block("write", 3.0),
            block("seek", 7.0)
        );
        let rs = parse_output(&seek, None, None);
        let ops: Vec<&str> = rs[0]
            .latency_by_op
            .iter()
            .map(|(k, _)| k.as_str())
            .collect();
        assert_eq!(ops, ["write", "seek"]);
        assert_eq!(rs[0].latency.p50, 7.0);
        assert!(
            rs[0]
                .notes
                .iter()
                .all(|n| !n.contains("histogram per operation"))
        );
        // A mix without an operation of its own: the first histogram, said so in the notes.
        let mix = seek.replace("seekrandom  ", "readrandomwriterandom");
        let rs = parse_output(&mix, None, None);
        assert_eq!(rs[0].benchmark, "readrandomwriterandom");
        assert_eq!(rs[0].latency.p50, 3.0);
        assert!(rs[0].notes.iter().any(|n| n.contains("that of `write`")));
    }

    #[test]
    fn found_counts_are_parsed_from_read_lines() {
        let t = "readrandom   :       3.997 micros/op 250021 ops/sec 0.080 seconds 20000 \
                 operations;  158.1 MB/s (12749 of 20000 found)";
        let rs = parse_output(t, None, None);
        assert_eq!(rs[0].found, Some(12_749));
        assert_eq!(rs[0].user_bytes, 0);
    }

    #[test]
    fn the_cpu_time_of_the_child_process_is_measured_and_attributed() {
        // A shell busy for a few tens of milliseconds stands in for db_bench.
        let run = run_process(
            Path::new("/bin/sh"),
            &[
                "-c".to_owned(),
                "i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done; echo done $i".to_owned(),
            ],
        )
        .unwrap();
        assert_eq!(run.text.trim(), "done 30000");
        let cpu = run.cpu.unwrap();
        assert!(cpu.total_us() > 0, "{cpu:?}");
        let rs = parse_output(SAMPLE, None, Some(cpu));
        assert_eq!(rs[0].cpu, Some(cpu));
        assert_eq!(
            rs[0].cpu_us_per_op(),
            Some(cpu.total_us() as f64 / 40_000.0)
        );
        assert!(rs[0].notes.iter().any(|n| n.contains("whole run")));
        // A failing program is an error, not a result.
        let failed = run_process(
            Path::new("/bin/sh"),
            &["-c".to_owned(), "exit 3".to_owned()],
        );
        assert!(failed.is_err());
    }

    #[test]
    fn flags_translate_the_workload() {
        let a = BenchArgs::parse_words(["bench", "--num=10", "--value_size=100"]).unwrap();
        let place = Placement {
            fast_dir: "/f".into(),
            slow_dir: "/s".into(),
        };
        let f = db_bench_flags(&a, "readrandom", 1, &place);
        assert!(f.contains(&"--benchmarks=readrandom,stats".to_owned()));
        assert!(f.contains(&"--use_existing_db=1".to_owned()));
        assert!(f.contains(&"--value_size=100".to_owned()));
        assert!(f.contains(&"--max_bytes_for_level_base=268435456".to_owned()));
    }
}
