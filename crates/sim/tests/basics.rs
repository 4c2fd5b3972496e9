//! The simulator's own behaviour: exact timing of links, line rate, PFC between hosts and a
//! switch (lossless incast loses nothing, lossy incast drops), determinism, refusals.

use headroom_core::frame::HeapFrame;
use headroom_core::params::presets;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority};
use headroom_sim::link::wire_time_ns;
use headroom_sim::{Endpoint, FlowSpec, HostId, HostParams, LinkParams, Sim, SimError, SwitchId};

const GBPS: u64 = 1_000_000_000;
const PROPAGATION_NS: u64 = 1_000;

/// One switch of `ports` ports at 1 Gb/s, one host per port.
fn star(ports: usize) -> (Sim, SwitchId, Vec<HostId>) {
    let mut sim = Sim::new();
    let sw = sim.add_switch(presets::simple(ports, GBPS)).unwrap();
    let hosts: Vec<HostId> = (0..ports)
        .map(|i| {
            let h = sim.add_host(HostParams::numbered(i as u16 + 1));
            sim.connect(
                Endpoint::Host(h),
                Endpoint::Switch(sw, PortId(i as u16)),
                LinkParams::new(GBPS, PROPAGATION_NS),
            )
            .unwrap();
            h
        })
        .collect();
    // Teach the switch every host's address before traffic starts.
    for &h in &hosts {
        sim.hello(h, None).unwrap();
    }
    sim.run_until(Instant::from_micros(100)).unwrap();
    (sim, sw, hosts)
}

#[test]
fn one_frame_takes_two_wire_times_and_two_propagation_delays() {
    let (mut sim, _, h) = star(2);
    let mut spec = FlowSpec::new(h[0], h[1], 3, Priority::from_low_bits(3));
    spec.frames = Some(1);
    spec.start = Instant::from_micros(200);
    let f = sim.add_flow(spec).unwrap();
    let expected = Instant::from_micros(200)
        .saturating_add_nanos(2 * (wire_time_ns(1000, GBPS) + PROPAGATION_NS));
    sim.run_until(expected).unwrap();
    assert_eq!(sim.flow(f).delivered_frames, 1);
    assert_eq!(sim.flow(f).last_delivery, Some(expected));
    assert_eq!(sim.host(h[1]).stats().foreign_rx, 0);
}

#[test]
fn a_greedy_flow_runs_at_line_rate() {
    let (mut sim, _, h) = star(2);
    let start = Instant::from_millis(1);
    let mut spec = FlowSpec::new(h[0], h[1], 0, Priority::from_low_bits(0));
    spec.start = start;
    let f = sim.add_flow(spec).unwrap();
    sim.run_until(Instant::from_millis(11)).unwrap();
    // 10 ms at 1 Gb/s, 1024 wire bytes per 1000-byte frame: 1220.7 frames, minus the
    // pipeline (two wire times and two propagation delays).
    let frame_ns = wire_time_ns(1000, GBPS);
    let sent = sim.flow(f).sent_frames;
    assert_eq!(sent, 10_000_000 / frame_ns + 1);
    let delivered = sim.flow(f).delivered_frames;
    assert!(sent - delivered <= 2, "sent {sent} delivered {delivered}");
    assert_eq!(sim.flow(f).lost_frames, 0);
}

#[test]
fn lossless_incast_pauses_the_senders_and_loses_nothing() {
    let (mut sim, sw, h) = star(3);
    let start = Instant::from_millis(1);
    let flows: Vec<_> = [h[0], h[1]]
        .iter()
        .map(|&src| {
            let mut spec = FlowSpec::new(src, h[2], 3, Priority::from_low_bits(3));
            spec.start = start;
            sim.add_flow(spec).unwrap()
        })
        .collect();
    sim.run_until(Instant::from_millis(51)).unwrap();
    let frame_ns = wire_time_ns(1000, GBPS);
    let capacity = 50_000_000 / frame_ns;
    let mut total = 0;
    for &f in &flows {
        let s = sim.flow(f);
        assert_eq!(s.lost_frames, 0, "lossless");
        // Fair within 5 %.
        assert!(
            s.delivered_frames.abs_diff(capacity / 2) < capacity / 40,
            "{s:?}"
        );
        total += s.delivered_frames;
    }
    // The bottleneck stays busy.
    assert!(capacity - total < 30, "{total} of {capacity}");
    // The switch paused both senders on priority 3 and nothing else, and dropped nothing.
    for &src in &h[..2] {
        let stats = sim.host(src).stats();
        assert!(stats.pfc_rx[3] > 10, "{stats:?}");
        assert_eq!(stats.pfc_rx.iter().sum::<u64>(), stats.pfc_rx[3]);
    }
    for p in 0..3 {
        let c = sim
            .switch(sw)
            .ingress()
            .expect("both sides")
            .port_counters(PortId(p));
        assert_eq!(c.pg_drops.iter().map(|d| d.get()).sum::<u64>(), 0);
    }
    sim.switch(sw).check_invariants();
}

#[test]
fn lossy_incast_drops_and_sends_no_pfc() {
    let (mut sim, _, h) = star(3);
    let flows: Vec<_> = [h[0], h[1]]
        .iter()
        .map(|&src| {
            let mut spec = FlowSpec::new(src, h[2], 0, Priority::from_low_bits(0));
            spec.start = Instant::from_millis(1);
            sim.add_flow(spec).unwrap()
        })
        .collect();
    sim.run_until(Instant::from_millis(51)).unwrap();
    let lost: u64 = flows.iter().map(|&f| sim.flow(f).lost_frames).sum();
    assert!(lost > 1000, "lost {lost}");
    for &src in &h[..2] {
        assert_eq!(sim.host(src).stats().pfc_rx, [0; 8]);
    }
}

#[test]
fn paced_flows_keep_their_rate() {
    let (mut sim, _, h) = star(2);
    let mut spec = FlowSpec::new(h[0], h[1], 0, Priority::from_low_bits(0));
    spec.rate_bps = Some(GBPS / 4);
    spec.start = Instant::from_millis(1);
    let f = sim.add_flow(spec).unwrap();
    sim.run_until(Instant::from_millis(21)).unwrap();
    let frame_at_rate = wire_time_ns(1000, GBPS / 4);
    assert_eq!(sim.flow(f).sent_frames, 20_000_000 / frame_at_rate + 1);
}

fn fingerprint() -> Vec<u64> {
    let (mut sim, sw, h) = star(3);
    for (src, dscp) in [(0, 3), (1, 3), (1, 0)] {
        let mut spec = FlowSpec::new(h[src], h[2], dscp, Priority::from_low_bits(dscp));
        spec.start = Instant::from_micros(500 + 7 * src as u64);
        sim.add_flow(spec).unwrap();
    }
    sim.run_until(Instant::from_millis(20)).unwrap();
    let mut v: Vec<u64> = sim
        .flow_ids()
        .flat_map(|f| {
            let s = sim.flow(f);
            [s.sent_frames, s.delivered_frames, s.lost_frames]
        })
        .collect();
    v.push(sim.steps());
    v.push(
        sim.switch(sw)
            .egress()
            .expect("both sides")
            .port_counters(PortId(0))
            .pfc_frames_tx
            .get(),
    );
    v
}

#[test]
fn runs_are_deterministic() {
    assert_eq!(fingerprint(), fingerprint());
}

#[test]
fn bad_topologies_and_flows_are_refused() {
    let mut sim = Sim::new();
    let sw = sim.add_switch(presets::simple(2, GBPS)).unwrap();
    let a = sim.add_host(HostParams::numbered(1));
    let b = sim.add_host(HostParams::numbered(2));
    let port0 = Endpoint::Switch(sw, PortId(0));
    assert!(matches!(
        sim.connect(Endpoint::Host(a), port0, LinkParams::new(10 * GBPS, 0)),
        Err(SimError::RateMismatch { .. })
    ));
    sim.connect(Endpoint::Host(a), port0, LinkParams::new(GBPS, 0))
        .unwrap();
    assert_eq!(
        sim.connect(Endpoint::Host(b), port0, LinkParams::new(GBPS, 0)),
        Err(SimError::AlreadyConnected(port0))
    );
    assert_eq!(
        sim.connect(
            Endpoint::Host(b),
            Endpoint::Switch(sw, PortId(9)),
            LinkParams::new(GBPS, 0)
        ),
        Err(SimError::UnknownPort)
    );
    let mut spec = FlowSpec::new(a, b, 64, Priority::from_low_bits(0));
    assert!(matches!(
        sim.add_flow(spec.clone()),
        Err(SimError::InvalidFlow(_))
    ));
    spec.dscp = 0;
    spec.frame_len = 20;
    assert!(matches!(
        sim.add_flow(spec.clone()),
        Err(SimError::InvalidFlow(_))
    ));
    spec.frame_len = 100;
    spec.dst = HostId(7);
    assert_eq!(sim.add_flow(spec), Err(SimError::UnknownHost));
}

#[test]
fn the_step_budget_stops_a_run_loudly() {
    let mut sim = Sim::with_config(headroom_sim::SimConfig {
        max_steps: 50,
        ..Default::default()
    })
    .unwrap();
    let sw = sim.add_switch(presets::simple(2, GBPS)).unwrap();
    let a = sim.add_host(HostParams::numbered(1));
    let b = sim.add_host(HostParams::numbered(2));
    let link = LinkParams::new(GBPS, PROPAGATION_NS);
    sim.connect(Endpoint::Host(a), Endpoint::Switch(sw, PortId(0)), link)
        .unwrap();
    sim.connect(Endpoint::Host(b), Endpoint::Switch(sw, PortId(1)), link)
        .unwrap();
    // A flow without end: far more than 50 events before 100 ms.
    sim.add_flow(FlowSpec::new(a, b, 0, Priority::from_low_bits(0)))
        .unwrap();
    let err = sim.run_until(Instant::from_millis(100)).unwrap_err();
    assert!(
        matches!(err, SimError::StepLimit { steps: 50, .. }),
        "{err}"
    );
}

#[test]
fn an_idle_simulation_takes_no_step() {
    // The core names every deadline it has (`poll_timeout`), so nothing ticks: a switch with
    // nothing to do costs no step, however long the run.
    let (mut sim, _, _) = star(2);
    let steps = sim.steps();
    sim.run_until(Instant::from_millis(10_000)).unwrap();
    assert_eq!(sim.steps(), steps, "no event, no step");
    assert_eq!(sim.next_event_time(), Instant::MAX);
    assert!(matches!(sim.step(), Err(SimError::Idle { .. })));
}

#[test]
fn lldp_is_punted_not_relayed() {
    // IEEE 802.1Q Table 8-1: a bridge never relays 01-80-C2-00-00-0E (LLDP's address).
    let (mut sim, sw, h) = star(3);
    let before: Vec<_> = h.iter().map(|&x| sim.host(x).stats().other_rx).collect();
    let mut lldp = vec![0u8; 60];
    lldp[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0, 0, 0x0E]);
    lldp[6..12].copy_from_slice(&HostParams::numbered(1).mac);
    lldp[12..14].copy_from_slice(&0x88CCu16.to_be_bytes());
    sim.inject(h[0], HeapFrame::new(&lldp)).unwrap();
    sim.run_for(headroom_core::time::Duration::from_millis(1))
        .unwrap();
    assert_eq!(sim.punted_frames(sw), 1);
    for (i, &x) in h.iter().enumerate().skip(1) {
        assert_eq!(
            sim.host(x).stats().other_rx,
            before[i],
            "host {i} must not see the LLDP frame"
        );
    }
}
