//! `headroom lab fabric scenario deadlock`: a cyclic buffer dependency (CBD) after two link
//! failures, the deadlock it causes under PFC, and the watchdog breaking it.
//!
//! The topology is the reference's minimal link-failure CBD (routing-fabric-dcbx.md §6.2): 2
//! spines, 4 leaves with one host each, links leaf4–spine1 and leaf3–spine2 failed (set down on
//! both ends). Four greedy lossless flows (kernel UDP, DSCP 3 → priority 3, about 90 Mb/s each,
//! hosts that do not honour PFC):
//!
//! ```text
//!  A: host3→leaf3→spine1→leaf2→spine2→leaf4→host4   bounce at leaf2
//!  B: host2→leaf2→spine2→leaf1→host1
//!  C: host4→leaf4→spine2→leaf1→spine1→leaf3→host3   bounce at leaf1
//!  D: host1→leaf1→spine1→leaf2→host2
//! ```
//!
//! Each of the cycle's egress queues spine1→leaf2, leaf2→spine2, spine2→leaf1, leaf1→spine1
//! carries two of the flows (2:1 oversubscribed), so every ingress PG on the cycle passes XOFF
//! and every cycle queue is paused by the next switch, whose buffer is held by the next queue.
//! BGP would never route A and C through a valley (all spines share one ASN, §5.3); the bounce
//! paths are pinned by static /32 routes in the switch namespaces (`ip route`, mirrored into
//! headroom's FIB by linux-cp), standing in for stale routes during convergence.
//!
//! Two runs. Watchdog off: after the senders stop, every cycle queue stays non-empty and paused
//! with no TX for the hold window (a deadlock, not congestion: congestion drains when the load
//! stops). Watchdog on (the template: drop, 200 ms detection): it declares a storm on a cycle
//! queue, drops what is stuck, and every cycle queue drains. Turning the watchdog on is a
//! drained restart of each dataplane (`headroom set`), which also discards what run 1 left stuck:
//! the on run starts from empty queues. At the end the links come back and the static routes go.

use super::plan::{link_peer_address, Peer, Plan};
use super::scenario::{set_watchdogs, ROCE_PORT};
use super::{read_plan, switch_socket, UpArgs};
use crate::client::Target;
use crate::lab::{in_namespace, ip, LabError};
use crate::table::{thousands, Table};
use clap::Args;
use headroom_runtime::protocol::{Request, Show, Snapshot};
use serde::Serialize;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The lossless priority (and queue) of the flows.
const PRIORITY: usize = 3;
/// DSCP 3 → priority 3 under the template's DSCP trust.
const DSCP: u8 = 3;
/// UDP payload of the flows' datagrams: 1442-byte frames, under the 1500 MTU.
const PAYLOAD_BYTES: usize = 1400;
/// Datagrams per millisecond per sender: 8 × 1442 B ≈ 92 Mb/s, near the 100M links, so two
/// flows oversubscribe each cycle link about 1.8:1.
const DATAGRAMS_PER_MS: usize = 8;
/// Interval of the samples the scenario takes of the cycle's queues.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// A queue counts as paused over a sample interval when received PFC held it at least this
/// share of the interval.
const PAUSED_SHARE: f64 = 0.9;

/// `headroom lab fabric scenario deadlock`.
#[derive(Debug, Args)]
pub(super) struct DeadlockArgs {
    /// Prefix of the fabric (built or repaired as the scenario needs it: 2 x 4 x 1).
    #[arg(long, default_value = "fab")]
    prefix: String,
    /// Milliseconds the four senders run.
    #[arg(long, default_value_t = 2000)]
    traffic_ms: u64,
    /// Milliseconds after the senders stopped over which the cycle is watched (no TX, still
    /// paused and non-empty means deadlock).
    #[arg(long, default_value_t = 3000)]
    hold_ms: u64,
    /// Leave out the static bounce routes: the flows take BGP's up-down paths around the failed
    /// links, there is no cycle (the negative control).
    #[arg(long)]
    no_bounce_routes: bool,
    /// Seconds to wait for the fabric to come up.
    #[arg(long, default_value_t = 90)]
    timeout: u64,
    /// One JSON object instead of the tables.
    #[arg(long)]
    json: bool,
}

/// The switches and hosts of the scenario, by role.
struct Cast {
    spines: [String; 2],
    leaves: [String; 4],
    /// The host of each leaf: (name, namespace, address).
    hosts: [(String, String, Ipv4Addr); 4],
}

impl Cast {
    fn of(plan: &Plan) -> Result<Self, LabError> {
        let spines: Vec<String> = plan.spines().map(|s| s.name.clone()).collect();
        let leaves: Vec<String> = plan.leaves().map(|s| s.name.clone()).collect();
        let mut hosts = Vec::new();
        for leaf in &leaves {
            let h = plan
                .hosts_of(leaf)
                .next()
                .ok_or_else(|| LabError::Failed(format!("{leaf} has no host")))?;
            hosts.push((h.name.clone(), h.namespace.clone(), h.address));
        }
        let wrong = || LabError::Failed("the deadlock needs 2 spines and 4 leaves".into());
        Ok(Self {
            spines: spines.try_into().map_err(|_| wrong())?,
            leaves: leaves.try_into().map_err(|_| wrong())?,
            hosts: hosts.try_into().map_err(|_| wrong())?,
        })
    }
}

/// `switch`'s port to `peer`: its name, its device and the peer's address on the link.
fn port_to(plan: &Plan, switch: &str, peer: &str) -> Result<(String, String, Ipv4Addr), LabError> {
    let s = plan
        .switch(switch)
        .ok_or_else(|| LabError::Failed(format!("no switch {switch}")))?;
    s.ports
        .iter()
        .find_map(|p| match (&p.peer, p.address) {
            (Peer::Switch { name, .. }, Some(a)) if name == peer => Some((
                p.name.clone(),
                p.device.clone(),
                link_peer_address(a.address),
            )),
            _ => None,
        })
        .ok_or_else(|| LabError::Failed(format!("{switch} has no link to {peer}")))
}

/// One egress queue of the cycle.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CycleQueue {
    /// The switch.
    pub switch: String,
    /// Its port (queue 3 of it).
    pub port: String,
    /// The switch at the other end.
    pub peer: String,
}

/// One cycle queue's state when the senders stopped and at the end of the hold window.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct CycleQueueState {
    /// The queue.
    #[serde(flatten)]
    pub queue: CycleQueue,
    /// Depth when the senders stopped, bytes.
    pub depth_at_stop_bytes: u64,
    /// Depth at the end of the hold window, bytes.
    pub depth_at_end_bytes: u64,
    /// Frames it sent over the hold window.
    pub tx_frames_in_hold: u64,
    /// Share of the hold window received PFC held the priority (1 = all of it).
    pub paused_share_in_hold: f64,
    /// PFC frames on the priority it received over the hold window (XOFF refreshes).
    pub pfc_received_in_hold: u64,
}

/// A storm the watchdog declared during a run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Detection {
    /// The switch.
    pub switch: String,
    /// `port:queue`.
    pub queue: String,
    /// Whether the queue is one of the cycle's.
    pub on_cycle: bool,
    /// Milliseconds from the senders' start to the first sample that showed it.
    pub seen_after_ms: u64,
}

/// One run.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DeadlockRun {
    /// The watchdog on every port (the template) or off.
    pub watchdog: bool,
    /// Datagrams each sender sent (A, B, C, D).
    pub datagrams_sent: [u64; 4],
    /// Milliseconds from the senders' start to the first sample in which every cycle queue was
    /// paused and non-empty; `None`: never.
    pub cycle_paused_after_ms: Option<u64>,
    /// Every cycle queue.
    pub queues: Vec<CycleQueueState>,
    /// After the senders stopped every cycle queue stayed non-empty and paused with no TX over
    /// the hold window.
    pub deadlocked: bool,
    /// Every cycle queue empty at the end of the hold window.
    pub drained: bool,
    /// Storms the watchdog declared during the run, in the order seen.
    pub detections: Vec<Detection>,
}

/// The scenario's report.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct DeadlockReport {
    /// The fabric's prefix.
    pub fabric: String,
    /// The failed links, `leaf4-spine1`.
    pub failed_links: Vec<String>,
    /// The static routes pinning the bounce paths (`switch: host/32 via switch`); empty with
    /// `--no-bounce-routes`.
    pub static_routes: Vec<String>,
    /// The four flows, `A host3->host4`.
    pub flows: Vec<String>,
    /// The cycle, in order.
    pub cycle: Vec<CycleQueue>,
    /// Milliseconds of traffic and of the hold window.
    pub traffic_ms: u64,
    /// See [`Self::traffic_ms`].
    pub hold_ms: u64,
    /// Watchdog off, then on.
    pub runs: Vec<DeadlockRun>,
    /// Links set up again and static routes removed at the end.
    pub restored: bool,
}

/// A sample of one cycle queue: depth, frames sent, paused µs, PFC frames received.
#[derive(Clone, Copy, Debug, Default)]
struct Sample {
    depth_bytes: u64,
    tx_frames: u64,
    paused_us: u64,
    pfc_rx: u64,
}

/// Snapshots of every switch (`None` for one that did not answer).
fn snapshots(plan: &Plan) -> Vec<(String, Result<Snapshot, String>)> {
    plan.switches
        .iter()
        .map(|s| {
            let target = Target::for_socket(switch_socket(&plan.spec.prefix, &s.name));
            let answer = target
                .fetch::<Snapshot>(&Request::Show {
                    what: Show::Snapshot,
                })
                .map(|(snap, _)| snap);
            (s.name.clone(), answer)
        })
        .collect()
}

fn sample_of(
    snaps: &[(String, Result<Snapshot, String>)],
    q: &CycleQueue,
) -> Result<Sample, LabError> {
    let snap = snaps
        .iter()
        .find(|(n, _)| *n == q.switch)
        .and_then(|(_, s)| s.as_ref().ok())
        .ok_or_else(|| LabError::Failed(format!("{} does not answer", q.switch)))?;
    let queue = snap
        .queues
        .iter()
        .find(|r| r.port == q.port && usize::from(r.queue) == PRIORITY);
    let pfc = snap.pfc.iter().find(|r| r.port == q.port);
    Ok(Sample {
        depth_bytes: queue.map_or(0, |r| r.depth_bytes),
        tx_frames: queue.map_or(0, |r| r.packets),
        paused_us: pfc.map_or(0, |r| r.rx_paused_us[PRIORITY]),
        pfc_rx: pfc.map_or(0, |r| r.rx[PRIORITY]),
    })
}

/// Storms detected so far per (switch, `port:queue`).
fn storms(snaps: &[(String, Result<Snapshot, String>)]) -> Vec<(String, String, u64)> {
    snaps
        .iter()
        .filter_map(|(n, s)| s.as_ref().ok().map(|s| (n, s)))
        .flat_map(|(n, s)| {
            s.pfcwd
                .iter()
                .map(move |w| (n.clone(), w.queue.clone(), w.storm_detected))
        })
        .collect()
}

fn paused(before: Sample, after: Sample, interval: Duration) -> f64 {
    let us = interval.as_micros().max(1) as f64;
    after.paused_us.saturating_sub(before.paused_us) as f64 / us
}

pub(super) fn deadlock(args: &DeadlockArgs) -> Result<ExitCode, LabError> {
    let up = UpArgs {
        spines: 2,
        leaves: 4,
        hosts_per_leaf: 1,
        timeout: args.timeout,
        quiet: true,
        ..UpArgs::defaults(&args.prefix)
    };
    super::up(&up)?;
    let plan = read_plan(&args.prefix).map_err(LabError::Failed)?;
    let cast = Cast::of(&plan)?;
    let [s1, s2] = &cast.spines;
    let [l1, l2, l3, l4] = &cast.leaves;
    let [h1, h2, h3, h4] = &cast.hosts;
    let failed = [(l4, s1), (l3, s2)];
    // (switch, destination host, next switch): the reference's routes, §6.2.
    let pins = [
        (l3, h4, s1),
        (s1, h4, l2),
        (l2, h4, s2),
        (l4, h3, s2),
        (s2, h3, l1),
        (l1, h3, s1),
        (l2, h1, s2),
        (l1, h2, s1),
    ];
    let cycle: Vec<CycleQueue> = [(s1, l2), (l2, s2), (s2, l1), (l1, s1)]
        .iter()
        .map(|(a, b)| {
            port_to(&plan, a, b).map(|(port, _, _)| CycleQueue {
                switch: (*a).clone(),
                port,
                peer: (*b).clone(),
            })
        })
        .collect::<Result<_, _>>()?;
    let flows = [(h3, h4), (h2, h1), (h4, h3), (h1, h2)];
    let mut routes = Vec::new();
    let mut commands = Vec::new();
    if !args.no_bounce_routes {
        for (at, to, via) in pins {
            let (port, _, next_hop) = port_to(&plan, at, via)?;
            let ns = plan.spec.namespace(at);
            commands.push((ns, format!("{}/32", to.2), next_hop.to_string(), port));
            routes.push(format!("{at}: {} ({}/32) via {via}", to.0, to.2));
        }
    }
    let result = (|| {
        for (leaf, spine) in failed {
            for (a, b) in [(leaf, spine), (spine, leaf)] {
                let (_, device, _) = port_to(&plan, a, b)?;
                ip(
                    &[
                        "-n",
                        &plan.spec.namespace(a),
                        "link",
                        "set",
                        &device,
                        "down",
                    ],
                    None,
                )?;
            }
        }
        // A /32 beats BGP's /31 for the host whatever BGP still holds; the metric is only for
        // reading (`ip route`: proto static metric 10).
        for (ns, dst, via, dev) in &commands {
            ip(
                &[
                    "-n", ns, "route", "replace", dst, "via", via, "dev", dev, "proto", "static",
                    "metric", "10",
                ],
                None,
            )?;
        }
        let mut runs = Vec::new();
        for watchdog in [false, true] {
            set_watchdogs(&plan, watchdog)?;
            runs.push(run(&plan, &cycle, &flows, watchdog, args)?);
        }
        Ok::<_, LabError>(runs)
    })();
    // Restore whatever happened: links up, routes gone, the watchdog as the template has it.
    let mut restored = true;
    for (ns, dst, via, dev) in &commands {
        restored &= ip(
            &["-n", ns, "route", "del", dst, "via", via, "dev", dev],
            None,
        )
        .is_ok();
    }
    for (leaf, spine) in failed {
        for (a, b) in [(leaf, spine), (spine, leaf)] {
            restored &= port_to(&plan, a, b)
                .and_then(|(_, device, _)| {
                    ip(
                        &["-n", &plan.spec.namespace(a), "link", "set", &device, "up"],
                        None,
                    )
                })
                .is_ok();
        }
    }
    restored &= set_watchdogs(&plan, true).is_ok();
    let runs = result?;
    let report = DeadlockReport {
        fabric: args.prefix.clone(),
        failed_links: failed.iter().map(|(l, s)| format!("{l}-{s}")).collect(),
        static_routes: routes,
        flows: ["A", "B", "C", "D"]
            .iter()
            .zip(&flows)
            .map(|(n, (a, b))| format!("{n} {}->{}", a.0, b.0))
            .collect(),
        cycle,
        traffic_ms: args.traffic_ms,
        hold_ms: args.hold_ms,
        runs,
        restored,
    };
    super::scenario::print_report(&report, args.json, describe)?;
    Ok(if report.restored {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

type HostRef<'a> = &'a (String, String, Ipv4Addr);

/// One run: senders for `traffic_ms`, samples every 100 ms until the end of the hold window.
fn run(
    plan: &Plan,
    cycle: &[CycleQueue],
    flows: &[(HostRef<'_>, HostRef<'_>); 4],
    watchdog: bool,
    args: &DeadlockArgs,
) -> Result<DeadlockRun, LabError> {
    // Receivers hold UDP 4791 open so that their kernels answer nothing (ICMP port unreachable).
    let mut sinks = Vec::new();
    let mut senders = Vec::new();
    for (from, to) in flows {
        sinks.push(in_namespace(&to.1, || {
            UdpSocket::bind(SocketAddrV4::new(to.2, ROCE_PORT))
        })?);
        senders.push(in_namespace(&from.1, || {
            let s = UdpSocket::bind(SocketAddrV4::new(from.2, 0))?;
            rustix::net::sockopt::set_ip_tos(&s, DSCP << 2)?;
            s.connect(SocketAddrV4::new(to.2, ROCE_PORT))?;
            Ok(s)
        })?);
    }
    let baseline = storms(&snapshots(plan));
    let stop = AtomicBool::new(false);
    let sent: [AtomicU64; 4] = Default::default();
    let started = Instant::now();
    let mut cycle_paused_after_ms = None;
    let mut detections: Vec<Detection> = Vec::new();
    let mut at_stop = None;
    let mut last = None;
    std::thread::scope(|scope| -> Result<(), LabError> {
        for (socket, count) in senders.iter().zip(&sent) {
            let stop = &stop;
            scope.spawn(move || {
                let payload = [0u8; PAYLOAD_BYTES];
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..DATAGRAMS_PER_MS {
                        // A full socket buffer is the host's own back-pressure: skip.
                        if socket.send(&payload).is_ok() {
                            count.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    next += Duration::from_millis(1);
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
            });
        }
        let traffic = Duration::from_millis(args.traffic_ms);
        let end = traffic + Duration::from_millis(args.hold_ms);
        let mut previous: Option<(Instant, Vec<Sample>)> = None;
        loop {
            let elapsed = started.elapsed();
            if elapsed >= traffic && !stop.load(Ordering::Relaxed) {
                stop.store(true, Ordering::Relaxed);
            }
            let snaps = snapshots(plan);
            let now = Instant::now();
            let samples = cycle
                .iter()
                .map(|q| sample_of(&snaps, q))
                .collect::<Result<Vec<_>, _>>();
            let samples = match samples {
                Ok(s) => s,
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            };
            let ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
            if let Some((then, prev)) = &previous {
                let all = prev
                    .iter()
                    .zip(&samples)
                    .all(|(b, a)| a.depth_bytes > 0 && paused(*b, *a, now - *then) >= PAUSED_SHARE);
                if all && cycle_paused_after_ms.is_none() {
                    cycle_paused_after_ms = Some(ms);
                }
            }
            for (switch, queue, n) in storms(&snaps) {
                let was = baseline
                    .iter()
                    .find(|(s, q, _)| *s == switch && *q == queue)
                    .map_or(0, |(_, _, n)| *n);
                if n > was
                    && !detections
                        .iter()
                        .any(|d| d.switch == switch && d.queue == queue)
                {
                    let on_cycle = cycle
                        .iter()
                        .any(|c| c.switch == switch && queue == format!("{}:{PRIORITY}", c.port));
                    detections.push(Detection {
                        switch,
                        queue,
                        on_cycle,
                        seen_after_ms: ms,
                    });
                }
            }
            if stop.load(Ordering::Relaxed) && at_stop.is_none() {
                at_stop = Some((now, samples.clone()));
            }
            if elapsed >= end {
                last = Some((now, samples));
                return Ok(());
            }
            previous = Some((now, samples));
            std::thread::sleep(SAMPLE_EVERY);
        }
    })?;
    drop(sinks);
    let ((t0, first), (t1, end)) = at_stop
        .zip(last)
        .ok_or_else(|| LabError::Failed("no samples".into()))?;
    let queues: Vec<CycleQueueState> = cycle
        .iter()
        .zip(first.iter().zip(&end))
        .map(|(q, (b, a))| CycleQueueState {
            queue: q.clone(),
            depth_at_stop_bytes: b.depth_bytes,
            depth_at_end_bytes: a.depth_bytes,
            tx_frames_in_hold: a.tx_frames.saturating_sub(b.tx_frames),
            paused_share_in_hold: paused(*b, *a, t1 - t0),
            pfc_received_in_hold: a.pfc_rx.saturating_sub(b.pfc_rx),
        })
        .collect();
    Ok(DeadlockRun {
        watchdog,
        datagrams_sent: sent.map(|c| c.load(Ordering::Relaxed)),
        cycle_paused_after_ms,
        deadlocked: queues.iter().all(|q| {
            q.depth_at_end_bytes > 0
                && q.tx_frames_in_hold == 0
                && q.paused_share_in_hold >= PAUSED_SHARE
        }),
        drained: queues.iter().all(|q| q.depth_at_end_bytes == 0),
        queues,
        detections,
    })
}

fn describe(r: &DeadlockReport) -> String {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "deadlock on fabric {:?}: links {} failed, flows {} (UDP, DSCP {DSCP} -> priority \
         {PRIORITY}, ~92 Mb/s each, {} ms), cycle watched {} ms after the senders stop",
        r.fabric,
        r.failed_links.join(", "),
        r.flows.join(", "),
        r.traffic_ms,
        r.hold_ms
    );
    let _ = writeln!(
        t,
        "\n        spine1            spine2\n        / |  \\  x        x / |  \\\n   \
         leaf1 leaf2 leaf3 leaf4   (x: leaf4-spine1 and leaf3-spine2 down)\n\ncycle: {}",
        r.cycle
            .iter()
            .map(|q| format!("{} {}", q.switch, q.port))
            .chain(r.cycle.first().map(|q| format!("{} {}", q.switch, q.port)))
            .collect::<Vec<_>>()
            .join(" -> ")
    );
    if r.static_routes.is_empty() {
        let _ = writeln!(t, "no bounce routes (--no-bounce-routes): BGP's paths only");
    } else {
        let _ = writeln!(t, "static routes: {}", r.static_routes.join("; "));
    }
    for run in &r.runs {
        let _ = writeln!(
            t,
            "\nwatchdog {} (datagrams sent A-D {}):",
            if run.watchdog { "on" } else { "off" },
            run.datagrams_sent
                .iter()
                .map(|n| thousands(*n))
                .collect::<Vec<_>>()
                .join("/")
        );
        let mut table = Table::new([
            "Switch",
            "Port",
            "Peer",
            "Depth at stop B",
            "Depth at end B",
            "TX in hold",
            "Paused in hold",
            "PFC rx in hold",
        ])
        .left_all();
        for q in &run.queues {
            table.row([
                q.queue.switch.clone(),
                q.queue.port.clone(),
                q.queue.peer.clone(),
                thousands(q.depth_at_stop_bytes),
                thousands(q.depth_at_end_bytes),
                thousands(q.tx_frames_in_hold),
                format!("{:.0} %", q.paused_share_in_hold * 100.0),
                thousands(q.pfc_received_in_hold),
            ]);
        }
        let _ = write!(t, "{table}");
        for d in &run.detections {
            let _ =
                writeln!(
                t,
                "  WATCHDOG: storm declared at {} {} ({}), seen {} ms after the senders started",
                d.switch,
                d.queue,
                if d.on_cycle { "on the cycle" } else { "off the cycle" },
                d.seen_after_ms
            );
        }
        if let Some(ms) = run.cycle_paused_after_ms {
            let _ = writeln!(
                t,
                "  every cycle queue paused and non-empty {ms} ms after the start"
            );
        }
        if run.deadlocked {
            let _ = writeln!(
                t,
                "  DEADLOCK: every cycle queue non-empty, paused and sending nothing {} ms after \
                 the senders stopped",
                r.hold_ms
            );
        } else if run.drained {
            let _ = writeln!(t, "  DRAINED: every cycle queue empty at the end");
        } else {
            let _ = writeln!(t, "  neither deadlocked nor drained");
        }
    }
    let _ = writeln!(
        t,
        "\n{}",
        if r.restored {
            "restored: links up, static routes removed, watchdog on"
        } else {
            "NOT fully restored: run `headroom lab fabric` to repair"
        }
    );
    t
}
