//! Metrics where users look for them: the lab's exporter listens on 127.0.0.1 of the namespace
//! `headroom lab` runs in (not the switch namespace), on a port of its own when the default is
//! taken, printed at start; `--monitor` runs a real Prometheus whose query API returns `up == 1`
//! and the PFC counter `headroom show pfc counters --json --lab P` shows.

mod common;

use common::lab_config::{host_mac, port_name, HOST_DEVICE};
use common::{eventually, pfc_frame, require, run_ok, Lab, RawSocket, HEADROOM};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut r = String::new();
    s.read_to_string(&mut r).ok()?;
    r.starts_with("HTTP/1.")
        .then(|| r.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()))
        .flatten()
}

/// The address after `marker` on a line of `text` (`... http://127.0.0.1:9464/metrics`).
fn address_after(text: &str, marker: &str) -> SocketAddr {
    let line = text
        .lines()
        .find(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("no line with {marker:?} in:\n{text}"));
    let rest = &line[line.find(marker).unwrap() + marker.len()..];
    let addr: String = rest
        .trim_start_matches("http://")
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect();
    addr.parse().unwrap_or_else(|e| panic!("{addr:?}: {e}"))
}

/// One instant-vector query: the value of its only series, if exactly one is returned.
fn query_one(prometheus: SocketAddr, query: &str) -> Option<f64> {
    let encoded: String = query
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let body = http_get(prometheus, &format!("/api/v1/query?query={encoded}"))?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let result = v["data"]["result"].as_array()?;
    if result.len() != 1 {
        return None;
    }
    result[0]["value"][1].as_str()?.parse().ok()
}

#[test]
fn exporter_listens_where_the_lab_was_started_and_prometheus_scrapes_it() {
    require(&["prometheus"]);
    let lab = Lab::up(2, "1G");
    // Someone else has the default port: the lab takes another and says which.
    let occupied = TcpListener::bind("127.0.0.1:9464").ok();
    let mut switch = lab.start_switch_args(&["--monitor"]);
    let out = switch.stdout();
    let metrics = address_after(&out, "Prometheus metrics of the switch: curl ");
    let prometheus = address_after(&out, "(scraping every 1s): ");
    if occupied.is_some() {
        assert_ne!(metrics.port(), 9464, "{out}");
    }
    // From this (the root) namespace, where the lab was started.
    let page = http_get(metrics, "/metrics").unwrap_or_else(|| {
        panic!(
            "no metrics at {metrics} from the namespace the lab runs in:\n{out}\n{}",
            switch.stderr()
        )
    });
    assert!(page.contains("\nheadroom_up 1\n"), "{page}");
    assert!(
        eventually(Duration::from_secs(30), || query_one(
            prometheus,
            "up{job=\"headroom\"}"
        ) == Some(1.0)),
        "Prometheus at {prometheus} never saw the switch up"
    );

    // PFC XOFF on priority 3 from host 0: the switch counts them on Ethernet0.
    let sent = 7u64;
    let socket = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    for _ in 0..sent {
        socket
            .send(&pfc_frame(host_mac(0), 1 << 3, [0, 0, 0, 100, 0, 0, 0, 0]))
            .expect("sending PFC");
    }
    let show = || -> serde_json::Value {
        let o = run_ok(Command::new(HEADROOM).args([
            "show",
            "pfc",
            "counters",
            "--json",
            "--lab",
            lab.prefix(),
        ]));
        serde_json::from_slice(&o.stdout).expect("show pfc counters --json")
    };
    assert!(
        eventually(Duration::from_secs(10), || show()[0]["rx"][3] == sent),
        "the switch did not count {sent} PFC frames: {}",
        show()
    );
    let rows = show();
    assert_eq!(rows[0]["port"], port_name(0));
    let shown = rows[0]["rx"][3].as_u64().unwrap();
    assert_eq!(shown, sent);
    let series = format!(
        "headroom_pfc_rx_frames_total{{port=\"{}\",priority=\"3\",lab=\"{}\"}}",
        port_name(0),
        lab.prefix()
    );
    assert!(
        eventually(Duration::from_secs(30), || query_one(prometheus, &series)
            == Some(shown as f64)),
        "Prometheus's {series} never reached {shown} (show pfc counters): last {:?}",
        query_one(prometheus, &series)
    );

    // Prometheus stops with the switch.
    let state: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(format!("/run/headroom/{}-lab.json", lab.prefix())).unwrap(),
    )
    .unwrap();
    let pid = state["prometheus_pid"].as_u64().unwrap();
    assert!(switch.is_running());
    switch.stop();
    assert!(
        eventually(Duration::from_secs(10), || !std::path::Path::new(&format!(
            "/proc/{pid}"
        ))
        .exists()),
        "Prometheus (pid {pid}) outlived the switch"
    );
    assert!(
        !std::path::Path::new(&format!("/run/headroom/{}-lab.json", lab.prefix())).exists(),
        "the lab's state file outlived its switch"
    );
    drop(occupied);
}

#[test]
fn the_lab_names_the_package_of_each_missing_tool_and_runs_anyway() {
    require(&[]);
    let lab = Lab::up(2, "1G");
    // A PATH with `ip` only: ping, iperf3, tcpdump, nstat and tshark are "missing".
    let bin = tempfile::tempdir().unwrap();
    let ip = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("ip");
    std::os::unix::fs::symlink(ip, bin.path().join("ip")).unwrap();
    let o = run_ok(
        Command::new(HEADROOM)
            .args([
                "lab",
                "up",
                "--no-switch",
                "--hosts",
                "2",
                "--prefix",
                lab.prefix(),
            ])
            .env("PATH", bin.path()),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    for (tool, package) in [
        ("ping", "iputils-ping"),
        ("iperf3", "iperf3"),
        ("tcpdump", "tcpdump"),
        ("nstat", "iproute2"),
        ("tshark", "tshark"),
    ] {
        assert!(
            out.contains(&format!("note: {tool}: not found — apt install {package}")),
            "{out}"
        );
    }
    // With the tools on the PATH, no note.
    let o = run_ok(Command::new(HEADROOM).args([
        "lab",
        "up",
        "--no-switch",
        "--hosts",
        "2",
        "--prefix",
        lab.prefix(),
    ]));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!out.contains("not found"), "{out}");
}
