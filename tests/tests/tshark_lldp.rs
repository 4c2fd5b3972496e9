//! Conformance of our LLDPDUs with Wireshark's LLDP and IEEE 802.1Qaz dissectors: the frames the
//! agent builds from a configuration are written to a pcap and decoded with `tshark`; every TLV must
//! decode to the value the configuration implies (computed here from the local view, not copied
//! from tshark), with no expert info and no malformed packet. A negative control shows the same
//! invocation flags broken TLVs. (Field names: routing-fabric-dcbx.md §7.5.)
//!
//! tshark is a hard requirement: if it is missing the test fails and says how to install it.

use std::collections::BTreeMap;
use std::fs::File;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use headroom_lldp::{build_frame, local_view, LocalDcbx};
use headroom_wire::ethernet::MacAddress;
use headroom_wire::lldp::dcbx::{AppSelector, Tsa};
use headroom_wire::lldp::{
    parse_lldp_frame, ChassisId, LldpduRepr, ManagementAddress, PortId, PortIdSubtype, TlvRepr,
    Tlvs, NEAREST_BRIDGE,
};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let file = File::create(path).unwrap();
    let header = PcapHeader {
        datalink: DataLink::ETHERNET,
        ..PcapHeader::default()
    };
    let mut writer = PcapWriter::with_header(file, header).unwrap();
    for (i, frame) in frames.iter().enumerate() {
        let packet = PcapPacket::new(Duration::from_millis(i as u64), frame.len() as u32, frame);
        writer.write_packet(&packet).unwrap();
    }
}

fn require_tshark() {
    match Command::new("tshark").arg("--version").output() {
        Ok(out) if out.status.success() => {}
        _ => panic!(
            "tshark is required by this conformance test but was not found or does not run. \
             Install it (Debian/Ubuntu: `apt-get install -y tshark`) and re-run."
        ),
    }
}

/// Per frame, field → all occurrences joined with ','.
fn tshark_fields(pcap: &Path, fields: &[String]) -> Vec<BTreeMap<String, String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap).args([
        "-T",
        "fields",
        "-E",
        "header=n",
        "-E",
        "separator=/t",
        "-E",
        "occurrence=a",
        "-E",
        "aggregator=,",
    ]);
    for field in fields {
        cmd.args(["-e", field]);
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('\t').collect();
            assert_eq!(values.len(), fields.len(), "unexpected line {line:?}");
            fields
                .iter()
                .cloned()
                .zip(values.into_iter().map(str::to_owned))
                .collect()
        })
        .collect()
}

fn field_list() -> Vec<String> {
    let mut fields: Vec<String> = [
        "frame.protocols",
        "eth.dst",
        "eth.src",
        "eth.type",
        "lldp.chassis.subtype",
        "lldp.chassis.id.mac",
        "lldp.port.subtype",
        "lldp.port.id",
        "lldp.time_to_live",
        "lldp.port.desc",
        "lldp.tlv.system.name",
        "lldp.tlv.system.desc",
        "lldp.tlv.system_cap",
        "lldp.tlv.enable_system_cap",
        "lldp.tlv.system_cap.bridge",
        "lldp.mgn.address.subtype",
        "lldp.mgn.addr.ip4",
        "lldp.mgn.interface.subtype",
        "lldp.mgn.interface.number",
        "lldp.orgtlv.oui",
        "lldp.ieee.802_1.subtype",
        "lldp.dcbx.ieee.willing",
        "lldp.dcbx.ieee.ets.cbs",
        "lldp.dcbx.ieee.ets.maxtcs",
        "lldp.dcbx.ieee.pfc.mbc",
        "lldp.dcbx.ieee.pfc.numtcs",
        "lldp.dcbx.ieee.app.prio",
        "lldp.dcbx.iee.app.sf",
        "lldp.dcbx.feature.app.proto",
        "_ws.expert.severity",
        "_ws.expert.message",
        "_ws.malformed",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for i in 0..8 {
        fields.push(format!("lldp.dcbx.feature.pg.pgid_prio{i}"));
        fields.push(format!("lldp.dcbx.feature.pg.per{i}"));
        fields.push(format!("lldp.dcbx.ieee.ets.tsa{i}"));
        fields.push(format!("lldp.dcbx.feature.pfc.prio{i}"));
    }
    fields
}

struct Decoded {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

impl Decoded {
    #[track_caller]
    fn expect(&self, field: &str, want: &str) {
        let got = self
            .fields
            .get(field)
            .unwrap_or_else(|| panic!("{field} not requested"));
        assert_eq!(
            got, want,
            "frame '{}', field {field}; whole decode: {:#?}",
            self.name, self.fields
        );
    }

    fn clean(&self) -> bool {
        self.fields["_ws.malformed"].is_empty() && self.fields["_ws.expert.severity"].is_empty()
    }
}

fn decode(pcap: &Path, names: &[&'static str]) -> Vec<Decoded> {
    let rows = tshark_fields(pcap, &field_list());
    assert_eq!(rows.len(), names.len());
    rows.into_iter()
        .zip(names)
        .map(|(fields, &name)| Decoded { name, fields })
        .collect()
}

fn config(text: &str) -> headroom_config::Config {
    match headroom_config::parse(text, "t.toml") {
        Ok((config, _)) => config,
        Err(errors) => panic!("{errors}"),
    }
}

const CONFIG: &str = "[switch]\nname = \"leaf1\"\nmac = \"02:aa:00:00:00:00\"\n\
    [scheduler.sp]\ntype = \"STRICT\"\n\
    [port.Ethernet0]\ndevice = \"sw-p0\"\nspeed = \"10G\"\n\
    [port.Ethernet0.queue.\"6\"]\nscheduler = \"sp\"\n\
    [port.Ethernet4]\ndevice = \"sw-p1\"\nspeed = \"10G\"\ntrust = \"dot1p\"\npfc_enable = [3]\n\
    [lldp]\nsystem_description = \"headroom test switch\"\n";

fn joined<T: ToString>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// What tshark must show for the DCBX TLVs of `dcbx` (ETS Configuration, ETS Recommendation,
/// PFC, APP; the ETS tables appear twice, once per ETS TLV).
fn expect_dcbx(f: &Decoded, dcbx: &LocalDcbx) {
    f.expect("lldp.orgtlv.oui", "32962,32962,32962,32962");
    f.expect("lldp.ieee.802_1.subtype", "0x09,0x0a,0x0b,0x0c");
    // Willing: one per ETS Configuration and PFC TLV.
    f.expect("lldp.dcbx.ieee.willing", "0,0");
    f.expect("lldp.dcbx.ieee.ets.cbs", "0");
    f.expect("lldp.dcbx.ieee.ets.maxtcs", "0"); // 8 is sent as 0
    let t = &dcbx.ets.tables;
    for i in 0..8 {
        let twice = |v: String| format!("{v},{v}");
        f.expect(
            &format!("lldp.dcbx.feature.pg.pgid_prio{i}"),
            &twice(t.priority_tc[i].to_string()),
        );
        f.expect(
            &format!("lldp.dcbx.feature.pg.per{i}"),
            &twice(t.tc_bandwidth_percent[i].to_string()),
        );
        f.expect(
            &format!("lldp.dcbx.ieee.ets.tsa{i}"),
            &twice(u8::from(t.tsa[i]).to_string()),
        );
        let on = dcbx.pfc.enable & (1 << i) != 0;
        f.expect(
            &format!("lldp.dcbx.feature.pfc.prio{i}"),
            if on { "1" } else { "0" },
        );
    }
    f.expect("lldp.dcbx.ieee.pfc.mbc", "0");
    f.expect("lldp.dcbx.ieee.pfc.numtcs", "8");
    f.expect(
        "lldp.dcbx.ieee.app.prio",
        &joined(dcbx.app.iter().map(|e| e.priority)),
    );
    f.expect(
        "lldp.dcbx.iee.app.sf",
        &joined(dcbx.app.iter().map(|e| u8::from(e.selector))),
    );
    f.expect(
        "lldp.dcbx.feature.app.proto",
        &joined(dcbx.app.iter().map(|e| format!("0x{:04x}", e.protocol))),
    );
}

#[test]
fn tshark_decodes_every_tlv_the_agent_sends() {
    require_tshark();
    let config = config(CONFIG);
    let (system, ports) = local_view(&config);
    // The configuration exercises what we claim to derive: strict and ETS classes, DSCP and
    // dot1p trust, one and two lossless priorities.
    assert_eq!(ports[0].dcbx.ets.tables.tsa[6], Tsa::Strict);
    assert_eq!(ports[0].dcbx.ets.tables.tsa[5], Tsa::Ets);
    assert_eq!(ports[0].dcbx.app.len(), 3);
    assert!(ports[0].dcbx.app[1..]
        .iter()
        .all(|e| e.selector == AppSelector::Dscp));
    assert_eq!(ports[1].dcbx.app.len(), 1);
    let p0 = build_frame(&system, &ports[0], system.ttl_s).unwrap();
    let p1 = build_frame(&system, &ports[1], system.ttl_s).unwrap();
    let shutdown = build_frame(&system, &ports[0], 0).unwrap();
    // Wire-level TLVs the agent does not send today: a Management Address and an unknown OUI.
    // The System Description makes the frame longer than 60 bytes: tshark 4.0.17 puts a Note
    // ("Didn't find padding of zeros, and an undecoded trailer exists") on *every* padded LLDP
    // frame whose last TLV ends in a non-zero byte, lldpad's own included (it counts that byte as
    // trailer: routing-fabric-dcbx.md §7.5). The agent's frames are never padded (the DCBX TLVs
    // make them longer) except shutdown LLDPDUs, whose last byte is the zero TTL.
    let mac = MacAddress([0x02, 0xaa, 0, 0, 0, 0]);
    let extra = [
        TlvRepr::SystemDescription(b"a frame over the minimum size"),
        TlvRepr::ManagementAddress(ManagementAddress {
            address_subtype: 1,
            address: &[192, 0, 2, 7],
            interface_subtype: 2,
            interface_number: 5,
            oid: &[],
        }),
        TlvRepr::OrganizationallySpecific {
            oui: [0x00, 0x12, 0x0F],
            subtype: 1,
            info: &[0x03, 0x6C, 0x00, 0x00, 0x10],
        },
    ];
    let lldpdu = LldpduRepr {
        chassis_id: ChassisId::mac(&mac),
        port_id: PortId {
            subtype: PortIdSubtype::LocallyAssigned,
            id: b"7",
        },
        ttl_s: 120,
        optional: Tlvs::Decoded(&extra),
    };
    let mut mgmt = vec![0u8; lldpdu.frame_len()];
    lldpdu
        .emit_frame(
            MacAddress([0x02, 0xaa, 0, 0, 0, 1]),
            NEAREST_BRIDGE,
            &mut mgmt,
        )
        .unwrap();

    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("lldp.pcap");
    write_pcap(&pcap, &[p0.clone(), p1, shutdown, mgmt]);
    let decoded = decode(
        &pcap,
        &["Ethernet0", "Ethernet4", "shutdown", "management address"],
    );

    let f = &decoded[0];
    f.expect("frame.protocols", "eth:ethertype:lldp");
    f.expect("eth.dst", "01:80:c2:00:00:0e");
    f.expect("eth.src", "02:aa:00:00:00:01");
    f.expect("eth.type", "0x88cc");
    f.expect("lldp.chassis.subtype", "4");
    f.expect("lldp.chassis.id.mac", "02:aa:00:00:00:00");
    f.expect("lldp.port.subtype", "5");
    f.expect("lldp.port.id", "Ethernet0");
    f.expect("lldp.time_to_live", "120");
    f.expect("lldp.port.desc", "sw-p0");
    f.expect("lldp.tlv.system.name", "leaf1");
    f.expect("lldp.tlv.system.desc", "headroom test switch");
    f.expect("lldp.tlv.system_cap", "0x0004");
    f.expect("lldp.tlv.enable_system_cap", "0x0004");
    f.expect("lldp.tlv.system_cap.bridge", "1");
    expect_dcbx(f, &ports[0].dcbx);
    // Spot checks against the configuration itself, not only the local view: PFC 3 and 4,
    // RoCEv2 (selector 3, port 0x12b7) on 3, TC 6 strict.
    f.expect("lldp.dcbx.feature.pfc.prio3", "1");
    f.expect("lldp.dcbx.feature.pfc.prio4", "1");
    f.expect("lldp.dcbx.ieee.ets.tsa6", "0,0");
    f.expect("lldp.dcbx.iee.app.sf", "3,5,5");
    f.expect("lldp.dcbx.feature.app.proto", "0x12b7,0x0003,0x0004");
    f.expect("lldp.dcbx.ieee.app.prio", "3,3,4");

    let f = &decoded[1];
    f.expect("eth.src", "02:aa:00:00:00:02");
    f.expect("lldp.port.id", "Ethernet4");
    expect_dcbx(f, &ports[1].dcbx);
    f.expect("lldp.dcbx.ieee.app.prio", "3");
    f.expect("lldp.dcbx.iee.app.sf", "3");
    f.expect("lldp.dcbx.feature.app.proto", "0x12b7");

    let f = &decoded[2];
    f.expect("lldp.time_to_live", "0");
    f.expect("lldp.port.id", "Ethernet0");
    f.expect("lldp.ieee.802_1.subtype", "");

    let f = &decoded[3];
    f.expect("lldp.port.subtype", "7");
    f.expect("lldp.port.id", "7");
    f.expect("lldp.mgn.address.subtype", "1");
    f.expect("lldp.mgn.addr.ip4", "192.0.2.7");
    f.expect("lldp.mgn.interface.subtype", "2");
    f.expect("lldp.mgn.interface.number", "5");
    f.expect("lldp.orgtlv.oui", "4623");

    for f in &decoded {
        assert!(f.clean(), "frame '{}' not clean: {:#?}", f.name, f.fields);
    }
    // And what tshark decoded is what our own parser reads back.
    let ours = parse_lldp_frame(&p0).unwrap();
    assert_eq!(ours.lldpdu.port_id.id, b"Ethernet0");
}

/// Negative control: TLVs of the wrong length are flagged by the same tshark invocation (so the
/// cleanliness check above cannot pass vacuously), and our parser discards the same TLVs.
#[test]
fn tshark_and_our_parser_flag_broken_tlvs() {
    require_tshark();
    let config = config(CONFIG);
    let (system, ports) = local_view(&config);
    let good = build_frame(&system, &ports[1], system.ttl_s).unwrap();
    let find = |frame: &[u8], subtype: u8| {
        frame
            .windows(6)
            .position(|w| w[0] == 0xFE && w[2..5] == [0x00, 0x80, 0xC2] && w[5] == subtype)
            .unwrap()
    };
    // PFC TLV length 6 → 5 (the enable byte becomes the next TLV's first byte).
    let mut short_pfc = good.clone();
    let at = find(&short_pfc, 0x0b);
    short_pfc[at + 1] = 5;
    short_pfc.remove(at + 7);
    short_pfc.push(0);
    // ETS Configuration TLV length 25 → 24.
    let mut short_ets = good.clone();
    let at = find(&short_ets, 0x09);
    short_ets[at + 1] = 24;
    short_ets.remove(at + 26);
    short_ets.push(0);

    for (frame, subtype) in [(&short_pfc, 11u8), (&short_ets, 9)] {
        let parsed = parse_lldp_frame(frame).expect("the LLDPDU itself is valid");
        let discarded: Vec<_> = parsed
            .lldpdu
            .optional
            .iter()
            .filter_map(Result::err)
            .collect();
        assert_eq!(discarded.len(), 1, "{discarded:?}");
        assert_eq!(discarded[0].org, Some(([0x00, 0x80, 0xC2], subtype)));
    }

    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("broken.pcap");
    write_pcap(&pcap, &[good, short_pfc, short_ets]);
    let decoded = decode(&pcap, &["good", "short PFC", "short ETS"]);
    assert!(decoded[0].clean(), "{:#?}", decoded[0].fields);
    for f in &decoded[1..] {
        assert!(
            !f.clean(),
            "tshark did not flag '{}': {:#?}",
            f.name,
            f.fields
        );
        assert_ne!(f.fields["_ws.malformed"], "", "{:#?}", f.fields);
    }
}
