//! `headroom lab`: what it builds, that it is idempotent, and what it refuses.

mod common;

use common::lab_config::{self, host_ipv4, host_mac, mac_text, HOST_DEVICE};
use common::{run_ok, Lab, HEADROOM};
use std::path::Path;
use std::process::Command;

fn ns_exists(name: &str) -> bool {
    Path::new("/run/netns").join(name).exists()
}

fn ip_in(namespace: &str, args: &[&str]) -> String {
    let out = run_ok(Command::new("ip").arg("-n").arg(namespace).args(args));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn sysctl_in(namespace: &str, key: &str) -> String {
    let out = run_ok(Command::new("ip").args([
        "netns",
        "exec",
        namespace,
        "cat",
        &format!("/proc/sys/{}", key.replace('.', "/")),
    ]));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// `ethtool -k` features that are on, among those the lab must turn off.
fn offloads_on(namespace: &str, device: &str) -> Vec<String> {
    let out =
        run_ok(Command::new("ip").args(["netns", "exec", namespace, "ethtool", "-k", device]));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| {
            let name = l.trim_start().split(':').next().unwrap_or("");
            let offload = name.starts_with("tx-checksum")
                || name.contains("segmentation")
                || name.contains("receive-offload")
                || name.starts_with("rx-gro");
            offload && l.contains(": on")
        })
        .map(|l| l.trim().to_owned())
        .collect()
}

fn ifindex(namespace: &str, device: &str) -> String {
    ip_in(namespace, &["-o", "link", "show", "dev", device])
        .split(':')
        .next()
        .unwrap_or("")
        .to_owned()
}

#[test]
fn up_builds_the_documented_lab_idempotently_and_down_removes_it() {
    common::require(&["ethtool"]);
    let lab = Lab::up(3, "100M");
    let p = lab.prefix().to_owned();
    let sw = lab.switch_ns();
    assert!(ns_exists(&sw));
    for i in 0..3 {
        let h = lab.host_ns(i);
        assert!(ns_exists(&h), "{h}");
        let addr = ip_in(&h, &["-o", "-4", "addr", "show", "dev", HOST_DEVICE]);
        assert!(
            addr.contains(&format!("inet {}/24", host_ipv4(i))),
            "{addr}"
        );
        let link = ip_in(&h, &["link", "show", "dev", HOST_DEVICE]);
        assert!(link.contains(&mac_text(host_mac(i))), "{link}");
        assert!(link.contains("state UP"), "{link}");
        let neigh = ip_in(&h, &["neigh", "show", "dev", HOST_DEVICE]);
        for j in (0..3).filter(|&j| j != i) {
            let entry = format!(
                "{} lladdr {} PERMANENT",
                host_ipv4(j),
                mac_text(host_mac(j))
            );
            assert!(neigh.contains(&entry), "{h} lacks `{entry}`:\n{neigh}");
        }
        assert_eq!(sysctl_in(&h, "net.ipv6.conf.all.disable_ipv6"), "1");
        assert_eq!(sysctl_in(&h, "net.ipv4.tcp_ecn"), "1");
        assert_eq!(offloads_on(&h, HOST_DEVICE), Vec::<String>::new(), "{h}");
        let dev = lab_config::switch_device(i);
        // Switch ends: up, in the switch namespace, no address of any family.
        let link = ip_in(&sw, &["link", "show", "dev", &dev]);
        assert!(link.contains("state UP"), "{link}");
        let addr = ip_in(&sw, &["addr", "show", "dev", &dev]);
        assert!(!addr.contains("inet"), "{dev} has an address:\n{addr}");
        assert_eq!(offloads_on(&sw, &dev), Vec::<String>::new(), "{dev}");
    }
    assert_eq!(sysctl_in(&sw, "net.ipv6.conf.all.disable_ipv6"), "1");
    assert!(!ns_exists(&lab.host_ns(3)));

    // The generated configuration is valid and names the lab's devices.
    let dir = tempfile::tempdir().unwrap();
    let written = dir.path().join("lab.toml");
    let before = ifindex(&sw, "sw-p0");
    run_ok(
        Command::new(HEADROOM)
            .args(["lab", "up", "--no-switch", "--prefix", &p])
            .args([
                "--hosts",
                "3",
                "--speed",
                "100M",
                "--write-config",
                written.to_str().unwrap(),
            ]),
    );
    // Idempotent: the second `up` reuses the pairs (same interface index) and succeeds.
    assert_eq!(ifindex(&sw, "sw-p0"), before);
    let text = std::fs::read_to_string(&written).unwrap();
    assert_eq!(text, lab.spec.config_toml());
    let check = run_ok(Command::new(HEADROOM).args(["check", "-c", written.to_str().unwrap()]));
    let check = String::from_utf8_lossy(&check.stdout);
    assert!(check.contains("3 ports"), "{check}");
    assert!(check.contains("100 Mb/s"), "{check}");

    // A damaged lab is repaired: a deleted pair and a deleted neighbour come back.
    ip_in(&sw, &["link", "del", "sw-p1"]);
    ip_in(
        &lab.host_ns(0),
        &[
            "neigh",
            "del",
            &host_ipv4(2).to_string(),
            "dev",
            HOST_DEVICE,
        ],
    );
    run_ok(Command::new(HEADROOM).args([
        "lab",
        "up",
        "--no-switch",
        "--prefix",
        &p,
        "--hosts",
        "3",
    ]));
    assert!(ip_in(&lab.host_ns(1), &["-o", "-4", "addr"]).contains(&host_ipv4(1).to_string()));
    assert!(ip_in(&lab.host_ns(0), &["neigh"]).contains(&format!("{} ", host_ipv4(2))));

    // Fewer hosts: the extra host goes.
    run_ok(Command::new(HEADROOM).args([
        "lab",
        "up",
        "--no-switch",
        "--prefix",
        &p,
        "--hosts",
        "2",
    ]));
    assert!(!ns_exists(&lab.host_ns(2)));
    assert!(ns_exists(&lab.host_ns(1)));

    // Down removes everything; down again is harmless.
    let out = run_ok(Command::new(HEADROOM).args(["lab", "down", "--prefix", &p]));
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed lab"));
    for name in [sw.clone(), lab.host_ns(0), lab.host_ns(1)] {
        assert!(!ns_exists(&name), "{name} is still there");
    }
    let out = run_ok(Command::new(HEADROOM).args(["lab", "down", "--prefix", &p]));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no lab"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn refuses_without_root_with_exit_2() {
    common::require(&["setpriv"]);
    for args in [
        &["lab", "up", "--no-switch", "--prefix", "e2e-nonroot"][..],
        &["lab", "--prefix", "e2e-nonroot"][..],
        &["lab", "down", "--prefix", "e2e-nonroot"][..],
    ] {
        let out = Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", HEADROOM])
            .args(args)
            .output()
            .expect("setpriv");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("needs root"), "{args:?}: {stderr}");
    }
    assert!(!ns_exists("e2e-nonroot-sw"));
}

#[test]
fn refuses_bad_arguments_before_building_anything() {
    common::require(&[]);
    // The speed is every generated port's: its error may name the ports, but says the flag.
    for (args, expected) in [
        (&["--hosts", "1"][..], &["--hosts"][..]),
        (&["--hosts", "65"][..], &["--hosts"][..]),
        (
            &["--speed", "fast"][..],
            &["--speed fast: ", "\"fast\" is not a speed"][..],
        ),
        (
            &["--speed", "0"][..],
            &["--speed 0: ", "0 Mb/s is out of range"][..],
        ),
        (&["--speed", "1\"G"][..], &["--speed"][..]),
    ] {
        let out = Command::new(HEADROOM)
            .args(["lab", "up", "--no-switch", "--prefix", "e2e-badargs"])
            .args(args)
            .output()
            .expect("headroom");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.starts_with("headroom lab: "), "{args:?}: {stderr}");
        for part in expected {
            assert!(stderr.contains(part), "{args:?}: {stderr}");
        }
    }
    for prefix in ["Bad", "a/b", "", "abcdefghijklmnopq"] {
        let out = Command::new(HEADROOM)
            .args(["lab", "up", "--no-switch", "--prefix", prefix])
            .output()
            .expect("headroom");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{prefix:?}: {stderr}");
        assert!(
            stderr.contains("headroom lab: --prefix"),
            "{prefix:?}: {stderr}"
        );
    }
    assert!(!ns_exists("e2e-badargs-sw"));
}

#[test]
fn a_second_switch_on_the_same_lab_is_refused_and_the_first_keeps_running() {
    common::require(&["ping"]);
    let lab = Lab::up(2, "1G");
    let mut switch = lab.start_switch();
    let out = Command::new(HEADROOM)
        .args(["lab", "--prefix", lab.prefix(), "--hosts", "2"])
        .output()
        .expect("headroom");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("already runs"), "{stderr}");
    assert!(stderr.contains(&switch.pid().to_string()), "{stderr}");
    assert!(switch.is_running());
    lab.host_run(
        0,
        "ping",
        &["-c", "1", "-W", "5", &host_ipv4(1).to_string()],
    );
    let report = switch.stop();
    assert!(report.port(0).rx_frames >= 1);
}
