//! The control socket's protocol: one JSON request per line, one JSON response per line.
//!
//! The socket is a Unix stream socket (mode 0600) served by the running switch; there is no
//! network listener for control. Every `headroom show/clear/set/config/capture` command is one
//! connection: the client writes a [`Request`] line and reads a [`Response`] line (a capture
//! then streams frames, see [`CaptureRequest`]).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Parses one request line (without its newline) as the control socket does: UTF-8 JSON, at
/// most [`crate::control::REQUEST_BYTES_MAX`] bytes. Never panics, whatever the bytes.
///
/// # Errors
/// A message for the client saying why the line is not a request.
pub fn parse_request(line: &[u8]) -> Result<Request, String> {
    let max = crate::control::REQUEST_BYTES_MAX;
    if line.len() > max {
        return Err(format!(
            "request refused: longer than {max} bytes without a newline"
        ));
    }
    let text =
        std::str::from_utf8(line).map_err(|e| format!("bad request: not UTF-8 text ({e})"))?;
    // serde_json refuses nesting deeper than 128 levels, so no input exhausts the stack.
    serde_json::from_str(text.strip_suffix('\r').unwrap_or(text))
        .map_err(|e| format!("bad request: {e}"))
}

/// What a client asks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    /// Read something.
    Show {
        /// What.
        what: Show,
    },
    /// Clear counters or watermarks (SONiC keeps a snapshot; later reads show the difference).
    Clear {
        /// What.
        what: Clear,
    },
    /// Change the running configuration.
    Set {
        /// The change.
        change: Change,
    },
    /// Save the running configuration under a name.
    ConfigSave {
        /// Snapshot name.
        name: String,
    },
    /// Apply a saved configuration.
    ConfigRollback {
        /// Snapshot name.
        name: String,
    },
    /// List saved configurations.
    ConfigList,
    /// Stream what a port receives and sends.
    Capture(CaptureRequest),
}

/// What `show` reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Show {
    /// PFC frames received and sent per port and priority, and paused time.
    PfcCounters,
    /// `pfc_enable` of each port.
    PfcPriority,
    /// Packets, bytes and drops per queue.
    QueueCounters,
    /// Queue watermarks (user view, or persistent).
    QueueWatermark {
        /// Persistent view (since start or the last persistent clear).
        persistent: bool,
        /// The shared part (SAI's, the default) or the total use.
        #[serde(default)]
        kind: QueueWatermarkKind,
    },
    /// PG watermarks.
    PgWatermark {
        /// Shared or headroom.
        kind: PgWatermarkKind,
        /// Persistent view.
        persistent: bool,
    },
    /// Drops per ingress PG.
    PgDrop,
    /// Packets, bytes and drops per ingress PG.
    PgCounters,
    /// SONiC's portstat (`show interfaces counters`): RX/TX OK, rates, errors, discards,
    /// oversize frames per port.
    InterfacesCounters,
    /// Pool watermarks (shared and shared headroom pool).
    BufferPoolWatermark {
        /// Persistent view.
        persistent: bool,
    },
    /// PFC watchdog configuration.
    PfcwdConfig,
    /// PFC watchdog statistics.
    PfcwdStats,
    /// ECN marks per queue.
    Ecn,
    /// Port summary: speed, link, rx/tx, drops by reason.
    Ports,
    /// MAC table.
    Fdb,
    /// The running configuration and its derived values.
    Config,
    /// Everything numeric at once (for `headroom top` and scripts).
    Snapshot,
    /// The routes the dataplane forwards with (mirrored from the kernel), with the mirror's
    /// counters (`show ip route`).
    IpRoute,
    /// The kernel's neighbours on the routed ports (`show arp` / `show ndp`).
    IpNeighbors,
    /// The routed ports' host interfaces: punted and injected frames.
    HostInterfaces,
    /// LLDP neighbours, per-port LLDP counters and recent LLDP/DCBX events (`show lldp
    /// neighbors`, lldpctl / SONiC `show lldp table`).
    LldpNeighbors,
    /// Per port: the DCBX this switch advertises, its neighbour's, and the verdict (`show
    /// dcbx`).
    Dcbx,
}

/// PG watermark kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PgWatermarkKind {
    /// Shared buffer.
    Shared,
    /// Headroom.
    Headroom,
}

/// Queue watermark kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueWatermarkKind {
    /// The shared part: use above the queue's reserved size (SAI
    /// `QUEUE_STAT_SHARED_WATERMARK_BYTES`, SONiC `show queue watermark`).
    #[default]
    Shared,
    /// Reserved and shared together: the queue's deepest occupancy.
    Total,
}

/// What `clear` clears.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Clear {
    /// Every counter (a snapshot is taken; later reads show the difference).
    Counters,
    /// Watermarks (user view, or persistent view too).
    Watermarks {
        /// Also the persistent view.
        persistent: bool,
    },
    /// The MAC table: the stations learned on one port, or every station (SONiC's
    /// `sonic-clear fdb port <port>` / `sonic-clear fdb all`).
    Fdb {
        /// Only this port's stations (`None`: all).
        #[serde(default)]
        port: Option<String>,
    },
}

/// A runtime change.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "change", rename_all = "snake_case")]
pub enum Change {
    /// Hold (false) or release (true) a port's egress (SAI `PKT_TX_ENABLE`). Applied at once;
    /// buffers keep admitting while held.
    PortTx {
        /// Port name.
        port: String,
        /// Transmit?
        enable: bool,
    },
    /// The PFC watchdog's big red switch. Applied at once.
    BigRedSwitch {
        /// On?
        on: bool,
    },
    /// Any configuration key (dotted path as in the TOML file, e.g.
    /// `buffer_profile.lossless.dynamic_th`) set to a TOML value (e.g. `-2`, `[3, 4]`,
    /// `"drop"`). The whole configuration is validated like the file; when valid it replaces the
    /// running one (queues drain first, counters carry over).
    Key {
        /// Dotted key.
        key: String,
        /// TOML value.
        value: String,
    },
}

/// A capture request. After the response line, the server streams records, each:
/// `u64 unix_ns | u16 port | u8 transmitted | u32 orig_len | u16 len | len bytes`, little endian,
/// until the client closes the connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureRequest {
    /// Port name.
    pub port: String,
    /// Only MAC Control frames (PFC, PAUSE).
    pub control_only: bool,
}

/// The answer to a request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    /// Whether the request succeeded.
    pub ok: bool,
    /// Why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The data (shape depends on the request).
    #[serde(default)]
    pub data: serde_json::Value,
}

impl Response {
    /// A success carrying `data`.
    pub fn ok(data: impl Serialize) -> Self {
        Self {
            ok: true,
            error: None,
            data: serde_json::to_value(data).unwrap_or(serde_json::Value::Null),
        }
    }

    /// A failure.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            ok: false,
            error: Some(message.into()),
            data: serde_json::Value::Null,
        }
    }
}

/// PFC counters of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcCounters {
    /// Port name.
    pub port: String,
    /// PFC frames received per priority (XON included).
    pub rx: [u64; 8],
    /// PFC frames sent per priority (XON included).
    pub tx: [u64; 8],
    /// Time each priority was held by received PFC, µs.
    pub rx_paused_us: [u64; 8],
    /// IEEE 802.3x PAUSE frames received.
    pub pause_rx: u64,
}

/// `pfc_enable` of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcPriority {
    /// Port name.
    pub port: String,
    /// Lossless priorities, SONiC's text ("3,4").
    pub lossless: String,
}

/// One queue's counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounters {
    /// Port name.
    pub port: String,
    /// Queue index.
    pub queue: u8,
    /// Frames sent.
    pub packets: u64,
    /// Bytes sent.
    pub bytes: u64,
    /// Frames dropped.
    pub drop_packets: u64,
    /// Bytes dropped.
    pub drop_bytes: u64,
    /// Frames marked CE.
    pub ecn_marked: u64,
    /// Depth now, bytes.
    pub depth_bytes: u64,
    /// Mean queueing delay of sent frames, ns.
    pub mean_delay_ns: u64,
}

/// A watermark row: one port, eight values in bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WatermarkRow {
    /// Port name.
    pub port: String,
    /// Bytes per PG or queue 0..=7.
    pub bytes: [u64; 8],
}

/// Drops per PG of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgDropRow {
    /// Port name.
    pub port: String,
    /// Dropped frames per PG.
    pub drops: [u64; 8],
}

/// Packets, bytes and drops per PG of one port (SAI
/// `INGRESS_PRIORITY_GROUP_STAT_PACKETS`, `_BYTES`, `_DROPPED_PACKETS`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PgCountersRow {
    /// Port name.
    pub port: String,
    /// Frames that reached admission of each PG, dropped ones included.
    pub packets: [u64; 8],
    /// Bytes of those frames.
    pub bytes: [u64; 8],
    /// Frames each PG dropped (a subset of `packets`).
    pub drop_packets: [u64; 8],
}

/// One port of SONiC's portstat view (`show interfaces counters`), on SAI's port counters.
/// Rates are `None` until two samples a second apart were taken (SONiC prints `N/A`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PortstatRow {
    /// Port name (`IFACE`).
    pub iface: String,
    /// `U` (link up), `D` (down) or `N/A` (unknown), as SONiC's `STATE`.
    pub state: String,
    /// `RX_OK`: frames received whole and well-formed, MAC Control frames (PFC, PAUSE)
    /// excluded, frames later discarded included (`IF_IN_UCAST_PKTS + IF_IN_NON_UCAST_PKTS`).
    pub rx_ok: u64,
    /// `RX_BPS`: bytes received per second, smoothed as SONiC does.
    pub rx_bps: Option<f64>,
    /// `RX_PPS`: RX_OK frames per second.
    pub rx_pps: Option<f64>,
    /// `RX_UTIL`: `rx_bps` over the port's speed, percent.
    pub rx_util: Option<f64>,
    /// `RX_ERR` (`IF_IN_ERRORS`): runts, oversize frames, malformed MAC Control frames.
    pub rx_err: u64,
    /// `RX_DRP` (`IF_IN_DISCARDS`): received frames discarded at ingress, plus frames the
    /// kernel or NIC dropped before the switch saw them.
    pub rx_drp: u64,
    /// `RX_OVR` (`ETHER_RX_OVERSIZE_PKTS`): frames longer than the port's MTU.
    pub rx_ovr: u64,
    /// `TX_OK`: data frames sent (generated PFC frames excluded).
    pub tx_ok: u64,
    /// `TX_BPS`: bytes sent per second.
    pub tx_bps: Option<f64>,
    /// `TX_PPS`: TX_OK frames per second.
    pub tx_pps: Option<f64>,
    /// `TX_UTIL`: `tx_bps` over the port's speed, percent.
    pub tx_util: Option<f64>,
    /// `TX_ERR` (`IF_OUT_ERRORS`): frames the device refused.
    pub tx_err: u64,
    /// `TX_DRP` (`IF_OUT_DISCARDS`): frames discarded at or in one of the port's egress
    /// queues (the sum of the queues' dropped packets).
    pub tx_drp: u64,
    /// `TX_OVR` (`ETHER_TX_OVERSIZE_PKTS`): not counted (`None`, SONiC's `N/A`).
    pub tx_ovr: Option<u64>,
}

/// A pool watermark row.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PoolWatermarkRow {
    /// Pool name.
    pub pool: String,
    /// Highest shared use, bytes.
    pub shared_bytes: u64,
    /// Highest headroom in use by the pool's PGs (the shared headroom pool when there is one,
    /// else private headroom), bytes.
    pub headroom_bytes: u64,
}

/// PFC watchdog configuration of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcwdConfigRow {
    /// Port name.
    pub port: String,
    /// drop | forward | alert, or "disabled".
    pub action: String,
    /// ms.
    pub detection_time_ms: u64,
    /// ms.
    pub restoration_time_ms: u64,
    /// Watched priorities.
    pub priorities: String,
}

/// PFC watchdog configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcwdConfig {
    /// Poll interval, ms.
    pub poll_interval_ms: u64,
    /// Big red switch.
    pub big_red_switch: bool,
    /// Per port.
    pub ports: Vec<PfcwdConfigRow>,
}

/// PFC watchdog statistics of one queue (SONiC `show pfcwd stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PfcwdStatsRow {
    /// `<port>:<queue>`.
    pub queue: String,
    /// operational | stormed.
    pub status: String,
    /// Storms detected.
    pub storm_detected: u64,
    /// Storms restored.
    pub storm_restored: u64,
    /// Frames sent while stormed.
    pub tx_ok: u64,
    /// Frames dropped while stormed.
    pub tx_drop: u64,
    /// Frames received while stormed.
    pub rx_ok: u64,
    /// Frames dropped at ingress while stormed.
    pub rx_drop: u64,
    /// Same, last storm only.
    pub tx_last_ok: u64,
    /// Same, last storm only.
    pub tx_last_drop: u64,
    /// Same, last storm only.
    pub rx_last_ok: u64,
    /// Same, last storm only.
    pub rx_last_drop: u64,
}

/// One port's summary.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortSummary {
    /// Port name.
    pub port: String,
    /// Device.
    pub device: String,
    /// Mb/s.
    pub speed_mbps: u64,
    /// Link state: "up", "down" or "unknown".
    #[serde(default)]
    pub link: String,
    /// Transmit enabled.
    pub tx_enabled: bool,
    /// Frames received.
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Drops by reason (only non-zero reasons).
    pub drops: BTreeMap<String, u64>,
    /// Frames the kernel or NIC dropped before the switch saw them.
    pub backend_rx_missed: u64,
    /// Frames the device refused.
    pub backend_tx_failed: u64,
    /// 802.3x PAUSE frames received and ignored (the port does not honour 802.3x).
    #[serde(default)]
    pub pause_rx_ignored: u64,
    /// Source addresses received that could not be learned: the MAC table was full (the frames
    /// were still forwarded; frames to those stations are flooded).
    #[serde(default)]
    pub fdb_learn_table_full: u64,
}

/// A MAC table entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FdbRow {
    /// VLAN.
    pub vlan: u16,
    /// MAC address.
    pub mac: String,
    /// Port name.
    pub port: String,
    /// Seconds since last seen (0 for static entries).
    pub age_s: u64,
    /// `"dynamic"` (learned) or `"static"` (configured, `[[fdb.static]]`), as SONiC's `show mac`
    /// types them.
    #[serde(default)]
    pub kind: String,
}

/// `show ip route`: the mirror's state and the installed routes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRouteTable {
    /// The netlink mirror's counters.
    pub mirror: RouteMirrorSummary,
    /// Installed prefixes, IPv4 then IPv6, in prefix order.
    pub routes: Vec<IpRouteRow>,
}

/// The netlink mirror and the FIB hand-over, counted since the mirror started.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RouteMirrorSummary {
    /// Whether a mirror runs (a port is routed).
    pub enabled: bool,
    /// Netlink messages applied (dumps and notifications).
    pub messages: u64,
    /// Full resynchronisations (the initial dump, link changes, overruns).
    pub resyncs: u64,
    /// Netlink overruns (`ENOBUFS`), each repaired by a resync.
    pub overruns: u64,
    /// Netlink messages that could not be decoded.
    pub decode_errors: u64,
    /// Changes the FIB refused (a table full).
    pub fib_refused: u64,
    /// IPv4 prefixes installed.
    pub routes_v4: u64,
    /// IPv6 prefixes installed.
    pub routes_v6: u64,
    /// Prefixes punted to the kernel because a path leaves through a non-port interface.
    pub routes_via_foreign_interface: u64,
    /// Prefixes punted to the kernel because their nexthop object is unknown.
    pub routes_missing_nexthop: u64,
    /// Prefixes punted to the kernel because the FIB was full.
    pub routes_fib_full: u64,
    /// Next hops in the FIB (the three fixed ones included).
    pub next_hops: u64,
    /// ECMP groups in the FIB.
    pub ecmp_groups: u64,
    /// FIB snapshots published to the lcores.
    pub published: u64,
    /// Turns a publication waited for an lcore to give back the spare copy.
    pub publish_waits: u64,
    /// Sends refused by a full lcore ring (retried).
    pub send_refused: u64,
    /// Failed netlink polls (retried).
    pub netlink_errors: u64,
}

/// One installed prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRouteRow {
    /// `10.2.0.0/31`, `2001:db8::/64`.
    pub prefix: String,
    /// Who installed it in the kernel (`rtm_protocol`): `kernel`, `connected`, `boot`,
    /// `static`, `bgp`, `ospf`, `isis`, `zebra`, or the number; `local` for the switch's
    /// addresses; `neighbor` for the host route the mirror makes for a resolved neighbour.
    pub protocol: String,
    /// FRR's code letter (`C` connected, `K` kernel, `S` static, `B` BGP, `O` OSPF, `L` local;
    /// `N` a neighbour's host route).
    pub code: String,
    /// What the dataplane does: `forward`, `ecmp`, `local` (to the switch: punted ip2me),
    /// `blackhole`, `kernel` (punted: the kernel forwards or answers).
    pub action: String,
    /// Why it goes to the kernel, when `action` is `kernel` and the mirror knows.
    pub reason: Option<String>,
    /// The next hops (several for ECMP).
    pub next_hops: Vec<IpRouteNextHop>,
}

/// A next hop of a route.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpRouteNextHop {
    /// The gateway; `None`: directly connected.
    pub via: Option<String>,
    /// The port.
    pub interface: String,
    /// The neighbour's MAC, when resolved (else packets to it are punted: neighbor_miss).
    pub mac: Option<String>,
    /// ECMP buckets this member holds (`None` for a single next hop).
    pub weight: Option<u32>,
}

/// A neighbour of a routed port (the kernel's ARP/ND entry).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpNeighborRow {
    /// IP address.
    pub address: String,
    /// `ipv4` or `ipv6`.
    pub family: String,
    /// MAC address, if known.
    pub mac: Option<String>,
    /// The port.
    pub interface: String,
    /// `ip neigh`'s state: `REACHABLE`, `STALE`, `INCOMPLETE`, `FAILED`, `PERMANENT`, ….
    pub state: String,
    /// Whether the dataplane forwards to it (a usable MAC); otherwise packets to it are punted
    /// for the kernel to resolve.
    pub resolved: bool,
}

/// A host interface and its counters since it was created.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInterfaceRow {
    /// The port (and the TAP's name).
    pub interface: String,
    /// Punted frames written to the TAP.
    pub punt_frames: u64,
    /// Punted frames dropped: the TAP's queue towards the kernel was full.
    pub punt_tap_full: u64,
    /// Punted frames the TAP refused.
    pub punt_errors: u64,
    /// Frames the kernel sent on the TAP, handed to the dataplane.
    pub inject_frames: u64,
    /// Frames the kernel sent that the dataplane could not take (its inject ring full).
    pub inject_refused: u64,
    /// Failed reads of the TAP.
    pub read_errors: u64,
    /// The dataplane's own counts for the port: frames it enqueued from the control plane.
    pub dataplane_inject_frames: u64,
    /// Frames from the control plane it dropped (rate limit, buffer, queue).
    pub dataplane_inject_drops: u64,
    /// Packets received on the port and routed by the dataplane (SAI
    /// `ROUTER_INTERFACE_STAT_IN_PACKETS`, SONiC `show interfaces counters rif` RX_OK).
    pub rif_in_packets: u64,
    /// Bytes of those.
    pub rif_in_octets: u64,
    /// Packets routed out of the port (`ROUTER_INTERFACE_STAT_OUT_PACKETS`, TX_OK).
    pub rif_out_packets: u64,
    /// Bytes of those.
    pub rif_out_octets: u64,
    /// Frames the dataplane punted from the port, by punt reason (non-zero ones).
    #[serde(default)]
    pub punted: BTreeMap<String, u64>,
}

/// `show host-interfaces`: every host interface, and what was punted on ports without one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostInterfacesView {
    /// Host interfaces (routed ports).
    pub interfaces: Vec<HostInterfaceRow>,
    /// Punted frames dropped because their port has no host interface, by punt reason.
    pub punted_unconsumed: BTreeMap<String, u64>,
}

/// `show lldp neighbors`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LldpView {
    /// Our System Name.
    pub system_name: String,
    /// Our Chassis ID (the switch MAC).
    pub chassis_id: String,
    /// Every neighbour of every port, in port order.
    pub neighbors: Vec<LldpNeighborRow>,
    /// Per-port counters (802.1AB LLDP MIB `lldpStats…`).
    pub ports: Vec<LldpPortRow>,
    /// The last LLDP/DCBX events logged, oldest first.
    pub recent_events: Vec<LldpEventRow>,
}

/// One LLDP neighbour.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LldpNeighborRow {
    /// Our port.
    pub local_port: String,
    /// Its Chassis ID (a MAC as `aa:bb:…`, names as text, else hex).
    pub chassis_id: String,
    /// Its Port ID.
    pub port_id: String,
    /// Port Description.
    pub port_description: Option<String>,
    /// System Name.
    pub system_name: Option<String>,
    /// System Description.
    pub system_description: Option<String>,
    /// Capabilities, lldpctl's letters (`B` bridge, `R` router, `S` station; lower case: not
    /// enabled).
    pub capabilities: String,
    /// Management addresses.
    pub management_addresses: Vec<String>,
    /// The TTL it announced, seconds.
    pub ttl_s: u16,
    /// Seconds since it was first heard.
    pub age_s: u64,
    /// Seconds until it is forgotten unless it sends again.
    pub expires_in_s: u64,
    /// It sends 802.1Qaz DCBX TLVs.
    pub dcbx: bool,
    /// Source MAC of its last LLDPDU.
    pub src_mac: String,
}

/// LLDP counters of one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LldpPortRow {
    /// The port.
    pub port: String,
    /// `lldp_admin_status`.
    pub admin_status: String,
    /// LLDPDUs built (lldpStatsTxPortFramesTotal).
    pub tx_frames: u64,
    /// LLDPDUs the dataplane took to send.
    pub tx_injected: u64,
    /// LLDPDUs the dataplane refused (inject ring full): lost.
    pub tx_inject_refused: u64,
    /// LLDPDUs too long for one frame (lldpStatsTxLLDPDULengthErrors).
    pub tx_length_errors: u64,
    /// LLDP frames received.
    pub rx_frames: u64,
    /// Frames not used (lldpStatsRxPortFramesDiscardedTotal).
    pub rx_discarded: u64,
    /// Invalid frames by reason (lldpStatsRxPortFramesErrors).
    pub rx_errors: BTreeMap<String, u64>,
    /// Valid frames from one neighbour too many (tooManyNeighbors).
    pub rx_table_full: u64,
    /// Frames received while the port does not receive.
    pub rx_disabled: u64,
    /// Optional TLVs discarded (lldpStatsRxPortTLVsDiscardedTotal).
    pub rx_tlvs_discarded: u64,
    /// TLVs not decoded (lldpStatsRxPortTLVsUnrecognizedTotal).
    pub rx_tlvs_unrecognized: u64,
    /// Neighbours aged out (lldpStatsRxPortAgeoutsTotal).
    pub ageouts: u64,
    /// Neighbours added.
    pub inserts: u64,
    /// Neighbours removed.
    pub deletes: u64,
}

/// One logged LLDP/DCBX event.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LldpEventRow {
    /// Seconds ago.
    pub age_s: u64,
    /// The port.
    pub port: String,
    /// `neighbor_added`, `neighbor_changed`, `neighbor_removed`, `dcbx_verdict`.
    pub kind: String,
    /// The logged sentence.
    pub message: String,
}

/// `show dcbx`: one port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxRow {
    /// The port.
    pub port: String,
    /// `lldp_admin_status`.
    pub admin_status: String,
    /// `no-neighbour`, `no-dcbx`, `consistent` or `mismatch`.
    pub status: String,
    /// Why: mismatches first, then notes.
    pub findings: Vec<DcbxFinding>,
    /// The neighbour compared with (chassis and port).
    pub neighbor: Option<String>,
    /// What this port advertises.
    pub local: DcbxSide,
    /// What the neighbour advertises (`None`: no neighbour).
    pub peer: Option<DcbxSide>,
}

/// One finding of a DCBX verdict.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxFinding {
    /// Stable name (`peer_pfc_on_lossy_priorities`, …).
    pub code: String,
    /// A mismatch (else a note).
    pub mismatch: bool,
    /// The sentence.
    pub message: String,
}

/// One side's IEEE 802.1Qaz TLVs (each `None` when that side sends no such TLV).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxSide {
    /// PFC Configuration.
    pub pfc: Option<DcbxPfc>,
    /// ETS Configuration's willing bit.
    pub ets_willing: Option<bool>,
    /// ETS Configuration tables.
    pub ets: Option<DcbxEts>,
    /// ETS Recommendation tables.
    pub ets_recommendation: Option<DcbxEts>,
    /// Application Priority entries.
    pub app: Option<Vec<DcbxApp>>,
}

/// A PFC Configuration TLV.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxPfc {
    /// Priorities with PFC, SONiC's spelling (`3,4`).
    pub enable: String,
    /// The same as a bitmap (bit n = priority n), as lldptool's `pfc_enable`.
    pub enable_bitmap: u8,
    /// Willing.
    pub willing: bool,
    /// MACsec bypass capability.
    pub mbc: bool,
    /// PFC capability: priorities that may have PFC at once.
    pub cap: u8,
}

/// ETS tables.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxEts {
    /// Priority → traffic class, index = priority.
    pub priority_tc: [u8; 8],
    /// Bandwidth per traffic class, percent.
    pub tc_bandwidth_percent: [u8; 8],
    /// Transmission selection per traffic class (`strict`, `ets`, `cbs`, `vendor`).
    pub tsa: Vec<String>,
}

/// One Application Priority entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DcbxApp {
    /// Selector (3: UDP port, 5: DSCP; 802.1Q-2018 table D-9).
    pub selector: u8,
    /// Protocol: port, EtherType or DSCP.
    pub protocol: u16,
    /// Priority.
    pub priority: u8,
}

/// The running configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunningConfig {
    /// The file it came from.
    pub file: String,
    /// The TOML text (with changes made by `set`).
    pub text: String,
    /// What `headroom check` prints for it.
    pub derived: String,
}

/// Everything numeric, for `top`, Prometheus and scripts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Seconds since the switch started.
    pub uptime_s: f64,
    /// Port summaries.
    pub ports: Vec<PortSummary>,
    /// PFC counters.
    pub pfc: Vec<PfcCounters>,
    /// Queue counters.
    pub queues: Vec<QueueCounters>,
    /// Bytes held per PG now.
    pub pg_used: Vec<WatermarkRow>,
    /// Watchdog.
    pub pfcwd: Vec<PfcwdStatsRow>,
    /// Queueing-delay histograms: per (port, queue) the counts of the log2 buckets
    /// (`headroom_core::counters::delay_bucket`), since start (carried over
    /// reconfigurations, not affected by `clear counters`: use differences).
    pub delay_histograms: Vec<DelayHistogramRow>,
}

/// A queueing-delay histogram.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DelayHistogramRow {
    /// Port name.
    pub port: String,
    /// Queue.
    pub queue: u8,
    /// Count per log2 bucket.
    pub buckets: Vec<u64>,
}
