//! An in-memory [`Region`] for the WAL tests. It keeps the live bytes (what the process
//! sees through the mapping) and the persisted bytes (what survives a power loss), and
//! builds power-loss images from the difference. It can also fail writes or persists.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use parking_lot::Mutex;
use rand::Rng;

use crate::tier::{PersistMode, Region};

/// What a power loss does to the bytes written but not persisted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Loss {
    /// Every unpersisted store is lost: those bytes keep their persisted value (zero in a
    /// fresh region).
    KeepOld,
    /// Every unpersisted byte becomes random garbage.
    Garble,
    /// Each aligned 8-byte word with unpersisted bytes independently keeps its old value,
    /// takes its new value, or has its unpersisted bytes garbled.
    AnySubset,
}

/// The in-memory region.
#[derive(Debug)]
pub(crate) struct MemRegion {
    live: Mutex<Vec<u8>>,
    persisted: Mutex<Vec<u8>>,
    persist_calls: Mutex<Vec<(usize, usize)>>,
    fail_write: AtomicBool,
    fail_persist: AtomicBool,
}

impl MemRegion {
    /// A zero-filled region of `len` bytes, as `FastTier::create_region` makes.
    pub(crate) fn new(len: usize) -> MemRegion {
        MemRegion::from_bytes(vec![0; len])
    }

    /// A region whose live and persisted bytes are `bytes` (a reopened file).
    pub(crate) fn from_bytes(bytes: Vec<u8>) -> MemRegion {
        MemRegion {
            live: Mutex::new(bytes.clone()),
            persisted: Mutex::new(bytes),
            persist_calls: Mutex::new(Vec::new()),
            fail_write: AtomicBool::new(false),
            fail_persist: AtomicBool::new(false),
        }
    }

    /// A copy of the live bytes.
    pub(crate) fn live(&self) -> Vec<u8> {
        self.live.lock().clone()
    }

    /// Every `persist(offset, len)` call so far.
    pub(crate) fn persist_calls(&self) -> Vec<(usize, usize)> {
        self.persist_calls.lock().clone()
    }

    /// Makes the next writes fail with an I/O error (until reset).
    pub(crate) fn set_fail_write(&self, fail: bool) {
        self.fail_write.store(fail, Ordering::Relaxed);
    }

    /// Makes the next persists fail with an I/O error (until reset).
    pub(crate) fn set_fail_persist(&self, fail: bool) {
        self.fail_persist.store(fail, Ordering::Relaxed);
    }

    /// Changes the byte at `offset` in both the live and the persisted image (media damage).
    pub(crate) fn damage(&self, offset: usize, f: impl Fn(u8) -> u8) {
        for image in [&self.live, &self.persisted] {
            let mut bytes = image.lock();
            bytes[offset] = f(bytes[offset]);
        }
    }

    /// The region as found after a power loss now: a fresh region whose bytes are the
    /// persisted ones, plus whatever `loss` lets through of the unpersisted ones.
    pub(crate) fn power_loss(&self, loss: Loss, rng: &mut impl Rng) -> MemRegion {
        let live = self.live.lock();
        let mut image = self.persisted.lock().clone();
        for (new, out) in live.chunks(8).zip(image.chunks_mut(8)) {
            if new == &*out {
                continue;
            }
            let choice = match loss {
                Loss::KeepOld => 0,
                Loss::Garble => 2,
                Loss::AnySubset => rng.gen_range(0..3),
            };
            match choice {
                0 => {}
                1 => out.copy_from_slice(new),
                _ => {
                    for (o, n) in out.iter_mut().zip(new) {
                        if o != n {
                            *o = rng.r#gen();
                        }
                    }
                }
            }
        }
        MemRegion::from_bytes(image)
    }

    fn check(&self, offset: usize, len: usize) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "range beyond the region",
            )),
        }
    }
}

impl Region for MemRegion {
    fn len(&self) -> usize {
        self.live.lock().len()
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        if self.fail_write.load(Ordering::Relaxed) {
            return Err(io::Error::other("injected write failure"));
        }
        self.check(offset, data.len())?;
        self.live.lock()[offset..offset + data.len()].copy_from_slice(data);
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        buf.copy_from_slice(&self.live.lock()[offset..offset + buf.len()]);
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        if self.fail_persist.load(Ordering::Relaxed) {
            return Err(io::Error::from_raw_os_error(5));
        }
        self.check(offset, len)?;
        self.persist_calls.lock().push((offset, len));
        let live = self.live.lock();
        self.persisted.lock()[offset..offset + len].copy_from_slice(&live[offset..offset + len]);
        Ok(())
    }

    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        self.write(offset, &value.to_le_bytes())?;
        self.persist(offset, 8)
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        let mut b = [0u8; 8];
        self.read(offset, &mut b)?;
        Ok(u64::from_le_bytes(b))
    }

    fn persist_mode(&self) -> PersistMode {
        PersistMode::Simulated
    }
}
