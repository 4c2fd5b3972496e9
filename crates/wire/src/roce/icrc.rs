//! The RoCEv2 Invariant CRC (IBTA Vol. 1 invariant CRC, adapted by Annex A17; Linux `rxe_icrc.c`;
//! dcqcn-roce.md §4.4).
//!
//! CRC-32/IEEE (the Ethernet FCS polynomial, `crc32fast`) over: 8 bytes of 0xFF standing for the masked
//! LRH, then the IP header, UDP header, BTH, extended headers, payload and pad, with the fields a
//! router may change replaced by ones:
//!
//! * IPv4: TOS (DSCP + ECN), TTL, header checksum;
//! * IPv6: traffic class, flow label, hop limit;
//! * UDP checksum;
//! * BTH byte 4 (FECN, BECN and the six reserved bits).
//!
//! The 32-bit result is stored **least significant byte first** (`value.to_le_bytes()`), like the FCS.
//! The masked copy is never built: the bytes are fed to the hasher piece by piece, so nothing is
//! allocated and the input is not modified.

use crc32fast::Hasher;

use super::bth;
use crate::ethernet::{parse_l2, EtherType};
use crate::ipv4::{self, Ipv4Packet};
use crate::ipv6::{self, Ipv6Packet};
use crate::udp::{self, UdpPacket};
use crate::{Error, IpProtocol};

/// Length of the ICRC trailer.
pub const ICRC_LEN: usize = 4;

const ONES: [u8; 8] = [0xFF; 8];

/// Where the pieces of a RoCEv2 datagram are, once validated.
struct Layout {
    /// Length of the IP header (options included for IPv4).
    ip_header_len: usize,
    /// Length of the IP datagram (from the IP length fields; trailing Ethernet padding excluded).
    datagram_len: usize,
    is_ipv4: bool,
}

/// Validates the IP + UDP framing and returns the layout. The UDP datagram must fill the IP payload
/// exactly and hold at least a BTH and an ICRC.
fn layout(ip_packet: &[u8]) -> Result<Layout, Error> {
    let version = ip_packet.first().ok_or(Error::Truncated)? >> 4;
    let (ip_header_len, datagram_len, is_ipv4) = match version {
        4 => {
            let packet = Ipv4Packet::new_checked(ip_packet)?;
            if packet.protocol() != IpProtocol::Udp {
                return Err(Error::WrongProtocol);
            }
            (packet.header_len(), usize::from(packet.total_len()), true)
        }
        6 => {
            let packet = Ipv6Packet::new_checked(ip_packet)?;
            // Extension headers are not walked (see the ipv6 module doc).
            if packet.next_header() != IpProtocol::Udp {
                return Err(Error::WrongProtocol);
            }
            (
                ipv6::HEADER_LEN,
                ipv6::HEADER_LEN + usize::from(packet.payload_len()),
                false,
            )
        }
        _ => return Err(Error::BadVersion),
    };
    let udp_packet = UdpPacket::new_checked(&ip_packet[ip_header_len..datagram_len])?;
    if usize::from(udp_packet.len()) != datagram_len - ip_header_len {
        return Err(Error::BadLength);
    }
    if usize::from(udp_packet.len()) < udp::HEADER_LEN + bth::HEADER_LEN + ICRC_LEN {
        return Err(Error::Truncated);
    }
    Ok(Layout {
        ip_header_len,
        datagram_len,
        is_ipv4,
    })
}

/// Feeds `bytes` to the hasher with the byte positions in `masked` (ascending, relative to `bytes`)
/// replaced by 0xFF.
fn update_masked(hasher: &mut Hasher, bytes: &[u8], masked: &[core::ops::Range<usize>]) {
    let mut at = 0;
    for range in masked {
        hasher.update(&bytes[at..range.start]);
        hasher.update(&ONES[..range.len()]);
        at = range.end;
    }
    hasher.update(&bytes[at..]);
}

fn compute(ip_packet: &[u8], layout: &Layout) -> u32 {
    let mut hasher = Hasher::new();
    // The masked LRH of a native InfiniBand packet (IBTA Annex A17: "8 bytes of 1s").
    hasher.update(&ONES);
    let ip_header = &ip_packet[..layout.ip_header_len];
    if layout.is_ipv4 {
        update_masked(
            &mut hasher,
            ip_header,
            &[
                ipv4::field::DSCP_ECN..ipv4::field::DSCP_ECN + 1,
                ipv4::field::TTL..ipv4::field::TTL + 1,
                ipv4::field::CHECKSUM,
            ],
        );
    } else {
        // Version kept; traffic class and flow label (the rest of the first word) masked; hop limit
        // masked (rxe: `priority = 0xf`, `flow_lbl` = 0xff, `hop_limit = 0xff`).
        hasher.update(&[(ip_header[0] & 0xF0) | 0x0F, 0xFF, 0xFF, 0xFF]);
        hasher.update(&ip_header[ipv6::field::LENGTH.start..ipv6::field::HOP_LIMIT]);
        hasher.update(&ONES[..1]);
        hasher.update(&ip_header[ipv6::field::SRC_ADDR.start..]);
    }
    let transport = &ip_packet[layout.ip_header_len..layout.datagram_len - ICRC_LEN];
    let bth_byte4 = udp::HEADER_LEN + bth::field::FECN_BECN;
    update_masked(
        &mut hasher,
        transport,
        &[udp::field::CHECKSUM, bth_byte4..bth_byte4 + 1],
    );
    hasher.finalize()
}

/// Computes the ICRC of a RoCEv2 IP datagram.
///
/// `ip_packet` starts at the IPv4 or IPv6 header; its length fields say where the datagram ends (trailing
/// bytes such as Ethernet padding are ignored). The last 4 bytes of the datagram are the ICRC slot and
/// are not covered. Returns the CRC value; its wire form is `value.to_le_bytes()`.
///
/// Errors: `Truncated`/`BadVersion`/`BadHeaderLength`/`BadLength` from the IP and UDP framing,
/// `WrongProtocol` if the IP payload is not UDP (for IPv6: if the first next header is not UDP),
/// `BadLength` if the UDP length does not fill the IP payload exactly, `Truncated` if the UDP payload
/// cannot hold a BTH and an ICRC. The UDP port is not checked.
pub fn compute_icrc(ip_packet: &[u8]) -> Result<u32, Error> {
    let layout = layout(ip_packet)?;
    Ok(compute(ip_packet, &layout))
}

/// Verifies the ICRC of a RoCEv2 IP datagram (see [`compute_icrc`]); `Err(BadIcrc)` on mismatch.
pub fn verify_icrc(ip_packet: &[u8]) -> Result<(), Error> {
    let layout = layout(ip_packet)?;
    let stored = &ip_packet[layout.datagram_len - ICRC_LEN..layout.datagram_len];
    if compute(ip_packet, &layout).to_le_bytes() == stored {
        Ok(())
    } else {
        Err(Error::BadIcrc)
    }
}

/// Computes the ICRC of a RoCEv2 IP datagram and writes it into the last 4 bytes of the datagram.
/// Returns the CRC value.
pub fn fill_icrc(ip_packet: &mut [u8]) -> Result<u32, Error> {
    let layout = layout(ip_packet)?;
    let value = compute(ip_packet, &layout);
    ip_packet[layout.datagram_len - ICRC_LEN..layout.datagram_len]
        .copy_from_slice(&value.to_le_bytes());
    Ok(value)
}

/// Verifies the ICRC of a RoCEv2 packet given as a whole Ethernet frame (untagged or with one 802.1Q
/// tag). `WrongEtherType` if the frame carries neither IPv4 nor IPv6.
pub fn verify_icrc_frame(frame: &[u8]) -> Result<(), Error> {
    let l2 = parse_l2(frame)?;
    match l2.ethertype {
        EtherType::Ipv4 | EtherType::Ipv6 => verify_icrc(&frame[l2.payload_offset..]),
        _ => Err(Error::WrongEtherType),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(u8::is_ascii_hexdigit).collect();
        digits
            .chunks(2)
            .map(|pair| u8::from_str_radix(core::str::from_utf8(pair).unwrap(), 16).unwrap())
            .collect()
    }

    /// dcqcn-roce.md §4.4 vector 1: a CNP captured on a ConnectX-4 Lx (scapy roce.uts), whole frame.
    pub(crate) fn vector1_frame() -> Vec<u8> {
        hex("e41d2dab2bc2 7cfe90643b32 0800
             45c2003c718c4000401191610a0011010a001201 0000 12b7 0028 0000
             8100ffff 40000118 00000000 00000000000000000000000000000000 82fd002a")
    }

    /// Vector 2: UC SEND_ONLY from scapy roce.uts (IP packet). The UDP checksum of that test is not in
    /// the reference; it is masked by the ICRC, so 0x0000 is used here.
    pub(crate) fn vector2_ip() -> Vec<u8> {
        hex("45010040 04784000 4011b4d5 c0a80007 c0a80007
             c00012b7 002c0000
             2460ffff 000000d3 00cf1710
             4630818be28935d90e9a95505401be885e500000
             78f353f3")
    }

    /// Vector 3: RC RDMA WRITE ONLY of 128 bytes (open-rdma `test_icrc_computing`), IP packet.
    pub(crate) fn vector3_ip() -> Vec<u8> {
        let mut v = hex("450000bc000100004011f8dac0a80002c0a80003 12b712b700a80000
                         0a800000 00000002 80000000 00007f7e91000000 01709a33 00000080");
        v.extend_from_slice(&[0xFF; 128]);
        v.extend_from_slice(&hex("c6872298"));
        v
    }

    #[test]
    fn vector1_cnp_verifies_and_recomputes() {
        let frame = vector1_frame();
        assert_eq!(frame.len(), 74);
        let ip = &frame[14..];
        assert_eq!(compute_icrc(ip), Ok(0x2a00_fd82));
        assert_eq!(verify_icrc(ip), Ok(()));
        assert_eq!(verify_icrc_frame(&frame), Ok(()));
        let mut copy = ip.to_vec();
        copy[56..60].fill(0);
        assert_eq!(verify_icrc(&copy), Err(Error::BadIcrc));
        assert_eq!(fill_icrc(&mut copy), Ok(0x2a00_fd82));
        assert_eq!(&copy[..], ip);
    }

    #[test]
    fn vector2_uc_send_only_verifies_and_recomputes() {
        let ip = vector2_ip();
        assert_eq!(ip.len(), 64);
        assert!(Ipv4Packet::new_checked(&ip[..]).unwrap().verify_checksum());
        assert_eq!(compute_icrc(&ip), Ok(0xf353_f378));
        assert_eq!(verify_icrc(&ip), Ok(()));
        // The UDP checksum is masked: any value verifies.
        let mut other = ip.clone();
        other[26..28].copy_from_slice(&[0x12, 0x34]);
        assert_eq!(verify_icrc(&other), Ok(()));
    }

    #[test]
    fn vector3_rc_write_only_verifies_and_recomputes() {
        let ip = vector3_ip();
        assert_eq!(ip.len(), 188);
        assert_eq!(compute_icrc(&ip), Ok(0x9822_87c6));
        assert_eq!(verify_icrc(&ip), Ok(()));
        let mut copy = ip.clone();
        copy[184..].fill(0);
        fill_icrc(&mut copy).unwrap();
        assert_eq!(copy, ip);
    }

    /// IPv6 vector (not in the reference; built and checked here against an independent
    /// implementation, scapy 2.8.0 `BTH.compute_icrc`): RC SEND_ONLY, fd00::1 -> fd00::2, TC 0x6a,
    /// flow label 0xabcde, hop limit 64, UDP 0xc123 -> 4791 checksum 0, QP 0x11, A=1, PSN 5, payload
    /// 00..0f. scapy gives the same ICRC `be 0a f3 e8` for TC 0x6b/flow 0/hop 1 and TC 0xff/flow 0xfffff/
    /// hop 255, i.e. the IPv6 masks.
    pub(crate) fn vector_ipv6_ip() -> Vec<u8> {
        hex(
            "66aabcde00281140 fd000000000000000000000000000001 fd000000000000000000000000000002
             c12312b700280000 0400ffff00000011 80000005 000102030405060708090a0b0c0d0e0f be0af3e8",
        )
    }

    #[test]
    fn ipv6_vector_verifies_and_masks() {
        let ip = vector_ipv6_ip();
        assert_eq!(ip.len(), 80);
        assert_eq!(compute_icrc(&ip), Ok(0xe8f3_0abe));
        assert_eq!(verify_icrc(&ip), Ok(()));
        // Traffic class (incl. CE), flow label, hop limit, UDP checksum, BTH byte 4: masked.
        for (offset, value) in [
            (0usize, 0x6Fu8),
            (1, 0xB0),
            (1, 0x00),
            (2, 0),
            (3, 0x12),
            (7, 1),
            (46, 0x55),
            (52, 0x80),
        ] {
            let mut m = ip.clone();
            m[offset] = value;
            assert_eq!(verify_icrc(&m), Ok(()), "offset {offset}");
        }
        // Payload length is covered (but also framing), addresses, ports, BTH fields, payload are covered.
        for offset in [8usize, 23, 24, 39, 40, 43, 48, 50, 53, 56, 60, 75] {
            let mut m = ip.clone();
            m[offset] ^= 0x01;
            assert_eq!(verify_icrc(&m), Err(Error::BadIcrc), "offset {offset}");
        }
        let mut ext_header = ip.clone();
        ext_header[6] = 0; // Hop-by-Hop: extension headers are not walked
        assert_eq!(verify_icrc(&ext_header), Err(Error::WrongProtocol));
    }

    #[test]
    fn masked_fields_do_not_matter_and_covered_fields_do() {
        let ip = vector3_ip();
        // Masked: TOS/ECN (CE marking), TTL, IP checksum, UDP checksum, BTH byte 4 (FECN/BECN).
        for (offset, value) in [
            (1usize, 0x03u8),
            (8, 1),
            (10, 0),
            (11, 0),
            (26, 0xAB),
            (27, 0xCD),
            (32, 0xC0),
        ] {
            let mut m = ip.clone();
            m[offset] = value;
            assert_eq!(verify_icrc(&m), Ok(()), "offset {offset}");
        }
        // Covered: identification, addresses, ports, opcode, P_Key, QP, PSN, RETH, payload.
        for offset in [4usize, 12, 16, 20, 22, 28, 30, 33, 37, 40, 52, 100, 183] {
            let mut m = ip.clone();
            m[offset] ^= 0x01;
            assert_eq!(verify_icrc(&m), Err(Error::BadIcrc), "offset {offset}");
        }
    }

    #[test]
    fn ethernet_padding_is_ignored() {
        let mut ip = vector2_ip();
        ip.extend_from_slice(&[0xEE; 6]);
        assert_eq!(verify_icrc(&ip), Ok(()));
    }

    #[test]
    fn framing_errors() {
        let ip = vector3_ip();
        assert_eq!(compute_icrc(&[]), Err(Error::Truncated));
        assert_eq!(compute_icrc(&ip[..100]), Err(Error::Truncated));
        let mut tcp = ip.clone();
        tcp[9] = 6;
        assert_eq!(compute_icrc(&tcp), Err(Error::WrongProtocol));
        let mut short_udp = ip.clone();
        short_udp[24..26].copy_from_slice(&100u16.to_be_bytes());
        assert_eq!(compute_icrc(&short_udp), Err(Error::BadLength));
        let mut v5 = ip.clone();
        v5[0] = 0x55;
        assert_eq!(compute_icrc(&v5), Err(Error::BadVersion));
        // UDP payload too small for BTH + ICRC.
        let mut minimal = hex("4500002c 00000000 40110000 0a000001 0a000002 12b712b7 00180000");
        minimal.extend_from_slice(&[0u8; 16]);
        assert!(
            compute_icrc(&minimal).is_ok(),
            "BTH + ICRC and nothing else is the minimum"
        );
        let mut tiny = hex("4500002b 00000000 40110000 0a000001 0a000002 12b712b7 00170000");
        tiny.extend_from_slice(&[0u8; 15]);
        assert_eq!(compute_icrc(&tiny), Err(Error::Truncated));
        let mut arp = vector1_frame();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(verify_icrc_frame(&arp), Err(Error::WrongEtherType));
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120), version in prop_oneof![Just(4u8), Just(6u8), any::<u8>()]) {
            let mut bytes = bytes;
            if let Some(first) = bytes.first_mut() {
                *first = (version << 4) | (*first & 0x0F);
            }
            let _ = compute_icrc(&bytes);
            let _ = verify_icrc(&bytes);
            let _ = verify_icrc_frame(&bytes);
            let mut copy = bytes.clone();
            let _ = fill_icrc(&mut copy);
        }
    }
}
