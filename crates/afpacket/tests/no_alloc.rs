//! Proves that the AF_PACKET backend's per-packet path (`tx_burst`, `rx_burst`, frame drop)
//! never calls the global allocator once warmed up. Needs root, like the veth tests.

mod common;

use common::{lab, open, pool, tagged_frame, test_frame};
use headroom_afpacket::lab::VethLab;
use headroom_afpacket::{AfPacketConfig, RingVersion};
use headroom_core::frame::Frame;
use headroom_io::{RxQueue, TxQueue, BURST_MAX};

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

/// Allocator calls (frees included) of the current thread so far.
fn allocations() -> u64 {
    headroom_testkit::allocator_calls()
}

#[test]
fn tx_and_rx_bursts_allocate_nothing() {
    for ring_version in [RingVersion::V2, RingVersion::V3] {
        let lab = lab();
        let pool = pool(1024);
        let config = AfPacketConfig {
            ring_version,
            ..AfPacketConfig::default()
        };
        let (mut switch_rx, _switch_tx) =
            open(&lab, VethLab::SWITCH_END, pool.clone(), &config).split();
        let (_host_rx, mut host_tx) = open(&lab, VethLab::HOST_END, pool.clone(), &config).split();
        let untagged = test_frame(1, 200);
        let tagged = tagged_frame(2, 200, 0x8100, 3, 100);
        let mut to_send = Vec::with_capacity(BURST_MAX);
        let mut received = Vec::with_capacity(BURST_MAX);
        let mut received_count = 0u64;

        // Warm-up: the first burst of each queue gives this thread its cache of the pool
        // (allocated once per thread and pool, see `FramePool::attach_thread_cache`).
        let _ = host_tx.tx_burst(&mut to_send);
        let _ = switch_rx.rx_burst(&mut received, BURST_MAX);
        received.clear();
        assert!(
            pool.has_thread_cache(),
            "the queues attached this thread's cache"
        );
        let before = allocations();
        for round in 0..200 {
            while to_send.len() < BURST_MAX {
                let bytes = if round % 2 == 0 { &untagged } else { &tagged };
                to_send.push(pool.alloc_copy(bytes).expect("buffer"));
            }
            host_tx.tx_burst(&mut to_send);
            let got = switch_rx.rx_burst(&mut received, BURST_MAX);
            received_count += got as u64;
            assert!(received.iter().all(|f| f.len() == 200));
            received.clear();
        }
        let calls = allocations() - before;
        assert!(
            received_count > 1000,
            "{ring_version:?}: traffic flowed ({received_count})"
        );
        assert_eq!(
            calls, 0,
            "{ring_version:?}: the per-packet path called the allocator"
        );
    }
}
