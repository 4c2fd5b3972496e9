//! Building a switch: the shared state, the ingress and egress sides, the rings between them,
//! and one [`LcoreStep`] per lcore of the layout ([`build`]).

use crate::egress::Egress;
use crate::fdb_sync::FdbSync;
use crate::frame::Frame;
use crate::ingress::Ingress;
use crate::params::{ParamsError, SwitchParams};
use crate::queue::{rings, PortConsumers};
use crate::shared::{Layout, Shared};
use crate::step::LcoreStep;
use crate::time::Instant;
use crate::types::{Priority, PRIORITY_COUNT};
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

/// Builds a switch laid out as `layout` at `now`: one step per entry of `layout.lcores`, in
/// that order, each holding the sides that lcore runs. They share one [`Shared`]
/// ([`LcoreStep::shared`]).
///
/// # Errors
/// When the parameters or the layout are inconsistent.
pub fn build<F: Frame>(
    params: SwitchParams,
    layout: Layout,
    now: Instant,
) -> Result<Vec<LcoreStep<F>>, ParamsError> {
    let shared = Shared::new(params, layout)?;
    let params = &shared.params;
    let ports = params.ports.len();
    let ins = shared.layout.ingress_sides();
    let outs = shared.layout.egress_sides();
    let lossless = lossless_queues(params);
    // rings[ingress side]: its producers `[port][queue]` and their consumers.
    let (producers, mut consumers): (Vec<_>, Vec<PortConsumers<F>>) =
        rings(ins, ports, params.queue_ring_frames as usize)
            .into_iter()
            .unzip();
    // Learn rings between every pair of ingress sides (none with one side).
    let syncs = FdbSync::for_sides(ins, ports, params.fdb_aging_ns);
    let mut ingress = producers
        .into_iter()
        .zip(syncs)
        .enumerate()
        .map(|(side, (prod, sync))| {
            Ingress::new(Arc::clone(&shared), side, prod, lossless.clone(), sync, now).map(Some)
        })
        .collect::<Result<Vec<_>, _>>()?;
    // Each egress side takes the consumers of the ports it owns, from every ingress side.
    let mut egress: Vec<Option<Egress<F>>> = (0..outs)
        .map(|side| {
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
            Some(Egress::new(Arc::clone(&shared), side, mine, &lossless, now))
        })
        .collect();
    let steps = shared
        .layout
        .lcores
        .iter()
        .map(|l| {
            LcoreStep::new(
                Arc::clone(&shared),
                l.ingress.and_then(|s| ingress[s].take()),
                l.egress.and_then(|s| egress[s].take()),
            )
        })
        .collect();
    Ok(steps)
}
