//! The stress harness in CI (docs/reliability.md, "The stress harness"): a few short runs of
//! `matrixkv stress` with random options (seeds drawn per test run and printed, so a failure
//! replays), a kill -9 crash loop, and, with the `stress-sim` feature, a power-loss loop. About
//! two minutes in a debug build on two cores.

use std::path::Path;
use std::process::Command;

/// A seed for this test run: `MATRIXKV_STRESS_SEED` if set (to replay), else the time.
fn seed() -> u64 {
    std::env::var("MATRIXKV_STRESS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_007)
        })
}

/// Runs `matrixkv stress` with `args` on a database under `dir`; fails with its output.
fn stress(dir: &Path, args: &[&str]) {
    let db = dir.join("db");
    let out = Command::new(env!("CARGO_BIN_EXE_matrixkv"))
        .arg("stress")
        .arg("--db")
        .arg(&db)
        .args(args)
        .output()
        .expect("run matrixkv stress");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    println!("{text}");
    assert!(
        out.status.success(),
        "matrixkv stress {args:?} failed ({}); replay with MATRIXKV_STRESS_SEED or the seed \
         printed above:\n{text}",
        out.status
    );
}

#[test]
fn random_configurations_pass_with_eight_threads_and_checkpoints() {
    let base = seed();
    // Two designs drawn by the seed, then the single-level designs, whose code differs most.
    for (i, design) in [None, None, Some("slmdb"), Some("lightkv")]
        .iter()
        .enumerate()
    {
        let seed = (base + i as u64).to_string();
        println!("stress: run {i}: seed {seed}, design {design:?}");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut args = vec![
            "--seed",
            &seed,
            "--threads",
            "8",
            "--keys",
            "400",
            "--duration-secs",
            "6",
            "--checkpoints",
        ];
        if let Some(d) = design {
            args.extend(["--design", d]);
        }
        stress(dir.path(), &args);
    }
}

#[test]
fn kill_9_cycles_lose_no_acknowledged_write() {
    let seed = seed().to_string();
    println!("stress --crash: seed {seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    stress(
        dir.path(),
        &[
            "--crash",
            "--seed",
            &seed,
            "--cycles",
            "4",
            "--threads",
            "8",
            "--keys",
            "400",
            "--min-run-ms",
            "1500",
            "--max-run-ms",
            "5000",
        ],
    );
}

#[cfg(feature = "stress-sim")]
#[test]
fn power_loss_cycles_keep_synced_writes_and_a_prefix() {
    let seed = seed().to_string();
    println!("stress --power-loss: seed {seed}");
    let dir = tempfile::tempdir().expect("tempdir");
    stress(
        dir.path(),
        &[
            "--power-loss",
            "--seed",
            &seed,
            "--cycles",
            "4",
            "--threads",
            "8",
            "--keys",
            "300",
            "--min-run-ms",
            "500",
            "--max-run-ms",
            "3000",
        ],
    );
}
