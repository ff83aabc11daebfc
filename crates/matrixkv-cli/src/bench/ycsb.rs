//! YCSB's core workloads A–F (operation mix and request distribution), as defined by YCSB's
//! `workloads/workload[a-f]` files, and the per-thread operation chooser.
//!
//! Pure data plus a chooser owned by one worker thread.

use super::keys::{Distribution, Rng};

/// One YCSB operation type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YcsbOp {
    /// Read one record.
    Read,
    /// Overwrite one record.
    Update,
    /// Insert a new record.
    Insert,
    /// Read up to `max_scan_length` records in key order from a chosen record.
    Scan,
    /// Read a record, then write it back.
    ReadModifyWrite,
}

impl YcsbOp {
    /// The name used for per-operation latency.
    pub fn name(self) -> &'static str {
        match self {
            YcsbOp::Read => "read",
            YcsbOp::Update => "update",
            YcsbOp::Insert => "insert",
            YcsbOp::Scan => "scan",
            YcsbOp::ReadModifyWrite => "rmw",
        }
    }
}

/// A YCSB workload: the proportions of each operation and the request distribution.
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    /// Letter, `a`..`f`.
    pub letter: char,
    /// (operation, proportion); proportions sum to 1.
    pub mix: Vec<(YcsbOp, f64)>,
    /// How existing records are chosen.
    pub distribution: Distribution,
}

impl Workload {
    /// The core workload of `letter` (`a`..=`f`), or None.
    pub fn core(letter: char) -> Option<Workload> {
        use YcsbOp::*;
        let (mix, distribution) = match letter {
            'a' => (vec![(Read, 0.5), (Update, 0.5)], Distribution::Zipfian),
            'b' => (vec![(Read, 0.95), (Update, 0.05)], Distribution::Zipfian),
            'c' => (vec![(Read, 1.0)], Distribution::Zipfian),
            'd' => (vec![(Read, 0.95), (Insert, 0.05)], Distribution::Latest),
            'e' => (vec![(Scan, 0.95), (Insert, 0.05)], Distribution::Zipfian),
            'f' => (
                vec![(Read, 0.5), (ReadModifyWrite, 0.5)],
                Distribution::Zipfian,
            ),
            _ => return None,
        };
        Some(Workload {
            letter,
            mix,
            distribution,
        })
    }

    /// The workload a benchmark name (`ycsba`..`ycsbf`) stands for.
    pub fn from_benchmark(name: &str) -> Option<Workload> {
        let rest = name.strip_prefix("ycsb")?;
        let mut chars = rest.chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) => Workload::core(c),
            _ => None,
        }
    }

    /// Fraction of operations that insert new records.
    pub fn insert_proportion(&self) -> f64 {
        self.mix
            .iter()
            .filter(|(op, _)| *op == YcsbOp::Insert)
            .map(|(_, p)| p)
            .sum()
    }

    /// Draws the next operation.
    pub fn choose(&self, rng: &mut Rng) -> YcsbOp {
        let mut u = rng.next_f64();
        for &(op, p) in &self.mix {
            if u < p {
                return op;
            }
            u -= p;
        }
        self.mix.last().map_or(YcsbOp::Read, |m| m.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_workloads_match_ycsb() {
        let a = Workload::from_benchmark("ycsba").unwrap();
        assert_eq!(a.mix, vec![(YcsbOp::Read, 0.5), (YcsbOp::Update, 0.5)]);
        assert_eq!(
            Workload::from_benchmark("ycsbd").unwrap().distribution,
            Distribution::Latest
        );
        assert_eq!(
            Workload::from_benchmark("ycsbe")
                .unwrap()
                .insert_proportion(),
            0.05
        );
        assert!(Workload::from_benchmark("ycsbg").is_none());
        assert!(Workload::from_benchmark("ycsb_load").is_none());
        for c in 'a'..='f' {
            let w = Workload::core(c).unwrap();
            let sum: f64 = w.mix.iter().map(|m| m.1).sum();
            assert!((sum - 1.0).abs() < 1e-12);
        }
    }

    #[test]
    fn operation_mix_follows_the_proportions() {
        let b = Workload::core('b').unwrap();
        let mut r = Rng::new(4);
        let updates = (0..100_000)
            .filter(|_| b.choose(&mut r) == YcsbOp::Update)
            .count();
        assert!((4_500..5_500).contains(&updates), "{updates}");
    }
}
