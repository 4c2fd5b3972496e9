//! The lab hosts' DCBX agent (issue 16): lldpad (Debian `lldpad`) in every host namespace,
//! LLDP on `eth0` (transmit and receive) and the IEEE 802.1Qaz TLVs willing, as a host with a
//! DCB-capable NIC would run it (docs/operations.md gives the same commands for real hosts).
//!
//! Each lldpad is detached from `headroom lab` (its own session, re-parented to init) so that it
//! outlives the command that started it and a Ctrl-C of the switch; `headroom lab` again keeps a
//! running one and re-applies its settings (idempotent), starts a missing one, and with
//! `--host-dcbx none` stops it; `headroom lab down` stops it before deleting the namespace.
//!
//! lldpad keeps per-interface state, the chassis ID included, in `/dev/shm/lldpad.state`, which
//! every lldpad on the machine would share whatever its network namespace: each runs with a
//! private `/dev/shm` (mount and IPC namespaces, `unshare`), no PID file, and its own
//! configuration file `/run/headroom/<ns>-lldpad.conf` (log: `<ns>-lldpad.log`).
//!
//! A veth has no DCB netlink operations: lldpad answers every DCB setting with "Device not
//! capable" and sends plain LLDP only, while still decoding the peer's DCBX TLVs (`lldptool -t
//! -n -i eth0 -V PFC`). The lab says so in one line and goes on.

use super::config::{HOST_DEVICE, RUN_DIR};
use super::{namespace_pids, LabError};
use clap::ValueEnum;
use std::fs::File;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The DCBX agent `headroom lab` runs in its hosts (`--host-dcbx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum HostDcbx {
    /// No agent: the hosts send no LLDP (an lldpd or lldpad you start yourself is alone).
    None,
    /// lldpad in every host, LLDP rx/tx on eth0, the 802.1Qaz TLVs willing.
    Lldpad,
}

/// How long lldpad may take to answer lldptool after it starts, and to exit on SIGTERM.
const AGENT_DEADLINE: Duration = Duration::from_secs(10);

/// The settings a willing DCBX host applies: LLDP on, then ETS, PFC and APP advertised and
/// willing (IEEE 802.1Qaz: a willing peer adopts the switch's ETS and PFC configuration).
const LLDPTOOL_SETTINGS: [&[&str]; 4] = [
    &["-L", "-i", HOST_DEVICE, "adminStatus=rxtx"],
    &[
        "-T",
        "-i",
        HOST_DEVICE,
        "-V",
        "ETS-CFG",
        "enableTx=yes",
        "willing=yes",
    ],
    &[
        "-T",
        "-i",
        HOST_DEVICE,
        "-V",
        "PFC",
        "enableTx=yes",
        "willing=yes",
    ],
    &["-T", "-i", HOST_DEVICE, "-V", "APP", "enableTx=yes"],
];

/// lldpad's configuration file of host namespace `namespace`.
pub(crate) fn config_path(namespace: &str) -> PathBuf {
    PathBuf::from(format!("{RUN_DIR}/{namespace}-lldpad.conf"))
}

/// lldpad's log of host namespace `namespace`.
pub(crate) fn log_path(namespace: &str) -> PathBuf {
    PathBuf::from(format!("{RUN_DIR}/{namespace}-lldpad.log"))
}

/// The lldpad processes in `namespace` (zombies excluded: they have exited).
fn lldpad_pids(namespace: &str) -> Result<Vec<String>, LabError> {
    let pids = namespace_pids(namespace)?.unwrap_or_default();
    Ok(pids
        .into_iter()
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // "PID (COMM) STATE ...": COMM in parentheses, then the state letter.
            let comm = stat
                .split_once('(')
                .and_then(|(_, rest)| rest.rsplit_once(')'));
            matches!(comm, Some((name, rest)) if name == "lldpad" && !rest.trim_start().starts_with('Z'))
        })
        .collect())
}

/// Sends `signal` to `pid` with kill(1) (this crate has no unsafe code).
fn kill(signal: &str, pid: &str) {
    let _ = Command::new("kill")
        .args([signal, pid])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Stops every lldpad in `namespace`: SIGTERM, then SIGKILL after [`AGENT_DEADLINE`].
pub(crate) fn stop(namespace: &str) -> Result<(), LabError> {
    let pids = lldpad_pids(namespace)?;
    if pids.is_empty() {
        return Ok(());
    }
    for pid in &pids {
        kill("-TERM", pid);
    }
    let end = Instant::now() + AGENT_DEADLINE;
    while !lldpad_pids(namespace)?.is_empty() {
        if Instant::now() >= end {
            for pid in lldpad_pids(namespace)? {
                kill("-KILL", &pid);
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// `lldptool ARGS` in `namespace`: (success, stdout and stderr).
fn lldptool(namespace: &str, args: &[&str]) -> Result<(bool, String), LabError> {
    let out = Command::new("ip")
        .args(["netns", "exec", namespace, "lldptool"])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|e| LabError::Failed(format!("lldptool in {namespace}: {e}")))?;
    Ok((
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    ))
}

/// Starts lldpad in `namespace` unless one runs there.
fn start(namespace: &str) -> Result<(), LabError> {
    if !lldpad_pids(namespace)?.is_empty() {
        return Ok(());
    }
    std::fs::create_dir_all(RUN_DIR)
        .map_err(|e| LabError::Failed(format!("creating {RUN_DIR}: {e}")))?;
    let log_path = log_path(namespace);
    let log = File::options()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| LabError::Failed(format!("opening {}: {e}", log_path.display())))?;
    let err = log
        .try_clone()
        .map_err(|e| LabError::Failed(format!("{}: {e}", log_path.display())))?;
    // -V 7: lldpad logs why it refuses DCB on an interface ("does not support DCB").
    let script = format!(
        "mount -t tmpfs lldpad-shm /dev/shm && exec lldpad -t -V 7 -p -f {}",
        config_path(namespace).display()
    );
    // `setsid -f` forks: lldpad runs in its own session, a child of init, not of this
    // process; the parent returns at once.
    let status = Command::new("ip")
        .args(["netns", "exec", namespace, "setsid", "-f", "unshare"])
        .args(["--ipc", "--mount", "--propagation", "private", "sh", "-c"])
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(err)
        .status()
        .map_err(|e| LabError::Failed(format!("starting lldpad in {namespace}: {e}")))?;
    if !status.success() {
        return Err(LabError::Failed(format!(
            "starting lldpad in {namespace} failed ({status}); see {}",
            log_path.display()
        )));
    }
    Ok(())
}

/// Waits until lldpad in `namespace` answers lldptool, then applies [`LLDPTOOL_SETTINGS`].
/// Returns whether the interface took the DCB settings (false on a veth).
fn configure(namespace: &str) -> Result<bool, LabError> {
    let end = Instant::now() + AGENT_DEADLINE;
    while !lldptool(namespace, &["-p"])?.0 {
        if Instant::now() >= end {
            return Err(LabError::Failed(format!(
                "lldpad in {namespace} does not answer lldptool after {}s; see {}",
                AGENT_DEADLINE.as_secs(),
                log_path(namespace).display()
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut dcb_capable = true;
    for (n, args) in LLDPTOOL_SETTINGS.iter().enumerate() {
        let (ok, out) = lldptool(namespace, args)?;
        if n == 0 {
            if !(ok && out.contains("adminStatus = rxtx")) {
                return Err(LabError::Failed(format!(
                    "lldptool {} in {namespace}: {}",
                    args.join(" "),
                    out.trim()
                )));
            }
        } else if out.contains("Device not capable") {
            dcb_capable = false;
        } else if !ok {
            return Err(LabError::Failed(format!(
                "lldptool {} in {namespace}: {}",
                args.join(" "),
                out.trim()
            )));
        }
    }
    Ok(dcb_capable)
}

/// Brings the agents of `host_namespaces` to `mode`: lldpad started (or kept) and configured,
/// or stopped.
pub(crate) fn ensure(host_namespaces: &[String], mode: HostDcbx) -> Result<(), LabError> {
    match mode {
        HostDcbx::None => {
            for ns in host_namespaces {
                stop(ns)?;
            }
        }
        HostDcbx::Lldpad => {
            // All started first, so that their start-up overlaps.
            for ns in host_namespaces {
                start(ns)?;
            }
            let mut not_capable = Vec::new();
            for ns in host_namespaces {
                if !configure(ns)? {
                    not_capable.push(ns.as_str());
                }
            }
            if !not_capable.is_empty() {
                println!(
                    "note: {HOST_DEVICE} in {} cannot apply DCB (a veth has no DCB operations: \
                     lldpad says \"Device not capable\"), so lldpad sends plain LLDP and shows \
                     the switch's DCBX as its peer's only",
                    not_capable.join(" ")
                );
            }
        }
    }
    Ok(())
}

/// Removes the lldpad files of `namespace` (after [`stop`]).
pub(crate) fn remove_files(namespace: &str) -> Result<(), LabError> {
    for path in [config_path(namespace), log_path(namespace)] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(LabError::Failed(format!(
                    "removing {}: {e}",
                    path.display()
                )))
            }
        }
    }
    Ok(())
}
