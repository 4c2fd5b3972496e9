//! headroom-rnic: an emulated RoCEv2 NIC, sans-IO: RC queue pairs, DCQCN, PFC honouring and an
//! emulated link, behind a byte interface.
//!
//! [`Nic`] is what stands between a workload (post RDMA WRITEs, collect completions) and an
//! Ethernet port: `rocegen` drives it over a raw socket, the simulator (`headroom-sim`) over a
//! virtual-time link. It takes received frames ([`Nic::handle_frame`]) and timer calls
//! ([`Nic::handle_timeout`]), and hands out frames to send ([`Nic::poll_transmit`]), written with
//! `headroom-wire` into the caller's buffer. It reads no clock and does no I/O: the driver passes
//! `now` and moves the bytes, so the whole NIC can be run in virtual time (see the tests).
//! It composes the state machines of `headroom-roce`; it depends on nothing else but
//! `headroom-wire`.
//!
//! # What it does, like a NIC
//!
//! * **RC RDMA WRITE** per QP with `headroom_roce::rc`: segmentation by path MTU into
//!   FIRST/MIDDLE/LAST/ONLY (RETH on FIRST and ONLY), PSNs, the A bit, a window, go-back-N on NAK
//!   or timeout; the responder checks ICRC (here) and PSN (there), ACKs (coalesced) and NAKs.
//! * **PFC and 802.3x PAUSE** received on the port stop the frames of the paused priority for
//!   quanta × 512 bit times at the emulated link speed (`headroom_roce::pause`). Data and ACK
//!   frames carry the data priority, CNPs `cnp_802p_prio`.
//! * **DCQCN**: the NP sends a CNP (opcode 0x81, BECN, `cnp_dscp`) for CE-marked request packets,
//!   at most one per QP per interval; the RP cuts and recovers the QP's rate, which a per-QP token
//!   bucket enforces (`headroom_roce::{np, dcqcn, pacer}`).
//! * **IPv4 or IPv6**: the NIC speaks RoCEv2 over the family of its own address (its GID, as
//!   perftest's `--ipv6` selects); every QP's peer must be of the same family. Over IPv6 the
//!   traffic class carries DSCP and ECN, the hop limit is [`TTL`], the flow label is the QP's
//!   (see [`QpConfig`]), the UDP checksum is computed, and the ICRC masks the IPv6 fields.
//! * **One emulated link** (`--link-speed`): every frame, data or control, is serialized on it at
//!   its wire size (FCS, preamble and inter-frame gap included); control frames (CNPs, then
//!   ACKs/NAKs) go before data, as NICs schedule them.
//!
//! # Emulated time and catch-up
//!
//! Frames are scheduled on the emulated link in its own time: each frame gets a start time from
//! the link, its QP's rate limiter and the pause state, and is handed out once that start time is
//! not after `now`. A driver wakes up late (timer slack, scheduling); when it does, the frames
//! whose start times have passed go out back to back, so the long-run rate is exact. How far back
//! a start time may lie is bounded by `catch_up_ns`: a host that fell further behind loses that
//! link time instead of bursting it.

#![forbid(unsafe_code)]

pub mod qp_hash;

use std::collections::VecDeque;
use std::net::IpAddr;

use core::fmt;

use headroom_roce::dcqcn::{Rp, RpParamError, RpParams, RpStats};
use headroom_roce::np::{CnpDescriptor, Np, NpConfig, NpError, NpStats};
use headroom_roce::pacer::{ethernet_wire_bytes, Link, Pacer, PacerError};
use headroom_roce::pause::{PauseError, PauseState, Priority, PriorityStats};
use headroom_roce::rc::{
    AckDescriptor, AckKind, Completion, DeliveredMessage, PathMtu, PostError, Requester,
    RequesterConfig, RequesterError, RequesterState, RequesterStats, Responder, ResponderConfig,
    ResponderConfigError, ResponderStats, Reth, RxPacket, TxPacket,
};
use headroom_roce::time::Instant;
use headroom_wire::ethernet::{self, parse_l2, EtherType, MacAddress};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
use headroom_wire::roce::{
    parse_rocev2, verify_icrc, AethRepr, AethSyndrome, BthRepr, ExtRepr, Opcode, RethRepr,
    RoceIpRepr, RoceV2Headers, RoceV2PacketRepr, BTH_LEN, DEFAULT_PKEY, ICRC_LEN, RETH_LEN,
};
use headroom_wire::vlan::{self, VlanTci};
use headroom_wire::{ipv4, ipv6, udp, Ecn};

use crate::qp_hash::{flow_label, udp_sport};

/// Most queue pairs one NIC runs (perftest's `-q` has no documented limit; this bounds the per-call
/// work of the scheduler, which looks at every QP).
pub const QPS_MAX: usize = 1024;

/// IPv4 TTL and IPv6 hop limit of every frame (rxe: the QP's hop limit, 64 by default).
pub const TTL: u8 = 64;

/// Bytes of the payload pattern: the largest path MTU plus one period of the pattern.
const PATTERN_LEN: usize = 4096 + 256;

/// Headers around a request payload at most, over IPv4 or IPv6 (`ipv6`): Ethernet + 802.1Q + IP +
/// UDP + BTH + RETH + ICRC.
#[must_use]
pub const fn request_overhead_bytes(ipv6: bool) -> usize {
    ethernet::HEADER_LEN
        + vlan::TAG_LEN
        + if ipv6 {
            ipv6::HEADER_LEN
        } else {
            ipv4::HEADER_LEN
        }
        + udp::HEADER_LEN
        + BTH_LEN
        + RETH_LEN
        + ICRC_LEN
}

/// Headers around a request payload at most, whatever the family (IPv6's 40-byte header).
pub const REQUEST_OVERHEAD_BYTES_MAX: usize = request_overhead_bytes(true);

/// One queue pair: both ends of the connection, as exchanged out of band. Each QP has its own
/// peer, so one NIC can talk to several hosts (a server with several clients).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QpConfig {
    /// The peer's MAC address (the next hop: the peer itself on a flat L2 fabric).
    pub peer_mac: MacAddress,
    /// The peer's RoCE address (its GID): IPv4 or IPv6, the family of the NIC's own.
    ///
    /// Over IPv6 every frame of the QP carries the flow label [`flow_label`]`(local QPN, remote
    /// QPN)`: the label Linux computes for a RoCEv2 QP (`rdma_calc_flow_label`) and from which
    /// the UDP source port is derived (`rdma_flow_label_to_udp_sport`), so that a switch hashing
    /// the IPv6 3-tuple (RFC 6438) and one hashing the UDP 5-tuple see the same per-QP flows.
    /// It is symmetric in the two QPNs: both directions of a connection carry the same label.
    pub peer_ip: IpAddr,
    /// Our QPN (24 bits): the DestQP of what the peer sends us.
    pub local_qpn: u32,
    /// The peer's QPN: the DestQP of what we send.
    pub remote_qpn: u32,
    /// First PSN we send.
    pub send_psn: u32,
    /// First PSN the peer sends (our responder expects it).
    pub recv_psn: u32,
    /// The peer's buffer our WRITEs target (RETH virtual address).
    pub remote_va: u64,
    /// The peer's remote key (RETH R_Key).
    pub remote_rkey: u32,
    /// The VLAN of this QP's frames, overriding [`NicConfig::vlan_id`]: the QP's source GID sits
    /// on a VLAN interface (a GID table holds one entry per netdev, VLAN devices included).
    /// `None`: the NIC's.
    pub vlan_id: Option<u16>,
}

/// Everything a [`Nic`] needs.
#[derive(Clone, Debug, PartialEq)]
pub struct NicConfig {
    /// Our port's MAC address.
    pub local_mac: MacAddress,
    /// Our RoCE address (GID), IPv4 or IPv6: the family of every frame.
    pub local_ip: IpAddr,
    /// 802.1Q VLAN ID to tag every frame with (0: priority tag only); `None`: untagged.
    pub vlan_id: Option<u16>,
    /// DSCP of data and ACK frames.
    pub data_dscp: u8,
    /// Priority (0..=7) of data and ACK frames: the PCP when tagged, and the PFC class that pauses
    /// them in any case.
    pub data_priority: u8,
    /// Speed of the emulated port, bit/s: the serialization rate, the line rate of DCQCN and the
    /// length of a pause quantum.
    pub link_rate_bps: u64,
    /// Largest frame (without FCS) the port sends: interface MTU + 18.
    pub max_frame_bytes: usize,
    /// Path MTU.
    pub pmtu: PathMtu,
    /// DCQCN reaction point of every QP; `None`: CNPs are counted and ignored.
    pub rp: Option<RpParams>,
    /// DCQCN notification point; `None`: CE marks are counted, no CNP is sent.
    pub np: Option<NpConfig>,
    /// Most unacknowledged packets per QP.
    pub window_packets: u32,
    /// Retransmission (local ACK) timeout.
    pub retransmit_timeout_ns: u64,
    /// Retries before a QP fails; `None`: for ever.
    pub retry_count_max: Option<u8>,
    /// Messages a QP holds posted (perftest `--tx-depth`).
    pub send_queue_depth: usize,
    /// The responder ACKs at least every this many packets.
    pub ack_coalesce_packets: u32,
    /// How far in the past a frame's emulated start time may lie when the driver catches up.
    pub catch_up_ns: u64,
    /// Test: discard every Nth received request packet (as if the fabric had lost it).
    pub drop_every: Option<u64>,
    /// Test: send every Nth data packet CE-marked (standing in for a congested switch).
    pub mark_ce_every: Option<u64>,
    /// The queue pairs.
    pub qps: Vec<QpConfig>,
}

/// Why a [`Nic`] could not be built.
#[derive(Clone, Debug, PartialEq)]
pub enum NicError {
    /// No QP, or more than [`QPS_MAX`], or two with the same local QPN.
    BadQps(&'static str),
    /// A frame of a full path-MTU packet would not fit in `max_frame_bytes`.
    MtuTooLarge {
        /// Bytes the largest request frame takes.
        frame_bytes: usize,
        /// What the port can send.
        max_frame_bytes: usize,
    },
    /// The data priority is above 7 or a DSCP above 63.
    BadMarking(&'static str),
    /// A QP's peer address is not of the family of ours (one side runs IPv6, the other IPv4).
    FamilyMismatch {
        /// Our address.
        local: IpAddr,
        /// The peer's.
        peer: IpAddr,
    },
    /// The DCQCN RP parameters were refused.
    Rp(RpParamError),
    /// The NP parameters were refused.
    Np(NpError),
    /// The link rate is zero.
    Link(PacerError),
    /// The pause state refused the link rate.
    Pause(PauseError),
    /// A requester parameter was refused.
    Requester(RequesterError),
    /// A responder parameter was refused.
    Responder(ResponderConfigError),
}

impl fmt::Display for NicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BadQps(why) => write!(f, "queue pairs: {why}"),
            Self::MtuTooLarge {
                frame_bytes,
                max_frame_bytes,
            } => write!(
                f,
                "a full path-MTU frame takes {frame_bytes} bytes but the interface sends at most \
                 {max_frame_bytes} (raise the interface MTU or lower -m)"
            ),
            Self::BadMarking(why) => f.write_str(why),
            Self::FamilyMismatch { local, peer } => write!(
                f,
                "address family mismatch: our RoCE address {local} is {} but the peer's {peer} is \
                 {} (run both sides with --ipv6, or neither)",
                family_name(*local),
                family_name(*peer)
            ),
            Self::Rp(e) => write!(f, "DCQCN RP parameters: {e}"),
            Self::Np(e) => write!(f, "DCQCN NP parameters: {e}"),
            Self::Link(e) => write!(f, "link: {e}"),
            Self::Pause(e) => write!(f, "pause: {e}"),
            Self::Requester(e) => write!(f, "requester: {e}"),
            Self::Responder(e) => write!(f, "responder: {e}"),
        }
    }
}

impl std::error::Error for NicError {}

/// What [`Nic::poll_transmit`] wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxFrame {
    /// Bytes written at the front of the buffer.
    pub len: usize,
    /// What the frame is.
    pub kind: TxKind,
    /// When the frame starts on the emulated link (at or before the `now` of the call).
    pub start: Instant,
}

/// The kinds of frames a NIC sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxKind {
    /// An RDMA WRITE packet of QP `qp` (index).
    Data {
        /// QP index.
        qp: usize,
        /// A go-back-N retransmission.
        retransmission: bool,
    },
    /// An ACK or NAK of QP `qp`.
    Ack {
        /// QP index.
        qp: usize,
    },
    /// A CNP to the peer's QP of QP `qp`.
    Cnp {
        /// QP index.
        qp: usize,
    },
}

/// What a received frame was, as [`Nic::handle_frame`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxKind {
    /// A MAC Control frame (PFC or PAUSE, honoured; or counted as unknown or malformed).
    MacControl,
    /// An RDMA WRITE request packet for QP `qp` (index), handed to its responder (a test drop
    /// included).
    Request {
        /// QP index.
        qp: usize,
    },
    /// An ACK or NAK for QP `qp`, handed to its requester.
    Ack {
        /// QP index.
        qp: usize,
    },
    /// A CNP for QP `qp`, handed to its reaction point.
    Cnp {
        /// QP index.
        qp: usize,
    },
    /// Anything else: not RoCEv2, not for us, unknown QP, bad ICRC, unsupported (counted).
    Ignored,
}

/// Port-level counters of a [`Nic`]. All monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct NicCounters {
    /// Frames handed to [`Nic::handle_frame`].
    pub rx_frames_total: u64,
    /// RoCEv2 packets to our IP (GID) with a good ICRC.
    pub rx_roce_total: u64,
    /// Frames that are not RoCEv2 nor MAC Control (ARP, the TCP exchange, ...): ignored.
    pub rx_non_roce_total: u64,
    /// RoCEv2 packets to another IP address or of the other family (flooded by a switch):
    /// ignored.
    pub rx_not_for_us_total: u64,
    /// RoCEv2 packets to us whose ICRC does not verify: dropped.
    pub rx_icrc_errors_total: u64,
    /// RoCEv2 packets to a QPN we do not have: dropped.
    pub rx_unknown_qp_total: u64,
    /// RoCEv2 packets with an opcode we do not handle (or an ACK without AETH): dropped.
    pub rx_unsupported_total: u64,
    /// Request packets whose payload differs from the pattern the sender writes: counted only.
    pub rx_payload_mismatch_total: u64,
    /// Request packets received CE-marked (each is reported to the NP).
    pub rx_ecn_ce_total: u64,
    /// ACKs and CNPs received CE-marked (ignored by DCQCN: they are not data).
    pub rx_ecn_ce_control_total: u64,
    /// CNPs received.
    pub rx_cnps_total: u64,
    /// Positive ACKs received.
    pub rx_acks_total: u64,
    /// NAKs received (any kind).
    pub rx_naks_total: u64,
    /// MAC Control frames that did not parse (wrong destination, reserved bits, short).
    pub rx_mac_control_errors_total: u64,
    /// MAC Control frames with an opcode other than PFC and PAUSE.
    pub rx_mac_control_unknown_total: u64,
    /// Request packets discarded by `drop_every` (test).
    pub rx_test_dropped_total: u64,
    /// Frames handed out by [`Nic::poll_transmit`].
    pub tx_frames_total: u64,
    /// Wire bytes of those (frame + FCS + preamble + IFG, padded).
    pub tx_wire_bytes_total: u64,
    /// Data packets sent (retransmissions included).
    pub tx_data_packets_total: u64,
    /// Of those, go-back-N retransmissions.
    pub tx_retransmitted_packets_total: u64,
    /// Data payload bytes sent (retransmissions included).
    pub tx_payload_bytes_total: u64,
    /// Positive ACKs sent.
    pub tx_acks_total: u64,
    /// NAKs sent.
    pub tx_naks_total: u64,
    /// CNPs sent.
    pub tx_cnps_total: u64,
    /// Data packets sent CE-marked by `mark_ce_every` (test).
    pub tx_test_ce_marked_total: u64,
    /// CNPs dropped because the CNP queue was full.
    pub tx_cnp_overflow_total: u64,
    /// Frames that could not be written (buffer too small): dropped. Should stay 0.
    pub tx_emit_errors_total: u64,
}

/// A retransmission timeout, for reports (the first [`TIMEOUT_LOG_MAX`] of a run are kept).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TimeoutEvent {
    /// When it fired.
    pub at: Instant,
    /// QP index.
    pub qp: usize,
    /// Packets outstanding when it fired (all of them are resent).
    pub outstanding_packets: u64,
    /// PSN of the oldest unacknowledged packet.
    pub oldest_unacked_psn: u32,
}

/// Timeouts kept by [`Nic::timeout_log`].
pub const TIMEOUT_LOG_MAX: usize = 16;

/// The DCQCN state of one QP, for reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QpRateReport {
    /// The rate the QP's limiter enforces now, bit/s.
    pub current_rate_bps: u64,
    /// The lowest rate it enforced.
    pub min_rate_bps: u64,
    /// DCQCN target rate, if the RP runs.
    pub target_rate_bps: Option<u64>,
    /// DCQCN alpha, if the RP runs.
    pub alpha: Option<f64>,
    /// RP counters, if the RP runs.
    pub rp: Option<RpStats>,
}

#[derive(Debug)]
struct Qp {
    cfg: QpConfig,
    udp_sport: u16,
    /// IPv6 flow label (unused over IPv4).
    flow_label: u32,
    requester: Requester,
    responder: Responder,
    rp: Option<Rp>,
    pacer: Pacer,
    min_rate_bps: u64,
    /// Emulated time since which the QP has had data to send (or when it last sent, while it keeps
    /// having some); `None` while it has nothing.
    data_since: Option<Instant>,
    /// When the responder's pending ACK/NAK appeared.
    ack_since: Option<Instant>,
}

/// The emulated NIC. See the module doc.
#[derive(Debug)]
pub struct Nic {
    local_mac: MacAddress,
    local_ip: IpAddr,
    vlan_id: Option<u16>,
    data_dscp: u8,
    data_priority: Priority,
    catch_up_ns: u64,
    drop_every: Option<u64>,
    mark_ce_every: Option<u64>,
    qps: Vec<Qp>,
    /// (local QPN, index), sorted by QPN.
    qp_lookup: Vec<(u32, usize)>,
    link: Link,
    pause: PauseState,
    np: Option<Np>,
    cnp_queue: VecDeque<CnpDescriptor>,
    cnp_queue_capacity: usize,
    ack_rr: usize,
    data_rr: usize,
    ip_ident: u16,
    requests_received: u64,
    data_sent: u64,
    pattern: Box<[u8]>,
    counters: NicCounters,
    timeout_log: Vec<TimeoutEvent>,
}

impl Nic {
    /// A NIC with the given queue pairs, idle at `now`.
    pub fn new(cfg: NicConfig, now: Instant) -> Result<Self, NicError> {
        if cfg.qps.is_empty() || cfg.qps.len() > QPS_MAX {
            return Err(NicError::BadQps("need 1 ..= 1024 queue pairs"));
        }
        if cfg.data_priority > 7 {
            return Err(NicError::BadMarking("priority must be in 0..=7"));
        }
        if cfg.data_dscp > 63 {
            return Err(NicError::BadMarking("DSCP must be in 0..=63"));
        }
        if let Some(qp) = cfg
            .qps
            .iter()
            .find(|qp| qp.peer_ip.is_ipv6() != cfg.local_ip.is_ipv6())
        {
            return Err(NicError::FamilyMismatch {
                local: cfg.local_ip,
                peer: qp.peer_ip,
            });
        }
        let frame_bytes =
            request_overhead_bytes(cfg.local_ip.is_ipv6()) + cfg.pmtu.bytes() as usize;
        if frame_bytes > cfg.max_frame_bytes {
            return Err(NicError::MtuTooLarge {
                frame_bytes,
                max_frame_bytes: cfg.max_frame_bytes,
            });
        }
        let mut qp_lookup: Vec<(u32, usize)> = cfg
            .qps
            .iter()
            .enumerate()
            .map(|(i, qp)| (qp.local_qpn, i))
            .collect();
        qp_lookup.sort_unstable();
        if qp_lookup.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(NicError::BadQps("two queue pairs share a local QPN"));
        }
        let link = Link::new(cfg.link_rate_bps, now).map_err(NicError::Link)?;
        let pause = PauseState::new(cfg.link_rate_bps).map_err(NicError::Pause)?;
        let np = cfg
            .np
            .map(|np_cfg| Np::new(np_cfg, cfg.qps.len()))
            .transpose()
            .map_err(NicError::Np)?;
        let mut qps = Vec::with_capacity(cfg.qps.len());
        for qp in &cfg.qps {
            let requester = Requester::new(RequesterConfig {
                pmtu: cfg.pmtu,
                initial_psn: qp.send_psn,
                window_packets: cfg.window_packets,
                retransmit_timeout_ns: cfg.retransmit_timeout_ns,
                retry_count_max: cfg.retry_count_max,
                message_queue_capacity: cfg.send_queue_depth,
                ..RequesterConfig::default()
            })
            .map_err(NicError::Requester)?;
            let responder = Responder::new(ResponderConfig {
                pmtu: cfg.pmtu,
                initial_psn: qp.recv_psn,
                ack_coalesce_packets: cfg.ack_coalesce_packets,
                // The workload polls deliveries after every input; a deep queue is not needed.
                delivered_queue_capacity: cfg.send_queue_depth.max(64),
            })
            .map_err(NicError::Responder)?;
            let rp = cfg
                .rp
                .map(|params| Rp::new(params, cfg.link_rate_bps, now))
                .transpose()
                .map_err(NicError::Rp)?;
            qps.push(Qp {
                cfg: *qp,
                udp_sport: udp_sport(qp.local_qpn, qp.remote_qpn),
                flow_label: flow_label(qp.local_qpn, qp.remote_qpn),
                requester,
                responder,
                rp,
                pacer: Pacer::new(cfg.link_rate_bps, 0, now).map_err(NicError::Link)?,
                min_rate_bps: cfg.link_rate_bps,
                data_since: None,
                ack_since: None,
            });
        }
        let pattern: Box<[u8]> = (0..PATTERN_LEN).map(|i| i as u8).collect();
        Ok(Self {
            local_mac: cfg.local_mac,
            local_ip: cfg.local_ip,
            vlan_id: cfg.vlan_id,
            data_dscp: cfg.data_dscp,
            data_priority: Priority::new(cfg.data_priority)
                .ok_or(NicError::BadMarking("priority must be in 0..=7"))?,
            catch_up_ns: cfg.catch_up_ns,
            drop_every: cfg.drop_every.filter(|&n| n > 0),
            mark_ce_every: cfg.mark_ce_every.filter(|&n| n > 0),
            qp_lookup,
            link,
            pause,
            np,
            cnp_queue: VecDeque::with_capacity(2 * qps.len() + 8),
            cnp_queue_capacity: 2 * qps.len() + 8,
            qps,
            ack_rr: 0,
            data_rr: 0,
            ip_ident: 0,
            requests_received: 0,
            data_sent: 0,
            pattern,
            counters: NicCounters::default(),
            timeout_log: Vec::with_capacity(TIMEOUT_LOG_MAX),
        })
    }

    /// Number of queue pairs.
    #[must_use]
    pub fn qp_count(&self) -> usize {
        self.qps.len()
    }

    /// The port counters.
    #[must_use]
    pub fn counters(&self) -> &NicCounters {
        &self.counters
    }

    /// The pause state (per-priority PFC counters and paused time).
    #[must_use]
    pub fn pause(&self) -> &PauseState {
        &self.pause
    }

    /// The counters of priority `prio` (0..=7).
    #[must_use]
    pub fn priority_stats(&self, prio: Priority) -> &PriorityStats {
        self.pause.stats(prio)
    }

    /// The NP counters, if the NP runs.
    #[must_use]
    pub fn np_stats(&self) -> Option<&NpStats> {
        self.np.as_ref().map(Np::stats)
    }

    /// Requester counters of QP `qp`.
    #[must_use]
    pub fn requester_stats(&self, qp: usize) -> &RequesterStats {
        self.qps[qp].requester.stats()
    }

    /// Responder counters of QP `qp`.
    #[must_use]
    pub fn responder_stats(&self, qp: usize) -> &ResponderStats {
        self.qps[qp].responder.stats()
    }

    /// The requester state of QP `qp` (`Ready`, or why it failed).
    #[must_use]
    pub fn requester_state(&self, qp: usize) -> RequesterState {
        self.qps[qp].requester.state()
    }

    /// Whether QP `qp` has completed everything posted.
    #[must_use]
    pub fn requester_idle(&self, qp: usize) -> bool {
        self.qps[qp].requester.is_idle()
    }

    /// The configuration of QP `qp`.
    #[must_use]
    pub fn qp_config(&self, qp: usize) -> &QpConfig {
        &self.qps[qp].cfg
    }

    /// The UDP source port of QP `qp`.
    #[must_use]
    pub fn qp_udp_sport(&self, qp: usize) -> u16 {
        self.qps[qp].udp_sport
    }

    /// The rate state of QP `qp`.
    #[must_use]
    pub fn qp_rate(&self, qp: usize) -> QpRateReport {
        let q = &self.qps[qp];
        QpRateReport {
            current_rate_bps: q.pacer.rate_bps(),
            min_rate_bps: q.min_rate_bps,
            target_rate_bps: q.rp.as_ref().map(Rp::target_rate_bps),
            alpha: q.rp.as_ref().map(Rp::alpha),
            rp: q.rp.as_ref().map(|rp| *rp.stats()),
        }
    }

    /// The emulated link's counters: (frames, wire bytes).
    #[must_use]
    pub fn link_totals(&self) -> (u64, u64) {
        (self.link.frames_total(), self.link.bytes_total())
    }

    /// Whether an ACK, NAK or CNP waits to be sent.
    #[must_use]
    pub fn has_pending_control(&self) -> bool {
        !self.cnp_queue.is_empty() || self.qps.iter().any(|q| q.responder.peek_ack().is_some())
    }

    /// Posts an RDMA WRITE of `len` bytes on QP `qp` to the peer's buffer.
    pub fn post_write(&mut self, qp: usize, wr_id: u64, len: u32) -> Result<(), PostError> {
        let q = &mut self.qps[qp];
        q.requester
            .post_write(wr_id, q.cfg.remote_va, q.cfg.remote_rkey, len)
    }

    /// The next completed WRITE of QP `qp`.
    pub fn poll_completion(&mut self, qp: usize) -> Option<Completion> {
        self.qps[qp].requester.poll_completion()
    }

    /// The next WRITE of the peer that QP `qp` received completely.
    pub fn poll_delivered(&mut self, qp: usize) -> Option<DeliveredMessage> {
        self.qps[qp].responder.poll_delivered()
    }

    // ---- inputs ---------------------------------------------------------------------------------

    /// A frame arrived on the port at `now`. Returns what it was, for drivers that keep per-QP
    /// state (completions, deliveries) and poll only the QP a frame touched.
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) -> RxKind {
        self.counters.rx_frames_total += 1;
        let Ok(l2) = parse_l2(frame) else {
            self.counters.rx_non_roce_total += 1;
            return RxKind::Ignored;
        };
        if l2.ethertype == EtherType::MacControl {
            self.handle_mac_control(now, frame);
            return RxKind::MacControl;
        }
        let Ok(headers) = parse_rocev2(frame) else {
            self.counters.rx_non_roce_total += 1;
            return RxKind::Ignored;
        };
        // Also what is of the other family: a GID is one address.
        if headers.dst_addr != self.local_ip {
            self.counters.rx_not_for_us_total += 1;
            return RxKind::Ignored;
        }
        // The QP first: several rocegen processes may share an interface (one per peer, as
        // perftest servers do), and each skips the others' traffic without checksumming it.
        let Some(index) = self.qp_index(headers.bth.dest_qp) else {
            self.counters.rx_unknown_qp_total += 1;
            return RxKind::Ignored;
        };
        if verify_icrc(&frame[headers.ip_offset..]).is_err() {
            self.counters.rx_icrc_errors_total += 1;
            return RxKind::Ignored;
        }
        self.counters.rx_roce_total += 1;
        match headers.bth.opcode {
            Opcode::Cnp => {
                self.counters.rx_cnps_total += 1;
                if headers.ecn == Ecn::Ce {
                    self.counters.rx_ecn_ce_control_total += 1;
                }
                let qp = &mut self.qps[index];
                if let Some(rp) = &mut qp.rp {
                    rp.handle_cnp(now);
                }
                Self::sync_rate(qp, now);
                RxKind::Cnp { qp: index }
            }
            Opcode::Acknowledge => {
                if headers.ecn == Ecn::Ce {
                    self.counters.rx_ecn_ce_control_total += 1;
                }
                let Some(aeth) = headers.ext.aeth else {
                    self.counters.rx_unsupported_total += 1;
                    return RxKind::Ignored;
                };
                let ack = AckDescriptor {
                    syndrome: u8::from(aeth.syndrome),
                    msn: aeth.msn,
                    psn: headers.bth.psn,
                };
                if matches!(ack.kind(), AckKind::Ack { .. }) {
                    self.counters.rx_acks_total += 1;
                } else {
                    self.counters.rx_naks_total += 1;
                }
                self.qps[index].requester.handle_ack(now, ack);
                RxKind::Ack { qp: index }
            }
            Opcode::RdmaWriteFirst
            | Opcode::RdmaWriteMiddle
            | Opcode::RdmaWriteLast
            | Opcode::RdmaWriteOnly => {
                self.handle_request(now, index, frame, &headers);
                RxKind::Request { qp: index }
            }
            _ => {
                self.counters.rx_unsupported_total += 1;
                RxKind::Ignored
            }
        }
    }

    fn handle_request(
        &mut self,
        now: Instant,
        index: usize,
        frame: &[u8],
        headers: &RoceV2Headers,
    ) {
        self.requests_received += 1;
        if self
            .drop_every
            .is_some_and(|n| self.requests_received.is_multiple_of(n))
        {
            self.counters.rx_test_dropped_total += 1;
            return;
        }
        if headers.ecn == Ecn::Ce {
            self.counters.rx_ecn_ce_total += 1;
            if let Some(np) = &mut self.np {
                // The NP's flow is the QP. Its key is our QPN, unique in this NIC (the peers'
                // QPNs, which the CNPs carry, may repeat across peers); the CNP is addressed to
                // the QP's remote QPN when it is sent. Errors are counted by the NP (the table
                // holds one flow per QP, so it cannot fill up).
                let _ = np.handle_ce(now, headers.bth.dest_qp);
            }
            self.drain_np(now);
        }
        let payload = &frame[headers.payload_offset..headers.payload_offset + headers.payload_len];
        if payload != pattern_slice(&self.pattern, headers.bth.psn, payload.len()) {
            self.counters.rx_payload_mismatch_total += 1;
        }
        let packet = RxPacket {
            opcode: u8::from(headers.bth.opcode),
            psn: headers.bth.psn,
            ack_req: headers.bth.ack_req,
            // At most a ring frame long: fits in u32.
            payload_len: headers.payload_len as u32,
            reth: headers.ext.reth.map(|r| Reth {
                va: r.virtual_addr,
                rkey: r.rkey,
                dma_len: r.dma_len,
            }),
        };
        let qp = &mut self.qps[index];
        qp.responder.handle_packet(&packet);
        if qp.responder.peek_ack().is_some() && qp.ack_since.is_none() {
            qp.ack_since = Some(now);
        }
    }

    fn handle_mac_control(&mut self, now: Instant, frame: &[u8]) {
        let parsed =
            MacControlFrame::new_checked(frame).and_then(|view| MacControlRepr::parse(&view));
        match parsed {
            // 802.1Qbb: each enabled priority pauses for its quanta (0 resumes).
            Ok(MacControlRepr::Pfc(pfc)) => {
                self.pause
                    .handle_pfc(now, pfc.class_enable, pfc.pause_quanta);
            }
            // 802.3 Annex 31B: every priority pauses.
            Ok(MacControlRepr::Pause(pause)) => self.pause.handle_pause(now, pause.pause_quanta),
            Ok(MacControlRepr::Unknown { .. }) => self.counters.rx_mac_control_unknown_total += 1,
            Err(_) => self.counters.rx_mac_control_errors_total += 1,
        }
    }

    /// Runs the timers due at or before `now`: DCQCN, retransmission, CNP windows.
    pub fn handle_timeout(&mut self, now: Instant) {
        for (index, qp) in self.qps.iter_mut().enumerate() {
            if let Some(rp) = &mut qp.rp {
                rp.handle_timeout(now);
            }
            Self::sync_rate(qp, now);
            let outstanding_packets = qp.requester.outstanding_packets();
            let oldest_unacked_psn = qp.requester.oldest_unacked_psn();
            let timeouts = qp.requester.stats().timeouts_total;
            qp.requester.handle_timeout(now);
            if qp.requester.stats().timeouts_total != timeouts
                && self.timeout_log.len() < TIMEOUT_LOG_MAX
            {
                // Within capacity: no reallocation.
                self.timeout_log.push(TimeoutEvent {
                    at: now,
                    qp: index,
                    outstanding_packets,
                    oldest_unacked_psn,
                });
            }
        }
        self.drain_np(now);
    }

    /// The first [`TIMEOUT_LOG_MAX`] retransmission timeouts.
    #[must_use]
    pub fn timeout_log(&self) -> &[TimeoutEvent] {
        &self.timeout_log
    }

    fn drain_np(&mut self, now: Instant) {
        let Some(np) = &mut self.np else {
            return;
        };
        while let Some(cnp) = np.poll_cnp(now) {
            if self.cnp_queue.len() == self.cnp_queue_capacity {
                self.counters.tx_cnp_overflow_total += 1;
            } else {
                // Within capacity: no reallocation.
                self.cnp_queue.push_back(cnp);
            }
        }
    }

    /// Copies the RP's rate into the QP's limiter.
    fn sync_rate(qp: &mut Qp, now: Instant) {
        let Some(rp) = &qp.rp else {
            return;
        };
        let rate = rp.current_rate_bps();
        if rate != qp.pacer.rate_bps() && qp.pacer.set_rate(now, rate).is_ok() {
            qp.min_rate_bps = qp.min_rate_bps.min(rate);
        }
    }

    fn qp_index(&self, qpn: u32) -> Option<usize> {
        self.qp_lookup
            .binary_search_by_key(&qpn, |&(q, _)| q)
            .ok()
            .map(|i| self.qp_lookup[i].1)
    }

    // ---- outputs --------------------------------------------------------------------------------

    /// The earliest emulated start time a frame may have at `now`.
    fn floor(&self, now: Instant) -> Instant {
        Instant::from_nanos(now.as_nanos().saturating_sub(self.catch_up_ns))
    }

    /// When a frame of `prio`, available since `since`, may start (ignoring the rate limiter).
    fn control_start(&self, now: Instant, since: Instant, prio: Priority) -> Instant {
        let earliest = since.max(self.floor(now)).max(self.pause.resume_time(prio));
        self.link.ready_at(earliest)
    }

    fn cnp_priority(&self) -> Priority {
        self.np
            .as_ref()
            .and_then(|np| Priority::new(np.config().cnp_802p_prio))
            .unwrap_or(self.data_priority)
    }

    /// Writes the next frame due at `now` into `buf` (which must hold `max_frame_bytes`); `None`
    /// when no frame may start yet. Call until it returns `None`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<TxFrame> {
        if let Some(frame) = self.transmit_cnp(now, buf) {
            return Some(frame);
        }
        if let Some(frame) = self.transmit_ack(now, buf) {
            return Some(frame);
        }
        self.transmit_data(now, buf)
    }

    fn transmit_cnp(&mut self, now: Instant, buf: &mut [u8]) -> Option<TxFrame> {
        let cnp = *self.cnp_queue.front()?;
        let prio = self.cnp_priority();
        if self.pause.is_paused(now, prio) {
            return None;
        }
        let start = self.control_start(now, cnp.at, prio);
        if start > now {
            return None;
        }
        self.cnp_queue.pop_front();
        // The flow key is our QPN (see `handle_request`); the CNP goes to that QP's peer QP, the
        // RP's QPN.
        let index = self.qp_index(cnp.dest_qpn)?;
        let qp = self.qps[index].cfg;
        let vlan = self
            .qp_vlan_id(index)
            .map(|vid| VlanTci::new(cnp.priority, false, vid));
        let mut repr = RoceV2PacketRepr::cnp(
            qp.peer_mac,
            self.local_mac,
            self.ip_repr(index, cnp.dscp, Ecn::Ect0),
            self.qps[index].udp_sport,
            qp.remote_qpn,
        );
        repr.vlan = vlan;
        repr.udp_checksum = self.udp_checksum();
        let len = self.emit(&repr, buf)?;
        self.counters.tx_cnps_total += 1;
        Some(self.sent(start, len, TxKind::Cnp { qp: index }))
    }

    fn transmit_ack(&mut self, now: Instant, buf: &mut [u8]) -> Option<TxFrame> {
        let prio = self.data_priority;
        if self.pause.is_paused(now, prio) {
            return None;
        }
        let count = self.qps.len();
        for k in 0..count {
            let index = (self.ack_rr + k) % count;
            if self.qps[index].responder.peek_ack().is_none() {
                continue;
            }
            let since = self.qps[index].ack_since.unwrap_or(now);
            let start = self.control_start(now, since, prio);
            if start > now {
                // The link is busy (every ACK waits for it alike).
                return None;
            }
            let qp = &mut self.qps[index];
            let ack = qp.responder.poll_ack()?;
            qp.ack_since = None;
            let remote_qpn = qp.cfg.remote_qpn;
            let sport = qp.udp_sport;
            let peer_mac = qp.cfg.peer_mac;
            let repr = RoceV2PacketRepr {
                dst_addr: peer_mac,
                src_addr: self.local_mac,
                vlan: self.data_vlan(index),
                ip: self.ip_repr(index, self.data_dscp, Ecn::Ect0),
                udp_src_port: sport,
                udp_checksum: self.udp_checksum(),
                bth: bth(Opcode::Acknowledge, remote_qpn, false, ack.psn),
                ext: ExtRepr {
                    aeth: Some(AethRepr {
                        syndrome: AethSyndrome::from(ack.syndrome),
                        msn: ack.msn,
                    }),
                    ..ExtRepr::default()
                },
                payload: &[],
            };
            let len = self.emit(&repr, buf)?;
            if matches!(ack.kind(), AckKind::Ack { .. }) {
                self.counters.tx_acks_total += 1;
            } else {
                self.counters.tx_naks_total += 1;
            }
            self.ack_rr = (index + 1) % count;
            return Some(self.sent(start, len, TxKind::Ack { qp: index }));
        }
        None
    }

    /// The emulated start time of QP `index`'s next data packet, if it has one (paused or not).
    fn data_start(&self, now: Instant, index: usize) -> Option<Instant> {
        let qp = &self.qps[index];
        if !qp.requester.can_transmit() {
            return None;
        }
        let earliest = qp
            .data_since
            .unwrap_or(now)
            .max(self.floor(now))
            .max(self.pause.resume_time(self.data_priority));
        // Depth-0 buckets: readiness does not depend on the packet's size (pacer module doc).
        Some(qp.pacer.next_send_time(earliest, 0, &self.link))
    }

    fn transmit_data(&mut self, now: Instant, buf: &mut [u8]) -> Option<TxFrame> {
        if self.pause.is_paused(now, self.data_priority) {
            return None;
        }
        let count = self.qps.len();
        let mut best: Option<(Instant, usize)> = None;
        for k in 0..count {
            // Round-robin order breaks ties, so that backlogged QPs share the link fairly.
            let index = (self.data_rr + k) % count;
            let Some(start) = self.data_start(now, index) else {
                self.qps[index].data_since = None;
                continue;
            };
            if self.qps[index].data_since.is_none() {
                self.qps[index].data_since = Some(now);
            }
            if best.is_none_or(|(b, _)| start < b) {
                best = Some((start, index));
            }
        }
        let (start, index) = best?;
        if start > now {
            return None;
        }
        let packet = self.qps[index].requester.poll_transmit(now)?;
        self.data_sent += 1;
        let mark_ce = self
            .mark_ce_every
            .is_some_and(|n| self.data_sent.is_multiple_of(n));
        let len = match self.emit_request(index, &packet, mark_ce, buf) {
            Some(len) => len,
            None => {
                // Lost like a frame the wire dropped: go-back-N will resend it.
                return None;
            }
        };
        let wire = u64::from(ethernet_wire_bytes(u32::try_from(len).unwrap_or(u32::MAX)));
        let qp = &mut self.qps[index];
        // Cannot be refused: `start` came from `next_send_time` of the same state.
        let _ = qp.pacer.on_send(start, wire, wire, &mut self.link);
        if let Some(rp) = &mut qp.rp {
            rp.handle_tx(now, wire);
        }
        Self::sync_rate(qp, now);
        qp.data_since = Some(start);
        self.data_rr = (index + 1) % count;
        self.counters.tx_frames_total += 1;
        self.counters.tx_wire_bytes_total += wire;
        self.counters.tx_data_packets_total += 1;
        self.counters.tx_payload_bytes_total += u64::from(packet.payload_len);
        if packet.retransmission {
            self.counters.tx_retransmitted_packets_total += 1;
        }
        if mark_ce {
            self.counters.tx_test_ce_marked_total += 1;
        }
        Some(TxFrame {
            len,
            kind: TxKind::Data {
                qp: index,
                retransmission: packet.retransmission,
            },
            start,
        })
    }

    /// Accounts a control frame written at `start` on the link.
    fn sent(&mut self, start: Instant, len: usize, kind: TxKind) -> TxFrame {
        let wire = u64::from(ethernet_wire_bytes(u32::try_from(len).unwrap_or(u32::MAX)));
        // Cannot be refused: `start` is at or after the link's ready time.
        let _ = self.link.transmit(start, wire);
        self.counters.tx_frames_total += 1;
        self.counters.tx_wire_bytes_total += wire;
        TxFrame { len, kind, start }
    }

    fn emit_request(
        &mut self,
        index: usize,
        packet: &TxPacket,
        mark_ce: bool,
        buf: &mut [u8],
    ) -> Option<usize> {
        let qp = &self.qps[index];
        let payload_len = packet.payload_len as usize;
        let repr = RoceV2PacketRepr {
            dst_addr: qp.cfg.peer_mac,
            src_addr: self.local_mac,
            vlan: self.data_vlan(index),
            ip: self.ip_repr(
                index,
                self.data_dscp,
                if mark_ce { Ecn::Ce } else { Ecn::Ect0 },
            ),
            udp_src_port: qp.udp_sport,
            udp_checksum: self.udp_checksum(),
            bth: bth(
                Opcode::from(packet.opcode.value()),
                qp.cfg.remote_qpn,
                packet.ack_req,
                packet.psn,
            ),
            ext: ExtRepr {
                reth: packet.reth.map(|r| RethRepr {
                    virtual_addr: r.va,
                    rkey: r.rkey,
                    dma_len: r.dma_len,
                }),
                ..ExtRepr::default()
            },
            payload: pattern_slice(&self.pattern, packet.psn, payload_len),
        };
        let result = emit_with_ident(&repr, &mut self.ip_ident, buf);
        if result.is_none() {
            self.counters.tx_emit_errors_total += 1;
        }
        result
    }

    fn emit(&mut self, repr: &RoceV2PacketRepr<'_>, buf: &mut [u8]) -> Option<usize> {
        let result = emit_with_ident(repr, &mut self.ip_ident, buf);
        if result.is_none() {
            self.counters.tx_emit_errors_total += 1;
        }
        result
    }

    /// The VLAN of QP `index`'s frames: its own, else the NIC's.
    fn qp_vlan_id(&self, index: usize) -> Option<u16> {
        self.qps[index].cfg.vlan_id.or(self.vlan_id)
    }

    fn data_vlan(&self, index: usize) -> Option<VlanTci> {
        self.qp_vlan_id(index)
            .map(|vid| VlanTci::new(self.data_priority.get(), false, vid))
    }

    /// The IP header of a frame of QP `index` to its peer. `Nic::new` checked that the peer's
    /// family is ours, so a mixed pair cannot occur (it would go out as IPv6, address mapped).
    fn ip_repr(&self, index: usize, dscp: u8, ecn: Ecn) -> RoceIpRepr {
        let qp = &self.qps[index];
        match (self.local_ip, qp.cfg.peer_ip) {
            (IpAddr::V4(src_addr), IpAddr::V4(dst_addr)) => RoceIpRepr::V4 {
                src_addr,
                dst_addr,
                dscp,
                ecn,
                hop_limit: TTL,
                // Filled per frame by `emit_with_ident`.
                ident: 0,
                // rxe sets DF on RoCEv2 (`prepare_ipv4_hdr`).
                dont_frag: true,
            },
            (src, dst) => RoceIpRepr::V6 {
                src_addr: to_ipv6(src),
                dst_addr: to_ipv6(dst),
                // Traffic class = DSCP << 2 | ECN, as the IPv4 TOS byte.
                dscp,
                ecn,
                // The QP's flow label: see `QpConfig::peer_ip`.
                flow_label: qp.flow_label,
                hop_limit: TTL,
            },
        }
    }

    /// Whether frames carry a UDP checksum: over IPv6 only. IPv4 RoCEv2 senders send 0 (rxe
    /// `prepare_udp_hdr`); over IPv6 a zero UDP checksum is illegal (RFC 8200 §8.1, outside the
    /// RFC 6935/6936 tunnel exception), receivers' stacks and tshark flag it, so the builder
    /// computes it there. It covers the ICRC, not the traffic class: a switch's CE mark keeps
    /// it valid.
    fn udp_checksum(&self) -> bool {
        self.local_ip.is_ipv6()
    }

    /// When [`Nic::handle_timeout`] or [`Nic::poll_transmit`] next has something to do, if ever:
    /// the earliest frame start time (pause, link and rate limiters permitting) and the earliest
    /// timer of the RPs, the requesters and the NP. May be at or before `now` (then call them now).
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let mut earliest: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                earliest = Some(earliest.map_or(t, |e| e.min(t)));
            }
        };
        let data_prio = self.data_priority;
        if let Some(cnp) = self.cnp_queue.front() {
            let prio = self.cnp_priority();
            consider(Some(if self.pause.is_paused(now, prio) {
                self.pause.resume_time(prio)
            } else {
                self.control_start(now, cnp.at, prio)
            }));
        }
        let data_paused = self.pause.is_paused(now, data_prio);
        for (index, qp) in self.qps.iter().enumerate() {
            if qp.responder.peek_ack().is_some() {
                consider(Some(if data_paused {
                    self.pause.resume_time(data_prio)
                } else {
                    self.control_start(now, qp.ack_since.unwrap_or(now), data_prio)
                }));
            }
            if qp.requester.can_transmit() {
                consider(if data_paused {
                    Some(self.pause.resume_time(data_prio))
                } else {
                    self.data_start(now, index)
                });
            }
            consider(qp.rp.as_ref().and_then(Rp::poll_timeout));
            consider(qp.requester.poll_timeout());
        }
        consider(self.np.as_ref().and_then(Np::poll_timeout));
        earliest
    }
}

/// A BTH with the defaults every frame we send shares (default P_Key, no SE/M, TVer 0, FECN/BECN
/// clear; PadCnt is derived by the builder).
fn bth(opcode: Opcode, dest_qp: u32, ack_req: bool, psn: u32) -> BthRepr {
    BthRepr {
        opcode,
        solicited_event: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp,
        ack_req,
        psn,
    }
}

/// Emits `repr` with the next IPv4 identification; `None` if `buf` is too small.
fn emit_with_ident(repr: &RoceV2PacketRepr<'_>, ident: &mut u16, buf: &mut [u8]) -> Option<usize> {
    let mut repr = *repr;
    if let RoceIpRepr::V4 { ident: slot, .. } = &mut repr.ip {
        *slot = *ident;
    }
    *ident = ident.wrapping_add(1);
    repr.emit(buf).ok()
}

/// `ip` as IPv6 (an IPv4 address mapped, which `Nic::new` never lets through to the wire).
fn to_ipv6(ip: IpAddr) -> std::net::Ipv6Addr {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped(),
        IpAddr::V6(v6) => v6,
    }
}

/// "IPv4" or "IPv6".
fn family_name(ip: IpAddr) -> &'static str {
    if ip.is_ipv6() {
        "IPv6"
    } else {
        "IPv4"
    }
}

/// The payload the sender writes for a packet: byte `j` is `(psn + j) mod 256`, so that the
/// receiver can check any packet on its own.
fn pattern_slice(pattern: &[u8], psn: u32, len: usize) -> &[u8] {
    let start = (psn & 0xFF) as usize;
    pattern.get(start..start + len).unwrap_or(&[])
}

#[cfg(test)]
mod tests;
