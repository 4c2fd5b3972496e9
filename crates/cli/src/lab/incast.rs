//! `headroom lab incast`: N senders write RoCEv2 to one receiver through the switch, and one report
//! says what the lossless class did.
//!
//! The experiment, in order:
//!
//! 1. The lab `P` with N + 1 hosts is built, or reused as it is (a lab with more hosts keeps
//!    them; a lab with fewer gets hosts added, which are removed again at the end; a lab that did
//!    not exist is removed at the end unless `--keep-lab`). A switch already running on the lab
//!    is refused: the experiment needs its own configuration and fresh counters.
//! 2. The switch runs the lab's generated configuration with ECN on or off on the lossless
//!    queues and DSCP or dot1p trust, written to `/run/headroom/P-incast.toml`, as a child
//!    process (`ip netns exec P-sw headroom run`), SCHED_FIFO by default (see docs/incast.md).
//! 3. `rocegen write_bw --clients N` runs on host N (the receiver), `rocegen write_bw` on hosts
//!    0..N-1 towards it, all at the switch's port speed; they start together once the server has
//!    every client. With `--ipv6` every rocegen sends RoCEv2 over IPv6 from its GID `fd00::i+1`
//!    (`--gid`); the out-of-band exchange stays on IPv4.
//! 4. When every rocegen has exited, the switch's counters are read over its control socket
//!    (snapshot, persistent watermarks, PG drops), then the switch is stopped (SIGTERM).
//! 5. One report: per flow and per port, as text or `--json`.
//!
//! Hosts are `P-h0`..`P-h{N-1}` (senders) and `P-hN` (receiver); sender i is on switch port i.

use super::config::{
    host_gid, host_ipv4, host_namespace, port_name, switch_namespace, LabSpec, LabTrust,
    DEFAULT_PREFIX, HOST_DEVICE, MAX_HOSTS, RUN_DIR,
};
use super::{build, check_privileges, ip, lab_namespaces, namespace_pids, LabError};
use crate::table::{thousands, Table};
use clap::{Args, ValueEnum};
use headroom_rocegen::report::Report as RocegenReport;
use headroom_runtime::protocol::{
    PgDropRow, PgWatermarkKind, QueueWatermarkKind, Request, Show, Snapshot, WatermarkRow,
};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the switch may take to start (open its ports and control socket).
const SWITCH_START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the switch may take to drain and exit on SIGTERM.
const SWITCH_STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// Time a rocegen run may take beyond its traffic: the exchange (the server waits for every
/// client), the drain of the posted messages after `--duration` (rocegen gives up after 10 s)
/// and the report exchange.
const ROCEGEN_SLACK: Duration = Duration::from_secs(60);
/// Niceness of the rocegen processes: ahead of ordinary processes on a shared machine (a late
/// host sends less, it does not send wrongly: its emulated link loses the time).
const ROCEGEN_NICE: &str = "-10";
/// Per-packet bytes on the wire besides the RDMA payload of a RoCEv2 WRITE: preamble and SFD
/// (8), Ethernet (14), IPv4 (20), UDP (8), BTH (12), ICRC (4), FCS (4), inter-frame gap (12).
const ROCE_PACKET_OVERHEAD_BYTES: u64 = 82;
/// What an IPv6 header (40 bytes) adds to the IPv4 one (20).
const IPV6_EXTRA_BYTES: u64 = 20;
/// The RETH of the first (or only) packet of a WRITE.
const RETH_BYTES: u64 = 16;
/// An 802.1Q tag.
const VLAN_TAG_BYTES: u64 = 4;
/// Linux reports task CPU times in USER_HZ ticks, 100 per second on every architecture's /proc.
const USER_HZ: f64 = 100.0;

/// The DCQCN overrides of `--dcqcn-timescale lab`, as rocegen flags (mlx5 names; in paper mode
/// they are K, T, B, R_AI, R_HAI). The NIC defaults assume a microsecond loop on a 25-100 Gb/s
/// link: alpha updated every 1 µs, at most one cut per 4 µs, increases every 300 µs by 5 Mb/s
/// (additive) and 50 Mb/s (hyper). In this lab a flow's packets are 0.1-1 ms apart and a CNP
/// takes milliseconds around the software loop, so alpha, updated a thousand times between two
/// CNPs, decays to nothing and cuts do not bite, while one hyper increase is half the link: the
/// flows are back at line rate before the next CNP, and PFC does the work. Scaled, every
/// time constant is in milliseconds and the steps are the smallest whole Mb/s.
const LAB_TIMESCALE_DCQCN: &[(&str, &str)] = &[
    ("--dce_tcp_rtt", "1000"),
    ("--rpg_time_reset", "10000"),
    ("--rpg_byte_reset", "0"),
    ("--rpg_ai_rate", "1"),
    ("--rpg_hai_rate", "5"),
];
/// Also for nvidia mode: at most one cut per alpha period.
const LAB_TIMESCALE_NVIDIA: &[(&str, &str)] = &[("--rate_reduce_monitor_period", "1000")];

/// rocegen's flags for the `lab` DCQCN timescale in `mode`.
pub(crate) fn lab_timescale_args(mode: Dcqcn) -> Vec<String> {
    let nvidia = match mode {
        Dcqcn::Off => return Vec::new(),
        Dcqcn::Paper => &[][..],
        Dcqcn::Nvidia => LAB_TIMESCALE_NVIDIA,
    };
    LAB_TIMESCALE_DCQCN
        .iter()
        .chain(nvidia)
        .flat_map(|(flag, value)| [(*flag).to_owned(), (*value).to_owned()])
        .collect()
}

/// On or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OnOff {
    /// On.
    On,
    /// Off.
    Off,
}

/// DCQCN on every host (rocegen `--dcqcn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Dcqcn {
    /// No rate control: CE marks are counted, no CNP is sent.
    Off,
    /// SIGCOMM'15 algorithm.
    Paper,
    /// ConnectX firmware semantics.
    Nvidia,
}

impl Dcqcn {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Paper => "paper",
            Self::Nvidia => "nvidia",
        }
    }
}

/// Which DCQCN time constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(super) enum Timescale {
    /// Millisecond constants for a software lab (see docs/incast.md).
    Lab,
    /// rocegen's defaults: the NIC's (mlx5) or the paper's microsecond constants.
    Nic,
}

/// `headroom lab incast [OPTIONS]`.
#[derive(Clone, Debug, Args)]
pub(super) struct IncastArgs {
    /// Number of senders (hosts h0..h{N-1}); the receiver is host hN.
    #[arg(long, default_value_t = 3)]
    senders: usize,
    /// Port speed of the switch and of the emulated NICs: Mb/s (`100`) or `100M`, `1G`...
    #[arg(long, default_value = "100M")]
    speed: String,
    /// Prefix of the lab (built if missing, reused if present).
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// RDMA WRITE size, bytes (rocegen -s).
    #[arg(short = 's', long, default_value_t = 65_536)]
    size: u32,
    /// Seconds of traffic (rocegen -D); goodput counts the messages completed in that time.
    #[arg(short = 'D', long, default_value_t = 5.0)]
    duration: f64,
    /// Messages per sender instead of a duration (rocegen -n).
    #[arg(short = 'n', long, conflicts_with = "duration")]
    iters: Option<u64>,
    /// Messages each sender keeps posted (rocegen -t). The switch can hold at most
    /// senders × tx-depth × size bytes of the experiment; after --duration that much drains.
    #[arg(short = 't', long, default_value_t = 32)]
    tx_depth: usize,
    /// DCQCN on every host.
    #[arg(long, value_enum, default_value_t = Dcqcn::Nvidia)]
    dcqcn: Dcqcn,
    /// DCQCN time constants: `lab` (milliseconds, for a software lab) or `nic` (rocegen's
    /// defaults, microseconds).
    #[arg(long, value_enum, default_value_t = Timescale::Lab)]
    dcqcn_timescale: Timescale,
    /// ECN marking on the switch's lossless queues (WRED profile of `headroom lab`).
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    ecn: OnOff,
    /// Tag data with VLAN 0 and this 802.1p priority (PCP), and make every switch port trust
    /// dot1p instead of DSCP.
    #[arg(long, value_parser = clap::value_parser!(u8).range(0..=7))]
    pcp: Option<u8>,
    /// DSCP of data and ACKs (3: lossless priority 3 under the switch's DSCP map).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(0..=63))]
    dscp: u8,
    /// SCHED_FIFO priority of the switch (`chrt`); 0 runs it with ordinary scheduling.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=99))]
    rt_priority: u8,
    /// The rocegen binary [default: next to this headroom, else on the PATH].
    #[arg(long, value_name = "PATH")]
    rocegen: Option<PathBuf>,
    /// An extra argument for every rocegen (repeat it: `--rocegen-arg=--rpg_ai_rate
    /// --rocegen-arg=2`).
    #[arg(long = "rocegen-arg", value_name = "ARG", allow_hyphen_values = true)]
    rocegen_args: Vec<String>,
    /// RoCEv2 over IPv6: host i's rocegen runs with `--gid fd00::<i+1>` (the hosts' kernels
    /// keep IPv6 off; the out-of-band exchange stays on IPv4).
    #[arg(long)]
    ipv6: bool,
    /// Leave a lab built for this run in place.
    #[arg(long)]
    keep_lab: bool,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub(super) fn incast(args: &IncastArgs) -> ExitCode {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        if let Err(e) = signal_hook::flag::register(signal, Arc::clone(&stop)) {
            return LabError::Failed(format!("cannot install a signal handler: {e}")).exit();
        }
    }
    match run(args, &stop) {
        Ok(report) => {
            if args.json {
                match serde_json::to_string_pretty(&report) {
                    Ok(text) => crate::client::emit(format_args!("{text}\n")),
                    Err(e) => return LabError::Failed(format!("report: {e}")).exit(),
                }
            } else {
                crate::client::emit(format_args!("{}", report.to_text()));
            }
            if report.errors.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(super::EXIT_FAILED)
            }
        }
        Err(e) => e.exit(),
    }
}

/// Checks the arguments that clap cannot.
fn check_args(args: &IncastArgs) -> Result<(), LabError> {
    if !(1..MAX_HOSTS).contains(&args.senders) {
        return Err(LabError::Refused(format!(
            "--senders {}: 1..={} (the lab has at most {MAX_HOSTS} hosts)",
            args.senders,
            MAX_HOSTS - 1
        )));
    }
    if !(args.duration > 0.0 && args.duration <= 3600.0) {
        return Err(LabError::Refused(format!(
            "--duration {}: (0, 3600] seconds",
            args.duration
        )));
    }
    if args.iters == Some(0) {
        return Err(LabError::Refused("--iters must be at least 1".into()));
    }
    if args.size == 0 {
        return Err(LabError::Refused("--size must be at least 1".into()));
    }
    if !(1..=65_536).contains(&args.tx_depth) {
        return Err(LabError::Refused("--tx-depth: 1..=65536".into()));
    }
    Ok(())
}

/// The lab as the experiment found it, restored on drop.
#[derive(Debug)]
struct LabRestore {
    prefix: String,
    /// Hosts it had (None: there was no lab).
    hosts_before: Option<usize>,
    /// Hosts the experiment built.
    hosts_now: usize,
    keep: bool,
}

impl Drop for LabRestore {
    fn drop(&mut self) {
        match self.hosts_before {
            None if !self.keep => {
                for name in lab_namespaces(&self.prefix) {
                    if let Err(e) = ip(&["netns", "del", &name], None) {
                        eprintln!("warning: removing {name}: {e}");
                    }
                }
            }
            Some(before) if before < self.hosts_now => {
                // `build` removes the hosts of an earlier, larger lab: ours.
                let spec = LabSpec::new(&self.prefix, before.max(2), "1G");
                if let Err(e) = build(&spec) {
                    eprintln!("warning: restoring the lab's {before} hosts: {e}");
                }
            }
            _ => {}
        }
    }
}

/// Hosts of an existing lab (one more than the highest `P-h<i>`), or None.
fn existing_hosts(prefix: &str) -> Option<usize> {
    let names = lab_namespaces(prefix);
    if names.is_empty() {
        return None;
    }
    let head = format!("{prefix}-h");
    Some(
        names
            .iter()
            .filter_map(|n| n.strip_prefix(&head)?.parse::<usize>().ok())
            .map(|i| i + 1)
            .max()
            .unwrap_or(0),
    )
}

/// Where rocegen is.
pub(crate) fn find_rocegen(explicit: Option<&Path>) -> Result<PathBuf, LabError> {
    if let Some(path) = explicit {
        return if path.is_file() {
            Ok(path.to_owned())
        } else {
            Err(LabError::Refused(format!(
                "--rocegen {}: no such file",
                path.display()
            )))
        };
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("rocegen")));
    if let Some(path) = beside.filter(|p| p.is_file()) {
        return Ok(path);
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join("rocegen"))
                .find(|p| p.is_file())
        })
        .ok_or_else(|| {
            LabError::Refused(
                "rocegen not found next to headroom nor on the PATH: build it \
                 (`cargo build --release -p headroom-rocegen`) or pass --rocegen PATH"
                    .into(),
            )
        })
}

/// Whether a program is on the PATH.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Collects a pipe into a shared string on a thread, so that the child never blocks on it.
fn collect(pipe: Option<impl Read + Send + 'static>) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    if let Some(mut pipe) = pipe {
        let sink = Arc::clone(&text);
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut s) = sink.lock() {
                    s.push_str(&String::from_utf8_lossy(&buf[..n]));
                }
            }
        });
    }
    text
}

fn read_shared(text: &Arc<Mutex<String>>) -> String {
    text.lock().map(|s| s.clone()).unwrap_or_default()
}

/// A child process with its output collected; killed on drop if it still runs.
#[derive(Debug)]
struct Proc {
    what: String,
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
    status: Option<std::process::ExitStatus>,
}

impl Proc {
    fn spawn(what: &str, mut command: Command) -> Result<Self, LabError> {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .map_err(|e| LabError::Failed(format!("cannot start {what}: {e}")))?;
        let stdout = collect(child.stdout.take());
        let stderr = collect(child.stderr.take());
        Ok(Self {
            what: what.to_owned(),
            child,
            stdout,
            stderr,
            status: None,
        })
    }

    /// Whether it has exited (and reaps it).
    fn exited(&mut self) -> bool {
        if self.status.is_none() {
            if let Ok(Some(status)) = self.child.try_wait() {
                self.status = Some(status);
            }
        }
        self.status.is_some()
    }

    fn signal(&self, signal: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_child(&self.child);
        let _ = rustix::process::kill_process(pid, signal);
    }

    /// Waits for the exit, at most `timeout` (or until `stop` is set).
    fn wait(&mut self, timeout: Duration, stop: Option<&AtomicBool>) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.exited() {
            if Instant::now() >= deadline || stop.is_some_and(|s| s.load(Ordering::Relaxed)) {
                return false;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The reader threads see EOF right after the exit; give them a moment.
        std::thread::sleep(Duration::from_millis(20));
        true
    }

    fn stdout(&self) -> String {
        read_shared(&self.stdout)
    }

    fn stderr(&self) -> String {
        read_shared(&self.stderr)
    }

    /// The last lines of its stderr, for error messages.
    fn stderr_tail(&self) -> String {
        let text = self.stderr();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if !self.exited() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One `show` request on the switch's control socket, through the CLI's one client.
fn request<T: serde::de::DeserializeOwned>(socket: &Path, what: Show) -> Result<T, String> {
    crate::client::Target::for_socket(socket.to_owned())
        .fetch(&Request::Show { what })
        .map(|(typed, _raw)| typed)
}

/// CPU time of every thread of a process, ticks by thread name.
fn thread_ticks(pid: u32) -> BTreeMap<String, u64> {
    let mut ticks = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return ticks;
    };
    for task in dir.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        if let Some((name, used)) = stat_ticks(&stat) {
            ticks.insert(
                format!("{name}/{}", task.file_name().to_string_lossy()),
                used,
            );
        }
    }
    ticks
}

/// A thread's name and CPU time (user + system ticks) from its `/proc/.../stat` line.
fn stat_ticks(stat: &str) -> Option<(&str, u64)> {
    // `pid (comm) state ...`: the name may hold spaces and parentheses, the fields after the
    // last ')' do not. utime and stime are fields 14 and 15 (proc(5)), the 12th and 13th after
    // the ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let name = stat.get(open + 1..close)?;
    let mut fields = stat.get(close + 1..)?.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((name, user + system))
}

/// The busiest thread between two samples: (name, percent of one CPU).
fn busiest_thread(
    before: &BTreeMap<String, u64>,
    after: &BTreeMap<String, u64>,
    elapsed: Duration,
) -> Option<(String, f64)> {
    let seconds = elapsed.as_secs_f64().max(1e-3);
    after
        .iter()
        .map(|(name, &t)| {
            let used = t.saturating_sub(before.get(name).copied().unwrap_or(0));
            let name = name.rsplit_once('/').map_or(name.as_str(), |(n, _)| n);
            (name.to_owned(), used as f64 / USER_HZ / seconds * 100.0)
        })
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

// ---- the report ---------------------------------------------------------------------------------

/// What was run.
#[derive(Clone, Debug, Serialize)]
struct Setup {
    prefix: String,
    senders: usize,
    /// The receiver's host index (senders are 0..senders).
    receiver_host: usize,
    speed_mbps: u64,
    size_bytes: u32,
    duration_s: Option<f64>,
    iterations: Option<u64>,
    tx_depth: usize,
    dcqcn: &'static str,
    dcqcn_timescale: &'static str,
    ecn: bool,
    ecn_min_bytes: u64,
    ecn_max_bytes: u64,
    ecn_probability_percent: u8,
    trust: &'static str,
    /// RoCEv2 over IPv6 (`--ipv6`).
    ipv6: bool,
    dscp: u8,
    pcp: Option<u8>,
    /// Priority of data (rocegen's: the PCP, else from the DSCP).
    priority: u8,
    /// Whether PFC is enabled for that priority on the switch.
    lossless: bool,
    /// Ingress PG and egress queue the data maps to.
    pg: usize,
    queue: usize,
    /// Headroom (profile xoff) of the lossless PG, and the XON threshold, bytes.
    xoff_bytes: u64,
    xon_bytes: u64,
    /// Link rate covered by the headroom: xoff / speed, ms.
    xoff_ms_of_line_rate: f64,
    switch_rt_priority: u8,
    rocegen: String,
    config: String,
}

/// One sender.
#[derive(Clone, Debug, Default, Serialize)]
struct Flow {
    host: usize,
    ip: String,
    port: String,
    /// Goodput: payload of the messages completed (in the duration), Mb/s.
    goodput_mbps: f64,
    messages: u64,
    /// Data packets sent, retransmissions included.
    data_packets_sent: u64,
    retransmitted_packets: u64,
    retransmission_timeouts: u64,
    naks_received: u64,
    /// PFC frames the host received per priority (XOFF and XON).
    host_pfc_rx: [u64; 8],
    host_pfc_xoff_rx: u64,
    host_pfc_xon_rx: u64,
    /// Time the data priority was paused, ms.
    paused_ms: f64,
    /// PFC frames the switch sent on this host's port per priority.
    switch_pfc_tx: [u64; 8],
    /// Every priority: the host received what the switch sent.
    pfc_agree: bool,
    cnps_received: u64,
    dcqcn_rate_cuts: u64,
    dcqcn_min_rate_mbps: f64,
    /// Frames the host's kernel dropped because rocegen's ring was full.
    host_rx_ring_drops: u64,
    /// Worst scheduling delay rocegen saw, ms.
    max_wake_lateness_ms: f64,
    /// PG of the data: highest shared use and highest headroom use, bytes.
    pg_shared_watermark_bytes: u64,
    pg_headroom_watermark_bytes: u64,
    error: Option<String>,
}

/// The receiver.
#[derive(Clone, Debug, Default, Serialize)]
struct Receiver {
    host: usize,
    ip: String,
    port: String,
    /// What it received, first to last delivery, Mb/s.
    goodput_mbps: f64,
    messages_delivered: u64,
    ecn_ce_received: u64,
    cnps_sent: u64,
    out_of_sequence_packets: u64,
    host_rx_ring_drops: u64,
    error: Option<String>,
}

/// One switch port.
#[derive(Clone, Debug, Default, Serialize)]
struct PortCounters {
    port: String,
    pfc_tx: [u64; 8],
    pfc_rx: [u64; 8],
    /// Frames sent per egress queue.
    queue_packets: [u64; 8],
    ecn_marked: [u64; 8],
    queue_watermark_bytes: [u64; 8],
    /// Frames the kernel dropped before the switch read them.
    rx_missed: u64,
    drops: BTreeMap<String, u64>,
}

/// Drops of the lossless class anywhere in the switch.
#[derive(Clone, Debug, Default, Serialize)]
struct LosslessDrops {
    ingress_headroom_exhausted: u64,
    /// Drops counted on lossless PGs (any reason, headroom exhaustion included).
    lossless_pg_drops: u64,
    /// Drops counted on lossless egress queues (any reason).
    lossless_queue_drops: u64,
    /// Frames lost before the switch saw them (kernel ring full), on any port.
    rx_missed: u64,
    total: u64,
}

/// The switch's side.
#[derive(Clone, Debug, Default, Serialize)]
struct SwitchSide {
    ports: Vec<PortCounters>,
    pfc_tx_total: u64,
    /// CE marks on the bottleneck queue (receiver's port, data queue).
    ecn_marked_bottleneck: u64,
    /// Highest depth of the bottleneck queue, bytes.
    bottleneck_queue_watermark_bytes: u64,
    lossless_drops: LosslessDrops,
    /// Busiest thread of the switch (its lcore) over the traffic, percent of one CPU.
    busiest_thread: String,
    busiest_thread_cpu_percent: f64,
}

/// Aggregates and checks.
#[derive(Clone, Debug, Default, Serialize)]
struct Summary {
    aggregate_goodput_mbps: f64,
    /// What the bottleneck port carries as WRITE payload at most, Mb/s.
    bottleneck_payload_capacity_mbps: f64,
    goodput_fraction_of_capacity: f64,
    /// Jain's fairness index of the flows' goodputs: (Σx)² / (n Σx²), 1 = equal shares.
    jain_fairness: Option<f64>,
    retransmitted_packets: u64,
    host_pfc_rx_total: u64,
    cnps_sent: u64,
    cnps_received: u64,
    /// No lossless drop in the switch and no retransmission.
    lossless: bool,
    /// Every sender received exactly the PFC frames the switch sent it, per priority.
    pfc_agree: bool,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
struct Report {
    setup: Setup,
    flows: Vec<Flow>,
    receiver: Receiver,
    switch: SwitchSide,
    summary: Summary,
    /// What went wrong (rocegen errors, timeouts); empty when the experiment ran.
    errors: Vec<String>,
}

/// Host `host`'s RoCE address as configured: its GID with `--ipv6`, else its IPv4 address.
fn roce_addr(args: &IncastArgs, host: usize) -> String {
    if args.ipv6 {
        host_gid(host).to_string()
    } else {
        host_ipv4(host).to_string()
    }
}

/// Wire bytes of one WRITE of `size` bytes at path MTU `mtu`.
fn wire_bytes_per_message(size: u64, mtu: u64, tagged: bool, ipv6: bool) -> u64 {
    let mtu = mtu.max(1);
    let packets = size.div_ceil(mtu).max(1);
    let per_packet = ROCE_PACKET_OVERHEAD_BYTES
        + if tagged { VLAN_TAG_BYTES } else { 0 }
        + if ipv6 { IPV6_EXTRA_BYTES } else { 0 };
    // Payloads are padded to 4 bytes (BTH PadCnt); frames to the 64-byte Ethernet minimum.
    let last = size - (packets - 1) * mtu;
    let padded = |payload: u64, first: bool| {
        let frame = payload.div_ceil(4) * 4 + per_packet - 20 + if first { RETH_BYTES } else { 0 };
        frame.max(64 + if tagged { VLAN_TAG_BYTES } else { 0 }) + 20
    };
    if packets == 1 {
        padded(last, true)
    } else {
        padded(mtu, true) + (packets - 2) * padded(mtu, false) + padded(last, false)
    }
}

/// Whether the configuration lacks a port up to the receiver's (it never does: one per host).
fn switch_ports_short(config: &headroom_config::Config, receiver: usize) -> bool {
    config.ports.len() <= receiver
}

/// Jain's fairness index.
pub(crate) fn jain(xs: &[f64]) -> Option<f64> {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    (!xs.is_empty() && squares > 0.0).then(|| sum * sum / (xs.len() as f64 * squares))
}

impl Report {
    fn to_text(&self) -> String {
        let s = &self.setup;
        let mut t = String::new();
        let _ = writeln!(
            t,
            "headroom lab incast: {} sender(s) -> h{} through lab {:?} at {} Mb/s",
            s.senders, s.receiver_host, s.prefix, s.speed_mbps
        );
        let shape = match (s.duration_s, s.iterations) {
            (_, Some(n)) => format!("{n} WRITEs of {} B per sender", s.size_bytes),
            (Some(d), None) => format!("{d} s of WRITEs of {} B", s.size_bytes),
            (None, None) => String::new(),
        };
        let _ = writeln!(
            t,
            "  {shape}{}, tx-depth {}; DCQCN {} ({} timescale); ECN {}; trust {}, DSCP {}{}, \
             priority {} ({}), PG {}, queue {}",
            if s.ipv6 { " over IPv6" } else { "" },
            s.tx_depth,
            s.dcqcn,
            s.dcqcn_timescale,
            if s.ecn {
                format!(
                    "on ({}..{} B, {} %)",
                    s.ecn_min_bytes, s.ecn_max_bytes, s.ecn_probability_percent
                )
            } else {
                "off".into()
            },
            s.trust,
            s.dscp,
            s.pcp.map(|p| format!(", PCP {p}")).unwrap_or_default(),
            s.priority,
            if s.lossless { "lossless" } else { "LOSSY" },
            s.pg,
            s.queue,
        );
        let _ = writeln!(
            t,
            "  headroom xoff {} B ({:.1} ms of line rate), xon {} B; switch {}",
            s.xoff_bytes,
            s.xoff_ms_of_line_rate,
            s.xon_bytes,
            if s.switch_rt_priority > 0 {
                format!("SCHED_FIFO {}", s.switch_rt_priority)
            } else {
                "SCHED_OTHER".into()
            }
        );
        let _ = writeln!(t);
        let mut flows = Table::new([
            "Flow",
            "Port",
            "Goodput Mb/s",
            "Msgs",
            "Retx",
            "PFC rx",
            "PFC tx (switch)",
            "Paused ms",
            "CNPs rx",
            "Min rate Mb/s",
            "PG max B",
            "Headroom max B",
        ]);
        let p = usize::from(s.priority & 7);
        for f in &self.flows {
            flows.row([
                format!("h{}", f.host),
                f.port.clone(),
                format!("{:.2}", f.goodput_mbps),
                thousands(f.messages),
                thousands(f.retransmitted_packets),
                thousands(f.host_pfc_rx[p]),
                format!(
                    "{}{}",
                    thousands(f.switch_pfc_tx[p]),
                    if f.pfc_agree { "" } else { " (!)" }
                ),
                format!("{:.1}", f.paused_ms),
                thousands(f.cnps_received),
                format!("{:.2}", f.dcqcn_min_rate_mbps),
                thousands(f.pg_shared_watermark_bytes),
                thousands(f.pg_headroom_watermark_bytes),
            ]);
        }
        let _ = write!(t, "{flows}");
        let r = &self.receiver;
        let _ = writeln!(
            t,
            "\nReceiver h{} ({}): {:.2} Mb/s received, {} messages, {} CE-marked packets, {} CNPs \
             sent, {} out of sequence",
            r.host,
            r.port,
            r.goodput_mbps,
            thousands(r.messages_delivered),
            thousands(r.ecn_ce_received),
            thousands(r.cnps_sent),
            thousands(r.out_of_sequence_packets),
        );
        let m = &self.summary;
        let w = &self.switch;
        let _ = writeln!(
            t,
            "\nGoodput {:.2} Mb/s = {:.1} % of the {:.2} Mb/s of WRITE payload the bottleneck \
             carries; Jain's fairness {}",
            m.aggregate_goodput_mbps,
            m.goodput_fraction_of_capacity * 100.0,
            m.bottleneck_payload_capacity_mbps,
            m.jain_fairness
                .map_or_else(|| "n/a".to_owned(), |j| format!("{j:.4}")),
        );
        let _ = writeln!(
            t,
            "PFC: the switch sent {} frames, the senders received {} ({}); CNPs: {} sent, {} \
             received; ECN: {} CE marks on the bottleneck queue",
            thousands(w.pfc_tx_total),
            thousands(m.host_pfc_rx_total),
            if m.pfc_agree {
                "every sender exactly what its port sent"
            } else {
                "MISMATCH"
            },
            thousands(m.cnps_sent),
            thousands(m.cnps_received),
            thousands(w.ecn_marked_bottleneck),
        );
        let d = &w.lossless_drops;
        let _ = writeln!(
            t,
            "Lossless: {} drops in the switch (headroom exhausted {}, PG {}, queue {}, kernel \
             ring {}), {} retransmissions: {}",
            thousands(d.total),
            thousands(d.ingress_headroom_exhausted),
            thousands(d.lossless_pg_drops),
            thousands(d.lossless_queue_drops),
            thousands(d.rx_missed),
            thousands(m.retransmitted_packets),
            if m.lossless { "lossless" } else { "LOSSES" },
        );
        let _ = writeln!(
            t,
            "Bottleneck queue ({} queue {}): max {} B; switch's busiest thread {} at {:.0} % of \
             a CPU",
            self.receiver.port,
            s.queue,
            thousands(w.bottleneck_queue_watermark_bytes),
            w.busiest_thread,
            w.busiest_thread_cpu_percent,
        );
        if let Some(rq) = w.ports.get(self.receiver.host).map(|p| p.queue_packets) {
            let _ = writeln!(
                t,
                "Frames sent to the receiver per queue: {}",
                rq.iter()
                    .enumerate()
                    .map(|(q, n)| format!("UC{q} {}", thousands(*n)))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        let mut pfc = Table::new(
            std::iter::once("Port Tx".to_owned()).chain((0..8).map(|p| format!("PFC{p}"))),
        );
        for port in &w.ports {
            pfc.row(
                std::iter::once(port.port.clone()).chain(port.pfc_tx.iter().map(|n| thousands(*n))),
            );
        }
        let _ = write!(t, "\n{pfc}");
        let drops: Vec<String> = w
            .ports
            .iter()
            .flat_map(|p| {
                p.drops
                    .iter()
                    .map(move |(reason, n)| format!("{} {reason} {n}", p.port))
            })
            .collect();
        if !drops.is_empty() {
            let _ = writeln!(t, "\nDrops: {}", drops.join(", "));
        }
        for e in &self.errors {
            let _ = writeln!(t, "\nerror: {e}");
        }
        t
    }
}

// ---- the experiment -----------------------------------------------------------------------------

/// Everything that runs, so that it is all stopped (in this order) whatever happens.
#[derive(Debug)]
struct Running {
    rocegen: Vec<Proc>,
    switch: Option<Proc>,
    config_path: PathBuf,
    // Dropped last: the lab is restored once nothing runs on it.
    _restore: LabRestore,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.rocegen.clear();
        if let Some(mut switch) = self.switch.take() {
            if !switch.exited() {
                switch.signal(rustix::process::Signal::TERM);
                switch.wait(SWITCH_STOP_TIMEOUT, None);
            }
        }
        let _ = std::fs::remove_file(&self.config_path);
    }
}

fn run(args: &IncastArgs, stop: &AtomicBool) -> Result<Report, LabError> {
    check_args(args)?;
    let receiver = args.senders;
    let needed = args.senders + 1;
    super::config::check_prefix(&args.prefix).map_err(LabError::Refused)?;
    let hosts_before = existing_hosts(&args.prefix);
    let hosts = hosts_before.unwrap_or(0).max(needed).max(2);
    let mut spec = LabSpec::new(&args.prefix, hosts, &args.speed);
    spec.check().map_err(LabError::Refused)?;
    spec.ecn_enabled = args.ecn == OnOff::On;
    // The experiment's switch counts only the experiment's frames (its report compares them
    // with the hosts'): no LLDPDUs.
    spec.lldp = false;
    if args.pcp.is_some() {
        spec.trust = LabTrust::Dot1p;
    }
    let text = spec.config_toml();
    let config_path = PathBuf::from(format!("{RUN_DIR}/{}-incast.toml", spec.prefix));
    let (config, _warnings) = headroom_config::parse(&text, &config_path.display().to_string())
        .map_err(
            |e| match e.errors.iter().find(|d| d.key == "port_defaults.speed") {
                Some(d) => LabError::Refused(format!("--speed {}: {}", args.speed, d.message)),
                None => LabError::Refused(format!("the generated configuration is refused:\n{e}")),
            },
        )?;
    check_privileges()?;
    let rocegen = find_rocegen(args.rocegen.as_deref())?;
    if args.rt_priority > 0 && !on_path("chrt") {
        return Err(LabError::Refused(
            "chrt (util-linux) is needed to run the switch SCHED_FIFO; install it or pass \
             --rt-priority 0"
                .into(),
        ));
    }
    let switch_ns = switch_namespace(&spec.prefix);
    if let Some(pids) = namespace_pids(&switch_ns)?.filter(|p| !p.is_empty()) {
        return Err(LabError::Refused(format!(
            "a switch already runs in namespace {switch_ns} (pid {}); stop it first: the \
             incast runs its own",
            pids.join(", ")
        )));
    }
    let restore = LabRestore {
        prefix: spec.prefix.clone(),
        hosts_before,
        hosts_now: hosts,
        keep: args.keep_lab,
    };
    build(&spec)?;
    super::write_config(&config_path, &text)?;
    let mut running = Running {
        rocegen: Vec::new(),
        switch: None,
        config_path: config_path.clone(),
        _restore: restore,
    };

    // The switch.
    let exe = std::env::current_exe()
        .map_err(|e| LabError::Failed(format!("cannot find this headroom binary: {e}")))?;
    let mut command = Command::new("ip");
    command.args(["netns", "exec", &switch_ns]);
    if args.rt_priority > 0 {
        command.args(["chrt", "--fifo", &args.rt_priority.to_string()]);
    }
    command
        .arg(&exe)
        .args(["run", "--log-format", "text", "-c"])
        .arg(&config_path)
        .env("NO_COLOR", "1");
    running.switch = Some(Proc::spawn("the switch", command)?);
    let switch = running
        .switch
        .as_mut()
        .ok_or_else(|| LabError::Failed("no switch".into()))?;
    let started = Instant::now();
    while !switch.stderr().contains("headroom running") {
        if switch.exited() || started.elapsed() > SWITCH_START_TIMEOUT {
            return Err(LabError::Failed(format!(
                "the switch did not start:\n{}",
                switch.stderr_tail()
            )));
        }
        if stop.load(Ordering::Relaxed) {
            return Err(LabError::Failed("interrupted".into()));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let switch_pid = switch.child.id();
    let socket = config.runtime.control_socket.clone();

    // rocegen: the server first (clients retry their connection for 10 s).
    let speed_mbps = config.ports.first().map_or(0, |p| p.speed_mbps);
    let mut common: Vec<String> = vec![
        "write_bw".into(),
        "-d".into(),
        HOST_DEVICE.into(),
        "--link-speed".into(),
        format!("{speed_mbps}M"),
        "--tclass".into(),
        (args.dscp << 2).to_string(),
        "--dcqcn".into(),
        args.dcqcn.as_str().into(),
        "--json".into(),
    ];
    if let Some(pcp) = args.pcp {
        common.extend(["--vlan".into(), "0".into(), "--pcp".into(), pcp.to_string()]);
    }
    if args.dcqcn_timescale == Timescale::Lab {
        common.extend(lab_timescale_args(args.dcqcn));
    }
    common.extend(args.rocegen_args.iter().cloned());
    let rocegen_command = |host: usize, extra: &[String]| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &host_namespace(&spec.prefix, host)])
            .args(["nice", "-n", ROCEGEN_NICE])
            .arg(&rocegen)
            .args(&common)
            .args(extra);
        if args.ipv6 {
            c.args(["--gid", &host_gid(host).to_string()]);
        }
        c
    };
    let ticks_before = thread_ticks(switch_pid);
    let traffic_started = Instant::now();
    running.rocegen.push(Proc::spawn(
        "the rocegen server",
        rocegen_command(receiver, &["--clients".into(), args.senders.to_string()]),
    )?);
    let mut shape = vec![
        "-s".to_owned(),
        args.size.to_string(),
        "-t".to_owned(),
        args.tx_depth.to_string(),
    ];
    match args.iters {
        Some(n) => shape.extend(["-n".to_owned(), n.to_string()]),
        None => shape.extend(["-D".to_owned(), args.duration.to_string()]),
    }
    for host in 0..args.senders {
        let mut extra = vec![host_ipv4(receiver).to_string()];
        extra.extend(shape.iter().cloned());
        running.rocegen.push(Proc::spawn(
            &format!("rocegen on h{host}"),
            rocegen_command(host, &extra),
        )?);
    }
    // How long the traffic should take: the duration, or every message at the fair share.
    let traffic = match args.iters {
        Some(n) => {
            let bytes = n as f64 * f64::from(args.size) * args.senders as f64;
            Duration::from_secs_f64(3.0 * bytes * 8.0 / (speed_mbps.max(1) as f64 * 1e6))
        }
        None => Duration::from_secs_f64(args.duration),
    };
    let deadline = traffic_started + traffic + ROCEGEN_SLACK;
    let mut errors = Vec::new();
    for proc in &mut running.rocegen {
        let left = deadline.saturating_duration_since(Instant::now());
        if !proc.wait(left, Some(stop)) {
            if stop.load(Ordering::Relaxed) {
                return Err(LabError::Failed("interrupted".into()));
            }
            errors.push(format!(
                "{} did not finish within {:?}:\n{}",
                proc.what,
                traffic + ROCEGEN_SLACK,
                proc.stderr_tail()
            ));
        }
    }
    let traffic_time = traffic_started.elapsed();
    let ticks_after = thread_ticks(switch_pid);
    // Kill what still runs before reading the counters.
    running.rocegen.iter_mut().for_each(|p| {
        if !p.exited() {
            let _ = p.child.kill();
        }
    });
    let reports: Vec<Option<RocegenReport>> = running
        .rocegen
        .iter_mut()
        .map(|p| {
            p.exited();
            let status = p.status.map_or("killed".into(), |s| s.to_string());
            read_rocegen_report(&p.what, &status, &p.stdout(), &p.stderr_tail())
                .map_err(|e| errors.push(e))
                .ok()
        })
        .collect();

    // The switch's counters, before it stops.
    let query = |e: String| LabError::Failed(format!("reading the switch's counters: {e}"));
    let snapshot: Snapshot = request(&socket, Show::Snapshot).map_err(query)?;
    let queue_marks: Vec<WatermarkRow> = request(
        &socket,
        Show::QueueWatermark {
            persistent: true,
            kind: QueueWatermarkKind::Total,
        },
    )
    .map_err(query)?;
    let pg_shared: Vec<WatermarkRow> = request(
        &socket,
        Show::PgWatermark {
            kind: PgWatermarkKind::Shared,
            persistent: true,
        },
    )
    .map_err(query)?;
    let pg_headroom: Vec<WatermarkRow> = request(
        &socket,
        Show::PgWatermark {
            kind: PgWatermarkKind::Headroom,
            persistent: true,
        },
    )
    .map_err(query)?;
    let pg_drops: Vec<PgDropRow> = request(&socket, Show::PgDrop).map_err(query)?;
    drop(running);
    assemble(Collected {
        args,
        spec: &spec,
        config: &config,
        config_path: &config_path,
        rocegen: &rocegen,
        reports,
        switch: SwitchCounters {
            snapshot,
            queue_marks,
            pg_shared,
            pg_headroom,
            pg_drops,
        },
        busiest: busiest_thread(&ticks_before, &ticks_after, traffic_time),
        errors,
    })
}

/// The switch's counters at the end of the traffic.
#[derive(Debug, Default)]
struct SwitchCounters {
    snapshot: Snapshot,
    queue_marks: Vec<WatermarkRow>,
    pg_shared: Vec<WatermarkRow>,
    pg_headroom: Vec<WatermarkRow>,
    pg_drops: Vec<PgDropRow>,
}

/// Everything a run collected: what the report is made from.
#[derive(Debug)]
struct Collected<'a> {
    args: &'a IncastArgs,
    spec: &'a LabSpec,
    config: &'a headroom_config::Config,
    config_path: &'a Path,
    rocegen: &'a Path,
    /// The receiver's rocegen report first, then each sender's (None: it printed none, or one
    /// that does not read).
    reports: Vec<Option<RocegenReport>>,
    switch: SwitchCounters,
    /// The switch's busiest thread over the traffic and its share of a CPU, percent.
    busiest: Option<(String, f64)>,
    /// Failures so far.
    errors: Vec<String>,
}

/// The report a rocegen process printed (`--json`), or the error that says why there is none: it
/// printed nothing (with the end of its stderr), or a report that does not read (a field renamed
/// or gone in another rocegen version: the error names it).
fn read_rocegen_report(
    what: &str,
    status: &str,
    stdout: &str,
    stderr_tail: &str,
) -> Result<RocegenReport, String> {
    if stdout.trim().is_empty() {
        return Err(format!(
            "{what} printed no report ({status}):\n{stderr_tail}"
        ));
    }
    RocegenReport::from_json(stdout)
        .map_err(|e| format!("{what}: its report does not read ({status}): {e}"))
}

/// What the incast needs of a rocegen report beyond its types: every priority's counters and
/// the bandwidth row (a write_bw report has exactly one). `None` when it has them.
fn report_shape_error(report: &RocegenReport) -> Option<String> {
    if let Some(p) = (0..8).find(|&p| report.priority(p).is_none()) {
        return Some(format!(
            "its report has no counters.priorities entry for priority {p}"
        ));
    }
    if report.bw.is_empty() {
        return Some("its report has no bw row".into());
    }
    None
}

/// The report, from what the run collected.
fn assemble(c: Collected<'_>) -> Result<Report, LabError> {
    let Collected {
        args,
        spec,
        config,
        config_path,
        rocegen,
        reports,
        switch,
        busiest,
        mut errors,
    } = c;
    let SwitchCounters {
        snapshot,
        queue_marks,
        pg_shared,
        pg_headroom,
        pg_drops,
    } = switch;
    let receiver = args.senders;
    let speed_mbps = config.ports.first().map_or(0, |p| p.speed_mbps);
    for (i, report) in reports.iter().enumerate() {
        let who = if i == 0 {
            format!("h{receiver} (receiver)")
        } else {
            format!("h{}", i - 1)
        };
        if let Some(e) = report.as_ref().and_then(report_shape_error) {
            errors.push(format!("rocegen on {who}: {e}"));
        }
    }
    let port0 = config
        .ports
        .first()
        .ok_or_else(|| LabError::Failed("no port".into()))?;
    // A report without what the incast reads counts as none (its error is recorded above).
    let usable = |r: &Option<RocegenReport>| r.clone().filter(|r| report_shape_error(r).is_none());
    let server = reports.first().and_then(usable);
    let clients: Vec<Option<RocegenReport>> = reports.iter().skip(1).map(usable).collect();
    let any = server.iter().chain(clients.iter().flatten()).next();
    let priority = any.map_or_else(|| args.pcp.unwrap_or(args.dscp), |r| r.priority);
    let tc = match spec.trust {
        LabTrust::Dscp => port0.maps.dscp_to_tc[usize::from(args.dscp)],
        LabTrust::Dot1p => port0.maps.dot1p_to_tc[usize::from(args.pcp.unwrap_or(0))],
    };
    let pg = usize::from(port0.maps.tc_to_pg[usize::from(tc & 7)]);
    let queue = usize::from(port0.maps.tc_to_queue[usize::from(tc & 7)]);
    let headroom_values = port0.computed_headroom;
    let setup = Setup {
        prefix: spec.prefix.clone(),
        senders: args.senders,
        receiver_host: receiver,
        speed_mbps,
        size_bytes: args.size,
        duration_s: args.iters.is_none().then_some(args.duration),
        iterations: args.iters,
        tx_depth: args.tx_depth,
        dcqcn: args.dcqcn.as_str(),
        dcqcn_timescale: match args.dcqcn_timescale {
            Timescale::Lab => "lab",
            Timescale::Nic => "nic",
        },
        ecn: spec.ecn_enabled,
        ecn_min_bytes: spec.ecn.min_bytes,
        ecn_max_bytes: spec.ecn.max_bytes,
        ecn_probability_percent: spec.ecn.probability_percent,
        trust: spec.trust.as_str(),
        ipv6: args.ipv6,
        dscp: args.dscp,
        pcp: args.pcp,
        priority,
        lossless: port0.pfc_enable.contains(priority) && port0.priority_groups[pg].is_lossless(),
        pg,
        queue,
        xoff_bytes: headroom_values.xoff_bytes,
        xon_bytes: headroom_values.xon_bytes,
        xoff_ms_of_line_rate: headroom_values.xoff_bytes as f64 * 8.0
            / (speed_mbps.max(1) as f64 * 1e6)
            * 1e3,
        switch_rt_priority: args.rt_priority,
        rocegen: rocegen.display().to_string(),
        config: config_path.display().to_string(),
    };
    if switch_ports_short(config, receiver) {
        return Err(LabError::Failed(
            "the configuration has fewer ports than hosts".into(),
        ));
    }

    // Switch side.
    let row = |rows: &[WatermarkRow], port: &str| {
        rows.iter()
            .find(|r| r.port == port)
            .map_or([0; 8], |r| r.bytes)
    };
    let mut ports = Vec::new();
    let mut drops = LosslessDrops::default();
    for (i, port) in config.ports.iter().enumerate() {
        let name = port.name.clone();
        let pfc = snapshot.pfc.iter().find(|p| p.port == name);
        let summary = snapshot.ports.iter().find(|p| p.port == name);
        let mut ecn_marked = [0; 8];
        let mut queue_packets = [0; 8];
        for q in snapshot.queues.iter().filter(|q| q.port == name) {
            if let Some(slot) = ecn_marked.get_mut(usize::from(q.queue)) {
                *slot = q.ecn_marked;
            }
            if let Some(slot) = queue_packets.get_mut(usize::from(q.queue)) {
                *slot = q.packets;
            }
            if port
                .queues
                .get(usize::from(q.queue))
                .is_some_and(|queue| queue.lossless)
            {
                drops.lossless_queue_drops += q.drop_packets;
            }
        }
        if let Some(row) = pg_drops.iter().find(|r| r.port == name) {
            for (pg, n) in row.drops.iter().enumerate() {
                if port.priority_groups[pg].is_lossless() {
                    drops.lossless_pg_drops += n;
                }
            }
        }
        let port_drops: BTreeMap<String, u64> =
            summary.map(|s| s.drops.clone()).unwrap_or_default();
        drops.ingress_headroom_exhausted += port_drops
            .get("ingress_headroom_exhausted")
            .copied()
            .unwrap_or(0);
        let rx_missed = summary.map_or(0, |s| s.backend_rx_missed);
        drops.rx_missed += rx_missed;
        debug_assert_eq!(name, port_name(i));
        ports.push(PortCounters {
            port: name.clone(),
            pfc_tx: pfc.map_or([0; 8], |p| p.tx),
            pfc_rx: pfc.map_or([0; 8], |p| p.rx),
            queue_packets,
            ecn_marked,
            queue_watermark_bytes: row(&queue_marks, &name),
            rx_missed,
            drops: port_drops,
        });
    }
    drops.total = drops.lossless_pg_drops + drops.lossless_queue_drops + drops.rx_missed;
    let receiver_port = port_name(receiver);
    let switch_side = SwitchSide {
        pfc_tx_total: ports.iter().map(|p| p.pfc_tx.iter().sum::<u64>()).sum(),
        ecn_marked_bottleneck: ports[receiver].ecn_marked[queue],
        bottleneck_queue_watermark_bytes: ports[receiver].queue_watermark_bytes[queue],
        lossless_drops: drops,
        busiest_thread: busiest.as_ref().map_or_else(String::new, |b| b.0.clone()),
        busiest_thread_cpu_percent: busiest.map_or(0.0, |b| b.1),
        ports,
    };

    // Flows.
    let mut flows = Vec::new();
    for (host, report) in clients.iter().enumerate() {
        let port = port_name(host);
        let switch_pfc_tx = switch_side.ports[host].pfc_tx;
        let mut flow = Flow {
            host,
            ip: roce_addr(args, host),
            port: port.clone(),
            switch_pfc_tx,
            pg_shared_watermark_bytes: row(&pg_shared, &port)[pg],
            pg_headroom_watermark_bytes: row(&pg_headroom, &port)[pg],
            error: Some("no report".into()),
            ..Flow::default()
        };
        if let Some(r) = report {
            let c = &r.counters;
            // The address rocegen sent from, as it reports it.
            flow.ip.clone_from(&r.local.ip);
            // report_shape_error checked that these are there.
            let bw = r.bw.first().copied();
            flow.goodput_mbps = bw.map_or(0.0, |b| b.bw_average_gbit_per_sec) * 1e3;
            flow.messages = bw.map_or(0, |b| b.iterations);
            flow.data_packets_sent = c.data_packets_sent;
            flow.retransmitted_packets = c.retransmitted_packets;
            flow.retransmission_timeouts = c.retransmission_timeouts;
            flow.naks_received = c.naks_received;
            for (p, slot) in (0u8..).zip(flow.host_pfc_rx.iter_mut()) {
                *slot = r.priority(p).map_or(0, |s| s.pfc_frames_rx);
            }
            let data = r.priority(priority).copied().unwrap_or_default();
            flow.host_pfc_xoff_rx = data.pfc_xoff_rx;
            flow.host_pfc_xon_rx = data.pfc_xon_rx;
            flow.paused_ms = data.paused_ns as f64 / 1e6;
            flow.cnps_received = c.cnps_received;
            flow.dcqcn_rate_cuts = r.qp.iter().map(|q| q.rate_cuts).sum();
            flow.dcqcn_min_rate_mbps =
                r.qp.iter().map(|q| q.min_rate_bps).min().unwrap_or(0) as f64 / 1e6;
            flow.host_rx_ring_drops = c.rx_ring_drops;
            // Absent only when the run failed before its loop started (then `error` says why).
            flow.max_wake_lateness_ms = r.driver.map_or(0, |d| d.max_wake_lateness_ns) as f64 / 1e6;
            flow.error.clone_from(&r.error);
        }
        flow.pfc_agree = report.is_some() && flow.host_pfc_rx == switch_pfc_tx;
        if let (Some(_), Some(e)) = (report, &flow.error) {
            errors.push(format!("rocegen on h{host}: {e}"));
        }
        flows.push(flow);
    }
    let mut receiver_report = Receiver {
        host: receiver,
        ip: roce_addr(args, receiver),
        port: receiver_port,
        error: Some("no report".into()),
        ..Receiver::default()
    };
    if let Some(r) = &server {
        let c = &r.counters;
        receiver_report.ip.clone_from(&r.local.ip);
        receiver_report.goodput_mbps =
            r.bw.first().map_or(0.0, |b| b.bw_average_gbit_per_sec) * 1e3;
        receiver_report.messages_delivered = c.messages_delivered;
        receiver_report.ecn_ce_received = c.ecn_ce_received;
        receiver_report.cnps_sent = c.cnps_sent;
        receiver_report.out_of_sequence_packets = c.out_of_sequence_packets;
        receiver_report.host_rx_ring_drops = c.rx_ring_drops;
        receiver_report.error.clone_from(&r.error);
    }
    if let (Some(_), Some(e)) = (&server, &receiver_report.error) {
        errors.push(format!("rocegen on h{receiver} (receiver): {e}"));
    }

    // Summary.
    let goodputs: Vec<f64> = flows.iter().map(|f| f.goodput_mbps).collect();
    let aggregate: f64 = goodputs.iter().sum();
    let mtu = any.map_or(1024, |r| u64::from(r.mtu_bytes));
    // The bottleneck is the receiver's port, an access port: frames leave it untagged.
    let wire = wire_bytes_per_message(u64::from(args.size), mtu, false, args.ipv6);
    let capacity = speed_mbps as f64 * f64::from(args.size) / wire as f64;
    let retransmitted: u64 = flows.iter().map(|f| f.retransmitted_packets).sum();
    let summary = Summary {
        aggregate_goodput_mbps: aggregate,
        bottleneck_payload_capacity_mbps: capacity,
        goodput_fraction_of_capacity: aggregate / capacity.max(f64::MIN_POSITIVE),
        jain_fairness: jain(&goodputs),
        retransmitted_packets: retransmitted,
        host_pfc_rx_total: flows
            .iter()
            .map(|f| f.host_pfc_rx.iter().sum::<u64>())
            .sum(),
        cnps_sent: receiver_report.cnps_sent,
        cnps_received: flows.iter().map(|f| f.cnps_received).sum(),
        lossless: switch_side.lossless_drops.total == 0 && retransmitted == 0,
        pfc_agree: flows.iter().all(|f| f.pfc_agree),
    };
    Ok(Report {
        setup,
        flows,
        receiver: receiver_report,
        switch: switch_side,
        summary,
        errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert_eq!(jain(&[]), None);
        assert_eq!(jain(&[0.0, 0.0]), None);
        assert!((jain(&[5.0, 5.0, 5.0]).unwrap() - 1.0).abs() < 1e-12);
        // One flow takes everything: 1/n.
        assert!((jain(&[9.0, 0.0, 0.0]).unwrap() - 1.0 / 3.0).abs() < 1e-12);
        // (1 + 2 + 3)^2 / (3 × 14) = 36/42.
        assert!((jain(&[1.0, 2.0, 3.0]).unwrap() - 36.0 / 42.0).abs() < 1e-12);
    }

    #[test]
    fn wire_bytes_of_writes() {
        // rocegen's README: 1024 payload bytes per 1106 wire bytes (MIDDLE/LAST), plus the RETH
        // of the FIRST packet.
        assert_eq!(
            wire_bytes_per_message(65_536, 1024, false, false),
            64 * 1106 + 16
        );
        assert_eq!(wire_bytes_per_message(1024, 1024, false, false), 1106 + 16);
        // IPv6: a 40-byte header instead of 20.
        assert_eq!(
            wire_bytes_per_message(65_536, 1024, false, true),
            64 * 1126 + 16
        );
        // Tagged: 4 more bytes per packet.
        assert_eq!(
            wire_bytes_per_message(2048, 1024, true, false),
            2 * 1110 + 16
        );
        // A 2-byte WRITE ONLY: padded to 4 bytes, frame 14+20+8+12+16+4+4 +4 (FCS) = 82 ≥ 64.
        assert_eq!(wire_bytes_per_message(2, 1024, false, false), 82 + 4 + 16);
        // Last packet shorter than the MTU.
        assert_eq!(
            wire_bytes_per_message(1500, 1024, false, false),
            (1106 + 16) + (476 + 82)
        );
    }

    /// rocegen's validated settings for `write_bw --dcqcn MODE` plus `extra`.
    fn rocegen_settings(mode: &str, extra: &[String]) -> headroom_rocegen::cli::Settings {
        use clap::Parser as _;
        use headroom_rocegen::cli::{settings, Cli, TestCommand, TestKind};
        let mut argv: Vec<String> = ["rocegen", "write_bw", "-d", "eth0", "--link-speed", "100M"]
            .map(str::to_owned)
            .to_vec();
        argv.extend(["--dcqcn".to_owned(), mode.to_owned()]);
        argv.extend(extra.iter().cloned());
        let cli = Cli::try_parse_from(&argv).unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let TestCommand::WriteBw(args) = cli.test else {
            panic!("write_bw")
        };
        settings(TestKind::WriteBw, &args).unwrap_or_else(|e| panic!("{argv:?}: {e}"))
    }

    #[test]
    fn lab_timescale_flags_reach_rocegens_rate_control() {
        use headroom_roce::dcqcn::RpParams;
        assert!(lab_timescale_args(Dcqcn::Off).is_empty());
        match rocegen_settings("nvidia", &lab_timescale_args(Dcqcn::Nvidia)).rp {
            Some(RpParams::Nvidia(p)) => assert_eq!(
                (
                    p.dce_tcp_rtt,
                    p.rate_reduce_monitor_period,
                    p.rpg_time_reset,
                    p.rpg_byte_reset,
                    p.rpg_ai_rate,
                    p.rpg_hai_rate
                ),
                (1000, 1000, 10_000, 0, 1, 5)
            ),
            other => panic!("{other:?}"),
        }
        match rocegen_settings("paper", &lab_timescale_args(Dcqcn::Paper)).rp {
            Some(RpParams::Paper(p)) => {
                assert_eq!(
                    (
                        p.alpha_timer_ns,
                        p.increase_timer_ns,
                        p.byte_counter_bytes,
                        p.additive_increase_bps,
                        p.hyper_increase_bps
                    ),
                    (1_000_000, 10_000_000, 0, 1_000_000, 5_000_000)
                );
                // rocegen's default floor on a 100M link: 1/100 of it.
                assert_eq!(p.min_rate_bps, 1_000_000);
            }
            other => panic!("{other:?}"),
        }
        // The NIC timescale leaves rocegen's defaults.
        match rocegen_settings("nvidia", &[]).rp {
            Some(RpParams::Nvidia(p)) => assert_eq!((p.dce_tcp_rtt, p.rpg_time_reset), (1, 300)),
            other => panic!("{other:?}"),
        }
    }

    /// A rocegen report, as rocegen writes it (through its own types).
    fn rocegen_report(
        role: &str,
        goodput_gbps: f64,
        pfc3: u64,
        retransmitted: u64,
    ) -> RocegenReport {
        use headroom_rocegen::report::{
            BwRow, CountersReport, DriverStats, EndpointReport, PriorityReport, QpReport,
        };
        let mut priorities: Vec<PriorityReport> = (0..8)
            .map(|p| PriorityReport {
                priority: p,
                ..PriorityReport::default()
            })
            .collect();
        priorities[3] = PriorityReport {
            priority: 3,
            pfc_frames_rx: pfc3,
            pfc_xoff_rx: pfc3 / 2,
            pfc_xon_rx: pfc3 - pfc3 / 2,
            paused_ns: 2_500_000,
        };
        let mut bw = BwRow::from_totals(65_536, 100, 1_000_000_000, 0.0);
        bw.bw_average_gbit_per_sec = goodput_gbps;
        let endpoint = EndpointReport {
            mac: "02:68:68:00:00:01".into(),
            ip: "10.0.0.1".into(),
            qps: Vec::new(),
        };
        RocegenReport {
            tool: "rocegen".into(),
            version: "0".into(),
            test: "write_bw".into(),
            role: role.into(),
            interface: "eth0".into(),
            link_speed_bps: 100_000_000,
            mtu_bytes: 1024,
            qps: 1,
            tclass: 12,
            dscp: 3,
            priority: 3,
            vlan_id: None,
            dcqcn: "nvidia".into(),
            local: endpoint.clone(),
            remote: vec![endpoint],
            bw: vec![bw],
            latency: Vec::new(),
            counters: CountersReport {
                priorities,
                retransmitted_packets: retransmitted,
                cnps_received: 7,
                cnps_sent: 21,
                ecn_ce_received: 21,
                data_packets_sent: 6400,
                messages_delivered: 300,
                ..CountersReport::default()
            },
            qp: vec![QpReport {
                index: 0,
                local_qpn: 0x100,
                remote_qpn: 0x200,
                udp_sport: 49_152,
                rate_bps: 90_000_000,
                min_rate_bps: 40_000_000,
                target_rate_bps: None,
                alpha: None,
                rate_cuts: 2,
                cnps_handled: 7,
                packets_sent: 6400,
                packets_retransmitted: retransmitted,
                timeouts: 0,
                messages_completed: 100,
                state: "ready".into(),
                packets_accepted: 0,
                out_of_sequence: 0,
            }],
            error: None,
            peer: None,
            peers: Vec::new(),
            driver: Some(DriverStats {
                max_wake_lateness_ns: 3_000_000,
                ..DriverStats::default()
            }),
        }
    }

    fn collected<'a>(
        args: &'a IncastArgs,
        spec: &'a LabSpec,
        config: &'a headroom_config::Config,
        reports: Vec<Option<RocegenReport>>,
        switch: SwitchCounters,
    ) -> Collected<'a> {
        Collected {
            args,
            spec,
            config,
            config_path: Path::new("/run/headroom/t-incast.toml"),
            rocegen: Path::new("/usr/bin/rocegen"),
            reports,
            switch,
            busiest: Some(("headroom-lcore0".into(), 42.0)),
            errors: Vec::new(),
        }
    }

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: IncastArgs,
    }

    #[test]
    fn the_report_compares_host_and_switch_counters() {
        use clap::Parser as _;
        use headroom_runtime::protocol::{PfcCounters, PortSummary, QueueCounters};
        let args = Cli::parse_from(["incast", "--senders", "2", "--ecn", "off"]).args;
        let mut spec = LabSpec::new("t", 3, "100M");
        spec.ecn_enabled = false;
        let (config, _) = headroom_config::parse(&spec.config_toml(), "t").unwrap();
        let switch = || {
            let mut snapshot = Snapshot::default();
            for (i, tx3) in [(0, 10), (1, 12), (2, 0)] {
                let mut tx = [0; 8];
                tx[3] = tx3;
                snapshot.pfc.push(PfcCounters {
                    port: port_name(i),
                    tx,
                    ..PfcCounters::default()
                });
                snapshot.ports.push(PortSummary {
                    port: port_name(i),
                    ..PortSummary::default()
                });
            }
            snapshot.queues.push(QueueCounters {
                port: port_name(2),
                queue: 3,
                packets: 12_800,
                ecn_marked: 0,
                ..QueueCounters::default()
            });
            SwitchCounters {
                queue_marks: vec![WatermarkRow {
                    port: port_name(2),
                    bytes: [0, 0, 0, 900_000, 0, 0, 0, 0],
                }],
                snapshot,
                ..SwitchCounters::default()
            }
        };
        let reports = vec![
            Some(rocegen_report("server", 0.09, 0, 0)),
            Some(rocegen_report("client", 0.045, 10, 0)),
            Some(rocegen_report("client", 0.045, 12, 0)),
        ];
        let r = assemble(collected(&args, &spec, &config, reports, switch())).unwrap();
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!((r.setup.priority, r.setup.pg, r.setup.queue), (3, 3, 3));
        assert!(r.setup.lossless && !r.setup.ecn);
        assert_eq!(
            r.setup.xoff_bytes,
            config.ports[0].computed_headroom.xoff_bytes
        );
        assert!(r.flows.iter().all(|f| f.pfc_agree));
        assert!(r.summary.pfc_agree && r.summary.lossless);
        assert_eq!(r.switch.pfc_tx_total, 22);
        assert_eq!(r.summary.host_pfc_rx_total, 22);
        assert_eq!(r.switch.bottleneck_queue_watermark_bytes, 900_000);
        assert_eq!(r.switch.ports[2].queue_packets[3], 12_800);
        assert!((r.summary.aggregate_goodput_mbps - 90.0).abs() < 1e-9);
        assert!((r.summary.jain_fairness.unwrap() - 1.0).abs() < 1e-12);
        // 100 Mb/s × 65536 / (64 × 1106 + 16) = 92.565 Mb/s of payload at most.
        assert!((r.summary.bottleneck_payload_capacity_mbps - 92.565).abs() < 1e-3);
        assert_eq!(r.flows[1].messages, 100);
        assert!((r.flows[0].paused_ms - 2.5).abs() < 1e-9);
        assert_eq!(r.receiver.cnps_sent, 21);
        assert_eq!(r.summary.cnps_received, 14);
        assert!(r
            .to_text()
            .contains("every sender exactly what its port sent"));

        // One frame the host did not see, a retransmission and a headroom drop: all reported.
        let reports = vec![
            Some(rocegen_report("server", 0.09, 0, 0)),
            Some(rocegen_report("client", 0.045, 9, 3)),
            None,
        ];
        let mut counters = switch();
        counters.snapshot.ports[0]
            .drops
            .insert("ingress_headroom_exhausted".into(), 2);
        counters.pg_drops = vec![PgDropRow {
            port: port_name(0),
            drops: [0, 0, 0, 2, 0, 0, 0, 0],
        }];
        let r = assemble(collected(&args, &spec, &config, reports, counters)).unwrap();
        assert!(!r.flows[0].pfc_agree && !r.flows[1].pfc_agree);
        assert!(!r.summary.pfc_agree && !r.summary.lossless);
        assert_eq!(r.switch.lossless_drops.ingress_headroom_exhausted, 2);
        assert_eq!(r.switch.lossless_drops.lossless_pg_drops, 2);
        assert_eq!(r.switch.lossless_drops.total, 2);
        assert_eq!(r.summary.retransmitted_packets, 3);
        assert!(r.to_text().contains("MISMATCH") && r.to_text().contains("LOSSES"));

        // What the report prints: the setup, each flow, the verdicts.
        let r = assemble(collected(
            &args,
            &spec,
            &config,
            vec![
                Some(rocegen_report("server", 0.09, 0, 0)),
                Some(rocegen_report("client", 0.045, 10, 0)),
                Some(rocegen_report("client", 0.045, 12, 0)),
            ],
            switch(),
        ))
        .unwrap();
        let text = r.to_text();
        assert!(
            text.starts_with(
                "headroom lab incast: 2 sender(s) -> h2 through lab \"t\" at 100 Mb/s\n"
            ),
            "{text}"
        );
        let flow_rows: Vec<&str> = text
            .lines()
            .filter(|l| {
                let l = l.trim_start();
                l.starts_with("h0 ") || l.starts_with("h1 ")
            })
            .collect();
        assert_eq!(flow_rows.len(), 2, "{text}");
        assert!(flow_rows[0].contains("Ethernet0") && flow_rows[0].contains("45.00"));
        assert!(text.contains("Goodput 90.00 Mb/s"), "{text}");
        assert!(text.contains("PFC: the switch sent 22 frames, the senders received 22"));
        assert!(text.contains("0 retransmissions: lossless"), "{text}");
        assert!(text.contains("Bottleneck queue (Ethernet2 queue 3): max 900,000 B"));
    }

    #[test]
    fn a_rocegen_report_from_another_version_is_an_error_that_names_the_field() {
        let good = serde_json::to_string(&rocegen_report("client", 0.045, 10, 0)).unwrap();
        let read = read_rocegen_report("rocegen on h0", "exit status: 0", &good, "").unwrap();
        assert_eq!(read.counters.priorities[3].pfc_frames_rx, 10);
        // Renamed: rx_ring_drops became rx_kernel_drops.
        let mut renamed = serde_json::to_value(rocegen_report("client", 0.045, 10, 0)).unwrap();
        let counters = renamed["counters"].as_object_mut().unwrap();
        let v = counters.remove("rx_ring_drops").unwrap();
        counters.insert("rx_kernel_drops".into(), v);
        let e = read_rocegen_report("rocegen on h0", "exit status: 0", &renamed.to_string(), "")
            .unwrap_err();
        assert!(
            e.starts_with(
                "rocegen on h0: its report does not read (exit status: 0): at counters: missing \
                 field `rx_ring_drops`"
            ),
            "{e}"
        );
        // Nothing printed: the stderr says why.
        let e =
            read_rocegen_report("rocegen on h1", "exit status: 1", " \n", "no route").unwrap_err();
        assert_eq!(
            e,
            "rocegen on h1 printed no report (exit status: 1):\nno route"
        );
        // A report that reads but lacks what the incast needs is an error too, and that flow
        // has no numbers (not zeros taken for measurements).
        let mut short = rocegen_report("client", 0.045, 10, 0);
        short.counters.priorities.truncate(3);
        assert_eq!(
            report_shape_error(&short).as_deref(),
            Some("its report has no counters.priorities entry for priority 3")
        );
        use clap::Parser as _;
        let args = Cli::parse_from(["incast", "--senders", "2", "--ecn", "off"]).args;
        let mut spec = LabSpec::new("t", 3, "100M");
        spec.ecn_enabled = false;
        let (config, _) = headroom_config::parse(&spec.config_toml(), "t").unwrap();
        let reports = vec![
            Some(rocegen_report("server", 0.09, 0, 0)),
            Some(short),
            Some(rocegen_report("client", 0.045, 12, 0)),
        ];
        let r = assemble(collected(
            &args,
            &spec,
            &config,
            reports,
            SwitchCounters::default(),
        ))
        .unwrap();
        assert_eq!(
            r.errors,
            ["rocegen on h0: its report has no counters.priorities entry for priority 3"]
        );
        assert_eq!(r.flows[0].error.as_deref(), Some("no report"));
        assert!(!r.flows[0].pfc_agree);
    }

    #[test]
    fn thread_cpu_times_from_proc() {
        // proc(5): utime (14) and stime (15) follow the state and 10 more fields.
        let line = "4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 31 0 0 20 0 3 0 100";
        assert_eq!(stat_ticks(line), Some(("a (b) c", 281)));
        assert_eq!(stat_ticks("4242 (x) S 1 2"), None);
        assert_eq!(stat_ticks("garbage"), None);
        // This process: every thread, by name and id.
        let ticks = thread_ticks(std::process::id());
        assert!(!ticks.is_empty());
        assert!(
            ticks.keys().all(|k| k.rsplit_once('/').is_some()),
            "{ticks:?}"
        );
        let before = BTreeMap::from([("lcore/1".to_owned(), 100)]);
        let after = BTreeMap::from([("lcore/1".to_owned(), 150), ("main/2".to_owned(), 1)]);
        let (name, percent) = busiest_thread(&before, &after, Duration::from_secs(1)).unwrap();
        assert_eq!(name, "lcore");
        assert!((percent - 50.0).abs() < 1e-9);
    }
}
