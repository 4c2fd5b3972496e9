//! Time as this crate sees it: an opaque nanosecond count passed in by the driver.
//!
//! This is deliberately the same shape as `headroom_core::time::Instant` (a `u64` of nanoseconds
//! since an epoch the driver chooses), so that the two can be unified once the dependency
//! `headroom-roce -> headroom-core` is allowed; until then the crate depends on nothing.
//! Nothing in this crate reads a clock.

use core::fmt;

/// Nanoseconds in one microsecond.
pub const NANOS_PER_MICRO: u64 = 1_000;
/// Nanoseconds in one second.
pub const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// A point in time, in nanoseconds since an epoch chosen by whoever drives the state machines.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Self = Self(0);
    /// The far future; also used for "never".
    pub const MAX: Self = Self(u64::MAX);

    /// An instant `nanos` nanoseconds after the epoch.
    #[must_use]
    pub const fn from_nanos(nanos: u64) -> Self {
        Self(nanos)
    }

    /// An instant `micros` microseconds after the epoch (saturating).
    #[must_use]
    pub const fn from_micros(micros: u64) -> Self {
        Self(micros.saturating_mul(NANOS_PER_MICRO))
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    #[must_use]
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    #[must_use]
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + nanos`, saturating at [`Instant::MAX`].
    #[must_use]
    pub const fn saturating_add_nanos(self, nanos: u64) -> Self {
        Self(self.0.saturating_add(nanos))
    }

    /// Nanoseconds from `earlier` to `self`; zero if `earlier` is later.
    #[must_use]
    pub const fn saturating_nanos_since(self, earlier: Self) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "t+{}.{:09}s",
            self.0 / NANOS_PER_SECOND,
            self.0 % NANOS_PER_SECOND
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_and_saturation() {
        assert_eq!(Instant::from_micros(3).as_nanos(), 3_000);
        assert_eq!(Instant::from_millis(2).as_nanos(), 2_000_000);
        assert_eq!(Instant::from_micros(u64::MAX), Instant::MAX);
        assert_eq!(Instant::MAX.saturating_add_nanos(1), Instant::MAX);
        assert_eq!(
            Instant::from_nanos(5).saturating_nanos_since(Instant::from_nanos(9)),
            0
        );
        assert_eq!(
            format!("{:?}", Instant::from_nanos(1_500_000_001)),
            "t+1.500000001s"
        );
    }
}
