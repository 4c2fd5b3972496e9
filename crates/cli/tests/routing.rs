//! Routed ports end to end: one switch in namespace S with two routed ports (`vlan_mode =
//! "routed"`) on veths to hosts h0 (10.1.0.0/31, the switch 10.1.0.1) and h1 (10.2.0.0/31, the
//! switch 10.2.0.1); the addresses are the kernel's, on the host interfaces (TAPs) headroom
//! creates, and the kernel forwards too (IP forwarding on). Shown:
//! * h0 pings the switch: the echo request is punted (ip2me) to the TAP, the kernel's reply is
//!   injected out of the port; ARP goes the same way.
//! * h0 → h1 is routed by headroom, not by the kernel: the packets arrive at h1 with TTL − 1 and
//!   a valid IPv4 checksum (tshark), S's `Ip: ForwDatagrams` stays flat and the ports' routed
//!   counters (rif) rise.
//! * `ip route add`/`del` in S takes effect in the dataplane; the time until traffic follows is
//!   printed (target < 100 ms), the assertion is generous (< 2 s) to stay robust on a loaded
//!   2-CPU VM.

mod common;

use common::lab_config::{host_mac, port_name, HOST_DEVICE};
use common::routed::{
    counter, host_interface, ipv4_destination, json, ping_all, resolve_both_hosts, start_routed,
    switch_run, udp_to, ROUTER_MAC,
};
use common::{eventually, require, run_ok, Capture, Lab, RawSocket, HEADROOM};
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `Ip: ForwDatagrams` of /proc/net/snmp in S: datagrams the kernel forwarded.
fn kernel_forwarded(lab: &Lab) -> u64 {
    let snmp = switch_run(lab, "cat", &["/proc/net/snmp"]);
    common::ip_forw_datagrams(&snmp)
}

#[test]
fn routed_ports_punt_to_the_kernel_forward_in_the_dataplane_and_follow_route_changes() {
    require(&["ping", "tcpdump", "tshark", "sh", "cat"]);
    let lab = Lab::up(2, "1G");
    let (h0, h1) = (port_name(0), port_name(1));

    let dir = tempfile::tempdir().unwrap();
    // h0's route to 10.9.0.0/24 (section 3) goes via the switch too.
    let switch = start_routed(&lab, dir.path());
    lab.host_run(0, "ip", &["route", "add", "10.9.0.0/24", "via", "10.1.0.1"]);
    let link = switch_run(&lab, "ip", &["-br", "link", "show", "dev", &h0]);
    assert!(
        link.contains("UP") && link.contains("02:68:72:00:00:00"),
        "{h0} is not up with the switch MAC: {link}"
    );

    // 1. The switch answers a ping itself: ARP and the echo request are punted to the TAP,
    // the kernel's answers injected.
    ping_all(&lab, "10.1.0.1", 3);
    let row = host_interface(&lab, &h0);
    assert!(
        counter(&row, "punt_frames") >= 4 && counter(&row, "inject_frames") >= 4,
        "ARP and ICMP did not go through the host interface: {row:#}"
    );
    assert!(counter(&row, "dataplane_inject_frames") >= 4, "{row:#}");

    // 2. h0 → h1, routed. The first packets resolve h1's neighbour through the kernel
    // (neighbor_miss); once the mirror has it, the dataplane forwards.
    let forwarded_at_start = kernel_forwarded(&lab);
    resolve_both_hosts(&lab);
    let forwarded_before = kernel_forwarded(&lab);
    // The contrast that shows the counter is read right: the first packet, punted while h1's
    // neighbour was unresolved (neighbor_miss), was forwarded by the kernel.
    assert!(
        forwarded_before > forwarded_at_start,
        "the kernel forwarded nothing while resolving h1 (ForwDatagrams {forwarded_at_start} -> \
         {forwarded_before})"
    );
    let (rif_in_before, rif_out_before) = (
        counter(&host_interface(&lab, &h0), "rif_in_packets"),
        counter(&host_interface(&lab, &h1), "rif_out_packets"),
    );
    let mut capture = Capture::start(&lab, 1, "icmp", dir.path().join("h1.pcap"));
    const PINGS: u64 = 20;
    lab.host_run(
        0,
        "ping",
        &[
            "-c",
            &PINGS.to_string(),
            "-i",
            "0.05",
            "-W",
            "2",
            "10.2.0.0",
        ],
    );
    capture.stop();
    let rows = tshark_checked(&capture.file, "icmp.type == 8");
    assert_eq!(rows.len() as u64, PINGS, "echo requests at h1: {rows:?}");
    for r in &rows {
        // h0 sends with TTL 64; one router hop. ip.checksum.status 1 = Good.
        assert_eq!(
            r,
            &["63", "1", "10.1.0.0"],
            "TTL, checksum status, source: {rows:?}"
        );
    }
    assert_eq!(
        kernel_forwarded(&lab),
        forwarded_before,
        "the kernel forwarded packets headroom should have"
    );
    let rif_in = counter(&host_interface(&lab, &h0), "rif_in_packets") - rif_in_before;
    let rif_out = counter(&host_interface(&lab, &h1), "rif_out_packets") - rif_out_before;
    assert!(
        rif_in >= PINGS && rif_out >= PINGS,
        "routed counters: in {rif_in}, out {rif_out} for {PINGS} pings"
    );

    // A reconfiguration (a drained restart of the dataplane; the host interfaces and the
    // mirror stay) carries the dataplane's routed, punt and inject counters over like every
    // other counter: nothing goes back, and routing goes on.
    let punted =
        |row: &serde_json::Value, reason: &str| row["punted"][reason].as_u64().unwrap_or(0);
    let carried = [
        (&h0, "rif_in_packets"),
        (&h1, "rif_out_packets"),
        (&h0, "dataplane_inject_frames"),
    ];
    let before_reconfig: Vec<u64> = carried
        .iter()
        .map(|(port, key)| counter(&host_interface(&lab, port), key))
        .collect();
    let ip2me_before = punted(&host_interface(&lab, &h0), "ip2me");
    assert!(ip2me_before >= 3, "{:#}", host_interface(&lab, &h0));
    let applied =
        run_ok(Command::new(HEADROOM).args(["set", "pfc", &h0, "3", "--lab", lab.prefix()]));
    assert_eq!(String::from_utf8_lossy(&applied.stdout), "applied\n");
    for ((port, key), before) in carried.iter().zip(&before_reconfig) {
        let now = counter(&host_interface(&lab, port), key);
        assert!(
            now >= *before,
            "{port} {key}: {before} before the reconfiguration, {now} after"
        );
    }
    assert!(punted(&host_interface(&lab, &h0), "ip2me") >= ip2me_before);
    ping_all(&lab, "10.2.0.0", 3);
    let rif_in_after = counter(&host_interface(&lab, &h0), "rif_in_packets");
    assert!(
        rif_in_after >= before_reconfig[0] + 3,
        "routed after the reconfiguration: {} -> {rif_in_after}",
        before_reconfig[0]
    );

    // The operator's view of it.
    let table = json(&lab, &["show", "ip", "route"]);
    let routes = table["routes"].as_array().unwrap();
    let route = |prefix: &str| routes.iter().find(|r| r["prefix"] == prefix).cloned();
    let connected = route("10.2.0.0/31").unwrap_or_else(|| panic!("{table:#}"));
    assert_eq!(connected["code"], "C", "{connected:#}");
    assert_eq!(
        connected["next_hops"][0]["interface"],
        h1.as_str(),
        "{connected:#}"
    );
    let local = route("10.1.0.1/32").unwrap_or_else(|| panic!("{table:#}"));
    assert_eq!(local["action"], "local", "{local:#}");
    assert!(counter(&table["mirror"], "published") >= 1, "{table:#}");
    let text = run_ok(Command::new(HEADROOM).args(["show", "ip", "route", "--lab", lab.prefix()]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("C>* 10.2.0.0/31 is directly connected, Ethernet1"),
        "{text}"
    );

    // 3. Route changes: h0 streams UDP to 10.9.0.1 (nobody's address: only the forwarding
    // matters), one datagram per millisecond from a raw socket, and h1 watches its wire.
    let watch = RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0x0800);
    let target = Ipv4Addr::new(10, 9, 0, 1);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (socket, stop) = (
            RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0),
            Arc::clone(&stop),
        );
        let frame = udp_to(host_mac(0), ROUTER_MAC, Ipv4Addr::new(10, 1, 0, 0), target);
        std::thread::spawn(move || {
            let mut sent = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if socket.send(&frame).is_ok() {
                    sent += 1;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            sent
        })
    };
    let arrived_within = |timeout: Duration| -> Option<Instant> {
        let deadline = Instant::now() + timeout;
        while let Some(frame) = watch.recv(deadline.saturating_duration_since(Instant::now())) {
            if ipv4_destination(&frame) == Some(target) {
                return Some(Instant::now());
            }
        }
        None
    };
    assert_eq!(
        arrived_within(Duration::from_millis(300)),
        None,
        "routed before the route"
    );
    let added = Instant::now();
    switch_run(
        &lab,
        "ip",
        &["route", "add", "10.9.0.0/24", "via", "10.2.0.0"],
    );
    let first =
        arrived_within(Duration::from_secs(5)).expect("traffic never followed the new route");
    let add_ms = first.duration_since(added).as_secs_f64() * 1e3;
    // It keeps following: most of 100 ms of datagrams arrive.
    let mut following = 0;
    let steady = Instant::now();
    while steady.elapsed() < Duration::from_millis(100) {
        if arrived_within(Duration::from_millis(20)).is_some() {
            following += 1;
        }
    }
    assert!(
        following >= 20,
        "{following} datagrams in 100 ms after the route was added"
    );
    let deleted = Instant::now();
    switch_run(&lab, "ip", &["route", "del", "10.9.0.0/24"]);
    // The last datagram to arrive after the delete; none for 500 ms means the route is gone.
    let mut last = deleted;
    while let Some(at) = arrived_within(Duration::from_millis(500)) {
        last = at;
        assert!(
            last.duration_since(deleted) < Duration::from_secs(5),
            "traffic kept following a deleted route"
        );
    }
    stop.store(true, Ordering::Relaxed);
    let sent = sender.join().unwrap();
    let del_ms = last.duration_since(deleted).as_secs_f64() * 1e3;
    eprintln!(
        "route change to dataplane (a datagram per ms, {sent} sent; times include the `ip route` \
         process): add {add_ms:.1} ms, delete {del_ms:.1} ms (target < 100 ms)"
    );
    assert!(
        add_ms < 2000.0 && del_ms < 2000.0,
        "add {add_ms} ms, delete {del_ms} ms"
    );

    // 4. The host interface's carrier follows the port's link (the kernel then drops the
    // connected route's use, and a routing daemon its session): h1's end goes down and up.
    let carrier = |up: bool| {
        eventually(Duration::from_secs(3), || {
            let link = switch_run(&lab, "ip", &["link", "show", "dev", &h1]);
            link.contains("NO-CARRIER") != up
        })
    };
    assert!(carrier(true), "{h1} has no carrier with its link up");
    lab.host_run(1, "ip", &["link", "set", HOST_DEVICE, "down"]);
    assert!(
        carrier(false),
        "{h1} kept its carrier with the port down: {}",
        switch_run(&lab, "ip", &["link", "show", "dev", &h1])
    );
    lab.host_run(1, "ip", &["link", "set", HOST_DEVICE, "up"]);
    assert!(carrier(true), "{h1}'s carrier did not come back");

    let report = switch.stop();
    assert!(
        !report.log.contains("ERROR"),
        "the switch logged errors:\n{}",
        report.log
    );
}

/// TTL, checksum status (verified: `ip.check_checksum`) and source of each frame matching
/// `filter` in `file`.
fn tshark_checked(file: &std::path::Path, filter: &str) -> Vec<Vec<String>> {
    let out = run_ok(
        Command::new("tshark")
            .arg("-r")
            .arg(file)
            .args(["-o", "ip.check_checksum:TRUE", "-Y", filter])
            .args(["-T", "fields", "-E", "separator=|"])
            .args(["-e", "ip.ttl", "-e", "ip.checksum.status", "-e", "ip.src"]),
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}
