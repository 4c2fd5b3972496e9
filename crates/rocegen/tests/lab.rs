//! rocegen end to end: a client and a server in two network namespaces joined by a veth pair,
//! traffic through AF_PACKET, checked from both reports, from tcpdump captures (decoded by
//! tshark and by our own ICRC check) and against PFC frames injected from a third socket.
//!
//! Needs root, iproute2, tcpdump and tshark; fails (never skips) without them.

mod common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{
    float, num, read_pcap, read_pcap_truncated, send_frame, serial, tshark_fields,
    tshark_fields_with, Capture, Fabric, Lab,
};
use headroom_rocegen::flow::flow_label;
use headroom_wire::ethernet::{parse_l2, EtherType, MacAddress};
use headroom_wire::mac_control::{MacControlRepr, PfcRepr, FRAME_LEN};
use headroom_wire::roce::{parse_rocev2, verify_icrc_frame, Opcode};
use serde_json::Value;

const PORT: u16 = 18_515;

#[test]
fn write_bw_completes_without_retransmissions_and_reports_exactly() {
    let _serial = serial();
    let lab = Lab::new();
    let (client, server) = lab.pair("write_bw", &[], &["-n", "300", "-s", "65536"]);
    // The perftest table, exactly.
    assert_eq!(num(&client, "bw.0.bytes"), 65_536);
    assert_eq!(num(&client, "bw.0.iterations"), 300);
    let avg = float(&client, "bw.0.bw_average_mb_per_sec");
    let peak = float(&client, "bw.0.bw_peak_mb_per_sec");
    // The 1 Gb/s emulated link carries at most 1024 payload bytes per 1106 wire bytes:
    // 110.4 MB/s (2^20). Nothing can beat it; a loaded host may fall short of it.
    assert!(
        avg > 1.0 && avg <= peak && peak <= 110.5,
        "avg {avg} peak {peak}"
    );
    assert_eq!(num(&client, "counters.messages_completed"), 300);
    // Loss shows as retransmissions; say where it happened if it ever does (a starved host's
    // kernel ring, `rx_ring_drops`, or the wire).
    assert_eq!(
        num(&client, "counters.retransmitted_packets"),
        0,
        "client: {}\nserver: {}",
        client["counters"],
        server["counters"]
    );
    assert_eq!(num(&client, "counters.retransmission_timeouts"), 0);
    assert_eq!(num(&client, "counters.naks_received"), 0);
    assert_eq!(num(&client, "counters.data_packets_sent"), 300 * 64);
    // The server received it all, in order, intact.
    assert_eq!(num(&server, "counters.messages_delivered"), 300);
    assert_eq!(
        num(&server, "counters.payload_bytes_delivered"),
        300 * 65_536
    );
    assert_eq!(num(&server, "counters.out_of_sequence_packets"), 0);
    assert_eq!(num(&server, "counters.icrc_errors"), 0);
    assert_eq!(num(&server, "counters.rx_payload_mismatch"), 0);
    assert_eq!(num(&server, "bw.0.iterations"), 300);
    // Each side carries the other's report.
    assert_eq!(num(&client, "peer.counters.messages_delivered"), 300);
    assert_eq!(num(&server, "peer.bw.0.iterations"), 300);
    assert_eq!(client["role"], "client");
    assert_eq!(server["role"], "server");
    assert_eq!(client["local"]["qps"][0], server["remote"][0]["qps"][0]);
    assert_eq!(server["local"]["qps"][0], client["remote"][0]["qps"][0]);
    println!(
        "write_bw 300 x 64 KiB: average {avg:.2} MB/s, peak {peak:.2} MB/s; client CPU {} ms \
         in {} ms",
        (num(&client, "driver.cpu_user_ns") + num(&client, "driver.cpu_system_ns")) / 1_000_000,
        num(&client, "driver.wall_ns") / 1_000_000
    );
}

#[test]
fn a_slow_link_leaves_the_cpu_idle() {
    let _serial = serial();
    let lab = Lab::new();
    // 10 Mb/s: a 1106-byte wire frame every 885 us. The loop must sleep between frames.
    let (client, server) = lab.pair(
        "write_bw",
        &["--link-speed", "10M"],
        &["-n", "12", "-s", "65536", "--link-speed", "10M"],
    );
    let avg = float(&client, "bw.0.bw_average_mb_per_sec");
    // 10 Mb/s carries at most 1024/1106 of it as payload: 1.104 MB/s (2^20).
    assert!(avg <= 1.105 && avg > 0.5, "average {avg} MB/s");
    for (who, report) in [("client", &client), ("server", &server)] {
        let cpu = num(report, "driver.cpu_user_ns") + num(report, "driver.cpu_system_ns");
        let wall = num(report, "driver.wall_ns");
        // Sending 768 frames costs a few ms of CPU; the run lasts about 0.7 s. A loop that
        // polled instead of sleeping would use the whole wall time.
        assert!(
            cpu * 5 < wall,
            "{who}: {} ms of CPU in {} ms",
            cpu / 1_000_000,
            wall / 1_000_000
        );
        println!(
            "{who}: {:.1} ms of CPU in {} ms ({} waits)",
            cpu as f64 / 1e6,
            wall / 1_000_000,
            num(report, "driver.waits")
        );
    }
}

#[test]
fn several_qps_and_all_sizes_and_write_lat() {
    let _serial = serial();
    let lab = Lab::new();
    // -q 4: iterations are per QP, reported for all (perftest).
    let (client, server) = lab.pair("write_bw", &[], &["-q", "4", "-n", "50", "-s", "8192"]);
    assert_eq!(num(&client, "bw.0.iterations"), 200);
    assert_eq!(num(&server, "counters.messages_delivered"), 200);
    let sports: Vec<u64> = (0..4)
        .map(|i| num(&client, &format!("qp.{i}.udp_sport")))
        .collect();
    assert!(sports.iter().all(|&p| p >= 0xC000));
    for qp in 0..4 {
        assert_eq!(num(&client, &format!("qp.{qp}.messages_completed")), 50);
    }
    // -a: one row per size, 2 .. 2^23.
    let (client, _) = lab.pair("write_bw", &[], &["-a", "-n", "2"]);
    let rows = client["bw"].as_array().expect("rows");
    assert_eq!(rows.len(), 23);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(num(row, "bytes"), 2 << i);
        assert_eq!(num(row, "iterations"), 2);
    }
    // write_lat: ping-pong, one row with perftest's figures.
    let (client, server) = lab.pair("write_lat", &[], &["-n", "200", "-s", "64"]);
    assert_eq!(num(&client, "latency.0.iterations"), 200);
    assert_eq!(num(&client, "latency.0.bytes"), 64);
    let min = float(&client, "latency.0.t_min_usec");
    let typical = float(&client, "latency.0.t_typical_usec");
    let max = float(&client, "latency.0.t_max_usec");
    let p99 = float(&client, "latency.0.p99_usec");
    // Half a round trip includes at least one 64-byte WRITE frame at 1 Gb/s (0.9 us).
    assert!(
        0.9 < min && min <= typical && typical <= p99 && p99 <= max,
        "{client:#}"
    );
    assert_eq!(num(&server, "counters.messages_delivered"), 200);
    assert_eq!(num(&server, "counters.messages_completed"), 200);
    assert_eq!(num(&client, "counters.retransmitted_packets"), 0);
    println!("write_lat 64 B: t_min {min:.2} us, t_typical {typical:.2} us, 99% {p99:.2} us");
}

const FIELDS: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "ip.src",
    "ip.dsfield.dscp",
    "ip.dsfield.ecn",
    "ip.flags.df",
    "udp.srcport",
    "udp.dstport",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.bth.a",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "vlan.priority",
    "vlan.id",
    "_ws.expert.severity",
    "_ws.expert.message",
    "_ws.malformed",
];

/// tshark's "Note" expert severity (`epan/proto.h` PI_NOTE).
const PI_NOTE: u32 = 0x0040_0000;

/// Problems tshark reports on a frame: none allowed, except a Note-level "Unknown OpCode" on a
/// CNP (Wireshark 4.0 does not know opcode 0x81, `dcqcn-roce.md` §4.5).
fn expert_problem(row: &BTreeMap<String, String>) -> Option<String> {
    if !row["_ws.malformed"].is_empty() {
        return Some(format!("malformed: {row:?}"));
    }
    let severities: Vec<u32> = row["_ws.expert.severity"]
        .split(',')
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().expect("severity"))
        .collect();
    if severities.is_empty() {
        return None;
    }
    let is_cnp = row["infiniband.bth.opcode"] == "129";
    let tolerated = is_cnp
        && severities.iter().all(|&s| s <= PI_NOTE)
        && row["_ws.expert.message"]
            .split(',')
            .all(|m| m.to_ascii_lowercase().contains("unknown opcode"));
    (!tolerated).then(|| format!("expert info: {row:?}"))
}

#[test]
fn wire_conformance_tshark_and_icrc() {
    let _serial = serial();
    let lab = Lab::new();
    let pcap = lab.dir.join("conformance.pcap");
    let capture = Capture::start(&lab.ns_b, &lab.if_b, &pcap, "udp port 4791");
    // WRITE ONLY (512 B) and FIRST/MIDDLE/LAST (5000 B = 1024 × 4 + 904), with CE marks so that
    // CNPs are on the wire too, and DSCP 26.
    let (c1, s1) = lab.pair(
        "write_bw",
        &[],
        &[
            "-n",
            "20",
            "-s",
            "512",
            "--tclass",
            "104",
            "--mark-ce-every",
            "7",
        ],
    );
    let (c2, _) = lab.pair(
        "write_bw",
        &[],
        &["-n", "20", "-s", "5000", "--tclass", "104"],
    );
    let pcap = capture.stop();
    let cnps = num(&s1, "counters.cnps_sent");
    assert!(cnps > 0);

    let rows = tshark_fields(&pcap, FIELDS);
    let frames = read_pcap(&pcap);
    assert_eq!(rows.len(), frames.len());
    let data_expected = 20 + 20 * 5;
    let mut opcodes: BTreeMap<String, usize> = BTreeMap::new();
    // Per (sender, destination QP): the PSNs of data packets, in capture order.
    let mut psns: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (row, (_, frame)) in rows.iter().zip(&frames) {
        // Every frame is RoCEv2 decoded as InfiniBand over UDP 4791, clean.
        assert!(row["frame.protocols"].contains("infiniband"), "{row:?}");
        assert_eq!(row["udp.dstport"], "4791");
        if let Some(problem) = expert_problem(row) {
            panic!("frame {}: {problem}", row["frame.number"]);
        }
        // Our own ICRC check of every captured frame.
        verify_icrc_frame(frame)
            .unwrap_or_else(|e| panic!("frame {}: ICRC {e}", row["frame.number"]));
        let opcode = row["infiniband.bth.opcode"].clone();
        *opcodes.entry(opcode.clone()).or_default() += 1;
        assert_eq!(row["ip.flags.df"], "1");
        assert!(row["udp.srcport"].parse::<u32>().unwrap() >= 0xC000);
        match opcode.as_str() {
            "6" | "7" | "8" | "10" => {
                assert_eq!(row["ip.src"], lab.ip_a);
                assert_eq!(row["ip.dsfield.dscp"], "26");
                let psn: u32 = row["infiniband.bth.psn"].parse().unwrap();
                psns.entry((row["ip.src"].clone(), row["infiniband.bth.destqp"].clone()))
                    .or_default()
                    .push(psn);
                if opcode == "6" {
                    assert_eq!(row["infiniband.reth.dmalen"], "5000");
                }
                if opcode == "10" {
                    assert_eq!(row["infiniband.reth.dmalen"], "512");
                }
                // ECT(0), or CE where the sender marked it.
                assert!(
                    ["2", "3"].contains(&row["ip.dsfield.ecn"].as_str()),
                    "{row:?}"
                );
            }
            "17" => {
                assert_eq!(row["ip.src"], lab.ip_b);
                // ACK with unlimited credits.
                assert_eq!(row["infiniband.aeth.syndrome"], "31");
            }
            "129" => {
                assert_eq!(row["ip.src"], lab.ip_b);
                assert_eq!(row["ip.dsfield.dscp"], "48");
                let h = parse_rocev2(frame).unwrap();
                assert!(h.bth.becn);
                assert_eq!(h.bth.opcode, Opcode::Cnp);
            }
            other => panic!("unexpected opcode {other}: {row:?}"),
        }
    }
    // The expected packets: 20 ONLY, 20 × (FIRST, 3 MIDDLE, LAST), ACKs, CNPs.
    assert_eq!(opcodes.get("10"), Some(&20));
    assert_eq!(opcodes.get("6"), Some(&20));
    assert_eq!(opcodes.get("7"), Some(&60));
    assert_eq!(opcodes.get("8"), Some(&20));
    assert_eq!(opcodes.get("129").copied().unwrap_or(0) as u64, cnps);
    assert!(opcodes.get("17").copied().unwrap_or(0) >= 40 / 16);
    // PSNs consecutive (mod 2^24) within each flow, and no retransmission.
    assert_eq!(psns.len(), 2);
    let mut data = 0;
    for ((src, qp), list) in &psns {
        for pair in list.windows(2) {
            assert_eq!(
                pair[1],
                (pair[0] + 1) & 0x00FF_FFFF,
                "{src} -> {qp}: {list:?}"
            );
        }
        data += list.len();
    }
    assert_eq!(data, data_expected);
    assert_eq!(num(&c1, "counters.retransmitted_packets"), 0);
    assert_eq!(num(&c2, "counters.retransmitted_packets"), 0);
    println!("captured {} frames: {opcodes:?}", frames.len());
}

#[test]
fn loss_shows_up_as_retransmissions_and_every_message_completes() {
    let _serial = serial();
    let lab = Lab::new();
    let (client, server) = lab.pair(
        "write_bw",
        &["--drop-every", "300"],
        &["-n", "200", "-s", "65536"],
    );
    let dropped = num(&server, "counters.test_dropped");
    // 200 × 64 packets, every 300th received one dropped (retransmissions count too).
    assert!(dropped >= 200 * 64 / 300, "{dropped}");
    let retransmitted = num(&client, "counters.retransmitted_packets");
    assert!(retransmitted >= dropped, "{retransmitted} < {dropped}");
    assert!(num(&client, "counters.naks_received") > 0);
    assert_eq!(
        num(&client, "counters.naks_received"),
        num(&server, "counters.naks_sent")
    );
    assert!(num(&server, "counters.out_of_sequence_packets") > 0);
    assert_eq!(num(&client, "bw.0.iterations"), 200);
    assert_eq!(num(&server, "counters.messages_delivered"), 200);
    assert_eq!(
        num(&server, "counters.payload_bytes_delivered"),
        200 * 65_536
    );
    println!("dropped {dropped}, retransmitted {retransmitted}");
}

/// Sends one PFC frame out of `ifname` in namespace `ns` (the sender's link partner).
fn inject_pfc(ns: &str, ifname: &str, priority: u8, quanta: u16) {
    let mut frame = vec![0u8; FRAME_LEN];
    MacControlRepr::Pfc(PfcRepr::xoff(1 << priority, quanta))
        .emit_frame(MacAddress([0x02, 0, 0, 0, 0, 0x99]), &mut frame)
        .expect("emit");
    send_frame(ns, ifname, &frame);
}

/// Waits until `ifname` in `ns` has received more than `packets` packets (traffic is flowing).
fn wait_for_traffic(ns: &str, ifname: &str, packets: u64) {
    let until = Instant::now() + Duration::from_secs(20);
    while Lab::if_stat(ns, ifname, "rx_packets") <= packets {
        assert!(Instant::now() < until, "no traffic on {ifname}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn pfc_frames_pause_the_sender_for_their_quanta() {
    let _serial = serial();
    let lab = Lab::new();
    let pcap = lab.dir.join("pfc.pcap");
    // Headers are enough here (128 bytes), which keeps tcpdump's work small.
    let capture = Capture::start_with_snaplen(
        &lab.ns_b,
        &lab.if_b,
        &pcap,
        "udp port 4791 or ether proto 0x8808",
        128,
    );
    // DSCP 3 (tclass 12) is priority 3 under the default (SONiC AZURE) map.
    let server = lab.server("write_bw", PORT, &[]);
    let client = lab.client(
        "write_bw",
        PORT,
        &["-n", "600", "-s", "65536", "--tclass", "12"],
    );
    wait_for_traffic(&lab.ns_b, &lab.if_b, 5_000);
    // The switch side of the link pauses priority 3 for 0xFFFF quanta: 33,553,920 ns at 1 Gb/s.
    inject_pfc(&lab.ns_b, &lab.if_b, 3, 0xFFFF);
    let client = client.finish(common::RUN_DEADLINE).json();
    let server = server.finish(common::RUN_DEADLINE).json();
    let pcap = capture.stop();
    let pause_ns = 65_535 * 512;

    // The sender's report: one PFC XOFF on priority 3, paused exactly its quanta, nothing lost.
    assert_eq!(num(&client, "priority"), 3);
    assert_eq!(num(&client, "counters.priorities.3.pfc_frames_rx"), 1);
    assert_eq!(num(&client, "counters.priorities.3.pfc_xoff_rx"), 1);
    assert_eq!(num(&client, "counters.priorities.3.paused_ns"), pause_ns);
    assert_eq!(num(&client, "counters.priorities.4.pfc_frames_rx"), 0);
    assert_eq!(
        num(&client, "counters.retransmitted_packets"),
        0,
        "client {:#}\nserver {:#}",
        client["counters"],
        server["counters"]
    );
    assert_eq!(num(&server, "counters.messages_delivered"), 600);

    // The capture: the data stream has one gap of the pause length right after the PFC frame.
    let frames = read_pcap_truncated(&pcap);
    let pfc_at = frames
        .iter()
        .find(|(_, f)| parse_l2(f).is_ok_and(|l2| l2.ethertype == EtherType::MacControl))
        .map(|(ts, _)| *ts)
        .expect("the PFC frame is in the capture");
    // Data frames, from their first 128 bytes (untagged IPv4, UDP 4791, BTH opcode at 42).
    let data: Vec<u64> = frames
        .iter()
        .filter(|(_, f)| {
            f.len() > 42
                && f[12..14] == [0x08, 0x00]
                && f[23] == 17
                && f[36..38] == 4791u16.to_be_bytes()
                && matches!(f[42], 6..=8 | 10)
        })
        .map(|(ts, _)| *ts)
        .collect();
    // How late this host wakes processes: the sender measured its own worst lateness against
    // the deadlines it slept for. Stopping on the PFC (a wake-up by the frame), resuming at the
    // end of the pause (a timed wake-up) and a stall just before the PFC arrived can each add
    // that much to the gap; plus 1 ms for everything else (veth delivery, capture stamps).
    let lateness = num(&client, "driver.max_wake_lateness_ns");
    let tolerance = 1_000_000 + 3 * lateness;
    // The gap the PFC caused: the largest between consecutive data frames that overlaps the
    // time from the PFC frame to the end of its pause (plus the tolerance).
    let window = (pfc_at, pfc_at + pause_ns + tolerance);
    let (gap_start, gap_end) = data
        .windows(2)
        .map(|w| (w[0], w[1]))
        .filter(|&(a, b)| b > window.0 && a < window.1)
        .max_by_key(|(a, b)| b - a)
        .expect("data frames around the PFC frame");
    let gap = gap_end - gap_start;
    println!(
        "PFC pause {pause_ns} ns: data gap {gap} ns (+{} us), starting {} us after the PFC \
         frame; sender's worst wake-up lateness {} us, tolerance {} us",
        (gap as i64 - pause_ns as i64) / 1_000,
        (gap_start as i64 - pfc_at as i64) / 1_000,
        lateness / 1_000,
        tolerance / 1_000
    );
    // Lower bound, exact: the sender cannot resume before the PFC reached it plus the pause;
    // its last frame before the gap left before it processed the PFC. 100 us covers veth
    // delivery and capture time stamps.
    assert!(
        gap + 100_000 >= pause_ns,
        "gap {gap} ns shorter than the pause {pause_ns} ns"
    );
    // Upper bound: the pause plus the host's scheduling delays (see `tolerance`).
    assert!(
        gap <= pause_ns + tolerance,
        "gap {gap} ns, tolerance {tolerance} ns"
    );
    assert!(
        gap_start.abs_diff(pfc_at) <= tolerance,
        "gap starts {gap_start}, PFC at {pfc_at}"
    );
}

fn cnp_run(lab: &Lab, mode: &str) -> (Value, Value) {
    lab.pair(
        "write_bw",
        &["--dcqcn", mode],
        &[
            "-n",
            "300",
            "-s",
            "65536",
            "--dcqcn",
            mode,
            "--mark-ce-every",
            "20",
        ],
    )
}

#[test]
fn ce_marks_bring_cnps_and_dcqcn_cuts_the_rate() {
    let _serial = serial();
    let lab = Lab::new();
    for mode in ["paper", "nvidia"] {
        let (client, server) = cnp_run(&lab, mode);
        let marked = num(&client, "counters.test_ce_marked");
        assert!(marked >= 300 * 64 / 20, "{mode}: {marked}");
        // The receiver saw every mark and answered with CNPs; the sender received them all.
        assert_eq!(num(&server, "counters.ecn_ce_received"), marked, "{mode}");
        let cnps = num(&server, "counters.cnps_sent");
        assert!(cnps > 0, "{mode}");
        assert!(cnps <= marked, "{mode}: at most one CNP per marked packet");
        assert_eq!(num(&client, "counters.cnps_received"), cnps, "{mode}");
        // The RP cut the QP's rate below the 1 Gb/s line rate and the limiter enforced it.
        assert!(num(&client, "qp.0.rate_cuts") > 0, "{mode}");
        assert_eq!(num(&client, "qp.0.cnps_handled"), cnps, "{mode}");
        let min_rate = num(&client, "qp.0.min_rate_bps");
        if mode == "paper" {
            // Paper mode cuts at the CNP, with alpha = 1 at first: exactly half the line rate,
            // and lower with later CNPs.
            assert!(min_rate <= 500_000_000, "{mode}: min rate {min_rate}");
        } else {
            // NVIDIA mode cuts on its 4 us decrease check and recovers on 300 us timers; the
            // limiter sees the rate when the loop next runs, which a loaded host delays: only
            // "below line rate" is certain.
            assert!(min_rate < 1_000_000_000, "{mode}: min rate {min_rate}");
        }
        // Congestion control is not loss.
        assert_eq!(
            num(&client, "counters.retransmitted_packets"),
            0,
            "{mode}: client {:#}\nserver {:#}",
            client["counters"],
            server["counters"]
        );
        assert_eq!(num(&server, "counters.messages_delivered"), 300, "{mode}");
        println!(
            "{mode}: {marked} CE marks, {cnps} CNPs, {} rate cuts, min rate {} Mb/s, average \
             {:.1} MB/s",
            num(&client, "qp.0.rate_cuts"),
            min_rate / 1_000_000,
            float(&client, "bw.0.bw_average_mb_per_sec")
        );
    }
}

#[test]
fn tagged_traffic_carries_pcp_3() {
    let _serial = serial();
    let lab = Lab::new();
    let pcap = lab.dir.join("vlan.pcap");
    // No capture filter: the kernel strips a received tag into metadata before BPF runs, so
    // neither `udp port 4791` nor `vlan` matches both directions; tshark sorts frames out.
    let capture = Capture::start(&lab.ns_b, &lab.if_b, &pcap, "");
    let (client, _) = lab.pair(
        "write_bw",
        &["--vlan", "0", "--pcp", "3"],
        &["-n", "20", "-s", "4096", "--vlan", "0", "--pcp", "3"],
    );
    let pcap = capture.stop();
    assert_eq!(num(&client, "vlan_id"), 0);
    let rows: Vec<_> = tshark_fields(&pcap, FIELDS)
        .into_iter()
        .filter(|r| r["udp.dstport"] == "4791")
        .collect();
    let data = rows.iter().filter(|r| r["ip.src"] == lab.ip_a).count();
    let acks = rows
        .iter()
        .filter(|r| r["infiniband.bth.opcode"] == "17")
        .count();
    assert_eq!(data, 20 * 4);
    assert!(acks > 0);
    for row in &rows {
        assert_eq!(row["vlan.priority"], "3", "{row:?}");
        assert_eq!(row["vlan.id"], "0", "{row:?}");
        assert!(row["frame.protocols"].contains("infiniband"));
        assert!(expert_problem(row).is_none(), "{row:?}");
    }
    for (_, frame) in read_pcap(&pcap) {
        if parse_rocev2(&frame).is_ok() {
            verify_icrc_frame(&frame).expect("ICRC of a tagged frame");
        }
    }
}

#[test]
fn one_server_takes_several_clients_at_once() {
    let _serial = serial();
    // Three hosts on a bridge: two clients write to the third (an incast of two).
    let fabric = Fabric::new(3);
    let server_host = &fabric.hosts[2];
    let server = fabric.rocegen(
        2,
        &["write_bw", "-d", &server_host.ifname, "--clients", "2"],
    );
    let clients: Vec<_> = (0..2)
        .map(|i| {
            fabric.rocegen(
                i,
                &[
                    "write_bw",
                    "-d",
                    &fabric.hosts[i].ifname,
                    &server_host.ip,
                    "-q",
                    "2",
                    "-n",
                    "40",
                    "-s",
                    "16384",
                ],
            )
        })
        .collect();
    let clients: Vec<Value> = clients
        .into_iter()
        .map(|c| c.finish(common::RUN_DEADLINE).json())
        .collect();
    let server = server.finish(common::RUN_DEADLINE).json();
    for (i, client) in clients.iter().enumerate() {
        assert_eq!(num(client, "bw.0.iterations"), 80, "client {i}");
        assert_eq!(
            num(client, "counters.retransmitted_packets"),
            0,
            "client {i}"
        );
        assert_eq!(client["peer"]["role"], "server");
        assert_eq!(client["remote"][0]["ip"], server_host.ip);
    }
    // One NIC with 4 QPs (2 per client), every message of both clients delivered.
    assert_eq!(server["qp"].as_array().map(Vec::len), Some(4));
    assert_eq!(server["remote"].as_array().map(Vec::len), Some(2));
    assert_eq!(num(&server, "counters.messages_delivered"), 160);
    assert_eq!(
        num(&server, "counters.payload_bytes_delivered"),
        160 * 16_384
    );
    assert_eq!(num(&server, "counters.out_of_sequence_packets"), 0);
    assert_eq!(server["peers"].as_array().map(Vec::len), Some(2));
    assert!(server["peer"].is_null(), "peer is for the one-client case");
    println!(
        "incast of 2: {:.1} + {:.1} MB/s into one 1 Gb/s port",
        float(&clients[0], "bw.0.bw_average_mb_per_sec"),
        float(&clients[1], "bw.0.bw_average_mb_per_sec")
    );
}

// ---- RoCEv2 over IPv6 ---------------------------------------------------------------------------

const GID_A: &str = "fd00::1";
const GID_B: &str = "fd00::2";

const FIELDS6: &[&str] = &[
    "frame.number",
    "frame.protocols",
    "ipv6.src",
    "ipv6.dst",
    "ipv6.tclass.dscp",
    "ipv6.tclass.ecn",
    "ipv6.flow",
    "ipv6.hlim",
    "ipv6.nxt",
    "udp.srcport",
    "udp.dstport",
    "udp.checksum.status",
    "infiniband.bth.opcode",
    "infiniband.bth.destqp",
    "infiniband.bth.psn",
    "infiniband.reth.dmalen",
    "infiniband.aeth.syndrome",
    "_ws.expert.severity",
    "_ws.expert.message",
    "_ws.malformed",
];

/// A tshark integer field, decimal or `0x` hex.
fn field_int(text: &str) -> u64 {
    match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    }
    .unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

#[test]
fn ipv6_wire_conformance_tshark_and_icrc() {
    let _serial = serial();
    let lab = Lab::new();
    let pcap = lab.dir.join("ipv6.pcap");
    let capture = Capture::start(&lab.ns_b, &lab.if_b, &pcap, "udp port 4791");
    // FIRST/MIDDLE/LAST (5000 B), DSCP 26 (ACKs too), CE marks so that CNPs are on the wire too. Explicit
    // GIDs, which the interfaces do not have: none is needed.
    let (client, server) = lab.pair(
        "write_bw",
        &["--gid", GID_B, "--tclass", "104"],
        &[
            "--gid",
            GID_A,
            "-n",
            "20",
            "-s",
            "5000",
            "--tclass",
            "104",
            "--mark-ce-every",
            "7",
        ],
    );
    let pcap = capture.stop();
    assert_eq!(client["local"]["ip"], GID_A);
    assert_eq!(client["remote"][0]["ip"], GID_B);
    assert_eq!(server["local"]["ip"], GID_B);
    let marked = num(&client, "counters.test_ce_marked");
    assert!(marked >= 100 / 7, "{marked}");
    assert_eq!(num(&server, "counters.ecn_ce_received"), marked);
    let cnps = num(&server, "counters.cnps_sent");
    assert!(cnps > 0);
    assert_eq!(num(&client, "counters.cnps_received"), cnps);
    assert_eq!(num(&client, "counters.retransmitted_packets"), 0);
    assert_eq!(num(&server, "counters.messages_delivered"), 20);
    assert_eq!(num(&server, "counters.icrc_errors"), 0);
    assert_eq!(num(&client, "counters.icrc_errors"), 0);
    let qpn = |r: &Value, key: &str| u32::try_from(num(r, &format!("qp.0.{key}"))).unwrap();
    let label = u64::from(flow_label(
        qpn(&client, "local_qpn"),
        qpn(&client, "remote_qpn"),
    ));

    // tshark checks the UDP checksum too: a zero or wrong one over IPv6 is an expert error.
    let rows = tshark_fields_with(&pcap, FIELDS6, &["-o", "udp.check_checksum:TRUE"]);
    let frames = read_pcap(&pcap);
    assert_eq!(rows.len(), frames.len());
    let mut opcodes: BTreeMap<String, usize> = BTreeMap::new();
    let mut psns = Vec::new();
    let mut ce = 0;
    for (row, (_, frame)) in rows.iter().zip(&frames) {
        assert!(
            row["frame.protocols"].contains("ipv6:udp:infiniband"),
            "{row:?}"
        );
        assert_eq!(&frame[12..14], &[0x86, 0xdd]);
        assert_eq!(row["udp.dstport"], "4791");
        if let Some(problem) = expert_problem(row) {
            panic!("frame {}: {problem}", row["frame.number"]);
        }
        verify_icrc_frame(frame)
            .unwrap_or_else(|e| panic!("frame {}: ICRC {e}", row["frame.number"]));
        // tshark `udp.checksum.status`: 0 bad, 1 good, 2 unverified.
        assert_eq!(row["udp.checksum.status"], "1", "{row:?}");
        assert_eq!(row["ipv6.hlim"], "64");
        assert_eq!(row["ipv6.nxt"], "17");
        // The QP's flow label, both ways (it is symmetric in the QPNs).
        assert_eq!(field_int(&row["ipv6.flow"]), label, "{row:?}");
        let opcode = row["infiniband.bth.opcode"].clone();
        *opcodes.entry(opcode.clone()).or_default() += 1;
        match opcode.as_str() {
            "6" | "7" | "8" => {
                assert_eq!(
                    (row["ipv6.src"].as_str(), row["ipv6.dst"].as_str()),
                    (GID_A, GID_B)
                );
                assert_eq!(row["ipv6.tclass.dscp"], "26");
                match row["ipv6.tclass.ecn"].as_str() {
                    "2" => {}
                    "3" => ce += 1,
                    other => panic!("ECN {other}: {row:?}"),
                }
                psns.push(row["infiniband.bth.psn"].parse::<u32>().unwrap());
                if opcode == "6" {
                    assert_eq!(row["infiniband.reth.dmalen"], "5000");
                }
            }
            "17" => {
                assert_eq!(
                    (row["ipv6.src"].as_str(), row["ipv6.dst"].as_str()),
                    (GID_B, GID_A)
                );
                assert_eq!(row["ipv6.tclass.dscp"], "26");
                assert_eq!(row["infiniband.aeth.syndrome"], "31");
            }
            "129" => {
                assert_eq!(
                    (row["ipv6.src"].as_str(), row["ipv6.dst"].as_str()),
                    (GID_B, GID_A)
                );
                assert_eq!(row["ipv6.tclass.dscp"], "48");
                assert_eq!(row["ipv6.tclass.ecn"], "2");
                let h = parse_rocev2(frame).unwrap();
                assert!(h.bth.becn);
                assert_eq!(h.bth.opcode, Opcode::Cnp);
                assert_eq!(u64::from(h.bth.dest_qp), num(&client, "qp.0.local_qpn"));
            }
            other => panic!("unexpected opcode {other}: {row:?}"),
        }
    }
    // 20 × (FIRST, 3 MIDDLE, LAST), the CE marks as sent, every CNP, ACKs.
    assert_eq!(opcodes.get("6"), Some(&20));
    assert_eq!(opcodes.get("7"), Some(&60));
    assert_eq!(opcodes.get("8"), Some(&20));
    assert_eq!(ce, marked);
    assert_eq!(opcodes.get("129").copied().unwrap_or(0) as u64, cnps);
    assert!(opcodes.get("17").copied().unwrap_or(0) >= 1);
    for pair in psns.windows(2) {
        assert_eq!(pair[1], (pair[0] + 1) & 0x00FF_FFFF, "{psns:?}");
    }
    println!("IPv6: captured {} frames: {opcodes:?}", frames.len());
}

#[test]
fn a_family_mismatch_is_refused_on_both_sides() {
    let _serial = serial();
    let lab = Lab::new();
    for (server, client) in [
        (&["--gid", GID_B][..], &["-n", "5"][..]),
        (&[][..], &["-n", "5", "--gid", GID_A][..]),
    ] {
        let started = Instant::now();
        let (client, server) = lab.pair_finished("write_bw", server, client);
        for side in [&client, &server] {
            assert_eq!(
                side.status.code(),
                Some(1),
                "{}: {}",
                side.what,
                side.stderr
            );
            assert!(
                side.stderr.contains("address family mismatch")
                    && side.stderr.contains("IPv6")
                    && side.stderr.contains("IPv4")
                    && side.stderr.contains("--ipv6"),
                "{}: {}",
                side.what,
                side.stderr
            );
            assert!(!side.stderr.contains("panicked"), "{}", side.stderr);
            let error = side.json_any()["error"].as_str().unwrap_or("").to_owned();
            assert!(error.contains("address family mismatch"), "{error}");
            // Nothing was sent: the NIC never started.
            assert_eq!(side.json_any()["counters"]["data_packets_sent"], 0);
        }
        // Refused at the handshake, not by a timeout.
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{:?}",
            started.elapsed()
        );
    }
}

#[test]
fn ipv6_takes_the_interface_global_address_or_exits_2() {
    let _serial = serial();
    let lab = Lab::new();
    // The veths have no global IPv6 address (at most the kernel's link-local one): a bad
    // argument, exit code 2, naming the interface and suggesting --gid.
    let out = Lab::command(
        &lab.ns_a,
        env!("CARGO_BIN_EXE_rocegen"),
        &["write_bw", "-d", &lab.if_a, &lab.ip_b, "--ipv6"],
    )
    .output()
    .expect("run rocegen");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{:?}", lab.if_a)) && stderr.contains("--gid"),
        "{stderr}"
    );
    // With a global address on each interface (the kernel's, no DAD), --ipv6 uses it.
    for (ns, ifname, addr) in [
        (&lab.ns_a, &lab.if_a, "fd00::11/64"),
        (&lab.ns_b, &lab.if_b, "fd00::12/64"),
    ] {
        let status = std::process::Command::new("ip")
            .args(["-n", ns, "-6", "addr", "add", addr, "dev", ifname, "nodad"])
            .status()
            .expect("ip");
        assert!(status.success());
    }
    let (client, server) = lab.pair(
        "write_bw",
        &["--ipv6"],
        &["--ipv6", "-n", "20", "-s", "4096"],
    );
    assert_eq!(client["local"]["ip"], "fd00::11");
    assert_eq!(server["local"]["ip"], "fd00::12");
    assert_eq!(client["remote"][0]["ip"], "fd00::12");
    assert_eq!(num(&client, "counters.retransmitted_packets"), 0);
    assert_eq!(num(&server, "counters.messages_delivered"), 20);
    assert_eq!(num(&server, "counters.icrc_errors"), 0);
}

// ---- The out-of-band exchange over IPv6 ---------------------------------------------------------

/// The kernel's global IPv6 addresses of the lab's hosts in the exchange tests.
const OOB6_A: &str = "fd00:6::11";
const OOB6_B: &str = "fd00:6::12";

/// A write_bw run of `n` messages of 4 KiB went through whole: every message completed and
/// delivered intact, nothing retransmitted.
fn assert_clean_run(client: &Value, server: &Value, n: u64) {
    assert_eq!(num(client, "counters.messages_completed"), n);
    assert_eq!(num(client, "counters.retransmitted_packets"), 0);
    assert_eq!(num(client, "counters.retransmission_timeouts"), 0);
    assert_eq!(num(client, "counters.naks_received"), 0);
    assert_eq!(num(server, "counters.messages_delivered"), n);
    assert_eq!(num(server, "counters.payload_bytes_delivered"), n * 4096);
    assert_eq!(num(server, "counters.out_of_sequence_packets"), 0);
    assert_eq!(num(server, "counters.icrc_errors"), 0);
    assert_eq!(num(client, "peer.counters.messages_delivered"), n);
}

#[test]
fn the_exchange_reaches_the_server_by_its_ipv6_address() {
    let _serial = serial();
    let lab = Lab::new();
    Lab::add_addr(&lab.ns_a, &lab.if_a, &format!("{OOB6_A}/64"));
    Lab::add_addr(&lab.ns_b, &lab.if_b, &format!("{OOB6_B}/64"));
    let client_args = ["-n", "50", "-s", "4096"];
    // RoCE over IPv6 (the interfaces' global addresses), the exchange over IPv6.
    let (client, server) = lab.pair_to(
        OOB6_B,
        "write_bw",
        &["--ipv6"],
        &[&client_args[..], &["--ipv6"]].concat(),
    );
    assert_clean_run(&client, &server, 50);
    assert_eq!(client["local"]["ip"], OOB6_A);
    assert_eq!(client["remote"][0]["ip"], OOB6_B);
    assert_eq!(server["local"]["ip"], OOB6_B);
    assert_eq!(server["remote"][0]["ip"], OOB6_A);
    // RoCE over IPv4, the exchange over IPv6 (bracketed): the RoCE addresses are the
    // interfaces' IPv4 ones, whatever address the exchange used.
    let (client, server) = lab.pair_to(&format!("[{OOB6_B}]"), "write_bw", &[], &client_args);
    assert_clean_run(&client, &server, 50);
    assert_eq!(client["local"]["ip"], lab.ip_a.as_str());
    assert_eq!(client["remote"][0]["ip"], lab.ip_b.as_str());
    assert_eq!(server["local"]["ip"], lab.ip_b.as_str());
    // The exchange over link-local addresses: with the client's interface as the zone, and
    // without a zone (the -d interface's); RoCE over IPv4, then over IPv6 from given GIDs.
    Lab::add_addr(&lab.ns_a, &lab.if_a, "fe80::11/64");
    Lab::add_addr(&lab.ns_b, &lab.if_b, "fe80::12/64");
    let (client, server) = lab.pair_to(
        &format!("fe80::12%{}", lab.if_a),
        "write_bw",
        &[],
        &client_args,
    );
    assert_clean_run(&client, &server, 50);
    assert_eq!(server["remote"][0]["ip"], lab.ip_a.as_str());
    let (client, server) = lab.pair_to(
        "fe80::12",
        "write_bw",
        &["--gid", GID_B],
        &[&client_args[..], &["--gid", GID_A]].concat(),
    );
    assert_clean_run(&client, &server, 50);
    assert_eq!(client["local"]["ip"], GID_A);
    assert_eq!(server["local"]["ip"], GID_B);
}

/// `/etc/netns/NS/hosts`, which `ip netns exec NS` mounts over `/etc/hosts`; removed on drop.
struct NetnsHosts(std::path::PathBuf);

impl NetnsHosts {
    fn new(ns: &str, lines: &str) -> Self {
        let dir = std::path::Path::new("/etc/netns").join(ns);
        std::fs::create_dir_all(&dir).expect("/etc/netns/NS");
        let guard = Self(dir);
        std::fs::write(guard.0.join("hosts"), lines).expect("hosts");
        guard
    }
}

impl Drop for NetnsHosts {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
        // The parent only if no one else uses it.
        let _ = std::fs::remove_dir("/etc/netns");
    }
}

#[test]
fn a_host_name_reaches_the_server_over_either_family() {
    let _serial = serial();
    let lab = Lab::new();
    Lab::add_addr(&lab.ns_a, &lab.if_a, &format!("{OOB6_A}/64"));
    Lab::add_addr(&lab.ns_b, &lab.if_b, &format!("{OOB6_B}/64"));
    // rg-b6 has only the server's IPv6 address; rg-b46 first an IPv6 address where nothing
    // listens (the client's own: refused at once), then the server's IPv4 address, so the
    // client has to go on to the next address, of the other family.
    let _hosts = NetnsHosts::new(
        &lab.ns_a,
        &format!("{OOB6_B} rg-b6\n{OOB6_A} rg-b46\n{} rg-b46\n", lab.ip_b),
    );
    // The resolver's order (getaddrinfo's RFC 6724 sort), as rocegen gets it.
    let out = Lab::command(&lab.ns_a, "getent", &["ahosts", "rg-b46"])
        .output()
        .expect("getent");
    let order: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("STREAM"))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    assert_eq!(order, [OOB6_A, lab.ip_b.as_str()], "getent ahosts rg-b46");
    let client_args = ["-n", "50", "-s", "4096"];
    let (client, server) = lab.pair_to("rg-b6", "write_bw", &[], &client_args);
    assert_clean_run(&client, &server, 50);
    assert_eq!(server["remote"][0]["ip"], lab.ip_a.as_str());
    let (client, server) = lab.pair_to(
        "rg-b46",
        "write_bw",
        &["--ipv6"],
        &[&client_args[..], &["--ipv6"]].concat(),
    );
    assert_clean_run(&client, &server, 50);
    assert_eq!(client["remote"][0]["ip"], OOB6_B);
    assert_eq!(server["remote"][0]["ip"], OOB6_A);
}

#[test]
fn an_ipv4_client_of_the_dual_stack_server_is_unmapped() {
    let _serial = serial();
    let lab = Lab::new();
    // A second IPv4 address on the server's interface: the server takes the one the client
    // reached it on as its RoCE address, which it finds only if the dual-stack socket's
    // ::ffff:a.b.c.d is turned back into a.b.c.d (else: "several IPv4 addresses").
    let second = format!("{}.3", lab.ip_b.strip_suffix(".2").expect("a.b.c.2"));
    Lab::add_addr(&lab.ns_b, &lab.if_b, &format!("{second}/24"));
    let (client, server) = lab.pair_to(&second, "write_bw", &[], &["-n", "50", "-s", "4096"]);
    assert_clean_run(&client, &server, 50);
    assert_eq!(server["local"]["ip"], second.as_str());
    assert_eq!(client["remote"][0]["ip"], second.as_str());
    assert_eq!(server["remote"][0]["ip"], lab.ip_a.as_str());
}

#[test]
fn with_kernel_ipv6_off_the_exchange_stays_on_ipv4_and_bad_servers_exit_2() {
    let _serial = serial();
    let lab = Lab::new();
    Lab::add_addr(&lab.ns_b, &lab.if_b, &format!("{OOB6_B}/64"));
    lab.disable_kernel_ipv6();
    // As on `headroom lab` hosts: the server still listens (IPv4 clients reach it), RoCE over
    // IPv4 and over IPv6 from given GIDs.
    let (client, server) = lab.pair("write_bw", &[], &["-n", "50", "-s", "4096"]);
    assert_clean_run(&client, &server, 50);
    let (client, server) = lab.pair(
        "write_bw",
        &["--gid", GID_B],
        &["-n", "50", "-s", "4096", "--gid", GID_A],
    );
    assert_clean_run(&client, &server, 50);
    assert_eq!(server["local"]["ip"], GID_B);
    let client_alone = |server: &str, extra: &[&str]| {
        let mut args = vec!["write_bw", "-d", &lab.if_a, server, "-p", "18516", "--json"];
        args.extend_from_slice(extra);
        let out = Lab::command(&lab.ns_a, env!("CARGO_BIN_EXE_rocegen"), &args)
            .output()
            .expect("run rocegen");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{stderr}");
        (out.status.code(), stderr)
    };
    // An IPv6 server without kernel IPv6: a run-time failure naming the address.
    let (code, stderr) = client_alone(OOB6_B, &["--connect-timeout", "0"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains(&format!("[{OOB6_B}]:18516")), "{stderr}");
    // Bad SERVER arguments: exit code 2 and what is wrong.
    for (server, why) in [
        ("[fd00::2", "no closing ']'"),
        ("10.0.0.2:18515", "-p"),
        ("fe80::2%no-such-if0", "no-such-if0"),
        ("no-such-host.invalid", "cannot resolve"),
    ] {
        let (code, stderr) = client_alone(server, &[]);
        assert_eq!(code, Some(2), "{server}: {stderr}");
        assert!(
            stderr.contains(&format!("SERVER {server:?}")) && stderr.contains(why),
            "{server}: {stderr}"
        );
    }
}
