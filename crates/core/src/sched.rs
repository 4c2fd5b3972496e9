//! Egress scheduling of a port's eight queues and the shaper that paces the port to its speed.
//!
//! * Strict queues are served first, the highest queue index first (SAI's strict priority).
//! * The other queues share what is left by deficit weighted round robin (Shreedhar & Varghese,
//!   1995): on its turn a backlogged queue earns `weight × DWRR_QUANTUM_BYTES` of credit and sends
//!   frames while its head fits in the credit; a queue that empties loses its credit, a queue that
//!   is paused (PFC) or empty is skipped, so a paused queue never starves the others.
//! * The shaper is a token bucket at the port's rate that charges each frame its wire footprint
//!   (frame + FCS + preamble + inter-frame gap), so that a software port behaves like a link of
//!   the configured speed.

use crate::params::SchedulerKind;
use crate::time::Instant;
use crate::types::PRIORITY_COUNT;

/// Credit per unit of DWRR weight, bytes per turn.
pub const DWRR_QUANTUM_BYTES: u32 = 1024;

/// Bytes a frame occupies on the wire beyond its data: FCS (4), preamble + SFD (8) and the
/// minimum inter-frame gap (12) — IEEE 802.3 clauses 3.1 and 4.4.2.
pub const WIRE_OVERHEAD_BYTES: u32 = 24;

/// Frames shorter than this are padded on the wire (60 bytes + FCS).
pub const MIN_FRAME_BYTES: u32 = 60;

/// The wire footprint of a frame of `len` bytes (without FCS), bytes.
#[inline]
#[must_use]
pub fn wire_bytes(len: u32) -> u32 {
    len.max(MIN_FRAME_BYTES) + WIRE_OVERHEAD_BYTES
}

/// Strict priority + DWRR selection among a port's queues.
#[derive(Clone, Debug)]
pub struct QueueScheduler {
    kinds: [SchedulerKind; PRIORITY_COUNT],
    strict_mask: u8,
    deficit: [u64; PRIORITY_COUNT],
    current: usize,
    turn_open: bool,
}

impl QueueScheduler {
    /// A scheduler for queues of the given kinds.
    #[must_use]
    pub fn new(kinds: [SchedulerKind; PRIORITY_COUNT]) -> Self {
        let mut strict_mask = 0u8;
        for (i, k) in kinds.iter().enumerate() {
            if *k == SchedulerKind::Strict {
                strict_mask |= 1 << i;
            }
        }
        Self {
            kinds,
            strict_mask,
            deficit: [0; PRIORITY_COUNT],
            current: 0,
            turn_open: false,
        }
    }

    /// Picks the queue to send from among `eligible` (bit i: queue i has a frame and may send),
    /// charging DWRR credit for the head frame. `head_len(q)` is the length of queue q's head
    /// frame. Returns `None` when no queue is eligible.
    #[inline]
    pub fn pick(&mut self, eligible: u8, mut head_len: impl FnMut(usize) -> u32) -> Option<usize> {
        if eligible == 0 {
            return None;
        }
        let strict = eligible & self.strict_mask;
        if strict != 0 {
            return Some(7 - strict.leading_zeros() as usize);
        }
        // At most two visits per queue: the first may only open a turn that is too small for a
        // jumbo head; by the second every eligible queue's credit has grown.
        for _ in 0..(2 * PRIORITY_COUNT + 1) {
            let q = self.current;
            if eligible & (1 << q) != 0 {
                let SchedulerKind::Dwrr { weight } = self.kinds[q] else {
                    unreachable!("strict handled above")
                };
                if !self.turn_open {
                    self.deficit[q] += u64::from(weight) * u64::from(DWRR_QUANTUM_BYTES);
                    self.turn_open = true;
                }
                let len = u64::from(head_len(q));
                if len <= self.deficit[q] {
                    self.deficit[q] -= len;
                    return Some(q);
                }
            } else {
                // Empty or paused: a queue that is not backlogged keeps no credit (DRR).
                self.deficit[q] = 0;
            }
            self.current = (q + 1) % PRIORITY_COUNT;
            self.turn_open = false;
        }
        // Credit grows by at least one quantum per visit, so only a frame longer than
        // 2 × 100 × quantum could get here; serve it rather than stall.
        let q = eligible.trailing_zeros() as usize;
        self.deficit[q] = 0;
        Some(q)
    }

    /// After [`QueueScheduler::pick`] returned `q`: whether `pick(eligible, ..)` would return `q`
    /// again for a head of `head_len` bytes, charging it exactly as `pick` would. When it would
    /// not, nothing changes and the caller calls `pick`. This lets the egress side serve a run of
    /// frames from one queue with the queue's state at hand, with the same order as `pick`.
    #[inline]
    pub fn pick_again(&mut self, q: usize, eligible: u8, head_len: u32) -> bool {
        let strict = eligible & self.strict_mask;
        if strict != 0 {
            return 7 - strict.leading_zeros() as usize == q;
        }
        // `pick`'s first visit: the current queue, its turn open, its head within the credit.
        let q = q % PRIORITY_COUNT;
        let len = u64::from(head_len);
        if self.current == q && self.turn_open && eligible & (1 << q) != 0 && len <= self.deficit[q]
        {
            self.deficit[q] -= len;
            return true;
        }
        false
    }

    /// Tells the scheduler that queue `q` became empty after a send (DRR: credit is lost).
    #[inline]
    pub fn queue_emptied(&mut self, q: usize) {
        if self.strict_mask & (1 << q) == 0 {
            self.deficit[q] = 0;
            if self.current == q {
                self.current = (q + 1) % PRIORITY_COUNT;
                self.turn_open = false;
            }
        }
    }
}

/// Token bucket pacing a port at `rate_bps`.
#[derive(Clone, Debug)]
pub struct Shaper {
    rate_bps: u64,
    /// Tokens in bit·ns/s units would overflow; keep bytes × 8e9 / rate as "ns of credit".
    credit_ns: i64,
    burst_ns: i64,
    last: Instant,
    /// The last wire length charged and its cost, ns: traffic is mostly of a few lengths, and
    /// this spares the division per frame.
    last_charge: (u32, i64),
}

impl Shaper {
    /// A shaper at `rate_bps` that may send `burst_bytes` back to back after idling.
    #[must_use]
    pub fn new(rate_bps: u64, burst_bytes: u32, now: Instant) -> Self {
        let mut s = Self {
            rate_bps: rate_bps.max(1),
            credit_ns: 0,
            burst_ns: 0,
            last: now,
            last_charge: (0, 0),
        };
        s.burst_ns = s.bytes_ns(burst_bytes);
        s.credit_ns = s.burst_ns;
        s
    }

    /// Wire time of `bytes` at the shaper's rate, ns (rounded up).
    #[must_use]
    pub fn bytes_ns(&self, bytes: u32) -> i64 {
        // Bit-nanoseconds fit in a u64 up to 2.3 GB; a u64 division is far cheaper than a u128
        // one (a library call), with the same result.
        let ns = match u64::from(bytes).checked_mul(8 * 1_000_000_000) {
            Some(bit_ns) => u128::from(bit_ns.div_ceil(self.rate_bps)),
            None => (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(self.rate_bps)),
        };
        i64::try_from(ns).unwrap_or(i64::MAX)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_nanos_since(self.last);
        self.last = self.last.max(now);
        let elapsed = i64::try_from(elapsed).unwrap_or(i64::MAX);
        self.credit_ns = self.credit_ns.saturating_add(elapsed).min(self.burst_ns);
    }

    /// Whether a frame may start now (credit is not negative).
    #[inline]
    pub fn ready(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.credit_ns >= 0
    }

    /// Charges a frame of `len` bytes (without FCS) that is being sent.
    #[inline]
    pub fn consume(&mut self, len: u32) {
        let wire = wire_bytes(len);
        if self.last_charge.0 != wire {
            self.last_charge = (wire, self.bytes_ns(wire));
        }
        self.credit_ns -= self.last_charge.1;
    }

    /// Whether a frame may start at the `now` of the last [`Shaper::ready`] (no refill).
    #[inline]
    #[must_use]
    pub fn has_credit(&self) -> bool {
        self.credit_ns >= 0
    }

    /// When the shaper will let the next frame start (`now` if it already would).
    #[must_use]
    pub fn next_ready(&self, now: Instant) -> Instant {
        if self.credit_ns >= 0 {
            now
        } else {
            self.last
                .saturating_add_nanos(self.credit_ns.unsigned_abs())
        }
    }

    /// Changes the rate (runtime speed change).
    pub fn set_rate(&mut self, rate_bps: u64, burst_bytes: u32) {
        self.rate_bps = rate_bps.max(1);
        self.last_charge = (0, 0);
        self.burst_ns = self.bytes_ns(burst_bytes);
        self.credit_ns = self.credit_ns.min(self.burst_ns);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dwrr(w: [u8; 8]) -> [SchedulerKind; 8] {
        w.map(|weight| SchedulerKind::Dwrr { weight })
    }

    #[test]
    fn strict_first_highest_index_first() {
        let mut kinds = dwrr([1; 8]);
        kinds[6] = SchedulerKind::Strict;
        kinds[5] = SchedulerKind::Strict;
        let mut s = QueueScheduler::new(kinds);
        assert_eq!(s.pick(0b0110_0001, |_| 100), Some(6));
        assert_eq!(s.pick(0b0010_0001, |_| 100), Some(5));
        assert_eq!(s.pick(0b0000_0001, |_| 100), Some(0));
        assert_eq!(s.pick(0, |_| 100), None);
    }

    #[test]
    fn dwrr_shares_bytes_by_weight_and_skips_ineligible() {
        // Weights 14 and 15 (SONiC's scheduler.0/1), plus 50 on queue 5; mixed frame sizes.
        let mut weights = [1; 8];
        weights[1] = 14;
        weights[3] = 15;
        weights[5] = 50;
        let mut s = QueueScheduler::new(dwrr(weights));
        let len = |q: usize| [0, 1500, 0, 64, 0, 900, 0, 0][q];
        let mut bytes = [0u64; 8];
        for i in 0..200_000 {
            // Queue 3 is paused every other 1000 picks: the others share its absence.
            let eligible = if (i / 1000) % 2 == 0 {
                0b0010_1010
            } else {
                0b0010_0010
            };
            let q = s.pick(eligible, len).unwrap();
            assert!(eligible & (1 << q) != 0);
            bytes[q] += u64::from(len(q));
        }
        let share = |q: usize, others: &[usize]| {
            bytes[q] as f64 / others.iter().map(|&o| bytes[o] as f64).sum::<f64>()
        };
        // Over the whole run queue 1 : queue 5 = 14 : 50 (both always backlogged).
        let ratio = bytes[1] as f64 / bytes[5] as f64;
        assert!(
            (ratio / (14.0 / 50.0) - 1.0).abs() < 0.05,
            "1:5 ratio {ratio}"
        );
        assert!(share(3, &[1, 3, 5]) > 0.0);
    }

    #[test]
    fn dwrr_within_five_percent_equal_sizes() {
        let mut weights = [1; 8];
        weights[0] = 14;
        weights[3] = 15;
        weights[4] = 30;
        let mut s = QueueScheduler::new(dwrr(weights));
        let mut bytes = [0u64; 8];
        for _ in 0..100_000 {
            let q = s.pick(0b0001_1001, |_| 1024).unwrap();
            bytes[q] += 1024;
        }
        let total: u64 = bytes.iter().sum();
        for (q, w) in [(0usize, 14.0), (3, 15.0), (4, 30.0)] {
            let got = bytes[q] as f64 / total as f64;
            let want = w / 59.0;
            assert!(
                (got / want - 1.0).abs() < 0.05,
                "queue {q}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn shaper_paces_to_rate() {
        // 1 Gb/s, 1500-byte frames: each takes (1500 + 24) × 8 ns = 12192 ns on the wire.
        let t0 = Instant::from_millis(1);
        let mut sh = Shaper::new(1_000_000_000, 1524, t0);
        let mut now = t0;
        let mut sent = 0u64;
        let end = t0.saturating_add_nanos(10_000_000);
        while now < end {
            if sh.ready(now) {
                sh.consume(1500);
                sent += 1;
            } else {
                now = sh.next_ready(now);
            }
        }
        // 10 ms / 12192 ns = 820.2 frames, plus the initial burst of one.
        assert!((820..=822).contains(&sent), "{sent} frames");
        assert_eq!(wire_bytes(10), 84);
    }
}
