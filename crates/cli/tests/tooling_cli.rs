//! The operator commands of the real binary against a real `headroom run` (memory driver):
//! every `show` in `--json` and table form, `set` (applied and refused), `config
//! save|list|rollback`, `clear`, `top --once`, the Prometheus endpoint, the socket's mode, and
//! a clean stop on SIGTERM.

use serde_json::Value;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// A `headroom run` in the background; killed if a test fails before stopping it.
struct Daemon {
    child: Option<Child>,
    dir: tempfile::TempDir,
    config: PathBuf,
    socket: PathBuf,
    metrics: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Daemon {
    /// An idle switch: no LLDP agent, so that its ports send nothing.
    fn start() -> Self {
        Self::start_with("[lldp]\nenabled = false\n")
    }

    /// With `extra` TOML appended.
    fn start_with(extra: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("sw.sock");
        let metrics = format!("127.0.0.1:{}", free_port());
        let config = dir.path().join("lab.toml");
        let text = format!(
            "# lab switch for the tooling tests\n[switch]\nname = \"tooling\"\ndriver = \"memory\"\n\n\
             [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
             [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
             [runtime]\ncontrol_socket = \"{}\"\nprometheus_listen = \"{metrics}\"\n\n{extra}",
            socket.display()
        );
        std::fs::write(&config, text).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .arg("run")
            .arg("-c")
            .arg(&config)
            .args(["--log-format", "json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("headroom run");
        let mut daemon = Self {
            child: Some(child),
            dir,
            config,
            socket,
            metrics,
        };
        let end = Instant::now() + DEADLINE;
        while std::os::unix::net::UnixStream::connect(&daemon.socket).is_err() {
            if let Some(status) = daemon.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("headroom run exited: {status}");
            }
            assert!(Instant::now() < end, "the control socket did not appear");
            std::thread::sleep(Duration::from_millis(10));
        }
        daemon
    }

    /// `headroom <args> --socket <socket>`.
    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "headroom {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut with = args.to_vec();
        with.push("--json");
        let text = self.ok(&with);
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
    }

    /// SIGTERM, then the exit status and stdout.
    fn stop(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().unwrap();
        let status = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let out = child.wait_with_output().unwrap();
        (out.status, String::from_utf8(out.stdout).unwrap())
    }
}

fn ports(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|r| r["port"].as_str().unwrap())
        .collect()
}

#[test]
fn every_show_answers_in_json_and_sonic_tables() {
    let d = Daemon::start();
    let mode = std::fs::metadata(&d.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "control socket mode {mode:o}");

    let pfc = d.json(&["show", "pfc", "counters"]);
    assert_eq!(ports(&pfc), ["Ethernet0", "Ethernet4"]);
    for row in pfc.as_array().unwrap() {
        assert_eq!(row["rx"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(row["tx"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
        assert_eq!(row["pause_rx"], 0);
    }
    // No routed port: no host interface, nothing mirrored, and the views say so.
    let routes = d.json(&["show", "ip", "route"]);
    assert_eq!(routes["mirror"]["enabled"], false, "{routes:#}");
    assert_eq!(routes["routes"], serde_json::json!([]), "{routes:#}");
    assert_eq!(d.json(&["show", "ip", "neighbors"]), serde_json::json!([]));
    let host = d.json(&["show", "host-interfaces"]);
    assert_eq!(host["interfaces"], serde_json::json!([]), "{host:#}");
    assert_eq!(host["punted_unconsumed"]["lldp"], 0, "{host:#}");
    let prio = d.json(&["show", "pfc", "priority"]);
    assert_eq!(prio[0]["lossless"], "3,4");
    let queues = d.json(&["show", "queue", "counters"]);
    assert_eq!(queues.as_array().unwrap().len(), 16);
    assert!(queues
        .as_array()
        .unwrap()
        .iter()
        .all(|q| q["packets"] == 0 && q["drop_packets"] == 0));
    for args in [
        &["show", "queue", "watermark"][..],
        &["show", "queue", "watermark", "--persistent"],
        &["show", "priority-group", "watermark", "shared"],
        &[
            "show",
            "priority-group",
            "watermark",
            "headroom",
            "--persistent",
        ],
    ] {
        let rows = d.json(args);
        assert_eq!(ports(&rows), ["Ethernet0", "Ethernet4"], "{args:?}");
        assert!(rows
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["bytes"] == serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0])));
    }
    let drops = d.json(&["show", "priority-group", "drop"]);
    assert_eq!(ports(&drops), ["Ethernet0", "Ethernet4"]);
    let pools = d.json(&["show", "buffer-pool", "watermark"]);
    let names: Vec<&str> = pools
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pool"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"ingress_lossless_pool"), "{names:?}");
    let wd = d.json(&["show", "pfcwd", "config"]);
    assert_eq!(wd["poll_interval_ms"], 200);
    assert_eq!(wd["ports"][1]["action"], "drop");
    let stats = d.json(&["show", "pfcwd", "stats"]);
    assert_eq!(stats[0]["queue"], "Ethernet0:3");
    assert_eq!(stats[0]["status"], "operational");
    let ecn = d.json(&["show", "ecn"]);
    assert_eq!(ecn.as_array().unwrap().len(), 16);
    let p = d.json(&["show", "ports"]);
    assert_eq!(p[0]["device"], "m0");
    assert_eq!(p[0]["speed_mbps"], 10_000);
    assert_eq!(p[0]["tx_enabled"], true);
    let fdb = d.json(&["show", "fdb"]);
    assert_eq!(fdb, serde_json::json!([]));
    let config = d.json(&["show", "config"]);
    assert_eq!(
        config["text"],
        std::fs::read_to_string(&d.config).unwrap().as_str()
    );

    // Tables in SONiC's layout (tabulate "simple", right-aligned, thousands separators).
    let table = d.ok(&["show", "pfc", "counters"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "  Port Rx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7",
            "---------  ------  ------  ------  ------  ------  ------  ------  ------",
            "Ethernet0       0       0       0       0       0       0       0       0",
        ]
    );
    assert!(lines
        .contains(&"  Port Tx    PFC0    PFC1    PFC2    PFC3    PFC4    PFC5    PFC6    PFC7"));
    let table = d.ok(&["show", "priority-group", "watermark", "shared"]);
    assert!(table.starts_with("Ingress shared pool occupancy per PG:\n"));
    assert!(table.contains("     Port    PG0    PG1    PG2    PG3    PG4    PG5    PG6    PG7"));
    let table = d.ok(&["show", "queue", "counters"]);
    assert!(table.starts_with(
        "     Port    TxQ    Counter/pkts    Counter/bytes    Drop/pkts    Drop/bytes\n"
    ));
    assert!(table
        .contains("Ethernet4    UC7               0                0            0             0"));
    let table = d.ok(&["show", "pfcwd", "stats", "-e"]);
    assert!(table.contains("Ethernet4:4  operational"), "{table}");
    assert!(table.starts_with("      QUEUE       STATUS    STORM DETECTED/RESTORED"));
    assert!(d
        .run(&["show", "pfcwd", "stats", "--check-storm"])
        .status
        .success());
    let table = d.ok(&["show", "pfc", "priority"]);
    assert!(table.contains("Ethernet0    3,4"), "{table}");

    // SONiC's portstat: its columns, in its order; TX_OVR is not counted (N/A, null).
    let ifc = d.json(&["show", "interfaces", "counters"]);
    let rows = ifc.as_array().unwrap();
    assert_eq!(
        rows.iter()
            .map(|r| r["iface"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["Ethernet0", "Ethernet4"]
    );
    for r in rows {
        for key in [
            "rx_ok", "rx_err", "rx_drp", "rx_ovr", "tx_ok", "tx_err", "tx_drp",
        ] {
            assert_eq!(r[key], 0, "{key}: {r}");
        }
        assert_eq!(r["tx_ovr"], Value::Null);
    }
    let table = d.ok(&["show", "interfaces", "counters"]);
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "    IFACE    STATE    RX_OK    RX_BPS    RX_UTIL    RX_ERR    RX_DRP    RX_OVR    TX_OK    \
         TX_BPS    TX_UTIL    TX_ERR    TX_DRP    TX_OVR"
    );
    assert!(lines[2].starts_with("Ethernet0  "), "{table}");
    assert!(lines[2].ends_with("       N/A"), "{table}");
    let pg = d.json(&["show", "priority-group", "counters"]);
    assert_eq!(pg[1]["port"], "Ethernet4");
    assert_eq!(pg[1]["bytes"], serde_json::json!([0, 0, 0, 0, 0, 0, 0, 0]));
    let table = d.ok(&["show", "priority-group", "counters"]);
    assert!(table.starts_with("Ingress PG packets:\n"), "{table}");
    assert!(table.contains("\nIngress PG bytes:\n"), "{table}");
    assert!(table.contains("\nIngress PG dropped packets:\n"), "{table}");
    let total = d.json(&["show", "queue", "watermark", "--total"]);
    assert_eq!(ports(&total), ["Ethernet0", "Ethernet4"]);

    let (status, out) = d.stop();
    assert!(status.success(), "{status}");
    assert!(out.contains("Port Rx"), "final counters printed: {out}");
}

#[test]
fn set_save_rollback_and_refusals_through_the_binary() {
    let d = Daemon::start();
    let original = d.json(&["show", "config"])["text"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = d.ok(&["config", "save", "base"]);
    assert!(out.trim_end().ends_with("base.toml"), "{out}");
    assert_eq!(d.ok(&["config", "list"]), "base\n");

    assert_eq!(d.ok(&["set", "pfc", "Ethernet0", "4"]), "applied\n");
    assert_eq!(d.json(&["show", "pfc", "priority"])[0]["lossless"], "4");
    assert_eq!(
        d.ok(&["set", "port", "Ethernet4", "tx", "disable"]),
        "port Ethernet4 tx disabled\n"
    );
    let p = d.json(&["show", "ports"]);
    assert_eq!(p[1]["tx_enabled"], false);
    assert!(d.ok(&["show", "ports"]).contains("held"));
    assert_eq!(
        d.ok(&["set", "key", "headroom_calc.default_dynamic_th", "-1"]),
        "applied\n"
    );
    // A built-in profile is not in the file: setting one field of it is refused (the new
    // table lacks the other fields), with the configuration's error.
    let out = d.run(&[
        "set",
        "profile",
        "pg_lossless_10000_5m_profile",
        "dynamic_th",
        "-1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("pool: missing"));
    assert_eq!(
        d.ok(&["set", "big-red-switch", "on"]),
        "big red switch on\n"
    );
    assert!(d
        .ok(&["show", "pfcwd", "config"])
        .contains("BIG_RED_SWITCH status is enable"));

    // Refused: the configuration's own error, exit status 1, nothing changes.
    let before = d.json(&["show", "config"])["text"].clone();
    let out = d.run(&["set", "pfcwd", "Ethernet0", "--detection", "50"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: refused: "), "{err}");
    assert!(
        err.contains(&d.config.display().to_string()),
        "names the file: {err}"
    );
    assert!(err.contains("port.Ethernet0.pfcwd.detection_time"), "{err}");
    let out = d.run(&["set", "key", "switch.cell_size_bytes", "\"big\""]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cell_size_bytes"));
    assert_eq!(d.json(&["show", "config"])["text"], before);
    let out = d.run(&["config", "rollback", "missing"]);
    assert_eq!(out.status.code(), Some(1));

    // Rollback: exactly the saved text, and what it means.
    assert_eq!(d.ok(&["config", "rollback", "base"]), "applied\n");
    assert_eq!(d.json(&["show", "config"])["text"], original.as_str());
    assert_eq!(d.json(&["show", "pfc", "priority"])[0]["lossless"], "3,4");
    assert_eq!(d.json(&["show", "ports"])[1]["tx_enabled"], true);
    assert_eq!(
        d.json(&["show", "pfcwd", "config"])["big_red_switch"],
        false
    );

    assert_eq!(d.ok(&["clear", "counters"]), "cleared\n");
    assert_eq!(d.ok(&["clear", "watermarks", "--persistent"]), "cleared\n");
    assert_eq!(d.ok(&["clear", "fdb", "port", "Ethernet4"]), "cleared\n");
    assert_eq!(d.ok(&["clear", "fdb", "all"]), "cleared\n");
    assert_eq!(d.json(&["show", "fdb"]), serde_json::json!([]));
    let out = d.run(&["clear", "fdb", "port", "Ethernet9"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no port \"Ethernet9\""));
    let (status, _) = d.stop();
    assert!(status.success());
}

#[test]
fn top_once_prints_a_screen() {
    let d = Daemon::start();
    let out = d.ok(&["top", "--once", "--interval", "0.2"]);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("headroom top | up "), "{out}");
    assert!(lines[0].ends_with("| every 0.2s | 2 ports"), "{out}");
    assert!(out.contains("RX fr/s"));
    let row: Vec<&str> = lines
        .iter()
        .find(|l| l.starts_with("Ethernet4"))
        .unwrap()
        .split_whitespace()
        .collect();
    assert_eq!(row[..4], ["Ethernet4", "on", "0", "0"], "{out}");
    let out = d.ok(&["top", "--once", "--interval", "0.2", "--view", "watchdog"]);
    assert!(
        out.contains("Ethernet4:4") && out.contains("operational"),
        "{out}"
    );
    // Refusals.
    let out = d.run(&["top", "--interval", "0"]);
    assert!(!out.status.success());
    let out = d.run(&["top"]);
    assert!(!out.status.success(), "no terminal");
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a terminal"));
    let (status, _) = d.stop();
    assert!(status.success());
}

fn http_get(addr: &str, path: &str) -> String {
    // The exporter starts after the control socket: retry until it listens.
    let end = Instant::now() + DEADLINE;
    let mut s = loop {
        match std::net::TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) => {
                assert!(Instant::now() < end, "{addr}: {e}");
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    };
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer
}

#[test]
fn metrics_endpoint_serves_the_exposition() {
    let d = Daemon::start();
    let answer = http_get(&d.metrics, "/metrics");
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.1 200") || head.starts_with("HTTP/1.0 200"),
        "{head}"
    );
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    assert!(body.contains("\nheadroom_up 1\n"));
    assert!(body.contains("headroom_port_rx_frames_total{port=\"Ethernet4\"} 0"));
    check_with_promtool(body, d.dir.path());
    let answer = http_get(&d.metrics, "/nothing");
    assert!(answer.starts_with("HTTP/1.1 404") || answer.starts_with("HTTP/1.0 404"));
    let (status, _) = d.stop();
    assert!(status.success());
}

#[test]
fn lldp_and_dcbx_show_in_json_tables_and_metrics() {
    // Ethernet4 does not run LLDP.
    let d = Daemon::start_with("[lldp]\nenabled = true\n");
    let text = std::fs::read_to_string(&d.config).unwrap().replace(
        "[port.Ethernet4]\n",
        "[port.Ethernet4]\nlldp_admin_status = \"disabled\"\n",
    );
    std::fs::write(&d.config, text).unwrap();
    // A reload (SIGHUP) takes the new admin status.
    let pid = d.child.as_ref().unwrap().id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    let end = Instant::now() + DEADLINE;
    let view = loop {
        let view = d.json(&["show", "lldp", "neighbors"]);
        if view["ports"][1]["admin_status"] == "disabled"
            && view["ports"][0]["tx_frames"].as_u64() >= Some(2)
        {
            break view;
        }
        assert!(Instant::now() < end, "{view:#}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(view["system_name"], "tooling");
    assert_eq!(view["neighbors"], serde_json::json!([]));
    assert_eq!(view["ports"][0]["port"], "Ethernet0");
    assert_eq!(view["ports"][0]["admin_status"], "rx_and_tx");
    assert_eq!(view["ports"][0]["tx_inject_refused"], 0);
    // Turned off by the reload: one shutdown LLDPDU after the ones before.
    let off = view["ports"][1]["tx_frames"].as_u64().unwrap();
    assert!(off >= 2, "{view:#}");
    let table = d.ok(&["show", "lldp", "table"]);
    assert!(table.starts_with("Capability codes:"), "{table}");
    assert!(table.contains("LocalPort"), "{table}");
    assert!(table.contains("Total entries displayed:  0"), "{table}");

    let rows = d.json(&["show", "dcbx"]);
    assert_eq!(ports(&rows), ["Ethernet0", "Ethernet4"]);
    assert_eq!(rows[0]["status"], "no-neighbour");
    assert_eq!(rows[0]["local"]["pfc"]["enable"], "3,4");
    assert_eq!(rows[0]["local"]["pfc"]["enable_bitmap"], 0b1_1000);
    assert_eq!(rows[0]["local"]["pfc"]["willing"], false);
    assert_eq!(
        rows[0]["local"]["app"][0],
        serde_json::json!({"selector": 3, "protocol": 4791, "priority": 3})
    );
    assert_eq!(rows[0]["peer"], Value::Null);
    let one = d.json(&["show", "dcbx", "Ethernet4"]);
    assert_eq!(ports(&one), ["Ethernet4"]);
    let table = d.ok(&["show", "dcbx"]);
    let line = table.lines().find(|l| l.starts_with("Ethernet0")).unwrap();
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(
        cells,
        ["Ethernet0", "no-neighbour", "-", "3,4", "-", "-", "3", "-"],
        "{table}"
    );
    let detail = d.ok(&["show", "dcbx", "Ethernet0"]);
    for want in [
        "Port: Ethernet0  (lldp_admin_status rx_and_tx)",
        "Neighbor: none",
        "PFC enable",
        "udp:4791=3",
        "Verdict: no-neighbour",
    ] {
        assert!(detail.contains(want), "{want:?} in\n{detail}");
    }
    let bad = d.run(&["show", "dcbx", "Ethernet9"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("Ethernet9: no such port"));

    let answer = http_get(&d.metrics, "/metrics");
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(
        body.contains("headroom_dcbx_verdict{port=\"Ethernet0\",status=\"no-neighbour\"} 1"),
        "{body}"
    );
    assert!(body.contains("headroom_dcbx_verdict{port=\"Ethernet0\",status=\"mismatch\"} 0"));
    assert!(body.contains("headroom_dcbx_mismatch{port=\"Ethernet0\"} 0"));
    assert!(body.contains("headroom_lldp_neighbors{port=\"Ethernet0\"} 0"));
    assert!(
        body.contains("headroom_lldp_rx_errors_total{port=\"Ethernet0\",reason=\"truncated\"} 0")
    );
    check_with_promtool(body, d.dir.path());
    let (status, _) = d.stop();
    assert!(status.success());
}

fn check_with_promtool(body: &str, dir: &Path) {
    let file = dir.join("metrics.txt");
    std::fs::write(&file, body).unwrap();
    let out = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap_or_else(|e| {
            panic!("promtool is needed ({e}): apt-get install prometheus (scripts/test.sh installs it)")
        });
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn commands_fail_clearly_without_a_switch() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_headroom"))
        .args(["show", "ports", "--socket"])
        .arg(dir.path().join("none.sock"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("error: cannot reach the switch at "),
        "{err}"
    );
}

#[test]
fn output_into_a_closed_pipe_ends_quietly() {
    let d = Daemon::start();
    for args in [
        &["show", "queue", "counters"][..],
        &["top", "--once", "--interval", "0.1"],
    ] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_headroom"))
            .args(args)
            .arg("--socket")
            .arg(&d.socket)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The reader goes away before the answer is printed (`headroom show … | head -0`).
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(out.status.code(), Some(141), "{args:?}: as a SIGPIPE death");
    }
    let (status, _) = d.stop();
    assert!(status.success());
}
