//! Routed forwarding on DPDK (issue 13's "on AF_PACKET and on DPDK"): the two-router line of
//! `routing_frr.rs` with both switches on DPDK `net_af_packet` vdevs over the same veths, and
//! static routes instead of BGP:
//!
//! ```text
//! h0 10.1.0.0/31 -- Ethernet0 [s1] Ethernet1 -- 10.0.0.0/31 -- Ethernet1 [s2] Ethernet0 -- 10.2.0.0/31 h1
//! ```
//!
//! h0 → h1 crosses both DPDK dataplanes: TTL − 2, DSCP and ECN as sent, valid IPv4, ICMP and UDP
//! checksums at h1 (tshark), both kernels' `Ip: ForwDatagrams` flat while both switches' routed
//! counters rise. The veth under each vdev is a netdev of the switch's namespace, so headroom
//! keeps the kernel's stack off it (`arp_ignore` 8, `forwarding` 0, IPv6 off) as it does on
//! AF_PACKET: without that the kernel answers ARP for the TAPs' addresses with the veth's MAC and
//! forwards the traffic itself (measured: `ForwDatagrams` rose and this test failed).
#![cfg(feature = "dpdk")]

mod common;

use common::require;
use common::two_routers::{RouterDriver, TwoRouters, SWITCHES};

#[test]
fn two_headroom_routers_on_dpdk_route_with_ttl_minus_two_and_the_ds_field_kept() {
    require(&["ping", "tcpdump", "tshark", "ethtool", "sh", "cat"]);
    let rig = TwoRouters::up("rdpdk");
    let s1 = rig.start_switch("s1", "02:68:72:00:01:00", RouterDriver::DpdkAfPacket);
    let s2 = rig.start_switch("s2", "02:68:72:00:02:00", RouterDriver::DpdkAfPacket);
    rig.address_switches();
    rig.run(
        "s1",
        "ip",
        &["route", "add", "10.2.0.0/31", "via", "10.0.0.1"],
    );
    rig.run(
        "s2",
        "ip",
        &["route", "add", "10.1.0.0/31", "via", "10.0.0.0"],
    );
    // The vdevs' veths are left to the dataplane.
    for switch in SWITCHES {
        for device in ["sw-p0", "sw-p1"] {
            for (key, want) in [
                (format!("/proc/sys/net/ipv4/conf/{device}/arp_ignore"), "8"),
                (format!("/proc/sys/net/ipv4/conf/{device}/forwarding"), "0"),
                (
                    format!("/proc/sys/net/ipv6/conf/{device}/disable_ipv6"),
                    "1",
                ),
            ] {
                let value = rig.run(switch, "cat", &[&key]);
                assert_eq!(value.trim(), want, "{switch} {key}");
            }
        }
    }

    rig.check_routed_crossing();

    for (name, switch) in [("s1", s1), ("s2", s2)] {
        let log = TwoRouters::stop_switch(name, switch);
        assert!(
            log.contains("DPDK port open"),
            "{name} did not run on DPDK:\n{log}"
        );
        assert!(
            log.contains("every mbuf is back in the pool"),
            "{name}: mbufs were not all returned:\n{log}"
        );
    }
}
