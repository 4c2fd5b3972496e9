//! A model of the kernel's routing state in the switch's namespace, as the netlink messages
//! describe it: links, addresses, neighbours, routes of the main table and nexthop objects.
//!
//! [`KernelModel::apply`] takes one decoded message and says which objects it touched
//! ([`Touched`]), so that the mirror recomputes only those. The rules follow the kernel's
//! behaviour as measured on this kernel (reference §2.3, rules §2.6):
//!
//! * Routes are keyed by (prefix, TOS, metric) within the main table; other tables are counted
//!   and ignored (policy routing is not mirrored), as are cloned (cache) routes.
//! * An IPv4 `NLM_F_APPEND` creates a second route with the same key, which the kernel does not
//!   use while the first exists: each key holds a list, the first entry is in force, and a
//!   `RTM_DELROUTE` removes the matching entry (or the first). An IPv4 `NLM_F_CREATE` without
//!   `EXCL`/`REPLACE`/`APPEND` (`ip route prepend`) puts the new entry first.
//! * An IPv6 `RTM_NEWROUTE` carries the route's full set of paths (also for an append); an
//!   IPv6 `RTM_DELROUTE` of one path carries only that path, which is removed from the set.
//! * Link state changes make the kernel drop routes and nexthop objects *without* telling
//!   (admin down: every IPv4 route via the link; carrier loss: nexthop objects), and so does
//!   deleting a nexthop object in use (its routes go, its groups shrink): the mirror
//!   resynchronises on them ([`Touched::Link`], [`Touched::Nexthop`] of a deleted object in
//!   use) rather than guess.

use crate::message::{NexthopMessage, RtnlMessage, NEXTHOP_FLAG_DEAD};
use headroom_core::route::{Ipv4Prefix, Ipv6Prefix};
use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::neighbour::{NeighbourAddress, NeighbourAttribute, NeighbourMessage};
use netlink_packet_route::route::{
    RouteAddress, RouteAttribute, RouteFlags, RouteMessage, RouteNextHopFlags, RouteType, RouteVia,
};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

/// The main routing table (`RT_TABLE_MAIN`).
pub const MAIN_TABLE: u32 = 254;

/// An IPv4 or IPv6 prefix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Prefix {
    /// IPv4.
    V4(Ipv4Prefix),
    /// IPv6.
    V6(Ipv6Prefix),
}

impl Prefix {
    /// The host route of `addr`.
    #[must_use]
    pub fn host(addr: IpAddr) -> Self {
        match addr {
            IpAddr::V4(a) => Self::V4(Ipv4Prefix::host(a)),
            IpAddr::V6(a) => Self::V6(Ipv6Prefix::host(a)),
        }
    }

    /// `addr/len`, host bits cleared; `None` if `len` is too long.
    #[must_use]
    pub fn new(addr: IpAddr, len: u8) -> Option<Self> {
        match addr {
            IpAddr::V4(a) => Ipv4Prefix::new(a, len).ok().map(Self::V4),
            IpAddr::V6(a) => Ipv6Prefix::new(a, len).ok().map(Self::V6),
        }
    }

    /// The length.
    #[must_use]
    pub fn prefix_len(self) -> u8 {
        match self {
            Self::V4(p) => p.prefix_len(),
            Self::V6(p) => p.prefix_len(),
        }
    }

    /// The network address.
    #[must_use]
    pub fn addr(self) -> IpAddr {
        match self {
            Self::V4(p) => IpAddr::V4(p.addr()),
            Self::V6(p) => IpAddr::V6(p.addr()),
        }
    }

    /// Whether `addr` is inside.
    #[must_use]
    pub fn contains(self, addr: IpAddr) -> bool {
        match (self, addr) {
            (Self::V4(p), IpAddr::V4(a)) => p.contains(a),
            (Self::V6(p), IpAddr::V6(a)) => p.contains(a),
            _ => false,
        }
    }

    /// The range of addresses inside, for range queries over address-ordered maps.
    #[must_use]
    pub fn range(self) -> (IpAddr, IpAddr) {
        match self {
            Self::V4(p) => {
                let low = p.bits();
                let high = low | !Ipv4Prefix::mask(p.prefix_len());
                (IpAddr::V4(low.into()), IpAddr::V4(high.into()))
            }
            Self::V6(p) => {
                let low = p.bits();
                let high = low | !Ipv6Prefix::mask(p.prefix_len());
                (IpAddr::V6(low.into()), IpAddr::V6(high.into()))
            }
        }
    }
}

impl core::fmt::Display for Prefix {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::V4(p) => p.fmt(f),
            Self::V6(p) => p.fmt(f),
        }
    }
}

/// A network interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// `ifindex`.
    pub index: u32,
    /// Its name.
    pub name: String,
    /// Its MAC address, if it has one.
    pub mac: Option<[u8; 6]>,
    /// `IFF_UP` (administratively up).
    pub up: bool,
    /// `IFF_LOWER_UP` (carrier).
    pub lower_up: bool,
}

/// An address on an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Address {
    /// `ifindex`.
    pub index: u32,
    /// The address (`IFA_LOCAL` for IPv4, `IFA_ADDRESS` for IPv6).
    pub addr: IpAddr,
    /// The subnet length.
    pub prefix_len: u8,
}

/// A neighbour (ARP or ND) entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Neighbour {
    /// `ifindex`.
    pub index: u32,
    /// The neighbour's IP address.
    pub addr: IpAddr,
    /// Its link-layer address, if known.
    pub mac: Option<[u8; 6]>,
    /// `NUD_*` state bits.
    pub state: u16,
}

const NUD_INCOMPLETE: u16 = 0x01;
const NUD_REACHABLE: u16 = 0x02;
const NUD_STALE: u16 = 0x04;
const NUD_DELAY: u16 = 0x08;
const NUD_PROBE: u16 = 0x10;
const NUD_FAILED: u16 = 0x20;
const NUD_NOARP: u16 = 0x40;
const NUD_PERMANENT: u16 = 0x80;

impl Neighbour {
    /// The `NUD_*` state as `ip neigh` prints it (`REACHABLE`, `STALE`, …; the most
    /// significant of the bits set).
    #[must_use]
    pub fn state_name(&self) -> &'static str {
        const NAMES: [(u16, &str); 8] = [
            (NUD_PERMANENT, "PERMANENT"),
            (NUD_NOARP, "NOARP"),
            (NUD_FAILED, "FAILED"),
            (NUD_PROBE, "PROBE"),
            (NUD_DELAY, "DELAY"),
            (NUD_STALE, "STALE"),
            (NUD_REACHABLE, "REACHABLE"),
            (NUD_INCOMPLETE, "INCOMPLETE"),
        ];
        NAMES
            .iter()
            .find(|(bit, _)| self.state & bit != 0)
            .map_or("NONE", |(_, name)| name)
    }

    /// The MAC to forward to: only in a state where the kernel itself would use it (reachable,
    /// stale, delay, probe, permanent, noarp) and with a link-layer address. Otherwise
    /// (incomplete, failed, none) packets to it are punted so that the kernel resolves it.
    #[must_use]
    pub fn usable_mac(&self) -> Option<[u8; 6]> {
        let usable = NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_PERMANENT | NUD_NOARP;
        if self.state & usable != 0 && self.state & (NUD_INCOMPLETE | NUD_FAILED) == 0 {
            self.mac
        } else {
            None
        }
    }
}

/// What a route does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// Forward (gateway or directly connected).
    Unicast,
    /// Local, broadcast or anycast delivery to the host.
    Local,
    /// Silently dropped.
    Blackhole,
    /// Rejected with an ICMP error (unreachable, prohibit) or thrown to the next table.
    Reject,
    /// Something else (multicast, NAT, …): not mirrored.
    Other,
}

/// One path of a route.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Path {
    /// Output interface.
    pub oif: u32,
    /// Gateway (`RTA_GATEWAY` or `RTA_VIA`, which may be of the other family); `None` for a
    /// directly connected route.
    pub gateway: Option<IpAddr>,
    /// Weight (`rtnh_hops + 1`).
    pub weight: u16,
    /// `RTNH_F_DEAD`.
    pub dead: bool,
    /// `RTNH_F_LINKDOWN`.
    pub linkdown: bool,
}

/// A route of the main table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Route {
    /// What it does.
    pub kind: RouteKind,
    /// `rtm_protocol` (kernel 2, static 4, zebra 11, bgp 186, …).
    pub protocol: u8,
    /// `RTA_NH_ID`: the nexthop object it uses, if any.
    pub nhid: Option<u32>,
    /// Its paths (with `nexthop_compat_mode` the expansion of the nexthop object).
    pub paths: Vec<Path>,
}

/// Route key within the main table, after the prefix: (TOS, metric).
pub type RouteRank = (u8, u32);

/// A nexthop object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Nexthop {
    /// One gateway or interface.
    Single {
        /// Output interface.
        oif: u32,
        /// Gateway; `None` for a device nexthop.
        gateway: Option<IpAddr>,
        /// `RTNH_F_DEAD`.
        dead: bool,
    },
    /// A blackhole.
    Blackhole,
    /// A group of other objects with weights.
    Group(Vec<(u32, u16)>),
}

/// What one message touched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Touched {
    /// Nothing the mirror uses.
    Nothing,
    /// A link's state, name or existence changed: resynchronise (module docs).
    Link(u32),
    /// A link's MAC address changed (nothing to resynchronise).
    LinkMac(u32),
    /// An address (its host route, and the subnet broadcast).
    Address(Address),
    /// A neighbour.
    Neighbour(u32, IpAddr),
    /// The routes of a prefix.
    Route(Prefix),
    /// A nexthop object.
    Nexthop(u32),
}

/// Counters of messages the model did not take.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelStats {
    /// Routes of tables other than main (and not local): policy routing is not mirrored.
    pub routes_other_table: u64,
    /// Routes with a TOS (the FIB matches on destination only).
    pub routes_with_tos: u64,
    /// Messages that made no sense (a route without a family, a neighbour without an address).
    pub malformed: u64,
}

/// The model (module docs).
#[derive(Clone, Debug, Default)]
pub struct KernelModel {
    /// Links by ifindex.
    pub links: BTreeMap<u32, Link>,
    /// Addresses.
    pub addresses: BTreeSet<Address>,
    /// Neighbours by (ifindex, address).
    pub neighbours: BTreeMap<(u32, IpAddr), Neighbour>,
    /// The ifindexes that have a neighbour of an address (several for 169.254.0.1, which FRR
    /// puts on every unnumbered interface).
    pub neighbour_links: BTreeMap<IpAddr, BTreeSet<u32>>,
    /// Main-table routes: per prefix, per (TOS, metric), the list (the first is in force).
    pub routes: BTreeMap<Prefix, BTreeMap<RouteRank, Vec<Route>>>,
    /// Nexthop objects by id.
    pub nexthops: HashMap<u32, Nexthop>,
    /// What was not taken.
    pub stats: ModelStats,
}

fn mac_of(bytes: &[u8]) -> Option<[u8; 6]> {
    bytes.try_into().ok()
}

fn route_addr(addr: &RouteAddress) -> Option<IpAddr> {
    match addr {
        RouteAddress::Inet(a) => Some(IpAddr::V4(*a)),
        RouteAddress::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

fn via_addr(via: &RouteVia) -> Option<IpAddr> {
    match via {
        RouteVia::Inet(a) => Some(IpAddr::V4(*a)),
        RouteVia::Inet6(a) => Some(IpAddr::V6(*a)),
        _ => None,
    }
}

/// The route's key, paths and kind, or `None` when it is not one the model keeps.
struct ParsedRoute {
    prefix: Prefix,
    table: u32,
    rank: RouteRank,
    cloned: bool,
    route: Route,
}

fn parse_route(m: &RouteMessage) -> Option<ParsedRoute> {
    let h = &m.header;
    let mut table = u32::from(h.table);
    let mut dst = None;
    let mut metric = 0;
    let mut nhid = None;
    let mut gateway = None;
    let mut oif = None;
    let mut multipath = None;
    for attr in &m.attributes {
        match attr {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(a) => dst = route_addr(a),
            RouteAttribute::Priority(p) => metric = *p,
            RouteAttribute::NhId(id) => nhid = Some(*id),
            RouteAttribute::Gateway(a) => gateway = route_addr(a),
            RouteAttribute::Via(v) => gateway = via_addr(v),
            RouteAttribute::Oif(i) => oif = Some(*i),
            RouteAttribute::MultiPath(hops) => multipath = Some(hops),
            _ => {}
        }
    }
    let unspecified = match h.address_family {
        AddressFamily::Inet => IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED),
        AddressFamily::Inet6 => IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED),
        _ => return None,
    };
    let prefix = Prefix::new(dst.unwrap_or(unspecified), h.destination_prefix_length)?;
    let kind = match h.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::Local | RouteType::Broadcast | RouteType::Anycast => RouteKind::Local,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable | RouteType::Prohibit | RouteType::Throw => RouteKind::Reject,
        _ => RouteKind::Other,
    };
    let mut paths = Vec::new();
    if let Some(hops) = multipath {
        for hop in hops {
            let mut gw = None;
            for attr in &hop.attributes {
                match attr {
                    RouteAttribute::Gateway(a) => gw = route_addr(a),
                    RouteAttribute::Via(v) => gw = via_addr(v),
                    _ => {}
                }
            }
            paths.push(Path {
                oif: hop.interface_index,
                gateway: gw,
                weight: u16::from(hop.hops) + 1,
                dead: hop.flags.contains(RouteNextHopFlags::Dead),
                linkdown: hop.flags.contains(RouteNextHopFlags::Linkdown),
            });
        }
    } else if let Some(oif) = oif {
        paths.push(Path {
            oif,
            gateway,
            weight: 1,
            dead: h.flags.contains(RouteFlags::Dead),
            linkdown: h.flags.contains(RouteFlags::Linkdown),
        });
    }
    Some(ParsedRoute {
        prefix,
        table,
        rank: (h.tos, metric),
        cloned: h.flags.contains(RouteFlags::Cloned),
        route: Route {
            kind,
            protocol: u8::from(h.protocol),
            nhid,
            paths,
        },
    })
}

fn parse_link(m: &LinkMessage) -> Link {
    let mut link = Link {
        index: m.header.index,
        name: String::new(),
        mac: None,
        up: m.header.flags.contains(LinkFlags::Up),
        lower_up: m.header.flags.contains(LinkFlags::LowerUp),
    };
    for attr in &m.attributes {
        match attr {
            LinkAttribute::IfName(name) => link.name.clone_from(name),
            LinkAttribute::Address(bytes) => link.mac = mac_of(bytes),
            _ => {}
        }
    }
    link
}

fn parse_address(m: &AddressMessage) -> Option<Address> {
    let mut address = None;
    let mut local = None;
    for attr in &m.attributes {
        match attr {
            AddressAttribute::Address(a) => address = Some(*a),
            AddressAttribute::Local(a) => local = Some(*a),
            _ => {}
        }
    }
    // IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on point-to-point
    // links); IPv6 sends IFA_ADDRESS only.
    Some(Address {
        index: m.header.index,
        addr: local.or(address)?,
        prefix_len: m.header.prefix_len,
    })
}

fn parse_neighbour(m: &NeighbourMessage) -> Option<Neighbour> {
    let mut addr = None;
    let mut mac = None;
    for attr in &m.attributes {
        match attr {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(a)) => {
                addr = Some(IpAddr::V4(*a))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(a)) => {
                addr = Some(IpAddr::V6(*a));
            }
            NeighbourAttribute::LinkLayerAddress(bytes) => mac = mac_of(bytes),
            _ => {}
        }
    }
    Some(Neighbour {
        index: m.header.ifindex,
        addr: addr?,
        mac,
        state: u16::from(m.header.state),
    })
}

fn parse_nexthop(m: &NexthopMessage) -> Nexthop {
    if m.blackhole {
        Nexthop::Blackhole
    } else if !m.group.is_empty() {
        Nexthop::Group(m.group.clone())
    } else {
        Nexthop::Single {
            oif: m.oif.unwrap_or(0),
            gateway: m.gateway,
            dead: m.flags & NEXTHOP_FLAG_DEAD != 0,
        }
    }
}

/// Flags of a message's netlink header that the model needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageFlags {
    /// `NLM_F_REPLACE`.
    pub replace: bool,
    /// `NLM_F_APPEND`.
    pub append: bool,
    /// `NLM_F_CREATE`.
    pub create: bool,
    /// `NLM_F_EXCL`.
    pub exclusive: bool,
}

impl MessageFlags {
    /// From `nlmsg_flags`. Dump replies carry `NLM_F_MULTI` only.
    #[must_use]
    pub fn from_netlink(flags: u16) -> Self {
        use netlink_packet_core::{NLM_F_APPEND, NLM_F_CREATE, NLM_F_EXCL, NLM_F_REPLACE};
        Self {
            replace: flags & NLM_F_REPLACE != 0,
            append: flags & NLM_F_APPEND != 0,
            create: flags & NLM_F_CREATE != 0,
            exclusive: flags & NLM_F_EXCL != 0,
        }
    }
}

impl KernelModel {
    /// Applies one message (from a dump or a notification) and says what it touched.
    pub fn apply(&mut self, message: &RtnlMessage, flags: MessageFlags) -> Touched {
        match message {
            RtnlMessage::Route(RouteNetlinkMessage::NewLink(m)) => self.new_link(parse_link(m)),
            RtnlMessage::Route(RouteNetlinkMessage::DelLink(m)) => {
                let index = m.header.index;
                self.links.remove(&index);
                Touched::Link(index)
            }
            RtnlMessage::Route(RouteNetlinkMessage::NewAddress(m)) => match parse_address(m) {
                Some(a) => {
                    self.addresses.insert(a);
                    Touched::Address(a)
                }
                None => self.malformed(),
            },
            RtnlMessage::Route(RouteNetlinkMessage::DelAddress(m)) => match parse_address(m) {
                Some(a) => {
                    self.addresses.remove(&a);
                    Touched::Address(a)
                }
                None => self.malformed(),
            },
            RtnlMessage::Route(RouteNetlinkMessage::NewNeighbour(m)) => {
                if !matches!(m.header.family, AddressFamily::Inet | AddressFamily::Inet6) {
                    return Touched::Nothing; // bridge FDB entries
                }
                match parse_neighbour(m) {
                    Some(n) => {
                        self.neighbours.insert((n.index, n.addr), n);
                        self.neighbour_links
                            .entry(n.addr)
                            .or_default()
                            .insert(n.index);
                        Touched::Neighbour(n.index, n.addr)
                    }
                    None => self.malformed(),
                }
            }
            RtnlMessage::Route(RouteNetlinkMessage::DelNeighbour(m)) => {
                if !matches!(m.header.family, AddressFamily::Inet | AddressFamily::Inet6) {
                    return Touched::Nothing;
                }
                match parse_neighbour(m) {
                    Some(n) => {
                        self.remove_neighbour(n.index, n.addr);
                        Touched::Neighbour(n.index, n.addr)
                    }
                    None => self.malformed(),
                }
            }
            RtnlMessage::Route(RouteNetlinkMessage::NewRoute(m)) => self.new_route(m, flags),
            RtnlMessage::Route(RouteNetlinkMessage::DelRoute(m)) => self.del_route(m),
            RtnlMessage::NewNexthop(m) => {
                self.nexthops.insert(m.id, parse_nexthop(m));
                Touched::Nexthop(m.id)
            }
            RtnlMessage::DelNexthop(m) => {
                self.nexthops.remove(&m.id);
                Touched::Nexthop(m.id)
            }
            _ => Touched::Nothing,
        }
    }

    fn malformed(&mut self) -> Touched {
        self.stats.malformed += 1;
        Touched::Nothing
    }

    fn new_link(&mut self, link: Link) -> Touched {
        let index = link.index;
        let touched = match self.links.get(&index) {
            Some(old)
                if old.name == link.name && old.up == link.up && old.lower_up == link.lower_up =>
            {
                if old.mac == link.mac {
                    Touched::Nothing
                } else {
                    Touched::LinkMac(index)
                }
            }
            _ => Touched::Link(index),
        };
        self.links.insert(index, link);
        touched
    }

    fn remove_neighbour(&mut self, index: u32, addr: IpAddr) {
        self.neighbours.remove(&(index, addr));
        if let Some(links) = self.neighbour_links.get_mut(&addr) {
            links.remove(&index);
            if links.is_empty() {
                self.neighbour_links.remove(&addr);
            }
        }
    }

    fn accept_route(&mut self, parsed: &ParsedRoute) -> bool {
        if parsed.cloned || parsed.table == 255 {
            return false;
        }
        if parsed.table != MAIN_TABLE {
            self.stats.routes_other_table += 1;
            return false;
        }
        if parsed.rank.0 != 0 {
            self.stats.routes_with_tos += 1;
            return false;
        }
        true
    }

    fn new_route(&mut self, m: &RouteMessage, flags: MessageFlags) -> Touched {
        let Some(parsed) = parse_route(m) else {
            return self.malformed();
        };
        if !self.accept_route(&parsed) {
            return Touched::Nothing;
        }
        let ipv6 = matches!(parsed.prefix, Prefix::V6(_));
        let list = self
            .routes
            .entry(parsed.prefix)
            .or_default()
            .entry(parsed.rank)
            .or_default();
        if ipv6 || flags.replace || list.is_empty() {
            // IPv6 messages carry the whole route; a replace replaces the route in force.
            if list.is_empty() {
                list.push(parsed.route);
            } else {
                list[0] = parsed.route;
            }
        } else if flags.append || !flags.create {
            // IPv4 append, or a second route of the key in a dump: behind the first.
            list.push(parsed.route);
        } else {
            // `ip route prepend`.
            list.insert(0, parsed.route);
        }
        Touched::Route(parsed.prefix)
    }

    fn del_route(&mut self, m: &RouteMessage) -> Touched {
        let Some(parsed) = parse_route(m) else {
            return self.malformed();
        };
        if !self.accept_route(&parsed) {
            return Touched::Nothing;
        }
        let prefix = parsed.prefix;
        let Some(ranks) = self.routes.get_mut(&prefix) else {
            return Touched::Route(prefix);
        };
        if let Some(list) = ranks.get_mut(&parsed.rank) {
            let ipv6 = matches!(prefix, Prefix::V6(_));
            if ipv6 && !parsed.route.paths.is_empty() && list.len() == 1 {
                // Remove the paths named; the route goes with its last path.
                let same = |a: &Path, b: &Path| a.oif == b.oif && a.gateway == b.gateway;
                list[0]
                    .paths
                    .retain(|p| !parsed.route.paths.iter().any(|q| same(p, q)));
                if list[0].paths.is_empty() {
                    list.clear();
                }
            } else if let Some(at) = list
                .iter()
                .position(|r| r.kind == parsed.route.kind && r.paths == parsed.route.paths)
            {
                list.remove(at);
            } else if !list.is_empty() {
                list.remove(0);
            }
            if list.is_empty() {
                ranks.remove(&parsed.rank);
            }
        }
        if ranks.is_empty() {
            self.routes.remove(&prefix);
        }
        Touched::Route(prefix)
    }

    /// The route in force for `prefix` exactly: the first of the lowest metric.
    #[must_use]
    pub fn route(&self, prefix: Prefix) -> Option<&Route> {
        self.routes.get(&prefix)?.values().next()?.first()
    }

    /// The kernel's longest-prefix match for `addr` among the mirrored routes.
    #[must_use]
    pub fn lookup(&self, addr: IpAddr) -> Option<(Prefix, &Route)> {
        let width = if addr.is_ipv4() { 32 } else { 128 };
        (0..=width).rev().find_map(|len| {
            let prefix = Prefix::new(addr, len)?;
            self.route(prefix).map(|r| (prefix, r))
        })
    }

    /// The link of an ifindex.
    #[must_use]
    pub fn link(&self, index: u32) -> Option<&Link> {
        self.links.get(&index)
    }
}
