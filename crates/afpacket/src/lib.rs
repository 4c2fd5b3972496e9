//! The Linux AF_PACKET port backend.
//!
//! An [`AfPacketPort`] opens one Ethernet interface with two packet sockets:
//!
//! - **RX**: a memory-mapped TPACKET_V3 ring (`PACKET_RX_RING`), bound to `ETH_P_ALL`,
//!   promiscuous (`PACKET_MR_PROMISC`), ignoring frames that leave the interface
//!   (`PACKET_IGNORE_OUTGOING`, plus a `PACKET_OUTGOING` check in the ring walk). `rx_burst`
//!   walks the ring's blocks, copies each frame into a [`headroom_io::PoolFrame`] (putting back
//!   the 802.1Q/802.1ad tag the kernel strips into `tp_vlan_tci`), and returns each block to the
//!   kernel as soon as it is read. It never blocks; [`AfPacketRx::wait_readable`] sleeps until
//!   the ring has a block, for adaptive polling.
//! - **TX**: a plain packet socket bound with protocol 0 (it receives nothing), with
//!   `PACKET_QDISC_BYPASS`; `tx_burst` sends up to [`headroom_io::BURST_MAX`] frames per
//!   `sendmmsg(MSG_DONTWAIT)` straight from the frames' buffers.
//!
//! Why TPACKET_V3 for RX: one status word per block instead of per frame, variable-size packing
//! (a 64-byte frame takes ~130 bytes of ring, not a fixed 2 KiB slot), and no per-frame system
//! call. Its cost is latency at low rates: the kernel hands a block over when it is full or when
//! its retire timer fires, so at low packet rates a frame can wait up to
//! [`AfPacketConfig::block_timeout_ms`] (default 1 ms). Why `sendmmsg` for TX rather than a
//! TX ring: frames are already in pool buffers, so `sendmmsg` sends them without a copy into a
//! ring, and a refused frame is reported per frame.
//!
//! Offloads: see [`offload`] for why TSO/GSO/GRO/TX checksum must be off on veth labs.
//!
//! Needs `CAP_NET_RAW` (and `CAP_NET_ADMIN` for [`offload::disable_offloads`]).

pub mod lab;
pub mod offload;
mod port;
mod ring;
mod stats;
mod sys;

pub use port::{AfPacketConfig, AfPacketError, AfPacketPort, AfPacketRx, AfPacketTx};
pub use stats::{AfPacketStats, AfPacketStatsHandle};
