//! RoCE hosts (headroom-rnic NICs) through real switches: WRITEs complete, PFC keeps an incast
//! lossless, and the faults do what they say.

use headroom_core::params::presets;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_sim::{
    Endpoint, HostId, HostParams, LinkParams, NicFaults, PfcStorm, RdmaFlowSpec, RdmaHostParams,
    Sim, SimConfig,
};

const GBPS: u64 = 1_000_000_000;
const US: u64 = 1_000;

/// A switch with `n` RoCE hosts at `rate`, host i on port i, 1 µs links.
fn star(n: usize, rate: u64, faults: &[(usize, NicFaults)]) -> Sim {
    let mut sim = Sim::new();
    let sw = sim.add_switch(presets::simple(n, rate)).unwrap();
    for i in 0..n {
        let mut params = RdmaHostParams::default();
        if let Some((_, f)) = faults.iter().find(|(h, _)| *h == i) {
            params.faults = *f;
        }
        let h = sim
            .add_rdma_host(HostParams::numbered(u16::try_from(i + 1).unwrap()), params)
            .unwrap();
        sim.connect(
            Endpoint::Host(h),
            Endpoint::Switch(sw, PortId(u16::try_from(i).unwrap())),
            LinkParams::new(rate, US),
        )
        .unwrap();
    }
    sim
}

#[test]
fn one_write_flow_completes_at_line_rate_without_loss() {
    let mut sim = star(2, 10 * GBPS, &[]);
    let hosts: Vec<_> = (0..2).map(HostId).collect();
    let flow = sim
        .add_rdma_flow(RdmaFlowSpec::new(
            hosts[0],
            hosts[1],
            Some(1 << 20),
            Instant::from_micros(10),
        ))
        .unwrap();
    sim.run_until(Instant::from_millis(5)).unwrap();
    let s = sim.rdma_flow(flow);
    assert_eq!(s.posted_bytes, 1 << 20);
    assert_eq!(s.completed_bytes, 1 << 20);
    assert_eq!(s.delivered_bytes, 1 << 20);
    let fct = s.finish.unwrap().as_nanos() - 10 * US;
    // 1024 packets of 1024 B payload in 1024 + 58 + 24 B on the wire at 10 Gb/s: 906 µs, plus
    // the path (two links, store and forward) and the last ACK.
    let ideal = 1024 * (1024 + 58 + 24) * 8 / 10;
    assert!(
        fct >= ideal && fct < ideal + 20 * US,
        "FCT {fct} ns, ideal {ideal}"
    );
    let nic = sim.host(hosts[0]).rdma().unwrap().nic().unwrap();
    assert_eq!(nic.requester_stats(0).packets_retransmitted_total, 0);
    assert_eq!(nic.counters().tx_data_packets_total, 1024);
}

#[test]
fn a_2_to_1_incast_is_lossless_under_pfc() {
    let mut sim = star(3, 10 * GBPS, &[]);
    let h = |i| HostId(i);
    let flows: Vec<_> = (0..2)
        .map(|i| {
            sim.add_rdma_flow(RdmaFlowSpec::new(h(i), h(2), Some(4 << 20), Instant::ZERO))
                .unwrap()
        })
        .collect();
    sim.run_until(Instant::from_millis(10)).unwrap();
    let sw = sim.switch(headroom_sim::SwitchId(0));
    let stats = sw.shared().port_stats(PortId(2), sim.now());
    let mut finish = Vec::new();
    for (i, &f) in flows.iter().enumerate() {
        let s = sim.rdma_flow(f);
        assert_eq!(s.completed_bytes, 4 << 20, "flow {i}");
        assert_eq!(s.delivered_bytes, 4 << 20, "flow {i}");
        finish.push(s.finish.unwrap());
        let nic = sim.host(h(i)).rdma().unwrap().nic().unwrap();
        assert_eq!(nic.requester_stats(0).packets_retransmitted_total, 0);
        let prio = headroom_roce::pause::Priority::new(3).unwrap();
        assert!(
            nic.priority_stats(prio).pfc_frames_rx_total > 0,
            "host {i} was paused"
        );
    }
    for p in 0..3 {
        let st = sim
            .switch(headroom_sim::SwitchId(0))
            .shared()
            .port_stats(PortId(p), sim.now());
        assert_eq!(st.drops_total(), 0, "port {p}: {:?}", st.drops);
    }
    // 8 MiB through one 10 Gb/s port: at least 7.2 ms.
    let last = finish.iter().max().unwrap().as_nanos();
    assert!(last > 7_000 * US && last < 7_600 * US, "{last}");
    assert!(stats.queues[3].tx_bytes > 8 << 20);
}

#[test]
fn a_nic_that_ignores_pfc_overruns_the_switch_and_a_storming_nic_pauses_it() {
    // Host 0 ignores PFC; both senders blast into host 2: the lossless PG of port 0 overflows
    // its headroom and the switch drops, while the well-behaved host 1 is paused.
    let faults = [(
        0,
        NicFaults {
            ignore_pfc: true,
            pfc_storm: None,
        },
    )];
    let mut sim = star(3, 10 * GBPS, &faults);
    let h = |i| HostId(i);
    for i in 0..2 {
        sim.add_rdma_flow(RdmaFlowSpec::new(h(i), h(2), Some(4 << 20), Instant::ZERO))
            .unwrap();
    }
    sim.run_until(Instant::from_millis(3)).unwrap();
    let sw = headroom_sim::SwitchId(0);
    let p0 = sim.switch(sw).shared().port_stats(PortId(0), sim.now());
    assert!(p0.pgs[3].drops > 0, "the PFC-deaf sender overran its PG");
    assert!(sim.host(h(0)).rdma().unwrap().stats().mac_control_ignored > 0);

    // A storming NIC: port 1's egress is held, the switch counts the PFC it receives.
    let storm = PfcStorm {
        priorities: 1 << 3,
        quanta: 0xFFFF,
        interval_ns: 100 * US,
        start: Instant::from_micros(50),
        stop: Some(Instant::from_micros(1050)),
    };
    let faults = [(
        1,
        NicFaults {
            ignore_pfc: false,
            pfc_storm: Some(storm),
        },
    )];
    let mut sim = star(2, 10 * GBPS, &faults);
    sim.run_until(Instant::from_millis(2)).unwrap();
    let p1 = sim.switch(sw).shared().port_stats(PortId(1), sim.now());
    assert_eq!(p1.pfc_rx[3], 10, "one frame per 100 µs in [50 µs, 1050 µs)");
    assert_eq!(sim.host(h(1)).rdma().unwrap().stats().storm_frames_sent, 10);
}

/// The simulator asks a host's NIC for a frame only when the NIC's deadline, a received frame
/// or a poke says it may have one, and keeps each host's wake time across steps until one of
/// these or its being asked changes it (docs/perf.md, "Simulator"): a 2:1 incast with DCQCN,
/// run in 100 µs pieces with learning hellos injected between them (pokes), gives the same
/// steps, flows, hosts, switch counters and events as asking every host at every step.
#[test]
fn asking_hosts_only_when_due_changes_nothing() {
    let run = |poll_every_host: bool| {
        let rate = 40_000_000_000u64;
        let mut sim = Sim::with_config(SimConfig {
            poll_every_host,
            ..SimConfig::default()
        })
        .unwrap();
        let sw = sim.add_switch(presets::simple(3, rate)).unwrap();
        for i in 0..3u16 {
            let mut params = RdmaHostParams::default();
            params.nic.rp = Some(headroom_roce::dcqcn::RpParams::paper());
            params.nic.np = Some(headroom_roce::np::NpConfig::paper());
            let h = sim
                .add_rdma_host(HostParams::numbered(i + 1), params)
                .unwrap();
            sim.connect(
                Endpoint::Host(h),
                Endpoint::Switch(sw, PortId(i)),
                LinkParams::new(rate, 1000),
            )
            .unwrap();
        }
        for (i, start_us) in [(0, 0), (1, 100)] {
            sim.add_rdma_flow(RdmaFlowSpec::new(
                HostId(i),
                HostId(2),
                None,
                Instant::from_micros(start_us),
            ))
            .unwrap();
        }
        for piece in 1..=15u64 {
            sim.run_until(Instant::from_micros(piece * 100)).unwrap();
            if piece % 4 == 0 {
                let host = HostId(usize::try_from(piece / 4 % 3).unwrap());
                sim.hello(host, None).unwrap();
            }
        }
        let ports: Vec<_> = (0..3)
            .map(|p| {
                format!(
                    "{:?}",
                    sim.switch(sw).shared().port_stats(PortId(p), sim.now())
                )
            })
            .collect();
        let flows: Vec<_> = sim.rdma_flow_ids().map(|f| sim.rdma_flow(f)).collect();
        let hosts: Vec<_> = (0..3)
            .map(|h| format!("{:?}", sim.host(HostId(h)).stats()))
            .collect();
        (
            sim.steps(),
            flows,
            hosts,
            ports,
            format!("{:?}", sim.events()),
        )
    };
    let due = run(false);
    assert!(due.1.iter().all(|f| f.completed_bytes > 0), "{:?}", due.1);
    assert_eq!(due, run(true));
}

/// The same with plain hosts: two line-rate flows and a paced one into one port (the switch
/// pauses the senders with PFC), a flow added and hellos injected between pieces of the run.
#[test]
fn keeping_plain_hosts_wake_times_changes_nothing() {
    let run = |poll_every_host: bool| {
        let rate = 10 * GBPS;
        let mut sim = Sim::with_config(SimConfig {
            poll_every_host,
            ..SimConfig::default()
        })
        .unwrap();
        let sw = sim.add_switch(presets::simple(4, rate)).unwrap();
        for i in 0..4u16 {
            let h = sim.add_host(HostParams::numbered(i + 1));
            sim.connect(
                Endpoint::Host(h),
                Endpoint::Switch(sw, PortId(i)),
                LinkParams::new(rate, US),
            )
            .unwrap();
        }
        let prio = headroom_core::types::Priority::from_low_bits(3);
        for (src, paced_bps) in [(0, None), (1, None), (2, Some(3 * GBPS))] {
            let mut spec = headroom_sim::FlowSpec::new(HostId(src), HostId(3), 3, prio);
            spec.rate_bps = paced_bps;
            spec.frames = Some(2_000);
            spec.start = Instant::from_micros(u64::try_from(src).unwrap() * 50);
            sim.add_flow(spec).unwrap();
        }
        for piece in 1..=10u64 {
            sim.run_until(Instant::from_micros(piece * 100)).unwrap();
            if piece == 3 {
                let mut spec = headroom_sim::FlowSpec::new(HostId(3), HostId(0), 3, prio);
                spec.frames = Some(500);
                spec.start = sim.now();
                sim.add_flow(spec).unwrap();
            }
            if piece % 2 == 0 {
                let host = HostId(usize::try_from(piece / 2 % 4).unwrap());
                sim.hello(host, None).unwrap();
            }
        }
        let flows: Vec<_> = sim.flow_ids().map(|f| sim.flow(f).clone()).collect();
        let hosts: Vec<_> = (0..4)
            .map(|h| sim.host(HostId(h)).stats().clone())
            .collect();
        let ports: Vec<_> = (0..4)
            .map(|p| {
                format!(
                    "{:?}",
                    sim.switch(sw).shared().port_stats(PortId(p), sim.now())
                )
            })
            .collect();
        (
            sim.steps(),
            flows,
            hosts,
            ports,
            format!("{:?}", sim.events()),
        )
    };
    let due = run(false);
    // The senders were paused, the hellos arrived, every flow delivered.
    assert!(
        due.2[..2].iter().all(|h| h.pause_episodes[3] > 0),
        "{:?}",
        due.2
    );
    assert!(due.2.iter().all(|h| h.other_rx > 0), "{:?}", due.2);
    assert!(due.1.iter().all(|f| f.delivered_frames > 0), "{:?}", due.1);
    assert_eq!(due, run(true));
}
