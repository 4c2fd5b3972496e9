//! The resolved configuration: every default applied, every name resolved, every range expanded.
//!
//! Everything the switch needs per port, per priority group (0..=7) and per queue (0..=7) is here
//! directly, in bytes, bits per second and milliseconds as the field names say. Names of pools,
//! profiles, maps, schedulers and WRED profiles are kept for display and counters only.

use std::net::SocketAddr;
use std::path::PathBuf;

use headroom_core::types::PortId;

use crate::headroom::{HeadroomConstants, HeadroomValues};

/// Priorities, traffic classes, priority groups and queues per port.
pub const PRIORITY_COUNT: usize = 8;

/// DSCP code points (6 bits).
pub const DSCP_COUNT: usize = 64;

/// The resolved configuration of one switch.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// File name the configuration was read from (as given to `load`/`parse`).
    pub file: String,
    /// Switch-wide settings.
    pub switch: Switch,
    /// Constants of the headroom formula.
    pub headroom_calc: HeadroomCalc,
    /// Buffer pools, referred to by index from [`BufferProfile::pool_index`]. Built-in pools that no
    /// profile in use refers to are left out.
    pub pools: Vec<BufferPool>,
    /// Ports in file order; a port's index here is its port id.
    pub ports: Vec<Port>,
    /// Global PFC watchdog settings.
    pub pfcwd: PfcWdGlobal,
    /// Threads and control/monitoring endpoints.
    pub runtime: Runtime,
    /// DPDK settings (defaults when `[dpdk]` is absent; only used by the `dpdk` driver).
    pub dpdk: Dpdk,
    /// The LLDP/DCBX agent.
    pub lldp: Lldp,
    /// Static MAC table entries (`[[fdb.static]]`), in file order.
    pub fdb_static: Vec<StaticFdb>,
    /// Test and drill settings (`[testing]`); all off by default.
    pub testing: Testing,
    /// The FIB and the netlink mirror (`[routing]`).
    pub routing: Routing,
    /// `[vlan_interface.VlanN]`: VLAN interfaces (SVIs), in file order.
    pub vlan_interfaces: Vec<VlanInterface>,
}

/// `[routing]`: the FIB the kernel's routes are mirrored into (crates/linux-cp), and the ECMP
/// hash. Used only when a port is routed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routing {
    /// ECMP hash seed (SONiC's `ecmp_hash_seed`). Default: derived from `switch.name` and
    /// `switch.mac`, so that two switches of a fabric hash differently (a tier that hashes like
    /// the one before it sends all its flows of a group to one member: polarisation).
    pub ecmp_hash_seed: u32,
    /// ECMP hash function.
    pub ecmp_hash_algorithm: EcmpHashAlgorithm,
    /// Bits the hash is rotated right before a member is chosen, 0..=31.
    pub ecmp_hash_rotation: u8,
    /// Buckets per ECMP group (a power of two, 2..=4096; also the most members a group has).
    pub ecmp_group_buckets: u32,
    /// First-level width of the IPv4 LPM, bits (8, 16 or 24; 24 is DIR-24-8, 64 MiB per copy).
    pub ipv4_lpm_top_bits: u8,
    /// First-level width of the IPv6 LPM, bits (8, 16 or 24).
    pub ipv6_lpm_top_bits: u8,
    /// Most IPv4 routes.
    pub max_ipv4_routes: u32,
    /// Most IPv6 routes.
    pub max_ipv6_routes: u32,
    /// Most 256-entry groups below the IPv4 first level (1 KiB each, per FIB copy).
    pub max_ipv4_lpm_groups: u32,
    /// Most 256-entry groups below the IPv6 first level (1 KiB each, per FIB copy).
    pub max_ipv6_lpm_groups: u32,
    /// Most next hops (neighbours), the three fixed ones included.
    pub max_next_hops: u32,
    /// Most ECMP groups.
    pub max_ecmp_groups: u32,
    /// Receive buffer of the netlink notification socket, bytes. A burst of route changes
    /// beyond it is an overrun, repaired by a full resync (counted).
    pub netlink_receive_buffer_bytes: u32,
}

/// ECMP hash function (`routing.ecmp_hash_algorithm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcmpHashAlgorithm {
    /// SipHash-1-3 keyed by the seed (`"siphash"`).
    SipHash,
    /// CRC-32 with the seed as initial value (`"crc32"`).
    Crc32,
}

/// A VLAN interface (SVI; SONiC's `VLAN_INTERFACE|Vlan1000`): the router's interface in an L2
/// VLAN. Frames to its MAC on the VLAN's member ports are routed; the hosts' gateway address is
/// the kernel's, on its host interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VlanInterface {
    /// `VlanN`, as SONiC names it.
    pub name: String,
    /// N: the VLAN, 1..=4094.
    pub vlan_id: u16,
    /// Its router MAC (default: the switch's MAC, as SONiC's SVIs share the system MAC).
    pub mac: [u8; 6],
}

/// A static MAC table entry (IEEE 802.1Q 8.8.1 static filtering entry; SONiC's static FDB):
/// frames to `mac` in `vlan_id` go to `port`, never flooded, never aged, not moved by learning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaticFdb {
    /// Station address (unicast).
    pub mac: [u8; 6],
    /// VLAN, 1..=4094.
    pub vlan_id: u16,
    /// Index of the port in [`Config::ports`].
    pub port: usize,
}

/// `[testing]`: for tests and fault drills, never for a production switch.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Testing {
    /// `[testing.fault_injection]`, when present and acknowledged.
    pub fault_injection: Option<FaultInjection>,
}

/// `[testing.fault_injection]`: the ports' frames are dropped, corrupted, truncated,
/// duplicated, reordered and delayed, transmit queues stall and links flap, from a seed
/// (`headroom_io::fault`). It breaks traffic on purpose.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultInjection {
    /// Seed of the fault generators.
    pub seed: u64,
    /// The ports (indices into [`Config::ports`]) with faults.
    pub ports: Vec<usize>,
    /// Faults of received frames.
    pub rx: FrameFaults,
    /// Faults of transmitted frames.
    pub tx: FrameFaults,
    /// Transmit stalls per second, on average.
    pub tx_stalls_per_second: f64,
    /// How long a stall lasts, ns.
    pub tx_stall_ns: u64,
    /// Link flaps per second, on average.
    pub link_flaps_per_second: f64,
    /// How long a flapped link stays down, ns.
    pub link_down_ns: u64,
    /// Frames a port's fault injector may hold back at once (duplicates, reordered, delayed).
    pub hold_frames: usize,
}

/// Per-frame fault probabilities of one direction (their sum is at most 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FrameFaults {
    /// The frame is lost.
    pub drop_rate: f64,
    /// 1 to 3 bits of the frame are flipped (half the flips in its first 64 bytes).
    pub corrupt_rate: f64,
    /// The frame is cut short.
    pub truncate_rate: f64,
    /// The frame arrives twice.
    pub duplicate_rate: f64,
    /// The frame is overtaken by the frames behind it.
    pub reorder_rate: f64,
    /// The frame is held back up to `delay_max_ns`.
    pub delay_rate: f64,
    /// Longest delay, ns.
    pub delay_max_ns: u64,
}

/// `[lldp]`: the LLDP (IEEE 802.1AB-2016) and DCBX (IEEE 802.1Qaz) agent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lldp {
    /// The default admin status of every port: `true` = send and receive
    /// ([`LldpAdminStatus::RxAndTx`]), `false` = [`LldpAdminStatus::Disabled`].
    pub enabled: bool,
    /// Seconds between LLDPDUs (802.1AB msgTxInterval).
    pub tx_interval_s: u16,
    /// TTL multiplier (msgTxHold): the advertised TTL is `tx_interval_s × tx_hold` (at most 65535).
    pub tx_hold: u8,
    /// LLDPDUs sent at `tx_fast_interval_s` when a port comes up or a new neighbour appears
    /// (txFastInit); 0 = no fast transmission.
    pub tx_fast_init: u8,
    /// Seconds between those fast LLDPDUs (msgFastTx).
    pub tx_fast_interval_s: u16,
    /// System Name TLV.
    pub system_name: String,
    /// System Description TLV.
    pub system_description: String,
    /// Priority of the RoCEv2 (UDP 4791) Application Priority entry; `None` = each port's lowest
    /// PFC-enabled priority (no entry on a port without PFC).
    pub roce_priority: Option<u8>,
}

impl Lldp {
    /// The TTL the LLDPDUs advertise, seconds: `tx_interval_s × tx_hold`, at most 65535.
    #[must_use]
    pub fn ttl_s(&self) -> u16 {
        u16::try_from(u32::from(self.tx_interval_s) * u32::from(self.tx_hold)).unwrap_or(u16::MAX)
    }
}

/// A port's LLDP admin status (802.1AB-2016 9.2.5.1 `adminStatus`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LldpAdminStatus {
    /// Send and receive (enabledRxTx).
    RxAndTx,
    /// Send only (enabledTxOnly).
    TxOnly,
    /// Receive only (enabledRxOnly).
    RxOnly,
    /// Neither; LLDP frames received are still never forwarded.
    Disabled,
}

impl LldpAdminStatus {
    /// LLDPDUs are sent.
    #[must_use]
    pub const fn transmits(self) -> bool {
        matches!(self, Self::RxAndTx | Self::TxOnly)
    }

    /// Received LLDPDUs are decoded into the neighbour table.
    #[must_use]
    pub const fn receives(self) -> bool {
        matches!(self, Self::RxAndTx | Self::RxOnly)
    }

    /// The configuration spelling: `rx_and_tx`, `tx_only`, `rx_only`, `disabled`.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::RxAndTx => "rx_and_tx",
            Self::TxOnly => "tx_only",
            Self::RxOnly => "rx_only",
            Self::Disabled => "disabled",
        }
    }
}

/// Which I/O backend runs the ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Driver {
    /// Linux AF_PACKET sockets on network interfaces.
    AfPacket,
    /// DPDK ethdev ports (PCI devices or vdevs).
    Dpdk,
    /// In-memory ports (tests, simulation).
    Memory,
}

/// Log line format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    /// Human-readable text.
    Text,
    /// One JSON object per line.
    Json,
}

/// Log verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    /// Errors only.
    Error,
    /// Warnings and errors.
    Warn,
    /// Informational messages and above.
    Info,
    /// Debug messages and above.
    Debug,
    /// Everything.
    Trace,
}

/// `[switch]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Switch {
    /// Instance name (control socket name, metrics label).
    pub name: String,
    /// Buffer accounting cell, bytes: a frame of `n` bytes occupies `ceil(n / cell)` cells.
    pub cell_size_bytes: u32,
    /// Total packet memory used to size the built-in pools, bytes.
    pub buffer_size_bytes: u64,
    /// Seed of the ECN/WRED marking random number generator.
    pub ecn_seed: u64,
    /// MAC table aging time, seconds; 0: stations are never aged out.
    pub fdb_aging_s: u32,
    /// Base MAC address of the switch.
    pub mac: [u8; 6],
    /// I/O backend.
    pub driver: Driver,
    /// Received PFC frames per second on one port and priority above which a storm alarm is
    /// raised.
    pub pfc_storm_alarm_frames_per_second: u32,
    /// Log format.
    pub log_format: LogFormat,
    /// Log level.
    pub log_level: LogLevel,
    /// SONiC `DEVICE_METADATA|localhost.platform` (informational; `config import-sonic` takes
    /// the ASIC's cell size from it).
    pub platform: Option<String>,
    /// SONiC `DEVICE_METADATA|localhost.hwsku` (informational).
    pub hwsku: Option<String>,
}

/// `[headroom_calc]`: inputs of the headroom formula besides the port.
#[derive(Clone, Debug, PartialEq)]
pub struct HeadroomCalc {
    /// ASIC/software constants and traffic pattern (`shared_headroom_pool` is the resolved SHP
    /// state).
    pub constants: HeadroomConstants,
    /// SHP over-subscription: SHP size = Σ lossless PG xoff / ratio when the pool's `xoff` is not
    /// given (`DEFAULT_LOSSLESS_BUFFER_PARAMETER.over_subscribe_ratio`).
    pub over_subscribe_ratio: u32,
    /// `dynamic_th` of the computed lossless profiles (`default_dynamic_th`).
    pub default_dynamic_th: i8,
    /// Pool of the computed lossless profiles.
    pub lossless_pool: String,
    /// Profile xoff below the computed minimum is a warning instead of an error.
    pub allow_headroom_below_minimum: bool,
}

/// Direction of a pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolDirection {
    /// Ingress accounting: priority groups.
    Ingress,
    /// Egress accounting: queues.
    Egress,
}

/// Threshold mode of a pool (every profile of the pool uses `<mode>_th`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdMode {
    /// `static_th`: absolute shared-buffer limit.
    Static,
    /// `dynamic_th`: α = 2^n of the free shared buffer.
    Dynamic,
}

/// A resolved buffer pool (`BUFFER_POOL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPool {
    /// Pool name.
    pub name: String,
    /// Ingress or egress.
    pub direction: PoolDirection,
    /// Threshold mode of its profiles.
    pub mode: ThresholdMode,
    /// Pool size, bytes (`size`), including the SHP.
    pub size_bytes: u64,
    /// Shared headroom pool, bytes (`xoff`); 0 = no SHP (each lossless PG has private headroom).
    pub shared_headroom_pool_bytes: u64,
    /// Σ `size` of every PG/queue (over all ports) bound to a profile of this pool, bytes.
    pub reserved_bytes: u64,
    /// Σ `xoff` of the lossless PGs bound to this pool when it has no SHP, else 0, bytes.
    pub private_headroom_bytes: u64,
    /// Shared buffer = size − reserved − (SHP if > 0, else private headroom), bytes.
    pub shared_bytes: u64,
}

/// The shared-buffer threshold of a profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    /// `dynamic_th` n in -8..=7: may use α = 2^n times the free shared buffer of the pool.
    Dynamic {
        /// The exponent n.
        dynamic_th: i8,
    },
    /// `static_th`: may use this many shared bytes; 0 = no limit (SAI).
    Static {
        /// The limit, bytes.
        static_th_bytes: u64,
    },
}

impl Threshold {
    /// The shared bytes this PG/queue may use when it is the only congested one in a pool with
    /// `shared_bytes` of shared buffer: α/(1+α) × shared for dynamic thresholds (the steady state
    /// SONiC's tests predict), min(static_th, shared) for static ones (static_th 0 = shared).
    #[must_use]
    pub fn single_congested_limit_bytes(self, shared_bytes: u64) -> u64 {
        match self {
            Self::Dynamic { dynamic_th } => {
                let shared = u128::from(shared_bytes);
                let n = u32::from(dynamic_th.unsigned_abs());
                let limit = if dynamic_th >= 0 {
                    // α = 2^n: α/(1+α) = 2^n / (2^n + 1).
                    shared * (1u128 << n) / ((1u128 << n) + 1)
                } else {
                    // α = 1/2^n: α/(1+α) = 1 / (2^n + 1).
                    shared / ((1u128 << n) + 1)
                };
                u64::try_from(limit).unwrap_or(u64::MAX)
            }
            Self::Static { static_th_bytes } => {
                if static_th_bytes == 0 {
                    shared_bytes
                } else {
                    static_th_bytes.min(shared_bytes)
                }
            }
        }
    }
}

/// A buffer profile as bound to one PG or queue of one port (`BUFFER_PROFILE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferProfile {
    /// Profile name (computed lossless profiles: `pg_lossless_<speed>_<cable>_profile`).
    pub name: String,
    /// Index of its pool in [`Config::pools`].
    pub pool_index: usize,
    /// Reserved (guaranteed) buffer, bytes (`size`).
    pub size_bytes: u64,
    /// Shared-buffer threshold.
    pub threshold: Threshold,
    /// XON threshold, bytes (`xon`).
    pub xon_bytes: u64,
    /// Headroom after XOFF, bytes (`xoff`); > 0 marks the profile lossless.
    pub xoff_bytes: u64,
    /// XON hysteresis, bytes (`xon_offset`); 0 = XON at `xon` only.
    pub xon_offset_bytes: u64,
    /// `xon`, `xoff` and `size` come from the headroom formula for this port.
    pub headroom_computed: bool,
}

impl BufferProfile {
    /// A profile with headroom (xoff > 0) is lossless (SONiC `bufferorch` marks such profiles
    /// lossless).
    #[must_use]
    pub const fn is_lossless(&self) -> bool {
        self.xoff_bytes > 0
    }
}

/// A set of priorities 0..=7 as a bit set (bit p = priority p), e.g. `pfc_enable`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PriorityBits(pub u8);

impl PriorityBits {
    /// Whether priority `p` is in the set (false for p > 7).
    #[must_use]
    pub const fn contains(self, p: u8) -> bool {
        p < 8 && self.0 & (1 << p) != 0
    }

    /// The priorities in the set, ascending.
    pub fn iter(self) -> impl Iterator<Item = u8> {
        (0..8u8).filter(move |&p| self.contains(p))
    }

    /// SONiC's text form: `"3,4"`.
    #[must_use]
    pub fn to_sonic_string(self) -> String {
        self.iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Which field of a frame selects its traffic class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// IP DSCP through `dscp_to_tc`.
    Dscp,
    /// 802.1Q PCP through `dot1p_to_tc` (untagged frames use the port's default priority).
    Dot1p,
}

/// The QoS maps of a port as fixed arrays, indexed by the map's source value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosMaps {
    /// DSCP (0..=63) → traffic class.
    pub dscp_to_tc: [u8; DSCP_COUNT],
    /// 802.1p PCP → traffic class.
    pub dot1p_to_tc: [u8; PRIORITY_COUNT],
    /// Traffic class → ingress priority group.
    pub tc_to_pg: [u8; PRIORITY_COUNT],
    /// Traffic class → egress queue.
    pub tc_to_queue: [u8; PRIORITY_COUNT],
    /// Priority of a received PFC frame → egress queue it pauses.
    pub pfc_to_queue: [u8; PRIORITY_COUNT],
    /// PFC priority → priority group whose XOFF/XON generates PFC for that priority.
    pub pfc_to_pg: [u8; PRIORITY_COUNT],
    /// Names of the maps, in the order of the fields above (for display).
    pub names: [String; 6],
}

/// VLAN membership of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Vlan {
    /// Untagged member of one VLAN; tagged frames of that VLAN are accepted too.
    Access {
        /// The VLAN id, 1..=4094.
        vlan_id: u16,
    },
    /// Tagged member of several VLANs.
    Trunk {
        /// Allowed VLAN ids, ascending, including the native VLAN.
        allowed_vlan_ids: Vec<u16>,
        /// VLAN of untagged frames (sent untagged); `None` = untagged frames are dropped.
        native_vlan_id: Option<u16>,
    },
    /// A routed port (`vlan_mode = "routed"`, SONiC's `switchport mode routed` with an
    /// INTERFACE entry): in no VLAN; frames to its router MAC (the port's `mac`) are routed by
    /// the FIB, the rest go to its host interface.
    Routed,
}

impl Vlan {
    /// Whether the port is routed.
    #[must_use]
    pub fn is_routed(&self) -> bool {
        matches!(self, Self::Routed)
    }

    /// Whether the port is a member of VLAN `vlan_id` (tagged or not).
    #[must_use]
    pub fn contains(&self, vlan_id: u16) -> bool {
        match self {
            Self::Access { vlan_id: v } => *v == vlan_id,
            Self::Trunk {
                allowed_vlan_ids, ..
            } => allowed_vlan_ids.contains(&vlan_id),
            Self::Routed => false,
        }
    }
}

/// PFC watchdog action on a storm (`PFC_WD|<port>.action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PfcWdAction {
    /// Drop the queue's packets (both directions of the priority) until restored.
    Drop,
    /// Ignore received pauses for the queue and keep transmitting.
    Forward,
    /// Log and count only.
    Alert,
}

/// Per-port PFC watchdog settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortPfcWd {
    /// Whether the watchdog runs on this port.
    pub enabled: bool,
    /// What to do on a storm.
    pub action: PfcWdAction,
    /// Storm detection time, ms (100..=5000).
    pub detection_time_ms: u32,
    /// Restoration time, ms (100..=60000).
    pub restoration_time_ms: u32,
}

/// `[pfcwd]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PfcWdGlobal {
    /// Poll interval, ms (100..=1000).
    pub poll_interval_ms: u32,
    /// Force the drop action on every watched queue.
    pub big_red_switch: bool,
}

/// Egress scheduling discipline of a queue (`SCHEDULER.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Strict priority.
    Strict,
    /// Deficit weighted round robin (bytes).
    Dwrr,
    /// Weighted round robin (packets).
    Wrr,
}

/// A resolved scheduler (`SCHEDULER|<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scheduler {
    /// Scheduler name.
    pub name: String,
    /// Discipline.
    pub kind: SchedulerKind,
    /// Weight 1..=100 (ignored for strict).
    pub weight: u8,
}

/// Which colours are ECN-marked instead of dropped (`WRED_PROFILE.ecn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EcnMode {
    /// No marking.
    None,
    /// Green only.
    Green,
    /// Yellow only.
    Yellow,
    /// Red only.
    Red,
    /// Green and yellow.
    GreenYellow,
    /// Green and red.
    GreenRed,
    /// Yellow and red.
    YellowRed,
    /// All colours.
    All,
}

impl EcnMode {
    /// Whether green packets (all of headroom's packets) are marked.
    #[must_use]
    pub const fn marks_green(self) -> bool {
        matches!(
            self,
            Self::Green | Self::GreenYellow | Self::GreenRed | Self::All
        )
    }
}

/// The RED curve of one colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WredColor {
    /// WRED drop enabled for non-ECN-capable packets (`wred_<color>_enable`).
    pub wred_enable: bool,
    /// Below this queue length nothing is marked or dropped, bytes.
    pub min_threshold_bytes: u64,
    /// Above this queue length everything is marked or dropped, bytes.
    pub max_threshold_bytes: u64,
    /// Probability at `max_threshold_bytes`, percent 0..=100.
    pub drop_probability_percent: u8,
}

/// A resolved WRED/ECN profile (`WRED_PROFILE|<name>`). headroom colours every packet green:
/// only [`WredProfile::green`] is used; yellow and red are kept for SONiC compatibility.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WredProfile {
    /// Profile name.
    pub name: String,
    /// ECN marking mode.
    pub ecn: EcnMode,
    /// Green curve.
    pub green: WredColor,
    /// Yellow curve (unused).
    pub yellow: WredColor,
    /// Red curve (unused).
    pub red: WredColor,
}

/// A resolved ingress priority group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityGroup {
    /// Bound profile (`BUFFER_PG|<port>|<pg>`), in an ingress pool.
    pub profile: BufferProfile,
}

impl PriorityGroup {
    /// Lossless when its profile has headroom.
    #[must_use]
    pub const fn is_lossless(&self) -> bool {
        self.profile.is_lossless()
    }
}

/// A resolved egress queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queue {
    /// Bound profile (`BUFFER_QUEUE|<port>|<q>`), in an egress pool.
    pub profile: BufferProfile,
    /// Scheduler (`QUEUE|<port>|<q>.scheduler`).
    pub scheduler: Scheduler,
    /// WRED/ECN profile (`QUEUE|<port>|<q>.wred_profile`), if any.
    pub wred: Option<WredProfile>,
    /// Carries a PFC-enabled priority (it is `pfc_to_queue` of a priority in `pfc_enable`).
    pub lossless: bool,
}

/// A resolved port.
#[derive(Clone, Debug, PartialEq)]
pub struct Port {
    /// Port name (SONiC style such as `Ethernet0` allowed).
    pub name: String,
    /// Linux interface name (afpacket) or DPDK device (PCI address / vdev) or any label (memory).
    pub device: String,
    /// SONiC `PORT.alias` (the front-panel name, e.g. `etp1`; informational).
    pub alias: Option<String>,
    /// Port MAC address (source of PFC frames).
    pub mac: [u8; 6],
    /// Port speed, Mb/s (SONiC's unit, used in profile names and the headroom formula).
    pub speed_mbps: u64,
    /// Port speed, bits per second.
    pub speed_bits_per_second: u64,
    /// Cable length, metres.
    pub cable_length_m: u32,
    /// MTU, bytes.
    pub mtu_bytes: u32,
    /// Transmission enabled.
    pub tx_enable: bool,
    /// Classification trust.
    pub trust: Trust,
    /// 802.1p priority of untagged frames under dot1p trust.
    pub default_priority: u8,
    /// Priorities with PFC enabled (generated and honoured).
    pub pfc_enable: PriorityBits,
    /// Priorities the PFC watchdog watches (`pfcwd_sw_enable`), a subset of `pfc_enable`.
    pub pfcwd_enable: PriorityBits,
    /// Honour received IEEE 802.3x PAUSE (Annex 31B) frames.
    pub pause_802_3x: bool,
    /// Pause time sent in PFC XOFF frames, quanta of 512 bit times (1..=65535).
    pub pfc_quanta: u16,
    /// Interval at which XOFF is re-sent while a PG stays above XOFF, ns.
    pub pfc_refresh_ns: u64,
    /// VLAN membership.
    pub vlan: Vlan,
    /// Egress shaper rate, bits per second.
    pub shaper_rate_bits_per_second: u64,
    /// QoS maps.
    pub maps: QosMaps,
    /// Priority groups 0..=7.
    pub priority_groups: [PriorityGroup; PRIORITY_COUNT],
    /// Queues 0..=7.
    pub queues: [Queue; PRIORITY_COUNT],
    /// PFC watchdog.
    pub pfcwd: PortPfcWd,
    /// What the headroom formula gives for this port (whether or not a profile uses it).
    pub computed_headroom: HeadroomValues,
    /// LLDP on this port (`lldp_admin_status`, default from `lldp.enabled`).
    pub lldp_admin_status: LldpAdminStatus,
}

impl Port {
    /// The traffic class of PFC priority `priority` on this port: under dot1p trust through
    /// `dot1p_to_tc`, under DSCP trust the priority itself (SONiC's convention that lossless TC n
    /// is paused with PFC priority n).
    #[must_use]
    pub fn tc_of_priority(&self, priority: u8) -> u8 {
        tc_of_priority(self.trust, &self.maps.dot1p_to_tc, priority)
    }
}

pub(crate) fn tc_of_priority(trust: Trust, dot1p_to_tc: &[u8; PRIORITY_COUNT], priority: u8) -> u8 {
    match trust {
        Trust::Dot1p => dot1p_to_tc[usize::from(priority & 7)],
        Trust::Dscp => priority & 7,
    }
}

/// Busy or adaptive polling of the RX queues.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Polling {
    /// Spin on empty polls (lowest latency, 100 % CPU).
    Busy,
    /// Back off (yield/sleep) after empty polls.
    Adaptive,
}

/// One dataplane thread pinned to one CPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lcore {
    /// CPU id the thread is pinned to (one of the process's affinity mask).
    pub cpu: usize,
    /// Ports (the core's ids: indexes into [`Config::ports`]) whose RX this thread polls.
    pub rx_ports: Vec<PortId>,
    /// Ports whose TX (queues, scheduler, shaper) this thread serves.
    pub tx_ports: Vec<PortId>,
}

/// `[runtime]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Runtime {
    /// Dataplane threads; every port is RX-polled by exactly one and TX-served by exactly one.
    pub lcores: Vec<Lcore>,
    /// Polling mode.
    pub polling: Polling,
    /// Frames per RX/TX burst.
    pub burst_size: u16,
    /// Unix socket of the control interface.
    pub control_socket: PathBuf,
    /// Prometheus exporter address, `None` = disabled.
    pub prometheus_listen: Option<SocketAddr>,
}

/// `[dpdk]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Dpdk {
    /// EAL arguments as for testpmd (without the program name).
    pub eal_args: Vec<String>,
    /// Mbufs in the packet mempool.
    pub mempool_mbufs: u32,
    /// Per-lcore mempool cache, mbufs.
    pub mempool_cache_size: u32,
    /// RX descriptors per queue.
    pub rx_descriptors: u16,
    /// TX descriptors per queue.
    pub tx_descriptors: u16,
}
