//! The per-packet path allocates nothing in steady state: a counting global allocator watches
//! receive bursts, forwarding, ECN marking, PFC generation, transmit bursts, punting (and its
//! rate limit) and injection (and its rate limit), all through the one step.

mod common;

use common::{ipv4_frame, HOST_A, HOST_B, HOST_C};
use crossbeam_queue::ArrayQueue;
use headroom_core::frame::Frame;
use headroom_core::params::{presets, WredParams};
use headroom_core::step::LcoreStep;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;
use std::sync::Arc;

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

type Buf = Box<[u8; 2048]>;

/// A frame from a fixed pool, like the runtime's: no allocation after the pool is built.
#[derive(Debug)]
struct PoolFrame {
    buf: Option<Buf>,
    start: usize,
    len: usize,
    pool: Arc<ArrayQueue<Buf>>,
}

impl PoolFrame {
    fn take(pool: &Arc<ArrayQueue<Buf>>, bytes: &[u8]) -> Option<Self> {
        let mut buf = pool.pop()?;
        buf[64..64 + bytes.len()].copy_from_slice(bytes);
        Some(Self {
            buf: Some(buf),
            start: 64,
            len: bytes.len(),
            pool: Arc::clone(pool),
        })
    }
}

impl Drop for PoolFrame {
    fn drop(&mut self) {
        if let Some(b) = self.buf.take() {
            let _ = self.pool.push(b);
        }
    }
}

impl Frame for PoolFrame {
    fn data(&self) -> &[u8] {
        &self.buf.as_ref().expect("live")[self.start..self.start + self.len]
    }
    fn data_mut(&mut self) -> &mut [u8] {
        let (s, l) = (self.start, self.len);
        &mut self.buf.as_mut().expect("live")[s..s + l]
    }
    fn push_front(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        self.len += n;
        true
    }
    fn pull_front(&mut self, n: usize) -> bool {
        if n > self.len {
            return false;
        }
        self.start += n;
        self.len -= n;
        true
    }
    fn try_clone(&self) -> Option<Self> {
        Self::take(&self.pool, self.data())
    }
}

#[test]
fn steady_state_forwarding_allocates_nothing() {
    let pool: Arc<ArrayQueue<Buf>> = Arc::new(ArrayQueue::new(4096));
    for _ in 0..4096 {
        pool.push(Box::new([0u8; 2048])).expect("room");
    }
    let mut params = presets::simple(3, 10_000_000_000);
    params.ports[2].queues[3].wred = Some(WredParams {
        ecn_mark: true,
        drop_enable: false,
        min_threshold_bytes: 0,
        max_threshold_bytes: 4000,
        probability_percent: 50,
    });
    // Port 2 drains at 1 Gb/s while port 0 receives more: PFC XOFF/XON and drops happen too.
    params.ports[2].shaper_rate_bps = 1_000_000_000;
    let mut now = Instant::from_millis(1);
    let mut sw: LcoreStep<PoolFrame> = LcoreStep::single(params, now).unwrap();
    // Templates built before arming (they use the heap).
    let templates: Vec<Vec<u8>> = [(HOST_A, 3u8, 1000usize), (HOST_B, 0, 64), (HOST_A, 4, 300)]
        .iter()
        .map(|&(src, dscp, len)| {
            use headroom_core::frame::Frame as _;
            ipv4_frame(src, HOST_C, dscp, Ecn::Ect0, len)
                .data()
                .to_vec()
        })
        .collect();
    let learn = ipv4_frame(HOST_C, HOST_A, 0, Ecn::NotEct, 64)
        .data()
        .to_vec();
    // LLDP from port 1's neighbour (punted; over its rate after the first 100) and a frame the
    // control plane sends out of port 1 (injected; over the inject rate after its burst).
    let mut lldp = ipv4_frame(HOST_B, [0x01, 0x80, 0xC2, 0, 0, 0x0E], 0, Ecn::NotEct, 64)
        .data()
        .to_vec();
    lldp[12..14].copy_from_slice(&0x88CCu16.to_be_bytes());
    let injected = ipv4_frame([0x02, 0, 0, 0, 0, 2], HOST_B, 46, Ecn::NotEct, 128)
        .data()
        .to_vec();
    let mut rx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut tx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut alloc = |len: usize| PoolFrame::take(&pool, &[0u8; 64][..len.min(64)]);
    let round = |sw: &mut LcoreStep<PoolFrame>,
                 now: Instant,
                 rx: &mut Vec<PoolFrame>,
                 tx: &mut Vec<PoolFrame>,
                 alloc: &mut dyn FnMut(usize) -> Option<PoolFrame>| {
        rx.push(PoolFrame::take(&pool, &learn).unwrap());
        sw.handle_rx_burst(now, PortId(2), rx);
        for i in 0..32 {
            rx.push(PoolFrame::take(&pool, &templates[i % templates.len()]).unwrap());
        }
        sw.handle_rx_burst(now, PortId(0), rx);
        rx.push(PoolFrame::take(&pool, &lldp).unwrap());
        sw.handle_rx_burst(now, PortId(1), rx);
        for _ in 0..2 {
            let _ = sw.inject(now, PortId(1), PoolFrame::take(&pool, &injected).unwrap());
        }
        sw.handle_timeout(now);
        for port in 0..3 {
            sw.poll_tx_burst(now, PortId(port), tx, 64, &mut |len| alloc(len));
            tx.clear();
        }
        while let Some(punted) = sw.poll_punt() {
            drop(punted);
        }
        while sw.poll_event().is_some() {}
    };
    // Warm up: FDB learned, every code path visited once.
    for _ in 0..100 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now, &mut rx, &mut tx, &mut alloc);
    }
    let before = headroom_testkit::allocations();
    for _ in 0..2000 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now, &mut rx, &mut tx, &mut alloc);
    }
    let allocated = headroom_testkit::allocations() - before;
    let egress = sw.egress().unwrap();
    let sent: u64 = (0..8)
        .map(|q| egress.port_counters(PortId(2)).tx_frames[q].get())
        .sum();
    let marked = egress.port_counters(PortId(2)).ecn_marked[3].get();
    assert!(sent > 2_000, "the loop forwarded traffic ({sent} frames)");
    assert!(marked > 0, "the ECN path ran");
    assert!(
        egress.port_counters(PortId(0)).pfc_frames_tx.get() > 1,
        "the PFC path ran"
    );
    let port1 = sw.ingress().unwrap().port_counters(PortId(1));
    let lldp_reason = headroom_core::punt::PuntReason::Lldp.index();
    assert!(
        port1.punt_frames[lldp_reason].get() > 100,
        "the punt path ran"
    );
    assert!(
        port1.punt_drops[lldp_reason].get() > 0,
        "the punt rate limit ran"
    );
    assert!(port1.inject_frames.get() > 1_000, "the inject path ran");
    assert!(
        port1.inject_drops[headroom_core::counters::DropReason::InjectRateLimit.index()].get() > 0,
        "the inject rate limit ran"
    );
    assert_eq!(allocated, 0, "allocations on the per-packet path");
}

/// Two ingress sides keep their FDBs in step through the learn rings: learns, moves across
/// sides, refreshes, drains and flushes allocate nothing either.
#[test]
fn fdb_sync_between_ingress_sides_allocates_nothing() {
    use headroom_core::shared::{Layout, LcorePorts};
    use headroom_core::switch::build;
    const HOST_D: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 0x0d];
    let pool: Arc<ArrayQueue<Buf>> = Arc::new(ArrayQueue::new(4096));
    for _ in 0..4096 {
        pool.push(Box::new([0u8; 2048])).expect("room");
    }
    let mut params = presets::simple(4, 10_000_000_000);
    // A refresh period (a quarter of the aging time) of 1 ms: refreshes are published too.
    params.fdb_aging_ns = 4_000_000;
    let mut now = Instant::from_millis(1);
    let ports = |ps: &[u16]| ps.iter().map(|p| PortId(*p)).collect::<Vec<_>>();
    let layout = Layout::from_lcores(
        4,
        &[
            LcorePorts {
                rx: ports(&[0, 1]),
                tx: ports(&[0, 1, 2, 3]),
            },
            LcorePorts {
                rx: ports(&[2, 3]),
                tx: Vec::new(),
            },
        ],
    )
    .unwrap();
    let mut steps = build::<PoolFrame>(params, layout, now).unwrap();
    let frame = |src, dst| {
        use headroom_core::frame::Frame as _;
        ipv4_frame(src, dst, 0, Ecn::NotEct, 64).data().to_vec()
    };
    // HOST_A moves between port 0 (side 0) and port 2 (side 1) every round; HOST_B (port 1)
    // and HOST_D (port 3) talk to it and to each other.
    let moving = frame(HOST_A, HOST_B);
    let from_b = frame(HOST_B, HOST_A);
    let from_d = frame(HOST_D, HOST_B);
    let mut rx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut tx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut round = |steps: &mut [LcoreStep<PoolFrame>], now: Instant, i: u32| {
        let (side, port) = if i.is_multiple_of(2) { (0, 0) } else { (1, 2) };
        rx.push(PoolFrame::take(&pool, &moving).unwrap());
        steps[side].handle_rx_burst(now, PortId(port), &mut rx);
        for _ in 0..8 {
            rx.push(PoolFrame::take(&pool, &from_b).unwrap());
        }
        steps[0].handle_rx_burst(now, PortId(1), &mut rx);
        for _ in 0..8 {
            rx.push(PoolFrame::take(&pool, &from_d).unwrap());
        }
        steps[1].handle_rx_burst(now, PortId(3), &mut rx);
        if i % 100 == 50 {
            steps[0].flush_fdb(Some(PortId(3)), now);
        }
        for step in steps.iter_mut() {
            step.handle_timeout(now);
        }
        for port in 0..4 {
            steps[0].poll_tx_burst(now, PortId(port), &mut tx, 64, &mut |_| None);
            tx.clear();
        }
    };
    for i in 0..100 {
        now = now.saturating_add_nanos(30_000);
        round(&mut steps, now, i);
    }
    let before = headroom_testkit::allocations();
    for i in 100..2100 {
        now = now.saturating_add_nanos(30_000);
        round(&mut steps, now, i);
    }
    let allocated = headroom_testkit::allocations() - before;
    assert_eq!(
        steps[0].ingress().unwrap().fdb().lookup(1, HOST_D, now),
        Some(PortId(3)),
        "side 0 knows what side 1 learned"
    );
    assert_eq!(
        steps[1].ingress().unwrap().fdb().lookup(1, HOST_B, now),
        Some(PortId(1)),
        "side 1 knows what side 0 learned"
    );
    assert_eq!(allocated, 0, "allocations on the multi-side learn path");
}

/// A MAC flood fills the table and keeps arriving: table-full learns, flooding to every port
/// and the relearn cache allocate nothing (the table is allocated once, at its capacity).
#[test]
fn a_mac_flood_with_the_table_full_allocates_nothing() {
    let pool: Arc<ArrayQueue<Buf>> = Arc::new(ArrayQueue::new(4096));
    for _ in 0..4096 {
        pool.push(Box::new([0u8; 2048])).expect("room");
    }
    let mut params = presets::simple(4, 10_000_000_000);
    params.fdb_capacity = 256;
    let mut now = Instant::from_millis(1);
    let mut sw: LcoreStep<PoolFrame> = LcoreStep::single(params, now).unwrap();
    let template = ipv4_frame(HOST_A, [0xff; 6], 0, Ecn::NotEct, 64)
        .data()
        .to_vec();
    let mut rx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut tx: Vec<PoolFrame> = Vec::with_capacity(256);
    let mut source = 0u32;
    let mut round = |sw: &mut LcoreStep<PoolFrame>, now: Instant| {
        for _ in 0..32 {
            let mut f = PoolFrame::take(&pool, &template).unwrap();
            f.data_mut()[8..12].copy_from_slice(&source.to_be_bytes());
            source += 1;
            rx.push(f);
        }
        sw.handle_rx_burst(now, PortId(0), &mut rx);
        sw.handle_timeout(now);
        for port in 1..4 {
            sw.poll_tx_burst(now, PortId(port), &mut tx, 64, &mut |_: usize| None);
            tx.clear();
        }
    };
    for _ in 0..100 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now);
    }
    let before = headroom_testkit::allocations();
    for _ in 0..2000 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now);
    }
    let allocated = headroom_testkit::allocations() - before;
    let full = sw
        .ingress()
        .expect("an ingress side")
        .port_counters(PortId(0))
        .fdb_learn_table_full
        .get();
    assert!(
        full > 50_000,
        "the table was full for most sources ({full})"
    );
    let flooded: u64 = (0..8)
        .map(|q| {
            sw.egress()
                .expect("an egress side")
                .port_counters(PortId(3))
                .tx_frames[q]
                .get()
        })
        .sum();
    assert!(flooded > 50_000, "the flood reached every port ({flooded})");
    assert_eq!(allocated, 0, "allocations during a MAC flood");
}

/// Routed forwarding allocates nothing: router-MAC check, header checks, LPM, the ECMP hash,
/// the rewrite, and the punts of a routed port (TTL error, neighbour miss, ARP, over their
/// rates too) and its drops (no route).
#[test]
fn steady_state_routing_allocates_nothing() {
    use headroom_core::params::VlanMode;
    use headroom_core::route::{
        fib_channel, EcmpMember, FibBuilder, FibConfig, Ipv4Prefix, NextHop, RouteTarget,
    };
    use headroom_wire::ethernet::MacAddress;
    use std::net::Ipv4Addr;
    let pool: Arc<ArrayQueue<Buf>> = Arc::new(ArrayQueue::new(4096));
    for _ in 0..4096 {
        pool.push(Box::new([0u8; 2048])).expect("room");
    }
    let mut params = presets::simple(3, 10_000_000_000);
    for p in &mut params.ports {
        p.vlan = VlanMode::Routed;
    }
    let mut now = Instant::from_millis(1);
    let mut sw: LcoreStep<PoolFrame> = LcoreStep::single(params, now).unwrap();
    let mut b = FibBuilder::new(FibConfig::default()).unwrap();
    let hops: Vec<_> = (1..3u16)
        .map(|p| {
            b.add_next_hop(NextHop::Resolved {
                port: PortId(p),
                vlan: None,
                mac: MacAddress([2, 0xbb, 0, 0, 0, p as u8]),
            })
            .unwrap()
        })
        .collect();
    let unresolved = b
        .add_next_hop(NextHop::Unresolved {
            port: PortId(1),
            vlan: None,
        })
        .unwrap();
    let members: Vec<_> = hops.iter().map(|&h| EcmpMember::new(h)).collect();
    let group = b.add_ecmp_group(&members, None).unwrap();
    let pfx = |a: [u8; 4]| Ipv4Prefix::new(Ipv4Addr::from(a), 16).unwrap();
    b.set_route_v4(pfx([10, 5, 0, 0]), RouteTarget::Ecmp(group))
        .unwrap();
    b.set_route_v4(pfx([10, 2, 0, 0]), RouteTarget::NextHop(unresolved))
        .unwrap();
    let fib = b.publish().unwrap();
    let (_sender, reader) = fib_channel(fib);
    sw.attach_fib(reader);
    let router_mac = [0x02, 0, 0, 0, 0, 1];
    let packet = |dst: [u8; 4], ttl: u8, sport: u16| {
        let mut f = ipv4_frame(HOST_A, router_mac, 3, Ecn::Ect0, 128)
            .data()
            .to_vec();
        f[14 + 8] = ttl;
        f[30..34].copy_from_slice(&dst);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        let mut ip = headroom_wire::ipv4::Ipv4Packet::new_unchecked(&mut f[14..34]);
        ip.fill_checksum();
        f
    };
    let mut templates: Vec<Vec<u8>> = (0..16).map(|i| packet([10, 5, 0, 1], 64, i)).collect();
    templates.push(packet([10, 2, 0, 1], 64, 1)); // neighbor_miss
    templates.push(packet([10, 5, 0, 1], 1, 1)); // ttl_error
    templates.push(packet([192, 168, 0, 1], 64, 1)); // no_route
    let mut arp = vec![0u8; 60];
    arp[..6].copy_from_slice(&[0xFF; 6]);
    arp[6..12].copy_from_slice(&HOST_A);
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    templates.push(arp);
    let mut rx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut tx: Vec<PoolFrame> = Vec::with_capacity(64);
    let mut round = |sw: &mut LcoreStep<PoolFrame>, now: Instant| {
        for t in &templates {
            rx.push(PoolFrame::take(&pool, t).unwrap());
        }
        sw.handle_rx_burst(now, PortId(0), &mut rx);
        sw.handle_timeout(now);
        for port in 0..3 {
            sw.poll_tx_burst(now, PortId(port), &mut tx, 64, &mut |_| None);
            tx.clear();
        }
        while let Some(punted) = sw.poll_punt() {
            drop(punted);
        }
    };
    for _ in 0..100 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now);
    }
    let before = headroom_testkit::allocations();
    for _ in 0..2000 {
        now = now.saturating_add_nanos(30_000);
        round(&mut sw, now);
    }
    let allocated = headroom_testkit::allocations() - before;
    let c = sw.ingress().unwrap().port_counters(PortId(0));
    assert!(c.rif_in_packets.get() >= 2100 * 16, "routed");
    let punted = |r: headroom_core::punt::PuntReason| c.punt_frames[r.index()].get();
    use headroom_core::punt::PuntReason as P;
    assert!(punted(P::NeighborMiss) > 0 && punted(P::TtlError) > 0 && punted(P::ArpReq) > 0);
    assert!(
        c.punt_drops[P::NeighborMiss.index()].get() > 0,
        "over its rate too"
    );
    assert_eq!(
        c.drops[headroom_core::counters::DropReason::NoRoute.index()].get(),
        2100
    );
    assert_eq!(allocated, 0, "allocations on the routed path");
}
