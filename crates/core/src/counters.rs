//! Counters with exactly one writer each, readable from any thread (VPP's per-thread counters).
//!
//! Each side of the dataplane (an ingress side, an egress side) owns its counter block and is the
//! only thread that writes it; the control plane reads with relaxed loads and sums across sides.
//! Because a counter has one writer, an increment is a plain load + store: no locked
//! read-modify-write on the per-packet path.
//!
//! # Memory ordering (model-checked: `loom_checks::counters`)
//!
//! Every access is relaxed. A reader is promised only what coherence gives a single atomic word:
//! each load returns a value the writer stored, and a thread's successive loads never go back
//! in the writer's order. So a [`Counter`] read by the control plane is monotonic and never
//! above the true count (it lags by what the writer has not yet made visible), a [`Gauge`] is
//! some level the writer set, and a [`Watermark`]'s read-and-clear reports only observed levels
//! and loses none (each observation is either in what `take` returned or still held). No reader
//! uses a counter to decide what other memory it may read, with one exception that orders itself
//! with fences: the release generations of `shared::Releases`.

use crate::punt::PuntReason;
use crate::sync::{load_own, AtomicU64, Ordering};

/// A monotonically increasing `u64` written by exactly one thread.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds `n`. Only the owning side may call this.
    #[inline]
    pub fn add(&self, n: u64) {
        // Relaxed: readers want a monotonic total, not an ordering with other data (module
        // docs). Load + store is correct because this thread is the only writer.
        self.0
            .store(load_own(&self.0).wrapping_add(n), Ordering::Relaxed);
    }

    /// Adds 1.
    #[inline]
    pub fn inc(&self) {
        self.add(1);
    }

    /// The current value.
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A high-water mark: the writer raises it, the control plane reads and clears it.
///
/// Read-and-clear is how SAI exposes watermarks (`READ_AND_CLEAR`, `sonic-buffer-model.md` §5.4).
/// The clear is the one place where a second thread writes: a clear that races with a raise can
/// either lose the clear (the raise wins, reporting a depth observed around the clear) or keep
/// it; it can never report a depth that did not occur.
#[derive(Debug, Default)]
pub struct Watermark(AtomicU64);

impl Watermark {
    /// Records an observed level.
    #[inline]
    pub fn observe(&self, level: u64) {
        if level > self.0.load(Ordering::Relaxed) {
            self.0.store(level, Ordering::Relaxed);
        }
    }

    /// The highest level since the last [`Watermark::take`].
    #[must_use]
    pub fn peek(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Returns the highest level since the last call and clears it (read-and-clear).
    pub fn take(&self) -> u64 {
        self.0.swap(0, Ordering::Relaxed)
    }
}

/// A gauge: a level written by one thread (a depth, an occupancy).
#[derive(Debug, Default)]
pub struct Gauge(AtomicU64);

impl Gauge {
    /// Sets the level. Only the owning side may call this.
    #[inline]
    pub fn set(&self, level: u64) {
        self.0.store(level, Ordering::Relaxed);
    }

    /// The current level.
    #[inline]
    #[must_use]
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

macro_rules! drop_reasons {
    ($($variant:ident => $name:literal, $doc:literal;)*) => {
        /// Why a frame was dropped. Every drop in headroom has exactly one reason; names are
        /// stable (they appear in `headroom show ports`, metrics labels and logs).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[repr(u8)]
        pub enum DropReason {
            $(#[doc = $doc] $variant,)*
        }

        impl DropReason {
            /// Every reason, in declaration order.
            pub const ALL: &'static [DropReason] = &[$(DropReason::$variant,)*];
            /// Number of reasons.
            pub const COUNT: usize = Self::ALL.len();

            /// The stable name.
            #[must_use]
            pub const fn name(self) -> &'static str {
                match self {
                    $(DropReason::$variant => $name,)*
                }
            }

            /// The reason as an index into per-reason arrays.
            #[must_use]
            pub const fn index(self) -> usize {
                self as usize
            }
        }
    };
}

drop_reasons! {
    Runt => "runt", "Shorter than an Ethernet header, or a header it announces is truncated.";
    Oversize => "oversize", "Longer than the port's MTU allows.";
    MacControlMalformed => "mac_control_malformed", "A MAC Control frame (EtherType 0x8808) that does not parse: wrong destination, reserved bits set, truncated.";
    VlanFiltered => "vlan_filtered", "The frame's VLAN is not allowed on the ingress port, or it carries two tags; or a routed packet's next hop names a VLAN its egress port is not in (or none, on a port that is not routed).";
    SamePort => "same_port", "The destination is the port the frame came in on.";
    NoDestination => "no_destination", "Flooding found no other port in the VLAN.";
    SourceMulticast => "source_multicast", "The source MAC address is multicast (IEEE 802.1Q 8.7.1: never learned, never forwarded).";
    IngressLossyLimit => "ingress_lossy_limit", "A lossy priority group reached its reserved + shared limit.";
    IngressHeadroomExhausted => "ingress_headroom_exhausted", "A lossless priority group used all its headroom (profile xoff, or the shared headroom pool).";
    EgressQueueLimit => "egress_queue_limit", "A lossy egress queue reached its reserved + shared limit.";
    QueueRingFull => "queue_ring_full", "The egress queue's ring of frame handles is full.";
    WredDrop => "wred", "WRED dropped a non-ECT frame on a lossy queue.";
    PfcwdIngress => "pfcwd_ingress", "The PFC watchdog's drop action: ingress traffic of a stormed priority.";
    PfcwdQueue => "pfcwd_queue", "The PFC watchdog's drop action: a frame queued for a stormed queue.";
    NoBuffer => "no_buffer", "No frame buffer to copy a flooded frame into.";
    TxError => "tx_error", "The port backend refused the frame.";
    PuntRateLimit => "punt_rate_limit", "A frame for the switch itself over its punt reason's rate (CoPP).";
    PuntQueueFull => "punt_queue_full", "A frame for the switch itself found the punt queue full.";
    InjectRateLimit => "inject_rate_limit", "A frame the control plane injected over the inject rate.";
    InjectBufferFull => "inject_buffer_full", "A frame the control plane injected found the CPU port's buffer full.";
    NoRoute => "no_route", "A routed packet whose destination matches no route, or received before a FIB was attached (SAI drops it; no ICMP).";
    Blackhole => "blackhole", "A routed packet whose route is a blackhole.";
    IpHeaderError => "ip_header_error", "A packet to a router MAC with a bad IP header: version, IHL < 5, total length, or IPv4 header checksum (RFC 1812 5.2.2).";
    RouterMacMismatch => "router_mac_mismatch", "A unicast frame on a routed port not addressed to its router MAC.";
    NotRoutable => "not_routable", "A frame to a routed port's router MAC that is neither IPv4, IPv6 nor ARP.";
    L3Multicast => "l3_multicast", "A multicast or broadcast frame on a routed port that is neither ARP, ND nor to a link-local group: headroom does not route multicast.";
}

/// Which of SAI's port counters (SONiC portstat's columns) a drop of a reason is charged to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortDropClass {
    /// `RX_ERR` (`SAI_PORT_STAT_IF_IN_ERRORS`): the frame was not received whole and
    /// well-formed. Not in `RX_OK`.
    RxError,
    /// `RX_DRP` (`SAI_PORT_STAT_IF_IN_DISCARDS`): received well-formed (counted in `RX_OK`,
    /// as an ASIC's MAC counts it), then discarded at ingress.
    RxDiscard,
    /// `TX_DRP` (`SAI_PORT_STAT_IF_OUT_DISCARDS`): discarded at or in one of the port's egress
    /// queues; charged to that port, whichever port it came in on.
    TxDiscard,
    /// `TX_ERR` (`SAI_PORT_STAT_IF_OUT_ERRORS`): the port could not transmit it.
    TxError,
    /// A frame the control plane injected, refused before any queue: counted in the port's
    /// `inject_drops`, in no port counter.
    Injected,
}

impl DropReason {
    /// The port counter a drop of this reason is charged to.
    #[must_use]
    pub const fn port_class(self) -> PortDropClass {
        match self {
            Self::Runt | Self::Oversize | Self::MacControlMalformed => PortDropClass::RxError,
            Self::VlanFiltered
            | Self::SamePort
            | Self::NoDestination
            | Self::SourceMulticast
            | Self::IngressLossyLimit
            | Self::IngressHeadroomExhausted
            | Self::PfcwdIngress
            | Self::NoBuffer
            | Self::PuntRateLimit
            | Self::PuntQueueFull
            | Self::NoRoute
            | Self::Blackhole
            | Self::RouterMacMismatch
            | Self::NotRoutable
            | Self::L3Multicast
            // The Ethernet frame was well-formed (in `RX_OK`); its IP header is discarded.
            | Self::IpHeaderError => PortDropClass::RxDiscard,
            Self::EgressQueueLimit | Self::QueueRingFull | Self::WredDrop | Self::PfcwdQueue => {
                PortDropClass::TxDiscard
            }
            Self::TxError => PortDropClass::TxError,
            Self::InjectRateLimit | Self::InjectBufferFull => PortDropClass::Injected,
        }
    }
}

type PerPrio<T> = [T; crate::types::PRIORITY_COUNT];

/// Counters of one port kept by an ingress side (one writer: that side).
///
/// Indexed by the port they describe. An ingress side writes the receive counters of the ports
/// it owns, and the egress-admission counters (`queue_*`, and the egress reasons of `drops`)
/// of any port it enqueues to.
#[derive(Debug, Default)]
pub struct IngressPortCounters {
    /// Every frame received, whatever happened to it: MAC Control, errored and discarded
    /// frames included.
    pub rx_frames: Counter,
    /// Bytes of every frame received (SAI `IF_IN_OCTETS`).
    pub rx_bytes: Counter,
    /// MAC Control frames received (EtherType 0x8808: PFC, PAUSE, other opcodes, malformed
    /// ones). The MAC Control sublayer consumes them (IEEE 802.3 Clause 31): they are in
    /// `rx_frames`, never in SAI's `IF_IN_UCAST/NON_UCAST_PKTS` (SONiC `RX_OK`).
    pub mac_control_rx: Counter,
    /// Frames classified into each ingress PG, dropped ones included (SAI
    /// `INGRESS_PRIORITY_GROUP_STAT_PACKETS`); `pg_drops` is a subset. A flooded frame counts
    /// once per copy: each copy is admitted to the PG.
    pub pg_frames: PerPrio<Counter>,
    /// Bytes of those frames (SAI `INGRESS_PRIORITY_GROUP_STAT_BYTES`).
    pub pg_bytes: PerPrio<Counter>,
    /// Frames each ingress PG dropped (SAI `..._DROPPED_PACKETS`).
    pub pg_drops: PerPrio<Counter>,
    /// PFC frames received with each priority's enable bit set, XON included (SONiC `pfcstat`).
    pub pfc_rx: PerPrio<Counter>,
    /// PFC frames received for priorities outside `pfc_enable` (counted in `pfc_rx` too, ignored).
    pub pfc_rx_ignored: PerPrio<Counter>,
    /// PFC frames received that parsed, each once whatever its class-enable vector (a malformed
    /// one is a `mac_control_malformed` drop instead).
    pub pfc_frames_rx: Counter,
    /// IEEE 802.3x PAUSE frames received (never counted as PFC).
    pub pause_rx: Counter,
    /// PAUSE frames received while the port does not honour 802.3x (`pause_802_3x` off):
    /// counted in `pause_rx` too, ignored.
    pub pause_rx_ignored: Counter,
    /// Source addresses received on this port that could not be learned because the MAC table
    /// had no free slot (the frame is still forwarded; frames to that station are flooded).
    pub fdb_learn_table_full: Counter,
    /// MAC Control frames with an opcode we do not act on.
    pub mac_control_unknown_rx: Counter,
    /// XOFF transitions of each PG (the PG started asking for pause).
    pub pg_xoff_transitions: PerPrio<Counter>,
    /// Drops charged to this port, by reason: the ingress reasons of frames received on it
    /// (written by the side that receives the port), and the egress-admission reasons
    /// (`egress_queue_limit`, `queue_ring_full`) of frames one of its queues refused (written
    /// by each side that enqueues to it). See [`DropReason::port_class`].
    pub drops: [Counter; DropReason::COUNT],
    /// Highest shared use of each PG, bytes (SAI `SHARED_WATERMARK_BYTES`).
    pub pg_shared_watermark: PerPrio<Watermark>,
    /// Highest headroom use of each PG, bytes (SAI `XOFF_ROOM_WATERMARK_BYTES`).
    pub pg_headroom_watermark: PerPrio<Watermark>,
    /// Current total use of each PG, bytes.
    pub pg_used_bytes: PerPrio<Gauge>,
    /// Frames refused by egress admission of each of this port's queues.
    pub queue_admission_drops: PerPrio<Counter>,
    /// Bytes of those frames.
    pub queue_admission_drop_bytes: PerPrio<Counter>,
    /// Highest total use (reserved and shared) of each of this port's queues seen at
    /// admission, bytes, as this side accounts it. The shared watermark (SAI
    /// `QUEUE_STAT_SHARED_WATERMARK_BYTES`) is this minus the queue's reserved size, computed
    /// when it is read (`Shared::take_port_watermarks`): the shared part of a queue's use only
    /// grows with its total, so the maximum of one is the maximum of the other, and the
    /// per-frame path keeps one watermark per queue.
    pub queue_watermark: PerPrio<Watermark>,
    /// Frames received on this port and punted to the control plane, per
    /// [`crate::punt::PuntReason`] (by index).
    pub punt_frames: [Counter; PuntReason::COUNT],
    /// Frames received on this port for the control plane and dropped (`punt_rate_limit` or
    /// `punt_queue_full`, also counted in `drops`), per reason.
    pub punt_drops: [Counter; PuntReason::COUNT],
    /// Packets received on this routed port and routed (enqueued towards their egress port)
    /// (SAI `ROUTER_INTERFACE_STAT_IN_PACKETS`; written by the side that receives the port).
    pub rif_in_packets: Counter,
    /// Bytes of those packets, as received (`ROUTER_INTERFACE_STAT_IN_OCTETS`).
    pub rif_in_octets: Counter,
    /// Packets routed out of this port: enqueued to one of its queues after the rewrite
    /// (`ROUTER_INTERFACE_STAT_OUT_PACKETS`; written by each side that routes to the port,
    /// summed when read). A frame later dropped at egress (WRED, the watchdog) is counted here
    /// and in the port's drops.
    pub rif_out_packets: Counter,
    /// Bytes of those packets, as enqueued (`ROUTER_INTERFACE_STAT_OUT_OCTETS`).
    pub rif_out_octets: Counter,
    /// Frames the control plane injected towards this port and that were enqueued.
    pub inject_frames: Counter,
    /// Bytes of those frames.
    pub inject_bytes: Counter,
    /// Frames the control plane injected towards this port and that were dropped, by reason.
    /// Those a queue refused (`egress_queue_limit`, `queue_ring_full`) are also in `drops`
    /// and `queue_admission_drops`, as any frame the port's queues refuse.
    pub inject_drops: [Counter; DropReason::COUNT],
}

/// Pool watermarks kept by an ingress or egress accounting side.
#[derive(Debug, Default)]
pub struct PoolCounters {
    /// Highest shared use, bytes (SAI `BUFFER_POOL_STAT_WATERMARK_BYTES`).
    pub shared_watermark: Watermark,
    /// Highest headroom in use by the pool's PGs, bytes: the shared headroom pool when the pool
    /// has one (SAI `XOFF_ROOM_WATERMARK_BYTES`), else the PGs' private headroom.
    pub headroom_watermark: Watermark,
}

/// Counters of one port kept by an egress side (one writer: the side that owns the port's TX).
#[derive(Debug, Default)]
pub struct EgressPortCounters {
    /// Frames sent from each queue.
    pub tx_frames: PerPrio<Counter>,
    /// Bytes sent from each queue.
    pub tx_bytes: PerPrio<Counter>,
    /// Frames marked CE in each queue.
    pub ecn_marked: PerPrio<Counter>,
    /// Frames WRED dropped in each queue.
    pub wred_drops: PerPrio<Counter>,
    /// Frames the PFC watchdog dropped from each queue.
    pub pfcwd_drops: PerPrio<Counter>,
    /// Bytes of frames WRED or the PFC watchdog dropped from each queue.
    pub queue_drop_bytes: PerPrio<Counter>,
    /// PFC frames sent with each priority's enable bit set, XON included.
    pub pfc_tx: PerPrio<Counter>,
    /// PFC frames sent.
    pub pfc_frames_tx: Counter,
    /// Drops by reason (egress reasons only: WRED, the watchdog's queue drop, and `no_buffer`
    /// for a PFC frame that could not be built, which is not a frame the port discarded).
    pub drops: [Counter; DropReason::COUNT],
    /// Sum of queueing delays of sent frames, ns (with `tx_frames`, the mean).
    pub queue_delay_ns_sum: PerPrio<Counter>,
    /// Queueing delays of sent frames, log2 buckets: bucket k counts delays in
    /// [2^(k-1), 2^k) ns (bucket 0: 0 ns; the last bucket takes everything longer).
    pub queue_delay_buckets: PerPrio<DelayHistogram>,
}

/// A log2 histogram of queueing delays (see [`delay_bucket`]), one writer.
#[derive(Debug)]
pub struct DelayHistogram(pub [Counter; DELAY_BUCKETS]);

impl Default for DelayHistogram {
    fn default() -> Self {
        Self(core::array::from_fn(|_| Counter::default()))
    }
}

/// Buckets of the queueing-delay histogram (2^39 ns ≈ 550 s).
pub const DELAY_BUCKETS: usize = 40;

/// The histogram bucket of a delay of `ns` nanoseconds.
#[inline]
#[must_use]
pub fn delay_bucket(ns: u64) -> usize {
    ((64 - ns.leading_zeros()) as usize).min(DELAY_BUCKETS - 1)
}

/// The smallest delay that falls into bucket `k`, ns.
#[must_use]
pub fn delay_bucket_floor(k: usize) -> u64 {
    if k == 0 {
        0
    } else {
        1 << (k - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_and_watermark() {
        let c = Counter::default();
        c.inc();
        c.add(41);
        assert_eq!(c.get(), 42);
        let w = Watermark::default();
        w.observe(5);
        w.observe(3);
        assert_eq!(w.peek(), 5);
        assert_eq!(w.take(), 5);
        assert_eq!(w.take(), 0);
    }

    #[test]
    fn delay_buckets_are_log2() {
        assert_eq!(delay_bucket(0), 0);
        assert_eq!(delay_bucket(1), 1);
        assert_eq!(delay_bucket(2), 2);
        assert_eq!(delay_bucket(3), 2);
        assert_eq!(delay_bucket(1024), 11);
        assert_eq!(delay_bucket_floor(11), 1024);
        assert_eq!(delay_bucket(u64::MAX), DELAY_BUCKETS - 1);
    }

    #[test]
    fn every_egress_queue_reason_is_a_tx_discard_and_no_ingress_reason_is() {
        use PortDropClass::*;
        for r in DropReason::ALL {
            let class = r.port_class();
            let egress = matches!(
                r,
                DropReason::EgressQueueLimit
                    | DropReason::QueueRingFull
                    | DropReason::WredDrop
                    | DropReason::PfcwdQueue
            );
            assert_eq!(class == TxDiscard, egress, "{r:?}");
        }
        assert_eq!(DropReason::Oversize.port_class(), RxError);
        assert_eq!(DropReason::IngressLossyLimit.port_class(), RxDiscard);
    }

    #[test]
    fn drop_reason_names_are_unique_and_indexed() {
        let mut names: Vec<_> = DropReason::ALL.iter().map(|r| r.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), DropReason::COUNT);
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }
}
