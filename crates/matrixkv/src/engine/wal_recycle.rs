//! WAL segment creation and recycling: the regions of obsolete segments are kept as free
//! regions (`NNNNNN.walfree`, still mapped) and taken over by new segments, so a memtable
//! switch neither reserves and zero-fills a region (tens of milliseconds for 64 MiB on tmpfs)
//! nor page-faults fresh pages in afterwards. See docs/decisions/0010-wal-recycling.md.
//!
//! Life of a region: segment `A.wal` (written) → its memtable's flush is recorded in the
//! manifest, the flush hands the mapping over ([`retire_oldest_imm`]) → it stays readable
//! while it is among the newest `Options::wal_retention_segments` obsolete segments or a live
//! `UpdatesIter` pins it (`engine::updates`; [`take_aged_wals`]) → obsolete-file deletion
//! (a background thread), if fewer than `Options::wal_recycle_segments` free regions exist and
//! the region has the standard length, zeroes and persists the bytes `A` used (the pages are
//! mapped already: no page fault) and renames it `A.walfree`; otherwise it deletes it → a
//! memtable switch takes it: writes and persists the header of segment `B`, renames
//! `A.walfree` → `B.wal`, syncs the directory (a new region is made the same way, as
//! `B.walfree` renamed `B.wal` once its header is persisted). A crash anywhere leaves either `A.wal` below
//! the log number (deleted at open, never replayed), a free region (zero but for possibly
//! `B`'s header; reused or deleted at the next open, never replayed) or `B.wal` with its header
//! persisted and zeros after it, exactly like a new segment. The WAL format v2 also seeds
//! record checksums with the segment number, so `A`'s records could never be taken for `B`'s
//! even if zeroing were skipped.
//!
//! Thread safety: [`FreeRegions`] lives in a leaf mutex (`DbInner::free_wal_regions`): held
//! for a push or a pop only, never during I/O, never while taking another lock.

use std::sync::Arc;

use crate::lock_order::Mutex;

use super::{DbInner, State};
use crate::error::Result;
use crate::key::SeqNo;
use crate::layout::{self, FileKind, FileNum};
use crate::options::Tiers;
use crate::stats::Counters;
use crate::tier::Region;
use crate::version::set::VersionSet;
use crate::wal;

/// The mapped region of a WAL segment and how many of its first bytes were written.
#[derive(Clone)]
pub(crate) struct SegmentRegion {
    /// The mapping.
    pub(crate) region: Arc<dyn Region>,
    /// Bytes from offset 0 that may be non-zero (what recycling must clear).
    pub(crate) used: usize,
}

impl SegmentRegion {
    /// The region of `writer`'s segment, used up to its end marker.
    pub(crate) fn of(writer: &wal::Writer) -> SegmentRegion {
        let region = Arc::clone(writer.region());
        let end = usize::try_from(writer.bytes_written()).unwrap_or(usize::MAX);
        SegmentRegion {
            used: end
                .saturating_add(wal::format::END_MARKER_LEN)
                .min(region.len()),
            region,
        }
    }
}

/// An obsolete WAL segment (below the log number) that is neither recycled nor deleted yet.
pub(crate) struct RetiredWal {
    /// The segment's number.
    pub(crate) number: FileNum,
    /// The segment's sequence numbers start here (see `ImmMem::first_seq`).
    pub(crate) first_seq: SeqNo,
    /// It holds no record (its memtable was empty): no history to retain, so it does not count
    /// towards `Options::wal_retention_segments` and goes at the next pass unless pinned.
    pub(crate) empty: bool,
    /// Its mapping and how much of it was written (`None`: read by name, deleted rather than
    /// recycled).
    pub(crate) region: Option<SegmentRegion>,
}

/// Free regions of obsolete WAL segments, mapped, all zero, waiting to be recycled.
pub(crate) struct FreeRegions {
    /// The regions, named `NNNNNN.walfree` after their old segment number.
    free: Vec<(FileNum, Arc<dyn Region>)>,
    /// Slots promised to regions being renamed to their free name (no lock held meanwhile).
    reserved: usize,
    /// Most free regions kept (`Options::wal_recycle_segments`).
    limit: usize,
}

impl FreeRegions {
    /// No free region; at most `limit` will be kept.
    pub(crate) fn new(limit: usize) -> FreeRegions {
        FreeRegions {
            free: Vec::new(),
            reserved: 0,
            limit,
        }
    }

    /// Reserves room for one more free region; false if the pool is full.
    fn reserve(&mut self) -> bool {
        self.reserve_beside(0)
    }

    /// Reserves room for one more free region while leaving room for `pending` regions that
    /// will come back by recycling; false if there is no such room.
    fn reserve_beside(&mut self, pending: usize) -> bool {
        if self.free.len() + self.reserved + pending >= self.limit {
            return false;
        }
        self.reserved += 1;
        true
    }

    /// Fills a reserved slot with the free region of old segment `number`.
    fn fill(&mut self, number: FileNum, region: Arc<dyn Region>) {
        self.reserved = self.reserved.saturating_sub(1);
        self.free.push((number, region));
    }

    /// Gives a reserved slot back.
    fn cancel(&mut self) {
        self.reserved = self.reserved.saturating_sub(1);
    }

    /// Takes a free region of exactly `len` bytes, if there is one.
    fn take(&mut self, len: usize) -> Option<(FileNum, Arc<dyn Region>)> {
        let i = self.free.iter().position(|(_, r)| r.len() == len)?;
        Some(self.free.swap_remove(i))
    }

    #[cfg(test)]
    /// Number of free regions.
    pub(crate) fn len(&self) -> usize {
        self.free.len()
    }
}

/// Size of a WAL segment: the standard size, a memtable's worth of records with headroom,
/// whenever a record of `needed` payload bytes fits in an empty segment of that size (so that
/// segments can be recycled: only standard-size regions are kept); else room for that one huge
/// record and 2 MiB more.
pub(crate) fn wal_segment_bytes(write_buffer_bytes: usize, needed: usize) -> usize {
    let base = write_buffer_bytes + write_buffer_bytes / 4 + (1 << 20);
    let fits = needed
        .checked_add(wal::format::MIN_REGION_LEN)
        .is_some_and(|n| n <= base);
    if fits { base } else { needed + (2 << 20) }
}

/// Creates WAL segment `number` in a region of `len` bytes (see [`wal_segment_bytes`]): a
/// free region of that size if `free` has one, else a new region. The directory is synced before the segment is returned, so the segment is found
/// at the next open once its records are persisted.
///
/// A recycled region gets its new header (persisted) while it still has its free name, and
/// only then is renamed to the segment's name: a crash in between leaves a free region.
/// Counts the segment in `counters` (created or recycled).
pub(crate) fn create_wal(
    tiers: &Tiers,
    free: &Mutex<FreeRegions>,
    counters: &Counters,
    len: usize,
    number: FileNum,
) -> Result<wal::Writer> {
    let name = layout::wal_name(number);
    let path = layout::path(tiers.fast.dir(), &name);
    let taken = free.lock().take(len);
    let writer = match taken {
        Some((old, region)) => {
            let writer = wal::Writer::create(region, number, path)?;
            tiers.fast.rename(&layout::wal_free_name(old), &name)?;
            log::debug!("matrixkv: WAL segment {name} recycles the region of segment {old}");
            Counters::add(&counters.wal_segments_recycled, 1);
            writer
        }
        None => {
            // Made under its free-region name and renamed once its header is persisted, as a
            // recycled region is: a crash (or a failed persist) before the rename leaves a
            // free region, never a segment whose header is half there.
            let free_name = layout::wal_free_name(number);
            let region = tiers.fast.create_region(&free_name, len)?;
            Counters::add(&counters.wal_segments_created, 1);
            let writer = wal::Writer::create(region, number, path)?;
            tiers.fast.rename(&free_name, &name)?;
            writer
        }
    };
    tiers.fast.sync_dir()?;
    Ok(writer)
}

/// Pops the oldest immutable memtable once its flush is installed, handing its WAL segment
/// (now obsolete) to `State::retired_wals`: retained for `Db::updates_since`, then recycled or
/// deleted by obsolete-file deletion ([`take_aged_wals`]).
pub(crate) fn retire_oldest_imm(st: &mut State) {
    if let Some(m) = st.imm.pop_front() {
        st.retired_wals.push_back(RetiredWal {
            number: m.wal,
            first_seq: m.first_seq,
            empty: m.mem.is_empty(),
            region: m.region,
        });
    }
}

/// Takes out of `st.retired_wals` the obsolete segments that obsolete-file deletion may now
/// recycle or delete: those holding records beyond the newest `retention` that do, and the
/// empty ones; but never one a live `UpdatesIter` pins (it stays until the iterator lets it
/// go). When a segment with records goes while an older one stays pinned, the history has a
/// gap below it: `State::wal_history_from` moves past it, so new iterators do not read the
/// older one (only the iterators that pin it do).
pub(crate) fn take_aged_wals(
    st: &mut State,
    retention: usize,
    log_number: FileNum,
) -> Vec<RetiredWal> {
    let all = std::mem::take(&mut st.retired_wals);
    // Segments with records beyond the newest `retention` of them, oldest first.
    let mut beyond = all
        .iter()
        .filter(|w| !w.empty)
        .count()
        .saturating_sub(retention);
    let mut aged = Vec::new();
    for w in all {
        let candidate = w.empty || beyond > 0;
        if !w.empty {
            beyond = beyond.saturating_sub(1);
        }
        if candidate && w.number < log_number && !super::updates::is_pinned(st, w.number) {
            if !w.empty {
                st.wal_history_from = st.wal_history_from.max(FileNum(w.number.0 + 1));
            }
            aged.push(w);
        } else {
            st.retired_wals.push_back(w);
        }
    }
    aged
}

/// At open: takes the free regions found in the fast tier (`regions`, its listing) into a new
/// pool, up to `limit` of them of the standard segment length; deletes the others. Their
/// numbers are marked used. Failures to map or delete one are logged, not fatal: a free region
/// is never replayed. A free region is zero (cleared before it got its free name) but for,
/// possibly, the header a crash left in it, which the next segment's header overwrites.
pub(crate) fn recover_free_regions(
    tiers: &Tiers,
    regions: &[String],
    versions: &mut VersionSet,
    limit: usize,
    write_buffer_bytes: usize,
) -> FreeRegions {
    let len = wal_segment_bytes(write_buffer_bytes, 0);
    let mut pool = FreeRegions::new(limit);
    for name in regions {
        let Some(FileKind::WalFree(n)) = layout::parse(name) else {
            continue;
        };
        versions.mark_file_number_used(n);
        if pool.reserve() {
            match tiers.fast.open_region(name) {
                Ok(region) if region.len() == len => {
                    pool.fill(n, region);
                    continue;
                }
                Ok(_) => {}
                Err(e) => log::warn!("matrixkv: cannot map free WAL region {name}: {e}"),
            }
            pool.cancel();
        }
        match tiers.fast.remove(name) {
            Ok(()) => log::debug!("matrixkv: deleted free WAL region {name}"),
            Err(e) => log::warn!("matrixkv: cannot delete free WAL region {name}: {e}"),
        }
    }
    pool
}

impl DbInner {
    /// Tops the pool of free regions up to `Options::wal_recycle_segments`, counting the
    /// segments of immutable memtables and retired segments (they come back by recycling),
    /// with new regions, so that even the first memtable switches after an open take a region
    /// that is reserved and mapped already instead of creating one (a 64 MiB `fallocate` on
    /// tmpfs took 33 ms in the writer's path). Each new region is written with zeros once, which maps its
    /// pages in here rather than under the writer. Called by the flush thread when it is first
    /// idle after the open, without locks. Stops at the first failure (a full fast tier, for
    /// one), logging it: a switch creates its segment as before.
    ///
    /// Costs no space the steady state would not hold anyway: recycling keeps up to the same
    /// number of obsolete regions. A crash leaves `NNNNNN.walfree` files, all zero, which the
    /// next open takes or deletes like any free region ([`recover_free_regions`]).
    pub(crate) fn prepare_free_wal_regions(&self) {
        let len = wal_segment_bytes(self.opts.write_buffer_bytes, 0);
        loop {
            let number = {
                let mut st = self.state.lock();
                // Segments that will come back by recycling: those of the immutable memtables
                // and the obsolete ones beyond the retained.
                let pending = (st.imm.len() + st.retired_wals.len())
                    .saturating_sub(self.opts.wal_retention_segments);
                if st.shutting_down
                    || st.poison.is_some()
                    || !self.free_wal_regions.lock().reserve_beside(pending)
                {
                    return;
                }
                st.versions.new_file_number()
            };
            let name = layout::wal_free_name(number);
            let path = layout::path(self.tiers.fast.dir(), &name);
            let made = self
                .tiers
                .fast
                .create_region(&name, len)
                .and_then(|region| wal::zero_prefix(region.as_ref(), &path, len).map(|()| region));
            match made {
                Ok(region) => {
                    Counters::add(&self.counters.wal_segments_created, 1);
                    self.free_wal_regions.lock().fill(number, region);
                    log::debug!("matrixkv: prepared free WAL region {name}");
                }
                Err(e) => {
                    self.free_wal_regions.lock().cancel();
                    if let Err(rm) = self.tiers.fast.remove(&name) {
                        log::debug!("matrixkv: no partial free WAL region {name} to remove: {rm}");
                    }
                    log::warn!(
                        "matrixkv: cannot prepare a free WAL region ({e}); memtable switches create their segments"
                    );
                    return;
                }
            }
        }
    }

    /// Creates WAL segment `number` in a region of one page, for designs whose memtables are
    /// all persistent: their writer's segment only carries the log number and is never
    /// written (a memtable-sized one would be allocated and zeroed at every switch, on the
    /// writer's path). Such a region is deleted, not recycled, once obsolete.
    pub(crate) fn create_unwritten_wal(&self, number: FileNum) -> Result<wal::Writer> {
        let len = wal::format::MIN_REGION_LEN.next_multiple_of(4096);
        create_wal(
            &self.tiers,
            &self.free_wal_regions,
            &self.counters,
            len,
            number,
        )
    }

    /// Creates WAL segment `number`, large enough for a memtable's worth of records and for a
    /// record of `needed` bytes (see [`create_wal`]).
    pub(crate) fn create_wal(&self, number: FileNum, needed: usize) -> Result<wal::Writer> {
        let len = wal_segment_bytes(self.opts.write_buffer_bytes, needed);
        create_wal(
            &self.tiers,
            &self.free_wal_regions,
            &self.counters,
            len,
            number,
        )
    }

    /// Chooses, among `retired` segments (obsolete: below the log number, no longer retained),
    /// those whose regions are kept as free regions: mapped, of the standard length, while the
    /// pool has room; a slot is reserved for each (under `state`, so the preparation of new
    /// regions counts them while they are being cleared). The others are left under their
    /// segment names for obsolete-file deletion to remove.
    pub(crate) fn reserve_for_recycling(
        &self,
        retired: Vec<RetiredWal>,
    ) -> Vec<(FileNum, SegmentRegion)> {
        let len = wal_segment_bytes(self.opts.write_buffer_bytes, 0);
        let mut pool = self.free_wal_regions.lock();
        retired
            .into_iter()
            .filter_map(|w| Some((w.number, w.region?)))
            // A region that memtables or iterators still view (the semi-persistent design) is
            // sealed; it is deleted instead, and unmapped when its last view goes.
            .filter(|(_, r)| r.region.len() == len && r.region.live_views() == 0 && pool.reserve())
            .collect()
    }

    /// Keeps the regions of `retired` segments, each with a reserved slot
    /// ([`DbInner::reserve_for_recycling`]), as free regions: zeroes (and persists) the bytes
    /// each used, then renames it. Called without locks.
    pub(crate) fn recycle_retired_wals(&self, retired: Vec<(FileNum, SegmentRegion)>) {
        for (n, SegmentRegion { region, used }) in retired {
            let (from, to) = (layout::wal_name(n), layout::wal_free_name(n));
            let path = layout::path(self.tiers.fast.dir(), &from);
            let cleared = wal::zero_prefix(region.as_ref(), &path, used)
                .and_then(|()| self.tiers.fast.rename(&from, &to));
            match cleared {
                Ok(()) => {
                    self.free_wal_regions.lock().fill(n, region);
                    log::debug!("matrixkv: kept obsolete WAL segment {from} as {to}");
                }
                Err(e) => {
                    self.free_wal_regions.lock().cancel();
                    log::warn!("matrixkv: cannot keep obsolete WAL segment {from} for reuse: {e}");
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::SimulatedRegion;

    fn region(len: usize) -> Arc<dyn Region> {
        Arc::new(SimulatedRegion::new(len))
    }

    #[test]
    fn segments_have_the_standard_size_unless_a_record_needs_more() {
        let base = wal_segment_bytes(64 << 10, 0);
        assert_eq!(base, (64 << 10) + (16 << 10) + (1 << 20));
        let most = base - wal::format::MIN_REGION_LEN;
        assert_eq!(wal_segment_bytes(64 << 10, most), base);
        assert_eq!(wal_segment_bytes(64 << 10, most + 1), most + 1 + (2 << 20));
        // The largest record that gets a standard segment fits in it.
        let region: Arc<dyn Region> = Arc::new(SimulatedRegion::new(base));
        let w = wal::Writer::create(region, FileNum(1), "/x".into()).unwrap();
        assert!(w.fits(most));
    }

    #[test]
    fn the_pool_keeps_at_most_its_limit_counting_reservations() {
        let mut p = FreeRegions::new(2);
        assert!(p.reserve());
        assert!(p.reserve());
        assert!(!p.reserve(), "two reserved: full");
        p.fill(FileNum(3), region(100));
        p.cancel();
        assert_eq!(p.len(), 1);
        assert!(p.reserve());
        p.fill(FileNum(4), region(200));
        assert!(!p.reserve());
        assert_eq!(p.take(300).map(|(n, _)| n), None);
        assert_eq!(p.take(200).map(|(n, _)| n), Some(FileNum(4)));
        assert_eq!(p.take(200).map(|(n, _)| n), None);
        assert_eq!(p.len(), 1);
        assert!(!FreeRegions::new(0).reserve(), "0 keeps none");
    }
}
