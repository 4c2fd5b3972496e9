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
use crate::sync::{AtomicU64, Ordering};
use crate::types::PRIORITY_COUNT;
use std::sync::Arc;

/// Cells per frame length: a shift when the cell size is a power of two (it always is in
/// practice), a division otherwise.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CellSize {
    /// Bytes per cell.
    pub(crate) bytes: u32,
    /// log2 of `bytes` if it is a power of two, else `u32::MAX`.
    shift: u32,
}

impl CellSize {
    pub(crate) fn new(bytes: u32) -> Self {
        Self {
            bytes,
            shift: if bytes.is_power_of_two() {
                bytes.trailing_zeros()
            } else {
                u32::MAX
            },
        }
    }

    /// Cells a frame of `len` bytes takes (rounded up).
    #[inline]
    pub(crate) fn cells(self, len: usize) -> u32 {
        let cells = if self.shift == u32::MAX {
            len.div_ceil(self.bytes as usize)
        } else {
            // A frame's length is far below `usize::MAX - bytes`: no overflow.
            (len + (self.bytes as usize - 1)) >> self.shift
        };
        u32::try_from(cells).unwrap_or(u32::MAX)
    }
}

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
///
/// # Memory ordering (model-checked: `loom_checks::pool_board`)
///
/// Relaxed stores and loads. A slot's words are levels with one writer, and a reader uses them
/// as numbers only (no other memory is read because of them), so what it relies on is coherence:
/// each word it reads is a level that side published, and never an older one after a newer one.
/// The two words of a slot are independent: a reader may see a side's new shared use with its
/// old headroom use; each bounds only its own limit (shared → the dynamic threshold and `free`,
/// headroom → the shared headroom pool), so a mixed pair is as good as two reads a moment apart.
///
/// A stale level errs one way or the other, and no ordering can fix either: it is a race
/// between two writers, which only a read-modify-write of a shared total (a locked instruction
/// per frame, against the one-writer rule) would remove. A side that does not yet see another
/// side's release sees less free space and admits less (the safe way). A side that does not yet
/// see another side's admission sees more free space than there is: concurrent admissions on
/// two sides can together take more than the pool's shared size, by what the other sides
/// admitted in the interval before their stores became visible to it. A lossless PG then
/// reaches its XOFF point that many cells late, which its headroom absorbs.
#[derive(Debug)]
pub struct PoolBoard {
    pools: usize,
    /// `[side][pool]`: cells in use.
    slots: Vec<BoardSlot>,
    sides: usize,
}

/// One side's use of one pool, as published.
#[derive(Debug, Default)]
struct BoardSlot {
    /// Shared cells in use.
    shared: AtomicU64,
    /// Shared-headroom cells in use.
    headroom: AtomicU64,
}

impl PoolBoard {
    /// A board for `sides` ingress (or egress-accounting) sides and `pools` pools.
    #[must_use]
    pub fn new(sides: usize, pools: usize) -> Arc<Self> {
        Arc::new(Self {
            pools,
            slots: (0..sides * pools).map(|_| BoardSlot::default()).collect(),
            sides,
        })
    }

    /// Side `side`'s seat at the board.
    pub(crate) fn seat(&self, side: usize) -> Seat {
        Seat {
            side,
            row: side * self.pools,
            alone: self.alone(side),
        }
    }

    #[inline]
    pub(crate) fn publish(&self, seat: Seat, pool: usize, shared: u64, headroom: u64) {
        // Relaxed: levels read as numbers only (see the type's docs).
        let slot = &self.slots[seat.row + pool];
        slot.shared.store(shared, Ordering::Relaxed);
        slot.headroom.store(headroom, Ordering::Relaxed);
    }

    /// Whether `side` is the board's only side (nobody else uses its pools).
    fn alone(&self, side: usize) -> bool {
        self.sides == 1 && side == 0
    }

    /// What every side but `seat`'s uses of `pool`.
    #[inline]
    pub(crate) fn others(&self, seat: Seat, pool: usize) -> (u64, u64) {
        // One side: nobody else uses the pool.
        if seat.alone {
            return (0, 0);
        }
        self.others_of(seat.side, pool)
    }

    /// What every side but `side` uses of `pool` (all of them for a side that is not one).
    fn others_of(&self, side: usize, pool: usize) -> (u64, u64) {
        let mut shared = 0u64;
        let mut headroom = 0u64;
        for s in (0..self.sides).filter(|&s| s != side) {
            let slot = &self.slots[s * self.pools + pool];
            // Relaxed: pairs with the relaxed stores of `publish` (see the type's docs).
            shared += slot.shared.load(Ordering::Relaxed);
            headroom += slot.headroom.load(Ordering::Relaxed);
        }
        (shared, headroom)
    }

    /// Total shared and headroom cells in use in `pool`, over all sides.
    #[must_use]
    pub fn total(&self, pool: usize) -> (u64, u64) {
        self.others_of(usize::MAX, pool)
    }
}

/// Where one side sits at a [`PoolBoard`], worked out once: its row of slots, and whether it
/// is the only side (then nobody else's use needs reading).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seat {
    side: usize,
    /// `side × pools`: the index of the side's slot of pool 0.
    row: usize,
    alone: bool,
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

/// A PG's profile next to its state: admission reads both, so they share a cache line or two
/// and one bounds check.
#[derive(Clone, Copy, Debug)]
struct PgSlot {
    profile: ProfileCells,
    state: PgState,
}

/// A pool's sizes next to this side's use of it.
#[derive(Clone, Copy, Debug)]
struct IngressPoolSlot {
    cells: PoolCells,
    used: PoolUse,
}

/// What an admitted frame left behind, for the caller's watermarks and gauges (read from the
/// accounting it just updated, instead of being looked up again).
#[derive(Clone, Copy, Debug)]
pub(crate) struct IngressAdmitted {
    /// The PG after admission.
    pub(crate) pg: PgState,
    /// The PG's pool.
    pub(crate) pool: usize,
    /// This side's use of that pool after admission.
    pub(crate) pool_use: PoolUse,
}

/// Ingress buffer accounting for the ports one ingress side owns.
#[derive(Debug)]
pub struct IngressBuffers {
    /// `[port][pg]`.
    pgs: Vec<[PgSlot; PRIORITY_COUNT]>,
    pools: Vec<IngressPoolSlot>,
    board: Arc<PoolBoard>,
    side: Seat,
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
    /// Accounting for every port of `params` (only the owned ones are ever touched) and for the
    /// CPU pseudo-port of every side of `board` (rows after the ports; only this side's is
    /// touched), as side `side` of `board`.
    ///
    /// # Errors
    /// When pools are too small for what is carved out of them.
    pub fn new(
        params: &SwitchParams,
        board: Arc<PoolBoard>,
        side: usize,
    ) -> Result<Self, ParamsError> {
        let pools = pool_cells(params)?;
        // The CPU pseudo-ports (one per side of the board, `inject::cpu_port_index`): a lossy
        // PG whose only buffer is its reserved size, outside every pool (`docs/buffer-model.md`).
        let cpu_pg = PgSlot {
            profile: ProfileCells {
                pool: 0,
                reserved: params.cells(params.inject.buffer_bytes),
                threshold: ThresholdCells::Static(0),
                xoff: 0,
                xon: 0,
                xon_offset: 0,
            },
            state: PgState::default(),
        };
        Ok(Self {
            pgs: params
                .ports
                .iter()
                .map(|p| {
                    p.pgs.map(|pg| PgSlot {
                        profile: ProfileCells::from_params(&pg, params),
                        state: PgState::default(),
                    })
                })
                .chain((0..board.sides).map(|_| [cpu_pg; PRIORITY_COUNT]))
                .collect(),
            pools: pools
                .into_iter()
                .map(|cells| IngressPoolSlot {
                    cells,
                    used: PoolUse::default(),
                })
                .collect(),
            side: board.seat(side),
            board,
        })
    }

    /// The PG's state.
    #[must_use]
    pub fn pg(&self, port: usize, pg: usize) -> &PgState {
        &self.pgs[port][pg].state
    }

    /// The PG's profile in cells.
    #[must_use]
    pub fn profile(&self, port: usize, pg: usize) -> &ProfileCells {
        &self.pgs[port][pg].profile
    }

    /// A pool's sizes.
    #[must_use]
    pub fn pool(&self, pool: usize) -> &PoolCells {
        &self.pools[pool].cells
    }

    /// This side's use of a pool.
    #[must_use]
    pub fn pool_use(&self, pool: usize) -> &PoolUse {
        &self.pools[pool].used
    }

    /// Shared and headroom cells of `pool` in use by every side.
    #[inline]
    #[must_use]
    pub fn pool_use_total(&self, pool: usize) -> (u64, u64) {
        let (s, h) = self.board.others(self.side, pool);
        let own = self.pools[pool].used;
        (s + own.shared_used, h + own.headroom_used)
    }

    /// Free shared cells of a pool, over every side.
    #[inline]
    #[must_use]
    pub fn pool_free(&self, pool: usize) -> u64 {
        self.pools[pool]
            .cells
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
        self.admit_frame(port, pg, cells).map(|_| ())
    }

    /// [`IngressBuffers::admit`], returning what the admission left behind. Always inlined:
    /// it runs once per frame, and inlined its result stays in registers.
    #[inline(always)]
    pub(crate) fn admit_frame(
        &mut self,
        port: usize,
        pg: usize,
        cells: u64,
    ) -> Result<IngressAdmitted, DropReason> {
        debug_assert!(pg < PRIORITY_COUNT, "PG {pg}");
        // Disjoint borrows: the PG's slot is updated in place while the pool is read.
        let Self {
            pgs,
            pools,
            board,
            side,
        } = self;
        let slot = &mut pgs[port][pg % PRIORITY_COUNT];
        let profile = &slot.profile;
        let state = &mut slot.state;
        let pool = &mut pools[profile.pool];
        let from_reserved = cells.min(profile.reserved - state.reserved_used);
        let rest = cells - from_reserved;
        let mut to_shared = 0;
        let mut to_headroom = 0;
        if rest > 0 {
            let (others_shared, others_headroom) = board.others(*side, profile.pool);
            let pool_shared = others_shared + pool.used.shared_used;
            let pool_headroom = others_headroom + pool.used.headroom_used;
            let free = pool.cells.shared_size.saturating_sub(pool_shared);
            if state.shared_used < profile.threshold.limit(free) && rest <= free {
                to_shared = rest;
            } else if !profile.is_lossless() {
                return Err(DropReason::IngressLossyLimit);
            } else if state.headroom_used + rest > profile.xoff
                || (pool.cells.shp_size > 0 && pool_headroom + rest > pool.cells.shp_size)
            {
                return Err(DropReason::IngressHeadroomExhausted);
            } else {
                to_headroom = rest;
            }
        }
        state.reserved_used += from_reserved;
        state.shared_used += to_shared;
        state.headroom_used += to_headroom;
        if to_shared + to_headroom > 0 {
            pool.used.shared_used += to_shared;
            pool.used.headroom_used += to_headroom;
            board.publish(
                *side,
                profile.pool,
                pool.used.shared_used,
                pool.used.headroom_used,
            );
        }
        Ok(IngressAdmitted {
            pg: *state,
            pool: profile.pool,
            pool_use: pool.used,
        })
    }

    /// Gives back `cells` cells of a frame that leaves `(port, pg)`: headroom first, then shared,
    /// then reserved.
    #[inline]
    pub fn release(&mut self, port: usize, pg: usize, cells: u64) {
        let Self {
            pgs,
            pools,
            board,
            side,
        } = self;
        release_pg(&mut pgs[port][pg], pools, board, *side, cells);
    }

    /// Gives back `cells[pg]` cells to each PG of `port` in `mask`, as [`IngressBuffers::release`]
    /// does, and returns what each of them holds afterwards and which of them are in XOFF (the
    /// pull of a whole port's releases, with the port looked up once).
    #[inline]
    pub(crate) fn release_port(
        &mut self,
        port: usize,
        cells: &[u64; PRIORITY_COUNT],
        mut mask: u8,
    ) -> ([u64; PRIORITY_COUNT], u8) {
        let Self {
            pgs,
            pools,
            board,
            side,
        } = self;
        let slots = &mut pgs[port];
        let mut totals = [0; PRIORITY_COUNT];
        let mut xoff = 0u8;
        while mask != 0 {
            let pg = mask.trailing_zeros() as usize % PRIORITY_COUNT;
            mask &= mask - 1;
            release_pg(&mut slots[pg], pools, board, *side, cells[pg]);
            totals[pg] = slots[pg].state.total();
            xoff |= u8::from(slots[pg].state.xoff) << pg;
        }
        (totals, xoff)
    }

    /// Re-evaluates XOFF/XON of a lossless PG against the current pool state; returns the
    /// transition, if any. Lossy PGs never transition. Always inlined: it follows every lossless
    /// admission, where the PG's state is still in registers.
    #[inline(always)]
    pub fn update_xoff(&mut self, port: usize, pg: usize) -> Option<PgTransition> {
        let PgSlot { profile, state } = &self.pgs[port][pg];
        if !profile.is_lossless() {
            return None;
        }
        // A static limit and XON point do not depend on the pool's free space: spare the read
        // of the pool (every side's use of it) when nothing needs it.
        let free = match profile.threshold {
            ThresholdCells::Static(_) => 0,
            ThresholdCells::Dynamic(_) => self.pool_free(profile.pool),
        };
        let transition = if !state.xoff {
            (state.headroom_used > 0 || state.shared_used >= profile.threshold.limit(free))
                .then_some(PgTransition::Xoff)
        } else {
            (state.headroom_used == 0 && state.total() <= profile.xon_point(free))
                .then_some(PgTransition::Xon)
        };
        if transition.is_some() {
            let state = &mut self.pgs[port][pg].state;
            state.xoff = !state.xoff;
        }
        transition
    }

    /// Checks the accounting's internal consistency; panics with a description when broken.
    pub fn check_invariants(&self) {
        let mut per_pool = vec![PoolUse::default(); self.pools.len()];
        for (port, slots) in self.pgs.iter().enumerate() {
            for (
                pg,
                PgSlot {
                    profile: p,
                    state: s,
                },
            ) in slots.iter().enumerate()
            {
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
        for (i, (computed, pool)) in per_pool.iter().zip(&self.pools).enumerate() {
            let kept = &pool.used;
            assert_eq!(
                computed, kept,
                "pool {i}: per-PG sum differs from the pool's count"
            );
            if pool.cells.shp_size > 0 {
                assert!(
                    kept.headroom_used <= pool.cells.shp_size,
                    "pool {i}: SHP over size"
                );
            }
        }
    }

    /// Whether every PG of every port holds nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.pgs.iter().flatten().all(|s| s.state.total() == 0)
            && self.pools.iter().all(|p| p.used == PoolUse::default())
    }
}

/// Gives back `cells` cells of one PG: headroom first, then shared, then reserved.
#[inline]
fn release_pg(
    slot: &mut PgSlot,
    pools: &mut [IngressPoolSlot],
    board: &PoolBoard,
    side: Seat,
    cells: u64,
) {
    let pool = slot.profile.pool;
    let state = &mut slot.state;
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
        let used = &mut pools[pool].used;
        used.headroom_used -= from_headroom;
        used.shared_used -= from_shared;
        board.publish(side, pool, used.shared_used, used.headroom_used);
    }
}

/// A queue's profile, kind and use, together (see [`PgSlot`]).
#[derive(Clone, Copy, Debug)]
struct QueueSlot {
    profile: ProfileCells,
    lossless: bool,
    used: u64,
}

/// A pool's sizes next to this side's shared use of it.
#[derive(Clone, Copy, Debug)]
struct EgressPoolSlot {
    cells: PoolCells,
    used: u64,
}

/// Gives back `cells` cells of one egress queue.
#[inline]
fn release_queue(
    slot: &mut QueueSlot,
    pools: &mut [EgressPoolSlot],
    board: &PoolBoard,
    side: Seat,
    cells: u64,
) {
    let reserved = slot.profile.reserved;
    let pool = slot.profile.pool;
    let used = slot.used;
    debug_assert!(
        cells <= used,
        "releasing {cells} cells of a queue holding {used}"
    );
    let after = used.saturating_sub(cells);
    let delta = used.saturating_sub(reserved) - after.saturating_sub(reserved);
    slot.used = after;
    if delta > 0 {
        let pool_used = &mut pools[pool].used;
        *pool_used -= delta;
        board.publish(side, pool, *pool_used, 0);
    }
}

/// What an admitted frame left behind in the egress accounting (see [`IngressAdmitted`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct EgressAdmitted {
    /// Cells this side holds in the queue after admission.
    pub(crate) used: u64,
    /// The queue's pool.
    pub(crate) pool: usize,
    /// This side's shared use of that pool after admission.
    pub(crate) pool_use: u64,
}

/// Egress queue accounting (the share of the queues fed by one ingress side).
#[derive(Debug)]
pub struct EgressBuffers {
    /// `[port][queue]`.
    queues: Vec<[QueueSlot; PRIORITY_COUNT]>,
    pools: Vec<EgressPoolSlot>,
    board: Arc<PoolBoard>,
    side: Seat,
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
            queues: params
                .ports
                .iter()
                .zip(lossless)
                .map(|(p, lossless)| {
                    core::array::from_fn(|q| QueueSlot {
                        profile: ProfileCells::from_params(&p.queues[q].profile, params),
                        lossless: lossless[q],
                        used: 0,
                    })
                })
                .collect(),
            pools: pools
                .into_iter()
                .map(|cells| EgressPoolSlot { cells, used: 0 })
                .collect(),
            side: board.seat(side),
            board,
        })
    }

    /// Cells this side holds in `(port, queue)`.
    #[must_use]
    pub fn used(&self, port: usize, queue: usize) -> u64 {
        self.queues[port][queue].used
    }

    /// The pool `(port, queue)` draws from.
    #[must_use]
    pub fn queue_pool(&self, port: usize, queue: usize) -> usize {
        self.queues[port][queue].profile.pool
    }

    /// Shared cells of `pool` in use by this side's queues.
    #[must_use]
    pub fn pool_use(&self, pool: usize) -> u64 {
        self.pools[pool].used
    }

    /// Shared cells of `pool` in use by every side.
    #[must_use]
    pub fn pool_use_total(&self, pool: usize) -> u64 {
        self.board.others(self.side, pool).0 + self.pools[pool].used
    }

    /// Admits `cells` cells to `(port, queue)`.
    ///
    /// # Errors
    /// [`DropReason::EgressQueueLimit`] for a lossy queue at its limit; lossless queues never
    /// refuse.
    #[inline]
    pub fn admit(&mut self, port: usize, queue: usize, cells: u64) -> Result<(), DropReason> {
        self.admit_frame(port, queue, cells).map(|_| ())
    }

    /// [`EgressBuffers::admit`], returning what the admission left behind (inlined like
    /// [`IngressBuffers::admit`]).
    #[inline(always)]
    pub(crate) fn admit_frame(
        &mut self,
        port: usize,
        queue: usize,
        cells: u64,
    ) -> Result<EgressAdmitted, DropReason> {
        debug_assert!(queue < PRIORITY_COUNT, "queue {queue}");
        let Self {
            queues,
            pools,
            board,
            side,
        } = self;
        let slot = &mut queues[port][queue % PRIORITY_COUNT];
        let profile = &slot.profile;
        let pool = &mut pools[profile.pool];
        let used = slot.used;
        let shared_before = used.saturating_sub(profile.reserved);
        let shared_after = (used + cells).saturating_sub(profile.reserved);
        let delta = shared_after - shared_before;
        if delta > 0 && !slot.lossless {
            let free = pool
                .cells
                .shared_size
                .saturating_sub(board.others(*side, profile.pool).0 + pool.used);
            if shared_before >= profile.threshold.limit(free) || delta > free {
                return Err(DropReason::EgressQueueLimit);
            }
        }
        slot.used = used + cells;
        if delta > 0 {
            pool.used += delta;
            board.publish(*side, profile.pool, pool.used, 0);
        }
        Ok(EgressAdmitted {
            used: slot.used,
            pool: profile.pool,
            pool_use: pool.used,
        })
    }

    /// Gives back `cells` cells of a frame that left `(port, queue)`.
    #[inline]
    pub fn release(&mut self, port: usize, queue: usize, cells: u64) {
        let Self {
            queues,
            pools,
            board,
            side,
        } = self;
        release_queue(&mut queues[port][queue], pools, board, *side, cells);
    }

    /// Gives back `cells[q]` cells to each queue of `port` in `mask` (see
    /// [`IngressBuffers::release_port`]).
    #[inline]
    pub(crate) fn release_port(
        &mut self,
        port: usize,
        cells: &[u64; PRIORITY_COUNT],
        mut mask: u8,
    ) {
        let Self {
            queues,
            pools,
            board,
            side,
        } = self;
        let slots = &mut queues[port];
        while mask != 0 {
            let q = mask.trailing_zeros() as usize % PRIORITY_COUNT;
            mask &= mask - 1;
            release_queue(&mut slots[q], pools, board, *side, cells[q]);
        }
    }

    /// Checks internal consistency; panics with a description when broken.
    pub fn check_invariants(&self) {
        let mut per_pool = vec![0u64; self.pools.len()];
        for slots in &self.queues {
            for s in slots {
                per_pool[s.profile.pool] += s.used.saturating_sub(s.profile.reserved);
            }
        }
        let kept: Vec<u64> = self.pools.iter().map(|p| p.used).collect();
        assert_eq!(
            per_pool, kept,
            "egress pool use differs from the per-queue sum"
        );
    }

    /// Whether every queue is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.queues.iter().flatten().all(|s| s.used == 0) && self.pools.iter().all(|p| p.used == 0)
    }
}

#[cfg(test)]
mod tests;
