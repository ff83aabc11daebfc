//! [`SimulatedRegion`]: an in-memory [`Region`] that tracks which stores were made persistent,
//! so crash tests can build the image a power loss would leave (docs/reliability.md T3, simplified).
//!
//! Model: the region keeps the *current* bytes (what reads see) and the *persisted* image, plus
//! the set of 8-byte aligned words stored to since they were last persisted ("dirty" words; x86
//! guarantees failure atomicity for aligned 8-byte stores only). `persist(range)` copies every
//! dirty word overlapping the range to the persisted image. [`SimulatedRegion::crash_image`]
//! then says which dirty words survive a crash, by [`CrashPolicy`]. Flush and fence are not
//! modelled separately: a successful `persist` is both.
//!
//! Fault injection goes through a [`FaultPlan`], which several regions may share (the engine's
//! simulated fast tier gives all its regions one plan, so "the n-th persist of the tier fails").
//!
//! Called by the engine's simulated fast tier and by crash tests. No unsafe code.
//!
//! Thread safety: `Send + Sync`; every method takes `&self` and locks an internal mutex (lock
//! order: a region's state, then its fault plan). A poisoned mutex is recovered, as its state is
//! always consistent between statements that can panic.

use std::fmt;
use std::io;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::{PersistMode, Region};

/// `EIO`, the error every injected fault reports.
const EIO: i32 = 5;

/// Which unpersisted stores survive a simulated crash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPolicy {
    /// A process crash: the kernel keeps every store made to a shared mapping.
    KeepAll,
    /// A power loss where nothing unpersisted reached the media.
    DropUnpersisted,
    /// A power loss where each unpersisted 8-byte word independently survives with
    /// probability 1/2, so stores can become persistent in any order. Deterministic in `seed`.
    Random {
        /// Seed of the word-selection sequence.
        seed: u64,
    },
}

/// Countdowns to injected failures, shared by every region built with the same plan.
///
/// `Some(n)`: the next `n` calls succeed, every later one fails with `EIO` until the countdown
/// is reset with `None`.
#[derive(Debug, Default)]
pub struct FaultPlan {
    countdowns: Mutex<Countdowns>,
}

#[derive(Debug, Default)]
struct Countdowns {
    persist: Option<u64>,
    writes: Option<u64>,
    /// One-shot fault on the tier's directory operations: `(calls that succeed first, errno)`.
    dir_op: Option<(u64, i32)>,
    /// Persist/publish calls, writes and directory operations seen so far.
    persists_seen: u64,
    writes_seen: u64,
    dir_ops_seen: u64,
    /// Only calls from the thread of this name count down and fail (`None`: every thread).
    thread: Option<String>,
    /// Record every call in `traces`, not only the failed ones.
    tracing: bool,
    traces: Vec<RegionOpTrace>,
}

/// One write or persist recorded by a [`FaultPlan`]: every call an injected fault failed, and
/// every call while [`FaultPlan::trace_ops`] is on. The backtrace tells which code called it.
#[derive(Debug)]
pub struct RegionOpTrace {
    /// `"persist"` (persist or publish), `"write"`, or the name of a directory operation of
    /// the tier that admitted it (`"create_region"`, ...).
    pub op: &'static str,
    /// The injected fault failed it.
    pub failed: bool,
    /// Where it was called from.
    pub backtrace: std::backtrace::Backtrace,
    /// The name of the calling thread, if it has one.
    pub thread: Option<String>,
}

impl FaultPlan {
    /// A plan that injects nothing.
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// After `n` more successful persist or publish calls, every later one fails with `EIO`;
    /// `None` stops injecting.
    pub fn fail_persist_after(&self, n: Option<u64>) {
        self.lock().persist = n;
    }

    /// After `n` more successful writes, every later write fails with `EIO`; `None` stops
    /// injecting.
    pub fn fail_writes_after(&self, n: Option<u64>) {
        self.lock().writes = n;
    }

    /// Restricts the countdowns to calls from the thread named `name` (`None`: every thread),
    /// so a test can fail the n-th call of one background job whatever other threads do.
    pub fn only_on_thread(&self, name: Option<String>) {
        self.lock().thread = name;
    }

    fn lock(&self) -> MutexGuard<'_, Countdowns> {
        self.countdowns
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// With `true`, records every write and persist from now on (see [`RegionOpTrace`]; slow:
    /// a backtrace each); with `false`, only those an injected fault fails.
    pub fn trace_ops(&self, on: bool) {
        self.lock().tracing = on;
    }

    /// The calls recorded since the last call (see [`RegionOpTrace`]).
    pub fn take_traces(&self) -> Vec<RegionOpTrace> {
        std::mem::take(&mut self.lock().traces)
    }

    /// Persist/publish calls, writes and directory operations attempted so far (failed ones
    /// included).
    pub fn op_counts(&self) -> (u64, u64, u64) {
        let c = self.lock();
        (c.persists_seen, c.writes_seen, c.dir_ops_seen)
    }

    /// After `n` more successful directory operations (see [`FaultPlan::admit_dir_op`]), the
    /// next one fails once with the OS error `errno`; `None` cancels.
    pub fn fail_dir_op_after(&self, n: Option<u64>, errno: i32) {
        self.lock().dir_op = n.map(|n| (n, errno));
    }

    /// Admits a directory operation `op` of a simulated tier (create, open, remove, list,
    /// sync), or reports the injected failure.
    pub fn admit_dir_op(&self, op: &'static str) -> io::Result<()> {
        let mut c = self.lock();
        c.dir_ops_seen += 1;
        let r = match c.dir_op {
            _ if !on_chosen_thread(&c) => Ok(()),
            None => Ok(()),
            Some((0, errno)) => {
                c.dir_op = None;
                Err(io::Error::from_raw_os_error(errno))
            }
            Some((n, errno)) => {
                c.dir_op = Some((n - 1, errno));
                Ok(())
            }
        };
        record(&mut c, op, r.is_err());
        r
    }

    /// Consumes one persist from the countdown, or reports the injected failure.
    fn admit_persist(&self) -> io::Result<()> {
        let mut c = self.lock();
        c.persists_seen += 1;
        let chosen = on_chosen_thread(&c);
        let r = admit(&mut c.persist, chosen);
        record(&mut c, "persist", r.is_err());
        r
    }

    /// Consumes one write from the countdown, or reports the injected failure.
    fn admit_write(&self) -> io::Result<()> {
        let mut c = self.lock();
        c.writes_seen += 1;
        let chosen = on_chosen_thread(&c);
        let r = admit(&mut c.writes, chosen);
        record(&mut c, "write", r.is_err());
        r
    }
}

fn record(c: &mut Countdowns, op: &'static str, failed: bool) {
    if c.tracing || failed {
        c.traces.push(RegionOpTrace {
            op,
            failed,
            backtrace: std::backtrace::Backtrace::force_capture(),
            thread: std::thread::current().name().map(str::to_owned),
        });
    }
}

fn on_chosen_thread(c: &Countdowns) -> bool {
    c.thread
        .as_deref()
        .is_none_or(|name| std::thread::current().name() == Some(name))
}

/// Counts one call against `countdown` if it came from the chosen thread (`chosen`).
fn admit(countdown: &mut Option<u64>, chosen: bool) -> io::Result<()> {
    match countdown {
        _ if !chosen => Ok(()),
        None => Ok(()),
        Some(0) => Err(io::Error::from_raw_os_error(EIO)),
        Some(n) => {
            *n -= 1;
            Ok(())
        }
    }
}

/// An in-memory region that remembers what was persisted. See the module documentation.
pub struct SimulatedRegion {
    len: usize,
    state: Mutex<State>,
    faults: Arc<FaultPlan>,
}

struct State {
    /// What reads see.
    current: Vec<u8>,
    /// What survives a power loss.
    persisted: Vec<u8>,
    /// Bit `w` set: word `w` (bytes `8w..8w+8`) was stored to since it was last persisted.
    /// Invariant: a clear bit means the word is equal in `current` and `persisted`.
    dirty: Vec<u64>,
    /// Successful persist and publish calls.
    persist_count: u64,
}

impl SimulatedRegion {
    /// A zero-filled region of `len` bytes, all persisted, with its own fault plan.
    pub fn new(len: usize) -> SimulatedRegion {
        SimulatedRegion::from_image(vec![0; len])
    }

    /// A region whose current and persisted contents are `image` (e.g. a crash image).
    pub fn from_image(image: Vec<u8>) -> SimulatedRegion {
        SimulatedRegion::from_image_with_faults(image, Arc::new(FaultPlan::new()))
    }

    /// A zero-filled region of `len` bytes that takes its failures from the shared `faults`.
    pub fn with_faults(len: usize, faults: Arc<FaultPlan>) -> SimulatedRegion {
        SimulatedRegion::from_image_with_faults(vec![0; len], faults)
    }

    /// A region holding `image` that takes its failures from the shared `faults`.
    pub fn from_image_with_faults(image: Vec<u8>, faults: Arc<FaultPlan>) -> SimulatedRegion {
        let len = image.len();
        let words = len.div_ceil(8);
        SimulatedRegion {
            len,
            state: Mutex::new(State {
                persisted: image.clone(),
                current: image,
                dirty: vec![0; words.div_ceil(64)],
                persist_count: 0,
            }),
            faults,
        }
    }

    /// The fault plan of this region (possibly shared with other regions).
    pub fn fault_plan(&self) -> &Arc<FaultPlan> {
        &self.faults
    }

    /// After `n` more successful persist/publish calls on any region sharing this region's fault
    /// plan, every later one fails with `EIO` (nothing is persisted) until reset with `None`.
    pub fn fail_persist_after(&self, n: Option<u64>) {
        self.faults.fail_persist_after(n);
    }

    /// After `n` more successful writes on any region sharing this region's fault plan, every
    /// later write fails with `EIO` (nothing is stored) until reset with `None`.
    pub fn fail_writes_after(&self, n: Option<u64>) {
        self.faults.fail_writes_after(n);
    }

    /// Successful persist and publish calls made on this region.
    pub fn persist_count(&self) -> u64 {
        self.lock().persist_count
    }

    /// The byte ranges `(offset, len)` holding stores not yet persisted, merged and in order,
    /// at 8-byte word granularity (clipped to the region's length).
    pub fn unpersisted_ranges(&self) -> Vec<(usize, usize)> {
        let st = self.lock();
        let mut out: Vec<(usize, usize)> = Vec::new();
        for w in dirty_words(&st.dirty, 0, self.words()) {
            let (start, end) = self.word_bytes(w);
            match out.last_mut() {
                Some((o, l)) if *o + *l == start => *l = end - *o,
                _ => out.push((start, end - start)),
            }
        }
        out
    }

    /// The bytes a crash right now would leave, under `policy`. The region is unchanged.
    pub fn crash_image(&self, policy: CrashPolicy) -> Vec<u8> {
        let st = self.lock();
        match policy {
            CrashPolicy::KeepAll => st.current.clone(),
            CrashPolicy::DropUnpersisted => st.persisted.clone(),
            CrashPolicy::Random { seed } => {
                let mut image = st.persisted.clone();
                let mut rng = SplitMix64(seed);
                for w in dirty_words(&st.dirty, 0, self.words()) {
                    if rng.next() & 1 == 1 {
                        let (start, end) = self.word_bytes(w);
                        if let (Some(dst), Some(src)) =
                            (image.get_mut(start..end), st.current.get(start..end))
                        {
                            dst.copy_from_slice(src);
                        }
                    }
                }
                image
            }
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Number of (possibly partial, at the end) 8-byte words.
    fn words(&self) -> usize {
        self.len.div_ceil(8)
    }

    /// The byte range of word `w`, clipped to the region.
    fn word_bytes(&self, w: usize) -> (usize, usize) {
        let start = w * 8;
        (start, (start + 8).min(self.len))
    }

    /// The words `[first, end)` overlapping the byte range `[offset, offset + len)`; `None` if
    /// the range is outside the region.
    fn covered_words(&self, offset: usize, len: usize) -> io::Result<(usize, usize)> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => {
                if len == 0 {
                    Ok((0, 0))
                } else {
                    Ok((offset / 8, end.div_ceil(8)))
                }
            }
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "range of {len} bytes at offset {offset} is outside the {} byte simulated \
                     region",
                    self.len
                ),
            )),
        }
    }

    fn check_word(&self, offset: usize) -> io::Result<()> {
        if !offset.is_multiple_of(8) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("commit word offset {offset} is not 8-byte aligned"),
            ));
        }
        self.covered_words(offset, 8).map(|_| ())
    }

    /// Stores `data` at `offset` (range already checked) and marks its words dirty.
    fn store(&self, st: &mut State, offset: usize, data: &[u8]) {
        if let Some(dst) = st.current.get_mut(offset..offset + data.len()) {
            dst.copy_from_slice(data);
        }
        if !data.is_empty() {
            set_dirty(&mut st.dirty, offset / 8, (offset + data.len()).div_ceil(8));
        }
    }

    /// Persists the words `[first, end)` (already checked) if the fault plan admits it.
    fn persist_words(&self, st: &mut State, first: usize, end: usize) -> io::Result<()> {
        self.faults.admit_persist()?;
        let dirty: Vec<usize> = dirty_words(&st.dirty, first, end).collect();
        for w in dirty {
            let (start, stop) = self.word_bytes(w);
            let State {
                current, persisted, ..
            } = st;
            if let (Some(dst), Some(src)) =
                (persisted.get_mut(start..stop), current.get(start..stop))
            {
                dst.copy_from_slice(src);
            }
        }
        clear_dirty(&mut st.dirty, first, end);
        st.persist_count += 1;
        Ok(())
    }
}

impl fmt::Debug for SimulatedRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = self.lock();
        let dirty_words: u32 = st.dirty.iter().map(|c| c.count_ones()).sum();
        f.debug_struct("SimulatedRegion")
            .field("len", &self.len)
            .field("dirty_words", &dirty_words)
            .field("persist_count", &st.persist_count)
            .finish_non_exhaustive()
    }
}

impl Region for SimulatedRegion {
    fn len(&self) -> usize {
        self.len
    }

    /// Stores `data`; on an injected failure nothing is stored.
    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.covered_words(offset, data.len())?;
        let mut st = self.lock();
        self.faults.admit_write()?;
        self.store(&mut st, offset, data);
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.covered_words(offset, buf.len())?;
        let st = self.lock();
        if let Some(src) = st.current.get(offset..offset + buf.len()) {
            buf.copy_from_slice(src);
        }
        Ok(())
    }

    /// Persists every dirty word overlapping the range; on an injected failure nothing is.
    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        let (first, end) = self.covered_words(offset, len)?;
        let mut st = self.lock();
        self.persist_words(&mut st, first, end)
    }

    /// Stores the word, then persists it. On an injected persist failure the store stays
    /// visible to reads but unpersisted, as after a failed flush on real hardware.
    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        self.check_word(offset)?;
        let mut st = self.lock();
        self.store(&mut st, offset, &value.to_le_bytes());
        self.persist_words(&mut st, offset / 8, offset / 8 + 1)
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        self.check_word(offset)?;
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn persist_mode(&self) -> PersistMode {
        PersistMode::Simulated
    }
}

/// The bits of bitset chunk `chunk` that lie in the word range `[first, end)`.
fn chunk_mask(chunk: usize, first: usize, end: usize) -> u64 {
    let base = chunk * 64;
    let lo = first.max(base) - base;
    let hi = end.min(base + 64).saturating_sub(base);
    if hi <= lo {
        0
    } else if hi - lo == 64 {
        u64::MAX
    } else {
        ((1u64 << (hi - lo)) - 1) << lo
    }
}

fn set_dirty(dirty: &mut [u64], first: usize, end: usize) {
    if first >= end {
        return;
    }
    for chunk in first / 64..end.div_ceil(64) {
        if let Some(c) = dirty.get_mut(chunk) {
            *c |= chunk_mask(chunk, first, end);
        }
    }
}

fn clear_dirty(dirty: &mut [u64], first: usize, end: usize) {
    if first >= end {
        return;
    }
    for chunk in first / 64..end.div_ceil(64) {
        if let Some(c) = dirty.get_mut(chunk) {
            *c &= !chunk_mask(chunk, first, end);
        }
    }
}

/// The dirty words in `[first, end)`, in increasing order (skips clean chunks quickly).
fn dirty_words(dirty: &[u64], first: usize, end: usize) -> impl Iterator<Item = usize> + '_ {
    let chunks = if first < end {
        first / 64..end.div_ceil(64)
    } else {
        0..0
    };
    chunks.flat_map(move |chunk| {
        let mut bits = dirty.get(chunk).copied().unwrap_or(0) & chunk_mask(chunk, first, end);
        std::iter::from_fn(move || {
            if bits == 0 {
                None
            } else {
                let bit = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                Some(chunk * 64 + bit)
            }
        })
    })
}

/// The splitmix64 generator (Steele, Lea, Flood 2014): small, fast and deterministic.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn power_loss_drops_unpersisted_write_and_keeps_persisted_one() {
        let r = SimulatedRegion::new(64);
        r.write(0, b"persisted").unwrap();
        r.persist(0, 9).unwrap();
        r.write(32, b"lost").unwrap();
        let img = r.crash_image(CrashPolicy::DropUnpersisted);
        assert_eq!(&img[..9], b"persisted");
        assert_eq!(&img[32..36], &[0u8; 4]);
        let mut b = [0u8; 4];
        r.read(32, &mut b).unwrap();
        assert_eq!(&b, b"lost", "reads see unpersisted stores");
    }

    #[test]
    fn process_crash_keeps_every_store() {
        let r = SimulatedRegion::new(64);
        r.write(0, b"persisted").unwrap();
        r.persist(0, 9).unwrap();
        r.write(32, b"kept").unwrap();
        let img = r.crash_image(CrashPolicy::KeepAll);
        assert_eq!(&img[..9], b"persisted");
        assert_eq!(&img[32..36], b"kept");
    }

    #[test]
    fn persist_covers_every_overlapping_word() {
        let r = SimulatedRegion::new(40);
        r.write(0, &[1u8; 40]).unwrap();
        // Byte 9 lies in word 1 (bytes 8..16): that whole word is persisted.
        r.persist(9, 1).unwrap();
        assert_eq!(r.unpersisted_ranges(), vec![(0, 8), (16, 24)]);
        let img = r.crash_image(CrashPolicy::DropUnpersisted);
        assert_eq!(&img[8..16], &[1u8; 8]);
        assert_eq!(&img[..8], &[0u8; 8]);
        r.persist(0, 40).unwrap();
        assert!(r.unpersisted_ranges().is_empty());
        assert_eq!(r.persist_count(), 2);
    }

    #[test]
    fn unpersisted_ranges_are_clipped_to_a_partial_last_word() {
        let r = SimulatedRegion::new(13);
        r.write(12, b"z").unwrap();
        r.write(3, b"ab").unwrap();
        assert_eq!(r.unpersisted_ranges(), vec![(0, 13)]);
        r.persist(0, 1).unwrap();
        assert_eq!(r.unpersisted_ranges(), vec![(8, 5)]);
    }

    #[test]
    fn random_crash_is_deterministic_and_keeps_a_subset() {
        let r = SimulatedRegion::new(8 * 256);
        for w in 0..256u64 {
            r.write(usize::try_from(w).unwrap() * 8, &(w + 1).to_le_bytes())
                .unwrap();
        }
        let a = r.crash_image(CrashPolicy::Random { seed: 42 });
        assert_eq!(a, r.crash_image(CrashPolicy::Random { seed: 42 }));
        assert_ne!(a, r.crash_image(CrashPolicy::Random { seed: 43 }));
        let mut kept = 0;
        for (w, word) in a.chunks_exact(8).enumerate() {
            let v = u64::from_le_bytes(word.try_into().unwrap());
            // Each word is either its stored value or the persisted zero, never anything else.
            assert!(v == 0 || v == w as u64 + 1, "word {w} is {v}");
            kept += usize::from(v != 0);
        }
        assert!(kept > 0 && kept < 256, "kept {kept} of 256 words");
    }

    #[test]
    fn published_word_survives_power_loss() {
        let r = SimulatedRegion::new(32);
        r.publish_u64(16, 0xdead_beef).unwrap();
        assert_eq!(r.read_u64(16).unwrap(), 0xdead_beef);
        let img = SimulatedRegion::from_image(r.crash_image(CrashPolicy::DropUnpersisted));
        assert_eq!(img.read_u64(16).unwrap(), 0xdead_beef);
        assert_eq!(img.persist_mode(), PersistMode::Simulated);
        assert_eq!(
            r.publish_u64(4, 1).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
    }

    #[test]
    fn injected_persist_failure_persists_nothing_until_reset() {
        let r = SimulatedRegion::new(64);
        r.fail_persist_after(Some(1));
        r.write(0, b"a").unwrap();
        r.persist(0, 1).unwrap();
        r.write(8, b"b").unwrap();
        let e = r.persist(8, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EIO));
        let e = r.publish_u64(16, 7).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(EIO));
        assert_eq!(
            r.read_u64(16).unwrap(),
            7,
            "a failed publish still stored the word"
        );
        assert_eq!(r.unpersisted_ranges(), vec![(8, 16)]);
        assert_eq!(r.persist_count(), 1);
        r.fail_persist_after(None);
        r.persist(0, 64).unwrap();
        assert!(r.unpersisted_ranges().is_empty());
    }

    #[test]
    fn injected_write_failure_stores_nothing() {
        let r = SimulatedRegion::new(16);
        r.fail_writes_after(Some(0));
        assert_eq!(r.write(0, b"x").unwrap_err().raw_os_error(), Some(EIO));
        let mut b = [9u8; 1];
        r.read(0, &mut b).unwrap();
        assert_eq!(b, [0]);
        assert!(r.unpersisted_ranges().is_empty());
        r.fail_writes_after(None);
        r.write(0, b"x").unwrap();
    }

    #[test]
    fn shared_fault_plan_counts_across_regions() {
        let plan = Arc::new(FaultPlan::new());
        let a = SimulatedRegion::with_faults(16, Arc::clone(&plan));
        let b = SimulatedRegion::with_faults(16, Arc::clone(&plan));
        plan.fail_persist_after(Some(2));
        a.persist(0, 8).unwrap();
        b.persist(0, 8).unwrap();
        assert!(a.persist(0, 8).is_err());
        assert!(b.persist(0, 8).is_err());
    }

    #[test]
    fn out_of_range_access_is_rejected() {
        let r = SimulatedRegion::new(20);
        let kind = |res: io::Result<()>| res.unwrap_err().kind();
        assert_eq!(kind(r.write(19, b"ab")), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.write(usize::MAX, b"a")), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.read(21, &mut [])), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.persist(10, 11)), io::ErrorKind::InvalidInput);
        assert_eq!(kind(r.publish_u64(16, 1)), io::ErrorKind::InvalidInput);
        assert_eq!(
            r.read_u64(16).unwrap_err().kind(),
            io::ErrorKind::InvalidInput
        );
        r.write(18, b"ab").unwrap();
        r.persist(20, 0).unwrap();
    }

    #[test]
    fn chunk_masks_cover_exactly_the_word_range() {
        assert_eq!(chunk_mask(0, 0, 64), u64::MAX);
        assert_eq!(chunk_mask(0, 3, 5), 0b11000);
        assert_eq!(chunk_mask(1, 3, 66), 0b11);
        assert_eq!(chunk_mask(1, 70, 200), u64::MAX << 6);
        assert_eq!(chunk_mask(2, 3, 66), 0);
        let mut d = vec![0u64; 3];
        set_dirty(&mut d, 60, 130);
        assert_eq!(dirty_words(&d, 0, 192).count(), 70);
        assert_eq!(
            dirty_words(&d, 62, 65).collect::<Vec<_>>(),
            vec![62, 63, 64]
        );
        clear_dirty(&mut d, 61, 129);
        assert_eq!(dirty_words(&d, 0, 192).collect::<Vec<_>>(), vec![60, 129]);
    }
}
