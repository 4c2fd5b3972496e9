//! Hosts: one NIC each, a traffic source and a sink.
//!
//! As a source, a host sends the frames of its flows round robin, one at a time when its link
//! is free, and honours IEEE 802.1Qbb PFC like a NIC: a PFC frame received for priority p stops
//! the flows of priority p for `quanta × 512` bit times at the link rate from the end of the
//! PFC frame (a new frame restarts the timer; quanta 0 resumes at once; 802.1Qbb 36.1.3.3,
//! 802.3 Annex 31B). A frame already on the wire is not affected. Raw frames injected with
//! [`crate::Sim::inject`] go first and ignore pauses (they model a misbehaving or a control
//! plane sender, e.g. a peer that storms PFC).
//!
//! As a sink, a host absorbs everything at line rate (it never sends PFC) and counts the
//! frames of the flows addressed to it.
//!
//! A RoCE host ([`crate::Sim::add_rdma_host`]) is a [`RdmaHost`] instead: its NIC does all of
//! the above the way an RDMA NIC does (see [`crate::rdma`]); injected frames still go first.

use crate::flow::{read_stamp, Flow, FlowId};
use crate::rdma::RdmaHost;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::time::Instant;
use headroom_core::types::{Priority, PRIORITY_COUNT};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
use headroom_wire::pause::quanta_to_nanos;
use std::collections::VecDeque;

/// Index of a host in its [`crate::Sim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub usize);

/// Frames a host holds for injection at most.
pub const MAX_INJECTED_FRAMES: usize = 65_536;

/// A host's identity.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostParams {
    /// Name, for messages.
    pub name: String,
    /// The NIC's MAC address (unicast).
    pub mac: [u8; 6],
}

impl HostParams {
    /// Host number `n`: name `h<n>`, locally administered MAC `02:48:53:00` followed by `n`
    /// (big endian).
    #[must_use]
    pub fn numbered(n: u16) -> Self {
        let [hi, lo] = n.to_be_bytes();
        Self {
            name: format!("h{n}"),
            mac: [0x02, 0x48, 0x53, 0x00, hi, lo],
        }
    }
}

/// What a host saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostStats {
    /// PFC frames received with each priority's enable bit set (XON included).
    pub pfc_rx: [u64; PRIORITY_COUNT],
    /// IEEE 802.3x PAUSE frames received (counted, not honoured: PFC NICs ignore them).
    pub pause_rx: u64,
    /// Data frames of flows addressed to this host.
    pub flow_rx: u64,
    /// Frames addressed to another unicast MAC address (a NIC filters them out; a count above 0
    /// means the switches flooded).
    pub foreign_rx: u64,
    /// Frames for this host (or broadcast/multicast) that are not flow frames: learning hellos,
    /// malformed MAC Control frames, stamps of unknown flows.
    pub other_rx: u64,
    /// Pause episodes started per priority: XOFF frames received while not paused.
    pub pause_episodes: [u64; PRIORITY_COUNT],
}

/// A host: a NIC on one link.
#[derive(Debug)]
pub struct Host {
    pub(crate) id: HostId,
    pub(crate) params: HostParams,
    /// Link rate, set when connected.
    pub(crate) rate_bps: u64,
    paused_until: [Instant; PRIORITY_COUNT],
    /// Flows this host sends, in the order they were added.
    pub(crate) flows: Vec<FlowId>,
    next_flow: usize,
    injected: VecDeque<HeapFrame>,
    pub(crate) stats: HostStats,
    /// A RoCE NIC ([`crate::rdma`]) instead of the plain flow sender and sink.
    pub(crate) rdma: Option<Box<RdmaHost>>,
}

impl Host {
    pub(crate) fn new(id: HostId, params: HostParams) -> Self {
        Self {
            id,
            params,
            rate_bps: 0,
            paused_until: [Instant::ZERO; PRIORITY_COUNT],
            flows: Vec::new(),
            next_flow: 0,
            injected: VecDeque::new(),
            stats: HostStats::default(),
            rdma: None,
        }
    }

    /// The RoCE NIC and its flows, for a RoCE host.
    #[must_use]
    pub fn rdma(&self) -> Option<&RdmaHost> {
        self.rdma.as_deref()
    }

    /// The host's identity.
    #[must_use]
    pub fn params(&self) -> &HostParams {
        &self.params
    }

    /// What the host saw.
    #[must_use]
    pub fn stats(&self) -> &HostStats {
        &self.stats
    }

    /// Whether `priority` is paused at `now`.
    #[must_use]
    pub fn is_paused(&self, priority: Priority, now: Instant) -> bool {
        now < self.paused_until[priority.index()]
    }

    /// Until when `priority` is paused (in the past when it is not).
    #[must_use]
    pub fn paused_until(&self, priority: Priority) -> Instant {
        self.paused_until[priority.index()]
    }

    pub(crate) fn inject(&mut self, frame: HeapFrame) -> bool {
        if self.injected.len() >= MAX_INJECTED_FRAMES {
            return false;
        }
        self.injected.push_back(frame);
        true
    }

    /// Handles a frame received whole at `now`.
    pub(crate) fn receive(&mut self, now: Instant, frame: &HeapFrame, flows: &mut [Flow]) {
        let data = frame.data();
        if let Some(rdma) = self.rdma.as_deref_mut() {
            rdma.receive(now, data);
            return;
        }
        if data.len() >= 14 && data[12..14] == [0x88, 0x08] {
            self.receive_mac_control(now, data);
            return;
        }
        let Some(dst) = data.get(0..6) else {
            self.stats.other_rx += 1;
            return;
        };
        let group = dst[0] & 1 == 1;
        if !group && dst != self.params.mac {
            self.stats.foreign_rx += 1;
            return;
        }
        match read_stamp(data) {
            Some(stamp) => match flows.get_mut(stamp.flow.0) {
                Some(flow) if flow.spec.dst == self.id && stamp.dst == self.params.mac => {
                    self.stats.flow_rx += 1;
                    flow.deliver(now, stamp.seq, data.len(), stamp.ce);
                }
                _ => self.stats.other_rx += 1,
            },
            None => self.stats.other_rx += 1,
        }
    }

    fn receive_mac_control(&mut self, now: Instant, data: &[u8]) {
        let parsed = MacControlFrame::new_checked(data).and_then(|f| MacControlRepr::parse(&f));
        match parsed {
            Ok(MacControlRepr::Pfc(pfc)) => {
                for prio in Priority::ALL {
                    let Some(quanta) = pfc.quanta_for(prio.get()) else {
                        continue;
                    };
                    self.stats.pfc_rx[prio.index()] += 1;
                    let until = &mut self.paused_until[prio.index()];
                    if quanta > 0 && now >= *until {
                        self.stats.pause_episodes[prio.index()] += 1;
                    }
                    *until = now.saturating_add_nanos(quanta_to_nanos(quanta, self.rate_bps));
                }
            }
            Ok(MacControlRepr::Pause(_)) => self.stats.pause_rx += 1,
            Ok(MacControlRepr::Unknown { .. }) | Err(_) => self.stats.other_rx += 1,
        }
    }

    /// The frame to put on the link at `now`, if any: injected frames first, then the flows
    /// round robin among those that are started, not finished, within their rate and not
    /// paused.
    pub(crate) fn next_frame(&mut self, now: Instant, flows: &mut [Flow]) -> Option<HeapFrame> {
        if let Some(f) = self.injected.pop_front() {
            return Some(f);
        }
        if let Some(rdma) = self.rdma.as_deref_mut() {
            return rdma.next_frame(now);
        }
        let n = self.flows.len();
        for k in 0..n {
            let i = (self.next_flow + k) % n;
            let flow = &mut flows[self.flows[i].0];
            let ready = flow.ready_at().is_some_and(|t| t <= now);
            if ready && !self.is_paused(flow.spec.priority, now) {
                self.next_flow = (i + 1) % n;
                return Some(flow.take_frame(now));
            }
        }
        None
    }

    /// The earliest time after `now` at which a flow could become sendable (a pause expires,
    /// a rate-limited or not yet started flow becomes ready).
    pub(crate) fn next_wake(&self, now: Instant, flows: &[Flow]) -> Option<Instant> {
        if !self.injected.is_empty() {
            return Some(now);
        }
        if let Some(rdma) = self.rdma.as_deref() {
            return rdma.next_wake(now);
        }
        self.flows
            .iter()
            .filter_map(|id| {
                let flow = &flows[id.0];
                let ready = flow.ready_at()?;
                Some(ready.max(self.paused_until[flow.spec.priority.index()]))
            })
            .min()
    }
}
