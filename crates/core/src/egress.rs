//! The egress side: what a TX lcore does for each port it transmits on.
//!
//! Per poll of a port: PFC frames first (XOFF on a change, refresh, XON), then frames the watchdog
//! drops, then — if the port may transmit — frames chosen by strict priority and DWRR among the
//! queues that hold something and are not paused, paced by the shaper, ECN-marked by WRED at
//! dequeue; each sent frame's cells go back to the ingress side that charged them.

use crate::counters::{DropReason, EgressPortCounters};
use crate::events::Event;
use crate::frame::Frame;
use crate::params::{PortParams, WatchdogAction, WredParams};
use crate::pfc::PfcGenerator;
use crate::queue::{FrameMeta, PortConsumers, Queued};
use crate::sched::{QueueScheduler, Shaper};
use crate::shared::{EgressCounters, Shared};
use crate::time::Instant;
use crate::types::{PortId, Priority, QueueIndex, PRIORITY_COUNT};
use crate::watchdog::{
    QueueMitigation, QueueObservation, QueueStatus, QueueWatchdog, WatchdogTransition,
};
use crate::wred::{decide, WredRng, WredVerdict};
use headroom_wire::ethernet::MacAddress;
use headroom_wire::ipv4::Ipv4Packet;
use headroom_wire::ipv6::Ipv6Packet;
use headroom_wire::mac_control::{MacControlRepr, PfcRepr};
use rtrb::Consumer;
use std::sync::Arc;

/// Bytes of a PFC frame without FCS (802.1Qbb: padded to the 64-byte minimum frame).
pub const PFC_FRAME_LEN: usize = 60;

/// Most frames the watchdog's drop action discards from one queue per poll (bounded work).
const WATCHDOG_DROP_BUDGET: usize = 256;

/// One egress queue: the rings from every ingress side, drained round robin.
#[derive(Debug)]
struct EgressQueue<F> {
    rings: Vec<Consumer<Queued<F>>>,
    /// Bytes taken out of each ring so far.
    next_ring: usize,
    lossless: bool,
    wred: Option<WredParams>,
    /// Priorities (in `pfc_enable`) whose received PFC pauses this queue.
    pause_mask: u8,
    last_tx: Instant,
    watchdog: Option<QueueWatchdog>,
    /// Priorities whose PFC frames the watchdog considers for this queue.
    watched_mask: u8,
    /// Counter values at the previous watchdog commit while stormed: tx ok, tx drop, rx ok, rx drop.
    wd_base: [u64; 4],
}

impl<F: Frame> EgressQueue<F> {
    /// The ring whose head is served next, if any ring holds a frame.
    fn head_ring(&self) -> Option<usize> {
        let n = self.rings.len();
        if n == 1 {
            return (!self.rings[0].is_empty()).then_some(0);
        }
        let mut r = self.next_ring;
        for _ in 0..n {
            if !self.rings[r].is_empty() {
                return Some(r);
            }
            r = if r + 1 == n { 0 } else { r + 1 };
        }
        None
    }

    /// The ring served next and the length of its head frame, if any ring holds a frame
    /// ([`EgressQueue::head_ring`] and a peek in one pass). Always inlined: it runs after every
    /// frame a queue sends.
    #[inline(always)]
    fn head(&self) -> Option<(usize, u32)> {
        let len = |h: &Queued<F>| u32::try_from(h.frame.len()).unwrap_or(u32::MAX);
        let n = self.rings.len();
        if n == 1 {
            return self.rings[0].peek().ok().map(|h| (0, len(h)));
        }
        let mut r = self.next_ring;
        for _ in 0..n {
            if let Ok(h) = self.rings[r].peek() {
                return Some((r, len(h)));
            }
            r = if r + 1 == n { 0 } else { r + 1 };
        }
        None
    }

    #[inline]
    fn is_empty(&self) -> bool {
        if let [ring] = self.rings.as_slice() {
            return ring.is_empty();
        }
        self.rings.iter().all(Consumer::is_empty)
    }
}

impl<F: Frame> EgressPort<F> {
    /// Whether queue `q` is held by received pause at `now`.
    #[inline]
    fn paused(&self, shared: &Shared, q: usize, now: Instant) -> bool {
        let p = self.id.index();
        if self.mitigated & 1 << q != 0 {
            return false;
        }
        if self.pause_802_3x && now < shared.pfc.port_paused_until(p) {
            return true;
        }
        let mut mask = self.queues[q % PRIORITY_COUNT].pause_mask;
        while mask != 0 {
            let prio = Priority::from_low_bits(u8::try_from(mask.trailing_zeros()).unwrap_or(0));
            if now < shared.pfc.paused_until(p, prio) {
                return true;
            }
            mask &= mask - 1;
        }
        false
    }

    /// The queues that may send at `now` (bit per queue): not empty, not paused, not under
    /// the watchdog's drop action (what `drop_stormed` could not discard within its per-poll
    /// budget waits for the next poll).
    #[inline]
    fn eligible(&self, shared: &Shared, now: Instant) -> u8 {
        let mut eligible = 0u8;
        for (q, queue) in self.queues.iter().enumerate() {
            if self.dropping & 1 << q == 0 && !queue.is_empty() && !self.paused(shared, q, now) {
                eligible |= 1 << q;
            }
        }
        eligible
    }
}

#[derive(Debug)]
struct EgressPort<F> {
    id: PortId,
    mac: MacAddress,
    queues: [EgressQueue<F>; PRIORITY_COUNT],
    sched: QueueScheduler,
    shaper: Shaper,
    pfc: PfcGenerator,
    pause_802_3x: bool,
    /// Queues with a watchdog mitigation (bit per queue), as this side last set them on the
    /// shared board: only the egress side that owns a port writes its mitigations, so the
    /// per-poll checks read these bits instead of eight shared slots, twice.
    mitigated: u8,
    /// Of those, the queues under the drop action.
    dropping: u8,
}

/// The egress side of one TX lcore.
#[derive(Debug)]
pub struct Egress<F: Frame> {
    side: usize,
    shared: Arc<Shared>,
    ports: Vec<EgressPort<F>>,
    /// PortId → index into `ports`.
    index: Vec<Option<usize>>,
    rng: WredRng,
    released_any: bool,
    watchdog_enabled: bool,
    next_watchdog_poll: Instant,
    big_red_switch: bool,
}

/// The burst size the shaper lets out after idling: two full frames, or 1 ms at the port rate,
/// whichever is more.
///
/// The credit a shaper accumulates while its lcore is late is capped at the burst, so whatever
/// lateness exceeds the burst is link time lost for good. An adaptive lcore sleeps up to 200 µs
/// and the kernel adds its timer slack (50 µs) and any scheduling delay on a shared CPU; with
/// the former 20 µs (two 1500-byte frames: 24.5 µs at 1 Gb/s) a lab port reached only about a
/// third of its speed (TCP through a 1G lab: 317-364 Mb/s; 583-756 Mb/s with 1 ms on the same
/// loaded 2-CPU machine). 1 ms covers the sleep, the slack and a scheduling delay of the same
/// order, while bursts stay short against PFC pause times (1 ms ≈ 3 % of the maximum pause at
/// 1 Gb/s) and against the queue depths where ECN marks.
fn shaper_burst_bytes(p: &PortParams) -> u32 {
    let one_ms = p.shaper_rate_bps / 8 / 1_000;
    u32::try_from(one_ms.max(2 * u64::from(p.mtu_bytes) + 64)).unwrap_or(u32::MAX)
}

impl<F: Frame> Egress<F> {
    pub(crate) fn new(
        shared: Arc<Shared>,
        side: usize,
        mut consumers: Vec<PortConsumers<F>>,
        lossless_queues: &[[bool; PRIORITY_COUNT]],
        now: Instant,
    ) -> Self {
        let params = &shared.params;
        let owned = shared.layout.egress_ports(side);
        let mut index = vec![None; params.ports.len()];
        let watchdog_enabled = owned
            .iter()
            .any(|p| params.ports[p.index()].watchdog.is_some());
        let ports = owned
            .iter()
            .enumerate()
            .map(|(i, &id)| {
                index[id.index()] = Some(i);
                let p = &params.ports[id.index()];
                let queues = core::array::from_fn(|q| {
                    let rings: Vec<_> = consumers
                        .iter_mut()
                        .map(|per_port| {
                            per_port[id.index()][q]
                                .take()
                                .expect("one consumer per ring")
                        })
                        .collect();
                    let qi = QueueIndex::from_low_bits(u8::try_from(q).unwrap_or(0));
                    let mapped = |set: u8| {
                        Priority::ALL
                            .iter()
                            .filter(|pr| {
                                set & pr.bit() != 0 && p.maps.pfc_to_queue[pr.index()] == qi
                            })
                            .fold(0u8, |m, pr| m | pr.bit())
                    };
                    let watched = p.watchdog.map_or(0, |w| w.watched.0 & p.pfc_enable.0);
                    EgressQueue {
                        rings,
                        next_ring: 0,
                        lossless: lossless_queues[id.index()][q],
                        wred: p.queues[q].wred,
                        pause_mask: mapped(p.pfc_enable.0),
                        last_tx: now,
                        watchdog: p.watchdog.filter(|_| mapped(watched) != 0).map(|w| {
                            QueueWatchdog::new(w.action, w.detection_time_ns, w.restoration_time_ns)
                        }),
                        watched_mask: mapped(watched),
                        wd_base: [0; 4],
                    }
                });
                EgressPort {
                    id,
                    mac: MacAddress(p.mac),
                    queues,
                    sched: QueueScheduler::new(p.queues.map(|q| q.scheduler)),
                    shaper: Shaper::new(p.shaper_rate_bps, shaper_burst_bytes(p), now),
                    pfc: PfcGenerator::new(p.pfc_enable.0, p.pfc_quanta, p.pfc_refresh_ns),
                    pause_802_3x: p.pause_802_3x,
                    mitigated: 0,
                    dropping: 0,
                }
            })
            .collect();
        let poll = params.watchdog.poll_interval_ns;
        let seed = params.seed;
        let big_red_switch = params.watchdog.big_red_switch;
        let mut egress = Self {
            side,
            rng: WredRng::new(seed ^ (side as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ports,
            index,
            released_any: false,
            watchdog_enabled,
            next_watchdog_poll: now.saturating_add_nanos(poll),
            big_red_switch: false,
            shared,
        };
        if big_red_switch {
            egress.set_big_red_switch(true, now);
        }
        egress
    }

    /// Which egress side this is (its index in `Layout::egress_side_of_port`).
    #[must_use]
    pub fn side(&self) -> usize {
        self.side
    }

    /// The ports this side transmits on.
    pub fn ports(&self) -> impl Iterator<Item = PortId> + '_ {
        self.ports.iter().map(|p| p.id)
    }

    fn counters(&self) -> &EgressCounters {
        &self.shared.egress_counters[self.side]
    }

    /// Produces up to `max` frames to transmit on `port` at `now`, appending them to `out`:
    /// PFC frames first, then data. `alloc(len)` provides a zeroed frame buffer for a PFC frame.
    /// Returns how many frames were appended.
    pub fn poll_tx_burst(
        &mut self,
        now: Instant,
        port: PortId,
        out: &mut Vec<F>,
        max: usize,
        alloc: &mut impl FnMut(usize) -> Option<F>,
    ) -> usize {
        let Some(i) = self.index[port.index()] else {
            debug_assert!(
                false,
                "{port} is not transmitted by egress side {}",
                self.side
            );
            return 0;
        };
        let start = out.len();
        self.poll_pfc(now, i, out, alloc);
        self.drop_stormed(i);
        if self.shared.tx_enabled(port) {
            self.poll_data(now, i, out, max.saturating_sub(out.len() - start));
        }
        self.publish_releases();
        out.len() - start
    }

    fn poll_pfc(
        &mut self,
        now: Instant,
        i: usize,
        out: &mut Vec<F>,
        alloc: &mut impl FnMut(usize) -> Option<F>,
    ) {
        let port = &mut self.ports[i];
        let p = port.id.index();
        let wanted = self.shared.pfc.wanted_xoff(p);
        if !port.pfc.is_due(now, wanted) {
            return;
        }
        let counters = &self.shared.egress_counters[self.side].ports[p];
        let Some(mut frame) = alloc(PFC_FRAME_LEN) else {
            // Nothing changed in the generator: the next poll tries again.
            counters.drops[DropReason::NoBuffer.index()].inc();
            return;
        };
        let Some(decision) = port.pfc.poll(now, wanted) else {
            return;
        };
        let repr = MacControlRepr::Pfc(PfcRepr {
            class_enable: decision.class_enable,
            pause_quanta: decision.quanta,
        });
        if repr.emit_frame(port.mac, frame.data_mut()).is_err() {
            counters.drops[DropReason::NoBuffer.index()].inc();
            return;
        }
        counters.pfc_frames_tx.inc();
        for prio in Priority::ALL {
            if decision.class_enable & prio.bit() != 0 {
                counters.pfc_tx[prio.index()].inc();
            }
        }
        out.push(frame);
    }

    /// Whether queue `q` of `port` is held by received pause at `now`.
    #[inline]
    fn paused(&self, i: usize, q: usize, now: Instant) -> bool {
        self.ports[i].paused(&self.shared, q, now)
    }

    fn poll_data(&mut self, now: Instant, i: usize, out: &mut Vec<F>, max: usize) {
        let p = self.ports[i].id.index();
        let mut eligible = self.ports[i].eligible(&self.shared, now);
        if eligible == 0 {
            return;
        }
        let shared = &*self.shared;
        let side = self.side;
        let counters = &shared.egress_counters[side].ports[p];
        // This side's PG release counters, `[in port][pg]`: one index per sent frame.
        let pg_releases = shared.releases.pg_of(side);
        let port = &mut self.ports[i];
        if max == 0 {
            return;
        }
        // The shaper is refilled once per poll: a refill at the same `now` again adds nothing
        // (credit never exceeds the burst), so each run only checks the credit.
        port.shaper.ready(now);
        let mut sent = 0;
        while sent < max && eligible != 0 && port.shaper.has_credit() {
            let queues = &port.queues;
            // The last head the scheduler looked at, which is usually the picked queue's.
            let mut seen = None;
            let Some(q) = port.sched.pick(eligible, |q| {
                let head = queues[q].head();
                seen = Some((q, head));
                head.map_or(0, |(_, len)| len)
            }) else {
                break;
            };
            // Serve frames from `q` for as long as the scheduler would keep picking it, with
            // the queue's state and counters at hand; totals are stored once per run.
            let q = q % PRIORITY_COUNT;
            let queue = &mut port.queues[q];
            let mut run = Run::default();
            let mut head = match seen {
                Some((seen_q, head)) if seen_q == q => head,
                _ => queue.head(),
            };
            if head.is_none() {
                eligible &= !(1 << q);
            } else {
                // The run below pops at least the head, and every frame popped releases cells.
                self.released_any = true;
            }
            // With one ring (one ingress side) the next ring is always that one.
            let several_rings = queue.rings.len() > 1;
            while let Some((r, head_len)) = head {
                let Ok(Queued { mut frame, meta }) = queue.rings[r].pop() else {
                    break;
                };
                if several_rings {
                    queue.next_ring = if r + 1 == queue.rings.len() { 0 } else { r + 1 };
                }
                if run.ring != r {
                    run.flush_ring(shared, side, p, q);
                    run.ring = r;
                }
                // The length read when this frame was the head (each read of a frame's length
                // goes through the backend's bounds checks).
                let len = u64::from(head_len);
                let verdict = match queue.wred {
                    Some(w) => {
                        // Depth including this frame, for WRED (instantaneous, SAI weight 0).
                        let in_ring = |k: usize| {
                            shared.ring_bytes_in(k, p, q).get()
                                - shared.ring_bytes_out(k, p, q).get()
                        };
                        let depth = if several_rings {
                            (0..queue.rings.len()).map(in_ring).sum::<u64>()
                        } else {
                            in_ring(0)
                        } - run.ring_bytes;
                        let ect = ecn_capable(frame.data(), meta.l3_offset(), meta.ipv6());
                        decide(&w, depth, ect, queue.lossless, &mut self.rng)
                    }
                    None => WredVerdict::Pass,
                };
                run.ring_bytes += len;
                run.ring_cells += u64::from(meta.cells);
                // The PG's cells go back to the ingress side that charged them.
                pg_releases[usize::from(meta.in_port) * PRIORITY_COUNT
                    + usize::from(meta.pg) % PRIORITY_COUNT]
                    .add(u64::from(meta.cells));
                // The next head, which also tells whether the queue is now empty.
                head = queue.head();
                let emptied = head.is_none();
                if emptied {
                    eligible &= !(1 << q);
                    port.sched.queue_emptied(q);
                }
                match verdict {
                    WredVerdict::Drop => {
                        counters.wred_drops[q].inc();
                        counters.queue_drop_bytes[q].add(len);
                        counters.drops[DropReason::WredDrop.index()].inc();
                    }
                    WredVerdict::Mark | WredVerdict::Pass => {
                        if verdict == WredVerdict::Mark
                            && mark_ce(frame.data_mut(), meta.l3_offset(), meta.ipv6())
                        {
                            counters.ecn_marked[q].inc();
                        }
                        run.tx_frames += 1;
                        run.tx_bytes += len;
                        let delay = now.as_nanos().saturating_sub(meta.enqueued_ns);
                        run.delay_ns += delay;
                        counters.queue_delay_buckets[q].0[crate::counters::delay_bucket(delay)]
                            .inc();
                        port.shaper.consume(u32::try_from(len).unwrap_or(u32::MAX));
                        out.push(frame);
                        sent += 1;
                    }
                }
                // The next frame of the run: what the outer loop would check, then whether
                // the scheduler would pick this queue again.
                let Some((_, head_len)) = head else { break };
                if sent >= max
                    || !port.shaper.has_credit()
                    || !port.sched.pick_again(q, eligible, head_len)
                {
                    break;
                }
            }
            run.flush_ring(shared, side, p, q);
            if run.tx_frames > 0 {
                queue.last_tx = now;
                counters.tx_frames[q].add(run.tx_frames);
                counters.tx_bytes[q].add(run.tx_bytes);
                counters.queue_delay_ns_sum[q].add(run.delay_ns);
            }
        }
    }

    /// Applies the watchdog's drop action: discards what stormed queues hold (bounded per poll).
    fn drop_stormed(&mut self, i: usize) {
        let p = self.ports[i].id.index();
        let mut dropping = self.ports[i].dropping;
        while dropping != 0 {
            let q = dropping.trailing_zeros() as usize % PRIORITY_COUNT;
            dropping &= dropping - 1;
            let counters = &self.shared.egress_counters[self.side].ports[p];
            let queue = &mut self.ports[i].queues[q];
            for _ in 0..WATCHDOG_DROP_BUDGET {
                let Some(r) = queue.head_ring() else { break };
                let Ok(Queued { frame, meta }) = queue.rings[r].pop() else {
                    break;
                };
                self.shared.ring_bytes_out(r, p, q).add(frame.len() as u64);
                release(&self.shared, self.side, p, q, &meta);
                self.released_any = true;
                counters.pfcwd_drops[q].inc();
                counters.queue_drop_bytes[q].add(frame.len() as u64);
                counters.drops[DropReason::PfcwdQueue.index()].inc();
                drop(frame);
            }
        }
    }

    fn publish_releases(&mut self) {
        if self.released_any {
            self.released_any = false;
            // The writer's half of the release protocol (`shared::Releases`).
            self.shared.releases.publish(self.side);
        }
    }

    /// Runs time-driven work due at `now`: the PFC watchdog's polls.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.watchdog_enabled {
            return;
        }
        let poll = self.shared.params.watchdog.poll_interval_ns;
        // Bounded: one evaluation per call; a late call evaluates once, then realigns.
        if now >= self.next_watchdog_poll {
            self.poll_watchdogs(now);
            let behind = now.saturating_nanos_since(self.next_watchdog_poll) / poll;
            self.next_watchdog_poll = self
                .next_watchdog_poll
                .saturating_add_nanos((behind + 1) * poll);
        }
    }

    fn poll_watchdogs(&mut self, now: Instant) {
        let shared = Arc::clone(&self.shared);
        let stats_all = &shared.egress_counters[self.side];
        for i in 0..self.ports.len() {
            let p = self.ports[i].id.index();
            let ingress_side = shared.layout.ingress_side_of_port[p];
            let in_counters = &shared.ingress_counters[ingress_side].ports[p];
            for q in 0..PRIORITY_COUNT {
                let obs = self.observe(i, q, now);
                let queue = &mut self.ports[i].queues[q];
                let Some(wd) = queue.watchdog.as_mut() else {
                    continue;
                };
                let stats = &stats_all.watchdog[p][q];
                let counters = &stats_all.ports[p];
                let current = [
                    counters.tx_frames[q].get(),
                    counters.pfcwd_drops[q].get() + counters.wred_drops[q].get(),
                    in_counters.pg_frames[q]
                        .get()
                        .saturating_sub(in_counters.pg_drops[q].get()),
                    in_counters.pg_drops[q].get(),
                ];
                let was = wd.status();
                let transition = wd.poll(now, &obs);
                if was == QueueStatus::Stormed {
                    // Commit the deltas since the last poll (SONiC commits periodically too).
                    let d: Vec<u64> = current
                        .iter()
                        .zip(queue.wd_base)
                        // Saturating: the RX pair is read from another side's counters, one
                        // word at a time; a read between its two increments must not wrap.
                        .map(|(c, b)| c.saturating_sub(b))
                        .collect();
                    stats.tx_ok.add(d[0]);
                    stats.tx_drop.add(d[1]);
                    stats.rx_ok.add(d[2]);
                    stats.rx_drop.add(d[3]);
                    stats.last_tx_ok.set(stats.last_tx_ok.get() + d[0]);
                    stats.last_tx_drop.set(stats.last_tx_drop.get() + d[1]);
                    stats.last_rx_ok.set(stats.last_rx_ok.get() + d[2]);
                    stats.last_rx_drop.set(stats.last_rx_drop.get() + d[3]);
                }
                queue.wd_base = current;
                let port_id = PortId(u16::try_from(p).unwrap_or(u16::MAX));
                let queue_index = QueueIndex::from_low_bits(u8::try_from(q).unwrap_or(0));
                match transition {
                    Some(WatchdogTransition::Detected) => {
                        let action = wd.action();
                        stats.detected.inc();
                        stats.stormed.set(1);
                        for g in [
                            &stats.last_tx_ok,
                            &stats.last_tx_drop,
                            &stats.last_rx_ok,
                            &stats.last_rx_drop,
                        ] {
                            g.set(0);
                        }
                        if !self.big_red_switch {
                            set_mitigation(
                                &shared,
                                &mut self.ports[i],
                                q,
                                QueueMitigation::for_action(action),
                            );
                        }
                        shared.egress_events[self.side].push(Event::StormDetected {
                            port: port_id,
                            queue: queue_index,
                            action,
                            at: now,
                        });
                    }
                    Some(WatchdogTransition::Restored) => {
                        stats.restored.inc();
                        stats.stormed.set(0);
                        if !self.big_red_switch {
                            set_mitigation(&shared, &mut self.ports[i], q, QueueMitigation::None);
                        }
                        shared.egress_events[self.side].push(Event::StormRestored {
                            port: port_id,
                            queue: queue_index,
                            at: now,
                        });
                    }
                    None => {}
                }
            }
        }
    }

    fn observe(&self, i: usize, q: usize, now: Instant) -> QueueObservation {
        let port = &self.ports[i];
        let p = port.id.index();
        let queue = &port.queues[q];
        let mut paused_since: Option<Instant> = None;
        let mut last_pfc_frame: Option<Instant> = None;
        let mut mask = queue.watched_mask;
        while mask != 0 {
            let prio = Priority::from_low_bits(u8::try_from(mask.trailing_zeros()).unwrap_or(0));
            let view = self.shared.pfc.view(p, prio);
            if view.is_paused(now) {
                paused_since =
                    Some(paused_since.map_or(view.episode_start, |s| s.min(view.episode_start)));
            }
            last_pfc_frame = last_pfc_frame.max(view.last_frame);
            mask &= mask - 1;
        }
        let head_enqueued = queue
            .head_ring()
            .and_then(|r| queue.rings[r].peek().ok())
            .map(|h| Instant::from_nanos(h.meta.enqueued_ns));
        QueueObservation {
            paused_since,
            head_enqueued,
            last_tx: queue.last_tx,
            last_pfc_frame,
        }
    }

    /// Turns the big red switch on or off: the drop action on every watched queue of this side's
    /// ports, regardless of storms (SONiC `BIG_RED_SWITCH`).
    pub fn set_big_red_switch(&mut self, on: bool, _now: Instant) {
        self.big_red_switch = on;
        for port in &mut self.ports {
            for q in 0..PRIORITY_COUNT {
                let Some(wd) = &port.queues[q].watchdog else {
                    continue;
                };
                let m = if on {
                    QueueMitigation::Drop
                } else if wd.status() == QueueStatus::Stormed {
                    QueueMitigation::for_action(wd.action())
                } else {
                    QueueMitigation::None
                };
                set_mitigation(&self.shared, port, q, m);
            }
        }
    }

    /// The earliest time something is due on this side: a PFC refresh, a paused queue with
    /// frames resuming, the shaper letting a waiting frame out, a watchdog poll.
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        let mut next = if self.watchdog_enabled {
            self.next_watchdog_poll
        } else {
            Instant::MAX
        };
        for (i, port) in self.ports.iter().enumerate() {
            let p = port.id.index();
            next = next.min(port.pfc.poll_timeout());
            if self.shared.pfc.wanted_xoff(p) != port.pfc.sent_xoff() {
                return Some(now);
            }
            for (q, queue) in port.queues.iter().enumerate() {
                if queue.is_empty() {
                    continue;
                }
                if self.paused(i, q, now) {
                    let mut until = Instant::MAX;
                    let mut mask = queue.pause_mask;
                    while mask != 0 {
                        let prio = Priority::from_low_bits(
                            u8::try_from(mask.trailing_zeros()).unwrap_or(0),
                        );
                        let u = self.shared.pfc.paused_until(p, prio);
                        if u > now {
                            until = until.min(u);
                        }
                        mask &= mask - 1;
                    }
                    next = next.min(until);
                } else if self.shared.tx_enabled(port.id) {
                    next = next.min(port.shaper.next_ready(now));
                }
            }
        }
        (next != Instant::MAX).then_some(next)
    }

    /// Frames waiting in `(port, queue)`.
    #[must_use]
    pub fn queue_len(&self, port: PortId, queue: usize) -> usize {
        self.index[port.index()].map_or(0, |i| {
            self.ports[i].queues[queue]
                .rings
                .iter()
                .map(Consumer::slots)
                .sum()
        })
    }

    /// The watchdog status of `(port, queue)`, if it is watched.
    #[must_use]
    pub fn watchdog_status(&self, port: PortId, queue: usize) -> Option<QueueStatus> {
        let i = self.index[port.index()]?;
        self.ports[i].queues[queue]
            .watchdog
            .as_ref()
            .map(QueueWatchdog::status)
    }

    /// Counters of one port as this side keeps them.
    #[must_use]
    pub fn port_counters(&self, port: PortId) -> &EgressPortCounters {
        &self.counters().ports[port.index()]
    }

    /// The configured watchdog action of `(port, queue)`, if watched.
    #[must_use]
    pub fn watchdog_action(&self, port: PortId, queue: usize) -> Option<WatchdogAction> {
        let i = self.index[port.index()]?;
        self.ports[i].queues[queue]
            .watchdog
            .as_ref()
            .map(QueueWatchdog::action)
    }
}

/// Sets the watchdog mitigation of queue `q` of `port` on the shared board (which the ingress
/// side reads) and in the port's own bits (which this side reads).
fn set_mitigation<F>(shared: &Shared, port: &mut EgressPort<F>, q: usize, m: QueueMitigation) {
    shared.mitigation.set(port.id.index(), q, m);
    let bit = 1u8 << q;
    port.mitigated = port.mitigated & !bit | if m == QueueMitigation::None { 0 } else { bit };
    port.dropping = port.dropping & !bit | if m == QueueMitigation::Drop { bit } else { 0 };
}

/// What a run of frames from one queue adds up to, stored once at its end.
#[derive(Debug, Default)]
struct Run {
    /// The ring the frames below came from (the ingress side that enqueued them).
    ring: usize,
    /// Bytes taken out of `ring` and not yet added to its `ring_bytes_out`.
    ring_bytes: u64,
    /// Cells of those frames not yet given back to the queue's accounting of that side.
    ring_cells: u64,
    tx_frames: u64,
    tx_bytes: u64,
    delay_ns: u64,
}

impl Run {
    /// Publishes what was taken out of the current ring: its bytes, and its cells to the egress
    /// accounting of the ingress side that admitted them (ring `k` is ingress side `k`'s).
    #[inline]
    fn flush_ring(&mut self, shared: &Shared, side: usize, port: usize, queue: usize) {
        if self.ring_bytes > 0 || self.ring_cells > 0 {
            shared
                .ring_bytes_out(self.ring, port, queue)
                .add(self.ring_bytes);
            shared
                .releases
                .queue(side, self.ring, port, queue)
                .add(self.ring_cells);
            self.ring_bytes = 0;
            self.ring_cells = 0;
        }
    }
}

/// Gives a sent or dropped frame's cells back to the ingress side that charged them.
#[inline]
fn release(shared: &Shared, egress_side: usize, port: usize, queue: usize, meta: &FrameMeta) {
    let cells = u64::from(meta.cells);
    let in_port = usize::from(meta.in_port);
    shared
        .releases
        .pg(egress_side, in_port, usize::from(meta.pg))
        .add(cells);
    let ingress_side = shared.ingress_side_of(in_port);
    shared
        .releases
        .queue(egress_side, ingress_side, port, queue)
        .add(cells);
}

/// Whether the frame's IP header says ECT(0) or ECT(1).
#[inline]
fn ecn_capable(data: &[u8], l3_offset: u8, ipv6: bool) -> bool {
    let o = usize::from(l3_offset);
    if o == 0 || data.len() < o + 2 {
        return false;
    }
    let ecn = if ipv6 {
        data[o + 1] >> 4 & 0b11
    } else {
        data[o + 1] & 0b11
    };
    ecn == 0b01 || ecn == 0b10
}

/// Sets CE in place (RFC 3168 6.1.1.1), keeping the IPv4 checksum valid (RFC 1624).
#[inline]
fn mark_ce(data: &mut [u8], l3_offset: u8, ipv6: bool) -> bool {
    use headroom_wire::ip::CeMark;
    let o = usize::from(l3_offset);
    let marked = if ipv6 {
        match data.get_mut(o..o + 40) {
            Some(h) => Ipv6Packet::new_unchecked(h).mark_ce(),
            None => CeMark::NotEcnCapable,
        }
    } else {
        match data.get_mut(o..o + 20) {
            Some(h) => Ipv4Packet::new_unchecked(h).mark_ce(),
            None => CeMark::NotEcnCapable,
        }
    };
    marked == CeMark::Marked
}
