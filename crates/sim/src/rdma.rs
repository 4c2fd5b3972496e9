//! RoCEv2 hosts: each host's NIC is a [`headroom_rnic::Nic`], the emulated RDMA NIC `rocegen`
//! drives on real interfaces, here on a virtual link.
//!
//! Everything a RoCE NIC does is the NIC's: RC RDMA WRITE with go-back-N, PFC and PAUSE
//! honouring (`headroom_roce::pause`), the DCQCN reaction point (paper or NVIDIA mode) and
//! notification point, per-QP rate limiting, ACK coalescing, CNPs. The frames are real RoCEv2
//! frames with an ICRC, so the switches classify on their DSCP, mark their ECN field and the
//! receiving NIC checks them. This module adds only what a workload needs around the NIC:
//!
//! * **Flows.** An [`RdmaFlowSpec`] is one QP from its source host to its destination host
//!   (each end gets a QP; the sender's requester and the receiver's responder do the work).
//!   From its start time the sender keeps the QP's send queue filled with RDMA WRITEs of
//!   `message_bytes` until `bytes` are posted (or, for an unbounded flow, until `stop`). A flow
//!   completes when its last WRITE completes at the sender (the last ACK arrived), which is
//!   how HPCC's simulator measures flow completion times.
//! * **Faults** ([`NicFaults`]): a NIC that ignores PFC (received MAC Control frames are counted
//!   and not given to the NIC), and a NIC that storms PFC (it sends XOFF frames at a fixed
//!   interval, ahead of its own traffic, during a window), as a broken NIC or a NIC whose host
//!   hung does.
//!
//! The NIC runs with `catch_up_ns = 0` and the link's rate: the simulator asks it for a frame
//! exactly when the link is free, so the NIC's emulated link and the simulated link agree and
//! every frame starts at the instant it is handed out.
//!
//! Flows are fixed before the simulation starts (a NIC is built with its QPs); the NICs are
//! built at the first step.

use crate::flow::host_ip;
use crate::{HostId, SimError};
use headroom_core::frame::HeapFrame;
use headroom_core::time::Instant;
use headroom_rnic::{Nic, NicConfig, QpConfig, RxKind};
use headroom_roce::rc::{PathMtu, PSN_MASK};
use headroom_roce::time::Instant as NicInstant;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::mac_control::{MacControlRepr, PfcRepr, FRAME_LEN};
use std::net::IpAddr;

/// Index of an RDMA flow in its [`crate::Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RdmaFlowId(pub usize);

/// QPNs of a host's QPs start here (QPN 0 and 1 are special in IBTA: SMI and GSI).
pub const FIRST_QPN: u32 = 0x100;

/// A PFC storm a faulty NIC sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcStorm {
    /// Priorities its XOFF frames pause (bit p: priority p).
    pub priorities: u8,
    /// Pause quanta of every frame (0xFFFF: the longest pause).
    pub quanta: u16,
    /// Time between two frames, ns (> 0).
    pub interval_ns: u64,
    /// When the first frame goes out.
    pub start: Instant,
    /// When the storm ends (no frame at or after it); `None`: never.
    pub stop: Option<Instant>,
}

/// How a NIC misbehaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicFaults {
    /// Received PFC and PAUSE frames are dropped before the NIC (counted in
    /// [`RdmaHostStats::mac_control_ignored`]): the NIC keeps sending into a paused switch.
    pub ignore_pfc: bool,
    /// The NIC sends PFC XOFF frames on its own.
    pub pfc_storm: Option<PfcStorm>,
}

/// A RoCE host's NIC: the NIC's configuration (its QPs, link rate, MAC and IP address are
/// filled in by the simulator), and its faults.
#[derive(Clone, Debug, PartialEq)]
pub struct RdmaHostParams {
    /// Template of the NIC's configuration. `local_mac`, `local_ip`, `link_rate_bps`, `qps` and
    /// `catch_up_ns` are overwritten; everything else (marking, path MTU, DCQCN, window,
    /// timeouts, queue depths) is used as given.
    pub nic: NicConfig,
    /// Faults.
    pub faults: NicFaults,
}

impl Default for RdmaHostParams {
    /// A well-behaved NIC: RoCEv2 over IPv4, untagged, DSCP 3 / priority 3 (lossless under
    /// SONiC's AZURE maps), path MTU 1024, no DCQCN, a 512-packet window, go-back-N on a
    /// 1 ms retransmission timeout (IBTA timeout 8: 4.096 µs × 2^8), retried for ever, 16
    /// WRITEs posted per QP, an ACK at least every 16 packets, jumbo frames accepted.
    fn default() -> Self {
        Self {
            nic: NicConfig {
                local_mac: MacAddress([0; 6]),
                local_ip: IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
                vlan_id: None,
                data_dscp: 3,
                data_priority: 3,
                link_rate_bps: 1,
                max_frame_bytes: 9216,
                pmtu: PathMtu::Mtu1024,
                rp: None,
                np: None,
                window_packets: 512,
                retransmit_timeout_ns: 4_096 << 8,
                retry_count_max: None,
                send_queue_depth: 16,
                ack_coalesce_packets: 16,
                catch_up_ns: 0,
                drop_every: None,
                mark_ce_every: None,
                qps: Vec::new(),
            },
            faults: NicFaults::default(),
        }
    }
}

/// What a flow sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdmaFlowSpec {
    /// Sending host (a RoCE host).
    pub src: HostId,
    /// Receiving host (a RoCE host).
    pub dst: HostId,
    /// Bytes to write in total (> 0); `None`: unbounded, until `stop`.
    pub bytes: Option<u64>,
    /// When the first WRITE is posted.
    pub start: Instant,
    /// No WRITE is posted at or after this time; `None`: never stop (a bounded flow ends when
    /// its bytes are posted).
    pub stop: Option<Instant>,
    /// Bytes per RDMA WRITE (1 ..= 2^31).
    pub message_bytes: u32,
    /// VLAN of the flow's frames at both ends, overriding the NICs' (`None`: the NICs').
    pub vlan_id: Option<u16>,
}

impl RdmaFlowSpec {
    /// A flow of `bytes` from `src` to `dst` starting at `start`, in WRITEs of up to 1 MiB.
    #[must_use]
    pub fn new(src: HostId, dst: HostId, bytes: Option<u64>, start: Instant) -> Self {
        Self {
            src,
            dst,
            bytes,
            start,
            stop: None,
            message_bytes: 1 << 20,
            vlan_id: None,
        }
    }
}

/// What happened to a flow so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaFlowStats {
    /// Bytes posted as WRITEs.
    pub posted_bytes: u64,
    /// Bytes of the WRITEs completed at the sender (acknowledged).
    pub completed_bytes: u64,
    /// WRITEs completed at the sender.
    pub completed_messages: u64,
    /// Bytes of the WRITEs the receiver's responder delivered whole, in order.
    pub delivered_bytes: u64,
    /// WRITEs delivered.
    pub delivered_messages: u64,
    /// When the flow's last WRITE completed at the sender (bounded flows only).
    pub finish: Option<Instant>,
}

/// What a RoCE host saw besides its NIC's own counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RdmaHostStats {
    /// MAC Control frames dropped before the NIC by [`NicFaults::ignore_pfc`].
    pub mac_control_ignored: u64,
    /// PFC frames sent by [`NicFaults::pfc_storm`].
    pub storm_frames_sent: u64,
}

#[derive(Clone, Copy, Debug)]
enum Role {
    Sender,
    Receiver,
}

#[derive(Debug)]
struct QpWork {
    flow: RdmaFlowId,
    role: Role,
    spec: RdmaFlowSpec,
    stats: RdmaFlowStats,
    /// Messages posted and not completed.
    outstanding: u64,
    next_wr_id: u64,
}

impl QpWork {
    /// Whether the sender may still post.
    fn wants_post(&self, now: Instant) -> bool {
        if now < self.spec.start || self.spec.stop.is_some_and(|s| now >= s) {
            return false;
        }
        self.spec.bytes.is_none_or(|b| self.stats.posted_bytes < b)
    }
}

/// A RoCE host: a [`Nic`] and its flows.
#[derive(Debug)]
pub struct RdmaHost {
    params: RdmaHostParams,
    mac: [u8; 6],
    ip: IpAddr,
    /// QP configurations, until the NIC is built.
    qp_configs: Vec<QpConfig>,
    work: Vec<QpWork>,
    nic: Option<Nic>,
    buf: Vec<u8>,
    /// Sender QPs by start time, latest first (popped when due).
    pending_starts: Vec<usize>,
    /// Sender QPs that started and may post more.
    active: Vec<usize>,
    storm_next: Option<Instant>,
    stats: RdmaHostStats,
}

fn nic_now(t: Instant) -> NicInstant {
    NicInstant::from_nanos(t.as_nanos())
}

fn sim_time(t: NicInstant) -> Instant {
    Instant::from_nanos(t.as_nanos())
}

impl RdmaHost {
    pub(crate) fn new(id: HostId, mac: [u8; 6], params: RdmaHostParams) -> Result<Self, SimError> {
        if let Some(storm) = params.faults.pfc_storm {
            if storm.interval_ns == 0 {
                return Err(SimError::InvalidConfig(
                    "a PFC storm's interval must be > 0".into(),
                ));
            }
        }
        let ip = IpAddr::V4(host_ip(id));
        // Check the template now (with one placeholder QP) so that errors surface where the
        // host is added, not at the first step.
        let mut probe = params.nic.clone();
        probe.local_mac = MacAddress(mac);
        probe.local_ip = ip;
        // The real rate comes with the link; probe at 100 Gb/s.
        probe.link_rate_bps = 100_000_000_000;
        probe.qps = vec![QpConfig {
            peer_mac: MacAddress(mac),
            peer_ip: ip,
            local_qpn: FIRST_QPN,
            remote_qpn: FIRST_QPN,
            send_psn: 0,
            recv_psn: 0,
            remote_va: 0,
            remote_rkey: 0,
            vlan_id: None,
        }];
        Nic::new(probe, NicInstant::ZERO).map_err(|e| SimError::Nic(e.to_string()))?;
        let buf = vec![0; params.nic.max_frame_bytes.max(FRAME_LEN)];
        Ok(Self {
            storm_next: params.faults.pfc_storm.map(|s| s.start),
            params,
            mac,
            ip,
            qp_configs: Vec::new(),
            work: Vec::new(),
            nic: None,
            buf,
            pending_starts: Vec::new(),
            active: Vec::new(),
            stats: RdmaHostStats::default(),
        })
    }

    /// The NIC, once the simulation started.
    #[must_use]
    pub fn nic(&self) -> Option<&Nic> {
        self.nic.as_ref()
    }

    /// The host's RoCE address.
    #[must_use]
    pub fn ip(&self) -> IpAddr {
        self.ip
    }

    /// The faults configured.
    #[must_use]
    pub fn faults(&self) -> &NicFaults {
        &self.params.faults
    }

    /// Counters kept outside the NIC.
    #[must_use]
    pub fn stats(&self) -> &RdmaHostStats {
        &self.stats
    }

    /// The QP index of each flow this host takes part in, with the flow.
    pub fn qps(&self) -> impl Iterator<Item = (usize, RdmaFlowId)> + '_ {
        self.work.iter().enumerate().map(|(i, w)| (i, w.flow))
    }

    /// The counters of the flow on QP `qp` (the sender's view of what it sent and completed,
    /// the receiver's of what it delivered).
    pub(crate) fn qp_stats(&self, qp: usize) -> RdmaFlowStats {
        self.work[qp].stats
    }

    /// The next free QPN.
    pub(crate) fn next_qpn(&self) -> u32 {
        FIRST_QPN + u32::try_from(self.qp_configs.len()).unwrap_or(u32::MAX)
    }

    /// Adds a QP for `flow`; returns its index.
    pub(crate) fn add_qp(
        &mut self,
        flow: RdmaFlowId,
        sender: bool,
        spec: &RdmaFlowSpec,
        qp: QpConfig,
    ) -> Result<usize, SimError> {
        if self.nic.is_some() {
            return Err(SimError::InvalidFlow(
                "RDMA flows are added before the simulation starts".into(),
            ));
        }
        if self.qp_configs.len() >= headroom_rnic::QPS_MAX {
            return Err(SimError::InvalidFlow(format!(
                "a host takes part in at most {} RDMA flows",
                headroom_rnic::QPS_MAX
            )));
        }
        self.qp_configs.push(qp);
        self.work.push(QpWork {
            flow,
            role: if sender { Role::Sender } else { Role::Receiver },
            spec: spec.clone(),
            stats: RdmaFlowStats::default(),
            outstanding: 0,
            next_wr_id: 0,
        });
        Ok(self.work.len() - 1)
    }

    /// Takes back the QP [`RdmaHost::add_qp`] added last (its flow was refused at the other end).
    pub(crate) fn remove_last_qp(&mut self) {
        self.qp_configs.pop();
        self.work.pop();
    }

    /// Builds the NIC for a link of `rate_bps` at `now` (once).
    pub(crate) fn start(&mut self, now: Instant, rate_bps: u64) -> Result<(), SimError> {
        if self.nic.is_some() {
            return Ok(());
        }
        let mut cfg = self.params.nic.clone();
        cfg.local_mac = MacAddress(self.mac);
        cfg.local_ip = self.ip;
        cfg.link_rate_bps = rate_bps;
        cfg.catch_up_ns = 0;
        cfg.qps = if self.qp_configs.is_empty() {
            // A host with no flow (a storm source): one idle QP, since a NIC has at least one.
            vec![QpConfig {
                peer_mac: MacAddress(self.mac),
                peer_ip: self.ip,
                local_qpn: FIRST_QPN,
                remote_qpn: FIRST_QPN,
                send_psn: 0,
                recv_psn: 0,
                remote_va: 0,
                remote_rkey: 0,
                vlan_id: None,
            }]
        } else {
            self.qp_configs.clone()
        };
        self.nic = Some(Nic::new(cfg, nic_now(now)).map_err(|e| SimError::Nic(e.to_string()))?);
        let mut starts: Vec<usize> = self
            .work
            .iter()
            .enumerate()
            .filter(|(_, w)| matches!(w.role, Role::Sender))
            .map(|(i, _)| i)
            .collect();
        // Latest first; ties by QP index, the later QP first (so that pops go in QP order).
        starts.sort_by_key(|&i| core::cmp::Reverse((self.work[i].spec.start, i)));
        self.pending_starts = starts;
        Ok(())
    }

    /// Handles a frame received whole at `now`.
    pub(crate) fn receive(&mut self, now: Instant, data: &[u8]) {
        let Some(nic) = self.nic.as_mut() else {
            return;
        };
        if self.params.faults.ignore_pfc && data.get(12..14) == Some(&[0x88, 0x08]) {
            self.stats.mac_control_ignored += 1;
            return;
        }
        match nic.handle_frame(nic_now(now), data) {
            RxKind::Ack { qp } => self.complete(now, qp),
            RxKind::Request { qp } => {
                while let Some(m) = nic.poll_delivered(qp) {
                    let s = &mut self.work[qp].stats;
                    s.delivered_bytes += u64::from(m.len);
                    s.delivered_messages += 1;
                }
            }
            RxKind::Cnp { .. } | RxKind::MacControl | RxKind::Ignored => {}
        }
    }

    /// Takes QP `qp`'s completions and posts more.
    fn complete(&mut self, now: Instant, qp: usize) {
        let Some(nic) = self.nic.as_mut() else {
            return;
        };
        let work = &mut self.work[qp];
        while let Some(c) = nic.poll_completion(qp) {
            work.outstanding = work.outstanding.saturating_sub(1);
            work.stats.completed_bytes += u64::from(c.len);
            work.stats.completed_messages += 1;
        }
        if work.outstanding == 0
            && work.stats.finish.is_none()
            && work
                .spec
                .bytes
                .is_some_and(|b| work.stats.completed_bytes >= b)
        {
            work.stats.finish = Some(now);
        }
        Self::post(nic, work, qp, now);
    }

    /// Posts WRITEs on `qp` while its send queue takes them and the flow has bytes left.
    fn post(nic: &mut Nic, work: &mut QpWork, qp: usize, now: Instant) {
        while work.wants_post(now) {
            let left = work
                .spec
                .bytes
                .map_or(u64::MAX, |b| b - work.stats.posted_bytes);
            let len = u32::try_from(left.min(u64::from(work.spec.message_bytes)))
                .unwrap_or(work.spec.message_bytes);
            if nic.post_write(qp, work.next_wr_id, len).is_err() {
                // The send queue is full: more after the next completion.
                break;
            }
            work.next_wr_id += 1;
            work.outstanding += 1;
            work.stats.posted_bytes += u64::from(len);
        }
    }

    /// Flows that start by `now` begin posting; flows past their stop leave the active set.
    fn activate(&mut self, now: Instant) {
        let Some(nic) = self.nic.as_mut() else {
            return;
        };
        while let Some(&qp) = self.pending_starts.last() {
            if self.work[qp].spec.start > now {
                break;
            }
            self.pending_starts.pop();
            self.active.push(qp);
        }
        let work = &mut self.work;
        self.active.retain(|&qp| {
            let w = &mut work[qp];
            Self::post(nic, w, qp, now);
            w.wants_post(now)
        });
    }

    /// The frame to put on the link at `now`, if any.
    pub(crate) fn next_frame(&mut self, now: Instant) -> Option<HeapFrame> {
        self.nic.as_ref()?;
        self.activate(now);
        if let Some(frame) = self.storm_frame(now) {
            return Some(frame);
        }
        let nic = self.nic.as_mut()?;
        nic.handle_timeout(nic_now(now));
        let sent = nic.poll_transmit(nic_now(now), &mut self.buf)?;
        debug_assert_eq!(
            sim_time(sent.start),
            now,
            "catch_up_ns = 0: frames start now"
        );
        Some(HeapFrame::new(&self.buf[..sent.len]))
    }

    fn storm_frame(&mut self, now: Instant) -> Option<HeapFrame> {
        let storm = self.params.faults.pfc_storm?;
        let due = self.storm_next?;
        if due > now {
            return None;
        }
        if storm.stop.is_some_and(|s| now >= s) {
            self.storm_next = None;
            return None;
        }
        // The next frame one interval after this one (or after now, if the link held it).
        self.storm_next = Some(due.max(now).saturating_add_nanos(storm.interval_ns));
        let mut buf = [0u8; FRAME_LEN];
        // A 60-byte buffer always takes the frame.
        let len = MacControlRepr::Pfc(PfcRepr::xoff(storm.priorities, storm.quanta))
            .emit_frame(MacAddress(self.mac), &mut buf)
            .ok()?;
        self.stats.storm_frames_sent += 1;
        Some(HeapFrame::new(&buf[..len]))
    }

    /// The earliest time after `now` at which the host has something to do while its link is
    /// free: a NIC deadline, a flow starting, a storm frame.
    pub(crate) fn next_wake(&self, now: Instant) -> Option<Instant> {
        let nic = self.nic.as_ref()?;
        let after = |t: Instant| t.max(Instant::from_nanos(now.as_nanos() + 1));
        let mut next = nic.poll_timeout(nic_now(now)).map(|t| after(sim_time(t)));
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        consider(
            self.pending_starts
                .last()
                .map(|&qp| after(self.work[qp].spec.start)),
        );
        if let Some(storm) = self.params.faults.pfc_storm {
            consider(
                self.storm_next
                    .filter(|&t| storm.stop.is_none_or(|s| t < s))
                    .map(after),
            );
        }
        next
    }
}

/// The QP pair of flow `id` between `src` (its next QPN `src_qpn`) and `dst` (`dst_qpn`):
/// (the sender's QP, the receiver's). Each end's MAC is the one the *other* end addresses its
/// frames to: the host's own on a bridged fabric, the other end's gateway on a routed one.
pub(crate) fn qp_pair(
    id: RdmaFlowId,
    spec: &RdmaFlowSpec,
    (src_mac, src_ip, src_qpn): ([u8; 6], IpAddr, u32),
    (dst_mac, dst_ip, dst_qpn): ([u8; 6], IpAddr, u32),
) -> (QpConfig, QpConfig) {
    // Initial PSNs spread over the 24-bit space (Knuth's multiplicative hash of the flow id), so
    // that runs cross the PSN wrap as real QPs (random initial PSNs) do.
    let psn = (u32::try_from(id.0).unwrap_or(u32::MAX)).wrapping_mul(0x9E37_79B1) & PSN_MASK;
    let va = 0x1000_0000_0000 + (u64::try_from(id.0).unwrap_or(0) << 32);
    let rkey = 0x1000 + u32::try_from(id.0).unwrap_or(0);
    let sender = QpConfig {
        peer_mac: MacAddress(dst_mac),
        peer_ip: dst_ip,
        local_qpn: src_qpn,
        remote_qpn: dst_qpn,
        send_psn: psn,
        recv_psn: psn,
        remote_va: va,
        remote_rkey: rkey,
        vlan_id: spec.vlan_id,
    };
    let receiver = QpConfig {
        peer_mac: MacAddress(src_mac),
        peer_ip: src_ip,
        local_qpn: dst_qpn,
        remote_qpn: src_qpn,
        send_psn: psn,
        recv_psn: psn,
        remote_va: va,
        remote_rkey: rkey,
        vlan_id: spec.vlan_id,
    };
    (sender, receiver)
}
