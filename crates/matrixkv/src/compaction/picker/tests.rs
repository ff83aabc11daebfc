use super::*;
use crate::key::{SeqNo, ValueKind, make_internal_key};
use crate::version::testutil::version;

fn cfg() -> PickerConfig {
    PickerConfig {
        l0_compaction_trigger: 4,
        l1_target_bytes: 4 << 10,
        level_multiplier: 10,
        num_levels: NUM_LEVELS,
    }
}

/// The pointer that says "the last compaction of this level ended at user key `k`".
fn pointer_after(k: &str) -> Vec<u8> {
    make_internal_key(k.as_bytes(), SeqNo::ZERO, ValueKind::Deletion)
}

/// Data-driven cases. Each starts with `# name`; then optional `config:` (overrides of
/// `trigger=`, `l1=` (bytes), `mult=`, `levels=`) and `pointer: L<n>=<key> ...` lines, the
/// version in the `testutil` text form, and `=> <rendered plan or none>`.
const CASES: &str = "
# nothing to do when every level is under target
L0: 3:a-c 2:b-d 1:e-f
L1: 4:a-b/3K
=> none

# empty tree
=> none

# L0 at the trigger takes every L0 file and the overlapping L1 files
L0: 8:b-c 7:c-d 6:h-i 5:m-n
L1: 1:a-a 2:c-e 3:o-p 4:y-z
=> L0->L1 l0=[8,7,6,5] l1=[2]

# L0 into an empty L1
L0: 8:b-c 7:c-d 6:h-i 5:m-n
=> L0->L1 l0=[8,7,6,5] l1=[]

# L1 over target beats L0 at exactly its trigger
L0: 18:b-c 17:c-d 16:h-i 15:m-n
L1: 1:a-b/5K
L2: 2:a-a
=> merge L1->L2 inputs=[1] next=[2]

# L0 beats L1 when its score is higher
L0: 18:b-c 17:c-d 16:h-i 15:m-n 14:a-a 13:a-a 12:a-a 11:a-a
L1: 1:a-b/5K
=> L0->L1 l0=[18,17,16,15,14,13,12,11] l1=[1]

# the level with the highest score wins
L1: 1:a-b/5K
L2: 2:a-b/30K 3:c-d/30K
L3: 4:a-a 5:b-c
=> merge L2->L3 inputs=[2] next=[4,5]

# a file with nothing below it is moved
L1: 1:a-b/5K 2:c-d
L2: 3:c-c
=> move L1->L2 file=1

# round robin starts after the compaction pointer
pointer: L1=b
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c 5:d-e 6:f-g
=> merge L1->L2 inputs=[2] next=[4,5]

# a pointer inside a file's range still picks that file
pointer: L1=c
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c 5:d-e 6:f-g
=> merge L1->L2 inputs=[2] next=[4,5]

# a pointer past the last file wraps to the first
pointer: L1=z
L1: 1:a-b/2K 2:c-d/2K 3:e-f/2K
L2: 4:a-c
=> merge L1->L2 inputs=[1] next=[4]

# the last level is never compacted
config: levels=3
L2: 1:a-z/1G
=> none

# the level above the last still moves into it
config: levels=3
L1: 1:a-b/5K
=> move L1->L2 file=1

# a small trigger and multiplier change the scores
config: trigger=2 l1=1000 mult=2
L1: 1:a-b/900
L2: 2:a-b/2100
L3: 3:a-a
=> merge L2->L3 inputs=[2] next=[3]
";

fn run_case(name: &str, body: &str) {
    let mut c = cfg();
    let mut pointers = vec![Vec::new(); NUM_LEVELS];
    let mut tree = String::new();
    let mut expected = None;
    for line in body.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(rest) = line.strip_prefix("config:") {
            for kv in rest.split_whitespace() {
                let (k, val) = kv.split_once('=').unwrap();
                let n: u64 = val.parse().unwrap();
                match k {
                    "trigger" => c.l0_compaction_trigger = n as usize,
                    "l1" => c.l1_target_bytes = n,
                    "mult" => c.level_multiplier = n,
                    "levels" => c.num_levels = n as usize,
                    other => panic!("{name}: unknown config {other}"),
                }
            }
        } else if let Some(rest) = line.strip_prefix("pointer:") {
            for kv in rest.split_whitespace() {
                let (l, k) = kv.split_once('=').unwrap();
                let l: usize = l.strip_prefix('L').unwrap().parse().unwrap();
                pointers[l] = pointer_after(k);
            }
        } else if let Some(rest) = line.strip_prefix("=>") {
            expected = Some(rest.trim().to_string());
        } else {
            tree.push_str(line);
            tree.push('\n');
        }
    }
    let v = version(&tree);
    let got = pick(&v, &c, &pointers).map_or_else(|| "none".to_string(), |p| p.describe());
    assert_eq!(got, expected.unwrap(), "case: {name}\n{}", v.describe());
}

#[test]
fn data_driven_picker_cases() {
    let mut n = 0;
    for block in CASES.split("\n# ").skip(1) {
        let (name, body) = block.split_once('\n').unwrap();
        run_case(name, body);
        n += 1;
    }
    assert_eq!(n, 14);
}

#[test]
fn scores_follow_the_level_targets() {
    let v = version("L0: 2:a-b 1:c-d\nL1: 3:a-b/2K\nL2: 4:a-b/80K\nL6: 5:a-b/1G");
    let s = scores(&v, &cfg());
    assert_eq!(s.len(), NUM_LEVELS);
    assert!((s[0] - 0.5).abs() < 1e-9);
    assert!((s[1] - 0.5).abs() < 1e-9);
    assert!((s[2] - 2.0).abs() < 1e-9);
    assert_eq!(s[3], 0.0);
    assert!(s[6] > 1.0, "reported even though never picked");
    assert_eq!(cfg().target_bytes(3), 400 << 10);
    assert_eq!(cfg().target_bytes(0), 0);
    let huge = PickerConfig {
        level_multiplier: u64::MAX,
        ..cfg()
    };
    assert_eq!(huge.target_bytes(6), u64::MAX);
}

#[test]
fn degenerate_config_never_panics() {
    let v = version("L0: 1:a-b");
    let c = PickerConfig {
        l0_compaction_trigger: 0,
        l1_target_bytes: 0,
        level_multiplier: 0,
        num_levels: 0,
    };
    assert!(pick(&v, &c, &[]).is_none());
    let c = PickerConfig {
        num_levels: 100,
        ..c
    };
    assert_eq!(scores(&v, &c).len(), NUM_LEVELS);
    assert_eq!(pick(&v, &c, &[]).unwrap().describe(), "L0->L1 l0=[1] l1=[]");
}

#[test]
fn move_edit_relocates_the_file_and_advances_the_pointer() {
    let v = version("L1: 1:a-b/5K 2:c-d\nL2: 3:c-c");
    let plan = pick(&v, &cfg(), &[]).unwrap();
    assert_eq!(
        plan.compact_pointer(),
        Some((1, v.files(1)[0].largest.clone()))
    );
    let e = plan.move_edit().unwrap();
    let v2 = v.apply(&e).unwrap();
    assert_eq!(v2.describe().lines().nth(1).unwrap(), "L1: 2:c-d");
    assert_eq!(v2.describe().lines().nth(2).unwrap(), "L2: 1:a-b 3:c-c");
    // With the pointer advanced, the next pick starts after file 1.
    let p2 = pick(
        &v2,
        &PickerConfig {
            l1_target_bytes: 1,
            ..cfg()
        },
        &[Vec::new(), pointer_after("b")],
    )
    .unwrap();
    assert_eq!(p2.describe(), "merge L1->L2 inputs=[2] next=[3]");
}

#[test]
fn plan_inputs_list_every_file_with_its_level() {
    let v = version("L0: 5:a-c 4:b-d 3:x-y 2:p-q\nL1: 1:c-e");
    let plan = pick(&v, &cfg(), &[]).unwrap();
    assert_eq!(plan.level(), 0);
    assert_eq!(plan.output_level(), 1);
    let levels: Vec<(usize, u64)> = plan
        .inputs()
        .iter()
        .map(|(l, f)| (*l, f.number.0))
        .collect();
    assert_eq!(levels, vec![(0, 5), (0, 4), (0, 3), (0, 2), (1, 1)]);
    assert_eq!(plan.compact_pointer(), None);
    assert!(plan.move_edit().is_none());
    assert_eq!(plan.input_numbers().len(), 5);
}

fn gc_cfg(space_budget: f64) -> BlobGcConfig {
    BlobGcConfig {
        space_budget,
        max_tables: 4,
    }
}

fn gc(tree: &str, budget: f64) -> String {
    let v = version(tree);
    pick_blob_gc(&v, &gc_cfg(budget)).map_or_else(|| "none".to_string(), |p| p.describe())
}

#[test]
fn blob_gc_waits_until_the_garbage_passes_the_budget() {
    // 2000 bytes of records, 300 garbage: 2000 <= 1.2 * 1700.
    let tree = "B: 11:1000-200 12:1000-100\nL6: 1:a-c+11 2:d-f+12";
    assert_eq!(gc(tree, 1.2), "none");
    // 1.1 * 1700 = 1870 < 2000: relocate the worse file (11); one is enough.
    assert_eq!(gc(tree, 1.1), "blob-gc L6 inputs=[1] relocate=[11]");
    // No garbage at all, or GC disabled.
    assert_eq!(gc("B: 11:1000-0\nL6: 1:a-c+11", 1.0), "none");
    assert_eq!(gc(tree, f64::INFINITY), "none");
    assert_eq!(gc("", 1.0), "none");
}

#[test]
fn blob_gc_relocates_the_most_garbage_heavy_files_until_the_rest_fits() {
    // 4000 bytes, 1900 garbage, live 2100; budget 1.2 allows 2520. Ratios: 11 0.3, 12 0.8,
    // 13 0.6, 14 0.2. Taking 12 leaves 3200, then 13 leaves 2600, then 11 leaves 2300.
    let tree = "B: 11:1000-300 12:1000-800 13:1000-600 14:1000-200
                L5: 5:a-z+12
                L6: 1:a-c+11,12 2:d-f+13 3:g-h+14 4:i-j+12,14";
    assert_eq!(gc(tree, 1.2), "blob-gc L6 inputs=[1,4] relocate=[12,13,11]");
    // Ties on the ratio go to the older file.
    assert_eq!(
        gc("B: 12:1000-500 11:1000-500\nL6: 1:a-c+11 2:d-f+12", 1.0),
        "blob-gc L6 inputs=[1] relocate=[11,12]"
    );
}

#[test]
fn blob_gc_rewrites_the_deepest_level_that_references_the_file() {
    // File 12 is referenced only from L2 and L4: the deeper level goes first.
    let tree = "B: 12:1000-800\nL2: 5:a-c+12 6:d-e+\nL4: 7:a-b+12\nL6: 1:a-z+";
    assert_eq!(gc(tree, 1.2), "blob-gc L4 inputs=[7] relocate=[12]");
    // Once L4 is rewritten, L2 is next.
    let tree = "B: 12:1000-800\nL2: 5:a-c+12 6:d-e+\nL4: 7:a-b+\nL6: 1:a-z+";
    assert_eq!(gc(tree, 1.2), "blob-gc L2 inputs=[5] relocate=[12]");
    // A file no table references (a stale reference list) yields to the next one; with
    // none referenced there is nothing to do (no job that cannot make progress).
    let tree = "B: 12:1000-800 13:1000-700\nL6: 1:a-c+13 2:d-e+";
    assert_eq!(gc(tree, 1.0), "blob-gc L6 inputs=[1] relocate=[12,13]");
    assert_eq!(gc("B: 12:1000-800\nL6: 1:a-c+", 1.0), "none");
}

#[test]
fn blob_gc_takes_tables_without_recorded_references_and_bounds_the_job() {
    // Tables of older manifests may reference anything: rewritten (and recorded) first.
    let tree = "B: 12:1000-800\nL6: 1:a-b 2:c-d+ 3:e-f+12 4:g-h 5:i-j+12 6:k-l+12 7:m-n+12";
    assert_eq!(gc(tree, 1.2), "blob-gc L6 inputs=[1,3,4,5] relocate=[12]");
    let v = version(tree);
    let plan = pick_blob_gc(&v, &gc_cfg(1.2)).unwrap();
    assert_eq!(plan.output_level(), 6);
    assert_eq!(plan.level(), 6);
    assert_eq!(plan.compact_pointer(), None);
    assert!(plan.move_edit().is_none());
    assert_eq!(plan.inputs().len(), 4);
    assert_eq!(blob_space(&v), (1000, 800));
    let one = BlobGcConfig {
        max_tables: 0,
        ..gc_cfg(1.2)
    };
    assert_eq!(pick_blob_gc(&v, &one).unwrap().inputs().len(), 1);
}

#[test]
fn bottommost_means_no_deeper_file_covers_the_key() {
    let v = version("L1: 1:a-z\nL2: 2:c-e\nL4: 3:m-p");
    assert!(!is_bottommost_for(&v, 1, b"d"));
    assert!(is_bottommost_for(&v, 2, b"d"));
    assert!(!is_bottommost_for(&v, 1, b"n"));
    assert!(!is_bottommost_for(&v, 3, b"n"));
    assert!(is_bottommost_for(&v, 4, b"n"));
    assert!(is_bottommost_for(&v, 1, b"f"));
    assert!(is_bottommost_for(&v, NUM_LEVELS - 1, b"a"));
}

#[test]
fn manual_steps_take_the_range_s_files_with_their_next_level_overlaps() {
    let v = version("L1: 1:a-c 2:d-f 3:g-i\nL2: 4:b-b 5:h-z\nL3: 6:a-z");
    let plan = |level, b: Option<&str>, e: Option<&str>| {
        pick_manual(&v, level, b.map(str::as_bytes), e.map(str::as_bytes)).map(|p| p.describe())
    };
    assert_eq!(
        plan(1, None, None).as_deref(),
        Some("merge L1->L2 inputs=[1,2,3] next=[4,5]")
    );
    // [e, g] touches files 2 (d-f) and 3 (g-i) of L1; L2's 5 (h-z) overlaps d-i.
    assert_eq!(
        plan(1, Some("e"), Some("g")).as_deref(),
        Some("merge L1->L2 inputs=[2,3] next=[5]")
    );
    // d-f overlaps nothing in L2: moved down unchanged.
    assert_eq!(
        plan(1, Some("d"), Some("e")).as_deref(),
        Some("move L1->L2 file=2")
    );
    assert_eq!(
        plan(1, Some("j"), Some("k")),
        None,
        "no file of L1 in range"
    );
    assert_eq!(plan(0, None, None), None, "level 0 is not the picker's");
    assert_eq!(deepest_level(&v, &cfg()), 3);
    assert_eq!(deepest_level(&version(""), &cfg()), 0);
}
