//! What travels on the `NETLINK_ROUTE` sockets: `netlink-packet-route`'s messages, plus nexthop
//! objects (`RTM_NEWNEXTHOP`/`RTM_DELNEXTHOP`/`RTM_GETNEXTHOP`, `linux/nexthop.h`), which
//! netlink-packet-route 0.34 does not decode (its nexthop pull request was closed unmerged).
//! zebra installs nexthop objects by default, so the mirror needs them: [`NexthopMessage`] is
//! decoded here with netlink-packet-core's attribute iterator and parsers, and
//! [`RtnlMessage`] plugs it into netlink-packet-core's framing next to the route crate's types.

use netlink_packet_core::{
    parse_u16, parse_u32, DecodeError, NetlinkDeserializable, NetlinkHeader, NetlinkSerializable,
    NlaBuffer, NlasIterator,
};
use netlink_packet_route::RouteNetlinkMessage;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `RTM_NEWNEXTHOP`.
pub const RTM_NEWNEXTHOP: u16 = 104;
/// `RTM_DELNEXTHOP`.
pub const RTM_DELNEXTHOP: u16 = 105;
/// `RTM_GETNEXTHOP`.
pub const RTM_GETNEXTHOP: u16 = 106;

/// `struct nhmsg`: family, scope, protocol, reserved, flags (u32).
const NHMSG_LEN: usize = 8;
const NHA_ID: u16 = 1;
const NHA_GROUP: u16 = 2;
const NHA_GROUP_TYPE: u16 = 3;
const NHA_BLACKHOLE: u16 = 4;
const NHA_OIF: u16 = 5;
const NHA_GATEWAY: u16 = 6;
/// `struct nexthop_grp`: id (u32), weight (u8, weight − 1), weight_high (u8), reserved (u16).
const NEXTHOP_GRP_LEN: usize = 8;
const AF_INET: u8 = 2;
const AF_INET6: u8 = 10;
/// `RTNH_F_DEAD` in `nhmsg.nh_flags`.
pub const NEXTHOP_FLAG_DEAD: u32 = 1;
/// `RTNH_F_LINKDOWN` in `nhmsg.nh_flags`.
pub const NEXTHOP_FLAG_LINKDOWN: u32 = 16;

/// A nexthop object as the kernel reports it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NexthopMessage {
    /// `nh_family` (`AF_INET`, `AF_INET6`, or 0 for groups and blackholes).
    pub family: u8,
    /// `nh_protocol` (e.g. zebra's 11).
    pub protocol: u8,
    /// `nh_flags` (`RTNH_F_*`).
    pub flags: u32,
    /// `NHA_ID`.
    pub id: u32,
    /// `NHA_GROUP`: member ids and weights (1-based: the kernel stores weight − 1).
    pub group: Vec<(u32, u16)>,
    /// `NHA_GROUP_TYPE`: 0 multipath (hash-threshold), 1 resilient.
    pub group_type: u16,
    /// `NHA_BLACKHOLE`.
    pub blackhole: bool,
    /// `NHA_OIF`.
    pub oif: Option<u32>,
    /// `NHA_GATEWAY` (IPv4 or IPv6 by `family`).
    pub gateway: Option<IpAddr>,
}

impl NexthopMessage {
    /// Decodes the payload of an `RTM_*NEXTHOP` message (after the netlink header).
    ///
    /// # Errors
    /// A truncated header or attribute, or an attribute of the wrong size.
    pub fn parse(payload: &[u8]) -> Result<Self, DecodeError> {
        if payload.len() < NHMSG_LEN {
            return Err(DecodeError::from("nhmsg shorter than 8 bytes"));
        }
        let mut message = Self {
            family: payload[0],
            protocol: payload[2],
            flags: u32::from_ne_bytes([payload[4], payload[5], payload[6], payload[7]]),
            ..Self::default()
        };
        for nla in NlasIterator::new(&payload[NHMSG_LEN..]) {
            let nla: NlaBuffer<&[u8]> = nla?;
            let value = nla.value();
            match nla.kind() {
                NHA_ID => message.id = parse_u32(value)?,
                NHA_GROUP => {
                    if !value.len().is_multiple_of(NEXTHOP_GRP_LEN) {
                        return Err(DecodeError::from("NHA_GROUP not a whole number of entries"));
                    }
                    message.group = value
                        .chunks_exact(NEXTHOP_GRP_LEN)
                        .map(|e| {
                            let id = u32::from_ne_bytes([e[0], e[1], e[2], e[3]]);
                            // weight_high (kernel 6.12+) extends the weight to 16 bits.
                            let weight = u16::from_le_bytes([e[4], e[5]]).saturating_add(1);
                            (id, weight)
                        })
                        .collect();
                }
                NHA_GROUP_TYPE => message.group_type = parse_u16(value)?,
                NHA_BLACKHOLE => message.blackhole = true,
                NHA_OIF => message.oif = Some(parse_u32(value)?),
                NHA_GATEWAY => {
                    message.gateway = Some(match (message.family, value.len()) {
                        (AF_INET, 4) => {
                            IpAddr::V4(Ipv4Addr::new(value[0], value[1], value[2], value[3]))
                        }
                        (AF_INET6, 16) => {
                            let mut octets = [0u8; 16];
                            octets.copy_from_slice(value);
                            IpAddr::V6(Ipv6Addr::from(octets))
                        }
                        _ => return Err(DecodeError::from("NHA_GATEWAY of unexpected size")),
                    });
                }
                // Encapsulation, FDB, resilient-group parameters, …: not needed by the mirror.
                _ => {}
            }
        }
        Ok(message)
    }
}

/// Any message of the route netlink family the mirror sends or receives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RtnlMessage {
    /// Everything `netlink-packet-route` knows.
    Route(RouteNetlinkMessage),
    /// `RTM_NEWNEXTHOP`.
    NewNexthop(NexthopMessage),
    /// `RTM_DELNEXTHOP`.
    DelNexthop(NexthopMessage),
    /// `RTM_GETNEXTHOP` with an empty `nhmsg` (a dump request when sent with `NLM_F_DUMP`).
    GetNexthops,
}

impl NetlinkDeserializable for RtnlMessage {
    type Error = DecodeError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, Self::Error> {
        match header.message_type {
            RTM_NEWNEXTHOP => Ok(Self::NewNexthop(NexthopMessage::parse(payload)?)),
            RTM_DELNEXTHOP => Ok(Self::DelNexthop(NexthopMessage::parse(payload)?)),
            _ => Ok(Self::Route(RouteNetlinkMessage::deserialize(
                header, payload,
            )?)),
        }
    }
}

impl NetlinkSerializable for RtnlMessage {
    fn message_type(&self) -> u16 {
        match self {
            Self::Route(m) => NetlinkSerializable::message_type(m),
            Self::NewNexthop(_) => RTM_NEWNEXTHOP,
            Self::DelNexthop(_) => RTM_DELNEXTHOP,
            Self::GetNexthops => RTM_GETNEXTHOP,
        }
    }

    fn buffer_len(&self) -> usize {
        match self {
            Self::Route(m) => NetlinkSerializable::buffer_len(m),
            // The mirror only ever sends the dump request.
            Self::NewNexthop(_) | Self::DelNexthop(_) | Self::GetNexthops => NHMSG_LEN,
        }
    }

    fn serialize(&self, buffer: &mut [u8]) {
        match self {
            Self::Route(m) => m.serialize(buffer),
            Self::NewNexthop(_) | Self::DelNexthop(_) | Self::GetNexthops => {
                buffer[..NHMSG_LEN].fill(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nla(kind: u16, value: &[u8]) -> Vec<u8> {
        let len = 4 + value.len();
        let mut out = Vec::new();
        out.extend_from_slice(&(len as u16).to_ne_bytes());
        out.extend_from_slice(&kind.to_ne_bytes());
        out.extend_from_slice(value);
        while !out.len().is_multiple_of(4) {
            out.push(0);
        }
        out
    }

    #[test]
    fn nexthop_objects_decode() {
        // `ip nexthop add id 10 via 10.1.0.1 dev if7` as the kernel reports it.
        let mut single = vec![AF_INET, 0, 3, 0, 0, 0, 0, 0];
        single.extend(nla(NHA_ID, &10u32.to_ne_bytes()));
        single.extend(nla(NHA_OIF, &7u32.to_ne_bytes()));
        single.extend(nla(NHA_GATEWAY, &[10, 1, 0, 1]));
        let m = NexthopMessage::parse(&single).unwrap();
        assert_eq!((m.id, m.oif, m.protocol), (10, Some(7), 3));
        assert_eq!(m.gateway, Some(IpAddr::V4(Ipv4Addr::new(10, 1, 0, 1))));
        assert!(m.group.is_empty() && !m.blackhole);
        // `group 10/11,3`: weights stored minus one.
        let mut group = vec![0, 0, 11, 0, 0, 0, 0, 0];
        group.extend(nla(NHA_ID, &12u32.to_ne_bytes()));
        let mut entries = Vec::new();
        entries.extend_from_slice(&10u32.to_ne_bytes());
        entries.extend_from_slice(&[0, 0, 0, 0]);
        entries.extend_from_slice(&11u32.to_ne_bytes());
        entries.extend_from_slice(&[2, 0, 0, 0]);
        group.extend(nla(NHA_GROUP, &entries));
        group.extend(nla(NHA_GROUP_TYPE, &0u16.to_ne_bytes()));
        let m = NexthopMessage::parse(&group).unwrap();
        assert_eq!(m.group, vec![(10, 1), (11, 3)]);
        // Blackhole, and malformed input refused.
        let mut bh = vec![0u8; 8];
        bh.extend(nla(NHA_ID, &5u32.to_ne_bytes()));
        bh.extend(nla(NHA_BLACKHOLE, &[]));
        assert!(NexthopMessage::parse(&bh).unwrap().blackhole);
        assert!(NexthopMessage::parse(&[0; 4]).is_err());
        let mut bad = vec![AF_INET, 0, 0, 0, 0, 0, 0, 0];
        bad.extend(nla(NHA_GATEWAY, &[1, 2, 3]));
        assert!(NexthopMessage::parse(&bad).is_err());
        let mut bad_group = vec![0u8; 8];
        bad_group.extend(nla(NHA_GROUP, &[1, 2, 3, 4, 5]));
        assert!(NexthopMessage::parse(&bad_group).is_err());
    }
}
