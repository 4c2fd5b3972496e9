//! The runtime on DPDK ring ports, in process: a 3-port switch whose ports are
//! `rte_eth_from_rings` cables to test-side DPDK ports. Frames are forwarded and learned, a
//! congested lossless flow makes the switch send PFC XOFF (exact 802.1Qbb bytes) out of the
//! source's port and XON after, the switch restarts on the ports the backend kept open, its
//! lcores are registered EAL lcores while they run, and after the last stop every mbuf is back
//! in the pool. The backend alone is tested in crates/dpdk/tests/backend.rs. One EAL for this
//! file (one process).
#![cfg(feature = "dpdk")]

mod dpdk_common;

use dpdk_common::{
    dpdk_drain, dpdk_receive, eal_args, eventually, host_mac, pfc_frame, udp_frame, Cable,
};
use headroom_core::frame::Frame;
use headroom_core::params::{presets, SwitchParams, Threshold};
use headroom_core::time::Instant as CoreInstant;
use headroom_core::types::PortId;
use headroom_dpdk::{DpdkBackend, DpdkSettings, DEFAULT_DATA_ROOM_BYTES};
use headroom_dpdk::{DpdkPort, DpdkRxQueue, DpdkTxQueue, Eal, Mempool, PortConfig};
use headroom_io::Backend;
use headroom_io::TxQueue;
use headroom_runtime::{start, RuntimeSpec};
use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

const PORTS: usize = 3;

/// ethdev control calls are not thread-safe and the lcore counts below are process-wide:
/// the tests of this file run one at a time.
fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

fn args() -> Vec<String> {
    eal_args("ring", &[])
}

fn eal() -> &'static Eal {
    static EAL: OnceLock<Eal> = OnceLock::new();
    EAL.get_or_init(|| Eal::init_unpinned(&args()).unwrap_or_else(|e| panic!("{e}")))
}

fn settings(devices: &[&str], mbufs: u32) -> DpdkSettings {
    DpdkSettings {
        eal_args: args(),
        mempool_mbufs: mbufs,
        mempool_cache_size: 64,
        rx_descriptors: 512,
        tx_descriptors: 512,
        mtu_by_device: devices.iter().map(|d| ((*d).to_owned(), 1500)).collect(),
        switch_buffer_bytes: 0,
        disable_vdev_offloads: true,
    }
}

/// The test's end of each cable, on its own pool.
struct HostSide {
    rx: DpdkRxQueue,
    tx: DpdkTxQueue,
    _port: DpdkPort,
}

impl HostSide {
    fn send(&mut self, bytes: &[u8]) {
        let mut frame = self.tx.alloc_frame(bytes.len()).expect("a test mbuf");
        frame.data_mut().copy_from_slice(bytes);
        let mut frames = vec![frame];
        assert_eq!(self.tx.tx_burst(&mut frames), 1, "the cable ring has room");
    }
}

struct Rig {
    // Drop order: host ports, then cables (the rings outlive the ports on them).
    hosts: Vec<HostSide>,
    host_pool: Mempool,
    _cables: Vec<Cable>,
}

fn rig(tag: &str) -> (Rig, Vec<String>) {
    let eal = eal();
    let cables: Vec<Cable> = (0..PORTS)
        .map(|i| Cable::new(&format!("{tag}{i}"), 1024))
        .collect();
    let host_pool = Mempool::new(
        eal,
        &format!("{tag}-hosts"),
        2047,
        0,
        DEFAULT_DATA_ROOM_BYTES,
    )
    .expect("pool");
    let hosts = cables
        .iter()
        .map(|c| {
            let mut port = DpdkPort::open(eal, &c.host_end, &PortConfig::default(), &host_pool)
                .unwrap_or_else(|e| panic!("{e}"));
            let (mut rx, mut tx) = port.split().expect("split");
            HostSide {
                rx: rx.remove(0),
                tx: tx.remove(0),
                _port: port,
            }
        })
        .collect();
    let devices = cables.iter().map(|c| c.switch_end.clone()).collect();
    (
        Rig {
            hosts,
            host_pool,
            _cables: cables,
        },
        devices,
    )
}

fn params() -> SwitchParams {
    presets::simple(PORTS, 1_000_000_000)
}

/// Frames a lossless PG takes before XOFF: reserved + static threshold (presets::simple).
fn frames_to_xoff(params: &SwitchParams, frame_len: usize) -> u64 {
    let pg = params.ports[0].pgs[3];
    let Threshold::Static { bytes } = pg.threshold else {
        panic!("presets::simple has a static lossless threshold")
    };
    (params.cells(pg.reserved_bytes) + params.cells(bytes)).div_ceil(params.cells(frame_len as u64))
}

const A: u8 = 0;
const C: u8 = 2;

#[test]
fn forwards_learns_sends_pfc_and_returns_every_mbuf() {
    let _serial = serial();
    let (mut rig, devices) = rig("fw");
    let device_refs: Vec<&str> = devices.iter().map(String::as_str).collect();
    let mut backend =
        DpdkBackend::new(settings(&device_refs, 4095)).unwrap_or_else(|e| panic!("{e}"));
    let eal_lcores = eal().lcore_count();
    let mut params = params();
    params.ports[2].tx_enable = false;
    let spec = RuntimeSpec::single_lcore(params.clone(), devices.clone());
    let running = start(spec, &mut backend).unwrap_or_else(|e| panic!("{e}"));

    // C announces itself on port 2: flooded to ports 0 and 1, byte for byte.
    let hello = udp_frame(host_mac(C), [0xff; 6], 0, 0, 1, 64);
    rig.hosts[2].send(&hello);
    assert_eq!(dpdk_receive(&mut rig.hosts[0].rx, 1), vec![hello.clone()]);
    assert_eq!(dpdk_receive(&mut rig.hosts[1].rx, 1), vec![hello]);
    assert!(
        eventually(|| eal().lcore_count() == eal_lcores + 1),
        "the lcore thread is a registered EAL lcore while it runs ({} lcores)",
        eal().lcore_count()
    );

    // Port 2 does not transmit: lossless traffic (DSCP 3 → TC 3, PFC on) from A to C, which
    // was learned on port 2, queues there until port 0's PG 3 crosses XOFF.
    let frame_len = 1024;
    let xoff_at = frames_to_xoff(&params, frame_len);
    for seq in 0..xoff_at {
        rig.hosts[0].send(&udp_frame(
            host_mac(A),
            host_mac(C),
            3,
            0,
            seq as u32,
            frame_len,
        ));
    }
    let pfc = dpdk_receive(&mut rig.hosts[0].rx, 1);
    let quanta = params.ports[0].pfc_quanta;
    let mut times = [0u16; 8];
    times[3] = quanta;
    assert_eq!(
        pfc,
        vec![pfc_frame(params.ports[0].mac, 0b1000, times)],
        "one PFC XOFF for priority 3 out of port 0, from port 0's MAC"
    );
    // Learned: nothing of A's unicast traffic was flooded to port 1.
    assert_eq!(dpdk_drain(&mut rig.hosts[1].rx), Vec::<Vec<u8>>::new());

    // Port 2 transmits again: every lossless frame arrives, in order, then XON.
    running.shared().set_tx_enable(PortId(2), true);
    let out = dpdk_receive(&mut rig.hosts[2].rx, xoff_at as usize);
    let seqs: Vec<u32> = out.iter().filter_map(|f| dpdk_common::udp_seq(f)).collect();
    assert_eq!(seqs, (0..xoff_at as u32).collect::<Vec<_>>());
    let xon = dpdk_receive(&mut rig.hosts[0].rx, 1);
    assert_eq!(
        xon,
        vec![pfc_frame(params.ports[0].mac, 0b1000, [0; 8])],
        "XON"
    );

    let shared = running.stop();
    let stats = shared.port_stats(PortId(0), CoreInstant::MAX);
    assert_eq!(stats.pfc_tx[3], 2);
    assert_eq!(
        shared.port_stats(PortId(2), CoreInstant::MAX).tx_frames(),
        xoff_at
    );
    assert_eq!(
        eal().lcore_count(),
        eal_lcores,
        "the lcore released its EAL lcore id when it ended"
    );
    // NIC counters of the switch's port 0: it received what host 0 sent.
    assert_eq!(
        backend
            .port(&devices[0])
            .expect("port")
            .nic_stats()
            .expect("stats")
            .rx_packets,
        xoff_at
    );
    assert!(!backend.xstats(&devices[0]).expect("xstats").is_empty());
    drop(shared);
    let check = backend.close_ports();
    assert!(check.is_full(), "{check:?}");
    assert_eq!(check.capacity, 4095);
    drop(backend);
    for host in &mut rig.hosts {
        dpdk_drain(&mut host.rx);
    }
    assert_eq!(rig.host_pool.available(), rig.host_pool.capacity());
}

#[test]
fn restarts_reuse_the_open_ports() {
    let _serial = serial();
    let (mut rig, devices) = rig("rs");
    let device_refs: Vec<&str> = devices.iter().map(String::as_str).collect();
    let settings = settings(&device_refs, 2047);
    let mut backend = DpdkBackend::new(settings.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut ids = BTreeMap::new();
    for round in 0..3u32 {
        let spec = RuntimeSpec::single_lcore(params(), devices.clone());
        let running = start(spec, &mut backend).unwrap_or_else(|e| panic!("round {round}: {e}"));
        for d in &devices {
            let id = backend.port(d).expect("open").port_id();
            assert_eq!(
                *ids.entry(d.clone()).or_insert(id),
                id,
                "the same port every round"
            );
        }
        let frame = udp_frame(host_mac(A), [0xff; 6], 0, 0, round, 100);
        rig.hosts[0].send(&frame);
        assert_eq!(
            dpdk_receive(&mut rig.hosts[1].rx, 1),
            vec![frame.clone()],
            "round {round}"
        );
        assert_eq!(
            dpdk_receive(&mut rig.hosts[2].rx, 1),
            vec![frame],
            "round {round}"
        );
        // While a dataplane runs, its queues are lent out.
        let busy = backend.open(&devices[0]).expect_err("queues are in use");
        assert!(busy.to_string().contains("in use"), "{busy}");
        drop(running.stop());
        backend
            .reconfigure(settings.clone())
            .expect("same settings");
    }
    // What the backend refuses to change without a restart is tested with the backend
    // (crates/dpdk/tests/backend.rs); a smaller MTU it takes, and the next dataplane runs on it.
    // A smaller MTU is fine (the switch checks it; the port keeps its own).
    let mut small = settings.clone();
    small.mtu_by_device.insert(devices[0].clone(), 1000);
    backend.reconfigure(small).expect("smaller MTU");
    let running = start(
        RuntimeSpec::single_lcore(params(), devices.clone()),
        &mut backend,
    )
    .expect("starts with the smaller MTU");
    drop(running.stop());
    let check = backend.close_ports();
    assert!(
        check.is_full() && check.ports_in_use.is_empty(),
        "{check:?}"
    );
    drop(backend);
    for host in &mut rig.hosts {
        dpdk_drain(&mut host.rx);
    }
}

#[test]
fn a_missing_device_or_one_device_for_two_ports_is_refused_at_start() {
    let _serial = serial();
    let (_rig, devices) = rig("er");
    let mut backend = DpdkBackend::new(settings(&[], 1023)).unwrap_or_else(|e| panic!("{e}"));
    let missing = start(
        RuntimeSpec::single_lcore(presets::simple(1, 1_000_000_000), vec!["net_null9".into()]),
        &mut backend,
    )
    .expect_err("no such device");
    assert!(missing.to_string().contains("net_null9"), "{missing}");
    let spec = RuntimeSpec::single_lcore(
        presets::simple(2, 1_000_000_000),
        vec![devices[0].clone(), devices[0].clone()],
    );
    let twice = start(spec, &mut backend).expect_err("one device, two ports");
    assert!(twice.to_string().contains("in use"), "{twice}");
    assert!(backend.close_ports().is_full());
}
