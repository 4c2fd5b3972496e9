//! Frames through a ring "cable": two ports built with `rte_eth_from_rings` on crossed rings
//! (what A transmits, B receives, and back). One EAL for this file (one process).
#![cfg(feature = "dpdk")]

mod common;

use std::ffi::CString;
use std::ptr::NonNull;

use headroom_core::frame::Frame;
use headroom_dpdk::{
    sys, DpdkError, DpdkPort, DpdkRxQueue, DpdkTxQueue, FlowControlState, MbufFrame, Mempool,
    PortConfig, DEFAULT_DATA_ROOM_BYTES,
};
use headroom_io::{RxQueue, TxQueue};

use common::{assert_pool_full, mbuf_frame, rx_until, test_frame, test_frame_seq};

/// Two crossed rings and the two ring ports on them. Rings are freed on drop, so a `Cable`
/// must outlive the `DpdkPort`s opened on it (declare it first).
struct Cable {
    a_to_b: NonNull<sys::rte_ring>,
    b_to_a: NonNull<sys::rte_ring>,
    port_a: String,
    port_b: String,
    port_b_id: u16,
}

impl Cable {
    /// Rings of `ring_size` slots (a power of two; one slot stays empty).
    fn new(tag: &str, ring_size: u32) -> Self {
        let ring = |name: String| {
            let c_name = CString::new(name.clone()).expect("no NUL");
            // SAFETY: EAL is up; c_name is a valid C string that DPDK copies.
            let raw = unsafe {
                sys::rte_ring_create(
                    c_name.as_ptr(),
                    ring_size,
                    sys::SOCKET_ID_ANY,
                    sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
                )
            };
            NonNull::new(raw).unwrap_or_else(|| {
                panic!("rte_ring_create({name}): {}", sys::strerror(sys::errno()))
            })
        };
        let a_to_b = ring(format!("{tag}_ab"));
        let b_to_a = ring(format!("{tag}_ba"));
        let mut ids = Vec::new();
        for (side, rx, tx) in [("a", b_to_a, a_to_b), ("b", a_to_b, b_to_a)] {
            let name = CString::new(format!("{tag}_{side}")).expect("no NUL");
            let rx_rings = [rx.as_ptr()];
            let tx_rings = [tx.as_ptr()];
            // SAFETY: the ring arrays hold one live ring each and outlive the call; the rings
            // outlive the port (Cable is dropped after the ports).
            let id = unsafe {
                sys::rte_eth_from_rings(
                    name.as_ptr(),
                    rx_rings.as_ptr(),
                    1,
                    tx_rings.as_ptr(),
                    1,
                    0,
                )
            };
            assert!(
                id >= 0,
                "rte_eth_from_rings: {}",
                sys::strerror(sys::errno())
            );
            ids.push(u16::try_from(id).expect("port id"));
        }
        Self {
            a_to_b,
            b_to_a,
            // rte_eth_from_rings registers the port as vdev "net_ring_<name>".
            port_a: format!("net_ring_{tag}_a"),
            port_b: format!("net_ring_{tag}_b"),
            port_b_id: ids[1],
        }
    }
}

impl Drop for Cable {
    fn drop(&mut self) {
        // SAFETY: the ports on these rings are closed (dropped before the cable).
        unsafe {
            sys::rte_ring_free(self.a_to_b.as_ptr());
            sys::rte_ring_free(self.b_to_a.as_ptr());
        }
    }
}

struct Side {
    port: DpdkPort,
    rx: DpdkRxQueue,
    tx: DpdkTxQueue,
}

fn open_side(name: &str, pool: &Mempool) -> Side {
    let eal = common::eal(&[]);
    let mut port = DpdkPort::open(eal, name, &PortConfig::default(), pool)
        .unwrap_or_else(|e| panic!("open {name}: {e}"));
    let (mut rx, mut tx) = port.split().expect("first split");
    assert_eq!((rx.len(), tx.len()), (1, 1));
    Side {
        port,
        rx: rx.pop().expect("one RX queue"),
        tx: tx.pop().expect("one TX queue"),
    }
}

fn pool(name: &str, n_mbufs: u32) -> Mempool {
    let pool = Mempool::new(common::eal(&[]), name, n_mbufs, 0, DEFAULT_DATA_ROOM_BYTES)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_pool_full(&pool, "new pool");
    pool
}

fn send_all(tx: &mut DpdkTxQueue, mut frames: Vec<MbufFrame>) {
    let count = frames.len();
    assert_eq!(
        tx.tx_burst(&mut frames),
        count,
        "the ring takes the whole burst"
    );
    assert!(frames.is_empty());
}

/// Sends `frames` (built with alloc_frame) from `from` and checks `to` receives exactly them,
/// in order and byte for byte.
fn send_and_check(pool: &Mempool, from: &mut Side, to: &mut Side, frames: &[Vec<u8>]) {
    let mbufs: Vec<MbufFrame> = frames.iter().map(|f| mbuf_frame(&mut from.tx, f)).collect();
    assert!(pool.in_use() >= frames.len() as u32);
    send_all(&mut from.tx, mbufs);
    let received = rx_until(&mut to.rx, frames.len());
    assert_eq!(received.len(), frames.len(), "frames lost on the cable");
    for (index, (frame, expected)) in received.iter().zip(frames).enumerate() {
        assert_eq!(frame.data(), &expected[..], "frame {index} differs");
        assert!(frame.is_exclusive());
    }
}

#[test]
fn cable_carries_frames_byte_exact_both_ways_and_every_mbuf_returns() {
    let _serial = common::serial();
    let pool = pool("ring_both_ways", 2047);
    let cable = Cable::new("both", 1024);
    let mut a = open_side(&cable.port_a, &pool);
    // The other end by numeric port id.
    let mut b = open_side(&cable.port_b_id.to_string(), &pool);
    assert_eq!(a.port.info().name, cable.port_a);
    assert_eq!(b.port.info().name, cable.port_b);
    assert_eq!(a.port.info().max_frame_len, 1500 + 18);
    assert_eq!(a.port.flow_control(), FlowControlState::NotSupported);
    assert!(a.port.link().expect("link").up);

    let a_frames: Vec<Vec<u8>> = common::varied_lengths(32)
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(i as u16, len))
        .collect();
    let b_frames: Vec<Vec<u8>> = common::varied_lengths(17)
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(1000 + i as u16, len + 1))
        .collect();
    send_and_check(&pool, &mut a, &mut b, &a_frames);
    send_and_check(&pool, &mut b, &mut a, &b_frames);
    // Nothing came back onto a sender's own RX queue (the ring PMD is synchronous).
    let mut stray = Vec::new();
    assert_eq!(
        a.rx.rx_burst(&mut stray, 32) + b.rx.rx_burst(&mut stray, 32),
        0
    );

    let stats = a.port.stats().expect("stats");
    assert_eq!((stats.tx_frames, stats.rx_frames), (32, 17));
    assert_eq!(
        (stats.rx_missed, stats.rx_no_buffer, stats.tx_failed),
        (0, 0, 0)
    );
    let xstats = b.port.xstats().expect("xstats");
    let counter = |name: &str| {
        xstats
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no xstat {name} in {xstats:?}"))
    };
    assert_eq!(counter("rx_good_packets"), 32);
    assert_eq!(counter("tx_good_packets"), 17);

    drop((a, b));
    drop(cable);
    assert_pool_full(&pool, "after closing both ports");
    drop(pool);
    // The pool was really freed: its name can be used again.
    let again = Mempool::new(
        common::eal(&[]),
        "ring_both_ways",
        63,
        0,
        DEFAULT_DATA_ROOM_BYTES,
    )
    .expect("the freed pool's name is free again");
    assert_pool_full(&again, "recreated pool");
}

/// Inserts an 802.1Q tag by hand (IEEE 802.1Q clause 9.3: TPID 0x8100 after the source MAC),
/// sends the tagged frame, and strips the tag on the receiving side.
#[test]
fn vlan_tag_pushed_in_front_crosses_the_cable_and_is_stripped_again() {
    let _serial = common::serial();
    let pool = pool("ring_vlan", 255);
    let cable = Cable::new("vlan", 256);
    let mut a = open_side(&cable.port_a, &pool);
    let mut b = open_side(&cable.port_b, &pool);

    let original = test_frame(7, 100);
    let mut frame = mbuf_frame(&mut a.tx, &original);
    let headroom = frame.headroom();
    assert_eq!(headroom, usize::from(headroom_dpdk::MBUF_HEADROOM_BYTES));
    // Refused pushes and pulls leave the frame untouched.
    assert!(!frame.push_front(headroom + 1));
    assert!(!frame.push_front(usize::MAX));
    assert!(!frame.pull_front(original.len() + 1));
    assert_eq!(frame.data(), &original[..]);

    let tci: u16 = (3 << 13) | 100; // PCP 3, VID 100
    assert!(frame.push_front(4));
    assert_eq!(frame.len(), original.len() + 4);
    assert_eq!(frame.headroom(), headroom - 4);
    let data = frame.data_mut();
    data.copy_within(4..16, 0);
    data[12..14].copy_from_slice(&0x8100_u16.to_be_bytes());
    data[14..16].copy_from_slice(&tci.to_be_bytes());
    let mut tagged = original[..12].to_vec();
    tagged.extend_from_slice(&[0x81, 0x00]);
    tagged.extend_from_slice(&tci.to_be_bytes());
    tagged.extend_from_slice(&original[12..]);
    assert_eq!(frame.data(), &tagged[..]);

    send_all(&mut a.tx, vec![frame]);
    let mut received = rx_until(&mut b.rx, 1);
    assert_eq!(received.len(), 1);
    let mut frame = received.pop().expect("one frame");
    assert_eq!(frame.data(), &tagged[..], "the tag crossed the cable");
    frame.data_mut().copy_within(0..12, 4);
    assert!(frame.pull_front(4));
    assert_eq!(frame.data(), &original[..], "stripping restores the frame");
    // A frame can be pulled down to nothing.
    assert!(frame.pull_front(original.len()));
    assert!(frame.is_empty());
    drop(frame);
    drop((a, b));
    drop(cable);
    assert_pool_full(&pool, "after the VLAN round trip");
}

#[test]
fn try_clone_copies_into_a_new_mbuf_that_changes_independently() {
    let _serial = common::serial();
    let pool = pool("ring_clone", 127);
    let cable = Cable::new("clone", 256);
    let mut a = open_side(&cable.port_a, &pool);
    let mut b = open_side(&cable.port_b, &pool);

    let original_bytes = test_frame(42, 300);
    let original = mbuf_frame(&mut a.tx, &original_bytes);
    let in_use = pool.in_use();
    let mut copy = original.try_clone().expect("the pool has mbufs");
    assert_eq!(
        pool.in_use(),
        in_use + 1,
        "the copy is a new mbuf from the same pool"
    );
    assert_ne!(copy.as_raw(), original.as_raw());
    assert!(copy.is_exclusive() && original.is_exclusive());
    assert_eq!(copy.data(), original.data());
    copy.data_mut()[20] ^= 0xFF;
    assert!(copy.push_front(4));
    assert_eq!(
        original.data(),
        &original_bytes[..],
        "the original is untouched"
    );

    // Flood both: each arrives as it was when sent.
    send_all(&mut a.tx, vec![original, copy]);
    let received = rx_until(&mut b.rx, 2);
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].data(), &original_bytes[..]);
    assert_eq!(received[1].len(), original_bytes.len() + 4);
    assert_eq!(received[1].data()[24], original_bytes[20] ^ 0xFF);
    drop(received);

    // A frame that reaches into its headroom beyond what a fresh mbuf holds after the default
    // headroom (2048 + 100 bytes) still clones into one segment.
    let mut full = a.tx.alloc_frame(2048).expect("a full-size frame");
    assert!(a.tx.alloc_frame(2049).is_none(), "longer than one mbuf");
    assert!(full.push_front(100));
    full.data_mut()
        .iter_mut()
        .enumerate()
        .for_each(|(i, b)| *b = i as u8);
    let copy = full.try_clone().expect("a copy in one mbuf");
    assert_eq!(copy.len(), 2148);
    assert_eq!(copy.data(), full.data());
    drop((full, copy));

    // With the pool empty, try_clone and alloc_frame return None and nothing leaks.
    let source = a.tx.alloc_frame(64).expect("one more");
    let mut hoard = Vec::new();
    while let Some(frame) = a.tx.alloc_frame(64) {
        hoard.push(frame);
    }
    assert_eq!(pool.available(), 0);
    assert!(source.try_clone().is_none());
    drop((source, hoard));
    drop((a, b));
    drop(cable);
    assert_pool_full(&pool, "after the clones");
}

/// A TX ring of 64 slots takes 63 frames; tx_burst of 100 hands the first 63 to the port and
/// leaves the other 37 with the caller, in order; every mbuf returns to the pool.
#[test]
fn partial_tx_leaves_the_rest_with_the_caller_and_nothing_leaks() {
    let _serial = common::serial();
    let pool = pool("ring_partial", 511);
    let cable = Cable::new("partial", 64);
    let mut a = open_side(&cable.port_a, &pool);
    let mut b = open_side(&cable.port_b, &pool);

    let mut frames: Vec<MbufFrame> = (0..100)
        .map(|seq| mbuf_frame(&mut a.tx, &test_frame(seq, 64)))
        .collect();
    assert_eq!(pool.in_use(), 100);
    let sent = a.tx.tx_burst(&mut frames);
    assert_eq!(sent, 63, "a 64-slot ring holds 63 frames");
    assert_eq!(frames.len(), 37);
    let seqs: Vec<u16> = frames
        .iter()
        .filter_map(|f| test_frame_seq(f.data()))
        .collect();
    assert_eq!(
        seqs,
        (63..100).collect::<Vec<u16>>(),
        "the unsent frames stay in order"
    );
    assert_eq!(
        pool.in_use(),
        100,
        "sent frames are in the ring, unsent ones with us"
    );
    // The ring is full: nothing more is taken, nothing is lost.
    assert_eq!(a.tx.tx_burst(&mut frames), 0);
    assert_eq!(frames.len(), 37);
    drop(frames);
    assert_eq!(
        pool.in_use(),
        63,
        "dropping unsent frames freed exactly them"
    );

    let received = rx_until(&mut b.rx, 63);
    let seqs: Vec<u16> = received
        .iter()
        .filter_map(|f| test_frame_seq(f.data()))
        .collect();
    assert_eq!(seqs, (0..63).collect::<Vec<u16>>());
    drop(received);
    assert_pool_full(&pool, "after draining the ring");
    let stats = a.port.nic_stats().expect("stats");
    assert_eq!(stats.tx_packets, 63);
    drop((a, b));
    drop(cable);
}

#[test]
fn misuse_is_refused_with_errors_that_say_what_to_do() {
    let _serial = common::serial();
    let eal = common::eal(&[]);
    let pool = pool("ring_misuse", 255);
    let cable = Cable::new("misuse", 256);

    let missing = DpdkPort::open(eal, "net_nothing9", &PortConfig::default(), &pool)
        .expect_err("no such port");
    assert!(
        matches!(&missing, DpdkError::PortNotFound { available, .. } if available.contains(&cable.port_a)),
        "{missing}"
    );
    assert!(missing.to_string().contains("--vdev"), "{missing}");

    // An MTU whose frames do not fit one mbuf is refused before the port is touched.
    let small = Mempool::new(eal, "ring_small_room", 63, 0, 1024 + 128).expect("small pool");
    let jumbo = PortConfig {
        mtu: 1500,
        ..PortConfig::default()
    };
    let error = DpdkPort::open(eal, &cable.port_a, &jumbo, &small).expect_err("frames too long");
    assert!(
        matches!(error, DpdkError::InvalidPortConfig { .. }) && error.to_string().contains("1518"),
        "{error}"
    );
    let zero_queues = PortConfig {
        rx_queues: 0,
        ..PortConfig::default()
    };
    assert!(matches!(
        DpdkPort::open(eal, &cable.port_a, &zero_queues, &pool),
        Err(DpdkError::InvalidPortConfig { .. })
    ));

    // After refused opens, the port opens fine, once.
    let mut port = DpdkPort::open(eal, &cable.port_a, &PortConfig::default(), &pool)
        .expect("open after refusals");
    assert!(matches!(
        DpdkPort::open(eal, &cable.port_a, &PortConfig::default(), &pool),
        Err(DpdkError::PortInUse { .. })
    ));
    let queues = port.split().expect("first split");
    assert!(matches!(port.split(), Err(DpdkError::AlreadySplit)));
    // Queues keep the port open after its control handle is gone.
    drop(port);
    assert!(matches!(
        DpdkPort::open(eal, &cable.port_a, &PortConfig::default(), &pool),
        Err(DpdkError::PortInUse { .. })
    ));
    drop(queues);

    // Pools: a name DPDK cannot hold, a taken name, a bad cache, and a pool far beyond
    // `-m 512` without hugepages.
    assert!(matches!(
        Mempool::new(eal, "a_name_longer_than_dpdk_allows", 63, 0, 2176),
        Err(DpdkError::InvalidMempool { .. })
    ));
    let taken = Mempool::new(eal, "ring_misuse", 63, 0, 2176).expect_err("name taken");
    assert!(taken.to_string().contains("already exists"), "{taken}");
    assert!(matches!(
        Mempool::new(eal, "ring_bad_cache", 63, 512, 2176),
        Err(DpdkError::InvalidMempool { .. })
    ));
    let huge = Mempool::new(eal, "ring_huge", 200_000, 256, 2176).expect_err("too large");
    assert!(
        matches!(
            huge,
            DpdkError::MempoolTooLarge {
                eal_memory_mib: 512,
                ..
            }
        ),
        "{huge}"
    );
    assert!(huge.to_string().contains("-m 512"), "{huge}");
    // The refused pool reserved nothing: a pool of most of the remaining memory still fits.
    let committed_mib = eal.committed_pool_bytes() / (1024 * 1024);
    assert!(committed_mib < 32, "{committed_mib} MiB committed");
    drop(cable);
}
