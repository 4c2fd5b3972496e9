//! IEEE 802.1Qbb priority-based flow control: pausing our egress when a peer asks, and asking a
//! peer to pause when our ingress buffers fill.
//!
//! Two halves meet in a [`PfcBoard`]:
//!
//! * the **ingress side** of port P receives PFC frames on P and records, per priority, until
//!   when P's egress must hold that priority ([`PfcBoard::handle_pause`]); it also publishes
//!   which priorities it wants the peer on P to pause ([`PfcBoard::set_wanted_xoff`]);
//! * the **egress side** of port P reads the pause deadlines to skip paused queues, and turns the
//!   wanted set into PFC frames with [`PfcGenerator`] (XOFF on a change, refreshed before the pause
//!   expires, XON with zero quanta when released).

use crate::sync::{fence, load_own, spin_loop, AtomicU64, AtomicU8, Ordering};
use crate::time::Instant;
use crate::types::{Priority, PRIORITY_COUNT};

/// Per (port, priority) receive-side pause state, written by the ingress side of the port only.
///
/// # Memory ordering (model-checked: `loom_checks::pause_board`)
///
/// `until`, `mark`, `accumulated`, `episode_start` and `last_frame` change together; a reader
/// that needs more than one of them ([`PfcBoard::view`]: the watchdog, the control plane) uses a
/// sequence lock (Boehm, "Can seqlocks get along with programming language memory models?",
/// 2012, fig. 6). Every field is an atomic accessed relaxed, so a torn read is detected and
/// retried, never undefined. The writer makes `seq` odd, then a release fence, then the field
/// stores, then `seq` even with a release store. The reader loads `seq` with acquire, the fields,
/// then an acquire fence, then `seq` again, and keeps the fields only if both loads of `seq`
/// returned the same even value:
///
/// * the acquire load of `seq` pairs with the writer's closing release store: fields read after
///   an even `seq` = 2k are those of update k or newer, never older;
/// * if a field read returned a store of update k+1, the writer's release fence before that
///   store synchronises with the reader's acquire fence, so the second load of `seq` sees at
///   least the odd 2k+1 and the read is retried.
///
/// Dropping any of the three orderings lets loom find a torn view (`docs/memory-ordering.md`).
/// The scheduler's per-poll check needs only `until` ([`PfcBoard::paused_until`]): one relaxed
/// word, see there.
#[derive(Debug, Default)]
struct PauseSlot {
    /// Odd while the writer updates the fields below.
    seq: AtomicU64,
    /// The priority is paused while `now < until` (ns).
    until: AtomicU64,
    /// Paused time accumulated up to `mark` (ns).
    accumulated: AtomicU64,
    /// Time up to which `accumulated` is counted (ns).
    mark: AtomicU64,
    /// Start of the current uninterrupted pause episode (ns).
    episode_start: AtomicU64,
    /// Time of the last PFC frame with this priority's enable bit, XON included (ns); 0: none.
    last_frame: AtomicU64,
}

/// A consistent read of one priority's receive-side pause state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PauseView {
    /// Paused while `now < until`.
    pub until: Instant,
    /// Start of the current (or last) uninterrupted pause episode.
    pub episode_start: Instant,
    /// Time of the last PFC frame for this priority, XON included; `None` if never.
    pub last_frame: Option<Instant>,
    accumulated_ns: u64,
    mark: Instant,
}

impl PauseView {
    /// Whether the priority is paused at `now`.
    #[must_use]
    pub fn is_paused(&self, now: Instant) -> bool {
        now < self.until
    }

    /// Total time the priority has spent paused up to `now`, ns.
    #[must_use]
    pub fn paused_ns(&self, now: Instant) -> u64 {
        let end = self.until.min(now);
        self.accumulated_ns + end.saturating_nanos_since(self.mark)
    }
}

/// Pause state shared by the ingress and egress sides of every port.
#[derive(Debug)]
pub struct PfcBoard {
    /// Per port: one slot per priority, then one for IEEE 802.3x PAUSE (the whole port).
    slots: Vec<[PauseSlot; PRIORITY_COUNT + 1]>,
    /// Per port: priorities whose PGs are in XOFF (bit i = priority i); written by the port's
    /// ingress side, read by its egress side.
    wanted_xoff: Vec<AtomicU8>,
}

impl PfcBoard {
    /// A board for `ports` ports, nothing paused.
    #[must_use]
    pub fn new(ports: usize) -> Self {
        Self {
            slots: (0..ports).map(|_| Default::default()).collect(),
            wanted_xoff: (0..ports).map(|_| AtomicU8::new(0)).collect(),
        }
    }

    /// Records a received pause for `prio` on `port` lasting `duration_ns` from `now`
    /// (0 resumes at once). A new frame restarts the timer (802.1Qbb 36.1.3.3; 802.3 31B.3.7).
    /// Only the ingress side of `port` may call this.
    pub fn handle_pause(&self, port: usize, prio: Priority, now: Instant, duration_ns: u64) {
        self.record(port, prio.index(), now, duration_ns);
    }

    /// Records a received IEEE 802.3x PAUSE on `port` (every priority), like
    /// [`PfcBoard::handle_pause`].
    pub fn handle_port_pause(&self, port: usize, now: Instant, duration_ns: u64) {
        self.record(port, PRIORITY_COUNT, now, duration_ns);
    }

    fn record(&self, port: usize, index: usize, now: Instant, duration_ns: u64) {
        let slot = &self.slots[port][index];
        let now_ns = now.as_nanos();
        // This side is the slot's only writer: it reads its own last values back.
        let until = load_own(&slot.until);
        let mark = load_own(&slot.mark);
        let mut accumulated = load_own(&slot.accumulated);
        // Count the paused time up to now (or up to the expiry, if it already expired).
        accumulated += until.min(now_ns).saturating_sub(mark);
        let still_paused = now_ns < until;
        let new_until = now_ns.saturating_add(duration_ns);
        // Writer side of the sequence lock (see `PauseSlot`): odd while fields are inconsistent.
        let seq = load_own(&slot.seq);
        slot.seq.store(seq + 1, Ordering::Relaxed);
        // Release fence: a reader whose field load returns one of the stores below, and that
        // then issues its acquire fence, also sees the odd `seq` above and retries.
        fence(Ordering::Release);
        slot.accumulated.store(accumulated, Ordering::Relaxed);
        slot.mark.store(now_ns, Ordering::Relaxed);
        if !still_paused && duration_ns > 0 {
            slot.episode_start.store(now_ns, Ordering::Relaxed);
        }
        slot.until.store(new_until, Ordering::Relaxed);
        slot.last_frame.store(now_ns.max(1), Ordering::Relaxed);
        // Release: a reader that acquires this even `seq` sees every field store above.
        slot.seq.store(seq + 2, Ordering::Release);
    }

    /// The pause deadline of `prio` on `port` (cheap; for the egress scheduler).
    #[inline]
    #[must_use]
    pub fn paused_until(&self, port: usize, prio: Priority) -> Instant {
        self.until(port, prio.index())
    }

    /// The 802.3x pause deadline of `port`.
    #[inline]
    #[must_use]
    pub fn port_paused_until(&self, port: usize) -> Instant {
        self.until(port, PRIORITY_COUNT)
    }

    #[inline]
    fn until(&self, port: usize, index: usize) -> Instant {
        // Relaxed: the scheduler needs this one word and reads nothing else of the slot, so
        // there is nothing for an acquire to order. Coherence gives what it relies on: a
        // deadline the ingress side recorded, never an older one after a newer one. Seeing a
        // new pause a moment late is part of the response time the peer's headroom is sized
        // for (SONiC's `peer_response_time`); no ordering makes a store visible sooner.
        Instant::from_nanos(self.slots[port][index].until.load(Ordering::Relaxed))
    }

    /// A consistent read of the whole pause state of `prio` on `port`.
    #[must_use]
    pub fn view(&self, port: usize, prio: Priority) -> PauseView {
        self.view_index(port, prio.index())
    }

    /// A consistent read of the 802.3x pause state of `port`.
    #[must_use]
    pub fn port_view(&self, port: usize) -> PauseView {
        self.view_index(port, PRIORITY_COUNT)
    }

    fn view_index(&self, port: usize, index: usize) -> PauseView {
        let slot = &self.slots[port][index];
        loop {
            // Acquire: pairs with the writer's closing release store (see `PauseSlot`).
            let before = slot.seq.load(Ordering::Acquire);
            if before % 2 == 1 {
                spin_loop();
                continue;
            }
            let view = PauseView {
                until: Instant::from_nanos(slot.until.load(Ordering::Relaxed)),
                episode_start: Instant::from_nanos(slot.episode_start.load(Ordering::Relaxed)),
                last_frame: match slot.last_frame.load(Ordering::Relaxed) {
                    0 => None,
                    t => Some(Instant::from_nanos(t)),
                },
                accumulated_ns: slot.accumulated.load(Ordering::Relaxed),
                mark: Instant::from_nanos(slot.mark.load(Ordering::Relaxed)),
            };
            // Acquire fence: pairs with the writer's release fence if any field load above
            // returned a store of an update that began after `before` (see `PauseSlot`).
            fence(Ordering::Acquire);
            if slot.seq.load(Ordering::Relaxed) == before {
                return view;
            }
            spin_loop();
        }
    }

    /// Publishes the priorities the ingress side of `port` wants the peer to pause.
    ///
    /// Memory ordering (model-checked: `loom_checks::wanted_xoff`): relaxed on both sides. The
    /// set is one byte with one writer (the port's ingress side), and the egress side acts on the
    /// set alone: it reads none of the ingress side's accounting, so there is nothing for a
    /// release/acquire pair to order. What the egress side's [`PfcGenerator`] relies on is
    /// coherence: it sees only sets the ingress side published, never an older one after a newer
    /// one, so the frames it sends follow the wanted sets in order (possibly skipping one that
    /// was replaced before it looked, as with any poll).
    pub fn set_wanted_xoff(&self, port: usize, priorities: u8) {
        self.wanted_xoff[port].store(priorities, Ordering::Relaxed);
    }

    /// The priorities the ingress side of `port` wants paused (see
    /// [`PfcBoard::set_wanted_xoff`] for the ordering).
    #[must_use]
    pub fn wanted_xoff(&self, port: usize) -> u8 {
        self.wanted_xoff[port].load(Ordering::Relaxed)
    }
}

/// A PFC frame to send: bit i of `class_enable` set means `quanta[i]` applies to priority i.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcDecision {
    /// Priorities the frame speaks for.
    pub class_enable: u8,
    /// Pause quanta per priority (0 = XON).
    pub quanta: [u16; PRIORITY_COUNT],
}

/// Turns a port's wanted-XOFF set into PFC frames (egress side).
///
/// Every frame carries every priority currently held (with the port's quanta) and every
/// priority just released (with 0 quanta), so priorities that change in the same instant share
/// one frame and a transition also refreshes the others. While any priority is held, a frame is
/// repeated every `refresh_ns` (by default half the pause time, so that the peer never resumes
/// on its own).
#[derive(Debug)]
pub struct PfcGenerator {
    quanta: u16,
    refresh_ns: u64,
    enabled: u8,
    sent_xoff: u8,
    refresh_at: Instant,
}

impl PfcGenerator {
    /// A generator for a port with PFC enabled on `enabled` priorities.
    #[must_use]
    pub fn new(enabled: u8, quanta: u16, refresh_ns: u64) -> Self {
        Self {
            quanta,
            refresh_ns: refresh_ns.max(1),
            enabled,
            sent_xoff: 0,
            refresh_at: Instant::MAX,
        }
    }

    /// Whether [`PfcGenerator::poll`] would produce a frame now.
    #[must_use]
    pub fn is_due(&self, now: Instant, wanted: u8) -> bool {
        let wanted = wanted & self.enabled;
        wanted != self.sent_xoff || (wanted != 0 && now >= self.refresh_at)
    }

    /// The frame to send now, if any, given the priorities the ingress side wants paused.
    pub fn poll(&mut self, now: Instant, wanted: u8) -> Option<PfcDecision> {
        let wanted = wanted & self.enabled;
        let released = self.sent_xoff & !wanted;
        let changed = wanted != self.sent_xoff;
        let refresh_due = wanted != 0 && now >= self.refresh_at;
        if !changed && !refresh_due {
            return None;
        }
        let mut quanta = [0u16; PRIORITY_COUNT];
        for (i, q) in quanta.iter_mut().enumerate() {
            if wanted & (1 << i) != 0 {
                *q = self.quanta;
            }
        }
        self.sent_xoff = wanted;
        self.refresh_at = if wanted != 0 {
            now.saturating_add_nanos(self.refresh_ns)
        } else {
            Instant::MAX
        };
        Some(PfcDecision {
            class_enable: wanted | released,
            quanta,
        })
    }

    /// When the next refresh is due (`Instant::MAX` when nothing is held).
    #[must_use]
    pub fn poll_timeout(&self) -> Instant {
        self.refresh_at
    }

    /// Priorities the peer was last told to pause.
    #[must_use]
    pub fn sent_xoff(&self) -> u8 {
        self.sent_xoff
    }

    /// Changes the enabled set (runtime `pfc_enable` change). A priority leaving the set is
    /// released with an XON on the next poll.
    pub fn set_enabled(&mut self, enabled: u8) {
        self.enabled = enabled;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P3: Priority = Priority::from_low_bits(3);

    #[test]
    fn pause_restarts_and_resumes() {
        let b = PfcBoard::new(1);
        b.handle_pause(0, P3, Instant::from_micros(10), 1000);
        assert_eq!(b.paused_until(0, P3), Instant::from_nanos(11_000));
        // A new frame restarts the timer from its arrival.
        b.handle_pause(
            0,
            P3,
            Instant::from_micros(10) + core::time::Duration::from_nanos(500),
            1000,
        );
        assert_eq!(b.paused_until(0, P3), Instant::from_nanos(11_500));
        let v = b.view(0, P3);
        assert_eq!(v.episode_start, Instant::from_micros(10));
        // Quanta 0 resumes at once.
        b.handle_pause(0, P3, Instant::from_nanos(10_700), 0);
        let v = b.view(0, P3);
        assert!(!v.is_paused(Instant::from_nanos(10_700)));
        assert_eq!(v.paused_ns(Instant::from_micros(100)), 700);
        assert_eq!(v.last_frame, Some(Instant::from_nanos(10_700)));
    }

    #[test]
    fn paused_time_is_the_union_of_intervals() {
        let b = PfcBoard::new(1);
        b.handle_pause(0, P3, Instant::from_nanos(1_000), 100); // paused 1000..1100
        b.handle_pause(0, P3, Instant::from_nanos(2_000), 300); // paused 2000..2300, new episode
        let v = b.view(0, P3);
        assert_eq!(v.episode_start, Instant::from_nanos(2_000));
        assert_eq!(v.paused_ns(Instant::from_nanos(2_100)), 200);
        assert_eq!(v.paused_ns(Instant::from_nanos(9_000)), 400);
        assert!(b.view(0, Priority::from_low_bits(4)).last_frame.is_none());
    }

    #[test]
    fn generator_xoff_refresh_xon() {
        let enabled = 0b0001_1000;
        let mut g = PfcGenerator::new(enabled, 0xFFFF, 1_000);
        let t0 = Instant::from_micros(1);
        assert_eq!(g.poll(t0, 0), None);
        let f = g.poll(t0, 0b1000).unwrap();
        assert_eq!(f.class_enable, 0b1000);
        assert_eq!(f.quanta[3], 0xFFFF);
        assert_eq!(g.poll(t0, 0b1000), None);
        assert_eq!(g.poll_timeout(), t0.saturating_add_nanos(1_000));
        assert_eq!(g.poll(t0.saturating_add_nanos(999), 0b1000), None);
        let r = g.poll(t0.saturating_add_nanos(1_000), 0b1000).unwrap();
        assert_eq!(r.class_enable, 0b1000);
        // Priority 4 joins: one frame for both.
        let both = g.poll(t0.saturating_add_nanos(1_200), 0b1_1000).unwrap();
        assert_eq!(both.class_enable, 0b1_1000);
        assert_eq!((both.quanta[3], both.quanta[4]), (0xFFFF, 0xFFFF));
        // Priority 3 released: XON for 3 rides with the refresh of 4.
        let x = g.poll(t0.saturating_add_nanos(1_300), 0b1_0000).unwrap();
        assert_eq!(x.class_enable, 0b1_1000);
        assert_eq!((x.quanta[3], x.quanta[4]), (0, 0xFFFF));
        let x = g.poll(t0.saturating_add_nanos(1_400), 0).unwrap();
        assert_eq!(x.class_enable, 0b1_0000);
        assert_eq!(x.quanta[4], 0);
        assert_eq!(g.poll_timeout(), Instant::MAX);
        assert_eq!(g.poll(Instant::from_millis(10), 0), None);
        // Priorities outside pfc_enable never generate PFC.
        assert_eq!(g.poll(Instant::from_millis(10), 0b0000_0001), None);
    }
}
