//! `headroom lab fabric scenario NAME`: the fabric phenomena of issue 14, each one command that
//! builds (or repairs) the fabric it needs, runs traffic, reads every switch's counters and
//! reports what happened and where.
//!
//! # polarization
//!
//! ECMP polarisation needs two consecutive ECMP stages on a path (reference
//! routing-fabric-dcbx.md §4.2): with one link between each leaf and each spine, a leaf–spine–leaf
//! path is chosen once, at the source leaf, and cannot polarise. The scenario therefore builds 2
//! spines and 2 leaves with **one link from leaf1 to each spine and two from leaf2 to each
//! spine** (`--links-per-spine 1,2`): a flow from a leaf1 host to a leaf2 host is hashed by leaf1
//! over the two spines, then by that spine over its two links to leaf2. When both stages hash
//! alike (the same algorithm, SipHash, and the same seed on every switch), each spine receives
//! only the flows of one hash residue and sends all of them down one of its two links: the
//! other carries nothing. With each switch's own seed (the default) the stages choose
//! independently and both links carry about half. Why 1 and 2 links rather than 2 everywhere:
//! with four uplinks at leaf1 whether a spine's two uplinks sit at bucket positions of equal
//! parity depends on the order headroom numbers next hops (the order their routes arrived), so
//! the symmetric shape polarises in some runs only; two members at both stages polarise always.
//!
//! The traffic is UDP to port 4791 (RoCEv2's) from each leaf1 host to each leaf2 host, one flow
//! per UDP source port, as RoCE NICs spread QPs (reference §4.3), sent from the hosts' kernels
//! (kernel sockets: each flow's source port is exactly the chosen one). The load of each link is
//! the spine port's routed-out packet count (`rif_out_packets`, `show host-interfaces`) over the
//! run.
//!
//! # incast
//!
//! rocegen write_bw (DCQCN) from every host but the last to the last: a 3:1 incast whose
//! bottleneck is the receiver's leaf port. Goodput per sender, Jain fairness, drops and PFC on
//! priority 3 per switch port, from every switch's counters before and after. `--pfc off` makes
//! priority 3 lossy on every port for the run (the negative control).
//!
//! # storm
//!
//! A NIC whose receive pipeline is stuck keeps pausing its switch (Guo et al., SIGCOMM 2016,
//! §4.3): the last host of the last leaf sends a PFC frame pausing priority 3 for 65535 quanta
//! every 10 ms, while the first host of the first leaf sends it a lossless flow (UDP, DSCP 3 →
//! priority 3 under the template's DSCP trust) across the spines. Twice: with the watchdog off on
//! every port of every switch (`port.P.pfcwd.enabled = false` through the control socket), then
//! on (the template: drop, 200 ms detection). After detection plus a poll, the scenario counts
//! over a window the PFC frames the spines received from the stormed leaf, the frames the
//! spines sent to the other leaves (the pause going on), and the storms the stormed leaf
//! detected on the host's port. Without the watchdog the pause reaches the spines; with it the
//! leaf declares the storm, drops the queue and pauses nobody.

use super::plan::{Peer, Plan};
use super::victim::{Victim, VictimWindow};
use super::{read_plan, switch_socket, UpArgs};
use crate::client::{emit, Target};
use crate::lab::{in_namespace, LabError};
use crate::table::{thousands, Table};
use clap::{Args, Subcommand};
use headroom_runtime::protocol::{HostInterfacesView, Request, Show};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::ExitCode;
use std::time::Duration;

/// RoCEv2's UDP destination port.
pub(super) const ROCE_PORT: u16 = 4791;
/// The first UDP source port of the flows (RoCE NICs use 0xC000..=0xFFFF).
const FIRST_SOURCE_PORT: u16 = 0xC000;
/// A flow's share of its spine's traffic to the destination leaf above which the scenario calls
/// a spine polarised (all but a few keepalive-sized stragglers on one link).
const POLARISED_SHARE_PERCENT: f64 = 95.0;

/// `headroom lab fabric scenario NAME`.
#[derive(Debug, Args)]
pub(crate) struct ScenarioArgs {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Debug, Subcommand)]
enum Scenario {
    /// ECMP polarisation: the same hash seed on both ECMP stages (leaf, spine) vs each switch
    /// its own; the load of each spine's links to the destination leaf.
    Polarization(PolarizationArgs),
    /// A PFC storm from one host: without the watchdog the pause reaches the spines, with it
    /// the storm is contained at the host's leaf.
    Storm(StormArgs),
    /// Every host but the last → the last host (rocegen write_bw, DCQCN): goodput per
    /// sender, fairness, drops, PFC per hop.
    Incast(IncastArgs),
    /// A cyclic buffer dependency after two link failures (2 x 4 x 1, static bounce routes):
    /// the deadlock persists after the senders stop without the watchdog; with it, it breaks.
    Deadlock(super::deadlock::DeadlockArgs),
    /// The incast twice, ECN marking below the ingress XOFF point then above it: PFC, CNPs,
    /// ECN marks and a victim flow's goodput and delay side by side.
    EcnVsPfc(super::ecn_vs_pfc::EcnVsPfcArgs),
    /// The incast with PFC as the only brake: the pause funnelling back from the receiver's
    /// leaf to the spines and the senders' leaf, each hop's headroom use against the headroom
    /// it computed.
    Funnel(super::funnel::FunnelArgs),
}

#[derive(Debug, Args)]
struct StormArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it: 2 x 2 x 2).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Milliseconds from the start of the storm to the start of the window (detection and a
    /// poll of the watchdog, with margin).
    #[arg(long, default_value_t = 1500)]
    settle_ms: u64,
    /// Milliseconds of the window the PFC frames are counted in.
    #[arg(long, default_value_t = 2000)]
    window_ms: u64,
    /// Seconds to wait for the fabric to come up.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct PolarizationArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Flows (UDP source ports) from each leaf1 host to each leaf2 host.
    #[arg(long, default_value_t = 128)]
    flows_per_pair: u16,
    /// Datagrams per flow.
    #[arg(long, default_value_t = 2)]
    packets_per_flow: u32,
    /// The seed every switch gets in the equal-seeds run.
    #[arg(long, default_value_t = 7)]
    seed: u32,
    /// Seconds to wait for the fabric to come up, each run.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

pub(super) fn scenario(args: &ScenarioArgs) -> Result<ExitCode, LabError> {
    match &args.scenario {
        Scenario::Polarization(p) => polarization(p),
        Scenario::Storm(s) => storm(s),
        Scenario::Incast(i) => incast(i),
        Scenario::Deadlock(d) => super::deadlock::deadlock(d),
        Scenario::EcnVsPfc(e) => super::ecn_vs_pfc::ecn_vs_pfc(e),
        Scenario::Funnel(f) => super::funnel::funnel(f),
    }
}

/// One spine link's load in a run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct LinkLoad {
    /// The spine.
    pub switch: String,
    /// Its port.
    pub port: String,
    /// The leaf port at the other end.
    pub peer: String,
    /// Packets routed out of the port during the run.
    pub packets: u64,
    /// Its share of what the spine sent to the destination leaf, percent.
    pub share_percent: f64,
}

/// One run: a seed setting and what each link carried.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PolarizationRun {
    /// `equal` (one seed everywhere) or `per-switch`.
    pub seeds: String,
    /// The seed of every switch in an `equal` run.
    pub seed: Option<u32>,
    /// Every spine link to the destination leaf.
    pub links: Vec<LinkLoad>,
    /// The largest share one link had of its spine's traffic to the destination leaf, percent.
    pub busiest_share_percent: f64,
    /// Spines whose traffic to the destination leaf went (almost: above 95 %) all one way.
    pub polarised_spines: Vec<String>,
}

/// The scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PolarizationReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// The leaf the flows come from and the one they go to.
    pub source_leaf: String,
    /// See [`Self::source_leaf`].
    pub destination_leaf: String,
    /// Flows per run (source ports × host pairs).
    pub flows: usize,
    /// Datagrams per flow.
    pub packets_per_flow: u32,
    /// The equal-seeds run, then the per-switch one.
    pub runs: Vec<PolarizationRun>,
}

fn polarization(args: &PolarizationArgs) -> Result<ExitCode, LabError> {
    let mut runs = Vec::new();
    let mut flows = 0;
    let mut plan = None;
    for seed in [Some(args.seed), None] {
        let up = UpArgs {
            links_per_spine: vec![1, 2],
            ecmp_seed: seed,
            timeout: args.timeout,
            quiet: true,
            ..UpArgs::defaults(&args.prefix)
        };
        super::up(&up)?;
        let built = read_plan(&args.prefix).map_err(LabError::Failed)?;
        let before = spine_counters(&built)?;
        flows = send_flows(&built, args)?;
        // The last datagrams leave the spines within microseconds; a margin for the lcores.
        std::thread::sleep(Duration::from_millis(300));
        let after = spine_counters(&built)?;
        runs.push(measure(&built, seed, &before, &after));
        plan = Some(built);
    }
    let plan = plan.ok_or_else(|| LabError::Failed("no run".into()))?;
    let (source_leaf, destination_leaf) = ends(&plan);
    let report = PolarizationReport {
        fabric: args.prefix.clone(),
        source_leaf,
        destination_leaf,
        flows,
        packets_per_flow: args.packets_per_flow,
        runs,
    };
    print_report(&report, args.json, describe)?;
    Ok(ExitCode::SUCCESS)
}

/// The first leaf (the flows' source) and the last (their destination).
pub(super) fn ends(plan: &Plan) -> (String, String) {
    let mut leaves = plan.leaves();
    let first = leaves.next().map(|l| l.name.clone()).unwrap_or_default();
    let last = plan
        .leaves()
        .last()
        .map(|l| l.name.clone())
        .unwrap_or_default();
    (first, last)
}

/// `rif_out_packets` of every spine port: (spine, port) → packets.
fn spine_counters(plan: &Plan) -> Result<BTreeMap<(String, String), u64>, LabError> {
    let mut counters = BTreeMap::new();
    for spine in plan.spines() {
        let target = Target::for_socket(switch_socket(&plan.spec.prefix, &spine.name));
        let (view, _) = target
            .fetch::<HostInterfacesView>(&Request::Show {
                what: Show::HostInterfaces,
            })
            .map_err(|e| LabError::Failed(format!("{}: {e}", spine.name)))?;
        for row in view.interfaces {
            counters.insert((spine.name.clone(), row.interface), row.rif_out_packets);
        }
    }
    Ok(counters)
}

/// Sends the flows: from every host of the source leaf to every host of the destination leaf,
/// one UDP source port per flow; the number of flows.
fn send_flows(plan: &Plan, args: &PolarizationArgs) -> Result<usize, LabError> {
    let (source, destination) = ends(plan);
    let targets: Vec<Ipv4Addr> = plan.hosts_of(&destination).map(|h| h.address).collect();
    let mut flows = 0;
    for host in plan.hosts_of(&source) {
        let sent = in_namespace(&host.namespace, || {
            let mut sent = 0usize;
            let payload = [0u8; 64];
            for &to in &targets {
                for f in 0..args.flows_per_pair {
                    let port = FIRST_SOURCE_PORT + f;
                    let socket = UdpSocket::bind(SocketAddrV4::new(host.address, port))?;
                    for _ in 0..args.packets_per_flow {
                        socket.send_to(&payload, SocketAddrV4::new(to, ROCE_PORT))?;
                    }
                    sent += 1;
                    // About 7 kpps of 64-byte datagrams: far below 100M, no queue builds.
                    std::thread::sleep(Duration::from_micros(300));
                }
            }
            Ok(sent)
        })?;
        flows += sent;
    }
    Ok(flows)
}

/// The load of every spine link to the destination leaf over one run.
fn measure(
    plan: &Plan,
    seed: Option<u32>,
    before: &BTreeMap<(String, String), u64>,
    after: &BTreeMap<(String, String), u64>,
) -> PolarizationRun {
    let (_, destination) = ends(plan);
    let mut links = Vec::new();
    let mut polarised_spines = Vec::new();
    let mut busiest: f64 = 0.0;
    for spine in plan.spines() {
        let mut own: Vec<LinkLoad> = spine
            .ports
            .iter()
            .filter_map(|p| match &p.peer {
                Peer::Switch { name, port } if *name == destination => {
                    let key = (spine.name.clone(), p.name.clone());
                    let packets = after
                        .get(&key)
                        .copied()
                        .unwrap_or_default()
                        .saturating_sub(before.get(&key).copied().unwrap_or_default());
                    Some(LinkLoad {
                        switch: spine.name.clone(),
                        port: p.name.clone(),
                        peer: format!("{name} {port}"),
                        packets,
                        share_percent: 0.0,
                    })
                }
                _ => None,
            })
            .collect();
        let total: u64 = own.iter().map(|l| l.packets).sum();
        for l in &mut own {
            l.share_percent = if total == 0 {
                0.0
            } else {
                l.packets as f64 * 100.0 / total as f64
            };
            busiest = busiest.max(l.share_percent);
        }
        if own
            .iter()
            .any(|l| l.share_percent > POLARISED_SHARE_PERCENT)
        {
            polarised_spines.push(spine.name.clone());
        }
        links.extend(own);
    }
    PolarizationRun {
        seeds: if seed.is_some() {
            "equal"
        } else {
            "per-switch"
        }
        .to_owned(),
        seed,
        links,
        busiest_share_percent: busiest,
        polarised_spines,
    }
}

fn describe(report: &PolarizationReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "polarization on fabric {:?}: {} flows (UDP to {ROCE_PORT}, one source port each, {} \
         datagrams) from {} to {}, hashed by {} over the spines, then by each spine over its \
         links to {}",
        report.fabric,
        report.flows,
        report.packets_per_flow,
        report.source_leaf,
        report.destination_leaf,
        report.source_leaf,
        report.destination_leaf
    );
    for run in &report.runs {
        let what = match run.seed {
            Some(seed) => format!("ECMP seed {seed} on every switch"),
            None => "each switch its own ECMP seed".to_owned(),
        };
        let _ = writeln!(t, "\n{what}:");
        let mut table = Table::new(["Spine", "Port", "Peer", "Packets", "Share"]).left_all();
        for l in &run.links {
            table.row([
                l.switch.clone(),
                l.port.clone(),
                l.peer.clone(),
                thousands(l.packets),
                format!("{:.0} %", l.share_percent),
            ]);
        }
        let _ = write!(t, "{table}");
        if run.polarised_spines.is_empty() {
            let _ = writeln!(
                t,
                "  not polarised: the busiest link carries {:.0} % of its spine's traffic to {}",
                run.busiest_share_percent, report.destination_leaf
            );
        } else {
            for spine in &run.polarised_spines {
                let idle: Vec<String> = run
                    .links
                    .iter()
                    .filter(|l| {
                        &l.switch == spine && l.share_percent < 100.0 - POLARISED_SHARE_PERCENT
                    })
                    .map(|l| format!("{} (to {})", l.port, l.peer))
                    .collect();
                let _ = writeln!(
                    t,
                    "  POLARISED at {spine}: {} idle, every flow through {spine} on one link",
                    idle.join(", ")
                );
            }
        }
    }
    t
}

/// The priority the stormed NIC pauses and the flow uses (a lossless one of the template).
const STORM_PRIORITY: usize = 3;
/// DSCP of the lossless flow: 3 → priority 3 (SONiC's AZURE map, the template's trust).
const STORM_DSCP: u8 = 3;

/// One port's PFC counter in a storm run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PfcLoad {
    /// The switch.
    pub switch: String,
    /// Its port.
    pub port: String,
    /// What is at the other end.
    pub peer: String,
    /// PFC frames on the storm's priority during the window (received or sent, see the field
    /// holding it).
    pub frames: u64,
}

/// One storm run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StormRun {
    /// The watchdog on every port (the template) or off.
    pub watchdog: bool,
    /// PFC frames the stormed host sent, the whole run.
    pub storm_frames_sent: u64,
    /// Datagrams of the lossless flow, the whole run.
    pub flow_datagrams_sent: u64,
    /// PFC frames the spines received from the stormed leaf in the window, per port.
    pub spines_received_from_leaf: Vec<PfcLoad>,
    /// PFC frames the spines sent to the other leaves in the window (the pause going on).
    pub spines_sent_to_other_leaves: Vec<PfcLoad>,
    /// Sum of [`Self::spines_received_from_leaf`].
    pub spine_pfc_received: u64,
    /// Sum of [`Self::spines_sent_to_other_leaves`].
    pub spine_pfc_sent: u64,
    /// Storms the stormed leaf detected on the host's port since it started (the off run
    /// comes first, so the on run's count is its own).
    pub storms_detected: u64,
    /// The stormed port's watchdog state at the end of the window.
    pub watchdog_state: String,
    /// Milliseconds from the storm's first PFC frame until the stormed leaf's counters showed
    /// the detection (polled every [`DETECTION_POLL`], so an upper bound by up to a poll and a
    /// round of control requests); `None` without the watchdog or when nothing was detected
    /// before the window.
    pub detected_after_ms: Option<u64>,
    /// The victim flows (between two hosts the storm does not involve), before the storm, in
    /// the window, and in the second after the storm.
    pub victims: Vec<StormVictim>,
    /// Victim flows that received less than half of what they sent in the window.
    pub victims_stalled: u64,
}

/// One victim flow of a storm run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StormVictim {
    /// `host2:50000 -> host3:5001`.
    pub flow: String,
    /// The second before the storm (after a warm-up).
    pub before: VictimWindow,
    /// The window the PFC frames are counted in.
    pub during: VictimWindow,
    /// The second after the storm stopped.
    pub after: VictimWindow,
    /// Datagrams never received, the whole run.
    pub lost: u64,
}

impl StormVictim {
    /// Received less than half of what it sent in the window.
    fn stalled(&self) -> bool {
        self.during.received * 2 < self.during.sent
    }
}

/// Victim flows in the storm scenario: several 5-tuples (fixed UDP ports), so that some hash
/// to the spine the storm pauses. The spine is chosen per flow by the ECMP hash (SipHash with
/// each switch's seed), a coin flip per flow: with 8 flows one run here had all 8 on the other
/// spine (a 1-in-256 chance) and showed no victim; 32 make that 1 in 4 billion.
const STORM_VICTIM_FLOWS: u16 = 32;
/// Each victim's period: 32 flows of 256 B every 40 ms, 1.6 Mb/s in all. A stalled flow's
/// datagrams wait in its leaf, in the PG of the victims' sending host, for the settle time and
/// the window (3.5 s): at most 0.72 MB if all 32 stall, below that PG's XOFF point (1,056,768 B
/// at 100M), so the victims never make their leaf pause their host, which ignores PFC, and then
/// drop it. (At eight flows of one datagram a millisecond they did: every victim flow lost its
/// datagrams at leaf1, also those hashed to the spine that was not paused.)
const STORM_VICTIM_INTERVAL: Duration = Duration::from_millis(40);
/// Victims start this long before the storm.
const STORM_VICTIM_LEAD: Duration = Duration::from_millis(1000);
/// The first milliseconds of the victims (ARP, the first datagrams) are not measured.
const STORM_VICTIM_WARMUP_MS: u64 = 200;

/// The storm's victims: the second host of the first leaf (the first host sends the flow that
/// feeds the storm; a Linux host ignores PFC, so once its leaf's PG is full every flow from it
/// is dropped at the leaf, and the victims would then measure that, not the pause) → the first
/// host of the stormed leaf, which is not the stormed host.
fn storm_victim_hosts(
    plan: &Plan,
    first_leaf: &str,
    last_leaf: &str,
    stormed: &super::plan::Host,
) -> Result<(super::plan::Host, super::plan::Host), LabError> {
    let from = plan.hosts_of(first_leaf).nth(1).cloned();
    let to = plan
        .hosts_of(last_leaf)
        .find(|h| h.name != stormed.name)
        .cloned();
    match (from, to) {
        (Some(from), Some(to)) => Ok((from, to)),
        _ => Err(LabError::Failed(format!(
            "the storm's victim flows need two hosts on {first_leaf} and on {last_leaf} \
             (--hosts-per-leaf 2 or more)"
        ))),
    }
}

/// How often the storm scenario looks for the watchdog's detection during the settle time.
const DETECTION_POLL: Duration = Duration::from_millis(25);

/// The storm scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct StormReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// The host whose NIC storms, its leaf, and the leaf's port to it.
    pub stormed_host: String,
    /// See [`Self::stormed_host`].
    pub stormed_leaf: String,
    /// See [`Self::stormed_host`].
    pub stormed_port: String,
    /// The host sending the lossless flow to it.
    pub sender: String,
    /// The PFC priority.
    pub priority: usize,
    /// The window, ms.
    pub window_ms: u64,
    /// Watchdog off, then on.
    pub runs: Vec<StormRun>,
}

/// A thread repeating `each` every `every` until `stop`; the number of times it ran.
fn repeat<'scope>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    stop: &'scope std::sync::atomic::AtomicBool,
    every: Duration,
    mut each: impl FnMut() + Send + 'scope,
) -> std::thread::ScopedJoinHandle<'scope, u64> {
    std::thread::Builder::new()
        .spawn_scoped(scope, move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                each();
                n += 1;
                std::thread::sleep(every);
            }
            n
        })
        .expect("spawning a thread")
}

/// Prints a scenario's report: one JSON object with `--json`, else its `describe` text.
pub(super) fn print_report<R: Serialize>(
    report: &R,
    json: bool,
    describe: impl FnOnce(&R) -> String,
) -> Result<(), LabError> {
    if json {
        let text =
            serde_json::to_string_pretty(report).map_err(|e| LabError::Failed(e.to_string()))?;
        emit(format_args!("{text}\n"));
    } else {
        emit(format_args!("{}", describe(report)));
    }
    Ok(())
}

/// Sets `port_defaults.KEY_SUFFIX = value` on every switch: every port of the fabric template
/// takes the key from `[port_defaults]` (none sets it itself), so one `set` per switch changes
/// every port.
pub(super) fn set_on_every_port(
    plan: &Plan,
    key_suffix: &str,
    value: &str,
) -> Result<(), LabError> {
    set_on_every_switch(plan, &format!("port_defaults.{key_suffix}"), value)
}

/// Sets `key = value` on every switch, and returns once the hosts that reached each other
/// before do again. A `set` is a drained restart of the switch's dataplane
/// (docs/operations.md), which takes up to seconds under load: all switches at once, one
/// thread each, instead of in turn (a 6-switch fabric took minutes that way). Forwarding stops
/// for 140-180 ms here, for seconds under heavy load (a storm run once measured nothing at all
/// for its first seconds after the watchdog's `set`): a scenario must not start its traffic
/// before it is back. Only the pairs that pinged before are waited for: `deadlock` sets with
/// links down, when some pairs have no route.
pub(super) fn set_on_every_switch(plan: &Plan, key: &str, value: &str) -> Result<(), LabError> {
    let reachable = super::reachable_pairs(plan);
    set_everywhere(plan, key, value)?;
    super::wait_until_pairs_reach(
        &reachable,
        std::time::Instant::now() + Duration::from_secs(30),
    )
    .map_err(|e| LabError::Failed(format!("after setting {key} = {value}: {e}")))
}

fn set_everywhere(plan: &Plan, key: &str, value: &str) -> Result<(), LabError> {
    use headroom_runtime::protocol::Change;
    let set_one = |switch: &super::plan::Switch| -> Result<(), LabError> {
        let target = Target::for_socket(switch_socket(&plan.spec.prefix, &switch.name));
        let change = Change::Key {
            key: key.to_owned(),
            value: value.to_owned(),
        };
        let answer = target
            .request(&Request::Set { change })
            .map_err(|e| LabError::Failed(format!("{}: {e}", switch.name)))?;
        if answer.ok {
            Ok(())
        } else {
            Err(LabError::Failed(format!(
                "{}: setting {key} = {value} refused: {}",
                switch.name, answer.data
            )))
        }
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = plan
            .switches
            .iter()
            .map(|switch| scope.spawn(move || set_one(switch)))
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(LabError::Failed("a set thread panicked".into())))
            })
            .collect::<Vec<_>>()
            .into_iter()
            .collect::<Result<(), LabError>>()
    })
}

/// Builds (or repairs into) the scenarios' default fabric, 2 × 2 × 2, under `prefix`, waiting
/// up to `timeout_s` for it, and reads its plan.
pub(super) fn default_fabric(prefix: &str, timeout_s: u64) -> Result<Plan, LabError> {
    let up = UpArgs {
        timeout: timeout_s,
        quiet: true,
        ..UpArgs::defaults(prefix)
    };
    super::up(&up)?;
    read_plan(prefix).map_err(LabError::Failed)
}

/// The last leaf and its last host: the incast's receiver, the stormed host.
pub(super) fn last_host(plan: &Plan) -> Result<(String, super::plan::Host), LabError> {
    let (_, leaf) = ends(plan);
    let host = plan
        .hosts_of(&leaf)
        .last()
        .cloned()
        .ok_or_else(|| LabError::Failed(format!("{leaf} has no host")))?;
    Ok((leaf, host))
}

/// Sets every port's watchdog of every switch on or off.
pub(super) fn set_watchdogs(plan: &Plan, enabled: bool) -> Result<(), LabError> {
    set_on_every_port(plan, "pfcwd.enabled", &enabled.to_string())
}

fn storm(args: &StormArgs) -> Result<ExitCode, LabError> {
    let plan = default_fabric(&args.prefix, args.timeout)?;
    let (first_leaf, _) = ends(&plan);
    let (last_leaf, stormed) = last_host(&plan)?;
    let sender = plan
        .hosts_of(&first_leaf)
        .next()
        .cloned()
        .ok_or_else(|| LabError::Failed(format!("{first_leaf} has no host")))?;
    let (victim_from, victim_to) = storm_victim_hosts(&plan, &first_leaf, &last_leaf, &stormed)?;
    // The PFC frame of a stuck NIC (IEEE 802.1Qbb): priority 3 paused for 65535 quanta (0.34 s
    // at 100M), from the host's MAC.
    let mut quanta = [0u16; 8];
    quanta[STORM_PRIORITY] = 0xFFFF;
    let frame =
        headroom_wire::mac_control::MacControlRepr::Pfc(headroom_wire::mac_control::PfcRepr {
            class_enable: 1 << STORM_PRIORITY,
            pause_quanta: quanta,
        });
    let mut pfc = [0u8; 60];
    frame
        .emit_frame(headroom_wire::ethernet::MacAddress(stormed.mac), &mut pfc)
        .map_err(|e| LabError::Failed(format!("building the PFC frame: {e:?}")))?;
    let storms_at = |v: &super::view::FabricView| {
        v.ports
            .iter()
            .find(|r| r.switch == last_leaf && r.port == stormed.leaf_port)
            .map_or(0, |r| r.storms_detected)
    };
    let mut runs = Vec::new();
    for watchdog in [false, true] {
        set_watchdogs(&plan, watchdog)?;
        let storms_before = storms_at(&super::view::collect(&plan));
        let raw = headroom_afpacket::lab::RawSender::open(&stormed.namespace, &stormed.device)
            .map_err(|e| {
                LabError::Failed(format!("packet socket in {}: {e}", stormed.namespace))
            })?;
        let socket = in_namespace(&sender.namespace, || {
            let socket = UdpSocket::bind(SocketAddrV4::new(sender.address, FIRST_SOURCE_PORT))?;
            rustix::net::sockopt::set_ip_tos(&socket, STORM_DSCP << 2)?;
            Ok(socket)
        })?;
        let to = SocketAddrV4::new(stormed.address, ROCE_PORT);
        let stop = std::sync::atomic::AtomicBool::new(false);
        let payload = [0u8; 1000];
        // The victims run from a second before the storm until a second after it.
        let base = std::time::Instant::now();
        let victims = (0..STORM_VICTIM_FLOWS)
            .map(|flow| Victim::start(&victim_from, &victim_to, STORM_VICTIM_INTERVAL, flow, base))
            .collect::<Result<Vec<_>, LabError>>()?;
        std::thread::sleep(STORM_VICTIM_LEAD);
        let ms = |at: std::time::Instant| {
            u64::try_from(at.saturating_duration_since(base).as_millis()).unwrap_or(u64::MAX)
        };
        let mut window_ms = (0, 0);
        let storm_start_ms = ms(std::time::Instant::now());
        let (before, after, storm_frames_sent, flow_datagrams_sent, detected_after_ms) =
            std::thread::scope(|scope| {
                let storm_started = std::time::Instant::now();
                let storm = repeat(scope, &stop, Duration::from_millis(10), || {
                    let _ = raw.send(&pfc);
                });
                // About 30 Mb/s of lossless traffic towards the stormed host.
                let flow = repeat(scope, &stop, Duration::from_micros(250), || {
                    let _ = socket.send_to(&payload, to);
                });
                // The settle time, watching for the detection (SONiC: within detection_time plus
                // a poll_interval of the storm's start).
                let settle = Duration::from_millis(args.settle_ms);
                let mut detected_after_ms = None;
                while storm_started.elapsed() < settle {
                    if watchdog
                        && detected_after_ms.is_none()
                        && storms_at(&super::view::collect(&plan)) > storms_before
                    {
                        detected_after_ms = Some(
                            u64::try_from(storm_started.elapsed().as_millis()).unwrap_or(u64::MAX),
                        );
                    }
                    std::thread::sleep(
                        DETECTION_POLL.min(settle.saturating_sub(storm_started.elapsed())),
                    );
                }
                window_ms.0 = ms(std::time::Instant::now());
                let before = super::view::collect(&plan);
                std::thread::sleep(Duration::from_millis(args.window_ms));
                let after = super::view::collect(&plan);
                window_ms.1 = ms(std::time::Instant::now());
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                (
                    before,
                    after,
                    storm.join().unwrap_or(0),
                    flow.join().unwrap_or(0),
                    detected_after_ms,
                )
            });
        for view in [&before, &after] {
            if let Some((name, e)) = view.unreachable.iter().next() {
                return Err(LabError::Failed(format!("{name} does not answer: {e}")));
            }
        }
        let delta = |switch: &str, port: &str, tx: bool| -> u64 {
            let pick = |v: &super::view::FabricView| {
                v.ports
                    .iter()
                    .find(|r| r.switch == switch && r.port == port)
                    .map_or(0, |r| {
                        if tx {
                            r.pfc_tx[STORM_PRIORITY]
                        } else {
                            r.pfc_rx[STORM_PRIORITY]
                        }
                    })
            };
            pick(&after).saturating_sub(pick(&before))
        };
        let mut received = Vec::new();
        let mut sent = Vec::new();
        for spine in plan.spines() {
            for port in &spine.ports {
                let Peer::Switch { name, port: far } = &port.peer else {
                    continue;
                };
                let peer = format!("{name} {far}");
                if *name == last_leaf {
                    received.push(PfcLoad {
                        switch: spine.name.clone(),
                        port: port.name.clone(),
                        peer,
                        frames: delta(&spine.name, &port.name, false),
                    });
                } else {
                    sent.push(PfcLoad {
                        switch: spine.name.clone(),
                        port: port.name.clone(),
                        peer,
                        frames: delta(&spine.name, &port.name, true),
                    });
                }
            }
        }
        let stormed_row = after
            .ports
            .iter()
            .find(|r| r.switch == last_leaf && r.port == stormed.leaf_port);
        runs.push(StormRun {
            watchdog,
            storm_frames_sent,
            flow_datagrams_sent,
            spine_pfc_received: received.iter().map(|l| l.frames).sum(),
            spine_pfc_sent: sent.iter().map(|l| l.frames).sum(),
            spines_received_from_leaf: received,
            spines_sent_to_other_leaves: sent,
            storms_detected: stormed_row.map_or(0, |r| r.storms_detected),
            watchdog_state: stormed_row.map_or_else(String::new, |r| r.watchdog.clone()),
            detected_after_ms,
            victims: Vec::new(),
            victims_stalled: 0,
        });
        // The storm is over: the paused queues drain and the watchdog restores; the victims
        // are measured over that second too.
        let storm_end_ms = ms(std::time::Instant::now());
        std::thread::sleep(Duration::from_secs(1));
        let end_ms = ms(std::time::Instant::now());
        let flows: Vec<StormVictim> = victims
            .into_iter()
            .zip(0u16..)
            .map(|(victim, flow)| {
                let record = victim.finish();
                let (source_port, destination_port) = Victim::ports(flow);
                StormVictim {
                    flow: format!(
                        "{}:{source_port} -> {}:{destination_port}",
                        victim_from.name, victim_to.name
                    ),
                    before: record.window(STORM_VICTIM_WARMUP_MS, storm_start_ms),
                    during: record.window(window_ms.0, window_ms.1),
                    after: record.window(storm_end_ms, end_ms),
                    lost: record.lost,
                }
            })
            .collect();
        if let Some(run) = runs.last_mut() {
            run.victims_stalled = flows.iter().filter(|f| f.stalled()).count() as u64;
            run.victims = flows;
        }
    }
    // The fabric is left as the template has it: the watchdog on.
    set_watchdogs(&plan, true)?;
    let report = StormReport {
        fabric: args.prefix.clone(),
        stormed_host: stormed.name.clone(),
        stormed_leaf: last_leaf,
        stormed_port: stormed.leaf_port.clone(),
        sender: sender.name.clone(),
        priority: STORM_PRIORITY,
        window_ms: args.window_ms,
        runs,
    };
    print_report(&report, args.json, describe_storm)?;
    Ok(ExitCode::SUCCESS)
}

fn describe_storm(r: &StormReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "storm on fabric {:?}: {}'s NIC pauses priority {} towards {} {} every 10 ms while {} \
         sends it a lossless flow (DSCP {STORM_DSCP}) across the spines; PFC counted over {} ms \
         after detection",
        r.fabric, r.stormed_host, r.priority, r.stormed_leaf, r.stormed_port, r.sender, r.window_ms
    );
    for run in &r.runs {
        let _ = writeln!(
            t,
            "\nwatchdog {} ({} PFC frames from {}, {} datagrams of the flow):",
            if run.watchdog { "on" } else { "off" },
            thousands(run.storm_frames_sent),
            r.stormed_host,
            thousands(run.flow_datagrams_sent)
        );
        let mut table = Table::new(["Spine", "Port", "Peer", "PFC rx", "PFC tx"]).left_all();
        for l in &run.spines_received_from_leaf {
            table.row([
                l.switch.clone(),
                l.port.clone(),
                l.peer.clone(),
                thousands(l.frames),
                String::new(),
            ]);
        }
        for l in &run.spines_sent_to_other_leaves {
            table.row([
                l.switch.clone(),
                l.port.clone(),
                l.peer.clone(),
                String::new(),
                thousands(l.frames),
            ]);
        }
        let _ = write!(t, "{table}");
        if run.spine_pfc_received > 0 {
            let at: Vec<String> = run
                .spines_received_from_leaf
                .iter()
                .filter(|l| l.frames > 0)
                .map(|l| format!("{} {}", l.switch, l.port))
                .collect();
            let _ = writeln!(
                t,
                "  SPREAD: {} pauses the spines ({} PFC frames at {}){}",
                r.stormed_leaf,
                run.spine_pfc_received,
                at.join(", "),
                if run.spine_pfc_sent > 0 {
                    format!(
                        ", and the spines pause the other leaves ({})",
                        run.spine_pfc_sent
                    )
                } else {
                    String::new()
                }
            );
        } else {
            let _ = writeln!(
                t,
                "  CONTAINED at {} {}: {} storm(s) detected (watchdog {}), no PFC to the spines",
                r.stormed_leaf, r.stormed_port, run.storms_detected, run.watchdog_state
            );
            if let Some(ms) = run.detected_after_ms {
                let _ = writeln!(
                    t,
                    "  DETECTED {ms} ms after the storm's first PFC frame (polled every {} ms)",
                    DETECTION_POLL.as_millis()
                );
            }
        }
        if let Some(first) = run.victims.first() {
            let mut table = Table::new([
                "Victim flow",
                "Before Mb/s",
                "Window Mb/s",
                "Window rx/tx",
                "Window p99 ms",
                "After Mb/s",
            ])
            .left_all();
            let ms = |v: Option<u64>| {
                v.map_or_else(|| "-".to_owned(), |us| format!("{:.1}", us as f64 / 1000.0))
            };
            for v in &run.victims {
                table.row([
                    v.flow.clone(),
                    format!("{:.2}", v.before.goodput_mbps),
                    format!("{:.2}", v.during.goodput_mbps),
                    format!("{}/{}", v.during.received, v.during.sent),
                    ms(v.during.delay_p99_us),
                    format!("{:.2}", v.after.goodput_mbps),
                ]);
            }
            let _ = write!(t, "{table}");
            let between = first.flow.split(':').next().unwrap_or("");
            let _ = writeln!(
                t,
                "  VICTIMS: {} of {} flows from {between} to a host other than {} {} in the window",
                run.victims_stalled,
                run.victims.len(),
                r.stormed_host,
                if run.victims_stalled > 0 {
                    "stalled (received less than half of what they sent): the pause stops flows \
                     that share only a link with the storm"
                } else {
                    "stalled"
                }
            );
        }
    }
    t
}

/// DSCP of the incast's RoCE traffic: 3 → priority 3, lossless in the template.
const INCAST_DSCP: u8 = 3;
/// The lossless priority the incast uses.
const INCAST_PRIORITY: usize = 3;
/// Time a rocegen may take beyond its traffic (the exchange, the drain, its 10 s give-up).
const ROCEGEN_SLACK: Duration = Duration::from_secs(15);

#[derive(Debug, Args)]
struct IncastArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it: 2 x 2 x 2).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Seconds of traffic (rocegen -D).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// RDMA WRITE size, bytes (rocegen -s).
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// Priority-flow control on priority 3 of every port: `off` is the negative control (the
    /// same incast drops).
    #[arg(long, value_enum, default_value_t = crate::lab::incast::OnOff::On)]
    pfc: crate::lab::incast::OnOff,
    /// DCQCN on every host (rocegen --dcqcn), with the lab's millisecond time constants.
    #[arg(long, value_enum, default_value_t = crate::lab::incast::Dcqcn::Nvidia)]
    dcqcn: crate::lab::incast::Dcqcn,
    /// Seconds to wait for the fabric to come up.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// One sender's outcome.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct IncastSender {
    /// The host.
    pub host: String,
    /// Its leaf.
    pub leaf: String,
    /// Goodput (rocegen's bw_average), MB/s.
    pub goodput_mb_per_sec: f64,
    /// Messages completed.
    pub messages: u64,
    /// Packets retransmitted (a lossless fabric needs none).
    pub retransmitted: u64,
    /// CNPs it received (DCQCN at work).
    pub cnps_received: u64,
    /// PFC frames on priority 3 its NIC received from its leaf.
    pub pfc_received: u64,
}

/// One switch port that sent PFC on the lossless priority during the run, or dropped.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct HopPfc {
    /// The switch.
    pub switch: String,
    /// Its port.
    pub port: String,
    /// What is at the other end.
    pub peer: String,
    /// PFC frames sent on priority 3 during the run.
    pub pfc_sent: u64,
    /// PFC frames received on priority 3 during the run.
    pub pfc_received: u64,
    /// Frames dropped during the run, by reason.
    pub drops: BTreeMap<String, u64>,
}

/// The incast scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct IncastReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// The receiver, its leaf and the leaf's port to it (the incast's bottleneck).
    pub receiver: String,
    /// See [`Self::receiver`].
    pub receiver_leaf: String,
    /// See [`Self::receiver`].
    pub receiver_port: String,
    /// PFC on priority 3 of every port.
    pub pfc: bool,
    /// rocegen's DCQCN mode.
    pub dcqcn: String,
    /// Every sender.
    pub senders: Vec<IncastSender>,
    /// Sum of the senders' goodputs, MB/s.
    pub total_goodput_mb_per_sec: f64,
    /// Jain's fairness index of the goodputs (1 = equal).
    pub jain: f64,
    /// Frames the switches dropped during the run (every one of them lossless traffic).
    pub drops: u64,
    /// Packets the senders retransmitted.
    pub retransmitted: u64,
    /// Every switch port that sent or received PFC on priority 3 or dropped, fabric order.
    pub hops: Vec<HopPfc>,
    /// rocegen errors; empty when every rocegen ran.
    pub errors: Vec<String>,
}

/// Sets `pfc_enable` of every port of every switch.
pub(super) fn set_pfc(plan: &Plan, priorities: &str) -> Result<(), LabError> {
    set_on_every_port(plan, "pfc_enable", priorities)
}

/// The rocegen command in a host's namespace.
fn rocegen_in(
    rocegen: &std::path::Path,
    namespace: &str,
    args: &[String],
) -> std::process::Command {
    let mut c = std::process::Command::new("ip");
    c.args(["netns", "exec", namespace])
        .arg(rocegen)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    c
}

/// Waits for a child at most until `deadline` (killed then); its stdout and stderr.
fn finish(mut child: std::process::Child, deadline: std::time::Instant) -> (String, String) {
    while std::time::Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    match child.wait_with_output() {
        Ok(out) => (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ),
        Err(e) => (String::new(), e.to_string()),
    }
}

/// What each sender of an incast runs (rocegen write_bw's options).
#[derive(Clone, Copy, Debug)]
pub(super) struct IncastTraffic {
    /// Seconds of traffic (-D).
    pub duration_s: f64,
    /// RDMA WRITE size, bytes (-s).
    pub size: u32,
    /// Queue pairs per sender (-q). Each QP has at most rocegen's window (1,024 packets, about
    /// 1.1 MB at the lab's MTU) outstanding, which bounds what one sender can leave queued in
    /// the fabric.
    pub qps: u32,
    /// DCQCN mode (--dcqcn).
    pub dcqcn: crate::lab::incast::Dcqcn,
}

/// Runs one incast (every host but the last one's → the last host) on a built fabric: the
/// fabric's counters before and after, every rocegen's report.
pub(super) fn run_incast(
    plan: &Plan,
    rocegen: &std::path::Path,
    traffic: IncastTraffic,
    pfc: bool,
) -> Result<IncastReport, LabError> {
    let IncastTraffic {
        duration_s,
        size,
        qps,
        dcqcn,
    } = traffic;
    use headroom_rocegen::report::Report as RocegenReport;
    let (last_leaf, receiver) = last_host(plan)?;
    let senders: Vec<_> = plan
        .hosts
        .iter()
        .filter(|h| h.name != receiver.name)
        .cloned()
        .collect();
    let mut common: Vec<String> = [
        "write_bw",
        "-d",
        "eth0",
        "--link-speed",
        &plan.spec.speed,
        "--tclass",
        &(INCAST_DSCP << 2).to_string(),
        "--dcqcn",
        dcqcn.as_str(),
        "--json",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    common.extend(crate::lab::incast::lab_timescale_args(dcqcn));
    let before = super::view::collect(plan);
    let started = std::time::Instant::now();
    let mut server_args = common.clone();
    server_args.extend(["--clients".to_owned(), senders.len().to_string()]);
    let server = rocegen_in(rocegen, &receiver.namespace, &server_args)
        .spawn()
        .map_err(|e| LabError::Failed(format!("starting rocegen: {e}")))?;
    // The clients retry their connection to the server for 10 s.
    let mut clients = Vec::new();
    for s in &senders {
        let mut a = common.clone();
        a.extend([
            receiver.address.to_string(),
            "-s".into(),
            size.to_string(),
            "-D".into(),
            duration_s.to_string(),
            "-q".into(),
            qps.to_string(),
        ]);
        clients.push(
            rocegen_in(rocegen, &s.namespace, &a)
                .spawn()
                .map_err(|e| LabError::Failed(format!("starting rocegen: {e}")))?,
        );
    }
    let deadline = started + Duration::from_secs_f64(duration_s) + ROCEGEN_SLACK;
    let outputs: Vec<(String, String)> = clients.into_iter().map(|c| finish(c, deadline)).collect();
    let _ = finish(server, std::time::Instant::now() + Duration::from_secs(2));
    let after = super::view::collect(plan);
    for view in [&before, &after] {
        if let Some((name, e)) = view.unreachable.iter().next() {
            return Err(LabError::Failed(format!("{name} does not answer: {e}")));
        }
    }
    let mut errors = Vec::new();
    let mut rows = Vec::new();
    for (s, (stdout, stderr)) in senders.iter().zip(&outputs) {
        let report = match RocegenReport::from_json(stdout) {
            Ok(r) => r,
            Err(e) => {
                let tail: String = stderr.lines().rev().take(5).collect::<Vec<_>>().join(" / ");
                errors.push(format!("rocegen on {}: no report ({e}): {tail}", s.name));
                continue;
            }
        };
        if let Some(e) = &report.error {
            errors.push(format!("rocegen on {}: {e}", s.name));
        }
        rows.push(IncastSender {
            host: s.name.clone(),
            leaf: s.leaf.clone(),
            goodput_mb_per_sec: report.bw.first().map_or(0.0, |b| b.bw_average_mb_per_sec),
            messages: report.counters.messages_completed,
            retransmitted: report.counters.retransmitted_packets,
            cnps_received: report.counters.cnps_received,
            pfc_received: report
                .priority(INCAST_PRIORITY as u8)
                .map_or(0, |p| p.pfc_frames_rx),
        });
    }
    let mut hops = Vec::new();
    for row in &after.ports {
        let old = before
            .ports
            .iter()
            .find(|r| r.switch == row.switch && r.port == row.port);
        let pfc_sent = row.pfc_tx[INCAST_PRIORITY]
            .saturating_sub(old.map_or(0, |o| o.pfc_tx[INCAST_PRIORITY]));
        let pfc_received = row.pfc_rx[INCAST_PRIORITY]
            .saturating_sub(old.map_or(0, |o| o.pfc_rx[INCAST_PRIORITY]));
        let drops: BTreeMap<String, u64> = row
            .drops
            .iter()
            .map(|(k, v)| {
                let was = old.and_then(|o| o.drops.get(k)).copied().unwrap_or(0);
                (k.clone(), v.saturating_sub(was))
            })
            .filter(|(_, v)| *v > 0)
            .collect();
        if pfc_sent > 0 || pfc_received > 0 || !drops.is_empty() {
            hops.push(HopPfc {
                switch: row.switch.clone(),
                port: row.port.clone(),
                peer: row.peer.clone(),
                pfc_sent,
                pfc_received,
                drops,
            });
        }
    }
    let goodputs: Vec<f64> = rows.iter().map(|r| r.goodput_mb_per_sec).collect();
    Ok(IncastReport {
        fabric: plan.spec.prefix.clone(),
        receiver: receiver.name.clone(),
        receiver_leaf: last_leaf,
        receiver_port: receiver.leaf_port.clone(),
        pfc,
        dcqcn: dcqcn.as_str().to_owned(),
        total_goodput_mb_per_sec: goodputs.iter().sum(),
        jain: crate::lab::incast::jain(&goodputs).unwrap_or(0.0),
        drops: hops.iter().flat_map(|h| h.drops.values()).sum(),
        retransmitted: rows.iter().map(|r| r.retransmitted).sum(),
        senders: rows,
        hops,
        errors,
    })
}

fn incast(args: &IncastArgs) -> Result<ExitCode, LabError> {
    use crate::lab::incast::OnOff;
    let rocegen = crate::lab::incast::find_rocegen(None)?;
    let plan = default_fabric(&args.prefix, args.timeout)?;
    let pfc = args.pfc == OnOff::On;
    if !pfc {
        set_pfc(&plan, "[4]")?;
    }
    let traffic = IncastTraffic {
        duration_s: args.duration,
        size: args.size,
        qps: 1,
        dcqcn: args.dcqcn,
    };
    let report = run_incast(&plan, &rocegen, traffic, pfc);
    if !pfc {
        // The fabric is left as the template has it.
        set_pfc(&plan, "[3, 4]")?;
    }
    let report = report?;
    print_report(&report, args.json, describe_incast)?;
    Ok(if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn describe_incast(r: &IncastReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "incast on fabric {:?}: {} senders -> {} ({} {}), rocegen write_bw, DSCP {INCAST_DSCP} \
         (priority {INCAST_PRIORITY}), DCQCN {}, PFC on priority {INCAST_PRIORITY} {}",
        r.fabric,
        r.senders.len(),
        r.receiver,
        r.receiver_leaf,
        r.receiver_port,
        r.dcqcn,
        if r.pfc { "on" } else { "OFF" }
    );
    let mut table = Table::new([
        "Sender",
        "Leaf",
        "Goodput MB/s",
        "Messages",
        "Retransmitted",
        "CNPs",
        "PFC rx",
    ])
    .left_all();
    for s in &r.senders {
        table.row([
            s.host.clone(),
            s.leaf.clone(),
            format!("{:.2}", s.goodput_mb_per_sec),
            thousands(s.messages),
            thousands(s.retransmitted),
            thousands(s.cnps_received),
            thousands(s.pfc_received),
        ]);
    }
    let _ = write!(t, "{table}");
    let _ = writeln!(
        t,
        "  goodput {:.2} MB/s in all, Jain fairness {:.3}, {} drops in the fabric, {} retransmitted",
        r.total_goodput_mb_per_sec, r.jain, r.drops, r.retransmitted
    );
    let _ = writeln!(t, "\nPFC on priority {INCAST_PRIORITY} per hop, and drops:");
    let mut hops = Table::new(["Switch", "Port", "Peer", "PFC tx", "PFC rx", "Drops"]).left_all();
    for h in &r.hops {
        hops.row([
            h.switch.clone(),
            h.port.clone(),
            h.peer.clone(),
            thousands(h.pfc_sent),
            thousands(h.pfc_received),
            h.drops
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", "),
        ]);
    }
    let _ = write!(t, "{hops}");
    if let Some(h) = r
        .hops
        .iter()
        .max_by_key(|h| h.pfc_sent)
        .filter(|h| h.pfc_sent > 0)
    {
        let _ = writeln!(
            t,
            "  PAUSED: {} {} sent the most PFC ({} frames to {})",
            h.switch, h.port, h.pfc_sent, h.peer
        );
    }
    if r.drops > 0 {
        let at: Vec<String> = r
            .hops
            .iter()
            .filter(|h| !h.drops.is_empty())
            .map(|h| format!("{} {}", h.switch, h.port))
            .collect();
        let _ = writeln!(t, "  DROPPED: {} frames at {}", r.drops, at.join(", "));
    } else {
        let _ = writeln!(t, "  LOSSLESS: no drops in the fabric");
    }
    for e in &r.errors {
        let _ = writeln!(t, "  error: {e}");
    }
    t
}
