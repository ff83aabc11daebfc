//! The state a run's threads share ([`Harness`]): the database, its keyspaces, the expected
//! state, the harness clock, and the write path that keeps the expected state exact
//! (lock the slots, mark the writes pending, write, commit).
//!
//! Lock order: `ttl_gate` (read side for every operation on the TTL keyspace, write side
//! for a clock jump) → slot locks (in slot order) → `history` (power-loss mode) → the expected
//! state's recording log.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, RwLock, RwLockReadGuard};

use anyhow::{Context, Result, anyhow};
use matrixkv::{Db, Keyspace, WriteBatch, WriteOptions};

use super::expected::ExpectedState;
use super::values::{Space, Val};

/// The TTL clock of a run: frozen between the harness's jumps, persisted in the expected
/// state so that it survives a kill -9.
#[derive(Debug)]
pub struct HarnessClock(pub AtomicU64);

impl matrixkv::Clock for HarnessClock {
    fn now_millis(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
}

/// One operation of a write (a single call or a batch).
#[derive(Debug, Clone, Copy)]
pub enum PlanOp {
    /// Put value `base` into the slot.
    Put(usize, u32),
    /// Delete the slot.
    Delete(usize),
    /// Merge `delta` into the counter slot.
    Merge(usize, u32),
    /// Delete the slots `lo..hi` (one keyspace) with one range deletion.
    DeleteRange(usize, usize),
}

/// The acknowledged writes of a power-loss cycle, in commit order (writes are serialized in
/// that mode), for the prefix check.
#[derive(Debug, Default)]
pub struct History {
    /// Every acknowledged or started write: its number and the values it gave its slots.
    pub ops: Vec<Vec<(usize, Val)>>,
    /// Writes `..durable` are durable (a sync write or `sync_wal` acknowledged after them),
    /// but for those in `failed`.
    pub durable: usize,
    /// The writes of `ops` that failed after the injected fault: applied or not.
    pub failed: std::collections::BTreeSet<usize>,
}

/// What the threads of a run share.
pub struct Harness {
    /// The database under test.
    pub db: Db,
    /// The default keyspace and keyspace `KS1`.
    pub ks: [Keyspace; 2],
    /// The key and value space.
    pub space: Space,
    /// The expected state.
    pub exp: ExpectedState,
    /// The database's TTL clock.
    pub clock: std::sync::Arc<HarnessClock>,
    /// TTL of keyspace 1, in milliseconds.
    pub ttl_ms: Option<u64>,
    /// Excludes clock jumps from operations on keyspace 1 (see the module doc).
    pub ttl_gate: RwLock<()>,
    /// One write in this many is synced.
    pub sync_one_in: u64,
    /// Weights of the value size classes.
    pub size_weights: [u64; 4],
    /// Set to stop the threads.
    pub stop: AtomicBool,
    /// The first failure.
    pub failure: Mutex<Option<String>>,
    /// Power-loss mode: writes are serialized and recorded.
    pub history: Option<Mutex<History>>,
    /// Where checkpoints and backups are taken (`None`: none are).
    pub checkpoint_dir: Option<std::path::PathBuf>,
    /// The options the database was opened with (checkpoints are opened with them).
    pub options: matrixkv::Options,
    /// Operations done, by kind.
    pub counts: Mutex<BTreeMap<&'static str, u64>>,
    /// Numbers the writes (their tags in the expected state).
    pub writes: AtomicU64,
    /// Power-loss mode with an injected I/O fault: true once it has fired. From then on a
    /// write, `sync_wal`, flush or compaction may fail (the database stops writing after a
    /// failed sync); such a write stays in flight in the expected state and in the history
    /// (applied or not), and reads must still be right.
    pub fault_fired: Option<Box<dyn Fn() -> bool + Send + Sync>>,
}

impl Harness {
    /// Records the first failure and stops every thread.
    pub fn fail(&self, msg: String) {
        let mut f = self
            .failure
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if f.is_none() {
            eprintln!("stress: FAILURE: {msg}");
            *f = Some(msg);
        }
        self.stop.store(true, Ordering::Release);
    }

    /// True once the threads must stop.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Counts one operation of `kind`.
    pub fn count(&self, kind: &'static str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(kind)
            .or_default() += 1;
    }

    /// `r`, or `Ok` counted as `what` if it failed after the injected fault fired (see
    /// [`Harness::fault_fired`]).
    pub fn tolerate(&self, r: Result<()>, what: &'static str) -> Result<()> {
        match r {
            Err(_) if self.fault_fired.as_ref().is_some_and(|f| f()) => {
                self.count(what);
                // The database refuses writes from now on: do not spin on it.
                std::thread::sleep(std::time::Duration::from_millis(1));
                Ok(())
            }
            r => r,
        }
    }

    /// A tag for the next write: 1 to 65535, cycling.
    pub fn tag(&self) -> u16 {
        (self.writes.fetch_add(1, Ordering::Relaxed) % 65535 + 1) as u16
    }

    /// The TTL gate's read side if `ks` is the TTL keyspace.
    pub fn gate(&self, ks: usize) -> Option<RwLockReadGuard<'_, ()>> {
        (ks == 1 && self.ttl_ms.is_some()).then(|| {
            self.ttl_gate
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    /// Applies `plan` as one write (a batch if it has several operations), keeping the
    /// expected state exact.
    pub fn write(&self, plan: &[PlanOp], sync: bool) -> Result<()> {
        let slots = self.slots_of(plan);
        let _gate = if slots.iter().any(|&s| self.space.keyspace(s) == 1) {
            self.gate(1)
        } else {
            None
        };
        let _locks = self.exp.lock(&slots);
        let (plan, finals) = self.resolve(plan);
        let mut history = self
            .history
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let tag = self.tag();
        for (&slot, &v) in &finals {
            self.exp.prepare(slot, v, tag)?;
        }
        if let Some(h) = history.as_mut() {
            h.ops.push(finals.iter().map(|(s, v)| (*s, *v)).collect());
        }
        let applied = self
            .apply(&plan, sync)
            .with_context(|| format!("write {plan:?} (sync {sync})"));
        if applied.is_err() {
            // Refused after the injected fault: it stays in flight (see `fault_fired`).
            self.tolerate(applied, "write failed after the fault")?;
            if let Some(h) = history.as_mut() {
                let last = h.ops.len() - 1;
                h.failed.insert(last);
            }
            return Ok(());
        }
        if let Some(h) = history.as_mut()
            && sync
        {
            h.durable = h.ops.len();
        }
        for (&slot, &v) in &finals {
            self.exp.commit(slot, v)?;
        }
        Ok(())
    }

    /// `Db::sync_wal`, recording the durable point in power-loss mode.
    pub fn sync_wal(&self) -> Result<()> {
        let mut history = self
            .history
            .as_ref()
            .map(|h| h.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        let synced = self.db.sync_wal().context("sync_wal");
        if synced.is_err() {
            return self.tolerate(synced, "sync_wal failed after the fault");
        }
        if let Some(h) = history.as_mut() {
            h.durable = h.ops.len();
        }
        Ok(())
    }

    /// Every slot `plan` writes.
    fn slots_of(&self, plan: &[PlanOp]) -> Vec<usize> {
        let mut v = Vec::new();
        for op in plan {
            match *op {
                PlanOp::Put(s, _) | PlanOp::Delete(s) | PlanOp::Merge(s, _) => v.push(s),
                PlanOp::DeleteRange(lo, hi) => v.extend(lo..hi),
            }
        }
        v
    }

    /// The final value of every slot `plan` writes (the slots locked), with merges that
    /// would overflow a u32 counter turned into puts.
    fn resolve(&self, plan: &[PlanOp]) -> (Vec<PlanOp>, BTreeMap<usize, Val>) {
        let mut finals: BTreeMap<usize, Val> = BTreeMap::new();
        let mut out = Vec::with_capacity(plan.len());
        for op in plan {
            let mut op = *op;
            match op {
                PlanOp::Put(s, b) => {
                    finals.insert(s, Val::of(b));
                }
                PlanOp::Delete(s) => {
                    finals.insert(s, Val::ABSENT);
                }
                PlanOp::Merge(s, d) => {
                    let old = finals.get(&s).copied().unwrap_or(self.exp.committed(s));
                    let new = match old.base() {
                        None => d,
                        Some(b) => b.checked_add(d).unwrap_or_else(|| {
                            op = PlanOp::Put(s, d);
                            d
                        }),
                    };
                    finals.insert(s, Val::of(new));
                }
                PlanOp::DeleteRange(lo, hi) => {
                    for s in lo..hi {
                        finals.insert(s, Val::ABSENT);
                    }
                }
            }
            out.push(op);
        }
        (out, finals)
    }

    /// Writes `plan` to the database.
    fn apply(&self, plan: &[PlanOp], sync: bool) -> Result<()> {
        let wo = WriteOptions { sync };
        let sp = &self.space;
        let ks = |s: usize| &self.ks[sp.keyspace(s)];
        if let [op] = plan {
            return Ok(match *op {
                PlanOp::Put(s, b) => ks(s).put_opt(sp.key(s), sp.value(s, b), &wo),
                PlanOp::Delete(s) => ks(s).delete_opt(sp.key(s), &wo),
                PlanOp::Merge(s, d) => ks(s).merge_opt(sp.key(s), u64::from(d).to_le_bytes(), &wo),
                PlanOp::DeleteRange(lo, hi) => {
                    ks(lo).delete_range_opt(sp.key(lo), range_end(sp, hi), &wo)
                }
            }?);
        }
        let mut b = WriteBatch::new();
        for op in plan {
            match *op {
                PlanOp::Put(s, v) => b.put_cf(ks(s), sp.key(s), sp.value(s, v)),
                PlanOp::Delete(s) => b.delete_cf(ks(s), sp.key(s)),
                PlanOp::Merge(s, d) => b.merge_cf(ks(s), sp.key(s), u64::from(d).to_le_bytes()),
                PlanOp::DeleteRange(lo, hi) => {
                    b.delete_range_cf(ks(lo), sp.key(lo), range_end(sp, hi))
                }
            }
        }
        self.db.write_opt(b, &wo).map_err(|e| anyhow!(e))
    }
}

/// The exclusive end key of a range ending before slot `hi` (`hi` may be one past the last
/// key of the keyspace).
pub fn range_end(sp: &Space, hi: usize) -> Vec<u8> {
    super::values::key_name((hi - 1) % sp.keys + 1)
}
