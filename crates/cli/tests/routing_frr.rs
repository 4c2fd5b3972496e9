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
//! dataplanes: TTL − 2, DSCP and ECN as sent, valid IPv4/ICMP/UDP checksums at h1 (tshark),
//! both kernels' `Ip: ForwDatagrams` flat while both switches' routed counters rise. The kernels keep IP forwarding on and
//! forward only what is punted to them (the first packets to an unresolved neighbour), which
//! the test shows too, as the contrast that proves the counter is read right.

mod common;

use common::two_routers::{RouterDriver, TwoRouters, FRR_INIT};
use common::{eventually, require, run_ok, HEADROOM};
use std::net::Ipv4Addr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

#[test]
fn two_headroom_routers_forward_what_frr_learns_over_ebgp() {
    require(&[
        "ping", "tcpdump", "tshark", "ethtool", "vtysh", "sh", "cat", "chown",
    ]);
    assert!(
        Path::new(FRR_INIT).exists(),
        "this test needs FRR ({FRR_INIT}; Debian: apt-get install frr); it fails rather than skips"
    );
    let mut rig = TwoRouters::up("frr");
    let s1 = rig.start_switch("s1", "02:68:72:00:01:00", RouterDriver::AfPacket);
    let s2 = rig.start_switch("s2", "02:68:72:00:02:00", RouterDriver::AfPacket);
    rig.address_switches();
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

    // h0 → h1 across both dataplanes (the warm-up resolves the neighbours through the kernels).
    rig.check_routed_crossing();

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
    TwoRouters::stop_switch("s1", s1);
    TwoRouters::stop_switch("s2", s2);
}
