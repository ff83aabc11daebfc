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

use std::sync::mpsc::{Receiver, Sender, channel};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::DbInner;
use crate::error::Result;
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
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::with_capacity(n);
        for i in 0..n.max(1) {
            let rx: Arc<Mutex<Receiver<Job>>> = Arc::clone(&rx);
            threads.push(
                std::thread::Builder::new()
                    .name(format!("matrixkv-level-read-{i}"))
                    .spawn(move || {
                        loop {
                            // The lock is held only while taking a job.
                            let job = match rx.lock() {
                                Ok(r) => r.recv(),
                                Err(_) => return,
                            };
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
            jobs: Mutex::new(Some(tx)),
            threads: Mutex::new(threads),
        })
    }

    /// Runs `job` on a pool thread; `false` if the pool is stopped.
    fn submit(&self, job: Job) -> bool {
        match self.jobs.lock() {
            Ok(g) => g.as_ref().is_some_and(|tx| tx.send(job).is_ok()),
            Err(_) => false,
        }
    }

    /// Stops the threads (after the jobs queued so far) and waits for them.
    pub(crate) fn stop(&self) {
        if let Ok(mut g) = self.jobs.lock() {
            g.take();
        }
        let threads = match self.threads.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(_) => return,
        };
        for t in threads {
            let _ = t.join();
        }
    }
}

impl DbInner {
    /// The newest version of `user_key` at `seq` in the levels of `version` (L0 tables, then
    /// L1, L2, ...; the matrix container's rows are searched by the caller), each level with
    /// a file that may hold the key searched by its own thread. `Ok(None)`: no level holds
    /// the key. The shallowest answer wins; the caller falls back to the serial path when it
    /// is a merge operand.
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
        let Some((&first, deeper)) = levels.split_first() else {
            return Ok(None);
        };
        if deeper.is_empty() {
            // One candidate level: no thread to hand anything to.
            return Ok(self
                .search_level(version, first, user_key, seq)?
                .map(|(kind, v)| (first, kind, v)));
        }
        let (tx, rx) = channel::<(usize, LevelAnswer)>();
        // The shallowest level is searched here; the deeper ones by the pool (or here too if
        // it is stopped).
        let mut here = vec![first];
        for &level in deeper {
            let job_tx = tx.clone();
            let db = Arc::clone(self);
            let v = Arc::clone(version);
            let key = user_key.to_vec();
            let job: Job = Box::new(move || {
                let answer = db.search_level(&v, level, &key, seq);
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
                *slot = Some(self.search_level(version, level, user_key, seq));
            }
        }
        // Every job sends exactly once (its sender is dropped after).
        for (level, answer) in rx.iter() {
            if let Some(slot) = answers.get_mut(level) {
                *slot = Some(answer);
            }
        }
        for (level, answer) in answers.into_iter().enumerate() {
            if let Some(found) = answer.transpose()?.flatten() {
                return Ok(Some((level, found.0, found.1)));
            }
        }
        Ok(None)
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
