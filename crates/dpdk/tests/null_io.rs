//! The DPDK backend's own ceiling on two `net_null` ports, no switch: `null_io_rate` is the
//! `io` row of `scripts/bench.sh dpdk` (ignored by default), beside the full switch's
//! `null_forwarding_rate` (crates/runtime/tests/dpdk_null.rs) and dpdk-testpmd. The settings are
//! the same as that benchmark's configuration: 8191 mbufs, a 256-mbuf cache, 1024 descriptors,
//! MTU 1500. One EAL for this file (one process).
#![cfg(feature = "dpdk")]

mod common;

use common::test_frame;
use headroom_dpdk::{DpdkBackend, DpdkSettings};
use headroom_io::{Backend, RxQueue, TxQueue, BURST_MAX};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn settings() -> DpdkSettings {
    let mut eal_args: Vec<String> = [
        "--no-huge",
        "-m",
        "256",
        "--no-pci",
        "--no-shconf",
        "--log-level=notice",
        "--vdev=net_null0",
        "--vdev=net_null1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    eal_args.push(format!(
        "--file-prefix=hr-dpdk-nullio-{}",
        std::process::id()
    ));
    DpdkSettings {
        eal_args,
        mempool_mbufs: 8191,
        mempool_cache_size: 256,
        rx_descriptors: 1024,
        tx_descriptors: 1024,
        mtu_by_device: ["net_null0", "net_null1"]
            .iter()
            .map(|d| ((*d).to_owned(), 1500))
            .collect(),
        switch_buffer_bytes: 0,
        disable_vdev_offloads: true,
    }
}

/// CPU time the thread named `name` of this process has run, from the scheduler's statistics
/// (`/proc/self/task/<tid>/schedstat`, first field, nanoseconds). The machine is shared, so a
/// rate per CPU-second of the forwarding thread says what a dedicated core would do.
fn thread_cpu_ns(name: &str) -> u64 {
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = task.expect("task").path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let stat = std::fs::read_to_string(dir.join("schedstat")).expect("schedstat");
            return stat
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .expect("schedstat run time");
        }
    }
    panic!("no thread named {name}")
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The backend's own ceiling: two stamped net_null ports, opened through `DpdkBackend` (the
/// queues lent to an lcore, registered with EAL on first use), forwarded port to port by a
/// pinned thread with no switch in between (testpmd's io mode in Rust). `BENCH_CPU` (default
/// 1): the thread's CPU; `BENCH_SECONDS` (default 5): measuring interval after 1 s of warm-up.
/// Prints one `RESULT` line for scripts/bench.sh.
#[test]
#[ignore = "benchmark: run by scripts/bench.sh dpdk (release build)"]
fn null_io_rate() {
    let cpu: usize = env_or("BENCH_CPU", 1);
    let seconds: f64 = env_or("BENCH_SECONDS", 5.0);
    let mut backend = DpdkBackend::new(settings()).unwrap_or_else(|e| panic!("{e}"));
    let _ = backend.stamp_free_mbufs(&test_frame(0, 64));
    let a = backend.open("net_null0").expect("open");
    let b = backend.open("net_null1").expect("open");
    let stop = Arc::new(AtomicBool::new(false));
    let forwarded = Arc::new(AtomicU64::new(0));
    let thread = {
        let (stop, forwarded) = (Arc::clone(&stop), Arc::clone(&forwarded));
        std::thread::Builder::new()
            .name("headroom-io".into())
            .spawn(move || {
                core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
                let (mut rx0, mut tx0, mut rx1, mut tx1) = (a.rx, a.tx, b.rx, b.tx);
                let mut burst = Vec::with_capacity(BURST_MAX);
                let mut count = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    for (rx, tx) in [(&mut rx0, &mut tx1), (&mut rx1, &mut tx0)] {
                        if rx.rx_burst(&mut burst, BURST_MAX) > 0 {
                            count += tx.tx_burst(&mut burst) as u64;
                            burst.clear();
                        }
                    }
                    forwarded.store(count, Ordering::Relaxed);
                }
            })
            .expect("thread")
    };
    std::thread::sleep(Duration::from_secs(1));
    let sample = || {
        (
            forwarded.load(Ordering::Relaxed),
            thread_cpu_ns("headroom-io"),
            Instant::now(),
        )
    };
    let before = sample();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = sample();
    stop.store(true, Ordering::Relaxed);
    thread.join().expect("io thread");
    let elapsed = (after.2 - before.2).as_secs_f64();
    let frames = after.0 - before.0;
    let cpu_s = (after.1 - before.1) as f64 / 1e9;
    let full = backend.close_ports().is_full();
    println!(
        "RESULT headroom_io per_direction_mpps={:.3} per_direction_mpps_per_cpu_s={:.3} \
         cpu_share={:.2} pool_full={full} seconds={elapsed:.2}",
        frames as f64 / 2.0 / elapsed / 1e6,
        frames as f64 / 2.0 / cpu_s / 1e6,
        cpu_s / elapsed,
    );
    assert!(full);
}
