//! Parsing never panics, whatever the text: arbitrary strings, and near-valid configurations built
//! from the real keys with extreme values (these reach the resolver and its cross-checks).
use headroom_config::{parse_with, ParseOptions};
use proptest::prelude::*;

fn options() -> ParseOptions {
    ParseOptions::with_allowed_cpus([0, 1])
}

const SECTIONS: &[&str] = &[
    "[switch]",
    "[port.Ethernet0]",
    "[port.Ethernet4]",
    "[port_defaults]",
    "[port.Ethernet0.buffer_pg]",
    "[port.Ethernet0.buffer_queue]",
    "[port.Ethernet0.queue.\"3-4\"]",
    "[port.Ethernet0.pfcwd]",
    "[buffer_pool.ingress_lossless_pool]",
    "[buffer_pool.egress_lossy_pool]",
    "[buffer_profile.p]",
    "[buffer_profile.ingress_lossy_profile]",
    "[dscp_to_tc_map.AZURE]",
    "[tc_to_pg_map.M]",
    "[pfc_to_pg_map.AZURE]",
    "[pfc_to_queue_map.AZURE]",
    "[wred_profile.AZURE_LOSSLESS]",
    "[scheduler.\"scheduler.1\"]",
    "[pfcwd]",
    "[runtime]",
    "[[runtime.lcore]]",
    "[dpdk]",
    "[headroom_calc]",
];

const KEYS: &[&str] = &[
    "device",
    "speed",
    "cable_length",
    "mtu",
    "pfc_enable",
    "pfcwd_enable",
    "pfc_quanta",
    "pfc_refresh_us",
    "trust",
    "default_priority",
    "vlan_mode",
    "access_vlan",
    "trunk_vlans",
    "native_vlan",
    "shaper_rate",
    "tc_to_pg_map",
    "pfc_to_pg_map",
    "type",
    "mode",
    "size",
    "xoff",
    "xon",
    "xon_offset",
    "pool",
    "dynamic_th",
    "static_th",
    "headroom",
    "ecn",
    "green_min_threshold",
    "green_max_threshold",
    "weight",
    "poll_interval",
    "detection_time",
    "restoration_time",
    "cpu",
    "rx_ports",
    "tx_ports",
    "burst_size",
    "cell_size_bytes",
    "buffer_size_bytes",
    "small_packet_percentage",
    "lossless_mtu",
    "shared_headroom_pool",
    "over_subscribe_ratio",
    "pipeline_latency_kib",
    "software_latency_kib",
    "\"0\"",
    "\"3-4\"",
    "\"0-7\"",
    "3",
    "63",
    "default",
    "driver",
    "mac",
    "scheduler",
    "wred_profile",
];

const VALUES: &[&str] = &[
    "0",
    "1",
    "-1",
    "3",
    "7",
    "8",
    "-8",
    "-9",
    "100",
    "9100",
    "65535",
    "65536",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "1e308",
    "-0.0",
    "nan",
    "inf",
    "0.8",
    "\"\"",
    "\"0m\"",
    "\"5m\"",
    "\"100G\"",
    "\"2.5G\"",
    "\"800G\"",
    "\"9999999G\"",
    "\"3,4\"",
    "\"3-4\"",
    "\"0-7\"",
    "\"7-0\"",
    "\"NULL\"",
    "\"computed\"",
    "\"dynamic\"",
    "\"static\"",
    "\"ingress\"",
    "\"egress\"",
    "\"ingress_lossless_pool\"",
    "\"egress_lossy_pool\"",
    "\"ingress_lossy_profile\"",
    "\"p\"",
    "\"AZURE\"",
    "\"M\"",
    "\"eth0\"",
    "\"Ethernet0\"",
    "\"ecn_all\"",
    "\"dot1p\"",
    "\"trunk\"",
    "\"dpdk\"",
    "\"memory\"",
    "\"02:00:00:00:00:01\"",
    "true",
    "false",
    "[]",
    "[3, 4]",
    "[0, 1, 2, 3, 4, 5, 6, 7]",
    "[\"1-4094\"]",
    "[8]",
    "[\"Ethernet0\", \"Ethernet4\"]",
    "{ action = \"drop\" }",
];

fn line() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => proptest::sample::select(SECTIONS).prop_map(str::to_owned),
        4 => (proptest::sample::select(KEYS), proptest::sample::select(VALUES))
            .prop_map(|(key, value)| format!("{key} = {value}")),
    ]
}

/// A base that loads, so that appended lines hit the resolver rather than a missing port.
const BASE: &str = "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n\
                    [port.Ethernet4]\ndevice = \"eth1\"\nspeed = 1000\n";

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(text in ".{0,400}") {
        let _ = parse_with(&text, "fuzz.toml", &options());
    }

    #[test]
    fn arbitrary_bytes_as_lossy_text_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let text = String::from_utf8_lossy(&bytes);
        let _ = parse_with(&text, "fuzz.toml", &options());
    }

    #[test]
    fn near_valid_configurations_never_panic(lines in proptest::collection::vec(line(), 0..25)) {
        let text = format!("{BASE}{}\n", lines.join("\n"));
        match parse_with(&text, "fuzz.toml", &options()) {
            Ok((config, _)) => {
                // A loaded configuration renders, and every profile points at a pool.
                let _ = headroom_config::derived(&config).to_string();
                for port in &config.ports {
                    for pg in &port.priority_groups {
                        prop_assert!(pg.profile.pool_index < config.pools.len());
                    }
                    for queue in &port.queues {
                        prop_assert!(queue.profile.pool_index < config.pools.len());
                    }
                }
            }
            Err(errors) => {
                // Every error renders with the file name, and there is at least one.
                prop_assert!(!errors.errors.is_empty());
                for error in &errors.errors {
                    prop_assert!(error.to_string().starts_with("fuzz.toml"));
                }
            }
        }
    }
}
