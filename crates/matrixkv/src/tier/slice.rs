//! A window of a fast-tier [`Region`] used as a region of its own: offsets are relative to
//! the window's start and every access outside it fails. It lets two persistent structures
//! share one region file (the LightKV write buffer keeps its log and its RH-tree in one
//! region, docs/format/pwb.md).
//!
//! Who calls it: `memtable::pwb`.

use std::io;
use std::sync::Arc;

use bytes::Bytes;

use super::{PersistMode, Region};

/// `[base, base + len)` of a parent region.
#[derive(Debug)]
pub(crate) struct RegionSlice {
    parent: Arc<dyn Region>,
    base: usize,
    len: usize,
}

impl RegionSlice {
    /// The window `[base, base + len)` of `parent`.
    ///
    /// # Errors
    ///
    /// `InvalidInput` if the window does not lie inside `parent` or `base` is not 8-byte
    /// aligned (aligned words of the window must be aligned words of the parent).
    pub(crate) fn new(parent: Arc<dyn Region>, base: usize, len: usize) -> io::Result<Self> {
        let end = base.checked_add(len);
        if end.is_none_or(|e| e > parent.len()) || !base.is_multiple_of(8) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "a window of {len} bytes at {base} does not fit an {}-byte region",
                    parent.len()
                ),
            ));
        }
        Ok(RegionSlice { parent, base, len })
    }

    /// The parent offset of `[offset, offset + n)`, checked against the window.
    fn at(&self, offset: usize, n: usize) -> io::Result<usize> {
        match offset.checked_add(n) {
            Some(end) if end <= self.len => Ok(self.base + offset),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{n} bytes at {offset} lie outside a {}-byte region window",
                    self.len
                ),
            )),
        }
    }
}

impl Region for RegionSlice {
    fn len(&self) -> usize {
        self.len
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        let at = self.at(offset, data.len())?;
        self.parent.write(at, data)
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        let at = self.at(offset, buf.len())?;
        self.parent.read(at, buf)
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        let at = self.at(offset, len)?;
        self.parent.persist(at, len)
    }

    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        let at = self.at(offset, 8)?;
        self.parent.publish_u64(at, value)
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        let at = self.at(offset, 8)?;
        self.parent.read_u64(at)
    }

    fn persist_mode(&self) -> PersistMode {
        self.parent.persist_mode()
    }

    fn view(&self, offset: usize, len: usize) -> io::Result<Bytes> {
        let at = self.at(offset, len)?;
        self.parent.view(at, len)
    }

    fn live_views(&self) -> usize {
        self.parent.live_views()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::SimulatedRegion;

    #[test]
    fn a_window_maps_offsets_into_its_parent_and_refuses_accesses_outside_it() {
        let parent: Arc<dyn Region> = Arc::new(SimulatedRegion::new(4096));
        let w = RegionSlice::new(Arc::clone(&parent), 1024, 2048).unwrap();
        assert_eq!(w.len(), 2048);
        w.write(8, b"abc").unwrap();
        w.publish_u64(16, 7).unwrap();
        let mut b = [0u8; 3];
        parent.read(1032, &mut b).unwrap();
        assert_eq!(&b, b"abc");
        assert_eq!(parent.read_u64(1040).unwrap(), 7);
        assert_eq!(w.read_u64(16).unwrap(), 7);
        assert!(w.write(2046, b"abc").is_err());
        assert!(w.read_u64(2048).is_err());
        assert!(RegionSlice::new(Arc::clone(&parent), 1024, 3073).is_err());
        assert!(RegionSlice::new(parent, 4, 8).is_err());
    }
}
