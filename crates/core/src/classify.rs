//! Classification: per-port facts derived once from the parameters (trust, QoS maps, VLAN
//! membership, which PGs are lossless), and the traffic class of a frame from its PCP or DSCP.
//!
//! Received frames are classified with their receiving port's facts; frames the control plane
//! injects, with the facts of the port they leave by ([`crate::inject`]).

use crate::params::{PortParams, QosMaps, Trust, VlanMode};
use crate::types::{Priority, TrafficClass, PRIORITY_COUNT};
use headroom_wire::ethernet::{EtherType, L2Header};

/// Per-port facts the ingress side consults for every frame, derived once from the parameters.
#[derive(Debug, Clone)]
pub(crate) struct PortView {
    pub(crate) trust: Trust,
    pub(crate) default_priority: Priority,
    pub(crate) maps: QosMaps,
    pub(crate) pfc_enable: u8,
    pub(crate) pause_802_3x: bool,
    pub(crate) speed_bps: u64,
    pub(crate) max_payload: usize,
    /// VLAN membership, bit per VID.
    pub(crate) vlans: Box<[u64; 64]>,
    /// VLAN of untagged and priority-tagged frames, if any.
    pub(crate) untagged_vid: Option<u16>,
    /// Access port: every VLAN leaves untagged.
    pub(crate) access: bool,
    /// Trunk native VLAN (leaves untagged).
    pub(crate) native: Option<u16>,
    /// A router interface ([`VlanMode::Routed`]): in no VLAN, routes frames to `mac`.
    pub(crate) routed: bool,
    /// The port's MAC address (its router MAC when `routed`).
    pub(crate) mac: [u8; 6],
    /// Per PG: whether it has headroom (lossless).
    pub(crate) lossless_pg: [bool; PRIORITY_COUNT],
    /// The same, bit per PG.
    pub(crate) lossless_mask: u8,
}

impl PortView {
    pub(crate) fn new(p: &PortParams) -> Self {
        let mut vlans = Box::new([0u64; 64]);
        let mut set = |vid: u16| vlans[usize::from(vid / 64)] |= 1 << (vid % 64);
        let (untagged_vid, access, native) = match &p.vlan {
            VlanMode::Access { vid } => {
                set(*vid);
                (Some(*vid), true, None)
            }
            VlanMode::Trunk { allowed, native } => {
                for v in allowed.iter().chain(native.iter()) {
                    set(*v);
                }
                (*native, false, *native)
            }
            // In no VLAN: `member` is false for every VID (no flooding, no bridging to it), and
            // what is routed out of it leaves untagged (`access`).
            VlanMode::Routed => (None, true, None),
        };
        Self {
            trust: p.trust,
            default_priority: p.default_priority,
            maps: p.maps,
            pfc_enable: p.pfc_enable.0,
            pause_802_3x: p.pause_802_3x,
            speed_bps: p.speed_bps,
            max_payload: usize::try_from(p.mtu_bytes).unwrap_or(usize::MAX),
            vlans,
            untagged_vid,
            access,
            native,
            routed: p.vlan == VlanMode::Routed,
            mac: p.mac,
            lossless_pg: p.pgs.map(|pg| pg.is_lossless()),
            lossless_mask: p
                .pgs
                .iter()
                .enumerate()
                .filter(|(_, pg)| pg.is_lossless())
                .fold(0, |m, (i, _)| m | 1 << i),
        }
    }

    #[inline]
    pub(crate) fn member(&self, vid: u16) -> bool {
        vid < 4096 && self.vlans[usize::from(vid / 64)] & (1 << (vid % 64)) != 0
    }

    /// Whether frames of `vid` leave this port tagged.
    #[inline]
    pub(crate) fn egress_tagged(&self, vid: u16) -> bool {
        !self.access && self.native != Some(vid)
    }
}

/// Finds the traffic class by the port's trust, and the IP header if there is one.
#[inline]
pub(crate) fn classify(
    view: &PortView,
    l2: &L2Header,
    data: &[u8],
) -> (TrafficClass, Option<(usize, bool)>) {
    let off = l2.payload_offset;
    let l3 = match l2.ethertype {
        // Version nibble checked; a header too short to hold the DSCP is treated as non-IP.
        EtherType::Ipv4 if data.len() >= off + 20 && data[off] >> 4 == 4 => Some((off, false)),
        EtherType::Ipv6 if data.len() >= off + 40 && data[off] >> 4 == 6 => Some((off, true)),
        _ => None,
    };
    let tc = match view.trust {
        Trust::Dot1p => {
            let pcp = l2.vlan.map_or(view.default_priority, |tci| {
                Priority::from_low_bits(tci.pcp())
            });
            view.maps.dot1p_to_tc[pcp.index()]
        }
        Trust::Dscp => match l3 {
            Some((o, false)) => view.maps.dscp_to_tc[usize::from(data[o + 1] >> 2)],
            Some((o, true)) => {
                let traffic_class = (data[o] & 0x0F) << 4 | data[o + 1] >> 4;
                view.maps.dscp_to_tc[usize::from(traffic_class >> 2)]
            }
            None => view.maps.dot1p_to_tc[view.default_priority.index()],
        },
    };
    (tc, l3)
}
