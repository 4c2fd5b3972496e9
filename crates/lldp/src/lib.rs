//! headroom-lldp: the switch's LLDP (IEEE 802.1AB-2016) and DCBX (IEEE 802.1Qaz) agent.
//!
//! Sans-IO, like the dataplane core: the driver passes time in and frames in and out; the agent
//! reads no clock and opens no socket ([`agent`] documents the one call order). It
//!
//! * builds each port's LLDPDU from the switch's configuration ([`local`]): chassis = switch MAC,
//!   port ID = port name, system name, and the 802.1Qaz ETS, PFC and Application Priority TLVs
//!   derived from the QoS maps, schedulers and `pfc_enable`;
//! * sends it on the 802.1AB timers (interval, hold, fast start, on change, shutdown);
//! * keeps a bounded neighbour table per port with TTL ageing, counting malformed frames by
//!   reason ([`peer`], [`agent::PortCounters`]);
//! * compares each peer's DCBX with ours ([`verdict::evaluate`], the same rules `headroom check`
//!   uses) and emits an event when a port's verdict changes.
//!
//! Frames are built and parsed by `headroom_wire::lldp`.
#![forbid(unsafe_code)]

pub mod agent;
pub mod local;
pub mod peer;
pub mod verdict;

pub use agent::{
    build_frame, Agent, Event, PortCounters, PortView, RemoveReason, RxError, Transmit,
    MAX_NEIGHBOURS_PER_PORT,
};
pub use local::{local_view, LocalDcbx, LocalPort, LocalSystem};
pub use peer::{ChassisId, Id, Neighbour, NeighbourId, NeighbourInfo, PeerDcbx, PortId};
pub use verdict::{evaluate, DcbxStatus, Finding, Verdict};
