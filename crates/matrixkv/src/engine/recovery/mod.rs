//! Opening a database: create or recover the version set from the manifest, check the
//! identity of both tier directories and the parameters fixed at creation, replay the WAL
//! segments newer than the last flush into L0 tables, keep the newest obsolete segments that
//! `Options::wal_retention_segments` retains (never replayed), start a fresh manifest and WAL,
//! delete orphans, and start the background threads.
//!
//! The read-write open (`open`, here) and the read-only one (`read_only.rs`) are the same
//! sequence of named steps, below; the read-only one skips every step that writes.

mod background;
mod build;
mod checks;
mod read_only;
mod regions;
mod replay;

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

use super::matrix::{ContainerHandle, rebuild_pool};
use super::wal_recycle::{FreeRegions, create_wal, recover_free_regions};
use super::{DbInner, ImmMem};
use crate::error::{ArtifactKind, CorruptionSite, Error, Result};
use crate::key::SeqNo;
use crate::layout::{self, FileKind, FileNum};
use crate::lock_order::{Mutex, Rank};
use crate::options::{Options, Tiers};
use crate::stats::Counters;
use crate::version::manifest::{self, ManifestWriter};
use crate::version::set::VersionSet;
use crate::wal;
use build::Recovered;
use replay::Replayed;

pub(super) use checks::{new_db_id, write_identity};
pub(crate) use read_only::open_read_only;

/// Opens (or creates) the database described by `opts` and starts its background threads.
pub(crate) fn open(mut opts: Options) -> Result<(Arc<DbInner>, Vec<JoinHandle<()>>)> {
    open_writable(&mut opts)
}

/// Opens read-write: takes the directory locks, recovers (or creates) the database, replays
/// the WAL, starts a fresh WAL and manifest, deletes obsolete files and starts the background
/// threads.
fn open_writable(opts: &mut Options) -> Result<(Arc<DbInner>, Vec<JoinHandle<()>>)> {
    opts.validate()?;
    let tiers = take_tiers(opts);
    let slow_dir = opts.slow_dir.clone();
    let fast_dir = tiers.fast.dir().to_owned();
    let locks = lock_dirs(&tiers, &slow_dir, &fast_dir)?;
    let exists = database_exists(&tiers, &slow_dir)?;
    let (mut versions, dropped) = if exists {
        let (vs, dropped) = read_manifest(opts, &tiers, &slow_dir)?;
        check_recovered(opts, &tiers, &vs, &slow_dir, &fast_dir)?;
        (vs, dropped)
    } else {
        (create_database(opts, &tiers, &slow_dir, &fast_dir)?, None)
    };
    let listing = Listing::read(&tiers, &slow_dir, &fast_dir)?;
    if exists {
        listing.check_present(opts, &slow_dir, &fast_dir, &versions, dropped.as_ref())?;
    }
    listing.reserve_file_numbers(&mut versions);
    let regions = listing.regions;
    // Free regions of obsolete segments (never replayed): kept for recycling, or deleted.
    let free_wal_regions = Mutex::new(
        Rank::LeafFreeWalRegions,
        recover_free_regions(
            &tiers,
            &regions,
            &mut versions,
            opts.wal_recycle_segments,
            opts.write_buffer_bytes,
        ),
    );
    let (replayed, registry) =
        replay_memtables(opts, &tiers, &fast_dir, &regions, &versions, None)?;
    replay::sync_replayed_values(&tiers, &slow_dir, &replayed.values)?;
    let max_seq = replayed.max_seq;
    adopt_last_sequence(&mut versions, max_seq);
    // Obsolete segments retained by the previous run (below the log number: never replayed).
    let retained = regions::retain_obsolete_wals(
        &tiers,
        &regions,
        versions.log_number(),
        opts.wal_retention_segments,
        replayed
            .imm
            .front()
            .map_or(max_seq.next(), |m: &ImmMem| m.first_seq),
    );
    let levels = open_levels(opts, &tiers, &versions, &regions, exists, None)?;
    let counters = Counters::default();
    let (wal_number, wal_writer) =
        start_wal(opts, &tiers, &mut versions, &free_wal_regions, &counters)?;
    advance_log_number(&tiers, &slow_dir, &mut versions, &replayed.imm, wal_number)?;
    let manifest_writer = start_manifest(&tiers, &slow_dir, &mut versions)?;
    let inner = DbInner::build(
        opts.clone(),
        tiers,
        versions,
        Recovered {
            wal: wal_writer,
            wal_number,
            imm: replayed.imm,
            retained,
            regions: levels.regions,
            pool: levels.pool,
            free_wal_regions,
            counters,
            registry,
            read_only: false,
            replayed_values: replayed.values,
        },
        manifest_writer,
        max_seq,
        locks,
    );
    inner.delete_obsolete_files(true);
    inner.start_persistent_memtable()?;
    let threads = background::start_background(&inner)?;
    Ok((inner, threads))
}

/// The tiers `opts` names (the OS file systems unless it gives its own).
fn take_tiers(opts: &mut Options) -> Tiers {
    opts.tiers
        .take()
        .unwrap_or_else(|| Tiers::os(&opts.fast_dir))
}

/// Creates both directories and takes their locks, before anything is mapped.
fn lock_dirs(
    tiers: &Tiers,
    slow_dir: &Path,
    fast_dir: &Path,
) -> Result<Vec<Box<dyn crate::tier::FileLock>>> {
    tiers.slow_fs.create_dir_all(slow_dir)?;
    tiers.fast_fs.create_dir_all(fast_dir)?;
    Ok(vec![
        tiers.slow_fs.lock(&layout::path(slow_dir, layout::LOCK))?,
        tiers.fast_fs.lock(&layout::path(fast_dir, layout::LOCK))?,
    ])
}

/// True if the slow-tier directory holds a database (its CURRENT file).
fn database_exists(tiers: &Tiers, slow_dir: &Path) -> Result<bool> {
    tiers
        .slow_fs
        .exists(&layout::path(slow_dir, layout::CURRENT))
}

/// Recovers the version set from the manifest CURRENT names (and the record dropped from its
/// end as torn, if any), unless `error_if_exists` refuses the existing database.
fn read_manifest(
    opts: &Options,
    tiers: &Tiers,
    slow_dir: &Path,
) -> Result<(VersionSet, Option<manifest::DroppedRecord>)> {
    if opts.error_if_exists {
        return Err(Error::invalid(format!(
            "database {} already exists and error_if_exists is set",
            slow_dir.display()
        )));
    }
    manifest::recover_with_tail(tiers.slow_fs.as_ref(), slow_dir)
}

/// Checks the recovered database against `opts` (the parameters fixed at creation) and the
/// identity of both tier directories.
fn check_recovered(
    opts: &Options,
    tiers: &Tiers,
    vs: &VersionSet,
    slow_dir: &Path,
    fast_dir: &Path,
) -> Result<()> {
    checks::check_fixed_options(opts, vs)?;
    checks::check_identity(tiers.slow_fs.as_ref(), slow_dir, vs.db_id())?;
    checks::check_identity(tiers.fast_fs.as_ref(), fast_dir, vs.db_id())
}

/// Creates a new database (when `create_if_missing` allows and the fast-tier directory holds
/// no other database) and returns its version set.
fn create_database(
    opts: &Options,
    tiers: &Tiers,
    slow_dir: &Path,
    fast_dir: &Path,
) -> Result<VersionSet> {
    if !opts.create_if_missing {
        return Err(Error::invalid(format!(
            "no database at {} and create_if_missing is false",
            slow_dir.display()
        )));
    }
    let foreign = tiers
        .fast_fs
        .exists(&layout::path(fast_dir, layout::IDENTITY))?
        && !checks::interrupted_creation(tiers, fast_dir)?;
    if foreign {
        return Err(Error::invalid(format!(
            "fast_dir {} already holds another database (it has an IDENTITY file) but \
             slow_dir {} holds none",
            fast_dir.display(),
            slow_dir.display()
        )));
    }
    super::fast_room::check_room_for_new_database(opts, tiers)?;
    checks::create_new(opts, tiers, slow_dir, fast_dir)
}

/// One listing of each directory, and of the fast tier's regions: it serves every check of
/// the open.
struct Listing {
    fast_names: Vec<String>,
    slow_names: Vec<String>,
    regions: Vec<String>,
}

impl Listing {
    fn read(tiers: &Tiers, slow_dir: &Path, fast_dir: &Path) -> Result<Listing> {
        let fast_names = tiers.fast_fs.list(fast_dir)?;
        let slow_names = tiers.slow_fs.list(slow_dir)?;
        let regions = tiers.fast.list()?;
        Ok(Listing {
            fast_names,
            slow_names,
            regions,
        })
    }

    /// Checks that the files the recovered version names exist (`check_files_present`).
    fn check_present(
        &self,
        opts: &Options,
        slow_dir: &Path,
        fast_dir: &Path,
        versions: &VersionSet,
        dropped: Option<&manifest::DroppedRecord>,
    ) -> Result<()> {
        checks::check_files_present(
            [&self.slow_names, &self.fast_names, &self.regions],
            [slow_dir, fast_dir],
            versions,
            dropped,
            opts.l0_on_fast(),
        )
    }

    /// Files newer than the last manifest edit (WAL segments, tables of unfinished jobs) must
    /// not have their numbers reused.
    fn reserve_file_numbers(&self, versions: &mut VersionSet) {
        for name in self.fast_names.iter().chain(&self.slow_names) {
            if let Some(
                FileKind::Wal(n) | FileKind::Table(n) | FileKind::Manifest(n) | FileKind::Blob(n),
            ) = layout::parse(name)
            {
                versions.mark_file_number_used(n);
            }
        }
        for name in &self.regions {
            if let Some(FileKind::Wal(n) | FileKind::PersistentMemtable(n)) = layout::parse(name) {
                versions.mark_file_number_used(n);
            }
        }
    }
}

/// Replays the WAL segments the manifest does not cover, oldest first, and reopens the
/// persistent memtables among them; returns them with the keyspace registry (how keys are
/// laid out, and the keyspaces, read before the WAL's writes are applied). A read-only open
/// reads private copies of the segments (kept in `copies`) and writes nothing.
fn replay_memtables(
    opts: &Options,
    tiers: &Tiers,
    fast_dir: &Path,
    regions: &[String],
    versions: &VersionSet,
    copies: Option<&mut super::read_only::PrivateCopies>,
) -> Result<(Replayed, crate::keyspace::registry::Registry)> {
    let read_only = copies.is_some();
    let wals = replay::segments_to_replay(regions, versions.log_number());
    let segments = replay::open_segments(tiers, fast_dir, wals, copies)?;
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
    let design = crate::memtable::design::for_options(opts);
    let mut replayed = replay::replay_segments(
        opts,
        tiers,
        &segments,
        design.as_ref(),
        prefixed,
        versions.last_sequence(),
        read_only,
    )?;
    replay::reopen_persistent_memtables(
        tiers,
        fast_dir,
        regions,
        versions.log_number(),
        design.as_ref(),
        &mut replayed,
    )?;
    Ok((replayed, registry))
}

/// Moves the version set's last sequence number up to the newest one replayed.
fn adopt_last_sequence(versions: &mut VersionSet, max_seq: SeqNo) {
    if max_seq > versions.last_sequence() {
        versions.set_last_sequence(max_seq);
    }
}

/// The level structures of the fast tier an open maps besides the memtables.
struct Levels {
    regions: crate::engine::levels::Regions,
    pool: Option<crate::matrix::pages::PagePool>,
}

/// Opens the matrix container (and rebuilds its page pool) and the global index, as the
/// design has them. A read-only open reads private copies (kept in `copies`).
fn open_levels(
    opts: &Options,
    tiers: &Tiers,
    versions: &VersionSet,
    regions: &[String],
    exists: bool,
    copies: Option<&mut super::read_only::PrivateCopies>,
) -> Result<Levels> {
    let read_only = copies.is_some();
    let kind = crate::engine::levels::Kind::of(opts);
    let container = if kind.has_container() {
        Some(open_matrix(opts, tiers, versions, regions, exists, copies)?)
    } else {
        None
    };
    let pool = match &container {
        Some(h) => Some(rebuild_page_pool(opts, h, versions)?),
        None => None,
    };
    let global_index = regions::open_global_index(opts, tiers, versions, regions, read_only)?;
    Ok(Levels {
        regions: crate::engine::levels::Regions {
            container,
            global_index,
        },
        pool,
    })
}

/// Opens the matrix container, or creates it: a database whose first open failed between
/// CURRENT and the container's creation has no container file, and no row can refer to one.
fn open_matrix(
    opts: &Options,
    tiers: &Tiers,
    versions: &VersionSet,
    regions: &[String],
    exists: bool,
    copies: Option<&mut super::read_only::PrivateCopies>,
) -> Result<ContainerHandle> {
    let fast_dir = tiers.fast.dir();
    let v = versions.current();
    let rowless = v.container().receiver.is_empty() && v.container().compactor.is_empty();
    let present = regions.iter().any(|n| n == layout::CONTAINER);
    if copies.is_some() && !present {
        return Err(Error::invalid(format!(
            "{} has no matrix container yet (its creation was interrupted): open it \
             read-write once",
            fast_dir.display()
        )));
    }
    // A read-only handle reads a private copy of the live pages: a writer reuses pages once
    // column compaction frees them.
    let private = copies.map(|c| {
        let rows: regions::RowPages = v
            .container()
            .receiver
            .iter()
            .chain(v.container().compactor.iter())
            .map(|m| (m.row, m.pages.live().collect()))
            .collect();
        (c, rows)
    });
    regions::open_container(
        opts,
        tiers,
        fast_dir,
        exists && (present || !rowless),
        private,
    )
}

/// Rebuilds the container's page pool from the version, and verifies every row (header,
/// commit word, metadata checksum) before serving reads.
fn rebuild_page_pool(
    opts: &Options,
    h: &ContainerHandle,
    versions: &VersionSet,
) -> Result<crate::matrix::pages::PagePool> {
    let total = u32::try_from(opts.container_bytes / opts.page_bytes as u64)
        .map_err(|_| Error::invalid("container_bytes / page_bytes must fit in 32 bits"))?;
    let pool = rebuild_pool(&versions.current(), total, opts.page_bytes, &opts.slow_dir)?;
    let v = versions.current();
    for m in v
        .container()
        .receiver
        .iter()
        .chain(v.container().compactor.iter())
    {
        h.reader(m)?;
    }
    Ok(pool)
}

/// A fresh WAL segment for new writes.
fn start_wal(
    opts: &Options,
    tiers: &Tiers,
    versions: &mut VersionSet,
    free_wal_regions: &Mutex<FreeRegions>,
    counters: &Counters,
) -> Result<(FileNum, wal::Writer)> {
    let wal_number = versions.new_file_number();
    let bytes = super::wal_recycle::wal_segment_bytes(opts.write_buffer_bytes, 0);
    let wal_writer =
        create_wal(tiers, free_wal_regions, counters, bytes, wal_number).map_err(|e| {
            let what = "the WAL segment new writes go to (Options::write_buffer_bytes plus a \
                        quarter and 1 MiB)";
            super::fast_room::explain_full_fast_tier_at_open(tiers, what, bytes as u64, e)
        })?;
    Ok((wal_number, wal_writer))
}

/// The log number becomes the oldest segment that holds unflushed records (the new one,
/// `wal_number`, when none does), so the WAL segment the manifest names always exists
/// (`check_files_present`).
fn advance_log_number(
    tiers: &Tiers,
    slow_dir: &Path,
    versions: &mut VersionSet,
    imm: &std::collections::VecDeque<ImmMem>,
    wal_number: FileNum,
) -> Result<()> {
    let oldest = imm.front().map_or(wal_number, |m: &ImmMem| m.wal);
    if oldest > versions.log_number() {
        let mut edit = crate::version::edit::VersionEdit {
            log_number: Some(oldest),
            ..Default::default()
        };
        let v = versions.prepare(&mut edit).map_err(|reason| {
            // The state the edit does not apply to is the recovered manifest's, read to
            // its end.
            let path = layout::path(slow_dir, &layout::manifest_name(versions.manifest_number()));
            let end = tiers.slow_fs.open(&path).map_or(0, |f| f.len());
            Error::corruption(
                CorruptionSite::new(ArtifactKind::Manifest, path, end),
                reason,
            )
        })?;
        versions.install(&edit, v);
    }
    Ok(())
}

/// A fresh manifest (the old one may end in a torn record), named by CURRENT.
fn start_manifest(
    tiers: &Tiers,
    slow_dir: &Path,
    versions: &mut VersionSet,
) -> Result<ManifestWriter> {
    let manifest_number = versions.new_file_number();
    versions.set_manifest_number(manifest_number);
    let manifest_writer = ManifestWriter::create(
        tiers.slow_fs.as_ref(),
        slow_dir,
        manifest_number,
        &versions.snapshot_edit(),
    )?;
    manifest::set_current(tiers.slow_fs.as_ref(), slow_dir, manifest_number)?;
    Ok(manifest_writer)
}
