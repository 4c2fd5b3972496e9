//! MAC Control (PFC, PAUSE) frames: parse, and re-emit reproduces every meaningful byte.
#![no_main]

use headroom_wire::mac_control::{field, MacControlFrame, MacControlRepr, FRAME_LEN};
use headroom_wire::Error;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = MacControlFrame::new_unchecked(data);
    let parsed = MacControlRepr::parse(&frame);
    if data.len() < FRAME_LEN {
        assert_eq!(parsed, Err(Error::Truncated));
        return;
    }
    let Ok(repr) = parsed else { return };
    let mut out = [0u8; FRAME_LEN];
    assert_eq!(repr.emit_frame(frame.src_addr(), &mut out), Ok(FRAME_LEN));
    let reparsed = MacControlRepr::parse(&MacControlFrame::new_checked(&out[..]).unwrap());
    assert_eq!(reparsed, Ok(repr));
    // Everything up to the padding is reproduced; the padding is zero.
    let pad_start = match repr {
        MacControlRepr::Pfc(_) => field::PFC_PAD_START,
        MacControlRepr::Pause(_) => field::PAUSE_PAD_START,
        MacControlRepr::Unknown { .. } => field::OPCODE.end,
    };
    if !matches!(repr, MacControlRepr::Unknown { .. }) {
        assert_eq!(&out[..pad_start], &data[..pad_start]);
    } else {
        assert_eq!(&out[6..pad_start], &data[6..pad_start]);
    }
    assert!(out[pad_start..].iter().all(|&b| b == 0));
});
