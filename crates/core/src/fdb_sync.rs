//! Keeping the FDBs of several ingress sides in step.
//!
//! Each ingress side owns its [`Fdb`] (one writer, no lock). What it learns on
//! its own ports it publishes to every other ingress side through a bounded SPSC ring per
//! (publisher, receiver) pair; each side drains its incoming rings at the start of every receive
//! burst and every timeout, a bounded number of updates per ring and call. A port is received by
//! exactly one ingress side, so every station has one *authoritative* side (the one owning the
//! port it was last heard on) and the other sides hold copies.
//!
//! Rules (see also `docs/ARCHITECTURE.md`, "Where the two sides meet"):
//!
//! * **What is published.** A new station, a station move, and a refresh: the first time a
//!   station is learned again in a new period of [`refresh_period_ns`] (a quarter of the aging
//!   time). A copy's age therefore lags the authoritative entry's by less than a quarter of the
//!   aging time, so a station heard from at least once every three quarters of the aging time is
//!   never forgotten by any side, and one that falls silent is forgotten everywhere within a
//!   quarter of the aging time of each other. A station that is heard from less often than that
//!   but still within the aging time may lapse on the other sides first: they flood to it
//!   (correct, as for any unknown unicast) until its next frame, which republishes it.
//! * **Newest wins.** An update carries the time the station was heard. A side applies it only
//!   if it is newer than what the side knows, so a stale update that crosses a newer local learn
//!   (a station that moved back) does not win. Sides compare times of one clock: the runtime
//!   reads the same monotonic clock on every lcore.
//! * **A full ring loses nothing for good.** The update is dropped and counted
//!   (`fdb_sync_overflow` of the publishing side); the station's entry is marked, and its next
//!   learn publishes it again, whatever the period. Flushes are not tied to a station: a flush
//!   that does not fit is kept per receiver and retried on every later call until it does.
//! * **Flushes carry their time.** A receiver forgets only what was last heard at or before the
//!   flush, so a flush delayed behind newer learns of the same port never erases them.
//!
//! # Memory ordering (model-checked: `loom_checks::fdb_sync`)
//!
//! An update is a plain value moved through an SPSC ring: rtrb's push writes the slot, then
//! stores the write index with release; its pop loads the index with acquire, then reads the
//! slot, so a popped update is seen whole. Nothing else is shared: each side's [`Fdb`] is its
//! own. What is ours is the protocol on top (publication, newest wins, repair of a full ring),
//! whose outcome must not depend on how the two sides' learns, publications and drains
//! interleave; loom checks that on a ring with rtrb's contract (`crate::sync::spsc`).

use crate::counters::Counter;
use crate::fdb::{Fdb, Learned};
use crate::sync::spsc::{Consumer, Producer, RingBuffer};
use crate::time::Instant;
use crate::types::PortId;

/// Updates each (publisher, receiver) ring holds. A burst learns at most 32 new stations per
/// port; this is many bursts of fresh stations between two drains. Startup with thousands of
/// stations may overflow it, which is counted and repaired (module docs).
pub const FDB_SYNC_RING_ENTRIES: usize = 1024;

/// Most updates a side applies from one incoming ring per call (bounded work per burst).
pub const FDB_SYNC_DRAIN_PER_RING: usize = 128;

/// One change of a side's FDB, as the other sides receive it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FdbUpdate {
    /// `mac` in `vid` was heard on `port` at `seen`.
    Learned {
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        seen: Instant,
    },
    /// Forget stations on `port` last heard at or before `at`.
    PortFlushed { port: PortId, at: Instant },
    /// Forget every station last heard at or before `at`.
    Flushed { at: Instant },
}

/// The period of refresh publications for an aging time: a quarter of it (at least 1 ns).
#[must_use]
pub fn refresh_period_ns(aging_ns: u64) -> u64 {
    (aging_ns / 4).max(1)
}

/// One ingress side's ends of the learn rings, and the flushes it still owes its peers.
#[derive(Debug)]
pub(crate) struct FdbSync {
    /// Towards every other ingress side.
    to_peers: Vec<Producer<FdbUpdate>>,
    /// From every other ingress side.
    from_peers: Vec<Consumer<FdbUpdate>>,
    refresh_period_ns: u64,
    /// `[peer][port]`: the newest port flush that did not fit into the peer's ring.
    owed_port_flush: Vec<Vec<Option<Instant>>>,
    /// `[peer]`: the newest whole-table flush that did not fit.
    owed_flush: Vec<Option<Instant>>,
    /// Some flush is owed (so that calls without one skip the scan).
    owes_flush: bool,
}

impl FdbSync {
    /// The learn rings of `sides` ingress sides: for each side, its end of every ring it
    /// publishes into and drains. Empty (no rings at all) with fewer than two sides.
    pub(crate) fn for_sides(sides: usize, ports: usize, aging_ns: u64) -> Vec<Option<Self>> {
        Self::for_sides_with_ring(sides, ports, aging_ns, FDB_SYNC_RING_ENTRIES)
    }

    /// [`FdbSync::for_sides`] with rings of `ring_entries` updates (the model checks use tiny
    /// rings, to reach a full one).
    pub(crate) fn for_sides_with_ring(
        sides: usize,
        ports: usize,
        aging_ns: u64,
        ring_entries: usize,
    ) -> Vec<Option<Self>> {
        if sides < 2 {
            return (0..sides).map(|_| None).collect();
        }
        let mut to: Vec<Vec<Producer<FdbUpdate>>> = (0..sides).map(|_| Vec::new()).collect();
        let mut from: Vec<Vec<Consumer<FdbUpdate>>> = (0..sides).map(|_| Vec::new()).collect();
        for (publisher, to_peers) in to.iter_mut().enumerate() {
            for receiver in (0..sides).filter(|r| *r != publisher) {
                let (tx, rx) = RingBuffer::new(ring_entries);
                to_peers.push(tx);
                from[receiver].push(rx);
            }
        }
        to.into_iter()
            .zip(from)
            .map(|(to_peers, from_peers)| {
                let peers = to_peers.len();
                Some(Self {
                    to_peers,
                    from_peers,
                    refresh_period_ns: refresh_period_ns(aging_ns),
                    owed_port_flush: vec![vec![None; ports]; peers],
                    owed_flush: vec![None; peers],
                    owes_flush: false,
                })
            })
            .collect()
    }

    /// Whether a learn of a station already known on the same port is to be published: its
    /// last publication failed, or it was last learned in an earlier refresh period.
    #[inline]
    pub(crate) fn refresh_due(&self, learned: Learned, now: Instant) -> bool {
        match learned {
            Learned::New | Learned::Moved { .. } => true,
            Learned::Refreshed {
                previous,
                sync_pending,
            } => {
                sync_pending
                    || previous.as_nanos() / self.refresh_period_ns
                        != now.as_nanos() / self.refresh_period_ns
            }
            Learned::TableFull | Learned::Superseded | Learned::Static => false,
        }
    }

    /// Publishes what `fdb.learn` of a station on `port` at `now` returned, if it is news to
    /// the peers ([`FdbSync::refresh_due`]), and keeps the entry marked for republication while
    /// some peer's ring refused it (the publishing half of the protocol; the ingress side calls
    /// it after each table learn).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn publish_learn(
        &mut self,
        fdb: &mut Fdb,
        learned: Learned,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
        overflow: &Counter,
    ) {
        if !self.refresh_due(learned, now) {
            return;
        }
        let update = FdbUpdate::Learned {
            vid,
            mac,
            port,
            seen: now,
        };
        let published = self.publish_learned(update, overflow);
        let was_pending = matches!(
            learned,
            Learned::Refreshed {
                sync_pending: true,
                ..
            }
        );
        // `learn` cleared the mark: set it again if this publication failed too.
        if !published || was_pending {
            fdb.set_sync_pending(vid, mac, !published);
        }
    }

    /// Retries the flushes still owed, then applies to `fdb` at `now` what the peers published
    /// (the receiving half of the protocol); `applied(update, moved_from)` follows each update,
    /// with the port a station was moved away from, if any.
    pub(crate) fn receive(
        &mut self,
        fdb: &mut Fdb,
        now: Instant,
        mut applied: impl FnMut(FdbUpdate, Option<PortId>),
    ) {
        self.retry_owed_flushes();
        self.drain(|update| {
            let moved_from = apply(fdb, update, now);
            applied(update, moved_from);
        });
    }

    /// Pushes a learn to every peer; whether every ring took it (each refusal is counted).
    pub(crate) fn publish_learned(&mut self, update: FdbUpdate, overflow: &Counter) -> bool {
        let mut all = true;
        for ring in &mut self.to_peers {
            if ring.push(update).is_err() {
                overflow.inc();
                all = false;
            }
        }
        all
    }

    /// Pushes a flush to every peer; a peer whose ring is full is owed it (counted once, then
    /// retried by [`FdbSync::retry_owed_flushes`] until it fits). Owed flushes go first, so
    /// that flushes reach a peer in the order they were made.
    pub(crate) fn publish_flush(&mut self, update: FdbUpdate, overflow: &Counter) {
        self.retry_owed_flushes();
        for peer in 0..self.to_peers.len() {
            let owed = self.owed_flush[peer].is_some()
                || self.owed_port_flush[peer].iter().any(Option::is_some);
            if owed || self.to_peers[peer].push(update).is_err() {
                overflow.inc();
                self.owe(peer, update);
            }
        }
    }

    fn owe(&mut self, peer: usize, update: FdbUpdate) {
        let newest = |owed: &mut Option<Instant>, at: Instant| {
            *owed = Some(owed.map_or(at, |o| o.max(at)));
        };
        match update {
            FdbUpdate::PortFlushed { port, at } => {
                if let Some(owed) = self.owed_port_flush[peer].get_mut(port.index()) {
                    newest(owed, at);
                }
            }
            FdbUpdate::Flushed { at } => newest(&mut self.owed_flush[peer], at),
            FdbUpdate::Learned { .. } => return,
        }
        self.owes_flush = true;
    }

    /// Pushes the flushes still owed; those that do not fit yet are kept (they were counted
    /// when they first failed).
    pub(crate) fn retry_owed_flushes(&mut self) {
        if !self.owes_flush {
            return;
        }
        let mut still_owed = false;
        for (peer, ring) in self.to_peers.iter_mut().enumerate() {
            if let Some(at) = self.owed_flush[peer] {
                if ring.push(FdbUpdate::Flushed { at }).is_ok() {
                    self.owed_flush[peer] = None;
                } else {
                    still_owed = true;
                }
            }
            for (p, owed) in self.owed_port_flush[peer].iter_mut().enumerate() {
                let Some(at) = *owed else { continue };
                let port = PortId(u16::try_from(p).unwrap_or(u16::MAX));
                if ring.push(FdbUpdate::PortFlushed { port, at }).is_ok() {
                    *owed = None;
                } else {
                    still_owed = true;
                }
            }
        }
        self.owes_flush = still_owed;
    }

    /// Whether a call would find something to do: updates waiting in an incoming ring (left
    /// over by the bounded drain, or published since) or a flush still owed.
    pub(crate) fn has_work(&self) -> bool {
        self.owes_flush || self.from_peers.iter().any(|r| !r.is_empty())
    }

    /// Applies what the peers published, at most [`FDB_SYNC_DRAIN_PER_RING`] updates per ring.
    pub(crate) fn drain(&mut self, mut apply: impl FnMut(FdbUpdate)) {
        for ring in &mut self.from_peers {
            for _ in 0..FDB_SYNC_DRAIN_PER_RING {
                match ring.pop() {
                    Ok(update) => apply(update),
                    Err(_) => break,
                }
            }
        }
    }
}

/// Applies one peer's update to `fdb` at `now`. Returns the port a station was moved away from
/// (the caller forgets what it cached about that port), if any.
pub(crate) fn apply(fdb: &mut Fdb, update: FdbUpdate, now: Instant) -> Option<PortId> {
    match update {
        FdbUpdate::Learned {
            vid,
            mac,
            port,
            seen,
        } => match fdb.learn_remote(vid, mac, port, seen, now) {
            Some(Learned::Moved { from }) => Some(from),
            _ => None,
        },
        FdbUpdate::PortFlushed { port, at } => {
            fdb.flush_port_until(port, at);
            None
        }
        FdbUpdate::Flushed { at } => {
            fdb.flush_until(at);
            None
        }
    }
}
