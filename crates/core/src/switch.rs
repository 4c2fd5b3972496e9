//! Building a switch: the shared state, the ingress and egress sides, the rings between them;
//! and [`Switch`], both sides of every port on one thread (run to completion).
//!
//! # Call order (quinn-proto style)
//!
//! Per loop iteration, with `now` read once:
//! 1. for each port with received frames: [`Switch::handle_rx_burst`];
//! 2. [`Switch::handle_timeout`] (pulls released cells, PFC rate windows, watchdog polls);
//! 3. for each port: [`Switch::poll_tx_burst`] and transmit what it returns;
//! 4. [`Switch::poll_event`] until `None`;
//! 5. sleep (adaptive polling) at most until [`Switch::poll_timeout`].

use crate::egress::Egress;
use crate::events::Event;
use crate::fdb_sync::FdbSync;
use crate::frame::Frame;
use crate::ingress::{Ingress, PortConsumers, Queued};
use crate::params::{ParamsError, SwitchParams};
use crate::shared::{Layout, Shared};
use crate::time::Instant;
use crate::types::{PortId, Priority, PRIORITY_COUNT};
use rtrb::{Consumer, Producer, RingBuffer};
use std::sync::Arc;

/// Which queues are lossless: the targets of `pfc_to_queue` for priorities in `pfc_enable`.
/// They are never dropped at egress (back-pressure is PFC at ingress) and WRED never drops there.
#[must_use]
pub fn lossless_queues(params: &SwitchParams) -> Vec<[bool; PRIORITY_COUNT]> {
    params
        .ports
        .iter()
        .map(|p| {
            let mut l = [false; PRIORITY_COUNT];
            for prio in Priority::ALL {
                if p.pfc_enable.contains(prio) {
                    l[p.maps.pfc_to_queue[prio.index()].index()] = true;
                }
            }
            l
        })
        .collect()
}

/// The sides of a switch, ready to be moved onto their lcores.
pub struct Parts<F: Frame> {
    /// State every side and the control plane see.
    pub shared: Arc<Shared>,
    /// One per ingress side (`Layout::ingress_sides`).
    pub ingress: Vec<Ingress<F>>,
    /// One per egress side (`Layout::egress_sides`).
    pub egress: Vec<Egress<F>>,
}

impl<F: Frame> core::fmt::Debug for Parts<F> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Parts")
            .field("ingress", &self.ingress.len())
            .field("egress", &self.egress.len())
            .finish()
    }
}

/// Builds every side of a switch laid out as `layout`.
///
/// # Errors
/// When the parameters or the layout are inconsistent.
pub fn build<F: Frame>(
    params: SwitchParams,
    layout: Layout,
    now: Instant,
) -> Result<Parts<F>, ParamsError> {
    let shared = Shared::new(params, layout)?;
    let params = &shared.params;
    let ports = params.ports.len();
    let ins = shared.layout.ingress_sides();
    let outs = shared.layout.egress_sides();
    let capacity = params.queue_ring_frames as usize;
    let lossless = lossless_queues(params);
    // rings[ingress side][port][queue]
    let mut producers: Vec<Vec<[Producer<Queued<F>>; PRIORITY_COUNT]>> = Vec::with_capacity(ins);
    let mut consumers: Vec<PortConsumers<F>> = Vec::with_capacity(ins);
    for _ in 0..ins {
        let mut prod = Vec::with_capacity(ports);
        let mut cons = Vec::with_capacity(ports);
        for _ in 0..ports {
            let mut p: Vec<Producer<Queued<F>>> = Vec::with_capacity(PRIORITY_COUNT);
            let mut c: Vec<Consumer<Queued<F>>> = Vec::with_capacity(PRIORITY_COUNT);
            for _ in 0..PRIORITY_COUNT {
                let (tx, rx) = RingBuffer::new(capacity);
                p.push(tx);
                c.push(rx);
            }
            prod.push(p.try_into().unwrap_or_else(|_| unreachable!("eight rings")));
            let c: Vec<Option<_>> = c.into_iter().map(Some).collect();
            cons.push(c.try_into().unwrap_or_else(|_| unreachable!("eight rings")));
        }
        producers.push(prod);
        consumers.push(cons);
    }
    // Learn rings between every pair of ingress sides (none with one side).
    let syncs = FdbSync::for_sides(ins, ports, params.fdb_aging_ns);
    let ingress = producers
        .into_iter()
        .zip(syncs)
        .enumerate()
        .map(|(side, (prod, sync))| {
            Ingress::new(Arc::clone(&shared), side, prod, lossless.clone(), sync)
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Each egress side takes the consumers of the ports it owns, from every ingress side.
    let mut egress = Vec::with_capacity(outs);
    for side in 0..outs {
        let mine: Vec<PortConsumers<F>> = consumers
            .iter_mut()
            .map(|per_port| {
                per_port
                    .iter_mut()
                    .enumerate()
                    .map(|(p, qs)| {
                        if shared.layout.egress_side_of_port[p] == side {
                            core::array::from_fn(|q| qs[q].take())
                        } else {
                            core::array::from_fn(|_| None)
                        }
                    })
                    .collect()
            })
            .collect();
        egress.push(Egress::new(Arc::clone(&shared), side, mine, &lossless, now));
    }
    Ok(Parts {
        shared,
        ingress,
        egress,
    })
}

/// A whole switch on one thread: both sides of every port, run to completion.
#[derive(Debug)]
pub struct Switch<F: Frame> {
    shared: Arc<Shared>,
    ingress: Ingress<F>,
    egress: Egress<F>,
}

impl<F: Frame> Switch<F> {
    /// A switch with every port on one lcore.
    ///
    /// # Errors
    /// When the parameters are inconsistent.
    pub fn new(params: SwitchParams, now: Instant) -> Result<Self, ParamsError> {
        let ports = params.ports.len();
        let Parts {
            shared,
            mut ingress,
            mut egress,
        } = build(params, Layout::single(ports), now)?;
        let (Some(ingress), Some(egress)) = (ingress.pop(), egress.pop()) else {
            return Err(ParamsError("a switch needs at least one port".into()));
        };
        Ok(Self {
            shared,
            ingress,
            egress,
        })
    }

    /// State shared with the control plane (counters, boards, parameters).
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The ingress side.
    #[must_use]
    pub fn ingress(&self) -> &Ingress<F> {
        &self.ingress
    }

    /// The egress side.
    #[must_use]
    pub fn egress(&self) -> &Egress<F> {
        &self.egress
    }

    /// The egress side, mutable (big red switch).
    pub fn egress_mut(&mut self) -> &mut Egress<F> {
        &mut self.egress
    }

    /// Frames received on `port` at `now`; `frames` is left empty.
    pub fn handle_rx_burst(&mut self, now: Instant, port: PortId, frames: &mut Vec<F>) {
        self.ingress.handle_rx_burst(now, port, frames);
    }

    /// Time-driven work due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.ingress.handle_timeout(now);
        self.egress.handle_timeout(now);
    }

    /// Up to `max` frames to transmit on `port` (PFC first), appended to `out`. The cells they
    /// free reach the ingress accounting at once while some port asks for pause, else at the
    /// next [`Switch::handle_rx_burst`] or [`Switch::handle_timeout`] (see the body).
    pub fn poll_tx_burst(
        &mut self,
        now: Instant,
        port: PortId,
        out: &mut Vec<F>,
        max: usize,
        alloc: &mut impl FnMut(usize) -> Option<F>,
    ) -> usize {
        let n = self.egress.poll_tx_burst(now, port, out, max, alloc);
        // While some port asks for pause, cells released by this burst reach the accounting at
        // once, so that an XON they bring is in the wanted set for the very next poll (and
        // `poll_timeout`). While none does, a release cannot change any PFC frame (it can bring
        // XON, never XOFF): the pull waits for the next `handle_rx_burst` or `handle_timeout`,
        // which take every burst's releases in one pass instead of one pass per port.
        if self.ingress.releases_can_change_pfc() {
            self.ingress.handle_timeout(now);
        } else {
            self.ingress.handle_timeout_without_releases(now);
        }
        n
    }

    /// The next event for operators.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.shared.ingress_events[0]
            .pop()
            .or_else(|| self.shared.egress_events[0].pop())
    }

    /// When something is next due, if anything is.
    #[must_use]
    pub fn poll_timeout(&self, now: Instant) -> Option<Instant> {
        self.egress.poll_timeout(now)
    }

    /// Checks every accounting invariant.
    pub fn check_invariants(&self) {
        self.ingress.check_invariants();
    }
}
