//! The LLDP/DCBX agent driven by the control plane, end to end on in-memory ports: LLDPDUs
//! leave every port whose LLDP transmits (through the dataplane's inject path) and none leaves
//! a disabled one; a peer's LLDPDU (punted by the core) makes a neighbour that `show
//! lldp_neighbors` lists and that its TTL ages out; a peer whose PFC disagrees gets a mismatch
//! verdict in `show dcbx`, logged once; malformed LLDP frames are counted and change nothing
//! else; a shutdown sends TTL-0 LLDPDUs. Bounded real time: the peers announce TTLs of 1-2 s.

mod control_harness;

use control_harness::{udp_frame, Switch, A, DEADLINE};
use headroom_lldp::{build_frame, LocalPort, LocalSystem};
use headroom_runtime::protocol::{DcbxRow, LldpView, Show};
use headroom_wire::lldp::parse_lldp_frame;
use headroom_wire::lldp::{DcbxTlv, TlvRepr};
use std::time::{Duration, Instant};

const SWITCH_MAC: [u8; 6] = [0x02, 0x68, 0x72, 0, 0, 0];
const PEER_MAC: [u8; 6] = [0x02, 0x11, 0x22, 0x33, 0x44, 0x55];

/// Three ports: two that run LLDP (the default), one with it disabled.
fn config() -> String {
    "[switch]\nname = \"lldptest\"\ndriver = \"memory\"\nmac = \"02:68:72:00:00:00\"\n\n\
     [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
     [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
     [port.Ethernet8]\ndevice = \"m2\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\
     lldp_admin_status = \"disabled\"\n\n\
     [lldp]\nenabled = true\n"
        .to_owned()
}

fn is_lldp(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == [0x88, 0xcc]
}

/// A host's LLDPDU: PFC on `pfc` (bitmap), `willing`, RoCEv2 on `roce`, TTL `ttl_s`.
fn peer_lldpdu(pfc: u8, willing: bool, roce: u8, ttl_s: u16) -> Vec<u8> {
    let config = headroom_config::parse(&config(), "peer.toml").unwrap().0;
    let system = LocalSystem {
        chassis_mac: PEER_MAC,
        system_name: "host0".into(),
        system_description: "a test host".into(),
        capabilities: headroom_wire::lldp::capability::STATION,
        enabled_capabilities: headroom_wire::lldp::capability::STATION,
        tx_interval_s: 1,
        ttl_s,
        tx_fast_init: 0,
        tx_fast_interval_s: 1,
    };
    let mut port = LocalPort::from_config(&config, &config.ports[0]);
    port.name = "eth0".into();
    port.mac = PEER_MAC;
    port.dcbx.pfc.enable = pfc;
    port.dcbx.pfc.willing = willing;
    port.dcbx.app = vec![headroom_wire::lldp::dcbx::AppEntry::rocev2(roce)];
    build_frame(&system, &port, ttl_s).unwrap()
}

/// Runs the loop until port `port` has sent `want` LLDPDUs (other frames are dropped).
fn lldpdus(sw: &mut Switch, port: usize, want: usize) -> Vec<Vec<u8>> {
    let mut got = Vec::new();
    sw.wait_for("LLDPDUs", |sw| {
        got.extend(sw.drain(port).into_iter().filter(|f| is_lldp(f)));
        got.len() >= want
    });
    got
}

fn neighbors(sw: &mut Switch) -> LldpView {
    sw.show(Show::LldpNeighbors)
}

fn dcbx(sw: &mut Switch, port: &str) -> DcbxRow {
    let rows: Vec<DcbxRow> = sw.show(Show::Dcbx);
    rows.into_iter().find(|r| r.port == port).expect("port row")
}

#[test]
fn every_port_that_transmits_sends_its_lldpdu_and_a_disabled_port_sends_none() {
    // The first at once, the next fast one 1 s later (tx_fast_init 4, tx_fast_interval_s 1).
    let started = Instant::now();
    let mut sw = Switch::start(&config());
    for (port, name) in [(0, "Ethernet0"), (1, "Ethernet4")] {
        let frames = lldpdus(&mut sw, port, 1);
        let parsed = parse_lldp_frame(&frames[0]).expect("our LLDPDU parses");
        assert_eq!(parsed.lldpdu.chassis_id.id, SWITCH_MAC);
        assert_eq!(parsed.lldpdu.port_id.id, name.as_bytes());
        assert_eq!(parsed.lldpdu.ttl_s, 120);
        let pfc = parsed.lldpdu.optional.iter().find_map(|t| match t {
            Ok(TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(p))) => Some(p),
            _ => None,
        });
        let pfc = pfc.expect("a PFC Configuration TLV");
        assert_eq!(pfc.enable, 0b0001_1000, "pfc_enable 3,4");
        assert!(!pfc.willing);
    }
    let second = lldpdus(&mut sw, 0, 1);
    assert_eq!(second.len(), 1);
    assert!(started.elapsed() >= Duration::from_millis(900));
    // Meanwhile, nothing on the disabled port.
    assert!(sw.drain(2).iter().all(|f| !is_lldp(f)));
    let view = neighbors(&mut sw);
    let rows: Vec<_> = view
        .ports
        .iter()
        .map(|p| (p.port.as_str(), p.admin_status.as_str(), p.tx_injected > 0))
        .collect();
    assert_eq!(
        rows,
        [
            ("Ethernet0", "rx_and_tx", true),
            ("Ethernet4", "rx_and_tx", true),
            ("Ethernet8", "disabled", false)
        ]
    );
    // The dataplane sent them through its inject path (counted there too).
    let injected = sw.running().shared().ingress_counters[0].ports[0]
        .inject_frames
        .get();
    assert!(injected >= 2, "{injected}");
    assert_eq!(view.ports[0].tx_inject_refused, 0);
}

#[test]
fn a_peer_lldpdu_makes_a_neighbour_that_its_ttl_ages_out() {
    let mut sw = Switch::start(&config());
    sw.inject(0, &peer_lldpdu(0b0001_1000, true, 3, 2));
    sw.wait_for("the neighbour", |sw| !neighbors(sw).neighbors.is_empty());
    let view = neighbors(&mut sw);
    assert_eq!(view.neighbors.len(), 1, "{view:?}");
    let n = &view.neighbors[0];
    assert_eq!(n.local_port, "Ethernet0");
    assert_eq!(n.chassis_id, "02:11:22:33:44:55");
    assert_eq!(n.port_id, "eth0");
    assert_eq!(n.system_name.as_deref(), Some("host0"));
    assert_eq!(n.capabilities, "S");
    assert_eq!(n.ttl_s, 2);
    assert!(n.dcbx);
    // Same PFC, willing, RoCE on a lossless priority: consistent.
    let row = dcbx(&mut sw, "Ethernet0");
    assert_eq!(row.status, "consistent", "{row:?}");
    assert_eq!(row.peer.unwrap().pfc.unwrap().enable, "3,4");
    // Not relayed to the other ports.
    assert!(sw.drain(1).iter().all(|f| f[6..12] != PEER_MAC));
    // TTL 2 s: gone within 2 s (plus a turn), with a log line saying why.
    let heard = Instant::now();
    sw.wait_for("the neighbour to age out", |sw| {
        neighbors(sw).neighbors.is_empty()
    });
    assert!(heard.elapsed() < DEADLINE);
    let view = neighbors(&mut sw);
    assert_eq!(view.ports[0].ageouts, 1);
    assert_eq!(view.ports[0].inserts, 1);
    let kinds: Vec<_> = view
        .recent_events
        .iter()
        .map(|e| (e.kind.as_str(), e.message.contains("TTL expired")))
        .filter(|(k, _)| k.starts_with("neighbor"))
        .collect();
    assert_eq!(
        kinds,
        [("neighbor_added", false), ("neighbor_removed", true)]
    );
    assert_eq!(dcbx(&mut sw, "Ethernet0").status, "no-neighbour");
}

#[test]
fn a_peer_pausing_other_priorities_is_a_mismatch_logged_once() {
    let mut sw = Switch::start(&config());
    // Unwilling, PFC on 1 and 2, RoCE on 1 (lossy here); sent three times.
    let frame = peer_lldpdu(0b0000_0110, false, 1, 120);
    for _ in 0..3 {
        sw.inject(0, &frame);
    }
    sw.wait_for("three LLDPDUs taken", |sw| {
        neighbors(sw).ports[0].rx_frames >= 3
    });
    let row = dcbx(&mut sw, "Ethernet0");
    assert_eq!(row.status, "mismatch", "{row:?}");
    let codes: Vec<_> = row.findings.iter().map(|f| f.code.as_str()).collect();
    assert_eq!(
        codes,
        [
            "peer_pfc_on_lossy_priorities",
            "peer_pfc_off_lossless_priorities",
            "roce_on_lossy_priority",
            "peer_not_willing"
        ]
    );
    assert_eq!(row.local.pfc.unwrap().enable, "3,4");
    let peer = row.peer.unwrap();
    assert_eq!(peer.pfc.as_ref().unwrap().enable, "1,2");
    assert!(!peer.pfc.unwrap().willing);
    let verdicts: Vec<_> = sw
        .control
        .lldp()
        .recent_events()
        .filter(|e| e.kind == "dcbx_verdict")
        .map(|e| (e.port.clone(), e.warning))
        .collect();
    assert_eq!(verdicts, [("Ethernet0".to_string(), true)]);
    let line = sw
        .control
        .lldp()
        .recent_events()
        .find(|e| e.kind == "dcbx_verdict")
        .unwrap();
    assert!(
        line.message.starts_with(
            "DCBX mismatch on port Ethernet0 (was no-neighbour): peer enables PFC on priority 1,2"
        ),
        "{}",
        line.message
    );
    // The other port has no neighbour.
    assert_eq!(dcbx(&mut sw, "Ethernet4").status, "no-neighbour");
}

#[test]
fn malformed_lldp_frames_are_counted_and_change_nothing_else() {
    let mut sw = Switch::start(&config());
    let good = peer_lldpdu(0b0001_1000, true, 3, 120);
    // Truncated: cut in the middle of the mandatory TLVs.
    // Truncated: a Chassis ID TLV that claims 200 bytes of a 60-byte frame.
    let mut truncated = good[..14].to_vec();
    truncated.resize(60, 0);
    truncated[14] = 0x02; // type 1, length 200
    truncated[15] = 200;
    // A mandatory TLV of a bad length: TTL TLV with length 1.
    let mut bad_length = good.clone();
    // Find the TTL TLV (type 3) by walking the TLVs.
    let mut at = 14;
    loop {
        let t = bad_length[at] >> 1;
        let len = usize::from(u16::from_be_bytes([bad_length[at], bad_length[at + 1]]) & 0x1ff);
        if t == 3 {
            bad_length[at + 1] = 1; // length 1 instead of 2
            break;
        }
        at += 2 + len;
    }
    // Only an Ethernet header.
    let runt = {
        let mut f = good[..14].to_vec();
        f.resize(60, 0);
        f
    };
    for f in [&truncated, &bad_length, &runt] {
        sw.inject(0, f);
    }
    sw.wait_for("three frames received", |sw| {
        neighbors(sw).ports[0].rx_frames >= 3
    });
    let view = neighbors(&mut sw);
    let p = &view.ports[0];
    assert_eq!(p.rx_discarded, 3, "{p:?}");
    assert_eq!(p.rx_errors.values().sum::<u64>(), 3, "{p:?}");
    assert!(view.neighbors.is_empty());
    assert!(view.recent_events.is_empty(), "{:?}", view.recent_events);
    // An unknown organisationally specific TLV (OUI 00-11-22) in a valid LLDPDU: counted as
    // unrecognized, the rest is used.
    let mut unknown_oui = good.clone();
    let pos = {
        // The End TLV is the last 00 00 of the LLDPDU (the frame may be padded after it).
        let mut at = 14;
        loop {
            let t = unknown_oui[at] >> 1;
            let len =
                usize::from(u16::from_be_bytes([unknown_oui[at], unknown_oui[at + 1]]) & 0x1ff);
            if t == 0 {
                break at;
            }
            at += 2 + len;
        }
    };
    let tlv = [0xfe, 0x05, 0x00, 0x11, 0x22, 0x01, 0xaa];
    unknown_oui.splice(pos..pos, tlv);
    sw.inject(0, &unknown_oui);
    sw.wait_for("the neighbour", |sw| !neighbors(sw).neighbors.is_empty());
    let view = neighbors(&mut sw);
    assert_eq!(view.ports[0].rx_tlvs_unrecognized, 1);
    assert_eq!(view.ports[0].rx_discarded, 3);
    assert_eq!(dcbx(&mut sw, "Ethernet0").status, "consistent");
    // The dataplane forwards as before: a frame from A is flooded to the other ports.
    sw.inject(0, &udp_frame(A, [0xff; 6], 0, 0, 64));
    let mut seen = Vec::new();
    sw.wait_for("the flooded frame", |sw| {
        seen.extend(sw.drain(1).into_iter().filter(|f| !is_lldp(f)));
        !seen.is_empty()
    });
    assert_eq!(seen[0][6..12], A);
}

#[test]
fn shutdown_sends_ttl_zero_lldpdus_on_transmitting_ports() {
    let mut sw = Switch::start(&config());
    let _ = lldpdus(&mut sw, 0, 1);
    let _ = lldpdus(&mut sw, 1, 1);
    sw.shutdown_lldp();
    for port in [0, 1] {
        let frames = lldpdus(&mut sw, port, 1);
        let parsed = parse_lldp_frame(&frames[0]).unwrap();
        assert_eq!(parsed.lldpdu.ttl_s, 0);
        assert_eq!(parsed.lldpdu.optional.iter().count(), 0);
    }
    assert!(sw.drain(2).iter().all(|f| !is_lldp(f)));
}

#[test]
fn a_reconfiguration_advertises_at_once_and_keeps_the_neighbours() {
    let mut sw = Switch::start(&config());
    sw.inject(0, &peer_lldpdu(0b0001_1000, true, 3, 120));
    sw.wait_for("the neighbour", |sw| !neighbors(sw).neighbors.is_empty());
    assert_eq!(dcbx(&mut sw, "Ethernet0").status, "consistent");
    let _ = lldpdus(&mut sw, 0, 1);
    let _ = sw.drain(0);
    let response = sw.request(&headroom_runtime::protocol::Request::Set {
        change: headroom_runtime::protocol::Change::Key {
            key: "port.Ethernet0.pfc_enable".into(),
            value: "[3]".into(),
        },
    });
    assert!(response.ok, "{:?}", response.error);
    assert_eq!(sw.restarts, 1);
    // Sent at once (not at the next interval, 30 s away): PFC on 3 only.
    let asked = Instant::now();
    let frames = lldpdus(&mut sw, 0, 1);
    assert!(asked.elapsed() < Duration::from_millis(900));
    let parsed = parse_lldp_frame(&frames[0]).unwrap();
    let pfc = parsed
        .lldpdu
        .optional
        .iter()
        .find_map(|t| match t {
            Ok(TlvRepr::Dcbx(DcbxTlv::PfcConfiguration(p))) => Some(p),
            _ => None,
        })
        .unwrap();
    assert_eq!(pfc.enable, 0b0000_1000);
    // The neighbour stays (the agent outlives the dataplane), judged against the new PFC.
    let view = neighbors(&mut sw);
    assert_eq!(view.neighbors.len(), 1);
    assert_eq!(view.ports[0].inserts, 1);
    let row = dcbx(&mut sw, "Ethernet0");
    assert_eq!(row.status, "mismatch", "{row:?}");
    assert_eq!(row.findings[0].code, "peer_pfc_on_lossy_priorities");
}

#[test]
fn a_link_going_down_forgets_its_neighbours_and_coming_up_sends_at_once() {
    use std::sync::atomic::Ordering;
    let mut sw = Switch::start(&config());
    sw.inject(0, &peer_lldpdu(0b0001_1000, true, 3, 120));
    sw.wait_for("the neighbour", |sw| !neighbors(sw).neighbors.is_empty());
    sw.taps[0].link_up.store(false, Ordering::Relaxed);
    sw.wait_for("the neighbour to go", |sw| {
        neighbors(sw).neighbors.is_empty()
    });
    let view = neighbors(&mut sw);
    assert_eq!(view.ports[0].deletes, 1);
    assert_eq!(view.ports[0].ageouts, 0);
    assert!(view
        .recent_events
        .iter()
        .any(|e| e.kind == "neighbor_removed" && e.message.contains("link went down")));
    assert_eq!(dcbx(&mut sw, "Ethernet0").status, "no-neighbour");
    // Nothing is sent while down (the fast LLDPDUs of the new neighbour stop).
    let sent_while_down = neighbors(&mut sw).ports[0].tx_frames;
    let until = Instant::now() + Duration::from_millis(1500);
    sw.wait_for("1.5 s", |_| Instant::now() >= until);
    assert_eq!(neighbors(&mut sw).ports[0].tx_frames, sent_while_down);
    let _ = sw.drain(0);
    // Up: an LLDPDU within the link poll (100 ms), not at the next 30 s interval.
    sw.taps[0].link_up.store(true, Ordering::Relaxed);
    let up = Instant::now();
    let _ = lldpdus(&mut sw, 0, 1);
    assert!(
        up.elapsed() < Duration::from_millis(700),
        "{:?}",
        up.elapsed()
    );
}
