//! LLDP frames (802.1AB LLDPDU with 802.1Qaz DCBX TLVs): parse, decode every optional TLV, and
//! re-emit what decoded (unless it is longer than we ever send): the result parses back to the
//! same LLDPDU.
#![no_main]

use headroom_wire::lldp::{
    parse_lldp_frame, LldpduRepr, TlvRepr, Tlvs, MAX_LLDPDU_LEN, NEAREST_BRIDGE,
};
use headroom_wire::Error;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(frame) = parse_lldp_frame(data) else {
        return;
    };
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
    let emitted = clean.emit_frame(frame.src_addr, NEAREST_BRIDGE, &mut out);
    if clean.buffer_len() > MAX_LLDPDU_LEN {
        // Parsed from a jumbo frame: we never send one that long.
        assert_eq!(emitted, Err(Error::BadLength));
        return;
    }
    let len = emitted.expect("what parsed re-emits");
    let again = parse_lldp_frame(&out[..len]).expect("what we emit parses");
    assert_eq!(again.lldpdu, clean);
    assert_eq!(again.src_addr, frame.src_addr);
    if discarded == 0 {
        assert_eq!(again.lldpdu, lldpdu);
    }
});
