//! Linux interfaces through AF_PACKET, as the runtime opens them ([`headroom_io::Backend`]).
//!
//! Life cycle: the backend holds one frame pool for every port it opens; each `open` turns the
//! interface's offloads off (when asked), opens its packet sockets and hands out the two halves.
//! Nothing outlives the backend: a reconfiguration makes a new backend and reopens the ports.

use std::fmt;
use std::sync::Arc;

use headroom_io::backend::{Backend, BackendError, OpenedPort};
use headroom_io::pool::{FramePool, PoolFrame, PoolStats};

use crate::{link_up, offload, AfPacketConfig, AfPacketPort, AfPacketRx, AfPacketTx};

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
    type Rx = AfPacketRx;
    type Tx = AfPacketTx;

    fn open(&mut self, device: &str) -> Result<OpenedPort<AfPacketRx, AfPacketTx>, BackendError> {
        let err = |e: &dyn fmt::Display| BackendError {
            device: device.to_owned(),
            reason: e.to_string(),
        };
        if self.disable_offloads {
            let report = offload::disable_offloads(device).map_err(|e| err(&e))?;
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
                Arc::new(move || link_up(&device))
            },
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        Some(self.pool.stats())
    }
}
