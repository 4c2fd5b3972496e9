//! Port rates as SONiC computes them for `show interfaces counters` (`port_rates.lua`, the
//! `PORT_RATES` flex counter group): at every sample, the change of the octet and frame
//! counters over the time elapsed, smoothed by an exponential moving average with
//! α = 2 / (N + 1) for N = 10 samples (`PORT_SMOOTH_INTERVAL` 10, `PORT_ALPHA` 0.18); the first
//! interval is taken as it is. The control plane samples once a second ([`RATE_INTERVAL`]),
//! SONiC's default.

use std::time::{Duration, Instant};

/// How often the control plane samples the counters for rates.
pub const RATE_INTERVAL: Duration = Duration::from_secs(1);

/// SONiC's smoothing factor, 2 / (10 + 1) rounded as SONiC stores it.
pub const ALPHA: f64 = 0.18;

/// Smoothed rates of one port.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Rates {
    /// Bytes received per second (SONiC `RX_BPS`: bytes, not bits).
    pub rx_bytes_per_s: f64,
    /// Bytes sent per second (`TX_BPS`).
    pub tx_bytes_per_s: f64,
    /// RX_OK frames per second (`RX_PPS`).
    pub rx_frames_per_s: f64,
    /// TX_OK frames per second (`TX_PPS`).
    pub tx_frames_per_s: f64,
}

/// The counters a rate is computed from, totals since start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RateInputs {
    /// Bytes received (`IF_IN_OCTETS`).
    pub rx_bytes: u64,
    /// Bytes sent (`IF_OUT_OCTETS`).
    pub tx_bytes: u64,
    /// RX_OK frames.
    pub rx_frames: u64,
    /// TX_OK frames.
    pub tx_frames: u64,
}

/// Samples of one port's counters turned into smoothed rates.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateMeter {
    last: Option<(Instant, RateInputs)>,
    rates: Option<Rates>,
}

impl RateMeter {
    /// Takes a sample at `at`. A counter that went backwards (a port replaced by another of
    /// the same name) counts as no change.
    pub fn sample(&mut self, at: Instant, now: RateInputs) {
        if let Some((then, before)) = self.last {
            let dt = at.saturating_duration_since(then).as_secs_f64();
            if dt <= 0.0 {
                return;
            }
            let per_s = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt;
            let instant = Rates {
                rx_bytes_per_s: per_s(now.rx_bytes, before.rx_bytes),
                tx_bytes_per_s: per_s(now.tx_bytes, before.tx_bytes),
                rx_frames_per_s: per_s(now.rx_frames, before.rx_frames),
                tx_frames_per_s: per_s(now.tx_frames, before.tx_frames),
            };
            let smooth = |old: f64, new: f64| ALPHA * new + (1.0 - ALPHA) * old;
            self.rates = Some(match self.rates {
                None => instant,
                Some(r) => Rates {
                    rx_bytes_per_s: smooth(r.rx_bytes_per_s, instant.rx_bytes_per_s),
                    tx_bytes_per_s: smooth(r.tx_bytes_per_s, instant.tx_bytes_per_s),
                    rx_frames_per_s: smooth(r.rx_frames_per_s, instant.rx_frames_per_s),
                    tx_frames_per_s: smooth(r.tx_frames_per_s, instant.tx_frames_per_s),
                },
            });
        }
        self.last = Some((at, now));
    }

    /// The rates, once two samples have been taken (SONiC shows `N/A` before).
    #[must_use]
    pub fn rates(&self) -> Option<Rates> {
        self.rates
    }
}

/// Utilisation of a port of `speed_mbps` at `bytes_per_s`, in percent (SONiC `RX_UTIL`:
/// bytes per second over the speed in bytes per second).
#[must_use]
pub fn utilisation_percent(bytes_per_s: f64, speed_mbps: u64) -> f64 {
    if speed_mbps == 0 {
        return 0.0;
    }
    bytes_per_s / (speed_mbps as f64 * 1e6 / 8.0) * 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(rx_bytes: u64, rx_frames: u64) -> RateInputs {
        RateInputs {
            rx_bytes,
            rx_frames,
            ..RateInputs::default()
        }
    }

    #[test]
    fn first_interval_as_is_then_smoothed_like_port_rates_lua() {
        let t0 = Instant::now();
        let mut m = RateMeter::default();
        m.sample(t0, inputs(0, 0));
        assert_eq!(m.rates(), None);
        m.sample(t0 + Duration::from_secs(2), inputs(2000, 20));
        let r = m.rates().unwrap();
        assert!((r.rx_bytes_per_s - 1000.0).abs() < 1e-9);
        assert!((r.rx_frames_per_s - 10.0).abs() < 1e-9);
        // Nothing for a second: 0.82 of the old rate remains.
        m.sample(t0 + Duration::from_secs(3), inputs(2000, 20));
        let r = m.rates().unwrap();
        assert!((r.rx_bytes_per_s - 820.0).abs() < 1e-9, "{r:?}");
        // A counter going backwards is no traffic, not a negative rate.
        m.sample(t0 + Duration::from_secs(4), inputs(10, 1));
        assert!(m.rates().unwrap().rx_bytes_per_s >= 0.0);
    }

    #[test]
    fn utilisation_is_bytes_over_the_speed_in_bytes() {
        // 125 MB/s on a 10G port is 10 %.
        assert!((utilisation_percent(125e6, 10_000) - 10.0).abs() < 1e-9);
        assert_eq!(utilisation_percent(1.0, 0), 0.0);
    }
}
