//! The PFC storm-rate alarm: PFC frames received per (port, priority), counted in one-second
//! windows; an operator is told when a window exceeds `storm_alarm_frames_per_second`
//! ([`Event::PfcRateHigh`]) and again when the episode is over ([`Event::PfcRateNormal`]).
//!
//! It runs on the ingress side that receives the port. A window is counted as PFC frames
//! arrive; the end of an episode is found either by the next frame (its window ended quiet) or,
//! when no frame comes, by `StormAlarm::roll` at the deadline `StormAlarm::poll_timeout`
//! names, so the driver needs no fallback tick.

use crate::events::{Event, EventLog};
use crate::time::Instant;
use crate::types::{PortId, Priority, PRIORITY_COUNT};

/// Length of a counting window, ns.
pub const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// Storm-rate alarm state of one (port, priority): PFC frames counted in one-second windows.
#[derive(Clone, Copy, Debug, Default)]
struct RateWindow {
    start_ns: u64,
    frames: u64,
    alarmed: bool,
}

impl RateWindow {
    /// When [`StormAlarm::roll`] must next look at an alarmed window: at the end of a window
    /// that ended quiet, else at the end of the window after it (a whole window without a frame
    /// also ends the episode).
    fn deadline_ns(&self, threshold: u64) -> u64 {
        let windows = if self.frames <= threshold { 1 } else { 2 };
        self.start_ns.saturating_add(windows * RATE_WINDOW_NS)
    }
}

/// The alarm state of every port one ingress side receives.
#[derive(Debug)]
pub(crate) struct StormAlarm {
    /// Frames per window above which the alarm is raised (0: never raised).
    threshold: u64,
    /// `[port][priority]`.
    windows: Vec<[RateWindow; PRIORITY_COUNT]>,
    /// Windows currently in alarm (so that idle calls skip the scan).
    active: u32,
}

impl StormAlarm {
    pub(crate) fn new(ports: usize, threshold_frames_per_second: u32) -> Self {
        Self {
            threshold: u64::from(threshold_frames_per_second),
            windows: vec![[RateWindow::default(); PRIORITY_COUNT]; ports],
            active: 0,
        }
    }

    /// Counts one PFC frame for `(port, prio)` received at `now`.
    pub(crate) fn count(&mut self, now: Instant, port: PortId, prio: Priority, events: &EventLog) {
        let threshold = self.threshold;
        let w = &mut self.windows[port.index()][prio.index()];
        let now_ns = now.as_nanos();
        if now_ns.saturating_sub(w.start_ns) >= RATE_WINDOW_NS {
            let was_high = w.frames > threshold;
            if w.alarmed && !was_high {
                w.alarmed = false;
                self.active -= 1;
                events.push(Event::PfcRateNormal {
                    port,
                    priority: prio,
                    at: now,
                });
            }
            w.start_ns = now_ns;
            w.frames = 0;
        }
        w.frames += 1;
        if threshold > 0 && w.frames > threshold && !w.alarmed {
            w.alarmed = true;
            self.active += 1;
            events.push(Event::PfcRateHigh {
                port,
                priority: prio,
                frames_per_second: w.frames,
                at: now,
            });
        }
    }

    /// Ends the episodes of `ports` whose window passed quiet (or a whole window saw nothing).
    pub(crate) fn roll(&mut self, now: Instant, ports: &[PortId], events: &EventLog) {
        if self.active == 0 {
            return;
        }
        let threshold = self.threshold;
        let now_ns = now.as_nanos();
        for &port in ports {
            for prio in Priority::ALL {
                let w = &mut self.windows[port.index()][prio.index()];
                if w.alarmed && now_ns >= w.deadline_ns(threshold) {
                    w.alarmed = false;
                    self.active -= 1;
                    w.frames = 0;
                    w.start_ns = now_ns;
                    events.push(Event::PfcRateNormal {
                        port,
                        priority: prio,
                        at: now,
                    });
                }
            }
        }
    }

    /// The earliest time [`StormAlarm::roll`] has something to do for `ports`, if any.
    pub(crate) fn poll_timeout(&self, ports: &[PortId]) -> Option<Instant> {
        if self.active == 0 {
            return None;
        }
        ports
            .iter()
            .flat_map(|p| self.windows[p.index()].iter())
            .filter(|w| w.alarmed)
            .map(|w| w.deadline_ns(self.threshold))
            .min()
            .map(Instant::from_nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: PortId = PortId(0);

    fn prio() -> Priority {
        Priority::from_low_bits(3)
    }

    #[test]
    fn the_deadline_is_the_end_of_the_window_that_decides_the_episode() {
        let events = EventLog::default();
        let mut alarm = StormAlarm::new(1, 2);
        assert_eq!(alarm.poll_timeout(&[P]), None, "nothing alarmed");
        // Three frames in the first window (it starts at 0): the third raises the alarm.
        for t in [10, 20, 30] {
            alarm.count(Instant::from_nanos(t), P, prio(), &events);
        }
        assert!(matches!(events.pop(), Some(Event::PfcRateHigh { .. })));
        // The window was loud: only a whole silent window after it ends the episode.
        let loud_deadline = 2 * RATE_WINDOW_NS;
        assert_eq!(
            alarm.poll_timeout(&[P]),
            Some(Instant::from_nanos(loud_deadline))
        );
        alarm.roll(Instant::from_nanos(loud_deadline - 1), &[P], &events);
        assert_eq!(events.pop(), None, "not before the deadline");
        alarm.roll(Instant::from_nanos(loud_deadline), &[P], &events);
        assert!(matches!(
            events.pop(),
            Some(Event::PfcRateNormal { at, .. }) if at == Instant::from_nanos(loud_deadline)
        ));
        assert_eq!(alarm.poll_timeout(&[P]), None);
    }

    #[test]
    fn a_quiet_window_after_a_loud_one_ends_at_its_own_end() {
        let events = EventLog::default();
        let mut alarm = StormAlarm::new(1, 2);
        for t in [0, 1, 2] {
            alarm.count(Instant::from_nanos(t), P, prio(), &events);
        }
        // One frame in the next window: it starts a new (quiet so far) window at 1 s.
        alarm.count(Instant::from_nanos(RATE_WINDOW_NS), P, prio(), &events);
        assert_eq!(
            alarm.poll_timeout(&[P]),
            Some(Instant::from_nanos(2 * RATE_WINDOW_NS))
        );
    }
}
