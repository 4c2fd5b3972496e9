//! The lab's names and its generated switch configuration.
//!
//! Pure functions and data only (no I/O, nothing from the rest of the crate), so that the
//! end-to-end tests include this file (`#[path]`) and build exactly the names and configuration
//! `headroom lab` builds, with their own overrides.
//!
//! Layout of a lab with prefix `P` (default `hr`) and N hosts:
//!
//! | What | Name |
//! |---|---|
//! | switch namespace | `P-sw`, holding the switch ends `sw-p0` .. `sw-p{N-1}` (no IP address) |
//! | host namespace i | `P-h{i}`, holding `eth0`, the far end of `sw-p{i}` |
//! | host i's address | `10.0.0.{i+1}/24`, MAC `02:68:68:00:00:{i+1}` |
//! | switch port i | `Ethernet{i}` on device `sw-p{i}` |
//! | generated configuration | `/run/headroom/P-lab.toml`, switch name `P-lab` |

use std::fmt::Write as _;

/// The default name prefix.
pub const DEFAULT_PREFIX: &str = "hr";
/// The default number of hosts.
pub const DEFAULT_HOSTS: usize = 4;
/// The default link speed: slow enough that software traffic congests it.
pub const DEFAULT_SPEED: &str = "1G";
/// The most hosts a lab has (addresses 10.0.0.1 .. 10.0.0.64).
pub const MAX_HOSTS: usize = 64;
/// The host end of every pair, inside its host namespace.
pub const HOST_DEVICE: &str = "eth0";
/// The hosts' subnet length.
pub const HOST_PREFIX_LEN: u8 = 24;
/// The MTU of the veth pairs and of the switch ports (the frame pool holds 2048-byte frames, so
/// jumbo frames are out of reach of the AF_PACKET backend anyway).
pub const MTU_BYTES: u32 = 1500;
/// Directory of generated configurations (the control sockets live there too).
pub const RUN_DIR: &str = "/run/headroom";
/// Where the first lab's Prometheus exporter listens (127.0.0.1); later labs take the next
/// free ports.
pub const DEFAULT_METRICS_PORT: u16 = 9464;

/// ECN marking thresholds of the lossless queues (`WRED_PROFILE` green values).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EcnThresholds {
    /// Queue length where marking starts, bytes.
    pub min_bytes: u64,
    /// Queue length where the probability reaches `probability_percent`, bytes.
    pub max_bytes: u64,
    /// Marking probability at `max_bytes`, percent.
    pub probability_percent: u8,
}

impl EcnThresholds {
    /// The lab's default (as `config/lab.toml`): marking between 100 KB and 400 KB of queue, well
    /// below the XOFF point of the lossless PGs, so ECN acts before PFC.
    pub const LAB: Self = Self {
        min_bytes: 102_400,
        max_bytes: 409_600,
        probability_percent: 10,
    };
}

/// Which header the switch ports classify frames by (`port_defaults.trust`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabTrust {
    /// IP DSCP through SONiC's AZURE DSCP_TO_TC_MAP (DSCP 3 and 4 are the lossless classes).
    Dscp,
    /// The 802.1Q PCP through the DOT1P_TO_TC_MAP (PCP 3 and 4 are the lossless classes).
    Dot1p,
}

impl LabTrust {
    /// The configuration's spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Dscp => "dscp",
            Self::Dot1p => "dot1p",
        }
    }
}

/// What a lab is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabSpec {
    /// Prefix of every namespace name (see [`check_prefix`]).
    pub prefix: String,
    /// Number of hosts, 2..=[`MAX_HOSTS`].
    pub hosts: usize,
    /// Port speed as the configuration writes it (`"1G"`, `"100M"`, `1000`): the switch shapes
    /// every port to it.
    pub speed: String,
    /// ECN thresholds of the lossless queues 3 and 4.
    pub ecn: EcnThresholds,
    /// Whether the lossless queues mark CE at all (false: no WRED profile on them, so PFC is
    /// the only congestion signal).
    pub ecn_enabled: bool,
    /// What every port trusts.
    pub trust: LabTrust,
    /// CPU of the switch's single lcore (and of EAL's main lcore with DPDK): by default the
    /// lowest CPU of this process's affinity mask, so that a lab under `taskset` or a cpuset
    /// loads.
    pub cpu: usize,
    /// How the switch reaches its ports.
    pub driver: LabDriver,
    /// Port of the switch's Prometheus exporter on 127.0.0.1 (`runtime.prometheus_listen`).
    pub metrics_port: u16,
    /// Static MAC table entries for the hosts (`[[fdb.static]]`), so that traffic to a host
    /// that never sends is not flooded.
    pub static_fdb: bool,
    /// The switch runs its LLDP/DCBX agent on every port (`[lldp] enabled`): it advertises
    /// the ports' PFC, ETS and RoCE priority to the hosts (`headroom show lldp neighbors`,
    /// `headroom show dcbx`).
    pub lldp: bool,
}

/// How the lab's switch reaches its veth ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum LabDriver {
    /// Linux AF_PACKET sockets (the default; works without DPDK).
    #[default]
    Afpacket,
    /// DPDK's net_af_packet vdevs (a build with `--features dpdk`).
    Dpdk,
    /// DPDK's net_af_xdp vdevs (a build with `--features dpdk`).
    DpdkAfXdp,
}

impl LabSpec {
    /// The default lab: prefix `hr`, 4 hosts, 1G.
    #[must_use]
    pub fn new(prefix: &str, hosts: usize, speed: &str) -> Self {
        Self {
            prefix: prefix.to_owned(),
            hosts,
            speed: speed.to_owned(),
            ecn: EcnThresholds::LAB,
            ecn_enabled: true,
            trust: LabTrust::Dscp,
            cpu: headroom_config::allowed_cpus()
                .first()
                .copied()
                .unwrap_or(0),
            driver: LabDriver::Afpacket,
            metrics_port: DEFAULT_METRICS_PORT,
            static_fdb: true,
            lldp: true,
        }
    }

    /// Checks the prefix, host count and speed syntax (the speed's value is checked by the
    /// configuration parser).
    ///
    /// # Errors
    /// A message naming the bad argument.
    pub fn check(&self) -> Result<(), String> {
        check_prefix(&self.prefix)?;
        if !(2..=MAX_HOSTS).contains(&self.hosts) {
            return Err(format!(
                "--hosts {}: a lab has 2..={MAX_HOSTS} hosts",
                self.hosts
            ));
        }
        let speed_ok = !self.speed.is_empty()
            && self.speed.len() <= 16
            && self
                .speed
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'/');
        if !speed_ok {
            return Err(format!(
                "--speed {:?}: write Mb/s (1000) or a number with M or G (\"100M\", \"1G\", \"2.5G\")",
                self.speed
            ));
        }
        Ok(())
    }

    /// The switch's namespace.
    #[must_use]
    pub fn switch_namespace(&self) -> String {
        switch_namespace(&self.prefix)
    }

    /// Host `i`'s namespace.
    #[must_use]
    pub fn host_namespace(&self, i: usize) -> String {
        host_namespace(&self.prefix, i)
    }

    /// The switch's name in the generated configuration.
    #[must_use]
    pub fn switch_name(&self) -> String {
        format!("{}-lab", self.prefix)
    }

    /// Where `headroom lab` writes the generated configuration by default.
    #[must_use]
    pub fn default_config_path(&self) -> String {
        format!("{RUN_DIR}/{}-lab.toml", self.prefix)
    }

    /// The switch configuration of this lab (TOML, documented in docs/config.md).
    #[must_use]
    pub fn config_toml(&self) -> String {
        let mut t = String::new();
        let ports: Vec<String> = (0..self.hosts)
            .map(|i| format!("{:?}", port_name(i)))
            .collect();
        let ports = ports.join(", ");
        // Writing into a String cannot fail.
        let _ = write!(
            t,
            r#"# Generated by `headroom lab` for the lab {prefix:?}: {hosts} hosts, {speed} ports.
# Host i sits in namespace {prefix}-h<i> on {host_dev} (10.0.0.<i+1>/24); the switch opens
# sw-p<i> in namespace {prefix}-sw. Edit and reload with SIGHUP, or run it with
# `headroom lab --prefix {prefix} --config FILE`.

[switch]
name = "{name}"
driver = "{driver}"
mac = "02:68:72:00:00:00"
ecn_seed = 42
pfc_storm_alarm_frames_per_second = 2000
log_format = "text"

[port_defaults]
speed = "{speed}"
cable_length = "5m"
mtu = {mtu}
trust = "{trust}"
pfc_enable = [3, 4]
vlan_mode = "access"
access_vlan = 1

[port_defaults.pfcwd]
enabled = true
action = "drop"
detection_time = 200
restoration_time = 200

{wred_section}
[port_defaults.queue."3-4"]
scheduler = "scheduler.1"
wred_profile = "{wred}"

[pfcwd]
poll_interval = 200
big_red_switch = false

# LLDP with the 802.1Qaz DCBX TLVs on every port: a willing host (lldpad) adopts pfc_enable.
[lldp]
enabled = {lldp}

[runtime]
polling = "adaptive"
burst_size = 32
prometheus_listen = "127.0.0.1:{metrics_port}"

[[runtime.lcore]]
cpu = {cpu}
rx_ports = [{ports}]
tx_ports = [{ports}]
"#,
            prefix = self.prefix,
            hosts = self.hosts,
            speed = self.speed,
            host_dev = HOST_DEVICE,
            name = self.switch_name(),
            mtu = MTU_BYTES,
            cpu = self.cpu,
            driver = if self.driver == LabDriver::Afpacket {
                "afpacket"
            } else {
                "dpdk"
            },
            trust = self.trust.as_str(),
            wred_section = self.wred_section(),
            wred = if self.ecn_enabled { "LAB_LOSSLESS" } else { "" },
            metrics_port = self.metrics_port,
            lldp = self.lldp,
        );
        if let Some(vdev) = self.dpdk_vdev() {
            let ifaces: Vec<String> = (0..self.hosts).map(switch_device).collect();
            let ifaces: Vec<&str> = ifaces.iter().map(String::as_str).collect();
            let eal = headroom_dpdk::lab::lab_eal_args(
                &ifaces,
                vdev,
                &format!("{}-sw", self.prefix),
                self.cpu,
            );
            let eal: Vec<String> = eal.iter().map(|a| format!("{a:?}")).collect();
            let _ = write!(
                t,
                "\n# DPDK: one vdev per switch-side veth, no hugepages.\n[dpdk]\neal_args = [{}]\nmempool_mbufs = {}\nmempool_cache_size = 256\n",
                eal.join(", "),
                headroom_dpdk::lab::lab_mempool_mbufs(vdev, self.hosts)
            );
        }
        for i in 0..self.hosts {
            let device = self
                .dpdk_vdev()
                .map_or_else(|| switch_device(i), |v| v.device_name(i));
            let _ = write!(t, "\n[port.{}]\ndevice = \"{}\"\n", port_name(i), device);
        }
        if self.static_fdb {
            // A host that only receives never sends (permanent neighbours, no IPv6): the switch
            // would never learn it and would flood every frame to it to all ports, charging each
            // copy to the ingress PG. The lab knows where its hosts are.
            let _ = write!(
                t,
                "\n# The hosts, where the lab wired them: never aged, never flooded to.\n"
            );
            for i in 0..self.hosts {
                let _ = write!(
                    t,
                    "[[fdb.static]]\nmac = \"{}\"\nport = \"{}\"\n",
                    mac_text(host_mac(i)),
                    port_name(i)
                );
            }
        }
        t
    }

    /// The DPDK vdev kind, when the lab runs on DPDK.
    #[must_use]
    pub fn dpdk_vdev(&self) -> Option<headroom_dpdk::lab::LabVdev> {
        match self.driver {
            LabDriver::Afpacket => None,
            LabDriver::Dpdk => Some(headroom_dpdk::lab::LabVdev::AfPacket),
            LabDriver::DpdkAfXdp => Some(headroom_dpdk::lab::LabVdev::AfXdp),
        }
    }
}

impl LabSpec {
    /// The WRED profile of the lossless queues, or a note that they mark nothing.
    fn wred_section(&self) -> String {
        if !self.ecn_enabled {
            return "# No ECN marking: the lossless queues bind no WRED profile, so PFC is the only\n\
                    # congestion signal.\n"
                .to_owned();
        }
        format!(
            "# ECN on the lossless queues, ahead of PFC (see `headroom check`).
[wred_profile.LAB_LOSSLESS]
ecn = \"ecn_all\"
wred_green_enable = false
green_min_threshold = {}
green_max_threshold = {}
green_drop_probability = {}
",
            self.ecn.min_bytes, self.ecn.max_bytes, self.ecn.probability_percent
        )
    }
}

/// Checks a name prefix: 1..=16 characters of `a-z 0-9 -`, starting with a letter (it becomes
/// part of namespace names and of the switch name).
///
/// # Errors
/// A message saying what is allowed.
pub fn check_prefix(prefix: &str) -> Result<(), String> {
    let ok = (1..=16).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "--prefix {prefix:?}: 1 to 16 characters a-z, 0-9 or '-', starting with a letter"
        ))
    }
}

/// The switch's namespace of the lab `prefix`.
#[must_use]
pub fn switch_namespace(prefix: &str) -> String {
    format!("{prefix}-sw")
}

/// Host `i`'s namespace of the lab `prefix`.
#[must_use]
pub fn host_namespace(prefix: &str, i: usize) -> String {
    format!("{prefix}-h{i}")
}

/// Whether `namespace` is one of the lab `prefix`'s namespaces (`P-sw` or `P-h<digits>`).
#[must_use]
pub fn is_lab_namespace(prefix: &str, namespace: &str) -> bool {
    match namespace.strip_prefix(prefix) {
        Some("-sw") => true,
        Some(rest) => rest
            .strip_prefix("-h")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// The switch's end of host `i`'s pair (in the switch namespace).
#[must_use]
pub fn switch_device(i: usize) -> String {
    format!("sw-p{i}")
}

/// Switch port `i`'s name in the configuration.
#[must_use]
pub fn port_name(i: usize) -> String {
    format!("Ethernet{i}")
}

/// Host `i`'s IPv4 address.
#[must_use]
pub fn host_ipv4(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 0, 0, u8::try_from(i + 1).unwrap_or(u8::MAX))
}

/// Host `i`'s RoCE GID for RoCEv2 over IPv6 (`headroom lab incast --ipv6`): `fd00::` + the host
/// number + 1, as its IPv4 address. The hosts' kernels have IPv6 off; rocegen needs none (it
/// sends through AF_PACKET and learns MACs out of band).
#[must_use]
pub fn host_gid(i: usize) -> std::net::Ipv6Addr {
    std::net::Ipv6Addr::new(
        0xfd00,
        0,
        0,
        0,
        0,
        0,
        0,
        u16::try_from(i + 1).unwrap_or(u16::MAX),
    )
}

/// Host `i`'s MAC address: locally administered, `02:68:68` ("hh") then the host number + 1.
#[must_use]
pub fn host_mac(i: usize) -> [u8; 6] {
    [
        0x02,
        0x68,
        0x68,
        0,
        0,
        u8::try_from(i + 1).unwrap_or(u8::MAX),
    ]
}

/// A MAC address as `ip` writes it.
#[must_use]
pub fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
