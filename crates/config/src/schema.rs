//! The TOML schema as written by the operator: every field optional where a default exists,
//! unknown keys refused. Values are checked and resolved in [`crate::resolve`]; keeping the raw
//! types loose (integers as `i64`, speeds as text or numbers) lets those checks report the value
//! with its key and range instead of a bare serde type error.

use core::fmt;

use indexmap::IndexMap;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::Deserialize;

/// An integer or a string, e.g. a speed `100000` (Mb/s, as SONiC) or `"100G"`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum IntOrText {
    Int(i64),
    Text(String),
}

impl<'de> Deserialize<'de> for IntOrText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntOrTextVisitor;
        impl Visitor<'_> for IntOrTextVisitor {
            type Value = IntOrText;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<IntOrText, E> {
                Ok(IntOrText::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<IntOrText, E> {
                i64::try_from(v)
                    .map(IntOrText::Int)
                    .map_err(|_| E::custom(format!("{v} is too large")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntOrText, E> {
                Ok(IntOrText::Text(v.to_owned()))
            }
        }
        deserializer.deserialize_any(IntOrTextVisitor)
    }
}

/// A list of integers written as a TOML array (`[3, 4]`) or as SONiC writes it (`"3,4"`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum IntList {
    Array(Vec<IntOrText>),
    Text(String),
}

impl<'de> Deserialize<'de> for IntList {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct IntListVisitor;
        impl<'de> Visitor<'de> for IntListVisitor {
            type Value = IntList;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array like [3, 4] or a string like \"3,4\"")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<IntList, E> {
                Ok(IntList::Text(v.to_owned()))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IntList, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<IntOrText>()? {
                    items.push(item);
                }
                Ok(IntList::Array(items))
            }
        }
        deserializer.deserialize_any(IntListVisitor)
    }
}

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub switch: RawSwitch,
    #[serde(default)]
    pub port_defaults: RawPort,
    #[serde(default)]
    pub port: IndexMap<String, RawPort>,
    #[serde(default)]
    pub buffer_pool: IndexMap<String, RawPool>,
    #[serde(default)]
    pub buffer_profile: IndexMap<String, RawProfile>,
    #[serde(default)]
    pub dscp_to_tc_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub dot1p_to_tc_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub tc_to_pg_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub tc_to_queue_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub pfc_to_queue_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub pfc_to_pg_map: IndexMap<String, RawMap>,
    #[serde(default)]
    pub wred_profile: IndexMap<String, RawWred>,
    #[serde(default)]
    pub scheduler: IndexMap<String, RawScheduler>,
    #[serde(default)]
    pub pfcwd: RawPfcWdGlobal,
    #[serde(default)]
    pub runtime: RawRuntime,
    pub dpdk: Option<RawDpdk>,
    #[serde(default)]
    pub headroom_calc: RawHeadroomCalc,
    #[serde(default)]
    pub lldp: RawLldp,
    #[serde(default)]
    pub fdb: RawFdb,
    #[serde(default)]
    pub testing: RawTesting,
    #[serde(default)]
    pub routing: RawRouting,
    #[serde(default)]
    pub vlan_interface: IndexMap<String, RawVlanInterface>,
}

/// `[vlan_interface.VlanN]`: a VLAN interface (SVI), SONiC's `VLAN_INTERFACE|VlanN`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawVlanInterface {
    pub mac: Option<String>,
}

/// `[routing]`: the FIB the Linux routes are mirrored into, and the ECMP hash.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouting {
    pub ecmp_hash_seed: Option<i64>,
    pub ecmp_hash_algorithm: Option<RawEcmpHashAlgorithm>,
    pub ecmp_hash_rotation: Option<i64>,
    pub ecmp_group_buckets: Option<i64>,
    pub ipv4_lpm_top_bits: Option<i64>,
    pub ipv6_lpm_top_bits: Option<i64>,
    pub max_ipv4_routes: Option<i64>,
    pub max_ipv6_routes: Option<i64>,
    pub max_ipv4_lpm_groups: Option<i64>,
    pub max_ipv6_lpm_groups: Option<i64>,
    pub max_next_hops: Option<i64>,
    pub max_ecmp_groups: Option<i64>,
    pub netlink_receive_buffer_bytes: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawEcmpHashAlgorithm {
    Siphash,
    Crc32,
}

/// `[fdb]`: the MAC table's configured part.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFdb {
    #[serde(rename = "static", default)]
    pub static_entries: Vec<RawStaticFdb>,
}

/// `[[fdb.static]]`: a station the switch knows without learning it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawStaticFdb {
    pub mac: String,
    pub port: String,
    pub vlan: Option<i64>,
}

/// `[lldp]`: the LLDP/DCBX agent (IEEE 802.1AB, 802.1Qaz).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLldp {
    pub enabled: Option<bool>,
    pub tx_interval_s: Option<i64>,
    pub tx_hold: Option<i64>,
    pub tx_fast_init: Option<i64>,
    pub tx_fast_interval_s: Option<i64>,
    pub system_name: Option<String>,
    pub system_description: Option<String>,
    pub roce_priority: Option<i64>,
}

/// A port's LLDP admin status (802.1AB-2016 9.2.5.1 adminStatus; lldpd's spelling with `_`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawLldpAdminStatus {
    RxAndTx,
    TxOnly,
    RxOnly,
    Disabled,
}

/// Keys `"<from>"` or `"<from>-<to>"` (or `default`) to values.
pub(crate) type RawMap = IndexMap<String, i64>;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawDriver {
    Afpacket,
    Dpdk,
    Memory,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawLogFormat {
    Text,
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawLogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawSwitch {
    pub name: Option<String>,
    pub cell_size_bytes: Option<i64>,
    pub buffer_size_bytes: Option<u64>,
    pub ecn_seed: Option<u64>,
    pub fdb_aging_s: Option<i64>,
    pub mac: Option<String>,
    pub driver: Option<RawDriver>,
    pub pfc_storm_alarm_frames_per_second: Option<i64>,
    pub log_format: Option<RawLogFormat>,
    pub log_level: Option<RawLogLevel>,
    pub platform: Option<String>,
    pub hwsku: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawTrust {
    Dscp,
    Dot1p,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawVlanMode {
    Access,
    Trunk,
    Routed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawPfcWdAction {
    Drop,
    Forward,
    Alert,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPortPfcWd {
    pub enabled: Option<bool>,
    pub action: Option<RawPfcWdAction>,
    pub detection_time: Option<i64>,
    pub restoration_time: Option<i64>,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawQueue {
    pub scheduler: Option<String>,
    pub wred_profile: Option<String>,
}

/// One port, or `[port_defaults]` (where `device` and `mac` are refused).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPort {
    pub device: Option<String>,
    pub alias: Option<String>,
    pub mac: Option<String>,
    pub speed: Option<IntOrText>,
    pub cable_length: Option<IntOrText>,
    pub mtu: Option<i64>,
    pub tx_enable: Option<bool>,
    pub trust: Option<RawTrust>,
    pub default_priority: Option<i64>,
    pub pfc_enable: Option<IntList>,
    pub pfcwd_enable: Option<IntList>,
    pub pause_802_3x: Option<bool>,
    pub pfc_quanta: Option<i64>,
    pub pfc_refresh_us: Option<i64>,
    pub vlan_mode: Option<RawVlanMode>,
    pub access_vlan: Option<i64>,
    pub trunk_vlans: Option<IntList>,
    pub native_vlan: Option<i64>,
    pub shaper_rate: Option<IntOrText>,
    pub dscp_to_tc_map: Option<String>,
    pub dot1p_to_tc_map: Option<String>,
    pub tc_to_pg_map: Option<String>,
    pub tc_to_queue_map: Option<String>,
    pub pfc_to_queue_map: Option<String>,
    pub pfc_to_pg_map: Option<String>,
    pub pfcwd: Option<RawPortPfcWd>,
    pub buffer_pg: Option<IndexMap<String, String>>,
    pub buffer_queue: Option<IndexMap<String, String>>,
    pub queue: Option<IndexMap<String, RawQueue>>,
    pub lldp_admin_status: Option<RawLldpAdminStatus>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawPoolType {
    Ingress,
    Egress,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawPoolMode {
    Static,
    Dynamic,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPool {
    #[serde(rename = "type")]
    pub pool_type: RawPoolType,
    pub mode: RawPoolMode,
    pub size: u64,
    pub xoff: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawHeadroom {
    /// xon, xoff and size come from the headroom formula for each port the profile is bound to.
    Computed,
    /// xon, xoff and size are as written (the default).
    Static,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawProfile {
    pub pool: String,
    pub size: Option<u64>,
    pub dynamic_th: Option<i64>,
    pub static_th: Option<u64>,
    pub xon: Option<u64>,
    pub xoff: Option<u64>,
    pub xon_offset: Option<u64>,
    pub headroom: Option<RawHeadroom>,
}

/// `ecn` values, SONiC spelling (`ecn_none`, `ecn_green`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub(crate) enum RawEcn {
    #[serde(rename = "ecn_none")]
    None,
    #[serde(rename = "ecn_green")]
    Green,
    #[serde(rename = "ecn_yellow")]
    Yellow,
    #[serde(rename = "ecn_red")]
    Red,
    #[serde(rename = "ecn_green_yellow")]
    GreenYellow,
    #[serde(rename = "ecn_green_red")]
    GreenRed,
    #[serde(rename = "ecn_yellow_red")]
    YellowRed,
    #[serde(rename = "ecn_all")]
    All,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawWred {
    pub ecn: Option<RawEcn>,
    pub wred_green_enable: Option<bool>,
    pub wred_yellow_enable: Option<bool>,
    pub wred_red_enable: Option<bool>,
    pub green_min_threshold: Option<u64>,
    pub green_max_threshold: Option<u64>,
    pub green_drop_probability: Option<i64>,
    pub yellow_min_threshold: Option<u64>,
    pub yellow_max_threshold: Option<u64>,
    pub yellow_drop_probability: Option<i64>,
    pub red_min_threshold: Option<u64>,
    pub red_max_threshold: Option<u64>,
    pub red_drop_probability: Option<i64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub(crate) enum RawSchedulerType {
    #[serde(rename = "STRICT", alias = "strict")]
    Strict,
    #[serde(rename = "DWRR", alias = "dwrr")]
    Dwrr,
    #[serde(rename = "WRR", alias = "wrr")]
    Wrr,
}

#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawScheduler {
    #[serde(rename = "type")]
    pub scheduler_type: Option<RawSchedulerType>,
    pub weight: Option<i64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPfcWdGlobal {
    pub poll_interval: Option<i64>,
    pub big_red_switch: Option<bool>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawPolling {
    Busy,
    Adaptive,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLcore {
    pub cpu: i64,
    #[serde(default)]
    pub rx_ports: Vec<String>,
    #[serde(default)]
    pub tx_ports: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRuntime {
    pub lcore: Option<Vec<RawLcore>>,
    pub polling: Option<RawPolling>,
    pub burst_size: Option<i64>,
    pub control_socket: Option<String>,
    pub prometheus_enable: Option<bool>,
    pub prometheus_listen: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawDpdk {
    pub eal_args: Option<Vec<String>>,
    pub mempool_mbufs: Option<i64>,
    pub mempool_cache_size: Option<i64>,
    pub rx_descriptors: Option<i64>,
    pub tx_descriptors: Option<i64>,
}

/// `[testing]`: settings for tests and drills only, never for a production switch.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTesting {
    pub fault_injection: Option<RawFaultInjection>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFaultInjection {
    pub i_understand_this_breaks_traffic: Option<bool>,
    pub seed: Option<i64>,
    pub ports: Option<Vec<String>>,
    pub hold_frames: Option<i64>,
    pub tx_stalls_per_second: Option<f64>,
    pub tx_stall_ms: Option<f64>,
    pub link_flaps_per_second: Option<f64>,
    pub link_down_ms: Option<f64>,
    pub rx: Option<RawFrameFaults>,
    pub tx: Option<RawFrameFaults>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawFrameFaults {
    pub drop_rate: Option<f64>,
    pub corrupt_rate: Option<f64>,
    pub truncate_rate: Option<f64>,
    pub duplicate_rate: Option<f64>,
    pub reorder_rate: Option<f64>,
    pub delay_rate: Option<f64>,
    pub delay_max_us: Option<f64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHeadroomCalc {
    pub cell_size_bytes: Option<i64>,
    pub pipeline_latency_kib: Option<f64>,
    pub mac_phy_delay_kib: Option<f64>,
    pub peer_response_time_kib: Option<f64>,
    pub software_latency_kib: Option<f64>,
    pub lossless_mtu: Option<i64>,
    pub small_packet_percentage: Option<i64>,
    pub shared_headroom_pool: Option<bool>,
    pub over_subscribe_ratio: Option<i64>,
    pub default_dynamic_th: Option<i64>,
    pub lossless_pool: Option<String>,
    pub allow_headroom_below_minimum: Option<bool>,
}
