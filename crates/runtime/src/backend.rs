//! Port backends as the runtime opens them: AF_PACKET on Linux interfaces, and in-memory ports
//! for tests. (DPDK lives in `headroom-dpdk` behind the `dpdk` feature.)

use headroom_afpacket::{AfPacketConfig, AfPacketPort};
use headroom_core::frame::Frame;
use headroom_io::memory::{Collector, Injector, MemoryPort};
use headroom_io::pool::{FramePool, PoolFrame, PoolStats};
use headroom_io::{BackendStats, PortInfo, RxQueue, TxQueue};
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Reads a port's backend-level counters (kernel or NIC), from the control thread.
pub type StatsReader = Arc<dyn Fn() -> BackendStats + Send + Sync>;

/// Reads a port's link state (`None`: unknown), from the control thread.
pub type LinkReader = Arc<dyn Fn() -> Option<bool> + Send + Sync>;

/// The link state of a Linux interface in the calling thread's network namespace (up with
/// carrier), `None` when it cannot be asked.
#[must_use]
pub fn linux_link_up(interface: &str) -> Option<bool> {
    headroom_afpacket::link_up(interface)
}

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

/// Linux interfaces through AF_PACKET.
#[derive(Debug)]
pub struct AfPacketBackend {
    pool: FramePool,
    config: AfPacketConfig,
    disable_offloads: bool,
}

impl AfPacketBackend {
    /// A backend whose ports share `pool`. With `disable_offloads`, GSO/TSO/GRO and checksum
    /// offloads are turned off on each interface (AF_PACKET would otherwise see super-frames
    /// from kernel TCP).
    #[must_use]
    pub fn new(pool: FramePool, config: AfPacketConfig, disable_offloads: bool) -> Self {
        Self {
            pool,
            config,
            disable_offloads,
        }
    }
}

impl Backend for AfPacketBackend {
    type Frame = PoolFrame;
    type Rx = headroom_afpacket::AfPacketRx;
    type Tx = headroom_afpacket::AfPacketTx;

    fn open(&mut self, device: &str) -> Result<OpenedPort<Self::Rx, Self::Tx>, BackendError> {
        let err = |e: &dyn fmt::Display| BackendError {
            device: device.to_owned(),
            reason: e.to_string(),
        };
        if self.disable_offloads {
            let report =
                headroom_afpacket::offload::disable_offloads(device).map_err(|e| err(&e))?;
            if !report.all_disabled() {
                tracing::warn!(
                    device,
                    ?report,
                    "some offloads stay enabled; AF_PACKET may see super-frames"
                );
            }
        }
        let port =
            AfPacketPort::open(device, self.pool.clone(), &self.config).map_err(|e| err(&e))?;
        let info = port.info().clone();
        let handle = port.stats_handle();
        let (rx, tx) = port.split();
        Ok(OpenedPort {
            rx,
            tx,
            info,
            stats: Arc::new(move || handle.backend_stats()),
            link: {
                let device = device.to_owned();
                Arc::new(move || linux_link_up(&device))
            },
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }
}

/// The test-side ends of an in-memory port.
#[derive(Debug)]
pub struct MemoryTap {
    /// Puts frames into the port's receive side.
    pub injector: Injector,
    /// Takes what the port transmits.
    pub collector: Collector,
    /// The port's link state as the switch reads it (up when opened): a test pulls the cable
    /// by storing `false`.
    pub link_up: Arc<AtomicBool>,
}

/// In-memory ports, for tests and benchmarks: every `open` creates a port whose other ends
/// ([`MemoryTap`]) are kept for the caller to take.
#[derive(Debug)]
pub struct MemoryBackend {
    pool: FramePool,
    ring_frames: usize,
    taps: HashMap<String, MemoryTap>,
    next_mac: u8,
}

impl MemoryBackend {
    /// A backend whose ports share `pool`; each port's rings hold `ring_frames`.
    #[must_use]
    pub fn new(pool: FramePool, ring_frames: usize) -> Self {
        Self {
            pool,
            ring_frames,
            taps: HashMap::new(),
            next_mac: 1,
        }
    }

    /// The test-side ends of the port opened on `device`.
    pub fn take_tap(&mut self, device: &str) -> Option<MemoryTap> {
        self.taps.remove(device)
    }
}

impl Backend for MemoryBackend {
    type Frame = PoolFrame;
    type Rx = headroom_io::memory::MemoryRx;
    type Tx = headroom_io::memory::MemoryTx;

    fn open(&mut self, device: &str) -> Result<OpenedPort<Self::Rx, Self::Tx>, BackendError> {
        let info = PortInfo {
            name: device.to_owned(),
            mac: [0x02, 0x4d, 0x45, 0x4d, 0, self.next_mac],
            max_frame_len: self.pool.data_room_bytes(),
        };
        self.next_mac = self.next_mac.wrapping_add(1);
        let port = MemoryPort::new(info.clone(), self.pool.clone(), self.ring_frames);
        let handle = port.stats_handle();
        let (rx, tx, injector, collector) = port.split();
        let link_up = Arc::new(AtomicBool::new(true));
        self.taps.insert(
            device.to_owned(),
            MemoryTap {
                injector,
                collector,
                link_up: Arc::clone(&link_up),
            },
        );
        Ok(OpenedPort {
            rx,
            tx,
            info,
            stats: Arc::new(move || handle.stats()),
            link: Arc::new(move || Some(link_up.load(Ordering::Relaxed))),
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }
}
