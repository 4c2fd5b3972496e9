//! `headroom sim`: runs a scenario in the simulator (headroom-sim) and writes its results.

use headroom_sim::output::{run, Progress};
use headroom_sim::scenario::{load, LoadOptions};
use headroom_sim::swarm::run_swarm;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `headroom sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Scenario file (TOML; docs/sim.md describes every key).
    #[arg(value_name = "SCENARIO", required_unless_present = "swarm")]
    scenario: Option<PathBuf>,
    /// Swarm testing instead of a scenario: generate N small random scenarios (topology,
    /// switch configuration, workload, faults) from `--seed` (default 1), run each and check
    /// its invariants; a failure prints the scenario's seed, and `--swarm 1 --seed <it>` runs
    /// that scenario again. Exits 1 if an invariant failed. See docs/sim.md, "Swarm testing".
    #[arg(
        long,
        value_name = "N",
        conflicts_with_all = ["scenario", "out", "progress"],
        value_parser = clap::value_parser!(u64).range(1..)
    )]
    swarm: Option<u64>,
    /// Directory for the CSVs, the summary and the plots (created if needed; default
    /// `sim-out`).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Seed of the random workload and the switches' ECN generators; overrides
    /// `simulation.seed`. With `--swarm`: the seed of the swarm's first scenario (default 1).
    #[arg(long)]
    seed: Option<u64>,
    /// Show a progress bar with simulated time and events/s on stderr (when it is a terminal).
    #[arg(long)]
    progress: bool,
}

pub fn sim(args: &SimArgs) -> ExitCode {
    if let Some(count) = args.swarm {
        return swarm(count, args.seed.unwrap_or(1));
    }
    let Some(path) = &args.scenario else {
        // clap requires SCENARIO without --swarm.
        eprintln!("error: a scenario file or --swarm N");
        return ExitCode::from(2);
    };
    let scenario = match load(
        path,
        &LoadOptions {
            seed: args.seed,
            time_divisor: None,
        },
    ) {
        Ok(s) => s,
        Err(errors) => {
            eprintln!("{errors}");
            return ExitCode::from(2);
        }
    };
    let bar = (args.progress && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(scenario.duration_ns);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {msg} (elapsed {elapsed}, eta {eta})",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let started = std::time::Instant::now();
    let mut on_progress = |p: &Progress| {
        if let Some(bar) = &bar {
            bar.set_position(p.sim_ns);
            let secs = started.elapsed().as_secs_f64().max(1e-9);
            bar.set_message(format!(
                "{:.3} / {:.3} ms simulated, {:.0} events/s",
                p.sim_ns as f64 / 1e6,
                p.duration_ns as f64 / 1e6,
                p.steps as f64 / secs
            ));
        }
    };
    let out = args.out.clone().unwrap_or_else(|| PathBuf::from("sim-out"));
    let result = run(&scenario, &out, &mut on_progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(report) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{}: {:.3} ms simulated in {secs:.2} s: {} steps, {} switch frames ({:.2} M/s), \
                 {}/{} bounded flows completed, {} drops ({} lossless); results in {}",
                display(path),
                scenario.duration_ns as f64 / 1e6,
                report.steps,
                report.switch_frames,
                report.switch_frames as f64 / secs.max(1e-9) / 1e6,
                report.flows_completed,
                report.flows_bounded,
                report.drops,
                report.lossless_drops,
                display(&out)
            );
            if report.conservation.holds() {
                ExitCode::SUCCESS
            } else {
                eprintln!(
                    "error: frame conservation violated: {:?}",
                    report.conservation
                );
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn display(p: &Path) -> String {
    p.display().to_string()
}

/// `headroom sim --swarm N --seed S`: one line per scenario, the failures with their seed.
fn swarm(count: u64, seed: u64) -> ExitCode {
    let started = std::time::Instant::now();
    let failed = run_swarm(seed, count, &mut |o| match &o.result {
        Ok(p) => println!(
            "ok   {:>4} seed {}: {} steps, {} data frames, {} drops, {} XOFF, {}",
            o.index,
            o.seed,
            p.steps,
            p.sent_frames,
            p.drops,
            p.xoffs,
            p.drained_ns.map_or_else(
                || "not drained (lossy: not required)".to_owned(),
                |t| format!("drained at {t} ns")
            )
        ),
        Err(v) => {
            println!("FAIL {:>4} seed {}: {v}", o.index, o.seed);
            eprintln!(
                "error: swarm scenario {} (seed {}) failed: {v}\n  scenario: {}\n  reproduce: \
                 headroom sim --swarm 1 --seed {}",
                o.index, o.seed, o.description, o.seed
            );
        }
    });
    println!(
        "swarm of {count} from seed {seed}: {} passed, {failed} failed in {:.1} s",
        count - failed,
        started.elapsed().as_secs_f64()
    );
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
