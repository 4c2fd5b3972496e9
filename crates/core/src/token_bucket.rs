//! A token bucket in frames, in virtual time, exact in integers: the rate limit of punted and
//! injected frames (SONiC's CoPP policers count packets, `meter_type = packets`, the same way).

use crate::time::Instant;

/// One frame's worth of credit: credit is kept in frame-nanoseconds per second, so that a rate
/// of `r` frames/s adds exactly `r` units per ns and nothing is lost to rounding.
const FRAME: u128 = 1_000_000_000;

/// Frames per second and the burst a bucket allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateLimit {
    /// Sustained rate, frames per second (0 with a burst of 0: nothing passes).
    pub frames_per_second: u32,
    /// Frames that may pass back to back after the bucket has filled (its depth).
    pub burst_frames: u32,
}

impl RateLimit {
    /// `frames_per_second` with a burst of as many frames (one second's worth), as SONiC's
    /// default CoPP groups set CBS = CIR.
    #[must_use]
    pub const fn per_second(frames_per_second: u32) -> Self {
        Self {
            frames_per_second,
            burst_frames: frames_per_second,
        }
    }

    /// This limit split evenly over `parts` buckets (one per ingress side), rounded up so that a
    /// non-zero rate or burst stays non-zero.
    #[must_use]
    pub fn split(self, parts: usize) -> Self {
        let parts = u32::try_from(parts.max(1)).unwrap_or(u32::MAX);
        Self {
            frames_per_second: self.frames_per_second.div_ceil(parts),
            burst_frames: self.burst_frames.div_ceil(parts),
        }
    }
}

/// A bucket that starts full.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TokenBucket {
    credit: u128,
    depth: u128,
    rate: u128,
    last: Instant,
}

impl TokenBucket {
    pub(crate) fn new(limit: RateLimit, now: Instant) -> Self {
        let depth = u128::from(limit.burst_frames) * FRAME;
        Self {
            credit: depth,
            depth,
            rate: u128::from(limit.frames_per_second),
            last: now,
        }
    }

    /// Takes one frame's credit at `now`; whether there was one. Over `[t0, t]` with the bucket
    /// full at `t0`, at most `burst + ⌊rate × (t − t0) / 1 s⌋` frames pass.
    pub(crate) fn take(&mut self, now: Instant) -> bool {
        // Time never runs backwards for the bucket: a late `now` refills nothing.
        let elapsed = u128::from(now.saturating_nanos_since(self.last));
        if now > self.last {
            self.last = now;
        }
        self.credit = (self.credit + elapsed * self.rate).min(self.depth);
        if self.credit >= FRAME {
            self.credit -= FRAME;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_the_burst_then_exactly_the_rate() {
        let t0 = Instant::from_millis(5);
        let mut b = TokenBucket::new(
            RateLimit {
                frames_per_second: 3,
                burst_frames: 2,
            },
            t0,
        );
        // Dense arrivals every 1 ms for 2 s: 2 + ⌊3 × t⌋ frames by time t.
        let mut passed = 0u64;
        for ms in 0..=2000u64 {
            let now = t0.saturating_add_nanos(ms * 1_000_000);
            while b.take(now) {
                passed += 1;
            }
            assert_eq!(passed, 2 + 3 * ms / 1000, "at {ms} ms");
        }
    }

    #[test]
    fn zero_passes_nothing_and_split_rounds_up() {
        let mut b = TokenBucket::new(RateLimit::per_second(0), Instant::ZERO);
        assert!(!b.take(Instant::from_millis(10_000)));
        assert_eq!(
            RateLimit::per_second(100).split(3),
            RateLimit::per_second(34)
        );
        assert_eq!(RateLimit::per_second(1).split(4), RateLimit::per_second(1));
    }
}
