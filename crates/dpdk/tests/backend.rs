//! `DpdkBackend`, headroom-io's `Backend` over DPDK, on its own (no switch): ports are opened
//! once and lent out again after each dataplane, a port lent out cannot be lent twice, changes
//! that need a new EAL or mempool are refused with a message saying so, bad devices and
//! oversized pools get clear errors, and after `close_ports` every mbuf is back. The runtime's
//! tests (crates/runtime/tests/dpdk_*.rs) run the switch on it. One EAL for this file.
#![cfg(feature = "dpdk")]

mod common;

use headroom_dpdk::{DpdkBackend, DpdkSettings, DpdkSetupError};
use headroom_io::{Backend, RxQueue, TxQueue, BURST_MAX};

const VDEVS: &[&str] = &["--vdev=net_null0", "--vdev=net_null1"];
const DEVICES: &[&str] = &["net_null0", "net_null1"];

/// Settings on the file's EAL (the backend joins it: same arguments), `mbufs` mbufs.
fn settings(mbufs: u32) -> DpdkSettings {
    DpdkSettings {
        eal_args: common::eal_args(VDEVS),
        mempool_mbufs: mbufs,
        mempool_cache_size: 32,
        rx_descriptors: 512,
        tx_descriptors: 512,
        mtu_by_device: DEVICES.iter().map(|d| ((*d).to_owned(), 1500)).collect(),
        switch_buffer_bytes: 0,
        disable_vdev_offloads: true,
    }
}

/// Moves one burst from `device`'s RX to its TX (net_null: RX allocates, TX frees).
fn one_burst(backend: &mut DpdkBackend, device: &str) -> usize {
    let mut port = backend.open(device).unwrap_or_else(|e| panic!("{e}"));
    let mut frames = Vec::with_capacity(BURST_MAX);
    let received = port.rx.rx_burst(&mut frames, BURST_MAX);
    let sent = port.tx.tx_burst(&mut frames);
    assert_eq!(sent, received, "net_null's TX takes everything");
    received
}

#[test]
fn ports_are_opened_once_and_lent_out_again() {
    let _serial = common::serial();
    let _eal = common::eal(VDEVS);
    let mut backend = DpdkBackend::new(settings(1023)).unwrap_or_else(|e| panic!("{e}"));
    let mut ids = Vec::new();
    for round in 0..3 {
        let lent = backend.open(DEVICES[0]).unwrap_or_else(|e| panic!("{e}"));
        let id = backend.port(DEVICES[0]).expect("kept").port_id();
        ids.push(id);
        assert_eq!(lent.info.max_frame_len, 1500 + 18, "round {round}");
        // While its queues are out, the port cannot be lent again.
        let busy = backend.open(DEVICES[0]).expect_err("queues in use");
        assert!(busy.to_string().contains("in use"), "{busy}");
        assert!(busy.to_string().contains(DEVICES[0]), "{busy}");
        drop(lent);
        assert_eq!(
            one_burst(&mut backend, DEVICES[0]),
            BURST_MAX,
            "round {round}"
        );
        backend
            .reconfigure(settings(1023))
            .expect("the same settings");
    }
    assert!(
        ids.iter().all(|id| *id == ids[0]),
        "one port all along: {ids:?}"
    );
    assert_eq!(backend.ports().len(), 1, "net_null1 was never opened");
    let check = backend.close_ports();
    assert!(
        check.is_full() && check.ports_in_use.is_empty(),
        "{check:?}"
    );
    assert_eq!(check.capacity, 1023);
}

#[test]
fn changes_that_need_a_new_eal_or_mempool_are_refused() {
    let _serial = common::serial();
    let _eal = common::eal(VDEVS);
    let mut backend = DpdkBackend::new(settings(1023)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one_burst(&mut backend, DEVICES[1]), BURST_MAX);
    let mut more_mbufs = settings(1023);
    more_mbufs.mempool_mbufs += 1;
    let refused = backend
        .reconfigure(more_mbufs)
        .expect_err("needs a restart");
    assert!(
        matches!(&refused, DpdkSetupError::NeedsRestart(why) if why.contains("mempool_mbufs")),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("restart headroom"),
        "{refused}"
    );
    let mut jumbo = settings(1023);
    jumbo.mtu_by_device.insert(DEVICES[1].to_owned(), 9000);
    let refused = backend.reconfigure(jumbo).expect_err("mbufs too small");
    assert!(refused.to_string().contains("MTU"), "{refused}");
    // The settings in force are the old ones: the port opens as before.
    assert_eq!(backend.settings().mempool_mbufs, 1023);
    // A smaller MTU needs nothing new: the switch sees it, the port keeps its own.
    let mut small = settings(1023);
    small.mtu_by_device.insert(DEVICES[1].to_owned(), 1000);
    backend.reconfigure(small).expect("a smaller MTU");
    let port = backend.open(DEVICES[1]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(port.info.max_frame_len, 1000 + 18);
    drop(port);
    assert!(backend.close_ports().is_full());
}

#[test]
fn bad_devices_oversized_pools_and_other_eal_arguments_get_clear_errors() {
    let _serial = common::serial();
    let _eal = common::eal(VDEVS);
    // A pool that cannot fit in -m 512 without hugepages (one 4 KiB page per mbuf).
    let too_big = DpdkBackend::new(settings(200_000)).expect_err("too large for -m");
    let text = too_big.to_string();
    assert!(
        text.contains("mempool_mbufs = 200000") && text.contains("-m 512"),
        "{text}"
    );
    let mut backend = DpdkBackend::new(settings(1023)).unwrap_or_else(|e| panic!("{e}"));
    let missing = backend.open("net_null9").expect_err("no such device");
    assert!(missing.to_string().contains("net_null9"), "{missing}");
    assert!(
        missing.to_string().contains("net_null0"),
        "the error lists the ports that exist: {missing}"
    );
    // Other EAL arguments in the same process are refused with the running ones named.
    let mut other = settings(1023);
    other.eal_args.push("--no-telemetry".into());
    let refused = DpdkBackend::new(other).expect_err("EAL already runs");
    assert!(refused.to_string().contains("eal_args"), "{refused}");
    assert!(backend.close_ports().is_full());
}
