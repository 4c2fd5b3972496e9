//! The runtime: runs the sans-IO core on real ports.
//!
//! [`start`] opens every port through a [`Backend`] (headroom-io's trait; the backends own
//! their life cycle in their crates), builds one core step (`headroom_core::step::LcoreStep`)
//! per lcore of the layout, and spawns one pinned thread per lcore running the poll loop of
//! [`lcore`]. [`Running`] is the handle the control thread keeps: it reads counters, drains
//! events into the log, and stops (drain, then join) on request. [`RuntimeSpec::for_config`]
//! says what a configuration runs (the core's parameters come from headroom-config itself);
//! [`backends`] holds what the runtime gives each backend from a configuration.
#![forbid(unsafe_code)]

pub mod atomic_file;
pub mod backends;
pub mod clock;
pub mod control;
pub mod control_frames;
pub mod event_log;
pub mod fault;
pub mod host_interfaces;
pub mod lcore;
mod lcore_channel;
pub mod ledger;
pub mod lldp;
pub mod mirror;
pub mod protocol;
pub mod rates;

use clock::MonotonicClock;
use control_frames::{InjectError, Injector, PuntReceiver, PuntRings, PUNT_RING_FRAMES};
use headroom_core::events::Event;
use headroom_core::fdb::FdbEntry;
use headroom_core::params::{ParamsError, SwitchParams};
use headroom_core::punt::PuntReason;
use headroom_core::route::{fib_channel, Fib, FibSender};
use headroom_core::shared::{Layout, LcorePorts, Shared};
use headroom_core::switch::build;
use headroom_core::types::PortId;
use headroom_io::backend::{Backend, BackendError, LinkReader, StatsReader};
use lcore::{Lcore, LcoreCommand, LcoreReply, LcoreStats, Polling, TxPort};
use mirror::{mirror_pair, CaptureControl, MirrorReader};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// One lcore of the layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LcoreSpec {
    /// CPU to pin to (`None`: no pinning).
    pub cpu: Option<usize>,
    /// Ports whose receive side this lcore polls.
    pub rx_ports: Vec<PortId>,
    /// Ports whose transmit side this lcore serves.
    pub tx_ports: Vec<PortId>,
}

/// What to run.
#[derive(Clone, Debug)]
pub struct RuntimeSpec {
    /// The core's parameters. A port MAC of all zeros is replaced by the device's MAC.
    pub params: SwitchParams,
    /// The device of each port, in port order.
    pub devices: Vec<String>,
    /// The lcores (every port RX-polled by exactly one, TX-served by exactly one).
    pub lcores: Vec<LcoreSpec>,
    /// How lcores wait when idle.
    pub polling: Polling,
    /// Frames per burst.
    pub burst: usize,
    /// How long a stop keeps transmitting what is queued.
    pub drain_timeout: Duration,
    /// Capture flags of each port from the first frame on (`mirror::CAPTURE_*`; empty: no
    /// capture): a capture that runs across a reconfiguration must not miss what the new
    /// dataplane receives before the control plane's next turn.
    pub capture_flags: Vec<u8>,
    /// The FIB the lcores that receive start routing with (the netlink mirror's last
    /// publication, [`host_interfaces::HostInterfaces::fib`]); `None`: no routed port, no FIB
    /// (routed frames are dropped `no_route`).
    pub fib: Option<Arc<Fib>>,
}

impl RuntimeSpec {
    /// What the runtime runs for a configuration: the core's parameters
    /// ([`headroom_config::Config::switch_params`]), each port's device, the lcore table (every
    /// lcore pinned to its CPU; a configuration without one has a single lcore on the first CPU
    /// of the process's affinity mask), polling and burst size; 200 ms to drain at a stop.
    ///
    /// # Errors
    /// [`RuntimeError::Params`] for a configuration the core cannot take, which only a
    /// hand-built [`headroom_config::Config`] can be (files are refused when parsed).
    pub fn for_config(config: &headroom_config::Config) -> Result<Self, RuntimeError> {
        Ok(Self {
            params: config.switch_params().map_err(RuntimeError::Params)?,
            devices: config.ports.iter().map(|p| p.device.clone()).collect(),
            lcores: config
                .runtime
                .lcores
                .iter()
                .map(|l| LcoreSpec {
                    cpu: Some(l.cpu),
                    rx_ports: l.rx_ports.clone(),
                    tx_ports: l.tx_ports.clone(),
                })
                .collect(),
            polling: match config.runtime.polling {
                headroom_config::Polling::Busy => Polling::Busy,
                headroom_config::Polling::Adaptive => Polling::default(),
            },
            // `runtime.burst_size` is checked to be 1..=1024 when the file is resolved.
            burst: usize::from(config.runtime.burst_size),
            drain_timeout: Duration::from_millis(200),
            capture_flags: Vec::new(),
            fib: None,
        })
    }

    /// Every port on one lcore (run to completion), not pinned, adaptive polling.
    #[must_use]
    pub fn single_lcore(params: SwitchParams, devices: Vec<String>) -> Self {
        let ports: Vec<PortId> = (0..params.ports.len())
            .map(|i| PortId(u16::try_from(i).unwrap_or(u16::MAX)))
            .collect();
        Self {
            params,
            devices,
            lcores: vec![LcoreSpec {
                cpu: None,
                rx_ports: ports.clone(),
                tx_ports: ports,
            }],
            polling: Polling::default(),
            burst: headroom_io::BURST_MAX,
            drain_timeout: Duration::from_millis(200),
            capture_flags: Vec::new(),
            fib: None,
        }
    }

    fn layout(&self) -> Result<Layout, RuntimeError> {
        let lcores: Vec<LcorePorts> = self
            .lcores
            .iter()
            .map(|l| LcorePorts {
                rx: l.rx_ports.clone(),
                tx: l.tx_ports.clone(),
            })
            .collect();
        Layout::from_lcores(self.params.ports.len(), &lcores).map_err(|e| RuntimeError::Layout(e.0))
    }
}

/// Why the switch could not start.
#[derive(Debug)]
pub enum RuntimeError {
    /// A port could not be opened.
    Backend(BackendError),
    /// The parameters were refused by the core.
    Params(ParamsError),
    /// The lcore layout is inconsistent.
    Layout(String),
    /// A thread could not be spawned.
    Thread(std::io::Error),
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Backend(e) => e.fmt(f),
            Self::Params(e) => write!(f, "invalid switch parameters: {e}"),
            Self::Layout(e) => write!(f, "invalid lcore layout: {e}"),
            Self::Thread(e) => write!(f, "cannot start an lcore thread: {e}"),
        }
    }
}

impl std::error::Error for RuntimeError {}

/// A running switch.
pub struct Running {
    shared: Arc<Shared>,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    lcore_stats: Vec<Arc<LcoreStats>>,
    port_stats: Vec<StatsReader>,
    port_links: Vec<LinkReader>,
    devices: Vec<String>,
    clock: MonotonicClock,
    commands: Vec<lcore_channel::ControlEnd>,
    mirrors: Vec<MirrorReader>,
    capture: Arc<CaptureControl>,
    punts: PuntRings,
    /// `None` when no lcore both receives and transmits.
    injector: Option<Injector>,
    /// The control plane's ends of the FIB rings of the lcores that receive, with the
    /// generation each was last sent.
    fib_senders: Vec<(FibSender, u64)>,
}

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Running")
            .field("devices", &self.devices)
            .field("lcores", &self.threads.len())
            .finish()
    }
}

/// Opens the ports and starts the lcores.
///
/// # Errors
/// When a port cannot be opened, the parameters or the layout are refused, or a thread cannot
/// start. Nothing keeps running then.
pub fn start<B: Backend>(mut spec: RuntimeSpec, backend: &mut B) -> Result<Running, RuntimeError>
where
    B::Rx: Send,
    B::Tx: Send,
{
    if spec.devices.len() != spec.params.ports.len() {
        return Err(RuntimeError::Layout(format!(
            "{} devices for {} ports",
            spec.devices.len(),
            spec.params.ports.len()
        )));
    }
    let layout = spec.layout()?;
    let mut rx_queues = Vec::new();
    let mut tx_queues = Vec::new();
    let mut port_stats = Vec::new();
    let mut port_links = Vec::new();
    for (i, device) in spec.devices.iter().enumerate() {
        let opened = backend.open(device).map_err(RuntimeError::Backend)?;
        let port = &mut spec.params.ports[i];
        if port.mac == [0; 6] {
            port.mac = opened.info.mac;
        }
        tracing::info!(port = %port.name, device, mac = %mac(port.mac), speed_bps = port.speed_bps, "port opened");
        rx_queues.push(Some(opened.rx));
        tx_queues.push(Some(opened.tx));
        port_stats.push(opened.stats);
        port_links.push(opened.link);
    }
    let clock = MonotonicClock::new();
    let steps = build::<B::Frame>(spec.params.clone(), layout, clock.now())
        .map_err(RuntimeError::Params)?;
    let shared = Arc::clone(steps[0].shared());
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let mut lcore_stats = Vec::new();
    let mut punt_rings: Vec<Box<dyn PuntReceiver>> = Vec::new();
    // Frames the control plane injects go through the first lcore that both receives (its
    // ingress side enqueues them) and transmits (its TX queues provide the frame buffers).
    let inject_lcore = steps
        .iter()
        .position(|s| s.ingress().is_some() && s.egress().is_some());
    let mut injector = None;
    let capture = Arc::new(CaptureControl::new(spec.params.ports.len()));
    for (port, &flags) in spec.capture_flags.iter().enumerate() {
        capture.set(port, flags);
    }
    let mut commands = Vec::new();
    let mut mirrors = Vec::new();
    let mut fib_senders = Vec::new();
    for (n, (l, mut step)) in spec.lcores.iter().zip(steps).enumerate() {
        // Attached before the lcore starts (a control op between iterations, swap.rs's call
        // order); only a side that receives routes.
        if let (Some(fib), true) = (&spec.fib, step.ingress().is_some()) {
            let (sender, reader) = fib_channel(Arc::clone(fib));
            step.attach_fib(reader);
            fib_senders.push((sender, fib.generation()));
        }
        let stats = Arc::new(LcoreStats::default());
        let punts = step.ingress().is_some().then(|| {
            let (tx, rx) = rtrb::RingBuffer::new(PUNT_RING_FRAMES);
            punt_rings.push(Box::new(rx));
            tx
        });
        let injects = (inject_lcore == Some(n)).then(|| {
            let (control_end, lcore_end) = Injector::pair(spec.params.ports.len());
            injector = Some(control_end);
            lcore_end
        });
        let (control_end, lcore_end) = lcore_channel::channel();
        commands.push(control_end);
        let (mirror, mirror_reader) = mirror_pair();
        mirrors.push(mirror_reader);
        let lcore: Lcore<B::Frame, B::Rx, B::Tx> = Lcore {
            name: format!("lcore{n}"),
            cpu: l.cpu,
            step,
            punts,
            injects,
            rx: l
                .rx_ports
                .iter()
                .filter_map(|p| rx_queues[p.index()].take().map(|q| (*p, q)))
                .collect(),
            tx: l
                .tx_ports
                .iter()
                .filter_map(|p| {
                    tx_queues[p.index()].take().map(|queue| TxPort {
                        id: *p,
                        queue,
                        pending: Vec::with_capacity(spec.burst),
                    })
                })
                .collect(),
            polling: spec.polling,
            burst: spec.burst,
            drain_timeout: spec.drain_timeout,
            stats: Arc::clone(&stats),
            control: lcore_end,
            mirror,
            capture: Arc::clone(&capture),
        };
        let lcore_stop = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name(format!("headroom-lcore{n}"))
            .spawn(move || {
                lcore.run(&lcore_stop, clock);
                // Everything the lcore owned is dropped by now: the buffers its queues' frame
                // caches hold go back to their pools before `Running::stop` joins, so that a
                // check of the pool after the stop sees every one.
                headroom_io::pool::flush_thread_caches();
            })
            .map_err(RuntimeError::Thread);
        match handle {
            Ok(h) => threads.push(h),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                for t in threads {
                    let _ = t.join();
                }
                return Err(e);
            }
        }
        lcore_stats.push(stats);
    }
    Ok(Running {
        shared,
        stop,
        threads,
        lcore_stats,
        port_stats,
        port_links,
        devices: spec.devices,
        clock,
        commands,
        mirrors,
        capture,
        punts: PuntRings::new(punt_rings),
        injector,
        fib_senders,
    })
}

fn mac(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Running {
    /// State shared with the lcores: counters, parameters, boards.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// The runtime clock (the same the lcores read).
    #[must_use]
    pub fn clock(&self) -> MonotonicClock {
        self.clock
    }

    /// The lcores' loop counters.
    #[must_use]
    pub fn lcore_stats(&self) -> &[Arc<LcoreStats>] {
        &self.lcore_stats
    }

    /// Backend counters of port `i`.
    #[must_use]
    pub fn backend_stats(&self, port: PortId) -> headroom_io::BackendStats {
        (self.port_stats[port.index()])()
    }

    /// Sends `command` to every lcore and collects the replies (waits up to `timeout` for each).
    pub fn command(&mut self, command: LcoreCommand, timeout: Duration) -> Vec<LcoreReply> {
        let mut replies = Vec::new();
        for link in &mut self.commands {
            match link.request(command, timeout) {
                Some(r) => replies.push(r),
                None => tracing::warn!(?command, "an lcore did not answer in time"),
            }
        }
        replies
    }

    /// The MAC tables of every lcore, merged: one entry per (VLAN, MAC), the most recently seen
    /// (each ingress side holds a copy of what the others learned, and a copy may lag a move).
    pub fn fdb(&mut self) -> Vec<FdbEntry> {
        let tables = self
            .command(LcoreCommand::DumpFdb, Duration::from_secs(1))
            .into_iter()
            .flat_map(|r| match r {
                LcoreReply::Fdb(e) => e,
                LcoreReply::Done => Vec::new(),
            });
        merge_fdb(tables)
    }

    /// Forgets the stations learned on `port` (`Some`: link down, `clear fdb port`) or every
    /// station (`None`: `clear fdb all`). Every lcore with an ingress side flushes its table;
    /// the learn rings would carry one side's flush to the others anyway, and a flush is
    /// idempotent.
    pub fn flush_fdb(&mut self, port: Option<PortId>) {
        self.command(LcoreCommand::FlushFdb(port), Duration::from_secs(1));
    }

    /// Turns the PFC watchdog's big red switch on or off on every lcore.
    pub fn set_big_red_switch(&mut self, on: bool) {
        self.command(LcoreCommand::SetBigRedSwitch(on), Duration::from_secs(1));
    }

    /// Which ports are captured (set flags with [`CaptureControl::set`]).
    #[must_use]
    pub fn capture_control(&self) -> &Arc<CaptureControl> {
        &self.capture
    }

    /// The control plane's ends of the lcores' capture rings.
    pub fn mirrors(&mut self) -> &mut [MirrorReader] {
        &mut self.mirrors
    }

    /// Link state of a port (`None`: unknown).
    #[must_use]
    pub fn link_up(&self, port: PortId) -> Option<bool> {
        (self.port_links[port.index()])()
    }

    /// Takes every pending dataplane event.
    pub fn drain_events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        for log in self
            .shared
            .ingress_events
            .iter()
            .chain(&self.shared.egress_events)
        {
            while let Some(e) = log.pop() {
                out.push(e);
            }
        }
        out
    }

    /// Logs every pending event through `tracing`, with SONiC's wording for the watchdog.
    pub fn log_events(&self) {
        for e in self.drain_events() {
            log_event(&self.shared, &self.clock, &e);
        }
    }

    /// Queues `bytes` (an Ethernet frame without FCS) to be sent out of `port` through the
    /// dataplane's normal egress path: classified by `port`'s maps, rate-limited, accounted on
    /// the CPU port, scheduled and shaped (`headroom_core::inject`). The core counts what it
    /// enqueues and drops per port (`inject_frames`, `inject_drops`).
    ///
    /// # Errors
    /// See [`InjectError`].
    pub fn inject(&mut self, port: PortId, bytes: &[u8]) -> Result<(), InjectError> {
        self.injector
            .as_mut()
            .ok_or(InjectError::NoInjectLcore)?
            .inject(port, bytes)
    }

    /// Inject requests the inject lcore has not taken yet.
    #[must_use]
    pub fn inject_pending(&self) -> usize {
        self.injector.as_ref().map_or(0, Injector::pending)
    }

    /// Queues a frame of VLAN `vid`'s VLAN interface to be sent into the VLAN (see
    /// [`Injector::inject_vlan`]).
    ///
    /// # Errors
    /// See [`InjectError`].
    pub fn inject_vlan(&mut self, vid: u16, bytes: &[u8]) -> Result<(), InjectError> {
        self.injector
            .as_mut()
            .ok_or(InjectError::NoInjectLcore)?
            .inject_vlan(vid, bytes)
    }

    /// Inject requests refused because the ring towards the lcore was full.
    #[must_use]
    pub fn inject_ring_full(&self) -> u64 {
        self.injector.as_ref().map_or(0, Injector::ring_full)
    }

    /// Takes the frames the lcores punted to the control plane and drops them, counted
    /// ([`Running::punted_unconsumed`]): for a switch without host interfaces. Returns how many.
    pub fn drain_punts(&mut self) -> usize {
        self.punts.drain_to(&mut |_, _, _, _| false)
    }

    /// Takes the frames the lcores punted and shows each to `consumer` (port, VLAN interface, reason,
    /// bytes); those it does not take (returns `false`: the port has no host interface) are counted
    /// unconsumed. Returns how many were taken from the rings.
    pub fn drain_punts_to(&mut self, consumer: &mut control_frames::PuntConsumer<'_>) -> usize {
        self.punts.drain_to(consumer)
    }

    /// Sends a FIB snapshot to every routing lcore that does not have it yet; returns how many
    /// refused it (their ring full: call again on the next turn). Never blocks.
    pub fn send_fib(&mut self, fib: &Arc<Fib>) -> u64 {
        let mut refused = 0;
        for (sender, sent) in &mut self.fib_senders {
            if *sent >= fib.generation() {
                continue;
            }
            if sender.send(fib) {
                *sent = fib.generation();
            } else {
                refused += 1;
            }
        }
        refused
    }

    /// Drops the FIB snapshots the lcores stopped using (so that the builder's spare copy is
    /// unique again).
    pub fn reclaim_fib(&mut self) {
        for (sender, _) in &mut self.fib_senders {
            sender.reclaim();
        }
    }

    /// Punted frames dropped for want of a consumer (no host interface on their port), by
    /// reason (index of [`PuntReason`]).
    #[must_use]
    pub fn punted_unconsumed(&self) -> [u64; PuntReason::COUNT] {
        self.punts.unconsumed()
    }

    /// Whether every lcore thread is still running.
    #[must_use]
    pub fn is_healthy(&self) -> bool {
        self.threads.iter().all(|t| !t.is_finished())
    }

    /// Stops polling, drains what is queued (bounded by the drain timeout), joins the lcores.
    /// Returns the shared state for final counters.
    pub fn stop(mut self) -> Arc<Shared> {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            if t.join().is_err() {
                tracing::error!("an lcore thread panicked");
            }
        }
        // What the lcores punted last is counted too (and its buffers go back to the pool).
        self.punts.drain_to(&mut |_, _, _, _| false);
        for log in self
            .shared
            .ingress_events
            .iter()
            .chain(&self.shared.egress_events)
        {
            while let Some(e) = log.pop() {
                log_event(&self.shared, &self.clock, &e);
            }
        }
        self.shared
    }
}

pub use event_log::log_event;

/// One entry per (VLAN, MAC) out of several MAC tables: the most recently seen wins.
fn merge_fdb(entries: impl IntoIterator<Item = FdbEntry>) -> Vec<FdbEntry> {
    let mut newest: std::collections::HashMap<(u16, [u8; 6]), FdbEntry> =
        std::collections::HashMap::new();
    for e in entries {
        newest
            .entry((e.vid, e.mac))
            .and_modify(|kept| {
                if e.last_seen > kept.last_seen {
                    *kept = e;
                }
            })
            .or_insert(e);
    }
    let mut merged: Vec<FdbEntry> = newest.into_values().collect();
    merged.sort_by_key(|e| (e.vid, e.mac));
    merged
}

#[cfg(test)]
mod tests {
    use super::{merge_fdb, RuntimeSpec};
    use headroom_core::fdb::FdbEntry;
    use headroom_core::time::Instant;
    use headroom_core::types::PortId;

    #[test]
    fn merged_fdb_keeps_one_entry_per_station_the_newest() {
        let entry = |vid, last, port, seen| FdbEntry {
            vid,
            mac: [2, 0, 0, 0, 0, last],
            port: PortId(port),
            last_seen: Instant::from_nanos(seen),
            is_static: false,
        };
        // Side 0 learned A on port 1, side 1 holds an older copy of it on port 0 (before a move)
        // and its own B; side 0 holds a copy of B. Same MAC in another VLAN is another station.
        let merged = merge_fdb([
            entry(1, 0xA, 1, 20),
            entry(1, 0xB, 5, 10),
            entry(1, 0xA, 0, 15),
            entry(1, 0xB, 5, 12),
            entry(2, 0xA, 3, 1),
        ]);
        assert_eq!(
            merged,
            vec![
                entry(1, 0xA, 1, 20),
                entry(1, 0xB, 5, 12),
                entry(2, 0xA, 3, 1)
            ]
        );
    }

    #[test]
    fn every_example_config_builds_a_core() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config");
        let mut n = 0;
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                // Every CPU an example names, so that the lcore tables load on any machine.
                let options = headroom_config::ParseOptions::with_allowed_cpus(0..64);
                let (config, _) = headroom_config::load_with(&path, &options)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                let spec = RuntimeSpec::for_config(&config)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert_eq!(spec.devices.len(), spec.params.ports.len());
                assert_eq!(spec.lcores.len(), config.runtime.lcores.len());
                let parts = headroom_core::switch::build::<headroom_core::frame::HeapFrame>(
                    spec.params.clone(),
                    spec.layout().unwrap(),
                    Instant::ZERO,
                );
                assert!(parts.is_ok(), "{}: {:?}", path.display(), parts.err());
                n += 1;
            }
        }
        assert!(n >= 4);
    }
}
