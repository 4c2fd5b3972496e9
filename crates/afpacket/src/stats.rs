//! Counters of an AF_PACKET port, shared between its halves and the control plane.

use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use headroom_io::BackendStats;

use crate::sys;

/// Counters of one AF_PACKET port.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfPacketStats {
    /// Frames handed to the switch.
    pub rx_frames: u64,
    /// Bytes of those frames (with any re-inserted 802.1Q tag).
    pub rx_bytes: u64,
    /// Frames the kernel dropped because the receive ring was full (`PACKET_STATISTICS`
    /// `tp_drops`).
    pub rx_kernel_drops: u64,
    /// Frames dropped because they were longer than the frame pool's data room (or than a ring
    /// block, which truncated them).
    pub rx_oversize: u64,
    /// Frames dropped because the frame pool was empty.
    pub rx_no_buffer: u64,
    /// Frames received whose L4 checksum was left for offload (`TP_STATUS_CSUMNOTREADY`): the
    /// sender has TX checksum offload on, and these frames carry an incomplete checksum. They
    /// are still delivered; see [`crate::offload`].
    pub rx_checksum_incomplete: u64,
    /// Ring entries that pointed outside their block, or tagged frames too short to hold two
    /// MAC addresses; skipped.
    pub rx_ring_errors: u64,
    /// Frames seen leaving the interface (`PACKET_OUTGOING`) and skipped, for kernels without
    /// `PACKET_IGNORE_OUTGOING`.
    pub rx_outgoing_skipped: u64,
    /// Frames the kernel accepted for transmission.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames the kernel refused for good (`EMSGSIZE`, `EINVAL`, `ENETDOWN`...); dropped.
    pub tx_failed: u64,
    /// `tx_burst` calls that stopped early because the kernel had no room (`EAGAIN`, `ENOBUFS`);
    /// the frames stayed with the caller.
    pub tx_would_block: u64,
}

impl AfPacketStats {
    /// The backend-independent view. `rx_missed` sums the frames dropped before the switch saw
    /// them: kernel ring drops, oversize frames and ring errors.
    #[must_use]
    pub fn to_backend_stats(&self) -> BackendStats {
        BackendStats {
            rx_frames: self.rx_frames,
            tx_frames: self.tx_frames,
            rx_missed: self.rx_kernel_drops + self.rx_oversize + self.rx_ring_errors,
            tx_failed: self.tx_failed,
            rx_no_buffer: self.rx_no_buffer,
        }
    }
}

#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) rx_frames: AtomicU64,
    pub(crate) rx_bytes: AtomicU64,
    pub(crate) rx_kernel_drops: AtomicU64,
    pub(crate) rx_oversize: AtomicU64,
    pub(crate) rx_no_buffer: AtomicU64,
    pub(crate) rx_checksum_incomplete: AtomicU64,
    pub(crate) rx_ring_errors: AtomicU64,
    pub(crate) rx_outgoing_skipped: AtomicU64,
    pub(crate) tx_frames: AtomicU64,
    pub(crate) tx_bytes: AtomicU64,
    pub(crate) tx_failed: AtomicU64,
    pub(crate) tx_would_block: AtomicU64,
}

/// Adds `n` to `counter` unless it is 0 (saves a locked instruction on the common path).
pub(crate) fn add(counter: &AtomicU64, n: u64) {
    if n > 0 {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

impl Counters {
    /// Reads and resets the kernel's drop counter of the RX socket into `rx_kernel_drops`.
    /// Errors are ignored: the counter then lags until the next successful read.
    pub(crate) fn collect_kernel_drops(&self, rx_socket: &OwnedFd) {
        if let Ok(kernel) = sys::packet_statistics(rx_socket.as_fd()) {
            add(&self.rx_kernel_drops, u64::from(kernel.tp_drops));
        }
    }

    fn snapshot(&self) -> AfPacketStats {
        let get = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        AfPacketStats {
            rx_frames: get(&self.rx_frames),
            rx_bytes: get(&self.rx_bytes),
            rx_kernel_drops: get(&self.rx_kernel_drops),
            rx_oversize: get(&self.rx_oversize),
            rx_no_buffer: get(&self.rx_no_buffer),
            rx_checksum_incomplete: get(&self.rx_checksum_incomplete),
            rx_ring_errors: get(&self.rx_ring_errors),
            rx_outgoing_skipped: get(&self.rx_outgoing_skipped),
            tx_frames: get(&self.tx_frames),
            tx_bytes: get(&self.tx_bytes),
            tx_failed: get(&self.tx_failed),
            tx_would_block: get(&self.tx_would_block),
        }
    }
}

/// Reads a port's counters from any thread (the control plane's).
#[derive(Clone)]
pub struct AfPacketStatsHandle {
    pub(crate) counters: Arc<Counters>,
    pub(crate) rx_socket: Arc<OwnedFd>,
}

impl fmt::Debug for AfPacketStatsHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("AfPacketStatsHandle")
            .field(&self.counters.snapshot())
            .finish()
    }
}

impl AfPacketStatsHandle {
    /// The counters now, after collecting the kernel's drop counter (one `getsockopt`).
    #[must_use]
    pub fn stats(&self) -> AfPacketStats {
        self.counters.collect_kernel_drops(&self.rx_socket);
        self.counters.snapshot()
    }

    /// [`Self::stats`] in the backend-independent form.
    #[must_use]
    pub fn backend_stats(&self) -> BackendStats {
        self.stats().to_backend_stats()
    }
}
