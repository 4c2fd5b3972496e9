//! Swarm testing (TigerBeetle's VOPR, FoundationDB's simulation): `headroom sim --swarm N
//! --seed S` generates N small random scenarios, runs each in the simulator and checks
//! invariants while it runs and after a drain period; a failure names the scenario's seed, and
//! `headroom sim --swarm 1 --seed <that seed>` runs exactly that scenario again.
//!
//! A scenario ([`generate`]) is a pure function of its seed: one switch with 2 to 6 hosts, or
//! two switches joined by a trunk (a line) with 1 to 3 hosts each; every link 10, 25 or 40
//! Gb/s with 100 to 300 m of cable (the link's delay is the cable's, 5 ns per metre, so the
//! headroom formula sees the cable the frames cross); each switch's configuration is written in
//! the file format of `headroom run` and goes through `headroom-config` (so only what the
//! configuration accepts is generated: PFC on some priorities of some ports, ECN thresholds,
//! the watchdog on or off, the buffer size), the headroom the configuration computes; RDMA
//! flows and incasts with or without DCQCN; and faults the simulator models: a NIC that ignores
//! PFC, a NIC that storms XOFF.
//!
//! Invariants ([`check`]), every [`CHECK_INTERVAL_NS`] of simulated time:
//! * conservation ([`crate::output::conservation`]): every data frame sent is received,
//!   dropped with a reason, queued, or on a wire;
//! * no lossless drops ([`crate::output::lossless_drops`]) on a port whose peer honours PFC
//!   (a switch, or a NIC that does not ignore it) and whose traffic's priority has PFC on:
//!   the configuration's headroom must absorb what arrives after XOFF;
//!
//! and at the end, once the traffic and the storm have stopped:
//! * the network drains within [`DRAIN_LIMIT_NS`]: every WRITE posted is acknowledged,
//!   nothing is queued or on a wire;
//! * then every XOFF a switch sent has been followed by an XON (no switch still asks its peer
//!   to pause);
//! * a storm on a port and priority the watchdog watches was declared within its window:
//!   between the storm's start plus the detection time and that plus two poll intervals.
//!
//! The watchdog's times are the configuration's divided by 1000 (the configuration refuses
//! less than SONiC's 100 ms, which would need hundreds of simulated milliseconds per
//! scenario; the core takes any time, as the storm scenario's test does).

use crate::output::{conservation, lossless_drops, Conservation};
use crate::rdma::{PfcStorm, RdmaFlowSpec, RdmaHostParams};
use crate::scenario::workload::FlowKind;
use crate::scenario::{Node, Scenario, ScenarioFlow, TopoLink, Topology};
use crate::{Endpoint, HostId, LinkId, LinkParams, SimError, SimEvent, SwitchId};
use core::fmt::{self, Write as _};
use headroom_core::events::Event;
use headroom_core::params::SwitchParams;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority};
use headroom_roce::dcqcn::RpParams;
use headroom_roce::np::NpConfig;
use headroom_roce::rc::PathMtu;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Simulated time between two invariant checks, ns.
pub const CHECK_INTERVAL_NS: u64 = 10_000;

/// Once quiet (no new WRITE, the storm over), the network must drain within this: every WRITE
/// posted acknowledged, no frame queued or on a wire. Generous against go-back-N's 1 ms
/// retransmission timeout and DCQCN's slow recovery from a deep rate cut.
pub const DRAIN_LIMIT_NS: u64 = 50_000_000;

/// The watchdog's configured times (ms) become the core's in µs: divided by this.
pub const WATCHDOG_TIME_DIVISOR: u64 = 1_000;

/// The seeds of a swarm of `count` scenarios from `seed`: the first is `seed` itself, each
/// next one the SplitMix64 successor of the one before. So `--swarm 1 --seed X` runs the
/// scenario of seed X, whichever swarm X came from.
pub fn scenario_seeds(seed: u64, count: u64) -> impl Iterator<Item = u64> {
    let mut next = seed;
    (0..count).map(move |_| {
        let this = next;
        next = splitmix64(this);
        this
    })
}

/// Mixed into the seed for the routed-or-bridged choice (`generate`): "routed" in ASCII.
const ROUTED_SALT: u64 = 0x726f_7574_6564;

/// SplitMix64's output function applied to `x + golden gamma`.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A storm the generator injected, and whether the watchdog must catch it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StormExpectation {
    /// The switch port facing the storming NIC.
    pub switch: SwitchId,
    /// Its port.
    pub port: PortId,
    /// The stormed priority (and queue: the AZURE maps are the identity on 3 and 4).
    pub priority: u8,
    /// When the storm starts and stops, ns.
    pub start_ns: u64,
    /// Its end.
    pub stop_ns: u64,
    /// `Some((detection, poll))` in ns when the port's watchdog watches that priority.
    pub watchdog: Option<(u64, u64)>,
}

/// What the checker expects of a generated scenario.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Expectations {
    /// Per switch, per port: whether it must not drop lossless traffic.
    pub lossless_ports: Vec<Vec<bool>>,
    /// No WRITE is posted from this time on, ns.
    pub traffic_stop_ns: u64,
    /// No new traffic and no storm from this time on, ns: the drain starts.
    pub quiet_ns: u64,
    /// Whether the network must drain: every port lossless on the data priority. Where a
    /// port is lossy or a NIC ignores PFC, go-back-N without congestion control can collapse
    /// (each round's first packets dropped behind the previous round's stale ones: seed
    /// 3946675725193008642, a 25G sender into a 10G port through a lossy PG), which is no
    /// fault of the switch.
    pub must_drain: bool,
    /// The injected storm, if any.
    pub storm: Option<StormExpectation>,
}

/// A generated scenario.
#[derive(Clone, Debug)]
pub struct SwarmScenario {
    /// Its seed: `headroom sim --swarm 1 --seed <seed>` runs it.
    pub seed: u64,
    /// What runs (its duration includes the drain period).
    pub scenario: Scenario,
    /// What must hold.
    pub expect: Expectations,
    /// Each switch's generated configuration (the file format of `headroom run`).
    pub switch_configs: Vec<String>,
    /// One line saying what was generated.
    pub description: String,
}

/// An invariant that did not hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Violation {
    /// The generator made a switch configuration `headroom-config` refused (a generator bug).
    Config(String),
    /// The simulator refused the scenario or ran out of steps.
    Sim(String),
    /// Frames were lost without a reason (or counted twice) at `at_ns`.
    Conservation {
        /// When the check failed.
        at_ns: u64,
        /// The counts.
        counts: Conservation,
    },
    /// A lossless port dropped lossless traffic.
    LosslessDrops {
        /// When the check saw them first.
        at_ns: u64,
        /// The switch.
        switch: usize,
        /// Its port.
        port: usize,
        /// Frames dropped so far.
        frames: u64,
    },
    /// The network did not drain within [`DRAIN_LIMIT_NS`] of the quiet time.
    NotDrained {
        /// When the drain was given up, ns.
        at_ns: u64,
        /// Data frames still queued in switches.
        queued_frames: u64,
        /// Data frames still on a wire.
        in_flight_frames: u64,
        /// Flows with a WRITE posted and not acknowledged.
        flows_incomplete: usize,
    },
    /// A switch still asks its peer to pause once the network has drained.
    XoffWithoutXon {
        /// The switch.
        switch: usize,
        /// Its port.
        port: usize,
        /// Priorities still asserted (bit p).
        priorities: u8,
    },
    /// The watchdog did not declare the storm inside its window.
    StormNotDetected {
        /// The window, ns.
        window_ns: (u64, u64),
        /// When it was declared, if it was.
        detected_ns: Option<u64>,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "generated switch configuration refused: {e}"),
            Self::Sim(e) => write!(f, "simulation: {e}"),
            Self::Conservation { at_ns, counts } => write!(
                f,
                "conservation at {at_ns} ns: sent {} + flood copies {} != received {} + dropped \
                 {} + queued {} + on the wire {}",
                counts.sent_frames,
                counts.flood_copies,
                counts.received_frames,
                counts.dropped_frames,
                counts.queued_frames,
                counts.in_flight_frames
            ),
            Self::LosslessDrops {
                at_ns,
                switch,
                port,
                frames,
            } => write!(
                f,
                "lossless drops at {at_ns} ns: switch s{switch} port {port} dropped {frames} \
                 frames of a PFC priority (its peer honours PFC, its headroom is the formula's)"
            ),
            Self::NotDrained {
                at_ns,
                queued_frames,
                in_flight_frames,
                flows_incomplete,
            } => write!(
                f,
                "not drained at {at_ns} ns: {queued_frames} frames queued, {in_flight_frames} on \
                 a wire, {flows_incomplete} flows with WRITEs not acknowledged"
            ),
            Self::XoffWithoutXon {
                switch,
                port,
                priorities,
            } => write!(
                f,
                "XOFF never followed by XON: switch s{switch} port {port} still pauses \
                 priorities {priorities:#04x} after the drain"
            ),
            Self::StormNotDetected {
                window_ns,
                detected_ns,
            } => write!(
                f,
                "PFC storm not declared by the watchdog in [{}, {}] ns: {}",
                window_ns.0,
                window_ns.1,
                detected_ns.map_or("never".to_owned(), |t| format!("at {t} ns"))
            ),
        }
    }
}

/// What a passing scenario did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Passed {
    /// Steps the simulator processed.
    pub steps: u64,
    /// Data frames the hosts sent.
    pub sent_frames: u64,
    /// Frames the switches dropped (any reason: lossy PGs, a NIC ignoring PFC, the watchdog).
    pub drops: u64,
    /// XOFF frames the switches sent.
    pub xoffs: u64,
    /// When the watchdog declared the storm, if one was injected and watched.
    pub storm_detected_ns: Option<u64>,
    /// When the network had drained, ns (`None`: a scenario with a lossy port or a NIC that
    /// ignores PFC did not drain within [`DRAIN_LIMIT_NS`], which is not demanded of it).
    pub drained_ns: Option<u64>,
}

// ---- generation -------------------------------------------------------------------------------

struct Draw(Xoshiro256PlusPlus);

impl Draw {
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.0.next_u64() % (hi - lo + 1)
    }

    fn index(&mut self, n: usize) -> usize {
        usize::try_from(self.range(0, n as u64 - 1)).unwrap_or(0)
    }

    fn percent(&mut self, p: u64) -> bool {
        self.range(0, 99) < p
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.index(items.len())]
    }
}

/// One switch port as generated.
struct PortPlan {
    speed_gbps: u64,
    cable_m: u64,
    pfc_enable: Vec<u8>,
}

/// Watchdog of a generated switch, in the configuration's ms.
#[derive(Clone, Copy)]
struct WatchdogPlan {
    detection_ms: u64,
    restoration_ms: u64,
    poll_ms: u64,
}

/// A switch configuration in the file format of `headroom run` (docs/config.md).
fn switch_config_text(
    name: &str,
    ports: &[PortPlan],
    watchdog: Option<WatchdogPlan>,
    buffer_size_bytes: Option<u64>,
    ecn: Option<(u64, u64, u64)>,
    ecn_seed: u64,
) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "[switch]\nname = \"{name}\"\ndriver = \"memory\"\necn_seed = {ecn_seed}"
    );
    if let Some(b) = buffer_size_bytes {
        let _ = writeln!(t, "buffer_size_bytes = {b}");
    }
    let _ = writeln!(t, "\n[port_defaults]\nmtu = 9100\ntrust = \"dscp\"");
    match watchdog {
        Some(w) => {
            let _ = writeln!(
                t,
                "\n[port_defaults.pfcwd]\nenabled = true\naction = \"drop\"\ndetection_time = {}\n\
                 restoration_time = {}\n\n[pfcwd]\npoll_interval = {}",
                w.detection_ms, w.restoration_ms, w.poll_ms
            );
        }
        None => {
            let _ = writeln!(t, "\n[port_defaults.pfcwd]\nenabled = false");
        }
    }
    if let Some((min, max, p)) = ecn {
        let _ = writeln!(
            t,
            "\n[wred_profile.SWARM]\necn = \"ecn_all\"\nwred_green_enable = false\n\
             green_min_threshold = {min}\ngreen_max_threshold = {max}\n\
             green_drop_probability = {p}\n\n[port_defaults.queue.\"3-4\"]\n\
             scheduler = \"scheduler.1\"\nwred_profile = \"SWARM\""
        );
    }
    for (i, p) in ports.iter().enumerate() {
        let pfc: Vec<String> = p.pfc_enable.iter().map(u8::to_string).collect();
        let _ = writeln!(
            t,
            "\n[port.Ethernet{}]\ndevice = \"p{i}\"\nspeed = \"{}G\"\ncable_length = \"{}m\"\n\
             pfc_enable = [{}]",
            i * 4,
            p.speed_gbps,
            p.cable_m,
            pfc.join(", ")
        );
    }
    t
}

fn switch_params_of(text: &str, name: &str) -> Result<SwitchParams, String> {
    let options = headroom_config::ParseOptions::with_allowed_cpus(0..4096);
    let (config, _warnings) =
        headroom_config::parse_with(text, name, &options).map_err(|e| format!("{e}"))?;
    config.switch_params().map_err(|e| format!("{name}: {e}"))
}

/// The scenario of `seed`.
///
/// # Errors
/// [`Violation::Config`] if `headroom-config` refuses a generated configuration (a bug of the
/// generator: it only draws what the configuration accepts).
#[allow(clippy::too_many_lines)] // One draw after the other, in the order the seed fixes.
pub fn generate(seed: u64) -> Result<SwarmScenario, Violation> {
    let mut d = Draw(Xoshiro256PlusPlus::seed_from_u64(seed));
    // Topology: one switch with 2..=6 hosts, or two switches (a trunk) with 1..=3 each.
    let two_switches = d.percent(30);
    let hosts_per_switch: Vec<usize> = if two_switches {
        vec![d.index(3) + 1, d.index(3) + 1]
    } else {
        vec![d.index(5) + 2]
    };
    let host_count: usize = hosts_per_switch.iter().sum();
    let data_priority = d.pick(&[3u8, 4]);
    let mut links = Vec::new();
    let mut ports: Vec<Vec<PortPlan>> = hosts_per_switch.iter().map(|_| Vec::new()).collect();
    let mut host_port: Vec<(usize, usize)> = Vec::new();
    let mut host_rate = Vec::new();
    let mut new_link = |d: &mut Draw, ports: &mut Vec<Vec<PortPlan>>, a: Node, b: Node| {
        let speed_gbps = d.pick(&[10u64, 25, 40]);
        let cable_m = d.pick(&[100u64, 200, 300]);
        // PFC on the data priority of most ports; some ports lossy (PFC off), some with PFC on
        // both lossless priorities.
        let pfc_enable = match d.range(0, 9) {
            0 => Vec::new(),
            1..=4 => vec![data_priority],
            _ => vec![3, 4],
        };
        links.push(TopoLink {
            a,
            b,
            params: LinkParams::new(speed_gbps * 1_000_000_000, cable_m * 5),
        });
        let plan = |pfc_enable: Vec<u8>| PortPlan {
            speed_gbps,
            cable_m,
            pfc_enable,
        };
        let mut port_of = |n: Node, pfc: Vec<u8>| {
            if let Node::Switch(s) = n {
                ports[s].push(plan(pfc));
                Some((s, ports[s].len() - 1))
            } else {
                None
            }
        };
        // A trunk keeps PFC on at both ends (lossless end to end needs it on every hop).
        let pfc_b = if matches!(a, Node::Switch(_)) {
            vec![3, 4]
        } else {
            pfc_enable.clone()
        };
        let pa = port_of(
            a,
            if matches!(a, Node::Switch(_)) {
                vec![3, 4]
            } else {
                pfc_enable
            },
        );
        let pb = port_of(b, pfc_b);
        (speed_gbps * 1_000_000_000, pa.or(pb))
    };
    for (s, &n) in hosts_per_switch.iter().enumerate() {
        for _ in 0..n {
            let h = host_port.len();
            let (rate, port) = new_link(&mut d, &mut ports, Node::Host(h), Node::Switch(s));
            host_port.push(port.unwrap_or((s, 0)));
            host_rate.push(rate);
        }
    }
    if two_switches {
        new_link(&mut d, &mut ports, Node::Switch(0), Node::Switch(1));
    }
    let watchdog = d.percent(50).then(|| WatchdogPlan {
        detection_ms: d.pick(&[100, 200, 300]),
        restoration_ms: d.pick(&[100, 200, 300]),
        poll_ms: 100,
    });
    let buffer_size_bytes = match d.range(0, 3) {
        0 => None,
        1 => Some(4 << 20),
        2 => Some(6 << 20),
        _ => Some(16 << 20),
    };
    let ecn = d.percent(60).then(|| {
        let min = d.pick(&[5_000u64, 20_000, 40_000, 100_000]);
        (min, min * d.range(1, 4), d.pick(&[1u64, 5, 20, 100]))
    });

    let switch_names: Vec<String> = (0..ports.len()).map(|s| format!("s{s}")).collect();
    let mut switch_configs = Vec::new();
    let mut switch_params = Vec::new();
    for (s, plan) in ports.iter().enumerate() {
        let name = format!("swarm-{seed:016x}-{}", switch_names[s]);
        // TOML integers are i64: the seed's low 63 bits.
        let text = switch_config_text(&name, plan, watchdog, buffer_size_bytes, ecn, seed >> 1);
        let mut params =
            switch_params_of(&text, &format!("{name}.toml")).map_err(Violation::Config)?;
        params.watchdog.poll_interval_ns /= WATCHDOG_TIME_DIVISOR;
        for port in &mut params.ports {
            if let Some(wd) = &mut port.watchdog {
                wd.detection_time_ns /= WATCHDOG_TIME_DIVISOR;
                wd.restoration_time_ns /= WATCHDOG_TIME_DIVISOR;
            }
        }
        switch_configs.push(text);
        switch_params.push(params);
    }

    // NICs: DCQCN off, paper or NVIDIA per host; path MTU 1024 to 4096.
    let pmtu = d.pick(&[PathMtu::Mtu1024, PathMtu::Mtu2048, PathMtu::Mtu4096]);
    let mut nics = Vec::new();
    for _ in 0..host_count {
        let mut p = RdmaHostParams::default();
        p.nic.data_dscp = data_priority;
        p.nic.data_priority = data_priority;
        p.nic.pmtu = pmtu;
        match d.range(0, 2) {
            0 => {}
            1 => {
                p.nic.rp = Some(RpParams::paper());
                p.nic.np = Some(NpConfig::paper());
            }
            _ => {
                p.nic.rp = Some(RpParams::nvidia());
                p.nic.np = Some(NpConfig::nvidia());
            }
        }
        nics.push(p);
    }

    // Workload: bounded flows between random pairs, sometimes an incast, until traffic_stop.
    let traffic_stop_ns = d.range(500, 1_500) * 1_000;
    let mut flows = Vec::new();
    let mut add_flow = |src: usize, dst: usize, bytes: Option<u64>, start_ns: u64, kind| {
        let message = bytes.unwrap_or(256 << 10).min(256 << 10);
        flows.push(ScenarioFlow {
            spec: RdmaFlowSpec {
                src: HostId(src),
                dst: HostId(dst),
                bytes,
                start: Instant::from_nanos(start_ns),
                stop: Some(Instant::from_nanos(traffic_stop_ns)),
                message_bytes: u32::try_from(message).unwrap_or(1 << 18),
                vlan_id: None,
            },
            kind,
        });
    };
    let pair = |d: &mut Draw| {
        let src = d.index(host_count);
        let dst = (src + 1 + d.index(host_count - 1)) % host_count;
        (src, dst)
    };
    let flow_count = d.index(3 * host_count) + 1;
    for i in 0..flow_count {
        let (src, dst) = pair(&mut d);
        let bytes = d.pick(&[16u64 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20]);
        let start = d.range(0, traffic_stop_ns / 2);
        add_flow(src, dst, Some(bytes), start, FlowKind::Flow(i));
    }
    let mut incast = None;
    if host_count >= 3 && d.percent(50) {
        let receiver = d.index(host_count);
        let bytes = d.pick(&[64u64 << 10, 256 << 10, 1 << 20, 4 << 20]);
        let start = d.range(0, traffic_stop_ns / 2);
        for s in (0..host_count).filter(|&s| s != receiver) {
            add_flow(s, receiver, Some(bytes), start, FlowKind::Incast(0));
        }
        incast = Some(receiver);
    }

    // Faults: a NIC that ignores PFC; a NIC that storms XOFF on the data priority (with a flow
    // towards it through the storm, so that its queue holds frames the watchdog can see stuck).
    let mut faults = Vec::new();
    let ignorer = d.percent(25).then(|| d.index(host_count));
    if let Some(h) = ignorer {
        nics[h].faults.ignore_pfc = true;
        faults.push(format!("h{h} ignores PFC"));
    }
    let mut storm = None;
    if d.percent(35) {
        let h = d.index(host_count);
        let (sw, port) = host_port[h];
        let port_params = &switch_params[sw].ports[port];
        let watched = port_params.watchdog.and_then(|wd| {
            wd.watched
                .contains(Priority::from_low_bits(data_priority))
                .then_some((
                    wd.detection_time_ns,
                    switch_params[sw].watchdog.poll_interval_ns,
                ))
        });
        let start_ns = d.range(100, 300) * 1_000;
        let length_ns = d.range(500, 900) * 1_000;
        // At least 500 µs: longer than the longest detection (300 µs) plus two polls, the
        // window the check allows.
        let stop_ns = start_ns + length_ns;
        let interval_ns = d.range(10, 50) * 1_000;
        // A pause of at least four intervals (so that it never lapses between two XOFFs), or
        // the longest one.
        // A quantum is 512 bit times.
        let pause_ns = |quanta: u64| quanta * 512 * 1_000_000_000 / host_rate[h];
        let quanta = if d.percent(30) {
            u16::MAX
        } else {
            u16::try_from((4 * interval_ns * host_rate[h]).div_ceil(512 * 1_000_000_000))
                .unwrap_or(u16::MAX)
                .max(1)
        };
        nics[h].faults.pfc_storm = Some(PfcStorm {
            priorities: 1 << data_priority,
            quanta,
            interval_ns,
            start: Instant::from_nanos(start_ns),
            stop: Some(Instant::from_nanos(stop_ns)),
        });
        let src = (h + 1 + d.index(host_count - 1)) % host_count;
        flows.push(ScenarioFlow {
            spec: RdmaFlowSpec {
                src: HostId(src),
                dst: HostId(h),
                bytes: None,
                start: Instant::from_nanos(0),
                stop: Some(Instant::from_nanos(traffic_stop_ns.max(stop_ns))),
                message_bytes: 64 << 10,
                vlan_id: None,
            },
            kind: FlowKind::Flow(flows.len()),
        });
        faults.push(format!(
            "h{h} storms priority {data_priority} {start_ns}..{stop_ns} ns every {interval_ns} ns \
             ({quanta} quanta)"
        ));
        storm = Some((
            StormExpectation {
                switch: SwitchId(sw),
                port: PortId(u16::try_from(port).unwrap_or(0)),
                priority: data_priority,
                start_ns,
                stop_ns,
                watchdog: watched,
            },
            pause_ns(u64::from(quanta)),
        ));
    }
    // Quiet from when no WRITE is posted any more and the storm's last pause has lapsed; the
    // run then goes on until the network has drained (WRITEs posted before finish, go-back-N
    // resends what a watchdog or an ignoring NIC's port dropped), at most DRAIN_LIMIT_NS.
    let quiet_ns = storm.as_ref().map_or(traffic_stop_ns, |(s, pause_ns)| {
        traffic_stop_ns.max(s.stop_ns + pause_ns)
    });
    let duration_ns = quiet_ns + DRAIN_LIMIT_NS;

    let lossless_ports: Vec<Vec<bool>> = ports
        .iter()
        .enumerate()
        .map(|(s, plan)| {
            plan.iter()
                .enumerate()
                .map(|(p, port)| {
                    let peer_ignores = host_port
                        .iter()
                        .position(|&hp| hp == (s, p))
                        .is_some_and(|h| nics[h].faults.ignore_pfc);
                    !peer_ignores && port.pfc_enable.contains(&data_priority)
                })
                .collect()
        })
        .collect();

    let must_drain = lossless_ports.iter().flatten().all(|&l: &bool| l);
    // Half the two-switch scenarios route instead of bridging (every port a router interface,
    // the routes `Sim::install_routes` computes). Drawn from the seed apart from the stream,
    // so that every other choice of a seed's scenario stays what it was.
    let routed = two_switches && splitmix64(seed ^ ROUTED_SALT) & 1 == 1;
    let topology = Topology {
        routed,
        routes_one_way: false,
        hosts: (0..host_count).map(|h| format!("h{h}")).collect(),
        switches: switch_names,
        links,
    };
    let speeds: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(s, plan)| {
            let p: Vec<String> = plan
                .iter()
                .map(|p| {
                    let pfc: Vec<String> = p.pfc_enable.iter().map(u8::to_string).collect();
                    format!("{}G/{}m/pfc[{}]", p.speed_gbps, p.cable_m, pfc.join(","))
                })
                .collect();
            format!("s{s}: {}", p.join(" "))
        })
        .collect();
    let dcqcn = nics.iter().filter(|n| n.nic.rp.is_some()).count();
    let description = format!(
        "{host_count} hosts{}; {}; priority {data_priority}; watchdog {}; buffer {}; ECN {}; \
         {} flows{} ({dcqcn} NICs with DCQCN), traffic until {traffic_stop_ns} ns; faults: {}; \
         drain limit {duration_ns} ns",
        if routed { " (routed)" } else { "" },
        speeds.join("; "),
        watchdog.map_or("off".to_owned(), |w| format!(
            "{}/{}/{} us",
            w.detection_ms, w.restoration_ms, w.poll_ms
        )),
        buffer_size_bytes.map_or("default".to_owned(), |b| format!("{b} B")),
        ecn.map_or("off".to_owned(), |(a, b, p)| format!("{a}..{b} B {p}%")),
        flows.len(),
        incast.map_or(String::new(), |r| format!(" incl. an incast to h{r}")),
        if faults.is_empty() {
            "none".to_owned()
        } else {
            faults.join(", ")
        },
    );
    Ok(SwarmScenario {
        seed,
        scenario: Scenario {
            file: format!("swarm seed {seed}"),
            duration_ns,
            seed,
            sample_interval_ns: CHECK_INTERVAL_NS,
            max_steps: 200_000_000,
            topology,
            switch_params,
            switch_config_files: Vec::new(),
            nics,
            flows,
            ecmp_seeds: crate::EcmpSeeds::PerSwitch(0),
        },
        expect: Expectations {
            lossless_ports,
            traffic_stop_ns,
            quiet_ns,
            must_drain,
            storm: storm.map(|(s, _)| s),
        },
        switch_configs,
        description,
    })
}

// ---- checking ---------------------------------------------------------------------------------

/// Runs `s` and checks every invariant; the first that fails.
///
/// # Errors
/// The first [`Violation`] found.
pub fn check(s: &SwarmScenario) -> Result<Passed, Violation> {
    let sim_err = |e: SimError| Violation::Sim(format!("{e:?}"));
    let mut sim = s.scenario.build().map_err(sim_err)?;
    let mut t = 0u64;
    let mut drained_at = None;
    loop {
        t += CHECK_INTERVAL_NS;
        sim.run_until(Instant::from_nanos(t)).map_err(sim_err)?;
        let counts = conservation(&sim);
        if !counts.holds() {
            return Err(Violation::Conservation { at_ns: t, counts });
        }
        let incomplete = sim
            .rdma_flow_ids()
            .filter(|&f| {
                let st = sim.rdma_flow(f);
                st.completed_bytes < st.posted_bytes
            })
            .count();
        let drained = counts.queued_frames == 0 && counts.in_flight_frames == 0 && incomplete == 0;
        if t >= s.expect.quiet_ns {
            match drained_at {
                // One interval after draining, for the XONs to be on the wire.
                Some(at) if t >= at + CHECK_INTERVAL_NS => break,
                None if drained => drained_at = Some(t),
                _ => {}
            }
            if drained_at.is_none() && t >= s.scenario.duration_ns {
                if !s.expect.must_drain {
                    // Lossy somewhere: no liveness to demand, and PGs may still be above XON.
                    break;
                }
                return Err(Violation::NotDrained {
                    at_ns: t,
                    queued_frames: counts.queued_frames,
                    in_flight_frames: counts.in_flight_frames,
                    flows_incomplete: incomplete,
                });
            }
        }
        let now = sim.now();
        for (sw, ports) in s.expect.lossless_ports.iter().enumerate() {
            let sh = sim.switch(SwitchId(sw)).shared();
            for (p, &lossless) in ports.iter().enumerate() {
                if !lossless {
                    continue;
                }
                let st = sh.port_stats(PortId(u16::try_from(p).unwrap_or(u16::MAX)), now);
                let frames = lossless_drops(&st, sh.params.ports[p].pfc_enable);
                if frames > 0 {
                    return Err(Violation::LosslessDrops {
                        at_ns: t,
                        switch: sw,
                        port: p,
                        frames,
                    });
                }
            }
        }
    }
    let mut passed = Passed {
        steps: sim.steps(),
        sent_frames: conservation(&sim).sent_frames,
        drained_ns: drained_at,
        ..Passed::default()
    };
    // Every XOFF followed by an XON: no switch still asserts a pause on its link.
    for l in 0..sim.link_count() {
        let link = sim.link(LinkId(l));
        for end in link.ends() {
            let Endpoint::Switch(sw, port) = end else {
                continue;
            };
            let Some(ch) = link.channel_from(end) else {
                continue;
            };
            passed.xoffs += ch.pfc_changes().iter().filter(|c| c.xoff).count() as u64;
            if drained_at.is_some() && ch.pfc_asserted() != 0 {
                return Err(Violation::XoffWithoutXon {
                    switch: sw.0,
                    port: port.index(),
                    priorities: ch.pfc_asserted(),
                });
            }
        }
    }
    let now = sim.now();
    for sw in 0..sim.switch_count() {
        let sh = sim.switch(SwitchId(sw)).shared();
        for p in 0..sh.params.ports.len() {
            passed.drops += sh
                .port_stats(PortId(u16::try_from(p).unwrap_or(u16::MAX)), now)
                .drops_total();
        }
    }
    if let Some(storm) = &s.expect.storm {
        if let Some((detection, poll)) = storm.watchdog {
            let detected = first_storm_detected(sim.events(), storm);
            let window = (
                storm.start_ns + detection,
                storm.start_ns + detection + 2 * poll,
            );
            passed.storm_detected_ns = detected;
            if !detected.is_some_and(|at| (window.0..=window.1).contains(&at)) {
                return Err(Violation::StormNotDetected {
                    window_ns: window,
                    detected_ns: detected,
                });
            }
        }
    }
    Ok(passed)
}

/// When the watchdog first declared the storm's queue stormed.
fn first_storm_detected(events: &[SimEvent], storm: &StormExpectation) -> Option<u64> {
    events.iter().find_map(|e| match e.event {
        Event::StormDetected {
            port, queue, at, ..
        } if e.switch == storm.switch
            && port == storm.port
            && queue.index() == usize::from(storm.priority) =>
        {
            Some(at.as_nanos())
        }
        _ => None,
    })
}

/// The outcome of one scenario of a swarm.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Its index in the swarm.
    pub index: u64,
    /// Its seed.
    pub seed: u64,
    /// What was generated (empty if the generation failed).
    pub description: String,
    /// Passed, or the first invariant that failed.
    pub result: Result<Passed, Violation>,
}

/// Generates and checks the `count` scenarios of `seed` ([`scenario_seeds`]), calling
/// `on_outcome` after each; the number that failed.
pub fn run_swarm(seed: u64, count: u64, on_outcome: &mut dyn FnMut(&Outcome)) -> u64 {
    let mut failed = 0;
    for (index, seed) in scenario_seeds(seed, count).enumerate() {
        let (description, result) = match generate(seed) {
            Ok(s) => (s.description.clone(), check(&s)),
            Err(v) => (String::new(), Err(v)),
        };
        if result.is_err() {
            failed += 1;
        }
        on_outcome(&Outcome {
            index: index as u64,
            seed,
            description,
            result,
        });
    }
    failed
}
