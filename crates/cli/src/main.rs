//! `headroom`: a userspace switch dataplane for lossless Ethernet (PFC, ECN, RoCEv2).
#![forbid(unsafe_code)]

mod check;
mod client;
mod lab;
mod logging;
mod metrics;
mod run;
mod sim;
mod sonic;
mod table;
mod top;

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// A software switch for lossless Ethernet: PFC (IEEE 802.1Qbb), ECN marking, SONiC-style
/// buffer accounting and a PFC watchdog, on Linux interfaces (AF_PACKET) or DPDK ports.
///
/// Start with `headroom check -c config/minimal.toml` to see what a configuration means
/// (headroom, XOFF/XON and drop points per port and priority group), then `headroom run`.
#[derive(Debug, Parser)]
#[command(name = "headroom", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the switch on the ports of a configuration until SIGINT or SIGTERM.
    ///
    /// SIGHUP reloads the configuration file: a valid new configuration replaces the running
    /// one at once (queues are drained first, bounded by 200 ms); an invalid one is refused,
    /// logged, and the old one keeps running. On SIGINT/SIGTERM the switch stops receiving,
    /// drains what is queued, prints its final counters and exits 0.
    Run {
        /// Configuration file (TOML; every key is described in docs/config.md).
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        /// Log format; overrides `switch.log_format`.
        #[arg(long, value_enum)]
        log_format: Option<logging::Format>,
    },
    /// Validate a configuration and print what it means, without touching any port.
    ///
    /// Prints pools (size, reserved, headroom, shared) and, per port and priority group, the
    /// profile, headroom (xoff), XOFF point, XON point and drop point, in bytes and cells; then
    /// the LLDP/DCBX TLVs each port advertises. With `--host-pfc` (and optionally `--host-app`,
    /// `--host-willing`) it also judges that host configuration against every port with the
    /// rules `show dcbx` uses (docs/operations.md, "DCBX verdicts"). Exits 2 when the
    /// configuration or an argument is invalid, naming file, line, column, key and reason.
    Check {
        /// Configuration file.
        #[arg(short, long, value_name = "FILE")]
        config: PathBuf,
        #[command(flatten)]
        host: check::HostArgs,
    },
    /// Read counters, watermarks and state of the running switch (SONiC's `show`).
    Show {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        what: client::ShowCommand,
    },
    /// Clear counters, watermarks or the MAC table of the running switch.
    Clear {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        what: client::ClearCommand,
    },
    /// Change the running switch: each change is validated like the configuration file and
    /// applied atomically (port TX enable and the big red switch at once; others by a drained
    /// reconfiguration that keeps counters).
    Set {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        change: client::SetCommand,
    },
    /// Save, roll back and list named snapshots of the running configuration (snapshot before
    /// every change; one command rolls back); import and export SONiC CONFIG_DB JSON.
    Config {
        #[command(flatten)]
        target: client::Target,
        #[command(subcommand)]
        command: client::ConfigCommand,
    },
    /// Write what a port of the running switch receives and sends (PFC frames it generates
    /// included) to a pcap file, for Wireshark.
    Capture {
        #[command(flatten)]
        target: client::Target,
        #[command(flatten)]
        args: client::CaptureArgs,
    },
    /// Live view of the running switch: rates per port and queue, queue depth, PFC per
    /// priority, ECN marks, drops by reason, watchdog state (keys: tab/arrows switch views,
    /// q quits).
    Top {
        #[command(flatten)]
        target: client::Target,
        #[command(flatten)]
        args: top::TopArgs,
    },
    /// Build a virtual lab on this machine and run the switch on it (needs root).
    ///
    /// N host namespaces (P-h0..), each with eth0 at 10.0.0.(i+1)/24 and permanent neighbour
    /// entries, wired by veth pairs to the switch's ports sw-p0.. in namespace P-sw, with a
    /// generated configuration at the chosen speed. The switch runs in the foreground; Ctrl-C
    /// stops it and the lab stays until `headroom lab down`. Running it again is harmless.
    Lab(lab::LabArgs),
    /// Simulate a scenario (hosts with RoCE NICs, switches running this dataplane, links) in
    /// virtual time and write CSV time series, flow completion times, events and plots.
    ///
    /// The switches run the same core as `headroom run`, configured by the same TOML files.
    /// The same scenario and seed give byte-identical results. Exits 2 when the scenario is
    /// invalid, naming file, line, column, key and reason. With `--swarm N` instead of a
    /// scenario: N random small scenarios checked against the simulator's invariants (exit 1 on
    /// a failure, which prints the seed that reproduces it). See docs/sim.md.
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Run { config, log_format } => run::run(&config, log_format),
        Command::Check { config, host } => check::check(&config, &host),
        Command::Show { target, what } => client::show(&target, what),
        Command::Clear { target, what } => client::clear(&target, what),
        Command::Set { target, change } => client::set(&target, change),
        Command::Config { target, command } => client::config(&target, command),
        Command::Capture { target, args } => client::capture(&target, &args),
        Command::Top { target, args } => top::top(&target, &args),
        Command::Lab(args) => lab::lab(args),
        Command::Sim(args) => sim::sim(&args),
    }
}
