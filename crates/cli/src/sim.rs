//! `headroom sim`: runs a scenario in the simulator (headroom-sim) and writes its results.

use headroom_sim::output::{run, Progress};
use headroom_sim::scenario::{load, LoadOptions};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Arguments of `headroom sim`.
#[derive(Debug, clap::Args)]
pub struct SimArgs {
    /// Scenario file (TOML; docs/sim.md describes every key).
    #[arg(value_name = "SCENARIO")]
    scenario: PathBuf,
    /// Directory for the CSVs, the summary and the plots (created if needed).
    #[arg(long, value_name = "DIR", default_value = "sim-out")]
    out: PathBuf,
    /// Seed of the random workload and the switches' ECN generators; overrides
    /// `simulation.seed`.
    #[arg(long)]
    seed: Option<u64>,
    /// Show a progress bar with simulated time and events/s on stderr (when it is a terminal).
    #[arg(long)]
    progress: bool,
}

pub fn sim(args: &SimArgs) -> ExitCode {
    let scenario = match load(
        &args.scenario,
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
    let result = run(&scenario, &args.out, &mut on_progress);
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    match result {
        Ok(report) => {
            let secs = started.elapsed().as_secs_f64();
            println!(
                "{}: {:.3} ms simulated in {secs:.2} s: {} steps, {} switch frames ({:.2} M/s), \
                 {}/{} bounded flows completed, {} drops ({} lossless); results in {}",
                display(&args.scenario),
                scenario.duration_ns as f64 / 1e6,
                report.steps,
                report.switch_frames,
                report.switch_frames as f64 / secs.max(1e-9) / 1e6,
                report.flows_completed,
                report.flows_bounded,
                report.drops,
                report.lossless_drops,
                display(&args.out)
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
