//! The FIB: an immutable snapshot the lcores read ([`Fib`]) and the control plane's builder of
//! snapshots ([`FibBuilder`]).
//!
//! # Two copies, changed in place (left-right)
//!
//! The builder owns two copies of the tables. One is *published*: the lcores read it and nobody
//! writes it. The other is the *spare*: the previous publication, which the lcores hand back
//! (through [`crate::route::swap`]) once they have switched to the newer one. A change (route,
//! next hop, ECMP group) is recorded in the builder's model at once and in a log of changed
//! prefixes; [`FibBuilder::publish`] brings the spare up to date by repainting only the logged
//! prefixes (see [`crate::route::lpm`] for why one batch of them, in any order, is exact),
//! copies the next-hop and ECMP tables if they changed, and publishes it. A route change
//! therefore costs the size of its prefix's range in the LPM (twice: once per copy), not the
//! size of the FIB, and nothing is allocated per change on the lcores, which only swap an `Arc`.
//!
//! The spare can be written only when no lcore holds it any more: `publish` checks that with
//! [`Arc::get_mut`] and answers [`PublishError::SpareInUse`] otherwise; the caller retries after
//! reclaiming what the lcores returned. If the spare fell more than [`LOG_LIMIT`] prefixes
//! behind, it is rebuilt from the rules instead (counted in [`FibStats::full_rebuilds`]).
//!
//! # Bounds
//!
//! Every table has a configured capacity ([`FibConfig`]); a change beyond it is refused with a
//! [`FibError`] and changes nothing. LPM groups below the first level are admitted against an
//! upper bound of what the pending changes may add, so a publication never runs out.

use crate::route::ecmp::{rebalance, EcmpHash, EcmpMember, FlowKey};
use crate::route::lpm::{LpmError, LpmTable, RuleSet};
use crate::route::nexthop::{EcmpGroupId, NextHop, NextHopId, RouteTarget, MAX_TARGET_ID};
use crate::route::prefix::{Ipv4Prefix, Ipv6Prefix};
use core::fmt;
use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

/// Most logged prefixes the spare may lag behind before it is rebuilt from the rules instead.
pub const LOG_LIMIT: usize = 1 << 16;

/// Sizes and hashing of a FIB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FibConfig {
    /// First-level width of the IPv4 LPM (8, 16 or 24; 24 is DIR-24-8 and takes 64 MiB per copy).
    pub ipv4_top_bits: u8,
    /// First-level width of the IPv6 LPM (8, 16 or 24).
    pub ipv6_top_bits: u8,
    /// Most IPv4 routes.
    pub max_ipv4_routes: usize,
    /// Most IPv6 routes.
    pub max_ipv6_routes: usize,
    /// Most 256-entry groups below the IPv4 first level (1 KiB each, per copy).
    pub max_ipv4_groups: usize,
    /// Most 256-entry groups below the IPv6 first level (1 KiB each, per copy).
    pub max_ipv6_groups: usize,
    /// Most next hops, the three fixed ones included.
    pub max_next_hops: usize,
    /// Most ECMP groups.
    pub max_ecmp_groups: usize,
    /// Buckets per ECMP group, as a power of two (7: 128 buckets); also the most members.
    pub ecmp_bucket_bits: u8,
    /// The flow hash.
    pub hash: EcmpHash,
}

impl Default for FibConfig {
    fn default() -> Self {
        Self {
            ipv4_top_bits: 16,
            ipv6_top_bits: 16,
            max_ipv4_routes: 131_072,
            max_ipv6_routes: 65_536,
            max_ipv4_groups: 16_384,
            max_ipv6_groups: 65_536,
            max_next_hops: 4096,
            max_ecmp_groups: 1024,
            ecmp_bucket_bits: 7,
            hash: EcmpHash::default(),
        }
    }
}

/// Why a change was refused (nothing changed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FibError {
    /// A table is at its configured capacity.
    Full(FibTable),
    /// The next hop id is not in use.
    UnknownNextHop(NextHopId),
    /// The ECMP group id is not in use.
    UnknownEcmpGroup(EcmpGroupId),
    /// Routes or groups still use it.
    InUse,
    /// A fixed next hop ([`NextHopId::LOCAL`], `BLACKHOLE`, `KERNEL`) cannot be changed.
    FixedNextHop,
    /// An ECMP group needs at least one member, at most one per bucket, each once, each a next
    /// hop that forwards or punts to a port (not a fixed next hop).
    BadMembers,
    /// The configuration is not valid.
    Config(LpmError),
}

/// The tables of [`FibError::Full`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FibTable {
    /// IPv4 routes.
    Ipv4Routes,
    /// IPv6 routes.
    Ipv6Routes,
    /// IPv4 LPM groups.
    Ipv4Groups,
    /// IPv6 LPM groups.
    Ipv6Groups,
    /// Next hops.
    NextHops,
    /// ECMP groups.
    EcmpGroups,
}

impl fmt::Display for FibError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Full(table) => write!(f, "FIB table full: {table:?}"),
            Self::UnknownNextHop(id) => write!(f, "no next hop {}", id.0),
            Self::UnknownEcmpGroup(id) => write!(f, "no ECMP group {}", id.0),
            Self::InUse => write!(f, "still used by routes or groups"),
            Self::FixedNextHop => write!(f, "a fixed next hop cannot be changed"),
            Self::BadMembers => write!(f, "bad ECMP members"),
            Self::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for FibError {}

/// Why [`FibBuilder::publish`] did not publish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishError {
    /// Nothing changed since the last publication.
    Unchanged,
    /// An lcore still holds the spare copy: reclaim what the lcores returned, then retry.
    SpareInUse,
}

/// An immutable FIB snapshot: what an lcore reads per packet. Lookups never allocate, lock or
/// write.
#[derive(Clone, Debug)]
pub struct Fib {
    v4: LpmTable<u32>,
    v6: LpmTable<u128>,
    next_hops: Vec<NextHop>,
    /// Group `g`'s buckets are `ecmp[g << bucket_bits ..][.. 1 << bucket_bits]`.
    ecmp: Vec<NextHopId>,
    bucket_mask: u32,
    bucket_bits: u8,
    hash: EcmpHash,
    /// Publication number (0: the empty FIB the builder starts with).
    generation: u64,
    /// Position in the builder's change log this copy has applied.
    applied: u64,
    next_hops_version: u64,
    ecmp_version: u64,
    /// The builder's `FibConfig::max_next_hops`: every id of every snapshot is below it.
    max_next_hops: usize,
}

impl Fib {
    /// Most next hops of any snapshot of this builder (`FibConfig::max_next_hops`): an array of
    /// this many entries has a slot for every next-hop id (per-next-hop counters).
    #[must_use]
    pub fn max_next_hops(&self) -> usize {
        self.max_next_hops
    }

    /// The route for an IPv4 destination.
    #[inline]
    #[must_use]
    pub fn lookup_v4(&self, dst: Ipv4Addr) -> Option<RouteTarget> {
        RouteTarget::decode(self.v4.lookup(u32::from(dst)))
    }

    /// The route for an IPv6 destination.
    #[inline]
    #[must_use]
    pub fn lookup_v6(&self, dst: Ipv6Addr) -> Option<RouteTarget> {
        RouteTarget::decode(self.v6.lookup(u128::from(dst)))
    }

    /// A next hop. Ids come from this FIB's routes and groups, which always name next hops it
    /// has.
    #[inline]
    #[must_use]
    pub fn next_hop(&self, id: NextHopId) -> &NextHop {
        &self.next_hops[id.index()]
    }

    /// The member of `group` for a flow whose [`EcmpHash::hash`] is `flow_hash`.
    #[inline]
    #[must_use]
    pub fn ecmp_member(&self, group: EcmpGroupId, flow_hash: u32) -> NextHopId {
        self.ecmp[(group.index() << self.bucket_bits) | (flow_hash & self.bucket_mask) as usize]
    }

    /// The next hop of `target`; `flow` is asked for the flow key only for an ECMP group.
    #[inline]
    pub fn resolve(&self, target: RouteTarget, flow: impl FnOnce() -> FlowKey) -> NextHopId {
        match target {
            RouteTarget::NextHop(id) => id,
            RouteTarget::Ecmp(group) => self.ecmp_member(group, self.hash.hash(&flow())),
        }
    }

    /// The switch's flow hash.
    #[must_use]
    pub fn hash(&self) -> &EcmpHash {
        &self.hash
    }

    /// Publication number: 0 for the empty FIB, then 1, 2, … per publication.
    #[must_use]
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// Bytes this snapshot holds.
    #[must_use]
    pub fn memory_bytes(&self) -> usize {
        self.v4.memory_bytes()
            + self.v6.memory_bytes()
            + self.next_hops.capacity() * size_of::<NextHop>()
            + self.ecmp.capacity() * size_of::<NextHopId>()
    }
}

/// One ECMP group in the builder.
#[derive(Clone, Debug, PartialEq, Eq)]
struct EcmpGroupState {
    members: Vec<EcmpMember>,
    /// Routes using the group.
    routes: usize,
}

/// Counters of a builder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FibStats {
    /// Snapshots published.
    pub publications: u64,
    /// Prefixes repainted in spares (each logged prefix once per copy).
    pub prefixes_repainted: u64,
    /// Spares rebuilt from the rules because they lagged more than [`LOG_LIMIT`].
    pub full_rebuilds: u64,
    /// Changes refused (a [`FibError`] returned).
    pub refused: u64,
}

/// The control plane's side of the FIB (module docs). Single-threaded; not on the fast path.
#[derive(Debug)]
pub struct FibBuilder {
    config: FibConfig,
    rules_v4: RuleSet<u32>,
    rules_v6: RuleSet<u128>,
    next_hops: Vec<NextHop>,
    /// Routes and group memberships per next hop; `None` for a free id.
    next_hop_uses: Vec<Option<usize>>,
    free_next_hops: Vec<u32>,
    groups: Vec<Option<EcmpGroupState>>,
    free_groups: Vec<u32>,
    ecmp: Vec<NextHopId>,
    /// Changed prefixes from `log_start` on.
    log_v4: Vec<(u64, u8, u32)>,
    log_v6: Vec<(u64, u8, u128)>,
    log_start: u64,
    log_head: u64,
    /// Upper bound of LPM groups the rules added since the last publication may add to the
    /// published copy, and those rules (a rule added and removed again gives its bound back;
    /// removing a published rule adds no group).
    pending_groups_v4: usize,
    pending_groups_v6: usize,
    added_v4: HashSet<(u8, u32)>,
    added_v6: HashSet<(u8, u128)>,
    next_hops_version: u64,
    ecmp_version: u64,
    published: Arc<Fib>,
    spare: Option<Arc<Fib>>,
    stats: FibStats,
}

impl FibBuilder {
    /// An empty FIB: no routes, the three fixed next hops.
    ///
    /// # Errors
    /// [`FibError::Config`] for a bad first-level width; [`FibError::Full`] when a capacity
    /// cannot be encoded (more than [`MAX_TARGET_ID`] next hops or groups, or fewer than the
    /// fixed next hops).
    pub fn new(config: FibConfig) -> Result<Self, FibError> {
        if config.max_next_hops > MAX_TARGET_ID as usize
            || config.max_next_hops < NextHopId::FIRST_DYNAMIC as usize
        {
            return Err(FibError::Full(FibTable::NextHops));
        }
        if config.max_ecmp_groups > MAX_TARGET_ID as usize || config.ecmp_bucket_bits > 12 {
            return Err(FibError::Full(FibTable::EcmpGroups));
        }
        let v4 = LpmTable::new(config.ipv4_top_bits).map_err(FibError::Config)?;
        let v6 = LpmTable::new(config.ipv6_top_bits).map_err(FibError::Config)?;
        let next_hops = vec![NextHop::Local, NextHop::Blackhole, NextHop::Kernel];
        let fib = Fib {
            v4,
            v6,
            next_hops: next_hops.clone(),
            ecmp: Vec::new(),
            bucket_mask: (1 << config.ecmp_bucket_bits) - 1,
            bucket_bits: config.ecmp_bucket_bits,
            hash: config.hash,
            generation: 0,
            applied: 0,
            next_hops_version: 0,
            ecmp_version: 0,
            max_next_hops: config.max_next_hops,
        };
        Ok(Self {
            config,
            rules_v4: RuleSet::default(),
            rules_v6: RuleSet::default(),
            next_hops,
            next_hop_uses: vec![Some(0); NextHopId::FIRST_DYNAMIC as usize],
            free_next_hops: Vec::new(),
            groups: Vec::new(),
            free_groups: Vec::new(),
            ecmp: Vec::new(),
            log_v4: Vec::new(),
            log_v6: Vec::new(),
            log_start: 0,
            log_head: 0,
            pending_groups_v4: 0,
            pending_groups_v6: 0,
            added_v4: HashSet::new(),
            added_v6: HashSet::new(),
            next_hops_version: 0,
            ecmp_version: 0,
            published: Arc::new(fib),
            spare: None,
            stats: FibStats::default(),
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &FibConfig {
        &self.config
    }

    /// The snapshot published last (the empty FIB before the first publication): what the
    /// lcores start with.
    #[must_use]
    pub fn published(&self) -> &Arc<Fib> {
        &self.published
    }

    /// Counters.
    #[must_use]
    pub fn stats(&self) -> FibStats {
        self.stats
    }

    fn refuse<T>(&mut self, error: FibError) -> Result<T, FibError> {
        self.stats.refused += 1;
        Err(error)
    }

    // --- next hops ---------------------------------------------------------------------------

    /// Adds a next hop.
    ///
    /// # Errors
    /// [`FibError::Full`] at capacity.
    pub fn add_next_hop(&mut self, next_hop: NextHop) -> Result<NextHopId, FibError> {
        let id = if let Some(id) = self.free_next_hops.pop() {
            self.next_hops[id as usize] = next_hop;
            self.next_hop_uses[id as usize] = Some(0);
            id
        } else if self.next_hops.len() < self.config.max_next_hops {
            self.next_hops.push(next_hop);
            self.next_hop_uses.push(Some(0));
            (self.next_hops.len() - 1) as u32
        } else {
            return self.refuse(FibError::Full(FibTable::NextHops));
        };
        self.next_hops_version += 1;
        Ok(NextHopId(id))
    }

    fn check_dynamic(&self, id: NextHopId) -> Result<(), FibError> {
        if id.0 < NextHopId::FIRST_DYNAMIC {
            Err(FibError::FixedNextHop)
        } else if self
            .next_hop_uses
            .get(id.index())
            .copied()
            .flatten()
            .is_none()
        {
            Err(FibError::UnknownNextHop(id))
        } else {
            Ok(())
        }
    }

    /// Changes a next hop (a neighbour resolved, moved or lost): every route and group using it
    /// follows at the next publication, without touching the LPM.
    ///
    /// # Errors
    /// [`FibError::FixedNextHop`], [`FibError::UnknownNextHop`].
    pub fn set_next_hop(&mut self, id: NextHopId, next_hop: NextHop) -> Result<(), FibError> {
        if let Err(e) = self.check_dynamic(id) {
            return self.refuse(e);
        }
        if self.next_hops[id.index()] != next_hop {
            self.next_hops[id.index()] = next_hop;
            self.next_hops_version += 1;
        }
        Ok(())
    }

    /// Removes a next hop no route or group uses.
    ///
    /// # Errors
    /// [`FibError::InUse`], [`FibError::FixedNextHop`], [`FibError::UnknownNextHop`].
    pub fn remove_next_hop(&mut self, id: NextHopId) -> Result<(), FibError> {
        if let Err(e) = self.check_dynamic(id) {
            return self.refuse(e);
        }
        if self.next_hop_uses[id.index()] != Some(0) {
            return self.refuse(FibError::InUse);
        }
        self.next_hop_uses[id.index()] = None;
        // A free slot keeps a harmless value: nothing names it.
        self.next_hops[id.index()] = NextHop::Blackhole;
        self.free_next_hops.push(id.0);
        self.next_hops_version += 1;
        Ok(())
    }

    /// A next hop.
    #[must_use]
    pub fn next_hop(&self, id: NextHopId) -> Option<&NextHop> {
        self.next_hop_uses
            .get(id.index())
            .copied()
            .flatten()
            .map(|_| &self.next_hops[id.index()])
    }

    /// Routes and ECMP memberships that use a next hop.
    #[must_use]
    pub fn next_hop_uses(&self, id: NextHopId) -> Option<usize> {
        self.next_hop_uses.get(id.index()).copied().flatten()
    }

    /// Next hops in use (the fixed ones included).
    #[must_use]
    pub fn next_hop_count(&self) -> usize {
        self.next_hops.len() - self.free_next_hops.len()
    }

    fn use_next_hop(&mut self, id: NextHopId, delta: isize) {
        if let Some(Some(uses)) = self.next_hop_uses.get_mut(id.index()) {
            *uses = uses.checked_add_signed(delta).expect("next hop use count");
        }
    }

    // --- ECMP groups -------------------------------------------------------------------------

    fn buckets(&self) -> usize {
        1 << self.config.ecmp_bucket_bits
    }

    fn check_members(&self, members: &[EcmpMember]) -> Result<(), FibError> {
        let ok = !members.is_empty()
            && members.len() <= self.buckets()
            && members.iter().enumerate().all(|(i, m)| {
                m.next_hop.0 >= NextHopId::FIRST_DYNAMIC
                    && self.next_hop(m.next_hop).is_some()
                    && !members[..i].iter().any(|o| o.next_hop == m.next_hop)
            });
        if ok {
            Ok(())
        } else {
            Err(FibError::BadMembers)
        }
    }

    /// Adds an ECMP group. With `like`, the new group starts from that group's buckets and
    /// moves as few as it must (a route whose paths change keeps its other flows where they
    /// were); otherwise buckets are dealt round-robin.
    ///
    /// # Errors
    /// [`FibError::BadMembers`], [`FibError::Full`], [`FibError::UnknownEcmpGroup`] for `like`.
    pub fn add_ecmp_group(
        &mut self,
        members: &[EcmpMember],
        like: Option<EcmpGroupId>,
    ) -> Result<EcmpGroupId, FibError> {
        if let Err(e) = self.check_members(members) {
            return self.refuse(e);
        }
        if let Some(like) = like {
            if self.ecmp_group(like).is_none() {
                return self.refuse(FibError::UnknownEcmpGroup(like));
            }
        }
        let id = if let Some(id) = self.free_groups.pop() {
            id
        } else if self.groups.len() < self.config.max_ecmp_groups {
            self.groups.push(None);
            self.ecmp
                .extend(std::iter::repeat_n(NextHopId::BLACKHOLE, self.buckets()));
            (self.groups.len() - 1) as u32
        } else {
            return self.refuse(FibError::Full(FibTable::EcmpGroups));
        };
        let b = self.buckets();
        let range = id as usize * b..(id as usize + 1) * b;
        match like {
            Some(like) => {
                let from = like.index() * b;
                self.ecmp.copy_within(from..from + b, range.start);
            }
            None => self.ecmp[range.clone()].fill(NextHopId::BLACKHOLE),
        }
        rebalance(&mut self.ecmp[range], members);
        for m in members {
            self.use_next_hop(m.next_hop, 1);
        }
        self.groups[id as usize] = Some(EcmpGroupState {
            members: members.to_vec(),
            routes: 0,
        });
        self.ecmp_version += 1;
        Ok(EcmpGroupId(id))
    }

    /// Changes a group's members, moving as few buckets as it can (resilient hashing).
    ///
    /// # Errors
    /// [`FibError::BadMembers`], [`FibError::UnknownEcmpGroup`].
    pub fn set_ecmp_members(
        &mut self,
        id: EcmpGroupId,
        members: &[EcmpMember],
    ) -> Result<(), FibError> {
        if self.ecmp_group(id).is_none() {
            return self.refuse(FibError::UnknownEcmpGroup(id));
        }
        if let Err(e) = self.check_members(members) {
            return self.refuse(e);
        }
        let old = core::mem::take(&mut self.groups[id.index()].as_mut().expect("checked").members);
        for m in &old {
            self.use_next_hop(m.next_hop, -1);
        }
        for m in members {
            self.use_next_hop(m.next_hop, 1);
        }
        let b = self.buckets();
        rebalance(
            &mut self.ecmp[id.index() * b..(id.index() + 1) * b],
            members,
        );
        self.groups[id.index()].as_mut().expect("checked").members = members.to_vec();
        self.ecmp_version += 1;
        Ok(())
    }

    /// Removes a group no route uses.
    ///
    /// # Errors
    /// [`FibError::InUse`], [`FibError::UnknownEcmpGroup`].
    pub fn remove_ecmp_group(&mut self, id: EcmpGroupId) -> Result<(), FibError> {
        match self.groups.get(id.index()) {
            Some(Some(g)) if g.routes == 0 => {}
            Some(Some(_)) => return self.refuse(FibError::InUse),
            _ => return self.refuse(FibError::UnknownEcmpGroup(id)),
        }
        let group = self.groups[id.index()].take().expect("checked");
        for m in &group.members {
            self.use_next_hop(m.next_hop, -1);
        }
        self.free_groups.push(id.0);
        self.ecmp_version += 1;
        Ok(())
    }

    /// A group's members.
    #[must_use]
    pub fn ecmp_group(&self, id: EcmpGroupId) -> Option<&[EcmpMember]> {
        self.groups
            .get(id.index())
            .and_then(Option::as_ref)
            .map(|g| &g.members[..])
    }

    /// A group's buckets (the member of each, in order): what `show ecmp` prints.
    #[must_use]
    pub fn ecmp_buckets(&self, id: EcmpGroupId) -> Option<&[NextHopId]> {
        self.ecmp_group(id)?;
        let b = self.buckets();
        Some(&self.ecmp[id.index() * b..(id.index() + 1) * b])
    }

    /// Routes that use a group.
    #[must_use]
    pub fn ecmp_group_routes(&self, id: EcmpGroupId) -> Option<usize> {
        self.groups.get(id.index())?.as_ref().map(|g| g.routes)
    }

    /// ECMP groups in use.
    #[must_use]
    pub fn ecmp_group_count(&self) -> usize {
        self.groups.len() - self.free_groups.len()
    }

    // --- routes ------------------------------------------------------------------------------

    fn check_target(&self, target: RouteTarget) -> Result<(), FibError> {
        match target {
            RouteTarget::NextHop(id) if self.next_hop(id).is_none() => {
                Err(FibError::UnknownNextHop(id))
            }
            RouteTarget::Ecmp(id) if self.ecmp_group(id).is_none() => {
                Err(FibError::UnknownEcmpGroup(id))
            }
            _ => Ok(()),
        }
    }

    fn use_target(&mut self, target: RouteTarget, delta: isize) {
        match target {
            RouteTarget::NextHop(id) => self.use_next_hop(id, delta),
            RouteTarget::Ecmp(id) => {
                if let Some(Some(g)) = self.groups.get_mut(id.index()) {
                    g.routes = g.routes.checked_add_signed(delta).expect("group use count");
                }
            }
        }
    }

    /// Sets the IPv4 route of `prefix` (replacing any), in effect at the next publication.
    ///
    /// # Errors
    /// [`FibError::Full`], [`FibError::UnknownNextHop`], [`FibError::UnknownEcmpGroup`].
    pub fn set_route_v4(
        &mut self,
        prefix: Ipv4Prefix,
        target: RouteTarget,
    ) -> Result<(), FibError> {
        if let Err(e) = self.check_target(target) {
            return self.refuse(e);
        }
        let (key, len) = (prefix.bits(), prefix.prefix_len());
        let existing = self.rules_v4.get(key, len);
        if existing.is_none() {
            if self.rules_v4.len() >= self.config.max_ipv4_routes {
                return self.refuse(FibError::Full(FibTable::Ipv4Routes));
            }
            let more = self.published.v4.max_new_groups(len);
            if self.published.v4.groups_in_use() + self.pending_groups_v4 + more
                > self.config.max_ipv4_groups
            {
                return self.refuse(FibError::Full(FibTable::Ipv4Groups));
            }
            self.pending_groups_v4 += more;
            self.added_v4.insert((len, key));
        }
        let value = target.encode();
        if existing == Some(value) {
            return Ok(());
        }
        if let Some(old) = existing.and_then(RouteTarget::decode) {
            self.use_target(old, -1);
        }
        self.use_target(target, 1);
        self.rules_v4.insert(key, len, value);
        self.log_v4.push((self.log_head, len, key));
        self.log_head += 1;
        Ok(())
    }

    /// Removes the IPv4 route of `prefix`, returning what it pointed to.
    pub fn remove_route_v4(&mut self, prefix: Ipv4Prefix) -> Option<RouteTarget> {
        let (key, len) = (prefix.bits(), prefix.prefix_len());
        let old = RouteTarget::decode(self.rules_v4.remove(key, len)?)?;
        if self.added_v4.remove(&(len, key)) {
            self.pending_groups_v4 -= self.published.v4.max_new_groups(len);
        }
        self.use_target(old, -1);
        self.log_v4.push((self.log_head, len, key));
        self.log_head += 1;
        Some(old)
    }

    /// Sets the IPv6 route of `prefix` (replacing any), in effect at the next publication.
    ///
    /// # Errors
    /// As [`FibBuilder::set_route_v4`].
    pub fn set_route_v6(
        &mut self,
        prefix: Ipv6Prefix,
        target: RouteTarget,
    ) -> Result<(), FibError> {
        if let Err(e) = self.check_target(target) {
            return self.refuse(e);
        }
        let (key, len) = (prefix.bits(), prefix.prefix_len());
        let existing = self.rules_v6.get(key, len);
        if existing.is_none() {
            if self.rules_v6.len() >= self.config.max_ipv6_routes {
                return self.refuse(FibError::Full(FibTable::Ipv6Routes));
            }
            let more = self.published.v6.max_new_groups(len);
            if self.published.v6.groups_in_use() + self.pending_groups_v6 + more
                > self.config.max_ipv6_groups
            {
                return self.refuse(FibError::Full(FibTable::Ipv6Groups));
            }
            self.pending_groups_v6 += more;
            self.added_v6.insert((len, key));
        }
        let value = target.encode();
        if existing == Some(value) {
            return Ok(());
        }
        if let Some(old) = existing.and_then(RouteTarget::decode) {
            self.use_target(old, -1);
        }
        self.use_target(target, 1);
        self.rules_v6.insert(key, len, value);
        self.log_v6.push((self.log_head, len, key));
        self.log_head += 1;
        Ok(())
    }

    /// Removes the IPv6 route of `prefix`, returning what it pointed to.
    pub fn remove_route_v6(&mut self, prefix: Ipv6Prefix) -> Option<RouteTarget> {
        let (key, len) = (prefix.bits(), prefix.prefix_len());
        let old = RouteTarget::decode(self.rules_v6.remove(key, len)?)?;
        if self.added_v6.remove(&(len, key)) {
            self.pending_groups_v6 -= self.published.v6.max_new_groups(len);
        }
        self.use_target(old, -1);
        self.log_v6.push((self.log_head, len, key));
        self.log_head += 1;
        Some(old)
    }

    /// The IPv4 route of exactly `prefix`.
    #[must_use]
    pub fn route_v4(&self, prefix: Ipv4Prefix) -> Option<RouteTarget> {
        RouteTarget::decode(self.rules_v4.get(prefix.bits(), prefix.prefix_len())?)
    }

    /// The IPv6 route of exactly `prefix`.
    #[must_use]
    pub fn route_v6(&self, prefix: Ipv6Prefix) -> Option<RouteTarget> {
        RouteTarget::decode(self.rules_v6.get(prefix.bits(), prefix.prefix_len())?)
    }

    /// Every IPv4 route, shortest prefix first, in address order within a length.
    pub fn routes_v4(&self) -> impl Iterator<Item = (Ipv4Prefix, RouteTarget)> + '_ {
        self.rules_v4.iter().filter_map(|(key, len, value)| {
            let prefix = Ipv4Prefix::new(Ipv4Addr::from(key), len).ok()?;
            Some((prefix, RouteTarget::decode(value)?))
        })
    }

    /// Every IPv6 route, shortest prefix first, in address order within a length.
    pub fn routes_v6(&self) -> impl Iterator<Item = (Ipv6Prefix, RouteTarget)> + '_ {
        self.rules_v6.iter().filter_map(|(key, len, value)| {
            let prefix = Ipv6Prefix::new(Ipv6Addr::from(key), len).ok()?;
            Some((prefix, RouteTarget::decode(value)?))
        })
    }

    /// Route counts (IPv4, IPv6).
    #[must_use]
    pub fn route_counts(&self) -> (usize, usize) {
        (self.rules_v4.len(), self.rules_v6.len())
    }

    /// Whether anything changed since the last publication.
    #[must_use]
    pub fn has_changes(&self) -> bool {
        self.log_head != self.published.applied
            || self.next_hops_version != self.published.next_hops_version
            || self.ecmp_version != self.published.ecmp_version
    }

    // --- publication -------------------------------------------------------------------------

    /// Brings the spare copy up to date and publishes it; the caller hands the returned `Arc`
    /// to every lcore ([`crate::route::swap::FibSender::send`]).
    ///
    /// # Errors
    /// [`PublishError::Unchanged`] when nothing changed; [`PublishError::SpareInUse`] while an
    /// lcore (or anyone else) still holds the spare.
    pub fn publish(&mut self) -> Result<Arc<Fib>, PublishError> {
        if !self.has_changes() {
            return Err(PublishError::Unchanged);
        }
        let mut spare = match self.spare.take() {
            // The very first publication makes the second copy (the only full copy made).
            None => Arc::new((*self.published).clone()),
            Some(spare) => spare,
        };
        let Some(fib) = Arc::get_mut(&mut spare) else {
            self.spare = Some(spare);
            return Err(PublishError::SpareInUse);
        };
        if fib.applied < self.log_start {
            self.rules_v4.rebuild(&mut fib.v4);
            self.rules_v6.rebuild(&mut fib.v6);
            self.stats.full_rebuilds += 1;
        } else {
            let mut changed_v4: Vec<(u8, u32)> = self
                .log_v4
                .iter()
                .filter(|&&(at, ..)| at >= fib.applied)
                .map(|&(_, len, key)| (len, key))
                .collect();
            let mut changed_v6: Vec<(u8, u128)> = self
                .log_v6
                .iter()
                .filter(|&&(at, ..)| at >= fib.applied)
                .map(|&(_, len, key)| (len, key))
                .collect();
            self.stats.prefixes_repainted += (changed_v4.len() + changed_v6.len()) as u64;
            self.rules_v4.apply(&mut fib.v4, &mut changed_v4);
            self.rules_v6.apply(&mut fib.v6, &mut changed_v6);
        }
        fib.applied = self.log_head;
        if fib.next_hops_version != self.next_hops_version {
            fib.next_hops.clone_from(&self.next_hops);
            fib.next_hops_version = self.next_hops_version;
        }
        if fib.ecmp_version != self.ecmp_version {
            fib.ecmp.clone_from(&self.ecmp);
            fib.ecmp_version = self.ecmp_version;
        }
        fib.generation = self.published.generation + 1;
        let previous = core::mem::replace(&mut self.published, spare);
        // The log now only needs what the new spare (the previous publication) lacks.
        let keep_from = previous.applied;
        self.log_v4.retain(|&(at, ..)| at >= keep_from);
        self.log_v6.retain(|&(at, ..)| at >= keep_from);
        self.log_start = keep_from;
        if self.log_v4.len() + self.log_v6.len() > LOG_LIMIT {
            self.log_v4.clear();
            self.log_v6.clear();
            self.log_start = self.log_head;
        }
        self.spare = Some(previous);
        self.pending_groups_v4 = 0;
        self.pending_groups_v6 = 0;
        self.added_v4.clear();
        self.added_v6.clear();
        self.stats.publications += 1;
        Ok(Arc::clone(&self.published))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::PortId;
    use headroom_wire::ethernet::MacAddress;

    fn p4(s: &str) -> Ipv4Prefix {
        let (a, l) = s.split_once('/').unwrap();
        Ipv4Prefix::new(a.parse().unwrap(), l.parse().unwrap()).unwrap()
    }

    fn resolved(port: u16, last: u8) -> NextHop {
        NextHop::Resolved {
            port: PortId(port),
            vlan: None,
            mac: MacAddress([2, 0, 0, 0, 0, last]),
        }
    }

    fn nh(fib: &Fib, dst: &str) -> Option<NextHop> {
        let target = fib.lookup_v4(dst.parse().unwrap())?;
        Some(*fib.next_hop(fib.resolve(target, FlowKey::default)))
    }

    #[test]
    fn publications_alternate_two_copies_and_keep_old_snapshots_intact() {
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let empty = Arc::clone(b.published());
        assert_eq!(b.publish().unwrap_err(), PublishError::Unchanged);
        let a = b.add_next_hop(resolved(1, 0xa)).unwrap();
        b.set_route_v4(p4("10.0.0.0/8"), RouteTarget::NextHop(a))
            .unwrap();
        drop(empty); // the lcores returned it
        let one = b.publish().unwrap();
        assert_eq!(one.generation(), 1);
        assert_eq!(nh(&one, "10.1.2.3"), Some(resolved(1, 0xa)));
        // While `one` is read, the next change goes to the other copy.
        b.set_route_v4(
            p4("10.1.0.0/16"),
            RouteTarget::NextHop(NextHopId::BLACKHOLE),
        )
        .unwrap();
        let two = b.publish().unwrap();
        assert_eq!(nh(&two, "10.1.2.3"), Some(NextHop::Blackhole));
        assert_eq!(
            nh(&one, "10.1.2.3"),
            Some(resolved(1, 0xa)),
            "old snapshot unchanged"
        );
        // `one` is the spare now and still held: no third copy is made.
        b.remove_route_v4(p4("10.1.0.0/16"));
        assert_eq!(b.publish().unwrap_err(), PublishError::SpareInUse);
        drop(one);
        let three = b.publish().unwrap();
        assert_eq!(three.generation(), 3);
        // `three` caught up with both changes it missed (the /16 added, then removed).
        assert_eq!(nh(&three, "10.1.2.3"), Some(resolved(1, 0xa)));
        assert_eq!(nh(&three, "11.0.0.1"), None);
        // A next hop change needs no route change.
        drop(two);
        b.set_next_hop(a, resolved(2, 0xb)).unwrap();
        let four = b.publish().unwrap();
        assert_eq!(nh(&four, "10.1.2.3"), Some(resolved(2, 0xb)));
        assert_eq!(b.stats().publications, 4);
        assert_eq!(b.stats().full_rebuilds, 0);
    }

    #[test]
    fn uses_are_counted_and_in_use_objects_refused() {
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let a = b.add_next_hop(resolved(1, 1)).unwrap();
        let c = b.add_next_hop(resolved(2, 2)).unwrap();
        let g = b
            .add_ecmp_group(&[EcmpMember::new(a), EcmpMember::new(c)], None)
            .unwrap();
        b.set_route_v4(p4("0.0.0.0/0"), RouteTarget::Ecmp(g))
            .unwrap();
        assert_eq!(b.remove_next_hop(a), Err(FibError::InUse));
        assert_eq!(b.remove_ecmp_group(g), Err(FibError::InUse));
        assert_eq!(
            b.set_next_hop(NextHopId::LOCAL, NextHop::Kernel),
            Err(FibError::FixedNextHop)
        );
        assert_eq!(
            b.add_ecmp_group(&[EcmpMember::new(a), EcmpMember::new(a)], None),
            Err(FibError::BadMembers)
        );
        assert_eq!(
            b.add_ecmp_group(&[EcmpMember::new(NextHopId::LOCAL)], None),
            Err(FibError::BadMembers)
        );
        assert_eq!(b.stats().refused, 5);
        // Replacing the route releases the group; removing the group releases its members.
        b.set_route_v4(p4("0.0.0.0/0"), RouteTarget::NextHop(c))
            .unwrap();
        assert_eq!(b.ecmp_group_routes(g), Some(0));
        b.remove_ecmp_group(g).unwrap();
        b.remove_next_hop(a).unwrap();
        assert_eq!(b.next_hop_uses(c), Some(1));
        assert_eq!(
            b.remove_route_v4(p4("0.0.0.0/0")),
            Some(RouteTarget::NextHop(c))
        );
        b.remove_next_hop(c).unwrap();
        assert_eq!(b.next_hop_count(), 3);
        // Freed ids are reused.
        assert_eq!(b.add_next_hop(resolved(3, 3)).unwrap(), c);
    }

    #[test]
    fn capacities_are_enforced() {
        let config = FibConfig {
            max_ipv4_routes: 2,
            max_next_hops: 4,
            max_ecmp_groups: 1,
            max_ipv4_groups: 2,
            ..FibConfig::default()
        };
        let mut b = FibBuilder::new(config).unwrap();
        let a = b.add_next_hop(resolved(1, 1)).unwrap();
        assert_eq!(
            b.add_next_hop(resolved(1, 2)),
            Err(FibError::Full(FibTable::NextHops))
        );
        b.add_ecmp_group(&[EcmpMember::new(a)], None).unwrap();
        assert_eq!(
            b.add_ecmp_group(&[EcmpMember::new(a)], None),
            Err(FibError::Full(FibTable::EcmpGroups))
        );
        let t = RouteTarget::NextHop(a);
        // A /32 below a 16-bit first level may need 2 groups: one fits, a second does not.
        b.set_route_v4(p4("10.0.0.1/32"), t).unwrap();
        assert_eq!(
            b.set_route_v4(p4("10.9.0.1/32"), t),
            Err(FibError::Full(FibTable::Ipv4Groups))
        );
        b.set_route_v4(p4("10.0.0.0/8"), t).unwrap();
        assert_eq!(
            b.set_route_v4(p4("11.0.0.0/8"), t),
            Err(FibError::Full(FibTable::Ipv4Routes))
        );
        // Replacing an existing route is not a new one.
        b.set_route_v4(p4("10.0.0.0/8"), RouteTarget::NextHop(NextHopId::BLACKHOLE))
            .unwrap();
        let fib = b.publish().unwrap();
        assert_eq!(fib.v4.groups_in_use(), 2);
        assert!(FibBuilder::new(FibConfig {
            ipv4_top_bits: 20,
            ..FibConfig::default()
        })
        .is_err());
    }

    #[test]
    fn a_spare_that_lagged_past_the_log_is_rebuilt() {
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let a = b.add_next_hop(resolved(1, 1)).unwrap();
        b.set_route_v4(p4("10.0.0.0/8"), RouteTarget::NextHop(a))
            .unwrap();
        let one = b.publish().unwrap();
        // One publication with more than LOG_LIMIT changes while `one` is still read.
        for i in 0..(LOG_LIMIT as u32 / 2 + 1) {
            let p = Ipv4Prefix::new(Ipv4Addr::from(0x0a00_0000 | (i << 8)), 24).unwrap();
            b.set_route_v4(p, RouteTarget::NextHop(NextHopId::BLACKHOLE))
                .unwrap();
            b.remove_route_v4(p);
        }
        b.set_route_v4(p4("10.200.0.0/16"), RouteTarget::NextHop(NextHopId::KERNEL))
            .unwrap();
        let two = b.publish().unwrap();
        assert_eq!(nh(&two, "10.200.0.1"), Some(NextHop::Kernel));
        drop(one);
        b.set_route_v4(p4("10.201.0.0/16"), RouteTarget::NextHop(NextHopId::KERNEL))
            .unwrap();
        let three = b.publish().unwrap();
        assert_eq!(b.stats().full_rebuilds, 1);
        assert_eq!(nh(&three, "10.200.0.1"), Some(NextHop::Kernel));
        assert_eq!(nh(&three, "10.201.0.1"), Some(NextHop::Kernel));
        assert_eq!(nh(&three, "10.5.0.1"), Some(resolved(1, 1)));
    }

    #[test]
    fn ecmp_groups_resolve_by_flow_and_keep_buckets_on_change() {
        let mut b = FibBuilder::new(FibConfig::default()).unwrap();
        let ids: Vec<NextHopId> = (0..4)
            .map(|i| b.add_next_hop(resolved(i, i as u8)).unwrap())
            .collect();
        let members: Vec<EcmpMember> = ids.iter().map(|&i| EcmpMember::new(i)).collect();
        let g = b.add_ecmp_group(&members, None).unwrap();
        b.set_route_v4(p4("0.0.0.0/0"), RouteTarget::Ecmp(g))
            .unwrap();
        let fib = b.publish().unwrap();
        let target = fib.lookup_v4(Ipv4Addr::new(8, 8, 8, 8)).unwrap();
        let mut seen = [0; 4];
        for port in 0..400u16 {
            let flow = FlowKey::ipv4(
                Ipv4Addr::new(1, 1, 1, 1),
                Ipv4Addr::new(8, 8, 8, 8),
                17,
                port,
                4791,
            );
            let id = fib.resolve(target, || flow);
            seen[ids.iter().position(|&i| i == id).unwrap()] += 1;
        }
        assert!(seen.iter().all(|&c| c > 60), "{seen:?}");
        // A derived group (one path gone) keeps the other members' buckets.
        let before = b.ecmp_buckets(g).unwrap().to_vec();
        let g2 = b.add_ecmp_group(&members[..3], Some(g)).unwrap();
        let after = b.ecmp_buckets(g2).unwrap();
        assert!((0..128).all(|i| before[i] == after[i] || before[i] == ids[3]));
    }
}
