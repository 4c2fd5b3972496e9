//! Typed, validated parameters of a switch: what the core needs to know, in the core's units.
//!
//! `headroom-config` turns a TOML file into these; tests and the simulator build them directly.
//! Byte quantities stay in bytes here; the core converts them to cells once, when it is built
//! ([`SwitchParams::cells`]). Semantics are SONiC's (`sonic-buffer-model.md` §1–2).

pub use crate::inject::InjectParams;
pub use crate::punt::PuntParams;
pub use crate::token_bucket::RateLimit;
use crate::types::{PgIndex, Priority, PrioritySet, QueueIndex, TrafficClass, PRIORITY_COUNT};

/// Index of a buffer pool in [`SwitchParams::pools`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PoolId(pub u8);

impl PoolId {
    /// The pool as an index into per-pool arrays.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Direction of a buffer pool (SONiC `BUFFER_POOL.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolDirection {
    /// Priority groups of ingress ports draw from it.
    Ingress,
    /// Queues of egress ports draw from it.
    Egress,
}

/// A buffer pool (SONiC `BUFFER_POOL`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolParams {
    /// Operator-facing name, e.g. `ingress_lossless_pool`.
    pub name: String,
    /// Ingress or egress.
    pub direction: PoolDirection,
    /// Total size in bytes, including the shared headroom pool (SAI: "its size is included in the
    /// corresponding ingress buffer pool size").
    pub size_bytes: u64,
    /// Shared headroom pool size in bytes (SONiC `xoff`); 0 means each lossless PG has its own
    /// private headroom of its profile's `xoff`.
    pub shared_headroom_bytes: u64,
}

/// How the shared-buffer limit of a PG or queue is set (SONiC `static_th` / `dynamic_th`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threshold {
    /// An absolute cap on the shared bytes the PG or queue may hold. 0 means no limit (SAI).
    Static {
        /// The cap, in bytes.
        bytes: u64,
    },
    /// α = 2^`exponent` times the free shared space of the pool, `exponent` in -8..=7.
    Dynamic {
        /// n in α = 2^n.
        exponent: i8,
    },
}

/// A buffer profile bound to a PG or queue (SONiC `BUFFER_PROFILE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BufferProfile {
    /// The pool the PG or queue draws shared buffer from.
    pub pool: PoolId,
    /// Reserved (guaranteed) bytes (SONiC `size`, SAI `RESERVED_BUFFER_SIZE`).
    pub reserved_bytes: u64,
    /// The shared-buffer limit.
    pub threshold: Threshold,
    /// Headroom after XOFF, in bytes (SONiC `xoff`). Non-zero marks an ingress profile lossless.
    pub xoff_bytes: u64,
    /// XON threshold on total usage, in bytes (SONiC `xon`).
    pub xon_bytes: u64,
    /// XON hysteresis below the XOFF point, in bytes (SONiC `xon_offset`); 0 means "not set".
    pub xon_offset_bytes: u64,
}

impl BufferProfile {
    /// A lossy profile: no headroom.
    #[must_use]
    pub const fn lossy(pool: PoolId, reserved_bytes: u64, threshold: Threshold) -> Self {
        Self {
            pool,
            reserved_bytes,
            threshold,
            xoff_bytes: 0,
            xon_bytes: 0,
            xon_offset_bytes: 0,
        }
    }

    /// Whether the profile gives its PG headroom (SONiC: the presence of `xoff`).
    #[must_use]
    pub const fn is_lossless(&self) -> bool {
        self.xoff_bytes > 0
    }
}

/// Which header a port trusts for classification (SONiC: which QoS map is bound).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trust {
    /// The PCP of the 802.1Q tag; untagged frames take the port's default priority.
    Dot1p,
    /// The DSCP of the IPv4/IPv6 header; non-IP frames take the port's default priority.
    Dscp,
}

/// The QoS maps of a port (SONiC `PORT_QOS_MAP` and the map tables).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QosMaps {
    /// DSCP → TC (64 entries).
    pub dscp_to_tc: [TrafficClass; 64],
    /// 802.1p PCP → TC.
    pub dot1p_to_tc: [TrafficClass; PRIORITY_COUNT],
    /// TC → ingress priority group.
    pub tc_to_pg: [PgIndex; PRIORITY_COUNT],
    /// TC → egress queue.
    pub tc_to_queue: [QueueIndex; PRIORITY_COUNT],
    /// Received PFC priority → the egress queue it pauses.
    pub pfc_to_queue: [QueueIndex; PRIORITY_COUNT],
    /// PFC priority → the PG whose XOFF state generates PFC for it.
    pub pfc_to_pg: [PgIndex; PRIORITY_COUNT],
}

const fn tc(n: u8) -> TrafficClass {
    TrafficClass::from_low_bits(n)
}

impl QosMaps {
    /// SONiC's default maps (`qos_config.j2`, "AZURE"): DSCP 3→3, 4→4, 5→2, 8→0, 46→5, 48→6,
    /// every other DSCP → 1; TC→PG 3→3, 4→4, 7→7, others → 0; TC→queue, PFC→queue, dot1p→TC and
    /// PFC→PG identity.
    #[must_use]
    pub const fn sonic_default() -> Self {
        let mut dscp_to_tc = [tc(1); 64];
        dscp_to_tc[3] = tc(3);
        dscp_to_tc[4] = tc(4);
        dscp_to_tc[5] = tc(2);
        dscp_to_tc[8] = tc(0);
        dscp_to_tc[46] = tc(5);
        dscp_to_tc[48] = tc(6);
        let pg0 = PgIndex::from_low_bits(0);
        Self {
            dscp_to_tc,
            dot1p_to_tc: TrafficClass::ALL,
            tc_to_pg: [
                pg0,
                pg0,
                pg0,
                PgIndex::from_low_bits(3),
                PgIndex::from_low_bits(4),
                pg0,
                pg0,
                PgIndex::from_low_bits(7),
            ],
            tc_to_queue: QueueIndex::ALL,
            pfc_to_queue: QueueIndex::ALL,
            pfc_to_pg: PgIndex::ALL,
        }
    }
}

impl Default for QosMaps {
    fn default() -> Self {
        Self::sonic_default()
    }
}

/// How the scheduler serves a queue (SONiC `SCHEDULER.type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulerKind {
    /// Served before every DWRR queue, higher queue index first.
    Strict,
    /// Deficit weighted round robin among the non-strict queues, with this weight (1..=100).
    Dwrr {
        /// Relative share, 1..=100.
        weight: u8,
    },
}

/// A WRED/ECN profile bound to a queue (SONiC `WRED_PROFILE`, green colour: headroom does not
/// colour packets, every packet is green).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WredParams {
    /// Mark ECT packets CE instead of dropping them (SONiC `ecn` includes green).
    pub ecn_mark: bool,
    /// Drop non-ECT packets by the same curve (SONiC `wred_green_enable`); never on lossless
    /// queues.
    pub drop_enable: bool,
    /// Below this queue depth nothing is marked (Kmin).
    pub min_threshold_bytes: u64,
    /// At this depth the probability reaches `probability_percent`; above it every packet is
    /// marked (Kmax).
    pub max_threshold_bytes: u64,
    /// Marking probability at Kmax, 0..=100 (SONiC `green_drop_probability`).
    pub probability_percent: u8,
}

/// An egress queue's parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueParams {
    /// Egress buffer profile.
    pub profile: BufferProfile,
    /// Scheduling discipline.
    pub scheduler: SchedulerKind,
    /// WRED/ECN, if any.
    pub wred: Option<WredParams>,
}

/// VLAN membership of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VlanMode {
    /// Untagged member of one VLAN: tagged frames are accepted only with this VID (or VID 0,
    /// priority-tagged); frames leave untagged.
    Access {
        /// The port's VLAN.
        vid: u16,
    },
    /// Tagged member of several VLANs; untagged frames belong to the native VLAN, if any, and
    /// frames of the native VLAN leave untagged.
    Trunk {
        /// Allowed VLANs (1..=4094).
        allowed: Vec<u16>,
        /// The VLAN of untagged frames.
        native: Option<u16>,
    },
    /// A router interface (SONiC `INTERFACE|Ethernet0|…`, SAI router interface of type PORT):
    /// no VLAN membership, so MAC learning and flooding never involve the port. Untagged and
    /// priority-tagged (VID 0) frames are accepted, other tagged frames dropped
    /// (`vlan_filtered`). [`PortParams::mac`] is the router MAC: IPv4/IPv6 frames addressed to
    /// it are routed by the FIB attached to the lcore ([`crate::step::LcoreStep::attach_fib`]),
    /// and routed frames leave the port with it as their source address. Frames routed out of
    /// the port leave untagged. See `route_forward` in the crate for the packet walk.
    Routed,
}

/// Action the PFC watchdog takes on a stormed queue (SONiC `PFC_WD.action`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchdogAction {
    /// Ignore received pauses for the queue, drop what is queued and what arrives for it, and drop
    /// ingress traffic of that priority on the port.
    Drop,
    /// Ignore received pauses for the queue; it transmits.
    Forward,
    /// Change nothing; count and report.
    Alert,
}

/// Per-port PFC watchdog parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortWatchdogParams {
    /// What to do with a stormed queue.
    pub action: WatchdogAction,
    /// How long a queue must be held by PFC, non-empty and silent before it is declared stormed.
    pub detection_time_ns: u64,
    /// How long without a PFC frame for the priority before the queue is restored.
    pub restoration_time_ns: u64,
    /// Priorities whose queues are watched (SONiC `pfcwd_sw_enable`).
    pub watched: PrioritySet,
}

/// One port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortParams {
    /// Operator-facing name, e.g. `Ethernet0`.
    pub name: String,
    /// Source MAC address of the PFC frames sent on this port; on a routed port
    /// ([`VlanMode::Routed`]) also its router MAC, the destination of the frames it routes and
    /// the source of the frames routed out of it.
    pub mac: [u8; 6],
    /// Link speed in bits per second: pause quanta are timed at it and the shaper runs at
    /// `shaper_rate_bps`.
    pub speed_bps: u64,
    /// Rate the egress shaper lets frames out at, bits per second (normally `speed_bps`).
    pub shaper_rate_bps: u64,
    /// Largest frame accepted, bytes (without FCS).
    pub mtu_bytes: u32,
    /// Classification trust.
    pub trust: Trust,
    /// Priority of frames the trusted header does not classify (untagged under dot1p trust).
    pub default_priority: Priority,
    /// QoS maps.
    pub maps: QosMaps,
    /// Priorities for which PFC is generated and honoured (SONiC `pfc_enable`).
    pub pfc_enable: PrioritySet,
    /// Whether a received IEEE 802.3x PAUSE pauses the whole port (off by default).
    pub pause_802_3x: bool,
    /// Pause time carried by XOFF frames, in quanta (default 0xFFFF).
    pub pfc_quanta: u16,
    /// Interval at which a held XOFF is repeated, in ns (default half the pause duration).
    pub pfc_refresh_ns: u64,
    /// Buffer profile of each ingress priority group.
    pub pgs: [BufferProfile; PRIORITY_COUNT],
    /// Each egress queue.
    pub queues: [QueueParams; PRIORITY_COUNT],
    /// Whether the port transmits (SAI `PKT_TX_ENABLE`); when false, egress holds everything
    /// while buffers keep admitting.
    pub tx_enable: bool,
    /// VLAN membership.
    pub vlan: VlanMode,
    /// PFC watchdog, if enabled on the port.
    pub watchdog: Option<PortWatchdogParams>,
}

/// Global PFC watchdog parameters (SONiC `PFC_WD|GLOBAL`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WatchdogGlobalParams {
    /// Detection and restoration are evaluated every this many ns.
    pub poll_interval_ns: u64,
    /// Apply the drop action to every watched queue at once.
    pub big_red_switch: bool,
}

/// Everything the core needs to build a switch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchParams {
    /// Accounting unit, bytes (a frame holds ⌈len / cell⌉ cells).
    pub cell_size_bytes: u32,
    /// Buffer pools, indexed by [`PoolId`].
    pub pools: Vec<PoolParams>,
    /// Ports, indexed by [`crate::types::PortId`].
    pub ports: Vec<PortParams>,
    /// Seed of the WRED random generator.
    pub seed: u64,
    /// PFC watchdog, global part.
    pub watchdog: WatchdogGlobalParams,
    /// PFC frames per second per (port, priority) above which a storm-rate alarm is raised.
    pub storm_alarm_frames_per_second: u32,
    /// MAC table entries.
    pub fdb_capacity: u32,
    /// A learned MAC address not seen for this long is forgotten, ns.
    pub fdb_aging_ns: u64,
    /// Static MAC table entries `(vid, mac, port)`: never aged, never moved (`[[fdb.static]]`).
    pub fdb_static: Vec<(u16, [u8; 6], crate::types::PortId)>,
    /// Frames each egress queue's ring holds at most (per ingress side).
    pub queue_ring_frames: u32,
    /// Rate limits and queue of frames punted to the control plane ([`crate::punt`]).
    pub punt: PuntParams,
    /// Rate limit and buffer of frames the control plane injects ([`crate::inject`]).
    pub inject: InjectParams,
    /// VLAN interfaces (SVIs, SONiC's `VLAN_INTERFACE|Vlan1000`): routing between an L2 VLAN
    /// and the FIB (`route_forward`, a child of `ingress`).
    pub vlan_interfaces: Vec<VlanInterfaceParams>,
}

/// A VLAN interface (SVI): the router's interface in an L2 VLAN. A frame received in VLAN
/// `vid` on one of its member ports and addressed to `mac` is routed by the FIB; broadcast
/// and multicast of the VLAN are bridged as always and a copy of ARP, neighbour discovery and
/// link-local multicast goes to the control plane with the VLAN ([`crate::punt::Punted`]); a
/// routed packet whose next hop is in VLAN `vid` leaves by the member port the FDB knows the
/// neighbour's MAC on (flooded to the VLAN's members while it does not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VlanInterfaceParams {
    /// The VLAN, 1..=4094.
    pub vid: u16,
    /// Its router MAC: the destination of the frames it routes, the source of those it sends.
    pub mac: [u8; 6],
}

/// Why parameters were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamsError(pub String);

impl core::fmt::Display for ParamsError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ParamsError {}

/// Pause time of one quantum is 512 bit times (IEEE 802.3 Annex 31B.2); this returns the duration
/// of `quanta` quanta at `speed_bps`, rounded up to whole ns.
#[must_use]
pub fn pause_quanta_nanos(quanta: u16, speed_bps: u64) -> u64 {
    if speed_bps == 0 {
        return u64::MAX;
    }
    let bits = u128::from(quanta) * 512 * 1_000_000_000;
    let speed = u128::from(speed_bps);
    u64::try_from(bits.div_ceil(speed)).unwrap_or(u64::MAX)
}

impl SwitchParams {
    /// Checks what the core relies on. The config crate checks more, with file and line.
    ///
    /// # Errors
    /// The first violated rule.
    pub fn validate(&self) -> Result<(), ParamsError> {
        let err = |s: String| Err(ParamsError(s));
        if self.cell_size_bytes == 0 {
            return err("cell size must be > 0".into());
        }
        if self.ports.is_empty() || self.ports.len() > usize::from(u16::MAX) {
            return err(format!("{} ports: need 1..=65535", self.ports.len()));
        }
        if self.pools.is_empty() || self.pools.len() > usize::from(u8::MAX) {
            return err(format!("{} pools: need 1..=255", self.pools.len()));
        }
        if self.queue_ring_frames < 2 {
            return err("queue_ring_frames must be >= 2".into());
        }
        if self.watchdog.poll_interval_ns == 0 {
            return err("watchdog poll interval must be > 0".into());
        }
        if self.punt.queue_frames == 0 {
            return err("the punt queue must hold at least one frame".into());
        }
        for (i, svi) in self.vlan_interfaces.iter().enumerate() {
            if svi.vid == 0 || svi.vid > 4094 {
                return err(format!("VLAN interface of VLAN {}: need 1..=4094", svi.vid));
            }
            if self.vlan_interfaces[..i].iter().any(|o| o.vid == svi.vid) {
                return err(format!("two VLAN interfaces of VLAN {}", svi.vid));
            }
            if svi.mac[0] & 1 != 0 {
                return err(format!(
                    "VLAN interface of VLAN {}: its MAC {:02x?} is multicast",
                    svi.vid, svi.mac
                ));
            }
        }
        if let Some((vid, _, port)) = self
            .fdb_static
            .iter()
            .find(|(vid, _, port)| port.index() >= self.ports.len() || *vid == 0 || *vid > 4094)
        {
            return err(format!(
                "static FDB entry on port {port}, VLAN {vid}: no such port or VLAN"
            ));
        }
        // A routed port is in no VLAN: nothing is ever bridged to it (SONiC refuses an FDB
        // entry on a port that is not a VLAN member).
        if let Some((vid, mac, port)) = self
            .fdb_static
            .iter()
            .find(|(_, _, port)| self.ports[port.index()].vlan == VlanMode::Routed)
        {
            return err(format!(
                "static FDB entry {mac:02x?} in VLAN {vid}: port {} is a routed port (in no VLAN)",
                self.ports[port.index()].name
            ));
        }
        // Every static entry must find a slot (the ingress sides install them all).
        let (_, refused) =
            crate::fdb::Fdb::with_static(self.fdb_capacity, self.fdb_aging_ns, &self.fdb_static);
        if let Some((vid, mac, _)) = refused.first() {
            return err(format!(
                "static FDB entry {mac:02x?} in VLAN {vid}: the MAC table ({} entries) has no \
                 free slot on its probe path",
                self.fdb_capacity
            ));
        }
        for pool in &self.pools {
            if pool.shared_headroom_bytes > pool.size_bytes {
                return err(format!(
                    "pool {}: shared headroom larger than the pool",
                    pool.name
                ));
            }
            if pool.direction == PoolDirection::Egress && pool.shared_headroom_bytes > 0 {
                return err(format!(
                    "pool {}: only ingress pools have a shared headroom pool",
                    pool.name
                ));
            }
        }
        for port in &self.ports {
            if port.speed_bps == 0 || port.shaper_rate_bps == 0 {
                return err(format!("port {}: speed must be > 0", port.name));
            }
            for (i, pg) in port.pgs.iter().enumerate() {
                let Some(pool) = self.pools.get(pg.pool.index()) else {
                    return err(format!("port {} pg {i}: no pool {}", port.name, pg.pool.0));
                };
                if pool.direction != PoolDirection::Ingress {
                    return err(format!(
                        "port {} pg {i}: pool {} is not an ingress pool",
                        port.name, pool.name
                    ));
                }
                check_threshold(&port.name, "pg", i, pg)?;
            }
            for (i, q) in port.queues.iter().enumerate() {
                let Some(pool) = self.pools.get(q.profile.pool.index()) else {
                    return err(format!(
                        "port {} queue {i}: no pool {}",
                        port.name, q.profile.pool.0
                    ));
                };
                if pool.direction != PoolDirection::Egress {
                    return err(format!(
                        "port {} queue {i}: pool {} is not an egress pool",
                        port.name, pool.name
                    ));
                }
                check_threshold(&port.name, "queue", i, &q.profile)?;
                if let SchedulerKind::Dwrr { weight } = q.scheduler {
                    if weight == 0 || weight > 100 {
                        return err(format!(
                            "port {} queue {i}: DWRR weight {weight} not in 1..=100",
                            port.name
                        ));
                    }
                }
                if let Some(w) = q.wred {
                    if w.max_threshold_bytes < w.min_threshold_bytes || w.probability_percent > 100
                    {
                        return err(format!(
                            "port {} queue {i}: WRED needs min <= max and probability <= 100",
                            port.name
                        ));
                    }
                }
            }
            if let Some(wd) = port.watchdog {
                if wd.detection_time_ns == 0 || wd.restoration_time_ns == 0 {
                    return err(format!("port {}: watchdog times must be > 0", port.name));
                }
            }
            match &port.vlan {
                VlanMode::Access { vid } if !(1..=4094).contains(vid) => {
                    return err(format!(
                        "port {}: access VLAN {vid} not in 1..=4094",
                        port.name
                    ));
                }
                VlanMode::Trunk { allowed, native } => {
                    if allowed
                        .iter()
                        .chain(native.iter())
                        .any(|v| !(1..=4094).contains(v))
                    {
                        return err(format!(
                            "port {}: trunk VLANs must be in 1..=4094",
                            port.name
                        ));
                    }
                }
                VlanMode::Access { .. } | VlanMode::Routed => {}
            }
        }
        Ok(())
    }

    /// Bytes → cells, rounding up: a partly used cell is a used cell.
    #[must_use]
    pub fn cells(&self, bytes: u64) -> u64 {
        bytes.div_ceil(u64::from(self.cell_size_bytes))
    }
}

fn check_threshold(port: &str, what: &str, i: usize, p: &BufferProfile) -> Result<(), ParamsError> {
    if let Threshold::Dynamic { exponent } = p.threshold {
        if !(-8..=7).contains(&exponent) {
            return Err(ParamsError(format!(
                "port {port} {what} {i}: dynamic_th {exponent} not in -8..=7"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_quanta_at_link_speeds() {
        // 802.3 Annex 31B: one quantum is 512 bit times.
        assert_eq!(pause_quanta_nanos(1, 10_000_000_000), 52); // 51.2 ns rounded up
        assert_eq!(pause_quanta_nanos(0xFFFF, 100_000_000_000), 335_540); // 335.5 us
        assert_eq!(pause_quanta_nanos(0xFFFF, 1_000_000_000), 33_553_920);
        assert_eq!(pause_quanta_nanos(0, 1_000_000_000), 0);
    }

    #[test]
    fn default_maps_are_sonics() {
        let m = QosMaps::sonic_default();
        assert_eq!(m.dscp_to_tc[3].get(), 3);
        assert_eq!(m.dscp_to_tc[46].get(), 5);
        assert_eq!(m.dscp_to_tc[48].get(), 6);
        assert_eq!(m.dscp_to_tc[0].get(), 1);
        assert_eq!(m.dscp_to_tc[8].get(), 0);
        assert_eq!(m.tc_to_pg[3].get(), 3);
        assert_eq!(m.tc_to_pg[4].get(), 4);
        assert_eq!(m.tc_to_pg[1].get(), 0);
    }
}

/// Ready-made parameter sets for tests, benchmarks and the simulator.
pub mod presets {
    use super::*;
    use crate::types::{Priority, PrioritySet};

    /// Pool ids of [`simple`].
    pub const INGRESS_POOL: PoolId = PoolId(0);
    /// Egress pool of lossless queues.
    pub const EGRESS_LOSSLESS_POOL: PoolId = PoolId(1);
    /// Egress pool of lossy queues.
    pub const EGRESS_LOSSY_POOL: PoolId = PoolId(2);

    /// A switch of `ports` ports at `speed_bps`, SONiC's default QoS (DSCP trust, lossless 3 and
    /// 4), a 4 MiB ingress pool with static limits that make numbers easy to predict:
    /// lossless PGs reserve 2 KiB, may take 64 KiB shared and have 32 KiB of private headroom;
    /// the lossy PG reserves nothing and may take 256 KiB; lossless queues are never dropped;
    /// lossy queues reserve 2 KiB and may take α = 2^3 of the free egress pool. Access VLAN 1.
    #[must_use]
    pub fn simple(ports: usize, speed_bps: u64) -> SwitchParams {
        let lossless_pg = BufferProfile {
            pool: INGRESS_POOL,
            reserved_bytes: 2048,
            threshold: Threshold::Static { bytes: 65_536 },
            xoff_bytes: 32_768,
            xon_bytes: 2048,
            xon_offset_bytes: 0,
        };
        let lossy_pg = BufferProfile::lossy(INGRESS_POOL, 0, Threshold::Static { bytes: 262_144 });
        let lossless_queue = QueueParams {
            profile: BufferProfile::lossy(EGRESS_LOSSLESS_POOL, 0, Threshold::Static { bytes: 0 }),
            scheduler: SchedulerKind::Dwrr { weight: 15 },
            wred: None,
        };
        let lossy_queue = QueueParams {
            profile: BufferProfile::lossy(
                EGRESS_LOSSY_POOL,
                2048,
                Threshold::Dynamic { exponent: 3 },
            ),
            scheduler: SchedulerKind::Dwrr { weight: 14 },
            wred: None,
        };
        let pfc_enable = PrioritySet::EMPTY
            .with(Priority::from_low_bits(3))
            .with(Priority::from_low_bits(4));
        let mut pgs = [lossy_pg; PRIORITY_COUNT];
        pgs[3] = lossless_pg;
        pgs[4] = lossless_pg;
        let mut queues = [lossy_queue; PRIORITY_COUNT];
        queues[3] = lossless_queue;
        queues[4] = lossless_queue;
        let ports = (0..ports)
            .map(|i| PortParams {
                name: format!("Ethernet{}", i * 4),
                mac: [0x02, 0, 0, 0, 0, u8::try_from(i + 1).unwrap_or(u8::MAX)],
                speed_bps,
                shaper_rate_bps: speed_bps,
                mtu_bytes: 9100,
                trust: Trust::Dscp,
                default_priority: Priority::from_low_bits(0),
                maps: QosMaps::sonic_default(),
                pfc_enable,
                pause_802_3x: false,
                pfc_quanta: 0xFFFF,
                pfc_refresh_ns: pause_quanta_nanos(0xFFFF, speed_bps) / 2,
                pgs,
                queues,
                tx_enable: true,
                vlan: VlanMode::Access { vid: 1 },
                watchdog: None,
            })
            .collect();
        SwitchParams {
            cell_size_bytes: 256,
            pools: vec![
                PoolParams {
                    name: "ingress_lossless_pool".into(),
                    direction: PoolDirection::Ingress,
                    size_bytes: 4 << 20,
                    shared_headroom_bytes: 0,
                },
                PoolParams {
                    name: "egress_lossless_pool".into(),
                    direction: PoolDirection::Egress,
                    size_bytes: 4 << 20,
                    shared_headroom_bytes: 0,
                },
                PoolParams {
                    name: "egress_lossy_pool".into(),
                    direction: PoolDirection::Egress,
                    size_bytes: 2 << 20,
                    shared_headroom_bytes: 0,
                },
            ],
            ports,
            seed: 1,
            watchdog: WatchdogGlobalParams {
                poll_interval_ns: 200_000_000,
                big_red_switch: false,
            },
            storm_alarm_frames_per_second: 2000,
            fdb_capacity: 4096,
            fdb_aging_ns: 300_000_000_000,
            fdb_static: Vec::new(),
            queue_ring_frames: 8192,
            punt: PuntParams::default(),
            inject: InjectParams::default(),
            vlan_interfaces: Vec::new(),
        }
    }
}
