//! [`LcoreStep`]: what one lcore runs — an ingress side, an egress side, or both — and the one
//! way to drive the core. The runtime's lcore loop, the simulator, the benchmarks and every test
//! call it in the same order, so the behaviour under test (the XON timing included) is the one
//! that ships.
//!
//! # Call order (quinn-proto's `Connection` style)
//!
//! Per iteration of the driver's loop, with `now` read once:
//!
//! 1. [`LcoreStep::handle_rx_burst`] for each RX port that received frames;
//! 2. [`LcoreStep::inject`] for each frame the control plane asks to send;
//! 3. [`LcoreStep::handle_timeout`] (released cells, the other ingress sides' FDB updates,
//!    storm-rate windows, watchdog polls);
//! 4. [`LcoreStep::poll_tx_burst`] for each TX port, and transmit what it appended (PFC first);
//! 5. [`LcoreStep::poll_punt`] until `None`, handing the frames to the control plane;
//! 6. [`LcoreStep::poll_event`] until `None` (a driver whose control plane runs on another
//!    thread may leave this to it: the event logs are bounded lock-free queues
//!    ([`crate::events::EventLog`]) it can drain itself, as the runtime's control thread does);
//! 7. if nothing happened, sleep (adaptive polling) at most until [`LcoreStep::poll_timeout`].
//!
//! Control operations ([`LcoreStep::fdb_entries`], [`LcoreStep::flush_fdb`],
//! [`LcoreStep::set_big_red_switch`], [`LcoreStep::set_tx_enable`], [`LcoreStep::attach_fib`])
//! go between iterations.
//!
//! **Routing.** A step with an ingress side routes what its routed ports
//! ([`crate::params::VlanMode::Routed`]) receive with the FIB of the [`FibReader`] attached by
//! [`LcoreStep::attach_fib`]. The reader switches to the newest published snapshot at burst
//! boundaries only: at the start of `handle_rx_burst` and in `handle_timeout`, never within a
//! burst, so one burst is forwarded by one snapshot.
//!
//! **Released cells and XON.** A frame sent by `poll_tx_burst` gives its cells back at once to
//! the shared release counters. A step that holds both sides pulls them into the ingress
//! accounting right after the burst while some port asks its peer for pause, so that the XON
//! they bring is in the wanted set for the very next `poll_tx_burst` (and for
//! `poll_timeout`). While no port wants pause a release cannot change any PFC frame (it can
//! bring XON, never XOFF), so the pull waits for the next `handle_rx_burst` or `handle_timeout`,
//! which take every burst's releases in one pass. A step with only one side meets the other
//! lcores' sides through the shared state (`docs/ARCHITECTURE.md`, "Where the two sides meet").
//!
//! **Deadlines.** `poll_timeout` names everything this step does on time: PFC refreshes and
//! XOFF/XON changes to send, paused queues resuming, the shaper letting a waiting frame out,
//! watchdog polls, storm-rate windows ending, and "now" while a bounded drain left work behind.
//! What other lcores do (frames pushed into the rings, cells released, learns published) arrives
//! without a deadline; a driver with several lcores bounds its sleep for it.

use crate::counters::DropReason;
use crate::egress::Egress;
use crate::events::Event;
use crate::fdb::FdbEntry;
use crate::frame::Frame;
use crate::ingress::Ingress;
use crate::params::{ParamsError, SwitchParams};
use crate::punt::Punted;
use crate::route::FibReader;
use crate::shared::{Layout, Shared};
use crate::time::Instant;
use crate::types::{PortId, PRIORITY_COUNT};
use std::sync::Arc;

/// One lcore's share of a switch: its ingress side, its egress side, or both (see the module
/// doc for the call order). Built by [`crate::switch::build`] or [`LcoreStep::single`].
#[derive(Debug)]
pub struct LcoreStep<F: Frame> {
    shared: Arc<Shared>,
    ingress: Option<Ingress<F>>,
    egress: Option<Egress<F>>,
}

impl<F: Frame> LcoreStep<F> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        ingress: Option<Ingress<F>>,
        egress: Option<Egress<F>>,
    ) -> Self {
        Self {
            shared,
            ingress,
            egress,
        }
    }

    /// A whole switch on one lcore: both sides of every port, run to completion.
    ///
    /// # Errors
    /// When the parameters are inconsistent.
    pub fn single(params: SwitchParams, now: Instant) -> Result<Self, ParamsError> {
        let ports = params.ports.len();
        crate::switch::build(params, Layout::single(ports), now)?
            .pop()
            .ok_or_else(|| ParamsError("a switch needs at least one port".into()))
    }

    /// State shared with the other lcores and the control plane (counters, boards, parameters).
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The ingress side, if this lcore receives.
    #[must_use]
    pub fn ingress(&self) -> Option<&Ingress<F>> {
        self.ingress.as_ref()
    }

    /// The egress side, if this lcore transmits.
    #[must_use]
    pub fn egress(&self) -> Option<&Egress<F>> {
        self.egress.as_ref()
    }

    /// The ports this lcore receives on.
    #[must_use]
    pub fn rx_ports(&self) -> &[PortId] {
        self.ingress.as_ref().map_or(&[], Ingress::ports)
    }

    /// The ports this lcore transmits on.
    pub fn tx_ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.egress.iter().flat_map(Egress::ports)
    }

    /// 1. Frames received on `port` at `now`; `frames` is left empty. `port` must be one of
    ///    [`LcoreStep::rx_ports`] (a burst for another port is a driver bug: it is dropped).
    pub fn handle_rx_burst(&mut self, now: Instant, port: PortId, frames: &mut Vec<F>) {
        match self.ingress.as_mut() {
            Some(ingress) => ingress.handle_rx_burst(now, port, frames),
            None => {
                debug_assert!(
                    frames.is_empty(),
                    "{port}: a burst for an lcore that does not receive"
                );
                frames.clear();
            }
        }
    }

    /// 2. Sends `frame`, built by the control plane, out of `port` through the egress path
    ///    (classified by `port`'s maps, rate-limited, accounted on the CPU pseudo-port, queued,
    ///    scheduled, shaped; see [`crate::inject`]). Any port may be named; the step must have an
    ///    ingress side.
    ///
    /// # Errors
    /// Why the frame was dropped (counted in `port`'s `inject_drops`; a step without an ingress
    /// side, or an unknown port, has nothing to count it in and only returns the reason).
    pub fn inject(&mut self, now: Instant, port: PortId, frame: F) -> Result<(), DropReason> {
        match self.ingress.as_mut() {
            Some(ingress) => ingress.inject(now, port, frame),
            None => Err(DropReason::NoDestination),
        }
    }

    /// 2b. Sends `frame`, built by the control plane for the VLAN interface of `vid`, into the
    ///    VLAN: to the member port the FDB knows, or flooded to the members, tagged where they
    ///    carry the VLAN tagged ([`crate::ingress::Ingress::inject_vlan`]). Returns how many
    ///    copies were accepted.
    ///
    /// # Errors
    /// As [`crate::ingress::Ingress::inject_vlan`]; `no_destination` for a step without an
    /// ingress side.
    pub fn inject_vlan(&mut self, now: Instant, vid: u16, frame: F) -> Result<usize, DropReason> {
        match self.ingress.as_mut() {
            Some(ingress) => ingress.inject_vlan(now, vid, frame),
            None => Err(DropReason::NoDestination),
        }
    }

    /// 3. Time-driven work due at `now` (see [`LcoreStep::poll_timeout`]); harmless when
    ///    nothing is due.
    pub fn handle_timeout(&mut self, now: Instant) {
        if let Some(ingress) = self.ingress.as_mut() {
            ingress.handle_timeout(now);
        }
        if let Some(egress) = self.egress.as_mut() {
            egress.handle_timeout(now);
        }
    }

    /// 4. Up to `max` frames to transmit on `port` (PFC first), appended to `out`; returns how
    ///    many. `alloc(len)` provides a zeroed buffer for a PFC frame. `port` must be one of
    ///    [`LcoreStep::tx_ports`]. The cells the frames free reach the ingress accounting as the
    ///    module doc says.
    pub fn poll_tx_burst(
        &mut self,
        now: Instant,
        port: PortId,
        out: &mut Vec<F>,
        max: usize,
        alloc: &mut impl FnMut(usize) -> Option<F>,
    ) -> usize {
        let Some(egress) = self.egress.as_mut() else {
            debug_assert!(false, "{port}: a poll of an lcore that does not transmit");
            return 0;
        };
        let n = egress.poll_tx_burst(now, port, out, max, alloc);
        if let Some(ingress) = self.ingress.as_mut() {
            if ingress.releases_can_change_pfc() {
                ingress.pull_releases();
            }
        }
        n
    }

    /// 5. The oldest frame received for the switch itself (see [`crate::punt`]), with its port
    ///    and reason.
    pub fn poll_punt(&mut self) -> Option<Punted<F>> {
        self.ingress.as_mut()?.poll_punt()
    }

    /// 6. The next event for operators (this lcore's sides' logs).
    pub fn poll_event(&mut self) -> Option<Event> {
        let from_ingress = self
            .ingress
            .as_ref()
            .and_then(|i| self.shared.ingress_events[i.side()].pop());
        from_ingress.or_else(|| {
            self.egress
                .as_ref()
                .and_then(|e| self.shared.egress_events[e.side()].pop())
        })
    }

    /// 7. When this step next has work of its own, if ever (see the module doc).
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let i = self.ingress.as_ref().and_then(|i| i.poll_timeout(now));
        let e = self.egress.as_ref().and_then(|e| e.poll_timeout(now));
        match (i, e) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Whether this lcore's ingress side has released cells to pull (see
    /// [`Ingress::has_releases_to_pull`]): the next `handle_timeout` would change the PG use
    /// it reports. False without an ingress side.
    #[must_use]
    pub fn has_releases_to_pull(&self) -> bool {
        self.ingress
            .as_ref()
            .is_some_and(Ingress::has_releases_to_pull)
    }

    /// The MAC table of this lcore's ingress side (empty without one), as `show fdb` lists it.
    pub fn fdb_entries(&self, now: Instant) -> impl Iterator<Item = FdbEntry> + '_ {
        self.ingress.iter().flat_map(move |i| i.fdb().entries(now))
    }

    /// Forgets the stations learned on `port` (`Some`) or every station (`None`) on this
    /// lcore's ingress side, and through the learn rings on every other one (see
    /// [`Ingress::flush_fdb_port`]). Nothing without an ingress side.
    pub fn flush_fdb(&mut self, port: Option<PortId>, now: Instant) {
        if let Some(ingress) = self.ingress.as_mut() {
            match port {
                Some(port) => ingress.flush_fdb_port(port, now),
                None => ingress.flush_fdb(now),
            }
        }
    }

    /// Attaches the FIB this lcore's ingress side routes with (a control op: between
    /// iterations). It replaces any reader attached before (dropped here, off the per-packet
    /// path). Until one is attached, a packet a routed port would route is dropped `no_route`
    /// (punts — ARP, ND, LLDP — need no FIB and work). A step without an ingress side has
    /// nothing to route: the reader is dropped. The reader's `refresh` is called at burst
    /// boundaries (module doc).
    pub fn attach_fib(&mut self, reader: FibReader) {
        if let Some(ingress) = self.ingress.as_mut() {
            ingress.attach_fib(reader);
        }
    }

    /// Turns the PFC watchdog's big red switch on or off on this lcore's egress side.
    pub fn set_big_red_switch(&mut self, on: bool, now: Instant) {
        if let Some(egress) = self.egress.as_mut() {
            egress.set_big_red_switch(on, now);
        }
    }

    /// Enables or disables transmission on `port` (SAI `PKT_TX_ENABLE`: egress holds the port's
    /// queues while buffers keep admitting). It is a flag on the shared board, which the
    /// egress side of the port reads once per poll, so any lcore, or the control plane through
    /// [`Shared::set_tx_enable`], may set it.
    pub fn set_tx_enable(&self, port: PortId, enable: bool) {
        self.shared.set_tx_enable(port, enable);
    }

    /// Frames waiting in `(port, queue)` (0 for a port this lcore does not transmit).
    #[must_use]
    pub fn queue_len(&self, port: PortId, queue: usize) -> usize {
        self.egress.as_ref().map_or(0, |e| e.queue_len(port, queue))
    }

    /// Frames waiting in every queue this lcore transmits from.
    #[must_use]
    pub fn queued_frames(&self) -> usize {
        self.egress.as_ref().map_or(0, |e| {
            e.ports()
                .map(|p| {
                    (0..PRIORITY_COUNT)
                        .map(|q| e.queue_len(p, q))
                        .sum::<usize>()
                })
                .sum()
        })
    }

    /// Checks every accounting invariant of this lcore's ingress side.
    pub fn check_invariants(&self) {
        if let Some(ingress) = &self.ingress {
            ingress.check_invariants();
        }
    }
}
