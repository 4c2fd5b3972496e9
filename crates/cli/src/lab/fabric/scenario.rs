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
//! (rocegen addresses the peer's MAC and does not cross routers yet). The load of each link is
//! the spine port's routed-out packet count (`rif_out_packets`, `show host-interfaces`) over the
//! run.

use super::plan::{Peer, Plan};
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
const ROCE_PORT: u16 = 4791;
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
    if args.json {
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| LabError::Failed(e.to_string()))?;
        emit(format_args!("{text}\n"));
    } else {
        emit(format_args!("{}", describe(&report)));
    }
    Ok(ExitCode::SUCCESS)
}

/// The first leaf (the flows' source) and the last (their destination).
fn ends(plan: &Plan) -> (String, String) {
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
                    let packets = after.get(&key).copied().unwrap_or_default()
                        - before.get(&key).copied().unwrap_or_default();
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
