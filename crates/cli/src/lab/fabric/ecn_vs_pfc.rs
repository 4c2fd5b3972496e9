//! `headroom lab fabric scenario ecn-vs-pfc`: the same incast (`scenario incast`: every host but
//! the last → the last, rocegen write_bw with DCQCN) twice, with the ECN marking of the lossless
//! queues placed below the ingress XOFF point of the receiver's leaf, then above it, and a victim
//! flow ([`super::victim`]: the first host of the first leaf → the first host of the last leaf)
//! measured in both.
//!
//! ECN first, PFC as the backstop (reference dcqcn-roce.md; Zhu et al., SIGCOMM 2015, §3: "the
//! ECN threshold must be low enough that it is triggered before the PFC threshold"): with
//! marking below XOFF, the bottleneck queue marks CE before any ingress PG feeding it reaches
//! its XOFF point, the receivers send CNPs, the senders slow down and PFC rarely fires. With
//! marking above, the ingress PGs reach XOFF first: the receiver's leaf pauses the spines, the
//! spines pause the first leaf, and every priority-3 frame behind those links waits, the
//! victim's too, though it does not go to the congested port.
//!
//! Where XOFF is: the receiver leaf's running configuration (`show config`) is parsed and its
//! derived values computed by the configuration crate, exactly as the switch and `headroom
//! check` do (`headroom_config::derived`): the XOFF point of PG 3 (reserved + the shared limit
//! when this PG alone is congested). The egress queue to the receiver is fed by k ingress PGs
//! (the leaf's other ports), so ECN "below" puts `green_max_threshold` at the XOFF point (the
//! queue holds at least what any one PG holds: marking reaches its probability before any PG
//! can pause), and ECN "above" puts `green_min_threshold` at k × the XOFF point (a queue that
//! deep means, by pigeonhole, some PG feeding it is at XOFF already: PFC has fired before the
//! first mark).

use super::plan::{Host, Plan};
use super::scenario::{default_fabric, last_host, run_incast, IncastReport, IncastTraffic};
use super::switch_config::WRED_PROFILE;
use super::switch_socket;
use super::thresholds::{lossless_pg_thresholds, PgThresholds};
use super::victim::{describe_window, victim_hosts, Victim, VictimWindow};
use crate::client::Target;
use crate::lab::config::EcnThresholds;
use crate::lab::incast::{Dcqcn, OnOff};
use crate::lab::LabError;
use crate::table::{thousands, Table};
use clap::Args;
use headroom_runtime::protocol::{Change, Request};
use serde::Serialize;
use std::fmt::Write as _;
use std::process::ExitCode;
use std::time::Duration;

/// The priority the incast and the victim use (lossless in the template).
const PRIORITY: usize = 3;
/// Their DSCP (→ priority 3 through the template's DSCP trust).
const DSCP: usize = 3;
/// Time the rocegens take to connect before their traffic starts; the victim is measured from
/// then on, for the incast's duration.
const ROCEGEN_CONNECT: Duration = Duration::from_millis(1000);

/// `headroom lab fabric scenario ecn-vs-pfc`.
#[derive(Debug, Args)]
pub(super) struct EcnVsPfcArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it: 2 x 2 x 2).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Seconds of incast traffic, each run (rocegen -D).
    #[arg(long, default_value_t = 3.0)]
    duration: f64,
    /// RDMA WRITE size, bytes (rocegen -s).
    #[arg(long, default_value_t = 65536)]
    size: u32,
    /// DCQCN on every host (rocegen --dcqcn), with the lab's millisecond time constants.
    #[arg(long, value_enum, default_value_t = Dcqcn::Nvidia)]
    dcqcn: Dcqcn,
    /// ECN marking of the lossless queues: `off` is the negative control (no marking in
    /// either run: PFC is the only signal both times, and the two runs should look alike).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    ecn: OnOff,
    /// Microseconds between the victim's datagrams.
    #[arg(long, default_value_t = 1000)]
    victim_interval_us: u64,
    /// Seconds to wait for the fabric to come up.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// One run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct EcnVsPfcRun {
    /// `below` or `above` the XOFF point (`off`: no marking, the control).
    pub placement: String,
    /// The marking thresholds of the lossless queues (`None`: no marking).
    pub ecn_min_bytes: Option<u64>,
    /// See [`Self::ecn_min_bytes`].
    pub ecn_max_bytes: Option<u64>,
    /// PFC frames on priority 3 every switch port sent during the run.
    pub pfc_frames: u64,
    /// CNPs the senders received.
    pub cnps: u64,
    /// CE marks every switch made during the run.
    pub ecn_marks: u64,
    /// Frames the switches dropped during the run (every one of them lossless traffic).
    pub lossless_drops: u64,
    /// The victim over the incast's traffic.
    pub victim: VictimWindow,
    /// Victim datagrams never received, the whole run.
    pub victim_lost: u64,
    /// The incast's own report (senders, per-hop PFC and drops).
    pub incast: IncastReport,
}

/// The scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct EcnVsPfcReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// The receiver's leaf and its port to the receiver (the bottleneck).
    pub bottleneck_leaf: String,
    /// See [`Self::bottleneck_leaf`].
    pub bottleneck_port: String,
    /// PG 3 of each port of the receiver's leaf that feeds the bottleneck.
    pub feeding: Vec<PgThresholds>,
    /// The victim flow.
    pub victim: String,
    /// Marking probability at `max`, percent.
    pub ecn_probability_percent: u8,
    /// Below, then above.
    pub runs: Vec<EcnVsPfcRun>,
    /// PFC frames of the above run over those of the below run (`None`: the below run sent
    /// none).
    pub pfc_ratio: Option<f64>,
}

/// Marks CE on the lossless queues of every switch between `ecn` thresholds, or not at all.
/// One `set` per switch: the whole WRED profile at once (min and max change together, never
/// min above max in between) and the queues' binding to it.
fn set_ecn(plan: &Plan, ecn: Option<EcnThresholds>) -> Result<(), LabError> {
    for switch in &plan.switches {
        let target = Target::for_socket(switch_socket(&plan.spec.prefix, &switch.name));
        let mut changes = vec![Change::Key {
            key: "port_defaults.queue.\"3-4\".wred_profile".into(),
            value: format!("\"{}\"", if ecn.is_some() { WRED_PROFILE } else { "" }),
        }];
        if let Some(e) = ecn {
            // The template's profile (switch_config.rs), thresholds replaced.
            changes.insert(
                0,
                Change::Key {
                    key: format!("wred_profile.{WRED_PROFILE}"),
                    value: format!(
                        "{{ ecn = \"ecn_all\", wred_green_enable = false, green_min_threshold = \
                         {}, green_max_threshold = {}, green_drop_probability = {} }}",
                        e.min_bytes, e.max_bytes, e.probability_percent
                    ),
                },
            );
        }
        for change in changes {
            let what = format!("{change:?}");
            let answer = target
                .request(&Request::Set { change })
                .map_err(|e| LabError::Failed(format!("{}: {e}", switch.name)))?;
            if !answer.ok {
                return Err(LabError::Failed(format!(
                    "{}: {what} refused: {}",
                    switch.name, answer.data
                )));
            }
        }
    }
    Ok(())
}

/// The incast once per ECN placement, with the victim flow beside it.
fn compare(
    args: &EcnVsPfcArgs,
    plan: &Plan,
    rocegen: &std::path::Path,
    (victim_from, victim_to): (&Host, &Host),
    placements: [(&str, EcnThresholds); 2],
) -> Result<Vec<EcnVsPfcRun>, LabError> {
    let ecn_on = args.ecn == OnOff::On;
    let mut runs = Vec::new();
    for (placement, thresholds) in placements {
        let ecn = ecn_on.then_some(thresholds);
        set_ecn(plan, ecn)?;
        let marks_before = fabric_ecn_marks(plan);
        let victim = Victim::start(
            victim_from,
            victim_to,
            Duration::from_micros(args.victim_interval_us.max(100)),
            0,
            std::time::Instant::now(),
        )?;
        let traffic = IncastTraffic {
            duration_s: args.duration,
            size: args.size,
            qps: 1,
            dcqcn: args.dcqcn,
        };
        let incast = run_incast(plan, rocegen, traffic, true);
        let start_ms = u64::try_from(ROCEGEN_CONNECT.as_millis()).unwrap_or(0);
        let end_ms = (start_ms + (args.duration * 1000.0) as u64).min(victim.now_ms());
        let record = victim.finish();
        let incast = incast?;
        let marks_after = fabric_ecn_marks(plan);
        runs.push(EcnVsPfcRun {
            placement: if ecn_on { placement } else { "off" }.to_owned(),
            ecn_min_bytes: ecn.map(|e| e.min_bytes),
            ecn_max_bytes: ecn.map(|e| e.max_bytes),
            pfc_frames: incast.hops.iter().map(|h| h.pfc_sent).sum(),
            cnps: incast.senders.iter().map(|s| s.cnps_received).sum(),
            ecn_marks: marks_after.saturating_sub(marks_before),
            lossless_drops: incast.drops,
            victim: record.window(start_ms, end_ms),
            victim_lost: record.lost,
            incast,
        });
    }
    Ok(runs)
}

/// CE marks of every switch port, summed.
fn fabric_ecn_marks(plan: &Plan) -> u64 {
    super::view::collect(plan)
        .ports
        .iter()
        .map(|r| r.ecn_marked)
        .sum()
}

pub(super) fn ecn_vs_pfc(args: &EcnVsPfcArgs) -> Result<ExitCode, LabError> {
    let rocegen = crate::lab::incast::find_rocegen(None)?;
    let plan = default_fabric(&args.prefix, args.timeout)?;
    let (leaf, receiver) = last_host(&plan)?;
    let (victim_from, victim_to) = victim_hosts(&plan)?;
    // The template is what the fabric runs now; a run that failed before may have left other
    // thresholds, so it is set first.
    let template = EcnThresholds::LAB;
    set_ecn(&plan, Some(template))?;
    let feeding: Vec<PgThresholds> = lossless_pg_thresholds(&plan, &leaf, DSCP)?
        .into_iter()
        .filter(|t| t.port != receiver.leaf_port)
        .collect();
    let xoff = feeding
        .iter()
        .map(|f| f.xoff_point_bytes)
        .min()
        .ok_or_else(|| LabError::Failed(format!("{leaf} has no port feeding its receiver")))?;
    let k = feeding.len() as u64;
    let below = EcnThresholds {
        min_bytes: xoff / 4,
        max_bytes: xoff,
        probability_percent: template.probability_percent,
    };
    let above = EcnThresholds {
        min_bytes: xoff * k,
        max_bytes: xoff * (k + 1),
        probability_percent: template.probability_percent,
    };
    // The watchdog is off for both runs: with ECN above XOFF (and with ECN off) PFC is the only
    // brake, the spines' ports to the receiver's leaf stay paused for longer than the
    // template's 200 ms detection time, and the watchdog takes that for a storm and drops the
    // paused queue (`pfcwd_queue`; seen in 2 of 4 runs here) — true to SONiC, but it would
    // measure the watchdog, not where ECN sits. It is back on after the runs.
    super::scenario::set_watchdogs(&plan, false)?;
    let runs = compare(
        args,
        &plan,
        &rocegen,
        (&victim_from, &victim_to),
        [("below", below), ("above", above)],
    );
    super::scenario::set_watchdogs(&plan, true)?;
    let runs = runs?;
    // The fabric is left as the template has it.
    set_ecn(&plan, Some(template))?;
    let pfc_ratio = match runs.as_slice() {
        [b, a] if b.pfc_frames > 0 => Some(a.pfc_frames as f64 / b.pfc_frames as f64),
        _ => None,
    };
    let report = EcnVsPfcReport {
        fabric: args.prefix.clone(),
        bottleneck_leaf: leaf,
        bottleneck_port: receiver.leaf_port.clone(),
        feeding,
        victim: format!("{} -> {}", victim_from.name, victim_to.name),
        ecn_probability_percent: template.probability_percent,
        runs,
        pfc_ratio,
    };
    super::scenario::print_report(&report, args.json, describe)?;
    let failed = report.runs.iter().any(|r| !r.incast.errors.is_empty());
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn describe(r: &EcnVsPfcReport) -> String {
    let mut t = String::new();
    let first = r.runs.first().map(|run| &run.incast);
    let _ = writeln!(
        t,
        "ecn-vs-pfc on fabric {:?}: the incast ({} senders -> {}, bottleneck {} {}, DCQCN {}) \
         twice, ECN below then above the ingress XOFF point; victim flow {} (UDP, priority \
         {PRIORITY})",
        r.fabric,
        first.map_or(0, |i| i.senders.len()),
        first.map_or("", |i| i.receiver.as_str()),
        r.bottleneck_leaf,
        r.bottleneck_port,
        first.map_or("", |i| i.dcqcn.as_str()),
        r.victim
    );
    let _ = writeln!(
        t,
        "\nPG {PRIORITY} of the ports feeding {} {} (from its running configuration):",
        r.bottleneck_leaf, r.bottleneck_port
    );
    let mut pgs = Table::new([
        "Port",
        "Peer",
        "Reserved B",
        "Shared limit B",
        "XOFF point B",
        "Headroom B",
        "Drop point B",
    ])
    .left_all();
    for f in &r.feeding {
        pgs.row([
            f.port.clone(),
            f.peer.clone(),
            thousands(f.reserved_bytes),
            thousands(f.shared_limit_bytes),
            thousands(f.xoff_point_bytes),
            thousands(f.headroom_bytes),
            thousands(f.drop_point_bytes),
        ]);
    }
    let _ = write!(t, "{pgs}");
    let mut table = Table::new([
        "ECN",
        "min..max B",
        "PFC frames",
        "CNPs",
        "ECN marks",
        "Lossless drops",
        "Victim Mb/s",
        "Victim p99 ms",
        "Victim max ms",
    ])
    .left_all();
    let ms = |v: Option<u64>| {
        v.map_or_else(|| "-".to_owned(), |us| format!("{:.1}", us as f64 / 1000.0))
    };
    for run in &r.runs {
        table.row([
            run.placement.clone(),
            match (run.ecn_min_bytes, run.ecn_max_bytes) {
                (Some(a), Some(b)) => format!("{}..{}", thousands(a), thousands(b)),
                _ => "no marking".into(),
            },
            thousands(run.pfc_frames),
            thousands(run.cnps),
            thousands(run.ecn_marks),
            thousands(run.lossless_drops),
            format!("{:.2}", run.victim.goodput_mbps),
            ms(run.victim.delay_p99_us),
            ms(run.victim.delay_max_us),
        ]);
    }
    let _ = write!(t, "\n{table}");
    for run in &r.runs {
        let _ = writeln!(
            t,
            "  {}: victim {}; {} lost",
            run.placement,
            describe_window(&run.victim),
            run.victim_lost
        );
        let mut hops: Vec<String> = run
            .incast
            .hops
            .iter()
            .filter(|h| h.pfc_sent > 0)
            .map(|h| format!("{} {} -> {} {}", h.switch, h.port, h.peer, h.pfc_sent))
            .collect();
        if hops.is_empty() {
            hops.push("none".into());
        }
        let _ = writeln!(t, "    PFC sent per hop: {}", hops.join(", "));
    }
    match r.pfc_ratio {
        Some(ratio) => {
            let _ = writeln!(
                t,
                "  PFC with ECN above XOFF / below: {ratio:.1} x{}",
                if ratio >= 2.0 {
                    ": above XOFF, PFC fires before DCQCN can react"
                } else {
                    ""
                }
            );
        }
        None => {
            let _ = writeln!(
                t,
                "  PFC with ECN below XOFF: none (ECN did the work); above: {}",
                r.runs.get(1).map_or(0, |a| a.pfc_frames)
            );
        }
    }
    for run in &r.runs {
        for e in &run.incast.errors {
            let _ = writeln!(t, "  error ({}): {e}", run.placement);
        }
    }
    t
}
