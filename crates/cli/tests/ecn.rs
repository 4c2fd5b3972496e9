//! ECN marking seen by Linux TCP: the switch marks CE (RFC 3168) on a lossless queue with low
//! WRED thresholds, the receiving kernel accepts the marks (the IPv4 checksum was updated), the
//! sender reacts, and throughput stays near the shaped port speed.

mod common;

use common::lab_config::{host_ipv4, EcnThresholds};
use common::{iperf3_json, wait_listening, Background, Lab};
use std::time::Duration;

const LAB_SPEED: &str = "100M";
const LAB_SPEED_BPS: f64 = 100e6;

#[test]
fn linux_tcp_accepts_ce_marks_and_keeps_the_port_busy() {
    common::require(&["iperf3", "nstat", "ss"]);
    let lab = Lab::up(2, LAB_SPEED);
    let dir = tempfile::tempdir().unwrap();
    // Marking from 60 KB of queue, every ECT frame at 180 KB. A Reno/CUBIC sender keeps the
    // port busy after halving its window only if the queue at the mark exceeds the path's
    // bandwidth-delay product; the software path's effective round trip (lcore wake-ups, softirq
    // scheduling, delayed ACKs) is a few ms, which at 100 Mb/s is tens of KB. With 20 KB/60 KB
    // goodput measured 79-84 %, with 60 KB/180 KB 88-90 % (same loaded machine).
    let mut spec = lab.spec.clone();
    spec.ecn = EcnThresholds {
        min_bytes: 60_000,
        max_bytes: 180_000,
        probability_percent: 100,
    };
    let switch = lab.start_switch_with(&spec, dir.path());
    for i in 0..2 {
        let ecn = lab.host_run(i, "cat", &["/proc/sys/net/ipv4/tcp_ecn"]);
        assert_eq!(ecn.trim(), "1", "the lab did not turn ECN on in host {i}");
        // A congestion control that reacts to ECE (BBR would ignore the marks).
        let cc = lab.host_run(i, "cat", &["/proc/sys/net/ipv4/tcp_congestion_control"]);
        assert!(["cubic", "reno"].contains(&cc.trim()), "host {i} uses {cc}");
    }
    let counters = |lab: &Lab| {
        (
            lab.nstat(0, "TcpExtTCPDeliveredCE"),
            lab.nstat(1, "IpExtInCEPkts"),
            lab.nstat(1, "IpExtInCsumErrors") + lab.nstat(1, "TcpInCsumErrors"),
        )
    };
    let before = counters(&lab);

    let server = Background::spawn(lab.host_cmd_niced(1, "iperf3", &["-s", "-1", "-p", "5201"]));
    wait_listening(&lab, 1, 5201);
    // --tos 0x0c is DSCP 3 (lossless priority 3, queue 3); TCP itself sets ECT(0) in the ECN
    // bits once ECN is negotiated.
    let client = Background::spawn(lab.host_cmd_niced(
        0,
        "iperf3",
        &[
            "-c",
            &host_ipv4(1).to_string(),
            "-p",
            "5201",
            "-t",
            "3",
            "--tos",
            "0x0c",
            "-J",
        ],
    ));
    let out = client.finish(Duration::from_secs(30));
    drop(server);
    let after = counters(&lab);
    let report = switch.stop();

    let delivered_ce = after.0 - before.0;
    let received_ce = after.1 - before.1;
    let checksum_errors = after.2 - before.2;
    let marked = report.port(1).ecn_marked;
    let goodput = iperf3_json(&out, &["end", "sum_received", "bits_per_second"]);
    eprintln!(
        "goodput {:.1} Mb/s; switch marked {marked:?} on Ethernet1; receiver IpExtInCEPkts \
         {received_ce}; sender TcpExtTCPDeliveredCE {delivered_ce}; checksum errors \
         {checksum_errors}",
        goodput / 1e6
    );
    // Marks only on the lossless queue the traffic used.
    assert!(marked[3] > 0, "no CE marks:\n{}", report.text);
    assert_eq!(marked.iter().sum::<u64>(), marked[3], "{}", report.text);
    // Every CE-marked packet the switch sent reached the receiver's IP layer as CE: nothing
    // else marks on a veth lab and nothing is lost after the switch, so the counts are equal.
    assert_eq!(received_ce, marked[3], "{}", report.text);
    // The kernel accepted them: no checksum error (the marking updated the IPv4 header
    // checksum, RFC 1624), and TCP acted on them: the receiver echoed ECE and the sender counted
    // the segments acknowledged with ECE.
    assert_eq!(checksum_errors, 0);
    assert!(delivered_ce > 0, "the sender saw no ECE");
    // TcpExtTCPDeliveredCE counts segments *acknowledged* with ECE at the sender, not CE
    // packets: an RFC 3168 receiver sets ECE on every ACK from the CE segment until it sees CWR,
    // about a round trip later, so one mark covers a window of segments, and several marks in
    // one window make one episode. Hence only bounds: every marked segment is acknowledged with
    // ECE, and an episode covers at most a window: the marking limit plus the path's BDP, under
    // 192 segments of 1448 bytes (180 KB + 100 KB).
    assert!(
        delivered_ce >= marked[3] && delivered_ce <= 192 * marked[3],
        "TcpExtTCPDeliveredCE {delivered_ce} vs {} marks",
        marked[3]
    );
    // The sender backed off: a sender that ignores ECE (BBR, measured) keeps the queue above
    // the marking range and gets ~90 % of its segments marked; a reacting one keeps the queue
    // below it most of the time.
    let segments = iperf3_json(&out, &["end", "sum_received", "bytes"]) / 1448.0;
    assert!(
        (marked[3] as f64) < 0.05 * segments,
        "{} of {segments:.0} segments marked: the sender did not react",
        marked[3]
    );
    // ECN kept the queue short without starving the port: goodput near the 100 Mb/s shaper
    // (at most 1448/1514 = 95.6 % of it with TCP timestamps).
    assert!(
        goodput >= 0.8 * LAB_SPEED_BPS,
        "goodput {:.1} Mb/s is below 80 % of the port speed",
        goodput / 1e6
    );
    // ECN acted before PFC: the queue never reached the XOFF point.
    assert_eq!(report.port(0).pfc_tx, [0; 8], "{}", report.text);
    assert_eq!(report.port(0).drops_total, 0, "{}", report.text);
}
