//! Drawing a run's options at random (RocksDB `db_crashtest.py`'s `default_params`): the
//! parameters fixed when a database is created ([`Fixed`], kept in `stress.meta` beside the
//! database so later runs on it keep them) and those every run may change ([`Drawn`]).
//! Drawing loops until `Options::validate` accepts the result.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use matrixkv::{
    Compression, Design, KeyspaceOptions, L0Layout, LightKvOptions, NoveLsmOptions, Options,
    SlmDbOptions, XEngineOptions,
};

use super::rng::Rng;
use super::values::{DropFilter, KS1, Space};

/// Parameters of a database the engine or the harness fixes at creation.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixed {
    /// `matrixkv`, `xengine`, `novelsm`, `slmdb` or `lightkv`.
    pub design: String,
    /// `matrix` or `tables`.
    pub l0_layout: String,
    /// Matrix container bytes.
    pub container_bytes: u64,
    /// Matrix container page bytes.
    pub page_bytes: usize,
    /// Number of levels.
    pub num_levels: usize,
    /// Keys per keyspace.
    pub keys: usize,
    /// TTL of keyspace [`KS1`] in seconds (0: none).
    pub ks1_ttl_secs: u64,
    /// Keyspace [`KS1`] has the harness's compaction filter.
    pub ks1_filter: bool,
}

const DESIGNS: [&str; 5] = ["matrixkv", "xengine", "novelsm", "slmdb", "lightkv"];

impl Fixed {
    /// Draws the fixed parameters (`design` forces a design).
    pub fn draw(rng: &mut Rng, keys: usize, design: Option<&str>) -> Fixed {
        let design = design.map_or_else(|| rng.pick(&DESIGNS).to_owned(), str::to_owned);
        let tables = matches!(design.as_str(), "slmdb" | "lightkv") || rng.one_in(3);
        Fixed {
            design,
            l0_layout: if tables { "tables" } else { "matrix" }.to_owned(),
            container_bytes: rng.pick(&[4u64, 8, 16]) << 20,
            page_bytes: rng.pick(&[1024usize, 4096, 16384]),
            num_levels: usize::try_from(rng.range(3, 7)).unwrap_or(7),
            keys,
            ks1_ttl_secs: if rng.one_in(3) { rng.range(1, 5) } else { 0 },
            ks1_filter: rng.one_in(2),
        }
    }

    /// The value space of a database with these parameters.
    pub fn space(&self) -> Space {
        Space {
            keys: self.keys,
            filter: self.ks1_filter,
        }
    }

    /// Writes `path` (atomically: a temporary file renamed).
    pub fn save(&self, path: &Path) -> Result<()> {
        let text = format!(
            "design={}\nl0_layout={}\ncontainer_bytes={}\npage_bytes={}\nnum_levels={}\n\
             keys={}\nks1_ttl_secs={}\nks1_filter={}\n",
            self.design,
            self.l0_layout,
            self.container_bytes,
            self.page_bytes,
            self.num_levels,
            self.keys,
            self.ks1_ttl_secs,
            self.ks1_filter
        );
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    /// Reads `path`, if it exists.
    pub fn load(path: &Path) -> Result<Option<Fixed>> {
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).context(path.display().to_string()),
        };
        let field = |name: &str| -> Result<&str> {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
                .with_context(|| format!("{}: no {name}", path.display()))
        };
        Ok(Some(Fixed {
            design: field("design")?.to_owned(),
            l0_layout: field("l0_layout")?.to_owned(),
            container_bytes: field("container_bytes")?.parse()?,
            page_bytes: field("page_bytes")?.parse()?,
            num_levels: field("num_levels")?.parse()?,
            keys: field("keys")?.parse()?,
            ks1_ttl_secs: field("ks1_ttl_secs")?.parse()?,
            ks1_filter: field("ks1_filter")?.parse()?,
        }))
    }
}

/// The parameters of one run (one process, or one power-loss cycle).
#[derive(Debug, Clone)]
pub struct Drawn {
    /// One write in this many is a sync write (0: none).
    pub sync_one_in: u64,
    /// Weights of the four value size classes (0–16 B, –256 B, –4 KiB, –64 KiB).
    pub size_weights: [u64; 4],
    /// The engine options (without directories' contents: `Options::new(db)` plus these).
    pub options: Options,
}

/// Draws a run's options for a database with `fixed` at `db`. Loops until they validate.
pub fn draw(rng: &mut Rng, fixed: &Fixed, db: &Path) -> Result<Drawn> {
    for _ in 0..1000 {
        let o = draw_once(rng, fixed, db)?;
        if o.validate().is_ok() {
            let sync_one_in = rng.pick(&[0, 0, 0, 20, 100, 1]);
            let size_weights = [
                rng.range(1, 8),
                rng.range(0, 8),
                rng.range(0, 4),
                rng.pick(&[0, 0, 1, 2]),
            ];
            return Ok(Drawn {
                sync_one_in,
                size_weights,
                options: o,
            });
        }
    }
    bail!("no valid options drawn in 1000 tries for {fixed:?}")
}

fn draw_once(rng: &mut Rng, fixed: &Fixed, db: &Path) -> Result<Options> {
    let mut o = Options::new(db);
    o.design = design(rng, &fixed.design)?;
    o.l0_layout = fixed
        .l0_layout
        .parse::<L0Layout>()
        .map_err(anyhow::Error::msg)?;
    o.container_bytes = fixed.container_bytes;
    o.page_bytes = fixed.page_bytes;
    o.num_levels = fixed.num_levels;
    o.write_buffer_bytes = rng.pick(&[64usize, 128, 256, 512, 1024]) << 10;
    o.max_write_buffers = usize::try_from(rng.range(2, 4)).unwrap_or(2);
    o.memtable_filter_ratio = rng.pick(&[0.0, 1.0 / 64.0, 0.1]);
    o.min_blob_bytes = rng.pick(&[None, Some(0), Some(64), Some(1024), Some(8192)]);
    o.separate_at_flush = rng.one_in(2);
    o.separate_at_write = rng.one_in(2);
    o.separate_at_write_min_bytes = rng.pick(&[None, Some(512), Some(2048)]);
    o.blob_file_bytes = rng.pick(&[16u64, 64, 1024]) << 10;
    o.blob_gc_ratio = rng.pick(&[0.2, 0.5, 1.0]);
    o.blob_space_budget = rng.pick(&[1.1, 1.5, f64::INFINITY]);
    o.column_threads = usize::try_from(rng.range(1, 4)).unwrap_or(1);
    o.column_compaction = !rng.one_in(4);
    o.hints = !rng.one_in(4);
    o.receiver_switch_ratio = rng.pick(&[0.3, 0.6, 0.8]);
    o.container_slowdown_ratio = rng.pick(&[0.5, 0.7, 0.9]);
    if rng.one_in(2) {
        let lower = rng.pick(&[64u64, 128, 256]) << 10;
        o.column_lower_bytes = Some(lower);
        o.column_upper_bytes = Some(lower * rng.range(1, 4));
    }
    o.l0_compaction_trigger = usize::try_from(rng.range(1, 4)).unwrap_or(2);
    o.l0_slowdown_writes_trigger = o.l0_compaction_trigger + 4;
    o.l0_stop_writes_trigger = o.l0_slowdown_writes_trigger + 8;
    o.l1_target_bytes = rng.pick(&[1u64, 2, 4]) << 20;
    o.level_multiplier = rng.range(2, 10);
    o.target_file_bytes = rng.pick(&[64u64, 256, 1024]) << 10;
    o.table.compression = rng.pick(&[Compression::None, Compression::Lz4, Compression::Zstd]);
    o.table.block_bytes = rng.pick(&[256usize, 4096, 16384]);
    o.table.restart_interval = rng.pick(&[1usize, 16, 64]);
    o.table.bloom_bits_per_key = rng.pick(&[0u32, 10, 20]);
    o.block_cache_bytes = rng.pick(&[0usize, 1 << 20, 16 << 20]);
    o.direct_writes = rng.one_in(4);
    o.mmap_blob_reads = !rng.one_in(3);
    o.bytes_per_sync = rng.pick(&[0u64, 1 << 20]);
    o.wal_recycle_segments = usize::try_from(rng.range(0, 3)).unwrap_or(0);
    o.wal_retention_segments = rng.pick(&[0usize, 0, 2]);
    o.max_open_tables = rng.pick(&[16usize, 1000]);
    o.merge_operator = Some(Arc::new(matrixkv::U64AddOperator));
    o.keyspace_options
        .insert(KS1.to_owned(), ks1_options(rng, fixed));
    Ok(o)
}

/// The options of keyspace [`KS1`].
pub fn ks1_options(rng: &mut Rng, fixed: &Fixed) -> KeyspaceOptions {
    KeyspaceOptions {
        merge_operator: None,
        compaction_filter: fixed
            .ks1_filter
            .then(|| Arc::new(DropFilter) as Arc<dyn matrixkv::CompactionFilter>),
        ttl: (fixed.ks1_ttl_secs > 0).then(|| Duration::from_secs(fixed.ks1_ttl_secs)),
        min_blob_bytes: rng.pick(&[None, Some(100), Some(10_000)]),
        compression: rng.pick(&[None, Some(Compression::Lz4)]),
    }
}

/// The design `name` with drawn knobs (`index_bytes` fixed: the engine fixes it at creation).
fn design(rng: &mut Rng, name: &str) -> Result<Design> {
    Ok(match name {
        "matrixkv" => Design::MatrixKv,
        "xengine" => Design::XEngine(XEngineOptions {
            ror_batch: rng.pick(&[1usize, 4, 16]),
            ror_wait: Duration::from_micros(rng.pick(&[10, 100, 1000])),
            recovery_threads: usize::try_from(rng.range(0, 3)).unwrap_or(0),
        }),
        "novelsm" => Design::NoveLsm(NoveLsmOptions {
            persistent_memtable_bytes: rng.pick(&[256u64, 1024, 4096]) << 10,
            parallel_reads: rng.one_in(2),
        }),
        "slmdb" => Design::SlmDb(SlmDbOptions {
            persistent_memtable_bytes: rng.pick(&[256u64, 1024, 4096]) << 10,
            index_bytes: 16 << 20,
            live_key_ratio: rng.pick(&[0.3, 0.7, 1.0]),
            leaf_scan_tables: u32::try_from(rng.range(0, 2)).unwrap_or(2),
            leaf_scan_threshold: u32::try_from(rng.range(2, 10)).unwrap_or(10),
            candidate_trigger: u32::try_from(rng.range(1, 8)).unwrap_or(8),
            max_merge_tables: u32::try_from(rng.range(1, 8)).unwrap_or(8),
            ..SlmDbOptions::default()
        }),
        "lightkv" => Design::LightKv(LightKvOptions {
            write_buffer_bytes: rng.pick(&[256u64, 1024, 4096]) << 10,
            index_bytes: 16 << 20,
            compaction_size: u32::try_from(rng.range(2, 4)).unwrap_or(2),
            max_partitions: u32::try_from(rng.range(1, 8)).unwrap_or(8),
            partition_bytes: rng.pick(&[256u64, 2048]) << 10,
        }),
        other => bail!("unknown design {other}"),
    })
}

/// One line naming the drawn options, for the log (the seed replays them).
pub fn describe(d: &Drawn) -> String {
    let o = &d.options;
    format!(
        "design={:?} l0_layout={} container={} page={} levels={} wbuf={} max_wbufs={} \
         filter_ratio={} min_blob={:?} sep_flush={} sep_write={} sep_write_min={:?} \
         blob_file={} gc_ratio={} blob_budget={} column_threads={} column_compaction={} \
         hints={} columns={:?}/{:?} l0_trigger={} l1={} mult={} target_file={} table={:?} \
         cache={} direct={} mmap_blob={} recycle={} retention={} ks1={:?} sync_one_in={} \
         sizes={:?}",
        o.design,
        o.l0_layout,
        o.container_bytes,
        o.page_bytes,
        o.num_levels,
        o.write_buffer_bytes,
        o.max_write_buffers,
        o.memtable_filter_ratio,
        o.min_blob_bytes,
        o.separate_at_flush,
        o.separate_at_write,
        o.separate_at_write_min_bytes,
        o.blob_file_bytes,
        o.blob_gc_ratio,
        o.blob_space_budget,
        o.column_threads,
        o.column_compaction,
        o.hints,
        o.column_lower_bytes,
        o.column_upper_bytes,
        o.l0_compaction_trigger,
        o.l1_target_bytes,
        o.level_multiplier,
        o.target_file_bytes,
        o.table,
        o.block_cache_bytes,
        o.direct_writes,
        o.mmap_blob_reads,
        o.wal_recycle_segments,
        o.wal_retention_segments,
        o.keyspace_options.get(KS1),
        d.sync_one_in,
        d.size_weights,
    )
}
