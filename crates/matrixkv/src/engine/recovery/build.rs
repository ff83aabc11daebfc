//! Assembling the instance once recovery produced its version set, memtables, WAL and
//! manifest.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use super::super::wal_recycle::{FreeRegions, RetiredWal};
use super::super::{DbInner, ImmMem, ReadView, State, TableCache, WriterCtx};
use crate::key::SeqNo;
use crate::layout::FileNum;
use crate::lock_order::{Condvar, Mutex, Rank, RwLock};
use crate::memtable::MemTable;
use crate::options::{Options, Tiers};
use crate::sst::cache::BlockCache;
use crate::stats::Counters;
use crate::version::manifest::ManifestWriter;
use crate::version::set::VersionSet;
use crate::wal;

/// What recovery hands to the new instance besides the version set.
pub(super) struct Recovered {
    pub(super) wal: wal::Writer,
    pub(super) wal_number: FileNum,
    pub(super) imm: VecDeque<ImmMem>,
    /// Obsolete WAL segments kept from the previous run, oldest first.
    pub(super) retained: VecDeque<RetiredWal>,
    /// The fast-tier regions of the level structure.
    pub(super) regions: crate::engine::levels::Regions,
    pub(super) pool: Option<crate::matrix::pages::PagePool>,
    pub(super) free_wal_regions: Mutex<FreeRegions>,
    pub(super) counters: Counters,
    pub(super) registry: crate::keyspace::registry::Registry,
    /// Opened by `Db::open_read_only`.
    pub(super) read_only: bool,
    /// The value files each replayed segment's pointers led to (`separate_at_write`).
    pub(super) replayed_values: Vec<(FileNum, Vec<u64>)>,
}

impl DbInner {
    /// Assembles the instance once recovery produced its version set, WAL and manifest.
    pub(super) fn build(
        opts: Options,
        tiers: Tiers,
        versions: VersionSet,
        rec: Recovered,
        manifest: ManifestWriter,
        last_seq: SeqNo,
        locks: Vec<Box<dyn crate::tier::FileLock>>,
    ) -> Arc<DbInner> {
        let (block_cache, tables) = table_cache(&opts, &tiers);
        let mem = Arc::new(MemTable::with_filter(opts.memtable_filter_bytes()));
        let memtable_design = crate::memtable::design::for_options(&opts);
        let level_readers = start_level_readers(memtable_design.as_ref());
        let version = versions.current();
        let Recovered {
            wal,
            wal_number,
            imm,
            retained,
            regions,
            pool,
            free_wal_regions,
            counters,
            registry,
            read_only,
            replayed_values,
        } = rec;
        let (value_files, pending_outputs) = pin_replayed_values(replayed_values);
        let levels = crate::engine::levels::open(&opts, regions);
        let index_view = levels
            .global_index()
            .map(|ix| Arc::new(super::super::single_level::IndexView::new(ix, &version)));
        let view = read_view(&mem, &imm, version, index_view.clone());
        let blobs = blob_files(&opts, &tiers);
        let writer = writer_ctx(wal, Arc::clone(&mem), last_seq);
        let mut state = initial_state(versions, imm, mem, wal_number, last_seq);
        state.pending_outputs = pending_outputs;
        state.pool = pool;
        state.retired_wals = retained;
        state.index_view = index_view;
        Arc::new(DbInner {
            opts,
            tiers,
            queue: Mutex::new(Rank::Queue, VecDeque::new()),
            arrivals: Condvar::new(),
            memtable_design,
            level_readers,
            writer: Mutex::new(Rank::Writer, writer),
            value_files,
            manifest: Mutex::new(Rank::Manifest, manifest),
            state: Mutex::new(Rank::State, state),
            bg_cv: Condvar::new(),
            work_cv: Condvar::new(),
            view: RwLock::new(Rank::View, Arc::new(view)),
            visible_seq: super::super::visible_seq::VisibleSeq::new(last_seq),
            gauges: super::super::admission::Gauges::unpublished(),
            tables,
            blobs: Arc::new(blobs),
            levels,
            block_cache,
            counters,
            locks: Mutex::new(Rank::LeafFileLocks, locks),
            free_wal_regions,
            obsolete_files: Mutex::new(Rank::ObsoleteFiles, ()),
            keyspaces_prefixed: registry.prefixed(),
            default_keyspace: Arc::clone(registry.default_keyspace()),
            closed: std::sync::atomic::AtomicBool::new(false),
            #[cfg(any(test, feature = "testing"))]
            test_hooks: super::super::test_hooks::TestHooks::default(),
            keyspace_ddl: Mutex::new(Rank::KeyspaceDdl, ()),
            keyspaces: RwLock::new(Rank::LeafKeyspaces, Arc::new(registry)),
            keyspace_gate: RwLock::new(Rank::KeyspaceGate, ()),
            read_only,
        })
    }
}

/// What readers see first: the new memtable `mem`, the recovered immutable ones (newest
/// first) and the recovered version.
fn read_view(
    mem: &Arc<MemTable>,
    imm: &VecDeque<ImmMem>,
    version: Arc<crate::version::Version>,
    index: Option<Arc<super::super::single_level::IndexView>>,
) -> ReadView {
    ReadView {
        mem: Arc::clone(mem),
        imm: imm
            .iter()
            .rev()
            .map(|m: &ImmMem| Arc::clone(&m.mem))
            .collect(),
        version,
        index,
    }
}

/// The writer's context: new writes go to `mem`, logged in `wal`, after `last_seq`.
fn writer_ctx(wal: wal::Writer, mem: Arc<MemTable>, last_seq: SeqNo) -> WriterCtx {
    WriterCtx {
        pacing_debt: std::time::Duration::ZERO,
        value_file: None,
        wal,
        mem,
        last_seq: last_seq.0,
    }
}

/// The block cache (none when `block_cache_bytes` is 0) and the table cache over it.
fn table_cache(opts: &Options, tiers: &Tiers) -> (Option<Arc<BlockCache>>, Arc<TableCache>) {
    let block_cache =
        (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
    let tables = Arc::new(TableCache::new(
        tiers.fast.dir().to_owned(),
        opts.slow_dir.clone(),
        Arc::clone(&tiers.fast_fs),
        Arc::clone(&tiers.slow_fs),
        block_cache.clone(),
        opts.max_open_tables,
        opts.l0_on_fast(),
    ));
    (block_cache, tables)
}

/// The threads of parallel level reads, as the design has them. Without its threads (none
/// could be started) a lookup searches the levels one after the other: slower, never wrong.
fn start_level_readers(
    design: &dyn crate::memtable::design::MemtableDesign,
) -> Option<super::super::level_readers::LevelReaders> {
    match design.parallel_level_reads() {
        0 => None,
        n => super::super::level_readers::LevelReaders::start(n)
            .map_err(|e| {
                log::warn!("matrixkv: parallel level reads off, no thread started: {e}");
            })
            .ok(),
    }
}

/// The value files the replayed segments' pointers led to, pinned by their segments and kept
/// from deletion as pending outputs.
fn pin_replayed_values(
    replayed_values: Vec<(FileNum, Vec<u64>)>,
) -> (super::super::separate_at_write::ValueFiles, BTreeSet<u64>) {
    let value_files = super::super::separate_at_write::ValueFiles::default();
    let mut pending_outputs = BTreeSet::new();
    for (wal, files) in replayed_values {
        pending_outputs.extend(files.iter().copied());
        value_files.pin_replayed(wal, files);
    }
    (value_files, pending_outputs)
}

/// The blob file reader, mapped or not as `mmap_blob_reads` says.
fn blob_files(opts: &Options, tiers: &Tiers) -> crate::blob::reader::BlobFiles {
    let slow_dir = opts.slow_dir.clone();
    if opts.mmap_blob_reads {
        crate::blob::reader::BlobFiles::mapped(Arc::clone(&tiers.slow_fs), slow_dir)
    } else {
        crate::blob::reader::BlobFiles::new(Arc::clone(&tiers.slow_fs), slow_dir)
    }
}

/// The state of a newly opened instance: the recovered version set and immutable memtables,
/// `mem` (logged in WAL `mem_wal`) for new writes, and nothing pending or running yet.
fn initial_state(
    versions: VersionSet,
    imm: VecDeque<ImmMem>,
    mem: Arc<MemTable>,
    mem_wal: FileNum,
    last_seq: SeqNo,
) -> State {
    State {
        versions,
        imm,
        mem,
        mem_wal,
        mem_wal_first_seq: last_seq.next(),
        snapshots: BTreeMap::new(),
        poison: None,
        pending_outputs: BTreeSet::new(),
        flushing: false,
        compacting: false,
        work_gen: 0,
        flush_retry: Default::default(),
        compaction_retry: Default::default(),
        no_space: None,
        unsettled: Default::default(),
        shutting_down: false,
        manual: None,
        pool: None,
        deferred_pages: Vec::new(),
        releasing_pages: false,
        flush_needs_pages: false,
        retired_wals: VecDeque::new(),
        wal_history_from: FileNum(0),
        wal_pins: BTreeMap::new(),
        index_view: None,
    }
}
