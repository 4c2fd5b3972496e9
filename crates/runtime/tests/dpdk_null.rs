//! The runtime on two `net_null` ports, the CPU-bound ceiling of the DPDK backend.
//!
//! `net_null`'s RX hands out mbufs without writing their bytes (DPDK 22.11, `copy=0`), and a
//! fresh pool is all zeros, which a switch must drop (see `DpdkBackend::stamp_free_mbufs`). So
//! the pool is first stamped with a 64-byte RoCEv2 frame (IPv4, DSCP 3 → the lossless TC 3,
//! ECT(0), unknown unicast destination): every frame net_null produces is then classified,
//! accounted against the lossless PG and queue, checked by WRED/ECN and the PFC logic, learned,
//! and flooded to the one other port, whose net_null TX frees it.
//!
//! `stamped_null_frames_are_forwarded_by_the_full_pipeline` checks this works (and that the pool
//! is full after the stop). `null_forwarding_rate` is the benchmark behind `scripts/bench.sh
//! dpdk` (ignored by default): it reports Mpps per direction from the switch's own counters over
//! a fixed interval; the DPDK backend's own rate beside it (`null_io_rate`) is measured in
//! crates/dpdk/tests/null_io.rs. One EAL for this file (one process).
#![cfg(feature = "dpdk")]

mod dpdk_common;

use dpdk_common::{eventually, udp_frame};
use headroom_core::counters::DropReason;
use headroom_core::time::Instant as CoreInstant;
use headroom_core::types::PortId;
use headroom_dpdk::DpdkBackend;
use headroom_runtime::backends::dpdk_settings;
use headroom_runtime::lcore::Polling;
use headroom_runtime::{start, RuntimeSpec};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The benchmark's switch: two ports at 800G (the shaper never binds), SONiC defaults
/// otherwise (AZURE maps, PFC on 3-4 with computed headroom, ECN on queues 3-4, PFC watchdog),
/// MTU 1500 (DPDK's default 2176-byte mbufs, as testpmd's), one busy-polling lcore on `cpu`
/// serving both ports.
fn config_toml(cpu: usize, file_prefix: &str) -> String {
    format!(
        r#"
[switch]
name = "dpdk-null-bench"
driver = "dpdk"
log_level = "warn"

[dpdk]
eal_args = ["--no-huge", "-m", "256", "--no-pci", "--no-shconf", "--log-level=notice",
            "--file-prefix={file_prefix}", "--vdev=net_null0", "--vdev=net_null1"]
mempool_mbufs = 8191
mempool_cache_size = 256
rx_descriptors = 1024
tx_descriptors = 1024

[port_defaults]
speed = "800G"
mtu = 1500
cable_length = "5m"

[port.Ethernet0]
device = "net_null0"

[port.Ethernet1]
device = "net_null1"

[runtime]
polling = "busy"
burst_size = 32

[[runtime.lcore]]
cpu = {cpu}
rx_ports = ["Ethernet0", "Ethernet1"]
tx_ports = ["Ethernet0", "Ethernet1"]
"#
    )
}

/// What net_null's frames carry: a 64-byte RoCEv2/UDP frame, DSCP 3, ECT(0), from a unicast
/// source to a unicast destination that never sends (flooded as unknown unicast).
fn template() -> Vec<u8> {
    let src = [0x02, 0x68, 0x6e, 0, 0, 0x0a];
    let dst = [0x02, 0x68, 0x6e, 0, 0, 0x0b];
    udp_frame(src, dst, 3, 0b10, 0, 64)
}

struct Bench {
    running: headroom_runtime::Running,
    backend: DpdkBackend,
}

fn start_bench(cpu: usize) -> Bench {
    let prefix = format!("hr-rt-null-{}", std::process::id());
    let (config, _) = headroom_config::parse(&config_toml(cpu, &prefix), "bench.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    let mut backend = DpdkBackend::new(dpdk_settings(&config).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    let stamped = backend.stamp_free_mbufs(&template());
    assert_eq!(stamped, 8191, "every mbuf stamped");
    let mut spec = RuntimeSpec::for_config(&config).expect("spec");
    spec.polling = Polling::Busy;
    let running = start(spec, &mut backend).unwrap_or_else(|e| panic!("{e}"));
    Bench { running, backend }
}

fn tx_frames(running: &headroom_runtime::Running, port: u16) -> u64 {
    running
        .shared()
        .port_stats(PortId(port), CoreInstant::MAX)
        .tx_frames()
}

#[test]
fn stamped_null_frames_are_forwarded_by_the_full_pipeline() {
    let Bench {
        running,
        mut backend,
    } = start_bench(0);
    assert!(
        eventually(|| tx_frames(&running, 0) > 100_000 && tx_frames(&running, 1) > 100_000),
        "both ports forward: {} and {}",
        tx_frames(&running, 0),
        tx_frames(&running, 1)
    );
    let shared = running.stop();
    for port in [PortId(0), PortId(1)] {
        let s = shared.port_stats(port, CoreInstant::MAX);
        assert_eq!(
            s.drops.iter().sum::<u64>(),
            0,
            "{port}: no drops ({:?})",
            DropReason::ALL
                .iter()
                .filter(|r| s.drops[r.index()] > 0)
                .map(|r| (r.name(), s.drops[r.index()]))
                .collect::<Vec<_>>()
        );
        assert!(
            s.pgs[3].frames > 0,
            "{port}: classified into PG 3 (DSCP 3, TC 3)"
        );
        assert_eq!(
            s.pgs[3].frames, s.rx_frames,
            "{port}: every frame is in PG 3"
        );
        assert_eq!(
            s.pfc_tx.iter().sum::<u64>(),
            0,
            "{port}: no congestion, no PFC"
        );
    }
    // Every frame received was forwarded to the other port (flooded unknown unicast).
    let rx: u64 = (0..2)
        .map(|p| shared.port_stats(PortId(p), CoreInstant::MAX).rx_frames)
        .sum();
    let tx: u64 = (0..2)
        .map(|p| shared.port_stats(PortId(p), CoreInstant::MAX).tx_frames())
        .sum();
    assert_eq!(rx, tx);
    drop(shared);
    let check = backend.close_ports();
    assert!(check.is_full(), "{check:?}");
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

/// `BENCH_CPU` (default 1): the lcore's CPU. `BENCH_SECONDS` (default 5): measuring interval,
/// after 1 s of warm-up. Prints one `RESULT` line for scripts/bench.sh.
#[test]
#[ignore = "benchmark: run by scripts/bench.sh dpdk (release build)"]
fn null_forwarding_rate() {
    let cpu: usize = env_or("BENCH_CPU", 1);
    let seconds: f64 = env_or("BENCH_SECONDS", 5.0);
    let Bench {
        running,
        mut backend,
    } = start_bench(cpu);
    std::thread::sleep(Duration::from_secs(1));
    let stats = &running.lcore_stats()[0];
    let sample = || {
        (
            tx_frames(&running, 0) + tx_frames(&running, 1),
            stats.iterations.load(Ordering::Relaxed),
            thread_cpu_ns("headroom-lcore0"),
            Instant::now(),
        )
    };
    let before = sample();
    std::thread::sleep(Duration::from_secs_f64(seconds));
    let after = sample();
    let elapsed = (after.3 - before.3).as_secs_f64();
    let frames = after.0 - before.0;
    let cpu_s = (after.2 - before.2) as f64 / 1e9;
    let iterations = after.1 - before.1;
    let shared = running.stop();
    let drops: u64 = (0..2)
        .map(|p| {
            shared
                .port_stats(PortId(p), CoreInstant::MAX)
                .drops
                .iter()
                .sum::<u64>()
        })
        .sum();
    drop(shared);
    let full = backend.close_ports().is_full();
    // Two directions: per direction is half of what both ports transmitted.
    println!(
        "RESULT headroom_null per_direction_mpps={:.3} per_direction_mpps_per_cpu_s={:.3} \
         cpu_share={:.2} frames_per_iteration={:.1} drops={drops} pool_full={full} \
         seconds={elapsed:.2}",
        frames as f64 / 2.0 / elapsed / 1e6,
        frames as f64 / 2.0 / cpu_s / 1e6,
        cpu_s / elapsed,
        frames as f64 / iterations.max(1) as f64,
    );
    assert!(full && drops == 0);
}
