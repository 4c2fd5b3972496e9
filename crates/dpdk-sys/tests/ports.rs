//! Frames through real DPDK ports in one process (one EAL for this file):
//! an in-process ring "cable" between two ports built with
//! rte_eth_from_rings, a `--vdev=net_ring0` port (which loops TX back to its
//! own RX), and a `--vdev=net_null0` port (RX makes frames, TX drops them).
#![cfg(feature = "dpdk")]

mod common;

use std::ffi::{CStr, CString};

use dpdk_sys as sys;

const EAL_VDEVS: &[&str] = &["--vdev=net_ring0", "--vdev=net_null0"];

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = common::serial();
    common::eal(EAL_VDEVS);
    guard
}

/// Frame lengths from the minimum (60) to a full 1514-byte frame.
fn varied_lengths(count: u16) -> Vec<usize> {
    (0..count)
        .map(|i| 60 + (usize::from(i) * 97) % (1514 - 60 + 1))
        .collect()
}

fn ring(name: &str) -> *mut sys::rte_ring {
    let c_name = CString::new(name).expect("no NUL");
    // SAFETY: c_name is a valid C string (copied by DPDK); EAL is up.
    let ring = unsafe {
        sys::rte_ring_create(
            c_name.as_ptr(),
            1024,
            sys::SOCKET_ID_ANY,
            sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
        )
    };
    assert!(
        !ring.is_null(),
        "rte_ring_create({name}): {}",
        sys::strerror(sys::errno())
    );
    ring
}

/// Sends `frames` from `tx_port` and checks `rx_port` receives exactly them,
/// in order, byte for byte; frees what it received.
fn send_and_expect(pool: *mut sys::rte_mempool, tx_port: u16, rx_port: u16, frames: &[Vec<u8>]) {
    let mut sent = common::mbufs_from_frames(pool, frames);
    let (_, in_use) = common::pool_counts(pool);
    assert!(
        in_use >= u32::try_from(frames.len()).expect("small"),
        "mbufs are out of the pool"
    );
    common::tx_all(tx_port, &mut sent);
    let mut received = common::rx_until(rx_port, frames.len());
    assert_eq!(
        received.len(),
        frames.len(),
        "port {tx_port} -> {rx_port}: frames lost"
    );
    for (index, (mbuf, expected)) in received.iter().zip(frames).enumerate() {
        // SAFETY: mbuf was just returned by rx_burst and is owned by us.
        let (data_len, pkt_len) = unsafe {
            (
                sys::headroom_shim_pktmbuf_data_len(*mbuf),
                sys::headroom_shim_pktmbuf_pkt_len(*mbuf),
            )
        };
        assert_eq!(
            usize::from(data_len),
            expected.len(),
            "frame {index} data_len"
        );
        assert_eq!(pkt_len as usize, expected.len(), "frame {index} pkt_len");
        assert_eq!(&common::mbuf_bytes(*mbuf), expected, "frame {index} bytes");
    }
    common::free_all(&mut received);
}

#[test]
fn ring_pair_carries_frames_both_ways_and_returns_every_mbuf() {
    let _serial = setup();
    const POOL_SIZE: u32 = 4095;
    let pool = common::pool("ring_pair_pool", POOL_SIZE);
    assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));

    // A cable: A transmits into `a_to_b`, which is B's receive ring, and
    // the other way round.
    let a_to_b = ring("hr_a_to_b");
    let b_to_a = ring("hr_b_to_a");
    let name_a = CString::new("hr_cable_a").expect("no NUL");
    let name_b = CString::new("hr_cable_b").expect("no NUL");
    // SAFETY: the ring arrays hold one live ring each and outlive the calls;
    // the names are valid C strings.
    let (port_a, port_b) = unsafe {
        let a = sys::rte_eth_from_rings(name_a.as_ptr(), &b_to_a, 1, &a_to_b, 1, 0);
        let b = sys::rte_eth_from_rings(name_b.as_ptr(), &a_to_b, 1, &b_to_a, 1, 0);
        assert!(
            a >= 0 && b >= 0,
            "rte_eth_from_rings: {a}, {b}: {}",
            sys::strerror(sys::errno())
        );
        (
            u16::try_from(a).expect("port id"),
            u16::try_from(b).expect("port id"),
        )
    };
    assert_ne!(port_a, port_b);
    // rte_eth_from_rings registers the port as vdev "net_ring_<name>".
    assert_eq!(common::port_by_name("net_ring_hr_cable_a"), port_a);
    assert_eq!(common::port_by_name("net_ring_hr_cable_b"), port_b);

    common::configure_and_start(port_a, pool);
    common::configure_and_start(port_b, pool);

    let a_frames: Vec<Vec<u8>> = varied_lengths(32)
        .into_iter()
        .enumerate()
        .map(|(i, len)| common::frame(i as u16, len))
        .collect();
    let b_frames: Vec<Vec<u8>> = varied_lengths(17)
        .into_iter()
        .enumerate()
        .map(|(i, len)| common::frame(1000 + i as u16, len))
        .collect();
    send_and_expect(pool, port_a, port_b, &a_frames);
    send_and_expect(pool, port_b, port_a, &b_frames);

    // Nothing leaked back onto the sender's own receive queue (ring TX
    // enqueues synchronously, so one poll is conclusive).
    assert_eq!(common::rx_once(port_a), 0);
    assert_eq!(common::rx_once(port_b), 0);

    // SAFETY: both ports are started; the stats struct is a live local.
    let stats_a = unsafe {
        let mut stats = sys::rte_eth_stats::default();
        assert_eq!(sys::rte_eth_stats_get(port_a, &mut stats), 0);
        stats
    };
    assert_eq!(stats_a.opackets, 32);
    assert_eq!(stats_a.ipackets, 17);

    common::stop_and_close(port_a);
    common::stop_and_close(port_b);
    // SAFETY: the ports using the rings are closed; rings were created here.
    unsafe {
        sys::rte_ring_free(a_to_b);
        sys::rte_ring_free(b_to_a);
    }
    assert_eq!(
        common::pool_counts(pool),
        (POOL_SIZE, 0),
        "every mbuf back in the pool"
    );
    // SAFETY: no mbuf of this pool is referenced any more (counts above).
    unsafe { sys::rte_mempool_free(pool) };
}

#[test]
fn net_ring_vdev_loops_tx_back_to_its_own_rx() {
    let _serial = setup();
    const POOL_SIZE: u32 = 1023;
    let pool = common::pool("vdev_ring_pool", POOL_SIZE);
    let port = common::port_by_name("net_ring0");

    // SAFETY: dev_info is a live local; port is valid.
    let driver = unsafe {
        let mut dev_info: sys::rte_eth_dev_info = std::mem::zeroed();
        assert_eq!(sys::rte_eth_dev_info_get(port, &mut dev_info), 0);
        assert!(dev_info.max_rx_queues >= 1 && dev_info.max_tx_queues >= 1);
        CStr::from_ptr(dev_info.driver_name)
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(driver, "net_ring");
    let mut name_buf = [0 as std::ffi::c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: name_buf has RTE_ETH_NAME_MAX_LEN bytes, as the API requires.
    let name = unsafe {
        assert_eq!(
            sys::rte_eth_dev_get_name_by_port(port, name_buf.as_mut_ptr()),
            0
        );
        CStr::from_ptr(name_buf.as_ptr())
            .to_string_lossy()
            .into_owned()
    };
    assert_eq!(name, "net_ring0");

    common::configure_and_start(port, pool);
    // SAFETY: port is started; link is a live local.
    let link = unsafe {
        let mut link = sys::rte_eth_link::default();
        assert_eq!(sys::rte_eth_link_get_nowait(port, &mut link), 0);
        link
    };
    assert_eq!(u32::from(link.link_status()), sys::RTE_ETH_LINK_UP);

    // The ring PMD has no flow-control op: the port backend must accept
    // ENOTSUP when it turns NIC pause off (headroom does PFC in software).
    // SAFETY: fc_conf is a live local; port is valid.
    let fc_rc = unsafe {
        let mut fc_conf = sys::rte_eth_fc_conf::default();
        sys::rte_eth_dev_flow_ctrl_get(port, &mut fc_conf)
    };
    assert_eq!(fc_rc, -libc::ENOTSUP);

    let frames: Vec<Vec<u8>> = varied_lengths(64)
        .into_iter()
        .enumerate()
        .map(|(i, len)| common::frame(i as u16, len))
        .collect();
    for chunk in frames.chunks(32) {
        send_and_expect(pool, port, port, chunk);
    }

    common::stop_and_close(port);
    assert_eq!(
        common::pool_counts(pool),
        (POOL_SIZE, 0),
        "every mbuf back in the pool"
    );
    // SAFETY: no mbuf of this pool is referenced any more.
    unsafe { sys::rte_mempool_free(pool) };
}

#[test]
fn net_null_vdev_makes_64_byte_frames_and_counts_them_in_xstats() {
    let _serial = setup();
    const POOL_SIZE: u32 = 1023;
    let pool = common::pool("vdev_null_pool", POOL_SIZE);
    let port = common::port_by_name("net_null0");
    common::configure_and_start(port, pool);
    // SAFETY: port is valid.
    assert_eq!(unsafe { sys::rte_eth_stats_reset(port) }, 0);

    // net_null's RX allocates mbufs from the queue's pool and sets the
    // configured size (default 64) without writing the bytes.
    let mut received = common::rx_until(port, 32);
    assert_eq!(received.len(), 32);
    for mbuf in &received {
        // SAFETY: mbuf was returned by rx_burst and is owned by us.
        unsafe {
            assert_eq!(sys::headroom_shim_pktmbuf_data_len(*mbuf), 64);
            assert_eq!(sys::headroom_shim_pktmbuf_pkt_len(*mbuf), 64);
            assert_eq!((**mbuf).pool, pool);
        }
    }
    assert_eq!(common::pool_counts(pool).1, 32);
    // TX hands them to the PMD, which frees them.
    common::tx_all(port, &mut received);
    assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));

    // Extended stats include the generic ethdev counters.
    // SAFETY: NULL/0 asks for the count; the vectors have room for `count`.
    let counters = unsafe {
        let count = sys::rte_eth_xstats_get_names(port, std::ptr::null_mut(), 0);
        assert!(count > 0, "xstats count {count}");
        let count_usize = usize::try_from(count).expect("positive");
        let count_u32 = u32::try_from(count).expect("positive");
        let mut names = vec![sys::rte_eth_xstat_name::default(); count_usize];
        let mut values = vec![sys::rte_eth_xstat::default(); count_usize];
        assert_eq!(
            sys::rte_eth_xstats_get_names(port, names.as_mut_ptr(), count_u32),
            count
        );
        assert_eq!(
            sys::rte_eth_xstats_get(port, values.as_mut_ptr(), count_u32),
            count
        );
        values
            .iter()
            .map(|value| {
                let name = &names[usize::try_from(value.id).expect("id fits")].name;
                (
                    CStr::from_ptr(name.as_ptr()).to_string_lossy().into_owned(),
                    value.value,
                )
            })
            .collect::<Vec<_>>()
    };
    let counter = |wanted: &str| {
        counters
            .iter()
            .find(|(name, _)| name == wanted)
            .map(|(_, value)| *value)
            .unwrap_or_else(|| panic!("no xstat {wanted} in {counters:?}"))
    };
    assert_eq!(counter("rx_good_packets"), 32);
    assert_eq!(counter("tx_good_packets"), 32);

    common::stop_and_close(port);
    // SAFETY: no mbuf of this pool is referenced any more.
    unsafe { sys::rte_mempool_free(pool) };
}

#[test]
fn control_calls_report_errors_as_negative_errno_and_rte_errno() {
    let _serial = setup();
    // SAFETY: an invalid port id is a documented error case.
    let rc = unsafe {
        sys::rte_eth_dev_configure(sys::RTE_MAX_ETHPORTS as u16, 1, 1, &std::mem::zeroed())
    };
    assert_eq!(rc, -libc::ENODEV);
    assert!(
        sys::strerror(rc).contains("No such device"),
        "{}",
        sys::strerror(rc)
    );

    // A second pool with a taken name fails with rte_errno = EEXIST, read
    // through the TLS shim.
    let pool = common::pool("dup_name_pool", 63);
    let name = CString::new("dup_name_pool").expect("no NUL");
    // SAFETY: name is a valid C string.
    let duplicate = unsafe {
        sys::rte_pktmbuf_pool_create(
            name.as_ptr(),
            63,
            0,
            0,
            sys::RTE_MBUF_DEFAULT_BUF_SIZE,
            sys::SOCKET_ID_ANY,
        )
    };
    assert!(duplicate.is_null());
    assert_eq!(sys::errno(), libc::EEXIST);
    // SAFETY: the pool has no mbufs out.
    unsafe { sys::rte_mempool_free(pool) };
}
