//! Longest-prefix match: a multibit trie with a wide first level and 8-bit levels below it
//! (DIR-24-8 as DPDK's `rte_lpm` when the first level has 24 bits; DIR-16-8-8 with 16).
//!
//! # Layout
//!
//! The first level is a flat array of `2^top_bits` entries indexed by the address's top bits;
//! every further level is a *group* of 256 entries indexed by the next 8 bits. An entry is a
//! `u32`: either a pointer to a group (bit 31 set, the group's index below it) or a *leaf*: the
//! value of the longest rule that covers every address under the entry (23 bits, 0 = no route)
//! and that rule's length (8 bits: the `depth`, as `rte_lpm` keeps it). A lookup reads one entry
//! per level until it meets a leaf: one read for a prefix no longer than the first level, one
//! more per 8 bits beyond it. It never allocates and its loop is bounded by the address width.
//!
//! # Updates
//!
//! Rules live beside the table (in a [`RuleSet`]); the table is *leaf-pushed*: a rule shorter
//! than a level is expanded into every entry it covers, and an entry remembers the length of the
//! rule that painted it. [`LpmTable::refresh`] repaints the address range of one prefix from
//! the rule that now governs it: every entry in that range whose depth is at most the prefix's
//! length takes the new leaf (entries painted by longer rules keep theirs), groups are split off
//! where the prefix ends below an entry, and a group whose 256 entries become equal leaves is
//! folded back into its parent. The cost is the size of the prefix's range in the table, not
//! the size of the table.
//!
//! The table is *canonical*: after any sequence of refreshes, no group can be folded, so its
//! shape depends on the rule set only. Refreshing a set of changed prefixes, **in any order**,
//! each from the *final* rule set, gives the same table as applying the changes one by one
//! (`replay_in_any_grouping_matches_one_by_one` checks it): a batch of changes may therefore be
//! applied to a copy that missed several of them (the FIB's two copies, see
//! [`crate::route::fib`]). Argument: take an entry, the best final rule `F` covering it and the
//! longest changed prefix `C` covering it. If `F` is longer than `C`, `F` is unchanged and was
//! the best rule before too (a longer old rule would have been deleted, i.e. changed and longer
//! than `C`), so the entry's depth exceeds every refreshed length and nothing repaints it.
//! Otherwise, when `C` is refreshed the entry's depth is at most `len(C)` (an old rule longer
//! than `C` would be unchanged and beat `F`; earlier refreshes write depths no longer than their
//! own prefixes), so it is painted with the best final rule no longer than `C`, which is `F`;
//! any later refresh of a prefix `P` either leaves it (`len(F) > len(P)`) or paints `F` again.

use core::fmt;
use core::marker::PhantomData;
use std::collections::BTreeMap;

/// Entries per group below the first level (one level = 8 address bits).
pub const GROUP_ENTRIES: usize = 256;

/// Bit 31 of an entry: the entry points to a group.
const GROUP_FLAG: u32 = 1 << 31;
/// The value bits of a leaf.
const VALUE_BITS: u32 = 23;
/// The largest value a leaf holds (values are route targets; 0 means "no route").
pub const MAX_VALUE: u32 = (1 << VALUE_BITS) - 1;
const VALUE_MASK: u32 = MAX_VALUE;

/// A leaf entry: `value` painted by a rule of length `depth`.
#[inline]
const fn leaf(value: u32, depth: u8) -> u32 {
    (depth as u32) << VALUE_BITS | value
}

#[inline]
const fn depth(entry: u32) -> u32 {
    (entry & !GROUP_FLAG) >> VALUE_BITS
}

/// An address type the trie indexes: `u32` for IPv4, `u128` for IPv6 (big-endian integers).
pub trait LpmKey: Copy + Ord + fmt::Debug + Send + Sync + 'static {
    /// The address width.
    const BITS: u32;
    /// `width` bits of the address starting `shift` bits above its least significant bit.
    fn bits_at(self, shift: u32, width: u32) -> usize;
    /// The address with every bit below the top `len` cleared.
    fn masked(self, len: u32) -> Self;
}

impl LpmKey for u32 {
    const BITS: u32 = 32;
    #[inline]
    fn bits_at(self, shift: u32, width: u32) -> usize {
        ((self >> shift) & ((1u32 << width) - 1)) as usize
    }
    #[inline]
    fn masked(self, len: u32) -> Self {
        if len == 0 {
            0
        } else {
            self & (u32::MAX << (32 - len))
        }
    }
}

impl LpmKey for u128 {
    const BITS: u32 = 128;
    #[inline]
    fn bits_at(self, shift: u32, width: u32) -> usize {
        ((self >> shift) as usize) & ((1usize << width) - 1)
    }
    #[inline]
    fn masked(self, len: u32) -> Self {
        if len == 0 {
            0
        } else {
            self & (u128::MAX << (128 - len))
        }
    }
}

/// Why a table could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpmError {
    /// The first level must have 8, 16 or 24 bits (so that 8-bit levels reach the address width)
    /// and be narrower than the address.
    TopBits(u8),
}

impl fmt::Display for LpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TopBits(bits) => {
                write!(f, "first LPM level of {bits} bits: must be 8, 16 or 24")
            }
        }
    }
}

impl std::error::Error for LpmError {}

/// The trie (module docs). Cloning copies it (the FIB makes its second copy that way, once).
#[derive(Clone)]
pub struct LpmTable<K> {
    top_bits: u32,
    top: Box<[u32]>,
    groups: Vec<[u32; GROUP_ENTRIES]>,
    free_groups: Vec<u32>,
    _key: PhantomData<K>,
}

impl<K> fmt::Debug for LpmTable<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LpmTable")
            .field("top_bits", &self.top_bits)
            .field(
                "groups_in_use",
                &(self.groups.len() - self.free_groups.len()),
            )
            .finish_non_exhaustive()
    }
}

impl<K: LpmKey> LpmTable<K> {
    /// An empty table whose first level indexes `top_bits` bits (8, 16 or 24). Its first level
    /// takes `4 << top_bits` bytes: 64 MiB at 24 bits, 256 KiB at 16.
    ///
    /// # Errors
    /// [`LpmError::TopBits`] for any other width.
    pub fn new(top_bits: u8) -> Result<Self, LpmError> {
        let bits = u32::from(top_bits);
        if !matches!(top_bits, 8 | 16 | 24) || bits >= K::BITS {
            return Err(LpmError::TopBits(top_bits));
        }
        Ok(Self {
            top_bits: bits,
            top: vec![0; 1 << bits].into_boxed_slice(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            _key: PhantomData,
        })
    }

    /// The value of the longest rule covering `key`, 0 when none does. No allocation; at most
    /// `1 + (BITS - top_bits) / 8` reads.
    #[inline]
    #[must_use]
    pub fn lookup(&self, key: K) -> u32 {
        let mut shift = K::BITS - self.top_bits;
        let mut entry = self.top[key.bits_at(shift, self.top_bits)];
        while entry & GROUP_FLAG != 0 {
            shift -= 8;
            entry = self.groups[(entry & !GROUP_FLAG) as usize][key.bits_at(shift, 8)];
        }
        entry & VALUE_MASK
    }

    /// The width of the first level.
    #[must_use]
    pub fn top_bits(&self) -> u8 {
        self.top_bits as u8
    }

    /// Groups below the first level in use.
    #[must_use]
    pub fn groups_in_use(&self) -> usize {
        self.groups.len() - self.free_groups.len()
    }

    /// Bytes the table holds (first level plus every group allocated, in use or free).
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.top.len() * 4 + self.groups.capacity() * GROUP_ENTRIES * 4
    }

    /// The most groups a refresh of one `len`-bit prefix can add: one per level it crosses.
    #[must_use]
    pub fn max_new_groups(&self, len: u8) -> usize {
        (u32::from(len).saturating_sub(self.top_bits)).div_ceil(8) as usize
    }

    /// Forgets every rule (keeps the memory).
    pub fn clear(&mut self) {
        self.top.fill(0);
        self.groups.clear();
        self.free_groups.clear();
    }

    /// Repaints the range of the prefix `key/len` (`key` with its host bits clear) with `value`
    /// as painted by a rule of length `depth`: the rule that now governs the prefix itself
    /// (`depth == len`) or, when the prefix has no rule of its own, the longest rule covering it
    /// (`depth < len`; value 0 and depth 0 when none does). See the module docs.
    ///
    /// # Panics
    /// When `len` exceeds the width, `depth > len`, `value > MAX_VALUE` or `key` has host bits
    /// set (callers pass [`crate::route::prefix`] types, which cannot).
    pub fn refresh(&mut self, key: K, len: u8, value: u32, depth: u8) {
        let len = u32::from(len);
        assert!(len <= K::BITS && u32::from(depth) <= len && value <= MAX_VALUE);
        assert!(
            key.masked(len) == key,
            "prefix {key:?}/{len} has host bits set"
        );
        let new_leaf = leaf(value, depth);
        let top_shift = K::BITS - self.top_bits;
        let first = key.bits_at(top_shift, self.top_bits);
        if len <= self.top_bits {
            for index in first..first + (1 << (self.top_bits - len)) {
                let entry = self.top[index];
                self.top[index] = self.cover(entry, len, new_leaf);
            }
        } else {
            let entry = self.top[first];
            self.top[first] = self.descend(entry, key, len, new_leaf, self.top_bits);
        }
    }

    /// `entry` lies wholly inside the refreshed prefix: it takes `new_leaf` unless a longer rule
    /// painted it; a group is repainted entry by entry and then folded if it can be.
    fn cover(&mut self, entry: u32, len: u32, new_leaf: u32) -> u32 {
        if entry & GROUP_FLAG != 0 {
            let group = (entry & !GROUP_FLAG) as usize;
            for index in 0..GROUP_ENTRIES {
                let child = self.groups[group][index];
                // A leaf child is decided here, without a call (the common case).
                let repainted = if child & GROUP_FLAG == 0 {
                    if depth(child) <= len {
                        new_leaf
                    } else {
                        child
                    }
                } else {
                    self.cover(child, len, new_leaf)
                };
                self.groups[group][index] = repainted;
            }
            self.fold(group)
        } else if depth(entry) <= len {
            new_leaf
        } else {
            entry
        }
    }

    /// The refreshed prefix (longer than `done` bits) covers part of `entry`'s range: go one
    /// level down, splitting a leaf into a group if the prefix changes part of it.
    fn descend(&mut self, entry: u32, key: K, len: u32, new_leaf: u32, done: u32) -> u32 {
        let group = if entry & GROUP_FLAG != 0 {
            (entry & !GROUP_FLAG) as usize
        } else if depth(entry) > len || entry == new_leaf {
            // A longer rule governs the whole entry, or the prefix would not change it.
            return entry;
        } else {
            self.allocate_group(entry)
        };
        let shift = K::BITS - done - 8;
        let first = key.bits_at(shift, 8);
        if len <= done + 8 {
            for index in first..first + (1 << (done + 8 - len)) {
                let child = self.groups[group][index];
                let repainted = self.cover(child, len, new_leaf);
                self.groups[group][index] = repainted;
            }
        } else {
            let child = self.groups[group][first];
            let repainted = self.descend(child, key, len, new_leaf, done + 8);
            self.groups[group][first] = repainted;
        }
        self.fold(group)
    }

    /// The entry that stands for `group`: the group itself, or its one leaf if all 256 entries
    /// are that leaf (the group is freed).
    fn fold(&mut self, group: usize) -> u32 {
        let entries = &self.groups[group];
        let first = entries[0];
        if first & GROUP_FLAG == 0 && entries.iter().all(|&e| e == first) {
            self.free_groups.push(group as u32);
            first
        } else {
            GROUP_FLAG | group as u32
        }
    }

    fn allocate_group(&mut self, fill: u32) -> usize {
        if let Some(group) = self.free_groups.pop() {
            self.groups[group as usize] = [fill; GROUP_ENTRIES];
            group as usize
        } else {
            assert!(
                self.groups.len() < (GROUP_FLAG as usize),
                "group index space exhausted"
            );
            self.groups.push([fill; GROUP_ENTRIES]);
            self.groups.len() - 1
        }
    }
}

/// The rules of one address family: prefix → value, by length, in address order (so that dumps
/// are deterministic). Only the control plane touches it.
#[derive(Clone, Debug)]
pub struct RuleSet<K> {
    by_len: Vec<BTreeMap<K, u32>>,
    count: usize,
}

impl<K: LpmKey> Default for RuleSet<K> {
    fn default() -> Self {
        Self {
            by_len: (0..=K::BITS).map(|_| BTreeMap::new()).collect(),
            count: 0,
        }
    }
}

impl<K: LpmKey> RuleSet<K> {
    /// Sets the rule `key/len` (host bits clear) to `value` (non-zero), returning the previous
    /// value.
    pub fn insert(&mut self, key: K, len: u8, value: u32) -> Option<u32> {
        debug_assert!(value != 0 && value <= MAX_VALUE && key.masked(u32::from(len)) == key);
        let previous = self.by_len[usize::from(len)].insert(key, value);
        if previous.is_none() {
            self.count += 1;
        }
        previous
    }

    /// Removes the rule `key/len`, returning its value.
    pub fn remove(&mut self, key: K, len: u8) -> Option<u32> {
        let previous = self.by_len[usize::from(len)].remove(&key);
        if previous.is_some() {
            self.count -= 1;
        }
        previous
    }

    /// The value of the rule `key/len`.
    #[must_use]
    pub fn get(&self, key: K, len: u8) -> Option<u32> {
        self.by_len[usize::from(len)].get(&key).copied()
    }

    /// The longest rule no longer than `len` that covers `key`: its value and length, or
    /// `(0, 0)` when none does (what [`LpmTable::refresh`] takes).
    #[must_use]
    pub fn governing(&self, key: K, len: u8) -> (u32, u8) {
        for l in (0..=len).rev() {
            let rules = &self.by_len[usize::from(l)];
            if rules.is_empty() {
                continue;
            }
            if let Some(&value) = rules.get(&key.masked(u32::from(l))) {
                return (value, l);
            }
        }
        (0, 0)
    }

    /// How many rules there are.
    #[must_use]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are none.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Every rule as `(key, len, value)`, shortest first, in address order within a length.
    pub fn iter(&self) -> impl Iterator<Item = (K, u8, u32)> + '_ {
        self.by_len
            .iter()
            .enumerate()
            .flat_map(|(len, rules)| rules.iter().map(move |(&k, &v)| (k, len as u8, v)))
    }

    /// Repaints `table` from scratch with every rule, one refresh each.
    pub fn rebuild(&self, table: &mut LpmTable<K>) {
        table.clear();
        for (key, len, value) in self.iter() {
            table.refresh(key, len, value, len);
        }
    }

    /// Brings `table` up to date for the changed prefixes `changed` (any order, duplicates
    /// allowed; sorted here only to drop the duplicates): each is repainted from the rule that
    /// now governs it (module docs).
    pub fn apply(&self, table: &mut LpmTable<K>, changed: &mut Vec<(u8, K)>) {
        changed.sort_unstable();
        changed.dedup();
        for &(len, key) in changed.iter() {
            let (value, depth) = self.governing(key, len);
            table.refresh(key, len, value, depth);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The obvious LPM: every rule checked.
    fn naive<K: LpmKey>(rules: &RuleSet<K>, key: K) -> u32 {
        let mut best = (0, 0u8, false);
        for (k, len, v) in rules.iter() {
            if key.masked(u32::from(len)) == k && (!best.2 || len >= best.1) {
                best = (v, len, true);
            }
        }
        best.0
    }

    fn set(rules: &mut RuleSet<u32>, table: &mut LpmTable<u32>, key: u32, len: u8, value: u32) {
        let key = key.masked(u32::from(len));
        if value == 0 {
            rules.remove(key, len);
        } else {
            rules.insert(key, len, value);
        }
        rules.apply(table, &mut vec![(len, key)]);
    }

    #[test]
    fn lookups_follow_the_longest_rule_and_groups_fold_back() {
        for top in [8u8, 16, 24] {
            let mut rules = RuleSet::default();
            let mut t = LpmTable::<u32>::new(top).unwrap();
            let ip = |a: u8, b: u8, c: u8, d: u8| u32::from_be_bytes([a, b, c, d]);
            set(&mut rules, &mut t, 0, 0, 1);
            set(&mut rules, &mut t, ip(10, 0, 0, 0), 8, 2);
            set(&mut rules, &mut t, ip(10, 1, 0, 0), 16, 3);
            set(&mut rules, &mut t, ip(10, 1, 2, 128), 25, 4);
            set(&mut rules, &mut t, ip(10, 1, 2, 200), 32, 5);
            assert_eq!(t.lookup(ip(11, 0, 0, 1)), 1);
            assert_eq!(t.lookup(ip(10, 9, 9, 9)), 2);
            assert_eq!(t.lookup(ip(10, 1, 9, 9)), 3);
            assert_eq!(t.lookup(ip(10, 1, 2, 127)), 3);
            assert_eq!(t.lookup(ip(10, 1, 2, 129)), 4);
            assert_eq!(t.lookup(ip(10, 1, 2, 200)), 5);
            // A shorter rule added later does not override longer ones.
            set(&mut rules, &mut t, ip(10, 1, 0, 0), 20, 6);
            assert_eq!(t.lookup(ip(10, 1, 2, 129)), 4);
            assert_eq!(t.lookup(ip(10, 1, 2, 1)), 6);
            assert_eq!(t.lookup(ip(10, 1, 99, 1)), 3);
            // Deleting exposes the covering rule, and all groups go away with the long rules.
            set(&mut rules, &mut t, ip(10, 1, 2, 200), 32, 0);
            assert_eq!(t.lookup(ip(10, 1, 2, 200)), 4);
            set(&mut rules, &mut t, ip(10, 1, 2, 128), 25, 0);
            set(&mut rules, &mut t, ip(10, 1, 0, 0), 20, 0);
            assert_eq!(t.lookup(ip(10, 1, 2, 200)), 3);
            set(&mut rules, &mut t, ip(10, 1, 0, 0), 16, 0);
            set(&mut rules, &mut t, ip(10, 0, 0, 0), 8, 0);
            assert_eq!(t.lookup(ip(10, 1, 2, 200)), 1);
            assert_eq!(t.groups_in_use(), 0, "top {top}");
            set(&mut rules, &mut t, 0, 0, 0);
            assert_eq!(t.lookup(ip(10, 1, 2, 200)), 0);
            assert!(t.top.iter().all(|&e| e == 0));
        }
    }

    #[test]
    fn bad_first_levels_are_refused() {
        assert_eq!(LpmTable::<u32>::new(12).unwrap_err(), LpmError::TopBits(12));
        assert!(LpmTable::<u32>::new(32).is_err());
        assert!(LpmTable::<u128>::new(16).is_ok());
    }

    #[test]
    fn ipv6_host_routes_descend_every_level() {
        let mut rules = RuleSet::<u128>::default();
        let mut t = LpmTable::<u128>::new(16).unwrap();
        let a: u128 = "2001:db8::1".parse::<std::net::Ipv6Addr>().unwrap().into();
        let net = a.masked(64);
        rules.insert(net, 64, 7);
        rules.insert(a, 128, 8);
        rules.apply(&mut t, &mut vec![(64, net), (128, a)]);
        assert_eq!(t.lookup(a), 8);
        assert_eq!(t.lookup(a + 1), 7);
        assert_eq!(t.lookup(a ^ (1 << 64)), 0);
        // /64 needs 6 groups below a 16-bit first level, the /128 8 more.
        assert_eq!(t.groups_in_use(), 14);
        assert_eq!(t.max_new_groups(128), 14);
    }

    fn arb_rule() -> impl Strategy<Value = (u32, u8, u32)> {
        // Few distinct high bits so rules overlap; values 0 (delete) to 5.
        (
            prop_oneof![
                Just(0u32),
                Just(0x0a00_0000),
                Just(0x0a01_0200),
                any::<u32>()
            ],
            0u8..=32,
            0u32..6,
            any::<u32>(),
        )
            .prop_map(|(base, len, value, noise)| {
                let key = (base ^ (noise & 0x0000_03ff)).masked(u32::from(len));
                (key, len, value)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Against the naive LPM, after every change, with 8- and 16-bit first levels (24 is
        /// the same code with one level less; the unit test above covers it without the 64 MiB
        /// table per case).
        #[test]
        fn matches_the_naive_lpm(changes in proptest::collection::vec(arb_rule(), 1..40),
                                 probes in proptest::collection::vec(any::<u32>(), 32)) {
            for top in [8u8, 16] {
                let mut rules = RuleSet::default();
                let mut t = LpmTable::<u32>::new(top).unwrap();
                for &(key, len, value) in &changes {
                    set(&mut rules, &mut t, key, len, value);
                    for &p in probes.iter().chain(changes.iter().map(|c| &c.0)) {
                        for q in [p, p | 1, p | 0xff] {
                            prop_assert_eq!(t.lookup(q), naive(&rules, q));
                        }
                    }
                }
                // Canonical: the same shape as a table built from scratch.
                let mut fresh = LpmTable::<u32>::new(top).unwrap();
                rules.rebuild(&mut fresh);
                prop_assert_eq!(t.groups_in_use(), fresh.groups_in_use());
            }
        }

        /// The FIB's second copy catches up by one batch of every prefix it missed; the result
        /// equals the copy that took them one at a time.
        #[test]
        fn replay_in_any_grouping_matches_one_by_one(
            before in proptest::collection::vec(arb_rule(), 0..20),
            missed in proptest::collection::vec(arb_rule(), 1..30),
            probes in proptest::collection::vec(any::<u32>(), 64),
        ) {
            let mut rules = RuleSet::default();
            let mut a = LpmTable::<u32>::new(16).unwrap();
            for &(key, len, value) in &before {
                set(&mut rules, &mut a, key, len, value);
            }
            let mut b = a.clone();
            let mut log = Vec::new();
            for &(key, len, value) in &missed {
                set(&mut rules, &mut a, key, len, value);
                log.push((len, key));
            }
            log.reverse(); // order must not matter
            rules.apply(&mut b, &mut log);
            for &p in probes.iter().chain(missed.iter().map(|c| &c.0)) {
                for q in [p, p | 1, p | 0xff] {
                    prop_assert_eq!(a.lookup(q), b.lookup(q));
                    prop_assert_eq!(b.lookup(q), naive(&rules, q));
                }
            }
            prop_assert_eq!(a.groups_in_use(), b.groups_in_use());
        }
    }
}
