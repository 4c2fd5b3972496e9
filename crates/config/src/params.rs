//! The core's parameters of a resolved configuration ([`Config::switch_params`]) and the sizes a
//! backend derives from it ([`Config::frame_pool_frames`]).
//!
//! Every value here was range-checked when the file was resolved, with file, line and key; this
//! module only changes representation (SONiC's names and units to the core's types). Where a
//! conversion could fail in principle, the comment next to it names the check that rules it
//! out. The one bound the resolver enforces for parsed files but a hand-built [`Config`] could
//! break (a pool index in one byte) is checked again here, so such a `Config` is refused rather
//! than clamped.

use headroom_core::params::{
    BufferProfile as CoreProfile, ParamsError, PoolDirection as CorePoolDirection, PoolId,
    PoolParams, PortParams, PortWatchdogParams, QosMaps as CoreMaps, QueueParams,
    SchedulerKind as CoreScheduler, SwitchParams, Threshold as CoreThreshold, Trust as CoreTrust,
    VlanMode, WatchdogAction, WatchdogGlobalParams, WredParams,
};
use headroom_core::route::{EcmpHash, EcmpHashAlgorithm as CoreEcmpHashAlgorithm, FibConfig};
use headroom_core::types::{PgIndex, PortId, Priority, PrioritySet, QueueIndex, TrafficClass};

use crate::model::{
    BufferProfile, Config, EcmpHashAlgorithm, PfcWdAction, PoolDirection, Port, QosMaps, Queue,
    SchedulerKind, Threshold, Trust, Vlan,
};

/// MAC table entries per ingress side (not configurable yet).
pub const FDB_CAPACITY: u32 = 16_384;

/// Most buffer pools a configuration may have: the core numbers them with one byte
/// ([`PoolId`]).
pub const MAX_POOLS: usize = u8::MAX as usize;

/// Most ports a configuration may have: the core numbers them with two bytes
/// (`headroom_core::types::PortId`).
pub const MAX_PORTS: usize = u16::MAX as usize;

/// Fewest and most frames a backend's frame pool holds ([`Config::frame_pool_frames`]).
pub const FRAME_POOL_FRAMES_MIN: usize = 8192;
/// See [`FRAME_POOL_FRAMES_MIN`]: 262 144 buffers of 2 KiB are about 560 MiB.
pub const FRAME_POOL_FRAMES_MAX: usize = 262_144;

/// Most frames one egress queue ring holds (per ingress side).
pub const QUEUE_RING_FRAMES_MAX: u32 = 32_768;

/// The core's MAC aging time for `switch.fdb_aging_s`: 0 (no aging) is the longest time there
/// is. Cannot overflow: `u32::MAX` seconds are 4.3e18 ns, below `u64::MAX` (1.8e19).
#[must_use]
pub fn fdb_aging_ns(aging_s: u32) -> u64 {
    match aging_s {
        0 => u64::MAX,
        s => u64::from(s) * 1_000_000_000,
    }
}

/// Milliseconds to nanoseconds; a `u32` of milliseconds times 10^6 fits `u64` (4.3e15).
fn ms_to_ns(ms: u32) -> u64 {
    u64::from(ms) * 1_000_000
}

impl Config {
    /// The FIB's sizes and ECMP hash (`[routing]`), for the netlink mirror that builds it.
    #[must_use]
    pub fn fib_config(&self) -> FibConfig {
        let r = &self.routing;
        let size = |v: u32| usize::try_from(v).unwrap_or(usize::MAX);
        FibConfig {
            ipv4_top_bits: r.ipv4_lpm_top_bits,
            ipv6_top_bits: r.ipv6_lpm_top_bits,
            max_ipv4_routes: size(r.max_ipv4_routes),
            max_ipv6_routes: size(r.max_ipv6_routes),
            max_ipv4_groups: size(r.max_ipv4_lpm_groups),
            max_ipv6_groups: size(r.max_ipv6_lpm_groups),
            max_next_hops: size(r.max_next_hops),
            max_ecmp_groups: size(r.max_ecmp_groups),
            // A power of two 2..=4096 (checked when resolved).
            ecmp_bucket_bits: u8::try_from(r.ecmp_group_buckets.trailing_zeros()).unwrap_or(7),
            hash: EcmpHash {
                algorithm: match r.ecmp_hash_algorithm {
                    EcmpHashAlgorithm::SipHash => CoreEcmpHashAlgorithm::SipHash,
                    EcmpHashAlgorithm::Crc32 => CoreEcmpHashAlgorithm::Crc32,
                },
                seed: r.ecmp_hash_seed,
                rotation: r.ecmp_hash_rotation,
            },
        }
    }

    /// Whether any port is routed (the runtime then mirrors the kernel's FIB).
    #[must_use]
    pub fn has_routed_ports(&self) -> bool {
        self.ports.iter().any(|p| p.vlan.is_routed())
    }

    /// The core's parameters for this configuration.
    ///
    /// # Errors
    /// Only for a configuration that did not come from [`crate::parse`]/[`crate::load`] (which
    /// refuse it with file, line and key): more than [`MAX_POOLS`] pools, or a profile naming a
    /// pool that does not exist. The core's own checks ([`SwitchParams::validate`]) run when
    /// it is built.
    pub fn switch_params(&self) -> Result<SwitchParams, ParamsError> {
        if self.pools.len() > MAX_POOLS {
            return Err(ParamsError(format!(
                "{} buffer pools: at most {MAX_POOLS}",
                self.pools.len()
            )));
        }
        for p in &self.ports {
            let profiles = p.priority_groups.iter().map(|pg| &pg.profile);
            for profile in profiles.chain(p.queues.iter().map(|q| &q.profile)) {
                if profile.pool_index >= self.pools.len() {
                    return Err(ParamsError(format!(
                        "port {} profile {}: pool index {} of {} pools",
                        p.name,
                        profile.name,
                        profile.pool_index,
                        self.pools.len()
                    )));
                }
            }
        }
        Ok(SwitchParams {
            cell_size_bytes: self.switch.cell_size_bytes,
            pools: self
                .pools
                .iter()
                .map(|p| PoolParams {
                    name: p.name.clone(),
                    direction: match p.direction {
                        PoolDirection::Ingress => CorePoolDirection::Ingress,
                        PoolDirection::Egress => CorePoolDirection::Egress,
                    },
                    size_bytes: p.size_bytes,
                    shared_headroom_bytes: p.shared_headroom_pool_bytes,
                })
                .collect(),
            ports: self.ports.iter().map(port).collect(),
            seed: self.switch.ecn_seed,
            watchdog: WatchdogGlobalParams {
                poll_interval_ns: ms_to_ns(self.pfcwd.poll_interval_ms),
                big_red_switch: self.pfcwd.big_red_switch,
            },
            storm_alarm_frames_per_second: self.switch.pfc_storm_alarm_frames_per_second,
            fdb_capacity: FDB_CAPACITY,
            fdb_aging_ns: fdb_aging_ns(self.switch.fdb_aging_s),
            fdb_static: self
                .fdb_static
                .iter()
                .map(|e| {
                    // Cannot truncate: `e.port` indexes `ports`, of which there are at most
                    // MAX_PORTS (u16::MAX), checked when the file is resolved.
                    (e.vlan_id, e.mac, PortId(e.port as u16))
                })
                .collect(),
            queue_ring_frames: self.queue_ring_frames(),
            // No configuration keys yet: the core's defaults (SONiC's CoPP rates).
            punt: headroom_core::params::PuntParams::default(),
            inject: headroom_core::params::InjectParams::default(),
            vlan_interfaces: self
                .vlan_interfaces
                .iter()
                .map(|v| headroom_core::params::VlanInterfaceParams {
                    vid: v.vlan_id,
                    mac: v.mac,
                })
                .collect(),
        })
    }

    /// Frames a backend's frame pool holds for this configuration: enough for a full buffer of
    /// 512-byte frames, at least [`FRAME_POOL_FRAMES_MIN`], at most [`FRAME_POOL_FRAMES_MAX`].
    #[must_use]
    pub fn frame_pool_frames(&self) -> usize {
        // Saturating on a (hypothetical) 32-bit target is exact here: anything above the
        // maximum becomes the maximum anyway.
        let by_buffer = usize::try_from(self.switch.buffer_size_bytes / 512).unwrap_or(usize::MAX);
        by_buffer.clamp(FRAME_POOL_FRAMES_MIN, FRAME_POOL_FRAMES_MAX)
    }

    /// Frames each egress queue's ring holds: a queue can never hold more frames than the pool
    /// has buffers, and at most [`QUEUE_RING_FRAMES_MAX`].
    #[must_use]
    pub fn queue_ring_frames(&self) -> u32 {
        let frames = self.frame_pool_frames();
        // `frames` ≤ FRAME_POOL_FRAMES_MAX (262 144), which fits u32; the minimum then makes
        // the value at most QUEUE_RING_FRAMES_MAX.
        u32::try_from(frames).map_or(QUEUE_RING_FRAMES_MAX, |f| f.min(QUEUE_RING_FRAMES_MAX))
    }
}

fn profile(p: &BufferProfile) -> CoreProfile {
    CoreProfile {
        // `Config::switch_params` checked every index against the pools, at most MAX_POOLS
        // (255) of them: the index fits one byte.
        pool: PoolId(p.pool_index as u8),
        reserved_bytes: p.size_bytes,
        threshold: match p.threshold {
            Threshold::Dynamic { dynamic_th } => CoreThreshold::Dynamic {
                exponent: dynamic_th,
            },
            Threshold::Static { static_th_bytes } => CoreThreshold::Static {
                bytes: static_th_bytes,
            },
        },
        xoff_bytes: p.xoff_bytes,
        xon_bytes: p.xon_bytes,
        xon_offset_bytes: p.xon_offset_bytes,
    }
}

/// The maps' values were checked to be 0..=7 when resolved (`map_table`, "values 0..=7"), so
/// taking the low three bits keeps every value as it is.
fn maps(m: &QosMaps) -> CoreMaps {
    CoreMaps {
        dscp_to_tc: m.dscp_to_tc.map(TrafficClass::from_low_bits),
        dot1p_to_tc: m.dot1p_to_tc.map(TrafficClass::from_low_bits),
        tc_to_pg: m.tc_to_pg.map(PgIndex::from_low_bits),
        tc_to_queue: m.tc_to_queue.map(QueueIndex::from_low_bits),
        pfc_to_queue: m.pfc_to_queue.map(QueueIndex::from_low_bits),
        pfc_to_pg: m.pfc_to_pg.map(PgIndex::from_low_bits),
    }
}

fn queue(q: &Queue) -> QueueParams {
    QueueParams {
        profile: profile(&q.profile),
        scheduler: match q.scheduler.kind {
            SchedulerKind::Strict => CoreScheduler::Strict,
            // WRR (packets) is served as DWRR (bytes): equal shares for equal frame sizes.
            SchedulerKind::Dwrr | SchedulerKind::Wrr => CoreScheduler::Dwrr {
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

fn port(p: &Port) -> PortParams {
    PortParams {
        name: p.name.clone(),
        mac: p.mac,
        speed_bps: p.speed_bits_per_second,
        shaper_rate_bps: p.shaper_rate_bits_per_second,
        mtu_bytes: p.mtu_bytes,
        trust: match p.trust {
            Trust::Dscp => CoreTrust::Dscp,
            Trust::Dot1p => CoreTrust::Dot1p,
        },
        // Checked 0..=7 when resolved (`default_priority`).
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
            Vlan::Access { vlan_id } => VlanMode::Access { vid: *vlan_id },
            Vlan::Trunk {
                allowed_vlan_ids,
                native_vlan_id,
            } => VlanMode::Trunk {
                allowed: allowed_vlan_ids.clone(),
                native: *native_vlan_id,
            },
            Vlan::Routed => VlanMode::Routed,
        },
        watchdog: p.pfcwd.enabled.then_some(PortWatchdogParams {
            action: match p.pfcwd.action {
                PfcWdAction::Drop => WatchdogAction::Drop,
                PfcWdAction::Forward => WatchdogAction::Forward,
                PfcWdAction::Alert => WatchdogAction::Alert,
            },
            detection_time_ns: ms_to_ns(p.pfcwd.detection_time_ms),
            restoration_time_ns: ms_to_ns(p.pfcwd.restoration_time_ms),
            watched: PrioritySet(p.pfcwd_enable.0),
        }),
    }
}
