//! Honouring received PFC (IEEE 802.1Qbb) and PAUSE (IEEE 802.3 Annex 31B) frames, as a NIC's
//! transmitter does.
//!
//! A PFC frame carries a class-enable vector and eight pause times in quanta; for each enabled
//! priority p the sender must not *start* a frame of priority p for `time[p] × 512` bit times at
//! the link speed (802.1Qbb clause 36.1.3.2 and 802.3 Annex 31D; one quantum = 512 bit times,
//! 802.3 Annex 31B.2). A time of 0 resumes at once (XON). A new frame restarts the timer with its
//! own value, even when that is shorter than what was left. An 802.3x PAUSE frame
//! (opcode 0x0001) does the same for the whole link, i.e. every priority here.
//!
//! The pause takes effect when the frame is handled (`now`). A frame whose transmission already
//! started is finished (802.3 Annex 31B.3.1); that is the caller's job: ask [`PauseState::is_paused`]
//! before starting a frame.
//!
//! Durations are rounded up to whole nanoseconds (e.g. one quantum at 10 Gb/s = 51.2 ns pauses
//! for 52 ns): a sender may stop a little longer than asked, never shorter.
//!
//! 802.1Qbb says PFC and PAUSE shall not both be enabled on a link. If both arrive anyway, each
//! priority has a single timer and the most recent frame that covers it sets it.

use core::fmt;

use crate::time::{Instant, NANOS_PER_SECOND};

/// Number of IEEE 802.1p priorities.
pub const PRIORITY_COUNT: usize = 8;

/// Bit times in one pause quantum (802.3 Annex 31B.2).
pub const BIT_TIMES_PER_QUANTUM: u64 = 512;

/// An IEEE 802.1p priority, 0..=7.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Priority(u8);

impl Priority {
    /// Every priority, in order.
    pub const ALL: [Self; PRIORITY_COUNT] = [
        Self(0),
        Self(1),
        Self(2),
        Self(3),
        Self(4),
        Self(5),
        Self(6),
        Self(7),
    ];

    /// Priority `n`, or `None` when `n > 7`.
    #[must_use]
    pub const fn new(n: u8) -> Option<Self> {
        if (n as usize) < PRIORITY_COUNT {
            Some(Self(n))
        } else {
            None
        }
    }

    /// The raw value, 0..=7.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The priority as an index into 8-entry arrays.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Priority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "prio{}", self.0)
    }
}

/// How long `quanta` pause quanta last on a link of `link_rate_bps`, in nanoseconds rounded up.
///
/// 0xFFFF quanta: 3,355,392 ns at 10 Gb/s, 335,540 ns at 100 Gb/s (`dcqcn-roce.md` §5.1).
#[must_use]
pub const fn quanta_to_nanos(quanta: u16, link_rate_bps: u64) -> u64 {
    if link_rate_bps == 0 {
        return u64::MAX;
    }
    // 65535 * 512 * 1e9 = 3.4e16 < 2^64.
    (quanta as u64 * BIT_TIMES_PER_QUANTUM * NANOS_PER_SECOND).div_ceil(link_rate_bps)
}

/// Why [`PauseState::new`] refused its link rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PauseError {
    /// The link rate is zero.
    ZeroLinkRate,
}

impl fmt::Display for PauseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroLinkRate => f.write_str("link rate must be non-zero"),
        }
    }
}

impl std::error::Error for PauseError {}

/// Counters of one priority. All are monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PriorityStats {
    /// PFC frames that enabled this priority, XOFF and XON alike (the SAI
    /// `SAI_PORT_STAT_PFC_x_RX_PKTS` meaning).
    pub pfc_frames_rx_total: u64,
    /// Of those, frames with a non-zero time (XOFF).
    pub pfc_xoff_frames_rx_total: u64,
    /// Of those, frames with time 0 (XON).
    pub pfc_xon_frames_rx_total: u64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct PriorityPause {
    /// End of the current or latest pause (exclusive): paused while `now < paused_until`.
    paused_until: Instant,
    /// Start of the current or latest pause episode (a maximal run of overlapping pauses).
    episode_start: Instant,
    /// Paused nanoseconds of the episodes before the current one.
    closed_episodes_ns: u64,
    stats: PriorityStats,
}

impl PriorityPause {
    fn apply(&mut self, now: Instant, duration_ns: u64) {
        if now >= self.paused_until {
            // The latest episode ended at `paused_until` <= now: close it and start a new one
            // (of zero length for an XON, which adds nothing).
            self.closed_episodes_ns = self
                .closed_episodes_ns
                .saturating_add(self.paused_until.saturating_nanos_since(self.episode_start));
            self.episode_start = now;
        }
        // Inside an episode the new frame only moves its end (possibly to `now`).
        self.paused_until = now.saturating_add_nanos(duration_ns);
    }

    fn paused_ns(&self, now: Instant) -> u64 {
        let open = self
            .paused_until
            .min(now)
            .saturating_nanos_since(self.episode_start);
        self.closed_episodes_ns.saturating_add(open)
    }
}

/// The per-priority pause state of one transmitting port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PauseState {
    link_rate_bps: u64,
    priorities: [PriorityPause; PRIORITY_COUNT],
    pause_frames_rx_total: u64,
    now_last: Instant,
}

impl PauseState {
    /// Nothing paused, on a link of `link_rate_bps` (the emulated link speed: it sets the length
    /// of a quantum).
    pub fn new(link_rate_bps: u64) -> Result<Self, PauseError> {
        if link_rate_bps == 0 {
            return Err(PauseError::ZeroLinkRate);
        }
        Ok(Self {
            link_rate_bps,
            priorities: [PriorityPause::default(); PRIORITY_COUNT],
            pause_frames_rx_total: 0,
            now_last: Instant::ZERO,
        })
    }

    /// The link rate quanta are measured against.
    #[must_use]
    pub fn link_rate_bps(&self) -> u64 {
        self.link_rate_bps
    }

    /// A PFC frame arrived: for every priority whose bit is set in `class_enable`, pause it for
    /// `quanta[p]` quanta from `now` (0: resume now). Times of disabled priorities are ignored,
    /// as 802.1Qbb requires.
    pub fn handle_pfc(&mut self, now: Instant, class_enable: u8, quanta: [u16; PRIORITY_COUNT]) {
        let now = self.clamp_now(now);
        for (index, (prio, &quanta)) in self.priorities.iter_mut().zip(&quanta).enumerate() {
            if class_enable & (1 << index) == 0 {
                continue;
            }
            prio.apply(now, quanta_to_nanos(quanta, self.link_rate_bps));
            let stats = &mut prio.stats;
            stats.pfc_frames_rx_total += 1;
            if quanta == 0 {
                stats.pfc_xon_frames_rx_total += 1;
            } else {
                stats.pfc_xoff_frames_rx_total += 1;
            }
        }
    }

    /// An 802.3x PAUSE frame arrived: pause every priority for `quanta` quanta (0: resume now).
    pub fn handle_pause(&mut self, now: Instant, quanta: u16) {
        let now = self.clamp_now(now);
        let duration_ns = quanta_to_nanos(quanta, self.link_rate_bps);
        for prio in &mut self.priorities {
            prio.apply(now, duration_ns);
        }
        self.pause_frames_rx_total += 1;
    }

    /// Whether a frame of priority `prio` must not start at `now`.
    #[must_use]
    pub fn is_paused(&self, now: Instant, prio: Priority) -> bool {
        now < self.priorities[prio.index()].paused_until
    }

    /// When the current (or latest) pause of `prio` ends; at or before `now` means not paused.
    #[must_use]
    pub fn resume_time(&self, prio: Priority) -> Instant {
        self.priorities[prio.index()].paused_until
    }

    /// Total time `prio` has been paused up to `now`, in nanoseconds: the exact length of the
    /// union of all its pause intervals (a refresh while paused is not counted twice).
    #[must_use]
    pub fn paused_ns(&self, prio: Priority, now: Instant) -> u64 {
        self.priorities[prio.index()].paused_ns(now)
    }

    /// The earliest moment after `now` at which a paused priority resumes, if any is paused.
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.priorities
            .iter()
            .map(|p| p.paused_until)
            .filter(|&until| until > now)
            .min()
    }

    /// The counters of `prio`.
    #[must_use]
    pub fn stats(&self, prio: Priority) -> &PriorityStats {
        &self.priorities[prio.index()].stats
    }

    /// 802.3x PAUSE frames received.
    #[must_use]
    pub fn pause_frames_rx_total(&self) -> u64 {
        self.pause_frames_rx_total
    }

    /// Time never runs backwards here: an earlier `now` is taken as the latest one seen.
    fn clamp_now(&mut self, now: Instant) -> Instant {
        self.now_last = self.now_last.max(now);
        self.now_last
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GBPS: u64 = 1_000_000_000;

    fn t(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    fn prio(n: u8) -> Priority {
        Priority::new(n).unwrap()
    }

    fn pfc_one(p: u8, quanta: u16) -> (u8, [u16; 8]) {
        let mut times = [0u16; 8];
        times[usize::from(p)] = quanta;
        (1 << p, times)
    }

    #[test]
    fn quantum_lengths() {
        assert_eq!(quanta_to_nanos(1, GBPS), 512);
        assert_eq!(quanta_to_nanos(1, 10 * GBPS), 52, "51.2 ns rounded up");
        assert_eq!(quanta_to_nanos(5, 10 * GBPS), 256);
        assert_eq!(quanta_to_nanos(0xFFFF, 10 * GBPS), 3_355_392);
        assert_eq!(quanta_to_nanos(100, 100 * GBPS), 512);
        assert_eq!(
            quanta_to_nanos(0xFFFF, 100 * GBPS),
            335_540,
            "335,539.2 rounded up"
        );
        assert_eq!(quanta_to_nanos(0, 100 * GBPS), 0);
        assert_eq!(quanta_to_nanos(1, 0), u64::MAX);
        assert!(Priority::new(8).is_none());
        assert_eq!(PauseState::new(0).unwrap_err(), PauseError::ZeroLinkRate);
    }

    #[test]
    fn pfc_pause_expires_exactly_at_1g() {
        let mut state = PauseState::new(GBPS).unwrap();
        let (enable, times) = pfc_one(3, 1000);
        state.handle_pfc(t(1_000), enable, times);
        // 1000 quanta * 512 bit times at 1 Gb/s = 512,000 ns.
        assert_eq!(state.resume_time(prio(3)), t(513_000));
        assert!(state.is_paused(t(1_000), prio(3)));
        assert!(state.is_paused(t(512_999), prio(3)));
        assert!(!state.is_paused(t(513_000), prio(3)));
        for other in [0, 1, 2, 4, 5, 6, 7] {
            assert!(!state.is_paused(t(2_000), prio(other)), "prio {other}");
        }
        assert_eq!(state.poll_timeout(t(2_000)), Some(t(513_000)));
        assert_eq!(state.poll_timeout(t(513_000)), None);
        assert_eq!(state.paused_ns(prio(3), t(300_000)), 299_000);
        assert_eq!(state.paused_ns(prio(3), t(600_000)), 512_000);
        assert_eq!(state.stats(prio(3)).pfc_frames_rx_total, 1);
        assert_eq!(state.stats(prio(2)).pfc_frames_rx_total, 0);
    }

    #[test]
    fn refresh_restarts_and_xon_resumes_at_10g() {
        let mut state = PauseState::new(10 * GBPS).unwrap();
        let (enable, times) = pfc_one(5, 0xFFFF);
        state.handle_pfc(t(0), enable, times);
        assert_eq!(state.resume_time(prio(5)), t(3_355_392));
        // Refresh with a shorter time: the timer restarts from the new frame, here shortening it.
        let (enable, times) = pfc_one(5, 10);
        state.handle_pfc(t(100_000), enable, times);
        assert_eq!(state.resume_time(prio(5)), t(100_512));
        assert!(!state.is_paused(t(100_512), prio(5)));
        // A new pause, then an XON.
        let (enable, times) = pfc_one(5, 1_000);
        state.handle_pfc(t(200_000), enable, times);
        assert!(state.is_paused(t(200_001), prio(5)));
        let (enable, times) = pfc_one(5, 0);
        state.handle_pfc(t(201_000), enable, times);
        assert!(!state.is_paused(t(201_000), prio(5)));
        // Union: [0, 100512) + [200000, 201000).
        assert_eq!(state.paused_ns(prio(5), t(10_000_000)), 100_512 + 1_000);
        let stats = state.stats(prio(5));
        assert_eq!(stats.pfc_frames_rx_total, 4);
        assert_eq!(
            (
                stats.pfc_xoff_frames_rx_total,
                stats.pfc_xon_frames_rx_total
            ),
            (3, 1)
        );
    }

    #[test]
    fn class_enable_vector_selects_priorities_at_100g() {
        let mut state = PauseState::new(100 * GBPS).unwrap();
        // Times for priorities 1 and 2 are set, but only 2 and 6 are enabled.
        let times = [0, 500, 100, 0, 0, 0, 0xFFFF, 7];
        state.handle_pfc(t(10), 0b0100_0100, times);
        assert!(
            !state.is_paused(t(11), prio(1)),
            "time ignored without its enable bit"
        );
        assert!(!state.is_paused(t(11), prio(7)));
        assert_eq!(state.resume_time(prio(2)), t(10 + 512));
        assert_eq!(state.resume_time(prio(6)), t(10 + 335_540));
        assert_eq!(state.stats(prio(1)).pfc_frames_rx_total, 0);
        assert_eq!(state.stats(prio(2)).pfc_frames_rx_total, 1);
        assert_eq!(state.poll_timeout(t(11)), Some(t(522)));
        assert_eq!(state.poll_timeout(t(522)), Some(t(335_550)));
    }

    #[test]
    fn link_pause_covers_every_priority() {
        let mut state = PauseState::new(10 * GBPS).unwrap();
        state.handle_pause(t(1_000), 5);
        for p in Priority::ALL {
            assert!(state.is_paused(t(1_255), p));
            assert!(!state.is_paused(t(1_256), p));
            assert_eq!(state.paused_ns(p, t(5_000)), 256);
        }
        state.handle_pause(t(2_000), 0xFFFF);
        state.handle_pause(t(3_000), 0);
        assert!(!state.is_paused(t(3_000), prio(0)));
        assert_eq!(state.pause_frames_rx_total(), 3);
        assert_eq!(state.stats(prio(0)).pfc_frames_rx_total, 0);
        assert_eq!(state.paused_ns(prio(7), t(5_000)), 256 + 1_000);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let mut state = PauseState::new(GBPS).unwrap();
        state.handle_pause(t(10_000), 1);
        state.handle_pause(t(5_000), 1); // late report: treated as at 10,000
        assert_eq!(state.resume_time(prio(0)), t(10_512));
        assert_eq!(state.paused_ns(prio(0), t(20_000)), 512);
    }

    proptest! {
        /// The paused time is the exact length of the union of pause intervals, checked against
        /// an independent reference: each frame for p rules p from its arrival until the next
        /// frame for p, paused for the first `duration` of that span.
        #[test]
        fn paused_time_is_the_interval_union(
            link in prop::sample::select(vec![GBPS, 10 * GBPS, 25 * GBPS, 100 * GBPS]),
            frames in prop::collection::vec(
                (0u64..400_000, any::<u8>(), prop::array::uniform8(prop_oneof![Just(0u16), 1u16..3_000]), any::<bool>()),
                1..40,
            ),
            probe in 0u64..20_000_000,
        ) {
            let mut state = PauseState::new(link).unwrap();
            let mut now = 0u64;
            // Per priority: (arrival, duration) of each frame that covered it.
            let mut history: [Vec<(u64, u64)>; 8] = Default::default();
            for &(dt, enable, times, link_level) in &frames {
                now += dt;
                if link_level {
                    state.handle_pause(t(now), times[0]);
                } else {
                    state.handle_pfc(t(now), enable, times);
                }
                for (p, spans) in history.iter_mut().enumerate() {
                    if link_level {
                        spans.push((now, quanta_to_nanos(times[0], link)));
                    } else if enable & (1 << p) != 0 {
                        spans.push((now, quanta_to_nanos(times[p], link)));
                    }
                }
            }
            let end = now + probe;
            for p in Priority::ALL {
                let spans = &history[p.index()];
                let mut expected = 0;
                let mut paused_at_end = false;
                for (i, &(start, duration)) in spans.iter().enumerate() {
                    let ruled_until = spans.get(i + 1).map_or(end, |next| next.0);
                    expected += (start + duration).min(ruled_until).min(end) - start.min(end);
                    if i + 1 == spans.len() {
                        paused_at_end = end < start + duration;
                    }
                }
                prop_assert_eq!(state.paused_ns(p, t(end)), expected, "{}", p);
                prop_assert_eq!(state.is_paused(t(end), p), paused_at_end);
            }
        }
    }
}
