//! Running a [`Scenario`] and writing what researchers look at: CSV time series, the flow
//! completion table, the switch events, a summary, and plots (SVG).
//!
//! The run stops at every multiple of the sample interval (`Sim::run_until`), reads the
//! switches' counters and the NICs' state, and appends one row per live queue, PG, pause and
//! flow. Every file is a pure function of the scenario and its seed: rows come in index order,
//! numbers are integers or fixed-precision decimals, and nothing reads a clock. Files written
//! to `--out` (docs/sim.md describes each column):
//!
//! | file | rows |
//! |---|---|
//! | `queues.csv` | per sample, per egress queue that ever held or sent a frame: depth |
//! | `pgs.csv` | per sample, per ingress PG that ever admitted a frame: use, and the highest shared and headroom use in the interval |
//! | `pause.csv` | per sample, per (switch port or host, priority) ever paused: whether its egress is held by a received pause |
//! | `rates.csv` | per sample, per flow in progress: the DCQCN rate and the delivered throughput |
//! | `ports.csv` | per sample, per switch port: cumulative frames, drops, CE marks, PFC frames |
//! | `hosts.csv` | per sample, per host: cumulative frames, CNPs, PFC frames received, retransmissions |
//! | `fct.csv` | per bounded flow: size, start, finish, FCT, ideal FCT, slowdown |
//! | `events.csv` | XOFF/XON on every link (from the PFC frames on the wire), watchdog storms, PFC rate alarms |
//! | `ecmp.csv` | per routed switch and next hop: the packets routed through it (empty on a bridged topology) |
//! | `summary.txt` | totals, the conservation check, the run's cost |
//! | `*.svg`, `*.png` | queue depth, flow rates, FCT slowdown by size, pause timeline (the PNG is the SVG rasterised) |

use crate::plot;
use crate::scenario::{Node, Scenario};
use crate::{Endpoint, HostId, RdmaFlowId, Sim, SimError, SimEvent, SwitchId};
use headroom_core::counters::DropReason;
use headroom_core::events::Event;
use headroom_core::stats::PortStats;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority, PrioritySet, PRIORITY_COUNT};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Progress of a run, for a progress bar.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Simulated time reached, ns.
    pub sim_ns: u64,
    /// Simulated time to reach, ns.
    pub duration_ns: u64,
    /// Steps (event times) processed.
    pub steps: u64,
}

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// The simulator refused the scenario or ran out of steps.
    Sim(SimError),
    /// An output file could not be written.
    Io(PathBuf, std::io::Error),
    /// A plot could not be rasterised to PNG.
    Plot(PathBuf, String),
}

impl core::fmt::Display for RunError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Sim(e) => write!(f, "simulation: {e}"),
            Self::Io(p, e) => write!(f, "{}: {e}", p.display()),
            Self::Plot(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for RunError {}

/// Bytes of every flow's frames as the conservation check counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Conservation {
    /// Data frames the hosts put on their links.
    pub sent_frames: u64,
    /// Data frames the hosts received.
    pub received_frames: u64,
    /// Data frames the switches dropped (with a reason).
    pub dropped_frames: u64,
    /// Data frames still in a switch queue.
    pub queued_frames: u64,
    /// Data frames on a link.
    pub in_flight_frames: u64,
    /// Frames a switch flooded beyond the one copy it received (delivered to more than one
    /// port): counted as extra receptions.
    pub flood_copies: u64,
}

impl Conservation {
    /// Whether every frame sent is received, dropped, queued or on a wire (flood copies
    /// aside).
    #[must_use]
    pub fn holds(&self) -> bool {
        self.sent_frames + self.flood_copies
            == self.received_frames
                + self.dropped_frames
                + self.queued_frames
                + self.in_flight_frames
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunReport {
    /// Steps processed.
    pub steps: u64,
    /// Frames the switches received (every port, data and control).
    pub switch_frames: u64,
    /// Bounded flows, and how many completed.
    pub flows_bounded: usize,
    /// Of those, completed.
    pub flows_completed: usize,
    /// Frames of lossless priorities the switches dropped, other than by the PFC watchdog
    /// ([`lossless_drops`]).
    pub lossless_drops: u64,
    /// Frames dropped by the switches, any reason.
    pub drops: u64,
    /// The conservation check at the end.
    pub conservation: Conservation,
    /// Files written, in order.
    pub files: Vec<PathBuf>,
}

#[derive(Default)]
struct Csv {
    name: &'static str,
    text: String,
}

impl Csv {
    fn new(name: &'static str, header: &str) -> Self {
        Self {
            name,
            text: format!("{header}\n"),
        }
    }
}

/// One (switch, port, index) series: whether it is written (once live, always).
struct Live(Vec<bool>);

impl Live {
    fn new(n: usize) -> Self {
        Self(vec![false; n])
    }
}

/// Per-series samples kept for the plots.
#[derive(Default)]
pub(crate) struct Series {
    pub(crate) name: String,
    pub(crate) points: Vec<(f64, f64)>,
}

/// Everything the plots need.
#[derive(Default)]
pub(crate) struct PlotData {
    pub(crate) queues: Vec<Series>,
    pub(crate) rates: Vec<Series>,
    /// (size bytes, slowdown).
    pub(crate) fct: Vec<(u64, f64)>,
    /// (hop name, intervals [start, end) in µs of XOFF).
    pub(crate) pauses: Vec<(String, Vec<(f64, f64)>)>,
    pub(crate) duration_us: f64,
}

fn port_label(s: &Scenario, sw: usize, port: usize) -> String {
    format!("{}:{port}", s.topology.switches[sw])
}

/// Runs `scenario` and writes its results into `out` (created if needed).
///
/// # Errors
/// [`RunError`].
pub fn run(
    scenario: &Scenario,
    out: &Path,
    progress: &mut dyn FnMut(&Progress),
) -> Result<RunReport, RunError> {
    let mut sim = scenario.build().map_err(RunError::Sim)?;
    std::fs::create_dir_all(out).map_err(|e| RunError::Io(out.to_owned(), e))?;
    let switches = sim.switch_count();
    let ports: Vec<usize> = (0..switches)
        .map(|s| sim.switch(SwitchId(s)).shared().params.ports.len())
        .collect();
    let hosts = sim.host_count();
    let flows: Vec<RdmaFlowId> = sim.rdma_flow_ids().collect();

    let mut queues = Csv::new("queues.csv", "time_ns,switch,port,queue,depth_bytes");
    let mut pgs = Csv::new(
        "pgs.csv",
        "time_ns,switch,port,pg,used_bytes,shared_max_bytes,headroom_max_bytes",
    );
    let mut pause = Csv::new("pause.csv", "time_ns,node,port,priority,paused");
    let mut rates = Csv::new(
        "rates.csv",
        "time_ns,flow,src,dst,dcqcn_rate_bps,goodput_bps",
    );
    let mut port_csv = Csv::new(
        "ports.csv",
        "time_ns,switch,port,rx_frames,tx_frames,drops,ecn_marked,pfc_tx,pfc_rx",
    );
    let mut host_csv = Csv::new(
        "hosts.csv",
        "time_ns,host,tx_frames,rx_frames,cnps_sent,cnps_received,pfc_received,retransmitted_packets",
    );
    let idx = |s: usize, p: usize, i: usize| (s * 4096 + p) * PRIORITY_COUNT + i;
    let mut live_q = Live::new(switches * 4096 * PRIORITY_COUNT);
    let mut live_pg = Live::new(switches * 4096 * PRIORITY_COUNT);
    let mut live_pause_sw = Live::new(switches * 4096 * PRIORITY_COUNT);
    let mut live_pause_host = Live::new(hosts * PRIORITY_COUNT);
    let mut q_series: Vec<Option<usize>> = vec![None; switches * 4096 * PRIORITY_COUNT];
    let mut plots = PlotData {
        duration_us: scenario.duration_ns as f64 / 1e3,
        ..PlotData::default()
    };
    let mut rate_series: Vec<Series> = flows
        .iter()
        .map(|f| Series {
            name: format!("flow {}", f.0),
            points: Vec::new(),
        })
        .collect();
    let mut last_delivered = vec![0u64; flows.len()];

    let interval = scenario.sample_interval_ns;
    let mut t = 0u64;
    while t < scenario.duration_ns {
        t = (t + interval).min(scenario.duration_ns);
        sim.run_until(Instant::from_nanos(t))
            .map_err(RunError::Sim)?;
        let now = sim.now();
        progress(&Progress {
            sim_ns: t,
            duration_ns: scenario.duration_ns,
            steps: sim.steps(),
        });
        for (s, &port_count) in ports.iter().enumerate() {
            let sh = sim.switch(SwitchId(s)).shared();
            for p in 0..port_count {
                let st = sh.port_stats(PortId(u16::try_from(p).unwrap_or(u16::MAX)), now);
                let wm = sh.take_port_watermarks(PortId(u16::try_from(p).unwrap_or(u16::MAX)));
                let _ = writeln!(
                    port_csv.text,
                    "{t},{},{p},{},{},{},{},{},{}",
                    scenario.topology.switches[s],
                    st.rx_frames,
                    st.tx_frames(),
                    st.drops_total(),
                    st.queues.iter().map(|q| q.ecn_marked).sum::<u64>(),
                    st.pfc_frames_tx,
                    st.pfc_rx.iter().sum::<u64>()
                );
                for i in 0..PRIORITY_COUNT {
                    let q = &st.queues[i];
                    let k = idx(s, p, i);
                    if q.depth_bytes > 0 || q.tx_frames > 0 {
                        live_q.0[k] = true;
                    }
                    if live_q.0[k] {
                        let _ = writeln!(
                            queues.text,
                            "{t},{},{p},{i},{}",
                            scenario.topology.switches[s], q.depth_bytes
                        );
                        let series = *q_series[k].get_or_insert_with(|| {
                            plots.queues.push(Series {
                                name: format!("{} q{i}", port_label(scenario, s, p)),
                                points: Vec::new(),
                            });
                            plots.queues.len() - 1
                        });
                        plots.queues[series]
                            .points
                            .push((t as f64 / 1e3, q.depth_bytes as f64 / 1e3));
                    }
                    let pg = &st.pgs[i];
                    if pg.frames > 0 {
                        live_pg.0[k] = true;
                    }
                    if live_pg.0[k] {
                        let _ = writeln!(
                            pgs.text,
                            "{t},{},{p},{i},{},{},{}",
                            scenario.topology.switches[s],
                            pg.used_bytes,
                            wm.pg_shared[i],
                            wm.pg_headroom[i]
                        );
                    }
                    let paused = sh
                        .pfc
                        .view(p, Priority::from_low_bits(u8::try_from(i).unwrap_or(0)))
                        .is_paused(now);
                    if paused {
                        live_pause_sw.0[k] = true;
                    }
                    if live_pause_sw.0[k] {
                        let _ = writeln!(
                            pause.text,
                            "{t},{},{p},{i},{}",
                            scenario.topology.switches[s],
                            u8::from(paused)
                        );
                    }
                }
            }
        }
        for h in 0..hosts {
            let Some(nic) = sim.host(HostId(h)).rdma().and_then(|r| r.nic()) else {
                continue;
            };
            let c = nic.counters();
            let retrans: u64 = (0..nic.qp_count())
                .map(|q| nic.requester_stats(q).packets_retransmitted_total)
                .sum();
            let mut pfc_rx = 0;
            for i in 0..PRIORITY_COUNT {
                let Some(prio) = headroom_roce::pause::Priority::new(u8::try_from(i).unwrap_or(0))
                else {
                    continue;
                };
                pfc_rx += nic.priority_stats(prio).pfc_frames_rx_total;
                let paused = nic
                    .pause()
                    .is_paused(headroom_roce::time::Instant::from_nanos(t), prio);
                let k = h * PRIORITY_COUNT + i;
                if paused {
                    live_pause_host.0[k] = true;
                }
                if live_pause_host.0[k] {
                    let _ = writeln!(
                        pause.text,
                        "{t},{},0,{i},{}",
                        scenario.topology.hosts[h],
                        u8::from(paused)
                    );
                }
            }
            let _ = writeln!(
                host_csv.text,
                "{t},{},{},{},{},{},{pfc_rx},{retrans}",
                scenario.topology.hosts[h],
                c.tx_frames_total,
                c.rx_frames_total,
                c.tx_cnps_total,
                c.rx_cnps_total
            );
        }
        for (i, &f) in flows.iter().enumerate() {
            let spec = sim.rdma_flow_spec(f);
            let st = sim.rdma_flow(f);
            let started = spec.start.as_nanos() < t;
            let done = st
                .finish
                .is_some_and(|x| x.as_nanos() < t.saturating_sub(interval));
            let (src_qp, dst_qp) = sim.rdma_flow_qps(f);
            // Payload the receiver accepted in order (what goodput counts).
            let received = sim
                .host(spec.dst)
                .rdma()
                .and_then(|r| r.nic())
                .map_or(0, |n| {
                    n.responder_stats(dst_qp).payload_bytes_received_total
                });
            let delta = received - last_delivered[i];
            last_delivered[i] = received;
            if !started || (done && delta == 0) {
                continue;
            }
            let rate = sim
                .host(spec.src)
                .rdma()
                .and_then(|r| r.nic())
                .map_or(0, |n| n.qp_rate(src_qp).current_rate_bps);
            let throughput = u128::from(delta) * 8 * 1_000_000_000 / u128::from(interval.max(1));
            let _ = writeln!(
                rates.text,
                "{t},{},{},{},{rate},{throughput}",
                f.0, scenario.topology.hosts[spec.src.0], scenario.topology.hosts[spec.dst.0]
            );
            rate_series[i]
                .points
                .push((t as f64 / 1e3, throughput as f64 / 1e9));
        }
    }

    // Flow completion times.
    let mut fct = Csv::new(
        "fct.csv",
        "flow,kind,src,dst,size_bytes,start_ns,finish_ns,fct_ns,ideal_fct_ns,slowdown",
    );
    let mut report = RunReport::default();
    for (i, &f) in flows.iter().enumerate() {
        let spec = sim.rdma_flow_spec(f);
        let Some(bytes) = spec.bytes else { continue };
        report.flows_bounded += 1;
        let st = sim.rdma_flow(f);
        let ideal = ideal_fct_ns(scenario, &sim, spec.src, spec.dst, bytes);
        let kind = scenario.flows[i].kind.label();
        let (src, dst) = (
            &scenario.topology.hosts[spec.src.0],
            &scenario.topology.hosts[spec.dst.0],
        );
        match st.finish {
            Some(fin) => {
                report.flows_completed += 1;
                let fct_ns = fin.as_nanos() - spec.start.as_nanos();
                let slowdown = fct_ns as f64 / ideal.max(1) as f64;
                plots.fct.push((bytes, slowdown));
                let _ = writeln!(
                    fct.text,
                    "{},{kind},{src},{dst},{bytes},{},{},{fct_ns},{ideal},{slowdown:.4}",
                    f.0,
                    spec.start.as_nanos(),
                    fin.as_nanos()
                );
            }
            None => {
                let _ = writeln!(
                    fct.text,
                    "{},{kind},{src},{dst},{bytes},{},,,{ideal},",
                    f.0,
                    spec.start.as_nanos()
                );
            }
        }
    }

    // Events: PFC changes on every link (by time, then link, then direction), then the
    // switches' own events.
    let mut events = Csv::new("events.csv", "time_ns,node,port,priority_or_queue,event");
    let mut all: Vec<(u64, String, String, u8, &'static str)> = Vec::new();
    let node_name = |e: Endpoint| match e {
        Endpoint::Host(h) => (scenario.topology.hosts[h.0].clone(), 0usize),
        Endpoint::Switch(s, p) => (scenario.topology.switches[s.0].clone(), p.index()),
    };
    let mut pause_rows: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
    for l in 0..sim.link_count() {
        let link = sim.link(crate::LinkId(l));
        for end in link.ends() {
            let Some(ch) = link.channel_from(end) else {
                continue;
            };
            let (name, port) = node_name(end);
            let mut open: [Option<f64>; PRIORITY_COUNT] = [None; PRIORITY_COUNT];
            let mut intervals = Vec::new();
            for c in ch.pfc_changes() {
                all.push((
                    c.at.as_nanos(),
                    name.clone(),
                    port.to_string(),
                    c.priority,
                    if c.xoff { "xoff" } else { "xon" },
                ));
                let us = c.at.as_nanos() as f64 / 1e3;
                let slot = &mut open[usize::from(c.priority)];
                if c.xoff {
                    *slot = Some(us);
                } else if let Some(s) = slot.take() {
                    intervals.push((s, us));
                }
            }
            for s in open.into_iter().flatten() {
                intervals.push((s, plots.duration_us));
            }
            if !intervals.is_empty() {
                let label = if matches!(end, Endpoint::Host(_)) {
                    name.clone()
                } else {
                    format!("{name}:{port}")
                };
                pause_rows.push((label, intervals));
            }
        }
    }
    plots.pauses = pause_rows;
    for SimEvent { switch, event } in sim.events() {
        let sw = scenario.topology.switches[switch.0].clone();
        let (at, port, idx, what) = match *event {
            Event::StormDetected {
                port, queue, at, ..
            } => (at, port, queue.index(), "storm_detected"),
            Event::StormRestored { port, queue, at } => (at, port, queue.index(), "storm_restored"),
            Event::PfcRateHigh {
                port, priority, at, ..
            } => (at, port, priority.index(), "pfc_rate_high"),
            Event::PfcRateNormal { port, priority, at } => {
                (at, port, priority.index(), "pfc_rate_normal")
            }
        };
        all.push((
            at.as_nanos(),
            sw,
            port.index().to_string(),
            u8::try_from(idx).unwrap_or(u8::MAX),
            what,
        ));
    }
    all.sort_by(|a, b| (a.0, &a.1, &a.2, a.3).cmp(&(b.0, &b.1, &b.2, b.3)));
    for (at, node, port, i, what) in &all {
        let _ = writeln!(events.text, "{at},{node},{port},{i},{what}");
    }

    // Packets per next hop (routed shapes; header only on a bridged one).
    let mut ecmp = Csv::new("ecmp.csv", "switch,port,neighbour,ecmp_member,packets");
    for s in 0..switches {
        for hop in sim.next_hop_packets(SwitchId(s)) {
            let neighbour = sim
                .attachment(Endpoint::Switch(SwitchId(s), hop.port))
                .ok()
                .flatten()
                .map_or_else(String::new, |(link, side)| {
                    node_name(sim.link(link).ends()[1 - side]).0
                });
            let _ = writeln!(
                ecmp.text,
                "{},{},{neighbour},{},{}",
                scenario.topology.switches[s],
                hop.port.index(),
                hop.ecmp_member,
                hop.packets
            );
        }
    }

    // Totals and conservation.
    let now = sim.now();
    for (s, &port_count) in ports.iter().enumerate() {
        let sh = sim.switch(SwitchId(s)).shared();
        for p in 0..port_count {
            let st = sh.port_stats(PortId(u16::try_from(p).unwrap_or(u16::MAX)), now);
            report.switch_frames += st.rx_frames;
            report.drops += st.drops_total();
            report.lossless_drops += lossless_drops(&st, sh.params.ports[p].pfc_enable);
        }
    }
    report.steps = sim.steps();
    report.conservation = conservation(&sim);
    let mut summary = String::new();
    let _ = writeln!(summary, "scenario: {}", scenario.file);
    let _ = writeln!(summary, "seed: {}", scenario.seed);
    let _ = writeln!(
        summary,
        "simulated: {} ns; steps: {}; switch frames received: {}",
        scenario.duration_ns, report.steps, report.switch_frames
    );
    let _ = writeln!(
        summary,
        "topology: {} hosts, {} switches, {} links",
        hosts,
        switches,
        sim.link_count()
    );
    let _ = writeln!(
        summary,
        "flows: {} ({} bounded, {} completed)",
        flows.len(),
        report.flows_bounded,
        report.flows_completed
    );
    let _ = writeln!(
        summary,
        "switch drops: {} (lossless PGs: {})",
        report.drops, report.lossless_drops
    );
    let c = report.conservation;
    let _ = writeln!(
        summary,
        "conservation: sent {} + flood copies {} = received {} + dropped {} + queued {} + on the wire {}: {}",
        c.sent_frames,
        c.flood_copies,
        c.received_frames,
        c.dropped_frames,
        c.queued_frames,
        c.in_flight_frames,
        if c.holds() { "holds" } else { "VIOLATED" }
    );
    let _ = writeln!(
        summary,
        "events kept: {}, lost: {}",
        sim.events().len(),
        sim.events_lost()
    );
    let _ = writeln!(
        summary,
        "plots: SVG and PNG ({})",
        match plot::png_font() {
            Ok(font) => format!("PNG text in {font}"),
            Err(why) => why,
        }
    );

    for csv in [
        &queues, &pgs, &pause, &rates, &port_csv, &host_csv, &fct, &events, &ecmp,
    ] {
        let path = out.join(csv.name);
        std::fs::write(&path, &csv.text).map_err(|e| RunError::Io(path.clone(), e))?;
        report.files.push(path);
    }
    let path = out.join("summary.txt");
    std::fs::write(&path, &summary).map_err(|e| RunError::Io(path.clone(), e))?;
    report.files.push(path);

    plots.rates = rate_series
        .into_iter()
        .filter(|s| !s.points.is_empty())
        .collect();
    for (name, svg) in plot::all(&plots) {
        let path = out.join(name);
        std::fs::write(&path, &svg).map_err(|e| RunError::Io(path.clone(), e))?;
        report.files.push(path);
        let path = out.join(name.replace(".svg", ".png"));
        let png = plot::png(&svg).map_err(|e| RunError::Plot(path.clone(), e))?;
        std::fs::write(&path, png).map_err(|e| RunError::Io(path.clone(), e))?;
        report.files.push(path);
    }
    Ok(report)
}

/// The FCT of `bytes` from `src` to `dst` on an idle network: the first packet's way there
/// (per hop: its serialization and the propagation), the rest of the flow serialized at the
/// slowest link, and the last ACK's way back. Packets are path-MTU payloads plus RoCEv2
/// headers (58 bytes) on the wire (preamble, FCS and gap included).
fn ideal_fct_ns(s: &Scenario, sim: &Sim, src: HostId, dst: HostId, bytes: u64) -> u64 {
    let pmtu = u64::from(s.nics[src.0].nic.pmtu.bytes());
    let packets = bytes.div_ceil(pmtu).max(1);
    let last = bytes - (packets - 1) * pmtu;
    let wire = |payload: u64| payload + 58 + 24;
    let path = path_links(s, src.0, dst.0);
    let rates: Vec<u64> = path
        .iter()
        .map(|l| s.topology.links[*l].params.rate_bps)
        .collect();
    let bottleneck = rates.iter().copied().min().unwrap_or(1).max(1);
    let ser = |b: u64, r: u64| b * 8 * 1_000_000_000 / r.max(1);
    let mut ns = 0;
    for &l in &path {
        let p = s.topology.links[l].params;
        ns += ser(wire(pmtu.min(bytes)), p.rate_bps) + p.propagation_ns;
        // ACK back.
        ns += ser(wire(4), p.rate_bps) + p.propagation_ns;
    }
    ns += ser(
        (packets - 1) * wire(pmtu) + wire(last) - wire(pmtu.min(bytes)),
        bottleneck,
    );
    let _ = sim;
    ns
}

/// Links on the path from host `a` to host `b` (breadth-first over the topology: the shortest
/// path, which is the L2 path on a bridged topology and one of the equal-cost paths, all of
/// the same length and rates, on a routed one).
fn path_links(s: &Scenario, a: usize, b: usize) -> Vec<usize> {
    let topo = &s.topology;
    let key = |n: Node| match n {
        Node::Host(h) => h,
        Node::Switch(w) => topo.hosts.len() + w,
    };
    let n = topo.hosts.len() + topo.switches.len();
    let mut prev: Vec<Option<(usize, usize)>> = vec![None; n];
    let mut seen = vec![false; n];
    let mut queue = std::collections::VecDeque::from([a]);
    seen[a] = true;
    while let Some(u) = queue.pop_front() {
        if u == b {
            break;
        }
        for (i, l) in topo.links.iter().enumerate() {
            let (x, y) = (key(l.a), key(l.b));
            let v = if x == u {
                y
            } else if y == u {
                x
            } else {
                continue;
            };
            // Hosts do not forward.
            if v < topo.hosts.len() && v != b {
                continue;
            }
            if !seen[v] {
                seen[v] = true;
                prev[v] = Some((u, i));
                queue.push_back(v);
            }
        }
    }
    let mut links = Vec::new();
    let mut v = b;
    while let Some((u, l)) = prev[v] {
        links.push(l);
        v = u;
    }
    links.reverse();
    links
}

/// Frames of the priorities in `pfc_enable` a port dropped other than by the PFC watchdog's
/// drop action (which drops lossless traffic on purpose): at admission to its ingress PGs
/// (headroom exhausted) and in its egress queues. Zero on a port whose peer honours PFC and
/// whose PGs have the formula's headroom; what `summary.txt` reports as lossless drops and
/// what the swarm checks ([`crate::swarm`]).
#[must_use]
pub fn lossless_drops(st: &PortStats, pfc_enable: PrioritySet) -> u64 {
    let mut drops = 0u64;
    for p in pfc_enable.iter() {
        drops += st.pgs[p.index()].drops + st.queues[p.index()].drop_frames;
    }
    let watchdog =
        st.drops[DropReason::PfcwdIngress.index()] + st.drops[DropReason::PfcwdQueue.index()];
    drops.saturating_sub(watchdog)
}

/// Every data frame the hosts sent is received by a host, dropped by a switch, queued in a
/// switch, or on a wire; a frame a switch floods to several ports counts once per extra copy.
/// MAC Control frames are consumed hop by hop and not counted.
#[must_use]
pub fn conservation(sim: &Sim) -> Conservation {
    let mut c = Conservation::default();
    let now = sim.now();
    for l in 0..sim.link_count() {
        let link = sim.link(crate::LinkId(l));
        let ends = link.ends();
        for side in 0..2 {
            let Some(ch) = link.channel_from(ends[side]) else {
                continue;
            };
            let on_wire = ch.data_frames_in_flight() as u64;
            c.in_flight_frames += on_wire;
            match (ends[side], ends[1 - side]) {
                (Endpoint::Host(_), _) => c.sent_frames += ch.stats().data_frames,
                (_, Endpoint::Host(_)) => c.received_frames += ch.stats().data_frames - on_wire,
                _ => {}
            }
        }
    }
    for s in 0..sim.switch_count() {
        let sw = sim.switch(SwitchId(s));
        let sh = sw.shared();
        let (mut rx, mut tx, mut dropped, mut queued) = (0u64, 0u64, 0u64, 0u64);
        for p in 0..sh.params.ports.len() {
            let port = PortId(u16::try_from(p).unwrap_or(u16::MAX));
            dropped += sh.port_stats(port, now).drops_total();
            for q in 0..PRIORITY_COUNT {
                queued += sw.queue_len(port, q) as u64;
            }
            let end = Endpoint::Switch(SwitchId(s), port);
            if let Some(ch) = sim.channel_from(end) {
                tx += ch.stats().data_frames;
            }
            rx += data_frames_received_by(sim, end);
        }
        c.dropped_frames += dropped;
        c.queued_frames += queued;
        // Each frame in is dropped, queued or sent at least once.
        c.flood_copies += (tx + queued + dropped).saturating_sub(rx);
    }
    c
}

/// Data frames `end` has received whole: what its peer transmitted minus what is still on
/// the wire.
fn data_frames_received_by(sim: &Sim, end: Endpoint) -> u64 {
    for l in 0..sim.link_count() {
        let link = sim.link(crate::LinkId(l));
        let ends = link.ends();
        for side in 0..2 {
            if ends[1 - side] == end {
                if let Some(ch) = link.channel_from(ends[side]) {
                    return ch.stats().data_frames - ch.data_frames_in_flight() as u64;
                }
            }
        }
    }
    0
}
