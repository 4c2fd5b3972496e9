use super::*;
use crate::params::presets::{self, INGRESS_POOL};
use crate::params::{PoolParams, SwitchParams};
use proptest::prelude::*;

fn ingress(params: &SwitchParams) -> IngressBuffers {
    IngressBuffers::new(params, PoolBoard::new(1, params.pools.len()), 0).unwrap()
}

/// Cells of the preset's lossless PG profile, computed from the parameters.
fn lossless_cells(params: &SwitchParams) -> (u64, u64, u64) {
    let pg = params.ports[0].pgs[3];
    let Threshold::Static { bytes } = pg.threshold else {
        panic!("preset uses a static threshold")
    };
    (
        params.cells(pg.reserved_bytes),
        params.cells(bytes),
        params.cells(pg.xoff_bytes),
    )
}

#[test]
fn static_lossless_pg_fills_reserved_shared_then_headroom_then_drops() {
    let params = presets::simple(2, 1_000_000_000);
    let (reserved, shared_limit, headroom) = lossless_cells(&params);
    let mut buf = ingress(&params);
    let frame_cells = 4; // a 1024-byte frame
                         // XOFF is asserted by the frame that makes shared use reach the limit.
    let xoff_frame = (reserved + shared_limit).div_ceil(frame_cells);
    let mut n = 0;
    loop {
        n += 1;
        buf.admit(0, 3, frame_cells).unwrap();
        let t = buf.update_xoff(0, 3);
        if n < xoff_frame {
            assert_eq!(t, None, "no XOFF before frame {xoff_frame} (frame {n})");
        } else {
            assert_eq!(t, Some(PgTransition::Xoff));
            break;
        }
    }
    assert_eq!(buf.pg(0, 3).headroom_used, 0);
    // Headroom absorbs exactly xoff worth of frames, then the PG drops.
    for i in 0..headroom / frame_cells {
        buf.admit(0, 3, frame_cells)
            .unwrap_or_else(|e| panic!("headroom frame {i}: {e:?}"));
        assert_eq!(buf.update_xoff(0, 3), None);
    }
    assert_eq!(buf.pg(0, 3).headroom_used, headroom);
    assert_eq!(
        buf.admit(0, 3, frame_cells),
        Err(DropReason::IngressHeadroomExhausted)
    );
    buf.check_invariants();
    // The other lossless PG and other ports are untouched.
    assert_eq!(buf.pg(0, 4).total(), 0);
    assert_eq!(buf.pg(1, 3).total(), 0);
}

#[test]
fn release_takes_headroom_first_and_xon_at_the_xon_point() {
    let params = presets::simple(1, 1_000_000_000);
    let (reserved, shared_limit, headroom) = lossless_cells(&params);
    let xon = params.cells(params.ports[0].pgs[3].xon_bytes);
    let mut buf = ingress(&params);
    let total = reserved + shared_limit + headroom;
    for _ in 0..total {
        buf.admit(0, 3, 1).unwrap();
        buf.update_xoff(0, 3);
    }
    assert!(buf.pg(0, 3).xoff);
    buf.release(0, 3, headroom);
    assert_eq!(buf.pg(0, 3).headroom_used, 0);
    assert_eq!(buf.pg(0, 3).shared_used, shared_limit);
    // Still XOFF: shared use is at the limit.
    assert_eq!(buf.update_xoff(0, 3), None);
    // Drain one cell at a time; XON exactly when total use reaches xon (xon_offset unset).
    let mut left = reserved + shared_limit;
    while left > xon + 1 {
        buf.release(0, 3, 1);
        left -= 1;
        assert_eq!(buf.update_xoff(0, 3), None, "XON too early at {left} cells");
    }
    buf.release(0, 3, 1);
    assert_eq!(buf.update_xoff(0, 3), Some(PgTransition::Xon));
    assert_eq!(buf.pg(0, 3).total(), xon);
    buf.release(0, 3, xon);
    assert!(buf.is_empty());
    buf.check_invariants();
}

#[test]
fn xon_offset_sets_hysteresis_below_the_xoff_point() {
    let mut params = presets::simple(1, 1_000_000_000);
    params.ports[0].pgs[3].xon_offset_bytes = 16 * 256;
    let (reserved, shared_limit, _) = lossless_cells(&params);
    let mut buf = ingress(&params);
    for _ in 0..reserved + shared_limit {
        buf.admit(0, 3, 1).unwrap();
        buf.update_xoff(0, 3);
    }
    assert!(buf.pg(0, 3).xoff);
    // XON at max(xon, xoff_point - xon_offset) = xoff_point - 16.
    buf.release(0, 3, 15);
    assert_eq!(buf.update_xoff(0, 3), None);
    buf.release(0, 3, 1);
    assert_eq!(buf.update_xoff(0, 3), Some(PgTransition::Xon));
}

#[test]
fn dynamic_threshold_xoff_at_alpha_over_one_plus_alpha_of_the_pool() {
    for exponent in [-2i8, 0, 1, 3] {
        let mut params = presets::simple(1, 1_000_000_000);
        params.ports[0].pgs[3].threshold = Threshold::Dynamic { exponent };
        let mut buf = ingress(&params);
        let shared_size = buf.pool(INGRESS_POOL.index()).shared_size;
        let reserved = params.cells(params.ports[0].pgs[3].reserved_bytes);
        // Predicted: with only this PG using the pool, XOFF when s >= α (F - s).
        let limit = |s: u64| ThresholdCells::Dynamic(exponent).limit(shared_size - s);
        let mut s = 0u64;
        let mut predicted_cells = reserved;
        while s < limit(s) {
            s += 1;
            predicted_cells += 1;
        }
        let mut admitted = 0;
        loop {
            buf.admit(0, 3, 1).unwrap();
            admitted += 1;
            if buf.update_xoff(0, 3) == Some(PgTransition::Xoff) {
                break;
            }
            assert!(
                admitted < predicted_cells,
                "exponent {exponent}: no XOFF by {admitted} cells"
            );
        }
        assert_eq!(admitted, predicted_cells, "exponent {exponent}");
        // Sanity against the closed form α/(1+α) F (SONiC's tests), within a cell.
        let alpha = 2f64.powi(i32::from(exponent));
        let closed = alpha / (1.0 + alpha) * shared_size as f64;
        assert!(
            (s as f64 - closed).abs() <= 1.0,
            "exponent {exponent}: {s} vs {closed}"
        );
    }
}

#[test]
fn dynamic_limit_shrinks_when_other_pgs_fill_the_pool() {
    let mut params = presets::simple(2, 1_000_000_000);
    for p in &mut params.ports {
        p.pgs[3].threshold = Threshold::Dynamic { exponent: 0 };
    }
    let mut buf = ingress(&params);
    let reserved = params.cells(params.ports[0].pgs[3].reserved_bytes);
    // Port 0 PG3 takes a third of the shared pool, below its own limit.
    let third = buf.pool(INGRESS_POOL.index()).shared_size / 3;
    for _ in 0..reserved + third {
        buf.admit(0, 3, 1).unwrap();
    }
    assert_eq!(buf.update_xoff(0, 3), None);
    // Port 1 PG3 fills until its own XOFF: the pool's free space shrinks, and with it port 0's
    // limit, so port 0 goes XOFF without receiving anything more.
    let mut guard = 0;
    while buf.update_xoff(1, 3) != Some(PgTransition::Xoff) {
        buf.admit(1, 3, 1).unwrap();
        guard += 1;
        assert!(guard < 1 << 20);
    }
    assert_eq!(buf.update_xoff(0, 3), Some(PgTransition::Xoff));
    buf.check_invariants();
}

#[test]
fn shared_headroom_pool_caps_the_sum_over_pgs() {
    let mut params = presets::simple(3, 1_000_000_000);
    let shp_cells = 40u64;
    params.pools[INGRESS_POOL.index()].shared_headroom_bytes = shp_cells * 256;
    let (reserved, shared_limit, per_pg_headroom) = lossless_cells(&params);
    assert!(
        per_pg_headroom > shp_cells / 2,
        "the test needs a per-PG cap above the SHP share"
    );
    let mut buf = ingress(&params);
    for port in 0..3 {
        for _ in 0..reserved + shared_limit {
            buf.admit(port, 3, 1).unwrap();
        }
    }
    // Port 0 takes 30 cells of headroom, port 1 the remaining 10, then everyone is refused.
    for _ in 0..30 {
        buf.admit(0, 3, 1).unwrap();
    }
    for _ in 0..10 {
        buf.admit(1, 3, 1).unwrap();
    }
    for port in 0..3 {
        assert_eq!(
            buf.admit(port, 3, 1),
            Err(DropReason::IngressHeadroomExhausted),
            "port {port}"
        );
    }
    assert_eq!(buf.pool_use(INGRESS_POOL.index()).headroom_used, shp_cells);
    buf.check_invariants();
    // Releasing headroom on one PG makes room for another.
    buf.release(0, 3, 5);
    for _ in 0..5 {
        buf.admit(2, 3, 1).unwrap();
    }
    assert_eq!(
        buf.admit(2, 3, 1),
        Err(DropReason::IngressHeadroomExhausted)
    );
}

#[test]
fn lossy_pg_never_uses_headroom() {
    let params = presets::simple(1, 1_000_000_000);
    let Threshold::Static { bytes } = params.ports[0].pgs[0].threshold else {
        panic!()
    };
    let limit = params.cells(bytes);
    let mut buf = ingress(&params);
    for _ in 0..limit {
        buf.admit(0, 0, 1).unwrap();
    }
    assert_eq!(buf.admit(0, 0, 1), Err(DropReason::IngressLossyLimit));
    assert_eq!(buf.pg(0, 0).headroom_used, 0);
    assert_eq!(buf.update_xoff(0, 0), None);
}

#[test]
fn pool_too_small_is_refused() {
    let mut params = presets::simple(1, 1_000_000_000);
    params.pools[0] = PoolParams {
        size_bytes: 1024,
        ..params.pools[0].clone()
    };
    assert!(IngressBuffers::new(&params, PoolBoard::new(1, 3), 0).is_err());
}

#[test]
fn egress_lossy_queue_drops_at_its_limit_and_lossless_never() {
    let params = presets::simple(1, 1_000_000_000);
    let mut lossless = vec![[false; 8]];
    lossless[0][3] = true;
    lossless[0][4] = true;
    let board = PoolBoard::new(1, params.pools.len());
    let mut eg = EgressBuffers::new(&params, lossless, board, 0).unwrap();
    let pools = pool_cells(&params).unwrap();
    let lossy_pool = presets::EGRESS_LOSSY_POOL.index();
    let reserved = params.cells(params.ports[0].queues[0].profile.reserved_bytes);
    // α = 8: shared s grows while s < 8 (F - s) → predicted stop at s >= 8F/9.
    let free = pools[lossy_pool].shared_size;
    let mut s = 0;
    while s < ThresholdCells::Dynamic(3).limit(free - s) {
        s += 1;
    }
    let mut admitted = 0;
    while eg.admit(0, 0, 1).is_ok() {
        admitted += 1;
        assert!(admitted <= reserved + free);
    }
    assert_eq!(admitted, reserved + s);
    // Lossless queues take everything, even past the pool.
    let lossless_pool = pools[presets::EGRESS_LOSSLESS_POOL.index()].shared_size;
    eg.admit(0, 3, lossless_pool + 100).unwrap();
    eg.check_invariants();
    eg.release(0, 3, lossless_pool + 100);
    eg.release(0, 0, admitted);
    assert!(eg.is_empty());
}

#[derive(Clone, Debug)]
enum Op {
    Admit { port: usize, pg: usize, cells: u64 },
    ReleaseOldest,
    Sync { port: usize, pg: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..3usize, 0..8usize, 1..40u64).prop_map(|(port, pg, cells)| Op::Admit { port, pg, cells }),
        2 => Just(Op::ReleaseOldest),
        1 => (0..3usize, 0..8usize).prop_map(|(port, pg)| Op::Sync { port, pg }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, ..ProptestConfig::default() })]

    /// Conservation: any sequence of admissions and releases keeps the accounting consistent,
    /// and releasing every admitted frame leaves every occupancy at 0.
    #[test]
    fn conservation(ops in proptest::collection::vec(op(), 2500..3000), dynamic in any::<bool>(), shp in any::<bool>()) {
        let mut params = presets::simple(3, 1_000_000_000);
        // Small pools so that limits and headroom are reached often.
        params.pools[0].size_bytes = 320 * 1024;
        if shp {
            params.pools[0].shared_headroom_bytes = 24 * 1024;
        }
        if dynamic {
            for p in &mut params.ports {
                p.pgs[3].threshold = Threshold::Dynamic { exponent: -1 };
                p.pgs[0].threshold = Threshold::Dynamic { exponent: 1 };
            }
        }
        let mut buf = ingress(&params);
        let mut held = std::collections::VecDeque::new();
        for op in ops {
            match op {
                Op::Admit { port, pg, cells } => {
                    if buf.admit(port, pg, cells).is_ok() {
                        held.push_back((port, pg, cells));
                    }
                    buf.update_xoff(port, pg);
                }
                Op::ReleaseOldest => {
                    if let Some((port, pg, cells)) = held.pop_front() {
                        buf.release(port, pg, cells);
                        buf.update_xoff(port, pg);
                    }
                }
                Op::Sync { port, pg } => { buf.update_xoff(port, pg); }
            }
            buf.check_invariants();
        }
        while let Some((port, pg, cells)) = held.pop_front() {
            buf.release(port, pg, cells);
        }
        buf.check_invariants();
        prop_assert!(buf.is_empty());
        for port in 0..3 {
            for pg in 0..8 {
                buf.update_xoff(port, pg);
                prop_assert!(!buf.pg(port, pg).xoff, "PG {port}/{pg} still XOFF when empty");
            }
        }
    }
}
