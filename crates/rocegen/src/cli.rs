//! The command line: perftest's shape and flags where perftest has them, plus the emulated NIC's.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV6, ToSocketAddrs};

use clap::{Args, Parser, Subcommand, ValueEnum};
use headroom_roce::dcqcn::{NvidiaParams, PaperParams, RpParams, BPS_PER_MBPS};
use headroom_roce::np::NpConfig;
use headroom_roce::rc::PathMtu;
use headroom_roce::time::NANOS_PER_MICRO;

use crate::flow::{local_ack_timeout_ns, parse_link_speed, PriorityMap};
use crate::nic::{request_overhead_bytes, QPS_MAX};
use crate::sys;

/// perftest's out-of-band TCP port.
pub const DEFAULT_PORT: u16 = 18515;

/// Largest message of `-a` (perftest: 2^23 bytes).
pub const ALL_SIZES_MAX: u32 = 1 << 23;

/// `rocegen`: RoCEv2 RDMA WRITE traffic like perftest, from an emulated RoCE NIC on any Ethernet
/// interface (raw frames through AF_PACKET; needs root or CAP_NET_RAW).
#[derive(Debug, Parser)]
#[command(name = "rocegen", version, about, long_about = None)]
pub struct Cli {
    /// The test.
    #[command(subcommand)]
    pub test: TestCommand,
}

/// The tests (perftest's `ib_write_bw` and `ib_write_lat`).
#[derive(Debug, Subcommand)]
pub enum TestCommand {
    /// RDMA WRITE bandwidth: the client writes to the server as fast as the emulated NIC allows.
    #[command(name = "write_bw", visible_alias = "write-bw")]
    WriteBw(TestArgs),
    /// RDMA WRITE latency: client and server write to each other in turn (ping-pong).
    #[command(name = "write_lat", visible_alias = "write-lat")]
    WriteLat(TestArgs),
}

/// DCQCN on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DcqcnMode {
    /// No rate control: CNPs are counted and ignored, CE marks are counted, no CNP is sent.
    Off,
    /// The SIGCOMM'15 algorithm (htsim semantics), NP interval 50 us.
    Paper,
    /// ConnectX firmware semantics (HPCC-ns3 `CC_MODE 1`) with mlx5 defaults, NP interval 2 us.
    Nvidia,
}

/// How an untagged frame's priority follows from its DSCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PriorityMapArg {
    /// SONiC default DSCP_TO_TC_MAP AZURE: 3→3, 4→4, 5→2, 8→0, 46→5, 48→6, other → 1.
    Azure,
    /// IP precedence, DSCP / 8 (mlx5 default dscp2prio).
    Precedence,
}

fn parse_bool(text: &str) -> Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" => Ok(false),
        _ => Err(format!("{text:?} is not a boolean (use 1/0, true/false)")),
    }
}

/// The flags of both tests.
#[derive(Debug, Args)]
#[allow(clippy::struct_excessive_bools)]
pub struct TestArgs {
    /// Server to connect to (client mode): an IPv4 or IPv6 address (`10.0.0.2`, `fd00::2`,
    /// `[fd00::2]`, link-local `fe80::2%eth0`) or a host name; the out-of-band exchange goes to
    /// it over its family, whatever RoCE's. Without it, run as the server and wait for a client
    /// (on IPv6 and IPv4).
    #[arg(value_name = "SERVER")]
    pub server: Option<String>,

    /// The Ethernet interface to send and receive RoCE on (perftest: the RDMA device).
    #[arg(
        short = 'd',
        long = "ib-dev",
        visible_alias = "dev",
        value_name = "IFACE"
    )]
    pub device: String,

    /// TCP port of the out-of-band exchange.
    #[arg(short = 'p', long = "port", default_value_t = DEFAULT_PORT)]
    pub port: u16,

    /// Message size in bytes [default: 65536 for write_bw, 2 for write_lat].
    #[arg(short = 's', long = "size")]
    pub size: Option<u32>,

    /// Iterations per QP [default: 5000 for write_bw, 1000 for write_lat].
    #[arg(short = 'n', long = "iters", conflicts_with = "duration")]
    pub iters: Option<u64>,

    /// Run for this many seconds instead of a number of iterations.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<f64>,

    /// Number of queue pairs.
    #[arg(short = 'q', long = "qp", default_value_t = 1)]
    pub qps: usize,

    /// Path MTU: 256, 512, 1024, 2048 or 4096 [default: the largest the interface MTU carries].
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,

    /// Run every size from 2 to 2^23 bytes (powers of two).
    #[arg(short = 'a', long = "all", conflicts_with = "size")]
    pub all: bool,

    /// Messages posted per QP at once [default: 128 for write_bw, 1 for write_lat].
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<usize>,

    /// QP local ACK timeout exponent: 4.096 us × 2^N (IBTA), 1..=31. perftest's default is 14
    /// (67 ms) for hardware NICs; an emulated NIC on a shared CPU can be descheduled for tens of
    /// milliseconds, which would time out and show retransmissions no fabric loss caused, hence
    /// 18 (1.07 s). Losses followed by more traffic are NAKed at once either way.
    #[arg(short = 'u', long = "qp-timeout", default_value_t = 18,
          value_parser = clap::value_parser!(u8).range(1..=31))]
    pub qp_timeout: u8,

    /// Retransmission attempts before a QP fails (IBTA retry_cnt, 0..=7).
    #[arg(long = "retry_count", visible_alias = "retry-count", default_value_t = 7,
          value_parser = clap::value_parser!(u8).range(0..=7))]
    pub retry_count: u8,

    /// IP traffic class byte, as perftest's --tclass: DSCP = TCLASS >> 2. Its two ECN bits are
    /// ignored: data is always sent ECT(0) so that switches can mark it.
    #[arg(long = "tclass", default_value_t = 0)]
    pub tclass: u8,

    /// Report bandwidth in Gb/sec (10^9 bit/s) instead of MB/sec (2^20 B/s).
    #[arg(long = "report_gbits", visible_alias = "report-gbits")]
    pub report_gbits: bool,

    /// 802.1p priority of data and ACKs: the PCP when tagged, and the PFC class that pauses them
    /// [default: from the DSCP via --prio-map].
    #[arg(long = "pcp", value_parser = clap::value_parser!(u8).range(0..=7))]
    pub pcp: Option<u8>,

    /// Tag every frame with 802.1Q VLAN ID (0: priority tag only).
    #[arg(long = "vlan", value_parser = clap::value_parser!(u16).range(0..=4094))]
    pub vlan: Option<u16>,

    /// DSCP → priority map for the default priority.
    #[arg(long = "prio-map", value_enum, default_value_t = PriorityMapArg::Azure)]
    pub prio_map: PriorityMapArg,

    /// Speed of the emulated NIC port (decimal K/M/G/T suffixes): frames are serialized at it,
    /// it is DCQCN's line rate, and PFC quanta are 512 bit times at it.
    #[arg(long = "link-speed", default_value = "1G")]
    pub link_speed: String,

    /// DCQCN on this host (reaction point for our QPs and notification point for the peer's).
    #[arg(long = "dcqcn", value_enum, default_value_t = DcqcnMode::Nvidia)]
    pub dcqcn: DcqcnMode,

    /// RP: microseconds between timer rate increases (paper mode: T).
    #[arg(
        long = "rpg_time_reset",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_time_reset: Option<u32>,
    /// RP: bytes between byte-counter rate increases, 0 = off (paper mode: B).
    #[arg(
        long = "rpg_byte_reset",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_byte_reset: Option<u32>,
    /// RP: fast-recovery steps before additive increase (paper mode: F).
    #[arg(
        long = "rpg_threshold",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_threshold: Option<u32>,
    /// RP: additive increase step, Mb/s (paper mode: R_AI).
    #[arg(
        long = "rpg_ai_rate",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_ai_rate: Option<u32>,
    /// RP: hyper increase step, Mb/s (paper mode: R_HAI).
    #[arg(
        long = "rpg_hai_rate",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_hai_rate: Option<u32>,
    /// RP (nvidia): log2 of Gd in Rc = (1 - alpha/Gd) × Rc.
    #[arg(long = "rpg_gd", help_heading = "DCQCN reaction point (mlx5 names)")]
    pub rpg_gd: Option<u8>,
    /// RP (nvidia): a cut keeps at least this percentage of the rate.
    #[arg(
        long = "rpg_min_dec_fac",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_min_dec_fac: Option<u8>,
    /// RP: lowest rate, Mb/s.
    #[arg(
        long = "rpg_min_rate",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rpg_min_rate: Option<u32>,
    /// RP (nvidia): rate set on the first CNP, Mb/s, 0 = line rate.
    #[arg(
        long = "rate_to_set_on_first_cnp",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rate_to_set_on_first_cnp: Option<u32>,
    /// RP: alpha gain in 1/1024: g = (1024 - G)/1024.
    #[arg(long = "dce_tcp_g", help_heading = "DCQCN reaction point (mlx5 names)")]
    pub dce_tcp_g: Option<u16>,
    /// RP: alpha update period, microseconds (paper mode: K).
    #[arg(
        long = "dce_tcp_rtt",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub dce_tcp_rtt: Option<u32>,
    /// RP (nvidia): microseconds between two rate cuts at most.
    #[arg(
        long = "rate_reduce_monitor_period",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub rate_reduce_monitor_period: Option<u32>,
    /// RP: alpha at the first CNP, in 1/1024 (1024 = exactly 1).
    #[arg(
        long = "initial_alpha_value",
        help_heading = "DCQCN reaction point (mlx5 names)"
    )]
    pub initial_alpha_value: Option<u16>,
    /// RP (nvidia): on a cut, always set the target rate to the current rate (1/0).
    #[arg(long = "clamp_tgt_rate", value_parser = parse_bool,
          help_heading = "DCQCN reaction point (mlx5 names)")]
    pub clamp_tgt_rate: Option<bool>,
    /// RP (nvidia): also clamp after a timer increase (1/0).
    #[arg(long = "clamp_tgt_rate_after_time_inc", value_parser = parse_bool,
          help_heading = "DCQCN reaction point (mlx5 names)")]
    pub clamp_tgt_rate_after_time_inc: Option<bool>,

    /// NP: minimum microseconds between two CNPs to one QP [paper 50, nvidia 2].
    #[arg(
        long = "min_time_between_cnps",
        help_heading = "DCQCN notification point (mlx5 names)"
    )]
    pub min_time_between_cnps: Option<u64>,
    /// NP: DSCP of CNPs.
    #[arg(long = "cnp_dscp", default_value_t = 48,
          value_parser = clap::value_parser!(u8).range(0..=63),
          help_heading = "DCQCN notification point (mlx5 names)")]
    pub cnp_dscp: u8,
    /// NP: 802.1p priority of CNPs (their PCP when tagged, their PFC class).
    #[arg(long = "cnp_802p_prio", default_value_t = 6,
          value_parser = clap::value_parser!(u8).range(0..=7),
          help_heading = "DCQCN notification point (mlx5 names)")]
    pub cnp_802p_prio: u8,

    /// Print one JSON object with every result and counter instead of the table.
    #[arg(long = "json")]
    pub json: bool,

    /// Source IPv4 address [default: the interface's address the TCP exchange used, or its only
    /// one].
    #[arg(long = "source-ip", conflicts_with_all = ["ipv6", "gid"])]
    pub source_ip: Option<Ipv4Addr>,

    /// RoCEv2 over IPv6, as perftest's --ipv6 ("use IPv6 GID"): the RoCE address (GID) is the
    /// interface's first global (not link-local) IPv6 address, or --gid. The out-of-band TCP
    /// exchange goes to SERVER over SERVER's family, either way. Both sides must use the same
    /// RoCE family.
    #[arg(long = "ipv6")]
    pub ipv6: bool,

    /// The local RoCE address (GID) as an IPv6 address; implies --ipv6. Needs no kernel IPv6 on
    /// the interface (frames go through AF_PACKET and MACs are exchanged out of band).
    #[arg(long = "gid", value_name = "IPV6")]
    pub gid: Option<Ipv6Addr>,

    /// Send with PACKET_QDISC_BYPASS (a little faster; tcpdump on this interface then does not see
    /// what this host sends).
    #[arg(long = "qdisc-bypass")]
    pub qdisc_bypass: bool,

    /// How far (microseconds) the emulated link may catch up after the host woke up late; beyond
    /// it, link time is lost rather than sent as a burst.
    #[arg(long = "catch-up-us", default_value_t = 200)]
    pub catch_up_us: u64,

    /// Server: wait for this many clients, then run them all at once on one NIC (an incast
    /// towards this host); each client's QPs get their own QPNs.
    #[arg(long = "clients", default_value_t = 1,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub clients: u16,

    /// Seconds the client keeps retrying to connect to the server.
    #[arg(long = "connect-timeout", default_value_t = 10.0)]
    pub connect_timeout: f64,

    /// Discard every Nth received RDMA WRITE packet, as a lossy fabric would (receiver side).
    #[arg(long = "drop-every", help_heading = "Fault injection (testing)")]
    pub drop_every: Option<u64>,

    /// Send every Nth data packet CE-marked, standing in for a congested switch (sender side).
    #[arg(long = "mark-ce-every", help_heading = "Fault injection (testing)")]
    pub mark_ce_every: Option<u64>,
}

/// Which test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestKind {
    /// RDMA WRITE bandwidth.
    WriteBw,
    /// RDMA WRITE latency.
    WriteLat,
}

impl TestKind {
    /// perftest's test name.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Self::WriteBw => "write_bw",
            Self::WriteLat => "write_lat",
        }
    }

    /// From [`TestKind::name`].
    #[must_use]
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "write_bw" => Some(Self::WriteBw),
            "write_lat" => Some(Self::WriteLat),
            _ => None,
        }
    }
}

/// Validated settings of one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// The test.
    pub test: TestKind,
    /// SERVER as given (client mode); checked by [`parse_server`].
    pub server: Option<String>,
    /// SERVER's addresses to try in order, filled by [`resolve_server`] (empty until then, and
    /// for a server).
    pub server_addrs: Vec<SocketAddr>,
    /// Interface.
    pub device: String,
    /// TCP port.
    pub port: u16,
    /// Sizes to run, in order.
    pub sizes: Vec<u32>,
    /// Iterations per QP and size (None in duration mode).
    pub iterations: Option<u64>,
    /// Duration in seconds.
    pub duration_s: Option<f64>,
    /// QPs.
    pub qps: usize,
    /// Path MTU, if given (else derived from the interface).
    pub mtu: Option<PathMtu>,
    /// Messages posted per QP.
    pub tx_depth: usize,
    /// Local ACK timeout.
    pub retransmit_timeout_ns: u64,
    /// Retries.
    pub retry_count: u8,
    /// Traffic class byte.
    pub tclass: u8,
    /// Gb/sec report.
    pub report_gbits: bool,
    /// Explicit priority.
    pub pcp: Option<u8>,
    /// VLAN ID.
    pub vlan: Option<u16>,
    /// DSCP → priority.
    pub prio_map: PriorityMap,
    /// Link speed, bit/s.
    pub link_rate_bps: u64,
    /// DCQCN mode name.
    pub dcqcn: DcqcnMode,
    /// RP parameters.
    pub rp: Option<RpParams>,
    /// NP parameters.
    pub np: Option<NpConfig>,
    /// JSON output.
    pub json: bool,
    /// Source IP override.
    pub source_ip: Option<Ipv4Addr>,
    /// RoCEv2 over IPv6 (`--ipv6` or `--gid`).
    pub ipv6: bool,
    /// The IPv6 GID: `--gid`, or filled by [`resolve_gid`] from the interface.
    pub gid: Option<Ipv6Addr>,
    /// Qdisc bypass.
    pub qdisc_bypass: bool,
    /// Catch-up window.
    pub catch_up_ns: u64,
    /// Connect timeout.
    pub connect_timeout_s: f64,
    /// Clients a server waits for.
    pub clients: usize,
    /// Fault injection.
    pub drop_every: Option<u64>,
    /// Fault injection.
    pub mark_ce_every: Option<u64>,
}

impl Settings {
    /// The priority of data frames.
    #[must_use]
    pub fn data_priority(&self) -> u8 {
        self.pcp
            .unwrap_or_else(|| self.prio_map.priority(self.dscp()))
    }

    /// The DSCP of data frames.
    #[must_use]
    pub fn dscp(&self) -> u8 {
        self.tclass >> 2
    }
}

/// The largest path MTU whose full frames fit an interface MTU (the IP packet: 20 (IPv4) or 40
/// (IPv6) + 8 + 12 + 16 + payload + 4 bytes).
#[must_use]
pub fn largest_pmtu_for(interface_mtu: usize, ipv6: bool) -> Option<PathMtu> {
    let ip_overhead = request_overhead_bytes(ipv6) - 18;
    [
        PathMtu::Mtu4096,
        PathMtu::Mtu2048,
        PathMtu::Mtu1024,
        PathMtu::Mtu512,
        PathMtu::Mtu256,
    ]
    .into_iter()
    .find(|m| m.bytes() as usize + ip_overhead <= interface_mtu)
}

/// Paper mode without `--rpg_min_rate`: the lowest rate is at most the link rate divided by this.
const PAPER_MIN_RATE_LINK_DIVISOR: u64 = 100;

fn rp_params(args: &TestArgs, link_rate_bps: u64) -> Result<Option<RpParams>, String> {
    let nvidia_only = [
        ("rpg_gd", args.rpg_gd.is_some()),
        ("rpg_min_dec_fac", args.rpg_min_dec_fac.is_some()),
        (
            "rate_to_set_on_first_cnp",
            args.rate_to_set_on_first_cnp.is_some(),
        ),
        (
            "rate_reduce_monitor_period",
            args.rate_reduce_monitor_period.is_some(),
        ),
        ("clamp_tgt_rate", args.clamp_tgt_rate.is_some()),
        (
            "clamp_tgt_rate_after_time_inc",
            args.clamp_tgt_rate_after_time_inc.is_some(),
        ),
    ];
    let common = [
        ("rpg_time_reset", args.rpg_time_reset.is_some()),
        ("rpg_byte_reset", args.rpg_byte_reset.is_some()),
        ("rpg_threshold", args.rpg_threshold.is_some()),
        ("rpg_ai_rate", args.rpg_ai_rate.is_some()),
        ("rpg_hai_rate", args.rpg_hai_rate.is_some()),
        ("rpg_min_rate", args.rpg_min_rate.is_some()),
        ("dce_tcp_g", args.dce_tcp_g.is_some()),
        ("dce_tcp_rtt", args.dce_tcp_rtt.is_some()),
        ("initial_alpha_value", args.initial_alpha_value.is_some()),
    ];
    match args.dcqcn {
        DcqcnMode::Off => {
            if let Some((name, _)) = nvidia_only.iter().chain(&common).find(|(_, set)| *set) {
                return Err(format!(
                    "--{name} needs DCQCN: add --dcqcn paper or --dcqcn nvidia"
                ));
            }
            Ok(None)
        }
        DcqcnMode::Nvidia => {
            let mut p = NvidiaParams::default();
            if let Some(v) = args.rpg_time_reset {
                p.rpg_time_reset = v;
            }
            if let Some(v) = args.rpg_byte_reset {
                p.rpg_byte_reset = v;
            }
            if let Some(v) = args.rpg_threshold {
                p.rpg_threshold = v;
            }
            if let Some(v) = args.rpg_ai_rate {
                p.rpg_ai_rate = v;
            }
            if let Some(v) = args.rpg_hai_rate {
                p.rpg_hai_rate = v;
            }
            if let Some(v) = args.rpg_gd {
                p.rpg_gd = v;
            }
            if let Some(v) = args.rpg_min_dec_fac {
                p.rpg_min_dec_fac = v;
            }
            if let Some(v) = args.rpg_min_rate {
                p.rpg_min_rate = v;
            }
            if let Some(v) = args.rate_to_set_on_first_cnp {
                p.rate_to_set_on_first_cnp = v;
            }
            if let Some(v) = args.dce_tcp_g {
                p.dce_tcp_g = v;
            }
            if let Some(v) = args.dce_tcp_rtt {
                p.dce_tcp_rtt = v;
            }
            if let Some(v) = args.rate_reduce_monitor_period {
                p.rate_reduce_monitor_period = v;
            }
            if let Some(v) = args.initial_alpha_value {
                p.initial_alpha_value = v;
            }
            if let Some(v) = args.clamp_tgt_rate {
                p.clamp_tgt_rate = v;
            }
            if let Some(v) = args.clamp_tgt_rate_after_time_inc {
                p.clamp_tgt_rate_after_time_inc = v;
            }
            Ok(Some(RpParams::Nvidia(p)))
        }
        DcqcnMode::Paper => {
            if let Some((name, _)) = nvidia_only.iter().find(|(_, set)| *set) {
                return Err(format!("--{name} only applies to --dcqcn nvidia"));
            }
            let mut p = PaperParams::default();
            if let Some(v) = args.rpg_time_reset {
                p.increase_timer_ns = u64::from(v) * NANOS_PER_MICRO;
            }
            if let Some(v) = args.rpg_byte_reset {
                p.byte_counter_bytes = u64::from(v);
            }
            if let Some(v) = args.rpg_threshold {
                p.fast_recovery_threshold = v;
            }
            if let Some(v) = args.rpg_ai_rate {
                p.additive_increase_bps = u64::from(v) * BPS_PER_MBPS;
            }
            if let Some(v) = args.rpg_hai_rate {
                p.hyper_increase_bps = u64::from(v) * BPS_PER_MBPS;
            }
            if let Some(v) = args.rpg_min_rate {
                p.min_rate_bps = u64::from(v) * BPS_PER_MBPS;
            }
            if let Some(v) = args.dce_tcp_g {
                if v > 1024 {
                    return Err("--dce_tcp_g must be in 0..=1024".into());
                }
                p.g = f64::from(1024 - v) / 1024.0;
            }
            if let Some(v) = args.dce_tcp_rtt {
                p.alpha_timer_ns = u64::from(v) * NANOS_PER_MICRO;
            }
            if let Some(v) = args.initial_alpha_value {
                if v > 1024 {
                    return Err("--initial_alpha_value must be in 0..=1024".into());
                }
                p.initial_alpha = f64::from(v) / 1024.0;
            }
            // The paper gives no minimum. The default (HPCC-ns3's 100 Mb/s) is 1/1000 of a 100G
            // link; on a link slower than 10 Gb/s it would sit at or above the fair share of a
            // few flows (and at the line rate itself on 100 Mb/s, where no cut could act at all),
            // so it becomes 1/100 of the link there.
            if args.rpg_min_rate.is_none() {
                p.min_rate_bps = p
                    .min_rate_bps
                    .min(link_rate_bps / PAPER_MIN_RATE_LINK_DIVISOR);
            }
            Ok(Some(RpParams::Paper(p)))
        }
    }
}

fn np_config(args: &TestArgs) -> Result<Option<NpConfig>, String> {
    let mut cfg = match args.dcqcn {
        DcqcnMode::Off => {
            if args.min_time_between_cnps.is_some() {
                return Err(
                    "--min_time_between_cnps needs DCQCN: add --dcqcn paper or nvidia".into(),
                );
            }
            return Ok(None);
        }
        DcqcnMode::Paper => NpConfig::paper(),
        DcqcnMode::Nvidia => NpConfig::nvidia(),
    };
    if let Some(us) = args.min_time_between_cnps {
        cfg.min_time_between_cnps_ns = us.saturating_mul(NANOS_PER_MICRO);
    }
    cfg.cnp_dscp = args.cnp_dscp;
    cfg.cnp_802p_prio = args.cnp_802p_prio;
    Ok(Some(cfg))
}

/// Validates the arguments of `test`.
pub fn settings(test: TestKind, args: &TestArgs) -> Result<Settings, String> {
    let (default_size, default_iters, default_depth) = match test {
        TestKind::WriteBw => (65_536, 5_000, 128),
        TestKind::WriteLat => (2, 1_000, 1),
    };
    let sizes = if args.all {
        (1..=23).map(|shift| 1u32 << shift).collect()
    } else {
        let size = args.size.unwrap_or(default_size);
        if size == 0 || size > 1 << 31 {
            return Err("--size must be in 1 ..= 2^31 bytes".into());
        }
        vec![size]
    };
    if args.qps == 0 || args.qps > QPS_MAX {
        return Err(format!("--qp must be in 1..={QPS_MAX}"));
    }
    if test == TestKind::WriteLat && args.qps != 1 {
        return Err("write_lat runs one QP (as perftest)".into());
    }
    let duration_s = match args.duration {
        Some(d) if !(d > 0.0 && d <= 86_400.0) => {
            return Err("--duration must be in (0, 86400] seconds".into())
        }
        other => other,
    };
    if duration_s.is_some() && test == TestKind::WriteLat {
        return Err("write_lat runs a number of iterations (-n), not a duration".into());
    }
    if duration_s.is_some() && args.all {
        return Err("--all runs a number of iterations per size; it cannot take --duration".into());
    }
    let iterations = if duration_s.is_some() {
        None
    } else {
        let n = args.iters.unwrap_or(default_iters);
        if n == 0 {
            return Err("--iters must be at least 1".into());
        }
        Some(n)
    };
    let mtu = args
        .mtu
        .map(|m| {
            PathMtu::from_bytes(m).ok_or_else(|| {
                format!("--mtu {m}: the path MTU must be 256, 512, 1024, 2048 or 4096")
            })
        })
        .transpose()?;
    let tx_depth = args.tx_depth.unwrap_or(default_depth);
    if tx_depth == 0 || tx_depth > 65_536 {
        return Err("--tx-depth must be in 1..=65536".into());
    }
    let link_rate_bps = parse_link_speed(&args.link_speed).map_err(|e| e.to_string())?;
    if args.drop_every == Some(0) || args.mark_ce_every == Some(0) {
        return Err("--drop-every and --mark-ce-every take N >= 1".into());
    }
    if let Some(server) = &args.server {
        parse_server(server)?;
    }
    if args.server.is_some() && args.clients != 1 {
        return Err("--clients is for the server (no SERVER argument)".into());
    }
    if !(args.connect_timeout >= 0.0 && args.connect_timeout <= 3600.0) {
        return Err("--connect-timeout must be in 0..=3600 seconds".into());
    }
    if let Some(gid) = args.gid {
        if gid.is_unspecified() || gid.is_multicast() || gid.to_ipv4_mapped().is_some() {
            return Err(format!(
                "--gid {gid}: a GID must be a unicast IPv6 address (not ::, multicast or \
                 IPv4-mapped)"
            ));
        }
    }
    Ok(Settings {
        test,
        server: args.server.clone(),
        server_addrs: Vec::new(),
        device: args.device.clone(),
        port: args.port,
        sizes,
        iterations,
        duration_s,
        qps: args.qps,
        mtu,
        tx_depth,
        retransmit_timeout_ns: local_ack_timeout_ns(args.qp_timeout),
        retry_count: args.retry_count,
        tclass: args.tclass,
        report_gbits: args.report_gbits,
        pcp: args.pcp,
        vlan: args.vlan,
        prio_map: match args.prio_map {
            PriorityMapArg::Azure => PriorityMap::Azure,
            PriorityMapArg::Precedence => PriorityMap::Precedence,
        },
        link_rate_bps,
        dcqcn: args.dcqcn,
        rp: rp_params(args, link_rate_bps)?,
        np: np_config(args)?,
        json: args.json,
        source_ip: args.source_ip,
        ipv6: args.ipv6 || args.gid.is_some(),
        gid: args.gid,
        qdisc_bypass: args.qdisc_bypass,
        catch_up_ns: args.catch_up_us.saturating_mul(NANOS_PER_MICRO),
        connect_timeout_s: args.connect_timeout,
        clients: usize::from(args.clients),
        drop_every: args.drop_every,
        mark_ce_every: args.mark_ce_every,
    })
}

/// The GID `--ipv6` takes without `--gid`: the first global IPv6 address, in the interface's
/// order (link-local, loopback, unspecified and multicast addresses are not GIDs a peer can
/// reach).
#[must_use]
pub fn first_global_ipv6(addrs: &[Ipv6Addr]) -> Option<Ipv6Addr> {
    addrs.iter().copied().find(|a| {
        !(a.is_unspecified()
            || a.is_loopback()
            || a.is_multicast()
            || a.is_unicast_link_local()
            || a.to_ipv4_mapped().is_some())
    })
}

/// With `--ipv6` and no `--gid`, fills [`Settings::gid`] from the interface's addresses. The
/// error (no such interface, no global IPv6 address) is a bad argument: exit code 2.
pub fn resolve_gid(settings: &mut Settings) -> Result<(), String> {
    if !settings.ipv6 || settings.gid.is_some() {
        return Ok(());
    }
    let device = &settings.device;
    sys::interface_mtu(device)
        .map_err(|e| format!("--ipv6: interface {device:?}: {e} (is it in this namespace?)"))?;
    let addrs = sys::interface_ipv6_addrs(device)
        .map_err(|e| format!("--ipv6: reading the addresses of {device:?}: {e}"))?;
    let gid = first_global_ipv6(&addrs).ok_or_else(|| {
        format!(
            "--ipv6: interface {device:?} has no global IPv6 address (link-local ones are not \
             GIDs); give the RoCE address with --gid ADDR (it needs no kernel IPv6 on the \
             interface)"
        )
    })?;
    settings.gid = Some(gid);
    Ok(())
}

/// SERVER, parsed: what to resolve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerSpec {
    /// An IPv4 or IPv6 address (brackets removed).
    Ip(IpAddr),
    /// An IPv6 address with a zone (`fe80::2%eth0`, `fe80::2%3`): the interface name or index.
    Scoped(Ipv6Addr, String),
    /// A host name, for the resolver.
    Name(String),
}

/// Parses SERVER: `10.0.0.2`, `fd00::2`, `[fd00::2]`, `fe80::2%eth0` (also bracketed), or a host
/// name. The port is never part of it (`-p`). The error says what is wrong (exit code 2).
pub fn parse_server(text: &str) -> Result<ServerSpec, String> {
    let bad = |why: &str| Err(format!("SERVER {text:?}: {why}"));
    if text.is_empty() {
        return bad("empty");
    }
    let (inner, bracketed) = match text.strip_prefix('[') {
        Some(rest) => match rest.strip_suffix(']') {
            Some(inner) => (inner, true),
            None if rest.contains("]:") => {
                return bad("give the port with -p, not after the address")
            }
            None => return bad("no closing ']'"),
        },
        None => (text, false),
    };
    if inner.contains(['[', ']']) {
        return bad("stray bracket");
    }
    if let Some((addr, zone)) = inner.split_once('%') {
        let Ok(addr) = addr.parse::<Ipv6Addr>() else {
            return bad("only an IPv6 address takes a %zone");
        };
        if zone.is_empty() || zone.contains(['%', '/', ' ']) || zone.starts_with('.') {
            return bad("the %zone must be an interface name or index");
        }
        return Ok(ServerSpec::Scoped(addr, zone.to_owned()));
    }
    if let Ok(ip) = inner.parse::<IpAddr>() {
        if bracketed && ip.is_ipv4() {
            return bad("brackets are for IPv6 addresses");
        }
        return Ok(ServerSpec::Ip(ip));
    }
    if bracketed {
        return bad("not an IPv6 address");
    }
    if inner.contains(':') {
        return bad(
            "not an IPv4 or IPv6 address, nor a host name (a host name has no ':'; give the port \
             with -p)",
        );
    }
    if inner.contains(|c: char| c.is_whitespace() || c.is_control() || c == '/') {
        return bad("not a host name");
    }
    Ok(ServerSpec::Name(inner.to_owned()))
}

/// The addresses of SERVER on `port`, in the order to try them. A link-local IPv6 address needs
/// an interface: its %zone, else `device` (the RoCE interface, `-d`). A host name resolves to
/// every address the resolver gives, of either family. The error (bad syntax, no such zone, a name
/// that does not resolve) is a bad argument: exit code 2.
pub fn server_addrs(server: &str, port: u16, device: &str) -> Result<Vec<SocketAddr>, String> {
    let zone_index = |zone: &str| -> Result<u32, String> {
        if let Ok(index) = zone.parse::<u32>() {
            return Ok(index);
        }
        sys::interface_index(zone).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => format!(
                "SERVER {server:?}: no interface {zone:?} in this network namespace (a \
                 link-local address's zone: %IFACE, or the -d interface)"
            ),
            _ => format!("SERVER {server:?}: interface {zone:?}: {e}"),
        })
    };
    match parse_server(server)? {
        ServerSpec::Ip(IpAddr::V6(ip)) if ip.is_unicast_link_local() => {
            let scope = zone_index(device)?;
            Ok(vec![SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))])
        }
        ServerSpec::Ip(ip) => Ok(vec![SocketAddr::new(ip, port)]),
        ServerSpec::Scoped(ip, zone) => {
            let scope = zone_index(&zone)?;
            Ok(vec![SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope))])
        }
        ServerSpec::Name(name) => {
            let addrs: Vec<SocketAddr> = (name.as_str(), port)
                .to_socket_addrs()
                .map_err(|e| format!("SERVER {name:?}: cannot resolve the host name: {e}"))?
                .collect();
            if addrs.is_empty() {
                return Err(format!("SERVER {name:?}: the host name has no address"));
            }
            Ok(addrs)
        }
    }
}

/// In client mode, fills [`Settings::server_addrs`] (see [`server_addrs`]). The error is a bad
/// argument: exit code 2.
pub fn resolve_server(settings: &mut Settings) -> Result<(), String> {
    if let Some(server) = &settings.server {
        settings.server_addrs = server_addrs(server, settings.port, &settings.device)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(line: &[&str]) -> Result<Settings, String> {
        let cli = Cli::try_parse_from(std::iter::once("rocegen").chain(line.iter().copied()))
            .map_err(|e| e.to_string())?;
        match &cli.test {
            TestCommand::WriteBw(args) => settings(TestKind::WriteBw, args),
            TestCommand::WriteLat(args) => settings(TestKind::WriteLat, args),
        }
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn perftest_shapes() {
        let s = parse(&["write_bw", "-d", "eth0"]).unwrap();
        assert_eq!(s.server, None);
        assert_eq!(
            (s.sizes.clone(), s.iterations, s.tx_depth),
            (vec![65_536], Some(5_000), 128)
        );
        assert_eq!(s.port, 18_515);
        assert_eq!(s.link_rate_bps, 1_000_000_000);
        assert_eq!(s.retransmit_timeout_ns, 1_073_741_824);
        assert!(matches!(s.rp, Some(RpParams::Nvidia(_))));
        assert_eq!(s.np.unwrap().min_time_between_cnps_ns, 2_000);
        let s = parse(&[
            "write_bw",
            "-d",
            "eth0",
            "10.0.0.2",
            "-s",
            "4096",
            "-n",
            "10",
            "-q",
            "4",
            "-m",
            "1024",
            "--tclass",
            "106",
            "--report_gbits",
            "-p",
            "20000",
        ])
        .unwrap();
        assert_eq!(s.server.as_deref(), Some("10.0.0.2"));
        assert_eq!((s.dscp(), s.data_priority()), (26, 1));
        assert!(s.report_gbits);
        let s = parse(&[
            "write_lat",
            "-d",
            "eth0",
            "-a",
            "--tclass",
            "12",
            "--vlan",
            "0",
        ])
        .unwrap();
        assert_eq!(s.sizes.len(), 23);
        assert_eq!((s.sizes[0], s.sizes[22]), (2, 1 << 23));
        assert_eq!((s.iterations, s.tx_depth), (Some(1_000), 1));
        assert_eq!((s.dscp(), s.data_priority(), s.vlan), (3, 3, Some(0)));
        let s = parse(&[
            "write_bw",
            "-d",
            "e",
            "-D",
            "2",
            "--pcp",
            "5",
            "--prio-map",
            "precedence",
        ])
        .unwrap();
        assert_eq!(
            (s.iterations, s.duration_s, s.data_priority()),
            (None, Some(2.0), 5)
        );
    }

    #[test]
    fn dcqcn_overrides() {
        let s = parse(&[
            "write_bw",
            "-d",
            "e",
            "--dcqcn",
            "nvidia",
            "--rpg_time_reset",
            "55",
            "--rpg_ai_rate",
            "40",
            "--clamp_tgt_rate",
            "1",
            "--min_time_between_cnps",
            "50",
        ])
        .unwrap();
        let Some(RpParams::Nvidia(p)) = s.rp else {
            panic!("nvidia")
        };
        assert_eq!(
            (p.rpg_time_reset, p.rpg_ai_rate, p.clamp_tgt_rate),
            (55, 40, true)
        );
        assert_eq!(s.np.unwrap().min_time_between_cnps_ns, 50_000);
        let s = parse(&[
            "write_bw",
            "-d",
            "e",
            "--dcqcn",
            "paper",
            "--rpg_time_reset",
            "100",
            "--dce_tcp_g",
            "1020",
        ])
        .unwrap();
        let Some(RpParams::Paper(p)) = s.rp else {
            panic!("paper")
        };
        assert_eq!(p.increase_timer_ns, 100_000);
        assert!((p.g - 4.0 / 1024.0).abs() < 1e-12);
        assert_eq!(s.np.unwrap().min_time_between_cnps_ns, 50_000);
        assert!(parse(&["write_bw", "-d", "e", "--dcqcn", "paper", "--rpg_gd", "10"]).is_err());
        // The default minimum rate: HPCC-ns3's 100 Mb/s on fast links, 1/100 of a slow link (a
        // minimum at the line rate would make every cut a no-op).
        for (speed, min_rate_bps) in [
            ("100G", 100_000_000),
            ("10G", 100_000_000),
            ("1G", 10_000_000),
            ("100M", 1_000_000),
        ] {
            let s = parse(&[
                "write_bw",
                "-d",
                "e",
                "--dcqcn",
                "paper",
                "--link-speed",
                speed,
            ])
            .unwrap();
            let Some(RpParams::Paper(p)) = s.rp else {
                panic!("paper")
            };
            assert_eq!(p.min_rate_bps, min_rate_bps, "{speed}");
        }
        assert!(parse(&[
            "write_bw",
            "-d",
            "e",
            "--dcqcn",
            "off",
            "--rpg_ai_rate",
            "5"
        ])
        .is_err());
        let s = parse(&["write_bw", "-d", "e", "--dcqcn", "off"]).unwrap();
        assert_eq!((s.rp, s.np), (None, None));
    }

    #[test]
    fn bad_arguments_are_refused() {
        for line in [
            &["write_bw", "-d", "e", "-m", "1500"][..],
            &["write_bw", "-d", "e", "-q", "0"],
            &["write_bw", "-d", "e", "-n", "5", "-D", "2"],
            &["write_bw", "-d", "e", "-s", "0"],
            &["write_bw", "-d", "e", "--link-speed", "fast"],
            &["write_bw", "-d", "e", "--pcp", "8"],
            &["write_bw", "-d", "e", "--drop-every", "0"],
            &["write_lat", "-d", "e", "-q", "2"],
            &["write_lat", "-d", "e", "-D", "1"],
            &["write_bw", "-d", "e", "10.0.0.1", "--clients", "2"],
            &["write_bw"],
        ] {
            assert!(parse(line).is_err(), "{line:?}");
        }
    }

    #[test]
    fn pmtu_from_interface_mtu() {
        assert_eq!(largest_pmtu_for(1500, false), Some(PathMtu::Mtu1024));
        assert_eq!(largest_pmtu_for(9000, false), Some(PathMtu::Mtu4096));
        assert_eq!(largest_pmtu_for(4156, false), Some(PathMtu::Mtu4096));
        assert_eq!(largest_pmtu_for(4155, false), Some(PathMtu::Mtu2048));
        assert_eq!(largest_pmtu_for(200, false), None);
        // IPv6: a 40-byte header, 20 bytes more.
        assert_eq!(largest_pmtu_for(4176, true), Some(PathMtu::Mtu4096));
        assert_eq!(largest_pmtu_for(4175, true), Some(PathMtu::Mtu2048));
        assert_eq!(largest_pmtu_for(1500, true), Some(PathMtu::Mtu1024));
    }

    #[test]
    fn ipv6_and_gid() {
        let s = parse(&["write_bw", "-d", "e", "10.0.0.2"]).unwrap();
        assert_eq!((s.ipv6, s.gid), (false, None));
        let s = parse(&["write_bw", "-d", "e", "10.0.0.2", "--ipv6"]).unwrap();
        assert_eq!((s.ipv6, s.gid), (true, None));
        let s = parse(&["write_bw", "-d", "e", "--gid", "fd00::2"]).unwrap();
        assert_eq!((s.ipv6, s.gid), (true, Some("fd00::2".parse().unwrap())));
        for line in [
            &["write_bw", "-d", "e", "--gid", "10.0.0.1"][..],
            &["write_bw", "-d", "e", "--gid", "::"],
            &["write_bw", "-d", "e", "--gid", "ff02::1"],
            &["write_bw", "-d", "e", "--gid", "::ffff:10.0.0.1"],
            &["write_bw", "-d", "e", "--ipv6", "--source-ip", "10.0.0.1"],
            &[
                "write_bw",
                "-d",
                "e",
                "--gid",
                "fd00::1",
                "--source-ip",
                "10.0.0.1",
            ],
        ] {
            assert!(parse(line).is_err(), "{line:?}");
        }
        // The GID --ipv6 takes: the first global address, never a link-local one.
        let addrs: Vec<Ipv6Addr> = ["fe80::1", "::1", "fd00::7", "2001:db8::1"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        assert_eq!(first_global_ipv6(&addrs), Some("fd00::7".parse().unwrap()));
        assert_eq!(first_global_ipv6(&addrs[..2]), None);
        // Without one, a clear error that names the interface and suggests --gid.
        let mut s = parse(&["write_bw", "-d", "lo", "--ipv6"]).unwrap();
        let error = resolve_gid(&mut s).unwrap_err();
        assert!(
            error.contains("\"lo\"") && error.contains("--gid"),
            "{error}"
        );
        assert_eq!(s.gid, None);
        let mut s = parse(&["write_bw", "-d", "no-such-if0", "--ipv6"]).unwrap();
        assert!(resolve_gid(&mut s).unwrap_err().contains("no-such-if0"));
        // An explicit GID is kept as given.
        let mut s = parse(&["write_bw", "-d", "no-such-if0", "--gid", "fd00::1"]).unwrap();
        resolve_gid(&mut s).unwrap();
        assert_eq!(s.gid, Some("fd00::1".parse().unwrap()));
    }

    #[test]
    fn server_addresses_of_either_family() {
        let ip = |t: &str| ServerSpec::Ip(t.parse().unwrap());
        assert_eq!(parse_server("10.0.0.2"), Ok(ip("10.0.0.2")));
        assert_eq!(parse_server("fd00::2"), Ok(ip("fd00::2")));
        assert_eq!(parse_server("[fd00::2]"), Ok(ip("fd00::2")));
        assert_eq!(parse_server("::ffff:10.0.0.2"), Ok(ip("::ffff:10.0.0.2")));
        assert_eq!(
            parse_server("fe80::2%eth0"),
            Ok(ServerSpec::Scoped(
                "fe80::2".parse().unwrap(),
                "eth0".into()
            ))
        );
        assert_eq!(
            parse_server("[fe80::2%3]"),
            Ok(ServerSpec::Scoped("fe80::2".parse().unwrap(), "3".into()))
        );
        assert_eq!(
            parse_server("server-b.example"),
            Ok(ServerSpec::Name("server-b.example".into()))
        );
        // Bad input: an error naming SERVER and the problem, never a panic.
        for (text, why) in [
            ("", "empty"),
            ("[fd00::2", "no closing"),
            ("[fd00::2]:18515", "-p"),
            ("10.0.0.2:18515", "-p"),
            ("fd00::2]", "stray bracket"),
            ("[[fd00::2]]", "stray bracket"),
            ("[10.0.0.2]", "brackets are for IPv6"),
            ("[host]", "not an IPv6 address"),
            ("fd00:::2", "not an IPv4 or IPv6 address"),
            ("10.0.0.2%eth0", "only an IPv6 address takes a %zone"),
            ("fe80::2%", "%zone"),
            ("fe80::2%a/b", "%zone"),
            ("two words", "not a host name"),
        ] {
            let error = parse_server(text).unwrap_err();
            assert!(
                error.starts_with(&format!("SERVER {text:?}: ")) && error.contains(why),
                "{text:?}: {error}"
            );
        }
        // Checked with the other arguments (a bad argument: exit code 2).
        let error = parse(&["write_bw", "-d", "eth0", "[fd00::2"]).unwrap_err();
        assert!(error.contains("no closing"), "{error}");
        let s = parse(&["write_bw", "-d", "eth0", "[fd00::2]"]).unwrap();
        assert_eq!(s.server.as_deref(), Some("[fd00::2]"));
        assert!(s.server_addrs.is_empty());
    }

    #[test]
    fn server_addresses_resolve_with_port_and_zone() {
        let lo_index = sys::interface_index("lo").unwrap();
        let v6 = |t: &str, scope: u32| {
            SocketAddr::V6(SocketAddrV6::new(t.parse().unwrap(), 7000, 0, scope))
        };
        assert_eq!(
            server_addrs("10.0.0.2", 7000, "eth0"),
            Ok(vec!["10.0.0.2:7000".parse().unwrap()])
        );
        assert_eq!(
            server_addrs("[fd00::2]", 7000, "eth0"),
            Ok(vec![v6("fd00::2", 0)])
        );
        // A link-local address takes its zone, by name or index, else the RoCE interface's.
        assert_eq!(
            server_addrs("fe80::2%lo", 7000, "eth0"),
            Ok(vec![v6("fe80::2", lo_index)])
        );
        assert_eq!(
            server_addrs("fe80::2%42", 7000, "eth0"),
            Ok(vec![v6("fe80::2", 42)])
        );
        assert_eq!(
            server_addrs("fe80::2", 7000, "lo"),
            Ok(vec![v6("fe80::2", lo_index)])
        );
        let error = server_addrs("fe80::2%no-such-if0", 7000, "lo").unwrap_err();
        assert!(error.contains("\"no-such-if0\""), "{error}");
        let error = server_addrs("fe80::2", 7000, "no-such-if0").unwrap_err();
        assert!(error.contains("\"no-such-if0\""), "{error}");
        // A host name: every address, of either family, with the port.
        let local = server_addrs("localhost", 7000, "lo").unwrap();
        assert!(!local.is_empty());
        assert!(
            local
                .iter()
                .all(|a| a.ip().is_loopback() && a.port() == 7000),
            "{local:?}"
        );
        let error = server_addrs("no-such-host.invalid", 7000, "lo").unwrap_err();
        assert!(error.contains("cannot resolve"), "{error}");
        // resolve_server fills the settings of a client only.
        let mut s = parse(&["write_bw", "-d", "lo", "fd00::2", "-p", "7000"]).unwrap();
        resolve_server(&mut s).unwrap();
        assert_eq!(s.server_addrs, vec![v6("fd00::2", 0)]);
        let mut s = parse(&["write_bw", "-d", "lo"]).unwrap();
        resolve_server(&mut s).unwrap();
        assert!(s.server_addrs.is_empty());
    }
}
