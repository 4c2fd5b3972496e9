//! Routed ports (`vlan_mode = "routed"`) and `[routing]`.
mod common;

use common::{assert_has_prefix, errors, ok, PORT};
use headroom_config::{EcmpHashAlgorithm, Vlan};

const ROUTED: &str =
    "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\nvlan_mode = \"routed\"\n\
                      [port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\n";

#[test]
fn a_routed_port_takes_the_switch_mac_as_its_router_mac_and_bridged_ports_keep_theirs() {
    let text = format!("[switch]\nmac = \"02:aa:00:00:00:00\"\n{ROUTED}");
    let (config, _) = ok(&text);
    assert_eq!(config.ports[0].vlan, Vlan::Routed);
    assert_eq!(
        config.ports[0].mac,
        [0x02, 0xaa, 0, 0, 0, 0],
        "SONiC: DEVICE_METADATA.mac"
    );
    assert_eq!(config.ports[1].vlan, Vlan::Access { vlan_id: 1 });
    assert_eq!(
        config.ports[1].mac,
        [0x02, 0xaa, 0, 0, 0, 2],
        "switch MAC + 1 + index"
    );
    assert!(config.has_routed_ports());
    // A routed port may name its own router MAC.
    let text = format!("{ROUTED}mac = \"02:bb:00:00:00:01\"\n");
    let (config, _) = ok(&text.replacen(
        "vlan_mode = \"routed\"\n",
        "vlan_mode = \"routed\"\nmac = \"02:bb:00:00:00:07\"\n",
        1,
    ));
    assert_eq!(config.ports[0].mac, [0x02, 0xbb, 0, 0, 0, 7]);
}

#[test]
fn vlan_keys_on_a_routed_port_are_refused_with_their_key() {
    for (key, value) in [
        ("access_vlan", "10"),
        ("trunk_vlans", "\"10\""),
        ("native_vlan", "10"),
    ] {
        let text = ROUTED.replacen(
            "vlan_mode = \"routed\"\n",
            &format!("vlan_mode = \"routed\"\n{key} = {value}\n"),
            1,
        );
        let errors = errors(&text);
        assert_has_prefix(
            &errors,
            &format!("t.toml:5:1: port.Ethernet0.{key}: a routed port is in no VLAN"),
        );
    }
}

#[test]
fn a_static_fdb_entry_on_a_routed_port_is_refused() {
    let text =
        format!("{ROUTED}[[fdb.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"Ethernet0\"\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:10:8: fdb.static[0].port: port Ethernet0 is routed",
    );
    // The same entry on the bridged port is fine.
    let (config, _) = ok(&text.replace("port = \"Ethernet0\"", "port = \"Ethernet4\""));
    assert_eq!(config.fdb_static.len(), 1);
}

#[test]
fn routing_defaults_follow_the_core_and_the_seed_differs_between_switches() {
    let (a, _) = ok(&format!("[switch]\nname = \"leaf1\"\n{PORT}"));
    let (b, _) = ok(&format!("[switch]\nname = \"leaf2\"\n{PORT}"));
    assert!(!a.has_routed_ports());
    assert_ne!(a.routing.ecmp_hash_seed, b.routing.ecmp_hash_seed);
    let core = headroom_core::route::FibConfig::default();
    let fib = a.fib_config();
    assert_eq!(fib.hash.seed, a.routing.ecmp_hash_seed);
    assert_eq!(fib.hash.rotation, core.hash.rotation);
    assert_eq!(fib.ecmp_bucket_bits, core.ecmp_bucket_bits);
    assert_eq!(fib.max_ipv4_routes, core.max_ipv4_routes);
    assert_eq!(fib.ipv4_top_bits, core.ipv4_top_bits);
    assert_eq!(a.routing.netlink_receive_buffer_bytes, 8 << 20);
}

#[test]
fn routing_keys_are_read_and_checked() {
    let text = format!(
        "{PORT}[routing]\necmp_hash_seed = 7\necmp_hash_algorithm = \"crc32\"\n\
         ecmp_hash_rotation = 5\necmp_group_buckets = 64\nipv4_lpm_top_bits = 24\n\
         max_ipv4_routes = 1000\nmax_next_hops = 100\nnetlink_receive_buffer_bytes = 1048576\n"
    );
    let (config, _) = ok(&text);
    let r = config.routing;
    assert_eq!(r.ecmp_hash_seed, 7);
    assert_eq!(r.ecmp_hash_algorithm, EcmpHashAlgorithm::Crc32);
    let fib = config.fib_config();
    assert_eq!(fib.hash.rotation, 5);
    assert_eq!(fib.ecmp_bucket_bits, 6);
    assert_eq!(fib.ipv4_top_bits, 24);
    assert_eq!(fib.max_ipv4_routes, 1000);
    assert_eq!(fib.max_next_hops, 100);
    assert_eq!(r.netlink_receive_buffer_bytes, 1 << 20);

    let bad = format!(
        "{PORT}[routing]\necmp_hash_rotation = 32\necmp_group_buckets = 100\n\
         ipv4_lpm_top_bits = 20\nmax_next_hops = 3\nsalt = 1\n"
    );
    let errors = errors(&bad);
    assert_has_prefix(&errors, "t.toml:9:1: routing.salt: unknown field `salt`");
    let good_but_unknown_key_removed = bad.replace("salt = 1\n", "");
    let errors = common::errors(&good_but_unknown_key_removed);
    assert_has_prefix(
        &errors,
        "t.toml:5:22: routing.ecmp_hash_rotation: 32 is out of range 0..=31",
    );
    assert_has_prefix(
        &errors,
        "t.toml:6:22: routing.ecmp_group_buckets: 100 is not a power of two",
    );
    assert_has_prefix(
        &errors,
        "t.toml:7:21: routing.ipv4_lpm_top_bits: 20: the first level",
    );
    assert_has_prefix(
        &errors,
        "t.toml:8:17: routing.max_next_hops: 3 is out of range 4..=",
    );
}

/// Ports 1..=2 in VLAN 1000 (access, trunk) and a routed uplink, with `Vlan1000` on top.
const SVI: &str = "[switch]\nmac = \"02:aa:00:00:00:00\"\n\
    [port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\nvlan_mode = \"routed\"\n\
    [port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\naccess_vlan = 1000\n\
    [port.Ethernet8]\ndevice = \"eth2\"\nspeed = \"10G\"\nvlan_mode = \"trunk\"\ntrunk_vlans = \"1000\"\n\
    [vlan_interface.Vlan1000]\n";

#[test]
fn a_vlan_interface_takes_its_vlan_from_its_name_and_the_switch_mac() {
    let (config, warnings) = ok(SVI);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(
        config.vlan_interfaces,
        [headroom_config::VlanInterface {
            name: "Vlan1000".into(),
            vlan_id: 1000,
            mac: [0x02, 0xaa, 0, 0, 0, 0],
        }]
    );
    let params = config.switch_params().unwrap();
    assert_eq!(params.vlan_interfaces.len(), 1);
    assert_eq!(params.vlan_interfaces[0].vid, 1000);
    let (config, _) = ok(&format!("{SVI}mac = \"02:bb:00:00:00:01\"\n"));
    assert_eq!(config.vlan_interfaces[0].mac, [0x02, 0xbb, 0, 0, 0, 1]);
}

#[test]
fn a_vlan_interface_is_refused_with_its_key_for_a_bad_name_or_mac() {
    for name in [
        "Vlan0",
        "Vlan4095",
        "Vlan01",
        "vlan1000",
        "Vlan",
        "Ethernet4",
    ] {
        let found = errors(&SVI.replace("Vlan1000", name));
        assert_has_prefix(&found, &format!("t.toml:16:1: vlan_interface.{name}: "));
    }
    let found = errors(&format!("{SVI}mac = \"01:00:5e:00:00:01\"\n"));
    assert_has_prefix(&found, "t.toml:17:7: vlan_interface.Vlan1000.mac: ");
    let found = errors(&format!("{SVI}mtu = 1500\n"));
    assert_has_prefix(&found, "t.toml:17:1: ");
    // A VLAN no port is in: loaded, with a warning naming the interface.
    let warnings = common::warnings(&SVI.replace("Vlan1000", "Vlan2000"));
    assert_has_prefix(
        &warnings,
        "t.toml:16:1: vlan_interface.Vlan2000: no port is a member of VLAN 2000",
    );
}
