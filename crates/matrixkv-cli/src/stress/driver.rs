//! The crash driver (RocksDB `db_crashtest.py` blackbox): runs `matrixkv stress` on one
//! database as a child process, kills it with SIGKILL after a random time, and starts the
//! next child with a new seed (so freshly drawn options, the fixed ones kept in
//! `stress.meta`). Each child verifies every key against the expected state when it opens
//! (contract C1: every acknowledged write survives a process crash, synced or not), and a
//! last child only verifies. A child that exits by itself before its kill failed.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::StressArgs;
use super::rng::Rng;

/// Runs `args.cycles` kill cycles on `args.db`.
pub fn run(args: &StressArgs, seed: u64) -> Result<()> {
    let mut rng = Rng::new(seed);
    println!(
        "stress --crash: seed={seed} db={} cycles={}",
        args.db.display(),
        args.cycles
    );
    for cycle in 0..args.cycles {
        let child_seed = rng.next_u64() >> 1;
        let run_ms = rng.range(args.min_run_ms, args.max_run_ms.max(args.min_run_ms));
        println!(
            "stress --crash: cycle {cycle}: child seed {child_seed}, kill after {run_ms} ms \
             (replay this child: matrixkv stress --db {} --seed {child_seed}, on a copy of the \
             database as the cycle found it)",
            args.db.display()
        );
        let mut child = spawn(args, child_seed, false)?;
        let deadline = Instant::now() + Duration::from_millis(run_ms);
        while Instant::now() < deadline {
            if let Some(status) = child.try_wait()? {
                bail!(
                    "stress --crash: seed {seed} cycle {cycle}: the child (seed {child_seed}) \
                     exited by itself with {status} before its kill"
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        child.kill().context("SIGKILL the child")?;
        let status = child.wait()?;
        println!("stress --crash: cycle {cycle}: killed ({status})");
    }
    let final_seed = rng.next_u64() >> 1;
    println!("stress --crash: final verification (seed {final_seed})");
    let status = spawn(args, final_seed, true)?.wait()?;
    if !status.success() {
        bail!("stress --crash: seed {seed}: the final verification failed ({status})");
    }
    println!("stress --crash: seed {seed}: {} cycles passed", args.cycles);
    Ok(())
}

/// Starts `matrixkv stress` on `args.db` with `seed`.
fn spawn(args: &StressArgs, seed: u64, verify_only: bool) -> Result<Child> {
    let exe = std::env::current_exe().context("the matrixkv binary")?;
    let mut cmd = Command::new(exe);
    cmd.arg("stress")
        .arg("--db")
        .arg(&args.db)
        .arg("--seed")
        .arg(seed.to_string())
        .arg("--threads")
        .arg(args.threads.to_string())
        .arg("--keys")
        .arg(args.keys.to_string())
        // The driver kills it long before.
        .arg("--duration-secs")
        .arg("100000");
    if let Some(d) = &args.design {
        cmd.arg("--design").arg(d);
    }
    if args.checkpoints {
        cmd.arg("--checkpoints");
    }
    if verify_only {
        cmd.arg("--verify-only");
    }
    cmd.spawn().context("start the stress child")
}
