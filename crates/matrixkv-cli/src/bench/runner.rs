//! The measurement loop shared by every benchmark and engine: runs a worker closure per thread
//! (closed loop, or open loop at a fixed arrival rate), times every operation into HDR
//! histograms, counts completions per second, samples the engine's statistics once a second,
//! reads the process's CPU time at the start and at the last worker's end, and draws the
//! progress bar.
//!
//! Each worker thread owns its histograms and counters and hands them back when it ends; the
//! only shared state is an atomic progress counter, a stop flag and the two CPU readings. The
//! sampler thread only calls [`Engine::stats`].

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{Result, anyhow};
use hdrhistogram::Histogram;

use super::engine::{Engine, EngineStats};
use super::metrics::{CpuTime, new_histogram};

/// What one operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpOutcome {
    /// The operation type, for per-type latency (`write`, `read`, `seek`, `scan`, `update`,
    /// `insert`, `rmw`, `delete`).
    pub kind: &'static str,
    /// Bytes of keys and values moved.
    pub bytes: u64,
    /// Bytes of keys and values written (user bytes for write amplification).
    pub written: u64,
    /// For reads: how many of the keys read were found (0 or 1 but for batched reads).
    pub found: Option<u64>,
    /// Operations this call counts for (a write batch counts its entries).
    pub count: u64,
}

impl OpOutcome {
    /// A write of `bytes` user bytes.
    pub fn write(kind: &'static str, bytes: u64) -> OpOutcome {
        OpOutcome {
            kind,
            bytes,
            written: bytes,
            found: None,
            count: 1,
        }
    }

    /// A read that moved `bytes` and found its key or not.
    pub fn read(kind: &'static str, bytes: u64, found: bool) -> OpOutcome {
        OpOutcome {
            kind,
            bytes,
            written: 0,
            found: Some(u64::from(found)),
            count: 1,
        }
    }
}

/// How a phase runs.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Benchmark name (progress bar).
    pub name: String,
    /// Worker threads.
    pub threads: usize,
    /// Calls of the worker per thread.
    pub calls_per_thread: u64,
    /// Stop after this long, if set.
    pub duration: Option<Duration>,
    /// Open loop: total calls per second over all threads.
    pub rate: Option<f64>,
    /// Open loop: wait for each call's start by spinning on `yield_now` for the last 300 µs
    /// (the pacer of earlier versions) instead of sleeping.
    pub yield_pacer: bool,
    /// Draw a progress bar on stderr.
    pub progress: bool,
}

/// What a phase measured (before engine-stat deltas are attached).
#[derive(Debug)]
pub struct Measured {
    /// Operations completed.
    pub ops: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// User bytes written.
    pub written: u64,
    /// Found count, if any operation reported one.
    pub found: Option<u64>,
    /// Wall-clock time from start to the last completion.
    pub elapsed: Duration,
    /// Sum of the threads' busy time.
    pub thread_seconds: f64,
    /// Latency of every call.
    pub hist: Histogram<u64>,
    /// Latency per operation type.
    pub by_kind: BTreeMap<&'static str, Histogram<u64>>,
    /// Operations completed in each second since the start.
    pub per_second: Vec<u64>,
    /// Engine samples: (seconds since start, stats).
    pub samples: Vec<(f64, EngineStats)>,
    /// The process's CPU time (all threads) from the start to the last worker's end.
    pub cpu: Option<CpuTime>,
    /// Open loop only: service time of every call, from its actual start (after the pacer
    /// released it) to its end; `hist` counts from the intended start, so the difference is time
    /// spent queued behind earlier calls.
    pub service: Option<Histogram<u64>>,
    /// Open loop only: calls whose service time passed [`SLOW_SERVICE`]: (seconds since the
    /// start at which the call started, service microseconds), at most [`SLOW_SERVICE_KEEP`]
    /// per thread, in time order.
    pub slow_service: Vec<(f64, f64)>,
}

/// Service time from which an open-loop call is listed in [`Measured::slow_service`].
pub const SLOW_SERVICE: Duration = Duration::from_millis(1);
/// Slow calls listed per thread.
const SLOW_SERVICE_KEEP: usize = 10_000;

/// Starts the clock once every worker has built its state (key generators, value buffers,
/// zeta tables), so that setup is not timed: workers and the sampler meet at `ready`, the
/// sampler reads the clock and the process's CPU time, and everyone leaves through `go`.
struct StartGate {
    ready: Barrier,
    go: Barrier,
    start: OnceLock<Instant>,
    start_cpu: OnceLock<CpuTime>,
}

impl StartGate {
    fn new(workers: usize) -> StartGate {
        StartGate {
            ready: Barrier::new(workers + 1),
            go: Barrier::new(workers + 1),
            start: OnceLock::new(),
            start_cpu: OnceLock::new(),
        }
    }

    /// A worker waits for the start; returns the start time.
    fn wait_start(&self) -> Instant {
        self.ready.wait();
        self.go.wait();
        self.start.get().copied().unwrap_or_else(Instant::now)
    }

    /// The sampler starts the clock once all workers are ready.
    fn open(&self) -> Instant {
        self.ready.wait();
        if let Some(cpu) = CpuTime::of_process() {
            let _ = self.start_cpu.set(cpu);
        }
        let now = Instant::now();
        let _ = self.start.set(now);
        self.go.wait();
        now
    }
}

struct ThreadOut {
    /// From the start to this thread's last completion.
    elapsed: Duration,
    ops: u64,
    bytes: u64,
    written: u64,
    found: u64,
    any_found: bool,
    busy: Duration,
    hist: Histogram<u64>,
    by_kind: BTreeMap<&'static str, Histogram<u64>>,
    per_second: Vec<u64>,
    service: Histogram<u64>,
    slow_service: Vec<(f64, f64)>,
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// Runs `plan`: `make_worker(thread)` builds each thread's worker, which is then called with
/// the call index `0..calls_per_thread` (fewer if the duration ends first).
pub fn run_phase<F, W>(engine: &dyn Engine, plan: &Plan, make_worker: F) -> Result<Measured>
where
    F: Fn(usize) -> Result<W> + Sync,
    W: FnMut(u64) -> Result<OpOutcome>,
{
    let threads = plan.threads.max(1);
    let stop = AtomicBool::new(false);
    let done = AtomicU64::new(0);
    let finished_threads = AtomicU64::new(0);
    let total_calls = plan.calls_per_thread.saturating_mul(threads as u64);
    let gate = StartGate::new(threads);
    let end_cpu: OnceLock<CpuTime> = OnceLock::new();
    let per_thread_interval = plan
        .rate
        .filter(|r| *r > 0.0)
        .map(|r| Duration::from_secs_f64(threads as f64 / r));

    let (outs, samples) = std::thread::scope(|s| {
        let mut handles = Vec::new();
        for t in 0..threads {
            let (stop, done, finished, make_worker, gate, end_cpu) = (
                &stop,
                &done,
                &finished_threads,
                &make_worker,
                &gate,
                &end_cpu,
            );
            handles.push(s.spawn(move || -> Result<ThreadOut> {
                let r = worker_loop(t, plan, gate, per_thread_interval, stop, done, make_worker);
                if r.is_err() {
                    stop.store(true, Relaxed);
                }
                // The last worker to end closes the phase's CPU window.
                if finished.fetch_add(1, Relaxed) + 1 == threads as u64
                    && let Some(cpu) = CpuTime::of_process()
                {
                    let _ = end_cpu.set(cpu);
                }
                r
            }));
        }
        let sampler = {
            let (done, finished, gate) = (&done, &finished_threads, &gate);
            s.spawn(move || {
                let start = gate.open();
                sample_loop(
                    engine,
                    plan,
                    start,
                    total_calls,
                    done,
                    finished,
                    threads as u64,
                )
            })
        };
        let outs: Vec<Result<ThreadOut>> = handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a benchmark thread panicked")))
            })
            .collect();
        let samples = sampler.join().unwrap_or_default();
        (outs, samples)
    });

    let mut hist = new_histogram()?;
    let mut by_kind: BTreeMap<&'static str, Histogram<u64>> = BTreeMap::new();
    let mut per_second: Vec<u64> = Vec::new();
    let (mut ops, mut bytes, mut written, mut found, mut any_found) = (0, 0, 0, 0, false);
    let mut busy = 0.0;
    let mut elapsed = Duration::ZERO;
    let mut service = new_histogram()?;
    let mut slow_service = Vec::new();
    for o in outs {
        let o = o?;
        service.add(&o.service)?;
        slow_service.extend(o.slow_service);
        elapsed = elapsed.max(o.elapsed);
        ops += o.ops;
        bytes += o.bytes;
        written += o.written;
        found += o.found;
        any_found |= o.any_found;
        busy += o.busy.as_secs_f64();
        hist.add(&o.hist)?;
        for (k, h) in o.by_kind {
            match by_kind.get_mut(k) {
                Some(m) => m.add(&h)?,
                None => {
                    by_kind.insert(k, h);
                }
            }
        }
        if per_second.len() < o.per_second.len() {
            per_second.resize(o.per_second.len(), 0);
        }
        for (a, b) in per_second.iter_mut().zip(&o.per_second) {
            *a += b;
        }
    }
    Ok(Measured {
        ops,
        bytes,
        written,
        found: any_found.then_some(found),
        elapsed,
        thread_seconds: busy,
        hist,
        by_kind,
        per_second,
        samples,
        cpu: match (gate.start_cpu.get(), end_cpu.get()) {
            (Some(start), Some(end)) => Some(end.delta(start)),
            _ => None,
        },
        service: per_thread_interval.is_some().then_some(service),
        slow_service: {
            slow_service.sort_by(|a, b| a.0.total_cmp(&b.0));
            slow_service
        },
    })
}

#[allow(clippy::too_many_arguments)]
fn worker_loop<F, W>(
    t: usize,
    plan: &Plan,
    gate: &StartGate,
    interval: Option<Duration>,
    stop: &AtomicBool,
    done: &AtomicU64,
    make_worker: &F,
) -> Result<ThreadOut>
where
    F: Fn(usize) -> Result<W>,
    W: FnMut(u64) -> Result<OpOutcome>,
{
    let work = make_worker(t);
    if interval.is_some() && !plan.yield_pacer {
        precise_timers();
    }
    let start = gate.wait_start();
    let mut work = work?;
    let mut out = ThreadOut {
        elapsed: Duration::ZERO,
        ops: 0,
        bytes: 0,
        written: 0,
        found: 0,
        any_found: false,
        busy: Duration::ZERO,
        hist: new_histogram()?,
        by_kind: BTreeMap::new(),
        per_second: Vec::new(),
        service: new_histogram()?,
        slow_service: Vec::new(),
    };
    let deadline = plan.duration.map(|d| start + d);
    let mut pending = 0u64;
    let mut last_end = start;
    for i in 0..plan.calls_per_thread {
        // Open loop: call i is due at start + i * interval (threads offset by a fraction).
        let intended =
            interval.map(|iv| start + iv.mul_f64(i as f64 + t as f64 / plan.threads.max(1) as f64));
        if let Some(due) = intended {
            wait_until(due, plan.yield_pacer);
        }
        let began = Instant::now();
        let t0 = intended.unwrap_or(began);
        let r = work(i)?;
        let end = Instant::now();
        last_end = end;
        let lat = nanos(end.saturating_duration_since(t0));
        if intended.is_some() {
            let served = end.saturating_duration_since(began);
            out.service.saturating_record(nanos(served));
            if served >= SLOW_SERVICE && out.slow_service.len() < SLOW_SERVICE_KEEP {
                out.slow_service.push((
                    began.saturating_duration_since(start).as_secs_f64(),
                    served.as_secs_f64() * 1e6,
                ));
            }
        }
        out.hist.saturating_record(lat);
        match out.by_kind.get_mut(r.kind) {
            Some(h) => h.saturating_record(lat),
            None => {
                let mut h = new_histogram()?;
                h.saturating_record(lat);
                out.by_kind.insert(r.kind, h);
            }
        }
        out.ops += r.count;
        out.bytes += r.bytes;
        out.written += r.written;
        if let Some(f) = r.found {
            out.any_found = true;
            out.found += f;
        }
        let sec = end.saturating_duration_since(start).as_secs() as usize;
        if out.per_second.len() <= sec {
            out.per_second.resize(sec + 1, 0);
        }
        if let Some(c) = out.per_second.get_mut(sec) {
            *c += r.count;
        }
        pending += 1;
        if pending >= 64 {
            done.fetch_add(pending, Relaxed);
            pending = 0;
            if stop.load(Relaxed) {
                break;
            }
        }
        if deadline.is_some_and(|d| end >= d) {
            break;
        }
    }
    done.fetch_add(pending, Relaxed);
    out.elapsed = last_end.saturating_duration_since(start);
    out.busy = out.elapsed;
    Ok(out)
}

/// Waits until `due` the way a client waiting for its next request does: asleep. The open-loop
/// workers set their timer slack to 1 ns ([`precise_timers`]), so the sleep ends within the
/// kernel's wakeup latency of `due`, and a waking thread preempts background work as a woken
/// client would. (An earlier pacer spun on `yield_now` for the last 300 µs: it kept a core busy
/// and, worse, handed the CPU to the engine's background threads for a whole time slice at
/// every yield, so the harness itself made milliseconds of queueing.)
fn wait_until(due: Instant, yield_pacer: bool) {
    const SPIN: Duration = Duration::from_micros(300);
    let now = Instant::now();
    if !yield_pacer {
        if due > now {
            std::thread::sleep(due - now);
        }
        return;
    }
    if due > now + SPIN {
        std::thread::sleep(due - now - SPIN);
    }
    while Instant::now() < due {
        std::thread::yield_now();
    }
}

/// Makes this thread's sleeps end on time: timer slack 1 ns instead of the default 50 µs,
/// which would otherwise be counted as latency by the open loop.
fn precise_timers() {
    #[cfg(target_os = "linux")]
    if let Err(e) = nix::sys::prctl::set_timerslack(1) {
        log::warn!("open loop: could not lower the timer slack ({e}); latencies include it");
    }
}

fn sample_loop(
    engine: &dyn Engine,
    plan: &Plan,
    start: Instant,
    total: u64,
    done: &AtomicU64,
    finished: &AtomicU64,
    threads: u64,
) -> Vec<(f64, EngineStats)> {
    let mut samples = vec![(0.0, engine.stats())];
    let mut next = start + Duration::from_secs(1);
    let tty = std::io::stderr().is_terminal();
    let mut last_line = Instant::now();
    loop {
        // Wake every 50 ms to notice the end quickly; sample on whole seconds.
        while Instant::now() < next {
            if finished.load(Relaxed) >= threads {
                if plan.progress && tty {
                    eprint!("\r\x1b[2K");
                }
                return samples;
            }
            std::thread::sleep(Duration::from_millis(50).min(next - Instant::now()));
        }
        let t = start.elapsed().as_secs_f64();
        samples.push((t, engine.stats()));
        next += Duration::from_secs(1);
        if plan.progress {
            let d = done.load(Relaxed);
            let line = progress_line(&plan.name, d, total, t, plan.duration);
            if tty {
                eprint!("\r\x1b[2K{line}");
                let _ = std::io::stderr().flush();
            } else if last_line.elapsed() >= Duration::from_secs(10) {
                eprintln!("{line}");
                last_line = Instant::now();
            }
        }
    }
}

/// One line of the progress bar: name, bar, done/total, elapsed, rate and ETA.
pub fn progress_line(
    name: &str,
    done: u64,
    total: u64,
    elapsed: f64,
    duration: Option<Duration>,
) -> String {
    let frac_ops = if total > 0 {
        done as f64 / total as f64
    } else {
        0.0
    };
    let frac_time = duration.map_or(0.0, |d| elapsed / d.as_secs_f64().max(1e-9));
    let frac = frac_ops.max(frac_time).clamp(0.0, 1.0);
    let width = 30;
    let filled = (frac * width as f64).round() as usize;
    let rate = if elapsed > 0.0 {
        done as f64 / elapsed
    } else {
        0.0
    };
    let eta = if frac > 0.0 {
        elapsed * (1.0 - frac) / frac
    } else {
        0.0
    };
    format!(
        "{name:<12} [{}{}] {done}/{total} {elapsed:.0}s {rate:.0} ops/s ETA {eta:.0}s",
        "#".repeat(filled),
        "-".repeat(width - filled)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacing_waits_until_the_due_time_without_oversleeping() {
        precise_timers();
        for (us, yield_pacer) in [0u64, 40, 500, 2000]
            .into_iter()
            .flat_map(|us| [(us, false), (us, true)])
        {
            let due = Instant::now() + Duration::from_micros(us);
            wait_until(due, yield_pacer);
            let late = Instant::now().saturating_duration_since(due);
            assert!(Instant::now() >= due);
            // With 1 ns of timer slack a sleep is late by the wakeup latency only; the bound is
            // for a loaded 2-core CI machine, where a woken thread may wait tens of ms for a CPU
            // (this checks the pacer never oversleeps by design, not the scheduler).
            assert!(late < Duration::from_millis(250), "{late:?}");
        }
    }

    #[test]
    fn progress_line_shows_fraction_and_eta() {
        let l = progress_line("fillrandom", 50, 100, 10.0, None);
        assert!(l.contains("[###############---------------]"), "{l}");
        assert!(l.contains("50/100"));
        assert!(l.contains("ETA 10s"));
        let d = progress_line("ycsba", 0, 0, 5.0, Some(Duration::from_secs(10)));
        assert!(d.contains("ETA 5s"), "{d}");
    }
}
