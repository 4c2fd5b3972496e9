//! The lab behaves like a network: its hosts are static MAC table entries, so a host that only
//! receives (permanent neighbours, no IPv6: it never sends) is not flooded to; the entries show
//! as `static` in `show fdb`, survive `clear fdb all`, and learning does not move them. Without
//! them (`static_fdb = false`) the same frame is flooded: the check can fail.

mod common;

use common::lab_config::{host_mac, port_name, HOST_DEVICE};
use common::{
    require, run_ok, test_frame, test_frame_tag, Lab, RawSocket, HEADROOM, TEST_ETHERTYPE,
};
use std::process::Command;
use std::time::Duration;

fn json(lab: &Lab, args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--json", "--lab", lab.prefix()]);
    let o = run_ok(Command::new(HEADROOM).args(&all));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// h0 sends one frame to h2's MAC (h2 has never sent anything): who gets it?
fn receivers_of_a_frame_to_a_silent_host(lab: &Lab, tag: u32) -> [bool; 3] {
    let sockets: Vec<RawSocket> = (0..3)
        .map(|i| RawSocket::open(&lab.host_ns(i), HOST_DEVICE, TEST_ETHERTYPE))
        .collect();
    RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0)
        .send(&test_frame(host_mac(2), host_mac(0), tag, 64))
        .expect("send");
    let got = |i: usize| {
        sockets[i]
            .drain(Duration::from_millis(500))
            .iter()
            .any(|f| test_frame_tag(f) == Some(tag))
    };
    [got(0), got(1), got(2)]
}

#[test]
fn lab_hosts_are_static_fdb_entries_and_are_not_flooded_to() {
    require(&[]);
    let lab = Lab::up(3, "1G");
    let switch = lab.start_switch();
    let fdb = json(&lab, &["show", "fdb"]);
    let rows = fdb.as_array().unwrap();
    assert_eq!(rows.len(), 3, "{fdb:#}");
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["kind"], "static", "{fdb:#}");
        assert_eq!(row["port"], port_name(i), "{fdb:#}");
        assert_eq!(row["vlan"], 1);
    }
    // Only h2 gets the frame to h2, though h2 never sent a frame the switch could learn from.
    assert_eq!(
        receivers_of_a_frame_to_a_silent_host(&lab, 0x51),
        [false, false, true]
    );
    // Clearing the table keeps the configured entries (SONiC's sonic-clear fdb keeps static
    // ones) and learning h2's MAC elsewhere does not move it.
    run_ok(Command::new(HEADROOM).args(["clear", "fdb", "all", "--lab", lab.prefix()]));
    RawSocket::open(&lab.host_ns(1), HOST_DEVICE, 0)
        .send(&test_frame([0xFF; 6], host_mac(2), 0x52, 64))
        .expect("send");
    std::thread::sleep(Duration::from_millis(200));
    let fdb = json(&lab, &["show", "fdb"]);
    assert_eq!(fdb.as_array().unwrap().len(), 3, "{fdb:#}");
    assert_eq!(fdb[2]["port"], port_name(2), "{fdb:#}");
    assert_eq!(fdb[2]["kind"], "static", "{fdb:#}");
    let text = run_ok(Command::new(HEADROOM).args(["show", "fdb", "--lab", lab.prefix()]));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("Type"), "{text}");
    assert_eq!(text.matches("static").count(), 3, "{text}");
    switch.stop();

    // The contrast: without the static entries the switch floods the frame to every port.
    let mut spec = lab.spec.clone();
    spec.static_fdb = false;
    let dir = tempfile::tempdir().unwrap();
    let switch = lab.start_switch_with(&spec, dir.path());
    assert_eq!(
        receivers_of_a_frame_to_a_silent_host(&lab, 0x53),
        [false, true, true],
        "without static entries the frame to the silent host should be flooded"
    );
    switch.stop();
}
