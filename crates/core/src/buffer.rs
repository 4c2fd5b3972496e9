//! Buffer accounting in cells: ingress priority groups and egress queues drawing from pools.
//!
//! The model is SAI's, as SONiC configures it (`sonic-buffer-model.md` §2). Decisions where the
//! sources leave room are written in `docs/buffer-model.md`; the short version:
//!
//! * **Ingress, per PG.** A frame's cells go to the PG's reserved buffer first; the remainder goes
//!   to the shared pool if the PG's shared use is below its limit (static: `static_th`; dynamic:
//!   α = 2^`dynamic_th` times the pool's free shared space, read when the frame arrives) and the
//!   pool has room for it; otherwise, for a lossless PG only, to headroom if the PG's headroom use
//!   stays within the profile's `xoff` and, when the pool has a shared headroom pool (SHP), the
//!   pool's headroom use stays within the SHP. Otherwise the frame is dropped whole.
//! * **Release** takes cells back from headroom first, then shared, then reserved.
//! * **XOFF** is asserted for a lossless PG when it holds headroom or its shared use reaches its
//!   limit; **XON** when it holds no headroom and its total use is at most
//!   `max(xon, xoff_point − xon_offset)` (only `xon` when `xon_offset` is 0, i.e. unset), where
//!   the XOFF point is reserved + shared limit.
//! * **Egress, per queue.** Use is one number; the part above the reserved size is shared. A
//!   lossy queue refuses a frame that would take shared buffer when its shared use is already at
//!   its limit or the pool has no room. A lossless queue never refuses: back-pressure is PFC at
//!   ingress.
//! * **Pool shared size** = pool size − Σ reserved sizes bound to the pool − (the SHP if it is
//!   set, else Σ `xoff` of the lossless PGs bound to it): headroom is always carved out, so that
//!   it exists when it is needed.

use crate::counters::DropReason;
use crate::params::{BufferProfile, ParamsError};
use crate::params::{PoolDirection, SwitchParams, Threshold};
use crate::types::PRIORITY_COUNT;
use core::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A shared-buffer limit in cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThresholdCells {
    /// Absolute cap; `u64::MAX` when the profile says 0 (no limit).
    Static(u64),
    /// α = 2^n of the pool's free shared cells.
    Dynamic(i8),
}

impl ThresholdCells {
    /// The limit given the pool's free shared cells.
    #[inline]
    #[must_use]
    pub fn limit(self, pool_free_cells: u64) -> u64 {
        match self {
            Self::Static(cells) => cells,
            Self::Dynamic(n) if n >= 0 => pool_free_cells.saturating_mul(1 << n),
            Self::Dynamic(n) => pool_free_cells >> n.unsigned_abs(),
        }
    }
}

/// A buffer profile in cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProfileCells {
    /// Pool index.
    pub pool: usize,
    /// Reserved cells.
    pub reserved: u64,
    /// Shared limit.
    pub threshold: ThresholdCells,
    /// Headroom cells (0: lossy).
    pub xoff: u64,
    /// XON threshold on total use, cells.
    pub xon: u64,
    /// XON offset below the XOFF point, cells (0: unset).
    pub xon_offset: u64,
}

impl ProfileCells {
    fn from_params(p: &BufferProfile, params: &SwitchParams) -> Self {
        Self {
            pool: p.pool.index(),
            reserved: params.cells(p.reserved_bytes),
            threshold: match p.threshold {
                Threshold::Static { bytes: 0 } => ThresholdCells::Static(u64::MAX),
                Threshold::Static { bytes } => ThresholdCells::Static(params.cells(bytes)),
                Threshold::Dynamic { exponent } => ThresholdCells::Dynamic(exponent),
            },
            xoff: params.cells(p.xoff_bytes),
            xon: params.cells(p.xon_bytes),
            xon_offset: params.cells(p.xon_offset_bytes),
        }
    }

    /// Whether the profile has headroom.
    #[must_use]
    pub const fn is_lossless(&self) -> bool {
        self.xoff > 0
    }

    /// The XOFF point (reserved + shared limit) given the pool's free shared cells.
    #[must_use]
    pub fn xoff_point(&self, pool_free_cells: u64) -> u64 {
        self.reserved
            .saturating_add(self.threshold.limit(pool_free_cells))
    }

    /// Total use at or below which XON is sent, given the pool's free shared cells.
    #[must_use]
    pub fn xon_point(&self, pool_free_cells: u64) -> u64 {
        if self.xon_offset == 0 {
            self.xon
        } else {
            self.xon.max(
                self.xoff_point(pool_free_cells)
                    .saturating_sub(self.xon_offset),
            )
        }
    }
}

/// Sizes of a pool in cells, derived from the parameters once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PoolCells {
    /// Ingress or egress.
    pub direction: PoolDirection,
    /// Cells shared by the PGs or queues bound to the pool.
    pub shared_size: u64,
    /// Shared headroom pool cells (0: private headroom per PG).
    pub shp_size: u64,
}

/// Computes every pool's shared size (the module doc's rule).
///
/// # Errors
/// When a pool is smaller than what is carved out of it.
pub fn pool_cells(params: &SwitchParams) -> Result<Vec<PoolCells>, ParamsError> {
    let mut carved = vec![0u64; params.pools.len()];
    for port in &params.ports {
        for pg in &port.pgs {
            let p = pg.pool.index();
            carved[p] += params.cells(pg.reserved_bytes);
            if params.pools[p].shared_headroom_bytes == 0 {
                carved[p] += params.cells(pg.xoff_bytes);
            }
        }
        for q in &port.queues {
            carved[q.profile.pool.index()] += params.cells(q.profile.reserved_bytes);
        }
    }
    params
        .pools
        .iter()
        .zip(carved)
        .map(|(pool, carved)| {
            let shp_size = params.cells(pool.shared_headroom_bytes);
            let size = params.cells(pool.size_bytes);
            let shared_size = size.checked_sub(carved + shp_size).ok_or_else(|| {
                ParamsError(format!(
                    "pool {}: {} cells are carved out of {} (reserved sizes and headroom bound to it)",
                    pool.name,
                    carved + shp_size,
                    size
                ))
            })?;
            Ok(PoolCells { direction: pool.direction, shared_size, shp_size })
        })
        .collect()
}

/// What each ingress side has taken from each pool, published for the other ingress sides.
///
/// Pools span ports; when several ingress sides (RX lcores) own different ports, each needs the
/// pool's total use to compute dynamic thresholds. Each side writes only its own slots.
#[derive(Debug)]
pub struct PoolBoard {
    pools: usize,
    /// `[side][pool]`: shared cells in use.
    shared: Vec<AtomicU64>,
    /// `[side][pool]`: shared-headroom cells in use.
    headroom: Vec<AtomicU64>,
    sides: usize,
}

impl PoolBoard {
    /// A board for `sides` ingress (or egress-accounting) sides and `pools` pools.
    #[must_use]
    pub fn new(sides: usize, pools: usize) -> Arc<Self> {
        let n = sides * pools;
        Arc::new(Self {
            pools,
            shared: (0..n).map(|_| AtomicU64::new(0)).collect(),
            headroom: (0..n).map(|_| AtomicU64::new(0)).collect(),
            sides,
        })
    }

    fn publish(&self, side: usize, pool: usize, shared: u64, headroom: u64) {
        // Relaxed: a stale value only makes another side's dynamic threshold slightly off for
        // one frame; nothing else is ordered by it.
        self.shared[side * self.pools + pool].store(shared, Ordering::Relaxed);
        self.headroom[side * self.pools + pool].store(headroom, Ordering::Relaxed);
    }

    #[inline]
    fn others(&self, side: usize, pool: usize) -> (u64, u64) {
        // One side: nobody else uses the pool.
        if self.sides == 1 && side == 0 {
            return (0, 0);
        }
        let mut shared = 0u64;
        let mut headroom = 0u64;
        for s in (0..self.sides).filter(|&s| s != side) {
            shared += self.shared[s * self.pools + pool].load(Ordering::Relaxed);
            headroom += self.headroom[s * self.pools + pool].load(Ordering::Relaxed);
        }
        (shared, headroom)
    }

    /// Total shared and headroom cells in use in `pool`, over all sides.
    #[must_use]
    pub fn total(&self, pool: usize) -> (u64, u64) {
        let (s, h) = self.others(usize::MAX, pool);
        (s, h)
    }
}

/// Occupancy of one ingress priority group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PgState {
    /// Cells held in the PG's reserved buffer.
    pub reserved_used: u64,
    /// Cells held in the pool's shared buffer.
    pub shared_used: u64,
    /// Cells held in headroom (after XOFF).
    pub headroom_used: u64,
    /// Whether the PG currently asks for PFC XOFF.
    pub xoff: bool,
}

impl PgState {
    /// All cells the PG holds.
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.reserved_used + self.shared_used + self.headroom_used
    }
}

/// Ingress pool occupancy of this side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolUse {
    /// Shared cells in use by this side's PGs (or queues).
    pub shared_used: u64,
    /// Headroom cells in use by this side's PGs (counted against the SHP when there is one).
    pub headroom_used: u64,
}

/// Ingress buffer accounting for the ports one ingress side owns.
#[derive(Debug)]
pub struct IngressBuffers {
    profiles: Vec<[ProfileCells; PRIORITY_COUNT]>,
    pgs: Vec<[PgState; PRIORITY_COUNT]>,
    pools: Vec<PoolCells>,
    pool_use: Vec<PoolUse>,
    board: Arc<PoolBoard>,
    side: usize,
}

/// An XOFF or XON transition of a PG.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PgTransition {
    /// The PG started asking for pause.
    Xoff,
    /// The PG stopped asking for pause.
    Xon,
}

impl IngressBuffers {
    /// Accounting for every port of `params` (only the owned ones are ever touched), as side
    /// `side` of `board`.
    ///
    /// # Errors
    /// When pools are too small for what is carved out of them.
    pub fn new(
        params: &SwitchParams,
        board: Arc<PoolBoard>,
        side: usize,
    ) -> Result<Self, ParamsError> {
        let pools = pool_cells(params)?;
        Ok(Self {
            profiles: params
                .ports
                .iter()
                .map(|p| p.pgs.map(|pg| ProfileCells::from_params(&pg, params)))
                .collect(),
            pgs: vec![[PgState::default(); PRIORITY_COUNT]; params.ports.len()],
            pool_use: vec![PoolUse::default(); pools.len()],
            pools,
            board,
            side,
        })
    }

    /// The PG's state.
    #[must_use]
    pub fn pg(&self, port: usize, pg: usize) -> &PgState {
        &self.pgs[port][pg]
    }

    /// The PG's profile in cells.
    #[must_use]
    pub fn profile(&self, port: usize, pg: usize) -> &ProfileCells {
        &self.profiles[port][pg]
    }

    /// A pool's sizes.
    #[must_use]
    pub fn pool(&self, pool: usize) -> &PoolCells {
        &self.pools[pool]
    }

    /// This side's use of a pool.
    #[must_use]
    pub fn pool_use(&self, pool: usize) -> &PoolUse {
        &self.pool_use[pool]
    }

    /// Shared and headroom cells of `pool` in use by every side.
    #[must_use]
    pub fn pool_use_total(&self, pool: usize) -> (u64, u64) {
        let (s, h) = self.board.others(self.side, pool);
        let own = self.pool_use[pool];
        (s + own.shared_used, h + own.headroom_used)
    }

    /// Free shared cells of a pool, over every side.
    #[must_use]
    pub fn pool_free(&self, pool: usize) -> u64 {
        self.pools[pool]
            .shared_size
            .saturating_sub(self.pool_use_total(pool).0)
    }

    /// Admits a frame of `cells` cells to `(port, pg)` or says why not. On success the cells are
    /// charged; on refusal nothing is.
    ///
    /// # Errors
    /// [`DropReason::IngressLossyLimit`] or [`DropReason::IngressHeadroomExhausted`].
    #[inline]
    pub fn admit(&mut self, port: usize, pg: usize, cells: u64) -> Result<(), DropReason> {
        let profile = self.profiles[port][pg];
        let state = self.pgs[port][pg];
        let from_reserved = cells.min(profile.reserved - state.reserved_used);
        let rest = cells - from_reserved;
        let mut to_shared = 0;
        let mut to_headroom = 0;
        if rest > 0 {
            let (pool_shared, pool_headroom) = self.pool_use_total(profile.pool);
            let pool = self.pools[profile.pool];
            let free = pool.shared_size.saturating_sub(pool_shared);
            if state.shared_used < profile.threshold.limit(free) && rest <= free {
                to_shared = rest;
            } else if !profile.is_lossless() {
                return Err(DropReason::IngressLossyLimit);
            } else if state.headroom_used + rest > profile.xoff
                || (pool.shp_size > 0 && pool_headroom + rest > pool.shp_size)
            {
                return Err(DropReason::IngressHeadroomExhausted);
            } else {
                to_headroom = rest;
            }
        }
        let state = &mut self.pgs[port][pg];
        state.reserved_used += from_reserved;
        state.shared_used += to_shared;
        state.headroom_used += to_headroom;
        if to_shared + to_headroom > 0 {
            let used = &mut self.pool_use[profile.pool];
            used.shared_used += to_shared;
            used.headroom_used += to_headroom;
            self.board.publish(
                self.side,
                profile.pool,
                used.shared_used,
                used.headroom_used,
            );
        }
        Ok(())
    }

    /// Gives back `cells` cells of a frame that leaves `(port, pg)`: headroom first, then shared,
    /// then reserved.
    #[inline]
    pub fn release(&mut self, port: usize, pg: usize, cells: u64) {
        let pool = self.profiles[port][pg].pool;
        let state = &mut self.pgs[port][pg];
        debug_assert!(
            cells <= state.total(),
            "releasing {cells} cells of a PG holding {}",
            state.total()
        );
        let from_headroom = cells.min(state.headroom_used);
        let from_shared = (cells - from_headroom).min(state.shared_used);
        let from_reserved = (cells - from_headroom - from_shared).min(state.reserved_used);
        state.headroom_used -= from_headroom;
        state.shared_used -= from_shared;
        state.reserved_used -= from_reserved;
        if from_headroom + from_shared > 0 {
            let used = &mut self.pool_use[pool];
            used.headroom_used -= from_headroom;
            used.shared_used -= from_shared;
            self.board
                .publish(self.side, pool, used.shared_used, used.headroom_used);
        }
    }

    /// Re-evaluates XOFF/XON of a lossless PG against the current pool state; returns the
    /// transition, if any. Lossy PGs never transition.
    #[inline]
    pub fn update_xoff(&mut self, port: usize, pg: usize) -> Option<PgTransition> {
        let profile = self.profiles[port][pg];
        if !profile.is_lossless() {
            return None;
        }
        let free = self.pool_free(profile.pool);
        let state = &mut self.pgs[port][pg];
        if !state.xoff {
            if state.headroom_used > 0 || state.shared_used >= profile.threshold.limit(free) {
                state.xoff = true;
                return Some(PgTransition::Xoff);
            }
        } else if state.headroom_used == 0 && state.total() <= profile.xon_point(free) {
            state.xoff = false;
            return Some(PgTransition::Xon);
        }
        None
    }

    /// Checks the accounting's internal consistency; panics with a description when broken.
    pub fn check_invariants(&self) {
        let mut per_pool = vec![PoolUse::default(); self.pools.len()];
        for (port, (pgs, profiles)) in self.pgs.iter().zip(&self.profiles).enumerate() {
            for (pg, (s, p)) in pgs.iter().zip(profiles).enumerate() {
                assert!(
                    s.reserved_used <= p.reserved,
                    "port {port} pg {pg}: reserved over size: {s:?} {p:?}"
                );
                assert!(
                    s.headroom_used <= p.xoff,
                    "port {port} pg {pg}: headroom over xoff: {s:?} {p:?}"
                );
                assert!(
                    s.shared_used == 0 && s.headroom_used == 0 || s.reserved_used == p.reserved,
                    "port {port} pg {pg}: shared or headroom used before reserved is full: {s:?} {p:?}"
                );
                assert!(
                    p.is_lossless() || !s.xoff,
                    "port {port} pg {pg}: lossy PG in XOFF"
                );
                per_pool[p.pool].shared_used += s.shared_used;
                per_pool[p.pool].headroom_used += s.headroom_used;
            }
        }
        for (i, (computed, kept)) in per_pool.iter().zip(&self.pool_use).enumerate() {
            assert_eq!(
                computed, kept,
                "pool {i}: per-PG sum differs from the pool's count"
            );
            let pool = &self.pools[i];
            if pool.shp_size > 0 {
                assert!(
                    kept.headroom_used <= pool.shp_size,
                    "pool {i}: SHP over size"
                );
            }
        }
    }

    /// Whether every PG of every port holds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pgs.iter().flatten().all(|s| s.total() == 0)
            && self.pool_use.iter().all(|u| *u == PoolUse::default())
    }
}

/// Egress queue accounting (the share of the queues fed by one ingress side).
#[derive(Debug)]
pub struct EgressBuffers {
    profiles: Vec<[ProfileCells; PRIORITY_COUNT]>,
    lossless: Vec<[bool; PRIORITY_COUNT]>,
    used: Vec<[u64; PRIORITY_COUNT]>,
    pools: Vec<PoolCells>,
    pool_use: Vec<u64>,
    board: Arc<PoolBoard>,
    side: usize,
}

impl EgressBuffers {
    /// Accounting for every queue of `params`, as side `side` of `board`. `lossless[port][q]`
    /// marks queues that must never be dropped at egress.
    ///
    /// # Errors
    /// When pools are too small for what is carved out of them.
    pub fn new(
        params: &SwitchParams,
        lossless: Vec<[bool; PRIORITY_COUNT]>,
        board: Arc<PoolBoard>,
        side: usize,
    ) -> Result<Self, ParamsError> {
        let pools = pool_cells(params)?;
        Ok(Self {
            profiles: params
                .ports
                .iter()
                .map(|p| {
                    p.queues
                        .map(|q| ProfileCells::from_params(&q.profile, params))
                })
                .collect(),
            lossless,
            used: vec![[0; PRIORITY_COUNT]; params.ports.len()],
            pool_use: vec![0; pools.len()],
            pools,
            board,
            side,
        })
    }

    /// Cells this side holds in `(port, queue)`.
    #[must_use]
    pub fn used(&self, port: usize, queue: usize) -> u64 {
        self.used[port][queue]
    }

    /// The pool `(port, queue)` draws from.
    #[must_use]
    pub fn queue_pool(&self, port: usize, queue: usize) -> usize {
        self.profiles[port][queue].pool
    }

    /// Shared cells of `pool` in use by this side's queues.
    #[must_use]
    pub fn pool_use(&self, pool: usize) -> u64 {
        self.pool_use[pool]
    }

    /// Shared cells of `pool` in use by every side.
    #[must_use]
    pub fn pool_use_total(&self, pool: usize) -> u64 {
        self.board.others(self.side, pool).0 + self.pool_use[pool]
    }

    /// Admits `cells` cells to `(port, queue)`.
    ///
    /// # Errors
    /// [`DropReason::EgressQueueLimit`] for a lossy queue at its limit; lossless queues never
    /// refuse.
    #[inline]
    pub fn admit(&mut self, port: usize, queue: usize, cells: u64) -> Result<(), DropReason> {
        let profile = self.profiles[port][queue];
        let used = self.used[port][queue];
        let shared_before = used.saturating_sub(profile.reserved);
        let shared_after = (used + cells).saturating_sub(profile.reserved);
        let delta = shared_after - shared_before;
        if delta > 0 && !self.lossless[port][queue] {
            let free = self.pools[profile.pool]
                .shared_size
                .saturating_sub(self.pool_use_total(profile.pool));
            if shared_before >= profile.threshold.limit(free) || delta > free {
                return Err(DropReason::EgressQueueLimit);
            }
        }
        self.used[port][queue] = used + cells;
        if delta > 0 {
            self.pool_use[profile.pool] += delta;
            self.board
                .publish(self.side, profile.pool, self.pool_use[profile.pool], 0);
        }
        Ok(())
    }

    /// Gives back `cells` cells of a frame that left `(port, queue)`.
    #[inline]
    pub fn release(&mut self, port: usize, queue: usize, cells: u64) {
        let profile = self.profiles[port][queue];
        let used = self.used[port][queue];
        debug_assert!(
            cells <= used,
            "releasing {cells} cells of a queue holding {used}"
        );
        let after = used.saturating_sub(cells);
        let delta = used.saturating_sub(profile.reserved) - after.saturating_sub(profile.reserved);
        self.used[port][queue] = after;
        if delta > 0 {
            self.pool_use[profile.pool] -= delta;
            self.board
                .publish(self.side, profile.pool, self.pool_use[profile.pool], 0);
        }
    }

    /// Checks internal consistency; panics with a description when broken.
    pub fn check_invariants(&self) {
        let mut per_pool = vec![0u64; self.pools.len()];
        for (used, profiles) in self.used.iter().zip(&self.profiles) {
            for (u, p) in used.iter().zip(profiles) {
                per_pool[p.pool] += u.saturating_sub(p.reserved);
            }
        }
        assert_eq!(
            per_pool, self.pool_use,
            "egress pool use differs from the per-queue sum"
        );
    }

    /// Whether every queue is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.used.iter().flatten().all(|&u| u == 0) && self.pool_use.iter().all(|&u| u == 0)
    }
}

#[cfg(test)]
mod tests;
