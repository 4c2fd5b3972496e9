use super::dcbx::*;
use super::*;
use proptest::prelude::*;

const SRC: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);

/// The shape of lldpad's own LLDPDU on a veth (routing-fabric-dcbx.md §7.4): Chassis ID subtype 4
/// (MAC), Port ID subtype 3 (MAC), TTL 120, End.
const LLDPAD_LIKE: [u8; 24] = [
    0x02, 0x07, 0x04, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // chassis: MAC
    0x04, 0x07, 0x03, 0x02, 0x00, 0x00, 0x00, 0x00, 0x0a, // port: MAC
    0x06, 0x02, 0x00, 0x78, // TTL 120
    0x00, 0x00, // End
];

#[test]
fn parses_minimal_lldpdu() {
    let repr = LldpduRepr::parse(&LLDPAD_LIKE).unwrap();
    assert_eq!(repr.chassis_id.subtype, ChassisIdSubtype::MacAddress);
    assert_eq!(repr.chassis_id.id, SRC.as_bytes());
    assert_eq!(repr.port_id.subtype, PortIdSubtype::MacAddress);
    assert_eq!(repr.port_id.id, SRC.as_bytes());
    assert_eq!(repr.ttl_s, 120);
    assert_eq!(repr.optional.iter().count(), 0);
    let mut out = [0u8; 24];
    assert_eq!(repr.emit(&mut out), Ok(24));
    assert_eq!(out, LLDPAD_LIKE);
}

#[test]
fn padding_after_end_is_ignored_and_end_is_optional() {
    let mut padded = LLDPAD_LIKE.to_vec();
    padded.extend_from_slice(&[0xEE; 20]);
    assert!(LldpduRepr::parse(&padded).is_ok());
    let no_end = &LLDPAD_LIKE[..22];
    assert_eq!(
        LldpduRepr::parse(no_end).unwrap(),
        LldpduRepr::parse(&LLDPAD_LIKE).unwrap()
    );
}

#[test]
fn frame_round_trip_and_padding() {
    let mac = SRC;
    let repr = LldpduRepr {
        chassis_id: ChassisId::mac(&mac),
        port_id: PortId {
            subtype: PortIdSubtype::InterfaceName,
            id: b"Ethernet0",
        },
        ttl_s: 120,
        optional: Tlvs::EMPTY,
    };
    let mut buf = [0xAAu8; 80];
    let len = repr.emit_frame(SRC, NEAREST_BRIDGE, &mut buf).unwrap();
    assert_eq!(len, 60, "short LLDPDUs are padded to the minimum frame");
    assert_eq!(&buf[..6], NEAREST_BRIDGE.as_bytes());
    assert_eq!(&buf[12..14], &[0x88, 0xCC]);
    assert_eq!(&buf[60..], &[0xAA; 20], "nothing written past the frame");
    let frame = parse_lldp_frame(&buf[..len]).unwrap();
    assert_eq!(frame.src_addr, SRC);
    assert_eq!(frame.dst_addr, NEAREST_BRIDGE);
    assert_eq!(frame.lldpdu, repr);
    assert_eq!(
        repr.emit_frame(SRC, NEAREST_BRIDGE, &mut buf[..59]),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn frame_errors() {
    assert_eq!(parse_lldp_frame(&[0; 13]), Err(Error::Truncated));
    let mut ipv4 = [0u8; 60];
    ipv4[12..14].copy_from_slice(&[0x08, 0x00]);
    assert_eq!(parse_lldp_frame(&ipv4), Err(Error::WrongEtherType));
    let mut tagged = [0u8; 60];
    tagged[12..14].copy_from_slice(&[0x81, 0x00]);
    tagged[16..18].copy_from_slice(&[0x88, 0xCC]);
    assert_eq!(parse_lldp_frame(&tagged), Err(Error::WrongEtherType));
}

#[test]
fn mandatory_tlv_errors() {
    let good = LLDPAD_LIKE;
    // Out of order: port ID first.
    let mut swapped = good;
    swapped[..9].copy_from_slice(&good[9..18]);
    swapped[9..18].copy_from_slice(&good[..9]);
    assert_eq!(LldpduRepr::parse(&swapped), Err(Error::MissingTlv));
    // No TTL: End right after the port ID.
    assert_eq!(LldpduRepr::parse(&good[..18]), Err(Error::Truncated));
    let mut end_for_ttl = good;
    end_for_ttl[18..20].copy_from_slice(&[0, 0]);
    assert_eq!(LldpduRepr::parse(&end_for_ttl), Err(Error::MissingTlv));
    // Empty.
    assert_eq!(LldpduRepr::parse(&[]), Err(Error::Truncated));
    // Chassis ID of length 1 (subtype only).
    let bad_id = [
        0x02, 0x01, 0x04, 0x04, 0x02, 0x05, 0x41, 0x06, 0x02, 0, 1, 0, 0,
    ];
    assert_eq!(LldpduRepr::parse(&bad_id), Err(Error::BadLength));
    // TTL of length 1.
    let bad_ttl = [
        0x02, 0x02, 0x04, 0x41, 0x04, 0x02, 0x05, 0x41, 0x06, 0x01, 0, 0, 0,
    ];
    assert_eq!(LldpduRepr::parse(&bad_ttl), Err(Error::BadLength));
    // A TLV that runs past the buffer (chassis length 7 with 6 bytes).
    assert_eq!(LldpduRepr::parse(&good[..8]), Err(Error::Truncated));
    // An optional TLV that runs past the end.
    let mut long = good.to_vec();
    long.truncate(22);
    long.extend_from_slice(&[0x0A, 0x05, b'a']); // system name, length 5, 1 byte
    assert_eq!(LldpduRepr::parse(&long), Err(Error::Truncated));
    // One stray byte after TTL.
    let mut stray = good[..22].to_vec();
    stray.push(0x0A);
    assert_eq!(LldpduRepr::parse(&stray), Err(Error::Truncated));
    // A second TTL.
    let mut dup = good[..22].to_vec();
    dup.extend_from_slice(&[0x06, 0x02, 0x00, 0x10, 0, 0]);
    assert_eq!(LldpduRepr::parse(&dup), Err(Error::DuplicateTlv));
    // End with a length.
    let mut bad_end = good[..22].to_vec();
    bad_end.extend_from_slice(&[0x00, 0x01, 0x00]);
    assert_eq!(LldpduRepr::parse(&bad_end), Err(Error::BadLength));
    // A buffer longer than 1500 bytes is fine: what follows End is padding.
    let mut huge = good[..22].to_vec();
    huge.resize(1600, 0);
    assert_eq!(LldpduRepr::parse(&huge), LldpduRepr::parse(&good));
}

#[test]
fn malformed_optional_tlv_is_discarded_alone() {
    let mut bytes = LLDPAD_LIKE[..22].to_vec();
    bytes.extend_from_slice(&[0x0E, 0x03, 0, 4, 0]); // system capabilities, length 3
    bytes.extend_from_slice(&[0xFE, 0x03, 0x00, 0x80, 0xC2]); // org TLV, length 3
    bytes.extend_from_slice(&[0xFE, 0x05, 0x00, 0x80, 0xC2, 0x0B, 0x08]); // PFC, length 5
    bytes.extend_from_slice(&[0x0A, 0x02, b's', b'w']); // system name
    bytes.extend_from_slice(&[0, 0]);
    let repr = LldpduRepr::parse(&bytes).unwrap();
    let items: Vec<_> = repr.optional.iter().collect();
    assert_eq!(
        items,
        vec![
            Err(TlvError {
                tlv_type: 7,
                org: None,
                error: Error::BadLength
            }),
            Err(TlvError {
                tlv_type: 127,
                org: None,
                error: Error::BadLength
            }),
            Err(TlvError {
                tlv_type: 127,
                org: Some((IEEE_8021_OUI, 11)),
                error: Error::BadLength
            }),
            Ok(TlvRepr::SystemName(b"sw")),
        ]
    );
}

#[test]
fn unknown_tlvs_and_ouis_are_carried() {
    let mut bytes = LLDPAD_LIKE[..22].to_vec();
    bytes.extend_from_slice(&[0x12, 0x02, 0xAB, 0xCD]); // type 9 (reserved)
    bytes.extend_from_slice(&[0xFE, 0x06, 0x00, 0x12, 0x0F, 0x01, 0x03, 0x6C]); // 802.3 MAC/PHY
    bytes.extend_from_slice(&[0xFE, 0x06, 0x00, 0x80, 0xC2, 0x01, 0x00, 0x01]); // port VLAN ID
    bytes.extend_from_slice(&[0, 0]);
    let repr = LldpduRepr::parse(&bytes).unwrap();
    let items: Vec<_> = repr.optional.iter().collect();
    assert_eq!(
        items,
        vec![
            Ok(TlvRepr::Unknown {
                tlv_type: 9,
                value: &[0xAB, 0xCD]
            }),
            Ok(TlvRepr::OrganizationallySpecific {
                oui: [0x00, 0x12, 0x0F],
                subtype: 1,
                info: &[0x03, 0x6C]
            }),
            Ok(TlvRepr::OrganizationallySpecific {
                oui: IEEE_8021_OUI,
                subtype: 1,
                info: &[0x00, 0x01]
            }),
        ]
    );
    // And they are emitted back byte for byte.
    let mut out = vec![0u8; repr.buffer_len()];
    repr.emit(&mut out).unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn emit_refuses_what_parse_refuses() {
    let mac = SRC;
    let base = |optional| LldpduRepr {
        chassis_id: ChassisId::mac(&mac),
        port_id: PortId {
            subtype: PortIdSubtype::InterfaceName,
            id: b"p0",
        },
        ttl_s: 120,
        optional,
    };
    let mut buf = [0u8; 2048];
    let ttl = [TlvRepr::Ttl(1)];
    assert_eq!(
        base(Tlvs::Decoded(&ttl)).emit(&mut buf),
        Err(Error::BadLength)
    );
    let end = [TlvRepr::End];
    assert_eq!(
        base(Tlvs::Decoded(&end)).emit(&mut buf),
        Err(Error::BadLength)
    );
    let long_name = [0x41u8; 256];
    let name = [TlvRepr::SystemName(&long_name)];
    assert_eq!(
        base(Tlvs::Decoded(&name)).emit(&mut buf),
        Err(Error::BadLength)
    );
    let disguised = [TlvRepr::OrganizationallySpecific {
        oui: IEEE_8021_OUI,
        subtype: 11,
        info: &[0x08, 0x18],
    }];
    assert_eq!(
        base(Tlvs::Decoded(&disguised)).emit(&mut buf),
        Err(Error::BadLength)
    );
    let named_as_unknown = [TlvRepr::Unknown {
        tlv_type: 5,
        value: b"x",
    }];
    assert_eq!(
        base(Tlvs::Decoded(&named_as_unknown)).emit(&mut buf),
        Err(Error::BadLength)
    );
    let empty_id = LldpduRepr {
        chassis_id: ChassisId {
            subtype: ChassisIdSubtype::LocallyAssigned,
            id: b"",
        },
        ..base(Tlvs::EMPTY)
    };
    assert_eq!(empty_id.emit(&mut buf), Err(Error::BadLength));
    // Over 1500 bytes in total: six 255-byte descriptions.
    let desc = [0x41u8; 255];
    let many = [TlvRepr::PortDescription(&desc); 6];
    assert_eq!(
        base(Tlvs::Decoded(&many)).emit(&mut buf),
        Err(Error::BadLength)
    );
    assert!(base(Tlvs::Decoded(&many[..5])).emit(&mut buf).is_ok());
    assert_eq!(
        base(Tlvs::Decoded(&many[..5])).emit(&mut buf[..100]),
        Err(Error::BufferTooSmall)
    );
}

#[test]
fn management_address_layout() {
    let mgmt = TlvRepr::ManagementAddress(ManagementAddress {
        address_subtype: 1,
        address: &[192, 0, 2, 1],
        interface_subtype: 2,
        interface_number: 7,
        oid: &[],
    });
    let mut out = [0u8; 32];
    let len = mgmt.emit(&mut out).unwrap();
    assert_eq!(
        &out[..len],
        &[0x10, 0x0C, 5, 1, 192, 0, 2, 1, 2, 0, 0, 0, 7, 0]
    );
    let tlv = Tlv::new_checked(&out[..len]).unwrap();
    assert_eq!(TlvRepr::parse(&tlv), Ok(mgmt));
    // OID length that disagrees with the TLV.
    let mut bad = out;
    bad[13] = 1;
    let tlv = Tlv::new_checked(&bad[..len]).unwrap();
    assert_eq!(TlvRepr::parse(&tlv), Err(Error::BadLength));
}

// ---- property tests ----------------------------------------------------------------------------

/// Owned test data a borrowed [`TlvRepr`] can point into.
#[derive(Debug, Clone)]
enum OwnedTlv {
    Description(u8, Vec<u8>),
    Caps(SystemCapabilities),
    Mgmt(u8, Vec<u8>, u8, u32, Vec<u8>),
    Ets(EtsConfiguration),
    EtsRec(EtsRecommendation),
    Pfc(PfcConfiguration),
    App(Vec<AppEntry>),
    Org(Oui, u8, Vec<u8>),
    Unknown(u8, Vec<u8>),
}

impl OwnedTlv {
    fn repr(&self) -> TlvRepr<'_> {
        match self {
            OwnedTlv::Description(4, s) => TlvRepr::PortDescription(s),
            OwnedTlv::Description(5, s) => TlvRepr::SystemName(s),
            OwnedTlv::Description(_, s) => TlvRepr::SystemDescription(s),
            OwnedTlv::Caps(c) => TlvRepr::SystemCapabilities(*c),
            OwnedTlv::Mgmt(a, addr, i, n, oid) => TlvRepr::ManagementAddress(ManagementAddress {
                address_subtype: *a,
                address: addr,
                interface_subtype: *i,
                interface_number: *n,
                oid,
            }),
            OwnedTlv::Ets(e) => TlvRepr::Dcbx(DcbxTlv::EtsConfiguration(*e)),
            OwnedTlv::EtsRec(e) => TlvRepr::Dcbx(DcbxTlv::EtsRecommendation(*e)),
            OwnedTlv::Pfc(p) => TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(*p)),
            OwnedTlv::App(entries) => {
                TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(ApplicationPriority {
                    entries: AppEntries::Decoded(entries),
                }))
            }
            OwnedTlv::Org(oui, subtype, info) => TlvRepr::OrganizationallySpecific {
                oui: *oui,
                subtype: *subtype,
                info,
            },
            OwnedTlv::Unknown(t, value) => TlvRepr::Unknown {
                tlv_type: *t,
                value,
            },
        }
    }
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..=max)
}

fn tsa() -> impl Strategy<Value = Tsa> {
    any::<u8>().prop_map(Tsa::from)
}

fn ets_tables() -> impl Strategy<Value = EtsTables> {
    (
        proptest::array::uniform8(0u8..16),
        any::<[u8; 8]>(),
        proptest::array::uniform8(tsa()),
    )
        .prop_map(|(priority_tc, tc_bandwidth_percent, tsa)| EtsTables {
            priority_tc,
            tc_bandwidth_percent,
            tsa,
        })
}

fn app_entry() -> impl Strategy<Value = AppEntry> {
    (0u8..8, 0u8..8, any::<u16>()).prop_map(|(priority, selector, protocol)| AppEntry {
        priority,
        selector: AppSelector::from(selector),
        protocol,
    })
}

fn owned_tlv() -> impl Strategy<Value = OwnedTlv> {
    prop_oneof![
        (4u8..=6, bytes(255)).prop_map(|(t, s)| OwnedTlv::Description(t, s)),
        (any::<u16>(), any::<u16>()).prop_map(|(capabilities, enabled)| OwnedTlv::Caps(
            SystemCapabilities {
                capabilities,
                enabled
            }
        )),
        (
            any::<u8>(),
            proptest::collection::vec(any::<u8>(), 1..=31),
            any::<u8>(),
            any::<u32>(),
            bytes(128)
        )
            .prop_map(|(a, addr, i, n, oid)| OwnedTlv::Mgmt(a, addr, i, n, oid)),
        (any::<bool>(), any::<bool>(), 1u8..=8, ets_tables()).prop_map(
            |(willing, cbs, max_tcs, tables)| OwnedTlv::Ets(EtsConfiguration {
                willing,
                cbs,
                max_tcs,
                tables
            })
        ),
        ets_tables().prop_map(|tables| OwnedTlv::EtsRec(EtsRecommendation { tables })),
        (any::<bool>(), any::<bool>(), 0u8..16, any::<u8>()).prop_map(
            |(willing, mbc, pfc_cap, enable)| OwnedTlv::Pfc(PfcConfiguration {
                willing,
                mbc,
                pfc_cap,
                enable
            })
        ),
        proptest::collection::vec(app_entry(), 0..=MAX_APP_ENTRIES).prop_map(OwnedTlv::App),
        (any::<Oui>(), any::<u8>(), bytes(MAX_ORG_INFO_LEN))
            .prop_filter("00-80-C2 subtypes 9..=12 are Dcbx", |(oui, subtype, _)| {
                *oui != IEEE_8021_OUI || !(9..=12).contains(subtype)
            })
            .prop_map(|(oui, subtype, info)| OwnedTlv::Org(oui, subtype, info)),
        (9u8..=126, bytes(MAX_TLV_VALUE_LEN)).prop_map(|(t, v)| OwnedTlv::Unknown(t, v)),
    ]
}

fn chassis_subtype() -> impl Strategy<Value = ChassisIdSubtype> {
    any::<u8>().prop_map(ChassisIdSubtype::from)
}

fn port_subtype() -> impl Strategy<Value = PortIdSubtype> {
    any::<u8>().prop_map(PortIdSubtype::from)
}

proptest! {
    #[test]
    fn tlv_round_trip(owned in owned_tlv(), junk in any::<u8>()) {
        let repr = owned.repr();
        prop_assert_eq!(repr.validate(), Ok(()));
        let mut buf = vec![junk; repr.buffer_len() + 3];
        let len = repr.emit(&mut buf).unwrap();
        prop_assert_eq!(len, repr.buffer_len());
        let tlv = Tlv::new_checked(&buf[..len]).unwrap();
        prop_assert_eq!(tlv.tlv_type(), repr.tlv_type());
        prop_assert_eq!(TlvRepr::parse(&tlv), Ok(repr));
        prop_assert!(buf[len..].iter().all(|&b| b == junk));
    }

    #[test]
    fn lldpdu_round_trip(
        chassis in (chassis_subtype(), proptest::collection::vec(any::<u8>(), 1..=255)),
        port in (port_subtype(), proptest::collection::vec(any::<u8>(), 1..=255)),
        ttl_s in any::<u16>(),
        owned in proptest::collection::vec(owned_tlv(), 0..6),
        src in any::<[u8; 6]>(),
    ) {
        let optional: Vec<TlvRepr<'_>> = owned.iter().map(OwnedTlv::repr).collect();
        let repr = LldpduRepr {
            chassis_id: ChassisId { subtype: chassis.0, id: &chassis.1 },
            port_id: PortId { subtype: port.0, id: &port.1 },
            ttl_s,
            optional: Tlvs::Decoded(&optional),
        };
        let mut buf = vec![0u8; repr.frame_len()];
        match repr.emit_frame(MacAddress(src), NEAREST_BRIDGE, &mut buf) {
            Ok(len) => {
                prop_assert!(repr.buffer_len() <= MAX_LLDPDU_LEN);
                prop_assert_eq!(len, buf.len());
                let frame = parse_lldp_frame(&buf).unwrap();
                prop_assert_eq!(frame.src_addr, MacAddress(src));
                prop_assert_eq!(frame.lldpdu, repr);
                // And the parsed form emits the same bytes again.
                let mut again = vec![0u8; frame.lldpdu.frame_len()];
                frame.lldpdu.emit_frame(MacAddress(src), NEAREST_BRIDGE, &mut again).unwrap();
                prop_assert_eq!(again, buf);
            }
            Err(error) => {
                prop_assert_eq!(error, Error::BadLength);
                prop_assert!(repr.buffer_len() > MAX_LLDPDU_LEN);
            }
        }
    }

    #[test]
    fn parse_arbitrary_bytes_never_panics(data in bytes(1600)) {
        if let Ok(repr) = LldpduRepr::parse(&data) {
            for item in repr.optional.iter() {
                if let Ok(TlvRepr::Dcbx(DcbxTlv::ApplicationPriority(app))) = item {
                    let _ = app.entries.iter().count();
                }
            }
            let _ = repr.buffer_len();
        }
        let _ = parse_lldp_frame(&data);
        let tlv = Tlv::new_unchecked(&data[..]);
        if tlv.check_len().is_ok() {
            let _ = (tlv.tlv_type(), tlv.value(), TlvRepr::parse(&tlv));
        }
    }

    /// A valid LLDPDU with some bytes overwritten: exercises the paths past the mandatory TLVs.
    #[test]
    fn parse_mutated_lldpdu_never_panics(
        owned in proptest::collection::vec(owned_tlv(), 0..4),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
    ) {
        let mac = SRC;
        let optional: Vec<TlvRepr<'_>> = owned.iter().map(OwnedTlv::repr).collect();
        let repr = LldpduRepr {
            chassis_id: ChassisId::mac(&mac),
            port_id: PortId { subtype: PortIdSubtype::InterfaceName, id: b"Ethernet0" },
            ttl_s: 120,
            optional: Tlvs::Decoded(&optional),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        if repr.emit(&mut buf).is_ok() {
            for (at, value) in edits {
                let i = at.index(buf.len());
                buf[i] = value;
            }
            let end = cut.index(buf.len() + 1);
            if let Ok(parsed) = LldpduRepr::parse(&buf[..end]) {
                // Every optional TLV is either decoded or discarded; none ends the iteration early
                // or panics, and re-emitting the good ones never panics either.
                let good: Vec<TlvRepr<'_>> = parsed.optional.iter().filter_map(Result::ok).collect();
                let again = LldpduRepr { optional: Tlvs::Decoded(&good), ..parsed };
                let mut out = vec![0u8; again.buffer_len()];
                let _ = again.emit(&mut out);
            }
        }
    }
}

/// The committed fuzz seeds decode as meant (so the fuzzer starts from frames that reach the DCBX
/// decoders, not from ones refused at the first TLV).
#[test]
fn fuzz_seeds_decode() {
    let plain = include_bytes!("../../../../fuzz/seeds/lldp/lldpad_plain");
    let frame = parse_lldp_frame(plain).unwrap();
    assert_eq!(frame.lldpdu, LldpduRepr::parse(&LLDPAD_LIKE).unwrap());

    let switch = include_bytes!("../../../../fuzz/seeds/lldp/switch_dcbx");
    let frame = parse_lldp_frame(switch).unwrap();
    assert_eq!(frame.lldpdu.port_id.id, b"Ethernet0");
    let items: Vec<TlvRepr<'_>> = frame
        .lldpdu
        .optional
        .iter()
        .collect::<Result<_, _>>()
        .unwrap();
    let subtypes: Vec<Ieee8021Subtype> = items
        .iter()
        .filter_map(|tlv| match tlv {
            TlvRepr::Dcbx(d) => Some(d.subtype()),
            _ => None,
        })
        .collect();
    assert_eq!(
        subtypes,
        [
            Ieee8021Subtype::EtsConfiguration,
            Ieee8021Subtype::EtsRecommendation,
            Ieee8021Subtype::PfcConfiguration,
            Ieee8021Subtype::ApplicationPriority
        ]
    );
    assert!(items.contains(&TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(
        PfcConfiguration {
            willing: false,
            mbc: false,
            pfc_cap: 8,
            enable: 0x18
        }
    ))));
    assert!(matches!(
        items.last(),
        Some(TlvRepr::OrganizationallySpecific {
            oui: [0x00, 0x12, 0x0F],
            ..
        })
    ));
}
