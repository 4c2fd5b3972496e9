//! One mechanism behind every counter view: what replaced dataplanes counted, carried over a
//! reconfiguration, and the snapshot of the last `clear counters`.
//!
//! A dataplane's counters start at zero and only grow; a reconfiguration replaces the dataplane
//! (and, for AF_PACKET, reopens the ports, whose kernel counters start again). SONiC's views
//! never go backwards and `sonic-clear counters` resets nothing at the source: it stores a
//! snapshot, and later reads show the difference (`sonic-buffer-model.md` §5.1). A [`Ledger`]
//! keeps both facts for one set of counters ([`Tally`]): *carried* (the sum of what every
//! replaced dataplane counted) and *cleared* (the total at the last clear). Every view reads a
//! live value from the running dataplane and asks the ledger for the total since start
//! ([`Ledger::total`]: Prometheus, the final counters) or for the operator's view
//! ([`Ledger::visible`]: `show …`).

use headroom_core::counters::DELAY_BUCKETS;
use headroom_core::stats::PortStats;
use headroom_core::types::PRIORITY_COUNT;
use headroom_io::BackendStats;

/// A set of monotonic counters that a [`Ledger`] can carry and clear.
pub trait Tally: Clone + Default {
    /// `self` (what earlier dataplanes counted) followed by `later` (what the next one
    /// counted): counts add up; a level (a depth, an occupancy) is `later`'s.
    #[must_use]
    fn then(&self, later: &Self) -> Self;

    /// What was counted since `snapshot`, an earlier reading of the same total (counts
    /// subtract, saturating at zero; levels are `self`'s).
    #[must_use]
    fn since(&self, snapshot: &Self) -> Self;
}

/// Carried totals and the clear snapshot of one [`Tally`].
#[derive(Clone, Debug, Default)]
pub struct Ledger<T> {
    /// What replaced dataplanes counted.
    carried: T,
    /// The total at the last clear.
    cleared: T,
}

impl<T: Tally> Ledger<T> {
    /// The total since start, given what the running dataplane counted.
    #[must_use]
    pub fn total(&self, live: &T) -> T {
        self.carried.then(live)
    }

    /// What operators see: the total since the last clear.
    #[must_use]
    pub fn visible(&self, live: &T) -> T {
        self.total(live).since(&self.cleared)
    }

    /// `clear counters`: later [`Ledger::visible`] reads start from zero.
    pub fn clear(&mut self, live: &T) {
        self.cleared = self.total(live);
    }

    /// The running dataplane is replaced; `last` is what it counted in all. Totals and the
    /// clear snapshot stay valid: the next dataplane's counts add to them.
    pub fn retire(&mut self, last: &T) {
        self.carried = self.total(last);
    }
}

impl Tally for u64 {
    fn then(&self, later: &Self) -> Self {
        self.saturating_add(*later)
    }

    fn since(&self, snapshot: &Self) -> Self {
        self.saturating_sub(*snapshot)
    }
}

impl Tally for PortStats {
    fn then(&self, later: &Self) -> Self {
        // `plus` keeps the levels of its receiver: the later dataplane's.
        later.plus(self)
    }

    fn since(&self, snapshot: &Self) -> Self {
        self.minus(snapshot)
    }
}

impl Tally for BackendStats {
    fn then(&self, later: &Self) -> Self {
        Self {
            rx_frames: self.rx_frames.saturating_add(later.rx_frames),
            tx_frames: self.tx_frames.saturating_add(later.tx_frames),
            rx_missed: self.rx_missed.saturating_add(later.rx_missed),
            tx_failed: self.tx_failed.saturating_add(later.tx_failed),
            rx_no_buffer: self.rx_no_buffer.saturating_add(later.rx_no_buffer),
        }
    }

    fn since(&self, snapshot: &Self) -> Self {
        BackendStats::since(self, snapshot)
    }
}

/// The PFC watchdog's statistics of one queue as plain numbers (SONiC's
/// `PFC_WD_QUEUE_STATS_*`, `sonic-buffer-model.md` §4.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WatchdogTotals {
    /// Storms detected.
    pub detected: u64,
    /// Storms restored.
    pub restored: u64,
    /// Frames the queue sent while stormed.
    pub tx_ok: u64,
    /// Frames the queue dropped while stormed.
    pub tx_drop: u64,
    /// Frames the port's PG of the same index admitted while stormed.
    pub rx_ok: u64,
    /// Frames the port's PG of the same index dropped while stormed.
    pub rx_drop: u64,
    /// `[tx_ok, tx_drop, rx_ok, rx_drop]` of the last storm.
    pub last: [u64; 4],
}

impl WatchdogTotals {
    /// Reads a dataplane's atomics.
    #[must_use]
    pub fn read(w: &headroom_core::shared::WatchdogStats) -> Self {
        Self {
            detected: w.detected.get(),
            restored: w.restored.get(),
            tx_ok: w.tx_ok.get(),
            tx_drop: w.tx_drop.get(),
            rx_ok: w.rx_ok.get(),
            rx_drop: w.rx_drop.get(),
            last: [
                w.last_tx_ok.get(),
                w.last_tx_drop.get(),
                w.last_rx_ok.get(),
                w.last_rx_drop.get(),
            ],
        }
    }
}

impl Tally for WatchdogTotals {
    /// The last storm is the later dataplane's if it saw any.
    fn then(&self, later: &Self) -> Self {
        Self {
            detected: self.detected + later.detected,
            restored: self.restored + later.restored,
            tx_ok: self.tx_ok + later.tx_ok,
            tx_drop: self.tx_drop + later.tx_drop,
            rx_ok: self.rx_ok + later.rx_ok,
            rx_drop: self.rx_drop + later.rx_drop,
            last: if later.detected > 0 {
                later.last
            } else {
                self.last
            },
        }
    }

    /// The last storm only if one was detected since (SONiC's clear of the watchdog
    /// statistics zeroes the last-storm values too).
    fn since(&self, snapshot: &Self) -> Self {
        let detected = self.detected.saturating_sub(snapshot.detected);
        Self {
            detected,
            restored: self.restored.saturating_sub(snapshot.restored),
            tx_ok: self.tx_ok.saturating_sub(snapshot.tx_ok),
            tx_drop: self.tx_drop.saturating_sub(snapshot.tx_drop),
            rx_ok: self.rx_ok.saturating_sub(snapshot.rx_ok),
            rx_drop: self.rx_drop.saturating_sub(snapshot.rx_drop),
            last: if detected > 0 { self.last } else { [0; 4] },
        }
    }
}

/// Queueing-delay histograms of a port's queues: frames per log2 bucket
/// (`headroom_core::counters::delay_bucket`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayTally(pub [[u64; DELAY_BUCKETS]; PRIORITY_COUNT]);

impl Default for DelayTally {
    fn default() -> Self {
        Self([[0; DELAY_BUCKETS]; PRIORITY_COUNT])
    }
}

impl DelayTally {
    fn zip(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        Self(core::array::from_fn(|q| {
            core::array::from_fn(|b| f(self.0[q][b], other.0[q][b]))
        }))
    }
}

impl Tally for DelayTally {
    fn then(&self, later: &Self) -> Self {
        self.zip(later, u64::saturating_add)
    }

    fn since(&self, snapshot: &Self) -> Self {
        self.zip(snapshot, u64::saturating_sub)
    }
}

/// Everything counted about one port: the dataplane's counters, the backend's (kernel or
/// NIC), the PFC watchdog's per queue and the queueing-delay histograms.
#[derive(Clone, Debug, Default)]
pub struct PortTally {
    /// The dataplane's counters, summed over its sides.
    pub stats: PortStats,
    /// The backend's counters since the port was opened for the dataplane.
    pub backend: BackendStats,
    /// The PFC watchdog's statistics per queue.
    pub pfcwd: [WatchdogTotals; PRIORITY_COUNT],
    /// Queueing-delay histograms per queue.
    pub delay: DelayTally,
}

impl Tally for PortTally {
    fn then(&self, later: &Self) -> Self {
        Self {
            stats: self.stats.then(&later.stats),
            backend: self.backend.then(&later.backend),
            pfcwd: core::array::from_fn(|q| self.pfcwd[q].then(&later.pfcwd[q])),
            delay: self.delay.then(&later.delay),
        }
    }

    fn since(&self, snapshot: &Self) -> Self {
        Self {
            stats: self.stats.since(&snapshot.stats),
            backend: self.backend.since(&snapshot.backend),
            pfcwd: core::array::from_fn(|q| self.pfcwd[q].since(&snapshot.pfcwd[q])),
            delay: self.delay.since(&snapshot.delay),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carried_and_cleared_compose() {
        let mut l = Ledger::<u64>::default();
        assert_eq!(l.visible(&5), 5);
        l.clear(&5);
        assert_eq!(l.visible(&7), 2);
        // The dataplane ends at 9 and a new one starts at 0: nothing goes backwards.
        l.retire(&9);
        assert_eq!(l.total(&0), 9);
        assert_eq!(l.visible(&0), 4);
        assert_eq!(l.visible(&3), 7);
        l.clear(&3);
        assert_eq!(l.visible(&3), 0);
        assert_eq!(l.total(&3), 12);
    }

    #[test]
    fn levels_come_from_the_live_reading() {
        let mut l = Ledger::<PortStats>::default();
        let mut old = PortStats {
            rx_frames: 10,
            ..PortStats::default()
        };
        old.pgs[3].used_bytes = 500;
        l.retire(&old);
        let mut live = PortStats {
            rx_frames: 1,
            ..PortStats::default()
        };
        live.pgs[3].used_bytes = 20;
        let total = l.total(&live);
        assert_eq!(total.rx_frames, 11);
        assert_eq!(total.pgs[3].used_bytes, 20);
        l.clear(&live);
        let v = l.visible(&live);
        assert_eq!(v.rx_frames, 0);
        assert_eq!(v.pgs[3].used_bytes, 20);
    }

    #[test]
    fn a_clear_zeroes_the_last_storm_until_the_next() {
        let mut l = Ledger::<WatchdogTotals>::default();
        let storm = WatchdogTotals {
            detected: 1,
            restored: 1,
            tx_drop: 30,
            last: [0, 30, 0, 0],
            ..WatchdogTotals::default()
        };
        l.clear(&storm);
        assert_eq!(l.visible(&storm), WatchdogTotals::default());
        // Carried over a reconfiguration, a later dataplane without a storm keeps the last one.
        l.retire(&storm);
        assert_eq!(l.total(&WatchdogTotals::default()).last, [0, 30, 0, 0]);
        let again = WatchdogTotals {
            detected: 1,
            tx_drop: 5,
            last: [0, 5, 0, 0],
            ..WatchdogTotals::default()
        };
        let v = l.visible(&again);
        assert_eq!((v.detected, v.tx_drop, v.last), (1, 5, [0, 5, 0, 0]));
    }
}
