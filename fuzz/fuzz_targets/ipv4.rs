//! IPv4: check_len/parse never panic, re-emit is consistent, CE marking keeps the checksum valid and
//! equals a full recomputation (RFC 1624).
#![no_main]

use headroom_wire::ipv4::{Ipv4Packet, Ipv4Repr, HEADER_LEN};
use headroom_wire::{CeMark, Ecn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Ipv4Packet::new_checked(data) else {
        let _ = Ipv4Repr::parse(&Ipv4Packet::new_unchecked(data));
        return;
    };
    let _ = (
        packet.options(),
        packet.payload(),
        packet.src_addr(),
        packet.dst_addr(),
    );
    let checksum_ok = packet.verify_checksum();
    match Ipv4Repr::parse(&packet) {
        Ok(repr) => {
            assert!(checksum_ok);
            assert_eq!(repr.payload_len, packet.payload().len());
            let mut out = vec![0u8; HEADER_LEN + repr.payload_len];
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
            let emitted = Ipv4Packet::new_checked(&out[..]).unwrap();
            assert!(emitted.verify_checksum());
            assert_eq!(Ipv4Repr::parse(&emitted), Ok(repr));
            // Without options and with the reserved flag clear, the header is reproduced exactly, except
            // that a stored checksum of 0xFFFF (negative zero, which also verifies) is emitted as 0x0000.
            if packet.header_len() == HEADER_LEN && data[6] & 0x80 == 0 {
                let mut expected = [0u8; HEADER_LEN];
                expected.copy_from_slice(&data[..HEADER_LEN]);
                if packet.checksum() == 0xFFFF {
                    expected[10..12].fill(0);
                }
                assert_eq!(&out[..HEADER_LEN], &expected[..]);
            }
        }
        Err(_) => assert!(!checksum_ok),
    }

    // CE marking in place.
    let mut marked = data.to_vec();
    let mut m = Ipv4Packet::new_unchecked(&mut marked[..]);
    let before = m.ecn();
    let outcome = m.mark_ce();
    match before {
        Ecn::Ect0 | Ecn::Ect1 => {
            assert_eq!(outcome, CeMark::Marked);
            assert_eq!(m.ecn(), Ecn::Ce);
            assert_eq!(m.verify_checksum(), checksum_ok);
            if checksum_ok {
                let incremental = m.checksum();
                m.fill_checksum();
                assert_eq!(incremental, m.checksum());
            }
        }
        Ecn::Ce => assert_eq!((outcome, &marked[..]), (CeMark::AlreadyMarked, data)),
        Ecn::NotEct => assert_eq!((outcome, &marked[..]), (CeMark::NotEcnCapable, data)),
    }
});
