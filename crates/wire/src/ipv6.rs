//! IPv6 fixed headers (RFC 8200 §3), with the Traffic Class split into DSCP and ECN (RFC 2474,
//! RFC 3168) and in-place CE marking (IPv6 has no header checksum, so only the two ECN bits change).
//!
//! **Extension headers are not walked**: `next_header` is the first next-header value, and
//! [`Ipv6Packet::payload`] starts right after the 40-byte fixed header. Callers that need the upper-layer
//! protocol must treat any extension-header value as "not UDP" (the RoCEv2 helpers do). Jumbograms
//! (RFC 2675, payload length 0) are not supported: their payload reads as empty.

use core::net::Ipv6Addr;

use crate::{CeMark, Ecn, Error, Field, IpProtocol};

/// Field offsets of the IPv6 fixed header (RFC 8200 §3).
pub mod field {
    use crate::Field;
    /// Version (4 bits), Traffic Class (8 bits), Flow Label (20 bits).
    pub const VER_TC_FLOW: Field = 0..4;
    /// Payload length (everything after the fixed header, extension headers included).
    pub const LENGTH: Field = 4..6;
    /// Next header.
    pub const NXT_HDR: usize = 6;
    /// Hop limit.
    pub const HOP_LIMIT: usize = 7;
    /// Source address.
    pub const SRC_ADDR: Field = 8..24;
    /// Destination address.
    pub const DST_ADDR: Field = 24..40;
}

/// Length of the fixed header.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLOW_LABEL_MASK: u32 = 0x000F_FFFF;

/// A read/write view of an IPv6 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv6Packet<T> {
        Ipv6Packet { buffer }
    }

    /// Wraps a buffer and runs [`Ipv6Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv6Packet<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Truncated` if the buffer is shorter than 40 bytes, `BadVersion` if the version is not 6,
    /// `Truncated` if it is shorter than 40 + payload length. Trailing bytes (Ethernet padding) are
    /// allowed.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::BadVersion);
        }
        if len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn word0(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    fn addr(&self, f: Field) -> Ipv6Addr {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&self.buffer.as_ref()[f]);
        Ipv6Addr::from(octets)
    }

    /// Version field (6 for a valid packet).
    pub fn version(&self) -> u8 {
        (self.word0() >> 28) as u8
    }

    /// Traffic Class: DSCP << 2 | ECN.
    pub fn traffic_class(&self) -> u8 {
        (self.word0() >> 20) as u8
    }

    /// Differentiated Services Code Point, 0..=63.
    pub fn dscp(&self) -> u8 {
        self.traffic_class() >> 2
    }

    /// ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.traffic_class())
    }

    /// Flow label (20 bits).
    pub fn flow_label(&self) -> u32 {
        self.word0() & FLOW_LABEL_MASK
    }

    /// Payload length (bytes after the fixed header).
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// First next-header value (an extension header or the upper-layer protocol).
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol::from(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// Hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        self.addr(field::SRC_ADDR)
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        self.addr(field::DST_ADDR)
    }

    /// The payload (extension headers included), clamped to the buffer so it never panics.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(data.len());
        &data[HEADER_LEN.min(end)..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_word0(&mut self, word: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&word.to_be_bytes());
    }

    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        let word = (self.word0() & 0x0FFF_FFFF) | (u32::from(version & 0x0F) << 28);
        self.set_word0(word);
    }

    /// Sets the Traffic Class byte.
    pub fn set_traffic_class(&mut self, traffic_class: u8) {
        let word = (self.word0() & 0xF00F_FFFF) | (u32::from(traffic_class) << 20);
        self.set_word0(word);
    }

    /// Sets the DSCP (masked to 6 bits).
    pub fn set_dscp(&mut self, dscp: u8) {
        let tc = (dscp << 2) | (self.traffic_class() & 0b11);
        self.set_traffic_class(tc);
    }

    /// Sets the ECN codepoint.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tc = (self.traffic_class() & !0b11) | ecn.to_bits();
        self.set_traffic_class(tc);
    }

    /// Sets the flow label (masked to 20 bits).
    pub fn set_flow_label(&mut self, flow_label: u32) {
        let word = (self.word0() & !FLOW_LABEL_MASK) | (flow_label & FLOW_LABEL_MASK);
        self.set_word0(word);
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&len.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, next_header: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = next_header.into();
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, hop_limit: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = hop_limit;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Marks Congestion Experienced in place if the packet is ECN-capable (RFC 3168 §6.1.1.1). Only the
    /// two ECN bits of the Traffic Class change: IPv6 has no header checksum, and the Traffic Class is
    /// not part of the UDP pseudo-header (RFC 8200 §8.1), so upper-layer checksums stay valid.
    pub fn mark_ce(&mut self) -> CeMark {
        match self.ecn() {
            Ecn::Ce => CeMark::AlreadyMarked,
            Ecn::NotEct => CeMark::NotEcnCapable,
            Ecn::Ect0 | Ecn::Ect1 => {
                self.set_ecn(Ecn::Ce);
                CeMark::Marked
            }
        }
    }

    /// The payload, mutable (see [`Ipv6Packet::payload`]).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        let end = (HEADER_LEN + usize::from(self.payload_len())).min(len);
        &mut self.buffer.as_mut()[HEADER_LEN.min(end)..end]
    }
}

/// The fields of an IPv6 fixed header. Extension headers are not represented (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// First next header.
    pub next_header: IpProtocol,
    /// Payload length in bytes (saturated at 65535 on emit).
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
    /// DSCP, 0..=63 (masked on emit).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Flow label, 20 bits (masked on emit).
    pub flow_label: u32,
}

impl Ipv6Repr {
    /// Parses the fixed header (runs `check_len`).
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Ipv6Repr, Error> {
        packet.check_len()?;
        Ok(Ipv6Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            flow_label: packet.flow_label(),
        })
    }

    /// Bytes `emit` writes: the 40-byte fixed header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header. Panics if the view is shorter than 40 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        let tc = ((self.dscp & 0x3F) << 2) | self.ecn.to_bits();
        packet.set_word0((6 << 28) | (u32::from(tc) << 20) | (self.flow_label & FLOW_LABEL_MASK));
        packet.set_payload_len(u16::try_from(self.payload_len).unwrap_or(u16::MAX));
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> [u8; 48] {
        let mut b = [0u8; 48];
        // version 6, TC 0x8a (DSCP 34, ECT(0)), flow label 0x12345
        b[..4].copy_from_slice(&[0x68, 0xa1, 0x23, 0x45]);
        b[4..6].copy_from_slice(&8u16.to_be_bytes());
        b[6] = 17;
        b[7] = 64;
        b[8..24].copy_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1).octets());
        b[24..40].copy_from_slice(&Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2).octets());
        b[40..48].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b
    }

    #[test]
    fn reads_fields() {
        let bytes = sample();
        let p = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0x8a);
        assert_eq!(p.dscp(), 34);
        assert_eq!(p.ecn(), Ecn::Ect0);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), IpProtocol::Udp);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1));
        assert_eq!(p.payload(), &[1, 2, 3, 4, 5, 6, 7, 8]);
    }

    #[test]
    fn mark_ce_changes_only_ecn_bits() {
        let mut bytes = sample();
        let before = bytes;
        let mut p = Ipv6Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.mark_ce(), CeMark::Marked);
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.dscp(), 34);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.mark_ce(), CeMark::AlreadyMarked);
        assert_eq!(bytes[1], before[1] | 0x30);
        assert_eq!(bytes[0], before[0]);
        assert_eq!(&bytes[2..], &before[2..]);

        let mut not_ect = sample();
        not_ect[1] &= 0xCF;
        let copy = not_ect;
        assert_eq!(
            Ipv6Packet::new_checked(&mut not_ect[..]).unwrap().mark_ce(),
            CeMark::NotEcnCapable
        );
        assert_eq!(not_ect, copy);
    }

    #[test]
    fn check_len_errors() {
        let good = sample();
        assert_eq!(
            Ipv6Packet::new_checked(&good[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv6Packet::new_checked(&good[..47]).unwrap_err(),
            Error::Truncated
        );
        let mut v4 = good;
        v4[0] = 0x48;
        assert_eq!(
            Ipv6Packet::new_checked(&v4[..]).unwrap_err(),
            Error::BadVersion
        );
    }

    fn any_repr() -> impl Strategy<Value = Ipv6Repr> {
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<u8>(),
            0usize..=65535,
            any::<u8>(),
            0u8..64,
            0u8..4,
            0u32..0x10_0000,
        )
            .prop_map(
                |(src, dst, nh, payload_len, hop_limit, dscp, ecn, flow_label)| Ipv6Repr {
                    src_addr: Ipv6Addr::from(src),
                    dst_addr: Ipv6Addr::from(dst),
                    next_header: IpProtocol::from(nh),
                    payload_len,
                    hop_limit,
                    dscp,
                    ecn: Ecn::from_bits(ecn),
                    flow_label,
                },
            )
    }

    proptest! {
        #[test]
        fn repr_round_trip(repr in any_repr()) {
            let mut buf = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            prop_assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&buf[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100), six in any::<bool>()) {
            let mut bytes = bytes;
            if six && !bytes.is_empty() {
                bytes[0] = 0x60 | (bytes[0] & 0x0F);
            }
            let p = Ipv6Packet::new_unchecked(&bytes[..]);
            if p.check_len().is_ok() {
                let _ = (p.traffic_class(), p.flow_label(), p.src_addr(), p.dst_addr(), p.payload());
                let mut copy = bytes.clone();
                let mut m = Ipv6Packet::new_unchecked(&mut copy[..]);
                let _ = m.mark_ce();
                m.set_payload_len(u16::MAX);
                let _ = m.payload().len();
                let _ = m.payload_mut().len();
            }
            let _ = Ipv6Repr::parse(&p);
        }
    }
}
