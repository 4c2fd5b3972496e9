//! IPv4 headers (RFC 791 §3.1), with DSCP/ECN (RFC 2474, RFC 3168) and CE marking that keeps the header
//! checksum valid by incremental update (RFC 1624 eqn. 3).

use core::net::Ipv4Addr;

use crate::checksum;
use crate::{CeMark, Ecn, Error, Field, IpProtocol};

/// Field offsets of the IPv4 header (RFC 791 §3.1).
pub mod field {
    use crate::Field;
    /// Version (high nibble) and IHL (low nibble, in 32-bit words).
    pub const VER_IHL: usize = 0;
    /// DSCP (high 6 bits) and ECN (low 2 bits): the former TOS byte.
    pub const DSCP_ECN: usize = 1;
    /// Total length of the datagram, header included.
    pub const LENGTH: Field = 2..4;
    /// Identification.
    pub const IDENT: Field = 4..6;
    /// Flags (reserved, DF, MF) and fragment offset (13 bits, in 8-byte units).
    pub const FLG_OFF: Field = 6..8;
    /// Time to live.
    pub const TTL: usize = 8;
    /// Protocol.
    pub const PROTOCOL: usize = 9;
    /// Header checksum.
    pub const CHECKSUM: Field = 10..12;
    /// Source address.
    pub const SRC_ADDR: Field = 12..16;
    /// Destination address.
    pub const DST_ADDR: Field = 16..20;
}

/// Length of a header without options.
pub const HEADER_LEN: usize = field::DST_ADDR.end;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const FRAG_OFFSET_MASK: u16 = 0x1FFF;

/// A read/write view of an IPv4 packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Wraps a buffer and runs [`Ipv4Packet::check_len`].
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the header is structurally sound, in this order: `Truncated` if the buffer is shorter than
    /// 20 bytes, `BadVersion` if the version is not 4, `BadHeaderLength` if IHL < 5, `Truncated` if the
    /// buffer is shorter than IHL × 4, `BadLength` if the total length is below IHL × 4, `Truncated` if
    /// the buffer is shorter than the total length. Bytes after the total length (Ethernet padding) are
    /// allowed. The checksum is not checked here (see [`Ipv4Packet::verify_checksum`]).
    pub fn check_len(&self) -> Result<(), Error> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 {
            return Err(Error::BadVersion);
        }
        let header_len = self.header_len();
        if header_len < HEADER_LEN {
            return Err(Error::BadHeaderLength);
        }
        if len < header_len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::BadLength);
        }
        if len < total_len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn byte(&self, index: usize) -> u8 {
        self.buffer.as_ref()[index]
    }

    fn u16_at(&self, f: Field) -> u16 {
        let b = &self.buffer.as_ref()[f];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Version field (4 for a valid packet).
    pub fn version(&self) -> u8 {
        self.byte(field::VER_IHL) >> 4
    }

    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.byte(field::VER_IHL) & 0x0F) * 4
    }

    /// The former TOS byte: DSCP << 2 | ECN.
    pub fn tos(&self) -> u8 {
        self.byte(field::DSCP_ECN)
    }

    /// Differentiated Services Code Point (RFC 2474), 0..=63.
    pub fn dscp(&self) -> u8 {
        self.tos() >> 2
    }

    /// ECN codepoint (RFC 3168 §5).
    pub fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos())
    }

    /// Total length of the datagram in bytes, header included.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in 8-byte units (13 bits).
    pub fn frag_offset(&self) -> u16 {
        self.u16_at(field::FLG_OFF) & FRAG_OFFSET_MASK
    }

    /// Time to live.
    pub fn hop_limit(&self) -> u8 {
        self.byte(field::TTL)
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> IpProtocol {
        IpProtocol::from(self.byte(field::PROTOCOL))
    }

    /// Header checksum as stored.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The header (options included), clamped to the buffer so that it never panics even after a setter
    /// changed the IHL.
    pub fn header(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        &data[..self.header_len().min(data.len())]
    }

    /// The options bytes (empty for IHL 5).
    pub fn options(&self) -> &[u8] {
        let header = self.header();
        header.get(HEADER_LEN..).unwrap_or(&[])
    }

    /// True if the header checksum verifies (RFC 791 §3.1, RFC 1071).
    pub fn verify_checksum(&self) -> bool {
        checksum::checksum(self.header()) == 0
    }

    /// The payload: from the end of the header to the total length (Ethernet padding excluded), clamped
    /// to the buffer.
    pub fn payload(&self) -> &[u8] {
        let data = self.buffer.as_ref();
        let end = usize::from(self.total_len()).min(data.len());
        let start = self.header_len().min(end);
        &data[start..end]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_u16_at(&mut self, f: Field, value: u16) {
        self.buffer.as_mut()[f].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version nibble.
    pub fn set_version(&mut self, version: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0F) | (version << 4);
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, header_len: usize) {
        let words = (header_len / 4).min(15) as u8;
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xF0) | words;
    }

    /// Sets the TOS byte without touching the checksum.
    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = tos;
    }

    /// Sets the DSCP (masked to 6 bits) without touching the checksum.
    pub fn set_dscp(&mut self, dscp: u8) {
        let tos = (dscp << 2) | (self.tos() & 0b11);
        self.set_tos(tos);
    }

    /// Sets the ECN codepoint without touching the checksum.
    pub fn set_ecn(&mut self, ecn: Ecn) {
        let tos = (self.tos() & !0b11) | ecn.to_bits();
        self.set_tos(tos);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, total_len: u16) {
        self.set_u16_at(field::LENGTH, total_len);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, ident: u16) {
        self.set_u16_at(field::IDENT, ident);
    }

    /// Sets the flags (DF, MF; the reserved bit is cleared) and the fragment offset in 8-byte units
    /// (masked to 13 bits).
    pub fn set_flags_and_frag_offset(
        &mut self,
        dont_frag: bool,
        more_frags: bool,
        frag_offset: u16,
    ) {
        let mut word = frag_offset & FRAG_OFFSET_MASK;
        if dont_frag {
            word |= FLAG_DF;
        }
        if more_frags {
            word |= FLAG_MF;
        }
        self.set_u16_at(field::FLG_OFF, word);
    }

    /// Sets the time to live.
    pub fn set_hop_limit(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, protocol: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol.into();
    }

    /// Sets the header checksum field.
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(field::CHECKSUM, checksum);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// Recomputes the header checksum over the whole header (options included).
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let sum = checksum::checksum(self.header());
        self.set_checksum(sum);
    }

    /// Rewrites the TOS byte and updates the header checksum incrementally (RFC 1624 eqn. 3) over the
    /// 16-bit word holding version/IHL and TOS. A valid checksum stays valid; the result equals a full
    /// recomputation (property-tested), at the cost of a few additions.
    pub fn set_tos_incremental(&mut self, tos: u8) {
        let old_word = u16::from_be_bytes([self.byte(field::VER_IHL), self.tos()]);
        let new_word = u16::from_be_bytes([self.byte(field::VER_IHL), tos]);
        let updated = checksum::incremental_update(self.checksum(), old_word, new_word);
        self.set_tos(tos);
        self.set_checksum(updated);
    }

    /// Sets the ECN codepoint and updates the checksum incrementally (RFC 1624 eqn. 3).
    pub fn set_ecn_incremental(&mut self, ecn: Ecn) {
        self.set_tos_incremental((self.tos() & !0b11) | ecn.to_bits());
    }

    /// Marks Congestion Experienced in place if the packet is ECN-capable (RFC 3168 §6.1.1.1),
    /// keeping the header checksum valid (RFC 1624 eqn. 3). Not-ECT and already-CE packets are left
    /// untouched; see [`CeMark`].
    pub fn mark_ce(&mut self) -> CeMark {
        match self.ecn() {
            Ecn::Ce => CeMark::AlreadyMarked,
            Ecn::NotEct => CeMark::NotEcnCapable,
            Ecn::Ect0 | Ecn::Ect1 => {
                self.set_ecn_incremental(Ecn::Ce);
                CeMark::Marked
            }
        }
    }

    /// The payload (see [`Ipv4Packet::payload`]), mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = self.buffer.as_ref().len();
        let end = usize::from(self.total_len()).min(len);
        let start = self.header_len().min(end);
        &mut self.buffer.as_mut()[start..end]
    }
}

/// The fields of an IPv4 header. Options are skipped on parse (IHL honoured) and never emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: IpProtocol,
    /// Payload length in bytes (total length − header length). Emit saturates the total length at
    /// 65535.
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
    /// DSCP, 0..=63 (masked on emit).
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// Identification.
    pub ident: u16,
    /// Don't Fragment (RoCEv2 senders set it).
    pub dont_frag: bool,
    /// More Fragments.
    pub more_frags: bool,
    /// Fragment offset in 8-byte units (masked to 13 bits on emit).
    pub frag_offset: u16,
}

impl Ipv4Repr {
    /// Parses a header: runs `check_len`, then `BadChecksum` if the header checksum does not verify.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>) -> Result<Ipv4Repr, Error> {
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        Ok(Ipv4Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - packet.header_len(),
            hop_limit: packet.hop_limit(),
            dscp: packet.dscp(),
            ecn: packet.ecn(),
            ident: packet.ident(),
            dont_frag: packet.dont_frag(),
            more_frags: packet.more_frags(),
            frag_offset: packet.frag_offset(),
        })
    }

    /// Bytes `emit` writes: the 20-byte header (no options).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Total length field `emit` writes: header + payload, saturated at 65535.
    pub fn total_len(&self) -> u16 {
        u16::try_from(HEADER_LEN.saturating_add(self.payload_len)).unwrap_or(u16::MAX)
    }

    /// Writes the 20-byte header, checksum included. Panics if the view is shorter than 20 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.buffer.as_mut()[field::VER_IHL] = 0x45;
        packet.set_tos(((self.dscp & 0x3F) << 2) | self.ecn.to_bits());
        packet.set_total_len(self.total_len());
        packet.set_ident(self.ident);
        packet.set_flags_and_frag_offset(self.dont_frag, self.more_frags, self.frag_offset);
        packet.set_hop_limit(self.hop_limit);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// dcqcn-roce.md §4.4 vector 1 (ConnectX-4 Lx CNP): checksum 0x9161.
    const CNP_HEADER: [u8; 20] = [
        0x45, 0xc2, 0x00, 0x3c, 0x71, 0x8c, 0x40, 0x00, 0x40, 0x11, 0x91, 0x61, 0x0a, 0x00, 0x11,
        0x01, 0x0a, 0x00, 0x12, 0x01,
    ];

    fn cnp_packet() -> [u8; 60] {
        let mut p = [0u8; 60];
        p[..20].copy_from_slice(&CNP_HEADER);
        p
    }

    #[test]
    fn reads_real_header() {
        let bytes = cnp_packet();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.dscp(), 48);
        assert_eq!(p.ecn(), Ecn::Ect0);
        assert_eq!(p.total_len(), 60);
        assert_eq!(p.ident(), 0x718c);
        assert!(p.dont_frag() && !p.more_frags());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.protocol(), IpProtocol::Udp);
        assert_eq!(p.checksum(), 0x9161);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(10, 0, 17, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(10, 0, 18, 1));
        assert_eq!(p.payload().len(), 40);
        assert!(p.options().is_empty());
    }

    /// dcqcn-roce.md §4.4 vector 2: the UC SEND_ONLY's IPv4 header checksum is 0xb4d5.
    #[test]
    fn emit_reproduces_vector2_checksum() {
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(192, 168, 0, 7),
            dst_addr: Ipv4Addr::new(192, 168, 0, 7),
            protocol: IpProtocol::Udp,
            payload_len: 44,
            hop_limit: 64,
            dscp: 0,
            ecn: Ecn::Ect1,
            ident: 1144,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        };
        let mut buf = [0u8; 64];
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
        let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.checksum(), 0xb4d5);
        assert_eq!(Ipv4Repr::parse(&p), Ok(repr));
    }

    #[test]
    fn ce_marking_keeps_checksum_valid() {
        let mut bytes = cnp_packet();
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.mark_ce(), CeMark::Marked);
        assert_eq!(p.ecn(), Ecn::Ce);
        assert_eq!(p.dscp(), 48);
        assert!(p.verify_checksum());
        // 0x45c2 -> 0x45c3: the checksum drops by one.
        assert_eq!(p.checksum(), 0x9160);
        assert_eq!(p.mark_ce(), CeMark::AlreadyMarked);
        assert_eq!(p.checksum(), 0x9160);

        p.set_ecn_incremental(Ecn::NotEct);
        assert!(p.verify_checksum());
        let before = bytes;
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        assert_eq!(p.mark_ce(), CeMark::NotEcnCapable);
        assert_eq!(bytes, before);
    }

    #[test]
    fn check_len_errors() {
        let good = cnp_packet();
        assert_eq!(
            Ipv4Packet::new_checked(&good[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Ipv4Packet::new_checked(&good[..59]).unwrap_err(),
            Error::Truncated
        );
        let mut v6 = good;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            Error::BadVersion
        );
        let mut short_ihl = good;
        short_ihl[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&short_ihl[..]).unwrap_err(),
            Error::BadHeaderLength
        );
        let mut long_ihl = good;
        long_ihl[0] = 0x4F;
        assert_eq!(
            Ipv4Packet::new_checked(&long_ihl[..40]).unwrap_err(),
            Error::Truncated
        );
        let mut small_total = good;
        small_total[2..4].copy_from_slice(&19u16.to_be_bytes());
        assert_eq!(
            Ipv4Packet::new_checked(&small_total[..]).unwrap_err(),
            Error::BadLength
        );
        let mut bad_sum = good;
        bad_sum[11] ^= 1;
        let p = Ipv4Packet::new_checked(&bad_sum[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p), Err(Error::BadChecksum));
    }

    #[test]
    fn parse_tolerates_options() {
        // IHL 6: one word of options (NOP NOP NOP EOL), payload of 4 bytes, 2 bytes of Ethernet padding.
        let mut bytes = [0u8; 30];
        bytes[..20].copy_from_slice(&CNP_HEADER);
        bytes[0] = 0x46;
        bytes[2..4].copy_from_slice(&28u16.to_be_bytes());
        bytes[20..24].copy_from_slice(&[1, 1, 1, 0]);
        bytes[24..28].copy_from_slice(&[9, 8, 7, 6]);
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum();
        assert!(p.verify_checksum());
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload(), &[9, 8, 7, 6]);
        let repr = Ipv4Repr::parse(&p).unwrap();
        assert_eq!(repr.payload_len, 4);
        // CE marking with options keeps the checksum valid too.
        assert_eq!(p.mark_ce(), CeMark::Marked);
        assert!(p.verify_checksum());
    }

    /// The edge case RFC 1624 exists for: after the mark the header sums to 0xFFFF, so the correct
    /// checksum is 0x0000 (eqn. 2 would give the negative zero 0xFFFF).
    #[test]
    fn incremental_update_yields_positive_zero() {
        let mut bytes = cnp_packet();
        bytes[1] = 0x03; // the TOS after marking
        bytes[4..6].fill(0);
        bytes[10..12].fill(0);
        let partial = checksum::fold(checksum::sum_words(0, &bytes[..20]));
        bytes[4..6].copy_from_slice(&(0xFFFF - partial).to_be_bytes());
        bytes[1] = 0x02; // ECT(0) before marking
        let mut p = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
        p.fill_checksum();
        assert_eq!(p.mark_ce(), CeMark::Marked);
        assert_eq!(p.checksum(), 0x0000);
        assert!(p.verify_checksum());
        // And back: from checksum 0x0000 to a non-zero one.
        p.set_ecn_incremental(Ecn::Ect0);
        let incremental = p.checksum();
        p.fill_checksum();
        assert_eq!(incremental, p.checksum());
    }

    /// Found by the fuzzer: a header whose other words sum to 0xFFFF verifies with either checksum
    /// 0x0000 or 0xFFFF (the two one's-complement zeros). Emit canonicalises to 0x0000; CE marking
    /// from 0xFFFF still yields the checksum a full recomputation gives.
    #[test]
    fn negative_zero_checksum() {
        let bytes = [
            0x45, 0x00, 0x00, 0xbc, 0x00, 0x01, 0x40, 0xda, 0xf8, 0x11, 0xff, 0xff, 0xc0, 0xa8,
            0x00, 0x02, 0xc0, 0xa8, 0x00, 0x03,
        ];
        let p = Ipv4Packet::new_unchecked(&bytes[..]);
        assert!(p.verify_checksum());
        let mut canonical = bytes;
        Ipv4Packet::new_unchecked(&mut canonical[..]).fill_checksum();
        assert_eq!(&canonical[10..12], &[0, 0]);
        assert!(Ipv4Packet::new_unchecked(&canonical[..]).verify_checksum());

        for tos in [0x00u8, 0x02, 0x03, 0xB8] {
            let mut a = canonical;
            let mut p = Ipv4Packet::new_unchecked(&mut a[..]);
            p.set_checksum(0xFFFF);
            p.set_tos_incremental(tos);
            let incremental = p.checksum();
            p.fill_checksum();
            assert_eq!(incremental, p.checksum(), "tos {tos:#x}");
        }
    }

    /// A header of 20..=60 bytes with version 4, matching IHL and total length, arbitrary other bytes
    /// and a valid checksum.
    fn valid_header() -> impl Strategy<Value = Vec<u8>> {
        (0usize..=10).prop_flat_map(|option_words| {
            let len = HEADER_LEN + option_words * 4;
            proptest::collection::vec(any::<u8>(), len).prop_map(move |mut header| {
                header[0] = 0x40 | (len / 4) as u8;
                header[2..4].copy_from_slice(&(len as u16).to_be_bytes());
                let mut p = Ipv4Packet::new_unchecked(&mut header[..]);
                p.fill_checksum();
                header
            })
        })
    }

    fn any_repr() -> impl Strategy<Value = Ipv4Repr> {
        (
            any::<[u8; 4]>(),
            any::<[u8; 4]>(),
            any::<u8>(),
            0usize..=(65535 - 20),
            any::<u8>(),
            0u8..64,
            0u8..4,
            any::<u16>(),
            any::<(bool, bool)>(),
            0u16..0x2000,
        )
            .prop_map(
                |(src, dst, proto, payload_len, ttl, dscp, ecn, ident, (df, mf), frag)| Ipv4Repr {
                    src_addr: Ipv4Addr::from(src),
                    dst_addr: Ipv4Addr::from(dst),
                    protocol: IpProtocol::from(proto),
                    payload_len,
                    hop_limit: ttl,
                    dscp,
                    ecn: Ecn::from_bits(ecn),
                    ident,
                    dont_frag: df,
                    more_frags: mf,
                    frag_offset: frag,
                },
            )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]
        /// RFC 1624 eqn. 3 equals a full recomputation for arbitrary valid headers and TOS rewrites.
        #[test]
        fn incremental_checksum_equals_full_recompute(header in valid_header(), new_tos in any::<u8>()) {
            let mut incremental = header.clone();
            let mut p = Ipv4Packet::new_checked(&mut incremental[..]).unwrap();
            prop_assert!(p.verify_checksum());
            p.set_tos_incremental(new_tos);

            let mut full = header.clone();
            let mut q = Ipv4Packet::new_checked(&mut full[..]).unwrap();
            q.set_tos(new_tos);
            q.fill_checksum();

            prop_assert_eq!(&incremental, &full);
        }
    }

    proptest! {
        #[test]
        fn mark_ce_equals_full_recompute(header in valid_header()) {
            let mut marked = header.clone();
            let mut p = Ipv4Packet::new_checked(&mut marked[..]).unwrap();
            let ecn = p.ecn();
            let outcome = p.mark_ce();
            let expected = match ecn {
                Ecn::Ce => CeMark::AlreadyMarked,
                Ecn::NotEct => CeMark::NotEcnCapable,
                Ecn::Ect0 | Ecn::Ect1 => CeMark::Marked,
            };
            prop_assert_eq!(outcome, expected);
            if outcome == CeMark::Marked {
                let mut full = header.clone();
                let mut q = Ipv4Packet::new_unchecked(&mut full[..]);
                q.set_ecn(Ecn::Ce);
                q.fill_checksum();
                prop_assert_eq!(&marked, &full);
                prop_assert!(Ipv4Packet::new_unchecked(&marked[..]).verify_checksum());
            } else {
                prop_assert_eq!(&marked, &header);
            }
        }

        #[test]
        fn repr_round_trip(repr in any_repr()) {
            let mut buf = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]));
            let p = Ipv4Packet::new_checked(&buf[..]).unwrap();
            prop_assert!(p.verify_checksum());
            prop_assert_eq!(Ipv4Repr::parse(&p), Ok(repr));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let p = Ipv4Packet::new_unchecked(&bytes[..]);
            if p.check_len().is_ok() {
                let _ = (p.dscp(), p.ecn(), p.ident(), p.frag_offset(), p.src_addr(), p.dst_addr());
                let _ = (p.options(), p.payload(), p.verify_checksum());
                let mut copy = bytes.clone();
                let mut m = Ipv4Packet::new_unchecked(&mut copy[..]);
                let _ = m.mark_ce();
                m.set_header_len(60);
                let _ = (m.payload(), m.options(), m.verify_checksum());
                let _ = m.payload_mut().len();
            }
            let _ = Ipv4Repr::parse(&p);
        }

        #[test]
        fn parse_mostly_valid_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 20..100), ihl in 0u8..16) {
            bytes[0] = 0x40 | ihl;
            let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(&bytes[..]));
        }
    }
}
