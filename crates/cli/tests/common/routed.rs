//! One switch S with two routed ports (`vlan_mode = "routed"`) on veths to hosts h0
//! (10.1.0.0/31, the switch 10.1.0.1) and h1 (10.2.0.0/31, the switch 10.2.0.1); the addresses
//! are the kernel's, on the host interfaces (TAPs) headroom creates, and the kernel forwards too
//! (IP forwarding on). Shared by the routed-port tests (`routing`, `routing_churn`).

use super::lab_config::HOST_DEVICE;
use super::{eventually, run_ok, Lab, Switch, HEADROOM};
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;

/// The switch's MAC (the lab's `switch.mac`): every routed port's router MAC.
pub const ROUTER_MAC: [u8; 6] = [0x02, 0x68, 0x72, 0x00, 0x00, 0x00];

/// `headroom show ... --json` of the lab's switch.
pub fn json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--json", "--lab", lab.prefix()]);
    let o = run_ok(Command::new(HEADROOM).args(&all));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// Runs `program args...` in the switch's namespace S.
pub fn switch_run(lab: &Lab, program: &str, args: &[&str]) -> String {
    let out = run_ok(
        Command::new("ip")
            .args(["netns", "exec", &lab.switch_ns(), program])
            .args(args),
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The host interface row of `port` in `show host-interfaces --json`.
pub fn host_interface(lab: &Lab, port: &str) -> serde_json::Value {
    let view = json(lab, &["show", "host-interfaces"]);
    view["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["interface"] == port)
        .unwrap_or_else(|| panic!("no host interface {port}: {view:#}"))
        .clone()
}

pub fn counter(row: &serde_json::Value, key: &str) -> u64 {
    row[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {row:#}"))
}

/// The IPv4 destination of an untagged IPv4 frame.
pub fn ipv4_destination(frame: &[u8]) -> Option<Ipv4Addr> {
    (frame.get(12..14)? == [0x08, 0x00])
        .then(|| Ipv4Addr::new(frame[30], frame[31], frame[32], frame[33]))
}

/// A UDP datagram from `src` to `dst`, TTL 64, 32 bytes of payload.
pub fn udp_to(src_mac: [u8; 6], dst_mac: [u8; 6], src: Ipv4Addr, dst: Ipv4Addr) -> Vec<u8> {
    udp_with(src_mac, dst_mac, src, dst, 9, &[0x5A; 32])
}

/// A UDP datagram from `src` port 40000 to `dst`:`dst_port` carrying `payload`, TTL 64.
pub fn udp_with(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    dst_port: u16,
    payload: &[u8],
) -> Vec<u8> {
    let builder = etherparse::PacketBuilder::ethernet2(src_mac, dst_mac)
        .ipv4(src.octets(), dst.octets(), 64)
        .udp(40000, dst_port);
    let mut frame = Vec::with_capacity(builder.size(payload.len()));
    builder
        .write(&mut frame, payload)
        .expect("building a UDP frame");
    frame
}

/// h0 pings `target` `count` times, 50 ms apart; every one must be answered.
pub fn ping_all(lab: &Lab, target: &str, count: u64) {
    let out = lab.host_run(
        0,
        "ping",
        &["-c", &count.to_string(), "-i", "0.05", "-W", "2", target],
    );
    assert!(
        out.contains(&format!("{count} packets transmitted, {count} received")),
        "pings to {target} were lost:\n{out}"
    );
}

/// Starts the switch with both ports of a 2-host `lab` routed, and addresses on hosts and
/// host interfaces as the module doc says (each host routes the other's /31 via the switch).
/// The configuration lives in `dir`.
pub fn start_routed(lab: &Lab, dir: &std::path::Path) -> Switch {
    // The lab's configuration with both ports routed (and no static FDB: routed ports learn
    // no stations).
    let mut spec = lab.spec.clone();
    spec.static_fdb = false;
    spec.lldp = lab.lldp;
    let generated = spec.config_toml();
    let routed = generated.replace(
        "vlan_mode = \"access\"\naccess_vlan = 1\n",
        "vlan_mode = \"routed\"\n",
    );
    assert_ne!(routed, generated, "the lab's VLAN keys moved");
    let path = dir.join("routed.toml");
    std::fs::write(&path, routed).unwrap();

    // Hosts: a /31 each, routes via the switch.
    for (i, own, peer_net, other) in [
        (0, "10.1.0.0/31", "10.1.0.1", "10.2.0.0/31"),
        (1, "10.2.0.0/31", "10.2.0.1", "10.1.0.0/31"),
    ] {
        lab.host_run(i, "ip", &["addr", "flush", "dev", HOST_DEVICE]);
        lab.host_run(i, "ip", &["addr", "add", own, "dev", HOST_DEVICE]);
        lab.host_run(i, "ip", &["route", "add", other, "via", peer_net]);
    }

    let switch = lab.start_switch_args(&["--config", path.to_str().unwrap()]);
    // The host interfaces exist, named as the ports; the kernel's side of the router.
    switch_run(lab, "sh", &["-c", "echo 1 > /proc/sys/net/ipv4/ip_forward"]);
    let (h0, h1) = (
        super::lab_config::port_name(0),
        super::lab_config::port_name(1),
    );
    switch_run(lab, "ip", &["addr", "add", "10.1.0.1/31", "dev", &h0]);
    switch_run(lab, "ip", &["addr", "add", "10.2.0.1/31", "dev", &h1]);
    switch
}

/// Pings h1 from h0 until the mirror has both hosts' neighbours resolved (the first packets
/// to an unresolved neighbour go through the kernel: neighbor_miss). Panics after 5 s.
pub fn resolve_both_hosts(lab: &Lab) {
    ping_all(lab, "10.2.0.0", 2);
    let resolved = eventually(Duration::from_secs(5), || {
        let neighbours = json(lab, &["show", "ip", "neighbors"]);
        ["10.1.0.0", "10.2.0.0"].iter().all(|addr| {
            neighbours
                .as_array()
                .unwrap()
                .iter()
                .any(|n| n["address"] == *addr && n["resolved"] == true)
        })
    });
    assert!(
        resolved,
        "the mirror never resolved both hosts: {:#}",
        json(lab, &["show", "ip", "neighbors"])
    );
}
