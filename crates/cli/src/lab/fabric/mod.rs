//! `headroom lab fabric`: a leaf-spine fabric on this machine — a namespace per switch and per
//! host, veth links leaf↔spine and host↔leaf, the addressing and ASN plan of [`plan`], FRR with
//! eBGP in every switch namespace ([`frr`]), the headroom configuration of every switch from one
//! template ([`switch_config`]), and a Prometheus scrape configuration of all of them.
//!
//! headroom is every switch's dataplane: one `headroom run` (AF_PACKET on the `swp` veth ends,
//! every port routed) per switch namespace, started detached with a pid file and a log in the
//! fabric's run-time directory. The addresses sit on the host interfaces headroom creates
//! (`Ethernet{k}` for `swp{k+1}`), FRR peers over them and fills the kernel's FIB, headroom
//! mirrors it and forwards; the kernel keeps IP forwarding on only for what headroom punts to
//! it (neighbour resolution, ICMP errors). A leaf's hosts each have a routed /31 to it (no SVI
//! yet). See docs/fabric.md.
//!
//! Everything is idempotent: `up` creates what is missing, puts back what differs from the plan
//! (a deleted link, a changed address, a stopped FRR) and leaves what is right alone; `down`
//! removes the namespaces (and with them every link), the FRR instances and their directories,
//! and the fabric's run-time directory.

pub(crate) mod deadlock;
pub(crate) mod ecn_vs_pfc;
pub(crate) mod frr;
pub(crate) mod funnel;
pub(crate) mod plan;
pub(crate) mod scenario;
pub(crate) mod switch_config;
pub(crate) mod thresholds;
pub(crate) mod victim;
pub(crate) mod view;

use super::config::mac_text;
use super::{
    check_privileges, ensure_namespace, ip, link_exists, namespace_exists, offloads_off, sysctl,
    LabError, NETNS_DIR,
};
use crate::table::Table;
use clap::{Args, Subcommand};
use frr::{FrrConfig, FRR_ETC, FRR_INIT, FRR_RUN};
use plan::{
    is_fabric_namespace, FabricSpec, Plan, DEFAULT_HOSTS_PER_LEAF, DEFAULT_LEAVES,
    DEFAULT_METRICS_PORT, DEFAULT_PREFIX, DEFAULT_SPEED, DEFAULT_SPINES,
};
use serde::Serialize;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};
use switch_config::{config_path, fabric_dir, SwitchTemplate};

/// How long `up` waits, by default, for every BGP session and every host pair.
const DEFAULT_TIMEOUT_S: u64 = 90;
/// Where the plan of a built fabric is kept (read by `show fabric` and `show --switch`).
const PLAN_FILE: &str = "plan.json";
/// The scrape configuration of the fabric's switches.
const SCRAPE_FILE: &str = "prometheus.yml";
/// The Linux bridge that held a leaf's host gateway when the kernel was the dataplane (phase A);
/// `up` removes it from a fabric built then.
const OLD_HOST_BRIDGE: &str = "Vlan1000";
/// How often `up` looks again at what it waits for.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// `headroom lab fabric [up] [OPTIONS]` / `headroom lab fabric down`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct FabricArgs {
    #[command(subcommand)]
    action: Option<FabricAction>,
    #[command(flatten)]
    up: UpArgs,
}

#[derive(Debug, Subcommand)]
enum FabricAction {
    /// Build (or repair) the fabric; the same as `headroom lab fabric`.
    Up(UpArgs),
    /// Remove the fabric: its namespaces and links, FRR instances, generated files.
    Down(DownArgs),
    /// Run a scenario on the fabric (built or repaired as it needs) and report what happened
    /// and where.
    Scenario(scenario::ScenarioArgs),
}

#[derive(Clone, Debug, Args)]
struct UpArgs {
    /// Number of spines (tier 1), 1..=16.
    #[arg(long, default_value_t = DEFAULT_SPINES)]
    spines: usize,
    /// Number of leaves (tier 2, top of rack), 1..=64.
    #[arg(long, default_value_t = DEFAULT_LEAVES)]
    leaves: usize,
    /// Hosts behind each leaf, 1..=32.
    #[arg(long, default_value_t = DEFAULT_HOSTS_PER_LEAF)]
    hosts_per_leaf: usize,
    /// Parallel links between a leaf and each spine, 1..=4: one count for every leaf or one per
    /// leaf (`1,2`). More than one to a leaf: two ECMP stages on the paths towards it.
    #[arg(long, value_delimiter = ',', default_value = "1")]
    links_per_spine: Vec<usize>,
    /// One ECMP hash seed for every switch (`[routing] ecmp_hash_seed`) instead of each its
    /// own: two ECMP stages that hash alike polarise.
    #[arg(long)]
    ecmp_seed: Option<u32>,
    /// Port speed of every switch port: Mb/s (`100`) or `100M`, `1G`...
    #[arg(long, default_value = DEFAULT_SPEED)]
    speed: String,
    /// Prefix of the fabric's namespace names (`P-spine1`, `P-leaf1`, `P-host1`...).
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// First Prometheus port: the switches listen on consecutive ports from here.
    #[arg(long, default_value_t = DEFAULT_METRICS_PORT)]
    metrics_port: u16,
    /// BFD on every BGP session (FRR's bfdd).
    #[arg(long)]
    bfd: bool,
    /// Seconds to wait for every BGP session and every host pair to come up.
    #[arg(long, default_value_t = DEFAULT_TIMEOUT_S)]
    timeout: u64,
    /// Print the plan and the bring-up as one JSON object instead of tables.
    #[arg(long)]
    json: bool,
    /// Print the plan (and check the generated configurations) without building anything.
    #[arg(long)]
    dry_run: bool,
    /// Return once the fabric is up and leave it running (`headroom lab fabric down` removes
    /// it). Without it `up` stays in the foreground, reports a switch whose dataplane exits, and
    /// removes the fabric on Ctrl-C (SIGINT or SIGTERM).
    #[arg(long)]
    detach: bool,
    /// Print nothing (a scenario builds its fabric).
    #[arg(skip)]
    quiet: bool,
}

impl UpArgs {
    /// The defaults of the command line, for fabric `prefix`.
    fn defaults(prefix: &str) -> Self {
        Self {
            spines: DEFAULT_SPINES,
            leaves: DEFAULT_LEAVES,
            hosts_per_leaf: DEFAULT_HOSTS_PER_LEAF,
            links_per_spine: vec![1],
            ecmp_seed: None,
            speed: DEFAULT_SPEED.to_owned(),
            prefix: prefix.to_owned(),
            metrics_port: DEFAULT_METRICS_PORT,
            bfd: false,
            timeout: DEFAULT_TIMEOUT_S,
            json: false,
            dry_run: false,
            detach: true,
            quiet: false,
        }
    }
}

#[derive(Clone, Debug, Args)]
struct DownArgs {
    /// Prefix of the fabric to remove.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
}

pub(crate) fn fabric(args: FabricArgs) -> ExitCode {
    let result = match args.action {
        None => up_in_foreground(&args.up),
        Some(FabricAction::Up(up_args)) => up_in_foreground(&up_args),
        Some(FabricAction::Down(down_args)) => down(&down_args),
        Some(FabricAction::Scenario(scenario_args)) => scenario::scenario(&scenario_args),
    };
    match result {
        Ok(code) => code,
        Err(e) => e.exit(),
    }
}

/// How often the foreground `up` looks at the Ctrl-C flag and at the switches' dataplanes.
const FOREGROUND_POLL: Duration = Duration::from_millis(250);

/// `up` from the command line: builds or repairs the fabric, then — unless `--detach` or
/// `--dry-run` — stays in the foreground until SIGINT/SIGTERM and removes the fabric, as a lab a
/// user starts at a terminal is expected to (Mininet's CLI; `headroom lab`'s switch). A Ctrl-C
/// during the bring-up stops `up` there and leaves what was built: `down` removes it, `up`
/// repairs it.
fn up_in_foreground(args: &UpArgs) -> Result<ExitCode, LabError> {
    let code = up(args)?;
    if args.detach || args.dry_run {
        return Ok(code);
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, std::sync::Arc::clone(&stop))
            .map_err(|e| LabError::Failed(format!("cannot install a signal handler: {e}")))?;
    }
    let plan = read_plan(&args.prefix).map_err(LabError::Failed)?;
    let p = &args.prefix;
    if !args.json {
        crate::client::emit(format_args!(
            "\nThe fabric runs until Ctrl-C, which removes it (`--detach` leaves it running).\n"
        ));
    }
    // A dataplane that exits is said once, with its log; `up` again restarts it.
    let mut reported_exited = BTreeSet::new();
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        for switch in &plan.switches {
            if switch_pid(p, &switch.name).is_none() && reported_exited.insert(switch.name.clone())
            {
                crate::client::emit(format_args!(
                    "{}: its headroom exited (log {}); `headroom lab fabric --prefix {p} --detach` \
                     in another terminal restarts it\n",
                    switch.name,
                    log_path(p, &switch.name).display()
                ));
            }
        }
        std::thread::sleep(FOREGROUND_POLL);
    }
    if !args.json {
        crate::client::emit(format_args!("\nRemoving the fabric {p:?}...\n"));
    }
    down(&DownArgs {
        prefix: args.prefix.clone(),
    })
}

/// What `up` found and did, for the report.
#[derive(Debug, Default, Serialize)]
struct BringUp {
    /// Seconds from the start of `up` until every session was established and every host
    /// reached every other.
    ready_after_s: f64,
    /// BGP sessions established / expected (both ends counted).
    bgp_sessions_established: usize,
    bgp_sessions_expected: usize,
    /// Leaf routes to other leaves' hosts checked in the kernel with one path per spine.
    ecmp_routes: usize,
    /// Host pairs (ordered) that answered a ping / all ordered pairs.
    host_pairs_reachable: usize,
    host_pairs: usize,
    /// What was created or put back (empty when everything was already as planned).
    repaired: Vec<String>,
    /// Files written.
    files: Vec<String>,
}

/// `--json` output of `up`.
#[derive(Debug, Serialize)]
struct UpReport<'a> {
    plan: &'a Plan,
    bring_up: &'a BringUp,
}

fn up(args: &UpArgs) -> Result<ExitCode, LabError> {
    let started = Instant::now();
    let spec = FabricSpec {
        speed: args.speed.clone(),
        metrics_port: args.metrics_port,
        bfd: args.bfd,
        links_per_spine: args.links_per_spine.clone(),
        ..FabricSpec::new(&args.prefix, args.spines, args.leaves, args.hosts_per_leaf)
    };
    spec.check().map_err(LabError::Refused)?;
    let plan = spec.plan();
    // Every generated file first: a bad --speed is refused before anything is built.
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let template = SwitchTemplate {
        ecmp_hash_seed: args.ecmp_seed,
        ..SwitchTemplate::new(&spec.speed, cpus)
    };
    let mut switch_configs = Vec::new();
    for switch in &plan.switches {
        let text = template.toml(&plan, switch).map_err(LabError::Failed)?;
        let path = config_path(&spec.prefix, &switch.name);
        headroom_config::parse(&text, &path.display().to_string()).map_err(|e| {
            match e.errors.iter().find(|d| d.key == "port_defaults.speed") {
                Some(d) => LabError::Refused(format!("--speed {}: {}", args.speed, d.message)),
                None => LabError::Failed(format!(
                    "the generated configuration of {} is refused:\n{e}",
                    switch.name
                )),
            }
        })?;
        switch_configs.push((switch.name.clone(), path, text));
    }
    let mut bring_up = BringUp::default();
    if args.dry_run {
        print_up(&plan, &bring_up, args.json, true)?;
        return Ok(ExitCode::SUCCESS);
    }
    check_privileges()?;
    check_frr()?;
    remove_extra_namespaces(&plan, &mut bring_up)?;
    // Switches whose namespace or links were (re)created: a running headroom there holds the
    // old devices (or namespace) and restarts.
    let mut restart = build_network(&plan, &mut bring_up)?;

    // Files: the plan, the switches' configurations, the scrape configuration, FRR's.
    let dir = fabric_dir(&spec.prefix);
    std::fs::create_dir_all(&dir)
        .map_err(|e| LabError::Failed(format!("creating {}: {e}", dir.display())))?;
    let plan_text =
        serde_json::to_string_pretty(&plan).map_err(|e| LabError::Failed(e.to_string()))?;
    let files = [
        (dir.join(PLAN_FILE), plan_text),
        (dir.join(SCRAPE_FILE), scrape_config(&plan)),
    ];
    for (path, text) in &files {
        write_file(path, text)?;
        bring_up.files.push(path.display().to_string());
    }
    // The dataplanes: a switch whose configuration changed restarts too.
    for (name, path, text) in &switch_configs {
        if write_file(path, text)? {
            restart.insert(name.clone());
        }
        bring_up.files.push(path.display().to_string());
    }
    let deadline = started + Duration::from_secs(args.timeout);
    start_switches(&plan, &restart, deadline, &mut bring_up)?;
    set_switch_addresses(&plan, &mut bring_up)?;
    for switch in &plan.switches {
        let config = FrrConfig::for_switch(&plan, switch);
        let restart = write_frr_instance(&switch.namespace, &config, &mut bring_up)?;
        start_frr(&switch.namespace, restart, &mut bring_up)?;
    }
    wait_until_up(&plan, deadline, &mut bring_up)?;
    bring_up.ready_after_s = started.elapsed().as_secs_f64();
    if !args.quiet {
        print_up(&plan, &bring_up, args.json, false)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn print_up(plan: &Plan, bring_up: &BringUp, json: bool, dry_run: bool) -> Result<(), LabError> {
    if json {
        let report = UpReport { plan, bring_up };
        let text =
            serde_json::to_string_pretty(&report).map_err(|e| LabError::Failed(e.to_string()))?;
        crate::client::emit(format_args!("{text}\n"));
    } else if dry_run {
        let text = describe(plan, bring_up);
        // The plan only: no bring-up line.
        let mut lines = text.lines();
        let head = lines.next().unwrap_or_default();
        let rest: Vec<&str> = lines.skip(1).collect();
        crate::client::emit(format_args!(
            "{head} [dry run: nothing built]\n{}\n",
            rest.join("\n")
        ));
    } else {
        crate::client::emit(format_args!("{}", describe(plan, bring_up)));
    }
    Ok(())
}

/// FRR must be installed (Debian `frr`): its init script runs one instance per namespace.
fn check_frr() -> Result<(), LabError> {
    for (path, what) in [
        (FRR_INIT, "FRR's init script"),
        ("/usr/lib/frr/bgpd", "bgpd"),
        ("/usr/lib/frr/zebra", "zebra"),
    ] {
        if !Path::new(path).exists() {
            return Err(LabError::Refused(format!(
                "{what} ({path}) is missing: the fabric runs FRR in every switch namespace; \
                 install it with `apt-get install frr`"
            )));
        }
    }
    if !on_path("vtysh") {
        return Err(LabError::Refused(
            "vtysh is missing (`apt-get install frr`)".into(),
        ));
    }
    Ok(())
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

/// Writes `text` to `path` unless it already says that; whether it wrote.
fn write_file(path: &Path, text: &str) -> Result<bool, LabError> {
    if std::fs::read_to_string(path).is_ok_and(|old| old == text) {
        return Ok(false);
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| LabError::Failed(format!("creating {}: {e}", dir.display())))?;
    }
    std::fs::write(path, text)
        .map_err(|e| LabError::Failed(format!("writing {}: {e}", path.display())))?;
    Ok(true)
}

/// The fabric's namespaces that exist now.
fn existing_namespaces(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| is_fabric_namespace(prefix, n))
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// Namespaces of an earlier, larger fabric with this prefix.
fn remove_extra_namespaces(plan: &Plan, bring_up: &mut BringUp) -> Result<(), LabError> {
    let wanted: BTreeSet<String> = plan.namespaces().into_iter().collect();
    for name in existing_namespaces(&plan.spec.prefix) {
        if !wanted.contains(&name) {
            if let Some(switch) = name
                .strip_prefix(&plan.spec.prefix)
                .and_then(|n| n.strip_prefix('-'))
            {
                stop_switch(&plan.spec.prefix, switch);
            }
            stop_frr(&name);
            ip(&["netns", "del", &name], None)?;
            remove_frr_dirs(&name)?;
            bring_up.repaired.push(format!("removed namespace {name}"));
        }
    }
    Ok(())
}

/// The IPv4 addresses (`a.b.c.d/len`) on `device` in `namespace`.
fn addresses(namespace: &str, device: &str) -> Result<BTreeSet<String>, LabError> {
    let out = ip(
        &["-n", namespace, "-j", "-4", "addr", "show", "dev", device],
        None,
    )?;
    let value: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    let mut set = BTreeSet::new();
    for link in value.as_array().into_iter().flatten() {
        for info in link["addr_info"].as_array().into_iter().flatten() {
            if let (Some(a), Some(len)) = (info["local"].as_str(), info["prefixlen"].as_u64()) {
                set.insert(format!("{a}/{len}"));
            }
        }
    }
    Ok(set)
}

/// Gives `device` exactly the addresses `wanted` (flushes and re-adds only when they differ).
fn set_addresses(
    namespace: &str,
    device: &str,
    wanted: &[String],
    bring_up: &mut BringUp,
) -> Result<(), LabError> {
    let wanted_set: BTreeSet<String> = wanted.iter().cloned().collect();
    if addresses(namespace, device)? == wanted_set {
        return Ok(());
    }
    ip(
        &["-n", namespace, "-4", "addr", "flush", "dev", device],
        None,
    )?;
    for a in wanted {
        ip(&["-n", namespace, "addr", "add", a, "dev", device], None)?;
    }
    bring_up.repaired.push(format!(
        "addresses of {device} in {namespace}: {}",
        wanted.join(" ")
    ));
    Ok(())
}

/// Namespaces, sysctls, links, addresses and host routes; the names of the switches whose
/// namespace or links it (re)created.
fn build_network(plan: &Plan, bring_up: &mut BringUp) -> Result<BTreeSet<String>, LabError> {
    let mut touched = BTreeSet::new();
    let switch_of = |namespace: &str| {
        plan.switches
            .iter()
            .find(|s| s.namespace == namespace)
            .map(|s| s.name.clone())
    };
    for ns in plan.namespaces() {
        if !namespace_exists(&ns) {
            ensure_namespace(&ns)?;
            bring_up.repaired.push(format!("created namespace {ns}"));
            touched.extend(switch_of(&ns));
        }
        // IPv4 only: no router advertisements, MLD or DAD in the fabric's captures.
        for key in [
            "net.ipv6.conf.all.disable_ipv6",
            "net.ipv6.conf.default.disable_ipv6",
        ] {
            sysctl(&ns, key, "1")?;
        }
        ip(&["-n", &ns, "link", "set", "lo", "up"], None)?;
    }
    for switch in &plan.switches {
        let ns = &switch.namespace;
        // headroom forwards; the kernel keeps forwarding on so that it answers what headroom
        // punts to it (resolves next hops, sends ICMP errors: reference §1.4). Multipath hashing
        // on the 5-tuple (policy 1) for what the kernel itself sends.
        sysctl(ns, "net.ipv4.ip_forward", "1")?;
        sysctl(ns, "net.ipv4.fib_multipath_hash_policy", "1")?;
        for key in [
            "net.ipv4.conf.all.rp_filter",
            "net.ipv4.conf.default.rp_filter",
        ] {
            sysctl(ns, key, "0")?;
        }
    }
    for link in &plan.links {
        let (a, b) = (&link.a, &link.b);
        let have_a = link_exists(&a.namespace, &a.device);
        let have_b = link_exists(&b.namespace, &b.device);
        if have_a && have_b {
            continue;
        }
        for (have, end) in [(have_a, a), (have_b, b)] {
            if have {
                ip(&["-n", &end.namespace, "link", "del", &end.device], None)?;
            }
        }
        ip(
            &[
                "-n",
                &a.namespace,
                "link",
                "add",
                &a.device,
                "type",
                "veth",
                "peer",
                "name",
                &b.device,
                "netns",
                &b.namespace,
            ],
            None,
        )?;
        bring_up.repaired.push(format!(
            "created link {}:{} - {}:{}",
            a.namespace, a.device, b.namespace, b.device
        ));
        touched.extend(switch_of(&a.namespace));
        touched.extend(switch_of(&b.namespace));
    }
    for switch in &plan.switches {
        let ns = &switch.namespace;
        set_addresses(
            ns,
            "lo",
            &[format!("{}/32", switch.loopback), "127.0.0.1/8".into()],
            bring_up,
        )?;
        // The dataplane devices carry no address (headroom owns them; the addresses are on its
        // host interfaces), and a bridge of an older fabric is removed.
        if link_exists(ns, OLD_HOST_BRIDGE) {
            ip(&["-n", ns, "link", "del", OLD_HOST_BRIDGE], None)?;
            bring_up
                .repaired
                .push(format!("removed bridge {OLD_HOST_BRIDGE} in {ns}"));
        }
        for port in &switch.ports {
            offloads_off(ns, &port.device)?;
            set_addresses(ns, &port.device, &[], bring_up)?;
            ip(&["-n", ns, "link", "set", &port.device, "up"], None)?;
        }
    }
    for host in &plan.hosts {
        let ns = &host.namespace;
        let dev = &host.device;
        ip(
            &["-n", ns, "link", "set", dev, "address", &mac_text(host.mac)],
            None,
        )?;
        set_addresses(
            ns,
            dev,
            &[format!("{}/{}", host.address, host.prefix_len)],
            bring_up,
        )?;
        ip(&["-n", ns, "link", "set", dev, "up"], None)?;
        ip(
            &[
                "-n",
                ns,
                "route",
                "replace",
                "default",
                "via",
                &host.gateway.to_string(),
                "dev",
                dev,
            ],
            None,
        )?;
        offloads_off(ns, dev)?;
    }
    Ok(touched)
}

/// Switch `name`'s `headroom run` pid file.
fn pid_path(prefix: &str, name: &str) -> PathBuf {
    fabric_dir(prefix).join(format!("{name}.pid"))
}

/// Switch `name`'s `headroom run` log (its stdout and stderr).
fn log_path(prefix: &str, name: &str) -> PathBuf {
    fabric_dir(prefix).join(format!("{name}.log"))
}

/// The pid of switch `name`'s `headroom run`, if its pid file names a live headroom process
/// started with this switch's configuration.
fn switch_pid(prefix: &str, name: &str) -> Option<i32> {
    let pid: i32 = std::fs::read_to_string(pid_path(prefix, name))
        .ok()?
        .trim()
        .parse()
        .ok()?;
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let config = config_path(prefix, name);
    let names_config = cmdline
        .split(|&b| b == 0)
        .any(|arg| Path::new(std::ffi::OsStr::from_bytes(arg)) == config);
    (comm.trim() == "headroom" && names_config).then_some(pid)
}

/// Stops switch `name`'s `headroom run` (SIGTERM, then SIGKILL after 5 s) and removes its pid
/// file.
fn stop_switch(prefix: &str, name: &str) {
    if let Some(pid) = switch_pid(prefix, name).and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        let end = Instant::now() + Duration::from_secs(5);
        while Path::new(&format!("/proc/{}", pid.as_raw_nonzero())).exists() {
            // A switch this process started (a scenario's earlier `up`) stays a zombie until
            // reaped; for anyone else's this fails (not our child) and changes nothing.
            if let Ok(Some(_)) =
                rustix::process::waitpid(Some(pid), rustix::process::WaitOptions::NOHANG)
            {
                break;
            }
            if Instant::now() >= end {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = std::fs::remove_file(pid_path(prefix, name));
}

/// Starts `headroom run` in every switch namespace where it does not run (or runs an older
/// configuration: `changed`), detached from this process (its own process group, output to the
/// switch's log), and waits until each has created its host interfaces.
fn start_switches(
    plan: &Plan,
    changed: &BTreeSet<String>,
    deadline: Instant,
    bring_up: &mut BringUp,
) -> Result<(), LabError> {
    let prefix = &plan.spec.prefix;
    let program = std::env::current_exe()
        .map_err(|e| LabError::Failed(format!("where is this headroom binary? {e}")))?;
    let mut started = Vec::new();
    for switch in &plan.switches {
        let running = switch_pid(prefix, &switch.name);
        if running.is_some() && !changed.contains(&switch.name) {
            continue;
        }
        if running.is_some() {
            stop_switch(prefix, &switch.name);
        }
        let log_file = log_path(prefix, &switch.name);
        let log = std::fs::File::create(&log_file)
            .map_err(|e| LabError::Failed(format!("creating {}: {e}", log_file.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|e| LabError::Failed(format!("{}: {e}", log_file.display())))?;
        let child = Command::new("ip")
            .args(["netns", "exec", &switch.namespace])
            .arg(&program)
            .arg("run")
            .arg("--config")
            .arg(config_path(prefix, &switch.name))
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Its own process group: a Ctrl-C of `up` does not stop the fabric.
            .process_group(0)
            .spawn()
            .map_err(|e| {
                LabError::Failed(format!("starting headroom in {}: {e}", switch.namespace))
            })?;
        // `ip netns exec` execs the program: the child is the switch.
        write_file(
            &pid_path(prefix, &switch.name),
            &format!("{}\n", child.id()),
        )?;
        bring_up.repaired.push(format!(
            "headroom {} in {}",
            if running.is_some() {
                "restarted"
            } else {
                "started"
            },
            switch.namespace
        ));
        started.push((switch, child));
    }
    for (switch, mut child) in started {
        loop {
            let ready = switch
                .ports
                .iter()
                .all(|p| link_exists(&switch.namespace, &p.name));
            if ready {
                break;
            }
            let exited = child.try_wait().ok().flatten();
            if exited.is_some() || Instant::now() >= deadline {
                let log =
                    std::fs::read_to_string(log_path(prefix, &switch.name)).unwrap_or_default();
                return Err(LabError::Failed(format!(
                    "headroom in {} {} before its host interfaces were up; its log ({}):\n{}",
                    switch.namespace,
                    exited.map_or_else(|| "timed out".to_owned(), |s| format!("exited ({s})")),
                    log_path(prefix, &switch.name).display(),
                    log.trim_end()
                )));
            }
            std::thread::sleep(POLL_INTERVAL);
        }
        // The child is reaped by init when `up` exits; dropping the handle does not stop it.
        drop(child);
    }
    Ok(())
}

/// Every switch port's /31 on its host interface `Ethernet{k}` (created by headroom).
fn set_switch_addresses(plan: &Plan, bring_up: &mut BringUp) -> Result<(), LabError> {
    for switch in &plan.switches {
        let ns = &switch.namespace;
        for port in &switch.ports {
            if let Some(a) = &port.address {
                set_addresses(ns, &port.name, &[a.to_string()], bring_up)?;
            }
            ip(&["-n", ns, "link", "set", &port.name, "up"], None)?;
        }
    }
    Ok(())
}

/// Writes an FRR instance's files; whether they changed (then a running FRR restarts).
fn write_frr_instance(
    namespace: &str,
    config: &FrrConfig,
    bring_up: &mut BringUp,
) -> Result<bool, LabError> {
    let dir = Path::new(FRR_ETC).join(namespace);
    let conf = dir.join("frr.conf");
    let text = config.render();
    let files = [
        (conf.clone(), text),
        (dir.join("daemons"), config.daemons()),
        (dir.join("vtysh.conf"), frr::VTYSH_CONF.to_owned()),
    ];
    let mut changed = false;
    for (path, text) in &files {
        if std::fs::read_to_string(path).is_ok_and(|old| &old == text) {
            continue;
        }
        write_file(path, text)?;
        changed = true;
        bring_up.files.push(path.display().to_string());
    }
    // FRR checks what it will run before it runs it.
    frr::check_with_frr(&conf).map_err(LabError::Failed)?;
    // The daemons run as user frr and read their configuration.
    let status = Command::new("chown")
        .args(["-R", "frr:frr"])
        .arg(&dir)
        .status()
        .map_err(|e| LabError::Failed(format!("chown {}: {e}", dir.display())))?;
    if !status.success() {
        return Err(LabError::Failed(format!(
            "chown -R frr:frr {} failed (is the frr user there?)",
            dir.display()
        )));
    }
    Ok(changed)
}

/// Whether FRR's watchfrr runs for instance `namespace` (its pid file names a live watchfrr).
fn frr_running(namespace: &str) -> bool {
    let pidfile = Path::new(FRR_RUN).join(namespace).join("watchfrr.pid");
    let Some(pid) = std::fs::read_to_string(pidfile)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
    else {
        return false;
    };
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "watchfrr")
}

/// `frrinit.sh start|restart NS` inside the namespace, unless it already runs unchanged.
fn start_frr(namespace: &str, restart: bool, bring_up: &mut BringUp) -> Result<(), LabError> {
    let running = frr_running(namespace);
    let action = match (running, restart) {
        (true, false) => return Ok(()),
        (true, true) => "restart",
        (false, _) => "start",
    };
    let output = Command::new("ip")
        .args(["netns", "exec", namespace, FRR_INIT, action, namespace])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Failed(format!("{FRR_INIT} {action} {namespace}: {e}")))?;
    if !output.status.success() {
        return Err(LabError::Failed(format!(
            "{FRR_INIT} {action} {namespace} failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout).trim(),
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    bring_up
        .repaired
        .push(format!("FRR {action}ed in {namespace}"));
    Ok(())
}

/// FRR's daemons (the names their processes have), for the pid files of an instance.
const FRR_PROCESSES: &[&str] = &["watchfrr", "zebra", "bgpd", "staticd", "bfdd", "mgmtd"];

/// Stops instance `namespace` of FRR: its init script while the namespace exists, then any
/// daemon its pid files still name (a namespace deleted under a running FRR).
fn stop_frr(namespace: &str) {
    let run = Path::new(FRR_RUN).join(namespace);
    if namespace_exists(namespace) && run.exists() {
        let _ = Command::new("ip")
            .args(["netns", "exec", namespace, FRR_INIT, "stop", namespace])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let Ok(dir) = std::fs::read_dir(&run) else {
        return;
    };
    for entry in dir.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "pid") {
            continue;
        }
        let Some(pid) = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| t.trim().parse::<i32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if FRR_PROCESSES.contains(&comm.trim()) {
            if let Some(pid) = rustix::process::Pid::from_raw(pid) {
                let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
            }
        }
    }
}

fn remove_frr_dirs(namespace: &str) -> Result<(), LabError> {
    for root in [FRR_ETC, FRR_RUN] {
        let dir = Path::new(root).join(namespace);
        if dir.exists() {
            std::fs::remove_dir_all(&dir)
                .map_err(|e| LabError::Failed(format!("removing {}: {e}", dir.display())))?;
        }
    }
    Ok(())
}

/// BGP sessions in state Established on `namespace`'s FRR (from `show bgp summary json`).
fn established_sessions(namespace: &str) -> usize {
    let Ok(output) = Command::new("vtysh")
        .args(["-N", namespace, "-c", "show bgp ipv4 unicast summary json"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
    else {
        return 0;
    };
    let value: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    value["peers"].as_object().map_or(0, |peers| {
        peers
            .values()
            .filter(|p| p["state"].as_str() == Some("Established"))
            .count()
    })
}

/// (namespace, prefix, paths) of every route a leaf must have to another leaf's hosts' /31s: one
/// path per spine.
fn expected_ecmp_routes(plan: &Plan) -> Vec<(String, String, usize)> {
    let mut routes = Vec::new();
    for leaf in plan.leaves() {
        for other in plan.leaves().filter(|o| o.name != leaf.name) {
            for (_, a) in other.host_ports() {
                routes.push((
                    leaf.namespace.clone(),
                    a.to_string(),
                    plan.spec.spines * plan.spec.links(leaf.number),
                ));
            }
        }
    }
    routes
}

/// How many next hops the kernel of `namespace` has for `prefix` (0: no route).
fn kernel_paths(namespace: &str, prefix: &str) -> usize {
    let Ok(out) = ip(&["-n", namespace, "-j", "route", "show", prefix], None) else {
        return 0;
    };
    let value: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    value
        .as_array()
        .and_then(|routes| routes.first())
        .map_or(0, |route| match route["nexthops"].as_array() {
            Some(hops) => hops.len(),
            None => usize::from(route["gateway"].is_string()),
        })
}

/// Whether `from`'s namespace reaches `to` (one ping, one second).
fn pings(namespace: &str, to: std::net::Ipv4Addr) -> bool {
    Command::new("ip")
        .args([
            "netns", "exec", namespace, "ping", "-n", "-q", "-c", "1", "-W", "1",
        ])
        .arg(to.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Waits until every BGP session is established and every host reaches every other.
fn wait_until_up(plan: &Plan, deadline: Instant, bring_up: &mut BringUp) -> Result<(), LabError> {
    bring_up.bgp_sessions_expected = plan.switches.iter().map(|s| s.bgp_neighbors().len()).sum();
    loop {
        bring_up.bgp_sessions_established = plan
            .switches
            .iter()
            .map(|s| established_sessions(&s.namespace))
            .sum();
        if bring_up.bgp_sessions_established == bring_up.bgp_sessions_expected {
            break;
        }
        if Instant::now() >= deadline {
            return Err(LabError::Failed(format!(
                "BGP: {} of {} sessions established before the timeout; see `vtysh -N {} -c \
                 'show bgp summary'`",
                bring_up.bgp_sessions_established,
                bring_up.bgp_sessions_expected,
                plan.switches.first().map_or("", |s| s.namespace.as_str())
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    // Every leaf's kernel forwards to every other leaf's hosts on one path per spine (ECMP).
    let expected_routes = expected_ecmp_routes(plan);
    loop {
        let short: Vec<String> = expected_routes
            .iter()
            .filter(|(ns, net, paths)| kernel_paths(ns, net) != *paths)
            .map(|(ns, net, paths)| format!("{ns} {net} ({paths} paths)"))
            .collect();
        if short.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            return Err(LabError::Failed(format!(
                "ECMP routes not installed (or with another number of paths) at the timeout: {}",
                short.join(", ")
            )));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    bring_up.ecmp_routes = expected_routes.len();
    let (pairs, reachable) = wait_until_hosts_reach_each_other(plan, deadline)?;
    bring_up.host_pairs = pairs;
    bring_up.host_pairs_reachable = reachable;
    Ok(())
}

/// Waits until every host pings every other (all pairs at once, a round per second at most):
/// (pairs, reachable) on success.
fn wait_until_hosts_reach_each_other(
    plan: &Plan,
    deadline: Instant,
) -> Result<(usize, usize), LabError> {
    let pairs = host_pairs(plan);
    wait_until_pairs_reach(&pairs, deadline)?;
    Ok((pairs.len(), pairs.len()))
}

/// Every ordered pair of distinct hosts.
fn host_pairs(plan: &Plan) -> Vec<(&plan::Host, &plan::Host)> {
    plan.hosts
        .iter()
        .flat_map(|a| {
            plan.hosts
                .iter()
                .filter(move |b| b.name != a.name)
                .map(move |b| (a, b))
        })
        .collect()
}

/// One ping from each host to each other, all at once: the pairs that answered (a second at
/// most).
pub(super) fn reachable_pairs(plan: &Plan) -> Vec<(&plan::Host, &plan::Host)> {
    ping_round(&host_pairs(plan), true)
}

/// The pairs of one parallel ping round that answered (`answered`) or did not.
fn ping_round<'a>(
    pairs: &[(&'a plan::Host, &'a plan::Host)],
    answered: bool,
) -> Vec<(&'a plan::Host, &'a plan::Host)> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = pairs
            .iter()
            .map(|&(a, b)| scope.spawn(move || (a, b, pings(&a.namespace, b.address))))
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .filter(|&(_, _, ok)| ok == answered)
            .map(|(a, b, _)| (a, b))
            .collect()
    })
}

/// Waits until each of `pairs` pings (one round per second at most). Pings are lossy traffic
/// (DSCP 0), so a paused or deadlocked lossless priority does not stop them; a switch whose
/// dataplane is restarting does (a `set` interrupts forwarding for 140-180 ms here, seconds
/// under heavy load).
pub(super) fn wait_until_pairs_reach(
    pairs: &[(&plan::Host, &plan::Host)],
    deadline: Instant,
) -> Result<(), LabError> {
    let mut missing = pairs.to_vec();
    loop {
        let failed = ping_round(&missing, false);
        if failed.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            let list: Vec<String> = failed
                .iter()
                .take(8)
                .map(|(a, b)| format!("{} -> {} ({})", a.name, b.name, b.address))
                .collect();
            return Err(LabError::Failed(format!(
                "{} of {} host pairs still unreachable at the timeout: {}",
                failed.len(),
                pairs.len(),
                list.join(", ")
            )));
        }
        missing = failed;
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The scrape configuration of every switch (JSON, which is YAML: Prometheus reads it as is).
fn scrape_config(plan: &Plan) -> String {
    #[derive(Serialize)]
    struct Config {
        global: Global,
        scrape_configs: Vec<Job>,
    }
    #[derive(Serialize)]
    struct Global {
        scrape_interval: &'static str,
    }
    #[derive(Serialize)]
    struct Job {
        job_name: &'static str,
        static_configs: Vec<Targets>,
    }
    #[derive(Serialize)]
    struct Targets {
        targets: Vec<String>,
        labels: std::collections::BTreeMap<&'static str, String>,
    }
    let static_configs = plan
        .switches
        .iter()
        .map(|s| Targets {
            targets: vec![format!("127.0.0.1:{}", s.metrics_port)],
            labels: [
                ("fabric", plan.spec.prefix.clone()),
                ("switch", s.name.clone()),
                ("role", s.role.as_str().to_owned()),
            ]
            .into_iter()
            .collect(),
        })
        .collect();
    let config = Config {
        global: Global {
            scrape_interval: "1s",
        },
        scrape_configs: vec![Job {
            job_name: "headroom",
            static_configs,
        }],
    };
    format!(
        "# Generated by `headroom lab fabric --prefix {}`: every switch of the fabric.\n{}\n",
        plan.spec.prefix,
        serde_json::to_string_pretty(&config).unwrap_or_default()
    )
}

/// The topology as a table and a drawing, and the commands to try.
fn describe(plan: &Plan, bring_up: &BringUp) -> String {
    let p = &plan.spec.prefix;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "headroom lab fabric {p:?}: {} spines, {} leaves, {} hosts at {} (headroom dataplanes, FRR eBGP)",
        plan.spec.spines,
        plan.spec.leaves,
        plan.hosts.len(),
        plan.spec.speed
    );
    let _ = writeln!(
        t,
        "  {} of {} BGP sessions established, {} ECMP routes with {} paths each (one per uplink), \
         {} of {} host pairs reachable, {:.1} s{}",
        bring_up.bgp_sessions_established,
        bring_up.bgp_sessions_expected,
        bring_up.ecmp_routes,
        plan.spec.spines * plan.spec.links(1),
        bring_up.host_pairs_reachable,
        bring_up.host_pairs,
        bring_up.ready_after_s,
        if bring_up.repaired.is_empty() {
            " (nothing to repair)".to_owned()
        } else {
            format!(" ({} changes)", bring_up.repaired.len())
        }
    );
    let _ = writeln!(t, "\n{}", drawing(plan));
    let mut switches = Table::new([
        "Switch",
        "Namespace",
        "ASN",
        "Loopback",
        "Port",
        "Device",
        "Address",
        "Peer",
    ])
    .left_all();
    for s in &plan.switches {
        for (k, port) in s.ports.iter().enumerate() {
            let first = k == 0;
            let peer = match &port.peer {
                plan::Peer::Switch { name, port } => format!("{name} {port}"),
                plan::Peer::Host { name } => {
                    let host = plan.hosts.iter().find(|h| &h.name == name);
                    format!(
                        "{name} {}",
                        host.map_or(String::new(), |h| h.address.to_string())
                    )
                }
            };
            switches.row([
                if first { s.name.clone() } else { String::new() },
                if first {
                    s.namespace.clone()
                } else {
                    String::new()
                },
                if first {
                    s.asn.to_string()
                } else {
                    String::new()
                },
                if first {
                    format!("{}/32", s.loopback)
                } else {
                    String::new()
                },
                port.name.clone(),
                port.device.clone(),
                port.address
                    .map_or_else(|| "-".to_owned(), |a| a.to_string()),
                peer,
            ]);
        }
    }
    let _ = writeln!(t, "{switches}");
    let mut hosts = Table::new([
        "Host",
        "Namespace",
        "Address",
        "Gateway",
        "MAC",
        "Leaf port",
    ])
    .left_all();
    for h in &plan.hosts {
        hosts.row([
            h.name.clone(),
            h.namespace.clone(),
            format!("{}/{}", h.address, h.prefix_len),
            h.gateway.to_string(),
            mac_text(h.mac),
            format!("{} {}", h.leaf, h.leaf_port),
        ]);
    }
    let _ = writeln!(t, "{hosts}");
    let first = plan.hosts.first();
    let last = plan.hosts.last();
    let leaf = plan.leaves().next().map_or("", |s| s.namespace.as_str());
    let dir = fabric_dir(p);
    let _ = writeln!(
        t,
        "Files: {} (plan, switch configurations, logs and pid files, {SCRAPE_FILE}); FRR in {FRR_ETC}/{p}-*",
        dir.display()
    );
    let _ = writeln!(t, "\nTry:");
    if let (Some(a), Some(b)) = (first, last) {
        let _ = writeln!(
            t,
            "  ip netns exec {} ping -c 3 {}            # {} -> {} across the spines",
            a.namespace, b.address, a.name, b.name
        );
    }
    let _ = writeln!(t, "  vtysh -N {leaf} -c 'show bgp summary'");
    if let Some(b) = last {
        let net = format!("{}/{}", b.gateway, b.prefix_len);
        let _ = writeln!(
            t,
            "  ip -n {leaf} route show {net}                # the ECMP route FRR installs"
        );
        if let Some(l) = plan.leaves().next() {
            let _ = writeln!(
                t,
                "  headroom show --fabric {p} --switch {} ip route   # the same route in headroom",
                l.name
            );
        }
    }
    let _ = writeln!(t, "  headroom show fabric --fabric {p}");
    let _ = writeln!(
        t,
        "  prometheus --config.file={}   # scrapes every switch",
        dir.join(SCRAPE_FILE).display()
    );
    let _ = writeln!(
        t,
        "  headroom lab fabric down --prefix {p}   # removes a fabric started with --detach"
    );
    t
}

/// The fabric as a crossbar: spines as columns, leaves as rows, `o` where a link is.
fn drawing(plan: &Plan) -> String {
    let spines: Vec<&plan::Switch> = plan.spines().collect();
    let leaves: Vec<&plan::Switch> = plan.leaves().collect();
    let label = |s: &plan::Switch| format!("{} AS{}", s.name, s.asn);
    let left = leaves.iter().map(|l| label(l).len()).max().unwrap_or(0) + 2;
    let col = spines.iter().map(|s| label(s).len()).max().unwrap_or(0) + 3;
    let mut t = String::new();
    let mut head = " ".repeat(left);
    let mut bars = " ".repeat(left);
    for s in &spines {
        head.push_str(&format!("{:^col$}", label(s)));
        bars.push_str(&format!("{:^col$}", "|"));
    }
    let _ = writeln!(t, "{}", head.trim_end());
    let _ = writeln!(t, "{}", bars.trim_end());
    for (n, l) in leaves.iter().enumerate() {
        let mut row = format!("{:<left$}", label(l));
        for _ in &spines {
            let half = col / 2;
            row.push_str(&"-".repeat(half));
            row.push('o');
            row.push_str(&"-".repeat(col - half - 1));
        }
        let hosts: Vec<String> = plan
            .hosts_of(&l.name)
            .map(|h| format!("{} {}", h.name, h.address))
            .collect();
        let _ = writeln!(t, "{row}  {}", hosts.join(", "));
        if n + 1 < leaves.len() {
            let _ = writeln!(t, "{}", bars.trim_end());
        }
    }
    let _ = writeln!(
        t,
        "{:left$}(o: leaf port Ethernet<j-1> to spine j's Ethernet<i-1>, a /31 with eBGP{})",
        "",
        if (1..=plan.spec.leaves).any(|i| plan.spec.links(i) > 1) {
            let counts: Vec<String> = (1..=plan.spec.leaves)
                .map(|i| plan.spec.links(i).to_string())
                .collect();
            format!(
                "; links per crossing by leaf: {}, link n on leaf port (n-1)*{}+j-1",
                counts.join(","),
                plan.spec.spines
            )
        } else {
            String::new()
        }
    );
    t
}

fn down(args: &DownArgs) -> Result<ExitCode, LabError> {
    super::config::check_prefix(&args.prefix).map_err(LabError::Refused)?;
    check_privileges()?;
    let prefix = &args.prefix;
    let namespaces = existing_namespaces(prefix);
    // FRR instances: those of existing namespaces and any directory left without one.
    let mut instances: BTreeSet<String> = namespaces
        .iter()
        .filter(|n| plan::is_fabric_switch_namespace(prefix, n))
        .cloned()
        .collect();
    for root in [FRR_ETC, FRR_RUN] {
        if let Ok(dir) = std::fs::read_dir(root) {
            for entry in dir.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if plan::is_fabric_switch_namespace(prefix, &name) {
                    instances.insert(name);
                }
            }
        }
    }
    // The dataplanes first (their pid files are in the fabric's directory), then FRR; each stop
    // waits for its processes to exit: all at once.
    let switches: Vec<String> = std::fs::read_dir(fabric_dir(prefix))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            name.strip_suffix(".pid").map(str::to_owned)
        })
        .collect();
    let mut switches = switches;
    switches.sort();
    std::thread::scope(|scope| {
        for switch in &switches {
            scope.spawn(|| stop_switch(prefix, switch));
        }
        for instance in &instances {
            scope.spawn(|| stop_frr(instance));
        }
    });
    for name in &namespaces {
        ip(&["netns", "del", name], None)?;
    }
    for instance in &instances {
        remove_frr_dirs(instance)?;
    }
    let dir = fabric_dir(prefix);
    let had_dir = dir.exists();
    if had_dir {
        std::fs::remove_dir_all(&dir)
            .map_err(|e| LabError::Failed(format!("removing {}: {e}", dir.display())))?;
    }
    if namespaces.is_empty() && instances.is_empty() && !had_dir {
        println!("no fabric {prefix:?} to remove");
    } else {
        println!(
            "removed fabric {prefix:?}: headroom of {}; namespaces {}; FRR instances {}; {}",
            if switches.is_empty() {
                "none".to_owned()
            } else {
                switches.join(" ")
            },
            namespaces.join(" "),
            instances.iter().cloned().collect::<Vec<_>>().join(" "),
            dir.display()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The plan of the fabric `prefix` as `up` wrote it.
///
/// # Errors
/// When no such fabric was built (or its plan does not read).
pub(crate) fn read_plan(prefix: &str) -> Result<Plan, String> {
    let path = fabric_dir(prefix).join(PLAN_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!(
            "no fabric {prefix:?} here ({}: {e}); build it with `headroom lab fabric --prefix {prefix}`",
            path.display()
        )
    })?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The prefixes of the fabrics built on this machine (those with a plan).
#[must_use]
pub(crate) fn fabric_prefixes() -> Vec<String> {
    let mut prefixes: Vec<String> = std::fs::read_dir(super::config::RUN_DIR)
        .map(|dir| {
            dir.filter_map(|e| {
                let e = e.ok()?;
                let name = e.file_name().into_string().ok()?;
                let prefix = name.strip_suffix("-fabric")?.to_owned();
                e.path().join(PLAN_FILE).exists().then_some(prefix)
            })
            .collect()
        })
        .unwrap_or_default();
    prefixes.sort();
    prefixes
}

/// The control socket of a fabric switch.
#[must_use]
pub(crate) fn switch_socket(prefix: &str, name: &str) -> PathBuf {
    switch_config::control_socket(prefix, name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drawing_has_a_link_at_every_crossing_and_the_hosts() {
        let plan = FabricSpec::new("fab", 2, 2, 2).plan();
        let d = drawing(&plan);
        let lines: Vec<&str> = d.lines().collect();
        assert!(lines[0].contains("spine1 AS65100") && lines[0].contains("spine2 AS65100"));
        let leaf_rows: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|l| l.starts_with("leaf"))
            .collect();
        let crossbar = |row: &str| row.split("  host").next().unwrap_or("").to_owned();
        assert_eq!(leaf_rows.len(), 2, "{d}");
        assert_eq!(crossbar(leaf_rows[0]).matches('o').count(), 2, "{d}");
        assert!(
            leaf_rows[1].contains("host3 10.2.2.1, host4 10.2.2.3"),
            "{d}"
        );
        // The 'o's sit under the spines' bars.
        let bar_columns: Vec<usize> = lines[1].match_indices('|').map(|(i, _)| i).collect();
        let o_columns: Vec<usize> = crossbar(leaf_rows[0])
            .match_indices('o')
            .map(|(i, _)| i)
            .collect();
        assert_eq!(bar_columns, o_columns, "{d}");
    }

    #[test]
    fn the_scrape_configuration_lists_every_switch() {
        let plan = FabricSpec::new("fab", 2, 4, 2).plan();
        let text = scrape_config(&plan);
        let json: String = text.lines().filter(|l| !l.starts_with('#')).collect();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let targets = v["scrape_configs"][0]["static_configs"].as_array().unwrap();
        assert_eq!(targets.len(), 6);
        assert_eq!(targets[5]["targets"][0], "127.0.0.1:9605");
        assert_eq!(targets[5]["labels"]["switch"], "leaf4");
        assert_eq!(targets[0]["labels"]["role"], "spine");
    }
}
