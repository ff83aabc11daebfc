//! `matrixkv stress`: a db_stress-style harness (issue 37 item 7; docs/reliability.md,
//! "The stress harness"). Threads draw operations on a database with randomly drawn options
//! and check every answer against an expected state kept in a file
//! ([`expected::ExpectedState`]), so `--crash` can kill the process with SIGKILL at random
//! times, reopen, and check that every acknowledged write survived ([`driver`]).
//! `--power-loss` (feature `stress-sim`) runs on the engine's simulated tiers and cuts the
//! power instead ([`power`]).
//!
//! Module map: `options` draws the options, `values` defines keys and values, `expected`
//! holds the expected state, `harness` the shared state and the write path, `ops` the
//! operations, `verify` the checks, `driver` the kill loop, `power` the power-loss loop.

mod driver;
mod expected;
mod harness;
mod ops;
mod options;
#[cfg(feature = "stress-sim")]
mod power;
mod rng;
mod values;
mod verify;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use matrixkv::{Db, Keyspace};

use harness::{Harness, HarnessClock, History};
use options::{Drawn, Fixed};
use values::KS1;

/// Arguments of `matrixkv stress`.
#[derive(clap::Args, Debug, Clone)]
pub struct StressArgs {
    /// Database directory (created if missing; holds `stress.meta` and `stress.expected`
    /// beside the tiers' `fast` and `slow`). Under `--power-loss`, only checkpoints and the
    /// expected state go there.
    #[arg(long)]
    db: PathBuf,
    /// Seed of every random choice (printed; replays the run's options and operations).
    /// Default: drawn from the time.
    #[arg(long)]
    seed: Option<u64>,
    /// Threads doing operations.
    #[arg(long, default_value_t = 8)]
    threads: usize,
    /// Keys per keyspace (fixed when the database is created).
    #[arg(long, default_value_t = 1000)]
    keys: usize,
    /// Seconds to run (a single run; `--crash` kills it earlier).
    #[arg(long, default_value_t = 60)]
    duration_secs: u64,
    /// Force the design (otherwise drawn) when the database is created.
    #[arg(long)]
    design: Option<String>,
    /// Open, verify every key against the expected state, close.
    #[arg(long)]
    verify_only: bool,
    /// Take checkpoints and backups while the writers run, and open (restore) and check them;
    /// they are kept under `<db>.ckpt`.
    #[arg(long)]
    checkpoints: bool,
    /// Crash driver: run the stress process as a child, kill it with SIGKILL at random times,
    /// and repeat with freshly drawn options (the child verifies at every start).
    #[arg(long)]
    crash: bool,
    /// Power-loss driver (feature `stress-sim`): run on the engine's simulated tiers and cut
    /// the power at random times; only synced writes must survive, and the rest as a prefix.
    #[arg(long)]
    power_loss: bool,
    /// Cycles of `--crash` or `--power-loss`.
    #[arg(long, default_value_t = 10)]
    cycles: u32,
    /// Shortest run before a kill or power cut, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    min_run_ms: u64,
    /// Longest run before a kill or power cut, in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    max_run_ms: u64,
}

/// Prints the engine's log records to stderr (with the time since start), at the level
/// `MATRIXKV_LOG` names (`warn`, `info`, `debug`): what recovery and the background jobs say
/// explains a failure being replayed.
struct StderrLog(Instant);

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            eprintln!(
                "{:>9.3}s {} {}: {}",
                self.0.elapsed().as_secs_f64(),
                r.level(),
                r.target(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}

fn init_log() {
    let Some(level) = std::env::var("MATRIXKV_LOG")
        .ok()
        .and_then(|l| l.parse::<log::LevelFilter>().ok())
    else {
        return;
    };
    let logger: &'static StderrLog = Box::leak(Box::new(StderrLog(Instant::now())));
    if log::set_logger(logger).is_ok() {
        log::set_max_level(level);
    }
}

/// Runs `matrixkv stress`.
pub fn run(args: &StressArgs) -> Result<()> {
    init_log();
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    if args.crash {
        return driver::run(args, seed);
    }
    if args.power_loss {
        #[cfg(feature = "stress-sim")]
        return power::run(args, seed);
        #[cfg(not(feature = "stress-sim"))]
        bail!(
            "--power-loss needs the `stress-sim` feature (cargo build -p matrixkv-cli --features stress-sim)"
        );
    }
    single_run(args, seed)
}

/// The fixed parameters of the database at `db`: its `stress.meta`, or drawn and saved.
fn fixed_for(args: &StressArgs, seed: u64) -> Result<Fixed> {
    std::fs::create_dir_all(&args.db)?;
    let meta = args.db.join("stress.meta");
    if let Some(f) = Fixed::load(&meta)? {
        return Ok(f);
    }
    let f = Fixed::draw(
        &mut rng::Rng::fork(seed, 1),
        args.keys,
        args.design.as_deref(),
    );
    f.save(&meta)?;
    Ok(f)
}

/// One stress process: open (verifying every key), run the threads, close.
fn single_run(args: &StressArgs, seed: u64) -> Result<()> {
    let fixed = fixed_for(args, seed)?;
    let drawn = options::draw(&mut rng::Rng::fork(seed, 2), &fixed, &args.db)?;
    println!(
        "stress: seed={seed} db={} fixed={fixed:?}",
        args.db.display()
    );
    println!("stress: options {}", options::describe(&drawn));
    let exp_path = args.db.join("stress.expected");
    let exp = expected::ExpectedState::open(&exp_path, fixed.space().slots(), wall_ms())?;
    let h = open(
        &fixed,
        drawn,
        exp,
        None,
        args.checkpoints.then(|| checkpoint_dir(&args.db)),
    )?;
    let n = verify::verify_and_settle(&h, seed).context("verification at open")?;
    println!("stress: verified {n} keys at open");
    if args.verify_only {
        return close(h);
    }
    run_threads(
        &h,
        args.threads,
        seed,
        Duration::from_secs(args.duration_secs),
    );
    let failure = h.failure.lock().ok().and_then(|f| f.clone());
    report(&h);
    if let Some(f) = failure {
        bail!(
            "stress failed (replay: matrixkv stress --seed {seed} on a copy of the database, or the same command line): {f}"
        );
    }
    let n = verify::verify_and_settle(&h, seed ^ 1).context("verification at the end")?;
    println!("stress: verified {n} keys at the end");
    close(h)
}

fn checkpoint_dir(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push(".ckpt");
    PathBuf::from(s)
}

/// Milliseconds since the Unix epoch.
fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Opens the database with `drawn` options (on `tiers` if given), creating keyspace `KS1`.
fn open(
    fixed: &Fixed,
    drawn: Drawn,
    exp: expected::ExpectedState,
    history: Option<Mutex<History>>,
    checkpoint_dir: Option<PathBuf>,
) -> Result<Harness> {
    let clock = Arc::new(HarnessClock(AtomicU64::new(exp.clock_ms())));
    let mut o = drawn.options;
    o.clock = clock.clone();
    let db = Db::open(o.clone()).context("open")?;
    let ks1 = match db.keyspace(KS1) {
        Ok(k) => k,
        Err(_) => db
            .create_keyspace(
                KS1,
                o.keyspace_options.get(KS1).cloned().unwrap_or_default(),
            )
            .context("create keyspace")?,
    };
    let ks0: Keyspace = db.keyspace(matrixkv::DEFAULT_KEYSPACE)?;
    Ok(Harness {
        db,
        ks: [ks0, ks1],
        space: fixed.space(),
        exp,
        clock,
        ttl_ms: (fixed.ks1_ttl_secs > 0).then_some(fixed.ks1_ttl_secs * 1000),
        ttl_gate: RwLock::new(()),
        sync_one_in: drawn.sync_one_in,
        size_weights: drawn.size_weights,
        stop: false.into(),
        failure: Mutex::new(None),
        history,
        checkpoint_dir,
        options: o,
        counts: Mutex::new(BTreeMap::new()),
        writes: AtomicU64::new(0),
        fault_fired: None,
    })
}

/// Runs `threads` stress threads for `duration` (or until one fails).
fn run_threads(h: &Harness, threads: usize, seed: u64, duration: Duration) {
    let start = Instant::now();
    std::thread::scope(|s| {
        for id in 0..threads {
            s.spawn(move || ops::run_thread(h, id, seed));
        }
        let mut last_report = Instant::now();
        while !h.stopped() && start.elapsed() < duration {
            std::thread::sleep(Duration::from_millis(20));
            if last_report.elapsed() >= Duration::from_secs(5) {
                report(h);
                last_report = Instant::now();
            }
        }
        h.stop.store(true, std::sync::atomic::Ordering::Release);
    });
}

pub(super) fn report(h: &Harness) {
    let counts = h.counts.lock().map(|c| c.clone()).unwrap_or_default();
    let parts: Vec<String> = counts.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("stress: operations {}", parts.join(" "));
}

fn close(h: Harness) -> Result<()> {
    let Harness { db, ks, .. } = h;
    drop(ks);
    db.close().context("close")?;
    // How long each rank of engine lock was waited for and held (`lock-stats` builds): the
    // cost of the locks held across I/O, sleeps and spins (docs/concurrency.md).
    #[cfg(feature = "lock-stats")]
    for line in matrixkv::lock_stats::report().lines() {
        println!("stress: locks {line}");
    }
    Ok(())
}
