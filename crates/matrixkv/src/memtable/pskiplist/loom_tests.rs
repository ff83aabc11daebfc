//! Loom models of the persistent skiplist's concurrency contract (see the module
//! documentation, "Concurrency"): inserts serialised by the writer mutex, readers without a
//! lock that follow only offsets they loaded from a published commit word.
//!
//! They run the real [`PSkipList`] (its atomics and writer mutex are loom's under
//! `--cfg loom`, `crate::sync`) over [`LoomRegion`], a region whose words are loom atomics:
//! [`Region::publish_u64`] is a `Release` store and [`Region::read_u64`] an `Acquire` load, as
//! in `matrixkv_pmem`'s mapped region (`mmap.rs`), whose `unsafe` word access cannot run under
//! loom; [`Region::write`] and [`Region::read`] (a `memcpy` into or out of the mapping there)
//! are `Relaxed` stores and loads of the words they cover. So a reader that follows an offset
//! whose publication it did not synchronize with may read any older contents of the bytes it
//! leads to (the region starts filled with garbage, as a recycled one is), and the node's or
//! record's checksum, bounds or key order fail the model. If the mapped region's orderings
//! change, [`LoomRegion`] must change with them.
//!
//! Loom's search is incomplete in one known way (tokio-rs/loom issues 166 and 392): a load by
//! one thread is not seen to race a later store by another thread if that thread loaded the
//! same word in between, which the writer's search always does before it links. A load that
//! comes *after* a store is always checked against it. So in every model here the writers run
//! first (the model's main thread and the threads spawned first) and the reader is spawned
//! last: loom's first execution runs the writers to the end and the reader after them, and
//! every execution it derives from there moves the reader's loads before the writers' stores.
//! Each model was checked to fail when a `Release` it relies on is made `Relaxed`.
//!
//! Run: `scripts/test-loom` (all models), or `scripts/test-loom loom_pskiplist`.

use std::io;
use std::sync::Arc;

use loom::sync::atomic::AtomicBool;
use loom::thread;

use super::PSkipList;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::tier::{PersistMode, Region};

/// What a region holds before the list writes it (a recycled region's leftovers).
const GARBAGE: u64 = 0x5a5a_5a5a_5a5a_5a5a;

/// A region of loom atomics; see the module documentation.
#[derive(Debug)]
struct LoomRegion {
    words: Vec<AtomicU64>,
}

impl LoomRegion {
    fn new(len: usize) -> LoomRegion {
        LoomRegion {
            words: (0..len / 8).map(|_| AtomicU64::new(GARBAGE)).collect(),
        }
    }

    fn check(&self, offset: usize, len: usize) -> io::Result<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len() => Ok(()),
            _ => Err(io::Error::new(io::ErrorKind::InvalidInput, "out of range")),
        }
    }

    fn word(&self, offset: usize) -> io::Result<&AtomicU64> {
        if !offset.is_multiple_of(8) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "unaligned word",
            ));
        }
        self.words
            .get(offset / 8)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "out of range"))
    }
}

impl Region for LoomRegion {
    fn len(&self) -> usize {
        self.words.len() * 8
    }

    fn write(&self, offset: usize, data: &[u8]) -> io::Result<()> {
        self.check(offset, data.len())?;
        let mut done = 0;
        while done < data.len() {
            let at = offset + done;
            let (w, b) = (self.word(at - at % 8)?, at % 8);
            let n = (8 - b).min(data.len() - done);
            // A partial word keeps its other bytes (the writer is the only one storing).
            let mut bytes = if n == 8 {
                [0; 8]
            } else {
                w.load(Ordering::Relaxed).to_le_bytes()
            };
            bytes[b..b + n].copy_from_slice(&data[done..done + n]);
            w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
            done += n;
        }
        Ok(())
    }

    fn read(&self, offset: usize, buf: &mut [u8]) -> io::Result<()> {
        self.check(offset, buf.len())?;
        let mut done = 0;
        while done < buf.len() {
            let at = offset + done;
            let (w, b) = (self.word(at - at % 8)?, at % 8);
            let n = (8 - b).min(buf.len() - done);
            let bytes = w.load(Ordering::Relaxed).to_le_bytes();
            buf[done..done + n].copy_from_slice(&bytes[b..b + n]);
            done += n;
        }
        Ok(())
    }

    fn persist(&self, offset: usize, len: usize) -> io::Result<()> {
        self.check(offset, len)
    }

    fn publish_u64(&self, offset: usize, value: u64) -> io::Result<()> {
        self.word(offset)?.store(value, Ordering::Release);
        Ok(())
    }

    fn read_u64(&self, offset: usize) -> io::Result<u64> {
        Ok(self.word(offset)?.load(Ordering::Acquire))
    }

    fn persist_mode(&self) -> PersistMode {
        PersistMode::Simulated
    }
}

/// A new list in a [`LoomRegion`] of 1 KiB.
fn new_list() -> (Arc<LoomRegion>, Arc<PSkipList>) {
    let region = Arc::new(LoomRegion::new(1024));
    let list = PSkipList::create(region.clone(), "fast/000007.psl", 7).unwrap();
    (region, Arc::new(list))
}

/// Every committed version the list holds, by a full iteration: `(user key, seq, value)` in
/// internal-key order, checked to be in that order.
fn scan(list: &Arc<PSkipList>) -> Vec<(Vec<u8>, u64, Vec<u8>)> {
    let mut it = list.iter();
    let mut out: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
    it.seek_to_first().unwrap();
    while it.valid() {
        let entry = (it.user_key().to_vec(), it.seq().0, it.value().to_vec());
        if let Some(last) = out.last() {
            assert!(
                (&last.0, std::cmp::Reverse(last.1)) < (&entry.0, std::cmp::Reverse(entry.1)),
                "iteration out of internal-key order: {last:?} then {entry:?}"
            );
        }
        assert_eq!(
            it.key(),
            key::make_internal_key(&entry.0, SeqNo(entry.1), it.kind())
        );
        out.push(entry);
        it.next().unwrap();
    }
    out
}

/// The value of the newest version of `k` (any sequence number), if the list shows one.
fn get(list: &PSkipList, k: &[u8]) -> Option<(u64, Vec<u8>)> {
    list.get(k, SeqNo::MAX).unwrap().map(|(seq, kind, v)| {
        assert_eq!(kind, ValueKind::Value);
        (seq.0, v)
    })
}

/// The reader of [`loom_pskiplist_concurrent_inserts_and_reads`].
fn read_during_inserts(list: &Arc<PSkipList>, done_a: &AtomicBool, done_z: &AtomicBool) {
    let a_done = done_a.load(Ordering::Acquire);
    let z_done = done_z.load(Ordering::Acquire);
    let a = get(list, b"a");
    let z = get(list, b"z");
    let m = get(list, b"m");
    if a_done {
        assert_eq!(
            a,
            Some((2, b"2".to_vec())),
            "a completed insert is not seen"
        );
    }
    if z_done {
        assert_eq!(
            z,
            Some((3, b"3".to_vec())),
            "a completed insert is not seen"
        );
        assert_eq!(
            m,
            Some((4, b"4".to_vec())),
            "a completed update is not seen"
        );
    }
    assert!(a.is_none() || a == Some((2, b"2".to_vec())), "{a:?}");
    assert!(z.is_none() || z == Some((3, b"3".to_vec())), "{z:?}");
    assert!(matches!(m.as_ref().map(|m| m.0), Some(1 | 4)), "{m:?}");
    let seen = scan(list);
    assert!(seen.iter().any(|e| e == &(b"m".to_vec(), 1, b"1".to_vec())));
    let possible: [(&[u8], u64, &[u8]); 4] = [
        (b"a", 2, b"2"),
        (b"m", 1, b"1"),
        (b"m", 4, b"4"),
        (b"z", 3, b"3"),
    ];
    for e in &seen {
        assert!(
            possible
                .iter()
                .any(|x| (x.0, x.1, x.2) == (&e.0[..], e.1, &e.2[..])),
            "{e:?}"
        );
    }
}

/// Two inserters (new keys on both sides of an existing one, and an in-place update of it)
/// and a reader that searches and iterates: the reader never meets a half-written node or
/// record (any read error fails the model), sees every version whose insert it knows returned
/// (`done_*` flags, Release/Acquire), sees each key's versions whole and in order, and the
/// list reopens afterwards with every insert in it (`PSkipList::open` checks the whole
/// structure). The batch commit is published up front (sequence number 9), so each version is
/// visible as soon as it is linked: the model checks the linking, not the commit.
///
/// Thread order matters to loom (module documentation): the inserters are the model's main
/// thread and the first spawned one, the reader is spawned last.
///
/// About 1 s at the default bound of 2 preemptions (`scripts/test-loom`'s build).
#[test]
fn loom_pskiplist_concurrent_inserts_and_reads() {
    crate::sync::model(2, || {
        let (region, list) = new_list();
        list.insert(b"m", SeqNo(1), ValueKind::Value, b"1").unwrap();
        list.commit(SeqNo(9)).unwrap();
        let done_a = Arc::new(AtomicBool::new(false));
        let done_z = Arc::new(AtomicBool::new(false));

        let w2 = {
            let (list, done_z) = (Arc::clone(&list), Arc::clone(&done_z));
            thread::spawn(move || {
                list.insert(b"z", SeqNo(3), ValueKind::Value, b"3").unwrap();
                list.insert(b"m", SeqNo(4), ValueKind::Value, b"4").unwrap();
                done_z.store(true, Ordering::Release);
            })
        };
        let reader = {
            let (list, done_a, done_z) =
                (Arc::clone(&list), Arc::clone(&done_a), Arc::clone(&done_z));
            thread::spawn(move || read_during_inserts(&list, &done_a, &done_z))
        };
        list.insert(b"a", SeqNo(2), ValueKind::Value, b"2").unwrap();
        done_a.store(true, Ordering::Release);

        w2.join().unwrap();
        reader.join().unwrap();
        let all = scan(&list);
        let expect = [
            (b"a".to_vec(), 2, b"2".to_vec()),
            (b"m".to_vec(), 4, b"4".to_vec()),
            (b"m".to_vec(), 1, b"1".to_vec()),
            (b"z".to_vec(), 3, b"3".to_vec()),
        ];
        assert_eq!(all, expect);
        let reopened = PSkipList::open(region, "fast/000007.psl").unwrap();
        assert_eq!((reopened.keys(), reopened.entries()), (3, 4));
    });
}

/// A batch of two inserts becomes visible at its commit, whole: a reader that sees the
/// batch's version of `a` sees its `b` too (it searches `b` after `a`), and one that loaded
/// the committed sequence number 3 finds both. The batch's second insert updates `a`'s node
/// in place, so the reader's search also races a newest-version word. The writer is the main
/// thread, the reader the spawned one (module documentation).
///
/// Under a second at the default bound of 2 preemptions (`scripts/test-loom`'s build).
#[test]
fn loom_pskiplist_batch_commit_is_atomic() {
    crate::sync::model(2, || {
        let (_region, list) = new_list();
        list.insert(b"a", SeqNo(1), ValueKind::Value, b"1").unwrap();
        list.commit(SeqNo(1)).unwrap();

        let reader = {
            let list = Arc::clone(&list);
            thread::spawn(move || {
                let committed = list.committed().0;
                let a = get(&list, b"a");
                let b = get(&list, b"b");
                match a {
                    Some((1, _)) => assert!(committed < 3, "a@1 after the commit of a@3"),
                    Some((3, _)) => assert_eq!(b, Some((2, b"2".to_vec())), "a@3 without b@2"),
                    other => panic!("a: {other:?}"),
                }
                if committed >= 3 {
                    assert_eq!(b, Some((2, b"2".to_vec())));
                }
                assert!(b.is_none() || b == Some((2, b"2".to_vec())), "{b:?}");
            })
        };
        list.insert(b"b", SeqNo(2), ValueKind::Value, b"2").unwrap();
        list.insert(b"a", SeqNo(3), ValueKind::Value, b"3").unwrap();
        list.commit(SeqNo(3)).unwrap();

        reader.join().unwrap();
        assert_eq!(get(&list, b"a"), Some((3, b"3".to_vec())));
        assert_eq!(get(&list, b"b"), Some((2, b"2".to_vec())));
    });
}
