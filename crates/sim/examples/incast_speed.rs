//! Simulator speed on the 2:1 incast at 40 Gb/s: two unbounded RDMA WRITE flows into one port
//! of a `presets::simple` switch, no DCQCN. Prints simulated time, wall and CPU time, switch
//! frames received and steps. Usage: `cargo run --release -p headroom-sim --example
//! incast_speed -- [simulated ms, default 20]` (docs/perf.md, "Simulator").

use headroom_core::params::presets;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_sim::{
    Endpoint, HostId, HostParams, LinkParams, RdmaFlowSpec, RdmaHostParams, Sim, SwitchId,
};

fn main() {
    let rate = 40_000_000_000u64;
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(20);
    let mut sim = Sim::new();
    let sw = sim.add_switch(presets::simple(3, rate)).expect("switch");
    for i in 0..3u16 {
        let h = sim
            .add_rdma_host(HostParams::numbered(i + 1), RdmaHostParams::default())
            .expect("host");
        sim.connect(
            Endpoint::Host(h),
            Endpoint::Switch(sw, PortId(i)),
            LinkParams::new(rate, 1000),
        )
        .expect("link");
    }
    for i in 0..2 {
        sim.add_rdma_flow(RdmaFlowSpec::new(HostId(i), HostId(2), None, Instant::ZERO))
            .expect("flow");
    }
    let wall = std::time::Instant::now();
    sim.run_until(Instant::from_millis(ms)).expect("run");
    let secs = wall.elapsed().as_secs_f64();
    let frames: u64 = (0..3)
        .map(|p| {
            sim.switch(SwitchId(0))
                .shared()
                .port_stats(PortId(p), sim.now())
                .rx_frames
        })
        .sum();
    println!(
        "{ms} ms simulated in {secs:.3} s wall; {frames} switch frames; {} steps; {:.3} M switch frames per wall second",
        sim.steps(),
        frames as f64 / secs / 1e6
    );
}
