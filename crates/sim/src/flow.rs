//! Traffic flows: what a host sends, and how the receiving host recognises and counts it.
//!
//! Every data frame of a flow is Ethernet (+ an optional IEEE 802.1Q tag) / IPv4 / UDP with a
//! 16-byte payload header, then zero padding up to the flow's frame length:
//!
//! | bytes | field |
//! |---|---|
//! | 0..4 | magic `HRSM` |
//! | 4..8 | flow id, big endian |
//! | 8..16 | sequence number, big endian, from 0 |
//!
//! The UDP checksum is 0 ("not computed", RFC 768; allowed for IPv4), so a frame is stamped by
//! rewriting its sequence number in a copy of a template, without recomputing anything.

use crate::{HostId, SimError};
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::time::Instant;
use headroom_core::types::Priority;
use headroom_wire::ethernet::{parse_l2, EtherType, EthernetFrame, EthernetRepr, MacAddress};
use headroom_wire::ip::{Ecn, IpProtocol};
use headroom_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use headroom_wire::vlan::{insert_vlan_tag, VlanTci, TAG_LEN};
use std::net::Ipv4Addr;

/// Index of a flow in its [`crate::Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub usize);

/// First bytes of the UDP payload of every simulator data frame.
pub const PAYLOAD_MAGIC: [u8; 4] = *b"HRSM";
/// Bytes of the payload header (magic, flow id, sequence number).
pub const PAYLOAD_HEADER_LEN: usize = 16;
/// UDP destination port of simulator frames (an arbitrary unassigned port).
pub const UDP_DST_PORT: u16 = 5999;
const UDP_HEADER_LEN: usize = 8;
const ETH_IPV4_UDP_LEN: usize = 14 + 20 + UDP_HEADER_LEN;
/// Shortest flow frame: the headers and the payload header, padded to the 60-byte minimum.
pub const MIN_FLOW_FRAME_LEN: usize = 60;
/// Longest flow frame (a 9216-byte jumbo; the switch applies its own MTU).
pub const MAX_FLOW_FRAME_LEN: usize = 9216;

/// What a flow sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// Sending host.
    pub src: HostId,
    /// Receiving host (its MAC address is the destination).
    pub dst: HostId,
    /// DSCP of the IPv4 header: what a DSCP-trusting switch classifies on.
    pub dscp: u8,
    /// ECN codepoint the sender writes (ECT(0) for RoCE-like traffic).
    pub ecn: Ecn,
    /// The IEEE 802.1p priority of the flow at the sending NIC: the PCP of the tag, if tagged,
    /// and the PFC priority whose pause stops the flow.
    pub priority: Priority,
    /// VLAN to tag frames with (1..=4094); `None` sends untagged frames.
    pub vlan: Option<u16>,
    /// Length of each frame, bytes without FCS and without the tag (a tag adds 4).
    pub frame_len: usize,
    /// Sending rate in bits per second of frame bytes on the wire (including preamble, FCS
    /// and inter-frame gap); `None` sends back to back at the link rate.
    /// Time spent paused is not made up: after a pause the flow resumes at its rate.
    pub rate_bps: Option<u64>,
    /// Frames to send in total; `None` sends for ever.
    pub frames: Option<u64>,
    /// When the first frame may leave.
    pub start: Instant,
}

impl FlowSpec {
    /// A flow from `src` to `dst` with DSCP `dscp` at 802.1p priority `priority`: untagged,
    /// not ECN-capable, 1000-byte frames, back to back, for ever, from time zero.
    #[must_use]
    pub fn new(src: HostId, dst: HostId, dscp: u8, priority: Priority) -> Self {
        Self {
            src,
            dst,
            dscp,
            ecn: Ecn::NotEct,
            priority,
            vlan: None,
            frame_len: 1000,
            rate_bps: None,
            frames: None,
            start: Instant::ZERO,
        }
    }

    pub(crate) fn validate(&self, hosts: usize) -> Result<(), SimError> {
        let bad = |why: String| Err(SimError::InvalidFlow(why));
        if self.src.0 >= hosts || self.dst.0 >= hosts {
            return Err(SimError::UnknownHost);
        }
        if self.src == self.dst {
            return bad("a flow needs two different hosts".into());
        }
        if self.dscp > 63 {
            return bad(format!("DSCP {} not in 0..=63", self.dscp));
        }
        if let Some(vid) = self.vlan {
            if !(1..=4094).contains(&vid) {
                return bad(format!("VLAN {vid} not in 1..=4094"));
            }
        }
        if !(MIN_FLOW_FRAME_LEN..=MAX_FLOW_FRAME_LEN).contains(&self.frame_len) {
            return bad(format!(
                "frame length {} not in {MIN_FLOW_FRAME_LEN}..={MAX_FLOW_FRAME_LEN}",
                self.frame_len
            ));
        }
        if self.rate_bps == Some(0) {
            return bad("a rate must be > 0 (use frames: Some(0) for a silent flow)".into());
        }
        Ok(())
    }
}

/// What happened to a flow's frames so far.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Frames the sender put on its link.
    pub sent_frames: u64,
    /// Bytes of those frames (as sent, tag included, no FCS).
    pub sent_bytes: u64,
    /// Frames the receiver got.
    pub delivered_frames: u64,
    /// Bytes of those frames (as received).
    pub delivered_bytes: u64,
    /// Frames the receiver never saw: the sum of the gaps in the sequence numbers it got.
    pub lost_frames: u64,
    /// Frames that arrived with a sequence number lower than one already seen.
    pub reordered_frames: u64,
    /// Frames that arrived marked CE.
    pub ce_marked_frames: u64,
    /// When the last frame arrived.
    pub last_delivery: Option<Instant>,
}

/// A flow with its send state.
#[derive(Debug)]
pub(crate) struct Flow {
    pub(crate) spec: FlowSpec,
    pub(crate) stats: FlowStats,
    template: HeapFrame,
    seq_offset: usize,
    next_seq: u64,
    /// Earliest time the next frame may leave (rate limit and start).
    next_at: Instant,
    expected_seq: u64,
}

impl Flow {
    pub(crate) fn new(id: FlowId, spec: FlowSpec, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Self {
        let len = spec.frame_len;
        let mut buf = vec![0u8; len];
        EthernetRepr {
            src_addr: MacAddress(src_mac),
            dst_addr: MacAddress(dst_mac),
            ethertype: EtherType::Ipv4,
        }
        .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
        let ip_payload = len - 14 - 20;
        Ipv4Repr {
            src_addr: host_ip(spec.src),
            dst_addr: host_ip(spec.dst),
            protocol: IpProtocol::Udp,
            payload_len: ip_payload,
            hop_limit: 64,
            dscp: spec.dscp,
            ecn: spec.ecn,
            ident: 0,
            dont_frag: true,
            more_frags: false,
            frag_offset: 0,
        }
        .emit(&mut Ipv4Packet::new_unchecked(&mut buf[14..]));
        // UDP (RFC 768): ports, length, checksum 0 = not computed.
        let udp = &mut buf[34..42];
        let src_port = 49152 + u16::try_from(id.0 % 16384).unwrap_or(0);
        udp[0..2].copy_from_slice(&src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&UDP_DST_PORT.to_be_bytes());
        udp[4..6].copy_from_slice(&u16::try_from(ip_payload).unwrap_or(u16::MAX).to_be_bytes());
        let payload = &mut buf[ETH_IPV4_UDP_LEN..];
        payload[0..4].copy_from_slice(&PAYLOAD_MAGIC);
        payload[4..8].copy_from_slice(&u32::try_from(id.0).unwrap_or(u32::MAX).to_be_bytes());
        let mut template = HeapFrame::new(&buf);
        let mut seq_offset = ETH_IPV4_UDP_LEN + 8;
        if let Some(vid) = spec.vlan {
            let tci = VlanTci::new(spec.priority.get(), false, vid);
            let tagged =
                template.push_front(TAG_LEN) && insert_vlan_tag(template.data_mut(), tci).is_ok();
            debug_assert!(tagged, "a fresh heap frame has room for a tag");
            seq_offset += TAG_LEN;
        }
        Self {
            next_at: spec.start,
            spec,
            stats: FlowStats::default(),
            template,
            seq_offset,
            next_seq: 0,
            expected_seq: 0,
        }
    }

    /// Whether every frame was sent.
    pub(crate) fn finished(&self) -> bool {
        self.spec.frames.is_some_and(|n| self.next_seq >= n)
    }

    /// Earliest time the flow may send, ignoring pauses; `None` once finished.
    pub(crate) fn ready_at(&self) -> Option<Instant> {
        (!self.finished()).then_some(self.next_at)
    }

    /// The next frame, stamped, sent at `now`.
    pub(crate) fn take_frame(&mut self, now: Instant) -> HeapFrame {
        let mut frame = self.template.clone();
        frame.data_mut()[self.seq_offset..self.seq_offset + 8]
            .copy_from_slice(&self.next_seq.to_be_bytes());
        self.next_seq += 1;
        self.stats.sent_frames += 1;
        self.stats.sent_bytes += frame.len() as u64;
        self.next_at = match self.spec.rate_bps {
            // Paced: the next frame no sooner than one frame time at the rate after this one.
            Some(rate) => now.saturating_add_nanos(crate::link::wire_time_ns(frame.len(), rate)),
            None => now,
        };
        frame
    }

    /// Counts a frame of this flow received at `now`.
    pub(crate) fn deliver(&mut self, now: Instant, seq: u64, len: usize, ce: bool) {
        let s = &mut self.stats;
        s.delivered_frames += 1;
        s.delivered_bytes += len as u64;
        s.last_delivery = Some(now);
        if ce {
            s.ce_marked_frames += 1;
        }
        if seq >= self.expected_seq {
            s.lost_frames += seq - self.expected_seq;
            self.expected_seq = seq + 1;
        } else {
            s.reordered_frames += 1;
        }
    }
}

/// The IPv4 address of host `h`: 10.0.x.y with x.y = h + 1 (big endian).
pub(crate) fn host_ip(h: HostId) -> Ipv4Addr {
    let n = u16::try_from(h.0 + 1).unwrap_or(u16::MAX);
    let [hi, lo] = n.to_be_bytes();
    Ipv4Addr::new(10, 0, hi, lo)
}

/// EtherType of learning hellos: IEEE 802 local experimental EtherType 1.
pub const HELLO_ETHERTYPE: u16 = 0x88B5;

/// A 60-byte broadcast frame from `mac` with EtherType [`HELLO_ETHERTYPE`], tagged with `vlan`
/// (priority 0) if given.
pub(crate) fn hello_frame(mac: [u8; 6], vlan: Option<u16>) -> Result<HeapFrame, SimError> {
    let mut buf = [0u8; 60];
    EthernetRepr {
        src_addr: MacAddress(mac),
        dst_addr: MacAddress::BROADCAST,
        ethertype: EtherType::from(HELLO_ETHERTYPE),
    }
    .emit(&mut EthernetFrame::new_unchecked(&mut buf[..]));
    let mut frame = HeapFrame::new(&buf);
    if let Some(vid) = vlan {
        if !(1..=4094).contains(&vid) {
            return Err(SimError::InvalidFlow(format!("VLAN {vid} not in 1..=4094")));
        }
        let tagged = frame.push_front(TAG_LEN)
            && insert_vlan_tag(frame.data_mut(), VlanTci::new(0, false, vid)).is_ok();
        debug_assert!(tagged, "a fresh heap frame has room for a tag");
    }
    Ok(frame)
}

/// A simulator data frame as the receiving host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) dst: [u8; 6],
    pub(crate) flow: FlowId,
    pub(crate) seq: u64,
    pub(crate) ce: bool,
}

/// Reads the stamp of a simulator data frame; `None` for anything else (never panics).
pub(crate) fn read_stamp(data: &[u8]) -> Option<Stamp> {
    let l2 = parse_l2(data).ok()?;
    if l2.ethertype != EtherType::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(data.get(l2.payload_offset..)?).ok()?;
    if ip.protocol() != IpProtocol::Udp {
        return None;
    }
    let ce = ip.ecn() == Ecn::Ce;
    let payload = data.get(l2.payload_offset + ip.header_len() + UDP_HEADER_LEN..)?;
    let header = payload.get(..PAYLOAD_HEADER_LEN)?;
    if header[0..4] != PAYLOAD_MAGIC {
        return None;
    }
    let flow = u32::from_be_bytes(header[4..8].try_into().ok()?);
    let seq = u64::from_be_bytes(header[8..16].try_into().ok()?);
    Some(Stamp {
        dst: l2.dst_addr.0,
        flow: FlowId(usize::try_from(flow).ok()?),
        seq,
        ce,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamped_frames_round_trip_tagged_and_untagged() {
        for vlan in [None, Some(42)] {
            let mut spec = FlowSpec::new(HostId(0), HostId(1), 3, Priority::from_low_bits(3));
            spec.vlan = vlan;
            spec.frame_len = 128;
            spec.ecn = Ecn::Ect0;
            let mut flow = Flow::new(FlowId(7), spec, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
            let _ = flow.take_frame(Instant::ZERO);
            let f = flow.take_frame(Instant::ZERO);
            assert_eq!(f.len(), 128 + vlan.map_or(0, |_| TAG_LEN));
            let l2 = parse_l2(f.data()).unwrap();
            assert_eq!(l2.vlan.map(VlanTci::vid), vlan);
            if vlan.is_some() {
                assert_eq!(l2.vlan.unwrap().pcp(), 3);
            }
            let ip = Ipv4Packet::new_checked(&f.data()[l2.payload_offset..]).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!((ip.dscp(), ip.ecn()), (3, Ecn::Ect0));
            assert_eq!(usize::from(ip.total_len()), 128 - 14);
            let stamp = read_stamp(f.data()).unwrap();
            assert_eq!(stamp.flow, FlowId(7));
            assert_eq!(stamp.seq, 1);
            assert_eq!(stamp.dst, [2, 0, 0, 0, 0, 2]);
            assert!(!stamp.ce);
        }
    }

    #[test]
    fn garbage_is_not_a_stamp() {
        assert_eq!(read_stamp(&[]), None);
        assert_eq!(read_stamp(&[0u8; 60]), None);
        let mut spec = FlowSpec::new(HostId(0), HostId(1), 0, Priority::from_low_bits(0));
        spec.frame_len = 60;
        let mut flow = Flow::new(FlowId(0), spec, [2; 6], [4; 6]);
        let f = flow.take_frame(Instant::ZERO);
        for cut in 0..f.len() {
            // Truncated copies never panic; the full frame parses.
            let _ = read_stamp(&f.data()[..cut]);
        }
        assert!(read_stamp(f.data()).is_some());
    }

    #[test]
    fn sequence_gaps_count_as_lost_and_late_frames_as_reordered() {
        let spec = FlowSpec::new(HostId(0), HostId(1), 0, Priority::from_low_bits(0));
        let mut flow = Flow::new(FlowId(0), spec, [2; 6], [4; 6]);
        for seq in [0, 1, 4, 5, 2] {
            flow.deliver(Instant::ZERO, seq, 100, false);
        }
        assert_eq!(flow.stats.lost_frames, 2);
        assert_eq!(flow.stats.reordered_frames, 1);
        assert_eq!(flow.stats.delivered_frames, 5);
    }
}
