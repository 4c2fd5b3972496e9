//! Built-in defaults: SONiC's `qos_config.j2` content (reference §1.9) and buffer pools/profiles
//! sized for a software switch. Every constant here is documented in docs/config.md.

use crate::model::{DSCP_COUNT, PRIORITY_COUNT};

/// Name of the built-in maps, schedulers' owner template and WRED profile family (SONiC's).
pub(crate) const AZURE: &str = "AZURE";

pub(crate) const DEFAULT_SWITCH_NAME: &str = "headroom";
pub(crate) const DEFAULT_CELL_SIZE_BYTES: u32 = 256;
/// Locally administered (bit 1 of the first octet), unicast; "hr" in the next two octets.
pub(crate) const DEFAULT_MAC: [u8; 6] = [0x02, 0x68, 0x72, 0x00, 0x00, 0x00];
pub(crate) const DEFAULT_ECN_SEED: u64 = 1;
/// Receive buffer of the netlink notification socket (linux-cp's default): room for a full
/// BGP table's worth of route notifications between two turns of the control loop.
pub(crate) const DEFAULT_NETLINK_RECEIVE_BUFFER_BYTES: u32 = 8 << 20;

/// The default ECMP hash seed: FNV-1a (32 bits) of the switch's name and MAC, so that two
/// switches of a fabric, which differ in one or the other, do not hash alike (polarisation).
pub(crate) fn ecmp_hash_seed(name: &str, mac: [u8; 6]) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in name.bytes().chain([0]).chain(mac) {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}
pub(crate) const DEFAULT_PFC_STORM_ALARM_FRAMES_PER_SECOND: u32 = 2000;
/// MAC table aging time, seconds (IEEE 802.1Q 8.8.3's recommended default; SAI
/// `SAI_SWITCH_ATTR_FDB_AGING_TIME`, 0 = no aging).
pub(crate) const DEFAULT_FDB_AGING_S: u32 = 300;
/// Longest MAC table aging time, seconds (the top of 802.1Q Table 8-6's range 10..=1 000 000;
/// shorter times than 10 s are accepted, for labs that study aging).
pub(crate) const MAX_FDB_AGING_S: u32 = 1_000_000;

/// Packet memory per port used to size the built-in pools when `buffer_size_bytes` is not given.
pub(crate) const DEFAULT_BUFFER_BYTES_PER_PORT: u64 = 2 * 1024 * 1024;
/// Floor of the default packet memory.
pub(crate) const MIN_DEFAULT_BUFFER_BYTES: u64 = 8 * 1024 * 1024;

pub(crate) const DEFAULT_CABLE_LENGTH_M: u32 = 5;
pub(crate) const DEFAULT_MTU_BYTES: u32 = 9100;
pub(crate) const DEFAULT_PFC_ENABLE: [u8; 2] = [3, 4];
pub(crate) const DEFAULT_PFC_QUANTA: u16 = 0xFFFF;
pub(crate) const DEFAULT_ACCESS_VLAN: u16 = 1;

pub(crate) const DEFAULT_PFCWD_POLL_INTERVAL_MS: u32 = 200;
pub(crate) const DEFAULT_PFCWD_DETECTION_TIME_MS: u32 = 200;
pub(crate) const DEFAULT_PFCWD_RESTORATION_TIME_MS: u32 = 200;

pub(crate) const DEFAULT_BURST_SIZE: u16 = 32;

// LLDP (802.1AB-2016 9.2.5: msgTxInterval 30 s in 1..=3600, msgTxHold 4 in 1..=100, txFastInit 4
// in 1..=8, msgFastTx 1 s in 1..=3600; the same as lldpad's and lldpd's defaults).
pub(crate) const DEFAULT_LLDP_ENABLED: bool = true;
pub(crate) const DEFAULT_LLDP_TX_INTERVAL_S: u16 = 30;
pub(crate) const DEFAULT_LLDP_TX_HOLD: u8 = 4;
pub(crate) const DEFAULT_LLDP_TX_FAST_INIT: u8 = 4;
pub(crate) const DEFAULT_LLDP_TX_FAST_INTERVAL_S: u16 = 1;
/// System Description sent when `lldp.system_description` is not given.
pub(crate) const DEFAULT_LLDP_SYSTEM_DESCRIPTION: &str = concat!(
    "headroom ",
    env!("CARGO_PKG_VERSION"),
    " lossless Ethernet switch"
);
pub(crate) const DEFAULT_PROMETHEUS_LISTEN: &str = "127.0.0.1:9464";

pub(crate) const DEFAULT_DPDK_MEMPOOL_MBUFS: u32 = 8191;
pub(crate) const DEFAULT_DPDK_MEMPOOL_CACHE_SIZE: u32 = 256;
pub(crate) const DEFAULT_DPDK_DESCRIPTORS: u16 = 1024;

/// Frames a port's fault injector may hold back at once (`testing.fault_injection.hold_frames`).
pub(crate) const DEFAULT_FAULT_HOLD_FRAMES: u16 = 64;

// Built-in pools (SONiC's conventional names).
pub(crate) const INGRESS_LOSSLESS_POOL: &str = "ingress_lossless_pool";
pub(crate) const INGRESS_LOSSY_POOL: &str = "ingress_lossy_pool";
pub(crate) const EGRESS_LOSSLESS_POOL: &str = "egress_lossless_pool";
pub(crate) const EGRESS_LOSSY_POOL: &str = "egress_lossy_pool";

// Built-in profiles.
pub(crate) const INGRESS_LOSSY_PROFILE: &str = "ingress_lossy_profile";
pub(crate) const EGRESS_LOSSLESS_PROFILE: &str = "egress_lossless_profile";
pub(crate) const EGRESS_LOSSY_PROFILE: &str = "egress_lossy_profile";
/// α = 8 for lossy PGs and queues (Mellanox `ingress_lossy_profile`, TD3 `egress_lossy_profile`).
pub(crate) const LOSSY_DYNAMIC_TH: i8 = 3;
/// One jumbo frame (36 cells of 256 B) guaranteed to each lossy queue (Mellanox
/// `egress_lossy_profile` size).
pub(crate) const EGRESS_LOSSY_RESERVED_BYTES: u64 = 9216;

/// `BUFFER_PG` value meaning "the port's computed lossless profile" (SONiC dynamic model).
pub(crate) const NULL_PROFILE: &str = "NULL";

// Built-in schedulers and WRED profile (§1.9).
pub(crate) const SCHEDULER_LOSSY: &str = "scheduler.0";
pub(crate) const SCHEDULER_LOSSY_WEIGHT: u8 = 14;
pub(crate) const SCHEDULER_LOSSLESS: &str = "scheduler.1";
pub(crate) const SCHEDULER_LOSSLESS_WEIGHT: u8 = 15;
pub(crate) const WRED_AZURE_LOSSLESS: &str = "AZURE_LOSSLESS";
pub(crate) const WRED_AZURE_MIN_THRESHOLD_BYTES: u64 = 1_048_576;
pub(crate) const WRED_AZURE_MAX_THRESHOLD_BYTES: u64 = 2_097_152;
pub(crate) const WRED_AZURE_DROP_PROBABILITY_PERCENT: u8 = 5;

/// `DSCP_TO_TC_MAP|AZURE`: 3→3, 4→4, 5→2, 8→0, 46→5, 48→6, every other DSCP → 1.
pub(crate) fn azure_dscp_to_tc() -> [u8; DSCP_COUNT] {
    let mut map = [1u8; DSCP_COUNT];
    map[3] = 3;
    map[4] = 4;
    map[5] = 2;
    map[8] = 0;
    map[46] = 5;
    map[48] = 6;
    map
}

/// `DOT1P_TO_TC_MAP|AZURE` for headroom: identity. (SONiC's backend-storage template has
/// 0→1, 1→0; a software lab switch keeps PCP = TC so that a PFC priority, a PCP and a TC are the
/// same number.)
pub(crate) const fn azure_dot1p_to_tc() -> [u8; PRIORITY_COUNT] {
    [0, 1, 2, 3, 4, 5, 6, 7]
}

/// `TC_TO_PRIORITY_GROUP_MAP|AZURE`: 3→3, 4→4, 7→7, others → 0.
pub(crate) const fn azure_tc_to_pg() -> [u8; PRIORITY_COUNT] {
    [0, 0, 0, 3, 4, 0, 0, 7]
}

/// `TC_TO_QUEUE_MAP|AZURE`: identity.
pub(crate) const fn azure_tc_to_queue() -> [u8; PRIORITY_COUNT] {
    [0, 1, 2, 3, 4, 5, 6, 7]
}

/// `MAP_PFC_PRIORITY_TO_QUEUE|AZURE`: identity.
pub(crate) const fn azure_pfc_to_queue() -> [u8; PRIORITY_COUNT] {
    [0, 1, 2, 3, 4, 5, 6, 7]
}

/// `PFC_PRIORITY_TO_PRIORITY_GROUP_MAP|AZURE`: 3→3, 4→4; unlisted priorities → 0.
pub(crate) const fn azure_pfc_to_pg() -> [u8; PRIORITY_COUNT] {
    [0, 0, 0, 3, 4, 0, 0, 0]
}
