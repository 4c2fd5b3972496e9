//! Ethernet II frames (IEEE 802.3 clause 3.2, EtherType encoding; FCS not included: port backends hand
//! frames over without it) and the one-shot L2 parse used on the switch's per-packet path.

use core::fmt;

use crate::vlan::{VlanTag, VlanTci};
use crate::{Error, Field};

/// A 48-bit IEEE 802 MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddress(pub [u8; 6]);

impl MacAddress {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddress = MacAddress([0xFF; 6]);

    /// The address in the first six bytes of `bytes`, or `None` if there are fewer than six.
    pub fn from_bytes(bytes: &[u8]) -> Option<MacAddress> {
        let octets: [u8; 6] = bytes.get(..6)?.try_into().ok()?;
        Some(MacAddress(octets))
    }

    /// The six octets, in transmission order.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Group address: the I/G bit (least significant bit of the first octet) is set (IEEE 802 §8.2).
    /// Broadcast is a multicast address too.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// ff:ff:ff:ff:ff:ff.
    pub const fn is_broadcast(&self) -> bool {
        let o = self.0;
        o[0] & o[1] & o[2] & o[3] & o[4] & o[5] == 0xFF
    }

    /// Individual (unicast) address: the I/G bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered: the U/L bit (second least significant bit of the first octet) is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for MacAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            o[0], o[1], o[2], o[3], o[4], o[5]
        )
    }
}

impl From<[u8; 6]> for MacAddress {
    fn from(octets: [u8; 6]) -> Self {
        MacAddress(octets)
    }
}

enum_with_unknown! {
    /// EtherType / TPID values the switch distinguishes (IEEE Registration Authority assignments).
    pub enum EtherType(u16) {
        /// IPv4, RFC 894.
        Ipv4 = 0x0800,
        /// IPv6, RFC 2464.
        Ipv6 = 0x86DD,
        /// IEEE 802.1Q C-tag TPID.
        Vlan = 0x8100,
        /// IEEE 802.3 MAC Control (PAUSE, PFC), Annex 31A.
        MacControl = 0x8808,
        /// IEEE 802.1ad S-tag TPID (Q-in-Q).
        QinQ = 0x88A8,
        /// IEEE 802.1AB LLDP.
        Lldp = 0x88CC,
    }
}

impl EtherType {
    /// A VLAN tag protocol identifier (C-tag 0x8100 or S-tag 0x88A8).
    pub fn is_tag(self) -> bool {
        matches!(self, EtherType::Vlan | EtherType::QinQ)
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Vlan => f.write_str("802.1Q"),
            EtherType::MacControl => f.write_str("MAC-Control"),
            EtherType::QinQ => f.write_str("802.1ad"),
            EtherType::Lldp => f.write_str("LLDP"),
            EtherType::Unknown(raw) => write!(f, "0x{raw:04x}"),
        }
    }
}

/// Field offsets of the Ethernet II header.
pub mod field {
    use crate::{Field, Rest};
    /// Destination MAC address.
    pub const DESTINATION: Field = 0..6;
    /// Source MAC address.
    pub const SOURCE: Field = 6..12;
    /// EtherType (or TPID of a tag).
    pub const ETHERTYPE: Field = 12..14;
    /// Payload (after an untagged header).
    pub const PAYLOAD: Rest = 14..;
}

/// Length of the untagged Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// Minimum frame length without FCS (IEEE 802.3 4.4.2 minFrameSize = 64 bytes including the 4-byte FCS).
pub const MIN_FRAME_LEN: usize = 60;

/// A read/write view of an Ethernet II frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// Wraps a buffer and checks it holds a full header.
    pub fn new_checked(buffer: T) -> Result<EthernetFrame<T>, Error> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` if the buffer is shorter than the 14-byte header.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn array<const N: usize>(&self, field: Field) -> [u8; N] {
        let mut out = [0u8; N];
        out.copy_from_slice(&self.buffer.as_ref()[field]);
        out
    }

    /// Destination address.
    pub fn dst_addr(&self) -> MacAddress {
        MacAddress(self.array(field::DESTINATION))
    }

    /// Source address.
    pub fn src_addr(&self) -> MacAddress {
        MacAddress(self.array(field::SOURCE))
    }

    /// The EtherType field (the TPID if the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(u16::from_be_bytes(self.array(field::ETHERTYPE)))
    }

    /// Everything after the 14-byte header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: MacAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: MacAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType field.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    }

    /// Everything after the 14-byte header, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The fields of an untagged Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: MacAddress,
    /// Destination address.
    pub dst_addr: MacAddress,
    /// EtherType (a TPID if a tag follows).
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header of a checked frame. Infallible today; `Result` keeps the Repr API uniform.
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<EthernetRepr, Error> {
        frame.check_len()?;
        Ok(EthernetRepr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Bytes `emit` writes: the 14-byte header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header. Panics if the frame is shorter than 14 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

/// The L2 facts the switch needs per packet, read in one pass without allocation by [`parse_l2`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct L2Header {
    /// Destination address.
    pub dst_addr: MacAddress,
    /// Source address.
    pub src_addr: MacAddress,
    /// The 802.1Q C-tag's TCI if the frame carries one.
    pub vlan: Option<VlanTci>,
    /// The EtherType of the payload (after the tag if there is one).
    pub ethertype: EtherType,
    /// Offset of the payload in the frame: 14 untagged, 18 tagged.
    pub payload_offset: usize,
}

/// Parses the Ethernet header and at most one IEEE 802.1Q C-tag (TPID 0x8100).
///
/// Errors: `Truncated` if the frame is shorter than 14 bytes (18 if tagged); `DoubleTag` for an outer
/// 802.1ad S-tag (TPID 0x88A8) or a second tag inside the C-tag. Frames shorter than the 60-byte
/// minimum are accepted (veth and loopback do not pad).
pub fn parse_l2(frame: &[u8]) -> Result<L2Header, Error> {
    let eth = EthernetFrame::new_checked(frame)?;
    let dst_addr = eth.dst_addr();
    let src_addr = eth.src_addr();
    match eth.ethertype() {
        EtherType::Vlan => {
            let tag = VlanTag::new_checked(eth.payload())?;
            let inner = tag.ethertype();
            if inner.is_tag() {
                return Err(Error::DoubleTag);
            }
            Ok(L2Header {
                dst_addr,
                src_addr,
                vlan: Some(tag.tci()),
                ethertype: inner,
                payload_offset: HEADER_LEN + crate::vlan::TAG_LEN,
            })
        }
        EtherType::QinQ => Err(Error::DoubleTag),
        ethertype => Ok(L2Header {
            dst_addr,
            src_addr,
            vlan: None,
            ethertype,
            payload_offset: HEADER_LEN,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FRAME: [u8; 20] = [
        0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x08, 0x00, // IPv4
        0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF,
    ];

    #[test]
    fn reads_fields() {
        let frame = EthernetFrame::new_checked(&FRAME[..]).unwrap();
        assert_eq!(frame.dst_addr(), MacAddress([0x01, 0x80, 0xc2, 0, 0, 1]));
        assert_eq!(frame.src_addr(), MacAddress([2, 0, 0, 0, 0, 1]));
        assert_eq!(frame.ethertype(), EtherType::Ipv4);
        assert_eq!(frame.payload(), &[0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF]);
    }

    #[test]
    fn rejects_short_header() {
        assert_eq!(
            EthernetFrame::new_checked(&FRAME[..13]).unwrap_err(),
            Error::Truncated
        );
        assert!(EthernetFrame::new_checked(&FRAME[..14]).is_ok());
    }

    #[test]
    fn mac_address_classes_and_display() {
        let pfc = MacAddress([0x01, 0x80, 0xc2, 0, 0, 1]);
        assert!(pfc.is_multicast() && !pfc.is_broadcast() && !pfc.is_unicast());
        assert!(MacAddress::BROADCAST.is_broadcast() && MacAddress::BROADCAST.is_multicast());
        let host = MacAddress([0x02, 0, 0, 0, 0, 0x1f]);
        assert!(host.is_unicast() && host.is_local() && !host.is_broadcast());
        assert_eq!(format!("{pfc}"), "01:80:c2:00:00:01");
        assert_eq!(
            format!("{}", MacAddress([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff])),
            "aa:bb:cc:dd:ee:ff"
        );
        assert_eq!(MacAddress::from_bytes(&[1, 2, 3, 4, 5]), None);
        assert_eq!(
            MacAddress::from_bytes(&[1, 2, 3, 4, 5, 6, 7]),
            Some(MacAddress([1, 2, 3, 4, 5, 6]))
        );
    }

    #[test]
    fn ethertype_code_points() {
        assert_eq!(EtherType::from(0x8808), EtherType::MacControl);
        assert_eq!(EtherType::from(0x88A8), EtherType::QinQ);
        assert_eq!(EtherType::from(0x88B5), EtherType::Unknown(0x88B5));
        assert_eq!(u16::from(EtherType::Vlan), 0x8100);
        assert_eq!(u16::from(EtherType::Unknown(0x1234)), 0x1234);
        assert_eq!(format!("{}", EtherType::Unknown(0x88b5)), "0x88b5");
    }

    #[test]
    fn parse_l2_untagged_and_tagged() {
        let l2 = parse_l2(&FRAME).unwrap();
        assert_eq!(l2.vlan, None);
        assert_eq!(l2.ethertype, EtherType::Ipv4);
        assert_eq!(l2.payload_offset, 14);

        let mut tagged = [0u8; 22];
        tagged[..12].copy_from_slice(&FRAME[..12]);
        tagged[12..14].copy_from_slice(&[0x81, 0x00]);
        tagged[14..16].copy_from_slice(&[0x60, 0x64]); // PCP 3, DEI 0, VID 100
        tagged[16..18].copy_from_slice(&[0x86, 0xdd]);
        let l2 = parse_l2(&tagged).unwrap();
        let tci = l2.vlan.unwrap();
        assert_eq!((tci.pcp(), tci.dei(), tci.vid()), (3, false, 100));
        assert_eq!(l2.ethertype, EtherType::Ipv6);
        assert_eq!(l2.payload_offset, 18);
        assert_eq!(l2.src_addr, MacAddress([2, 0, 0, 0, 0, 1]));

        assert_eq!(parse_l2(&tagged[..17]).unwrap_err(), Error::Truncated);
        assert_eq!(parse_l2(&tagged[..18]).unwrap().payload_offset, 18);
    }

    #[test]
    fn parse_l2_rejects_double_tags() {
        let mut frame = [0u8; 26];
        frame[12..14].copy_from_slice(&[0x81, 0x00]);
        frame[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_l2(&frame).unwrap_err(), Error::DoubleTag);
        frame[16..18].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(parse_l2(&frame).unwrap_err(), Error::DoubleTag);
        frame[12..14].copy_from_slice(&[0x88, 0xa8]);
        frame[16..18].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(parse_l2(&frame).unwrap_err(), Error::DoubleTag);
    }

    fn mac() -> impl Strategy<Value = MacAddress> {
        any::<[u8; 6]>().prop_map(MacAddress)
    }

    proptest! {
        #[test]
        fn repr_round_trip(src in mac(), dst in mac(), ethertype in any::<u16>()) {
            let repr = EthernetRepr { src_addr: src, dst_addr: dst, ethertype: EtherType::from(ethertype) };
            let mut buf = [0u8; HEADER_LEN];
            repr.emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
            let parsed = EthernetRepr::parse(&EthernetFrame::new_checked(&buf[..]).unwrap()).unwrap();
            prop_assert_eq!(parsed, repr);
            prop_assert_eq!(u16::from_be_bytes([buf[12], buf[13]]), ethertype);
        }

        #[test]
        fn ethertype_conversion_is_lossless(raw in any::<u16>()) {
            prop_assert_eq!(u16::from(EtherType::from(raw)), raw);
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(frame) = EthernetFrame::new_checked(&bytes[..]) {
                let _ = EthernetRepr::parse(&frame);
                let _ = frame.payload();
            }
            if let Ok(l2) = parse_l2(&bytes) {
                prop_assert!(l2.payload_offset <= bytes.len());
                prop_assert!(!l2.ethertype.is_tag());
            }
        }
    }
}
