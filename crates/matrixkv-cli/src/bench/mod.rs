//! `matrixkv bench`: db_bench's workloads, names, flags and summary line, YCSB A–F, an
//! open-loop mode, and the metrics of docs/benchmarks.md, run identically against every engine of
//! `--engines` (matrixkv; RocksDB in four setups with the `rocksdb` feature; fjall with the
//! `fjall` feature; Debian's db_bench as an external cross-check), with a results directory
//! holding the command, configuration, JSON summary, CSV series, plots and a side-by-side
//! report.
//!
//! Module map: `args` (flags), `demo` (`matrixkv demo`), `keys` (generators and
//! distributions), `ycsb` (workload mixes), `engine` (the `Engine` trait, matrixkv), `rocks`
//! (RocksDB, feature `rocksdb`),
//! `fjall_engine` (fjall with key-value separation, feature `fjall`), `append_log` (the
//! simplest store: one appended file, a reference point), `runner`
//! (timing loop, sampler, progress bar), `workload` (the benchmarks), `metrics` (percentiles,
//! series, WA, CPU time, `BenchResult`), `report` (results directory, markdown), `plot`
//! (SVG/PNG), `dbbench` (db_bench cross-check). Called from `main.rs`; single-threaded except
//! inside a benchmark phase (see `runner`).

pub mod append_log;
pub mod args;
pub mod dbbench;
pub mod demo;
pub mod engine;
#[cfg(feature = "fjall")]
pub mod fjall_engine;
pub mod keys;
pub mod metrics;
pub mod plot;
pub mod report;
#[cfg(feature = "rocksdb")]
pub mod rocks;
pub mod runner;
pub mod workload;
pub mod ycsb;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, PoisonError};

use anyhow::{Context, Result, bail};

pub use args::BenchArgs;
use args::{BenchCommand, split_list};
use engine::{Placement, canonical_engine, open_engine, remove_dir};
use metrics::BenchResult;
use workload::{RunState, describe_levels};

/// Directories to remove if the process is interrupted (Ctrl-C, SIGTERM) mid-run.
static CLEANUP: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Installs, once per process, a handler that removes the registered directories and exits
/// with status 130 on SIGINT or SIGTERM (a benchmark's fast tier can hold GiBs of RAM in
/// /dev/shm).
fn install_interrupt_cleanup() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let set = ctrlc::set_handler(|| {
            eprintln!("\ninterrupted: removing the benchmark databases");
            let dirs = CLEANUP.lock().unwrap_or_else(PoisonError::into_inner);
            for d in dirs.iter() {
                let _ = std::fs::remove_dir_all(d);
            }
            std::process::exit(130);
        });
        if let Err(e) = set {
            log::warn!("no interrupt handler: {e}");
        }
    });
}

/// Removes an engine's directories when dropped (also on errors and interrupts), unless told
/// to keep them.
struct DirGuard {
    dirs: Vec<PathBuf>,
    keep: bool,
}

impl DirGuard {
    fn new(dirs: Vec<PathBuf>, keep: bool) -> DirGuard {
        if !keep {
            install_interrupt_cleanup();
            CLEANUP
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(dirs.iter().cloned());
        }
        DirGuard { dirs, keep }
    }
}

impl Drop for DirGuard {
    fn drop(&mut self) {
        if self.keep {
            return;
        }
        let mut registered = CLEANUP.lock().unwrap_or_else(PoisonError::into_inner);
        for d in &self.dirs {
            if let Some(i) = registered.iter().position(|r| r == d) {
                registered.swap_remove(i);
            }
            if let Err(e) = remove_dir(d) {
                log::warn!("{e:#}");
            }
        }
    }
}

/// Runs `matrixkv bench` with parsed arguments.
pub fn run(a: &BenchArgs) -> Result<()> {
    match &a.command {
        Some(BenchCommand::Report { dirs, out }) => {
            let out = out
                .clone()
                .unwrap_or_else(|| default_results_dir(&["report".to_owned()]));
            let results = report::load_dirs(dirs)?;
            report::write_report_dir(&out, &results, None, true)?;
            println!("report: {}", out.join("report.md").display());
            Ok(())
        }
        Some(BenchCommand::ParseDbBench { file, out }) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading {}", file.display()))?;
            let results = dbbench::parse_output(&text, None, None);
            if results.is_empty() {
                bail!("no db_bench result found in {}", file.display());
            }
            for r in &results {
                println!("{}", r.db_bench_line());
            }
            let out = out
                .clone()
                .unwrap_or_else(|| default_results_dir(&["db_bench".to_owned()]));
            report::write_report_dir(&out, &results, None, true)?;
            println!("report: {}", out.join("report.md").display());
            Ok(())
        }
        None => {
            run_benchmarks(a)?;
            // Every engine run of this process together (`lock-stats` builds): bench one
            // matrixkv configuration at a time to read its figures.
            #[cfg(feature = "lock-stats")]
            print!("locks:\n{}", matrixkv::lock_stats::report());
            Ok(())
        }
    }
}

/// Runs every benchmark on every engine; returns the results and the results directory.
pub fn run_benchmarks(a: &BenchArgs) -> Result<(Vec<BenchResult>, Option<PathBuf>)> {
    let benchmarks = a.benchmark_list();
    workload::check_names(&benchmarks)?;
    let mut engines: Vec<&'static str> = Vec::new();
    for e in split_list(&a.engines) {
        let c = canonical_engine(&e)?;
        if !engines.contains(&c) {
            engines.push(c);
        }
    }
    if engines.is_empty() {
        bail!("--engines is empty");
    }
    if benchmarks.iter().any(|b| b == "mergerandom") {
        for e in ["fjall", append_log::NAME] {
            if engines.contains(&e) {
                bail!("{e} has no merge operator: run mergerandom without it (--engines)");
            }
        }
        if a.value_size != 8 {
            bail!(
                "mergerandom adds to 8-byte u64 counters (db_bench's uint64add): give \
                 --value_size=8"
            );
        }
        if a.merge_keys.is_some_and(|k| k == 0 || k > a.num) {
            bail!("--merge_keys must be between 1 and --num");
        }
    }
    if a.key_size == 0 {
        bail!("--key_size must be at least 1");
    }
    if a.use_existing_db && a.fast_dir.is_none() {
        bail!("--use_existing_db needs --fast_dir (the default fast tier is per process)");
    }
    let progress = match a.progress.as_str() {
        "always" => true,
        "never" => false,
        _ => std::io::stderr().is_terminal(),
    };
    let results_dir = (!a.no_results_dir).then(|| {
        a.results_dir
            .clone()
            .unwrap_or_else(|| default_results_dir(&benchmarks))
    });
    let command = command_line();
    let mut config = format!("command: {command}\n\n{a:#?}\n");
    let (fast_base, own_fast_base) = match &a.fast_dir {
        Some(f) => (f.clone(), false),
        None => (
            PathBuf::from(format!("/dev/shm/matrixkv-bench-{}", std::process::id())),
            true,
        ),
    };
    let _fast_base_guard =
        DirGuard::new(vec![fast_base.clone()], !own_fast_base || a.use_existing_db);
    warn_if_disk_is_short(a, &benchmarks);

    if a.repeat > 1 && a.use_existing_db {
        bail!("--repeat needs fresh databases for every run: drop --use_existing_db");
    }
    let mut results = Vec::new();
    for rep in 0..a.repeat {
        if a.repeat > 1 {
            println!("=== run {} of {} ===", rep + 1, a.repeat);
        }
        let first = results.len();
        for engine_name in &run_order(&engines, rep) {
            run_engine(
                a,
                engine_name,
                &fast_base,
                &benchmarks,
                results_dir.as_deref(),
                progress,
                &mut config,
                &mut results,
            )?;
        }
        for r in results.iter_mut().skip(first) {
            r.repeat = rep;
        }
    }
    if a.repeat > 1 {
        print!("{}", report::repeat_summary(&results));
    }
    if let Some(base) = a.db.to_str().filter(|_| !a.use_existing_db) {
        // Remove the base directory if the run left it empty (never anything else in it).
        let _ = std::fs::remove_dir(base);
    }

    if let Some(path) = &a.json {
        report::write_json_summary(path, &results)?;
    }
    if let Some(dir) = &results_dir {
        report::write_report_dir(dir, &results, Some((&command, &config)), !a.no_plots)?;
        println!("results: {}", dir.display());
    }
    Ok((results, results_dir))
}

/// The engine order of run `rep` of `--repeat`: the list rotated left by `rep`.
fn run_order<'a>(engines: &[&'a str], rep: u32) -> Vec<&'a str> {
    let mut v = engines.to_vec();
    if !v.is_empty() {
        let k = rep as usize % v.len();
        v.rotate_left(k);
    }
    v
}

/// Runs every benchmark on one engine, on fresh databases unless `--use_existing_db`; appends
/// the results and the engine's description (to `config`).
#[allow(clippy::too_many_arguments)]
fn run_engine(
    a: &BenchArgs,
    engine_name: &str,
    fast_base: &Path,
    benchmarks: &[String],
    results_dir: Option<&Path>,
    progress: bool,
    config: &mut String,
    results: &mut Vec<BenchResult>,
) -> Result<()> {
    let place = Placement {
        fast_dir: fast_base.join(engine_name),
        slow_dir: a.db.join(engine_name),
    };
    let say = !a.quiet;
    if say {
        println!("== engine {engine_name} ==");
    }
    if engine_name == "db_bench" {
        if a.sync_every > 0 {
            bail!("db_bench has no --sync_every: leave db_bench out of --engines");
        }
        let _guard = DirGuard::new(vec![place.slow_dir.clone()], a.use_existing_db);
        let (rs, desc) = dbbench::run(a, benchmarks, &place, results_dir)?;
        config.push_str(&format!("\n{desc}\n"));
        results.extend(rs);
        return Ok(());
    }
    let _guard = DirGuard::new(
        vec![place.fast_dir.clone(), place.slow_dir.clone()],
        a.use_existing_db,
    );
    if !a.use_existing_db {
        remove_dir(&place.fast_dir)?;
        remove_dir(&place.slow_dir)?;
    }
    let mut engine = open_engine(engine_name, a, &place)?;
    let desc = engine.describe();
    if say {
        println!("{desc}");
    }
    // Later runs of --repeat open the same configuration: the configuration file names it once.
    if !config.contains(&desc) {
        config.push_str(&format!("\n{desc}\n"));
    }
    if say {
        println!(
            "keys {} B, values {} B, num {}, reads {}, threads {}, seed {}",
            a.key_size,
            a.value_size,
            a.num,
            a.reads(),
            a.threads,
            a.seed
        );
    }
    let state = RunState::default();
    for (i, name) in benchmarks.iter().enumerate() {
        if name == "reopen" {
            // Closes the engine (what a clean shutdown persists) and times the open that
            // follows, the recovery of its memtables from the WAL included.
            engine.close()?;
            let t = std::time::Instant::now();
            engine = open_engine(engine_name, a, &place)?;
            let took = t.elapsed().as_secs_f64();
            if say {
                println!(
                    "  [{engine_name}] reopen: {took:.3} s (open, memtables rebuilt from the WAL)"
                );
            }
            results.push(metrics::reopen_result(engine_name, took));
            continue;
        }
        if let Some(r) =
            workload::run_benchmark(engine.as_ref(), a, i as u64, name, &state, progress)?
        {
            if say {
                print_result(&r);
            }
            results.push(r);
        }
    }
    let s = engine.stats();
    if say {
        println!(
            "  [{engine_name}] levels at the end: {}",
            describe_levels(&s.levels)
        );
    }

    engine.close()?;
    Ok(())
}

/// Prints db_bench's summary line and the extra metrics of one result.
#[allow(clippy::print_stdout)]
pub fn print_result(r: &BenchResult) {
    println!("{}", r.db_bench_line());
    let tag = format!("  [{}]", r.engine);
    let l = &r.latency;
    println!(
        "{tag} latency us: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}{}",
        l.p50,
        l.p99,
        l.p999,
        l.p9999,
        l.max,
        r.target_rate
            .map(|t| format!("  (open loop at {t:.0} ops/s, from intended start)"))
            .unwrap_or_default()
    );
    if let Some(sv) = &r.service {
        let slow = &r.slow_service;
        let worst = slow.iter().map(|x| x.1).fold(0.0, f64::max);
        let shown: Vec<String> = slow
            .iter()
            .take(12)
            .map(|(t, us)| format!("{t:.2}s:{:.1}ms", us / 1000.0))
            .collect();
        println!(
            "{tag} service us (from actual start): p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}; \
             {} calls served in >= 1 ms{}{}",
            sv.p50,
            sv.p99,
            sv.p999,
            sv.max,
            slow.len(),
            if slow.is_empty() {
                String::new()
            } else {
                format!(
                    " (worst {:.1} ms), first at {}",
                    worst / 1000.0,
                    shown.join(" ")
                )
            },
            if slow.len() > shown.len() { " ..." } else { "" }
        );
    }
    if r.latency_by_op.len() > 1 {
        for (k, l) in &r.latency_by_op {
            println!(
                "{tag}   {k:<7} {} ops: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1}",
                l.count, l.p50, l.p99, l.p999, l.max
            );
        }
    }
    if let (Some(c), Some(total)) = (r.cpu, r.cpu_us_per_op()) {
        let per_op = |us: u64| metrics::per_op(us, r.ops).unwrap_or(0.0);
        println!(
            "{tag} CPU us/op: {total:.2} (user {:.2}, sys {:.2}; {:.3} s of CPU)",
            per_op(c.user_us),
            per_op(c.sys_us),
            c.total_us() as f64 / 1e6
        );
    }
    let s = &r.series;
    println!(
        "{tag} per-second windows: {}; below 10% of mean: {}; below 50%: {}; CV {:.3}",
        s.windows, s.below_10pct, s.below_50pct, s.cv
    );
    if r.user_bytes > 0 {
        let mib = |b: u64| b as f64 / 1_048_576.0;
        println!(
            "{tag} stall {:.3} s ({:.1}% of thread time, {} stalls); flushes {}, compactions {} \
             (in {:.1} MiB, out {:.1} MiB); L0->L1 compactions {} averaging {:.1} MiB of L0 data",
            r.stall_seconds,
            100.0 * r.stall_fraction(),
            r.stalls,
            r.flushes,
            r.compactions,
            mib(r.compaction_input_bytes),
            mib(r.compaction_output_bytes),
            r.l0_compactions,
            mib(r
                .l0_compaction_input_bytes
                .checked_div(r.l0_compactions)
                .unwrap_or(0))
        );
        println!(
            "{tag} WA all tiers {:.2} (WAL included); slow tier {:.2} (kernel write_bytes {}); \
             fast tier tables {:.1} MiB; WAL {:.1} MiB on the {} tier",
            r.total_write_amplification().unwrap_or(0.0),
            r.write_amplification().unwrap_or(0.0),
            match (r.proc_write_amplification(), r.proc_io) {
                (Some(w), Some(io)) => format!(
                    "{w:.2}, cancelled {:.1} MiB",
                    io.cancelled_write_bytes as f64 / 1_048_576.0
                ),
                _ => "n/a".to_owned(),
            },
            mib(r.fast_tier_bytes),
            mib(r.wal_bytes),
            if r.wal_on_fast { "fast" } else { "slow" }
        );
    }
    if let Some((fast, slow)) = r.tier_write_amplification() {
        println!(
            "{tag} bytes written per user byte: fast tier {fast:.2} (tables + WAL there), slow \
             tier {slow:.2} (tables + blob files + manifest{})",
            if r.wal_on_fast { "" } else { " + WAL" }
        );
    }
    if r.live_user_bytes.is_some() || r.slow_dir_bytes.is_some() {
        let show = |b: Option<u64>| {
            b.map_or("n/a".to_owned(), |b| {
                format!("{:.1} MiB", b as f64 / 1_048_576.0)
            })
        };
        println!(
            "{tag} space at the end: live user {}, slow tier {} on disk (space amplification \
             {}), fast tier {} on disk",
            show(r.live_user_bytes),
            show(r.slow_dir_bytes),
            r.space_amplification()
                .map_or("n/a".to_owned(), |x| format!("{x:.3}")),
            show(r.fast_dir_bytes)
        );
    }
    for n in &r.notes {
        println!("{tag} note: {n}");
    }
}

/// `bench-results/<UTC timestamp>-<names>`.
pub fn default_results_dir(names: &[String]) -> PathBuf {
    let mut tag = names.join("-");
    tag.truncate(60);
    PathBuf::from("bench-results").join(format!("{}-{tag}", utc_timestamp()))
}

/// The current UTC time as `YYYYMMDD-HHMMSS`.
pub fn utc_timestamp() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let s = secs % 86_400;
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        s / 3600,
        s / 60 % 60,
        s % 60
    )
}

/// (year, month, day) of a day count since 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// This process's command line, shell-quoted.
pub fn command_line() -> String {
    std::env::args()
        .map(|w| {
            if !w.is_empty()
                && w.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_=./,:@%+".contains(c))
            {
                w
            } else {
                format!("'{}'", w.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Warns on stderr when the slow tier's file system may fall below 20 GiB free during the run.
fn warn_if_disk_is_short(a: &BenchArgs, benchmarks: &[String]) {
    let writes = benchmarks
        .iter()
        .filter(|b| b.starts_with("fill") || b.as_str() == "overwrite" || b.as_str() == "ycsb_load")
        .count() as u64;
    let need = writes * a.num * a.threads.max(1) as u64 * (a.key_size + a.value_size) as u64;
    let probe = existing_ancestor(&a.db);
    let Some(free) = free_bytes(&probe) else {
        return;
    };
    if free.saturating_sub(2 * need) < 20 << 30 {
        eprintln!(
            "warning: {} has {:.1} GiB free and this run may write {:.1} GiB of live data \
             (keep >= 20 GiB free)",
            probe.display(),
            free as f64 / (1u64 << 30) as f64,
            need as f64 / (1u64 << 30) as f64
        );
    }
}

fn existing_ancestor(p: &Path) -> PathBuf {
    let mut p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    while !p.exists() {
        if !p.pop() {
            return PathBuf::from("/");
        }
    }
    p
}

/// Free bytes of the file system holding `p`, from `df`.
fn free_bytes(p: &Path) -> Option<u64> {
    let out = std::process::Command::new("df")
        .arg("-Pk")
        .arg(p)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().nth(1)?;
    let kb: u64 = line.split_whitespace().nth(3)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_are_correct() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(20_454), (2026, 1, 1));
        assert_eq!(utc_timestamp().len(), 15);
    }

    #[test]
    fn repeated_runs_rotate_the_engine_order() {
        let e = ["matrixkv", "rocksdb-ssd", "rocksdb-best"];
        assert_eq!(run_order(&e, 0), e);
        assert_eq!(
            run_order(&e, 1),
            ["rocksdb-ssd", "rocksdb-best", "matrixkv"]
        );
        assert_eq!(
            run_order(&e, 2),
            ["rocksdb-best", "matrixkv", "rocksdb-ssd"]
        );
        assert_eq!(run_order(&e, 3), e);
    }

    #[test]
    fn default_results_dir_names_the_benchmarks() {
        let d = default_results_dir(&["fillrandom".into(), "readrandom".into()]);
        let s = d.to_string_lossy().into_owned();
        assert!(s.starts_with("bench-results/"));
        assert!(s.ends_with("-fillrandom-readrandom"));
    }
}

#[cfg(test)]
mod run_tests {
    use super::*;
    use serde_json::Value;

    fn tiny_args(tmp: &Path, benchmarks: &str, extra: &[&str]) -> BenchArgs {
        let mut words = vec![
            "bench".to_owned(),
            format!("--benchmarks={benchmarks}"),
            "--num=2000".to_owned(),
            "--reads=500".to_owned(),
            "--value_size=100".to_owned(),
            "--write_buffer_size=262144".to_owned(),
            "--target_file_size_base=262144".to_owned(),
            "--max_bytes_for_level_base=1048576".to_owned(),
            "--cache_size=1048576".to_owned(),
            "--progress=never".to_owned(),
            format!("--db={}", tmp.join("db").display()),
            format!("--fast_dir={}", tmp.join("fast").display()),
            format!("--results_dir={}", tmp.join("results").display()),
            format!("--json={}", tmp.join("summary.json").display()),
        ];
        words.extend(extra.iter().map(|s| (*s).to_owned()));
        BenchArgs::parse_words(words).unwrap()
    }

    #[test]
    fn repeat_runs_every_engine_again_on_fresh_databases_and_numbers_the_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(tmp.path(), "fillrandom", &["--repeat=2"]);
        let (results, dir) = run_benchmarks(&a).unwrap();
        let dir = dir.unwrap();
        let runs: Vec<u32> = results.iter().map(|r| r.repeat).collect();
        assert_eq!(runs, [0, 1]);
        // Fresh databases: the second run writes as much as the first.
        assert_eq!(results[0].ops, results[1].ops);
        assert!(results[1].wal_bytes >= results[1].user_bytes);
        assert!(dir.join("series-matrixkv-fillrandom.csv").is_file());
        assert!(dir.join("series-matrixkv-fillrandom-run2.csv").is_file());
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.contains("| matrixkv (run 2) |"), "{md}");
        let v: Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap())
                .unwrap();
        assert_eq!(v[1]["repeat"], 1);
        assert!(
            tiny_args(
                tmp.path(),
                "fillrandom",
                &["--repeat=2", "--use_existing_db"]
            )
            .repeat
                == 2
        );
        let err = run_benchmarks(&tiny_args(
            tmp.path(),
            "fillrandom",
            &["--repeat=2", "--use_existing_db"],
        ))
        .unwrap_err();
        assert!(
            err.to_string().contains("--repeat needs fresh databases"),
            "{err}"
        );
    }

    #[test]
    fn a_tiny_run_writes_the_results_directory_and_removes_its_databases() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(tmp.path(), "fillrandom,waitforcompaction,readrandom", &[]);
        let (results, dir) = run_benchmarks(&a).unwrap();
        let dir = dir.unwrap();
        let names: Vec<&str> = results.iter().map(|r| r.benchmark.as_str()).collect();
        assert_eq!(names, ["fillrandom", "readrandom"]);
        let fill = &results[0];
        assert_eq!(fill.ops, 2000);
        assert_eq!(fill.user_bytes, 2000 * 116);
        assert!(fill.wal_bytes >= fill.user_bytes);
        assert!(fill.proc_io.is_some());
        // CPU per operation: a write costs at least a few hundred ns of CPU, and the phase
        // cannot use more than every core for its whole duration.
        let cpu_per_op = fill.cpu_us_per_op().unwrap();
        let cores = std::thread::available_parallelism().map_or(64, |n| n.get()) as f64;
        assert!(
            cpu_per_op > 0.1 && cpu_per_op * fill.ops as f64 <= (fill.seconds + 0.05) * 1e6 * cores,
            "{cpu_per_op} µs/op over {} s",
            fill.seconds
        );
        // waitforcompaction moved everything out of the memtable before readrandom.
        assert!(results[1].levels.iter().map(|l| l.0).sum::<u64>() > 0);
        // fillrandom draws with replacement: about 63% of [0, num) exists.
        let found = results[1].found.unwrap();
        assert!((250..380).contains(&found), "{found}");
        for f in [
            "command.txt",
            "config.txt",
            "summary.json",
            "report.md",
            "series-matrixkv-fillrandom.csv",
            "latency-matrixkv-readrandom.csv",
            "throughput-fillrandom.png",
            "throughput-fillrandom.svg",
            "latency-cdf-readrandom.png",
            "latency-cdf-readrandom.svg",
        ] {
            assert!(dir.join(f).is_file(), "{f} missing");
        }
        let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(md.contains("## readrandom") && md.contains("| matrixkv |"));
        assert!(md.contains("| CPU µs/op |"));
        assert!(md.contains("![throughput-fillrandom](throughput-fillrandom.svg)"));
        let config = std::fs::read_to_string(dir.join("config.txt")).unwrap();
        assert!(config.contains("write_buffer_bytes 262144"));
        let v: Value = serde_json::from_str(
            &std::fs::read_to_string(tmp.path().join("summary.json")).unwrap(),
        )
        .unwrap();
        let first = &v.as_array().unwrap()[0];
        assert_eq!(first["engine"], "matrixkv");
        assert!(first["latency_us"]["p9999"].as_f64().unwrap() > 0.0);
        assert!(first["fast_tier_bytes_written"].is_u64());
        assert!(first["cpu_us_per_op"].as_f64().unwrap() > 0.0);
        assert!(first["cpu"]["user_us"].is_u64() && first["cpu"]["sys_us"].is_u64());
        // Databases are gone; the given base directories are left empty.
        assert!(!tmp.path().join("db").exists());
        assert_eq!(
            std::fs::read_dir(tmp.path().join("fast")).unwrap().count(),
            0
        );
    }

    #[test]
    fn seeks_scans_and_ycsb_inserts_are_measured_per_operation_type() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(
            tmp.path(),
            "fillseq,seekrandom,ycsb_load,ycsbd,ycsbe",
            &["--no_results_dir", "--seek_nexts=5"],
        );
        let (rs, _) = run_benchmarks(&a).unwrap();
        // fillseq wrote every key: each seek finds its key and reads 6 entries (fewer for the
        // last 5 keys of the key space).
        assert_eq!(rs[1].found, Some(500));
        let full = 500 * 6 * 116;
        assert!(
            rs[1].bytes <= full && rs[1].bytes > full * 98 / 100,
            "{}",
            rs[1].bytes
        );
        let d = &rs[3];
        assert!(d.latency_by_op.iter().any(|(k, _)| k == "insert"));
        assert!(d.notes.iter().any(|n| n.contains("latest")));
        let e = &rs[4];
        let scan = e.latency_by_op.iter().find(|(k, _)| k == "scan").unwrap();
        assert!(scan.1.count > 400);
        // Scans of 1..=100 records read about 50 records of 116 bytes on average.
        let per_scan = e.bytes as f64 / e.ops as f64;
        assert!((2000.0..8000.0).contains(&per_scan), "{per_scan}");
    }

    #[test]
    fn the_same_seed_gives_the_same_keys_and_another_seed_does_not() {
        let found = |seed: &str| {
            let tmp = tempfile::tempdir().unwrap();
            let a = tiny_args(
                tmp.path(),
                "fillrandom,readrandom",
                &["--no_results_dir", seed],
            );
            run_benchmarks(&a).unwrap().0[1].found.unwrap()
        };
        let a = found("--seed=7");
        assert_eq!(a, found("--seed=7"));
        assert_ne!(a, found("--seed=8"));
    }

    /// Asserts that `rs` holds matrixkv's then `other`'s results of the fill, readrandom and
    /// seekrandom (in that order) and that both engines found the same keys.
    fn assert_matrixkv_then(other: &str, rs: &[BenchResult]) {
        let runs: Vec<(&str, &str)> = rs
            .iter()
            .map(|r| (r.engine.as_str(), r.benchmark.as_str()))
            .collect();
        let expected: Vec<(&str, &str)> = ["matrixkv", other]
            .into_iter()
            .flat_map(|e| ["fillrandom", "readrandom", "seekrandom"].map(|b| (e, b)))
            .collect();
        assert_eq!(runs, expected);
        assert_eq!(rs[1].found, rs[4].found);
        assert_eq!(rs[2].found, rs[5].found);
    }

    #[cfg(feature = "fjall")]
    #[test]
    fn fjall_runs_the_same_loads_as_matrixkv_and_its_databases_are_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(
            tmp.path(),
            "fillrandom,waitforcompaction,readrandom,seekrandom",
            &[
                "--engines=matrixkv,fjall",
                "--value_size=1000",
                "--min_blob_size=512",
            ],
        );
        let (rs, dir) = run_benchmarks(&a).unwrap();
        assert_matrixkv_then("fjall", &rs);
        let fill = &rs[3];
        assert_eq!(fill.ops, 2000);
        assert!(fill.wal_on_fast);
        assert!(fill.wal_bytes >= fill.user_bytes, "{fill:?}");
        assert!(fill.slow_tier_bytes > 0, "{fill:?}");
        assert!(fill.notes.iter().any(|n| n.contains("fjall counts none")));
        // 2 MB of 1000-byte values through 256 KiB memtables: flushed into blob files.
        assert!(
            fill.notes
                .iter()
                .any(|n| n.contains("blob files (now)") && !n.contains("(now): 0 ")),
            "{:?}",
            fill.notes
        );
        // waitforcompaction flushed the memtable into tables.
        assert!(rs[4].levels.iter().map(|l| l.0).sum::<u64>() > 0);
        let config = std::fs::read_to_string(dir.unwrap().join("config.txt")).unwrap();
        assert!(config.contains("fjall: fjall 3"), "{config}");
        assert!(!tmp.path().join("db").exists());
        assert_eq!(
            std::fs::read_dir(tmp.path().join("fast")).unwrap().count(),
            0
        );
    }

    #[test]
    fn the_append_log_runs_the_open_loop_beside_matrixkv_and_finds_the_same_keys() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(
            tmp.path(),
            "fillrandom,readrandom,seekrandom",
            &[
                "--no_results_dir",
                "--engines=matrixkv,append-log",
                "--rate=20000",
            ],
        );
        let (rs, _) = run_benchmarks(&a).unwrap();
        assert_matrixkv_then("append-log", &rs);
        let fill = &rs[3];
        assert!(fill.service.is_some(), "the open loop measures the log too");
        // Every record reached the file: user bytes plus an 8-byte header per write.
        assert_eq!(fill.slow_tier_bytes, fill.user_bytes + 8 * fill.ops);
        assert!(fill.notes.iter().any(|n| n.contains("reference point")));
        assert!(!tmp.path().join("db").exists());
    }

    #[test]
    fn mergerandom_refuses_the_append_log() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(
            tmp.path(),
            "mergerandom",
            &["--no_results_dir", "--engines=append-log", "--value_size=8"],
        );
        let e = run_benchmarks(&a).err().unwrap().to_string();
        assert!(e.contains("append-log has no merge operator"), "{e}");
    }

    #[test]
    fn open_loop_and_threads_complete_every_operation() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(
            tmp.path(),
            "fillseq,readseq",
            &[
                "--no_results_dir",
                "--threads=2",
                "--rate=20000",
                "--num=500",
            ],
        );
        let (rs, _) = run_benchmarks(&a).unwrap();
        assert_eq!(rs[0].ops, 1000);
        assert_eq!(rs[0].target_rate, Some(20_000.0));
        // 1000 operations at 20K/s take at least 50 ms.
        assert!(rs[0].seconds >= 0.045, "{}", rs[0].seconds);
        assert_eq!(rs[1].found, Some(1000));
        // Open loop: service time is measured beside latency, and never exceeds it (latency
        // counts from the intended start, which is never after the actual one).
        let service = rs[0]
            .service
            .as_ref()
            .expect("open loop measures service time");
        assert_eq!(service.count, 1000);
        assert!(service.max <= rs[0].latency.max + 1.0, "{service:?}");
        assert!(
            rs[0]
                .slow_service
                .iter()
                .all(|&(t, us)| t >= 0.0 && us >= 1000.0)
        );
    }

    #[test]
    fn closed_loop_has_no_separate_service_time() {
        let tmp = tempfile::tempdir().unwrap();
        let a = tiny_args(tmp.path(), "fillseq", &["--no_results_dir", "--num=200"]);
        let (rs, _) = run_benchmarks(&a).unwrap();
        assert!(rs[0].service.is_none() && rs[0].slow_service.is_empty());
    }
}
