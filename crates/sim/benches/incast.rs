//! Simulator speed on the shipped 2:1 incast at 40 Gb/s (`config/sim/incast-2to1-40g.toml`:
//! two long RDMA WRITE flows into one port of a single switch, DCQCN in paper mode).
//!
//! * `sim/incast_2to1_40g`: one iteration builds the scenario's simulator and runs it for
//!   `HEADROOM_SIM_BENCH_MS` simulated milliseconds (default 2; the scenario's own duration is
//!   20 ms), without the CSV and plot recording of `headroom sim`. Criterion reports it per
//!   switch frame (frames received by the switch's ports, `Throughput::Elements`).
//!
//! Before criterion runs, the bench prints one line for `scripts/bench.sh sim`:
//! `sim_bench: simulated_ms=2 switch_frames=N steps=M` — the run is deterministic, so every
//! iteration moves the same frames in the same steps (an event time the simulator processes is
//! one step). Time is the thread's CPU time, as in the core's benches: the machine is shared.
//!
//! `HEADROOM_SIM_BENCH_COUNT=1` runs the scenario once, without criterion, for callgrind.

use criterion::{criterion_group, Criterion, Throughput};
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_sim::scenario::{load, LoadOptions, Scenario};
use headroom_sim::{Sim, SwitchId};
use std::path::Path;
use std::time::Duration;

fn scenario() -> Scenario {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../config/sim/incast-2to1-40g.toml");
    match load(&path, &LoadOptions::default()) {
        Ok(s) => s,
        Err(e) => panic!("{}: {e:?}", path.display()),
    }
}

fn simulated_ms() -> u64 {
    std::env::var("HEADROOM_SIM_BENCH_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Builds the simulator and runs it for `ms`; returns it for its counters.
fn run(scenario: &Scenario, ms: u64) -> Sim {
    let mut sim = scenario.build().expect("the shipped scenario builds");
    sim.run_until(Instant::from_millis(ms)).expect("run");
    sim
}

fn switch_frames(sim: &Sim) -> u64 {
    (0..sim.switch_count())
        .map(|s| {
            let sw = sim.switch(SwitchId(s));
            let ports = sw.shared().params.ports.len();
            (0..ports)
                .map(|p| {
                    sw.shared()
                        .port_stats(PortId(u16::try_from(p).unwrap_or(u16::MAX)), sim.now())
                        .rx_frames
                })
                .sum::<u64>()
        })
        .sum()
}

fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the call's duration.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &raw mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

fn bench(c: &mut Criterion) {
    let scenario = scenario();
    let ms = simulated_ms();
    let sim = run(&scenario, ms);
    let frames = switch_frames(&sim);
    assert!(frames > 0, "the incast moves frames");
    println!(
        "sim_bench: simulated_ms={ms} switch_frames={frames} steps={}",
        sim.steps()
    );
    let mut group = c.benchmark_group("sim");
    group.sample_size(10);
    group.throughput(Throughput::Elements(frames));
    group.bench_function("incast_2to1_40g", |b| {
        b.iter_custom(|iters| {
            let mut spent = Duration::ZERO;
            for _ in 0..iters {
                let start = thread_cpu_time();
                let sim = run(&scenario, ms);
                spent += thread_cpu_time() - start;
                assert_eq!(switch_frames(&sim), frames, "the run is deterministic");
            }
            spent
        });
    });
    group.finish();
}

criterion_group!(benches, bench);

fn main() {
    if std::env::var_os("HEADROOM_SIM_BENCH_COUNT").is_some() {
        let sim = run(&scenario(), simulated_ms());
        println!(
            "sim_bench: simulated_ms={} switch_frames={} steps={}",
            simulated_ms(),
            switch_frames(&sim),
            sim.steps()
        );
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
