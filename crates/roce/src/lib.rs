//! headroom-roce: the NIC side of a RoCEv2 fabric, as sans-IO state machines.
//!
//! Our traffic tool `rocegen` has to behave like an RDMA NIC on a lossless fabric without having
//! one. This crate holds the logic it needs, with no I/O, no clock, no thread and no allocation
//! after construction (checked by `tests/no_alloc.rs` with a counting allocator):
//!
//! * [`dcqcn`]: the DCQCN reaction point (per-QP rate control on CNPs), paper and NVIDIA modes;
//! * [`np`]: the DCQCN notification point (CNP generation per flow, the paper's N-window rule);
//! * [`pacer`]: exact token buckets: the per-QP rate limiter and the emulated link serializer;
//! * [`pause`]: honouring received PFC and 802.3x PAUSE frames, per priority, with counters;
//! * [`rc`]: the RC transport for RDMA WRITE: requester (segmentation, window, go-back-N) and
//!   responder (PSN checks, NAKs, ACK coalescing, MSN);
//! * [`time`]: the [`Instant`](time::Instant) every state machine takes as `now`.
//!
//! Every state machine follows the quinn-proto shape: `handle_*` methods consume inputs,
//! `poll_*` methods produce outputs, `poll_timeout()` says when `handle_timeout(now)` must next be
//! called, and getters report state. Time is passed in; the same inputs always give the same
//! outputs.
//!
//! # Driver loop
//!
//! One iteration of a sender, at time `now` (see `tests/nic_loop.rs` for a complete one):
//!
//! 1. feed inputs: received CNPs to [`Rp::handle_cnp`](dcqcn::Rp::handle_cnp), PFC/PAUSE frames
//!    to [`PauseState`](pause::PauseState), ACKs to
//!    [`Requester::handle_ack`](rc::Requester::handle_ack); then `handle_timeout(now)` on the RP
//!    and the requester;
//! 2. copy [`Rp::current_rate_bps`](dcqcn::Rp::current_rate_bps) into the QP's
//!    [`Pacer`](pacer::Pacer);
//! 3. take a packet from [`Requester::poll_transmit`](rc::Requester::poll_transmit) and send it
//!    when [`Pacer::next_send_time`](pacer::Pacer::next_send_time) has come and its priority is
//!    not paused; report it with [`Pacer::on_send`](pacer::Pacer::on_send) and
//!    [`Rp::handle_tx`](dcqcn::Rp::handle_tx);
//! 4. sleep until the earliest of the `poll_timeout()`s, the pacer's next send time, the pause
//!    resume time and the next input.
//!
//! A receiver feeds data packets to [`Responder::handle_packet`](rc::Responder::handle_packet)
//! and CE marks to [`Np::handle_ce`](np::Np::handle_ce), and sends what
//! [`Responder::poll_ack`](rc::Responder::poll_ack) and [`Np::poll_cnp`](np::Np::poll_cnp) return.
#![forbid(unsafe_code)]

pub mod dcqcn;
pub mod np;
pub mod pacer;
pub mod pause;
pub mod rc;
pub mod time;
