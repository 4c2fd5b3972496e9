//! A monotonic nanosecond clock from the TSC, for per-burst timestamps.

use headroom_core::time::Instant;

use crate::eal::Eal;
use crate::error::DpdkError;

/// Nanoseconds since the clock was created, read from the TSC (`rte_get_tsc_cycles`) and
/// scaled with EAL's measured TSC frequency (`rte_get_tsc_hz`). Copy it to every lcore: all
/// copies share the epoch.
///
/// One read costs an `rdtsc` and a 64x64-bit multiply, no system call. Monotonic on CPUs with
/// an invariant, synchronised TSC (every x86-64 server CPU of the last decade; EAL warns at
/// init otherwise); a read that would go backwards across CPUs saturates at the epoch.
#[derive(Clone, Copy, Debug)]
pub struct TscClock {
    epoch_cycles: u64,
    hz: u64,
    /// Nanoseconds per cycle as a 32.32 fixed-point number.
    nanos_per_cycle_q32: u64,
}

impl TscClock {
    /// A clock whose epoch is now.
    ///
    /// # Errors
    /// [`DpdkError::Call`] if EAL reports a TSC frequency of 0.
    pub fn new(eal: &Eal) -> Result<Self, DpdkError> {
        Self::with_hz(eal.tsc_hz(), dpdk_sys::tsc_cycles())
    }

    fn with_hz(hz: u64, epoch_cycles: u64) -> Result<Self, DpdkError> {
        if hz == 0 {
            return Err(DpdkError::Call {
                call: "rte_get_tsc_hz",
                subject: "TSC clock".to_owned(),
                code: 0,
                text: "EAL reports a TSC frequency of 0".to_owned(),
            });
        }
        let q32 = (1_000_000_000_u128 << 32) / u128::from(hz);
        Ok(Self {
            epoch_cycles,
            hz,
            nanos_per_cycle_q32: u64::try_from(q32).unwrap_or(u64::MAX),
        })
    }

    /// TSC ticks per second.
    #[must_use]
    pub fn hz(&self) -> u64 {
        self.hz
    }

    /// Nanoseconds for `cycles` TSC ticks.
    #[must_use]
    pub fn cycles_to_nanos(&self, cycles: u64) -> u64 {
        let nanos = (u128::from(cycles) * u128::from(self.nanos_per_cycle_q32)) >> 32;
        u64::try_from(nanos).unwrap_or(u64::MAX)
    }

    /// The current time.
    #[inline]
    #[must_use]
    pub fn now(&self) -> Instant {
        let cycles = dpdk_sys::tsc_cycles().saturating_sub(self.epoch_cycles);
        Instant::from_nanos(self.cycles_to_nanos(cycles))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling_is_exact_enough_for_common_frequencies() {
        for hz in [1_000_000_u64, 2_100_000_000, 2_999_999_000, 3_600_000_000] {
            let clock = TscClock::with_hz(hz, 0).unwrap();
            // One hour of cycles within 10 microseconds (3 ppb: the 32.32 fixed-point step).
            let hour_nanos = clock.cycles_to_nanos(hz * 3600);
            let error = hour_nanos.abs_diff(3_600_000_000_000);
            assert!(error < 10_000, "{hz} Hz: {hour_nanos} ns ({error} off)");
        }
        assert!(TscClock::with_hz(0, 0).is_err());
    }
}
