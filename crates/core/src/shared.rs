//! The state the ingress and egress sides share: everything two lcores can both see.
//!
//! Every field has exactly one writer (named in its doc); see `docs/ARCHITECTURE.md`, "Where the
//! two sides meet".

use crate::buffer::PoolBoard;
use crate::counters::{Counter, EgressPortCounters, IngressPortCounters, PoolCounters};
use crate::events::EventLog;
use crate::params::{ParamsError, SwitchParams};
use crate::pfc::PfcBoard;
use crate::sync::{fence, AtomicBool, Ordering};
use crate::types::{PortId, PRIORITY_COUNT};
use crate::watchdog::MitigationBoard;
use std::sync::Arc;

/// Which side runs which port, and which sides run together on one lcore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// For each port, the ingress side (RX lcore) that receives on it.
    pub ingress_side_of_port: Vec<usize>,
    /// For each port, the egress side (TX lcore) that transmits on it.
    pub egress_side_of_port: Vec<usize>,
    /// The lcores, in order: the sides each one runs ([`crate::switch::build`] makes one
    /// [`crate::step::LcoreStep`] per entry). Every side is run by exactly one lcore.
    pub lcores: Vec<LcoreSides>,
}

/// The sides one lcore runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LcoreSides {
    /// Its ingress side, if it receives on any port.
    pub ingress: Option<usize>,
    /// Its egress side, if it transmits on any port.
    pub egress: Option<usize>,
}

/// The ports one lcore receives and transmits on (see [`Layout::from_lcores`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LcorePorts {
    /// Ports whose receive side the lcore polls.
    pub rx: Vec<PortId>,
    /// Ports whose transmit side the lcore serves.
    pub tx: Vec<PortId>,
}

impl Layout {
    /// Every port on one ingress and one egress side, both on one lcore (run to completion).
    #[must_use]
    pub fn single(ports: usize) -> Self {
        Self {
            ingress_side_of_port: vec![0; ports],
            egress_side_of_port: vec![0; ports],
            lcores: vec![LcoreSides {
                ingress: Some(0),
                egress: Some(0),
            }],
        }
    }

    /// The layout of `lcores` over `ports` ports: every lcore that receives on a port gets the
    /// next ingress side, every lcore that transmits on one the next egress side, in lcore
    /// order.
    ///
    /// # Errors
    /// A port that does not exist, is received (or transmitted) by two lcores, or by none.
    pub fn from_lcores(ports: usize, lcores: &[LcorePorts]) -> Result<Self, ParamsError> {
        let mut ingress = vec![usize::MAX; ports];
        let mut egress = vec![usize::MAX; ports];
        let mut sides = Vec::with_capacity(lcores.len());
        let (mut ins, mut outs) = (0, 0);
        for l in lcores {
            let assign = |list: &[PortId], slots: &mut [usize], n: &mut usize, what: &str| {
                if list.is_empty() {
                    return Ok(None);
                }
                for p in list {
                    let slot = slots
                        .get_mut(p.index())
                        .ok_or_else(|| ParamsError(format!("{p} does not exist")))?;
                    if *slot != usize::MAX {
                        return Err(ParamsError(format!("{p} is {what} by two lcores")));
                    }
                    *slot = *n;
                }
                *n += 1;
                Ok(Some(*n - 1))
            };
            let ingress_side = assign(&l.rx, &mut ingress, &mut ins, "received")?;
            let egress_side = assign(&l.tx, &mut egress, &mut outs, "transmitted")?;
            sides.push(LcoreSides {
                ingress: ingress_side,
                egress: egress_side,
            });
        }
        if let Some(p) = ingress.iter().chain(&egress).position(|s| *s == usize::MAX) {
            return Err(ParamsError(format!(
                "port {} has no lcore for one direction",
                p % ports.max(1)
            )));
        }
        Ok(Self {
            ingress_side_of_port: ingress,
            egress_side_of_port: egress,
            lcores: sides,
        })
    }

    /// Number of ingress sides.
    #[must_use]
    pub fn ingress_sides(&self) -> usize {
        self.ingress_side_of_port.iter().max().map_or(0, |m| m + 1)
    }

    /// Number of egress sides.
    #[must_use]
    pub fn egress_sides(&self) -> usize {
        self.egress_side_of_port.iter().max().map_or(0, |m| m + 1)
    }

    /// Ports whose receive side is `side`.
    #[must_use]
    pub fn ingress_ports(&self, side: usize) -> Vec<PortId> {
        ports_of(&self.ingress_side_of_port, side)
    }

    /// Ports whose transmit side is `side`.
    #[must_use]
    pub fn egress_ports(&self, side: usize) -> Vec<PortId> {
        ports_of(&self.egress_side_of_port, side)
    }

    fn validate(&self, ports: usize) -> Result<(), ParamsError> {
        if self.ingress_side_of_port.len() != ports || self.egress_side_of_port.len() != ports {
            return Err(ParamsError(format!(
                "layout names {} ports, the switch has {ports}",
                self.ingress_side_of_port.len()
            )));
        }
        for (what, sides, n, on_lcores) in [
            (
                "ingress",
                &self.ingress_side_of_port,
                self.ingress_sides(),
                self.lcores
                    .iter()
                    .filter_map(|l| l.ingress)
                    .collect::<Vec<_>>(),
            ),
            (
                "egress",
                &self.egress_side_of_port,
                self.egress_sides(),
                self.lcores
                    .iter()
                    .filter_map(|l| l.egress)
                    .collect::<Vec<_>>(),
            ),
        ] {
            if let Some(idle) = (0..n).find(|s| !sides.contains(s)) {
                return Err(ParamsError(format!("{what} side {idle} owns no port")));
            }
            for side in 0..n {
                let runs = on_lcores.iter().filter(|s| **s == side).count();
                if runs != 1 {
                    return Err(ParamsError(format!(
                        "{what} side {side} is run by {runs} lcores (needs exactly one)"
                    )));
                }
            }
            if let Some(extra) = on_lcores.iter().find(|s| **s >= n) {
                return Err(ParamsError(format!(
                    "an lcore runs {what} side {extra}, which owns no port"
                )));
            }
        }
        Ok(())
    }
}

fn ports_of(sides: &[usize], side: usize) -> Vec<PortId> {
    sides
        .iter()
        .enumerate()
        .filter(|(_, s)| **s == side)
        .map(|(p, _)| PortId(u16::try_from(p).unwrap_or(u16::MAX)))
        .collect()
}

/// Counters of one ingress side.
#[derive(Debug)]
pub struct IngressCounters {
    /// Per port (see [`IngressPortCounters`] for which entries this side writes).
    pub ports: Vec<IngressPortCounters>,
    /// Per pool watermarks of this side's PG use.
    pub pools: Vec<PoolCounters>,
    /// Per pool watermarks of this side's egress queue use.
    pub egress_pools: Vec<PoolCounters>,
    /// FDB updates (learns, refreshes, flushes) this side could not push into another ingress
    /// side's learn ring because it was full. Repaired: see `fdb_sync`.
    pub fdb_sync_overflow: Counter,
}

/// Counters of one egress side.
#[derive(Debug)]
pub struct EgressCounters {
    /// Per port (only the ports this side transmits on are written).
    pub ports: Vec<EgressPortCounters>,
    /// PFC watchdog statistics per port and queue.
    pub watchdog: Vec<[WatchdogStats; PRIORITY_COUNT]>,
}

/// SONiC's `show pfcwd stats` columns for one queue (written by the egress side owning it).
#[derive(Debug, Default)]
pub struct WatchdogStats {
    /// 1 while stormed.
    pub stormed: crate::counters::Gauge,
    /// Storms detected (`PFC_WD_QUEUE_STATS_DEADLOCK_DETECTED`).
    pub detected: Counter,
    /// Storms restored.
    pub restored: Counter,
    /// Frames the queue sent while stormed.
    pub tx_ok: Counter,
    /// Frames the queue dropped while stormed.
    pub tx_drop: Counter,
    /// Frames the port's PG of the same index admitted while stormed.
    pub rx_ok: Counter,
    /// Frames the port's PG of the same index dropped while stormed.
    pub rx_drop: Counter,
    /// The same four for the last storm only (zeroed at each detection).
    pub last_tx_ok: crate::counters::Gauge,
    /// See `last_tx_ok`.
    pub last_tx_drop: crate::counters::Gauge,
    /// See `last_tx_ok`.
    pub last_rx_ok: crate::counters::Gauge,
    /// See `last_tx_ok`.
    pub last_rx_drop: crate::counters::Gauge,
}

/// Cells given back by egress sides, pulled by ingress sides into their accounting.
///
/// # The protocol (model-checked: `loom_checks::releases`)
///
/// Every counter here has one writer, the egress side that sent (or dropped) the frame, and
/// only grows; the ingress side that charged the cells keeps what it has already pulled and takes
/// the difference. The egress side adds to the counters with relaxed stores while it polls, then
/// [`Releases::publish`]es: a release fence, then a bump of its generation. The ingress side's
/// [`Releases::pull_if_new`] loads the generations (relaxed) and, if one moved, issues an
/// acquire fence before the caller reads any counter. The two fences pair (C++ [atomics.fences]:
/// the relaxed load that read the bumped generation makes the release fence synchronise with the
/// acquire fence), so an ingress side that sees generation *g* sees every release counted before
/// *g* was published. Without the acquire a weak-memory CPU (arm64) may return older counter
/// values after the new generation: those releases are then pulled only at the next bump, which
/// never comes once the egress side goes idle, and a PG stays in XOFF with nothing queued (loom
/// finds exactly that; see `docs/memory-ordering.md`).
///
/// A counter read may also be *newer* than the generation (a release added after the last
/// publication): it is pulled early, which is harmless since each is monotonic and only the
/// difference is used. A stale read in the other direction (not yet seeing a release) errs on the
/// safe side: the ingress side sees more occupancy than there is and asserts XOFF early, never
/// late.
#[derive(Debug)]
pub(crate) struct Releases {
    ports: usize,
    ingress_sides: usize,
    /// Rows of `pg` per egress side: every port, then every ingress side's CPU pseudo-port
    /// (`inject::cpu_port_index`).
    pg_rows: usize,
    /// `[egress side][port][pg]`: cells released from ingress PGs (read by the port's ingress
    /// side; a CPU pseudo-port's, by the ingress side it belongs to).
    pg: Vec<Counter>,
    /// `[egress side][ingress side][port][queue]`: cells released from egress queue accounting
    /// (read by the ingress side that admitted them).
    queue: Vec<Counter>,
    /// `[egress side]`: bumped after every burst that released something.
    generation: Vec<Counter>,
}

impl Releases {
    pub(crate) fn new(egress_sides: usize, ingress_sides: usize, ports: usize) -> Self {
        let n = |k: usize| (0..k).map(|_| Counter::default()).collect::<Vec<_>>();
        let pg_rows = ports + ingress_sides;
        Self {
            ports,
            ingress_sides,
            pg_rows,
            pg: n(egress_sides * pg_rows * PRIORITY_COUNT),
            queue: n(egress_sides * ingress_sides * ports * PRIORITY_COUNT),
            generation: n(egress_sides),
        }
    }

    #[inline]
    pub(crate) fn pg(&self, egress_side: usize, port: usize, pg: usize) -> &Counter {
        &self.pg[(egress_side * self.pg_rows + port) * PRIORITY_COUNT + pg]
    }

    #[inline]
    pub(crate) fn queue(
        &self,
        egress_side: usize,
        ingress_side: usize,
        port: usize,
        q: usize,
    ) -> &Counter {
        &self.queue[((egress_side * self.ingress_sides + ingress_side) * self.ports + port)
            * PRIORITY_COUNT
            + q]
    }

    /// The eight PG release counters of `port` kept by `egress_side`, as one block: the ingress
    /// side's sync reads a port's PGs with one bounds check instead of eight.
    #[inline]
    pub(crate) fn pg_block(&self, egress_side: usize, port: usize) -> &[Counter; PRIORITY_COUNT] {
        block(&self.pg, egress_side * self.pg_rows + port)
    }

    /// Every PG release counter kept by `egress_side`, `[port][pg]` flattened (CPU
    /// pseudo-ports after the ports): taken once per egress poll so that a sent frame's counter
    /// is one index away.
    #[inline]
    pub(crate) fn pg_of(&self, egress_side: usize) -> &[Counter] {
        let n = self.pg_rows * PRIORITY_COUNT;
        &self.pg[egress_side * n..(egress_side + 1) * n]
    }

    /// The eight queue release counters of `port` kept by `egress_side` for `ingress_side`.
    #[inline]
    pub(crate) fn queue_block(
        &self,
        egress_side: usize,
        ingress_side: usize,
        port: usize,
    ) -> &[Counter; PRIORITY_COUNT] {
        block(
            &self.queue,
            (egress_side * self.ingress_sides + ingress_side) * self.ports + port,
        )
    }

    /// Egress side `egress_side` publishes the releases it has counted since its last call (the
    /// writer's half of the protocol above). Call after a poll that released something.
    #[inline]
    pub(crate) fn publish(&self, egress_side: usize) {
        // Release: orders every relaxed counter store before it ahead of the generation store
        // after it, for a reader whose acquire fence follows its load of this generation.
        fence(Ordering::Release);
        self.generation[egress_side].inc();
    }

    /// Whether some egress side has published releases since `seen`, without taking them: a
    /// hint for a driver that skips calls while a step is idle (the simulator). Relaxed loads
    /// and no fence: nothing is read on the strength of the answer; the pull that follows
    /// ([`Releases::pull_if_new`]) makes its own acquire.
    #[inline]
    pub(crate) fn published_since(&self, seen: &[u64]) -> bool {
        self.generation
            .iter()
            .zip(seen)
            .any(|(g, &seen)| g.get() != seen)
    }

    /// Whether some egress side has published releases since `seen` (one generation per egress
    /// side, brought up to date). When it returns true the caller must read the counters, and
    /// they show at least everything published up to the generations now in `seen` (the reader's
    /// half of the protocol above). Costs one relaxed load per egress side when nothing changed.
    #[inline]
    pub(crate) fn pull_if_new(&self, seen: &mut [u64]) -> bool {
        let mut changed = false;
        for (g, seen) in self.generation.iter().zip(seen.iter_mut()) {
            let g = g.get();
            if g != *seen {
                *seen = g;
                changed = true;
            }
        }
        if changed {
            // Acquire: pairs with the release fence of `publish` that preceded the generation
            // just read, so the counter loads that follow cannot return older values.
            fence(Ordering::Acquire);
        }
        changed
    }

    /// Cells released so far from each PG of `port`, summed over the egress sides (read after
    /// [`Releases::pull_if_new`] returned true).
    #[inline]
    pub(crate) fn pg_totals(&self, port: usize) -> [u64; PRIORITY_COUNT] {
        self.totals(|e| self.pg_block(e, port))
    }

    /// Cells released so far from each queue of `port` that `ingress_side` admitted, summed
    /// over the egress sides (read after [`Releases::pull_if_new`] returned true).
    #[inline]
    pub(crate) fn queue_totals(&self, ingress_side: usize, port: usize) -> [u64; PRIORITY_COUNT] {
        self.totals(|e| self.queue_block(e, ingress_side, port))
    }

    #[inline]
    fn totals<'a>(
        &'a self,
        block: impl Fn(usize) -> &'a [Counter; PRIORITY_COUNT],
    ) -> [u64; PRIORITY_COUNT] {
        let mut totals = block(0).each_ref().map(Counter::get);
        for e in 1..self.egress_sides() {
            for (t, c) in totals.iter_mut().zip(block(e)) {
                *t += c.get();
            }
        }
        totals
    }

    pub(crate) fn egress_sides(&self) -> usize {
        self.generation.len()
    }
}

/// Block `i` of eight consecutive counters.
#[inline]
fn block(counters: &[Counter], i: usize) -> &[Counter; PRIORITY_COUNT] {
    let start = i * PRIORITY_COUNT;
    counters[start..start + PRIORITY_COUNT]
        .try_into()
        .unwrap_or_else(|_| unreachable!("a range of PRIORITY_COUNT counters"))
}

/// Everything the sides of one switch share.
#[derive(Debug)]
pub struct Shared {
    /// The parameters the switch was built from.
    pub params: SwitchParams,
    /// Which side runs which port.
    pub layout: Layout,
    /// Received pause state and wanted XOFF sets (ingress writes, egress reads).
    pub pfc: PfcBoard,
    /// PFC watchdog mitigations (egress writes, ingress reads).
    pub mitigation: MitigationBoard,
    /// Per port: transmit enabled (SAI `PKT_TX_ENABLE`); written by the control plane only.
    pub tx_enable: Vec<AtomicBool>,
    /// Counters per ingress side.
    pub ingress_counters: Vec<IngressCounters>,
    /// Counters per egress side.
    pub egress_counters: Vec<EgressCounters>,
    /// `[ingress side × port][queue]`: bytes pushed into the ring towards the queue (ingress
    /// writes, egress reads to know the queue depth).
    ring_bytes_in: Vec<[Counter; PRIORITY_COUNT]>,
    /// `[ingress side × port][queue]`: bytes taken out of that ring (egress writes; the control
    /// plane reads the live depth as in − out).
    ring_bytes_out: Vec<[Counter; PRIORITY_COUNT]>,
    pub(crate) releases: Releases,
    pub(crate) ingress_pools: Arc<PoolBoard>,
    pub(crate) egress_pools: Arc<PoolBoard>,
    /// Events of the ingress sides (storm-rate alarms), one log per side.
    pub ingress_events: Vec<EventLog>,
    /// Events of the egress sides (watchdog), one log per side.
    pub egress_events: Vec<EventLog>,
}

impl Shared {
    pub(crate) fn new(params: SwitchParams, layout: Layout) -> Result<Arc<Self>, ParamsError> {
        params.validate()?;
        let ports = params.ports.len();
        layout.validate(ports)?;
        let (ins, outs) = (layout.ingress_sides(), layout.egress_sides());
        if ports + ins > usize::from(u16::MAX) + 1 {
            return Err(ParamsError(format!(
                "{ports} ports and {ins} ingress sides: a frame's port number (CPU pseudo-ports \
                 included) must fit in 16 bits"
            )));
        }
        let pools = params.pools.len();
        let pool_counters = || {
            (0..pools)
                .map(|_| PoolCounters::default())
                .collect::<Vec<_>>()
        };
        Ok(Arc::new(Self {
            pfc: PfcBoard::new(ports),
            mitigation: MitigationBoard::new(ports),
            tx_enable: params
                .ports
                .iter()
                .map(|p| AtomicBool::new(p.tx_enable))
                .collect(),
            ingress_counters: (0..ins)
                .map(|_| IngressCounters {
                    ports: (0..ports).map(|_| IngressPortCounters::default()).collect(),
                    pools: pool_counters(),
                    egress_pools: pool_counters(),
                    fdb_sync_overflow: Counter::default(),
                })
                .collect(),
            egress_counters: (0..outs)
                .map(|_| EgressCounters {
                    ports: (0..ports).map(|_| EgressPortCounters::default()).collect(),
                    watchdog: (0..ports).map(|_| Default::default()).collect(),
                })
                .collect(),
            ring_bytes_in: (0..ins * ports).map(|_| Default::default()).collect(),
            ring_bytes_out: (0..ins * ports).map(|_| Default::default()).collect(),
            releases: Releases::new(outs, ins, ports),
            ingress_pools: PoolBoard::new(ins, pools),
            egress_pools: PoolBoard::new(ins, pools),
            ingress_events: (0..ins).map(|_| EventLog::default()).collect(),
            egress_events: (0..outs).map(|_| EventLog::default()).collect(),
            params,
            layout,
        }))
    }

    /// Bytes ingress side `side` has pushed towards `(port, queue)` since start.
    #[inline]
    pub(crate) fn ring_bytes_in(&self, side: usize, port: usize, queue: usize) -> &Counter {
        &self.ring_bytes_in[side * self.params.ports.len() + port][queue % PRIORITY_COUNT]
    }

    /// Bytes the egress side has taken out of ingress side `side`'s ring towards
    /// `(port, queue)` since start.
    #[inline]
    pub(crate) fn ring_bytes_out(&self, side: usize, port: usize, queue: usize) -> &Counter {
        &self.ring_bytes_out[side * self.params.ports.len() + port][queue % PRIORITY_COUNT]
    }

    /// The ingress side that charged a frame received on `in_port` (a port, or an ingress
    /// side's CPU pseudo-port, `inject::cpu_port_index`).
    #[inline]
    pub(crate) fn ingress_side_of(&self, in_port: usize) -> usize {
        let ports = self.params.ports.len();
        if in_port < ports {
            self.layout.ingress_side_of_port[in_port]
        } else {
            in_port - ports
        }
    }

    /// Bytes waiting in `(port, queue)` now, over every ingress side's ring.
    #[must_use]
    pub fn queue_depth_bytes(&self, port: PortId, queue: usize) -> u64 {
        (0..self.layout.ingress_sides())
            .map(|side| {
                let i = self.ring_bytes_in(side, port.index(), queue).get();
                let o = self.ring_bytes_out(side, port.index(), queue).get();
                i.saturating_sub(o)
            })
            .sum()
    }

    /// Enables or disables transmission on a port (holds egress; buffers keep admitting).
    pub fn set_tx_enable(&self, port: PortId, enable: bool) {
        // Relaxed: the egress side reads it once per burst; a burst's delay is acceptable.
        self.tx_enable[port.index()].store(enable, Ordering::Relaxed);
    }

    /// Whether transmission on `port` is enabled.
    #[must_use]
    pub fn tx_enabled(&self, port: PortId) -> bool {
        self.tx_enable[port.index()].load(Ordering::Relaxed)
    }

    /// Total shared and headroom bytes in use in an ingress pool (all sides).
    #[must_use]
    pub fn ingress_pool_used_bytes(&self, pool: usize) -> (u64, u64) {
        let (s, h) = self.ingress_pools.total(pool);
        let cell = u64::from(self.params.cell_size_bytes);
        (s * cell, h * cell)
    }

    /// Total shared bytes in use in an egress pool (all sides).
    #[must_use]
    pub fn egress_pool_used_bytes(&self, pool: usize) -> u64 {
        self.egress_pools.total(pool).0 * u64::from(self.params.cell_size_bytes)
    }
}
