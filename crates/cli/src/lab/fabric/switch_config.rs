//! The headroom configuration of every fabric switch: one template (what all switches share:
//! PFC on priorities 3 and 4, ECN marking on queues 3 and 4, the PFC watchdog on) instantiated
//! per switch (name, router MAC, ports and devices, control socket, Prometheus port, lcore CPU);
//! every port is routed (`vlan_mode = "routed"`),
//! built as data ([`Document`], the keys of docs/config.md) and serialised to TOML; the
//! configuration crate parses every result, so a template the switch would refuse is refused
//! here first.

use super::plan::{Plan, Role, Switch};
use crate::lab::config::{mac_text, EcnThresholds, MTU_BYTES, RUN_DIR};
use indexmap::IndexMap;
use serde::Serialize;
use std::path::PathBuf;

/// The fabric's `[headroom_calc] software_latency_kib`: three times the single switch's default
/// (32 KiB, one burst). Six switch processes share two CPUs here, so a peer may react to our XOFF
/// a scheduler slice late: an incast across the spines (`scenario incast`, PFC and DCQCN on) once
/// dropped 10 frames at leaf2 `Ethernet1` as `ingress_headroom_exhausted` with 32 KiB, spine2
/// still sending after the XOFF. 96 KiB is about 7.9 ms of a 100M link.
pub const FABRIC_SOFTWARE_LATENCY_KIB: f64 = 96.0;

/// The WRED/ECN profile of the lossless queues.
pub const WRED_PROFILE: &str = "FABRIC_LOSSLESS";

/// What every switch of a fabric shares.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchTemplate {
    /// Port speed as the configuration writes it.
    pub speed: String,
    /// ECN marking of the lossless queues (`None`: no marking, PFC is the only signal).
    pub ecn: Option<EcnThresholds>,
    /// PFC watchdog detection and restoration times, ms.
    pub pfcwd_detection_ms: u32,
    /// See [`Self::pfcwd_detection_ms`].
    pub pfcwd_restoration_ms: u32,
    /// Watchdog poll interval, ms.
    pub pfcwd_poll_ms: u32,
    /// CPUs the switches' lcores are spread over (switch m on CPU m mod this).
    pub cpus: usize,
    /// One ECMP hash seed for every switch (`[routing] ecmp_hash_seed`); `None`: each switch
    /// its own (the default seed, from its name and MAC). Equal seeds on two ECMP stages
    /// polarise (docs/fabric.md, polarisation).
    pub ecmp_hash_seed: Option<u32>,
}

impl SwitchTemplate {
    /// The fabric's default: the single-switch lab's ECN thresholds and watchdog (200 ms / 200
    /// ms, polled every 200 ms).
    #[must_use]
    pub fn new(speed: &str, cpus: usize) -> Self {
        Self {
            speed: speed.to_owned(),
            ecn: Some(EcnThresholds::LAB),
            pfcwd_detection_ms: 200,
            pfcwd_restoration_ms: 200,
            pfcwd_poll_ms: 200,
            cpus: cpus.max(1),
            ecmp_hash_seed: None,
        }
    }

    /// The configuration document of `switch`.
    #[must_use]
    pub fn document(&self, plan: &Plan, switch: &Switch) -> Document {
        let m = plan
            .switches
            .iter()
            .position(|s| s.name == switch.name)
            .unwrap_or(0);
        let names: Vec<String> = switch.ports.iter().map(|p| p.name.clone()).collect();
        let mut wred_profile = IndexMap::new();
        if let Some(ecn) = self.ecn {
            wred_profile.insert(
                WRED_PROFILE.to_owned(),
                Wred {
                    ecn: "ecn_all",
                    wred_green_enable: false,
                    green_min_threshold: ecn.min_bytes,
                    green_max_threshold: ecn.max_bytes,
                    green_drop_probability: ecn.probability_percent,
                },
            );
        }
        let port = switch
            .ports
            .iter()
            .map(|p| {
                (
                    p.name.clone(),
                    PortEntry {
                        device: p.device.clone(),
                    },
                )
            })
            .collect();
        let mut queue = IndexMap::new();
        queue.insert(
            "3-4".to_owned(),
            QueueEntry {
                scheduler: "scheduler.1",
                wred_profile: if self.ecn.is_some() { WRED_PROFILE } else { "" },
            },
        );
        Document {
            switch: SwitchSection {
                name: format!("{}-{}", plan.spec.prefix, switch.name),
                driver: "afpacket",
                mac: mac_text(switch.mac),
                ecn_seed: 42,
                pfc_storm_alarm_frames_per_second: 2000,
                log_format: "text",
            },
            port_defaults: PortDefaults {
                speed: self.speed.clone(),
                cable_length: "5m",
                mtu: MTU_BYTES,
                trust: "dscp",
                pfc_enable: vec![3, 4],
                // Every port is a router port (fabric links and host links alike): headroom
                // forwards on the FIB it mirrors from the kernel FRR fills, and nothing is
                // bridged (a leaf–spine fabric is an L2 loop).
                vlan_mode: "routed",
                pfcwd: PortPfcwd {
                    enabled: true,
                    action: "drop",
                    detection_time: self.pfcwd_detection_ms,
                    restoration_time: self.pfcwd_restoration_ms,
                },
                queue,
            },
            wred_profile,
            pfcwd: Pfcwd {
                poll_interval: self.pfcwd_poll_ms,
                big_red_switch: false,
            },
            routing: self.ecmp_hash_seed.map(|seed| Routing {
                ecmp_hash_seed: seed,
            }),
            headroom_calc: HeadroomCalc {
                software_latency_kib: FABRIC_SOFTWARE_LATENCY_KIB,
            },
            runtime: Runtime {
                // Adaptive: an idle lcore sleeps (at most 200 µs, on its sockets) instead of
                // spinning; six switches share two CPUs with the kernel's veth work.
                polling: "adaptive",
                burst_size: 32,
                control_socket: control_socket(&plan.spec.prefix, &switch.name)
                    .display()
                    .to_string(),
                prometheus_listen: format!("127.0.0.1:{}", switch.metrics_port),
                lcore: vec![Lcore {
                    cpu: m % self.cpus,
                    rx_ports: names.clone(),
                    tx_ports: names,
                }],
            },
            port,
        }
    }

    /// The configuration of `switch` as TOML, with a header saying where it comes from.
    ///
    /// # Errors
    /// When serialisation fails (it does not for these types).
    pub fn toml(&self, plan: &Plan, switch: &Switch) -> Result<String, String> {
        let body = toml::to_string(&self.document(plan, switch)).map_err(|e| e.to_string())?;
        let role = match switch.role {
            Role::Spine => "spine",
            Role::Leaf => "leaf",
        };
        Ok(format!(
            "# Generated by `headroom lab fabric --prefix {p}` for {role} {name} (namespace {ns}).\n\
             # The template every switch of the fabric shares: PFC on priorities 3 and 4, ECN on\n\
             # queues 3 and 4, the PFC watchdog on. Port EthernetK opens device swp(K+1); see\n\
             # docs/fabric.md.\n\n{body}",
            p = plan.spec.prefix,
            name = switch.name,
            ns = switch.namespace,
        ))
    }
}

/// The fabric's run-time directory: configurations, sockets, the plan.
#[must_use]
pub fn fabric_dir(prefix: &str) -> PathBuf {
    PathBuf::from(format!("{RUN_DIR}/{prefix}-fabric"))
}

/// Switch `name`'s configuration file.
#[must_use]
pub fn config_path(prefix: &str, name: &str) -> PathBuf {
    fabric_dir(prefix).join(format!("{name}.toml"))
}

/// Switch `name`'s control socket.
#[must_use]
pub fn control_socket(prefix: &str, name: &str) -> PathBuf {
    fabric_dir(prefix).join(format!("{name}.sock"))
}

/// A headroom configuration file (the keys of docs/config.md that the fabric sets).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Document {
    /// `[switch]`.
    pub switch: SwitchSection,
    /// `[port_defaults]`.
    pub port_defaults: PortDefaults,
    /// `[wred_profile.NAME]`.
    pub wred_profile: IndexMap<String, Wred>,
    /// `[pfcwd]`.
    pub pfcwd: Pfcwd,
    /// `[routing]` (only when the seed is forced).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// `[headroom_calc]`.
    pub headroom_calc: HeadroomCalc,
    /// `[runtime]`.
    pub runtime: Runtime,
    /// `[port.NAME]`, in port order.
    pub port: IndexMap<String, PortEntry>,
}

/// `[switch]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SwitchSection {
    /// `name`.
    pub name: String,
    /// `driver`.
    pub driver: &'static str,
    /// `mac`.
    pub mac: String,
    /// `ecn_seed`.
    pub ecn_seed: u64,
    /// `pfc_storm_alarm_frames_per_second`.
    pub pfc_storm_alarm_frames_per_second: u64,
    /// `log_format`.
    pub log_format: &'static str,
}

/// `[port_defaults]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortDefaults {
    /// `speed`.
    pub speed: String,
    /// `cable_length`.
    pub cable_length: &'static str,
    /// `mtu`.
    pub mtu: u32,
    /// `trust`.
    pub trust: &'static str,
    /// `pfc_enable`.
    pub pfc_enable: Vec<u8>,
    /// `vlan_mode`.
    pub vlan_mode: &'static str,
    /// `[port_defaults.pfcwd]`.
    pub pfcwd: PortPfcwd,
    /// `[port_defaults.queue."3-4"]`.
    pub queue: IndexMap<String, QueueEntry>,
}

/// `[port_defaults.pfcwd]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortPfcwd {
    /// `enabled`.
    pub enabled: bool,
    /// `action`.
    pub action: &'static str,
    /// `detection_time`, ms.
    pub detection_time: u32,
    /// `restoration_time`, ms.
    pub restoration_time: u32,
}

/// `[port_defaults.queue."N-M"]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct QueueEntry {
    /// `scheduler`.
    pub scheduler: &'static str,
    /// `wred_profile` (empty: none).
    pub wred_profile: &'static str,
}

/// `[wred_profile.NAME]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Wred {
    /// `ecn`.
    pub ecn: &'static str,
    /// `wred_green_enable`.
    pub wred_green_enable: bool,
    /// `green_min_threshold`, bytes.
    pub green_min_threshold: u64,
    /// `green_max_threshold`, bytes.
    pub green_max_threshold: u64,
    /// `green_drop_probability`, percent.
    pub green_drop_probability: u8,
}

/// `[pfcwd]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pfcwd {
    /// `poll_interval`, ms.
    pub poll_interval: u32,
    /// `big_red_switch`.
    pub big_red_switch: bool,
}

/// `[headroom_calc]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HeadroomCalc {
    /// `software_latency_kib`.
    pub software_latency_kib: f64,
}

/// `[routing]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Routing {
    /// `ecmp_hash_seed`.
    pub ecmp_hash_seed: u32,
}

/// `[runtime]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Runtime {
    /// `polling`.
    pub polling: &'static str,
    /// `burst_size`.
    pub burst_size: u32,
    /// `control_socket`.
    pub control_socket: String,
    /// `prometheus_listen`.
    pub prometheus_listen: String,
    /// `[[runtime.lcore]]`.
    pub lcore: Vec<Lcore>,
}

/// `[[runtime.lcore]]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Lcore {
    /// `cpu`.
    pub cpu: usize,
    /// `rx_ports`.
    pub rx_ports: Vec<String>,
    /// `tx_ports`.
    pub tx_ports: Vec<String>,
}

/// `[port.NAME]`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PortEntry {
    /// `device`.
    pub device: String,
}

#[cfg(test)]
mod tests {
    use super::super::plan::FabricSpec;
    use super::*;

    fn parse(text: &str) -> headroom_config::Config {
        let (config, warnings) =
            headroom_config::parse(text, "generated").unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert!(warnings.is_empty(), "{warnings:?}\n{text}");
        config
    }

    #[test]
    fn every_switch_gets_the_shared_template_and_its_own_ports() {
        for (spines, leaves, hosts) in [(2, 2, 2), (2, 4, 2), (1, 2, 1), (4, 8, 4)] {
            let plan = FabricSpec::new("fab", spines, leaves, hosts).plan();
            let template = SwitchTemplate::new("100M", 2);
            for (m, switch) in plan.switches.iter().enumerate() {
                let config = parse(&template.toml(&plan, switch).unwrap());
                assert_eq!(config.switch.name, format!("fab-{}", switch.name));
                assert_eq!(config.switch.mac, switch.mac);
                assert_eq!(config.ports.len(), switch.ports.len());
                assert!(
                    (config.headroom_calc.constants.software_latency_kib
                        - FABRIC_SOFTWARE_LATENCY_KIB)
                        .abs()
                        < f64::EPSILON
                );
                for (port, planned) in config.ports.iter().zip(&switch.ports) {
                    // Ethernet{k} on swp{k+1}, in order.
                    assert_eq!(port.name, planned.name);
                    assert_eq!(port.device, planned.device);
                    assert_eq!(port.speed_mbps, 100);
                    // The template: PFC on 3 and 4, ECN on queues 3 and 4 only, watchdog on.
                    assert_eq!(port.pfc_enable.0, 0b1_1000, "{}", port.name);
                    for (q, queue) in port.queues.iter().enumerate() {
                        assert_eq!(queue.wred.is_some(), q == 3 || q == 4, "queue {q}");
                    }
                    assert!(port.pfcwd.enabled);
                    assert_eq!(port.pfcwd.detection_time_ms, 200);
                    assert_eq!(port.vlan, headroom_config::Vlan::Routed, "{}", port.name);
                }
                assert_eq!(
                    config.runtime.control_socket,
                    control_socket("fab", &switch.name)
                );
                assert_eq!(
                    config.runtime.prometheus_listen.map(|a| a.port()),
                    Some(switch.metrics_port)
                );
                assert_eq!(config.runtime.lcores.len(), 1);
                assert_eq!(config.runtime.lcores[0].cpu, m % 2);
            }
        }
    }

    #[test]
    fn one_ecmp_seed_for_every_switch_or_each_its_own() {
        let plan = FabricSpec::new("fab", 2, 2, 1).plan();
        let mut template = SwitchTemplate::new("100M", 2);
        let seeds = |t: &SwitchTemplate| -> Vec<u32> {
            plan.switches
                .iter()
                .map(|s| parse(&t.toml(&plan, s).unwrap()).routing.ecmp_hash_seed)
                .collect()
        };
        let own = seeds(&template);
        let distinct: std::collections::BTreeSet<u32> = own.iter().copied().collect();
        assert_eq!(distinct.len(), 4, "{own:?}");
        template.ecmp_hash_seed = Some(7);
        assert_eq!(seeds(&template), [7, 7, 7, 7]);
    }

    #[test]
    fn ecn_off_leaves_pfc_as_the_only_signal() {
        let plan = FabricSpec::new("fab", 2, 2, 2).plan();
        let mut template = SwitchTemplate::new("1G", 1);
        template.ecn = None;
        let config = parse(&template.toml(&plan, &plan.switches[2]).unwrap());
        for port in &config.ports {
            assert!(port.queues.iter().all(|q| q.wred.is_none()));
            assert_eq!(port.pfc_enable.0, 0b1_1000);
            assert_eq!(port.speed_mbps, 1000);
        }
    }

    #[test]
    fn a_bad_speed_is_refused_by_the_configuration_parser() {
        let plan = FabricSpec::new("fab", 1, 1, 1).plan();
        let text = SwitchTemplate::new("fast", 1)
            .toml(&plan, &plan.switches[0])
            .unwrap();
        let e = headroom_config::parse(&text, "g").unwrap_err();
        assert!(
            e.errors.iter().any(|d| d.key == "port_defaults.speed"),
            "{e}"
        );
    }
}
