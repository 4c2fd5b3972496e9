//! Every example configuration under config/ loads, and resolves to what its comments say.
use std::path::PathBuf;

use headroom_core::types::{PortId, PrioritySet};

use headroom_config::{
    derived, load_with, Config, Driver, ParseOptions, Polling, PoolDirection, Threshold, Warning,
};

fn ports(ids: &[u16]) -> Vec<PortId> {
    ids.iter().copied().map(PortId).collect()
}

fn example(name: &str) -> (Config, Vec<Warning>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../config")
        .join(name);
    match load_with(&path, &ParseOptions::with_allowed_cpus(0..4)) {
        Ok(result) => result,
        Err(errors) => panic!("{name} does not load:\n{errors}"),
    }
}

#[test]
fn every_example_file_is_tested() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("config/ exists")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".toml"))
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "dpdk-null.toml",
            "lab.toml",
            "minimal.toml",
            "routed-leaf.toml",
            "spectrum2-100g.toml"
        ]
    );
}

#[test]
fn routed_leaf_has_three_router_interfaces_with_the_switch_mac() {
    let (config, warnings) = example("routed-leaf.toml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(config.has_routed_ports());
    let names: Vec<&str> = config.ports.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["Ethernet0", "Ethernet4", "Ethernet8"]);
    for port in &config.ports {
        assert!(port.vlan.is_routed(), "{}", port.name);
        assert_eq!(
            port.mac,
            [0x02, 0x68, 0x72, 0x00, 0x01, 0x00],
            "{}",
            port.name
        );
        assert_eq!(port.mtu_bytes, 9100);
        assert_eq!(port.speed_bits_per_second, 100_000_000_000);
    }
    assert_eq!(config.routing.ecmp_hash_seed, 1001);
    assert_eq!(config.fib_config().hash.seed, 1001);
    assert!(config.fdb_static.is_empty());
    config.switch_params().unwrap().validate().unwrap();
}

#[test]
fn minimal_loads_without_warnings() {
    let (config, warnings) = example("minimal.toml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.ports.len(), 2);
    assert_eq!(config.ports[0].name, "Ethernet0");
    assert_eq!(config.ports[1].name, "Ethernet4");
    assert_eq!(config.ports[1].device, "eth2");
    assert_eq!(config.switch.driver, Driver::AfPacket);
}

#[test]
fn lab_is_four_1g_veths_on_one_lcore() {
    let (config, warnings) = example("lab.toml");
    assert!(warnings.is_empty(), "{warnings:?}");
    let devices: Vec<&str> = config.ports.iter().map(|p| p.device.as_str()).collect();
    assert_eq!(devices, ["sw-p0", "sw-p1", "sw-p2", "sw-p3"]);
    for port in &config.ports {
        assert_eq!(port.speed_bits_per_second, 1_000_000_000);
        assert_eq!(port.pfc_enable.0, 0b0001_1000);
        let wred = port.queues[3].wred.as_ref().expect("ECN on queue 3");
        assert_eq!(wred.name, "LAB_LOSSLESS");
        assert_eq!(wred.green.min_threshold_bytes, 102_400);
        assert!(port.queues[5].wred.is_none());
        assert_eq!(
            port.priority_groups[3].profile.name,
            "pg_lossless_1000_5m_profile"
        );
    }
    assert_eq!(config.switch.ecn_seed, 42);
    assert_eq!(config.runtime.lcores.len(), 1);
    assert_eq!(config.runtime.lcores[0].rx_ports, ports(&[0, 1, 2, 3]));
    assert_eq!(config.runtime.lcores[0].tx_ports, ports(&[0, 1, 2, 3]));
    assert_eq!(config.runtime.polling, Polling::Adaptive);
    assert_eq!(
        config.runtime.control_socket,
        PathBuf::from("/run/headroom/lab.sock")
    );
}

#[test]
fn spectrum2_matches_the_sonic_numbers() {
    let (config, warnings) = example("spectrum2-100g.toml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.switch.driver, Driver::Memory);
    assert!(config.headroom_calc.constants.shared_headroom_pool);
    let lossless_pool = config
        .pools
        .iter()
        .find(|p| p.name == "ingress_lossless_pool")
        .expect("pool");
    assert_eq!(lossless_pool.shared_headroom_pool_bytes, 2_146_304);
    // 4 ports x 2 lossless PGs x size 19456 reserved; the SHP replaces private headroom.
    assert_eq!(lossless_pool.reserved_bytes, 8 * 19456);
    assert_eq!(lossless_pool.private_headroom_bytes, 0);
    assert_eq!(
        lossless_pool.shared_bytes,
        8_719_360 - 8 * 19456 - 2_146_304
    );
    // With the SHP the formula gives size = xon and no +2 KiB: 100G/5m xoff 46080, 40m 51200.
    let ethernet0 = &config.ports[0];
    assert_eq!(ethernet0.computed_headroom.xoff_bytes, 46080);
    assert_eq!(ethernet0.computed_headroom.size_bytes, 19456);
    let pg3 = &ethernet0.priority_groups[3].profile;
    assert_eq!(pg3.name, "pg_lossless_100000_5m_profile");
    assert_eq!(
        (pg3.size_bytes, pg3.xon_bytes, pg3.xoff_bytes),
        (19456, 19456, 46080)
    );
    assert!(!pg3.headroom_computed);
    let ethernet12 = &config.ports[3];
    assert_eq!(ethernet12.cable_length_m, 40);
    let computed = &ethernet12.priority_groups[4].profile;
    assert_eq!(computed.name, "pg_lossless_computed");
    assert_eq!(computed.xoff_bytes, 51200);
    assert!(computed.headroom_computed);
    assert_eq!(ethernet12.queues[0].profile.name, "q_lossy_profile");
    assert_eq!(ethernet12.queues[4].profile.name, "egress_lossless_profile");
    assert_eq!(
        config.pools[ethernet12.queues[4].profile.pool_index].direction,
        PoolDirection::Egress
    );

    // Derived: α = 1 -> XOFF point = size + shared / 2; drop point = XOFF point + xoff.
    let derived = derived(&config);
    let pg = &derived.ports[0].priority_groups[3];
    let shared = lossless_pool.shared_bytes;
    assert_eq!(pg.xoff_point_bytes, Some(19456 + shared / 2));
    assert_eq!(pg.drop_point_bytes, 19456 + shared / 2 + 46080);
    assert_eq!(pg.xon_point_bytes, Some(19456));
    assert_eq!(
        ethernet0.priority_groups[0].profile.threshold,
        Threshold::Dynamic { dynamic_th: 3 }
    );
}

#[test]
fn dpdk_null_has_two_lcores_and_eal_args() {
    let (config, warnings) = example("dpdk-null.toml");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(config.switch.driver, Driver::Dpdk);
    assert_eq!(config.ports[0].device, "net_null0");
    assert!(config.dpdk.eal_args.contains(&"--vdev".to_owned()));
    assert_eq!(config.dpdk.eal_args[0], "-l");
    assert_eq!(config.dpdk.mempool_mbufs, 8191);
    assert_eq!(config.runtime.lcores.len(), 2);
    assert_eq!(config.runtime.lcores[1].cpu, 1);
    assert_eq!(config.runtime.lcores[1].rx_ports, ports(&[1]));
    assert_eq!(config.runtime.polling, Polling::Busy);
}

#[test]
fn derived_renders_every_port_and_pool() {
    let (config, _) = example("lab.toml");
    let text = derived(&config).to_string();
    for port in ["Ethernet0:", "Ethernet1:", "Ethernet2:", "Ethernet3:"] {
        assert!(text.contains(port), "{text}");
    }
    assert!(text.contains("ingress_lossless_pool"));
    assert!(text.contains("pg_lossless_1000_5m_profile"));
    // The lossless PG row of the 1G port: headroom 61440 bytes = 240 cells of 256.
    assert!(text.contains("61440 (240)"), "{text}");
}

/// Every example gives the core parameters it accepts (`SwitchParams::validate`).
#[test]
fn every_example_gives_valid_core_parameters() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).expect("config/ exists") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            let (config, _) = example(&name);
            let params = config
                .switch_params()
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            params.validate().unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(params.ports.len(), config.ports.len());
            assert_eq!(params.pools.len(), config.pools.len());
            n += 1;
        }
    }
    assert!(n >= 4);
}

#[test]
fn fdb_aging_reaches_the_core_and_zero_means_never() {
    let with = |extra: &str| {
        let text =
            format!("[switch]\n{extra}\n[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n");
        let (config, _) = headroom_config::parse(&text, "t.toml").expect("loads");
        config.switch_params().expect("params").fdb_aging_ns
    };
    assert_eq!(with(""), 300_000_000_000);
    assert_eq!(with("fdb_aging_s = 5"), 5_000_000_000);
    assert_eq!(with("fdb_aging_s = 0"), u64::MAX);
}

#[test]
fn lab_config_gives_the_core_sonic_semantics() {
    let (config, _) = example("lab.toml");
    let p = config.switch_params().expect("params");
    assert_eq!(p.ports.len(), 4);
    let port = &p.ports[0];
    assert_eq!(port.speed_bps, 1_000_000_000);
    assert_eq!(port.pfc_enable, PrioritySet(0b1_1000));
    assert!(port.pgs[3].is_lossless() && port.pgs[4].is_lossless() && !port.pgs[0].is_lossless());
    assert_eq!(
        port.pgs[3].xoff_bytes,
        config.ports[0].priority_groups[3].profile.xoff_bytes
    );
    assert_eq!(
        usize::from(port.pgs[3].pool.0),
        config.ports[0].priority_groups[3].profile.pool_index
    );
    assert!(port.queues[3].wred.is_some_and(|w| w.ecn_mark));
    assert_eq!(
        port.watchdog.map(|w| w.detection_time_ns),
        Some(200_000_000)
    );
    // The frame pool and queue rings derived from the buffer size, within their bounds.
    let frames = config.frame_pool_frames();
    assert!(
        (headroom_config::FRAME_POOL_FRAMES_MIN..=headroom_config::FRAME_POOL_FRAMES_MAX)
            .contains(&frames)
    );
    assert_eq!(
        p.queue_ring_frames,
        u32::try_from(frames.min(32_768)).expect("small")
    );
}
