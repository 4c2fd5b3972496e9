//! rocegen: RoCEv2 RDMA WRITE traffic shaped like perftest (`ib_write_bw`, `ib_write_lat`), from
//! an emulated RoCE NIC on any Ethernet interface, for labs without RDMA hardware.
//!
//! * [`nic`]: the emulated NIC, sans-IO (RC transport, DCQCN, PFC honouring, emulated link): the
//!   crate `headroom-rnic`, which the simulator drives too;
//! * [`run`]: the out-of-band handshake, the single-threaded event loop over AF_PACKET, the
//!   workloads and the report;
//! * [`report`]: perftest's figures, the counters, the table and the JSON;
//! * [`cli`]: the command line; [`oob`]: the TCP exchange; [`flow`]: header derivations;
//!   [`sys`]: the few system calls made here.

pub mod cli;
pub mod flow;
pub mod nexthop;
pub use headroom_rnic as nic;
pub mod oob;
pub mod report;
pub mod run;
pub mod sys;
