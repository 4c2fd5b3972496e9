//! UDP: parse never panics, re-emit reproduces the header, filled checksums verify.
#![no_main]

use std::net::{Ipv4Addr, Ipv6Addr};

use headroom_wire::udp::{UdpPacket, UdpRepr, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = UdpPacket::new_checked(data) else {
        let _ = UdpRepr::parse(&UdpPacket::new_unchecked(data));
        return;
    };
    let repr = UdpRepr::parse(&packet).expect("checked packet parses");
    let mut out = [0u8; HEADER_LEN];
    repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]));
    assert_eq!(&out[..], &data[..HEADER_LEN]);

    let (s4, d4) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
    let (s6, d6) = (Ipv6Addr::LOCALHOST, Ipv6Addr::UNSPECIFIED);
    let _ = packet.verify_checksum_ipv4(s4, d4);
    let mut copy = data.to_vec();
    let mut m = UdpPacket::new_unchecked(&mut copy[..]);
    m.fill_checksum_ipv4(s4, d4);
    assert!(m.checksum() != 0 && m.verify_checksum_ipv4(s4, d4));
    m.fill_checksum_ipv6(s6, d6);
    assert!(m.verify_checksum_ipv6(s6, d6));
    assert_eq!(m.payload(), packet.payload());
});
