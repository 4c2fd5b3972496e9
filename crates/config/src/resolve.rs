//! From the raw schema to the resolved [`Config`]: defaults, name resolution, range expansion,
//! headroom computation and every cross-check. Errors are collected (not returned at the first)
//! so that one run reports as much as it can.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;

use headroom_core::types::PortId;
use indexmap::IndexMap;

use crate::defaults::{self as def, AZURE};
use crate::error::{join_key, Diagnostic, Diagnostics};
use crate::headroom::{compute_headroom, HeadroomConstants, HeadroomPort, HeadroomValues};
use crate::model::{
    tc_of_priority, BufferPool, BufferProfile, Config, Dpdk, Driver, EcmpHashAlgorithm, EcnMode,
    FaultInjection, FrameFaults, HeadroomCalc, Lcore, Lldp, LldpAdminStatus, LogFormat, LogLevel,
    PfcWdAction, PfcWdGlobal, Polling, PoolDirection, Port, PortPfcWd, PriorityBits, PriorityGroup,
    QosMaps, Queue, Routing, Runtime, Scheduler, SchedulerKind, StaticFdb, Switch, Testing,
    Threshold, ThresholdMode, Trust, Vlan, VlanInterface, WredColor, WredProfile, DSCP_COUNT,
    PRIORITY_COUNT,
};
use crate::params::{MAX_POOLS, MAX_PORTS};
use crate::schema::{
    IntList, RawConfig, RawDriver, RawEcmpHashAlgorithm, RawEcn, RawHeadroom, RawLldpAdminStatus,
    RawLogFormat, RawLogLevel, RawPfcWdAction, RawPolling, RawPoolMode, RawPoolType, RawPort,
    RawPortPfcWd, RawQueue, RawSchedulerType, RawTrust, RawVlanMode, RawWred,
};
use crate::values::{
    check_linux_ifname, in_range, mac_add, parse_cable_length_m, parse_index_range, parse_int_list,
    parse_speed_mbps, parse_unicast_mac,
};

/// Inputs of resolution that do not come from the file.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Environment<'e> {
    /// CPUs the process may run on (its affinity mask), ascending: every lcore `cpu` must be
    /// one of them, and the default lcore takes the first.
    pub allowed_cpus: &'e [usize],
}

/// A profile before it is bound to a port.
#[derive(Clone, Debug)]
struct ProfileTemplate {
    name: String,
    pool_index: usize,
    size_bytes: u64,
    threshold: Threshold,
    xon_bytes: u64,
    xoff_bytes: u64,
    xon_offset_bytes: u64,
    computed: bool,
    /// Key path of the profile table (`buffer_profile.<name>`), `None` for built-ins.
    path: Option<String>,
}

/// A pool before its accounting is known.
#[derive(Clone, Debug)]
struct PoolDraft {
    name: String,
    direction: PoolDirection,
    mode: ThresholdMode,
    size_bytes: u64,
    xoff_bytes: u64,
    /// Key path for errors: the user's table, or where the default size came from.
    path: String,
    user_defined: bool,
    /// Σ size of PGs/queues bound to the pool (filled by the accounting).
    reserved_bytes: u64,
    /// Σ xoff of lossless PGs bound to the pool when it has no SHP (filled by the accounting).
    private_headroom_bytes: u64,
}

/// Where a PG or queue binding came from, for error messages.
#[derive(Clone, Debug)]
struct Binding {
    profile: String,
    /// Key path of the binding entry, or of the port for built-in bindings.
    path: String,
}

#[derive(Clone, Debug)]
struct QueueSetting {
    scheduler: String,
    scheduler_path: String,
    wred: Option<String>,
    wred_path: String,
}

type NamedMaps = IndexMap<String, Vec<u8>>;

struct Maps {
    dscp_to_tc: NamedMaps,
    dot1p_to_tc: NamedMaps,
    tc_to_pg: NamedMaps,
    tc_to_queue: NamedMaps,
    pfc_to_queue: NamedMaps,
    pfc_to_pg: NamedMaps,
}

/// Names used by some port, to warn about unused definitions.
#[derive(Default)]
struct Usage {
    profiles: Vec<String>,
    maps: Vec<(&'static str, String)>,
    schedulers: Vec<String>,
    wred: Vec<String>,
}

struct Resolver<'r, 'd> {
    raw: &'r RawConfig,
    d: &'r mut Diagnostics<'d>,
    usage: Usage,
}

/// Resolve and check `raw`. Returns `None` when errors were recorded in `d`.
pub(crate) fn resolve(
    raw: &RawConfig,
    d: &mut Diagnostics<'_>,
    environment: Environment<'_>,
) -> Option<Config> {
    let mut resolver = Resolver {
        raw,
        d,
        usage: Usage::default(),
    };
    let config = resolver.run(environment);
    if resolver.d.errors.is_empty() {
        config
    } else {
        None
    }
}

/// CPUs as `taskset -c` and `/proc/*/status` write them: ascending ranges, `0-3,6`.
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    if out.is_empty() {
        "none".to_owned()
    } else {
        out.join(",")
    }
}

fn port_path(name: &str) -> String {
    join_key("port", name)
}

fn to_u8(v: i64) -> u8 {
    u8::try_from(v).unwrap_or(u8::MAX)
}

fn to_u16(v: i64) -> u16 {
    u16::try_from(v).unwrap_or(u16::MAX)
}

fn to_u32(v: i64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `value` rounded up to a whole number of cells.
fn round_up_to_cells(value: u64, cell: u32) -> u64 {
    let cell = u64::from(cell.max(1));
    value.div_ceil(cell).saturating_mul(cell)
}

/// A field of a port, from the port or else from `[port_defaults]`, with the key path it came from.
fn port_field<'a, T>(
    port: &'a RawPort,
    defaults: &'a RawPort,
    port_name: &str,
    field: &str,
    get: impl Fn(&'a RawPort) -> Option<&'a T>,
) -> (Option<&'a T>, String) {
    if let Some(value) = get(port) {
        (Some(value), join_key(&port_path(port_name), field))
    } else if let Some(value) = get(defaults) {
        (Some(value), join_key("port_defaults", field))
    } else {
        (None, join_key(&port_path(port_name), field))
    }
}

impl Resolver<'_, '_> {
    /// An `i64` setting in `min..=max`, or `default` when absent; on error records it and returns
    /// the default.
    fn ranged(&mut self, value: Option<i64>, path: &str, min: i64, max: i64, default: i64) -> i64 {
        match value {
            None => default,
            Some(v) => match in_range(v, min, max) {
                Ok(v) => v,
                Err(reason) => {
                    self.d.error(path, reason);
                    default
                }
            },
        }
    }

    fn run(&mut self, environment: Environment<'_>) -> Option<Config> {
        let raw = self.raw;
        if raw.port.len() > MAX_PORTS {
            // Checked before anything else: every port id below fits the core's 16-bit PortId,
            // and nothing per port is worth reporting for a file this far out.
            let key = raw
                .port
                .keys()
                .nth(MAX_PORTS)
                .map_or_else(|| "port".to_owned(), |name| port_path(name));
            self.d.error_at_key(
                &key,
                format!(
                    "{} ports: at most {MAX_PORTS} (the core numbers ports with 16 bits)",
                    raw.port.len()
                ),
            );
            return None;
        }
        let switch = self.switch();
        let lldp = self.lldp(&switch);
        let pfcwd = self.pfcwd_global();
        let maps = self.maps();
        let schedulers = self.schedulers();
        let wred = self.wred_profiles();
        let mut pools = self.pools(&switch);
        let (headroom_calc, lossless_pool_index) = self.headroom_calc(&switch, &pools);
        let templates = self.profiles(&pools, &switch, &headroom_calc);

        if raw.port.is_empty() {
            self.d
                .error("port", "no ports: add at least one [port.<name>] table");
        }
        if raw.port_defaults.device.is_some() {
            self.d.error_at_key(
                "port_defaults.device",
                "a device belongs to one port: set it in [port.<name>]",
            );
        }
        if raw.port_defaults.alias.is_some() {
            self.d.error_at_key(
                "port_defaults.alias",
                "an alias names one port: set it in [port.<name>]",
            );
        }
        if raw.port_defaults.mac.is_some() {
            self.d.error_at_key(
                "port_defaults.mac",
                "a MAC address belongs to one port: set it in [port.<name>]",
            );
        }

        let context = PortContext {
            switch: &switch,
            pfcwd: &pfcwd,
            maps: &maps,
            schedulers: &schedulers,
            wred: &wred,
            pools: &pools,
            templates: &templates,
            headroom_calc: &headroom_calc,
            lossless_pool_index,
            lldp: &lldp,
        };
        let mut ports = Vec::with_capacity(raw.port.len());
        // What a port's checks find about a value the port does not write itself (a
        // `[port_defaults]` key, a shared profile or map) is found once per port: it is reported
        // once, naming every port it applies to.
        let mut per_port = PerPortFindings::default();
        for (index, (name, raw_port)) in raw.port.iter().enumerate() {
            let (errors_before, warnings_before) = (self.d.errors.len(), self.d.warnings.len());
            let port = self.port(index, name, raw_port, &context);
            per_port.take(self.d, name, errors_before, warnings_before);
            if let Some(port) = port {
                ports.push(port);
            }
        }
        per_port.report(self.d);
        self.unique_devices();
        self.lldp_checks(&lldp, &ports);

        self.pool_accounting(&mut pools, &ports, &headroom_calc, lossless_pool_index);
        self.port_buffer_checks(&ports, &pools, &templates, &headroom_calc);

        let runtime = self.runtime(&switch, environment);
        let dpdk = self.dpdk(&switch);
        let fdb_static = self.fdb_static(&ports);
        let testing = self.testing(&ports);
        let routing = self.routing(&switch);
        let vlan_interfaces = self.vlan_interfaces(&switch, &ports);
        self.warn_unused(&pools, &ports);

        if !self.d.errors.is_empty() {
            return None;
        }
        let (pools, ports) = drop_unused_builtin_pools(pools, ports);
        if pools.len() > MAX_POOLS {
            // User pools come first, so the first pool beyond the limit is the user's unless
            // the built-ins in use pushed the count over.
            let key = self.raw.buffer_pool.keys().nth(MAX_POOLS).map_or_else(
                || "buffer_pool".to_owned(),
                |name| join_key("buffer_pool", name),
            );
            self.d.error_at_key(
                &key,
                format!(
                    "{} buffer pools (built-in pools in use included): at most {MAX_POOLS} (the \
                     core numbers pools with one byte)",
                    pools.len()
                ),
            );
            return None;
        }
        let config = Config {
            file: self.d.file.to_owned(),
            switch,
            headroom_calc,
            pools,
            ports,
            pfcwd,
            runtime,
            dpdk,
            lldp,
            fdb_static,
            testing,
            routing,
            vlan_interfaces,
        };
        // Every check the core makes has a keyed counterpart above; this only guards against
        // one of them going missing (an accepted file the core would refuse at start).
        if let Err(e) = config.switch_params().and_then(|p| p.validate()) {
            self.d.error(
                "",
                format!(
                    "the dataplane core refuses this configuration ({e}), which headroom-config \
                     should have caught with its key: please report it"
                ),
            );
            return None;
        }
        Some(config)
    }

    /// `[vlan_interface.VlanN]`: the name `Vlan` and a VLAN id 1..=4094 (SONiC's naming, which
    /// it refuses otherwise), a unicast MAC; a VLAN no port is a member of is a warning (the
    /// interface routes nothing until one is).
    fn vlan_interfaces(&mut self, switch: &Switch, ports: &[Port]) -> Vec<VlanInterface> {
        let mut out = Vec::new();
        for (name, raw) in &self.raw.vlan_interface {
            let path = join_key("vlan_interface", name);
            let Some(vlan_id) = name
                .strip_prefix("Vlan")
                .filter(|n| !n.is_empty() && !n.starts_with('0'))
                .and_then(|n| n.parse::<u16>().ok())
                .filter(|v| (1..=4094).contains(v))
            else {
                self.d.error(
                    &path,
                    format!(
                        "{name:?}: a VLAN interface is named VlanN with N its VLAN, 1..=4094 \
                         (SONiC's VLAN_INTERFACE naming), e.g. Vlan1000"
                    ),
                );
                continue;
            };
            let mac = match &raw.mac {
                None => switch.mac,
                Some(text) => match parse_unicast_mac(text) {
                    Ok(mac) => mac,
                    Err(reason) => {
                        self.d.error(&join_key(&path, "mac"), reason);
                        continue;
                    }
                },
            };
            if let Some(port) = ports.iter().find(|p| p.name == *name) {
                self.d.error(
                    &path,
                    format!(
                        "{name} is also a port's name: the host interfaces would clash ({})",
                        port.name
                    ),
                );
                continue;
            }
            let member = |p: &Port| match &p.vlan {
                Vlan::Access { vlan_id: v } => *v == vlan_id,
                Vlan::Trunk {
                    allowed_vlan_ids, ..
                } => allowed_vlan_ids.contains(&vlan_id),
                Vlan::Routed => false,
            };
            if !ports.iter().any(member) {
                self.d.warning(
                    &path,
                    format!(
                        "no port is a member of VLAN {vlan_id}: {name} routes nothing until one is"
                    ),
                );
            }
            out.push(VlanInterface {
                name: name.clone(),
                vlan_id,
                mac,
            });
        }
        out
    }

    /// `[[fdb.static]]`: each entry's MAC unicast, its port one of the ports, its VLAN (default:
    /// the port's access VLAN) one the port is a member of, no station twice.
    fn fdb_static(&mut self, ports: &[Port]) -> Vec<StaticFdb> {
        let mut out: Vec<StaticFdb> = Vec::new();
        for (i, raw) in self.raw.fdb.static_entries.iter().enumerate() {
            let path = format!("fdb.static[{i}]");
            let mac = match parse_unicast_mac(&raw.mac) {
                Ok(mac) => mac,
                Err(reason) => {
                    self.d.error(&join_key(&path, "mac"), reason);
                    continue;
                }
            };
            let Some(index) = ports.iter().position(|p| p.name == raw.port) else {
                self.d.error(
                    &join_key(&path, "port"),
                    format!("no port named {:?}", raw.port),
                );
                continue;
            };
            let port = &ports[index];
            if port.vlan.is_routed() {
                self.d.error(
                    &join_key(&path, "port"),
                    format!(
                        "port {} is routed (vlan_mode = \"routed\"): it is in no VLAN and \
                         learns no stations; its neighbours come from the kernel (ARP/ND)",
                        port.name
                    ),
                );
                continue;
            }
            let vlan_id = match raw.vlan {
                Some(v) => match in_range(v, 1, 4094) {
                    Ok(v) => to_u16(v),
                    Err(reason) => {
                        self.d.error(&join_key(&path, "vlan"), reason);
                        continue;
                    }
                },
                None => match &port.vlan {
                    Vlan::Access { vlan_id } => *vlan_id,
                    Vlan::Trunk { .. } => {
                        self.d.error(
                            &path,
                            format!("port {} is a trunk: give the entry's vlan", port.name),
                        );
                        continue;
                    }
                    Vlan::Routed => continue,
                },
            };
            let member = match &port.vlan {
                Vlan::Access { vlan_id: v } => *v == vlan_id,
                Vlan::Trunk {
                    allowed_vlan_ids, ..
                } => allowed_vlan_ids.contains(&vlan_id),
                Vlan::Routed => false,
            };
            if !member {
                self.d.error(
                    &join_key(&path, "vlan"),
                    format!("port {} is not a member of VLAN {vlan_id}", port.name),
                );
                continue;
            }
            if let Some(first) = out
                .iter()
                .position(|e| e.mac == mac && e.vlan_id == vlan_id)
            {
                self.d.error(
                    &join_key(&path, "mac"),
                    format!(
                        "{} in VLAN {vlan_id} is already fdb.static[{first}]",
                        raw.mac
                    ),
                );
                continue;
            }
            out.push(StaticFdb {
                mac,
                vlan_id,
                port: index,
            });
        }
        out
    }

    fn lldp(&mut self, switch: &Switch) -> Lldp {
        let raw = &self.raw.lldp;
        let tx_interval_s = to_u16(self.ranged(
            raw.tx_interval_s,
            "lldp.tx_interval_s",
            1,
            3600,
            i64::from(def::DEFAULT_LLDP_TX_INTERVAL_S),
        ));
        let tx_hold = to_u8(self.ranged(
            raw.tx_hold,
            "lldp.tx_hold",
            1,
            100,
            i64::from(def::DEFAULT_LLDP_TX_HOLD),
        ));
        let tx_fast_init = to_u8(self.ranged(
            raw.tx_fast_init,
            "lldp.tx_fast_init",
            0,
            8,
            i64::from(def::DEFAULT_LLDP_TX_FAST_INIT),
        ));
        let tx_fast_interval_s = to_u16(self.ranged(
            raw.tx_fast_interval_s,
            "lldp.tx_fast_interval_s",
            1,
            3600,
            i64::from(def::DEFAULT_LLDP_TX_FAST_INTERVAL_S),
        ));
        if tx_fast_interval_s > tx_interval_s {
            self.d.error(
                "lldp.tx_fast_interval_s",
                format!(
                    "{tx_fast_interval_s} s is longer than lldp.tx_interval_s ({tx_interval_s} s): \
                     fast transmission would be slower than the normal one"
                ),
            );
        }
        let mut string = |value: &Option<String>, key: &str, default: &str| -> String {
            let text = value.clone().unwrap_or_else(|| default.to_owned());
            // 802.1AB-2016 8.5.6 / 8.5.7: 0..=255 octets; an empty name tells a peer nothing.
            if text.is_empty() || text.len() > 255 || text.chars().any(char::is_control) {
                self.d.error(
                    key,
                    format!(
                        "{text:?} is not an LLDP string: 1 to 255 bytes, no control characters"
                    ),
                );
            }
            text
        };
        let system_name = string(&raw.system_name, "lldp.system_name", &switch.name);
        let system_description = string(
            &raw.system_description,
            "lldp.system_description",
            def::DEFAULT_LLDP_SYSTEM_DESCRIPTION,
        );
        let roce_priority = raw
            .roce_priority
            .map(|p| to_u8(self.ranged(Some(p), "lldp.roce_priority", 0, 7, 0)));
        Lldp {
            enabled: raw.enabled.unwrap_or(def::DEFAULT_LLDP_ENABLED),
            tx_interval_s,
            tx_hold,
            tx_fast_init,
            tx_fast_interval_s,
            system_name,
            system_description,
            roce_priority,
        }
    }

    /// `lldp.roce_priority` must be PFC-enabled on every port that advertises it: the RoCEv2
    /// Application Priority entry tells a willing host to send RoCE there, and a host that follows
    /// it onto a lossy priority loses packets.
    fn lldp_checks(&mut self, lldp: &Lldp, ports: &[Port]) {
        let Some(priority) = lldp.roce_priority else {
            return;
        };
        let lossy: Vec<&Port> = ports
            .iter()
            .filter(|p| p.lldp_admin_status.transmits() && !p.pfc_enable.contains(priority))
            .collect();
        if !lossy.is_empty() {
            // Every such port named, each with its pfc_enable (one line naming all).
            let named: Vec<String> = lossy
                .iter()
                .map(|p| format!("{} ({})", p.name, p.pfc_enable.to_sonic_string()))
                .collect();
            self.d.error(
                "lldp.roce_priority",
                format!(
                    "priority {priority} is not in pfc_enable of port{} {}: the RoCEv2 \
                     application entry would send RoCE to a lossy priority (set lldp_admin_status \
                     = \"rx_only\" or \"disabled\" on ports without PFC there)",
                    if named.len() == 1 { "" } else { "s" },
                    named.join(", "),
                ),
            );
        }
    }

    fn switch(&mut self) -> Switch {
        let raw = &self.raw.switch;
        let name = raw
            .name
            .clone()
            .unwrap_or_else(|| def::DEFAULT_SWITCH_NAME.to_owned());
        if name.is_empty()
            || name.len() > 64
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
            || name.starts_with('.')
        {
            self.d.error(
                "switch.name",
                format!(
                    "{name:?} is not an instance name: 1 to 64 of A-Z a-z 0-9 _ - . \
                     (it names the control socket), not starting with '.'"
                ),
            );
        }
        let cell_size_bytes = to_u32(self.ranged(
            raw.cell_size_bytes,
            "switch.cell_size_bytes",
            32,
            4096,
            i64::from(def::DEFAULT_CELL_SIZE_BYTES),
        ));
        let port_count = u64::try_from(self.raw.port.len()).unwrap_or(u64::MAX);
        let buffer_size_bytes = match raw.buffer_size_bytes {
            Some(size) => {
                if size < u64::from(cell_size_bytes) {
                    self.d.error(
                        "switch.buffer_size_bytes",
                        format!("{size} bytes is smaller than one cell ({cell_size_bytes} bytes)"),
                    );
                }
                size
            }
            None => (def::DEFAULT_BUFFER_BYTES_PER_PORT.saturating_mul(port_count))
                .max(def::MIN_DEFAULT_BUFFER_BYTES),
        };
        let mac = match &raw.mac {
            None => def::DEFAULT_MAC,
            Some(text) => parse_unicast_mac(text).unwrap_or_else(|reason| {
                self.d.error("switch.mac", reason);
                def::DEFAULT_MAC
            }),
        };
        let pfc_storm_alarm_frames_per_second = to_u32(self.ranged(
            raw.pfc_storm_alarm_frames_per_second,
            "switch.pfc_storm_alarm_frames_per_second",
            1,
            10_000_000,
            i64::from(def::DEFAULT_PFC_STORM_ALARM_FRAMES_PER_SECOND),
        ));
        let fdb_aging_s = to_u32(self.ranged(
            raw.fdb_aging_s,
            "switch.fdb_aging_s",
            0,
            i64::from(def::MAX_FDB_AGING_S),
            i64::from(def::DEFAULT_FDB_AGING_S),
        ));
        Switch {
            name,
            cell_size_bytes,
            buffer_size_bytes,
            ecn_seed: raw.ecn_seed.unwrap_or(def::DEFAULT_ECN_SEED),
            fdb_aging_s,
            mac,
            driver: match raw.driver.unwrap_or(RawDriver::Afpacket) {
                RawDriver::Afpacket => Driver::AfPacket,
                RawDriver::Dpdk => Driver::Dpdk,
                RawDriver::Memory => Driver::Memory,
            },
            pfc_storm_alarm_frames_per_second,
            log_format: match raw.log_format.unwrap_or(RawLogFormat::Text) {
                RawLogFormat::Text => LogFormat::Text,
                RawLogFormat::Json => LogFormat::Json,
            },
            log_level: match raw.log_level.unwrap_or(RawLogLevel::Info) {
                RawLogLevel::Error => LogLevel::Error,
                RawLogLevel::Warn => LogLevel::Warn,
                RawLogLevel::Info => LogLevel::Info,
                RawLogLevel::Debug => LogLevel::Debug,
                RawLogLevel::Trace => LogLevel::Trace,
            },
            platform: raw.platform.clone(),
            hwsku: raw.hwsku.clone(),
        }
    }

    fn pfcwd_global(&mut self) -> PfcWdGlobal {
        let raw = &self.raw.pfcwd;
        let poll_interval_ms = to_u32(self.ranged(
            raw.poll_interval,
            "pfcwd.poll_interval",
            100,
            1000,
            i64::from(def::DEFAULT_PFCWD_POLL_INTERVAL_MS),
        ));
        PfcWdGlobal {
            poll_interval_ms,
            big_red_switch: raw.big_red_switch.unwrap_or(false),
        }
    }

    fn maps(&mut self) -> Maps {
        let raw = self.raw;
        Maps {
            dscp_to_tc: self.map_table(
                "dscp_to_tc_map",
                &raw.dscp_to_tc_map,
                DSCP_COUNT,
                &def::azure_dscp_to_tc(),
            ),
            dot1p_to_tc: self.map_table(
                "dot1p_to_tc_map",
                &raw.dot1p_to_tc_map,
                PRIORITY_COUNT,
                &def::azure_dot1p_to_tc(),
            ),
            tc_to_pg: self.map_table(
                "tc_to_pg_map",
                &raw.tc_to_pg_map,
                PRIORITY_COUNT,
                &def::azure_tc_to_pg(),
            ),
            tc_to_queue: self.map_table(
                "tc_to_queue_map",
                &raw.tc_to_queue_map,
                PRIORITY_COUNT,
                &def::azure_tc_to_queue(),
            ),
            pfc_to_queue: self.map_table(
                "pfc_to_queue_map",
                &raw.pfc_to_queue_map,
                PRIORITY_COUNT,
                &def::azure_pfc_to_queue(),
            ),
            pfc_to_pg: self.map_table(
                "pfc_to_pg_map",
                &raw.pfc_to_pg_map,
                PRIORITY_COUNT,
                &def::azure_pfc_to_pg(),
            ),
        }
    }

    /// One kind of map table: the built-in `AZURE` plus the user's (a user map named `AZURE`
    /// replaces the built-in). Keys are indexes, ranges `"a-b"` or `default`; values 0..=7.
    fn map_table(
        &mut self,
        table: &str,
        raw: &IndexMap<String, crate::schema::RawMap>,
        size: usize,
        builtin: &[u8],
    ) -> NamedMaps {
        let mut maps = NamedMaps::new();
        let max_index = u16::try_from(size - 1).unwrap_or(u16::MAX);
        for (name, entries) in raw {
            let map_path = join_key(table, name);
            let default_value = entries
                .get("default")
                .map_or(0, |&v| match in_range(v, 0, 7) {
                    Ok(v) => to_u8(v),
                    Err(reason) => {
                        self.d.error(&join_key(&map_path, "default"), reason);
                        0
                    }
                });
            let mut values = vec![default_value; size];
            let mut set_by: Vec<Option<String>> = vec![None; size];
            for (key, &value) in entries {
                if key == "default" {
                    continue;
                }
                let entry_path = join_key(&map_path, key);
                let (from, to) = match parse_index_range(key, max_index) {
                    Ok(range) => range,
                    Err(reason) => {
                        self.d.error_at_key(&entry_path, reason);
                        continue;
                    }
                };
                let value = match in_range(value, 0, 7) {
                    Ok(v) => to_u8(v),
                    Err(reason) => {
                        self.d.error(&entry_path, reason);
                        continue;
                    }
                };
                for index in usize::from(from)..=usize::from(to) {
                    if let Some(earlier) = &set_by[index] {
                        let message = format!("{index} is already mapped by key {earlier:?}");
                        self.d.error_at_key(&entry_path, message);
                        break;
                    }
                    set_by[index] = Some(key.clone());
                    values[index] = value;
                }
            }
            maps.insert(name.clone(), values);
        }
        if !maps.contains_key(AZURE) {
            maps.insert(AZURE.to_owned(), builtin.to_vec());
        }
        maps
    }

    fn schedulers(&mut self) -> IndexMap<String, Scheduler> {
        let mut schedulers = IndexMap::new();
        for (name, raw) in &self.raw.scheduler {
            let path = join_key("scheduler", name);
            let kind = match raw.scheduler_type.unwrap_or(RawSchedulerType::Wrr) {
                RawSchedulerType::Strict => SchedulerKind::Strict,
                RawSchedulerType::Dwrr => SchedulerKind::Dwrr,
                RawSchedulerType::Wrr => SchedulerKind::Wrr,
            };
            let weight = to_u8(self.ranged(raw.weight, &join_key(&path, "weight"), 1, 100, 1));
            schedulers.insert(
                name.clone(),
                Scheduler {
                    name: name.clone(),
                    kind,
                    weight,
                },
            );
        }
        for (name, weight) in [
            (def::SCHEDULER_LOSSY, def::SCHEDULER_LOSSY_WEIGHT),
            (def::SCHEDULER_LOSSLESS, def::SCHEDULER_LOSSLESS_WEIGHT),
        ] {
            schedulers.entry(name.to_owned()).or_insert(Scheduler {
                name: name.to_owned(),
                kind: SchedulerKind::Dwrr,
                weight,
            });
        }
        schedulers
    }

    fn wred_profiles(&mut self) -> IndexMap<String, WredProfile> {
        let mut profiles = IndexMap::new();
        for (name, raw) in &self.raw.wred_profile {
            let path = join_key("wred_profile", name);
            let profile = self.wred_profile(name, raw, &path);
            profiles.insert(name.clone(), profile);
        }
        if !profiles.contains_key(def::WRED_AZURE_LOSSLESS) {
            let color = WredColor {
                wred_enable: true,
                min_threshold_bytes: def::WRED_AZURE_MIN_THRESHOLD_BYTES,
                max_threshold_bytes: def::WRED_AZURE_MAX_THRESHOLD_BYTES,
                drop_probability_percent: def::WRED_AZURE_DROP_PROBABILITY_PERCENT,
            };
            profiles.insert(
                def::WRED_AZURE_LOSSLESS.to_owned(),
                WredProfile {
                    name: def::WRED_AZURE_LOSSLESS.to_owned(),
                    ecn: EcnMode::All,
                    green: color,
                    yellow: color,
                    red: color,
                },
            );
        }
        profiles
    }

    fn wred_profile(&mut self, name: &str, raw: &RawWred, path: &str) -> WredProfile {
        let ecn = match raw.ecn.unwrap_or(RawEcn::None) {
            RawEcn::None => EcnMode::None,
            RawEcn::Green => EcnMode::Green,
            RawEcn::Yellow => EcnMode::Yellow,
            RawEcn::Red => EcnMode::Red,
            RawEcn::GreenYellow => EcnMode::GreenYellow,
            RawEcn::GreenRed => EcnMode::GreenRed,
            RawEcn::YellowRed => EcnMode::YellowRed,
            RawEcn::All => EcnMode::All,
        };
        let green = self.wred_color(
            path,
            "green",
            raw.wred_green_enable,
            raw.green_min_threshold,
            raw.green_max_threshold,
            raw.green_drop_probability,
            ecn.marks_green(),
        );
        let yellow = self.wred_color(
            path,
            "yellow",
            raw.wred_yellow_enable,
            raw.yellow_min_threshold,
            raw.yellow_max_threshold,
            raw.yellow_drop_probability,
            false,
        );
        let red = self.wred_color(
            path,
            "red",
            raw.wred_red_enable,
            raw.red_min_threshold,
            raw.red_max_threshold,
            raw.red_drop_probability,
            false,
        );
        WredProfile {
            name: name.to_owned(),
            ecn,
            green,
            yellow,
            red,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn wred_color(
        &mut self,
        path: &str,
        color: &str,
        enable: Option<bool>,
        min: Option<u64>,
        max: Option<u64>,
        probability: Option<i64>,
        marked: bool,
    ) -> WredColor {
        let wred_enable = enable.unwrap_or(false);
        let probability_path = join_key(path, &format!("{color}_drop_probability"));
        let drop_probability_percent =
            to_u8(self.ranged(probability, &probability_path, 0, 100, 100));
        let min_path = join_key(path, &format!("{color}_min_threshold"));
        let max_path = join_key(path, &format!("{color}_max_threshold"));
        if wred_enable || marked {
            let why = if marked {
                format!("ecn marks {color} packets")
            } else {
                format!("wred_{color}_enable is true")
            };
            if min.is_none() {
                self.d.error(&min_path, format!("missing: {why}"));
            }
            if max.is_none() {
                self.d.error(&max_path, format!("missing: {why}"));
            }
        }
        let min_threshold_bytes = min.unwrap_or(0);
        let max_threshold_bytes = max.unwrap_or(min_threshold_bytes);
        if max_threshold_bytes < min_threshold_bytes {
            self.d.error(
                &max_path,
                format!(
                    "{max_threshold_bytes} is below {color}_min_threshold \
                     {min_threshold_bytes}: max must be >= min"
                ),
            );
        }
        WredColor {
            wred_enable,
            min_threshold_bytes,
            max_threshold_bytes,
            drop_probability_percent,
        }
    }

    fn pools(&mut self, switch: &Switch) -> Vec<PoolDraft> {
        let mut pools = Vec::new();
        for (name, raw) in &self.raw.buffer_pool {
            let path = join_key("buffer_pool", name);
            let direction = match raw.pool_type {
                RawPoolType::Ingress => PoolDirection::Ingress,
                RawPoolType::Egress => PoolDirection::Egress,
            };
            let xoff_bytes = raw.xoff.unwrap_or(0);
            if direction == PoolDirection::Egress && xoff_bytes > 0 {
                self.d.error(
                    &join_key(&path, "xoff"),
                    "a shared headroom pool (xoff) exists only on ingress pools",
                );
            }
            if xoff_bytes > raw.size {
                self.d.error(
                    &join_key(&path, "xoff"),
                    format!(
                        "{xoff_bytes} bytes of shared headroom do not fit in the pool size {} \
                         (the SHP is part of the pool, as in SAI)",
                        raw.size
                    ),
                );
            }
            pools.push(PoolDraft {
                name: name.clone(),
                direction,
                mode: match raw.mode {
                    RawPoolMode::Static => ThresholdMode::Static,
                    RawPoolMode::Dynamic => ThresholdMode::Dynamic,
                },
                size_bytes: raw.size,
                xoff_bytes,
                path,
                user_defined: true,
                reserved_bytes: 0,
                private_headroom_bytes: 0,
            });
        }
        let buffer = switch.buffer_size_bytes;
        // Half the memory, rounded down to whole cells.
        let cell = u64::from(switch.cell_size_bytes.max(1));
        let half = buffer / 2 / cell * cell;
        let size_path = if self.raw.switch.buffer_size_bytes.is_some() {
            "switch.buffer_size_bytes"
        } else {
            "switch"
        };
        for (name, direction, mode, size_bytes) in [
            (
                def::INGRESS_LOSSLESS_POOL,
                PoolDirection::Ingress,
                ThresholdMode::Dynamic,
                half,
            ),
            (
                def::INGRESS_LOSSY_POOL,
                PoolDirection::Ingress,
                ThresholdMode::Dynamic,
                half,
            ),
            (
                def::EGRESS_LOSSLESS_POOL,
                PoolDirection::Egress,
                ThresholdMode::Static,
                buffer,
            ),
            (
                def::EGRESS_LOSSY_POOL,
                PoolDirection::Egress,
                ThresholdMode::Dynamic,
                half,
            ),
        ] {
            if !pools.iter().any(|p| p.name == name) {
                pools.push(PoolDraft {
                    name: name.to_owned(),
                    direction,
                    mode,
                    size_bytes,
                    xoff_bytes: 0,
                    path: size_path.to_owned(),
                    user_defined: false,
                    reserved_bytes: 0,
                    private_headroom_bytes: 0,
                });
            }
        }
        pools
    }

    fn headroom_calc(&mut self, switch: &Switch, pools: &[PoolDraft]) -> (HeadroomCalc, usize) {
        let raw = &self.raw.headroom_calc;
        let p = "headroom_calc";
        let cell_size_bytes = to_u32(self.ranged(
            raw.cell_size_bytes,
            "headroom_calc.cell_size_bytes",
            32,
            4096,
            i64::from(switch.cell_size_bytes),
        ));
        let software = HeadroomConstants::SOFTWARE;
        let mut kib = |value: Option<f64>, field: &str, default: f64| -> f64 {
            match value {
                None => default,
                Some(v) if v.is_finite() && (0.0..=1_048_576.0).contains(&v) => v,
                Some(v) => {
                    self.d.error(
                        &join_key(p, field),
                        format!("{v} is out of range 0..=1048576 KiB"),
                    );
                    default
                }
            }
        };
        let pipeline_latency_kib = kib(
            raw.pipeline_latency_kib,
            "pipeline_latency_kib",
            software.pipeline_latency_kib,
        );
        let mac_phy_delay_kib = kib(
            raw.mac_phy_delay_kib,
            "mac_phy_delay_kib",
            software.mac_phy_delay_kib,
        );
        let peer_response_time_kib = kib(
            raw.peer_response_time_kib,
            "peer_response_time_kib",
            software.peer_response_time_kib,
        );
        let software_latency_kib = kib(
            raw.software_latency_kib,
            "software_latency_kib",
            software.software_latency_kib,
        );
        let lossless_mtu_bytes = to_u32(self.ranged(
            raw.lossless_mtu,
            "headroom_calc.lossless_mtu",
            1,
            9216,
            i64::from(software.lossless_mtu_bytes),
        ));
        let small_packet_percentage = to_u8(self.ranged(
            raw.small_packet_percentage,
            "headroom_calc.small_packet_percentage",
            0,
            100,
            i64::from(software.small_packet_percentage),
        ));
        let over_subscribe_ratio = to_u32(self.ranged(
            raw.over_subscribe_ratio,
            "headroom_calc.over_subscribe_ratio",
            1,
            65535,
            1,
        ));
        let default_dynamic_th = i8::try_from(self.ranged(
            raw.default_dynamic_th,
            "headroom_calc.default_dynamic_th",
            -8,
            7,
            0,
        ))
        .unwrap_or(0);
        let lossless_pool = raw
            .lossless_pool
            .clone()
            .unwrap_or_else(|| def::INGRESS_LOSSLESS_POOL.to_owned());
        let lossless_pool_index = match pools.iter().position(|pool| pool.name == lossless_pool) {
            Some(index) => {
                if pools[index].direction != PoolDirection::Ingress {
                    self.d.error(
                        "headroom_calc.lossless_pool",
                        format!("pool {lossless_pool:?} is an egress pool; lossless PGs need an ingress pool"),
                    );
                }
                index
            }
            None => {
                self.d.error(
                    "headroom_calc.lossless_pool",
                    format!("no buffer_pool named {lossless_pool:?}"),
                );
                0
            }
        };
        let pool_has_shp = pools
            .get(lossless_pool_index)
            .is_some_and(|pool| pool.xoff_bytes > 0);
        let shared_headroom_pool = match raw.shared_headroom_pool {
            None => pool_has_shp,
            Some(true) => true,
            Some(false) => {
                if pool_has_shp {
                    self.d.error(
                        "headroom_calc.shared_headroom_pool",
                        format!(
                            "false, but pool {lossless_pool:?} has a shared headroom pool (xoff > 0): \
                             remove one of the two"
                        ),
                    );
                }
                false
            }
        };
        let calc = HeadroomCalc {
            constants: HeadroomConstants {
                cell_size_bytes,
                pipeline_latency_kib,
                mac_phy_delay_kib,
                peer_response_time_kib,
                software_latency_kib,
                lossless_mtu_bytes,
                small_packet_percentage,
                shared_headroom_pool,
            },
            over_subscribe_ratio,
            default_dynamic_th,
            lossless_pool,
            allow_headroom_below_minimum: raw.allow_headroom_below_minimum.unwrap_or(false),
        };
        (calc, lossless_pool_index)
    }

    fn profiles(
        &mut self,
        pools: &[PoolDraft],
        switch: &Switch,
        calc: &HeadroomCalc,
    ) -> IndexMap<String, ProfileTemplate> {
        let mut templates = IndexMap::new();
        for (name, raw) in &self.raw.buffer_profile {
            let path = join_key("buffer_profile", name);
            let Some(pool_index) = pools.iter().position(|pool| pool.name == raw.pool) else {
                let known: Vec<&str> = pools.iter().map(|p| p.name.as_str()).collect();
                self.d.error(
                    &join_key(&path, "pool"),
                    format!(
                        "no buffer_pool named {:?} (pools: {})",
                        raw.pool,
                        known.join(", ")
                    ),
                );
                continue;
            };
            let pool = &pools[pool_index];
            let computed = raw.headroom == Some(RawHeadroom::Computed);
            if computed {
                for (field, present) in [
                    ("size", raw.size.is_some()),
                    ("xon", raw.xon.is_some()),
                    ("xoff", raw.xoff.is_some()),
                ] {
                    if present {
                        self.d.error_at_key(
                            &join_key(&path, field),
                            "computed by the headroom formula (headroom = \"computed\"): \
                             remove it, or remove headroom = \"computed\"",
                        );
                    }
                }
                if pool.direction == PoolDirection::Egress {
                    self.d.error(
                        &join_key(&path, "headroom"),
                        format!(
                            "pool {:?} is an egress pool: only PG (ingress) profiles have headroom",
                            pool.name
                        ),
                    );
                }
            } else if raw.size.is_none() {
                self.d.error(
                    &path,
                    "missing size (reserved bytes), or set headroom = \"computed\"",
                );
            }
            let mode_name = match pool.mode {
                ThresholdMode::Static => "static",
                ThresholdMode::Dynamic => "dynamic",
            };
            let threshold = match (raw.dynamic_th, raw.static_th) {
                (Some(_), Some(_)) => {
                    self.d.error_at_key(
                        &join_key(&path, "static_th"),
                        "give exactly one of static_th and dynamic_th",
                    );
                    None
                }
                (Some(th), None) => {
                    // The field given is the profile's threshold mode (SAI's THRESHOLD_MODE is a
                    // profile attribute; SONiC's TD3 template puts static_th profiles in a dynamic
                    // pool). The pool's mode names the field of the profiles headroom makes.
                    let th_path = join_key(&path, "dynamic_th");
                    match in_range(th, -8, 7) {
                        Ok(th) => Some(Threshold::Dynamic {
                            dynamic_th: i8::try_from(th).unwrap_or(0),
                        }),
                        Err(reason) => {
                            self.d.error(&th_path, reason);
                            None
                        }
                    }
                }
                (None, Some(bytes)) => Some(Threshold::Static {
                    static_th_bytes: bytes,
                }),
                (None, None) => {
                    if computed {
                        Some(default_threshold(pool.mode, calc))
                    } else {
                        self.d.error(
                            &path,
                            format!(
                                "missing {mode_name}_th (pool {:?} is {mode_name})",
                                pool.name
                            ),
                        );
                        None
                    }
                }
            };
            let xon_bytes = raw.xon.unwrap_or(0);
            let xoff_bytes = raw.xoff.unwrap_or(0);
            let xon_offset_bytes = raw.xon_offset.unwrap_or(0);
            if pool.direction == PoolDirection::Egress {
                for (field, value) in [
                    ("xon", xon_bytes),
                    ("xoff", xoff_bytes),
                    ("xon_offset", xon_offset_bytes),
                ] {
                    if value > 0 {
                        self.d.error(
                            &join_key(&path, field),
                            format!(
                                "pool {:?} is an egress pool: xon/xoff/xon_offset belong to PG \
                                 (ingress) profiles",
                                pool.name
                            ),
                        );
                    }
                }
            }
            templates.insert(
                name.clone(),
                ProfileTemplate {
                    name: name.clone(),
                    pool_index,
                    size_bytes: raw.size.unwrap_or(0),
                    threshold: threshold.unwrap_or(Threshold::Dynamic { dynamic_th: 0 }),
                    xon_bytes,
                    xoff_bytes,
                    xon_offset_bytes,
                    computed,
                    path: Some(path),
                },
            );
        }
        let pool_index = |name: &str| pools.iter().position(|pool| pool.name == name);
        let egress_lossless_size = pool_index(def::EGRESS_LOSSLESS_POOL)
            .map_or(switch.buffer_size_bytes, |i| pools[i].size_bytes);
        let builtins = [
            (
                def::INGRESS_LOSSY_PROFILE,
                def::INGRESS_LOSSY_POOL,
                0,
                def::LOSSY_DYNAMIC_TH,
            ),
            (
                def::EGRESS_LOSSY_PROFILE,
                def::EGRESS_LOSSY_POOL,
                def::EGRESS_LOSSY_RESERVED_BYTES,
                def::LOSSY_DYNAMIC_TH,
            ),
        ];
        for (name, pool_name, size_bytes, dynamic_th) in builtins {
            if templates.contains_key(name) {
                continue;
            }
            if let Some(index) = pool_index(pool_name) {
                templates.insert(
                    name.to_owned(),
                    ProfileTemplate {
                        name: name.to_owned(),
                        pool_index: index,
                        size_bytes,
                        threshold: match pools[index].mode {
                            ThresholdMode::Dynamic => Threshold::Dynamic { dynamic_th },
                            ThresholdMode::Static => Threshold::Static { static_th_bytes: 0 },
                        },
                        xon_bytes: 0,
                        xoff_bytes: 0,
                        xon_offset_bytes: 0,
                        computed: false,
                        path: None,
                    },
                );
            }
        }
        if !templates.contains_key(def::EGRESS_LOSSLESS_PROFILE) {
            if let Some(index) = pool_index(def::EGRESS_LOSSLESS_POOL) {
                templates.insert(
                    def::EGRESS_LOSSLESS_PROFILE.to_owned(),
                    ProfileTemplate {
                        name: def::EGRESS_LOSSLESS_PROFILE.to_owned(),
                        pool_index: index,
                        size_bytes: 0,
                        // Never egress-drop lossless traffic: back-pressure comes from ingress PFC
                        // (templates set static_th = pool size, §2.1).
                        threshold: match pools[index].mode {
                            ThresholdMode::Static => Threshold::Static {
                                static_th_bytes: egress_lossless_size,
                            },
                            ThresholdMode::Dynamic => Threshold::Dynamic { dynamic_th: 7 },
                        },
                        xon_bytes: 0,
                        xoff_bytes: 0,
                        xon_offset_bytes: 0,
                        computed: false,
                        path: None,
                    },
                );
            }
        }
        templates
    }
}

fn default_threshold(mode: ThresholdMode, calc: &HeadroomCalc) -> Threshold {
    match mode {
        ThresholdMode::Dynamic => Threshold::Dynamic {
            dynamic_th: calc.default_dynamic_th,
        },
        ThresholdMode::Static => Threshold::Static { static_th_bytes: 0 },
    }
}

struct PortContext<'a> {
    switch: &'a Switch,
    pfcwd: &'a PfcWdGlobal,
    maps: &'a Maps,
    schedulers: &'a IndexMap<String, Scheduler>,
    wred: &'a IndexMap<String, WredProfile>,
    pools: &'a [PoolDraft],
    templates: &'a IndexMap<String, ProfileTemplate>,
    headroom_calc: &'a HeadroomCalc,
    lossless_pool_index: usize,
    lldp: &'a Lldp,
}

/// The name SONiC's buffermgrd gives the lossless profile of a port: `pg_lossless_<speed>_<cable>`
/// + `_mtu<mtu>` when the MTU is not the default (dynamic model naming) + `_profile`.
pub fn lossless_profile_name(speed_mbps: u64, cable_length_m: u32, mtu_bytes: u32) -> String {
    let mtu = if mtu_bytes == def::DEFAULT_MTU_BYTES {
        String::new()
    } else {
        format!("_mtu{mtu_bytes}")
    };
    format!("pg_lossless_{speed_mbps}_{cable_length_m}m{mtu}_profile")
}

fn sorted_bits(values: &[i64]) -> PriorityBits {
    PriorityBits(
        values
            .iter()
            .filter(|&&v| (0..8).contains(&v))
            .fold(0u8, |bits, &v| bits | (1 << v)),
    )
}

impl Resolver<'_, '_> {
    fn priority_list(&mut self, list: Option<&IntList>, path: &str, default: &[u8]) -> Vec<i64> {
        match list {
            None => default.iter().map(|&p| i64::from(p)).collect(),
            Some(list) => parse_int_list(list, 0, 7).unwrap_or_else(|(reason, element)| {
                let key = element.map_or_else(|| path.to_owned(), |i| format!("{path}[{i}]"));
                self.d.error(&key, reason);
                Vec::new()
            }),
        }
    }

    fn lookup_map<'m>(
        &mut self,
        maps: &'m NamedMaps,
        table: &'static str,
        name: Option<&String>,
        path: &str,
    ) -> (&'m [u8], String) {
        let name = name.cloned().unwrap_or_else(|| AZURE.to_owned());
        if let Some(values) = maps.get(&name) {
            self.usage.maps.push((table, name.clone()));
            (values.as_slice(), name)
        } else {
            let known: Vec<&str> = maps.keys().map(String::as_str).collect();
            self.d.error(
                path,
                format!("no {table} named {name:?} (defined: {})", known.join(", ")),
            );
            let fallback = maps.get(AZURE).map_or(&[][..], Vec::as_slice);
            (fallback, name)
        }
    }

    #[allow(clippy::too_many_lines)]
    fn port(
        &mut self,
        index: usize,
        name: &str,
        raw: &RawPort,
        cx: &PortContext<'_>,
    ) -> Option<Port> {
        let defaults = &self.raw.port_defaults;
        let path = port_path(name);
        if name.is_empty()
            || name.len() > 64
            || name
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || c == ',' || c == '|')
        {
            self.d.error_at_key(
                &path,
                format!("{name:?} is not a port name: 1 to 64 characters, no spaces, ',' or '|'"),
            );
        }

        // Device.
        let device = match &raw.device {
            None => {
                self.d
                    .error(&path, "missing device (Linux interface or DPDK device)");
                String::new()
            }
            Some(device) => {
                let device_path = join_key(&path, "device");
                if cx.switch.driver == Driver::AfPacket {
                    if let Err(reason) = check_linux_ifname(device) {
                        self.d.error(&device_path, reason);
                    }
                } else if device.is_empty() {
                    self.d.error(&device_path, "empty device name");
                }
                device.clone()
            }
        };
        let mac = match &raw.mac {
            None => mac_add(cx.switch.mac, 1 + u64::try_from(index).unwrap_or(0)),
            Some(text) => parse_unicast_mac(text).unwrap_or_else(|reason| {
                self.d.error(&join_key(&path, "mac"), reason);
                cx.switch.mac
            }),
        };

        // Speed, cable, MTU.
        let (speed, speed_path) = port_field(raw, defaults, name, "speed", |p| p.speed.as_ref());
        let speed_mbps = match speed {
            None => {
                self.d.error(
                    &path,
                    "missing speed (Mb/s like 100000, or \"100G\", \"1G\")",
                );
                1000
            }
            Some(speed) => parse_speed_mbps(speed).unwrap_or_else(|reason| {
                self.d.error(&speed_path, reason);
                1000
            }),
        };
        let (cable, cable_path) = port_field(raw, defaults, name, "cable_length", |p| {
            p.cable_length.as_ref()
        });
        let cable_length_m = cable.map_or(def::DEFAULT_CABLE_LENGTH_M, |cable| {
            parse_cable_length_m(cable).unwrap_or_else(|reason| {
                self.d.error(&cable_path, reason);
                def::DEFAULT_CABLE_LENGTH_M
            })
        });
        let (mtu, mtu_path) = port_field(raw, defaults, name, "mtu", |p| p.mtu.as_ref());
        let mtu_bytes = to_u32(self.ranged(
            mtu.copied(),
            &mtu_path,
            68,
            9216,
            i64::from(def::DEFAULT_MTU_BYTES),
        ));
        let (tx_enable, _) = port_field(raw, defaults, name, "tx_enable", |p| p.tx_enable.as_ref());

        // Classification.
        let (trust, _) = port_field(raw, defaults, name, "trust", |p| p.trust.as_ref());
        let trust = match trust.copied().unwrap_or(RawTrust::Dscp) {
            RawTrust::Dscp => Trust::Dscp,
            RawTrust::Dot1p => Trust::Dot1p,
        };
        let (default_priority, default_priority_path) =
            port_field(raw, defaults, name, "default_priority", |p| {
                p.default_priority.as_ref()
            });
        let default_priority =
            to_u8(self.ranged(default_priority.copied(), &default_priority_path, 0, 7, 0));

        // Maps: the port's name, else [port_defaults]'s, else AZURE.
        let map_choices: [(&'static str, Option<&String>, &NamedMaps); 6] = [
            (
                "dscp_to_tc_map",
                raw.dscp_to_tc_map
                    .as_ref()
                    .or(defaults.dscp_to_tc_map.as_ref()),
                &cx.maps.dscp_to_tc,
            ),
            (
                "dot1p_to_tc_map",
                raw.dot1p_to_tc_map
                    .as_ref()
                    .or(defaults.dot1p_to_tc_map.as_ref()),
                &cx.maps.dot1p_to_tc,
            ),
            (
                "tc_to_pg_map",
                raw.tc_to_pg_map.as_ref().or(defaults.tc_to_pg_map.as_ref()),
                &cx.maps.tc_to_pg,
            ),
            (
                "tc_to_queue_map",
                raw.tc_to_queue_map
                    .as_ref()
                    .or(defaults.tc_to_queue_map.as_ref()),
                &cx.maps.tc_to_queue,
            ),
            (
                "pfc_to_queue_map",
                raw.pfc_to_queue_map
                    .as_ref()
                    .or(defaults.pfc_to_queue_map.as_ref()),
                &cx.maps.pfc_to_queue,
            ),
            (
                "pfc_to_pg_map",
                raw.pfc_to_pg_map
                    .as_ref()
                    .or(defaults.pfc_to_pg_map.as_ref()),
                &cx.maps.pfc_to_pg,
            ),
        ];
        let mut resolved_maps: Vec<Vec<u8>> = Vec::with_capacity(map_choices.len());
        let mut names: [String; 6] = Default::default();
        for (i, (table, map_name, maps)) in map_choices.into_iter().enumerate() {
            let key = self.d.pick(&[
                join_key(&path, table),
                join_key("port_defaults", table),
                join_key(&path, table),
            ]);
            let (values, resolved_name) = self.lookup_map(maps, table, map_name, &key);
            resolved_maps.push(values.to_vec());
            names[i] = resolved_name;
        }
        let mut maps = QosMaps {
            dscp_to_tc: [0; DSCP_COUNT],
            dot1p_to_tc: [0; PRIORITY_COUNT],
            tc_to_pg: [0; PRIORITY_COUNT],
            tc_to_queue: [0; PRIORITY_COUNT],
            pfc_to_queue: [0; PRIORITY_COUNT],
            pfc_to_pg: [0; PRIORITY_COUNT],
            names,
        };
        copy_into(&mut maps.dscp_to_tc, &resolved_maps[0]);
        copy_into(&mut maps.dot1p_to_tc, &resolved_maps[1]);
        copy_into(&mut maps.tc_to_pg, &resolved_maps[2]);
        copy_into(&mut maps.tc_to_queue, &resolved_maps[3]);
        copy_into(&mut maps.pfc_to_queue, &resolved_maps[4]);
        copy_into(&mut maps.pfc_to_pg, &resolved_maps[5]);

        // PFC.
        let (pfc_list, pfc_path) =
            port_field(raw, defaults, name, "pfc_enable", |p| p.pfc_enable.as_ref());
        let pfc_values = self.priority_list(pfc_list, &pfc_path, &def::DEFAULT_PFC_ENABLE);
        let pfc_enable = sorted_bits(&pfc_values);
        let (wd_list, wd_path) = port_field(raw, defaults, name, "pfcwd_enable", |p| {
            p.pfcwd_enable.as_ref()
        });
        let pfcwd_enable = match wd_list {
            None => pfc_enable,
            Some(_) => {
                let values = self.priority_list(wd_list, &wd_path, &[]);
                let bits = sorted_bits(&values);
                for p in bits.iter() {
                    if !pfc_enable.contains(p) {
                        self.d.error(
                            &wd_path,
                            format!(
                                "priority {p} is not in pfc_enable ({}): the watchdog can only \
                                 watch PFC-enabled priorities",
                                pfc_enable.to_sonic_string()
                            ),
                        );
                    }
                }
                PriorityBits(bits.0 & pfc_enable.0)
            }
        };
        let (pause, _) = port_field(raw, defaults, name, "pause_802_3x", |p| {
            p.pause_802_3x.as_ref()
        });
        let (quanta, quanta_path) =
            port_field(raw, defaults, name, "pfc_quanta", |p| p.pfc_quanta.as_ref());
        let pfc_quanta = to_u16(self.ranged(
            quanta.copied(),
            &quanta_path,
            1,
            65535,
            i64::from(def::DEFAULT_PFC_QUANTA),
        ));
        // One quantum = 512 bit times (IEEE 802.1Qbb 36.1.3.1 / 802.3 31B.2): ns = q*512*1000/Mb/s.
        let pause_duration_ns = u64::from(pfc_quanta) * 512 * 1000 / speed_mbps.max(1);
        let (refresh, refresh_path) = port_field(raw, defaults, name, "pfc_refresh_us", |p| {
            p.pfc_refresh_us.as_ref()
        });
        let pfc_refresh_ns = match refresh {
            None => (pause_duration_ns / 2).max(1),
            Some(&us) => {
                let ns = u64::try_from(us).unwrap_or(0).saturating_mul(1000);
                if us <= 0 || ns >= pause_duration_ns {
                    self.d.error(
                        &refresh_path,
                        format!(
                            "{us} µs: must be > 0 and shorter than the pause it refreshes \
                             ({pfc_quanta} quanta at {speed_mbps} Mb/s = {} µs), or the peer \
                             resumes in between",
                            pause_duration_ns / 1000
                        ),
                    );
                }
                ns.max(1)
            }
        };

        // VLAN.
        let vlan = self.vlan(raw, defaults, name);

        // Shaper.
        let (shaper, shaper_path) = port_field(raw, defaults, name, "shaper_rate", |p| {
            p.shaper_rate.as_ref()
        });
        let shaper_mbps = shaper.map_or(speed_mbps, |rate| {
            parse_speed_mbps(rate).unwrap_or_else(|reason| {
                self.d.error(&shaper_path, reason);
                speed_mbps
            })
        });
        if shaper_mbps > speed_mbps {
            self.d.warning(
                &shaper_path,
                format!("{shaper_mbps} Mb/s is above the port speed {speed_mbps} Mb/s"),
            );
        }

        // Watchdog.
        let pfcwd = self.port_pfcwd(raw.pfcwd.as_ref(), defaults.pfcwd.as_ref(), name, cx.pfcwd);

        // Headroom.
        let computed_headroom = compute_headroom(
            &cx.headroom_calc.constants,
            &HeadroomPort {
                speed_mbps,
                cable_length_m,
                port_mtu_bytes: mtu_bytes,
            },
        );

        // Lossless PGs and queues implied by pfc_enable.
        let mut lossless_pgs = [false; PRIORITY_COUNT];
        let mut lossless_queues = [false; PRIORITY_COUNT];
        for p in pfc_enable.iter() {
            let tc = tc_of_priority(trust, &maps.dot1p_to_tc, p);
            lossless_pgs[usize::from(maps.tc_to_pg[usize::from(tc)])] = true;
            lossless_queues[usize::from(maps.pfc_to_queue[usize::from(p)])] = true;
        }

        // BUFFER_PG and BUFFER_QUEUE bindings: built-in, then [port_defaults], then the port.
        let mut pg_bindings: [Binding; PRIORITY_COUNT] = core::array::from_fn(|pg| Binding {
            profile: if lossless_pgs[pg] {
                def::NULL_PROFILE.to_owned()
            } else {
                def::INGRESS_LOSSY_PROFILE.to_owned()
            },
            path: path.clone(),
        });
        let mut queue_bindings: [Binding; PRIORITY_COUNT] = core::array::from_fn(|q| Binding {
            profile: if lossless_queues[q] {
                def::EGRESS_LOSSLESS_PROFILE.to_owned()
            } else {
                def::EGRESS_LOSSY_PROFILE.to_owned()
            },
            path: path.clone(),
        });
        for (table_owner, table) in [
            ("port_defaults".to_owned(), defaults.buffer_pg.as_ref()),
            (path.clone(), raw.buffer_pg.as_ref()),
        ] {
            self.apply_bindings(
                &mut pg_bindings,
                table,
                &join_key(&table_owner, "buffer_pg"),
            );
        }
        for (table_owner, table) in [
            ("port_defaults".to_owned(), defaults.buffer_queue.as_ref()),
            (path.clone(), raw.buffer_queue.as_ref()),
        ] {
            self.apply_bindings(
                &mut queue_bindings,
                table,
                &join_key(&table_owner, "buffer_queue"),
            );
        }

        let lossless_name = lossless_profile_name(speed_mbps, cable_length_m, mtu_bytes);
        let mut priority_groups = Vec::with_capacity(PRIORITY_COUNT);
        for (pg, binding) in pg_bindings.iter().enumerate() {
            let profile = self.instantiate(
                binding,
                &lossless_name,
                &computed_headroom,
                cx,
                PoolDirection::Ingress,
                &format!("PG {pg}"),
            );
            priority_groups.push(PriorityGroup { profile });
        }

        // QUEUE: scheduler and WRED profile per queue.
        let mut settings: [QueueSetting; PRIORITY_COUNT] = core::array::from_fn(|q| QueueSetting {
            scheduler: if lossless_queues[q] {
                def::SCHEDULER_LOSSLESS.to_owned()
            } else {
                def::SCHEDULER_LOSSY.to_owned()
            },
            scheduler_path: path.clone(),
            wred: lossless_queues[q].then(|| def::WRED_AZURE_LOSSLESS.to_owned()),
            wred_path: path.clone(),
        });
        for (owner, table) in [
            ("port_defaults".to_owned(), defaults.queue.as_ref()),
            (path.clone(), raw.queue.as_ref()),
        ] {
            self.apply_queue_settings(&mut settings, table, &join_key(&owner, "queue"));
        }
        let mut queues = Vec::with_capacity(PRIORITY_COUNT);
        for (q, (binding, setting)) in queue_bindings.iter().zip(&settings).enumerate() {
            let profile = self.instantiate(
                binding,
                &lossless_name,
                &computed_headroom,
                cx,
                PoolDirection::Egress,
                &format!("queue {q}"),
            );
            let scheduler = if let Some(s) = cx.schedulers.get(&setting.scheduler) {
                self.usage.schedulers.push(setting.scheduler.clone());
                s.clone()
            } else {
                self.d.error(
                    &setting.scheduler_path,
                    format!("no scheduler named {:?}", setting.scheduler),
                );
                Scheduler {
                    name: setting.scheduler.clone(),
                    kind: SchedulerKind::Dwrr,
                    weight: 1,
                }
            };
            let wred = match &setting.wred {
                None => None,
                Some(wred_name) => {
                    if let Some(w) = cx.wred.get(wred_name) {
                        self.usage.wred.push(wred_name.clone());
                        Some(w.clone())
                    } else {
                        self.d.error(
                            &setting.wred_path,
                            format!("no wred_profile named {wred_name:?}"),
                        );
                        None
                    }
                }
            };
            queues.push(Queue {
                profile,
                scheduler,
                wred,
                lossless: lossless_queues[q],
            });
        }

        // A PG with headroom that generates PFC for no priority only drops, later than a lossy PG.
        for (pg, group) in priority_groups.iter().enumerate() {
            let generates_pfc = pfc_enable
                .iter()
                .any(|p| usize::from(maps.pfc_to_pg[usize::from(p)]) == pg);
            if group.is_lossless() && !generates_pfc {
                self.d.warning(
                    &pg_bindings[pg].path,
                    format!(
                        "PG {pg} has headroom (profile {:?}, xoff {}) but no PFC-enabled priority \
                         maps to it through pfc_to_pg_map {:?}: it never pauses the peer",
                        group.profile.name, group.profile.xoff_bytes, maps.names[5]
                    ),
                );
            }
        }

        let (lldp_status, _) = port_field(raw, defaults, name, "lldp_admin_status", |p| {
            p.lldp_admin_status.as_ref()
        });
        let lldp_admin_status = match lldp_status {
            Some(RawLldpAdminStatus::RxAndTx) => LldpAdminStatus::RxAndTx,
            Some(RawLldpAdminStatus::TxOnly) => LldpAdminStatus::TxOnly,
            Some(RawLldpAdminStatus::RxOnly) => LldpAdminStatus::RxOnly,
            Some(RawLldpAdminStatus::Disabled) => LldpAdminStatus::Disabled,
            None if cx.lldp.enabled => LldpAdminStatus::RxAndTx,
            None => LldpAdminStatus::Disabled,
        };

        let priority_groups: [PriorityGroup; PRIORITY_COUNT] = priority_groups.try_into().ok()?;
        let queues: [Queue; PRIORITY_COUNT] = queues.try_into().ok()?;
        // A routed port's MAC is its router MAC: the switch's (SONiC's DEVICE_METADATA.mac,
        // which every router interface shares) unless the port sets its own.
        let mac = if vlan.is_routed() && raw.mac.is_none() {
            cx.switch.mac
        } else {
            mac
        };
        let port = Port {
            name: name.to_owned(),
            device,
            alias: raw.alias.clone(),
            mac,
            speed_mbps,
            speed_bits_per_second: speed_mbps * 1_000_000,
            cable_length_m,
            mtu_bytes,
            tx_enable: tx_enable.copied().unwrap_or(true),
            trust,
            default_priority,
            pfc_enable,
            pfcwd_enable,
            pause_802_3x: pause.copied().unwrap_or(false),
            pfc_quanta,
            pfc_refresh_ns,
            vlan,
            shaper_rate_bits_per_second: shaper_mbps * 1_000_000,
            maps,
            priority_groups,
            queues,
            pfcwd,
            computed_headroom,
            lldp_admin_status,
        };
        self.pfc_mapping_checks(&port, &pfc_path);
        Some(port)
    }

    fn apply_bindings(
        &mut self,
        bindings: &mut [Binding; PRIORITY_COUNT],
        table: Option<&IndexMap<String, String>>,
        table_path: &str,
    ) {
        let Some(table) = table else { return };
        let mut seen = [false; PRIORITY_COUNT];
        for (key, profile) in table {
            let entry_path = join_key(table_path, key);
            match parse_index_range(key, 7) {
                Ok((from, to)) => {
                    for index in usize::from(from)..=usize::from(to) {
                        if seen[index] {
                            self.d.error_at_key(
                                &entry_path,
                                format!("{index} is already bound by another key of this table"),
                            );
                            break;
                        }
                        seen[index] = true;
                        bindings[index] = Binding {
                            profile: profile.clone(),
                            path: entry_path.clone(),
                        };
                    }
                }
                Err(reason) => self.d.error_at_key(&entry_path, reason),
            }
        }
    }

    fn apply_queue_settings(
        &mut self,
        settings: &mut [QueueSetting; PRIORITY_COUNT],
        table: Option<&IndexMap<String, RawQueue>>,
        table_path: &str,
    ) {
        let Some(table) = table else { return };
        let mut seen = [false; PRIORITY_COUNT];
        for (key, entry) in table {
            let entry_path = join_key(table_path, key);
            match parse_index_range(key, 7) {
                Ok((from, to)) => {
                    for index in usize::from(from)..=usize::from(to) {
                        if seen[index] {
                            self.d.error_at_key(
                                &entry_path,
                                format!(
                                    "queue {index} is already set by another key of this table"
                                ),
                            );
                            break;
                        }
                        seen[index] = true;
                        let setting = &mut settings[index];
                        if let Some(scheduler) = &entry.scheduler {
                            setting.scheduler.clone_from(scheduler);
                            setting.scheduler_path = join_key(&entry_path, "scheduler");
                        }
                        if let Some(wred) = &entry.wred_profile {
                            setting.wred = (!wred.is_empty() && wred != def::NULL_PROFILE)
                                .then(|| wred.clone());
                            setting.wred_path = join_key(&entry_path, "wred_profile");
                        }
                    }
                }
                Err(reason) => self.d.error_at_key(&entry_path, reason),
            }
        }
    }

    /// The profile a PG or queue binding names, with this port's computed headroom filled in.
    fn instantiate(
        &mut self,
        binding: &Binding,
        lossless_name: &str,
        computed: &HeadroomValues,
        cx: &PortContext<'_>,
        direction: PoolDirection,
        what: &str,
    ) -> BufferProfile {
        let user_or_builtin = cx.templates.get(&binding.profile);
        let is_auto = user_or_builtin.is_none()
            && (binding.profile == def::NULL_PROFILE || binding.profile == lossless_name)
            && direction == PoolDirection::Ingress;
        let profile = if let Some(template) = user_or_builtin {
            self.usage.profiles.push(template.name.clone());
            let (size_bytes, xon_bytes, xoff_bytes) = if template.computed {
                (computed.size_bytes, computed.xon_bytes, computed.xoff_bytes)
            } else {
                (template.size_bytes, template.xon_bytes, template.xoff_bytes)
            };
            BufferProfile {
                name: template.name.clone(),
                pool_index: template.pool_index,
                size_bytes,
                threshold: template.threshold,
                xon_bytes,
                xoff_bytes,
                xon_offset_bytes: template.xon_offset_bytes,
                headroom_computed: template.computed,
            }
        } else if is_auto {
            let pool_index = cx.lossless_pool_index;
            let mode = cx
                .pools
                .get(pool_index)
                .map_or(ThresholdMode::Dynamic, |pool| pool.mode);
            BufferProfile {
                name: lossless_name.to_owned(),
                pool_index,
                size_bytes: computed.size_bytes,
                threshold: default_threshold(mode, cx.headroom_calc),
                xon_bytes: computed.xon_bytes,
                xoff_bytes: computed.xoff_bytes,
                xon_offset_bytes: 0,
                headroom_computed: true,
            }
        } else {
            let known: Vec<&str> = cx.templates.keys().map(String::as_str).collect();
            let hint = if direction == PoolDirection::Ingress {
                format!(", NULL or {lossless_name} (this port's computed lossless profile)")
            } else {
                String::new()
            };
            self.d.error(
                &binding.path,
                format!(
                    "{what}: no buffer_profile named {:?} (defined: {}{hint})",
                    binding.profile,
                    known.join(", ")
                ),
            );
            return BufferProfile {
                name: binding.profile.clone(),
                pool_index: 0,
                size_bytes: 0,
                threshold: Threshold::Dynamic { dynamic_th: 0 },
                xon_bytes: 0,
                xoff_bytes: 0,
                xon_offset_bytes: 0,
                headroom_computed: false,
            };
        };
        if let Some(pool) = cx.pools.get(profile.pool_index) {
            if pool.direction != direction {
                let (want, table) = match direction {
                    PoolDirection::Ingress => ("an ingress", "buffer_pg"),
                    PoolDirection::Egress => ("an egress", "buffer_queue"),
                };
                self.d.error(
                    &binding.path,
                    format!(
                        "{what}: profile {:?} is in pool {:?}, but {table} needs {want} pool",
                        profile.name, pool.name
                    ),
                );
            }
        }
        profile
    }

    fn vlan(&mut self, raw: &RawPort, defaults: &RawPort, name: &str) -> Vlan {
        let (mode, mode_path) =
            port_field(raw, defaults, name, "vlan_mode", |p| p.vlan_mode.as_ref());
        let (access, access_path) = port_field(raw, defaults, name, "access_vlan", |p| {
            p.access_vlan.as_ref()
        });
        let (trunk, trunk_path) = port_field(raw, defaults, name, "trunk_vlans", |p| {
            p.trunk_vlans.as_ref()
        });
        let (native, native_path) = port_field(raw, defaults, name, "native_vlan", |p| {
            p.native_vlan.as_ref()
        });
        match mode.copied().unwrap_or(RawVlanMode::Access) {
            RawVlanMode::Access => {
                for (present, key) in [
                    (trunk.is_some(), &trunk_path),
                    (native.is_some(), &native_path),
                ] {
                    if present {
                        self.d.error_at_key(
                            key,
                            format!(
                                "only for vlan_mode = \"trunk\" (this port is access, {mode_path})"
                            ),
                        );
                    }
                }
                let vlan_id = to_u16(self.ranged(
                    access.copied(),
                    &access_path,
                    1,
                    4094,
                    i64::from(def::DEFAULT_ACCESS_VLAN),
                ));
                Vlan::Access { vlan_id }
            }
            RawVlanMode::Trunk => {
                if access.is_some() {
                    self.d.error_at_key(
                        &access_path,
                        "only for vlan_mode = \"access\" (use trunk_vlans and native_vlan)",
                    );
                }
                let mut allowed: Vec<u16> = match trunk {
                    None => {
                        self.d
                            .error(&trunk_path, "missing: a trunk port needs trunk_vlans");
                        Vec::new()
                    }
                    Some(list) => match parse_int_list(list, 1, 4094) {
                        Ok(values) => values.into_iter().map(to_u16).collect(),
                        Err((reason, element)) => {
                            let key = element.map_or_else(
                                || trunk_path.clone(),
                                |i| format!("{trunk_path}[{i}]"),
                            );
                            self.d.error(&key, reason);
                            Vec::new()
                        }
                    },
                };
                let native_vlan_id =
                    native.map(|&v| to_u16(self.ranged(Some(v), &native_path, 1, 4094, 1)));
                if let Some(native) = native_vlan_id {
                    if !allowed.contains(&native) {
                        allowed.push(native);
                    }
                }
                allowed.sort_unstable();
                Vlan::Trunk {
                    allowed_vlan_ids: allowed,
                    native_vlan_id,
                }
            }
            RawVlanMode::Routed => {
                for (present, key) in [
                    (access.is_some(), &access_path),
                    (trunk.is_some(), &trunk_path),
                    (native.is_some(), &native_path),
                ] {
                    if present {
                        self.d.error_at_key(
                            key,
                            format!(
                                "a routed port is in no VLAN (vlan_mode = \"routed\", \
                                 {mode_path}): remove this key, or make the port access or trunk"
                            ),
                        );
                    }
                }
                Vlan::Routed
            }
        }
    }

    /// `[routing]`.
    fn routing(&mut self, switch: &Switch) -> Routing {
        let raw = &self.raw.routing;
        let fib = headroom_core::route::FibConfig::default();
        let count = |v: usize| i64::try_from(v).unwrap_or(i64::MAX);
        let ecmp_hash_seed = match raw.ecmp_hash_seed {
            None => def::ecmp_hash_seed(&switch.name, switch.mac),
            Some(v) => {
                to_u32(self.ranged(Some(v), "routing.ecmp_hash_seed", 0, i64::from(u32::MAX), 0))
            }
        };
        let ecmp_hash_rotation = to_u8(self.ranged(
            raw.ecmp_hash_rotation,
            "routing.ecmp_hash_rotation",
            0,
            31,
            i64::from(fib.hash.rotation),
        ));
        let buckets = self.ranged(
            raw.ecmp_group_buckets,
            "routing.ecmp_group_buckets",
            2,
            4096,
            1 << fib.ecmp_bucket_bits,
        );
        if raw.ecmp_group_buckets.is_some() && buckets.count_ones() != 1 {
            self.d.error(
                "routing.ecmp_group_buckets",
                format!("{buckets} is not a power of two"),
            );
        }
        let mut top_bits = |value: Option<i64>, key: &str, default: u8| -> u8 {
            match value {
                None => default,
                Some(v @ (8 | 16 | 24)) => to_u8(v),
                Some(v) => {
                    self.d.error(
                        key,
                        format!("{v}: the first level is 8, 16 or 24 bits wide"),
                    );
                    default
                }
            }
        };
        let ipv4_lpm_top_bits = top_bits(
            raw.ipv4_lpm_top_bits,
            "routing.ipv4_lpm_top_bits",
            fib.ipv4_top_bits,
        );
        let ipv6_lpm_top_bits = top_bits(
            raw.ipv6_lpm_top_bits,
            "routing.ipv6_lpm_top_bits",
            fib.ipv6_top_bits,
        );
        let mut sized = |value: Option<i64>, key: &str, min: i64, default: usize| -> u32 {
            to_u32(self.ranged(value, key, min, 16_777_216, count(default)))
        };
        let max_ipv4_routes = sized(
            raw.max_ipv4_routes,
            "routing.max_ipv4_routes",
            1,
            fib.max_ipv4_routes,
        );
        let max_ipv6_routes = sized(
            raw.max_ipv6_routes,
            "routing.max_ipv6_routes",
            1,
            fib.max_ipv6_routes,
        );
        let max_ipv4_lpm_groups = sized(
            raw.max_ipv4_lpm_groups,
            "routing.max_ipv4_lpm_groups",
            1,
            fib.max_ipv4_groups,
        );
        let max_ipv6_lpm_groups = sized(
            raw.max_ipv6_lpm_groups,
            "routing.max_ipv6_lpm_groups",
            1,
            fib.max_ipv6_groups,
        );
        // The three fixed next hops (local, blackhole, kernel) and at least one neighbour.
        let max_next_hops = sized(
            raw.max_next_hops,
            "routing.max_next_hops",
            4,
            fib.max_next_hops,
        );
        let max_ecmp_groups = sized(
            raw.max_ecmp_groups,
            "routing.max_ecmp_groups",
            1,
            fib.max_ecmp_groups,
        );
        let netlink_receive_buffer_bytes = to_u32(self.ranged(
            raw.netlink_receive_buffer_bytes,
            "routing.netlink_receive_buffer_bytes",
            65_536,
            1 << 30,
            i64::from(def::DEFAULT_NETLINK_RECEIVE_BUFFER_BYTES),
        ));
        Routing {
            ecmp_hash_seed,
            ecmp_hash_algorithm: match raw.ecmp_hash_algorithm {
                None | Some(RawEcmpHashAlgorithm::Siphash) => EcmpHashAlgorithm::SipHash,
                Some(RawEcmpHashAlgorithm::Crc32) => EcmpHashAlgorithm::Crc32,
            },
            ecmp_hash_rotation,
            ecmp_group_buckets: to_u32(buckets),
            ipv4_lpm_top_bits,
            ipv6_lpm_top_bits,
            max_ipv4_routes,
            max_ipv6_routes,
            max_ipv4_lpm_groups,
            max_ipv6_lpm_groups,
            max_next_hops,
            max_ecmp_groups,
            netlink_receive_buffer_bytes,
        }
    }

    fn port_pfcwd(
        &mut self,
        raw: Option<&RawPortPfcWd>,
        defaults: Option<&RawPortPfcWd>,
        name: &str,
        global: &PfcWdGlobal,
    ) -> PortPfcWd {
        let empty = RawPortPfcWd::default();
        let raw = raw.unwrap_or(&empty);
        let defaults = defaults.unwrap_or(&empty);
        let own = join_key(&port_path(name), "pfcwd");
        // Blame the port's own key, else [port_defaults.pfcwd]'s, else the port's (not written).
        let key = |field: &str, own_present: bool, default_present: bool| {
            if !own_present && default_present {
                join_key("port_defaults.pfcwd", field)
            } else {
                join_key(&own, field)
            }
        };
        let detection_path = key(
            "detection_time",
            raw.detection_time.is_some(),
            defaults.detection_time.is_some(),
        );
        let restoration_path = key(
            "restoration_time",
            raw.restoration_time.is_some(),
            defaults.restoration_time.is_some(),
        );
        let detection_time_ms = to_u32(self.ranged(
            raw.detection_time.or(defaults.detection_time),
            &detection_path,
            100,
            5000,
            i64::from(def::DEFAULT_PFCWD_DETECTION_TIME_MS),
        ));
        let restoration_time_ms = to_u32(self.ranged(
            raw.restoration_time.or(defaults.restoration_time),
            &restoration_path,
            100,
            60000,
            i64::from(def::DEFAULT_PFCWD_RESTORATION_TIME_MS),
        ));
        for (value, path, what) in [
            (detection_time_ms, &detection_path, "detection_time"),
            (restoration_time_ms, &restoration_path, "restoration_time"),
        ] {
            if value < global.poll_interval_ms {
                self.d.error(
                    path,
                    format!(
                        "{what} {value} ms is shorter than pfcwd.poll_interval {} ms \
                         (SONiC requires >= the poll interval)",
                        global.poll_interval_ms
                    ),
                );
            }
        }
        PortPfcWd {
            enabled: raw.enabled.or(defaults.enabled).unwrap_or(true),
            action: match raw
                .action
                .or(defaults.action)
                .unwrap_or(RawPfcWdAction::Drop)
            {
                RawPfcWdAction::Drop => PfcWdAction::Drop,
                RawPfcWdAction::Forward => PfcWdAction::Forward,
                RawPfcWdAction::Alert => PfcWdAction::Alert,
            },
            detection_time_ms,
            restoration_time_ms,
        }
    }

    /// Every PFC priority must be generated by the lossless PG its traffic lands in, and a
    /// received PFC frame must pause the queue that carries that priority.
    fn pfc_mapping_checks(&mut self, port: &Port, pfc_path: &str) {
        let maps = &port.maps;
        let [_, _, tc_to_pg_name, tc_to_queue_name, pfc_to_queue_name, pfc_to_pg_name] =
            &maps.names;
        let mut lossless_tcs = [false; PRIORITY_COUNT];
        for p in port.pfc_enable.iter() {
            let tc = port.tc_of_priority(p);
            lossless_tcs[usize::from(tc)] = true;
            let pg_traffic = maps.tc_to_pg[usize::from(tc)];
            let pg_pfc = maps.pfc_to_pg[usize::from(p)];
            let pfc_pg = &port.priority_groups[usize::from(pg_pfc)];
            if !pfc_pg.is_lossless() {
                self.d.error(
                    pfc_path,
                    format!(
                        "priority {p}: pfc_to_pg_map {pfc_to_pg_name:?} gives PG {pg_pfc}, whose \
                         profile {:?} has no headroom (xoff 0): no PFC would be generated for it",
                        pfc_pg.profile.name
                    ),
                );
            } else if pg_traffic != pg_pfc {
                self.d.error(
                    pfc_path,
                    format!(
                        "priority {p}: its traffic (TC {tc}) lands in PG {pg_traffic} \
                         (tc_to_pg_map {tc_to_pg_name:?}) but PFC for it is generated by PG \
                         {pg_pfc} (pfc_to_pg_map {pfc_to_pg_name:?})"
                    ),
                );
            }
            let queue_pfc = maps.pfc_to_queue[usize::from(p)];
            let queue_traffic = maps.tc_to_queue[usize::from(tc)];
            if queue_pfc != queue_traffic {
                self.d.error(
                    pfc_path,
                    format!(
                        "priority {p}: a received PFC frame pauses queue {queue_pfc} \
                         (pfc_to_queue_map {pfc_to_queue_name:?}) but its traffic (TC {tc}) \
                         leaves by queue {queue_traffic} (tc_to_queue_map {tc_to_queue_name:?})"
                    ),
                );
            }
        }
        // Lossy traffic classes that can occur on this port and share a lossless PG or queue.
        let reachable: Vec<u8> = match port.trust {
            Trust::Dscp => port.maps.dscp_to_tc.to_vec(),
            Trust::Dot1p => port.maps.dot1p_to_tc.to_vec(),
        };
        let mut warned = [false; PRIORITY_COUNT];
        for &tc in &reachable {
            let t = usize::from(tc);
            if lossless_tcs[t] || warned[t] {
                continue;
            }
            warned[t] = true;
            let pg = maps.tc_to_pg[t];
            if port.priority_groups[usize::from(pg)].is_lossless() {
                self.d.warning(
                    pfc_path,
                    format!(
                        "lossy TC {tc} shares lossless PG {pg}: its traffic can trigger PFC for \
                         the lossless priorities"
                    ),
                );
            }
            let queue = maps.tc_to_queue[t];
            if port.queues[usize::from(queue)].lossless {
                self.d.warning(
                    pfc_path,
                    format!(
                        "lossy TC {tc} shares lossless queue {queue}: PFC from the peer pauses it too"
                    ),
                );
            }
        }
    }

    fn unique_devices(&mut self) {
        let mut seen: HashMap<&str, &str> = HashMap::new();
        for (name, port) in &self.raw.port {
            let Some(device) = port.device.as_deref() else {
                continue;
            };
            if let Some(first) = seen.get(device) {
                let message = format!("device {device:?} is already used by port {first}");
                self.d.error(&join_key(&port_path(name), "device"), message);
            } else {
                seen.insert(device, name);
            }
        }
    }

    fn pool_accounting(
        &mut self,
        pools: &mut [PoolDraft],
        ports: &[Port],
        calc: &HeadroomCalc,
        lossless_pool_index: usize,
    ) {
        let mut reserved = vec![0u64; pools.len()];
        let mut headroom = vec![0u64; pools.len()];
        for port in ports {
            for pg in &port.priority_groups {
                let index = pg.profile.pool_index;
                if index < pools.len() {
                    reserved[index] = reserved[index].saturating_add(pg.profile.size_bytes);
                    headroom[index] = headroom[index].saturating_add(pg.profile.xoff_bytes);
                }
            }
            for queue in &port.queues {
                let index = queue.profile.pool_index;
                if index < pools.len() {
                    reserved[index] = reserved[index].saturating_add(queue.profile.size_bytes);
                }
            }
        }
        // SHP enabled without an explicit size: Σ xoff / over_subscribe_ratio (buffer_pool_mellanox.lua
        // without its per-port private headroom), rounded up to whole cells.
        if calc.constants.shared_headroom_pool {
            if let Some(pool) = pools.get_mut(lossless_pool_index) {
                if pool.xoff_bytes == 0 {
                    let shp = headroom[lossless_pool_index]
                        .div_ceil(u64::from(calc.over_subscribe_ratio.max(1)));
                    pool.xoff_bytes = round_up_to_cells(shp, calc.constants.cell_size_bytes);
                }
            }
        }
        for (index, pool) in pools.iter_mut().enumerate() {
            let private = if pool.xoff_bytes > 0 {
                0
            } else {
                headroom[index]
            };
            let carved = reserved[index]
                .saturating_add(private)
                .saturating_add(pool.xoff_bytes);
            if carved > pool.size_bytes {
                let size_path = if pool.user_defined {
                    join_key(&pool.path, "size")
                } else {
                    pool.path.clone()
                };
                let origin = if pool.user_defined {
                    String::new()
                } else {
                    " (built-in pool: half of switch.buffer_size_bytes, or all of it for \
                     egress_lossless_pool)"
                        .to_owned()
                };
                self.d.error(
                    &size_path,
                    format!(
                        "pool {:?} of {} bytes{origin} cannot hold what is carved from it: \
                         {} reserved (Σ size of bound PGs/queues) + {} headroom ({}) = {} bytes",
                        pool.name,
                        pool.size_bytes,
                        reserved[index],
                        private.max(pool.xoff_bytes),
                        if pool.xoff_bytes > 0 {
                            "shared headroom pool xoff"
                        } else {
                            "Σ xoff of its lossless PGs"
                        },
                        carved
                    ),
                );
            }
        }
        for (index, pool) in pools.iter_mut().enumerate() {
            pool.reserved_bytes = reserved[index];
            pool.private_headroom_bytes = if pool.xoff_bytes > 0 {
                0
            } else {
                headroom[index]
            };
        }
    }

    fn port_buffer_checks(
        &mut self,
        ports: &[Port],
        pools: &[PoolDraft],
        templates: &IndexMap<String, ProfileTemplate>,
        calc: &HeadroomCalc,
    ) {
        let final_pools = finish_pools(pools);
        // (profile, required xoff) -> ports, to report each shortfall once.
        let mut short: BTreeMap<(String, u64), Vec<&str>> = BTreeMap::new();
        let mut xon_high: BTreeMap<(String, u64), Vec<&str>> = BTreeMap::new();
        let mut ecn_late: Vec<EcnLate<'_>> = Vec::new();
        for port in ports {
            for pg in &port.priority_groups {
                let profile = &pg.profile;
                if !profile.is_lossless() {
                    continue;
                }
                if !profile.headroom_computed
                    && profile.xoff_bytes < port.computed_headroom.xoff_bytes
                {
                    let names = short
                        .entry((profile.name.clone(), port.computed_headroom.xoff_bytes))
                        .or_default();
                    if names.last() != Some(&port.name.as_str()) {
                        names.push(&port.name);
                    }
                }
                let Some(pool) = final_pools.get(profile.pool_index) else {
                    continue;
                };
                let xoff_point = profile.size_bytes.saturating_add(
                    profile
                        .threshold
                        .single_congested_limit_bytes(pool.shared_bytes),
                );
                if profile.xon_bytes > xoff_point {
                    let names = xon_high
                        .entry((profile.name.clone(), xoff_point))
                        .or_default();
                    if names.last() != Some(&port.name.as_str()) {
                        names.push(&port.name);
                    }
                }
            }
            ecn_late.extend(ecn_checks(port, &final_pools));
        }
        for ((profile, required), port_names) in short {
            let path = templates
                .get(&profile)
                .and_then(|t| t.path.as_ref())
                .map_or_else(|| "buffer_profile".to_owned(), |p| join_key(p, "xoff"));
            let given = templates.get(&profile).map_or(0, |t| t.xoff_bytes);
            let message = format!(
                "{given} bytes of headroom is below the {required} bytes the headroom formula \
                 requires for {}; raise xoff, use headroom = \"computed\", or set \
                 headroom_calc.allow_headroom_below_minimum = true",
                ports_named(&port_names)
            );
            if calc.allow_headroom_below_minimum {
                self.d.warning(&path, message);
            } else {
                self.d.error(&path, message);
            }
        }
        for ((profile, xoff_point), port_names) in xon_high {
            let path = templates
                .get(&profile)
                .and_then(|t| t.path.as_ref())
                .map_or_else(
                    || port_path(port_names.first().copied().unwrap_or("")),
                    |p| join_key(p, "xon"),
                );
            let xon = templates.get(&profile).map_or(0, |t| t.xon_bytes);
            self.d.error(
                &path,
                format!(
                    "xon {xon} bytes is above the XOFF point {xoff_point} bytes (size + shared \
                     limit) of {}: XON would be sent while the PG is still above XOFF",
                    ports_named(&port_names)
                ),
            );
        }
        // One warning per (WRED profile, queue, threshold, XOFF point), naming the ports.
        let mut grouped: BTreeMap<(&str, usize, u64, u64, u8), Vec<&str>> = BTreeMap::new();
        for late in &ecn_late {
            grouped
                .entry((
                    late.wred,
                    late.queue,
                    late.min_threshold_bytes,
                    late.xoff_point_bytes,
                    late.pg,
                ))
                .or_default()
                .push(late.port);
        }
        for ((wred, queue, min_threshold, xoff_point, pg), port_names) in grouped {
            let first_port = port_names.first().copied().unwrap_or("");
            let path = self.d.pick(&[
                join_key(&join_key("wred_profile", wred), "green_min_threshold"),
                join_key(
                    &join_key(&port_path(first_port), "queue"),
                    &queue.to_string(),
                ),
                port_path(first_port),
            ]);
            self.d.warning(
                &path,
                format!(
                    "{} queue {queue}: ECN starts marking at {min_threshold} \
                     bytes, at or above the XOFF point {xoff_point} bytes of lossless PG {pg} \
                     feeding it: PFC will pause the peer before any packet is marked",
                    ports_named(&port_names)
                ),
            );
        }
    }

    fn runtime(&mut self, switch: &Switch, environment: Environment<'_>) -> Runtime {
        let raw = &self.raw.runtime;
        let port_names: Vec<&String> = self.raw.port.keys().collect();
        // `run` refused more than MAX_PORTS ports: every index fits the core's 16-bit PortId.
        // Were that check ever lost, the port would be reported here, not renumbered.
        let port_id = |index: usize| u16::try_from(index).ok().map(PortId);
        let lcores = match &raw.lcore {
            None => {
                let all: Vec<PortId> = (0..port_names.len()).filter_map(port_id).collect();
                // The first CPU this process may run on (the mask is never empty: the process
                // runs on one of its CPUs).
                let cpu = environment.allowed_cpus.first().copied().unwrap_or(0);
                vec![Lcore {
                    cpu,
                    rx_ports: all.clone(),
                    tx_ports: all,
                }]
            }
            Some(raw_lcores) => {
                if raw_lcores.is_empty() {
                    self.d
                        .error("runtime.lcore", "empty: give at least one lcore");
                }
                let mut lcores = Vec::new();
                let mut rx_owner: Vec<Option<usize>> = vec![None; port_names.len()];
                let mut tx_owner: Vec<Option<usize>> = vec![None; port_names.len()];
                let mut cpus_seen: Vec<i64> = Vec::new();
                for (i, raw_lcore) in raw_lcores.iter().enumerate() {
                    let lcore_path = format!("runtime.lcore[{i}]");
                    let cpu_path = join_key(&lcore_path, "cpu");
                    let allowed = usize::try_from(raw_lcore.cpu)
                        .ok()
                        .filter(|cpu| environment.allowed_cpus.contains(cpu));
                    if allowed.is_none() {
                        self.d.error(
                            &cpu_path,
                            format!(
                                "CPU {} is not in this process's affinity mask (allowed: {})",
                                raw_lcore.cpu,
                                cpu_list(environment.allowed_cpus)
                            ),
                        );
                    } else if cpus_seen.contains(&raw_lcore.cpu) {
                        self.d.error(
                            &cpu_path,
                            format!("CPU {} already runs another lcore", raw_lcore.cpu),
                        );
                    }
                    cpus_seen.push(raw_lcore.cpu);
                    let mut lcore = Lcore {
                        // An error was recorded above when the CPU is not allowed; the
                        // configuration is refused then, so this 0 is never used.
                        cpu: allowed.unwrap_or(0),
                        rx_ports: Vec::new(),
                        tx_ports: Vec::new(),
                    };
                    for (field, names, owners, list) in [
                        (
                            "rx_ports",
                            &raw_lcore.rx_ports,
                            &mut rx_owner,
                            &mut lcore.rx_ports,
                        ),
                        (
                            "tx_ports",
                            &raw_lcore.tx_ports,
                            &mut tx_owner,
                            &mut lcore.tx_ports,
                        ),
                    ] {
                        for (j, name) in names.iter().enumerate() {
                            let element_path = format!("{}[{j}]", join_key(&lcore_path, field));
                            let Some(port_index) = port_names.iter().position(|p| *p == name)
                            else {
                                self.d
                                    .error(&element_path, format!("no port named {name:?}"));
                                continue;
                            };
                            if let Some(other) = owners[port_index] {
                                let message = format!(
                                    "port {name:?} is already in {field} of runtime.lcore[{other}]: \
                                     each port is served by exactly one lcore per direction"
                                );
                                self.d.error(&element_path, message);
                                continue;
                            }
                            owners[port_index] = Some(i);
                            match port_id(port_index) {
                                Some(id) => list.push(id),
                                None => self.d.error(&element_path, "port id beyond 16 bits"),
                            }
                        }
                    }
                    lcores.push(lcore);
                }
                for (port_index, name) in port_names.iter().enumerate() {
                    for (owners, field) in [(&rx_owner, "rx_ports"), (&tx_owner, "tx_ports")] {
                        if owners[port_index].is_none() {
                            self.d.error(
                                "runtime.lcore",
                                format!("port {name:?} is in no lcore's {field}: nothing would serve it"),
                            );
                        }
                    }
                }
                lcores
            }
        };
        let burst_size = to_u16(self.ranged(
            raw.burst_size,
            "runtime.burst_size",
            1,
            1024,
            i64::from(def::DEFAULT_BURST_SIZE),
        ));
        let control_socket = raw.control_socket.as_ref().map_or_else(
            || PathBuf::from(format!("/run/headroom/{}.sock", switch.name)),
            PathBuf::from,
        );
        if raw.control_socket.as_ref().is_some_and(String::is_empty) {
            self.d.error("runtime.control_socket", "empty path");
        }
        let listen_text = raw
            .prometheus_listen
            .clone()
            .unwrap_or_else(|| def::DEFAULT_PROMETHEUS_LISTEN.to_owned());
        let listen = listen_text.parse::<SocketAddr>().map_err(|_| {
            self.d.error(
                "runtime.prometheus_listen",
                format!(
                    "{listen_text:?} is not an address like \"127.0.0.1:9464\" or \"[::1]:9464\""
                ),
            );
        });
        let prometheus_listen = if raw.prometheus_enable.unwrap_or(true) {
            listen.ok()
        } else {
            None
        };
        Runtime {
            lcores,
            polling: match raw.polling.unwrap_or(RawPolling::Adaptive) {
                RawPolling::Busy => Polling::Busy,
                RawPolling::Adaptive => Polling::Adaptive,
            },
            burst_size,
            control_socket,
            prometheus_listen,
        }
    }

    /// `[testing]`. Fault injection needs `i_understand_this_breaks_traffic = true`: nobody
    /// turns it on by copying a section without reading it.
    fn testing(&mut self, ports: &[Port]) -> Testing {
        let Some(raw) = self.raw.testing.fault_injection.as_ref() else {
            return Testing::default();
        };
        const P: &str = "testing.fault_injection";
        if raw.i_understand_this_breaks_traffic != Some(true) {
            self.d.error(
                &format!("{P}.i_understand_this_breaks_traffic"),
                "fault injection drops, corrupts and delays frames on purpose: set \
                 i_understand_this_breaks_traffic = true to enable it, or remove the section",
            );
        }
        let seed = self.ranged(raw.seed, &format!("{P}.seed"), 0, i64::MAX, 0);
        let hold_frames = self.ranged(
            raw.hold_frames,
            &format!("{P}.hold_frames"),
            1,
            4096,
            i64::from(def::DEFAULT_FAULT_HOLD_FRAMES),
        );
        let port_list = match &raw.ports {
            None => (0..ports.len()).collect(),
            Some(names) => {
                let mut list = Vec::new();
                for (i, name) in names.iter().enumerate() {
                    match ports.iter().position(|p| &p.name == name) {
                        Some(index) if !list.contains(&index) => list.push(index),
                        Some(_) => self.d.error(
                            &format!("{P}.ports[{i}]"),
                            format!("port {name:?} listed twice"),
                        ),
                        None => self.d.error(
                            &format!("{P}.ports[{i}]"),
                            format!("no port named {name:?}"),
                        ),
                    }
                }
                list
            }
        };
        let mut number = |value: Option<f64>, key: &str, max: f64, default: f64| -> f64 {
            match value {
                None => default,
                Some(v) if v.is_finite() && (0.0..=max).contains(&v) => v,
                Some(v) => {
                    self.d.error(
                        &format!("{P}.{key}"),
                        format!("{v} is out of range 0..={max}"),
                    );
                    default
                }
            }
        };
        let ns = |ms: f64| (ms * 1e6) as u64;
        let tx_stalls_per_second =
            number(raw.tx_stalls_per_second, "tx_stalls_per_second", 1e6, 0.0);
        let tx_stall_ns = ns(number(raw.tx_stall_ms, "tx_stall_ms", 60_000.0, 1.0));
        let link_flaps_per_second =
            number(raw.link_flaps_per_second, "link_flaps_per_second", 1e6, 0.0);
        let link_down_ns = ns(number(raw.link_down_ms, "link_down_ms", 60_000.0, 500.0));
        let mut direction = |raw: Option<&crate::schema::RawFrameFaults>, dir: &str| {
            let empty = crate::schema::RawFrameFaults::default();
            let r = raw.unwrap_or(&empty);
            let mut rate = |v: Option<f64>, key: &str| number(v, &format!("{dir}.{key}"), 1.0, 0.0);
            let faults = FrameFaults {
                drop_rate: rate(r.drop_rate, "drop_rate"),
                corrupt_rate: rate(r.corrupt_rate, "corrupt_rate"),
                truncate_rate: rate(r.truncate_rate, "truncate_rate"),
                duplicate_rate: rate(r.duplicate_rate, "duplicate_rate"),
                reorder_rate: rate(r.reorder_rate, "reorder_rate"),
                delay_rate: rate(r.delay_rate, "delay_rate"),
                delay_max_ns: (number(r.delay_max_us, &format!("{dir}.delay_max_us"), 1e7, 100.0)
                    * 1e3) as u64,
            };
            let sum = faults.drop_rate
                + faults.corrupt_rate
                + faults.truncate_rate
                + faults.duplicate_rate
                + faults.reorder_rate
                + faults.delay_rate;
            (faults, sum)
        };
        let (rx, rx_sum) = direction(raw.rx.as_ref(), "rx");
        let (tx, tx_sum) = direction(raw.tx.as_ref(), "tx");
        for (dir, sum) in [("rx", rx_sum), ("tx", tx_sum)] {
            if sum > 1.0 + 1e-9 {
                self.d.error(
                    &format!("{P}.{dir}"),
                    format!(
                        "the rates sum to {sum}: each frame meets at most one fault, so at most 1"
                    ),
                );
            }
        }
        let injection = FaultInjection {
            seed: seed.unsigned_abs(),
            ports: port_list,
            rx,
            tx,
            tx_stalls_per_second,
            tx_stall_ns,
            link_flaps_per_second,
            link_down_ns,
            hold_frames: usize::try_from(hold_frames).unwrap_or(1),
        };
        self.d.warning(
            P,
            "FAULT INJECTION IS ON: this switch drops, corrupts and delays frames on purpose",
        );
        Testing {
            fault_injection: Some(injection),
        }
    }

    fn dpdk(&mut self, switch: &Switch) -> Dpdk {
        let empty = crate::schema::RawDpdk::default();
        if self.raw.dpdk.is_some() && switch.driver != Driver::Dpdk {
            self.d
                .warning("dpdk", "ignored: switch.driver is not \"dpdk\"");
        }
        let raw = self.raw.dpdk.as_ref().unwrap_or(&empty);
        let mempool_mbufs = to_u32(self.ranged(
            raw.mempool_mbufs,
            "dpdk.mempool_mbufs",
            1024,
            16_777_215,
            i64::from(def::DEFAULT_DPDK_MEMPOOL_MBUFS),
        ));
        let mempool_cache_size = to_u32(self.ranged(
            raw.mempool_cache_size,
            "dpdk.mempool_cache_size",
            0,
            512,
            i64::from(def::DEFAULT_DPDK_MEMPOOL_CACHE_SIZE),
        ));
        let rx_descriptors = to_u16(self.ranged(
            raw.rx_descriptors,
            "dpdk.rx_descriptors",
            32,
            32768,
            i64::from(def::DEFAULT_DPDK_DESCRIPTORS),
        ));
        let tx_descriptors = to_u16(self.ranged(
            raw.tx_descriptors,
            "dpdk.tx_descriptors",
            32,
            32768,
            i64::from(def::DEFAULT_DPDK_DESCRIPTORS),
        ));
        Dpdk {
            eal_args: raw.eal_args.clone().unwrap_or_default(),
            mempool_mbufs,
            mempool_cache_size,
            rx_descriptors,
            tx_descriptors,
        }
    }

    fn warn_unused(&mut self, pools: &[PoolDraft], ports: &[Port]) {
        let raw = self.raw;
        let mut used_pools = vec![false; pools.len()];
        for port in ports {
            for profile in port
                .priority_groups
                .iter()
                .map(|pg| &pg.profile)
                .chain(port.queues.iter().map(|q| &q.profile))
            {
                if let Some(used) = used_pools.get_mut(profile.pool_index) {
                    *used = true;
                }
            }
        }
        for (pool, used) in pools.iter().zip(&used_pools) {
            if pool.user_defined && !used {
                self.d.warning(
                    &join_key("buffer_pool", &pool.name),
                    "unused: no PG or queue is bound to a profile of this pool",
                );
            }
        }
        for name in raw.buffer_profile.keys() {
            if !self.usage.profiles.contains(name) {
                self.d.warning(
                    &join_key("buffer_profile", name),
                    "unused: no PG or queue is bound to this profile",
                );
            }
        }
        for (table, maps) in [
            ("dscp_to_tc_map", &raw.dscp_to_tc_map),
            ("dot1p_to_tc_map", &raw.dot1p_to_tc_map),
            ("tc_to_pg_map", &raw.tc_to_pg_map),
            ("tc_to_queue_map", &raw.tc_to_queue_map),
            ("pfc_to_queue_map", &raw.pfc_to_queue_map),
            ("pfc_to_pg_map", &raw.pfc_to_pg_map),
        ] {
            for name in maps.keys() {
                if !self
                    .usage
                    .maps
                    .iter()
                    .any(|(t, n)| *t == table && n == name)
                {
                    self.d
                        .warning(&join_key(table, name), "unused: no port uses this map");
                }
            }
        }
        for name in raw.scheduler.keys() {
            if !self.usage.schedulers.contains(name) {
                self.d.warning(
                    &join_key("scheduler", name),
                    "unused: no queue uses this scheduler",
                );
            }
        }
        for name in raw.wred_profile.keys() {
            if !self.usage.wred.contains(name) {
                self.d.warning(
                    &join_key("wred_profile", name),
                    "unused: no queue uses this WRED profile",
                );
            }
        }
    }
}

fn copy_into<const N: usize>(target: &mut [u8; N], source: &[u8]) {
    for (t, s) in target.iter_mut().zip(source) {
        *t = *s;
    }
}

/// Final pools from drafts after the accounting.
fn finish_pools(drafts: &[PoolDraft]) -> Vec<BufferPool> {
    drafts
        .iter()
        .map(|draft| {
            let reserved_bytes = draft.reserved_bytes;
            let private_headroom_bytes = draft.private_headroom_bytes;
            let carved = reserved_bytes
                .saturating_add(private_headroom_bytes)
                .saturating_add(draft.xoff_bytes);
            BufferPool {
                name: draft.name.clone(),
                direction: draft.direction,
                mode: draft.mode,
                size_bytes: draft.size_bytes,
                shared_headroom_pool_bytes: draft.xoff_bytes,
                reserved_bytes,
                private_headroom_bytes,
                shared_bytes: draft.size_bytes.saturating_sub(carved),
            }
        })
        .collect()
}

/// Leave out built-in pools nothing is bound to, renumbering the profiles' pool indexes.
fn drop_unused_builtin_pools(
    drafts: Vec<PoolDraft>,
    mut ports: Vec<Port>,
) -> (Vec<BufferPool>, Vec<Port>) {
    let pools = finish_pools(&drafts);
    let mut used = vec![false; pools.len()];
    for port in &ports {
        for pg in &port.priority_groups {
            if let Some(u) = used.get_mut(pg.profile.pool_index) {
                *u = true;
            }
        }
        for queue in &port.queues {
            if let Some(u) = used.get_mut(queue.profile.pool_index) {
                *u = true;
            }
        }
    }
    let keep: Vec<bool> = drafts
        .iter()
        .zip(&used)
        .map(|(draft, &used)| used || draft.user_defined)
        .collect();
    let mut new_index = vec![0usize; pools.len()];
    let mut next = 0;
    for (i, &k) in keep.iter().enumerate() {
        new_index[i] = next;
        if k {
            next += 1;
        }
    }
    let renumber = |index: usize| new_index.get(index).copied().unwrap_or(0);
    for port in &mut ports {
        for pg in &mut port.priority_groups {
            pg.profile.pool_index = renumber(pg.profile.pool_index);
        }
        for queue in &mut port.queues {
            queue.profile.pool_index = renumber(queue.profile.pool_index);
        }
    }
    let pools = pools
        .into_iter()
        .zip(keep)
        .filter_map(|(pool, keep)| keep.then_some(pool))
        .collect();
    (pools, ports)
}

/// "port a" or "ports a, b, c": every port a finding applies to, named.
fn ports_named(names: &[&str]) -> String {
    match names {
        [one] => format!("port {one}"),
        _ => format!("ports {}", names.join(", ")),
    }
}

/// Diagnostics found while one port was resolved, gathered so that a finding about a value the
/// port does not write itself (from `[port_defaults]`, a shared profile or map) is reported once,
/// naming every port it applies to, instead of once per port without a name.
#[derive(Default)]
struct PerPortFindings {
    /// (is error, key, message) → ports, in order of first finding.
    found: IndexMap<(bool, String, String), (Diagnostic, Vec<String>)>,
}

impl PerPortFindings {
    /// Moves the diagnostics recorded for port `name` since the given counts out of `d`.
    fn take(&mut self, d: &mut Diagnostics<'_>, name: &str, errors: usize, warnings: usize) {
        let new_errors: Vec<Diagnostic> = d.errors.drain(errors..).collect();
        let new_warnings: Vec<Diagnostic> = d.warnings.drain(warnings..).collect();
        for (is_error, diagnostic) in new_errors
            .into_iter()
            .map(|e| (true, e))
            .chain(new_warnings.into_iter().map(|w| (false, w)))
        {
            let entry = self
                .found
                .entry((is_error, diagnostic.key.clone(), diagnostic.message.clone()))
                .or_insert_with(|| (diagnostic, Vec::new()));
            if !entry.1.iter().any(|n| n == name) {
                entry.1.push(name.to_owned());
            }
        }
    }

    /// Puts the findings back, each once; one about a key outside the port's own table names
    /// the port(s).
    fn report(self, d: &mut Diagnostics<'_>) {
        for ((is_error, _, _), (mut diagnostic, names)) in self.found {
            let own_key = names.len() == 1 && {
                let own = port_path(&names[0]);
                diagnostic.key == own || diagnostic.key.starts_with(&format!("{own}."))
            };
            if !own_key {
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                diagnostic.message = format!("{}: {}", ports_named(&names), diagnostic.message);
            }
            if is_error {
                d.errors.push(diagnostic);
            } else {
                d.warnings.push(diagnostic);
            }
        }
    }
}

/// A queue whose ECN threshold cannot fire before the XOFF point of the PG feeding it.
struct EcnLate<'a> {
    port: &'a str,
    wred: &'a str,
    queue: usize,
    pg: u8,
    min_threshold_bytes: u64,
    xoff_point_bytes: u64,
}

/// ECN first, PFC as the backstop: find queues whose ECN threshold lies at or above the XOFF point
/// of the lossless PG feeding them (same port's maps), so that PFC fires before any marking.
fn ecn_checks<'a>(port: &'a Port, pools: &[BufferPool]) -> Vec<EcnLate<'a>> {
    let mut late = Vec::new();
    let mut seen = [false; PRIORITY_COUNT];
    for p in port.pfc_enable.iter() {
        let tc = usize::from(port.tc_of_priority(p));
        let q = usize::from(port.maps.tc_to_queue[tc]);
        let pg_index = port.maps.tc_to_pg[tc];
        let pg = &port.priority_groups[usize::from(pg_index)];
        let Some(wred) = &port.queues[q].wred else {
            continue;
        };
        if !wred.ecn.marks_green() || seen[q] || !pg.is_lossless() {
            continue;
        }
        let Some(pool) = pools.get(pg.profile.pool_index) else {
            continue;
        };
        let xoff_point = pg.profile.size_bytes.saturating_add(
            pg.profile
                .threshold
                .single_congested_limit_bytes(pool.shared_bytes),
        );
        if wred.green.min_threshold_bytes >= xoff_point {
            seen[q] = true;
            late.push(EcnLate {
                port: &port.name,
                wred: &wred.name,
                queue: q,
                pg: pg_index,
                min_threshold_bytes: wred.green.min_threshold_bytes,
                xoff_point_bytes: xoff_point,
            });
        }
    }
    late
}
