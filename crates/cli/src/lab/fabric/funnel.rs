//! `headroom lab fabric scenario funnel`: congestion at the receiver's leaf funnelling back,
//! hop by hop, to the spines and to the senders' leaf, and each hop's ingress headroom use
//! against the headroom that hop computed.
//!
//! The incast of `scenario incast` (every host but the last → the last, rocegen write_bw) with
//! PFC as the only brake (DCQCN off by default): the receiver's port is the bottleneck, so the
//! receiver leaf's ingress PGs fill and reach XOFF (hop 1: it pauses the spines and its own
//! sending host); the spines' egress queues to that leaf stop, their ingress PGs from the
//! senders' leaf fill in turn (hop 2: the spines pause the senders' leaf); and that leaf pauses
//! the senders' NICs (hop 3), which rocegen honours (IEEE 802.1Qbb). Each XOFF takes effect
//! only when the upstream sender has reacted: what it sent meanwhile lands in the PG's headroom
//! (SONiC's `xoff` size; docs/config.md, the headroom formula), which must hold it or the frame
//! is dropped (`ingress_headroom_exhausted`). The report puts each hop's headroom watermark next
//! to the headroom that switch computed from its running configuration
//! ([`super::thresholds`]), the margin each hop had.
//!
//! `--software-latency-kib` changes the formula's software term on every switch for the run
//! (the fabric's template has 96 KiB, see switch_config.rs): 0 is SONiC's hardware formula, whose
//! headroom assumes a peer that reacts within its MAC's pause-quanta time; a software peer a
//! scheduler slice late then overruns it. `--pfc off` is the negative control: no pause forms,
//! the bottleneck drops instead.

use super::plan::{Peer, Plan, Role};
use super::scenario::{
    default_fabric, last_host, print_report, run_incast, set_on_every_switch, set_pfc,
    set_watchdogs, IncastReport, IncastTraffic,
};
use super::switch_socket;
use super::thresholds::{lossless_pg_thresholds, PgThresholds};
use crate::client::Target;
use crate::lab::incast::{Dcqcn, OnOff};
use crate::lab::LabError;
use crate::table::{thousands, Table};
use clap::Args;
use headroom_runtime::protocol::{Clear, PgWatermarkKind, Request, Show, WatermarkRow};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

/// The incast's DSCP (→ priority 3, lossless in the template).
const DSCP: usize = 3;
/// The lossless priority.
const PRIORITY: usize = 3;

/// `headroom lab fabric scenario funnel`.
#[derive(Debug, Args)]
pub(super) struct FunnelArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it: 2 x 2 x 2).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Seconds of incast traffic (rocegen -D).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// RDMA WRITE size, bytes (rocegen -s).
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// Queue pairs per sender (rocegen -q). rocegen keeps at most 1,024 packets (about 1.1 MB
    /// here) outstanding per QP, less than a spine's XOFF point: with one QP per sender the
    /// pause stops at the receiver's leaf because the senders cannot queue more.
    #[arg(long, default_value_t = 4)]
    qps: u32,
    /// DCQCN on every host: `off` by default, so that PFC is the only brake and the pause has
    /// to travel back to the senders.
    #[arg(long, value_enum, default_value_t = Dcqcn::Off)]
    dcqcn: Dcqcn,
    /// PFC on priority 3 of every port: `off` is the negative control (no pause, drops at the
    /// bottleneck).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    pfc: OnOff,
    /// `[headroom_calc] software_latency_kib` of every switch for the run (the template's
    /// otherwise); 0 is SONiC's hardware formula.
    #[arg(long)]
    software_latency_kib: Option<f64>,
    /// Seconds to wait for the fabric to come up.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// One switch port's lossless ingress PG during the run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FunnelHop {
    /// Hops from the bottleneck: 1 the receiver's leaf, 2 the spines, 3 the other leaves.
    pub hop: u8,
    /// The PG's thresholds (its switch, port, peer, and the computed sizes).
    #[serde(flatten)]
    pub thresholds: PgThresholds,
    /// PFC frames on priority 3 this port sent upstream during the run (its XOFF/XON).
    pub pfc_sent: u64,
    /// The PG's deepest shared-buffer use during the run (user watermark), bytes.
    pub shared_used_bytes: u64,
    /// The PG's deepest headroom use during the run (user watermark), bytes.
    pub headroom_used_bytes: u64,
    /// `headroom_used_bytes` over the computed headroom, percent.
    pub headroom_used_percent: f64,
    /// Frames this port dropped during the run, by reason.
    pub drops: BTreeMap<String, u64>,
}

/// Totals of one hop distance.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FunnelTier {
    /// Hops from the bottleneck.
    pub hop: u8,
    /// What sits there (`receiver's leaf`, `spines`, `senders' leaves`).
    pub what: String,
    /// PFC frames its ports sent upstream.
    pub pfc_sent: u64,
    /// Its ports that sent PFC.
    pub paused_from: Vec<String>,
    /// The largest headroom use of its ports, percent of the computed headroom.
    pub max_headroom_used_percent: f64,
}

/// The scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct FunnelReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// PFC on priority 3 of every port.
    pub pfc: bool,
    /// The formula's software term every switch had during the run, KiB (`None`: the
    /// template's).
    pub software_latency_kib: Option<f64>,
    /// The bottleneck: the receiver's leaf and port.
    pub bottleneck_leaf: String,
    /// See [`Self::bottleneck_leaf`].
    pub bottleneck_port: String,
    /// Every port that receives the incast's traffic, nearest the bottleneck first.
    pub hops: Vec<FunnelHop>,
    /// Hop 1, 2, 3.
    pub tiers: Vec<FunnelTier>,
    /// PFC frames the senders' NICs received (rocegen's counters).
    pub senders_pfc_received: u64,
    /// Ports whose headroom use exceeded what their switch computed (only possible with a
    /// shared headroom pool; the frames beyond are dropped otherwise).
    pub headroom_exceeded: Vec<String>,
    /// Frames dropped in the fabric during the run (all of them lossless traffic).
    pub lossless_drops: u64,
    /// The incast's own report.
    pub incast: IncastReport,
}

pub(super) fn funnel(args: &FunnelArgs) -> Result<ExitCode, LabError> {
    let rocegen = crate::lab::incast::find_rocegen(None)?;
    let plan = default_fabric(&args.prefix, args.timeout)?;
    let (leaf, receiver) = last_host(&plan)?;
    let pfc = args.pfc == OnOff::On;
    // The watchdog is off for the run: with PFC the only brake, the spines' ports to the
    // receiver's leaf stay paused longer than the template's 200 ms detection time, and the
    // watchdog would take that for a storm and drop the paused queue (`pfcwd_queue`, seen in
    // `scenario ecn-vs-pfc`) — true to SONiC, but the scenario is about the pause. Everything
    // the scenario changes is set back afterwards, whatever happened.
    set_watchdogs(&plan, false)?;
    let outcome = (|| {
        if let Some(kib) = args.software_latency_kib {
            set_on_every_switch(
                &plan,
                "headroom_calc.software_latency_kib",
                &kib.to_string(),
            )?;
        }
        // The thresholds the run has (after the software term changed, before PFC goes off:
        // with PFC off the PG is not lossless and has none).
        let mut thresholds = Vec::new();
        for switch in &plan.switches {
            thresholds.extend(lossless_pg_thresholds(&plan, &switch.name, DSCP)?);
        }
        if !pfc {
            set_pfc(&plan, "[4]")?;
        }
        clear_watermarks(&plan)?;
        let traffic = IncastTraffic {
            duration_s: args.duration,
            size: args.size,
            qps: args.qps,
            dcqcn: args.dcqcn,
        };
        let incast = run_incast(&plan, &rocegen, traffic, pfc)?;
        Ok::<_, LabError>(Measured {
            thresholds,
            incast,
            headroom: pg_watermarks(&plan, PgWatermarkKind::Headroom)?,
            shared: pg_watermarks(&plan, PgWatermarkKind::Shared)?,
        })
    })();
    let restored = restore(&plan, pfc, args.software_latency_kib.is_some());
    let measured = outcome?;
    restored?;
    let report = assemble(args, &plan, &leaf, &receiver.leaf_port, measured);
    print_report(&report, args.json, describe)?;
    Ok(if report.incast.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Sets back what the scenario changed: PFC, the software term, the watchdog.
fn restore(plan: &Plan, pfc: bool, software_latency: bool) -> Result<(), LabError> {
    let mut first_error = None;
    if !pfc {
        first_error = set_pfc(plan, "[3, 4]").err();
    }
    if software_latency {
        let value = super::switch_config::FABRIC_SOFTWARE_LATENCY_KIB.to_string();
        let r = set_on_every_switch(plan, "headroom_calc.software_latency_kib", &value);
        first_error = first_error.or(r.err());
    }
    let r = set_watchdogs(plan, true);
    first_error.or(r.err()).map_or(Ok(()), Err)
}

/// Clears every switch's user watermarks (the persistent ones stay).
fn clear_watermarks(plan: &Plan) -> Result<(), LabError> {
    for switch in &plan.switches {
        let target = Target::for_socket(switch_socket(&plan.spec.prefix, &switch.name));
        let answer = target
            .request(&Request::Clear {
                what: Clear::Watermarks { persistent: false },
            })
            .map_err(|e| LabError::Failed(format!("{}: {e}", switch.name)))?;
        if !answer.ok {
            return Err(LabError::Failed(format!(
                "{}: clearing watermarks refused: {}",
                switch.name, answer.data
            )));
        }
    }
    Ok(())
}

/// Every switch's PG watermarks of `kind` (user view), by (switch, port).
fn pg_watermarks(plan: &Plan, kind: PgWatermarkKind) -> Result<PgMarks, LabError> {
    let mut marks = BTreeMap::new();
    for switch in &plan.switches {
        let target = Target::for_socket(switch_socket(&plan.spec.prefix, &switch.name));
        let (rows, _) = target
            .fetch::<Vec<WatermarkRow>>(&Request::Show {
                what: Show::PgWatermark {
                    kind,
                    persistent: false,
                },
            })
            .map_err(|e| LabError::Failed(format!("{}: {e}", switch.name)))?;
        for row in rows {
            marks.insert((switch.name.clone(), row.port), row.bytes);
        }
    }
    Ok(marks)
}

/// Hops from the bottleneck of traffic entering `switch` from `peer` towards the receiver on
/// `bottleneck_leaf`; `None` for a port that traffic to the receiver does not enter by (the
/// receiver's own port, a spine's port from the receiver's leaf).
fn hop_of(plan: &Plan, bottleneck_leaf: &str, switch: &str, peer: &Peer) -> Option<u8> {
    let role = plan.switch(switch)?.role;
    match (role, peer) {
        (Role::Leaf, Peer::Host { name }) if switch == bottleneck_leaf => {
            // The receiver sends nothing but ACKs; its port is the bottleneck, not a hop.
            let receiver = plan.hosts_of(bottleneck_leaf).last()?;
            (name != &receiver.name).then_some(1)
        }
        (Role::Leaf, Peer::Switch { .. }) if switch == bottleneck_leaf => Some(1),
        (Role::Spine, Peer::Switch { name, .. }) => (name != bottleneck_leaf).then_some(2),
        (Role::Leaf, Peer::Host { .. }) => Some(3),
        // A sender leaf's uplinks carry traffic from the spines, not to the receiver; spines
        // have no hosts.
        (Role::Leaf, Peer::Switch { .. }) | (Role::Spine, Peer::Host { .. }) => None,
    }
}

/// PG watermarks of every switch, by (switch, port): bytes per PG.
type PgMarks = BTreeMap<(String, String), [u64; 8]>;

/// What a run measured.
struct Measured {
    /// Every switch's lossless PG thresholds during the run.
    thresholds: Vec<PgThresholds>,
    /// The incast.
    incast: IncastReport,
    /// Headroom watermarks over the run.
    headroom: PgMarks,
    /// Shared-buffer watermarks over the run.
    shared: PgMarks,
}

fn assemble(
    args: &FunnelArgs,
    plan: &Plan,
    leaf: &str,
    bottleneck_port: &str,
    measured: Measured,
) -> FunnelReport {
    let Measured {
        thresholds,
        incast,
        headroom,
        shared,
    } = measured;
    let mut hops = Vec::new();
    for t in thresholds {
        let Some(switch) = plan.switch(&t.switch) else {
            continue;
        };
        let Some(planned) = switch.ports.iter().find(|p| p.name == t.port) else {
            continue;
        };
        let Some(hop) = hop_of(plan, leaf, &t.switch, &planned.peer) else {
            continue;
        };
        let key = (t.switch.clone(), t.port.clone());
        let pg = usize::from(t.pg & 7);
        let used = |m: &PgMarks| m.get(&key).map_or(0, |b| b[pg]);
        let row = incast
            .hops
            .iter()
            .find(|h| h.switch == t.switch && h.port == t.port);
        let headroom_used_bytes = used(&headroom);
        hops.push(FunnelHop {
            hop,
            pfc_sent: row.map_or(0, |r| r.pfc_sent),
            shared_used_bytes: used(&shared),
            headroom_used_bytes,
            headroom_used_percent: percent(headroom_used_bytes, t.headroom_bytes),
            drops: row.map(|r| r.drops.clone()).unwrap_or_default(),
            thresholds: t,
        });
    }
    hops.sort_by(|a, b| {
        (a.hop, &a.thresholds.switch, &a.thresholds.port).cmp(&(
            b.hop,
            &b.thresholds.switch,
            &b.thresholds.port,
        ))
    });
    let tiers = [
        (1, "receiver's leaf"),
        (2, "spines"),
        (3, "senders' leaves"),
    ]
    .into_iter()
    .map(|(hop, what)| {
        let at: Vec<&FunnelHop> = hops.iter().filter(|h| h.hop == hop).collect();
        FunnelTier {
            hop,
            what: what.to_owned(),
            pfc_sent: at.iter().map(|h| h.pfc_sent).sum(),
            paused_from: at
                .iter()
                .filter(|h| h.pfc_sent > 0)
                .map(|h| format!("{} {}", h.thresholds.switch, h.thresholds.port))
                .collect(),
            max_headroom_used_percent: at
                .iter()
                .map(|h| h.headroom_used_percent)
                .fold(0.0, f64::max),
        }
    })
    .collect();
    let headroom_exceeded = hops
        .iter()
        .filter(|h| h.headroom_used_bytes > h.thresholds.headroom_bytes)
        .map(|h| format!("{} {}", h.thresholds.switch, h.thresholds.port))
        .collect();
    FunnelReport {
        fabric: args.prefix.clone(),
        pfc: args.pfc == OnOff::On,
        software_latency_kib: args.software_latency_kib,
        bottleneck_leaf: leaf.to_owned(),
        bottleneck_port: bottleneck_port.to_owned(),
        hops,
        tiers,
        senders_pfc_received: incast.senders.iter().map(|s| s.pfc_received).sum(),
        headroom_exceeded,
        lossless_drops: incast.drops,
        incast,
    }
}

fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn describe(r: &FunnelReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "funnel on fabric {:?}: the incast ({} senders -> {}, bottleneck {} {}, DCQCN {}, PFC \
         {}{}); each hop's lossless PG {PRIORITY}: headroom used against the headroom its switch \
         computed",
        r.fabric,
        r.incast.senders.len(),
        r.incast.receiver,
        r.bottleneck_leaf,
        r.bottleneck_port,
        r.incast.dcqcn,
        if r.pfc { "on" } else { "off" },
        r.software_latency_kib
            .map_or_else(String::new, |k| format!(", software_latency_kib {k}"))
    );
    let mut table = Table::new([
        "Hop",
        "Switch",
        "Port",
        "Peer",
        "PFC sent",
        "Shared used B",
        "XOFF point B",
        "Headroom used B",
        "Headroom B",
        "Used %",
        "Drops",
    ])
    .left_all();
    for h in &r.hops {
        let drops: Vec<String> = h.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
        table.row([
            h.hop.to_string(),
            h.thresholds.switch.clone(),
            h.thresholds.port.clone(),
            h.thresholds.peer.clone(),
            thousands(h.pfc_sent),
            thousands(h.shared_used_bytes),
            thousands(h.thresholds.xoff_point_bytes),
            thousands(h.headroom_used_bytes),
            thousands(h.thresholds.headroom_bytes),
            format!("{:.0}", h.headroom_used_percent),
            if drops.is_empty() {
                "0".into()
            } else {
                drops.join(", ")
            },
        ]);
    }
    let _ = write!(t, "{table}");
    let reached: Vec<&FunnelTier> = r.tiers.iter().filter(|tier| tier.pfc_sent > 0).collect();
    if reached.is_empty() {
        let _ = writeln!(t, "  NO PAUSE: no switch sent PFC on priority {PRIORITY}");
    } else {
        let chain: Vec<String> = reached
            .iter()
            .map(|tier| {
                format!(
                    "hop {} {} ({} PFC from {})",
                    tier.hop,
                    tier.what,
                    thousands(tier.pfc_sent),
                    tier.paused_from.join(", ")
                )
            })
            .collect();
        let _ = writeln!(t, "  FUNNEL: {}", chain.join(" -> "));
        let _ = writeln!(
            t,
            "  the senders' NICs received {} PFC frames",
            thousands(r.senders_pfc_received)
        );
    }
    for tier in &r.tiers {
        let _ = writeln!(
            t,
            "  hop {} ({}): deepest headroom use {:.0} % of computed",
            tier.hop, tier.what, tier.max_headroom_used_percent
        );
    }
    if r.lossless_drops > 0 {
        // Every port that dropped, the bottleneck's too (it is not a hop of the table).
        let at: Vec<String> = r
            .incast
            .hops
            .iter()
            .filter(|h| !h.drops.is_empty())
            .map(|h| {
                let reasons: Vec<String> =
                    h.drops.iter().map(|(k, v)| format!("{k} {v}")).collect();
                format!("{} {}: {}", h.switch, h.port, reasons.join(", "))
            })
            .collect();
        let _ = writeln!(
            t,
            "  DROPPED: {} lossless frames ({})",
            thousands(r.lossless_drops),
            at.join("; ")
        );
    } else {
        let _ = writeln!(t, "  LOSSLESS: 0 frames dropped in the fabric");
    }
    if !r.headroom_exceeded.is_empty() {
        let _ = writeln!(
            t,
            "  headroom use above the computed headroom at {}",
            r.headroom_exceeded.join(", ")
        );
    }
    for e in &r.incast.errors {
        let _ = writeln!(t, "  error: {e}");
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hops_count_back_from_the_bottleneck_and_skip_ports_the_incast_does_not_enter() {
        let plan = super::super::plan::FabricSpec::new("t", 2, 2, 2).plan();
        let (last, _) = last_host(&plan).expect("a host on the last leaf");
        let mut seen = BTreeMap::new();
        for switch in &plan.switches {
            for port in &switch.ports {
                if let Some(hop) = hop_of(&plan, &last, &switch.name, &port.peer) {
                    seen.insert((switch.name.clone(), port.peer.to_string()), hop);
                }
            }
        }
        let at = |s: &str, peer_starts: &str| -> Vec<u8> {
            seen.iter()
                .filter(|((sw, p), _)| sw == s && p.starts_with(peer_starts))
                .map(|(_, h)| *h)
                .collect()
        };
        // leaf2 (the receiver's): both spines and host3 feed the bottleneck, host4 is it.
        assert_eq!(at("leaf2", "spine"), vec![1, 1]);
        assert_eq!(at("leaf2", "host3"), vec![1]);
        assert_eq!(at("leaf2", "host4"), Vec::<u8>::new());
        // The spines: from leaf1 (hop 2), not from leaf2.
        assert_eq!(at("spine1", "leaf1"), vec![2]);
        assert_eq!(at("spine1", "leaf2"), Vec::<u8>::new());
        assert_eq!(at("spine2", "leaf1"), vec![2]);
        // leaf1: its hosts (hop 3), not its uplinks.
        assert_eq!(at("leaf1", "host"), vec![3, 3]);
        assert_eq!(at("leaf1", "spine"), Vec::<u8>::new());
        assert_eq!(seen.len(), 7);
    }

    #[test]
    fn percent_of_nothing_is_zero() {
        assert_eq!(percent(10, 0), 0.0);
        assert!((percent(1, 4) - 25.0).abs() < 1e-12);
    }
}
