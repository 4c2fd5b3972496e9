//! What an ingress side does with its MAC table: learning (with a cache that skips the table
//! for back-to-back frames of one station), publishing what is news to the other ingress sides,
//! applying what they publish ([`crate::fdb_sync`]), and flushes.

use crate::counters::Counter;
use crate::fdb::{Fdb, Learned};
use crate::fdb_sync::{FdbSync, FdbUpdate};
use crate::time::Instant;
use crate::types::PortId;

/// A station seen again on the same port within this time is not looked up in the FDB again
/// (its entry was refreshed at most this long ago; aging is minutes).
pub const RELEARN_INTERVAL_NS: u64 = 1_000_000;

/// One ingress side's MAC table and its links to the other sides' tables.
#[derive(Debug)]
pub(crate) struct IngressFdb {
    pub(crate) fdb: Fdb,
    /// Per port: the last source learned (VID << 48 | MAC) and when, ns — learning the same
    /// station again within [`RELEARN_INTERVAL_NS`] only refreshes an age that cannot expire.
    last_learned: Vec<(u64, u64)>,
    /// The learn rings to and from the other ingress sides; `None` with a single ingress side
    /// (which then pays one predictable branch per burst and one per table learn for it).
    sync: Option<Box<FdbSync>>,
}

impl IngressFdb {
    pub(crate) fn new(fdb: Fdb, ports: usize, sync: Option<FdbSync>) -> Self {
        Self {
            fdb,
            last_learned: vec![(u64::MAX, 0); ports],
            sync: sync.map(Box::new),
        }
    }

    /// Whether there are other ingress sides to keep in step with.
    #[inline]
    pub(crate) fn is_synced(&self) -> bool {
        self.sync.is_some()
    }

    /// Whether [`IngressFdb::sync`] has work waiting (a backlog in an incoming learn ring, an
    /// owed flush).
    pub(crate) fn sync_has_work(&self) -> bool {
        self.sync.as_deref().is_some_and(FdbSync::has_work)
    }

    /// FDB learning, skipping the table when the same station was learned on this port within
    /// the last [`RELEARN_INTERVAL_NS`] (back-to-back frames of one flow).
    #[inline]
    /// `overflow`: the side's `fdb_sync_overflow`; `table_full`: the port's
    /// `fdb_learn_table_full` (a source not learned because the table has no free slot).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn learn(
        &mut self,
        overflow: &Counter,
        table_full: &Counter,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
    ) {
        let key = station_key(vid, mac);
        let (last_key, last_ns) = &mut self.last_learned[port.index()];
        let now_ns = now.as_nanos();
        if *last_key == key && now_ns.saturating_sub(*last_ns) < RELEARN_INTERVAL_NS {
            return;
        }
        *last_key = key;
        *last_ns = now_ns;
        self.learn_in_table(overflow, table_full, vid, mac, port, now);
    }

    /// The table part of [`IngressFdb::learn`], and its publication to the other ingress
    /// sides. Out of line: back-to-back frames of a flow skip it, and keeping it out of the
    /// per-frame path keeps its registers free (measured: inlined, the single-side path cost
    /// 7 Ir/packet more).
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn learn_in_table(
        &mut self,
        overflow: &Counter,
        table_full: &Counter,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
    ) {
        let learned = self.fdb.learn(vid, mac, port, now);
        if learned == Learned::TableFull {
            table_full.inc();
        }
        if self.sync.is_some() {
            self.publish_learned(overflow, learned, vid, mac, port, now);
        }
    }

    /// Tells the other ingress sides about a learn, if it is news to them (see
    /// [`crate::fdb_sync`]). Out of line: with one ingress side it is never called.
    #[inline(never)]
    fn publish_learned(
        &mut self,
        overflow: &Counter,
        learned: Learned,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        now: Instant,
    ) {
        let Some(sync) = self.sync.as_deref_mut() else {
            return;
        };
        sync.publish_learn(&mut self.fdb, learned, vid, mac, port, now, overflow);
    }

    /// Applies what the other ingress sides learned and flushed, and retries flushes this side
    /// still owes them. Bounded: see [`crate::fdb_sync::FDB_SYNC_DRAIN_PER_RING`].
    #[inline(never)]
    pub(crate) fn sync(&mut self, now: Instant) {
        let Some(sync) = self.sync.as_deref_mut() else {
            return;
        };
        let last_learned = &mut self.last_learned;
        sync.receive(&mut self.fdb, now, |update, moved_from| {
            forget_cached_learns(last_learned, update, moved_from);
        });
    }

    /// Flushes this side's table (all of it, or `port`'s stations) and publishes the flush.
    pub(crate) fn flush(&mut self, overflow: &Counter, port: Option<PortId>, now: Instant) {
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
            sync.publish_flush(update, overflow);
        }
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
