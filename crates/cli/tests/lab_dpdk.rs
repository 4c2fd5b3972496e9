//! `headroom lab --driver dpdk`: the lab's switch on DPDK net_af_packet and net_af_xdp vdevs
//! over the same veths forwards, and every mbuf is back in the pool when it stops.
#![cfg(feature = "dpdk")]

mod common;

use common::lab_config::{host_ipv4, LabDriver};
use common::Lab;

fn forwards_on(driver: LabDriver) {
    common::require(&["ping"]);
    let lab = Lab::up(3, "1G");
    let dir = tempfile::tempdir().expect("temp dir");
    let mut spec = lab.spec.clone();
    spec.driver = driver;
    let switch = lab.start_switch_with(&spec, dir.path());
    for (from, to) in [(0, 1), (1, 2), (2, 0)] {
        lab.host_run(
            from,
            "ping",
            &[
                "-c",
                "3",
                "-i",
                "0.2",
                "-W",
                "5",
                &host_ipv4(to).to_string(),
            ],
        );
    }
    // The control socket works on DPDK too: link state from the PMD, counters from the core.
    let socket = format!("/run/headroom/{}-lab.sock", lab.prefix());
    let out = common::run_ok(
        std::process::Command::new(common::HEADROOM)
            .args(["show", "ports", "--json", "-s", &socket]),
    );
    let ports: serde_json::Value = serde_json::from_slice(&out.stdout).expect("show ports --json");
    for (i, port) in ports
        .as_array()
        .expect("an array of ports")
        .iter()
        .enumerate()
    {
        assert_eq!(port["link"], "up", "port {i}: {port}");
        assert!(
            port["rx_frames"].as_u64().unwrap_or(0) >= 6,
            "port {i}: {port}"
        );
    }
    let report = switch.stop();
    // Each ping above is 3 requests and 3 replies through two ports.
    let rx: u64 = (0..3).map(|i| report.port(i).rx_frames).sum();
    let tx: u64 = (0..3).map(|i| report.port(i).tx_frames).sum();
    let log = &report.log;
    assert!(
        rx >= 18 && tx >= 18,
        "too little traffic counted: rx {rx}, tx {tx}\n{log}"
    );
    assert!(
        log.contains("DPDK port open"),
        "the switch did not run on DPDK:\n{log}"
    );
    assert!(
        log.contains("every mbuf is back in the pool"),
        "mbufs were not all returned:\n{log}"
    );
}

#[test]
fn lab_on_dpdk_af_packet_vdevs() {
    forwards_on(LabDriver::Dpdk);
}

#[test]
fn lab_on_dpdk_af_xdp_vdevs() {
    forwards_on(LabDriver::DpdkAfXdp);
}
