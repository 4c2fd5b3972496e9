//! The operator commands that talk to a running switch over its control socket:
//! `show`, `clear`, `set`, `config save|rollback|list`, `capture`.

use crate::table::{thousands, Table};
use clap::{Args, Subcommand, ValueEnum};
use headroom_runtime::protocol::{
    CaptureRequest, Change, Clear, DcbxRow, DcbxSide, FdbRow, HostInterfacesView, IpNeighborRow,
    IpRouteTable, LldpView, PfcCounters, PfcPriority, PfcwdConfig, PfcwdStatsRow, PgCountersRow,
    PgDropRow, PgWatermarkKind, PoolWatermarkRow, PortSummary, PortstatRow, QueueCounters,
    QueueWatermarkKind, Request, Response, RunningConfig, Show, WatermarkRow,
};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Writes to stdout. A reader that went away (`headroom show … | head`) ends the process
/// quietly with the status a SIGPIPE death gives (128 + 13), instead of a panic.
pub(crate) fn emit(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(args) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(128 + 13);
        }
        eprintln!("error: cannot write the output: {e}");
        std::process::exit(1);
    }
}

/// `print!` through [`emit`].
macro_rules! say {
    ($($t:tt)*) => {
        emit(format_args!($($t)*))
    };
}

/// `println!` through [`emit`].
macro_rules! sayln {
    () => {
        emit(format_args!("\n"))
    };
    ($($t:tt)*) => {{
        emit(format_args!($($t)*));
        emit(format_args!("\n"));
    }};
}

/// Where the running switch listens.
#[derive(Debug, Args, Clone)]
pub(crate) struct Target {
    /// Control socket of the running switch. Default: the `runtime.control_socket` of
    /// `--config`, else the only socket in /run/headroom.
    #[arg(short, long, global = true, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Configuration file of the running switch (to find its control socket).
    #[arg(short, long, global = true, value_name = "FILE")]
    config: Option<PathBuf>,
    /// The switch of the lab started with `headroom lab --prefix PREFIX` (several labs can run
    /// side by side).
    #[arg(long, global = true, value_name = "PREFIX", conflicts_with_all = ["socket", "config"])]
    lab: Option<String>,
    /// A switch of a fabric built by `headroom lab fabric` (`spine1`, `leaf2`...): any command
    /// then talks to that switch.
    #[arg(long, global = true, value_name = "NAME", conflicts_with_all = ["socket", "config"])]
    switch: Option<String>,
    /// The fabric of `--switch` and `show fabric` (its `--prefix`). Default: the only fabric
    /// built on this machine.
    #[arg(long, global = true, value_name = "PREFIX")]
    fabric: Option<String>,
    /// Print JSON instead of tables (for scripts).
    #[arg(long, global = true)]
    json: bool,
}

impl Target {
    /// The switch listening on `socket` (what `--socket` selects): for the labs, which know
    /// their switches' sockets, so that they use this one client of the control protocol.
    pub(crate) fn for_socket(socket: PathBuf) -> Self {
        Self {
            socket: Some(socket),
            config: None,
            lab: None,
            switch: None,
            fabric: None,
            json: false,
        }
    }

    /// The fabric `--fabric` names, else the only one built here.
    pub(crate) fn fabric_prefix(&self) -> Result<String, String> {
        if let Some(prefix) = &self.fabric {
            return Ok(prefix.clone());
        }
        match crate::lab::fabric::fabric_prefixes().as_slice() {
            [one] => Ok(one.clone()),
            [] => Err(
                "no fabric is built on this machine (`headroom lab fabric`); pass --fabric \
                       PREFIX"
                    .into(),
            ),
            several => Err(format!(
                "several fabrics are built here ({}); pass --fabric PREFIX",
                several.join(", ")
            )),
        }
    }

    /// Whether `--json` was given.
    pub(crate) fn json(&self) -> bool {
        self.json
    }

    fn socket_path(&self) -> Result<PathBuf, String> {
        if let Some(s) = &self.socket {
            return Ok(s.clone());
        }
        if let Some(c) = &self.config {
            let (config, _) = headroom_config::load(c).map_err(|e| e.to_string())?;
            return Ok(config.runtime.control_socket);
        }
        if let Some(prefix) = &self.lab {
            return lab_socket(prefix);
        }
        if let Some(name) = &self.switch {
            let prefix = self.fabric_prefix()?;
            let plan = crate::lab::fabric::read_plan(&prefix)?;
            if plan.switch(name).is_none() {
                let names: Vec<&str> = plan.switches.iter().map(|s| s.name.as_str()).collect();
                return Err(format!(
                    "fabric {prefix:?} has no switch {name:?} (its switches: {})",
                    names.join(", ")
                ));
            }
            return Ok(crate::lab::fabric::switch_socket(&prefix, name));
        }
        running_switch_socket(Path::new("/run/headroom"))
    }

    pub(crate) fn connect(&self) -> Result<UnixStream, String> {
        let path = self.socket_path()?;
        UnixStream::connect(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::PermissionDenied => permission_denied(&path),
            _ => format!("cannot reach the switch at {}: {e}", path.display()),
        })
    }

    /// Sends one request, returns the response.
    pub(crate) fn request(&self, request: &Request) -> Result<Response, String> {
        let stream = self.connect()?;
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        if let Err(e) = send(&stream, request) {
            // A switch that refuses us (permission, busy) answers and closes at once; its
            // answer says why better than the broken pipe does.
            return read_response(&mut BufReader::new(&stream)).map_err(|_| e);
        }
        read_response(&mut BufReader::new(&stream))
    }

    /// The configuration file given with `--config`, if any.
    pub(crate) fn config_file(&self) -> Option<&Path> {
        self.config.as_deref()
    }

    /// Sends one request and reads its answer's data as `T` (and as JSON, for `--json`).
    pub(crate) fn fetch<T: DeserializeOwned>(
        &self,
        request: &Request,
    ) -> Result<(T, serde_json::Value), String> {
        let response = self.request(request)?;
        if !response.ok {
            return Err(response
                .error
                .unwrap_or_else(|| "the switch refused the request".into()));
        }
        let typed = serde_json::from_value(response.data.clone())
            .map_err(|e| format!("unexpected answer: {e}"))?;
        Ok((typed, response.data))
    }
}

/// The control socket of lab `prefix`'s switch: from the state file `headroom lab` writes while
/// the switch runs, else the generated configuration's socket (a switch started by hand with it).
fn lab_socket(prefix: &str) -> Result<PathBuf, String> {
    if let Some(state) = crate::lab::monitor::read_state(prefix) {
        return Ok(PathBuf::from(state.control_socket));
    }
    let generated = Path::new(crate::lab::RUN_DIR).join(format!("{prefix}-lab.sock"));
    if UnixStream::connect(&generated).is_ok() {
        return Ok(generated);
    }
    Err(format!(
        "no switch of lab {prefix:?} is running (no {} and nothing listens on {}); start it with \
         `headroom lab --prefix {prefix}`",
        crate::lab::monitor::state_path(prefix).display(),
        generated.display()
    ))
}

/// The message for a control socket we may not use (mode 0600, owned by the switch's user).
fn permission_denied(path: &Path) -> String {
    use std::os::unix::fs::MetadataExt;
    match std::fs::metadata(path) {
        Ok(m) if m.uid() == 0 => format!(
            "permission denied: run as root (the control socket {} is root's, mode {:o})",
            path.display(),
            m.mode() & 0o777
        ),
        Ok(m) => format!(
            "permission denied: the control socket {} belongs to uid {} (mode {:o})",
            path.display(),
            m.uid(),
            m.mode() & 0o777
        ),
        Err(_) => format!(
            "permission denied: run as root (cannot reach the control socket {})",
            path.display()
        ),
    }
}

/// The control socket of the only switch running with its socket in `dir`. Socket files that
/// nobody listens on (left by a switch that was killed or crashed: a clean stop removes its
/// socket) are not switches and are left out, so that one stale file neither hides the running
/// switch nor makes it look like several.
fn running_switch_socket(dir: &Path) -> Result<PathBuf, String> {
    match std::fs::read_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return Err(permission_denied(dir));
        }
        _ => {}
    }
    let sockets: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            let mut paths: Vec<PathBuf> = d
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sock"))
                .collect();
            paths.sort();
            paths
        })
        .unwrap_or_default();
    // A socket we may not connect to is a switch we may not use, not a stale file.
    if let Some(denied) = sockets.iter().find(|p| {
        UnixStream::connect(p).is_err_and(|e| e.kind() == std::io::ErrorKind::PermissionDenied)
    }) {
        return Err(permission_denied(denied));
    }
    let (live, stale): (Vec<PathBuf>, Vec<PathBuf>) = sockets
        .into_iter()
        .partition(|p| UnixStream::connect(p).is_ok());
    match live.as_slice() {
        [one] => Ok(one.clone()),
        [] if stale.is_empty() => Err(format!(
            "no running headroom found in {}; pass --socket or --config",
            dir.display()
        )),
        [] => Err(format!(
            "no running headroom found in {} (nothing listens on {}); pass --socket or --config",
            dir.display(),
            stale
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        )),
        _ => Err(format!(
            "several switches run ({}); pass --socket or --config",
            live.len()
        )),
    }
}

fn send(mut stream: &UnixStream, request: &Request) -> Result<(), String> {
    let mut line = serde_json::to_string(request).map_err(|e| e.to_string())?;
    line.push('\n');
    stream
        .write_all(line.as_bytes())
        .map_err(|e| format!("cannot send the request: {e}"))
}

fn read_response(reader: &mut impl BufRead) -> Result<Response, String> {
    let mut line = String::new();
    reader
        .read_line(&mut line)
        .map_err(|e| format!("no answer from the switch: {e}"))?;
    serde_json::from_str(&line).map_err(|e| format!("unreadable answer from the switch: {e}"))
}

/// `headroom show …`
#[derive(Debug, Subcommand)]
pub(crate) enum ShowCommand {
    /// PFC counters (SONiC `show pfc counters`): frames received and sent per priority.
    Pfc {
        #[command(subcommand)]
        what: PfcWhat,
    },
    /// Queue counters or watermarks (SONiC `show queue counters|watermark`).
    Queue {
        #[command(subcommand)]
        what: QueueWhat,
    },
    /// Priority-group watermarks and drops (SONiC `show priority-group …`).
    PriorityGroup {
        #[command(subcommand)]
        what: PgWhat,
    },
    /// Buffer pool watermarks, including the shared headroom pool.
    BufferPool {
        #[command(subcommand)]
        what: PoolWhat,
    },
    /// PFC watchdog configuration and statistics (SONiC `show pfcwd config|stats`).
    Pfcwd {
        #[command(subcommand)]
        what: PfcwdWhat,
    },
    /// ECN marks per queue.
    Ecn,
    /// Interface counters (SONiC `show interfaces counters`, portstat): RX/TX OK, rates,
    /// errors, discards, oversize frames per port, on SAI's port counters.
    Interfaces {
        #[command(subcommand)]
        what: InterfacesWhat,
    },
    /// Ports: speed, TX state, traffic, drops by reason.
    Ports,
    /// The MAC table.
    Fdb,
    /// Routing (routed ports, `vlan_mode = "routed"`): the FIB mirrored from the kernel and
    /// its neighbours.
    Ip {
        #[command(subcommand)]
        what: IpWhat,
    },
    /// The routed ports' host interfaces (TAPs): frames punted to the kernel and sent by it,
    /// and the ports' routed packets (SONiC `show interfaces counters rif`).
    HostInterfaces,
    /// LLDP (IEEE 802.1AB): the neighbours each port hears (lldpctl / SONiC `show lldp table`),
    /// with `--json` also every port's LLDP counters and the recent LLDP/DCBX events.
    Lldp {
        #[command(subcommand)]
        what: LldpWhat,
    },
    /// DCBX (IEEE 802.1Qaz) per port: the PFC, ETS and APP this port advertises against its
    /// neighbour's, and the verdict (`consistent`, `mismatch` with why, `no-dcbx`,
    /// `no-neighbour`; docs/operations.md "DCBX verdicts"). With PORT: that port in detail.
    Dcbx {
        /// One port (e.g. Ethernet0).
        port: Option<String>,
    },
    /// The running configuration with its derived values.
    Config,
    /// Everything numeric at once, as JSON (what `headroom top` reads): port, PFC, queue and
    /// watchdog counters, PG occupancy, queueing-delay histograms.
    Snapshot,
    /// Every switch of a fabric (`headroom lab fabric`) in one table, per switch and port: PFC
    /// frames received and sent, the deepest queue since start, ECN marks, drops by reason,
    /// the watchdog's state. Exits 1 when a switch does not answer.
    Fabric,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PfcWhat {
    /// Rx and Tx tables, PFC0–PFC7 per port.
    Counters,
    /// Lossless priorities per port.
    Priority,
}

#[derive(Debug, Subcommand)]
pub(crate) enum LldpWhat {
    /// One row per neighbour: local port, its system name, chassis, port ID, capabilities,
    /// TTL.
    #[command(alias = "table")]
    Neighbors,
}

#[derive(Debug, Subcommand)]
pub(crate) enum IpWhat {
    /// The routes the dataplane forwards with (SONiC/FRR `show ip route`, IPv4 and IPv6),
    /// and the netlink mirror's counters.
    Route,
    /// The kernel's ARP and ND entries on the routed ports (SONiC `show arp`, `show ndp`).
    Neighbors,
}

#[derive(Debug, Subcommand)]
pub(crate) enum InterfacesWhat {
    /// IFACE, STATE, RX_OK, RX_BPS, RX_UTIL, RX_ERR, RX_DRP, RX_OVR, TX_OK, TX_BPS, TX_UTIL,
    /// TX_ERR, TX_DRP, TX_OVR per port (since the last `clear counters`; rates are smoothed
    /// over about ten seconds, as SONiC's).
    Counters,
}

#[derive(Debug, Subcommand)]
pub(crate) enum QueueWhat {
    /// Packets, bytes and drops per queue.
    Counters,
    /// Highest shared occupancy (above the reserved size, SAI's) per queue since the last
    /// clear.
    Watermark {
        /// Since start (or the last persistent clear) instead.
        #[arg(long)]
        persistent: bool,
        /// The highest total occupancy (reserved and shared) instead.
        #[arg(long)]
        total: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PgWhat {
    /// Highest occupancy per PG since the last clear.
    Watermark {
        /// Shared or headroom.
        #[arg(value_enum)]
        kind: WatermarkKind,
        /// Since start (or the last persistent clear) instead.
        #[arg(long)]
        persistent: bool,
    },
    /// Frames dropped per PG.
    Drop,
    /// Packets and bytes per PG (dropped ones included), and drops (SAI
    /// INGRESS_PRIORITY_GROUP_STAT_PACKETS, _BYTES, _DROPPED_PACKETS).
    Counters,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum WatermarkKind {
    /// Shared buffer.
    Shared,
    /// Headroom.
    Headroom,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PoolWhat {
    /// Highest shared and shared-headroom-pool use per pool.
    Watermark {
        /// Since start (or the last persistent clear) instead.
        #[arg(long)]
        persistent: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum PfcwdWhat {
    /// Action and times per port.
    Config,
    /// Storms and packets per watched queue.
    Stats {
        /// Also rows that are all zero.
        #[arg(short = 'e', long)]
        empty: bool,
        /// Exit 1 when a queue is stormed.
        #[arg(long)]
        check_storm: bool,
    },
}

/// FRR's `show ip route` layout (which SONiC's is): a legend, then one line per path.
fn print_routes(table: &IpRouteTable) {
    if !table.mirror.enabled {
        sayln!("No routed port (vlan_mode = \"routed\"): nothing is mirrored.");
        return;
    }
    sayln!(
        "Codes: K - kernel route, C - connected, S - static, B - BGP, O - OSPF, I - IS-IS,\n       \
         R - RIP, L - local (to the switch), N - neighbour (host route)\n       \
         > - selected route, * - in the dataplane's FIB, q - punted to the kernel\n"
    );
    for r in &table.routes {
        let fib = if r.action == "kernel" { "q" } else { "*" };
        let head = format!("{}>{fib} {}", r.code, r.prefix);
        match r.action.as_str() {
            "local" => sayln!("{head} is local (to the switch)"),
            "blackhole" => sayln!("{head} unreachable (blackhole)"),
            "kernel" => sayln!(
                "{head} punted to the kernel{}",
                r.reason
                    .as_ref()
                    .map(|why| format!(" ({why})"))
                    .unwrap_or_default()
            ),
            _ => {
                for (i, h) in r.next_hops.iter().enumerate() {
                    let lead = if i == 0 {
                        head.clone()
                    } else {
                        format!("{:width$}*", "", width = head.find(' ').unwrap_or(3) - 1)
                    };
                    let via = h.via.as_ref().map_or_else(
                        || "is directly connected".to_owned(),
                        |g| format!("via {g}"),
                    );
                    let neighbour = if h.via.is_some() && h.mac.is_none() {
                        " (unresolved)"
                    } else {
                        ""
                    };
                    let weight = h
                        .weight
                        .map(|w| format!(", weight {w}"))
                        .unwrap_or_default();
                    sayln!("{lead} {via}, {}{neighbour}{weight}", h.interface);
                }
            }
        }
    }
    let m = &table.mirror;
    sayln!(
        "\nMirror: {} IPv4 and {} IPv6 routes, {} next hops, {} ECMP groups; {} netlink messages, \
         {} resyncs, {} overruns, {} decode errors, {} FIB refusals; {} FIBs published",
        m.routes_v4,
        m.routes_v6,
        m.next_hops,
        m.ecmp_groups,
        m.messages,
        m.resyncs,
        m.overruns,
        m.decode_errors,
        m.fib_refused,
        m.published
    );
}

/// SONiC's `show lldp table`: capability codes, one row per neighbour, the total.
fn print_lldp_neighbors(view: &LldpView) {
    sayln!("Capability codes: (R) Router, (B) Bridge, (O) Other, (S) Station, (W) WLAN, (P) Repeater, (T) Telephone, (C) DOCSIS");
    let mut t = Table::new([
        "LocalPort",
        "RemoteDevice",
        "RemoteChassisID",
        "RemotePortID",
        "Capability",
        "TTL",
        "DCBX",
        "RemotePortDescr",
    ])
    .left_all();
    for n in &view.neighbors {
        t.row([
            n.local_port.clone(),
            n.system_name.clone().unwrap_or_else(|| "-".into()),
            n.chassis_id.clone(),
            n.port_id.clone(),
            if n.capabilities.is_empty() {
                "-".into()
            } else {
                n.capabilities.clone()
            },
            n.ttl_s.to_string(),
            if n.dcbx { "yes" } else { "no" }.into(),
            n.port_description.clone().unwrap_or_else(|| "-".into()),
        ]);
    }
    say!("{t}");
    sayln!("{}", "-".repeat(50));
    sayln!("Total entries displayed:  {}", view.neighbors.len());
    let errors: Vec<String> = view
        .ports
        .iter()
        .filter(|p| p.rx_discarded > 0 || p.tx_inject_refused > 0)
        .map(|p| {
            format!(
                "  {}: {} LLDP frames discarded ({}), {} LLDPDUs not sent",
                p.port,
                p.rx_discarded,
                p.rx_errors
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .map(|(k, n)| format!("{k} {n}"))
                    .collect::<Vec<_>>()
                    .join(", "),
                p.tx_inject_refused
            )
        })
        .collect();
    if !errors.is_empty() {
        sayln!("\nLLDP errors (--json for every counter):");
        for e in errors {
            sayln!("{e}");
        }
    }
}

fn pfc_text(side: Option<&DcbxSide>) -> (String, String) {
    match side.and_then(|s| s.pfc.as_ref()) {
        Some(p) => (
            if p.enable.is_empty() {
                "none".into()
            } else {
                p.enable.clone()
            },
            if p.willing { "yes" } else { "no" }.into(),
        ),
        None => ("-".into(), "-".into()),
    }
}

/// The RoCEv2 (UDP 4791, selector 3 or 4) priority of an APP table, as text.
fn roce_text(side: Option<&DcbxSide>) -> String {
    side.and_then(|s| s.app.as_ref())
        .and_then(|app| {
            app.iter()
                .find(|e| (e.selector == 3 || e.selector == 4) && e.protocol == 4791)
        })
        .map_or_else(|| "-".into(), |e| e.priority.to_string())
}

/// `show dcbx`: one row per port, then the findings of the ports that have some.
fn print_dcbx(rows: &[DcbxRow]) {
    let mut t = Table::new([
        "Port",
        "Verdict",
        "Neighbor",
        "PFC local",
        "PFC peer",
        "Peer willing",
        "RoCE local",
        "RoCE peer",
    ])
    .left_all();
    for r in rows {
        let (local_pfc, _) = pfc_text(Some(&r.local));
        let (peer_pfc, peer_willing) = pfc_text(r.peer.as_ref());
        t.row([
            r.port.clone(),
            r.status.clone(),
            r.neighbor.clone().unwrap_or_else(|| "-".into()),
            local_pfc,
            peer_pfc,
            peer_willing,
            roce_text(Some(&r.local)),
            roce_text(r.peer.as_ref()),
        ]);
    }
    say!("{t}");
    for r in rows.iter().filter(|r| !r.findings.is_empty()) {
        sayln!("\n{} ({}):", r.port, r.status);
        for f in &r.findings {
            let kind = if f.mismatch { "mismatch" } else { "note" };
            sayln!("  {kind}: {}", f.message);
        }
    }
}

fn ets_rows(
    t: &mut Table,
    what: &str,
    local: Option<&headroom_runtime::protocol::DcbxEts>,
    peer: Option<&headroom_runtime::protocol::DcbxEts>,
) {
    let text = |e: Option<&headroom_runtime::protocol::DcbxEts>,
                f: &dyn Fn(&headroom_runtime::protocol::DcbxEts) -> String| {
        e.map_or_else(|| "-".to_owned(), f)
    };
    let prio = |e: &headroom_runtime::protocol::DcbxEts| {
        (0..8)
            .map(|p| format!("{p}:{}", e.priority_tc[p]))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let bw = |e: &headroom_runtime::protocol::DcbxEts| {
        e.tc_bandwidth_percent
            .iter()
            .map(|b| format!("{b}%"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let tsa = |e: &headroom_runtime::protocol::DcbxEts| {
        e.tsa
            .iter()
            .enumerate()
            .map(|(tc, a)| format!("{tc}:{a}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    t.row([
        format!("{what} priority:TC"),
        text(local, &prio),
        text(peer, &prio),
    ]);
    t.row([
        format!("{what} TC bandwidth"),
        text(local, &bw),
        text(peer, &bw),
    ]);
    t.row([format!("{what} TSA"), text(local, &tsa), text(peer, &tsa)]);
}

fn app_text(side: Option<&DcbxSide>) -> String {
    match side.and_then(|s| s.app.as_ref()) {
        None => "-".into(),
        Some(app) if app.is_empty() => "none".into(),
        Some(app) => app
            .iter()
            .map(|e| {
                let sel = match e.selector {
                    1 => "ethertype",
                    2 => "tcp",
                    3 => "udp",
                    4 => "any",
                    5 => "dscp",
                    _ => "sel?",
                };
                format!("{sel}:{}={}", e.protocol, e.priority)
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

/// `show dcbx PORT`: local against peer, TLV by TLV, then the verdict.
fn print_dcbx_port(r: &DcbxRow) {
    sayln!("Port: {}  (lldp_admin_status {})", r.port, r.admin_status);
    sayln!(
        "Neighbor: {}",
        r.neighbor.clone().unwrap_or_else(|| "none".into())
    );
    let mut t = Table::new(["TLV", "Local", "Peer"]).left_all();
    let peer = r.peer.as_ref();
    let (local_pfc, local_willing) = pfc_text(Some(&r.local));
    let (peer_pfc, peer_willing) = pfc_text(peer);
    let cap = |s: Option<&DcbxSide>| {
        s.and_then(|s| s.pfc.as_ref())
            .map_or_else(|| "-".into(), |p| p.cap.to_string())
    };
    t.row(["PFC enable".to_owned(), local_pfc, peer_pfc]);
    t.row(["PFC willing".to_owned(), local_willing, peer_willing]);
    t.row(["PFC capability".to_owned(), cap(Some(&r.local)), cap(peer)]);
    let willing = |s: Option<&DcbxSide>| {
        s.and_then(|s| s.ets_willing)
            .map_or_else(|| "-".into(), |w| if w { "yes" } else { "no" }.to_owned())
    };
    t.row([
        "ETS willing".to_owned(),
        willing(Some(&r.local)),
        willing(peer),
    ]);
    ets_rows(
        &mut t,
        "ETS",
        r.local.ets.as_ref(),
        peer.and_then(|p| p.ets.as_ref()),
    );
    ets_rows(
        &mut t,
        "ETS-REC",
        r.local.ets_recommendation.as_ref(),
        peer.and_then(|p| p.ets_recommendation.as_ref()),
    );
    t.row(["APP".to_owned(), app_text(Some(&r.local)), app_text(peer)]);
    say!("{t}");
    sayln!("\nVerdict: {}", r.status);
    for f in &r.findings {
        let kind = if f.mismatch { "mismatch" } else { "note" };
        sayln!("  {kind}: {}", f.message);
    }
}

fn print_json(value: &serde_json::Value) {
    sayln!(
        "{}",
        serde_json::to_string_pretty(value).unwrap_or_default()
    );
}

fn fail(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::FAILURE
}

pub(crate) fn show(target: &Target, what: ShowCommand) -> ExitCode {
    match show_inner(target, what) {
        Ok(code) => code,
        Err(e) => fail(&e),
    }
}

fn show_inner(target: &Target, what: ShowCommand) -> Result<ExitCode, String> {
    let req = |what| Request::Show { what };
    match what {
        ShowCommand::Fabric => return crate::lab::fabric::view::show_fabric(target),
        ShowCommand::Pfc {
            what: PfcWhat::Counters,
        } => {
            let (rows, raw): (Vec<PfcCounters>, _) = target.fetch(&req(Show::PfcCounters))?;
            if target.json {
                print_json(&raw);
            } else {
                for (title, rx) in [("Port Rx", true), ("Port Tx", false)] {
                    let mut t = Table::new(
                        std::iter::once(title.to_owned()).chain((0..8).map(|p| format!("PFC{p}"))),
                    );
                    for r in &rows {
                        let v = if rx { r.rx } else { r.tx };
                        t.row(
                            std::iter::once(r.port.clone()).chain(v.iter().map(|n| thousands(*n))),
                        );
                    }
                    sayln!("{t}");
                }
            }
        }
        ShowCommand::Pfc {
            what: PfcWhat::Priority,
        } => {
            let (rows, raw): (Vec<PfcPriority>, _) = target.fetch(&req(Show::PfcPriority))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new(["Interface", "Lossless priorities"]).left_all();
                for r in rows {
                    t.row([
                        r.port,
                        if r.lossless.is_empty() {
                            "N/A".into()
                        } else {
                            r.lossless
                        },
                    ]);
                }
                say!("{t}");
            }
        }
        ShowCommand::Queue {
            what: QueueWhat::Counters,
        } => {
            let (rows, raw): (Vec<QueueCounters>, _) = target.fetch(&req(Show::QueueCounters))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new([
                    "Port",
                    "TxQ",
                    "Counter/pkts",
                    "Counter/bytes",
                    "Drop/pkts",
                    "Drop/bytes",
                ]);
                for r in rows {
                    t.row([
                        r.port,
                        format!("UC{}", r.queue),
                        thousands(r.packets),
                        thousands(r.bytes),
                        thousands(r.drop_packets),
                        thousands(r.drop_bytes),
                    ]);
                }
                say!("{t}");
            }
        }
        ShowCommand::Ecn => {
            let (rows, raw): (Vec<QueueCounters>, _) = target.fetch(&req(Show::Ecn))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new([
                    "Port",
                    "TxQ",
                    "EcnMarked/pkts",
                    "Counter/pkts",
                    "Depth/bytes",
                    "MeanDelay/us",
                ]);
                for r in rows {
                    t.row([
                        r.port,
                        format!("UC{}", r.queue),
                        thousands(r.ecn_marked),
                        thousands(r.packets),
                        thousands(r.depth_bytes),
                        format!("{:.1}", r.mean_delay_ns as f64 / 1000.0),
                    ]);
                }
                say!("{t}");
            }
        }
        ShowCommand::Queue {
            what: QueueWhat::Watermark { persistent, total },
        } => {
            let (kind, title) = if total {
                (
                    QueueWatermarkKind::Total,
                    "Egress total occupancy per unicast queue:",
                )
            } else {
                (
                    QueueWatermarkKind::Shared,
                    "Egress shared pool occupancy per unicast queue:",
                )
            };
            let (rows, raw): (Vec<WatermarkRow>, _) =
                target.fetch(&req(Show::QueueWatermark { persistent, kind }))?;
            watermark_table(target, title, "UC", &rows, &raw);
        }
        ShowCommand::Interfaces {
            what: InterfacesWhat::Counters,
        } => {
            let (rows, raw): (Vec<PortstatRow>, _) =
                target.fetch(&req(Show::InterfacesCounters))?;
            if target.json {
                print_json(&raw);
            } else {
                say!("{}", portstat_table(&rows));
            }
        }
        ShowCommand::PriorityGroup {
            what: PgWhat::Watermark { kind, persistent },
        } => {
            let (kind, title) = match kind {
                WatermarkKind::Shared => (
                    PgWatermarkKind::Shared,
                    "Ingress shared pool occupancy per PG:",
                ),
                WatermarkKind::Headroom => (PgWatermarkKind::Headroom, "Ingress headroom per PG:"),
            };
            let (rows, raw): (Vec<WatermarkRow>, _) =
                target.fetch(&req(Show::PgWatermark { kind, persistent }))?;
            watermark_table(target, title, "PG", &rows, &raw);
        }
        ShowCommand::PriorityGroup { what: PgWhat::Drop } => {
            let (rows, raw): (Vec<PgDropRow>, _) = target.fetch(&req(Show::PgDrop))?;
            if target.json {
                print_json(&raw);
            } else {
                let rows: Vec<_> = rows.into_iter().map(|r| (r.port, r.drops)).collect();
                say!("{}", pg_table("Ingress PG dropped packets:", &rows));
            }
        }
        ShowCommand::PriorityGroup {
            what: PgWhat::Counters,
        } => {
            let (rows, raw): (Vec<PgCountersRow>, _) = target.fetch(&req(Show::PgCounters))?;
            if target.json {
                print_json(&raw);
            } else {
                for (title, pick) in [
                    (
                        "Ingress PG packets:",
                        (|r: &PgCountersRow| r.packets) as fn(&PgCountersRow) -> [u64; 8],
                    ),
                    ("Ingress PG bytes:", |r| r.bytes),
                    ("Ingress PG dropped packets:", |r| r.drop_packets),
                ] {
                    let table: Vec<_> = rows.iter().map(|r| (r.port.clone(), pick(r))).collect();
                    sayln!("{}", pg_table(title, &table));
                }
            }
        }
        ShowCommand::BufferPool {
            what: PoolWhat::Watermark { persistent },
        } => {
            let (rows, raw): (Vec<PoolWatermarkRow>, _) =
                target.fetch(&req(Show::BufferPoolWatermark { persistent }))?;
            if target.json {
                print_json(&raw);
            } else {
                sayln!("Shared pool maximum occupancy:");
                let mut t = Table::new(["Pool", "Bytes"]);
                for r in &rows {
                    t.row([r.pool.clone(), thousands(r.shared_bytes)]);
                }
                sayln!("{t}");
                sayln!("Headroom pool maximum occupancy:");
                let mut t = Table::new(["Pool", "Bytes"]);
                for r in rows
                    .iter()
                    .filter(|r| r.pool.contains("ingress_lossless") || r.headroom_bytes > 0)
                {
                    t.row([r.pool.clone(), thousands(r.headroom_bytes)]);
                }
                say!("{t}");
            }
        }
        ShowCommand::Pfcwd {
            what: PfcwdWhat::Config,
        } => {
            let (cfg, raw): (PfcwdConfig, _) = target.fetch(&req(Show::PfcwdConfig))?;
            if target.json {
                print_json(&raw);
            } else {
                sayln!("Changed polling interval to {}ms", cfg.poll_interval_ms);
                if cfg.big_red_switch {
                    sayln!("BIG_RED_SWITCH status is enable");
                }
                let mut t = Table::new([
                    "PORT",
                    "ACTION",
                    "DETECTION TIME",
                    "RESTORATION TIME",
                    "PRIORITIES",
                ]);
                for r in cfg.ports {
                    t.row([
                        r.port,
                        r.action,
                        r.detection_time_ms.to_string(),
                        r.restoration_time_ms.to_string(),
                        r.priorities,
                    ]);
                }
                say!("{t}");
            }
        }
        ShowCommand::Pfcwd {
            what: PfcwdWhat::Stats { empty, check_storm },
        } => {
            let (rows, raw): (Vec<PfcwdStatsRow>, _) = target.fetch(&req(Show::PfcwdStats))?;
            let stormed = rows.iter().any(|r| r.status == "stormed");
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new([
                    "QUEUE",
                    "STATUS",
                    "STORM DETECTED/RESTORED",
                    "TX OK/DROP",
                    "RX OK/DROP",
                    "TX LAST OK/DROP",
                    "RX LAST OK/DROP",
                ]);
                for r in rows {
                    let all_zero = r.storm_detected + r.tx_ok + r.tx_drop + r.rx_ok + r.rx_drop
                        == 0
                        && r.status != "stormed";
                    if all_zero && !empty {
                        continue;
                    }
                    t.row([
                        r.queue,
                        r.status,
                        format!("{}/{}", r.storm_detected, r.storm_restored),
                        format!("{}/{}", r.tx_ok, r.tx_drop),
                        format!("{}/{}", r.rx_ok, r.rx_drop),
                        format!("{}/{}", r.tx_last_ok, r.tx_last_drop),
                        format!("{}/{}", r.rx_last_ok, r.rx_last_drop),
                    ]);
                }
                say!("{t}");
            }
            if check_storm && stormed {
                return Ok(ExitCode::FAILURE);
            }
        }
        ShowCommand::Ports => {
            let (rows, raw): (Vec<PortSummary>, _) = target.fetch(&req(Show::Ports))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new([
                    "Port", "Device", "Speed", "Link", "Tx", "RX pkts", "RX bytes", "TX pkts",
                    "TX bytes", "Drops",
                ]);
                let mut reasons = Vec::new();
                let mut ignored = Vec::new();
                for r in rows {
                    let drops: u64 = r.drops.values().sum();
                    for (reason, n) in &r.drops {
                        reasons.push(format!("  {}: {reason} {}", r.port, thousands(*n)));
                    }
                    if r.pause_rx_ignored > 0 {
                        ignored.push(format!(
                            "  {}: 802.3x PAUSE ignored (pause_802_3x off) {}",
                            r.port,
                            thousands(r.pause_rx_ignored)
                        ));
                    }
                    if r.fdb_learn_table_full > 0 {
                        ignored.push(format!(
                            "  {}: sources not learned, MAC table full {}",
                            r.port,
                            thousands(r.fdb_learn_table_full)
                        ));
                    }
                    t.row([
                        r.port,
                        r.device,
                        format!("{}G", r.speed_mbps as f64 / 1000.0),
                        r.link,
                        if r.tx_enabled { "enabled" } else { "held" }.into(),
                        thousands(r.rx_frames),
                        thousands(r.rx_bytes),
                        thousands(r.tx_frames),
                        thousands(r.tx_bytes),
                        thousands(drops),
                    ]);
                }
                say!("{t}");
                if !reasons.is_empty() {
                    sayln!("\nDrops by reason:");
                    for r in reasons {
                        sayln!("{r}");
                    }
                }
                if !ignored.is_empty() {
                    sayln!("\nReceived, not acted on (frames still counted above):");
                    for r in ignored {
                        sayln!("{r}");
                    }
                }
            }
        }
        ShowCommand::Ip {
            what: IpWhat::Route,
        } => {
            let (table, raw): (IpRouteTable, _) = target.fetch(&req(Show::IpRoute))?;
            if target.json {
                print_json(&raw);
            } else {
                print_routes(&table);
            }
        }
        ShowCommand::Ip {
            what: IpWhat::Neighbors,
        } => {
            let (rows, raw): (Vec<IpNeighborRow>, _) = target.fetch(&req(Show::IpNeighbors))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t =
                    Table::new(["Address", "MacAddress", "Iface", "Vlan", "Status"]).left_all();
                for r in &rows {
                    t.row([
                        r.address.clone(),
                        r.mac.clone().unwrap_or_else(|| "-".into()),
                        r.interface.clone(),
                        "-".into(),
                        r.state.clone(),
                    ]);
                }
                say!("{t}");
                sayln!("Total number of entries {}", rows.len());
            }
        }
        ShowCommand::Lldp {
            what: LldpWhat::Neighbors,
        } => {
            let (view, raw): (LldpView, _) = target.fetch(&req(Show::LldpNeighbors))?;
            if target.json {
                print_json(&raw);
            } else {
                print_lldp_neighbors(&view);
            }
        }
        ShowCommand::Dcbx { port } => {
            let (mut rows, _): (Vec<DcbxRow>, _) = target.fetch(&req(Show::Dcbx))?;
            if let Some(port) = &port {
                rows.retain(|r| &r.port == port);
                if rows.is_empty() {
                    return Err(format!("{port}: no such port"));
                }
            }
            if target.json {
                print_json(&serde_json::to_value(&rows).map_err(|e| e.to_string())?);
            } else if port.is_some() {
                print_dcbx_port(&rows[0]);
            } else {
                print_dcbx(&rows);
            }
        }
        ShowCommand::HostInterfaces => {
            let (view, raw): (HostInterfacesView, _) = target.fetch(&req(Show::HostInterfaces))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new([
                    "IFACE",
                    "PUNT_OK",
                    "PUNT_DRP",
                    "PUNT_ERR",
                    "INJECT_OK",
                    "INJECT_DRP",
                    "RIF_RX_OK",
                    "RIF_TX_OK",
                ]);
                for r in &view.interfaces {
                    t.row([
                        r.interface.clone(),
                        thousands(r.punt_frames),
                        thousands(r.punt_tap_full),
                        thousands(r.punt_errors + r.read_errors),
                        thousands(r.dataplane_inject_frames),
                        thousands(r.inject_refused + r.dataplane_inject_drops),
                        thousands(r.rif_in_packets),
                        thousands(r.rif_out_packets),
                    ]);
                }
                say!("{t}");
                let unconsumed: Vec<_> = view
                    .punted_unconsumed
                    .iter()
                    .filter(|(_, n)| **n > 0)
                    .collect();
                if !unconsumed.is_empty() {
                    sayln!("\nPunted on ports without a host interface (dropped):");
                    for (reason, n) in unconsumed {
                        sayln!("  {reason} {}", thousands(*n));
                    }
                }
            }
        }
        ShowCommand::Fdb => {
            let (rows, raw): (Vec<FdbRow>, _) = target.fetch(&req(Show::Fdb))?;
            if target.json {
                print_json(&raw);
            } else {
                let mut t = Table::new(["No.", "Vlan", "MacAddress", "Port", "Type", "Age(s)"]);
                for (i, r) in rows.iter().enumerate() {
                    t.row([
                        (i + 1).to_string(),
                        r.vlan.to_string(),
                        r.mac.clone(),
                        r.port.clone(),
                        if r.kind == "static" {
                            "static"
                        } else {
                            "dynamic"
                        }
                        .to_owned(),
                        if r.kind == "static" {
                            "-".to_owned()
                        } else {
                            r.age_s.to_string()
                        },
                    ]);
                }
                say!("{t}");
                sayln!("Total number of entries {}", rows.len());
            }
        }
        ShowCommand::Snapshot => {
            let response = target.request(&req(Show::Snapshot))?;
            if !response.ok {
                return Err(response.error.unwrap_or_default());
            }
            print_json(&response.data);
        }
        ShowCommand::Config => {
            let (cfg, raw): (RunningConfig, _) = target.fetch(&req(Show::Config))?;
            if target.json {
                print_json(&raw);
            } else {
                sayln!(
                    "# running configuration (from {}, with run-time changes)",
                    cfg.file
                );
                sayln!("{}", cfg.text);
                sayln!("# derived values");
                say!("{}", cfg.derived);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// A per-PG table as SONiC's `pg-drop` prints it: a title line, `Port PG0 … PG7`, plain
/// numbers.
fn pg_table(title: &str, rows: &[(String, [u64; 8])]) -> String {
    let mut t =
        Table::new(std::iter::once("Port".to_owned()).chain((0..8).map(|p| format!("PG{p}"))));
    for (port, values) in rows {
        t.row(std::iter::once(port.clone()).chain(values.iter().map(u64::to_string)));
    }
    format!("{title}\n{t}")
}

/// SONiC's byte rate (`netstat.format_brate`): B/s up to 10 KB/s, then KB/s up to 10 MB/s,
/// then MB/s (decimal units), two decimals; `N/A` before the first rate.
fn byte_rate(bytes_per_s: Option<f64>) -> String {
    match bytes_per_s {
        None => "N/A".into(),
        Some(r) if r > 10_000_000.0 => format!("{:.2} MB/s", r / 1e6),
        Some(r) if r > 10_000.0 => format!("{:.2} KB/s", r / 1e3),
        Some(r) => format!("{r:.2} B/s"),
    }
}

/// SONiC's utilisation (`netstat.format_util`): two decimals and a percent sign.
fn percent(util: Option<f64>) -> String {
    util.map_or_else(|| "N/A".into(), |u| format!("{u:.2}%"))
}

/// `show interfaces counters` as SONiC's portstat prints it (its standard columns).
fn portstat_table(rows: &[PortstatRow]) -> Table {
    let mut t = Table::new([
        "IFACE", "STATE", "RX_OK", "RX_BPS", "RX_UTIL", "RX_ERR", "RX_DRP", "RX_OVR", "TX_OK",
        "TX_BPS", "TX_UTIL", "TX_ERR", "TX_DRP", "TX_OVR",
    ]);
    for r in rows {
        t.row([
            r.iface.clone(),
            r.state.clone(),
            thousands(r.rx_ok),
            byte_rate(r.rx_bps),
            percent(r.rx_util),
            thousands(r.rx_err),
            thousands(r.rx_drp),
            thousands(r.rx_ovr),
            thousands(r.tx_ok),
            byte_rate(r.tx_bps),
            percent(r.tx_util),
            thousands(r.tx_err),
            thousands(r.tx_drp),
            r.tx_ovr.map_or_else(|| "N/A".into(), thousands),
        ]);
    }
    t
}

fn watermark_table(
    target: &Target,
    title: &str,
    prefix: &str,
    rows: &[WatermarkRow],
    raw: &serde_json::Value,
) {
    if target.json {
        print_json(raw);
        return;
    }
    sayln!("{title}");
    let mut t = Table::new(
        std::iter::once("Port".to_owned()).chain((0..8).map(|i| format!("{prefix}{i}"))),
    );
    for r in rows {
        t.row(std::iter::once(r.port.clone()).chain(r.bytes.iter().map(|n| n.to_string())));
    }
    say!("{t}");
}

/// `headroom clear …`
#[derive(Debug, Subcommand)]
pub(crate) enum ClearCommand {
    /// Every counter (later reads show the difference; nothing is reset in the dataplane).
    Counters,
    /// Watermarks.
    Watermarks {
        /// Also the persistent view.
        #[arg(long)]
        persistent: bool,
    },
    /// The MAC table (SONiC `sonic-clear fdb all|port <port>`): frames to a forgotten station
    /// are flooded until it sends again.
    Fdb {
        #[command(subcommand)]
        which: FdbClearCommand,
    },
}

/// `headroom clear fdb …`
#[derive(Debug, Subcommand)]
pub(crate) enum FdbClearCommand {
    /// Every station.
    All,
    /// The stations learned on one port: `headroom clear fdb port Ethernet0`.
    Port {
        /// Port name.
        port: String,
    },
}

pub(crate) fn clear(target: &Target, what: ClearCommand) -> ExitCode {
    let what = match what {
        ClearCommand::Counters => Clear::Counters,
        ClearCommand::Watermarks { persistent } => Clear::Watermarks { persistent },
        ClearCommand::Fdb {
            which: FdbClearCommand::All,
        } => Clear::Fdb { port: None },
        ClearCommand::Fdb {
            which: FdbClearCommand::Port { port },
        } => Clear::Fdb { port: Some(port) },
    };
    simple(target, &Request::Clear { what })
}

fn simple(target: &Target, request: &Request) -> ExitCode {
    match target.request(request) {
        Ok(r) if r.ok => {
            if target.json {
                print_json(&r.data);
            } else if let Some(s) = r.data.as_str() {
                sayln!("{s}");
            }
            ExitCode::SUCCESS
        }
        Ok(r) => fail(&r.error.unwrap_or_default()),
        Err(e) => fail(&e),
    }
}

/// `headroom set …`
#[derive(Debug, Subcommand)]
pub(crate) enum SetCommand {
    /// Hold or release a port's egress (SAI PKT_TX_ENABLE): `headroom set port Ethernet8 tx disable`.
    Port {
        /// Port name.
        port: String,
        /// Only `tx`.
        #[arg(value_parser = ["tx"])]
        what: String,
        /// enable | disable.
        #[arg(value_parser = ["enable", "disable"])]
        state: String,
    },
    /// PFC priorities of a port: `headroom set pfc Ethernet0 3,4` (empty string: none).
    Pfc {
        /// Port name.
        port: String,
        /// Comma-separated priorities.
        priorities: String,
    },
    /// A buffer profile field (size, static_th, dynamic_th, xon, xoff, xon_offset, pool):
    /// `headroom set profile pg_lossless_profile dynamic_th -2`. Lowering a threshold is the
    /// classic way to force congestion in a test.
    Profile {
        /// Profile name.
        profile: String,
        /// Field.
        field: String,
        /// New value.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
    /// A WRED/ECN profile: `headroom set wred LAB_LOSSLESS --min 20000 --max 60000 --probability 100`.
    Wred {
        /// Profile name.
        profile: String,
        /// green_min_threshold, bytes.
        #[arg(long)]
        min: Option<u64>,
        /// green_max_threshold, bytes.
        #[arg(long)]
        max: Option<u64>,
        /// green_drop_probability, percent.
        #[arg(long)]
        probability: Option<u8>,
        /// ecn mode (ecn_none, ecn_green, ecn_all, …).
        #[arg(long)]
        ecn: Option<String>,
    },
    /// PFC watchdog of a port: `headroom set pfcwd Ethernet0 --action drop --detection 200`.
    Pfcwd {
        /// Port name.
        port: String,
        /// drop | forward | alert.
        #[arg(long)]
        action: Option<String>,
        /// Detection time, ms.
        #[arg(long)]
        detection: Option<u32>,
        /// Restoration time, ms.
        #[arg(long)]
        restoration: Option<u32>,
        /// Enable or disable the watchdog on the port.
        #[arg(long)]
        enabled: Option<bool>,
    },
    /// The PFC watchdog's big red switch (drop on every watched queue): on | off.
    BigRedSwitch {
        /// on | off.
        #[arg(value_parser = ["on", "off"])]
        state: String,
    },
    /// Any configuration key, as a dotted TOML path and a TOML value:
    /// `headroom set key buffer_pool.ingress_lossless_pool.xoff 65536`.
    Key {
        /// Dotted key.
        key: String,
        /// TOML value.
        #[arg(allow_hyphen_values = true)]
        value: String,
    },
}

fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

pub(crate) fn set(target: &Target, command: SetCommand) -> ExitCode {
    let mut changes: Vec<Change> = Vec::new();
    let key = |k: String, v: String| Change::Key { key: k, value: v };
    match command {
        SetCommand::Port { port, state, .. } => changes.push(Change::PortTx {
            port,
            enable: state == "enable",
        }),
        SetCommand::BigRedSwitch { state } => {
            changes.push(Change::BigRedSwitch { on: state == "on" })
        }
        SetCommand::Pfc { port, priorities } => {
            let list: Vec<&str> = priorities
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .collect();
            changes.push(key(
                format!("port.{}.pfc_enable", quote(&port)),
                format!("[{}]", list.join(", ")),
            ));
        }
        SetCommand::Profile {
            profile,
            field,
            value,
        } => {
            let value = if field == "pool" {
                quote(&value)
            } else {
                value
            };
            changes.push(key(
                format!("buffer_profile.{}.{field}", quote(&profile)),
                value,
            ));
        }
        SetCommand::Wred {
            profile,
            min,
            max,
            probability,
            ecn,
        } => {
            let p = quote(&profile);
            if let Some(v) = min {
                changes.push(key(
                    format!("wred_profile.{p}.green_min_threshold"),
                    v.to_string(),
                ));
            }
            if let Some(v) = max {
                changes.push(key(
                    format!("wred_profile.{p}.green_max_threshold"),
                    v.to_string(),
                ));
            }
            if let Some(v) = probability {
                changes.push(key(
                    format!("wred_profile.{p}.green_drop_probability"),
                    v.to_string(),
                ));
            }
            if let Some(v) = ecn {
                changes.push(key(format!("wred_profile.{p}.ecn"), quote(&v)));
            }
        }
        SetCommand::Pfcwd {
            port,
            action,
            detection,
            restoration,
            enabled,
        } => {
            let p = quote(&port);
            if let Some(v) = action {
                changes.push(key(format!("port.{p}.pfcwd.action"), quote(&v)));
            }
            if let Some(v) = detection {
                changes.push(key(format!("port.{p}.pfcwd.detection_time"), v.to_string()));
            }
            if let Some(v) = restoration {
                changes.push(key(
                    format!("port.{p}.pfcwd.restoration_time"),
                    v.to_string(),
                ));
            }
            if let Some(v) = enabled {
                changes.push(key(format!("port.{p}.pfcwd.enabled"), v.to_string()));
            }
        }
        SetCommand::Key { key: k, value } => changes.push(key(k, value)),
    }
    if changes.is_empty() {
        return fail("nothing to change");
    }
    for change in changes {
        let code = simple(target, &Request::Set { change });
        if code != ExitCode::SUCCESS {
            return code;
        }
    }
    ExitCode::SUCCESS
}

/// `headroom config …`
#[derive(Debug, Subcommand)]
pub(crate) enum ConfigCommand {
    /// Save the running configuration under NAME (snapshot before every change).
    Save {
        /// Snapshot name.
        name: String,
    },
    /// Apply the configuration saved as NAME (validated first).
    Rollback {
        /// Snapshot name.
        name: String,
    },
    /// List saved configurations.
    List,
    /// Write a headroom configuration (TOML) from a SONiC CONFIG_DB JSON: PORT, CABLE_LENGTH,
    /// BUFFER_*, PORT_QOS_MAP and the maps, WRED_PROFILE, SCHEDULER, QUEUE, PFC_WD,
    /// DEVICE_METADATA's buffer model (docs/sonic.md). Tables and fields headroom does not
    /// model are named in warnings; a bad value is refused with its JSON path (exit 2).
    ImportSonic(crate::sonic::ImportArgs),
    /// Write SONiC CONFIG_DB JSON from the configuration file given with `-c`, or else from the
    /// running switch (its configuration with run-time changes).
    ExportSonic(crate::sonic::ExportArgs),
}

pub(crate) fn config(target: &Target, command: ConfigCommand) -> ExitCode {
    match command {
        ConfigCommand::Save { name } => simple(target, &Request::ConfigSave { name }),
        ConfigCommand::Rollback { name } => simple(target, &Request::ConfigRollback { name }),
        ConfigCommand::ImportSonic(args) => crate::sonic::import(&args),
        ConfigCommand::ExportSonic(args) => crate::sonic::export(target, &args),
        ConfigCommand::List => match target.fetch::<Vec<String>>(&Request::ConfigList) {
            Ok((names, raw)) => {
                if target.json {
                    print_json(&raw);
                } else {
                    for n in names {
                        sayln!("{n}");
                    }
                }
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        },
    }
}

/// `headroom capture` bounds.
#[derive(Debug, Args)]
pub(crate) struct CaptureArgs {
    /// Port name.
    #[arg(long)]
    port: String,
    /// Only MAC Control frames (PFC, PAUSE).
    #[arg(long)]
    control_only: bool,
    /// Output pcap file.
    #[arg(short = 'w', long = "write", value_name = "FILE.pcap")]
    write: PathBuf,
    /// Stop after this many frames.
    #[arg(long)]
    count: Option<u64>,
    /// Stop after this many seconds (default 10). Ctrl-C stops it earlier.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Stop when the file reaches this many bytes (default 100 MB).
    #[arg(long, default_value_t = 100_000_000)]
    max_bytes: u64,
}

pub(crate) fn capture(target: &Target, args: &CaptureArgs) -> ExitCode {
    match capture_inner(target, args) {
        Ok(n) => {
            eprintln!("{n} frames written to {}", args.write.display());
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn capture_inner(target: &Target, args: &CaptureArgs) -> Result<u64, String> {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use pcap_file::DataLink;
    let stream = target.connect()?;
    send(
        &stream,
        &Request::Capture(CaptureRequest {
            port: args.port.clone(),
            control_only: args.control_only,
        }),
    )?;
    let mut reader = BufReader::new(&stream);
    let response = read_response(&mut reader)?;
    if !response.ok {
        return Err(response.error.unwrap_or_default());
    }
    let file =
        std::fs::File::create(&args.write).map_err(|e| format!("{}: {e}", args.write.display()))?;
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        snaplen: 65535,
        ts_resolution: pcap_file::TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut writer = PcapWriter::with_header(file, header).map_err(|e| e.to_string())?;
    let deadline = std::time::Instant::now() + Duration::from_secs_f64(args.duration.max(0.0));
    // Ctrl-C (or SIGTERM) ends the capture like its bounds do, between records, as tcpdump's
    // does: the file never ends in a cut record and the summary is printed. Checked at least
    // every read timeout.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .map_err(|e| format!("cannot handle signal {signal}: {e}"))?;
    }
    let mut frames = 0u64;
    let mut written = 24u64;
    stream
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(|e| e.to_string())?;
    let mut head = [0u8; 17];
    while std::time::Instant::now() < deadline
        && !interrupted.load(Ordering::Relaxed)
        && args.count.is_none_or(|c| frames < c)
        && written < args.max_bytes
    {
        match read_exact_or_timeout(&mut reader, &mut head) {
            Ok(false) => continue,
            Ok(true) => {}
            Err(e) => return Err(format!("capture ended: {e}")),
        }
        let unix_ns = u64::from_le_bytes(head[0..8].try_into().unwrap_or_default());
        let orig_len = u32::from_le_bytes(head[11..15].try_into().unwrap_or_default());
        let len = usize::from(u16::from_le_bytes(
            head[15..17].try_into().unwrap_or_default(),
        ));
        let mut data = vec![0u8; len];
        reader
            .read_exact(&mut data)
            .map_err(|e| format!("capture ended: {e}"))?;
        let packet = PcapPacket::new_owned(Duration::from_nanos(unix_ns), orig_len, data);
        writer.write_packet(&packet).map_err(|e| e.to_string())?;
        frames += 1;
        written += 16 + len as u64;
    }
    Ok(frames)
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` when nothing arrived before the read timeout
/// or a signal interrupted the wait (the caller checks its stop conditions again).
fn read_exact_or_timeout(reader: &mut impl Read, buf: &mut [u8]) -> std::io::Result<bool> {
    let mut got = 0;
    while got < buf.len() {
        match reader.read(&mut buf[got..]) {
            Ok(0) => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the switch closed the capture",
                ))
            }
            Ok(n) => got += n,
            Err(e)
                if got == 0
                    && matches!(
                        e.kind(),
                        std::io::ErrorKind::WouldBlock
                            | std::io::ErrorKind::TimedOut
                            | std::io::ErrorKind::Interrupted
                    ) =>
            {
                return Ok(false)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    #[test]
    fn discovery_finds_the_one_live_socket_and_ignores_stale_files() {
        let dir = tempfile::tempdir().unwrap();
        let none = running_switch_socket(dir.path()).unwrap_err();
        assert!(none.starts_with("no running headroom found in "), "{none}");
        // A socket file nobody listens on any more (a killed switch's).
        drop(UnixListener::bind(dir.path().join("crashed.sock")).unwrap());
        let stale = running_switch_socket(dir.path()).unwrap_err();
        assert!(stale.contains("nothing listens on"), "{stale}");
        assert!(stale.contains("crashed.sock"), "{stale}");
        let _live = UnixListener::bind(dir.path().join("lab.sock")).unwrap();
        std::fs::write(dir.path().join("notes.txt"), "not a socket").unwrap();
        assert_eq!(
            running_switch_socket(dir.path()).unwrap(),
            dir.path().join("lab.sock")
        );
        let _other = UnixListener::bind(dir.path().join("other.sock")).unwrap();
        let several = running_switch_socket(dir.path()).unwrap_err();
        assert_eq!(
            several,
            "several switches run (2); pass --socket or --config"
        );
    }
}
