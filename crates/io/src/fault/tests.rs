use super::*;
use crate::memory::{Collector, Injector as Wire, MemoryPort};
use crate::pool::{FramePool, PoolConfig, PoolFrame};
use crate::PortInfo;
use proptest::prelude::*;

struct Rig {
    pool: FramePool,
    clock: VirtualClock,
    rx: FaultyRx<crate::memory::MemoryRx>,
    tx: FaultyTx<crate::memory::MemoryTx>,
    link: Arc<FaultLink>,
    wire: Wire,
    collector: Collector,
}

fn rig(config: &FaultConfig) -> Rig {
    let pool = FramePool::new(PoolConfig::with_frame_count(4096)).expect("pool");
    let info = PortInfo {
        name: "mem0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        max_frame_len: 2048,
    };
    let (rx, tx, wire, collector) = MemoryPort::new(info, pool.clone(), 1024).split();
    let clock = VirtualClock::at(1_000);
    let FaultyPort { rx, tx, link } =
        wrap_port(rx, tx, config, 0, clock.fault_clock()).expect("valid");
    Rig {
        pool,
        clock,
        rx,
        tx,
        link,
        wire,
        collector,
    }
}

/// A 64-byte frame whose first 4 bytes are its sequence number.
fn numbered(i: u32) -> [u8; 64] {
    let mut b = [0x5Au8; 64];
    b[..4].copy_from_slice(&i.to_be_bytes());
    b
}

fn seq(frame: &PoolFrame) -> u32 {
    u32::from_be_bytes(frame.data()[..4].try_into().expect("4 bytes"))
}

/// Sends `n` numbered frames through the receive wrapper, one burst per 32, and returns what
/// came out (after draining held frames with time moving on).
fn through_rx(r: &mut Rig, n: u32) -> Vec<PoolFrame> {
    let mut out = Vec::new();
    let mut next = 0;
    while next < n {
        while next < n && r.wire.free_slots() > 0 {
            r.wire.inject(&numbered(next)).expect("room");
            next += 1;
        }
        let mut burst = Vec::with_capacity(BURST_MAX);
        r.rx.rx_burst(&mut burst, BURST_MAX);
        out.append(&mut burst);
    }
    drain_rx(r, &mut out);
    out
}

fn drain_rx(r: &mut Rig, out: &mut Vec<PoolFrame>) {
    for _ in 0..10_000 {
        let mut burst = Vec::with_capacity(BURST_MAX);
        r.rx.rx_burst(&mut burst, BURST_MAX);
        out.append(&mut burst);
        if r.rx.stats().held.get() == 0 && r.wire.free_slots() == 1024 {
            return;
        }
        r.clock.advance(10_000);
    }
    panic!("held frames never drained");
}

fn only(f: impl FnOnce(&mut FrameFaults)) -> FaultConfig {
    let mut c = FaultConfig {
        seed: 7,
        ..FaultConfig::default()
    };
    f(&mut c.rx);
    c
}

#[test]
fn no_faults_is_a_transparent_wire() {
    let mut r = rig(&FaultConfig::default());
    let out = through_rx(&mut r, 1000);
    let seqs: Vec<u32> = out.iter().map(seq).collect();
    assert_eq!(seqs, (0..1000).collect::<Vec<_>>());
    assert!(out.iter().all(|f| f.data()[4..] == [0x5A; 60]));
    assert!(r.rx.stats().conserved());
}

#[test]
fn drop_rate_one_loses_everything_and_counts_it() {
    let mut r = rig(&only(|f| f.drop_rate = 1.0));
    let out = through_rx(&mut r, 500);
    assert!(out.is_empty());
    assert_eq!(r.rx.stats().dropped.get(), 500);
    assert!(r.rx.stats().conserved());
    drop(out);
    assert_eq!(
        r.pool.stats().available,
        4096,
        "dropped frames go back to the pool"
    );
}

#[test]
fn rates_are_what_was_asked_for() {
    let mut r = rig(&only(|f| {
        f.drop_rate = 0.1;
        f.corrupt_rate = 0.05;
    }));
    let n = 100_000;
    for _ in 0..n / 1000 {
        // In rounds, so that the pool never runs dry.
        drop(through_rx(&mut r, 1000));
    }
    let s = r.rx.stats();
    let dropped = s.dropped.get() as f64 / f64::from(n);
    let corrupted = s.corrupted.get() as f64 / f64::from(n);
    // Binomial standard deviations are ~0.001 and ~0.0007 here: these bounds are > 5 sigma.
    assert!((dropped - 0.1).abs() < 0.006, "dropped {dropped}");
    assert!((corrupted - 0.05).abs() < 0.004, "corrupted {corrupted}");
    assert!(s.conserved());
}

#[test]
fn corruption_flips_one_to_three_bits_and_often_in_the_headers() {
    let mut r = rig(&only(|f| f.corrupt_rate = 1.0));
    let mut in_headers = 0;
    let n = 2000u32;
    for i in 0..n {
        // 1024-byte frames: without the header bias, 1 in 16 flips would land in 64 bytes.
        let mut bytes = vec![0u8; 1024];
        bytes[..4].copy_from_slice(&i.to_be_bytes());
        r.wire.inject(&bytes).expect("room");
        let mut burst = Vec::new();
        assert_eq!(r.rx.rx_burst(&mut burst, 1), 1);
        let got = burst[0].data();
        assert_eq!(got.len(), 1024);
        let flipped: u32 = got
            .iter()
            .zip(&bytes)
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        // Two flips can land on the same bit and cancel: 0 is possible but rare.
        assert!(flipped <= CORRUPT_BITS_MAX, "{flipped} bits");
        if got[..HEADER_BYTES] != bytes[..HEADER_BYTES] {
            in_headers += 1;
        }
    }
    assert_eq!(r.rx.stats().corrupted.get(), u64::from(n));
    assert!(
        in_headers > n / 3,
        "only {in_headers} of {n} corruptions touched the headers"
    );
}

#[test]
fn truncation_cuts_short() {
    let mut r = rig(&only(|f| f.truncate_rate = 1.0));
    let out = through_rx(&mut r, 1000);
    assert_eq!(out.len(), 1000);
    assert!(out.iter().all(|f| f.len() < 64));
    assert!(out.iter().any(|f| f.is_empty()), "0 is a possible length");
    assert_eq!(r.rx.stats().truncated.get(), 1000);
}

#[test]
fn duplicates_follow_their_original() {
    let mut r = rig(&only(|f| f.duplicate_rate = 1.0));
    let out = through_rx(&mut r, 300);
    assert_eq!(out.len(), 600);
    let mut seqs: Vec<u32> = out.iter().map(seq).collect();
    seqs.sort_unstable();
    let twice: Vec<u32> = (0..300).flat_map(|i| [i, i]).collect();
    assert_eq!(seqs, twice);
    assert_eq!(r.rx.stats().duplicated.get(), 300);
    assert!(r.rx.stats().conserved());
}

#[test]
fn reordering_permutes_but_loses_nothing() {
    let mut r = rig(&only(|f| f.reorder_rate = 0.3));
    let out = through_rx(&mut r, 3000);
    let seqs: Vec<u32> = out.iter().map(seq).collect();
    assert_ne!(
        seqs,
        (0..3000).collect::<Vec<_>>(),
        "something was reordered"
    );
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..3000).collect::<Vec<_>>());
    assert!(r.rx.stats().reordered.get() > 600);
}

#[test]
fn delayed_frames_wait_for_the_clock() {
    let mut r = rig(&only(|f| {
        f.delay_rate = 1.0;
        f.delay_max_ns = 50_000;
    }));
    for i in 0..10 {
        r.wire.inject(&numbered(i)).expect("room");
    }
    let mut out = Vec::new();
    assert_eq!(r.rx.rx_burst(&mut out, BURST_MAX), 0, "all held");
    assert_eq!(r.rx.stats().held.get(), 10);
    assert!(
        r.rx.wait_fd().is_none(),
        "an lcore must not sleep on held frames"
    );
    r.clock.advance(50_000);
    assert_eq!(r.rx.rx_burst(&mut out, BURST_MAX), 10, "all due");
    assert_eq!(r.rx.stats().held.get(), 0);
    assert!(r.rx.stats().conserved());
}

#[test]
fn a_full_hold_buffer_lets_frames_pass() {
    let mut c = only(|f| {
        f.delay_rate = 1.0;
        f.delay_max_ns = 1_000_000_000;
    });
    c.hold_frames = 4;
    let mut r = rig(&c);
    for i in 0..10 {
        r.wire.inject(&numbered(i)).expect("room");
    }
    let mut out = Vec::new();
    assert_eq!(r.rx.rx_burst(&mut out, BURST_MAX), 6);
    assert_eq!(r.rx.stats().hold_full.get(), 6);
    assert_eq!(r.rx.stats().held.get(), 4);
    assert!(r.rx.stats().conserved());
}

#[test]
fn the_same_seed_makes_the_same_faults() {
    let config = FaultConfig {
        seed: 99,
        rx: FrameFaults {
            drop_rate: 0.05,
            corrupt_rate: 0.05,
            truncate_rate: 0.05,
            duplicate_rate: 0.05,
            reorder_rate: 0.05,
            delay_rate: 0.05,
            delay_max_ns: 30_000,
        },
        ..FaultConfig::default()
    };
    let run = |config: &FaultConfig| -> Vec<Vec<u8>> {
        let mut r = rig(config);
        through_rx(&mut r, 2000)
            .iter()
            .map(|f| f.data().to_vec())
            .collect()
    };
    let a = run(&config);
    assert_eq!(a, run(&config));
    assert_ne!(
        a,
        run(&FaultConfig {
            seed: 100,
            ..config
        })
    );
}

#[test]
fn a_stalled_queue_takes_nothing_until_the_stall_ends() {
    // So frequent that one is all but certain in any nanosecond.
    let config = FaultConfig {
        tx_stalls_per_second: 1e12,
        tx_stall_ns: 1_000_000,
        ..FaultConfig::default()
    };
    let mut r = rig(&config);
    let mut frames: Vec<_> = (0..8)
        .map(|i| r.pool.alloc_copy(&numbered(i)).expect("buffer"))
        .collect();
    // The first call starts the clock of the process: no time has passed, nothing happens.
    assert_eq!(r.tx.tx_burst(&mut Vec::new()), 0);
    assert_eq!(r.tx.stats().tx_stalls.get(), 0);
    r.clock.advance(1);
    assert_eq!(r.tx.tx_burst(&mut frames), 0);
    r.clock.advance(999_999);
    assert_eq!(r.tx.tx_burst(&mut frames), 0, "still stalled");
    assert_eq!(frames.len(), 8, "the caller keeps its frames");
    r.clock.advance(1);
    // The stall is over, and (at that rate) the next call starts another one.
    assert_eq!(r.tx.tx_burst(&mut frames), 0);
    assert_eq!(r.tx.stats().tx_stalls.get(), 2);
    assert_eq!(r.tx.stats().tx_stalled_calls.get(), 3);

    let config = FaultConfig {
        // About one stall per 500 ns: 63 % of the 500 ns steps below start one.
        tx_stalls_per_second: 2_000_000.0,
        tx_stall_ns: 1_000,
        ..FaultConfig::default()
    };
    let mut r = rig(&config);
    let mut frames: Vec<_> = (0..200)
        .map(|i| r.pool.alloc_copy(&numbered(i)).expect("buffer"))
        .collect();
    let mut sent = Vec::new();
    while !frames.is_empty() {
        r.tx.tx_burst(&mut frames);
        r.clock.advance(500);
        r.collector.collect(&mut sent, usize::MAX);
    }
    r.tx.flush();
    r.collector.collect(&mut sent, usize::MAX);
    let seqs: Vec<u32> = sent.iter().map(seq).collect();
    assert_eq!(seqs, (0..200).collect::<Vec<_>>(), "a stall loses nothing");
    assert!(r.tx.stats().tx_stalls.get() > 0);
}

#[test]
fn a_link_flap_loses_both_directions_for_its_duration() {
    let config = FaultConfig {
        link_flaps_per_second: 1e12,
        link_down_ns: 1_000_000,
        ..FaultConfig::default()
    };
    let mut r = rig(&config);
    assert_eq!(
        r.rx.rx_burst(&mut Vec::new(), BURST_MAX),
        0,
        "starts the clock"
    );
    assert!(r.link.is_up(r.clock.now_ns()));
    r.clock.advance(1);
    for i in 0..5 {
        r.wire.inject(&numbered(i)).expect("room");
    }
    let mut out = Vec::new();
    assert_eq!(r.rx.rx_burst(&mut out, BURST_MAX), 0);
    assert!(!r.link.is_up(r.clock.now_ns()));
    assert_eq!(r.rx.stats().link_down_dropped.get(), 5);
    assert_eq!(r.rx.stats().link_flaps.get(), 1);
    let mut frames: Vec<_> = (0..3)
        .map(|i| r.pool.alloc_copy(&numbered(i)).expect("buffer"))
        .collect();
    assert_eq!(
        r.tx.tx_burst(&mut frames),
        3,
        "a NIC with its link down drops"
    );
    assert_eq!(r.tx.stats().link_down_dropped.get(), 3);
    assert_eq!(r.collector.queued(), 0);
    r.clock.advance(1_000_000);
    assert!(r.link.is_up(r.clock.now_ns()));
    assert!(r.rx.stats().conserved() && r.tx.stats().conserved());
}

#[test]
fn tx_faults_apply_to_transmitted_frames() {
    let config = FaultConfig {
        seed: 3,
        tx: FrameFaults {
            drop_rate: 0.2,
            duplicate_rate: 0.2,
            reorder_rate: 0.2,
            ..FrameFaults::none()
        },
        ..FaultConfig::default()
    };
    let mut r = rig(&config);
    let mut sent = Vec::new();
    for i in 0..1000 {
        let mut frames = vec![r.pool.alloc_copy(&numbered(i)).expect("buffer")];
        while !frames.is_empty() {
            r.tx.tx_burst(&mut frames);
        }
        r.collector.collect(&mut sent, usize::MAX);
    }
    r.tx.flush();
    r.collector.collect(&mut sent, usize::MAX);
    let s = r.tx.stats();
    assert!(s.conserved());
    assert_eq!(s.held.get(), 0);
    assert_eq!(
        sent.len() as u64,
        1000 - s.dropped.get() + s.duplicated.get()
    );
    assert!(s.dropped.get() > 100 && s.duplicated.get() > 100 && s.reordered.get() > 100);
}

#[test]
fn bad_rates_are_refused() {
    let bad = |c: FaultConfig| c.validate().unwrap_err().to_string();
    assert!(bad(only(|f| f.drop_rate = 1.5)).contains("rx.drop_rate = 1.5"));
    assert!(bad(only(|f| f.delay_rate = f64::NAN)).contains("rx.delay_rate"));
    assert!(bad(only(|f| {
        f.drop_rate = 0.6;
        f.corrupt_rate = 0.6;
    }))
    .contains("sum to"));
    assert!(bad(FaultConfig {
        link_flaps_per_second: -0.1,
        ..FaultConfig::default()
    })
    .contains("link_flaps_per_second"));
}

fn faults() -> impl Strategy<Value = FrameFaults> {
    (
        prop::array::uniform6(0.0..0.15f64),
        prop::sample::select(vec![0u64, 1_000, 100_000]),
    )
        .prop_map(|(r, delay_max_ns)| FrameFaults {
            drop_rate: r[0],
            corrupt_rate: r[1],
            truncate_rate: r[2],
            duplicate_rate: r[3],
            reorder_rate: r[4],
            delay_rate: r[5],
            delay_max_ns,
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Whatever the faults and the order of calls, every frame is accounted for at every step
    /// and, once drained, back in the pool.
    #[test]
    fn every_frame_is_delivered_dropped_or_held(
        seed in any::<u64>(),
        rx in faults(),
        tx in faults(),
        stall in prop::sample::select(vec![0.0, 20_000.0]),
        flap in prop::sample::select(vec![0.0, 2_000.0]),
        hold_frames in 1usize..80,
        ops in proptest::collection::vec((0u8..4, 1usize..40, 0u64..20_000), 50..300),
    ) {
        let config = FaultConfig {
            seed,
            rx,
            tx,
            tx_stalls_per_second: stall,
            tx_stall_ns: 5_000,
            link_flaps_per_second: flap,
            link_down_ns: 20_000,
            hold_frames,
        };
        let mut r = rig(&config);
        let mut injected = 0u64;
        let mut in_switch: Vec<PoolFrame> = Vec::new();
        let mut delivered = 0u64;
        for (op, n, ns) in ops {
            match op {
                0 => for _ in 0..n {
                    if r.wire.inject(&numbered(injected as u32)).is_ok() {
                        injected += 1;
                    }
                },
                1 => { r.rx.rx_burst(&mut in_switch, n); }
                2 => {
                    let take = n.min(in_switch.len());
                    let mut burst: Vec<_> = in_switch.drain(..take).collect();
                    r.tx.tx_burst(&mut burst);
                    // What the device refused goes back to the front, in order.
                    for (i, f) in burst.into_iter().enumerate() {
                        in_switch.insert(i, f);
                    }
                }
                _ => r.clock.advance(ns),
            }
            let mut got = Vec::new();
            delivered += r.collector.collect(&mut got, usize::MAX) as u64;
            prop_assert!(r.rx.stats().conserved());
            prop_assert!(r.tx.stats().conserved());
            prop_assert!(r.rx.stats().held.get() <= hold_frames as u64);
        }
        // Drain everything: receive, transmit, let time pass.
        for _ in 0..2000 {
            r.rx.rx_burst(&mut in_switch, BURST_MAX);
            let mut burst = std::mem::take(&mut in_switch);
            r.tx.tx_burst(&mut burst);
            in_switch.append(&mut burst);
            r.tx.flush();
            let mut got = Vec::new();
            delivered += r.collector.collect(&mut got, usize::MAX) as u64;
            r.clock.advance(10_000);
        }
        let (rs, ts) = (r.rx.stats(), r.tx.stats());
        prop_assert_eq!(rs.held.get(), 0);
        prop_assert_eq!(ts.held.get(), 0);
        prop_assert!(in_switch.is_empty());
        prop_assert_eq!(rs.frames_in.get(), injected);
        prop_assert_eq!(rs.frames_out.get(), ts.frames_in.get());
        prop_assert_eq!(delivered, ts.frames_out.get());
        prop_assert_eq!(
            delivered,
            injected + rs.duplicated.get() + ts.duplicated.get() - rs.lost() - ts.lost()
        );
        drop(r.rx);
        drop(r.tx);
        prop_assert_eq!(r.pool.stats().available, 4096);
    }
}
