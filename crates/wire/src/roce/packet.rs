//! Whole RoCEv2 packets: a builder that writes Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP + BTH + extended
//! headers + payload + pad + ICRC into a caller's buffer without allocating, and a one-shot parser.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::bth::{self, BthPacket, BthRepr};
use super::ext::{
    AethPacket, AethRepr, RethPacket, RethRepr, AETH_LEN, CNP_RESERVED_LEN, IMMDT_LEN, RETH_LEN,
};
use super::icrc::{fill_icrc, ICRC_LEN};
use super::{Opcode, ROCEV2_UDP_PORT};
use crate::ethernet::{
    self, parse_l2, EtherType, EthernetFrame, L2Header, MacAddress, MIN_FRAME_LEN,
};
use crate::ipv4::{self, Ipv4Packet, Ipv4Repr};
use crate::ipv6::{self, Ipv6Packet, Ipv6Repr};
use crate::udp::{self, UdpPacket, UdpRepr};
use crate::vlan::{self, VlanTag, VlanTci};
use crate::{Ecn, Error, IpProtocol};

/// The IP layer of a RoCEv2 packet to build. Lengths and protocol are derived by the builder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RoceIpRepr {
    /// IPv4 (20-byte header, no options).
    V4 {
        /// Source address.
        src_addr: Ipv4Addr,
        /// Destination address.
        dst_addr: Ipv4Addr,
        /// DSCP, 0..=63.
        dscp: u8,
        /// ECN codepoint; data should be sent ECT(0) so that switches can mark CE (RFC 3168).
        ecn: Ecn,
        /// TTL.
        hop_limit: u8,
        /// Identification.
        ident: u16,
        /// Don't Fragment (rxe sets it).
        dont_frag: bool,
    },
    /// IPv6 (fixed header only).
    V6 {
        /// Source address.
        src_addr: Ipv6Addr,
        /// Destination address.
        dst_addr: Ipv6Addr,
        /// DSCP, 0..=63.
        dscp: u8,
        /// ECN codepoint.
        ecn: Ecn,
        /// Flow label, 20 bits.
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
    },
}

impl RoceIpRepr {
    const fn header_len(&self) -> usize {
        match self {
            RoceIpRepr::V4 { .. } => ipv4::HEADER_LEN,
            RoceIpRepr::V6 { .. } => ipv6::HEADER_LEN,
        }
    }

    const fn ethertype(&self) -> EtherType {
        match self {
            RoceIpRepr::V4 { .. } => EtherType::Ipv4,
            RoceIpRepr::V6 { .. } => EtherType::Ipv6,
        }
    }
}

/// The extended transport headers handled by the builder and the parser, written in IBTA order
/// (RETH, AETH, ImmDt). The builder writes exactly what is set here; keeping it consistent with the
/// opcode is the caller's job (so that malformed packets can be built for tests).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtRepr {
    /// RDMA ETH (WRITE FIRST/ONLY, READ REQUEST).
    pub reth: Option<RethRepr>,
    /// ACK ETH (ACK, READ RESPONSE FIRST/LAST/ONLY).
    pub aeth: Option<AethRepr>,
    /// Immediate data (… WITH IMMEDIATE), big-endian on the wire.
    pub immdt: Option<u32>,
}

impl ExtRepr {
    /// Bytes these headers take.
    pub const fn len(&self) -> usize {
        let mut len = 0;
        if self.reth.is_some() {
            len += RETH_LEN;
        }
        if self.aeth.is_some() {
            len += AETH_LEN;
        }
        if self.immdt.is_some() {
            len += IMMDT_LEN;
        }
        len
    }

    /// No header set.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the headers at the front of `buf` (which must hold `len()` bytes).
    fn emit(&self, buf: &mut [u8]) {
        let mut at = 0;
        if let Some(reth) = &self.reth {
            reth.emit(&mut RethPacket::new_unchecked(&mut buf[at..at + RETH_LEN]));
            at += RETH_LEN;
        }
        if let Some(aeth) = &self.aeth {
            aeth.emit(&mut AethPacket::new_unchecked(&mut buf[at..at + AETH_LEN]));
            at += AETH_LEN;
        }
        if let Some(immdt) = self.immdt {
            buf[at..at + IMMDT_LEN].copy_from_slice(&immdt.to_be_bytes());
        }
    }
}

/// A complete RoCEv2 packet to build with [`RoceV2PacketRepr::emit`].
///
/// The builder derives: EtherType (and TPID if `vlan` is set), IP lengths and protocol (UDP), UDP
/// destination port 4791 and length, BTH PadCnt (from the payload length; `bth.pad_count` is ignored),
/// the pad bytes (zero), the 16 reserved bytes of a CNP (when `bth.opcode` is [`Opcode::Cnp`]), the
/// ICRC, the IPv4 header checksum, and the UDP checksum when `udp_checksum` is true (otherwise 0, as
/// RoCEv2 senders do; over IPv6 a zero UDP checksum is illegal per RFC 8200 §8.1 and tshark flags it).
/// Frames shorter than 60 bytes are zero-padded to 60 (802.3 minFrameSize without FCS), as a NIC would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceV2PacketRepr<'a> {
    /// Ethernet destination.
    pub dst_addr: MacAddress,
    /// Ethernet source.
    pub src_addr: MacAddress,
    /// One 802.1Q C-tag, if any.
    pub vlan: Option<VlanTci>,
    /// IP header parameters.
    pub ip: RoceIpRepr,
    /// UDP source port (flow entropy).
    pub udp_src_port: u16,
    /// Compute the UDP checksum instead of sending 0.
    pub udp_checksum: bool,
    /// The BTH (PadCnt is derived).
    pub bth: BthRepr,
    /// Extended headers after the BTH.
    pub ext: ExtRepr,
    /// Payload (unpadded).
    pub payload: &'a [u8],
}

impl<'a> RoceV2PacketRepr<'a> {
    /// A CNP (BTH opcode 0x81, BECN, default P_Key, 16 reserved zero bytes) to `dest_qp`.
    pub const fn cnp(
        dst_addr: MacAddress,
        src_addr: MacAddress,
        ip: RoceIpRepr,
        udp_src_port: u16,
        dest_qp: u32,
    ) -> RoceV2PacketRepr<'static> {
        RoceV2PacketRepr {
            dst_addr,
            src_addr,
            vlan: None,
            ip,
            udp_src_port,
            udp_checksum: false,
            bth: super::CnpRepr::new(dest_qp).bth(),
            ext: ExtRepr {
                reth: None,
                aeth: None,
                immdt: None,
            },
            payload: &[],
        }
    }

    const fn l2_len(&self) -> usize {
        if self.vlan.is_some() {
            ethernet::HEADER_LEN + vlan::TAG_LEN
        } else {
            ethernet::HEADER_LEN
        }
    }

    /// Pad bytes between payload and ICRC (BTH PadCnt).
    pub const fn pad_count(&self) -> usize {
        (4 - self.payload.len() % 4) % 4
    }

    const fn cnp_reserved_len(&self) -> usize {
        if matches!(self.bth.opcode, Opcode::Cnp) {
            CNP_RESERVED_LEN
        } else {
            0
        }
    }

    /// UDP length: header + BTH + extended headers + payload + pad + ICRC.
    pub const fn udp_len(&self) -> usize {
        udp::HEADER_LEN
            + bth::HEADER_LEN
            + self.cnp_reserved_len()
            + self.ext.len()
            + self.payload.len()
            + self.pad_count()
            + ICRC_LEN
    }

    /// Length of the frame before padding to 60 bytes.
    pub const fn frame_len(&self) -> usize {
        self.l2_len() + self.ip.header_len() + self.udp_len()
    }

    /// Bytes `emit` writes: the frame length, at least 60.
    pub const fn buffer_len(&self) -> usize {
        let len = self.frame_len();
        if len < MIN_FRAME_LEN {
            MIN_FRAME_LEN
        } else {
            len
        }
    }

    /// Writes the packet at the front of `buf` and returns its length ([`Self::buffer_len`]).
    ///
    /// Errors: `BufferTooSmall` if `buf` is shorter than `buffer_len()`; `BadLength` if the packet does
    /// not fit the 16-bit IP/UDP length fields.
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize, Error> {
        let udp_len = self.udp_len();
        let ip_len = self.ip.header_len() + udp_len;
        let ip_length_field = match self.ip {
            RoceIpRepr::V4 { .. } => ip_len,
            RoceIpRepr::V6 { .. } => udp_len,
        };
        if ip_length_field > usize::from(u16::MAX) {
            return Err(Error::BadLength);
        }
        let total = self.buffer_len();
        let buf = buf.get_mut(..total).ok_or(Error::BufferTooSmall)?;

        // L2: Ethernet II, then optionally the C-tag (802.1Q-2018 9.6).
        let l2_len = self.l2_len();
        let mut frame = EthernetFrame::new_unchecked(&mut buf[..]);
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        if let Some(tci) = self.vlan {
            frame.set_ethertype(EtherType::Vlan);
            let mut tag = VlanTag::new_unchecked(&mut buf[ethernet::HEADER_LEN..l2_len]);
            tag.set_tci(tci);
            tag.set_ethertype(self.ip.ethertype());
        } else {
            frame.set_ethertype(self.ip.ethertype());
        }

        // UDP, BTH, extended headers, payload, pad (the ICRC slot is filled last).
        let ip_start = l2_len;
        let udp_start = ip_start + self.ip.header_len();
        let datagram_end = udp_start + udp_len;
        UdpRepr {
            src_port: self.udp_src_port,
            dst_port: ROCEV2_UDP_PORT,
            payload_len: udp_len - udp::HEADER_LEN,
            checksum: 0,
        }
        .emit(&mut UdpPacket::new_unchecked(
            &mut buf[udp_start..datagram_end],
        ));
        let bth_start = udp_start + udp::HEADER_LEN;
        let pad = self.pad_count();
        let bth = BthRepr {
            pad_count: pad as u8,
            ..self.bth
        };
        bth.emit(&mut BthPacket::new_unchecked(
            &mut buf[bth_start..bth_start + bth::HEADER_LEN],
        ));
        let mut at = bth_start + bth::HEADER_LEN;
        let cnp_reserved = self.cnp_reserved_len();
        buf[at..at + cnp_reserved].fill(0);
        at += cnp_reserved;
        self.ext.emit(&mut buf[at..at + self.ext.len()]);
        at += self.ext.len();
        buf[at..at + self.payload.len()].copy_from_slice(self.payload);
        at += self.payload.len();
        buf[at..at + pad].fill(0);
        // Ethernet padding after the datagram (the ICRC slot is overwritten below).
        buf[at + pad..].fill(0);

        // IP header (IPv4 checksum included; the ICRC masks it, so the order does not matter).
        match self.ip {
            RoceIpRepr::V4 {
                src_addr,
                dst_addr,
                dscp,
                ecn,
                hop_limit,
                ident,
                dont_frag,
            } => Ipv4Repr {
                src_addr,
                dst_addr,
                protocol: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit,
                dscp,
                ecn,
                ident,
                dont_frag,
                more_frags: false,
                frag_offset: 0,
            }
            .emit(&mut Ipv4Packet::new_unchecked(
                &mut buf[ip_start..udp_start],
            )),
            RoceIpRepr::V6 {
                src_addr,
                dst_addr,
                dscp,
                ecn,
                flow_label,
                hop_limit,
            } => Ipv6Repr {
                src_addr,
                dst_addr,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit,
                dscp,
                ecn,
                flow_label,
            }
            .emit(&mut Ipv6Packet::new_unchecked(
                &mut buf[ip_start..udp_start],
            )),
        }

        // ICRC over the datagram; then the UDP checksum, which covers the ICRC.
        fill_icrc(&mut buf[ip_start..datagram_end])?;
        if self.udp_checksum {
            let mut udp_packet = UdpPacket::new_unchecked(&mut buf[udp_start..datagram_end]);
            match self.ip {
                RoceIpRepr::V4 {
                    src_addr, dst_addr, ..
                } => udp_packet.fill_checksum_ipv4(src_addr, dst_addr),
                RoceIpRepr::V6 {
                    src_addr, dst_addr, ..
                } => udp_packet.fill_checksum_ipv6(src_addr, dst_addr),
            }
        }
        Ok(total)
    }
}

/// What [`parse_rocev2`] found in a frame: values and offsets, no references into the frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RoceV2Headers {
    /// Ethernet and 802.1Q fields.
    pub l2: L2Header,
    /// Offset of the IP header (= `l2.payload_offset`).
    pub ip_offset: usize,
    /// IP source.
    pub src_addr: IpAddr,
    /// IP destination.
    pub dst_addr: IpAddr,
    /// DSCP.
    pub dscp: u8,
    /// ECN codepoint.
    pub ecn: Ecn,
    /// UDP source port.
    pub udp_src_port: u16,
    /// Offset of the BTH.
    pub bth_offset: usize,
    /// The BTH.
    pub bth: BthRepr,
    /// RETH / AETH / ImmDt when the opcode carries them. Other extended headers (DETH, AtomicETH,
    /// AtomicAckETH, IETH, CNP reserved bytes) are skipped but not decoded.
    pub ext: ExtRepr,
    /// Offset of the payload (after all extended headers).
    pub payload_offset: usize,
    /// Payload length, pad and ICRC excluded.
    pub payload_len: usize,
    /// Offset of the 4-byte ICRC.
    pub icrc_offset: usize,
}

/// Parses a RoCEv2 frame: Ethernet [one 802.1Q tag] + IPv4/IPv6 + UDP to port 4791 + BTH + extended
/// headers (by opcode, see [`Opcode::ext_headers`]; unknown opcodes get none) + payload + pad + ICRC.
///
/// Checks framing only: the IPv4 header checksum, the UDP checksum and the ICRC are **not** verified
/// (use [`super::verify_icrc_frame`]).
///
/// Errors: those of [`parse_l2`]; `WrongEtherType` if neither IPv4 nor IPv6; the IP/UDP framing errors;
/// `WrongProtocol` if not UDP (IPv6: first next header not UDP; IPv4: a fragment) or the destination
/// port is not 4791; `Truncated` if the UDP payload is too short for the BTH, the extended headers, the
/// pad and the ICRC.
pub fn parse_rocev2(frame: &[u8]) -> Result<RoceV2Headers, Error> {
    let l2 = parse_l2(frame)?;
    let ip_offset = l2.payload_offset;
    let ip_bytes = &frame[ip_offset..];
    let (src_addr, dst_addr, dscp, ecn, udp_bytes, udp_offset) = match l2.ethertype {
        EtherType::Ipv4 => {
            let ip = Ipv4Packet::new_checked(ip_bytes)?;
            if ip.protocol() != IpProtocol::Udp || ip.more_frags() || ip.frag_offset() != 0 {
                return Err(Error::WrongProtocol);
            }
            let header_len = ip.header_len();
            let end = usize::from(ip.total_len());
            (
                IpAddr::V4(ip.src_addr()),
                IpAddr::V4(ip.dst_addr()),
                ip.dscp(),
                ip.ecn(),
                &ip_bytes[header_len..end],
                ip_offset + header_len,
            )
        }
        EtherType::Ipv6 => {
            let ip = Ipv6Packet::new_checked(ip_bytes)?;
            if ip.next_header() != IpProtocol::Udp {
                return Err(Error::WrongProtocol);
            }
            let end = ipv6::HEADER_LEN + usize::from(ip.payload_len());
            (
                IpAddr::V6(ip.src_addr()),
                IpAddr::V6(ip.dst_addr()),
                ip.dscp(),
                ip.ecn(),
                &ip_bytes[ipv6::HEADER_LEN..end],
                ip_offset + ipv6::HEADER_LEN,
            )
        }
        _ => return Err(Error::WrongEtherType),
    };
    let udp_packet = UdpPacket::new_checked(udp_bytes)?;
    if udp_packet.dst_port() != ROCEV2_UDP_PORT {
        return Err(Error::WrongProtocol);
    }
    let transport = udp_packet.payload();
    let bth_packet = BthPacket::new_checked(transport)?;
    let bth = BthRepr::parse(&bth_packet)?;
    let headers = bth.opcode.ext_headers().unwrap_or_default();
    let after_bth = bth_packet.payload();
    let trailer = usize::from(bth.pad_count) + ICRC_LEN;
    if after_bth.len() < headers.len() + trailer {
        return Err(Error::Truncated);
    }
    let mut ext = ExtRepr::default();
    if let Some(offset) = headers.reth_offset() {
        ext.reth = Some(RethRepr::parse(&RethPacket::new_checked(
            &after_bth[offset..],
        )?)?);
    }
    if let Some(offset) = headers.aeth_offset() {
        ext.aeth = Some(AethRepr::parse(&AethPacket::new_checked(
            &after_bth[offset..],
        )?)?);
    }
    if let Some(offset) = headers.immdt_offset() {
        let b = &after_bth[offset..offset + IMMDT_LEN];
        ext.immdt = Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]));
    }
    let bth_offset = udp_offset + udp::HEADER_LEN;
    let payload_offset = bth_offset + bth::HEADER_LEN + headers.len();
    let payload_len = after_bth.len() - headers.len() - trailer;
    Ok(RoceV2Headers {
        l2,
        ip_offset,
        src_addr,
        dst_addr,
        dscp,
        ecn,
        udp_src_port: udp_packet.src_port(),
        bth_offset,
        bth,
        ext,
        payload_offset,
        payload_len,
        icrc_offset: bth_offset + transport.len() - ICRC_LEN,
    })
}

#[cfg(test)]
mod tests {
    use super::super::bth::tests::any_bth;
    use super::super::ext::{AethSyndrome, NakCode};
    use super::super::icrc::tests::{hex, vector1_frame, vector2_ip, vector3_ip, vector_ipv6_ip};
    use super::super::icrc::{verify_icrc, verify_icrc_frame};
    use super::super::{CnpRepr, DEFAULT_PKEY, MAX_24BIT};
    use super::*;
    use crate::CeMark;
    use proptest::prelude::*;

    const MAC_A: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x0a]);
    const MAC_B: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x0b]);

    fn write_only_bth(dest_qp: u32, psn: u32) -> BthRepr {
        BthRepr {
            opcode: Opcode::RdmaWriteOnly,
            solicited_event: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: DEFAULT_PKEY,
            fecn: false,
            becn: false,
            dest_qp,
            ack_req: true,
            psn,
        }
    }

    #[test]
    fn builder_reproduces_vector1_cnp_frame() {
        let expected = vector1_frame();
        let repr = RoceV2PacketRepr::cnp(
            MacAddress([0xe4, 0x1d, 0x2d, 0xab, 0x2b, 0xc2]),
            MacAddress([0x7c, 0xfe, 0x90, 0x64, 0x3b, 0x32]),
            RoceIpRepr::V4 {
                src_addr: Ipv4Addr::new(10, 0, 17, 1),
                dst_addr: Ipv4Addr::new(10, 0, 18, 1),
                dscp: 48,
                ecn: Ecn::Ect0,
                hop_limit: 64,
                ident: 0x718c,
                dont_frag: true,
            },
            0,
            0x118,
        );
        assert_eq!(repr.buffer_len(), 74);
        let mut buf = [0u8; 128];
        assert_eq!(repr.emit(&mut buf), Ok(74));
        assert_eq!(&buf[..74], &expected[..]);

        let parsed = parse_rocev2(&buf[..74]).unwrap();
        assert_eq!(parsed.bth.opcode, Opcode::Cnp);
        assert_eq!(
            CnpRepr::parse(&BthPacket::new_checked(&buf[parsed.bth_offset..]).unwrap()),
            Ok(CnpRepr::new(0x118))
        );
        assert_eq!(
            (
                parsed.payload_offset,
                parsed.payload_len,
                parsed.icrc_offset
            ),
            (70, 0, 70)
        );
    }

    #[test]
    fn builder_reproduces_vector2_uc_send_only() {
        let expected = vector2_ip();
        let payload = &expected[40..58]; // 18 bytes; PadCnt 2 adds the 2 zero bytes of the vector
        let repr = RoceV2PacketRepr {
            dst_addr: MAC_A,
            src_addr: MAC_B,
            vlan: None,
            ip: RoceIpRepr::V4 {
                src_addr: Ipv4Addr::new(192, 168, 0, 7),
                dst_addr: Ipv4Addr::new(192, 168, 0, 7),
                dscp: 0,
                ecn: Ecn::Ect1,
                hop_limit: 64,
                ident: 1144,
                dont_frag: true,
            },
            udp_src_port: 49152,
            udp_checksum: false,
            bth: BthRepr {
                opcode: Opcode::from(0x24),
                mig_req: true,
                ack_req: false,
                dest_qp: 211,
                psn: 13_571_856,
                ..write_only_bth(0, 0)
            },
            ext: ExtRepr::default(),
            payload,
        };
        let mut buf = [0u8; 100];
        let len = repr.emit(&mut buf).unwrap();
        assert_eq!(len, 78);
        assert_eq!(&buf[14..len], &expected[..]);
        assert_eq!(verify_icrc(&buf[14..len]), Ok(()));
    }

    #[test]
    fn builder_reproduces_vector3_rc_write_only() {
        let expected = vector3_ip();
        let payload = [0xFFu8; 128];
        let repr = RoceV2PacketRepr {
            dst_addr: MAC_A,
            src_addr: MAC_B,
            vlan: None,
            ip: RoceIpRepr::V4 {
                src_addr: Ipv4Addr::new(192, 168, 0, 2),
                dst_addr: Ipv4Addr::new(192, 168, 0, 3),
                dscp: 0,
                ecn: Ecn::NotEct,
                hop_limit: 64,
                ident: 1,
                dont_frag: false,
            },
            udp_src_port: 4791,
            udp_checksum: false,
            bth: BthRepr {
                solicited_event: true,
                pkey: 0,
                ..write_only_bth(2, 0)
            },
            ext: ExtRepr {
                reth: Some(RethRepr {
                    virtual_addr: 0x0000_7f7e_9100_0000,
                    rkey: 0x0170_9a33,
                    dma_len: 128,
                }),
                ..ExtRepr::default()
            },
            payload: &payload,
        };
        let mut buf = [0u8; 256];
        let len = repr.emit(&mut buf).unwrap();
        assert_eq!(&buf[14..len], &expected[..]);

        let parsed = parse_rocev2(&buf[..len]).unwrap();
        assert_eq!(parsed.ext.reth.unwrap().dma_len, 128);
        assert_eq!(parsed.payload_len, 128);
        assert_eq!(
            &buf[parsed.payload_offset..parsed.payload_offset + 128],
            &payload[..]
        );
    }

    #[test]
    fn builder_reproduces_ipv6_vector() {
        let expected = vector_ipv6_ip();
        let payload: [u8; 16] = core::array::from_fn(|i| i as u8);
        let repr = RoceV2PacketRepr {
            dst_addr: MAC_A,
            src_addr: MAC_B,
            vlan: None,
            ip: RoceIpRepr::V6 {
                src_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
                dst_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
                dscp: 0x6a >> 2,
                ecn: Ecn::Ect0,
                flow_label: 0xabcde,
                hop_limit: 64,
            },
            udp_src_port: 0xc123,
            udp_checksum: false,
            bth: BthRepr {
                opcode: Opcode::SendOnly,
                ..write_only_bth(0x11, 5)
            },
            ext: ExtRepr::default(),
            payload: &payload,
        };
        let mut buf = [0u8; 128];
        let len = repr.emit(&mut buf).unwrap();
        assert_eq!(len, 94);
        assert_eq!(&buf[14..len], &expected[..]);
    }

    #[test]
    fn ce_marking_keeps_icrc_and_checksums_valid() {
        let payload = [0x5Au8; 61];
        for ip in [
            RoceIpRepr::V4 {
                src_addr: Ipv4Addr::new(10, 0, 0, 1),
                dst_addr: Ipv4Addr::new(10, 0, 0, 2),
                dscp: 26,
                ecn: Ecn::Ect0,
                hop_limit: 64,
                ident: 7,
                dont_frag: true,
            },
            RoceIpRepr::V6 {
                src_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
                dst_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
                dscp: 26,
                ecn: Ecn::Ect0,
                flow_label: 0xABCDE,
                hop_limit: 64,
            },
        ] {
            let repr = RoceV2PacketRepr {
                dst_addr: MAC_A,
                src_addr: MAC_B,
                vlan: Some(VlanTci::new(3, false, 100)),
                ip,
                udp_src_port: 0xC123,
                udp_checksum: true,
                bth: write_only_bth(0x11, 5),
                ext: ExtRepr {
                    reth: Some(RethRepr {
                        virtual_addr: 0x1000,
                        rkey: 0x42,
                        dma_len: 61,
                    }),
                    ..ExtRepr::default()
                },
                payload: &payload,
            };
            let mut buf = [0u8; 256];
            let len = repr.emit(&mut buf).unwrap();
            let frame = &mut buf[..len];
            assert_eq!(verify_icrc_frame(frame), Ok(()));
            let headers = parse_rocev2(frame).unwrap();
            assert_eq!(headers.bth.pad_count, 3);
            assert_eq!(headers.payload_len, 61);
            let ip_offset = headers.ip_offset;
            let outcome = match ip {
                RoceIpRepr::V4 { .. } => Ipv4Packet::new_checked(&mut frame[ip_offset..])
                    .unwrap()
                    .mark_ce(),
                RoceIpRepr::V6 { .. } => Ipv6Packet::new_checked(&mut frame[ip_offset..])
                    .unwrap()
                    .mark_ce(),
            };
            assert_eq!(outcome, CeMark::Marked);
            assert_eq!(parse_rocev2(frame).unwrap().ecn, Ecn::Ce);
            assert_eq!(verify_icrc_frame(frame), Ok(()), "ICRC masks the ECN bits");
            let udp_start = headers.bth_offset - 8;
            let udp_packet = UdpPacket::new_checked(&frame[udp_start..]).unwrap();
            match headers.src_addr {
                IpAddr::V4(_) => {
                    assert!(Ipv4Packet::new_checked(&frame[ip_offset..])
                        .unwrap()
                        .verify_checksum());
                    let (IpAddr::V4(s), IpAddr::V4(d)) = (headers.src_addr, headers.dst_addr)
                    else {
                        unreachable!()
                    };
                    assert!(udp_packet.checksum() != 0 && udp_packet.verify_checksum_ipv4(s, d));
                }
                IpAddr::V6(_) => {
                    let (IpAddr::V6(s), IpAddr::V6(d)) = (headers.src_addr, headers.dst_addr)
                    else {
                        unreachable!()
                    };
                    assert!(udp_packet.verify_checksum_ipv6(s, d));
                }
            }
        }
    }

    #[test]
    fn small_packets_are_padded_to_60_bytes() {
        let repr = RoceV2PacketRepr {
            dst_addr: MAC_A,
            src_addr: MAC_B,
            vlan: None,
            ip: RoceIpRepr::V4 {
                src_addr: Ipv4Addr::new(10, 0, 0, 1),
                dst_addr: Ipv4Addr::new(10, 0, 0, 2),
                dscp: 0,
                ecn: Ecn::Ect0,
                hop_limit: 64,
                ident: 0,
                dont_frag: true,
            },
            udp_src_port: 0xC000,
            udp_checksum: false,
            bth: BthRepr {
                opcode: Opcode::Acknowledge,
                ..write_only_bth(3, 9)
            },
            ext: ExtRepr {
                aeth: Some(AethRepr::nak(4, NakCode::PsnSequenceError)),
                ..ExtRepr::default()
            },
            payload: &[],
        };
        assert_eq!(repr.frame_len(), 14 + 20 + 8 + 12 + 4 + 4);
        let mut buf = [0xEEu8; 80];
        assert_eq!(repr.emit(&mut buf), Ok(62));
        let parsed = parse_rocev2(&buf[..62]).unwrap();
        assert_eq!(
            parsed.ext.aeth.unwrap().syndrome,
            AethSyndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(parsed.ext.aeth.unwrap().msn, 4);

        let ack = RoceV2PacketRepr {
            ext: ExtRepr::default(),
            bth: BthRepr {
                opcode: Opcode::SendOnly,
                ..repr.bth
            },
            ..repr
        };
        assert_eq!(ack.frame_len(), 58);
        let mut buf = [0xEEu8; 80];
        assert_eq!(ack.emit(&mut buf), Ok(60));
        assert_eq!(&buf[58..60], &[0, 0]);
        assert_eq!(&buf[60..], &[0xEE; 20]);
        assert_eq!(verify_icrc_frame(&buf[..60]), Ok(()));
    }

    #[test]
    fn emit_errors() {
        let payload = [0u8; 70_000];
        let mut repr = RoceV2PacketRepr::cnp(
            MAC_A,
            MAC_B,
            RoceIpRepr::V4 {
                src_addr: Ipv4Addr::LOCALHOST,
                dst_addr: Ipv4Addr::LOCALHOST,
                dscp: 0,
                ecn: Ecn::NotEct,
                hop_limit: 1,
                ident: 0,
                dont_frag: true,
            },
            0,
            1,
        );
        let mut small = [0u8; 73];
        assert_eq!(repr.emit(&mut small), Err(Error::BufferTooSmall));
        repr.payload = &payload;
        let mut big = vec![0u8; 80_000];
        assert_eq!(repr.emit(&mut big), Err(Error::BadLength));
    }

    #[test]
    fn parse_errors() {
        let frame = vector1_frame();
        assert_eq!(parse_rocev2(&frame[..13]), Err(Error::Truncated));
        assert_eq!(parse_rocev2(&frame[..60]), Err(Error::Truncated));
        let mut other_port = frame.clone();
        other_port[36..38].copy_from_slice(&4792u16.to_be_bytes());
        assert_eq!(parse_rocev2(&other_port), Err(Error::WrongProtocol));
        let mut fragment = frame.clone();
        fragment[20] |= 0x20;
        assert_eq!(parse_rocev2(&fragment), Err(Error::WrongProtocol));
        let mut arp = frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_rocev2(&arp), Err(Error::WrongEtherType));
        // PadCnt larger than what follows the BTH of an ACK with an AETH.
        let ack = hex("020000000001 020000000002 0800
                       45000028 00000000 40110000 0a000001 0a000002
                       c00012b7 00140000
                       11300000 00000001 00000001 00000000");
        assert_eq!(parse_rocev2(&ack), Err(Error::Truncated));
    }

    fn any_ip() -> impl Strategy<Value = RoceIpRepr> {
        prop_oneof![
            (
                any::<[u8; 4]>(),
                any::<[u8; 4]>(),
                0u8..64,
                0u8..4,
                any::<u8>(),
                any::<u16>(),
                any::<bool>()
            )
                .prop_map(|(s, d, dscp, ecn, hop_limit, ident, dont_frag)| {
                    RoceIpRepr::V4 {
                        src_addr: Ipv4Addr::from(s),
                        dst_addr: Ipv4Addr::from(d),
                        dscp,
                        ecn: Ecn::from_bits(ecn),
                        hop_limit,
                        ident,
                        dont_frag,
                    }
                }),
            (
                any::<[u8; 16]>(),
                any::<[u8; 16]>(),
                0u8..64,
                0u8..4,
                0u32..0x10_0000,
                any::<u8>()
            )
                .prop_map(|(s, d, dscp, ecn, flow_label, hop_limit)| RoceIpRepr::V6 {
                    src_addr: Ipv6Addr::from(s),
                    dst_addr: Ipv6Addr::from(d),
                    dscp,
                    ecn: Ecn::from_bits(ecn),
                    flow_label,
                    hop_limit,
                }),
        ]
    }

    /// Opcodes whose headers the parser decodes, with the matching ExtRepr.
    fn any_opcode_and_ext() -> impl Strategy<Value = (Opcode, ExtRepr)> {
        let reth =
            (any::<u64>(), any::<u32>(), any::<u32>()).prop_map(|(virtual_addr, rkey, dma_len)| {
                RethRepr {
                    virtual_addr,
                    rkey,
                    dma_len,
                }
            });
        let aeth = (any::<u8>(), 0u32..=MAX_24BIT).prop_map(|(s, msn)| AethRepr {
            syndrome: AethSyndrome::from(s),
            msn,
        });
        prop_oneof![
            Just((Opcode::SendOnly, ExtRepr::default())),
            Just((Opcode::RdmaWriteMiddle, ExtRepr::default())),
            reth.clone().prop_map(|r| (
                Opcode::RdmaWriteOnly,
                ExtRepr {
                    reth: Some(r),
                    ..ExtRepr::default()
                }
            )),
            reth.clone().prop_map(|r| (
                Opcode::RdmaReadRequest,
                ExtRepr {
                    reth: Some(r),
                    ..ExtRepr::default()
                }
            )),
            (reth, any::<u32>()).prop_map(|(r, imm)| (
                Opcode::RdmaWriteOnlyWithImmediate,
                ExtRepr {
                    reth: Some(r),
                    immdt: Some(imm),
                    ..ExtRepr::default()
                }
            )),
            any::<u32>().prop_map(|imm| (
                Opcode::SendOnlyWithImmediate,
                ExtRepr {
                    immdt: Some(imm),
                    ..ExtRepr::default()
                }
            )),
            aeth.clone().prop_map(|a| (
                Opcode::Acknowledge,
                ExtRepr {
                    aeth: Some(a),
                    ..ExtRepr::default()
                }
            )),
            aeth.prop_map(|a| (
                Opcode::RdmaReadResponseOnly,
                ExtRepr {
                    aeth: Some(a),
                    ..ExtRepr::default()
                }
            )),
        ]
    }

    proptest! {
        #[test]
        fn build_parse_round_trip(
            ip in any_ip(),
            vlan in proptest::option::of(any::<u16>()),
            (opcode, ext) in any_opcode_and_ext(),
            bth in any_bth(),
            payload in proptest::collection::vec(any::<u8>(), 0..300),
            udp_src_port in any::<u16>(),
            udp_checksum in any::<bool>(),
            dst in any::<[u8; 6]>(),
            src in any::<[u8; 6]>(),
        ) {
            let repr = RoceV2PacketRepr {
                dst_addr: MacAddress(dst),
                src_addr: MacAddress(src),
                vlan: vlan.map(VlanTci),
                ip,
                udp_src_port,
                udp_checksum,
                bth: BthRepr { opcode, ..bth },
                ext,
                payload: &payload,
            };
            let mut buf = [0u8; 512];
            let len = repr.emit(&mut buf).unwrap();
            prop_assert_eq!(len, repr.buffer_len());
            prop_assert!(len >= 60);
            let frame = &buf[..len];
            prop_assert_eq!(verify_icrc_frame(frame), Ok(()));
            let parsed = parse_rocev2(frame).unwrap();
            prop_assert_eq!(parsed.l2.vlan, repr.vlan);
            prop_assert_eq!(parsed.bth, BthRepr { pad_count: repr.pad_count() as u8, ..repr.bth });
            prop_assert_eq!(parsed.ext, ext);
            prop_assert_eq!(parsed.udp_src_port, udp_src_port);
            prop_assert_eq!(&frame[parsed.payload_offset..parsed.payload_offset + parsed.payload_len], &payload[..]);
            prop_assert_eq!(parsed.icrc_offset + 4, repr.frame_len());
            match ip {
                RoceIpRepr::V4 { src_addr, dst_addr, dscp, ecn, .. } => {
                    prop_assert_eq!(parsed.src_addr, IpAddr::V4(src_addr));
                    prop_assert_eq!(parsed.dst_addr, IpAddr::V4(dst_addr));
                    prop_assert_eq!((parsed.dscp, parsed.ecn), (dscp, ecn));
                    let ip_packet = Ipv4Packet::new_checked(&frame[parsed.ip_offset..]).unwrap();
                    prop_assert!(ip_packet.verify_checksum());
                    let udp_packet = UdpPacket::new_checked(ip_packet.payload()).unwrap();
                    prop_assert!(udp_packet.verify_checksum_ipv4(src_addr, dst_addr));
                    prop_assert_eq!(udp_packet.checksum() != 0, udp_checksum);
                }
                RoceIpRepr::V6 { src_addr, dst_addr, dscp, ecn, .. } => {
                    prop_assert_eq!(parsed.src_addr, IpAddr::V6(src_addr));
                    prop_assert_eq!((parsed.dscp, parsed.ecn), (dscp, ecn));
                    let ip_packet = Ipv6Packet::new_checked(&frame[parsed.ip_offset..]).unwrap();
                    let udp_packet = UdpPacket::new_checked(ip_packet.payload()).unwrap();
                    prop_assert_eq!(udp_packet.verify_checksum_ipv6(src_addr, dst_addr), udp_checksum);
                }
            }
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_rocev2(&bytes);
            let _ = verify_icrc_frame(&bytes);
        }

        /// Mostly valid frames: a real packet with random bytes overwritten, to reach deep error paths.
        #[test]
        fn parse_corrupted_frames_never_panics(index in 0usize..188, value in any::<u8>(), cut in 0usize..200) {
            let mut frame = vector1_frame();
            frame.truncate(14);
            frame.extend_from_slice(&vector3_ip());
            if index < frame.len() {
                frame[index] = value;
            }
            frame.truncate(cut.max(1));
            if let Ok(parsed) = parse_rocev2(&frame) {
                prop_assert!(parsed.payload_offset + parsed.payload_len <= parsed.icrc_offset);
                prop_assert!(parsed.icrc_offset + 4 <= frame.len());
            }
            let _ = verify_icrc_frame(&frame);
        }
    }
}
