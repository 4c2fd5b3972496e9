//! DCQCN notification point (NP): the receiver side that turns CE-marked packets into CNPs.
//!
//! The rule is the paper's (SIGCOMM'15 §3.2, quoted in `dcqcn-roce.md` §2): "If a marked packet
//! arrives for a flow, and no CNP has been sent for the flow in last N microseconds, a CNP is sent
//! immediately. Then, the NIC generates at most one CNP packet every N microseconds for the flow,
//! if any packet that arrives within that time window was marked." htsim's `DCQCNSink` does
//! exactly this; so do we, per flow, a flow being the QP the CNP is addressed to.
//!
//! Concretely, each CNP sent at time t opens a window [t, t + N). Marked packets inside the
//! window are absorbed; if there was at least one, a CNP is sent at t + N (the window's end),
//! which opens the next window. A marked packet when no window is open gets a CNP at once.
//! A window boundary at exactly the arrival time of a marked packet is processed first.
//!
//! A deferred CNP is stamped with its window end even when [`Np::poll_cnp`] is called later, so
//! the windows stay on the N grid whatever the polling pattern. Up to two CNPs per flow wait for
//! [`Np::poll_cnp`] (one call of [`Np::handle_ce`] can make a deferred one and an immediate one
//! due); if the driver falls further behind, further CNPs of that flow are merged into the
//! queued ones (a CNP carries nothing but "congestion"; counted in
//! [`NpStats::cnps_coalesced_total`]). A driver that polls after every input never merges.
//!
//! The flow table, the CNP queue and the window queue are allocated once, for the capacity given
//! to [`Np::new`]; nothing allocates afterwards.

use std::collections::VecDeque;

use core::fmt;

use crate::time::{Instant, NANOS_PER_MICRO};

/// Largest 24-bit queue pair number.
pub const QPN_MAX: u32 = 0x00FF_FFFF;

/// CNPs of one flow that may wait for [`Np::poll_cnp`] before further ones are merged.
pub const QUEUED_CNPS_PER_FLOW_MAX: u8 = 2;

/// NP configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NpConfig {
    /// N: minimum time between two CNPs to the same flow, in nanoseconds. The mlx5 parameter is
    /// `min_time_between_cnps`, in microseconds (unit assumed, `dcqcn-roce.md` §1.3).
    pub min_time_between_cnps_ns: u64,
    /// DSCP of generated CNPs (mlx5 `cnp_dscp`), 0..=63.
    pub cnp_dscp: u8,
    /// 802.1p priority of generated CNPs (mlx5 `cnp_802p_prio`), 0..=7.
    pub cnp_802p_prio: u8,
}

impl NpConfig {
    /// The paper's N = 50 us, with the mlx5 default CNP marking (DSCP 48, priority 6).
    #[must_use]
    pub const fn paper() -> Self {
        Self {
            min_time_between_cnps_ns: 50 * NANOS_PER_MICRO,
            cnp_dscp: 48,
            cnp_802p_prio: 6,
        }
    }

    /// mlx5 defaults: `min_time_between_cnps` = 2 (the `mlxconfig` dump value of
    /// `dcqcn-roce.md` §1.3, read as microseconds; the unit is assumed, not documented),
    /// `cnp_dscp` = 48, `cnp_802p_prio` = 6.
    #[must_use]
    pub const fn nvidia() -> Self {
        Self {
            min_time_between_cnps_ns: 2 * NANOS_PER_MICRO,
            cnp_dscp: 48,
            cnp_802p_prio: 6,
        }
    }
}

impl Default for NpConfig {
    fn default() -> Self {
        Self::paper()
    }
}

/// Why the NP refused a configuration or an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpError {
    /// `cnp_dscp` above 63.
    DscpOutOfRange,
    /// `cnp_802p_prio` above 7.
    PriorityOutOfRange,
    /// A flow capacity of zero.
    ZeroCapacity,
    /// A QPN above 24 bits (counted in [`NpStats::ce_invalid_qpn_total`]).
    InvalidQpn,
    /// The flow table is full (counted in [`NpStats::ce_table_full_total`]).
    TableFull,
}

impl fmt::Display for NpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::DscpOutOfRange => "cnp_dscp must be in 0..=63",
            Self::PriorityOutOfRange => "cnp_802p_prio must be in 0..=7",
            Self::ZeroCapacity => "the flow table needs room for at least one flow",
            Self::InvalidQpn => "QPN does not fit in 24 bits",
            Self::TableFull => "NP flow table is full",
        })
    }
}

impl std::error::Error for NpError {}

/// A CNP to send: the binary builds the packet (BTH opcode 0x81, BECN = 1, DestQP `dest_qpn`,
/// 16 reserved bytes, ICRC) with the given DSCP and priority.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CnpDescriptor {
    /// The RP's QPN: the BTH DestQP of the CNP.
    pub dest_qpn: u32,
    /// IP DSCP for the CNP.
    pub dscp: u8,
    /// 802.1p priority for the CNP.
    pub priority: u8,
    /// When the rule sent it (the CE arrival, or the end of the window).
    pub at: Instant,
}

/// NP counters. All are monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NpStats {
    /// CE-marked packets reported.
    pub ce_packets_total: u64,
    /// CNPs sent at once (no CNP to the flow in the last N).
    pub cnps_immediate_total: u64,
    /// CNPs sent at a window's end for marked packets inside the window.
    pub cnps_deferred_total: u64,
    /// Marked packets that arrived inside a window (covered by that window's deferred CNP).
    pub ce_in_window_total: u64,
    /// CNPs merged into one not yet polled for the same flow.
    pub cnps_coalesced_total: u64,
    /// CNPs handed out by [`Np::poll_cnp`].
    pub cnps_polled_total: u64,
    /// Marked packets dropped because the flow table was full.
    pub ce_table_full_total: u64,
    /// Marked packets dropped because the QPN does not fit in 24 bits.
    pub ce_invalid_qpn_total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Flow {
    qpn: u32,
    /// A CNP was sent less than N ago: marked packets wait for the window's end.
    window_open: bool,
    /// A marked packet arrived inside the open window.
    marked_in_window: bool,
    /// CNPs of this flow in the output queue, at most [`QUEUED_CNPS_PER_FLOW_MAX`].
    cnps_queued: u8,
}

/// The notification point of one receiving port.
#[derive(Clone, Debug)]
pub struct Np {
    cfg: NpConfig,
    /// Sorted by QPN; capacity fixed at construction.
    flows: Vec<Flow>,
    /// CNPs to hand out, in time order.
    ready: VecDeque<(Instant, u32)>,
    /// Open windows as (end, qpn), in end order (ends are pushed in non-decreasing order).
    windows: VecDeque<(Instant, u32)>,
    /// Flows with a marked packet in their open window.
    pending_flows: usize,
    now_last: Instant,
    stats: NpStats,
}

impl Np {
    /// An NP that tracks up to `max_flows` flows.
    pub fn new(cfg: NpConfig, max_flows: usize) -> Result<Self, NpError> {
        if cfg.cnp_dscp > 63 {
            return Err(NpError::DscpOutOfRange);
        }
        if cfg.cnp_802p_prio > 7 {
            return Err(NpError::PriorityOutOfRange);
        }
        if max_flows == 0 {
            return Err(NpError::ZeroCapacity);
        }
        Ok(Self {
            cfg,
            flows: Vec::with_capacity(max_flows),
            ready: VecDeque::with_capacity(
                max_flows.saturating_mul(usize::from(QUEUED_CNPS_PER_FLOW_MAX)),
            ),
            windows: VecDeque::with_capacity(max_flows),
            pending_flows: 0,
            now_last: Instant::ZERO,
            stats: NpStats::default(),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &NpConfig {
        &self.cfg
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &NpStats {
        &self.stats
    }

    /// Flows currently tracked.
    #[must_use]
    pub fn flow_count(&self) -> usize {
        self.flows.len()
    }

    /// A CE-marked data packet for the flow whose RP is QP `dest_qpn` arrived at `now`.
    ///
    /// Errors (the packet is counted and otherwise ignored): a QPN above 24 bits, or a new flow
    /// when the table is full.
    pub fn handle_ce(&mut self, now: Instant, dest_qpn: u32) -> Result<(), NpError> {
        let now = self.advance(now);
        self.stats.ce_packets_total += 1;
        if dest_qpn > QPN_MAX {
            self.stats.ce_invalid_qpn_total += 1;
            return Err(NpError::InvalidQpn);
        }
        let index = match self.flows.binary_search_by_key(&dest_qpn, |f| f.qpn) {
            Ok(index) => index,
            Err(index) => {
                if self.flows.len() == self.flows.capacity() {
                    self.stats.ce_table_full_total += 1;
                    return Err(NpError::TableFull);
                }
                // Within capacity: no reallocation.
                self.flows.insert(
                    index,
                    Flow {
                        qpn: dest_qpn,
                        window_open: false,
                        marked_in_window: false,
                        cnps_queued: 0,
                    },
                );
                index
            }
        };
        let flow = &mut self.flows[index];
        if flow.window_open {
            self.stats.ce_in_window_total += 1;
            if !flow.marked_in_window {
                flow.marked_in_window = true;
                self.pending_flows += 1;
            }
        } else {
            self.stats.cnps_immediate_total += 1;
            Self::send(
                &mut self.ready,
                &mut self.windows,
                &mut self.stats,
                &self.cfg,
                flow,
                now,
            );
        }
        Ok(())
    }

    /// The next CNP to send, if one is due at or before `now`.
    pub fn poll_cnp(&mut self, now: Instant) -> Option<CnpDescriptor> {
        self.advance(now);
        let (at, dest_qpn) = self.ready.pop_front()?;
        if let Ok(index) = self.flows.binary_search_by_key(&dest_qpn, |f| f.qpn) {
            let queued = &mut self.flows[index].cnps_queued;
            *queued = queued.saturating_sub(1);
        }
        self.stats.cnps_polled_total += 1;
        Some(CnpDescriptor {
            dest_qpn,
            dscp: self.cfg.cnp_dscp,
            priority: self.cfg.cnp_802p_prio,
            at,
        })
    }

    /// When to call [`Np::poll_cnp`] next: at once if a CNP is queued, else at the earliest end
    /// of an open window while some window holds a marked packet (this may be the end of a
    /// window without one: at most one such early wake-up per open window).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if let Some(&(at, _)) = self.ready.front() {
            return Some(at);
        }
        if self.pending_flows == 0 {
            return None;
        }
        self.windows.front().map(|&(end, _)| end)
    }

    /// Records a CNP for `flow` at `at` and opens its window.
    fn send(
        ready: &mut VecDeque<(Instant, u32)>,
        windows: &mut VecDeque<(Instant, u32)>,
        stats: &mut NpStats,
        cfg: &NpConfig,
        flow: &mut Flow,
        at: Instant,
    ) {
        if flow.cnps_queued >= QUEUED_CNPS_PER_FLOW_MAX {
            stats.cnps_coalesced_total += 1;
        } else {
            // At most QUEUED_CNPS_PER_FLOW_MAX per flow: never beyond the reserved capacity.
            ready.push_back((at, flow.qpn));
            flow.cnps_queued += 1;
        }
        flow.window_open = true;
        // At most one open window per flow.
        windows.push_back((
            at.saturating_add_nanos(cfg.min_time_between_cnps_ns),
            flow.qpn,
        ));
    }

    /// Closes every window that ends at or before `now`, sending the deferred CNPs.
    fn advance(&mut self, now: Instant) -> Instant {
        let now = now.max(self.now_last);
        while let Some(&(end, qpn)) = self.windows.front() {
            if end > now {
                break;
            }
            self.windows.pop_front();
            let Ok(index) = self.flows.binary_search_by_key(&qpn, |f| f.qpn) else {
                continue;
            };
            let flow = &mut self.flows[index];
            if flow.marked_in_window {
                flow.marked_in_window = false;
                self.pending_flows -= 1;
                self.stats.cnps_deferred_total += 1;
                Self::send(
                    &mut self.ready,
                    &mut self.windows,
                    &mut self.stats,
                    &self.cfg,
                    flow,
                    end,
                );
            } else {
                flow.window_open = false;
            }
        }
        self.now_last = now;
        now
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const US: u64 = NANOS_PER_MICRO;

    fn t(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    fn drain(np: &mut Np, now: Instant) -> Vec<(u64, u32)> {
        let mut out = Vec::new();
        while let Some(cnp) = np.poll_cnp(now) {
            out.push((cnp.at.as_nanos(), cnp.dest_qpn));
        }
        out
    }

    #[test]
    fn configuration() {
        assert_eq!(NpConfig::paper().min_time_between_cnps_ns, 50 * US);
        assert_eq!(NpConfig::nvidia().min_time_between_cnps_ns, 2 * US);
        assert_eq!(
            (
                NpConfig::default().cnp_dscp,
                NpConfig::default().cnp_802p_prio
            ),
            (48, 6)
        );
        let bad = NpConfig {
            cnp_dscp: 64,
            ..NpConfig::paper()
        };
        assert_eq!(Np::new(bad, 4).unwrap_err(), NpError::DscpOutOfRange);
        let bad = NpConfig {
            cnp_802p_prio: 8,
            ..NpConfig::paper()
        };
        assert_eq!(Np::new(bad, 4).unwrap_err(), NpError::PriorityOutOfRange);
        assert_eq!(
            Np::new(NpConfig::paper(), 0).unwrap_err(),
            NpError::ZeroCapacity
        );
    }

    #[test]
    fn first_mark_is_answered_at_once_then_once_per_window() {
        let mut np = Np::new(NpConfig::paper(), 8).unwrap();
        np.handle_ce(t(1_000), 0x11).unwrap();
        let cnp = np.poll_cnp(t(1_000)).unwrap();
        assert_eq!(
            cnp,
            CnpDescriptor {
                dest_qpn: 0x11,
                dscp: 48,
                priority: 6,
                at: t(1_000)
            }
        );
        assert_eq!(
            np.poll_timeout(),
            None,
            "window open but nothing marked in it"
        );
        // Marks inside the window: one CNP at its end.
        for k in 1..10 {
            np.handle_ce(t(1_000 + k * US), 0x11).unwrap();
        }
        assert_eq!(np.poll_cnp(t(50 * US)), None);
        assert_eq!(np.poll_timeout(), Some(t(51 * US)));
        assert_eq!(drain(&mut np, t(51 * US)), vec![(51 * US, 0x11)]);
        // A mark in the second window: CNP at 101 us.
        np.handle_ce(t(60 * US), 0x11).unwrap();
        assert_eq!(drain(&mut np, t(200 * US)), vec![(101 * US, 0x11)]);
        // The third window [101, 151) had no mark: it closed, so the next mark is answered at once.
        np.handle_ce(t(300 * US), 0x11).unwrap();
        assert_eq!(drain(&mut np, t(300 * US)), vec![(300 * US, 0x11)]);
        let s = np.stats();
        assert_eq!((s.cnps_immediate_total, s.cnps_deferred_total), (2, 2));
        assert_eq!((s.ce_packets_total, s.ce_in_window_total), (12, 10));
    }

    #[test]
    fn window_end_at_the_arrival_instant_is_processed_first() {
        let mut np = Np::new(NpConfig::paper(), 8).unwrap();
        np.handle_ce(t(0), 5).unwrap();
        // No mark in [0, 50us): the window closes at 50 us, so a mark at 50 us is immediate.
        np.handle_ce(t(50 * US), 5).unwrap();
        assert_eq!(drain(&mut np, t(50 * US)), vec![(0, 5), (50 * US, 5)]);
        // A mark inside [50, 100): deferred CNP at 100 us; a mark at exactly 100 us falls in the
        // new window [100, 150).
        np.handle_ce(t(70 * US), 5).unwrap();
        np.handle_ce(t(100 * US), 5).unwrap();
        assert_eq!(drain(&mut np, t(100 * US)), vec![(100 * US, 5)]);
        assert_eq!(drain(&mut np, t(150 * US)), vec![(150 * US, 5)]);
    }

    #[test]
    fn flows_are_independent_and_late_polling_keeps_the_grid() {
        let mut np = Np::new(NpConfig::paper(), 8).unwrap();
        np.handle_ce(t(0), 1).unwrap();
        np.handle_ce(t(10 * US), 2).unwrap();
        np.handle_ce(t(20 * US), 1).unwrap();
        np.handle_ce(t(30 * US), 2).unwrap();
        // Polled only at 1 ms: the deferred CNPs still carry their window ends, in time order.
        assert_eq!(
            drain(&mut np, t(1_000 * US)),
            vec![(0, 1), (10 * US, 2), (50 * US, 1), (60 * US, 2)],
        );
        assert_eq!(np.stats().cnps_deferred_total, 2);
        assert_eq!(np.stats().cnps_coalesced_total, 0);
        // A third CNP due for a flow with two unpolled ones is merged.
        np.handle_ce(t(2_000 * US), 1).unwrap(); // immediate
        np.handle_ce(t(2_010 * US), 1).unwrap(); // deferred to 2050
        np.handle_ce(t(2_060 * US), 1).unwrap(); // deferred to 2100: merged
        assert_eq!(
            drain(&mut np, t(3_000 * US)),
            vec![(2_000 * US, 1), (2_050 * US, 1)],
        );
        assert_eq!(np.stats().cnps_coalesced_total, 1);
        assert_eq!(np.stats().cnps_deferred_total, 4);
    }

    #[test]
    fn bad_inputs_are_counted() {
        let mut np = Np::new(NpConfig::paper(), 2).unwrap();
        assert_eq!(np.handle_ce(t(0), 0x0100_0000), Err(NpError::InvalidQpn));
        np.handle_ce(t(0), 1).unwrap();
        np.handle_ce(t(0), 2).unwrap();
        assert_eq!(np.handle_ce(t(0), 3), Err(NpError::TableFull));
        let s = np.stats();
        assert_eq!((s.ce_invalid_qpn_total, s.ce_table_full_total), (1, 1));
        assert_eq!(s.ce_packets_total, 4);
        assert_eq!(np.flow_count(), 2);
    }

    /// Reference model: the paper rule per flow, written directly over the sorted CE times.
    fn reference_cnps(marks: &[u64], n: u64) -> Vec<u64> {
        let mut cnps = Vec::new();
        let mut window_end: Option<u64> = None;
        let mut marked = false;
        for &mark in marks {
            // Close the windows that ended at or before this mark.
            while let Some(end) = window_end.filter(|&end| end <= mark) {
                if marked {
                    cnps.push(end);
                    marked = false;
                    window_end = Some(end + n);
                } else {
                    window_end = None;
                }
            }
            if window_end.is_some() {
                marked = true;
            } else {
                cnps.push(mark);
                window_end = Some(mark + n);
            }
        }
        if marked {
            cnps.push(window_end.unwrap());
        }
        cnps
    }

    proptest! {
        /// CNP times match the reference rule for every flow, are at least N apart, and every
        /// mark gets a CNP within N of it.
        #[test]
        fn matches_the_paper_rule(
            marks in prop::collection::vec((0u64..30 * US, 0u32..4), 1..200),
            n in prop_oneof![Just(50 * US), Just(2 * US), 1u64..100 * US],
        ) {
            let cfg = NpConfig { min_time_between_cnps_ns: n, ..NpConfig::paper() };
            let mut np = Np::new(cfg, 4).unwrap();
            let mut now = 0;
            let mut per_flow: [Vec<u64>; 4] = Default::default();
            let mut sent: [Vec<u64>; 4] = Default::default();
            for &(dt, qpn) in &marks {
                now += dt;
                np.handle_ce(t(now), qpn).unwrap();
                per_flow[qpn as usize].push(now);
                // Poll promptly so that nothing is merged.
                while let Some(cnp) = np.poll_cnp(t(now)) {
                    prop_assert!(cnp.at.as_nanos() <= now);
                    sent[cnp.dest_qpn as usize].push(cnp.at.as_nanos());
                }
                if let Some(deadline) = np.poll_timeout() {
                    prop_assert!(deadline.as_nanos() > now);
                }
            }
            for cnp in std::iter::from_fn(|| np.poll_cnp(Instant::MAX)) {
                sent[cnp.dest_qpn as usize].push(cnp.at.as_nanos());
            }
            prop_assert_eq!(np.stats().cnps_coalesced_total, 0);
            for qpn in 0..4 {
                prop_assert_eq!(&sent[qpn], &reference_cnps(&per_flow[qpn], n));
                for pair in sent[qpn].windows(2) {
                    prop_assert!(pair[1] - pair[0] >= n);
                }
                for &mark in &per_flow[qpn] {
                    prop_assert!(sent[qpn].iter().any(|&c| c >= mark && c <= mark + n));
                }
            }
        }
    }
}
