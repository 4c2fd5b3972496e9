//! `[testing.fault_injection]` in a running switch: a [`Backend`] that opens its ports through
//! another backend and wraps them in `headroom_io::fault`'s injectors (real time, the port's
//! index as the generator's stream). Ports not listed get no wrapper at all.

use headroom_config::Config;
use headroom_io::backend::{Backend, BackendError, OpenedPort};
use headroom_io::fault::{
    monotonic_clock, wrap_port, FaultClock, FaultConfig, FaultStats, FaultyRx, FaultyTx,
    FrameFaults,
};
use headroom_io::pool::PoolStats;
use std::sync::Arc;

/// The fault configuration of port `port` of `config`, if it has faults.
#[must_use]
pub fn port_faults(config: &Config, port: usize) -> Option<FaultConfig> {
    let f = config.testing.fault_injection.as_ref()?;
    if !f.ports.contains(&port) {
        return None;
    }
    let frame = |d: &headroom_config::FrameFaults| FrameFaults {
        drop_rate: d.drop_rate,
        corrupt_rate: d.corrupt_rate,
        truncate_rate: d.truncate_rate,
        duplicate_rate: d.duplicate_rate,
        reorder_rate: d.reorder_rate,
        delay_rate: d.delay_rate,
        delay_max_ns: d.delay_max_ns,
    };
    Some(FaultConfig {
        seed: f.seed,
        rx: frame(&f.rx),
        tx: frame(&f.tx),
        tx_stalls_per_second: f.tx_stalls_per_second,
        tx_stall_ns: f.tx_stall_ns,
        link_flaps_per_second: f.link_flaps_per_second,
        link_down_ns: f.link_down_ns,
        hold_frames: f.hold_frames,
    })
}

/// What the injectors of one port did.
#[derive(Clone, Debug)]
pub struct PortFaultStats {
    /// Port name.
    pub port: String,
    /// Faults of received frames (and link flaps).
    pub rx: Arc<FaultStats>,
    /// Faults of transmitted frames (and stalls).
    pub tx: Arc<FaultStats>,
}

/// Ports of another backend, wrapped in fault injectors where the configuration says so.
pub struct FaultBackend<'a, B> {
    inner: &'a mut B,
    /// `(device, port index, faults)` of every port of the configuration.
    ports: Vec<(String, usize, Option<FaultConfig>)>,
    names: Vec<String>,
    clock: FaultClock,
    stats: Vec<PortFaultStats>,
}

impl<B> std::fmt::Debug for FaultBackend<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultBackend")
            .field("ports", &self.ports)
            .finish_non_exhaustive()
    }
}

impl<'a, B: Backend> FaultBackend<'a, B> {
    /// Opens `config`'s ports through `inner`, with the faults of `[testing.fault_injection]`.
    pub fn new(inner: &'a mut B, config: &Config) -> Self {
        Self {
            inner,
            ports: config
                .ports
                .iter()
                .enumerate()
                .map(|(i, p)| (p.device.clone(), i, port_faults(config, i)))
                .collect(),
            names: config.ports.iter().map(|p| p.name.clone()).collect(),
            clock: monotonic_clock(),
            stats: Vec::new(),
        }
    }

    /// What the injectors of the ports opened so far did.
    #[must_use]
    pub fn stats(&self) -> &[PortFaultStats] {
        &self.stats
    }
}

impl<B: Backend> Backend for FaultBackend<'_, B> {
    type Frame = B::Frame;
    type Rx = FaultyRx<B::Rx>;
    type Tx = FaultyTx<B::Tx>;

    fn open(&mut self, device: &str) -> Result<OpenedPort<Self::Rx, Self::Tx>, BackendError> {
        let opened = self.inner.open(device)?;
        let (index, faults) = self
            .ports
            .iter()
            .find(|(d, _, _)| d == device)
            .map_or((0, None), |(_, i, f)| (*i, *f));
        // A port without faults goes through a wrapper with none (one predictable branch per
        // frame), so that every port has the same types.
        let config = faults.unwrap_or_default();
        let port = wrap_port(
            opened.rx,
            opened.tx,
            &config,
            index as u64,
            Arc::clone(&self.clock),
        )
        .map_err(|e| BackendError {
            device: device.to_owned(),
            reason: format!("testing.fault_injection: {e}"),
        })?;
        let link = if faults.is_some() {
            let (inner, flap, clock) =
                (opened.link, Arc::clone(&port.link), Arc::clone(&self.clock));
            Arc::new(move || {
                if flap.is_up(clock()) {
                    inner()
                } else {
                    Some(false)
                }
            }) as headroom_io::backend::LinkReader
        } else {
            opened.link
        };
        if faults.is_some() {
            self.stats.push(PortFaultStats {
                port: self.names.get(index).cloned().unwrap_or_default(),
                rx: Arc::clone(port.rx.stats()),
                tx: Arc::clone(port.tx.stats()),
            });
        }
        Ok(OpenedPort {
            rx: port.rx,
            tx: port.tx,
            info: opened.info,
            stats: opened.stats,
            link,
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        self.inner.pool_stats()
    }
}

/// One log line per port with faults: what its injectors did.
pub fn log_fault_stats(stats: &[PortFaultStats]) {
    for s in stats {
        let (rx, tx) = (&s.rx, &s.tx);
        tracing::warn!(
            port = %s.port,
            rx_in = rx.frames_in.get(),
            rx_dropped = rx.dropped.get(),
            rx_corrupted = rx.corrupted.get(),
            rx_truncated = rx.truncated.get(),
            rx_duplicated = rx.duplicated.get(),
            rx_reordered = rx.reordered.get(),
            rx_delayed = rx.delayed.get(),
            link_flaps = rx.link_flaps.get(),
            link_down_dropped = rx.link_down_dropped.get() + tx.link_down_dropped.get(),
            tx_in = tx.frames_in.get(),
            tx_dropped = tx.dropped.get(),
            tx_corrupted = tx.corrupted.get(),
            tx_truncated = tx.truncated.get(),
            tx_duplicated = tx.duplicated.get(),
            tx_reordered = tx.reordered.get(),
            tx_delayed = tx.delayed.get(),
            tx_stalls = tx.tx_stalls.get(),
            "fault injection"
        );
    }
}
