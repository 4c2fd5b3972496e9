//! A minimal configuration resolves to the documented defaults; overrides land where they should.
mod common;

use std::net::SocketAddr;
use std::path::PathBuf;

use common::{ok, PORT};
use headroom_config::{
    derived, Driver, EcnMode, LogFormat, PfcWdAction, Polling, PoolDirection, PriorityBits,
    SchedulerKind, Threshold, ThresholdMode, Trust, Vlan,
};
use headroom_core::types::PortId;

#[test]
fn switch_defaults() {
    let (config, warnings) = ok(PORT);
    assert!(warnings.is_empty(), "{warnings:?}");
    let switch = &config.switch;
    assert_eq!(switch.name, "headroom");
    assert_eq!(switch.cell_size_bytes, 256);
    assert_eq!(switch.buffer_size_bytes, 8 * 1024 * 1024);
    assert_eq!(switch.driver, Driver::AfPacket);
    assert_eq!(switch.pfc_storm_alarm_frames_per_second, 2000);
    assert_eq!(switch.fdb_aging_s, 300);
    assert_eq!(switch.log_format, LogFormat::Text);
    assert_eq!(switch.mac, [0x02, 0x68, 0x72, 0, 0, 0]);
    assert_eq!(config.file, "t.toml");
}

#[test]
fn port_defaults() {
    let (config, _) = ok(PORT);
    let port = &config.ports[0];
    assert_eq!(port.speed_mbps, 10_000);
    assert_eq!(port.speed_bits_per_second, 10_000_000_000);
    assert_eq!(port.cable_length_m, 5);
    assert_eq!(port.mtu_bytes, 9100);
    assert_eq!(port.mac, [0x02, 0x68, 0x72, 0, 0, 1]);
    assert!(port.tx_enable);
    assert_eq!(port.trust, Trust::Dscp);
    assert_eq!(port.default_priority, 0);
    assert_eq!(port.pfc_enable, PriorityBits(0b0001_1000));
    assert_eq!(port.pfcwd_enable, PriorityBits(0b0001_1000));
    assert!(!port.pause_802_3x);
    assert_eq!(port.pfc_quanta, 0xFFFF);
    // Half of 65535 quanta x 512 bit times at 10 Gb/s = 3355392 ns / 2.
    assert_eq!(port.pfc_refresh_ns, 1_677_696);
    assert_eq!(port.vlan, Vlan::Access { vlan_id: 1 });
    assert_eq!(port.shaper_rate_bits_per_second, port.speed_bits_per_second);
    assert!(port.pfcwd.enabled);
    assert_eq!(port.pfcwd.action, PfcWdAction::Drop);
    assert_eq!(port.pfcwd.detection_time_ms, 200);
    assert_eq!(port.pfcwd.restoration_time_ms, 200);
    assert_eq!(config.pfcwd.poll_interval_ms, 200);
    assert!(!config.pfcwd.big_red_switch);
}

#[test]
fn default_maps_are_sonic_azure() {
    let (config, _) = ok(PORT);
    let maps = &config.ports[0].maps;
    let mut dscp = [1u8; 64];
    for (code_point, tc) in [(3, 3), (4, 4), (5, 2), (8, 0), (46, 5), (48, 6)] {
        dscp[code_point] = tc;
    }
    assert_eq!(maps.dscp_to_tc, dscp);
    assert_eq!(maps.dot1p_to_tc, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(maps.tc_to_pg, [0, 0, 0, 3, 4, 0, 0, 7]);
    assert_eq!(maps.tc_to_queue, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(maps.pfc_to_queue, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(maps.pfc_to_pg, [0, 0, 0, 3, 4, 0, 0, 0]);
    assert!(maps.names.iter().all(|name| name == "AZURE"));
}

#[test]
fn default_pg_and_queue_bindings() {
    let (config, _) = ok(PORT);
    let port = &config.ports[0];
    for (pg, group) in port.priority_groups.iter().enumerate() {
        if pg == 3 || pg == 4 {
            assert_eq!(group.profile.name, "pg_lossless_10000_5m_profile");
            assert!(group.is_lossless());
            assert!(group.profile.headroom_computed);
            assert_eq!(group.profile.xoff_bytes, 67584);
            assert_eq!(group.profile.xon_bytes, 19456);
            assert_eq!(group.profile.size_bytes, 87040);
            assert_eq!(
                group.profile.threshold,
                Threshold::Dynamic { dynamic_th: 0 }
            );
            assert_eq!(
                config.pools[group.profile.pool_index].name,
                "ingress_lossless_pool"
            );
        } else {
            assert_eq!(group.profile.name, "ingress_lossy_profile", "PG {pg}");
            assert!(!group.is_lossless());
            assert_eq!(
                group.profile.threshold,
                Threshold::Dynamic { dynamic_th: 3 }
            );
            assert_eq!(
                config.pools[group.profile.pool_index].name,
                "ingress_lossy_pool"
            );
        }
    }
    for (q, queue) in port.queues.iter().enumerate() {
        if q == 3 || q == 4 {
            assert!(queue.lossless);
            assert_eq!(queue.profile.name, "egress_lossless_profile");
            assert_eq!(
                queue.profile.threshold,
                Threshold::Static {
                    static_th_bytes: 8 * 1024 * 1024
                }
            );
            assert_eq!(queue.scheduler.name, "scheduler.1");
            assert_eq!(queue.scheduler.kind, SchedulerKind::Dwrr);
            assert_eq!(queue.scheduler.weight, 15);
            let wred = queue.wred.as_ref().expect("AZURE_LOSSLESS");
            assert_eq!(wred.name, "AZURE_LOSSLESS");
            assert_eq!(wred.ecn, EcnMode::All);
            assert!(wred.green.wred_enable);
            assert_eq!(wred.green.min_threshold_bytes, 1_048_576);
            assert_eq!(wred.green.max_threshold_bytes, 2_097_152);
            assert_eq!(wred.green.drop_probability_percent, 5);
        } else {
            assert!(!queue.lossless);
            assert_eq!(queue.profile.name, "egress_lossy_profile", "queue {q}");
            assert_eq!(queue.profile.size_bytes, 9216);
            assert_eq!(queue.scheduler.name, "scheduler.0");
            assert_eq!(queue.scheduler.weight, 14);
            assert!(queue.wred.is_none());
        }
    }
}

#[test]
fn default_pools_and_their_accounting() {
    let (config, _) = ok(PORT);
    let names: Vec<&str> = config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "ingress_lossless_pool",
            "ingress_lossy_pool",
            "egress_lossless_pool",
            "egress_lossy_pool"
        ]
    );
    let half = 4 * 1024 * 1024;
    let lossless = &config.pools[0];
    assert_eq!(lossless.direction, PoolDirection::Ingress);
    assert_eq!(lossless.mode, ThresholdMode::Dynamic);
    assert_eq!(lossless.size_bytes, half);
    assert_eq!(lossless.reserved_bytes, 2 * 87040);
    assert_eq!(lossless.private_headroom_bytes, 2 * 67584);
    assert_eq!(lossless.shared_headroom_pool_bytes, 0);
    assert_eq!(lossless.shared_bytes, half - 2 * 87040 - 2 * 67584);
    let egress_lossless = &config.pools[2];
    assert_eq!(egress_lossless.mode, ThresholdMode::Static);
    assert_eq!(egress_lossless.size_bytes, 2 * half);
    let egress_lossy = &config.pools[3];
    assert_eq!(egress_lossy.reserved_bytes, 6 * 9216);
    assert_eq!(egress_lossy.shared_bytes, half - 6 * 9216);
}

#[test]
fn runtime_and_dpdk_defaults() {
    let (config, _) = ok(&format!(
        "{PORT}[port.Ethernet4]\ndevice = \"eth1\"\nspeed = 10000\n"
    ));
    assert_eq!(config.runtime.lcores.len(), 1);
    assert_eq!(config.runtime.lcores[0].cpu, 0);
    assert_eq!(config.runtime.lcores[0].rx_ports, [PortId(0), PortId(1)]);
    assert_eq!(config.runtime.lcores[0].tx_ports, [PortId(0), PortId(1)]);
    assert_eq!(config.runtime.polling, Polling::Adaptive);
    assert_eq!(config.runtime.burst_size, 32);
    assert_eq!(
        config.runtime.control_socket,
        PathBuf::from("/run/headroom/headroom.sock")
    );
    assert_eq!(
        config.runtime.prometheus_listen,
        Some("127.0.0.1:9464".parse::<SocketAddr>().expect("address"))
    );
    assert_eq!(config.dpdk.mempool_mbufs, 8191);
    assert_eq!(config.dpdk.rx_descriptors, 1024);
    assert!(config.dpdk.eal_args.is_empty());
    // The port MACs follow the switch MAC.
    assert_eq!(config.ports[1].mac, [0x02, 0x68, 0x72, 0, 0, 2]);
}

#[test]
fn prometheus_can_be_disabled() {
    let (config, _) = ok(&format!("{PORT}[runtime]\nprometheus_enable = false\n"));
    assert_eq!(config.runtime.prometheus_listen, None);
}

#[test]
fn default_buffer_grows_with_the_port_count() {
    let mut text = String::new();
    for i in 0..6 {
        text.push_str(&format!(
            "[port.p{i}]\ndevice = \"eth{i}\"\nspeed = 25000\n"
        ));
    }
    let (config, _) = ok(&text);
    assert_eq!(config.switch.buffer_size_bytes, 6 * 2 * 1024 * 1024);
}

#[test]
fn port_defaults_apply_and_ports_override_them() {
    let text = "[port_defaults]\nspeed = \"25G\"\ncable_length = 40\npfc_enable = \"3\"\n\
                [port_defaults.pfcwd]\naction = \"alert\"\ndetection_time = 400\n\
                [port.a]\ndevice = \"eth0\"\n\
                [port.b]\ndevice = \"eth1\"\nspeed = \"100G\"\npfc_enable = [3, 4]\n\
                [port.b.pfcwd]\ndetection_time = 1000\n";
    let (config, _) = ok(text);
    let (a, b) = (&config.ports[0], &config.ports[1]);
    assert_eq!((a.speed_mbps, a.cable_length_m), (25_000, 40));
    assert_eq!((b.speed_mbps, b.cable_length_m), (100_000, 40));
    assert_eq!(a.pfc_enable, PriorityBits(0b1000));
    assert_eq!(b.pfc_enable, PriorityBits(0b1_1000));
    // Only PG 3 is lossless on port a: PG 4 stays lossy, queue 4 too.
    assert!(a.priority_groups[3].is_lossless());
    assert!(!a.priority_groups[4].is_lossless());
    assert!(!a.queues[4].lossless);
    assert_eq!(a.pfcwd.action, PfcWdAction::Alert);
    assert_eq!(a.pfcwd.detection_time_ms, 400);
    assert_eq!(b.pfcwd.action, PfcWdAction::Alert);
    assert_eq!(b.pfcwd.detection_time_ms, 1000);
    assert_eq!(
        a.priority_groups[3].profile.name,
        "pg_lossless_25000_40m_profile"
    );
    assert_eq!(
        b.priority_groups[3].profile.name,
        "pg_lossless_100000_40m_profile"
    );
}

#[test]
fn user_maps_with_default_key_and_ranges() {
    let text = format!(
        "{PORT}dscp_to_tc_map = \"LAB\"\n[dscp_to_tc_map.LAB]\ndefault = 0\n\"24-31\" = 3\n26 = 4\n"
    );
    let errors = common::errors(&text);
    assert!(
        errors[0].contains("26 is already mapped by key \"24-31\""),
        "{errors:?}"
    );
    let text = format!(
        "{PORT}dscp_to_tc_map = \"LAB\"\n[dscp_to_tc_map.LAB]\ndefault = 0\n\"24-25\" = 3\n26 = 4\n"
    );
    let (config, _) = ok(&text);
    let map = &config.ports[0].maps.dscp_to_tc;
    assert_eq!(&map[23..=27], &[0, 3, 3, 4, 0]);
    assert_eq!(config.ports[0].maps.names[0], "LAB");
}

#[test]
fn a_user_map_named_azure_replaces_the_built_in() {
    let text = format!("{PORT}[tc_to_queue_map.AZURE]\ndefault = 0\n3 = 3\n4 = 4\n");
    let (config, _) = ok(&text);
    assert_eq!(config.ports[0].maps.tc_to_queue, [0, 0, 0, 3, 4, 0, 0, 0]);
}

#[test]
fn dot1p_trust_takes_the_tc_through_dot1p_to_tc() {
    // PCP 5 -> TC 3 (lossless); PFC priority 5 must then be generated by PG 3 and pause queue 3.
    let text = format!(
        "{PORT}trust = \"dot1p\"\ndefault_priority = 2\npfc_enable = [5]\n\
         dot1p_to_tc_map = \"D\"\npfc_to_pg_map = \"P\"\npfc_to_queue_map = \"Q\"\n\
         [dot1p_to_tc_map.D]\n0 = 0\n1 = 1\n2 = 2\n5 = 3\n\
         [pfc_to_pg_map.P]\n5 = 3\n[pfc_to_queue_map.Q]\n5 = 3\n"
    );
    let (config, _) = ok(&text);
    let port = &config.ports[0];
    assert_eq!(port.trust, Trust::Dot1p);
    assert_eq!(port.default_priority, 2);
    assert_eq!(port.tc_of_priority(5), 3);
    assert!(port.priority_groups[3].is_lossless());
    assert!(!port.priority_groups[4].is_lossless());
    assert!(port.queues[3].lossless);
}

#[test]
fn null_and_port_profile_names_bind_the_computed_lossless_profile() {
    let text = format!(
        "{PORT}pfc_enable = [3]\n[port.Ethernet0.buffer_pg]\n\"3\" = \"NULL\"\n\"7\" = \"pg_lossless_10000_5m_profile\"\n\
         pfc_enable_unused = 1\n"
    );
    // An unknown key inside buffer_pg is a binding with a bad index, not an unknown field.
    assert!(common::errors(&text)[0].contains("buffer_pg.pfc_enable_unused"));
    let text = format!(
        "{PORT}pfc_enable = [3]\n[port.Ethernet0.buffer_pg]\n\"3\" = \"NULL\"\n\"7\" = \"pg_lossless_10000_5m_profile\"\n"
    );
    let (config, warnings) = ok(&text);
    let port = &config.ports[0];
    assert!(port.priority_groups[3].is_lossless());
    assert!(port.priority_groups[7].is_lossless());
    // PG 7 has headroom but no PFC priority maps to it; PG 3 is fine.
    let rendered: Vec<String> = warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        rendered,
        [
            "t.toml:7:7: port.Ethernet0.buffer_pg.7: PG 7 has headroom (profile \
          \"pg_lossless_10000_5m_profile\", xoff 67584) but no PFC-enabled priority maps to it \
          through pfc_to_pg_map \"AZURE\": it never pauses the peer"
        ]
    );
}

#[test]
fn computed_profile_follows_each_port() {
    let text =
        "[buffer_profile.lossless]\npool = \"ingress_lossless_pool\"\nheadroom = \"computed\"\n\
                [port_defaults.buffer_pg]\n\"3-4\" = \"lossless\"\n\
                [port.a]\ndevice = \"eth0\"\nspeed = \"1G\"\n\
                [port.b]\ndevice = \"eth1\"\nspeed = \"25G\"\ncable_length = \"300m\"\n";
    let (config, _) = ok(text);
    let a = &config.ports[0].priority_groups[3].profile;
    let b = &config.ports[1].priority_groups[4].profile;
    assert_eq!(a.name, "lossless");
    assert_eq!(b.name, "lossless");
    assert_eq!(a.xoff_bytes, config.ports[0].computed_headroom.xoff_bytes);
    assert_eq!(b.xoff_bytes, config.ports[1].computed_headroom.xoff_bytes);
    assert!(b.xoff_bytes > a.xoff_bytes);
    assert_eq!(a.threshold, Threshold::Dynamic { dynamic_th: 0 });
}

#[test]
fn shared_headroom_pool_sized_from_over_subscription() {
    let text =
        format!("{PORT}[headroom_calc]\nshared_headroom_pool = true\nover_subscribe_ratio = 2\n");
    let (config, _) = ok(&text);
    let port = &config.ports[0];
    // SHP on: 10G/5m gives xoff 65536 (no +2 KiB), size = xon.
    assert_eq!(port.computed_headroom.xoff_bytes, 65536);
    assert_eq!(port.computed_headroom.size_bytes, 19456);
    let pool = &config.pools[0];
    // Σ xoff of 2 PGs / 2, rounded up to cells.
    assert_eq!(pool.shared_headroom_pool_bytes, 65536);
    assert_eq!(pool.private_headroom_bytes, 0);
    assert_eq!(pool.shared_bytes, 4 * 1024 * 1024 - 2 * 19456 - 65536);
}

#[test]
fn unused_built_in_pools_are_left_out() {
    let text = format!(
        "{PORT}pfc_enable = []\n[port.Ethernet0.buffer_queue]\n\"0-7\" = \"egress_lossy_profile\"\n"
    );
    let (config, _) = ok(&text);
    let names: Vec<&str> = config.pools.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["ingress_lossy_pool", "egress_lossy_pool"]);
    // Indexes were renumbered.
    let port = &config.ports[0];
    assert_eq!(
        config.pools[port.priority_groups[0].profile.pool_index].name,
        "ingress_lossy_pool"
    );
    assert_eq!(
        config.pools[port.queues[3].profile.pool_index].name,
        "egress_lossy_pool"
    );
    assert_eq!(port.pfc_enable, PriorityBits(0));
}

#[test]
fn trunk_vlans() {
    let text =
        format!("{PORT}vlan_mode = \"trunk\"\ntrunk_vlans = \"100-102,7\"\nnative_vlan = 5\n");
    let (config, _) = ok(&text);
    assert_eq!(
        config.ports[0].vlan,
        Vlan::Trunk {
            allowed_vlan_ids: vec![5, 7, 100, 101, 102],
            native_vlan_id: Some(5)
        }
    );
}

#[test]
fn speeds_and_cables_in_sonic_spelling() {
    let text = "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = 100000\ncable_length = \"300m\"\n\
                shaper_rate = \"40G\"\n";
    let (config, _) = ok(text);
    let port = &config.ports[0];
    assert_eq!(port.speed_mbps, 100_000);
    assert_eq!(port.cable_length_m, 300);
    assert_eq!(port.shaper_rate_bits_per_second, 40_000_000_000);
    assert_eq!(
        port.priority_groups[3].profile.name,
        "pg_lossless_100000_300m_profile"
    );
}

#[test]
fn non_default_mtu_is_in_the_profile_name() {
    let (config, _) = ok(&format!("{PORT}mtu = 1500\n"));
    assert_eq!(
        config.ports[0].priority_groups[3].profile.name,
        "pg_lossless_10000_5m_mtu1500_profile"
    );
}

#[test]
fn shaper_above_speed_is_a_warning() {
    let warnings = common::warnings(&format!("{PORT}shaper_rate = \"25G\"\n"));
    common::assert_has(
        &warnings,
        "t.toml:4:15: port.Ethernet0.shaper_rate: 25000 Mb/s is above the port speed 10000 Mb/s",
    );
}

#[test]
fn derived_xon_point_uses_xon_offset() {
    // TD3-like profile: size 4608, xon 4608, xon_offset 4608, xoff 160000, dynamic_th 0.
    let text = format!(
        "{PORT}[port.Ethernet0.buffer_pg]\n\"3-4\" = \"td3\"\n\
         [buffer_profile.td3]\npool = \"ingress_lossless_pool\"\nsize = 4608\nxon = 4608\n\
         xon_offset = 4608\nxoff = 160000\ndynamic_th = 0\n"
    );
    let (config, _) = ok(&text);
    let d = derived(&config);
    let pg = &d.ports[0].priority_groups[3];
    let shared = config.pools[0].shared_bytes;
    assert_eq!(shared, 4 * 1024 * 1024 - 2 * 4608 - 2 * 160_000);
    let xoff_point = 4608 + shared / 2;
    assert_eq!(pg.shared_limit_bytes, shared / 2);
    assert_eq!(pg.xoff_point_bytes, Some(xoff_point));
    assert_eq!(pg.xon_point_bytes, Some(xoff_point - 4608));
    assert_eq!(pg.drop_point_bytes, xoff_point + 160_000);
    assert_eq!(pg.headroom_bytes, 160_000);
    let lossy = &d.ports[0].priority_groups[0];
    assert_eq!(lossy.xoff_point_bytes, None);
    assert_eq!(lossy.xon_point_bytes, None);
}

#[test]
fn threshold_limits() {
    let shared = 9_000_000;
    let limit = |dynamic_th| Threshold::Dynamic { dynamic_th }.single_congested_limit_bytes(shared);
    assert_eq!(limit(0), 4_500_000);
    assert_eq!(limit(1), 6_000_000);
    assert_eq!(limit(3), 8_000_000);
    assert_eq!(limit(-1), 3_000_000);
    assert_eq!(limit(-3), 1_000_000);
    assert_eq!(limit(-8), 9_000_000 / 257);
    assert_eq!(limit(7), 9_000_000 * 128 / 129);
    let fixed = |static_th_bytes| {
        Threshold::Static { static_th_bytes }.single_congested_limit_bytes(shared)
    };
    assert_eq!(fixed(0), shared);
    assert_eq!(fixed(1000), 1000);
    assert_eq!(fixed(20_000_000), shared);
}
