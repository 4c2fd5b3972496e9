//! Frames for the switch itself ("punted" to the control plane): which ones, how many, and
//! where they wait for the driver to take them.
//!
//! * **Which.** A bridge never relays a frame to one of the reserved group addresses
//!   01-80-C2-00-00-00 to 01-80-C2-00-00-0F (IEEE 802.1Q-2018 8.6.3 and Table 8-1): they are
//!   for the bridge's own protocol entities. MAC Control (…-01, EtherType 0x8808) is acted on in
//!   the dataplane and dropped (`ingress`); every other frame to a reserved address is punted
//!   with a [`PuntReason`] named after its protocol (LLDP, slow protocols, STP, EAPOL) or, for the
//!   rest, `reserved_group_address`. Routing adds its own reasons (ARP, a router MAC, TTL ≤ 1,
//!   an unresolved next hop) to the same enum.
//! * **How many.** Each reason has a token bucket in virtual time (SONiC's CoPP idea: a policer
//!   per trap group, counting packets). A frame over its reason's rate is dropped
//!   (`punt_rate_limit`), and so is a frame that finds the punt queue full (`punt_queue_full`);
//!   both are counted per receiving port and reason. A punted frame never takes ingress PG
//!   buffer: it is not admitted anywhere, it waits in the bounded queue.
//! * **Where.** The ingress side keeps the bounded queue; the driver takes its frames with
//!   [`crate::step::LcoreStep::poll_punt`] every iteration.
//!
//! Limits are per ingress side: the switch-wide rate and burst of [`PuntParams`] are split
//! evenly over the ingress sides (rounded up), so that the whole switch punts at most about that
//! much whatever its lcore layout.

use crate::time::Instant;
use crate::token_bucket::{RateLimit, TokenBucket};
use crate::types::PortId;
use headroom_wire::ethernet::L2Header;
use std::collections::VecDeque;

/// LLDP, IEEE 802.1AB.
const ETHERTYPE_LLDP: u16 = 0x88CC;
/// Slow protocols (LACP, marker, OAM), IEEE 802.3 Annex 57A.
const ETHERTYPE_SLOW_PROTOCOLS: u16 = 0x8809;
/// Port access entity (EAPOL), IEEE 802.1X.
const ETHERTYPE_EAPOL: u16 = 0x888E;
/// Below this, the type field is an IEEE 802.3 length and an LLC header follows (STP BPDUs).
const ETHERTYPE_MIN: u16 = 0x0600;

macro_rules! punt_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// Why a frame was punted to the control plane. Names are stable (counters, logs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum PuntReason {
            $(#[doc = $doc] $variant,)*
        }

        impl PuntReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [PuntReason] = &[$(PuntReason::$variant,)*];
            /// Number of reasons.
            pub const COUNT: usize = Self::ALL.len();

            /// The stable name.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(PuntReason::$variant => $name,)*
                }
            }

            /// The reason as an index into per-reason arrays.
            #[must_use]
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
}

punt_reasons! {
    Lldp => "lldp", "LLDP (IEEE 802.1AB, EtherType 0x88CC) to a reserved group address.";
    Lacp => "lacp", "Slow protocols: LACP, marker, OAM (EtherType 0x8809, IEEE 802.3 Annex 57A).";
    Stp => "stp", "Spanning tree BPDUs: LLC frames to the bridge group address 01-80-C2-00-00-00.";
    Eapol => "eapol", "Port-based access control (EAPOL, EtherType 0x888E, IEEE 802.1X).";
    ReservedGroupAddress => "reserved_group_address", "Any other frame to a reserved group address 01-80-C2-00-00-0X (IEEE 802.1Q Table 8-1): never relayed.";
    ArpReq => "arp_req", "ARP request on a routed port (broadcast, or unicast to its router MAC): the kernel answers (SONiC trap `arp_req`).";
    ArpResp => "arp_resp", "ARP reply to a routed port's router MAC: the kernel's neighbour table learns it (SONiC trap `arp_resp`).";
    NeighDiscovery => "neigh_discovery", "IPv6 neighbour discovery on a routed port (ICMPv6 133-137: router/neighbour solicitation and advertisement, redirect), unicast or to 33:33:xx multicast (SONiC trap `neigh_discovery`).";
    Ip2me => "ip2me", "An IP packet for the switch itself: the FIB says Local, or the destination is IPv6 link-local (RFC 4291 2.5.6: never forwarded) (SONiC trap `ip2me`).";
    TtlError => "ttl_error", "An IP packet to be forwarded with TTL / hop limit <= 1: the kernel sends ICMP Time Exceeded (RFC 1812 5.3.1, RFC 4443 3.3) (SAI trap `TTL_ERROR`).";
    NeighborMiss => "neighbor_miss", "The route's next hop has no resolved neighbour: the kernel resolves it by ARP/ND and forwards this packet (SONiC trap `neighbor_miss`).";
    IpOptions => "ip_options", "IPv4 with options (IHL > 5) or IPv6 with a hop-by-hop options header: processed by the kernel (RFC 1812 5.2.4; RFC 8200 4.3) (SAI trap `IP_OPTIONS`).";
    Kernel => "kernel", "The FIB hands the packet to the kernel (unreachable and prohibit routes, whose ICMP errors it sends; routes out of interfaces that are not switch ports).";
    L3MtuError => "l3_mtu_error", "A routed packet longer than the egress port's MTU: the kernel fragments it or sends ICMP Fragmentation Needed / Packet Too Big (RFC 1191, RFC 8201) (SAI trap `L3_MTU_ERROR`).";
    LinkLocalMulticast => "link_local_multicast", "IP to a link-local group on a routed port (IPv4 224.0.0.0/24 or 255.255.255.255, IPv6 ff02::/16 other than ND: OSPF, VRRP, MLD, RIPng, DHCP): for the router's own protocols, never routed (RFC 5771, RFC 4291 2.7).";
}

/// Whether `dst` is one of the reserved group addresses 01-80-C2-00-00-00 to -0F that a bridge
/// never relays (IEEE 802.1Q-2018 Table 8-1).
#[inline]
#[must_use]
pub fn is_reserved_group_address(dst: [u8; 6]) -> bool {
    dst[..5] == [0x01, 0x80, 0xC2, 0x00, 0x00] && dst[5] < 0x10
}

/// Why a frame with this header is for the switch itself, if it is. MAC Control frames are
/// handled before this is asked.
#[inline]
#[must_use]
pub fn punt_reason(l2: &L2Header) -> Option<PuntReason> {
    let dst = l2.dst_addr.0;
    if !is_reserved_group_address(dst) {
        return None;
    }
    let ethertype = u16::from(l2.ethertype);
    Some(match ethertype {
        ETHERTYPE_LLDP => PuntReason::Lldp,
        ETHERTYPE_SLOW_PROTOCOLS => PuntReason::Lacp,
        ETHERTYPE_EAPOL => PuntReason::Eapol,
        t if t < ETHERTYPE_MIN && dst[5] == 0 => PuntReason::Stp,
        _ => PuntReason::ReservedGroupAddress,
    })
}

/// A frame for the control plane, with the port it arrived on and why it is punted.
#[derive(Debug)]
pub struct Punted<F> {
    /// The port the frame was received on.
    pub port: PortId,
    /// Why it is for the switch.
    pub reason: PuntReason,
    /// The VLAN interface (SVI) it is for: its VLAN, when it arrived in a VLAN with an SVI and
    /// is for the router there (ARP, ND, to the SVI's router MAC); `None` for a routed port's
    /// and the bridge's own frames. The control plane hands it to that VLAN's host interface.
    pub vlan: Option<u16>,
    /// The frame as received (tags included).
    pub frame: F,
}

/// Rate limits of the punt path and the bound of its queue (switch-wide; see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PuntParams {
    /// Per [`PuntReason`] (by index): the rate and burst of its token bucket.
    pub limits: [RateLimit; PuntReason::COUNT],
    /// Frames the punt queue of one ingress side holds at most.
    pub queue_frames: u32,
}

impl Default for PuntParams {
    /// After SONiC's default CoPP groups (`copp_cfg.j2`, CIR = CBS in packets/s): LLDP 100
    /// (`queue4_group3`), LACP 6000 (`queue4_group1`); STP and EAPOL, link protocols that must
    /// not starve, get LACP's; any other reserved address LLDP's. Routing: ARP requests and
    /// replies and ND 600 (`queue4_group2`), ip2me 6000 (`queue1_group1`), neighbor_miss 200
    /// (`queue1_group3`). SONiC configures no trap for TTL errors, IP options and MTU errors
    /// (SAI then drops them); here they reach the kernel, which sends the ICMP errors RFC 1812
    /// asks for, at 200/s each, and the kernel route and link-local multicast (OSPF, VRRP, MLD)
    /// get SONiC's default group's 600.
    fn default() -> Self {
        let mut limits = [RateLimit::per_second(100); PuntReason::COUNT];
        limits[PuntReason::Lacp.index()] = RateLimit::per_second(6000);
        limits[PuntReason::Stp.index()] = RateLimit::per_second(6000);
        limits[PuntReason::Eapol.index()] = RateLimit::per_second(6000);
        limits[PuntReason::ArpReq.index()] = RateLimit::per_second(600);
        limits[PuntReason::ArpResp.index()] = RateLimit::per_second(600);
        limits[PuntReason::NeighDiscovery.index()] = RateLimit::per_second(600);
        limits[PuntReason::Ip2me.index()] = RateLimit::per_second(6000);
        limits[PuntReason::NeighborMiss.index()] = RateLimit::per_second(200);
        limits[PuntReason::TtlError.index()] = RateLimit::per_second(200);
        limits[PuntReason::IpOptions.index()] = RateLimit::per_second(200);
        limits[PuntReason::L3MtuError.index()] = RateLimit::per_second(200);
        limits[PuntReason::Kernel.index()] = RateLimit::per_second(600);
        limits[PuntReason::LinkLocalMulticast.index()] = RateLimit::per_second(600);
        Self {
            limits,
            queue_frames: 1024,
        }
    }
}

/// Why a frame could not be punted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PuntRefused {
    /// Over its reason's rate.
    RateLimit,
    /// The queue is full.
    QueueFull,
}

/// One ingress side's punt path: a bucket per reason and the bounded queue.
#[derive(Debug)]
pub(crate) struct PuntPath<F> {
    buckets: [TokenBucket; PuntReason::COUNT],
    queue: VecDeque<Punted<F>>,
    capacity: usize,
}

impl<F> PuntPath<F> {
    /// The path of one of `ingress_sides` sides, buckets full at `now`. The queue's memory is
    /// allocated here, once: a push never allocates.
    pub(crate) fn new(params: &PuntParams, ingress_sides: usize, now: Instant) -> Self {
        let capacity = params.queue_frames as usize;
        Self {
            buckets: params
                .limits
                .map(|l| TokenBucket::new(l.split(ingress_sides), now)),
            queue: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Queues `frame`, or gives it back with the reason it was refused.
    pub(crate) fn punt(
        &mut self,
        now: Instant,
        port: PortId,
        vlan: Option<u16>,
        reason: PuntReason,
        frame: F,
    ) -> Result<(), (PuntRefused, F)> {
        if !self.buckets[reason.index()].take(now) {
            return Err((PuntRefused::RateLimit, frame));
        }
        if self.queue.len() >= self.capacity {
            return Err((PuntRefused::QueueFull, frame));
        }
        self.queue.push_back(Punted {
            port,
            reason,
            vlan,
            frame,
        });
        Ok(())
    }

    /// The oldest punted frame.
    pub(crate) fn pop(&mut self) -> Option<Punted<F>> {
        self.queue.pop_front()
    }

    /// Frames waiting.
    pub(crate) fn len(&self) -> usize {
        self.queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_wire::ethernet::parse_l2;

    fn header(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
        let mut f = vec![0u8; 60];
        f[..6].copy_from_slice(&dst);
        f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f
    }

    fn reason(dst: [u8; 6], ethertype: u16) -> Option<PuntReason> {
        punt_reason(&parse_l2(&header(dst, ethertype)).expect("a header"))
    }

    #[test]
    fn reserved_addresses_are_punted_by_protocol() {
        let r = |last| [0x01, 0x80, 0xC2, 0, 0, last];
        assert_eq!(reason(r(0x0E), 0x88CC), Some(PuntReason::Lldp));
        assert_eq!(reason(r(0x03), 0x88CC), Some(PuntReason::Lldp));
        assert_eq!(reason(r(0x02), 0x8809), Some(PuntReason::Lacp));
        assert_eq!(reason(r(0x03), 0x888E), Some(PuntReason::Eapol));
        assert_eq!(reason(r(0x00), 0x0026), Some(PuntReason::Stp));
        assert_eq!(
            reason(r(0x0F), 0x0800),
            Some(PuntReason::ReservedGroupAddress)
        );
        // Outside the range: relayed like any multicast, whatever the EtherType.
        assert_eq!(reason(r(0x10), 0x88CC), None);
        assert_eq!(reason([0x01, 0x80, 0xC2, 0, 1, 0], 0x0800), None);
        assert_eq!(reason([0xFF; 6], 0x88CC), None);
    }

    #[test]
    fn names_are_unique_and_indexed() {
        let mut names: Vec<_> = PuntReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), PuntReason::COUNT);
        for (i, r) in PuntReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
