//! The Linux AF_PACKET port backend.
//!
//! An [`AfPacketPort`] opens one Ethernet interface with two packet sockets:
//!
//! - **RX**: a memory-mapped receive ring (`PACKET_RX_RING`), bound to `ETH_P_ALL`,
//!   promiscuous (`PACKET_MR_PROMISC`), ignoring frames that leave the interface
//!   (`PACKET_IGNORE_OUTGOING`, plus a `PACKET_OUTGOING` check in the ring walk). `rx_burst`
//!   walks the ring, copies each frame into a [`headroom_io::PoolFrame`] (putting back the
//!   802.1Q/802.1ad tag the kernel strips into `tp_vlan_tci`), and returns ring space to the
//!   kernel as soon as it is read. It never blocks; [`AfPacketRx::wait_readable`] sleeps until
//!   the ring has a frame, for adaptive polling.
//! - **TX**: a plain packet socket bound with protocol 0 (it receives nothing), with
//!   `PACKET_QDISC_BYPASS`; `tx_burst` sends up to [`headroom_io::BURST_MAX`] frames per
//!   `sendmmsg(MSG_DONTWAIT)` straight from the frames' buffers.
//!
//! **Ring layout** ([`RingVersion`]): both TPACKET_V2 and TPACKET_V3 are implemented; V2 is the
//! default. V3 packs frames densely into blocks and checks one status word per block, but the
//! kernel hands a block over only when it is full or when its retire timer fires (at least
//! 1 ms): measured on a veth pair, a lone 64-byte frame waits a median 1000 µs with V3 and 2 µs
//! with V2 (see `examples/veth_throughput.rs`). A PFC PAUSE arriving on a quiet port must take
//! effect within the response the headroom was sized for (SONiC's headroom formula budgets the
//! peer's response as tens of KiB in flight; one extra millisecond is 1.25 MB at 10 Gb/s), so
//! V2 is the default. Single-core throughput on veth measured within noise of V3 (about
//! 0.6 Mframes/s at 64 B, 0.5 Mframes/s at 1500 B, sending and receiving on one thread). V3 remains
//! available for capture-like, throughput-only uses.
//!
//! Why `sendmmsg` for TX rather than a TX ring: frames are already in pool buffers, so
//! `sendmmsg` sends them without a copy into a ring, and a refused frame is reported per frame.
//!
//! Offloads: see [`offload`] for why TSO/GSO/GRO/TX checksum must be off on veth labs.
//!
//! [`AfPacketBackend`] opens ports by interface name for the runtime (headroom-io's `Backend`).
//!
//! Needs `CAP_NET_RAW` (and `CAP_NET_ADMIN` for [`offload::disable_offloads`]).

mod backend;
pub mod lab;
pub mod offload;
mod port;
mod ring;
mod stats;
mod sys;

pub use backend::AfPacketBackend;
pub use port::{AfPacketConfig, AfPacketError, AfPacketPort, AfPacketRx, AfPacketTx, RingVersion};
pub use stats::{AfPacketStats, AfPacketStatsHandle};

/// Whether `interface` (in the calling thread's network namespace) is up and running
/// (`IFF_UP` and `IFF_RUNNING`, which reflects the operational state, i.e. the carrier; the
/// 16-bit `SIOCGIFFLAGS` cannot carry `IFF_LOWER_UP`); `None` when it cannot be asked.
///
/// Asked through a socket rather than `/sys/class/net`, which shows the namespace sysfs was
/// mounted in, not the one the thread entered.
#[must_use]
pub fn link_up(interface: &str) -> Option<bool> {
    let socket = sys::control_socket().ok()?;
    let mut request = sys::InterfaceRequest::new(interface)?;
    let flags = request.flags(std::os::fd::AsFd::as_fd(&socket)).ok()?;
    Some(flags & libc::IFF_UP != 0 && flags & libc::IFF_RUNNING != 0)
}
