//! `headroom lab fabric`: it builds exactly the plan it prints (namespaces, links, addresses,
//! bridges, host routes, FRR with eBGP and ECMP), comes up in time, repairs a deleted link, and
//! `down` leaves nothing behind (namespaces, FRR processes and directories, files).
//!
//! Needs root, iproute2 and FRR (Debian `frr`); fails, never skips, without them.

mod common;

use common::{run_ok, TestLock, HEADROOM};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// Fabrics of this test binary are named `e2f-<pid>-<n>`; those of dead test processes are
/// removed with `headroom lab fabric down` before a test starts.
const PREFIX_HEAD: &str = "e2f-";

/// A fabric built by the real binary; `headroom lab fabric down` on drop.
struct Fabric {
    prefix: String,
    _lock: TestLock,
}

impl Fabric {
    fn new() -> Self {
        common::require(&["vtysh", "ping", "ethtool"]);
        let lock = TestLock::acquire();
        remove_stale_fabrics();
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let prefix = format!(
            "{PREFIX_HEAD}{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        Self {
            prefix,
            _lock: lock,
        }
    }

    /// `headroom lab fabric --prefix P --json ARGS`: the plan and the bring-up.
    fn up(&self, args: &[&str]) -> Value {
        let out = run_ok(
            Command::new(HEADROOM)
                .args(["lab", "fabric", "--prefix", &self.prefix, "--json"])
                .args(args),
        );
        serde_json::from_slice(&out.stdout).expect("the --json output")
    }

    fn down(&self) -> String {
        let out = run_ok(Command::new(HEADROOM).args([
            "lab",
            "fabric",
            "down",
            "--prefix",
            &self.prefix,
        ]));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = Command::new(HEADROOM)
            .args(["lab", "fabric", "down", "--prefix", &self.prefix])
            .output();
    }
}

fn remove_stale_fabrics() {
    let mut prefixes = BTreeSet::new();
    for dir in ["/run/netns", "/etc/frr", "/var/run/frr"] {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(rest) = name.strip_prefix(PREFIX_HEAD) else {
                continue;
            };
            let mut parts = rest.splitn(3, '-');
            let (Some(pid), Some(n)) = (parts.next(), parts.next()) else {
                continue;
            };
            if pid.parse::<u32>().is_ok_and(|p| {
                p != std::process::id() && !Path::new(&format!("/proc/{p}")).exists()
            }) {
                prefixes.insert(format!("{PREFIX_HEAD}{pid}-{n}"));
            }
        }
    }
    for prefix in prefixes {
        let _ = Command::new(HEADROOM)
            .args(["lab", "fabric", "down", "--prefix", &prefix])
            .output();
    }
}

fn ip_json(namespace: &str, args: &[&str]) -> Value {
    let out = run_ok(Command::new("ip").args(["-n", namespace, "-j"]).args(args));
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// Interface names in a namespace.
fn links(namespace: &str) -> BTreeSet<String> {
    ip_json(namespace, &["link", "show"])
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ifname"].as_str().map(str::to_owned))
        .collect()
}

/// `address/len` of every IPv4 address on `device`.
fn addresses(namespace: &str, device: &str) -> BTreeSet<String> {
    ip_json(namespace, &["-4", "addr", "show", "dev", device])
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| {
            Some(format!(
                "{}/{}",
                a["local"].as_str()?,
                a["prefixlen"].as_u64()?
            ))
        })
        .collect()
}

fn namespaces_with(prefix: &str) -> BTreeSet<String> {
    std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .collect()
}

/// Processes whose command line names one of the fabric's namespaces (FRR runs with `-N NS`).
fn processes_of(prefix: &str) -> Vec<String> {
    let me = std::process::id().to_string();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| e.file_name().to_string_lossy() != me.as_str())
        .filter_map(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            text.contains(&format!("{prefix}-")).then_some(text)
        })
        .collect()
}

/// BGP peers of a switch: (neighbour address, remote AS, state).
fn bgp_peers(namespace: &str) -> BTreeSet<(String, u64, String)> {
    let out = run_ok(Command::new("vtysh").args([
        "-N",
        namespace,
        "-c",
        "show bgp ipv4 unicast summary json",
    ]));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    v["peers"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(addr, p)| {
            (
                addr.clone(),
                p["remoteAs"].as_u64().unwrap_or(0),
                p["state"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Asserts that what exists is exactly what `plan` says.
fn assert_built_as_planned(plan: &Value) {
    let prefix = plan["spec"]["prefix"].as_str().unwrap();
    let switches = plan["switches"].as_array().unwrap();
    let hosts = plan["hosts"].as_array().unwrap();
    let planned: BTreeSet<String> = switches
        .iter()
        .chain(hosts)
        .map(|x| x["namespace"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(namespaces_with(prefix), planned);
    let asn_of = |name: &str| {
        switches
            .iter()
            .find(|s| s["name"] == name)
            .and_then(|s| s["asn"].as_u64())
            .unwrap()
    };
    for s in switches {
        let ns = s["namespace"].as_str().unwrap();
        let ports = s["ports"].as_array().unwrap();
        let mut expected: BTreeSet<String> = ports
            .iter()
            .map(|p| p["device"].as_str().unwrap().to_owned())
            .collect();
        expected.insert("lo".into());
        if let Some(v) = s["host_subnet"].as_object() {
            let bridge = v["interface"].as_str().unwrap();
            expected.insert(bridge.to_owned());
            assert_eq!(
                addresses(ns, bridge),
                BTreeSet::from([format!(
                    "{}/{}",
                    v["gateway"].as_str().unwrap(),
                    v["prefix_len"]
                )])
            );
        }
        assert_eq!(links(ns), expected, "{ns}");
        assert_eq!(
            addresses(ns, "lo"),
            BTreeSet::from([
                "127.0.0.1/8".to_owned(),
                format!("{}/32", s["loopback"].as_str().unwrap())
            ]),
            "{ns}"
        );
        let mut peers = BTreeSet::new();
        for p in ports {
            let device = p["device"].as_str().unwrap();
            let link = ip_json(ns, &["link", "show", "dev", device]);
            let link = &link[0];
            assert!(
                link["flags"].as_array().unwrap().iter().any(|f| f == "UP"),
                "{ns} {device}"
            );
            match p["address"].as_object() {
                Some(a) => {
                    let addr = a["address"].as_str().unwrap();
                    assert_eq!(
                        addresses(ns, device),
                        BTreeSet::from([format!("{addr}/31")]),
                        "{ns} {device}"
                    );
                    // The peer is the other address of the /31, in the other switch's AS.
                    let ours: std::net::Ipv4Addr = addr.parse().unwrap();
                    let theirs = std::net::Ipv4Addr::from(u32::from(ours) ^ 1);
                    let far = p["peer"]["switch"]["name"].as_str().unwrap();
                    peers.insert((theirs.to_string(), asn_of(far), "Established".to_owned()));
                }
                None => {
                    assert!(addresses(ns, device).is_empty(), "{ns} {device}");
                    assert_eq!(link["master"], "Vlan1000", "{ns} {device}");
                }
            }
        }
        assert_eq!(bgp_peers(ns), peers, "BGP of {ns}");
        // FRR runs the generated file.
        let out = run_ok(Command::new("vtysh").args(["-N", ns, "-c", "show running-config"]));
        let running = String::from_utf8_lossy(&out.stdout);
        assert!(
            running.contains(&format!("router bgp {}", s["asn"])),
            "{running}"
        );
        assert!(running.contains("maximum-paths 64"), "{running}");
    }
    for h in hosts {
        let ns = h["namespace"].as_str().unwrap();
        assert_eq!(
            links(ns),
            BTreeSet::from(["lo".to_owned(), "eth0".to_owned()])
        );
        assert_eq!(
            addresses(ns, "eth0"),
            BTreeSet::from([format!("{}/24", h["address"].as_str().unwrap())])
        );
        let routes = ip_json(ns, &["route", "show", "default"]);
        assert_eq!(routes[0]["gateway"], h["gateway"], "{ns}");
    }
}

#[test]
fn the_fabric_is_built_as_planned_repaired_and_removed_without_leftovers() {
    let fabric = Fabric::new();
    let p = fabric.prefix.clone();
    let first = fabric.up(&["--spines", "2", "--leaves", "2", "--hosts-per-leaf", "2"]);
    let plan = &first["plan"];
    let up = &first["bring_up"];
    // The bound: a 2×2×2 fabric comes up in under 60 s on this 2-core machine.
    let ready = up["ready_after_s"].as_f64().unwrap();
    assert!(ready < 60.0, "up in {ready} s");
    assert_eq!(up["bgp_sessions_established"], 8);
    assert_eq!(up["bgp_sessions_expected"], 8);
    assert_eq!(up["ecmp_routes"], 2);
    assert_eq!(
        (
            up["host_pairs_reachable"].as_u64(),
            up["host_pairs"].as_u64()
        ),
        (Some(12), Some(12))
    );
    eprintln!("2x2x2 fabric up in {ready:.1} s");
    assert_built_as_planned(plan);

    // ECMP in the kernel: leaf1 reaches leaf2's hosts through both spines.
    let route = ip_json(&format!("{p}-leaf1"), &["route", "show", "10.2.2.0/24"]);
    let hops: BTreeSet<&str> = route[0]["nexthops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["gateway"].as_str().unwrap())
        .collect();
    assert_eq!(hops, BTreeSet::from(["10.1.1.0", "10.1.1.2"]));
    // Across the spines, host1 → host4, TTL 64 - 3 hops (leaf, spine, leaf).
    let out = run_ok(Command::new("ip").args([
        "netns",
        "exec",
        &format!("{p}-host1"),
        "ping",
        "-c",
        "1",
        "-W",
        "2",
        "10.2.2.12",
    ]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("ttl=61"), "{text}");

    // Again: nothing to repair.
    let again = fabric.up(&[]);
    assert_eq!(again["bring_up"]["repaired"], serde_json::json!([]));
    assert_eq!(&again["plan"], plan);

    // A link deleted (both ends go): put back with its addresses, and BGP over it again.
    run_ok(Command::new("ip").args(["-n", &format!("{p}-spine2"), "link", "del", "swp1"]));
    assert!(!links(&format!("{p}-leaf1")).contains("swp2"));
    let repaired = fabric.up(&[]);
    let changes: Vec<String> = repaired["bring_up"]["repaired"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect();
    assert!(
        changes.contains(&format!("created link {p}-leaf1:swp2 - {p}-spine2:swp1")),
        "{changes:?}"
    );
    assert_built_as_planned(plan);

    // Down: nothing left.
    let said = fabric.down();
    assert!(said.starts_with(&format!("removed fabric {p:?}")), "{said}");
    assert!(namespaces_with(&p).is_empty());
    for root in ["/etc/frr", "/var/run/frr"] {
        let left: Vec<String> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("{p}-")))
            .collect();
        assert!(left.is_empty(), "{root}: {left:?}");
    }
    assert!(!Path::new(&format!("/run/headroom/{p}-fabric")).exists());
    assert_eq!(processes_of(&p), Vec::<String>::new());
    // And down again: nothing to do.
    assert_eq!(fabric.down().trim(), format!("no fabric {p:?} to remove"));
}

#[test]
fn bad_arguments_are_refused_before_anything_is_built() {
    let fabric = Fabric::new();
    for (args, says) in [
        (vec!["--spines", "0"], "--spines 0"),
        (vec!["--leaves", "65"], "--leaves 65"),
        (vec!["--speed", "fast"], "--speed fast"),
    ] {
        let out = Command::new(HEADROOM)
            .args(["lab", "fabric", "--prefix", &fabric.prefix])
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(namespaces_with(&fabric.prefix).is_empty());
    }
}

/// A `headroom run` on the memory driver standing in for one fabric switch.
struct MemorySwitch(std::process::Child);

impl Drop for MemorySwitch {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn headroom(args: &[&str]) -> std::process::Output {
    Command::new(HEADROOM).args(args).output().unwrap()
}

#[test]
fn show_fabric_and_show_switch_talk_to_each_switch_of_the_fabric() {
    let fabric = Fabric::new();
    let p = fabric.prefix.clone();
    // The plan, without building the network: the switches run on the memory driver here.
    let out = run_ok(Command::new(HEADROOM).args([
        "lab",
        "fabric",
        "--dry-run",
        "--json",
        "--prefix",
        &p,
        "--spines",
        "1",
        "--leaves",
        "2",
        "--hosts-per-leaf",
        "1",
    ]));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(namespaces_with(&p).is_empty(), "a dry run builds nothing");
    let plan = &report["plan"];
    let dir = format!("/run/headroom/{p}-fabric");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(format!("{dir}/plan.json"), plan.to_string()).unwrap();
    let mut switches = Vec::new();
    for s in plan["switches"].as_array().unwrap() {
        let name = s["name"].as_str().unwrap();
        let socket = format!("{dir}/{name}.sock");
        let mut text = format!(
            "[switch]\nname = \"{p}-{name}\"\ndriver = \"memory\"\n\n[port_defaults]\nspeed = \
             \"100M\"\ncable_length = \"5m\"\npfc_enable = [3, 4]\n\n[port_defaults.pfcwd]\n\
             enabled = true\n\n[runtime]\ncontrol_socket = \"{socket}\"\nprometheus_listen = \
             \"127.0.0.1:{}\"\n",
            free_port()
        );
        for port in s["ports"].as_array().unwrap() {
            text.push_str(&format!(
                "\n[port.{}]\ndevice = \"{name}-{}\"\n",
                port["name"].as_str().unwrap(),
                port["device"].as_str().unwrap()
            ));
        }
        let config = format!("{dir}/{name}.toml");
        std::fs::write(&config, text).unwrap();
        let child = Command::new(HEADROOM)
            .args(["run", "-c", &config, "--log-format", "json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        switches.push((name.to_owned(), MemorySwitch(child)));
        let end = std::time::Instant::now() + common::DEADLINE;
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(std::time::Instant::now() < end, "{name} did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    // --switch reaches that switch: its own ports and devices.
    let out = headroom(&[
        "show", "--fabric", &p, "--switch", "leaf2", "ports", "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let ports: Value = serde_json::from_slice(&out.stdout).unwrap();
    let devices: Vec<&str> = ports
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["device"].as_str().unwrap())
        .collect();
    assert_eq!(devices, ["leaf2-swp1", "leaf2-swp2"]);
    // A change through --switch lands on that switch only.
    let out = headroom(&[
        "set",
        "--fabric",
        &p,
        "--switch",
        "leaf2",
        "pfcwd",
        "Ethernet0",
        "--enabled",
        "false",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An unknown switch is named with the fabric's switches.
    let out = headroom(&["show", "--fabric", &p, "--switch", "leaf9", "ports"]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no switch \"leaf9\"") && stderr.contains("spine1, leaf1, leaf2"),
        "{stderr}"
    );

    // show fabric: every switch and port, each from its own switch.
    let out = headroom(&["show", "fabric", "--fabric", &p, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows: Vec<(String, String, String, String)> = view["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["switch"].as_str().unwrap().to_owned(),
                r["port"].as_str().unwrap().to_owned(),
                r["peer"].as_str().unwrap().to_owned(),
                r["watchdog"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let row = |s: &str, port: &str, peer: &str, wd: &str| {
        (
            s.to_owned(),
            port.to_owned(),
            peer.to_owned(),
            wd.to_owned(),
        )
    };
    assert_eq!(
        rows,
        [
            row("spine1", "Ethernet0", "leaf1 Ethernet0", "operational"),
            row("spine1", "Ethernet1", "leaf2 Ethernet0", "operational"),
            row("leaf1", "Ethernet0", "spine1 Ethernet0", "operational"),
            row("leaf1", "Ethernet1", "host1", "operational"),
            row("leaf2", "Ethernet0", "spine1 Ethernet1", "off"),
            row("leaf2", "Ethernet1", "host2", "operational"),
        ]
    );
    assert_eq!(view["unreachable"], serde_json::json!({}));
    let out = headroom(&["show", "fabric", "--fabric", &p]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("Watchdog") && text.contains("leaf2"),
        "{text}"
    );

    // A switch that stops answering is named, and the view exits 1.
    switches.remove(0);
    let out = headroom(&["show", "fabric", "--fabric", &p, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(view["unreachable"]["spine1"].is_string(), "{view}");
    assert_eq!(view["ports"].as_array().unwrap().len(), 4);
    drop(switches);
    let _ = std::fs::remove_dir_all(&dir);
}
