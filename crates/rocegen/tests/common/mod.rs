//! Fixtures of the lab tests: two network namespaces joined by a veth pair, `rocegen` processes in
//! them, tcpdump captures, tshark decodes. Everything is torn down by Drop guards; a test that
//! cannot build its lab (not root, a tool missing) fails and says why, it never skips.
#![allow(dead_code)] // Each test uses a different subset.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use headroom_afpacket::lab::NetnsGuard;
use headroom_afpacket::{AfPacketConfig, AfPacketPort};
use headroom_core::frame::Frame;
use headroom_io::{FramePool, PoolConfig, TxQueue};
use serde_json::Value;

/// The lock every end-to-end test of the workspace holds while it runs (the CLI's lab tests take
/// the same file): the tests share two CPU cores with the rest of the machine and measure timing,
/// so one at a time. A file lock, not a mutex: nextest runs each test in its own process.
const E2E_LOCK_PATH: &str = "/run/lock/headroom-e2e.lock";

/// Held for the duration of one lab test; dropping it (closing the file) releases the lock.
#[derive(Debug)]
pub struct SerialGuard(#[allow(dead_code)] std::fs::File);

/// Takes the machine-wide lab lock, waiting for any other end-to-end test to finish.
pub fn serial() -> SerialGuard {
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(E2E_LOCK_PATH)
        .unwrap_or_else(|e| panic!("opening {E2E_LOCK_PATH}: {e}"));
    file.lock()
        .unwrap_or_else(|e| panic!("locking {E2E_LOCK_PATH}: {e}"));
    SerialGuard(file)
}

/// How long a whole rocegen run may take in a test.
pub const RUN_DEADLINE: Duration = Duration::from_secs(60);

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(|euid| euid == "0"))
        })
        .unwrap_or(false)
}

/// Fails the test unless `tool` runs.
pub fn require_tool(tool: &str, version_flag: &str, package: &str) {
    match Command::new(tool).arg(version_flag).output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "`{tool}` is required by this test but does not run. Install it \
             (Debian/Ubuntu: apt-get install -y {package}) and re-run; the test fails rather \
             than skips."
        ),
    }
}

fn run(program: &str, args: &[&str]) -> Output {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Two namespaces `a` and `b`, a veth pair between them with 10.x.y.1/24 and .2/24, links up.
/// Deleted (with the pair) on drop.
#[derive(Debug)]
pub struct Lab {
    pub ns_a: String,
    pub ns_b: String,
    pub if_a: String,
    pub if_b: String,
    pub ip_a: String,
    pub ip_b: String,
    pub dir: PathBuf,
}

impl Lab {
    pub fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        assert!(
            is_root(),
            "these tests need root (network namespaces, veth pairs, AF_PACKET); they fail rather \
             than skip. Run them as root."
        );
        require_tool("ip", "-V", "iproute2");
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{}{}", pid % 100_000, n);
        let lab = Self {
            ns_a: format!("rgt-{tag}-a"),
            ns_b: format!("rgt-{tag}-b"),
            // Interface names: at most 15 bytes.
            if_a: format!("rga{tag}"),
            if_b: format!("rgb{tag}"),
            ip_a: format!("10.{}.{}.1", 100 + pid % 100, n % 250),
            ip_b: format!("10.{}.{}.2", 100 + pid % 100, n % 250),
            dir: std::env::temp_dir().join(format!("rocegen-test-{tag}")),
        };
        // From here on, Drop removes whatever was created.
        run("ip", &["netns", "add", &lab.ns_a]);
        run("ip", &["netns", "add", &lab.ns_b]);
        run(
            "ip",
            &[
                "link", "add", &lab.if_a, "type", "veth", "peer", "name", &lab.if_b,
            ],
        );
        run("ip", &["link", "set", &lab.if_a, "netns", &lab.ns_a]);
        run("ip", &["link", "set", &lab.if_b, "netns", &lab.ns_b]);
        for (ns, ifname, ip) in [
            (&lab.ns_a, &lab.if_a, &lab.ip_a),
            (&lab.ns_b, &lab.if_b, &lab.ip_b),
        ] {
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", ifname],
            );
            run("ip", &["-n", ns, "link", "set", ifname, "up"]);
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        std::fs::create_dir_all(&lab.dir).expect("temporary directory");
        lab
    }

    /// A command that runs `program` inside namespace `ns`, at niceness -10 like the rocegen
    /// processes of `headroom lab incast`: the other tests of the suite run in parallel on two
    /// CPUs, and a receiver descheduled for tens of milliseconds overflows its kernel RX ring at
    /// 1 Gb/s, which shows up as retransmissions that say nothing about rocegen.
    pub fn command(ns: &str, program: &str, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns, "nice", "-n", "-10", program])
            .args(args);
        cmd
    }

    /// Starts the rocegen server in `b` on a fresh port; returns it and the port.
    pub fn server(&self, test: &str, port: u16, extra: &[&str]) -> Proc {
        let port = port.to_string();
        let mut args = vec![test, "-d", &self.if_b, "-p", &port, "--json"];
        args.extend_from_slice(extra);
        Proc::spawn(Self::command(
            &self.ns_b,
            env!("CARGO_BIN_EXE_rocegen"),
            &args,
        ))
    }

    /// Starts the rocegen client in `a`.
    pub fn client(&self, test: &str, port: u16, extra: &[&str]) -> Proc {
        self.client_to(&self.ip_b, test, port, extra)
    }

    /// Starts the rocegen client in `a`, towards SERVER `server` (an address of `b`, any form).
    pub fn client_to(&self, server: &str, test: &str, port: u16, extra: &[&str]) -> Proc {
        let port = port.to_string();
        let mut args = vec![test, "-d", &self.if_a, server, "-p", &port, "--json"];
        args.extend_from_slice(extra);
        Proc::spawn(Self::command(
            &self.ns_a,
            env!("CARGO_BIN_EXE_rocegen"),
            &args,
        ))
    }

    /// Adds `addr` (`ADDR/LEN`) to `ifname` in `ns` without duplicate address detection, so that
    /// an IPv6 address is usable at once.
    pub fn add_addr(ns: &str, ifname: &str, addr: &str) {
        let mut args = vec!["-n", ns, "addr", "add", addr, "dev", ifname];
        if addr.contains(':') {
            args.push("nodad");
        }
        run("ip", &args);
    }

    /// Turns the kernel's IPv6 off in both namespaces (as `headroom lab` hosts have it).
    pub fn disable_kernel_ipv6(&self) {
        for ns in [&self.ns_a, &self.ns_b] {
            for key in [
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ] {
                run("ip", &["netns", "exec", ns, "sysctl", "-qw", key]);
            }
        }
    }

    /// Runs a server and a client to completion; returns their JSON reports (both must succeed).
    pub fn pair(&self, test: &str, server: &[&str], client: &[&str]) -> (Value, Value) {
        let (client, server) = self.pair_finished(test, server, client);
        (client.json(), server.json())
    }

    /// [`Lab::pair`] with the client given `to` as SERVER.
    pub fn pair_to(
        &self,
        to: &str,
        test: &str,
        server: &[&str],
        client: &[&str],
    ) -> (Value, Value) {
        let (client, server) = self.pair_finished_to(to, test, server, client);
        (client.json(), server.json())
    }

    /// Runs a server and a client to completion, whatever their exit status: (client, server).
    pub fn pair_finished(
        &self,
        test: &str,
        server: &[&str],
        client: &[&str],
    ) -> (Finished, Finished) {
        self.pair_finished_to(&self.ip_b, test, server, client)
    }

    /// [`Lab::pair_finished`] with the client given `to` as SERVER.
    pub fn pair_finished_to(
        &self,
        to: &str,
        test: &str,
        server: &[&str],
        client: &[&str],
    ) -> (Finished, Finished) {
        let port = 20_000 + (std::process::id() % 20_000) as u16;
        let server = self.server(test, port, server);
        let client = self.client_to(to, test, port, client);
        let client = client.finish(RUN_DEADLINE);
        let server = server.finish(RUN_DEADLINE);
        (client, server)
    }

    /// A counter of an interface in a namespace (`/sys/class/net/IF/statistics/NAME`).
    pub fn if_stat(ns: &str, ifname: &str, name: &str) -> u64 {
        let out = run(
            "ip",
            &[
                "netns",
                "exec",
                ns,
                "cat",
                &format!("/sys/class/net/{ifname}/statistics/{name}"),
            ],
        );
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .expect("numeric counter")
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns_a])
            .output();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns_b])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `hosts` namespaces, each with one veth to a Linux bridge in a "switch" namespace, addresses
/// 10.x.y.(i+1)/24. Deleted on drop. (A plain learning bridge: it forwards RoCE; it does not
/// forward PFC frames, 802.1D reserved addresses.)
#[derive(Debug)]
pub struct Fabric {
    pub ns_switch: String,
    pub hosts: Vec<FabricHost>,
}

/// One host of a [`Fabric`].
#[derive(Debug)]
pub struct FabricHost {
    pub ns: String,
    pub ifname: String,
    pub ip: String,
}

impl Fabric {
    pub fn new(hosts: usize) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        assert!(
            is_root(),
            "these tests need root (network namespaces, veth pairs, AF_PACKET); they fail rather \
             than skip. Run them as root."
        );
        require_tool("ip", "-V", "iproute2");
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let tag = format!("{}{}", pid % 100_000, n);
        let mut fabric = Self {
            ns_switch: format!("rgf-{tag}-sw"),
            hosts: Vec::new(),
        };
        run("ip", &["netns", "add", &fabric.ns_switch]);
        let sw = fabric.ns_switch.clone();
        run("ip", &["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        run("ip", &["-n", &sw, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let host = FabricHost {
                ns: format!("rgf-{tag}-h{i}"),
                ifname: format!("rgh{tag}{i}"),
                ip: format!("10.{}.{}.{}", 200 + pid % 50, n % 250, i + 1),
            };
            let port = format!("rgs{tag}{i}");
            run("ip", &["netns", "add", &host.ns]);
            // Registered before the links exist, so that Drop removes a half-built host too.
            fabric.hosts.push(host);
            let host = fabric.hosts.last().expect("just pushed");
            run(
                "ip",
                &[
                    "link",
                    "add",
                    &host.ifname,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    &port,
                ],
            );
            run("ip", &["link", "set", &host.ifname, "netns", &host.ns]);
            run("ip", &["link", "set", &port, "netns", &sw]);
            run("ip", &["-n", &sw, "link", "set", &port, "master", "br0"]);
            run("ip", &["-n", &sw, "link", "set", &port, "up"]);
            run(
                "ip",
                &[
                    "-n",
                    &host.ns,
                    "addr",
                    "add",
                    &format!("{}/24", host.ip),
                    "dev",
                    &host.ifname,
                ],
            );
            run("ip", &["-n", &host.ns, "link", "set", &host.ifname, "up"]);
            run("ip", &["-n", &host.ns, "link", "set", "lo", "up"]);
        }
        fabric
    }

    /// Starts rocegen in host `i` with `args` (`--json` added).
    pub fn rocegen(&self, i: usize, args: &[&str]) -> Proc {
        let host = &self.hosts[i];
        let mut full = args.to_vec();
        full.push("--json");
        Proc::spawn(Lab::command(&host.ns, env!("CARGO_BIN_EXE_rocegen"), &full))
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        for host in &self.hosts {
            let _ = Command::new("ip").args(["netns", "del", &host.ns]).output();
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.ns_switch])
            .output();
    }
}

/// A child process, killed (by its own id) if still running when dropped.
pub struct Proc {
    child: Option<Child>,
    pub what: String,
}

/// What a finished process printed.
pub struct Finished {
    pub status: std::process::ExitStatus,
    pub stdout: String,
    pub stderr: String,
    pub what: String,
}

impl Finished {
    /// The JSON report on stdout; panics with the whole output if it does not parse or the
    /// process failed.
    pub fn json(&self) -> Value {
        assert!(
            self.status.success(),
            "{} failed ({}):\nstdout: {}\nstderr: {}",
            self.what,
            self.status,
            self.stdout,
            self.stderr
        );
        self.json_any()
    }

    /// The JSON report whatever the exit status.
    pub fn json_any(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "{}: stdout is not JSON ({e}):\n{}\nstderr: {}",
                self.what, self.stdout, self.stderr
            )
        })
    }
}

impl Proc {
    pub fn spawn(mut cmd: Command) -> Self {
        let what = format!("{cmd:?}");
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        Self {
            child: Some(child),
            what,
        }
    }

    pub fn id(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Waits for the process to exit (polling, with a deadline) and collects its output.
    pub fn finish(mut self, deadline: Duration) -> Finished {
        let mut child = self.child.take().expect("running");
        let until = Instant::now() + deadline;
        loop {
            if child.try_wait().expect("try_wait").is_some() {
                break;
            }
            if Instant::now() > until {
                let _ = child.kill();
                let out = child.wait_with_output().expect("output");
                panic!(
                    "{} did not finish within {deadline:?}:\nstdout: {}\nstderr: {}",
                    self.what,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let out = child.wait_with_output().expect("output");
        Finished {
            status: out.status,
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            what: self.what.clone(),
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// tcpdump writing a nanosecond pcap, started and ready (it said "listening").
pub struct Capture {
    proc: Proc,
    pub path: PathBuf,
    ns: String,
    ifname: String,
    stderr: std::sync::mpsc::Receiver<String>,
}

/// IEEE 802 Local Experimental EtherType 1: the capture's end marker.
pub const MARKER_ETHERTYPE: u16 = 0x88B5;

/// Sends `frame` out of `ifname` in namespace `ns` from a packet socket of our own, through the
/// qdisc layer (so that tcpdump on that interface records it too).
pub fn send_frame(ns: &str, ifname: &str, frame: &[u8]) {
    let ns = ns.to_owned();
    let ifname = ifname.to_owned();
    let bytes = frame.to_vec();
    std::thread::spawn(move || {
        let _inside = NetnsGuard::enter(&ns).expect("enter namespace");
        let pool = FramePool::new(PoolConfig::with_frame_count(4)).expect("pool");
        let config = AfPacketConfig {
            qdisc_bypass: false,
            promiscuous: false,
            block_count: 4,
            ..AfPacketConfig::default()
        };
        let port = AfPacketPort::open(&ifname, pool, &config).expect("open injector");
        let (_rx, mut tx) = port.split();
        let mut out = tx.alloc_frame(bytes.len()).expect("frame");
        out.data_mut().copy_from_slice(&bytes);
        let mut frames = vec![out];
        assert_eq!(tx.tx_burst(&mut frames), 1, "frame sent");
    })
    .join()
    .expect("injector thread");
}

/// Whether the (possibly still growing) pcap holds the end marker.
fn pcap_has_marker(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else {
        return false;
    };
    let Ok(mut reader) = pcap_file::pcap::PcapReader::new(file) else {
        return false;
    };
    // Raw records: pcap-file 2.0 refuses truncated records (orig_len > snaplen) in its checked
    // reader.
    while let Some(Ok(packet)) = reader.next_raw_packet() {
        if packet.data.get(12..14) == Some(&MARKER_ETHERTYPE.to_be_bytes()[..]) {
            return true;
        }
    }
    false
}

impl Capture {
    /// Captures whole frames on `ifname` in `ns` that `filter` selects (plus our end marker).
    pub fn start(ns: &str, ifname: &str, path: &Path, filter: &str) -> Self {
        Self::start_with_snaplen(ns, ifname, path, filter, 0)
    }

    /// As [`Capture::start`], keeping the first `snaplen` bytes of each frame (0: all).
    pub fn start_with_snaplen(
        ns: &str,
        ifname: &str,
        path: &Path,
        filter: &str,
        snaplen: usize,
    ) -> Self {
        // The marker first: after the BPF `vlan` keyword, later terms look inside the tag.
        // An empty filter captures everything.
        let filter = if filter.is_empty() {
            String::new()
        } else {
            format!("ether proto {MARKER_ETHERTYPE:#06x} or ({filter})")
        };
        let filter = filter.as_str();
        let snaplen = snaplen.to_string();
        require_tool("tcpdump", "--version", "tcpdump");
        let path_text = path.to_string_lossy().into_owned();
        let mut cmd = Lab::command(
            ns,
            "tcpdump",
            &[
                "-i",
                ifname,
                "-U",
                "-n",
                "-s",
                &snaplen,
                // 64 MiB of kernel buffer: a loaded host must not lose frames of the capture.
                "-B",
                "65536",
                "--time-stamp-precision=nano",
                // TPACKET_V2, frame by frame: without it libpcap holds frames in a V3 block
                // for up to a second, and a stopped tcpdump never writes them.
                "--immediate-mode",
                "-w",
                &path_text,
                filter,
            ],
        );
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start tcpdump");
        // Wait for "listening on ..." (with a deadline: the reading thread gives up with the
        // process).
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stderr);
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 {
                let _ = tx.send(std::mem::take(&mut line));
            }
        });
        let proc = Proc {
            child: Some(child),
            what: format!("tcpdump on {ifname}"),
        };
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = rx
                .recv_timeout(left)
                .expect("tcpdump did not start listening within 10 s");
            if line.contains("listening on") {
                break;
            }
        }
        Self {
            proc,
            path: path.to_owned(),
            ns: ns.to_owned(),
            ifname: ifname.to_owned(),
            stderr: rx,
        }
    }

    /// Sends an end marker out of the captured interface, waits until tcpdump has written it
    /// (so it has written everything before it), then stops tcpdump (SIGINT to its id) and
    /// waits for it. The marker is left out of [`read_pcap`]'s result.
    pub fn stop(mut self) -> PathBuf {
        let mut marker = vec![0u8; 60];
        marker[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x77]);
        marker[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x78]);
        marker[12..14].copy_from_slice(&MARKER_ETHERTYPE.to_be_bytes());
        marker[14..30].copy_from_slice(b"rocegen-test-end");
        send_frame(&self.ns, &self.ifname, &marker);
        let until = Instant::now() + Duration::from_secs(10);
        while !pcap_has_marker(&self.path) {
            assert!(
                Instant::now() < until,
                "tcpdump did not record the end marker within 10 s"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let id = self.proc.id();
        run("kill", &["-INT", &id.to_string()]);
        let mut child = self.proc.child.take().expect("running");
        let until = Instant::now() + Duration::from_secs(10);
        while child.try_wait().expect("try_wait").is_none() {
            assert!(Instant::now() < until, "tcpdump did not stop");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Its summary: a capture that lost frames would show gaps that are not on the wire.
        let mut summary = String::new();
        while let Ok(line) = self.stderr.recv_timeout(Duration::from_secs(2)) {
            summary.push_str(&line);
        }
        assert!(
            summary
                .lines()
                .any(|l| l.trim() == "0 packets dropped by kernel"),
            "tcpdump lost frames, the capture cannot be trusted:\n{summary}"
        );
        self.path.clone()
    }
}

/// The frames of a pcap with whole frames: timestamp (ns since the epoch) and bytes.
pub fn read_pcap(path: &Path) -> Vec<(u64, Vec<u8>)> {
    read_pcap_inner(path, true)
}

/// The frames of a pcap taken with a snap length (frames may be cut short).
pub fn read_pcap_truncated(path: &Path) -> Vec<(u64, Vec<u8>)> {
    read_pcap_inner(path, false)
}

fn read_pcap_inner(path: &Path, whole: bool) -> Vec<(u64, Vec<u8>)> {
    let file = std::fs::File::open(path).expect("open pcap");
    let mut reader = pcap_file::pcap::PcapReader::new(file).expect("pcap header");
    let nanos_per_tick = match reader.header().ts_resolution {
        pcap_file::TsResolution::MicroSecond => 1_000,
        pcap_file::TsResolution::NanoSecond => 1,
    };
    let mut frames = Vec::new();
    // Raw records: pcap-file 2.0 refuses truncated records in its checked reader.
    while let Some(packet) = reader.next_raw_packet() {
        let packet = packet.expect("pcap record");
        if packet.data.get(12..14) == Some(&MARKER_ETHERTYPE.to_be_bytes()[..]) {
            continue;
        }
        if whole {
            assert_eq!(
                packet.orig_len as usize,
                packet.data.len(),
                "capture truncated a frame"
            );
        }
        frames.push((
            u64::from(packet.ts_sec) * 1_000_000_000 + u64::from(packet.ts_frac) * nanos_per_tick,
            packet.data.into_owned(),
        ));
    }
    frames
}

/// tshark fields of every frame of `pcap` (all occurrences joined with ',').
pub fn tshark_fields(pcap: &Path, fields: &[&str]) -> Vec<BTreeMap<String, String>> {
    tshark_fields_with(pcap, fields, &[])
}

/// [`tshark_fields`] with extra tshark arguments (preferences: `-o udp.check_checksum:TRUE`).
pub fn tshark_fields_with(
    pcap: &Path,
    fields: &[&str],
    extra: &[&str],
) -> Vec<BTreeMap<String, String>> {
    require_tool("tshark", "--version", "tshark");
    let mut cmd = Command::new("tshark");
    cmd.args(extra);
    cmd.arg("-r").arg(pcap).args([
        "-Y",
        &format!("not eth.type == {MARKER_ETHERTYPE:#06x}"),
        "-o",
        "ip.check_checksum:TRUE",
        "-T",
        "fields",
        "-E",
        "header=n",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for field in fields {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8")
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('\t').collect();
            assert_eq!(values.len(), fields.len(), "tshark line {line:?}");
            fields
                .iter()
                .zip(values)
                .map(|(f, v)| ((*f).to_owned(), v.to_owned()))
                .collect()
        })
        .collect()
}

/// A number in a JSON report, by path (`counters.retransmitted_packets`).
pub fn num(report: &Value, path: &str) -> u64 {
    let mut v = report;
    for key in path.split('.') {
        v = match key.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[key],
        };
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{path} is not a number in {report:#}"))
}

/// A float in a JSON report, by path.
pub fn float(report: &Value, path: &str) -> f64 {
    let mut v = report;
    for key in path.split('.') {
        v = match key.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[key],
        };
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("{path} is not a number in {report:#}"))
}
