//! The operator commands of the real binary (`headroom show|clear|set|config|capture|top -s
//! <socket>`) against the real switch on a real lab (AF_PACKET on veth pairs, host namespaces):
//! every `--json` answer is parsed and checked against what the test sent from raw sockets,
//! exactly wherever the path is deterministic.
//!
//! The hosts of a lab are silent on their own (permanent neighbours, no IPv6; checked: a fresh
//! switch reads 0 everywhere), and every frame here comes from a raw packet socket, so each
//! counter has one exact expected value. Classification (SONiC's AZURE maps, trust DSCP):
//! DSCP 3 → TC 3 → lossless PG 3, queue 3; DSCP 4 → PG 4, queue 4; DSCP 0 → TC 1 → lossy PG 0,
//! queue 1; a non-IP frame (the hosts' announcements) → TC 0 → PG 0, queue 0.
//!
//! Watermarks and buffer use are checked against the values the generated configuration
//! implies (`show config --json`'s `derived`, i.e. `headroom check`): cells of 256 bytes, a
//! frame's cells go to the PG's reserved buffer first and to the shared pool beyond it, then to
//! headroom past the XOFF point (`docs/buffer-model.md`).

mod common;

use common::lab_config::{host_ipv4, host_mac, HOST_DEVICE, RUN_DIR};
use common::{eventually, pfc_frame, test_frame, Background, Lab, RawSocket, HEADROOM};
use headroom_afpacket::lab::NetnsGuard;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// Slow enough that a raw socket congests it; fast enough that a backlog drains at once.
const LAB_SPEED: &str = "100M";
const LAB_SPEED_BPS: u64 = 100_000_000;
/// How long a condition that should hold "at once" may take to hold.
const DEADLINE: Duration = Duration::from_secs(20);
const UDP_PORT: u16 = 9000;
const ETH_P_IP: u16 = 0x0800;
/// Lossless (PFC) traffic classes with SONiC's maps: DSCP 3 and 4 → priority, PG and queue 3, 4.
const DSCP_LOSSLESS_3: u8 = 3;
const DSCP_LOSSLESS_4: u8 = 4;
/// DSCP 0 → TC 1 → lossy PG 0, queue 1.
const DSCP_LOSSY: u8 = 0;
const QUEUE_LOSSY: usize = 1;
/// Queue and PG of non-IP frames (default priority 0 → TC 0).
const QUEUE_NON_IP: usize = 0;
/// The length of a host's announcement (`Lab::announce`).
const ANNOUNCE_BYTES: u64 = 60;
/// Quanta of a test XOFF: 10000 × 512 bit times at 100 Mb/s = exactly 51.2 ms (802.1Qbb
/// 36.1.3.3), below the watchdog's 200 ms detection time.
const TEST_QUANTA: u16 = 10_000;
const TEST_PAUSE_US: u64 = TEST_QUANTA as u64 * 512 * 1_000_000 / LAB_SPEED_BPS;

/// Eight zero counters (one per priority, PG or queue).
const ZEROS: [u64; 8] = [0; 8];

/// `headroom <command> -s <the lab switch's control socket>`.
#[derive(Debug)]
struct Ctl {
    socket: PathBuf,
}

impl Ctl {
    fn for_lab(lab: &Lab) -> Self {
        // `runtime.control_socket` defaults to /run/headroom/<switch.name>.sock.
        Self {
            socket: Path::new(RUN_DIR).join(format!("{}.sock", lab.spec.switch_name())),
        }
    }

    /// Where `config save` writes snapshots.
    fn snapshots_dir(&self) -> PathBuf {
        PathBuf::from(format!("{}.snapshots", self.socket.display()))
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(HEADROOM)
            .args(args)
            .arg("-s")
            .arg(&self.socket)
            .output()
            .unwrap_or_else(|e| panic!("cannot run headroom {args:?}: {e}"))
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "headroom {args:?} failed ({}):\nstdout: {}\nstderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("UTF-8 output")
    }

    /// `headroom <args> --json`, parsed.
    fn json(&self, args: &[&str]) -> Value {
        let mut with = args.to_vec();
        with.push("--json");
        let text = self.ok(&with);
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("headroom {args:?} --json: {e}\n{text}"))
    }

    /// Polls `headroom <args> --json` until `done` holds; fails with the last answer after
    /// [`DEADLINE`].
    fn wait_json(&self, args: &[&str], what: &str, done: impl Fn(&Value) -> bool) -> Value {
        let mut last = Value::Null;
        let held = eventually(DEADLINE, || {
            last = self.json(args);
            done(&last)
        });
        assert!(
            held,
            "{what}: not within {DEADLINE:?}; last `headroom {args:?} --json`:\n{last:#}"
        );
        last
    }

    fn port(&self, port: &str) -> Value {
        row(&self.json(&["show", "ports"]), "port", port).clone()
    }

    fn pfc(&self, port: &str) -> Value {
        row(&self.json(&["show", "pfc", "counters"]), "port", port).clone()
    }

    /// Waits until `port` counted `frames` received frames.
    fn wait_rx(&self, port: &str, frames: u64) {
        self.wait_json(
            &["show", "ports"],
            &format!("{port} receiving {frames} frames"),
            |v| row(v, "port", port)["rx_frames"] == frames,
        );
    }

    /// Waits until `port` counted `frames` sent frames.
    fn wait_tx(&self, port: &str, frames: u64) {
        self.wait_json(
            &["show", "ports"],
            &format!("{port} sending {frames} frames"),
            |v| row(v, "port", port)["tx_frames"] == frames,
        );
    }
}

/// Whatever way the test ends, the control socket (left behind when a failing test kills the
/// switch) and the configuration snapshots (`headroom lab down` knows neither) go with it.
impl Drop for Ctl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(self.snapshots_dir());
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// The element of a JSON array whose `key` is `value`.
fn row<'a>(rows: &'a Value, key: &str, value: &str) -> &'a Value {
    rows.as_array()
        .unwrap_or_else(|| panic!("not an array: {rows:#}"))
        .iter()
        .find(|r| r[key] == value)
        .unwrap_or_else(|| panic!("no {key} = {value} in {rows:#}"))
}

/// The row of queue `queue` of `port` in `show queue counters` / `show ecn`.
fn queue_row<'a>(rows: &'a Value, port: &str, queue: usize) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["port"] == port && r["queue"] == queue)
        .unwrap_or_else(|| panic!("no queue {port}:{queue} in {rows:#}"))
}

/// The watermark row of `port` (`show queue|priority-group watermark`).
fn marks(rows: &Value, port: &str) -> [u64; 8] {
    serde_json::from_value(row(rows, "port", port)["bytes"].clone()).expect("eight byte counts")
}

/// Eight values, `value` at `index`, 0 elsewhere.
fn only(index: usize, value: u64) -> [u64; 8] {
    let mut a = [0; 8];
    a[index] = value;
    a
}

/// A lossless PG's profile and its pool, as `headroom check` derives them.
#[derive(Clone, Copy, Debug)]
struct LosslessProfile {
    cell_bytes: u64,
    reserved_cells: u64,
    /// The shared limit `headroom check` prints: for a dynamic threshold, how far the PG fills
    /// the shared pool when it is the only congested one, α/(1+α) of the pool.
    shared_limit_bytes: u64,
    headroom_cells: u64,
    /// Shared size of the PG's pool (size minus what is carved out).
    pool_shared_bytes: u64,
}

impl LosslessProfile {
    /// Reads PG `pg` of `port` and the ingress lossless pool from `show config --json`.
    fn read(ctl: &Ctl, port: &str, pg: usize) -> Self {
        let config = ctl.json(&["show", "config"]);
        let derived = config["derived"].as_str().expect("derived text");
        // The "bytes (cells)" amounts of a table row.
        let amounts = |line: &str| -> Vec<(u64, u64)> {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            tokens
                .windows(2)
                .filter_map(|w| {
                    let cells = w[1].strip_prefix('(')?.strip_suffix(')')?.parse().ok()?;
                    Some((w[0].parse().ok()?, cells))
                })
                .collect()
        };
        let cell_bytes: u64 = derived
            .split_once("cells of ")
            .and_then(|(_, rest)| rest.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("no cell size in:\n{derived}"));
        let pool = derived
            .lines()
            .find(|l| l.starts_with("ingress_lossless_pool "))
            .unwrap_or_else(|| panic!("no ingress_lossless_pool in:\n{derived}"));
        // Size, reserved, private headroom, shared headroom pool, shared.
        let pool = amounts(pool);
        let pg_row = derived
            .split(&format!("\n{port}: "))
            .nth(1)
            .and_then(|section| {
                section.lines().find(|l| {
                    l.split_whitespace().next() == Some(&pg.to_string())
                        && l.contains("ingress_lossless_pool")
                })
            })
            .unwrap_or_else(|| panic!("no lossless PG {pg} of {port} in:\n{derived}"));
        // Reserved, shared limit, headroom, XOFF point, XON point, drop point.
        let pg_amounts = amounts(pg_row);
        assert_eq!(pool.len(), 5, "{derived}");
        assert_eq!(pg_amounts.len(), 6, "{pg_row}");
        let profile = Self {
            cell_bytes,
            reserved_cells: pg_amounts[0].1,
            shared_limit_bytes: pg_amounts[1].0,
            headroom_cells: pg_amounts[2].1,
            pool_shared_bytes: pool[4].0,
        };
        assert_eq!(
            pool[4].1 * cell_bytes,
            profile.pool_shared_bytes,
            "whole cells"
        );
        profile
    }

    fn cells(&self, frame_bytes: u64) -> u64 {
        frame_bytes.div_ceil(self.cell_bytes)
    }

    /// The PG's dynamic threshold `dynamic_th` (α = 2^n of the pool's free shared space), found
    /// back from the limit `headroom check` prints, α/(1+α) of the pool's shared size.
    fn dynamic_th(&self) -> i32 {
        let shared = self.pool_shared_bytes;
        (-8..=7)
            .find(|&n: &i32| {
                let alpha_share = if n >= 0 {
                    shared * (1 << n) / ((1 << n) + 1)
                } else {
                    shared / ((1 << n.unsigned_abs()) + 1)
                };
                alpha_share == self.shared_limit_bytes
            })
            .unwrap_or_else(|| panic!("the shared limit of {self:?} is no dynamic threshold"))
    }

    /// (reserved, shared, headroom, dropped frames) of the PG after `frames` frames of
    /// `cells` cells each arrived with nothing leaving, the PG alone in its pool: the buffer
    /// model of `crates/core/src/buffer.rs` (`docs/buffer-model.md`) walked frame by frame.
    fn fill(&self, frames: u64, cells: u64) -> (u64, u64, u64, u64) {
        let dynamic_th = self.dynamic_th();
        let pool_shared_cells = self.pool_shared_bytes / self.cell_bytes;
        let (mut reserved, mut shared, mut headroom, mut dropped) = (0u64, 0u64, 0u64, 0u64);
        for _ in 0..frames {
            let from_reserved = cells.min(self.reserved_cells - reserved);
            let rest = cells - from_reserved;
            let free = pool_shared_cells - shared;
            let limit = if dynamic_th >= 0 {
                free << dynamic_th
            } else {
                free >> dynamic_th.unsigned_abs()
            };
            if rest == 0 {
                reserved += from_reserved;
            } else if shared < limit && rest <= free {
                reserved += from_reserved;
                shared += rest;
            } else if headroom + rest <= self.headroom_cells {
                reserved += from_reserved;
                headroom += rest;
            } else {
                dropped += 1;
            }
        }
        (reserved, shared, headroom, dropped)
    }
}

/// A UDP socket bound in host `i`, so that the test traffic is consumed rather than answered
/// with ICMP port unreachable (which would be one more frame through the switch).
fn udp_sink(lab: &Lab, i: usize) -> std::net::UdpSocket {
    let namespace = lab.host_ns(i);
    let address = std::net::SocketAddr::from((host_ipv4(i), UDP_PORT));
    std::thread::spawn(move || {
        let _inside = NetnsGuard::enter(&namespace).expect("namespace");
        std::net::UdpSocket::bind(address).expect("bind the UDP sink")
    })
    .join()
    .expect("UDP sink thread")
}

/// An IPv4/UDP frame of exactly `frame_bytes` bytes from host `from` to host `to` with `dscp`,
/// carrying `seq` in the first four bytes of its payload.
fn udp_frame(from: usize, to: usize, dscp: u8, frame_bytes: usize, seq: u32) -> Vec<u8> {
    const HEADERS: usize = 14 + 20 + 8;
    assert!((HEADERS + 4..=1514).contains(&frame_bytes));
    let mut ip = etherparse::Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::UDP,
        host_ipv4(from).octets(),
        host_ipv4(to).octets(),
    )
    .expect("IPv4 header");
    ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).expect("dscp");
    let builder = etherparse::PacketBuilder::ethernet2(host_mac(from), host_mac(to))
        .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()))
        .udp(40_000 + u16::from(dscp), UDP_PORT);
    let mut payload = vec![0x5A; frame_bytes - HEADERS];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    let mut frame = Vec::with_capacity(frame_bytes);
    builder.write(&mut frame, &payload).expect("UDP frame");
    assert_eq!(frame.len(), frame_bytes);
    frame
}

/// What a host received of the test's UDP frames: (source host address, DSCP, length, seq).
fn parse_udp(frame: &[u8]) -> Option<(std::net::Ipv4Addr, u8, usize, u32)> {
    let packet = etherparse::SlicedPacket::from_ethernet(frame).ok()?;
    let Some(etherparse::NetSlice::Ipv4(ip)) = packet.net else {
        return None;
    };
    let Some(etherparse::TransportSlice::Udp(udp)) = packet.transport else {
        return None;
    };
    if udp.destination_port() != UDP_PORT {
        return None;
    }
    let seq = u32::from_be_bytes(udp.payload().get(..4)?.try_into().ok()?);
    Some((
        ip.header().source_addr(),
        ip.header().dcp().value(),
        frame.len(),
        seq,
    ))
}

/// A receiving packet socket for IPv4 on host `i`, with room for every burst of a test.
fn ip_receiver(lab: &Lab, i: usize) -> RawSocket {
    let socket = RawSocket::open(&lab.host_ns(i), HOST_DEVICE, ETH_P_IP);
    socket.set_receive_buffer(16 << 20);
    socket
}

/// Receives until `count` test UDP frames arrived (anything else is kept too, and fails the
/// caller's comparison), at most [`DEADLINE`].
fn receive_udp(socket: &RawSocket, count: usize) -> Vec<(std::net::Ipv4Addr, u8, usize, u32)> {
    let deadline = std::time::Instant::now() + DEADLINE;
    let mut got = Vec::new();
    while got.len() < count {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let Some(frame) = socket.recv(left) else {
            break;
        };
        got.push(
            parse_udp(&frame).unwrap_or_else(|| {
                panic!("an unexpected IPv4 frame reached the host: {frame:02x?}")
            }),
        );
    }
    got
}

/// A PFC frame from host `i` for `priority` with `quanta` (0: XON).
fn pfc(i: usize, priority: usize, quanta: u16) -> Vec<u8> {
    let mut times = [0; 8];
    times[priority] = quanta;
    pfc_frame(host_mac(i), 1 << priority, times)
}

/// A 60-byte IEEE 802.3x PAUSE frame (802.3 Annex 31B) from host `i` with `quanta`.
fn pause_802_3x(i: usize, quanta: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&host_mac(i));
    f[12..14].copy_from_slice(&0x8808u16.to_be_bytes());
    f[14..16].copy_from_slice(&0x0001u16.to_be_bytes());
    f[16..18].copy_from_slice(&quanta.to_be_bytes());
    f
}

/// Lab of two hosts at [`LAB_SPEED`], switch running, both hosts announced (learned) and their
/// announcements forwarded: each port received and sent one 60-byte frame on queue 0.
fn lab_with_switch() -> (Lab, common::Switch, Ctl) {
    common::require(&[]);
    let lab = Lab::up(2, LAB_SPEED);
    let switch = lab.start_switch();
    let ctl = Ctl::for_lab(&lab);
    // A fresh switch on a silent lab: nothing counted.
    for p in ["Ethernet0", "Ethernet1"] {
        let port = ctl.port(p);
        assert_eq!(
            (port["rx_frames"].as_u64(), port["tx_frames"].as_u64()),
            (Some(0), Some(0)),
            "the hosts of a lab are not silent: {port:#}"
        );
    }
    for i in 0..2 {
        lab.announce(i);
        // One at a time, so that both are learned in order and neither overtakes the other.
        ctl.wait_tx(&format!("Ethernet{}", 1 - i), 1);
    }
    (lab, switch, ctl)
}

/// Sends every frame from host `i`; a full socket buffer is waited out, never skipped.
fn send_all(socket: &RawSocket, frames: &[Vec<u8>]) {
    for frame in frames {
        let sent = eventually(DEADLINE, || socket.send(frame).is_ok());
        assert!(sent, "host socket refused a frame for {DEADLINE:?}");
    }
}

/// Check 1: every `show … --json` against traffic of known counts, sizes and DSCPs.
///
/// h0 sends N lossless frames (DSCP 3, 1000 bytes) and M lossy ones (DSCP 0, 500 bytes) to h1,
/// and one frame to its own address (dropped as `same_port`); h1 sends K PFC XON frames and one
/// XOFF of 10000 quanta for priority 3.
#[test]
fn show_json_matches_the_traffic_sent_exactly() {
    const N: u64 = 20;
    const M: u64 = 30;
    const K: u64 = 4;
    const LOSSLESS_BYTES: u64 = 1000;
    const LOSSY_BYTES: u64 = 500;
    const SAME_PORT_BYTES: u64 = 100;
    let (lab, switch, ctl) = lab_with_switch();
    let _sink = udp_sink(&lab, 1);
    let at_h1 = ip_receiver(&lab, 1);
    let h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let h1 = RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0);

    // Interleaved, numbered: h1 must get them all, once, in order per class.
    let mut frames = Vec::new();
    let (mut n, mut m) = (0, 0);
    while n < N || m < M {
        if n < N {
            frames.push(udp_frame(
                0,
                1,
                DSCP_LOSSLESS_3,
                LOSSLESS_BYTES as usize,
                n as u32,
            ));
            n += 1;
        }
        if m < M {
            frames.push(udp_frame(
                0,
                1,
                DSCP_LOSSY,
                LOSSY_BYTES as usize,
                1000 + m as u32,
            ));
            m += 1;
        }
    }
    frames.push(test_frame(
        host_mac(0),
        host_mac(0),
        0x5A3E,
        SAME_PORT_BYTES as usize,
    ));
    send_all(&h0, &frames);
    ctl.wait_tx("Ethernet1", 1 + N + M);
    let got = receive_udp(&at_h1, (N + M) as usize);
    let lossless: Vec<u32> = got
        .iter()
        .filter(|f| f.1 == DSCP_LOSSLESS_3)
        .map(|f| f.3)
        .collect();
    let lossy: Vec<u32> = got
        .iter()
        .filter(|f| f.1 == DSCP_LOSSY)
        .map(|f| f.3)
        .collect();
    assert_eq!(lossless, (0..N as u32).collect::<Vec<_>>(), "{got:?}");
    assert_eq!(
        lossy,
        (1000..1000 + M as u32).collect::<Vec<_>>(),
        "{got:?}"
    );
    for f in &got {
        let bytes = if f.1 == DSCP_LOSSY {
            LOSSY_BYTES
        } else {
            LOSSLESS_BYTES
        };
        assert_eq!((f.0, f.2), (host_ipv4(0), bytes as usize), "{f:?}");
    }

    // PFC from h1 for priority 3 (nothing queued for it now): K XON, then one XOFF whose whole
    // pause elapses.
    for _ in 0..K {
        send_all(&h1, &[pfc(1, 3, 0)]);
    }
    send_all(&h1, &[pfc(1, 3, TEST_QUANTA)]);
    ctl.wait_json(
        &["show", "pfc", "counters"],
        "the XOFF's whole pause counted on Ethernet1",
        |v| row(v, "port", "Ethernet1")["rx_paused_us"][3] == TEST_PAUSE_US,
    );

    // show ports: every frame and byte, drops by reason.
    let ports = ctl.json(&["show", "ports"]);
    let projection = |p: &str| {
        let r = row(&ports, "port", p);
        json!({
            "device": r["device"], "speed_mbps": r["speed_mbps"], "tx_enabled": r["tx_enabled"],
            "rx_frames": r["rx_frames"], "rx_bytes": r["rx_bytes"],
            "tx_frames": r["tx_frames"], "tx_bytes": r["tx_bytes"], "drops": r["drops"],
            "backend_rx_missed": r["backend_rx_missed"], "backend_tx_failed": r["backend_tx_failed"],
        })
    };
    let data_bytes = N * LOSSLESS_BYTES + M * LOSSY_BYTES;
    assert_eq!(
        projection("Ethernet0"),
        json!({
            "device": "sw-p0", "speed_mbps": 100, "tx_enabled": true,
            "rx_frames": 1 + N + M + 1, "rx_bytes": ANNOUNCE_BYTES + data_bytes + SAME_PORT_BYTES,
            "tx_frames": 1, "tx_bytes": ANNOUNCE_BYTES, "drops": {"same_port": 1},
            "backend_rx_missed": 0, "backend_tx_failed": 0,
        })
    );
    assert_eq!(
        projection("Ethernet1"),
        json!({
            "device": "sw-p1", "speed_mbps": 100, "tx_enabled": true,
            "rx_frames": 1 + K + 1, "rx_bytes": ANNOUNCE_BYTES + (K + 1) * 60,
            "tx_frames": 1 + N + M, "tx_bytes": ANNOUNCE_BYTES + data_bytes, "drops": {},
            "backend_rx_missed": 0, "backend_tx_failed": 0,
        })
    );
    // The link as the kernel of the switch's namespace reports it: the lab's veths are up.
    for port in ["Ethernet0", "Ethernet1"] {
        assert_eq!(row(&ports, "port", port)["link"], "up", "{ports:#}");
    }

    // show pfc counters: K + 1 frames for priority 3 received on Ethernet1, its pause time
    // exactly the XOFF's; nothing sent (no PG reached XOFF), nothing else received.
    let pfc_counters = ctl.json(&["show", "pfc", "counters"]);
    assert_eq!(
        *row(&pfc_counters, "port", "Ethernet1"),
        json!({"port": "Ethernet1", "rx": only(3, K + 1), "tx": ZEROS,
               "rx_paused_us": only(3, TEST_PAUSE_US), "pause_rx": 0})
    );
    assert_eq!(
        *row(&pfc_counters, "port", "Ethernet0"),
        json!({"port": "Ethernet0", "rx": ZEROS, "tx": ZEROS, "rx_paused_us": ZEROS,
               "pause_rx": 0})
    );

    // show queue counters and show ecn: per queue, exactly what left it; no drop, no mark
    // (the lossless queue never came near the ECN threshold of 100 KB).
    for what in [&["show", "queue", "counters"][..], &["show", "ecn"]] {
        let queues = ctl.json(what);
        assert_eq!(queues.as_array().unwrap().len(), 16, "{what:?}");
        for port in ["Ethernet0", "Ethernet1"] {
            for q in 0..8 {
                let r = queue_row(&queues, port, q);
                let (packets, bytes) = match (port, q) {
                    ("Ethernet1", 3) => (N, N * LOSSLESS_BYTES),
                    ("Ethernet1", QUEUE_LOSSY) => (M, M * LOSSY_BYTES),
                    (_, QUEUE_NON_IP) => (1, ANNOUNCE_BYTES),
                    _ => (0, 0),
                };
                assert_eq!(
                    (
                        &r["packets"],
                        &r["bytes"],
                        &r["drop_packets"],
                        &r["drop_bytes"],
                        &r["ecn_marked"]
                    ),
                    (
                        &json!(packets),
                        &json!(bytes),
                        &json!(0),
                        &json!(0),
                        &json!(0)
                    ),
                    "{what:?} {port}:{q}: {r:#}"
                );
                // A queue that sent nothing has no delay (a frame sent in the lcore iteration
                // that queued it waited 0 ns on the iteration's clock: no lower bound).
                if packets == 0 {
                    assert_eq!(r["mean_delay_ns"], 0, "{what:?} {port}:{q}: {r:#}");
                }
            }
        }
    }

    // show fdb: both hosts, where they are.
    let fdb = ctl.json(&["show", "fdb"]);
    let entries: Vec<(u64, &str, &str)> = fdb
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["vlan"].as_u64().unwrap(),
                e["mac"].as_str().unwrap(),
                e["port"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            (1, "02:68:68:00:00:01", "Ethernet0"),
            (1, "02:68:68:00:00:02", "Ethernet1")
        ],
        "{fdb:#}"
    );
    assert!(fdb
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["age_s"].as_u64().unwrap() < 60));

    // show pfc priority, show pfcwd config|stats: the generated configuration, and no storm.
    assert_eq!(
        ctl.json(&["show", "pfc", "priority"]),
        json!([{"port": "Ethernet0", "lossless": "3,4"}, {"port": "Ethernet1", "lossless": "3,4"}])
    );
    let wd_port = |p: &str| {
        json!({"port": p, "action": "drop", "detection_time_ms": 200,
               "restoration_time_ms": 200, "priorities": "3,4"})
    };
    assert_eq!(
        ctl.json(&["show", "pfcwd", "config"]),
        json!({"poll_interval_ms": 200, "big_red_switch": false,
               "ports": [wd_port("Ethernet0"), wd_port("Ethernet1")]})
    );
    let stats = ctl.json(&["show", "pfcwd", "stats"]);
    let queues: Vec<&str> = stats
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["queue"].as_str().unwrap())
        .collect();
    assert_eq!(
        queues,
        ["Ethernet0:3", "Ethernet0:4", "Ethernet1:3", "Ethernet1:4"]
    );
    for r in stats.as_array().unwrap() {
        assert_eq!(r["status"], "operational", "{r:#}");
        for (k, v) in r.as_object().unwrap() {
            if k != "queue" && k != "status" {
                assert_eq!(*v, 0, "{k} of {r:#}");
            }
        }
    }

    // show priority-group drop: no admission drop (same_port is a forwarding drop).
    assert_eq!(
        ctl.json(&["show", "priority-group", "drop"]),
        json!([{"port": "Ethernet0", "drops": ZEROS}, {"port": "Ethernet1", "drops": ZEROS}])
    );

    // Buffer watermarks: N lossless frames of 4 cells stay within PG 3's reserved buffer
    // (276 cells), so its shared watermark and the lossless pool's are exactly 0. Lossy PG 0 has
    // no reserved buffer: everything it held was shared, at least one 500-byte frame (2 cells)
    // and at most all of them; how many overlapped depends on the scheduler, not the switch.
    let profile = LosslessProfile::read(&ctl, "Ethernet0", 3);
    assert!(N * profile.cells(LOSSLESS_BYTES) <= profile.reserved_cells);
    let cell = profile.cell_bytes;
    let lossy_frame_bytes = profile.cells(LOSSY_BYTES) * cell;
    for persistent in [false, true] {
        let mut args = vec!["show", "priority-group", "watermark", "shared"];
        if persistent {
            args.push("--persistent");
        }
        let shared = ctl.json(&args);
        let e0 = marks(&shared, "Ethernet0");
        assert_eq!(e0[3], 0, "{shared:#}");
        assert!(
            (lossy_frame_bytes..=M * lossy_frame_bytes + cell).contains(&e0[0])
                && e0[0].is_multiple_of(cell),
            "{shared:#}"
        );
        assert_eq!(e0[1..3], [0, 0]);
        assert_eq!(e0[4..], [0; 4]);
        // Ethernet1 received one announcement (one cell, PG 0) and PFC frames (not buffered).
        assert_eq!(marks(&shared, "Ethernet1"), only(0, cell), "{shared:#}");
        args[3] = "headroom";
        let headroom = ctl.json(&args);
        for p in ["Ethernet0", "Ethernet1"] {
            assert_eq!(marks(&headroom, p), ZEROS, "{headroom:#}");
        }
        let mut args = vec!["show", "buffer-pool", "watermark"];
        if persistent {
            args.push("--persistent");
        }
        let pools = ctl.json(&args);
        assert_eq!(
            *row(&pools, "pool", "ingress_lossless_pool"),
            json!({"pool": "ingress_lossless_pool", "shared_bytes": 0, "headroom_bytes": 0})
        );
        let lossy = row(&pools, "pool", "ingress_lossy_pool");
        let lossy_shared = lossy["shared_bytes"].as_u64().unwrap();
        assert!(
            lossy_shared >= e0[0] && lossy_shared <= e0[0] + cell && lossy["headroom_bytes"] == 0,
            "{pools:#}"
        );
    }

    // The switch's own final report agrees with what the socket said.
    let report = switch.stop();
    let (p0, p1) = (report.port(0), report.port(1));
    assert_eq!(
        (p0.rx_frames, p0.tx_frames, p1.rx_frames, p1.tx_frames),
        (1 + N + M + 1, 1, 1 + K + 1, 1 + N + M),
        "{}",
        report.text
    );
    assert_eq!(p1.pfc_rx, only(3, K + 1));
}

/// Check 2: a backlog built with TX disabled shows in the queue, PG and pool watermarks exactly
/// as the profile implies; `tx enable` delivers every frame; `clear watermarks` zeroes the
/// user view while the persistent view keeps the maximum.
#[test]
fn tx_disabled_backlog_shows_in_watermarks_exactly_and_drains_on_enable() {
    /// Frames of the backlog: more cells than PG 3's reserved buffer holds, far below XOFF.
    const N: u64 = 90;
    const FRAME_BYTES: u64 = 1000;
    let (lab, switch, ctl) = lab_with_switch();
    let _sink = udp_sink(&lab, 1);
    let at_h1 = ip_receiver(&lab, 1);
    let h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let profile = LosslessProfile::read(&ctl, "Ethernet0", 3);
    let cell = profile.cell_bytes;
    let frame_cells = profile.cells(FRAME_BYTES);
    // What the backlog of n frames must read: queue 3 of Ethernet1 holds every cell; PG 3 of
    // Ethernet0 holds the same, reserved first, the rest shared.
    let expected = |n: u64| {
        let (reserved, shared, headroom, dropped) = profile.fill(n, frame_cells);
        assert_eq!(
            (headroom, dropped),
            (0, 0),
            "the backlog must stay below XOFF"
        );
        assert_eq!(
            reserved, profile.reserved_cells,
            "the backlog must go beyond reserved"
        );
        ((reserved + shared) * cell, shared * cell)
    };
    let (queue_bytes, shared_bytes) = expected(N);
    eprintln!(
        "backlog of {N} frames: queue {queue_bytes} B, PG shared {shared_bytes} B ({profile:?})"
    );

    // Start from zero in both views (the announcements left a cell in PG 0 and queue 0).
    assert_eq!(
        ctl.ok(&["clear", "watermarks", "--persistent"]),
        "cleared\n"
    );
    let check_views = |persistent_queue: u64, persistent_shared: u64, user: Option<(u64, u64)>| {
        for persistent in [false, true] {
            let (q, s) = if persistent {
                (persistent_queue, persistent_shared)
            } else {
                user.unwrap_or((0, 0))
            };
            let flag: &[&str] = if persistent { &["--persistent"] } else { &[] };
            let view = if persistent { "persistent" } else { "user" };
            let queues = ctl.json(&[&["show", "queue", "watermark"][..], flag].concat());
            assert_eq!(
                marks(&queues, "Ethernet1"),
                only(3, q),
                "{view}: {queues:#}"
            );
            assert_eq!(marks(&queues, "Ethernet0"), ZEROS, "{view}: {queues:#}");
            let shared =
                ctl.json(&[&["show", "priority-group", "watermark", "shared"][..], flag].concat());
            assert_eq!(
                marks(&shared, "Ethernet0"),
                only(3, s),
                "{view}: {shared:#}"
            );
            assert_eq!(marks(&shared, "Ethernet1"), ZEROS, "{view}: {shared:#}");
            let headroom = ctl.json(
                &[
                    &["show", "priority-group", "watermark", "headroom"][..],
                    flag,
                ]
                .concat(),
            );
            for p in ["Ethernet0", "Ethernet1"] {
                assert_eq!(marks(&headroom, p), ZEROS, "{view}: {headroom:#}");
            }
            let pools = ctl.json(&[&["show", "buffer-pool", "watermark"][..], flag].concat());
            assert_eq!(
                *row(&pools, "pool", "ingress_lossless_pool"),
                json!({"pool": "ingress_lossless_pool", "shared_bytes": s, "headroom_bytes": 0}),
                "{view}"
            );
            assert_eq!(
                *row(&pools, "pool", "ingress_lossy_pool"),
                json!({"pool": "ingress_lossy_pool", "shared_bytes": 0, "headroom_bytes": 0}),
                "{view}"
            );
        }
    };
    check_views(0, 0, None);

    assert_eq!(
        ctl.ok(&["set", "port", "Ethernet1", "tx", "disable"]),
        "port Ethernet1 tx disabled\n"
    );
    assert_eq!(ctl.port("Ethernet1")["tx_enabled"], false);
    let frames: Vec<Vec<u8>> = (0..=N as u32)
        .map(|seq| udp_frame(0, 1, DSCP_LOSSLESS_3, FRAME_BYTES as usize, seq))
        .collect();
    send_all(&h0, &frames[..N as usize]);
    ctl.wait_rx("Ethernet0", 1 + N);
    ctl.wait_json(
        &["show", "queue", "watermark"],
        "the backlog's queue watermark",
        |v| marks(v, "Ethernet1")[3] == queue_bytes,
    );
    check_views(queue_bytes, shared_bytes, Some((queue_bytes, shared_bytes)));
    // Held: nothing left the queue, no PFC (below XOFF), nothing dropped.
    let held = queue_row(&ctl.json(&["show", "queue", "counters"]), "Ethernet1", 3).clone();
    assert_eq!(
        (&held["packets"], &held["drop_packets"]),
        (&json!(0), &json!(0)),
        "{held:#}"
    );
    assert_eq!(ctl.pfc("Ethernet0")["tx"], json!(ZEROS));
    // `top` shows the PG's occupancy now: exactly the backlog.
    let top = ctl.ok(&["top", "--once", "--interval", "0.2", "--view", "pfc"]);
    let used: Vec<&str> = top
        .lines()
        .skip_while(|l| !l.starts_with("Ethernet0"))
        .find(|l| l.trim_start().starts_with("PG used B"))
        .unwrap_or_else(|| panic!("no PG used row for Ethernet0:\n{top}"))
        .split_whitespace()
        .skip(3)
        .collect();
    let queue_text = queue_bytes.to_string();
    let with_separators = queue_text
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect::<Vec<_>>()
        .join(",");
    assert_eq!(
        used,
        ["0", "0", "0", with_separators.as_str(), "0", "0", "0", "0"],
        "{top}"
    );

    // A user clear while the backlog stands: the user view restarts at 0, the persistent one
    // keeps the maximum; the next admitted frame raises the user view to the occupancy then.
    assert_eq!(ctl.ok(&["clear", "watermarks"]), "cleared\n");
    check_views(queue_bytes, shared_bytes, None);
    send_all(&h0, &frames[N as usize..]);
    let (queue_bytes, shared_bytes) = expected(N + 1);
    ctl.wait_json(
        &["show", "queue", "watermark"],
        "one more frame on the backlog",
        |v| marks(v, "Ethernet1")[3] == queue_bytes,
    );
    check_views(queue_bytes, shared_bytes, Some((queue_bytes, shared_bytes)));

    // Release: h1 gets every frame, once, in order; the queue counted them.
    assert_eq!(
        ctl.ok(&["set", "port", "Ethernet1", "tx", "enable"]),
        "port Ethernet1 tx enabled\n"
    );
    let got = receive_udp(&at_h1, N as usize + 1);
    let expected_frames: Vec<_> = (0..=N as u32)
        .map(|seq| (host_ipv4(0), DSCP_LOSSLESS_3, FRAME_BYTES as usize, seq))
        .collect();
    assert_eq!(
        got, expected_frames,
        "h1 did not receive the backlog exactly"
    );
    let sent = ctl.wait_json(&["show", "queue", "counters"], "the backlog sent", |v| {
        queue_row(v, "Ethernet1", 3)["packets"] == N + 1
    });
    let q3 = queue_row(&sent, "Ethernet1", 3);
    assert_eq!(
        (&q3["bytes"], &q3["drop_packets"], &q3["ecn_marked"]),
        (&json!((N + 1) * FRAME_BYTES), &json!(0), &json!(0)),
        "{q3:#}"
    );
    assert_eq!(ctl.port("Ethernet1")["tx_enabled"], true);
    assert_eq!(ctl.pfc("Ethernet0")["tx"], json!(ZEROS));

    // Drained: a user clear reads 0 and stays 0; the persistent view keeps the maximum until
    // its own clear.
    assert_eq!(ctl.ok(&["clear", "watermarks"]), "cleared\n");
    check_views(queue_bytes, shared_bytes, None);
    assert_eq!(
        ctl.ok(&["clear", "watermarks", "--persistent"]),
        "cleared\n"
    );
    check_views(0, 0, None);
    let report = switch.stop();
    assert_eq!(report.port(1).tx_frames, 1 + N + 1, "{}", report.text);
    assert_eq!(report.port(0).drops_total, 0, "{}", report.text);
}

/// Every counter of every `--json` answer that `clear counters` covers.
fn assert_all_counters_zero(ctl: &Ctl) {
    let ports = ctl.json(&["show", "ports"]);
    for r in ports.as_array().unwrap() {
        for key in [
            "rx_frames",
            "rx_bytes",
            "tx_frames",
            "tx_bytes",
            "backend_rx_missed",
            "backend_tx_failed",
        ] {
            assert_eq!(r[key], 0, "{key} after clear: {r:#}");
        }
        assert_eq!(r["drops"], json!({}), "drops after clear: {r:#}");
    }
    for r in ctl.json(&["show", "pfc", "counters"]).as_array().unwrap() {
        assert_eq!(
            (&r["rx"], &r["tx"], &r["rx_paused_us"], &r["pause_rx"]),
            (&json!(ZEROS), &json!(ZEROS), &json!(ZEROS), &json!(0)),
            "PFC counters after clear: {r:#}"
        );
    }
    for what in [&["show", "queue", "counters"][..], &["show", "ecn"]] {
        for r in ctl.json(what).as_array().unwrap() {
            // depth_bytes is a level (bytes at the last dequeue), not a counter.
            for key in [
                "packets",
                "bytes",
                "drop_packets",
                "drop_bytes",
                "ecn_marked",
                "mean_delay_ns",
            ] {
                assert_eq!(r[key], 0, "{what:?} {key} after clear: {r:#}");
            }
        }
    }
    for r in ctl
        .json(&["show", "priority-group", "drop"])
        .as_array()
        .unwrap()
    {
        assert_eq!(r["drops"], json!(ZEROS), "PG drops after clear: {r:#}");
    }
}

/// Check 3: `clear counters` zeroes every counter as `--json` shows it; new traffic then reads
/// as exact deltas.
#[test]
fn clear_counters_reads_zero_then_exact_deltas() {
    let (lab, switch, ctl) = lab_with_switch();
    let _sink0 = udp_sink(&lab, 0);
    let _sink1 = udp_sink(&lab, 1);
    let h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let h1 = RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0);
    // Before the clear: traffic of every kind the counters cover, a drop, PFC and PAUSE in.
    let mut before: Vec<Vec<u8>> = (0..10)
        .map(|s| udp_frame(0, 1, DSCP_LOSSLESS_3, 800, s))
        .collect();
    before.extend((0..10).map(|s| udp_frame(0, 1, DSCP_LOSSY, 300, s)));
    before.push(test_frame(host_mac(0), host_mac(0), 1, 64));
    before.push(pfc(0, 4, 0));
    before.push(pause_802_3x(0, 0));
    send_all(&h0, &before);
    send_all(&h1, &[pfc(1, 3, TEST_QUANTA)]);
    ctl.wait_tx("Ethernet1", 1 + 20);
    ctl.wait_json(&["show", "pfc", "counters"], "PFC and PAUSE counted", |v| {
        let (e0, e1) = (row(v, "port", "Ethernet0"), row(v, "port", "Ethernet1"));
        e0["rx"][4] == 1 && e0["pause_rx"] == 1 && e1["rx_paused_us"][3] == TEST_PAUSE_US
    });
    assert_eq!(ctl.port("Ethernet0")["drops"], json!({"same_port": 1}));

    assert_eq!(ctl.ok(&["clear", "counters"]), "cleared\n");
    assert_all_counters_zero(&ctl);
    // The switch keeps totals: the final report still counts everything since start.

    // After: h1 sends N lossless frames of priority 4 and M lossy ones to h0, h0 two XON for
    // priority 4 and h1 one more same-port frame.
    const N: u64 = 7;
    const M: u64 = 5;
    let mut after: Vec<Vec<u8>> = (0..N as u32)
        .map(|s| udp_frame(1, 0, DSCP_LOSSLESS_4, 700, s))
        .collect();
    after.extend((0..M as u32).map(|s| udp_frame(1, 0, DSCP_LOSSY, 200, s)));
    after.push(test_frame(host_mac(1), host_mac(1), 2, 90));
    send_all(&h1, &after);
    send_all(&h0, &[pfc(0, 4, 0), pfc(0, 4, 0)]);
    ctl.wait_tx("Ethernet0", N + M);
    ctl.wait_rx("Ethernet0", 2);
    let ports = ctl.json(&["show", "ports"]);
    let delta = |p: &str| {
        let r = row(&ports, "port", p);
        json!([
            r["rx_frames"],
            r["rx_bytes"],
            r["tx_frames"],
            r["tx_bytes"],
            r["drops"]
        ])
    };
    let data_bytes = N * 700 + M * 200;
    assert_eq!(
        delta("Ethernet1"),
        json!([N + M + 1, data_bytes + 90, 0, 0, {"same_port": 1}])
    );
    assert_eq!(delta("Ethernet0"), json!([2, 120, N + M, data_bytes, {}]));
    let queues = ctl.json(&["show", "queue", "counters"]);
    for port in ["Ethernet0", "Ethernet1"] {
        for q in 0..8 {
            let r = queue_row(&queues, port, q);
            let expected = match (port, q) {
                ("Ethernet0", 4) => (N, N * 700),
                ("Ethernet0", QUEUE_LOSSY) => (M, M * 200),
                _ => (0, 0),
            };
            assert_eq!(
                (
                    r["packets"].as_u64(),
                    r["bytes"].as_u64(),
                    r["drop_packets"].as_u64()
                ),
                (Some(expected.0), Some(expected.1), Some(0)),
                "{port}:{q} after clear: {r:#}"
            );
        }
    }
    let pfc_counters = ctl.json(&["show", "pfc", "counters"]);
    assert_eq!(
        row(&pfc_counters, "port", "Ethernet0")["rx"],
        json!(only(4, 2))
    );
    assert_eq!(row(&pfc_counters, "port", "Ethernet0")["pause_rx"], 0);
    assert_eq!(row(&pfc_counters, "port", "Ethernet1")["rx"], json!(ZEROS));
    // XON pauses nothing: no paused time since the clear.
    for p in ["Ethernet0", "Ethernet1"] {
        assert_eq!(row(&pfc_counters, "port", p)["rx_paused_us"], json!(ZEROS));
    }
    // A reconfiguration (a drained restart of the dataplane) changes none of it: the new
    // dataplane's counters add to the carried-over totals, the clear's snapshot still applies.
    let views = [
        &["show", "ports"][..],
        &["show", "pfc", "counters"],
        &["show", "queue", "counters"],
        &["show", "priority-group", "drop"],
    ];
    let before_restart: Vec<Value> = views.iter().map(|v| ctl.json(v)).collect();
    assert_eq!(ctl.ok(&["set", "pfc", "Ethernet0", "3,4"]), "applied\n");
    let after_restart: Vec<Value> = views.iter().map(|v| ctl.json(v)).collect();
    assert_eq!(
        after_restart, before_restart,
        "a restart changed the cleared counters"
    );

    // The switch itself keeps totals since start: its final report ignores the clear.
    let report = switch.stop();
    let (p0, p1) = (report.port(0), report.port(1));
    assert_eq!(
        (p0.rx_frames, p0.tx_frames, p1.rx_frames, p1.tx_frames),
        (1 + 23 + 2, 1 + N + M, 1 + 1 + N + M + 1, 1 + 20),
        "{}",
        report.text
    );
    assert_eq!(p0.pfc_rx, only(4, 3), "{}", report.text);
}

/// Check 4: `config save` → `set pfc Ethernet0 3` → the dataplane ignores PFC for priority 4
/// on Ethernet0 → `config rollback` → the running text is the original exactly and PFC for
/// priority 4 pauses again.
#[test]
fn config_save_set_rollback_round_trips_text_and_behaviour() {
    let (lab, switch, ctl) = lab_with_switch();
    let _sink0 = udp_sink(&lab, 0);
    let h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let h1 = RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0);
    let original = ctl.json(&["show", "config"]);
    let original_text = original["text"].as_str().unwrap().to_owned();
    assert_eq!(
        original_text,
        std::fs::read_to_string(lab.spec.default_config_path()).unwrap(),
        "the running text is the generated file"
    );

    // h0 pauses priority 4 for TEST_QUANTA: priority 4's egress on Ethernet0 is held for
    // exactly the pause time (`rx_paused_us`) when PFC is on for it.
    let mut pfc_frames_sent = 0u64;
    let mut pause_priority_4 = |expected_paused_us: u64| -> Value {
        send_all(&h0, &[pfc(0, 4, TEST_QUANTA)]);
        pfc_frames_sent += 1;
        let sent = pfc_frames_sent;
        ctl.wait_json(
            &["show", "pfc", "counters"],
            &format!("PFC frame {sent} for priority 4 counted, paused {expected_paused_us} us"),
            |v| {
                let r = row(v, "port", "Ethernet0");
                r["rx"][4] == sent && r["rx_paused_us"][4] == expected_paused_us
            },
        )
    };
    pause_priority_4(TEST_PAUSE_US);

    let saved = ctl.ok(&["config", "save", "before"]);
    assert!(saved.trim_end().ends_with("before.toml"), "{saved}");
    assert_eq!(
        std::fs::read_to_string(saved.trim_end()).unwrap(),
        original_text
    );
    assert_eq!(ctl.ok(&["config", "list"]), "before\n");
    assert_eq!(ctl.json(&["config", "list"]), json!(["before"]));

    assert_eq!(ctl.ok(&["set", "pfc", "Ethernet0", "3"]), "applied\n");
    assert_eq!(
        ctl.json(&["show", "pfc", "priority"]),
        json!([{"port": "Ethernet0", "lossless": "3"}, {"port": "Ethernet1", "lossless": "3,4"}])
    );
    assert!(ctl
        .ok(&["show", "pfc", "priority"])
        .contains("Ethernet0    3\n"));
    let changed = ctl.json(&["show", "config"]);
    let changed_text = changed["text"].as_str().unwrap();
    assert_ne!(changed_text, original_text);
    assert!(changed_text.contains("pfc_enable = [3]"), "{changed_text}");
    // The derived view follows: priority 4 of Ethernet0 is lossy now.
    let derived = changed["derived"].as_str().unwrap();
    assert!(
        derived.contains("Ethernet0: 100 Mb/s, 5 m, MTU 1500, PFC on 3;"),
        "{derived}"
    );

    // Counted (pfcstat counts every frame with the bit set) but ignored: no paused time, and a
    // priority-4 frame behind it goes straight through.
    let paused = pause_priority_4(TEST_PAUSE_US);
    assert_eq!(
        row(&paused, "port", "Ethernet0")["rx"][4],
        2,
        "counters carried over"
    );
    send_all(&h1, &[udp_frame(1, 0, DSCP_LOSSLESS_4, 400, 0)]);
    let queues = ctl.wait_json(
        &["show", "queue", "counters"],
        "the priority-4 frame sent",
        |v| queue_row(v, "Ethernet0", 4)["packets"] == 1,
    );
    let pfc_now = ctl.pfc("Ethernet0");
    assert_eq!(
        pfc_now["rx_paused_us"][4], TEST_PAUSE_US,
        "priority 4 was paused although PFC is off for it: {pfc_now:#}\n{queues:#}"
    );

    // Rollback: the saved text exactly, and PFC on 4 again.
    assert_eq!(ctl.ok(&["config", "rollback", "before"]), "applied\n");
    let rolled_back = ctl.json(&["show", "config"]);
    assert_eq!(rolled_back["text"].as_str().unwrap(), original_text);
    assert_eq!(rolled_back, original, "text and derived values as at start");
    assert_eq!(
        ctl.json(&["show", "pfc", "priority"]),
        json!([{"port": "Ethernet0", "lossless": "3,4"}, {"port": "Ethernet1", "lossless": "3,4"}])
    );
    pause_priority_4(2 * TEST_PAUSE_US);
    // A refused rollback changes nothing.
    let out = ctl.run(&["config", "rollback", "missing"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        ctl.json(&["show", "config"])["text"].as_str().unwrap(),
        original_text
    );
    // Counters carried over both reconfigurations: three PFC frames, one data frame.
    let report = switch.stop();
    assert_eq!(report.port(0).pfc_rx, only(4, 3), "{}", report.text);
    assert_eq!(report.port(0).tx_frames, 1 + 1, "{}", report.text);
}

/// The frames of a pcap file.
fn pcap_frames(path: &Path) -> Vec<Vec<u8>> {
    let Ok(file) = std::fs::File::open(path) else {
        return Vec::new();
    };
    let Ok(mut reader) = pcap_file::pcap::PcapReader::new(std::io::BufReader::new(file)) else {
        return Vec::new();
    };
    let mut frames = Vec::new();
    while let Some(Ok(packet)) = reader.next_packet() {
        frames.push(packet.data.into_owned());
    }
    frames
}

/// Check 5: `headroom capture --port Ethernet0 --control-only` while the switch sends PFC to
/// h0 (Ethernet1 held, h0's lossless traffic crossing XOFF): tshark decodes every PFC frame the
/// switch sent, as many as its PFC TX counter says; the PG filled exactly to its XOFF point and
/// headroom, and the excess was dropped and counted as such.
#[test]
fn capture_holds_every_generated_pfc_frame_as_counted() {
    common::require(&["tshark"]);
    const FRAME_BYTES: u64 = 1000;
    let (lab, switch, ctl) = lab_with_switch();
    let _sink = udp_sink(&lab, 1);
    let h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let profile = LosslessProfile::read(&ctl, "Ethernet0", 3);
    let cell = profile.cell_bytes;
    let frame_cells = profile.cells(FRAME_BYTES);
    // Enough frames to fill reserved, shared and headroom, and 20 more that must be dropped.
    let admitted = (1..)
        .find(|&n| profile.fill(n, frame_cells).3 > 0)
        .expect("the PG fills")
        - 1;
    let frames_sent = admitted + 20;
    let (reserved, shared, headroom, dropped) = profile.fill(frames_sent, frame_cells);
    assert_eq!((headroom, dropped), (profile.headroom_cells, 20));
    // Alone in its pool, the PG fills exactly the shared limit `headroom check` prints (its
    // reserved buffer and that limit are whole numbers of these frames).
    assert_eq!(shared * cell, profile.shared_limit_bytes, "{profile:?}");
    eprintln!(
        "{frames_sent} frames of {frame_cells} cells: {admitted} admitted (reserved {reserved}, \
         shared {shared}, headroom {headroom} cells), {dropped} dropped"
    );

    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("ethernet0.pcap");
    let mut capture_cmd = Command::new(HEADROOM);
    capture_cmd
        .args([
            "capture",
            "--port",
            "Ethernet0",
            "--control-only",
            "--duration",
            "300",
            "-w",
        ])
        .arg(&pcap)
        .arg("-s")
        .arg(&ctl.socket);
    let pfc_at_h0 = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0x8808);
    pfc_at_h0.set_receive_buffer(4 << 20);
    let mut capture = Background::spawn(capture_cmd);
    let started = eventually(DEADLINE, || switch.stderr().contains("capture started"));
    assert!(started, "the capture did not start:\n{}", switch.stderr());
    assert_eq!(ctl.pfc("Ethernet0")["tx"], json!(ZEROS));
    ctl.ok(&["clear", "watermarks", "--persistent"]);

    assert_eq!(
        ctl.ok(&["set", "port", "Ethernet1", "tx", "disable"]),
        "port Ethernet1 tx disabled\n"
    );
    let frames: Vec<Vec<u8>> = (0..frames_sent as u32)
        .map(|seq| udp_frame(0, 1, DSCP_LOSSLESS_3, FRAME_BYTES as usize, seq))
        .collect();
    // In steps the switch has taken before the next, so that no frame is lost before the
    // switch sees it (the kernel's backlog and the RX ring are finite; counted, not assumed).
    for (i, chunk) in frames.chunks(200).enumerate() {
        send_all(&h0, chunk);
        ctl.wait_rx("Ethernet0", 1 + (i * 200 + chunk.len()) as u64);
    }
    let drops = ctl.wait_json(
        &["show", "priority-group", "drop"],
        "the excess dropped",
        |v| row(v, "port", "Ethernet0")["drops"][3] == dropped,
    );
    assert_eq!(
        drops,
        json!([{"port": "Ethernet0", "drops": only(3, dropped)}, {"port": "Ethernet1", "drops": ZEROS}])
    );
    let port0 = ctl.port("Ethernet0");
    assert_eq!(
        (&port0["drops"], &port0["backend_rx_missed"]),
        (&json!({"ingress_headroom_exhausted": dropped}), &json!(0)),
        "{port0:#}"
    );
    // The PG filled to its XOFF point and its whole headroom; the queue holds what it admitted.
    let pg_shared = ctl.json(&["show", "priority-group", "watermark", "shared"]);
    assert_eq!(
        marks(&pg_shared, "Ethernet0"),
        only(3, shared * cell),
        "{pg_shared:#}"
    );
    let pg_headroom = ctl.json(&["show", "priority-group", "watermark", "headroom"]);
    assert_eq!(
        marks(&pg_headroom, "Ethernet0"),
        only(3, headroom * cell),
        "{pg_headroom:#}"
    );
    let queues = ctl.json(&["show", "queue", "watermark"]);
    assert_eq!(
        marks(&queues, "Ethernet1"),
        only(3, (reserved + shared + headroom) * cell),
        "{queues:#}"
    );
    // The pool's headroom watermark counts the headroom its PGs used, here the private
    // headroom carved out of the pool (this configuration has no shared headroom pool).
    let pools = ctl.json(&["show", "buffer-pool", "watermark"]);
    assert_eq!(
        *row(&pools, "pool", "ingress_lossless_pool"),
        json!({"pool": "ingress_lossless_pool", "shared_bytes": shared * cell,
               "headroom_bytes": headroom * cell}),
        "{pools:#}"
    );
    // XOFF for priority 3 went out (and is refreshed while the backlog stands).
    ctl.wait_json(&["show", "pfc", "counters"], "XOFF sent to h0", |v| {
        row(v, "port", "Ethernet0")["tx"][3].as_u64() >= Some(1)
    });

    // Release: the backlog drains, the PG empties, XON follows.
    assert_eq!(
        ctl.ok(&["set", "port", "Ethernet1", "tx", "enable"]),
        "port Ethernet1 tx enabled\n"
    );
    ctl.wait_json(&["show", "queue", "counters"], "the backlog sent", |v| {
        queue_row(v, "Ethernet1", 3)["packets"] == admitted
    });
    // XON is the last PFC frame (a refresh follows only while the PG is above XOFF): h0 sees
    // every PFC frame the switch sent, up to the XON.
    let mut at_h0 = Vec::new();
    let xon_seen = eventually(DEADLINE, || {
        while let Some(frame) = pfc_at_h0.recv(Duration::ZERO) {
            at_h0.push(frame);
        }
        at_h0.last().is_some_and(|f| f[24..26] == [0, 0])
    });
    assert!(
        xon_seen,
        "no XON reached h0; PFC frames seen: {}",
        at_h0.len()
    );
    let pfc_sent = ctl.pfc("Ethernet0");
    let pfc_tx = pfc_sent["tx"][3].as_u64().unwrap();
    assert_eq!(pfc_sent["tx"], json!(only(3, pfc_tx)), "{pfc_sent:#}");
    assert!(pfc_tx >= 2, "XOFF and XON at least: {pfc_sent:#}");
    assert_eq!(
        at_h0.len() as u64,
        pfc_tx,
        "PFC frames h0 received vs the TX counter"
    );
    assert!(
        at_h0.iter().all(|f| f[14..18] == [0x01, 0x01, 0, 0x08]),
        "PFC for priority 3 only"
    );

    // Close the capture behind a sentinel from h0 (a PAUSE of 0 quanta: received MAC Control
    // is captured too): once the file holds it whole, it holds everything the switch sent
    // before, and nothing more is coming, so stopping the capture cuts no record.
    let sentinel = pause_802_3x(0, 0);
    send_all(&h0, std::slice::from_ref(&sentinel));
    let closed = eventually(DEADLINE, || pcap_frames(&pcap).contains(&sentinel));
    assert!(closed, "the sentinel never reached the capture file");
    // Ctrl-C ends a capture between records, with its summary.
    let pid = libc::pid_t::try_from(capture.child.id()).unwrap();
    // SAFETY: kill with the pid of our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let status = capture.child.wait().expect("waiting for the capture");
    let in_file = pcap_frames(&pcap).len();
    let summary = format!("{in_file} frames written to {}", pcap.display());
    let summarised = eventually(DEADLINE, || capture.stderr().contains(&summary));
    assert!(
        status.success() && summarised,
        "the capture did not end cleanly on SIGINT ({status}): {}",
        capture.stderr()
    );
    assert_eq!(in_file as u64, pfc_tx + 1, "PFC frames and the sentinel");

    let mut tshark = Command::new("tshark");
    tshark
        .arg("-r")
        .arg(&pcap)
        .args(["-T", "fields", "-E", "separator=|"])
        .args([
            "-Y",
            &format!("eth.src != {}", common::lab_config::mac_text(host_mac(0))),
        ])
        .args([
            "-e",
            "macc.opcode",
            "-e",
            "macc.cbfc.enbv",
            "-e",
            "macc.cbfc.enbv.c3",
        ])
        .args(["-e", "macc.cbfc.pause_time.c3", "-e", "_ws.expert.message"]);
    let out = common::run_ok(&mut tshark);
    let rows: Vec<Vec<String>> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect();
    eprintln!("PFC sent {pfc_tx}; captured: {rows:?}");
    assert_eq!(
        rows.len() as u64,
        pfc_tx,
        "captured PFC frames vs the TX counter: {rows:?}"
    );
    let (xon, xoffs) = rows.split_last().unwrap();
    for r in xoffs {
        assert_eq!(
            r,
            &["0x0101", "0x0008", "1", "65535", ""].map(str::to_owned),
            "an XOFF for priority 3 with the longest pause, no expert complaint"
        );
    }
    assert_eq!(
        xon,
        &["0x0101", "0x0008", "1", "0", ""].map(str::to_owned),
        "XON last"
    );
    let report = switch.stop();
    assert_eq!(report.port(0).pfc_tx, only(3, pfc_tx), "{}", report.text);
}
