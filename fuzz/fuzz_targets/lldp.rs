//! LLDP frames (802.1AB LLDPDU with 802.1Qaz DCBX TLVs): parse, decode every optional TLV, and
//! re-emit what decoded: the result parses back to the same LLDPDU.
#![no_main]

use headroom_wire::lldp::{parse_lldp_frame, LldpduRepr, TlvRepr, Tlvs, NEAREST_BRIDGE};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = parse_lldp_frame(data) else { return };
    let lldpdu = frame.lldpdu;
    let mut good: Vec<TlvRepr<'_>> = Vec::new();
    let mut discarded = 0usize;
    for item in lldpdu.optional.iter() {
        match item {
            Ok(tlv) => good.push(tlv),
            Err(_) => discarded += 1,
        }
    }
    let clean = LldpduRepr {
        optional: Tlvs::Decoded(&good),
        ..lldpdu
    };
    let mut out = vec![0u8; clean.frame_len()];
    let len = clean
        .emit_frame(frame.src_addr, NEAREST_BRIDGE, &mut out)
        .expect("what parsed re-emits");
    let again = parse_lldp_frame(&out[..len]).expect("what we emit parses");
    assert_eq!(again.lldpdu, clean);
    assert_eq!(again.src_addr, frame.src_addr);
    if discarded == 0 {
        assert_eq!(again.lldpdu, lldpdu);
    }
});
