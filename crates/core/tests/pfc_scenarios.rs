//! Scenario tests of the whole core on a small switch in virtual time: PFC generation at the
//! predicted points, headroom, shared headroom pool, XON hysteresis, refresh, lossy drops,
//! received PFC, DWRR, ECN.

mod common;

use common::*;
use headroom_core::counters::DropReason;
use headroom_core::params::presets;
use headroom_core::params::{SwitchParams, Threshold, WredParams};
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;

const GBPS: u64 = 1_000_000_000;
const FRAME_LEN: usize = 1024;
const LOSSLESS_DSCP: u8 = 3;
const LOSSY_DSCP: u8 = 0;

/// Predictions from the parameters: (frames until XOFF, frames of headroom), for frames of
/// `len` bytes on port 0's PG 3 with a static shared limit.
fn predict(params: &SwitchParams, len: usize) -> (u64, u64, u64) {
    let pg = params.ports[0].pgs[3];
    let cells_per_frame = params.cells(len as u64);
    let Threshold::Static { bytes } = pg.threshold else {
        panic!("static threshold expected")
    };
    let reserved = params.cells(pg.reserved_bytes);
    let shared = params.cells(bytes);
    let headroom = params.cells(pg.xoff_bytes);
    // XOFF when shared use reaches the limit: the frame that brings the total to reserved +
    // shared; then the headroom holds whole frames only.
    let xoff_at = (reserved + shared).div_ceil(cells_per_frame);
    let used_at_xoff = xoff_at * cells_per_frame;
    let headroom_frames = headroom / cells_per_frame;
    (xoff_at, headroom_frames, used_at_xoff)
}

fn lab_with_tx_disabled_on_2() -> Lab {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    lab
}

#[test]
fn xoff_at_the_predicted_frame_then_headroom_then_drops() {
    let mut lab = lab_with_tx_disabled_on_2();
    let (xoff_at, headroom_frames, _) = predict(&lab.sw.shared().params, FRAME_LEN);
    for n in 1..=xoff_at {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
        let pfc = lab.pfc_out(0);
        if n < xoff_at {
            assert!(
                pfc.is_empty(),
                "PFC before frame {xoff_at}: after frame {n}: {pfc:?}"
            );
        } else {
            assert_eq!(pfc.len(), 1, "exactly one XOFF after frame {n}");
            assert_eq!(pfc[0].class_enable, 0b0000_1000);
            assert_eq!(pfc[0].pause_quanta[3], 0xFFFF);
        }
    }
    assert_eq!(lab.tx_counters(0).pfc_tx[3].get(), 1);
    // The headroom absorbs what is in flight: no drop until it is full...
    for n in 0..headroom_frames {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
        assert_eq!(
            lab.rx_counters(0).pg_drops[3].get(),
            0,
            "drop at headroom frame {n}"
        );
    }
    // ...and the next frame is dropped, counted per PG and by reason.
    lab.rx(
        0,
        ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
    );
    let c = lab.rx_counters(0);
    assert_eq!(c.pg_drops[3].get(), 1);
    assert_eq!(
        c.drops[DropReason::IngressHeadroomExhausted.index()].get(),
        1
    );
    let pg = lab.ingress().buffers().pg(0, 3);
    assert_eq!(
        pg.headroom_used,
        headroom_frames * lab.sw.shared().params.cells(FRAME_LEN as u64)
    );
    assert_eq!(
        lab.egress().queue_len(PortId(2), 3) as u64,
        xoff_at + headroom_frames
    );
    lab.sw.check_invariants();
}

#[test]
fn xoff_refreshed_while_held_xon_at_hysteresis_and_silence_after() {
    let mut lab = lab_with_tx_disabled_on_2();
    let params = lab.sw.shared().params.clone();
    let (xoff_at, _, _) = predict(&params, FRAME_LEN);
    for _ in 0..xoff_at {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
    }
    assert_eq!(lab.pfc_out(0).len(), 1);
    // Held: refreshed every pfc_refresh_ns (half the pause time at 1 Gb/s), never sooner.
    let refresh = params.ports[0].pfc_refresh_ns;
    for i in 1..=5 {
        lab.advance_ns(refresh - 1);
        assert!(lab.pfc_out(0).is_empty(), "refresh {i} came early");
        lab.advance_ns(1);
        let f = lab.pfc_out(0);
        assert_eq!(f.len(), 1, "refresh {i}");
        assert_eq!((f[0].class_enable, f[0].pause_quanta[3]), (0b1000, 0xFFFF));
    }
    // Drain port 2 one frame at a time. XON must come exactly when the PG holds no headroom and
    // its total use is at most xon (xon_offset unset).
    lab.sw.shared().set_tx_enable(PortId(2), true);
    let cells_per_frame = params.cells(FRAME_LEN as u64);
    let xon_cells = params.cells(params.ports[0].pgs[3].xon_bytes);
    let mut queued = xoff_at;
    let mut xon_seen_at = None;
    while queued > 0 {
        lab.advance_ns(20_000); // > one 1024-byte frame at 1 Gb/s
        let sent = lab.tx(2, 1);
        assert_eq!(sent.len(), 1);
        queued -= 1;
        let pfc = lab.pfc_out(0);
        if queued * cells_per_frame <= xon_cells && xon_seen_at.is_none() {
            assert_eq!(pfc.len(), 1, "XON expected with {queued} frames left");
            assert_eq!((pfc[0].class_enable, pfc[0].pause_quanta[3]), (0b1000, 0));
            xon_seen_at = Some(queued);
        } else {
            assert!(
                pfc.is_empty(),
                "unexpected PFC with {queued} frames left: {pfc:?}"
            );
        }
    }
    assert_eq!(xon_seen_at, Some(xon_cells / cells_per_frame));
    // Never a PFC frame after that.
    for _ in 0..10 {
        lab.advance_ns(params.ports[0].pfc_refresh_ns);
        assert!(lab.pfc_out(0).is_empty());
    }
    assert!(lab.ingress().buffers().is_empty());
    assert_eq!(lab.tx_counters(0).pfc_tx[3].get(), 1 + 5 + 1);
}

#[test]
fn shared_headroom_pool_caps_the_sum_over_pgs() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    let shp_bytes = 24 * 1024;
    params.pools[presets::INGRESS_POOL.index()].shared_headroom_bytes = shp_bytes;
    let mut lab = Lab::new(params.clone());
    lab.learn(2, HOST_C);
    let (xoff_at, per_pg_headroom_frames, _) = predict(&params, FRAME_LEN);
    let shp_frames = params.cells(shp_bytes) / params.cells(FRAME_LEN as u64);
    assert!(
        per_pg_headroom_frames > shp_frames / 2,
        "per-PG cap must not be the limit"
    );
    // Two sources fill their PGs to XOFF, then both use headroom from the shared pool.
    for (port, host) in [(0u16, HOST_A), (1, HOST_B)] {
        for _ in 0..xoff_at {
            lab.rx(
                port,
                ipv4_frame(host, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
            );
        }
    }
    let mut admitted = 0;
    for i in 0..2 * per_pg_headroom_frames {
        let (port, host) = if i % 2 == 0 {
            (0u16, HOST_A)
        } else {
            (1, HOST_B)
        };
        let before = lab.rx_counters(port).pg_drops[3].get();
        lab.rx(
            port,
            ipv4_frame(host, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
        if lab.rx_counters(port).pg_drops[3].get() == before {
            admitted += 1;
        }
    }
    assert_eq!(
        admitted, shp_frames,
        "the SHP holds exactly its size in frames"
    );
    let used = lab
        .ingress()
        .buffers()
        .pool_use(presets::INGRESS_POOL.index())
        .headroom_used;
    assert_eq!(used, shp_frames * params.cells(FRAME_LEN as u64));
    lab.sw.check_invariants();
}

#[test]
fn lossy_queue_drops_at_its_limit_and_never_causes_pfc() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    // Let the egress queue be the limit: no ingress shared limit on the lossy PG.
    params.ports[0].pgs[0].threshold = Threshold::Static { bytes: 0 };
    let mut lab = Lab::new(params.clone());
    lab.learn(2, HOST_C);
    // Predicted from the egress profile: reserved + shared while s < α (F − s), α = 2^3.
    let eg = presets::EGRESS_LOSSY_POOL.index();
    let pools = headroom_core::buffer::pool_cells(&params).unwrap();
    let free = pools[eg].shared_size;
    let q = params.ports[2].queues[1].profile;
    let Threshold::Dynamic { exponent } = q.threshold else {
        panic!()
    };
    let cells_per_frame = params.cells(FRAME_LEN as u64);
    let reserved = params.cells(q.reserved_bytes);
    let mut used = 0u64;
    let mut predicted = 0u64;
    loop {
        let shared_before = used.saturating_sub(reserved);
        let shared_after = (used + cells_per_frame).saturating_sub(reserved);
        if shared_after > shared_before
            && shared_before
                >= headroom_core::buffer::ThresholdCells::Dynamic(exponent)
                    .limit(free - shared_before)
        {
            break;
        }
        used += cells_per_frame;
        predicted += 1;
    }
    for _ in 0..predicted {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, FRAME_LEN),
        );
    }
    assert_eq!(
        lab.rx_counters(2).drops[DropReason::EgressQueueLimit.index()].get(),
        0
    );
    lab.rx(
        0,
        ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, FRAME_LEN),
    );
    // Charged to the egress port (SAI's IF_OUT_DISCARDS), not to the port it came in on.
    assert_eq!(
        lab.rx_counters(2).drops[DropReason::EgressQueueLimit.index()].get(),
        1
    );
    assert_eq!(
        lab.rx_counters(0).drops[DropReason::EgressQueueLimit.index()].get(),
        0
    );
    assert_eq!(lab.rx_counters(2).queue_admission_drops[1].get(), 1);
    assert!(lab.pfc_out(0).is_empty(), "a lossy queue never causes PFC");
    assert_eq!(lab.tx_counters(0).pfc_frames_tx.get(), 0);
}

#[test]
fn lossy_pg_drops_at_its_ingress_limit_without_pfc() {
    let mut lab = lab_with_tx_disabled_on_2();
    let params = lab.sw.shared().params.clone();
    let Threshold::Static { bytes } = params.ports[0].pgs[0].threshold else {
        panic!()
    };
    let frames = params.cells(bytes) / params.cells(FRAME_LEN as u64);
    for _ in 0..frames {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, FRAME_LEN),
        );
    }
    assert_eq!(lab.rx_counters(0).pg_drops[0].get(), 0);
    lab.rx(
        0,
        ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, FRAME_LEN),
    );
    assert_eq!(
        lab.rx_counters(0).drops[DropReason::IngressLossyLimit.index()].get(),
        1
    );
    assert!(lab.pfc_out(0).is_empty());
}

#[test]
fn received_pfc_stops_exactly_the_mapped_queue_for_exactly_the_quanta_time() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    lab.learn(2, HOST_C);
    // Peer C pauses priority 3 towards itself for 1000 quanta = 512 µs at 1 Gb/s.
    let t0 = lab.now;
    let mut q = [0u16; 8];
    q[3] = 1000;
    lab.rx(2, pfc_frame(HOST_C, 0b1000, q));
    let pause_ns = 1000 * 512 * 1_000_000_000 / GBPS;
    assert_eq!(lab.rx_counters(2).pfc_rx[3].get(), 1);
    // Lossless and lossy traffic towards C.
    for _ in 0..20 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, 200));
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 200));
    }
    // Until the pause ends only the lossy queue flows.
    while lab.now < t0 + std::time::Duration::from_nanos(pause_ns - 10_000) {
        for f in lab.tx(2, 64) {
            assert_eq!(
                dscp_of(&f),
                LOSSY_DSCP,
                "queue 3 sent while paused at {:?}",
                lab.now
            );
        }
        lab.advance_ns(10_000);
    }
    lab.now = t0 + std::time::Duration::from_nanos(pause_ns - 1);
    assert!(lab.tx(2, 64).iter().all(|f| dscp_of(f) == LOSSY_DSCP));
    assert_eq!(lab.egress().queue_len(PortId(2), 3), 20);
    lab.now = t0 + std::time::Duration::from_nanos(pause_ns);
    let mut lossless = 0;
    for _ in 0..100 {
        lossless += lab
            .tx(2, 64)
            .iter()
            .filter(|f| dscp_of(f) == LOSSLESS_DSCP)
            .count();
        lab.advance_ns(5_000);
    }
    assert_eq!(lossless, 20, "queue 3 resumes when the pause expires");
    // A new pause, then quanta 0: resumes at once.
    lab.rx(2, pfc_frame(HOST_C, 0b1000, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]));
    lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, 200));
    lab.advance_ns(100_000);
    assert!(lab.tx(2, 64).is_empty());
    lab.rx(2, pfc_frame(HOST_C, 0b1000, [0; 8]));
    assert_eq!(lab.tx(2, 64).len(), 1, "XON resumes at once");
    assert_eq!(
        lab.rx_counters(2).pfc_rx[3].get(),
        3,
        "XON frames count too"
    );
}

#[test]
fn pfc_for_priorities_outside_pfc_enable_is_counted_and_ignored() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    lab.learn(2, HOST_C);
    lab.rx(
        2,
        pfc_frame(HOST_C, 0b0000_0010, [0, 0xFFFF, 0, 0, 0, 0, 0, 0]),
    );
    assert_eq!(lab.rx_counters(2).pfc_rx[1].get(), 1);
    assert_eq!(lab.rx_counters(2).pfc_rx_ignored[1].get(), 1);
    lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 200)); // TC 1 → queue 1
    assert_eq!(lab.tx(2, 64).len(), 1, "queue 1 is not paused");
    // 802.3x PAUSE is off by default: counted, not acted on, never a PFC count.
    let mut pause = [0u8; 60];
    headroom_wire::mac_control::MacControlRepr::Pause(headroom_wire::mac_control::PauseRepr {
        pause_quanta: 0xFFFF,
    })
    .emit_frame(headroom_wire::ethernet::MacAddress(HOST_C), &mut pause)
    .unwrap();
    lab.rx(2, headroom_core::frame::HeapFrame::new(&pause));
    assert_eq!(lab.rx_counters(2).pause_rx.get(), 1);
    assert_eq!(lab.rx_counters(2).pause_rx_ignored.get(), 1);
    assert_eq!(
        lab.rx_counters(2).pfc_frames_rx.get(),
        1,
        "the PFC frame only"
    );
    assert_eq!(
        (0..8)
            .map(|p| lab.rx_counters(2).pfc_rx[p].get())
            .sum::<u64>(),
        1
    );
    lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 200));
    assert_eq!(lab.tx(2, 64).len(), 1, "802.3x is ignored unless enabled");
}

#[test]
fn malformed_mac_control_is_counted_and_never_forwarded() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    // Non-zero high octet of the class-enable vector.
    let mut bad = pfc_frame(HOST_A, 0b1000, [0xFFFF; 8]);
    use headroom_core::frame::Frame;
    bad.data_mut()[16] = 1;
    lab.rx(0, bad);
    // Wrong destination.
    let mut bad = pfc_frame(HOST_A, 0b1000, [0xFFFF; 8]);
    bad.data_mut()[5] = 2;
    lab.rx(0, bad);
    assert_eq!(
        lab.rx_counters(0).drops[DropReason::MacControlMalformed.index()].get(),
        2
    );
    assert!(lab.tx(1, 64).is_empty() && lab.tx(2, 64).is_empty());
    // Runt.
    lab.rx(0, headroom_core::frame::HeapFrame::new(&[1, 2, 3]));
    assert_eq!(lab.rx_counters(0).drops[DropReason::Runt.index()].get(), 1);
}

#[test]
fn dwrr_shares_a_congested_port_by_weight() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    // Enough buffer for a long backlog on both queues.
    params.ports[0].pgs[0].threshold = Threshold::Static { bytes: 0 };
    params.ports[0].pgs[3].threshold = Threshold::Static { bytes: 0 };
    let mut lab = Lab::new(params.clone());
    lab.learn(2, HOST_C);
    for _ in 0..3000 {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::NotEct, 600),
        );
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 1400));
    }
    lab.sw.shared().set_tx_enable(PortId(2), true);
    let (mut lossless, mut lossy) = (0u64, 0u64);
    // Serve while both stay backlogged.
    while lab.egress().queue_len(PortId(2), 3) > 100 && lab.egress().queue_len(PortId(2), 1) > 100 {
        for f in lab.tx(2, 32) {
            if dscp_of(&f) == LOSSLESS_DSCP {
                lossless += f.data().len() as u64;
            } else {
                lossy += f.data().len() as u64;
            }
        }
        lab.advance_ns(200_000);
    }
    use headroom_core::frame::Frame;
    use headroom_core::params::SchedulerKind;
    let w = |q: usize| match params.ports[2].queues[q].scheduler {
        SchedulerKind::Dwrr { weight } => f64::from(weight),
        SchedulerKind::Strict => panic!(),
    };
    let ratio = lossless as f64 / lossy as f64;
    let want = w(3) / w(1);
    assert!(
        (ratio / want - 1.0).abs() < 0.05,
        "bytes ratio {ratio}, weights {want}"
    );
}

#[test]
fn ecn_marks_ect_frames_above_kmax_and_keeps_checksums_valid() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    params.ports[2].queues[3].wred = Some(WredParams {
        ecn_mark: true,
        drop_enable: true,
        min_threshold_bytes: 10_000,
        max_threshold_bytes: 20_000,
        probability_percent: 100,
    });
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    let n = 40;
    for i in 0..n {
        // Alternate ECT(0) and Not-ECT: WRED must never drop on a lossless queue.
        let ecn = if i % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, ecn, 1000));
    }
    lab.sw.shared().set_tx_enable(PortId(2), true);
    let mut sent = Vec::new();
    for _ in 0..200 {
        sent.extend(lab.tx(2, 1));
        lab.advance_ns(10_000);
    }
    assert_eq!(sent.len(), n, "lossless: nothing dropped");
    let mut marked = 0;
    for (i, f) in sent.iter().enumerate() {
        use headroom_core::frame::Frame;
        let ip = headroom_wire::ipv4::Ipv4Packet::new_checked(&f.data()[14..]).unwrap();
        assert!(
            ip.verify_checksum(),
            "frame {i}: IPv4 checksum broken by marking"
        );
        let depth = (n - i) * 1000; // bytes queued including this frame at its dequeue
        let sent_ect = i % 2 == 0;
        match ip.ecn() {
            Ecn::Ce => {
                assert!(
                    sent_ect && depth > 10_000,
                    "frame {i} marked at depth {depth}"
                );
                marked += 1;
            }
            other => {
                assert!(
                    !(sent_ect && depth > 20_000),
                    "frame {i} at depth {depth} not marked: {other:?}"
                );
            }
        }
    }
    assert_eq!(lab.tx_counters(2).ecn_marked[3].get(), marked);
    assert_eq!(lab.tx_counters(2).wred_drops[3].get(), 0);
}

#[test]
fn dynamic_thresholds_pause_a_port_whose_limit_shrinks_as_another_fills_the_pool() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    for p in &mut params.ports {
        p.pgs[3].threshold = Threshold::Dynamic { exponent: 0 };
    }
    let mut lab = Lab::new(params.clone());
    lab.learn(2, HOST_C);
    let pools = headroom_core::buffer::pool_cells(&params).unwrap();
    let free_total = pools[presets::INGRESS_POOL.index()].shared_size;
    let cells = params.cells(FRAME_LEN as u64);
    // Port 0 takes 45 % of the shared pool: below its own limit (α = 1: s < F − s).
    let reserved = params.cells(params.ports[0].pgs[3].reserved_bytes);
    for _ in 0..(reserved + free_total * 45 / 100).div_ceil(cells) {
        lab.rx(
            0,
            ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
    }
    assert!(lab.pfc_out(0).is_empty(), "port 0 is below its limit");
    let s0 = lab.ingress().buffers().pg(0, 3).shared_used;
    // Port 1 fills the pool; port 0 receives nothing more, yet must pause as soon as its limit
    // (α × free = F − s0 − s1) falls to its use: s0 ≥ F − s0 − s1.
    let mut n = 0;
    loop {
        lab.rx(
            1,
            ipv4_frame(HOST_B, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, FRAME_LEN),
        );
        n += 1;
        assert!(n < 100_000, "port 0 never paused");
        let s1 = lab.ingress().buffers().pg(1, 3).shared_used;
        let pfc = lab.pfc_out(0);
        let predicted = s0 >= free_total.saturating_sub(s0 + s1);
        if pfc.is_empty() {
            assert!(!predicted, "port 0 should have paused at s1 = {s1}");
        } else {
            assert!(predicted, "port 0 paused early at s1 = {s1}");
            assert_eq!(
                (pfc[0].class_enable, pfc[0].pause_quanta[3]),
                (0b1000, 0xFFFF)
            );
            break;
        }
    }
    assert!(
        lab.pfc_out(1).is_empty(),
        "port 1 is still below its own limit"
    );
    lab.sw.check_invariants();
}
