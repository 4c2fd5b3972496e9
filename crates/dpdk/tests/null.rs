//! net_null ports: RX makes frames from the queue's pool, TX frees what it is given. Checks
//! the receive and transmit paths, stats and xstats, several queues polled from several
//! threads, and pool lifetime rules. One EAL for this file (one process).
#![cfg(feature = "dpdk")]

mod common;

use headroom_core::frame::Frame;
use headroom_dpdk::{DpdkError, DpdkPort, Mempool, PortConfig, DEFAULT_DATA_ROOM_BYTES};
use headroom_io::{RxQueue, TxQueue, BURST_MAX};

use common::assert_pool_full;

const VDEVS: &[&str] = &[
    "--vdev=net_null0",
    "--vdev=net_null1,size=128",
    "--vdev=net_null2",
];

fn pool(name: &str, n_mbufs: u32) -> Mempool {
    Mempool::new(
        common::eal(VDEVS),
        name,
        n_mbufs,
        32,
        DEFAULT_DATA_ROOM_BYTES,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn xstat(xstats: &[(String, u64)], name: &str) -> u64 {
    xstats
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no xstat {name} in {xstats:?}"))
}

#[test]
fn rx_burst_makes_frames_tx_burst_consumes_them_and_both_are_counted() {
    let _serial = common::serial();
    let eal = common::eal(VDEVS);
    let pool = pool("null_rx_tx", 1023);
    let mut port = DpdkPort::open(eal, "net_null0", &PortConfig::default(), &pool)
        .unwrap_or_else(|e| panic!("{e}"));
    port.reset_stats().expect("reset");
    let (mut rx, mut tx) = port.split().expect("split");
    let (rx, tx) = (&mut rx[0], &mut tx[0]);

    let mut frames = Vec::with_capacity(4 * BURST_MAX);
    assert_eq!(rx.rx_burst(&mut frames, 0), 0);
    for _ in 0..10 {
        assert_eq!(rx.rx_burst(&mut frames, BURST_MAX), BURST_MAX);
        assert_eq!(
            pool.in_use(),
            BURST_MAX as u32,
            "RX frames come from the port's pool"
        );
        for frame in &frames {
            assert_eq!(frame.len(), 64, "net_null's default frame size");
            assert_eq!(frame.input_port(), port.port_id());
            assert!(frame.is_exclusive());
        }
        assert_eq!(tx.tx_burst(&mut frames), BURST_MAX);
        assert!(frames.is_empty());
        assert_pool_full(&pool, "net_null TX frees what it takes");
    }
    // More than one burst's worth in one call.
    assert_eq!(rx.rx_burst(&mut frames, 100), 100);
    assert_eq!(tx.tx_burst(&mut frames), 100);
    // Generated frames go out too.
    let mut generated: Vec<_> = (0..5).map(|_| tx.alloc_frame(60).expect("mbuf")).collect();
    assert_eq!(tx.tx_burst(&mut generated), 5);
    assert_pool_full(&pool, "after 425 frames");

    let stats = port.stats().expect("stats");
    assert_eq!((stats.rx_frames, stats.tx_frames), (420, 425));
    assert_eq!(stats.rx_missed, 0);
    let nic = port.nic_stats().expect("nic stats");
    assert_eq!(
        (nic.rx_packets, nic.tx_packets, nic.rx_errors),
        (420, 425, 0)
    );
    // net_null counts packets only (its bytes stay 0), so bytes are not checked here.
    let xstats = port.xstats().expect("xstats");
    assert_eq!(xstat(&xstats, "rx_good_packets"), 420);
    assert_eq!(xstat(&xstats, "tx_good_packets"), 425);
}

/// Two queue pairs, each moved to its own thread (the queues are Send) and polled there.
#[test]
fn queues_move_to_threads_and_are_counted_per_queue() {
    let _serial = common::serial();
    let eal = common::eal(VDEVS);
    let pool = pool("null_queues", 1023);
    let config = PortConfig {
        rx_queues: 2,
        tx_queues: 2,
        rx_desc: 256,
        tx_desc: 256,
        ..PortConfig::default()
    };
    let mut port =
        DpdkPort::open(eal, "net_null1", &config, &pool).unwrap_or_else(|e| panic!("{e}"));
    let (rx, tx) = port.split().expect("split");
    assert_eq!((rx.len(), tx.len()), (2, 2));
    let workers: Vec<_> = rx
        .into_iter()
        .zip(tx)
        .enumerate()
        .map(|(index, (mut rx, mut tx))| {
            std::thread::spawn(move || {
                assert_eq!(usize::from(rx.queue_id()), index);
                let bursts = 100 * (index + 1);
                let mut frames = Vec::with_capacity(BURST_MAX);
                for _ in 0..bursts {
                    let got = rx.rx_burst(&mut frames, BURST_MAX);
                    assert_eq!(got, BURST_MAX);
                    assert!(frames.iter().all(|f| f.len() == 128), "size=128 devarg");
                    assert_eq!(tx.tx_burst(&mut frames), got);
                }
                bursts * BURST_MAX
            })
        })
        .collect();
    let moved: Vec<usize> = workers
        .into_iter()
        .map(|worker| worker.join().expect("worker"))
        .collect();
    assert_eq!(moved, vec![100 * BURST_MAX, 200 * BURST_MAX]);
    assert_pool_full(&pool, "after the workers");
    let xstats = port.xstats().expect("xstats");
    assert_eq!(xstat(&xstats, "rx_q0_packets"), (100 * BURST_MAX) as u64);
    assert_eq!(xstat(&xstats, "rx_q1_packets"), (200 * BURST_MAX) as u64);
    assert_eq!(xstat(&xstats, "tx_q1_packets"), (200 * BURST_MAX) as u64);
    let stats = port.stats().expect("stats");
    assert_eq!(stats.rx_frames, (300 * BURST_MAX) as u64);
}

/// A pool dropped while one of its mbufs is still out is leaked, not freed: the frame stays
/// valid, and the pool's name stays taken.
#[test]
fn a_pool_dropped_with_frames_out_is_leaked_so_the_frames_stay_valid() {
    let eal = common::eal(VDEVS);
    let pool = Mempool::new(eal, "null_leaky", 63, 0, DEFAULT_DATA_ROOM_BYTES).expect("pool");
    let mut frame = pool.alloc_frame(100).expect("mbuf");
    drop(pool);
    frame.data_mut().fill(0xAB);
    assert!(frame.data().iter().all(|&b| b == 0xAB));
    let copy = frame.try_clone().expect("the leaked pool still works");
    drop((frame, copy));
    let again = Mempool::new(eal, "null_leaky", 63, 0, DEFAULT_DATA_ROOM_BYTES)
        .expect_err("the leaked pool keeps its name");
    assert!(matches!(again, DpdkError::Call { .. }), "{again}");
}

/// A port with RX queues the device cannot have is refused, and the port still opens after.
#[test]
fn too_many_queues_are_refused() {
    let _serial = common::serial();
    let eal = common::eal(VDEVS);
    let pool = pool("null_limits", 255);
    let config = PortConfig {
        rx_queues: u16::MAX,
        ..PortConfig::default()
    };
    let error = DpdkPort::open(eal, "net_null2", &config, &pool).expect_err("too many queues");
    assert!(
        matches!(error, DpdkError::InvalidPortConfig { .. }),
        "{error}"
    );
    let port = DpdkPort::open(eal, "net_null2", &PortConfig::default(), &pool)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(port.rss_hash_types(), 0, "one RX queue needs no RSS");
    let link = port.link().expect("link");
    assert!(link.up);
}

/// alloc_frame zeroes the frame even when the mbuf is recycled with old bytes in it.
#[test]
fn alloc_frame_zeroes_recycled_mbufs() {
    let eal = common::eal(VDEVS);
    let pool = Mempool::new(eal, "null_zeroes", 7, 0, DEFAULT_DATA_ROOM_BYTES).expect("pool");
    for round in 0..3 {
        let mut frames: Vec<_> = (0..7)
            .map(|_| pool.alloc_frame(1500).expect("mbuf"))
            .collect();
        assert!(pool.alloc_frame(1).is_none(), "all 7 mbufs are out");
        for frame in &mut frames {
            assert!(
                frame.data().iter().all(|&b| b == 0),
                "round {round}: a recycled mbuf was not zeroed"
            );
            frame.data_mut().fill(0xFF);
        }
    }
    assert_pool_full(&pool, "after three rounds");
}

/// A plain thread registered with EAL gets its own lcore id (not one of EAL's), and with it a
/// mempool cache whose mbufs still count as available. Unregistering frees the id for the next
/// thread.
#[test]
fn registered_threads_get_an_lcore_id_and_a_mempool_cache() {
    let eal = common::eal(VDEVS);
    let pool = Mempool::new(eal, "null_register", 511, 64, DEFAULT_DATA_ROOM_BYTES).expect("pool");
    let eal_lcores = eal.lcore_count();
    let first = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                assert_eq!(
                    headroom_dpdk::sys::lcore_id(),
                    headroom_dpdk::sys::LCORE_ID_ANY
                );
                let id = eal.register_current_thread().expect("register");
                assert_ne!(id, headroom_dpdk::sys::LCORE_ID_ANY);
                assert!(
                    id >= eal_lcores,
                    "lcore {id} is not one of EAL's {eal_lcores}"
                );
                assert_eq!(
                    eal.register_current_thread().expect("again"),
                    id,
                    "idempotent"
                );
                let frames: Vec<_> = (0..8)
                    .map(|_| pool.alloc_frame(64).expect("mbuf"))
                    .collect();
                assert_eq!(pool.in_use(), 8);
                drop(frames);
                // Freed into this lcore's cache, which `available` counts.
                assert_eq!(pool.available(), pool.capacity());
                eal.unregister_current_thread();
                assert_eq!(
                    headroom_dpdk::sys::lcore_id(),
                    headroom_dpdk::sys::LCORE_ID_ANY
                );
                id
            })
            .join()
            .expect("thread")
    });
    let second = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let id = eal.register_current_thread().expect("register");
                eal.unregister_current_thread();
                id
            })
            .join()
            .expect("thread")
    });
    assert_eq!(first, second, "an unregistered lcore id is reused");
    assert_pool_full(&pool, "after the registered threads");
}
