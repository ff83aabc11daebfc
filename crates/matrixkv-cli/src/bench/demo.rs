//! `matrixkv demo`: random writes then random reads on a fresh database, summarized in a few
//! lines a newcomer reads (`--verbose` adds bench's full output), then deleted.
//!
//! The fast tier goes under /dev/shm, which a container may cap at 64 MiB (Docker's default).
//! The demo reads the room there first (`statvfs`) and takes the largest of its sizes whose
//! fast-tier need ([`matrixkv::Options::fast_tier_bytes`], the engine's own estimate) fits;
//! when even the smallest does not, or there is no /dev/shm, the fast tier goes into a
//! folder beside the slow tier on the local disk. Either change is said in one line.

use std::path::{Path, PathBuf};

use anyhow::Result;

use super::BenchArgs;
use super::engine::{Placement, matrixkv_options};
use super::metrics::BenchResult;

/// The slow tier's base directory (the engine's is `<DB>/matrixkv`).
const DB: &str = "bench-data/demo";
/// The fast tier's base directory when /dev/shm has too little room.
const LOCAL_FAST: &str = "bench-data/demo-fast";
/// Where the fast tier goes when there is room.
const SHM: &str = "/dev/shm";

/// The sizes the demo tries, largest first: matrix container and memtable bytes.
const SIZES: [(u64, u64); 3] = [
    (64 << 20, 16 << 20),
    (32 << 20, 8 << 20),
    (16 << 20, 4 << 20),
];

fn mib(b: u64) -> f64 {
    b as f64 / f64::from(1u32 << 20)
}

/// The bench arguments of the demo at one size, with its fast tier's base at `fast` (`None`:
/// bench's default under /dev/shm).
fn words(
    num: u64,
    value_size: usize,
    (container, memtable): (u64, u64),
    fast: Option<&Path>,
    verbose: bool,
) -> Vec<String> {
    let mut w = vec![
        "bench".to_owned(),
        "--benchmarks=fillrandom,readrandom".to_owned(),
        format!("--num={num}"),
        format!("--reads={}", num / 2),
        format!("--value_size={value_size}"),
        format!("--db={DB}"),
        format!("--write_buffer_size={memtable}"),
        format!("--target_file_size_base={memtable}"),
        format!("--max_bytes_for_level_base={container}"),
        // A container this small shows role switches and column compactions.
        format!("--container_bytes={container}"),
        format!("--column_lower_bytes={}", container / 8),
        format!("--column_upper_bytes={}", container / 4),
        "--no_results_dir".to_owned(),
    ];
    if let Some(f) = fast {
        w.push(format!("--fast_dir={}", f.display()));
    }
    if !verbose {
        w.push("--quiet".to_owned());
    }
    w
}

/// Bytes the demo at `size` takes on its fast tier: the engine's estimate with a margin for
/// the small files (LOCK, IDENTITY) and the file system's own blocks.
fn fast_need(num: u64, value_size: usize, size: (u64, u64)) -> Result<u64> {
    let a = BenchArgs::parse_words(words(num, value_size, size, None, false))?;
    let place = Placement {
        fast_dir: PathBuf::from(SHM),
        slow_dir: PathBuf::from(DB),
    };
    let need = matrixkv_options(&a, &place)?.fast_tier_bytes();
    Ok(need + need / 16 + (1 << 20))
}

/// Free bytes of the file system holding the directory `dir`, `None` when there is no such
/// directory or this process cannot create files in it.
pub fn free_bytes(dir: &Path) -> Option<u64> {
    use nix::unistd::{AccessFlags, access};
    access(dir, AccessFlags::W_OK | AccessFlags::X_OK).ok()?;
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    // (`fsblkcnt_t` and `c_ulong` are both 64 bits on the platforms matrixkv builds on.)
    Some((s.blocks_available() as u64).saturating_mul(s.fragment_size() as u64))
}

/// Where the demo puts its fast tier, at which size, and the line that says so when it is not
/// the usual.
struct Plan {
    size: (u64, u64),
    /// The fast tier's base directory when not bench's default under /dev/shm.
    local: Option<PathBuf>,
    note: Option<String>,
}

/// Chooses the demo's size and fast tier from `free`, the bytes free under /dev/shm.
fn plan(num: u64, value_size: usize, free: Option<u64>) -> Result<Plan> {
    let usual = fast_need(num, value_size, SIZES[0])?;
    for (i, size) in SIZES.into_iter().enumerate() {
        let need = fast_need(num, value_size, size)?;
        if free.is_some_and(|f| f >= need) {
            let note = (i > 0).then(|| {
                format!(
                    "{SHM} has {:.0} MiB free, less than the {:.0} MiB the demo's usual sizes \
                     take: it runs with a {:.0} MiB matrix container and {:.0} MiB memtables",
                    mib(free.unwrap_or_default()),
                    mib(usual),
                    mib(size.0),
                    mib(size.1)
                )
            });
            return Ok(Plan {
                size,
                local: None,
                note,
            });
        }
    }
    let smallest = fast_need(num, value_size, SIZES[SIZES.len() - 1])?;
    let why = match free {
        Some(f) => format!(
            "{SHM} has only {:.0} MiB free (the demo needs at least {:.0} MiB there)",
            mib(f),
            mib(smallest)
        ),
        None => format!("there is no {SHM} this process can write to"),
    };
    Ok(Plan {
        size: SIZES[0],
        local: Some(PathBuf::from(LOCAL_FAST)),
        note: Some(format!(
            "{why}: the fast tier goes into {LOCAL_FAST} on this disk instead of memory"
        )),
    })
}

/// Runs the demo: `num` random writes of `value_size`-byte values, then `num / 2` random reads.
#[allow(clippy::print_stdout)]
pub fn run(num: u64, value_size: usize, verbose: bool) -> Result<()> {
    let plan = plan(num, value_size, free_bytes(Path::new(SHM)))?;
    if let Some(note) = &plan.note {
        println!("{note}");
    }
    let a = BenchArgs::parse_words(words(
        num,
        value_size,
        plan.size,
        plan.local.as_deref(),
        verbose,
    ))?;
    let fast_base = plan
        .local
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("{SHM}/matrixkv-bench-{}", std::process::id())));
    let run = super::run_benchmarks(&a);
    if let Some(local) = &plan.local {
        // Bench removes the engine's directory in it; the base is the demo's own.
        let _ = std::fs::remove_dir(local);
    }
    // And `bench-data` when the demo made it (only an empty directory is removed).
    let _ = std::fs::remove_dir("bench-data");
    let (results, _) = run?;
    if verbose {
        println!();
    }
    print!(
        "{}",
        summary(&results, num, value_size, plan.size.0, &fast_base)
    );
    Ok(())
}

/// The levels as a newcomer reads them: level 0 is the matrix container's rows.
fn levels_line(levels: &[(u64, u64)]) -> String {
    let parts: Vec<String> = levels
        .iter()
        .enumerate()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(i, (n, b))| match i {
            0 => format!("level 0 has {n} rows in the container ({:.1} MiB)", mib(*b)),
            _ => format!("level {i} has {n} tables ({:.1} MiB)", mib(*b)),
        })
        .collect();
    if parts.is_empty() {
        "every write is still in the memtables (and the log)".to_owned()
    } else {
        parts.join(", ")
    }
}

/// The demo's few lines: what ran, how fast, where the data went, what is left.
fn summary(
    results: &[BenchResult],
    num: u64,
    value_size: usize,
    container: u64,
    fast_base: &Path,
) -> String {
    let mut out = format!(
        "matrixkv demo: {num} writes of random keys with {value_size}-byte values, then {} \
         reads of random keys\n",
        num / 2
    );
    let us = |x: f64| {
        if x >= 1000.0 {
            format!("{:.1} ms", x / 1000.0)
        } else {
            format!("{x:.1} µs")
        }
    };
    let find = |name: &str| results.iter().find(|r| r.benchmark == name);
    if let Some(w) = find("fillrandom") {
        out.push_str(&format!(
            "  writes: {:.2} s, {:.0} per second ({:.1} MiB/s); half took under {}, 99% under {}\n",
            w.seconds,
            w.ops_per_sec(),
            w.mb_per_sec(),
            us(w.latency.p50),
            us(w.latency.p99)
        ));
    }
    if let Some(r) = find("readrandom") {
        let found = r
            .found
            .map(|f| {
                format!(
                    "; {f} of the keys read were there (random writes repeat some keys and \
                     miss others)"
                )
            })
            .unwrap_or_default();
        out.push_str(&format!(
            "  reads:  {:.2} s, {:.0} per second; half took under {}, 99% under {}{found}\n",
            r.seconds,
            r.ops_per_sec(),
            us(r.latency.p50),
            us(r.latency.p99)
        ));
    }
    out.push_str(&format!(
        "  fast tier {}: the write-ahead log and level 0, in a {:.0} MiB matrix container\n",
        fast_base.join("matrixkv").display(),
        mib(container)
    ));
    out.push_str(&format!(
        "  slow tier {DB}/matrixkv: the SSTables of levels 1 and below\n"
    ));
    if let Some(last) = results.last() {
        out.push_str(&format!("  at the end: {}\n", levels_line(&last.levels)));
        if let (Some(fast), Some(slow)) = (last.fast_dir_bytes, last.slow_dir_bytes) {
            out.push_str(&format!(
                "  on the tiers: {:.1} MiB on the fast one (the container is allocated \
                 whole), {:.1} MiB on the slow one (SSTables, and blob files holding the \
                 large values)\n",
                mib(fast),
                mib(slow)
            ));
        }
    }
    if let Some(wa) = find("fillrandom").and_then(BenchResult::total_write_amplification) {
        out.push_str(&format!(
            "  the writes put {wa:.1} bytes on the two tiers per byte of keys and values (write \
             amplification: the log, level 0, compactions)\n"
        ));
    }
    out.push_str(
        "The database was deleted. `matrixkv demo --verbose` adds the engine's detail; \
         `matrixkv bench --help` runs workloads of your own.\n",
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_follows_the_room_and_a_tiny_tier_falls_back_to_the_disk() {
        let usual = fast_need(1000, 100, SIZES[0]).unwrap();
        let p = plan(1000, 100, Some(usual)).unwrap();
        assert_eq!(
            (p.size, p.local.is_none(), p.note.is_none()),
            (SIZES[0], true, true)
        );
        // Docker's default /dev/shm.
        let p = plan(1000, 100, Some(64 << 20)).unwrap();
        assert!(p.local.is_none());
        assert!(p.size.0 < SIZES[0].0);
        assert!(fast_need(1000, 100, p.size).unwrap() <= 64 << 20);
        assert!(p.note.unwrap().contains("64 MiB free"));
        let p = plan(1000, 100, Some(8 << 20)).unwrap();
        assert_eq!(p.local, Some(PathBuf::from(LOCAL_FAST)));
        assert!(p.note.unwrap().contains("on this disk"));
        let p = plan(1000, 100, None).unwrap();
        assert!(p.note.unwrap().contains("no /dev/shm"));
        // A directory that exists and one that does not.
        let t = tempfile::tempdir().unwrap();
        assert!(free_bytes(t.path()).is_some_and(|b| b > 0));
        assert_eq!(free_bytes(&t.path().join("gone")), None);
    }
}
