//! Every scenario error names file, line, column, key and reason (like the switch
//! configuration's, crates/config/tests/errors.rs).

use headroom_sim::scenario::{parse, LoadOptions};
use std::path::Path;

const BASE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/sim");

const GOOD: &str = r#"
[simulation]
duration = "1ms"

[topology]
shape = "single_switch"
hosts = 3
link_rate = "40G"

[switch]
config = "switch-40g-4p.toml"

[[flow]]
src = "h0"
dst = "h2"
size = "1MB"
"#;

fn errors(text: &str) -> Vec<String> {
    match parse(text, "t.toml", Path::new(BASE), &LoadOptions::default()) {
        Ok(_) => Vec::new(),
        Err(e) => e.0.iter().map(ToString::to_string).collect(),
    }
}

fn assert_has(errors: &[String], prefix: &str) {
    assert!(
        errors.iter().any(|e| e.starts_with(prefix)),
        "no error starts with {prefix:?}: {errors:#?}"
    );
}

#[test]
fn the_good_scenario_is_accepted() {
    assert_eq!(errors(GOOD), Vec::<String>::new());
}

#[test]
fn syntax_and_schema_errors_have_a_location_and_key() {
    assert_has(&errors("[simulation\n"), "t.toml:1:");
    assert_has(
        &errors(&GOOD.replace("hosts = 3", "hosts = 3\ncolour = 1")),
        "t.toml:8:1: topology.colour: unknown field `colour`",
    );
    assert_has(
        &errors(&GOOD.replace("duration = \"1ms\"\n", "")),
        "t.toml:2:1: simulation.duration: missing (required key)",
    );
}

#[test]
fn bad_values_name_their_key() {
    assert_has(
        &errors(&GOOD.replace("duration = \"1ms\"", "duration = \"1 fortnight\"")),
        "t.toml:3:12: simulation.duration: \"1 fortnight\" is not a duration",
    );
    assert_has(
        &errors(&GOOD.replace("link_rate = \"40G\"", "link_rate = \"fast\"")),
        "t.toml:8:13: topology.link_rate: \"fast\" is not a rate",
    );
    assert_has(
        &errors(&GOOD.replace("dst = \"h2\"", "dst = \"h9\"")),
        "t.toml:15:7: flow[0].dst: no host \"h9\" (hosts: h0, h1, h2)",
    );
    assert_has(
        &errors(&GOOD.replace("size = \"1MB\"", "size = \"lots\"")),
        "t.toml:16:8: flow[0].size: \"lots\" is not a size",
    );
    assert_has(
        &errors(&GOOD.replace("shape = \"single_switch\"", "shape = \"torus\"")),
        "t.toml:6:9: topology.shape: unknown shape \"torus\"",
    );
    assert_has(
        &errors(&format!("{GOOD}\n[nic]\ndcqcn = \"maybe\"\n")),
        "t.toml:19:9: nic.dcqcn: \"maybe\": expected",
    );
    // The RC transport's limits are the scenario's, with the key (not the NIC's refusal).
    for (line, message) in [
        (
            "window_packets = 0",
            "t.toml:19:18: nic.window_packets: 0 not in 1..=8388607",
        ),
        (
            "window_packets = 8388608",
            "t.toml:19:18: nic.window_packets: 8388608 not in 1..=8388607",
        ),
        (
            "send_queue_depth = 0",
            "t.toml:19:20: nic.send_queue_depth: 0 not in 1..=65536",
        ),
        (
            "send_queue_depth = 1000000000000",
            "t.toml:19:20: nic.send_queue_depth: 1000000000000 not in 1..=65536",
        ),
        (
            "ack_every = 0",
            "t.toml:19:13: nic.ack_every: 0 not in 1..=65536",
        ),
        (
            "retransmit_timeout = \"0us\"",
            "t.toml:19:22: nic.retransmit_timeout: must be > 0",
        ),
    ] {
        assert_has(&errors(&format!("{GOOD}\n[nic]\n{line}\n")), message);
    }
    assert_has(
        &errors(&format!(
            "{GOOD}\n[[random]]\ncdf = \"websearch\"\nload = 1.5\nstop = \"1ms\"\n"
        )),
        "t.toml:20:8: random[0].load: 1.5 not in (0, 1]",
    );
}

#[test]
fn routed_shapes_are_built_and_their_keys_checked() {
    let fat = GOOD.replace(
        "shape = \"single_switch\"\nhosts = 3",
        "shape = \"fat_tree\"\nk = 4",
    );
    let s = parse(&fat, "t.toml", Path::new(BASE), &LoadOptions::default()).unwrap();
    assert!(s.topology.routed);
    assert_eq!(
        (
            s.topology.hosts.len(),
            s.topology.switches.len(),
            s.topology.links.len()
        ),
        (16, 20, 48)
    );
    assert!(
        s.topology.degrees().iter().all(|&d| d == 4),
        "every switch has k ports"
    );
    let odd = fat.replace("k = 4", "k = 5");
    assert_has(
        &errors(&odd),
        "t.toml:7:5: topology.k: 5: a fat tree's k is even",
    );
    assert_has(
        &errors(&fat.replace("k = 4", "k = 18")),
        "t.toml:7:5: topology.k: 18 not in 2..=16",
    );
    // More links than the configuration's 4 ports (k = 6: six per switch).
    assert!(errors(&fat.replace("k = 4", "k = 6"))[0]
        .contains("4 ports, but switch edge0_0 has 6 links"));
    let ls = GOOD.replace(
        "shape = \"single_switch\"\nhosts = 3",
        "shape = \"leaf_spine\"\nleaves = 2\nspines = 2\nhosts_per_leaf = 2",
    );
    let s = parse(&ls, "t.toml", Path::new(BASE), &LoadOptions::default()).unwrap();
    assert_eq!(
        s.topology.switches,
        ["leaf0", "leaf1", "spine0", "spine1"].map(String::from)
    );
    assert_has(
        &errors(&ls.replace("spines = 2\n", "")),
        "t.toml:5:2: topology.spines: missing (required for shape \"leaf_spine\")",
    );
    // Router interfaces take untagged frames.
    let tagged = format!("{ls}vlan = 10\n");
    assert_has(
        &errors(&tagged),
        "t.toml:19:8: flow[0].vlan: a routed topology's ports",
    );
    let seeded = ls.replace(
        "hosts_per_leaf = 2",
        "hosts_per_leaf = 2\necmp_hash_seed = \"same\"",
    );
    assert_has(
        &errors(&seeded),
        "t.toml:10:18: topology.ecmp_hash_seed: \"same\": expected \"per_switch\" or an integer seed",
    );
    let same = ls.replace(
        "hosts_per_leaf = 2",
        "hosts_per_leaf = 2\necmp_hash_seed = 7",
    );
    assert!(errors(&same).is_empty(), "{:?}", errors(&same));
    let bridged = GOOD.replace("hosts = 3", "hosts = 3\necmp_hash_seed = 7");
    assert_has(
        &errors(&bridged),
        "t.toml:8:18: topology.ecmp_hash_seed: only routed shapes",
    );
    // A ring: routed one way, clockwise; each switch's hosts, then its two ring links.
    let ring = GOOD.replace(
        "shape = \"single_switch\"\nhosts = 3",
        "shape = \"ring\"\nswitches = 3\nhosts_per_switch = 1",
    );
    let s = parse(&ring, "t.toml", Path::new(BASE), &LoadOptions::default()).unwrap();
    assert!(s.topology.routed && s.topology.routes_one_way);
    assert_eq!(s.topology.switches, ["s0", "s1", "s2"].map(String::from));
    assert_eq!(s.topology.degrees(), [3, 3, 3]);
    assert_has(
        &errors(&ring.replace("switches = 3", "switches = 2")),
        "t.toml:7:12: topology.switches: 2 not in 3..=64",
    );
    assert_has(
        &errors(&ring.replace("hosts_per_switch = 1\n", "")),
        "t.toml:5:2: topology.hosts_per_switch: missing (required for shape \"ring\")",
    );
    assert_has(
        &errors(&format!("{ring}vlan = 10\n")),
        "t.toml:18:8: flow[0].vlan: a routed topology's ports",
    );
}

#[test]
fn switch_configuration_problems_name_the_right_file() {
    // More links than the configuration has ports.
    let big = GOOD.replace("hosts = 3", "hosts = 5");
    assert_has(&errors(&big), "t.toml:11:10: switch.config: ");
    assert!(errors(&big)[0].contains("4 ports, but switch s0 has 5 links"));
    // A port speed that is not the link's.
    let slow = GOOD.replace("link_rate = \"40G\"", "link_rate = \"10G\"");
    assert!(
        errors(&slow)[0].contains("runs at 40000000000 b/s, its link at 10000000000 b/s"),
        "{:?}",
        errors(&slow)
    );
    // A missing file; and an invalid one reports that file's own line and key.
    let missing = GOOD.replace("switch-40g-4p.toml", "nope.toml");
    assert_has(&errors(&missing), "t.toml:11:10: switch.config: ");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("bad.toml"),
        "[port.Ethernet0]\ndevice = \"p0\"\nspeed = \"40G\"\nmtu = 1\n",
    )
    .unwrap();
    let text = GOOD.replace("switch-40g-4p.toml", "bad.toml");
    let e = match parse(&text, "t.toml", dir.path(), &LoadOptions::default()) {
        Err(e) => e.0.iter().map(ToString::to_string).collect::<Vec<_>>(),
        Ok(_) => panic!("accepted"),
    };
    assert!(
        e.iter()
            .any(|e| e.contains("bad.toml:4:7: port.Ethernet0.mtu")),
        "{e:#?}"
    );
}
