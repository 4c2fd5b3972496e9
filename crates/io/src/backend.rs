//! What opens ports: the [`Backend`] trait every port backend implements (AF_PACKET in
//! headroom-afpacket, DPDK in headroom-dpdk, in-memory ports in [`crate::memory`]), and what it
//! hands the runtime for each port.
//!
//! A backend owns its own life cycle: what it sets up once (a frame pool, DPDK's EAL and
//! mempool), what it keeps across dataplane restarts (DPDK's open ports), and what it checks at
//! shutdown ([`Backend::pool_stats`]). The runtime only opens ports, lends their halves to its
//! lcores and reads the per-port readers below from its control thread.

use std::fmt;
use std::sync::Arc;

use headroom_core::frame::Frame;

use crate::pool::PoolStats;
use crate::{BackendStats, PortInfo, RxQueue, TxQueue};

/// Reads a port's backend-level counters (kernel or NIC), from the control thread.
pub type StatsReader = Arc<dyn Fn() -> BackendStats + Send + Sync>;

/// Reads a port's link state (`None`: unknown), from the control thread.
pub type LinkReader = Arc<dyn Fn() -> Option<bool> + Send + Sync>;

/// A port the backend opened.
pub struct OpenedPort<R, T> {
    /// Receive half.
    pub rx: R,
    /// Transmit half.
    pub tx: T,
    /// What the device says about itself.
    pub info: PortInfo,
    /// Backend counters.
    pub stats: StatsReader,
    /// Link state.
    pub link: LinkReader,
}

impl<R, T> fmt::Debug for OpenedPort<R, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenedPort")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

/// Why a port could not be opened.
#[derive(Debug)]
pub struct BackendError {
    /// The device.
    pub device: String,
    /// What went wrong.
    pub reason: String,
}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cannot open port device {}: {}",
            self.device, self.reason
        )
    }
}

impl std::error::Error for BackendError {}

/// Something that opens ports.
pub trait Backend {
    /// Frame handle type.
    type Frame: Frame;
    /// Receive half.
    type Rx: RxQueue<Frame = Self::Frame> + 'static;
    /// Transmit half.
    type Tx: TxQueue<Frame = Self::Frame> + 'static;

    /// Opens the port on `device`.
    ///
    /// # Errors
    /// When the device does not exist or cannot be used.
    fn open(&mut self, device: &str) -> Result<OpenedPort<Self::Rx, Self::Tx>, BackendError>;

    /// The frame pool's state, if the backend has one pool (checked at shutdown: every frame
    /// must be back).
    fn pool_stats(&self) -> Option<PoolStats>;
}

/// Whether every frame buffer is back in the pool (after a stop; `None`: the backend has no
/// single pool to check).
#[must_use]
pub fn pool_is_full(stats: Option<PoolStats>) -> bool {
    stats.is_none_or(|s| s.available == s.capacity)
}
