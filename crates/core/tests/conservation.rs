//! Conservation: any sequence of traffic, pauses, TX toggles and time steps keeps every
//! accounting structure consistent, accounts every frame (sent or dropped with a reason), and
//! once everything drains leaves every occupancy at 0.

mod common;

use common::*;
use headroom_core::params::presets;
use headroom_core::params::Threshold;
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;
use proptest::prelude::*;

const HOSTS: [[u8; 6]; 3] = [HOST_A, HOST_B, HOST_C];

#[derive(Clone, Debug)]
enum Op {
    Send {
        from: usize,
        to: usize,
        dscp: u8,
        len: usize,
        ect: bool,
    },
    Poll {
        port: u16,
        max: usize,
    },
    Advance {
        ns: u64,
    },
    ToggleTx {
        port: u16,
    },
    Pause {
        port: u16,
        prio: u8,
        quanta: u16,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..3usize, 0..3usize, prop::sample::select(vec![0u8, 3, 4, 46, 48]), 64..1500usize, any::<bool>())
            .prop_map(|(from, to, dscp, len, ect)| Op::Send { from, to, dscp, len, ect }),
        3 => (0..3u16, 0..40usize).prop_map(|(port, max)| Op::Poll { port, max }),
        2 => (0..200_000u64).prop_map(|ns| Op::Advance { ns }),
        1 => (0..3u16).prop_map(|port| Op::ToggleTx { port }),
        1 => (0..3u16, 0..8u8, prop::sample::select(vec![0u16, 10, 500, 0xFFFF])).prop_map(|(port, prio, quanta)| Op::Pause { port, prio, quanta }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 25, ..ProptestConfig::default() })]

    #[test]
    fn every_frame_is_accounted_and_every_occupancy_returns_to_zero(
        ops in proptest::collection::vec(op(), 4000..4200),
        dynamic in any::<bool>(),
        shp in any::<bool>(),
    ) {
        let mut params = presets::simple(3, 1_000_000_000);
        // Small buffers so that limits, headroom and drops happen.
        params.pools[0].size_bytes = 640 * 1024;
        params.pools[2].size_bytes = 256 * 1024;
        if shp {
            params.pools[0].shared_headroom_bytes = 48 * 1024;
        }
        for p in &mut params.ports {
            p.queues[3].wred = Some(headroom_core::params::WredParams {
                ecn_mark: true, drop_enable: true, min_threshold_bytes: 4000, max_threshold_bytes: 30_000, probability_percent: 30,
            });
            p.queues[1].wred = p.queues[3].wred;
            if dynamic {
                p.pgs[3].threshold = Threshold::Dynamic { exponent: -1 };
                p.pgs[0].threshold = Threshold::Dynamic { exponent: 0 };
            }
        }
        let mut lab = Lab::new(params);
        for (port, host) in HOSTS.iter().enumerate() {
            lab.learn(port as u16, *host);
        }
        let mut sent_data = 0u64;
        let base_tx: u64 = tx_total(&lab);
        for op in ops {
            match op {
                Op::Send { from, to, dscp, len, ect } => {
                    if from == to { continue; }
                    let ecn = if ect { Ecn::Ect0 } else { Ecn::NotEct };
                    lab.rx(from as u16, ipv4_frame(HOSTS[from], HOSTS[to], dscp, ecn, len));
                    sent_data += 1;
                }
                Op::Poll { port, max } => {
                    // Data frames only count; PFC frames are separate.
                    lab.tx(port, max);
                }
                Op::Advance { ns } => lab.advance_ns(ns),
                Op::ToggleTx { port } => {
                    let on = lab.sw.shared().tx_enabled(PortId(port));
                    lab.sw.shared().set_tx_enable(PortId(port), !on);
                }
                Op::Pause { port, prio, quanta } => {
                    let mut q = [0u16; 8];
                    q[prio as usize] = quanta;
                    lab.rx(port, pfc_frame(HOSTS[port as usize], 1 << prio, q));
                }
            }
            lab.sw.check_invariants();
        }
        // Drain: transmit everywhere, resume every priority, let time pass.
        for port in 0..3u16 {
            lab.sw.shared().set_tx_enable(PortId(port), true);
            lab.rx(port, pfc_frame(HOSTS[port as usize], 0xFF, [0; 8]));
        }
        for _ in 0..20_000 {
            let mut any = false;
            for port in 0..3u16 {
                any |= !lab.tx(port, 64).is_empty();
            }
            lab.advance_ns(100_000);
            if !any && (0..3).all(|p| (0..8).all(|q| lab.egress().queue_len(PortId(p), q) == 0)) {
                break;
            }
        }
        lab.sw.check_invariants();
        prop_assert!(lab.ingress().buffers().is_empty(), "ingress occupancy left");
        prop_assert!(lab.ingress().egress_buffers().is_empty(), "egress occupancy left");
        // Every data frame received was sent or dropped with a reason.
        let tx = tx_total(&lab) - base_tx;
        let dropped: u64 = (0..3u16)
            .map(|p| {
                let rx = lab.rx_counters(p);
                let eg = lab.tx_counters(p);
                rx.drops.iter().map(|c| c.get()).sum::<u64>() + eg.drops.iter().map(|c| c.get()).sum::<u64>()
            })
            .sum::<u64>()
            - (0..3u16).map(|p| lab.rx_counters(p).drops[headroom_core::counters::DropReason::MacControlMalformed.index()].get()).sum::<u64>();
        prop_assert_eq!(tx + dropped, sent_data);
    }
}

fn tx_total(lab: &Lab) -> u64 {
    (0..3u16)
        .map(|p| {
            (0..8)
                .map(|q| lab.tx_counters(p).tx_frames[q].get())
                .sum::<u64>()
        })
        .sum()
}
