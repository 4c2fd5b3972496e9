//! The runtime's clock: `CLOCK_MONOTONIC` turned into the core's [`Instant`].
//!
//! Read once per loop iteration and passed down (the core never reads a clock). Instants the
//! core reports back (event times) are turned into wall-clock time only when they are logged
//! ([`MonotonicClock::wall_time`]).

use headroom_core::time::Instant;

/// A monotonic clock whose epoch is its creation (plus one second, so that no timestamp the
/// core sees is 0, which some state uses for "never").
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    start: std::time::Instant,
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl MonotonicClock {
    /// A clock starting now.
    #[must_use]
    pub fn new() -> Self {
        Self {
            start: std::time::Instant::now(),
        }
    }

    /// The current time.
    #[inline]
    #[must_use]
    pub fn now(&self) -> Instant {
        let ns = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Instant::from_nanos(ns.saturating_add(1_000_000_000))
    }

    /// The wall-clock-free duration from `now` until `deadline`.
    #[must_use]
    pub fn until(&self, deadline: Instant) -> std::time::Duration {
        deadline - self.now()
    }

    /// The wall-clock time of `at`, an instant of this clock: the wall clock read now, minus
    /// how long ago `at` was on this clock. The wall clock is read at the call, as a capture
    /// reads it when it mirrors a frame, so an event logged now and a frame captured at the
    /// same moment carry the same time even if the wall clock was stepped since the start.
    #[must_use]
    pub fn wall_time(&self, at: Instant) -> std::time::SystemTime {
        let wall = std::time::SystemTime::now();
        let now = self.now();
        if at <= now {
            let ago = now.saturating_duration_since(at);
            wall.checked_sub(ago).unwrap_or(std::time::UNIX_EPOCH)
        } else {
            wall + at.saturating_duration_since(now)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, SystemTime};

    #[test]
    fn wall_time_keeps_the_distance_between_instants() {
        let clock = MonotonicClock::new();
        let now = clock.now();
        // The clock starts at 1 s: half a second back and three seconds ahead both exist.
        let earlier = Instant::from_nanos(now.as_nanos() - 500_000_000);
        let later = Instant::from_nanos(now.as_nanos() + 3_000_000_000);
        let wall_now = clock.wall_time(now);
        let back = wall_now.duration_since(clock.wall_time(earlier)).unwrap();
        let ahead = clock.wall_time(later).duration_since(wall_now).unwrap();
        // Readings of both clocks a moment apart: the gaps hold give or take that moment.
        assert!(
            back > Duration::from_millis(250) && back < Duration::from_millis(750),
            "{back:?}"
        );
        assert!(
            ahead > Duration::from_millis(2_750) && ahead < Duration::from_millis(3_250),
            "{ahead:?}"
        );
        let off = SystemTime::now()
            .duration_since(wall_now)
            .unwrap_or_default();
        assert!(off < Duration::from_secs(1), "{off:?}");
    }
}
