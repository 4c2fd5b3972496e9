//! UDP headers (RFC 768), with checksums over the IPv4 (RFC 768) and IPv6 (RFC 8200 §8.1)
//! pseudo-headers.
//!
//! RoCEv2 senders put 0 in the UDP checksum (Linux rxe `prepare_udp_hdr`; the ICRC protects the
//! packet). A zero checksum means "none" over IPv4 (RFC 768) but is illegal over IPv6 (RFC 8200 §8.1,
//! outside the RFC 6935/6936 tunnel exception), which is why tshark flags it there.

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::{Error, Field, IpProtocol};

/// Field offsets of the UDP header.
pub mod field {
    use crate::{Field, Rest};
    /// Source port.
    pub const SRC_PORT: Field = 0..2;
    /// Destination port.
    pub const DST_PORT: Field = 2..4;
    /// Length of header + payload.
    pub const LENGTH: Field = 4..6;
    /// Checksum.
    pub const CHECKSUM: Field = 6..8;
    /// Payload.
    pub const PAYLOAD: Rest = 8..;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of a UDP datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// Wraps a buffer and runs [`UdpPacket::check_len`].
    pub fn new_checked(buffer: T) -> Result<UdpPacket<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Truncated` if the buffer is shorter than 8 bytes, `BadLength` if the length field is below 8,
    /// `Truncated` if the buffer is shorter than the length field. Trailing bytes are allowed.
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let udp_len = usize::from(self.len());
        if udp_len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < udp_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, f: Field) -> u16 {
        let b = &self.buffer.as_ref()[f];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// Length field: header + payload bytes.
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// True if the length field says the datagram is empty of everything, header included (never the
    /// case for a checked packet).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checksum as stored (0 = not computed).
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The datagram covered by the length field (header + payload), clamped to the buffer.
    fn datagram(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[..usize::from(self.len()).min(data.len())]
    }

    /// The payload (up to the length field; trailing bytes excluded), clamped to the buffer.
    pub fn payload(&self) -> &[u8] {
        self.datagram().get(HEADER_LEN..).unwrap_or(&[])
    }

    fn sum_with(&self, pseudo: u32) -> u16 {
        checksum::fold(checksum::sum_words(pseudo, self.datagram()))
    }

    /// True if the checksum verifies over the IPv4 pseudo-header, or is 0 (none, RFC 768).
    pub fn verify_checksum_ipv4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let pseudo = checksum::pseudo_header_sum_ipv4(src, dst, IpProtocol::Udp.into(), self.len());
        self.sum_with(pseudo) == 0xFFFF
    }

    /// True if the checksum verifies over the IPv6 pseudo-header. A zero checksum does not verify
    /// (RFC 8200 §8.1).
    pub fn verify_checksum_ipv6(&self, src: Ipv6Addr, dst: Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let pseudo = checksum::pseudo_header_sum_ipv6(
            src,
            dst,
            IpProtocol::Udp.into(),
            u32::from(self.len()),
        );
        self.sum_with(pseudo) == 0xFFFF
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn set_u16_at(&mut self, f: Field, value: u16) {
        self.buffer.as_mut()[f].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, port: u16) {
        self.set_u16_at(field::SRC_PORT, port);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, port: u16) {
        self.set_u16_at(field::DST_PORT, port);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, len: u16) {
        self.set_u16_at(field::LENGTH, len);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    fn fill_with(&mut self, pseudo: u32) {
        self.set_checksum(0);
        let sum = !self.sum_with(pseudo);
        // RFC 768: a computed 0 is sent as all ones, since 0 means "no checksum".
        self.set_checksum(if sum == 0 { 0xFFFF } else { sum });
    }

    /// Computes the checksum over the IPv4 pseudo-header and the datagram (payload must be in place).
    pub fn fill_checksum_ipv4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let pseudo = checksum::pseudo_header_sum_ipv4(src, dst, IpProtocol::Udp.into(), self.len());
        self.fill_with(pseudo);
    }

    /// Computes the checksum over the IPv6 pseudo-header and the datagram (payload must be in place).
    pub fn fill_checksum_ipv6(&mut self, src: Ipv6Addr, dst: Ipv6Addr) {
        let pseudo = checksum::pseudo_header_sum_ipv6(
            src,
            dst,
            IpProtocol::Udp.into(),
            u32::from(self.len()),
        );
        self.fill_with(pseudo);
    }

    /// The payload, mutable (see [`UdpPacket::payload`]).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len()).min(self.buffer.as_ref().len());
        let start = HEADER_LEN.min(end);
        &mut self.buffer.as_mut()[start..end]
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port (RoCEv2: flow entropy, 0xC000..=0xFFFF from rxe).
    pub src_port: u16,
    /// Destination port (RoCEv2: 4791).
    pub dst_port: u16,
    /// Payload length in bytes; the length field is 8 + this (saturated at 65535 on emit).
    pub payload_len: usize,
    /// The checksum as carried: 0 = none (RoCEv2 senders over IPv4). `emit` writes it verbatim; to
    /// compute one, call `fill_checksum_ipv4`/`fill_checksum_ipv6` once the payload is in place.
    pub checksum: u16,
}

impl UdpRepr {
    /// Parses a header (runs `check_len`; the checksum is not verified since that needs the IP
    /// addresses).
    pub fn parse<T: AsRef<[u8]>>(packet: &UdpPacket<T>) -> Result<UdpRepr, Error> {
        packet.check_len()?;
        Ok(UdpRepr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
            checksum: packet.checksum(),
        })
    }

    /// Bytes `emit` writes: the 8-byte header.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length field `emit` writes.
    pub fn len(&self) -> u16 {
        u16::try_from(HEADER_LEN.saturating_add(self.payload_len)).unwrap_or(u16::MAX)
    }

    /// Never true: the length always counts the header.
    pub const fn is_empty(&self) -> bool {
        false
    }

    /// Writes the 8-byte header. Panics if the view is shorter than 8 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.len());
        packet.set_checksum(self.checksum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_rocev2_cnp_header() {
        // dcqcn-roce.md §4.4 vector 1: sport 0, dport 4791, len 40, checksum 0.
        let mut bytes = [0u8; 40];
        bytes[..8].copy_from_slice(&[0x00, 0x00, 0x12, 0xb7, 0x00, 0x28, 0x00, 0x00]);
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            (p.src_port(), p.dst_port(), p.len(), p.checksum()),
            (0, 4791, 40, 0)
        );
        assert_eq!(p.payload().len(), 32);
        assert!(p.verify_checksum_ipv4(Ipv4Addr::new(10, 0, 17, 1), Ipv4Addr::new(10, 0, 18, 1)));
        assert!(!p.verify_checksum_ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST));
    }

    #[test]
    fn checksum_known_value() {
        // 10.0.0.1:1234 -> 10.0.0.2:5678, payload "hi"; checked against a hand computation:
        // pseudo 0a00+0001+0a00+0002+0011+000a = 0x141e; header 04d2+162e+000a = 0x1b0a;
        // payload 6869; total 0x141e+0x1b0a+0x6869 = 0x9791 -> checksum !0x9791 = 0x686e.
        let mut bytes = [0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0a, 0x00, 0x00, b'h', b'i'];
        let mut p = UdpPacket::new_checked(&mut bytes[..]).unwrap();
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        p.fill_checksum_ipv4(src, dst);
        assert_eq!(p.checksum(), 0x686e);
        assert!(p.verify_checksum_ipv4(src, dst));
        p.set_checksum(0x686f);
        assert!(!p.verify_checksum_ipv4(src, dst));
    }

    #[test]
    fn check_len_errors() {
        let mut bytes = [0u8; 12];
        bytes[4..6].copy_from_slice(&12u16.to_be_bytes());
        assert!(UdpPacket::new_checked(&bytes[..]).is_ok());
        assert_eq!(
            UdpPacket::new_checked(&bytes[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            UdpPacket::new_checked(&bytes[..11]).unwrap_err(),
            Error::Truncated
        );
        bytes[4..6].copy_from_slice(&7u16.to_be_bytes());
        assert_eq!(
            UdpPacket::new_checked(&bytes[..]).unwrap_err(),
            Error::BadLength
        );
    }

    proptest! {
        #[test]
        fn repr_round_trip(src_port in any::<u16>(), dst_port in any::<u16>(), payload_len in 0usize..2000, checksum in any::<u16>()) {
            let repr = UdpRepr { src_port, dst_port, payload_len, checksum };
            let mut buf = vec![0u8; HEADER_LEN + payload_len];
            repr.emit(&mut UdpPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn filled_checksums_verify(payload in proptest::collection::vec(any::<u8>(), 0..200), src in any::<[u8; 16]>(), dst in any::<[u8; 16]>()) {
            let mut buf = vec![0u8; HEADER_LEN + payload.len()];
            buf[HEADER_LEN..].copy_from_slice(&payload);
            let repr = UdpRepr { src_port: 49152, dst_port: 4791, payload_len: payload.len(), checksum: 0 };
            let mut p = UdpPacket::new_unchecked(&mut buf[..]);
            repr.emit(&mut p);
            let (s4, d4) = (Ipv4Addr::new(src[0], src[1], src[2], src[3]), Ipv4Addr::new(dst[0], dst[1], dst[2], dst[3]));
            p.fill_checksum_ipv4(s4, d4);
            prop_assert!(p.checksum() != 0);
            prop_assert!(p.verify_checksum_ipv4(s4, d4));
            let (s6, d6) = (Ipv6Addr::from(src), Ipv6Addr::from(dst));
            p.fill_checksum_ipv6(s6, d6);
            prop_assert!(p.checksum() != 0);
            prop_assert!(p.verify_checksum_ipv6(s6, d6));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let p = UdpPacket::new_unchecked(&bytes[..]);
            if p.check_len().is_ok() {
                let _ = (p.payload(), p.verify_checksum_ipv4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST));
                let _ = p.verify_checksum_ipv6(Ipv6Addr::LOCALHOST, Ipv6Addr::LOCALHOST);
                let mut copy = bytes.clone();
                let mut m = UdpPacket::new_unchecked(&mut copy[..]);
                m.set_len(u16::MAX);
                let _ = (m.payload().len(), m.payload_mut().len());
                m.fill_checksum_ipv4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST);
            }
            let _ = UdpRepr::parse(&p);
        }
    }
}
