//! Proves that the per-packet paths of the frame pool and the in-memory ports never call the
//! global allocator once they are warmed up.
//!
//! A counting global allocator counts the calls made by the current thread only (a const
//! thread-local, which itself needs no allocation), so the test harness's own threads cannot
//! disturb the count.

use headroom_core::frame::Frame;
use headroom_io::{FramePool, MemoryPort, PoolConfig, PortInfo, RxQueue, TxQueue, BURST_MAX};

#[global_allocator]
static GLOBAL: headroom_testkit::CountingAllocator = headroom_testkit::CountingAllocator;

/// Allocator calls (frees included) the current thread makes while `f` runs.
fn allocator_calls_during(f: impl FnOnce()) -> u64 {
    let before = headroom_testkit::allocator_calls();
    f();
    headroom_testkit::allocator_calls() - before
}

#[test]
fn the_counter_sees_allocations() {
    // Guards against a counter that can never fail the tests below.
    let calls = allocator_calls_during(|| drop(std::hint::black_box(vec![0u8; 100])));
    assert_eq!(calls, 2, "one allocation and one deallocation");
}

#[test]
fn pool_alloc_clone_push_pull_drop_allocates_nothing() {
    let pool = FramePool::new(PoolConfig::with_frame_count(64)).expect("pool");
    let mut held = Vec::with_capacity(64);
    let calls = allocator_calls_during(|| {
        for round in 0..10_000u32 {
            let mut frame = pool.alloc_copy(&[0x5A; 60]).expect("free buffer");
            frame.data_mut()[..4].copy_from_slice(&round.to_be_bytes());
            assert!(frame.push_front(4));
            assert!(frame.pull_front(4));
            let copy = frame.try_clone().expect("free buffer");
            let zeroed = pool.alloc(64).expect("free buffer");
            held.push(frame);
            held.push(copy);
            held.push(zeroed);
            if held.len() >= 60 {
                held.clear();
            }
        }
        // Exhaustion is counted, not allocated.
        let all: [_; 64] = std::array::from_fn(|_| pool.alloc(1));
        assert!(pool.alloc(1).is_none());
        drop(all);
    });
    assert_eq!(calls, 0, "the steady-state frame path called the allocator");
    drop(held);
    assert_eq!(pool.stats().available, 64);
}

#[test]
fn memory_port_round_trip_allocates_nothing() {
    let pool = FramePool::new(PoolConfig::with_frame_count(256)).expect("pool");
    let info = PortInfo {
        name: "mem0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        max_frame_len: 2048,
    };
    let (mut rx, mut tx, mut injector, mut collector) = MemoryPort::new(info, pool, 64).split();
    let mut burst = Vec::with_capacity(BURST_MAX);
    let mut collected = Vec::with_capacity(BURST_MAX);
    // Warm-up: the first burst of each half gives this thread its frame cache (allocated
    // once per thread and pool).
    injector.inject(&[0xA5; 64]).expect("room");
    assert_eq!(rx.rx_burst(&mut burst, BURST_MAX), 1);
    assert_eq!(tx.tx_burst(&mut burst), 1);
    assert_eq!(collector.collect(&mut collected, BURST_MAX), 1);
    collected.clear();
    let calls = allocator_calls_during(|| {
        for _ in 0..1_000 {
            for _ in 0..BURST_MAX {
                injector.inject(&[0xA5; 64]).expect("room");
            }
            assert_eq!(rx.rx_burst(&mut burst, BURST_MAX), BURST_MAX);
            assert_eq!(tx.tx_burst(&mut burst), BURST_MAX);
            assert_eq!(collector.collect(&mut collected, BURST_MAX), BURST_MAX);
            collected.clear();
        }
    });
    assert_eq!(
        calls, 0,
        "the steady-state memory port path called the allocator"
    );
}

#[test]
fn fault_injecting_wrappers_allocate_nothing_per_frame() {
    use headroom_io::fault::{wrap_port, FaultConfig, FrameFaults, VirtualClock};
    let pool = FramePool::new(PoolConfig::with_frame_count(512)).expect("pool");
    let info = PortInfo {
        name: "mem0".into(),
        mac: [2, 0, 0, 0, 0, 1],
        max_frame_len: 2048,
    };
    // As the ports' first bursts would: this thread's cache of the pool (allocated once).
    pool.attach_thread_cache();
    let (rx, tx, mut injector, mut collector) = MemoryPort::new(info, pool, 64).split();
    // Every fate, stalls and flaps, at rates that make each happen many times.
    let faults = FrameFaults {
        drop_rate: 0.1,
        corrupt_rate: 0.1,
        truncate_rate: 0.1,
        duplicate_rate: 0.1,
        reorder_rate: 0.1,
        delay_rate: 0.1,
        delay_max_ns: 20_000,
    };
    let config = FaultConfig {
        seed: 1,
        rx: faults,
        tx: faults,
        tx_stalls_per_second: 20_000.0,
        tx_stall_ns: 5_000,
        link_flaps_per_second: 10_000.0,
        link_down_ns: 10_000,
        ..FaultConfig::default()
    };
    let clock = VirtualClock::at(1);
    let port = wrap_port(rx, tx, &config, 0, clock.fault_clock()).expect("ok");
    let (mut rx, mut tx) = (port.rx, port.tx);
    let mut burst = Vec::with_capacity(BURST_MAX);
    let mut collected = Vec::with_capacity(4 * BURST_MAX);
    let calls = allocator_calls_during(|| {
        for _ in 0..2_000 {
            for _ in 0..BURST_MAX / 2 {
                let _ = injector.inject(&[0xA5; 64]);
            }
            rx.rx_burst(&mut burst, BURST_MAX);
            tx.tx_burst(&mut burst);
            burst.clear();
            tx.flush();
            collector.collect(&mut collected, 4 * BURST_MAX);
            collected.clear();
            clock.advance(1_000);
        }
    });
    assert_eq!(calls, 0, "a fault-injecting port called the allocator");
    let (r, t) = (rx.stats(), tx.stats());
    for (name, n) in [
        ("dropped", r.dropped.get() + t.dropped.get()),
        ("corrupted", r.corrupted.get() + t.corrupted.get()),
        ("truncated", r.truncated.get() + t.truncated.get()),
        ("duplicated", r.duplicated.get() + t.duplicated.get()),
        ("reordered", r.reordered.get() + t.reordered.get()),
        ("delayed", r.delayed.get() + t.delayed.get()),
        ("tx stalls", t.tx_stalls.get()),
        ("link flaps", r.link_flaps.get()),
    ] {
        assert!(
            n > 10,
            "{name}: only {n}; the test must exercise every fault"
        );
    }
}

/// With this thread's cache attached, alloc and free never call the allocator, also when they
/// cross magazine boundaries and trade whole magazines with the depot (bursts larger than a
/// cache, frees of more than it holds), and when the cache must gather loose buffers.
#[test]
fn cached_alloc_free_and_magazine_trades_allocate_nothing() {
    let pool = FramePool::new(PoolConfig::with_frame_count(1024)).expect("pool");
    let magazine = headroom_io::pool::default_magazine_frames(1024);
    assert_eq!(magazine, 64);
    pool.attach_thread_cache();
    assert!(pool.has_thread_cache());
    let mut held = Vec::with_capacity(1024);
    let calls = allocator_calls_during(|| {
        for round in 0..200usize {
            // 1..=5 magazines' worth at once: refills from full magazines and from loose
            // buffers, spills of full magazines.
            let n = (round % 5 + 1) * magazine + round % 7;
            for _ in 0..n {
                held.push(pool.alloc_copy(&[0x5A; 60]).expect("free buffer"));
            }
            let copy = held[0].try_clone().expect("free buffer");
            held.push(copy);
            held.clear();
        }
    });
    assert_eq!(calls, 0, "the cached frame path called the allocator");
    assert_eq!(pool.stats().available, 1024, "cached buffers count as free");
}
