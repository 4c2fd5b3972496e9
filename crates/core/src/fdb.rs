//! The filtering database: MAC learning and aging per VLAN (IEEE 802.1Q 8.8).
//!
//! A fixed-size open-addressing table allocated once; learning and lookup probe at most
//! [`PROBE_LIMIT`] slots, so both are bounded and allocation-free. Aged entries are treated as
//! absent and their slots are reused by later learning; flushed entries become tombstones (they
//! keep probe chains intact and are reused the same way).
//!
//! With several ingress sides each keeps its own table; [`Fdb::learn_remote`] applies what the
//! other sides learned (newest wins), see [`crate::fdb_sync`].
//!
//! Static entries (IEEE 802.1Q 8.8.1 static filtering entries; SONiC's static FDB) are
//! installed by configuration in every side's table ([`Fdb::with_static`]): never aged, never
//! moved by learning or by another side, kept by flushes.

use crate::time::Instant;
use crate::types::PortId;

/// Most slots a lookup or a learn visits.
pub const PROBE_LIMIT: usize = 16;

/// The key of a flushed slot: never a real key (VIDs have 12 bits), not 0 so that probe chains
/// through it stay intact.
const TOMBSTONE: u64 = u64::MAX;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// `vid << 48 | mac`; 0 marks a never-used slot (VID 0 is never learned), [`TOMBSTONE`] a
    /// flushed one.
    key: u64,
    port: u16,
    /// The other ingress sides may not know the latest learn of this station (its publication
    /// found a full ring): publish it at the next learn. Fits in the slot's padding.
    sync_pending: bool,
    /// A static entry: configured, not learned (also in the padding).
    pinned: bool,
    last_seen_ns: u64,
}

/// What learning a source address did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Already known on this port; its age was refreshed.
    Refreshed {
        /// When it was last seen before.
        previous: Instant,
        /// Its last publication to the other ingress sides failed (see [`Fdb::set_sync_pending`]).
        sync_pending: bool,
    },
    /// A new entry.
    New,
    /// Known on another port before: the station moved.
    Moved {
        /// Where it was.
        from: PortId,
    },
    /// No free slot within the probe limit: not learned.
    TableFull,
    /// Known from a later observation than `now` (another ingress side heard the station after
    /// this side read its clock): unchanged, the newest wins.
    Superseded,
    /// A static entry: unchanged (learning neither refreshes nor moves it).
    Static,
}

/// A MAC table entry as the control plane lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdbEntry {
    /// VLAN.
    pub vid: u16,
    /// Station address.
    pub mac: [u8; 6],
    /// Port it was last seen on.
    pub port: PortId,
    /// When it was last seen (static entries: when installed, time 0).
    pub last_seen: Instant,
    /// A static entry (configured, never aged).
    pub is_static: bool,
}

/// A MAC table.
#[derive(Clone, Debug)]
pub struct Fdb {
    slots: Vec<Slot>,
    mask: usize,
    aging_ns: u64,
    entries: usize,
}

fn key(vid: u16, mac: [u8; 6]) -> u64 {
    let mac_bits = mac.iter().fold(0u64, |k, &b| k << 8 | u64::from(b));
    u64::from(vid & 0x0FFF) << 48 | mac_bits
}

/// Tombstones a used slot last seen at or before `until`; marks it sync-pending otherwise.
/// Static entries stay.
fn forget_until(slot: &mut Slot, until: Instant) {
    if slot.pinned {
        return;
    }
    if slot.last_seen_ns <= until.as_nanos() {
        *slot = Slot {
            key: TOMBSTONE,
            ..Slot::default()
        };
    } else {
        slot.sync_pending = true;
    }
}

fn hash(key: u64) -> usize {
    // Fibonacci hashing: multiply by 2^64 / φ and keep the high bits.
    (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize
}

impl Fdb {
    /// A table with room for about `capacity` stations (rounded up to a power of two, at least
    /// 16), forgetting those not seen for `aging_ns`.
    #[must_use]
    pub fn new(capacity: u32, aging_ns: u64) -> Self {
        let n = (capacity as usize).max(PROBE_LIMIT).next_power_of_two();
        Self {
            slots: vec![Slot::default(); n],
            mask: n - 1,
            aging_ns,
            entries: 0,
        }
    }

    /// A table as [`Fdb::new`] with the static entries `(vid, mac, port)` installed; those that
    /// find no slot within the probe limit are returned.
    #[must_use]
    pub fn with_static(
        capacity: u32,
        aging_ns: u64,
        entries: &[(u16, [u8; 6], PortId)],
    ) -> (Self, Vec<(u16, [u8; 6], PortId)>) {
        let mut fdb = Self::new(capacity, aging_ns);
        let refused = entries
            .iter()
            .copied()
            .filter(|&(vid, mac, port)| !fdb.pin(vid, mac, port))
            .collect();
        (fdb, refused)
    }

    /// Installs a static entry: `mac` in `vid` is on `port` until reconfigured. Returns false
    /// when no slot is free within the probe limit.
    pub fn pin(&mut self, vid: u16, mac: [u8; 6], port: PortId) -> bool {
        let k = key(vid, mac);
        let slot = Slot {
            key: k,
            port: port.0,
            sync_pending: false,
            pinned: true,
            last_seen_ns: 0,
        };
        match self.find(k, Instant::from_nanos(0)) {
            Ok(idx) => {
                self.slots[idx] = slot;
                true
            }
            Err(Some(idx)) => {
                self.occupy(idx, slot);
                true
            }
            Err(None) => false,
        }
    }

    /// Seen within the aging time (whatever the slot holds).
    #[inline]
    fn fresh(&self, last_seen_ns: u64, now: Instant) -> bool {
        now.as_nanos().saturating_sub(last_seen_ns) < self.aging_ns
    }

    /// Holds a station that has not aged out (static entries never do).
    #[inline]
    fn live(&self, slot: &Slot, now: Instant) -> bool {
        slot.key != 0
            && slot.key != TOMBSTONE
            && (slot.pinned || self.fresh(slot.last_seen_ns, now))
    }

    /// The slot holding `k` if it is within the probe limit, else the first reusable slot on the
    /// probe path (`Err(None)` if there is none).
    #[inline]
    fn find(&self, k: u64, now: Instant) -> Result<usize, Option<usize>> {
        let start = hash(k);
        let mut free = None;
        for i in 0..PROBE_LIMIT {
            let idx = (start + i) & self.mask;
            let slot = &self.slots[idx];
            if slot.key == k {
                return Ok(idx);
            }
            if free.is_none() && !self.live(slot, now) {
                free = Some(idx);
            }
            if slot.key == 0 {
                break;
            }
        }
        Err(free)
    }

    /// Writes a new station into the reusable slot `idx`.
    fn occupy(&mut self, idx: usize, slot: Slot) {
        if self.slots[idx].key == 0 {
            self.entries += 1;
        }
        self.slots[idx] = slot;
    }

    /// What writing `port` over the entry `old` of the same station did.
    fn replaced(&self, old: &Slot, port: PortId, now: Instant) -> Learned {
        if !self.fresh(old.last_seen_ns, now) {
            Learned::New
        } else if old.port == port.0 {
            Learned::Refreshed {
                previous: Instant::from_nanos(old.last_seen_ns),
                sync_pending: old.sync_pending,
            }
        } else {
            Learned::Moved {
                from: PortId(old.port),
            }
        }
    }

    /// Learns that `mac` in `vid` is reachable through `port`.
    pub fn learn(&mut self, vid: u16, mac: [u8; 6], port: PortId, now: Instant) -> Learned {
        let k = key(vid, mac);
        let fresh_slot = Slot {
            key: k,
            port: port.0,
            sync_pending: false,
            pinned: false,
            last_seen_ns: now.as_nanos(),
        };
        match self.find(k, now) {
            Ok(idx) => {
                let slot = self.slots[idx];
                if slot.pinned {
                    return Learned::Static;
                }
                // Only an update from another side can be newer than `now`.
                if slot.last_seen_ns > now.as_nanos() {
                    return Learned::Superseded;
                }
                self.slots[idx] = fresh_slot;
                self.replaced(&slot, port, now)
            }
            Err(Some(idx)) => {
                self.occupy(idx, fresh_slot);
                Learned::New
            }
            Err(None) => Learned::TableFull,
        }
    }

    /// Applies what another ingress side learned: `mac` in `vid` was heard on `port` at `seen`.
    /// The newest knowledge wins: nothing changes (`None`) if this table heard of the station at
    /// `seen` or later, or if `seen` is already older than the aging time.
    pub fn learn_remote(
        &mut self,
        vid: u16,
        mac: [u8; 6],
        port: PortId,
        seen: Instant,
        now: Instant,
    ) -> Option<Learned> {
        if !self.fresh(seen.as_nanos(), now) {
            return None;
        }
        let k = key(vid, mac);
        let remote = Slot {
            key: k,
            port: port.0,
            sync_pending: false,
            pinned: false,
            last_seen_ns: seen.as_nanos(),
        };
        match self.find(k, now) {
            Ok(idx) => {
                let slot = self.slots[idx];
                if slot.pinned {
                    return None;
                }
                let alive = self.fresh(slot.last_seen_ns, now);
                if alive && slot.last_seen_ns >= seen.as_nanos() {
                    return None;
                }
                self.slots[idx] = remote;
                Some(self.replaced(&slot, port, now))
            }
            Err(Some(idx)) => {
                self.occupy(idx, remote);
                Some(Learned::New)
            }
            Err(None) => Some(Learned::TableFull),
        }
    }

    /// Marks (or clears) that the other ingress sides may not know the latest learn of `mac` in
    /// `vid`; the next [`Fdb::learn`] reports it in [`Learned::Refreshed`].
    pub fn set_sync_pending(&mut self, vid: u16, mac: [u8; 6], pending: bool) {
        let k = key(vid, mac);
        let start = hash(k);
        for i in 0..PROBE_LIMIT {
            let slot = &mut self.slots[(start + i) & self.mask];
            if slot.key == k {
                slot.sync_pending = pending;
                return;
            }
            if slot.key == 0 {
                return;
            }
        }
    }

    /// The port `mac` in `vid` was learned on, unless unknown or aged out.
    #[inline]
    #[must_use]
    pub fn lookup(&self, vid: u16, mac: [u8; 6], now: Instant) -> Option<PortId> {
        let k = key(vid, mac);
        let start = hash(k);
        for i in 0..PROBE_LIMIT {
            let slot = &self.slots[(start + i) & self.mask];
            if slot.key == k {
                return (slot.pinned || self.fresh(slot.last_seen_ns, now))
                    .then_some(PortId(slot.port));
            }
            if slot.key == 0 {
                return None;
            }
        }
        None
    }

    /// Forgets every station learned on `port` (link down, reconfiguration); static entries
    /// stay.
    pub fn flush_port(&mut self, port: PortId) {
        self.flush_port_until(port, Instant::from_nanos(u64::MAX));
    }

    /// Forgets the stations learned on `port` that were last seen at or before `until` (a flush
    /// that reached this table late keeps what was learned after it). Those kept are marked
    /// sync-pending: the side that flushed forgot them, so their next learn publishes them again.
    pub fn flush_port_until(&mut self, port: PortId, until: Instant) {
        for s in &mut self.slots {
            if s.key != 0 && s.key != TOMBSTONE && s.port == port.0 {
                forget_until(s, until);
            }
        }
    }

    /// Forgets every learned station; static entries stay (as SONiC's `sonic-clear fdb all`
    /// keeps static FDB entries).
    pub fn flush(&mut self) {
        let statics = self.slots.iter().any(|s| s.pinned);
        if !statics {
            self.slots.fill(Slot::default());
            self.entries = 0;
            return;
        }
        for s in &mut self.slots {
            if s.key != 0 && s.key != TOMBSTONE && !s.pinned {
                *s = Slot {
                    key: TOMBSTONE,
                    ..Slot::default()
                };
            }
        }
    }

    /// Forgets every station last seen at or before `until` (see [`Fdb::flush_port_until`]).
    pub fn flush_until(&mut self, until: Instant) {
        for s in &mut self.slots {
            if s.key != 0 && s.key != TOMBSTONE {
                forget_until(s, until);
            }
        }
    }

    /// Live entries at `now`, for `show fdb`.
    pub fn entries(&self, now: Instant) -> impl Iterator<Item = FdbEntry> + '_ {
        self.slots
            .iter()
            .filter(move |s| self.live(s, now))
            .map(|s| {
                let mac_bits = s.key & 0x0000_FFFF_FFFF_FFFF;
                let b = mac_bits.to_be_bytes();
                FdbEntry {
                    vid: u16::try_from(s.key >> 48).unwrap_or(0),
                    mac: [b[2], b[3], b[4], b[5], b[6], b[7]],
                    port: PortId(s.port),
                    last_seen: Instant::from_nanos(s.last_seen_ns),
                    is_static: s.pinned,
                }
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: [u8; 6] = [0x02, 0, 0, 0, 0, 0xA];
    const B: [u8; 6] = [0x02, 0, 0, 0, 0, 0xB];

    #[test]
    fn learn_lookup_move_age() {
        let mut f = Fdb::new(64, 1_000);
        let t = Instant::from_nanos(10);
        assert_eq!(f.lookup(1, A, t), None);
        assert_eq!(f.learn(1, A, PortId(2), t), Learned::New);
        assert_eq!(f.lookup(1, A, t), Some(PortId(2)));
        assert_eq!(f.lookup(2, A, t), None, "VLANs are separate");
        assert_eq!(
            f.learn(1, A, PortId(2), t),
            Learned::Refreshed {
                previous: t,
                sync_pending: false
            }
        );
        assert_eq!(
            f.learn(1, A, PortId(3), t),
            Learned::Moved { from: PortId(2) }
        );
        assert_eq!(f.lookup(1, A, Instant::from_nanos(1_009)), Some(PortId(3)));
        assert_eq!(f.lookup(1, A, Instant::from_nanos(1_010)), None, "aged out");
        assert_eq!(
            f.learn(1, A, PortId(3), Instant::from_nanos(2_000)),
            Learned::New
        );
        f.learn(1, B, PortId(1), Instant::from_nanos(2_000));
        let mut listed: Vec<_> = f.entries(Instant::from_nanos(2_001)).collect();
        listed.sort_by_key(|e| e.mac);
        assert_eq!(listed.len(), 2);
        assert_eq!(
            (listed[0].mac, listed[0].vid, listed[0].port),
            (A, 1, PortId(3))
        );
        f.flush_port(PortId(3));
        assert_eq!(f.lookup(1, A, Instant::from_nanos(2_001)), None);
        assert_eq!(f.lookup(1, B, Instant::from_nanos(2_001)), Some(PortId(1)));
    }

    #[test]
    fn flushed_entries_are_gone_even_before_the_first_aging_time() {
        // Virtual time may start at 0: a flushed slot must not look fresh then.
        let mut f = Fdb::new(64, 1_000);
        let t = Instant::from_nanos(5);
        f.learn(1, A, PortId(2), t);
        f.learn(1, B, PortId(3), t);
        f.flush_port(PortId(2));
        assert_eq!(f.lookup(1, A, t), None);
        assert_eq!(f.lookup(1, B, t), Some(PortId(3)));
        assert_eq!(f.entries(t).count(), 1);
        assert_eq!(f.learn(1, A, PortId(4), t), Learned::New, "slot reused");
        assert_eq!(f.lookup(1, A, t), Some(PortId(4)));
    }

    #[test]
    fn remote_learns_newest_wins() {
        let mut f = Fdb::new(64, 1_000);
        let at = Instant::from_nanos;
        assert_eq!(
            f.learn_remote(1, A, PortId(1), at(10), at(20)),
            Some(Learned::New)
        );
        assert_eq!(f.lookup(1, A, at(20)), Some(PortId(1)));
        // Older than what the table knows: ignored.
        assert_eq!(
            f.learn(1, A, PortId(2), at(30)),
            Learned::Moved { from: PortId(1) }
        );
        assert_eq!(f.learn_remote(1, A, PortId(1), at(25), at(31)), None);
        assert_eq!(f.lookup(1, A, at(31)), Some(PortId(2)));
        // Newer: wins, and keeps its own time (for aging and later comparisons).
        assert_eq!(
            f.learn_remote(1, A, PortId(1), at(40), at(41)),
            Some(Learned::Moved { from: PortId(2) })
        );
        assert_eq!(f.entries(at(41)).next().map(|e| e.last_seen), Some(at(40)));
        // A local learn read before that remote one is superseded.
        assert_eq!(f.learn(1, A, PortId(2), at(35)), Learned::Superseded);
        assert_eq!(f.lookup(1, A, at(41)), Some(PortId(1)));
        // Already aged out when it arrives: ignored.
        assert_eq!(f.learn_remote(1, B, PortId(1), at(40), at(1_040)), None);
        assert_eq!(f.lookup(1, B, at(1_040)), None);
    }

    #[test]
    fn flush_until_keeps_later_learns_and_marks_them() {
        let mut f = Fdb::new(64, 1_000);
        let at = Instant::from_nanos;
        f.learn(1, A, PortId(1), at(10));
        f.learn(1, B, PortId(1), at(30));
        f.flush_port_until(PortId(1), at(20));
        assert_eq!(f.lookup(1, A, at(31)), None);
        assert_eq!(f.lookup(1, B, at(31)), Some(PortId(1)));
        assert_eq!(
            f.learn(1, B, PortId(1), at(32)),
            Learned::Refreshed {
                previous: at(30),
                sync_pending: true
            },
            "the flushing side forgot it: publish again"
        );
        f.learn(1, A, PortId(2), at(40));
        f.flush_until(at(35));
        assert_eq!(f.lookup(1, B, at(41)), None);
        assert_eq!(f.lookup(1, A, at(41)), Some(PortId(2)));
    }

    #[test]
    fn bounded_when_full() {
        let mut f = Fdb::new(16, u64::MAX);
        let t = Instant::from_nanos(1);
        let mut learned = 0;
        for i in 0..1000u32 {
            let b = i.to_be_bytes();
            let mac = [0x02, 0, b[0], b[1], b[2], b[3]];
            if f.learn(1, mac, PortId(0), t) == Learned::New {
                learned += 1;
                assert_eq!(f.lookup(1, mac, t), Some(PortId(0)));
            }
        }
        assert_eq!(learned, 16);
    }

    #[test]
    fn key_round_trips_through_entries() {
        let mut f = Fdb::new(16, u64::MAX);
        let mac = [0xde, 0xad, 0xbe, 0xef, 0x01, 0x02];
        f.learn(4094, mac, PortId(7), Instant::from_nanos(5));
        let e: Vec<_> = f.entries(Instant::from_nanos(5)).collect();
        assert_eq!(
            e,
            vec![FdbEntry {
                vid: 4094,
                mac,
                port: PortId(7),
                last_seen: Instant::from_nanos(5),
                is_static: false,
            }]
        );
    }

    #[test]
    fn static_entries_never_age_move_or_flush() {
        let at = Instant::from_nanos;
        let (mut f, refused) = Fdb::with_static(64, 1_000, &[(1, A, PortId(2))]);
        assert!(refused.is_empty());
        // Never aged.
        assert_eq!(f.lookup(1, A, at(u64::MAX / 2)), Some(PortId(2)));
        // Learning on another port neither moves nor refreshes it; the other VLAN learns.
        assert_eq!(f.learn(1, A, PortId(3), at(10)), Learned::Static);
        assert_eq!(f.lookup(1, A, at(10)), Some(PortId(2)));
        assert_eq!(f.learn(2, A, PortId(3), at(10)), Learned::New);
        // Another side's learn does not move it either.
        assert_eq!(f.learn_remote(1, A, PortId(4), at(20), at(21)), None);
        assert_eq!(f.lookup(1, A, at(21)), Some(PortId(2)));
        // Flushes keep it and forget the learned one.
        f.learn(1, B, PortId(2), at(30));
        f.flush_port(PortId(2));
        assert_eq!(f.lookup(1, A, at(31)), Some(PortId(2)));
        assert_eq!(f.lookup(1, B, at(31)), None);
        f.learn(1, B, PortId(2), at(40));
        f.flush();
        f.flush_until(at(u64::MAX));
        assert_eq!(f.lookup(1, A, at(41)), Some(PortId(2)));
        assert_eq!(f.lookup(1, B, at(41)), None);
        assert_eq!(f.lookup(2, A, at(41)), None);
        // Listed as static.
        let e: Vec<_> = f.entries(at(5_000)).collect();
        assert_eq!(e.len(), 1);
        assert!(e[0].is_static);
        assert_eq!((e[0].vid, e[0].mac, e[0].port), (1, A, PortId(2)));
        // A full probe path refuses the entry and says so.
        let many: Vec<(u16, [u8; 6], PortId)> = (0..100u8)
            .map(|i| (1, [0x02, 0, 0, 0, 1, i], PortId(0)))
            .collect();
        let (_, refused) = Fdb::with_static(16, 1_000, &many);
        assert_eq!(refused.len(), 100 - 16);
    }
}
