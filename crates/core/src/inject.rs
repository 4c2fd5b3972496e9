//! Frames the control plane sends out of a port ("injected": LLDP, and later ARP, ND and the
//! host interfaces' traffic), through the same egress path as forwarded frames.
//!
//! [`crate::step::LcoreStep::inject`] hands a frame to an ingress side, which
//!
//! 1. rate-limits it (a token bucket per ingress side; the switch-wide [`InjectParams::limit`]
//!    is split evenly over the sides): over the rate → `inject_rate_limit`;
//! 2. classifies it like a frame *received* on the port it leaves by (that port's trust, PCP or
//!    DSCP → TC → queue), and leaves its bytes as the control plane built them (no VLAN
//!    tagging: the control plane owns the frame);
//! 3. charges its cells to the side's **CPU pseudo-port**: one lossy PG (PG 0 of row
//!    [`cpu_port_index`] in the side's [`crate::buffer::IngressBuffers`]) whose only buffer is
//!    a reserved size of [`InjectParams::buffer_bytes`], outside every configured pool (as a
//!    switch ASIC's CPU port has buffer of its own): full → `inject_buffer_full`;
//! 4. admits it to the egress queue like any frame (a lossy queue at its limit refuses it,
//!    `egress_queue_limit`; a lossless queue never refuses) and pushes it into the side's ring
//!    towards the queue (full → `queue_ring_full`); from there the egress side schedules, shapes,
//!    ECN-marks, counts and releases it as any other frame, the release going back to the CPU
//!    pseudo-port's PG.
//!
//! Injection can never cause a lossless drop of data traffic: it takes nothing from an ingress
//! pool (so no data PG's shared space, dynamic limit or headroom moves), and lossless egress
//! queues never refuse. What it shares with data is the egress queue's pool use (which only
//! lossy queues' limits read), the queue's ring slots (at most `buffer_bytes / cell size`
//! injected frames are queued at once) and link time (the scheduler and shaper treat it as the
//! queue's traffic).
//!
//! Each refusal is counted per port in `inject_drops` by reason (a queue's refusal also in the
//! port's `drops` and `queue_admission_drops`, as any frame its queues refuse: `TX_DRP`); what
//! was enqueued, in `inject_frames` and `inject_bytes` (the ingress side's counters of the port
//! the frame leaves by).

use crate::token_bucket::RateLimit;

/// The CPU pseudo-port of `ingress_side` in a switch of `ports` ports: the row of its PG in the
/// accounting and the `in_port` its injected frames carry ([`crate::queue::FrameMeta`]). Each
/// ingress side has its own, so that every release counter keeps a single writer and a single
/// reader.
#[must_use]
pub const fn cpu_port_index(ports: usize, ingress_side: usize) -> usize {
    ports + ingress_side
}

/// The inject path's limits (switch-wide; see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InjectParams {
    /// Frames per second and burst that may be injected.
    pub limit: RateLimit,
    /// Buffer of the CPU pseudo-port of each ingress side, bytes: what injected frames may hold
    /// at once in the egress queues.
    pub buffer_bytes: u64,
}

impl Default for InjectParams {
    /// 10 000 frames/s with bursts of 1 000 (a control plane's own protocols need far less),
    /// 128 KiB of buffer.
    fn default() -> Self {
        Self {
            limit: RateLimit {
                frames_per_second: 10_000,
                burst_frames: 1_000,
            },
            buffer_bytes: 128 * 1024,
        }
    }
}
