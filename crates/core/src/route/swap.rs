//! Handing FIB snapshots to the lcores without a lock, and getting them back.
//!
//! Per lcore, two bounded SPSC rings ([`rtrb`]): *fresh* (control plane → lcore) carries newly
//! published snapshots, *retired* (lcore → control plane) carries the ones the lcore stopped
//! using. The control plane owns a [`FibSender`] per lcore, the lcore its [`FibReader`].
//!
//! # Call order
//!
//! * Control plane: [`crate::route::fib::FibBuilder::publish`] → [`FibSender::send`] to every
//!   lcore; [`FibSender::reclaim`] on every tick (and before publishing), which drops what the
//!   lcores returned so that the builder's spare copy becomes unique again.
//! * Lcore: [`FibReader::refresh`] at a burst boundary (never in the middle of a burst, so a
//!   burst is forwarded by one snapshot), then [`FibReader::fib`] per packet.
//!
//! # Why this is right (memory ordering)
//!
//! 1. **Visibility.** The builder writes a copy only while it is the sole owner
//!    ([`std::sync::Arc::get_mut`]), then moves an `Arc` into *fresh*. rtrb's `push` writes the
//!    slot and then publishes it with a release store of the ring's tail; `pop` reads the tail
//!    with acquire before reading the slot. Every write to the snapshot therefore
//!    happens-before the lcore's first read of it.
//! 2. **No write while read.** The lcore reads a snapshot only through the `Arc` it popped and
//!    keeps as `current`; it hands that `Arc` back through *retired* only after replacing
//!    `current`, and never touches it again. The control plane can write the copy again only
//!    when `Arc::get_mut` finds it unique, i.e. after every lcore's returned `Arc` was popped
//!    (acquire, pairing with the lcore's release push, which follows all its reads in program
//!    order) and dropped. So all lcore reads of a copy happen-before its next write. `Arc`'s own
//!    count (release decrement, acquire in `get_mut`) orders the case where the last other owner
//!    is not an lcore.
//! 3. **No free and no count change on the lcore.** The lcore moves `Arc`s (no reference-count
//!    operation) and swaps only when *retired* has room, so it never drops one on the fast path;
//!    the memory is freed, if ever, on the control thread. Dropping a [`FibReader`] (lcore
//!    teardown) drops its `current`, off the fast path.
//! 4. **Bounds.** A publication needs the spare back, i.e. every lcore has retired the snapshot
//!    before the current one; so *fresh* holds at most one snapshot per lcore when `send` runs
//!    after a successful publish, and *retired* at most one between two reclaims. Rings of
//!    [`RING_SLOTS`] leave room; a full *fresh* ring is refused to the caller (counted), never
//!    blocked on.

use crate::counters::Counter;
use crate::route::fib::Fib;
use crate::route::nexthop::NextHopId;
use rtrb::{Consumer, Producer, PushError, RingBuffer};
use std::sync::Arc;

/// Slots of each ring (module docs: at most one is used in steady state).
pub const RING_SLOTS: usize = 4;

/// The control plane's end of one lcore's rings.
#[derive(Debug)]
pub struct FibSender {
    fresh: Producer<Arc<Fib>>,
    retired: Consumer<Arc<Fib>>,
    refused: u64,
    next_hop_packets: Arc<[Counter]>,
}

/// An lcore's end: the snapshot it forwards with.
#[derive(Debug)]
pub struct FibReader {
    current: Arc<Fib>,
    fresh: Consumer<Arc<Fib>>,
    retired: Producer<Arc<Fib>>,
    swaps: u64,
    /// Packets this lcore forwarded through each next hop (by id), for `show ecmp`: written by
    /// this lcore only, read by the control plane through its [`FibSender`] (relaxed, as
    /// every [`Counter`]). Sized once, by [`Fib::max_next_hops`], so no id is ever outside it.
    next_hop_packets: Arc<[Counter]>,
}

/// The rings of one lcore that starts with `initial` (normally
/// [`crate::route::fib::FibBuilder::published`]).
#[must_use]
pub fn fib_channel(initial: Arc<Fib>) -> (FibSender, FibReader) {
    let (fresh_tx, fresh_rx) = RingBuffer::new(RING_SLOTS);
    let (retired_tx, retired_rx) = RingBuffer::new(RING_SLOTS);
    let next_hop_packets: Arc<[Counter]> = (0..initial.max_next_hops())
        .map(|_| Counter::default())
        .collect();
    (
        FibSender {
            fresh: fresh_tx,
            retired: retired_rx,
            refused: 0,
            next_hop_packets: Arc::clone(&next_hop_packets),
        },
        FibReader {
            current: initial,
            fresh: fresh_rx,
            retired: retired_tx,
            swaps: 0,
            next_hop_packets,
        },
    )
}

impl FibSender {
    /// Sends a snapshot to the lcore. Returns `false` (and counts it) if its ring is full: the
    /// lcore has not picked up earlier snapshots (stopped or stalled); the snapshot is dropped
    /// here and the next publication carries the same state.
    pub fn send(&mut self, fib: &Arc<Fib>) -> bool {
        match self.fresh.push(Arc::clone(fib)) {
            Ok(()) => true,
            Err(PushError::Full(_)) => {
                self.refused += 1;
                false
            }
        }
    }

    /// Drops every snapshot the lcore returned; returns how many.
    pub fn reclaim(&mut self) -> usize {
        let mut n = 0;
        while self.retired.pop().is_ok() {
            n += 1;
        }
        n
    }

    /// Snapshots refused because the lcore's ring was full.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Packets the lcore forwarded through each next hop, indexed by [`NextHopId::index`]
    /// (`show ecmp`: the spread over a group's members). Monotonic; an id the builder hands out
    /// again after a removal continues its old count, so a reader takes a baseline when it
    /// learns of a new next hop.
    #[must_use]
    pub fn next_hop_packets(&self) -> &[Counter] {
        &self.next_hop_packets
    }

    /// Snapshots sent that the lcore has not picked up yet.
    #[must_use]
    pub fn in_flight(&self) -> usize {
        RING_SLOTS - self.fresh.slots()
    }
}

impl FibReader {
    /// The snapshot to forward with.
    #[inline]
    #[must_use]
    pub fn fib(&self) -> &Fib {
        &self.current
    }

    /// At a burst boundary: switch to the newest snapshot sent, returning the replaced ones.
    /// Returns whether it switched. One acquire load when nothing is new; no allocation, no
    /// free, no reference-count change.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        if self.fresh.is_empty() {
            return false;
        }
        let mut switched = false;
        // Swap only while a retired slot is free, so the old snapshot always has somewhere to
        // go (module docs, 3).
        while !self.retired.is_full() {
            let Ok(fresh) = self.fresh.pop() else { break };
            let old = core::mem::replace(&mut self.current, fresh);
            if let Err(PushError::Full(_)) = self.retired.push(old) {
                unreachable!("a retired slot was checked free and this is the only producer");
            }
            self.swaps += 1;
            switched = true;
        }
        switched
    }

    /// Snapshots switched to.
    #[must_use]
    pub fn swaps(&self) -> u64 {
        self.swaps
    }

    /// Counts a packet forwarded through `id` (the lcore is the only writer).
    #[inline]
    pub fn count_next_hop(&self, id: NextHopId) {
        if let Some(c) = self.next_hop_packets.get(id.index()) {
            c.inc();
        }
    }

    /// The per-next-hop packet counters (see [`FibSender::next_hop_packets`]).
    #[must_use]
    pub fn next_hop_packets(&self) -> &[Counter] {
        &self.next_hop_packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::route::fib::{FibBuilder, FibConfig, PublishError};
    use crate::route::nexthop::{NextHopId, RouteTarget};
    use crate::route::prefix::Ipv4Prefix;
    use std::net::Ipv4Addr;

    #[test]
    fn lcores_swap_at_refresh_and_return_old_snapshots_for_reuse() {
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let (mut senders, mut readers): (Vec<_>, Vec<_>) = (0..2)
            .map(|_| fib_channel(Arc::clone(b.published())))
            .unzip();
        let prefix = Ipv4Prefix::new(Ipv4Addr::new(10, 0, 0, 0), 8).unwrap();
        let dst = Ipv4Addr::new(10, 1, 1, 1);
        for round in 0..6u64 {
            let target = RouteTarget::NextHop(if round % 2 == 0 {
                NextHopId::BLACKHOLE
            } else {
                NextHopId::KERNEL
            });
            b.set_route_v4(prefix, target).unwrap();
            for s in &mut senders {
                s.reclaim();
            }
            // Until both lcores refreshed, the spare is theirs.
            let fib = loop {
                match b.publish() {
                    Ok(fib) => break fib,
                    Err(PublishError::SpareInUse) => {
                        assert!(round > 0);
                        for r in &mut readers {
                            r.refresh();
                        }
                        for s in &mut senders {
                            s.reclaim();
                        }
                    }
                    Err(e) => panic!("{e:?}"),
                }
            };
            for s in &mut senders {
                assert!(s.send(&fib));
            }
            for r in &mut readers {
                assert_eq!(r.fib().generation(), round, "not switched before refresh");
                assert!(r.refresh());
                assert_eq!(r.fib().generation(), round + 1);
                assert_eq!(r.fib().lookup_v4(dst), Some(target));
                assert!(!r.refresh());
            }
        }
        assert_eq!(readers[0].swaps(), 6);
        // Two copies served six publications.
        assert_eq!(b.stats().full_rebuilds, 0);
    }

    #[test]
    fn a_full_retired_ring_delays_the_swap_instead_of_freeing_on_the_lcore() {
        let b = FibBuilder::new(FibConfig::default()).unwrap();
        let (mut sender, mut reader) = fib_channel(Arc::clone(b.published()));
        let fib = Arc::clone(b.published());
        // The control plane never reclaims: after RING_SLOTS swaps the lcore keeps its current
        // snapshot rather than drop one.
        for _ in 0..RING_SLOTS {
            assert!(sender.send(&fib));
            assert!(reader.refresh());
        }
        assert!(sender.send(&fib));
        assert!(!reader.refresh());
        assert_eq!(sender.in_flight(), 1);
        assert_eq!(sender.reclaim(), RING_SLOTS);
        assert!(reader.refresh());
        // A ring the lcore does not drain refuses, counted.
        for _ in 0..RING_SLOTS {
            sender.send(&fib);
        }
        assert!(!sender.send(&fib));
        assert_eq!(sender.refused(), 1);
    }
}
