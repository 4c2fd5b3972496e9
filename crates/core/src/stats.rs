//! Reading the dataplane's counters: per-side blocks summed into per-port views.
//!
//! Counters have one writer each (a side); readers sum across sides with relaxed loads
//! (VPP's per-thread counters). A read is not a consistent snapshot across counters — a frame
//! counted as received may not yet be counted as sent — but each counter is exact and
//! monotonic, which is what rates and deltas need.

use crate::counters::DropReason;
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
    /// Frames that reached admission.
    pub frames: u64,
    /// Frames dropped at admission.
    pub drops: u64,
    /// Bytes held now.
    pub used_bytes: u64,
    /// XOFF transitions.
    pub xoff_transitions: u64,
}

/// Everything counted about one port, summed over sides.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received (all, including dropped and MAC Control).
    pub rx_frames: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames admitted per traffic class.
    pub rx_tc_frames: [u64; PRIORITY_COUNT],
    /// Bytes admitted per traffic class.
    pub rx_tc_bytes: [u64; PRIORITY_COUNT],
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
            rx_tc_frames: arr(&self.rx_tc_frames, &other.rx_tc_frames),
            rx_tc_bytes: arr(&self.rx_tc_bytes, &other.rx_tc_bytes),
            pfc_rx: arr(&self.pfc_rx, &other.pfc_rx),
            pfc_tx: arr(&self.pfc_tx, &other.pfc_tx),
            pfc_frames_tx: f(self.pfc_frames_tx, other.pfc_frames_tx),
            pfc_frames_rx: f(self.pfc_frames_rx, other.pfc_frames_rx),
            pause_rx: f(self.pause_rx, other.pause_rx),
            pause_rx_ignored: f(self.pause_rx_ignored, other.pause_rx_ignored),
            fdb_learn_table_full: f(self.fdb_learn_table_full, other.fdb_learn_table_full),
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
    /// Highest shared use per PG.
    pub pg_shared: [u64; PRIORITY_COUNT],
    /// Highest headroom use per PG.
    pub pg_headroom: [u64; PRIORITY_COUNT],
    /// Highest use per egress queue.
    pub queue: [u64; PRIORITY_COUNT],
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
            s.pause_rx += c.pause_rx.get();
            s.pause_rx_ignored += c.pause_rx_ignored.get();
            s.fdb_learn_table_full += c.fdb_learn_table_full.get();
            for i in 0..PRIORITY_COUNT {
                s.rx_tc_frames[i] += c.rx_tc_frames[i].get();
                s.rx_tc_bytes[i] += c.rx_tc_bytes[i].get();
                s.pfc_rx[i] += c.pfc_rx[i].get();
                s.pgs[i].frames += c.pg_frames[i].get();
                s.pgs[i].drops += c.pg_drops[i].get();
                s.pgs[i].used_bytes += c.pg_used_bytes[i].get();
                s.pgs[i].xoff_transitions += c.pg_xoff_transitions[i].get();
                s.queues[i].drop_frames += c.queue_admission_drops[i].get();
                s.queues[i].drop_bytes += c.queue_admission_drop_bytes[i].get();
            }
            for (d, c) in s.drops.iter_mut().zip(&c.drops) {
                *d += c.get();
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
            for (d, c) in s.drops.iter_mut().zip(&c.drops) {
                *d += c.get();
            }
        }
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
        let mut w = PortWatermarks::default();
        for side in &self.ingress_counters {
            let c = &side.ports[p];
            for i in 0..PRIORITY_COUNT {
                w.pg_shared[i] = w.pg_shared[i].max(c.pg_shared_watermark[i].take());
                w.pg_headroom[i] = w.pg_headroom[i].max(c.pg_headroom_watermark[i].take());
                // Several ingress sides may feed one queue; the sum of their maxima bounds the
                // queue's maximum from above.
                w.queue[i] += c.queue_watermark[i].take();
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
