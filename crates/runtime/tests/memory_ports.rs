//! The runtime end to end on in-memory ports: frames injected on one port come out of another,
//! PFC frames come out of the congested source's port, and after a stop every frame buffer is
//! back in the pool.

use etherparse::PacketBuilder;
use headroom_core::frame::Frame;
use headroom_core::params::presets;
use headroom_core::types::PortId;
use headroom_io::pool::{FramePool, PoolConfig};
use headroom_io::{pool_is_full, Backend, MemoryBackend, MemoryTap};
use headroom_runtime::{start, RuntimeSpec};
use std::time::{Duration, Instant};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];

fn frame(src: [u8; 6], dst: [u8; 6], dscp: u8, len: usize) -> Vec<u8> {
    let mut buf = Vec::new();
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 3], 64)
        .udp(1, 4791)
        .write(&mut buf, &vec![0; len - 42])
        .unwrap();
    buf[15] = dscp << 2;
    // Fix the IPv4 checksum after changing the TOS byte.
    buf[24] = 0;
    buf[25] = 0;
    let sum = headroom_wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&sum.to_be_bytes());
    buf
}

/// Collects from `tap` until `want` frames arrived or the deadline passed.
fn collect(tap: &mut MemoryTap, want: usize, deadline: Duration) -> Vec<Vec<u8>> {
    let end = Instant::now() + deadline;
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < end {
        match tap.collector.pop() {
            Some(f) => got.push(f.data().to_vec()),
            None => std::thread::yield_now(),
        }
    }
    got
}

#[test]
fn forwards_and_generates_pfc_and_returns_every_buffer() {
    let pool = FramePool::new(PoolConfig::with_frame_count(4096)).unwrap();
    let mut backend = MemoryBackend::new(pool, 1024);
    let mut params = presets::simple(3, 1_000_000_000);
    params.ports[2].tx_enable = false;
    let spec =
        RuntimeSpec::single_lcore(params.clone(), vec!["m0".into(), "m1".into(), "m2".into()]);
    let running = start(spec, &mut backend).expect("starts");
    let mut taps: Vec<MemoryTap> = ["m0", "m1", "m2"]
        .iter()
        .map(|d| backend.take_tap(d).unwrap())
        .collect();

    // C announces itself on port 2 (flooded to ports 0 and 1).
    taps[2]
        .injector
        .inject(&frame(C, [0xff; 6], 0, 64))
        .unwrap();
    assert_eq!(collect(&mut taps[0], 1, Duration::from_secs(5)).len(), 1);
    assert_eq!(collect(&mut taps[1], 1, Duration::from_secs(5)).len(), 1);

    // Port 2 does not transmit: lossless traffic from A builds up until PFC XOFF on port 0.
    let cells = params.cells(1024);
    let pg = params.ports[0].pgs[3];
    let headroom_core::params::Threshold::Static { bytes } = pg.threshold else {
        panic!()
    };
    let xoff_at = (params.cells(pg.reserved_bytes) + params.cells(bytes)).div_ceil(cells);
    for _ in 0..xoff_at {
        while taps[0].injector.inject(&frame(A, C, 3, 1024)).is_err() {
            std::thread::yield_now();
        }
    }
    let pfc = collect(&mut taps[0], 1, Duration::from_secs(5));
    assert_eq!(pfc.len(), 1, "a PFC frame out of port 0");
    assert_eq!(
        &pfc[0][12..16],
        &[0x88, 0x08, 0x01, 0x01],
        "MAC Control, PFC opcode"
    );
    assert_eq!(pfc[0][17], 0b1000, "priority 3");

    // Let port 2 transmit: everything arrives, then XON.
    running.shared().set_tx_enable(PortId(2), true);
    let out = collect(&mut taps[2], xoff_at as usize, Duration::from_secs(5));
    assert_eq!(out.len() as u64, xoff_at);
    let xon = collect(&mut taps[0], 1, Duration::from_secs(5));
    assert_eq!(xon.len(), 1);
    assert_eq!(
        (xon[0][17], &xon[0][24..26]),
        (0b1000, &[0u8, 0][..]),
        "XON: quanta 0 for priority 3"
    );

    let shared = running.stop();
    let stats = shared.port_stats(PortId(0), headroom_core::time::Instant::MAX);
    assert_eq!(stats.pfc_tx[3], 2);
    drop(taps);
    drop(shared);
    assert!(
        pool_is_full(backend.pool_stats()),
        "every frame buffer is back in the pool"
    );
}

/// Two RX lcores: a station heard by one is known to the other (learn rings), so the other
/// forwards frames for it to its port only; `show fdb` lists each station once.
#[test]
fn a_station_learned_on_one_rx_lcore_is_unicast_by_another() {
    use headroom_runtime::LcoreSpec;
    let pool = FramePool::new(PoolConfig::with_frame_count(4096)).unwrap();
    let mut backend = MemoryBackend::new(pool, 1024);
    let params = presets::simple(3, 1_000_000_000);
    let mut spec =
        RuntimeSpec::single_lcore(params.clone(), vec!["m0".into(), "m1".into(), "m2".into()]);
    spec.lcores = vec![
        LcoreSpec {
            cpu: None,
            rx_ports: vec![PortId(0), PortId(1)],
            tx_ports: vec![PortId(0), PortId(1), PortId(2)],
        },
        LcoreSpec {
            cpu: None,
            rx_ports: vec![PortId(2)],
            tx_ports: vec![],
        },
    ];
    let mut running = start(spec, &mut backend).expect("starts");
    let mut taps: Vec<MemoryTap> = ["m0", "m1", "m2"]
        .iter()
        .map(|d| backend.take_tap(d).unwrap())
        .collect();

    // A announces itself on port 0 (first lcore): flooded to ports 1 and 2.
    taps[0]
        .injector
        .inject(&frame(A, [0xff; 6], 0, 64))
        .unwrap();
    assert_eq!(collect(&mut taps[1], 1, Duration::from_secs(5)).len(), 1);
    assert_eq!(collect(&mut taps[2], 1, Duration::from_secs(5)).len(), 1);
    // C, on port 2 (second lcore), sends to A: port 0 only, never flooded to port 1.
    for _ in 0..10 {
        taps[2].injector.inject(&frame(C, A, 0, 64)).unwrap();
    }
    assert_eq!(collect(&mut taps[0], 10, Duration::from_secs(5)).len(), 10);
    assert!(
        collect(&mut taps[1], 1, Duration::from_millis(200)).is_empty(),
        "not flooded"
    );
    // Both lcores hold both stations; show fdb lists each once, where it is.
    let fdb: Vec<(u16, [u8; 6], PortId)> = running
        .fdb()
        .into_iter()
        .map(|e| (e.vid, e.mac, e.port))
        .collect();
    let vid = fdb.first().map_or(0, |e| e.0);
    assert_eq!(fdb, vec![(vid, A, PortId(0)), (vid, C, PortId(2))]);
    let shared = running.stop();
    assert_eq!(
        shared.ingress_counters[0].fdb_sync_overflow.get()
            + shared.ingress_counters[1].fdb_sync_overflow.get(),
        0
    );
}
