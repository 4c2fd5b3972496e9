//! Ideal full-duplex links: a bit rate, a fixed propagation delay, no loss, no corruption.
//!
//! Each direction is a [`Channel`] that carries one frame at a time. A frame put on a channel
//! at `t` occupies it for its wire time (frame + FCS + preamble + inter-frame gap, IEEE 802.3
//! clauses 3.1 and 4.4.2, the same footprint the core's shaper charges) and arrives whole at
//! the far end when its last bit does: `t + wire time + propagation delay`. A receiver acts on
//! a frame only once it has all of it (store and forward, and PFC acted on at the end of the
//! frame, as 802.1Qbb 36.1.3.3 allows).

use crate::Endpoint;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::sched::wire_bytes;
use headroom_core::time::Instant;
use std::collections::VecDeque;

/// Index of a link in its [`crate::Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(pub usize);

/// A link's physical properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkParams {
    /// Bit rate of each direction, bits per second (must equal the speed of a switch port it
    /// connects: the port times pause quanta and shapes at its speed).
    pub rate_bps: u64,
    /// One-way propagation delay, ns (about 5 ns per metre of fibre or copper).
    pub propagation_ns: u64,
}

impl LinkParams {
    /// A link of `rate_bps` with `propagation_ns` of delay.
    #[must_use]
    pub const fn new(rate_bps: u64, propagation_ns: u64) -> Self {
        Self {
            rate_bps,
            propagation_ns,
        }
    }
}

/// Time a frame of `len` bytes (without FCS) occupies a link of `rate_bps`, ns, rounded up.
#[must_use]
pub fn wire_time_ns(len: usize, rate_bps: u64) -> u64 {
    let bytes = wire_bytes(u32::try_from(len).unwrap_or(u32::MAX));
    let ns = (u128::from(bytes) * 8 * 1_000_000_000).div_ceil(u128::from(rate_bps.max(1)));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// Most PFC changes a channel keeps ([`Channel::pfc_changes`]); later ones are counted in
/// [`ChannelStats::pfc_changes_lost`].
pub const MAX_PFC_CHANGES: usize = 1 << 20;

/// A priority's pause request changing on a channel: the transmitter sent a PFC frame that
/// asks the far end to stop (XOFF: quanta > 0) or to resume (XON: quanta 0) a priority it had
/// not asked that of before (IEEE 802.1Qbb 36.1.3). Refreshes of a standing XOFF are not
/// changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcChange {
    /// When the PFC frame started on the wire.
    pub at: Instant,
    /// Priority 0..=7.
    pub priority: u8,
    /// XOFF (`true`) or XON.
    pub xoff: bool,
}

/// What one direction of a link carried.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChannelStats {
    /// Frames other than MAC Control frames.
    pub data_frames: u64,
    /// Bytes of those frames (without FCS).
    pub data_bytes: u64,
    /// MAC Control frames (PFC, PAUSE).
    pub control_frames: u64,
    /// When the last data frame started.
    pub last_data_start: Option<Instant>,
    /// When the last MAC Control frame started.
    pub last_control_start: Option<Instant>,
    /// PFC frames (XON included).
    pub pfc_frames: u64,
    /// PFC changes not kept beyond [`MAX_PFC_CHANGES`].
    pub pfc_changes_lost: u64,
}

/// One direction of a link.
#[derive(Debug, Default)]
pub struct Channel {
    /// The transmitter is busy until then.
    pub(crate) busy_until: Instant,
    /// Frames on the wire, with their arrival times (in order: one frame at a time, constant
    /// delay).
    pub(crate) in_flight: VecDeque<(Instant, HeapFrame)>,
    pub(crate) stats: ChannelStats,
    /// Priorities the transmitter currently asks the far end to pause (bit p).
    pfc_asserted: u8,
    pfc_changes: Vec<PfcChange>,
}

impl Channel {
    /// Records the XOFF/XON changes a PFC frame sent at `now` makes.
    fn observe_pfc(&mut self, now: Instant, data: &[u8]) {
        use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
        let Ok(MacControlRepr::Pfc(pfc)) =
            MacControlFrame::new_checked(data).and_then(|f| MacControlRepr::parse(&f))
        else {
            return;
        };
        self.stats.pfc_frames += 1;
        for priority in 0..8u8 {
            let Some(quanta) = pfc.quanta_for(priority) else {
                continue;
            };
            let xoff = quanta > 0;
            let bit = 1u8 << priority;
            if xoff == (self.pfc_asserted & bit != 0) {
                continue;
            }
            self.pfc_asserted ^= bit;
            if self.pfc_changes.len() < MAX_PFC_CHANGES {
                self.pfc_changes.push(PfcChange {
                    at: now,
                    priority,
                    xoff,
                });
            } else {
                self.stats.pfc_changes_lost += 1;
            }
        }
    }

    /// Every XOFF/XON change the transmitter made, in time order.
    #[must_use]
    pub fn pfc_changes(&self) -> &[PfcChange] {
        &self.pfc_changes
    }

    /// Priorities the transmitter asks the far end to pause now (bit p), as far as its PFC
    /// frames say (a pause it never cancels expires at the far end on its own).
    #[must_use]
    pub fn pfc_asserted(&self) -> u8 {
        self.pfc_asserted
    }

    /// Puts `frame` on the wire at `now`.
    pub(crate) fn transmit(&mut self, now: Instant, frame: HeapFrame, params: &LinkParams) {
        debug_assert!(now >= self.busy_until, "one frame at a time");
        let end = now.saturating_add_nanos(wire_time_ns(frame.len(), params.rate_bps));
        self.busy_until = end;
        let d = frame.data();
        let control = d.len() >= 14 && d[12..14] == [0x88, 0x08];
        if control {
            self.stats.control_frames += 1;
            self.stats.last_control_start = Some(now);
            self.observe_pfc(now, d);
        } else {
            self.stats.data_frames += 1;
            self.stats.data_bytes += d.len() as u64;
            self.stats.last_data_start = Some(now);
        }
        self.in_flight
            .push_back((end.saturating_add_nanos(params.propagation_ns), frame));
    }

    /// Whether the transmitter can start a frame at `now`.
    pub(crate) fn is_free(&self, now: Instant) -> bool {
        now >= self.busy_until
    }

    /// Arrival time of the next frame on the wire.
    pub(crate) fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.front().map(|(t, _)| *t)
    }

    /// Data frames on the wire (sent, not yet received).
    #[must_use]
    pub fn data_frames_in_flight(&self) -> usize {
        self.in_flight
            .iter()
            .filter(|(_, f)| f.data().get(12..14) != Some(&[0x88, 0x08]))
            .count()
    }

    /// What the channel carried.
    #[must_use]
    pub fn stats(&self) -> &ChannelStats {
        &self.stats
    }
}

/// A full-duplex link between two endpoints.
#[derive(Debug)]
pub struct Link {
    pub(crate) params: LinkParams,
    pub(crate) ends: [Endpoint; 2],
    /// `dirs[s]` is transmitted by `ends[s]` and received by `ends[1 - s]`.
    pub(crate) dirs: [Channel; 2],
}

impl Link {
    /// The link's properties.
    #[must_use]
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// The two endpoints, in the order given to [`crate::Sim::connect`].
    #[must_use]
    pub fn ends(&self) -> [Endpoint; 2] {
        self.ends
    }

    /// The channel transmitted by `end` (which must be one of [`Link::ends`]).
    #[must_use]
    pub fn channel_from(&self, end: Endpoint) -> Option<&Channel> {
        self.ends
            .iter()
            .position(|e| *e == end)
            .map(|s| &self.dirs[s])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_time_counts_preamble_fcs_and_gap() {
        // 1000 bytes + 24 → 8192 bits → 8192 ns at 1 Gb/s.
        assert_eq!(wire_time_ns(1000, 1_000_000_000), 8192);
        // Short frames are padded to 60 bytes: 84 bytes → 672 ns at 1 Gb/s, 67.2 → 68 at 10 Gb/s.
        assert_eq!(wire_time_ns(20, 1_000_000_000), 672);
        assert_eq!(wire_time_ns(60, 10_000_000_000), 68);
    }

    #[test]
    fn one_frame_at_a_time_and_arrival_after_propagation() {
        let params = LinkParams::new(1_000_000_000, 500);
        let mut c = Channel::default();
        assert!(c.is_free(Instant::ZERO));
        c.transmit(Instant::ZERO, HeapFrame::new(&[0u8; 1000]), &params);
        assert!(!c.is_free(Instant::from_nanos(8191)));
        assert!(c.is_free(Instant::from_nanos(8192)));
        assert_eq!(c.next_arrival(), Some(Instant::from_nanos(8192 + 500)));
        assert_eq!(c.stats().data_frames, 1);
        assert_eq!(c.data_frames_in_flight(), 1);
    }
}
