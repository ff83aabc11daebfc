//! Test hooks of [`Db`] (feature `testing`): a hook inside the next read, the matrix
//! container's page accounting, and where the versions of a key are.

use super::Db;

impl Db {
    /// Runs `hook` once, inside the next read (`get`, `multi_get`, iterator creation) of any
    /// thread, after it took its read view and before it takes its sequence number, with no
    /// engine lock held. (Test hook.)
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn hook_after_read_view(&self, hook: impl FnOnce() + Send + 'static) {
        *self.inner.test_hooks.after_read_view.lock() = Some(Box::new(hook));
    }

    /// Checks the page accounting of the matrix container: every page is either free, held by
    /// a row of the current version, or released and waiting for older versions to go away,
    /// and never two of these at once. (Test hook.)
    #[cfg(feature = "testing")]
    pub fn check_container_accounting(&self) -> std::result::Result<(), String> {
        let st = self.inner.state.lock();
        let Some(pool) = &st.pool else { return Ok(()) };
        let v = st.versions.current();
        let live: std::collections::HashSet<u32> = v.all_row_pages().into_iter().collect();
        let deferred: std::collections::HashSet<u32> = st.deferred_pages.iter().copied().collect();
        if let Some(p) = live.iter().find(|p| !pool.is_allocated(**p)) {
            return Err(format!("page {p} is used by a row but free in the pool"));
        }
        if let Some(p) = deferred.iter().find(|p| live.contains(p)) {
            return Err(format!("page {p} is both used and waiting to be freed"));
        }
        let unsettled = st.unsettled.pages.len();
        let expected = live.len() + deferred.len() + unsettled;
        if pool.used_pages() != expected {
            return Err(format!(
                "the pool has {} pages in use, rows hold {} and {} await release: pages leaked",
                pool.used_pages(),
                live.len(),
                deferred.len()
            ));
        }
        Ok(())
    }

    /// Where the versions of `key` (of keyspace `keyspace`) are: each memtable's newest one and
    /// every table's, with sequence numbers, kinds and value lengths. (Test hook.)
    #[cfg(feature = "testing")]
    pub fn debug_versions(&self, keyspace: &str, key: &[u8]) -> String {
        use crate::iter::InternalIterator;
        use std::fmt::Write as _;
        /// Appends `label: seq kind value-length; ` for every version of `key` in `it`.
        fn walk(out: &mut String, label: &str, key: &[u8], it: &mut dyn InternalIterator) {
            if it
                .seek(&crate::key::seek_key(key, crate::key::SeqNo::MAX))
                .is_err()
            {
                return;
            }
            while it.valid() {
                match crate::key::parse_internal_key(it.key()) {
                    Ok(p) if p.user_key == key => {
                        let len = it.value().len();
                        let _ = write!(out, "{label}: {:?} {:?} {len}; ", p.seq, p.kind);
                    }
                    _ => break,
                }
                if it.next().is_err() {
                    break;
                }
            }
        }
        let Some(ks) = self.inner.keyspaces().by_name(keyspace).cloned() else {
            return String::new();
        };
        let key = ks.engine_key(key);
        let mut out = String::new();
        let view = self.inner.read_view();
        for (i, m) in std::iter::once(&view.mem).chain(&view.imm).enumerate() {
            walk(&mut out, &format!("mem{i}"), &key, &mut m.iter());
        }
        for level in 0..crate::version::NUM_LEVELS {
            for f in view.version.files(level) {
                let label = format!(
                    "L{level} {} [{:?}..{:?}]",
                    f.number, f.smallest_seq, f.largest_seq
                );
                match self.inner.tables.get(level, f) {
                    Ok(t) => walk(&mut out, &label, &key, &mut t.iter()),
                    Err(e) => {
                        let _ = write!(out, "{label}: unreadable ({e}); ");
                    }
                }
            }
        }
        out
    }
}
