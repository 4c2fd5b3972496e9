//! RoCEv2: the one-shot parser, BTH/RETH/AETH/CNP reprs and the ICRC. A parsed packet rebuilt with the
//! builder parses back to the same transport fields, and its ICRC verifies; an ICRC filled in place
//! verifies.
#![no_main]

use headroom_wire::ethernet::EtherType;
use headroom_wire::roce::{
    compute_icrc, fill_icrc, parse_rocev2, verify_icrc, verify_icrc_frame, AethPacket, AethRepr,
    BthPacket, BthRepr, CnpRepr, Opcode, RethPacket, RethRepr, RoceIpRepr, RoceV2PacketRepr,
};
use headroom_wire::{ethernet::parse_l2, Error};
use libfuzzer_sys::fuzz_target;

fn reprs_round_trip(data: &[u8]) {
    if let Ok(bth) = BthRepr::parse(&BthPacket::new_unchecked(data)) {
        let mut out = [0u8; 12];
        bth.emit(&mut BthPacket::new_unchecked(&mut out[..]));
        assert_eq!(BthRepr::parse(&BthPacket::new_unchecked(&out[..])), Ok(bth));
    }
    if let Ok(cnp) = CnpRepr::parse(&BthPacket::new_unchecked(data)) {
        let mut out = [0xFFu8; CnpRepr::LEN];
        cnp.emit(&mut BthPacket::new_unchecked(&mut out[..]));
        assert_eq!(CnpRepr::parse(&BthPacket::new_unchecked(&out[..])), Ok(cnp));
    }
    if let Ok(reth) = RethRepr::parse(&RethPacket::new_unchecked(data)) {
        let mut out = [0u8; 16];
        reth.emit(&mut RethPacket::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &data[..16]);
    }
    if let Ok(aeth) = AethRepr::parse(&AethPacket::new_unchecked(data)) {
        let mut out = [0u8; 4];
        aeth.emit(&mut AethPacket::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &data[..4]);
    }
}

fuzz_target!(|data: &[u8]| {
    reprs_round_trip(data);

    // ICRC over the IP part of the frame, if there is one.
    let icrc_result = verify_icrc_frame(data);
    if let Ok(l2) = parse_l2(data) {
        if matches!(l2.ethertype, EtherType::Ipv4 | EtherType::Ipv6) {
            let ip = &data[l2.payload_offset..];
            match compute_icrc(ip) {
                Ok(_) => {
                    assert!(matches!(icrc_result, Ok(()) | Err(Error::BadIcrc)));
                    let mut copy = ip.to_vec();
                    fill_icrc(&mut copy).unwrap();
                    assert_eq!(verify_icrc(&copy), Ok(()));
                }
                Err(e) => assert_eq!(icrc_result, Err(e)),
            }
        }
    }

    let Ok(parsed) = parse_rocev2(data) else {
        return;
    };
    assert!(parsed.payload_offset + parsed.payload_len <= parsed.icrc_offset);
    assert!(parsed.icrc_offset + 4 <= data.len());

    // Rebuild from what was parsed; the transport layer must come back identical.
    let ip = match (parsed.src_addr, parsed.dst_addr) {
        (std::net::IpAddr::V4(src_addr), std::net::IpAddr::V4(dst_addr)) => RoceIpRepr::V4 {
            src_addr,
            dst_addr,
            dscp: parsed.dscp,
            ecn: parsed.ecn,
            hop_limit: 64,
            ident: 0,
            dont_frag: true,
        },
        (std::net::IpAddr::V6(src_addr), std::net::IpAddr::V6(dst_addr)) => RoceIpRepr::V6 {
            src_addr,
            dst_addr,
            dscp: parsed.dscp,
            ecn: parsed.ecn,
            flow_label: 0,
            hop_limit: 64,
        },
        _ => unreachable!("mixed address families"),
    };
    // Only opcodes whose extended headers the builder writes in full can be rebuilt byte for byte.
    let Some(headers) = parsed.bth.opcode.ext_headers() else {
        return;
    };
    if headers.deth || headers.atomic_eth || headers.atomic_ack_eth || headers.ieth {
        return;
    }
    let payload = &data[parsed.payload_offset..parsed.payload_offset + parsed.payload_len];
    let repr = RoceV2PacketRepr {
        dst_addr: parsed.l2.dst_addr,
        src_addr: parsed.l2.src_addr,
        vlan: parsed.l2.vlan,
        ip,
        udp_src_port: parsed.udp_src_port,
        udp_checksum: true,
        bth: parsed.bth,
        ext: parsed.ext,
        payload,
    };
    let mut out = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit(&mut out), Ok(repr.buffer_len()));
    assert_eq!(verify_icrc_frame(&out), Ok(()));
    let reparsed = parse_rocev2(&out).expect("rebuilt packet parses");
    assert_eq!(reparsed.ext, parsed.ext);
    assert_eq!(reparsed.bth.opcode, parsed.bth.opcode);
    assert_eq!(reparsed.bth.psn, parsed.bth.psn);
    assert_eq!(reparsed.bth.dest_qp, parsed.bth.dest_qp);
    assert_eq!(reparsed.payload_len, parsed.payload_len);
    assert_eq!(
        &out[reparsed.payload_offset..reparsed.payload_offset + reparsed.payload_len],
        payload
    );
    if parsed.bth.opcode == Opcode::Cnp {
        assert!(CnpRepr::parse(&BthPacket::new_unchecked(&out[reparsed.bth_offset..])).is_ok());
    }
});
