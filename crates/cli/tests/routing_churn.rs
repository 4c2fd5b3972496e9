//! Issue 13's "Done when" for route churn and punt floods, end to end on the routed rig of
//! `common::routed` (switch S, h0 on Ethernet0, h1 on Ethernet1). In both tests h0 sends a
//! sequenced UDP flow (a datagram per millisecond, payload = the u64 sequence number) to a
//! kernel UDP socket in h1, routed by headroom over route A (h1's connected /31), and the test
//! asserts that every sequence number arrived:
//! * route churn: ~50 add/delete cycles of other routes and `ip neigh replace` of another
//!   neighbour in S, each change visible in the dataplane (`show ip route`: the FIB and next hops
//!   last sent to the lcores, read from the running switch) in under 100 ms, with nothing lost
//!   on A and no drop on its ports; a deleted route stops forwarding (the probe can fail);
//! * an ARP flood at the switch, well above the ARP CoPP rate (600/s, `PuntParams::default`),
//!   is dropped as `punt_rate_limit` for what is over the rate, the flow loses nothing and the
//!   switch still answers ping.

mod common;

use common::lab_config::{host_mac, port_name, HOST_DEVICE};
use common::routed::{
    counter, host_interface, ipv4_destination, json, ping_all, resolve_both_hosts, start_routed,
    switch_run, udp_to, udp_with, ROUTER_MAC,
};
use common::{eventually, require, Lab, RawSocket};
use headroom_afpacket::lab::NetnsGuard;
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const H0: Ipv4Addr = Ipv4Addr::new(10, 1, 0, 0);
const H1: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 0);
/// h1's UDP port of the sequenced flow.
const FLOW_PORT: u16 = 5001;
/// What a change may take to reach the dataplane (issue 13).
const CHANGE_BUDGET: Duration = Duration::from_millis(100);

/// h0 → h1's kernel UDP socket, a datagram per millisecond carrying its sequence number.
struct SequencedFlow {
    stop: Arc<AtomicBool>,
    /// Datagrams sent and sends h0's socket refused (retried).
    sender: JoinHandle<(u64, u64)>,
    receiver: JoinHandle<Vec<u64>>,
}

impl SequencedFlow {
    fn start(lab: &Lab) -> Self {
        let ns = lab.host_ns(1);
        // The socket belongs to h1's namespace: made on a thread that entered it.
        let socket = std::thread::spawn(move || {
            let _inside = NetnsGuard::enter(&ns).expect("entering h1");
            UdpSocket::bind((H1, FLOW_PORT)).expect("binding h1's UDP socket")
        })
        .join()
        .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let receiver = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut seen = Vec::new();
                let mut buf = [0u8; 64];
                let mut quiet_since: Option<Instant> = None;
                loop {
                    match socket.recv(&mut buf) {
                        Ok(8) => {
                            seen.push(u64::from_be_bytes(buf[..8].try_into().unwrap()));
                            quiet_since = None;
                        }
                        Ok(n) => panic!("a {n}-byte datagram on the flow's port"),
                        Err(_) if stop.load(Ordering::Relaxed) => {
                            // The sender stopped: what is still in flight gets 500 ms.
                            let since = *quiet_since.get_or_insert_with(Instant::now);
                            if since.elapsed() > Duration::from_millis(500) {
                                return seen;
                            }
                        }
                        Err(_) => {}
                    }
                }
            })
        };
        let sender = {
            let stop = Arc::clone(&stop);
            let socket = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
            std::thread::spawn(move || {
                let (mut sequence, mut refused) = (0u64, 0u64);
                let mut next = Instant::now();
                while !stop.load(Ordering::Relaxed) {
                    let frame = udp_with(
                        host_mac(0),
                        ROUTER_MAC,
                        H0,
                        H1,
                        FLOW_PORT,
                        &sequence.to_be_bytes(),
                    );
                    // A refused send (ENOBUFS) is retried with the same number: only what
                    // left h0 counts.
                    if socket.send(&frame).is_ok() {
                        sequence += 1;
                    } else {
                        refused += 1;
                    }
                    next += Duration::from_millis(1);
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                (sequence, refused)
            })
        };
        Self {
            stop,
            sender,
            receiver,
        }
    }

    /// Stops the flow and asserts that every datagram sent arrived; returns how many.
    fn stop_and_check(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let (sent, refused) = self.sender.join().unwrap();
        eprintln!("sequenced flow: {sent} datagrams sent ({refused} sends refused and retried)");
        let mut seen = self.receiver.join().unwrap();
        seen.sort_unstable();
        seen.dedup();
        let missing: Vec<u64> = (0..sent)
            .filter(|n| seen.binary_search(n).is_err())
            .collect();
        assert!(
            missing.is_empty(),
            "{} of {sent} datagrams of route A lost (first: {:?})",
            missing.len(),
            &missing[..missing.len().min(20)]
        );
        assert!(sent > 500, "the flow hardly ran: {sent} datagrams");
        sent
    }
}

/// Drops by reason of Ethernet0 and Ethernet1 (route A's ingress and egress), `show ports`.
fn path_drops(lab: &Lab) -> BTreeMap<String, u64> {
    let ports = json(lab, &["show", "ports"]);
    let mut drops = BTreeMap::new();
    for row in ports.as_array().unwrap() {
        let port = row["port"].as_str().unwrap();
        if port == port_name(0) || port == port_name(1) {
            for (reason, n) in row["drops"].as_object().unwrap() {
                drops.insert(format!("{port} {reason}"), n.as_u64().unwrap());
            }
        }
    }
    drops
}

fn has_route(lab: &Lab, prefix: &str) -> bool {
    json(lab, &["show", "ip", "route"])["routes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["prefix"] == prefix)
}

/// Polls `condition` (which reads the running switch) until it holds; the time from `since`.
fn time_until(since: Instant, what: &str, mut condition: impl FnMut() -> bool) -> Duration {
    let deadline = since + Duration::from_secs(5);
    while !condition() {
        assert!(
            Instant::now() < deadline,
            "{what}: not in the dataplane after 5 s"
        );
    }
    since.elapsed()
}

fn median_max(times: &mut [Duration]) -> (f64, f64) {
    times.sort_unstable();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    (ms(times[times.len() / 2]), ms(times[times.len() - 1]))
}

#[test]
fn route_churn_loses_nothing_on_an_unaffected_route_and_each_change_is_fast() {
    require(&["ping", "sh"]);
    let lab = Lab::up(2, "1G");
    // From here: the test's own time (Lab::up waits for the machine-wide test lock).
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let switch = start_routed(&lab, dir.path());
    let (h0, h1) = (port_name(0), port_name(1));
    // Another subnet on Ethernet0 for the churned neighbour (nobody is there: a permanent
    // entry is the whole neighbour).
    switch_run(&lab, "ip", &["addr", "add", "10.3.0.1/24", "dev", &h0]);
    resolve_both_hosts(&lab);

    // Negative control: a probe to a route reaches h1 while the route exists and stops when
    // it is deleted, so "the dataplane has it" is observable at all.
    let watch = RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0x0800);
    let probe_socket = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let probe_target = Ipv4Addr::new(10, 99, 0, 1);
    let probe = udp_to(host_mac(0), ROUTER_MAC, H0, probe_target);
    let probe_arrives = |within: Duration| {
        let deadline = Instant::now() + within;
        while Instant::now() < deadline {
            probe_socket.send(&probe).unwrap();
            let until = Instant::now() + Duration::from_millis(10);
            while let Some(f) = watch.recv(until.saturating_duration_since(Instant::now())) {
                if ipv4_destination(&f) == Some(probe_target) {
                    return true;
                }
            }
        }
        false
    };
    switch_run(
        &lab,
        "ip",
        &["route", "add", "10.99.0.0/24", "via", "10.2.0.0"],
    );
    let added = Instant::now();
    assert!(
        probe_arrives(Duration::from_secs(2)),
        "a probe never followed 10.99.0.0/24 to h1"
    );
    // The same measure end to end, once (a probe every ~10 ms, so its resolution is coarse),
    // before the churn: the probes that find no route are dropped on the flow's port.
    let probe_ms = added.elapsed().as_secs_f64() * 1e3;
    switch_run(&lab, "ip", &["route", "del", "10.99.0.0/24"]);
    time_until(Instant::now(), "delete of 10.99.0.0/24", || {
        !has_route(&lab, "10.99.0.0/24")
    });
    watch.drain(Duration::from_millis(50));
    assert!(
        !probe_arrives(Duration::from_millis(300)),
        "probes kept reaching h1 after 10.99.0.0/24 was deleted"
    );

    // A standing route via the churned neighbour: its next hop's MAC follows the neighbour.
    switch_run(
        &lab,
        "ip",
        &[
            "neigh",
            "replace",
            "10.3.0.2",
            "lladdr",
            "02:00:00:00:03:ff",
            "dev",
            &h0,
            "nud",
            "permanent",
        ],
    );
    switch_run(
        &lab,
        "ip",
        &["route", "add", "10.101.0.0/24", "via", "10.3.0.2"],
    );
    let drops_before = path_drops(&lab);
    let flow = SequencedFlow::start(&lab);
    const CYCLES: u8 = 50;
    let (mut adds, mut deletes, mut neighbours) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..CYCLES {
        // Alternately via h1 (the flow's own next hop and port) and via the churned neighbour
        // on the flow's ingress port.
        let prefix = format!("10.100.{i}.0/24");
        let via = if i % 2 == 0 { "10.2.0.0" } else { "10.3.0.2" };
        let mac = format!("02:00:00:00:03:{i:02x}");
        switch_run(
            &lab,
            "ip",
            &[
                "neigh",
                "replace",
                "10.3.0.2",
                "lladdr",
                &mac,
                "dev",
                &h0,
                "nud",
                "permanent",
            ],
        );
        let at = Instant::now();
        neighbours.push(time_until(at, "neighbour 10.3.0.2", || {
            // The FIB's next hop (what the lcores were sent), not the mirror's neighbour.
            json(&lab, &["show", "ip", "route"])["routes"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["prefix"] == "10.101.0.0/24" && r["next_hops"][0]["mac"] == mac.as_str())
        }));
        switch_run(&lab, "ip", &["route", "add", &prefix, "via", via]);
        let at = Instant::now();
        adds.push(time_until(at, &prefix, || has_route(&lab, &prefix)));
        switch_run(&lab, "ip", &["route", "del", &prefix]);
        let at = Instant::now();
        deletes.push(time_until(at, &prefix, || !has_route(&lab, &prefix)));
    }
    let sent = flow.stop_and_check();
    let drops_after = path_drops(&lab);
    let (add_median, add_max) = median_max(&mut adds);
    let (del_median, del_max) = median_max(&mut deletes);
    let (neigh_median, neigh_max) = median_max(&mut neighbours);
    eprintln!(
        "{CYCLES} churn cycles while {sent} datagrams crossed route A, none lost; change to \
         dataplane (from the `ip` command's return until `show ip …` of the running switch has it; \
         includes a CLI process per poll): route add median {add_median:.1} ms max {add_max:.1} \
         ms, delete median {del_median:.1} ms max {del_max:.1} ms, neighbour replace median \
         {neigh_median:.1} ms max {neigh_max:.1} ms; first probe to a new route after {probe_ms:.1} ms; test {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        drops_after, drops_before,
        "drops on route A's ports ({h0}, {h1}) moved during the churn"
    );
    let budget_ms = CHANGE_BUDGET.as_secs_f64() * 1e3;
    assert!(
        add_max < budget_ms && del_max < budget_ms && neigh_max < budget_ms,
        "a change took {add_max:.1} / {del_max:.1} / {neigh_max:.1} ms (add / delete / \
         neighbour), over {budget_ms} ms"
    );
    let report = switch.stop();
    assert!(!report.log.contains("ERROR"), "{}", report.log);
}

/// An ARP request from h0 for the switch's 10.1.0.1, broadcast.
fn arp_request() -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend([0xFF; 6]);
    f.extend(host_mac(0));
    f.extend([0x08, 0x06]);
    // htype Ethernet, ptype IPv4, hlen 6, plen 4, op request (RFC 826).
    f.extend([0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x01]);
    f.extend(host_mac(0));
    f.extend(H0.octets());
    f.extend([0; 6]);
    f.extend([10, 1, 0, 1]);
    f
}

#[test]
fn an_arp_flood_is_policed_by_copp_and_survived() {
    require(&["ping", "sh"]);
    let lab = Lab::up(2, "1G");
    // From here: the test's own time (Lab::up waits for the machine-wide test lock).
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let switch = start_routed(&lab, dir.path());
    let h0 = port_name(0);
    resolve_both_hosts(&lab);

    let arp_punted = || {
        host_interface(&lab, &h0)["punted"]["arp_req"]
            .as_u64()
            .unwrap_or(0)
    };
    let policed = || {
        json(&lab, &["show", "ports"])
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["port"] == h0.as_str())
            .unwrap()["drops"]["punt_rate_limit"]
            .as_u64()
            .unwrap_or(0)
    };
    let (punted_before, policed_before) = (arp_punted(), policed());
    let flow = SequencedFlow::start(&lab);
    std::thread::sleep(Duration::from_millis(200)); // the flow runs before and after the flood
                                                    // 5 ARP requests per millisecond for 2 s: 5,000/s against CoPP's 600/s.
    const FLOOD: Duration = Duration::from_secs(2);
    let flood_socket = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let arp = arp_request();
    let (mut flooded, mut refused) = (0u64, 0u64);
    let flood_start = Instant::now();
    let mut next = flood_start;
    while flood_start.elapsed() < FLOOD {
        for _ in 0..5 {
            match flood_socket.send(&arp) {
                Ok(()) => flooded += 1,
                Err(_) => refused += 1,
            }
        }
        next += Duration::from_millis(1);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    let flood_s = flood_start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(200));
    let sent = flow.stop_and_check();

    // Every request is either punted (within the rate) or policed: wait until they add up.
    let mut counts = (0, 0);
    eventually(Duration::from_secs(3), || {
        counts = (arp_punted() - punted_before, policed() - policed_before);
        counts.0 + counts.1 >= flooded
    });
    let (punted, dropped) = counts;
    // CIR = CBS = 600/s: at most a full bucket plus the rate over the flood.
    let allowed = 600.0 * (1.0 + flood_s);
    eprintln!(
        "ARP flood: {flooded} requests in {flood_s:.2} s ({refused} refused by h0's socket), \
         {punted} punted (allowed at most {allowed:.0}), {dropped} dropped as punt_rate_limit; \
         {sent} datagrams of the flow, none lost; test {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(
        flooded >= 6000,
        "the flood was too slow: {flooded} in {flood_s:.2} s"
    );
    assert_eq!(
        punted + dropped,
        flooded,
        "requests neither punted nor policed"
    );
    assert!(punted as f64 <= allowed * 1.1, "CoPP let {punted} through");
    assert!(
        dropped as f64 >= flooded as f64 - allowed * 1.1,
        "only {dropped} of {flooded} policed"
    );
    ping_all(&lab, "10.1.0.1", 3);
    let row = host_interface(&lab, &h0);
    assert_eq!(counter(&row, "punt_tap_full"), 0, "{row:#}");
    let report = switch.stop();
    assert!(!report.log.contains("ERROR"), "{}", report.log);
}
