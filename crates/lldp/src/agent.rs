//! The per-switch LLDP agent: a sans-IO state machine (after quinn-proto's `Connection`).
//!
//! # Call order
//!
//! The driver owns the clock and the ports; the agent never reads a clock or touches a socket.
//!
//! 1. [`Agent::new`] with the local view and the current time;
//! 2. whenever an LLDP frame arrives on port `p`: [`Agent::handle_rx`]`(p, frame, now)`;
//! 3. whenever `now >= `[`Agent::poll_timeout`]`()`: [`Agent::handle_timeout`]`(now)`;
//! 4. after each of those, drain [`Agent::poll_transmit`] (send each frame out of its port) and
//!    [`Agent::poll_event`] (log them) until they return `None`;
//! 5. on a configuration change: [`Agent::set_local_port`] / [`Agent::set_local_system`], then 4;
//! 6. on shutdown: [`Agent::shutdown`], then drain [`Agent::poll_transmit`] (TTL-0 LLDPDUs that
//!    tell the neighbours to forget us now, 802.1AB-2016 9.2.7.3).
//!
//! Every `handle_*` call runs the timers up to `now`, so a driver that calls
//! [`Agent::handle_timeout`] late loses nothing but promptness. Time never goes backwards for the
//! agent: an earlier `now` than the last one is treated as the last one.
//!
//! # Transmission (802.1AB-2016 9.2.8, simplified)
//!
//! A port whose admin status transmits sends an LLDPDU every `tx_interval_s`; `tx_fast_init`
//! LLDPDUs `tx_fast_interval_s` apart when it starts (as lldpad does) and when a new neighbour
//! appears (802.1AB `newNeighbor`); one at once on a change of its local view. A credit bucket
//! (txCreditMax 5, one credit per second) bounds how often those extra LLDPDUs go out.
//!
//! # Reception (802.1AB-2016 9.2.7)
//!
//! A valid LLDPDU on a receiving port adds or refreshes the neighbour (Chassis ID + Port ID) for
//! its TTL; TTL 0 removes it (shutdown). An invalid one is counted by reason and ignored; nothing
//! else changes. A port keeps at most [`MAX_NEIGHBOURS_PER_PORT`] neighbours: an LLDPDU from one
//! more is counted (`rx_frames_table_full_total`, 802.1AB `tooManyNeighbors`) and dropped.

use std::collections::VecDeque;

use headroom_core::time::Instant;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::lldp::{
    parse_lldp_frame, ChassisId as WireChassisId, LldpduRepr, PortId as WirePortId, PortIdSubtype,
    SystemCapabilities, TlvRepr, Tlvs, NEAREST_BRIDGE,
};
use headroom_wire::Error as WireError;

use crate::local::{LocalPort, LocalSystem};
use crate::peer::{decode, Neighbour, NeighbourId, PeerDcbx};
use crate::verdict::{evaluate, Verdict};

/// Neighbours kept per port (802.1AB leaves the bound to the implementation; a point-to-point
/// link has one, a shared segment a few).
pub const MAX_NEIGHBOURS_PER_PORT: usize = 8;
/// Transmission credits at most (802.1AB-2016 9.2.5.17 txCreditMax default).
pub const TX_CREDIT_MAX: u8 = 5;
/// Events kept before the oldest are dropped (and counted) when the driver does not drain them.
pub const MAX_QUEUED_EVENTS: usize = 1024;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Why a received frame was not used, for [`PortCounters::rx_frames_errors`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RxError {
    /// A TLV runs past the end of the frame, or there is no room for the mandatory TLVs.
    Truncated,
    /// The first three TLVs are not Chassis ID, Port ID, TTL.
    MissingTlv,
    /// A length out of range (mandatory TLVs, End TLV).
    BadLength,
    /// Chassis ID, Port ID or TTL repeated.
    DuplicateTlv,
    /// Not an untagged 0x88CC frame.
    NotLldp,
}

impl RxError {
    /// Every reason, in the order of [`PortCounters::rx_frames_errors`].
    pub const ALL: [RxError; 5] = [
        RxError::Truncated,
        RxError::MissingTlv,
        RxError::BadLength,
        RxError::DuplicateTlv,
        RxError::NotLldp,
    ];

    /// Name in metrics labels and `show` output.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            RxError::Truncated => "truncated",
            RxError::MissingTlv => "missing_tlv",
            RxError::BadLength => "bad_length",
            RxError::DuplicateTlv => "duplicate_tlv",
            RxError::NotLldp => "not_lldp",
        }
    }

    fn from_wire(error: WireError) -> RxError {
        match error {
            WireError::Truncated => RxError::Truncated,
            WireError::MissingTlv => RxError::MissingTlv,
            WireError::DuplicateTlv => RxError::DuplicateTlv,
            WireError::WrongEtherType => RxError::NotLldp,
            // BadLength, and anything a future parser adds: a malformed frame.
            _ => RxError::BadLength,
        }
    }
}

/// Per-port counters (802.1AB-2016 LLDP MIB names, `lldpStats…` in snake case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortCounters {
    /// LLDPDUs sent (lldpStatsTxPortFramesTotal), shutdown LLDPDUs included.
    pub tx_frames_total: u64,
    /// LLDPDUs not sent because the local view does not fit one (lldpStatsTxLLDPDULengthErrors).
    pub tx_length_errors_total: u64,
    /// Frames handed to [`Agent::handle_rx`] (lldpStatsRxPortFramesTotal counts the valid ones;
    /// this counts all).
    pub rx_frames_total: u64,
    /// Frames not used for any reason (lldpStatsRxPortFramesDiscardedTotal): invalid, table full,
    /// or received while the port does not receive.
    pub rx_frames_discarded_total: u64,
    /// Invalid frames by reason, indexed as [`RxError::ALL`] (lldpStatsRxPortFramesErrors).
    pub rx_frames_errors: [u64; 5],
    /// Valid frames from a neighbour that did not fit the table (tooManyNeighbors).
    pub rx_frames_table_full_total: u64,
    /// Frames received while the admin status does not receive.
    pub rx_frames_disabled_total: u64,
    /// Optional TLVs discarded as malformed or repeated (lldpStatsRxPortTLVsDiscardedTotal).
    pub rx_tlvs_discarded_total: u64,
    /// TLVs not decoded: reserved types, other OUIs and subtypes
    /// (lldpStatsRxPortTLVsUnrecognizedTotal).
    pub rx_tlvs_unrecognized_total: u64,
    /// Neighbours forgotten because their TTL ran out (lldpStatsRxPortAgeoutsTotal).
    pub rx_ageouts_total: u64,
    /// Neighbours added (lldpStatsRemTablesInserts, per port).
    pub neighbour_inserts_total: u64,
    /// Neighbours removed by shutdown LLDPDUs, ageing or a port that stops receiving
    /// (lldpStatsRemTablesDeletes, per port).
    pub neighbour_deletes_total: u64,
}

impl PortCounters {
    /// Invalid frames, all reasons.
    #[must_use]
    pub fn rx_frames_errors_total(&self) -> u64 {
        self.rx_frames_errors.iter().sum()
    }

    /// Invalid frames of one reason.
    #[must_use]
    pub fn rx_frames_errors_of(&self, reason: RxError) -> u64 {
        self.rx_frames_errors[reason as usize]
    }
}

/// Why a neighbour left the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RemoveReason {
    /// It sent a TTL-0 LLDPDU.
    Shutdown,
    /// Its TTL ran out.
    Aged,
    /// The port stopped receiving (admin status changed).
    Disabled,
    /// The port's link went down (802.1AB-2016 9.2.7.7.1: `portEnabled` false deletes the
    /// port's remote information).
    LinkDown,
}

/// Something an operator wants in the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// A new neighbour on `port`.
    NeighbourAdded {
        /// Port id.
        port: usize,
        /// The neighbour.
        neighbour: NeighbourId,
    },
    /// A known neighbour sent different information.
    NeighbourChanged {
        /// Port id.
        port: usize,
        /// The neighbour.
        neighbour: NeighbourId,
    },
    /// A neighbour left the table.
    NeighbourRemoved {
        /// Port id.
        port: usize,
        /// The neighbour.
        neighbour: NeighbourId,
        /// Why.
        reason: RemoveReason,
    },
    /// The DCBX verdict of `port` changed (emitted once per change, not per LLDPDU).
    VerdictChanged {
        /// Port id.
        port: usize,
        /// The previous verdict.
        previous: Verdict,
        /// The new verdict.
        verdict: Verdict,
    },
}

/// A frame to send out of a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transmit {
    /// Port id.
    pub port: usize,
    /// The whole Ethernet frame (at least 60 bytes, no FCS).
    pub frame: Vec<u8>,
}

#[derive(Debug, Clone)]
struct TxState {
    next_tx: Instant,
    fast_remaining: u8,
    credit: u8,
    credit_tick: Instant,
}

#[derive(Debug, Clone)]
struct PortState {
    local: LocalPort,
    /// The link is up (802.1AB `portEnabled`): nothing is sent while it is down.
    link_up: bool,
    tx: TxState,
    neighbours: Vec<Neighbour>,
    verdict: Verdict,
    counters: PortCounters,
}

/// What [`Agent::port`] shows of one port.
#[derive(Debug, Clone, Copy)]
pub struct PortView<'a> {
    /// What we advertise.
    pub local: &'a LocalPort,
    /// Who we hear, oldest first.
    pub neighbours: &'a [Neighbour],
    /// The DCBX verdict.
    pub verdict: &'a Verdict,
    /// Counters.
    pub counters: &'a PortCounters,
}

impl PortView<'_> {
    /// The neighbour whose DCBX the verdict uses: the first that sends a PFC Configuration TLV,
    /// else the first with any 802.1Qaz TLV, else the first (DCBX is defined for a point-to-point
    /// link; with several neighbours this is the deterministic choice).
    #[must_use]
    pub fn dcbx_neighbour(&self) -> Option<&Neighbour> {
        dcbx_neighbour(self.neighbours)
    }
}

fn dcbx_neighbour(neighbours: &[Neighbour]) -> Option<&Neighbour> {
    neighbours
        .iter()
        .find(|n| n.info.dcbx.pfc.is_some())
        .or_else(|| neighbours.iter().find(|n| !n.info.dcbx.is_empty()))
        .or_else(|| neighbours.first())
}

/// The LLDP/DCBX agent of one switch.
#[derive(Debug)]
pub struct Agent {
    system: LocalSystem,
    ports: Vec<PortState>,
    now: Instant,
    transmits: VecDeque<Transmit>,
    events: VecDeque<Event>,
    events_dropped: u64,
    stopped: bool,
}

fn seconds(s: u16) -> u64 {
    u64::from(s) * NANOS_PER_SECOND
}

impl Agent {
    /// An agent for `ports` (index = port id). Ports that transmit send their first LLDPDU at
    /// `now` (drain [`Agent::poll_transmit`]).
    #[must_use]
    pub fn new(system: LocalSystem, ports: Vec<LocalPort>, now: Instant) -> Agent {
        let fast = system.tx_fast_init;
        let ports = ports
            .into_iter()
            .map(|local| PortState {
                local,
                link_up: true,
                tx: TxState {
                    next_tx: now,
                    fast_remaining: fast,
                    credit: TX_CREDIT_MAX,
                    credit_tick: now,
                },
                neighbours: Vec::new(),
                verdict: Verdict::no_neighbour(),
                counters: PortCounters::default(),
            })
            .collect();
        let mut agent = Agent {
            system,
            ports,
            now,
            transmits: VecDeque::new(),
            events: VecDeque::new(),
            events_dropped: 0,
            stopped: false,
        };
        agent.run_timers();
        agent
    }

    /// Number of ports.
    #[must_use]
    pub fn port_count(&self) -> usize {
        self.ports.len()
    }

    /// The system as advertised.
    #[must_use]
    pub fn system(&self) -> &LocalSystem {
        &self.system
    }

    /// What the agent knows of `port`, `None` for an unknown port id.
    #[must_use]
    pub fn port(&self, port: usize) -> Option<PortView<'_>> {
        self.ports.get(port).map(|p| PortView {
            local: &p.local,
            neighbours: &p.neighbours,
            verdict: &p.verdict,
            counters: &p.counters,
        })
    }

    /// Events dropped because [`Agent::poll_event`] was not drained (at most
    /// [`MAX_QUEUED_EVENTS`] are kept).
    #[must_use]
    pub fn events_dropped(&self) -> u64 {
        self.events_dropped
    }

    fn advance_clock(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
    }

    /// A frame received on `port` (the whole Ethernet frame). Unknown ports are ignored.
    pub fn handle_rx(&mut self, port: usize, frame: &[u8], now: Instant) {
        self.advance_clock(now);
        self.run_timers();
        if self.stopped {
            return;
        }
        let Some(state) = self.ports.get_mut(port) else {
            return;
        };
        state.counters.rx_frames_total += 1;
        if !state.local.admin_status.receives() {
            state.counters.rx_frames_disabled_total += 1;
            state.counters.rx_frames_discarded_total += 1;
            return;
        }
        let parsed = match parse_lldp_frame(frame) {
            Ok(parsed) => parsed,
            Err(error) => {
                state.counters.rx_frames_errors[RxError::from_wire(error) as usize] += 1;
                state.counters.rx_frames_discarded_total += 1;
                return;
            }
        };
        let (id, info, counts) = decode(&parsed);
        state.counters.rx_tlvs_discarded_total += u64::from(counts.discarded);
        state.counters.rx_tlvs_unrecognized_total += u64::from(counts.unrecognized);
        let now = self.now;
        let existing = state.neighbours.iter().position(|n| n.id == id);
        let mut new_neighbour = false;
        if info.ttl_s == 0 {
            if let Some(index) = existing {
                state.neighbours.remove(index);
                state.counters.neighbour_deletes_total += 1;
                push_event(
                    &mut self.events,
                    &mut self.events_dropped,
                    Event::NeighbourRemoved {
                        port,
                        neighbour: id,
                        reason: RemoveReason::Shutdown,
                    },
                );
            }
        } else {
            let expires = now.saturating_add_nanos(seconds(info.ttl_s));
            match existing {
                Some(index) => {
                    let neighbour = &mut state.neighbours[index];
                    let changed = neighbour.info != info;
                    neighbour.info = info;
                    neighbour.last_update = now;
                    neighbour.expires = expires;
                    if changed {
                        push_event(
                            &mut self.events,
                            &mut self.events_dropped,
                            Event::NeighbourChanged {
                                port,
                                neighbour: id,
                            },
                        );
                    }
                }
                None if state.neighbours.len() >= MAX_NEIGHBOURS_PER_PORT => {
                    state.counters.rx_frames_table_full_total += 1;
                    state.counters.rx_frames_discarded_total += 1;
                }
                None => {
                    state.neighbours.push(Neighbour {
                        id: id.clone(),
                        info,
                        first_seen: now,
                        last_update: now,
                        expires,
                    });
                    state.counters.neighbour_inserts_total += 1;
                    new_neighbour = true;
                    push_event(
                        &mut self.events,
                        &mut self.events_dropped,
                        Event::NeighbourAdded {
                            port,
                            neighbour: id,
                        },
                    );
                }
            }
        }
        if new_neighbour && state.local.admin_status.transmits() {
            // 802.1AB-2016 9.2.7.7.1 newNeighbor: fast transmission so the peer learns us soon.
            state.tx.fast_remaining = state.tx.fast_remaining.max(self.system.tx_fast_init);
            state.tx.next_tx = now;
        }
        self.reevaluate(port);
        self.run_timers();
    }

    /// Runs the timers up to `now`: ages neighbours and queues the LLDPDUs that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance_clock(now);
        self.run_timers();
    }

    /// When [`Agent::handle_timeout`] should be called next (`None`: nothing scheduled).
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.stopped {
            return None;
        }
        let tx = self
            .ports
            .iter()
            .filter(|p| p.local.admin_status.transmits() && p.link_up)
            .map(|p| p.tx.next_tx.max(self.credit_available_at(p)));
        let expiry = self
            .ports
            .iter()
            .flat_map(|p| p.neighbours.iter().map(|n| n.expires));
        tx.chain(expiry).min()
    }

    /// The next frame to send.
    pub fn poll_transmit(&mut self) -> Option<Transmit> {
        self.transmits.pop_front()
    }

    /// The next event.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Replaces the local view of `port` (after a configuration change). A transmitting port
    /// sends at once if anything it advertises changed; a port that stops transmitting sends a
    /// shutdown LLDPDU; a port that stops receiving forgets its neighbours.
    pub fn set_local_port(&mut self, port: usize, local: LocalPort, now: Instant) {
        self.advance_clock(now);
        self.run_timers();
        let now = self.now;
        let Some(state) = self.ports.get_mut(port) else {
            return;
        };
        let was_tx = state.local.admin_status.transmits();
        let was_rx = state.local.admin_status.receives();
        let changed = state.local != local;
        if was_tx && !local.admin_status.transmits() && !self.stopped && state.link_up {
            let old = state.local.clone();
            self.queue_frame(port, &old, 0);
        }
        let state = &mut self.ports[port];
        let is_tx = local.admin_status.transmits();
        let is_rx = local.admin_status.receives();
        state.local = local;
        if is_tx && (changed || !was_tx) {
            if !was_tx {
                state.tx.fast_remaining = self.system.tx_fast_init;
            }
            state.tx.next_tx = now;
        }
        if was_rx && !is_rx {
            for neighbour in state.neighbours.drain(..) {
                state.counters.neighbour_deletes_total += 1;
                push_event(
                    &mut self.events,
                    &mut self.events_dropped,
                    Event::NeighbourRemoved {
                        port,
                        neighbour: neighbour.id,
                        reason: RemoveReason::Disabled,
                    },
                );
            }
        }
        self.reevaluate(port);
        self.run_timers();
    }

    /// The link of `port` went down (`false`) or came back (`true`), 802.1AB `portEnabled`:
    /// down forgets the port's neighbours (9.2.7.7.1) and stops its transmission; up starts it
    /// again with fast transmission (`tx_fast_init` LLDPDUs, the first at once), as when the
    /// agent starts. Unknown ports and unchanged states are ignored.
    pub fn set_link(&mut self, port: usize, up: bool, now: Instant) {
        self.advance_clock(now);
        self.run_timers();
        let now = self.now;
        let fast = self.system.tx_fast_init;
        let Some(state) = self.ports.get_mut(port) else {
            return;
        };
        if state.link_up == up {
            return;
        }
        state.link_up = up;
        if up {
            state.tx.fast_remaining = fast;
            state.tx.next_tx = now;
        } else {
            for neighbour in state.neighbours.drain(..) {
                state.counters.neighbour_deletes_total += 1;
                push_event(
                    &mut self.events,
                    &mut self.events_dropped,
                    Event::NeighbourRemoved {
                        port,
                        neighbour: neighbour.id,
                        reason: RemoveReason::LinkDown,
                    },
                );
            }
            self.reevaluate(port);
        }
        self.run_timers();
    }

    /// Replaces the system view (name, description, timers); every transmitting port sends at
    /// once if it changed.
    pub fn set_local_system(&mut self, system: LocalSystem, now: Instant) {
        self.advance_clock(now);
        if system != self.system {
            self.system = system;
            for state in &mut self.ports {
                state.tx.next_tx = self.now;
            }
        }
        self.run_timers();
    }

    /// Stops the agent: every transmitting port queues a shutdown LLDPDU (TTL 0); afterwards
    /// nothing is sent or received.
    pub fn shutdown(&mut self, now: Instant) {
        self.advance_clock(now);
        if self.stopped {
            return;
        }
        for port in 0..self.ports.len() {
            let state = &self.ports[port];
            if state.local.admin_status.transmits() && state.link_up {
                let local = state.local.clone();
                self.queue_frame(port, &local, 0);
            }
        }
        self.stopped = true;
    }

    fn credit_available_at(&self, port: &PortState) -> Instant {
        if port.tx.credit > 0 {
            Instant::ZERO
        } else {
            port.tx.credit_tick.saturating_add_nanos(NANOS_PER_SECOND)
        }
    }

    fn run_timers(&mut self) {
        if self.stopped {
            return;
        }
        let now = self.now;
        for port in 0..self.ports.len() {
            // Ageing (802.1AB-2016 9.2.7.6 rxInfoAge).
            let state = &mut self.ports[port];
            let before = state.neighbours.len();
            let mut aged = Vec::new();
            state.neighbours.retain(|n| {
                if n.expires <= now {
                    aged.push(n.id.clone());
                    false
                } else {
                    true
                }
            });
            if state.neighbours.len() != before {
                state.counters.rx_ageouts_total += aged.len() as u64;
                state.counters.neighbour_deletes_total += aged.len() as u64;
                for id in aged {
                    push_event(
                        &mut self.events,
                        &mut self.events_dropped,
                        Event::NeighbourRemoved {
                            port,
                            neighbour: id,
                            reason: RemoveReason::Aged,
                        },
                    );
                }
                self.reevaluate(port);
            }

            // Credits: one per whole second elapsed, at most TX_CREDIT_MAX.
            let state = &mut self.ports[port];
            let elapsed = now.saturating_nanos_since(state.tx.credit_tick) / NANOS_PER_SECOND;
            if elapsed > 0 {
                let credit = u64::from(state.tx.credit) + elapsed;
                state.tx.credit = credit.min(u64::from(TX_CREDIT_MAX)) as u8;
                state.tx.credit_tick = state
                    .tx
                    .credit_tick
                    .saturating_add_nanos(elapsed.saturating_mul(NANOS_PER_SECOND));
            }

            // Transmission.
            if !state.local.admin_status.transmits() || !state.link_up || state.tx.next_tx > now {
                continue;
            }
            if state.tx.credit == 0 {
                continue; // retried when the next credit arrives (poll_timeout says when)
            }
            state.tx.credit -= 1;
            let interval = if state.tx.fast_remaining > 0 {
                state.tx.fast_remaining -= 1;
                seconds(self.system.tx_fast_interval_s)
            } else {
                seconds(self.system.tx_interval_s)
            };
            state.tx.next_tx = now.saturating_add_nanos(interval);
            let local = state.local.clone();
            let ttl = self.system.ttl_s;
            self.queue_frame(port, &local, ttl);
        }
    }

    fn queue_frame(&mut self, port: usize, local: &LocalPort, ttl_s: u16) {
        match build_frame(&self.system, local, ttl_s) {
            Ok(frame) => {
                self.ports[port].counters.tx_frames_total += 1;
                self.transmits.push_back(Transmit { port, frame });
            }
            Err(_) => self.ports[port].counters.tx_length_errors_total += 1,
        }
    }

    fn reevaluate(&mut self, port: usize) {
        let state = &mut self.ports[port];
        let peer: Option<&PeerDcbx> = dcbx_neighbour(&state.neighbours).map(|n| &n.info.dcbx);
        let verdict = evaluate(&state.local.dcbx, peer);
        if verdict != state.verdict {
            let previous = std::mem::replace(&mut state.verdict, verdict.clone());
            push_event(
                &mut self.events,
                &mut self.events_dropped,
                Event::VerdictChanged {
                    port,
                    previous,
                    verdict,
                },
            );
        }
    }
}

fn push_event(events: &mut VecDeque<Event>, dropped: &mut u64, event: Event) {
    if events.len() >= MAX_QUEUED_EVENTS {
        events.pop_front();
        *dropped += 1;
    }
    events.push_back(event);
}

/// The LLDPDU frame `port` sends with `ttl_s` (0 = shutdown): Chassis ID (MAC), Port ID
/// (interface name), TTL, Port Description, System Name, System Description, System
/// Capabilities, ETS Configuration, ETS Recommendation, PFC Configuration, Application Priority,
/// End. A shutdown LLDPDU carries only the mandatory TLVs (802.1AB-2016 9.2.7.3).
///
/// # Errors
/// `BadLength` if it does not fit 1500 bytes (cannot happen with the configuration's limits).
pub fn build_frame(
    system: &LocalSystem,
    local: &LocalPort,
    ttl_s: u16,
) -> Result<Vec<u8>, WireError> {
    let chassis = MacAddress(system.chassis_mac);
    let dcbx = local.dcbx.tlvs();
    let optional: Vec<TlvRepr<'_>> = if ttl_s == 0 {
        Vec::new()
    } else {
        let mut tlvs = vec![
            TlvRepr::PortDescription(local.description.as_bytes()),
            TlvRepr::SystemName(system.system_name.as_bytes()),
            TlvRepr::SystemDescription(system.system_description.as_bytes()),
            TlvRepr::SystemCapabilities(SystemCapabilities {
                capabilities: system.capabilities,
                enabled: system.enabled_capabilities,
            }),
        ];
        tlvs.extend(dcbx);
        tlvs
    };
    let lldpdu = LldpduRepr {
        chassis_id: WireChassisId::mac(&chassis),
        port_id: WirePortId {
            subtype: PortIdSubtype::InterfaceName,
            id: local.name.as_bytes(),
        },
        ttl_s,
        optional: Tlvs::Decoded(&optional),
    };
    let mut frame = vec![0u8; lldpdu.frame_len()];
    let len = lldpdu.emit_frame(MacAddress(local.mac), NEAREST_BRIDGE, &mut frame)?;
    frame.truncate(len);
    Ok(frame)
}
