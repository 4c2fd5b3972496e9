//! Heap memory of the simulator per switch, per RoCE host and per RDMA flow: a counting global
//! allocator around the system's, and simulators of growing size, so that each figure is the
//! slope between two sizes (what one more switch, host or flow costs), not an estimate.
//!
//! Usage: `cargo run --release -p headroom-sim --example sim_memory` (docs/sim.md, "Memory").
//! Switches are `presets::simple(8, 40G)` (the radix of a k = 8 fat tree), chained port 0 → the
//! next switch's port 1; hosts hang off one 8-port switch; flows are unbounded WRITEs between
//! its hosts, measured after the build and after 200 µs of traffic (their QPs and the frames in
//! flight then).

use headroom_core::params::presets;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_sim::{Endpoint, HostId, HostParams, LinkParams, RdmaFlowSpec, RdmaHostParams, Sim};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Bytes allocated and not yet freed.
static LIVE_BYTES: AtomicUsize = AtomicUsize::new(0);

/// The system allocator, counting what is live. Relaxed: one thread, and the figure is read
/// between allocations by that thread.
struct Counting;

// SAFETY: every call is forwarded to `System` with the same arguments; the counter only reads
// the sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller's contract, forwarded.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(new_size, Ordering::Relaxed);
            LIVE_BYTES.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const RATE_BPS: u64 = 40_000_000_000;
const RADIX: u16 = 8;

/// Live heap bytes while `make` 's simulator exists.
fn bytes_of(make: impl FnOnce() -> Sim) -> usize {
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let sim = make();
    let during = LIVE_BYTES.load(Ordering::Relaxed);
    drop(sim);
    during.saturating_sub(before)
}

/// `switches` switches in a line; `ring_frames` overrides the egress rings' size (`None`: the
/// preset's).
fn chain(switches: usize, ring_frames: Option<u32>) -> Sim {
    let mut sim = Sim::new();
    let ids: Vec<_> = (0..switches)
        .map(|_| {
            let mut params = presets::simple(usize::from(RADIX), RATE_BPS);
            if let Some(frames) = ring_frames {
                params.queue_ring_frames = frames;
            }
            sim.add_switch(params).expect("switch")
        })
        .collect();
    for pair in ids.windows(2) {
        sim.connect(
            Endpoint::Switch(pair[0], PortId(0)),
            Endpoint::Switch(pair[1], PortId(1)),
            LinkParams::new(RATE_BPS, 1000),
        )
        .expect("link");
    }
    sim
}

/// One switch, `hosts` RoCE hosts, `flows` unbounded WRITEs from host i to host i + 1 (mod),
/// run for `run_us`.
fn star(hosts: u16, flows: usize, run_us: u64) -> Sim {
    let mut sim = Sim::new();
    let sw = sim
        .add_switch(presets::simple(usize::from(RADIX), RATE_BPS))
        .expect("switch");
    for i in 0..hosts {
        let h = sim
            .add_rdma_host(HostParams::numbered(i + 1), RdmaHostParams::default())
            .expect("host");
        sim.connect(
            Endpoint::Host(h),
            Endpoint::Switch(sw, PortId(i)),
            LinkParams::new(RATE_BPS, 1000),
        )
        .expect("link");
    }
    let n = usize::from(hosts);
    for f in 0..flows {
        let (src, dst) = (f % n, (f + 1) % n);
        sim.add_rdma_flow(RdmaFlowSpec::new(
            HostId(src),
            HostId(dst),
            None,
            Instant::ZERO,
        ))
        .expect("flow");
    }
    sim.run_until(Instant::from_micros(run_us)).expect("run");
    sim
}

fn slope(label: &str, unit: &str, points: &[(usize, usize)]) -> f64 {
    let (first, last) = (points[0], points[points.len() - 1]);
    let per = (last.1 as f64 - first.1 as f64) / (last.0 - first.0) as f64;
    let shown: Vec<String> = points
        .iter()
        .map(|(n, b)| format!("{n}: {:.1} KiB", *b as f64 / 1024.0))
        .collect();
    println!(
        "{label}: {:.1} KiB per {unit} ({})",
        per / 1024.0,
        shown.join(", ")
    );
    per
}

fn main() {
    let switches: Vec<(usize, usize)> = [1, 2, 4, 8, 16]
        .iter()
        .map(|&s| (s, bytes_of(|| chain(s, None))))
        .collect();
    let ring_frames = presets::simple(usize::from(RADIX), RATE_BPS).queue_ring_frames;
    let per_switch = slope(
        &format!("switch (8 x 40G ports, egress rings of {ring_frames} frames)"),
        "switch",
        &switches,
    );
    // What the egress rings weigh: the same switches with rings 8 times smaller.
    let small: Vec<(usize, usize)> = [1, 2, 4, 8, 16]
        .iter()
        .map(|&s| (s, bytes_of(|| chain(s, Some(ring_frames / 8)))))
        .collect();
    slope(
        &format!("switch with egress rings of {} frames", ring_frames / 8),
        "switch",
        &small,
    );
    let hosts: Vec<(usize, usize)> = [1u16, 2, 4, 8]
        .iter()
        .map(|&h| (usize::from(h), bytes_of(|| star(h, 0, 0))))
        .collect();
    let per_host = slope("RoCE host (NIC and link)", "host", &hosts);
    let built: Vec<(usize, usize)> = [0usize, 16, 64, 256]
        .iter()
        .map(|&f| (f, bytes_of(|| star(RADIX, f, 0))))
        .collect();
    slope("RDMA flow, built", "flow", &built);
    let running: Vec<(usize, usize)> = [0usize, 16, 64, 256]
        .iter()
        .map(|&f| (f, bytes_of(|| star(RADIX, f, 200))))
        .collect();
    let per_flow_running = slope(
        "RDMA flow, after 200 us of traffic (QPs, frames in flight)",
        "flow",
        &running,
    );
    // The k = 8 fat tree: 80 switches of radix 8, 128 hosts; flows as given.
    for flows in [128usize, 1024, 8192] {
        let total = 80.0 * per_switch + 128.0 * per_host + flows as f64 * per_flow_running;
        println!(
            "k = 8 fat tree (80 switches, 128 hosts, {flows} flows): about {:.1} MiB",
            total / 1024.0 / 1024.0
        );
    }
}
