//! Shared fixtures of the end-to-end tests: a lab built with the real `headroom lab`, the switch
//! run as a child process (counters read from its final report on SIGTERM), captures, raw packet
//! sockets in host namespaces, frame builders and deadline-bounded waits.
//!
//! Every test needs root, network namespaces and the tools it names; without them it FAILS with
//! a message saying what is missing (never skips). Tests take a machine-wide file lock so that
//! they run one at a time (they measure rates and times on a small machine), and every lab has
//! its own names (`e2e-<pid>-<n>`), torn down by a Drop guard even when the test fails; labs
//! left by a killed test run are removed by the next run.
#![allow(dead_code)] // Each test binary uses a different subset.

#[allow(dead_code, unreachable_pub)]
#[path = "../../src/lab/config.rs"]
pub mod lab_config;
pub mod routed;
pub mod two_routers;

use headroom_afpacket::lab::NetnsGuard;
use lab_config::LabSpec;
use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The binary under test.
pub const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");

/// How long anything that should happen "at once" may take (process start, a ping reply...).
pub const DEADLINE: Duration = Duration::from_secs(15);

/// IEEE 802 Local Experimental EtherType 1: test frames no host stack reacts to.
pub const TEST_ETHERTYPE: u16 = 0x88B5;

/// Fails the test unless it runs as root with every tool in `tools` on the PATH.
pub fn require(tools: &[&str]) {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "the end-to-end tests need root (network namespaces, veth pairs, packet sockets); \
         run `sudo -E cargo test -p headroom-cli`. They fail rather than skip."
    );
    assert!(
        Path::new("/proc/self/ns/net").exists(),
        "the end-to-end tests need network namespaces (CONFIG_NET_NS)"
    );
    let mut missing = Vec::new();
    for tool in ["ip", "chrt", "nice"].iter().chain(tools) {
        let found = std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()));
        if !found {
            missing.push(*tool);
        }
    }
    assert!(
        missing.is_empty(),
        "the end-to-end tests need {missing:?} on the PATH (Debian: apt-get install iproute2 \
         tcpdump tshark iperf3 iputils-ping); they fail rather than skip"
    );
}

/// `Ip: ForwDatagrams` of a /proc/net/snmp text: the datagrams that namespace's kernel forwarded
/// (the routed tests check it stays flat while headroom forwards). The `Ip:` header line names the
/// columns, the next `Ip:` line holds the values (RFC 4293's ipSystemStatsOutForwDatagrams).
pub fn ip_forw_datagrams(snmp: &str) -> u64 {
    let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (Some(names), Some(values)) = (ip.next(), ip.next()) else {
        panic!("no Ip: lines in /proc/net/snmp:\n{snmp}");
    };
    let column = names
        .split_whitespace()
        .position(|n| n == "ForwDatagrams")
        .unwrap_or_else(|| panic!("no ForwDatagrams column in /proc/net/snmp:\n{snmp}"));
    values
        .split_whitespace()
        .nth(column)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no ForwDatagrams value in /proc/net/snmp:\n{snmp}"))
}

/// The machine-wide lock every end-to-end test holds while it runs.
#[derive(Debug)]
pub struct TestLock(File);

impl TestLock {
    pub fn acquire() -> Self {
        let file = File::options()
            .create(true)
            .truncate(false)
            .write(true)
            .open("/run/lock/headroom-e2e.lock")
            .expect("opening /run/lock/headroom-e2e.lock");
        file.lock().expect("locking /run/lock/headroom-e2e.lock");
        remove_stale_labs();
        Self(file)
    }
}

const PREFIX_HEAD: &str = "e2e-";

/// Deletes labs of test processes that no longer exist (killed before their guards ran).
fn remove_stale_labs() {
    let Ok(dir) = std::fs::read_dir("/run/netns") else {
        return;
    };
    for entry in dir.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX_HEAD)
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", &name]).status();
        }
    }
}

/// Runs a command and returns its output; fails the test with its stderr if it fails.
pub fn run_ok(command: &mut Command) -> Output {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot run {command:?}: {e}"));
    assert!(
        output.status.success(),
        "{command:?} failed ({}):\nstdout: {}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A lab built with `headroom lab up --no-switch`; `headroom lab down` on drop.
#[derive(Debug)]
pub struct Lab {
    pub spec: LabSpec,
    /// The switch runs its LLDP agent (false by default in tests: the tests that count what
    /// a port sends must not see LLDPDUs; the LLDP tests set it).
    pub lldp: bool,
    /// The hosts run the lab's lldpad (`--host-dcbx lldpad`; `none` by default in tests, for
    /// the same reason: hosts that send LLDPDUs would add frames to every port's counters).
    pub host_dcbx: bool,
    _lock: TestLock,
}

impl Lab {
    /// Takes the test lock and builds a lab of `hosts` hosts at `speed` with fresh names.
    pub fn up(hosts: usize, speed: &str) -> Self {
        Self::build(hosts, speed, false)
    }

    /// As [`Lab::up`], with the switch's LLDP agent on and lldpad in every host (willing),
    /// started by `headroom lab --host-dcbx lldpad`.
    pub fn up_with_lldpad(hosts: usize, speed: &str) -> Self {
        let mut lab = Self::build(hosts, speed, true);
        lab.lldp = true;
        lab
    }

    fn build(hosts: usize, speed: &str, host_dcbx: bool) -> Self {
        let lock = TestLock::acquire();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "{PREFIX_HEAD}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let spec = LabSpec::new(&prefix, hosts, speed);
        let lab = Self {
            spec,
            lldp: false,
            host_dcbx,
            _lock: lock,
        };
        run_ok(Command::new(HEADROOM).args([
            "lab",
            "up",
            "--no-switch",
            "--prefix",
            &prefix,
            "--hosts",
            &hosts.to_string(),
            "--speed",
            speed,
            "--host-dcbx",
            if host_dcbx { "lldpad" } else { "none" },
        ]));
        lab
    }

    pub fn prefix(&self) -> &str {
        &self.spec.prefix
    }

    pub fn host_ns(&self, i: usize) -> String {
        self.spec.host_namespace(i)
    }

    pub fn switch_ns(&self) -> String {
        self.spec.switch_namespace()
    }

    /// `ip netns exec <host i> program args...` (not run yet).
    pub fn host_cmd(&self, i: usize, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.host_ns(i), program])
            .args(args);
        c
    }

    /// `ip netns exec <host i> nice -n -10 program args...`: a traffic tool whose rate a test
    /// asserts, ahead of ordinary processes.
    pub fn host_cmd_niced(&self, i: usize, program: &str, args: &[&str]) -> Command {
        let mut c = self.host_cmd(i, "nice", &["-n", NICE_TOOLS, program]);
        c.args(args);
        c
    }

    /// Runs `program args...` in host `i`, checks success, returns stdout.
    pub fn host_run(&self, i: usize, program: &str, args: &[&str]) -> String {
        let out = run_ok(&mut self.host_cmd(i, program, args));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Host `i` sends a broadcast frame so that the switch learns its MAC (hosts are silent
    /// otherwise: permanent neighbours, no IPv6), and traffic to it is not flooded.
    pub fn announce(&self, i: usize) {
        RawSocket::open(&self.host_ns(i), lab_config::HOST_DEVICE, 0)
            .send(&test_frame([0xFF; 6], lab_config::host_mac(i), 0xA11, 60))
            .expect("announce");
    }

    /// Starts the switch with the generated configuration.
    pub fn start_switch(&self) -> Switch {
        Switch::start(self, None, &[])
    }

    /// Starts the switch with the generated configuration and more `headroom lab` options.
    pub fn start_switch_args(&self, args: &[&str]) -> Switch {
        Switch::start(self, None, args)
    }

    /// Starts the switch with a configuration written from `spec` (overrides of the lab's).
    pub fn start_switch_with(&self, spec: &LabSpec, dir: &Path) -> Switch {
        assert_eq!(spec.prefix, self.spec.prefix);
        let path = dir.join("switch.toml");
        let mut spec = spec.clone();
        spec.lldp &= self.lldp;
        std::fs::write(&path, spec.config_toml()).expect("writing the configuration");
        Switch::start(self, Some(&path), &[])
    }

    /// A counter of `nstat` (absolute, history untouched) in host `i`.
    pub fn nstat(&self, i: usize, counter: &str) -> u64 {
        let out = self.host_run(i, "nstat", &["-asz", counter]);
        out.lines()
            .find_map(|l| {
                let mut fields = l.split_whitespace();
                (fields.next() == Some(counter)).then(|| fields.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("nstat printed no {counter}: {out}"))
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let down = Command::new(HEADROOM)
            .args(["lab", "down", "--prefix", self.prefix()])
            .output();
        if !down.is_ok_and(|o| o.status.success()) {
            // Whatever happened, leave nothing behind.
            let _ = Command::new("ip")
                .args(["netns", "del", &self.switch_ns()])
                .status();
            for i in 0..self.spec.hosts {
                let _ = Command::new("ip")
                    .args(["netns", "del", &self.host_ns(i)])
                    .status();
            }
        }
    }
}

/// Collects a child's pipe into a shared string, on a thread, so that the pipe never fills.
fn collect(mut pipe: impl Read + Send + 'static) -> Arc<Mutex<String>> {
    let text = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&text);
    std::thread::spawn(move || {
        let mut reader = BufReader::new(&mut pipe);
        let mut line = String::new();
        while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
            sink.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    text
}

fn signal(child: &Child, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill with a pid we own (our child, not yet reaped) and a valid signal number.
    unsafe { libc::kill(pid, signal) };
}

/// Waits for `child` to exit, at most `timeout`.
fn wait_deadline(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child process killed (and reaped) on drop.
#[derive(Debug)]
pub struct Background {
    pub child: Child,
    pub what: String,
    stderr: Option<Arc<Mutex<String>>>,
}

impl Background {
    pub fn spawn(mut command: Command) -> Self {
        let what = format!("{command:?}");
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let stderr = child.stderr.take().map(collect);
        Self {
            child,
            what,
            stderr,
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr
            .as_ref()
            .map(|s| s.lock().unwrap().clone())
            .unwrap_or_default()
    }

    /// Waits until the process exits; returns its stdout. Fails after `timeout`.
    pub fn finish(mut self, timeout: Duration) -> String {
        let status = wait_deadline(&mut self.child, timeout)
            .unwrap_or_else(|| panic!("{} did not finish within {timeout:?}", self.what));
        let mut out = String::new();
        if let Some(mut pipe) = self.child.stdout.take() {
            let _ = pipe.read_to_string(&mut out);
        }
        assert!(
            status.success(),
            "{} failed ({status}):\n{out}\n{}",
            self.what,
            self.stderr()
        );
        out
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(&self.child, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// SCHED_FIFO priority of the switch under test (see [`Switch`]).
pub const SWITCH_RT_PRIORITY: &str = "10";
/// Niceness of the traffic tools whose rates the tests assert.
pub const NICE_TOOLS: &str = "-10";

/// The switch, `headroom lab --prefix P ...` as a child process.
#[derive(Debug)]
pub struct Switch {
    child: Child,
    stdout: Arc<Mutex<String>>,
    stderr: Arc<Mutex<String>>,
}

impl Switch {
    fn start(lab: &Lab, config: Option<&Path>, extra: &[&str]) -> Self {
        // As a real-time (SCHED_FIFO) process: these tests run on machines shared with
        // compilers, and they measure the switch, not the scheduler. An lcore woken late loses
        // link time for good (the shaper's credit is capped at 1 ms); measured on a 2-CPU
        // machine at load 7, TCP through a 20 Mb/s port got 50-95 % of the port at nice -10 and
        // a steady 94 % (the most 1448-byte segments allow) under SCHED_FIFO. The adaptive lcore
        // sleeps when idle, and the kernel's RT throttling (95 %) bounds the worst case.
        // `chrt` execs the switch, so the child's pid is the switch's.
        let mut command = Command::new("chrt");
        command.args(["--fifo", SWITCH_RT_PRIORITY, HEADROOM]);
        command.args([
            "lab",
            "--prefix",
            lab.prefix(),
            "--hosts",
            &lab.spec.hosts.to_string(),
            "--speed",
            &lab.spec.speed,
            "--log-format",
            "text",
        ]);
        if let Some(path) = config {
            command.arg("--config").arg(path);
        } else if !lab.lldp {
            command.arg("--no-lldp");
        }
        command.args(["--host-dcbx", if lab.host_dcbx { "lldpad" } else { "none" }]);
        command.args(extra);
        command
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().expect("starting headroom lab");
        let stdout = collect(child.stdout.take().expect("stdout"));
        let stderr = collect(child.stderr.take().expect("stderr"));
        let mut switch = Self {
            child,
            stdout,
            stderr,
        };
        let ready = eventually(DEADLINE, || {
            switch.stderr().contains("headroom running")
                || matches!(switch.child.try_wait(), Ok(Some(_)))
        });
        assert!(
            ready && switch.stderr().contains("headroom running"),
            "the switch did not start within {DEADLINE:?}:\nstdout:\n{}\nstderr:\n{}",
            switch.stdout(),
            switch.stderr()
        );
        switch
    }

    pub fn stdout(&self) -> String {
        self.stdout.lock().unwrap().clone()
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the switch process still runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// SIGTERM, wait for the exit (drain + report), parse the final counters.
    pub fn stop(mut self) -> Report {
        signal(&self.child, libc::SIGTERM);
        let status = wait_deadline(&mut self.child, DEADLINE);
        // The pipes close with the process; give the reader threads a moment to finish.
        let closed = eventually(Duration::from_secs(2), || {
            self.stdout().contains("The lab stays up")
        });
        let (out, err) = (self.stdout(), self.stderr());
        assert!(
            status.is_some_and(|s| s.success()) && closed,
            "the switch did not stop cleanly on SIGTERM ({status:?}):\nstdout:\n{out}\nstderr:\n{err}"
        );
        assert!(
            !err.contains("were not all returned to the pool"),
            "the switch leaked frame buffers:\n{err}"
        );
        let mut report = Report::parse(&out);
        report.log = err;
        report
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            signal(&self.child, libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

/// One port's line in every table of the final report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortReport {
    pub rx_frames: u64,
    pub tx_frames: u64,
    pub rx_bytes: u64,
    pub tx_bytes: u64,
    pub drops_total: u64,
    pub pfc_rx: [u64; 8],
    pub pfc_tx: [u64; 8],
    pub ecn_marked: [u64; 8],
    /// Drops by stable reason name (only non-zero reasons are printed).
    pub drops: BTreeMap<String, u64>,
}

impl PortReport {
    pub fn drop_count(&self, reason: &str) -> u64 {
        self.drops.get(reason).copied().unwrap_or(0)
    }
}

/// The switch's final counters, by port name.
#[derive(Clone, Debug, Default)]
pub struct Report {
    pub ports: BTreeMap<String, PortReport>,
    /// The report as printed.
    pub text: String,
    /// What the switch logged (stderr): events such as watchdog detections.
    pub log: String,
}

impl Report {
    /// Parses the tables `headroom run` prints when it stops.
    pub fn parse(text: &str) -> Self {
        #[derive(Clone, Copy)]
        enum Section {
            None,
            Counters,
            PfcRx,
            PfcTx,
            Ecn,
            Drops,
        }
        let mut ports: BTreeMap<String, PortReport> = BTreeMap::new();
        let mut section = Section::None;
        let numbers = |fields: &[&str]| -> Vec<u64> {
            fields
                .iter()
                .map(|f| f.parse().unwrap_or_else(|_| panic!("not a number: {f}")))
                .collect()
        };
        for line in text.lines() {
            let fields: Vec<&str> = line.split_whitespace().collect();
            if fields.is_empty() {
                section = Section::None;
                continue;
            }
            match (fields[0], fields.get(1).copied()) {
                ("Port", Some("RX")) => {
                    section = Section::Counters;
                    continue;
                }
                ("Port", Some("Rx")) => {
                    section = Section::PfcRx;
                    continue;
                }
                ("Port", Some("Tx")) => {
                    section = Section::PfcTx;
                    continue;
                }
                ("ECN", Some("marked")) => {
                    section = Section::Ecn;
                    continue;
                }
                ("Drops", Some("Reason")) => {
                    section = Section::Drops;
                    continue;
                }
                _ => {}
            }
            let name = fields[0].to_owned();
            match section {
                Section::None => {}
                Section::Counters => {
                    let n = numbers(&fields[1..]);
                    let p = ports.entry(name).or_default();
                    (
                        p.rx_frames,
                        p.tx_frames,
                        p.rx_bytes,
                        p.tx_bytes,
                        p.drops_total,
                    ) = (n[0], n[1], n[2], n[3], n[4]);
                }
                Section::PfcRx | Section::PfcTx | Section::Ecn => {
                    let n: [u64; 8] = numbers(&fields[1..]).try_into().expect("8 columns");
                    let p = ports.entry(name).or_default();
                    match section {
                        Section::PfcRx => p.pfc_rx = n,
                        Section::PfcTx => p.pfc_tx = n,
                        _ => p.ecn_marked = n,
                    }
                }
                Section::Drops => {
                    let p = ports.entry(name).or_default();
                    p.drops
                        .insert(fields[1].to_owned(), numbers(&fields[2..3])[0]);
                }
            }
        }
        assert!(!ports.is_empty(), "no counters in the report:\n{text}");
        Self {
            ports,
            text: text.to_owned(),
            log: String::new(),
        }
    }

    pub fn port(&self, i: usize) -> &PortReport {
        let name = lab_config::port_name(i);
        self.ports
            .get(&name)
            .unwrap_or_else(|| panic!("no {name} in the report:\n{}", self.text))
    }
}

/// Polls `condition` until it holds or `timeout` passes; returns whether it held.
pub fn eventually(timeout: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if condition() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Source MAC of the sentinel frame that closes every capture (never used by a host or the
/// switch).
pub const SENTINEL_MAC: [u8; 6] = [0x02, 0x5e, 0x47, 0, 0, 0x01];

/// A tcpdump capture of `eth0` in a host namespace, written to a file packet by packet.
///
/// tcpdump runs in immediate mode: libpcap then uses a TPACKET_V2 ring, which hands over every
/// frame at once (its TPACKET_V3 default holds frames in a block until the block fills or a
/// timeout passes, and frames of an unretired block are lost at SIGINT). To stop without
/// losing the last frames, [`Capture::stop`] sends a sentinel frame into the host from the
/// switch's end of the pair (behind everything the switch sent on the same veth, and never seen
/// by the switch, whose sockets ignore outgoing frames), waits until the sentinel is in the file,
/// and only then stops tcpdump.
#[derive(Debug)]
pub struct Capture {
    process: Option<Background>,
    pub file: PathBuf,
    switch_ns: String,
    switch_device: String,
}

impl Capture {
    /// Starts capturing on `eth0` of host `i` with `filter`; returns once tcpdump listens.
    pub fn start(lab: &Lab, i: usize, filter: &str, file: PathBuf) -> Self {
        let file_arg = file.to_string_lossy().into_owned();
        let filter = format!(
            "({filter}) or ether src {}",
            lab_config::mac_text(SENTINEL_MAC)
        );
        let command = lab.host_cmd(
            i,
            "tcpdump",
            &[
                "-i",
                lab_config::HOST_DEVICE,
                "-n",
                "--immediate-mode",
                "-U",
                "-Z",
                "root",
                "--time-stamp-precision=micro",
                "-w",
                &file_arg,
                &filter,
            ],
        );
        let process = Background::spawn(command);
        let listening = eventually(DEADLINE, || process.stderr().contains("listening on"));
        assert!(listening, "tcpdump did not start: {}", process.stderr());
        Self {
            process: Some(process),
            file,
            switch_ns: lab.switch_ns(),
            switch_device: lab_config::switch_device(i),
        }
    }

    /// Whether the file holds the sentinel yet (a partly written last record is ignored).
    fn has_sentinel(&self) -> bool {
        let Ok(file) = File::open(&self.file) else {
            return false;
        };
        let Ok(mut reader) = pcap_file::pcap::PcapReader::new(BufReader::new(file)) else {
            return false;
        };
        while let Some(Ok(packet)) = reader.next_packet() {
            if packet.data.get(6..12) == Some(&SENTINEL_MAC[..]) {
                return true;
            }
        }
        false
    }

    /// Stops tcpdump once everything sent to the host so far is in the file, and checks that
    /// the kernel dropped nothing.
    pub fn stop(&mut self) {
        let Some(mut process) = self.process.take() else {
            return;
        };
        let sentinel = RawSocket::open(&self.switch_ns, &self.switch_device, 0);
        let frame = test_frame([0xFF; 6], SENTINEL_MAC, 0x5E47, 60);
        let arrived = eventually(DEADLINE, || {
            // Resent until seen: the first may race tcpdump's start-up.
            let _ = sentinel.send(&frame);
            self.has_sentinel()
        });
        assert!(
            arrived,
            "the capture sentinel never reached {}",
            self.file.display()
        );
        signal(&process.child, libc::SIGINT);
        let status = wait_deadline(&mut process.child, DEADLINE);
        assert!(status.is_some(), "tcpdump did not stop");
        let finished = eventually(Duration::from_secs(2), || {
            process.stderr().contains("dropped by kernel")
        });
        let stderr = process.stderr();
        assert!(finished, "tcpdump printed no statistics: {stderr}");
        assert!(
            stderr
                .lines()
                .any(|l| l.trim() == "0 packets dropped by kernel"),
            "tcpdump lost packets, the capture is incomplete: {stderr}"
        );
    }

    /// Stops the capture and decodes it with tshark: one row of `fields` per frame matching
    /// `display_filter` (the sentinel excluded).
    pub fn fields(&mut self, display_filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
        self.stop();
        let not_sentinel = format!("eth.src != {}", lab_config::mac_text(SENTINEL_MAC));
        let filter = if display_filter.is_empty() {
            not_sentinel
        } else {
            format!("({display_filter}) && {not_sentinel}")
        };
        tshark_fields(&self.file, &filter, fields)
    }
}

/// `tshark -r FILE -Y FILTER -T fields -e F...`, split into rows of fields.
pub fn tshark_fields(file: &Path, display_filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let mut command = Command::new("tshark");
    command
        .arg("-r")
        .arg(file)
        .args(["-T", "fields", "-E", "separator=|"]);
    if !display_filter.is_empty() {
        command.args(["-Y", display_filter]);
    }
    for f in fields {
        command.args(["-e", f]);
    }
    let out = run_ok(&mut command);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}

/// A plain AF_PACKET socket on one interface of a namespace, for sending and receiving raw
/// frames (the wire side of a test, independent of the switch's code).
#[derive(Debug)]
pub struct RawSocket {
    fd: OwnedFd,
}

fn check(rc: libc::c_int) -> std::io::Result<libc::c_int> {
    if rc < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl RawSocket {
    /// A socket on `device` in `namespace` receiving frames of `ethertype` (0: receives nothing,
    /// send only; `ETH_P_ALL`: everything).
    pub fn open(namespace: &str, device: &str, ethertype: u16) -> Self {
        let namespace = namespace.to_owned();
        let device = device.to_owned();
        // A packet socket stays in the namespace it was created in; make it on a thread that
        // entered the namespace, so the test's threads never change namespace.
        std::thread::spawn(move || {
            let _inside = NetnsGuard::enter(&namespace).expect("entering the namespace");
            let protocol = ethertype.to_be();
            // SAFETY: plain syscall; the result is checked.
            let fd = check(unsafe {
                libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol))
            })
            .expect("packet socket");
            // SAFETY: a fresh descriptor nothing else owns.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let name = CString::new(device.clone()).expect("name");
            // SAFETY: `name` is a valid NUL-terminated string.
            let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
            assert_ne!(ifindex, 0, "no interface {device} in {namespace}");
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = protocol;
            addr.sll_ifindex = i32::try_from(ifindex).expect("ifindex");
            // SAFETY: `addr` is a valid sockaddr_ll of the length given.
            check(unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    std::ptr::from_ref(&addr).cast(),
                    size_of::<libc::sockaddr_ll>() as u32,
                )
            })
            .expect("bind packet socket");
            Self { fd }
        })
        .join()
        .expect("socket thread")
    }

    /// Sets the receive buffer to `bytes` (SO_RCVBUFFORCE, root only), so that a burst the test
    /// reads only after it arrived is not dropped by the kernel (the default holds about a
    /// hundred full-size frames).
    pub fn set_receive_buffer(&self, bytes: usize) {
        let value = libc::c_int::try_from(bytes).expect("buffer size");
        // SAFETY: `value` is a valid c_int of the length given; the socket is ours.
        let rc = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUFFORCE,
                std::ptr::from_ref(&value).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        check(rc).expect("SO_RCVBUFFORCE");
    }

    /// Sends one frame as it is (no padding, no FCS).
    pub fn send(&self, frame: &[u8]) -> std::io::Result<()> {
        // SAFETY: the buffer is valid for its length; the socket is bound to an interface.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        if n < 0 {
            return Err(std::io::Error::last_os_error());
        }
        assert_eq!(n as usize, frame.len(), "short send");
        Ok(())
    }

    /// The next frame received from the wire (frames this host sent are skipped), waiting at
    /// most `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut buf = vec![0u8; 65536];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let mut pfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&mut pfd, 1, ms) };
            if ready <= 0 {
                return None;
            }
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = size_of::<libc::sockaddr_ll>() as libc::socklen_t;
            // SAFETY: buffer and address are valid for the lengths given.
            let n = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                    std::ptr::from_mut(&mut from).cast(),
                    &mut from_len,
                )
            };
            if n < 0 {
                continue;
            }
            if from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(buf[..n as usize].to_vec());
        }
    }

    /// Everything received within `timeout`.
    pub fn drain(&self, timeout: Duration) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut frames = Vec::new();
        while let Some(f) = self.recv(deadline.saturating_duration_since(Instant::now())) {
            frames.push(f);
        }
        frames
    }
}

/// An Ethernet frame of `TEST_ETHERTYPE` carrying `tag` and padded to `len` bytes.
pub fn test_frame(dst: [u8; 6], src: [u8; 6], tag: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len.max(18));
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f.extend_from_slice(&tag.to_be_bytes());
    f.resize(len.max(18), 0xA5);
    f
}

/// The tag of a [`test_frame`], if the frame is one.
pub fn test_frame_tag(frame: &[u8]) -> Option<u32> {
    (frame.len() >= 18 && frame[12..14] == TEST_ETHERTYPE.to_be_bytes())
        .then(|| u32::from_be_bytes([frame[14], frame[15], frame[16], frame[17]]))
}

/// An IPv4/UDP frame from host `from` to host `to` with `dscp`, `payload_len` bytes of payload.
pub fn udp_frame(from: usize, to: usize, dscp: u8, dst_port: u16, payload_len: usize) -> Vec<u8> {
    let mut ip = etherparse::Ipv4Header::new(
        0,
        64,
        etherparse::IpNumber::UDP,
        lab_config::host_ipv4(from).octets(),
        lab_config::host_ipv4(to).octets(),
    )
    .expect("IPv4 header");
    ip.dscp = etherparse::Ipv4Dscp::try_new(dscp).expect("dscp");
    let builder =
        etherparse::PacketBuilder::ethernet2(lab_config::host_mac(from), lab_config::host_mac(to))
            .ip(etherparse::IpHeaders::Ipv4(ip, Default::default()));
    let builder = builder.udp(40000 + u16::from(dscp), dst_port);
    let payload = vec![0x5A; payload_len];
    let mut frame = Vec::with_capacity(builder.size(payload_len));
    builder
        .write(&mut frame, &payload)
        .expect("building a UDP frame");
    frame
}

/// A 60-byte IEEE 802.1Qbb PFC frame from `src`: `class_enable_vector` (16 bits as on the wire)
/// and the eight pause times.
pub fn pfc_frame(src: [u8; 6], class_enable_vector: u16, quanta: [u16; 8]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x8808u16.to_be_bytes());
    f[14..16].copy_from_slice(&0x0101u16.to_be_bytes());
    f[16..18].copy_from_slice(&class_enable_vector.to_be_bytes());
    for (i, q) in quanta.iter().enumerate() {
        f[18 + 2 * i..20 + 2 * i].copy_from_slice(&q.to_be_bytes());
    }
    // Cross-check against headroom-wire's own encoder when the frame is valid.
    if class_enable_vector <= 0xFF {
        let repr =
            headroom_wire::mac_control::MacControlRepr::Pfc(headroom_wire::mac_control::PfcRepr {
                class_enable: class_enable_vector as u8,
                pause_quanta: quanta,
            });
        let mut expected = [0u8; 60];
        repr.emit_frame(headroom_wire::ethernet::MacAddress(src), &mut expected)
            .expect("emit");
        assert_eq!(f, expected);
    }
    f
}

/// Pause time of `quanta` at `speed_bps` (802.1Qbb: one quantum is 512 bit times).
pub fn pause_duration(quanta: u16, speed_bps: u64) -> Duration {
    Duration::from_nanos(u64::from(quanta) * 512 * 1_000_000_000 / speed_bps)
}

/// SCHED_FIFO priority of the test's traffic generators: below the switch, above everything
/// ordinary. A generator descheduled for a hundred milliseconds by a compiler on the same CPU
/// leaves a hole in the "sustained" congestion it is meant to create (seen: an XON in the middle
/// of a PFC test at load 7).
const SENDER_RT_PRIORITY: libc::c_int = 5;

/// Makes the calling thread SCHED_FIFO at `priority`.
fn make_realtime(priority: libc::c_int) {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: pid 0 is the calling thread; `param` is a valid sched_param.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    assert_eq!(
        rc,
        0,
        "cannot make the traffic generator SCHED_FIFO: {}",
        std::io::Error::last_os_error()
    );
}

/// Sends `frames` in a round robin from a packet socket in `namespace` at `frames_per_second`
/// until `stop` is set; returns how many were sent. Paced in 1 ms steps, SCHED_FIFO.
pub fn send_paced(
    namespace: &str,
    frames: Vec<Vec<u8>>,
    frames_per_second: u64,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    let socket = RawSocket::open(namespace, lab_config::HOST_DEVICE, 0);
    std::thread::spawn(move || {
        make_realtime(SENDER_RT_PRIORITY);
        let start = Instant::now();
        let mut sent: u64 = 0;
        while !stop.load(Ordering::Relaxed) {
            let due = start.elapsed().as_nanos() as u64 * frames_per_second / 1_000_000_000;
            while sent < due {
                let frame = &frames[(sent % frames.len() as u64) as usize];
                // A full socket buffer (ENOBUFS) is a frame the wire never saw: retry later.
                if socket.send(frame).is_err() {
                    break;
                }
                sent += 1;
            }
            // Pacing a traffic generator, not waiting for a condition.
            std::thread::sleep(Duration::from_millis(1));
        }
        sent
    })
}

/// Extracts a float field from iperf3's JSON output (`end.sum_received.bits_per_second`...).
pub fn iperf3_json(output: &str, path: &[&str]) -> f64 {
    let json: serde_json::Value =
        serde_json::from_str(output).unwrap_or_else(|e| panic!("iperf3 JSON: {e}\n{output}"));
    let mut v = &json;
    for key in path {
        v = &v[*key];
    }
    v.as_f64()
        .unwrap_or_else(|| panic!("no {path:?} in iperf3 output:\n{output}"))
}

/// Waits until a TCP port listens in host `i` (an iperf3 server started in the background).
pub fn wait_listening(lab: &Lab, i: usize, port: u16) {
    let ok = eventually(DEADLINE, || {
        let out = lab
            .host_cmd(i, "ss", &["-Htln", &format!("sport = :{port}")])
            .output()
            .expect("ss");
        !String::from_utf8_lossy(&out.stdout).trim().is_empty()
    });
    assert!(ok, "nothing listens on TCP port {port} in host {i}");
}
