//! Where a database's two tiers are, from `--db` alone when possible.
//!
//! Two layouts are found without more flags:
//! - the standard one (`Options::new(db)`, what `checkpoint`, `backup restore` and an embedding
//!   program with the defaults make): the slow tier in `<db>/slow`, the fast one in `<db>/fast`;
//! - a `matrixkv bench` database (kept with `--use_existing_db`): `--db` is the engine's own
//!   directory `<bench --db>/<engine>`, which is the slow tier itself, and its fast tier is
//!   wherever bench's `--fast_dir` put it (`<fast_dir>/<engine>`, often under /dev/shm). Bench
//!   writes that path into the slow tier's [`FAST_DIR_FILE`], which the commands read.
//!
//! `--fast-dir` and `--slow-dir` override what is found. When no database is found, the error
//! names the directories looked at, and bench databases below `--db` when there are some.

use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

/// The file in a bench database's slow-tier directory holding the absolute path of its fast
/// tier (one line). The engine ignores files it does not know.
pub const FAST_DIR_FILE: &str = "FAST_DIR";

/// The engine's file that marks a slow tier holding a database.
const CURRENT: &str = "CURRENT";

/// Both tiers of a database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The fast tier's directory.
    pub fast_dir: PathBuf,
    /// The slow tier's directory.
    pub slow_dir: PathBuf,
}

/// Writes `slow_dir`'s [`FAST_DIR_FILE`] naming `fast_dir` (made absolute), so the other
/// commands open the database with `--db <slow_dir>` alone.
pub fn record_fast_dir(slow_dir: &Path, fast_dir: &Path) -> std::io::Result<()> {
    let fast = std::path::absolute(fast_dir)?;
    std::fs::write(
        slow_dir.join(FAST_DIR_FILE),
        format!("{}\n", fast.to_string_lossy()),
    )
}

/// The slow tier of the database at `db`: `slow` if given, `db` itself when it holds the
/// engine's CURRENT file (a bench database), else `<db>/slow`.
pub fn slow_dir(db: &Path, slow: Option<&Path>) -> PathBuf {
    match slow {
        Some(s) => s.to_owned(),
        None if db.join(CURRENT).is_file() => db.to_owned(),
        None => db.join("slow"),
    }
}

/// Both tiers of the existing database at `db` (see the module documentation); an error
/// naming what is missing when there is no database there or its fast tier is gone.
pub fn existing(db: &Path, fast: Option<&Path>, slow: Option<&Path>) -> Result<Located> {
    let slow_dir = slow_dir(db, slow);
    if !slow_dir.join(CURRENT).is_file() {
        let looked = match slow {
            Some(s) => format!("{} has no {CURRENT} file", s.display()),
            None => format!(
                "neither {} nor {} exists",
                db.join(CURRENT).display(),
                db.join("slow").join(CURRENT).display()
            ),
        };
        let below = databases_below(db);
        let hint = if below.is_empty() {
            " (a `matrixkv bench` database is kept by `bench --use_existing_db` in \
             <bench --db>/<engine>; give that directory as --db)"
                .to_owned()
        } else {
            format!(
                "; it holds bench databases: give --db {}",
                below
                    .iter()
                    .map(|p| p.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" or --db ")
            )
        };
        bail!("no matrixkv database at {}: {looked}{hint}", db.display());
    }
    let pointer = slow_dir.join(FAST_DIR_FILE);
    let (fast_dir, from) = match fast {
        Some(f) => (f.to_owned(), "--fast-dir".to_owned()),
        None if pointer.is_file() => {
            let text = std::fs::read_to_string(&pointer)?;
            (
                PathBuf::from(text.trim_end_matches(['\n', '\r'])),
                format!("named by {}", pointer.display()),
            )
        }
        None if slow_dir == db => bail!(
            "{} holds a database's slow tier but no {FAST_DIR_FILE} file naming its fast tier \
             (bench databases made before it was written): give --fast-dir \
             <bench --fast_dir>/<engine>",
            db.display()
        ),
        None => (db.join("fast"), "the default <db>/fast".to_owned()),
    };
    if !fast_dir.is_dir() {
        bail!(
            "the fast tier {} of the database in {} does not exist ({from}); a tier under \
             /dev/shm is lost at a reboot, and with it the unflushed writes and level 0",
            fast_dir.display(),
            slow_dir.display()
        );
    }
    Ok(Located { fast_dir, slow_dir })
}

/// Directories right below `db` that hold a database's slow tier (bench's `<db>/<engine>`).
fn databases_below(db: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(db) else {
        return Vec::new();
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join(CURRENT).is_file())
        .collect();
    found.sort();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, b"").unwrap();
    }

    #[test]
    fn the_standard_layout_is_found_from_db() {
        let t = tempfile::tempdir().unwrap();
        touch(&t.path().join("slow/CURRENT"));
        std::fs::create_dir_all(t.path().join("fast")).unwrap();
        let l = existing(t.path(), None, None).unwrap();
        assert_eq!(l.slow_dir, t.path().join("slow"));
        assert_eq!(l.fast_dir, t.path().join("fast"));
    }

    #[test]
    fn a_bench_database_is_found_through_its_pointer() {
        let t = tempfile::tempdir().unwrap();
        let slow = t.path().join("bench-data/matrixkv");
        touch(&slow.join("CURRENT"));
        let fast = t.path().join("shm/matrixkv");
        std::fs::create_dir_all(&fast).unwrap();
        record_fast_dir(&slow, &fast).unwrap();
        let l = existing(&slow, None, None).unwrap();
        assert_eq!(
            l,
            Located {
                fast_dir: fast.clone(),
                slow_dir: slow.clone()
            }
        );
        // The base directory names the databases below it.
        let e = existing(&t.path().join("bench-data"), None, None).unwrap_err();
        assert!(
            e.to_string().contains(&format!("--db {}", slow.display())),
            "{e}"
        );
        // A fast tier that is gone is named.
        std::fs::remove_dir(&fast).unwrap();
        let e = existing(&slow, None, None).unwrap_err().to_string();
        assert!(
            e.contains(&fast.display().to_string()) && e.contains("FAST_DIR"),
            "{e}"
        );
        // Without the pointer: the flag to give.
        std::fs::remove_file(slow.join(FAST_DIR_FILE)).unwrap();
        let e = existing(&slow, None, None).unwrap_err().to_string();
        assert!(e.contains("--fast-dir"), "{e}");
    }

    #[test]
    fn no_database_names_the_files_looked_for() {
        let t = tempfile::tempdir().unwrap();
        let e = existing(t.path(), None, None).unwrap_err().to_string();
        assert!(
            e.contains("slow/CURRENT") && e.contains("--use_existing_db"),
            "{e}"
        );
    }
}
