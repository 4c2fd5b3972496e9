//! LLDP (IEEE 802.1AB-2016): the LLDPDU, its TLVs, and the IEEE 802.1Qaz DCBX TLVs ([`dcbx`]).
//!
//! An LLDP frame is an untagged Ethernet frame to one of three reserved multicast addresses
//! (nearest bridge 01-80-C2-00-00-0E, the one headroom uses; nearest non-TPMR bridge …03;
//! nearest customer bridge …00) with EtherType 0x88CC. Its payload, the LLDPDU, is a sequence of
//! TLVs: a 16-bit header (7-bit type, 9-bit length of the value) and the value.
//!
//! ```text
//! | Chassis ID (1) | Port ID (2) | Time To Live (3) | optional TLVs ... | End Of LLDPDU (0, optional) |
//! ```
//!
//! **Receive policy** (802.1AB-2016 clause 9.2.7.7.1, with the choices made here):
//!
//! * the LLDPDU is refused ([`LldpduRepr::parse`] returns the error) when its first three TLVs are
//!   not Chassis ID, Port ID and TTL in that order ([`Error::MissingTlv`]), when those have a
//!   length out of range (ID: 2..=256, TTL: at least 2; [`Error::BadLength`]), when a TLV runs past
//!   the end of the buffer ([`Error::Truncated`]), when a Chassis ID, Port ID or TTL TLV appears a
//!   second time ([`Error::DuplicateTlv`]), or when the End TLV has a non-zero length
//!   ([`Error::BadLength`]);
//! * everything after the End TLV is ignored (Ethernet padding). End is optional since
//!   802.1AB-2016 (clause 8.4); the LLDPDU then ends with the buffer;
//! * an optional TLV whose value is malformed for its type (a System Capabilities TLV not 4 bytes
//!   long, an organisationally specific TLV shorter than 4, a DCBX TLV of the wrong length) is
//!   discarded alone: [`Tlvs::iter`] yields it as a [`TlvError`] and goes on to the next one;
//! * TLV types 9..=126 (reserved) and organisationally specific TLVs of other OUIs or subtypes
//!   are carried as [`TlvRepr::Unknown`] and [`TlvRepr::OrganizationallySpecific`], never refused.
//!
//! ID and string TLVs are octet strings (`&[u8]`); they are usually, not always, UTF-8.
//!
//! **Emit.** [`LldpduRepr::emit`] writes Chassis ID, Port ID, TTL, the optional TLVs in the order
//! given, and End; [`LldpduRepr::emit_frame`] adds the Ethernet header and pads to 60 bytes. Both
//! refuse ([`Error::BadLength`]) what the parser would refuse, and anything over 1500 bytes.

pub mod dcbx;

use crate::ethernet::{EtherType, EthernetFrame, MacAddress, HEADER_LEN, MIN_FRAME_LEN};
use crate::Error;

pub use dcbx::DcbxTlv;

/// A 3-byte organisationally unique identifier.
pub type Oui = [u8; 3];

/// Nearest bridge group address, 01-80-C2-00-00-0E: frames to it are never forwarded by a bridge
/// (802.1AB-2016 table 7-1). headroom sends its LLDPDUs here.
pub const NEAREST_BRIDGE: MacAddress = MacAddress([0x01, 0x80, 0xC2, 0x00, 0x00, 0x0E]);
/// Nearest non-TPMR bridge group address, 01-80-C2-00-00-03.
pub const NEAREST_NON_TPMR_BRIDGE: MacAddress = MacAddress([0x01, 0x80, 0xC2, 0x00, 0x00, 0x03]);
/// Nearest customer bridge group address, 01-80-C2-00-00-00.
pub const NEAREST_CUSTOMER_BRIDGE: MacAddress = MacAddress([0x01, 0x80, 0xC2, 0x00, 0x00, 0x00]);

/// Bytes of a TLV header.
pub const TLV_HEADER_LEN: usize = 2;
/// Largest TLV value (9-bit length field).
pub const MAX_TLV_VALUE_LEN: usize = 511;
/// Largest information string of an organisationally specific TLV: 511 − OUI − subtype.
pub const MAX_ORG_INFO_LEN: usize = MAX_TLV_VALUE_LEN - 4;
/// Largest ID (Chassis ID, Port ID) after its subtype byte (802.1AB-2016 8.5.2, 8.5.3).
pub const MAX_ID_LEN: usize = 255;
/// Largest Port Description, System Name and System Description (802.1AB-2016 8.5.5–8.5.7).
pub const MAX_STRING_LEN: usize = 255;
/// Largest LLDPDU headroom emits: the payload of a standard 1500-byte MTU frame.
pub const MAX_LLDPDU_LEN: usize = 1500;

enum_with_unknown! {
    /// TLV types (802.1AB-2016 table 8-1). 9..=126 are reserved and carried as `Unknown`.
    pub enum TlvType(u8) {
        /// End Of LLDPDU.
        End = 0,
        /// Chassis ID (mandatory, first).
        ChassisId = 1,
        /// Port ID (mandatory, second).
        PortId = 2,
        /// Time To Live (mandatory, third).
        Ttl = 3,
        /// Port Description.
        PortDescription = 4,
        /// System Name.
        SystemName = 5,
        /// System Description.
        SystemDescription = 6,
        /// System Capabilities.
        SystemCapabilities = 7,
        /// Management Address.
        ManagementAddress = 8,
        /// Organisationally specific (OUI + subtype + information).
        OrganizationallySpecific = 127,
    }
}

enum_with_unknown! {
    /// Chassis ID subtypes (802.1AB-2016 table 8-2). 0 and 8..=255 are reserved.
    pub enum ChassisIdSubtype(u8) {
        /// entPhysicalAlias of a chassis component.
        ChassisComponent = 1,
        /// ifAlias of an interface.
        InterfaceAlias = 2,
        /// entPhysicalAlias of a port or backplane component.
        PortComponent = 3,
        /// A MAC address (the switch's base MAC for headroom).
        MacAddress = 4,
        /// A network address (first byte: IANA address family).
        NetworkAddress = 5,
        /// ifName of an interface.
        InterfaceName = 6,
        /// Locally assigned.
        LocallyAssigned = 7,
    }
}

enum_with_unknown! {
    /// Port ID subtypes (802.1AB-2016 table 8-3). 0 and 8..=255 are reserved.
    pub enum PortIdSubtype(u8) {
        /// ifAlias.
        InterfaceAlias = 1,
        /// entPhysicalAlias of a port component.
        PortComponent = 2,
        /// A MAC address (lldpad's choice).
        MacAddress = 3,
        /// A network address.
        NetworkAddress = 4,
        /// ifName (headroom's choice: the port name).
        InterfaceName = 5,
        /// Agent circuit ID (RFC 3046).
        AgentCircuitId = 6,
        /// Locally assigned.
        LocallyAssigned = 7,
    }
}

/// System Capabilities bits (802.1AB-2016 table 8-4).
pub mod capability {
    /// Other.
    pub const OTHER: u16 = 0x0001;
    /// Repeater.
    pub const REPEATER: u16 = 0x0002;
    /// MAC bridge.
    pub const BRIDGE: u16 = 0x0004;
    /// WLAN access point.
    pub const WLAN_AP: u16 = 0x0008;
    /// Router.
    pub const ROUTER: u16 = 0x0010;
    /// Telephone.
    pub const TELEPHONE: u16 = 0x0020;
    /// DOCSIS cable device.
    pub const DOCSIS: u16 = 0x0040;
    /// Station only.
    pub const STATION: u16 = 0x0080;
}

/// A read/write view of one TLV at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tlv<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Tlv<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Tlv<T> {
        Tlv { buffer }
    }

    /// Wraps a buffer and checks that it holds the header and the value the header announces.
    pub fn new_checked(buffer: T) -> Result<Tlv<T>, Error> {
        let tlv = Self::new_unchecked(buffer);
        tlv.check_len()?;
        Ok(tlv)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 2-byte header or than header + length.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < TLV_HEADER_LEN || len < self.total_len() {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn header(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The TLV type (upper 7 bits of the header).
    pub fn tlv_type(&self) -> TlvType {
        TlvType::from((self.header() >> 9) as u8)
    }

    /// Length of the value (lower 9 bits of the header).
    pub fn value_len(&self) -> usize {
        usize::from(self.header() & 0x01FF)
    }

    /// Header plus value.
    pub fn total_len(&self) -> usize {
        TLV_HEADER_LEN + self.value_len()
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.buffer.as_ref()[TLV_HEADER_LEN..self.total_len()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Tlv<T> {
    /// Writes the header. Panics if `value_len` exceeds 511.
    pub fn set_header(&mut self, tlv_type: TlvType, value_len: usize) {
        assert!(value_len <= MAX_TLV_VALUE_LEN, "TLV value too long");
        let header = (u16::from(u8::from(tlv_type) & 0x7F) << 9) | value_len as u16;
        self.buffer.as_mut()[..TLV_HEADER_LEN].copy_from_slice(&header.to_be_bytes());
    }

    /// The value, mutable (as long as the header says).
    pub fn value_mut(&mut self) -> &mut [u8] {
        let end = self.total_len();
        &mut self.buffer.as_mut()[TLV_HEADER_LEN..end]
    }
}

/// Chassis ID TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChassisId<'a> {
    /// How to read `id`.
    pub subtype: ChassisIdSubtype,
    /// The ID, 1..=255 bytes (6 for a MAC address).
    pub id: &'a [u8],
}

impl<'a> ChassisId<'a> {
    /// A MAC-address chassis ID (subtype 4).
    pub fn mac(addr: &'a MacAddress) -> ChassisId<'a> {
        ChassisId {
            subtype: ChassisIdSubtype::MacAddress,
            id: addr.as_bytes(),
        }
    }
}

/// Port ID TLV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PortId<'a> {
    /// How to read `id`.
    pub subtype: PortIdSubtype,
    /// The ID, 1..=255 bytes.
    pub id: &'a [u8],
}

/// System Capabilities TLV: what the system can do and what is enabled ([`capability`] bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SystemCapabilities {
    /// Capabilities the system has.
    pub capabilities: u16,
    /// Capabilities enabled.
    pub enabled: u16,
}

/// Management Address TLV (802.1AB-2016 8.5.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ManagementAddress<'a> {
    /// IANA address family (1 IPv4, 2 IPv6, 6 IEEE 802).
    pub address_subtype: u8,
    /// The address, 1..=31 bytes.
    pub address: &'a [u8],
    /// Interface numbering subtype (1 unknown, 2 ifIndex, 3 system port number).
    pub interface_subtype: u8,
    /// Interface number.
    pub interface_number: u32,
    /// Object identifier, 0..=128 bytes (BER-encoded).
    pub oid: &'a [u8],
}

/// Largest management address (address string length ≤ 32 counts the subtype byte).
pub const MAX_MANAGEMENT_ADDRESS_LEN: usize = 31;
/// Largest management OID.
pub const MAX_MANAGEMENT_OID_LEN: usize = 128;

impl<'a> ManagementAddress<'a> {
    fn value_len(&self) -> usize {
        1 + 1 + self.address.len() + 1 + 4 + 1 + self.oid.len()
    }

    fn parse(value: &'a [u8]) -> Result<ManagementAddress<'a>, Error> {
        let string_len = usize::from(*value.first().ok_or(Error::BadLength)?);
        if !(2..=MAX_MANAGEMENT_ADDRESS_LEN + 1).contains(&string_len) {
            return Err(Error::BadLength);
        }
        let rest = value.get(1..).ok_or(Error::BadLength)?;
        let (string, rest) = rest.split_at_checked(string_len).ok_or(Error::BadLength)?;
        let (numbering, rest) = rest.split_at_checked(5).ok_or(Error::BadLength)?;
        let (&oid_len, oid) = rest.split_first().ok_or(Error::BadLength)?;
        if usize::from(oid_len) > MAX_MANAGEMENT_OID_LEN || oid.len() != usize::from(oid_len) {
            return Err(Error::BadLength);
        }
        Ok(ManagementAddress {
            address_subtype: string[0],
            address: &string[1..],
            interface_subtype: numbering[0],
            interface_number: u32::from_be_bytes([
                numbering[1],
                numbering[2],
                numbering[3],
                numbering[4],
            ]),
            oid,
        })
    }

    fn validate(&self) -> Result<(), Error> {
        if self.address.is_empty()
            || self.address.len() > MAX_MANAGEMENT_ADDRESS_LEN
            || self.oid.len() > MAX_MANAGEMENT_OID_LEN
        {
            return Err(Error::BadLength);
        }
        Ok(())
    }

    fn emit(&self, out: &mut [u8]) {
        let addr_end = 2 + self.address.len();
        out[0] = (1 + self.address.len()) as u8;
        out[1] = self.address_subtype;
        out[2..addr_end].copy_from_slice(self.address);
        out[addr_end] = self.interface_subtype;
        out[addr_end + 1..addr_end + 5].copy_from_slice(&self.interface_number.to_be_bytes());
        out[addr_end + 5] = self.oid.len() as u8;
        out[addr_end + 6..addr_end + 6 + self.oid.len()].copy_from_slice(self.oid);
    }
}

/// One TLV, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlvRepr<'a> {
    /// Chassis ID.
    ChassisId(ChassisId<'a>),
    /// Port ID.
    PortId(PortId<'a>),
    /// Time To Live, seconds; 0 = the sender is shutting down, forget it now.
    Ttl(u16),
    /// Port Description, 0..=255 bytes.
    PortDescription(&'a [u8]),
    /// System Name, 0..=255 bytes.
    SystemName(&'a [u8]),
    /// System Description, 0..=255 bytes.
    SystemDescription(&'a [u8]),
    /// System Capabilities.
    SystemCapabilities(SystemCapabilities),
    /// Management Address.
    ManagementAddress(ManagementAddress<'a>),
    /// An IEEE 802.1Qaz TLV (OUI 00-80-C2, subtypes 9..=12).
    Dcbx(DcbxTlv<'a>),
    /// Any other organisationally specific TLV, carried undecoded.
    OrganizationallySpecific {
        /// Organisation.
        oui: Oui,
        /// Organisation-defined subtype.
        subtype: u8,
        /// Information string, 0..=507 bytes.
        info: &'a [u8],
    },
    /// A reserved TLV type (9..=126), carried.
    Unknown {
        /// The raw 7-bit type.
        tlv_type: u8,
        /// The value.
        value: &'a [u8],
    },
    /// End Of LLDPDU.
    End,
}

impl<'a> TlvRepr<'a> {
    /// Decodes one TLV from a checked view. Errors: `Truncated` (the view does not hold the TLV),
    /// `BadLength` (the value does not have the length or layout the type requires).
    pub fn parse(tlv: &Tlv<&'a [u8]>) -> Result<TlvRepr<'a>, Error> {
        tlv.check_len()?;
        let bytes: &'a [u8] = tlv.buffer;
        let value = &bytes[TLV_HEADER_LEN..tlv.total_len()];
        Self::parse_value(tlv.tlv_type(), value)
    }

    fn parse_value(tlv_type: TlvType, value: &'a [u8]) -> Result<TlvRepr<'a>, Error> {
        let string = |value: &'a [u8]| {
            if value.len() > MAX_STRING_LEN {
                Err(Error::BadLength)
            } else {
                Ok(value)
            }
        };
        Ok(match tlv_type {
            TlvType::End => {
                if !value.is_empty() {
                    return Err(Error::BadLength);
                }
                TlvRepr::End
            }
            TlvType::ChassisId => {
                let (subtype, id) = split_id(value)?;
                TlvRepr::ChassisId(ChassisId {
                    subtype: ChassisIdSubtype::from(subtype),
                    id,
                })
            }
            TlvType::PortId => {
                let (subtype, id) = split_id(value)?;
                TlvRepr::PortId(PortId {
                    subtype: PortIdSubtype::from(subtype),
                    id,
                })
            }
            TlvType::Ttl => TlvRepr::Ttl(parse_ttl(value)?),
            TlvType::PortDescription => TlvRepr::PortDescription(string(value)?),
            TlvType::SystemName => TlvRepr::SystemName(string(value)?),
            TlvType::SystemDescription => TlvRepr::SystemDescription(string(value)?),
            TlvType::SystemCapabilities => {
                let [a, b, c, d] = <[u8; 4]>::try_from(value).map_err(|_| Error::BadLength)?;
                TlvRepr::SystemCapabilities(SystemCapabilities {
                    capabilities: u16::from_be_bytes([a, b]),
                    enabled: u16::from_be_bytes([c, d]),
                })
            }
            TlvType::ManagementAddress => {
                TlvRepr::ManagementAddress(ManagementAddress::parse(value)?)
            }
            TlvType::OrganizationallySpecific => {
                if value.len() < 4 {
                    return Err(Error::BadLength);
                }
                let oui = [value[0], value[1], value[2]];
                let subtype = value[3];
                let info = &value[4..];
                match (oui == dcbx::IEEE_8021_OUI)
                    .then(|| DcbxTlv::parse(subtype, info))
                    .transpose()?
                    .flatten()
                {
                    Some(tlv) => TlvRepr::Dcbx(tlv),
                    None => TlvRepr::OrganizationallySpecific { oui, subtype, info },
                }
            }
            TlvType::Unknown(raw) => TlvRepr::Unknown {
                tlv_type: raw,
                value,
            },
        })
    }

    /// The type this TLV is sent with.
    pub fn tlv_type(&self) -> TlvType {
        match self {
            TlvRepr::ChassisId(_) => TlvType::ChassisId,
            TlvRepr::PortId(_) => TlvType::PortId,
            TlvRepr::Ttl(_) => TlvType::Ttl,
            TlvRepr::PortDescription(_) => TlvType::PortDescription,
            TlvRepr::SystemName(_) => TlvType::SystemName,
            TlvRepr::SystemDescription(_) => TlvType::SystemDescription,
            TlvRepr::SystemCapabilities(_) => TlvType::SystemCapabilities,
            TlvRepr::ManagementAddress(_) => TlvType::ManagementAddress,
            TlvRepr::Dcbx(_) | TlvRepr::OrganizationallySpecific { .. } => {
                TlvType::OrganizationallySpecific
            }
            TlvRepr::Unknown { tlv_type, .. } => TlvType::from(*tlv_type),
            TlvRepr::End => TlvType::End,
        }
    }

    /// Length of the value `emit` writes.
    pub fn value_len(&self) -> usize {
        match self {
            TlvRepr::ChassisId(ChassisId { id, .. }) | TlvRepr::PortId(PortId { id, .. }) => {
                1 + id.len()
            }
            TlvRepr::Ttl(_) => 2,
            TlvRepr::PortDescription(s)
            | TlvRepr::SystemName(s)
            | TlvRepr::SystemDescription(s) => s.len(),
            TlvRepr::SystemCapabilities(_) => 4,
            TlvRepr::ManagementAddress(m) => m.value_len(),
            TlvRepr::Dcbx(tlv) => 4 + tlv.info_len(),
            TlvRepr::OrganizationallySpecific { info, .. } => 4 + info.len(),
            TlvRepr::Unknown { value, .. } => value.len(),
            TlvRepr::End => 0,
        }
    }

    /// Header plus value: the bytes `emit` writes.
    pub fn buffer_len(&self) -> usize {
        TLV_HEADER_LEN + self.value_len()
    }

    /// `Err(BadLength)` for what the parser would refuse: an ID of 0 or more than 255 bytes, a
    /// string over 255, an organisationally specific information string over 507, a DCBX TLV
    /// whose fields do not fit ([`DcbxTlv::validate`]), a management address out of range, an
    /// `Unknown` TLV whose type is a named one or above 127, or whose value exceeds 511.
    pub fn validate(&self) -> Result<(), Error> {
        let ok = match self {
            TlvRepr::ChassisId(ChassisId { id, .. }) | TlvRepr::PortId(PortId { id, .. }) => {
                (1..=MAX_ID_LEN).contains(&id.len())
            }
            TlvRepr::PortDescription(s)
            | TlvRepr::SystemName(s)
            | TlvRepr::SystemDescription(s) => s.len() <= MAX_STRING_LEN,
            TlvRepr::ManagementAddress(m) => m.validate().is_ok(),
            TlvRepr::Dcbx(tlv) => {
                tlv.validate()?;
                true
            }
            TlvRepr::OrganizationallySpecific { oui, subtype, info } => {
                // An 00-80-C2 TLV of a subtype we decode (9..=12) must be sent as `Dcbx`, or
                // the parser would read it back as something else.
                let decoded_subtype = *oui == dcbx::IEEE_8021_OUI
                    && !matches!(
                        dcbx::Ieee8021Subtype::from(*subtype),
                        dcbx::Ieee8021Subtype::Unknown(_)
                    );
                info.len() <= MAX_ORG_INFO_LEN && !decoded_subtype
            }
            TlvRepr::Unknown { tlv_type, value } => {
                matches!(TlvType::from(*tlv_type), TlvType::Unknown(raw) if raw <= 0x7F)
                    && value.len() <= MAX_TLV_VALUE_LEN
            }
            TlvRepr::Ttl(_) | TlvRepr::SystemCapabilities(_) | TlvRepr::End => true,
        };
        if ok {
            Ok(())
        } else {
            Err(Error::BadLength)
        }
    }

    /// Writes the TLV into the front of `buf` and returns its length. `Err(BadLength)` if
    /// [`TlvRepr::validate`] fails, `Err(BufferTooSmall)` if `buf` is shorter than `buffer_len()`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        self.validate()?;
        let len = self.buffer_len();
        let out = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let mut tlv = Tlv::new_unchecked(out);
        tlv.set_header(self.tlv_type(), len - TLV_HEADER_LEN);
        let value = tlv.value_mut();
        match self {
            TlvRepr::ChassisId(ChassisId { subtype, id }) => {
                value[0] = u8::from(*subtype);
                value[1..].copy_from_slice(id);
            }
            TlvRepr::PortId(PortId { subtype, id }) => {
                value[0] = u8::from(*subtype);
                value[1..].copy_from_slice(id);
            }
            TlvRepr::Ttl(seconds) => value.copy_from_slice(&seconds.to_be_bytes()),
            TlvRepr::PortDescription(s)
            | TlvRepr::SystemName(s)
            | TlvRepr::SystemDescription(s) => {
                value.copy_from_slice(s);
            }
            TlvRepr::SystemCapabilities(caps) => {
                value[..2].copy_from_slice(&caps.capabilities.to_be_bytes());
                value[2..].copy_from_slice(&caps.enabled.to_be_bytes());
            }
            TlvRepr::ManagementAddress(m) => m.emit(value),
            TlvRepr::Dcbx(tlv) => {
                value[..3].copy_from_slice(&dcbx::IEEE_8021_OUI);
                value[3] = u8::from(tlv.subtype());
                tlv.emit_info(&mut value[4..]);
            }
            TlvRepr::OrganizationallySpecific { oui, subtype, info } => {
                value[..3].copy_from_slice(oui);
                value[3] = *subtype;
                value[4..].copy_from_slice(info);
            }
            TlvRepr::Unknown { value: v, .. } => value.copy_from_slice(v),
            TlvRepr::End => {}
        }
        Ok(len)
    }
}

fn parse_ttl(value: &[u8]) -> Result<u16, Error> {
    // 802.1AB-2016 8.5.4: two octets; a longer value is accepted and the rest ignored.
    let ttl = value.get(..2).ok_or(Error::BadLength)?;
    Ok(u16::from_be_bytes([ttl[0], ttl[1]]))
}

fn split_id(value: &[u8]) -> Result<(u8, &[u8]), Error> {
    // 802.1AB-2016 8.5.2.1 / 8.5.3.1: length 2..=256 (subtype + 1..=255 bytes of ID).
    if !(2..=1 + MAX_ID_LEN).contains(&value.len()) {
        return Err(Error::BadLength);
    }
    Ok((value[0], &value[1..]))
}

/// An optional TLV that [`Tlvs::iter`] could not decode: its raw type and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TlvError {
    /// The raw 7-bit type of the discarded TLV.
    pub tlv_type: u8,
    /// For an organisationally specific TLV, its OUI and subtype (when the value held them).
    pub org: Option<(Oui, u8)>,
    /// Why it was discarded.
    pub error: Error,
}

/// The optional TLVs of an LLDPDU: still encoded (as parsed; framing already checked) or a
/// caller's list (to emit). Two values are equal when they iterate to the same items.
#[derive(Clone, Copy)]
pub enum Tlvs<'a> {
    /// Encoded TLVs, from after the TTL TLV to before the End TLV.
    Encoded(&'a [u8]),
    /// TLVs to emit (not Chassis ID, Port ID, TTL or End: the LLDPDU writes those).
    Decoded(&'a [TlvRepr<'a>]),
}

impl<'a> Tlvs<'a> {
    /// No optional TLVs.
    pub const EMPTY: Tlvs<'static> = Tlvs::Decoded(&[]);

    /// The TLVs in order; a malformed one is yielded as `Err` and iteration goes on.
    pub fn iter(&self) -> TlvIter<'a> {
        TlvIter { tlvs: *self }
    }

    fn encoded_len(&self) -> usize {
        match self {
            Tlvs::Encoded(bytes) => bytes.len(),
            Tlvs::Decoded(list) => list.iter().map(TlvRepr::buffer_len).sum(),
        }
    }
}

impl PartialEq for Tlvs<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Tlvs<'_> {}

impl core::fmt::Debug for Tlvs<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// Iterator over [`Tlvs`].
#[derive(Debug, Clone)]
pub struct TlvIter<'a> {
    tlvs: Tlvs<'a>,
}

impl<'a> Iterator for TlvIter<'a> {
    type Item = Result<TlvRepr<'a>, TlvError>;

    fn next(&mut self) -> Option<Self::Item> {
        match &mut self.tlvs {
            Tlvs::Encoded(bytes) => {
                if bytes.is_empty() {
                    return None;
                }
                let tlv = match Tlv::new_checked(*bytes) {
                    Ok(tlv) => tlv,
                    Err(error) => {
                        // Cannot happen for bytes LldpduRepr::parse framed; stop cleanly anyway.
                        let tlv_type = bytes[0] >> 1;
                        *bytes = &[];
                        return Some(Err(TlvError {
                            tlv_type,
                            org: None,
                            error,
                        }));
                    }
                };
                let total = tlv.total_len();
                let value = &bytes[TLV_HEADER_LEN..total];
                let tlv_type = tlv.tlv_type();
                *bytes = &bytes[total..];
                Some(TlvRepr::parse_value(tlv_type, value).map_err(|error| {
                    TlvError {
                        tlv_type: u8::from(tlv_type),
                        org: (tlv_type == TlvType::OrganizationallySpecific && value.len() >= 4)
                            .then(|| ([value[0], value[1], value[2]], value[3])),
                        error,
                    }
                }))
            }
            Tlvs::Decoded(list) => {
                let (head, rest) = list.split_first()?;
                *list = rest;
                Some(Ok(*head))
            }
        }
    }
}

/// An LLDPDU: the three mandatory TLVs and the optional ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LldpduRepr<'a> {
    /// Chassis ID.
    pub chassis_id: ChassisId<'a>,
    /// Port ID.
    pub port_id: PortId<'a>,
    /// Time To Live, seconds (0 = shutdown).
    pub ttl_s: u16,
    /// Every TLV between TTL and End, in order.
    pub optional: Tlvs<'a>,
}

impl<'a> LldpduRepr<'a> {
    /// Parses an LLDPDU (the Ethernet payload). See the module's receive policy for the errors.
    ///
    /// The buffer may be longer than the LLDPDU (Ethernet padding, an FCS left on, a jumbo frame):
    /// parsing stops at the End TLV. Its length is not limited to 1500 here; the port's MTU
    /// bounds it.
    pub fn parse(lldpdu: &'a [u8]) -> Result<LldpduRepr<'a>, Error> {
        let mut rest = lldpdu;
        let mut next = |want: TlvType| -> Result<&'a [u8], Error> {
            let tlv = Tlv::new_checked(rest)?;
            if tlv.tlv_type() != want {
                return Err(Error::MissingTlv);
            }
            let total = tlv.total_len();
            let value = &rest[TLV_HEADER_LEN..total];
            rest = &rest[total..];
            Ok(value)
        };
        let (subtype, id) = split_id(next(TlvType::ChassisId)?)?;
        let chassis_id = ChassisId {
            subtype: ChassisIdSubtype::from(subtype),
            id,
        };
        let (subtype, id) = split_id(next(TlvType::PortId)?)?;
        let port_id = PortId {
            subtype: PortIdSubtype::from(subtype),
            id,
        };
        let ttl_s = parse_ttl(next(TlvType::Ttl)?)?;
        let optional_start = lldpdu.len() - rest.len();
        let mut optional_end = lldpdu.len();
        let mut at = optional_start;
        while at < lldpdu.len() {
            let tlv = Tlv::new_checked(&lldpdu[at..])?;
            match tlv.tlv_type() {
                TlvType::End => {
                    if tlv.value_len() != 0 {
                        return Err(Error::BadLength);
                    }
                    optional_end = at;
                    break;
                }
                TlvType::ChassisId | TlvType::PortId | TlvType::Ttl => {
                    return Err(Error::DuplicateTlv)
                }
                _ => at += tlv.total_len(),
            }
        }
        Ok(LldpduRepr {
            chassis_id,
            port_id,
            ttl_s,
            optional: Tlvs::Encoded(&lldpdu[optional_start..optional_end]),
        })
    }

    /// The bytes `emit` writes: mandatory TLVs, optional TLVs and End.
    pub fn buffer_len(&self) -> usize {
        TlvRepr::ChassisId(self.chassis_id).buffer_len()
            + TlvRepr::PortId(self.port_id).buffer_len()
            + TlvRepr::Ttl(self.ttl_s).buffer_len()
            + self.optional.encoded_len()
            + TLV_HEADER_LEN
    }

    /// Writes the LLDPDU into the front of `buf` and returns its length. Errors: `BadLength` (a TLV
    /// fails [`TlvRepr::validate`], an optional TLV is Chassis ID, Port ID, TTL or End, an encoded
    /// optional TLV is malformed, or the LLDPDU exceeds 1500 bytes), `BufferTooSmall`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let len = self.buffer_len();
        if len > MAX_LLDPDU_LEN {
            return Err(Error::BadLength);
        }
        let out = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let mut at = 0;
        at += TlvRepr::ChassisId(self.chassis_id).emit(&mut out[at..])?;
        at += TlvRepr::PortId(self.port_id).emit(&mut out[at..])?;
        at += TlvRepr::Ttl(self.ttl_s).emit(&mut out[at..])?;
        for tlv in self.optional.iter() {
            let tlv = tlv.map_err(|_| Error::BadLength)?;
            if matches!(
                tlv.tlv_type(),
                TlvType::ChassisId | TlvType::PortId | TlvType::Ttl | TlvType::End
            ) {
                return Err(Error::BadLength);
            }
            at += tlv.emit(&mut out[at..])?;
        }
        at += TlvRepr::End.emit(&mut out[at..])?;
        debug_assert_eq!(at, len);
        Ok(len)
    }

    /// Bytes `emit_frame` writes: Ethernet header + LLDPDU, at least 60.
    pub fn frame_len(&self) -> usize {
        (HEADER_LEN + self.buffer_len()).max(MIN_FRAME_LEN)
    }

    /// Writes a whole frame from `src_addr` to `dst_addr` (normally [`NEAREST_BRIDGE`]) with
    /// EtherType 0x88CC, zero-padded to 60 bytes, and returns its length. Errors as [`emit`].
    ///
    /// [`emit`]: LldpduRepr::emit
    pub fn emit_frame(
        &self,
        src_addr: MacAddress,
        dst_addr: MacAddress,
        buf: &mut [u8],
    ) -> Result<usize, Error> {
        let len = self.frame_len();
        let out = buf.get_mut(..len).ok_or(Error::BufferTooSmall)?;
        let used = HEADER_LEN + self.emit(&mut out[HEADER_LEN..])?;
        out[used..].fill(0);
        let mut frame = EthernetFrame::new_unchecked(out);
        frame.set_dst_addr(dst_addr);
        frame.set_src_addr(src_addr);
        frame.set_ethertype(EtherType::Lldp);
        Ok(len)
    }
}

/// An LLDP frame as received: who sent it, to which group address, and the LLDPDU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LldpFrame<'a> {
    /// Source address (the peer's port MAC).
    pub src_addr: MacAddress,
    /// Destination address (one of the three group addresses, or a unicast address).
    pub dst_addr: MacAddress,
    /// The LLDPDU.
    pub lldpdu: LldpduRepr<'a>,
}

/// Parses a whole untagged Ethernet frame carrying an LLDPDU. Errors: `Truncated` (no Ethernet
/// header), `WrongEtherType` (not 0x88CC, including 802.1Q-tagged frames: LLDP is sent untagged),
/// then those of [`LldpduRepr::parse`]. The destination is not checked.
pub fn parse_lldp_frame(frame: &[u8]) -> Result<LldpFrame<'_>, Error> {
    let eth = EthernetFrame::new_checked(frame)?;
    if eth.ethertype() != EtherType::Lldp {
        return Err(Error::WrongEtherType);
    }
    Ok(LldpFrame {
        src_addr: eth.src_addr(),
        dst_addr: eth.dst_addr(),
        lldpdu: LldpduRepr::parse(&frame[HEADER_LEN..])?,
    })
}

#[cfg(test)]
mod tests;
