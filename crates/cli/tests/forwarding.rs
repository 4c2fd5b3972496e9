//! Forwarding through the switch on a lab: ping (with ARP resolved by flooding), iperf3 TCP,
//! MAC learning and unknown-unicast flooding.

mod common;

use common::lab_config::{host_ipv4, host_mac, HOST_DEVICE};
use common::{
    iperf3_json, test_frame, test_frame_tag, wait_listening, Background, Lab, RawSocket,
    TEST_ETHERTYPE,
};
use std::time::Duration;

/// A MAC address no host has.
const UNKNOWN_MAC: [u8; 6] = [0x02, 0x99, 0x99, 0x99, 0x99, 0x99];
const BROADCAST: [u8; 6] = [0xFF; 6];

#[test]
fn ping_with_arp_by_flooding_and_iperf3_tcp() {
    common::require(&["ping", "iperf3", "ss"]);
    let lab = Lab::up(4, "1G");
    let switch = lab.start_switch();
    // Every host reaches every other (permanent neighbours: no ARP).
    for from in 0..4 {
        for to in (0..4).filter(|&to| to != from) {
            lab.host_run(
                from,
                "ping",
                &[
                    "-c",
                    "2",
                    "-i",
                    "0.2",
                    "-W",
                    "5",
                    &host_ipv4(to).to_string(),
                ],
            );
        }
    }
    // ARP still works: without the permanent entry, h0 resolves h3 by a broadcast request the
    // switch floods, and h3's unicast reply comes back through the learned port.
    let h3 = host_ipv4(3).to_string();
    lab.host_run(0, "ip", &["neigh", "del", &h3, "dev", HOST_DEVICE]);
    lab.host_run(0, "ping", &["-c", "2", "-i", "0.2", "-W", "5", &h3]);
    let neigh = lab.host_run(0, "ip", &["neigh", "show", &h3]);
    assert!(
        neigh.contains(&common::lab_config::mac_text(host_mac(3))) && !neigh.contains("PERMANENT"),
        "h0 did not learn h3 by ARP: {neigh}"
    );

    // TCP at the lab's default speed.
    let server = Background::spawn(lab.host_cmd(2, "iperf3", &["-s", "-1", "-p", "5201"]));
    wait_listening(&lab, 2, 5201);
    let client = Background::spawn(lab.host_cmd(
        1,
        "iperf3",
        &[
            "-c",
            &host_ipv4(2).to_string(),
            "-p",
            "5201",
            "-t",
            "2",
            "-J",
        ],
    ));
    let out = client.finish(Duration::from_secs(20));
    drop(server);
    let received_bps = iperf3_json(&out, &["end", "sum_received", "bits_per_second"]);
    let received_bytes = iperf3_json(&out, &["end", "sum_received", "bytes"]);
    eprintln!("iperf3 TCP h1 -> h2 at 1G: {:.1} Mb/s", received_bps / 1e6);
    // The shaper holds TCP at or below the port speed (the frames carry 66 bytes of headers per
    // 1448 of payload, so goodput is at most 95.6 % of it).
    assert!(
        received_bps <= 1.0e9,
        "{received_bps} b/s above the 1G port"
    );
    assert!(received_bps > 10.0e6, "TCP crawled: {received_bps} b/s");

    let report = switch.stop();
    // Everything h1 sent (TCP data) left by h2's port; at least the payload went through.
    assert!(
        report.port(2).tx_bytes as f64 >= received_bytes,
        "{}",
        report.text
    );
    assert!(report.port(1).rx_frames > 0);
}

/// Sends `frame` from host `from` through a fresh send-only socket.
fn send_from(lab: &Lab, from: usize, frame: &[u8]) {
    RawSocket::open(&lab.host_ns(from), HOST_DEVICE, 0)
        .send(frame)
        .expect("send");
}

#[test]
fn learning_sends_known_unicast_to_one_port_and_floods_unknown_unicast() {
    common::require(&[]);
    let lab = Lab::up(4, "1G");
    let switch = lab.start_switch();
    let receivers: Vec<RawSocket> = (0..4)
        .map(|i| RawSocket::open(&lab.host_ns(i), HOST_DEVICE, TEST_ETHERTYPE))
        .collect();
    let wait = Duration::from_secs(5);

    // A: h1 to a MAC nobody has. Unknown unicast is flooded to every other port, and the switch
    // learns h1's MAC on Ethernet1.
    send_from(&lab, 1, &test_frame(UNKNOWN_MAC, host_mac(1), 0xA, 64));
    for i in [0, 2, 3] {
        let got = receivers[i].recv(wait).map(|f| test_frame_tag(&f));
        assert_eq!(got, Some(Some(0xA)), "h{i} did not get the flooded frame");
    }

    // B: h0 to h1's learned MAC goes to Ethernet1 only. C: a broadcast marker from h0 after it.
    // Both are non-IP frames of priority 0, so they share egress queue 0 of every port, which is
    // FIFO: a port that got a copy of B would deliver it before C. That makes "h2 and h3 never
    // get B" a check without a timeout.
    send_from(&lab, 0, &test_frame(host_mac(1), host_mac(0), 0xB, 64));
    send_from(&lab, 0, &test_frame(BROADCAST, host_mac(0), 0xC, 64));
    let tags = |i: usize, n: usize| -> Vec<Option<u32>> {
        (0..n)
            .map(|_| receivers[i].recv(wait).and_then(|f| test_frame_tag(&f)))
            .collect()
    };
    assert_eq!(tags(1, 2), [Some(0xB), Some(0xC)], "h1");
    assert_eq!(tags(2, 1), [Some(0xC)], "h2 got the unicast to h1");
    assert_eq!(tags(3, 1), [Some(0xC)], "h3 got the unicast to h1");
    // h1 never gets its own flooded frame back; h0 never gets B or C (its own).
    assert_eq!(
        receivers[1].drain(Duration::from_millis(100)),
        Vec::<Vec<u8>>::new()
    );
    assert_eq!(
        receivers[0].drain(Duration::from_millis(100)),
        Vec::<Vec<u8>>::new()
    );

    let report = switch.stop();
    // The hosts' kernels are silent (IPv6 off, permanent neighbours), so the counters are exact.
    let tx: Vec<u64> = (0..4).map(|i| report.port(i).tx_frames).collect();
    assert_eq!(tx, [1, 2, 2, 2], "{}", report.text);
    let rx: Vec<u64> = (0..4).map(|i| report.port(i).rx_frames).collect();
    assert_eq!(rx, [2, 1, 0, 0], "{}", report.text);
}
