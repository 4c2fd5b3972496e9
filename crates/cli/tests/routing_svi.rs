//! A VLAN interface (SVI, SONiC's `Vlan1000`) end to end: h0 is a host of VLAN 1000 on the
//! bridged access port Ethernet0 (10.10.0.2/24, gateway 10.10.0.1, the address of the host
//! interface `Vlan1000` headroom creates), h1 is behind the routed port Ethernet1 (10.2.0.0/31,
//! the switch 10.2.0.1). Shown:
//! * h0 pings its gateway: ARP (broadcast in the VLAN) and the echo request reach the kernel
//!   through `Vlan1000`, and its answers go back into the VLAN (`LcoreStep::inject_vlan`).
//! * h0 ↔ h1 is routed by headroom both ways (into the VLAN by the MAC table), not by the
//!   kernel: ICMP and UDP arrive at h1 with TTL − 1, DSCP/ECN as sent and good checksums
//!   (tshark), the switch's `Ip: ForwDatagrams` stays flat while the routed port's counters rise.

mod common;

use common::lab_config::{port_name, HOST_DEVICE};
use common::{eventually, require, run_ok, Capture, Lab, HEADROOM};
use headroom_afpacket::lab::NetnsGuard;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::time::Duration;

fn json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--json", "--lab", lab.prefix()]);
    let o = run_ok(Command::new(HEADROOM).args(&all));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn switch_run(lab: &Lab, program: &str, args: &[&str]) -> String {
    let out = run_ok(
        Command::new("ip")
            .args(["netns", "exec", &lab.switch_ns(), program])
            .args(args),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn kernel_forwarded(lab: &Lab) -> u64 {
    let snmp = switch_run(lab, "cat", &["/proc/net/snmp"]);
    common::ip_forw_datagrams(&snmp)
}

fn host_interface(lab: &Lab, name: &str) -> serde_json::Value {
    let view = json(lab, &["show", "host-interfaces"]);
    view["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["interface"] == name)
        .unwrap_or_else(|| panic!("no host interface {name}: {view:#}"))
        .clone()
}

fn ping(lab: &Lab, target: &str, count: u64, tos: u8) {
    let out = lab.host_run(
        0,
        "ping",
        &[
            "-c",
            &count.to_string(),
            "-i",
            "0.05",
            "-W",
            "2",
            "-Q",
            &tos.to_string(),
            target,
        ],
    );
    assert!(
        out.contains(&format!("{count} packets transmitted, {count} received")),
        "pings to {target} were lost:\n{out}"
    );
}

/// h0 sends one UDP datagram to h1's discard port per TOS, from a kernel socket.
fn send_udp(lab: &Lab, tos: &[u8]) {
    let ns = lab.host_ns(0);
    let tos = tos.to_vec();
    std::thread::spawn(move || {
        let _inside = NetnsGuard::enter(&ns).expect("entering h0");
        let socket = std::net::UdpSocket::bind("10.10.0.2:0").expect("UDP socket");
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
            assert_eq!(rc, 0);
            socket.send_to(&[0x5A; 64], "10.2.0.0:9").expect("send");
        }
    })
    .join()
    .unwrap();
}

#[test]
fn a_vlan_interface_routes_between_a_bridged_host_and_a_routed_port() {
    require(&["ping", "tcpdump", "tshark", "sh", "cat"]);
    let lab = Lab::up(2, "1G");
    let h1_port = port_name(1);
    let mut spec = lab.spec.clone();
    spec.static_fdb = false;
    let generated = spec.config_toml();
    // The lab's VLAN keys are [port_defaults]'; each port gets its own.
    let vlan_keys = "vlan_mode = \"access\"\naccess_vlan = 1\n";
    assert_eq!(
        generated.matches(vlan_keys).count(),
        1,
        "the lab's VLAN keys moved"
    );
    let mut config = generated.replacen(vlan_keys, "", 1);
    for (i, keys) in [(0, "access_vlan = 1000\n"), (1, "vlan_mode = \"routed\"\n")] {
        let table = format!("[port.{}]\n", port_name(i));
        assert!(config.contains(&table), "{config}");
        config = config.replacen(&table, &format!("{table}{keys}"), 1);
    }
    config.push_str("\n[vlan_interface.Vlan1000]\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("svi.toml");
    std::fs::write(&path, config).unwrap();

    for (i, own, route, via) in [
        (0, "10.10.0.2/24", "10.2.0.0/31", "10.10.0.1"),
        (1, "10.2.0.0/31", "10.10.0.0/24", "10.2.0.1"),
    ] {
        lab.host_run(i, "ip", &["addr", "flush", "dev", HOST_DEVICE]);
        lab.host_run(i, "ip", &["addr", "add", own, "dev", HOST_DEVICE]);
        lab.host_run(i, "ip", &["route", "add", route, "via", via]);
    }
    let switch = lab.start_switch_args(&["--config", path.to_str().unwrap()]);
    switch_run(
        &lab,
        "sh",
        &["-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"],
    );
    switch_run(
        &lab,
        "ip",
        &["addr", "add", "10.10.0.1/24", "dev", "Vlan1000"],
    );
    switch_run(&lab, "ip", &["addr", "add", "10.2.0.1/31", "dev", &h1_port]);
    let link = switch_run(&lab, "ip", &["-br", "link", "show", "dev", "Vlan1000"]);
    assert!(
        link.contains("UP") && link.contains("02:68:72:00:00:00"),
        "Vlan1000 is not up with the switch MAC: {link}"
    );

    // 1. The gateway answers: ARP and ICMP through the VLAN interface.
    ping(&lab, "10.10.0.1", 3, 0);
    let svi = host_interface(&lab, "Vlan1000");
    assert!(
        svi["punt_frames"].as_u64().unwrap() >= 4 && svi["inject_frames"].as_u64().unwrap() >= 4,
        "ARP and ICMP did not go through Vlan1000: {svi:#}"
    );

    // 2. Routed both ways; the first packets resolve the neighbours through the kernel.
    ping(&lab, "10.2.0.0", 3, 0);
    let resolved = eventually(Duration::from_secs(5), || {
        let neighbours = json(&lab, &["show", "ip", "neighbors"]);
        [("10.10.0.2", "Vlan1000"), ("10.2.0.0", h1_port.as_str())]
            .iter()
            .all(|(addr, interface)| {
                neighbours.as_array().unwrap().iter().any(|n| {
                    n["address"] == *addr && n["interface"] == *interface && n["resolved"] == true
                })
            })
    });
    assert!(
        resolved,
        "neighbours: {:#}",
        json(&lab, &["show", "ip", "neighbors"])
    );
    let forwarded_before = kernel_forwarded(&lab);
    let rif_before = host_interface(&lab, &h1_port);
    let mut capture = Capture::start(&lab, 1, "icmp or udp", dir.path().join("h1.pcap"));
    const PINGS: u64 = 20;
    // DSCP 3 with ECT(1); UDP: EF with ECT(0), DSCP 4 not ECN-capable.
    ping(&lab, "10.2.0.0", PINGS, (3 << 2) | 1);
    const UDP_TOS: [u8; 2] = [(46 << 2) | 0b10, 4 << 2];
    send_udp(&lab, &UDP_TOS);
    // h1's port-unreachable answers to the UDP datagrams quote them: not what is counted.
    let sent_by_h0 = "ip.src == 10.10.0.2 && !(icmp.type == 3)";
    let rows = capture.fields(
        sent_by_h0,
        &[
            "ip.ttl",
            "ip.dsfield.dscp",
            "ip.dsfield.ecn",
            "ip.checksum.status",
            "icmp.type",
            "udp.checksum.status",
        ],
    );
    let pings: Vec<_> = rows.iter().filter(|r| r[4] == "8").collect();
    assert_eq!(pings.len() as u64, PINGS, "{rows:?}");
    for r in &pings {
        // TTL 64 − 1; checksum status needs ip.check_checksum, so only TTL and DS here.
        assert_eq!(r[..3], ["63", "3", "1"], "{rows:?}");
    }
    // Different DSCPs take different queues: their order on the wire is the scheduler's.
    let mut udp: Vec<[String; 3]> = rows
        .iter()
        .filter(|r| !r[5].is_empty())
        .map(|r| [r[0].clone(), r[1].clone(), r[2].clone()])
        .collect();
    let mut expected: Vec<[String; 3]> = UDP_TOS
        .iter()
        .map(|t| ["63".to_owned(), (t >> 2).to_string(), (t & 3).to_string()])
        .collect();
    udp.sort();
    expected.sort();
    assert_eq!(
        udp, expected,
        "TTL, DSCP, ECN of the UDP datagrams: {rows:?}"
    );
    let checked = run_ok(
        Command::new("tshark")
            .arg("-r")
            .arg(dir.path().join("h1.pcap"))
            .args([
                "-o",
                "ip.check_checksum:TRUE",
                "-o",
                "udp.check_checksum:TRUE",
            ])
            .arg("-Y")
            .arg(format!(
                "{sent_by_h0} && (ip.checksum.status != 1 || icmp.checksum.status == 0 || \
                 udp.checksum.status == 0)"
            )),
    );
    assert!(
        checked.stdout.is_empty(),
        "bad checksums: {}",
        String::from_utf8_lossy(&checked.stdout)
    );
    assert_eq!(
        kernel_forwarded(&lab),
        forwarded_before,
        "the kernel forwarded what headroom should have"
    );
    let rif = host_interface(&lab, &h1_port);
    let delta = |key: &str| rif[key].as_u64().unwrap() - rif_before[key].as_u64().unwrap();
    // Requests and datagrams routed out of Ethernet1, replies routed in from it into the VLAN.
    assert!(
        delta("rif_out_packets") >= PINGS + 2 && delta("rif_in_packets") >= PINGS,
        "{rif:#}"
    );
    let table = json(&lab, &["show", "ip", "route"]);
    let host_route = table["routes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["prefix"] == "10.10.0.2/32")
        .unwrap_or_else(|| panic!("{table:#}"))
        .clone();
    assert_eq!(
        host_route["next_hops"][0]["interface"], "Vlan1000",
        "{host_route:#}"
    );

    let report = switch.stop();
    assert!(
        !report.log.contains("ERROR"),
        "the switch logged errors:\n{}",
        report.log
    );
}
