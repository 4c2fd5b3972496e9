//! `headroom lab`: a virtual lab on this machine — host namespaces wired by veth pairs to a
//! switch namespace — and the switch running on it in the foreground.
//!
//! Names, addresses and the generated configuration are in [`config`] (shared with the
//! end-to-end tests). Everything is made with iproute2 (`ip`), idempotently: `up` creates what is
//! missing and resets addresses, neighbours and offloads on what exists, without disturbing a
//! switch that already runs on it; `down` deletes the lab's namespaces (which deletes the veth
//! pairs in them) and the generated configuration.
//!
//! The switch's ends live in their own namespace (`P-sw`) so that the root namespace stays
//! clean; `headroom lab` moves its main thread there (setns) before opening the ports, so the
//! lcore threads, the packet sockets and anything the switch listens on are in that namespace.

mod config;
pub(crate) mod fabric;
mod host_dcbx;
mod incast;
pub(crate) mod monitor;

use crate::check::EXIT_BAD_INPUT;
use crate::logging;
use clap::{Args, Subcommand};
pub(crate) use config::RUN_DIR;
use config::{
    host_ipv4, host_mac, host_namespace, is_lab_namespace, mac_text, port_name, switch_device,
    switch_namespace, LabSpec, DEFAULT_HOSTS, DEFAULT_PREFIX, DEFAULT_SPEED, HOST_DEVICE,
    HOST_PREFIX_LEN,
};
use headroom_afpacket::lab::NetnsGuard;
use std::fmt;
use std::io::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

/// Exit code when building the lab failed after the checks passed.
const EXIT_FAILED: u8 = 1;
/// Where `ip netns` keeps named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// `headroom lab [up] [OPTIONS]` / `headroom lab down`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub(crate) struct LabArgs {
    #[command(subcommand)]
    action: Option<LabAction>,
    #[command(flatten)]
    up: UpArgs,
}

#[derive(Debug, Subcommand)]
enum LabAction {
    /// Build (or repair) the lab and run the switch on it; the same as `headroom lab`.
    Up(UpArgs),
    /// Remove the lab: its namespaces, veth pairs and generated configuration.
    Down(DownArgs),
    /// Run an incast experiment on the lab: N rocegen senders write RoCEv2 to one receiver
    /// through the switch (PFC on, ECN on or off, DCQCN), then one report: goodput and
    /// fairness, PFC sent and honoured, ECN marks, CNPs, retransmissions, lossless drops, the
    /// bottleneck queue's depth. Builds the lab if needed and leaves it as it found it.
    Incast(incast::IncastArgs),
    /// Build a leaf-spine fabric: a namespace per switch and per host, veth links, a /31 per
    /// link (host links too), a `headroom run` per switch as its dataplane (every port routed,
    /// from one configuration template), FRR with eBGP in every switch (a private ASN per leaf,
    /// one for the spines, ECMP), a Prometheus scrape configuration; waits until every BGP
    /// session is up and every host reaches every other, then prints the topology. The switches
    /// keep running after it returns; running it again repairs the fabric; `down` removes it.
    Fabric(fabric::FabricArgs),
}

#[derive(Clone, Debug, Args)]
struct UpArgs {
    /// Number of hosts (and switch ports), 2..=64.
    #[arg(long, default_value_t = DEFAULT_HOSTS)]
    hosts: usize,
    /// Port speed the switch shapes every port to: Mb/s (`1000`) or `100M`, `1G`, `2.5G`...
    /// Low enough that software traffic congests it.
    #[arg(long, default_value = DEFAULT_SPEED)]
    speed: String,
    /// Prefix of the lab's namespace names (`P-sw`, `P-h0`..); several labs can coexist.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// Build the network only; do not start the switch.
    #[arg(long)]
    no_switch: bool,
    /// The generated configuration runs no LLDP/DCBX agent (`[lldp] enabled = false`): the
    /// switch sends no LLDPDUs to the hosts. (With `--config`, that file's `[lldp]` applies.)
    #[arg(long)]
    no_lldp: bool,
    /// The DCBX agent the hosts run: `lldpad` (willing, LLDP rx/tx on eth0) or `none`.
    /// Default: lldpad when the switch runs LLDP (none with --no-lldp, or when lldpad is not
    /// installed). Running the lab again keeps, starts or stops them to match.
    #[arg(long, value_enum, value_name = "AGENT")]
    host_dcbx: Option<host_dcbx::HostDcbx>,
    /// Write the generated configuration to this file (default: /run/headroom/P-lab.toml).
    #[arg(long, value_name = "PATH", conflicts_with = "config")]
    write_config: Option<PathBuf>,
    /// Run the switch with this configuration instead of the generated one (its devices must be
    /// the lab's sw-p0, sw-p1, ...).
    #[arg(short, long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Log format of the switch; overrides `switch.log_format`.
    #[arg(long, value_enum)]
    log_format: Option<logging::Format>,
    /// How the switch reaches its ports: AF_PACKET sockets, or DPDK vdevs on the same veths
    /// (`dpdk`: net_af_packet, `dpdk-af-xdp`: net_af_xdp; needs a build with `--features dpdk`).
    #[arg(long, value_enum, default_value_t)]
    driver: config::LabDriver,
    /// Port of the switch's Prometheus exporter on 127.0.0.1 of the namespace `headroom lab`
    /// runs in. Default: the first free port from 9464 (or from `--config`'s
    /// `runtime.prometheus_listen`), so that labs side by side each get their own.
    #[arg(long, value_name = "PORT")]
    metrics_port: Option<u16>,
    /// Also run a Prometheus (Debian `prometheus`) scraping the lab's switch every second:
    /// 127.0.0.1 only (first free port from 9090), storage in /run/headroom/P-prometheus. It
    /// stops with the switch.
    #[arg(long)]
    monitor: bool,
}

#[derive(Clone, Debug, Args)]
struct DownArgs {
    /// Prefix of the lab to remove.
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
}

pub(crate) fn lab(args: LabArgs) -> ExitCode {
    match args.action {
        None => up(&args.up),
        Some(LabAction::Up(up_args)) => up(&up_args),
        Some(LabAction::Down(down_args)) => down(&down_args),
        Some(LabAction::Incast(incast_args)) => incast::incast(&incast_args),
        Some(LabAction::Fabric(fabric_args)) => fabric::fabric(fabric_args),
    }
}

/// A failure, with the exit code it maps to.
#[derive(Debug)]
enum LabError {
    /// A precondition is not met (not root, no namespaces, no `ip`, bad arguments): exit 2.
    Refused(String),
    /// Something failed while building or removing: exit 1.
    Failed(String),
}

impl LabError {
    fn exit(&self) -> ExitCode {
        eprintln!("headroom lab: {self}");
        ExitCode::from(match self {
            Self::Refused(_) => EXIT_BAD_INPUT,
            Self::Failed(_) => EXIT_FAILED,
        })
    }
}

impl fmt::Display for LabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Refused(m) | Self::Failed(m) => f.write_str(m),
        }
    }
}

fn up(args: &UpArgs) -> ExitCode {
    match up_inner(args) {
        Ok(code) => code,
        Err(e) => e.exit(),
    }
}

fn up_inner(args: &UpArgs) -> Result<ExitCode, LabError> {
    let mut spec = LabSpec::new(&args.prefix, args.hosts, &args.speed);
    spec.driver = args.driver;
    spec.lldp = !args.no_lldp;
    spec.check().map_err(LabError::Refused)?;
    // A user configuration is read first: its exporter address is where the lab's search for
    // a free port starts.
    let user_config = match &args.config {
        Some(path) => Some(
            headroom_config::load(path)
                .map_err(|e| LabError::Refused(format!("{}:\n{e}", path.display())))?,
        ),
        None => None,
    };
    // The exporter listens in the namespace `headroom lab` runs in (the switch namespace's
    // loopback is for nobody): opened here, before this thread enters the switch namespace.
    let exporter = if args.no_switch {
        None
    } else {
        let listen = match &user_config {
            Some((config, _)) => config.runtime.prometheus_listen,
            None => Some(SocketAddr::from((
                [127, 0, 0, 1],
                config::DEFAULT_METRICS_PORT,
            ))),
        };
        match (args.metrics_port, listen) {
            (Some(port), listen) => {
                let ip = listen.map_or(IpAddr::from([127, 0, 0, 1]), |a| a.ip());
                let addr = SocketAddr::new(ip, port);
                Some(crate::metrics::Exporter::bind(addr).map_err(|e| {
                    LabError::Refused(format!(
                        "--metrics-port {port}: cannot listen on {addr}: {e}"
                    ))
                })?)
            }
            (None, Some(addr)) => Some(
                crate::metrics::Exporter::bind_first_free(addr, 100).map_err(LabError::Failed)?,
            ),
            (None, None) => None,
        }
    };
    let metrics_addr = exporter
        .as_ref()
        .and_then(crate::metrics::Exporter::local_addr);
    if let Some(addr) = metrics_addr {
        spec.metrics_port = addr.port();
    }
    if args.monitor && metrics_addr.is_none() {
        return Err(LabError::Refused(
            "--monitor needs the switch's Prometheus exporter (the configuration disables it, \
             or --no-switch was given)"
                .into(),
        ));
    }
    if args.monitor && find_on_path("prometheus").is_none() {
        return Err(LabError::Refused(
            "--monitor: prometheus: not found — apt install prometheus".into(),
        ));
    }
    // The configuration first: a bad --speed or --config is refused before anything is built.
    let generated = spec.config_toml();
    let (config, config_path) = match (&args.config, user_config) {
        (Some(path), Some((config, warnings))) => {
            print_warnings(&warnings);
            check_devices(&spec, &config)?;
            (config, path.clone())
        }
        _ => {
            let path = args
                .write_config
                .clone()
                .unwrap_or_else(|| PathBuf::from(spec.default_config_path()));
            let (config, warnings) =
                headroom_config::parse(&generated, &path.display().to_string()).map_err(
                    |e| match e.errors.iter().find(|d| d.key == "port_defaults.speed") {
                        Some(d) => {
                            LabError::Refused(format!("--speed {}: {}", args.speed, d.message))
                        }
                        None => LabError::Refused(format!(
                            "the generated configuration is refused:\n{e}"
                        )),
                    },
                )?;
            print_warnings(&warnings);
            (config, path)
        }
    };
    check_privileges()?;
    let switch_ns = spec.switch_namespace();
    if !args.no_switch {
        if let Some(pids) = namespace_pids(&switch_ns)?.filter(|p| !p.is_empty()) {
            return Err(LabError::Refused(format!(
                "a switch already runs in namespace {switch_ns} (pid {}); stop it first \
                 (the lab itself is up)",
                pids.join(", ")
            )));
        }
    }
    let host_dcbx = match args.host_dcbx {
        Some(host_dcbx::HostDcbx::Lldpad) => {
            for tool in ["lldpad", "lldptool", "unshare", "setsid"] {
                if find_on_path(tool).is_none() {
                    return Err(LabError::Refused(format!(
                        "--host-dcbx lldpad: {tool}: not found — apt install {}",
                        if tool.starts_with("lldp") {
                            "lldpad"
                        } else {
                            "util-linux"
                        }
                    )));
                }
            }
            host_dcbx::HostDcbx::Lldpad
        }
        Some(host_dcbx::HostDcbx::None) => host_dcbx::HostDcbx::None,
        None if config.lldp.enabled => {
            if find_on_path("lldpad").is_some() && find_on_path("lldptool").is_some() {
                host_dcbx::HostDcbx::Lldpad
            } else {
                println!(
                    "note: lldpad: not found — apt install lldpad (the hosts run no DCBX agent)"
                );
                host_dcbx::HostDcbx::None
            }
        }
        None => host_dcbx::HostDcbx::None,
    };
    build(&spec)?;
    let hosts: Vec<String> = (0..spec.hosts).map(|i| spec.host_namespace(i)).collect();
    host_dcbx::ensure(&hosts, host_dcbx)?;
    if args.config.is_none() {
        write_config(&config_path, &generated)?;
    }
    monitor::stop_stale_monitor(&spec.prefix);
    // Prometheus is spawned here, in the namespace `headroom lab` runs in, like the exporter.
    let monitor = match (args.monitor, metrics_addr) {
        (true, Some(addr)) => Some(
            monitor::Monitor::start(&spec.prefix, &[(config.switch.name.clone(), addr)])
                .map_err(|e| LabError::Failed(format!("--monitor: {e}")))?,
        ),
        _ => None,
    };
    print_usage(
        &spec,
        &config,
        &config_path,
        args.no_switch,
        metrics_addr,
        monitor.as_ref(),
        host_dcbx,
    );
    print_missing_tools();
    if args.no_switch {
        return Ok(ExitCode::SUCCESS);
    }
    let state = monitor::LabState {
        prefix: spec.prefix.clone(),
        pid: std::process::id(),
        config: config_path.display().to_string(),
        control_socket: config.runtime.control_socket.display().to_string(),
        metrics: metrics_addr.map(|a| a.to_string()),
        prometheus: monitor.as_ref().map(|m| m.addr.to_string()),
        prometheus_pid: monitor.as_ref().map(monitor::Monitor::pid),
    };
    if let Err(e) = monitor::write_state(&state) {
        eprintln!(
            "warning: cannot write {}: {e} (`--lab {}` will not find this switch)",
            monitor::state_path(&spec.prefix).display(),
            spec.prefix
        );
    }
    // Run the switch from inside its namespace: the packet sockets, the offload ioctls and the
    // lcore threads (which inherit the namespace of the thread that spawns them) are all there.
    let guard = NetnsGuard::enter(&switch_ns)
        .map_err(|e| LabError::Failed(format!("cannot enter namespace {switch_ns}: {e}")))?;
    let code = crate::run::run_with(&config_path, args.log_format, exporter);
    drop(guard);
    drop(monitor);
    monitor::remove_state(&spec.prefix);
    println!(
        "\nThe lab stays up: `headroom lab --prefix {p}` starts the switch again, \
         `headroom lab down --prefix {p}` removes the lab.",
        p = spec.prefix
    );
    Ok(code)
}

fn print_warnings(warnings: &[headroom_config::Warning]) {
    for w in warnings {
        eprintln!("warning: {w}");
    }
}

/// A user configuration must name only devices of this lab.
fn check_devices(spec: &LabSpec, config: &headroom_config::Config) -> Result<(), LabError> {
    if config.switch.driver == headroom_config::Driver::Dpdk {
        // DPDK ports are vdevs (net_af_packet0, ...) whose interfaces are in `[dpdk] eal_args`.
        return Ok(());
    }
    let devices: Vec<String> = (0..spec.hosts).map(switch_device).collect();
    for port in &config.ports {
        if !devices.contains(&port.device) {
            return Err(LabError::Refused(format!(
                "port {} uses device {:?}, which is not in the lab (its devices are sw-p0..sw-p{}; \
                 use --hosts for more)",
                port.name,
                port.device,
                spec.hosts - 1
            )));
        }
    }
    Ok(())
}

/// Root, `ip` and network namespaces are needed; say clearly which is missing.
fn check_privileges() -> Result<(), LabError> {
    if effective_uid() != Some(0) {
        return Err(LabError::Refused(
            "the lab needs root (network namespaces, veth pairs and packet sockets need \
             CAP_SYS_ADMIN, CAP_NET_ADMIN and CAP_NET_RAW); run it with sudo"
                .into(),
        ));
    }
    if !Path::new("/proc/self/ns/net").exists() {
        return Err(LabError::Refused(
            "network namespaces are unavailable (no /proc/self/ns/net: kernel without \
             CONFIG_NET_NS?)"
                .into(),
        ));
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(LabError::Refused(format!(
            "`ip -V` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ))),
        Err(e) => Err(LabError::Refused(format!(
            "cannot run `ip` (install iproute2): {e}"
        ))),
    }
}

/// The effective user id, from /proc (no unsafe `geteuid` in this crate).
fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// Runs `ip ARGS`, with `stdin` fed to it if given.
fn ip(args: &[&str], stdin: Option<&str>) -> Result<String, LabError> {
    let mut command = Command::new("ip");
    command
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|e| LabError::Refused(format!("cannot run `ip` (install iproute2): {e}")))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes())
            .map_err(|e| LabError::Failed(format!("writing to `ip -batch`: {e}")))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| LabError::Failed(format!("`ip {}`: {e}", args.join(" "))))?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(LabError::Failed(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

/// The lab's existing namespaces (names in /run/netns), hosts first, then the switch.
fn lab_namespaces(prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_DIR)
        .map(|dir| {
            dir.filter_map(|e| e.ok()?.file_name().into_string().ok())
                .filter(|n| is_lab_namespace(prefix, n))
                .collect()
        })
        .unwrap_or_default();
    let switch = switch_namespace(prefix);
    names.sort_by_key(|n| (*n == switch, n.len(), n.clone()));
    names
}

fn namespace_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// Processes in a namespace (`None` when it does not exist).
fn namespace_pids(name: &str) -> Result<Option<Vec<String>>, LabError> {
    if !namespace_exists(name) {
        return Ok(None);
    }
    let out = ip(&["netns", "pids", name], None)?;
    Ok(Some(out.split_whitespace().map(str::to_owned).collect()))
}

fn ensure_namespace(name: &str) -> Result<(), LabError> {
    if namespace_exists(name) {
        return Ok(());
    }
    ip(&["netns", "add", name], None).map(drop).map_err(|e| {
        LabError::Refused(format!(
            "network namespaces are unavailable, cannot create {name}: {e}"
        ))
    })
}

fn link_exists(namespace: &str, device: &str) -> bool {
    ip(&["-n", namespace, "link", "show", "dev", device], None).is_ok()
}

/// Runs `f` on a thread moved into `namespace` (the caller's thread never changes namespace).
fn in_namespace<T: Send>(
    namespace: &str,
    f: impl FnOnce() -> std::io::Result<T> + Send,
) -> Result<T, LabError> {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _inside = NetnsGuard::enter(namespace)?;
                f()
            })
            .join()
            .unwrap_or_else(|_| Err(std::io::Error::other("thread panicked")))
    })
    .map_err(|e| LabError::Failed(format!("in namespace {namespace}: {e}")))
}

/// Writes a sysctl of `namespace` through /proc/sys (a thread in the namespace sees its values).
fn sysctl(namespace: &str, key: &str, value: &str) -> Result<(), LabError> {
    let path = format!("/proc/sys/{}", key.replace('.', "/"));
    in_namespace(namespace, || std::fs::write(&path, value))
        .map_err(|e| LabError::Failed(format!("sysctl {key}={value}: {e}")))
}

/// Turns off the offloads that would show the switch super-frames or unfinished checksums.
fn offloads_off(namespace: &str, device: &str) -> Result<(), LabError> {
    let report = in_namespace(namespace, || {
        headroom_afpacket::offload::disable_offloads(device).map_err(std::io::Error::other)
    })?;
    if !report.all_disabled() {
        eprintln!(
            "warning: {device} in {namespace}: offloads still on: {} (the switch may see \
             super-frames)",
            report.still_on.join(", ")
        );
    }
    Ok(())
}

/// Creates what is missing and resets what exists.
fn build(spec: &LabSpec) -> Result<(), LabError> {
    let switch_ns = spec.switch_namespace();
    ensure_namespace(&switch_ns)?;
    // Loopback up, so that a switch run by hand in the namespace (`ip netns exec P-sw headroom
    // run`) serves its metrics and anything else on 127.0.0.1 there.
    ip(&["-n", &switch_ns, "link", "set", "lo", "up"], None)?;
    // No IPv6 anywhere: no router solicitations, MLD reports or DAD probes in the captures.
    for key in [
        "net.ipv6.conf.all.disable_ipv6",
        "net.ipv6.conf.default.disable_ipv6",
    ] {
        sysctl(&switch_ns, key, "1")?;
    }
    // Hosts of an earlier, larger lab with the same prefix.
    for name in lab_namespaces(&spec.prefix) {
        let extra = name
            .strip_prefix(&format!("{}-h", spec.prefix))
            .and_then(|n| n.parse::<usize>().ok())
            .is_some_and(|n| n >= spec.hosts);
        if extra {
            host_dcbx::stop(&name)?;
            host_dcbx::remove_files(&name)?;
            ip(&["netns", "del", &name], None)?;
        }
    }
    for i in 0..spec.hosts {
        let host_ns = spec.host_namespace(i);
        let sw_dev = switch_device(i);
        ensure_namespace(&host_ns)?;
        for key in [
            "net.ipv6.conf.all.disable_ipv6",
            "net.ipv6.conf.default.disable_ipv6",
        ] {
            sysctl(&host_ns, key, "1")?;
        }
        // ECN-capable TCP in the hosts (RFC 3168), so that marks at the switch slow senders,
        // with a congestion control that reacts to them (BBR, which some systems default to,
        // ignores ECN): CUBIC, or Reno where CUBIC is not in the system's
        // net.ipv4.tcp_allowed_congestion_control (outside the root namespace only those may be
        // chosen).
        sysctl(&host_ns, "net.ipv4.tcp_ecn", "1")?;
        if sysctl(&host_ns, "net.ipv4.tcp_congestion_control", "cubic").is_err() {
            sysctl(&host_ns, "net.ipv4.tcp_congestion_control", "reno")?;
        }
        let have_switch_end = link_exists(&switch_ns, &sw_dev);
        let have_host_end = link_exists(&host_ns, HOST_DEVICE);
        if !(have_switch_end && have_host_end) {
            if have_switch_end {
                ip(&["-n", &switch_ns, "link", "del", &sw_dev], None)?;
            }
            if have_host_end {
                ip(&["-n", &host_ns, "link", "del", HOST_DEVICE], None)?;
            }
            ip(
                &[
                    "-n",
                    &switch_ns,
                    "link",
                    "add",
                    &sw_dev,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    HOST_DEVICE,
                    "netns",
                    &host_ns,
                ],
                None,
            )?;
        }
        let mut host = String::new();
        host.push_str("link set lo up\n");
        host.push_str(&format!(
            "link set {HOST_DEVICE} address {}\n",
            mac_text(host_mac(i))
        ));
        host.push_str(&format!(
            "addr replace {}/{HOST_PREFIX_LEN} dev {HOST_DEVICE}\n",
            host_ipv4(i)
        ));
        host.push_str(&format!("link set {HOST_DEVICE} up\n"));
        // Permanent neighbours: no ARP needed (ARP still works, by flooding, for other entries).
        for j in (0..spec.hosts).filter(|&j| j != i) {
            host.push_str(&format!(
                "neigh replace {} lladdr {} dev {HOST_DEVICE} nud permanent\n",
                host_ipv4(j),
                mac_text(host_mac(j))
            ));
        }
        ip(&["-n", &host_ns, "-batch", "-"], Some(&host))?;
        ip(&["-n", &switch_ns, "link", "set", &sw_dev, "up"], None)?;
        offloads_off(&host_ns, HOST_DEVICE)?;
        offloads_off(&switch_ns, &sw_dev)?;
    }
    Ok(())
}

fn write_config(path: &Path, text: &str) -> Result<(), LabError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| LabError::Failed(format!("creating {}: {e}", dir.display())))?;
    }
    // Atomically: a switch reloading it (SIGHUP) never reads half a file.
    headroom_runtime::atomic_file::write_atomically(path, text.as_bytes())
        .map_err(|e| LabError::Failed(format!("writing {}: {e}", path.display())))
}

/// The tools the printed commands use, and the Debian package of each.
const SUGGESTED_TOOLS: [(&str, &str); 5] = [
    ("ping", "iputils-ping"),
    ("iperf3", "iperf3"),
    ("tcpdump", "tcpdump"),
    ("nstat", "iproute2"),
    ("tshark", "tshark"),
];

/// `program`'s path if it is on the PATH.
fn find_on_path(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|path| {
        std::env::split_paths(&path)
            .map(|dir| dir.join(program))
            .find(|p| p.is_file())
    })
}

/// The suggested tools that are not on the PATH, with their packages.
fn missing_tools() -> Vec<(&'static str, &'static str)> {
    SUGGESTED_TOOLS
        .iter()
        .copied()
        .filter(|(tool, _)| find_on_path(tool).is_none())
        .collect()
}

/// Names each suggested tool that is missing with its package; the lab runs without them.
fn print_missing_tools() {
    let missing = missing_tools();
    for (tool, package) in &missing {
        println!("note: {tool}: not found — apt install {package}");
    }
    if !missing.is_empty() {
        println!(
            "      (the commands above use them; the lab runs without them; scripts/lab.sh \
             installs them all)"
        );
    }
}

fn print_usage(
    spec: &LabSpec,
    config: &headroom_config::Config,
    path: &Path,
    no_switch: bool,
    metrics: Option<SocketAddr>,
    monitor: Option<&monitor::Monitor>,
    host_dcbx: host_dcbx::HostDcbx,
) {
    let p = &spec.prefix;
    let speed_mbps = config.ports.first().map_or(0, |port| port.speed_mbps);
    let sw = spec.switch_namespace();
    println!(
        "headroom lab {p:?}: {} hosts on a {speed_mbps} Mb/s switch (namespace {sw}); PFC on \
         priorities 3 and 4 (DSCP 3 and 4), ECN on queues 3 and 4",
        spec.hosts
    );
    println!();
    println!(
        "  {:<6} {:<12} {:<6} {:<14} {:<18} switch port",
        "host", "namespace", "dev", "address", "MAC"
    );
    for i in 0..spec.hosts {
        println!(
            "  {:<6} {:<12} {:<6} {:<14} {:<18} {} ({} in {sw})",
            format!("h{i}"),
            host_namespace(p, i),
            HOST_DEVICE,
            format!("{}/{HOST_PREFIX_LEN}", host_ipv4(i)),
            mac_text(host_mac(i)),
            port_name(i),
            switch_device(i),
        );
    }
    println!();
    println!("Configuration: {}", path.display());
    let (h0, h1, h2) = (
        host_namespace(p, 0),
        host_namespace(p, 1),
        host_namespace(p, 2),
    );
    let (ip1, ip2) = (host_ipv4(1), host_ipv4(2));
    // Each of two senders at 80 % of the port: together 160 %, which congests the third port.
    let rate = speed_mbps * 8 / 10;
    println!(
        "\nTry, in another terminal:
  ip netns exec {h0} ping -c 3 {ip1}
  ip netns exec {h1} iperf3 -s -D; ip netns exec {h0} iperf3 -c {ip1} --tos 0x0c   # TCP on lossless priority 3
  ip netns exec {h0} nstat -az TcpExtTCPDeliveredCE                # segments the receiver echoed as CE-marked"
    );
    if config.lldp.enabled {
        println!(
            "  headroom show lldp neighbors; headroom show dcbx                # what the hosts' LLDP agents (lldpad, lldpd) tell the switch"
        );
    }
    if host_dcbx == host_dcbx::HostDcbx::Lldpad {
        println!(
            "  ip netns exec {h0} lldptool -t -n -i {HOST_DEVICE} -V PFC              # h0's lldpad: the switch's PFC, as its peer's
  ip netns exec {h0} lldptool -t -n -i {HOST_DEVICE} -V APP              # ... and its APP table (RoCEv2, UDP 4791)
  ip netns exec {h0} lldptool -t -i {HOST_DEVICE} -V PFC -c enabled      # what h0 itself runs (a veth: none)"
        );
    }
    if spec.hosts >= 3 {
        println!(
            "  # congest {port2}: two senders of DSCP 3 at {rate} Mb/s each; the switch sends them PFC.
  # Linux hosts do not honour PFC, so they keep sending: PG 3's headroom overflows and the excess
  # is dropped as ingress_headroom_exhausted (`headroom show ports`). For senders that pause like
  # a RoCE NIC (rocegen), stop this switch and run `headroom lab incast --prefix {p}`.
  ip netns exec {h2} iperf3 -s -D -p 5201; ip netns exec {h2} iperf3 -s -D -p 5202
  ip netns exec {h0} iperf3 -c {ip2} -p 5201 -u -b {rate}M --tos 0x0c -t 10 & ip netns exec {h1} iperf3 -c {ip2} -p 5202 -u -b {rate}M --tos 0x0c -t 10 &
  ip netns exec {h0} tcpdump -eni {HOST_DEVICE} 'ether proto 0x8808'     # PFC XOFF/XON sent to h0",
            port2 = port_name(2),
        );
    }
    if let Some(addr) = metrics {
        println!("\nPrometheus metrics of the switch: curl http://{addr}/metrics");
    }
    if let Some(m) = monitor {
        println!(
            "Prometheus (scraping every {}s): http://{}  e.g. curl 'http://{}/api/v1/query?query=headroom_pfc_tx_frames_total'\n  \
             (configuration and storage in {})",
            monitor::SCRAPE_INTERVAL_S,
            m.addr,
            m.addr,
            m.dir.display()
        );
    }
    if p != DEFAULT_PREFIX {
        println!("Drive this lab with --lab {p}: headroom show pfc counters --lab {p}");
    }
    if no_switch {
        println!(
            "\nThe switch is not running: `headroom lab --prefix {p}` starts it (or \
             `ip netns exec {sw} headroom run -c {}`). `headroom lab down --prefix {p}` \
             removes the lab.",
            path.display()
        );
    } else {
        println!(
            "\nThe switch runs below. Ctrl-C stops it and prints its counters; the lab stays \
             until `headroom lab down --prefix {p}`. SIGHUP reloads {}.\n",
            path.display()
        );
    }
    let _ = std::io::stdout().flush();
}

fn down(args: &DownArgs) -> ExitCode {
    match down_inner(args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => e.exit(),
    }
}

fn down_inner(args: &DownArgs) -> Result<(), LabError> {
    config::check_prefix(&args.prefix).map_err(LabError::Refused)?;
    check_privileges()?;
    let names = lab_namespaces(&args.prefix);
    for name in &names {
        host_dcbx::stop(name)?;
        host_dcbx::remove_files(name)?;
        if let Some(pids) = namespace_pids(name)?.filter(|p| !p.is_empty()) {
            eprintln!(
                "note: processes still run in {name} (pid {}); the namespace lives on until \
                 they exit, its links go now",
                pids.join(", ")
            );
        }
        ip(&["netns", "del", name], None)?;
    }
    monitor::stop_stale_monitor(&args.prefix);
    monitor::remove_state(&args.prefix);
    let monitor_dir = monitor::monitor_dir(&args.prefix);
    if monitor_dir.exists() {
        std::fs::remove_dir_all(&monitor_dir)
            .map_err(|e| LabError::Failed(format!("removing {}: {e}", monitor_dir.display())))?;
    }
    let spec = LabSpec::new(&args.prefix, DEFAULT_HOSTS, DEFAULT_SPEED);
    let config_path = PathBuf::from(spec.default_config_path());
    let removed_config = config_path.exists();
    if removed_config {
        std::fs::remove_file(&config_path)
            .map_err(|e| LabError::Failed(format!("removing {}: {e}", config_path.display())))?;
    }
    if names.is_empty() && !removed_config {
        println!("no lab {:?} to remove", args.prefix);
    } else {
        println!("removed lab {:?}: {}", args.prefix, names.join(" "));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::config::*;

    fn parse(spec: &LabSpec) -> headroom_config::Config {
        let (config, warnings) = headroom_config::parse(&spec.config_toml(), "generated")
            .unwrap_or_else(|e| panic!("{e}\n{}", spec.config_toml()));
        assert!(warnings.is_empty(), "{warnings:?}");
        config
    }

    #[test]
    fn generated_config_resolves_for_every_size_and_speed() {
        for hosts in [2, 4, 17, MAX_HOSTS] {
            for (speed, mbps) in [("1G", 1000), ("100M", 100), ("2.5G", 2500), ("10", 10)] {
                let spec = LabSpec::new("hr", hosts, speed);
                spec.check().unwrap();
                let config = parse(&spec);
                assert_eq!(config.switch.name, "hr-lab");
                assert_eq!(config.ports.len(), hosts);
                for (i, port) in config.ports.iter().enumerate() {
                    assert_eq!(port.name, port_name(i));
                    assert_eq!(port.device, switch_device(i));
                    assert_eq!(port.speed_mbps, mbps);
                    assert_eq!(port.mtu_bytes, MTU_BYTES);
                    assert_eq!(port.pfc_enable.0, 0b1_1000);
                }
                assert_eq!(config.runtime.lcores.len(), 1);
                assert_eq!(config.runtime.lcores[0].rx_ports.len(), hosts);
            }
        }
    }

    #[test]
    fn generated_config_has_the_shipped_lab_semantics() {
        // config/lab.toml is the reference lab (1G, 4 ports); the generated one differs only in
        // names, devices and the MTU (veths carry 1500-byte frames).
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/lab.toml");
        let (shipped, _) = headroom_config::load(path).unwrap();
        let generated = parse(&LabSpec::new("hr", 4, "1G"));
        for (a, b) in shipped.ports.iter().zip(&generated.ports) {
            assert_eq!(a.speed_mbps, b.speed_mbps);
            assert_eq!(a.pfc_enable, b.pfc_enable);
            assert_eq!(a.trust, b.trust);
            assert_eq!(a.pfc_quanta, b.pfc_quanta);
            assert_eq!(a.pfc_refresh_ns, b.pfc_refresh_ns);
            for q in 0..8 {
                let (wa, wb) = (&a.queues[q].wred, &b.queues[q].wred);
                assert_eq!(wa.is_some(), wb.is_some(), "queue {q}");
                if let (Some(wa), Some(wb)) = (wa, wb) {
                    assert_eq!(wa.green.min_threshold_bytes, wb.green.min_threshold_bytes);
                    assert_eq!(wa.green.max_threshold_bytes, wb.green.max_threshold_bytes);
                }
            }
        }
        assert_eq!(shipped.switch.mac, generated.switch.mac);
        assert_eq!(
            shipped.pfcwd.poll_interval_ms,
            generated.pfcwd.poll_interval_ms
        );
    }

    #[test]
    fn ecn_override_reaches_the_lossless_queues_only() {
        let mut spec = LabSpec::new("t1", 3, "100M");
        spec.ecn = EcnThresholds {
            min_bytes: 20_000,
            max_bytes: 60_000,
            probability_percent: 100,
        };
        let config = parse(&spec);
        for port in &config.ports {
            for (q, queue) in port.queues.iter().enumerate() {
                match &queue.wred {
                    Some(w) => {
                        assert!(q == 3 || q == 4, "queue {q}");
                        assert_eq!(w.green.min_threshold_bytes, 20_000);
                        assert_eq!(w.green.max_threshold_bytes, 60_000);
                        assert_eq!(w.green.drop_probability_percent, 100);
                    }
                    None => assert!(q != 3 && q != 4, "queue {q}"),
                }
            }
        }
    }

    #[test]
    fn ecn_off_and_dot1p_trust_reach_every_port() {
        let mut spec = LabSpec::new("t1", 3, "100M");
        spec.ecn_enabled = false;
        spec.trust = LabTrust::Dot1p;
        let config = parse(&spec);
        for port in &config.ports {
            assert_eq!(port.trust, headroom_config::Trust::Dot1p);
            assert!(
                port.queues.iter().all(|q| q.wred.is_none()),
                "{}",
                port.name
            );
            // Still lossless on 3 and 4: PFC is the backstop, now the only signal.
            assert_eq!(port.pfc_enable.0, 0b1_1000);
        }
        // The defaults keep ECN and DSCP trust.
        let config = parse(&LabSpec::new("t1", 3, "100M"));
        assert_eq!(config.ports[0].trust, headroom_config::Trust::Dscp);
        assert!(config.ports[0].queues[3].wred.is_some());
    }

    #[test]
    fn bad_arguments_are_refused_with_the_option_named() {
        assert!(LabSpec::new("hr", 1, "1G")
            .check()
            .unwrap_err()
            .contains("--hosts"));
        assert!(LabSpec::new("hr", 65, "1G")
            .check()
            .unwrap_err()
            .contains("--hosts"));
        assert!(LabSpec::new("Hr", 4, "1G")
            .check()
            .unwrap_err()
            .contains("--prefix"));
        assert!(LabSpec::new("", 4, "1G")
            .check()
            .unwrap_err()
            .contains("--prefix"));
        assert!(LabSpec::new("a/b", 4, "1G")
            .check()
            .unwrap_err()
            .contains("--prefix"));
        assert!(LabSpec::new("abcdefghijklmnopq", 4, "1G").check().is_err());
        assert!(LabSpec::new("hr", 4, "1\"G")
            .check()
            .unwrap_err()
            .contains("--speed"));
        assert!(LabSpec::new("hr", 4, "").check().is_err());
        // Syntax passes, the value is the configuration parser's to refuse.
        let spec = LabSpec::new("hr", 4, "fast");
        spec.check().unwrap();
        let errors = headroom_config::parse(&spec.config_toml(), "g").unwrap_err();
        assert!(errors.to_string().contains("speed"), "{errors}");
    }

    #[test]
    fn names() {
        assert_eq!(switch_namespace("hr"), "hr-sw");
        assert_eq!(host_namespace("hr", 3), "hr-h3");
        assert!(is_lab_namespace("hr", "hr-sw"));
        assert!(is_lab_namespace("hr", "hr-h12"));
        assert!(!is_lab_namespace("hr", "hr-h"));
        assert!(!is_lab_namespace("hr", "hr-hx"));
        assert!(!is_lab_namespace("hr", "hrx-sw"));
        assert!(!is_lab_namespace("hr", "hr-h1-sw"));
        assert_eq!(host_ipv4(0).to_string(), "10.0.0.1");
        assert_eq!(host_ipv4(63).to_string(), "10.0.0.64");
        assert_eq!(mac_text(host_mac(1)), "02:68:68:00:00:02");
    }
}
