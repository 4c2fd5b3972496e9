//! Routed fabrics (`routing.rs`): a leaf-spine of routed switches with the routes
//! `Sim::install_routes` computes; flows cross it through the core's LPM, ECMP and rewrite.

use headroom_core::counters::DropReason;
use headroom_core::params::{presets, SwitchParams, VlanMode};
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority};
use headroom_sim::{
    EcmpSeeds, Endpoint, FlowSpec, HostId, HostParams, LinkParams, RdmaFlowSpec, RdmaHostParams,
    Sim, SimError, SwitchId,
};

const GBPS: u64 = 1_000_000_000;
const US: u64 = 1_000;
const LEAVES: usize = 2;
const SPINES: usize = 2;
const HOSTS_PER_LEAF: usize = 2;

/// Routed ports with router MAC 02:52:00:ss:00:pp.
fn routed(s: usize, ports: usize) -> SwitchParams {
    let mut p = presets::simple(ports, 10 * GBPS);
    for (i, port) in p.ports.iter_mut().enumerate() {
        port.vlan = VlanMode::Routed;
        port.mac = [0x02, 0x52, 0, s as u8, 0, i as u8];
    }
    p
}

/// Two leaves, two spines, two hosts per leaf; host h on leaf h / 2. Leaf ports: hosts first,
/// then one uplink per spine. Spine port l: leaf l. `rdma` makes RoCE hosts.
fn leaf_spine(rdma: bool) -> Sim {
    let mut sim = Sim::new();
    build_leaf_spine(rdma.then(RdmaHostParams::default).as_ref(), &mut sim);
    sim
}

/// [`leaf_spine`] into `sim`, with RoCE hosts of `nic` if given.
fn build_leaf_spine(nic: Option<&RdmaHostParams>, sim: &mut Sim) {
    let leaves: Vec<SwitchId> = (0..LEAVES)
        .map(|l| sim.add_switch(routed(l, HOSTS_PER_LEAF + SPINES)).unwrap())
        .collect();
    let spines: Vec<SwitchId> = (0..SPINES)
        .map(|s| sim.add_switch(routed(LEAVES + s, LEAVES)).unwrap())
        .collect();
    let link = LinkParams::new(10 * GBPS, US);
    for (l, &leaf) in leaves.iter().enumerate() {
        for i in 0..HOSTS_PER_LEAF {
            let params = HostParams::numbered((l * HOSTS_PER_LEAF + i + 1) as u16);
            let h = if let Some(nic) = nic {
                sim.add_rdma_host(params, nic.clone()).unwrap()
            } else {
                sim.add_host(params)
            };
            sim.connect(
                Endpoint::Host(h),
                Endpoint::Switch(leaf, PortId(i as u16)),
                link,
            )
            .unwrap();
        }
    }
    for (l, &leaf) in leaves.iter().enumerate() {
        for (s, &spine) in spines.iter().enumerate() {
            sim.connect(
                Endpoint::Switch(leaf, PortId((HOSTS_PER_LEAF + s) as u16)),
                Endpoint::Switch(spine, PortId(l as u16)),
                link,
            )
            .unwrap();
        }
    }
}

fn drops(sim: &Sim, s: usize) -> u64 {
    let sw = sim.switch(SwitchId(s));
    let ingress = sw.ingress().unwrap();
    let egress = sw.egress().unwrap();
    (0..sw.shared().params.ports.len())
        .map(|p| {
            let i = ingress.port_counters(PortId(p as u16));
            let e = egress.port_counters(PortId(p as u16));
            i.drops
                .iter()
                .chain(e.drops.iter())
                .map(|c| c.get())
                .sum::<u64>()
        })
        .sum()
}

#[test]
fn routes_reach_every_host_and_cross_leaf_routes_spread_over_both_spines() {
    let mut sim = leaf_spine(false);
    let routes = sim.install_routes(EcmpSeeds::PerSwitch(7)).unwrap();
    let hosts = LEAVES * HOSTS_PER_LEAF;
    for (s, r) in routes.iter().enumerate() {
        assert_eq!(r.routes, hosts, "switch {s}: a route to every host");
    }
    // A leaf reaches the other leaf's two hosts through both spines (one group); a spine
    // reaches every host through its one leaf.
    for leaf in &routes[..LEAVES] {
        assert_eq!((leaf.ecmp_routes, leaf.ecmp_groups), (HOSTS_PER_LEAF, 1));
    }
    for spine in &routes[LEAVES..] {
        assert_eq!((spine.ecmp_routes, spine.ecmp_groups), (0, 0));
    }
    // 32 flows from leaf 0's hosts to leaf 1's (each its own UDP source port), and one flow
    // between the two hosts of leaf 1 (routed by the leaf alone).
    let mut flows = Vec::new();
    for k in 0..32usize {
        let mut spec = FlowSpec::new(
            HostId(k % 2),
            HostId(2 + (k / 2) % 2),
            3,
            Priority::from_low_bits(3),
        );
        spec.frames = Some(20);
        spec.rate_bps = Some(GBPS / 10);
        flows.push(sim.add_flow(spec).unwrap());
    }
    let mut local = FlowSpec::new(HostId(3), HostId(2), 3, Priority::from_low_bits(3));
    local.frames = Some(50);
    flows.push(sim.add_flow(local).unwrap());
    sim.run_until(Instant::from_millis(10)).unwrap();
    for f in &flows {
        let st = sim.flow(*f);
        assert_eq!(
            (st.delivered_frames, st.lost_frames),
            (st.sent_frames, 0),
            "{f:?}: every frame delivered"
        );
        assert!(st.sent_frames > 0);
    }
    for s in 0..LEAVES + SPINES {
        assert_eq!(drops(&sim, s), 0, "switch {s} dropped nothing");
    }
    // Both uplinks of leaf 0 carried some of the 640 cross-leaf frames.
    let up: Vec<u64> = (0..SPINES)
        .map(|s| {
            sim.channel_from(Endpoint::Switch(
                SwitchId(0),
                PortId((HOSTS_PER_LEAF + s) as u16),
            ))
            .unwrap()
            .stats()
            .data_frames
        })
        .collect();
    assert_eq!(up.iter().sum::<u64>(), 640, "uplink frames {up:?}");
    assert!(up.iter().all(|&n| n >= 100), "ECMP spread {up:?}");
    // The local flow did not touch a spine.
    let spine_down: u64 = (0..SPINES)
        .map(|s| {
            sim.channel_from(Endpoint::Switch(SwitchId(LEAVES + s), PortId(0)))
                .unwrap()
                .stats()
                .data_frames
        })
        .sum();
    assert_eq!(spine_down, 0, "nothing goes from a spine back to leaf 0");
}

#[test]
fn avoided_ports_carry_no_route_and_a_host_out_of_reach_has_none() {
    let leaf0 = SwitchId(0);
    let leaf0_to_spine1 = PortId((HOSTS_PER_LEAF + 1) as u16);
    let spine0_to_leaf1 = (SwitchId(LEAVES), PortId(1));
    let cross_leaf = |sim: &mut Sim| {
        let mut spec = FlowSpec::new(HostId(0), HostId(2), 3, Priority::from_low_bits(3));
        spec.frames = Some(40);
        spec.rate_bps = Some(GBPS / 10);
        let f = sim.add_flow(spec).unwrap();
        sim.run_until(Instant::from_millis(5)).unwrap();
        let st = sim.flow(f);
        (st.sent_frames, st.delivered_frames)
    };
    // Leaf 0 may not send to spine 1: its routes to leaf 1 go through spine 0 alone; leaf 1
    // keeps both spines.
    let mut sim = leaf_spine(false);
    let routes = sim
        .install_routes_avoiding(EcmpSeeds::PerSwitch(7), &[(leaf0, leaf0_to_spine1)])
        .unwrap();
    assert_eq!(routes[0].routes, LEAVES * HOSTS_PER_LEAF);
    assert_eq!(
        (routes[0].ecmp_routes, routes[1].ecmp_routes),
        (0, HOSTS_PER_LEAF)
    );
    assert_eq!(cross_leaf(&mut sim), (40, 40), "(sent, delivered)");
    let hops = sim.next_hop_packets(leaf0);
    assert!(hops.iter().all(|h| h.port != leaf0_to_spine1), "{hops:?}");
    let via_spine0 = hops
        .iter()
        .find(|h| h.port == PortId(HOSTS_PER_LEAF as u16));
    assert_eq!(via_spine0.map(|h| h.packets), Some(40), "{hops:?}");
    // And spine 0 may not send to leaf 1: leaf 1's hosts are out of leaf 0's reach, so it has
    // no route to them and drops what its hosts send there (no_route).
    let mut sim = leaf_spine(false);
    let routes = sim
        .install_routes_avoiding(
            EcmpSeeds::PerSwitch(7),
            &[(leaf0, leaf0_to_spine1), spine0_to_leaf1],
        )
        .unwrap();
    assert_eq!(
        routes[0].routes, HOSTS_PER_LEAF,
        "leaf 0: its own hosts only"
    );
    assert_eq!(
        routes[1].routes,
        LEAVES * HOSTS_PER_LEAF,
        "leaf 1 reaches everyone"
    );
    assert_eq!(cross_leaf(&mut sim), (40, 0), "(sent, delivered)");
    let no_route = sim
        .switch(leaf0)
        .ingress()
        .unwrap()
        .port_counters(PortId(0))
        .drops[DropReason::NoRoute.index()]
    .get();
    assert_eq!(no_route, 40);
}

#[test]
fn a_frame_to_the_host_mac_instead_of_the_gateway_is_dropped_as_a_router_mac_mismatch() {
    // Without installed routes, hosts address each other's MACs: a routed leaf drops that.
    let mut sim = leaf_spine(false);
    let mut spec = FlowSpec::new(HostId(0), HostId(1), 3, Priority::from_low_bits(3));
    spec.frames = Some(5);
    let f = sim.add_flow(spec).unwrap();
    sim.run_until(Instant::from_millis(1)).unwrap();
    assert_eq!(sim.flow(f).delivered_frames, 0);
    let mismatched = sim
        .switch(SwitchId(0))
        .ingress()
        .unwrap()
        .port_counters(PortId(0))
        .drops[DropReason::RouterMacMismatch.index()]
    .get();
    assert_eq!(mismatched, 5);
}

#[test]
fn rdma_writes_cross_the_fabric_and_complete() {
    let mut sim = leaf_spine(true);
    sim.install_routes(EcmpSeeds::PerSwitch(1)).unwrap();
    let flows: Vec<_> = (0..4)
        .map(|k| {
            sim.add_rdma_flow(RdmaFlowSpec::new(
                HostId(k % 2),
                HostId(2 + k / 2),
                Some(256 << 10),
                Instant::from_micros(10),
            ))
            .unwrap()
        })
        .collect();
    sim.run_until(Instant::from_millis(5)).unwrap();
    for f in flows {
        let s = sim.rdma_flow(f);
        assert_eq!(
            (s.completed_bytes, s.delivered_bytes),
            (256 << 10, 256 << 10),
            "{f:?}"
        );
    }
    for s in 0..LEAVES + SPINES {
        assert_eq!(drops(&sim, s), 0, "switch {s} dropped nothing");
    }
}

#[test]
fn routes_are_refused_after_flows_and_on_bridged_ports() {
    let mut sim = leaf_spine(false);
    sim.add_flow(FlowSpec::new(
        HostId(0),
        HostId(2),
        3,
        Priority::from_low_bits(3),
    ))
    .unwrap();
    assert!(matches!(
        sim.install_routes(EcmpSeeds::Same(0)),
        Err(SimError::InvalidConfig(_))
    ));
    let mut bridged = Sim::new();
    let sw = bridged.add_switch(presets::simple(2, 10 * GBPS)).unwrap();
    let h = bridged.add_host(HostParams::numbered(1));
    bridged
        .connect(
            Endpoint::Host(h),
            Endpoint::Switch(sw, PortId(0)),
            LinkParams::new(10 * GBPS, US),
        )
        .unwrap();
    let e = bridged.install_routes(EcmpSeeds::Same(0)).unwrap_err();
    assert!(e.to_string().contains("not routed"), "{e}");
}

/// The simulator drives a switch only when it received frames, its core's deadline or a
/// transmitter becoming free says it may have work, or after a poke (`switch_wake_after`):
/// a leaf-spine with a 3:1 incast of DCQCN WRITEs across the spines (PFC pauses, ECN marks,
/// CNPs) and a local flow, run in pieces with the watchdog's big red switch toggled between
/// them (a poke), gives the same steps, flows, hosts, switch counters, events and PG use
/// sampled every 10 µs as driving every switch at every step.
#[test]
fn driving_switches_only_when_due_changes_nothing() {
    let run = |drive_every_switch: bool| {
        let mut sim = Sim::with_config(headroom_sim::SimConfig {
            drive_every_switch,
            ..headroom_sim::SimConfig::default()
        })
        .unwrap();
        let mut nic = RdmaHostParams::default();
        nic.nic.rp = Some(headroom_roce::dcqcn::RpParams::paper());
        nic.nic.np = Some(headroom_roce::np::NpConfig::paper());
        build_leaf_spine(Some(&nic), &mut sim);
        sim.install_routes(EcmpSeeds::PerSwitch(3)).unwrap();
        for src in [0, 1, 2] {
            sim.add_rdma_flow(RdmaFlowSpec::new(
                HostId(src),
                HostId(3),
                Some(2 << 20),
                Instant::from_micros(5 * src as u64),
            ))
            .unwrap();
        }
        sim.add_rdma_flow(RdmaFlowSpec::new(
            HostId(1),
            HostId(0),
            Some(1 << 20),
            Instant::from_micros(50),
        ))
        .unwrap();
        // Every 10 µs, what the switches' PGs hold (what pgs.csv samples): a switch not
        // driven after it sent a frame would show the frame's cells still held.
        let mut pg_use = Vec::new();
        for piece in 1..=300u64 {
            sim.run_until(Instant::from_micros(piece * 10)).unwrap();
            for s in 0..LEAVES + SPINES {
                let sh = sim.switch(SwitchId(s)).shared();
                for p in 0..sh.params.ports.len() {
                    let st = sh.port_stats(PortId(p as u16), sim.now());
                    pg_use.extend(st.pgs.iter().map(|pg| pg.used_bytes));
                }
            }
            if piece % 70 == 0 {
                let on = piece % 140 == 0;
                let now = sim.now();
                sim.switch_mut(SwitchId(1)).set_big_red_switch(on, now);
            }
        }
        let switches: Vec<String> = (0..LEAVES + SPINES)
            .map(|s| {
                let sw = sim.switch(SwitchId(s));
                (0..sw.shared().params.ports.len())
                    .map(|p| format!("{:?}", sw.shared().port_stats(PortId(p as u16), sim.now())))
                    .collect::<Vec<_>>()
                    .join("\n")
            })
            .collect();
        let flows: Vec<_> = sim.rdma_flow_ids().map(|f| sim.rdma_flow(f)).collect();
        let hosts: Vec<String> = (0..LEAVES * HOSTS_PER_LEAF)
            .map(|h| format!("{:?}", sim.host(HostId(h)).stats()))
            .collect();
        (
            sim.steps(),
            flows,
            hosts,
            switches,
            format!("{:?}", sim.events()),
            pg_use,
        )
    };
    let due = run(false);
    assert!(due.5.iter().any(|&b| b > 0), "the PGs held something");
    assert!(due.1.iter().all(|f| f.completed_bytes > 0), "{:?}", due.1);
    let every = run(true);
    assert_eq!(due.0, every.0, "steps");
    assert_eq!(due.1, every.1, "flows");
    assert_eq!(due.2, every.2, "hosts");
    for (s, (a, b)) in due.3.iter().zip(&every.3).enumerate() {
        assert_eq!(a, b, "switch {s}");
    }
    assert_eq!(due.4, every.4, "events");
    assert!(due.5 == every.5, "PG use sampled every 10 µs differs");
}

/// A change made through `Sim::switch_mut` (a poke) drives every switch at the next step:
/// a leaf whose port to h1 has its transmitter disabled holds h0's flow (and pauses h0 with
/// PFC, so nothing arrives and the leaf is quiet but for its XOFF refreshes); when the
/// transmitter is enabled again, the held frames leave at once (within one frame time and the
/// link delay), as when every switch is
/// driven at every step.
#[test]
fn a_poke_drives_a_quiet_switch_at_once() {
    let run = |drive_every_switch: bool| {
        let mut sim = Sim::with_config(headroom_sim::SimConfig {
            drive_every_switch,
            ..headroom_sim::SimConfig::default()
        })
        .unwrap();
        build_leaf_spine(None, &mut sim);
        sim.install_routes(EcmpSeeds::PerSwitch(3)).unwrap();
        let mut spec = FlowSpec::new(HostId(0), HostId(1), 3, Priority::from_low_bits(3));
        spec.frames = Some(2000);
        let f = sim.add_flow(spec).unwrap();
        sim.switch_mut(SwitchId(0)).set_tx_enable(PortId(1), false);
        sim.run_until(Instant::from_micros(300)).unwrap();
        let held = sim.flow(f).delivered_frames;
        sim.switch_mut(SwitchId(0)).set_tx_enable(PortId(1), true);
        sim.run_until(Instant::from_micros(310)).unwrap();
        let released = sim.flow(f).delivered_frames;
        sim.run_until(Instant::from_millis(5)).unwrap();
        (held, released, sim.steps(), format!("{:?}", sim.flow(f)))
    };
    let due = run(false);
    assert_eq!(due.0, 0, "nothing reaches h1 while its port is disabled");
    assert!(
        due.1 > 0,
        "the held frames leave within 10 µs of the enable: {due:?}"
    );
    assert_eq!(due, run(true));
}
