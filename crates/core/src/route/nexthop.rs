//! Next hops and what a route points to.

use crate::route::lpm::MAX_VALUE;
use crate::types::PortId;
use headroom_wire::ethernet::MacAddress;

/// Index of a next hop in the FIB's next-hop table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NextHopId(pub u32);

impl NextHopId {
    /// Addresses of the switch itself (ip2me): punted to the host interface of the ingress port.
    pub const LOCAL: Self = Self(0);
    /// Blackhole routes: dropped and counted.
    pub const BLACKHOLE: Self = Self(1);
    /// Handed to the kernel, which forwards or answers (unreachable and prohibit routes, whose
    /// ICMP errors the kernel sends; routes out of interfaces that are not switch ports).
    pub const KERNEL: Self = Self(2);
    /// Ids below this one are the fixed next hops above; the builder hands out the others.
    pub const FIRST_DYNAMIC: u32 = 3;

    /// The id as an index into the next-hop table.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Index of an ECMP group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EcmpGroupId(pub u32);

impl EcmpGroupId {
    /// The id as an index.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a next hop does with a routed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextHop {
    /// Forward out of `port`: destination MAC `mac` (the neighbour's), source MAC the port's,
    /// tagged with `vlan` when the egress is a VLAN interface (SVI), untagged on a routed port.
    Resolved {
        /// Egress port.
        port: PortId,
        /// 802.1Q VID on egress, `None` untagged.
        vlan: Option<u16>,
        /// The neighbour's MAC address.
        mac: MacAddress,
    },
    /// The neighbour is not (or no longer) known: the packet is punted so that the kernel
    /// resolves it by ARP/ND (SAI's NEIGHBOR_MISS trap).
    Unresolved {
        /// Egress port the neighbour would be reached on.
        port: PortId,
        /// 802.1Q VID on egress, `None` untagged.
        vlan: Option<u16>,
    },
    /// The switch's own address: punted (ip2me).
    Local,
    /// Dropped (blackhole route).
    Blackhole,
    /// Punted for the kernel to forward or answer (see [`NextHopId::KERNEL`]).
    Kernel,
}

impl NextHop {
    /// Whether the packet leaves through the dataplane (not punted, not dropped).
    #[must_use]
    pub const fn is_forwarding(&self) -> bool {
        matches!(self, Self::Resolved { .. })
    }

    /// The egress port, if the next hop has one.
    #[must_use]
    pub const fn port(&self) -> Option<PortId> {
        match self {
            Self::Resolved { port, .. } | Self::Unresolved { port, .. } => Some(*port),
            _ => None,
        }
    }
}

/// What a route points to: one next hop, or an ECMP group of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RouteTarget {
    /// A single next hop.
    NextHop(NextHopId),
    /// An ECMP group: the member is chosen by the flow's hash.
    Ecmp(EcmpGroupId),
}

/// Bit of an encoded target that marks an ECMP group (the LPM leaves hold 23 bits).
const ECMP_FLAG: u32 = 1 << 22;
/// Largest id either kind of target can have once encoded (ids are stored plus one, 0 being
/// "no route").
pub const MAX_TARGET_ID: u32 = ECMP_FLAG - 2;

impl RouteTarget {
    /// The LPM value of this target: never 0 (0 is "no route").
    #[must_use]
    pub(crate) fn encode(self) -> u32 {
        let value = match self {
            Self::NextHop(id) => id.0 + 1,
            Self::Ecmp(id) => ECMP_FLAG | (id.0 + 1),
        };
        debug_assert!(value <= MAX_VALUE);
        value
    }

    /// The target of a non-zero LPM value.
    #[inline]
    #[must_use]
    pub(crate) fn decode(value: u32) -> Option<Self> {
        if value == 0 {
            None
        } else if value & ECMP_FLAG != 0 {
            Some(Self::Ecmp(EcmpGroupId((value & !ECMP_FLAG) - 1)))
        } else {
            Some(Self::NextHop(NextHopId(value - 1)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_round_trip_and_never_encode_to_zero() {
        for t in [
            RouteTarget::NextHop(NextHopId::LOCAL),
            RouteTarget::NextHop(NextHopId(MAX_TARGET_ID)),
            RouteTarget::Ecmp(EcmpGroupId(0)),
            RouteTarget::Ecmp(EcmpGroupId(MAX_TARGET_ID)),
        ] {
            let v = t.encode();
            assert!(v != 0 && v <= MAX_VALUE);
            assert_eq!(RouteTarget::decode(v), Some(t));
        }
        assert_eq!(RouteTarget::decode(0), None);
        assert!(size_of::<NextHop>() <= 12);
    }
}
