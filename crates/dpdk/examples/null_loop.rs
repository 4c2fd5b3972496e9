//! Forwarding rate of the backend alone: two `net_null` ports forwarding to each other (each
//! port's rx_burst straight to the other's tx_burst) on one core, like `dpdk-testpmd
//! --forward-mode=io --port-topology=paired --nb-cores=1`.
//!
//! ```text
//! cargo run --release -p headroom-dpdk --features dpdk --example null_loop -- [seconds] [touch]
//! ```
//! With `touch`, every frame's destination MAC is read through `Frame::data` (one cache line
//! per frame, as a switch must); without, mbufs move without being looked at.
use std::time::{Duration, Instant};

use headroom_core::frame::Frame;
use headroom_dpdk::{DpdkPort, Eal, Mempool, PortConfig, DEFAULT_DATA_ROOM_BYTES};
use headroom_io::{RxQueue, TxQueue, BURST_MAX};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let seconds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(3);
    let touch = std::env::args().any(|arg| arg == "touch");
    let args: Vec<String> = [
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "-l",
        "0",
        "--log-level=warning",
        "--vdev=net_null0",
        "--vdev=net_null1",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    // The calling thread becomes the main lcore, pinned to CPU 0, and polls.
    let eal = Eal::init(&args)?;
    let pool = Mempool::new(&eal, "loop_pool", 8191, 256, DEFAULT_DATA_ROOM_BYTES)?;
    let mut ports = [
        DpdkPort::open(&eal, "net_null0", &PortConfig::default(), &pool)?,
        DpdkPort::open(&eal, "net_null1", &PortConfig::default(), &pool)?,
    ];
    let (mut rx0, mut tx0) = ports[0].split()?;
    let (mut rx1, mut tx1) = ports[1].split()?;
    let mut directions = [
        (rx0.remove(0), tx1.remove(0)),
        (rx1.remove(0), tx0.remove(0)),
    ];

    let mut frames = Vec::with_capacity(BURST_MAX);
    let mut forwarded: u64 = 0;
    let mut dropped: u64 = 0;
    let mut mac_xor: u8 = 0;
    let start = Instant::now();
    let duration = Duration::from_secs(seconds);
    let mut iterations: u64 = 0;
    loop {
        iterations += 1;
        // Checking the clock every 1024 rounds keeps it out of the per-burst cost.
        if iterations.is_multiple_of(1024) && start.elapsed() >= duration {
            break;
        }
        for (rx, tx) in &mut directions {
            rx.rx_burst(&mut frames, BURST_MAX);
            if touch {
                for frame in &frames {
                    mac_xor ^= frame.data()[..6].iter().fold(0, |acc, b| acc ^ b);
                }
            }
            forwarded += tx.tx_burst(&mut frames) as u64;
            dropped += frames.len() as u64;
            frames.clear();
        }
    }
    let elapsed = start.elapsed().as_secs_f64();
    println!(
        "net_null0 <-> net_null1 on one core{}: {:.2} Mpps in total, {:.2} Mpps per direction, \
         over {elapsed:.1} s ({forwarded} forwarded, {dropped} dropped, mac xor {mac_xor:#04x})",
        if touch { ", reading each MAC" } else { "" },
        forwarded as f64 / elapsed / 1e6,
        forwarded as f64 / elapsed / 2e6,
    );
    drop(directions);
    let stats = [ports[0].stats()?, ports[1].stats()?];
    println!(
        "port stats: rx {} + {} frames, tx {} + {} frames; pool {}/{} available",
        stats[0].rx_frames,
        stats[1].rx_frames,
        stats[0].tx_frames,
        stats[1].tx_frames,
        pool.available(),
        pool.capacity()
    );
    Ok(())
}
