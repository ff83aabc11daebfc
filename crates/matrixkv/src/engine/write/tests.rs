use super::*;

fn waiter(batch: Option<WriteBatch>) -> Arc<Waiter> {
    Arc::new(Waiter {
        size: batch.as_ref().map_or(0, WriteBatch::size_bytes),
        batch: Mutex::new(crate::lock_order::Rank::WaiterBatch, batch),
        sync: false,
        done: Mutex::new(crate::lock_order::Rank::WaiterDone, None),
        cv: Condvar::new(),
    })
}

#[test]
fn a_group_joins_its_batches_in_queue_order() {
    let mut a = WriteBatch::new();
    a.put(b"a", b"1");
    let mut b = WriteBatch::new();
    b.put(b"b", b"2");
    let (merged, sync) = merge_group(&[waiter(Some(a)), waiter(Some(b))]).unwrap();
    let merged = merged.unwrap();
    assert_eq!(merged.len(), 2);
    assert!(!sync);
}

#[test]
fn a_waiter_whose_batch_is_missing_fails_the_group_instead_of_committing_nothing() {
    let mut a = WriteBatch::new();
    a.put(b"a", b"1");
    // The second writer's batch is gone: acknowledging it would report a write that
    // was never logged.
    let got = merge_group(&[waiter(Some(a)), waiter(None)]);
    assert!(
        got.is_err(),
        "a missing batch was committed as an empty one: {got:?}"
    );
}

#[test]
fn spinning_waits_at_least_the_debt() {
    for micros in [1, 5, 20] {
        let d = Duration::from_micros(micros);
        let t = Instant::now();
        spin_for(d);
        assert!(
            t.elapsed() >= d,
            "spun {:?} for a debt of {d:?}",
            t.elapsed()
        );
    }
}
