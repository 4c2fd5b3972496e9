//! Ethernet II, parse_l2, 802.1Q tag view/repr, in-place tag insert/strip.
#![no_main]

use headroom_wire::ethernet::{parse_l2, EthernetFrame, EthernetRepr, HEADER_LEN};
use headroom_wire::vlan::{
    insert_vlan_tag, strip_vlan_tag, VlanTag, VlanTagRepr, VlanTci, TAG_LEN,
};
use headroom_wire::Error;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Ethernet repr: re-emit reproduces the 14 header bytes exactly.
    if let Ok(frame) = EthernetFrame::new_checked(data) {
        let repr = EthernetRepr::parse(&frame).expect("checked frame parses");
        let mut out = [0u8; HEADER_LEN];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(&out[..], &data[..HEADER_LEN]);
    }

    // parse_l2 agrees with the views.
    match parse_l2(data) {
        Ok(l2) => {
            assert!(l2.payload_offset <= data.len());
            assert!(!l2.ethertype.is_tag());
            if let Some(tci) = l2.vlan {
                assert_eq!(l2.payload_offset, HEADER_LEN + TAG_LEN);
                let tag = VlanTag::new_checked(&data[HEADER_LEN..]).unwrap();
                let repr = VlanTagRepr::parse(&tag).unwrap();
                assert_eq!((repr.tci, repr.ethertype), (tci, l2.ethertype));
                let mut out = [0u8; TAG_LEN];
                repr.emit(&mut VlanTag::new_unchecked(&mut out[..]));
                assert_eq!(&out[..], &data[HEADER_LEN..HEADER_LEN + TAG_LEN]);

                // Strip then re-insert restores the frame.
                let mut copy = data.to_vec();
                assert_eq!(strip_vlan_tag(&mut copy), Ok(tci));
                assert_eq!(&copy[TAG_LEN..TAG_LEN + 12], &data[..12]);
                assert_eq!(insert_vlan_tag(&mut copy, tci), Ok(()));
                assert_eq!(&copy[..], data);
            } else {
                assert_eq!(l2.payload_offset, HEADER_LEN);
            }
        }
        Err(e) => assert!(matches!(e, Error::Truncated | Error::DoubleTag), "{e:?}"),
    }

    // Insert into 4 scratch bytes + data, then strip: the frame comes back.
    let tci = VlanTci(data.first().map_or(0, |&b| u16::from(b) << 8 | 0x0A5));
    let mut grown = vec![0u8; TAG_LEN + data.len()];
    grown[TAG_LEN..].copy_from_slice(data);
    if insert_vlan_tag(&mut grown, tci).is_ok() {
        assert_eq!(parse_l2(&grown).map(|l2| l2.vlan), Ok(Some(tci)));
        assert_eq!(strip_vlan_tag(&mut grown), Ok(tci));
        assert_eq!(&grown[TAG_LEN..], data);
    }
});
