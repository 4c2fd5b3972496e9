//! `show interfaces counters` (SONiC's portstat), `show priority-group counters` and the queue
//! watermark kinds through the control socket, on SAI's meanings: PFC frames are not `RX_OK`,
//! a lossy queue's drop is the egress port's `TX_DRP` and not the ingress port's `RX_DRP`, the
//! PG counters count every frame of the PG, the queue's shared watermark excludes its reserved
//! part; `clear counters` zeroes the views and they count exact deltas afterwards, across a
//! reconfiguration too.

mod control_harness;

use control_harness::{config_text, pfc_frame, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{
    Change, Clear, PgCountersRow, PortSummary, PortstatRow, QueueCounters, QueueWatermarkKind,
    Request, Show, WatermarkRow,
};

const LEN: usize = 1000;
/// Cells of a 1000-byte frame with 256-byte cells.
const BYTES_HELD: u64 = 1024;

/// A small lossy egress queue: α = 2^-7 of the free lossy pool above the default 9216 reserved
/// bytes, so that a held port's queue 1 refuses frames long before the ingress lossy PG would.
const SMALL_LOSSY_QUEUE: &str = "[buffer_profile.egress_lossy_profile]\n\
     pool = \"egress_lossy_pool\"\nsize = 9216\ndynamic_th = -7\n";

fn set_tx(sw: &mut Switch, port: &str, enable: bool) {
    let r = sw.request(&Request::Set {
        change: Change::PortTx {
            port: port.into(),
            enable,
        },
    });
    assert!(r.ok, "{:?}", r.error);
}

fn portstat(sw: &mut Switch) -> Vec<PortstatRow> {
    sw.show(Show::InterfacesCounters)
}

fn clear(sw: &mut Switch) {
    assert!(
        sw.request(&Request::Clear {
            what: Clear::Counters
        })
        .ok
    );
}

/// Sends `n` lossy frames (DSCP 0: TC 1, PG 0, queue 1) A → C into Ethernet0 and waits until
/// Ethernet0 counted them all.
fn lossy_burst(sw: &mut Switch, n: u64) {
    let before: Vec<PortSummary> = sw.show(Show::Ports);
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, 0, 0, LEN));
    }
    sw.wait_for("the burst to be received", |sw| {
        let ports: Vec<PortSummary> = sw.show(Show::Ports);
        ports[0].rx_frames == before[0].rx_frames + n
    });
}

#[test]
fn portstat_counts_as_sai_does_and_clears_by_snapshot() {
    let mut sw = Switch::start(&config_text(SMALL_LOSSY_QUEUE));
    sw.learn_c();
    // Ten XON frames into each port (pause nothing, counted as PFC, never RX_OK).
    for port in [0, 1] {
        for _ in 0..10 {
            sw.inject(port, &pfc_frame(C, 0b1000, 0));
        }
    }
    sw.wait_for("the PFC frames to be received", |sw| {
        let ports: Vec<PortSummary> = sw.show(Show::Ports);
        ports[0].rx_frames == 10 && ports[1].rx_frames == 11
    });
    let rows = portstat(&mut sw);
    assert_eq!(
        rows.iter().map(|r| r.iface.as_str()).collect::<Vec<_>>(),
        ["Ethernet0", "Ethernet4"]
    );
    assert_eq!(
        (rows[0].rx_ok, rows[0].rx_drp, rows[0].rx_err),
        (0, 0, 0),
        "PFC frames are neither RX_OK nor RX_DRP"
    );
    assert_eq!(
        (rows[1].rx_ok, rows[1].rx_drp),
        (1, 0),
        "C's hello is RX_OK"
    );
    assert_eq!(rows[0].tx_ok, 1, "the hello, flooded to Ethernet0");
    assert_eq!(rows[1].tx_ovr, None, "not counted: N/A");

    // Ethernet4 held: its small lossy queue 1 fills and refuses the rest.
    set_tx(&mut sw, "Ethernet4", false);
    let n = 60;
    lossy_burst(&mut sw, n);
    let queues: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    let q1 = queues
        .iter()
        .find(|q| q.port == "Ethernet4" && q.queue == 1)
        .unwrap();
    let refused = q1.drop_packets;
    assert!(refused > 0 && refused < n, "{refused} of {n} refused");
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert_eq!(
        ports[1].drops.get("egress_queue_limit").copied(),
        Some(refused),
        "charged to the egress port"
    );
    assert!(
        ports[0].drops.is_empty(),
        "nothing charged to the ingress port: {:?}",
        ports[0].drops
    );
    let rows = portstat(&mut sw);
    assert_eq!((rows[0].rx_ok, rows[0].rx_drp), (n, 0));
    assert_eq!(rows[1].tx_drp, refused, "TX_DRP of the egress port");
    assert_eq!(rows[0].tx_drp, 0);

    // The PG counters: every frame of the burst reached PG 0 of Ethernet0 and was admitted.
    let pgs: Vec<PgCountersRow> = sw.show(Show::PgCounters);
    assert_eq!(pgs[0].port, "Ethernet0");
    assert_eq!(pgs[0].packets[0], n);
    assert_eq!(pgs[0].bytes[0], n * LEN as u64);
    assert_eq!(pgs[0].drop_packets[0], 0, "the drops were the queue's");

    // The queue held (n − refused) frames: its total watermark is all of them, its shared
    // watermark what went beyond the 9216 reserved bytes.
    let held = (n - refused) * BYTES_HELD;
    let marks = |sw: &mut Switch, kind| -> Vec<WatermarkRow> {
        sw.show(Show::QueueWatermark {
            persistent: false,
            kind,
        })
    };
    assert_eq!(marks(&mut sw, QueueWatermarkKind::Total)[1].bytes[1], held);
    assert_eq!(
        marks(&mut sw, QueueWatermarkKind::Shared)[1].bytes[1],
        held - 9216
    );

    // `clear counters`: zeros; then exact deltas, carried over a reconfiguration too.
    clear(&mut sw);
    for r in portstat(&mut sw) {
        assert_eq!(
            (r.rx_ok, r.rx_err, r.rx_drp, r.rx_ovr, r.tx_ok, r.tx_err, r.tx_drp),
            (0, 0, 0, 0, 0, 0, 0),
            "{r:?}"
        );
    }
    let pgs: Vec<PgCountersRow> = sw.show(Show::PgCounters);
    assert!(pgs.iter().all(|r| r.packets == [0; 8] && r.bytes == [0; 8]));
    lossy_burst(&mut sw, 5);
    let rows = portstat(&mut sw);
    assert_eq!((rows[0].rx_ok, rows[1].tx_drp), (5, 5), "the queue is full");
    let r = sw.request(&Request::Set {
        change: Change::Key {
            key: "port.Ethernet0.pfc_quanta".into(),
            value: "4096".into(),
        },
    });
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(sw.restarts, 1);
    let rows = portstat(&mut sw);
    assert_eq!(
        (rows[0].rx_ok, rows[1].tx_drp),
        (5, 5),
        "carried over the reconfiguration"
    );
    // The new dataplane restarts with Ethernet4 held (the change was written into the running
    // configuration) and an empty queue: 5 more frames are all admitted.
    lossy_burst(&mut sw, 5);
    let rows = portstat(&mut sw);
    assert_eq!((rows[0].rx_ok, rows[1].tx_drp), (10, 5));
    set_tx(&mut sw, "Ethernet4", true);
    sw.stop();
}
