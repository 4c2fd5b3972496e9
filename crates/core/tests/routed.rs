//! Routed forwarding through the step (`route_forward.rs`): rewrites, every punt and drop
//! reason of a routed port, ECMP spread and polarisation, a FIB swap under traffic, PFC on a
//! routed path. Virtual time, a FIB built by `FibBuilder` and attached with `attach_fib`.

mod common;

use common::*;
use etherparse::PacketBuilder;
use headroom_core::counters::DropReason;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::params::{presets, SwitchParams, VlanMode};
use headroom_core::punt::PuntReason;
use headroom_core::route::{
    fib_channel, EcmpHash, EcmpMember, FibBuilder, FibConfig, FibSender, Ipv4Prefix, Ipv6Prefix,
    NextHop, NextHopId, RouteTarget,
};
use headroom_core::types::PortId;
use headroom_wire::checksum::checksum;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::ip::Ecn;
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::ipv6::Ipv6Packet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

const GBPS: u64 = 1_000_000_000;
/// Router MAC of port `p` in [`routed_params`] (the preset's port MACs).
const fn router_mac(p: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, p + 1]
}
const NEIGH: [[u8; 6]; 4] = [
    [0x02, 0xbb, 0, 0, 0, 0],
    [0x02, 0xbb, 0, 0, 0, 1],
    [0x02, 0xbb, 0, 0, 0, 2],
    [0x02, 0xbb, 0, 0, 0, 3],
];

/// `ports` routed ports at 1 Gb/s, SONiC's default QoS; the last one has an MTU of 1500.
fn routed_params(ports: usize) -> SwitchParams {
    let mut params = presets::simple(ports, GBPS);
    for p in &mut params.ports {
        p.vlan = VlanMode::Routed;
    }
    // A smaller MTU on the last port, for the MTU check of routes out of it.
    if let Some(last) = params.ports.last_mut() {
        last.mtu_bytes = 1500;
    }
    params
}

/// A UDP packet from HOST_A to `dst_mac`, 10.0.0.1 → `dst`, with the given TTL, DSCP, ECN and
/// UDP source port (UDP destination 4791, RoCEv2), `len` bytes.
fn v4(dst_mac: [u8; 6], dst: [u8; 4], ttl: u8, dscp: u8, sport: u16, len: usize) -> HeapFrame {
    let builder = PacketBuilder::ethernet2(HOST_A, dst_mac)
        .ipv4([10, 0, 0, 1], dst, ttl)
        .udp(sport, 4791);
    let mut buf = Vec::new();
    builder.write(&mut buf, &vec![0x5a; len - 42]).unwrap();
    let mut ip = Ipv4Packet::new_checked(&mut buf[14..]).unwrap();
    ip.set_dscp(dscp);
    ip.set_ecn(Ecn::Ect0);
    ip.fill_checksum();
    HeapFrame::new(&buf)
}

fn v6(dst_mac: [u8; 6], dst: Ipv6Addr, hop_limit: u8, dscp: u8, len: usize) -> HeapFrame {
    let src: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let builder = PacketBuilder::ethernet2(HOST_A, dst_mac)
        .ipv6(src.octets(), dst.octets(), hop_limit)
        .udp(49152, 4791);
    let mut buf = Vec::new();
    builder.write(&mut buf, &vec![0x5a; len - 62]).unwrap();
    // Traffic class = DSCP << 2 | ECT(1).
    let tc = dscp << 2 | 0b01;
    buf[14] = 0x60 | tc >> 4;
    buf[15] = (buf[15] & 0x0F) | (tc << 4);
    HeapFrame::new(&buf)
}

/// A FIB: 10.1.0.0/16 and 2001:db8:1::/48 via NEIGH[0] on port 1; 10.2.0.0/16 unresolved on
/// port 2; 10.9.0.1/32 local; 10.3.0.0/16 blackhole; 10.4.0.0/16 kernel; 10.5.0.0/16 via an
/// ECMP group of NEIGH[0..4] on ports 0..4; 10.6.0.0/16 via NEIGH[3] on port 3.
struct Routes {
    builder: FibBuilder,
    hops: Vec<NextHopId>,
}

fn pfx(a: [u8; 4], len: u8) -> Ipv4Prefix {
    Ipv4Prefix::new(Ipv4Addr::from(a), len).unwrap()
}

fn routes(hash: EcmpHash) -> Routes {
    let mut b = FibBuilder::new(FibConfig {
        hash,
        ..FibConfig::default()
    })
    .unwrap();
    let hops: Vec<NextHopId> = (0..4u16)
        .map(|p| {
            b.add_next_hop(NextHop::Resolved {
                port: PortId(p),
                vlan: None,
                mac: MacAddress(NEIGH[usize::from(p)]),
            })
            .unwrap()
        })
        .collect();
    let unresolved = b
        .add_next_hop(NextHop::Unresolved {
            port: PortId(2),
            vlan: None,
        })
        .unwrap();
    let group = b
        .add_ecmp_group(
            &hops.iter().map(|&h| EcmpMember::new(h)).collect::<Vec<_>>(),
            None,
        )
        .unwrap();
    b.set_route_v4(pfx([10, 1, 0, 0], 16), RouteTarget::NextHop(hops[1]))
        .unwrap();
    b.set_route_v6(
        Ipv6Prefix::new("2001:db8:1::".parse().unwrap(), 48).unwrap(),
        RouteTarget::NextHop(hops[1]),
    )
    .unwrap();
    b.set_route_v4(pfx([10, 2, 0, 0], 16), RouteTarget::NextHop(unresolved))
        .unwrap();
    b.set_route_v4(
        pfx([10, 9, 0, 1], 32),
        RouteTarget::NextHop(NextHopId::LOCAL),
    )
    .unwrap();
    b.set_route_v4(
        pfx([10, 3, 0, 0], 16),
        RouteTarget::NextHop(NextHopId::BLACKHOLE),
    )
    .unwrap();
    b.set_route_v4(
        pfx([10, 4, 0, 0], 16),
        RouteTarget::NextHop(NextHopId::KERNEL),
    )
    .unwrap();
    b.set_route_v4(pfx([10, 5, 0, 0], 16), RouteTarget::Ecmp(group))
        .unwrap();
    b.set_route_v4(pfx([10, 6, 0, 0], 16), RouteTarget::NextHop(hops[3]))
        .unwrap();
    b.publish().unwrap();
    Routes { builder: b, hops }
}

/// A routed lab with `routes` attached; returns the sender for later publications.
fn routed_lab(ports: usize, routes: &Routes) -> (Lab, FibSender) {
    let mut lab = Lab::new(routed_params(ports));
    let (sender, reader) = fib_channel(Arc::clone(routes.builder.published()));
    lab.sw.attach_fib(reader);
    (lab, sender)
}

fn drops(lab: &Lab, port: u16, reason: DropReason) -> u64 {
    lab.rx_counters(port).drops[reason.index()].get()
}

fn punts(lab: &Lab, port: u16, reason: PuntReason) -> u64 {
    lab.rx_counters(port).punt_frames[reason.index()].get()
}

fn sent(lab: &mut Lab, ports: u16) -> Vec<usize> {
    (0..ports).map(|p| lab.tx(p, 4096).len()).collect()
}

#[test]
fn routed_ipv4_is_rewritten_with_ttl_minus_one_and_a_valid_checksum() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    let before = v4(router_mac(0), [10, 1, 2, 3], 64, 46, 1000, 128);
    lab.rx(0, before.clone());
    let out = lab.tx(1, 64);
    assert_eq!(out.len(), 1, "routed out of port 1");
    let after = out[0].data();
    assert_eq!(after[..6], NEIGH[1], "destination: the neighbour");
    assert_eq!(after[6..12], router_mac(1), "source: the egress port's MAC");
    let mut expected = before.data()[12..].to_vec();
    expected[2 + 8] = 63;
    expected[2 + 10..2 + 12].copy_from_slice(&after[24..26]);
    assert_eq!(
        after[12..],
        expected[..],
        "nothing else changed but TTL and checksum"
    );
    let ip_in = Ipv4Packet::new_checked(&before.data()[14..]).unwrap();
    let ip = Ipv4Packet::new_checked(&after[14..]).unwrap();
    assert_eq!(ip.hop_limit(), 63);
    assert_eq!((ip.dscp(), ip.ecn()), (46, Ecn::Ect0), "DSCP and ECN kept");
    assert!(ip.verify_checksum());
    let mut recomputed = after[14..34].to_vec();
    Ipv4Packet::new_unchecked(&mut recomputed[..]).fill_checksum();
    assert_eq!(
        recomputed,
        after[14..34],
        "incremental == full recomputation"
    );
    assert_eq!(ip.payload(), ip_in.payload(), "UDP untouched");
    assert_eq!(after.len(), before.len());
    // Counted as routed, in the ingress port's PG (DSCP 46 → TC 5 → PG 0).
    assert_eq!(lab.rx_counters(0).rif_in_packets.get(), 1);
    assert_eq!(lab.rx_counters(0).rif_in_octets.get(), 128);
    assert_eq!(lab.rx_counters(1).rif_out_packets.get(), 1);
    assert_eq!(lab.rx_counters(0).pg_frames[0].get(), 1);
    assert_eq!(
        lab.rx_counters(1)
            .pg_frames
            .iter()
            .map(|c| c.get())
            .sum::<u64>(),
        0
    );
    assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
}

#[test]
fn routed_ipv6_decrements_the_hop_limit_and_keeps_the_traffic_class() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    let before = v6(router_mac(2), "2001:db8:1::7".parse().unwrap(), 2, 3, 128);
    lab.rx(2, before.clone());
    let out = lab.tx(1, 64);
    assert_eq!(out.len(), 1);
    let after = out[0].data();
    assert_eq!(
        (&after[..6], &after[6..12]),
        (&NEIGH[1][..], &router_mac(1)[..])
    );
    let ip = Ipv6Packet::new_checked(&after[14..]).unwrap();
    assert_eq!(ip.hop_limit(), 1);
    assert_eq!((ip.dscp(), ip.ecn()), (3, Ecn::Ect1));
    let mut expected = before.data()[12..].to_vec();
    expected[2 + 7] = 1;
    assert_eq!(
        after[12..],
        expected[..],
        "only the hop limit changed past the MACs"
    );
    // DSCP 3 → TC 3 → PG 3, the ingress port's lossless PG.
    assert_eq!(lab.rx_counters(2).pg_frames[3].get(), 1);
}

#[test]
fn a_hairpin_route_leaves_by_the_port_it_came_in_on() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    lab.rx(1, v4(router_mac(1), [10, 1, 0, 9], 9, 0, 1, 64));
    assert_eq!(sent(&mut lab, 4), [0, 1, 0, 0]);
}

#[test]
fn priority_tagged_frames_are_routed_untagged_and_other_tags_filtered() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    let tag = |frame: &HeapFrame, vid: u16| {
        let d = frame.data();
        let mut t = d[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00]);
        t.extend_from_slice(&((5u16 << 13) | vid).to_be_bytes());
        t.extend_from_slice(&d[12..]);
        HeapFrame::new(&t)
    };
    let plain = v4(router_mac(0), [10, 1, 0, 9], 9, 0, 1, 64);
    lab.rx(0, tag(&plain, 0));
    let out = lab.tx(1, 64);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].len(), 64, "the priority tag is gone");
    assert_eq!(out[0].data()[12..14], [0x08, 0x00]);
    lab.rx(0, tag(&plain, 10));
    assert_eq!(drops(&lab, 0, DropReason::VlanFiltered), 1);
    assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
}

/// An ARP frame (`op` 1 request, 2 reply) to `dst`.
fn arp(dst: [u8; 6], op: u16) -> HeapFrame {
    let mut f = Vec::new();
    f.extend_from_slice(&dst);
    f.extend_from_slice(&HOST_A);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0, 6, 4]);
    f.extend_from_slice(&op.to_be_bytes());
    f.resize(60, 0);
    HeapFrame::new(&f)
}

/// An ICMPv6 message of `icmp_type` to `dst` (IP) and `dst_mac`.
fn icmpv6(dst_mac: [u8; 6], dst: Ipv6Addr, icmp_type: u8) -> HeapFrame {
    let src: Ipv6Addr = "fe80::1".parse().unwrap();
    let builder = PacketBuilder::ethernet2(HOST_A, dst_mac)
        .ipv6(src.octets(), dst.octets(), 255)
        .icmpv6_raw(icmp_type, 0, [0; 4]);
    let mut buf = Vec::new();
    builder.write(&mut buf, &[0; 16]).unwrap();
    HeapFrame::new(&buf)
}

#[test]
fn every_punt_reason_of_a_routed_port_is_punted_with_its_port_and_counted() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    let me = router_mac(0);
    let mut bad_ihl = v4(me, [10, 1, 0, 1], 64, 0, 1, 64);
    let cases: Vec<(HeapFrame, PuntReason)> = vec![
        (arp([0xFF; 6], 1), PuntReason::ArpReq),
        (arp(me, 1), PuntReason::ArpReq),
        (arp(me, 2), PuntReason::ArpResp),
        (arp([0xFF; 6], 2), PuntReason::ArpResp),
        (
            icmpv6(
                [0x33, 0x33, 0xff, 0, 0, 1],
                "ff02::1:ff00:1".parse().unwrap(),
                135,
            ),
            PuntReason::NeighDiscovery,
        ),
        (
            icmpv6(me, "2001:db8:1::1".parse().unwrap(), 136),
            PuntReason::NeighDiscovery,
        ),
        (
            icmpv6([0x33, 0x33, 0, 0, 0, 2], "ff02::2".parse().unwrap(), 133),
            PuntReason::NeighDiscovery,
        ),
        (v4(me, [10, 9, 0, 1], 64, 0, 1, 64), PuntReason::Ip2me),
        (v4(me, [10, 9, 0, 1], 1, 0, 1, 64), PuntReason::Ip2me),
        (
            v6(me, "fe80::2".parse().unwrap(), 64, 0, 100),
            PuntReason::Ip2me,
        ),
        (v4(me, [10, 1, 0, 1], 1, 0, 1, 64), PuntReason::TtlError),
        (v4(me, [10, 1, 0, 1], 0, 0, 1, 64), PuntReason::TtlError),
        (v4(me, [10, 2, 0, 1], 1, 0, 1, 64), PuntReason::TtlError),
        (
            v6(me, "2001:db8:1::7".parse().unwrap(), 1, 0, 100),
            PuntReason::TtlError,
        ),
        (
            v4(me, [10, 2, 0, 1], 64, 0, 1, 64),
            PuntReason::NeighborMiss,
        ),
        (v4(me, [10, 4, 0, 1], 64, 0, 1, 64), PuntReason::Kernel),
        (
            v4(me, [10, 6, 0, 1], 64, 0, 1, 1515),
            PuntReason::L3MtuError,
        ),
        (
            v4([0x01, 0, 0x5e, 0, 0, 5], [224, 0, 0, 5], 1, 48, 1, 64),
            PuntReason::LinkLocalMulticast,
        ),
        (
            v4([0xFF; 6], [255, 255, 255, 255], 64, 0, 68, 64),
            PuntReason::LinkLocalMulticast,
        ),
        (
            v6(
                [0x33, 0x33, 0, 0, 0, 5],
                "ff02::5".parse().unwrap(),
                1,
                0,
                100,
            ),
            PuntReason::LinkLocalMulticast,
        ),
        (
            HeapFrame::new(&{
                let mut f = vec![0u8; 60];
                f[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0, 0, 0x0E]);
                f[6..12].copy_from_slice(&HOST_A);
                f[12..14].copy_from_slice(&0x88CCu16.to_be_bytes());
                f
            }),
            PuntReason::Lldp,
        ),
    ];
    // IHL 6 with a valid checksum: options.
    {
        let d = bad_ihl.data_mut();
        let mut f = d[..34].to_vec();
        f.extend_from_slice(&[1, 1, 1, 0]); // NOP NOP NOP EOL
        f.extend_from_slice(&d[34..]);
        f[14] = 0x46;
        let total = u16::from_be_bytes([f[16], f[17]]) + 4;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.fill_checksum();
        bad_ihl = HeapFrame::new(&f);
    }
    let mut cases = cases;
    cases.push((bad_ihl, PuntReason::IpOptions));
    let mut hbh = v6(me, "2001:db8:1::7".parse().unwrap(), 64, 0, 100);
    hbh.data_mut()[14 + 6] = 0;
    cases.push((hbh, PuntReason::IpOptions));
    let mut expected = [0u64; PuntReason::COUNT];
    for (i, (frame, reason)) in cases.into_iter().enumerate() {
        lab.rx(0, frame.clone());
        let p = lab
            .sw
            .poll_punt()
            .unwrap_or_else(|| panic!("case {i}: not punted"));
        assert_eq!((p.port, p.reason), (PortId(0), reason), "case {i}");
        assert_eq!(p.frame, frame, "case {i}: punted as received");
        assert!(lab.sw.poll_punt().is_none());
        expected[reason.index()] += 1;
    }
    for r in PuntReason::ALL {
        assert_eq!(punts(&lab, 0, *r), expected[r.index()], "{}", r.name());
    }
    assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0], "nothing was forwarded");
    assert_eq!(
        lab.rx_counters(0)
            .drops
            .iter()
            .map(|d| d.get())
            .sum::<u64>(),
        0
    );
}

#[test]
fn every_drop_reason_of_a_routed_port_is_counted() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    let me = router_mac(0);
    let mut bad_sum = v4(me, [10, 1, 0, 1], 64, 0, 1, 64);
    bad_sum.data_mut()[14 + 10] ^= 0x01;
    let mut bad_version = v4(me, [10, 1, 0, 1], 64, 0, 1, 64);
    bad_version.data_mut()[14] = 0x55;
    let mut long_total = v4(me, [10, 1, 0, 1], 64, 0, 1, 64);
    {
        let d = long_total.data_mut();
        d[16..18].copy_from_slice(&100u16.to_be_bytes());
        let mut ip = Ipv4Packet::new_unchecked(&mut d[14..34]);
        ip.fill_checksum();
    }
    let mut short_v6 = v6(me, "2001:db8:1::7".parse().unwrap(), 64, 0, 100);
    short_v6.data_mut()[14 + 4..14 + 6].copy_from_slice(&1000u16.to_be_bytes());
    let mut other_ethertype = v4(me, [10, 1, 0, 1], 64, 0, 1, 64);
    other_ethertype.data_mut()[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    let cases: Vec<(HeapFrame, DropReason)> = vec![
        (v4(me, [192, 168, 0, 1], 64, 0, 1, 64), DropReason::NoRoute),
        (
            v6(me, "2001:db8:2::1".parse().unwrap(), 64, 0, 100),
            DropReason::NoRoute,
        ),
        (v4(me, [10, 3, 0, 1], 64, 0, 1, 64), DropReason::Blackhole),
        (bad_sum, DropReason::IpHeaderError),
        (bad_version, DropReason::IpHeaderError),
        (long_total, DropReason::IpHeaderError),
        (short_v6, DropReason::IpHeaderError),
        (
            v4(router_mac(1), [10, 1, 0, 1], 64, 0, 1, 64),
            DropReason::RouterMacMismatch,
        ),
        (
            v4(HOST_B, [10, 1, 0, 1], 64, 0, 1, 64),
            DropReason::RouterMacMismatch,
        ),
        (other_ethertype, DropReason::NotRoutable),
        (
            v4([0x01, 0, 0x5e, 1, 1, 1], [239, 1, 1, 1], 64, 0, 1, 64),
            DropReason::L3Multicast,
        ),
        (
            v6(
                [0x33, 0x33, 0, 0, 0, 1],
                "ff0e::1".parse().unwrap(),
                64,
                0,
                100,
            ),
            DropReason::L3Multicast,
        ),
    ];
    let mut expected = [0u64; DropReason::COUNT];
    for (i, (frame, reason)) in cases.into_iter().enumerate() {
        lab.rx(0, frame);
        expected[reason.index()] += 1;
        for r in DropReason::ALL {
            assert_eq!(
                drops(&lab, 0, *r),
                expected[r.index()],
                "case {i}: {}",
                r.name()
            );
        }
    }
    assert!(lab.sw.poll_punt().is_none());
    assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
    assert_eq!(lab.rx_counters(0).rif_in_packets.get(), 0);
}

#[test]
fn before_a_fib_is_attached_routable_packets_are_dropped_no_route_and_arp_still_punts() {
    let mut lab = Lab::new(routed_params(2));
    lab.rx(0, v4(router_mac(0), [10, 1, 0, 1], 64, 0, 1, 64));
    assert_eq!(drops(&lab, 0, DropReason::NoRoute), 1);
    lab.rx(0, arp([0xFF; 6], 1));
    assert_eq!(
        lab.sw.poll_punt().map(|p| p.reason),
        Some(PuntReason::ArpReq)
    );
}

#[test]
fn a_routed_port_is_never_bridged_to_and_refuses_static_fdb_entries() {
    // Port 0 routed, ports 1 and 2 in VLAN 1: a broadcast on port 1 floods to 2 only.
    let mut params = presets::simple(3, GBPS);
    params.ports[0].vlan = VlanMode::Routed;
    let mut lab = Lab::new(params.clone());
    lab.rx(1, ipv4_frame(HOST_B, [0xFF; 6], 0, Ecn::NotEct, 64));
    assert_eq!(sent(&mut lab, 3), [0, 0, 1]);
    params.fdb_static.push((1, HOST_C, PortId(0)));
    let err = params.validate().unwrap_err();
    assert!(err.0.contains("routed port"), "{err}");
}

/// RoCEv2 flows to 10.5.x.y (the ECMP route) that differ only in UDP source port; returns the
/// packets each port sent.
fn spread(lab: &mut Lab, in_port: u16, sports: impl Iterator<Item = u16>) -> Vec<Vec<HeapFrame>> {
    let mac = router_mac(u8::try_from(in_port).unwrap());
    let mut burst: Vec<HeapFrame> = sports
        .map(|s| v4(mac, [10, 5, 0, 1], 64, 0, s, 64))
        .collect();
    lab.sw.handle_rx_burst(lab.now, PortId(in_port), &mut burst);
    lab.sw.handle_timeout(lab.now);
    (0..4).map(|p| lab.tx(p, 4096)).collect()
}

#[test]
fn ecmp_spreads_1024_rocev2_flows_over_four_next_hops_within_ten_percent() {
    let r = routes(EcmpHash {
        seed: 0x5eed_0001,
        ..EcmpHash::default()
    });
    let (mut lab, sender) = routed_lab(4, &r);
    let out = spread(&mut lab, 0, 49152..49152 + 1024);
    let counts: Vec<usize> = out.iter().map(Vec::len).collect();
    println!("1024 flows over 4 next hops: {counts:?}");
    // `show ecmp`: the control plane reads the same spread from the per-next-hop counters.
    let per_hop: Vec<usize> = r
        .hops
        .iter()
        .map(|h| sender.next_hop_packets()[h.index()].get() as usize)
        .collect();
    assert_eq!(per_hop, counts);
    assert_eq!(counts.iter().sum::<usize>(), 1024, "{counts:?}");
    for (p, &n) in counts.iter().enumerate() {
        assert!(
            (231..=281).contains(&n),
            "port {p}: {n} of 1024 ({counts:?})"
        );
        for f in &out[p] {
            assert_eq!(f.data()[..6], NEIGH[p], "each port's neighbour");
        }
    }
    assert_eq!(lab.rx_counters(0).rif_in_packets.get(), 1024);
}

#[test]
fn consecutive_ecmp_stages_polarise_with_equal_seeds_and_not_with_different_ones() {
    // Stage 1 (seed A) sends a quarter of the flows to its member 0; stage 2 hashes those
    // again. With the same seed, the same hash, the same buckets: all take member 0 again.
    let seed_a = EcmpHash {
        seed: 0x5eed_0001,
        ..EcmpHash::default()
    };
    let seed_b = EcmpHash {
        seed: 0x5eed_0002,
        ..EcmpHash::default()
    };
    let sports: Vec<u16> = (49152..49152 + 1024).collect();
    let (mut stage1, _s1) = routed_lab(4, &routes(seed_a));
    let first = spread(&mut stage1, 1, sports.iter().copied());
    let via_member0: Vec<u16> = first[0]
        .iter()
        .map(|f| u16::from_be_bytes([f.data()[34], f.data()[35]]))
        .collect();
    assert!(via_member0.len() > 200, "{}", via_member0.len());
    let stage2 = |hash| {
        let (mut lab, _s) = routed_lab(4, &routes(hash));
        let out = spread(&mut lab, 1, via_member0.iter().copied());
        out.iter().map(Vec::len).collect::<Vec<_>>()
    };
    let same = stage2(seed_a);
    let different = stage2(seed_b);
    println!(
        "stage 2 of {} flows: equal seeds {same:?}, different seeds {different:?}",
        via_member0.len()
    );
    let n = via_member0.len();
    assert_eq!(same, [n, 0, 0, 0], "equal seeds polarise");
    assert_eq!(different.iter().sum::<usize>(), n);
    for (p, &k) in different.iter().enumerate() {
        // Even would be n/4; allow ±35 % for ~256 flows.
        assert!(
            k * 4 * 100 >= n * 65 && k * 4 * 100 <= n * 135,
            "member {p}: {k} of {n} ({different:?})"
        );
    }
}

#[test]
fn frames_of_an_unaffected_route_keep_flowing_across_fib_publications() {
    let mut r = routes(EcmpHash::default());
    let (mut lab, mut sender) = routed_lab(4, &r);
    let mut delivered = 0;
    for round in 0..50u8 {
        // Between iterations: the control plane changes another route and publishes.
        sender.reclaim();
        let target = if round % 2 == 0 {
            RouteTarget::NextHop(r.hops[3])
        } else {
            RouteTarget::NextHop(NextHopId::BLACKHOLE)
        };
        r.builder
            .set_route_v4(pfx([10, 7, 0, 0], 16), target)
            .unwrap();
        let fib = r.builder.publish().expect("the spare is back");
        assert!(sender.send(&fib));
        let mut burst: Vec<HeapFrame> = (0..8)
            .map(|i| v4(router_mac(0), [10, 1, round, i], 64, 0, 1, 64))
            .chain(std::iter::once(v4(
                router_mac(0),
                [10, 7, 0, 1],
                64,
                0,
                1,
                64,
            )))
            .collect();
        lab.sw.handle_rx_burst(lab.now, PortId(0), &mut burst);
        lab.sw.handle_timeout(lab.now);
        delivered += lab.tx(1, 64).len();
        let changed = lab.tx(3, 64).len();
        // The changed route follows the snapshot picked up at this burst's start.
        assert_eq!(changed, usize::from(round % 2 == 0), "round {round}");
        assert_eq!(
            lab.ingress().fib().unwrap().fib().generation(),
            fib.generation()
        );
    }
    assert_eq!(delivered, 50 * 8, "no loss on the unaffected route");
    assert_eq!(drops(&lab, 0, DropReason::Blackhole), 25);
}

#[test]
fn routed_lossless_traffic_congesting_its_egress_queue_makes_the_ingress_port_send_xoff() {
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    // DSCP 3 → TC 3 → lossless PG 3 of port 0 and queue 3 of port 1. Port 1 does not transmit.
    lab.sw.set_tx_enable(PortId(1), false);
    let mut xoff = false;
    for i in 0..200u16 {
        lab.rx(0, v4(router_mac(0), [10, 1, 0, 1], 64, 3, i, 1024));
        if lab
            .pfc_out(0)
            .iter()
            .any(|p| p.class_enable & (1 << 3) != 0 && p.pause_quanta[3] > 0)
        {
            xoff = true;
            break;
        }
    }
    assert!(xoff, "port 0 asked its peer to pause priority 3");
    assert!(lab.rx_counters(0).pg_xoff_transitions[3].get() >= 1);
    assert_eq!(
        lab.rx_counters(0)
            .drops
            .iter()
            .map(|d| d.get())
            .sum::<u64>(),
        0
    );
    assert_eq!(
        lab.rx_counters(1)
            .drops
            .iter()
            .map(|d| d.get())
            .sum::<u64>(),
        0
    );
    assert!(
        lab.ingress().buffers().pg(0, 3).total() > 0,
        "charged to the ingress PG"
    );
}

#[test]
fn the_checksum_of_a_routed_ipv4_header_verifies_over_many_ttls() {
    // Through the step, every TTL from 2 to 255: the header checksum the receiver computes is 0.
    let r = routes(EcmpHash::default());
    let (mut lab, _sender) = routed_lab(4, &r);
    for ttl in 2..=255u8 {
        lab.rx(0, v4(router_mac(0), [10, 1, ttl, 7], ttl, ttl % 64, 7, 64));
        let out = lab.tx(1, 4);
        assert_eq!(out.len(), 1);
        assert_eq!(checksum(&out[0].data()[14..34]), 0, "TTL {ttl}");
        assert_eq!(out[0].data()[14 + 8], ttl - 1);
    }
}

#[test]
fn a_routed_packet_is_classified_by_the_ingress_ports_maps_into_its_pg() {
    // Port 0 maps DSCP 10 to the lossless TC 3; port 1 keeps SONiC's default (DSCP 10 → TC 1).
    let r = routes(EcmpHash::default());
    let mut params = routed_params(4);
    params.ports[0].maps.dscp_to_tc[10] = headroom_core::types::TrafficClass::from_low_bits(3);
    let mut lab = Lab::new(params);
    let (_sender, reader) = fib_channel(Arc::clone(r.builder.published()));
    lab.sw.attach_fib(reader);
    lab.rx(0, v4(router_mac(0), [10, 1, 0, 1], 64, 10, 1, 256));
    assert!(
        lab.ingress().buffers().pg(0, 3).total() > 0,
        "PG 3 of port 0"
    );
    assert_eq!(lab.sw.queue_len(PortId(1), 3), 1, "queue 3 of port 1");
    assert_eq!(lab.tx(1, 4).len(), 1);
}

#[test]
fn a_next_hop_in_a_vlan_leaves_tagged_by_its_l2_port_and_one_outside_it_is_dropped() {
    // Port 2 is a trunk of VLAN 100 (an SVI's member); port 3 stays routed.
    let mut params = routed_params(4);
    params.ports[2].vlan = VlanMode::Trunk {
        allowed: vec![100],
        native: None,
    };
    let mut lab = Lab::new(params);
    let mut b = FibBuilder::new(FibConfig::default()).unwrap();
    let svi = b
        .add_next_hop(NextHop::Resolved {
            port: PortId(2),
            vlan: Some(100),
            mac: MacAddress(NEIGH[2]),
        })
        .unwrap();
    let wrong = b
        .add_next_hop(NextHop::Resolved {
            port: PortId(2),
            vlan: Some(200),
            mac: MacAddress(NEIGH[2]),
        })
        .unwrap();
    let untagged_on_l2 = b
        .add_next_hop(NextHop::Resolved {
            port: PortId(2),
            vlan: None,
            mac: MacAddress(NEIGH[2]),
        })
        .unwrap();
    b.set_route_v4(pfx([10, 8, 0, 0], 16), RouteTarget::NextHop(svi))
        .unwrap();
    b.set_route_v4(pfx([10, 9, 9, 0], 24), RouteTarget::NextHop(wrong))
        .unwrap();
    b.set_route_v4(pfx([10, 9, 8, 0], 24), RouteTarget::NextHop(untagged_on_l2))
        .unwrap();
    let (_sender, reader) = fib_channel(b.publish().unwrap());
    lab.sw.attach_fib(reader);
    // DSCP 46 → TC 5: the tag's PCP.
    let before = v4(router_mac(0), [10, 8, 0, 1], 64, 46, 1, 128);
    lab.rx(0, before.clone());
    let out = lab.tx(2, 4);
    assert_eq!(out.len(), 1);
    let d = out[0].data();
    assert_eq!(d.len(), 132, "tagged");
    assert_eq!((&d[..6], &d[6..12]), (&NEIGH[2][..], &router_mac(2)[..]));
    assert_eq!(d[12..14], [0x81, 0x00]);
    let tci = u16::from_be_bytes([d[14], d[15]]);
    assert_eq!((tci >> 13, tci & 0x0FFF), (5, 100));
    let ip = Ipv4Packet::new_checked(&d[18..]).unwrap();
    assert_eq!(ip.hop_limit(), 63);
    assert!(ip.verify_checksum());
    // A VLAN the port is not in, or no VLAN on an L2 port: never sent wrongly, dropped.
    lab.rx(0, v4(router_mac(0), [10, 9, 9, 1], 64, 0, 1, 64));
    lab.rx(0, v4(router_mac(0), [10, 9, 8, 1], 64, 0, 1, 64));
    assert_eq!(drops(&lab, 0, DropReason::VlanFiltered), 2);
    assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    /// Valid frames of every kind a routed port handles, to be corrupted.
    fn templates() -> Vec<HeapFrame> {
        let me = router_mac(0);
        vec![
            v4(me, [10, 1, 0, 1], 64, 3, 1, 128),
            v4(me, [10, 5, 0, 1], 2, 46, 7, 64),
            v4(me, [10, 2, 0, 1], 64, 0, 1, 64),
            v6(me, "2001:db8:1::7".parse().unwrap(), 64, 3, 128),
            arp([0xFF; 6], 1),
            icmpv6(
                [0x33, 0x33, 0xff, 0, 0, 1],
                "ff02::1:ff00:1".parse().unwrap(),
                135,
            ),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        /// Corrupted and truncated frames on a routed port never panic, and every frame is
        /// accounted for exactly once: sent, punted or dropped with a reason.
        #[test]
        fn corrupted_frames_are_routed_punted_or_dropped_never_lost(
            picks in proptest::collection::vec(
                (0usize..6, proptest::collection::vec((0usize..160, any::<u8>()), 0..4), 0usize..200),
                1..24,
            ),
        ) {
            let r = routes(EcmpHash::default());
            let (mut lab, _sender) = routed_lab(4, &r);
            let templates = templates();
            let mut burst: Vec<HeapFrame> = picks
                .iter()
                .map(|(t, edits, cut)| {
                    let mut f = templates[*t].clone();
                    let len = f.len();
                    for &(at, byte) in edits {
                        f.data_mut()[at % len] = byte;
                    }
                    f.truncate(*cut);
                    f
                })
                .collect();
            let n = burst.len() as u64;
            lab.sw.handle_rx_burst(lab.now, PortId(0), &mut burst);
            lab.sw.handle_timeout(lab.now);
            let sent: usize = (0..4).map(|p| lab.tx(p, 4096).len()).sum();
            let punted = std::iter::from_fn(|| lab.sw.poll_punt()).count();
            let dropped: u64 = (0..4)
                .map(|p| lab.rx_counters(p).drops.iter().map(|d| d.get()).sum::<u64>())
                .sum();
            prop_assert_eq!(sent as u64 + punted as u64 + dropped, n);
            prop_assert_eq!(lab.rx_counters(0).rx_frames.get(), n);
        }
    }
}

mod vlan_interface {
    //! A VLAN interface (SVI, SONiC's `Vlan1000`): VLAN 1000 on access ports 0 and 1 and trunk
    //! port 2, port 3 routed; the SVI's router MAC is routed, its next hops leave by the port
    //! the FDB knows (flooded to the members while unknown), ARP and pings for it are punted
    //! with the VLAN.
    use super::*;
    use headroom_core::params::VlanInterfaceParams;

    pub(super) const VID: u16 = 1000;
    const SVI_MAC: [u8; 6] = [0x02, 0x68, 0x72, 0, 0x10, 0];
    /// A host of VLAN 1000 the switch has not heard from.
    const SILENT_HOST: [u8; 6] = [0x02, 0xcc, 0, 0, 0, 6];

    pub(super) fn svi_lab() -> (Lab, FibSender) {
        let mut params = routed_params(4);
        for p in 0..2 {
            params.ports[p].vlan = VlanMode::Access { vid: VID };
        }
        params.ports[2].vlan = VlanMode::Trunk {
            allowed: vec![VID],
            native: None,
        };
        params.vlan_interfaces = vec![VlanInterfaceParams {
            vid: VID,
            mac: SVI_MAC,
        }];
        let mut lab = Lab::new(params);
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let upstream = b
            .add_next_hop(NextHop::Resolved {
                port: PortId(3),
                vlan: None,
                mac: MacAddress(NEIGH[3]),
            })
            .unwrap();
        // The port of a VLAN next hop is not what the dataplane goes by (the FDB is): a
        // wrong one here shows it.
        let host_a = b
            .add_next_hop(NextHop::Resolved {
                port: PortId(1),
                vlan: Some(VID),
                mac: MacAddress(HOST_A),
            })
            .unwrap();
        let silent = b
            .add_next_hop(NextHop::Resolved {
                port: PortId(1),
                vlan: Some(VID),
                mac: MacAddress(SILENT_HOST),
            })
            .unwrap();
        b.set_route_v4(pfx([10, 3, 0, 0], 16), RouteTarget::NextHop(upstream))
            .unwrap();
        b.set_route_v4(pfx([10, 10, 0, 5], 32), RouteTarget::NextHop(host_a))
            .unwrap();
        b.set_route_v4(pfx([10, 10, 0, 6], 32), RouteTarget::NextHop(silent))
            .unwrap();
        b.set_route_v4(
            pfx([10, 10, 0, 1], 32),
            RouteTarget::NextHop(NextHopId::LOCAL),
        )
        .unwrap();
        let (sender, reader) = fib_channel(b.publish().unwrap());
        lab.sw.attach_fib(reader);
        (lab, sender)
    }

    /// `frame` with an 802.1Q tag of `vid` (PCP 0) after its MACs.
    pub(super) fn tagged(frame: &HeapFrame, vid: u16) -> HeapFrame {
        let mut d = frame.data().to_vec();
        d.splice(12..12, [0x81, 0x00, (vid >> 8) as u8, vid as u8]);
        HeapFrame::new(&d)
    }

    fn assert_routed_v4(d: &[u8], off: usize, dst: [u8; 6], src: [u8; 6], ttl: u8) {
        assert_eq!((&d[..6], &d[6..12]), (&dst[..], &src[..]), "MACs");
        let ip = Ipv4Packet::new_checked(&d[off..]).unwrap();
        assert_eq!(ip.hop_limit(), ttl);
        assert_eq!((ip.dscp(), ip.ecn()), (46, Ecn::Ect0), "DSCP and ECN kept");
        assert!(ip.verify_checksum());
    }

    #[test]
    fn a_vlan_interface_routes_between_its_vlan_and_a_routed_port() {
        let (mut lab, _sender) = svi_lab();
        // HOST_A on port 0, VLAN 1000, sends to its gateway (the SVI's MAC): routed out of port
        // 3 to the upstream neighbour, TTL − 1, from port 3's router MAC; not bridged.
        lab.rx(0, v4(SVI_MAC, [10, 3, 0, 9], 64, 46, 1, 128));
        let out = lab.tx(3, 64);
        assert_eq!(out.len(), 1, "routed out of port 3");
        assert_routed_v4(out[0].data(), 14, NEIGH[3], router_mac(3), 63);
        assert_eq!(sent(&mut lab, 3), [0, 0, 0], "nothing bridged");
        assert_eq!(lab.rx_counters(0).rif_in_packets.get(), 1);

        // Back: routed port 3 → HOST_A, whom the FDB learnt on port 0 (the next hop says port
        // 1): out of port 0 only, untagged, from the SVI's MAC.
        lab.rx(3, v4(router_mac(3), [10, 10, 0, 5], 64, 46, 2, 128));
        let out = lab.tx(0, 64);
        assert_eq!(out.len(), 1, "routed to the port the FDB knows");
        assert_routed_v4(out[0].data(), 14, HOST_A, SVI_MAC, 63);
        assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
        assert_eq!(lab.rx_counters(3).rif_in_packets.get(), 1);

        // To a host the FDB does not know: flooded to the VLAN's members, tagged on the trunk.
        lab.rx(3, v4(router_mac(3), [10, 10, 0, 6], 64, 46, 3, 128));
        for p in 0..3u16 {
            let out = lab.tx(p, 64);
            assert_eq!(out.len(), 1, "port {p}");
            let d = out[0].data();
            let off = if p == 2 {
                assert_eq!(d[12..14], [0x81, 0x00]);
                let tci = u16::from_be_bytes([d[14], d[15]]);
                // DSCP 46 → TC 5: the tag's PCP.
                assert_eq!((tci >> 13, tci & 0x0FFF), (5, VID));
                18
            } else {
                14
            };
            assert_routed_v4(d, off, SILENT_HOST, SVI_MAC, 63);
        }
        assert_eq!(lab.tx(3, 64).len(), 0, "not back out of the routed port");

        // Tagged in on the trunk: routed out of port 3, untagged there.
        lab.rx(2, tagged(&v4(SVI_MAC, [10, 3, 0, 9], 64, 46, 4, 128), VID));
        let out = lab.tx(3, 64);
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].len(), 128, "untagged on the routed port");
        assert_routed_v4(out[0].data(), 14, NEIGH[3], router_mac(3), 63);
    }

    #[test]
    fn arp_and_pings_for_the_vlan_interface_are_punted_with_its_vlan_and_arp_is_still_bridged() {
        let (mut lab, _sender) = svi_lab();
        // An ARP request (broadcast) in VLAN 1000: bridged to the other members, and a copy
        // for the SVI's host interface.
        lab.rx(0, arp([0xFF; 6], 1));
        assert_eq!(sent(&mut lab, 4), [0, 1, 1, 0], "bridged in the VLAN only");
        let p = lab.sw.poll_punt().expect("a copy punted");
        assert_eq!(
            (p.port, p.reason, p.vlan),
            (PortId(0), PuntReason::ArpReq, Some(VID))
        );
        assert_eq!(p.frame.data(), arp([0xFF; 6], 1).data(), "as received");
        // The reply to the SVI's MAC: punted, not bridged.
        lab.rx(1, arp(SVI_MAC, 2));
        let p = lab.sw.poll_punt().expect("the reply punted");
        assert_eq!(
            (p.port, p.reason, p.vlan),
            (PortId(1), PuntReason::ArpResp, Some(VID))
        );
        // A ping of the gateway address (Local), and a packet with TTL 1 to route: for the
        // kernel, through the SVI.
        lab.rx(0, v4(SVI_MAC, [10, 10, 0, 1], 64, 0, 5, 64));
        lab.rx(0, v4(SVI_MAC, [10, 3, 0, 9], 1, 0, 6, 64));
        let reasons: Vec<_> = std::iter::from_fn(|| lab.sw.poll_punt())
            .map(|p| (p.reason, p.vlan))
            .collect();
        assert_eq!(
            reasons,
            [
                (PuntReason::Ip2me, Some(VID)),
                (PuntReason::TtlError, Some(VID))
            ]
        );
        assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0], "nothing bridged or routed");
        // A broadcast that is not for the router (not ARP, ND or link-local multicast) is
        // only bridged; a routed port's punts carry no VLAN.
        lab.rx(0, ipv4_frame(HOST_A, [0xFF; 6], 0, Ecn::NotEct, 64));
        assert!(lab.sw.poll_punt().is_none());
        assert_eq!(sent(&mut lab, 4), [0, 1, 1, 0]);
        lab.rx(3, arp([0xFF; 6], 1));
        assert_eq!(lab.sw.poll_punt().map(|p| p.vlan), Some(None));
    }

    #[test]
    fn without_the_vlan_interface_frames_to_its_mac_are_bridged_not_routed() {
        // The contrast: the same switch with no SVI floods HOST_A's frame to the gateway MAC
        // in VLAN 1000 (an unknown unicast) and routes nothing.
        let mut params = routed_params(4);
        for p in 0..2 {
            params.ports[p].vlan = VlanMode::Access { vid: VID };
        }
        let mut lab = Lab::new(params);
        lab.rx(0, v4(SVI_MAC, [10, 3, 0, 9], 64, 46, 1, 128));
        assert_eq!(sent(&mut lab, 4), [0, 1, 0, 0]);
        assert!(lab.sw.poll_punt().is_none());
    }
}

mod vlan_interface_inject {
    //! What the kernel writes to a VLAN interface's host interface goes into the VLAN.
    use super::vlan_interface::*;
    use super::*;

    #[test]
    fn the_kernels_frames_for_a_vlan_interface_go_to_the_known_port_or_flood_the_vlan() {
        let (mut lab, _sender) = svi_lab();
        // An ARP request of the kernel (broadcast): every member, tagged on the trunk, not
        // the routed port.
        let request = arp([0xFF; 6], 1);
        assert_eq!(lab.sw.inject_vlan(lab.now, VID, request.clone()), Ok(3));
        for p in 0..2u16 {
            let out = lab.tx(p, 8);
            assert_eq!(out.len(), 1, "port {p}");
            assert_eq!(out[0].data(), request.data(), "untagged on access port {p}");
        }
        let out = lab.tx(2, 8);
        assert_eq!(out.len(), 1);
        let d = out[0].data();
        assert_eq!(d.len(), request.len() + 4);
        assert_eq!(d[12..16], [0x81, 0x00, (VID >> 8) as u8, VID as u8]);
        assert_eq!(d[16..], request.data()[12..]);
        assert!(lab.tx(3, 8).is_empty());
        // A reply to a host the FDB knows (HOST_A on port 1): that port only.
        lab.learn(1, HOST_A);
        assert_eq!(lab.sw.inject_vlan(lab.now, VID, arp(HOST_A, 2)), Ok(1));
        assert_eq!(sent(&mut lab, 4), [0, 1, 0, 0]);
        assert_eq!(lab.rx_counters(1).inject_frames.get(), 2);
        // A VLAN no port is in, or a tagged frame: refused, nothing sent.
        assert_eq!(
            lab.sw.inject_vlan(lab.now, 2000, arp([0xFF; 6], 1)),
            Err(DropReason::VlanFiltered)
        );
        let tagged_request = tagged(&request, VID);
        assert_eq!(
            lab.sw.inject_vlan(lab.now, VID, tagged_request),
            Err(DropReason::VlanFiltered)
        );
        assert_eq!(sent(&mut lab, 4), [0, 0, 0, 0]);
    }
}
