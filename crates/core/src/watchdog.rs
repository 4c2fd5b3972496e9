//! The PFC watchdog: detects queues held by a PFC storm or deadlock and breaks the hold
//! (SONiC pfcwd semantics, `sonic-buffer-model.md` §4).
//!
//! # The rule (see also `docs/pfc-watchdog.md`)
//!
//! The watchdog is evaluated every `poll_interval`. At a poll at time `t`, a watched queue is in
//! the **storm condition** when all three hold, and have held without interruption since a time
//! `start`:
//!
//! 1. it is paused by received PFC (some watched priority mapped to it has a pause in force), in
//!    one uninterrupted pause episode that began at `episode_start` (a refresh that arrives before
//!    the previous pause expired continues the episode);
//! 2. it is not empty: its oldest frame has waited since `head_enqueued`;
//! 3. it has transmitted nothing since `last_tx`.
//!
//! `start = max(episode_start, head_enqueued, last_tx)`. The queue is declared **stormed** at the
//! first poll where `t − start ≥ detection_time`, so detection happens after the detection time
//! and before detection time + poll interval. A queue merely paused with nothing waiting is never
//! stormed. This is the Mellanox flavour of SONiC's detection (occupancy > 0, no TX, paused for
//! the whole interval), computed from exact pause intervals instead of sampled counters.
//!
//! **Restoration** (actions drop and forward): at the first poll where no PFC frame for the
//! queue's priorities has arrived for `restoration_time`. **Alert** changes nothing in the
//! dataplane and restores at the first poll where the storm condition no longer holds.

use crate::params::WatchdogAction;
use crate::sync::{AtomicU8, Ordering};
use crate::time::Instant;

/// What the watchdog knows about a queue at a poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueObservation {
    /// Start of the pause episode currently in force, if the queue is paused now.
    pub paused_since: Option<Instant>,
    /// Enqueue time of the oldest frame, if the queue holds any.
    pub head_enqueued: Option<Instant>,
    /// Time of the last frame transmitted from the queue.
    pub last_tx: Instant,
    /// Time of the last PFC frame (XOFF or XON) for the queue's watched priorities.
    pub last_pfc_frame: Option<Instant>,
}

impl QueueObservation {
    /// Since when the storm condition has held, if it holds.
    #[must_use]
    pub fn storm_since(&self) -> Option<Instant> {
        let paused = self.paused_since?;
        let head = self.head_enqueued?;
        Some(paused.max(head).max(self.last_tx))
    }
}

/// A watchdog state change, for the event log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchdogTransition {
    /// The queue is now stormed and the action applies.
    Detected,
    /// The queue is back to normal.
    Restored,
}

/// Operational status of a watched queue, as SONiC's `PFC_WD_STATUS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueStatus {
    /// Normal.
    Operational,
    /// A storm was detected; the action is in force.
    Stormed,
}

/// The watchdog of one queue.
#[derive(Clone, Debug)]
pub struct QueueWatchdog {
    action: WatchdogAction,
    detection_ns: u64,
    restoration_ns: u64,
    stormed: bool,
}

impl QueueWatchdog {
    /// A watchdog taking `action` with the given times.
    #[must_use]
    pub fn new(action: WatchdogAction, detection_ns: u64, restoration_ns: u64) -> Self {
        Self {
            action,
            detection_ns,
            restoration_ns,
            stormed: false,
        }
    }

    /// The configured action.
    #[must_use]
    pub fn action(&self) -> WatchdogAction {
        self.action
    }

    /// Current status.
    #[must_use]
    pub fn status(&self) -> QueueStatus {
        if self.stormed {
            QueueStatus::Stormed
        } else {
            QueueStatus::Operational
        }
    }

    /// Evaluates the queue at a poll at `now`.
    pub fn poll(&mut self, now: Instant, obs: &QueueObservation) -> Option<WatchdogTransition> {
        if !self.stormed {
            let since = obs.storm_since()?;
            if now.saturating_nanos_since(since) >= self.detection_ns {
                self.stormed = true;
                return Some(WatchdogTransition::Detected);
            }
            return None;
        }
        let restore = match self.action {
            WatchdogAction::Alert => obs.storm_since().is_none(),
            WatchdogAction::Drop | WatchdogAction::Forward => match obs.last_pfc_frame {
                Some(last) => now.saturating_nanos_since(last) >= self.restoration_ns,
                None => true,
            },
        };
        if restore {
            self.stormed = false;
            return Some(WatchdogTransition::Restored);
        }
        None
    }
}

/// What the dataplane does with a queue, published by the egress side and read by the ingress
/// side (to drop arrivals of a stormed priority).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum QueueMitigation {
    /// Normal operation.
    None = 0,
    /// Received pauses are ignored.
    IgnorePause = 1,
    /// Received pauses are ignored, the queue's frames and the port's ingress frames of that
    /// priority are dropped.
    Drop = 2,
}

impl QueueMitigation {
    /// The mitigation an action applies while stormed.
    #[must_use]
    pub fn for_action(action: WatchdogAction) -> Self {
        match action {
            WatchdogAction::Drop => Self::Drop,
            WatchdogAction::Forward => Self::IgnorePause,
            WatchdogAction::Alert => Self::None,
        }
    }

    fn from_u8(v: u8) -> Self {
        match v {
            1 => Self::IgnorePause,
            2 => Self::Drop,
            _ => Self::None,
        }
    }
}

/// Per (port, queue) mitigation in force.
///
/// # Memory ordering (model-checked: `loom_checks::mitigation`)
///
/// One writer per slot (the egress side owning the port), readers on ingress sides, one byte per
/// slot, and nothing else is published with it: a reader acts on the value alone. So both sides
/// use relaxed accesses, and what a reader may rely on is coherence: it reads only mitigations
/// the egress side set, and never an older one after a newer one. How late it sees a change is
/// not an ordering question (no ordering makes a store visible sooner) and is harmless both
/// ways: a frame admitted just before the ingress side sees `Drop` is dropped by the egress
/// side at dequeue (it keeps its own copy of the mitigations as bits), and a frame dropped just
/// after a restoration is a `pfcwd_ingress` drop of a storm that was in force an instant before,
/// as with SONiC's asynchronous restoration.
#[derive(Debug)]
pub struct MitigationBoard {
    slots: Vec<[AtomicU8; crate::types::PRIORITY_COUNT]>,
}

impl MitigationBoard {
    /// A board for `ports` ports, nothing mitigated.
    #[must_use]
    pub fn new(ports: usize) -> Self {
        Self {
            slots: (0..ports).map(|_| Default::default()).collect(),
        }
    }

    /// Sets the mitigation of `(port, queue)`. Only the egress side owning the port may call.
    pub fn set(&self, port: usize, queue: usize, m: QueueMitigation) {
        // Relaxed: the value is all that is published (see the type's docs).
        self.slots[port][queue].store(m as u8, Ordering::Relaxed);
    }

    /// The mitigation of `(port, queue)`.
    #[inline]
    #[must_use]
    pub fn get(&self, port: usize, queue: usize) -> QueueMitigation {
        self.port(port).get(queue)
    }

    /// The mitigations of `port`'s queues (looked up once, read per queue).
    #[inline]
    #[must_use]
    pub fn port(&self, port: usize) -> PortMitigations<'_> {
        PortMitigations(&self.slots[port])
    }
}

/// One port's row of a [`MitigationBoard`]: each read is a load of the queue's slot, as
/// [`MitigationBoard::get`] does, without finding the port again.
#[derive(Clone, Copy, Debug)]
pub struct PortMitigations<'a>(&'a [AtomicU8; crate::types::PRIORITY_COUNT]);

impl PortMitigations<'_> {
    /// The mitigation of `queue`.
    #[inline]
    #[must_use]
    pub fn get(self, queue: usize) -> QueueMitigation {
        QueueMitigation::from_u8(
            // Relaxed: pairs with the relaxed store of `MitigationBoard::set` (type docs).
            self.0[queue % crate::types::PRIORITY_COUNT].load(Ordering::Relaxed),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Instant {
        Instant::from_millis(n)
    }

    fn stormy(since: u64) -> QueueObservation {
        QueueObservation {
            paused_since: Some(ms(since)),
            head_enqueued: Some(ms(since)),
            last_tx: ms(0),
            last_pfc_frame: Some(ms(since)),
        }
    }

    #[test]
    fn detects_at_the_first_poll_after_detection_time() {
        let mut w = QueueWatchdog::new(WatchdogAction::Drop, 200_000_000, 400_000_000);
        // Storm starts at 150 ms; polls every 100 ms.
        assert_eq!(w.poll(ms(200), &stormy(150)), None);
        assert_eq!(w.poll(ms(300), &stormy(150)), None);
        assert_eq!(
            w.poll(ms(400), &stormy(150)),
            Some(WatchdogTransition::Detected)
        );
        assert_eq!(w.status(), QueueStatus::Stormed);
    }

    #[test]
    fn paused_but_empty_is_not_a_storm() {
        let mut w = QueueWatchdog::new(WatchdogAction::Drop, 100_000_000, 100_000_000);
        let obs = QueueObservation {
            head_enqueued: None,
            ..stormy(0)
        };
        for t in (100..2000).step_by(100) {
            assert_eq!(w.poll(ms(t), &obs), None);
        }
    }

    #[test]
    fn transmitting_queue_is_not_a_storm() {
        let mut w = QueueWatchdog::new(WatchdogAction::Drop, 100_000_000, 100_000_000);
        for t in (100..2000).step_by(100) {
            // It sent a frame 50 ms before each poll.
            let obs = QueueObservation {
                last_tx: ms(t - 50),
                ..stormy(0)
            };
            assert_eq!(w.poll(ms(t), &obs), None);
        }
    }

    #[test]
    fn restores_after_restoration_time_without_pfc() {
        let mut w = QueueWatchdog::new(WatchdogAction::Forward, 100_000_000, 300_000_000);
        assert_eq!(
            w.poll(ms(100), &stormy(0)),
            Some(WatchdogTransition::Detected)
        );
        // Last PFC frame at 250 ms; no pause in force afterwards.
        let quiet = QueueObservation {
            paused_since: None,
            head_enqueued: None,
            last_tx: ms(260),
            last_pfc_frame: Some(ms(250)),
        };
        assert_eq!(w.poll(ms(500), &quiet), None);
        assert_eq!(w.poll(ms(600), &quiet), Some(WatchdogTransition::Restored));
    }

    #[test]
    fn alert_restores_when_the_condition_stops() {
        let mut w = QueueWatchdog::new(WatchdogAction::Alert, 100_000_000, 60_000_000_000);
        assert_eq!(
            w.poll(ms(100), &stormy(0)),
            Some(WatchdogTransition::Detected)
        );
        assert_eq!(w.poll(ms(200), &stormy(0)), None);
        let drained = QueueObservation {
            head_enqueued: None,
            ..stormy(0)
        };
        assert_eq!(
            w.poll(ms(300), &drained),
            Some(WatchdogTransition::Restored)
        );
    }

    #[test]
    fn mitigation_board_round_trip() {
        let b = MitigationBoard::new(2);
        assert_eq!(b.get(1, 3), QueueMitigation::None);
        b.set(1, 3, QueueMitigation::Drop);
        assert_eq!(b.get(1, 3), QueueMitigation::Drop);
        assert_eq!(b.get(0, 3), QueueMitigation::None);
        assert_eq!(
            QueueMitigation::for_action(WatchdogAction::Forward),
            QueueMitigation::IgnorePause
        );
    }
}
