//! A db_bench-style benchmark: db_bench's benchmark names, flags and summary line, plus the
//! latency percentiles, per-second throughput windows, stall time and write amplification
//! defined in BENCHMARKS.md.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use hdrhistogram::Histogram;
use matrixkv::{Compression, Db, Options, WriteOptions};

/// Arguments of `matrixkv bench` (names follow db_bench).
#[derive(clap::Args, Debug, Clone)]
pub struct BenchArgs {
    /// Comma-separated benchmarks: fillrandom, fillseq, overwrite, readrandom, readseq,
    /// seekrandom.
    #[arg(long, default_value = "fillrandom,readrandom")]
    pub benchmarks: String,
    /// Number of key-value pairs written.
    #[arg(long, default_value_t = 1_000_000)]
    pub num: u64,
    /// Number of reads (default: num).
    #[arg(long)]
    pub reads: Option<u64>,
    /// Key size in bytes.
    #[arg(long, default_value_t = 16)]
    pub key_size: usize,
    /// Value size in bytes.
    #[arg(long, default_value_t = 4096)]
    pub value_size: usize,
    /// Random seed.
    #[arg(long, default_value_t = 301)]
    pub seed: u64,
    /// Database directory (slow tier in `<db>/slow`). Default: ./bench-data/db.
    #[arg(long)]
    pub db: Option<PathBuf>,
    /// Fast-tier directory. Default: /dev/shm/matrixkv-bench-<pid>.
    #[arg(long)]
    pub fast_dir: Option<PathBuf>,
    /// Memtable size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub write_buffer_size: usize,
    /// Maximum number of memtables.
    #[arg(long, default_value_t = 2)]
    pub max_write_buffer_number: usize,
    /// SSTable target size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    pub target_file_size_base: u64,
    /// L1 target size in bytes.
    #[arg(long, default_value_t = 256 << 20)]
    pub max_bytes_for_level_base: u64,
    /// Compression: none, lz4, zstd.
    #[arg(long, default_value = "none")]
    pub compression_type: String,
    /// Sync every write.
    #[arg(long, default_value_t = false)]
    pub sync: bool,
    /// Keep the database after the run (default: delete it).
    #[arg(long, default_value_t = false)]
    pub use_existing_db: bool,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // splitmix64
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }
}

/// db_bench's key format: the number, zero-padded to `key_size` digits.
fn make_key(k: u64, key_size: usize) -> Vec<u8> {
    let s = format!("{k:0width$}", width = key_size);
    let b = s.into_bytes();
    let start = b.len().saturating_sub(key_size);
    b.get(start..).unwrap_or(&b).to_vec()
}

/// Random value bytes, sliced from a pregenerated buffer (as db_bench's RandomGenerator).
struct ValueGen {
    data: Vec<u8>,
    pos: usize,
}

impl ValueGen {
    fn new(seed: u64) -> ValueGen {
        let mut r = Rng(seed);
        let data = (0..(1 << 20) + 65536)
            .map(|_| (r.next() & 0xff) as u8)
            .collect();
        ValueGen { data, pos: 0 }
    }

    fn next(&mut self, len: usize) -> &[u8] {
        if self.pos + len > self.data.len() {
            self.pos = 0;
        }
        let len = len.min(self.data.len());
        let s = self.data.get(self.pos..self.pos + len).unwrap_or(&[]);
        self.pos += len;
        s
    }
}

/// What one benchmark measured.
struct Outcome {
    name: String,
    ops: u64,
    bytes: u64,
    elapsed: Duration,
    hist: Histogram<u64>,
    per_second: Vec<u64>,
    found: Option<u64>,
}

impl Outcome {
    #[allow(clippy::print_stdout)]
    fn report(&self) {
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        let ops_s = self.ops as f64 / secs;
        let micros_op = secs * 1e6 / (self.ops.max(1) as f64);
        let mb_s = self.bytes as f64 / (1u64 << 20) as f64 / secs;
        let extra = self
            .found
            .map(|f| format!(" ({f} of {} found)", self.ops))
            .unwrap_or_default();
        println!(
            "{:<12} : {:>11.3} micros/op {} ops/sec {:.3} seconds {} operations; {:>6.1} MB/s{extra}",
            self.name, micros_op, ops_s as u64, secs, self.ops, mb_s
        );
        let p = |q: f64| self.hist.value_at_quantile(q) as f64 / 1000.0;
        println!(
            "  latency us: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  p99.99 {:.1}  max {:.1}",
            p(0.5),
            p(0.99),
            p(0.999),
            p(0.9999),
            self.hist.max() as f64 / 1000.0
        );
        if self.per_second.len() >= 2 {
            let mean = self.ops as f64 / secs;
            let full: &[u64] = self.per_second.split_last().map_or(&[], |(_, r)| r);
            let below = |frac: f64| full.iter().filter(|&&w| (w as f64) < frac * mean).count();
            println!(
                "  per-second windows: {} (last partial excluded); below 10% of mean: {}; below 50%: {}",
                full.len(),
                below(0.1),
                below(0.5)
            );
        }
    }
}

fn new_hist() -> Result<Histogram<u64>> {
    Histogram::<u64>::new_with_bounds(1, 600_000_000_000, 3).context("histogram")
}

fn timed<F: FnMut(u64) -> Result<Option<bool>>>(
    name: &str,
    ops: u64,
    bytes_per_op: u64,
    mut op: F,
) -> Result<Outcome> {
    let mut hist = new_hist()?;
    let mut per_second = Vec::new();
    let start = Instant::now();
    let mut window_start = start;
    let mut window_ops = 0u64;
    let mut found = 0u64;
    let mut any_found = false;
    for i in 0..ops {
        let t = Instant::now();
        if let Some(f) = op(i)? {
            any_found = true;
            found += u64::from(f);
        }
        let now = Instant::now();
        hist.saturating_record(
            u64::try_from((now - t).as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
        );
        window_ops += 1;
        if now - window_start >= Duration::from_secs(1) {
            per_second.push(window_ops);
            window_ops = 0;
            window_start += Duration::from_secs(1);
        }
    }
    per_second.push(window_ops);
    Ok(Outcome {
        name: name.to_owned(),
        ops,
        bytes: ops * bytes_per_op,
        elapsed: start.elapsed(),
        hist,
        per_second,
        found: any_found.then_some(found),
    })
}

fn run_one(
    index: u64,
    name: &str,
    db: &Db,
    a: &BenchArgs,
    values: &mut ValueGen,
) -> Result<Outcome> {
    // Each benchmark of a run draws its own key sequence (as db_bench does), so readrandom
    // after fillrandom finds ~63% of the keys, not the ones just written in the same order.
    let mut rng = Rng(a.seed ^ 0x5eed ^ (index + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let wo = WriteOptions { sync: a.sync };
    let kv = (a.key_size + a.value_size) as u64;
    let reads = a.reads.unwrap_or(a.num);
    match name {
        "fillrandom" | "overwrite" => timed(name, a.num, kv, |_| {
            let k = make_key(rng.below(a.num), a.key_size);
            db.put_opt(&k, values.next(a.value_size), &wo)?;
            Ok(None)
        }),
        "fillseq" => timed(name, a.num, kv, |i| {
            db.put_opt(make_key(i, a.key_size), values.next(a.value_size), &wo)?;
            Ok(None)
        }),
        "readrandom" => timed(name, reads, kv, |_| {
            let k = make_key(rng.below(a.num), a.key_size);
            Ok(Some(db.get(&k)?.is_some()))
        }),
        "seekrandom" => timed(name, reads, kv, |_| {
            let k = make_key(rng.below(a.num), a.key_size);
            let mut it = db.iter()?;
            it.seek(&k)?;
            Ok(Some(it.valid() && it.key() == k.as_slice()))
        }),
        "readseq" => {
            let mut it = db.iter()?;
            it.seek_to_first()?;
            timed(name, reads, kv, |_| {
                if !it.valid() {
                    it.seek_to_first()?;
                }
                let ok = it.valid();
                if ok {
                    it.next()?;
                }
                Ok(Some(ok))
            })
        }
        other => bail!("unknown benchmark `{other}`"),
    }
}

/// Runs `matrixkv bench`.
#[allow(clippy::print_stdout)]
pub fn run(a: &BenchArgs) -> Result<()> {
    let db_dir =
        a.db.clone()
            .unwrap_or_else(|| PathBuf::from("bench-data/db"));
    let fast_dir = a.fast_dir.clone().unwrap_or_else(|| {
        PathBuf::from(format!("/dev/shm/matrixkv-bench-{}", std::process::id()))
    });
    if !a.use_existing_db {
        let _ = std::fs::remove_dir_all(&db_dir);
        let _ = std::fs::remove_dir_all(&fast_dir);
    }
    let mut o = Options::new(&db_dir);
    o.fast_dir = fast_dir.clone();
    o.write_buffer_bytes = a.write_buffer_size;
    o.max_write_buffers = a.max_write_buffer_number;
    o.target_file_bytes = a.target_file_size_base;
    o.l1_target_bytes = a.max_bytes_for_level_base;
    o.table.compression = a
        .compression_type
        .parse::<Compression>()
        .map_err(anyhow::Error::msg)?;
    println!(
        "matrixkv bench: keys {} B, values {} B, {} entries",
        a.key_size, a.value_size, a.num
    );
    println!(
        "  fast tier {} | slow tier {}",
        fast_dir.display(),
        o.slow_dir.display()
    );
    let db = Db::open(o)?;
    let mut values = ValueGen::new(a.seed);
    for (index, name) in a
        .benchmarks
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .enumerate()
    {
        let before = db.stats();
        let out = run_one(index as u64, name, &db, a, &mut values)?;
        out.report();
        let after = db.stats();
        let stall = after.stall_micros() - before.stall_micros();
        if after.user_bytes > before.user_bytes {
            println!(
                "  stall {:.3} s ({} stalls); slow-tier WA so far {:.2}; fast tier written {:.1} MiB",
                stall as f64 / 1e6,
                after.stalls - before.stalls,
                after.write_amplification(),
                (after.wal_bytes + after.fast_sst_bytes_written) as f64 / (1u64 << 20) as f64
            );
        }
    }
    println!("--- stats ---\n{}", db.stats());
    db.close()?;
    if !a.use_existing_db {
        let _ = std::fs::remove_dir_all(&db_dir);
        let _ = std::fs::remove_dir_all(&fast_dir);
    }
    Ok(())
}

/// `matrixkv demo`: fillrandom then readrandom on the embedded default placement.
pub fn demo(num: u64, value_size: usize) -> Result<()> {
    let args = BenchArgs {
        benchmarks: "fillrandom,readrandom".to_owned(),
        num,
        reads: Some(num / 2),
        key_size: 16,
        value_size,
        seed: 301,
        db: Some(PathBuf::from("bench-data/demo")),
        fast_dir: None,
        write_buffer_size: 16 << 20,
        max_write_buffer_number: 2,
        target_file_size_base: 16 << 20,
        max_bytes_for_level_base: 64 << 20,
        compression_type: "none".to_owned(),
        sync: false,
        use_existing_db: false,
    };
    run(&args)
}
