//! Two emulated NICs joined by a wire, in virtual time: what the real loop does over veth, but
//! exact and deterministic.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use headroom_roce::dcqcn::RpParams;
use headroom_roce::np::NpConfig;
use headroom_roce::pacer::ethernet_wire_bytes;
use headroom_roce::pause::quanta_to_nanos;
use headroom_roce::rc::PathMtu;
use headroom_roce::time::Instant;
use headroom_wire::ethernet::{parse_l2, MacAddress};
use headroom_wire::mac_control::{MacControlRepr, PauseRepr, PfcRepr, FRAME_LEN};
use headroom_wire::roce::{parse_rocev2, verify_icrc_frame, AethSyndrome, Opcode};
use headroom_wire::Ecn;

use super::*;

const GBPS: u64 = 1_000_000_000;
const US: u64 = 1_000;
const MAC_A: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x0a]);
const MAC_B: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x0b]);
const MAC_SWITCH: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x55]);
const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const GID_A: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
const GID_B: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const QPN_A: u32 = 0x1234;
const QPN_B: u32 = 0x5678;
const PSN_A: u32 = 0x00FF_FFF0; // wraps during the tests
const PSN_B: u32 = 0x42;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

fn config(local: bool, qps: usize, link_rate_bps: u64) -> NicConfig {
    config_in(false, local, qps, link_rate_bps)
}

/// [`config`] over IPv6 (GIDs fd00::1 and fd00::2) when `ipv6`.
fn config_in(ipv6: bool, local: bool, qps: usize, link_rate_bps: u64) -> NicConfig {
    let (ip_a, ip_b) = if ipv6 {
        (IpAddr::V6(GID_A), IpAddr::V6(GID_B))
    } else {
        (IpAddr::V4(IP_A), IpAddr::V4(IP_B))
    };
    let (local_mac, local_ip) = if local { (MAC_A, ip_a) } else { (MAC_B, ip_b) };
    let qps = (0..qps as u32)
        .map(|i| {
            let (a, b) = (
                QpConfig {
                    peer_mac: MAC_B,
                    peer_ip: ip_b,
                    local_qpn: QPN_A + i,
                    remote_qpn: QPN_B + i,
                    send_psn: PSN_A,
                    recv_psn: PSN_B,
                    remote_va: 0x7f00_0000_0000,
                    remote_rkey: 0xBEEF,
                    vlan_id: None,
                },
                QpConfig {
                    peer_mac: MAC_A,
                    peer_ip: ip_a,
                    local_qpn: QPN_B + i,
                    remote_qpn: QPN_A + i,
                    send_psn: PSN_B,
                    recv_psn: PSN_A,
                    remote_va: 0x7f11_0000_0000,
                    remote_rkey: 0xCAFE,
                    vlan_id: None,
                },
            );
            if local {
                a
            } else {
                b
            }
        })
        .collect();
    NicConfig {
        local_mac,
        local_ip,
        vlan_id: None,
        data_dscp: 26,
        data_priority: 3,
        link_rate_bps,
        max_frame_bytes: 1518,
        pmtu: PathMtu::Mtu1024,
        rp: Some(RpParams::nvidia()),
        np: Some(NpConfig::nvidia()),
        window_packets: 1024,
        retransmit_timeout_ns: 4_194_304,
        retry_count_max: Some(7),
        send_queue_depth: 64,
        ack_coalesce_packets: 16,
        catch_up_ns: 200 * US,
        drop_every: None,
        mark_ce_every: None,
        qps,
    }
}

/// A frame on the wire: when its last bit arrives, and its bytes.
type InFlight = VecDeque<(u64, Vec<u8>)>;

/// Nic A sends WRITEs to Nic B over a full-duplex wire with a propagation delay.
struct Pair {
    a: Nic,
    b: Nic,
    now: u64,
    delay_ns: u64,
    rate_bps: u64,
    to_a: InFlight,
    to_b: InFlight,
    /// Frames injected into A (from a "switch"), by time.
    inject_a: InFlight,
    /// Every frame sent: (start, kind, bytes).
    sent_a: Vec<(u64, TxKind, Vec<u8>)>,
    sent_b: Vec<(u64, TxKind, Vec<u8>)>,
    /// Messages of `message_len` A keeps posted (per QP) until `messages` are posted.
    message_len: u32,
    messages: u64,
    posted: Vec<u64>,
    completed: u64,
    delivered: u64,
    /// `Some(p)`: the driver only wakes on multiples of p (a late, coarse host).
    wake_period_ns: Option<u64>,
    /// Corrupt the Nth request frame A sends (1-based).
    corrupt_nth_request: Option<u64>,
    requests_sent: u64,
}

impl Pair {
    fn new(a: NicConfig, b: NicConfig, message_len: u32, messages: u64) -> Self {
        let rate_bps = a.link_rate_bps;
        let qps = a.qps.len();
        Self {
            a: Nic::new(a, t(0)).unwrap(),
            b: Nic::new(b, t(0)).unwrap(),
            now: 0,
            delay_ns: 2 * US,
            rate_bps,
            to_a: VecDeque::new(),
            to_b: VecDeque::new(),
            inject_a: VecDeque::new(),
            sent_a: Vec::new(),
            sent_b: Vec::new(),
            message_len,
            messages,
            posted: vec![0; qps],
            completed: 0,
            delivered: 0,
            wake_period_ns: None,
            corrupt_nth_request: None,
            requests_sent: 0,
        }
    }

    fn serialization_ns(&self, len: usize) -> u64 {
        u64::from(ethernet_wire_bytes(len as u32)) * 8 * 1_000_000_000 / self.rate_bps
    }

    fn step(&mut self) {
        let now = t(self.now);
        while self.inject_a.front().is_some_and(|(at, _)| *at <= self.now) {
            let (_, frame) = self.inject_a.pop_front().unwrap();
            self.a.handle_frame(now, &frame);
        }
        while self.to_a.front().is_some_and(|(at, _)| *at <= self.now) {
            let (_, frame) = self.to_a.pop_front().unwrap();
            self.a.handle_frame(now, &frame);
        }
        while self.to_b.front().is_some_and(|(at, _)| *at <= self.now) {
            let (_, frame) = self.to_b.pop_front().unwrap();
            self.b.handle_frame(now, &frame);
        }
        self.a.handle_timeout(now);
        self.b.handle_timeout(now);
        for qp in 0..self.a.qp_count() {
            while self.a.poll_completion(qp).is_some() {
                self.completed += 1;
            }
            while self.b.poll_delivered(qp).is_some() {
                self.delivered += 1;
            }
            while self.posted[qp] < self.messages
                && self
                    .a
                    .post_write(qp, self.posted[qp], self.message_len)
                    .is_ok()
            {
                self.posted[qp] += 1;
            }
        }
        let mut buf = vec![0u8; 2048];
        while let Some(sent) = self.a.poll_transmit(now, &mut buf) {
            assert!(sent.start <= now);
            let mut frame = buf[..sent.len].to_vec();
            if matches!(sent.kind, TxKind::Data { .. }) {
                self.requests_sent += 1;
                if self.corrupt_nth_request == Some(self.requests_sent) {
                    let last = frame.len() - 10;
                    frame[last] ^= 0xFF;
                }
            }
            let arrival = sent.start.as_nanos() + self.serialization_ns(sent.len) + self.delay_ns;
            self.to_b
                .push_back((arrival.max(self.now + 1), frame.clone()));
            self.sent_a.push((sent.start.as_nanos(), sent.kind, frame));
        }
        while let Some(sent) = self.b.poll_transmit(now, &mut buf) {
            let frame = buf[..sent.len].to_vec();
            let arrival = sent.start.as_nanos() + self.serialization_ns(sent.len) + self.delay_ns;
            self.to_a
                .push_back((arrival.max(self.now + 1), frame.clone()));
            self.sent_b.push((sent.start.as_nanos(), sent.kind, frame));
        }
        let next = [
            self.a.poll_timeout(now),
            self.b.poll_timeout(now),
            self.to_a.front().map(|(at, _)| t(*at)),
            self.to_b.front().map(|(at, _)| t(*at)),
            self.inject_a.front().map(|(at, _)| t(*at)),
        ]
        .into_iter()
        .flatten()
        .map(Instant::as_nanos)
        .min()
        .unwrap_or(u64::MAX)
        .max(self.now + 1);
        self.now = match self.wake_period_ns {
            Some(period) => next.div_ceil(period).saturating_mul(period),
            None => next,
        };
    }

    fn total(&self) -> u64 {
        self.messages * self.a.qp_count() as u64
    }

    /// Runs until every message completed (and B delivered it); panics after `limit_ns`.
    fn run_to_completion(&mut self, limit_ns: u64) {
        while self.completed < self.total() || self.delivered < self.total() {
            assert!(
                self.now < limit_ns,
                "not done at {} ns: completed {}, delivered {}",
                self.now,
                self.completed,
                self.delivered
            );
            self.step();
        }
    }

    fn run_until(&mut self, end_ns: u64) {
        while self.now < end_ns {
            self.step();
        }
    }

    fn data_starts(&self) -> Vec<u64> {
        self.sent_a
            .iter()
            .filter(|(_, kind, _)| matches!(kind, TxKind::Data { .. }))
            .map(|(start, _, _)| *start)
            .collect()
    }
}

fn pfc_frame(priority: u8, quanta: u16) -> Vec<u8> {
    let mut frame = vec![0u8; FRAME_LEN];
    MacControlRepr::Pfc(PfcRepr::xoff(1 << priority, quanta))
        .emit_frame(MAC_SWITCH, &mut frame)
        .unwrap();
    frame
}

#[test]
fn write_bw_runs_at_line_rate_with_correct_frames() {
    let mut pair = Pair::new(
        config(true, 1, 10 * GBPS),
        config(false, 1, 10 * GBPS),
        65_536,
        40,
    );
    pair.run_to_completion(100_000_000);
    // 40 messages × 64 packets, nothing lost, nothing resent.
    let c = pair.a.counters();
    assert_eq!(c.tx_data_packets_total, 40 * 64);
    assert_eq!(c.tx_retransmitted_packets_total, 0);
    assert_eq!(pair.b.responder_stats(0).out_of_sequence_total, 0);
    assert_eq!(pair.b.responder_stats(0).messages_completed_total, 40);
    assert_eq!(
        pair.b.responder_stats(0).payload_bytes_received_total,
        40 * 65_536
    );
    assert_eq!(pair.b.counters().rx_payload_mismatch_total, 0);
    assert_eq!(pair.b.counters().rx_icrc_errors_total, 0);

    // Every request frame: well formed, ICRC good, opcodes FIRST, MIDDLE × 62, LAST per
    // message, PSNs consecutive across the 24-bit wrap, RETH on FIRST only, A bit on LAST.
    let sport = udp_sport(QPN_A, QPN_B);
    let mut psn = PSN_A;
    for (i, (_, _, frame)) in pair.sent_a.iter().enumerate() {
        verify_icrc_frame(frame).unwrap();
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(h.l2.vlan, None);
        assert_eq!((h.l2.dst_addr, h.l2.src_addr), (MAC_B, MAC_A));
        assert_eq!((h.dscp, h.ecn), (26, Ecn::Ect0));
        assert_eq!(h.udp_src_port, sport);
        assert_eq!(h.bth.dest_qp, QPN_B);
        assert_eq!(h.bth.psn, psn, "frame {i}");
        psn = (psn + 1) & 0x00FF_FFFF;
        let index = i % 64;
        let expected = match index {
            0 => Opcode::RdmaWriteFirst,
            63 => Opcode::RdmaWriteLast,
            _ => Opcode::RdmaWriteMiddle,
        };
        assert_eq!(h.bth.opcode, expected, "frame {i}");
        assert_eq!(h.ext.reth.is_some(), index == 0);
        if let Some(reth) = h.ext.reth {
            assert_eq!((reth.dma_len, reth.rkey), (65_536, 0xBEEF));
        }
        assert_eq!(h.payload_len, 1024);
        assert_eq!(h.bth.ack_req, index == 63, "frame {i}");
        assert_eq!(
            frame.len(),
            14 + 20 + 8 + 12 + (if index == 0 { 16 } else { 0 }) + 1024 + 4
        );
    }
    assert!(psn < PSN_A, "the PSN wrapped");
    // ACKs from B: AETH ACK with MSN, PSN of an accepted packet, to A's QP.
    let mut last_msn = 0;
    for (_, kind, frame) in &pair.sent_b {
        assert!(matches!(kind, TxKind::Ack { qp: 0 }));
        verify_icrc_frame(frame).unwrap();
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(h.bth.opcode, Opcode::Acknowledge);
        assert_eq!(h.bth.dest_qp, QPN_A);
        let aeth = h.ext.aeth.unwrap();
        assert_eq!(aeth.syndrome, AethSyndrome::Ack { credit_count: 0x1F });
        assert!(aeth.msn >= last_msn);
        last_msn = aeth.msn;
        assert_eq!(frame.len(), 14 + 20 + 8 + 12 + 4 + 4);
    }
    assert_eq!(last_msn, 40);

    // The link: data frames back to back at exactly 10 Gb/s, 1106 wire bytes each (1082-byte
    // frame + FCS, preamble, IFG), FIRST 16 bytes longer.
    let starts = pair.data_starts();
    let mut bits = 0u64;
    for (i, (start, _, frame)) in pair.sent_a.iter().enumerate() {
        assert_eq!(
            *start,
            (bits * 1_000_000_000).div_ceil(10 * GBPS),
            "frame {i}"
        );
        bits += u64::from(ethernet_wire_bytes(frame.len() as u32)) * 8;
    }
    assert_eq!(starts.len(), 2560);
}

#[test]
fn pfc_pauses_the_data_priority_for_exactly_its_quanta() {
    let mut pair = Pair::new(config(true, 1, GBPS), config(false, 1, GBPS), 65_536, 400);
    // XOFF prio 3 for 1000 quanta at t = 1 ms: 512 us at 1 Gb/s.
    let pause_at = 1_000 * US;
    let pause_ns = quanta_to_nanos(1000, GBPS);
    assert_eq!(pause_ns, 512 * US);
    pair.inject_a.push_back((pause_at, pfc_frame(3, 1000)));
    // A PFC for another priority, and an 802.3x PAUSE later, then an XON.
    pair.inject_a.push_back((3_000 * US, pfc_frame(4, 0xFFFF)));
    let mut pause = vec![0u8; FRAME_LEN];
    MacControlRepr::Pause(PauseRepr { pause_quanta: 200 })
        .emit_frame(MAC_SWITCH, &mut pause)
        .unwrap();
    pair.inject_a.push_back((5_000 * US, pause));
    pair.inject_a.push_back((7_000 * US, pfc_frame(3, 0xFFFF)));
    pair.inject_a.push_back((7_100 * US, pfc_frame(3, 0)));
    pair.run_until(8_000 * US);

    let starts = pair.data_starts();
    let in_range = |from: u64, to: u64| starts.iter().filter(|&&s| s >= from && s < to).count();
    // Nothing starts while paused; sending resumes at the very nanosecond the pause ends.
    assert_eq!(in_range(pause_at, pause_at + pause_ns), 0);
    assert!(starts.contains(&(pause_at + pause_ns)), "resumes at once");
    assert!(
        in_range(pause_at - 20 * US, pause_at) > 0,
        "was sending before"
    );
    // Priority 4 is not ours: no gap longer than one frame time around 3 ms.
    let gaps_over = |from: u64, to: u64, limit: u64| {
        starts
            .windows(2)
            .filter(|w| w[0] >= from && w[1] < to && w[1] - w[0] > limit)
            .count()
    };
    assert_eq!(gaps_over(2_900 * US, 3_500 * US, 10 * US), 0);
    // 802.3x: every priority, 200 quanta = 102.4 us.
    assert_eq!(in_range(5_000 * US, 5_000 * US + 102_400), 0);
    assert!(starts.contains(&(5_000 * US + 102_400)));
    // XOFF 0xFFFF then XON 100 us later: paused exactly 100 us.
    assert_eq!(in_range(7_000 * US, 7_100 * US), 0);
    assert!(starts.contains(&(7_100 * US)));

    let p3 = pair.a.priority_stats(Priority::new(3).unwrap());
    assert_eq!(
        (
            p3.pfc_frames_rx_total,
            p3.pfc_xoff_frames_rx_total,
            p3.pfc_xon_frames_rx_total
        ),
        (3, 2, 1)
    );
    assert_eq!(
        pair.a
            .priority_stats(Priority::new(4).unwrap())
            .pfc_frames_rx_total,
        1
    );
    assert_eq!(pair.a.pause().pause_frames_rx_total(), 1);
    assert_eq!(
        pair.a
            .pause()
            .paused_ns(Priority::new(3).unwrap(), t(8_000 * US)),
        pause_ns + 102_400 + 100 * US
    );
    // Lossless: pausing loses nothing.
    assert_eq!(pair.a.counters().tx_retransmitted_packets_total, 0);
}

#[test]
fn a_late_driver_still_gets_the_line_rate() {
    // The host only wakes every 100 us (timer slack, scheduling); frames due in between go out
    // back to back when it does, stamped with their emulated start times.
    let mut pair = Pair::new(config(true, 1, GBPS), config(false, 1, GBPS), 65_536, 100);
    pair.wake_period_ns = Some(100 * US);
    pair.run_until(20_000 * US);
    let starts = pair.data_starts();
    let first = starts[0];
    let sent_in_10ms = starts.iter().filter(|&&s| s < first + 10_000 * US).count();
    // 10 ms at 1 Gb/s: a 64-packet message is 63 × 1106 + 1122 wire bytes (1082-byte frames,
    // FIRST 16 bytes more for its RETH), 566.4 us: 17.66 messages, 1130 frames.
    assert!((1129..=1131).contains(&sent_in_10ms), "{sent_in_10ms}");
    // Without catch-up, the same host loses the link time it slept through.
    let mut cfg = config(true, 1, GBPS);
    cfg.catch_up_ns = 0;
    let mut slow = Pair::new(cfg, config(false, 1, GBPS), 65_536, 100);
    slow.wake_period_ns = Some(100 * US);
    slow.run_until(20_000 * US);
    let starts = slow.data_starts();
    let slow_in_10ms = starts
        .iter()
        .filter(|&&s| s < starts[0] + 10_000 * US)
        .count();
    assert!(slow_in_10ms < 200, "{slow_in_10ms}");
}

#[test]
fn ce_marks_make_cnps_and_the_rate_drops() {
    let mut a = config(true, 2, GBPS);
    a.mark_ce_every = Some(4);
    let mut b = config(false, 2, GBPS);
    b.np = Some(NpConfig::paper()); // one CNP per 50 us per QP at most
    let mut pair = Pair::new(a, b, 65_536, 30);
    pair.run_to_completion(1_000_000_000);
    let marked = pair.a.counters().tx_test_ce_marked_total;
    assert!(marked > 0);
    assert_eq!(pair.b.counters().rx_ecn_ce_total, marked);
    let cnps = pair.b.counters().tx_cnps_total;
    assert!(cnps > 2, "{cnps}");
    assert_eq!(pair.a.counters().rx_cnps_total, cnps);
    // CNPs: opcode 0x81, BECN, DSCP 48 ECT(0), to A's QPNs, at most one per 50 us per QP.
    let mut last: [Option<u64>; 2] = [None, None];
    for (start, kind, frame) in &pair.sent_b {
        if !matches!(kind, TxKind::Cnp { .. }) {
            continue;
        }
        verify_icrc_frame(frame).unwrap();
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(h.bth.opcode, Opcode::Cnp);
        assert!(h.bth.becn);
        assert_eq!((h.dscp, h.ecn), (48, Ecn::Ect0));
        let qp = (h.bth.dest_qp - QPN_A) as usize;
        assert!(qp < 2);
        if let Some(previous) = last[qp] {
            // The NP's window is in NP time; the frame start may lag it by the link.
            assert!(*start + 2 * US >= previous + 50 * US, "{previous} {start}");
        }
        last[qp] = Some(*start);
    }
    for qp in 0..2 {
        let rate = pair.a.qp_rate(qp);
        let rp = rate.rp.unwrap();
        assert!(rp.cnps_total > 0 && rp.rate_cuts_total > 0, "{rp:?}");
        assert!(rate.min_rate_bps < GBPS / 2, "{rate:?}");
    }
    // Congestion control loses nothing either.
    assert_eq!(pair.a.counters().tx_retransmitted_packets_total, 0);
}

#[test]
fn losses_are_repaired_by_go_back_n() {
    let mut b = config(false, 1, GBPS);
    b.drop_every = Some(500);
    let mut pair = Pair::new(config(true, 1, GBPS), b, 65_536, 50);
    pair.run_to_completion(1_000_000_000);
    let dropped = pair.b.counters().rx_test_dropped_total;
    assert!(dropped >= 6, "{dropped}");
    assert!(pair.a.counters().tx_retransmitted_packets_total >= dropped);
    assert_eq!(
        pair.a.counters().rx_naks_total,
        pair.b.counters().tx_naks_total
    );
    assert!(pair.b.counters().tx_naks_total > 0);
    assert!(pair.b.responder_stats(0).out_of_sequence_total > 0);
    assert_eq!(pair.b.responder_stats(0).messages_completed_total, 50);
    assert_eq!(pair.b.counters().rx_payload_mismatch_total, 0);
}

#[test]
fn corrupted_frames_fail_the_icrc_and_are_resent() {
    let mut pair = Pair::new(config(true, 1, GBPS), config(false, 1, GBPS), 4096, 20);
    pair.corrupt_nth_request = Some(10);
    pair.run_to_completion(1_000_000_000);
    assert_eq!(pair.b.counters().rx_icrc_errors_total, 1);
    assert!(pair.a.counters().tx_retransmitted_packets_total > 0);
    assert_eq!(pair.b.responder_stats(0).messages_completed_total, 20);
}

#[test]
fn tagged_frames_carry_their_priorities() {
    let mut a = config(true, 1, GBPS);
    a.vlan_id = Some(0);
    a.mark_ce_every = Some(2);
    let mut b = config(false, 1, GBPS);
    b.vlan_id = Some(0);
    let mut pair = Pair::new(a, b, 2048, 10);
    pair.run_to_completion(1_000_000_000);
    let pcps = |sent: &[(u64, TxKind, Vec<u8>)], want: fn(&TxKind) -> bool| -> Vec<u8> {
        sent.iter()
            .filter(|(_, kind, _)| want(kind))
            .map(|(_, _, frame)| {
                verify_icrc_frame(frame).unwrap();
                let tci = parse_l2(frame).unwrap().vlan.unwrap();
                assert_eq!(tci.vid(), 0);
                tci.pcp()
            })
            .collect()
    };
    let data = pcps(&pair.sent_a, |k| matches!(k, TxKind::Data { .. }));
    assert!(!data.is_empty() && data.iter().all(|&p| p == 3));
    let acks = pcps(&pair.sent_b, |k| matches!(k, TxKind::Ack { .. }));
    assert!(!acks.is_empty() && acks.iter().all(|&p| p == 3));
    let cnps = pcps(&pair.sent_b, |k| matches!(k, TxKind::Cnp { .. }));
    assert!(!cnps.is_empty() && cnps.iter().all(|&p| p == 6));
}

#[test]
fn frames_for_others_and_garbage_are_counted_not_used() {
    let mut nic = Nic::new(config(false, 1, GBPS), t(0)).unwrap();
    nic.handle_frame(t(0), &[0u8; 10]);
    nic.handle_frame(t(0), &[0xFFu8; 60]);
    // A PFC frame with a wrong destination.
    let mut bad = pfc_frame(3, 10);
    bad[5] = 0x02;
    nic.handle_frame(t(0), &bad);
    // A good PFC frame.
    nic.handle_frame(t(0), &pfc_frame(3, 10));
    let c = nic.counters();
    assert_eq!(c.rx_frames_total, 4);
    assert_eq!(c.rx_non_roce_total, 2);
    assert_eq!(c.rx_mac_control_errors_total, 1);
    assert!(nic.pause().is_paused(t(1), Priority::new(3).unwrap()));
    // Nothing to send, nothing due.
    let mut buf = [0u8; 2048];
    assert!(nic.poll_transmit(t(10), &mut buf).is_none());
    assert!(nic.poll_timeout(t(10)).is_none());
}

#[test]
fn bad_configurations_are_refused() {
    let mut cfg = config(true, 1, GBPS);
    cfg.max_frame_bytes = 1000;
    assert!(matches!(
        Nic::new(cfg, t(0)),
        Err(NicError::MtuTooLarge { .. })
    ));
    let mut cfg = config(true, 2, GBPS);
    cfg.qps[1].local_qpn = cfg.qps[0].local_qpn;
    assert!(matches!(Nic::new(cfg, t(0)), Err(NicError::BadQps(_))));
    let mut cfg = config(true, 1, GBPS);
    cfg.data_priority = 8;
    assert!(Nic::new(cfg, t(0)).is_err());
    let mut cfg = config(true, 1, GBPS);
    cfg.link_rate_bps = 0;
    assert!(Nic::new(cfg, t(0)).is_err());
}

// ---- IPv6 ---------------------------------------------------------------------------------------

/// The IPv6 header fields of a frame (untagged): (traffic class, flow label, next header, hop
/// limit, source, destination).
fn ipv6_fields(frame: &[u8]) -> (u8, u32, u8, u8, Ipv6Addr, Ipv6Addr) {
    assert_eq!(&frame[12..14], &[0x86, 0xdd], "IPv6 EtherType");
    let ip = &frame[14..54];
    let word = u32::from_be_bytes([ip[0], ip[1], ip[2], ip[3]]);
    assert_eq!(word >> 28, 6, "version");
    let addr = |at: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&ip[at..at + 16]).unwrap());
    (
        (word >> 20) as u8,
        word & 0xF_FFFF,
        ip[6],
        ip[7],
        addr(8),
        addr(24),
    )
}

/// The UDP checksum of an untagged IPv6 frame verifies (RFC 8200 §8.1: pseudo-header of
/// source, destination, UDP length and next header 17), and is not 0.
fn assert_udp6_checksum(frame: &[u8]) {
    let ip = &frame[14..54];
    let udp = &frame[54..];
    let udp_len = usize::from(u16::from_be_bytes([udp[4], udp[5]]));
    assert_eq!(
        usize::from(u16::from_be_bytes([ip[4], ip[5]])),
        udp_len,
        "payload length"
    );
    assert_ne!(&udp[6..8], &[0, 0], "a zero UDP checksum over IPv6");
    let mut sum: u64 = 0;
    let mut add = |bytes: &[u8]| {
        for pair in bytes.chunks(2) {
            let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
            sum += u64::from(word);
        }
    };
    add(&ip[8..40]);
    add(&(udp_len as u32).to_be_bytes());
    add(&[0, 0, 0, 17]);
    add(&udp[..udp_len]);
    while sum >> 16 != 0 {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    assert_eq!(sum, 0xFFFF, "UDP checksum");
}

#[test]
fn write_bw_over_ipv6_with_acks() {
    let mut pair = Pair::new(
        config_in(true, true, 1, 10 * GBPS),
        config_in(true, false, 1, 10 * GBPS),
        65_536,
        10,
    );
    pair.run_to_completion(100_000_000);
    let c = pair.a.counters();
    assert_eq!(c.tx_data_packets_total, 10 * 64);
    assert_eq!(c.tx_retransmitted_packets_total, 0);
    assert!(c.rx_acks_total > 0);
    assert_eq!(c.rx_acks_total, pair.b.counters().tx_acks_total);
    let b = pair.b.counters();
    assert_eq!(b.rx_roce_total, 10 * 64);
    assert_eq!(
        (
            b.rx_icrc_errors_total,
            b.rx_not_for_us_total,
            b.rx_payload_mismatch_total
        ),
        (0, 0, 0)
    );
    assert_eq!(pair.b.responder_stats(0).messages_completed_total, 10);
    assert_eq!(pair.b.responder_stats(0).out_of_sequence_total, 0);
    assert_eq!(
        pair.b.responder_stats(0).payload_bytes_received_total,
        10 * 65_536
    );
    // Every frame: IPv6, traffic class DSCP 26 << 2 | ECT(0), the QP's flow label (symmetric:
    // the same both ways), next header UDP, hop limit 64, to the peer's GID; UDP to 4791 with a
    // valid, non-zero checksum; ICRC good with the IPv6 masks; 20 bytes longer than over IPv4.
    let label = flow_label(QPN_A, QPN_B);
    assert_ne!(label, 0);
    let sport = udp_sport(QPN_A, QPN_B);
    let mut psn = PSN_A;
    for (i, (_, _, frame)) in pair.sent_a.iter().enumerate() {
        verify_icrc_frame(frame).unwrap();
        assert_eq!(
            ipv6_fields(frame),
            (26 << 2 | 0b10, label, 17, 64, GID_A, GID_B),
            "frame {i}"
        );
        assert_udp6_checksum(frame);
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(
            (h.src_addr, h.dst_addr),
            (IpAddr::V6(GID_A), IpAddr::V6(GID_B))
        );
        assert_eq!((h.dscp, h.ecn), (26, Ecn::Ect0));
        assert_eq!(h.udp_src_port, sport);
        assert_eq!(h.bth.dest_qp, QPN_B);
        assert_eq!(h.bth.psn, psn, "frame {i}");
        psn = (psn + 1) & 0x00FF_FFFF;
        let index = i % 64;
        assert_eq!(
            frame.len(),
            14 + 40 + 8 + 12 + (if index == 0 { 16 } else { 0 }) + 1024 + 4
        );
    }
    for (_, kind, frame) in &pair.sent_b {
        assert!(matches!(kind, TxKind::Ack { qp: 0 }));
        verify_icrc_frame(frame).unwrap();
        assert_eq!(
            ipv6_fields(frame),
            (26 << 2 | 0b10, label, 17, 64, GID_B, GID_A)
        );
        assert_udp6_checksum(frame);
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(h.bth.opcode, Opcode::Acknowledge);
        assert_eq!(h.bth.dest_qp, QPN_A);
        assert_eq!(
            h.ext.aeth.unwrap().syndrome,
            AethSyndrome::Ack { credit_count: 0x1F }
        );
        assert_eq!(frame.len(), 14 + 40 + 8 + 12 + 4 + 4);
    }
}

#[test]
fn ce_marks_over_ipv6_make_ipv6_cnps() {
    let mut a = config_in(true, true, 1, GBPS);
    a.mark_ce_every = Some(4);
    let mut b = config_in(true, false, 1, GBPS);
    b.np = Some(NpConfig::paper());
    let mut pair = Pair::new(a, b, 65_536, 20);
    pair.run_to_completion(1_000_000_000);
    let marked = pair.a.counters().tx_test_ce_marked_total;
    assert!(marked > 0);
    // CE in the IPv6 traffic class reached the NP, every one.
    let ce_sent = pair
        .sent_a
        .iter()
        .filter(|(_, _, f)| ipv6_fields(f).0 & 0b11 == 0b11)
        .count() as u64;
    assert_eq!(ce_sent, marked);
    assert_eq!(pair.b.counters().rx_ecn_ce_total, marked);
    let cnps = pair.b.counters().tx_cnps_total;
    assert!(cnps > 1, "{cnps}");
    assert_eq!(pair.a.counters().rx_cnps_total, cnps);
    let rp = pair.a.qp_rate(0).rp.unwrap();
    assert_eq!(rp.cnps_total, cnps);
    assert!(rp.rate_cuts_total > 0);
    // The CNPs: IPv6, DSCP 48 ECT(0), to A's GID and QPN, opcode 0x81 with BECN, 60 + 20 bytes.
    let mut seen = 0;
    for (_, kind, frame) in &pair.sent_b {
        if !matches!(kind, TxKind::Cnp { .. }) {
            continue;
        }
        seen += 1;
        verify_icrc_frame(frame).unwrap();
        let (tclass, label, next, hops, src, dst) = ipv6_fields(frame);
        assert_eq!(
            (tclass, label, next, hops, src, dst),
            (
                48 << 2 | 0b10,
                flow_label(QPN_A, QPN_B),
                17,
                64,
                GID_B,
                GID_A
            )
        );
        assert_udp6_checksum(frame);
        let h = parse_rocev2(frame).unwrap();
        assert_eq!(h.bth.opcode, Opcode::Cnp);
        assert!(h.bth.becn);
        assert_eq!(h.bth.dest_qp, QPN_A);
        assert_eq!(frame.len(), 14 + 40 + 8 + 12 + 16 + 4);
    }
    assert_eq!(seen, cnps);
    assert_eq!(pair.a.counters().tx_retransmitted_packets_total, 0);
}

#[test]
fn ipv6_frames_to_another_gid_or_of_the_other_family_are_ignored() {
    // A's frames, re-addressed: to another GID (flooded by a switch), and the same WRITEs over
    // IPv4 to an IPv6 NIC whose IPv4 twin would have accepted them.
    let mut pair = Pair::new(
        config_in(true, true, 1, GBPS),
        config_in(true, false, 1, GBPS),
        4096,
        2,
    );
    pair.run_to_completion(100_000_000);
    let writes: Vec<Vec<u8>> = pair
        .sent_a
        .iter()
        .filter(|(_, kind, _)| matches!(kind, TxKind::Data { .. }))
        .map(|(_, _, frame)| frame.clone())
        .collect();
    assert_eq!(writes.len(), 8);
    let mut b = Nic::new(config_in(true, false, 1, GBPS), t(0)).unwrap();
    for frame in &writes {
        let mut other = frame.clone();
        // Destination GID fd00::3 (the ICRC does not mask addresses: recomputed, so that only
        // the address makes the difference).
        other[14 + 24 + 15] = 3;
        headroom_wire::roce::fill_icrc(&mut other[14..]).unwrap();
        verify_icrc_frame(&other).unwrap();
        b.handle_frame(t(0), &other);
    }
    let mut v4 = Pair::new(config(true, 1, GBPS), config(false, 1, GBPS), 4096, 2);
    v4.run_to_completion(100_000_000);
    for (_, kind, frame) in &v4.sent_a {
        if matches!(kind, TxKind::Data { .. }) {
            b.handle_frame(t(0), frame);
        }
    }
    let c = b.counters();
    assert_eq!(c.rx_frames_total, 16);
    assert_eq!(c.rx_not_for_us_total, 16);
    assert_eq!(c.rx_roce_total, 0);
    assert_eq!(b.responder_stats(0).packets_accepted_total, 0);
    assert!(
        b.poll_transmit(t(10), &mut [0u8; 2048]).is_none(),
        "no ACK, no NAK"
    );
    // The originals are taken (the same NIC state, so the drop above was the address).
    for frame in &writes {
        b.handle_frame(t(1), frame);
    }
    assert_eq!(b.counters().rx_roce_total, 8);
    assert_eq!(b.responder_stats(0).messages_completed_total, 2);
}

#[test]
fn ipv6_frames_with_a_bad_icrc_are_dropped() {
    let mut pair = Pair::new(
        config_in(true, true, 1, GBPS),
        config_in(true, false, 1, GBPS),
        4096,
        20,
    );
    pair.corrupt_nth_request = Some(10);
    pair.run_to_completion(1_000_000_000);
    assert_eq!(pair.b.counters().rx_icrc_errors_total, 1);
    assert!(pair.a.counters().tx_retransmitted_packets_total > 0);
    // The NAK went over IPv6 and was taken: go-back-N, not the 4 ms timeout.
    assert!(pair.b.counters().tx_naks_total > 0);
    assert_eq!(
        pair.a.counters().rx_naks_total,
        pair.b.counters().tx_naks_total
    );
    assert_eq!(pair.a.requester_stats(0).timeouts_total, 0);
    assert_eq!(pair.b.responder_stats(0).messages_completed_total, 20);
}

#[test]
fn truncated_or_mangled_ipv6_frames_never_panic_and_are_not_taken() {
    let mut pair = Pair::new(
        config_in(true, true, 1, GBPS),
        config_in(true, false, 1, GBPS),
        2048,
        1,
    );
    pair.run_to_completion(100_000_000);
    let first = pair.sent_a[0].2.clone();
    let mut nic = Nic::new(config_in(true, false, 1, GBPS), t(0)).unwrap();
    // Every truncation of a WRITE FIRST, and every single-byte corruption of its headers (IPv6
    // payload length, next header, addresses, UDP ports and length, BTH) but those the ICRC
    // masks (version/traffic class/flow label, hop limit, UDP checksum, BTH resv8a): none is
    // accepted as a request, none panics.
    for len in 0..first.len() {
        nic.handle_frame(t(0), &first[..len]);
    }
    let masked = [14, 15, 16, 17, 14 + 7, 54 + 6, 54 + 7, 62 + 4];
    for at in (12..14 + 40 + 8 + 12).filter(|at| !masked.contains(at)) {
        for value in [0x00, 0xFF, first[at] ^ 0x01] {
            let mut frame = first.clone();
            if frame[at] == value {
                continue;
            }
            frame[at] = value;
            nic.handle_frame(t(0), &frame);
        }
    }
    assert_eq!(nic.responder_stats(0).packets_accepted_total, 0);
    // Corruptions the parser lets through are ICRC errors, other GIDs, or other QPs.
    let c = nic.counters();
    assert!(c.rx_icrc_errors_total > 0 && c.rx_not_for_us_total > 0 && c.rx_unknown_qp_total > 0);
    assert_eq!(c.rx_roce_total, 0);
    // A masked field changed on the way (a switch's CE mark, another hop limit) is fine: taken.
    let mut marked = first.clone();
    marked[15] |= 0x30; // ECN bits of the traffic class: CE
    marked[14 + 7] = 17;
    nic.handle_frame(t(1), &marked);
    assert_eq!(nic.responder_stats(0).packets_accepted_total, 1);
    assert_eq!(nic.counters().rx_ecn_ce_total, 1);
}

#[test]
fn a_family_mismatch_is_refused() {
    // Our GID is IPv6, a QP's peer is IPv4 (and the other way round): no NIC.
    let mut cfg = config_in(true, true, 2, GBPS);
    cfg.qps[1].peer_ip = IpAddr::V4(IP_B);
    let error = Nic::new(cfg, t(0)).unwrap_err();
    assert_eq!(
        error,
        NicError::FamilyMismatch {
            local: IpAddr::V6(GID_A),
            peer: IpAddr::V4(IP_B)
        }
    );
    let text = error.to_string();
    assert!(text.contains("IPv6") && text.contains("IPv4") && text.contains("--ipv6"));
    let mut cfg = config(true, 1, GBPS);
    cfg.qps[0].peer_ip = IpAddr::V6(GID_B);
    assert!(matches!(
        Nic::new(cfg, t(0)),
        Err(NicError::FamilyMismatch { .. })
    ));
    // A full path-MTU frame over IPv6 (tag, RETH) is 20 bytes longer than over IPv4: 4194.
    let mut cfg = config_in(true, true, 1, GBPS);
    cfg.pmtu = PathMtu::Mtu4096;
    cfg.max_frame_bytes = 4096 + 98;
    assert!(Nic::new(cfg.clone(), t(0)).is_ok());
    cfg.max_frame_bytes -= 1;
    assert!(matches!(
        Nic::new(cfg, t(0)),
        Err(NicError::MtuTooLarge { .. })
    ));
}

#[test]
fn handle_frame_says_which_qp_a_frame_touched_and_a_qp_vlan_overrides_the_nics() {
    let mut a_cfg = config(true, 2, 10 * GBPS);
    let mut b_cfg = config(false, 2, 10 * GBPS);
    a_cfg.vlan_id = Some(100);
    b_cfg.vlan_id = Some(100);
    // QP 1 of both ends sits on VLAN 200; QP 0 keeps the NIC's VLAN 100.
    a_cfg.qps[1].vlan_id = Some(200);
    b_cfg.qps[1].vlan_id = Some(200);
    let mut a = Nic::new(a_cfg, t(0)).unwrap();
    let mut b = Nic::new(b_cfg, t(0)).unwrap();
    let mut buf = vec![0u8; 2048];
    for qp in 0..2 {
        a.post_write(qp, qp as u64, 100).unwrap();
    }
    let mut now = 0;
    let mut requests = Vec::new();
    while requests.len() < 2 {
        while let Some(sent) = a.poll_transmit(t(now), &mut buf) {
            requests.push((sent.kind, buf[..sent.len].to_vec()));
        }
        now += 1_000;
    }
    for (kind, frame) in &requests {
        let TxKind::Data { qp, .. } = *kind else {
            panic!("{kind:?}")
        };
        let vid = parse_l2(frame).unwrap().vlan.unwrap().vid();
        assert_eq!(vid, if qp == 1 { 200 } else { 100 });
        assert_eq!(b.handle_frame(t(now), frame), RxKind::Request { qp });
    }
    b.handle_timeout(t(now));
    let mut acks = 0;
    while let Some(sent) = b.poll_transmit(t(now + 100_000), &mut buf) {
        let TxKind::Ack { qp } = sent.kind else {
            panic!("{:?}", sent.kind)
        };
        let frame = buf[..sent.len].to_vec();
        assert_eq!(
            parse_l2(&frame).unwrap().vlan.unwrap().vid(),
            if qp == 1 { 200 } else { 100 },
            "the ACK goes back on the QP's VLAN"
        );
        assert_eq!(a.handle_frame(t(now + 200_000), &frame), RxKind::Ack { qp });
        acks += 1;
    }
    assert_eq!(acks, 2);
    assert_eq!(a.handle_frame(t(0), &pfc_frame(3, 10)), RxKind::MacControl);
    assert_eq!(a.handle_frame(t(0), &[0u8; 10]), RxKind::Ignored);
}
