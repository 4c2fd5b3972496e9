//! Running a test: the out-of-band handshake, the host event loop over an AF_PACKET port, the
//! workloads (write_bw and write_lat, client and server) and the final report.
//!
//! # The event loop
//!
//! One thread. Each iteration reads the clock once, then: receives every frame the ring holds
//! (bounded per iteration) and feeds it to the [`Nic`] (PFC/PAUSE to the pause state, CNPs to the
//! RPs, ACKs to the requesters, WRITEs to the responders and the NP); runs the NIC's timers;
//! reads out-of-band messages; lets the workload collect completions and post WRITEs; takes every
//! frame the NIC has due (pacing, link and pause permitting) and sends them with one `sendmmsg`.
//! Then it sleeps in `ppoll` on the ring, the TCP connection (and the TX socket when the kernel
//! pushed back) until the earliest deadline of the NIC and the workload: no frame due means no
//! CPU spent, which matters in a lab that runs several hosts on two cores.

use std::hash::{BuildHasher, Hasher};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::os::fd::AsFd;
use std::time::Duration;

use headroom_afpacket::{
    AfPacketConfig, AfPacketPort, AfPacketRx, AfPacketStatsHandle, AfPacketTx,
};
use headroom_core::frame::Frame;
use headroom_io::{FramePool, PoolConfig, PoolFrame, RxQueue, TxQueue, BURST_MAX};
use headroom_roce::pause::Priority;
use headroom_roce::rc::{PathMtu, RequesterState};
use headroom_roce::time::Instant;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::roce::ROCEV2_UDP_PORT;

use crate::cli::{largest_pmtu_for, DcqcnMode, Settings, TestKind};
use crate::nic::{Nic, NicConfig, NicError, QpConfig};
use crate::oob::{Endpoint, Message, Oob, OobError, QpInfo, TestShape, PROTOCOL_VERSION};
use crate::report::{
    BwRow, CountersReport, DriverStats, EndpointReport, LatRow, PriorityReport, QpReport, Report,
    TimeoutEventReport,
};
use crate::sys;

/// Frames received per loop iteration at most (then the loop goes on to send).
const RX_BUDGET: usize = 8 * BURST_MAX;
/// Frames sent per `tx_burst`.
const TX_BATCH: usize = BURST_MAX;
/// Longest sleep: the loop wakes at least this often even with nothing due.
const SLEEP_MAX: Duration = Duration::from_millis(100);
/// How long the handshake waits for the peer's messages.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a finished host keeps sending pending ACKs/CNPs.
const FLUSH_NS: u64 = 200_000_000;
/// How long the duration-mode client waits for outstanding WRITEs after the test time.
const DRAIN_NS: u64 = 10_000_000_000;

/// Why a run failed.
#[derive(Debug)]
pub enum RunError {
    /// Setting up failed (interface, addresses, sockets).
    Setup(String),
    /// The out-of-band exchange failed.
    Oob(OobError),
    /// The peer refused or reported a failure.
    Peer(String),
    /// A queue pair failed (retries exhausted, remote error) or the test could not finish.
    Test(String),
}

impl std::fmt::Display for RunError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Setup(why) => write!(f, "setup: {why}"),
            Self::Oob(e) => write!(f, "{e}"),
            Self::Peer(why) => write!(f, "peer: {why}"),
            Self::Test(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for RunError {}

impl From<OobError> for RunError {
    fn from(e: OobError) -> Self {
        Self::Oob(e)
    }
}

/// The result of a run: the report (which carries the error, if any).
#[derive(Debug)]
pub struct Outcome {
    /// What to print.
    pub report: Report,
}

/// Monotonic time since the start of the run.
#[derive(Clone, Copy, Debug)]
struct Clock(std::time::Instant);

impl Clock {
    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.0.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// A small, seeded generator for QPNs, PSNs and keys (splitmix64). The seed comes from the
/// process's random hasher keys; nothing here needs cryptographic quality.
struct SplitMix(u64);

impl SplitMix {
    fn from_entropy() -> Self {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos()),
        );
        Self(hasher.finish())
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// Makes this side's QPs: consecutive QPNs from a random base, random PSNs and keys, and a
/// page-aligned buffer address per QP (like perftest's local address lines).
fn make_qps(count: usize) -> Vec<QpInfo> {
    let mut rng = SplitMix::from_entropy();
    // QPNs 0 and 1 are special (SMI/GSI); stay clear of them and of the 24-bit top.
    let span = 0x00FF_0000 - count as u64;
    let base = 0x100 + rng.next() % span;
    (0..count)
        .map(|i| QpInfo {
            qpn: (base + i as u64) as u32,
            psn: (rng.next() & 0x00FF_FFFF) as u32,
            rkey: rng.next() as u32,
            va: 0x7F00_0000_0000 | ((rng.next() & 0xFF_FFFF) << 12),
        })
        .collect()
}

fn format_mac(mac: MacAddress) -> String {
    let b = mac.0;
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[0], b[1], b[2], b[3], b[4], b[5]
    )
}

fn parse_mac(text: &str) -> Option<MacAddress> {
    let mut bytes = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut bytes {
        *byte = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(MacAddress(bytes))
}

/// The port, its pool and the TCP connection: everything with a file descriptor.
struct Port {
    rx: AfPacketRx,
    tx: AfPacketTx,
    pool: FramePool,
    stats: AfPacketStatsHandle,
    mac: MacAddress,
    max_frame_bytes: usize,
    interface_mtu: usize,
}

fn open_port(settings: &Settings) -> Result<Port, RunError> {
    let interface_mtu = sys::interface_mtu(&settings.device).map_err(|e| {
        RunError::Setup(format!(
            "interface {:?}: {e} (is it in this network namespace?)",
            settings.device
        ))
    })?;
    let max_frame_bytes = interface_mtu + 18;
    let data_room_bytes = max_frame_bytes.next_multiple_of(64).max(2048);
    let pool = FramePool::new(PoolConfig {
        frame_count: 1024,
        data_room_bytes,
        headroom_bytes: 128,
        magazine_frames: headroom_io::pool::default_magazine_frames(1024),
    })
    .map_err(|e| RunError::Setup(format!("frame pool: {e}")))?;
    let config = AfPacketConfig {
        // 8 MiB of ring: tens of milliseconds of traffic at 1 Gb/s while the loop is descheduled.
        block_count: 256,
        qdisc_bypass: settings.qdisc_bypass,
        ..AfPacketConfig::default()
    };
    let port = AfPacketPort::open(&settings.device, pool.clone(), &config).map_err(|e| {
        RunError::Setup(format!(
            "opening {:?}: {e} (rocegen needs root or CAP_NET_RAW)",
            settings.device
        ))
    })?;
    let mac = MacAddress(port.info().mac);
    let max_frame_bytes = port.info().max_frame_len.min(max_frame_bytes);
    let stats = port.stats_handle();
    let (rx, tx) = port.split();
    Ok(Port {
        rx,
        tx,
        pool,
        stats,
        mac,
        max_frame_bytes,
        interface_mtu,
    })
}

/// Our RoCE address: with `--ipv6` the GID (`--gid`, else the interface's first global IPv6
/// address); otherwise our IPv4 address on the interface (see [`local_ipv4`]).
fn local_roce_addr(settings: &Settings, oob_local: IpAddr) -> Result<IpAddr, RunError> {
    if !settings.ipv6 {
        return local_ipv4(settings, oob_local).map(IpAddr::V4);
    }
    if let Some(gid) = settings.gid {
        return Ok(IpAddr::V6(gid));
    }
    // `main` resolves it first (a bad argument, exit 2); a library caller may not have.
    let mut resolved = settings.clone();
    crate::cli::resolve_gid(&mut resolved).map_err(RunError::Setup)?;
    resolved
        .gid
        .map(IpAddr::V6)
        .ok_or_else(|| RunError::Setup("--ipv6: no GID".into()))
}

fn family_name(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        "IPv6 (--ipv6)"
    } else {
        "IPv4"
    }
}

/// Both sides must run RoCE over the same IP family: refuses a peer of the other one, with a
/// message that says what to do (it is sent to the peer too).
fn check_family(
    (ours, our_role): (IpAddr, &str),
    (theirs, their_role): (IpAddr, &str),
) -> Result<(), RunError> {
    if ours.is_ipv6() == theirs.is_ipv6() {
        return Ok(());
    }
    Err(RunError::Peer(format!(
        "address family mismatch: the {our_role} runs RoCEv2 over {} ({ours}) but the \
         {their_role} over {} ({theirs}); run both sides with --ipv6 (or --gid), or neither",
        family_name(ours),
        family_name(theirs)
    )))
}

/// Our IPv4 address on the interface: `--source-ip`, else the address the TCP exchange uses if
/// it is on the interface, else the interface's only address.
fn local_ipv4(settings: &Settings, oob_local: IpAddr) -> Result<Ipv4Addr, RunError> {
    if let Some(ip) = settings.source_ip {
        return Ok(ip);
    }
    let addrs = sys::interface_ipv4_addrs(&settings.device)
        .map_err(|e| RunError::Setup(format!("reading the addresses of the interface: {e}")))?;
    if let IpAddr::V4(v4) = oob_local {
        if addrs.contains(&v4) {
            return Ok(v4);
        }
    }
    match addrs.as_slice() {
        [only] => Ok(*only),
        [] => Err(RunError::Setup(format!(
            "interface {:?} has no IPv4 address: RoCEv2 needs one (ip addr add ...)",
            settings.device
        ))),
        _ => Err(RunError::Setup(format!(
            "interface {:?} has several IPv4 addresses {addrs:?} and the TCP exchange used none \
             of them: pick one with --source-ip",
            settings.device
        ))),
    }
}

/// The UDP 4791 port the kernel would otherwise answer with ICMP port unreachable: a real RoCE
/// NIC steers RoCEv2 to its RDMA engine so the host stack never sees it; ours also reaches the
/// host stack (AF_PACKET only taps), so we hold the port open and never read it. `None` if
/// another rocegen on this host holds it already (which serves the same purpose).
/// Over IPv6 the same holds where the kernel has the GID on the interface; where it does not
/// (kernel IPv6 off, or a GID given with `--gid` only) the bind fails and nothing is needed.
fn udp_4791_sink(ip: IpAddr) -> Option<UdpSocket> {
    UdpSocket::bind((ip, ROCEV2_UDP_PORT)).ok()
}

/// One peer's part of the NIC: our QPs for it and its endpoint.
struct PeerQps<'a> {
    local: &'a [QpInfo],
    remote: &'a Endpoint,
}

fn nic_config(
    settings: &Settings,
    port: &Port,
    local_ip: IpAddr,
    pmtu: PathMtu,
    tx_depth: usize,
    peers: &[PeerQps<'_>],
) -> Result<NicConfig, RunError> {
    let mut qps = Vec::new();
    for peer in peers {
        let peer_mac = parse_mac(&peer.remote.mac)
            .ok_or_else(|| RunError::Peer(format!("bad MAC address {:?}", peer.remote.mac)))?;
        // Across routers the frames go to the next hop's MAC, not the peer's (IPv6 peers are
        // taken as on the link).
        let peer_mac = match peer.remote.ip {
            IpAddr::V4(ip) => MacAddress(
                crate::nexthop::destination_mac(&settings.device, ip, peer_mac.0)
                    .map_err(RunError::Peer)?,
            ),
            IpAddr::V6(_) => peer_mac,
        };
        if peer.local.len() != peer.remote.qps.len() {
            return Err(RunError::Peer(
                "the two sides have different numbers of QPs".into(),
            ));
        }
        qps.extend(
            peer.local
                .iter()
                .zip(&peer.remote.qps)
                .map(|(l, r)| QpConfig {
                    peer_mac,
                    peer_ip: peer.remote.ip,
                    local_qpn: l.qpn,
                    remote_qpn: r.qpn,
                    send_psn: l.psn,
                    recv_psn: r.psn,
                    remote_va: r.va,
                    remote_rkey: r.rkey,
                    vlan_id: None,
                }),
        );
    }
    Ok(NicConfig {
        local_mac: port.mac,
        local_ip,
        vlan_id: settings.vlan,
        data_dscp: settings.dscp(),
        data_priority: settings.data_priority(),
        link_rate_bps: settings.link_rate_bps,
        max_frame_bytes: port.max_frame_bytes,
        pmtu,
        rp: settings.rp,
        np: settings.np,
        window_packets: 1024,
        retransmit_timeout_ns: settings.retransmit_timeout_ns,
        retry_count_max: Some(settings.retry_count),
        send_queue_depth: tx_depth.max(16),
        ack_coalesce_packets: 16,
        catch_up_ns: settings.catch_up_ns,
        drop_every: settings.drop_every,
        mark_ce_every: settings.mark_ce_every,
        qps,
    })
}

// ---- workloads ----------------------------------------------------------------------------------

/// What drives the NIC: posts WRITEs, collects completions, decides when the test is over.
trait Workload {
    /// Called every loop iteration after the inputs.
    fn poll(&mut self, now: Instant, nic: &mut Nic) -> Result<(), RunError>;
    /// An out-of-band message arrived from peer `peer` during the run.
    fn on_message(&mut self, peer: usize, message: Message) -> Result<(), RunError>;
    /// When the workload must be called at the latest.
    fn deadline(&self) -> Option<Instant>;
    /// Whether the test is over.
    fn finished(&self) -> bool;
}

fn check_qps(nic: &Nic) -> Result<(), RunError> {
    for qp in 0..nic.qp_count() {
        match nic.requester_state(qp) {
            RequesterState::Ready => {}
            RequesterState::RetryExceeded => {
                return Err(RunError::Test(format!(
                    "QP {:#x}: retransmission retries exhausted (the peer stopped answering)",
                    nic.qp_config(qp).local_qpn
                )))
            }
            RequesterState::RemoteError(syndrome) => {
                return Err(RunError::Test(format!(
                    "QP {:#x}: the peer NAKed with syndrome {syndrome:#04x}",
                    nic.qp_config(qp).local_qpn
                )))
            }
        }
    }
    Ok(())
}

fn unexpected(message: &Message) -> RunError {
    match message {
        Message::Error { reason } => RunError::Peer(reason.clone()),
        other => RunError::Peer(format!("unexpected message during the test: {other:?}")),
    }
}

/// write_bw, client: each QP writes `iterations` messages per size (or for a duration), keeping
/// `tx_depth` posted.
struct BwClient {
    sizes: Vec<u32>,
    iterations: Option<u64>,
    duration_ns: Option<u64>,
    tx_depth: u64,
    phase: usize,
    started: bool,
    /// Duration mode: end of the measured time.
    end: Option<Instant>,
    drain_deadline: Option<Instant>,
    next_wr_id: u64,
    posted: Vec<u64>,
    completed: Vec<u64>,
    posted_ns: Vec<u64>,
    completed_ns: Vec<u64>,
    completed_in_time: u64,
    rows: Vec<BwRow>,
    done: bool,
}

impl BwClient {
    fn new(settings: &Settings, tx_depth: usize, qps: usize) -> Self {
        let per_phase = settings
            .iterations
            .map_or(0, |n| usize::try_from(n).unwrap_or(0).saturating_mul(qps));
        Self {
            sizes: settings.sizes.clone(),
            iterations: settings.iterations,
            duration_ns: settings.duration_s.map(|s| (s * 1e9) as u64),
            tx_depth: tx_depth as u64,
            phase: 0,
            started: false,
            end: None,
            drain_deadline: None,
            next_wr_id: 0,
            posted: vec![0; qps],
            completed: vec![0; qps],
            // Allocated once per run; posting does not grow them.
            posted_ns: Vec::with_capacity(per_phase.min(1 << 26)),
            completed_ns: Vec::with_capacity(per_phase.min(1 << 26)),
            completed_in_time: 0,
            rows: Vec::new(),
            done: false,
        }
    }

    fn start_phase(&mut self, now: Instant) {
        self.started = true;
        self.posted.fill(0);
        self.completed.fill(0);
        self.posted_ns.clear();
        self.completed_ns.clear();
        self.completed_in_time = 0;
        self.end = self.duration_ns.map(|d| now.saturating_add_nanos(d));
        self.drain_deadline = None;
    }
}

impl Workload for BwClient {
    fn poll(&mut self, now: Instant, nic: &mut Nic) -> Result<(), RunError> {
        if self.done {
            return Ok(());
        }
        check_qps(nic)?;
        if !self.started {
            self.start_phase(now);
        }
        let size = self.sizes[self.phase];
        for qp in 0..nic.qp_count() {
            while nic.poll_completion(qp).is_some() {
                self.completed[qp] += 1;
                if self.iterations.is_some() {
                    self.completed_ns.push(now.as_nanos());
                } else if self.end.is_some_and(|end| now <= end) {
                    self.completed_in_time += 1;
                }
            }
        }
        let posting = match (self.iterations, self.end) {
            (Some(_), _) => true,
            (None, Some(end)) => now < end,
            (None, None) => false,
        };
        for qp in 0..nic.qp_count() {
            while posting
                && self.posted[qp] - self.completed[qp] < self.tx_depth
                && self.iterations.is_none_or(|n| self.posted[qp] < n)
            {
                if nic.post_write(qp, self.next_wr_id, size).is_err() {
                    break;
                }
                self.next_wr_id += 1;
                self.posted[qp] += 1;
                if self.iterations.is_some() {
                    self.posted_ns.push(now.as_nanos());
                }
            }
        }
        let all_completed = self.posted == self.completed;
        let phase_over = match self.iterations {
            Some(n) => self.completed.iter().all(|&c| c == n),
            None => !posting && all_completed,
        };
        if self.iterations.is_none() && !posting {
            let deadline = *self
                .drain_deadline
                .get_or_insert(now.saturating_add_nanos(DRAIN_NS));
            if !all_completed && now >= deadline {
                return Err(RunError::Test(
                    "outstanding WRITEs did not complete within 10 s after the test time".into(),
                ));
            }
        }
        if phase_over {
            let row = match self.iterations {
                Some(_) => BwRow::from_iterations(size, &self.posted_ns, &self.completed_ns),
                // perftest reports no peak in duration mode.
                None => BwRow::from_totals(
                    size,
                    self.completed_in_time,
                    self.duration_ns.unwrap_or(1),
                    0.0,
                ),
            };
            self.rows.push(row);
            self.phase += 1;
            self.started = false;
            if self.phase == self.sizes.len() {
                self.done = true;
            } else {
                // Start the next size at once.
                self.poll(now, nic)?;
            }
        }
        Ok(())
    }

    fn on_message(&mut self, _peer: usize, message: Message) -> Result<(), RunError> {
        Err(unexpected(&message))
    }

    fn deadline(&self) -> Option<Instant> {
        if self.done {
            return None;
        }
        match (self.end, self.drain_deadline) {
            (_, Some(drain)) => Some(drain),
            (Some(end), None) => Some(end),
            (None, None) => None,
        }
    }

    fn finished(&self) -> bool {
        self.done
    }
}

/// write_bw, server: receives until every client says it is done; counts what arrived per size.
struct BwServer {
    /// (size, messages, first delivery, last delivery).
    sizes: Vec<(u32, u64, u64, u64)>,
    peer_reports: Vec<Option<serde_json::Value>>,
}

/// Stores a client's final report; anything else is an error.
fn on_server_message(
    reports: &mut [Option<serde_json::Value>],
    peer: usize,
    message: Message,
) -> Result<(), RunError> {
    match message {
        Message::Done { report } => {
            if let Some(slot) = reports.get_mut(peer) {
                *slot = Some(report);
            }
            Ok(())
        }
        other => Err(unexpected(&other)),
    }
}

impl Workload for BwServer {
    fn poll(&mut self, now: Instant, nic: &mut Nic) -> Result<(), RunError> {
        for qp in 0..nic.qp_count() {
            while let Some(message) = nic.poll_delivered(qp) {
                let t = now.as_nanos();
                match self.sizes.iter_mut().find(|s| s.0 == message.len) {
                    Some(entry) => {
                        entry.1 += 1;
                        entry.3 = t;
                    }
                    None => self.sizes.push((message.len, 1, t, t)),
                }
            }
        }
        Ok(())
    }

    fn on_message(&mut self, peer: usize, message: Message) -> Result<(), RunError> {
        on_server_message(&mut self.peer_reports, peer, message)
    }

    fn deadline(&self) -> Option<Instant> {
        None
    }

    fn finished(&self) -> bool {
        self.peer_reports.iter().all(Option::is_some)
    }
}

impl BwServer {
    /// Receive-side rows: messages per size over first to last delivery (no peak).
    fn rows(&self) -> Vec<BwRow> {
        self.sizes
            .iter()
            .map(|&(size, count, first, last)| {
                BwRow::from_totals(size, count, last.saturating_sub(first), 0.0)
            })
            .collect()
    }
}

/// write_lat, client: post a WRITE, wait for the server's answering WRITE, repeat.
struct LatClient {
    sizes: Vec<u32>,
    iterations: u64,
    phase: usize,
    round: u64,
    waiting_since: Option<Instant>,
    samples_ns: Vec<u64>,
    rows: Vec<LatRow>,
    next_wr_id: u64,
    done: bool,
}

impl Workload for LatClient {
    fn poll(&mut self, now: Instant, nic: &mut Nic) -> Result<(), RunError> {
        if self.done {
            return Ok(());
        }
        check_qps(nic)?;
        while nic.poll_completion(0).is_some() {}
        while let Some(_answer) = nic.poll_delivered(0) {
            if let Some(since) = self.waiting_since.take() {
                // One-way latency: half the round trip (perftest's rtt_factor 2 for WRITE).
                self.samples_ns.push(now.saturating_nanos_since(since) / 2);
                self.round += 1;
            }
        }
        let size = self.sizes[self.phase];
        if self.round == self.iterations {
            self.rows.push(LatRow::from_samples(size, &self.samples_ns));
            self.samples_ns.clear();
            self.round = 0;
            self.phase += 1;
            if self.phase == self.sizes.len() {
                self.done = true;
                return Ok(());
            }
        }
        if self.waiting_since.is_none() {
            let size = self.sizes[self.phase];
            if nic.post_write(0, self.next_wr_id, size).is_ok() {
                self.next_wr_id += 1;
                self.waiting_since = Some(now);
            }
        }
        Ok(())
    }

    fn on_message(&mut self, _peer: usize, message: Message) -> Result<(), RunError> {
        Err(unexpected(&message))
    }

    fn deadline(&self) -> Option<Instant> {
        None
    }

    fn finished(&self) -> bool {
        self.done
    }
}

/// write_lat, server: answer every WRITE with a WRITE of the same size, on its QP.
struct LatServer {
    /// (QP, size) of answers not posted yet.
    backlog: Vec<(usize, u32)>,
    next_wr_id: u64,
    peer_reports: Vec<Option<serde_json::Value>>,
}

impl Workload for LatServer {
    fn poll(&mut self, _now: Instant, nic: &mut Nic) -> Result<(), RunError> {
        check_qps(nic)?;
        for qp in 0..nic.qp_count() {
            while nic.poll_completion(qp).is_some() {}
            while let Some(message) = nic.poll_delivered(qp) {
                self.backlog.push((qp, message.len));
            }
        }
        let mut index = 0;
        while index < self.backlog.len() {
            let (qp, len) = self.backlog[index];
            if nic.post_write(qp, self.next_wr_id, len).is_ok() {
                self.next_wr_id += 1;
                self.backlog.remove(index);
            } else {
                index += 1;
            }
        }
        Ok(())
    }

    fn on_message(&mut self, peer: usize, message: Message) -> Result<(), RunError> {
        on_server_message(&mut self.peer_reports, peer, message)
    }

    fn deadline(&self) -> Option<Instant> {
        None
    }

    fn finished(&self) -> bool {
        self.peer_reports.iter().all(Option::is_some)
    }
}

// ---- the host loop ------------------------------------------------------------------------------

struct Host {
    nic: Nic,
    port: Port,
    /// One exchange connection per peer (a server may have several clients).
    oobs: Vec<Oob>,
    clock: Clock,
    driver: DriverStats,
    poll: sys::PollSet,
    _udp_sink: Option<UdpSocket>,
}

fn cpu_times() -> (u64, u64) {
    // SAFETY: an all-zero rusage is a valid value for getrusage to overwrite.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` is a valid out-pointer for the duration of the call.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &raw mut usage) } != 0 {
        return (0, 0);
    }
    let ns = |tv: libc::timeval| {
        u64::try_from(tv.tv_sec).unwrap_or(0) * 1_000_000_000
            + u64::try_from(tv.tv_usec).unwrap_or(0) * 1_000
    };
    (ns(usage.ru_utime), ns(usage.ru_stime))
}

impl Host {
    fn new(nic: Nic, port: Port, oobs: Vec<Oob>, local_ip: IpAddr) -> Self {
        let poll = sys::PollSet::with_capacity(2 + oobs.len());
        Self {
            nic,
            port,
            oobs,
            clock: Clock(std::time::Instant::now()),
            driver: DriverStats::default(),
            poll,
            _udp_sink: udp_4791_sink(local_ip),
        }
    }

    /// Runs the loop until the workload is finished and pending ACKs/CNPs are out (or
    /// [`FLUSH_NS`] passed).
    fn run(&mut self, workload: &mut dyn Workload) -> Result<(), RunError> {
        let cpu_start = cpu_times();
        let wall_start = self.clock.now();
        let mut rx_frames: Vec<PoolFrame> = Vec::with_capacity(BURST_MAX);
        let mut tx_frames: Vec<PoolFrame> = Vec::with_capacity(TX_BATCH);
        let mut oob_readable = vec![false; self.oobs.len()];
        let mut flush_until: Option<Instant> = None;
        let mut last_iteration = wall_start;
        // Set when a sleep ended by its timeout: when it should have ended.
        let mut timed_wake: Option<Instant> = None;
        let result = 'main: loop {
            let now = self.clock.now();
            self.driver.loop_iterations += 1;
            if let Some(due) = timed_wake.take() {
                self.driver.max_wake_lateness_ns = self
                    .driver
                    .max_wake_lateness_ns
                    .max(now.saturating_nanos_since(due));
            }
            self.driver.max_iteration_gap_ns = self
                .driver
                .max_iteration_gap_ns
                .max(now.saturating_nanos_since(last_iteration));
            last_iteration = now;

            // Receive.
            let mut received = 0;
            let mut drained = false;
            loop {
                let n = self.port.rx.rx_burst(&mut rx_frames, BURST_MAX);
                for frame in rx_frames.drain(..) {
                    self.nic.handle_frame(now, frame.data());
                }
                received += n;
                if n < BURST_MAX {
                    drained = true;
                    break;
                }
                if received >= RX_BUDGET {
                    break;
                }
            }
            // Timers only once every frame that arrived is in: an ACK still in the ring must not
            // lose the race against the retransmission timer it would have stopped.
            if drained {
                self.nic.handle_timeout(now);
            }

            // Out of band.
            for (peer, readable) in oob_readable.iter_mut().enumerate() {
                if !std::mem::take(readable) {
                    continue;
                }
                loop {
                    match self.oobs[peer].try_recv() {
                        Ok(Some(message)) => {
                            if let Err(e) = workload.on_message(peer, message) {
                                break 'main Err(e);
                            }
                        }
                        Ok(None) => break,
                        Err(OobError::Closed) if workload.finished() => break,
                        Err(e) => break 'main Err(RunError::Oob(e)),
                    }
                }
            }

            // Workload.
            if let Err(e) = workload.poll(now, &mut self.nic) {
                break Err(e);
            }

            // Transmit.
            let mut produced = 0;
            while tx_frames.len() < TX_BATCH {
                let Some(mut frame) = self.port.pool.alloc_unzeroed(self.port.max_frame_bytes)
                else {
                    break;
                };
                match self.nic.poll_transmit(now, frame.data_mut()) {
                    Some(sent) => {
                        frame.truncate(sent.len);
                        tx_frames.push(frame);
                        produced += 1;
                    }
                    None => break,
                }
            }
            if !tx_frames.is_empty() {
                self.port.tx.tx_burst(&mut tx_frames);
            }

            // Finished?
            if workload.finished() {
                let until = *flush_until.get_or_insert(now.saturating_add_nanos(FLUSH_NS));
                if (!self.nic.has_pending_control() && tx_frames.is_empty()) || now >= until {
                    break Ok(());
                }
            }

            // Sleep until the next deadline.
            if produced == TX_BATCH || received >= RX_BUDGET {
                continue;
            }
            let deadline = [self.nic.poll_timeout(now), workload.deadline(), flush_until]
                .into_iter()
                .flatten()
                .min();
            let mut timeout = deadline.map_or(SLEEP_MAX, |d| {
                Duration::from_nanos(d.saturating_nanos_since(now)).min(SLEEP_MAX)
            });
            if timeout.is_zero() {
                if received > 0 || produced > 0 {
                    continue;
                }
                // Something claims to be due but nothing happened: do not spin on it.
                self.driver.no_progress_wakeups += 1;
                timeout = Duration::from_micros(50);
            }
            let want_write = !tx_frames.is_empty();
            if want_write {
                timeout = timeout.min(Duration::from_millis(1));
            }
            self.driver.waits += 1;
            self.driver.max_sleep_requested_ns = self
                .driver
                .max_sleep_requested_ns
                .max(u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX));
            self.poll.clear();
            self.poll.push(self.port.rx.as_fd(), true, false);
            self.poll.push(self.port.tx.as_fd(), false, want_write);
            for oob in &self.oobs {
                self.poll.push(oob.stream().as_fd(), true, false);
            }
            match self.poll.wait(Some(timeout)) {
                Ok(any) => {
                    for (peer, readable) in oob_readable.iter_mut().enumerate() {
                        *readable = self.poll.ready(2 + peer).readable;
                    }
                    if !any {
                        let slept = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
                        timed_wake = Some(now.saturating_add_nanos(slept));
                    }
                }
                Err(e) => break Err(RunError::Setup(format!("ppoll: {e}"))),
            }
        };
        let cpu_end = cpu_times();
        self.driver.cpu_user_ns += cpu_end.0.saturating_sub(cpu_start.0);
        self.driver.cpu_system_ns += cpu_end.1.saturating_sub(cpu_start.1);
        self.driver.wall_ns += self.clock.now().saturating_nanos_since(wall_start);
        result
    }
}

// ---- reports ------------------------------------------------------------------------------------

fn endpoint_report(e: &Endpoint) -> EndpointReport {
    EndpointReport {
        mac: e.mac.clone(),
        ip: e.ip.to_string(),
        qps: e.qps.clone(),
    }
}

fn dcqcn_name(mode: DcqcnMode) -> &'static str {
    match mode {
        DcqcnMode::Off => "off",
        DcqcnMode::Paper => "paper",
        DcqcnMode::Nvidia => "nvidia",
    }
}

#[allow(clippy::too_many_arguments)]
fn build_report(
    settings: &Settings,
    test: TestKind,
    role: &'static str,
    host: Option<&Host>,
    pmtu: Option<PathMtu>,
    local: Option<&Endpoint>,
    remotes: &[Endpoint],
    bw: Vec<BwRow>,
    latency: Vec<LatRow>,
    error: Option<String>,
) -> Report {
    let mut counters = CountersReport::default();
    let mut qp = Vec::new();
    if let Some(host) = host {
        let nic = &host.nic;
        let now = host.clock.now();
        let c = nic.counters();
        counters.priorities = Priority::ALL
            .iter()
            .map(|&p| {
                let s = nic.priority_stats(p);
                PriorityReport {
                    priority: p.get(),
                    pfc_frames_rx: s.pfc_frames_rx_total,
                    pfc_xoff_rx: s.pfc_xoff_frames_rx_total,
                    pfc_xon_rx: s.pfc_xon_frames_rx_total,
                    paused_ns: nic.pause().paused_ns(p, now),
                }
            })
            .collect();
        counters.pause_frames_rx = nic.pause().pause_frames_rx_total();
        counters.cnps_sent = c.tx_cnps_total;
        counters.cnps_received = c.rx_cnps_total;
        counters.ecn_ce_received = c.rx_ecn_ce_total;
        counters.ecn_ce_control_received = c.rx_ecn_ce_control_total;
        counters.icrc_errors = c.rx_icrc_errors_total;
        counters.data_packets_sent = c.tx_data_packets_total;
        counters.data_payload_bytes_sent = c.tx_payload_bytes_total;
        counters.acks_sent = c.tx_acks_total;
        counters.naks_sent = c.tx_naks_total;
        counters.acks_received = c.rx_acks_total;
        counters.naks_received = c.rx_naks_total;
        counters.rx_frames = c.rx_frames_total;
        counters.rx_roce = c.rx_roce_total;
        counters.rx_non_roce = c.rx_non_roce_total;
        counters.rx_not_for_us = c.rx_not_for_us_total;
        counters.rx_unknown_qp = c.rx_unknown_qp_total;
        counters.rx_unsupported = c.rx_unsupported_total;
        counters.rx_payload_mismatch = c.rx_payload_mismatch_total;
        counters.rx_mac_control_errors = c.rx_mac_control_errors_total;
        counters.tx_wire_bytes = c.tx_wire_bytes_total;
        counters.test_dropped = c.rx_test_dropped_total;
        counters.test_ce_marked = c.tx_test_ce_marked_total;
        counters.timeout_events = nic
            .timeout_log()
            .iter()
            .map(|e| TimeoutEventReport {
                at_ns: e.at.as_nanos(),
                qp: e.qp,
                outstanding_packets: e.outstanding_packets,
                oldest_unacked_psn: e.oldest_unacked_psn,
            })
            .collect();
        let port = host.port.stats.stats();
        counters.rx_ring_drops = port.rx_kernel_drops;
        counters.tx_frames = port.tx_frames;
        counters.tx_failed = port.tx_failed;
        for index in 0..nic.qp_count() {
            let r = nic.requester_stats(index);
            let s = nic.responder_stats(index);
            let rate = nic.qp_rate(index);
            counters.retransmitted_packets += r.packets_retransmitted_total;
            counters.retransmission_timeouts += r.timeouts_total;
            counters.messages_completed += r.messages_completed_total;
            counters.out_of_sequence_packets += s.out_of_sequence_total;
            counters.duplicate_packets += s.duplicates_total;
            counters.messages_delivered += s.messages_completed_total;
            counters.payload_bytes_delivered += s.payload_bytes_received_total;
            let cfg = nic.qp_config(index);
            qp.push(QpReport {
                index,
                local_qpn: cfg.local_qpn,
                remote_qpn: cfg.remote_qpn,
                udp_sport: nic.qp_udp_sport(index),
                rate_bps: rate.current_rate_bps,
                min_rate_bps: rate.min_rate_bps,
                target_rate_bps: rate.target_rate_bps,
                alpha: rate.alpha,
                rate_cuts: rate.rp.map_or(0, |s| s.rate_cuts_total),
                cnps_handled: rate.rp.map_or(0, |s| s.cnps_total),
                packets_sent: r.packets_sent_total,
                packets_retransmitted: r.packets_retransmitted_total,
                timeouts: r.timeouts_total,
                messages_completed: r.messages_completed_total,
                state: match nic.requester_state(index) {
                    RequesterState::Ready => "ready".into(),
                    RequesterState::RetryExceeded => "retry_exceeded".into(),
                    RequesterState::RemoteError(_) => "remote_error".into(),
                },
                packets_accepted: s.packets_accepted_total,
                out_of_sequence: s.out_of_sequence_total,
            });
        }
    }
    let empty = Endpoint {
        mac: String::new(),
        ip: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        qps: Vec::new(),
    };
    Report {
        tool: "rocegen".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        test: test.name().to_owned(),
        role: role.to_owned(),
        interface: settings.device.clone(),
        link_speed_bps: settings.link_rate_bps,
        mtu_bytes: pmtu.map_or(0, PathMtu::bytes),
        qps: local.map_or(settings.qps, |l| l.qps.len()),
        tclass: settings.tclass,
        dscp: settings.dscp(),
        priority: settings.data_priority(),
        vlan_id: settings.vlan,
        dcqcn: dcqcn_name(settings.dcqcn).to_owned(),
        local: endpoint_report(local.unwrap_or(&empty)),
        remote: remotes.iter().map(endpoint_report).collect(),
        bw,
        latency,
        counters,
        qp,
        error,
        peer: None,
        peers: Vec::new(),
        driver: host.map(|h| h.driver),
    }
}

/// The report as the JSON value sent to the peer.
fn report_value(report: &Report) -> serde_json::Value {
    serde_json::to_value(report).unwrap_or(serde_json::Value::Null)
}

// ---- client and server --------------------------------------------------------------------------

/// Runs the test `settings` describes: as the client when a server is given, else as the server.
pub fn run(settings: &Settings) -> Outcome {
    // Wake-ups within a microsecond or so of the deadline, for pacing (best effort).
    let _ = sys::set_timer_slack(Duration::from_nanos(1));
    match &settings.server {
        Some(server) => run_client(settings, server),
        None => run_server(settings),
    }
}

fn failed(settings: &Settings, role: &'static str, error: &RunError) -> Outcome {
    Outcome {
        report: build_report(
            settings,
            settings.test,
            role,
            None,
            settings.mtu,
            None,
            &[],
            Vec::new(),
            Vec::new(),
            Some(error.to_string()),
        ),
    }
}

/// The server's addresses: [`Settings::server_addrs`], else (a library caller that did not
/// resolve them first) resolved now.
fn server_addrs(settings: &Settings, server: &str) -> Result<Vec<SocketAddr>, RunError> {
    if !settings.server_addrs.is_empty() {
        return Ok(settings.server_addrs.clone());
    }
    crate::cli::server_addrs(server, settings.port, &settings.device).map_err(RunError::Setup)
}

fn run_client(settings: &Settings, server: &str) -> Outcome {
    let role = "client";
    let port = match open_port(settings) {
        Ok(port) => port,
        Err(e) => return failed(settings, role, &e),
    };
    let pmtu = match settings
        .mtu
        .or_else(|| largest_pmtu_for(port.interface_mtu, settings.ipv6))
    {
        Some(pmtu) => pmtu,
        None => {
            return failed(
                settings,
                role,
                &RunError::Setup(format!(
                    "interface MTU {} is too small for RoCEv2",
                    port.interface_mtu
                )),
            )
        }
    };
    let connect = server_addrs(settings, server).and_then(|addrs| {
        Oob::connect(&addrs, Duration::from_secs_f64(settings.connect_timeout_s))
            .map_err(RunError::from)
    });
    let mut oob = match connect {
        Ok(oob) => oob,
        Err(e) => return failed(settings, role, &e),
    };
    let local_ip = match oob
        .local_addr()
        .map_err(|e| RunError::Setup(e.to_string()))
        .and_then(|a| local_roce_addr(settings, a.ip()))
    {
        Ok(ip) => ip,
        Err(e) => {
            let _ = oob.send(&Message::Error {
                reason: e.to_string(),
            });
            return failed(settings, role, &e);
        }
    };
    let local = Endpoint {
        mac: format_mac(port.mac),
        ip: local_ip,
        qps: make_qps(settings.qps),
    };
    let shape = TestShape {
        test: settings.test.name().to_owned(),
        qps: settings.qps,
        sizes: settings.sizes.clone(),
        iterations: settings.iterations,
        duration_s: settings.duration_s,
        mtu: pmtu.bytes(),
        tx_depth: settings.tx_depth,
    };
    let handshake = oob
        .send(&Message::Hello {
            version: PROTOCOL_VERSION,
            shape,
            endpoint: local.clone(),
        })
        .and_then(|()| oob.recv(HANDSHAKE_TIMEOUT))
        .map_err(RunError::from)
        .and_then(|reply| match reply {
            Message::Accept { endpoint } if endpoint.qps.len() == settings.qps => {
                check_family((local_ip, "client"), (endpoint.ip, "server")).map(|()| endpoint)
            }
            Message::Accept { .. } => Err(RunError::Peer("wrong number of QPs".into())),
            Message::Error { reason } => Err(RunError::Peer(reason)),
            other => Err(RunError::Peer(format!("unexpected reply {other:?}"))),
        });
    let remote = match handshake {
        Ok(remote) => remote,
        Err(e) => {
            // The server waits for our start; tell it why there is none (it may be gone).
            let _ = oob.send(&Message::Error {
                reason: e.to_string(),
            });
            return failed(settings, role, &e);
        }
    };
    let peers = [PeerQps {
        local: &local.qps,
        remote: &remote,
    }];
    let mut host = match nic_config(settings, &port, local_ip, pmtu, settings.tx_depth, &peers)
        .and_then(|cfg| {
            Nic::new(cfg, Instant::ZERO).map_err(|e: NicError| RunError::Setup(e.to_string()))
        }) {
        Ok(nic) => Host::new(nic, port, vec![oob], local_ip),
        Err(e) => {
            let _ = oob.send(&Message::Error {
                reason: e.to_string(),
            });
            return failed(settings, role, &e);
        }
    };

    let (result, bw, latency) = match settings.test {
        TestKind::WriteBw => {
            let mut workload = BwClient::new(settings, settings.tx_depth, settings.qps);
            let result = host.run(&mut workload);
            (result, workload.rows, Vec::new())
        }
        TestKind::WriteLat => {
            let mut workload = LatClient {
                sizes: settings.sizes.clone(),
                iterations: settings.iterations.unwrap_or(1_000),
                phase: 0,
                round: 0,
                waiting_since: None,
                samples_ns: Vec::with_capacity(
                    usize::try_from(settings.iterations.unwrap_or(1_000)).unwrap_or(0),
                ),
                rows: Vec::new(),
                next_wr_id: 0,
                done: false,
            };
            let result = host.run(&mut workload);
            (result, Vec::new(), workload.rows)
        }
    };
    let error = result.err().map(|e| e.to_string());
    let mut report = build_report(
        settings,
        settings.test,
        role,
        Some(&host),
        Some(pmtu),
        Some(&local),
        std::slice::from_ref(&remote),
        bw,
        latency,
        error.clone(),
    );
    // Exchange reports: ours, then the server's.
    let oob = &mut host.oobs[0];
    let sent = match &error {
        None => oob.send(&Message::Done {
            report: report_value(&report),
        }),
        Some(reason) => oob.send(&Message::Error {
            reason: reason.clone(),
        }),
    };
    if sent.is_ok() && error.is_none() {
        match oob.recv(HANDSHAKE_TIMEOUT) {
            Ok(Message::Done { report: peer }) => report.peer = Some(peer),
            Ok(Message::Error { reason }) => report.error = Some(format!("server: {reason}")),
            Ok(other) => report.error = Some(format!("server sent {other:?}")),
            Err(e) => report.error = Some(format!("waiting for the server's report: {e}")),
        }
    }
    Outcome { report }
}

/// A client that said hello.
struct Client {
    oob: Oob,
    shape: TestShape,
    endpoint: Endpoint,
}

/// Accepts one client and reads its hello.
fn accept_client(listener: &TcpListener) -> Result<Client, RunError> {
    let (stream, _) = listener
        .accept()
        .map_err(|e| RunError::Setup(format!("accepting a client: {e}")))?;
    let mut oob = Oob::new(stream).map_err(|e| RunError::Setup(e.to_string()))?;
    match oob.recv(HANDSHAKE_TIMEOUT)? {
        Message::Hello {
            version,
            shape,
            endpoint,
        } if version == PROTOCOL_VERSION => Ok(Client {
            oob,
            shape,
            endpoint,
        }),
        Message::Hello { version, .. } => Err(RunError::Peer(format!(
            "client speaks exchange version {version}, we speak {PROTOCOL_VERSION}"
        ))),
        Message::Error { reason } => Err(RunError::Peer(reason)),
        other => Err(RunError::Peer(format!("expected a hello, got {other:?}"))),
    }
}

/// What the server runs for its clients: checks their tests agree with ours, makes our QPs for
/// each and the NIC with all of them.
fn server_setup(
    settings: &Settings,
    port: &Port,
    clients: &[Client],
) -> Result<(IpAddr, PathMtu, Vec<Endpoint>, Nic), RunError> {
    let first = clients
        .first()
        .ok_or_else(|| RunError::Setup("no client".into()))?;
    let local_addr = first
        .oob
        .local_addr()
        .map_err(|e| RunError::Setup(e.to_string()))?;
    let local_ip = local_roce_addr(settings, local_addr.ip())?;
    let pmtu = PathMtu::from_bytes(first.shape.mtu)
        .ok_or_else(|| RunError::Peer(format!("bad path MTU {}", first.shape.mtu)))?;
    let mut total_qps = 0;
    for client in clients {
        let shape = &client.shape;
        let test = TestKind::from_name(&shape.test)
            .ok_or_else(|| RunError::Peer(format!("unknown test {:?}", shape.test)))?;
        if test != settings.test {
            return Err(RunError::Peer(format!(
                "a client runs {}, this server {}",
                test.name(),
                settings.test.name()
            )));
        }
        check_family((local_ip, "server"), (client.endpoint.ip, "client"))?;
        if shape.qps == 0 || shape.qps != client.endpoint.qps.len() {
            return Err(RunError::Peer("bad number of QPs".into()));
        }
        if shape.mtu != pmtu.bytes() {
            return Err(RunError::Peer(format!(
                "clients ask for different path MTUs ({} and {}); use the same -m",
                pmtu.bytes(),
                shape.mtu
            )));
        }
        total_qps += shape.qps;
    }
    if total_qps > crate::nic::QPS_MAX {
        return Err(RunError::Peer(format!(
            "{total_qps} QPs in all, at most {} per NIC",
            crate::nic::QPS_MAX
        )));
    }
    // One run of consecutive QPNs, split among the clients.
    let mut all = make_qps(total_qps).into_iter();
    let locals: Vec<Endpoint> = clients
        .iter()
        .map(|client| Endpoint {
            mac: format_mac(port.mac),
            ip: local_ip,
            qps: all.by_ref().take(client.shape.qps).collect(),
        })
        .collect();
    let peers: Vec<PeerQps<'_>> = locals
        .iter()
        .zip(clients)
        .map(|(local, client)| PeerQps {
            local: &local.qps,
            remote: &client.endpoint,
        })
        .collect();
    let tx_depth = clients.iter().map(|c| c.shape.tx_depth).max().unwrap_or(1);
    let cfg = nic_config(settings, port, local_ip, pmtu, tx_depth, &peers)?;
    let nic = Nic::new(cfg, Instant::ZERO).map_err(|e| RunError::Setup(e.to_string()))?;
    Ok((local_ip, pmtu, locals, nic))
}

fn run_server(settings: &Settings) -> Outcome {
    let role = "server";
    let port = match open_port(settings) {
        Ok(port) => port,
        Err(e) => return failed(settings, role, &e),
    };
    // IPv6 and IPv4 clients alike; IPv4 only where the kernel has no IPv6.
    let listener = match crate::oob::listen(settings.port) {
        Ok((l, _)) => l,
        Err(e) => {
            return failed(
                settings,
                role,
                &RunError::Setup(format!("listening on TCP port {}: {e}", settings.port)),
            )
        }
    };
    // Every client first: they all start together once the NIC is up (an incast starts at once).
    let mut clients: Vec<Client> = Vec::with_capacity(settings.clients);
    for _ in 0..settings.clients {
        match accept_client(&listener) {
            Ok(client) => clients.push(client),
            Err(e) => {
                for client in &mut clients {
                    let _ = client.oob.send(&Message::Error {
                        reason: e.to_string(),
                    });
                }
                return failed(settings, role, &e);
            }
        }
    }
    drop(listener);
    let (local_ip, pmtu, locals, nic) = match server_setup(settings, &port, &clients) {
        Ok(s) => s,
        Err(e) => {
            for client in &mut clients {
                let _ = client.oob.send(&Message::Error {
                    reason: e.to_string(),
                });
            }
            return failed(settings, role, &e);
        }
    };
    let remotes: Vec<Endpoint> = clients.iter().map(|c| c.endpoint.clone()).collect();
    let oobs: Vec<Oob> = clients.into_iter().map(|c| c.oob).collect();
    let mut host = Host::new(nic, port, oobs, local_ip);
    // The NIC is listening: let the clients start.
    for (oob, local) in host.oobs.iter_mut().zip(&locals) {
        if let Err(e) = oob.send(&Message::Accept {
            endpoint: local.clone(),
        }) {
            return failed(settings, role, &RunError::from(e));
        }
    }
    let (result, bw, peers) = match settings.test {
        TestKind::WriteBw => {
            let mut workload = BwServer {
                sizes: Vec::new(),
                peer_reports: vec![None; settings.clients],
            };
            let result = host.run(&mut workload);
            (result, workload.rows(), workload.peer_reports)
        }
        TestKind::WriteLat => {
            let mut workload = LatServer {
                backlog: Vec::with_capacity(16),
                next_wr_id: 0,
                peer_reports: vec![None; settings.clients],
            };
            let result = host.run(&mut workload);
            (result, Vec::new(), workload.peer_reports)
        }
    };
    let error = result.err().map(|e| e.to_string());
    let local = Endpoint {
        mac: format_mac(host.port.mac),
        ip: local_ip,
        qps: locals.iter().flat_map(|l| l.qps.iter().copied()).collect(),
    };
    let mut report = build_report(
        settings,
        settings.test,
        role,
        Some(&host),
        Some(pmtu),
        Some(&local),
        &remotes,
        bw,
        Vec::new(),
        error.clone(),
    );
    let own = report_value(&report);
    for oob in &mut host.oobs {
        let _ = match &error {
            None => oob.send(&Message::Done {
                report: own.clone(),
            }),
            Some(reason) => oob.send(&Message::Error {
                reason: reason.clone(),
            }),
        };
    }
    let peers: Vec<serde_json::Value> = peers.into_iter().flatten().collect();
    if peers.len() == 1 {
        report.peer = peers.first().cloned();
    }
    report.peers = peers;
    Outcome { report }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_round_trip() {
        let mac = MacAddress([0x02, 0xab, 0, 0x10, 0xff, 0x01]);
        assert_eq!(format_mac(mac), "02:ab:00:10:ff:01");
        assert_eq!(parse_mac("02:ab:00:10:ff:01"), Some(mac));
        assert_eq!(parse_mac("02:ab:00:10:ff"), None);
        assert_eq!(parse_mac("02:ab:00:10:ff:01:02"), None);
        assert_eq!(parse_mac("zz:ab:00:10:ff:01"), None);
    }

    #[test]
    fn qps_are_distinct_and_in_range() {
        let qps = make_qps(64);
        for (i, qp) in qps.iter().enumerate() {
            assert_eq!(qp.qpn, qps[0].qpn + i as u32);
            assert!(qp.qpn >= 0x100 && qp.qpn <= 0x00FF_FFFF);
            assert!(qp.psn <= 0x00FF_FFFF);
            assert_eq!(qp.va & 0xFFF, 0);
        }
        assert_ne!(make_qps(1)[0], make_qps(1)[0], "fresh randomness per call");
    }
}
