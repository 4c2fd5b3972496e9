//! What a reconfiguration (drained restart of the dataplane) must keep in the control plane:
//! watermarks (by pool name, even when pools are added or reordered), running captures, and
//! run-time changes to ports whose names contain dots.

mod control_harness;

use control_harness::{config_text, pfc_frame, start_capture, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{
    Change, PgWatermarkKind, PoolWatermarkRow, PortSummary, Request, Show, WatermarkRow,
};

fn set_key(sw: &mut Switch, key: &str, value: &str) {
    let r = sw.request(&Request::Set {
        change: Change::Key {
            key: key.into(),
            value: value.into(),
        },
    });
    assert!(r.ok, "set {key} = {value}: {:?}", r.error);
    assert_eq!(r.data, "applied");
}

fn pool_marks(sw: &mut Switch, persistent: bool) -> Vec<(String, u64)> {
    let rows: Vec<PoolWatermarkRow> = sw.show(Show::BufferPoolWatermark { persistent });
    rows.into_iter().map(|r| (r.pool, r.shared_bytes)).collect()
}

#[test]
fn watermarks_follow_pools_by_name_across_reconfigurations() {
    let mut sw = Switch::start(&config_text(""));
    let cell = u64::from(sw.control.config().switch.cell_size_bytes);
    // C's hello lands in PG 0 of Ethernet4 (ingress_lossy_profile reserves nothing): one cell
    // of ingress_lossy_pool's shared buffer. Not read before the restart: only the restart
    // itself can carry it over.
    sw.inject(1, &udp_frame(C, [0xff; 6], 0, 0, 64));
    assert_eq!(sw.collect(0, 1).len(), 1);

    // A new pool, sorted before the others: every pool index moves.
    set_key(
        &mut sw,
        "buffer_pool.a_extra_pool",
        "{ type = \"ingress\", mode = \"dynamic\", size = 1048576 }",
    );
    let names: Vec<String> = sw
        .control
        .config()
        .pools
        .iter()
        .map(|p| p.name.clone())
        .collect();
    assert_eq!(names[0], "a_extra_pool", "test precondition: indices moved");
    for persistent in [false, true] {
        let marks = pool_marks(&mut sw, persistent);
        assert_eq!(marks.len(), names.len());
        for (pool, bytes) in &marks {
            let expected = if pool == "ingress_lossy_pool" {
                cell
            } else {
                0
            };
            assert_eq!(*bytes, expected, "{pool}, persistent={persistent}");
        }
    }
    let pg: Vec<WatermarkRow> = sw.show(Show::PgWatermark {
        kind: PgWatermarkKind::Shared,
        persistent: true,
    });
    assert_eq!(pg[1].bytes[0], cell, "PG watermark carried over too");

    // The lossy profile moves to the new pool: ingress_lossy_pool is no longer used and leaves
    // the model; its watermark goes with it, the new pool starts from what it sees.
    set_key(
        &mut sw,
        "buffer_profile.ingress_lossy_profile",
        "{ pool = \"a_extra_pool\", size = 0, dynamic_th = 3 }",
    );
    sw.learn_c();
    let marks = pool_marks(&mut sw, true);
    assert!(marks.iter().all(|(p, _)| p != "ingress_lossy_pool"));
    assert_eq!(
        marks.iter().find(|(p, _)| p == "a_extra_pool").unwrap().1,
        cell
    );
    sw.stop();
}

#[test]
fn a_capture_keeps_running_across_a_reconfiguration() {
    let mut sw = Switch::start(&config_text(""));
    let client = start_capture(&mut sw, "Ethernet4");
    set_key(&mut sw, "port.Ethernet0.pfc_quanta", "4096");
    assert_eq!(sw.restarts, 1);
    let frames = [pfc_frame(C, 0b1000, 0x100), pfc_frame(C, 0b1000, 0)];
    for f in &frames {
        sw.inject(1, f);
    }
    // The new dataplane handles them before the control plane's next turn (no poll here): the
    // capture must already be on in the new dataplane, not set again at that turn.
    let end = std::time::Instant::now() + control_harness::DEADLINE;
    while sw.control.total_stats(sw.running(), 1).rx_frames < 2 {
        assert!(
            std::time::Instant::now() < end,
            "the frames were not received"
        );
        std::thread::yield_now();
    }
    let records = sw.serve_until(client);
    assert_eq!(records.len(), 2, "{records:?}");
    for (r, f) in records.iter().zip(&frames) {
        assert_eq!((r.port, r.transmitted, &r.data), (1, false, f));
    }
    sw.stop();
}

#[test]
fn port_changes_work_for_names_with_dots() {
    let text = config_text("")
        .replace("[port.Ethernet0]", "[port.\"Ethernet0.1\"]")
        .replace("[port.Ethernet4]", "[port.\"Ethernet4.1\"]");
    let mut sw = Switch::start(&text);
    let r = sw.request(&Request::Set {
        change: Change::PortTx {
            port: "Ethernet4.1".into(),
            enable: false,
        },
    });
    assert!(r.ok, "{:?}", r.error);
    // The running text stays a valid configuration: the next change is accepted, and the
    // port is still held after the restart it causes.
    set_key(&mut sw, "pfcwd.poll_interval", "100");
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(ports[1].port, "Ethernet4.1");
    assert!(!ports[1].tx_enabled);
    // And traffic is held there.
    sw.learn_c();
    sw.inject(0, &udp_frame(A, C, 3, 0, 100));
    sw.wait_for("the frame to be queued", |sw| {
        sw.control.total_stats(sw.running(), 0).rx_frames == 1
    });
    assert!(sw.drain(1).is_empty());
    sw.stop();
}
