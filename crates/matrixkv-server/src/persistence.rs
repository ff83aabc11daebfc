//! SAVE, BGSAVE and LASTSAVE: engine checkpoints into the configured directory, BGSAVE on a
//! thread of its own, and what `INFO persistence` reports about them.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crate::store::now_ms;

/// The state of saves (one at a time).
#[derive(Debug)]
pub struct Persistence {
    in_progress: AtomicBool,
    /// Unix seconds of the last successful save (the server's start before any).
    last_save: AtomicU64,
    last_ok: AtomicBool,
    last_error: Mutex<Option<String>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Default for Persistence {
    fn default() -> Persistence {
        Persistence {
            in_progress: AtomicBool::new(false),
            last_save: AtomicU64::new(now_ms() / 1000),
            last_ok: AtomicBool::new(true),
            last_error: Mutex::new(None),
            thread: Mutex::new(None),
        }
    }
}

/// A new checkpoint directory under `dir`, named by the time.
fn target(dir: &Path) -> PathBuf {
    dir.join(format!("checkpoint-{}", now_ms()))
}

impl Persistence {
    /// Unix seconds of the last successful save.
    pub fn last_save(&self) -> u64 {
        self.last_save.load(Ordering::Acquire)
    }

    fn finish(&self, result: &matrixkv::Result<matrixkv::CheckpointInfo>) {
        match result {
            Ok(_) => {
                self.last_save.store(now_ms() / 1000, Ordering::Release);
                self.last_ok.store(true, Ordering::Release);
            }
            Err(e) => {
                log::error!("background save failed: {e}");
                *self
                    .last_error
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e.to_string());
                self.last_ok.store(false, Ordering::Release);
            }
        }
    }

    /// SAVE: a checkpoint now, on the calling thread.
    ///
    /// # Errors
    /// A save is already running, or the engine's checkpoint error.
    pub fn save(&self, db: &matrixkv::Db, dir: &Path) -> Result<(), String> {
        if self.in_progress.swap(true, Ordering::AcqRel) {
            return Err("Background save already in progress".into());
        }
        let r = db.checkpoint(target(dir));
        self.finish(&r);
        self.in_progress.store(false, Ordering::Release);
        r.map(|_| ()).map_err(|e| e.to_string())
    }

    /// BGSAVE: starts `checkpoint` (which writes into the directory it is given) on a thread
    /// and returns at once.
    ///
    /// # Errors
    /// A save is already running, or no thread could be started.
    pub fn start_background(
        self: &std::sync::Arc<Self>,
        dir: &Path,
        checkpoint: impl FnOnce(&Path) -> matrixkv::Result<matrixkv::CheckpointInfo> + Send + 'static,
    ) -> Result<(), String> {
        if self.in_progress.swap(true, Ordering::AcqRel) {
            return Err("Background save already in progress".into());
        }
        let me = std::sync::Arc::clone(self);
        let to = target(dir);
        let started = std::thread::Builder::new()
            .name("matrixkv-bgsave".into())
            .spawn(move || {
                let r = checkpoint(&to);
                me.finish(&r);
                me.in_progress.store(false, Ordering::Release);
            });
        match started {
            Ok(t) => {
                let old = self
                    .thread
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .replace(t);
                if let Some(old) = old {
                    let _ = old.join();
                }
                Ok(())
            }
            Err(e) => {
                self.in_progress.store(false, Ordering::Release);
                Err(format!("could not start the background save: {e}"))
            }
        }
    }

    /// Waits for a background save (before the engine closes).
    pub fn wait(&self) {
        let t = self
            .thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(t) = t {
            let _ = t.join();
        }
    }

    /// The `INFO persistence` section's fields.
    pub fn info(&self) -> String {
        let status = if self.last_ok.load(Ordering::Acquire) {
            "ok"
        } else {
            "err"
        };
        format!(
            "# Persistence\r\nloading:0\r\nrdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\n\
             rdb_last_bgsave_status:{status}\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n\r\n",
            u8::from(self.in_progress.load(Ordering::Acquire)),
            self.last_save()
        )
    }
}
