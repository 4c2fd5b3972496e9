//! IPv6 fixed header: parse never panics, re-emit reproduces the 40 bytes, CE marking touches only
//! the ECN bits.
#![no_main]

use headroom_wire::ipv6::{Ipv6Packet, Ipv6Repr, HEADER_LEN};
use headroom_wire::{CeMark, Ecn};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(packet) = Ipv6Packet::new_checked(data) else {
        let _ = Ipv6Repr::parse(&Ipv6Packet::new_unchecked(data));
        return;
    };
    let repr = Ipv6Repr::parse(&packet).expect("checked packet parses");
    assert_eq!(repr.payload_len, packet.payload().len());
    let mut out = [0u8; HEADER_LEN];
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
    assert_eq!(&out[..], &data[..HEADER_LEN]);

    let mut marked = data.to_vec();
    let mut m = Ipv6Packet::new_unchecked(&mut marked[..]);
    let before = m.ecn();
    let outcome = m.mark_ce();
    let expected = match before {
        Ecn::Ect0 | Ecn::Ect1 => CeMark::Marked,
        Ecn::Ce => CeMark::AlreadyMarked,
        Ecn::NotEct => CeMark::NotEcnCapable,
    };
    assert_eq!(outcome, expected);
    for (i, (a, b)) in marked.iter().zip(data).enumerate() {
        if i == 1 {
            assert_eq!(a & !0x30, b & !0x30);
        } else {
            assert_eq!(a, b);
        }
    }
});
