//! Two headroom routers in a line, each `headroom run` in its own namespace with two routed
//! ports, and a host behind each (issue 13's "a routed packet crosses two headroom switches"):
//!
//! ```text
//! h0 10.1.0.0/31 -- Ethernet0 [s1] Ethernet1 -- 10.0.0.0/31 -- Ethernet1 [s2] Ethernet0 -- 10.2.0.0/31 h1
//! ```
//!
//! The switches' addresses are the kernel's, on the host interfaces (TAPs) headroom creates
//! (`10.1.0.1`, `10.0.0.0` on s1; `10.2.0.1`, `10.0.0.1` on s2); the kernels keep IP forwarding
//! on. What fills the FIB (static routes, FRR) is the test's. Used by `routing_frr.rs` (AF_PACKET,
//! eBGP) and `routing_dpdk.rs` (DPDK vdevs, static routes).

use super::{eventually, run_ok, Background, TestLock, HEADROOM};
use headroom_afpacket::lab::NetnsGuard;
use std::net::{Ipv4Addr, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// FRR's init script (Debian `frr`), which starts one instance per namespace.
pub const FRR_INIT: &str = "/usr/lib/frr/frrinit.sh";

/// The switches' names, in line order.
pub const SWITCHES: [&str; 2] = ["s1", "s2"];

/// The I/O backend the switches run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouterDriver {
    /// AF_PACKET sockets on the veths.
    AfPacket,
    /// DPDK `net_af_packet` vdevs on the same veths (a build with `--features dpdk`).
    DpdkAfPacket,
}

/// Namespaces, FRR instances and files of a two-router test; removed on drop.
#[derive(Debug)]
pub struct TwoRouters {
    pub prefix: String,
    pub dir: tempfile::TempDir,
    frr: Vec<String>,
    _lock: TestLock,
}

/// (switch, address on Ethernet0 towards its host, address on Ethernet1 towards the other switch).
const SWITCH_ADDRESSES: [(&str, &str, &str); 2] = [
    ("s1", "10.1.0.1/31", "10.0.0.0/31"),
    ("s2", "10.2.0.1/31", "10.0.0.1/31"),
];

impl TwoRouters {
    /// Takes the test lock, makes the namespaces `e2e-<pid>-<tag>-{h0,s1,s2,h1}`, the veths
    /// (offloads off: no super-frames or unfinished checksums on the wire the switches read),
    /// the hosts' addresses and routes via their switch, and turns IP forwarding on and IPv6
    /// off in the switches' namespaces.
    pub fn up(tag: &str) -> Self {
        Self::up_with(tag, false)
    }

    /// [`TwoRouters::up`], with IPv6 on in the switches' namespaces (forwarding too) when
    /// `ipv6` (the hosts have it on either way; nothing gives them IPv6 addresses here).
    pub fn up_with(tag: &str, ipv6: bool) -> Self {
        let lock = TestLock::acquire();
        let rig = Self {
            prefix: format!("e2e-{}-{tag}", std::process::id()),
            frr: Vec::new(),
            dir: tempfile::tempdir().unwrap(),
            _lock: lock,
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
                rig.run(
                    ns,
                    "ethtool",
                    &[
                        "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro",
                        "off",
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
        for switch in SWITCHES {
            // IPv6 off unless asked for: the TAPs' link-local chatter is not what the IPv4
            // tests look at.
            let sysctls = if ipv6 {
                "echo 1 > /proc/sys/net/ipv6/conf/all/forwarding; \
                 echo 1 > /proc/sys/net/ipv4/ip_forward"
            } else {
                "echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; \
                 echo 1 > /proc/sys/net/ipv4/ip_forward"
            };
            rig.run(switch, "sh", &["-c", sysctls]);
        }
        rig
    }

    /// The full name of namespace `name` (`h0`, `s1`, `s2`, `h1`).
    pub fn ns(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }

    /// Runs `program args...` in namespace `ns`; its stdout.
    pub fn run(&self, ns: &str, program: &str, args: &[&str]) -> String {
        let out = run_ok(
            Command::new("ip")
                .args(["netns", "exec", &self.ns(ns), program])
                .args(args),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn socket(&self, switch: &str) -> PathBuf {
        self.dir.path().join(format!("{switch}.sock"))
    }

    /// `headroom show ARGS --json` of a switch.
    pub fn show(&self, switch: &str, args: &[&str]) -> serde_json::Value {
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

    /// `Ip: ForwDatagrams` of /proc/net/snmp in `switch`'s namespace: what its kernel forwarded.
    pub fn forwarded(&self, switch: &str) -> u64 {
        let snmp = self.run(switch, "cat", &["/proc/net/snmp"]);
        super::ip_forw_datagrams(&snmp)
    }

    /// Counter `key` of `port`'s row in `show host-interfaces --json` of `switch`.
    pub fn rif(&self, switch: &str, port: &str, key: &str) -> u64 {
        let view = self.show(switch, &["host-interfaces"]);
        view["interfaces"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["interface"] == port)
            .and_then(|r| r[key].as_u64())
            .unwrap_or_else(|| panic!("{key} of {port} on {switch}: {view:#}"))
    }

    /// `headroom run` of switch `name` in its namespace (real-time, as the lab runs it), until
    /// drop: both ports routed, on `driver`. On DPDK, EAL opens the vdevs' veths in the
    /// namespace it starts in, with a file prefix of its own.
    pub fn start_switch(&self, name: &str, mac: &str, driver: RouterDriver) -> Background {
        let config = self.dir.path().join(format!("{name}.toml"));
        let mut toml = format!(
            "[switch]\nname = \"{name}\"\nmac = \"{mac}\"\nlog_format = \"text\"\ndriver = \"{}\"\n\n\
             [port_defaults]\nspeed = \"1G\"\nmtu = 1500\nvlan_mode = \"routed\"\n\n\
             [runtime]\npolling = \"adaptive\"\ncontrol_socket = \"{}\"\nprometheus_enable = false\n",
            match driver {
                RouterDriver::AfPacket => "afpacket",
                RouterDriver::DpdkAfPacket => "dpdk",
            },
            self.socket(name).display()
        );
        let devices: Vec<String> = match driver {
            RouterDriver::AfPacket => vec!["sw-p0".into(), "sw-p1".into()],
            RouterDriver::DpdkAfPacket => {
                let vdev = headroom_dpdk::lab::LabVdev::AfPacket;
                // s1 on the first CPU of the affinity mask, s2 on the last: two real-time
                // lcores on one CPU starve the second EAL's start.
                let cpus = headroom_config::allowed_cpus();
                let cpu = if name == SWITCHES[0] {
                    cpus.first()
                } else {
                    cpus.last()
                };
                let cpu = *cpu.expect("a CPU in this process's affinity mask");
                let eal = headroom_dpdk::lab::lab_eal_args(
                    &["sw-p0", "sw-p1"],
                    vdev,
                    &self.ns(name),
                    cpu,
                );
                let eal: Vec<String> = eal.iter().map(|a| format!("{a:?}")).collect();
                toml.push_str(&format!(
                    "\n[dpdk]\neal_args = [{}]\nmempool_mbufs = {}\nmempool_cache_size = 256\n",
                    eal.join(", "),
                    headroom_dpdk::lab::lab_mempool_mbufs(vdev, 2)
                ));
                toml.push_str(&format!(
                    "\n[[runtime.lcore]]\ncpu = {cpu}\nrx_ports = [\"Ethernet0\", \"Ethernet1\"]\n\
                     tx_ports = [\"Ethernet0\", \"Ethernet1\"]\n"
                ));
                (0..2).map(|i| vdev.device_name(i)).collect()
            }
        };
        for (i, device) in devices.iter().enumerate() {
            toml.push_str(&format!("\n[port.Ethernet{i}]\ndevice = \"{device}\"\n"));
        }
        std::fs::write(&config, toml).unwrap();
        let mut command = Command::new("ip");
        command
            .args([
                "netns",
                "exec",
                &self.ns(name),
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
        let ready = eventually(Duration::from_secs(30), || {
            switch.stderr().contains("headroom running")
        });
        assert!(ready, "{name} did not start:\n{}", switch.stderr());
        switch
    }

    /// Gives both switches' host interfaces their addresses.
    pub fn address_switches(&self) {
        for (switch, host_side, fabric_side) in SWITCH_ADDRESSES {
            self.run(
                switch,
                "ip",
                &["addr", "add", host_side, "dev", "Ethernet0"],
            );
            self.run(
                switch,
                "ip",
                &["addr", "add", fabric_side, "dev", "Ethernet1"],
            );
        }
    }

    /// Writes FRR's files for `switch` (eBGP to `peer`, announcing `network`) and starts its
    /// instance in the switch's namespace; stopped on drop.
    pub fn start_frr(
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

    /// h0 pings h1 `count` times, 100 ms apart, with IPv4 TOS `tos`; every one must be answered.
    pub fn ping(&self, count: u64, tos: u8) {
        let out = self.run(
            "h0",
            "ping",
            &[
                "-c",
                &count.to_string(),
                "-i",
                "0.1",
                "-W",
                "2",
                "-Q",
                &tos.to_string(),
                "10.2.0.0",
            ],
        );
        assert!(
            out.contains(&format!("{count} packets transmitted, {count} received")),
            "pings lost:\n{out}"
        );
    }

    /// h0 sends one UDP datagram to h1 (port 9, discard) per TOS in `tos`, 10 ms apart, from a
    /// kernel socket (the kernel fills the UDP checksum: the veth's TX offload is off).
    pub fn send_udp(&self, tos: &[u8]) {
        let ns = self.ns("h0");
        let tos = tos.to_vec();
        std::thread::spawn(move || {
            let _inside = NetnsGuard::enter(&ns).expect("entering h0");
            let socket = UdpSocket::bind("10.1.0.0:0").expect("UDP socket in h0");
            for t in tos {
                let value = libc::c_int::from(t);
                // SAFETY: `value` is a valid c_int of the length given; the socket is ours.
                let rc = unsafe {
                    libc::setsockopt(
                        socket.as_raw_fd(),
                        libc::IPPROTO_IP,
                        libc::IP_TOS,
                        std::ptr::from_ref(&value).cast(),
                        size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                assert_eq!(rc, 0, "IP_TOS: {}", std::io::Error::last_os_error());
                socket
                    .send_to(&[0x5A; 64], "10.2.0.0:9")
                    .expect("sending UDP from h0");
                // Pacing the sender, not waiting for a condition.
                std::thread::sleep(Duration::from_millis(10));
            }
        })
        .join()
        .expect("UDP sender");
    }

    /// The neighbours each switch needs to forward h0 ↔ h1 resolved in its dataplane.
    pub fn wait_resolved(&self) {
        let resolved = eventually(Duration::from_secs(5), || {
            [
                ("s1", "10.1.0.0"),
                ("s2", "10.2.0.0"),
                ("s1", "10.0.0.1"),
                ("s2", "10.0.0.0"),
            ]
            .iter()
            .all(|(s, addr)| {
                self.show(s, &["ip", "neighbors"])
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|n| n["address"] == *addr && n["resolved"] == true)
            })
        });
        assert!(
            resolved,
            "neighbours: {:#} {:#}",
            self.show("s1", &["ip", "neighbors"]),
            self.show("s2", &["ip", "neighbors"])
        );
    }

    /// Once both switches route h0 → h1: warm-up pings resolve the neighbours through the
    /// kernels (s2's kernel forwards what it punts meanwhile: the contrast that shows the
    /// counter is read right); then echo requests and UDP datagrams with several DSCP and ECN
    /// values cross both dataplanes, captured at h1 and decoded by tshark: TTL − 2, DS field
    /// (DSCP and ECN) as sent, IPv4, ICMP and UDP checksums good; both kernels' `ForwDatagrams`
    /// flat and both switches' routed counters up by at least what was sent.
    pub fn check_routed_crossing(&self) {
        let forwarded_at_start = [self.forwarded("s1"), self.forwarded("s2")];
        self.ping(3, 0);
        self.wait_resolved();
        let forwarded_before = [self.forwarded("s1"), self.forwarded("s2")];
        assert!(
            forwarded_before[1] > forwarded_at_start[1],
            "s2's kernel forwarded nothing while it resolved h1 ({forwarded_at_start:?} -> \
             {forwarded_before:?})"
        );
        let rif_before = [
            self.rif("s1", "Ethernet0", "rif_in_packets"),
            self.rif("s2", "Ethernet1", "rif_in_packets"),
        ];

        let pcap = self.dir.path().join("h1.pcap");
        let mut tcpdump = Command::new("ip");
        tcpdump
            .args([
                "netns",
                "exec",
                &self.ns("h1"),
                "tcpdump",
                "-i",
                "eth0",
                "-n",
                "--immediate-mode",
                "-U",
                "-w",
            ])
            .arg(&pcap)
            .args(["src", "10.1.0.0", "and", "(icmp or udp)"]);
        let capture = Background::spawn(tcpdump);
        assert!(
            eventually(Duration::from_secs(10), || capture
                .stderr()
                .contains("listening on")),
            "tcpdump did not start: {}",
            capture.stderr()
        );
        // TOS = DSCP << 2 | ECN. Pings: DSCP 3 (the lossless class of the AZURE maps) with
        // ECT(1); UDP: EF with ECT(0), DSCP 3 with CE, DSCP 4 not ECN-capable.
        const PING_TOS: u8 = (3 << 2) | 0b01;
        const UDP_TOS: [u8; 3] = [(46 << 2) | 0b10, (3 << 2) | 0b11, 4 << 2];
        const PINGS: u64 = 10;
        self.ping(PINGS, PING_TOS);
        self.send_udp(&UDP_TOS);
        let expected = PINGS as usize + UDP_TOS.len();
        let fields = [
            "ip.ttl",
            "ip.dsfield.dscp",
            "ip.dsfield.ecn",
            "ip.checksum.status",
            "icmp.checksum.status",
            "udp.checksum.status",
            "icmp.type",
        ];
        let decode = || {
            let mut command = Command::new("tshark");
            command
                .arg("-r")
                .arg(&pcap)
                .args([
                    "-o",
                    "ip.check_checksum:TRUE",
                    "-o",
                    "udp.check_checksum:TRUE",
                ])
                .args(["-T", "fields", "-E", "separator=|"]);
            for f in fields {
                command.args(["-e", f]);
            }
            // A capture still being written may end in half a record: tshark then fails, and
            // the next poll reads it whole.
            let out = command.output().expect("running tshark");
            String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.split('|').map(str::to_owned).collect::<Vec<_>>())
                .collect::<Vec<_>>()
        };
        let all_in = eventually(Duration::from_secs(5), || decode().len() >= expected);
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
        let rows = decode();
        assert!(
            all_in,
            "{} of {expected} packets at h1: {rows:?}",
            rows.len()
        );
        let pings: Vec<_> = rows.iter().filter(|r| r[6] == "8").collect();
        assert_eq!(pings.len() as u64, PINGS, "echo requests at h1: {rows:?}");
        for r in &pings {
            // h0 sends with TTL 64; two headroom hops. Checksum status 1 = Good.
            assert_eq!(
                r[..5],
                ["62", "3", "1", "1", "1"],
                "TTL, DSCP, ECN, IPv4 and ICMP checksum status: {rows:?}"
            );
        }
        // Different DSCPs take different queues: their order on the wire is the scheduler's.
        let mut udp: Vec<Vec<String>> = rows
            .iter()
            .filter(|r| !r[5].is_empty())
            .map(|r| {
                vec![
                    r[0].clone(),
                    r[1].clone(),
                    r[2].clone(),
                    r[3].clone(),
                    r[5].clone(),
                ]
            })
            .collect();
        let mut want: Vec<Vec<String>> = UDP_TOS
            .iter()
            .map(|t| {
                [62, t >> 2, t & 0b11, 1, 1]
                    .iter()
                    .map(ToString::to_string)
                    .collect()
            })
            .collect();
        udp.sort();
        want.sort();
        assert_eq!(
            udp, want,
            "TTL, DSCP, ECN, IPv4 and UDP checksum status of the UDP datagrams: {rows:?}"
        );
        let forwarded_after = [self.forwarded("s1"), self.forwarded("s2")];
        assert_eq!(
            forwarded_after,
            forwarded_before,
            "a kernel forwarded what headroom should have:\ns1 {:#}\ns2 {:#}\ns1 routes {:#}",
            self.show("s1", &["host-interfaces"]),
            self.show("s2", &["host-interfaces"]),
            self.show("s1", &["ip", "route"])
        );
        let rif_after = [
            self.rif("s1", "Ethernet0", "rif_in_packets"),
            self.rif("s2", "Ethernet1", "rif_in_packets"),
        ];
        for i in 0..2 {
            assert!(
                rif_after[i] - rif_before[i] >= expected as u64,
                "switch {} routed {} of {expected} packets",
                i + 1,
                rif_after[i] - rif_before[i]
            );
        }
    }

    /// SIGTERM to a switch; it must exit 0 (drain and report) without logging an error. Its log.
    pub fn stop_switch(name: &str, mut switch: Background) -> String {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(i32::try_from(switch.child.id()).unwrap(), libc::SIGTERM) };
        let mut status = None;
        let exited = eventually(Duration::from_secs(15), || {
            status = switch.child.try_wait().ok().flatten();
            status.is_some()
        });
        // The pipe closes with the process; its reader thread may still be appending.
        let _ = eventually(Duration::from_secs(2), || {
            switch.stderr().contains("stopping")
        });
        let log = switch.stderr();
        assert!(exited, "{name} did not stop:\n{log}");
        assert!(
            status.is_some_and(|s| s.success()),
            "{name} exited with {status:?}:\n{log}"
        );
        assert!(!log.contains("ERROR"), "{name} logged errors:\n{log}");
        log
    }
}

impl Drop for TwoRouters {
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
