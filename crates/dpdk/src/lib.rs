//! headroom's DPDK port backend: EAL, mbuf pools and ethdev ports behind headroom-io's
//! [`RxQueue`](headroom_io::RxQueue)/[`TxQueue`](headroom_io::TxQueue) traits, with frames that
//! stay in their mbufs from `rte_eth_rx_burst` to `rte_eth_tx_burst`.
//!
//! Everything DPDK-specific is behind the cargo feature `dpdk` (off by default; it needs the
//! system DPDK >= 22.11, see README.md). Without it the crate holds only plain data
//! ([`PortConfig`], the report types, [`DpdkError`], the backend's [`DpdkSettings`]), the EAL
//! argument helpers and the lab's EAL arguments ([`lab`]), so the workspace builds and tests on
//! machines without DPDK.
//!
//! With the feature:
//! - `DpdkBackend`: headroom-io's `Backend` for the runtime (EAL once per process, one mempool,
//!   ports kept open across dataplane restarts, lcores registered with EAL; see `backend`);
//! - `Eal`: starts EAL once per process from testpmd-style arguments;
//! - `Mempool`: packet mbuf pools, with a no-hugepage size check;
//! - `DpdkPort`: opens, configures and starts a port (NIC flow control off, promiscuous),
//!   splits into `DpdkRxQueue`/`DpdkTxQueue`, reports link, stats and xstats;
//! - `MbufFrame`: one mbuf owned as a headroom `Frame`; every mbuf is either transmitted or
//!   freed exactly once, by construction;
//! - `TscClock`: nanosecond timestamps from the TSC.
#![cfg_attr(not(feature = "dpdk"), forbid(unsafe_code))]

pub mod args;
mod config;
mod error;
pub mod lab;
mod settings;

pub use config::{FlowControlState, LinkStatus, NicStats, PortConfig, PromiscuousState};
pub use error::DpdkError;
pub use settings::{
    data_room_for_mtu, eal_memory_mib_for, vdev_interfaces, DpdkSettings, DpdkSetupError,
    AF_XDP_FILL_RING_MBUFS, DEFAULT_DATA_ROOM_BYTES, DEFAULT_MTU_BYTES, EAL_MEMORY_MARGIN_MIB,
    FRAME_OVERHEAD_BYTES, MBUF_HEADROOM_BYTES,
};

/// Whether this build of headroom has the DPDK backend (cargo feature `dpdk`).
pub const DPDK_ENABLED: bool = cfg!(feature = "dpdk");

#[cfg(feature = "dpdk")]
pub mod backend;
#[cfg(feature = "dpdk")]
mod clock;
#[cfg(feature = "dpdk")]
mod eal;
#[cfg(feature = "dpdk")]
mod mbuf;
#[cfg(feature = "dpdk")]
mod mempool;
#[cfg(feature = "dpdk")]
mod port;

#[cfg(feature = "dpdk")]
pub use backend::{DpdkBackend, DpdkPortHandle, DpdkRx, DpdkTx, PoolCheck, PortStatus};
#[cfg(feature = "dpdk")]
pub use clock::TscClock;
/// The raw bindings, for what this crate does not wrap.
#[cfg(feature = "dpdk")]
pub use dpdk_sys as sys;
#[cfg(feature = "dpdk")]
pub use eal::{current_thread_cpus, Eal};
#[cfg(feature = "dpdk")]
pub use mbuf::MbufFrame;
#[cfg(feature = "dpdk")]
pub use mempool::{Mempool, MEMPOOL_NAME_MAX_LEN};
#[cfg(feature = "dpdk")]
pub use port::{available_ports, DpdkPort, DpdkRxQueue, DpdkTxQueue};
