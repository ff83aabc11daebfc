//! SCAN and HSCAN cursors, shared by every connection (as Kvrocks keeps them): a cursor is a
//! 64-bit number clients can parse, and any connection may continue it, so redis-py's
//! `scan_iter` over a connection pool works. Each number names where its scan resumes; the
//! table keeps the newest [`MAX_CURSORS`] of them within [`MAX_BYTES`] of resume keys, and
//! an evicted or forged cursor is refused with an error, never silently restarted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Most cursors remembered at once.
pub const MAX_CURSORS: usize = 1 << 16;
/// Most bytes of resume keys remembered at once.
pub const MAX_BYTES: usize = 64 << 20;

/// Where a scan resumes: what it scans (the database, and for HSCAN the hash's field prefix)
/// and the first engine key it has not returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Position {
    /// The Redis database.
    pub db: usize,
    /// The engine-key prefix the scan walks (`M` for SCAN, a hash's field prefix for HSCAN).
    pub prefix: Vec<u8>,
    /// The first engine key not yet returned.
    pub resume: Vec<u8>,
}

#[derive(Default)]
struct Table {
    by_id: HashMap<u64, Position>,
    order: VecDeque<u64>,
    bytes: usize,
}

/// The server's cursor table.
pub struct Cursors {
    table: Mutex<Table>,
    next: AtomicU64,
}

impl Default for Cursors {
    fn default() -> Cursors {
        // Numbers start from the clock so a restarted server does not reuse a number a client
        // still holds for a position it no longer knows.
        let start = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_micros() as u64)
            & ((1 << 52) - 1);
        Cursors {
            table: Mutex::new(Table::default()),
            next: AtomicU64::new(start.max(1)),
        }
    }
}

impl Cursors {
    /// A new cursor number for `pos` (never 0, which means "start" and "done").
    pub fn remember(&self, pos: Position) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed).max(1);
        let mut t = self
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.bytes += pos.prefix.len() + pos.resume.len();
        t.by_id.insert(id, pos);
        t.order.push_back(id);
        while t.order.len() > MAX_CURSORS || t.bytes > MAX_BYTES {
            let Some(old) = t.order.pop_front() else {
                break;
            };
            if let Some(p) = t.by_id.remove(&old) {
                t.bytes -= p.prefix.len() + p.resume.len();
            }
        }
        id
    }

    /// Where cursor `id` resumes, if the table still knows it. A cursor may be used again
    /// (a client retrying a page gets the same page).
    pub fn get(&self, id: u64) -> Option<Position> {
        let t = self
            .table
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        t.by_id.get(&id).cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pos(k: &str) -> Position {
        Position {
            db: 0,
            prefix: b"M".to_vec(),
            resume: k.as_bytes().to_vec(),
        }
    }

    #[test]
    fn cursors_are_shared_reusable_and_bounded() {
        let c = Cursors::default();
        let first = c.remember(pos("Ma"));
        assert_ne!(first, 0);
        assert_eq!(c.get(first), Some(pos("Ma")));
        assert_eq!(c.get(first), Some(pos("Ma")), "a retried page");
        for i in 0..MAX_CURSORS {
            c.remember(pos(&format!("M{i}")));
        }
        assert_eq!(c.get(first), None, "the oldest is evicted");
        assert_eq!(c.get(12345), None);
        let t = c.table.lock().unwrap();
        assert_eq!(t.by_id.len(), MAX_CURSORS);
        assert_eq!(t.order.len(), MAX_CURSORS);
    }

    #[test]
    fn resume_keys_are_bounded_in_bytes() {
        let c = Cursors::default();
        let big = "x".repeat(MAX_BYTES / 4);
        let ids: Vec<u64> = (0..8).map(|_| c.remember(pos(&big))).collect();
        assert!(c.get(ids[0]).is_none());
        assert!(c.get(ids[7]).is_some());
        assert!(c.table.lock().unwrap().bytes <= MAX_BYTES);
    }
}
