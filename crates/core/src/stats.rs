//! Reading the dataplane's counters: per-side blocks summed into per-port views.
//!
//! Counters have one writer each (a side); readers sum across sides with relaxed loads
//! (VPP's per-thread counters). A read is not a consistent snapshot across counters — a frame
//! counted as received may not yet be counted as sent — but each counter is exact and
//! monotonic, which is what rates and deltas need.

use crate::counters::{DropReason, PortDropClass};
use crate::punt::PuntReason;
use crate::shared::Shared;
use crate::time::Instant;
use crate::types::{PortId, Priority, PRIORITY_COUNT};

/// One egress queue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueStats {
    /// Frames sent.
    pub tx_frames: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames dropped for this queue: refused at admission, WRED, watchdog.
    pub drop_frames: u64,
    /// Bytes of those frames.
    pub drop_bytes: u64,
    /// Frames marked CE.
    pub ecn_marked: u64,
    /// Bytes waiting now.
    pub depth_bytes: u64,
    /// Sum of queueing delays of sent frames, ns.
    pub delay_ns_sum: u64,
}

/// One ingress priority group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgStats {
    /// Frames that reached admission, dropped ones included (SAI
    /// `INGRESS_PRIORITY_GROUP_STAT_PACKETS`).
    pub frames: u64,
    /// Bytes of those frames (`INGRESS_PRIORITY_GROUP_STAT_BYTES`).
    pub bytes: u64,
    /// Frames dropped at admission (`_DROPPED_PACKETS`).
    pub drops: u64,
    /// Bytes held now.
    pub used_bytes: u64,
    /// XOFF transitions.
    pub xoff_transitions: u64,
}

/// Everything counted about one port, summed over sides.
///
/// The `rx_*_frames`/`tx_*_frames` fields are SAI's port counters as SONiC's portstat shows
/// them (`show interfaces counters`); they are computed from the per-reason drops when the
/// counters are read ([`crate::counters::DropReason::port_class`]), so the per-frame path
/// counts nothing twice.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received (all, including dropped, errored and MAC Control).
    pub rx_frames: u64,
    /// Bytes received (all frames: SAI `IF_IN_OCTETS`).
    pub rx_bytes: u64,
    /// MAC Control frames received (PFC, PAUSE, other opcodes, malformed).
    pub mac_control_rx: u64,
    /// SONiC `RX_OK` (SAI `IF_IN_UCAST_PKTS + IF_IN_NON_UCAST_PKTS`): frames received whole
    /// and well-formed, except MAC Control frames (consumed by the MAC Control sublayer, IEEE
    /// 802.3 Clause 31). Frames discarded afterwards are included, as an ASIC's MAC counts them
    /// (they are in `rx_discard_frames` too); so are frames for the switch itself (LLDP …).
    pub rx_ok_frames: u64,
    /// `RX_ERR` (`IF_IN_ERRORS`): runts, oversize frames, malformed MAC Control frames.
    pub rx_error_frames: u64,
    /// `RX_OVR` (`ETHER_RX_OVERSIZE_PKTS`): frames longer than the port's MTU (also in
    /// `rx_error_frames`).
    pub rx_oversize_frames: u64,
    /// `RX_DRP` (`IF_IN_DISCARDS`): frames received well-formed and discarded at ingress (VLAN
    /// filtering, no destination, PG admission, the watchdog's ingress drop, CoPP …).
    pub rx_discard_frames: u64,
    /// `TX_DRP` (`IF_OUT_DISCARDS`): frames discarded at or in one of this port's egress
    /// queues (egress admission, ring full, WRED, the watchdog), whichever port they came in on:
    /// the sum of the queues' `drop_frames`.
    pub tx_discard_frames: u64,
    /// `TX_ERR` (`IF_OUT_ERRORS`) as the dataplane counts it (`tx_error` drops; the backend's
    /// refusals are added by the control plane).
    pub tx_error_frames: u64,
    /// PFC frames received per priority (XON included).
    pub pfc_rx: [u64; PRIORITY_COUNT],
    /// PFC frames sent per priority (XON included).
    pub pfc_tx: [u64; PRIORITY_COUNT],
    /// PFC frames sent.
    pub pfc_frames_tx: u64,
    /// PFC frames received that parsed (each once).
    pub pfc_frames_rx: u64,
    /// 802.3x PAUSE frames received.
    pub pause_rx: u64,
    /// 802.3x PAUSE frames received and ignored (the port does not honour 802.3x).
    pub pause_rx_ignored: u64,
    /// Source addresses not learned because the MAC table was full.
    pub fdb_learn_table_full: u64,
    /// Packets received on this router interface and routed (SAI
    /// `ROUTER_INTERFACE_STAT_IN_PACKETS`).
    pub rif_in_packets: u64,
    /// Bytes of those packets (`ROUTER_INTERFACE_STAT_IN_OCTETS`).
    pub rif_in_octets: u64,
    /// Packets routed out of this port, towards its queues (`ROUTER_INTERFACE_STAT_OUT_PACKETS`).
    pub rif_out_packets: u64,
    /// Bytes of those packets (`ROUTER_INTERFACE_STAT_OUT_OCTETS`).
    pub rif_out_octets: u64,
    /// Frames received on this port and punted to the control plane, by reason (index with
    /// [`crate::punt::PuntReason::index`]).
    pub punt_frames: [u64; PuntReason::COUNT],
    /// Frames for the control plane dropped at this port (CoPP rate limit, punt queue full),
    /// by reason.
    pub punt_drops: [u64; PuntReason::COUNT],
    /// Frames the control plane injected out of this port.
    pub inject_frames: u64,
    /// Injected frames dropped, every reason.
    pub inject_drops: u64,
    /// Time each priority's egress was held by received PFC, ns.
    pub paused_ns: [u64; PRIORITY_COUNT],
    /// Drops by reason (index with [`DropReason::index`]).
    pub drops: [u64; DropReason::COUNT],
    /// Per egress queue.
    pub queues: [QueueStats; PRIORITY_COUNT],
    /// Per ingress PG.
    pub pgs: [PgStats; PRIORITY_COUNT],
}

impl PortStats {
    /// Frames sent from every queue.
    #[must_use]
    pub fn tx_frames(&self) -> u64 {
        self.queues.iter().map(|q| q.tx_frames).sum()
    }

    /// Bytes sent from every queue.
    #[must_use]
    pub fn tx_bytes(&self) -> u64 {
        self.queues.iter().map(|q| q.tx_bytes).sum()
    }

    /// Drops of every reason.
    #[must_use]
    pub fn drops_total(&self) -> u64 {
        self.drops.iter().sum()
    }

    /// Applies `f` to every pair of corresponding counters of `self` and `other`.
    fn zip_with(&self, other: &Self, f: impl Fn(u64, u64) -> u64) -> Self {
        let arr = |a: &[u64; PRIORITY_COUNT], b: &[u64; PRIORITY_COUNT]| {
            core::array::from_fn(|i| f(a[i], b[i]))
        };
        Self {
            rx_frames: f(self.rx_frames, other.rx_frames),
            rx_bytes: f(self.rx_bytes, other.rx_bytes),
            mac_control_rx: f(self.mac_control_rx, other.mac_control_rx),
            rx_ok_frames: f(self.rx_ok_frames, other.rx_ok_frames),
            rx_error_frames: f(self.rx_error_frames, other.rx_error_frames),
            rx_oversize_frames: f(self.rx_oversize_frames, other.rx_oversize_frames),
            rx_discard_frames: f(self.rx_discard_frames, other.rx_discard_frames),
            tx_discard_frames: f(self.tx_discard_frames, other.tx_discard_frames),
            tx_error_frames: f(self.tx_error_frames, other.tx_error_frames),
            pfc_rx: arr(&self.pfc_rx, &other.pfc_rx),
            pfc_tx: arr(&self.pfc_tx, &other.pfc_tx),
            pfc_frames_tx: f(self.pfc_frames_tx, other.pfc_frames_tx),
            pfc_frames_rx: f(self.pfc_frames_rx, other.pfc_frames_rx),
            pause_rx: f(self.pause_rx, other.pause_rx),
            pause_rx_ignored: f(self.pause_rx_ignored, other.pause_rx_ignored),
            fdb_learn_table_full: f(self.fdb_learn_table_full, other.fdb_learn_table_full),
            rif_in_packets: f(self.rif_in_packets, other.rif_in_packets),
            rif_in_octets: f(self.rif_in_octets, other.rif_in_octets),
            rif_out_packets: f(self.rif_out_packets, other.rif_out_packets),
            rif_out_octets: f(self.rif_out_octets, other.rif_out_octets),
            punt_frames: core::array::from_fn(|i| f(self.punt_frames[i], other.punt_frames[i])),
            punt_drops: core::array::from_fn(|i| f(self.punt_drops[i], other.punt_drops[i])),
            inject_frames: f(self.inject_frames, other.inject_frames),
            inject_drops: f(self.inject_drops, other.inject_drops),
            paused_ns: arr(&self.paused_ns, &other.paused_ns),
            drops: core::array::from_fn(|i| f(self.drops[i], other.drops[i])),
            queues: core::array::from_fn(|i| {
                let (a, b) = (&self.queues[i], &other.queues[i]);
                QueueStats {
                    tx_frames: f(a.tx_frames, b.tx_frames),
                    tx_bytes: f(a.tx_bytes, b.tx_bytes),
                    drop_frames: f(a.drop_frames, b.drop_frames),
                    drop_bytes: f(a.drop_bytes, b.drop_bytes),
                    ecn_marked: f(a.ecn_marked, b.ecn_marked),
                    // A level, not a counter: the newer value.
                    depth_bytes: a.depth_bytes,
                    delay_ns_sum: f(a.delay_ns_sum, b.delay_ns_sum),
                }
            }),
            pgs: core::array::from_fn(|i| {
                let (a, b) = (&self.pgs[i], &other.pgs[i]);
                PgStats {
                    frames: f(a.frames, b.frames),
                    bytes: f(a.bytes, b.bytes),
                    drops: f(a.drops, b.drops),
                    used_bytes: a.used_bytes,
                    xoff_transitions: f(a.xoff_transitions, b.xoff_transitions),
                }
            }),
        }
    }

    /// Counter-wise sum (levels such as depths are taken from `self`). Used to carry counters
    /// over a reconfiguration.
    #[must_use]
    pub fn plus(&self, other: &Self) -> Self {
        self.zip_with(other, u64::saturating_add)
    }

    /// Counter-wise difference, saturating at 0 (levels from `self`). Used for "clear" views.
    #[must_use]
    pub fn minus(&self, other: &Self) -> Self {
        self.zip_with(other, u64::saturating_sub)
    }
}

/// Read-and-clear watermarks of one port, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortWatermarks {
    /// Highest shared use per PG (above its reserved size: SAI's PG `SHARED_WATERMARK_BYTES`).
    pub pg_shared: [u64; PRIORITY_COUNT],
    /// Highest headroom use per PG.
    pub pg_headroom: [u64; PRIORITY_COUNT],
    /// Highest shared use per egress queue: above its reserved size (SAI
    /// `QUEUE_STAT_SHARED_WATERMARK_BYTES`, SONiC `show queue watermark`).
    pub queue_shared: [u64; PRIORITY_COUNT],
    /// Highest total use per egress queue (reserved and shared).
    pub queue_total: [u64; PRIORITY_COUNT],
}

/// Read-and-clear watermarks of one pool, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolWatermarks {
    /// Highest shared use.
    pub shared: u64,
    /// Highest headroom in use (shared headroom pool, or private headroom).
    pub headroom: u64,
}

impl Shared {
    /// The counters of `port`, summed over every side, paused time evaluated at `now`.
    #[must_use]
    pub fn port_stats(&self, port: PortId, now: Instant) -> PortStats {
        let p = port.index();
        let mut s = PortStats::default();
        for side in &self.ingress_counters {
            let c = &side.ports[p];
            s.rx_frames += c.rx_frames.get();
            s.rx_bytes += c.rx_bytes.get();
            s.pfc_frames_rx += c.pfc_frames_rx.get();
            s.mac_control_rx += c.mac_control_rx.get();
            s.pause_rx += c.pause_rx.get();
            s.pause_rx_ignored += c.pause_rx_ignored.get();
            s.fdb_learn_table_full += c.fdb_learn_table_full.get();
            s.rif_in_packets += c.rif_in_packets.get();
            s.rif_in_octets += c.rif_in_octets.get();
            s.rif_out_packets += c.rif_out_packets.get();
            s.rif_out_octets += c.rif_out_octets.get();
            for r in 0..PuntReason::COUNT {
                s.punt_frames[r] += c.punt_frames[r].get();
                s.punt_drops[r] += c.punt_drops[r].get();
            }
            s.inject_frames += c.inject_frames.get();
            s.inject_drops += c.inject_drops.iter().map(|d| d.get()).sum::<u64>();
            for i in 0..PRIORITY_COUNT {
                s.pfc_rx[i] += c.pfc_rx[i].get();
                s.pgs[i].frames += c.pg_frames[i].get();
                s.pgs[i].bytes += c.pg_bytes[i].get();
                s.pgs[i].drops += c.pg_drops[i].get();
                s.pgs[i].used_bytes += c.pg_used_bytes[i].get();
                s.pgs[i].xoff_transitions += c.pg_xoff_transitions[i].get();
                s.queues[i].drop_frames += c.queue_admission_drops[i].get();
                s.queues[i].drop_bytes += c.queue_admission_drop_bytes[i].get();
            }
            for (r, (d, c)) in DropReason::ALL.iter().zip(s.drops.iter_mut().zip(&c.drops)) {
                let n = c.get();
                *d += n;
                match r.port_class() {
                    PortDropClass::RxError => s.rx_error_frames += n,
                    PortDropClass::RxDiscard => s.rx_discard_frames += n,
                    PortDropClass::TxDiscard => s.tx_discard_frames += n,
                    PortDropClass::TxError => s.tx_error_frames += n,
                    PortDropClass::Injected => {}
                }
            }
        }
        for side in &self.egress_counters {
            let c = &side.ports[p];
            s.pfc_frames_tx += c.pfc_frames_tx.get();
            for i in 0..PRIORITY_COUNT {
                s.pfc_tx[i] += c.pfc_tx[i].get();
                let q = &mut s.queues[i];
                q.tx_frames += c.tx_frames[i].get();
                q.tx_bytes += c.tx_bytes[i].get();
                q.drop_frames += c.wred_drops[i].get() + c.pfcwd_drops[i].get();
                q.drop_bytes += c.queue_drop_bytes[i].get();
                q.ecn_marked += c.ecn_marked[i].get();
                q.delay_ns_sum += c.queue_delay_ns_sum[i].get();
            }
            for (r, (d, c)) in DropReason::ALL.iter().zip(s.drops.iter_mut().zip(&c.drops)) {
                let n = c.get();
                *d += n;
                // An egress side drops frames of its queues; its `no_buffer` is a PFC frame it
                // could not build, not a frame the port discarded.
                match r.port_class() {
                    PortDropClass::TxDiscard => s.tx_discard_frames += n,
                    PortDropClass::TxError => s.tx_error_frames += n,
                    _ => {}
                }
            }
        }
        s.rx_oversize_frames = s.drops[DropReason::Oversize.index()];
        // Every frame received is MAC Control, or errored (runt, oversize; a malformed MAC
        // Control frame is in both), or `RX_OK`. Saturating: `rx_frames` is added once per
        // burst, after the burst's drops, so a read can fall between the two.
        s.rx_ok_frames = s
            .rx_frames
            .saturating_sub(s.mac_control_rx)
            .saturating_sub(s.drops[DropReason::Runt.index()])
            .saturating_sub(s.rx_oversize_frames);
        for prio in Priority::ALL {
            s.paused_ns[prio.index()] = self.pfc.view(p, prio).paused_ns(now);
        }
        for (q, qs) in s.queues.iter_mut().enumerate() {
            // Live depth rather than the level at the last dequeue: a held queue shows its backlog.
            qs.depth_bytes = self.queue_depth_bytes(port, q);
        }
        s
    }

    /// Reads and clears the watermarks of `port` (SAI `READ_AND_CLEAR`).
    pub fn take_port_watermarks(&self, port: PortId) -> PortWatermarks {
        let p = port.index();
        let params = &self.params;
        let cell = u64::from(params.cell_size_bytes);
        // What each ingress side's accounting reserves for each queue, in whole cells (as
        // admission counts it).
        let reserved: [u64; PRIORITY_COUNT] = core::array::from_fn(|q| {
            params.cells(params.ports[p].queues[q].profile.reserved_bytes) * cell
        });
        let mut w = PortWatermarks::default();
        for side in &self.ingress_counters {
            let c = &side.ports[p];
            for (i, reserved) in reserved.iter().enumerate() {
                w.pg_shared[i] = w.pg_shared[i].max(c.pg_shared_watermark[i].take());
                w.pg_headroom[i] = w.pg_headroom[i].max(c.pg_headroom_watermark[i].take());
                // Several ingress sides may feed one queue; the sum of their maxima bounds the
                // queue's maximum from above.
                let total = c.queue_watermark[i].take();
                w.queue_total[i] += total;
                w.queue_shared[i] += total.saturating_sub(*reserved);
            }
        }
        w
    }

    /// Reads and clears the watermarks of pool `pool` (ingress or egress, by its direction).
    pub fn take_pool_watermarks(&self, pool: usize) -> PoolWatermarks {
        let mut w = PoolWatermarks::default();
        for side in &self.ingress_counters {
            for counters in [&side.pools[pool], &side.egress_pools[pool]] {
                w.shared += counters.shared_watermark.take();
                w.headroom += counters.headroom_watermark.take();
            }
        }
        w
    }
}
