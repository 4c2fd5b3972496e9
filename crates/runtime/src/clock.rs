//! The runtime's clock: `CLOCK_MONOTONIC` turned into the core's [`Instant`].
//!
//! Read once per loop iteration and passed down (the core never reads a clock).

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
}
