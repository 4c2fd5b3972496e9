//! Scenario files: a topology, the switches' configuration, the NICs and a workload, in TOML;
//! what `headroom sim SCENARIO.toml` runs. docs/sim.md describes every key.
//!
//! [`load`] reads and checks a scenario and returns a resolved [`Scenario`]: names resolved,
//! switch configurations loaded with `headroom-config` (the same files as `headroom run`) and
//! turned into the core's parameters, the workload expanded into RDMA flows (random ones drawn
//! from a seeded generator). Every error names `file:line:column: key: reason`; errors in a
//! switch configuration name that file. [`Scenario::build`] makes the [`Sim`], and
//! [`crate::output::run`] runs it and writes the results.

mod toml_spans;
pub mod units;
pub mod workload;

pub use toml_spans::ScenarioError;

use crate::rdma::{NicFaults, PfcStorm, RdmaFlowSpec, RdmaHostParams};
use crate::{
    EcmpSeeds, Endpoint, HostId, HostParams, LinkParams, Sim, SimConfig, SimError, SwitchId,
};
use headroom_core::params::{SwitchParams, VlanMode};
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_roce::dcqcn::RpParams;
use headroom_roce::np::NpConfig;
use headroom_roce::rc::PathMtu;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use toml_spans::{location_of, Blame, Spans};
use units::{parse_bytes, parse_duration_ns, parse_rate_bps};
use workload::{CdfFile, FlowKind};

/// Every error found in a scenario (at least one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioErrors(pub Vec<ScenarioError>);

impl core::fmt::Display for ScenarioErrors {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "error: {e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ScenarioErrors {}

// ---- the file's schema ------------------------------------------------------------------------

/// A size: bytes as an integer, or a string with a unit (`"64KB"`, `"1MiB"`), or `"unbounded"`.
#[derive(Deserialize, Clone, Debug)]
#[serde(untagged)]
pub enum IntOrText {
    /// Bytes.
    Int(u64),
    /// With a unit.
    Text(String),
}

#[derive(Deserialize, Clone, Debug)]
#[serde(untagged)]
enum CountOrNames {
    Count(u32),
    Names(Vec<String>),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    simulation: RawSimulation,
    topology: RawTopology,
    switch: RawSwitch,
    #[serde(default)]
    nic: RawNic,
    #[serde(default)]
    fault: Vec<RawFault>,
    #[serde(default)]
    flow: Vec<RawFlow>,
    #[serde(default)]
    incast: Vec<RawIncast>,
    #[serde(default)]
    onoff: Vec<RawOnOff>,
    #[serde(default)]
    random: Vec<RawRandom>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSimulation {
    duration: String,
    seed: Option<u64>,
    sample_interval: Option<String>,
    max_steps: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    shape: String,
    link_rate: String,
    link_delay: Option<String>,
    hosts: Option<u32>,
    switches: Option<CountOrNames>,
    hosts_per_switch: Option<u32>,
    links: Option<Vec<RawLink>>,
    leaves: Option<u32>,
    spines: Option<u32>,
    hosts_per_leaf: Option<u32>,
    k: Option<u32>,
    ecmp_hash_seed: Option<IntOrText>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    a: String,
    b: String,
    rate: Option<String>,
    delay: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSwitch {
    config: String,
    #[serde(default)]
    config_for: BTreeMap<String, String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawNic {
    dscp: Option<u8>,
    priority: Option<u8>,
    pmtu: Option<u32>,
    vlan: Option<u16>,
    dcqcn: Option<String>,
    cnp_interval: Option<String>,
    window_packets: Option<u32>,
    retransmit_timeout: Option<String>,
    send_queue_depth: Option<usize>,
    ack_every: Option<u32>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFault {
    host: String,
    #[serde(default)]
    ignore_pfc: bool,
    pfc_storm: Option<RawStorm>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawStorm {
    priorities: Vec<u8>,
    interval: String,
    start: Option<String>,
    stop: Option<String>,
    quanta: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlow {
    src: String,
    dst: String,
    size: IntOrText,
    start: Option<String>,
    stop: Option<String>,
    message: Option<IntOrText>,
    vlan: Option<u16>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIncast {
    senders: Vec<String>,
    receiver: String,
    size: IntOrText,
    start: Option<String>,
    count: Option<u32>,
    period: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOnOff {
    src: String,
    dst: String,
    burst: IntOrText,
    period: String,
    start: Option<String>,
    stop: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRandom {
    cdf: String,
    load: f64,
    hosts: Option<Vec<String>>,
    start: Option<String>,
    stop: String,
}

// ---- the resolved scenario --------------------------------------------------------------------

/// One end of a link in a [`Topology`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Node {
    /// Host index.
    Host(usize),
    /// Switch index.
    Switch(usize),
}

/// A resolved link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TopoLink {
    /// First end (transmits on the link's first channel).
    pub a: Node,
    /// Second end.
    pub b: Node,
    /// Its rate and delay.
    pub params: LinkParams,
}

/// Hosts, switches and links, by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Host names, in index order.
    pub hosts: Vec<String>,
    /// Switch names, in index order.
    pub switches: Vec<String>,
    /// Links; a switch's ports are numbered in the order its links appear.
    pub links: Vec<TopoLink>,
    /// Whether the switches route (`leaf_spine`, `fat_tree`, `ring`: every port a router interface,
    /// routes from [`Sim::install_routes`]) rather than bridge.
    pub routed: bool,
    /// Whether routes cross each switch-to-switch link from its `a` end to its `b` end only
    /// (`ring`: clockwise), instead of both ways ([`Sim::install_routes_avoiding`]).
    pub routes_one_way: bool,
}

impl Topology {
    /// The host called `name`.
    #[must_use]
    pub fn host(&self, name: &str) -> Option<usize> {
        self.hosts.iter().position(|h| h == name)
    }

    /// Links per switch (its port count in use).
    #[must_use]
    pub fn degrees(&self) -> Vec<usize> {
        let mut d = vec![0; self.switches.len()];
        for l in &self.links {
            for n in [l.a, l.b] {
                if let Node::Switch(s) = n {
                    d[s] += 1;
                }
            }
        }
        d
    }
}

/// A flow of the workload, with where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScenarioFlow {
    /// What to simulate.
    pub spec: RdmaFlowSpec,
    /// Which workload entry made it.
    pub kind: FlowKind,
}

/// A checked scenario, ready to [`Scenario::build`].
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The scenario file, for messages.
    pub file: String,
    /// Simulated time to run.
    pub duration_ns: u64,
    /// Seed of the random workload and of every switch's WRED generator.
    pub seed: u64,
    /// Interval of the CSV time series, ns.
    pub sample_interval_ns: u64,
    /// Step budget of the run.
    pub max_steps: u64,
    /// The topology.
    pub topology: Topology,
    /// Each switch's core parameters (from its configuration file).
    pub switch_params: Vec<SwitchParams>,
    /// Each switch's configuration file.
    pub switch_config_files: Vec<PathBuf>,
    /// Every host's NIC.
    pub nics: Vec<RdmaHostParams>,
    /// The flows, in the order they are added.
    pub flows: Vec<ScenarioFlow>,
    /// How a routed topology's switches seed their ECMP hash (unused when bridged).
    pub ecmp_seeds: EcmpSeeds,
}

/// Router MAC of port `p` of switch `s` on a routed topology: 02:52:ss:ss:00:pp (locally
/// administered; hosts are 02:48:53:…).
#[must_use]
pub fn router_mac(s: usize, p: usize) -> [u8; 6] {
    let [s_hi, s_lo] = u16::try_from(s).unwrap_or(u16::MAX).to_be_bytes();
    [
        0x02,
        0x52,
        s_hi,
        s_lo,
        0,
        u8::try_from(p).unwrap_or(u8::MAX),
    ]
}

/// Locally administered MAC of host `i`: 02:48:53:00 then `i + 1`.
fn host_mac(i: usize) -> [u8; 6] {
    HostParams::numbered(u16::try_from(i + 1).unwrap_or(u16::MAX)).mac
}

impl Scenario {
    /// The simulator of this scenario, every flow added, time zero.
    ///
    /// # Errors
    /// What the simulator refuses (should not happen for a scenario [`load`] accepted).
    pub fn build(&self) -> Result<Sim, SimError> {
        let mut sim = Sim::with_config(SimConfig {
            max_steps: self.max_steps,
            ..SimConfig::default()
        })?;
        let degrees = self.topology.degrees();
        for (s, params) in self.switch_params.iter().enumerate() {
            let mut params = params.clone();
            params.seed = params.seed.wrapping_add(self.seed);
            // The configuration's ports beyond the switch's links have no cable: the switch is
            // built without them (a frame flooded to a port with no link would wait there for
            // ever, holding buffer).
            params.ports.truncate(degrees[s]);
            if self.topology.routed {
                for (p, port) in params.ports.iter_mut().enumerate() {
                    port.vlan = VlanMode::Routed;
                    port.mac = router_mac(s, p);
                }
            }
            sim.add_switch(params)?;
        }
        for (i, name) in self.topology.hosts.iter().enumerate() {
            let params = HostParams {
                name: name.clone(),
                mac: host_mac(i),
            };
            sim.add_rdma_host(params, self.nics[i].clone())?;
        }
        let mut next_port = vec![0u16; self.topology.switches.len()];
        let mut endpoint = |n: Node| match n {
            Node::Host(h) => Endpoint::Host(HostId(h)),
            Node::Switch(s) => {
                let p = next_port[s];
                next_port[s] += 1;
                Endpoint::Switch(SwitchId(s), PortId(p))
            }
        };
        // One-way links: no route sends out of a switch-to-switch link's `b` end.
        let mut avoid_out = Vec::new();
        for l in &self.topology.links {
            let (a, b) = (endpoint(l.a), endpoint(l.b));
            if let (Endpoint::Switch(..), Endpoint::Switch(s, p)) = (a, b) {
                if self.topology.routes_one_way {
                    avoid_out.push((s, p));
                }
            }
            sim.connect(a, b, l.params)?;
        }
        if self.topology.routed {
            sim.install_routes_avoiding(self.ecmp_seeds, &avoid_out)?;
        }
        for f in &self.flows {
            sim.add_rdma_flow(f.spec.clone())?;
        }
        // Every host announces itself when its link comes up (as hosts do with gratuitous ARP),
        // so that bridging switches know where it is before traffic starts and do not flood
        // it. Routers need no hello (their routes name every host).
        if !self.topology.routed {
            for h in 0..self.topology.hosts.len() {
                sim.hello(HostId(h), self.nics[h].nic.vlan_id)?;
            }
        }
        Ok(sim)
    }
}

/// The low 32 bits of a scenario seed (the ECMP hash takes a 32-bit seed).
fn seed_low_bits(seed: u64) -> u32 {
    u32::try_from(seed & u64::from(u32::MAX)).unwrap_or(0)
}

/// The links of `per_switch` hosts under each of switches `0..switches`: host `s·per_switch + i`
/// to switch `s`, switch by switch (so that each switch's first ports are its hosts).
fn hosts_under(switches: usize, per_switch: usize, params: LinkParams) -> Vec<TopoLink> {
    (0..switches)
        .flat_map(|s| {
            (0..per_switch).map(move |i| TopoLink {
                a: Node::Host(s * per_switch + i),
                b: Node::Switch(s),
                params,
            })
        })
        .collect()
}

/// A 2-tier Clos (RFC 7938 §3.2 with two tiers): `leaves` leaves with `per_leaf` hosts each,
/// every leaf linked once to every one of `spines` spines. Switches: leaves `leaf0…`, then
/// spines `spine0…`; hosts `h0…` leaf by leaf. A leaf's ports: its hosts, then one uplink per
/// spine in spine order; a spine's: one per leaf in leaf order.
fn leaf_spine(leaves: usize, spines: usize, per_leaf: usize, params: LinkParams) -> Topology {
    let mut links = hosts_under(leaves, per_leaf, params);
    for l in 0..leaves {
        for s in 0..spines {
            links.push(TopoLink {
                a: Node::Switch(l),
                b: Node::Switch(leaves + s),
                params,
            });
        }
    }
    Topology {
        routed: true,
        routes_one_way: false,
        hosts: (0..leaves * per_leaf).map(|i| format!("h{i}")).collect(),
        switches: (0..leaves)
            .map(|l| format!("leaf{l}"))
            .chain((0..spines).map(|s| format!("spine{s}")))
            .collect(),
        links,
    }
}

/// A ring of `switches` routers, `per_switch` hosts under each, routed clockwise only: switch
/// `s` sends everything not for its own hosts to switch `s + 1` (mod the count), however close
/// the destination is the other way round. Every link of the ring carries the flows of several
/// switches, and each waits on the next: the cyclic buffer dependency of the classic PFC
/// deadlock (Hu et al., HotNets 2016; Guo et al., SIGCOMM 2016 §4.2). Switches `s0…`, hosts
/// `h0…` switch by switch. A switch's ports: its hosts, then its two ring links (`s0`: to
/// `s1`, then from the last; every other: from its predecessor, then to its successor).
fn ring(switches: usize, per_switch: usize, params: LinkParams) -> Topology {
    let mut links = hosts_under(switches, per_switch, params);
    for s in 0..switches {
        links.push(TopoLink {
            a: Node::Switch(s),
            b: Node::Switch((s + 1) % switches),
            params,
        });
    }
    Topology {
        routed: true,
        routes_one_way: true,
        hosts: (0..switches * per_switch)
            .map(|i| format!("h{i}"))
            .collect(),
        switches: (0..switches).map(|i| format!("s{i}")).collect(),
        links,
    }
}

/// A 3-tier fat tree of parameter `k` (Al-Fares et al., SIGCOMM 2008): `k` pods of `k/2` edge
/// and `k/2` aggregation switches, `(k/2)²` core switches, `k³/4` hosts (`k/2` per edge);
/// every switch has `k` ports. Edge `e` of pod `p` links to every aggregation switch of its pod;
/// aggregation switch `a` of a pod links to cores `a·k/2 … a·k/2 + k/2 − 1`. Switches: edges
/// `edge{p}_{e}`, then aggregations `agg{p}_{a}`, then cores `core{c}`; hosts `h0…` edge by
/// edge. Ports: an edge's hosts, then its aggregation switches; an aggregation switch's edges,
/// then its cores; a core's one per pod.
fn fat_tree(k: usize, params: LinkParams) -> Topology {
    let half = k / 2;
    let edge = |p: usize, e: usize| p * half + e;
    let agg = |p: usize, a: usize| k * half + p * half + a;
    let core = |c: usize| k * k + c;
    // Edges are switches 0..k·k/2, pod by pod: host h sits under edge h / (k/2).
    let mut links = hosts_under(k * half, half, params);
    for p in 0..k {
        for e in 0..half {
            for a in 0..half {
                links.push(TopoLink {
                    a: Node::Switch(edge(p, e)),
                    b: Node::Switch(agg(p, a)),
                    params,
                });
            }
        }
    }
    for p in 0..k {
        for a in 0..half {
            for j in 0..half {
                links.push(TopoLink {
                    a: Node::Switch(agg(p, a)),
                    b: Node::Switch(core(a * half + j)),
                    params,
                });
            }
        }
    }
    let mut switches = Vec::with_capacity(k * k + half * half);
    for p in 0..k {
        switches.extend((0..half).map(|e| format!("edge{p}_{e}")));
    }
    for p in 0..k {
        switches.extend((0..half).map(|a| format!("agg{p}_{a}")));
    }
    switches.extend((0..half * half).map(|c| format!("core{c}")));
    Topology {
        routed: true,
        routes_one_way: false,
        hosts: (0..k * k * k / 4).map(|i| format!("h{i}")).collect(),
        switches,
        links,
    }
}

/// Options of [`load`].
#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Overrides `simulation.seed`.
    pub seed: Option<u64>,
    /// Scales every duration of the workload and the run down by this factor (tests run
    /// shipped scenarios at reduced size); 1 or `None`: as written.
    pub time_divisor: Option<u64>,
}

/// Reads and checks the scenario at `path`.
///
/// # Errors
/// Every problem found, each with file, line, column and key.
pub fn load(path: &Path, options: &LoadOptions) -> Result<Scenario, ScenarioErrors> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        ScenarioErrors(vec![ScenarioError {
            file: file.clone(),
            location: None,
            key: String::new(),
            message: format!("cannot read: {e}"),
        }])
    })?;
    let base = path.parent().unwrap_or(Path::new("."));
    parse(&text, &file, base, options)
}

fn tidy(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Checks scenario `text`; `file` names it in messages, `base` is where relative paths
/// (switch configurations, CDF files) start.
///
/// # Errors
/// As [`load`].
pub fn parse(
    text: &str,
    file: &str,
    base: &Path,
    options: &LoadOptions,
) -> Result<Scenario, ScenarioErrors> {
    let one = |location, key: String, message: String| {
        ScenarioErrors(vec![ScenarioError {
            file: file.to_owned(),
            location,
            key,
            message,
        }])
    };
    let doc = toml_edit::ImDocument::parse(text.to_owned()).map_err(|e| {
        one(
            e.span().map(|s| location_of(text, s.start)),
            String::new(),
            tidy(e.message()),
        )
    })?;
    let spans = Spans::build(&doc);
    let raw: Raw = toml_edit::de::from_document(doc).map_err(|e| {
        let span = e.span();
        let mut key = span
            .as_ref()
            .and_then(|s| spans.path_at(s))
            .unwrap_or("")
            .to_owned();
        let mut message = tidy(e.message());
        if let Some(field) = message
            .strip_prefix("missing field `")
            .and_then(|r| r.strip_suffix('`'))
        {
            key = if key.is_empty() {
                field.to_owned()
            } else {
                format!("{key}.{field}")
            };
            message = "missing (required key)".to_owned();
        }
        one(span.map(|s| location_of(text, s.start)), key, message)
    })?;
    let blame = Blame {
        file,
        text,
        spans: &spans,
    };
    Resolver {
        blame: &blame,
        errors: Vec::new(),
        divisor: options.time_divisor.unwrap_or(1).max(1),
    }
    .resolve(raw, base, options)
}

struct Resolver<'a> {
    blame: &'a Blame<'a>,
    errors: Vec<ScenarioError>,
    divisor: u64,
}

impl Resolver<'_> {
    fn err(&mut self, key: &str, message: impl Into<String>) {
        let e = self.blame.error(key, message);
        self.errors.push(e);
    }

    /// A duration, scaled by the time divisor.
    fn time(&mut self, key: &str, text: &str) -> Option<u64> {
        match parse_duration_ns(text) {
            Ok(ns) => Some(ns / self.divisor),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    fn time_or(&mut self, key: &str, text: Option<&String>, default: u64) -> Option<u64> {
        match text {
            Some(t) => self.time(key, t),
            None => Some(default),
        }
    }

    /// A duration that is not scaled (a property of the hardware, not of the workload).
    fn fixed_time(&mut self, key: &str, text: &str) -> Option<u64> {
        match parse_duration_ns(text) {
            Ok(ns) => Some(ns),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    fn rate(&mut self, key: &str, text: &str) -> Option<u64> {
        match parse_rate_bps(text) {
            Ok(r) => Some(r),
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    fn bytes(&mut self, key: &str, v: IntOrText) -> Option<u64> {
        match parse_bytes(&v) {
            Ok(b) if b > 0 => Some(b),
            Ok(_) => {
                self.err(key, "must be > 0");
                None
            }
            Err(e) => {
                self.err(key, e);
                None
            }
        }
    }

    fn host(&mut self, topo: &Topology, key: &str, name: &str) -> Option<usize> {
        let h = topo.host(name);
        if h.is_none() {
            let known = topo.hosts.join(", ");
            self.err(key, format!("no host {name:?} (hosts: {known})"));
        }
        h
    }

    fn resolve(
        mut self,
        raw: Raw,
        base: &Path,
        options: &LoadOptions,
    ) -> Result<Scenario, ScenarioErrors> {
        let duration_ns = self.time("simulation.duration", &raw.simulation.duration);
        if duration_ns == Some(0) {
            self.err("simulation.duration", "must be > 0");
        }
        let sample_interval_ns = self.time_or(
            "simulation.sample_interval",
            raw.simulation.sample_interval.as_ref(),
            10_000 / self.divisor.min(10_000),
        );
        if sample_interval_ns == Some(0) {
            self.err("simulation.sample_interval", "must be > 0");
        }
        if let (Some(d), Some(i)) = (duration_ns, sample_interval_ns) {
            if i > 0 && d / i > 1_000_000 {
                self.err(
                    "simulation.sample_interval",
                    format!("{} samples: at most 1000000 (raise the interval)", d / i),
                );
            }
        }
        let seed = options.seed.or(raw.simulation.seed).unwrap_or(1);
        let topology = self.topology(&raw.topology);
        let ecmp_seeds = self.ecmp_seeds(&raw.topology, seed);
        if topology.as_ref().is_some_and(|t| t.routed) {
            // A router interface takes untagged (and priority-tagged) frames only.
            if raw.nic.vlan.is_some() {
                self.err(
                    "nic.vlan",
                    "a routed topology's ports are router interfaces: frames are untagged",
                );
            }
            for (i, f) in raw.flow.iter().enumerate() {
                if f.vlan.is_some() {
                    self.err(
                        &format!("flow[{i}].vlan"),
                        "a routed topology's ports are router interfaces: frames are untagged",
                    );
                }
            }
        } else if raw.topology.ecmp_hash_seed.is_some() {
            self.err(
                "topology.ecmp_hash_seed",
                "only routed shapes (\"leaf_spine\", \"fat_tree\", \"ring\") hash over ECMP paths",
            );
        }
        let (switch_params, switch_config_files) = match &topology {
            Some(t) => self.switches(&raw.switch, t, base),
            None => (Vec::new(), Vec::new()),
        };
        let nics = topology
            .as_ref()
            .map(|t| self.nics(&raw, t))
            .unwrap_or_default();
        let flows = match &topology {
            Some(t) => self.flows(&raw, t, base, seed, duration_ns.unwrap_or(0)),
            None => Vec::new(),
        };
        if !self.errors.is_empty() {
            return Err(ScenarioErrors(self.errors));
        }
        let (Some(topology), Some(duration_ns), Some(sample_interval_ns)) =
            (topology, duration_ns, sample_interval_ns)
        else {
            return Err(ScenarioErrors(self.errors));
        };
        Ok(Scenario {
            file: self.blame.file.to_owned(),
            duration_ns,
            seed,
            sample_interval_ns,
            max_steps: raw.simulation.max_steps.unwrap_or(2_000_000_000),
            topology,
            switch_params,
            switch_config_files,
            nics,
            flows,
            ecmp_seeds,
        })
    }

    /// `topology.ecmp_hash_seed`: `"per_switch"` (the default: every switch its own seed,
    /// derived from the scenario's seed) or one integer for every switch.
    fn ecmp_seeds(&mut self, raw: &RawTopology, seed: u64) -> EcmpSeeds {
        let key = "topology.ecmp_hash_seed";
        match &raw.ecmp_hash_seed {
            None => EcmpSeeds::PerSwitch(seed_low_bits(seed)),
            Some(IntOrText::Text(t)) if t == "per_switch" => {
                EcmpSeeds::PerSwitch(seed_low_bits(seed))
            }
            Some(IntOrText::Int(n)) => match u32::try_from(*n) {
                Ok(n) => EcmpSeeds::Same(n),
                Err(_) => {
                    self.err(key, format!("{n} not in 0..=4294967295"));
                    EcmpSeeds::PerSwitch(0)
                }
            },
            Some(IntOrText::Text(t)) => {
                self.err(
                    key,
                    format!("{t:?}: expected \"per_switch\" or an integer seed"),
                );
                EcmpSeeds::PerSwitch(0)
            }
        }
    }

    fn topology(&mut self, t: &RawTopology) -> Option<Topology> {
        let rate = self.rate("topology.link_rate", &t.link_rate)?;
        let delay = self.fixed_time_or("topology.link_delay", t.link_delay.as_ref(), 1_000)?;
        let params = LinkParams::new(rate, delay);
        let count =
            |r: &mut Self, key: &str, v: Option<u32>, min: u32, max: u32| -> Option<usize> {
                match v {
                    None => {
                        r.err(
                            &format!("topology.{key}"),
                            format!("missing (required for shape {:?})", t.shape),
                        );
                        None
                    }
                    Some(n) if n < min || n > max => {
                        r.err(
                            &format!("topology.{key}"),
                            format!("{n} not in {min}..={max}"),
                        );
                        None
                    }
                    Some(n) => Some(n as usize),
                }
            };
        let switches_count = |r: &mut Self| -> Option<u32> {
            match t.switches.clone()? {
                CountOrNames::Count(n) => Some(n),
                CountOrNames::Names(_) => {
                    r.err("topology.switches", "an integer (the number of switches)");
                    None
                }
            }
        };
        match t.shape.as_str() {
            "single_switch" => {
                let n = count(self, "hosts", t.hosts, 2, 1024)?;
                Some(Topology {
                    routed: false,
                    routes_one_way: false,
                    hosts: (0..n).map(|i| format!("h{i}")).collect(),
                    switches: vec!["s0".into()],
                    links: (0..n)
                        .map(|i| TopoLink {
                            a: Node::Host(i),
                            b: Node::Switch(0),
                            params,
                        })
                        .collect(),
                })
            }
            "line" => {
                let m = switches_count(self);
                let m = count(self, "switches", m, 1, 256)?;
                let k = count(self, "hosts_per_switch", t.hosts_per_switch, 1, 256)?;
                let mut links = hosts_under(m, k, params);
                for s in 1..m {
                    links.push(TopoLink {
                        a: Node::Switch(s - 1),
                        b: Node::Switch(s),
                        params,
                    });
                }
                Some(Topology {
                    routed: false,
                    routes_one_way: false,
                    hosts: (0..m * k).map(|i| format!("h{i}")).collect(),
                    switches: (0..m).map(|i| format!("s{i}")).collect(),
                    links,
                })
            }
            "custom" => self.custom(t, params),
            "leaf_spine" => {
                let leaves = count(self, "leaves", t.leaves, 1, 256);
                let spines = count(self, "spines", t.spines, 1, 64);
                let per_leaf = count(self, "hosts_per_leaf", t.hosts_per_leaf, 1, 256);
                let (leaves, spines, per_leaf) = (leaves?, spines?, per_leaf?);
                Some(leaf_spine(leaves, spines, per_leaf, params))
            }
            "ring" => {
                let m = switches_count(self);
                let m = count(self, "switches", m, 3, 64);
                let k = count(self, "hosts_per_switch", t.hosts_per_switch, 1, 64);
                let (m, k) = (m?, k?);
                Some(ring(m, k, params))
            }
            "fat_tree" => {
                let k = count(self, "k", t.k, 2, 16)?;
                if k % 2 == 1 {
                    self.err("topology.k", format!("{k}: a fat tree's k is even"));
                    return None;
                }
                Some(fat_tree(k, params))
            }
            other => {
                self.err(
                    "topology.shape",
                    format!(
                        "unknown shape {other:?}: expected \"single_switch\", \"line\", \
                         \"custom\", \"leaf_spine\", \"fat_tree\" or \"ring\""
                    ),
                );
                None
            }
        }
    }

    fn fixed_time_or(&mut self, key: &str, text: Option<&String>, default: u64) -> Option<u64> {
        match text {
            Some(t) => self.fixed_time(key, t),
            None => Some(default),
        }
    }

    fn custom(&mut self, t: &RawTopology, params: LinkParams) -> Option<Topology> {
        let switches: Vec<String> = match t.switches.clone() {
            Some(CountOrNames::Names(s)) if !s.is_empty() => s,
            _ => {
                self.err(
                    "topology.switches",
                    "a custom topology names its switches: switches = [\"s0\", ...]",
                );
                return None;
            }
        };
        let Some(raw_links) = t.links.as_ref().filter(|l| !l.is_empty()) else {
            self.err(
                "topology.links",
                "a custom topology lists its links: links = [{ a = \"h0\", b = \"s0\" }, ...]",
            );
            return None;
        };
        let mut hosts: Vec<String> = Vec::new();
        let mut links = Vec::new();
        for (i, l) in raw_links.iter().enumerate() {
            let key = format!("topology.links[{i}]");
            let mut node = |name: &str| -> Node {
                if let Some(s) = switches.iter().position(|s| s == name) {
                    Node::Switch(s)
                } else if let Some(h) = hosts.iter().position(|h| h == name) {
                    Node::Host(h)
                } else {
                    hosts.push(name.to_owned());
                    Node::Host(hosts.len() - 1)
                }
            };
            let (a, b) = (node(&l.a), node(&l.b));
            if a == b {
                self.err(&key, "a link joins two different nodes");
            }
            if matches!((a, b), (Node::Host(_), Node::Host(_))) {
                self.err(
                    &key,
                    format!(
                        "{:?} and {:?} are both hosts (names not in topology.switches are hosts)",
                        l.a, l.b
                    ),
                );
            }
            let rate = match &l.rate {
                Some(r) => self.rate(&format!("{key}.rate"), r),
                None => Some(params.rate_bps),
            };
            let delay = match &l.delay {
                Some(d) => self.fixed_time(&format!("{key}.delay"), d),
                None => Some(params.propagation_ns),
            };
            if let (Some(rate), Some(delay)) = (rate, delay) {
                links.push(TopoLink {
                    a,
                    b,
                    params: LinkParams::new(rate, delay),
                });
            }
        }
        for (i, h) in hosts.iter().enumerate() {
            let n = links
                .iter()
                .filter(|l| l.a == Node::Host(i) || l.b == Node::Host(i))
                .count();
            if n > 1 {
                self.err(
                    "topology.links",
                    format!("host {h:?} has {n} links (one NIC each)"),
                );
            }
        }
        Some(Topology {
            routed: false,
            routes_one_way: false,
            hosts,
            switches,
            links,
        })
    }

    fn switches(
        &mut self,
        raw: &RawSwitch,
        topo: &Topology,
        base: &Path,
    ) -> (Vec<SwitchParams>, Vec<PathBuf>) {
        for name in raw.config_for.keys() {
            if !topo.switches.contains(name) {
                self.err(
                    &format!("switch.config_for.{name}"),
                    format!(
                        "no switch {name:?} (switches: {})",
                        topo.switches.join(", ")
                    ),
                );
            }
        }
        let degrees = topo.degrees();
        let mut loaded: BTreeMap<PathBuf, Option<SwitchParams>> = BTreeMap::new();
        let mut params = Vec::new();
        let mut files = Vec::new();
        for (s, name) in topo.switches.iter().enumerate() {
            let (key, rel) = match raw.config_for.get(name) {
                Some(f) => (format!("switch.config_for.{name}"), f),
                None => ("switch.config".to_owned(), &raw.config),
            };
            let path = base.join(rel);
            let p = loaded
                .entry(path.clone())
                .or_insert_with(|| load_switch_config(&path, &key, self))
                .clone();
            let Some(p) = p else { continue };
            if p.ports.len() < degrees[s] {
                self.err(
                    &key,
                    format!(
                        "{}: {} ports, but switch {name} has {} links",
                        path.display(),
                        p.ports.len(),
                        degrees[s]
                    ),
                );
                continue;
            }
            // Port speeds against link rates, in port order.
            let mut port = 0usize;
            for l in &topo.links {
                for n in [l.a, l.b] {
                    if n == Node::Switch(s) {
                        let speed = p.ports[port].speed_bps;
                        if speed != l.params.rate_bps {
                            self.err(
                                &key,
                                format!(
                                    "{}: port {} ({}) of switch {name} runs at {} b/s, its link at \
                                     {} b/s",
                                    path.display(),
                                    port,
                                    p.ports[port].name,
                                    speed,
                                    l.params.rate_bps
                                ),
                            );
                        }
                        port += 1;
                    }
                }
            }
            params.push(p);
            files.push(path);
        }
        (params, files)
    }

    fn nics(&mut self, raw: &Raw, topo: &Topology) -> Vec<RdmaHostParams> {
        let n = &raw.nic;
        let mut p = RdmaHostParams::default();
        if let Some(d) = n.dscp {
            if d > 63 {
                self.err("nic.dscp", format!("{d} not in 0..=63"));
            }
            p.nic.data_dscp = d;
        }
        if let Some(pr) = n.priority {
            if pr > 7 {
                self.err("nic.priority", format!("{pr} not in 0..=7"));
            }
            p.nic.data_priority = pr;
        }
        if let Some(m) = n.pmtu {
            match PathMtu::from_bytes(m) {
                Some(m) => p.nic.pmtu = m,
                None => self.err(
                    "nic.pmtu",
                    format!("{m}: one of 256, 512, 1024, 2048, 4096"),
                ),
            }
        }
        if let Some(v) = n.vlan {
            if !(1..=4094).contains(&v) {
                self.err("nic.vlan", format!("{v} not in 1..=4094"));
            }
            p.nic.vlan_id = Some(v);
        }
        match n.dcqcn.as_deref() {
            None | Some("off") => {}
            Some("paper") => {
                p.nic.rp = Some(RpParams::paper());
                p.nic.np = Some(NpConfig::paper());
            }
            Some("nvidia") => {
                p.nic.rp = Some(RpParams::nvidia());
                p.nic.np = Some(NpConfig::nvidia());
            }
            Some(other) => self.err(
                "nic.dcqcn",
                format!("{other:?}: expected \"off\", \"paper\" or \"nvidia\""),
            ),
        }
        if let Some(i) = &n.cnp_interval {
            if let Some(ns) = self.fixed_time("nic.cnp_interval", i) {
                match &mut p.nic.np {
                    Some(np) => np.min_time_between_cnps_ns = ns,
                    None => self.err(
                        "nic.cnp_interval",
                        "needs nic.dcqcn = \"paper\" or \"nvidia\"",
                    ),
                }
            }
        }
        // The RC transport's limits (headroom-roce refuses the rest, without a key to name):
        // a PSN window below 2^23 (IBTA: half the 24-bit PSN space); a send queue and an ACK
        // interval of at least one, and no more than a NIC's (64 Ki work requests here).
        let within = |r: &mut Self, key: &str, v: u64, max: u64| -> bool {
            let ok = (1..=max).contains(&v);
            if !ok {
                r.err(key, format!("{v} not in 1..={max}"));
            }
            ok
        };
        if let Some(w) = n.window_packets {
            if within(self, "nic.window_packets", u64::from(w), (1 << 23) - 1) {
                p.nic.window_packets = w;
            }
        }
        if let Some(t) = &n.retransmit_timeout {
            match self.fixed_time("nic.retransmit_timeout", t) {
                Some(0) => self.err("nic.retransmit_timeout", "must be > 0"),
                Some(ns) => p.nic.retransmit_timeout_ns = ns,
                None => {}
            }
        }
        if let Some(d) = n.send_queue_depth {
            if within(self, "nic.send_queue_depth", d as u64, 1 << 16) {
                p.nic.send_queue_depth = d;
            }
        }
        if let Some(a) = n.ack_every {
            if within(self, "nic.ack_every", u64::from(a), 1 << 16) {
                p.nic.ack_coalesce_packets = a;
            }
        }
        let mut nics = vec![p; topo.hosts.len()];
        for (i, f) in raw.fault.iter().enumerate() {
            let key = format!("fault[{i}]");
            let Some(h) = self.host(topo, &format!("{key}.host"), &f.host) else {
                continue;
            };
            let mut faults = NicFaults {
                ignore_pfc: f.ignore_pfc,
                pfc_storm: None,
            };
            if let Some(s) = &f.pfc_storm {
                let k = format!("{key}.pfc_storm");
                let mut mask = 0u8;
                for &pr in &s.priorities {
                    if pr > 7 {
                        self.err(&format!("{k}.priorities"), format!("{pr} not in 0..=7"));
                    } else {
                        mask |= 1 << pr;
                    }
                }
                if mask == 0 {
                    self.err(&format!("{k}.priorities"), "at least one priority");
                }
                let interval = self.fixed_time(&format!("{k}.interval"), &s.interval);
                if interval == Some(0) {
                    self.err(&format!("{k}.interval"), "must be > 0");
                }
                let start = self.time_or(&format!("{k}.start"), s.start.as_ref(), 0);
                let stop = s
                    .stop
                    .as_ref()
                    .and_then(|t| self.time(&format!("{k}.stop"), t));
                if let (Some(interval), Some(start)) = (interval, start) {
                    faults.pfc_storm = Some(PfcStorm {
                        priorities: mask,
                        quanta: s.quanta.unwrap_or(0xFFFF),
                        interval_ns: interval.max(1),
                        start: Instant::from_nanos(start),
                        stop: stop.map(Instant::from_nanos),
                    });
                }
            }
            nics[h].faults = faults;
        }
        nics
    }

    fn flows(
        &mut self,
        raw: &Raw,
        topo: &Topology,
        base: &Path,
        seed: u64,
        duration_ns: u64,
    ) -> Vec<ScenarioFlow> {
        let mut flows = Vec::new();
        let t = |ns: u64| Instant::from_nanos(ns);
        for (i, f) in raw.flow.iter().enumerate() {
            let key = format!("flow[{i}]");
            let src = self.host(topo, &format!("{key}.src"), &f.src);
            let dst = self.host(topo, &format!("{key}.dst"), &f.dst);
            let unbounded = matches!(&f.size, IntOrText::Text(s) if s == "unbounded");
            let bytes = if unbounded {
                None
            } else {
                self.bytes(&format!("{key}.size"), f.size.clone())
            };
            let start = self.time_or(&format!("{key}.start"), f.start.as_ref(), 0);
            let stop = f
                .stop
                .as_ref()
                .and_then(|s| self.time(&format!("{key}.stop"), s));
            let message = match &f.message {
                Some(m) => self.bytes(&format!("{key}.message"), m.clone()),
                None => Some(1 << 20),
            };
            if message.is_some_and(|m| m > 1 << 31) {
                self.err(&format!("{key}.message"), "an RDMA WRITE is at most 2 GiB");
            }
            if src.is_some() && src == dst {
                self.err(&format!("{key}.dst"), "a flow needs two different hosts");
            }
            if let Some(v) = f.vlan {
                if !(1..=4094).contains(&v) {
                    self.err(&format!("{key}.vlan"), format!("{v} not in 1..=4094"));
                }
            }
            if let (Some(src), Some(dst), Some(start), Some(message)) = (src, dst, start, message) {
                if !unbounded && bytes.is_none() {
                    continue;
                }
                flows.push(ScenarioFlow {
                    spec: RdmaFlowSpec {
                        src: HostId(src),
                        dst: HostId(dst),
                        bytes,
                        start: t(start),
                        stop: stop.map(t),
                        message_bytes: u32::try_from(message).unwrap_or(1 << 31),
                        vlan_id: f.vlan,
                    },
                    kind: FlowKind::Flow(i),
                });
            }
        }
        for (i, c) in raw.incast.iter().enumerate() {
            let key = format!("incast[{i}]");
            let rx = self.host(topo, &format!("{key}.receiver"), &c.receiver);
            let senders: Vec<Option<usize>> = c
                .senders
                .iter()
                .enumerate()
                .map(|(j, s)| self.host(topo, &format!("{key}.senders[{j}]"), s))
                .collect();
            if c.senders.is_empty() {
                self.err(&format!("{key}.senders"), "at least one sender");
            }
            let size = self.bytes(&format!("{key}.size"), c.size.clone());
            let start = self.time_or(&format!("{key}.start"), c.start.as_ref(), 0);
            let count = c.count.unwrap_or(1);
            if count == 0 {
                self.err(&format!("{key}.count"), "must be > 0");
            }
            let period = match (&c.period, count) {
                (Some(p), _) => self.time(&format!("{key}.period"), p),
                (None, 1) => Some(0),
                (None, _) => {
                    self.err(
                        &format!("{key}.period"),
                        "missing (required when count > 1)",
                    );
                    None
                }
            };
            if senders.iter().flatten().any(|&s| Some(s) == rx) {
                self.err(&format!("{key}.senders"), "the receiver is not a sender");
            }
            let (Some(rx), Some(size), Some(start), Some(period)) = (rx, size, start, period)
            else {
                continue;
            };
            for round in 0..u64::from(count) {
                for s in senders.iter().flatten() {
                    flows.push(ScenarioFlow {
                        spec: RdmaFlowSpec {
                            src: HostId(*s),
                            dst: HostId(rx),
                            bytes: Some(size),
                            start: t(start + round * period),
                            stop: None,
                            message_bytes: u32::try_from(size.min(1 << 20)).unwrap_or(1 << 20),
                            vlan_id: None,
                        },
                        kind: FlowKind::Incast(i),
                    });
                }
            }
        }
        for (i, o) in raw.onoff.iter().enumerate() {
            let key = format!("onoff[{i}]");
            let src = self.host(topo, &format!("{key}.src"), &o.src);
            let dst = self.host(topo, &format!("{key}.dst"), &o.dst);
            let burst = self.bytes(&format!("{key}.burst"), o.burst.clone());
            let period = self.time(&format!("{key}.period"), &o.period);
            let start = self.time_or(&format!("{key}.start"), o.start.as_ref(), 0);
            let stop = self.time(&format!("{key}.stop"), &o.stop);
            if period == Some(0) {
                self.err(&format!("{key}.period"), "must be > 0");
            }
            let (Some(src), Some(dst), Some(burst), Some(period), Some(start), Some(stop)) =
                (src, dst, burst, period, start, stop)
            else {
                continue;
            };
            if (stop.saturating_sub(start)) / period.max(1) > 100_000 {
                self.err(&format!("{key}.period"), "more than 100000 bursts");
                continue;
            }
            let mut at = start;
            while at < stop {
                flows.push(ScenarioFlow {
                    spec: RdmaFlowSpec {
                        src: HostId(src),
                        dst: HostId(dst),
                        bytes: Some(burst),
                        start: t(at),
                        stop: None,
                        message_bytes: u32::try_from(burst.min(1 << 20)).unwrap_or(1 << 20),
                        vlan_id: None,
                    },
                    kind: FlowKind::OnOff(i),
                });
                at += period.max(1);
            }
        }
        for (i, r) in raw.random.iter().enumerate() {
            let key = format!("random[{i}]");
            let cdf = match workload::builtin_cdf(&r.cdf) {
                Some(c) => Some(c),
                None => match CdfFile::load(&base.join(&r.cdf)) {
                    Ok(c) => Some(c),
                    Err(e) => {
                        self.err(&format!("{key}.cdf"), e);
                        None
                    }
                },
            };
            if !(r.load > 0.0 && r.load <= 1.0) {
                self.err(&format!("{key}.load"), format!("{} not in (0, 1]", r.load));
                continue;
            }
            let hosts: Vec<usize> = match &r.hosts {
                Some(h) => h
                    .iter()
                    .enumerate()
                    .filter_map(|(j, n)| self.host(topo, &format!("{key}.hosts[{j}]"), n))
                    .collect(),
                None => (0..topo.hosts.len()).collect(),
            };
            if hosts.len() < 2 {
                self.err(&format!("{key}.hosts"), "at least two hosts");
                continue;
            }
            let start = self.time_or(&format!("{key}.start"), r.start.as_ref(), 0);
            let stop = self.time(&format!("{key}.stop"), &r.stop);
            let (Some(cdf), Some(start), Some(stop)) = (cdf, start, stop) else {
                continue;
            };
            let rates: Vec<u64> = hosts
                .iter()
                .map(|&h| {
                    topo.links
                        .iter()
                        .find(|l| l.a == Node::Host(h) || l.b == Node::Host(h))
                        .map_or(1, |l| l.params.rate_bps)
                })
                .collect();
            let generated = workload::poisson(
                &cdf,
                r.load,
                &hosts,
                &rates,
                start,
                stop.min(duration_ns.max(start)),
                seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            match generated {
                Ok(g) => flows.extend(g.into_iter().map(|spec| ScenarioFlow {
                    spec,
                    kind: FlowKind::Random(i),
                })),
                Err(e) => self.err(&key, e),
            }
        }
        // Per host, at most the NIC's QP count.
        let mut per_host = vec![0usize; topo.hosts.len()];
        for f in &flows {
            per_host[f.spec.src.0] += 1;
            per_host[f.spec.dst.0] += 1;
        }
        for (h, &n) in per_host.iter().enumerate() {
            if n > headroom_rnic::QPS_MAX {
                self.err(
                    "",
                    format!(
                        "host {} takes part in {n} flows; a NIC has at most {} QPs (shorten the \
                         workload or lower its load)",
                        topo.hosts[h],
                        headroom_rnic::QPS_MAX
                    ),
                );
            }
        }
        flows
    }
}

fn load_switch_config(path: &Path, key: &str, r: &mut Resolver<'_>) -> Option<SwitchParams> {
    let options = headroom_config::ParseOptions::with_allowed_cpus(0..4096);
    match headroom_config::load_with(path, &options) {
        Ok((config, _warnings)) => match config.switch_params() {
            Ok(p) => Some(p),
            Err(e) => {
                r.err(key, format!("{}: {e}", path.display()));
                None
            }
        },
        Err(errors) => {
            if errors
                .errors
                .iter()
                .any(|e| e.message.starts_with("cannot read"))
            {
                r.err(
                    key,
                    format!("{}: cannot read the switch configuration", path.display()),
                );
            }
            for e in errors.errors {
                r.errors.push(ScenarioError {
                    file: e.file,
                    location: e.location.map(|l| (l.line, l.column)),
                    key: e.key,
                    message: e.message,
                });
            }
            None
        }
    }
}
