//! The filtering database: MAC learning and aging per VLAN (IEEE 802.1Q 8.8).
//!
//! A fixed-size open-addressing table allocated once; learning and lookup probe at most
//! [`PROBE_LIMIT`] slots, so both are bounded and allocation-free. Aged entries are treated as
//! absent and their slots are reused by later learning.

use crate::time::Instant;
use crate::types::PortId;

/// Most slots a lookup or a learn visits.
pub const PROBE_LIMIT: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Slot {
    /// `vid << 48 | mac`; 0 marks a never-used slot (VID 0 is never learned).
    key: u64,
    port: u16,
    last_seen_ns: u64,
}

/// What learning a source address did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Learned {
    /// Already known on this port; its age was refreshed.
    Refreshed,
    /// A new entry.
    New,
    /// Known on another port before: the station moved.
    Moved {
        /// Where it was.
        from: PortId,
    },
    /// No free slot within the probe limit: not learned.
    TableFull,
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
    /// When it was last seen.
    pub last_seen: Instant,
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

    fn live(&self, slot: &Slot, now: Instant) -> bool {
        slot.key != 0 && now.as_nanos().saturating_sub(slot.last_seen_ns) < self.aging_ns
    }

    /// Learns that `mac` in `vid` is reachable through `port`.
    pub fn learn(&mut self, vid: u16, mac: [u8; 6], port: PortId, now: Instant) -> Learned {
        let k = key(vid, mac);
        let start = hash(k);
        let mut free = None;
        for i in 0..PROBE_LIMIT {
            let idx = (start + i) & self.mask;
            let slot = self.slots[idx];
            if slot.key == k {
                let was = PortId(slot.port);
                let alive = self.live(&slot, now);
                self.slots[idx] = Slot {
                    key: k,
                    port: port.0,
                    last_seen_ns: now.as_nanos(),
                };
                return if !alive {
                    Learned::New
                } else if was == port {
                    Learned::Refreshed
                } else {
                    Learned::Moved { from: was }
                };
            }
            if free.is_none() && !self.live(&slot, now) {
                free = Some(idx);
            }
            if slot.key == 0 {
                break;
            }
        }
        let Some(idx) = free else {
            return Learned::TableFull;
        };
        if self.slots[idx].key == 0 {
            self.entries += 1;
        }
        self.slots[idx] = Slot {
            key: k,
            port: port.0,
            last_seen_ns: now.as_nanos(),
        };
        Learned::New
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
                return self.live(slot, now).then_some(PortId(slot.port));
            }
            if slot.key == 0 {
                return None;
            }
        }
        None
    }

    /// Forgets every station learned on `port` (link down, reconfiguration).
    pub fn flush_port(&mut self, port: PortId) {
        for s in &mut self.slots {
            if s.key != 0 && s.port == port.0 {
                // Keep the key so probe chains stay intact; age it out.
                s.last_seen_ns = 0;
                s.port = u16::MAX;
            }
        }
    }

    /// Forgets everything.
    pub fn flush(&mut self) {
        self.slots.fill(Slot::default());
        self.entries = 0;
    }

    /// Live entries at `now`, for `show fdb`.
    pub fn entries(&self, now: Instant) -> impl Iterator<Item = FdbEntry> + '_ {
        self.slots
            .iter()
            .filter(move |s| self.live(s, now) && s.port != u16::MAX)
            .map(|s| {
                let mac_bits = s.key & 0x0000_FFFF_FFFF_FFFF;
                let b = mac_bits.to_be_bytes();
                FdbEntry {
                    vid: u16::try_from(s.key >> 48).unwrap_or(0),
                    mac: [b[2], b[3], b[4], b[5], b[6], b[7]],
                    port: PortId(s.port),
                    last_seen: Instant::from_nanos(s.last_seen_ns),
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
        assert_eq!(f.learn(1, A, PortId(2), t), Learned::Refreshed);
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
                last_seen: Instant::from_nanos(5)
            }]
        );
    }
}
