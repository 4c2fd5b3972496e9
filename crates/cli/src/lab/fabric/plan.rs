//! The fabric's plan: names, ports, links, addresses and ASNs, as pure data computed from the
//! arguments (no I/O), so that the builder, `show fabric`, the tests and docs/fabric.md all read
//! the same plan.
//!
//! For `--prefix P`, S spines, L leaves and H hosts per leaf:
//!
//! | What | Rule |
//! |---|---|
//! | switch namespaces | `P-spine1..S`, `P-leaf1..L` (the switch's name is the part after `P-`) |
//! | host namespaces | `P-host1..L×H`, host `n` on leaf `⌈n / H⌉`, interface `eth0` |
//! | switch port `k` (0-based) | port / host interface `Ethernet{k}`, dataplane device `swp{k+1}` |
//! | leaf ports | `Ethernet0..S-1` to spine 1..S, then `EthernetS..S+H-1` to its hosts |
//! | spine ports | `Ethernet0..L-1` to leaf 1..L |
//! | loopbacks | spine j `10.255.0.j/32`, leaf i `10.255.1.i/32` (also the BGP router ID) |
//! | leaf i – spine j link | `10.1.i.{2(j-1)}/31` on the spine, `10.1.i.{2(j-1)+1}/31` on the leaf; with `--links-per-spine`, link n is leaf port `(n-1)·S + j-1` and /31 number `(n-1)·S + j-1`, and a spine's ports go leaf by leaf, each leaf's links in a row |
//! | leaf i – host k link | a routed /31 per host port: `10.2.i.{2(k-1)}/31` on the leaf, `10.2.i.{2(k-1)+1}/31` on the host, whose default route is the leaf's end |
//! | ASNs (RFC 7938 §5.2.1) | every spine `65100`; leaf i `65000 + i` (private 2-octet ASNs) |
//! | Prometheus | switch number m (spines first, then leaves, from 0) on `127.0.0.1:{base+m}` |
//!
//! The port name is both the headroom port (`[port.Ethernet0]`, `device = "swp1"`) and the host
//! interface headroom creates for it in the switch's namespace (a TAP with the port's name,
//! SONiC's `Ethernet0` netdev): `Ethernet{k}` ↔ `swp{k+1}`, one to one.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// The default name prefix of a fabric (not `hr`: a single-switch lab's `P-h<n>` names must
/// never match a fabric's).
pub const DEFAULT_PREFIX: &str = "fab";
/// The default number of spines, leaves and hosts per leaf.
pub const DEFAULT_SPINES: usize = 2;
/// See [`DEFAULT_SPINES`].
pub const DEFAULT_LEAVES: usize = 2;
/// See [`DEFAULT_SPINES`].
pub const DEFAULT_HOSTS_PER_LEAF: usize = 2;
/// The default port speed: slow enough that software traffic congests it.
pub const DEFAULT_SPEED: &str = "100M";
/// The first Prometheus port of a fabric's switches (a single-switch lab starts at 9464).
pub const DEFAULT_METRICS_PORT: u16 = 9600;
/// Most spines (each leaf has one uplink per spine; the /31s are `10.1.i.0..255`).
pub const MAX_SPINES: usize = 16;
/// Most leaves (ASNs 65001..65064; each spine has one port per leaf).
pub const MAX_LEAVES: usize = 64;
/// Most parallel links between a leaf and a spine (the uplinks' /31s share `10.1.i.0/24`).
pub const MAX_LINKS_PER_SPINE: usize = 4;
/// Most hosts per leaf (a /31 each in `10.2.i.0/24`).
pub const MAX_HOSTS_PER_LEAF: usize = 32;
/// The ASN every spine has (RFC 7938 §5.2.1: one ASN for all Tier-1 devices).
pub const SPINE_ASN: u32 = 65_100;
/// Leaf i's ASN is this plus i (RFC 7938 §5.2.1: a unique ASN per Tier-3 device).
pub const LEAF_ASN_BASE: u32 = 65_000;
/// A host's interface, in its namespace.
pub const HOST_DEVICE: &str = "eth0";
/// Length of the point-to-point subnets (RFC 3021).
pub const LINK_PREFIX_LEN: u8 = 31;
/// The peer-group a leaf puts its spines in.
pub const SPINE_PEER_GROUP: &str = "SPINE";
/// The peer-group a spine puts its leaves in.
pub const LEAF_PEER_GROUP: &str = "LEAF";

/// What the user asked for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricSpec {
    /// Prefix of every namespace (`P-spine1`, ...).
    pub prefix: String,
    /// Number of spines.
    pub spines: usize,
    /// Number of leaves.
    pub leaves: usize,
    /// Hosts behind each leaf.
    pub hosts_per_leaf: usize,
    /// Parallel links between a leaf and each spine: empty (1 for every leaf), one count for
    /// every leaf, or one per leaf. More than one to a leaf makes two ECMP stages on the paths
    /// towards it (the spines' choice among the parallel links): the polarisation scenario.
    #[serde(default)]
    pub links_per_spine: Vec<usize>,
    /// Port speed of every switch port, as the configuration writes it (`"100M"`).
    pub speed: String,
    /// First Prometheus port.
    pub metrics_port: u16,
    /// BFD on every BGP session.
    pub bfd: bool,
}

impl FabricSpec {
    /// The default fabric (2 spines, 2 leaves, 2 hosts per leaf, 100M) under `prefix`.
    #[must_use]
    pub fn new(prefix: &str, spines: usize, leaves: usize, hosts_per_leaf: usize) -> Self {
        Self {
            prefix: prefix.to_owned(),
            spines,
            leaves,
            hosts_per_leaf,
            links_per_spine: Vec::new(),
            speed: DEFAULT_SPEED.to_owned(),
            metrics_port: DEFAULT_METRICS_PORT,
            bfd: false,
        }
    }

    /// Checks the sizes and the prefix (the speed's value is the configuration parser's).
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn check(&self) -> Result<(), String> {
        crate::lab::config::check_prefix(&self.prefix)?;
        let ranges = [
            ("--spines", self.spines, MAX_SPINES),
            ("--leaves", self.leaves, MAX_LEAVES),
            ("--hosts-per-leaf", self.hosts_per_leaf, MAX_HOSTS_PER_LEAF),
        ];
        for (option, value, max) in ranges {
            if !(1..=max).contains(&value) {
                return Err(format!("{option} {value}: 1..={max}"));
            }
        }
        let counts = &self.links_per_spine;
        let text = counts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",");
        if counts.len() > 1 && counts.len() != self.leaves {
            return Err(format!(
                "--links-per-spine {text}: one count for every leaf, or one per leaf ({})",
                self.leaves
            ));
        }
        if counts
            .iter()
            .any(|c| !(1..=MAX_LINKS_PER_SPINE).contains(c))
        {
            return Err(format!(
                "--links-per-spine {text}: each 1..={MAX_LINKS_PER_SPINE}"
            ));
        }
        let switches = u16::try_from(self.spines + self.leaves).unwrap_or(u16::MAX);
        if self.metrics_port.checked_add(switches).is_none() || self.metrics_port == 0 {
            return Err(format!(
                "--metrics-port {}: the fabric needs {switches} ports from there",
                self.metrics_port
            ));
        }
        Ok(())
    }

    /// The plan (names, ports, links, addresses, ASNs). Call [`Self::check`] first: sizes out
    /// of range give addresses out of range.
    #[must_use]
    pub fn plan(&self) -> Plan {
        let s = self.spines;
        let h = self.hosts_per_leaf;
        let mut switches = Vec::new();
        for j in 1..=s {
            let ports = (1..=self.leaves)
                .flat_map(|i| (1..=self.links(i)).map(move |n| (i, n)))
                .map(|(i, n)| {
                    let index = self.spine_port_index(i, n);
                    Port {
                        index,
                        name: port_name(index),
                        device: port_device(index),
                        peer: Peer::Switch {
                            name: leaf_name(i),
                            port: port_name(leaf_port_index(s, j, n)),
                        },
                        address: Some(link_address(s, i, j, n, Role::Spine)),
                    }
                })
                .collect();
            switches.push(Switch {
                role: Role::Spine,
                number: j,
                name: spine_name(j),
                namespace: self.namespace(&spine_name(j)),
                asn: SPINE_ASN,
                loopback: spine_loopback(j),
                mac: switch_mac(Role::Spine, j),
                ports,
                metrics_port: 0,
            });
        }
        let mut hosts = Vec::new();
        for i in 1..=self.leaves {
            let mut ports: Vec<Port> = (1..=self.links(i))
                .flat_map(|n| (1..=s).map(move |j| (n, j)))
                .map(|(n, j)| {
                    let index = leaf_port_index(s, j, n);
                    Port {
                        index,
                        name: port_name(index),
                        device: port_device(index),
                        peer: Peer::Switch {
                            name: spine_name(j),
                            port: port_name(self.spine_port_index(i, n)),
                        },
                        address: Some(link_address(s, i, j, n, Role::Leaf)),
                    }
                })
                .collect();
            for k in 1..=h {
                let n = (i - 1) * h + k;
                let index = s * self.links(i) + k - 1;
                ports.push(Port {
                    index,
                    name: port_name(index),
                    device: port_device(index),
                    peer: Peer::Host { name: host_name(n) },
                    address: Some(host_gateway(i, k)),
                });
                hosts.push(Host {
                    number: n,
                    name: host_name(n),
                    namespace: self.namespace(&host_name(n)),
                    leaf: leaf_name(i),
                    leaf_port: port_name(index),
                    device: HOST_DEVICE.to_owned(),
                    address: host_address(i, k),
                    prefix_len: LINK_PREFIX_LEN,
                    gateway: host_gateway(i, k).address,
                    mac: host_mac(i, k),
                });
            }
            switches.push(Switch {
                role: Role::Leaf,
                number: i,
                name: leaf_name(i),
                namespace: self.namespace(&leaf_name(i)),
                asn: leaf_asn(i),
                loopback: leaf_loopback(i),
                mac: switch_mac(Role::Leaf, i),
                ports,
                metrics_port: 0,
            });
        }
        for (m, switch) in switches.iter_mut().enumerate() {
            switch.metrics_port = self
                .metrics_port
                .saturating_add(u16::try_from(m).unwrap_or(u16::MAX));
        }
        let mut links = Vec::new();
        for leaf in switches.iter().filter(|sw| sw.role == Role::Leaf) {
            for port in &leaf.ports {
                match &port.peer {
                    Peer::Switch { name, port: far } => {
                        let spine = switches.iter().find(|sw| &sw.name == name);
                        let device = spine
                            .and_then(|sw| sw.ports.iter().find(|p| &p.name == far))
                            .map_or_else(String::new, |p| p.device.clone());
                        links.push(Link {
                            a: LinkEnd {
                                namespace: leaf.namespace.clone(),
                                device: port.device.clone(),
                            },
                            b: LinkEnd {
                                namespace: self.namespace(name),
                                device,
                            },
                        });
                    }
                    Peer::Host { name } => links.push(Link {
                        a: LinkEnd {
                            namespace: leaf.namespace.clone(),
                            device: port.device.clone(),
                        },
                        b: LinkEnd {
                            namespace: self.namespace(name),
                            device: HOST_DEVICE.to_owned(),
                        },
                    }),
                }
            }
        }
        Plan {
            spec: self.clone(),
            switches,
            hosts,
            links,
        }
    }

    /// Parallel links between leaf `i` (1-based) and each spine.
    #[must_use]
    pub fn links(&self, i: usize) -> usize {
        match self.links_per_spine.as_slice() {
            [] => 1,
            [all] => *all,
            per_leaf => per_leaf.get(i - 1).copied().unwrap_or(1),
        }
    }

    /// The index of the spine port to leaf `i`'s link `n` (1-based): leaf-major, each leaf's
    /// links in a row.
    #[must_use]
    pub fn spine_port_index(&self, i: usize, n: usize) -> usize {
        (1..i).map(|l| self.links(l)).sum::<usize>() + (n - 1)
    }

    /// The namespace of a switch or host named `name`.
    #[must_use]
    pub fn namespace(&self, name: &str) -> String {
        format!("{}-{name}", self.prefix)
    }
}

/// Whether `namespace` is one of fabric `prefix`'s (`P-spine<n>`, `P-leaf<n>`, `P-host<n>`).
#[must_use]
pub fn is_fabric_namespace(prefix: &str, namespace: &str) -> bool {
    let Some(rest) = namespace
        .strip_prefix(prefix)
        .and_then(|r| r.strip_prefix('-'))
    else {
        return false;
    };
    ["spine", "leaf", "host"].iter().any(|kind| {
        rest.strip_prefix(kind)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// Whether `namespace` is one of fabric `prefix`'s switch namespaces (`P-spine<n>`,
/// `P-leaf<n>`): those have an FRR instance of the same name.
#[must_use]
pub fn is_fabric_switch_namespace(prefix: &str, namespace: &str) -> bool {
    is_fabric_namespace(prefix, namespace)
        && namespace
            .strip_prefix(prefix)
            .is_some_and(|r| r.starts_with("-spine") || r.starts_with("-leaf"))
}

/// Spine or leaf.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Tier 1.
    Spine,
    /// Tier 2 (top of rack): hosts hang off it.
    Leaf,
}

impl Role {
    /// `spine` or `leaf`.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Spine => "spine",
            Self::Leaf => "leaf",
        }
    }
}

/// The whole fabric.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// What it was made from.
    pub spec: FabricSpec,
    /// Spines first, then leaves.
    pub switches: Vec<Switch>,
    /// In number order.
    pub hosts: Vec<Host>,
    /// Every veth pair: leaf–spine links first per leaf, then the leaf's hosts.
    pub links: Vec<Link>,
}

impl Plan {
    /// The switch named `name`.
    #[must_use]
    pub fn switch(&self, name: &str) -> Option<&Switch> {
        self.switches.iter().find(|s| s.name == name)
    }

    /// Every namespace: switches, then hosts.
    #[must_use]
    pub fn namespaces(&self) -> Vec<String> {
        self.switches
            .iter()
            .map(|s| s.namespace.clone())
            .chain(self.hosts.iter().map(|h| h.namespace.clone()))
            .collect()
    }

    /// The spines.
    pub fn spines(&self) -> impl Iterator<Item = &Switch> {
        self.switches.iter().filter(|s| s.role == Role::Spine)
    }

    /// The leaves.
    pub fn leaves(&self) -> impl Iterator<Item = &Switch> {
        self.switches.iter().filter(|s| s.role == Role::Leaf)
    }

    /// The hosts of leaf `name`.
    pub fn hosts_of<'a>(&'a self, leaf: &'a str) -> impl Iterator<Item = &'a Host> + 'a {
        self.hosts.iter().filter(move |h| h.leaf == leaf)
    }
}

/// One switch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Switch {
    /// Spine or leaf.
    pub role: Role,
    /// 1-based within its role.
    pub number: usize,
    /// `spine1`, `leaf2`: what the commands take (`headroom show --switch leaf2`).
    pub name: String,
    /// `P-leaf2`: its network namespace and FRR instance.
    pub namespace: String,
    /// Its BGP ASN.
    pub asn: u32,
    /// Its loopback (`lo`, /32) and BGP router ID.
    pub loopback: Ipv4Addr,
    /// Its router MAC (the headroom switch's `switch.mac`).
    pub mac: [u8; 6],
    /// In port order.
    pub ports: Vec<Port>,
    /// Its Prometheus port (on 127.0.0.1).
    pub metrics_port: u16,
}

impl Switch {
    /// Its ports to other switches, with their /31 addresses.
    pub fn fabric_ports(&self) -> impl Iterator<Item = (&Port, Ipv4Addr)> {
        self.ports
            .iter()
            .filter(|p| matches!(p.peer, Peer::Switch { .. }))
            .filter_map(|p| Some((p, p.address.as_ref()?.address)))
    }

    /// A leaf's ports to its hosts, with the leaf's end of each host's /31.
    pub fn host_ports(&self) -> impl Iterator<Item = (&Port, InterfaceAddress)> {
        self.ports
            .iter()
            .filter(|p| matches!(p.peer, Peer::Host { .. }))
            .filter_map(|p| Some((p, p.address?)))
    }

    /// Its BGP neighbours: the far end of every fabric link.
    #[must_use]
    pub fn bgp_neighbors(&self) -> Vec<Ipv4Addr> {
        self.fabric_ports()
            .map(|(_, a)| link_peer_address(a))
            .collect()
    }
}

/// One switch port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Port {
    /// 0-based.
    pub index: usize,
    /// `Ethernet{index}`: the headroom port and its host interface.
    pub name: String,
    /// `swp{index+1}`: the veth end the dataplane opens.
    pub device: String,
    /// What is at the other end.
    pub peer: Peer,
    /// The switch's end of the link's /31 (every port is routed: fabric links and host
    /// ports alike).
    pub address: Option<InterfaceAddress>,
}

/// An address with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfaceAddress {
    /// The address.
    pub address: Ipv4Addr,
    /// Prefix length.
    pub prefix_len: u8,
}

impl std::fmt::Display for InterfaceAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.address, self.prefix_len)
    }
}

/// The far end of a port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Peer {
    /// Another switch's port.
    Switch {
        /// Its name.
        name: String,
        /// Its port.
        port: String,
    },
    /// A host's `eth0`.
    Host {
        /// Its name.
        name: String,
    },
}

impl std::fmt::Display for Peer {
    /// `spine1 Ethernet0`, `host3`: as the fabric's tables name it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Switch { name, port } => write!(f, "{name} {port}"),
            Self::Host { name } => f.write_str(name),
        }
    }
}

/// One host.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Host {
    /// 1-based, fabric-wide.
    pub number: usize,
    /// `host{number}`.
    pub name: String,
    /// `P-host{number}`.
    pub namespace: String,
    /// Its leaf's name.
    pub leaf: String,
    /// The leaf's port it hangs off.
    pub leaf_port: String,
    /// `eth0`.
    pub device: String,
    /// Its address.
    pub address: Ipv4Addr,
    /// 31: its link to the leaf.
    pub prefix_len: u8,
    /// Its default route: the leaf's end of the /31.
    pub gateway: Ipv4Addr,
    /// Its MAC.
    pub mac: [u8; 6],
}

/// One veth pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The leaf's end.
    pub a: LinkEnd,
    /// The spine's or the host's end.
    pub b: LinkEnd,
}

/// One end of a veth pair.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEnd {
    /// Its namespace.
    pub namespace: String,
    /// Its name there.
    pub device: String,
}

/// `spine{j}`.
#[must_use]
pub fn spine_name(j: usize) -> String {
    format!("spine{j}")
}

/// `leaf{i}`.
#[must_use]
pub fn leaf_name(i: usize) -> String {
    format!("leaf{i}")
}

/// `host{n}`.
#[must_use]
pub fn host_name(n: usize) -> String {
    format!("host{n}")
}

/// Port `k`'s name (0-based): `Ethernet{k}`, the headroom port and its host interface.
#[must_use]
pub fn port_name(k: usize) -> String {
    format!("Ethernet{k}")
}

/// Port `k`'s dataplane device (0-based): `swp{k+1}`.
#[must_use]
pub fn port_device(k: usize) -> String {
    format!("swp{}", k + 1)
}

/// Leaf `i`'s ASN.
#[must_use]
pub fn leaf_asn(i: usize) -> u32 {
    LEAF_ASN_BASE + u32::try_from(i).unwrap_or(0)
}

fn octet(n: usize) -> u8 {
    u8::try_from(n).unwrap_or(u8::MAX)
}

/// Spine `j`'s loopback.
#[must_use]
pub fn spine_loopback(j: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, 0, octet(j))
}

/// Leaf `i`'s loopback.
#[must_use]
pub fn leaf_loopback(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 255, 1, octet(i))
}

/// The index of leaf port to spine `j`'s link `n` (1-based) in a fabric of `spines` spines:
/// link-major (`Ethernet0..S-1` are every spine's first link, then their second links...), so
/// that a leaf's ECMP members, ordered by next-hop address, alternate between the spines.
#[must_use]
pub fn leaf_port_index(spines: usize, j: usize, n: usize) -> usize {
    (n - 1) * spines + (j - 1)
}

/// The address of `side` on link `n` (1-based) between leaf `i` and spine `j` of a fabric of
/// `spines` spines: the /31 number [`leaf_port_index`] of `10.1.i.0/24`.
#[must_use]
pub fn link_address(spines: usize, i: usize, j: usize, n: usize, side: Role) -> InterfaceAddress {
    let base = 2 * leaf_port_index(spines, j, n);
    let last = match side {
        Role::Spine => base,
        Role::Leaf => base + 1,
    };
    InterfaceAddress {
        address: Ipv4Addr::new(10, 1, octet(i), octet(last)),
        prefix_len: LINK_PREFIX_LEN,
    }
}

/// The other address of the /31 `address` is in (RFC 3021).
#[must_use]
pub fn link_peer_address(address: Ipv4Addr) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(address) ^ 1)
}

/// The leaf's end of the /31 between leaf `i` and its host `k` (1-based): the even address,
/// as a spine has on a leaf's uplink; the host's default gateway.
///
/// A routed /31 per host port rather than a /24 on an SVI: headroom's SVIs are not built yet,
/// and a routed port is what the dataplane forwards today (docs/fabric.md).
#[must_use]
pub fn host_gateway(i: usize, k: usize) -> InterfaceAddress {
    InterfaceAddress {
        address: Ipv4Addr::new(10, 2, octet(i), octet(2 * (k - 1))),
        prefix_len: LINK_PREFIX_LEN,
    }
}

/// Host `k` (1-based) of leaf `i`: the odd address of its /31.
#[must_use]
pub fn host_address(i: usize, k: usize) -> Ipv4Addr {
    link_peer_address(host_gateway(i, k).address)
}

/// Host `k` of leaf `i`'s MAC: locally administered `02:66:68` ("fh"), leaf, 0, host.
#[must_use]
pub fn host_mac(i: usize, k: usize) -> [u8; 6] {
    [0x02, 0x66, 0x68, octet(i), 0, octet(k)]
}

/// A switch's router MAC: `02:66:73` ("fs"), 1 for spines or 2 for leaves, 0, its number.
#[must_use]
pub fn switch_mac(role: Role, number: usize) -> [u8; 6] {
    let tier = match role {
        Role::Spine => 1,
        Role::Leaf => 2,
    };
    [0x02, 0x66, 0x73, tier, 0, octet(number)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn ip(text: &str) -> Ipv4Addr {
        text.parse().unwrap()
    }

    /// Invariants of any plan: names and addresses unique, links symmetric, peers consistent.
    fn check_invariants(plan: &Plan) {
        let spec = &plan.spec;
        assert_eq!(plan.switches.len(), spec.spines + spec.leaves);
        assert_eq!(plan.hosts.len(), spec.leaves * spec.hosts_per_leaf);
        assert_eq!(
            plan.links.len(),
            (1..=spec.leaves)
                .map(|i| spec.spines * spec.links(i) + spec.hosts_per_leaf)
                .sum::<usize>()
        );
        let namespaces: BTreeSet<String> = plan.namespaces().into_iter().collect();
        assert_eq!(namespaces.len(), plan.switches.len() + plan.hosts.len());
        assert!(namespaces
            .iter()
            .all(|n| is_fabric_namespace(&spec.prefix, n)));
        // Every address once in the fabric.
        let mut addresses = BTreeSet::new();
        for sw in &plan.switches {
            assert!(addresses.insert(sw.loopback), "{}", sw.loopback);
            for (_, a) in sw.fabric_ports() {
                assert!(addresses.insert(a), "{a}");
            }
            for (_, a) in sw.host_ports() {
                assert!(addresses.insert(a.address), "{a}");
            }
        }
        for host in &plan.hosts {
            assert!(addresses.insert(host.address));
            let leaf = plan.switch(&host.leaf).unwrap();
            let (port, gateway) = leaf
                .host_ports()
                .find(|(p, _)| p.name == host.leaf_port)
                .unwrap();
            assert_eq!(
                port.peer,
                Peer::Host {
                    name: host.name.clone()
                }
            );
            assert_eq!(gateway.address, host.gateway, "{}", host.name);
            assert_eq!(link_peer_address(host.gateway), host.address);
            assert_eq!(host.prefix_len, 31);
        }
        // Ports are 0.. in order, named and devised one to one.
        for sw in &plan.switches {
            for (k, p) in sw.ports.iter().enumerate() {
                assert_eq!(p.index, k);
                assert_eq!(p.name, format!("Ethernet{k}"));
                assert_eq!(p.device, format!("swp{}", k + 1));
                assert!(p.device.len() <= 15, "IFNAMSIZ");
            }
            // Each fabric port's peer port points back, and the /31 pairs.
            for (p, a) in sw.fabric_ports() {
                let Peer::Switch { name, port } = &p.peer else {
                    panic!("{}: a fabric port without a switch peer", sw.name)
                };
                let far = plan.switch(name).unwrap();
                let back = far.ports.iter().find(|q| &q.name == port).unwrap();
                assert_eq!(
                    back.peer,
                    Peer::Switch {
                        name: sw.name.clone(),
                        port: p.name.clone()
                    }
                );
                assert_eq!(back.address.unwrap().address, link_peer_address(a));
                assert_eq!(u32::from(a) >> 1, u32::from(link_peer_address(a)) >> 1);
            }
        }
        // Every link end exists in the plan.
        for link in &plan.links {
            for end in [&link.a, &link.b] {
                let on_switch = plan.switches.iter().any(|s| {
                    s.namespace == end.namespace && s.ports.iter().any(|p| p.device == end.device)
                });
                let on_host = plan
                    .hosts
                    .iter()
                    .any(|h| h.namespace == end.namespace && h.device == end.device);
                assert!(on_switch || on_host, "{end:?}");
            }
        }
        // Metrics ports consecutive from the base.
        for (m, sw) in plan.switches.iter().enumerate() {
            assert_eq!(
                usize::from(sw.metrics_port),
                usize::from(spec.metrics_port) + m
            );
        }
    }

    #[test]
    fn plan_of_two_spines_two_leaves_two_hosts() {
        let spec = FabricSpec::new("fab", 2, 2, 2);
        spec.check().unwrap();
        let plan = spec.plan();
        check_invariants(&plan);
        let names: Vec<&str> = plan.switches.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["spine1", "spine2", "leaf1", "leaf2"]);
        assert_eq!(
            plan.namespaces(),
            [
                "fab-spine1",
                "fab-spine2",
                "fab-leaf1",
                "fab-leaf2",
                "fab-host1",
                "fab-host2",
                "fab-host3",
                "fab-host4"
            ]
        );
        // ASNs: RFC 7938 §5.2.1, one for the spines, one per leaf, all private.
        let asns: Vec<u32> = plan.switches.iter().map(|s| s.asn).collect();
        assert_eq!(asns, [65_100, 65_100, 65_001, 65_002]);
        assert!(asns.iter().all(|a| (64_512..=65_534).contains(a)));
        // Loopbacks.
        let loopbacks: Vec<Ipv4Addr> = plan.switches.iter().map(|s| s.loopback).collect();
        assert_eq!(
            loopbacks,
            [
                ip("10.255.0.1"),
                ip("10.255.0.2"),
                ip("10.255.1.1"),
                ip("10.255.1.2")
            ]
        );
        // leaf2: Ethernet0 to spine1, Ethernet1 to spine2, Ethernet2-3 to host3-4.
        let leaf2 = plan.switch("leaf2").unwrap();
        let rows: Vec<(String, String, Option<String>)> = leaf2
            .ports
            .iter()
            .map(|p| {
                let peer = match &p.peer {
                    Peer::Switch { name, port } => format!("{name}:{port}"),
                    Peer::Host { name } => name.clone(),
                };
                (p.device.clone(), peer, p.address.map(|a| a.to_string()))
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "swp1".into(),
                    "spine1:Ethernet1".into(),
                    Some("10.1.2.1/31".into())
                ),
                (
                    "swp2".into(),
                    "spine2:Ethernet1".into(),
                    Some("10.1.2.3/31".into())
                ),
                ("swp3".into(), "host3".into(), Some("10.2.2.0/31".into())),
                ("swp4".into(), "host4".into(), Some("10.2.2.2/31".into())),
            ]
        );
        assert_eq!(leaf2.bgp_neighbors(), [ip("10.1.2.0"), ip("10.1.2.2")]);
        let spine2 = plan.switch("spine2").unwrap();
        assert_eq!(spine2.bgp_neighbors(), [ip("10.1.1.3"), ip("10.1.2.3")]);
        assert_eq!(spine2.ports[0].address.unwrap().to_string(), "10.1.1.2/31");
        // Hosts.
        let host3 = &plan.hosts[2];
        assert_eq!(
            (
                host3.name.as_str(),
                host3.leaf.as_str(),
                host3.leaf_port.as_str(),
                host3.address,
                host3.gateway
            ),
            (
                "host3",
                "leaf2",
                "Ethernet2",
                ip("10.2.2.1"),
                ip("10.2.2.0")
            )
        );
        assert_eq!(
            plan.switches
                .iter()
                .map(|s| s.metrics_port)
                .collect::<Vec<_>>(),
            [9600, 9601, 9602, 9603]
        );
        assert_eq!(plan.links.len(), 8);
        assert_eq!(
            plan.links[0],
            Link {
                a: LinkEnd {
                    namespace: "fab-leaf1".into(),
                    device: "swp1".into()
                },
                b: LinkEnd {
                    namespace: "fab-spine1".into(),
                    device: "swp1".into()
                },
            }
        );
        assert_eq!(
            plan.links[3].b,
            LinkEnd {
                namespace: "fab-host2".into(),
                device: "eth0".into()
            }
        );
    }

    #[test]
    fn plan_of_two_spines_four_leaves_two_hosts() {
        let spec = FabricSpec::new("big", 2, 4, 2);
        spec.check().unwrap();
        let plan = spec.plan();
        check_invariants(&plan);
        assert_eq!(plan.hosts.len(), 8);
        assert_eq!(plan.links.len(), 16);
        let spine1 = plan.switch("spine1").unwrap();
        assert_eq!(spine1.ports.len(), 4);
        assert_eq!(spine1.ports[3].device, "swp4");
        assert_eq!(
            spine1.ports[3].peer,
            Peer::Switch {
                name: "leaf4".into(),
                port: "Ethernet0".into()
            }
        );
        assert_eq!(spine1.ports[3].address.unwrap().to_string(), "10.1.4.0/31");
        let leaf4 = plan.switch("leaf4").unwrap();
        assert_eq!(leaf4.asn, 65_004);
        assert_eq!(leaf4.loopback, ip("10.255.1.4"));
        assert_eq!(leaf4.ports.len(), 4);
        assert_eq!(leaf4.bgp_neighbors(), [ip("10.1.4.0"), ip("10.1.4.2")]);
        let hosts: Vec<(&str, Ipv4Addr)> = plan
            .hosts_of("leaf4")
            .map(|h| (h.name.as_str(), h.address))
            .collect();
        assert_eq!(
            hosts,
            [("host7", ip("10.2.4.1")), ("host8", ip("10.2.4.3"))]
        );
        assert_eq!(plan.switches.last().unwrap().metrics_port, 9605);
    }

    #[test]
    fn parallel_links_alternate_between_the_spines() {
        let mut spec = FabricSpec::new("fab", 2, 2, 1);
        spec.links_per_spine = vec![2];
        spec.check().unwrap();
        let plan = spec.plan();
        check_invariants(&plan);
        let leaf1 = plan.switch("leaf1").unwrap();
        // Uplinks link-major: S1.a, S2.a, S1.b, S2.b — the order of their next-hop addresses,
        // so the leaf's ECMP buckets alternate between the spines (reference §4.2).
        let rows: Vec<(String, String, String)> = leaf1
            .ports
            .iter()
            .map(|p| {
                let peer = match &p.peer {
                    Peer::Switch { name, port } => format!("{name}:{port}"),
                    Peer::Host { name } => name.clone(),
                };
                (p.name.clone(), peer, p.address.unwrap().to_string())
            })
            .collect();
        let row = |a: &str, b: &str, c: &str| (a.to_owned(), b.to_owned(), c.to_owned());
        assert_eq!(
            rows,
            [
                row("Ethernet0", "spine1:Ethernet0", "10.1.1.1/31"),
                row("Ethernet1", "spine2:Ethernet0", "10.1.1.3/31"),
                row("Ethernet2", "spine1:Ethernet1", "10.1.1.5/31"),
                row("Ethernet3", "spine2:Ethernet1", "10.1.1.7/31"),
                row("Ethernet4", "host1", "10.2.1.0/31"),
            ]
        );
        let spine1 = plan.switch("spine1").unwrap();
        let peers: Vec<String> = spine1
            .ports
            .iter()
            .map(|p| match &p.peer {
                Peer::Switch { name, port } => format!("{name}:{port}"),
                Peer::Host { name } => name.clone(),
            })
            .collect();
        assert_eq!(
            peers,
            [
                "leaf1:Ethernet0",
                "leaf1:Ethernet2",
                "leaf2:Ethernet0",
                "leaf2:Ethernet2"
            ]
        );
        assert_eq!(leaf1.bgp_neighbors().len(), 4);
        // Per leaf: leaf1 one link per spine, leaf2 two (the polarisation scenario's shape).
        spec.links_per_spine = vec![1, 2];
        spec.check().unwrap();
        let plan = spec.plan();
        check_invariants(&plan);
        assert_eq!(plan.switch("leaf1").unwrap().bgp_neighbors().len(), 2);
        assert_eq!(plan.switch("leaf2").unwrap().bgp_neighbors().len(), 4);
        let spine2 = plan.switch("spine2").unwrap();
        let rows: Vec<(String, String)> = spine2
            .ports
            .iter()
            .map(|p| (p.name.clone(), p.address.unwrap().to_string()))
            .collect();
        assert_eq!(
            rows,
            [
                ("Ethernet0".to_owned(), "10.1.1.2/31".to_owned()),
                ("Ethernet1".to_owned(), "10.1.2.2/31".to_owned()),
                ("Ethernet2".to_owned(), "10.1.2.6/31".to_owned()),
            ]
        );
        for bad in [vec![MAX_LINKS_PER_SPINE + 1], vec![0], vec![1, 1, 1]] {
            let mut spec = FabricSpec::new("fab", 2, 2, 1);
            spec.links_per_spine = bad;
            assert!(spec.check().unwrap_err().starts_with("--links-per-spine"));
        }
    }

    #[test]
    fn the_largest_plans_stay_in_range() {
        let mut spec = FabricSpec::new("x", MAX_SPINES, MAX_LEAVES, MAX_HOSTS_PER_LEAF);
        spec.check().unwrap();
        check_invariants(&spec.plan());
        spec.links_per_spine = vec![MAX_LINKS_PER_SPINE];
        spec.check().unwrap();
        check_invariants(&spec.plan());
    }

    #[test]
    fn bad_sizes_are_refused_naming_the_option() {
        for (spec, option) in [
            (FabricSpec::new("fab", 0, 2, 2), "--spines"),
            (FabricSpec::new("fab", MAX_SPINES + 1, 2, 2), "--spines"),
            (FabricSpec::new("fab", 2, 0, 2), "--leaves"),
            (FabricSpec::new("fab", 2, MAX_LEAVES + 1, 2), "--leaves"),
            (FabricSpec::new("fab", 2, 2, 0), "--hosts-per-leaf"),
            (FabricSpec::new("Fab", 2, 2, 2), "--prefix"),
        ] {
            let e = spec.check().unwrap_err();
            assert!(e.starts_with(option), "{e}");
        }
        let mut spec = FabricSpec::new("fab", 2, 2, 2);
        spec.metrics_port = u16::MAX - 1;
        assert!(spec.check().unwrap_err().starts_with("--metrics-port"));
    }

    #[test]
    fn fabric_namespaces_are_told_apart_from_other_labs() {
        assert!(is_fabric_namespace("fab", "fab-spine1"));
        assert!(is_fabric_namespace("fab", "fab-leaf12"));
        assert!(is_fabric_namespace("fab", "fab-host3"));
        assert!(!is_fabric_namespace("fab", "fab-host"));
        assert!(!is_fabric_namespace("fab", "fab-h3"));
        assert!(!is_fabric_namespace("fab", "fab-sw"));
        assert!(!is_fabric_namespace("fab", "fabx-leaf1"));
        assert!(!is_fabric_namespace("fa", "fab-leaf1"));
        assert!(!is_fabric_namespace("fab", "fab-x-leaf1"));
        // A single-switch lab's namespaces are never a fabric's and the reverse.
        assert!(!crate::lab::config::is_lab_namespace("fab", "fab-host1"));
        assert!(!crate::lab::config::is_lab_namespace("fab", "fab-leaf1"));
    }
}
