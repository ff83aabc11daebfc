//! Checks of what the database returns against the expected state: point reads, multi_get,
//! ranges read by iterators (live ones and snapshot ones), the whole database after a reopen
//! (which also settles the writes a crash left in flight), and checkpoints.

use std::collections::BTreeMap;

use anyhow::{Context, Result, bail};
use matrixkv::{DbIterator, Keyspace};

use super::harness::Harness;
use super::values::{Space, Val};

/// Every (key, value) of `it` within its bounds, forward (or backward, returned in key order).
/// At most `limit` entries (more is a failure the caller sees as extra keys).
pub fn scan(it: &mut DbIterator, backward: bool, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut out = Vec::new();
    if backward {
        it.seek_to_last()?;
    } else {
        it.seek_to_first()?;
    }
    while it.valid() && out.len() <= limit {
        out.push((it.key().to_vec(), it.value().to_vec()));
        if backward {
            it.prev()?;
        } else {
            it.next()?;
        }
    }
    if backward {
        out.reverse();
    }
    Ok(out)
}

/// Checks `entries` (keys of keyspace `ks`, in order) against slots `lo..hi` whose values may
/// be any of `allowed(slot)`. Returns the value each slot matched (absent where none is).
pub fn check_range(
    sp: &Space,
    ks: usize,
    lo: usize,
    hi: usize,
    entries: &[(Vec<u8>, Vec<u8>)],
    allowed: &dyn Fn(usize) -> Vec<Val>,
) -> Result<Vec<(usize, Val)>> {
    let mut got: BTreeMap<usize, &[u8]> = BTreeMap::new();
    let mut last: Option<&[u8]> = None;
    for (k, v) in entries {
        if last.is_some_and(|l| l >= k.as_slice()) {
            bail!(
                "keyspace {ks}: keys out of order: {:?} after {:?}",
                show(k),
                last.map(show)
            );
        }
        last = Some(k);
        match sp.slot_of(ks, k) {
            Some(s) if (lo..hi).contains(&s) => {
                got.insert(s, v);
            }
            _ => bail!(
                "keyspace {ks}: key {} outside the range read ({}..{})",
                show(k),
                show(&sp.key(lo)),
                show(&sp.key(hi - 1))
            ),
        }
    }
    let mut settled = Vec::with_capacity(hi - lo);
    for s in lo..hi {
        let g = got.get(&s).copied();
        let a = allowed(s);
        match sp.which(s, &a, g) {
            Some(v) => settled.push((s, v)),
            None => bail!(
                "keyspace {ks} key {}: read {}, expected one of {}",
                show(&sp.key(s)),
                sp.describe(s, g),
                describe_allowed(sp, s, &a)
            ),
        }
    }
    Ok(settled)
}

/// Checks one point read of `slot`.
pub fn check_point(sp: &Space, slot: usize, allowed: &[Val], got: Option<&[u8]>) -> Result<()> {
    if sp.which(slot, allowed, got).is_none() {
        bail!(
            "keyspace {} key {}: read {}, expected one of {}",
            sp.keyspace(slot),
            show(&sp.key(slot)),
            sp.describe(slot, got),
            describe_allowed(sp, slot, allowed)
        );
    }
    Ok(())
}

fn describe_allowed(sp: &Space, slot: usize, allowed: &[Val]) -> String {
    let parts: Vec<String> = allowed
        .iter()
        .map(|v| match v.base() {
            None => "absent".to_owned(),
            Some(b) => {
                let d = if sp.droppable(slot, b) {
                    " (droppable)"
                } else {
                    ""
                };
                format!(
                    "base {b:#x}: {}{d}",
                    sp.describe(slot, Some(&sp.value(slot, b)))
                )
            }
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// A key for messages.
pub fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Reads every key of both keyspaces through `ks` and checks it against the values
/// `allowed(slot)` permits; returns the value each slot holds. Point reads of a sample
/// cross-check the scan.
pub fn check_all(
    sp: &Space,
    ks: &[Keyspace; 2],
    allowed: &dyn Fn(usize) -> Vec<Val>,
    sample_seed: u64,
) -> Result<Vec<(usize, Val)>> {
    let mut settled = Vec::with_capacity(sp.slots());
    for (i, k) in ks.iter().enumerate() {
        let mut it = k.iter().context("iterator")?;
        let entries = scan(&mut it, false, sp.keys).context("full scan")?;
        let lo = i * sp.keys;
        settled.extend(check_range(sp, i, lo, lo + sp.keys, &entries, allowed)?);
    }
    let mut rng = super::rng::Rng::new(sample_seed);
    for _ in 0..200 {
        let s = rng.index(sp.slots());
        let got = ks[sp.keyspace(s)].get(sp.key(s)).context("get")?;
        check_point(sp, s, &allowed(s), got.as_deref()).context("point read after the scan")?;
    }
    Ok(settled)
}

/// Verifies the whole database against the expected state and settles the writes a crash
/// left in flight to the values read (RocksDB's startup verification).
pub fn verify_and_settle(h: &Harness, seed: u64) -> Result<usize> {
    let settled = check_all(&h.space, &h.ks, &|s| h.exp.allowed(s), seed)?;
    check_atomicity(h, &settled)?;
    let n = settled.len();
    for (s, v) in settled {
        let _l = h.exp.lock(&[s]);
        if h.exp.pending(s).is_some() || h.exp.committed(s) != v {
            h.exp.commit(s, v)?;
        }
    }
    Ok(n)
}

/// Checks that each write a crash left in flight is in the database whole or not at all:
/// among the slots it had marked pending (those it had not committed yet), none may hold
/// the old value while another holds the new one.
fn check_atomicity(h: &Harness, settled: &[(usize, Val)]) -> Result<()> {
    let in_flight: Vec<InFlight> = settled
        .iter()
        .filter_map(|&(slot, got)| {
            let (new, tag) = h.exp.pending_tagged(slot)?;
            Some(InFlight {
                slot,
                tag,
                old: h.exp.committed(slot),
                new,
                got,
            })
        })
        .collect();
    if let Some((n, o)) = half_applied(&h.space, &in_flight) {
        bail!(
            "a write in flight at the crash is half applied: key {} of keyspace {} has its \
             new value, key {} of keyspace {} its old one",
            show(&h.space.key(n)),
            h.space.keyspace(n),
            show(&h.space.key(o)),
            h.space.keyspace(o)
        );
    }
    Ok(())
}

/// A slot that a write in flight at the crash had marked pending, and what it read as.
#[derive(Debug, Clone, Copy)]
struct InFlight {
    slot: usize,
    tag: u16,
    old: Val,
    new: Val,
    /// The value the read settled to (see [`Space::which`]).
    got: Val,
}

/// The first write (by tag) of `in_flight` that one slot shows applied and another not: a
/// slot that reads as its new value and not its old, and a slot of the same tag that reads
/// as its old value and not its new. A read that both values explain says nothing: a slot
/// read as absent whose old value the compaction filter may have removed (and whose new
/// value is a deletion) is not evidence that the write was applied, nor the reverse.
fn half_applied(sp: &Space, in_flight: &[InFlight]) -> Option<(usize, usize)> {
    // Per tag: a slot that shows the write applied, and one that shows it not applied.
    let mut seen: BTreeMap<u16, (Option<usize>, Option<usize>)> = BTreeMap::new();
    for f in in_flight {
        let explains = |v: Val| match f.got.base() {
            // Read back exactly: only the value of the same base explains it.
            Some(_) => v == f.got,
            // Read as absent: a deletion, or a value the filter may have dropped.
            None => sp.matches(f.slot, v, None),
        };
        let (by_new, by_old) = (explains(f.new), explains(f.old));
        let e = seen.entry(f.tag).or_default();
        if by_new && !by_old {
            e.0 = Some(f.slot);
        } else if by_old && !by_new {
            e.1 = Some(f.slot);
        }
        if let (Some(n), Some(o)) = *e {
            return Some((n, o));
        }
    }
    None
}

/// Takes a copy while the writers run: a checkpoint, or (one time in two, in designs that
/// back up) a backup into `root/backups` restored to `root/restored`. Opens the copy and
/// checks that every key holds a value the expected state allowed while the copy was taken.
/// `root` holds every copy of the run (removed with the database).
pub fn copy(h: &Harness, root: &std::path::Path, seed: u64) -> Result<&'static str> {
    let backup = seed % 2 == 1 && !matches!(h.options.design, matrixkv::Design::SlmDb(_));
    if backup {
        backup_and_restore(h, root, seed)?;
        Ok("backup")
    } else {
        checkpoint(h, &root.join("checkpoint"), seed)?;
        Ok("checkpoint")
    }
}

/// Runs `take` and returns its result with, per slot, every value the expected state
/// allowed from before the call to after it.
fn allowed_during<T>(h: &Harness, take: impl FnOnce() -> T) -> (T, Vec<Vec<Val>>) {
    h.exp.start_recording();
    let mut allowed: Vec<Vec<Val>> = (0..h.space.slots()).map(|s| h.exp.allowed(s)).collect();
    let out = take();
    for (s, a) in allowed.iter_mut().enumerate() {
        a.extend(h.exp.allowed(s));
    }
    for (s, v) in h.exp.stop_recording() {
        allowed[s].push(v);
    }
    (out, allowed)
}

/// Opens the copy of the database in `dir` (made at `sequence`) with the run's options and
/// checks every key against `allowed`.
fn check_copy(
    h: &Harness,
    dir: &std::path::Path,
    sequence: matrixkv::SeqNo,
    allowed: &[Vec<Val>],
    seed: u64,
) -> Result<()> {
    let mut o = h.options.clone();
    let paths = matrixkv::Options::new(dir);
    o.fast_dir = paths.fast_dir;
    o.slow_dir = paths.slow_dir;
    o.tiers = None;
    o.create_if_missing = false;
    let copy = matrixkv::Db::open(o).context("open the copy")?;
    if copy.last_sequence() != sequence {
        bail!(
            "the copy opened at sequence {:?}, its info says {sequence:?}",
            copy.last_sequence()
        );
    }
    let ks = [
        copy.keyspace(matrixkv::DEFAULT_KEYSPACE)?,
        copy.keyspace(super::values::KS1)?,
    ];
    let result = check_all(&h.space, &ks, &|s| allowed[s].clone(), seed);
    drop(ks);
    copy.close().context("close the copy")?;
    result.context("the copy's contents")?;
    Ok(())
}

/// Takes a checkpoint into `dir`, opens it and checks it (see [`copy`]).
fn checkpoint(h: &Harness, dir: &std::path::Path, seed: u64) -> Result<()> {
    let _gate = h.gate(1);
    let _ = std::fs::remove_dir_all(dir);
    let (info, allowed) = allowed_during(h, || h.db.checkpoint(dir));
    let info = info.context("checkpoint")?;
    check_copy(h, dir, info.sequence, &allowed, seed).context("checkpoint")?;
    std::fs::remove_dir_all(dir)?;
    println!(
        "stress: checkpoint at sequence {:?} verified",
        info.sequence
    );
    Ok(())
}

/// Adds an incremental backup to `root/backups` (the directory outlives kills, so its open
/// also cleans what a killed backup left), verifies it, restores it into `root/restored`,
/// opens and checks the restored database, and keeps the newest two backups.
fn backup_and_restore(h: &Harness, root: &std::path::Path, seed: u64) -> Result<()> {
    let _gate = h.gate(1);
    let engine = matrixkv::BackupEngine::open(root.join("backups")).context("open the backups")?;
    let (info, allowed) = allowed_during(h, || engine.create_backup(&h.db));
    let info = info.context("backup")?;
    engine.verify(info.id).context("verify the backup")?;
    let restored = root.join("restored");
    let _ = std::fs::remove_dir_all(&restored);
    let paths = matrixkv::Options::new(&restored);
    engine
        .restore(info.id, paths)
        .context("restore the backup")?;
    check_copy(h, &restored, info.sequence, &allowed, seed).context("restored backup")?;
    std::fs::remove_dir_all(&restored)?;
    engine.purge_old_backups(2).context("purge old backups")?;
    println!(
        "stress: backup {} at sequence {:?} ({} files, {} new bytes) restored and verified",
        info.id, info.sequence, info.files, info.new_bytes
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flight(slot: usize, tag: u16, old: Val, new: Val, got: Val) -> InFlight {
        InFlight {
            slot,
            tag,
            old,
            new,
            got,
        }
    }

    fn space(filter: bool) -> Space {
        Space { keys: 100, filter }
    }

    /// A base of slot `slot` whose value the harness's filter drops (or keeps).
    fn base(sp: &Space, slot: usize, droppable: bool) -> u32 {
        (1u32..)
            .find(|&b| sp.droppable(slot, b) == droppable)
            .unwrap_or_default()
    }

    #[test]
    fn a_write_seen_in_one_slot_and_not_another_is_half_applied() {
        let sp = space(false);
        let (a, b) = (3, 105);
        let in_flight = [
            flight(a, 7, Val::of(1), Val::of(2), Val::of(2)),
            flight(b, 7, Val::of(5), Val::of(6), Val::of(5)),
        ];
        assert_eq!(half_applied(&sp, &in_flight), Some((a, b)));
        // Other tags are other writes.
        let mut other = in_flight;
        other[1].tag = 8;
        assert_eq!(half_applied(&sp, &other), None);
    }

    #[test]
    fn a_deletion_over_a_droppable_value_read_as_absent_proves_nothing() {
        // The write deleted slot `a` of keyspace 1, whose old value the filter may drop:
        // `a` reading absent is explained by either value (regression: seeds 177210927146135
        // and 88653946431989 reported a half-applied batch for this).
        let sp = space(true);
        let a = 105;
        let dropped = base(&sp, a, true);
        assert!(sp.droppable(a, dropped));
        let in_flight = [
            flight(a, 9, Val::of(dropped), Val::ABSENT, Val::ABSENT),
            flight(4, 9, Val::of(5), Val::of(6), Val::of(5)),
        ];
        assert_eq!(half_applied(&sp, &in_flight), None);
        // The reverse: a droppable new value read as absent where the old one was absent.
        let reverse = [
            flight(a, 9, Val::ABSENT, Val::of(dropped), Val::ABSENT),
            flight(4, 9, Val::of(5), Val::of(6), Val::of(6)),
        ];
        assert_eq!(half_applied(&sp, &reverse), None);
        // Without the filter the absent read is the deletion: half applied.
        let sp = space(false);
        let kept = base(&sp, a, false);
        let strict = [
            flight(a, 9, Val::of(kept), Val::ABSENT, Val::ABSENT),
            flight(4, 9, Val::of(5), Val::of(6), Val::of(5)),
        ];
        assert_eq!(half_applied(&sp, &strict), Some((a, 4)));
    }
}
