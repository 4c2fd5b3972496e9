//! WRED and ECN marking on the instantaneous queue depth (RFC 3168; SONiC `WRED_PROFILE`).
//!
//! Decided at dequeue, as SONiC's ECN tests expect (`sonic-buffer-model.md` §1.6): below
//! `min_threshold` nothing is marked, between the thresholds the probability rises linearly to
//! `probability_percent` at `max_threshold`, above it every packet is marked. SONiC sets the WRED
//! weight to 0, so the depth is the instantaneous one, not an average.

use crate::params::WredParams;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What WRED decided for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WredVerdict {
    /// Send as is.
    Pass,
    /// Set ECN to CE and send.
    Mark,
    /// Drop (non-ECT packet on a lossy queue with WRED drop enabled).
    Drop,
}

/// The seeded generator WRED draws from. One per egress side; deterministic for a given seed
/// and sequence of decisions.
#[derive(Debug, Clone)]
pub struct WredRng(Xoshiro256PlusPlus);

impl WredRng {
    /// A generator seeded with `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(Xoshiro256PlusPlus::seed_from_u64(seed))
    }

    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
}

/// The congestion probability at `depth_bytes`, as a fraction of 2^32 (so that 2^32 is 1).
#[must_use]
pub fn probability_scaled(w: &WredParams, depth_bytes: u64) -> u64 {
    const ONE: u64 = 1 << 32;
    if depth_bytes <= w.min_threshold_bytes {
        return 0;
    }
    if depth_bytes > w.max_threshold_bytes {
        return ONE;
    }
    let span = w.max_threshold_bytes - w.min_threshold_bytes;
    let above = depth_bytes - w.min_threshold_bytes;
    // span > 0 here: depth is in (min, max], so max > min. The same quotient in u64 when the
    // operands fit (depths below 42 MB): a u128 division is a library call, per marked queue's
    // every frame.
    if let (Some(scaled), Some(divisor)) = (
        above.checked_mul(u64::from(w.probability_percent)),
        span.checked_mul(100),
    ) {
        if scaled < ONE {
            return (scaled << 32) / divisor;
        }
    }
    let p = u128::from(above) * u128::from(w.probability_percent) * u128::from(ONE)
        / (u128::from(span) * 100);
    u64::try_from(p).unwrap_or(ONE)
}

/// Decides for one packet leaving a queue of `depth_bytes` (the depth including the packet).
///
/// `ect`: the packet is ECN-capable (ECT(0), ECT(1)); `lossless`: the queue is lossless (WRED
/// never drops there, RFC 3168 marking only).
#[inline]
pub fn decide(
    w: &WredParams,
    depth_bytes: u64,
    ect: bool,
    lossless: bool,
    rng: &mut WredRng,
) -> WredVerdict {
    let act_on_ect = w.ecn_mark || (w.drop_enable && !lossless);
    let acts = if ect {
        act_on_ect
    } else {
        w.drop_enable && !lossless
    };
    if !acts || depth_bytes <= w.min_threshold_bytes {
        return WredVerdict::Pass;
    }
    let p = probability_scaled(w, depth_bytes);
    if u64::from(rng.next_u32()) >= p {
        return WredVerdict::Pass;
    }
    if ect && w.ecn_mark {
        WredVerdict::Mark
    } else {
        WredVerdict::Drop
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(p: u8) -> WredParams {
        WredParams {
            ecn_mark: true,
            drop_enable: true,
            min_threshold_bytes: 10_000,
            max_threshold_bytes: 50_000,
            probability_percent: p,
        }
    }

    #[test]
    fn curve_shape() {
        let w = profile(20);
        assert_eq!(probability_scaled(&w, 10_000), 0);
        assert_eq!(probability_scaled(&w, 30_000), (1u64 << 32) / 10); // half way: 10 %
        assert_eq!(probability_scaled(&w, 50_000), (1u64 << 32) / 5);
        assert_eq!(probability_scaled(&w, 50_001), 1 << 32);
    }

    #[test]
    fn probability_is_the_exact_quotient_at_any_depth() {
        // The u64 shortcut must give the u128 formula's value bit for bit (decisions compare a
        // random draw with it).
        let reference = |w: &WredParams, depth: u64| {
            let p = u128::from(depth - w.min_threshold_bytes)
                * u128::from(w.probability_percent)
                * (1u128 << 32)
                / (u128::from(w.max_threshold_bytes - w.min_threshold_bytes) * 100);
            u64::try_from(p).unwrap_or(1 << 32)
        };
        for (min, max) in [
            (0u64, 512),
            (10_000, 50_000),
            (1, 3),
            (0, 1 << 40),
            (5, u64::MAX / 3),
        ] {
            for pct in [1u8, 7, 30, 99, 100] {
                let w = WredParams {
                    probability_percent: pct,
                    min_threshold_bytes: min,
                    max_threshold_bytes: max,
                    ..profile(pct)
                };
                let span = max - min;
                for depth in [min + 1, min + span / 3, min + span / 2 + 1, max - 1, max] {
                    assert_eq!(
                        probability_scaled(&w, depth),
                        reference(&w, depth),
                        "min {min} max {max} pct {pct} depth {depth}"
                    );
                }
            }
        }
    }

    #[test]
    fn marking_frequency_follows_the_curve() {
        // Binomial bounds: n = 200_000 draws, 6 standard deviations.
        let n = 200_000u32;
        let mut rng = WredRng::new(7);
        for (depth, p) in [
            (20_000u64, 0.05f64),
            (30_000, 0.10),
            (45_000, 0.175),
            (60_000, 1.0),
            (5_000, 0.0),
        ] {
            let w = profile(20);
            let marked = (0..n)
                .filter(|_| decide(&w, depth, true, false, &mut rng) == WredVerdict::Mark)
                .count() as f64;
            let mean = p * f64::from(n);
            let sd = (f64::from(n) * p * (1.0 - p)).sqrt();
            assert!(
                (marked - mean).abs() <= 6.0 * sd + 1.0,
                "depth {depth}: {marked} marked, expected {mean} ± {sd}"
            );
        }
    }

    #[test]
    fn lossless_queues_are_never_dropped_and_non_ect_passes() {
        let w = profile(100);
        let mut rng = WredRng::new(1);
        for _ in 0..1000 {
            assert_eq!(
                decide(&w, 1_000_000, false, true, &mut rng),
                WredVerdict::Pass
            );
            assert_eq!(
                decide(&w, 1_000_000, true, true, &mut rng),
                WredVerdict::Mark
            );
            assert_eq!(
                decide(&w, 1_000_000, false, false, &mut rng),
                WredVerdict::Drop
            );
        }
        let no_drop = WredParams {
            drop_enable: false,
            ..w
        };
        assert_eq!(
            decide(&no_drop, 1_000_000, false, false, &mut rng),
            WredVerdict::Pass
        );
        let drop_only = WredParams {
            ecn_mark: false,
            ..w
        };
        assert_eq!(
            decide(&drop_only, 1_000_000, true, false, &mut rng),
            WredVerdict::Drop
        );
        assert_eq!(
            decide(&drop_only, 1_000_000, true, true, &mut rng),
            WredVerdict::Pass
        );
    }

    #[test]
    fn same_seed_same_decisions() {
        let w = profile(50);
        let run = |seed| {
            let mut rng = WredRng::new(seed);
            (0..100)
                .map(|i| decide(&w, 20_000 + i * 300, true, false, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }
}
