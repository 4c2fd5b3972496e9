//! The ingress side: what an RX lcore does with each received frame.
//!
//! Per frame: L2 parse → MAC Control handling (PFC/PAUSE are acted on and never forwarded) →
//! frames for the switch itself are punted ([`crate::punt`]) → VLAN membership →
//! classification ([`crate::classify`]: PCP or DSCP → TC → PG and queue) → watchdog ingress
//! drop → FDB learning and lookup ([`crate::fdb_learning`]) → for each destination port: egress
//! VLAN tagging, ingress PG admission, egress queue admission, enqueue into the ring towards the
//! egress side ([`crate::queue`]). PG XOFF/XON decisions are taken right after each admission
//! and after cells come back from egress sides. Frames the control plane injects join at the
//! admissions ([`crate::inject`]).

use crate::buffer::{CellSize, EgressBuffers, IngressBuffers, PgTransition};
use crate::classify::{classify, PortView};
use crate::counters::{DropReason, IngressPortCounters};
use crate::fdb::Fdb;
use crate::fdb_learning::IngressFdb;
use crate::fdb_sync::FdbSync;
use crate::frame::Frame;
use crate::inject::cpu_port_index;
use crate::params::ParamsError;
use crate::punt::{is_reserved_group_address, punt_reason, PuntPath, PuntRefused, Punted};
use crate::queue::{FrameMeta, PortProducers, Queued};
use crate::route::FibReader;
use crate::shared::{IngressCounters, Shared};
use crate::storm_alarm::StormAlarm;
use crate::time::Instant;
use crate::token_bucket::TokenBucket;
use crate::types::{PortId, Priority, TrafficClass, PRIORITY_COUNT};
use crate::watchdog::{PortMitigations, QueueMitigation};
use headroom_wire::ethernet::{parse_l2, EtherType, L2Header};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
use headroom_wire::pause::quanta_to_nanos;
use headroom_wire::vlan::{insert_vlan_tag, strip_vlan_tag, VlanTci, TAG_LEN};
use headroom_wire::Error as WireError;
use std::sync::Arc;

#[path = "route_forward.rs"]
mod route_forward;

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
pub(crate) struct Ctx<'a> {
    shared: &'a Shared,
    /// This side's counters.
    counters: &'a IngressCounters,
    views: &'a [PortView],
}

/// Everything an ingress side changes as frames arrive and cells come back.
#[derive(Debug)]
pub(crate) struct IngressState<F: Frame> {
    side: usize,
    owned: Vec<PortId>,
    owns: Vec<bool>,
    buffers: IngressBuffers,
    egress_buffers: EgressBuffers,
    fdb: IngressFdb,
    /// `[port][queue]`: rings towards the egress side of each port.
    producers: PortProducers<F>,
    seen_generation: Vec<u64>,
    /// `[port]`, then the CPU pseudo-ports (`inject::cpu_port_index`).
    seen_pg_release: Vec<[u64; PRIORITY_COUNT]>,
    seen_queue_release: Vec<[u64; PRIORITY_COUNT]>,
    wanted_xoff: Vec<u8>,
    /// How many ports have a non-empty `wanted_xoff` (see [`Ingress::releases_can_change_pfc`]).
    ports_wanting_xoff: usize,
    storm: StormAlarm,
    /// Per port: lossless PGs whose cells a refused enqueue gave back since the last pull of
    /// releases; re-evaluated with the next pull (see `pull_releases`).
    pending_eval: Vec<u8>,
    /// Some lossless PG has a dynamic threshold (its limit moves with the pool's use).
    dynamic_lossless: bool,
    /// Number of ingress sides sharing the pools.
    ingress_sides: usize,
    cell: CellSize,
    /// Frames for the control plane, waiting for [`Ingress::poll_punt`].
    punt: PuntPath<F>,
    /// This side's CPU pseudo-port: the row of its injected frames' PG.
    cpu_port: usize,
    inject_bucket: TokenBucket,
    /// The FIB routed ports route with ([`Ingress::attach_fib`]); `None` until attached.
    fib: Option<FibReader>,
    /// The VLAN interfaces (SVIs).
    pub(crate) svi: SviTable,
}

/// The VLAN interfaces (SVIs) as the per-frame path asks about them: a bit per VID (the only
/// cost an L2 frame in a VLAN without one pays), then each one's router MAC and the smallest
/// MTU of its member ports (what a packet routed into the VLAN and flooded must fit).
#[derive(Debug, Clone)]
pub(crate) struct SviTable {
    vids: Box<[u64; 64]>,
    entries: Vec<SviEntry>,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct SviEntry {
    pub(crate) vid: u16,
    pub(crate) mac: [u8; 6],
    pub(crate) max_payload: usize,
}

impl SviTable {
    fn new(params: &crate::params::SwitchParams, views: &[PortView]) -> Self {
        let mut vids = Box::new([0u64; 64]);
        let entries = params
            .vlan_interfaces
            .iter()
            .map(|v| {
                vids[usize::from(v.vid / 64)] |= 1 << (v.vid % 64);
                SviEntry {
                    vid: v.vid,
                    mac: v.mac,
                    max_payload: views
                        .iter()
                        .filter(|p| p.member(v.vid))
                        .map(|p| p.max_payload)
                        .min()
                        .unwrap_or(0),
                }
            })
            .collect();
        Self { vids, entries }
    }

    /// The SVI of VLAN `vid`, if it has one.
    #[inline(always)]
    pub(crate) fn get(&self, vid: u16) -> Option<&SviEntry> {
        if self.entries.is_empty() {
            return None;
        }
        self.get_slow(vid)
    }

    #[inline(never)]
    fn get_slow(&self, vid: u16) -> Option<&SviEntry> {
        if vid >= 4096 || self.vids[usize::from(vid / 64)] & (1 << (vid % 64)) == 0 {
            return None;
        }
        self.entries.iter().find(|e| e.vid == vid)
    }
}

impl<F: Frame> Ingress<F> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        side: usize,
        producers: PortProducers<F>,
        lossless_queues: Vec<[bool; PRIORITY_COUNT]>,
        sync: Option<FdbSync>,
        now: Instant,
    ) -> Result<Self, ParamsError> {
        let params = &shared.params;
        let ports = params.ports.len();
        let owned = shared.layout.ingress_ports(side);
        let mut owns = vec![false; ports];
        for p in &owned {
            owns[p.index()] = true;
        }
        let ingress_sides = shared.layout.ingress_sides();
        let views: Vec<PortView> = params.ports.iter().map(PortView::new).collect();
        let st = IngressState {
            buffers: IngressBuffers::new(params, Arc::clone(&shared.ingress_pools), side)?,
            egress_buffers: EgressBuffers::new(
                params,
                lossless_queues,
                Arc::clone(&shared.egress_pools),
                side,
            )?,
            fdb: IngressFdb::new(
                Fdb::with_static(params.fdb_capacity, params.fdb_aging_ns, &params.fdb_static).0,
                ports,
                sync,
            ),
            producers,
            seen_generation: vec![0; shared.releases.egress_sides()],
            seen_pg_release: vec![[0; PRIORITY_COUNT]; ports + ingress_sides],
            seen_queue_release: vec![[0; PRIORITY_COUNT]; ports],
            wanted_xoff: vec![0; ports],
            ports_wanting_xoff: 0,
            pending_eval: vec![0; ports],
            storm: StormAlarm::new(ports, params.storm_alarm_frames_per_second),
            dynamic_lossless: params.ports.iter().flat_map(|p| p.pgs.iter()).any(|pg| {
                pg.is_lossless() && matches!(pg.threshold, crate::params::Threshold::Dynamic { .. })
            }),
            ingress_sides,
            cell: CellSize::new(params.cell_size_bytes),
            punt: PuntPath::new(&params.punt, ingress_sides, now),
            cpu_port: cpu_port_index(ports, side),
            inject_bucket: TokenBucket::new(params.inject.limit.split(ingress_sides), now),
            fib: None,
            svi: SviTable::new(params, &views),
            owned,
            owns,
            side,
        };
        Ok(Self { views, st, shared })
    }

    /// Attaches the FIB reader routed ports route with (see
    /// [`crate::step::LcoreStep::attach_fib`]).
    pub fn attach_fib(&mut self, reader: FibReader) {
        self.st.fib = Some(reader);
    }

    /// The attached FIB reader, if any.
    #[must_use]
    pub fn fib(&self) -> Option<&FibReader> {
        self.st.fib.as_ref()
    }

    /// Which ingress side this is (its index in `Layout::ingress_side_of_port`).
    #[must_use]
    pub fn side(&self) -> usize {
        self.st.side
    }

    /// The ports this side receives on.
    #[must_use]
    pub fn ports(&self) -> &[PortId] {
        &self.st.owned
    }

    /// The FDB (for `show fdb`; the runtime reads it between bursts on this lcore).
    #[must_use]
    pub fn fdb(&self) -> &Fdb {
        &self.st.fdb.fdb
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

    /// The row of this side's CPU pseudo-port in [`Ingress::buffers`] (see [`crate::inject`]).
    #[must_use]
    pub fn cpu_port(&self) -> usize {
        self.st.cpu_port
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
        // A burst boundary: switch to the newest FIB snapshot (one acquire load when none).
        if let Some(fib) = st.fib.as_mut() {
            fib.refresh();
        }
        st.sync_releases(&ctx);
        if st.fdb.is_synced() {
            st.fdb.sync(now);
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

    /// Sends `frame`, built by the control plane for the VLAN interface of `vid` (untagged, as
    /// the kernel writes it to the SVI's host interface), into VLAN `vid`: to the member port
    /// this side's FDB knows its destination on, or flooded to every member (broadcast,
    /// multicast, unknown); tagged with `vid` (PCP 0) on the ports that carry it tagged. Each
    /// copy takes [`Ingress::inject`]'s path and is counted in its port's inject counters.
    /// Returns how many copies were accepted.
    ///
    /// # Errors
    /// `vlan_filtered` when no port is a member of `vid` (or the FDB's port no longer is),
    /// `runt` for a frame without an Ethernet header; otherwise the reason the last copy was
    /// refused, when none was accepted.
    pub fn inject_vlan(&mut self, now: Instant, vid: u16, frame: F) -> Result<usize, DropReason> {
        let Ok(l2) = parse_l2(frame.data()) else {
            return Err(DropReason::Runt);
        };
        if l2.vlan.is_some() {
            // The kernel writes untagged frames to an SVI's TAP; anything else is not ours.
            return Err(DropReason::VlanFiltered);
        }
        let known = if l2.dst_addr.is_multicast() {
            None
        } else {
            self.st.fdb.fdb.lookup(vid, l2.dst_addr.0, now)
        };
        let member = |v: &PortView| v.member(vid);
        let port_id = |i: usize| PortId(u16::try_from(i).unwrap_or(u16::MAX));
        // The frame itself goes to the last destination, copies to the others (no allocation:
        // the members are walked twice).
        let (flood, last) = match known {
            Some(p) if self.views.get(p.index()).is_some_and(member) => (false, p),
            Some(_) => return Err(DropReason::VlanFiltered),
            None => match self.views.iter().rposition(member) {
                Some(i) => (true, port_id(i)),
                None => return Err(DropReason::VlanFiltered),
            },
        };
        let mut accepted = 0;
        let mut refused = None;
        let mut count = |result: Result<(), DropReason>| match result {
            Ok(()) => accepted += 1,
            Err(reason) => refused = Some(reason),
        };
        if flood {
            for i in 0..last.index() {
                if !member(&self.views[i]) {
                    continue;
                }
                count(match frame.try_clone() {
                    Some(copy) => self.inject_tagged(now, port_id(i), vid, copy),
                    None => Err(self.inject_refused(port_id(i), DropReason::NoBuffer)),
                });
            }
        }
        count(self.inject_tagged(now, last, vid, frame));
        match (accepted, refused) {
            (0, Some(reason)) => Err(reason),
            _ => Ok(accepted),
        }
    }

    /// [`Ingress::inject`] of a frame for VLAN `vid`, tagged first if `port` carries it tagged.
    fn inject_tagged(
        &mut self,
        now: Instant,
        port: PortId,
        vid: u16,
        mut frame: F,
    ) -> Result<(), DropReason> {
        if self.views[port.index()].egress_tagged(vid) && !tag_frame(&mut frame, vid) {
            return Err(self.inject_refused(port, DropReason::NoBuffer));
        }
        self.inject(now, port, frame)
    }

    /// Counts an injected frame for `port` dropped before [`Ingress::inject`]; returns `reason`.
    fn inject_refused(&self, port: PortId, reason: DropReason) -> DropReason {
        if let Some(c) = self.shared.ingress_counters[self.st.side]
            .ports
            .get(port.index())
        {
            c.inject_drops[reason.index()].inc();
        }
        reason
    }

    /// Sends `frame`, built by the control plane, out of `port` through the normal egress
    /// path (see [`crate::inject`]): classified with `port`'s maps, rate-limited, charged to
    /// this side's CPU pseudo-port and to the egress queue, enqueued. Every refusal is counted
    /// in `port`'s `inject_drops` (an unknown port, which has no counters, is only returned).
    ///
    /// # Errors
    /// Why the frame was dropped.
    pub fn inject(&mut self, now: Instant, port: PortId, frame: F) -> Result<(), DropReason> {
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        self.st.inject(&ctx, now, port, frame)
    }

    /// Whether released cells wait to be pulled into this side's accounting: its next
    /// `handle_timeout` or `handle_rx_burst` would change the PG use it reports. Not a deadline
    /// ([`Ingress::poll_timeout`] leaves it out: pulling can wait for the next call unless a
    /// port wants pause, see `releases_can_change_pfc`); for a driver that skips calls on an
    /// idle step and wants the reported use current (the simulator).
    #[must_use]
    pub fn has_releases_to_pull(&self) -> bool {
        self.shared
            .releases
            .published_since(&self.st.seen_generation)
    }

    /// Pulls cells released by egress sides into the accounting and re-evaluates XOFF/XON of
    /// the owned lossless PGs (dynamic limits move as pools fill and drain); applies the other
    /// ingress sides' FDB updates; ends storm-rate alarm episodes that are over. Due whenever
    /// [`Ingress::poll_timeout`] says, and harmless at any other time; `handle_rx_burst` pulls
    /// releases and FDB updates too.
    pub fn handle_timeout(&mut self, now: Instant) {
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        if let Some(fib) = self.st.fib.as_mut() {
            fib.refresh();
        }
        self.st.sync_releases(&ctx);
        if self.st.fdb.is_synced() {
            self.st.fdb.sync(now);
        }
        let events = &ctx.shared.ingress_events[self.st.side];
        self.st.storm.roll(now, &self.st.owned, events);
    }

    /// Only the pull of released cells (and the PFC decisions it brings) of
    /// [`Ingress::handle_timeout`].
    pub(crate) fn pull_releases(&mut self) {
        let ctx = Ctx {
            shared: &self.shared,
            counters: &self.shared.ingress_counters[self.st.side],
            views: &self.views,
        };
        self.st.sync_releases(&ctx);
    }

    /// When [`Ingress::handle_timeout`] next has work of its own: the end of a storm-rate
    /// window that decides an alarm's episode, or now when the learn rings hold a backlog the
    /// bounded drain left. Inputs from other lcores (released cells, learn updates published
    /// after this call) arrive without a deadline; the runtime bounds its sleep for them.
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        if self.st.fdb.sync_has_work() || self.st.punt.len() > 0 {
            return Some(now);
        }
        self.st.storm.poll_timeout(&self.st.owned)
    }

    /// The oldest frame punted to the control plane (see [`crate::punt`]).
    pub fn poll_punt(&mut self) -> Option<Punted<F>> {
        self.st.punt.pop()
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

    /// Forgets every station learned on `port` (link down, reconfiguration), on this side and,
    /// through the learn rings, on every other ingress side (which forget only what they heard
    /// of at or before `now`). Call it on any one side.
    pub fn flush_fdb_port(&mut self, port: PortId, now: Instant) {
        let overflow = &self.shared.ingress_counters[self.st.side].fdb_sync_overflow;
        self.st.fdb.flush(overflow, Some(port), now);
    }

    /// Forgets every station, on this side and on every other ingress side (see
    /// [`Ingress::flush_fdb_port`]).
    pub fn flush_fdb(&mut self, now: Instant) {
        let overflow = &self.shared.ingress_counters[self.st.side].fdb_sync_overflow;
        self.st.fdb.flush(overflow, None, now);
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

/// Puts an 802.1Q tag of `vid` (PCP 0) into an untagged frame; false when it has no room.
fn tag_frame<F: Frame>(frame: &mut F, vid: u16) -> bool {
    frame.push_front(TAG_LEN)
        && insert_vlan_tag(frame.data_mut(), VlanTci::new(0, false, vid)).is_ok()
}

/// Counts a frame that egress admission (or its ring) refused for `reason`, against the
/// egress port (SAI charges a queue's drop to its port's `IF_OUT_DISCARDS`, not to the port
/// the frame came in on).
#[inline(never)]
fn count_refused(out_counters: &IngressPortCounters, q: usize, len: usize, reason: DropReason) {
    out_counters.queue_admission_drops[q].inc();
    out_counters.queue_admission_drop_bytes[q].add(len as u64);
    out_counters.drops[reason.index()].inc();
}

/// Counts a drop of `frame` received on the port of `counters`, and drops it.
pub(crate) fn drop_frame<F>(counters: &IngressPortCounters, reason: DropReason, frame: F) {
    counters.drops[reason.index()].inc();
    drop(frame);
}

impl<F: Frame> IngressState<F> {
    fn sync_releases(&mut self, ctx: &Ctx<'_>) {
        // The reader's half of the release protocol (`shared::Releases`): acquires what the
        // egress sides published before the counters are read.
        let changed = ctx.shared.releases.pull_if_new(&mut self.seen_generation);
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
        let cell = u64::from(self.cell.bytes);
        for &port in &self.owned {
            let p = port.index();
            let totals = releases.pg_totals(p);
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
        // This side's injected frames, charged to its CPU pseudo-port's PG 0 (skipped while it
        // holds nothing: then nothing of it can have been released).
        let cpu = self.cpu_port;
        if self.buffers.pg(cpu, 0).total() > 0 {
            let totals = releases.pg_totals(cpu);
            let (deltas, mask) = take_deltas(&totals, &mut self.seen_pg_release[cpu]);
            // Only PG 0 is used (a plain release: a second call site of `release_port` made the
            // compiler take it out of line for the ports' pull too, 2.7 Ir/packet).
            if mask & 1 != 0 {
                self.buffers.release(cpu, 0, deltas[0]);
            }
        }
        for p in 0..ctx.views.len() {
            let totals = releases.queue_totals(self.side, p);
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
        // Frames for the switch itself are never relayed (802.1Q-2018 8.6.3, Table 8-1), in
        // any VLAN. Only a multicast destination can be reserved: unicast pays one bit test.
        if l2.dst_addr.is_multicast() && is_reserved_group_address(l2.dst_addr.0) {
            return self.punt_frame(counters, now, port, frame);
        }
        // A router interface: routed, punted or dropped, never bridged (`route_forward`).
        if view.routed {
            return self.route_frame(ctx, view, counters, mitigations, now, port, &l2, frame, len);
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
            counters.pg_bytes[pg].add(len as u64);
            counters.pg_drops[pg].inc();
            return drop_frame(counters, DropReason::PfcwdIngress, frame);
        }
        self.fdb.learn(
            &ctx.counters.fdb_sync_overflow,
            &counters.fdb_learn_table_full,
            vid,
            l2.src_addr.0,
            port,
            now,
        );
        let dst = l2.dst_addr;
        // The VLAN's router interface (SVI): its router MAC is routed; ARP, ND and link-local
        // multicast of the VLAN are bridged as always, and a copy goes to the control plane.
        if let Some(svi) = self.svi.get(vid) {
            // (`get` is one test of a flag when the switch has no VLAN interface.)
            if dst.0 == svi.mac {
                return self.route_from_vlan(
                    ctx,
                    view,
                    counters,
                    mitigations,
                    now,
                    port,
                    vid,
                    &l2,
                    frame,
                    len,
                );
            }
            if dst.is_multicast() {
                self.punt_copy_to_svi(counters, now, port, vid, &l2, &frame);
            }
        }
        let unicast_to = if dst.is_multicast() {
            None
        } else {
            self.fdb.fdb.lookup(vid, dst.0, now)
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
        counters.pg_bytes[pg].add(len as u64);
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
                count_refused(out_counters, q, len, reason);
                return drop(frame);
            }
        };
        let producer = &mut self.producers[o][q];
        if producer.is_full() {
            // The ring is sized from the config; reaching its end is a drop like any other.
            self.refuse_enqueue(in_p, pg, o, q, cells, true);
            count_refused(out_counters, q, len, DropReason::QueueRingFull);
            return drop(frame);
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
        // In `rx_frames`, never in `RX_OK`: the MAC Control sublayer consumes it (802.3 31.5).
        counters.mac_control_rx.inc();
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
                    self.storm
                        .count(now, port, prio, &ctx.shared.ingress_events[self.side]);
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

    /// Queues a frame for the control plane, or drops it with the reason (rate, queue full).
    /// Out of line: data frames never call it.
    #[cold]
    #[inline(never)]
    fn punt_frame(&mut self, counters: &IngressPortCounters, now: Instant, port: PortId, frame: F) {
        // Parsed again here rather than passed down: the per-frame path keeps only the
        // destination test, and its header stays in registers.
        let Some(reason) = parse_l2(frame.data()).ok().as_ref().and_then(punt_reason) else {
            debug_assert!(
                false,
                "a frame to a reserved address always has a punt reason"
            );
            return drop_frame(counters, DropReason::Runt, frame);
        };
        self.punt_with_reason(counters, now, port, None, reason, frame);
    }

    /// Queues a frame for the control plane with `reason` (and the VLAN interface it is for),
    /// or drops it (rate, queue full).
    #[cold]
    #[inline(never)]
    pub(crate) fn punt_with_reason(
        &mut self,
        counters: &IngressPortCounters,
        now: Instant,
        port: PortId,
        vlan: Option<u16>,
        reason: crate::punt::PuntReason,
        frame: F,
    ) {
        match self.punt.punt(now, port, vlan, reason, frame) {
            Ok(()) => counters.punt_frames[reason.index()].inc(),
            Err((refused, frame)) => {
                counters.punt_drops[reason.index()].inc();
                let why = match refused {
                    PuntRefused::RateLimit => DropReason::PuntRateLimit,
                    PuntRefused::QueueFull => DropReason::PuntQueueFull,
                };
                drop_frame(counters, why, frame);
            }
        }
    }

    /// [`Ingress::inject`]: counts a refusal against `port`.
    #[inline(never)]
    fn inject(
        &mut self,
        ctx: &Ctx<'_>,
        now: Instant,
        port: PortId,
        frame: F,
    ) -> Result<(), DropReason> {
        let Some(counters) = ctx.counters.ports.get(port.index()) else {
            return Err(DropReason::NoDestination);
        };
        let len = frame.len();
        match self.enqueue_injected(ctx, now, port, frame) {
            Ok(()) => {
                counters.inject_frames.inc();
                counters.inject_bytes.add(len as u64);
                Ok(())
            }
            Err(reason) => {
                counters.inject_drops[reason.index()].inc();
                Err(reason)
            }
        }
    }

    /// Rate limit, classification by the egress port's maps, admission to the CPU
    /// pseudo-port's PG and to the egress queue, enqueue. On a refusal every admission made is
    /// undone and the frame dropped.
    fn enqueue_injected(
        &mut self,
        ctx: &Ctx<'_>,
        now: Instant,
        port: PortId,
        frame: F,
    ) -> Result<(), DropReason> {
        let o = port.index();
        let view = &ctx.views[o];
        if !self.inject_bucket.take(now) {
            return Err(DropReason::InjectRateLimit);
        }
        let data = frame.data();
        let len = data.len();
        let l2 = match parse_l2(data) {
            Ok(l2) => l2,
            Err(WireError::DoubleTag) => return Err(DropReason::VlanFiltered),
            Err(_) => return Err(DropReason::Runt),
        };
        if len - l2.payload_offset > view.max_payload {
            return Err(DropReason::Oversize);
        }
        // Classified like a frame this port received (its trust and maps): the control plane's
        // PCP or DSCP picks the queue. The frame leaves as it was built: no VLAN tagging.
        let (tc, l3) = classify(view, &l2, data);
        let q = view.maps.tc_to_queue[tc.index()].index() % PRIORITY_COUNT;
        let cells = self.cell.cells(len);
        let cpu = self.cpu_port;
        if self.buffers.admit_frame(cpu, 0, u64::from(cells)).is_err() {
            return Err(DropReason::InjectBufferFull);
        }
        let out_counters = &ctx.counters.ports[o];
        let queued_in = match self.egress_buffers.admit_frame(o, q, u64::from(cells)) {
            Ok(admitted) => admitted,
            Err(reason) => {
                self.buffers.release(cpu, 0, u64::from(cells));
                count_refused(out_counters, q, len, reason);
                return Err(reason);
            }
        };
        let producer = &mut self.producers[o][q];
        if producer.is_full() {
            self.buffers.release(cpu, 0, u64::from(cells));
            self.egress_buffers.release(o, q, u64::from(cells));
            count_refused(out_counters, q, len, DropReason::QueueRingFull);
            return Err(DropReason::QueueRingFull);
        }
        let meta = FrameMeta::new(
            u16::try_from(cpu).unwrap_or(u16::MAX),
            0,
            l3.map_or(0, |(off, _)| off),
            l3.is_some_and(|(_, v6)| v6),
            cells,
            now.as_nanos(),
        );
        // Published before the frame, as `forward` does.
        ctx.shared.ring_bytes_in(self.side, o, q).add(len as u64);
        if let Err(rtrb::PushError::Full(refused)) = producer.push(Queued { frame, meta }) {
            debug_assert!(false, "a ring that was not full refused a frame");
            drop(refused);
        }
        let cell = u64::from(self.cell.bytes);
        out_counters.queue_watermark[q].observe(queued_in.used * cell);
        ctx.counters.egress_pools[queued_in.pool]
            .shared_watermark
            .observe(queued_in.pool_use * cell);
        Ok(())
    }
}

/// Classification result carried from `handle_frame` to `forward`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IngressFrame {
    in_port: PortId,
    tc: TrafficClass,
    pg: usize,
    queue: usize,
    vid: u16,
    tagged: bool,
    /// Offset of the IP header and whether it is IPv6.
    l3: Option<(usize, bool)>,
}
