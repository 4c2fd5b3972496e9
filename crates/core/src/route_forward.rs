//! Routed forwarding: what an ingress side does with a frame received on a routed port
//! ([`crate::params::VlanMode::Routed`]), after the L2 parse, MAC Control and the reserved group
//! addresses (LLDP … keep their punt, `ingress`).
//!
//! Per frame, in this order (`routing-fabric-dcbx.md` §3.1, RFC 1812):
//!
//! 1. **Tag.** Untagged and priority-tagged (VID 0) frames only; other tags `vlan_filtered`.
//! 2. **Multicast and broadcast.** ARP → `arp_req` / `arp_resp` by opcode; IPv6 ND (ICMPv6
//!    133–137) → `neigh_discovery`; IP to a link-local group (224.0.0.0/24, 255.255.255.255,
//!    ff02::/16) → `link_local_multicast` (the router's own protocols: OSPF, VRRP, MLD, DHCP);
//!    anything else `l3_multicast` (headroom does not route multicast).
//! 3. **Router MAC.** Unicast not to the port's MAC: `router_mac_mismatch`. ARP to it → by
//!    opcode; neither IPv4, IPv6 nor ARP: `not_routable`.
//! 4. **Header.** IPv4: version, IHL ≥ 5, total length within the frame and ≥ the header,
//!    header checksum (RFC 1812 §5.2.2) — else `ip_header_error`; IHL > 5 → `ip_options`.
//!    IPv6: version, payload length within the frame — else `ip_header_error`; a hop-by-hop
//!    header → `ip_options`; a link-local destination → `ip2me` (RFC 4291 §2.5.6: never
//!    forwarded); ND → `neigh_discovery`.
//! 5. **Lookup.** LPM on the destination (`no_route` on a miss, or before a FIB is attached);
//!    an ECMP target picks its member by the 5-tuple hash (computed only then). Local → `ip2me`
//!    (whatever the TTL: RFC 1812 §5.3.1 checks TTL only when forwarding), Kernel → `kernel`,
//!    Blackhole → `blackhole` drop.
//! 6. **TTL.** A packet that would be forwarded with TTL / hop limit ≤ 1 → `ttl_error` (the
//!    kernel sends Time Exceeded); then an unresolved next hop → `neighbor_miss` (the kernel
//!    resolves ARP/ND); a packet longer than the egress port's MTU → `l3_mtu_error` (the kernel
//!    fragments or sends Fragmentation Needed / Packet Too Big, which SAI's default drop would
//!    not: a silent PMTUD black hole).
//! 7. **Rewrite in place.** Destination MAC the neighbour's, source MAC the egress port's, TTL−1
//!    with the RFC 1624 eqn. 3 checksum update (IPv6: hop limit, no checksum); DSCP and ECN
//!    untouched. Then the L2 path's `forward`: egress tagging by the egress port (untagged on a
//!    routed port; an SVI next hop's VLAN on an L2 port), the **ingress** port's PG (classified
//!    by its trust and maps, as for L2), the egress port's queue; PFC, ECN, the watchdog and the
//!    accounting are unchanged. Egress port = ingress port is legal (a hairpin route).

use super::{drop_frame, Ctx, IngressFrame, IngressState};
use crate::classify::{classify, PortView};
use crate::counters::{DropReason, IngressPortCounters};
use crate::frame::Frame;
use crate::punt::PuntReason;
use crate::route::nexthop::{NextHop, NextHopId};
use crate::route::FlowKey;
use crate::time::Instant;
use crate::types::{PortId, PRIORITY_COUNT};
use crate::watchdog::{PortMitigations, QueueMitigation};
use headroom_wire::checksum::incremental_update;
use headroom_wire::ethernet::{EtherType, L2Header};
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::ipv6::Ipv6Packet;
use std::net::{Ipv4Addr, Ipv6Addr};

/// ARP, RFC 826.
const ETHERTYPE_ARP: u16 = 0x0806;
/// ARP opcode of a reply (RFC 826; 1 is a request).
const ARP_OP_REPLY: u16 = 2;
/// ICMPv6 (RFC 4443).
const NEXT_HEADER_ICMPV6: u8 = 58;
/// IPv6 hop-by-hop options header (RFC 8200 §4.3): every router on the path processes it.
const NEXT_HEADER_HOP_BY_HOP: u8 = 0;

/// A resolved next hop: its id, egress port, egress VLAN and the neighbour's MAC.
type Hop = (NextHopId, PortId, Option<u16>, [u8; 6]);

/// What the routing decision is, short of forwarding.
enum NotForwarded {
    Punt(PuntReason),
    Drop(DropReason),
}

use NotForwarded::{Drop as D, Punt as P};

/// The ARP trap of an ARP frame by its opcode (bytes 6..8 of the ARP payload).
fn arp_reason(data: &[u8], off: usize) -> PuntReason {
    match data.get(off + 6..off + 8) {
        Some(&[a, b]) if u16::from_be_bytes([a, b]) == ARP_OP_REPLY => PuntReason::ArpResp,
        _ => PuntReason::ArpReq,
    }
}

/// Whether the IPv6 packet at `off` is neighbour discovery: ICMPv6 directly after the fixed
/// header, type 133–137 (RFC 4861 §4).
fn is_nd(data: &[u8], off: usize) -> bool {
    data.get(off + 6) == Some(&NEXT_HEADER_ICMPV6)
        && data.get(off + 40).is_some_and(|t| (133..=137).contains(t))
}

/// Where a multicast or broadcast frame on a routed port goes (step 2).
fn multicast_reason(l2: &L2Header, data: &[u8]) -> NotForwarded {
    let off = l2.payload_offset;
    match u16::from(l2.ethertype) {
        ETHERTYPE_ARP => P(arp_reason(data, off)),
        _ if l2.ethertype == EtherType::Ipv6 => {
            if is_nd(data, off) {
                P(PuntReason::NeighDiscovery)
            } else if data.get(off + 24..off + 26) == Some(&[0xFF, 0x02]) {
                P(PuntReason::LinkLocalMulticast)
            } else {
                D(DropReason::L3Multicast)
            }
        }
        _ if l2.ethertype == EtherType::Ipv4 => match data.get(off + 16..off + 20) {
            Some(&[224, 0, 0, _] | &[255, 255, 255, 255]) => P(PuntReason::LinkLocalMulticast),
            _ => D(DropReason::L3Multicast),
        },
        _ => D(DropReason::L3Multicast),
    }
}

impl<F: Frame> IngressState<F> {
    /// Routes, punts or drops a frame received on the routed port `port` (module doc).
    /// `len` is the frame's length, `l2` its parsed header.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route_frame(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        mitigations: PortMitigations<'_>,
        now: Instant,
        port: PortId,
        l2: &L2Header,
        frame: F,
        len: usize,
    ) {
        if l2.vlan.is_some_and(|tci| tci.vid() != 0) {
            return drop_frame(counters, DropReason::VlanFiltered, frame);
        }
        if l2.dst_addr.is_multicast() {
            let not = multicast_reason(l2, frame.data());
            return self.not_forwarded(counters, now, port, None, not, frame);
        }
        if l2.dst_addr.0 != view.mac {
            return drop_frame(counters, DropReason::RouterMacMismatch, frame);
        }
        self.route_unicast(
            ctx,
            view,
            counters,
            mitigations,
            now,
            port,
            None,
            l2,
            frame,
            len,
        );
    }

    /// [`IngressState::route_unicast`] for a frame to a VLAN interface's router MAC, received
    /// in `vid` on a member port. Out of line: the routed port's copy stays inlined, and the
    /// L2 path only pays the call.
    #[cold]
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route_from_vlan(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        mitigations: PortMitigations<'_>,
        now: Instant,
        port: PortId,
        vid: u16,
        l2: &L2Header,
        frame: F,
        len: usize,
    ) {
        self.route_unicast(
            ctx,
            view,
            counters,
            mitigations,
            now,
            port,
            Some(vid),
            l2,
            frame,
            len,
        );
    }

    /// Steps 3 (what is to the router MAC) to 7 for a frame to a router MAC: a routed port's
    /// (`in_vlan` `None`) or a VLAN interface's (`in_vlan` its VLAN: received on a member port,
    /// possibly tagged; what is punted goes to that VLAN's host interface).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn route_unicast(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        mitigations: PortMitigations<'_>,
        now: Instant,
        port: PortId,
        in_vlan: Option<u16>,
        l2: &L2Header,
        mut frame: F,
        len: usize,
    ) {
        let data = frame.data();
        let off = l2.payload_offset;
        let decided = match l2.ethertype {
            EtherType::Ipv4 => self.route_v4(data, off),
            EtherType::Ipv6 => self.route_v6(data, off),
            t if u16::from(t) == ETHERTYPE_ARP => Err(P(arp_reason(data, off))),
            _ => Err(D(DropReason::NotRoutable)),
        };
        let (id, out, vlan, mac) = match decided {
            Ok(hop) => hop,
            Err(not) => return self.not_forwarded(counters, now, port, in_vlan, not, frame),
        };
        // Egress: a routed port, untagged; or a VLAN interface's VLAN, by the member port the
        // FDB knows the neighbour on (the next hop's port is not consulted: stations move),
        // flooded to the VLAN's members while it knows none. A next hop the ports cannot
        // carry (no VLAN on an L2 port, a VLAN no port is in) is never sent wrongly: dropped.
        let out_view = &ctx.views[out.index()];
        let (egress, vid, src_mac, max_payload) = match vlan {
            None if out_view.routed => (Some(out), 0, out_view.mac, out_view.max_payload),
            Some(v) => match self.vlan_egress(ctx, now, out, v, mac) {
                Some(e) => e,
                None => return drop_frame(counters, DropReason::VlanFiltered, frame),
            },
            None => return drop_frame(counters, DropReason::VlanFiltered, frame),
        };
        // Step 6's MTU check: the IP packet must fit the egress port's MTU (the smallest of
        // the VLAN's members when flooded).
        let ip_len = len - off;
        if ip_len > max_payload {
            let not = P(PuntReason::L3MtuError);
            return self.not_forwarded(counters, now, port, in_vlan, not, frame);
        }
        let (tc, l3) = classify(view, l2, data);
        let pg = view.maps.tc_to_pg[tc.index()].index() % PRIORITY_COUNT;
        let queue = view.maps.tc_to_queue[tc.index()].index() % PRIORITY_COUNT;
        if mitigations.get(queue) == QueueMitigation::Drop {
            counters.pg_frames[pg].inc();
            counters.pg_bytes[pg].add(len as u64);
            counters.pg_drops[pg].inc();
            return drop_frame(counters, DropReason::PfcwdIngress, frame);
        }
        rewrite(
            frame.data_mut(),
            off,
            l2.ethertype == EtherType::Ipv6,
            mac,
            src_mac,
        );
        if let Some(fib) = self.fib.as_ref() {
            fib.count_next_hop(id);
        }
        counters.rif_in_packets.inc();
        counters.rif_in_octets.add(len as u64);
        let meta = IngressFrame {
            in_port: port,
            tc,
            pg,
            queue,
            vid,
            tagged: l2.vlan.is_some(),
            l3,
        };
        let out = match egress {
            Some(out) => out,
            None => match self.flood_copies(ctx, view, counters, now, &meta, &frame) {
                Some(last) => last,
                None => return drop_frame(counters, DropReason::NoDestination, frame),
            },
        };
        // Counted against the port the packet leaves by (a flooded one: the last member).
        let out_counters = &ctx.counters.ports[out.index()];
        out_counters.rif_out_packets.inc();
        out_counters.rif_out_octets.add(len as u64);
        self.forward(ctx, view, counters, now, &meta, out, frame, len);
    }

    /// Where a packet routed to a next hop in VLAN `v` (neighbour `mac`, next-hop port `out`)
    /// leaves: (the port, `None` to flood the VLAN; VID; source MAC; the MTU it must fit), or
    /// `None` when no port can carry it. Out of line: routed ports never call it.
    #[cold]
    #[inline(never)]
    fn vlan_egress(
        &self,
        ctx: &Ctx<'_>,
        now: Instant,
        out: PortId,
        v: u16,
        mac: [u8; 6],
    ) -> Option<(Option<PortId>, u16, [u8; 6], usize)> {
        let svi = self.svi.get(v).copied();
        match self.fdb.fdb.lookup(v, mac, now) {
            Some(p) if ctx.views[p.index()].member(v) => {
                let out_view = &ctx.views[p.index()];
                let src = svi.map_or(out_view.mac, |s| s.mac);
                Some((Some(p), v, src, out_view.max_payload))
            }
            Some(_) => None,
            None => match svi {
                Some(s) if s.max_payload > 0 => Some((None, v, s.mac, s.max_payload)),
                // No SVI: the next hop's port, if it is in the VLAN (a FIB built without one,
                // as the core tests do).
                None if ctx.views[out.index()].member(v) => {
                    let out_view = &ctx.views[out.index()];
                    Some((Some(out), v, out_view.mac, out_view.max_payload))
                }
                _ => None,
            },
        }
    }

    /// A multicast or broadcast frame bridged in `vid`, which has a VLAN interface: a copy of
    /// what is for the router (ARP, ND, link-local multicast; step 2's punts) goes to the
    /// control plane for that VLAN's host interface. Out of line: only multicast in a VLAN
    /// with an SVI calls it.
    #[cold]
    #[inline(never)]
    pub(crate) fn punt_copy_to_svi(
        &mut self,
        counters: &IngressPortCounters,
        now: Instant,
        port: PortId,
        vid: u16,
        l2: &L2Header,
        frame: &F,
    ) {
        let P(reason) = multicast_reason(l2, frame.data()) else {
            return;
        };
        match frame.try_clone() {
            Some(copy) => self.punt_with_reason(counters, now, port, Some(vid), reason, copy),
            None => counters.drops[DropReason::NoBuffer.index()].inc(),
        }
    }

    /// Steps 4–6 for IPv4: the egress port, VLAN and neighbour MAC, or why not.
    #[inline]
    fn route_v4(&self, data: &[u8], off: usize) -> Result<Hop, NotForwarded> {
        let ip = data.get(off..).unwrap_or_default();
        let header_error = D(DropReason::IpHeaderError);
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return Err(header_error);
        }
        let ihl = usize::from(ip[0] & 0x0F) * 4;
        let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
        if ihl < 20 || total < ihl || total > ip.len() {
            return Err(header_error);
        }
        // Options: the kernel processes them, and checks that header's checksum itself.
        if ihl > 20 {
            return Err(P(PuntReason::IpOptions));
        }
        if !header_checksum_ok(&ip[..20]) {
            return Err(header_error);
        }
        let Some(fib) = self.fib.as_ref().map(|r| r.fib()) else {
            return Err(D(DropReason::NoRoute));
        };
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        let Some(target) = fib.lookup_v4(dst) else {
            return Err(D(DropReason::NoRoute));
        };
        let id = fib.resolve(target, || {
            FlowKey::from_ipv4(&Ipv4Packet::new_unchecked(&ip[..total]))
        });
        next_hop(id, fib.next_hop(id), ip[8])
    }

    /// Steps 4–6 for IPv6.
    #[inline]
    fn route_v6(&self, data: &[u8], off: usize) -> Result<Hop, NotForwarded> {
        let ip = data.get(off..).unwrap_or_default();
        if ip.len() < 40
            || ip[0] >> 4 != 6
            || 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]])) > ip.len()
        {
            return Err(D(DropReason::IpHeaderError));
        }
        if ip[6] == NEXT_HEADER_HOP_BY_HOP {
            return Err(P(PuntReason::IpOptions));
        }
        if is_nd(data, off) {
            return Err(P(PuntReason::NeighDiscovery));
        }
        let mut dst_octets = [0u8; 16];
        dst_octets.copy_from_slice(&ip[24..40]);
        let dst = Ipv6Addr::from(dst_octets);
        if dst.is_unicast_link_local() {
            return Err(P(PuntReason::Ip2me));
        }
        if dst.is_multicast() {
            return Err(D(DropReason::L3Multicast));
        }
        let Some(fib) = self.fib.as_ref().map(|r| r.fib()) else {
            return Err(D(DropReason::NoRoute));
        };
        let Some(target) = fib.lookup_v6(dst) else {
            return Err(D(DropReason::NoRoute));
        };
        let id = fib.resolve(target, || {
            let payload = 40 + usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            FlowKey::from_ipv6(&Ipv6Packet::new_unchecked(&ip[..payload]))
        });
        next_hop(id, fib.next_hop(id), ip[7])
    }

    /// Punts or drops a frame the routing decision did not forward.
    fn not_forwarded(
        &mut self,
        counters: &IngressPortCounters,
        now: Instant,
        port: PortId,
        vlan: Option<u16>,
        not: NotForwarded,
        frame: F,
    ) {
        match not {
            P(reason) => self.punt_with_reason(counters, now, port, vlan, reason, frame),
            D(reason) => drop_frame(counters, reason, frame),
        }
    }
}

/// Whether a 20-byte IPv4 header's checksum verifies (RFC 1071: the one's-complement sum of its
/// ten words, checksum included, is 0xFFFF). The fixed length lets the compiler unroll the
/// sum: a third of `checksum::checksum`'s instructions on this path (callgrind, core bench).
#[inline(always)]
fn header_checksum_ok(h: &[u8]) -> bool {
    let Ok(h) = <&[u8; 20]>::try_from(h) else {
        return false;
    };
    let mut acc = 0u32;
    for pair in h.chunks_exact(2) {
        acc += u32::from(u16::from_be_bytes([pair[0], pair[1]]));
    }
    // Ten words: at most 10 × 0xFFFF, so two folds reach 16 bits.
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc = (acc & 0xFFFF) + (acc >> 16);
    acc == 0xFFFF
}

/// Steps 5–6 after the lookup: what the next hop does with a packet of TTL / hop limit `ttl`.
#[inline]
fn next_hop(id: NextHopId, hop: &NextHop, ttl: u8) -> Result<Hop, NotForwarded> {
    // The TTL is checked only for packets that would be forwarded (RFC 1812 5.3.1), before
    // the neighbour: the kernel sends Time Exceeded without resolving it.
    match *hop {
        NextHop::Resolved { .. } | NextHop::Unresolved { .. } if ttl <= 1 => {
            Err(P(PuntReason::TtlError))
        }
        NextHop::Resolved { port, vlan, mac } => Ok((id, port, vlan, mac.0)),
        NextHop::Unresolved { .. } => Err(P(PuntReason::NeighborMiss)),
        NextHop::Local => Err(P(PuntReason::Ip2me)),
        NextHop::Kernel => Err(P(PuntReason::Kernel)),
        NextHop::Blackhole => Err(D(DropReason::Blackhole)),
    }
}

/// Step 7: MACs, and TTL−1 with the RFC 1624 eqn. 3 update of the IPv4 header checksum over
/// the word TTL‖protocol (IPv6: hop limit, no header checksum). The caller checked the header
/// and that TTL / hop limit > 1. DSCP and ECN are not touched.
#[inline(always)]
pub(crate) fn rewrite(data: &mut [u8], off: usize, ipv6: bool, dst: [u8; 6], src: [u8; 6]) {
    data[..6].copy_from_slice(&dst);
    data[6..12].copy_from_slice(&src);
    if ipv6 {
        data[off + 7] -= 1;
    } else {
        let (ttl, protocol) = (data[off + 8], data[off + 9]);
        let old = u16::from_be_bytes([ttl, protocol]);
        let new = u16::from_be_bytes([ttl - 1, protocol]);
        let hc = u16::from_be_bytes([data[off + 10], data[off + 11]]);
        data[off + 8] = ttl - 1;
        data[off + 10..off + 12].copy_from_slice(&incremental_update(hc, old, new).to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use headroom_wire::checksum::checksum;
    use proptest::prelude::*;

    proptest! {
        /// The fixed-length verification agrees with RFC 1071's checksum on random headers,
        /// valid (checksum filled) and not.
        #[test]
        fn the_fixed_header_check_agrees_with_the_checksum(
            mut h in proptest::array::uniform20(any::<u8>()),
            fill in any::<bool>(),
        ) {
            if fill {
                h[10..12].fill(0);
                let sum = checksum(&h);
                h[10..12].copy_from_slice(&sum.to_be_bytes());
            }
            prop_assert_eq!(header_checksum_ok(&h), checksum(&h) == 0);
        }
    }

    proptest! {
        /// RFC 1624 eqn. 3 as `rewrite` applies it equals a full recomputation of the header
        /// checksum, for random IPv4 headers (options included) and TTLs 2..=255.
        #[test]
        fn the_incremental_ttl_update_equals_a_full_recomputation(
            words in proptest::collection::vec(any::<u8>(), 60),
            ihl in 5u8..=15,
            ttl in 2u8..=255,
        ) {
            let off = 14;
            let header_len = usize::from(ihl) * 4;
            let mut frame = vec![0u8; off + 60];
            frame[off..].copy_from_slice(&words);
            frame[off] = 0x40 | ihl;
            frame[off + 8] = ttl;
            frame[off + 10..off + 12].fill(0);
            let sum = checksum(&frame[off..off + header_len]);
            frame[off + 10..off + 12].copy_from_slice(&sum.to_be_bytes());
            let tos = frame[off + 1];
            rewrite(&mut frame, off, false, [1; 6], [2; 6]);
            let mut full = frame[off..off + header_len].to_vec();
            full[10..12].fill(0);
            let recomputed = checksum(&full);
            prop_assert_eq!(&frame[off + 10..off + 12], &recomputed.to_be_bytes()[..]);
            prop_assert_eq!(frame[off + 8], ttl - 1);
            prop_assert_eq!(frame[off + 1], tos, "DSCP and ECN untouched");
            prop_assert_eq!(&frame[..12], &[1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2][..]);
        }
    }

    #[test]
    fn the_update_gives_zero_where_a_recomputation_does_not_negative_zero() {
        // RFC 1624 §3: where the new header sums to 0xFFFF the checksum is 0x0000; the older
        // eqn. 2 form (HC + m + ~m') gives 0xFFFF there. Find such headers and check eqn. 3.
        let mut found = 0;
        for length in 0u16..=u16::MAX {
            let mut f = [0u8; 34];
            f[14] = 0x45;
            f[16..18].copy_from_slice(&length.to_be_bytes());
            f[14 + 8] = 2;
            f[14 + 9] = 17;
            let sum = checksum(&f[14..34]);
            f[24..26].copy_from_slice(&sum.to_be_bytes());
            let mut after = f;
            after[14 + 8] = 1;
            after[24..26].fill(0);
            if checksum(&after[14..34]) != 0 {
                continue;
            }
            found += 1;
            rewrite(&mut f, 14, false, [0; 6], [0; 6]);
            assert_eq!(f[24..26], [0, 0], "total length {length}");
        }
        assert!(found > 0, "the case exists");
    }
}
