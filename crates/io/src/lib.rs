//! Port backends' common ground: the traits every backend implements ([`Backend`] opens ports,
//! [`RxQueue`]/[`TxQueue`] are their halves), and backend-independent pieces (preallocated
//! frame pools, in-memory ports and their backend for tests and benchmarks, fault-injecting
//! wrappers for any port).
//!
//! A port is split into a receive half and a transmit half so that the runtime can poll them
//! from different lcores. Both halves move frames in bursts and never block.
#![forbid(unsafe_code)]

use headroom_core::frame::Frame;

pub mod backend;
pub mod fault;
pub mod memory;
pub mod pool;

pub use backend::{pool_is_full, Backend, BackendError, LinkReader, OpenedPort, StatsReader};
pub use memory::{
    Collector, InjectError, Injector, MemoryBackend, MemoryPort, MemoryRx, MemoryTap, MemoryTx,
};
pub use pool::{FramePool, PoolConfig, PoolFrame, PoolStats};

/// Most frames moved by one `rx_burst` / `tx_burst` call (DPDK l2fwd's `MAX_PKT_BURST`).
pub const BURST_MAX: usize = 32;

/// What a backend knows about a port, read once at start.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortInfo {
    /// Interface name, PCI address or vdev name.
    pub name: String,
    /// The port's MAC address: the source address of the PFC frames the switch sends on it.
    pub mac: [u8; 6],
    /// Largest frame (without FCS) the port can receive and send.
    pub max_frame_len: usize,
}

/// Counters a backend keeps itself (kernel or NIC level), read by the control plane: counted
/// from the moment the port was opened for the running dataplane (the control plane carries
/// them over a reconfiguration).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BackendStats {
    /// Frames received from the device.
    pub rx_frames: u64,
    /// Frames handed to the device for transmission.
    pub tx_frames: u64,
    /// Frames the device or kernel dropped before the switch saw them (ring full, no buffer).
    pub rx_missed: u64,
    /// Frames the switch gave up on because the device would not take them.
    pub tx_failed: u64,
    /// Frames that could not be received because the frame pool was empty.
    pub rx_no_buffer: u64,
}

impl BackendStats {
    /// What was counted since `origin`, an earlier reading of the same counters (saturating:
    /// a device that reset its counters reads as nothing new).
    #[must_use]
    pub fn since(&self, origin: &Self) -> Self {
        Self {
            rx_frames: self.rx_frames.saturating_sub(origin.rx_frames),
            tx_frames: self.tx_frames.saturating_sub(origin.tx_frames),
            rx_missed: self.rx_missed.saturating_sub(origin.rx_missed),
            tx_failed: self.tx_failed.saturating_sub(origin.tx_failed),
            rx_no_buffer: self.rx_no_buffer.saturating_sub(origin.rx_no_buffer),
        }
    }
}

/// The receive half of a port.
pub trait RxQueue: Send {
    /// The frame handle type of this backend.
    type Frame: Frame;

    /// Receives up to `max` frames, appending them to `out`; returns how many. Never blocks.
    fn rx_burst(&mut self, out: &mut Vec<Self::Frame>, max: usize) -> usize;

    /// A file descriptor that becomes readable when frames arrive, for runtimes that sleep
    /// while idle (adaptive polling). `None` for backends that can only be polled (DPDK).
    fn wait_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// The transmit half of a port.
pub trait TxQueue: Send {
    /// The frame handle type of this backend.
    type Frame: Frame;

    /// Hands the frames at the front of `frames` to the device, removes the ones it took and
    /// returns how many. Frames it did not take stay in `frames`, in order, with the caller,
    /// which retries them or drops them and counts the drop. Never blocks.
    fn tx_burst(&mut self, frames: &mut Vec<Self::Frame>) -> usize;

    /// A new empty frame of `len` bytes (zeroed) from this port's pool, for frames the switch
    /// generates itself (PFC). `None` when the pool is empty.
    fn alloc_frame(&mut self, len: usize) -> Option<Self::Frame>;

    /// Sends whatever the backend batched internally (a TX ring, a pending `sendmmsg`).
    fn flush(&mut self) {}
}
