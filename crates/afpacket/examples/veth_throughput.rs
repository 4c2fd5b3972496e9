//! A quick throughput check of the AF_PACKET backend between the two ends of a veth pair.
//!
//! One thread sends bursts on `host0` (backend TX, `sendmmsg`) and receives them on `swp0`
//! (backend RX, TPACKET_V3 ring), in a fresh network namespace. Each transmitted frame is a
//! fresh pool frame (alloc + copy), each received frame is copied out of the ring into a pool
//! frame and dropped: the per-frame work a switch port does, minus the switching.
//!
//! Run as root: `cargo run --release -p headroom-afpacket --example veth_throughput [SECONDS]`.
//! Not a benchmark with statistics: one short run per frame size, to get the order of magnitude.

use std::time::{Duration, Instant};

use headroom_afpacket::lab::VethLab;
use headroom_afpacket::{AfPacketConfig, AfPacketPort, RingVersion};
use headroom_io::{FramePool, PoolConfig, RxQueue, TxQueue, BURST_MAX};

fn frame(len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    bytes[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    bytes[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    bytes[12..14].copy_from_slice(&0x88B5u16.to_be_bytes());
    bytes
}

fn run(lab: &VethLab, frame_len: usize, duration: Duration, ring_version: RingVersion) {
    let pool = FramePool::new(PoolConfig::with_frame_count(8192)).expect("pool");
    let config = AfPacketConfig {
        ring_version,
        ..AfPacketConfig::default()
    };
    let (receiver, sender) = {
        let _inside = lab.enter().expect("enter the lab namespace");
        (
            AfPacketPort::open(lab.switch_end(), pool.clone(), &config).expect("open swp0"),
            AfPacketPort::open(lab.host_end(), pool.clone(), &config).expect("open host0"),
        )
    };
    let receiver_stats = receiver.stats_handle();
    let sender_stats = sender.stats_handle();
    let (mut rx, _) = receiver.split();
    let (_, mut tx) = sender.split();
    let template = frame(frame_len);

    let mut to_send = Vec::with_capacity(BURST_MAX);
    let mut received = Vec::with_capacity(BURST_MAX);
    let mut received_count = 0u64;
    let started = Instant::now();
    while started.elapsed() < duration {
        while to_send.len() < BURST_MAX {
            let Some(frame) = pool.alloc_copy(&template) else {
                break;
            };
            to_send.push(frame);
        }
        tx.tx_burst(&mut to_send);
        for _ in 0..4 {
            let got = rx.rx_burst(&mut received, BURST_MAX);
            received_count += got as u64;
            received.clear();
            if got < BURST_MAX {
                break;
            }
        }
    }
    let elapsed = started.elapsed();
    // Frames still in the ring when time ran out: collected, not counted in the rate.
    let drain_deadline = Instant::now() + Duration::from_millis(50);
    while Instant::now() < drain_deadline {
        rx.rx_burst(&mut received, BURST_MAX);
        received.clear();
    }
    let sent = sender_stats.stats();
    let got = receiver_stats.stats();
    let seconds = elapsed.as_secs_f64();
    let rx_rate = received_count as f64 / seconds;
    println!(
        "{frame_len:>5} B  {ring_version:?}  tx {:>9.0} frames/s  rx {:>9.0} frames/s \
         ({:>6.2} Gbit/s of frames)  kernel ring drops {}  tx would-block {}  tx failed {}",
        sent.tx_frames as f64 / seconds,
        rx_rate,
        rx_rate * frame_len as f64 * 8.0 / 1e9,
        got.rx_kernel_drops,
        sent.tx_would_block,
        sent.tx_failed,
    );
}

/// One frame at a time: how long from `tx_burst` on host0 until `rx_burst` on swp0 returns it,
/// busy-polling the ring. At low rates TPACKET_V3 hands a block over only when its retire timer
/// fires, so this shows the latency cost of `block_timeout_ms`.
fn single_frame_latency(lab: &VethLab, ring_version: RingVersion, block_timeout_ms: u32) {
    let pool = FramePool::new(PoolConfig::with_frame_count(64)).expect("pool");
    let config = AfPacketConfig {
        ring_version,
        block_timeout_ms,
        ..AfPacketConfig::default()
    };
    let (receiver, sender) = {
        let _inside = lab.enter().expect("enter the lab namespace");
        (
            AfPacketPort::open(lab.switch_end(), pool.clone(), &config).expect("open swp0"),
            AfPacketPort::open(lab.host_end(), pool.clone(), &config).expect("open host0"),
        )
    };
    let (mut rx, _) = receiver.split();
    let (_, mut tx) = sender.split();
    let template = frame(64);
    let mut received = Vec::new();
    let mut latencies_us = Vec::new();
    for _ in 0..200 {
        let mut burst = vec![pool.alloc_copy(&template).expect("buffer")];
        let sent_at = Instant::now();
        tx.tx_burst(&mut burst);
        let deadline = sent_at + Duration::from_secs(1);
        while rx.rx_burst(&mut received, BURST_MAX) == 0 && Instant::now() < deadline {}
        latencies_us.push(sent_at.elapsed().as_secs_f64() * 1e6);
        received.clear();
    }
    latencies_us.sort_by(f64::total_cmp);
    println!(
        "single 64 B frames, {ring_version:?} block_timeout_ms={block_timeout_ms}: latency median {:.0} us, \
         p99 {:.0} us, max {:.0} us",
        latencies_us[latencies_us.len() / 2],
        latencies_us[latencies_us.len() * 99 / 100],
        latencies_us[latencies_us.len() - 1],
    );
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2.0);
    let duration = Duration::from_secs_f64(seconds);
    let lab = VethLab::create("hr-afp-bench").unwrap_or_else(|error| {
        eprintln!("cannot set up the veth lab: {error}");
        std::process::exit(1);
    });
    println!(
        "veth pair in namespace {}, {seconds} s per run, one thread",
        lab.namespace()
    );
    for frame_len in [64, 1500] {
        for ring_version in [RingVersion::V2, RingVersion::V3] {
            run(&lab, frame_len, duration, ring_version);
        }
    }
    single_frame_latency(&lab, RingVersion::V2, 1);
    for block_timeout_ms in [1, 4] {
        single_frame_latency(&lab, RingVersion::V3, block_timeout_ms);
    }
}
