//! The netlink mirror against the real kernel, in network namespaces (needs root; CI is root).
//!
//! Each test makes a switch namespace with two ports, `Ethernet0` and `Ethernet4` (veths whose
//! peers sit in a second namespace, so that carrier can be taken away), and a non-port
//! interface `mgmt0` (a veth as well: this kernel has no dummy module); it starts the mirror there, changes the kernel's state with
//! `ip`, and checks the FIB snapshot the mirror publishes. `ip` returns after the kernel has
//! queued its notifications, so one drain of the socket after each command sees them.

use headroom_afpacket::lab::NetnsGuard;
use headroom_core::route::{Fib, NextHop, PublishError, RouteTarget};
use headroom_core::types::PortId;
use headroom_linux_cp::{LinuxCp, LinuxCpConfig};
use headroom_wire::ethernet::MacAddress;
use std::net::IpAddr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

struct Netns(String);

impl Netns {
    fn new(tag: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(euid, 0, "these tests need root (namespaces, veths)");
        let name = format!(
            "hr-lcp-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        Self(name)
    }

    fn ip(&self, args: &str) -> String {
        let mut full = vec!["-n", self.0.as_str()];
        full.extend(args.split_whitespace());
        run("ip", &full)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} could not run (iproute2 missing?): {e}"));
    assert!(
        out.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const PEER0_MAC: &str = "02:00:00:00:01:01";
const PEER4_MAC: &str = "02:00:00:00:04:01";

struct Switch {
    sw: Netns,
    peer: Netns,
    cp: LinuxCp,
}

fn switch_with(config: LinuxCpConfig) -> Switch {
    let sw = Netns::new("sw");
    let peer = Netns::new("peer");
    // mgmt0 is not a port (this kernel has no dummy module: a veth too).
    for (port, peer_end) in [
        ("Ethernet0", "peer0"),
        ("Ethernet4", "peer4"),
        ("mgmt0", "peerm"),
    ] {
        sw.ip(&format!(
            "link add {port} type veth peer name {peer_end} netns {}",
            peer.0
        ));
        sw.ip(&format!("link set {port} up"));
        peer.ip(&format!("link set {peer_end} up"));
    }
    sw.ip("link set lo up");
    sw.ip("addr add 10.1.0.0/31 dev Ethernet0");
    sw.ip("addr add 10.1.0.2/31 dev Ethernet4");
    sw.ip("addr add 192.168.77.1/24 dev mgmt0");
    sw.ip("-6 addr add 2001:db8:1::a/64 dev Ethernet0 nodad");
    sw.ip("-6 addr add 2001:db8:4::a/64 dev Ethernet4 nodad");
    let cp = {
        let _in_switch = NetnsGuard::enter(&sw.0).expect("enter the switch namespace");
        LinuxCp::open(
            [
                ("Ethernet0".to_owned(), PortId(0)),
                ("Ethernet4".to_owned(), PortId(1)),
            ],
            config,
        )
        .expect("start the mirror")
    };
    Switch { sw, peer, cp }
}

fn switch() -> Switch {
    switch_with(LinuxCpConfig::default())
}

/// What the dataplane does for a destination, as a value to compare.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Does {
    NoRoute,
    Go(NextHop),
    Ecmp(Vec<(NextHop, usize)>),
}

fn resolved(port: u16, mac: &str) -> Does {
    let bytes: Vec<u8> = mac
        .split(':')
        .map(|b| u8::from_str_radix(b, 16).unwrap())
        .collect();
    Does::Go(NextHop::Resolved {
        port: PortId(port),
        vlan: None,
        mac: MacAddress(bytes.try_into().unwrap()),
    })
}

fn unresolved(port: u16) -> Does {
    Does::Go(NextHop::Unresolved {
        port: PortId(port),
        vlan: None,
    })
}

impl Switch {
    /// Applies every queued notification (and whatever resync they cause).
    fn settle(&mut self) {
        for _ in 0..1000 {
            let outcome = self.cp.poll().expect("poll");
            if outcome.messages == 0 && !outcome.more && !outcome.resynced {
                // Nothing was queued: give the kernel one short chance, then stop.
                if !self.cp.wait(Duration::from_millis(20)).expect("wait") {
                    return;
                }
            }
        }
        panic!("the mirror never settled");
    }

    fn ip(&mut self, args: &str) {
        self.sw.ip(args);
        self.settle();
    }

    /// Settles until `done` holds (for what the kernel announces late: carrier changes go
    /// through its link watcher, which may wait up to a second).
    fn settle_until(&mut self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while !done(self) {
            assert!(std::time::Instant::now() < deadline, "never saw: {what}");
            self.cp.wait(Duration::from_millis(100)).expect("wait");
            self.settle();
        }
    }

    /// The snapshot the lcores would get now.
    fn fib(&mut self) -> Arc<Fib> {
        match self.cp.fib_mut().publish() {
            Ok(fib) => fib,
            Err(PublishError::Unchanged) => Arc::clone(self.cp.fib_mut().published()),
            Err(e) => panic!("{e:?}"),
        }
    }

    fn does(&mut self, dst: &str) -> Does {
        let fib = self.fib();
        let dst: IpAddr = dst.parse().unwrap();
        let target = match dst {
            IpAddr::V4(a) => fib.lookup_v4(a),
            IpAddr::V6(a) => fib.lookup_v6(a),
        };
        match target {
            None => Does::NoRoute,
            Some(RouteTarget::NextHop(id)) => Does::Go(*fib.next_hop(id)),
            Some(RouteTarget::Ecmp(g)) => {
                let builder = self.cp.mirror().fib();
                let buckets = builder.ecmp_buckets(g).unwrap();
                let mut members: Vec<(NextHop, usize)> = builder
                    .ecmp_group(g)
                    .unwrap()
                    .iter()
                    .map(|m| {
                        let n = buckets.iter().filter(|&&b| b == m.next_hop).count();
                        (*fib.next_hop(m.next_hop), n)
                    })
                    .collect();
                members.sort_by_key(|(hop, _)| hop.port());
                Does::Ecmp(members)
            }
        }
    }
}

#[test]
fn routes_and_neighbours_follow_ip_route_and_ip_neigh() {
    let mut s = switch();
    assert_eq!(s.does("10.1.0.0"), Does::Go(NextHop::Local));
    assert_eq!(s.does("192.168.77.1"), Does::Go(NextHop::Local));
    assert_eq!(s.does("fe80::1"), Does::Go(NextHop::Local));
    // The connected /31: punted until the neighbour is known.
    assert_eq!(s.does("10.1.0.1"), unresolved(0));
    s.ip("route add 10.99.0.0/24 via 10.1.0.1");
    assert_eq!(s.does("10.99.0.7"), unresolved(0));
    s.ip(&format!(
        "neigh replace 10.1.0.1 lladdr {PEER0_MAC} dev Ethernet0 nud permanent"
    ));
    assert_eq!(s.does("10.99.0.7"), resolved(0, PEER0_MAC));
    assert_eq!(
        s.does("10.1.0.1"),
        resolved(0, PEER0_MAC),
        "neighbour host route"
    );
    s.ip("neigh del 10.1.0.1 dev Ethernet0");
    assert_eq!(s.does("10.99.0.7"), unresolved(0));
    s.ip("route replace 10.99.0.0/24 via 10.1.0.3");
    assert_eq!(s.does("10.99.0.7"), unresolved(1));
    s.ip("route del 10.99.0.0/24");
    assert_eq!(s.does("10.99.0.7"), Does::NoRoute);
    // IPv6, with a link-local gateway as FRR uses for unnumbered BGP.
    s.ip("-6 route add 2001:db8:99::/64 via 2001:db8:1::1");
    assert_eq!(s.does("2001:db8:99::5"), unresolved(0));
    s.ip(&format!(
        "-6 neigh replace 2001:db8:1::1 lladdr {PEER0_MAC} dev Ethernet0 nud reachable"
    ));
    assert_eq!(s.does("2001:db8:99::5"), resolved(0, PEER0_MAC));
    s.ip(&format!(
        "-6 neigh replace fe80::4 lladdr {PEER4_MAC} dev Ethernet4 nud permanent"
    ));
    s.ip("route add 10.90.0.0/24 via inet6 fe80::4 dev Ethernet4");
    assert_eq!(
        s.does("10.90.0.1"),
        resolved(1, PEER4_MAC),
        "IPv4 over an IPv6 next hop (RFC 5549)"
    );
    // A default route, and a longer route still wins.
    s.ip("route add default via 10.1.0.3");
    assert_eq!(s.does("8.8.8.8"), unresolved(1));
    assert_eq!(s.does("10.90.0.1"), resolved(1, PEER4_MAC));
    let stats = s.cp.stats();
    assert_eq!(stats.overruns, 0);
    assert_eq!(stats.resyncs, 1, "only the initial dump");
}

#[test]
fn multipath_routes_become_ecmp_groups() {
    let mut s = switch();
    s.ip(&format!(
        "neigh replace 10.1.0.1 lladdr {PEER0_MAC} dev Ethernet0 nud permanent"
    ));
    s.ip(&format!(
        "neigh replace 10.1.0.3 lladdr {PEER4_MAC} dev Ethernet4 nud permanent"
    ));
    s.ip("route add 10.98.0.0/24 nexthop via 10.1.0.1 nexthop via 10.1.0.3 weight 3");
    let Does::Go(a) = resolved(0, PEER0_MAC) else {
        unreachable!()
    };
    let Does::Go(b) = resolved(1, PEER4_MAC) else {
        unreachable!()
    };
    // Weights 1 and 3 share 128 buckets 32/96.
    assert_eq!(s.does("10.98.0.1"), Does::Ecmp(vec![(a, 32), (b, 96)]));
    s.ip("route replace 10.98.0.0/24 via 10.1.0.3");
    assert_eq!(s.does("10.98.0.1"), Does::Go(b));
    // IPv6: add two paths, then delete one of them.
    s.ip("-6 route add 2001:db8:98::/64 nexthop via 2001:db8:1::1 dev Ethernet0 nexthop via 2001:db8:4::1 dev Ethernet4");
    let Does::Ecmp(members) = s.does("2001:db8:98::1") else {
        panic!("not ECMP")
    };
    assert_eq!(
        members
            .iter()
            .map(|(h, n)| (h.port(), *n))
            .collect::<Vec<_>>(),
        [(Some(PortId(0)), 64), (Some(PortId(1)), 64)]
    );
    s.ip("-6 route append 2001:db8:98::/64 via 2001:db8:4::3 dev Ethernet4");
    let Does::Ecmp(members) = s.does("2001:db8:98::1") else {
        panic!("not ECMP")
    };
    assert_eq!(members.len(), 3, "append carries the full set");
    s.ip("-6 route del 2001:db8:98::/64 via 2001:db8:4::1 dev Ethernet4");
    s.ip("-6 route del 2001:db8:98::/64 via 2001:db8:4::3 dev Ethernet4");
    assert_eq!(s.does("2001:db8:98::1"), unresolved(0));
}

#[test]
fn nexthop_objects_are_followed() {
    let mut s = switch();
    s.ip("nexthop add id 10 via 10.1.0.1 dev Ethernet0");
    s.ip("nexthop add id 11 via 10.1.0.3 dev Ethernet4");
    s.ip("nexthop add id 12 group 10/11");
    s.ip("route add 10.97.0.0/24 nhid 12");
    assert_eq!(
        s.does("10.97.0.1"),
        Does::Ecmp(vec![
            (
                NextHop::Unresolved {
                    port: PortId(0),
                    vlan: None
                },
                64
            ),
            (
                NextHop::Unresolved {
                    port: PortId(1),
                    vlan: None
                },
                64
            )
        ])
    );
    // The group changes; the route is not re-announced, the FIB follows anyway.
    s.ip("nexthop replace id 12 group 10");
    assert_eq!(s.does("10.97.0.1"), unresolved(0));
    s.ip(&format!(
        "neigh replace 10.1.0.1 lladdr {PEER0_MAC} dev Ethernet0 nud permanent"
    ));
    assert_eq!(s.does("10.97.0.1"), resolved(0, PEER0_MAC));
    s.ip("nexthop add id 13 blackhole");
    s.ip("route replace 10.97.0.0/24 nhid 13");
    assert_eq!(s.does("10.97.0.1"), Does::Go(NextHop::Blackhole));
    // Deleting an object in use deletes its routes (the kernel announces those).
    s.ip("route replace 10.97.0.0/24 nhid 10");
    s.ip("nexthop del id 10");
    assert_eq!(s.does("10.97.0.1"), Does::NoRoute);
    assert_eq!(s.cp.stats().routes_missing_nexthop, 0);
}

#[test]
fn link_down_and_carrier_loss_follow_the_kernel() {
    let mut s = switch();
    s.ip("route add 10.96.0.0/24 via 10.1.0.3");
    s.ip("route add 10.98.0.0/24 nexthop via 10.1.0.1 nexthop via 10.1.0.3");
    s.ip("-6 route add 2001:db8:96::/64 via 2001:db8:4::1");
    assert_eq!(s.does("10.96.0.1"), unresolved(1));
    let resyncs = s.cp.stats().resyncs;
    // Admin down: the kernel drops IPv4 routes via Ethernet4 without a message.
    s.ip("link set Ethernet4 down");
    assert_eq!(s.does("10.96.0.1"), Does::NoRoute);
    assert_eq!(s.does("10.98.0.1"), unresolved(0));
    assert_eq!(s.does("2001:db8:96::1"), Does::NoRoute);
    assert_eq!(s.does("10.1.0.3"), Does::NoRoute, "connected route gone");
    assert!(s.cp.stats().resyncs > resyncs);
    s.ip("link set Ethernet4 up");
    assert_eq!(s.does("10.1.0.3"), unresolved(1), "connected route back");
    assert_eq!(
        s.does("10.96.0.1"),
        Does::NoRoute,
        "the kernel does not restore routes"
    );
    // Carrier loss on Ethernet0: a nexthop-object route vanishes silently; a classic one stays
    // (flagged linkdown), as the kernel keeps it.
    s.ip("nexthop add id 20 via 10.1.0.1 dev Ethernet0");
    s.ip("route add 10.95.0.0/24 nhid 20");
    s.ip("route add 10.94.0.0/24 via 10.1.0.1");
    assert_eq!(s.does("10.95.0.1"), unresolved(0));
    s.peer.ip("link set peer0 down");
    let ethernet0 =
        s.cp.mirror()
            .model()
            .links
            .values()
            .find(|l| l.name == "Ethernet0")
            .unwrap()
            .index;
    s.settle_until("Ethernet0 without carrier", |s| {
        !s.cp.mirror().model().links[&ethernet0].lower_up
    });
    assert_eq!(s.does("10.95.0.1"), Does::NoRoute);
    assert_eq!(s.does("10.94.0.1"), unresolved(0));
}

#[test]
fn routes_the_dataplane_cannot_forward_go_to_the_kernel() {
    let mut s = switch();
    s.ip("route add 10.93.0.0/24 via 192.168.77.2");
    assert_eq!(s.does("10.93.0.1"), Does::Go(NextHop::Kernel));
    assert_eq!(
        s.cp.stats().routes_via_foreign_interface,
        2,
        "the route and mgmt0's subnet"
    );
    s.ip("route add blackhole 10.92.0.0/24");
    assert_eq!(s.does("10.92.0.1"), Does::Go(NextHop::Blackhole));
    s.ip("route add unreachable 10.91.0.0/24");
    assert_eq!(s.does("10.91.0.1"), Does::Go(NextHop::Kernel));
    // Another table is not mirrored (policy routing), but counted.
    s.ip("route add 10.89.0.0/24 via 10.1.0.1 table 100");
    assert_eq!(s.does("10.89.0.1"), Does::NoRoute);
    assert!(s.cp.mirror().model().stats.routes_other_table >= 1);
    s.ip("route del 10.93.0.0/24");
    assert_eq!(s.cp.stats().routes_via_foreign_interface, 1);
}

#[test]
fn an_overrun_is_counted_and_repaired_by_a_resync() {
    let mut s = switch_with(LinuxCpConfig {
        netlink_receive_buffer_bytes: 4096,
        ..LinuxCpConfig::default()
    });
    assert!(
        s.cp.receive_buffer_bytes() <= 16384,
        "{}",
        s.cp.receive_buffer_bytes()
    );
    s.ip("route add 10.250.0.0/24 via 10.1.0.1");
    // 10 000 routes in one burst while the mirror does not read: far beyond 4 KiB of buffer.
    let batch: String = (0..10_000u32)
        .map(|i| {
            format!(
                "route add 10.{}.{}.0/24 via 10.1.0.3\n",
                100 + i / 256,
                i % 256
            )
        })
        .collect();
    let path = std::env::temp_dir().join(format!("hr-lcp-batch-{}", std::process::id()));
    std::fs::write(&path, batch).unwrap();
    s.sw.ip(&format!("-batch {}", path.display()));
    std::fs::remove_file(&path).unwrap();
    s.settle();
    let stats = s.cp.stats();
    assert!(stats.overruns >= 1, "{stats:?}");
    assert!(stats.resyncs >= 2, "{stats:?}");
    for i in [0u32, 1, 4_999, 9_999] {
        let dst = format!("10.{}.{}.9", 100 + i / 256, i % 256);
        assert_eq!(s.does(&dst), unresolved(1), "{dst}");
    }
    assert_eq!(
        s.does("10.250.0.1"),
        unresolved(0),
        "the route from before the burst"
    );
    // 10 000 routes, 1 before, and the connected, local and broadcast prefixes of the setup.
    assert!(s.cp.stats().routes_v4 >= 10_001, "{:?}", s.cp.stats());
    assert_eq!(s.cp.mirror().fib().route_counts().0, s.cp.stats().routes_v4);
    // Nothing lost afterwards either.
    s.ip("route del 10.100.0.0/24");
    assert_eq!(s.does("10.100.0.9"), Does::NoRoute);
}
