//! Frames between the dataplane and the control plane, end to end on in-memory ports: a frame
//! the control plane injects leaves its port through the egress path (classified, counted);
//! LLDP received on a port is punted to the control thread, never relayed; both leave every
//! frame buffer back in the pool.

use etherparse::PacketBuilder;
use headroom_core::frame::Frame;
use headroom_core::params::presets;
use headroom_core::punt::PuntReason;
use headroom_core::types::PortId;
use headroom_io::pool::{FramePool, PoolConfig};
use headroom_io::{pool_is_full, Backend, MemoryBackend, MemoryTap};
use headroom_runtime::control_frames::InjectError;
use headroom_runtime::{start, LcoreSpec, Running, RuntimeSpec};
use std::time::{Duration, Instant};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const SWITCH: [u8; 6] = [2, 0, 0, 0, 0, 0x5];

fn udp(src: [u8; 6], dst: [u8; 6], dscp: u8) -> Vec<u8> {
    let mut buf = Vec::new();
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 3], 64)
        .udp(1, 4791)
        .write(&mut buf, &[0; 22])
        .unwrap();
    buf[15] = dscp << 2;
    buf[24] = 0;
    buf[25] = 0;
    let sum = headroom_wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&sum.to_be_bytes());
    buf
}

fn lldp(src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0, 0, 0x0E]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x88CCu16.to_be_bytes());
    f
}

/// Collects from `tap` until `want` frames arrived or the deadline passed.
fn collect(tap: &mut MemoryTap, want: usize) -> Vec<Vec<u8>> {
    let end = Instant::now() + Duration::from_secs(5);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < end {
        match tap.collector.pop() {
            Some(f) => got.push(f.data().to_vec()),
            None => std::thread::yield_now(),
        }
    }
    got
}

fn three_ports() -> (MemoryBackend, RuntimeSpec) {
    let pool = FramePool::new(PoolConfig::with_frame_count(2048)).unwrap();
    let backend = MemoryBackend::new(pool, 256);
    let spec = RuntimeSpec::single_lcore(
        presets::simple(3, 1_000_000_000),
        vec!["m0".into(), "m1".into(), "m2".into()],
    );
    (backend, spec)
}

fn taps(backend: &mut MemoryBackend) -> Vec<MemoryTap> {
    ["m0", "m1", "m2"]
        .iter()
        .map(|d| backend.take_tap(d).unwrap())
        .collect()
}

/// Waits until the control thread has taken `n` punted frames of `reason`.
fn wait_punted(running: &mut Running, reason: PuntReason, n: u64) {
    let end = Instant::now() + Duration::from_secs(5);
    while running.punted_unconsumed()[reason.index()] < n && Instant::now() < end {
        running.drain_punts();
        std::thread::yield_now();
    }
    assert_eq!(running.punted_unconsumed()[reason.index()], n);
}

#[test]
fn an_injected_frame_leaves_its_port_classified_and_counted() {
    let (mut backend, spec) = three_ports();
    let mut running = start(spec, &mut backend).expect("starts");
    let mut taps = taps(&mut backend);
    // DSCP 46 → TC 5 → queue 5 on port 1 (SONiC's default maps).
    let frame = udp(SWITCH, A, 46);
    running.inject(PortId(1), &frame).expect("queued");
    assert_eq!(
        collect(&mut taps[1], 1),
        vec![frame.clone()],
        "sent as built"
    );
    // Nothing else anywhere: the frame is sent, not flooded (a broadcast from port 0 is the
    // first frame ports 1 and 2 see next).
    taps[0].injector.inject(&udp(A, [0xff; 6], 0)).unwrap();
    assert_eq!(collect(&mut taps[1], 1)[0][..6], [0xff; 6]);
    assert_eq!(collect(&mut taps[2], 1)[0][..6], [0xff; 6]);
    assert!(taps[0].collector.pop().is_none());
    assert_eq!(
        running.inject(PortId(9), &frame),
        Err(InjectError::UnknownPort(PortId(9)))
    );
    let shared = running.stop();
    let ingress = &shared.ingress_counters[0].ports[1];
    assert_eq!(ingress.inject_frames.get(), 1);
    assert_eq!(ingress.inject_bytes.get(), frame.len() as u64);
    assert_eq!(ingress.inject_drops.iter().map(|c| c.get()).sum::<u64>(), 0);
    assert_eq!(shared.egress_counters[0].ports[1].tx_frames[5].get(), 1);
    drop(taps);
    drop(shared);
    assert!(pool_is_full(backend.pool_stats()), "every buffer is back");
}

#[test]
fn lldp_is_punted_to_the_control_thread_and_not_relayed() {
    let (mut backend, spec) = three_ports();
    let mut running = start(spec, &mut backend).expect("starts");
    let mut taps = taps(&mut backend);
    taps[0].injector.inject(&lldp(A)).unwrap();
    wait_punted(&mut running, PuntReason::Lldp, 1);
    // The next frame ports 1 and 2 see is a broadcast sent after the LLDP frame: the LLDP frame
    // crossed nothing.
    taps[0].injector.inject(&udp(A, [0xff; 6], 0)).unwrap();
    for p in [1, 2] {
        let got = collect(&mut taps[p], 1);
        assert_eq!(got[0][..6], [0xff; 6], "port {p}");
    }
    let shared = running.stop();
    let rx = &shared.ingress_counters[0].ports[0];
    assert_eq!(rx.punt_frames[PuntReason::Lldp.index()].get(), 1);
    assert_eq!(rx.rx_frames.get(), 2);
    drop(taps);
    drop(shared);
    assert!(pool_is_full(backend.pool_stats()), "every buffer is back");
}

#[test]
fn injection_needs_an_lcore_that_both_receives_and_transmits() {
    let (mut backend, mut spec) = three_ports();
    let ports = vec![PortId(0), PortId(1), PortId(2)];
    spec.lcores = vec![
        LcoreSpec {
            cpu: None,
            rx_ports: ports.clone(),
            tx_ports: Vec::new(),
        },
        LcoreSpec {
            cpu: None,
            rx_ports: Vec::new(),
            tx_ports: ports,
        },
    ];
    let mut running = start(spec, &mut backend).expect("starts");
    assert_eq!(
        running.inject(PortId(0), &udp(SWITCH, A, 0)),
        Err(InjectError::NoInjectLcore)
    );
    running.stop();
}
