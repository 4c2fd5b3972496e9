//! The emulated NIC's per-packet path does not allocate: a counting global allocator sees no
//! allocation on this thread while two NICs exchange WRITEs, ACKs, NAKs (after losses), CNPs
//! (after CE marks) and honour PFC frames, in virtual time, with every buffer preallocated; over
//! IPv4 and over IPv6 (where every frame also gets a UDP checksum).

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use headroom_roce::dcqcn::RpParams;
use headroom_roce::np::NpConfig;
use headroom_roce::rc::PathMtu;
use headroom_roce::time::Instant;
use headroom_rocegen::nic::{Nic, NicConfig, QpConfig};
use headroom_wire::ethernet::MacAddress;
use headroom_wire::mac_control::{MacControlRepr, PfcRepr, FRAME_LEN};

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

fn allocations() -> u64 {
    headroom_testkit::allocations()
}

const GBPS: u64 = 1_000_000_000;
const FRAME_MAX: usize = 1518;
/// Frames in flight per direction at most (the window is 1024 packets).
const WIRE_CAPACITY: usize = 4096;

fn config(local: bool, ipv6: bool) -> NicConfig {
    let mac_a = MacAddress([2, 0, 0, 0, 0, 0xa]);
    let mac_b = MacAddress([2, 0, 0, 0, 0, 0xb]);
    let (ip_a, ip_b) = if ipv6 {
        (
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1)),
            IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2)),
        )
    } else {
        (
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        )
    };
    let qps = (0..4u32)
        .map(|i| {
            if local {
                QpConfig {
                    peer_mac: mac_b,
                    peer_ip: ip_b,
                    local_qpn: 0x100 + i,
                    remote_qpn: 0x200 + i,
                    send_psn: 7,
                    recv_psn: 9,
                    remote_va: 0x7f00_0000_0000,
                    remote_rkey: 1,
                    vlan_id: None,
                }
            } else {
                QpConfig {
                    peer_mac: mac_a,
                    peer_ip: ip_a,
                    local_qpn: 0x200 + i,
                    remote_qpn: 0x100 + i,
                    send_psn: 9,
                    recv_psn: 7,
                    remote_va: 0x7f11_0000_0000,
                    remote_rkey: 2,
                    vlan_id: None,
                }
            }
        })
        .collect();
    NicConfig {
        local_mac: if local { mac_a } else { mac_b },
        local_ip: if local { ip_a } else { ip_b },
        vlan_id: Some(0),
        data_dscp: 3,
        data_priority: 3,
        link_rate_bps: 10 * GBPS,
        max_frame_bytes: FRAME_MAX,
        pmtu: PathMtu::Mtu1024,
        rp: Some(if local {
            RpParams::nvidia()
        } else {
            RpParams::paper()
        }),
        np: Some(NpConfig::paper()),
        window_packets: 1024,
        retransmit_timeout_ns: 1_000_000,
        retry_count_max: None,
        send_queue_depth: 32,
        ack_coalesce_packets: 16,
        catch_up_ns: 200_000,
        // B drops every 97th WRITE packet it receives (NAKs, go-back-N); A marks every 13th CE.
        drop_every: (!local).then_some(97),
        mark_ce_every: local.then_some(13),
        qps,
    }
}

/// A fixed pool of frame buffers in flight: (arrival, length, buffer index).
struct Wire {
    buffers: Vec<[u8; FRAME_MAX]>,
    free: Vec<usize>,
    in_flight: VecDeque<(u64, usize, usize)>,
}

impl Wire {
    fn new() -> Self {
        Self {
            buffers: vec![[0u8; FRAME_MAX]; WIRE_CAPACITY],
            free: (0..WIRE_CAPACITY).collect(),
            in_flight: VecDeque::with_capacity(WIRE_CAPACITY),
        }
    }
}

struct Pair {
    a: Nic,
    b: Nic,
    to_a: Wire,
    to_b: Wire,
    pfc: [u8; FRAME_LEN],
    now: u64,
    posted: u64,
    completed: u64,
    delivered: u64,
    /// Frames sent, and of those IPv6 ones (EtherType 0x86DD after the tag).
    sent: u64,
    sent_ipv6: u64,
}

impl Pair {
    fn step(&mut self) {
        let now = Instant::from_nanos(self.now);
        // A PFC XOFF for 200 quanta every 500 us.
        if self.now % 500_000 < 1_000 {
            self.a.handle_frame(now, &self.pfc);
        }
        for (wire, nic) in [(&mut self.to_a, &mut self.a), (&mut self.to_b, &mut self.b)] {
            while wire
                .in_flight
                .front()
                .is_some_and(|&(at, _, _)| at <= self.now)
            {
                let (_, len, index) = wire.in_flight.pop_front().unwrap();
                nic.handle_frame(now, &wire.buffers[index][..len]);
                wire.free.push(index);
            }
            nic.handle_timeout(now);
        }
        for qp in 0..4 {
            while self.a.poll_completion(qp).is_some() {
                self.completed += 1;
            }
            while self.b.poll_delivered(qp).is_some() {
                self.delivered += 1;
            }
            while self.a.post_write(qp, self.posted, 5_000).is_ok() {
                self.posted += 1;
            }
        }
        for (wire, nic) in [(&mut self.to_b, &mut self.a), (&mut self.to_a, &mut self.b)] {
            loop {
                let index = wire.free.pop().expect("wire capacity");
                let Some(sent) = nic.poll_transmit(now, &mut wire.buffers[index]) else {
                    wire.free.push(index);
                    break;
                };
                self.sent += 1;
                if wire.buffers[index][16..18] == [0x86, 0xdd] {
                    self.sent_ipv6 += 1;
                }
                let arrival = sent.start.as_nanos().max(self.now) + 2_000;
                wire.in_flight.push_back((arrival, sent.len, index));
            }
        }
        let next = [
            self.a.poll_timeout(now),
            self.b.poll_timeout(now),
            self.to_a
                .in_flight
                .front()
                .map(|f| Instant::from_nanos(f.0)),
            self.to_b
                .in_flight
                .front()
                .map(|f| Instant::from_nanos(f.0)),
        ]
        .into_iter()
        .flatten()
        .map(Instant::as_nanos)
        .min()
        .unwrap_or(self.now + 1_000);
        // Never more than 10 us at once, so that the PFC schedule above is met.
        self.now = next.clamp(self.now + 1, self.now + 10_000);
    }
}

#[test]
fn the_nic_does_not_allocate_per_packet() {
    no_allocation_per_packet(false);
}

#[test]
fn the_nic_does_not_allocate_per_packet_over_ipv6() {
    no_allocation_per_packet(true);
}

fn no_allocation_per_packet(ipv6: bool) {
    let mut pfc = [0u8; FRAME_LEN];
    MacControlRepr::Pfc(PfcRepr::xoff(1 << 3, 200))
        .emit_frame(MacAddress([2, 0, 0, 0, 0, 0x55]), &mut pfc)
        .unwrap();
    let mut pair = Pair {
        a: Nic::new(config(true, ipv6), Instant::ZERO).unwrap(),
        b: Nic::new(config(false, ipv6), Instant::ZERO).unwrap(),
        to_a: Wire::new(),
        to_b: Wire::new(),
        pfc,
        now: 0,
        posted: 0,
        completed: 0,
        delivered: 0,
        sent: 0,
        sent_ipv6: 0,
    };
    // Warm up (first CNPs, first losses, every queue used once).
    while pair.now < 5_000_000 {
        pair.step();
    }
    let before = allocations();
    let completed = pair.completed;
    while pair.now < 30_000_000 {
        pair.step();
    }
    let allocated = allocations() - before;
    // The run did everything it should in that time.
    let (a, b) = (pair.a.counters(), pair.b.counters());
    assert!(pair.completed > completed + 1_000, "{}", pair.completed);
    assert!(pair.delivered > 1_000);
    assert!(a.tx_retransmitted_packets_total > 0 && b.tx_naks_total > 0);
    assert!(b.tx_cnps_total > 0 && a.rx_cnps_total > 0);
    assert!(pair.a.pause().pause_frames_rx_total() == 0);
    // Every frame was of the family asked for, and for us.
    assert!(a.rx_roce_total > 1_000 && b.rx_roce_total > 1_000);
    assert_eq!(a.rx_not_for_us_total + b.rx_not_for_us_total, 0);
    assert_eq!(a.rx_icrc_errors_total + b.rx_icrc_errors_total, 0);
    assert!(pair.sent > 2_000);
    assert_eq!(pair.sent_ipv6, if ipv6 { pair.sent } else { 0 });
    assert!(
        pair.a
            .priority_stats(headroom_roce::pause::Priority::new(3).unwrap())
            .pfc_frames_rx_total
            > 10
    );
    assert_eq!(allocated, 0, "allocations on the per-packet path");
}
