//! `clear counters`: SONiC's clear-by-snapshot. Views read zero after a clear and exact deltas
//! after new traffic, the dataplane's own counters (and Prometheus) keep counting, and
//! counters are carried over a reconfiguration.

mod control_harness;

use control_harness::{config_text, pfc_frame, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{
    Change, Clear, PfcCounters, PgDropRow, PortSummary, QueueCounters, Request, Show, Snapshot,
};

fn queue(rows: &[QueueCounters], port: &str, q: u8) -> (u64, u64) {
    let r = rows
        .iter()
        .find(|r| r.port == port && r.queue == q)
        .unwrap();
    (r.packets, r.bytes)
}

/// `n` frames A → C with `dscp` and `len`, all delivered.
fn send(sw: &mut Switch, n: usize, dscp: u8, len: usize) {
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, dscp, 0, len));
    }
    assert_eq!(sw.collect(1, n).len(), n);
}

/// XON frames (quanta 0: counted, pause nothing) into Ethernet4 for `class_enable`.
fn xon(sw: &mut Switch, n: usize, class_enable: u8) {
    for _ in 0..n {
        sw.inject(1, &pfc_frame(C, class_enable, 0));
    }
}

fn wait_rx(sw: &mut Switch, port: usize, frames: u64) {
    sw.wait_for("frames to be counted", |sw| {
        let ports: Vec<PortSummary> = sw.show(Show::Ports);
        ports[port].rx_frames == frames
    });
}

#[test]
fn clear_gives_zeros_then_exact_deltas_and_survives_a_reconfiguration() {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    send(&mut sw, 5, 3, 500);
    xon(&mut sw, 2, 0b1000);
    wait_rx(&mut sw, 1, 3);
    let pfc: Vec<PfcCounters> = sw.show(Show::PfcCounters);
    assert_eq!(pfc[1].rx[3], 2);

    let r = sw.request(&Request::Clear {
        what: Clear::Counters,
    });
    assert!(r.ok);
    assert_eq!(r.data, "cleared");

    // Everything reads zero.
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    for p in &ports {
        assert_eq!(
            (p.rx_frames, p.rx_bytes, p.tx_frames, p.tx_bytes),
            (0, 0, 0, 0),
            "{}",
            p.port
        );
        assert!(p.drops.is_empty());
    }
    let pfc: Vec<PfcCounters> = sw.show(Show::PfcCounters);
    assert!(pfc
        .iter()
        .all(|p| p.rx == [0; 8] && p.tx == [0; 8] && p.pause_rx == 0));
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    assert!(queues
        .iter()
        .all(|q| q.packets == 0 && q.bytes == 0 && q.drop_packets == 0 && q.ecn_marked == 0));
    let drops: Vec<PgDropRow> = sw.show(Show::PgDrop);
    assert!(drops.iter().all(|r| r.drops == [0; 8]));
    let snap: Snapshot = sw.show(Show::Snapshot);
    assert!(snap.ports.iter().all(|p| p.rx_frames == 0));
    // The dataplane was not reset: the totals (what Prometheus exports) still count.
    assert_eq!(sw.control.total_stats(sw.running(), 0).rx_frames, 5);
    assert_eq!(sw.control.total_stats(sw.running(), 1).pfc_rx[3], 2);

    // New traffic: exact deltas.
    send(&mut sw, 3, 4, 300);
    xon(&mut sw, 1, 0b1_0000);
    wait_rx(&mut sw, 1, 1);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(
        (ports[0].rx_frames, ports[0].rx_bytes, ports[0].tx_frames),
        (3, 900, 0)
    );
    assert_eq!(
        (ports[1].rx_frames, ports[1].tx_frames, ports[1].tx_bytes),
        (1, 3, 900)
    );
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    assert_eq!(queue(&queues, "Ethernet4", 4), (3, 900));
    assert_eq!(queue(&queues, "Ethernet4", 3), (0, 0));
    let pfc: Vec<PfcCounters> = sw.show(Show::PfcCounters);
    assert_eq!(pfc[1].rx, [0, 0, 0, 0, 1, 0, 0, 0]);

    // A reconfiguration (drained restart on fresh ports): counters carry over, the clear
    // snapshot still applies.
    let r = sw.request(&Request::Set {
        change: Change::Key {
            key: "port.Ethernet0.pfc_quanta".into(),
            value: "4096".into(),
        },
    });
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(r.data, "applied");
    assert_eq!(sw.restarts, 1);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!((ports[0].rx_frames, ports[1].tx_frames), (3, 3));
    let pfc: Vec<PfcCounters> = sw.show(Show::PfcCounters);
    assert_eq!(pfc[1].rx, [0, 0, 0, 0, 1, 0, 0, 0]);

    // The new dataplane starts with an empty MAC table: C says hello again, then 2 frames.
    sw.learn_c();
    send(&mut sw, 2, 4, 300);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(
        (ports[0].rx_frames, ports[0].tx_frames, ports[0].tx_bytes),
        (5, 1, 64)
    );
    assert_eq!(
        (ports[1].rx_frames, ports[1].tx_frames, ports[1].tx_bytes),
        (2, 5, 1500)
    );
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    assert_eq!(queue(&queues, "Ethernet4", 4), (5, 1500));
    assert_eq!(sw.control.total_stats(sw.running(), 0).rx_frames, 10);
    // The queueing-delay histogram is carried over too (since start, like Prometheus'
    // _count): one delay per frame queue 4 of Ethernet4 ever sent.
    let snap: Snapshot = sw.show(Show::Snapshot);
    let h = snap
        .delay_histograms
        .iter()
        .find(|h| h.port == "Ethernet4" && h.queue == 4)
        .unwrap();
    assert_eq!(h.buckets.iter().sum::<u64>(), 5);
    assert_eq!(
        sw.control.port_totals(sw.running(), 1).delay.0[4].to_vec(),
        h.buckets
    );

    // Clearing again: zero again.
    assert!(
        sw.request(&Request::Clear {
            what: Clear::Counters
        })
        .ok
    );
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert!(ports.iter().all(|p| p.rx_frames == 0 && p.tx_frames == 0));
    sw.stop();
}
