//! Watermarks through the control socket: a backlog built behind a held port shows in the
//! queue and PG watermarks exactly, and the USER / PERSISTENT views clear as SONiC's do
//! (`sonic-buffer-model.md` §5.4).

mod control_harness;

use control_harness::{config_text, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{
    Change, Clear, PgWatermarkKind, PoolWatermarkRow, PortSummary, QueueWatermarkKind, Request,
    Show, Snapshot, WatermarkRow,
};

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

fn pg_used(sw: &mut Switch, port: usize, pg: usize) -> u64 {
    let snap: Snapshot = sw.show(Show::Snapshot);
    snap.pg_used[port].bytes[pg]
}

/// Injects `n` lossless frames A → C and waits until all are admitted (held in PG 3).
fn backlog(sw: &mut Switch, n: u64, bytes_each: u64) {
    let before = pg_used(sw, 0, 3);
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    }
    sw.wait_for("the backlog to be admitted", |sw| {
        pg_used(sw, 0, 3) == before + n * bytes_each
    });
}

/// The shared queue watermarks (SAI's, `show queue watermark`).
fn queue_marks(sw: &mut Switch, persistent: bool) -> Vec<WatermarkRow> {
    sw.show(Show::QueueWatermark {
        persistent,
        kind: QueueWatermarkKind::Shared,
    })
}

/// The total queue watermarks (`show queue watermark --total`).
fn queue_total_marks(sw: &mut Switch, persistent: bool) -> Vec<WatermarkRow> {
    sw.show(Show::QueueWatermark {
        persistent,
        kind: QueueWatermarkKind::Total,
    })
}

fn pg_marks(sw: &mut Switch, kind: PgWatermarkKind, persistent: bool) -> Vec<WatermarkRow> {
    sw.show(Show::PgWatermark { kind, persistent })
}

fn row(port: &str, index: usize, bytes: u64) -> WatermarkRow {
    let mut r = WatermarkRow {
        port: port.into(),
        bytes: [0; 8],
    };
    r.bytes[index] = bytes;
    r
}

fn zero(port: &str) -> WatermarkRow {
    row(port, 0, 0)
}

#[test]
fn backlog_shows_exactly_in_queue_pg_and_pool_watermarks_and_clears_by_view() {
    let mut sw = Switch::start(&config_text(""));
    let config = sw.control.config().clone();
    let cell = u64::from(config.switch.cell_size_bytes);
    let cells_each = (LEN as u64).div_ceil(cell);
    let bytes_each = cells_each * cell;
    // PG 3 of Ethernet0: its reserved buffer, then the shared pool; enough frames to spill
    // into the shared pool, few enough to stay under the XOFF point (no headroom use).
    let profile = &config.ports[0].priority_groups[3].profile;
    let reserved_cells = profile.size_bytes.div_ceil(cell);
    let n = reserved_cells.div_ceil(cells_each) + 20;
    let derived = headroom_config::derived(&config);
    let pg3 = &derived.ports[0].priority_groups[3];
    assert!(
        n * bytes_each < pg3.xoff_point_bytes.expect("PG 3 is lossless"),
        "test precondition: the backlog stays below XOFF"
    );
    let expected_queue = n * bytes_each;
    let expected_pg_shared = (n * cells_each - reserved_cells) * cell;

    // C's 64-byte hello (DSCP 0 → TC 1 → PG 0 on Ethernet4, queue 1 on Ethernet0): one cell
    // in the lossy PG (it reserves nothing, so the cell is shared) and one in the queue, within
    // the queue's reserved 9216 bytes (so none of it is shared: SAI's queue shared watermark
    // reads 0, the total one cell). Then both views restart.
    sw.learn_c();
    assert_eq!(config.ports[1].priority_groups[0].profile.size_bytes, 0);
    assert_eq!(config.ports[0].queues[1].profile.size_bytes, 9216);
    for persistent in [false, true] {
        assert_eq!(
            queue_marks(&mut sw, persistent),
            [zero("Ethernet0"), zero("Ethernet4")]
        );
        assert_eq!(
            queue_total_marks(&mut sw, persistent),
            [row("Ethernet0", 1, cell), zero("Ethernet4")]
        );
        assert_eq!(
            pg_marks(&mut sw, PgWatermarkKind::Shared, persistent),
            [zero("Ethernet0"), row("Ethernet4", 0, cell)]
        );
    }
    let r = sw.request(&Request::Clear {
        what: Clear::Watermarks { persistent: true },
    });
    assert!(r.ok);

    set_tx(&mut sw, "Ethernet4", false);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert!(!ports[1].tx_enabled && ports[0].tx_enabled);
    backlog(&mut sw, n, bytes_each);
    assert!(sw.drain(1).is_empty(), "a held port sends nothing");

    for persistent in [false, true] {
        // The lossless queue reserves nothing: all of its use is shared.
        assert_eq!(config.ports[1].queues[3].profile.size_bytes, 0);
        for marks in [
            queue_marks(&mut sw, persistent),
            queue_total_marks(&mut sw, persistent),
        ] {
            assert_eq!(
                marks,
                [zero("Ethernet0"), row("Ethernet4", 3, expected_queue)],
                "queue watermark, persistent={persistent}"
            );
        }
        assert_eq!(
            pg_marks(&mut sw, PgWatermarkKind::Shared, persistent),
            [row("Ethernet0", 3, expected_pg_shared), zero("Ethernet4")],
            "PG shared watermark, persistent={persistent}"
        );
        assert_eq!(
            pg_marks(&mut sw, PgWatermarkKind::Headroom, persistent),
            [zero("Ethernet0"), zero("Ethernet4")],
            "no headroom used below XOFF"
        );
        let pools: Vec<PoolWatermarkRow> = sw.show(Show::BufferPoolWatermark { persistent });
        let lossless = pools
            .iter()
            .find(|p| p.pool == profile_pool(&config, 0, 3))
            .expect("the lossless pool");
        assert_eq!(
            (lossless.shared_bytes, lossless.headroom_bytes),
            (expected_pg_shared, 0),
            "the PG is the only user of its pool's shared buffer"
        );
    }

    // sonic-clear queue watermark: the USER view restarts, the PERSISTENT one keeps its max.
    let r = sw.request(&Request::Clear {
        what: Clear::Watermarks { persistent: false },
    });
    assert!(r.ok);
    assert_eq!(
        queue_marks(&mut sw, false),
        [zero("Ethernet0"), zero("Ethernet4")]
    );
    assert_eq!(
        pg_marks(&mut sw, PgWatermarkKind::Shared, false),
        [zero("Ethernet0"), zero("Ethernet4")]
    );
    assert_eq!(
        queue_marks(&mut sw, true),
        [zero("Ethernet0"), row("Ethernet4", 3, expected_queue)]
    );

    // Drain, then a smaller backlog: the user view shows it, the persistent view keeps the
    // larger one.
    set_tx(&mut sw, "Ethernet4", true);
    assert_eq!(sw.collect(1, n as usize).len(), n as usize);
    sw.wait_for("PG 3 to drain", |sw| pg_used(sw, 0, 3) == 0);
    set_tx(&mut sw, "Ethernet4", false);
    backlog(&mut sw, 3, bytes_each);
    assert_eq!(
        queue_marks(&mut sw, false),
        [zero("Ethernet0"), row("Ethernet4", 3, 3 * bytes_each)]
    );
    assert_eq!(
        queue_marks(&mut sw, true),
        [zero("Ethernet0"), row("Ethernet4", 3, expected_queue)]
    );
    assert_eq!(
        pg_marks(&mut sw, PgWatermarkKind::Shared, false),
        [zero("Ethernet0"), zero("Ethernet4")],
        "3 frames fit the reserved buffer"
    );

    // Clearing the persistent view too: both restart; the next frame sets both.
    let r = sw.request(&Request::Clear {
        what: Clear::Watermarks { persistent: true },
    });
    assert!(r.ok);
    for persistent in [false, true] {
        assert_eq!(
            queue_marks(&mut sw, persistent),
            [zero("Ethernet0"), zero("Ethernet4")]
        );
    }
    backlog(&mut sw, 1, bytes_each);
    for persistent in [false, true] {
        assert_eq!(
            queue_marks(&mut sw, persistent),
            [zero("Ethernet0"), row("Ethernet4", 3, 4 * bytes_each)],
            "4 frames held now, persistent={persistent}"
        );
    }
    set_tx(&mut sw, "Ethernet4", true);
    assert_eq!(sw.collect(1, 4).len(), 4);
    sw.stop();
}

fn profile_pool(config: &headroom_config::Config, port: usize, pg: usize) -> String {
    let index = config.ports[port].priority_groups[pg].profile.pool_index;
    config.pools[index].name.clone()
}

/// The egress pool watermark (`show buffer_pool watermark` for `egress_lossless_pool`) should
/// show the same backlog from the egress side. The core does not record egress pool
/// watermarks yet (`IngressCounters::egress_pools` is never written), so this reads 0.
#[test]
fn backlog_shows_in_the_egress_pool_watermark() {
    let mut sw = Switch::start(&config_text(""));
    let config = sw.control.config().clone();
    let cell = u64::from(config.switch.cell_size_bytes);
    let bytes_each = (LEN as u64).div_ceil(cell) * cell;
    sw.learn_c();
    set_tx(&mut sw, "Ethernet4", false);
    backlog(&mut sw, 10, bytes_each);
    let pools: Vec<PoolWatermarkRow> = sw.show(Show::BufferPoolWatermark { persistent: false });
    let egress_pool = {
        let index = config.ports[1].queues[3].profile.pool_index;
        config.pools[index].name.clone()
    };
    let row = pools.iter().find(|p| p.pool == egress_pool).unwrap();
    // egress_lossless_profile reserves nothing: every byte is shared.
    assert_eq!(row.shared_bytes, 10 * bytes_each);
}
