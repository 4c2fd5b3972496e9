//! The ingress side: what an RX lcore does with each received frame.
//!
//! Per frame: L2 parse → MAC Control handling (PFC/PAUSE are acted on and never forwarded) →
//! VLAN membership → classification (PCP or DSCP → TC → PG and queue) → watchdog ingress drop →
//! FDB learning and lookup → for each destination port: egress VLAN tagging, ingress PG admission,
//! egress queue admission, enqueue into the ring towards the egress side. PG XOFF/XON decisions
//! are taken right after each admission and after cells come back from egress sides.

use crate::buffer::{EgressBuffers, IngressBuffers, PgTransition};
use crate::counters::{DropReason, IngressPortCounters};
use crate::events::Event;
use crate::fdb::Fdb;
use crate::fdb_sync::{self, FdbSync, FdbUpdate};
use crate::frame::Frame;
use crate::params::{ParamsError, PortParams, QosMaps, Trust, VlanMode};
use crate::shared::{IngressCounters, Shared};
use crate::time::Instant;
use crate::types::{PortId, Priority, TrafficClass, PRIORITY_COUNT};
use crate::watchdog::{PortMitigations, QueueMitigation};
use headroom_wire::ethernet::{parse_l2, EtherType, L2Header};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
use headroom_wire::pause::quanta_to_nanos;
use headroom_wire::vlan::{insert_vlan_tag, strip_vlan_tag, VlanTci, TAG_LEN};
use headroom_wire::Error as WireError;
use rtrb::Producer;
use std::sync::Arc;

/// What travels with a frame handle from the ingress side to the egress side.
///
/// Packed into 16 bytes: every frame's metadata is written into a ring slot and read back, so
/// its size is memory traffic per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// When the frame was enqueued, ns.
    pub enqueued_ns: u64,
    /// Cells charged (ingress PG and egress queue alike).
    pub cells: u32,
    /// Port the frame arrived on.
    pub in_port: u16,
    /// Ingress PG the frame's cells are charged to.
    pub pg: u8,
    /// Bits 0-6: offset of the IPv4/IPv6 header in the frame as enqueued, 0 when not IP (an L3
    /// header starts at most 22 bytes in: Ethernet and two tags); bit 7: it is IPv6.
    l3: u8,
}

impl FrameMeta {
    const IPV6: u8 = 0x80;

    /// Metadata of a frame; an L3 offset beyond 127 bytes is recorded as not IP.
    #[must_use]
    pub fn new(
        in_port: u16,
        pg: u8,
        l3_offset: usize,
        ipv6: bool,
        cells: u32,
        enqueued_ns: u64,
    ) -> Self {
        let l3 = if l3_offset < usize::from(Self::IPV6) {
            // Fits in 7 bits (checked just above).
            l3_offset as u8 | u8::from(ipv6) << 7
        } else {
            0
        };
        Self {
            enqueued_ns,
            cells,
            in_port,
            pg,
            l3,
        }
    }

    /// Offset of the IPv4/IPv6 header in the frame as enqueued, 0 when not IP.
    #[must_use]
    pub fn l3_offset(&self) -> u8 {
        self.l3 & !Self::IPV6
    }

    /// Whether the L3 header is IPv6.
    #[must_use]
    pub fn ipv6(&self) -> bool {
        self.l3 & Self::IPV6 != 0
    }
}

/// A frame in an egress queue's ring.
#[derive(Debug)]
pub struct Queued<F> {
    /// The frame.
    pub frame: F,
    /// Its metadata.
    pub meta: FrameMeta,
}

/// The consuming ends of one ingress side's rings towards every port's queues (`None` once
/// taken by the egress side that owns the port).
pub(crate) type PortConsumers<F> = Vec<[Option<rtrb::Consumer<Queued<F>>>; PRIORITY_COUNT]>;

/// Per-port facts the ingress side consults for every frame, derived once from the parameters.
#[derive(Debug, Clone)]
struct PortView {
    trust: Trust,
    default_priority: Priority,
    maps: QosMaps,
    pfc_enable: u8,
    pause_802_3x: bool,
    speed_bps: u64,
    max_payload: usize,
    /// VLAN membership, bit per VID.
    vlans: Box<[u64; 64]>,
    /// VLAN of untagged and priority-tagged frames, if any.
    untagged_vid: Option<u16>,
    /// Access port: every VLAN leaves untagged.
    access: bool,
    /// Trunk native VLAN (leaves untagged).
    native: Option<u16>,
    /// Per PG: whether it has headroom (lossless).
    lossless_pg: [bool; PRIORITY_COUNT],
    /// The same, bit per PG.
    lossless_mask: u8,
}

impl PortView {
    fn new(p: &PortParams) -> Self {
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
            lossless_pg: p.pgs.map(|pg| pg.is_lossless()),
            lossless_mask: p
                .pgs
                .iter()
                .enumerate()
                .filter(|(_, pg)| pg.is_lossless())
                .fold(0, |m, (i, _)| m | 1 << i),
        }
    }

    fn member(&self, vid: u16) -> bool {
        vid < 4096 && self.vlans[usize::from(vid / 64)] & (1 << (vid % 64)) != 0
    }

    /// Whether frames of `vid` leave this port tagged.
    fn egress_tagged(&self, vid: u16) -> bool {
        !self.access && self.native != Some(vid)
    }
}

/// Storm-rate alarm state of one (port, priority): PFC frames counted in one-second windows.
#[derive(Clone, Copy, Debug, Default)]
struct RateWindow {
    start_ns: u64,
    frames: u64,
    alarmed: bool,
}

const RATE_WINDOW_NS: u64 = 1_000_000_000;

/// A station seen again on the same port within this time is not looked up in the FDB again
/// (its entry was refreshed at most this long ago; aging is minutes).
const RELEARN_INTERVAL_NS: u64 = 1_000_000;

/// Cells per frame length: a shift when the cell size is a power of two (it always is in
/// practice), a division otherwise.
#[derive(Clone, Copy, Debug)]
struct CellSize {
    bytes: u32,
    /// log2 of `bytes` if it is a power of two, else `u32::MAX`.
    shift: u32,
}

impl CellSize {
    fn new(bytes: u32) -> Self {
        Self {
            bytes,
            shift: if bytes.is_power_of_two() {
                bytes.trailing_zeros()
            } else {
                u32::MAX
            },
        }
    }

    /// Cells a frame of `len` bytes takes (rounded up).
    #[inline]
    fn cells(self, len: usize) -> u32 {
        let cells = if self.shift == u32::MAX {
            len.div_ceil(self.bytes as usize)
        } else {
            // A frame's length is far below `usize::MAX - bytes`: no overflow.
            (len + (self.bytes as usize - 1)) >> self.shift
        };
        u32::try_from(cells).unwrap_or(u32::MAX)
    }
}

/// The ingress side of one RX lcore.
#[derive(Debug)]
pub struct Ingress<F: Frame> {
    shared: Arc<Shared>,
    /// Per-port facts, never changed after construction. Kept apart from the state so that the
    /// per-frame path can hold a port's view while it updates the state.
    views: Vec<PortView>,
    st: IngressState<F>,
}

/// What the per-frame path reads, borrowed once per burst.
struct Ctx<'a> {
    shared: &'a Shared,
    /// This side's counters.
    counters: &'a IngressCounters,
    views: &'a [PortView],
}

/// Everything an ingress side changes as frames arrive and cells come back.
#[derive(Debug)]
struct IngressState<F: Frame> {
    side: usize,
    owned: Vec<PortId>,
    owns: Vec<bool>,
    buffers: IngressBuffers,
    egress_buffers: EgressBuffers,
    fdb: Fdb,
    /// `[port][queue]`: rings towards the egress side of each port.
    producers: Vec<[Producer<Queued<F>>; PRIORITY_COUNT]>,
    seen_generation: Vec<u64>,
    seen_pg_release: Vec<[u64; PRIORITY_COUNT]>,
    seen_queue_release: Vec<[u64; PRIORITY_COUNT]>,
    wanted_xoff: Vec<u8>,
    /// How many ports have a non-empty `wanted_xoff` (see [`Ingress::releases_can_change_pfc`]).
    ports_wanting_xoff: usize,
    rate: Vec<[RateWindow; PRIORITY_COUNT]>,
    /// Per port: lossless PGs whose cells a refused enqueue gave back since the last pull of
    /// releases; re-evaluated with the next pull (see `pull_releases`).
    pending_eval: Vec<u8>,
    /// Rate windows currently in alarm (so that idle polls skip the scan).
    alarms_active: u32,
    /// Some lossless PG has a dynamic threshold (its limit moves with the pool's use).
    dynamic_lossless: bool,
    /// Number of ingress sides sharing the pools.
    ingress_sides: usize,
    /// Per port: the last source learned (VID << 48 | MAC) and when, ns — learning the same
    /// station again within [`RELEARN_INTERVAL_NS`] only refreshes an age that cannot expire.
    last_learned: Vec<(u64, u64)>,
    /// The learn rings to and from the other ingress sides; `None` with a single ingress side
    /// (which then pays one predictable branch per burst and one per table learn for it).
    sync: Option<Box<FdbSync>>,
    cell: CellSize,
}

impl<F: Frame> Ingress<F> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        side: usize,
        producers: Vec<[Producer<Queued<F>>; PRIORITY_COUNT]>,
        lossless_queues: Vec<[bool; PRIORITY_COUNT]>,
        sync: Option<FdbSync>,
    ) -> Result<Self, ParamsError> {
        let params = &shared.params;
        let ports = params.ports.len();
        let owned = shared.layout.ingress_ports(side);
        let mut owns = vec![false; ports];
        for p in &owned {
            owns[p.index()] = true;
        }
        let st = IngressState {
            buffers: IngressBuffers::new(params, Arc::clone(&shared.ingress_pools), side)?,
            egress_buffers: EgressBuffers::new(
                params,
                lossless_queues,
                Arc::clone(&shared.egress_pools),
                side,
            )?,
            fdb: Fdb::new(params.fdb_capacity, params.fdb_aging_ns),
            producers,
            seen_generation: vec![0; shared.releases.egress_sides()],
            seen_pg_release: vec![[0; PRIORITY_COUNT]; ports],
            seen_queue_release: vec![[0; PRIORITY_COUNT]; ports],
            wanted_xoff: vec![0; ports],
            ports_wanting_xoff: 0,
            pending_eval: vec![0; ports],
            rate: vec![[RateWindow::default(); PRIORITY_COUNT]; ports],
            alarms_active: 0,
            dynamic_lossless: params.ports.iter().flat_map(|p| p.pgs.iter()).any(|pg| {
                pg.is_lossless() && matches!(pg.threshold, crate::params::Threshold::Dynamic { .. })
            }),
            ingress_sides: shared.layout.ingress_sides(),
            last_learned: vec![(u64::MAX, 0); ports],
            sync: sync.map(Box::new),
            cell: CellSize::new(params.cell_size_bytes),
            owned,
            owns,
            side,
        };
        Ok(Self {
            views: params.ports.iter().map(PortView::new).collect(),
            st,
            shared,
        })
    }

    /// The ports this side receives on.
    #[must_use]
    pub fn ports(&self) -> &[PortId] {
        &self.st.owned
    }

    /// The FDB (for `show fdb`; the runtime reads it between bursts on this lcore).
    #[must_use]
    pub fn fdb(&self) -> &Fdb {
        &self.st.fdb
    }

    /// Ingress buffer accounting (read-only view, for tests and the control plane).
    #[must_use]
    pub fn buffers(&self) -> &IngressBuffers {
        &self.st.buffers
    }

    /// Egress queue accounting of the frames this side enqueued.
    #[must_use]
    pub fn egress_buffers(&self) -> &EgressBuffers {
        &self.st.egress_buffers
    }

    fn counters(&self) -> &IngressCounters {
        &self.shared.ingress_counters[self.st.side]
    }

    /// Handles a burst of frames received on `port` at `now`; `frames` is left empty.
    ///
    /// `rx_frames` and `rx_bytes` of the port are added once, at the end of the burst: a
    /// reader on another thread sees them at most one burst late (they have one writer, this
    /// side, so nothing is lost).
    pub fn handle_rx_burst(&mut self, now: Instant, port: PortId, frames: &mut Vec<F>) {
        debug_assert!(
            self.st.owns[port.index()],
            "{port} is not received by ingress side {}",
            self.st.side
        );
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        let st = &mut self.st;
        st.sync_releases(&ctx);
        if st.sync.is_some() {
            st.sync_fdb(now);
        }
        let in_view = &ctx.views[port.index()];
        let in_counters = &ctx.counters.ports[port.index()];
        let mitigations = ctx.shared.mitigation.port(port.index());
        let rx_frames = frames.len() as u64;
        let mut rx_bytes = 0u64;
        for frame in frames.drain(..) {
            st.handle_frame(
                &ctx,
                in_view,
                in_counters,
                mitigations,
                now,
                port,
                frame,
                &mut rx_bytes,
            );
        }
        in_counters.rx_frames.add(rx_frames);
        in_counters.rx_bytes.add(rx_bytes);
        // An admission re-evaluates its own PG at once (`forward`). With dynamic thresholds it
        // also moves the limits of every other PG of the pool: re-evaluate them once per burst.
        if st.dynamic_lossless {
            st.update_pfc_all(&ctx);
        }
    }

    /// Pulls cells released by egress sides into the accounting and re-evaluates XOFF/XON of
    /// the owned lossless PGs (dynamic limits move as pools fill and drain). The runtime calls
    /// this every loop iteration, with or without traffic; `handle_rx_burst` calls it too.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        self.st.sync_releases(&ctx);
        if self.st.sync.is_some() {
            self.st.sync_fdb(now);
        }
        self.st.roll_rate_windows(&ctx, now);
    }

    /// Whether pulling released cells now could change what any port asks its peer to pause.
    /// A release only lowers occupancy (and, with dynamic thresholds, raises limits), so it can
    /// bring XON but never XOFF; XON can only change a wanted set that is not empty. While no
    /// port wants pause, the pull can wait for the next burst or timeout without changing a
    /// single PFC frame.
    #[must_use]
    pub(crate) fn releases_can_change_pfc(&self) -> bool {
        debug_assert_eq!(
            self.st.ports_wanting_xoff,
            self.st.wanted_xoff.iter().filter(|&&w| w != 0).count(),
            "the count of ports wanting pause follows the wanted sets"
        );
        self.st.ports_wanting_xoff != 0
    }

    /// The part of [`Ingress::handle_timeout`] that is not the pull of released cells: the
    /// learn rings and the storm-rate windows.
    pub(crate) fn handle_timeout_without_releases(&mut self, now: Instant) {
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        if self.st.sync.is_some() {
            self.st.sync_fdb(now);
        }
        self.st.roll_rate_windows(&ctx, now);
    }

    /// Forgets every station learned on `port` (link down, reconfiguration), on this side and,
    /// through the learn rings, on every other ingress side (which forget only what they heard
    /// of at or before `now`). Call it on any one side.
    pub fn flush_fdb_port(&mut self, port: PortId, now: Instant) {
        let counters = &self.shared.ingress_counters[self.st.side];
        self.st.flush_fdb(counters, Some(port), now);
    }

    /// Forgets every station, on this side and on every other ingress side (see
    /// [`Ingress::flush_fdb_port`]).
    pub fn flush_fdb(&mut self, now: Instant) {
        let counters = &self.shared.ingress_counters[self.st.side];
        self.st.flush_fdb(counters, None, now);
    }

    /// Checks every accounting invariant of this side.
    pub fn check_invariants(&self) {
        self.st.buffers.check_invariants();
        self.st.egress_buffers.check_invariants();
    }

    /// Counters of one port as this side keeps them.
    #[must_use]
    pub fn port_counters(&self, port: PortId) -> &IngressPortCounters {
        &self.counters().ports[port.index()]
    }
}

/// A station as the relearn cache keys it.
#[inline]
fn station_key(vid: u16, mac: [u8; 6]) -> u64 {
    u64::from(vid) << 48 | mac.iter().fold(0u64, |k, &b| k << 8 | u64::from(b))
}

/// Forgets the relearn cache entries an FDB change invalidates, so that the next frame of
/// those stations reaches the table: a station moved away from a port (`moved_from`) or a flush.
fn forget_cached_learns(
    last_learned: &mut [(u64, u64)],
    update: FdbUpdate,
    moved_from: Option<PortId>,
) {
    const FORGOTTEN: (u64, u64) = (u64::MAX, 0);
    match update {
        FdbUpdate::Learned { vid, mac, .. } => {
            let key = station_key(vid, mac);
            if let Some(cached) = moved_from.and_then(|p| last_learned.get_mut(p.index())) {
                if cached.0 == key {
                    *cached = FORGOTTEN;
                }
            }
        }
        FdbUpdate::PortFlushed { port, at } => {
            if let Some(cached) = last_learned.get_mut(port.index()) {
                if cached.1 <= at.as_nanos() {
                    *cached = FORGOTTEN;
                }
            }
        }
        FdbUpdate::Flushed { at } => {
            for cached in last_learned.iter_mut().filter(|c| c.1 <= at.as_nanos()) {
                *cached = FORGOTTEN;
            }
        }
    }
}

/// The sum over egress sides of a block of eight release counters (with one side, the block).
#[inline]
fn released_totals<'a>(
    egress_sides: usize,
    block: impl Fn(usize) -> &'a [crate::counters::Counter; PRIORITY_COUNT],
) -> [u64; PRIORITY_COUNT] {
    let mut totals = block(0).each_ref().map(crate::counters::Counter::get);
    for e in 1..egress_sides {
        for (t, c) in totals.iter_mut().zip(block(e)) {
            *t += c.get();
        }
    }
    totals
}

/// What each of eight monotonic totals gained since `seen` (which is brought up to date), and a
/// mask of those that did.
#[inline]
fn take_deltas(
    totals: &[u64; PRIORITY_COUNT],
    seen: &mut [u64; PRIORITY_COUNT],
) -> ([u64; PRIORITY_COUNT], u8) {
    let mut deltas = [0; PRIORITY_COUNT];
    let mut mask = 0u8;
    for i in 0..PRIORITY_COUNT {
        deltas[i] = totals[i] - seen[i];
        mask |= u8::from(deltas[i] != 0) << i;
    }
    *seen = *totals;
    (deltas, mask)
}

/// Tags, untags or rewrites the tag of a frame for an egress port (802.1Q 8.8.2) whose
/// member set says `want_tag`, moving `l3_offset` with it. Returns the new length if it
/// changed. Out of line: access ports (untagged in, untagged out) never call it.
#[inline(never)]
fn retag<F: Frame>(
    frame: &mut F,
    m: &IngressFrame,
    want_tag: bool,
    l3_offset: &mut usize,
) -> Result<Option<usize>, DropReason> {
    if m.tagged && !want_tag {
        if strip_vlan_tag(frame.data_mut()).is_err() || !frame.pull_front(TAG_LEN) {
            return Err(DropReason::Runt);
        }
        *l3_offset = l3_offset.saturating_sub(TAG_LEN);
        return Ok(Some(frame.len()));
    }
    let tci = VlanTci::new(m.tc.get(), false, m.vid);
    if m.tagged {
        // Rewrite the TCI in place (priority tag → VLAN, PCP kept as classified).
        frame.data_mut()[14..16].copy_from_slice(&tci.to_bits().to_be_bytes());
        return Ok(None);
    }
    if !frame.push_front(TAG_LEN) {
        return Err(DropReason::NoBuffer);
    }
    if insert_vlan_tag(frame.data_mut(), tci).is_err() {
        return Err(DropReason::Runt);
    }
    if *l3_offset > 0 {
        *l3_offset += TAG_LEN;
    }
    Ok(Some(frame.len()))
}

/// Counts a frame that egress admission (or its ring) refused, against the egress port.
#[inline(never)]
fn count_refused(out_counters: &IngressPortCounters, q: usize, len: usize) {
    out_counters.queue_admission_drops[q].inc();
    out_counters.queue_admission_drop_bytes[q].add(len as u64);
}

/// Counts a drop of `frame` received on the port of `counters`, and drops it.
fn drop_frame<F>(counters: &IngressPortCounters, reason: DropReason, frame: F) {
    counters.drops[reason.index()].inc();
    drop(frame);
}

impl<F: Frame> IngressState<F> {
    fn sync_releases(&mut self, ctx: &Ctx<'_>) {
        let releases = &ctx.shared.releases;
        let mut changed = false;
        for (e, seen) in self.seen_generation.iter_mut().enumerate() {
            let g = releases.generation(e).get();
            if g != *seen {
                *seen = g;
                changed = true;
            }
        }
        if changed {
            self.pull_releases(ctx);
        }
        // With dynamic thresholds, releases move every PG's limit; without any release, other
        // ingress sides' use of a shared pool still can.
        if self.dynamic_lossless && (changed || self.ingress_sides > 1) {
            self.update_pfc_all(ctx);
        }
    }

    /// Pulls every release counter into the accounting. With static thresholds only a PG whose
    /// occupancy changed can change its XOFF/XON state (its limit and XON point are constants),
    /// so exactly those are re-evaluated here: the PGs in XOFF that got cells back, and those
    /// released by a refused enqueue since the last pull (`pending_eval`). Every other PG's
    /// state was evaluated after its last admission. With dynamic thresholds the caller
    /// re-evaluates all of them.
    fn pull_releases(&mut self, ctx: &Ctx<'_>) {
        let releases = &ctx.shared.releases;
        let egress_sides = releases.egress_sides();
        let cell = u64::from(self.cell.bytes);
        for &port in &self.owned {
            let p = port.index();
            let totals = released_totals(egress_sides, |e| releases.pg_block(e, p));
            let (deltas, mask) = take_deltas(&totals, &mut self.seen_pg_release[p]);
            if mask == 0 {
                continue;
            }
            let (held, xoff) = self.buffers.release_port(p, &deltas, mask);
            let gauges = &ctx.counters.ports[p].pg_used_bytes;
            let mut m = mask;
            while m != 0 {
                let pg = m.trailing_zeros() as usize % PRIORITY_COUNT;
                m &= m - 1;
                gauges[pg].set(held[pg] * cell);
            }
            // With a static limit, a PG not in XOFF cannot reach it by giving cells back (XOFF
            // needs headroom, or shared use at the limit, and a release lowers both): only
            // those in XOFF can change (XON).
            self.pending_eval[p] |= mask & xoff & ctx.views[p].lossless_mask;
        }
        for p in 0..ctx.views.len() {
            let totals = released_totals(egress_sides, |e| releases.queue_block(e, self.side, p));
            let (deltas, mask) = take_deltas(&totals, &mut self.seen_queue_release[p]);
            if mask != 0 {
                self.egress_buffers.release_port(p, &deltas, mask);
            }
        }
        let evaluate = !self.dynamic_lossless;
        for i in 0..self.owned.len() {
            let port = self.owned[i];
            let p = port.index();
            let mask = core::mem::take(&mut self.pending_eval[p]);
            if evaluate && mask != 0 {
                self.update_pgs(ctx, port, mask);
            }
        }
    }

    /// Re-evaluates every owned lossless PG.
    fn update_pfc_all(&mut self, ctx: &Ctx<'_>) {
        for i in 0..self.owned.len() {
            let port = self.owned[i];
            self.update_pfc(ctx, port);
        }
    }

    /// Re-evaluates XOFF/XON of `port`'s lossless PGs and publishes the wanted set.
    fn update_pfc(&mut self, ctx: &Ctx<'_>, port: PortId) {
        self.update_pgs(ctx, port, ctx.views[port.index()].lossless_mask);
    }

    /// Re-evaluates XOFF/XON of the PGs of `port` in `mask` and publishes the wanted set if
    /// one of them changed state. Always inlined: as a plain `#[inline]` the compiler laid out
    /// the release pull 1.6 Ir/packet worse (callgrind, core bench).
    #[inline(always)]
    fn update_pgs(&mut self, ctx: &Ctx<'_>, port: PortId, mut mask: u8) {
        let mut transitioned = false;
        while mask != 0 {
            let pg = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            transitioned |= self.update_pg(ctx, port, pg);
        }
        if transitioned {
            self.publish_wanted(ctx, port);
        }
    }

    /// Re-evaluates one lossless PG; whether it changed state. Always inlined: it follows
    /// every lossless admission.
    #[inline(always)]
    fn update_pg(&mut self, ctx: &Ctx<'_>, port: PortId, pg: usize) -> bool {
        let p = port.index();
        match self.buffers.update_xoff(p, pg) {
            Some(t) => {
                if t == PgTransition::Xoff {
                    ctx.counters.ports[p].pg_xoff_transitions[pg].inc();
                }
                true
            }
            None => false,
        }
    }

    /// Publishes the priorities `port` wants paused, from its PGs' XOFF states.
    fn publish_wanted(&mut self, ctx: &Ctx<'_>, port: PortId) {
        let p = port.index();
        let view = &ctx.views[p];
        let mut wanted = 0u8;
        for prio in Priority::ALL {
            let pg = view.maps.pfc_to_pg[prio.index()].index();
            if view.pfc_enable & prio.bit() != 0 && self.buffers.pg(p, pg).xoff {
                wanted |= prio.bit();
            }
        }
        if wanted != self.wanted_xoff[p] {
            let was = self.wanted_xoff[p] != 0;
            if was != (wanted != 0) {
                if was {
                    self.ports_wanting_xoff -= 1;
                } else {
                    self.ports_wanting_xoff += 1;
                }
            }
            self.wanted_xoff[p] = wanted;
            ctx.shared.pfc.set_wanted_xoff(p, wanted);
        }
    }

    /// Handles one frame and adds its length to `rx_bytes`. The frame's data is read once and
    /// its length taken from it: each read of a frame's data or length goes through the
    /// backend's bounds checks.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn handle_frame(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        mitigations: PortMitigations<'_>,
        now: Instant,
        port: PortId,
        frame: F,
        rx_bytes: &mut u64,
    ) {
        let data = frame.data();
        let len = data.len();
        *rx_bytes += len as u64;
        let l2 = match parse_l2(data) {
            Ok(l2) => l2,
            Err(WireError::DoubleTag) => {
                return drop_frame(counters, DropReason::VlanFiltered, frame)
            }
            Err(_) => return drop_frame(counters, DropReason::Runt, frame),
        };
        if l2.ethertype == EtherType::MacControl {
            return self.handle_mac_control(ctx, view, counters, now, port, &l2, frame);
        }
        if len - l2.payload_offset > view.max_payload {
            return drop_frame(counters, DropReason::Oversize, frame);
        }
        if l2.src_addr.is_multicast() {
            return drop_frame(counters, DropReason::SourceMulticast, frame);
        }
        // VLAN membership (802.1Q 8.6.2 ingress filtering). VID 0 is a priority tag.
        let vid = match l2.vlan.map(VlanTci::vid) {
            None | Some(0) => match view.untagged_vid {
                Some(v) => v,
                None => return drop_frame(counters, DropReason::VlanFiltered, frame),
            },
            Some(v) if view.member(v) => v,
            Some(_) => return drop_frame(counters, DropReason::VlanFiltered, frame),
        };
        // Classification.
        let (tc, l3) = classify(view, &l2, data);
        let pg = view.maps.tc_to_pg[tc.index()].index() % PRIORITY_COUNT;
        let queue = view.maps.tc_to_queue[tc.index()].index() % PRIORITY_COUNT;
        // The watchdog's drop action also drops what the stormed port receives for that queue
        // index (SONiC's ACL `MATCH_TC = queue → DROP`).
        if mitigations.get(queue) == QueueMitigation::Drop {
            // Counted in the PG's packets too, as every PG drop is: SAI's DROPPED_PACKETS is a
            // subset of PACKETS, and the watchdog's RX OK is their difference.
            counters.pg_frames[pg].inc();
            counters.pg_drops[pg].inc();
            return drop_frame(counters, DropReason::PfcwdIngress, frame);
        }
        self.learn(ctx, vid, l2.src_addr.0, port, now);
        let dst = l2.dst_addr;
        let unicast_to = if dst.is_multicast() {
            None
        } else {
            self.fdb.lookup(vid, dst.0, now)
        };
        let meta = IngressFrame {
            in_port: port,
            tc,
            pg,
            queue,
            vid,
            tagged: l2.vlan.is_some(),
            l3,
        };
        let out = match unicast_to {
            Some(out) if out == port => return drop_frame(counters, DropReason::SamePort, frame),
            Some(out) => out,
            // Flooding forwards copies to all destinations but the last; the frame itself goes
            // to the last one here, through the same inlined path as unicast (with two ports,
            // an unknown destination is a single forward, as cheap as a known one).
            None => match self.flood_copies(ctx, view, counters, now, &meta, &frame) {
                Some(last) => last,
                None => return drop_frame(counters, DropReason::NoDestination, frame),
            },
        };
        self.forward(ctx, view, counters, now, &meta, out, frame, len);
    }

    /// FDB learning, skipping the table when the same station was learned on this port within
    /// the last [`RELEARN_INTERVAL_NS`] (back-to-back frames of one flow).
    #[inline]
    fn learn(&mut self, ctx: &Ctx<'_>, vid: u16, mac: [u8; 6], port: PortId, now: Instant) {
        let key = station_key(vid, mac);
        let (last_key, last_ns) = &mut self.last_learned[port.index()];
        let now_ns = now.as_nanos();
        if *last_key == key && now_ns.saturating_sub(*last_ns) < RELEARN_INTERVAL_NS {
            return;
        }
        *last_key = key;
        *last_ns = now_ns;
        self.learn_in_table(ctx, vid, mac, port, now);
    }

    /// The table part of [`IngressState::learn`], and its publication to the other ingress
    /// sides. Out of line: back-to-back frames of a flow skip it, and keeping it out of the
    /// per-frame path keeps its registers free (measured: inlined, the single-side path cost
    /// 7 Ir/packet more).
    #[inline(never)]
    fn learn_in_table(
        &mut self,
        ctx: &Ctx<'_>,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
    ) {
        let learned = self.fdb.learn(vid, mac, port, now);
        if learned == crate::fdb::Learned::TableFull {
            ctx.counters.ports[port.index()].fdb_learn_table_full.inc();
        }
        if self.sync.is_some() {
            self.publish_learned(ctx, learned, vid, mac, port, now);
        }
    }

    /// Tells the other ingress sides about a learn, if it is news to them (see
    /// [`crate::fdb_sync`]). Out of line: with one ingress side it is never called.
    #[inline(never)]
    fn publish_learned(
        &mut self,
        ctx: &Ctx<'_>,
        learned: crate::fdb::Learned,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
    ) {
        let Some(sync) = self.sync.as_deref_mut() else {
            return;
        };
        if !sync.refresh_due(learned, now) {
            return;
        }
        let update = FdbUpdate::Learned {
            vid,
            mac,
            port,
            seen: now,
        };
        let published = sync.publish_learned(update, &ctx.counters.fdb_sync_overflow);
        let was_pending = matches!(
            learned,
            crate::fdb::Learned::Refreshed {
                sync_pending: true,
                ..
            }
        );
        // `learn` cleared the mark: set it again if this publication failed too.
        if !published || was_pending {
            self.fdb.set_sync_pending(vid, mac, !published);
        }
    }

    /// Applies what the other ingress sides learned and flushed, and retries flushes this side
    /// still owes them. Bounded: see [`fdb_sync::FDB_SYNC_DRAIN_PER_RING`].
    #[inline(never)]
    fn sync_fdb(&mut self, now: Instant) {
        let Some(sync) = self.sync.as_deref_mut() else {
            return;
        };
        sync.retry_owed_flushes();
        let (fdb, last_learned) = (&mut self.fdb, &mut self.last_learned);
        sync.drain(|update| {
            let moved_from = fdb_sync::apply(fdb, update, now);
            forget_cached_learns(last_learned, update, moved_from);
        });
    }

    /// Flushes this side's table (all of it, or `port`'s stations) and publishes the flush.
    fn flush_fdb(&mut self, counters: &IngressCounters, port: Option<PortId>, now: Instant) {
        let update = match port {
            Some(port) => FdbUpdate::PortFlushed { port, at: now },
            None => FdbUpdate::Flushed { at: now },
        };
        match port {
            Some(port) => self.fdb.flush_port(port),
            None => self.fdb.flush(),
        }
        forget_cached_learns(&mut self.last_learned, update, None);
        if let Some(sync) = self.sync.as_deref_mut() {
            sync.publish_flush(update, &counters.fdb_sync_overflow);
        }
    }

    /// Floods `frame` (unknown unicast, multicast, broadcast): forwards a copy to every
    /// destination port but the last, in port order, and returns the last, to which the caller
    /// forwards the frame itself (`None`: no destination). Out of line: unicast never calls it.
    #[inline(never)]
    fn flood_copies(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        now: Instant,
        meta: &IngressFrame,
        frame: &F,
    ) -> Option<PortId> {
        let mut last: Option<PortId> = None;
        for (i, out_view) in ctx.views.iter().enumerate() {
            let out = PortId(u16::try_from(i).unwrap_or(u16::MAX));
            if out == meta.in_port || !out_view.member(meta.vid) {
                continue;
            }
            if let Some(prev) = last {
                match frame.try_clone() {
                    Some(copy) => {
                        let len = copy.len();
                        self.forward_outlined(ctx, view, counters, now, meta, prev, copy, len);
                    }
                    None => counters.drops[DropReason::NoBuffer.index()].inc(),
                }
            }
            last = Some(out);
        }
        last
    }

    /// [`IngressState::forward`] as a call, for flooded copies: the path of a frame itself (to
    /// its unicast destination or the last flood destination) has its own copy inlined.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn forward_outlined(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        now: Instant,
        m: &IngressFrame,
        out: PortId,
        frame: F,
        len: usize,
    ) {
        self.forward(ctx, view, counters, now, m, out, frame, len);
    }

    /// Tags or untags for `out`, admits, enqueues. `view` and `counters` are the receiving
    /// port's. Always inlined into the per-frame path (once per frame).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn forward(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        now: Instant,
        m: &IngressFrame,
        out: PortId,
        mut frame: F,
        mut len: usize,
    ) {
        let in_p = m.in_port.index();
        let o = out.index();
        let pg = m.pg % PRIORITY_COUNT;
        let q = m.queue % PRIORITY_COUNT;
        // Egress tagging (802.1Q 8.8.2: the egress port's member set decides tagged/untagged).
        let want_tag = ctx.views[o].egress_tagged(m.vid);
        let mut l3_offset = m.l3.map_or(0, |(off, _)| off);
        if m.tagged || want_tag {
            match retag(&mut frame, m, want_tag, &mut l3_offset) {
                Ok(Some(new_len)) => len = new_len,
                Ok(None) => {}
                Err(reason) => return drop_frame(counters, reason, frame),
            }
        }
        let cells = self.cell.cells(len);
        counters.pg_frames[pg].inc();
        let admitted = match self.buffers.admit_frame(in_p, pg, u64::from(cells)) {
            Ok(admitted) => admitted,
            Err(reason) => {
                counters.pg_drops[pg].inc();
                return drop_frame(counters, reason, frame);
            }
        };
        let out_counters = &ctx.counters.ports[o];
        let queued_in = match self.egress_buffers.admit_frame(o, q, u64::from(cells)) {
            Ok(admitted) => admitted,
            Err(reason) => {
                self.refuse_enqueue(in_p, pg, o, q, cells, false);
                count_refused(out_counters, q, len);
                return drop_frame(counters, reason, frame);
            }
        };
        let producer = &mut self.producers[o][q];
        if producer.is_full() {
            // The ring is sized from the config; reaching its end is a drop like any other.
            self.refuse_enqueue(in_p, pg, o, q, cells, true);
            count_refused(out_counters, q, len);
            return drop_frame(counters, DropReason::QueueRingFull, frame);
        }
        let meta = FrameMeta::new(
            m.in_port.0,
            u8::try_from(pg).unwrap_or(0),
            l3_offset,
            m.l3.is_some_and(|(_, v6)| v6),
            cells,
            now.as_nanos(),
        );
        // Publish the bytes before the frame: the egress side that pops it sees them counted.
        ctx.shared.ring_bytes_in(self.side, o, q).add(len as u64);
        // This side is the ring's only producer and it was not full. (Matched rather than
        // dropped: dropping the `Result` would call its drop glue for the `Err` case.)
        match producer.push(Queued { frame, meta }) {
            Ok(()) => {}
            Err(rtrb::PushError::Full(refused)) => {
                debug_assert!(false, "a ring that was not full refused a frame");
                drop(refused);
            }
        }
        // Accepted: account it and take the PFC decision for the PG. Levels come from what the
        // admissions returned, which is the accounting as it stands now.
        let tc = m.tc.index() % PRIORITY_COUNT;
        counters.rx_tc_frames[tc].inc();
        counters.rx_tc_bytes[tc].add(len as u64);
        let cell = u64::from(self.cell.bytes);
        let pg_state = admitted.pg;
        counters.pg_shared_watermark[pg].observe(pg_state.shared_used * cell);
        counters.pg_headroom_watermark[pg].observe(pg_state.headroom_used * cell);
        out_counters.queue_watermark[q].observe(queued_in.used * cell);
        let pool = &ctx.counters.pools[admitted.pool];
        pool.shared_watermark
            .observe(admitted.pool_use.shared_used * cell);
        pool.headroom_watermark
            .observe(admitted.pool_use.headroom_used * cell);
        ctx.counters.egress_pools[queued_in.pool]
            .shared_watermark
            .observe(queued_in.pool_use * cell);
        counters.pg_used_bytes[pg].set(pg_state.total() * cell);
        if view.lossless_pg[pg] && self.update_pg(ctx, m.in_port, pg) {
            self.publish_wanted(ctx, m.in_port);
        }
    }

    /// Undoes the admissions of a frame that cannot be enqueued after all: its PG's cells (the
    /// PG is re-evaluated with the next pull of releases) and, if `queue_admitted`, the egress
    /// queue's. Kept out of line: the per-frame path only needs the call on a refusal.
    #[inline(never)]
    fn refuse_enqueue(
        &mut self,
        in_p: usize,
        pg: usize,
        o: usize,
        q: usize,
        cells: u32,
        queue_admitted: bool,
    ) {
        self.buffers.release(in_p, pg, u64::from(cells));
        self.pending_eval[in_p] |= 1 << pg;
        if queue_admitted {
            self.egress_buffers.release(o, q, u64::from(cells));
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn handle_mac_control(
        &mut self,
        ctx: &Ctx<'_>,
        view: &PortView,
        counters: &IngressPortCounters,
        now: Instant,
        port: PortId,
        l2: &L2Header,
        frame: F,
    ) {
        let p = port.index();
        // MAC Control frames are untagged (802.3 31.4); a tagged one is malformed.
        let parsed = if l2.vlan.is_some() {
            Err(WireError::WrongEtherType)
        } else {
            MacControlFrame::new_checked(frame.data()).and_then(|f| MacControlRepr::parse(&f))
        };
        let (pfc_enable, pause_802_3x, speed_bps) =
            (view.pfc_enable, view.pause_802_3x, view.speed_bps);
        match parsed {
            Ok(MacControlRepr::Pfc(pfc)) => {
                counters.pfc_frames_rx.inc();
                for prio in Priority::ALL {
                    let Some(quanta) = pfc.quanta_for(prio.get()) else {
                        continue;
                    };
                    // Every frame with the priority's bit set counts, XON included (pfcstat).
                    counters.pfc_rx[prio.index()].inc();
                    if pfc_enable & prio.bit() == 0 {
                        counters.pfc_rx_ignored[prio.index()].inc();
                        continue;
                    }
                    // 802.1Qbb 36.1.3.3: pause for quanta × 512 bit times at the port's speed.
                    let duration = quanta_to_nanos(quanta, speed_bps);
                    ctx.shared.pfc.handle_pause(p, prio, now, duration);
                    self.count_rate(ctx, now, port, prio);
                }
            }
            Ok(MacControlRepr::Pause(pause)) => {
                counters.pause_rx.inc();
                if pause_802_3x {
                    ctx.shared.pfc.handle_port_pause(
                        p,
                        now,
                        quanta_to_nanos(pause.pause_quanta, speed_bps),
                    );
                } else {
                    counters.pause_rx_ignored.inc();
                }
            }
            Ok(MacControlRepr::Unknown { .. }) => counters.mac_control_unknown_rx.inc(),
            Err(_) => return drop_frame(counters, DropReason::MacControlMalformed, frame),
        }
        // Acted on; a MAC Control frame is never forwarded (802.3 31.5).
        drop(frame);
    }

    fn count_rate(&mut self, ctx: &Ctx<'_>, now: Instant, port: PortId, prio: Priority) {
        let threshold = u64::from(ctx.shared.params.storm_alarm_frames_per_second);
        let w = &mut self.rate[port.index()][prio.index()];
        let now_ns = now.as_nanos();
        if now_ns.saturating_sub(w.start_ns) >= RATE_WINDOW_NS {
            let was_high = w.frames > threshold;
            if w.alarmed && !was_high {
                w.alarmed = false;
                self.alarms_active -= 1;
                ctx.shared.ingress_events[self.side].push(Event::PfcRateNormal {
                    port,
                    priority: prio,
                    at: now,
                });
            }
            w.start_ns = now_ns;
            w.frames = 0;
        }
        w.frames += 1;
        if threshold > 0 && w.frames > threshold && !w.alarmed {
            w.alarmed = true;
            self.alarms_active += 1;
            ctx.shared.ingress_events[self.side].push(Event::PfcRateHigh {
                port,
                priority: prio,
                frames_per_second: w.frames,
                at: now,
            });
        }
    }

    fn roll_rate_windows(&mut self, ctx: &Ctx<'_>, now: Instant) {
        if self.alarms_active == 0 {
            return;
        }
        let threshold = u64::from(ctx.shared.params.storm_alarm_frames_per_second);
        for &port in &self.owned {
            for prio in Priority::ALL {
                let w = &mut self.rate[port.index()][prio.index()];
                if w.alarmed && now.as_nanos().saturating_sub(w.start_ns) >= RATE_WINDOW_NS {
                    // A full window passed; if it ended quiet (or a whole window saw nothing), the
                    // episode is over.
                    let quiet = w.frames <= threshold
                        || now.as_nanos().saturating_sub(w.start_ns) >= 2 * RATE_WINDOW_NS;
                    if quiet {
                        w.alarmed = false;
                        self.alarms_active -= 1;
                        w.frames = 0;
                        w.start_ns = now.as_nanos();
                        ctx.shared.ingress_events[self.side].push(Event::PfcRateNormal {
                            port,
                            priority: prio,
                            at: now,
                        });
                    }
                }
            }
        }
    }
}

/// Classification result carried from `handle_frame` to `forward`.
#[derive(Clone, Copy, Debug)]
struct IngressFrame {
    in_port: PortId,
    tc: TrafficClass,
    pg: usize,
    queue: usize,
    vid: u16,
    tagged: bool,
    /// Offset of the IP header and whether it is IPv6.
    l3: Option<(usize, bool)>,
}

/// Finds the traffic class by the port's trust, and the IP header if there is one.
#[inline]
fn classify(view: &PortView, l2: &L2Header, data: &[u8]) -> (TrafficClass, Option<(usize, bool)>) {
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

#[cfg(test)]
mod tests {
    use super::FrameMeta;

    #[test]
    fn frame_meta_is_sixteen_bytes_and_keeps_what_it_is_given() {
        assert_eq!(size_of::<FrameMeta>(), 16);
        let m = FrameMeta::new(7, 3, 22, true, 6, 1_000);
        assert_eq!(
            (
                m.in_port,
                m.pg,
                m.l3_offset(),
                m.ipv6(),
                m.cells,
                m.enqueued_ns
            ),
            (7, 3, 22, true, 6, 1_000)
        );
        let m = FrameMeta::new(0, 0, 14, false, 1, 0);
        assert_eq!((m.l3_offset(), m.ipv6()), (14, false));
        // Beyond 7 bits the offset cannot be kept: recorded as not IP (never ECN-marked).
        let m = FrameMeta::new(0, 0, 200, true, 1, 0);
        assert_eq!((m.l3_offset(), m.ipv6()), (0, false));
    }
}
