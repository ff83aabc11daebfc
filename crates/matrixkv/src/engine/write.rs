//! The write path: group commit, WAL append, memtable insert, memtable switch and admission
//! control.
//!
//! Writers queue in `DbInner::queue`. The writer at the front is the *leader*: it takes the
//! `writer` lock, makes room (possibly waiting for background work), gathers the batches of the
//! writers queued behind it into one WAL record, appends it (persisting it if any member asked
//! for `sync`), inserts every operation into the memtable, publishes the new visible sequence,
//! and wakes the members with the shared result. The next writer in the queue becomes leader.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::lock_order::{Condvar, Mutex, Rank};

use super::admission::{Admission, container_overshoot};
use super::{DbInner, WriterCtx, check_poison};
use crate::batch::WriteBatch;
use crate::error::{Error, IoOp, Result};
use crate::key::{SeqNo, ValueKind};
use crate::keyspace::registry::Registry;
use crate::layout;
use crate::memtable::MemTable;
use crate::stats::{Counters, StallCause};

mod room;

/// Largest group a leader gathers, in encoded bytes.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// Longest proportional delay per write at the L0 slowdown trigger.
const MAX_SLOWDOWN: Duration = Duration::from_millis(1);

/// Longest sleep container admission control takes at once while the container is less than
/// halfway from the slowdown ratio to full (see `make_room`). The sleeps are precise
/// (`matrixkv_pmem::sleep_precisely`), so each costs the write that takes it about this plus
/// the wake-up. Only a small share of the writes pays a sleep, so the quantum sets the tail
/// (p99.9): long sleeps make slow writes, short ones make more writes sleep and cost
/// throughput; 10 µs measured best between the two
/// (docs/decisions/0004-admission-control-and-compaction-priority.md, "Evidence").
const PACING_QUANTUM: Duration = Duration::from_micros(10);

/// Smallest pacing debt a writer pays at once by spinning (see `DbInner::pace`). Debts below
/// PACING_QUANTUM are paid by busy-waiting, not sleeping: a sleep that short cannot end on
/// time (waking the thread again takes longer than the sleep on a busy host), so the writes
/// that slept set the tail; spinning pays the same total delay at the cost of the writer's
/// core during the wait (decision 0004, addendum on pacing debts paid by spinning).
const PACING_SPIN_MIN: Duration = Duration::from_nanos(500);

/// Busy-waits for `d`: a sleep shorter than the kernel's wake-up latency cannot end on time.
fn spin_for(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// A writer waiting in the group-commit queue.
pub(crate) struct Waiter {
    batch: Mutex<Option<WriteBatch>>,
    size: usize,
    sync: bool,
    done: Mutex<Option<Result<()>>>,
    cv: Condvar,
}

impl DbInner {
    /// Checks a batch against the size limits.
    fn validate_batch(&self, batch: &WriteBatch) -> Result<()> {
        if batch.size_bytes() > self.opts.max_batch_bytes {
            return Err(Error::invalid(format!(
                "write batch of {} bytes exceeds max_batch_bytes ({})",
                batch.size_bytes(),
                self.opts.max_batch_bytes
            )));
        }
        if batch.max_key_len() > self.opts.max_key_bytes {
            return Err(Error::invalid(format!(
                "key of {} bytes exceeds max_key_bytes ({})",
                batch.max_key_len(),
                self.opts.max_key_bytes
            )));
        }
        if let Some(limit) = self.opts.design.max_indexed_key_len()
            && batch.max_key_len() + crate::keyspace::encoding::MAX_PREFIX_LEN > limit
        {
            return Err(Error::invalid(format!(
                "key of {} bytes is too long for the {} design's index: keys take at most {} \
                 bytes there",
                batch.max_key_len(),
                self.opts.design,
                limit - crate::keyspace::encoding::MAX_PREFIX_LEN
            )));
        }
        if batch.max_value_len() > self.opts.max_value_bytes {
            return Err(Error::invalid(format!(
                "value of {} bytes exceeds max_value_bytes ({})",
                batch.max_value_len(),
                self.opts.max_value_bytes
            )));
        }
        if batch.has_bad_range() {
            return Err(Error::invalid(
                "delete_range needs start < end (an empty or inverted range deletes nothing)",
            ));
        }
        Ok(())
    }

    /// Checks `batch` against its keyspaces (each live; a merge only into a keyspace with a
    /// merge operator and without a TTL) and returns it with the write time appended to the
    /// values of keyspaces with a TTL.
    fn check_keyspaces(&self, batch: WriteBatch) -> Result<WriteBatch> {
        // The common case decides without the registry's lock: the default keyspace's
        // settings never change.
        if !batch.has_keyspace_ops() && !batch.has_merge() && self.default_keyspace.ttl.is_none() {
            return Ok(batch);
        }
        let reg = self.keyspaces();
        let mut any_ttl = false;
        for op in batch.ops() {
            let live = if op.deletes_keyspace() {
                // `drop_keyspace` deletes the keys of the keyspace it just marked dropped.
                reg.any(op.keyspace)
            } else {
                reg.live(op.keyspace)
            };
            let ks = match live {
                Some(ks) => ks,
                None => {
                    return Err(match reg.any(op.keyspace) {
                        Some(ks) => Error::KeyspaceDropped {
                            name: ks.name.clone(),
                        },
                        None => Error::invalid(format!(
                            "no keyspace has id {} (a handle of another database?)",
                            op.keyspace
                        )),
                    });
                }
            };
            if op.kind == ValueKind::Merge {
                if ks.ttl.is_some() {
                    return Err(Error::invalid(format!(
                        "keyspace {:?} has a TTL and does not support merge",
                        ks.name
                    )));
                }
                if ks.merge_operator.is_none() {
                    return Err(Error::invalid(if op.keyspace == 0 {
                        "merge needs a merge operator: set Options::merge_operator when opening \
                         the database"
                            .to_owned()
                    } else {
                        format!(
                            "merge needs a merge operator: keyspace {:?} has none \
                             (KeyspaceOptions::merge_operator)",
                            ks.name
                        )
                    }));
                }
            }
            any_ttl |= ks.ttl.is_some();
        }
        if any_ttl {
            Ok(stamp_write_time(&batch, &reg, self.opts.clock.now_millis()))
        } else {
            Ok(batch)
        }
    }

    /// Applies `batch` atomically. See the module doc.
    pub(crate) fn write(self: &Arc<Self>, batch: WriteBatch, sync: bool) -> Result<()> {
        self.check_writable("write")?;
        if batch.is_empty() {
            return Ok(());
        }
        self.validate_batch(&batch)?;
        // From the check of the batch's keyspaces until it is queued (see `keyspace_gate`).
        let gate = batch.has_keyspace_ops().then(|| self.keyspace_gate.read());
        let batch = self.check_keyspaces(batch)?;
        let me = Arc::new(Waiter {
            size: batch.size_bytes(),
            batch: Mutex::new(Rank::WaiterBatch, Some(batch)),
            sync,
            done: Mutex::new(Rank::WaiterDone, None),
            cv: Condvar::new(),
        });
        {
            let mut q = self.queue.lock();
            q.push_back(Arc::clone(&me));
            self.arrivals.notify_one();
            drop(gate);
            loop {
                if let Some(r) = me.done.lock().take() {
                    return r;
                }
                if q.front().is_some_and(|f| Arc::ptr_eq(f, &me)) {
                    break;
                }
                me.cv.wait(&mut q);
            }
        }
        self.lead_commit(&me)
    }

    /// Makes every acknowledged write durable, as a sync write would, without writing one
    /// (`Db::sync_wal`): under the writer's lock, so no group commits meanwhile, the value
    /// files written since the last sync (`separate_at_write`) and then the WAL. A persistent
    /// memtable's writes are durable when acknowledged: nothing to do.
    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.check_writable("sync_wal")?;
        let mut ctx = self.writer.lock();
        if ctx.mem.is_persistent() {
            return Ok(());
        }
        let values_synced = if self.opts.separates_at_write() {
            match self.sync_value_files(&mut ctx) {
                Ok(any) => any,
                // Nothing was acknowledged as durable: the next sync tries again.
                Err(e) if e.is_no_space() => return Err(self.no_space_error(&e)),
                Err(e) => {
                    self.poison(&mut self.state.lock(), &e);
                    return Err(e);
                }
            }
        } else {
            false
        };
        self.persist_wal(&mut ctx, values_synced)
    }

    /// Persists the WAL for a sync write or `sync_wal`, after logging
    /// [`WriteBatch::values_durable_marker`] if `values_synced` (the value files were just
    /// synced). A failure poisons the database: the records may or may not survive, so
    /// nothing may be acknowledged after it (fsync failures are not retried: Rebello et al.,
    /// ATC'20).
    fn persist_wal(&self, ctx: &mut WriterCtx, values_synced: bool) -> Result<()> {
        let persisted = if values_synced {
            self.log_values_durable(ctx)
        } else {
            Ok(())
        }
        .and_then(|()| ctx.wal.sync());
        if let Err(e) = persisted {
            self.poison(&mut self.state.lock(), &e);
            return Err(e);
        }
        Counters::add(&self.counters.wal_syncs, 1);
        Ok(())
    }

    /// Runs one group commit as leader `me` (front of the queue).
    fn lead_commit(self: &Arc<Self>, me: &Arc<Waiter>) -> Result<()> {
        let mut ctx = self.writer.lock();
        let cost = self.persistent_cost(me);
        // Checked under `writer`: once the close holds it after setting `closed`, nothing more
        // reaches the WAL (another process may own the database by then).
        let room = self
            .check_open()
            .and_then(|()| self.make_room(&mut ctx, me.size, cost, false));
        // Gather the group: the leader plus followers up to MAX_GROUP_BYTES.
        let group: Vec<Arc<Waiter>> = {
            let mut q = self.queue.lock();
            let (ror_batch, ror_wait) = self.memtable_design.commit_batch();
            if ror_batch > 1 && room.is_ok() && q.len() < ror_batch {
                // ROR batching: wait for more writers so their records are persisted together.
                let deadline = Instant::now() + ror_wait;
                while q.len() < ror_batch && !self.arrivals.wait_until(&mut q, deadline).timed_out()
                {
                }
            }
            let limit = if room.is_ok() {
                MAX_GROUP_BYTES.max(me.size)
            } else {
                0
            };
            let mut total = 0usize;
            let mut total_cost = 0u64;
            let mut g = Vec::new();
            for w in q.iter() {
                // A persistent memtable takes the group only if its region has room for all
                // of it (the leader's batch was made room for).
                let w_cost = if g.is_empty() || !ctx.mem.is_persistent() {
                    cost
                } else {
                    self.persistent_cost(w)
                };
                if !g.is_empty()
                    && (total + w.size > limit
                        || !(ctx.mem.is_persistent() || ctx.wal.fits(total + w.size))
                        || !ctx.mem.has_room(usize::MAX, total_cost + w_cost))
                {
                    break;
                }
                total += w.size;
                total_cost += w_cost;
                g.push(Arc::clone(w));
            }
            g
        };
        let result = match room {
            Ok(()) => self.commit_group(&mut ctx, &group),
            Err(e) => Err(e),
        };
        drop(ctx);
        let mut q = self.queue.lock();
        for w in &group {
            q.pop_front();
            if !Arc::ptr_eq(w, me) {
                *w.done.lock() = Some(match &result {
                    Ok(()) => Ok(()),
                    Err(e) => Err(e.duplicate()),
                });
                w.cv.notify_one();
            }
        }
        if let Some(next) = q.front() {
            next.cv.notify_one();
        }
        result
    }

    /// Appends the group's batches as one WAL record and applies them to the memtable.
    fn commit_group(&self, ctx: &mut WriterCtx, group: &[Arc<Waiter>]) -> Result<()> {
        let (merged, sync) = merge_group(group)?;
        let Some(mut batch) = merged else {
            return Ok(());
        };
        let first = ctx.last_seq + 1;
        batch.set_sequence(SeqNo(first));
        let count = batch.len() as u64;
        if ctx.mem.is_persistent() {
            return self.commit_persistent(ctx, &batch, first, count);
        }
        // Large values to the memtable's value file, or the value files synced before a sync
        // group (`separate_at_write`); the user's bytes are those of the batch as written.
        let mut separated_bytes = None;
        let mut values_synced = false;
        if self.opts.separates_at_write() {
            let step = if sync {
                self.sync_value_files(ctx).map(|any| {
                    values_synced = any;
                    None
                })
            } else {
                self.separate_values(ctx, &batch)
            };
            match step {
                Ok(Some((b, user_bytes))) => {
                    separated_bytes = Some(user_bytes);
                    batch = b;
                }
                Ok(None) => {}
                Err(e) if sync && e.is_no_space() => {
                    // Earlier values could not be made durable: this write is refused, and
                    // the next sync tries again.
                    Counters::add(&self.counters.no_space_rejections, 1);
                    return Err(self.no_space_error(&e));
                }
                Err(e) => {
                    // Part of a record may have reached the value file: writes stop, as after
                    // a failed WAL append.
                    self.poison(&mut self.state.lock(), &e);
                    return Err(e);
                }
            }
        }
        let backing = ctx.wal.add_record(batch.data()).and_then(|at| {
            self.memtable_design
                .record_backing(ctx.wal.region().as_ref(), at, batch.data().len())
                .map_err(|e| Error::io(IoOp::Read, ctx.wal.path(), e))
        });
        let backing = match backing {
            Ok(b) => b,
            Err(e) => {
                self.poison(&mut self.state.lock(), &e);
                return Err(e);
            }
        };
        Counters::add(&self.counters.wal_bytes, batch.data().len() as u64);
        if sync {
            self.persist_wal(ctx, values_synced)?;
        }
        let user_bytes = apply_batch(&ctx.mem, &batch, self.keyspaces_prefixed, backing.as_ref());
        let user_bytes = separated_bytes.unwrap_or(user_bytes);
        ctx.last_seq = first + count - 1;
        self.visible_seq.publish(SeqNo(ctx.last_seq));
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add(&self.counters.user_ops, count);
        Counters::add(&self.counters.write_groups, 1);
        Ok(())
    }

    /// Applies a group's `batch` (its sequence numbers from `first`) to the active persistent
    /// memtable: every operation inserted and persisted, then the batch's last sequence number
    /// published as the memtable's committed one, the commit point (NoveLSM's in-place
    /// commit: no WAL record, and durable when this returns, sync or not).
    fn commit_persistent(
        &self,
        ctx: &mut WriterCtx,
        batch: &WriteBatch,
        first: u64,
        count: u64,
    ) -> Result<()> {
        let used_before = ctx.mem.approximate_bytes();
        let applied = apply_batch_persistent(&ctx.mem, batch, self.keyspaces_prefixed).and_then(
            |user_bytes| {
                ctx.mem.commit_persistent(SeqNo(first + count - 1))?;
                Ok(user_bytes)
            },
        );
        let user_bytes = match applied {
            Ok(b) => b,
            Err(e) => {
                // The batch is not committed: recovery and readers ignore what it inserted.
                // Writes stop, as after a failed WAL append.
                self.poison(&mut self.state.lock(), &e);
                return Err(e);
            }
        };
        Counters::add(
            &self.counters.persistent_memtable_bytes,
            ctx.mem.approximate_bytes().saturating_sub(used_before) as u64,
        );
        ctx.last_seq = first + count - 1;
        self.visible_seq.publish(SeqNo(ctx.last_seq));
        Counters::add(&self.counters.user_bytes, user_bytes);
        Counters::add(&self.counters.user_ops, count);
        Counters::add(&self.counters.write_groups, 1);
        Ok(())
    }

    /// The most bytes `w`'s batch can take in a persistent memtable (0 in designs without
    /// one).
    fn persistent_cost(&self, w: &Waiter) -> u64 {
        if self.memtable_design.persistent_memtable_bytes().is_none() {
            return 0;
        }
        let prefix = if self.keyspaces_prefixed {
            crate::keyspace::encoding::MAX_PREFIX_LEN
        } else {
            0
        };
        w.batch
            .lock()
            .as_ref()
            .map_or(0, |b| crate::memtable::persistent::batch_cost(b, prefix))
    }

    /// Gradual admission control for the matrix container: each write owes a delay from 0 at
    /// the slowdown ratio to MAX_SLOWDOWN at a full container, growing with the square of the
    /// `overshoot` (the fraction of the way from the ratio to full) so that small overshoots
    /// pace writers gently (writes settle near the compaction rate instead of cycling between
    /// bursts and pauses). A debt below PACING_QUANTUM is paid by spinning (see
    /// PACING_SPIN_MIN); a larger one in sleeps of at most PACING_QUANTUM while the overshoot
    /// is below half, so no single write waits long (with the thread's timer slack lowered for
    /// the sleep: the default 50 µs would double each one); beyond half, sleeps may grow to
    /// MAX_SLOWDOWN to hold the container back. Called without the state lock.
    fn pace(&self, ctx: &mut WriterCtx, overshoot: f64) {
        ctx.pacing_debt += MAX_SLOWDOWN.mul_f64(overshoot * overshoot);
        let cap = if overshoot < 0.5 {
            PACING_QUANTUM
        } else {
            MAX_SLOWDOWN
        };
        if ctx.pacing_debt >= PACING_QUANTUM {
            let t = Instant::now();
            matrixkv_pmem::sleep_precisely(ctx.pacing_debt.min(cap));
            let slept = t.elapsed();
            ctx.pacing_debt = ctx.pacing_debt.saturating_sub(slept);
            self.counters
                .record_stall(StallCause::ContainerSlowdown, slept);
        } else if ctx.pacing_debt >= PACING_SPIN_MIN {
            let t = Instant::now();
            spin_for(ctx.pacing_debt);
            let waited = t.elapsed();
            ctx.pacing_debt = ctx.pacing_debt.saturating_sub(waited);
            self.counters
                .record_stall(StallCause::ContainerSlowdown, waited);
        }
    }
}

/// `batch` with the write time `now` (`Options::clock`) appended to the values of the
/// keyspaces with a TTL (see `compaction_filter.rs`).
fn stamp_write_time(batch: &WriteBatch, reg: &Registry, now: u64) -> WriteBatch {
    let mut stamped = WriteBatch::new();
    for op in batch.ops() {
        let ttl = reg.any(op.keyspace).is_some_and(|ks| ks.ttl.is_some());
        if ttl && op.kind == ValueKind::Value {
            stamped.push_op(&op, &crate::compaction_filter::stamp(op.value, now));
        } else {
            stamped.push_op(&op, op.value);
        }
    }
    stamped
}

/// The inverse of [`stamp_write_time`]: `batch` (read from the WAL) with the write time taken
/// off the values of the keyspaces with a TTL (returned as it is when it has none).
pub(crate) fn strip_write_time(
    batch: WriteBatch,
    reg: &Registry,
) -> std::result::Result<WriteBatch, &'static str> {
    let stamped = |op: &crate::batch::RawOp<'_>| {
        op.kind == ValueKind::Value && reg.any(op.keyspace).is_some_and(|ks| ks.ttl.is_some())
    };
    if !batch.ops().any(|op| stamped(&op)) {
        return Ok(batch);
    }
    let mut plain = WriteBatch::new();
    for op in batch.ops() {
        if stamped(&op) {
            let (value, _) = crate::compaction_filter::split(op.value)
                .ok_or("a value too short to hold its TTL write time")?;
            plain.push_op(&op, value);
        } else {
            plain.push_op(&op, op.value);
        }
    }
    plain.set_sequence(batch.sequence());
    Ok(plain)
}

/// Calls `f` with each operation of `batch` (its sequence number set) as the memtable stores
/// it: the sequence number, the kind, the key's keyspace prefix (empty when the database's keys
/// carry none, `prefixed` false), the key and the value; a keyspace deletion
/// (`WriteBatch::delete_keyspace`) becomes the range deletion of the keyspace's prefixes.
/// Returns the bytes of user keys and values. Both memtable kinds apply batches this way.
fn for_each_op(
    batch: &WriteBatch,
    prefixed: bool,
    mut f: impl FnMut(SeqNo, ValueKind, &[u8], &[u8], &[u8]) -> Result<()>,
) -> Result<u64> {
    let mut user_bytes = 0u64;
    let mut prefix = Vec::with_capacity(crate::keyspace::encoding::MAX_PREFIX_LEN);
    let mut prefix_of = u32::MAX;
    for (seq, op) in (batch.sequence().0..).zip(batch.ops()) {
        user_bytes += (op.key.len() + op.value.len()) as u64;
        if !prefixed {
            f(SeqNo(seq), op.kind, &[], op.key, op.value)?;
            continue;
        }
        if prefix_of != op.keyspace {
            prefix.clear();
            crate::keyspace::encoding::encode_id(op.keyspace, &mut prefix);
            prefix_of = op.keyspace;
        }
        if op.kind == ValueKind::RangeDeletion
            && op.keyspace != 0
            && op.key.is_empty()
            && op.value.is_empty()
        {
            // The whole keyspace (`WriteBatch::delete_keyspace`).
            if let Some(end) = crate::keyspace::encoding::successor(&prefix) {
                f(SeqNo(seq), op.kind, &[], &prefix, &end)?;
            }
            continue;
        }
        f(SeqNo(seq), op.kind, &prefix, op.key, op.value)?;
    }
    Ok(user_bytes)
}

/// Inserts the operations of `batch` (its sequence number set) into the DRAM memtable `mem`
/// (see [`for_each_op`]). With `backing` (a buffer equal to `batch.data()`: the WAL record's
/// view in the semi-persistent design) the values are slices of it instead of copies. Returns
/// the bytes of user keys and values inserted. The write path and WAL recovery both apply
/// batches this way.
pub(crate) fn apply_batch(
    mem: &MemTable,
    batch: &WriteBatch,
    prefixed: bool,
    backing: Option<&bytes::Bytes>,
) -> u64 {
    let shared = |value: &[u8]| {
        backing.and_then(|b| {
            batch
                .offset_of(value)
                .map(|at| b.slice(at..at + value.len()))
        })
    };
    let inserted = for_each_op(batch, prefixed, |seq, kind, prefix, key, value| {
        match shared(value) {
            Some(v) => mem.add_shared_in(seq, kind, prefix, key, v),
            None => mem.add_in(seq, kind, prefix, key, value),
        }
        Ok(())
    });
    // A DRAM memtable's inserts do not fail.
    inserted.unwrap_or_default()
}

/// [`apply_batch`] into a persistent memtable: each operation inserted and persisted (not yet
/// committed). Returns the bytes of user keys and values inserted.
pub(crate) fn apply_batch_persistent(
    mem: &MemTable,
    batch: &WriteBatch,
    prefixed: bool,
) -> Result<u64> {
    for_each_op(batch, prefixed, |seq, kind, prefix, key, value| {
        mem.add_persistent_in(seq, kind, prefix, key, value)
    })
}

/// A batch of one operation on keyspace `keyspace` (0: the default keyspace).
pub(crate) fn single(keyspace: u32, kind: ValueKind, key: &[u8], value: &[u8]) -> WriteBatch {
    // One allocation of the final size, not a chain of reallocations as the record grows.
    let mut b = WriteBatch::with_capacity(key.len() + value.len() + 16);
    match kind {
        ValueKind::Deletion => b.delete_in(keyspace, key),
        ValueKind::Merge => b.merge_in(keyspace, key, value),
        ValueKind::RangeDeletion => b.delete_range_in(keyspace, key, value),
        // Users write values; blob pointers come from the engine, never from a caller.
        ValueKind::Value | ValueKind::BlobIndex => b.put_in(keyspace, key, value),
    }
    b
}

/// Takes the batches of a commit group's waiters and joins them into one, in queue order;
/// also whether any waiter asked for a sync write. `None` for an empty group.
///
/// A waiter whose batch is gone (taken by an earlier commit) fails the group before anything
/// is logged: committed as an empty batch, its write would be acknowledged and never applied.
fn merge_group(group: &[Arc<Waiter>]) -> Result<(Option<WriteBatch>, bool)> {
    let mut merged: Option<WriteBatch> = None;
    let mut sync = false;
    for w in group {
        sync |= w.sync;
        let Some(b) = w.batch.lock().take() else {
            return Err(Error::invalid(
                "a queued write lost its batch before its group was committed; nothing of the \
                 group was written",
            ));
        };
        match merged.as_mut() {
            None => merged = Some(b),
            Some(m) => m.append(&b),
        }
    }
    Ok((merged, sync))
}

#[cfg(test)]
mod tests;
