//! A small seeded random number generator (SplitMix64) and independent
//! streams derived from one seed, so that every actor draws its own
//! sequence: replaying a seed replays each actor's choices, whatever the
//! threads' timing does to the others.

use std::time::Duration;

/// The golden-ratio increment of SplitMix64.
const GOLDEN: u64 = 0x9e37_79b9_7f4a_7c15;

/// SplitMix64's output function: a bijective scramble of 64 bits.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A SplitMix64 generator: tiny, fast and good enough to pick operations.
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

impl Rng {
    /// A generator that starts from `seed`.
    pub(crate) fn new(seed: u64) -> Rng {
        Rng { state: seed }
    }

    /// Stream number `index` of `seed`: streams of one seed do not overlap
    /// in any useful sense, and each depends only on `(seed, index)`.
    pub(crate) fn stream(seed: u64, index: u64) -> Rng {
        Rng::new(mix(seed ^ mix(index.wrapping_add(1).wrapping_mul(GOLDEN))))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN);
        mix(self.state)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.next_u64() % n
    }

    /// A number in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True with probability `percent` / 100.
    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// A duration of `lo..=hi` milliseconds.
    pub(crate) fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(self.range(lo, hi))
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }

    /// One value of `table`, chosen with probability proportional to its
    /// weight; the last value when every weight is zero.
    pub(crate) fn weighted<T: Copy>(&mut self, table: &[(u64, T)]) -> T {
        let total: u64 = table.iter().map(|(w, _)| w).sum();
        let mut roll = self.below(total);
        for &(weight, value) in table {
            if roll < weight {
                return value;
            }
            roll -= weight;
        }
        table[table.len() - 1].1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        let mut one = Rng::stream(7, 1);
        let mut two = Rng::stream(7, 2);
        assert_ne!(one.next_u64(), two.next_u64());
    }

    #[test]
    fn ranges_stay_in_bounds() {
        let mut rng = Rng::new(1);
        for _ in 0..1000 {
            let x = rng.range(50, 400);
            assert!((50..=400).contains(&x));
        }
        assert_eq!(rng.below(0), 0);
        assert_eq!(rng.weighted(&[(0, 'a'), (0, 'b')]), 'b');
    }
}
