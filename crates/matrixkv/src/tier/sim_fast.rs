//! [`SimFastTier`]: an in-memory [`FastTier`] of [`SimulatedRegion`]s for crash and
//! fault-injection tests (feature `testing`).
//!
//! Each region tracks which of its stores were persisted; [`SimFastTier::crash`] turns the whole
//! tier into the state a crash would leave, as a new, independent tier to reopen the database on.
//! Simplification: directory entries are durable immediately, i.e. a region created, renamed or
//! removed before the crash is still created, renamed or removed after it, whether or not
//! `sync_dir` was called (only region *contents* can be lost). A rename moves the region with
//! its persisted and unpersisted bytes: a crash after it loses the same stores as before it. One [`FaultPlan`] is shared by all regions of a tier, so
//! [`SimFastTier::fail_persist_after`] counts persists across the whole tier; the same plan admits
//! (and can fail, count and trace) the tier's directory operations. [`SimFastTier::set_capacity`]
//! makes region creation fail with ENOSPC past a size, like a full tmpfs.
//!
//! Called by engine tests (WAL, L0, recovery, crash tests).
//!
//! Thread safety: `Send + Sync`; clones share the same regions (an `Arc` inside). Lock order:
//! the tier's region map, then a region's state, then the fault plan.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use matrixkv_pmem::{CrashPolicy, FaultPlan, SimulatedRegion};

use super::fast_dir::{check_region_len, region_path};
use super::{FastTier, Region};
use crate::error::{Error, IoOp, Result};
use crate::lock_order::{Mutex, Rank};

/// An in-memory fast tier of simulated regions, keyed by file name.
#[derive(Debug, Clone)]
pub struct SimFastTier {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    regions: Mutex<BTreeMap<String, Arc<SimulatedRegion>>>,
    faults: Arc<FaultPlan>,
    /// Total region bytes the tier can hold (`None`: unlimited).
    capacity: Mutex<Option<u64>>,
}

impl SimFastTier {
    /// An empty simulated tier; `dir` only names its (imaginary) directory in paths and errors.
    pub fn new(dir: impl Into<PathBuf>) -> SimFastTier {
        SimFastTier::with_regions(dir.into(), BTreeMap::new(), Arc::new(FaultPlan::new()))
    }

    fn with_regions(
        dir: PathBuf,
        regions: BTreeMap<String, Arc<SimulatedRegion>>,
        faults: Arc<FaultPlan>,
    ) -> SimFastTier {
        SimFastTier {
            inner: Arc::new(Inner {
                dir,
                regions: Mutex::new(Rank::LeafSimFastRegions, regions),
                faults,
                capacity: Mutex::new(Rank::LeafSimFastCapacity, None),
            }),
        }
    }

    /// The tier a crash right now would leave: a new tier, sharing nothing with this one, whose
    /// regions hold the [`SimulatedRegion::crash_image`] of this tier's regions under `policy`
    /// (every region exists, see the module documentation). With [`CrashPolicy::Random`], each
    /// region draws from its own stream derived from the seed and its name. The new tier injects
    /// no faults; this tier is unchanged.
    pub fn crash(&self, policy: CrashPolicy) -> SimFastTier {
        let faults = Arc::new(FaultPlan::new());
        let regions = self.inner.regions.lock();
        let crashed = regions
            .iter()
            .map(|(name, region)| {
                let policy = match policy {
                    CrashPolicy::Random { seed } => CrashPolicy::Random {
                        seed: seed ^ fnv1a(name.as_bytes()),
                    },
                    other => other,
                };
                let image = region.crash_image(policy);
                let region = SimulatedRegion::from_image_with_faults(image, Arc::clone(&faults));
                (name.clone(), Arc::new(region))
            })
            .collect();
        SimFastTier::with_regions(self.inner.dir.clone(), crashed, faults)
    }

    /// After `n` more successful persist/publish calls on any region of this tier (current or
    /// created later), every later one fails with `EIO` until reset with `None`.
    pub fn fail_persist_after(&self, n: Option<u64>) {
        self.inner.faults.fail_persist_after(n);
    }

    /// After `n` more successful writes on any region of this tier, every later write fails
    /// with `EIO` until reset with `None`.
    pub fn fail_writes_after(&self, n: Option<u64>) {
        self.inner.faults.fail_writes_after(n);
    }

    /// Caps the total bytes of all regions: creating a region that would exceed it fails with
    /// ENOSPC (a full tmpfs or DAX device). `None` removes the cap.
    pub fn set_capacity(&self, capacity: Option<u64>) {
        *self.inner.capacity.lock() = capacity;
    }

    /// Bytes of all regions.
    pub fn total_bytes(&self) -> u64 {
        region_bytes(&self.inner.regions.lock())
    }

    /// The fault plan shared by every region of this tier and its directory operations (for
    /// counting, tracing and one-shot directory-operation faults).
    pub fn faults(&self) -> &Arc<FaultPlan> {
        &self.inner.faults
    }

    /// The simulated region `name`, to inspect what is persisted (e.g. `unpersisted_ranges`).
    pub fn region(&self, name: &str) -> Option<Arc<SimulatedRegion>> {
        self.inner.regions.lock().get(name).cloned()
    }
}

/// Bytes of all `regions`.
fn region_bytes(regions: &BTreeMap<String, Arc<SimulatedRegion>>) -> u64 {
    regions.values().map(|r| r.len() as u64).sum()
}

/// FNV-1a, to derive a per-region seed from the region's name.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl FastTier for SimFastTier {
    fn dir(&self) -> &Path {
        &self.inner.dir
    }

    fn create_region(&self, name: &str, len: usize) -> Result<Arc<dyn Region>> {
        let path = region_path(&self.inner.dir, name)?;
        check_region_len(name, len)?;
        self.inner
            .faults
            .admit_dir_op("create_region")
            .map_err(|e| Error::io(IoOp::Map, &path, e))?;
        let mut regions = self.inner.regions.lock();
        if regions.contains_key(name) {
            return Err(Error::io(
                IoOp::Open,
                path,
                io::Error::from(io::ErrorKind::AlreadyExists),
            ));
        }
        if let Some(cap) = *self.inner.capacity.lock()
            && region_bytes(&regions) + len as u64 > cap
        {
            return Err(Error::io(IoOp::Map, path, io::Error::from_raw_os_error(28)));
        }
        let region = Arc::new(SimulatedRegion::with_faults(
            len,
            Arc::clone(&self.inner.faults),
        ));
        regions.insert(name.to_owned(), Arc::clone(&region));
        Ok(region)
    }

    fn open_region(&self, name: &str) -> Result<Arc<dyn Region>> {
        let path = region_path(&self.inner.dir, name)?;
        self.inner
            .faults
            .admit_dir_op("open_region")
            .map_err(|e| Error::io(IoOp::Open, &path, e))?;
        match self.region(name) {
            Some(region) => Ok(region),
            None => Err(Error::io(
                IoOp::Open,
                path,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    fn remove(&self, name: &str) -> Result<()> {
        let path = region_path(&self.inner.dir, name)?;
        self.inner
            .faults
            .admit_dir_op("remove_region")
            .map_err(|e| Error::io(IoOp::Remove, &path, e))?;
        match self.inner.regions.lock().remove(name) {
            Some(_) => Ok(()),
            None => Err(Error::io(
                IoOp::Remove,
                path,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    fn rename(&self, from: &str, to: &str) -> Result<()> {
        let src = region_path(&self.inner.dir, from)?;
        region_path(&self.inner.dir, to)?;
        self.inner
            .faults
            .admit_dir_op("rename_region")
            .map_err(|e| Error::io(IoOp::Rename, &src, e))?;
        let mut regions = self.inner.regions.lock();
        match regions.remove(from) {
            Some(region) => {
                regions.insert(to.to_owned(), region);
                Ok(())
            }
            None => Err(Error::io(
                IoOp::Rename,
                src,
                io::Error::from(io::ErrorKind::NotFound),
            )),
        }
    }

    fn list(&self) -> Result<Vec<String>> {
        self.inner
            .faults
            .admit_dir_op("list")
            .map_err(|e| Error::io(IoOp::List, &self.inner.dir, e))?;
        Ok(self.inner.regions.lock().keys().cloned().collect())
    }

    /// Directory entries are durable immediately in this simulation, so there is nothing to
    /// do but admit an injected fault.
    fn sync_dir(&self) -> Result<()> {
        self.inner
            .faults
            .admit_dir_op("sync_dir")
            .map_err(|e| Error::io(IoOp::Sync, &self.inner.dir, e))
    }

    fn free_bytes(&self) -> Result<Option<u64>> {
        let regions = self.inner.regions.lock();
        Ok((*self.inner.capacity.lock()).map(|cap| cap.saturating_sub(region_bytes(&regions))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::PersistMode;

    #[test]
    fn regions_are_created_opened_listed_and_removed() {
        let tier = SimFastTier::new("/fast");
        assert_eq!(tier.dir(), Path::new("/fast"));
        let r = tier.create_region("b", 64).unwrap();
        r.write(0, b"shared").unwrap();
        drop(tier.create_region("a", 32).unwrap());
        assert_eq!(tier.list().unwrap(), vec!["a".to_string(), "b".to_string()]);
        let again = tier.clone().open_region("b").unwrap();
        let mut buf = [0u8; 6];
        again.read(0, &mut buf).unwrap();
        assert_eq!(&buf, b"shared", "clones and reopens see the same region");
        assert_eq!(again.persist_mode(), PersistMode::Simulated);
        assert!(matches!(
            tier.create_region("b", 64),
            Err(Error::Io { op: IoOp::Open, .. })
        ));
        tier.remove("b").unwrap();
        assert!(matches!(
            tier.open_region("b"),
            Err(Error::Io { op: IoOp::Open, .. })
        ));
        assert!(matches!(
            tier.remove("b"),
            Err(Error::Io {
                op: IoOp::Remove,
                ..
            })
        ));
        assert_eq!(tier.list().unwrap(), vec!["a".to_string()]);
        tier.sync_dir().unwrap();
    }

    #[test]
    fn power_loss_crash_loses_unpersisted_bytes_only() {
        let tier = SimFastTier::new("/fast");
        let r = tier.create_region("000001.wal", 128).unwrap();
        r.write(0, b"durable").unwrap();
        r.persist(0, 7).unwrap();
        r.write(64, b"volatile").unwrap();
        let crashed = tier.crash(CrashPolicy::DropUnpersisted);
        let after = crashed.open_region("000001.wal").unwrap();
        let mut b = [0u8; 8];
        after.read(0, &mut b[..7]).unwrap();
        assert_eq!(&b[..7], b"durable");
        after.read(64, &mut b).unwrap();
        assert_eq!(b, [0u8; 8]);
        // The crashed tier is independent of the original.
        after.write(0, b"X").unwrap();
        r.read(0, &mut b[..1]).unwrap();
        assert_eq!(&b[..1], b"d");
        assert_eq!(
            tier.region("000001.wal").unwrap().unpersisted_ranges(),
            vec![(64, 8)]
        );
    }

    #[test]
    fn a_renamed_region_keeps_what_was_persisted_and_what_was_not() {
        let tier = SimFastTier::new("/fast");
        let r = tier.create_region("000003.walfree", 128).unwrap();
        r.write(0, b"durable").unwrap();
        r.persist(0, 7).unwrap();
        r.write(64, b"volatile").unwrap();
        tier.rename("000003.walfree", "000009.wal").unwrap();
        assert_eq!(tier.list().unwrap(), vec!["000009.wal".to_string()]);
        let crashed = tier.crash(CrashPolicy::DropUnpersisted);
        let after = crashed.open_region("000009.wal").unwrap();
        let mut b = [0u8; 8];
        after.read(0, &mut b[..7]).unwrap();
        assert_eq!(&b[..7], b"durable");
        after.read(64, &mut b).unwrap();
        assert_eq!(
            b, [0u8; 8],
            "the unpersisted store is lost after the rename too"
        );
        assert!(matches!(
            tier.rename("000003.walfree", "x"),
            Err(Error::Io {
                op: IoOp::Rename,
                ..
            })
        ));
        tier.faults().fail_dir_op_after(Some(0), 28);
        assert!(tier.rename("000009.wal", "y").is_err());
        assert!(
            tier.region("000009.wal").is_some(),
            "a failed rename changes nothing"
        );
    }

    #[test]
    fn process_crash_keeps_unpersisted_bytes() {
        let tier = SimFastTier::new("/fast");
        let r = tier.create_region("r", 16).unwrap();
        r.write(8, b"kept").unwrap();
        let crashed = tier.crash(CrashPolicy::KeepAll);
        let mut b = [0u8; 4];
        crashed.open_region("r").unwrap().read(8, &mut b).unwrap();
        assert_eq!(&b, b"kept");
    }

    #[test]
    fn random_crash_is_reproducible_from_its_seed() {
        let tier = SimFastTier::new("/fast");
        for name in ["a", "b"] {
            let r = tier.create_region(name, 8 * 64).unwrap();
            r.write(0, &[0xAB; 8 * 64]).unwrap();
        }
        let image = |t: &SimFastTier, name: &str| {
            t.region(name)
                .unwrap()
                .crash_image(CrashPolicy::DropUnpersisted)
        };
        let one = tier.crash(CrashPolicy::Random { seed: 7 });
        let two = tier.crash(CrashPolicy::Random { seed: 7 });
        assert_eq!(image(&one, "a"), image(&two, "a"));
        assert_eq!(image(&one, "b"), image(&two, "b"));
        assert_ne!(
            image(&one, "a"),
            image(&one, "b"),
            "regions draw different streams"
        );
    }

    #[test]
    fn persist_faults_apply_to_current_and_future_regions() {
        let tier = SimFastTier::new("/fast");
        let a = tier.create_region("a", 64).unwrap();
        tier.fail_persist_after(Some(1));
        a.persist(0, 8).unwrap();
        let b = tier.create_region("b", 64).unwrap();
        let e = b.publish_u64(0, 1).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(5));
        assert!(a.persist(0, 8).is_err());
        tier.fail_persist_after(None);
        b.persist(0, 8).unwrap();
        tier.fail_writes_after(Some(0));
        assert!(a.write(0, b"x").is_err());
        let crashed = tier.crash(CrashPolicy::KeepAll);
        crashed.open_region("a").unwrap().write(0, b"x").unwrap();
    }
}
