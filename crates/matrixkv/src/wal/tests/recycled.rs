//! Segments written into recycled regions (not zeroed): an older segment's records never
//! replay.

use super::*;

/// Segment `old` with `old_records` records written and synced, then its region recycled
/// *without zeroing* for segment `NUMBER` (7): the writer of the new segment, and the
/// region. The old records are `batch(1001 + i, 20)`, the same sizes as
/// `batch(2000 + i, 20)`. (The database zeroes what the old segment used before recycling;
/// these tests show that the seeded checksums alone never let an old record replay.)
fn recycled(old: u64, old_records: u64, len: usize) -> (Arc<MemRegion>, Writer) {
    let first = Arc::new(MemRegion::new(len));
    let mut w = Writer::create(first.clone(), FileNum(old), seg_path()).unwrap();
    for i in 1..=old_records {
        w.add_record(batch(1001 + i, 20).data()).unwrap();
    }
    w.sync().unwrap();
    let region = Arc::new(MemRegion::from_bytes(first.live()));
    let w = Writer::create(region.clone(), NUMBER, seg_path()).unwrap();
    (region, w)
}

#[test]
fn records_of_an_older_segment_in_a_recycled_region_are_never_replayed() {
    for new_records in 0..12u64 {
        let (region, mut w) = recycled(3, 10, 2048);
        let mut want = Vec::new();
        for i in 1..=new_records {
            // The same record size as the older segment's: record boundaries coincide, so
            // an older record starts right where the new log ends.
            let b = batch(2000 + i, 20);
            w.add_record(b.data()).unwrap();
            want.push(b.data().to_vec());
        }
        w.sync().unwrap();
        for last in [false, true] {
            let (got, end) = read(&region, WalRecovery::TolerateTornTail, last)
                .unwrap_or_else(|e| panic!("{new_records} new records: {e}"));
            assert_eq!(got, want, "{new_records} new records");
            assert_eq!(end.torn_tail, None);
            assert_eq!(end.end_offset, w.bytes_written());
        }
        // Strict mode wants zeros after the end, as the database leaves them: the older
        // bytes are refused (as data behind a zeroed header), unless the new records
        // covered them all.
        let old_left = region.live()[w.bytes_written() as usize..]
            .iter()
            .any(|&b| b != 0);
        match read(&region, WalRecovery::Strict, true) {
            Ok((got, _)) => {
                assert!(!old_left);
                assert_eq!(got, want);
            }
            Err(e) => {
                assert!(old_left, "{e}");
                assert_corruption_at(Err(e), w.bytes_written());
            }
        }
    }
}

#[test]
fn a_torn_record_followed_by_an_older_segments_bytes_is_a_torn_tail() {
    let (region, mut w) = recycled(3, 10, 2048);
    let old = region.live();
    w.add_record(batch(2001, 20).data()).unwrap();
    w.sync().unwrap();
    let synced = w.bytes_written();
    // A power loss that drops every unsynced store leaves the synced end marker: the log
    // simply ends after the synced record.
    w.add_record(batch(2002, 20).data()).unwrap();
    let torn_at = w.bytes_written();
    w.add_record(batch(2003, 20).data()).unwrap();
    let image = region.power_loss(Loss::KeepOld, &mut StdRng::seed_from_u64(3));
    let (got, end) = read(&image, WalRecovery::TolerateTornTail, false).unwrap();
    assert_eq!(
        (got.len(), end.end_offset, end.torn_tail),
        (1, synced, None)
    );
    // The second record reached the media, but neither the end marker after it nor the
    // third record did: the older segment's third record, valid under its own number,
    // is where the log continues. It is a torn tail, never replayed.
    let mut bytes = region.live();
    let at = torn_at as usize;
    bytes[at..at + 8].copy_from_slice(&old[at..at + 8]);
    assert!(
        matches!(
            record::decode_seeded(&old, at, record::Seed::Number(3)),
            record::Decoded::Record { .. }
        ),
        "an older record starts where the log ends"
    );
    let image = MemRegion::from_bytes(bytes);
    let (got, end) = read(&image, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!(
        got,
        vec![
            batch(2001, 20).data().to_vec(),
            batch(2002, 20).data().to_vec()
        ]
    );
    let (offset, reason) = end.torn_tail.unwrap();
    assert_eq!(offset, torn_at);
    assert!(matches!(reason, CorruptionReason::ChecksumMismatch { .. }));
    // In an earlier segment or in Strict mode, it is corruption, as any torn record.
    assert_corruption_at(read(&image, WalRecovery::TolerateTornTail, false), torn_at);
    assert_corruption_at(read(&image, WalRecovery::Strict, true), torn_at);
    // A torn record's payload (new header, part of the old bytes) fails too.
    let image = MemRegion::from_bytes(region.live());
    image.damage(torn_at as usize + record::HEADER_LEN + 3, |b| b ^ 0x08);
    let (got, end) = read(&image, WalRecovery::TolerateTornTail, true).unwrap();
    assert_eq!((got.len(), end.end_offset), (2, torn_at));
    // After zero_tail the segment reads cleanly as an earlier one.
    zero_tail(&image, &seg_path(), torn_at).unwrap();
    let (got, _) = read(&image, WalRecovery::Strict, false).unwrap();
    assert_eq!(got.len(), 2);
}

#[test]
fn a_region_zeroed_where_its_old_segment_wrote_reads_like_a_new_one() {
    let mut rng = StdRng::seed_from_u64(0x2e20);
    for round in 0..50 {
        let first = Arc::new(MemRegion::new(2048));
        let mut old = Writer::create(first.clone(), FileNum(3), seg_path()).unwrap();
        for i in 0..rng.gen_range(0..20) {
            let b = batch(1000 + i, rng.gen_range(0..60));
            if old.fits(b.size_bytes()) {
                old.add_record(b.data()).unwrap();
            }
        }
        old.sync().unwrap();
        // What the database does: clear what the old segment used (end marker included).
        let used = old.bytes_written() as usize + format::END_MARKER_LEN;
        zero_prefix(&*first, &seg_path(), used).unwrap();
        assert!(first.live().iter().all(|&b| b == 0), "round {round}");
        let mut w = Writer::create(first.clone(), NUMBER, seg_path()).unwrap();
        let mut want = Vec::new();
        for i in 0..rng.gen_range(0..10) {
            let b = batch(2000 + i, rng.gen_range(0..60));
            if w.fits(b.size_bytes()) {
                w.add_record(b.data()).unwrap();
                want.push(b.data().to_vec());
            }
        }
        w.sync().unwrap();
        let (got, _) = read(&first, WalRecovery::Strict, false).unwrap();
        assert_eq!(got, want, "round {round}");
    }
    assert!(zero_prefix(&MemRegion::new(64), &seg_path(), 65).is_err());
}

#[test]
fn strict_mode_still_reports_mid_log_corruption_in_a_recycled_region() {
    let (region, mut w) = recycled(3, 30, 4096);
    let mut starts = Vec::new();
    for i in 1..=4 {
        starts.push(w.bytes_written());
        w.add_record(batch(2000 + i, 20).data()).unwrap();
    }
    w.sync().unwrap();
    for &at in &starts {
        // A zeroed record header, with or without records behind it.
        let damaged = MemRegion::from_bytes(region.live());
        for i in 0..record::HEADER_LEN {
            damaged.damage(at as usize + i, |_| 0);
        }
        let reason = assert_corruption_at(read(&damaged, WalRecovery::Strict, true), at);
        assert!(matches!(reason, CorruptionReason::Invalid(_)), "{reason}");
        let (got, end) = read(&damaged, WalRecovery::TolerateTornTail, false).unwrap();
        assert_eq!(end.end_offset, at);
        assert_eq!(got.len(), starts.iter().filter(|&&s| s < at).count());
        // A damaged record mid-log is corruption, not the end.
        let damaged = MemRegion::from_bytes(region.live());
        damaged.damage(at as usize + 2, |b| b ^ 0x01);
        let reason = assert_corruption_at(read(&damaged, WalRecovery::Strict, true), at);
        assert!(matches!(reason, CorruptionReason::ChecksumMismatch { .. }));
    }
}

#[test]
fn synced_records_survive_power_loss_in_a_recycled_region() {
    let mut rng = StdRng::seed_from_u64(0x2ec_7c1e);
    for round in 0..300 {
        let (region, mut w) = recycled(3, rng.gen_range(0..25), 2048);
        let (written, synced) = write_random_batches(&mut w, &mut rng, 2001, 40);
        let loss = [Loss::KeepOld, Loss::Garble, Loss::AnySubset][round % 3];
        let image = region.power_loss(loss, &mut rng);
        let (got, _) = read(&image, WalRecovery::TolerateTornTail, true)
            .unwrap_or_else(|e| panic!("round {round} ({loss:?}): {e}"));
        assert!(got.len() >= synced, "round {round}: lost a synced record");
        assert_eq!(got[..], written[..got.len()], "round {round}");
    }
}

#[test]
fn batch_cursor_never_returns_an_older_segments_records_in_a_recycled_region() {
    let (region, mut w) = recycled(3, 10, 2048);
    let b = batch(2001, 20);
    w.add_record(b.data()).unwrap();
    let mut c = BatchCursor::open(region.clone(), seg_path(), NUMBER).unwrap();
    assert_eq!(c.next_batch().unwrap(), Some(b));
    assert_eq!(c.next_batch().unwrap(), None);
}
