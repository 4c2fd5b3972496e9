//! Every `show` of the control socket against counters known from the traffic sent through an
//! in-process switch on memory ports.

mod control_harness;

use control_harness::{config_text, pause_frame, pfc_frame, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{
    FdbRow, PfcCounters, PfcPriority, PfcwdConfig, PfcwdStatsRow, PgDropRow, PortSummary,
    QueueCounters, Request, RunningConfig, Show, Snapshot, WatermarkRow,
};
use std::os::unix::fs::PermissionsExt;

/// Frames sent A → C per (DSCP, length, count). AZURE maps: DSCP 3 → TC/queue 3, DSCP 4 →
/// 4, DSCP 46 → 5.
const TRAFFIC: [(u8, usize, u64); 3] = [(3, 1000, 10), (4, 200, 5), (46, 300, 1)];

fn queue<'a>(rows: &'a [QueueCounters], port: &str, q: u8) -> &'a QueueCounters {
    rows.iter()
        .find(|r| r.port == port && r.queue == q)
        .unwrap_or_else(|| panic!("no row {port}:{q}"))
}

#[test]
fn socket_is_private() {
    let sw = Switch::start(&config_text(""));
    let mode = std::fs::metadata(&sw.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");
    assert!(std::os::unix::fs::FileTypeExt::is_socket(
        &std::fs::metadata(&sw.socket).unwrap().file_type()
    ));
}

#[test]
fn a_second_switch_cannot_take_a_live_socket() {
    let sw = Switch::start(&config_text(""));
    let text = std::fs::read_to_string(&sw.config_path).unwrap();
    let (config, _) = headroom_config::parse(&text, "again.toml").unwrap();
    let err = headroom_runtime::control::ControlPlane::bind(&sw.config_path, text, config)
        .expect_err("the socket is in use");
    assert_eq!(err.kind(), std::io::ErrorKind::AddrInUse);
    assert!(sw.socket.exists(), "the live socket is left alone");
}

#[test]
fn bad_requests_are_answered_not_fatal() {
    let mut sw = Switch::start(&config_text(""));
    let r = sw.request_line("{\"request\":\"show\",\"what\":\"nonsense\"}");
    assert!(!r.ok);
    assert!(r.error.unwrap().starts_with("bad request: "));
    let r = sw.request_line("not json at all");
    assert!(!r.ok);
    let r = sw.request(&Request::Set {
        change: headroom_runtime::protocol::Change::PortTx {
            port: "Ethernet99".into(),
            enable: false,
        },
    });
    assert_eq!(r.error.as_deref(), Some("no port named Ethernet99"));
    // Still serving.
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(ports.len(), 2);
}

#[test]
fn show_commands_report_the_traffic_sent() {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    let mut sent = 0;
    for (dscp, len, n) in TRAFFIC {
        for _ in 0..n {
            sw.inject(0, &udp_frame(A, C, dscp, 0, len));
            sent += 1;
        }
    }
    assert_eq!(sw.collect(1, sent).len(), sent);
    // Into Ethernet4 from its peer: PFC XOFF for 3 (×3), XOFF for 3 and 4 (×2), one frame for
    // priority 0 (not PFC-enabled: still counted, SONiC's rule), one 802.3x PAUSE (counted
    // in no PFC counter).
    for _ in 0..3 {
        sw.inject(1, &pfc_frame(C, 0b0000_1000, 0xffff));
    }
    for _ in 0..2 {
        sw.inject(1, &pfc_frame(C, 0b0001_1000, 0xffff));
    }
    sw.inject(1, &pfc_frame(C, 0b0000_0001, 0));
    sw.inject(1, &pause_frame(C, 0xffff));
    let rx_bytes_sent: u64 = TRAFFIC.iter().map(|(_, len, n)| *len as u64 * n).sum();
    let rx_frames_sent: u64 = TRAFFIC.iter().map(|(_, _, n)| n).sum();
    sw.wait_for("the MAC Control frames to be counted", |sw| {
        let ports: Vec<PortSummary> = sw.show(Show::Ports);
        ports[1].rx_frames == 1 + 7
    });

    // show ports
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(
        ports[0],
        PortSummary {
            port: "Ethernet0".into(),
            device: "m0".into(),
            speed_mbps: 10_000,
            link: "up".into(),
            tx_enabled: true,
            rx_frames: rx_frames_sent,
            rx_bytes: rx_bytes_sent,
            // C's hello, flooded.
            tx_frames: 1,
            tx_bytes: 64,
            ..PortSummary::default()
        }
    );
    assert_eq!(
        ports[1],
        PortSummary {
            port: "Ethernet4".into(),
            device: "m1".into(),
            speed_mbps: 10_000,
            link: "up".into(),
            tx_enabled: true,
            rx_frames: 8,
            rx_bytes: 64 + 7 * 60,
            tx_frames: rx_frames_sent,
            tx_bytes: rx_bytes_sent,
            // The 802.3x PAUSE among them, ignored (pause_802_3x is off).
            pause_rx_ignored: 1,
            ..PortSummary::default()
        }
    );

    // show pfc counters
    let pfc: Vec<PfcCounters> = sw.show(Show::PfcCounters);
    assert_eq!(pfc[0].rx, [0; 8]);
    assert_eq!(pfc[0].tx, [0; 8]);
    assert_eq!(pfc[0].rx_paused_us, [0; 8]);
    assert_eq!(pfc[1].port, "Ethernet4");
    assert_eq!(pfc[1].rx, [1, 0, 0, 5, 2, 0, 0, 0]);
    assert_eq!(pfc[1].tx, [0; 8]);
    assert_eq!(pfc[1].pause_rx, 1);
    // Priorities 3 and 4 were held (PFC-enabled); the others never.
    assert!(pfc[1].rx_paused_us[3] > 0 && pfc[1].rx_paused_us[4] > 0);
    for p in [0, 1, 2, 5, 6, 7] {
        assert_eq!(pfc[1].rx_paused_us[p], 0, "priority {p}");
    }

    // show queue counters / show ecn (the same rows)
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    assert_eq!(queues.len(), 16);
    for (dscp, len, n) in TRAFFIC {
        let q = match dscp {
            3 => 3,
            4 => 4,
            _ => 5,
        };
        let row = queue(&queues, "Ethernet4", q);
        assert_eq!((row.packets, row.bytes), (n, n * len as u64), "UC{q}");
        assert_eq!(
            (row.drop_packets, row.drop_bytes, row.ecn_marked),
            (0, 0, 0)
        );
        assert_eq!(row.depth_bytes, 0, "empty after sending");
    }
    let hello = queue(&queues, "Ethernet0", 1);
    assert_eq!((hello.packets, hello.bytes), (1, 64), "DSCP 0 → TC 1");
    let busy: u64 = queues.iter().map(|r| r.packets).sum();
    assert_eq!(busy, rx_frames_sent + 1, "no frame elsewhere");
    let ecn: Vec<QueueCounters> = sw.show(Show::Ecn);
    assert_eq!(
        ecn.iter()
            .map(|r| (r.packets, r.ecn_marked))
            .collect::<Vec<_>>(),
        queues
            .iter()
            .map(|r| (r.packets, r.ecn_marked))
            .collect::<Vec<_>>()
    );

    // show priority-group drop
    let drops: Vec<PgDropRow> = sw.show(Show::PgDrop);
    assert!(drops.iter().all(|r| r.drops == [0; 8]));

    // show fdb
    let fdb: Vec<FdbRow> = sw.show(Show::Fdb);
    let entries: Vec<(u16, &str, &str)> = fdb
        .iter()
        .map(|r| (r.vlan, r.mac.as_str(), r.port.as_str()))
        .collect();
    assert_eq!(
        entries,
        [
            (1, "02:00:00:00:00:0a", "Ethernet0"),
            (1, "02:00:00:00:00:0c", "Ethernet4")
        ]
    );
    assert!(fdb.iter().all(|r| r.age_s < 60));

    // show pfc priority, pfcwd config and stats
    let prio: Vec<PfcPriority> = sw.show(Show::PfcPriority);
    assert_eq!(
        prio.iter().map(|p| p.lossless.as_str()).collect::<Vec<_>>(),
        ["3,4", "3,4"]
    );
    let wd: PfcwdConfig = sw.show(Show::PfcwdConfig);
    assert_eq!((wd.poll_interval_ms, wd.big_red_switch), (200, false));
    for row in &wd.ports {
        assert_eq!(
            (
                row.action.as_str(),
                row.detection_time_ms,
                row.restoration_time_ms,
                row.priorities.as_str()
            ),
            ("drop", 200, 200, "3,4")
        );
    }
    let stats: Vec<PfcwdStatsRow> = sw.show(Show::PfcwdStats);
    assert_eq!(
        stats.iter().map(|r| r.queue.as_str()).collect::<Vec<_>>(),
        ["Ethernet0:3", "Ethernet0:4", "Ethernet4:3", "Ethernet4:4"]
    );
    assert!(stats
        .iter()
        .all(|r| r.status == "operational" && r.storm_detected == 0));

    // show config
    let config: RunningConfig = sw.show(Show::Config);
    assert_eq!(
        config.text,
        std::fs::read_to_string(&sw.config_path).unwrap()
    );
    assert_eq!(config.file, sw.config_path.display().to_string());
    assert!(config.derived.contains("pg_lossless_10000_5m_profile"));

    // show snapshot agrees with the single views.
    let snap: Snapshot = sw.show(Show::Snapshot);
    assert_eq!(snap.ports, sw.show::<Vec<PortSummary>>(Show::Ports));
    assert_eq!(
        snap.pfc.iter().map(|p| (p.rx, p.tx)).collect::<Vec<_>>(),
        pfc.iter().map(|p| (p.rx, p.tx)).collect::<Vec<_>>()
    );
    assert_eq!(
        snap.queues,
        sw.show::<Vec<QueueCounters>>(Show::QueueCounters)
    );
    assert_eq!(
        snap.pg_used,
        vec![
            WatermarkRow {
                port: "Ethernet0".into(),
                bytes: [0; 8]
            },
            WatermarkRow {
                port: "Ethernet4".into(),
                bytes: [0; 8]
            }
        ]
    );
    assert_eq!(snap.pfcwd, stats);
    let delays = snap
        .delay_histograms
        .iter()
        .find(|h| h.port == "Ethernet4" && h.queue == 3)
        .unwrap();
    assert_eq!(
        delays.buckets.iter().sum::<u64>(),
        10,
        "one delay per frame sent"
    );
    assert!(snap.uptime_s > 0.0);
    sw.stop();
}
