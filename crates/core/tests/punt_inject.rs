//! Frames for the switch itself and frames from the control plane, through the step: reserved
//! addresses are never relayed, LLDP is punted with its port, the punt rate limit is exact in
//! virtual time, a full punt queue is counted; injected frames are classified by their port's
//! maps, counted, accounted on the CPU port and released, rate-limited, shaped like forwarded
//! frames, and never cause a lossless drop.

mod common;

use common::*;
use headroom_core::counters::DropReason;
use headroom_core::frame::HeapFrame;
use headroom_core::params::{presets, RateLimit, Trust};
use headroom_core::punt::PuntReason;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;

const GBPS: u64 = 1_000_000_000;
const LLDP_DST: [u8; 6] = [0x01, 0x80, 0xC2, 0, 0, 0x0E];
const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x99];

/// A 60-byte frame to `dst` with `ethertype`, optionally tagged.
fn raw(src: [u8; 6], dst: [u8; 6], ethertype: u16, vlan: Option<(u8, u16)>) -> HeapFrame {
    let mut f = Vec::with_capacity(64);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    if let Some((pcp, vid)) = vlan {
        f.extend_from_slice(&0x8100u16.to_be_bytes());
        f.extend_from_slice(&(u16::from(pcp) << 13 | vid).to_be_bytes());
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.resize(60, 0);
    HeapFrame::new(&f)
}

fn lldp(src: [u8; 6]) -> HeapFrame {
    raw(src, LLDP_DST, 0x88CC, None)
}

/// Every frame each port sends now (data and PFC).
fn sent_everywhere(lab: &mut Lab) -> Vec<usize> {
    (0..3).map(|p| lab.tx(p, 64).len()).collect()
}

#[test]
fn reserved_group_addresses_are_punted_never_flooded() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    for last in 0x00..=0x0Fu8 {
        if last == 0x01 {
            continue; // MAC Control's address: PFC and PAUSE act in the dataplane.
        }
        lab.rx(0, raw(HOST_A, [0x01, 0x80, 0xC2, 0, 0, last], 0x0800, None));
        assert_eq!(
            sent_everywhere(&mut lab),
            [0, 0, 0],
            "01-80-C2-00-00-{last:02X}"
        );
        let punted = lab.sw.poll_punt().expect("punted");
        assert_eq!(
            (punted.port, punted.reason),
            (PortId(0), PuntReason::ReservedGroupAddress)
        );
        assert!(lab.sw.poll_punt().is_none());
    }
    assert!(
        lab.ingress().buffers().is_empty(),
        "punting takes no PG buffer"
    );
    // Just outside the range: an ordinary multicast, flooded.
    lab.rx(0, raw(HOST_A, [0x01, 0x80, 0xC2, 0, 0, 0x10], 0x88CC, None));
    assert_eq!(sent_everywhere(&mut lab), [0, 1, 1]);
    assert!(lab.sw.poll_punt().is_none());
    let c = lab.rx_counters(0);
    assert_eq!(
        c.punt_frames[PuntReason::ReservedGroupAddress.index()].get(),
        15
    );
    assert_eq!(c.drops.iter().map(|d| d.get()).sum::<u64>(), 0);
}

#[test]
fn lldp_is_punted_with_its_port_in_any_vlan() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    let frame = lldp(HOST_C);
    lab.rx(2, frame.clone());
    // Tagged, in a VLAN port 1 is no member of: punted all the same (the address decides).
    lab.rx(1, raw(HOST_B, LLDP_DST, 0x88CC, Some((7, 100))));
    assert_eq!(sent_everywhere(&mut lab), [0, 0, 0]);
    let first = lab.sw.poll_punt().expect("the first");
    assert_eq!((first.port, first.reason), (PortId(2), PuntReason::Lldp));
    assert_eq!(first.frame, frame, "as received");
    let second = lab.sw.poll_punt().expect("the second");
    assert_eq!((second.port, second.reason), (PortId(1), PuntReason::Lldp));
    assert!(lab.sw.poll_punt().is_none());
    // The other protocols of Table 8-1 get their own reasons.
    lab.rx(0, raw(HOST_A, [0x01, 0x80, 0xC2, 0, 0, 0x02], 0x8809, None));
    lab.rx(0, raw(HOST_A, [0x01, 0x80, 0xC2, 0, 0, 0x00], 0x0026, None));
    lab.rx(0, raw(HOST_A, [0x01, 0x80, 0xC2, 0, 0, 0x03], 0x888E, None));
    let reasons: Vec<_> = std::iter::from_fn(|| lab.sw.poll_punt())
        .map(|p| p.reason)
        .collect();
    assert_eq!(
        reasons,
        [PuntReason::Lacp, PuntReason::Stp, PuntReason::Eapol]
    );
    assert_eq!(
        lab.rx_counters(2).punt_frames[PuntReason::Lldp.index()].get(),
        1
    );
    assert!(lab.sw.poll_timeout(lab.now).is_none_or(|t| t > lab.now));
}

#[test]
fn the_punt_rate_limit_is_exact_in_virtual_time() {
    let mut params = presets::simple(3, GBPS);
    params.punt.limits[PuntReason::Lldp.index()] = RateLimit {
        frames_per_second: 10,
        burst_frames: 5,
    };
    let mut lab = Lab::new(params);
    let mut punted = 0u64;
    for k in 0..2000u64 {
        // One LLDP frame every millisecond, 100 times the rate.
        lab.rx(0, lldp(HOST_A));
        while lab.sw.poll_punt().is_some() {
            punted += 1;
        }
        // The bucket starts full: 5 frames, then one per 100 ms of virtual time.
        let expected = (k + 1).min(5 + k / 100);
        assert_eq!(punted, expected, "after frame {k}");
        let c = lab.rx_counters(0);
        assert_eq!(
            c.drops[DropReason::PuntRateLimit.index()].get(),
            k + 1 - expected
        );
        assert_eq!(
            c.punt_drops[PuntReason::Lldp.index()].get(),
            k + 1 - expected
        );
        lab.advance_ns(1_000_000);
    }
    assert_eq!(punted, 5 + 19);
}

#[test]
fn a_full_punt_queue_drops_and_counts() {
    let mut params = presets::simple(3, GBPS);
    params.punt.queue_frames = 4;
    let mut lab = Lab::new(params);
    let mut burst: Vec<HeapFrame> = (0..10).map(|_| lldp(HOST_A)).collect();
    lab.sw.handle_rx_burst(lab.now, PortId(0), &mut burst);
    let c = lab.rx_counters(0);
    assert_eq!(c.punt_frames[PuntReason::Lldp.index()].get(), 4);
    assert_eq!(c.drops[DropReason::PuntQueueFull.index()].get(), 6);
    assert_eq!(c.punt_drops[PuntReason::Lldp.index()].get(), 6);
    assert_eq!(c.rx_frames.get(), 10);
    assert_eq!(lab.sw.poll_timeout(lab.now), Some(lab.now), "frames wait");
    assert_eq!(std::iter::from_fn(|| lab.sw.poll_punt()).count(), 4);
    // Room again.
    lab.rx(0, lldp(HOST_A));
    assert!(lab.sw.poll_punt().is_some());
}

#[test]
fn injected_frames_are_classified_by_their_ports_maps_and_counted() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].trust = Trust::Dot1p;
    let mut lab = Lab::new(params);
    // DSCP trust on port 1: DSCP 46 → TC 5 → queue 5 (SONiC's default map).
    let frame = ipv4_frame(SWITCH_MAC, HOST_B, 46, Ecn::NotEct, 200);
    lab.sw.inject(lab.now, PortId(1), frame.clone()).unwrap();
    // Dot1p trust on port 2: PCP 3 → TC 3 → queue 3; the tag stays as built.
    let tagged = raw(SWITCH_MAC, HOST_C, 0x0800, Some((3, 1)));
    lab.sw.inject(lab.now, PortId(2), tagged.clone()).unwrap();
    assert_eq!(lab.tx(1, 64), vec![frame.clone()]);
    assert_eq!(lab.tx(2, 64), vec![tagged]);
    assert_eq!(lab.tx(0, 64), Vec::<HeapFrame>::new(), "sent, not flooded");
    assert_eq!(lab.tx_counters(1).tx_frames[5].get(), 1);
    assert_eq!(lab.tx_counters(2).tx_frames[3].get(), 1);
    let c = lab.rx_counters(1);
    assert_eq!((c.inject_frames.get(), c.inject_bytes.get()), (1, 200));
    assert_eq!(c.rx_frames.get(), 0, "not a received frame");
    // A malformed frame is refused and counted against the port.
    assert_eq!(
        lab.sw.inject(lab.now, PortId(1), HeapFrame::new(&[0; 10])),
        Err(DropReason::Runt)
    );
    assert_eq!(
        lab.rx_counters(1).inject_drops[DropReason::Runt.index()].get(),
        1
    );
}

#[test]
fn injected_frames_are_accounted_on_the_cpu_port_and_released() {
    let mut params = presets::simple(3, GBPS);
    params.ports[1].tx_enable = false;
    // Room for four frames of 1000 bytes (4 cells each at 256-byte cells).
    params.inject.buffer_bytes = 16 * 256;
    let mut lab = Lab::new(params.clone());
    let cpu = lab.ingress().cpu_port();
    let cells = params.cells(1000);
    for n in 1..=4u64 {
        let f = ipv4_frame(SWITCH_MAC, HOST_B, 0, Ecn::NotEct, 1000);
        lab.sw.inject(lab.now, PortId(1), f).unwrap();
        assert_eq!(lab.ingress().buffers().pg(cpu, 0).total(), n * cells);
        // DSCP 0 → TC 1 → queue 1.
        assert_eq!(lab.ingress().egress_buffers().used(1, 1), n * cells);
    }
    let fifth = ipv4_frame(SWITCH_MAC, HOST_B, 0, Ecn::NotEct, 1000);
    assert_eq!(
        lab.sw.inject(lab.now, PortId(1), fifth),
        Err(DropReason::InjectBufferFull)
    );
    assert_eq!(
        lab.rx_counters(1).inject_drops[DropReason::InjectBufferFull.index()].get(),
        1
    );
    // No configured pool holds any of it.
    for pool in 0..params.pools.len() {
        assert_eq!(lab.ingress().buffers().pool_use(pool).shared_used, 0);
    }
    lab.sw.check_invariants();
    lab.sw.set_tx_enable(PortId(1), true);
    assert_eq!(lab.tx(1, 64).len(), 4);
    lab.advance_ns(1);
    assert!(lab.ingress().buffers().is_empty(), "released");
    assert!(lab.ingress().egress_buffers().is_empty());
    lab.sw.check_invariants();
}

#[test]
fn injection_is_rate_limited() {
    let mut params = presets::simple(3, GBPS);
    params.inject.limit = RateLimit {
        frames_per_second: 100,
        burst_frames: 3,
    };
    let mut lab = Lab::new(params);
    let inject = |lab: &mut Lab| {
        let f = ipv4_frame(SWITCH_MAC, HOST_B, 0, Ecn::NotEct, 64);
        lab.sw.inject(lab.now, PortId(1), f)
    };
    let results: Vec<_> = (0..5).map(|_| inject(&mut lab)).collect();
    assert_eq!(results.iter().filter(|r| r.is_ok()).count(), 3);
    assert_eq!(
        lab.rx_counters(1).inject_drops[DropReason::InjectRateLimit.index()].get(),
        2
    );
    lab.advance_ns(9_999_999);
    assert_eq!(inject(&mut lab), Err(DropReason::InjectRateLimit));
    lab.advance_ns(1);
    assert_eq!(inject(&mut lab), Ok(()), "one more every 10 ms");
}

/// Departure times of `n` frames out of `port`, driving the step to each deadline.
fn departures(lab: &mut Lab, port: u16, n: usize) -> Vec<Instant> {
    let mut at = Vec::new();
    for _ in 0..10_000 {
        for _ in lab.tx(port, 1) {
            at.push(lab.now);
        }
        if at.len() == n {
            return at;
        }
        let next = lab
            .sw
            .poll_timeout(lab.now)
            .expect("a deadline while frames wait");
        lab.advance_ns(next.saturating_nanos_since(lab.now).max(1));
    }
    panic!("{n} frames did not leave port {port}: {at:?}");
}

#[test]
fn injected_frames_are_shaped_like_forwarded_ones() {
    let mut params = presets::simple(3, GBPS);
    params.ports[1].shaper_rate_bps = 10_000_000;
    params.ports[1].mtu_bytes = 1500;
    let frame = || ipv4_frame(HOST_A, HOST_B, 0, Ecn::NotEct, 1000);
    // The same ten frames, injected towards port 1 in one lab and received on port 0 for
    // port 1 in another.
    let mut injected = Lab::new(params.clone());
    for _ in 0..10 {
        injected
            .sw
            .inject(injected.now, PortId(1), frame())
            .unwrap();
    }
    let mut forwarded = Lab::new(params);
    forwarded.learn(1, HOST_B);
    let start = forwarded.now;
    injected.now = start;
    let mut burst: Vec<HeapFrame> = (0..10).map(|_| frame()).collect();
    forwarded.sw.handle_rx_burst(start, PortId(0), &mut burst);
    let a = departures(&mut injected, 1, 10);
    let b = departures(&mut forwarded, 1, 10);
    let since = |v: &[Instant]| {
        v.iter()
            .map(|t| t.saturating_nanos_since(v[0]))
            .collect::<Vec<_>>()
    };
    assert_eq!(since(&a), since(&b), "the same shaping");
    // Shaped: once the burst is spent, 10 Mb/s lets 1000-byte frames out one wire footprint
    // (1000 + 24 bytes: 819.2 µs) apart.
    for k in 4..9 {
        assert_eq!(a[k + 1].saturating_nanos_since(a[k]), 819_200, "{a:?}");
    }
}

#[test]
fn injection_never_causes_a_lossless_drop() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    // An ingress pool whose shared part is one lossless PG's shared limit (64 KiB) and a
    // little: were injected frames to take any of it, port 0's PG would reach its headroom
    // early and drop.
    let carved: u64 = params
        .ports
        .iter()
        .flat_map(|p| p.pgs.iter())
        .map(|pg| pg.reserved_bytes + pg.xoff_bytes)
        .sum();
    params.pools[presets::INGRESS_POOL.index()].size_bytes = carved + 64 * 1024 + 4 * 1024;
    let mut lab = Lab::new(params.clone());
    lab.learn(2, HOST_C);
    // Lossless data (DSCP 3, PG 3, queue 3) from port 0 to port 2 fills its PG to XOFF and
    // then its headroom, while the control plane injects into the same lossless queue of port 2
    // until its own buffer is full.
    let pg = params.ports[0].pgs[3];
    let headroom_core::params::Threshold::Static { bytes } = pg.threshold else {
        panic!("static threshold")
    };
    let cells = params.cells(1024);
    let xoff_at = (params.cells(pg.reserved_bytes) + params.cells(bytes)).div_ceil(cells);
    let headroom_frames = params.cells(pg.xoff_bytes) / cells;
    let mut refused = 0;
    for _ in 0..xoff_at + headroom_frames {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, 3, Ecn::Ect0, 1024));
        for _ in 0..8 {
            let f = ipv4_frame(SWITCH_MAC, HOST_C, 3, Ecn::Ect0, 1024);
            if lab.sw.inject(lab.now, PortId(2), f).is_err() {
                refused += 1;
            }
        }
    }
    assert!(refused > 0, "the inject buffer filled");
    let c = lab.rx_counters(0);
    assert_eq!(c.pg_drops[3].get(), 0, "no lossless drop");
    assert_eq!(c.drops.iter().map(|d| d.get()).sum::<u64>(), 0);
    assert_eq!(lab.pfc_out(0).len(), 1, "XOFF as without injection");
    assert_eq!(
        lab.ingress().buffers().pg(0, 3).headroom_used,
        headroom_frames * cells,
        "the whole headroom, as without injection"
    );
    lab.sw.check_invariants();
}
