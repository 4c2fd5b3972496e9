//! headroom-sim: a deterministic virtual-time harness of several headroom switches, hosts and
//! ideal links.
//!
//! The simulator drives the real dataplane — a single-lcore [`LcoreStep`] over [`HeapFrame`]s
//! per switch — through the same step and in the same call order as the runtime's lcores, with
//! time passed in: no thread, no clock, no I/O. It reuses `headroom-core` and `headroom-wire`
//! only.
//!
//! # Model
//!
//! * **Switches** are `LcoreStep<HeapFrame>` built from [`SwitchParams`]; forwarding, buffer
//!   accounting, PFC generation and reception, the watchdog, ECN, punting: all of it is the
//!   core's. A switch takes no time to process a frame. There is no control plane: frames a
//!   switch punts are counted ([`Sim::punted_frames`]) and dropped, and a routed fabric's
//!   routes are computed once ([`Sim::install_routes`], [`routing`]).
//! * **Links** ([`link`]) are full duplex, lossless, with a bit rate and a fixed propagation
//!   delay. Each direction carries one frame at a time; a frame arrives whole after its wire
//!   time (preamble, FCS and inter-frame gap included) plus the propagation delay. A switch
//!   port's link rate must equal the port's speed.
//! * **Hosts** ([`host`]) are NICs: they send the frames of their [`flow`]s round robin, honour
//!   PFC per priority (quanta × 512 bit times at the link rate), and absorb everything they
//!   receive at line rate (a host never sends PFC). Receiving hosts count each flow's frames,
//!   bytes, sequence gaps and CE marks.
//!
//! # Time and call order
//!
//! The simulation jumps from event to event. The next event is the earliest of: a frame
//! arriving at the end of a link, a link's transmitter becoming free, a switch's
//! [`LcoreStep::poll_timeout`] (which names every deadline the core has, the storm-rate windows
//! included, so there is no fallback tick), and a host becoming able to send (a pause expiring,
//! a rate-limited or delayed flow becoming ready). With none of these, nothing will ever happen
//! again: [`Sim::next_event_time`] is [`Instant::MAX`]. At each event time `t`, in the order
//! documented on [`headroom_core::step`], for every switch that is *due* (it received frames at
//! `t`, or its wake time — its core's deadline, a busy transmitter becoming free, released
//! cells waiting to be pulled — has come, or something changed from outside; a switch that is
//! not due would do nothing, see `Sim::switch_wake_after`; [`SimConfig::drive_every_switch`]
//! drives all at every step, with the same results):
//!
//! 1. frames whose last bit arrived by `t` are delivered: to switches with
//!    [`LcoreStep::handle_rx_burst`] (one burst per port), to hosts;
//! 2. [`LcoreStep::handle_timeout`];
//! 3. every free transmitter sends at most one frame: a switch port what
//!    [`LcoreStep::poll_tx_burst`] returns (PFC first), a host its next eligible frame;
//! 4. [`LcoreStep::poll_punt`] until empty (counted, dropped);
//! 5. [`LcoreStep::poll_event`] until empty, into [`Sim::events`];
//! 6. the switch's next wake time.
//!
//! Everything is iterated in index order, so a run is a pure function of its inputs. Nothing
//! random is needed; parameters carry the core's WRED seed.
//!
//! # Bounds
//!
//! Every call that advances time is bounded by [`SimConfig::max_steps`] (events processed over
//! the simulator's life) and fails with [`SimError::StepLimit`] rather than spin; time strictly
//! increases at every step, except one step at the current instant after an outside change. Events kept are bounded by [`SimConfig::max_events`] (the excess is
//! counted in [`Sim::events_lost`]); injected frames per host by
//! [`host::MAX_INJECTED_FRAMES`].
//!
//! # Example
//!
//! ```
//! use headroom_core::params::presets;
//! use headroom_core::time::Instant;
//! use headroom_core::types::{PortId, Priority};
//! use headroom_sim::{Endpoint, FlowSpec, HostParams, LinkParams, Sim};
//!
//! const GBPS: u64 = 1_000_000_000;
//! let mut sim = Sim::new();
//! let sw = sim.add_switch(presets::simple(2, GBPS)).unwrap();
//! let a = sim.add_host(HostParams::numbered(1));
//! let b = sim.add_host(HostParams::numbered(2));
//! let link = LinkParams::new(GBPS, 1_000);
//! sim.connect(Endpoint::Host(a), Endpoint::Switch(sw, PortId(0)), link).unwrap();
//! sim.connect(Endpoint::Host(b), Endpoint::Switch(sw, PortId(1)), link).unwrap();
//! let mut spec = FlowSpec::new(a, b, 3, Priority::from_low_bits(3));
//! spec.frames = Some(100);
//! let flow = sim.add_flow(spec).unwrap();
//! sim.run_until(Instant::from_millis(2)).unwrap();
//! assert_eq!(sim.flow(flow).delivered_frames, 100);
//! assert_eq!(sim.flow(flow).lost_frames, 0);
//! ```
#![forbid(unsafe_code)]

pub mod flow;
pub mod host;
pub mod link;
pub mod output;
mod plot;
pub mod rdma;
pub mod routing;
pub mod scenario;
pub mod swarm;

pub use flow::{FlowId, FlowSpec, FlowStats};
pub use host::{Host, HostId, HostParams, HostStats};
pub use link::{Channel, ChannelStats, Link, LinkId, LinkParams};
pub use rdma::{
    NicFaults, PfcStorm, RdmaFlowId, RdmaFlowSpec, RdmaFlowStats, RdmaHost, RdmaHostParams,
};
pub use routing::{EcmpSeeds, NextHopPackets, SwitchRoutes};

use flow::Flow;
use headroom_core::events::Event;
use headroom_core::frame::HeapFrame;
use headroom_core::params::{ParamsError, SwitchParams};
use headroom_core::route::{FibError, FibSender};
use headroom_core::step::LcoreStep;
use headroom_core::time::{Duration, Instant};
use headroom_core::types::PortId;
use std::collections::VecDeque;

/// Index of a switch in its [`Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SwitchId(pub usize);

/// One end of a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// A port of a switch.
    Switch(SwitchId, PortId),
    /// A host's NIC.
    Host(HostId),
}

/// Limits of a simulation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// Most steps (event times processed) over the simulator's life.
    pub max_steps: u64,
    /// Most switch events kept in [`Sim::events`].
    pub max_events: usize,
    /// Ask every host with a free link for a frame at every step, as the simulator did before
    /// it kept each host's wake time: slower, and the results are the same (a test checks
    /// it). Off by default.
    pub poll_every_host: bool,
    /// Drive every switch at every step (its received bursts, `handle_timeout`, every free
    /// transmitter), as the simulator did before it kept each switch's wake time: slower on
    /// fabrics, and the results are the same (a test checks it). Off by default.
    pub drive_every_switch: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            max_steps: 200_000_000,
            max_events: 1 << 20,
            poll_every_host: false,
            drive_every_switch: false,
        }
    }
}

/// An event a switch reported, with the switch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimEvent {
    /// The switch that reported it.
    pub switch: SwitchId,
    /// What it reported (carries its own time).
    pub event: Event,
}

/// Why the simulator refused something or stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimError {
    /// No such switch.
    UnknownSwitch,
    /// The switch has no such port.
    UnknownPort,
    /// No such host.
    UnknownHost,
    /// No such flow.
    UnknownFlow,
    /// The endpoint already has a link.
    AlreadyConnected(Endpoint),
    /// The endpoint has no link.
    NotConnected(Endpoint),
    /// A link's rate differs from the speed of a switch port it connects.
    RateMismatch {
        /// The port.
        endpoint: Endpoint,
        /// The port's speed.
        port_bps: u64,
        /// The link's rate.
        link_bps: u64,
    },
    /// A link's parameters are unusable.
    InvalidLink(String),
    /// A flow's parameters are unusable.
    InvalidFlow(String),
    /// The configuration is unusable.
    InvalidConfig(String),
    /// The switch parameters were refused by the core.
    Switch(ParamsError),
    /// A switch's FIB refused a route ([`Sim::install_routes`]).
    Fib(FibError),
    /// The host's injection queue is full.
    InjectQueueFull(HostId),
    /// [`Sim::step`] found nothing that will ever happen.
    Idle {
        /// Virtual time.
        at: Instant,
    },
    /// A RoCE NIC's configuration was refused (the NIC's message).
    Nic(String),
    /// The step budget ran out: the run is longer than planned, or something livelocks.
    StepLimit {
        /// Virtual time reached.
        at: Instant,
        /// Steps processed.
        steps: u64,
    },
}

impl core::fmt::Display for SimError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownSwitch => f.write_str("no such switch"),
            Self::UnknownPort => f.write_str("no such switch port"),
            Self::UnknownHost => f.write_str("no such host"),
            Self::UnknownFlow => f.write_str("no such flow"),
            Self::AlreadyConnected(e) => write!(f, "{e:?} already has a link"),
            Self::NotConnected(e) => write!(f, "{e:?} has no link"),
            Self::RateMismatch {
                endpoint,
                port_bps,
                link_bps,
            } => write!(
                f,
                "{endpoint:?} runs at {port_bps} b/s, the link at {link_bps} b/s"
            ),
            Self::InvalidLink(why) => write!(f, "invalid link: {why}"),
            Self::InvalidFlow(why) => write!(f, "invalid flow: {why}"),
            Self::InvalidConfig(why) => write!(f, "invalid configuration: {why}"),
            Self::Switch(e) => write!(f, "switch parameters refused: {e}"),
            Self::Fib(e) => write!(f, "FIB refused a route: {e}"),
            Self::InjectQueueFull(h) => write!(f, "{h:?}: injection queue full"),
            Self::Idle { at } => write!(f, "nothing will happen after {at:?}"),
            Self::Nic(why) => write!(f, "RoCE NIC refused: {why}"),
            Self::StepLimit { at, steps } => write!(
                f,
                "step limit reached: {steps} steps at {at:?} (run longer than planned, or a livelock)"
            ),
        }
    }
}

impl std::error::Error for SimError {}

#[derive(Debug)]
struct SwitchNode {
    sw: LcoreStep<HeapFrame>,
    /// Frames the switch punted (there is no control plane to take them).
    punted: u64,
    /// Per port: the link and the side of it this port transmits on.
    ports: Vec<Option<(LinkId, usize)>>,
    /// Per port: frames received at the current step.
    rx: Vec<Vec<HeapFrame>>,
    /// Per port: frames `poll_tx_burst` returned beyond the one the link took.
    pending: Vec<VecDeque<HeapFrame>>,
    /// The control side of the switch's FIB, once routes are installed ([`routing`]).
    fib: Option<FibSender>,
    /// Its next hops (id, port, neighbour MAC, whether in an ECMP group), by port.
    next_hops: Vec<(headroom_core::route::NextHopId, PortId, [u8; 6], bool)>,
    /// When the switch next needs driving, as of the last time it was driven
    /// (`Instant::ZERO`: at the next step). A switch is driven at a step when it received
    /// frames, or this time has come, or after a poke; otherwise nothing it would do at the
    /// step differs from doing nothing (see [`Sim::switch_wake_after`]).
    wake: Instant,
    /// Whether the switch is driven at the current step.
    driven: bool,
}

/// The simulator. See the [crate documentation](crate).
#[derive(Debug)]
pub struct Sim {
    config: SimConfig,
    now: Instant,
    steps: u64,
    switches: Vec<SwitchNode>,
    hosts: Vec<Host>,
    host_links: Vec<Option<(LinkId, usize)>>,
    /// Per host: when its transmitter next needs asking for a frame, as the scans found it
    /// (`Instant::ZERO`: at the next step its link is free). A host is asked only then, or
    /// when it received a frame, or after a poke: its NIC's `poll_timeout` names every time
    /// `handle_timeout` and `poll_transmit` have work, so the other calls found nothing. Being
    /// asked, receiving and a poke reset it to `Instant::ZERO`; until then the scans keep it
    /// rather than ask the NIC again ([`Sim::host_wake_at_scan`]; docs/perf.md, "Simulator").
    host_wake: Vec<Instant>,
    /// Per host: the router MAC it addresses its frames to, once routes are installed
    /// ([`Sim::install_routes`]); empty on a bridged fabric.
    host_gateways: Vec<Option<[u8; 6]>>,
    links: Vec<Link>,
    flows: Vec<Flow>,
    events: Vec<SimEvent>,
    events_lost: u64,
    tx_scratch: Vec<HeapFrame>,
    /// Something changed from outside between steps: process the current instant again.
    poked: bool,
    rdma_flows: Vec<RdmaFlowEnds>,
    /// Whether the RoCE NICs are built (at the first step).
    rdma_started: bool,
}

/// Where an RDMA flow's two QPs are.
#[derive(Clone, Debug)]
struct RdmaFlowEnds {
    spec: RdmaFlowSpec,
    src_qp: usize,
    dst_qp: usize,
}

impl Default for Sim {
    fn default() -> Self {
        Self::new()
    }
}

impl Sim {
    /// An empty simulation at time zero with the default [`SimConfig`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            config: SimConfig::default(),
            now: Instant::ZERO,
            steps: 0,
            switches: Vec::new(),
            hosts: Vec::new(),
            host_links: Vec::new(),
            host_wake: Vec::new(),
            host_gateways: Vec::new(),
            links: Vec::new(),
            flows: Vec::new(),
            events: Vec::new(),
            events_lost: 0,
            tx_scratch: Vec::with_capacity(2),
            poked: false,
            rdma_flows: Vec::new(),
            rdma_started: false,
        }
    }

    /// An empty simulation with `config`.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] for a zero step budget.
    pub fn with_config(config: SimConfig) -> Result<Self, SimError> {
        if config.max_steps == 0 {
            return Err(SimError::InvalidConfig("max_steps must be > 0".into()));
        }
        Ok(Self {
            config,
            ..Self::new()
        })
    }

    /// Adds a switch built at the current time.
    ///
    /// # Errors
    /// [`SimError::Switch`] when the core refuses the parameters.
    pub fn add_switch(&mut self, params: SwitchParams) -> Result<SwitchId, SimError> {
        let ports = params.ports.len();
        let sw = LcoreStep::single(params, self.now).map_err(SimError::Switch)?;
        self.switches.push(SwitchNode {
            sw,
            punted: 0,
            ports: vec![None; ports],
            rx: (0..ports).map(|_| Vec::new()).collect(),
            pending: (0..ports).map(|_| VecDeque::new()).collect(),
            fib: None,
            next_hops: Vec::new(),
            wake: Instant::ZERO,
            driven: false,
        });
        Ok(SwitchId(self.switches.len() - 1))
    }

    /// Adds a host (connect it with [`Sim::connect`]).
    pub fn add_host(&mut self, params: HostParams) -> HostId {
        let id = HostId(self.hosts.len());
        self.hosts.push(Host::new(id, params));
        self.host_links.push(None);
        self.host_wake.push(Instant::ZERO);
        id
    }

    /// Adds a RoCE host: its NIC is a [`headroom_rnic::Nic`] built from `rdma` (see
    /// [`rdma`]); give it flows with [`Sim::add_rdma_flow`] and connect it with
    /// [`Sim::connect`] before the first step.
    ///
    /// # Errors
    /// [`SimError::Nic`] when the NIC refuses the template, [`SimError::InvalidConfig`] for a
    /// storm with a zero interval.
    pub fn add_rdma_host(
        &mut self,
        params: HostParams,
        rdma: RdmaHostParams,
    ) -> Result<HostId, SimError> {
        let id = HostId(self.hosts.len());
        let nic = RdmaHost::new(id, params.mac, rdma)?;
        let mut host = Host::new(id, params);
        host.rdma = Some(Box::new(nic));
        self.hosts.push(host);
        self.host_links.push(None);
        self.host_wake.push(Instant::ZERO);
        Ok(id)
    }

    /// Adds an RDMA flow (one QP at each end) between two RoCE hosts, before the first step.
    ///
    /// # Errors
    /// Unknown or non-RoCE hosts, a flow from a host to itself, zero bytes or message size,
    /// a VLAN outside 1..=4094, more than [`headroom_rnic::QPS_MAX`] flows at a host, or a
    /// simulation already started ([`SimError::InvalidFlow`]).
    pub fn add_rdma_flow(&mut self, spec: RdmaFlowSpec) -> Result<RdmaFlowId, SimError> {
        let bad = |why: &str| Err(SimError::InvalidFlow(why.into()));
        if self.rdma_started {
            return bad("RDMA flows are added before the simulation starts");
        }
        if spec.src == spec.dst {
            return bad("a flow needs two different hosts");
        }
        if spec.bytes == Some(0) || spec.message_bytes == 0 {
            return bad("a flow sends at least one byte, in messages of at least one byte");
        }
        if spec.message_bytes > headroom_roce::rc::MESSAGE_LEN_MAX {
            return bad("an RDMA WRITE is at most 2^31 bytes");
        }
        if spec.vlan_id.is_some_and(|v| !(1..=4094).contains(&v)) {
            return bad("VLAN not in 1..=4094");
        }
        let end = |sim: &Self, h: HostId| -> Result<([u8; 6], std::net::IpAddr, u32), SimError> {
            let host = sim.hosts.get(h.0).ok_or(SimError::UnknownHost)?;
            let rdma = host.rdma.as_deref().ok_or_else(|| {
                SimError::InvalidFlow(format!("{} is not a RoCE host", host.params.name))
            })?;
            Ok((host.params.mac, rdma.ip(), rdma.next_qpn()))
        };
        let mut src = end(self, spec.src)?;
        let mut dst = end(self, spec.dst)?;
        // Each QP addresses its frames to its own host's gateway on a routed fabric.
        (src.0, dst.0) = (
            self.next_hop_mac(spec.dst, src.0),
            self.next_hop_mac(spec.src, dst.0),
        );
        let id = RdmaFlowId(self.rdma_flows.len());
        let (sender, receiver) = rdma::qp_pair(id, &spec, src, dst);
        let src_qp = self.hosts[spec.src.0]
            .rdma
            .as_deref_mut()
            .map_or(Err(SimError::UnknownHost), |h| {
                h.add_qp(id, true, &spec, sender)
            })?;
        let dst_qp = match self.hosts[spec.dst.0]
            .rdma
            .as_deref_mut()
            .map_or(Err(SimError::UnknownHost), |h| {
                h.add_qp(id, false, &spec, receiver)
            }) {
            Ok(qp) => qp,
            Err(e) => {
                if let Some(h) = self.hosts[spec.src.0].rdma.as_deref_mut() {
                    h.remove_last_qp();
                }
                return Err(e);
            }
        };
        self.rdma_flows.push(RdmaFlowEnds {
            spec,
            src_qp,
            dst_qp,
        });
        Ok(id)
    }

    /// Builds the RoCE NICs (once, at the first step).
    fn start_rdma(&mut self) -> Result<(), SimError> {
        if self.rdma_started {
            return Ok(());
        }
        self.rdma_started = true;
        let now = self.now;
        for (h, host) in self.hosts.iter_mut().enumerate() {
            let rate = host.rate_bps;
            if let Some(rdma) = host.rdma.as_deref_mut() {
                if self.host_links[h].is_none() {
                    return Err(SimError::NotConnected(Endpoint::Host(HostId(h))));
                }
                rdma.start(now, rate)?;
            }
        }
        Ok(())
    }

    /// An RDMA flow's counters: the sender's (posted, completed, finish) and the receiver's
    /// (delivered).
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn rdma_flow(&self, id: RdmaFlowId) -> RdmaFlowStats {
        let f = &self.rdma_flows[id.0];
        let side = |h: HostId, qp: usize| {
            self.hosts[h.0]
                .rdma
                .as_deref()
                .map(|r| r.qp_stats(qp))
                .unwrap_or_default()
        };
        let mut stats = side(f.spec.src, f.src_qp);
        let rx = side(f.spec.dst, f.dst_qp);
        stats.delivered_bytes = rx.delivered_bytes;
        stats.delivered_messages = rx.delivered_messages;
        stats
    }

    /// An RDMA flow's specification.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn rdma_flow_spec(&self, id: RdmaFlowId) -> &RdmaFlowSpec {
        &self.rdma_flows[id.0].spec
    }

    /// The QP index of an RDMA flow at its sender and at its receiver.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn rdma_flow_qps(&self, id: RdmaFlowId) -> (usize, usize) {
        let f = &self.rdma_flows[id.0];
        (f.src_qp, f.dst_qp)
    }

    /// Every RDMA flow id, in order.
    pub fn rdma_flow_ids(&self) -> impl Iterator<Item = RdmaFlowId> {
        (0..self.rdma_flows.len()).map(RdmaFlowId)
    }

    /// Number of hosts.
    #[must_use]
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Number of switches.
    #[must_use]
    pub fn switch_count(&self) -> usize {
        self.switches.len()
    }

    /// Number of links.
    #[must_use]
    pub fn link_count(&self) -> usize {
        self.links.len()
    }

    fn attachment(&self, e: Endpoint) -> Result<Option<(LinkId, usize)>, SimError> {
        match e {
            Endpoint::Switch(s, p) => self
                .switches
                .get(s.0)
                .ok_or(SimError::UnknownSwitch)?
                .ports
                .get(p.index())
                .copied()
                .ok_or(SimError::UnknownPort),
            Endpoint::Host(h) => self
                .host_links
                .get(h.0)
                .copied()
                .ok_or(SimError::UnknownHost),
        }
    }

    /// Connects two endpoints with a link; `a` transmits on the link's first channel.
    ///
    /// # Errors
    /// Unknown or already connected endpoints, a zero rate, an endpoint linked to itself, a
    /// rate different from a switch port's speed.
    pub fn connect(
        &mut self,
        a: Endpoint,
        b: Endpoint,
        params: LinkParams,
    ) -> Result<LinkId, SimError> {
        if params.rate_bps == 0 {
            return Err(SimError::InvalidLink("rate must be > 0".into()));
        }
        if a == b {
            return Err(SimError::InvalidLink(
                "an endpoint cannot be linked to itself".into(),
            ));
        }
        for e in [a, b] {
            if self.attachment(e)?.is_some() {
                return Err(SimError::AlreadyConnected(e));
            }
            if let Endpoint::Switch(s, p) = e {
                let port_bps = self.switches[s.0].sw.shared().params.ports[p.index()].speed_bps;
                if port_bps != params.rate_bps {
                    return Err(SimError::RateMismatch {
                        endpoint: e,
                        port_bps,
                        link_bps: params.rate_bps,
                    });
                }
            }
        }
        let id = LinkId(self.links.len());
        for (side, e) in [a, b].into_iter().enumerate() {
            match e {
                Endpoint::Switch(s, p) => self.switches[s.0].ports[p.index()] = Some((id, side)),
                Endpoint::Host(h) => {
                    self.host_links[h.0] = Some((id, side));
                    self.hosts[h.0].rate_bps = params.rate_bps;
                }
            }
        }
        self.links.push(Link {
            params,
            ends: [a, b],
            dirs: [Channel::default(), Channel::default()],
        });
        Ok(id)
    }

    /// Adds a flow; its source host starts sending at `spec.start`.
    ///
    /// # Errors
    /// Unknown hosts, or parameters out of range ([`SimError::InvalidFlow`]).
    pub fn add_flow(&mut self, spec: FlowSpec) -> Result<FlowId, SimError> {
        spec.validate(self.hosts.len())?;
        let id = FlowId(self.flows.len());
        if u32::try_from(id.0).is_err() {
            return Err(SimError::InvalidFlow("too many flows".into()));
        }
        let src_mac = self.hosts[spec.src.0].params.mac;
        let dst_mac = self.next_hop_mac(spec.src, self.hosts[spec.dst.0].params.mac);
        let src = spec.src;
        self.flows.push(Flow::new(id, spec, src_mac, dst_mac));
        self.hosts[src.0].flows.push(id);
        self.poked = true;
        Ok(id)
    }

    /// Queues a raw frame for `host` to send as soon as its link is free, ahead of its flows
    /// and regardless of pauses (e.g. a learning hello, or a PFC frame from a storming peer).
    ///
    /// # Errors
    /// Unknown host, or [`SimError::InjectQueueFull`].
    pub fn inject(&mut self, host: HostId, frame: HeapFrame) -> Result<(), SimError> {
        let h = self.hosts.get_mut(host.0).ok_or(SimError::UnknownHost)?;
        if h.inject(frame) {
            self.poked = true;
            Ok(())
        } else {
            Err(SimError::InjectQueueFull(host))
        }
    }

    /// Current virtual time.
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Steps processed so far.
    #[must_use]
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// Queues a learning hello for `host`: a 60-byte broadcast frame (EtherType 0x88B5, IEEE
    /// 802 local experimental) in `vlan`, so that the switches on its path learn the host's MAC
    /// address in that VLAN (IEEE 802.1Q 8.7). See [`Sim::inject`].
    ///
    /// # Errors
    /// As [`Sim::inject`], or [`SimError::InvalidFlow`] for a VLAN outside 1..=4094.
    pub fn hello(&mut self, host: HostId, vlan: Option<u16>) -> Result<(), SimError> {
        let mac = self
            .hosts
            .get(host.0)
            .ok_or(SimError::UnknownHost)?
            .params
            .mac;
        let frame = flow::hello_frame(mac, vlan)?;
        self.inject(host, frame)
    }

    /// When the next step will happen: now if something changed from outside since the last
    /// step ([`Sim::inject`], [`Sim::add_flow`], [`Sim::switch_mut`]), else the earliest
    /// event; [`Instant::MAX`] when nothing will ever happen.
    #[must_use]
    pub fn next_event_time(&self) -> Instant {
        if self.poked {
            return self.now;
        }
        let now = self.now;
        (0..self.hosts.len())
            .filter_map(|h| self.host_wake_at_scan(h))
            .fold(self.next_link_or_switch_event(), |next, wake| {
                earliest_after(now, next, wake)
            })
    }

    /// [`Sim::next_event_time`], keeping each host's wake time for the step and for the next
    /// scans ([`Sim::host_wake`]).
    fn next_event(&mut self) -> Instant {
        if self.poked {
            return self.now;
        }
        let now = self.now;
        let mut next = self.next_link_or_switch_event();
        for h in 0..self.hosts.len() {
            if let Some(wake) = self.host_wake_at_scan(h) {
                self.host_wake[h] = wake;
                next = earliest_after(now, next, wake);
            }
        }
        next
    }

    /// The earliest arrival, transmitter becoming free or switch deadline after now.
    fn next_link_or_switch_event(&self) -> Instant {
        let now = self.now;
        let mut next = Instant::MAX;
        for link in &self.links {
            for c in &link.dirs {
                if let Some(t) = c.next_arrival() {
                    next = earliest_after(now, next, t);
                }
                next = earliest_after(now, next, c.busy_until);
            }
        }
        for node in &self.switches {
            let wake = if node.wake > now && !self.config.drive_every_switch {
                Some(node.wake)
            } else {
                node.sw.poll_timeout(now)
            };
            if let Some(t) = wake {
                next = earliest_after(now, next, t);
            }
        }
        next
    }

    /// When switch `s`, just driven at `now`, next needs driving: the earliest of its core's
    /// deadline and the times its busy transmitters become free, or `Instant::ZERO` (at the
    /// next step) when the core has work now.
    ///
    /// Until then, driving it changes nothing: its core's state changes only through the
    /// calls the simulator makes, so its `poll_timeout` stays the deadline it was (every term
    /// is a time kept in that state — pause expiries, shaper and PFC refresh times, watchdog
    /// polls, storm windows); with no frame received, `handle_rx_burst` is not called;
    /// `handle_timeout` before the deadline has nothing to do; a free transmitter that the
    /// core gave nothing at the last drive gets nothing until one of those changes (a frame
    /// in, a pause over, the shaper ready); and a busy one is asked once it is free. A deadline
    /// at or before now (work the core could do now, such as a pending PFC frame) keeps the
    /// switch driven at every step, as before.
    ///
    /// Cells a sent or dropped frame released wait on the egress side until the ingress side's
    /// next call pulls them ([`LcoreStep::has_releases_to_pull`]); that call is made at the next
    /// step, as the runtime's next loop iteration makes it, so that the PG use the switch
    /// reports is never stale.
    fn switch_wake_after(&self, s: usize, now: Instant) -> Instant {
        let node = &self.switches[s];
        if node.sw.has_releases_to_pull() {
            return Instant::ZERO;
        }
        let mut wake = match node.sw.poll_timeout(now) {
            Some(t) if t <= now => return Instant::ZERO,
            Some(t) => t,
            None => Instant::MAX,
        };
        for &(link, side) in node.ports.iter().flatten() {
            let busy_until = self.links[link.0].dirs[side].busy_until;
            if busy_until > now {
                wake = wake.min(busy_until);
            }
        }
        wake
    }

    /// When host `h` next needs asking for a frame, as of now (`None` without a link;
    /// `Instant::ZERO` while its link is busy: ask it once the link is free; `Instant::MAX`:
    /// never, unless something reaches it).
    ///
    /// A wake time after now that the last scans kept is still the host's: being asked for a
    /// frame, receiving one and a poke each set it to `Instant::ZERO`, so the host's state is
    /// the same as when it was computed, and so is its NIC's deadline (every term of which is
    /// either a time kept in that state or the later of now and such a time, and that time
    /// is after now). Reusing it saves the NIC's `poll_timeout` at most steps (docs/perf.md,
    /// "Simulator"). [`SimConfig::poll_every_host`] asks every host at every step and
    /// recomputes every wake time, as before either saving.
    fn host_wake_at_scan(&self, h: usize) -> Option<Instant> {
        let now = self.now;
        let (link, side) = self.host_links[h]?;
        if !self.links[link.0].dirs[side].is_free(now) {
            return Some(Instant::ZERO);
        }
        let kept = self.host_wake[h];
        if kept > now && !self.config.poll_every_host {
            return Some(kept);
        }
        Some(
            self.hosts[h]
                .next_wake(now, &self.flows)
                .unwrap_or(Instant::MAX),
        )
    }

    /// Processes the next event time and returns it.
    ///
    /// # Errors
    /// [`SimError::StepLimit`] when the step budget is spent, [`SimError::Idle`] when nothing
    /// will ever happen.
    pub fn step(&mut self) -> Result<Instant, SimError> {
        self.start_rdma()?;
        if self.steps >= self.config.max_steps {
            return Err(SimError::StepLimit {
                at: self.now,
                steps: self.steps,
            });
        }
        let t = self.next_event();
        if t == Instant::MAX {
            return Err(SimError::Idle { at: self.now });
        }
        self.step_at(t);
        Ok(t)
    }

    fn step_at(&mut self, t: Instant) {
        debug_assert!(
            t > self.now || self.poked,
            "time strictly increases between steps"
        );
        if self.poked {
            self.host_wake.fill(Instant::ZERO);
            for node in &mut self.switches {
                node.wake = Instant::ZERO;
            }
        }
        self.poked = false;
        self.steps += 1;
        self.process(t);
    }

    /// Processes every event up to and including `until`, then sets the clock to `until`.
    ///
    /// # Errors
    /// [`SimError::StepLimit`] when the step budget runs out first.
    pub fn run_until(&mut self, until: Instant) -> Result<(), SimError> {
        self.start_rdma()?;
        loop {
            let t = self.next_event();
            if t > until {
                break;
            }
            if self.steps >= self.config.max_steps {
                return Err(SimError::StepLimit {
                    at: self.now,
                    steps: self.steps,
                });
            }
            self.step_at(t);
        }
        self.now = self.now.max(until);
        Ok(())
    }

    /// [`Sim::run_until`] `now + d`.
    ///
    /// # Errors
    /// As [`Sim::run_until`].
    pub fn run_for(&mut self, d: Duration) -> Result<(), SimError> {
        self.run_until(self.now + d)
    }

    fn process(&mut self, t: Instant) {
        self.now = t;
        // 1. Frames whose last bit has arrived.
        for link in &mut self.links {
            for dir in 0..2 {
                while link.dirs[dir].next_arrival().is_some_and(|a| a <= t) {
                    let Some((_, frame)) = link.dirs[dir].in_flight.pop_front() else {
                        break;
                    };
                    match link.ends[1 - dir] {
                        Endpoint::Switch(s, p) => self.switches[s.0].rx[p.index()].push(frame),
                        Endpoint::Host(h) => {
                            self.hosts[h.0].receive(t, &frame, &mut self.flows);
                            self.host_wake[h.0] = Instant::ZERO;
                        }
                    }
                }
            }
        }
        // Which switches have anything to do (`switch_wake_after`).
        let every = self.config.drive_every_switch;
        for node in &mut self.switches {
            node.driven = every || node.wake <= t || node.rx.iter().any(|b| !b.is_empty());
        }
        for node in self.switches.iter_mut().filter(|n| n.driven) {
            for (p, burst) in node.rx.iter_mut().enumerate() {
                if !burst.is_empty() {
                    let port = PortId(u16::try_from(p).unwrap_or(u16::MAX));
                    node.sw.handle_rx_burst(t, port, burst);
                }
            }
        }
        // 2. Time-driven work.
        for node in self.switches.iter_mut().filter(|n| n.driven) {
            node.sw.handle_timeout(t);
        }
        // 3. One frame on every free transmitter.
        for link in &mut self.links {
            for dir in 0..2 {
                if !link.dirs[dir].is_free(t) {
                    continue;
                }
                let frame = match link.ends[dir] {
                    Endpoint::Switch(s, _) if !self.switches[s.0].driven => None,
                    Endpoint::Switch(s, p) => {
                        let node = &mut self.switches[s.0];
                        let pending = &mut node.pending[p.index()];
                        if pending.is_empty() {
                            self.tx_scratch.clear();
                            node.sw
                                .poll_tx_burst(t, p, &mut self.tx_scratch, 1, &mut |len| {
                                    Some(HeapFrame::new(&vec![0; len]))
                                });
                            pending.extend(self.tx_scratch.drain(..));
                        }
                        pending.pop_front()
                    }
                    Endpoint::Host(h)
                        if self.config.poll_every_host || self.host_wake[h.0] <= t =>
                    {
                        // Asking changes the host's state: the next scan asks its NIC again.
                        self.host_wake[h.0] = Instant::ZERO;
                        self.hosts[h.0].next_frame(t, &mut self.flows)
                    }
                    Endpoint::Host(_) => None,
                };
                if let Some(frame) = frame {
                    let params = link.params;
                    link.dirs[dir].transmit(t, frame, &params);
                }
            }
        }
        // 4. Punted frames: no control plane takes them.
        for node in self.switches.iter_mut().filter(|n| n.driven) {
            while node.sw.poll_punt().is_some() {
                node.punted += 1;
            }
        }
        // 5. Events.
        for (s, node) in self.switches.iter_mut().enumerate() {
            if !node.driven {
                continue;
            }
            while let Some(event) = node.sw.poll_event() {
                if self.events.len() < self.config.max_events {
                    self.events.push(SimEvent {
                        switch: SwitchId(s),
                        event,
                    });
                } else {
                    self.events_lost += 1;
                }
            }
        }
        // 6. When each switch driven now needs driving again.
        for s in 0..self.switches.len() {
            if self.switches[s].driven {
                self.switches[s].wake = self.switch_wake_after(s, t);
            }
        }
    }

    /// A switch.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn switch(&self, id: SwitchId) -> &LcoreStep<HeapFrame> {
        &self.switches[id.0].sw
    }

    /// A switch, mutable (e.g. the big red switch, TX enable, an injected frame). The next step
    /// processes the current instant again, so that a change takes effect at once. (Changes
    /// made through the switch's shared state from [`Sim::switch`] take effect at the next
    /// event, which may be never: use this.)
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    pub fn switch_mut(&mut self, id: SwitchId) -> &mut LcoreStep<HeapFrame> {
        self.poked = true;
        &mut self.switches[id.0].sw
    }

    /// Frames switch `id` punted to its (absent) control plane so far.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn punted_frames(&self, id: SwitchId) -> u64 {
        self.switches[id.0].punted
    }

    /// A host.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn host(&self, id: HostId) -> &Host {
        &self.hosts[id.0]
    }

    /// A flow's counters.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn flow(&self, id: FlowId) -> &FlowStats {
        &self.flows[id.0].stats
    }

    /// A flow's specification.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn flow_spec(&self, id: FlowId) -> &FlowSpec {
        &self.flows[id.0].spec
    }

    /// Every flow id, in order.
    pub fn flow_ids(&self) -> impl Iterator<Item = FlowId> {
        (0..self.flows.len()).map(FlowId)
    }

    /// A link.
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn link(&self, id: LinkId) -> &Link {
        &self.links[id.0]
    }

    /// The channel `end` transmits on, if it is connected.
    #[must_use]
    pub fn channel_from(&self, end: Endpoint) -> Option<&Channel> {
        let (link, side) = self.attachment(end).ok()??;
        Some(&self.links[link.0].dirs[side])
    }

    /// Bytes delivered to every flow's receiver so far.
    #[must_use]
    pub fn delivered_bytes(&self) -> u64 {
        self.flows.iter().map(|f| f.stats.delivered_bytes).sum()
    }

    /// Data frames on the wire on every link (sent, not yet received).
    #[must_use]
    pub fn data_frames_in_flight(&self) -> u64 {
        self.links
            .iter()
            .flat_map(|l| l.dirs.iter())
            .map(|c| c.data_frames_in_flight() as u64)
            .sum()
    }

    /// Events the switches reported, in order.
    #[must_use]
    pub fn events(&self) -> &[SimEvent] {
        &self.events
    }

    /// Takes the events reported so far.
    pub fn take_events(&mut self) -> Vec<SimEvent> {
        core::mem::take(&mut self.events)
    }

    /// Events dropped because [`SimConfig::max_events`] were already kept.
    #[must_use]
    pub fn events_lost(&self) -> u64 {
        self.events_lost
    }
}

/// The earlier of `next` and `t`, counting `t` only if it is after `now`.
fn earliest_after(now: Instant, next: Instant, t: Instant) -> Instant {
    if t > now && t < next {
        t
    } else {
        next
    }
}
