//! Opening a database: create or recover the version set from the manifest, check the
//! identity of both tier directories and the parameters fixed at creation, replay the WAL
//! segments newer than the last flush into L0 tables, keep the newest obsolete segments that
//! `Options::wal_retention_segments` retains (never replayed), start a fresh manifest and WAL,
//! delete orphans, and start the background threads.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use crate::lock_order::{Condvar, Mutex, Rank, RwLock};

use super::bg_error::Job;
use super::matrix::{ContainerHandle, rebuild_pool};
use super::separate_at_write::LoggedValues;
use super::wal_recycle::{
    FreeRegions, RetiredWal, SegmentRegion, create_wal, recover_free_regions,
};
use super::{DbInner, ImmMem, ReadView, State, TableCache, WriterCtx};
use crate::batch::WriteBatch;
use crate::error::{ArtifactKind, CorruptionReason, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileKind, FileNum};
use crate::memtable::MemTable;
use crate::options::{L0Layout, Options, Tiers};
use crate::sst::cache::BlockCache;
use crate::stats::Counters;
use crate::tier::FileSystem;
use crate::version::manifest::{self, ManifestWriter};
use crate::version::set::VersionSet;
use crate::wal;

/// Opens (or creates) the database described by `opts` and starts its background threads.
pub(crate) fn open(mut opts: Options) -> Result<(Arc<DbInner>, Vec<JoinHandle<()>>)> {
    open_mode(&mut opts, None)
}

/// Opens the database read-only (`Db::open_read_only`, docs/decisions/0019-read-only-open.md):
/// the fixed options come from the manifest, nothing is written or created on either tier
/// (no lock, WAL segment, manifest, zeroed tail or deleted file), the WAL is replayed into
/// memtables in memory, and no background thread starts.
///
/// A writer may be running beside it: between reading the manifest and replaying the WAL, the
/// writer can flush a memtable, record that in the manifest and recycle the segment that held
/// it, and the open would then miss acknowledged writes or read a recycled file. So the open is
/// optimistic: it notes the manifest (CURRENT and the manifest's length) before and after, and
/// starts again when either moved. A writer deletes or recycles a file only after the manifest
/// edit that makes it obsolete, so an unchanged manifest means every file the open read was the
/// one the manifest meant.
pub(crate) fn open_read_only(opts: Options) -> Result<Arc<DbInner>> {
    const ATTEMPTS: u32 = 50;
    let tiers = opts
        .tiers
        .clone()
        .unwrap_or_else(|| Tiers::os(&opts.fast_dir));
    let fs = tiers.slow_fs.clone();
    let stamp = || manifest_stamp(fs.as_ref(), &opts.slow_dir);
    // Copies made by one attempt that later ones can keep (see `PrivateCopies`).
    let mut copies = super::read_only::PrivateCopies::default();
    for attempt in 0..ATTEMPTS {
        let before = stamp();
        let mut o = opts.clone();
        o.tiers = Some(tiers.clone());
        let result = open_mode(&mut o, Some(&mut copies)).map(|(inner, _)| inner);
        // Without a readable manifest the open's own error says what is wrong.
        let Ok(before) = before else { return result };
        if stamp().ok() == Some(before) {
            log::debug!(
                "matrixkv: read-only open after {} attempts, {} MiB copied from the fast tier",
                attempt + 1,
                copies.copied_bytes >> 20
            );
            return result;
        }
        log::debug!(
            "matrixkv: the manifest moved during read-only open attempt {attempt}; retrying"
        );
        drop(result);
        std::thread::sleep(std::time::Duration::from_millis(2 << attempt.min(6)));
    }
    Err(Error::invalid(format!(
        "{}: the manifest changed during each of {ATTEMPTS} read-only open attempts (a writer \
         is busy flushing and compacting); try again",
        opts.slow_dir.display()
    )))
}

/// What identifies the manifest's state: CURRENT's content and the named manifest's length.
fn manifest_stamp(fs: &dyn FileSystem, dir: &std::path::Path) -> Result<(FileNum, u64)> {
    let number = manifest::read_current(fs, dir)?;
    let len = fs
        .open(&layout::path(dir, &layout::manifest_name(number)))?
        .len();
    Ok((number, len))
}

/// Opens read-write (`copies` is `None`) or read-only, reading private copies of the fast tier
/// (kept in `copies` across attempts).
fn open_mode(
    opts: &mut Options,
    mut copies: Option<&mut super::read_only::PrivateCopies>,
) -> Result<(Arc<DbInner>, Vec<JoinHandle<()>>)> {
    let read_only = copies.is_some();
    if !read_only {
        opts.validate()?;
    }
    let tiers = opts
        .tiers
        .take()
        .unwrap_or_else(|| Tiers::os(&opts.fast_dir));
    let slow_dir = opts.slow_dir.clone();
    let fast_dir = tiers.fast.dir().to_owned();
    let mut locks = Vec::new();
    if !read_only {
        tiers.slow_fs.create_dir_all(&slow_dir)?;
        tiers.fast_fs.create_dir_all(&fast_dir)?;
        locks.push(tiers.slow_fs.lock(&layout::path(&slow_dir, layout::LOCK))?);
        locks.push(tiers.fast_fs.lock(&layout::path(&fast_dir, layout::LOCK))?);
    }

    let exists = tiers
        .slow_fs
        .exists(&layout::path(&slow_dir, layout::CURRENT))?;
    if read_only && !exists {
        return Err(Error::invalid(format!(
            "no database at {} (a read-only open creates nothing)",
            slow_dir.display()
        )));
    }
    let (mut versions, dropped) = if exists {
        if opts.error_if_exists {
            return Err(Error::invalid(format!(
                "database {} already exists and error_if_exists is set",
                slow_dir.display()
            )));
        }
        let (vs, dropped) = manifest::recover_with_tail(tiers.slow_fs.as_ref(), &slow_dir)?;
        if read_only {
            adopt_fixed_options(opts, &vs)?;
            opts.validate()?;
        }
        check_fixed_options(opts, &vs)?;
        check_identity(tiers.slow_fs.as_ref(), &slow_dir, vs.db_id())?;
        check_identity(tiers.fast_fs.as_ref(), &fast_dir, vs.db_id())?;
        (vs, dropped)
    } else {
        if !opts.create_if_missing {
            return Err(Error::invalid(format!(
                "no database at {} and create_if_missing is false",
                slow_dir.display()
            )));
        }
        let foreign = tiers
            .fast_fs
            .exists(&layout::path(&fast_dir, layout::IDENTITY))?
            && !interrupted_creation(&tiers, &fast_dir)?;
        if foreign {
            return Err(Error::invalid(format!(
                "fast_dir {} already holds another database (it has an IDENTITY file) but \
                 slow_dir {} holds none",
                fast_dir.display(),
                slow_dir.display()
            )));
        }
        super::fast_room::check_room_for_new_database(opts, &tiers)?;
        (create_new(opts, &tiers, &slow_dir, &fast_dir)?, None)
    };

    // One listing of each directory serves every check below.
    let fast_names = tiers.fast_fs.list(&fast_dir)?;
    let slow_names = tiers.slow_fs.list(&slow_dir)?;
    let regions = tiers.fast.list()?;
    if exists {
        check_files_present(
            [&slow_names, &fast_names, &regions],
            [&slow_dir, &fast_dir],
            &versions,
            dropped.as_ref(),
            opts.l0_on_fast(),
        )?;
    }
    // Files newer than the last manifest edit (WAL segments, tables of unfinished jobs) must
    // not have their numbers reused.
    for name in fast_names.iter().chain(&slow_names) {
        if let Some(
            FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n) | FileKind::Blob(n),
        ) = layout::parse(name)
        {
            versions.mark_file_number_used(n);
        }
    }
    for name in &regions {
        if let Some(FileKind::Wal(n) | FileKind::PersistentMemtable(n)) = layout::parse(name) {
            versions.mark_file_number_used(n);
        }
    }
    // Free regions of obsolete segments (never replayed): kept for recycling, or deleted.
    let free_wal_regions = if read_only {
        Mutex::new(
            Rank::LeafFreeWalRegions,
            super::wal_recycle::FreeRegions::new(0),
        )
    } else {
        Mutex::new(
            Rank::LeafFreeWalRegions,
            recover_free_regions(
                &tiers,
                &regions,
                &mut versions,
                opts.wal_recycle_segments,
                opts.write_buffer_bytes,
            ),
        )
    };
    // Replay the WAL segments the manifest does not cover, oldest first.
    let mut wals: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::Wal(num)) if num >= versions.log_number() => Some(num),
            _ => None,
        })
        .collect();
    wals.sort();
    // A segment created but never written (a crash right after the file was made) cannot hold
    // an acknowledged write, because the header is persisted before any record. It is skipped,
    // not removed: obsolete-file deletion removes it once the new manifest's log number passes
    // it, so a crash during this open still finds the segment its manifest names.
    let mut segments = Vec::with_capacity(wals.len());
    let newest_wal = wals.last().copied();
    for num in wals {
        let name = layout::wal_name(num);
        let path = layout::path(&fast_dir, &name);
        let mut region = tiers.fast.open_region(&name)?;
        if let Some(c) = copies.as_deref_mut() {
            // A private copy: a writer may recycle the segment once it is flushed.
            region = c
                .wal_segment(num, region.as_ref(), Some(num) != newest_wal)
                .map_err(|e| Error::io(crate::error::IoOp::Read, &path, e))?;
        }
        if region_is_blank(region.as_ref(), &path)? {
            log::warn!("matrixkv: skipping blank WAL segment {}", path.display());
            continue;
        }
        segments.push((num, name, path, region));
    }
    // How keys are laid out, and the keyspaces, before the WAL's writes are applied.
    let prefixed = versions
        .fixed_options()
        .iter()
        .any(|(n, v)| n == crate::options::KEY_ENCODING && v == crate::options::KEYSPACE_PREFIX);
    let registry = crate::keyspace::registry::Registry::open(
        opts.default_keyspace_options(),
        &opts.keyspace_options,
        prefixed,
        &versions.keyspaces(),
    )?;
    // Replay each WAL segment into its own memtable. They become immutable memtables still
    // backed by their segments (the log number does not move), and the flush thread writes
    // them to L0 in the background, so open never has to make room in L0.
    let mut max_seq = versions.last_sequence();
    let mut imm = VecDeque::new();
    let count = segments.len();
    // Values logged as blob pointers (`separate_at_write`) are read from their value files,
    // which may lack a footer; the first missing one ends the recoverable history.
    let value_files =
        crate::blob::reader::BlobFiles::footerless(Arc::clone(&tiers.slow_fs), slow_dir.clone());
    let mut replayed_values: Vec<(FileNum, Vec<u64>)> = Vec::new();
    let mut values_end: Option<String> = None;
    // The design decides where the replayed values live and how many threads rebuild the
    // memtables (`memtable::design`).
    let design = crate::memtable::design::for_options(opts);
    let threads = design.recovery_threads();
    for (i, (num, _, path, region)) in segments.iter().enumerate() {
        let (num, path) = (*num, path.clone());
        let is_last = i + 1 == count;
        if let Some(why) = &values_end {
            // After a missing value: nothing of this segment is replayed, and a writer
            // clears it so that it reads as blank from now on.
            if !read_only {
                wal::zero_tail(region.as_ref(), &path, wal::format::HEADER_LEN as u64)?;
            }
            log::warn!(
                "matrixkv: WAL {} not replayed: the history ended earlier ({why})",
                path.display()
            );
            continue;
        }
        let mem = Arc::new(MemTable::with_filter(opts.memtable_filter_bytes()));
        // With several threads, the segment's records are read (and checked) in order first,
        // noting where each payload lies, then decoded and inserted by all threads at once
        // (the skiplist takes concurrent inserts, and each version's sequence number orders
        // it, whatever the insertion order).
        let mut pending: Vec<(usize, usize)> = Vec::new();
        // Where the segment's sequence numbers start: its first record's, or (no record) right
        // after everything older.
        let mut first_seq: Option<SeqNo> = None;
        let after_older = max_seq.next();
        let mut files_read: BTreeSet<u64> = BTreeSet::new();
        // Where this segment's history ends for lack of a value: the record's offset.
        let mut cut: Option<usize> = None;
        // A record after the cut says the values before it were durable.
        let mut durable_after_cut = false;
        let end = wal::read_segment(
            region.as_ref(),
            &path,
            num,
            opts.wal_recovery,
            is_last,
            |payload, at| {
                if cut.is_some() {
                    durable_after_cut |= is_marker(payload);
                    return Ok(());
                }
                let batch = decode_logged(payload, &path, at)?;
                if batch.is_values_durable_marker() {
                    return Ok(());
                }
                let resolved =
                    match super::separate_at_write::resolve_logged(&value_files, &batch, prefixed)?
                    {
                        LoggedValues::Inline => None,
                        LoggedValues::Resolved(b, files) => {
                            files_read.extend(files);
                            Some(b)
                        }
                        LoggedValues::Missing(why) => {
                            if opts.wal_recovery == wal::WalRecovery::Strict {
                                return Err(Error::corruption(
                                    CorruptionSite::new(ArtifactKind::Wal, &path, at as u64),
                                    crate::error::CorruptionReason::Invalid(
                                        "a logged write's value is missing from its blob file",
                                    ),
                                ));
                            }
                            cut = Some(at);
                            values_end = Some(why);
                            return Ok(());
                        }
                    };
                first_seq.get_or_insert(batch.sequence());
                if !batch.is_empty() {
                    let last = batch.sequence().0 + batch.len() as u64 - 1;
                    max_seq = max_seq.max(SeqNo(last));
                }
                if let Some(b) = resolved {
                    // Values read back, not slices of the record: applied here, in order.
                    super::write::apply_batch(&mem, &b, prefixed, None);
                } else if threads > 1 {
                    pending.push((at, payload.len()));
                } else {
                    let backing = design
                        .record_backing(region.as_ref(), at, payload.len())
                        .map_err(|e| Error::io(crate::error::IoOp::Read, &path, e))?;
                    super::write::apply_batch(&mem, &batch, prefixed, backing.as_ref());
                }
                Ok(())
            },
        )?;
        let replay = Replay {
            mem: &mem,
            design: design.as_ref(),
            region: region.as_ref(),
            path: &path,
            prefixed,
        };
        replay.in_parallel(&pending, threads)?;
        if let Some(at) = cut
            && (durable_after_cut
                || segments[i + 1..]
                    .iter()
                    .any(|(n, _, p, r)| holds_marker(r.as_ref(), p, *n, opts.wal_recovery)))
        {
            // The value was made durable before a later record was logged: not a power
            // loss's torn tail, but a damaged blob file.
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::Wal, &path, at as u64),
                crate::error::CorruptionReason::Invalid(
                    "a logged write's value is missing from its blob file, which a later \
                     record says was synced",
                ),
            ));
        }
        if let Some(at) = cut {
            let record = at.saturating_sub(crate::record::HEADER_LEN) as u64;
            if !read_only {
                wal::zero_tail(region.as_ref(), &path, record)?;
            }
            log::warn!(
                "matrixkv: WAL {} replayed up to offset {record}: {}",
                path.display(),
                values_end.as_deref().unwrap_or_default()
            );
        }
        replayed_values.push((num, files_read.into_iter().collect()));
        if let Some((offset, reason)) = &end.torn_tail {
            // Zero the torn bytes so this segment reads cleanly even once newer segments exist
            // (only the last segment may end in a torn record). A read-only open leaves them:
            // a writer may be appending there.
            if !read_only {
                wal::zero_tail(region.as_ref(), &path, end.end_offset)?;
            }
            log::warn!(
                "matrixkv: WAL {} ends with a torn record at offset {offset} ({reason}); \
                 recovered {} records before it",
                path.display(),
                end.records
            );
        }
        imm.push_back(ImmMem {
            mem,
            wal: num,
            first_seq: first_seq.unwrap_or(after_older),
            region: Some(SegmentRegion {
                used: region.len(),
                region: Arc::clone(region),
            }),
        });
    }
    // Persistent memtables (NoveLSM) the manifest does not cover: reopened where they are,
    // with no replay, and placed among the replayed segments in number order.
    let mut pmts: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::PersistentMemtable(num)) if num >= versions.log_number() => Some(num),
            _ => None,
        })
        .collect();
    pmts.sort();
    for num in pmts {
        let name = layout::pmt_name(num);
        let path = layout::path(&fast_dir, &name);
        let region = tiers.fast.open_region(&name)?;
        if region_is_blank(region.as_ref(), &path)? {
            // Created, and the process died before its header was written: it never held a
            // write (the switch to it had not returned), and it is obsolete like an empty one.
            log::warn!(
                "matrixkv: skipping persistent memtable {} that was never started",
                path.display()
            );
            continue;
        }
        let mem = design.open_persistent(region, &path)?;
        let (min_seq, committed) = mem.persistent_seqs().unwrap_or_default();
        let Some(first_seq) = min_seq else {
            // Nothing committed (created, or its first batch interrupted by a crash): obsolete
            // once the new log number passes it.
            log::info!(
                "matrixkv: skipping empty persistent memtable {}",
                path.display()
            );
            continue;
        };
        max_seq = max_seq.max(committed);
        let at = imm.partition_point(|m: &ImmMem| m.wal < num);
        imm.insert(
            at,
            ImmMem {
                mem: Arc::new(mem),
                wal: num,
                first_seq,
                region: None,
            },
        );
    }
    // The history replayed becomes durable before anything newer is written or the new
    // manifest records its sequence numbers: the value files it read may hold bytes that
    // only reached the page cache (a process crash, or a clean close, before this open).
    if !read_only {
        let read: BTreeSet<u64> = replayed_values
            .iter()
            .flat_map(|(_, f)| f.iter().copied())
            .collect();
        for n in &read {
            tiers
                .slow_fs
                .sync_file(&layout::path(&slow_dir, &layout::blob_name(FileNum(*n))))?;
        }
        if !read.is_empty() {
            tiers.slow_fs.sync_dir(&slow_dir)?;
        }
    }
    if max_seq > versions.last_sequence() {
        versions.set_last_sequence(max_seq);
    }
    // Obsolete segments retained by the previous run (below the log number: never replayed).
    let retained = if read_only {
        VecDeque::new()
    } else {
        retain_obsolete_wals(
            &tiers,
            &regions,
            versions.log_number(),
            opts.wal_retention_segments,
            imm.front().map_or(max_seq.next(), |m: &ImmMem| m.first_seq),
        )
    };
    let container = match opts.l0_layout {
        L0Layout::Matrix => {
            // A database whose first open failed between CURRENT and the container's creation
            // has no container file, and no row can refer to one: it is created now.
            let v = versions.current();
            let rowless = v.container().receiver.is_empty() && v.container().compactor.is_empty();
            let present = regions.iter().any(|n| n == layout::CONTAINER);
            if read_only && !present {
                return Err(Error::invalid(format!(
                    "{} has no matrix container yet (its creation was interrupted): open it \
                     read-write once",
                    fast_dir.display()
                )));
            }
            // A read-only handle reads a private copy of the live pages: a writer reuses
            // pages once column compaction frees them.
            let private = copies.map(|c| {
                let rows: RowPages = v
                    .container()
                    .receiver
                    .iter()
                    .chain(v.container().compactor.iter())
                    .map(|m| (m.row, m.pages.live().collect()))
                    .collect();
                (c, rows)
            });
            Some(open_container(
                opts,
                &tiers,
                &fast_dir,
                exists && (present || !rowless),
                private,
            )?)
        }
        L0Layout::Tables => None,
    };
    let pool = match &container {
        Some(h) => {
            let total = u32::try_from(opts.container_bytes / opts.page_bytes as u64)
                .map_err(|_| Error::invalid("container_bytes / page_bytes must fit in 32 bits"))?;
            let pool = rebuild_pool(&versions.current(), total, opts.page_bytes, &slow_dir)?;
            // Verify every row (header, commit word, metadata checksum) before serving reads.
            let v = versions.current();
            for m in v
                .container()
                .receiver
                .iter()
                .chain(v.container().compactor.iter())
            {
                h.reader(m)?;
            }
            Some(pool)
        }
        None => None,
    };
    let global_index = open_global_index(opts, &tiers, &versions, &regions, read_only)?;
    let counters = Counters::default();
    let (wal_number, wal_writer, manifest_writer) = if read_only {
        // Placeholders: a WAL in DRAM that no write reaches (the read-only handle refuses
        // writes first) and a manifest writer without a file.
        let number = versions.new_file_number();
        let region: Arc<dyn crate::tier::Region> =
            Arc::new(super::read_only::BytesRegion::new(64 << 10));
        let wal = wal::Writer::create(region, number, fast_dir.join("<read-only>"))?;
        (number, wal, ManifestWriter::detached(&slow_dir))
    } else {
        // A fresh WAL for new writes, then a fresh manifest (the old one may end in a torn
        // record).
        let wal_number = versions.new_file_number();
        let wal_writer = create_wal(
            &tiers,
            &free_wal_regions,
            &counters,
            super::wal_recycle::wal_segment_bytes(opts.write_buffer_bytes, 0),
            wal_number,
        )?;
        // The log number becomes the oldest segment that holds unflushed records (the new one when
        // none does), so the WAL segment the manifest names always exists (`check_files_present`).
        let oldest = imm.front().map_or(wal_number, |m: &ImmMem| m.wal);
        if oldest > versions.log_number() {
            let mut edit = crate::version::edit::VersionEdit {
                log_number: Some(oldest),
                ..Default::default()
            };
            let v = versions.prepare(&mut edit).map_err(|reason| {
                // The state the edit does not apply to is the recovered manifest's, read to
                // its end.
                let path = layout::path(
                    &slow_dir,
                    &layout::manifest_name(versions.manifest_number()),
                );
                let end = tiers.slow_fs.open(&path).map_or(0, |f| f.len());
                Error::corruption(
                    CorruptionSite::new(ArtifactKind::Manifest, path, end),
                    reason,
                )
            })?;
            versions.install(&edit, v);
        }
        let manifest_number = versions.new_file_number();
        versions.set_manifest_number(manifest_number);
        let manifest_writer = ManifestWriter::create(
            tiers.slow_fs.as_ref(),
            &slow_dir,
            manifest_number,
            &versions.snapshot_edit(),
        )?;
        manifest::set_current(tiers.slow_fs.as_ref(), &slow_dir, manifest_number)?;
        (wal_number, wal_writer, manifest_writer)
    };
    let inner = DbInner::build(
        opts.clone(),
        tiers,
        versions,
        Recovered {
            wal: wal_writer,
            wal_number,
            imm,
            retained,
            container,
            pool,
            global_index,
            free_wal_regions,
            counters,
            registry,
            read_only,
            replayed_values,
        },
        manifest_writer,
        max_seq,
        locks,
    );
    if read_only {
        return Ok((inner, Vec::new()));
    }
    inner.delete_obsolete_files(true);
    inner.start_persistent_memtable()?;
    let threads = start_background(&inner)?;
    Ok((inner, threads))
}

impl DbInner {
    /// Assembles the instance once recovery produced its version set, WAL and manifest.
    fn build(
        opts: Options,
        tiers: Tiers,
        versions: VersionSet,
        rec: Recovered,
        manifest: ManifestWriter,
        last_seq: SeqNo,
        locks: Vec<Box<dyn crate::tier::FileLock>>,
    ) -> Arc<DbInner> {
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
        let mem = Arc::new(MemTable::with_filter(opts.memtable_filter_bytes()));
        let memtable_design = crate::memtable::design::for_options(&opts);
        // Without its threads (none could be started) a lookup searches the levels one
        // after the other: slower, never wrong.
        let level_readers = match memtable_design.parallel_level_reads() {
            0 => None,
            n => super::level_readers::LevelReaders::start(n)
                .map_err(|e| {
                    log::warn!("matrixkv: parallel level reads off, no thread started: {e}");
                })
                .ok(),
        };
        let version = versions.current();
        let tiers_slow_fs = Arc::clone(&tiers.slow_fs);
        let slow_dir = opts.slow_dir.clone();
        let Recovered {
            wal,
            wal_number,
            imm,
            retained,
            container,
            pool,
            global_index,
            free_wal_regions,
            counters,
            registry,
            read_only,
            replayed_values,
        } = rec;
        let value_files = super::separate_at_write::ValueFiles::default();
        let mut pending_outputs = BTreeSet::new();
        for (wal, files) in replayed_values {
            pending_outputs.extend(files.iter().copied());
            value_files.pin_replayed(wal, files);
        }
        let index_view = global_index
            .as_ref()
            .map(|ix| Arc::new(super::single_level::IndexView::new(ix, &version)));
        let view_imm: Vec<Arc<MemTable>> = imm
            .iter()
            .rev()
            .map(|m: &ImmMem| Arc::clone(&m.mem))
            .collect();
        let blobs = if opts.mmap_blob_reads {
            crate::blob::reader::BlobFiles::mapped(Arc::clone(&tiers_slow_fs), slow_dir)
        } else {
            crate::blob::reader::BlobFiles::new(Arc::clone(&tiers_slow_fs), slow_dir)
        };
        Arc::new(DbInner {
            opts,
            tiers,
            queue: Mutex::new(Rank::Queue, VecDeque::new()),
            arrivals: Condvar::new(),
            memtable_design,
            level_readers,
            writer: Mutex::new(
                Rank::Writer,
                WriterCtx {
                    pacing_debt: std::time::Duration::ZERO,
                    value_file: None,
                    wal,
                    mem: Arc::clone(&mem),
                    last_seq: last_seq.0,
                },
            ),
            value_files,
            manifest: Mutex::new(Rank::Manifest, manifest),
            state: Mutex::new(
                Rank::State,
                State {
                    versions,
                    imm,
                    mem: Arc::clone(&mem),
                    mem_wal: wal_number,
                    mem_wal_first_seq: last_seq.next(),
                    snapshots: BTreeMap::new(),
                    poison: None,
                    pending_outputs,
                    flushing: false,
                    compacting: false,
                    work_gen: 0,
                    flush_retry: Default::default(),
                    compaction_retry: Default::default(),
                    no_space: None,
                    unsettled: Default::default(),
                    shutting_down: false,
                    manual: None,
                    pool,
                    deferred_pages: Vec::new(),
                    releasing_pages: false,
                    flush_needs_pages: false,
                    retired_wals: retained,
                    wal_history_from: FileNum(0),
                    wal_pins: BTreeMap::new(),
                    index_view: index_view.clone(),
                },
            ),
            bg_cv: Condvar::new(),
            work_cv: Condvar::new(),
            view: RwLock::new(
                Rank::View,
                Arc::new(ReadView {
                    mem,
                    imm: view_imm,
                    version,
                    index: index_view,
                }),
            ),
            visible_seq: super::visible_seq::VisibleSeq::new(last_seq),
            gauges: super::admission::Gauges::unpublished(),
            tables,
            blobs: Arc::new(blobs),
            container,
            global_index,
            block_cache,
            counters,
            locks: Mutex::new(Rank::LeafFileLocks, locks),
            free_wal_regions,
            obsolete_files: Mutex::new(Rank::ObsoleteFiles, ()),
            keyspaces_prefixed: registry.prefixed(),
            default_keyspace: Arc::clone(registry.default_keyspace()),
            closed: std::sync::atomic::AtomicBool::new(false),
            #[cfg(any(test, feature = "testing"))]
            test_hooks: super::test_hooks::TestHooks::default(),
            keyspace_ddl: Mutex::new(Rank::KeyspaceDdl, ()),
            keyspaces: RwLock::new(Rank::LeafKeyspaces, Arc::new(registry)),
            keyspace_gate: RwLock::new(Rank::KeyspaceGate, ()),
            read_only,
        })
    }
}

/// The global index of the SLM-DB design (rolled back to the generation the manifest records
/// if it is one commit ahead) or of the LightKV design (rebuilt from the tables when its job
/// is not the manifest's); created with a new database (or one whose first open stopped
/// before it existed and that holds no table yet).
fn open_global_index(
    opts: &Options,
    tiers: &Tiers,
    versions: &VersionSet,
    regions: &[String],
    read_only: bool,
) -> Result<Option<crate::index::global::GlobalIndex>> {
    use crate::index::global::{GlobalIndex, newest_keys, table_keys};
    let (bytes, radix) = match opts.design {
        crate::options::Design::SlmDb(k) => (k.index_bytes, false),
        crate::options::Design::LightKv(k) => (k.index_bytes, true),
        _ => return Ok(None),
    };
    if read_only {
        return Err(Error::invalid(format!(
            "read-only handles of the {} design are not supported: open it read-write",
            opts.design
        )));
    }
    let present = regions.iter().any(|n| n == layout::INDEX);
    let v = versions.current();
    let generation = versions.index_generation();
    let missing = !present && (generation != 0 || v.num_files(0) != 0);
    if missing && !radix {
        return Err(Error::corruption(
            CorruptionSite::new(
                ArtifactKind::PersistentIndex,
                layout::path(tiers.fast.dir(), layout::INDEX),
                0,
            ),
            crate::error::CorruptionReason::Invalid("the global index is missing"),
        ));
    }
    let fast = tiers.fast.as_ref();
    if !radix {
        return GlobalIndex::open(fast, bytes, !present, generation, versions.db_id()).map(Some);
    }
    let mut ix = GlobalIndex::open_radix(
        Arc::clone(&tiers.fast),
        bytes,
        !present,
        generation,
        versions.db_id(),
    )?;
    if missing {
        log::warn!("the RH-tree index is missing: rebuilding it from the tables");
    }
    if ix.stale() || missing {
        // The index holds nothing the tables do not: each key's newest version among them.
        let mut all = Vec::new();
        for f in v.files(0) {
            let path = layout::path(&opts.slow_dir, &layout::table_name(f.number));
            let table = crate::sst::Table::open(tiers.slow_fs.open(&path)?, f.number.0, None)?;
            all.push(table_keys(&table, f.number)?);
        }
        ix.rebuild(&newest_keys(all), generation)?;
    }
    Ok(Some(ix))
}

/// What recovery hands to the new instance besides the version set.
struct Recovered {
    wal: wal::Writer,
    wal_number: FileNum,
    imm: VecDeque<ImmMem>,
    /// Obsolete WAL segments kept from the previous run, oldest first.
    retained: VecDeque<RetiredWal>,
    container: Option<ContainerHandle>,
    pool: Option<crate::matrix::pages::PagePool>,
    global_index: Option<crate::index::global::GlobalIndex>,
    free_wal_regions: Mutex<FreeRegions>,
    counters: Counters,
    registry: crate::keyspace::registry::Registry,
    /// Opened by `Db::open_read_only`.
    read_only: bool,
    /// The value files each replayed segment's pointers led to (`separate_at_write`).
    replayed_values: Vec<(FileNum, Vec<u64>)>,
}

/// The obsolete WAL segments (below `log_number`; `regions` is the fast tier's listing) that
/// stay retained after this open, oldest first: the newest `retention` of those holding
/// records, taken newest first as long as each one's records end right where the next newer
/// one's start (`next_start` for the newest: where the replayed segments or the new one
/// start), so that they form an unbroken history. Taking stops at the first that does not read
/// (a segment whose recycling a crash interrupted, zeroed; a damaged one) or leaves a gap (a
/// newer segment went while this one was pinned). Each is mapped, and its first record and
/// the header of every record are read. The others, and the empty ones, are left to
/// obsolete-file deletion. Failures are logged, not fatal: retained segments are never
/// replayed, recovery does not need them.
fn retain_obsolete_wals(
    tiers: &Tiers,
    regions: &[String],
    log_number: FileNum,
    retention: usize,
    next_start: SeqNo,
) -> VecDeque<RetiredWal> {
    let mut obsolete: Vec<FileNum> = regions
        .iter()
        .filter_map(|n| match layout::parse(n) {
            Some(FileKind::Wal(num)) if num < log_number => Some(num),
            _ => None,
        })
        .collect();
    obsolete.sort();
    let mut kept = VecDeque::new();
    let mut next_start = next_start;
    for number in obsolete.into_iter().rev() {
        if kept.len() == retention {
            break;
        }
        let name = layout::wal_name(number);
        let path = layout::path(tiers.fast.dir(), &name);
        let read = tiers.fast.open_region(&name).and_then(|region| {
            let mut cursor = wal::BatchCursor::open(Arc::clone(&region), path.clone(), number)?;
            let Some(first) = cursor.next_batch()? else {
                return Ok(None);
            };
            let last = cursor.last_batch()?.unwrap_or_else(|| first.clone());
            let last_seq = last.sequence().0 + (last.len() as u64).saturating_sub(1);
            // Zeros follow the end marker (docs/format/wal.md, invariant 3): recycling clears
            // only what was written.
            let used = usize::try_from(cursor.offset())
                .unwrap_or(usize::MAX)
                .saturating_add(wal::format::END_MARKER_LEN)
                .min(region.len());
            Ok(Some((
                SegmentRegion { region, used },
                first.sequence(),
                SeqNo(last_seq),
            )))
        });
        let (region, first_seq, last_seq) = match read {
            Ok(Some(r)) => r,
            // No record, no history: deleted (or recycled) like any obsolete segment.
            Ok(None) => continue,
            Err(e) => {
                log::warn!(
                    "matrixkv: not retaining obsolete WAL segment {} or older ones: {e}",
                    path.display()
                );
                break;
            }
        };
        if last_seq.next() != next_start {
            log::warn!(
                "matrixkv: not retaining obsolete WAL segment {} or older ones: its last \
                 sequence number {last_seq} is not right before the next segment's first \
                 {next_start}",
                path.display()
            );
            break;
        }
        next_start = first_seq;
        kept.push_front(RetiredWal {
            number,
            first_seq,
            empty: false,
            region: Some(region),
        });
    }
    kept
}

/// Creates (new database) or maps (existing one) the matrix container's page region.
/// The container rows of a version: row number and live physical pages.
type RowPages = Vec<(u64, Vec<u32>)>;

fn open_container(
    opts: &Options,
    tiers: &Tiers,
    fast_dir: &Path,
    exists: bool,
    private: Option<(&mut super::read_only::PrivateCopies, RowPages)>,
) -> Result<ContainerHandle> {
    let path = layout::path(fast_dir, layout::CONTAINER);
    let len = usize::try_from(opts.container_bytes)
        .map_err(|_| Error::invalid("container_bytes does not fit in memory addresses"))?;
    let region = if exists {
        let r = tiers.fast.open_region(layout::CONTAINER)?;
        if r.len() != len {
            return Err(Error::corruption(
                CorruptionSite::new(ArtifactKind::RowTable, &path, 0),
                CorruptionReason::Invalid("the container file's size differs from container_bytes"),
            ));
        }
        r
    } else {
        tiers.fast.create_region(layout::CONTAINER, len)?
    };
    let region = match private {
        Some((copies, rows)) => copies
            .container(region.as_ref(), opts.page_bytes, rows)
            .map_err(|e| Error::io(crate::error::IoOp::Read, &path, e))?,
        None => region,
    };
    Ok(ContainerHandle::new(region, opts.page_bytes, path))
}

/// Checks that the files the recovered version names exist: every table (L0 in the fast-tier
/// directory, L1+ in the slow one), every blob file, and the WAL segment of the log number
/// (other than 0) whenever a newer segment exists (a flush deletes older segments only after its edit is
/// durable, and open moves the log number to a segment that exists).
///
/// A missing file means the version is not the one the database last installed. When the
/// manifest's last record was dropped as a torn write, that record was in fact durable (its
/// edit's obsolete files were deleted after it), so it was damaged rather than torn: the open
/// is refused naming the manifest and the record's offset (contract C5) instead of silently
/// rolling the database back. Otherwise the missing file itself is reported.
///
/// `names` are the listings of the slow-tier directory, the fast-tier directory and the fast
/// tier's regions; `dirs` the slow and fast directories.
fn check_files_present(
    names: [&Vec<String>; 3],
    dirs: [&Path; 2],
    vs: &VersionSet,
    dropped: Option<&manifest::DroppedRecord>,
    l0_on_fast: bool,
) -> Result<()> {
    let [slow, fast, regions] =
        names.map(|n| n.iter().map(String::as_str).collect::<BTreeSet<_>>());
    let [slow_dir, fast_dir] = dirs;
    let v = vs.current();
    let mut missing: Option<(ArtifactKind, std::path::PathBuf)> = None;
    for level in 0..crate::version::NUM_LEVELS {
        for f in v.files(level) {
            let name = layout::table_name(f.number);
            let (names, dir) = if level == 0 && l0_on_fast {
                (&fast, fast_dir)
            } else {
                (&slow, slow_dir)
            };
            if missing.is_none() && !names.contains(name.as_str()) {
                missing = Some((ArtifactKind::Sst, layout::path(dir, &name)));
            }
        }
    }
    for &n in v.blob_files().keys() {
        let name = layout::blob_name(FileNum(n));
        if missing.is_none() && !slow.contains(name.as_str()) {
            missing = Some((ArtifactKind::Blob, layout::path(slow_dir, &name)));
        }
    }
    // Log number 0 names no segment: a database whose first open failed before its snapshot
    // with a real log number was written.
    let log = vs.log_number();
    let newer_wal = log.0 > 0
        && regions.iter().any(|n| {
            matches!(layout::parse(n),
                Some(FileKind::Wal(w) | FileKind::PersistentMemtable(w)) if w > log)
        });
    // The log number names a WAL segment, or a persistent memtable (NoveLSM).
    let named = regions.contains(layout::wal_name(log).as_str())
        || regions.contains(layout::pmt_name(log).as_str());
    if missing.is_none() && newer_wal && !named {
        missing = Some((
            ArtifactKind::Wal,
            layout::path(fast_dir, &layout::wal_name(log)),
        ));
    }
    let Some((kind, path)) = missing else {
        return Ok(());
    };
    log::error!(
        "matrixkv: the manifest names {}, which does not exist",
        path.display()
    );
    Err(match dropped {
        Some(d) => Error::corruption(
            CorruptionSite::new(ArtifactKind::Manifest, &d.path, d.offset),
            CorruptionReason::Invalid(
                "the last record is damaged, not torn: the state before it names files that \
                 were deleted after the record was written; refusing to roll the database back",
            ),
        ),
        None => Error::corruption(
            CorruptionSite::new(kind, &path, 0),
            CorruptionReason::Invalid("the manifest names this file, but it does not exist"),
        ),
    })
}

/// Decodes the batch of a WAL record whose payload is at `at` in segment `path`: one that does
/// not decode is corruption of that record.
fn decode_logged(payload: &[u8], path: &Path, at: usize) -> Result<WriteBatch> {
    WriteBatch::decode(payload).map_err(|reason| {
        Error::corruption(
            CorruptionSite::new(ArtifactKind::Wal, path, at as u64),
            reason,
        )
    })
}

/// True if every byte of the region is zero.
fn region_is_blank(region: &dyn crate::tier::Region, path: &Path) -> Result<bool> {
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0;
    while off < region.len() {
        let n = buf.len().min(region.len() - off);
        let chunk = buf.get_mut(..n).unwrap_or_default();
        region
            .read(off, chunk)
            .map_err(|e| Error::io(crate::error::IoOp::Read, path, e))?;
        if chunk.iter().any(|&b| b != 0) {
            return Ok(false);
        }
        off += n;
    }
    Ok(true)
}

/// True when the fast tier holds an IDENTITY but no WAL segment, no table and no container:
/// a creation that failed (or crashed) before CURRENT was written. Its open never returned, so
/// no write was acknowledged, and the database is created again. A database that was ever
/// opened has a WAL segment in its fast tier from its first open on.
fn interrupted_creation(tiers: &Tiers, fast_dir: &Path) -> Result<bool> {
    let data = |name: &String| {
        matches!(
            layout::parse(name),
            Some(FileKind::Wal(_) | FileKind::Table(_))
        ) || name == layout::CONTAINER
    };
    Ok(!tiers.fast_fs.list(fast_dir)?.iter().any(data) && !tiers.fast.list()?.iter().any(data))
}

/// Creates the files of a new database: IDENTITY in both directories and the first manifest.
fn create_new(
    opts: &Options,
    tiers: &Tiers,
    slow_dir: &Path,
    fast_dir: &Path,
) -> Result<VersionSet> {
    let db_id = new_db_id();
    write_identity(tiers.fast_fs.as_ref(), fast_dir, db_id)?;
    write_identity(tiers.slow_fs.as_ref(), slow_dir, db_id)?;
    let mut vs = VersionSet::new(db_id, opts.fixed_options());
    let n = vs.new_file_number();
    vs.set_manifest_number(n);
    let first = vs.snapshot_edit();
    ManifestWriter::create(tiers.slow_fs.as_ref(), slow_dir, n, &first)?;
    manifest::set_current(tiers.slow_fs.as_ref(), slow_dir, n)?;
    Ok(vs)
}

/// A database id from the clock and the process id (unique enough to tell databases apart).
pub(super) fn new_db_id() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ (u64::from(std::process::id()) << 32) ^ 0x9e37_79b9_7f4a_7c15;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// IDENTITY file: `matrixkv-id <16 hex digits>\n`, written atomically (tmp + sync + rename).
pub(super) fn write_identity(fs: &dyn FileSystem, dir: &Path, id: u64) -> Result<()> {
    let tmp = layout::path(dir, "IDENTITY.tmp");
    let mut f = fs.create(&tmp)?;
    f.append(format!("matrixkv-id {id:016x}\n").as_bytes())?;
    f.sync()?;
    fs.rename(&tmp, &layout::path(dir, layout::IDENTITY))?;
    fs.sync_dir(dir)
}

fn check_identity(fs: &dyn FileSystem, dir: &Path, expected: u64) -> Result<()> {
    let path = layout::path(dir, layout::IDENTITY);
    let site = || CorruptionSite::new(ArtifactKind::Identity, &path, 0);
    if !fs.exists(&path)? {
        return Err(Error::corruption(
            site(),
            CorruptionReason::Invalid(
                "IDENTITY is missing: this tier directory lost its contents (a fast tier on \
                 tmpfs does not survive a reboot) or belongs to no database; refusing to open \
                 rather than silently losing acknowledged writes",
            ),
        ));
    }
    let bytes = fs.read_all(&path)?;
    let text = std::str::from_utf8(&bytes).unwrap_or("");
    let id = text
        .strip_prefix("matrixkv-id ")
        .and_then(|s| u64::from_str_radix(s.trim_end(), 16).ok())
        .ok_or_else(|| {
            Error::corruption(site(), CorruptionReason::Invalid("malformed IDENTITY"))
        })?;
    if id != expected {
        return Err(Error::invalid(format!(
            "{} belongs to database {id:016x}, but the manifest is of database {expected:016x}: \
             fast_dir and slow_dir do not belong together",
            path.display()
        )));
    }
    Ok(())
}

/// What the threads of a parallel WAL replay share.
struct Replay<'a> {
    mem: &'a MemTable,
    design: &'a dyn crate::memtable::design::MemtableDesign,
    region: &'a dyn crate::tier::Region,
    path: &'a Path,
    prefixed: bool,
}

impl Replay<'_> {
    /// Decodes the records at `payloads` (offset and length of each, already checked by
    /// `read_segment`) and inserts them into the memtable with `threads` threads, each taking
    /// a contiguous share.
    fn in_parallel(&self, payloads: &[(usize, usize)], threads: usize) -> Result<()> {
        if payloads.is_empty() {
            return Ok(());
        }
        let share = payloads.len().div_ceil(threads.max(1));
        std::thread::scope(|s| {
            let workers: Vec<_> = payloads
                .chunks(share)
                .map(|part| s.spawn(move || self.insert_all(part)))
                .collect();
            workers.into_iter().try_for_each(|w| {
                w.join()
                    .map_err(|_| Error::invalid("a WAL replay thread panicked"))?
            })
        })
    }

    /// Decodes and inserts the records at `payloads`, one at a time.
    fn insert_all(&self, payloads: &[(usize, usize)]) -> Result<()> {
        let io = |e| Error::io(crate::error::IoOp::Read, self.path, e);
        let mut buf = Vec::new();
        for &(at, len) in payloads {
            let backing = self
                .design
                .record_backing(self.region, at, len)
                .map_err(io)?;
            let bytes: &[u8] = match &backing {
                Some(b) => b,
                None => {
                    buf.resize(len, 0);
                    self.region.read(at, &mut buf).map_err(io)?;
                    &buf
                }
            };
            let batch = decode_logged(bytes, self.path, at)?;
            super::write::apply_batch(self.mem, &batch, self.prefixed, backing.as_ref());
        }
        Ok(())
    }
}

/// Takes the parameters fixed at creation from the manifest into `opts` (a read-only open
/// needs no knowledge of how the database was created). A database with a TTL gets one of a
/// hundred years unless `opts` gives one: reads through the handle then see values whose TTL
/// passed but that no compaction dropped yet.
fn adopt_fixed_options(opts: &mut Options, vs: &VersionSet) -> Result<()> {
    let bad = |name: &str, value: &str| {
        Error::invalid(format!(
            "the manifest's fixed option {name} = {value:?} is not understood by this build"
        ))
    };
    for (name, value) in vs.fixed_options() {
        match name.as_str() {
            "num_levels" => opts.num_levels = value.parse().map_err(|_| bad(name, value))?,
            "l0_layout" => opts.l0_layout = value.parse().map_err(|_| bad(name, value))?,
            "page_bytes" => opts.page_bytes = value.parse().map_err(|_| bad(name, value))?,
            "container_bytes" => {
                opts.container_bytes = value.parse().map_err(|_| bad(name, value))?;
            }
            "ttl" if value == "true" && opts.ttl.is_none() => {
                opts.ttl = Some(std::time::Duration::from_secs(100 * 365 * 86_400));
            }
            "ttl" if value == "false" => opts.ttl = None,
            // The design's knobs are the caller's when it names the same design.
            crate::options::DESIGN if opts.design.name() != value => {
                opts.design = value.parse().map_err(|_| bad(name, value))?;
            }
            _ => {}
        }
    }
    // The container must hold four memtables: a smaller write buffer if need be (it only sizes
    // the placeholder structures of a read-only handle).
    opts.write_buffer_bytes = opts
        .write_buffer_bytes
        .min(usize::try_from(opts.container_bytes / 4).unwrap_or(usize::MAX));
    Ok(())
}

fn check_fixed_options(opts: &Options, vs: &VersionSet) -> Result<()> {
    for (name, given) in opts.fixed_options() {
        let stored = vs
            .fixed_options()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.clone())
            // Databases created before the TTL option existed have no TTL, and those created
            // before designs were selectable are MatrixKV's.
            .or_else(|| (name == "ttl").then(|| "false".to_owned()))
            .or_else(|| (name == crate::options::DESIGN).then(|| "matrixkv".to_owned()));
        if let Some(stored) = stored
            && stored != given
        {
            let option: &'static str = match name.as_str() {
                "num_levels" => "num_levels",
                "l0_layout" => "l0_layout",
                "page_bytes" => "page_bytes",
                "container_bytes" => "container_bytes",
                "ttl" => "ttl",
                crate::options::DESIGN => "design",
                _ => "fixed option",
            };
            return Err(Error::OptionMismatch {
                option,
                stored,
                given,
            });
        }
    }
    Ok(())
}

/// Starts the flush thread and the compaction thread.
fn start_background(inner: &Arc<DbInner>) -> Result<Vec<JoinHandle<()>>> {
    let spawn = |name: &str, f: fn(&DbInner)| -> Result<JoinHandle<()>> {
        let db = Arc::clone(inner);
        std::thread::Builder::new()
            .name(name.to_owned())
            .spawn(move || {
                let nice = db.opts.background_nice;
                if nice > 0
                    && let Err(e) = matrixkv_pmem::set_current_thread_nice(nice)
                {
                    log::warn!("matrixkv: cannot lower the priority of a background thread: {e}");
                }
                f(&db)
            })
            .map_err(|e| Error::Io {
                op: crate::error::IoOp::Open,
                path: None,
                source: e,
            })
    };
    Ok(vec![
        spawn("matrixkv:flush", flush_loop)?,
        spawn("matrixkv:compact", compaction_loop)?,
    ])
}

/// The flush thread: flushes immutable memtables oldest first until shutdown. A flush that
/// fails for lack of space is retried after a growing pause (see `bg_error`); any other
/// failure poisons the database.
fn flush_loop(db: &DbInner) {
    let mut st = db.state.lock();
    // Free WAL regions are prepared once, when the thread is first idle after the open; later,
    // recycling keeps the pool filled (preparing after every flush would race with switches
    // that took a region and have not yet made their memtable immutable, creating regions
    // that recycling then has no room for).
    let mut prepare = true;
    loop {
        if st.poison.is_none() && !st.imm.is_empty() {
            // Memtables left at shutdown are flushed first, unless flushes are failing.
            if let Some(pause) = st.flush_retry.remaining(Instant::now()) {
                if st.shutting_down {
                    break;
                }
                db.work_cv.wait_for(&mut st, pause);
                continue;
            }
            match db.flush_one(&mut st) {
                Ok(()) => db.background_succeeded(&mut st, Job::Flush),
                // Abandoned at shutdown while waiting for container pages.
                Err(Error::Closed) => break,
                Err(e) => db.background_failed(&mut st, Job::Flush, &e),
            }
            db.bg_cv.notify_all();
            db.work_cv.notify_all();
            drop(st);
            db.delete_obsolete_files(false);
            st = db.state.lock();
            continue;
        }
        if st.shutting_down {
            break;
        }
        if prepare && st.poison.is_none() {
            prepare = false;
            drop(st);
            db.prepare_free_wal_regions();
            st = db.state.lock();
            continue;
        }
        db.work_cv.wait(&mut st);
    }
}

/// The compaction thread: runs the picker's plans until there is nothing to do, then waits.
/// A failure other than corruption (for example a full disk) is counted and retried after a
/// growing pause (see `bg_error`); writes continue until L0 fills up. Corruption stops writes.
fn compaction_loop(db: &DbInner) {
    let mut st = db.state.lock();
    loop {
        if st.shutting_down {
            break;
        }
        if let Some(pause) = st.compaction_retry.remaining(Instant::now()) {
            db.work_cv.wait_for(&mut st, pause);
            continue;
        }
        if (db.opts.compaction_enabled || DbInner::manual_pending(&st)) && st.poison.is_none() {
            let generation = st.work_gen;
            let step = db.compact_one(&mut st);
            // The job dropped the version it read: pages it released can return to the pool
            // now (writers are throttled by container occupancy until they do).
            db.release_deferred_pages(&mut st);
            match step {
                Ok(true) => db.background_succeeded(&mut st, Job::Compaction),
                Ok(false) => {
                    db.bg_cv.notify_all();
                    #[cfg(any(test, feature = "testing"))]
                    super::test_hooks::idle_window(db, &mut st);
                    // The step (and the release of deferred pages) may have released the lock:
                    // new work, a shutdown or a manual compaction signalled meanwhile found no
                    // thread waiting, so the predicate is checked again before the wait.
                    if st.work_gen == generation
                        && !st.shutting_down
                        && !DbInner::manual_pending(&st)
                    {
                        db.work_cv.wait(&mut st);
                    }
                    continue;
                }
                Err(e) => db.background_failed(&mut st, Job::Compaction, &e),
            }
            db.bg_cv.notify_all();
            drop(st);
            db.delete_obsolete_files(false);
            st = db.state.lock();
            continue;
        }
        db.bg_cv.notify_all();
        db.work_cv.wait(&mut st);
    }
}

/// True if the record `payload` is [`WriteBatch::values_durable_marker`].
fn is_marker(payload: &[u8]) -> bool {
    WriteBatch::decode(payload).is_ok_and(|b| b.is_values_durable_marker())
}

/// True if WAL segment `num` holds [`WriteBatch::values_durable_marker`]; a segment that
/// cannot be read to its end counts up to where it can.
fn holds_marker(
    region: &dyn crate::tier::Region,
    path: &Path,
    num: FileNum,
    mode: wal::WalRecovery,
) -> bool {
    let mut found = false;
    let _ = wal::read_segment(region, path, num, mode, true, |payload, _| {
        found |= is_marker(payload);
        Ok(())
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_logged_batch_that_does_not_decode_names_its_segment_and_record() {
        let path = Path::new("/db/fast/000003.wal");
        match decode_logged(&[1, 2, 3], path, 4096) {
            Err(Error::Corruption { site, .. }) => {
                assert_eq!(site.kind, ArtifactKind::Wal);
                assert_eq!(site.path, path);
                assert_eq!(site.offset, 4096);
            }
            other => panic!("expected a corruption, got {other:?}"),
        }
    }
}
