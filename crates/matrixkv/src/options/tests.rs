use super::*;

#[test]
fn defaults_are_valid() {
    Options::new("/tmp/x").validate().unwrap();
}

#[test]
fn each_bad_option_is_named_in_the_error() {
    type Case = (fn(&mut Options), &'static str);
    let cases: Vec<Case> = vec![
        (|o| o.write_buffer_bytes = 10, "write_buffer_bytes"),
        (|o| o.max_write_buffers = 1, "max_write_buffers"),
        (|o| o.wal_recycle_segments = 17, "wal_recycle_segments"),
        (
            |o| o.wal_retention_segments = 1025,
            "wal_retention_segments",
        ),
        (|o| o.l0_stop_writes_trigger = 1, "l0_"),
        (|o| o.num_levels = 9, "num_levels"),
        (|o| o.level_multiplier = 1, "level_multiplier"),
        (|o| o.slow_dir = o.fast_dir.clone(), "different"),
        (|o| o.max_key_bytes = 0, "max_key_bytes"),
        (|o| o.page_bytes = 1000, "page_bytes"),
        (
            |o| o.container_bytes = (64 << 20) + 1,
            "multiple of page_bytes",
        ),
        (|o| o.container_bytes = 1 << 20, "at least 4 memtables"),
        (|o| o.receiver_switch_ratio = 1.0, "receiver_switch_ratio"),
        (|o| o.column_threads = 0, "column_threads"),
        (|o| o.background_nice = 20, "background_nice"),
        (|o| o.background_nice = -1, "background_nice"),
        (|o| o.memtable_filter_ratio = 0.5, "memtable_filter_ratio"),
        (
            |o| o.memtable_filter_ratio = f64::NAN,
            "memtable_filter_ratio",
        ),
        (
            |o| o.no_space_timeout = std::time::Duration::ZERO,
            "no_space_timeout",
        ),
        (|o| o.blob_gc_ratio = 0.0, "blob_gc_ratio"),
        (|o| o.blob_gc_ratio = 1.5, "blob_gc_ratio"),
        (|o| o.blob_space_budget = 0.9, "blob_space_budget"),
        (|o| o.blob_space_budget = f64::NAN, "blob_space_budget"),
        (|o| o.blob_file_bytes = 100, "blob_file_bytes"),
        (
            |o| o.column_upper_bytes = Some(1 << 16),
            "column_upper_bytes",
        ),
        (
            |o| o.container_slowdown_ratio = 0.0,
            "container_slowdown_ratio",
        ),
        (
            |o| {
                o.design = Design::XEngine(XEngineOptions {
                    ror_wait: std::time::Duration::from_secs(1),
                    ..XEngineOptions::default()
                })
            },
            "ror_wait",
        ),
        (
            |o| {
                o.design = Design::NoveLsm(NoveLsmOptions {
                    persistent_memtable_bytes: 4096,
                    ..NoveLsmOptions::default()
                })
            },
            "persistent_memtable_bytes",
        ),
        (
            |o| o.design = Design::SlmDb(SlmDbOptions::default()),
            "l0_layout",
        ),
        (
            |o| {
                o.l0_layout = L0Layout::Tables;
                o.design = Design::SlmDb(SlmDbOptions {
                    live_key_ratio: 0.0,
                    ..SlmDbOptions::default()
                })
            },
            "live_key_ratio",
        ),
        (
            |o| o.design = Design::LightKv(LightKvOptions::default()),
            "l0_layout",
        ),
        (
            |o| {
                o.l0_layout = L0Layout::Tables;
                o.design = Design::LightKv(LightKvOptions {
                    compaction_size: 1,
                    ..LightKvOptions::default()
                })
            },
            "compaction_size",
        ),
    ];
    for (f, needle) in cases {
        let mut o = Options::new("/tmp/x");
        f(&mut o);
        let e = o.validate().unwrap_err().to_string();
        assert!(e.contains(needle), "{e} should mention {needle}");
    }
}

#[test]
fn the_design_is_a_fixed_option_named_as_it_parses() {
    let mut o = Options::new("/tmp/x");
    let stored = |o: &Options| {
        o.fixed_options()
            .into_iter()
            .find(|(n, _)| n == DESIGN)
            .map(|(_, v)| v)
    };
    assert_eq!(stored(&o).as_deref(), Some("matrixkv"));
    o.design = "xengine".parse().unwrap();
    assert_eq!(o.design, Design::XEngine(XEngineOptions::default()));
    assert_eq!(stored(&o).as_deref(), Some("xengine"));
    assert_eq!("matrixkv".parse::<Design>(), Ok(Design::MatrixKv));
    o.design = "novelsm".parse().unwrap();
    assert_eq!(o.design, Design::NoveLsm(NoveLsmOptions::default()));
    assert_eq!(stored(&o).as_deref(), Some("novelsm"));
    o.design = "slmdb".parse().unwrap();
    assert_eq!(o.design, Design::SlmDb(SlmDbOptions::default()));
    assert_eq!(stored(&o).as_deref(), Some("slmdb"));
    o.design = "lightkv".parse().unwrap();
    assert_eq!(o.design, Design::LightKv(LightKvOptions::default()));
    assert_eq!(stored(&o).as_deref(), Some("lightkv"));
    assert!(
        "leveldb"
            .parse::<Design>()
            .unwrap_err()
            .contains("expected")
    );
}
