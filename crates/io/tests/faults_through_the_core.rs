//! The core between two fault-injecting memory ports, in virtual time: whatever the faults
//! (drops, bit flips anywhere including MAC Control and IP headers, truncation, duplicates,
//! reordering, delays, TX stalls, link flaps) and the traffic, nothing panics, every accounting
//! invariant holds at every step, every frame the switch received is forwarded, dropped with a
//! reason, consumed as MAC Control or punted, and once the traffic stops and everything drains every
//! occupancy is back to zero and every frame buffer back in the pool. A MAC Control frame
//! corrupted so that it no longer parses is counted and never pauses anything.

use etherparse::PacketBuilder;
use headroom_core::counters::DropReason;
use headroom_core::frame::Frame;
use headroom_core::params::presets;
use headroom_core::step::LcoreStep;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, Priority};
use headroom_io::fault::{wrap_port, FaultConfig, FaultyRx, FaultyTx, FrameFaults, VirtualClock};
use headroom_io::memory::{Collector, Injector, MemoryRx, MemoryTx};
use headroom_io::{FramePool, MemoryPort, PoolConfig, PoolFrame, PortInfo, RxQueue, TxQueue};
use headroom_wire::ethernet::{parse_l2, EtherType, MacAddress};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr, PfcRepr};
use proptest::prelude::*;

const PORTS: usize = 2;
const HOSTS: [[u8; 6]; PORTS] = [[0x02, 0xaa, 0, 0, 0, 0x0a], [0x02, 0xaa, 0, 0, 0, 0x0b]];
const POOL_FRAMES: usize = 8192;
/// How many times a per-frame fault must have been expected (rate × frames exposed) before a
/// run that saw none of it is a failure: a Poisson count with this mean is zero with
/// probability e^-20.
const MISSES_EXPECTED_MIN: f64 = 20.0;
const SPEED_BPS: u64 = 10_000_000_000;

fn udp_frame(src: [u8; 6], dst: [u8; 6], dscp: u8, len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(49152, 4791)
        .write(&mut buf, &vec![0x5a; len - 42])
        .expect("build");
    // DSCP in place; the IPv4 checksum is refreshed below.
    buf[15] = dscp << 2;
    buf[24..26].copy_from_slice(&[0, 0]);
    let sum = headroom_wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&sum.to_be_bytes());
    buf
}

fn pfc_frame(src: [u8; 6], class_enable: u8, quanta: u16) -> Vec<u8> {
    let mut buf = vec![0u8; 60];
    MacControlRepr::Pfc(PfcRepr {
        class_enable,
        pause_quanta: [quanta; 8],
    })
    .emit_frame(MacAddress(src), &mut buf)
    .expect("60 bytes");
    buf
}

struct Port {
    rx: FaultyRx<MemoryRx>,
    tx: FaultyTx<MemoryTx>,
    wire_in: Injector,
    wire_out: Collector,
    pending: Vec<PoolFrame>,
}

struct Rig {
    pool: FramePool,
    clock: VirtualClock,
    sw: LcoreStep<PoolFrame>,
    ports: Vec<Port>,
    /// Frames the switch received (after the receive faults).
    received: u64,
    /// Frames the switch handed to its transmit wrappers.
    transmitted: u64,
}

impl Rig {
    fn new(config: &FaultConfig) -> Self {
        let pool = FramePool::new(PoolConfig::with_frame_count(POOL_FRAMES)).expect("pool");
        let clock = VirtualClock::at(1_000_000);
        let mut params = presets::simple(PORTS, SPEED_BPS);
        // Small buffers, so that limits, PFC and drops happen too.
        params.pools[0].size_bytes = 512 * 1024;
        let sw = LcoreStep::single(params, Instant::from_nanos(clock.now_ns())).expect("params");
        let ports = (0..PORTS)
            .map(|i| {
                let info = PortInfo {
                    name: format!("mem{i}"),
                    mac: [2, 0, 0, 0, 1, i as u8],
                    max_frame_len: 2048,
                };
                let (rx, tx, wire_in, wire_out) = MemoryPort::new(info, pool.clone(), 1024).split();
                let faulty =
                    wrap_port(rx, tx, config, i as u64, clock.fault_clock()).expect("valid");
                Port {
                    rx: faulty.rx,
                    tx: faulty.tx,
                    wire_in,
                    wire_out,
                    pending: Vec::with_capacity(64),
                }
            })
            .collect();
        Self {
            pool,
            clock,
            sw,
            ports,
            received: 0,
            transmitted: 0,
        }
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(self.clock.now_ns())
    }

    /// One lcore iteration, as the runtime's loop does it.
    fn iterate(&mut self) -> usize {
        let now = self.now();
        let mut moved = 0;
        for p in 0..PORTS {
            let mut burst = Vec::with_capacity(32);
            let n = self.ports[p].rx.rx_burst(&mut burst, 32);
            self.received += n as u64;
            moved += n;
            self.sw.handle_rx_burst(now, PortId(p as u16), &mut burst);
        }
        self.sw.handle_timeout(now);
        for p in 0..PORTS {
            let port = &mut self.ports[p];
            if port.pending.is_empty() {
                let pool = self.pool.clone();
                self.sw
                    .poll_tx_burst(now, PortId(p as u16), &mut port.pending, 32, &mut |len| {
                        pool.alloc(len)
                    });
            }
            let before = port.pending.len();
            port.tx.tx_burst(&mut port.pending);
            port.tx.flush();
            let sent = before - port.pending.len();
            self.transmitted += sent as u64;
            moved += sent;
            // The hosts' side of the wire takes everything.
            while port.wire_out.pop().is_some() {}
        }
        // The control plane's share (the step's call order): punted frames (a corrupted
        // destination can be a reserved group address) are taken and freed.
        while self.sw.poll_punt().is_some() {}
        self.sw.check_invariants();
        moved
    }

    fn queued(&self) -> usize {
        (0..PORTS)
            .map(|p| {
                (0..8)
                    .map(|q| {
                        self.sw
                            .egress()
                            .expect("an egress side")
                            .queue_len(PortId(p as u16), q)
                    })
                    .sum::<usize>()
            })
            .sum()
    }
}

#[derive(Clone, Debug)]
enum Op {
    Send {
        from: usize,
        lossless: bool,
        len: usize,
        count: usize,
    },
    Pause {
        from: usize,
        class_enable: u8,
        quanta: u16,
    },
    Iterate {
        times: usize,
    },
    Advance {
        ns: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..PORTS, any::<bool>(), 64..1500usize, 1..16usize)
            .prop_map(|(from, lossless, len, count)| Op::Send { from, lossless, len, count }),
        1 => (0..PORTS, any::<u8>(), prop::sample::select(vec![0u16, 100, 0xFFFF]))
            .prop_map(|(from, class_enable, quanta)| Op::Pause { from, class_enable, quanta }),
        4 => (1..4usize).prop_map(|times| Op::Iterate { times }),
        2 => (0..50_000u64).prop_map(|ns| Op::Advance { ns }),
    ]
}

fn faults() -> impl Strategy<Value = FrameFaults> {
    (
        prop::array::uniform6(prop::sample::select(vec![0.0, 0.01, 0.05, 0.1])),
        prop::sample::select(vec![0u64, 10_000, 1_000_000]),
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

/// What one run saw, for the record.
#[derive(Clone, Copy, Debug, Default)]
struct Summary {
    received: u64,
    forwarded: u64,
    dropped: u64,
    faults: u64,
}

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)*) => {
        if !$cond {
            return Err(format!($($fmt)*));
        }
    };
}

/// Runs `ops` through the switch between fault-injecting ports, drains, and checks everything.
/// Which faults asked for must have happened, so that a run cannot pass for want of faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MustHappen {
    /// Every kind with a non-zero rate.
    All,
    /// The per-frame kinds (timed ones may be rare in a short run).
    PerFrame,
    /// None (rates so low that a short run may see none).
    Nothing,
}

fn run_and_check(config: &FaultConfig, ops: &[Op], must: MustHappen) -> Result<Summary, String> {
    let mut rig = Rig::new(config);
    for op in ops {
        match *op {
            Op::Send {
                from,
                lossless,
                len,
                count,
            } => {
                let frame = udp_frame(
                    HOSTS[from],
                    HOSTS[1 - from],
                    if lossless { 3 } else { 0 },
                    len,
                );
                for _ in 0..count {
                    let _ = rig.ports[from].wire_in.inject(&frame);
                }
            }
            Op::Pause {
                from,
                class_enable,
                quanta,
            } => {
                let _ =
                    rig.ports[from]
                        .wire_in
                        .inject(&pfc_frame(HOSTS[from], class_enable, quanta));
            }
            Op::Iterate { times } => {
                for _ in 0..times {
                    rig.iterate();
                }
            }
            Op::Advance { ns } => rig.clock.advance(ns),
        }
    }
    // The hosts stop and release every pause; everything drains (pauses expire, stalls and
    // flaps end, held frames are released) as virtual time passes.
    for (port, host) in rig.ports.iter_mut().zip(HOSTS) {
        let _ = port.wire_in.inject(&pfc_frame(host, 0xFF, 0));
    }
    for _ in 0..20_000 {
        let moved = rig.iterate();
        rig.clock.advance(20_000);
        let held: u64 = rig
            .ports
            .iter()
            .map(|p| p.rx.stats().held.get() + p.tx.stats().held.get())
            .sum();
        let waiting: usize = rig
            .ports
            .iter()
            .map(|p| 1024 - p.wire_in.free_slots() + p.pending.len())
            .sum();
        if moved == 0 && held == 0 && waiting == 0 && rig.queued() == 0 {
            break;
        }
    }
    ensure!(rig.queued() == 0, "queues not drained: {}", rig.queued());
    ensure!(
        rig.sw
            .ingress()
            .expect("an ingress side")
            .buffers()
            .is_empty(),
        "ingress occupancy left after the drain"
    );
    ensure!(
        rig.sw
            .ingress()
            .expect("an ingress side")
            .egress_buffers()
            .is_empty(),
        "egress occupancy left after the drain"
    );

    // Every frame the switch received: forwarded, dropped with a reason, consumed as MAC
    // Control, or punted to the control plane. (Two ports: a flood has exactly one destination, so no copies.)
    let mut s = Summary {
        received: rig.received,
        ..Summary::default()
    };
    let mut consumed = 0;
    let mut pfc_sent = 0;
    let mut rx_frames = 0;
    for p in 0..PORTS as u16 {
        let i = rig
            .sw
            .ingress()
            .expect("an ingress side")
            .port_counters(PortId(p));
        let e = rig
            .sw
            .egress()
            .expect("an egress side")
            .port_counters(PortId(p));
        rx_frames += i.rx_frames.get();
        s.forwarded += e.tx_frames.iter().map(|c| c.get()).sum::<u64>();
        s.dropped += i
            .drops
            .iter()
            .chain(e.drops.iter())
            .map(|c| c.get())
            .sum::<u64>();
        consumed += i.pfc_frames_rx.get() + i.pause_rx.get() + i.mac_control_unknown_rx.get();
        consumed += i.punt_frames.iter().map(|c| c.get()).sum::<u64>();
        pfc_sent += e.pfc_frames_tx.get();
    }
    ensure!(
        rx_frames == rig.received,
        "the switch counted {rx_frames} of {} frames received",
        rig.received
    );
    ensure!(
        s.forwarded + s.dropped + consumed == rig.received,
        "forwarded {} + dropped {} + consumed {consumed} != received {}",
        s.forwarded,
        s.dropped,
        rig.received
    );
    ensure!(
        rig.transmitted == s.forwarded + pfc_sent,
        "transmitted {} != forwarded {} + PFC {pfc_sent}",
        rig.transmitted,
        s.forwarded
    );
    for port in &rig.ports {
        ensure!(
            port.rx.stats().conserved() && port.tx.stats().conserved(),
            "a wrapper lost track of a frame"
        );
        ensure!(
            port.rx.stats().held.get() + port.tx.stats().held.get() == 0,
            "frames still held"
        );
    }
    let tx_in: u64 = rig.ports.iter().map(|p| p.tx.stats().frames_in.get()).sum();
    ensure!(
        tx_in == rig.transmitted,
        "transmit wrappers saw {tx_in} of {}",
        rig.transmitted
    );
    // The faults asked for happened, so that the checks above ran under them.
    let happened = |f: fn(&headroom_io::fault::FaultStats) -> u64| -> u64 {
        rig.ports
            .iter()
            .map(|p| f(p.rx.stats()) + f(p.tx.stats()))
            .sum()
    };
    // Frames that drew a fate in each direction (a frame lost to a down link draws none).
    let exposed = |side: fn(&Port) -> &headroom_io::fault::FaultStats| -> f64 {
        rig.ports
            .iter()
            .map(|p| {
                let st = side(p);
                st.frames_in
                    .get()
                    .saturating_sub(st.link_down_dropped.get())
            })
            .sum::<u64>() as f64
    };
    let (rx_exposed, tx_exposed) = (exposed(|p| p.rx.stats()), exposed(|p| p.tx.stats()));
    let (rx, tx) = (&config.rx, &config.tx);
    for (rx_rate, tx_rate, n, kind) in [
        (
            rx.drop_rate,
            tx.drop_rate,
            happened(|s| s.dropped.get()),
            "dropped",
        ),
        (
            rx.corrupt_rate,
            tx.corrupt_rate,
            happened(|s| s.corrupted.get()),
            "corrupted",
        ),
        (
            rx.truncate_rate,
            tx.truncate_rate,
            happened(|s| s.truncated.get()),
            "truncated",
        ),
        (
            rx.duplicate_rate,
            tx.duplicate_rate,
            happened(|s| s.duplicated.get() + s.duplicate_failed.get() + s.hold_full.get()),
            "duplicated",
        ),
        (
            rx.reorder_rate,
            tx.reorder_rate,
            happened(|s| s.reordered.get() + s.hold_full.get()),
            "reordered",
        ),
        (
            rx.delay_rate,
            tx.delay_rate,
            happened(|s| s.delayed.get() + s.hold_full.get()),
            "delayed",
        ),
        (
            config.tx_stalls_per_second,
            0.0,
            happened(|s| s.tx_stalls.get()),
            "stalled",
        ),
        (
            config.link_flaps_per_second,
            0.0,
            happened(|s| s.link_flaps.get()),
            "flapped",
        ),
    ] {
        let timed = matches!(kind, "stalled" | "flapped");
        // A per-frame fault is required only where it was expected at least
        // MISSES_EXPECTED_MIN times: it is then missed with probability below e^-20. A run whose
        // transmit side saw few frames (a flapping link, a paused class) may rightly see none.
        let expected = rx_rate * rx_exposed + tx_rate * tx_exposed;
        let required = match must {
            MustHappen::All => rx_rate + tx_rate > 0.0,
            MustHappen::PerFrame => !timed && expected >= MISSES_EXPECTED_MIN,
            MustHappen::Nothing => false,
        };
        ensure!(
            !required || n > 0,
            "rate rx {rx_rate} tx {tx_rate} (expected {expected:.1}) but nothing {kind}"
        );
        s.faults += n;
    }
    drop(rig.ports);
    drop(rig.sw);
    ensure!(
        rig.pool.stats().available == POOL_FRAMES,
        "frame buffers not returned: {} of {POOL_FRAMES}",
        rig.pool.stats().available
    );
    Ok(s)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn under_faults_every_frame_is_accounted_and_every_occupancy_returns_to_zero(
        seed in any::<u64>(),
        rx in faults(),
        tx in faults(),
        stall in prop::sample::select(vec![0.0, 20_000.0]),
        flap in prop::sample::select(vec![0.0, 5_000.0]),
        ops in proptest::collection::vec(op(), 300..600),
    ) {
        let config = FaultConfig {
            seed,
            rx,
            tx,
            tx_stalls_per_second: stall,
            tx_stall_ns: 200_000,
            link_flaps_per_second: flap,
            link_down_ns: 50_000,
            ..FaultConfig::default()
        };
        // Each per-frame fault asked for must happen where enough frames met it (see
        // MISSES_EXPECTED_MIN); timed ones may be rare in a short run.
        if let Err(e) = run_and_check(&config, &ops, MustHappen::PerFrame) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// A fixed traffic pattern: both hosts send lossless and lossy frames of mixed sizes, pause
/// each other now and then, and the switch is polled as an lcore would.
fn pattern() -> Vec<Op> {
    let mut ops = Vec::new();
    for round in 0..400usize {
        ops.push(Op::Send {
            from: round % 2,
            lossless: round % 3 != 0,
            len: 64 + (round * 97) % 1400,
            count: 4,
        });
        if round % 50 == 7 {
            ops.push(Op::Pause {
                from: round % 2,
                class_enable: 0b1_1000,
                quanta: 0xFFFF,
            });
        }
        ops.push(Op::Iterate { times: 1 });
        ops.push(Op::Advance { ns: 5_000 });
    }
    ops
}

/// Every fault kind alone at three rates, four seeds each, in both directions: the record in
/// docs/reliability.md (`cargo test -p headroom-io --test faults_through_the_core fault_matrix
/// -- --nocapture` prints it). Per-frame kinds: the probability per frame; stalls and flaps:
/// events per second of virtual time (a run lasts about 2 ms).
#[test]
fn fault_matrix() {
    let ops = pattern();
    type Apply = fn(&mut FaultConfig, f64);
    const PER_FRAME: [f64; 3] = [0.001, 0.01, 0.1];
    const PER_SECOND: [f64; 3] = [1_000.0, 10_000.0, 100_000.0];
    let kinds: [(&str, [f64; 3], Apply); 8] = [
        ("drop", PER_FRAME, |c, r| {
            c.rx.drop_rate = r;
            c.tx.drop_rate = r;
        }),
        ("corrupt", PER_FRAME, |c, r| {
            c.rx.corrupt_rate = r;
            c.tx.corrupt_rate = r;
        }),
        ("truncate", PER_FRAME, |c, r| {
            c.rx.truncate_rate = r;
            c.tx.truncate_rate = r;
        }),
        ("duplicate", PER_FRAME, |c, r| {
            c.rx.duplicate_rate = r;
            c.tx.duplicate_rate = r;
        }),
        ("reorder", PER_FRAME, |c, r| {
            c.rx.reorder_rate = r;
            c.tx.reorder_rate = r;
        }),
        ("delay ≤ 1 ms", PER_FRAME, |c, r| {
            c.rx.delay_rate = r;
            c.tx.delay_rate = r;
            c.rx.delay_max_ns = 1_000_000;
            c.tx.delay_max_ns = 1_000_000;
        }),
        ("tx stall of 200 µs", PER_SECOND, |c, r| {
            c.tx_stalls_per_second = r;
            c.tx_stall_ns = 200_000;
        }),
        ("link flap of 500 µs", PER_SECOND, |c, r| {
            c.link_flaps_per_second = r;
            c.link_down_ns = 500_000;
        }),
    ];
    eprintln!(
        "| fault | rate | runs | frames received | forwarded | dropped, each with a reason | \
         faults injected | result |"
    );
    eprintln!("|---|---|---|---|---|---|---|---|");
    for (name, rates, apply) in kinds {
        for (i, rate) in rates.into_iter().enumerate() {
            let mut total = Summary::default();
            let runs = 4;
            for seed in 0..runs {
                let mut config = FaultConfig {
                    seed,
                    ..FaultConfig::default()
                };
                apply(&mut config, rate);
                // At the lowest rate a kind may not happen in a short run: check the rest.
                let must = if i == 0 {
                    MustHappen::Nothing
                } else {
                    MustHappen::All
                };
                let s = run_and_check(&config, &ops, must)
                    .unwrap_or_else(|e| panic!("{name} at {rate}, seed {seed}: {e}"));
                total.received += s.received;
                total.forwarded += s.forwarded;
                total.dropped += s.dropped;
                total.faults += s.faults;
            }
            let unit = if rates == PER_SECOND { "/s" } else { "" };
            eprintln!(
                "| {name} | {rate}{unit} | {runs} | {} | {} | {} | {} | ok |",
                total.received, total.forwarded, total.dropped, total.faults
            );
        }
    }
}

/// What the wire parser makes of a MAC Control frame as the core would see it: `None` when it
/// is not MAC Control at all (its EtherType was hit), `Some(Err)` when it does not parse.
fn as_mac_control(bytes: &[u8]) -> Option<Result<MacControlRepr, ()>> {
    let Ok(l2) = parse_l2(bytes) else {
        // Cut or bent below its Ethernet header: a runt (or a double tag).
        return Some(Err(()));
    };
    if l2.ethertype != EtherType::MacControl {
        return None;
    }
    if l2.vlan.is_some() {
        return Some(Err(()));
    }
    Some(
        MacControlFrame::new_checked(bytes)
            .and_then(|f| MacControlRepr::parse(&f))
            .map_err(|_| ()),
    )
}

#[test]
fn a_corrupted_pfc_frame_that_does_not_parse_is_counted_and_never_honoured() {
    // Every received frame corrupted (or, in a second pass, truncated).
    for (name, faults) in [
        (
            "corrupt",
            FrameFaults {
                corrupt_rate: 1.0,
                ..FrameFaults::none()
            },
        ),
        (
            "truncate",
            FrameFaults {
                truncate_rate: 1.0,
                ..FrameFaults::none()
            },
        ),
    ] {
        let config = FaultConfig {
            seed: 11,
            rx: faults,
            ..FaultConfig::default()
        };
        let mut rig = Rig::new(&config);
        let (mut malformed, mut honoured, mut other) = (0u32, 0u32, 0u32);
        for _ in 0..4000 {
            // XOFF for every priority, the longest pause: without the corruption it would
            // pause priorities 3 and 4 (pfc_enable) of port 0.
            let original = pfc_frame(HOSTS[0], 0xFF, 0xFFFF);
            rig.ports[0].wire_in.inject(&original).expect("room");
            let mut burst = Vec::new();
            assert_eq!(rig.ports[0].rx.rx_burst(&mut burst, 32), 1);
            let bytes = burst[0].data().to_vec();
            let counters = rig
                .sw
                .ingress()
                .expect("an ingress side")
                .port_counters(PortId(0));
            let refused = |c: &headroom_core::counters::IngressPortCounters| {
                [
                    DropReason::MacControlMalformed,
                    DropReason::Runt,
                    DropReason::VlanFiltered,
                ]
                .iter()
                .map(|r| c.drops[r.index()].get())
                .sum::<u64>()
            };
            let before = (refused(counters), counters.pfc_frames_rx.get());
            let now = rig.now();
            rig.sw.handle_rx_burst(now, PortId(0), &mut burst);
            let counters = rig
                .sw
                .ingress()
                .expect("an ingress side")
                .port_counters(PortId(0));
            let after = (refused(counters), counters.pfc_frames_rx.get());
            let paused: Vec<u8> = (0..8u8)
                .filter(|&p| {
                    rig.sw
                        .shared()
                        .pfc
                        .paused_until(0, Priority::from_low_bits(p))
                        > now
                })
                .collect();
            match as_mac_control(&bytes) {
                Some(Err(())) => {
                    malformed += 1;
                    assert_eq!(
                        after.0,
                        before.0 + 1,
                        "{name}: counted as malformed or runt"
                    );
                    assert!(
                        paused.is_empty(),
                        "{name}: a malformed frame paused {paused:?}: {bytes:02x?}"
                    );
                }
                Some(Ok(MacControlRepr::Pfc(pfc))) => {
                    honoured += 1;
                    assert_eq!(after.1, before.1 + 1);
                    // Honoured for what it says, within pfc_enable (3 and 4).
                    let expected: Vec<u8> = [3u8, 4]
                        .into_iter()
                        .filter(|&p| {
                            pfc.class_enable & 1 << p != 0 && pfc.pause_quanta[usize::from(p)] > 0
                        })
                        .collect();
                    assert_eq!(paused, expected, "{name}: {pfc:?}");
                }
                Some(Ok(_)) | None => {
                    // PAUSE (802.3x off), an unknown opcode, or no longer MAC Control: never
                    // a PFC pause.
                    other += 1;
                    assert!(paused.is_empty(), "{name}: {bytes:02x?} paused {paused:?}");
                }
            }
            // Let any pause expire (65535 quanta at 10 Gb/s: 3.4 ms) and drain what was
            // forwarded as data.
            rig.clock.advance(5_000_000);
            rig.iterate();
        }
        eprintln!("{name}: {malformed} malformed, {honoured} still valid PFC, {other} other");
        // Flips in the quanta and the padding leave a valid frame: about one in five breaks it.
        assert!(
            malformed > 500,
            "{name}: the malformed case was exercised ({malformed})"
        );
    }
}
