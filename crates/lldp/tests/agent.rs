//! The agent driven through its public call order with virtual time.

use headroom_config::LldpAdminStatus;
use headroom_core::time::Instant;
use headroom_lldp::verdict::roce_priority;
use headroom_lldp::{
    build_frame, local_view, Agent, DcbxStatus, Event, Finding, LocalPort, LocalSystem,
    RemoveReason, RxError, Transmit, MAX_NEIGHBOURS_PER_PORT,
};
use headroom_wire::ethernet::MacAddress;
use headroom_wire::lldp::dcbx::{
    AppEntries, AppEntry, AppSelector, ApplicationPriority, PfcConfiguration, Tsa,
};
use headroom_wire::lldp::{
    parse_lldp_frame, ChassisId, ChassisIdSubtype, DcbxTlv, LldpduRepr, PortId, PortIdSubtype,
    TlvRepr, Tlvs, NEAREST_BRIDGE,
};
use proptest::prelude::*;

const SECOND: u64 = 1_000_000_000;

fn at(s: u64) -> Instant {
    Instant::from_nanos(s * SECOND)
}

fn config(extra: &str) -> headroom_config::Config {
    let text = format!(
        "[switch]\nname = \"leaf1\"\nmac = \"02:aa:00:00:00:00\"\n\
         [port.Ethernet0]\ndevice = \"sw-p0\"\nspeed = \"10G\"\n\
         [port.Ethernet4]\ndevice = \"sw-p1\"\nspeed = \"10G\"\n{extra}"
    );
    match headroom_config::parse(&text, "t.toml") {
        Ok((config, _)) => config,
        Err(errors) => panic!("{errors}"),
    }
}

fn agent(extra: &str) -> (Agent, LocalSystem, Vec<LocalPort>) {
    let config = config(extra);
    let (system, ports) = local_view(&config);
    (
        Agent::new(system.clone(), ports.clone(), at(0)),
        system,
        ports,
    )
}

/// Runs the agent second by second up to `until` (as a driver does, following poll_timeout) and
/// throws away what it sends.
fn run_until(agent: &mut Agent, until: u64) {
    for s in 0..=until {
        agent.handle_timeout(at(s));
        drain(agent);
    }
}

fn drain(agent: &mut Agent) -> (Vec<Transmit>, Vec<Event>) {
    let mut tx = Vec::new();
    while let Some(t) = agent.poll_transmit() {
        tx.push(t);
    }
    let mut events = Vec::new();
    while let Some(e) = agent.poll_event() {
        events.push(e);
    }
    (tx, events)
}

/// A host's LLDPDU as lldpad sends it (chassis and port = its MAC), with optional TLVs.
fn host_frame(mac: [u8; 6], ttl_s: u16, optional: &[TlvRepr<'_>]) -> Vec<u8> {
    let lldpdu = LldpduRepr {
        chassis_id: ChassisId {
            subtype: ChassisIdSubtype::MacAddress,
            id: &mac,
        },
        port_id: PortId {
            subtype: PortIdSubtype::MacAddress,
            id: &mac,
        },
        ttl_s,
        optional: Tlvs::Decoded(optional),
    };
    let mut frame = vec![0u8; lldpdu.frame_len()];
    lldpdu
        .emit_frame(MacAddress(mac), NEAREST_BRIDGE, &mut frame)
        .unwrap();
    frame
}

fn pfc(willing: bool, enable: u8) -> TlvRepr<'static> {
    TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(PfcConfiguration {
        willing,
        mbc: false,
        pfc_cap: 8,
        enable,
    }))
}

fn app(entries: &[AppEntry]) -> TlvRepr<'_> {
    TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(ApplicationPriority {
        entries: AppEntries::Decoded(entries),
    }))
}

const HOST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x0a];

#[test]
fn local_view_follows_the_configuration() {
    let config = config("");
    let (system, ports) = local_view(&config);
    assert_eq!(system.chassis_mac, [0x02, 0xaa, 0, 0, 0, 0]);
    assert_eq!(system.system_name, "leaf1");
    assert_eq!(system.ttl_s, 120);
    let p0 = &ports[0];
    assert_eq!(p0.name, "Ethernet0");
    assert_eq!(p0.description, "sw-p0");
    assert_eq!(p0.mac, [0x02, 0xaa, 0, 0, 0, 1]);
    let dcbx = &p0.dcbx;
    assert_eq!(dcbx.pfc.enable, 0b0001_1000, "pfc_enable 3,4");
    assert!(!dcbx.pfc.willing && !dcbx.ets.willing);
    assert_eq!(dcbx.pfc.pfc_cap, 8);
    assert_eq!(dcbx.ets.tables.priority_tc, [0, 1, 2, 3, 4, 5, 6, 7]);
    // AZURE schedulers: DWRR everywhere, weight 14 (lossy) and 15 (queues 3, 4).
    assert_eq!(dcbx.ets.tables.tsa, [Tsa::Ets; 8]);
    assert_eq!(
        dcbx.ets.tables.tc_bandwidth_percent,
        [13, 13, 12, 13, 13, 12, 12, 12]
    );
    assert_eq!(dcbx.ets_recommendation.tables, dcbx.ets.tables);
    // RoCE on the lowest lossless priority, then the DSCPs AZURE maps to lossless TCs (3 → 3,
    // 4 → 4); DSCP 26 → TC 1 and 46 → TC 5 are lossy and not advertised.
    assert_eq!(
        dcbx.app,
        [
            AppEntry::rocev2(3),
            AppEntry::dscp(3, 3),
            AppEntry::dscp(4, 4)
        ]
    );
}

#[test]
fn local_view_strict_scheduler_dot1p_trust_and_roce_priority() {
    let config = config(
        "[scheduler.sp]\ntype = \"STRICT\"\n[scheduler.w]\ntype = \"DWRR\"\nweight = 30\n\
         [port_defaults]\ntrust = \"dot1p\"\n\
         [port_defaults.queue.\"0-5\"]\nscheduler = \"w\"\n[port_defaults.queue.\"6-7\"]\nscheduler = \"sp\"\n\
         [lldp]\nroce_priority = 4\n",
    );
    let (_, ports) = local_view(&config);
    let dcbx = &ports[1].dcbx;
    assert_eq!(
        dcbx.ets.tables.tsa,
        [
            Tsa::Ets,
            Tsa::Ets,
            Tsa::Ets,
            Tsa::Ets,
            Tsa::Ets,
            Tsa::Ets,
            Tsa::Strict,
            Tsa::Strict
        ]
    );
    assert_eq!(
        dcbx.ets.tables.tc_bandwidth_percent,
        [17, 17, 17, 17, 16, 16, 0, 0]
    );
    assert_eq!(
        dcbx.app,
        vec![AppEntry::rocev2(4)],
        "no DSCP entries under dot1p trust"
    );
}

#[test]
fn first_frame_and_fast_start_then_interval() {
    let (mut agent, _, _) = agent("");
    let mut times = Vec::new();
    let mut now = 0;
    while now <= 70 {
        agent.handle_timeout(at(now));
        let (tx, _) = drain(&mut agent);
        for t in tx {
            if t.port == 0 {
                times.push(now);
            }
        }
        now += 1;
    }
    // The first LLDPDU, tx_fast_init (4) more a second apart, then every 30 s.
    assert_eq!(times, [0, 1, 2, 3, 4, 34, 64]);
    assert_eq!(agent.port(0).unwrap().counters.tx_frames_total, 7);
    assert_eq!(agent.poll_timeout(), Some(at(94)));
}

#[test]
fn no_fast_start_when_tx_fast_init_is_0() {
    let (mut agent, _, _) = agent("[lldp]\ntx_fast_init = 0\n");
    let mut times = Vec::new();
    for now in 0..=60 {
        agent.handle_timeout(at(now));
        let (tx, _) = drain(&mut agent);
        times.extend(tx.iter().filter(|t| t.port == 0).map(|_| now));
    }
    assert_eq!(times, [0, 30, 60]);
    // A new neighbour: one LLDPDU at once, no burst, and the interval starts again from there.
    agent.handle_rx(0, &host_frame(HOST, 120, &[]), at(61));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.iter().filter(|t| t.port == 0).count(), 1);
    for now in 62..=90 {
        agent.handle_timeout(at(now));
        let (tx, _) = drain(&mut agent);
        assert!(
            tx.iter().all(|t| t.port == 1),
            "port 0 is next due at 91, not {now}"
        );
    }
    agent.handle_timeout(at(91));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.iter().map(|t| t.port).collect::<Vec<_>>(), [0]);
}

#[test]
fn the_frame_carries_what_the_configuration_says() {
    let (mut agent, _, _) = agent("");
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.len(), 2, "one per port");
    let frame = parse_lldp_frame(&tx[1].frame).unwrap();
    assert_eq!(tx[1].port, 1);
    assert_eq!(frame.src_addr, MacAddress([0x02, 0xaa, 0, 0, 0, 2]));
    assert_eq!(frame.dst_addr, NEAREST_BRIDGE);
    let lldpdu = frame.lldpdu;
    assert_eq!(lldpdu.chassis_id.id, &[0x02, 0xaa, 0, 0, 0, 0]);
    assert_eq!(lldpdu.port_id.subtype, PortIdSubtype::InterfaceName);
    assert_eq!(lldpdu.port_id.id, b"Ethernet4");
    assert_eq!(lldpdu.ttl_s, 120);
    let tlvs: Vec<TlvRepr<'_>> = lldpdu.optional.iter().collect::<Result<_, _>>().unwrap();
    assert!(tlvs.contains(&TlvRepr::SystemName(b"leaf1")));
    assert!(tlvs.contains(&TlvRepr::PortDescription(b"sw-p1")));
    assert!(tlvs.contains(&pfc(false, 0x18)));
    let app = tlvs
        .iter()
        .find_map(|t| match t {
            TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(a)) => {
                Some(a.entries.iter().collect::<Vec<_>>())
            }
            _ => None,
        })
        .unwrap();
    assert_eq!(roce_priority(&app), Some(3));
    assert_eq!(app.len(), 3);
}

#[test]
fn neighbour_lifecycle_add_refresh_age() {
    let (mut agent, _, _) = agent("");
    agent.handle_timeout(at(100));
    drain(&mut agent);
    agent.handle_rx(
        0,
        &host_frame(HOST, 120, &[TlvRepr::SystemName(b"h1")]),
        at(100),
    );
    let (tx, events) = drain(&mut agent);
    assert!(
        matches!(&events[0], Event::NeighbourAdded { port: 0, neighbour } if neighbour.chassis_id.to_string() == "02:00:00:00:00:0a")
    );
    assert!(matches!(
        &events[1],
        Event::VerdictChanged { port: 0, verdict, .. } if verdict.status == DcbxStatus::NoDcbx
    ));
    // A new neighbour triggers fast transmission on that port.
    assert_eq!(tx.iter().filter(|t| t.port == 0).count(), 1);
    let view = agent.port(0).unwrap();
    assert_eq!(view.neighbours.len(), 1);
    assert_eq!(view.neighbours[0].info.system_name.as_deref(), Some("h1"));
    assert_eq!(view.neighbours[0].expires, at(220));
    assert!(agent.port(1).unwrap().neighbours.is_empty());

    // The same LLDPDU again: refreshed, no event.
    agent.handle_rx(
        0,
        &host_frame(HOST, 120, &[TlvRepr::SystemName(b"h1")]),
        at(200),
    );
    let (_, events) = drain(&mut agent);
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(agent.port(0).unwrap().neighbours[0].expires, at(320));
    // A different system name: changed.
    agent.handle_rx(
        0,
        &host_frame(HOST, 120, &[TlvRepr::SystemName(b"h2")]),
        at(201),
    );
    let (_, events) = drain(&mut agent);
    assert!(matches!(
        &events[..],
        [Event::NeighbourChanged { port: 0, .. }]
    ));

    // Not heard from for its TTL (120 s after the last LLDPDU at 201): aged out at 321.
    agent.handle_timeout(at(320));
    assert_eq!(agent.port(0).unwrap().neighbours.len(), 1);
    assert_eq!(agent.poll_timeout(), Some(at(321)));
    drain(&mut agent);
    agent.handle_timeout(at(321));
    let (_, events) = drain(&mut agent);
    assert!(
        matches!(
            &events[0],
            Event::NeighbourRemoved {
                port: 0,
                reason: RemoveReason::Aged,
                ..
            }
        ),
        "{events:?}"
    );
    let view = agent.port(0).unwrap();
    assert!(view.neighbours.is_empty());
    assert_eq!(view.counters.rx_ageouts_total, 1);
    assert_eq!(view.verdict.status, DcbxStatus::NoNeighbour);
}

#[test]
fn shutdown_lldpdu_removes_at_once() {
    let (mut agent, _, _) = agent("");
    agent.handle_rx(1, &host_frame(HOST, 120, &[]), at(1));
    drain(&mut agent);
    agent.handle_rx(1, &host_frame(HOST, 0, &[]), at(2));
    let (_, events) = drain(&mut agent);
    assert!(matches!(
        &events[0],
        Event::NeighbourRemoved {
            port: 1,
            reason: RemoveReason::Shutdown,
            ..
        }
    ));
    assert!(agent.port(1).unwrap().neighbours.is_empty());
    // A TTL-0 LLDPDU from an unknown neighbour adds nothing.
    agent.handle_rx(1, &host_frame([2, 0, 0, 0, 0, 0x0b], 0, &[]), at(3));
    assert!(agent.port(1).unwrap().neighbours.is_empty());
}

#[test]
fn malformed_frames_are_counted_by_reason_and_change_nothing() {
    let (mut agent, _, _) = agent("");
    agent.handle_rx(0, &host_frame(HOST, 120, &[pfc(true, 0x18)]), at(1));
    agent.handle_timeout(at(2));
    drain(&mut agent);
    let before = agent.port(0).unwrap().neighbours.to_vec();
    let good = host_frame([2, 0, 0, 0, 0, 0x0b], 120, &[]);

    let mut bad_tlv_length = good.clone();
    bad_tlv_length[15] = 0x01; // Chassis ID TLV of length 1: no room for an ID
    let truncated = good[..20].to_vec();
    let mut out_of_order = good.clone();
    out_of_order[14] = 0x04; // first TLV claims to be a Port ID
    let mut not_lldp = good.clone();
    not_lldp[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut duplicate = good[..14 + 9 + 9 + 4].to_vec();
    duplicate.extend_from_slice(&[0x06, 0x02, 0x00, 0x10, 0, 0]);
    duplicate.resize(60, 0);
    // An unknown OUI and a DCBX TLV with a bad length: the frame is good, the TLVs discarded or
    // carried.
    let mut odd_tlvs = good[..14 + 9 + 9 + 4].to_vec();
    odd_tlvs.extend_from_slice(&[0xFE, 0x05, 0x00, 0x80, 0xC2, 0x0B, 0x08]); // PFC, length 5
    odd_tlvs.extend_from_slice(&[0xFE, 0x06, 0xAC, 0xDE, 0x48, 0x01, 0x02, 0x03]); // unknown OUI
    odd_tlvs.extend_from_slice(&[0, 0]);
    odd_tlvs.resize(60, 0);

    for (frame, _) in [
        (&bad_tlv_length, "bad length"),
        (&truncated, "truncated"),
        (&out_of_order, "out of order"),
        (&not_lldp, "not lldp"),
        (&duplicate, "duplicate"),
    ] {
        agent.handle_rx(0, frame, at(2));
    }
    let (tx, events) = drain(&mut agent);
    assert!(events.is_empty(), "{events:?}");
    assert!(tx.is_empty(), "malformed frames trigger nothing: {tx:?}");
    let view = agent.port(0).unwrap();
    assert_eq!(view.neighbours, &before[..], "table unchanged");
    let c = view.counters;
    assert_eq!(c.rx_frames_total, 6);
    assert_eq!(c.rx_frames_discarded_total, 5);
    assert_eq!(c.rx_frames_errors_total(), 5);
    assert_eq!(c.rx_frames_errors_of(RxError::Truncated), 1, "{c:?}");
    assert_eq!(c.rx_frames_errors_of(RxError::BadLength), 1);
    assert_eq!(c.rx_frames_errors_of(RxError::MissingTlv), 1);
    assert_eq!(c.rx_frames_errors_of(RxError::NotLldp), 1);
    assert_eq!(c.rx_frames_errors_of(RxError::DuplicateTlv), 1);
    assert_eq!(
        view.verdict.status,
        DcbxStatus::Consistent,
        "still the good peer's verdict"
    );

    agent.handle_rx(0, &odd_tlvs, at(3));
    let view = agent.port(0).unwrap();
    assert_eq!(view.neighbours.len(), 2, "the frame itself is valid");
    assert_eq!(view.counters.rx_tlvs_discarded_total, 1);
    assert_eq!(view.counters.rx_tlvs_unrecognized_total, 1);
    assert_eq!(view.neighbours[1].info.dcbx.pfc, None);
}

#[test]
fn neighbour_table_is_bounded() {
    let (mut agent, _, _) = agent("");
    for i in 0..=MAX_NEIGHBOURS_PER_PORT as u8 {
        agent.handle_rx(0, &host_frame([2, 0, 0, 0, 1, i], 120, &[]), at(1));
    }
    let view = agent.port(0).unwrap();
    assert_eq!(view.neighbours.len(), MAX_NEIGHBOURS_PER_PORT);
    assert_eq!(view.counters.rx_frames_table_full_total, 1);
    assert_eq!(
        view.counters.neighbour_inserts_total,
        MAX_NEIGHBOURS_PER_PORT as u64
    );
}

#[test]
fn verdict_events_once_per_change() {
    let (mut agent, _, _) = agent("");
    drain(&mut agent);
    // An unwilling host pausing only priority 3 (we are lossless on 3 and 4), RoCE on 4... fine,
    // and on 5 next.
    let roce4 = [AppEntry::rocev2(4)];
    let frame = host_frame(HOST, 120, &[pfc(false, 0x08), app(&roce4)]);
    agent.handle_rx(0, &frame, at(1));
    let (_, events) = drain(&mut agent);
    let verdicts: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::VerdictChanged { verdict, .. } => Some(verdict.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(verdicts.len(), 1);
    assert_eq!(verdicts[0].status, DcbxStatus::Mismatch);
    assert_eq!(
        verdicts[0].findings,
        [
            Finding::PeerPfcOffLosslessPriorities { priorities: 0x10 },
            Finding::PeerNotWilling
        ]
    );
    for s in 2..10 {
        agent.handle_rx(0, &frame, at(s));
    }
    let (_, events) = drain(&mut agent);
    assert!(events.is_empty(), "same verdict, no event: {events:?}");

    let roce5 = [AppEntry::rocev2(5)];
    agent.handle_rx(
        0,
        &host_frame(HOST, 120, &[pfc(true, 0x18), app(&roce5)]),
        at(11),
    );
    let (_, events) = drain(&mut agent);
    let Some(Event::VerdictChanged {
        verdict, previous, ..
    }) = events.last()
    else {
        panic!("{events:?}")
    };
    assert_eq!(previous.status, DcbxStatus::Mismatch);
    assert_eq!(
        verdict.findings,
        [Finding::RoceOnLossyPriority { priority: 5 }]
    );

    agent.handle_rx(
        0,
        &host_frame(HOST, 120, &[pfc(true, 0x18), app(&roce4)]),
        at(12),
    );
    let (_, events) = drain(&mut agent);
    assert!(matches!(
        events.last(),
        Some(Event::VerdictChanged { verdict, .. }) if verdict.status == DcbxStatus::Consistent && verdict.findings.is_empty()
    ));
}

#[test]
fn local_change_sends_at_once_and_disabling_sends_shutdown() {
    let (mut agent, _, ports) = agent("");
    run_until(&mut agent, 100);
    let mut changed = ports[0].clone();
    changed.dcbx.pfc.enable = 0x08;
    agent.set_local_port(0, changed.clone(), at(101));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.len(), 1);
    let frame = parse_lldp_frame(&tx[0].frame).unwrap();
    assert!(frame
        .lldpdu
        .optional
        .iter()
        .any(|t| t == Ok(pfc(false, 0x08))));
    // The same view again: nothing.
    agent.set_local_port(0, changed.clone(), at(102));
    assert!(drain(&mut agent).0.is_empty());

    let mut off = changed;
    off.admin_status = LldpAdminStatus::RxOnly;
    agent.set_local_port(0, off, at(103));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.len(), 1);
    let frame = parse_lldp_frame(&tx[0].frame).unwrap();
    assert_eq!(frame.lldpdu.ttl_s, 0);
    assert_eq!(frame.lldpdu.optional.iter().count(), 0);
    agent.handle_timeout(at(1000));
    assert!(drain(&mut agent).0.iter().all(|t| t.port == 1));
}

#[test]
fn shutdown_sends_ttl_zero_and_stops() {
    let (mut agent, _, _) = agent("");
    drain(&mut agent);
    agent.shutdown(at(5));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.len(), 2);
    for t in &tx {
        assert_eq!(parse_lldp_frame(&t.frame).unwrap().lldpdu.ttl_s, 0);
    }
    assert_eq!(agent.poll_timeout(), None);
    agent.handle_timeout(at(100));
    agent.handle_rx(0, &host_frame(HOST, 120, &[]), at(100));
    assert!(drain(&mut agent).0.is_empty());
    assert!(agent.port(0).unwrap().neighbours.is_empty());
}

#[test]
fn disabled_port_neither_sends_nor_learns() {
    let (mut agent, _, _) = agent("[lldp]\nenabled = false\n");
    let (tx, _) = drain(&mut agent);
    assert!(tx.is_empty());
    agent.handle_rx(0, &host_frame(HOST, 120, &[]), at(1));
    let view = agent.port(0).unwrap();
    assert!(view.neighbours.is_empty());
    assert_eq!(view.counters.rx_frames_disabled_total, 1);
    assert_eq!(agent.poll_timeout(), None);
}

#[test]
fn build_frame_for_every_configured_port_fits() {
    let config = config("");
    let (system, ports) = local_view(&config);
    for port in &ports {
        let frame = build_frame(&system, port, system.ttl_s).unwrap();
        assert!(frame.len() >= 60 && frame.len() <= 1514, "{}", frame.len());
    }
}

// ---- properties --------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Rx {
        port: usize,
        host: u8,
        ttl: u16,
        enable: u8,
        roce: u8,
        corrupt: Option<(usize, u8)>,
    },
    Advance {
        seconds: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0usize..3,
            0u8..12,
            prop_oneof![Just(0u16), Just(120), 1u16..10],
            any::<u8>(),
            0u8..8,
            proptest::option::of((0usize..120, any::<u8>()))
        )
            .prop_map(|(port, host, ttl, enable, roce, corrupt)| Op::Rx {
                port,
                host,
                ttl,
                enable,
                roce,
                corrupt
            }),
        (0u64..200).prop_map(|seconds| Op::Advance { seconds }),
    ]
}

proptest! {
    /// Any sequence of frames (valid, corrupted, on unknown ports) and time steps: no panic, the
    /// table stays bounded and unexpired, every frame sent parses, and the verdict is always the
    /// pure function of the table.
    #[test]
    fn any_sequence_keeps_the_invariants(ops in proptest::collection::vec(op(), 1..60)) {
        let (mut agent, _, _) = agent("");
        let mut now = 0u64;
        for op in ops {
            match op {
                Op::Rx { port, host, ttl, enable, roce, corrupt } => {
                    let entries = [AppEntry { priority: roce, selector: AppSelector::UdpDccpPort, protocol: 4791 }];
                    let mut frame = host_frame([2, 0, 0, 0, 2, host], ttl, &[pfc(false, enable), app(&entries)]);
                    if let Some((i, v)) = corrupt {
                        let i = i % frame.len();
                        frame[i] = v;
                    }
                    agent.handle_rx(port, &frame, at(now));
                }
                Op::Advance { seconds } => {
                    now += seconds;
                    agent.handle_timeout(at(now));
                }
            }
            while let Some(t) = agent.poll_transmit() {
                prop_assert!(parse_lldp_frame(&t.frame).is_ok());
                prop_assert!(t.port < 2);
            }
            while agent.poll_event().is_some() {}
            for port in 0..agent.port_count() {
                let view = agent.port(port).unwrap();
                prop_assert!(view.neighbours.len() <= MAX_NEIGHBOURS_PER_PORT);
                for n in view.neighbours {
                    prop_assert!(n.expires > at(now));
                }
                let expected = headroom_lldp::evaluate(
                    &view.local.dcbx,
                    view.dcbx_neighbour().map(|n| &n.info.dcbx),
                );
                prop_assert_eq!(view.verdict, &expected);
            }
            // Both ports transmit, so a timer is always pending, and never in the past.
            let next = agent.poll_timeout();
            prop_assert!(next.is_some_and(|t| t > at(now)), "{next:?} at {now}");
        }
    }
}

#[test]
fn link_down_forgets_the_neighbours_and_link_up_sends_fast_at_once() {
    let (mut agent, _, _) = agent("");
    run_until(&mut agent, 100); // past the fast start: one LLDPDU per port every 30 s
    agent.handle_rx(0, &host_frame(HOST, 120, &[]), at(100));
    drain(&mut agent);
    // Half a second later (the neighbour's fast LLDPDUs are due on whole seconds).
    agent.set_link(0, false, Instant::from_nanos(100 * SECOND + SECOND / 2));
    let (tx, events) = drain(&mut agent);
    assert!(
        tx.is_empty(),
        "nothing is sent on a link that went down: {tx:?}"
    );
    assert!(
        matches!(
            &events[..],
            [
                Event::NeighbourRemoved {
                    port: 0,
                    reason: RemoveReason::LinkDown,
                    ..
                },
                Event::VerdictChanged { port: 0, .. }
            ]
        ),
        "{events:?}"
    );
    let view = agent.port(0).unwrap();
    assert!(view.neighbours.is_empty());
    assert_eq!(view.counters.neighbour_deletes_total, 1);
    assert_eq!(view.verdict.status, DcbxStatus::NoNeighbour);
    // While down, the other port keeps its 30 s rhythm and port 0 sends nothing.
    let mut sent = [0usize; 2];
    for s in 102..=200 {
        agent.handle_timeout(at(s));
        for t in drain(&mut agent).0 {
            sent[t.port] += 1;
        }
    }
    assert_eq!(sent[0], 0);
    assert!((3..=4).contains(&sent[1]), "{sent:?}");
    // Up: an LLDPDU at once, then tx_fast_init (4) more a second apart.
    agent.set_link(0, true, at(201));
    let (tx, _) = drain(&mut agent);
    assert_eq!(tx.len(), 1);
    assert_eq!(tx[0].port, 0);
    let mut fast = Vec::new();
    for s in 202..=206 {
        agent.handle_timeout(at(s));
        fast.extend(
            drain(&mut agent)
                .0
                .into_iter()
                .filter(|t| t.port == 0)
                .map(|_| s),
        );
    }
    assert_eq!(fast, [202, 203, 204, 205]);
    // Unchanged state: nothing happens.
    agent.set_link(0, true, at(207));
    assert!(drain(&mut agent).0.is_empty());
}
