//! IPv6 across two headroom routers (AF_PACKET, static routes): the two-router line of
//! `routing_frr.rs` with IPv6 on in the switches' namespaces:
//!
//! ```text
//! h0 2001:db8:1::2/64 -- Ethernet0 [s1] Ethernet1 -- 2001:db8:ff::/64 -- Ethernet1 [s2] Ethernet0 -- 2001:db8:2::2/64 h1
//! ```
//!
//! Neighbour discovery goes through the host interfaces (neigh_discovery punts, the kernels'
//! answers injected); then h0's echo requests cross both dataplanes: hop limit − 2, traffic class
//! (DSCP and ECN) as sent, ICMPv6 checksum good (tshark), both kernels' `Ip6OutForwDatagrams`
//! flat while both switches' routed counters rise.

mod common;

use common::require;
use common::two_routers::{RouterDriver, TwoRouters, SWITCHES};
use common::{eventually, run_ok, Background};
use std::process::Command;
use std::time::Duration;

/// `Ip6OutForwDatagrams` of /proc/net/snmp6 in `switch`'s namespace.
fn forwarded6(rig: &TwoRouters, switch: &str) -> u64 {
    let snmp = rig.run(switch, "cat", &["/proc/net/snmp6"]);
    snmp.lines()
        .find_map(|l| l.strip_prefix("Ip6OutForwDatagrams"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Ip6OutForwDatagrams in /proc/net/snmp6:\n{snmp}"))
}

fn ping6(rig: &TwoRouters, count: u64, tclass: u8) {
    let out = rig.run(
        "h0",
        "ping",
        &[
            "-6",
            "-c",
            &count.to_string(),
            "-i",
            "0.1",
            "-W",
            "2",
            "-Q",
            &tclass.to_string(),
            "2001:db8:2::2",
        ],
    );
    assert!(
        out.contains(&format!("{count} packets transmitted, {count} received")),
        "pings lost:\n{out}"
    );
}

#[test]
fn ipv6_crosses_two_headroom_routers_with_the_hop_limit_minus_two() {
    require(&["ping", "tcpdump", "tshark", "ethtool", "sh", "cat"]);
    let rig = TwoRouters::up_with("r6", true);
    for (host, own, via, other) in [
        ("h0", "2001:db8:1::2/64", "2001:db8:1::1", "2001:db8:2::/64"),
        ("h1", "2001:db8:2::2/64", "2001:db8:2::1", "2001:db8:1::/64"),
    ] {
        rig.run(
            host,
            "ip",
            &["-6", "addr", "add", own, "dev", "eth0", "nodad"],
        );
        rig.run(host, "ip", &["-6", "route", "add", other, "via", via]);
    }
    let s1 = rig.start_switch("s1", "02:68:72:00:01:00", RouterDriver::AfPacket);
    let s2 = rig.start_switch("s2", "02:68:72:00:02:00", RouterDriver::AfPacket);
    for (switch, host_side, fabric_side, route, via) in [
        (
            "s1",
            "2001:db8:1::1/64",
            "2001:db8:ff::1/64",
            "2001:db8:2::/64",
            "2001:db8:ff::2",
        ),
        (
            "s2",
            "2001:db8:2::1/64",
            "2001:db8:ff::2/64",
            "2001:db8:1::/64",
            "2001:db8:ff::1",
        ),
    ] {
        for (address, port) in [(host_side, "Ethernet0"), (fabric_side, "Ethernet1")] {
            rig.run(
                switch,
                "ip",
                &["-6", "addr", "add", address, "dev", port, "nodad"],
            );
        }
        rig.run(switch, "ip", &["-6", "route", "add", route, "via", via]);
    }

    // Warm-up: ND through the host interfaces; the first packets go through the kernels.
    let forwarded_at_start = [forwarded6(&rig, "s1"), forwarded6(&rig, "s2")];
    ping6(&rig, 3, 0);
    let resolved = eventually(Duration::from_secs(5), || {
        [
            ("s1", "2001:db8:1::2"),
            ("s1", "2001:db8:ff::2"),
            ("s2", "2001:db8:2::2"),
            ("s2", "2001:db8:ff::1"),
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
    let forwarded_before = [forwarded6(&rig, "s1"), forwarded6(&rig, "s2")];
    assert!(
        forwarded_before[1] > forwarded_at_start[1],
        "s2's kernel forwarded nothing while it resolved h1 ({forwarded_at_start:?} -> \
         {forwarded_before:?})"
    );
    let rif_before = [
        rig.rif("s1", "Ethernet0", "rif_in_packets"),
        rig.rif("s2", "Ethernet1", "rif_in_packets"),
    ];

    let pcap = rig.dir.path().join("h1-v6.pcap");
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
        ])
        .args(["--immediate-mode", "-U", "-w"])
        .arg(&pcap)
        .args(["icmp6", "and", "src", "2001:db8:1::2"]);
    let capture = Background::spawn(tcpdump);
    assert!(
        eventually(Duration::from_secs(10), || capture
            .stderr()
            .contains("listening on")),
        "tcpdump did not start: {}",
        capture.stderr()
    );
    const PINGS: u64 = 10;
    // Traffic class = DSCP 3 << 2 | ECT(1).
    ping6(&rig, PINGS, (3 << 2) | 1);
    let decode = || {
        let out = Command::new("tshark")
            .arg("-r")
            .arg(&pcap)
            .args([
                "-Y",
                "icmpv6.type == 128",
                "-T",
                "fields",
                "-E",
                "separator=|",
            ])
            .args([
                "-e",
                "ipv6.hlim",
                "-e",
                "ipv6.tclass.dscp",
                "-e",
                "ipv6.tclass.ecn",
            ])
            .args(["-e", "icmpv6.checksum.status"])
            .output()
            .expect("tshark");
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    let all_in = eventually(Duration::from_secs(5), || decode().len() as u64 >= PINGS);
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
    assert!(all_in && rows.len() as u64 == PINGS, "{rows:?}");
    for r in &rows {
        // h0 sends with hop limit 64; two headroom hops.
        assert_eq!(
            r, "62|3|1|1",
            "hop limit, DSCP, ECN, ICMPv6 checksum status: {rows:?}"
        );
    }
    assert_eq!(
        [forwarded6(&rig, "s1"), forwarded6(&rig, "s2")],
        forwarded_before,
        "a kernel forwarded what headroom should have"
    );
    let rif_after = [
        rig.rif("s1", "Ethernet0", "rif_in_packets"),
        rig.rif("s2", "Ethernet1", "rif_in_packets"),
    ];
    for i in 0..2 {
        assert!(
            rif_after[i] - rif_before[i] >= PINGS,
            "switch {} routed {} of {PINGS} echo requests",
            SWITCHES[i],
            rif_after[i] - rif_before[i]
        );
    }
    let table = run_ok(
        Command::new(common::HEADROOM)
            .args(["show", "ip", "route", "--socket"])
            .arg(rig.socket("s1")),
    );
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.contains("2001:db8:2::/64 via 2001:db8:ff::2, Ethernet1"),
        "{table}"
    );
    TwoRouters::stop_switch("s1", s1);
    TwoRouters::stop_switch("s2", s2);
}
