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

use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use matrixkv::Tiers;
use matrixkv::tier::{CrashPolicy, FsCrashMode, MemFs, SimFastTier};

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
        let h = super::open(
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
        println!(
            "stress --power-loss: cycle {cycle}: power cut after {run_ms} ms ({mode:?}, {policy:?})"
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
        let ops = history
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .ops
            })
            .unwrap_or_default();
        cut = Some(Cut {
            start,
            ops,
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

/// Checks that the database holds the state after the first `k` writes of `c` for some
/// `k >= c.durable`; returns the smallest such `k` and that state.
fn check_prefix(h: &Harness, c: &Cut) -> Result<(usize, Vec<Val>)> {
    let sp = &h.space;
    let got = read_all(h)?;
    let mut state = c.start.clone();
    let ok = |state: &[Val], s: usize| sp.matches(s, state[s], got[s].as_deref());
    let mut bad: usize = (0..sp.slots()).filter(|&s| !ok(&state, s)).count();
    let mut best = (bad, 0);
    for k in 0..=c.len.min(c.ops.len()) {
        if k >= c.durable && bad == 0 {
            return Ok((k, state));
        }
        if k > 0 && bad < best.0 && k >= c.durable {
            best = (bad, k);
        }
        let Some(op) = c.ops.get(k) else { break };
        for &(s, v) in op {
            bad -= usize::from(!ok(&state, s));
            state[s] = v;
            bad += usize::from(!ok(&state, s));
        }
    }
    let mut state = c.start.clone();
    for op in c.ops.iter().take(best.1) {
        for &(s, v) in op {
            state[s] = v;
        }
    }
    let examples: Vec<String> = (0..sp.slots())
        .filter(|&s| !ok(&state, s))
        .take(5)
        .map(|s| describe(sp, s, state[s], got[s].as_deref(), c))
        .collect();
    bail!(
        "the recovered database is no prefix of the {} writes with at least the {} durable ones; \
         closest: the first {} writes, {} keys differ, e.g. {}",
        c.len,
        c.durable,
        best.1,
        best.0,
        examples.join("; ")
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
