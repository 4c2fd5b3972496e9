//! Routed fabrics: every switch a router, with the routes a converged routing protocol would
//! have installed.
//!
//! The simulator has no control plane (no FRR, no kernel), so [`Sim::install_routes`] computes
//! what BGP with multipath (RFC 7938's data-centre design: every switch its own AS, equal-cost
//! paths over all uplinks) converges to, and gives it to each switch's core through the same
//! [`FibBuilder`] → [`fib_channel`] → [`LcoreStep::attach_fib`] path the runtime's netlink
//! mirror uses. The core then routes exactly as it does in `headroom run`: LPM, ECMP by the
//! 5-tuple hash (RoCEv2's UDP source port is per QP, so QPs spread), TTL, rewrite
//! (`route_forward` in headroom-core).
//!
//! Routes: one /32 per host (10.0.x.y, [`crate::flow`]), as a fabric's BGP carries each rack's
//! prefix. At the host's own switch the next hop is the host (its MAC on its port: the ARP
//! entry the kernel would have); at any other switch the next hops are the neighbours one
//! switch-hop closer to the host's switch, an ECMP group when there are several (shortest
//! paths by hop count, as BGP's AS-path length picks them). Every host's gateway is its
//! switch port's router MAC: hosts address every frame to it, as a host with a default route
//! addresses its gateway.
//!
//! [`LcoreStep::attach_fib`]: headroom_core::step::LcoreStep::attach_fib

use crate::{Endpoint, HostId, Sim, SimError, SwitchId};
use headroom_core::params::VlanMode;
use headroom_core::route::{
    fib_channel, EcmpGroupId, EcmpHash, EcmpMember, FibBuilder, FibConfig, Ipv4Prefix, NextHop,
    NextHopId, RouteTarget,
};
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_wire::ethernet::MacAddress;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

/// How each switch's ECMP hash is seeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpSeeds {
    /// Every switch its own seed, derived from the switch's index and this value (SONiC's
    /// advice: with one seed everywhere, the flows a switch sends up one link all hash to
    /// the same link at the next tier — polarisation).
    PerSwitch(u32),
    /// The same seed on every switch (to study polarisation).
    Same(u32),
}

impl EcmpSeeds {
    /// The hash of switch `s`.
    #[must_use]
    pub fn hash(self, s: SwitchId) -> EcmpHash {
        let seed = match self {
            // Knuth's multiplicative hash of the index, so that neighbours differ in every bit.
            Self::PerSwitch(base) => {
                base ^ (u32::try_from(s.0).unwrap_or(u32::MAX).wrapping_add(1))
                    .wrapping_mul(0x9E37_79B1)
            }
            Self::Same(seed) => seed,
        };
        EcmpHash {
            seed,
            ..EcmpHash::default()
        }
    }
}

/// What [`Sim::install_routes`] installed on one switch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SwitchRoutes {
    /// Host routes (/32).
    pub routes: usize,
    /// Of those, routes through an ECMP group.
    pub ecmp_routes: usize,
    /// Distinct ECMP groups.
    pub ecmp_groups: usize,
    /// Bytes of the published FIB ([`headroom_core::route::Fib::memory_bytes`]).
    pub fib_bytes: usize,
}

/// Packets a switch forwarded through one of its next hops ([`Sim::next_hop_packets`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextHopPackets {
    /// The port the next hop is on.
    pub port: PortId,
    /// The neighbour's MAC (a switch port's router MAC, or a host's MAC).
    pub mac: [u8; 6],
    /// Whether the next hop is a member of an ECMP group.
    pub ecmp_member: bool,
    /// Packets routed through it (counted by the core at the routing decision, before
    /// admission).
    pub packets: u64,
}

/// The FIB sizes of a simulated switch: routes for every host, no IPv6, the default next-hop
/// and ECMP limits.
fn fib_config(hosts: usize, hash: EcmpHash) -> FibConfig {
    FibConfig {
        ipv4_top_bits: 16,
        ipv6_top_bits: 8,
        max_ipv4_routes: hosts + 1,
        max_ipv6_routes: 1,
        // A limit, not an allocation (groups are made as routes need them): 10.0.x.y/32 uses
        // one group for 10.0 and one per x, but the builder reserves the worst case of every
        // route added before the one publication, two groups per /32.
        max_ipv4_groups: 2 * hosts + 2,
        max_ipv6_groups: 1,
        hash,
        ..FibConfig::default()
    }
}

impl Sim {
    /// Makes every switch a router with shortest-path routes to every host (module doc), and
    /// every host address its frames to its switch port's router MAC. Call it after every
    /// [`Sim::connect`] and before any flow is added.
    ///
    /// # Errors
    /// [`SimError::InvalidConfig`] when a flow was already added, a connected switch port is
    /// not [`VlanMode::Routed`], or a host is linked to another host; [`SimError::Fib`] when
    /// the core's FIB refuses a route (more hosts than it holds).
    pub fn install_routes(&mut self, seeds: EcmpSeeds) -> Result<Vec<SwitchRoutes>, SimError> {
        self.install_routes_avoiding(seeds, &[])
    }

    /// As [`Sim::install_routes`], but no route sends out of the switch ports in `avoid_out`:
    /// routes take the shortest paths over the remaining directed links (a routing policy, as
    /// an operator's route maps impose one). A ring whose every switch avoids the port to its
    /// predecessor routes clockwise only, the cyclic buffer dependency of a PFC deadlock
    /// (Hu et al., HotNets 2016). A switch from which no host's switch can be reached over the
    /// allowed links has no route to that host (its frames are dropped, `no_route`).
    ///
    /// # Errors
    /// As [`Sim::install_routes`].
    pub fn install_routes_avoiding(
        &mut self,
        seeds: EcmpSeeds,
        avoid_out: &[(SwitchId, PortId)],
    ) -> Result<Vec<SwitchRoutes>, SimError> {
        let allowed = |s: SwitchId, p: PortId| !avoid_out.contains(&(s, p));
        if !self.flows.is_empty() || !self.rdma_flows.is_empty() {
            return Err(SimError::InvalidConfig(
                "routes are installed before flows are added (flows address the gateway)".into(),
            ));
        }
        // Each switch's links: (its port, the switch and port at the other end).
        let mut neighbours: Vec<Vec<(PortId, SwitchId, PortId)>> =
            vec![Vec::new(); self.switches.len()];
        for (s, node) in self.switches.iter().enumerate() {
            for (p, attached) in node.ports.iter().enumerate() {
                let Some((link, side)) = *attached else {
                    continue;
                };
                let port = &node.sw.shared().params.ports[p];
                if port.vlan != VlanMode::Routed {
                    return Err(SimError::InvalidConfig(format!(
                        "switch {s} port {p} ({}) is linked but not routed",
                        port.name
                    )));
                }
                if let Endpoint::Switch(t, q) = self.links[link.0].ends[1 - side] {
                    neighbours[s].push((PortId(p as u16), t, q));
                }
            }
        }
        let port_mac = |sim: &Self, s: SwitchId, p: PortId| -> [u8; 6] {
            sim.switches[s.0].sw.shared().params.ports[p.index()].mac
        };
        let hosts = self.hosts.len();
        let mut builders: Vec<FibBuilder> = (0..self.switches.len())
            .map(|s| FibBuilder::new(fib_config(hosts, seeds.hash(SwitchId(s)))))
            .collect::<Result<_, _>>()
            .map_err(SimError::Fib)?;
        // Per switch: next hops by (port, MAC) and groups by member set, each added once.
        let mut hops: Vec<BTreeMap<(PortId, [u8; 6]), NextHopId>> =
            vec![BTreeMap::new(); self.switches.len()];
        let mut groups: Vec<BTreeMap<Vec<NextHopId>, EcmpGroupId>> =
            vec![BTreeMap::new(); self.switches.len()];
        let mut summary = vec![SwitchRoutes::default(); self.switches.len()];
        let mut gateways = vec![None; hosts];
        let mut distance = vec![usize::MAX; self.switches.len()];
        let mut queue = VecDeque::new();
        for (h, gateway) in gateways.iter_mut().enumerate() {
            let Some((link, side)) = self.host_links[h] else {
                continue;
            };
            let (home, home_port) = match self.links[link.0].ends[1 - side] {
                Endpoint::Switch(s, p) => (s, p),
                Endpoint::Host(other) => {
                    return Err(SimError::InvalidConfig(format!(
                        "host {h} is linked to host {}: routes need a switch between",
                        other.0
                    )));
                }
            };
            *gateway = Some(port_mac(self, home, home_port));
            let prefix = Ipv4Prefix::new(crate::flow::host_ip(HostId(h)), 32)
                .map_err(|e| SimError::InvalidConfig(format!("host {h}'s address: {e:?}")))?;
            // Hop counts to the host's switch (breadth first from it, over switch links taken
            // backwards: t is one hop further than s when t may send out of its port to s).
            distance.fill(usize::MAX);
            distance[home.0] = 0;
            queue.clear();
            queue.push_back(home);
            while let Some(s) = queue.pop_front() {
                for &(_, t, q) in &neighbours[s.0] {
                    if distance[t.0] == usize::MAX && allowed(t, q) {
                        distance[t.0] = distance[s.0] + 1;
                        queue.push_back(t);
                    }
                }
            }
            for s in 0..self.switches.len() {
                if distance[s] == usize::MAX {
                    continue;
                }
                let toward: Vec<(PortId, [u8; 6])> = if s == home.0 {
                    vec![(home_port, self.hosts[h].params.mac)]
                } else {
                    neighbours[s]
                        .iter()
                        .filter(|&&(p, t, _)| {
                            allowed(SwitchId(s), p)
                                && distance[t.0].saturating_add(1) == distance[s]
                        })
                        .map(|&(p, t, q)| (p, port_mac(self, t, q)))
                        .collect()
                };
                let b = &mut builders[s];
                let mut members = Vec::with_capacity(toward.len());
                for (port, mac) in toward {
                    let id = match hops[s].get(&(port, mac)) {
                        Some(&id) => id,
                        None => {
                            let id = b
                                .add_next_hop(NextHop::Resolved {
                                    port,
                                    vlan: None,
                                    mac: MacAddress(mac),
                                })
                                .map_err(SimError::Fib)?;
                            hops[s].insert((port, mac), id);
                            id
                        }
                    };
                    members.push(id);
                }
                let target = if let [one] = members[..] {
                    RouteTarget::NextHop(one)
                } else {
                    summary[s].ecmp_routes += 1;
                    let group = match groups[s].get(&members) {
                        Some(&g) => g,
                        None => {
                            let m: Vec<EcmpMember> =
                                members.iter().map(|&id| EcmpMember::new(id)).collect();
                            let g = b.add_ecmp_group(&m, None).map_err(SimError::Fib)?;
                            groups[s].insert(members, g);
                            g
                        }
                    };
                    RouteTarget::Ecmp(group)
                };
                b.set_route_v4(prefix, target).map_err(SimError::Fib)?;
                summary[s].routes += 1;
            }
        }
        for (s, node) in self.switches.iter_mut().enumerate() {
            let members: std::collections::BTreeSet<NextHopId> =
                groups[s].keys().flatten().copied().collect();
            node.next_hops = hops[s]
                .iter()
                .map(|(&(port, mac), &id)| (id, port, mac, members.contains(&id)))
                .collect();
            node.next_hops.sort_by_key(|&(_, port, mac, _)| (port, mac));
        }
        for (s, mut b) in builders.into_iter().enumerate() {
            let fib = b
                .publish()
                .map_err(|e| SimError::InvalidConfig(format!("switch {s}'s FIB: {e:?}")))?;
            summary[s].ecmp_groups = groups[s].len();
            summary[s].fib_bytes = fib.memory_bytes();
            let (sender, reader) = fib_channel(Arc::clone(&fib));
            let node = &mut self.switches[s];
            node.sw.attach_fib(reader);
            node.fib = Some(sender);
        }
        self.host_gateways = gateways;
        // The switches changed from outside: every one is driven at the next step (no step
        // is forced now: a FIB does nothing until a frame comes).
        for node in &mut self.switches {
            node.wake = Instant::ZERO;
        }
        Ok(summary)
    }

    /// Packets switch `id` routed through each of its next hops (the core's per-next-hop
    /// counters, SONiC's `show ecmp`), by port; empty before [`Sim::install_routes`].
    ///
    /// # Panics
    /// If `id` was not returned by this simulator.
    #[must_use]
    pub fn next_hop_packets(&self, id: SwitchId) -> Vec<NextHopPackets> {
        let node = &self.switches[id.0];
        let Some(fib) = node.fib.as_ref() else {
            return Vec::new();
        };
        let counters = fib.next_hop_packets();
        node.next_hops
            .iter()
            .map(|&(hop, port, mac, ecmp_member)| NextHopPackets {
                port,
                mac,
                ecmp_member,
                packets: counters.get(hop.index()).map_or(0, |c| c.get()),
            })
            .collect()
    }

    /// The MAC host `h` addresses its frames to: its gateway once routes are installed, else
    /// `peer` (the destination host's own MAC, on a bridged fabric).
    pub(crate) fn next_hop_mac(&self, h: HostId, peer: [u8; 6]) -> [u8; 6] {
        self.host_gateways
            .get(h.0)
            .copied()
            .flatten()
            .unwrap_or(peer)
    }
}
