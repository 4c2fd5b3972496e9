//! From a resolved configuration to what the runtime runs: the core's parameters and the lcore
//! layout. Everything here is a mechanical translation; the configuration crate has already
//! validated every value and cross-checked the whole.

use crate::lcore::Polling;
use crate::{LcoreSpec, RuntimeSpec};
use headroom_config as cfg;
use headroom_core::params::{
    BufferProfile, PoolDirection, PoolId, PoolParams, PortParams, PortWatchdogParams, QosMaps,
    QueueParams, SchedulerKind, SwitchParams, Threshold, Trust, VlanMode, WatchdogAction,
    WatchdogGlobalParams, WredParams,
};
use headroom_core::types::{PgIndex, PortId, Priority, PrioritySet, QueueIndex, TrafficClass};
use std::time::Duration;

/// MAC table entries (not configurable yet).
pub const FDB_CAPACITY: u32 = 16_384;
/// The core's MAC aging time for `switch.fdb_aging_s`: 0 (no aging) is the longest time there
/// is.
#[must_use]
pub fn fdb_aging_ns(aging_s: u32) -> u64 {
    match aging_s {
        0 => u64::MAX,
        s => u64::from(s) * 1_000_000_000,
    }
}

/// Frames the frame pool holds: enough for a full buffer of 512-byte frames, at least 8192,
/// at most 262 144 (about 560 MiB of 2 KiB buffers).
#[must_use]
pub fn pool_frames(config: &cfg::Config) -> usize {
    let by_buffer = config.switch.buffer_size_bytes / 512;
    usize::try_from(by_buffer.clamp(8192, 262_144)).unwrap_or(262_144)
}

fn profile(p: &cfg::BufferProfile) -> BufferProfile {
    BufferProfile {
        pool: PoolId(u8::try_from(p.pool_index).unwrap_or(u8::MAX)),
        reserved_bytes: p.size_bytes,
        threshold: match p.threshold {
            cfg::Threshold::Dynamic { dynamic_th } => Threshold::Dynamic {
                exponent: dynamic_th,
            },
            cfg::Threshold::Static { static_th_bytes } => Threshold::Static {
                bytes: static_th_bytes,
            },
        },
        xoff_bytes: p.xoff_bytes,
        xon_bytes: p.xon_bytes,
        xon_offset_bytes: p.xon_offset_bytes,
    }
}

fn maps(m: &cfg::QosMaps) -> QosMaps {
    QosMaps {
        dscp_to_tc: m.dscp_to_tc.map(TrafficClass::from_low_bits),
        dot1p_to_tc: m.dot1p_to_tc.map(TrafficClass::from_low_bits),
        tc_to_pg: m.tc_to_pg.map(PgIndex::from_low_bits),
        tc_to_queue: m.tc_to_queue.map(QueueIndex::from_low_bits),
        pfc_to_queue: m.pfc_to_queue.map(QueueIndex::from_low_bits),
        pfc_to_pg: m.pfc_to_pg.map(PgIndex::from_low_bits),
    }
}

fn queue(q: &cfg::Queue) -> QueueParams {
    QueueParams {
        profile: profile(&q.profile),
        scheduler: match q.scheduler.kind {
            cfg::SchedulerKind::Strict => SchedulerKind::Strict,
            // WRR (packets) is served as DWRR (bytes): equal shares for equal frame sizes.
            cfg::SchedulerKind::Dwrr | cfg::SchedulerKind::Wrr => SchedulerKind::Dwrr {
                weight: q.scheduler.weight,
            },
        },
        wred: q.wred.as_ref().and_then(|w| {
            // Every frame is green (headroom does not colour).
            let ecn_mark = w.ecn.marks_green();
            let drop_enable = w.green.wred_enable;
            (ecn_mark || drop_enable).then_some(WredParams {
                ecn_mark,
                drop_enable,
                min_threshold_bytes: w.green.min_threshold_bytes,
                max_threshold_bytes: w.green.max_threshold_bytes,
                probability_percent: w.green.drop_probability_percent,
            })
        }),
    }
}

fn port(p: &cfg::Port) -> PortParams {
    PortParams {
        name: p.name.clone(),
        mac: p.mac,
        speed_bps: p.speed_bits_per_second,
        shaper_rate_bps: p.shaper_rate_bits_per_second,
        mtu_bytes: p.mtu_bytes,
        trust: match p.trust {
            cfg::Trust::Dscp => Trust::Dscp,
            cfg::Trust::Dot1p => Trust::Dot1p,
        },
        default_priority: Priority::from_low_bits(p.default_priority),
        maps: maps(&p.maps),
        pfc_enable: PrioritySet(p.pfc_enable.0),
        pause_802_3x: p.pause_802_3x,
        pfc_quanta: p.pfc_quanta,
        pfc_refresh_ns: p.pfc_refresh_ns,
        pgs: core::array::from_fn(|i| profile(&p.priority_groups[i].profile)),
        queues: core::array::from_fn(|i| queue(&p.queues[i])),
        tx_enable: p.tx_enable,
        vlan: match &p.vlan {
            cfg::Vlan::Access { vlan_id } => VlanMode::Access { vid: *vlan_id },
            cfg::Vlan::Trunk {
                allowed_vlan_ids,
                native_vlan_id,
            } => VlanMode::Trunk {
                allowed: allowed_vlan_ids.clone(),
                native: *native_vlan_id,
            },
        },
        watchdog: p.pfcwd.enabled.then_some(PortWatchdogParams {
            action: match p.pfcwd.action {
                cfg::PfcWdAction::Drop => WatchdogAction::Drop,
                cfg::PfcWdAction::Forward => WatchdogAction::Forward,
                cfg::PfcWdAction::Alert => WatchdogAction::Alert,
            },
            detection_time_ns: u64::from(p.pfcwd.detection_time_ms) * 1_000_000,
            restoration_time_ns: u64::from(p.pfcwd.restoration_time_ms) * 1_000_000,
            watched: PrioritySet(p.pfcwd_enable.0),
        }),
    }
}

/// The core's parameters for a configuration.
#[must_use]
pub fn switch_params(config: &cfg::Config) -> SwitchParams {
    SwitchParams {
        cell_size_bytes: config.switch.cell_size_bytes,
        pools: config
            .pools
            .iter()
            .map(|p| PoolParams {
                name: p.name.clone(),
                direction: match p.direction {
                    cfg::PoolDirection::Ingress => PoolDirection::Ingress,
                    cfg::PoolDirection::Egress => PoolDirection::Egress,
                },
                size_bytes: p.size_bytes,
                shared_headroom_bytes: p.shared_headroom_pool_bytes,
            })
            .collect(),
        ports: config.ports.iter().map(port).collect(),
        seed: config.switch.ecn_seed,
        watchdog: WatchdogGlobalParams {
            poll_interval_ns: u64::from(config.pfcwd.poll_interval_ms) * 1_000_000,
            big_red_switch: config.pfcwd.big_red_switch,
        },
        storm_alarm_frames_per_second: config.switch.pfc_storm_alarm_frames_per_second,
        fdb_capacity: FDB_CAPACITY,
        fdb_aging_ns: fdb_aging_ns(config.switch.fdb_aging_s),
        fdb_static: config
            .fdb_static
            .iter()
            .map(|e| {
                (
                    e.vlan_id,
                    e.mac,
                    PortId(u16::try_from(e.port).unwrap_or(u16::MAX)),
                )
            })
            .collect(),
        // A queue can never hold more frames than the pool has buffers.
        queue_ring_frames: u32::try_from(pool_frames(config).min(32_768)).unwrap_or(32_768),
        // No configuration keys yet: the core's defaults (SONiC's CoPP rates).
        punt: headroom_core::params::PuntParams::default(),
        inject: headroom_core::params::InjectParams::default(),
    }
}

/// What the runtime runs for a configuration.
#[must_use]
pub fn runtime_spec(config: &cfg::Config) -> RuntimeSpec {
    let to_ports = |v: &[usize]| {
        v.iter()
            .map(|&i| PortId(u16::try_from(i).unwrap_or(u16::MAX)))
            .collect()
    };
    RuntimeSpec {
        params: switch_params(config),
        devices: config.ports.iter().map(|p| p.device.clone()).collect(),
        lcores: config
            .runtime
            .lcores
            .iter()
            .map(|l| LcoreSpec {
                cpu: Some(l.cpu as usize),
                rx_ports: to_ports(&l.rx_ports),
                tx_ports: to_ports(&l.tx_ports),
            })
            .collect(),
        polling: match config.runtime.polling {
            cfg::Polling::Busy => Polling::Busy,
            cfg::Polling::Adaptive => Polling::default(),
        },
        burst: usize::from(config.runtime.burst_size).max(1),
        drain_timeout: Duration::from_millis(200),
        capture_flags: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_example_config_builds_a_core() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let (config, _) = headroom_config::load(&path)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let spec = runtime_spec(&config);
                spec.params
                    .validate()
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let steps = headroom_core::switch::build::<headroom_core::frame::HeapFrame>(
                    spec.params.clone(),
                    spec.layout().unwrap(),
                    headroom_core::time::Instant::ZERO,
                );
                assert!(steps.is_ok(), "{}: {:?}", path.display(), steps.err());
                n += 1;
            }
        }
        assert!(n >= 4);
    }

    #[test]
    fn fdb_aging_reaches_the_core_and_zero_means_never() {
        let with = |extra: &str| {
            let text = format!(
                "[switch]\n{extra}\n[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n"
            );
            let (config, _) = headroom_config::parse(&text, "t.toml").unwrap();
            switch_params(&config).fdb_aging_ns
        };
        assert_eq!(with(""), 300_000_000_000);
        assert_eq!(with("fdb_aging_s = 5"), 5_000_000_000);
        assert_eq!(with("fdb_aging_s = 0"), u64::MAX);
    }

    #[test]
    fn lab_config_translates_sonic_semantics() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/lab.toml");
        let (config, _) = headroom_config::load(path).unwrap();
        let p = switch_params(&config);
        assert_eq!(p.ports.len(), 4);
        let port = &p.ports[0];
        assert_eq!(port.speed_bps, 1_000_000_000);
        assert_eq!(port.pfc_enable, PrioritySet(0b1_1000));
        assert!(
            port.pgs[3].is_lossless() && port.pgs[4].is_lossless() && !port.pgs[0].is_lossless()
        );
        assert_eq!(
            port.pgs[3].xoff_bytes,
            config.ports[0].priority_groups[3].profile.xoff_bytes
        );
        assert!(port.queues[3].wred.is_some_and(|w| w.ecn_mark));
        assert_eq!(
            port.watchdog.map(|w| w.detection_time_ns),
            Some(200_000_000)
        );
    }
}
