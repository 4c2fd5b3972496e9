//! headroom-roce: the NIC side of a RoCEv2 fabric, as sans-IO state machines.
//!
//! Our traffic tool `rocegen` has to behave like an RDMA NIC on a lossless fabric without having
//! one. This crate holds the logic it needs, with no I/O, no clock, no thread and no allocation
//! after construction:
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
#![forbid(unsafe_code)]

pub mod dcqcn;
pub mod np;
pub mod pacer;
pub mod pause;
pub mod rc;
pub mod time;
