//! Conformance of our frames with Wireshark's dissectors: the frames headroom-wire emits are written
//! to a pcap file and decoded with `tshark`; every field the switch relies on must decode to the value
//! we meant, with no expert warning/error and no malformed packet (dcqcn-roce.md §4.5, §5.2).
//!
//! tshark is a hard requirement: if it is missing the test fails and says how to install it.

use std::collections::BTreeMap;
use std::fs::File;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use headroom_wire::ethernet::MacAddress;
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::ipv6::Ipv6Packet;
use headroom_wire::mac_control::{MacControlRepr, PauseRepr, PfcRepr, FRAME_LEN};
use headroom_wire::roce::{
    compute_icrc, parse_rocev2, verify_icrc_frame, BthRepr, ExtRepr, Opcode, RethRepr, RoceIpRepr,
    RoceV2PacketRepr, DEFAULT_PKEY,
};
use headroom_wire::vlan::{insert_vlan_tag, VlanTci, TAG_LEN};
use headroom_wire::{CeMark, Ecn};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::DataLink;

const SWITCH_MAC: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
const HOST_A: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0a]);
const HOST_B: MacAddress = MacAddress([0x02, 0x00, 0x00, 0x00, 0x00, 0x0b]);

fn pfc_frame(repr: PfcRepr) -> Vec<u8> {
    let mut buf = vec![0u8; FRAME_LEN];
    MacControlRepr::Pfc(repr)
        .emit_frame(SWITCH_MAC, &mut buf)
        .unwrap();
    buf
}

fn pause_frame(pause_quanta: u16) -> Vec<u8> {
    let mut buf = vec![0u8; FRAME_LEN];
    MacControlRepr::Pause(PauseRepr { pause_quanta })
        .emit_frame(SWITCH_MAC, &mut buf)
        .unwrap();
    buf
}

fn write_only_bth(dest_qp: u32, psn: u32) -> BthRepr {
    BthRepr {
        opcode: Opcode::RdmaWriteOnly,
        solicited_event: false,
        mig_req: false,
        pad_count: 0,
        tver: 0,
        pkey: DEFAULT_PKEY,
        fecn: false,
        becn: false,
        dest_qp,
        ack_req: true,
        psn,
    }
}

fn ipv4_repr(dscp: u8, ecn: Ecn) -> RoceIpRepr {
    RoceIpRepr::V4 {
        src_addr: Ipv4Addr::new(10, 0, 0, 1),
        dst_addr: Ipv4Addr::new(10, 0, 0, 2),
        dscp,
        ecn,
        hop_limit: 64,
        ident: 0x1234,
        dont_frag: true,
    }
}

fn ipv6_repr(dscp: u8, ecn: Ecn) -> RoceIpRepr {
    RoceIpRepr::V6 {
        src_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1),
        dst_addr: Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2),
        dscp,
        ecn,
        flow_label: 0x12345,
        hop_limit: 64,
    }
}

/// An RC RDMA WRITE ONLY with a RETH, emitted ECT(0) and then CE-marked in place the way the switch
/// does it (IPv4: TOS + incremental checksum update; IPv6: traffic class bits only).
fn ce_marked_write_only(
    ip: RoceIpRepr,
    udp_checksum: bool,
    dest_qp: u32,
    psn: u32,
    payload: &[u8],
) -> Vec<u8> {
    let repr = RoceV2PacketRepr {
        dst_addr: HOST_B,
        src_addr: HOST_A,
        vlan: None,
        ip,
        udp_src_port: 0xC0DE,
        udp_checksum,
        bth: write_only_bth(dest_qp, psn),
        ext: ExtRepr {
            reth: Some(RethRepr {
                virtual_addr: 0x0000_7f00_0000_1000,
                rkey: 0x0000_2a2a,
                dma_len: payload.len() as u32,
            }),
            ..ExtRepr::default()
        },
        payload,
    };
    let mut frame = vec![0u8; repr.buffer_len()];
    repr.emit(&mut frame).unwrap();
    let ip_offset = parse_rocev2(&frame).unwrap().ip_offset;
    let outcome = match ip {
        RoceIpRepr::V4 { .. } => Ipv4Packet::new_checked(&mut frame[ip_offset..])
            .unwrap()
            .mark_ce(),
        RoceIpRepr::V6 { .. } => Ipv6Packet::new_checked(&mut frame[ip_offset..])
            .unwrap()
            .mark_ce(),
    };
    assert_eq!(outcome, CeMark::Marked);
    assert_eq!(
        verify_icrc_frame(&frame),
        Ok(()),
        "CE marking must not break the ICRC"
    );
    frame
}

fn cnp_frame(dest_qp: u32) -> Vec<u8> {
    let repr = RoceV2PacketRepr::cnp(HOST_A, HOST_B, ipv4_repr(48, Ecn::Ect0), 0, dest_qp);
    let mut frame = vec![0u8; repr.buffer_len()];
    repr.emit(&mut frame).unwrap();
    frame
}

/// A WRITE ONLY built untagged, then tagged in place with PCP 3 by `insert_vlan_tag` (the switch's
/// egress path for a tagged port).
fn vlan_tagged_write_only(payload: &[u8]) -> Vec<u8> {
    let repr = RoceV2PacketRepr {
        dst_addr: HOST_B,
        src_addr: HOST_A,
        vlan: None,
        ip: ipv4_repr(26, Ecn::Ect0),
        udp_src_port: 0xC001,
        udp_checksum: false,
        bth: write_only_bth(0x33, 7),
        ext: ExtRepr {
            reth: Some(RethRepr {
                virtual_addr: 0x2000,
                rkey: 0x77,
                dma_len: payload.len() as u32,
            }),
            ..ExtRepr::default()
        },
        payload,
    };
    let mut buf = vec![0u8; TAG_LEN + repr.buffer_len()];
    repr.emit(&mut buf[TAG_LEN..]).unwrap();
    insert_vlan_tag(&mut buf, VlanTci::new(3, false, 100)).unwrap();
    assert_eq!(verify_icrc_frame(&buf), Ok(()));
    buf
}

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

/// Runs tshark over `pcap` and returns, per frame, the value of each requested field (all occurrences
/// joined with ',' ; empty when absent).
fn tshark_fields(pcap: &Path, fields: &[&str]) -> Vec<BTreeMap<String, String>> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(pcap);
    // Validate the checksums we claim to get right (both are off by default in Wireshark).
    cmd.args([
        "-o",
        "ip.check_checksum:TRUE",
        "-o",
        "udp.check_checksum:TRUE",
    ]);
    cmd.args([
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
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout
        .lines()
        .map(|line| {
            let values: Vec<&str> = line.split('\t').collect();
            assert_eq!(
                values.len(),
                fields.len(),
                "unexpected tshark line: {line:?}"
            );
            fields
                .iter()
                .zip(values)
                .map(|(f, v)| (f.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

/// tshark's expert severities (`epan/proto.h`: PI_CHAT 0x00200000, PI_NOTE 0x00400000, PI_WARN
/// 0x00600000, PI_ERROR 0x00800000), as printed by `-e _ws.expert.severity`.
const PI_NOTE: u32 = 0x0040_0000;
const PI_WARN: u32 = 0x0060_0000;
const PI_ERROR: u32 = 0x0080_0000;

const FIELDS: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "eth.dst",
    "eth.type",
    "macc.opcode",
    "macc.cbfc.enbv",
    "macc.cbfc.enbv.c0",
    "macc.cbfc.enbv.c3",
    "macc.cbfc.enbv.c4",
    "macc.cbfc.pause_time.c3",
    "macc.cbfc.pause_time.c4",
    "macc.pause_time",
    "vlan.priority",
    "vlan.id",
    "vlan.etype",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ip.checksum.status",
    "ipv6.tclass",
    "ipv6.tclass.dscp",
    "ipv6.tclass.ecn",
    "udp.dstport",
    "udp.checksum.status",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.bth.padcnt",
    "infiniband.reserved",
    "infiniband.reth.dmalen",
    "infiniband.invariant.crc",
    "_ws.expert.severity",
    "_ws.expert.message",
    "_ws.malformed",
];

/// One decoded frame: field name -> value as tshark prints it.
struct Decoded {
    name: &'static str,
    fields: BTreeMap<String, String>,
}

impl Decoded {
    fn get(&self, field: &str) -> &str {
        self.fields
            .get(field)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("field {field} not requested"))
    }

    #[track_caller]
    fn expect(&self, field: &str, want: &str) {
        assert_eq!(
            self.get(field),
            want,
            "frame '{}', field {field}; whole decode: {:#?}",
            self.name,
            self.fields
        );
    }

    fn severities(&self) -> Vec<u32> {
        let raw = self.get("_ws.expert.severity");
        raw.split(',')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().expect("numeric severity"))
            .collect()
    }
}

/// The ICRC as tshark shows it: the 4 trailer bytes read big-endian (we store the CRC least
/// significant byte first, so that is our value byte-swapped).
fn shown_icrc(frame: &[u8]) -> String {
    let headers = parse_rocev2(frame).unwrap();
    let icrc = compute_icrc(&frame[headers.ip_offset..]).unwrap();
    format!("0x{:08x}", icrc.swap_bytes())
}

fn decode(pcap: &Path, names: &[&'static str]) -> Vec<Decoded> {
    let rows = tshark_fields(pcap, FIELDS);
    assert_eq!(
        rows.len(),
        names.len(),
        "tshark decoded {} frames, we wrote {}",
        rows.len(),
        names.len()
    );
    rows.into_iter()
        .zip(names)
        .map(|(fields, &name)| Decoded { name, fields })
        .collect()
}

/// What we tolerate from tshark on our own frames: nothing, except on the CNP, where Wireshark 4.0
/// does not know opcode 0x81 (dcqcn-roce.md §4.5). There, and only there, expert items of at most
/// Note severity whose message says the opcode is unknown are accepted. (4.0.17 emits none: it shows
/// "Unknown (129)" without an expert item; a later version might add a note.)
fn expert_problem(frame: &Decoded, is_cnp: bool) -> Option<String> {
    if !frame.get("_ws.malformed").is_empty() {
        return Some(format!(
            "frame '{}' is malformed: {:#?}",
            frame.name, frame.fields
        ));
    }
    let severities = frame.severities();
    if severities.is_empty() {
        return None;
    }
    let messages = frame.get("_ws.expert.message");
    let tolerated = is_cnp
        && severities.iter().all(|&s| s <= PI_NOTE)
        && messages
            .split(',')
            .all(|m| m.to_ascii_lowercase().contains("unknown opcode"));
    (!tolerated).then(|| {
        format!(
            "frame '{}' has expert info: severities {severities:?}, messages {messages:?}",
            frame.name
        )
    })
}

#[track_caller]
fn assert_clean(frame: &Decoded, is_cnp: bool) {
    if let Some(problem) = expert_problem(frame, is_cnp) {
        panic!("{problem}");
    }
}

#[test]
fn cnp_tolerance_is_narrow() {
    let frame = |severity: u32, message: &str| Decoded {
        name: "synthetic",
        fields: [
            ("_ws.malformed", ""),
            ("_ws.expert.severity", &*severity.to_string()),
            ("_ws.expert.message", message),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect(),
    };
    assert_eq!(
        expert_problem(&frame(PI_NOTE, "Unknown OpCode"), true),
        None
    );
    assert!(
        expert_problem(&frame(PI_NOTE, "Unknown OpCode"), false).is_some(),
        "only on the CNP"
    );
    assert!(
        expert_problem(&frame(PI_WARN, "Unknown OpCode"), true).is_some(),
        "at most a note"
    );
    assert!(
        expert_problem(&frame(PI_NOTE, "Bad checksum"), true).is_some(),
        "only that message"
    );
}

#[test]
fn tshark_decodes_our_frames_cleanly() {
    require_tshark();
    let payload: Vec<u8> = (0..64u8).collect();
    let mut xoff = PfcRepr::xoff(1 << 3, 0xFFFF);
    xoff.set_priority(4, 0x1234);
    let frames: Vec<(&'static str, Vec<u8>)> = vec![
        ("PFC XOFF p3=0xFFFF p4=0x1234", pfc_frame(xoff)),
        ("PFC XON p3", pfc_frame(PfcRepr::xon(1 << 3))),
        ("802.3x PAUSE 0xFFFF", pause_frame(0xFFFF)),
        (
            "IPv4 WRITE ONLY, CE",
            ce_marked_write_only(ipv4_repr(26, Ecn::Ect0), false, 0x11, 5, &payload),
        ),
        (
            "IPv6 WRITE ONLY, CE",
            ce_marked_write_only(ipv6_repr(26, Ecn::Ect0), true, 0x12, 6, &payload),
        ),
        ("CNP", cnp_frame(0x22)),
        ("VLAN PCP 3 WRITE ONLY", vlan_tagged_write_only(&payload)),
    ];
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("headroom-conformance.pcap");
    let bytes: Vec<Vec<u8>> = frames.iter().map(|(_, f)| f.clone()).collect();
    write_pcap(&pcap, &bytes);
    let names: Vec<&'static str> = frames.iter().map(|(n, _)| *n).collect();
    let decoded = decode(&pcap, &names);

    // 1. PFC XOFF for priorities 3 and 4 with different times (802.1Qbb, dcqcn-roce.md §5.2).
    let f = &decoded[0];
    f.expect("frame.protocols", "eth:ethertype:macc");
    f.expect("eth.dst", "01:80:c2:00:00:01");
    f.expect("eth.type", "0x8808");
    f.expect("macc.opcode", "0x0101");
    f.expect("macc.cbfc.enbv", "0x0018");
    f.expect("macc.cbfc.enbv.c0", "0");
    f.expect("macc.cbfc.enbv.c3", "1");
    f.expect("macc.cbfc.enbv.c4", "1");
    f.expect("macc.cbfc.pause_time.c3", "65535");
    f.expect("macc.cbfc.pause_time.c4", "4660");

    // 2. PFC XON for priority 3: enabled with time 0.
    let f = &decoded[1];
    f.expect("macc.opcode", "0x0101");
    f.expect("macc.cbfc.enbv", "0x0008");
    f.expect("macc.cbfc.enbv.c3", "1");
    f.expect("macc.cbfc.enbv.c4", "0");
    f.expect("macc.cbfc.pause_time.c3", "0");

    // 3. 802.3x PAUSE.
    let f = &decoded[2];
    f.expect("eth.dst", "01:80:c2:00:00:01");
    f.expect("macc.opcode", "0x0001");
    f.expect("macc.pause_time", "65535");

    // 4. IPv4 RoCEv2 WRITE ONLY, CE marked in place: checksum still good, ICRC trailer where tshark
    //    expects it.
    let f = &decoded[3];
    f.expect("frame.protocols", "eth:ethertype:ip:udp:infiniband:data");
    f.expect("ip.dsfield.dscp", "26");
    f.expect("ip.dsfield.ecn", "3");
    f.expect("ip.checksum.status", "1");
    f.expect("udp.dstport", "4791");
    f.expect("udp.checksum.status", "3"); // "not present": RoCEv2 sends 0 over IPv4
    f.expect("infiniband.bth.opcode", "10");
    f.expect("infiniband.bth.destqp", "0x000011");
    f.expect("infiniband.bth.psn", "5");
    f.expect("infiniband.bth.a", "1");
    f.expect("infiniband.bth.padcnt", "0");
    f.expect("infiniband.reth.dmalen", "64");
    f.expect("infiniband.invariant.crc", &shown_icrc(&frames[3].1));

    // 5. IPv6 RoCEv2 WRITE ONLY, CE marked: traffic class 0x6b = DSCP 26 + CE; UDP checksum computed.
    let f = &decoded[4];
    f.expect("frame.protocols", "eth:ethertype:ipv6:udp:infiniband:data");
    f.expect("ipv6.tclass", "0x0000006b");
    f.expect("ipv6.tclass.dscp", "26");
    f.expect("ipv6.tclass.ecn", "3");
    f.expect("udp.dstport", "4791");
    f.expect("udp.checksum.status", "1");
    f.expect("infiniband.bth.opcode", "10");
    f.expect("infiniband.bth.destqp", "0x000012");
    f.expect("infiniband.bth.psn", "6");
    f.expect("infiniband.reth.dmalen", "64");
    f.expect("infiniband.invariant.crc", &shown_icrc(&frames[4].1));

    // 6. CNP: opcode 129 (unknown to Wireshark 4.0), BECN in the reserved byte, DSCP 48.
    let f = &decoded[5];
    f.expect("frame.protocols", "eth:ethertype:ip:udp:infiniband");
    f.expect("ip.dsfield.dscp", "48");
    f.expect("ip.checksum.status", "1");
    f.expect("udp.dstport", "4791");
    f.expect("infiniband.bth.opcode", "129");
    f.expect("infiniband.bth.destqp", "0x000022");
    f.expect("infiniband.bth.psn", "0");
    f.expect("infiniband.reserved", "40");

    // 7. VLAN-tagged (inserted in place) WRITE ONLY with PCP 3.
    let f = &decoded[6];
    f.expect(
        "frame.protocols",
        "eth:ethertype:vlan:ethertype:ip:udp:infiniband:data",
    );
    f.expect("eth.type", "0x8100");
    f.expect("vlan.priority", "3");
    f.expect("vlan.id", "100");
    f.expect("vlan.etype", "0x0800");
    f.expect("ip.checksum.status", "1");
    f.expect("udp.dstport", "4791");
    f.expect("infiniband.bth.opcode", "10");
    f.expect("infiniband.bth.destqp", "0x000033");
    f.expect("infiniband.bth.psn", "7");
    f.expect("infiniband.reth.dmalen", "64");
    f.expect("infiniband.invariant.crc", &shown_icrc(&frames[6].1));

    for frame in &decoded {
        assert_clean(frame, frame.name == "CNP");
    }
}

/// Negative control: the same tshark invocation does report broken frames, so the cleanliness checks
/// above cannot pass vacuously.
#[test]
fn tshark_reports_broken_frames() {
    require_tshark();
    let payload: Vec<u8> = (0..64u8).collect();
    let mut bad_enbv = pfc_frame(PfcRepr::xoff(1 << 3, 0xFFFF));
    bad_enbv[16] = 0x01; // reserved high octet of the class-enable vector
    let mut bad_dst = pfc_frame(PfcRepr::xoff(1 << 3, 0xFFFF));
    bad_dst[5] = 0x02;
    let mut bad_ip_checksum =
        ce_marked_write_only(ipv4_repr(26, Ecn::Ect0), false, 0x11, 5, &payload);
    bad_ip_checksum[14 + 10] ^= 0x01;
    let mut truncated = ce_marked_write_only(ipv4_repr(26, Ecn::Ect0), false, 0x11, 5, &payload);
    truncated.truncate(60);
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("broken.pcap");
    write_pcap(&pcap, &[bad_enbv, bad_dst, bad_ip_checksum, truncated]);
    let decoded = decode(
        &pcap,
        &[
            "bad ENBV",
            "bad destination",
            "bad IP checksum",
            "truncated",
        ],
    );

    let f = &decoded[0];
    assert_eq!(f.severities(), vec![PI_WARN], "{:#?}", f.fields);
    f.expect("_ws.expert.message", "8 MSbs of ENBV must be 0");
    let f = &decoded[1];
    assert_eq!(f.severities(), vec![PI_WARN], "{:#?}", f.fields);
    f.expect(
        "_ws.expert.message",
        "Destination address must be 01-80-C2-00-00-01",
    );
    let f = &decoded[2];
    f.expect("ip.checksum.status", "0");
    assert!(f.severities().contains(&PI_ERROR), "{:#?}", f.fields);
    let f = &decoded[3];
    assert_ne!(f.get("_ws.malformed"), "", "{:#?}", f.fields);
    assert!(f.severities().contains(&PI_ERROR), "{:#?}", f.fields);

    for frame in &decoded {
        let result = std::panic::catch_unwind(|| assert_clean(frame, false));
        assert!(
            result.is_err(),
            "assert_clean accepted broken frame '{}'",
            frame.name
        );
    }
}
