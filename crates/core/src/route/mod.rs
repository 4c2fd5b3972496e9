//! Routing: the FIB the lcores read per packet, the next hops and ECMP groups it points to,
//! and the lock-free hand-over of new FIB snapshots from the control plane.
//!
//! * [`prefix`]: IPv4/IPv6 prefixes.
//! * [`lpm`]: longest-prefix match (a DIR-24-8 / DIR-16-8-8 multibit trie) and its rules.
//! * [`nexthop`]: next hops (resolved, unresolved, local, blackhole, kernel) and route targets.
//! * [`ecmp`]: the 5-tuple flow hash (seed, algorithm, rotation) and resilient bucket tables.
//! * [`fib`]: the immutable snapshot [`fib::Fib`] and the control plane's [`fib::FibBuilder`],
//!   which keeps two copies and repaints only what changed.
//! * [`swap`]: per-lcore SPSC rings that carry snapshots to an lcore and back.
//!
//! On the per-packet path: [`fib::Fib`]'s lookups and [`swap::FibReader`], read by the ingress
//! side's routed path (`route_forward`, attached with
//! [`crate::step::LcoreStep::attach_fib`]); the control plane that fills the builder from the
//! kernel is `headroom-linux-cp`.

pub mod ecmp;
pub mod fib;
pub mod lpm;
pub mod nexthop;
pub mod prefix;
pub mod swap;

pub use ecmp::{EcmpHash, EcmpHashAlgorithm, EcmpMember, FlowKey};
pub use fib::{Fib, FibBuilder, FibConfig, FibError, FibStats, FibTable, PublishError};
pub use nexthop::{EcmpGroupId, NextHop, NextHopId, RouteTarget};
pub use prefix::{Ipv4Prefix, Ipv6Prefix, PrefixError};
pub use swap::{fib_channel, FibReader, FibSender};
