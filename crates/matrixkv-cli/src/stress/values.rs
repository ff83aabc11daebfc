//! The harness's key space and the values it writes: a *slot* is one key of one keyspace
//! (slot `s` is key `s % keys` of keyspace `s / keys`), and a value is named by a 32-bit
//! *base*, from which its bytes are generated again at verification. So the expected state
//! stores 4 bytes per key whatever the value's size (0 B to 64 KiB).
//!
//! Keyspace 0 is the default keyspace (merge operator `u64add`); keyspace 1 is [`KS1`], which
//! may have a TTL and a compaction filter ([`DropFilter`]). Every fourth key of keyspace 0 is
//! a *counter*: its values are u64s, which merges add to.

use matrixkv::{CompactionFilter, Decision};

/// The name of the harness's second keyspace.
pub const KS1: &str = "stress1";

/// Number of keyspaces the harness writes.
pub const KEYSPACES: usize = 2;

/// A slot's value as the expected state stores it: absent, or present with a base. Encoded in
/// a u64: bit 32 is "present", the low 32 bits the base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Val(pub u64);

const PRESENT: u64 = 1 << 32;

impl Val {
    /// Absent (deleted or never written).
    pub const ABSENT: Val = Val(0);

    /// Present with `base`.
    pub fn of(base: u32) -> Val {
        Val(PRESENT | u64::from(base))
    }

    /// The base of a present value.
    pub fn base(self) -> Option<u32> {
        (self.0 & PRESENT != 0).then_some((self.0 & 0xffff_ffff) as u32)
    }
}

/// How values are generated and judged for one database (fixed when it is created).
#[derive(Debug, Clone, Copy)]
pub struct Space {
    /// Keys per keyspace.
    pub keys: usize,
    /// Keyspace [`KS1`] has [`DropFilter`] as compaction filter.
    pub filter: bool,
}

impl Space {
    /// Number of slots.
    pub fn slots(&self) -> usize {
        self.keys * KEYSPACES
    }

    /// The keyspace (0 or 1) of `slot`.
    pub fn keyspace(&self, slot: usize) -> usize {
        slot / self.keys
    }

    /// The key of `slot` in its keyspace.
    pub fn key(&self, slot: usize) -> Vec<u8> {
        key_name(slot % self.keys)
    }

    /// The slot of `key` in keyspace `ks`, if the harness writes such a key.
    pub fn slot_of(&self, ks: usize, key: &[u8]) -> Option<usize> {
        let digits = key.strip_prefix(b"key")?;
        let i: usize = std::str::from_utf8(digits).ok()?.parse().ok()?;
        (i < self.keys && key_name(i) == key).then_some(ks * self.keys + i)
    }

    /// True for the counter slots (u64 values, merges).
    pub fn is_counter(&self, slot: usize) -> bool {
        slot < self.keys && slot.is_multiple_of(4)
    }

    /// The bytes of value `base` of `slot`.
    pub fn value(&self, slot: usize, base: u32) -> Vec<u8> {
        if self.is_counter(slot) {
            return u64::from(base).to_le_bytes().to_vec();
        }
        generate(slot, base)
    }

    /// True if the compaction filter may remove value `base` of `slot`.
    pub fn droppable(&self, slot: usize, base: u32) -> bool {
        self.filter && self.keyspace(slot) == 1 && DropFilter::drops(&generate(slot, base))
    }

    /// True if `got` (a read of `slot`) is what the expected value `v` allows.
    pub fn matches(&self, slot: usize, v: Val, got: Option<&[u8]>) -> bool {
        match (v.base(), got) {
            (None, None) => true,
            (None, Some(_)) => false,
            (Some(b), None) => self.droppable(slot, b),
            (Some(b), Some(g)) => self.value(slot, b) == g,
        }
    }

    /// The expected value of `slot` that `got` is, among `candidates` (`None`: none is).
    pub fn which(&self, slot: usize, candidates: &[Val], got: Option<&[u8]>) -> Option<Val> {
        // A value read back is exactly its candidate; a droppable value read as absent is
        // absent from now on.
        let found = candidates.iter().copied().find(|v| match (v.base(), got) {
            (Some(b), Some(g)) => self.value(slot, b) == g,
            (None, None) => true,
            _ => false,
        });
        found.or_else(|| {
            candidates
                .iter()
                .any(|v| self.matches(slot, *v, got))
                .then_some(Val::ABSENT)
        })
    }

    /// A short description of `got` for failure messages.
    pub fn describe(&self, slot: usize, got: Option<&[u8]>) -> String {
        match got {
            None => "absent".to_owned(),
            Some(g) if self.is_counter(slot) && g.len() == 8 => {
                let mut b = [0u8; 8];
                b.copy_from_slice(g);
                format!("counter {}", u64::from_le_bytes(b))
            }
            Some(g) => {
                let head: Vec<u8> = g.iter().copied().take(24).collect();
                format!("{} bytes {:?}", g.len(), String::from_utf8_lossy(&head))
            }
        }
    }
}

/// Key `i` of a keyspace: `key000042`.
pub fn key_name(i: usize) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// The size class of a base: its top two bits choose 0–16 B, 17–256 B, 257 B–4 KiB or
/// 4–64 KiB.
pub fn base_with_class(random: u32, class: u32) -> u32 {
    (class << 30) | (random & 0x3fff_ffff)
}

/// The bytes of value `base` of non-counter `slot`: the length from the base's size class,
/// `drop` first for one base in eight of keyspace 1 (see [`DropFilter`]), then the slot and
/// base, then a pattern.
fn generate(slot: usize, base: u32) -> Vec<u8> {
    let h = crate::stress::rng::mix((slot as u64) << 32 | u64::from(base));
    let len = match base >> 30 {
        0 => h % 17,
        1 => 17 + h % 240,
        2 => 257 + h % 3840,
        _ => 4097 + h % 61440,
    } as usize;
    let mut v = Vec::with_capacity(len);
    if base.is_multiple_of(8) {
        v.extend_from_slice(b"drop");
    } else {
        // Never `d`: only the droppable values start with `drop`.
        v.push(b'e' + (h % 20) as u8);
    }
    v.extend_from_slice(format!("{slot}:{base}:").as_bytes());
    let mut x = h;
    while v.len() < len {
        x = crate::stress::rng::mix(x);
        v.extend_from_slice(&x.to_le_bytes());
    }
    v.truncate(len);
    v
}

/// The harness's compaction filter: removes empty values and values that start with `drop`.
#[derive(Debug)]
pub struct DropFilter;

impl DropFilter {
    fn drops(value: &[u8]) -> bool {
        value.is_empty() || value.starts_with(b"drop")
    }
}

impl CompactionFilter for DropFilter {
    fn name(&self) -> &str {
        "stress-drop"
    }

    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> Decision {
        if DropFilter::drops(value) {
            Decision::Remove
        } else {
            Decision::Keep
        }
    }
}
