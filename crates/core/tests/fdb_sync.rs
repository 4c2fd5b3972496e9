//! Two ingress sides (two RX lcores) converge on one MAC table through the learn rings
//! (`fdb_sync`): learns, moves, refreshes, aging, overflow and flushes. Virtual time throughout.

mod common;

use common::{ipv4_frame, HOST_A, HOST_B, HOST_C};
use headroom_core::fdb_sync::{refresh_period_ns, FDB_SYNC_DRAIN_PER_RING, FDB_SYNC_RING_ENTRIES};
use headroom_core::frame::HeapFrame;
use headroom_core::params::presets;
use headroom_core::shared::{Layout, LcorePorts};
use headroom_core::step::LcoreStep;
use headroom_core::switch::build;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;

const VID: u16 = 1;
const PORTS: usize = 4;
const SIDE_A: usize = 0;
const SIDE_B: usize = 1;

/// Ports 0-1 are received by side A, ports 2-3 by side B; one egress side sends on all four.
/// Lcore 0 runs side A and the egress side, lcore 1 side B.
struct TwoSides {
    steps: Vec<LcoreStep<HeapFrame>>,
    now: Instant,
}

impl TwoSides {
    fn new(aging_ns: u64) -> Self {
        let mut params = presets::simple(PORTS, 10_000_000_000);
        params.fdb_aging_ns = aging_ns;
        let now = Instant::from_millis(1);
        let ports = |ps: &[u16]| ps.iter().map(|p| PortId(*p)).collect::<Vec<_>>();
        let layout = Layout::from_lcores(
            PORTS,
            &[
                LcorePorts {
                    rx: ports(&[0, 1]),
                    tx: ports(&[0, 1, 2, 3]),
                },
                LcorePorts {
                    rx: ports(&[2, 3]),
                    tx: Vec::new(),
                },
            ],
        )
        .expect("a valid layout");
        assert_eq!(
            layout.ingress_side_of_port,
            [SIDE_A, SIDE_A, SIDE_B, SIDE_B]
        );
        Self {
            steps: build(params, layout, now).expect("a valid switch"),
            now,
        }
    }

    fn advance_ns(&mut self, ns: u64) {
        self.now = self.now.saturating_add_nanos(ns);
    }

    fn side_of(port: u16) -> usize {
        if port < 2 {
            SIDE_A
        } else {
            SIDE_B
        }
    }

    /// `src` sends one frame to `dst` into `port` (one burst on that port's ingress side).
    fn send(&mut self, port: u16, src: [u8; 6], dst: [u8; 6]) {
        let mut burst = vec![ipv4_frame(src, dst, 0, Ecn::NotEct, 64)];
        let side = Self::side_of(port);
        self.steps[side].handle_rx_burst(self.now, PortId(port), &mut burst);
    }

    /// Both ingress sides' timeouts (each drains its incoming learn ring).
    fn tick(&mut self) {
        for step in &mut self.steps {
            step.handle_timeout(self.now);
        }
    }

    /// Frames each port transmits from what is queued now (the queues are emptied).
    fn transmitted(&mut self) -> [usize; PORTS] {
        let mut sent = [0; PORTS];
        let mut out = Vec::new();
        for _ in 0..16 {
            for (p, n) in sent.iter_mut().enumerate() {
                let port = PortId(u16::try_from(p).unwrap());
                *n += self.steps[0].poll_tx_burst(self.now, port, &mut out, 64, &mut |_| None);
                out.clear();
            }
            self.advance_ns(10_000);
        }
        sent
    }

    /// `count` new stations (numbered from `first`) speak on `port`, in bursts of 32; what
    /// they flood is discarded.
    fn many_stations_speak(&mut self, port: u16, first: u32, count: u32) {
        let side = Self::side_of(port);
        let mut burst = Vec::new();
        for i in first..first + count {
            burst.push(ipv4_frame(station(i), HOST_C, 0, Ecn::NotEct, 64));
            if burst.len() == 32 || i + 1 == first + count {
                self.steps[side].handle_rx_burst(self.now, PortId(port), &mut burst);
                self.transmitted();
            }
        }
    }

    fn lookup(&self, side: usize, mac: [u8; 6]) -> Option<PortId> {
        self.steps[side]
            .ingress()
            .expect("an ingress side")
            .fdb()
            .lookup(VID, mac, self.now)
    }

    fn overflow(&self, side: usize) -> u64 {
        self.steps[0].shared().ingress_counters[side]
            .fdb_sync_overflow
            .get()
    }
}

/// A station address made from a number (locally administered, unicast).
fn station(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0x55, b[0], b[1], b[2], b[3]]
}

#[test]
fn station_learned_on_one_side_is_unicast_by_the_other() {
    let mut sw = TwoSides::new(300_000_000_000);
    // B does not know HOST_A yet: a frame for it is flooded to the three other ports.
    sw.send(2, HOST_B, HOST_A);
    assert_eq!(sw.transmitted(), [1, 1, 0, 1]);
    // HOST_A speaks on port 0 (side A). Side B learns it with its next burst.
    sw.send(0, HOST_A, HOST_B);
    assert_eq!(sw.transmitted(), [0, 0, 1, 0], "A learned HOST_B from B");
    sw.send(2, HOST_B, HOST_A);
    assert_eq!(
        sw.transmitted(),
        [1, 0, 0, 0],
        "B unicasts to the station A learned"
    );
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
    assert_eq!(sw.overflow(SIDE_A), 0);
    assert_eq!(sw.overflow(SIDE_B), 0);
}

#[test]
fn station_move_across_sides_ends_on_the_new_port_everywhere() {
    let mut sw = TwoSides::new(300_000_000_000);
    sw.send(1, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(1)));
    // The station moves to port 3 (side B).
    sw.advance_ns(100_000);
    sw.send(3, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_A, HOST_A), Some(PortId(3)));
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(3)));
    sw.transmitted();
    // A frame for it entering side A goes to port 3 only.
    sw.send(0, HOST_B, HOST_A);
    assert_eq!(sw.transmitted(), [0, 0, 0, 1]);
    // And back to port 1 within a millisecond of its first frame there (A's relearn cache must
    // not hide the move back).
    assert!(sw.now.as_nanos() < 2_000_000);
    sw.send(1, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_A, HOST_A), Some(PortId(1)));
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(1)));
}

#[test]
fn newest_learn_wins_whatever_order_the_updates_arrive_in() {
    let mut sw = TwoSides::new(300_000_000_000);
    let frame = || vec![ipv4_frame(HOST_A, HOST_C, 0, Ecn::NotEct, 64)];
    let t1 = sw.now;
    let t2 = t1.saturating_add_nanos(1_000);
    // Lcores read their clocks independently: B hears the station on port 2 at t2; A read t1
    // before that but runs its burst (port 0) only afterwards. A's burst applies B's newer
    // update first and keeps it; B then receives A's older update and keeps its own learn.
    sw.steps[SIDE_B].handle_rx_burst(t2, PortId(2), &mut frame());
    sw.steps[SIDE_A].handle_rx_burst(t1, PortId(0), &mut frame());
    sw.now = t2.saturating_add_nanos(1_000);
    sw.tick();
    assert_eq!(
        sw.lookup(SIDE_A, HOST_A),
        Some(PortId(2)),
        "A: B's later learn"
    );
    assert_eq!(
        sw.lookup(SIDE_B, HOST_A),
        Some(PortId(2)),
        "B: not the stale update"
    );
    // The station's next frame on port 0 (after A's relearn interval) is newer than everything:
    // both sides follow it.
    sw.advance_ns(2_000_000);
    sw.send(0, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_A, HOST_A), Some(PortId(0)));
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
}

#[test]
fn a_stale_update_behind_a_backlog_does_not_undo_a_newer_local_learn() {
    let mut sw = TwoSides::new(300_000_000_000);
    // A publishes a backlog of new stations, then HOST_A on port 0 at t1.
    let backlog = u32::try_from(FDB_SYNC_DRAIN_PER_RING).unwrap() + 10;
    sw.many_stations_speak(1, 0, backlog);
    sw.send(0, HOST_A, HOST_C);
    // B hears HOST_A on port 2 later; its burst drains only part of the backlog first.
    sw.advance_ns(1_000);
    sw.send(2, HOST_A, HOST_C);
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(2)));
    // The rest of the backlog, with A's older HOST_A update, reaches B afterwards.
    sw.tick();
    sw.tick();
    assert_eq!(
        sw.lookup(SIDE_B, station(backlog - 1)),
        Some(PortId(1)),
        "backlog drained"
    );
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(2)), "B: newest kept");
    assert_eq!(sw.lookup(SIDE_A, HOST_A), Some(PortId(2)), "A: followed B");
}

#[test]
fn remote_copy_lives_while_the_station_sends_and_ages_out_when_it_stops() {
    let aging_ns = 1_000_000_000;
    let mut sw = TwoSides::new(aging_ns);
    // The station sends every 100 ms for five aging times; side B must know it all along.
    let mut last_frame = sw.now;
    for _ in 0..50 {
        sw.send(0, HOST_A, HOST_C);
        last_frame = sw.now;
        sw.advance_ns(100_000_000);
        sw.tick();
        assert_eq!(
            sw.lookup(SIDE_B, HOST_A),
            Some(PortId(0)),
            "at {:?}",
            sw.now
        );
    }
    sw.transmitted();
    sw.send(2, HOST_B, HOST_A);
    assert_eq!(sw.transmitted(), [1, 0, 0, 0], "still unicast after 5 s");
    // Silent from now on. The copy lags the authoritative entry by less than a refresh period.
    let deadline_lag = aging_ns - refresh_period_ns(aging_ns);
    sw.now = last_frame.saturating_add_nanos(deadline_lag - 1);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
    sw.now = last_frame.saturating_add_nanos(aging_ns);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_A, HOST_A), None);
    assert_eq!(sw.lookup(SIDE_B, HOST_A), None);
    sw.send(2, HOST_B, HOST_A);
    assert_eq!(
        sw.transmitted(),
        [1, 1, 0, 1],
        "flooded again once aged out"
    );
}

#[test]
fn full_learn_ring_is_counted_and_repaired_by_the_next_learn() {
    let mut sw = TwoSides::new(300_000_000_000);
    let extra = 100;
    let stations = u32::try_from(FDB_SYNC_RING_ENTRIES).unwrap() + extra;
    // Side A learns more new stations than the ring to B holds, while B does nothing.
    let mut burst = Vec::new();
    for i in 0..stations {
        burst.push(ipv4_frame(station(i), HOST_C, 0, Ecn::NotEct, 64));
        if burst.len() == 32 {
            sw.steps[SIDE_A].handle_rx_burst(sw.now, PortId(0), &mut burst);
            sw.transmitted();
        }
    }
    sw.steps[SIDE_A].handle_rx_burst(sw.now, PortId(0), &mut burst);
    sw.transmitted();
    let learned_by_a = (0..stations)
        .filter(|i| sw.lookup(SIDE_A, station(*i)).is_some())
        .count();
    assert_eq!(
        learned_by_a, stations as usize,
        "the table has room for all"
    );
    assert_eq!(sw.overflow(SIDE_A), u64::from(extra));
    // B drains in bounded steps.
    sw.steps[SIDE_B].handle_timeout(sw.now);
    let known_by_b = |sw: &TwoSides| {
        (0..stations)
            .filter(|i| sw.lookup(SIDE_B, station(*i)).is_some())
            .count()
    };
    assert_eq!(known_by_b(&sw), FDB_SYNC_DRAIN_PER_RING);
    for _ in 0..FDB_SYNC_RING_ENTRIES / FDB_SYNC_DRAIN_PER_RING {
        sw.tick();
    }
    assert_eq!(known_by_b(&sw), FDB_SYNC_RING_ENTRIES);
    // Every station speaks again 2 ms later (same refresh period: only the lost ones are
    // republished, so nothing overflows now).
    sw.advance_ns(2_000_000);
    for i in 0..stations {
        burst.push(ipv4_frame(station(i), HOST_C, 0, Ecn::NotEct, 64));
        if burst.len() == 32 {
            sw.steps[SIDE_A].handle_rx_burst(sw.now, PortId(0), &mut burst);
            sw.transmitted();
        }
    }
    sw.steps[SIDE_A].handle_rx_burst(sw.now, PortId(0), &mut burst);
    sw.tick();
    assert_eq!(known_by_b(&sw), stations as usize, "converged");
    assert_eq!(sw.overflow(SIDE_A), u64::from(extra), "nothing more lost");
}

#[test]
fn flushes_reach_every_side_and_keep_newer_learns() {
    let mut sw = TwoSides::new(300_000_000_000);
    sw.send(0, HOST_A, HOST_C);
    sw.send(2, HOST_B, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
    assert_eq!(sw.lookup(SIDE_A, HOST_B), Some(PortId(2)));
    // Port 0 goes down: flushed on A (its side), and on B through the ring.
    sw.advance_ns(1_000);
    sw.steps[SIDE_A].flush_fdb(Some(PortId(0)), sw.now);
    assert_eq!(sw.lookup(SIDE_A, HOST_A), None);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), None);
    assert_eq!(
        sw.lookup(SIDE_B, HOST_B),
        Some(PortId(2)),
        "other ports kept"
    );
    assert_eq!(
        sw.lookup(SIDE_A, HOST_B),
        Some(PortId(2)),
        "other ports kept"
    );
    // A flush issued on B for port 0 reaches A after A heard the station again: A keeps the
    // newer learn (the flush forgets only what was seen at or before it).
    sw.advance_ns(1_000);
    sw.steps[SIDE_B].flush_fdb(Some(PortId(0)), sw.now);
    sw.advance_ns(1_000);
    sw.send(0, HOST_A, HOST_C); // A's burst drains B's flush first, then learns.
    sw.tick();
    assert_eq!(sw.lookup(SIDE_A, HOST_A), Some(PortId(0)));
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
    // Flush everything from B: both tables empty; the relearn cache does not hide the next
    // frame (sent within a millisecond of the previous one).
    sw.advance_ns(1_000);
    sw.steps[SIDE_B].flush_fdb(None, sw.now);
    sw.tick();
    for side in [SIDE_A, SIDE_B] {
        assert_eq!(sw.lookup(side, HOST_A), None);
        assert_eq!(sw.lookup(side, HOST_B), None);
    }
    sw.advance_ns(1_000);
    sw.send(0, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
}

#[test]
fn a_flush_that_finds_the_ring_full_is_delivered_later() {
    let mut sw = TwoSides::new(300_000_000_000);
    sw.send(0, HOST_A, HOST_C);
    sw.tick();
    // Fill A's ring to B with learns B has not drained.
    let mut burst = Vec::new();
    for i in 0..u32::try_from(FDB_SYNC_RING_ENTRIES).unwrap() {
        burst.push(ipv4_frame(station(i), HOST_C, 0, Ecn::NotEct, 64));
        if burst.len() == 32 {
            sw.steps[SIDE_A].handle_rx_burst(sw.now, PortId(1), &mut burst);
            sw.transmitted();
        }
    }
    let lost_before = sw.overflow(SIDE_A);
    sw.steps[SIDE_A].flush_fdb(Some(PortId(0)), sw.now);
    assert_eq!(
        sw.overflow(SIDE_A),
        lost_before + 1,
        "the flush did not fit"
    );
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)));
    // B drains; A retries the flush at its next call; B applies it.
    for _ in 0..2 * FDB_SYNC_RING_ENTRIES / FDB_SYNC_DRAIN_PER_RING {
        sw.tick();
    }
    assert_eq!(sw.lookup(SIDE_B, HOST_A), None);
    assert_eq!(
        sw.overflow(SIDE_A),
        lost_before + 1,
        "retries are not counted again"
    );
}

#[test]
fn a_late_flush_keeps_what_was_learned_after_it() {
    let mut sw = TwoSides::new(300_000_000_000);
    sw.send(0, HOST_A, HOST_C);
    sw.tick();
    // B's ring to A is full when B flushes port 0 at t_flush: the flush is owed.
    sw.many_stations_speak(
        2,
        0,
        u32::try_from(FDB_SYNC_RING_ENTRIES + FDB_SYNC_DRAIN_PER_RING).unwrap(),
    );
    sw.advance_ns(1_000);
    sw.steps[SIDE_B].flush_fdb(Some(PortId(0)), sw.now);
    assert_eq!(sw.lookup(SIDE_B, HOST_A), None);
    // Port 0 is up again and HOST_A speaks after the flush, before A receives it.
    sw.advance_ns(2_000_000);
    sw.send(0, HOST_A, HOST_C);
    for _ in 0..2 * FDB_SYNC_RING_ENTRIES / FDB_SYNC_DRAIN_PER_RING {
        sw.tick();
    }
    assert_eq!(
        sw.lookup(SIDE_A, HOST_A),
        Some(PortId(0)),
        "A: learned after"
    );
    // B forgot it with its own flush; A's next learn of the station (same refresh period)
    // publishes it again: the flush A kept it through marked it.
    sw.advance_ns(2_000_000);
    sw.send(0, HOST_A, HOST_C);
    sw.tick();
    assert_eq!(sw.lookup(SIDE_B, HOST_A), Some(PortId(0)), "B: relearned");
}
