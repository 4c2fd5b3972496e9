//! Two headroom routers and FRR (issue 13 item 6): switches S1 and S2, each `headroom run` in its
//! own namespace with two routed ports, FRR (zebra + bgpd) in each namespace peering eBGP over a
//! /31 on their host interfaces, a host behind each:
//!
//! ```text
//! h0 10.1.0.0/31 -- Ethernet0 [S1 AS65001] Ethernet1 -- 10.0.0.0/31 -- Ethernet1 [S2 AS65002] Ethernet0 -- 10.2.0.0/31 h1
//! ```
//!
//! Each switch announces its host's /31; bgpd learns the other's, zebra installs it in the
//! kernel, headroom mirrors it (`show ip route`: code `B`), and h0 → h1 crosses both headroom
//! dataplanes: TTL − 2 and a valid checksum at h1 (tshark), both kernels' `Ip: ForwDatagrams`
//! flat while both switches' routed counters rise. The kernels keep IP forwarding on and
//! forward only what is punted to them (the first packets to an unresolved neighbour), which
//! the test shows too, as the contrast that proves the counter is read right.

mod common;

use common::{eventually, require, run_ok, Background, TestLock, HEADROOM};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const FRR_INIT: &str = "/usr/lib/frr/frrinit.sh";

/// Namespaces, FRR instances and files of the test; removed on drop.
struct Rig {
    prefix: String,
    frr: Vec<String>,
    dir: tempfile::TempDir,
}

impl Rig {
    fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    fn run(&self, ns: &str, program: &str, args: &[&str]) -> String {
        let out = run_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.ns(ns), program])
                .args(args),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn socket(&self, switch: &str) -> PathBuf {
        self.dir.path().join(format!("{switch}.sock"))
    }

    /// `headroom show ARGS --json` of a switch.
    fn show(&self, switch: &str, args: &[&str]) -> serde_json::Value {
        let out = run_ok(
            Command::new(HEADROOM)
                .args(["show"])
                .args(args)
                .arg("--json")
                .arg("--socket")
                .arg(self.socket(switch)),
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn forwarded(&self, switch: &str) -> u64 {
        let snmp = self.run(switch, "cat", &["/proc/net/snmp"]);
        let mut ip = snmp.lines().filter(|l| l.starts_with("Ip:"));
        let (names, values) = (ip.next().unwrap(), ip.next().unwrap());
        let column = names
            .split_whitespace()
            .position(|n| n == "ForwDatagrams")
            .unwrap();
        values
            .split_whitespace()
            .nth(column)
            .unwrap()
            .parse()
            .unwrap()
    }

    fn rif(&self, switch: &str, port: &str, key: &str) -> u64 {
        let view = self.show(switch, &["host-interfaces"]);
        view["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["interface"] == port)
            .and_then(|r| r[key].as_u64())
            .unwrap_or_else(|| panic!("{key} of {port} on {switch}: {view:#}"))
    }

    /// Writes FRR's files for `switch` and starts its instance in the switch's namespace.
    fn start_frr(
        &mut self,
        switch: &str,
        asn: u32,
        router_id: Ipv4Addr,
        peer: Ipv4Addr,
        network: &str,
    ) {
        let ns = self.ns(switch);
        let etc = Path::new("/etc/frr").join(&ns);
        std::fs::create_dir_all(&etc).unwrap();
        std::fs::write(
            etc.join("frr.conf"),
            format!(
                "frr defaults datacenter\nhostname {switch}\n\
                 ! Classic routes, not kernel nexthop objects (the mirror takes both).\n\
                 no zebra nexthop kernel enable\n!\nrouter bgp {asn}\n bgp router-id {router_id}\n \
                 no bgp ebgp-requires-policy\n neighbor {peer} remote-as external\n !\n \
                 address-family ipv4 unicast\n  network {network}\n exit-address-family\nexit\n!\n"
            ),
        )
        .unwrap();
        std::fs::write(
            etc.join("daemons"),
            "bgpd=yes\nstaticd=yes\nvtysh_enable=yes\nzebra_options=\"  -A 127.0.0.1 -s 90000000\"\n\
             bgpd_options=\"-A 127.0.0.1\"\nstaticd_options=\"-A 127.0.0.1\"\n",
        )
        .unwrap();
        std::fs::write(etc.join("vtysh.conf"), "service integrated-vtysh-config\n").unwrap();
        run_ok(Command::new("chown").args(["-R", "frr:frr"]).arg(&etc));
        self.frr.push(ns.clone());
        run_ok(
            Command::new("ip")
                .args(["netns", "exec", &ns, FRR_INIT, "start", &ns])
                .stdin(std::process::Stdio::null()),
        );
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        for ns in &self.frr {
            let _ = Command::new("ip")
                .args(["netns", "exec", ns, FRR_INIT, "stop", ns])
                .stdin(std::process::Stdio::null())
                .output();
            let _ = std::fs::remove_dir_all(Path::new("/etc/frr").join(ns));
            let _ = std::fs::remove_dir_all(Path::new("/var/run/frr").join(ns));
        }
        for name in ["h0", "s1", "s2", "h1"] {
            let _ = Command::new("ip")
                .args(["netns", "del", &self.ns(name)])
                .status();
        }
    }
}

/// `headroom run` of one switch in its namespace (real-time, as the lab runs it), until drop.
fn start_switch(rig: &Rig, name: &str, mac: &str) -> Background {
    let config = rig.dir.path().join(format!("{name}.toml"));
    std::fs::write(
        &config,
        format!(
            "[switch]\nname = \"{name}\"\nmac = \"{mac}\"\nlog_format = \"text\"\n\n\
             [port_defaults]\nspeed = \"1G\"\nmtu = 1500\nvlan_mode = \"routed\"\n\n\
             [runtime]\npolling = \"adaptive\"\ncontrol_socket = \"{}\"\nprometheus_enable = false\n\n\
             [port.Ethernet0]\ndevice = \"sw-p0\"\n\n[port.Ethernet1]\ndevice = \"sw-p1\"\n",
            rig.socket(name).display()
        ),
    )
    .unwrap();
    let mut command = Command::new("ip");
    command
        .args([
            "netns",
            "exec",
            &rig.ns(name),
            "chrt",
            "--fifo",
            "10",
            HEADROOM,
            "run",
            "--config",
        ])
        .arg(&config)
        .env("NO_COLOR", "1");
    let switch = Background::spawn(command);
    let ready = eventually(Duration::from_secs(15), || {
        switch.stderr().contains("headroom running")
    });
    assert!(ready, "{name} did not start:\n{}", switch.stderr());
    switch
}

#[test]
fn two_headroom_routers_forward_what_frr_learns_over_ebgp() {
    require(&[
        "ping", "tcpdump", "tshark", "ethtool", "vtysh", "sh", "cat", "chown",
    ]);
    assert!(
        Path::new(FRR_INIT).exists(),
        "this test needs FRR ({FRR_INIT}; Debian: apt-get install frr); it fails rather than skips"
    );
    let _lock = TestLock::acquire();
    let mut rig = Rig {
        prefix: format!("e2e-{}-frr", std::process::id()),
        frr: Vec::new(),
        dir: tempfile::tempdir().unwrap(),
    };
    for name in ["h0", "s1", "s2", "h1"] {
        run_ok(Command::new("ip").args(["netns", "add", &rig.ns(name)]));
        rig.run(name, "ip", &["link", "set", "lo", "up"]);
    }
    // h0 eth0 - s1 sw-p0, s1 sw-p1 - s2 sw-p1, s2 sw-p0 - h1 eth0.
    for (a, a_dev, b, b_dev) in [
        ("h0", "eth0", "s1", "sw-p0"),
        ("s1", "sw-p1", "s2", "sw-p1"),
        ("s2", "sw-p0", "h1", "eth0"),
    ] {
        run_ok(Command::new("ip").args([
            "link",
            "add",
            "tmp-a",
            "netns",
            &rig.ns(a),
            "type",
            "veth",
            "peer",
            "name",
            "tmp-b",
            "netns",
            &rig.ns(b),
        ]));
        rig.run(a, "ip", &["link", "set", "tmp-a", "name", a_dev, "up"]);
        rig.run(b, "ip", &["link", "set", "tmp-b", "name", b_dev, "up"]);
        for (ns, dev) in [(a, a_dev), (b, b_dev)] {
            // No super-frames or unfinished checksums on the wire the switches read.
            rig.run(
                ns,
                "ethtool",
                &[
                    "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
                ],
            );
        }
    }
    for (host, own, via, other) in [
        ("h0", "10.1.0.0/31", "10.1.0.1", "10.2.0.0/31"),
        ("h1", "10.2.0.0/31", "10.2.0.1", "10.1.0.0/31"),
    ] {
        rig.run(host, "ip", &["addr", "add", own, "dev", "eth0"]);
        rig.run(host, "ip", &["route", "add", other, "via", via]);
    }
    for switch in ["s1", "s2"] {
        // IPv6 off: the TAPs' link-local chatter is not what this test looks at.
        rig.run(switch, "sh", &["-c", "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > /proc/sys/net/ipv4/ip_forward"]);
    }
    let s1 = start_switch(&rig, "s1", "02:68:72:00:01:00");
    let s2 = start_switch(&rig, "s2", "02:68:72:00:02:00");
    for (switch, host_side, fabric_side) in [
        ("s1", "10.1.0.1/31", "10.0.0.0/31"),
        ("s2", "10.2.0.1/31", "10.0.0.1/31"),
    ] {
        rig.run(
            switch,
            "ip",
            &["addr", "add", host_side, "dev", "Ethernet0"],
        );
        rig.run(
            switch,
            "ip",
            &["addr", "add", fabric_side, "dev", "Ethernet1"],
        );
    }
    rig.start_frr(
        "s1",
        65001,
        Ipv4Addr::new(10, 0, 0, 0),
        Ipv4Addr::new(10, 0, 0, 1),
        "10.1.0.0/31",
    );
    rig.start_frr(
        "s2",
        65002,
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 0),
        "10.2.0.0/31",
    );

    // bgpd learns the other side's /31 over the host interfaces (BGP's TCP goes TAP → inject →
    // wire → punt ip2me → TAP), zebra installs it, headroom mirrors it.
    let learned = eventually(Duration::from_secs(60), || {
        ["s1", "s2"].iter().all(|s| {
            let want = if *s == "s1" {
                "10.2.0.0/31"
            } else {
                "10.1.0.0/31"
            };
            rig.show(s, &["ip", "route"])["routes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["prefix"] == want && r["code"] == "B" && r["action"] == "forward")
        })
    });
    assert!(
        learned,
        "the BGP routes never reached both dataplanes:\ns1 kernel: {}\ns1 FRR: {}\ns1 headroom: {:#}\ns2 headroom: {:#}\ns1 log:\n{}",
        rig.run("s1", "ip", &["route"]),
        rig.run("s1", "vtysh", &["-N", &rig.ns("s1"), "-c", "show bgp summary"]),
        rig.show("s1", &["ip", "route"]),
        rig.show("s2", &["ip", "route"]),
        s1.stderr()
    );
    let route = rig.run("s1", "ip", &["route", "show", "10.2.0.0/31"]);
    assert!(
        route.contains("proto bgp") && route.contains("via 10.0.0.1"),
        "{route}"
    );

    // Warm-up: the first packets resolve the hosts' neighbours through the kernels.
    let forwarded_at_start = [rig.forwarded("s1"), rig.forwarded("s2")];
    ping(&rig, 3);
    let resolved = eventually(Duration::from_secs(5), || {
        [
            ("s1", "10.1.0.0"),
            ("s2", "10.2.0.0"),
            ("s1", "10.0.0.1"),
            ("s2", "10.0.0.0"),
        ]
        .iter()
        .all(|(s, addr)| {
            rig.show(s, &["ip", "neighbors"])
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["address"] == *addr && n["resolved"] == true)
        })
    });
    assert!(
        resolved,
        "neighbours: {:#} {:#}",
        rig.show("s1", &["ip", "neighbors"]),
        rig.show("s2", &["ip", "neighbors"])
    );
    let forwarded_before = [rig.forwarded("s1"), rig.forwarded("s2")];
    assert!(
        forwarded_before[1] > forwarded_at_start[1],
        "s2's kernel forwarded nothing while it resolved h1 ({forwarded_at_start:?} -> {forwarded_before:?})"
    );
    let rif_before = [
        rig.rif("s1", "Ethernet0", "rif_in_packets"),
        rig.rif("s2", "Ethernet1", "rif_in_packets"),
    ];

    let pcap = rig.dir.path().join("h1.pcap");
    let mut tcpdump = Command::new("ip");
    tcpdump
        .args([
            "netns",
            "exec",
            &rig.ns("h1"),
            "tcpdump",
            "-i",
            "eth0",
            "-n",
            "--immediate-mode",
            "-U",
            "-w",
        ])
        .arg(&pcap)
        .arg("icmp");
    let capture = Background::spawn(tcpdump);
    assert!(
        eventually(Duration::from_secs(10), || capture
            .stderr()
            .contains("listening on")),
        "tcpdump did not start: {}",
        capture.stderr()
    );
    const PINGS: u64 = 10;
    ping(&rig, PINGS);
    std::thread::sleep(Duration::from_millis(300));
    // SIGINT: tcpdump writes what it has and exits.
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(i32::try_from(capture.child.id()).unwrap(), libc::SIGINT) };
    assert!(
        eventually(Duration::from_secs(5), || capture
            .stderr()
            .contains("packets captured")),
        "tcpdump did not stop: {}",
        capture.stderr()
    );
    drop(capture);
    let out = run_ok(
        Command::new("tshark")
            .arg("-r")
            .arg(&pcap)
            .args(["-o", "ip.check_checksum:TRUE", "-Y", "icmp.type == 8"])
            .args([
                "-T",
                "fields",
                "-E",
                "separator=|",
                "-e",
                "ip.ttl",
                "-e",
                "ip.checksum.status",
                "-e",
                "ip.src",
            ]),
    );
    let rows: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(rows.len() as u64, PINGS, "{rows:?}");
    for r in &rows {
        // h0 sends with TTL 64; two headroom hops. Checksum status 1 = Good.
        assert_eq!(r, "62|1|10.1.0.0", "TTL, checksum status, source: {rows:?}");
    }
    let forwarded_after = [rig.forwarded("s1"), rig.forwarded("s2")];
    assert_eq!(
        forwarded_after,
        forwarded_before,
        "a kernel forwarded what headroom should have:\ns1 {:#}\ns2 {:#}\ns1 routes {:#}",
        rig.show("s1", &["host-interfaces"]),
        rig.show("s2", &["host-interfaces"]),
        rig.show("s1", &["ip", "route"])
    );
    let rif_after = [
        rig.rif("s1", "Ethernet0", "rif_in_packets"),
        rig.rif("s2", "Ethernet1", "rif_in_packets"),
    ];
    for i in 0..2 {
        assert!(
            rif_after[i] - rif_before[i] >= PINGS,
            "switch {} routed {} of {PINGS} echo requests",
            i + 1,
            rif_after[i] - rif_before[i]
        );
    }
    let text = run_ok(
        Command::new(HEADROOM)
            .args(["show", "ip", "route", "--socket"])
            .arg(rig.socket("s1")),
    );
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("B>* 10.2.0.0/31 via 10.0.0.1, Ethernet1"),
        "{text}"
    );
    eprintln!("s1 `show ip route`:\n{text}");
    for (name, switch) in [("s1", s1), ("s2", s2)] {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(i32::try_from(switch.child.id()).unwrap(), libc::SIGTERM) };
        let ok = eventually(Duration::from_secs(10), || {
            switch.stderr().contains("stopping")
        });
        assert!(ok, "{name} did not stop:\n{}", switch.stderr());
        assert!(
            !switch.stderr().contains("ERROR"),
            "{name} logged errors:\n{}",
            switch.stderr()
        );
    }
}

/// h0 pings h1 `count` times, 100 ms apart; every one must be answered.
fn ping(rig: &Rig, count: u64) {
    let out = rig.run(
        "h0",
        "ping",
        &["-c", &count.to_string(), "-i", "0.1", "-W", "2", "10.2.0.0"],
    );
    assert!(
        out.contains(&format!("{count} packets transmitted, {count} received")),
        "pings lost:\n{out}"
    );
}
