//! IEEE 802.1Q C-tags (802.1Q-2018 clause 9.6: TPID 0x8100 followed by the Tag Control Information),
//! and in-place tag insertion/removal for frame handles that can grow or shrink at the front.
//!
//! Only single C-tags are supported. An 802.1ad S-tag (TPID 0x88A8) or a tag inside a tag is refused
//! with [`Error::DoubleTag`], never half-parsed.

use core::fmt;

use crate::ethernet::{self, EtherType};
use crate::{Error, Field, Rest};

/// 802.1Q Tag Control Information (802.1Q-2018 9.6): PCP (3 bits), DEI (1 bit), VID (12 bits), stored as
/// the raw 16-bit value so that every bit pattern round-trips.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VlanTci(pub u16);

impl VlanTci {
    /// Builds a TCI. Out-of-range inputs are masked: `pcp` to 3 bits, `vid` to 12 bits.
    pub const fn new(pcp: u8, dei: bool, vid: u16) -> VlanTci {
        VlanTci(((pcp as u16 & 0x7) << 13) | ((dei as u16) << 12) | (vid & 0x0FFF))
    }

    /// Priority Code Point, 0..=7 (the 802.1p priority PFC acts on).
    pub const fn pcp(self) -> u8 {
        (self.0 >> 13) as u8
    }

    /// Drop Eligible Indicator.
    pub const fn dei(self) -> bool {
        self.0 & 0x1000 != 0
    }

    /// VLAN identifier, 0..=4095 (0 = priority-tagged frame, 4095 reserved).
    pub const fn vid(self) -> u16 {
        self.0 & 0x0FFF
    }

    /// The raw 16-bit TCI.
    pub const fn to_bits(self) -> u16 {
        self.0
    }
}

impl fmt::Display for VlanTci {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "vid {} pcp {} dei {}",
            self.vid(),
            self.pcp(),
            u8::from(self.dei())
        )
    }
}

/// Field offsets inside the 4 bytes that follow the TPID (Wireshark's "vlan" layer).
pub mod field {
    use crate::{Field, Rest};
    /// Tag Control Information.
    pub const TCI: Field = 0..2;
    /// EtherType of the encapsulated payload.
    pub const ETHERTYPE: Field = 2..4;
    /// The encapsulated payload.
    pub const PAYLOAD: Rest = 4..;
}

/// Bytes a C-tag adds to a frame (TPID + TCI).
pub const TAG_LEN: usize = 4;

/// A view of what follows a 0x8100 TPID: the TCI, the encapsulated EtherType and the payload.
/// With an [`ethernet::EthernetFrame`] whose EtherType is [`EtherType::Vlan`], use it over
/// `frame.payload()`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VlanTag<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanTag<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> VlanTag<T> {
        VlanTag { buffer }
    }

    /// Wraps a buffer and checks it holds the TCI and EtherType.
    pub fn new_checked(buffer: T) -> Result<VlanTag<T>, Error> {
        let tag = Self::new_unchecked(buffer);
        tag.check_len()?;
        Ok(tag)
    }

    /// `Err(Truncated)` if the buffer is shorter than 4 bytes.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < field::PAYLOAD.start {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, f: Field) -> u16 {
        let b = &self.buffer.as_ref()[f];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Tag Control Information.
    pub fn tci(&self) -> VlanTci {
        VlanTci(self.u16_at(field::TCI))
    }

    /// EtherType of the encapsulated payload.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.u16_at(field::ETHERTYPE))
    }

    /// The encapsulated payload.
    pub fn payload(&self) -> &[u8] {
        let rest: Rest = field::PAYLOAD;
        &self.buffer.as_ref()[rest]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanTag<T> {
    /// Sets the TCI.
    pub fn set_tci(&mut self, tci: VlanTci) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.0.to_be_bytes());
    }

    /// Sets the encapsulated EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&u16::from(ethertype).to_be_bytes());
    }

    /// The encapsulated payload, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The fields of a single 802.1Q C-tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanTagRepr {
    /// Tag Control Information.
    pub tci: VlanTci,
    /// EtherType of the encapsulated payload; never a tag TPID.
    pub ethertype: EtherType,
}

impl VlanTagRepr {
    /// Reads a tag. `Err(DoubleTag)` if the encapsulated EtherType is itself a tag TPID (0x8100 or
    /// 0x88A8).
    pub fn parse<T: AsRef<[u8]>>(tag: &VlanTag<T>) -> Result<VlanTagRepr, Error> {
        tag.check_len()?;
        let ethertype = tag.ethertype();
        if ethertype.is_tag() {
            return Err(Error::DoubleTag);
        }
        Ok(VlanTagRepr {
            tci: tag.tci(),
            ethertype,
        })
    }

    /// Bytes `emit` writes: 4 (TCI + EtherType; the TPID belongs to the Ethernet header).
    pub const fn buffer_len(&self) -> usize {
        field::PAYLOAD.start
    }

    /// Writes the TCI and EtherType. Panics if the view is shorter than 4 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, tag: &mut VlanTag<T>) {
        tag.set_tci(self.tci);
        tag.set_ethertype(self.ethertype);
    }
}

/// Offset of the first address byte once `insert_vlan_tag` has run, and of the untagged frame once
/// `strip_vlan_tag` has run.
const ADDRESSES: Field = 0..12;

/// Tags an untagged frame in place.
///
/// `buf` is 4 scratch bytes followed by an untagged Ethernet frame (the frame handle grew by 4 bytes at
/// the front). The 12 address bytes move to the front and TPID 0x8100 + `tci` are written after them;
/// the original EtherType and payload stay where they are. On success `buf` is the tagged frame.
///
/// Errors: `Truncated` if `buf` is shorter than 4 + 14 bytes; `DoubleTag` if the frame is already
/// tagged (EtherType 0x8100 or 0x88A8). On error `buf` is unchanged.
pub fn insert_vlan_tag(buf: &mut [u8], tci: VlanTci) -> Result<(), Error> {
    if buf.len() < TAG_LEN + ethernet::HEADER_LEN {
        return Err(Error::Truncated);
    }
    let inner = u16::from_be_bytes([buf[TAG_LEN + 12], buf[TAG_LEN + 13]]);
    if EtherType::from(inner).is_tag() {
        return Err(Error::DoubleTag);
    }
    buf.copy_within(TAG_LEN..TAG_LEN + ADDRESSES.end, ADDRESSES.start);
    buf[ethernet::field::ETHERTYPE].copy_from_slice(&u16::from(EtherType::Vlan).to_be_bytes());
    buf[14..16].copy_from_slice(&tci.0.to_be_bytes());
    Ok(())
}

/// Removes the C-tag of a tagged frame in place and returns its TCI.
///
/// The 12 address bytes move 4 bytes towards the end, so the untagged frame starts at offset 4 of
/// `buf`; the caller then drops 4 bytes at the front of its frame handle.
///
/// Errors: `Truncated` if `buf` is shorter than 18 bytes; `DoubleTag` for an S-tag (0x88A8) or a tag
/// inside the tag; `WrongEtherType` if the frame is not tagged. On error `buf` is unchanged.
pub fn strip_vlan_tag(buf: &mut [u8]) -> Result<VlanTci, Error> {
    if buf.len() < ethernet::HEADER_LEN + TAG_LEN {
        return Err(Error::Truncated);
    }
    match EtherType::from(u16::from_be_bytes([buf[12], buf[13]])) {
        EtherType::Vlan => {}
        EtherType::QinQ => return Err(Error::DoubleTag),
        _ => return Err(Error::WrongEtherType),
    }
    let inner = u16::from_be_bytes([buf[16], buf[17]]);
    if EtherType::from(inner).is_tag() {
        return Err(Error::DoubleTag);
    }
    let tci = VlanTci(u16::from_be_bytes([buf[14], buf[15]]));
    buf.copy_within(ADDRESSES, TAG_LEN);
    Ok(tci)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::parse_l2;
    use proptest::prelude::*;

    fn untagged_frame() -> [u8; 20] {
        [
            0x02, 0, 0, 0, 0, 0x02, // dst
            0x02, 0, 0, 0, 0, 0x01, // src
            0x08, 0x00, // IPv4
            1, 2, 3, 4, 5, 6,
        ]
    }

    #[test]
    fn tci_fields() {
        let tci = VlanTci::new(3, true, 100);
        assert_eq!(tci.to_bits(), 0x7064);
        assert_eq!((tci.pcp(), tci.dei(), tci.vid()), (3, true, 100));
        assert_eq!(
            VlanTci::new(9, false, 0x1FFF),
            VlanTci::new(1, false, 0xFFF)
        );
        assert_eq!(VlanTci(0xFFFF).pcp(), 7);
    }

    #[test]
    fn insert_then_strip_restores_the_frame() {
        let original = untagged_frame();
        let mut buf = [0xEEu8; 24];
        buf[4..].copy_from_slice(&original);
        insert_vlan_tag(&mut buf, VlanTci::new(3, false, 10)).unwrap();
        assert_eq!(&buf[..12], &original[..12]);
        assert_eq!(&buf[12..18], &[0x81, 0x00, 0x60, 0x0a, 0x08, 0x00]);
        assert_eq!(&buf[18..], &original[14..]);
        let l2 = parse_l2(&buf).unwrap();
        assert_eq!(l2.vlan, Some(VlanTci::new(3, false, 10)));
        assert_eq!(l2.ethertype, EtherType::Ipv4);

        let tci = strip_vlan_tag(&mut buf).unwrap();
        assert_eq!(tci, VlanTci::new(3, false, 10));
        assert_eq!(&buf[4..], &original);
    }

    #[test]
    fn insert_refuses_short_and_tagged_input() {
        let mut short = [0u8; 17];
        assert_eq!(
            insert_vlan_tag(&mut short, VlanTci(0)),
            Err(Error::Truncated)
        );
        assert_eq!(insert_vlan_tag(&mut [], VlanTci(0)), Err(Error::Truncated));
        assert_eq!(short, [0u8; 17]);

        let mut tagged = [0u8; 22];
        tagged[16..18].copy_from_slice(&[0x81, 0x00]);
        let before = tagged;
        assert_eq!(
            insert_vlan_tag(&mut tagged, VlanTci(0)),
            Err(Error::DoubleTag)
        );
        tagged[16..18].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(
            insert_vlan_tag(&mut tagged, VlanTci(0)),
            Err(Error::DoubleTag)
        );
        tagged[16..18].copy_from_slice(&before[16..18]);
        assert_eq!(tagged, before);
    }

    #[test]
    fn strip_refuses_short_untagged_and_double_tagged_input() {
        let mut short = [0u8; 17];
        short[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(strip_vlan_tag(&mut short), Err(Error::Truncated));
        assert_eq!(strip_vlan_tag(&mut []), Err(Error::Truncated));

        let mut untagged = [0u8; 20];
        untagged.copy_from_slice(&untagged_frame());
        assert_eq!(strip_vlan_tag(&mut untagged), Err(Error::WrongEtherType));
        assert_eq!(untagged, untagged_frame());

        let mut qinq = [0u8; 22];
        qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(strip_vlan_tag(&mut qinq), Err(Error::DoubleTag));
        let mut double = [0u8; 22];
        double[12..14].copy_from_slice(&[0x81, 0x00]);
        double[16..18].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(strip_vlan_tag(&mut double), Err(Error::DoubleTag));
    }

    #[test]
    fn tag_repr_refuses_inner_tag() {
        let bytes = [0x60, 0x00, 0x88, 0xa8];
        let tag = VlanTag::new_checked(&bytes[..]).unwrap();
        assert_eq!(VlanTagRepr::parse(&tag), Err(Error::DoubleTag));
        assert_eq!(
            VlanTag::new_checked(&bytes[..3]).unwrap_err(),
            Error::Truncated
        );
    }

    fn non_tag_ethertype() -> impl Strategy<Value = EtherType> {
        any::<u16>()
            .prop_map(EtherType::from)
            .prop_filter("not a TPID", |e| !e.is_tag())
    }

    proptest! {
        #[test]
        fn repr_round_trip(tci in any::<u16>(), ethertype in non_tag_ethertype()) {
            let repr = VlanTagRepr { tci: VlanTci(tci), ethertype };
            let mut buf = [0u8; 4];
            repr.emit(&mut VlanTag::new_unchecked(&mut buf[..]));
            prop_assert_eq!(VlanTagRepr::parse(&VlanTag::new_checked(&buf[..]).unwrap()).unwrap(), repr);
        }

        #[test]
        fn tci_new_round_trips(pcp in 0u8..8, dei in any::<bool>(), vid in 0u16..4096) {
            let tci = VlanTci::new(pcp, dei, vid);
            prop_assert_eq!((tci.pcp(), tci.dei(), tci.vid()), (pcp, dei, vid));
        }

        #[test]
        fn insert_strip_round_trip(frame in proptest::collection::vec(any::<u8>(), 14..80), tci in any::<u16>()) {
            let mut buf = vec![0u8; frame.len() + 4];
            buf[4..].copy_from_slice(&frame);
            let inserted = insert_vlan_tag(&mut buf, VlanTci(tci));
            if EtherType::from(u16::from_be_bytes([frame[12], frame[13]])).is_tag() {
                prop_assert_eq!(inserted, Err(Error::DoubleTag));
            } else {
                prop_assert_eq!(inserted, Ok(()));
                prop_assert_eq!(strip_vlan_tag(&mut buf), Ok(VlanTci(tci)));
                prop_assert_eq!(&buf[4..], &frame[..]);
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(mut bytes in proptest::collection::vec(any::<u8>(), 0..40), tci in any::<u16>()) {
            if let Ok(tag) = VlanTag::new_checked(&bytes[..]) {
                let _ = VlanTagRepr::parse(&tag);
                let _ = tag.payload();
            }
            let mut copy = bytes.clone();
            let _ = insert_vlan_tag(&mut copy, VlanTci(tci));
            let _ = strip_vlan_tag(&mut bytes);
        }
    }
}
