//! Congestion seen through the control socket: the PFC frames the switch generates (counted
//! exactly and streamed by a control-only capture), ECN marks counted exactly, and a PFC storm
//! detected and restored by the watchdog.

mod control_harness;

use control_harness::{
    config_text, ecn_of, parse_pfc, pfc_frame, start_capture, udp_frame, Switch, A, C,
};
use headroom_runtime::protocol::{
    Change, Clear, PfcCounters, PfcwdStatsRow, QueueCounters, Request, Show, Snapshot,
};
use std::time::Duration;

const LEN: usize = 1000;

fn set_tx(sw: &mut Switch, port: &str, enable: bool) {
    let r = sw.request(&Request::Set {
        change: Change::PortTx {
            port: port.into(),
            enable,
        },
    });
    assert!(r.ok, "{:?}", r.error);
}

fn pfc_tx(sw: &mut Switch, port: usize) -> [u64; 8] {
    sw.show::<Vec<PfcCounters>>(Show::PfcCounters)[port].tx
}

/// Holds Ethernet4, sends enough lossless traffic into Ethernet0 to pass the XOFF point of
/// PG 3 (plus a few frames into headroom), checks the first PFC frame, releases Ethernet4 and
/// returns every frame Ethernet0 sent until its PFC counter settled after the XON.
fn congest_and_release(sw: &mut Switch) -> Vec<Vec<u8>> {
    let config = sw.control.config().clone();
    let cell = u64::from(config.switch.cell_size_bytes);
    let bytes_each = (LEN as u64).div_ceil(cell) * cell;
    let derived = headroom_config::derived(&config);
    let xoff_point = derived.ports[0].priority_groups[3]
        .xoff_point_bytes
        .unwrap();
    let headroom = derived.ports[0].priority_groups[3].headroom_bytes;
    set_tx(sw, "Ethernet4", false);
    let n = xoff_point.div_ceil(bytes_each) + 4;
    assert!(
        4 * bytes_each < headroom,
        "test precondition: the extra frames fit headroom"
    );
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    }
    let mut wire = sw.collect(0, 1);
    let (enable, quanta) = parse_pfc(&wire[0]).expect("a PFC frame out of Ethernet0");
    assert_eq!(enable, 0b1000, "priority 3 only");
    assert_eq!(quanta[3], config.ports[0].pfc_quanta);
    assert_eq!(&wire[0][6..12], &config.ports[0].mac, "from the port's MAC");
    assert_eq!(&wire[0][0..6], &[0x01, 0x80, 0xc2, 0, 0, 1]);

    // Release: everything drains, then XON.
    set_tx(sw, "Ethernet4", true);
    assert_eq!(sw.collect(1, n as usize).len(), n as usize);
    sw.wait_for("XON", |sw| {
        wire.extend(sw.drain(0));
        wire.iter()
            .any(|f| parse_pfc(f).is_some_and(|(_, q)| q[3] == 0))
    });
    // The counter equals what went out of the port (XOFF refreshes and the XON included).
    sw.wait_for("the PFC counter to settle", |sw| {
        wire.extend(sw.drain(0));
        pfc_tx(sw, 0)[3] == wire.len() as u64
    });
    wire
}

#[test]
fn generated_pfc_frames_are_counted_exactly() {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    let wire = congest_and_release(&mut sw);
    assert!(
        wire.iter().all(|f| parse_pfc(f).is_some()),
        "only PFC frames"
    );
    let last = parse_pfc(wire.last().unwrap()).unwrap();
    assert_eq!((last.0, last.1[3]), (0b1000, 0), "the last one is the XON");
    assert_eq!(pfc_tx(&mut sw, 0), [0, 0, 0, wire.len() as u64, 0, 0, 0, 0]);
    assert_eq!(pfc_tx(&mut sw, 1), [0; 8], "Ethernet4 never congested");
    let ports: Vec<headroom_runtime::protocol::PortSummary> = sw.show(Show::Ports);
    assert!(
        ports.iter().all(|p| p.drops.is_empty()),
        "lossless: no drop"
    );
    sw.stop();
}

#[test]
fn control_only_capture_streams_the_generated_pfc_frames() {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    let client = start_capture(&mut sw, "Ethernet0");
    let wire = congest_and_release(&mut sw);
    // The capture saw exactly the frames on the wire, as transmitted by Ethernet0.
    let records = sw.serve_until(client);
    assert_eq!(records.len(), wire.len());
    for (r, f) in records.iter().zip(&wire) {
        assert_eq!((r.port, r.transmitted), (0, true));
        assert_eq!(r.orig_len as usize, f.len());
        assert_eq!(&r.data, f);
    }
    sw.stop();
}

#[test]
fn control_only_capture_streams_received_mac_control_frames_only() {
    let mut sw = Switch::start(&config_text(""));
    let client = start_capture(&mut sw, "Ethernet4");
    // Data, PFC XOFF, a 802.3x PAUSE, data, then the XON that ends the client's read.
    let frames = [
        udp_frame(C, A, 3, 0, 200),
        pfc_frame(C, 0b1000, 0x1234),
        control_harness::pause_frame(C, 7),
        udp_frame(C, A, 0, 0, 100),
        pfc_frame(C, 0b1000, 0),
    ];
    for f in &frames {
        sw.inject(1, f);
    }
    let records = sw.serve_until(client);
    let expected = [&frames[1], &frames[2], &frames[4]];
    assert_eq!(records.len(), expected.len(), "{records:?}");
    for (r, f) in records.iter().zip(expected) {
        assert_eq!((r.port, r.transmitted), (1, false));
        assert_eq!(r.orig_len as usize, f.len());
        assert_eq!(&r.data, f);
    }
    sw.stop();
}

#[test]
fn ecn_marks_are_counted_exactly() {
    // Mark every ECN-capable frame that leaves queue 3 with more than 4096 bytes queued
    // (itself included): Kmin = Kmax = 4096, Pmax 100 %.
    let mut sw = Switch::start(&config_text(
        "[wred_profile.AZURE_LOSSLESS]\necn = \"ecn_all\"\ngreen_min_threshold = 4096\n\
         green_max_threshold = 4096\ngreen_drop_probability = 100\n",
    ));
    sw.learn_c();
    set_tx(&mut sw, "Ethernet4", false);
    // 4 not ECN-capable frames first (never marked), then 20 ECT(0) frames of 1024 bytes.
    for _ in 0..4 {
        sw.inject(0, &udp_frame(A, C, 3, 0b00, 1024));
    }
    for _ in 0..20 {
        sw.inject(0, &udp_frame(A, C, 3, 0b10, 1024));
    }
    sw.wait_for("the backlog", |sw| {
        let snap: Snapshot = sw.show(Show::Snapshot);
        snap.pg_used[0].bytes[3] == 24 * 1024
    });
    set_tx(&mut sw, "Ethernet4", true);
    let out = sw.collect(1, 24);
    // The k-th last ECT frame leaves with k × 1024 bytes queued: marked when k ≥ 5.
    let expected_marked = (1..=20u64).filter(|k| k * 1024 > 4096).count();
    assert_eq!(expected_marked, 16);
    assert!(
        out[..4].iter().all(|f| ecn_of(f) == 0b00),
        "not ECT: untouched"
    );
    assert_eq!(
        out.iter().filter(|f| ecn_of(f) == 0b11).count(),
        expected_marked
    );
    assert!(out[4..20].iter().all(|f| ecn_of(f) == 0b11));
    assert!(out[20..].iter().all(|f| ecn_of(f) == 0b10));
    let rows: Vec<QueueCounters> = sw.show(Show::Ecn);
    let q3 = rows
        .iter()
        .find(|r| r.port == "Ethernet4" && r.queue == 3)
        .unwrap();
    assert_eq!((q3.ecn_marked, q3.packets), (expected_marked as u64, 24));
    assert_eq!(
        rows.iter().map(|r| r.ecn_marked).sum::<u64>(),
        expected_marked as u64,
        "no mark elsewhere"
    );
    sw.stop();
}

#[test]
fn a_pfc_storm_is_detected_dropped_and_restored() {
    // Ethernet4 at 100M: one XOFF of 65535 quanta holds 335 ms, so the pause stays unbroken even
    // when this test thread or the lcore is descheduled for tens of ms on a loaded machine (at
    // 1G it held 33.5 ms, and a starved refresh started a new pause episode now and then).
    let text = config_text("").replacen(
        "device = \"m1\"\nspeed = \"10G\"",
        "device = \"m1\"\nspeed = \"100M\"",
        1,
    );
    let mut sw = Switch::start(&text);
    sw.learn_c();
    let started = std::time::SystemTime::now();
    // The peer of Ethernet4 pauses priority 3, then 5 frames wait in queue 3.
    sw.inject(1, &pfc_frame(C, 0b1000, 0xffff));
    for _ in 0..5 {
        sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    }
    let stats = |sw: &mut Switch| -> PfcwdStatsRow {
        let rows: Vec<PfcwdStatsRow> = sw.show(Show::PfcwdStats);
        rows.into_iter().find(|r| r.queue == "Ethernet4:3").unwrap()
    };
    // Keep refreshing the pause until the watchdog (200 ms detection, 200 ms poll) calls it.
    sw.wait_for("storm detection", |sw| {
        sw.inject(1, &pfc_frame(C, 0b1000, 0xffff));
        std::thread::sleep(Duration::from_millis(2));
        stats(sw).status == "stormed"
    });
    let stormed = stats(&mut sw);
    assert_eq!((stormed.storm_detected, stormed.storm_restored), (1, 0));
    // Logged with SONiC's sentence, at the wall-clock time of the detecting poll: after the
    // pause began (plus the detection time), before it was seen here.
    let watchdog = |sw: &Switch| -> Vec<headroom_runtime::event_log::EventLine> {
        sw.events
            .iter()
            .filter(|e| e.message.starts_with("PFC Watchdog"))
            .cloned()
            .collect()
    };
    sw.wait_for("the detection event", |sw| !watchdog(sw).is_empty());
    let seen = std::time::SystemTime::now();
    let first = watchdog(&sw);
    let detected = &first[0];
    assert_eq!(
        detected.message,
        "PFC Watchdog detected PFC storm on port Ethernet4, queue index 3, \
         queue id 0x1500000000000b and port id 0x1000000000001."
    );
    assert_eq!(detected.action, Some("drop"));
    assert!(
        detected.at >= started + Duration::from_millis(200) && detected.at <= seen,
        "{:?} not in [{started:?} + 200 ms, {seen:?}]",
        detected.at
    );
    let snap: Snapshot = sw.show(Show::Snapshot);
    assert!(snap
        .pfcwd
        .iter()
        .any(|r| r.queue == "Ethernet4:3" && r.status == "stormed"));
    // Action drop: what the queue held is dropped, nothing sent.
    sw.wait_for("the held frames to be dropped", |sw| {
        sw.inject(1, &pfc_frame(C, 0b1000, 0xffff));
        stats(sw).tx_drop == 5
    });
    assert!(sw.drain(1).is_empty());
    // The storm stops: restored after the restoration time.
    sw.wait_for("restoration", |sw| stats(sw).status == "operational");
    let restored = stats(&mut sw);
    assert_eq!((restored.storm_detected, restored.storm_restored), (1, 1));
    sw.wait_for("the restoration event", |sw| watchdog(sw).len() >= 2);
    let lines = watchdog(&sw);
    assert_eq!(
        lines[1].message,
        "PFC Watchdog storm restored on port Ethernet4, queue index 3, \
         queue id 0x1500000000000b and port id 0x1000000000001."
    );
    assert!(lines[1].at > lines[0].at);
    assert_eq!(
        (restored.tx_drop, restored.tx_last_drop),
        (5, 5),
        "the storm's drops, all of them in the last storm"
    );
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    let q3 = queues
        .iter()
        .find(|r| r.port == "Ethernet4" && r.queue == 3)
        .unwrap();
    assert_eq!((q3.packets, q3.drop_packets), (0, 5));
    // Traffic flows again.
    sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    assert_eq!(sw.collect(1, 1).len(), 1);

    // A reconfiguration (drained restart): the watchdog's statistics carry over, like every
    // counter, in the view and in the totals Prometheus exports.
    let r = sw.request(&Request::Set {
        change: Change::Key {
            key: "port.Ethernet0.pfc_quanta".into(),
            value: "4096".into(),
        },
    });
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(sw.restarts, 1);
    assert_eq!(stats(&mut sw), restored, "carried over the reconfiguration");
    let totals = sw.control.port_totals(sw.running(), 1).pfcwd[3];
    assert_eq!(
        (
            totals.detected,
            totals.restored,
            totals.tx_drop,
            totals.last[1]
        ),
        (1, 1, 5, 5)
    );

    // `clear counters` zeroes the view, the last storm included; the totals keep counting.
    assert!(
        sw.request(&Request::Clear {
            what: Clear::Counters
        })
        .ok
    );
    let cleared = stats(&mut sw);
    assert_eq!(
        (
            cleared.status.as_str(),
            cleared.storm_detected,
            cleared.storm_restored,
            cleared.tx_drop,
            cleared.tx_last_drop
        ),
        ("operational", 0, 0, 0, 0)
    );
    assert_eq!(sw.control.port_totals(sw.running(), 1).pfcwd[3].detected, 1);

    // A second storm on the new dataplane: exact deltas since the clear, 3 frames dropped.
    sw.learn_c();
    sw.inject(1, &pfc_frame(C, 0b1000, 0xffff));
    for _ in 0..3 {
        sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    }
    sw.wait_for("the second storm's drops", |sw| {
        sw.inject(1, &pfc_frame(C, 0b1000, 0xffff));
        std::thread::sleep(Duration::from_millis(2));
        let s = stats(sw);
        s.status == "stormed" && s.tx_drop == 3
    });
    let second = stats(&mut sw);
    assert_eq!(
        (
            second.storm_detected,
            second.storm_restored,
            second.tx_last_drop
        ),
        (1, 0, 3)
    );
    let totals = sw.control.port_totals(sw.running(), 1).pfcwd[3];
    assert_eq!((totals.detected, totals.tx_drop), (2, 8), "since start");
    sw.stop();
}
