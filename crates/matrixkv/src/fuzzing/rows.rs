//! The RowTable entry point's checks (docs/format/rowtable.md): a row laid over
//! non-contiguous pages of a simulated region, scanned, probed and verified against a model,
//! and the cross-row hint search checked against an unhinted search.

use super::*;

/// Splits the input into the row and, if bytes follow it, its previous row.
pub(super) fn split_rows(data: &[u8]) -> (&[u8], Option<&[u8]>) {
    let field = |off| get_u64(data, off).unwrap_or(0);
    let total = [(40, 32u64), (48, 1), (84, 1), (56, 1)]
        .iter()
        .fold(128u64, |acc, &(off, mul)| {
            acc.saturating_add(field(off).saturating_mul(mul))
        });
    match usize::try_from(total) {
        Ok(t) if t < data.len() => match data.split_at_checked(t) {
            Some((a, b)) => (a, Some(b)),
            None => (data, None),
        },
        _ => (data, None),
    }
}

/// A row laid out over a simulated region and opened as the engine does.
struct LaidRow {
    region: Arc<SimulatedRegion>,
    reader: Arc<RowReader>,
}

/// Lays `bytes` (a row's logical bytes) over the pages of a fresh region, in groups of three
/// physically contiguous pages whose order is reversed (so reads cross both contiguous and
/// discontiguous page boundaries), and opens it as the row its header names.
fn lay_row(bytes: &[u8]) -> Option<LaidRow> {
    let pb = ROW_PAGE_BYTES;
    let logical = bytes.len().div_ceil(pb).max(1);
    let groups = logical.div_ceil(3);
    let physical = |i: usize| (groups - 1 - i / 3) * 3 + i % 3;
    let mut image = vec![0u8; groups * 3 * pb];
    let mut pages = Vec::with_capacity(logical);
    for i in 0..logical {
        let p = physical(i);
        pages.push(u32::try_from(p).ok()?);
        let src = bytes.get(i * pb..((i + 1) * pb).min(bytes.len()))?;
        image
            .get_mut(p * pb..p * pb + src.len())?
            .copy_from_slice(src);
    }
    let region = Arc::new(SimulatedRegion::from_image(image));
    let row = get_u64(bytes, 16).unwrap_or(1);
    let reader = RowReader::open(
        region.clone(),
        pb,
        Arc::new(PageList::new(pages)),
        row,
        PathBuf::from("/fast/CONTAINER"),
    )
    .ok()?;
    Some(LaidRow { region, reader })
}

/// What the checks of one row learned.
struct RowFacts {
    /// The row's entries, if `verify` passed and a full scan succeeded.
    model: Option<Entries>,
    targets: Vec<Vec<u8>>,
    probes: Vec<(Vec<u8>, SeqNo)>,
}

pub(super) fn check_rows(data: &[u8]) -> bool {
    let (newer, older) = split_rows(data);
    let a = lay_row(newer);
    let a_facts = a.as_ref().map(check_row);
    let b = older.and_then(lay_row);
    let b_facts = b.as_ref().map(check_row);
    let mut accepted = a_facts.as_ref().is_some_and(|f| f.model.is_some());
    if let (Some(a), Some(b), Some(a_facts), Some(b_facts)) = (&a, &b, &a_facts, &b_facts) {
        let pointers_ok = a.reader.prev_row() == b.reader.row()
            && a.reader.verify_forward_pointers(&b.reader).is_ok();
        if let (true, Some(_), Some(b_model)) = (pointers_ok, &a_facts.model, &b_facts.model) {
            check_hint_chain(&a.reader, &b.reader, b_model, a_facts, b_facts);
        }
        accepted &= b_facts.model.is_some() && pointers_ok;
    }
    // Last: freeing pages overwrites them.
    for (row, facts) in [(&a, &a_facts), (&b, &b_facts)] {
        if let (Some(row), Some(facts)) = (row, facts) {
            check_freed_pages(row, facts.model.as_ref(), &facts.probes);
        }
    }
    accepted
}

/// The window the newer row's search hands to its previous row must give the same answers
/// as a search of the whole previous row.
fn check_hint_chain(
    a: &Arc<RowReader>,
    b: &Arc<RowReader>,
    b_model: &Entries,
    a_facts: &RowFacts,
    b_facts: &RowFacts,
) {
    let targets: Vec<Vec<u8>> = a_facts
        .targets
        .iter()
        .chain(&b_facts.targets)
        .cloned()
        .collect();
    for (user_key, snapshot) in lookups(&targets) {
        let Ok((_, window)) = a.get(&user_key, snapshot, None) else {
            panic!("verified row: get failed");
        };
        let hinted = b.get(&user_key, snapshot, Some(window));
        let whole = b.get(&user_key, snapshot, None);
        match (hinted, whole) {
            (Ok(h), Ok(w)) => assert_eq!(h, w, "hinted get({user_key:x?}, {snapshot})"),
            (h, w) => panic!("verified rows: get failed: {:?} {:?}", h.err(), w.err()),
        }
    }
    let (mut ia, mut ib) = (a.iter(), b.iter());
    for t in &targets {
        for for_prev in [false, true] {
            let window = ia.seek_within(t, 0, a.len(), for_prev);
            let Ok((lo, hi)) = window else {
                panic!("verified row: seek_within failed: {:?}", window.err());
            };
            assert!(ib.seek_within(t, lo, hi, for_prev).is_ok());
            let want = if for_prev {
                model_seek(b_model, t, true)
                    .checked_sub(1)
                    .and_then(|i| b_model.get(i))
            } else {
                b_model.get(model_seek(b_model, t, false))
            };
            assert_eq!(
                ib.valid().then(|| ib.key().to_vec()),
                want.map(|(k, _)| k.clone()),
                "hinted seek_within({t:x?}, for_prev {for_prev})"
            );
        }
    }
}

fn check_row(row: &LaidRow) -> RowFacts {
    let r = &row.reader;
    let n = r.len();
    let _ = (r.prev_entries(), r.meta_pages(), r.may_contain(b"key"));
    let forward = scan(&mut r.iter(), true);
    let backward = scan(&mut r.iter(), false);
    let verified = r.verify().is_ok();
    let targets = match &forward {
        Ok(Some(entries)) => probe_targets(entries),
        _ => vec![Vec::new(), b"key\x01\0\0\0\0\0\0\0".to_vec()],
    };
    let model = match (verified, forward, backward) {
        (true, Ok(Some(f)), Ok(Some(mut b))) => {
            assert!(strictly_increasing(&f), "verified row: keys out of order");
            assert_eq!(f.len(), n);
            b.reverse();
            assert_eq!(
                f, b,
                "verified row: backward scan differs from forward scan"
            );
            Some(f)
        }
        (true, Ok(None), _) | (true, _, Ok(None)) => None,
        (true, f, b) => panic!(
            "verified row fails a scan: forward {:?}, backward {:?}",
            f.err(),
            b.err()
        ),
        (false, ..) => None,
    };
    let mut it = r.iter();
    for t in &targets {
        match &model {
            Some(m) => {
                check_seeks(&mut it, m, t, "RowTable");
                let i = model_seek(m, t, false);
                match r.lower_bound(t, 0, n) {
                    Ok(got) => assert_eq!(got, i, "RowTable lower_bound({t:x?})"),
                    Err(e) => panic!("verified row: lower_bound failed: {e}"),
                }
                assert!(r.prev_window(i).is_ok(), "verified row: prev_window failed");
            }
            None => {
                let _ = it.seek(t);
                let _ = it.seek_for_prev(t);
                if let Ok(i) = r.lower_bound(t, 0, n) {
                    let _ = r.prev_window(i);
                }
            }
        }
    }
    let probes = lookups(&targets);
    for (user_key, snapshot) in &probes {
        let got = r.get(user_key, *snapshot, None);
        if let Some(m) = &model {
            match got {
                Ok((found, _)) => assert_eq!(
                    found,
                    row_answer(m, user_key, *snapshot),
                    "RowTable get({user_key:x?}, {snapshot})"
                ),
                Err(e) => panic!("verified row: get failed: {e}"),
            }
        }
    }
    RowFacts {
        model,
        targets,
        probes,
    }
}

/// The row's answer to a lookup, from the model: a tombstone comes back with an empty value.
fn row_answer(m: &Entries, user_key: &[u8], snapshot: SeqNo) -> Option<(ValueKind, Vec<u8>)> {
    model_get(m, user_key, snapshot).map(|(kind, v)| match kind {
        ValueKind::Deletion | ValueKind::RangeDeletion => (kind, Vec::new()),
        ValueKind::Value | ValueKind::BlobIndex | ValueKind::Merge => (kind, v.to_vec()),
    })
}

/// Frees the value pages of the first half of the entries, as column compaction does, and
/// overwrites them (the page pool hands them to new rows): lookups must then fail or give the
/// old answer, never garbage.
fn check_freed_pages(row: &LaidRow, model: Option<&Entries>, probes: &[(Vec<u8>, SeqNo)]) {
    let r = &row.reader;
    let Ok(range) = r.freeable_pages(0, r.len() / 2) else {
        assert!(model.is_none(), "verified row: freeable_pages failed");
        return;
    };
    let (pages, released) = r.pages().with_freed(range);
    let freed = match r.with_pages(Arc::new(pages)) {
        Ok(freed) => freed,
        Err(e) => {
            assert!(
                model.is_none(),
                "verified row: freeing value pages fails: {e}"
            );
            return;
        }
    };
    let garbage = vec![0xa5u8; ROW_PAGE_BYTES];
    for p in released {
        let _ = row.region.write(p as usize * ROW_PAGE_BYTES, &garbage);
    }
    for (user_key, snapshot) in probes {
        let got = freed.get(user_key, *snapshot, None);
        if let (Some(m), Ok((found, _))) = (model, got) {
            assert_eq!(
                found,
                row_answer(m, user_key, *snapshot),
                "RowTable with freed pages: get({user_key:x?}, {snapshot})"
            );
        }
    }
    let _ = scan(&mut freed.iter(), true);
}
