//! NoveLSM's parallel reads (Kannan et al., ATC 2018, "read parallelism"): a point lookup
//! that misses every memtable searches the levels at once, one dedicated thread per level,
//! instead of one level after the other, and the shallowest level holding the key decides.
//! The threads are started once per database (the paper notes that starting threads per read
//! costs more than it saves); a lookup hands them one job per level whose table's bloom filter
//! admits the key, and searches the shallowest such level itself meanwhile (with one such
//! level, no thread is involved).
//!
//! Only designs that ask for it ([`crate::memtable::design::MemtableDesign::parallel_level_reads`])
//! have a pool. A lookup whose shallowest version is a merge operand falls back to the serial
//! path, which collects the operands level by level.
//!
//! Who calls it: `engine::read` (`get_in_view`).

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use crate::lock_order::{Mutex, Rank};
use std::thread::JoinHandle;

use super::DbInner;
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::version::version::Version;

/// A job of the pool: searches one level and reports through its own channel.
type Job = Box<dyn FnOnce() + Send + 'static>;

/// The newest version of the key in one level (`None`: the level does not hold it).
pub(crate) type LevelAnswer = Result<Option<(ValueKind, Vec<u8>)>>;

/// The level-search threads of a database.
pub(crate) struct LevelReaders {
    jobs: Mutex<Option<Sender<Job>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for LevelReaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LevelReaders").finish_non_exhaustive()
    }
}

impl LevelReaders {
    /// Starts `n` threads.
    pub(crate) fn start(n: usize) -> std::io::Result<LevelReaders> {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(Rank::LeafLevelReaders, rx));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("matrixkv-level-read-{i}"))
                    .spawn(move || {
                        loop {
                            // The lock is held only while taking a job.
                            let job = rx.lock().recv();
                            match job {
                                Ok(job) => job(),
                                // The database is closing: its sender is gone.
                                Err(_) => return,
                            }
                        }
                    })?,
            );
        }
        Ok(LevelReaders {
            jobs: Mutex::new(Rank::LeafLevelReaders, Some(tx)),
            threads: Mutex::new(Rank::LeafLevelReaders, threads),
        })
    }

    /// Runs `job` on a pool thread; `false` if the pool is stopped.
    fn submit(&self, job: Job) -> bool {
        self.jobs
            .lock()
            .as_ref()
            .is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Stops the threads (after the jobs queued so far) and waits for them.
    pub(crate) fn stop(&self) {
        self.jobs.lock().take();
        let threads = std::mem::take(&mut *self.threads.lock());
        for t in threads {
            // Jobs catch their panics: one that reaches here is the loop's own.
            if t.join().is_err() {
                log::error!("matrixkv: a level-search thread panicked");
            }
        }
    }
}

impl DbInner {
    /// The newest version of `user_key` at `seq` in the levels of `version` (L0 tables, then
    /// L1, L2, ...; the matrix container's rows are searched by the caller), each level with
    /// a file that may hold the key searched by its own thread. `Ok(None)`: no level holds
    /// the key. The shallowest answer wins; the caller falls back to the serial path when it
    /// is a merge operand. A level whose search fails or panics fails the lookup.
    pub(crate) fn get_levels_in_parallel(
        self: &Arc<Self>,
        pool: &LevelReaders,
        version: &Arc<Version>,
        user_key: &[u8],
        seq: SeqNo,
    ) -> Result<Option<(usize, ValueKind, Vec<u8>)>> {
        // Threads are launched only for levels whose tables' bloom filters admit the key (the
        // paper launches them only after a memtable miss, and the handoff costs more than a
        // cached table search): usually one level is left, searched here with no handoff.
        let mut levels = Vec::new();
        for level in 0..crate::version::NUM_LEVELS {
            for f in version.files_for_key(level, user_key) {
                if f.smallest_seq <= seq && self.tables.get(level, f)?.may_contain(user_key) {
                    levels.push(level);
                    break;
                }
            }
        }
        if let [only] = levels.as_slice() {
            // One candidate level: no thread to hand anything to.
            return Ok(self
                .search_level(version, *only, user_key, seq)?
                .map(|(kind, v)| (*only, kind, v)));
        }
        let search: Search = {
            let db = Arc::clone(self);
            let v = Arc::clone(version);
            let key = user_key.to_vec();
            Arc::new(move |level| db.search_level(&v, level, &key, seq))
        };
        shallowest(pool, &levels, &search)
    }

    /// The newest version of `user_key` at `seq` in level `level` (in L0, its tables newest
    /// first).
    fn search_level(
        &self,
        version: &Version,
        level: usize,
        user_key: &[u8],
        seq: SeqNo,
    ) -> LevelAnswer {
        for f in version.files_for_key(level, user_key) {
            if f.smallest_seq > seq {
                continue;
            }
            let table = self.tables.get(level, f)?;
            if let Some(found) = table.get(user_key, seq)? {
                return Ok(Some(found));
            }
        }
        Ok(None)
    }
}

/// Searches one level: the level's answer ([`LevelAnswer`]).
type Search = Arc<dyn Fn(usize) -> LevelAnswer + Send + Sync>;

/// Searches `levels` (shallowest first) with `search`: the first here, the others on the
/// pool's threads (or here too if it is stopped). The shallowest level that holds the key
/// decides; a level searched with an error, or a panic, or no answer fails the lookup (it may
/// hold a newer version than the deeper levels).
fn shallowest(
    pool: &LevelReaders,
    levels: &[usize],
    search: &Search,
) -> Result<Option<(usize, ValueKind, Vec<u8>)>> {
    let Some((&first, deeper)) = levels.split_first() else {
        return Ok(None);
    };
    let (tx, rx) = channel::<(usize, LevelAnswer)>();
    let mut here = vec![first];
    for &level in deeper {
        let job_tx = tx.clone();
        let search = Arc::clone(search);
        let job: Job = Box::new(move || {
            // A panic is this level's answer too (an error): caught here, it neither kills
            // the pool's thread nor leaves the level unanswered.
            let answer = catch_unwind(AssertUnwindSafe(|| search(level))).unwrap_or_else(|p| {
                Err(Error::invalid(format!(
                    "the search of level {level} {}",
                    crate::merge::panic_message(p.as_ref())
                )))
            });
            let _ = job_tx.send((level, answer));
        });
        if !pool.submit(job) {
            here.push(level);
        }
    }
    drop(tx);
    let mut answers: Vec<Option<LevelAnswer>> =
        (0..crate::version::NUM_LEVELS).map(|_| None).collect();
    for level in here {
        if let Some(slot) = answers.get_mut(level) {
            *slot = Some(search(level));
        }
    }
    // Every job sends exactly once (its sender is dropped after).
    for (level, answer) in rx.iter() {
        if let Some(slot) = answers.get_mut(level) {
            *slot = Some(answer);
        }
    }
    for &level in levels {
        // A level searched without an answer may hold a newer version than any deeper one:
        // the lookup fails rather than let an older version win.
        let answer = answers
            .get_mut(level)
            .and_then(Option::take)
            .unwrap_or_else(|| {
                Err(Error::invalid(format!(
                    "the search of level {level} ended without an answer"
                )))
            });
        if let Some((kind, v)) = answer? {
            return Ok(Some((level, kind, v)));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(kind: ValueKind, v: &str) -> LevelAnswer {
        Ok(Some((kind, v.as_bytes().to_vec())))
    }

    #[test]
    fn the_shallowest_level_holding_the_key_decides() {
        let pool = LevelReaders::start(2).unwrap();
        let search: Search = Arc::new(|level| match level {
            0 => Ok(None),
            1 => answer(ValueKind::Value, "new"),
            _ => answer(ValueKind::Value, "old"),
        });
        let got = shallowest(&pool, &[0, 1, 2], &search).unwrap();
        assert_eq!(got, Some((1, ValueKind::Value, b"new".to_vec())));
        pool.stop();
    }

    #[test]
    fn a_level_search_that_panics_fails_the_lookup_instead_of_hiding_the_level() {
        let pool = LevelReaders::start(2).unwrap();
        let search: Search = Arc::new(|level| match level {
            0 => Ok(None),
            1 => panic!("level reader fault injected by the test"),
            _ => answer(ValueKind::Value, "old"),
        });
        // Level 1 may hold a newer version: level 2's older one must not be returned.
        let got = shallowest(&pool, &[0, 1, 2], &search);
        assert!(
            got.is_err(),
            "a panicked level search read as a miss: {got:?}"
        );
        // The pool still serves lookups after the panic.
        let ok: Search = Arc::new(|level| match level {
            0 => Ok(None),
            _ => answer(ValueKind::Value, "v"),
        });
        for _ in 0..4 {
            let got = shallowest(&pool, &[0, 1, 2], &ok).unwrap();
            assert_eq!(got, Some((1, ValueKind::Value, b"v".to_vec())));
        }
        pool.stop();
    }

    #[test]
    fn a_level_search_error_fails_the_lookup() {
        let pool = LevelReaders::start(2).unwrap();
        let search: Search = Arc::new(|level| match level {
            0 => Ok(None),
            1 => Err(crate::error::Error::Closed),
            _ => answer(ValueKind::Value, "old"),
        });
        let got = shallowest(&pool, &[0, 1, 2], &search);
        assert!(matches!(got, Err(crate::error::Error::Closed)), "{got:?}");
        pool.stop();
    }
}
