//! What a neighbour told us: the owned, bounded copy of its LLDPDU that the neighbour table keeps.

use core::fmt;

use headroom_core::time::Instant;
use headroom_wire::lldp::dcbx::{AppEntry, EtsConfiguration, EtsRecommendation, PfcConfiguration};
use headroom_wire::lldp::{
    ChassisIdSubtype, DcbxTlv, LldpFrame, PortIdSubtype, SystemCapabilities, TlvRepr,
};

/// Management addresses kept per neighbour; further ones are counted as discarded TLVs.
pub const MAX_MANAGEMENT_ADDRESSES: usize = 4;

/// A Chassis ID or Port ID: subtype and bytes (at most 255).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Id {
    /// The raw subtype.
    pub subtype: u8,
    /// The ID.
    pub bytes: Vec<u8>,
}

impl Id {
    /// A 6-byte ID as a MAC address.
    #[must_use]
    pub fn as_mac(&self) -> Option<[u8; 6]> {
        <[u8; 6]>::try_from(self.bytes.as_slice()).ok()
    }

    fn is_mac(&self, mac_subtype: u8) -> bool {
        self.subtype == mac_subtype && self.bytes.len() == 6
    }

    fn is_text(&self, text_subtypes: &[u8]) -> bool {
        text_subtypes.contains(&self.subtype)
            && std::str::from_utf8(&self.bytes).is_ok_and(|s| !s.chars().any(char::is_control))
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, mac: u8, text: &[u8]) -> fmt::Result {
        if self.is_mac(mac) {
            let b = &self.bytes;
            write!(
                f,
                "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
                b[0], b[1], b[2], b[3], b[4], b[5]
            )
        } else if self.is_text(text) {
            f.write_str(&String::from_utf8_lossy(&self.bytes))
        } else {
            for byte in &self.bytes {
                write!(f, "{byte:02x}")?;
            }
            Ok(())
        }
    }
}

/// A Chassis ID, displayed as lldpctl does: a MAC as `aa:bb:…`, names as text, the rest in hex.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChassisId(pub Id);

impl fmt::Display for ChassisId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = [
            u8::from(ChassisIdSubtype::ChassisComponent),
            u8::from(ChassisIdSubtype::InterfaceAlias),
            u8::from(ChassisIdSubtype::PortComponent),
            u8::from(ChassisIdSubtype::InterfaceName),
            u8::from(ChassisIdSubtype::LocallyAssigned),
        ];
        self.0
            .fmt_with(f, u8::from(ChassisIdSubtype::MacAddress), &text)
    }
}

/// A Port ID, displayed like [`ChassisId`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PortId(pub Id);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = [
            u8::from(PortIdSubtype::InterfaceAlias),
            u8::from(PortIdSubtype::PortComponent),
            u8::from(PortIdSubtype::InterfaceName),
            u8::from(PortIdSubtype::AgentCircuitId),
            u8::from(PortIdSubtype::LocallyAssigned),
        ];
        self.0
            .fmt_with(f, u8::from(PortIdSubtype::MacAddress), &text)
    }
}

/// The identifier of a neighbour (802.1AB's MSAP identifier): Chassis ID + Port ID.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NeighbourId {
    /// Chassis ID.
    pub chassis_id: ChassisId,
    /// Port ID.
    pub port_id: PortId,
}

impl fmt::Display for NeighbourId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} port {}", self.chassis_id, self.port_id)
    }
}

/// A Management Address of a neighbour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManagementAddress {
    /// IANA address family (1 IPv4, 2 IPv6).
    pub family: u8,
    /// The address bytes.
    pub address: Vec<u8>,
}

impl fmt::Display for ManagementAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let (1, Ok(v4)) = (self.family, <[u8; 4]>::try_from(self.address.as_slice())) {
            write!(f, "{}", std::net::Ipv4Addr::from(v4))
        } else if let (2, Ok(v6)) = (self.family, <[u8; 16]>::try_from(self.address.as_slice())) {
            write!(f, "{}", std::net::Ipv6Addr::from(v6))
        } else {
            for byte in &self.address {
                write!(f, "{byte:02x}")?;
            }
            Ok(())
        }
    }
}

/// The peer's IEEE 802.1Qaz TLVs (each `None` when it did not send that one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PeerDcbx {
    /// ETS Configuration.
    pub ets: Option<EtsConfiguration>,
    /// ETS Recommendation.
    pub ets_recommendation: Option<EtsRecommendation>,
    /// PFC Configuration.
    pub pfc: Option<PfcConfiguration>,
    /// Application Priority entries.
    pub app: Option<Vec<AppEntry>>,
}

impl PeerDcbx {
    /// The peer sent no 802.1Qaz TLV at all (plain LLDP, like lldpd or lldpad on a veth).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self == &PeerDcbx::default()
    }
}

/// What a neighbour advertises (everything but timers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeighbourInfo {
    /// Source MAC of its last LLDPDU.
    pub src_mac: [u8; 6],
    /// TTL it announced, seconds.
    pub ttl_s: u16,
    /// Port Description.
    pub port_description: Option<String>,
    /// System Name.
    pub system_name: Option<String>,
    /// System Description.
    pub system_description: Option<String>,
    /// System Capabilities.
    pub capabilities: Option<SystemCapabilities>,
    /// Management addresses (at most [`MAX_MANAGEMENT_ADDRESSES`]).
    pub management_addresses: Vec<ManagementAddress>,
    /// Its DCBX TLVs.
    pub dcbx: PeerDcbx,
    /// TLVs we do not decode (reserved types, other OUIs and 802.1 subtypes) in its last LLDPDU.
    pub unrecognized_tlvs: u32,
}

/// One entry of a port's neighbour table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Neighbour {
    /// Chassis ID + Port ID.
    pub id: NeighbourId,
    /// What it advertises.
    pub info: NeighbourInfo,
    /// When it was first heard.
    pub first_seen: Instant,
    /// When its last LLDPDU arrived.
    pub last_update: Instant,
    /// When it is forgotten unless it sends again (last update + TTL).
    pub expires: Instant,
}

/// Counts of one decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct TlvCounts {
    pub discarded: u32,
    pub unrecognized: u32,
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Copies what the table keeps out of a parsed frame. A second TLV of a kind that appears once
/// (a second System Name, a second PFC Configuration, …) is counted as discarded and the first
/// kept, as lldpad does for repeated 802.1Qaz TLVs.
pub(crate) fn decode(frame: &LldpFrame<'_>) -> (NeighbourId, NeighbourInfo, TlvCounts) {
    let lldpdu = &frame.lldpdu;
    let id = NeighbourId {
        chassis_id: ChassisId(Id {
            subtype: u8::from(lldpdu.chassis_id.subtype),
            bytes: lldpdu.chassis_id.id.to_vec(),
        }),
        port_id: PortId(Id {
            subtype: u8::from(lldpdu.port_id.subtype),
            bytes: lldpdu.port_id.id.to_vec(),
        }),
    };
    let mut info = NeighbourInfo {
        src_mac: frame.src_addr.0,
        ttl_s: lldpdu.ttl_s,
        port_description: None,
        system_name: None,
        system_description: None,
        capabilities: None,
        management_addresses: Vec::new(),
        dcbx: PeerDcbx::default(),
        unrecognized_tlvs: 0,
    };
    let mut counts = TlvCounts::default();
    fn once<T>(slot: &mut Option<T>, value: T, counts: &mut TlvCounts) {
        if slot.is_none() {
            *slot = Some(value);
        } else {
            counts.discarded += 1;
        }
    }
    for item in lldpdu.optional.iter() {
        let Ok(tlv) = item else {
            counts.discarded += 1;
            continue;
        };
        match tlv {
            TlvRepr::PortDescription(s) => once(&mut info.port_description, text(s), &mut counts),
            TlvRepr::SystemName(s) => once(&mut info.system_name, text(s), &mut counts),
            TlvRepr::SystemDescription(s) => {
                once(&mut info.system_description, text(s), &mut counts);
            }
            TlvRepr::SystemCapabilities(c) => once(&mut info.capabilities, c, &mut counts),
            TlvRepr::ManagementAddress(m) => {
                if info.management_addresses.len() < MAX_MANAGEMENT_ADDRESSES {
                    info.management_addresses.push(ManagementAddress {
                        family: m.address_subtype,
                        address: m.address.to_vec(),
                    });
                } else {
                    counts.discarded += 1;
                }
            }
            TlvRepr::Dcbx(DcbxTlv::EtsConfiguration(e)) => {
                once(&mut info.dcbx.ets, e, &mut counts);
            }
            TlvRepr::Dcbx(DcbxTlv::EtsRecommendation(e)) => {
                once(&mut info.dcbx.ets_recommendation, e, &mut counts);
            }
            TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(p)) => {
                once(&mut info.dcbx.pfc, p, &mut counts);
            }
            TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(app)) => {
                once(
                    &mut info.dcbx.app,
                    app.entries.iter().collect(),
                    &mut counts,
                );
            }
            TlvRepr::OrganizationallySpecific { .. } | TlvRepr::Unknown { .. } => {
                counts.unrecognized += 1;
            }
            // The parser never yields these as optional TLVs.
            TlvRepr::ChassisId(_) | TlvRepr::PortId(_) | TlvRepr::Ttl(_) | TlvRepr::End => {
                counts.discarded += 1;
            }
        }
    }
    info.unrecognized_tlvs = counts.unrecognized;
    (id, info, counts)
}
