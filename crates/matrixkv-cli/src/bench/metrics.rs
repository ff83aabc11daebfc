//! The metrics of docs/benchmarks.md, computed the same way for every engine: latency percentiles
//! from an HDR histogram, the per-second throughput series and its windows below 10%/50% of
//! the mean and coefficient of variation, write amplification per tier and its cross-check
//! against the kernel's `/proc/self/io`, CPU time per operation from `getrusage`, and the
//! [`BenchResult`] record that the stdout line, the JSON summary, the CSV series and the
//! reports are all drawn from.
//!
//! Pure computations plus one `/proc` read and `getrusage`; used by the runner, the db_bench
//! cross-check and the report code.

use anyhow::{Context, Result};
use hdrhistogram::Histogram;
use nix::sys::resource::{UsageWho, getrusage};
use nix::sys::time::{TimeVal, TimeValLike};
use serde_json::{Value, json};

/// A new latency histogram in nanoseconds: 1 ns to 10 minutes, 3 significant digits.
pub fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3).context("creating a histogram")
}

/// Latency percentiles in microseconds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Latency {
    /// Number of recorded operations.
    pub count: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile; None where the source has none (db_bench prints P50, P75, P99,
    /// P99.9 and P99.99 only).
    pub p90: Option<f64>,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// 99.99th percentile.
    pub p9999: f64,
    /// Largest latency.
    pub max: f64,
}

impl Latency {
    /// The percentiles of a nanosecond histogram (the bucket's highest equivalent value, so a
    /// percentile is never understated).
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        let us = |ns: u64| ns as f64 / 1000.0;
        Latency {
            count: h.len(),
            mean: h.mean() / 1000.0,
            p50: us(h.value_at_quantile(0.5)),
            p90: Some(us(h.value_at_quantile(0.9))),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            p9999: us(h.value_at_quantile(0.9999)),
            max: us(h.max()),
        }
    }

    /// The JSON object `{count, mean, p50, p90, p99, p999, p9999, max}` (`p90` null when
    /// absent).
    pub fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "mean": round3(self.mean),
            "p50": round3(self.p50),
            "p90": self.p90.map(round3),
            "p99": round3(self.p99),
            "p999": round3(self.p999),
            "p9999": round3(self.p9999),
            "max": round3(self.max),
        })
    }

    /// Reads back [`Latency::to_json`] (missing fields are 0, a missing or null `p90` None).
    pub fn from_json(v: &Value) -> Latency {
        let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        Latency {
            count: v.get("count").and_then(Value::as_u64).unwrap_or(0),
            mean: f("mean"),
            p50: f("p50"),
            p90: v.get("p90").and_then(Value::as_f64),
            p99: f("p99"),
            p999: f("p999"),
            p9999: f("p9999"),
            max: f("max"),
        }
    }
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Points of a latency CDF: (quantile, microseconds), at quantiles `1 - 10^(-k/10)` up to
/// `1 - 10^-6`, then the maximum.
pub fn latency_cdf(h: &Histogram<u64>) -> Vec<(f64, f64)> {
    if h.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for k in 0..=60 {
        let q = 1.0 - 10f64.powf(-f64::from(k) / 10.0);
        if q > 1.0 - 1.0 / h.len() as f64 && k > 0 {
            break;
        }
        out.push((q, h.value_at_quantile(q) as f64 / 1000.0));
    }
    out.push((1.0, h.max() as f64 / 1000.0));
    out
}

/// Statistics of a per-second throughput series, as docs/benchmarks.md defines them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SeriesStats {
    /// Complete one-second windows considered (a trailing partial window is excluded).
    pub windows: usize,
    /// The run's mean throughput: total operations / total seconds.
    pub mean: f64,
    /// Windows whose throughput is below 10% of `mean`.
    pub below_10pct: usize,
    /// Windows whose throughput is below 50% of `mean`.
    pub below_50pct: usize,
    /// Standard deviation of the windows divided by their mean (0 with fewer than 2 windows).
    pub cv: f64,
    /// Slowest window.
    pub min: u64,
    /// Fastest window.
    pub max: u64,
}

/// Computes [`SeriesStats`] of `per_second` (operations completed in each second) for a run of
/// `total_ops` operations in `total_seconds`. Only the first `floor(total_seconds)` windows are
/// complete.
pub fn series_stats(per_second: &[u64], total_ops: u64, total_seconds: f64) -> SeriesStats {
    let mean = if total_seconds > 0.0 {
        total_ops as f64 / total_seconds
    } else {
        0.0
    };
    let complete = (total_seconds.max(0.0).floor() as usize).min(per_second.len());
    let w = per_second.get(..complete).unwrap_or(&[]);
    let below = |frac: f64| w.iter().filter(|&&x| (x as f64) < frac * mean).count();
    let cv = if w.len() >= 2 {
        let m = w.iter().sum::<u64>() as f64 / w.len() as f64;
        let var = w.iter().map(|&x| (x as f64 - m).powi(2)).sum::<f64>() / w.len() as f64;
        if m > 0.0 { var.sqrt() / m } else { 0.0 }
    } else {
        0.0
    };
    SeriesStats {
        windows: w.len(),
        mean,
        below_10pct: below(0.1),
        below_50pct: below(0.5),
        cv,
        min: w.iter().copied().min().unwrap_or(0),
        max: w.iter().copied().max().unwrap_or(0),
    }
}

/// The kernel's I/O accounting of this process (`/proc/self/io`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcIo {
    /// Bytes this process caused to be sent to block storage (counted when pages are
    /// dirtied; tmpfs writes are not counted, so this is the slow tier's traffic).
    pub write_bytes: u64,
    /// Dirty bytes that were never written because their file was truncated or deleted first.
    pub cancelled_write_bytes: u64,
    /// Bytes passed to write-like system calls (any file system, tmpfs included).
    pub wchar: u64,
}

impl ProcIo {
    /// Reads `/proc/<pid>/io` (`pid` None: this process). None where unavailable.
    pub fn read(pid: Option<u32>) -> Option<ProcIo> {
        let path = match pid {
            Some(p) => format!("/proc/{p}/io"),
            None => "/proc/self/io".to_owned(),
        };
        let text = std::fs::read_to_string(path).ok()?;
        Some(ProcIo::parse(&text))
    }

    /// Parses the text of `/proc/<pid>/io`.
    pub fn parse(text: &str) -> ProcIo {
        let mut io = ProcIo::default();
        for line in text.lines() {
            let mut parts = line.split(':');
            let (Some(k), Some(v)) = (parts.next(), parts.next()) else {
                continue;
            };
            let v: u64 = v.trim().parse().unwrap_or(0);
            match k.trim() {
                "write_bytes" => io.write_bytes = v,
                "cancelled_write_bytes" => io.cancelled_write_bytes = v,
                "wchar" => io.wchar = v,
                _ => {}
            }
        }
        io
    }

    /// `self - before`, field by field.
    pub fn delta(&self, before: &ProcIo) -> ProcIo {
        ProcIo {
            write_bytes: self.write_bytes.saturating_sub(before.write_bytes),
            cancelled_write_bytes: self
                .cancelled_write_bytes
                .saturating_sub(before.cancelled_write_bytes),
            wchar: self.wchar.saturating_sub(before.wchar),
        }
    }
}

/// CPU time as the kernel accounts it (`getrusage`), in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTime {
    /// Time spent running the program's own code.
    pub user_us: u64,
    /// Time spent in the kernel on its behalf (system calls, page faults, the page cache).
    pub sys_us: u64,
}

impl CpuTime {
    /// This process so far, every thread included (`RUSAGE_SELF`): the benchmark's workers,
    /// the sampler and the engine's background threads. None if the call fails.
    pub fn of_process() -> Option<CpuTime> {
        CpuTime::of(UsageWho::RUSAGE_SELF)
    }

    /// Every child process this process has waited for so far (`RUSAGE_CHILDREN`); the
    /// difference around one child's run and wait is that child's CPU time.
    pub fn of_waited_children() -> Option<CpuTime> {
        CpuTime::of(UsageWho::RUSAGE_CHILDREN)
    }

    fn of(who: UsageWho) -> Option<CpuTime> {
        let u = getrusage(who).ok()?;
        Some(CpuTime {
            user_us: micros(u.user_time()),
            sys_us: micros(u.system_time()),
        })
    }

    /// User plus system time.
    pub fn total_us(&self) -> u64 {
        self.user_us + self.sys_us
    }

    /// `self - before`, field by field.
    pub fn delta(&self, before: &CpuTime) -> CpuTime {
        CpuTime {
            user_us: self.user_us.saturating_sub(before.user_us),
            sys_us: self.sys_us.saturating_sub(before.sys_us),
        }
    }
}

fn micros(t: TimeVal) -> u64 {
    u64::try_from(t.num_microseconds()).unwrap_or(0)
}

/// `us` microseconds spread over `ops` operations; None without operations.
pub fn per_op(us: u64, ops: u64) -> Option<f64> {
    (ops > 0).then(|| us as f64 / ops as f64)
}

/// The result of the harness's `reopen` step: one operation, the open, taking `seconds`.
pub fn reopen_result(engine: &str, seconds: f64) -> BenchResult {
    let us = seconds * 1e6;
    BenchResult {
        engine: engine.to_owned(),
        benchmark: "reopen".to_owned(),
        threads: 1,
        ops: 1,
        seconds,
        thread_seconds: seconds,
        latency: Latency {
            count: 1,
            mean: us,
            p50: us,
            p99: us,
            p999: us,
            max: us,
            ..Latency::default()
        },
        ..BenchResult::default()
    }
}

/// Everything measured about one benchmark on one engine. Serialized by [`BenchResult::to_json`]
/// with the keys docs/benchmarks.md and the issue name (`engine`, `benchmark`, `ops_per_sec`, ...).
#[derive(Debug, Clone, Default)]
pub struct BenchResult {
    /// Engine name.
    pub engine: String,
    /// Benchmark name.
    pub benchmark: String,
    /// Threads that ran it.
    pub threads: usize,
    /// Operations completed (all threads).
    pub ops: u64,
    /// Bytes of keys and values moved by the operations (db_bench's MB/s numerator).
    pub bytes: u64,
    /// Wall-clock duration in seconds.
    pub seconds: f64,
    /// Sum over threads of their busy seconds (db_bench's micros/op is this / ops).
    pub thread_seconds: f64,
    /// Reads that found their key, when the benchmark reads.
    pub found: Option<u64>,
    /// Latency of every operation.
    pub latency: Latency,
    /// Latency per operation type (YCSB: read, update, insert, scan, rmw).
    pub latency_by_op: Vec<(String, Latency)>,
    /// CDF points of the overall latency (quantile, microseconds).
    pub cdf: Vec<(f64, f64)>,
    /// Operations completed in each second.
    pub per_second: Vec<u64>,
    /// Statistics of `per_second`.
    pub series: SeriesStats,
    /// Once-a-second samples of the engine: (seconds since start, cumulative stall seconds,
    /// cumulative slow-tier MiB, cumulative fast-tier MiB, L0 tables).
    pub samples: Vec<[f64; 5]>,
    /// Seconds writers stalled (engine's own statistics).
    pub stall_seconds: f64,
    /// Times writers stalled.
    pub stalls: u64,
    /// Bytes of keys and values written by the benchmark (user bytes; WA denominator).
    pub user_bytes: u64,
    /// Bytes the engine wrote to the slow tier (tables + manifest, and the WAL when it lives
    /// there — reported separately in `wal_bytes`).
    pub slow_tier_bytes: u64,
    /// Bytes the engine wrote to the fast tier (tables; the WAL when it lives there is in
    /// `wal_bytes`).
    pub fast_tier_bytes: u64,
    /// WAL bytes.
    pub wal_bytes: u64,
    /// Whether the WAL is on the fast tier.
    pub wal_on_fast: bool,
    /// `/proc/self/io` over the benchmark.
    pub proc_io: Option<ProcIo>,
    /// CPU time over the benchmark: this process from the start of the phase to its last
    /// operation (all threads, background work included), or the db_bench process over its
    /// whole run. None where not measured (older summaries, parsed db_bench logs).
    pub cpu: Option<CpuTime>,
    /// Flushes during the benchmark.
    pub flushes: u64,
    /// Compactions during the benchmark.
    pub compactions: u64,
    /// Bytes read by compactions.
    pub compaction_input_bytes: u64,
    /// Bytes written by compactions.
    pub compaction_output_bytes: u64,
    /// L0→L1 compactions during the benchmark (0 if the engine does not report them).
    pub l0_compactions: u64,
    /// L0 bytes read by them.
    pub l0_compaction_input_bytes: u64,
    /// Level layout at the end: (tables, bytes) per level.
    pub levels: Vec<(u64, u64)>,
    /// Open-loop target rate (ops/s), if any.
    pub target_rate: Option<f64>,
    /// Remarks (approximations, tool versions, assertion builds).
    pub notes: Vec<String>,
    /// Which run of `--repeat` produced it (0-based; 0 without `--repeat`).
    pub repeat: u32,
    /// Open loop: service time (from each call's actual start, queueing excluded).
    pub service: Option<Latency>,
    /// Open loop: calls whose service time passed 1 ms, as (start in seconds since the
    /// beginning, service µs); written to `slow-<engine>-<benchmark>.csv`, not to the JSON.
    pub slow_service: Vec<(f64, f64)>,
    /// Bytes of the live keys and their values at the end of the benchmark (the keys the
    /// harness put and did not delete since the engine was created, each key + value): the
    /// denominator of space amplification. None when unknown (an existing database).
    pub live_user_bytes: Option<u64>,
    /// Bytes of the files under the engine's slow-tier directory at the end of the benchmark.
    pub slow_dir_bytes: Option<u64>,
    /// Bytes of the files under the engine's fast-tier directory at the end of the benchmark.
    pub fast_dir_bytes: Option<u64>,
}

impl BenchResult {
    /// Throughput: operations per wall-clock second.
    pub fn ops_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.ops as f64 / self.seconds
        } else {
            0.0
        }
    }

    /// MiB of keys and values per second (db_bench's "MB/s").
    pub fn mb_per_sec(&self) -> f64 {
        if self.seconds > 0.0 {
            self.bytes as f64 / 1_048_576.0 / self.seconds
        } else {
            0.0
        }
    }

    /// db_bench's micros/op: busy time of all threads per operation.
    pub fn micros_per_op(&self) -> f64 {
        self.thread_seconds * 1e6 / self.ops.max(1) as f64
    }

    /// The slow tier's bytes per user byte, WAL excluded (the WAL is reported separately).
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes > 0).then(|| self.slow_tier_bytes as f64 / self.user_bytes as f64)
    }

    /// Bytes written to both tiers per user byte, WAL included: slow-tier tables, blob files
    /// and manifest, fast-tier tables (matrixkv's RowTables, RocksDB's first levels when they
    /// are on the fast tier) and the WAL wherever it is. The headline WA: it counts every byte
    /// an engine writes, whichever tier takes it.
    pub fn total_write_amplification(&self) -> Option<f64> {
        (self.user_bytes > 0).then(|| self.bytes_written() as f64 / self.user_bytes as f64)
    }

    /// Bytes written to both tiers, WAL included (the numerator of
    /// [`BenchResult::total_write_amplification`]).
    pub fn bytes_written(&self) -> u64 {
        self.slow_tier_bytes + self.fast_tier_bytes + self.wal_bytes
    }

    /// Space amplification: bytes on the slow tier ÷ live user bytes, at the end of the
    /// benchmark.
    pub fn space_amplification(&self) -> Option<f64> {
        match (self.slow_dir_bytes, self.live_user_bytes) {
            (Some(disk), Some(live)) if live > 0 => Some(disk as f64 / live as f64),
            _ => None,
        }
    }

    /// Bytes written per user byte on each tier, `(fast, slow)`: the fast tier's tables
    /// (matrixkv's RowTables and L0 tables, RocksDB's fast levels) and the slow tier's tables,
    /// blob files and manifest, with the WAL counted on the tier that holds it. The two add up
    /// to [`BenchResult::total_write_amplification`].
    pub fn tier_write_amplification(&self) -> Option<(f64, f64)> {
        (self.user_bytes > 0).then(|| {
            let (wal_fast, wal_slow) = if self.wal_on_fast {
                (self.wal_bytes, 0)
            } else {
                (0, self.wal_bytes)
            };
            let u = self.user_bytes as f64;
            (
                (self.fast_tier_bytes + wal_fast) as f64 / u,
                (self.slow_tier_bytes + wal_slow) as f64 / u,
            )
        })
    }

    /// The slow tier's bytes per user byte as the kernel counted them (`write_bytes` of
    /// `/proc/self/io`; tmpfs is not counted, so this is the slow tier including a WAL on it).
    pub fn proc_write_amplification(&self) -> Option<f64> {
        match (&self.proc_io, self.user_bytes) {
            (Some(io), u) if u > 0 => Some(io.write_bytes as f64 / u as f64),
            _ => None,
        }
    }

    /// CPU µs (user + system) per operation.
    pub fn cpu_us_per_op(&self) -> Option<f64> {
        per_op(self.cpu?.total_us(), self.ops)
    }

    /// Fraction of the wall-clock time writers stalled.
    pub fn stall_fraction(&self) -> f64 {
        if self.seconds > 0.0 {
            self.stall_seconds / (self.seconds * self.threads.max(1) as f64)
        } else {
            0.0
        }
    }

    /// db_bench's summary line, byte for byte in its format, e.g.
    /// `fillrandom   :      33.209 micros/op 30112 ops/sec 66.417 seconds 2000000 operations;  118.1 MB/s`.
    pub fn db_bench_line(&self) -> String {
        let mut extra = String::new();
        if self.bytes > 0 {
            extra = format!("{:6.1} MB/s", self.mb_per_sec());
        }
        if let Some(found) = self.found {
            if !extra.is_empty() {
                extra.push(' ');
            }
            extra.push_str(&format!("({found} of {} found)", self.ops));
        }
        format!(
            "{:<12} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations;{}{}",
            self.benchmark,
            self.micros_per_op(),
            self.ops_per_sec() as u64,
            self.seconds,
            self.ops,
            if extra.is_empty() { "" } else { " " },
            extra
        )
    }

    /// The JSON summary. Keys required by docs/benchmarks.md and the issue come first.
    pub fn to_json(&self) -> Value {
        let mib = |b: u64| round3(b as f64 / 1_048_576.0);
        let by_op: serde_json::Map<String, Value> = self
            .latency_by_op
            .iter()
            .map(|(k, l)| (k.clone(), l.to_json()))
            .collect();
        let io = self.proc_io.map(|io| {
            json!({
                "write_bytes": io.write_bytes,
                "cancelled_write_bytes": io.cancelled_write_bytes,
                "wchar": io.wchar,
            })
        });
        json!({
            "engine": self.engine,
            "benchmark": self.benchmark,
            "ops_per_sec": round3(self.ops_per_sec()),
            "mb_per_sec": round3(self.mb_per_sec()),
            "latency_us": self.latency.to_json(),
            "stall_seconds": round3(self.stall_seconds),
            "windows_below_10pct_mean": self.series.below_10pct,
            "windows_below_50pct_mean": self.series.below_50pct,
            "throughput_cv": round3(self.series.cv),
            "write_amplification": self.write_amplification().map(round3),
            "write_amplification_all_tiers": self.total_write_amplification().map(round3),
            "fast_tier_bytes_written": self.fast_tier_bytes,
            "slow_tier_bytes_written": self.slow_tier_bytes,
            "wal_bytes": self.wal_bytes,
            "wal_on_fast_tier": self.wal_on_fast,
            "user_bytes": self.user_bytes,
            "proc_io": io,
            "proc_io_write_amplification": self.proc_write_amplification().map(round3),
            "fast_tier_write_amplification": self.tier_write_amplification().map(|w| round3(w.0)),
            "slow_tier_write_amplification_with_wal":
                self.tier_write_amplification().map(|w| round3(w.1)),
            "live_user_bytes": self.live_user_bytes,
            "slow_tier_bytes_on_disk": self.slow_dir_bytes,
            "fast_tier_bytes_on_disk": self.fast_dir_bytes,
            "space_amplification": self.space_amplification().map(round3),
            "cpu_us_per_op": self.cpu_us_per_op().map(round3),
            "cpu": self.cpu.map(|c| json!({
                "user_us": c.user_us,
                "sys_us": c.sys_us,
                "user_us_per_op": per_op(c.user_us, self.ops).map(round3),
                "sys_us_per_op": per_op(c.sys_us, self.ops).map(round3),
            })),
            "threads": self.threads,
            "operations": self.ops,
            "bytes": self.bytes,
            "seconds": round3(self.seconds),
            "micros_per_op": round3(self.micros_per_op()),
            "found": self.found,
            "stalls": self.stalls,
            "stall_fraction": round3(self.stall_fraction()),
            "windows": self.series.windows,
            "window_mean_basis_ops_per_sec": round3(self.series.mean),
            "window_min": self.series.min,
            "window_max": self.series.max,
            "flushes": self.flushes,
            "compactions": self.compactions,
            "compaction_input_bytes": self.compaction_input_bytes,
            "compaction_output_bytes": self.compaction_output_bytes,
            "l0_compactions": self.l0_compactions,
            "avg_l0_compaction_mib": mib(
                self.l0_compaction_input_bytes.checked_div(self.l0_compactions).unwrap_or(0)
            ),
            "l0_compaction_input_bytes": self.l0_compaction_input_bytes,
            "levels": self.levels.iter().enumerate()
                .map(|(i, &(n, b))| json!({"level": i, "files": n, "mib": mib(b)}))
                .collect::<Vec<_>>(),
            "target_rate": self.target_rate,
            "latency_by_op_us": by_op,
            "latency_cdf_us": self.cdf.iter().map(|&(q, v)| json!([q, v])).collect::<Vec<_>>(),
            "per_second_ops": self.per_second,
            "samples": self.samples.iter().map(|s| s.to_vec()).collect::<Vec<_>>(),
            "notes": self.notes,
            "repeat": self.repeat,
            "service_us": self.service.as_ref().map(Latency::to_json),
            "slow_service_calls": self.slow_service.len(),
        })
    }

    /// Reads back [`BenchResult::to_json`] (for `bench report`); unknown or missing fields
    /// take defaults, so summaries from other tools (db_bench's parser) load too.
    pub fn from_json(v: &Value) -> BenchResult {
        let u = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
        let seconds = f("seconds");
        let per_second: Vec<u64> = v
            .get("per_second_ops")
            .and_then(Value::as_array)
            .map(|a| a.iter().filter_map(Value::as_u64).collect())
            .unwrap_or_default();
        let ops = u("operations");
        let series = SeriesStats {
            windows: u("windows") as usize,
            mean: f("window_mean_basis_ops_per_sec"),
            below_10pct: u("windows_below_10pct_mean") as usize,
            below_50pct: u("windows_below_50pct_mean") as usize,
            cv: f("throughput_cv"),
            min: u("window_min"),
            max: u("window_max"),
        };
        let pair = |x: &Value| -> Option<(f64, f64)> {
            let a = x.as_array()?;
            Some((a.first()?.as_f64()?, a.get(1)?.as_f64()?))
        };
        BenchResult {
            engine: s("engine"),
            benchmark: s("benchmark"),
            threads: u("threads").max(1) as usize,
            ops,
            bytes: u("bytes"),
            seconds,
            thread_seconds: f("micros_per_op") * ops as f64 / 1e6,
            found: v.get("found").and_then(Value::as_u64),
            latency: v
                .get("latency_us")
                .map(Latency::from_json)
                .unwrap_or_default(),
            latency_by_op: v
                .get("latency_by_op_us")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, l)| (k.clone(), Latency::from_json(l)))
                        .collect()
                })
                .unwrap_or_default(),
            cdf: v
                .get("latency_cdf_us")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(pair).collect())
                .unwrap_or_default(),
            per_second,
            series,
            samples: v
                .get("samples")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|s| {
                            let s = s.as_array()?;
                            let g = |i: usize| s.get(i).and_then(Value::as_f64).unwrap_or(0.0);
                            Some([g(0), g(1), g(2), g(3), g(4)])
                        })
                        .collect()
                })
                .unwrap_or_default(),
            stall_seconds: f("stall_seconds"),
            stalls: u("stalls"),
            user_bytes: u("user_bytes"),
            slow_tier_bytes: u("slow_tier_bytes_written"),
            fast_tier_bytes: u("fast_tier_bytes_written"),
            wal_bytes: u("wal_bytes"),
            wal_on_fast: v
                .get("wal_on_fast_tier")
                .and_then(Value::as_bool)
                .unwrap_or(false),
            proc_io: v.get("proc_io").filter(|x| x.is_object()).map(|io| ProcIo {
                write_bytes: io.get("write_bytes").and_then(Value::as_u64).unwrap_or(0),
                cancelled_write_bytes: io
                    .get("cancelled_write_bytes")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                wchar: io.get("wchar").and_then(Value::as_u64).unwrap_or(0),
            }),
            cpu: v.get("cpu").filter(|x| x.is_object()).map(|c| CpuTime {
                user_us: c.get("user_us").and_then(Value::as_u64).unwrap_or(0),
                sys_us: c.get("sys_us").and_then(Value::as_u64).unwrap_or(0),
            }),
            flushes: u("flushes"),
            compactions: u("compactions"),
            compaction_input_bytes: u("compaction_input_bytes"),
            compaction_output_bytes: u("compaction_output_bytes"),
            l0_compactions: u("l0_compactions"),
            l0_compaction_input_bytes: u("l0_compaction_input_bytes"),
            levels: v
                .get("levels")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|l| {
                            let n = l.get("files").and_then(Value::as_u64).unwrap_or(0);
                            let m = l.get("mib").and_then(Value::as_f64).unwrap_or(0.0);
                            (n, (m * 1_048_576.0) as u64)
                        })
                        .collect()
                })
                .unwrap_or_default(),
            target_rate: v.get("target_rate").and_then(Value::as_f64),
            live_user_bytes: v.get("live_user_bytes").and_then(Value::as_u64),
            slow_dir_bytes: v.get("slow_tier_bytes_on_disk").and_then(Value::as_u64),
            fast_dir_bytes: v.get("fast_tier_bytes_on_disk").and_then(Value::as_u64),
            notes: v
                .get("notes")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default(),
            repeat: u32::try_from(u("repeat")).unwrap_or(0),
            service: v
                .get("service_us")
                .filter(|x| x.is_object())
                .map(Latency::from_json),
            slow_service: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_of_a_known_distribution() {
        let mut h = new_histogram().unwrap();
        // 1..=10000 microseconds, one each.
        for us in 1..=10_000u64 {
            h.record(us * 1000).unwrap();
        }
        let l = Latency::from_histogram(&h);
        assert_eq!(l.count, 10_000);
        let close = |got: f64, want: f64| (got - want).abs() <= want * 0.002 + 0.01;
        assert!(close(l.p50, 5000.0), "{}", l.p50);
        assert!(close(l.p99, 9900.0), "{}", l.p99);
        assert!(close(l.p999, 9990.0), "{}", l.p999);
        assert!(close(l.p9999, 9999.0), "{}", l.p9999);
        assert!(close(l.max, 10_000.0), "{}", l.max);
        assert!(close(l.mean, 5000.5), "{}", l.mean);
    }

    #[test]
    fn a_single_outlier_shows_only_in_the_far_tail() {
        let mut h = new_histogram().unwrap();
        for _ in 0..9999 {
            h.record(10_000).unwrap(); // 10 us
        }
        h.record(50_000_000).unwrap(); // 50 ms
        let l = Latency::from_histogram(&h);
        assert!(l.p99 < 11.0 && l.p999 < 11.0);
        assert!(l.max > 49_000.0);
        let cdf = latency_cdf(&h);
        assert_eq!(cdf.last().map(|p| p.0), Some(1.0));
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }

    #[test]
    fn windows_below_the_mean_count_throttled_seconds() {
        // 10 complete seconds: 6 at 1000 ops, 4 stalled at 0 and 40; then a partial second.
        let series = [1000, 1000, 0, 1000, 40, 1000, 0, 1000, 1000, 0, 500];
        let total: u64 = series.iter().sum();
        let s = series_stats(&series, total, 10.5);
        assert_eq!(s.windows, 10);
        // Mean = 6540 / 10.5 = 622.9: 10% = 62.3, 50% = 311.4.
        assert!((s.mean - 6540.0 / 10.5).abs() < 1e-9);
        assert_eq!(s.below_10pct, 4);
        assert_eq!(s.below_50pct, 4);
        assert_eq!(s.min, 0);
        assert_eq!(s.max, 1000);
    }

    #[test]
    fn coefficient_of_variation_of_steady_and_bursty_series() {
        let steady = series_stats(&[100, 100, 100, 100], 400, 4.0);
        assert_eq!(steady.cv, 0.0);
        assert_eq!(steady.below_50pct, 0);
        // Alternating 0 and 200: mean 100, standard deviation 100.
        let bursty = series_stats(&[0, 200, 0, 200], 400, 4.0);
        assert!((bursty.cv - 1.0).abs() < 1e-12);
        assert_eq!(bursty.below_10pct, 2);
        let short = series_stats(&[5], 5, 0.4);
        assert_eq!(short.windows, 0);
        assert_eq!(short.cv, 0.0);
    }

    #[test]
    fn proc_io_text_is_parsed() {
        let text = "rchar: 1\nwchar: 300\nsyscr: 2\nsyscw: 3\nread_bytes: 0\n\
                    write_bytes: 4096\ncancelled_write_bytes: 1024\n";
        let io = ProcIo::parse(text);
        assert_eq!(io.write_bytes, 4096);
        assert_eq!(io.cancelled_write_bytes, 1024);
        assert_eq!(io.wchar, 300);
        let d = io.delta(&ProcIo {
            write_bytes: 96,
            ..ProcIo::default()
        });
        assert_eq!(d.write_bytes, 4000);
        assert!(ProcIo::read(None).is_some(), "Linux has /proc/self/io");
    }

    #[test]
    fn cpu_time_of_this_process_grows_with_its_work() {
        let before = CpuTime::of_process().unwrap();
        let start = std::time::Instant::now();
        let mut x = 0u64;
        // Spin until the kernel has accounted 5 ms more (bounded in wall time on a busy box).
        while CpuTime::of_process().unwrap().delta(&before).total_us() < 5000
            && start.elapsed().as_secs() < 20
        {
            for i in 0..100_000u64 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        let used = CpuTime::of_process().unwrap().delta(&before);
        assert!(
            used.total_us() >= 5000,
            "{used:?} after {:?}",
            start.elapsed()
        );
        assert!(used.user_us > 0);
        assert!(CpuTime::of_waited_children().is_some());
    }

    #[test]
    fn cpu_time_is_divided_by_the_operations() {
        let before = CpuTime {
            user_us: 1_000_000,
            sys_us: 500_000,
        };
        let after = CpuTime {
            user_us: 3_000_000,
            sys_us: 1_000_000,
        };
        let d = after.delta(&before);
        assert_eq!(
            (d.user_us, d.sys_us, d.total_us()),
            (2_000_000, 500_000, 2_500_000)
        );
        assert_eq!(before.delta(&after), CpuTime::default());
        let r = BenchResult {
            ops: 100_000,
            cpu: Some(d),
            ..BenchResult::default()
        };
        assert_eq!(r.cpu_us_per_op(), Some(25.0));
        assert_eq!(per_op(d.user_us, r.ops), Some(20.0));
        assert_eq!(per_op(d.sys_us, 0), None);
        let none = BenchResult {
            cpu: Some(d),
            ..BenchResult::default()
        };
        assert_eq!(none.cpu_us_per_op(), None);
        assert_eq!(BenchResult::default().cpu_us_per_op(), None);
    }

    fn sample_result() -> BenchResult {
        let mut h = new_histogram().unwrap();
        for i in 1..=1000u64 {
            h.record(i * 1000).unwrap();
        }
        BenchResult {
            engine: "matrixkv".into(),
            benchmark: "fillrandom".into(),
            threads: 1,
            ops: 2_000_000,
            bytes: 2_000_000 * 4112,
            seconds: 66.417,
            thread_seconds: 66.417,
            latency: Latency::from_histogram(&h),
            cdf: latency_cdf(&h),
            per_second: vec![30_000; 66],
            series: series_stats(&vec![30_000; 66], 2_000_000, 66.417),
            user_bytes: 2_000_000 * 4112,
            slow_tier_bytes: 3 * 2_000_000 * 4112,
            levels: vec![(3, 100), (10, 1000)],
            cpu: Some(CpuTime {
                user_us: 80_000_000,
                sys_us: 20_000_000,
            }),
            ..BenchResult::default()
        }
    }

    #[test]
    fn all_tiers_wa_counts_fast_tier_tables_and_the_wal_beside_the_slow_tier() {
        let mut r = sample_result();
        r.fast_tier_bytes = 2_000_000 * 4112;
        r.wal_bytes = 2_000_000 * 4112;
        assert_eq!(r.write_amplification(), Some(3.0));
        assert_eq!(r.total_write_amplification(), Some(5.0));
        assert_eq!(
            r.to_json()["write_amplification_all_tiers"].as_f64(),
            Some(5.0)
        );
        r.user_bytes = 0;
        assert_eq!(r.total_write_amplification(), None);
    }

    #[test]
    fn summary_line_has_db_bench_format() {
        let r = sample_result();
        let line = r.db_bench_line();
        assert_eq!(
            line,
            "fillrandom   :      33.209 micros/op 30112 ops/sec 66.417 seconds 2000000 \
             operations;  118.1 MB/s"
        );
        let mut read = r.clone();
        read.benchmark = "readrandom".into();
        read.found = Some(12);
        assert!(read.db_bench_line().ends_with("MB/s (12 of 2000000 found)"));
    }

    #[test]
    fn space_amplification_divides_slow_tier_disk_bytes_by_live_user_bytes() {
        let mut r = sample_result();
        assert_eq!(r.space_amplification(), None);
        r.live_user_bytes = Some(1000);
        r.slow_dir_bytes = Some(1250);
        r.fast_dir_bytes = Some(300);
        assert_eq!(r.space_amplification(), Some(1.25));
        let v = r.to_json();
        assert_eq!(v["space_amplification"].as_f64(), Some(1.25));
        let back = BenchResult::from_json(&v);
        assert_eq!(
            (
                back.live_user_bytes,
                back.slow_dir_bytes,
                back.fast_dir_bytes
            ),
            (Some(1000), Some(1250), Some(300))
        );
        // Every key deleted: no live bytes, no ratio.
        r.live_user_bytes = Some(0);
        assert_eq!(r.space_amplification(), None);
    }

    #[test]
    fn per_tier_wa_counts_the_wal_on_its_tier_and_adds_up_to_wa_all() {
        let mut r = sample_result();
        r.user_bytes = 100;
        r.slow_tier_bytes = 150;
        r.fast_tier_bytes = 80;
        r.wal_bytes = 110;
        r.wal_on_fast = true;
        assert_eq!(r.tier_write_amplification(), Some((1.9, 1.5)));
        r.wal_on_fast = false;
        assert_eq!(r.tier_write_amplification(), Some((0.8, 2.6)));
        let (f, s) = r.tier_write_amplification().unwrap();
        assert!((f + s - r.total_write_amplification().unwrap()).abs() < 1e-9);
        let v = r.to_json();
        assert_eq!(v["fast_tier_write_amplification"].as_f64(), Some(0.8));
        assert_eq!(
            v["slow_tier_write_amplification_with_wal"].as_f64(),
            Some(2.6)
        );
        r.user_bytes = 0;
        assert_eq!(r.tier_write_amplification(), None);
    }

    #[test]
    fn json_has_the_required_keys_and_reads_back() {
        let r = sample_result();
        let v = r.to_json();
        for k in [
            "engine",
            "benchmark",
            "ops_per_sec",
            "mb_per_sec",
            "latency_us",
            "stall_seconds",
            "windows_below_10pct_mean",
            "windows_below_50pct_mean",
            "throughput_cv",
            "write_amplification",
            "write_amplification_all_tiers",
            "fast_tier_bytes_written",
        ] {
            assert!(v.get(k).is_some(), "missing {k}");
        }
        for k in ["p50", "p99", "p999", "p9999", "max"] {
            assert!(v["latency_us"].get(k).is_some(), "missing latency_us.{k}");
        }
        assert_eq!(v["write_amplification"].as_f64(), Some(3.0));
        let back = BenchResult::from_json(&v);
        assert_eq!(back.engine, "matrixkv");
        assert_eq!(back.ops, r.ops);
        assert_eq!(back.per_second.len(), 66);
        assert_eq!(back.levels.len(), 2);
        assert!((back.ops_per_sec() - r.ops_per_sec()).abs() < 1.0);
        assert!((back.latency.p99 - r.latency.p99).abs() < 0.01);
        let p90 = |l: &Latency| l.p90.unwrap_or(f64::NAN);
        assert!((p90(&back.latency) - p90(&r.latency)).abs() < 0.01);
        assert_eq!(v["cpu_us_per_op"].as_f64(), Some(50.0));
        assert_eq!(v["cpu"]["user_us"].as_u64(), Some(80_000_000));
        assert_eq!(v["cpu"]["user_us_per_op"].as_f64(), Some(40.0));
        assert_eq!(v["cpu"]["sys_us_per_op"].as_f64(), Some(10.0));
        assert_eq!(back.cpu, r.cpu);
        // Summaries written before CPU was measured load without it.
        let mut old = v.clone();
        if let Some(o) = old.as_object_mut() {
            o.remove("cpu");
            o.remove("cpu_us_per_op");
        }
        let old = BenchResult::from_json(&old);
        assert_eq!((old.cpu, old.cpu_us_per_op()), (None, None));
        assert!(old.to_json()["cpu_us_per_op"].is_null());
        // A summary whose p90 is null or missing reads back without one.
        let mut old = v.clone();
        old["latency_us"]["p90"] = Value::Null;
        assert_eq!(BenchResult::from_json(&old).latency.p90, None);
    }
}
