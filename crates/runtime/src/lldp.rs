//! The switch's LLDP/DCBX agent ([`headroom_lldp::Agent`], sans-IO) driven by the control
//! thread (docs/ARCHITECTURE.md, "Threads"; docs/operations.md, "LLDP and DCBX").
//!
//! Per turn of the control loop ([`Lldp::handle_punt`] for each punted LLDP frame while the
//! punt rings are drained, then [`Lldp::pump`]):
//!
//! 1. LLDP frames the core punted (reason `lldp`, rate-limited by CoPP in the dataplane) on a
//!    port whose `lldp_admin_status` is not `disabled` go to [`headroom_lldp::Agent::handle_rx`]:
//!    the agent owns LLDP on that port. A routed port's host interface (TAP) then does not get
//!    them: two LLDP agents on one port (ours and an lldpd on the TAP) would show the peer two
//!    neighbours with different chassis IDs. On a port whose LLDP is `disabled` the frames go
//!    where other punts go (the TAP of a routed port, where an lldpd may run as on SONiC, or
//!    counted unconsumed). `headroom capture` sees every LLDP frame either way.
//! 2. [`headroom_lldp::Agent::handle_timeout`] when its deadline passed; the loop's wait is
//!    bounded by that deadline ([`Lldp::until_deadline`]), so there is no extra thread and no
//!    polling of the agent.
//! 3. [`headroom_lldp::Agent::poll_transmit`] → [`Running::inject`]: the LLDPDU leaves its port
//!    through the normal egress path (classified, CoPP-limited, scheduled, counted as
//!    `inject_frames`); a refusal is counted here per port (`tx_inject_refused`).
//! 4. [`headroom_lldp::Agent::poll_event`] → the log, once per change (neighbour added, changed,
//!    removed; DCBX verdict changed), and the last [`RECENT_EVENTS`] kept for `show`.
//!
//! The agent has its own monotonic clock: it outlives the dataplanes of reconfigurations
//! (each starts its clock anew), and its neighbour tables with it. A reconfiguration replaces
//! the local view ([`Lldp::reconfigure`]); at shutdown every transmitting port sends a TTL-0
//! LLDPDU ([`Lldp::shutdown`]).

use crate::clock::MonotonicClock;
use crate::protocol::{
    DcbxApp, DcbxFinding, DcbxRow, DcbxSide, LldpEventRow, LldpNeighborRow, LldpPortRow, LldpView,
};
use crate::Running;
use headroom_config::Config;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_lldp::verdict::priority_list;
use headroom_lldp::{local_view, Agent, Event, Neighbour, RemoveReason, RxError};
use headroom_wire::lldp::dcbx::{AppEntry, EtsTables, PfcConfiguration, Tsa};
use std::collections::VecDeque;
use std::time::Duration;

/// Events kept for `show lldp neighbors` (the log has them all).
pub const RECENT_EVENTS: usize = 256;

/// LLDPDUs sent at shutdown wait at most this long for the inject lcore to take them.
pub const SHUTDOWN_FLUSH: Duration = Duration::from_millis(100);

/// What the runtime counts per port beside the agent's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LldpTxCounters {
    /// LLDPDUs handed to the dataplane ([`Running::inject`] accepted them).
    pub injected: u64,
    /// LLDPDUs the dataplane refused (inject ring full, no inject lcore); lost.
    pub inject_refused: u64,
}

/// An event as logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LldpEventLine {
    /// When (the agent's clock).
    pub at: Instant,
    /// The port's name.
    pub port: String,
    /// `neighbor_added`, `neighbor_changed`, `neighbor_removed`, `dcbx_verdict`.
    pub kind: &'static str,
    /// The sentence.
    pub message: String,
    /// Logged as a warning (a DCBX mismatch).
    pub warning: bool,
}

/// The agent and its driving state (module docs).
#[derive(Debug)]
pub struct Lldp {
    agent: Agent,
    clock: MonotonicClock,
    names: Vec<String>,
    tx: Vec<LldpTxCounters>,
    recent: VecDeque<LldpEventLine>,
    events_logged: u64,
}

impl Lldp {
    /// An agent for `config`'s ports; its first LLDPDUs are due at once (sent by the first
    /// [`Lldp::pump`]).
    #[must_use]
    pub fn new(config: &Config) -> Self {
        let clock = MonotonicClock::new();
        let (system, ports) = local_view(config);
        let names = ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        let tx = vec![LldpTxCounters::default(); names.len()];
        Self {
            agent: Agent::new(system, ports, clock.now()),
            clock,
            names,
            tx,
            recent: VecDeque::new(),
            events_logged: 0,
        }
    }

    /// The agent (for views and tests).
    #[must_use]
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The agent's clock.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// Whether the agent owns LLDP on `port` (its admin status is not `disabled`): its punted
    /// LLDP frames are the agent's, not the host interface's.
    #[must_use]
    pub fn owns(&self, port: PortId) -> bool {
        self.agent
            .port(port.index())
            .is_some_and(|p| p.local.admin_status != headroom_config::LldpAdminStatus::Disabled)
    }

    /// An LLDP frame punted on `port` (call only where [`Lldp::owns`] holds).
    pub fn handle_punt(&mut self, port: PortId, frame: &[u8]) {
        self.agent.handle_rx(port.index(), frame, self.clock.now());
    }

    /// How long the control loop may wait before the agent has something to do (`None`:
    /// nothing scheduled).
    #[must_use]
    pub fn until_deadline(&self) -> Option<Duration> {
        self.agent
            .poll_timeout()
            .map(|deadline| self.clock.until(deadline))
    }

    /// Runs the timers if due, sends what the agent queued through `running`, logs its events.
    pub fn pump(&mut self, running: &mut Running) {
        let now = self.clock.now();
        if self.agent.poll_timeout().is_some_and(|d| d <= now) {
            self.agent.handle_timeout(now);
        }
        self.transmit(running);
        self.log_events();
    }

    fn transmit(&mut self, running: &mut Running) {
        while let Some(t) = self.agent.poll_transmit() {
            let Some(counters) = self.tx.get_mut(t.port) else {
                continue;
            };
            let port = PortId(u16::try_from(t.port).unwrap_or(u16::MAX));
            match running.inject(port, &t.frame) {
                Ok(()) => counters.injected += 1,
                Err(e) => {
                    if counters.inject_refused == 0 {
                        tracing::warn!(port = %self.names[t.port], error = %e, "an LLDPDU could not be sent");
                    }
                    counters.inject_refused += 1;
                }
            }
        }
    }

    fn log_events(&mut self) {
        while let Some(event) = self.agent.poll_event() {
            let line = self.render(&event);
            if line.warning {
                tracing::warn!(port = %line.port, event = line.kind, "{}", line.message);
            } else {
                tracing::info!(port = %line.port, event = line.kind, "{}", line.message);
            }
            if self.recent.len() >= RECENT_EVENTS {
                self.recent.pop_front();
            }
            self.recent.push_back(line);
            self.events_logged += 1;
        }
    }

    fn name(&self, port: usize) -> String {
        self.names
            .get(port)
            .cloned()
            .unwrap_or_else(|| format!("port{port}"))
    }

    fn render(&self, event: &Event) -> LldpEventLine {
        let at = self.clock.now();
        match event {
            Event::NeighbourAdded { port, neighbour } => {
                let system = self
                    .agent
                    .port(*port)
                    .and_then(|v| v.neighbours.iter().find(|n| &n.id == neighbour))
                    .and_then(|n| n.info.system_name.clone());
                let system = system.map_or_else(String::new, |s| format!(" ({s})"));
                LldpEventLine {
                    at,
                    port: self.name(*port),
                    kind: "neighbor_added",
                    message: format!(
                        "LLDP neighbor added on {}: chassis {}{system}",
                        self.name(*port),
                        neighbour
                    ),
                    warning: false,
                }
            }
            Event::NeighbourChanged { port, neighbour } => LldpEventLine {
                at,
                port: self.name(*port),
                kind: "neighbor_changed",
                message: format!(
                    "LLDP neighbor changed on {}: chassis {neighbour}",
                    self.name(*port)
                ),
                warning: false,
            },
            Event::NeighbourRemoved {
                port,
                neighbour,
                reason,
            } => LldpEventLine {
                at,
                port: self.name(*port),
                kind: "neighbor_removed",
                message: format!(
                    "LLDP neighbor removed on {}: chassis {neighbour} ({})",
                    self.name(*port),
                    match reason {
                        RemoveReason::Shutdown => "it sent a shutdown LLDPDU",
                        RemoveReason::Aged => "its TTL expired",
                        RemoveReason::Disabled => "LLDP reception disabled on the port",
                        RemoveReason::LinkDown => "the port's link went down",
                    }
                ),
                warning: false,
            },
            Event::VerdictChanged {
                port,
                previous,
                verdict,
            } => {
                let findings = verdict
                    .findings
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ");
                let findings = if findings.is_empty() {
                    String::new()
                } else {
                    format!(": {findings}")
                };
                LldpEventLine {
                    at,
                    port: self.name(*port),
                    kind: "dcbx_verdict",
                    message: format!(
                        "DCBX {} on port {} (was {}){findings}",
                        verdict.status,
                        self.name(*port),
                        previous.status
                    ),
                    warning: verdict.status == headroom_lldp::DcbxStatus::Mismatch,
                }
            }
        }
    }

    /// The events logged lately, oldest first (at most [`RECENT_EVENTS`]).
    pub fn recent_events(&self) -> impl Iterator<Item = &LldpEventLine> {
        self.recent.iter()
    }

    /// Events logged since start.
    #[must_use]
    pub fn events_logged(&self) -> u64 {
        self.events_logged
    }

    /// The runtime's transmit counters of `port`.
    #[must_use]
    pub fn tx_counters(&self, port: usize) -> LldpTxCounters {
        self.tx.get(port).copied().unwrap_or_default()
    }

    /// The ports' names, in port order.
    #[must_use]
    pub fn port_names(&self) -> &[String] {
        &self.names
    }

    /// The link of `port` went down or came back (the control plane's link poll): down forgets
    /// the port's neighbours and stops its LLDPDUs, up sends at once with fast transmission.
    pub fn set_link(&mut self, port: PortId, up: bool) {
        self.agent.set_link(port.index(), up, self.clock.now());
    }

    /// Takes `config`'s local view. With the same ports (names, in order) the agent keeps its
    /// neighbour tables and sends at once where what it advertises changed (a port whose LLDP
    /// is turned off sends a shutdown LLDPDU, sent by the next [`Lldp::pump`]); otherwise a new
    /// agent starts (neighbours are learned again within one of their transmit intervals).
    pub fn reconfigure(&mut self, config: &Config) {
        let (system, ports) = local_view(config);
        let names = ports.iter().map(|p| p.name.clone()).collect::<Vec<_>>();
        let now = self.clock.now();
        if names == self.names {
            self.agent.set_local_system(system, now);
            for (i, port) in ports.into_iter().enumerate() {
                self.agent.set_local_port(i, port, now);
            }
        } else {
            self.log_events();
            self.agent = Agent::new(system, ports, now);
            self.tx = vec![LldpTxCounters::default(); names.len()];
            self.names = names;
        }
    }

    /// Every transmitting port sends a TTL-0 LLDPDU (802.1AB-2016 9.2.7.3: the neighbours
    /// forget us now rather than after our TTL); waits up to [`SHUTDOWN_FLUSH`] for the
    /// dataplane to take them, so that the stop that follows drains them out.
    pub fn shutdown(&mut self, running: &mut Running) {
        self.agent.shutdown(self.clock.now());
        self.transmit(running);
        self.log_events();
        let end = std::time::Instant::now() + SHUTDOWN_FLUSH;
        while running.inject_pending() > 0 && std::time::Instant::now() < end {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// `show lldp neighbors`: every neighbour, then every port's counters.
    #[must_use]
    pub fn view(&self) -> LldpView {
        let now = self.clock.now();
        let mut neighbors = Vec::new();
        let mut ports = Vec::new();
        for (i, name) in self.names.iter().enumerate() {
            let Some(view) = self.agent.port(i) else {
                continue;
            };
            for n in view.neighbours {
                neighbors.push(neighbor_row(name, n, now));
            }
            let c = view.counters;
            let tx = self.tx[i];
            ports.push(LldpPortRow {
                port: name.clone(),
                admin_status: view.local.admin_status.as_str().to_owned(),
                tx_frames: c.tx_frames_total,
                tx_injected: tx.injected,
                tx_inject_refused: tx.inject_refused,
                tx_length_errors: c.tx_length_errors_total,
                rx_frames: c.rx_frames_total,
                rx_discarded: c.rx_frames_discarded_total,
                rx_errors: RxError::ALL
                    .iter()
                    .map(|r| (r.as_str().to_owned(), c.rx_frames_errors_of(*r)))
                    .collect(),
                rx_table_full: c.rx_frames_table_full_total,
                rx_disabled: c.rx_frames_disabled_total,
                rx_tlvs_discarded: c.rx_tlvs_discarded_total,
                rx_tlvs_unrecognized: c.rx_tlvs_unrecognized_total,
                ageouts: c.rx_ageouts_total,
                inserts: c.neighbour_inserts_total,
                deletes: c.neighbour_deletes_total,
            });
        }
        LldpView {
            system_name: self.agent.system().system_name.clone(),
            chassis_id: mac_text(self.agent.system().chassis_mac),
            neighbors,
            ports,
            recent_events: self
                .recent
                .iter()
                .map(|e| LldpEventRow {
                    age_s: now.saturating_nanos_since(e.at) / 1_000_000_000,
                    port: e.port.clone(),
                    kind: e.kind.to_owned(),
                    message: e.message.clone(),
                })
                .collect(),
        }
    }

    /// `show dcbx`: one row per port, local against the peer's, and the verdict.
    #[must_use]
    pub fn dcbx(&self) -> Vec<DcbxRow> {
        self.names
            .iter()
            .enumerate()
            .filter_map(|(i, name)| {
                let view = self.agent.port(i)?;
                let local = &view.local.dcbx;
                let peer = view.dcbx_neighbour();
                Some(DcbxRow {
                    port: name.clone(),
                    admin_status: view.local.admin_status.as_str().to_owned(),
                    status: view.verdict.status.as_str().to_owned(),
                    findings: view
                        .verdict
                        .findings
                        .iter()
                        .map(|f| DcbxFinding {
                            code: f.code().to_owned(),
                            mismatch: f.is_mismatch(),
                            message: f.to_string(),
                        })
                        .collect(),
                    neighbor: peer.map(|n| n.id.to_string()),
                    local: DcbxSide {
                        pfc: Some(pfc_side(&local.pfc)),
                        ets_willing: Some(local.ets.willing),
                        ets: Some(ets_side(&local.ets.tables)),
                        ets_recommendation: Some(ets_side(&local.ets_recommendation.tables)),
                        app: Some(local.app.iter().map(app_row).collect()),
                    },
                    peer: peer.map(|n| {
                        let d = &n.info.dcbx;
                        DcbxSide {
                            pfc: d.pfc.as_ref().map(pfc_side),
                            ets_willing: d.ets.map(|e| e.willing),
                            ets: d.ets.map(|e| ets_side(&e.tables)),
                            ets_recommendation: d.ets_recommendation.map(|e| ets_side(&e.tables)),
                            app: d.app.as_ref().map(|a| a.iter().map(app_row).collect()),
                        }
                    }),
                })
            })
            .collect()
    }
}

fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// lldpctl's capability letters (`B` bridge, `R` router, …), enabled ones in capitals as
/// SONiC's `show lldp table` prints them.
fn capabilities_text(c: Option<headroom_wire::lldp::SystemCapabilities>) -> String {
    use headroom_wire::lldp::capability as cap;
    let Some(c) = c else {
        return String::new();
    };
    [
        (cap::OTHER, 'O'),
        (cap::REPEATER, 'P'),
        (cap::BRIDGE, 'B'),
        (cap::WLAN_AP, 'W'),
        (cap::ROUTER, 'R'),
        (cap::TELEPHONE, 'T'),
        (cap::DOCSIS, 'C'),
        (cap::STATION, 'S'),
    ]
    .iter()
    .filter(|(bit, _)| c.capabilities & bit != 0)
    .map(|(bit, letter)| {
        if c.enabled & bit != 0 {
            *letter
        } else {
            letter.to_ascii_lowercase()
        }
    })
    .collect()
}

fn neighbor_row(port: &str, n: &Neighbour, now: Instant) -> LldpNeighborRow {
    LldpNeighborRow {
        local_port: port.to_owned(),
        chassis_id: n.id.chassis_id.to_string(),
        port_id: n.id.port_id.to_string(),
        port_description: n.info.port_description.clone(),
        system_name: n.info.system_name.clone(),
        system_description: n.info.system_description.clone(),
        capabilities: capabilities_text(n.info.capabilities),
        management_addresses: n
            .info
            .management_addresses
            .iter()
            .map(ToString::to_string)
            .collect(),
        ttl_s: n.info.ttl_s,
        age_s: now.saturating_nanos_since(n.first_seen) / 1_000_000_000,
        expires_in_s: n
            .expires
            .saturating_nanos_since(now)
            .div_ceil(1_000_000_000),
        dcbx: !n.info.dcbx.is_empty(),
        src_mac: mac_text(n.info.src_mac),
    }
}

fn pfc_side(p: &PfcConfiguration) -> crate::protocol::DcbxPfc {
    crate::protocol::DcbxPfc {
        enable: priority_list(p.enable),
        enable_bitmap: p.enable,
        willing: p.willing,
        mbc: p.mbc,
        cap: p.pfc_cap,
    }
}

fn tsa_name(t: Tsa) -> String {
    match t {
        Tsa::Strict => "strict".into(),
        Tsa::CreditBasedShaper => "cbs".into(),
        Tsa::Ets => "ets".into(),
        Tsa::VendorSpecific => "vendor".into(),
        Tsa::Unknown(v) => format!("reserved({v})"),
    }
}

fn ets_side(t: &EtsTables) -> crate::protocol::DcbxEts {
    crate::protocol::DcbxEts {
        priority_tc: t.priority_tc,
        tc_bandwidth_percent: t.tc_bandwidth_percent,
        tsa: t.tsa.iter().map(|&x| tsa_name(x)).collect(),
    }
}

fn app_row(e: &AppEntry) -> DcbxApp {
    DcbxApp {
        selector: u8::from(e.selector),
        protocol: e.protocol,
        priority: e.priority,
    }
}
