//! The power-loss driver (feature `stress-sim`): the stress threads run in this process on
//! the engine's simulated tiers (`MemFs` for both directories' files, `SimFastTier` for the
//! mapped regions); after a random time the tiers are imaged as a power loss would leave
//! them (unsynced file data dropped, cut, garbled or zeroed; unpersisted fast-tier words
//! dropped), and the database is reopened on the image with freshly drawn options.
//!
//! Writes are serialized in this mode and recorded in order ([`History`]), so the check is
//! exact (contracts C2 and C3): the recovered database must equal the state after the first
//! `k` writes for one `k` at least the number of writes durable at the cut (a sync write or
//! `sync_wal` acknowledged after them): synced writes survive, and the unsynced ones are
//! lost only as a suffix, with no hole.
//!
//! One cycle in three also injects a failed sync before the cut ([`SyncFault`]): a file
//! sync that fails once and loses the unsynced data it covered, or fast-tier persists that
//! fail from some point on. Writes refused after it stay in flight (applied or not, in their
//! place in the order); everything durable before it must survive the cut.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use matrixkv::Tiers;
use matrixkv::tier::{CrashPolicy, Fault, FaultKind, FaultOp, FsCrashMode, MemFs, SimFastTier};

use super::StressArgs;
use super::expected::ExpectedState;
use super::harness::{Harness, History};
use super::options::{self, Fixed};
use super::rng::Rng;
use super::values::{Space, Val};
use super::verify::scan;

const MODES: [FsCrashMode; 5] = [
    FsCrashMode::DropUnsynced,
    FsCrashMode::RandomTail,
    FsCrashMode::GarbageTail,
    FsCrashMode::ZeroTail,
    FsCrashMode::RandomBlocks,
];

/// What a cycle leaves for the next one to check: the state it started from and its writes.
struct Cut {
    start: Vec<Val>,
    ops: Vec<Vec<(usize, Val)>>,
    /// The writes of `ops` that failed after the injected fault (applied or not).
    failed: std::collections::BTreeSet<usize>,
    durable: usize,
    len: usize,
}

/// Runs `args.cycles` power-loss cycles.
pub fn run(args: &StressArgs, seed: u64) -> Result<()> {
    let fixed = Fixed::draw(&mut Rng::fork(seed, 1), args.keys, args.design.as_deref());
    println!("stress --power-loss: seed={seed} fixed={fixed:?}");
    std::fs::create_dir_all(&args.db)?;
    let exp_path = args.db.join("stress.power.expected");
    let _ = std::fs::remove_file(&exp_path);
    let mut exp = ExpectedState::open(&exp_path, fixed.space().slots(), super::wall_ms())?;
    let mut fs = MemFs::new();
    let mut fast = SimFastTier::new(args.db.join("fast"));
    let mut cut: Option<Cut> = None;
    let mut rng = Rng::fork(seed, 3);
    for cycle in 0..args.cycles {
        let mut drawn = options::draw(
            &mut Rng::fork(seed, 100 + u64::from(cycle)),
            &fixed,
            &args.db,
        )?;
        println!(
            "stress --power-loss: cycle {cycle}: options {}",
            options::describe(&drawn)
        );
        drawn.options.tiers = Some(Tiers {
            slow_fs: Arc::new(fs.clone()),
            fast_fs: Arc::new(fs.clone()),
            fast: Arc::new(fast.clone()),
        });
        let mut h = super::open(
            &fixed,
            drawn,
            exp,
            Some(Mutex::new(History::default())),
            None,
        )
        .with_context(|| format!("seed {seed} cycle {cycle}: open after the power loss"))?;
        if let Some(c) = cut.take() {
            let (k, state) = check_prefix(&h, &c).with_context(|| {
                format!("stress --power-loss: seed {seed} cycle {cycle}: recovery")
            })?;
            // The expected state from here on: the recovered prefix.
            for (s, v) in state.into_iter().enumerate() {
                h.exp.commit(s, v)?;
            }
            println!(
                "stress --power-loss: cycle {cycle}: recovered the first {k} of {} writes ({} durable)",
                c.len, c.durable
            );
        }
        let n = super::verify::verify_and_settle(&h, rng.next_u64())?;
        println!("stress --power-loss: cycle {cycle}: verified {n} keys");
        let start: Vec<Val> = (0..h.space.slots()).map(|s| h.exp.committed(s)).collect();
        let run_ms = rng.range(args.min_run_ms, args.max_run_ms.max(args.min_run_ms));
        let mode = rng.pick(&MODES);
        let policy = if rng.one_in(2) {
            CrashPolicy::DropUnpersisted
        } else {
            CrashPolicy::Random {
                seed: rng.next_u64(),
            }
        };
        let image_seed = rng.next_u64();
        let fault = SyncFault::draw(&mut rng);
        h.fault_fired = fault.map(|f| f.inject(&fs, &fast));
        let (image, durable, len) = run_and_cut(
            &h,
            args.threads,
            seed ^ u64::from(cycle),
            run_ms,
            &fs,
            &fast,
            mode,
            policy,
            image_seed,
        );
        let fired = h.fault_fired.as_ref().is_some_and(|f| f());
        // Which thread's file sync failed (a writer's, a flush's, a compaction's).
        let on: Vec<String> = fs
            .take_traces()
            .into_iter()
            .filter(|t| t.failed)
            .map(|t| {
                let thread = t.thread.unwrap_or_else(|| "a stress thread".to_owned());
                format!("{thread} in {}", engine_frames(&t.backtrace))
            })
            .collect();
        println!(
            "stress --power-loss: cycle {cycle}: power cut after {run_ms} ms ({mode:?}, \
             {policy:?}; injected fault {fault:?}{}{})",
            if fired { ", fired" } else { "" },
            if on.is_empty() {
                String::new()
            } else {
                format!(" on {}", on.join(", "))
            }
        );
        super::report(&h);
        if let Some(f) = h.failure.lock().ok().and_then(|f| f.clone()) {
            bail!("stress --power-loss: seed {seed} cycle {cycle}: {f}");
        }
        let Harness {
            db,
            ks,
            history,
            exp: e,
            ..
        } = h;
        drop(ks);
        drop(db);
        let History { ops, failed, .. } = history
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .unwrap_or_default();
        cut = Some(Cut {
            start,
            ops,
            failed,
            durable,
            len,
        });
        exp = e;
        (fs, fast) = image;
    }
    println!(
        "stress --power-loss: seed {seed}: {} cycles passed",
        args.cycles
    );
    Ok(())
}

/// A failed sync injected into a cycle before its power cut (one cycle in three): the
/// unsynced data it covered is lost (the file system keeps it from ever reaching the disk, as
/// Linux does after a failed fsync), the database must fail that write and stop writing, and
/// after the cut every write durable before the failure must be there, the rest a prefix.
#[derive(Debug, Clone, Copy)]
enum SyncFault {
    /// The `after + 1`-th file sync (any file of either tier's file system) fails once with
    /// EIO.
    FileSync { after: u64 },
    /// Every fast-tier persist after the next `after` fails with EIO.
    FastPersist { after: u64 },
}

impl SyncFault {
    fn draw(rng: &mut Rng) -> Option<SyncFault> {
        if !rng.one_in(3) {
            return None;
        }
        Some(if rng.one_in(2) {
            SyncFault::FileSync {
                after: rng.below(64),
            }
        } else {
            SyncFault::FastPersist {
                after: rng.below(4096),
            }
        })
    }

    /// Injects the fault; returns a test of whether it has fired.
    fn inject(self, fs: &MemFs, fast: &SimFastTier) -> Box<dyn Fn() -> bool + Send + Sync> {
        match self {
            SyncFault::FileSync { after } => {
                fs.inject(
                    Fault::new(FaultOp::Sync, FaultKind::Eio)
                        .after(after)
                        .times(1),
                );
                let fs = fs.clone();
                Box::new(move || fs.faults_fired() > 0)
            }
            SyncFault::FastPersist { after } => {
                let plan = Arc::clone(fast.faults());
                let start = plan.op_counts().0;
                plan.fail_persist_after(Some(after));
                Box::new(move || plan.op_counts().0 > start + after)
            }
        }
    }
}

/// The engine's functions on `bt`, innermost first (where an injected fault hit).
fn engine_frames(bt: &std::backtrace::Backtrace) -> String {
    let text = format!("{bt}");
    let frames: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter_map(|l| l.split_once(": ").map(|(_, f)| f))
        .filter(|f| f.starts_with("matrixkv::") && !f.starts_with("matrixkv::tier::"))
        .take(4)
        .collect();
    frames.join(" < ")
}

/// Runs the threads for `run_ms`, then images the tiers while they run. Returns the image
/// and the durable and total write counts around it.
#[allow(clippy::too_many_arguments)]
fn run_and_cut(
    h: &Harness,
    threads: usize,
    seed: u64,
    run_ms: u64,
    fs: &MemFs,
    fast: &SimFastTier,
    mode: FsCrashMode,
    policy: CrashPolicy,
    image_seed: u64,
) -> ((MemFs, SimFastTier), usize, usize) {
    let history = |f: &dyn Fn(&History) -> usize| {
        h.history.as_ref().map_or(0, |m| {
            f(&m.lock().unwrap_or_else(std::sync::PoisonError::into_inner))
        })
    };
    let mut out = None;
    std::thread::scope(|s| {
        for id in 0..threads {
            s.spawn(move || super::ops::run_thread(h, id, seed));
        }
        std::thread::sleep(Duration::from_millis(run_ms));
        // Writes up to `durable` were durable before the cut began; none after `len` had
        // started when it ended.
        let durable = history(&|x| x.durable);
        let image = fs.crash_with(mode, image_seed, || fast.crash(policy));
        let len = history(&|x| x.ops.len());
        h.stop.store(true, std::sync::atomic::Ordering::Release);
        out = Some((image, durable, len));
    });
    out.unwrap_or_else(|| unreachable!("the scope sets it"))
}

/// The state after a prefix of a cycle's writes: per slot the value the last write gave it,
/// and the value of a later write that failed (after the injected fault), which the slot may
/// hold instead: a failed write may or may not have been applied.
struct Prefix<'a> {
    sp: &'a Space,
    got: &'a [Option<Vec<u8>>],
    state: Vec<Val>,
    maybe: Vec<Option<Val>>,
    /// Slots whose read neither value explains.
    bad: usize,
}

impl<'a> Prefix<'a> {
    fn new(sp: &'a Space, got: &'a [Option<Vec<u8>>], start: &[Val]) -> Prefix<'a> {
        let mut p = Prefix {
            sp,
            got,
            state: start.to_vec(),
            maybe: vec![None; start.len()],
            bad: 0,
        };
        p.bad = (0..start.len()).filter(|&s| !p.ok(s)).count();
        p
    }

    fn ok(&self, s: usize) -> bool {
        let explains = |v: Val| self.sp.matches(s, v, self.got[s].as_deref());
        explains(self.state[s]) || self.maybe[s].is_some_and(explains)
    }

    /// Applies write `op` (`failed`: it may or may not have been applied).
    fn apply(&mut self, op: &[(usize, Val)], failed: bool) {
        for &(s, v) in op {
            self.bad -= usize::from(!self.ok(s));
            if failed {
                self.maybe[s] = Some(v);
            } else {
                self.state[s] = v;
                self.maybe[s] = None;
            }
            self.bad += usize::from(!self.ok(s));
        }
    }

    /// The value each slot holds (the failed write's where the read shows it applied).
    fn settled(self) -> Vec<Val> {
        (0..self.state.len())
            .map(|s| match self.maybe[s] {
                Some(m) if !self.sp.matches(s, self.state[s], self.got[s].as_deref()) => m,
                _ => self.state[s],
            })
            .collect()
    }
}

/// Checks that the database holds the state after the first `k` writes of `c` for some
/// `k >= c.durable` (each failed write among them applied or not); returns the smallest such
/// `k` and that state.
fn check_prefix(h: &Harness, c: &Cut) -> Result<(usize, Vec<Val>)> {
    let sp = &h.space;
    let got = read_all(h)?;
    let mut p = Prefix::new(sp, &got, &c.start);
    let mut best = (p.bad, 0);
    // The closest prefix of any length, durable or not (tells a lost durable write from a
    // wrong value).
    let mut any = (p.bad, 0);
    for k in 0..=c.len.min(c.ops.len()) {
        if k >= c.durable && p.bad == 0 {
            return Ok((k, p.settled()));
        }
        if k > 0 && p.bad < best.0 && k >= c.durable {
            best = (p.bad, k);
        }
        if p.bad < any.0 {
            any = (p.bad, k);
        }
        let Some(op) = c.ops.get(k) else { break };
        p.apply(op, c.failed.contains(&k));
    }
    let mut p = Prefix::new(sp, &got, &c.start);
    for (k, op) in c.ops.iter().enumerate().take(best.1) {
        p.apply(op, c.failed.contains(&k));
    }
    let examples: Vec<String> = (0..sp.slots())
        .filter(|&s| !p.ok(s))
        .take(5)
        .map(|s| describe(sp, s, p.state[s], got[s].as_deref(), c))
        .collect();
    bail!(
        "the recovered database is no prefix of the {} writes with at least the {} durable ones \
         ({} failed after the injected fault); closest: the first {} writes, {} keys differ, \
         e.g. {} (closest of any length: the first {} writes, {} keys differ)",
        c.len,
        c.durable,
        c.failed.len(),
        best.1,
        best.0,
        examples.join("; "),
        any.1,
        any.0
    )
}

/// One differing key, with the last write to it.
fn describe(sp: &Space, s: usize, want: Val, got: Option<&[u8]>, c: &Cut) -> String {
    let last = c.ops.iter().rposition(|op| op.iter().any(|(x, _)| *x == s));
    format!(
        "keyspace {} key {}: read {}, expected base {:?} (last written by write {last:?})",
        sp.keyspace(s),
        String::from_utf8_lossy(&sp.key(s)),
        sp.describe(s, got),
        want.base()
    )
}

/// The value of every slot, by full scans (`verify_and_settle` cross-checks them by point
/// reads afterwards).
fn read_all(h: &Harness) -> Result<Vec<Option<Vec<u8>>>> {
    let sp = &h.space;
    let mut out = vec![None; sp.slots()];
    for (i, k) in h.ks.iter().enumerate() {
        let mut it = k.iter()?;
        for (key, v) in scan(&mut it, false, sp.keys)? {
            match sp.slot_of(i, &key) {
                Some(s) => out[s] = Some(v),
                None => bail!(
                    "keyspace {i}: unexpected key {}",
                    String::from_utf8_lossy(&key)
                ),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> Space {
        Space {
            keys: 10,
            filter: false,
        }
    }

    /// The state after the first `k` writes of `ops`, judged against `got`.
    fn bad_after(
        sp: &Space,
        got: &[Option<Vec<u8>>],
        ops: &[Vec<(usize, Val)>],
        failed: &[usize],
        k: usize,
    ) -> usize {
        let mut p = Prefix::new(sp, got, &vec![Val::ABSENT; sp.slots()]);
        for (i, op) in ops.iter().enumerate().take(k) {
            p.apply(op, failed.contains(&i));
        }
        p.bad
    }

    #[test]
    fn a_failed_write_may_be_missing_from_a_durable_prefix() {
        // Write 1 failed after the fault (not applied); write 2 was acknowledged and synced:
        // the prefix of three writes explains the database (regression: seed 7 reported
        // "no prefix" because the failed write counted as applied).
        let sp = space();
        let ops = vec![
            vec![(1, Val::of(10))],
            vec![(2, Val::of(20))],
            vec![(3, Val::of(30))],
        ];
        let mut got = vec![None; sp.slots()];
        got[1] = Some(sp.value(1, 10));
        got[3] = Some(sp.value(3, 30));
        assert_eq!(bad_after(&sp, &got, &ops, &[1], 3), 0);
        // Applied is fine too.
        got[2] = Some(sp.value(2, 20));
        assert_eq!(bad_after(&sp, &got, &ops, &[1], 3), 0);
        // A write that did not fail must be there.
        got[2] = None;
        assert_eq!(bad_after(&sp, &got, &ops, &[], 3), 1);
    }

    #[test]
    fn a_later_write_of_the_slot_replaces_a_failed_one() {
        let sp = space();
        let ops = vec![vec![(1, Val::of(10))], vec![(1, Val::of(11))]];
        let mut got = vec![None; sp.slots()];
        got[1] = Some(sp.value(1, 10));
        // Write 0 failed but write 1 (acknowledged) wrote the slot after it: the failed value
        // is no longer a possible answer.
        assert_eq!(bad_after(&sp, &got, &ops, &[0], 2), 1);
        got[1] = Some(sp.value(1, 11));
        assert_eq!(bad_after(&sp, &got, &ops, &[0], 2), 0);
    }
}
