//! The sans-IO dataplane core of headroom.
//!
//! This crate holds every decision a lossless Ethernet switch makes about a frame: classification
//! (PCP/DSCP → traffic class → priority group and queue), buffer accounting (pools, priority groups,
//! reserved/shared/headroom, static and dynamic thresholds), IEEE 802.1Qbb PFC generation and
//! reception, ECN marking, scheduling and the PFC watchdog.
//!
//! It is fully deterministic: it contains no I/O, never reads a clock (time is passed in as
//! [`time::Instant`]), spawns no thread and takes no lock; randomness comes from a seeded generator.
//! The runtime, the benchmarks, the simulator and the tests all drive it the same way: through
//! [`step::LcoreStep`], in the call order its module documents.
#![forbid(unsafe_code)]

pub mod buffer;
pub mod classify;
pub mod counters;
pub mod egress;
pub mod events;
pub mod fdb;
pub mod fdb_learning;
pub mod fdb_sync;
pub mod frame;
pub mod ingress;
pub mod inject;
#[cfg(all(test, loom))]
mod loom_checks;
pub mod params;
pub mod pfc;
pub mod punt;
pub mod queue;
pub mod route;
pub mod sched;
pub mod shared;
pub mod stats;
pub mod step;
pub mod storm_alarm;
pub mod switch;
pub(crate) mod sync;
pub mod time;
pub mod token_bucket;
pub mod types;
pub mod watchdog;
pub mod wred;
