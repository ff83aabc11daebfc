//! The expected state (RocksDB's `ExpectedState`): per slot the value it must have, plus the
//! value of a write in flight, kept in a file that outlives a kill -9 of the process.
//!
//! File layout: a 64-byte header (`MKVSTRS1`, slot count, the harness clock in ms), then 16
//! bytes per slot: the committed [`Val`] and the pending one (bit 63 set while a write is in
//! flight, bits 40..56 the write's tag, shared by the slots of one write), both u64
//! little-endian. Each change is one positional write (`pwrite`) of 8 or 16
//! bytes into the page cache, which a kill -9 does not lose.
//!
//! Protocol (`expected_value.h`): [`ExpectedState::prepare`] before the database write,
//! [`ExpectedState::commit`] after its acknowledgement. After a crash a slot whose pending bit
//! is set may read as either value; startup verification then settles it to the value read.
//!
//! Concurrency: a slot's entries are changed only by a thread holding the slot's lock
//! ([`ExpectedState::lock`]); the atomics make unlocked reads (of other slots) well defined.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use anyhow::{Context, Result, bail};

use super::values::Val;

const MAGIC: &[u8; 8] = b"MKVSTRS1";
const HEADER: u64 = 64;
const SLOT: u64 = 16;
const PENDING: u64 = 1 << 63;
const TAG_SHIFT: u32 = 40;
const VAL_MASK: u64 = (1 << 33) - 1;

/// The expected state of every slot, file-backed.
#[derive(Debug)]
pub struct ExpectedState {
    file: File,
    committed: Vec<AtomicU64>,
    pending: Vec<AtomicU64>,
    locks: Vec<Mutex<()>>,
    clock_ms: AtomicU64,
    /// While a checkpoint is taken: every value a slot was given, in order.
    recording: Mutex<Option<Vec<(usize, Val)>>>,
}

/// The locks of a set of slots, taken in slot order (so threads never deadlock).
pub struct SlotLocks<'a> {
    _guards: Vec<MutexGuard<'a, ()>>,
}

impl ExpectedState {
    /// Opens the state at `path`, creating it (every slot absent) if it does not exist;
    /// `clock_ms` is the harness clock of a new state.
    pub fn open(path: &Path, slots: usize, clock_ms: u64) -> Result<ExpectedState> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("expected state {}", path.display()))?;
        let len = HEADER + SLOT * slots as u64;
        if file.metadata()?.len() < len {
            file.set_len(len)?;
        }
        let mut header = [0u8; HEADER as usize];
        file.read_exact_at(&mut header, 0)?;
        let mut clock = clock_ms;
        if &header[..8] == MAGIC {
            let n = u64::from_le_bytes(header[8..16].try_into()?);
            if n != slots as u64 {
                bail!(
                    "expected state {} has {n} slots, not {slots}",
                    path.display()
                );
            }
            clock = u64::from_le_bytes(header[16..24].try_into()?);
        } else {
            header[..8].copy_from_slice(MAGIC);
            header[8..16].copy_from_slice(&(slots as u64).to_le_bytes());
            header[16..24].copy_from_slice(&clock.to_le_bytes());
            file.write_all_at(&header, 0)?;
        }
        let mut raw = vec![0u8; (SLOT as usize) * slots];
        file.read_exact_at(&mut raw, HEADER)?;
        let word = |i: usize| u64::from_le_bytes(raw[i..i + 8].try_into().unwrap_or_default());
        Ok(ExpectedState {
            committed: (0..slots).map(|s| AtomicU64::new(word(s * 16))).collect(),
            pending: (0..slots)
                .map(|s| AtomicU64::new(word(s * 16 + 8)))
                .collect(),
            locks: (0..slots).map(|_| Mutex::new(())).collect(),
            clock_ms: AtomicU64::new(clock),
            recording: Mutex::new(None),
            file,
        })
    }

    /// Locks `slots` (any order, duplicates allowed) until the result is dropped.
    pub fn lock(&self, slots: &[usize]) -> SlotLocks<'_> {
        let mut sorted = slots.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        let guards = sorted
            .into_iter()
            .map(|s| {
                self.locks[s]
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
            })
            .collect();
        SlotLocks { _guards: guards }
    }

    /// The committed value of `slot`.
    pub fn committed(&self, slot: usize) -> Val {
        Val(self.committed[slot].load(Ordering::Acquire))
    }

    /// The value of the write in flight to `slot`, if any.
    pub fn pending(&self, slot: usize) -> Option<Val> {
        self.pending_tagged(slot).map(|(v, _)| v)
    }

    /// The value and the tag of the write in flight to `slot`, if any.
    pub fn pending_tagged(&self, slot: usize) -> Option<(Val, u16)> {
        let p = self.pending[slot].load(Ordering::Acquire);
        (p & PENDING != 0).then_some((Val(p & VAL_MASK), (p >> TAG_SHIFT) as u16))
    }

    /// The values `slot` may have now: the committed one and the pending one.
    pub fn allowed(&self, slot: usize) -> Vec<Val> {
        let mut v = vec![self.committed(slot)];
        v.extend(self.pending(slot));
        v
    }

    /// Marks a write of `v` to `slot` in flight (the caller holds the slot's lock); `tag`
    /// names the write, the same for every slot it changes (atomicity is checked by it).
    pub fn prepare(&self, slot: usize, v: Val, tag: u16) -> Result<()> {
        let p = v.0 | PENDING | u64::from(tag) << TAG_SHIFT;
        self.pending[slot].store(p, Ordering::Release);
        self.file
            .write_all_at(&p.to_le_bytes(), slot_offset(slot) + 8)?;
        Ok(())
    }

    /// Records that `slot` has `v` and no write in flight (the caller holds the slot's lock).
    pub fn commit(&self, slot: usize, v: Val) -> Result<()> {
        self.committed[slot].store(v.0, Ordering::Release);
        self.pending[slot].store(0, Ordering::Release);
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&v.0.to_le_bytes());
        self.file.write_all_at(&b, slot_offset(slot))?;
        if let Some(log) = self
            .recording
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_mut()
        {
            log.push((slot, v));
        }
        Ok(())
    }

    /// The harness clock (milliseconds; the TTL clock of the database).
    pub fn clock_ms(&self) -> u64 {
        self.clock_ms.load(Ordering::Acquire)
    }

    /// Sets the harness clock and persists it.
    pub fn set_clock_ms(&self, ms: u64) -> Result<()> {
        self.clock_ms.store(ms, Ordering::Release);
        self.file.write_all_at(&ms.to_le_bytes(), 16)?;
        Ok(())
    }

    /// Starts recording every committed value (see [`ExpectedState::stop_recording`]).
    pub fn start_recording(&self) {
        *self
            .recording
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(Vec::new());
    }

    /// Stops recording and returns the values committed since the start, in order.
    pub fn stop_recording(&self) -> Vec<(usize, Val)> {
        self.recording
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
            .unwrap_or_default()
    }
}

fn slot_offset(slot: usize) -> u64 {
    HEADER + SLOT * slot as u64
}
