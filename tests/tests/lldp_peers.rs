//! headroom's LLDP/DCBX agent against the real host-side agents, lldpad (Intel's DCBX agent,
//! `lldptool`) and lldpd, over a veth pair between two network namespaces. No switch: the agent
//! is driven directly, sending and receiving through an AF_PACKET socket on its end of the veth
//! (the running switch drives it through the dataplane's punt/inject path instead, tested
//! against the same agents in crates/cli/tests/lldp.rs).
//!
//! What is checked (routing-fabric-dcbx.md §7.4 and §8):
//! * lldpad decodes our ETS Configuration, ETS Recommendation, PFC and APP TLVs as its
//!   neighbour's (`lldptool -t -n -i eth0 -V …`) with the values of our configuration;
//! * lldpad refuses to apply DCB on a veth ("Device not capable", "does not support DCB" in its
//!   log): printed, so a run shows it, not asserted as a feature;
//! * our agent decodes lldpad's LLDPDU (plain LLDP on a veth) and lldpd's, and lists them as
//!   neighbours with their TTL; lldpd lists us with our chassis, port and system name;
//! * a shutdown LLDPDU makes lldpd forget us at once.
//!
//! Needs root (namespaces), lldpad, lldptool, lldpd, lldpcli and unshare; a missing tool fails the
//! test with what to install. Takes the machine-wide lab lock (one end-to-end test at a time).

use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use headroom_afpacket::lab::NetnsGuard;
use headroom_afpacket::{AfPacketConfig, AfPacketPort, AfPacketRx, AfPacketTx};
use headroom_core::frame::Frame;
use headroom_core::time::Instant;
use headroom_io::{FramePool, PoolConfig, PoolFrame, RxQueue, TxQueue};
use headroom_lldp::{local_view, Agent, DcbxStatus, Event, Finding};

const E2E_LOCK_PATH: &str = "/run/lock/headroom-e2e.lock";

/// Held for one test: nextest runs each test in its own process, so a file lock.
struct Serial(#[allow(dead_code)] File);

fn serial() -> Serial {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(E2E_LOCK_PATH)
        .unwrap_or_else(|e| panic!("opening {E2E_LOCK_PATH}: {e}"));
    file.lock()
        .unwrap_or_else(|e| panic!("locking {E2E_LOCK_PATH}: {e}"));
    Serial(file)
}

fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2).map(str::to_owned));
    assert_eq!(
        euid.as_deref(),
        Some("0"),
        "these tests create network namespaces: run them as root (scripts/test.sh does)"
    );
}

fn require_tool(tool: &str, package: &str) {
    let found = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
        .unwrap_or(false)
        || Path::new("/usr/sbin").join(tool).is_file();
    assert!(
        found,
        "{tool} is required by this test but is not installed: `apt-get install -y {package}` \
         (scripts/test.sh installs it)"
    );
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"))
}

#[track_caller]
fn run_ok(program: &str, args: &[&str]) -> String {
    let out = run(program, args);
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two namespaces joined by a veth: `swp0` in the switch namespace, `eth0` in the host's. Removed
/// (with the veth) on drop.
struct Lab {
    switch_ns: String,
    host_ns: String,
    dir: tempfile::TempDir,
}

impl Lab {
    fn new() -> Lab {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let lab = Lab {
            switch_ns: format!("hrlldp-sw-{pid}-{n}"),
            host_ns: format!("hrlldp-h-{pid}-{n}"),
            dir: tempfile::tempdir().unwrap(),
        };
        run_ok("ip", &["netns", "add", &lab.switch_ns]);
        run_ok("ip", &["netns", "add", &lab.host_ns]);
        run_ok(
            "ip",
            &[
                "link",
                "add",
                "swp0",
                "netns",
                &lab.switch_ns,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &lab.host_ns,
            ],
        );
        for (ns, dev) in [(&lab.switch_ns, "swp0"), (&lab.host_ns, "eth0")] {
            // No IPv6: the kernel would send router solicitations and MLD reports on the link.
            lab.in_ns(ns, "sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            run_ok("ip", &["-n", ns, "link", "set", dev, "up"]);
        }
        lab
    }

    fn in_ns(&self, ns: &str, program: &str, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", ns, program];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// A program in the host namespace; its stdout and stderr, whatever its exit status.
    fn host(&self, program: &str, args: &[&str]) -> String {
        let out = self.in_ns(&self.host_ns, program, args);
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    }

    fn host_mac(&self) -> [u8; 6] {
        let text = run_ok("ip", &["-n", &self.host_ns, "-br", "link", "show", "eth0"]);
        let mac = text.split_whitespace().nth(2).expect("ip -br link output");
        let bytes: Vec<u8> = mac
            .split(':')
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect();
        bytes.try_into().unwrap()
    }

    /// Starts a daemon in the host namespace in its own process group, output to `log`.
    fn spawn_host(&self, log: &str, program: &str, args: &[&str]) -> Daemon {
        use std::os::unix::process::CommandExt;
        let log_path = self.dir.path().join(log);
        let out = File::create(&log_path).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", &self.host_ns, program])
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"));
        Daemon {
            child,
            log: log_path,
        }
    }

    fn open_switch_port(&self) -> (AfPacketRx, AfPacketTx, FramePool) {
        let _inside = NetnsGuard::enter(&self.switch_ns).expect("entering the switch namespace");
        let pool = FramePool::new(PoolConfig::with_frame_count(256)).expect("pool");
        let port = AfPacketPort::open("swp0", pool.clone(), &AfPacketConfig::default())
            .unwrap_or_else(|e| panic!("opening swp0: {e}"));
        let (rx, tx) = port.split();
        (rx, tx, pool)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.switch_ns, &self.host_ns] {
            let _ = run("ip", &["netns", "del", ns]);
        }
    }
}

/// A daemon we started; terminated (its whole process group: lldpd forks a privilege-separated
/// child) on drop.
struct Daemon {
    child: Child,
    log: std::path::PathBuf,
}

impl Daemon {
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pgid = self.child.id() as i32;
        // SAFETY: kill(2) with a negative pid signals the process group we created for this
        // child (process_group(0)); no memory is involved.
        unsafe {
            libc::kill(-pgid, libc::SIGTERM);
        }
        for _ in 0..50 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// Our agent on `swp0`: the driver loop the runtime's control thread will run (real time in,
/// frames in and out through AF_PACKET).
struct Switch {
    agent: Agent,
    rx: AfPacketRx,
    tx: AfPacketTx,
    pool: FramePool,
    start: std::time::Instant,
    events: Vec<Event>,
    sent: usize,
}

const CONFIG: &str = "[switch]\nname = \"leaf1\"\nmac = \"02:aa:00:00:00:00\"\n\
    [port.Ethernet0]\ndevice = \"swp0\"\nspeed = \"10G\"\n";

impl Switch {
    fn start(lab: &Lab, config: &str) -> Switch {
        let (config, _) = headroom_config::parse(config, "lldp.toml").expect("config");
        let (system, ports) = local_view(&config);
        let (rx, tx, pool) = lab.open_switch_port();
        let start = std::time::Instant::now();
        let agent = Agent::new(system, ports, Instant::ZERO);
        let mut switch = Switch {
            agent,
            rx,
            tx,
            pool,
            start,
            events: Vec::new(),
            sent: 0,
        };
        switch.flush();
        switch
    }

    fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap())
    }

    fn flush(&mut self) {
        let mut out = Vec::new();
        while let Some(t) = self.agent.poll_transmit() {
            out.push(self.pool.alloc_copy(&t.frame).expect("pool frame"));
        }
        while !out.is_empty() {
            let n = out.len();
            self.sent += self.tx.tx_burst(&mut out);
            assert!(out.len() < n, "AF_PACKET took no frame");
        }
        while let Some(e) = self.agent.poll_event() {
            eprintln!("agent event: {e:?}");
            self.events.push(e);
        }
    }

    /// Runs the driver loop for `duration`.
    fn pump(&mut self, duration: Duration) {
        let until = self.start.elapsed() + duration;
        let mut frames: Vec<PoolFrame> = Vec::new();
        while self.start.elapsed() < until {
            self.rx.rx_burst(&mut frames, 32);
            for frame in frames.drain(..) {
                let data = frame.data();
                if data.len() >= 14 && data[12..14] == [0x88, 0xCC] {
                    let now = self.now();
                    self.agent.handle_rx(0, data, now);
                }
            }
            let now = self.now();
            if self.agent.poll_timeout().is_some_and(|t| t <= now) {
                self.agent.handle_timeout(now);
            }
            self.flush();
            let _ = self.rx.wait_readable(Duration::from_millis(20));
        }
    }

    /// Pumps until `done` holds or `limit` passes; returns whether it held.
    fn pump_until(&mut self, limit: Duration, mut done: impl FnMut(&Switch) -> bool) -> bool {
        let until = self.start.elapsed() + limit;
        while self.start.elapsed() < until {
            if done(self) {
                return true;
            }
            self.pump(Duration::from_millis(100));
        }
        done(self)
    }
}

/// Retries `probe` (a command's output) until `accept` holds, pumping the switch meanwhile.
fn wait_for(
    switch: &mut Switch,
    limit: Duration,
    mut probe: impl FnMut() -> String,
    accept: impl Fn(&str) -> bool,
) -> String {
    let until = std::time::Instant::now() + limit;
    loop {
        let out = probe();
        if accept(&out) || std::time::Instant::now() >= until {
            return out;
        }
        switch.pump(Duration::from_millis(250));
    }
}

fn start_lldpad(lab: &Lab) -> Daemon {
    let conf = lab.dir.path().join("lldpad.conf");
    let conf = conf.to_str().unwrap().to_owned();
    // lldpad keeps per-interface state, the chassis ID included, in /dev/shm/lldpad.state,
    // keyed by interface name and shared by every lldpad on the machine whatever its network
    // namespace: a second lldpad on another "eth0" advertises the first one's chassis ID. So it
    // gets its own mount and IPC namespaces with a private /dev/shm, no PID file and its own
    // configuration file: nothing it does meets another lldpad, and nothing outlives it.
    let command = format!("mount -t tmpfs lldpad-shm /dev/shm && exec lldpad -t -V 7 -p -f {conf}");
    let daemon = lab.spawn_host(
        "lldpad.log",
        "unshare",
        &[
            "--ipc",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            &command,
        ],
    );
    let mut up = false;
    for _ in 0..100 {
        if lab
            .in_ns(&lab.host_ns, "lldptool", &["-p"])
            .status
            .success()
        {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "lldpad did not come up; its log:\n{}", daemon.log());
    daemon
}

#[test]
fn lldpad_decodes_our_dcbx_and_we_decode_lldpad() {
    require_root();
    for (tool, package) in [
        ("lldpad", "lldpad"),
        ("lldptool", "lldpad"),
        ("unshare", "util-linux"),
    ] {
        require_tool(tool, package);
    }
    let _serial = serial();
    let lab = Lab::new();
    let lldpad = start_lldpad(&lab);
    let mut switch = Switch::start(&lab, CONFIG);

    // What a user does on a host with a DCB-capable NIC (docs/operations.md): LLDP on, the
    // 802.1Qaz TLVs advertised, willing. On a veth every DCB setting is refused.
    let mut host_side = Vec::new();
    for args in [
        &["-L", "-i", "eth0", "adminStatus=rxtx"][..],
        &[
            "-T",
            "-i",
            "eth0",
            "-V",
            "ETS-CFG",
            "enableTx=yes",
            "willing=yes",
        ],
        &[
            "-T",
            "-i",
            "eth0",
            "-V",
            "PFC",
            "enableTx=yes",
            "willing=yes",
        ],
        &["-T", "-i", "eth0", "-V", "APP", "enableTx=yes"],
    ] {
        let out = lab.host("lldptool", args);
        eprintln!("lldptool {}: {}", args.join(" "), out.trim());
        host_side.push(out);
    }
    assert!(
        host_side[0].contains("adminStatus = rxtx"),
        "{}",
        host_side[0]
    );

    // lldpad sees our LLDPDUs and decodes every 802.1Qaz TLV (fast start sends within a second).
    let pfc = wait_for(
        &mut switch,
        Duration::from_secs(10),
        || lab.host("lldptool", &["-t", "-n", "-i", "eth0", "-V", "PFC"]),
        |out| out.contains("PFC enabled"),
    );
    eprintln!("lldptool -t -n -i eth0 -V PFC:\n{pfc}");
    assert!(pfc.contains("IEEE 8021QAZ PFC TLV"), "{pfc}");
    assert!(pfc.contains("Willing: no"), "{pfc}");
    assert!(pfc.contains("MACsec Bypass Capable: no"), "{pfc}");
    assert!(pfc.contains("PFC capable traffic classes: 8"), "{pfc}");
    assert!(pfc.contains("PFC enabled: 3 4"), "{pfc}");

    let app = lab.host("lldptool", &["-t", "-n", "-i", "eth0", "-V", "APP"]);
    eprintln!("lldptool -t -n -i eth0 -V APP:\n{app}");
    assert!(app.contains("IEEE 8021QAZ APP TLV"), "{app}");
    // RoCEv2 first (priority 3, UDP 4791), then the lossless DSCPs of the AZURE map (3 → 3, 4 → 4).
    let first = app
        .lines()
        .find(|l| l.contains("App#"))
        .unwrap_or_else(|| panic!("no APP entries: {app}"));
    assert!(
        first.contains("Prio 3") && first.contains("Sel 3") && first.contains("4791"),
        "{app}"
    );
    for dscp_line in ["Prio:3 \t dscp:  03,", "Prio:4 \t dscp:  04,"] {
        assert!(app.contains(dscp_line), "missing {dscp_line:?} in {app}");
    }

    let ets = lab.host("lldptool", &["-t", "-n", "-i", "eth0", "-V", "ETS-CFG"]);
    eprintln!("lldptool -t -n -i eth0 -V ETS-CFG:\n{ets}");
    assert!(ets.contains("IEEE 8021QAZ ETS Configuration TLV"), "{ets}");
    assert!(ets.contains("Willing: no"), "{ets}");
    assert!(
        ets.contains("PRIO_MAP: 0:0 1:1 2:2 3:3 4:4 5:5 6:6 7:7"),
        "{ets}"
    );
    assert!(
        ets.contains("TC Bandwidth: 13% 13% 12% 13% 13% 12% 12% 12%"),
        "{ets}"
    );
    assert!(
        ets.contains("TSA_MAP: 0:ets 1:ets 2:ets 3:ets 4:ets 5:ets 6:ets 7:ets"),
        "{ets}"
    );
    let rec = lab.host("lldptool", &["-t", "-n", "-i", "eth0", "-V", "ETS-REC"]);
    eprintln!("lldptool -t -n -i eth0 -V ETS-REC:\n{rec}");
    assert!(rec.contains("IEEE 8021QAZ ETS Recommendation TLV"), "{rec}");
    assert!(
        rec.contains("TC Bandwidth: 13% 13% 12% 13% 13% 12% 12% 12%"),
        "{rec}"
    );

    // And the basic TLVs: chassis, port, TTL, system name.
    let all = lab.host("lldptool", &["-t", "-n", "-i", "eth0"]);
    eprintln!("lldptool -t -n -i eth0:\n{all}");
    assert!(all.contains("MAC: 02:aa:00:00:00:00"), "{all}");
    assert!(all.contains("Ifname: Ethernet0"), "{all}");
    assert!(all.contains("120"), "{all}");
    assert!(all.contains("leaf1"), "{all}");

    // Our agent decodes lldpad's LLDPDU (plain LLDP: lldpad sends no DCBX on a veth).
    let host_mac = lab.host_mac();
    let heard = switch.pump_until(Duration::from_secs(10), |s| {
        s.agent
            .port(0)
            .unwrap()
            .neighbours
            .iter()
            .any(|n| n.id.chassis_id.0.as_mac() == Some(host_mac))
    });
    let view = switch.agent.port(0).unwrap();
    assert!(heard, "no neighbour from lldpad: {:?}", view.neighbours);
    let neighbour = &view.neighbours[0];
    eprintln!("our neighbour table: {neighbour:?}");
    assert_eq!(neighbour.info.ttl_s, 120);
    assert_eq!(
        neighbour.id.port_id.0.as_mac(),
        Some(host_mac),
        "lldpad: port ID = MAC"
    );
    assert_eq!(
        view.counters.rx_frames_errors_total(),
        0,
        "{:?}",
        view.counters
    );
    assert_eq!(view.verdict.status, DcbxStatus::NoDcbx);

    // Adoption. lldpad applies a willing host's peer configuration through the driver's dcbnl
    // operations; a veth has none ("Adapter eth0 does not support DCB." in its log, and every
    // DCB setting above answered "Device not capable"). Where the interface can, the local PFC
    // must now be ours.
    let mut log = String::new();
    for _ in 0..20 {
        log = lldpad.log();
        if log.contains("does not support DCB") {
            break;
        }
        switch.pump(Duration::from_millis(250));
    }
    let notes: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("DCB") || l.contains("dcb mode") || l.contains("GDCBX"))
        .collect();
    eprintln!("lldpad log, DCB lines:\n{}", notes.join("\n"));
    let local_pfc = lab.host(
        "lldptool",
        &["-t", "-i", "eth0", "-V", "PFC", "-c", "enabled"],
    );
    eprintln!(
        "lldptool -t -i eth0 -V PFC -c enabled: {:?}",
        local_pfc.trim()
    );
    if log.contains("does not support DCB") {
        assert!(
            host_side[1..]
                .iter()
                .all(|o| o.contains("Device not capable")),
            "lldpad says eth0 has no DCB but accepted a DCB setting: {host_side:?}"
        );
    } else {
        assert!(
            local_pfc.contains("enabled=3,4"),
            "eth0 supports DCB and lldpad is willing, but it did not adopt PFC 3,4: {local_pfc}"
        );
    }
    drop(switch);
    drop(lldpad);
}

fn start_lldpd(lab: &Lab) -> (Daemon, String) {
    let socket = lab.dir.path().join("lldpd.socket");
    let socket = socket.to_str().unwrap().to_owned();
    let conf = lab.dir.path().join("lldpd.conf");
    std::fs::write(&conf, "").unwrap();
    // lldpd chroots its unprivileged half into /run/lldpd.
    std::fs::create_dir_all("/run/lldpd").unwrap();
    let daemon = lab.spawn_host(
        "lldpd.log",
        "lldpd",
        &[
            "-d",
            "-u",
            &socket,
            "-O",
            conf.to_str().unwrap(),
            "-S",
            "host h1",
        ],
    );
    let mut up = false;
    for _ in 0..100 {
        if lab
            .in_ns(&lab.host_ns, "lldpcli", &["-u", &socket, "show", "chassis"])
            .status
            .success()
        {
            up = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(up, "lldpd did not come up; its log:\n{}", daemon.log());
    (daemon, socket)
}

#[test]
fn lldpd_neighbours_both_ways() {
    require_root();
    for (tool, package) in [("lldpd", "lldpd"), ("lldpcli", "lldpd")] {
        require_tool(tool, package);
    }
    let _serial = serial();
    let lab = Lab::new();
    let (lldpd, socket) = start_lldpd(&lab);
    let mut switch = Switch::start(&lab, CONFIG);
    let neighbours = || {
        lab.host(
            "lldpcli",
            &[
                "-u",
                &socket,
                "-f",
                "keyvalue",
                "show",
                "neighbors",
                "details",
            ],
        )
    };
    let out = wait_for(&mut switch, Duration::from_secs(15), neighbours, |o| {
        o.contains("Ethernet0")
    });
    eprintln!("lldpcli show neighbors details:\n{out}");
    for want in [
        "lldp.eth0.chassis.mac=02:aa:00:00:00:00",
        "lldp.eth0.chassis.name=leaf1",
        "lldp.eth0.port.ifname=Ethernet0",
        "lldp.eth0.port.descr=swp0",
        "lldp.eth0.port.ttl=120",
        "lldp.eth0.chassis.Bridge.enabled=on",
    ] {
        assert!(out.contains(want), "missing {want:?}:\n{out}");
    }

    // lldpd's LLDPDU as we decode it: its chassis, port and system description.
    let heard = switch.pump_until(Duration::from_secs(15), |s| {
        !s.agent.port(0).unwrap().neighbours.is_empty()
    });
    let view = switch.agent.port(0).unwrap();
    assert!(heard, "no neighbour from lldpd: {:?}", view.counters);
    let n = &view.neighbours[0];
    eprintln!("our neighbour table: {n:?}");
    assert_eq!(n.info.system_description.as_deref(), Some("host h1"));
    assert_eq!(n.info.ttl_s, 120);
    assert_eq!(n.id.port_id.0.as_mac(), Some(lab.host_mac()));
    assert_eq!(
        view.counters.rx_frames_errors_total(),
        0,
        "{:?}",
        view.counters
    );
    assert_eq!(
        view.counters.rx_tlvs_discarded_total, 0,
        "{:?}",
        view.counters
    );
    assert_eq!(view.verdict.status, DcbxStatus::NoDcbx, "lldpd has no DCBX");

    // A host that is not willing and pauses other priorities, RoCE on a lossy one: lldpd has no
    // DCBX, but sends any organisationally specific TLV it is given, so it plays that host (PFC
    // Configuration: willing 0, cap 8, PFC on 3 only; APP: RoCEv2 on priority 5).
    for args in [
        &[
            "configure",
            "lldp",
            "custom-tlv",
            "oui",
            "00,80,c2",
            "subtype",
            "11",
            "oui-info",
            "08,08",
        ][..],
        &[
            "configure",
            "lldp",
            "custom-tlv",
            "oui",
            "00,80,c2",
            "subtype",
            "12",
            "oui-info",
            "00,a3,12,b7",
        ],
    ] {
        let mut full = vec!["-u", socket.as_str()];
        full.extend_from_slice(args);
        let out = lab.in_ns(&lab.host_ns, "lldpcli", &full);
        assert!(
            out.status.success(),
            "lldpcli {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // lldpd sends at once after each change, so the verdict gets there in one or two steps.
    let expected = [
        Finding::PeerPfcOffLosslessPriorities { priorities: 0x10 },
        Finding::RoceOnLossyPriority { priority: 5 },
        Finding::PeerNotWilling,
    ];
    let judged = switch.pump_until(Duration::from_secs(40), |s| {
        s.agent.port(0).unwrap().verdict.findings == expected
    });
    let view = switch.agent.port(0).unwrap();
    assert!(judged, "not the expected verdict: {:?}", view.verdict);
    assert_eq!(view.verdict.status, DcbxStatus::Mismatch);
    eprintln!("verdict against lldpd's DCBX TLVs: {:?}", view.verdict);
    // The same LLDPDU again (`lldpcli update` sends now): refreshed, no new event.
    let verdict_events = |s: &Switch| {
        s.events
            .iter()
            .filter(|e| matches!(e, Event::VerdictChanged { .. }))
            .count()
    };
    let before = verdict_events(&switch);
    let last_update = view.neighbours[0].last_update;
    let out = lab.in_ns(&lab.host_ns, "lldpcli", &["-u", &socket, "update"]);
    assert!(out.status.success());
    let refreshed = switch.pump_until(Duration::from_secs(5), |s| {
        s.agent.port(0).unwrap().neighbours[0].last_update > last_update
    });
    assert!(refreshed, "lldpd did not send again");
    assert_eq!(verdict_events(&switch), before, "{:?}", switch.events);

    // A shutdown LLDPDU: lldpd forgets us at once, not after 120 s.
    let now = switch.now();
    switch.agent.shutdown(now);
    switch.flush();
    let out = wait_for(&mut switch, Duration::from_secs(5), neighbours, |o| {
        !o.contains("Ethernet0")
    });
    assert!(!out.contains("Ethernet0"), "lldpd still lists us:\n{out}");
    drop(lldpd);
}
