//! Tests of `matrixkv paper`: every figure at a tiny scale (seconds each), checking the
//! charts, a row per series, the value-placement caption and the flags on the commands.

use std::path::Path;

use super::*;

/// Checks a results directory for the paper's files.
fn has_chart(dir: &Path, name: &str) -> bool {
    dir.join(format!("{name}.svg")).is_file() && dir.join(format!("{name}.png")).is_file()
}

/// The series of the tests' MatrixKV figures (the default list without the RocksDB ones when
/// they are not built).
const SERIES: [&str; 3] = ["matrixkv", "matrixkv-novelsm", "matrixkv-xengine"];

fn args(dir: &Path, figure: Figure) -> PaperArgs {
    PaperArgs {
        figure,
        engines: "matrixkv,matrixkv-novelsm,matrixkv-xengine,rocksdb-l0-fast".to_owned(),
        separation: Separation::Off,
        rate: 20_000.0,
        scale: 0.0005,
        out: dir.join("out"),
        db: dir.join("db"),
        fast_dir: Some(dir.join("fast")),
        bench_flags: vec![
            "--container_bytes=16777216".to_owned(),
            "--write_buffer_size=1048576".to_owned(),
            "--persistent_memtable_bytes=1048576".to_owned(),
            "--progress=never".to_owned(),
            "--no_plots".to_owned(),
        ],
    }
}

/// [`args`] at scale 0.002 without the size flags: the figures that size their memtables and
/// containers themselves.
fn args_sized_by_figure(dir: &Path, figure: Figure) -> PaperArgs {
    let mut a = args(dir, figure);
    a.scale = 0.002;
    a.bench_flags.retain(|f| {
        !f.starts_with("--container_bytes")
            && !f.starts_with("--write_buffer_size")
            && !f.starts_with("--persistent_memtable_bytes")
    });
    a
}

fn report(a: &PaperArgs) -> String {
    std::fs::read_to_string(a.out.join("report.md")).unwrap()
}

/// The report states the setting in a caption and every bench command carries its flags.
fn assert_placement(md: &str, sep: Separation) {
    let label = format!(
        "*Value placement: separation {} for every series*",
        sep.name()
    );
    assert!(md.contains(&label), "{label} missing: {md}");
    let flags = sep.flags().join(" ");
    let commands: Vec<&str> = md
        .lines()
        .filter(|l| l.starts_with("`matrixkv bench "))
        .collect();
    assert!(!commands.is_empty(), "{md}");
    for c in commands {
        assert!(c.contains(&flags), "{flags} missing: {c}");
    }
}

/// Every series of `SERIES` has a row starting with `| <series> |` in `md` (at least `n`).
fn assert_rows(md: &str, n: usize) {
    for e in SERIES {
        let row = format!("| {e} |");
        assert!(md.matches(&row).count() >= n, "{row} missing: {md}");
    }
    if !cfg!(feature = "rocksdb") {
        assert!(md.contains("Left out"), "{md}");
    }
}

/// What the bench recorded about matrixkv's options in a results directory.
fn matrixkv_config(dir: &Path) -> String {
    let mut text = String::new();
    for f in std::fs::read_dir(dir).unwrap() {
        let p = f.unwrap().path();
        if p.is_file() {
            text.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
        }
    }
    text
}

#[test]
fn the_writes_figure_draws_throughput_wa_and_compactions_with_novelsm_by_default() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args(tmp.path(), Figure::Writes);
    run(&a).unwrap();
    let md = report(&a);
    for w in [
        "Fig. 13",
        "Fig. 14: L0→L1 compactions",
        "Fig. 15: every compaction",
    ] {
        assert!(md.contains(w), "{w} missing: {md}");
    }
    assert!(
        md.contains("Per-compaction durations are not measured"),
        "{md}"
    );
    assert!(md.contains("`matrixkv paper latency`"), "{md}");
    // The throughput table, Fig. 13, Fig. 14 and Fig. 15: a row each per series.
    assert_rows(&md, 4);
    assert_placement(&md, Separation::Off);
    assert!(md.contains("- `matrixkv-novelsm`: with their keys"), "{md}");
    assert!(md.contains("L0 SSTables too"), "{md}");
    assert!(has_chart(&a.out, "fig12-throughput"));
    assert!(has_chart(&a.out, "fig13-wa"));
    assert!(matrixkv_config(&a.out.join("writes")).contains("min_blob_bytes None"));
}

#[test]
fn separation_on_reaches_every_series_that_can_separate_and_is_labelled() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args(tmp.path(), Figure::Writes);
    a.separation = Separation::On;
    run(&a).unwrap();
    let md = report(&a);
    assert!(
        md.contains("Value placement: separation on for every series"),
        "{md}"
    );
    assert_placement(&md, Separation::On);
    assert_rows(&md, 4);
    assert!(
        md.contains("- `matrixkv`: values ≥ 1024 B in blob files"),
        "{md}"
    );
    assert!(
        md.contains(
            "- `matrixkv-novelsm`: with their keys (WAL, memtables, L0 and the \
                     SSTables): the design has no separation"
        ),
        "{md}"
    );
    let config = matrixkv_config(&a.out.join("writes"));
    assert!(config.contains("min_blob_bytes Some(1024)"), "{config}");
    // The flags `--separation` owns cannot be set behind its back.
    a.bench_flags.push("--enable_blob_files=false".to_owned());
    let e = run(&a).unwrap_err().to_string();
    assert!(e.contains("--separation"), "{e}");
}

#[test]
fn the_ycsb_and_value_size_figures_have_a_bar_per_engine_and_group() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args(tmp.path(), Figure::Ycsb);
    run(&a).unwrap();
    let md = report(&a);
    for w in ["| load |", "| A |", "| E |", "| F |"] {
        assert!(md.contains(w), "{w} missing: {md}");
    }
    assert!(
        md.contains("| K ops/s | matrixkv | matrixkv-novelsm | matrixkv-xengine |"),
        "{md}"
    );
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "fig11-ycsb"));
    a.figure = Figure::Values;
    a.scale = 0.001;
    run(&a).unwrap();
    let md = report(&a);
    assert!(md.contains("| 16 KiB |"), "{md}");
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "fig10a-value-sizes"));
}

#[test]
fn the_micro_figure_gives_sequential_writes_and_settled_reads_per_series() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args(tmp.path(), Figure::Micro);
    run(&a).unwrap();
    let md = report(&a);
    for w in [
        "| Fig. 10(b) sequential writes |",
        "| Fig. 10(c) random reads |",
        "| Fig. 10(d) sequential reads |",
    ] {
        assert!(md.contains(w), "{w} missing: {md}");
    }
    assert!(
        md.contains("--benchmarks=fillrandom,waitforcompaction,readrandom,readseq"),
        "{md}"
    );
    assert_rows(&md, 1);
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "fig10bcd-micro"));
}

#[test]
fn table_2_is_ycsb_a_at_a_fixed_rate_with_percentiles_per_series() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args(tmp.path(), Figure::Latency);
    run(&a).unwrap();
    let md = report(&a);
    assert!(
        md.contains("## Table 2: YCSB-A at 20000 requests/s"),
        "{md}"
    );
    assert!(md.contains("--benchmarks=ycsb_load,ycsba"), "{md}");
    assert!(md.contains("--rate=20000"), "{md}");
    for e in SERIES {
        let row = format!("| {e} | 20000 |");
        assert!(md.contains(&row), "{row} missing: {md}");
    }
    assert!(!md.contains("fillrandom"), "{md}");
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "table2-ycsba-cdf"));
}

#[test]
fn the_depth_figure_writes_at_two_l1_sizes_and_shows_the_levels() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args(tmp.path(), Figure::Depth);
    run(&a).unwrap();
    let md = report(&a);
    assert!(md.contains("--max_bytes_for_level_base=268435456"), "{md}");
    assert!(md.contains("--max_bytes_for_level_base=16777216"), "{md}");
    assert!(md.contains("| matrixkv | L1 = 256 MiB |"), "{md}");
    assert!(
        md.contains("| matrixkv | L1 = the container, 16 MiB |"),
        "{md}"
    );
    // The paper's Fig. 16 has MatrixKV and RocksDB only.
    assert!(!md.contains("| matrixkv-novelsm |"), "{md}");
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "fig16-depth"));
}

#[test]
fn the_hint_experiment_reads_l0_with_hints_on_and_off() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args(tmp.path(), Figure::Hints);
    a.bench_flags
        .retain(|f| !f.starts_with("--container_bytes"));
    run(&a).unwrap();
    let md = report(&a);
    assert!(md.contains("| matrixkv, cross-row hints |"), "{md}");
    assert!(md.contains("| matrixkv, hints off |"), "{md}");
    assert!(md.contains("RocksDB-L0-NVM's layout) |"), "{md}");
    assert!(md.contains("--hints=false"), "{md}");
    // The load stayed in L0 and every read found its key.
    assert!(md.contains("| 500 | 100% |"), "{md}");
    assert!(
        md.contains("matrix container of RowTables (16 MiB)"),
        "{md}"
    );
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "hints-l0-reads"));
}

#[test]
fn the_dram_nvm_figure_puts_the_slow_tier_on_the_fast_tier() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args(tmp.path(), Figure::Nvm);
    run(&a).unwrap();
    let md = report(&a);
    assert!(md.contains("Fig. 17"), "{md}");
    assert!(
        md.contains("### Table 3: YCSB-A at 60000 requests/s"),
        "{md}"
    );
    assert!(md.contains("PebblesDB and SILK"), "{md}");
    let slow = tmp.path().join("fast").join("matrixkv-paper-slow-");
    assert!(md.contains(&format!("--db={}", slow.display())), "{md}");
    for e in SERIES {
        assert!(md.contains(&format!("| {e} | 60000 |")), "{e}: {md}");
    }
    assert_placement(&md, Separation::Off);
    assert!(has_chart(&a.out, "fig17-dram-nvm"));
    // The slow tier's directory on the fast tier is gone.
    let left: Vec<_> = std::fs::read_dir(tmp.path().join("fast"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().starts_with("matrixkv-paper-slow"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn paper_all_runs_every_figure_the_enum_lists() {
    use clap::ValueEnum as _;
    let all = figures(Figure::All);
    assert_eq!(all.len(), Figure::value_variants().len() - 1);
    for f in Figure::value_variants() {
        assert_eq!(all.contains(f), *f != Figure::All, "{f:?}");
    }
    assert_eq!(figures(Figure::Hints), vec![Figure::Hints]);
}

#[test]
fn the_xengine_figures_compare_memtables_restarts_and_ror_batches() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args_sized_by_figure(tmp.path(), Figure::Xengine);
    run(&a).unwrap();
    let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
    assert!(
        md.contains("| matrixkv-xengine, 1 recovery thread |"),
        "{md}"
    );
    assert!(md.contains("| 32 |"), "{md}");
    assert!(!md.contains("| NaN"), "{md}");
    assert!(has_chart(&a.out, "xengine-fig17a-ror"));
    assert_placement(&md, Separation::Off);
}

#[test]
fn the_novelsm_figures_compare_memtable_sizes_read_parallelism_and_restarts() {
    let tmp = tempfile::tempdir().unwrap();
    let a = args_sized_by_figure(tmp.path(), Figure::Novelsm);
    run(&a).unwrap();
    let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
    assert!(
        md.contains("| DRAM memtable only (LevelDB layout) |"),
        "{md}"
    );
    assert!(md.contains("serial reads |"), "{md}");
    assert!(
        md.contains("| NoveLSM persistent memtable, no replay |"),
        "{md}"
    );
    assert!(!md.contains("| NaN"), "{md}");
    assert!(has_chart(&a.out, "novelsm-memtables"));
    assert_placement(&md, Separation::Off);
}

#[test]
fn the_slmdb_figures_compare_with_leveldb_and_sweep_the_live_key_ratio() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args_sized_by_figure(tmp.path(), Figure::Slmdb);
    a.bench_flags
        .push("--slmdb_memtable_bytes=1048576".to_owned());
    a.bench_flags
        .push("--slmdb_index_bytes=16777216".to_owned());
    run(&a).unwrap();
    let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
    assert!(md.contains("| fillrandom ops/s |"), "{md}");
    assert!(md.contains("| seekrandom ops/s |"), "{md}");
    assert!(md.contains("| WA, both tiers, load to end |"), "{md}");
    assert!(md.contains("| 0.8 |"), "{md}");
    assert!(!md.contains("| NaN"), "{md}");
    assert!(has_chart(&a.out, "slmdb-fig6"));
    assert_placement(&md, Separation::Off);
}

#[test]
fn the_lightkv_figures_compare_five_systems_and_sweep_compaction_size_and_partitions() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args_sized_by_figure(tmp.path(), Figure::Lightkv);
    for f in [
        "--slmdb_memtable_bytes=1048576",
        "--slmdb_index_bytes=16777216",
        "--persistent_memtable_bytes=1048576",
        "--lightkv_buffer_bytes=1048576",
        "--lightkv_index_bytes=16777216",
    ] {
        a.bench_flags.push(f.to_owned());
    }
    run(&a).unwrap();
    let md = std::fs::read_to_string(a.out.join("report.md")).unwrap();
    assert!(md.contains("| LightKV |"), "{md}");
    assert!(md.contains("| SLM-DB |"), "{md}");
    assert!(md.contains("| NoveLSM |"), "{md}");
    assert!(md.contains("| compaction size |"), "{md}");
    assert!(md.contains("| maximum partitions |"), "{md}");
    assert!(md.contains("| 8 |"), "{md}");
    assert!(!md.contains("| NaN"), "{md}");
    assert!(has_chart(&a.out, "lightkv-wa"));
    // Its series are its own, not `--engines`'.
    assert!(!md.contains("Series:"), "{md}");
    assert!(has_chart(&a.out, "lightkv-read-tail"));
    assert_placement(&md, Separation::Off);
}

#[test]
fn unknown_engines_and_bad_scales_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let mut a = args(tmp.path(), Figure::Writes);
    a.engines = "leveldb".to_owned();
    assert!(run(&a).unwrap_err().to_string().contains("unknown engine"));
    a.engines = "matrixkv".to_owned();
    a.scale = 0.0;
    assert!(run(&a).unwrap_err().to_string().contains("--scale"));
    a.scale = 0.001;
    a.rate = 0.0;
    assert!(run(&a).unwrap_err().to_string().contains("--rate"));
}
