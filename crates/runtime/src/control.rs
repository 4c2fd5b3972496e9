//! The control plane of a running switch: the Unix control socket, counter views (with SONiC's
//! clear-by-snapshot semantics and counters carried over reconfigurations), watermark views on
//! top of the read-and-clear source, runtime changes, configuration snapshots and captures.
//!
//! Single-threaded: the `headroom run` main loop calls [`ControlPlane::poll`] every few tens
//! of milliseconds. Nothing here touches lcore state except through atomics, the lcores'
//! command rings and the capture rings.

mod clients;

pub use clients::{CLIENTS_MAX, REQUEST_BYTES_MAX, REQUEST_DEADLINE, RESPONSE_DEADLINE};

use crate::ledger::{DelayTally, Ledger, PortTally};
use crate::mirror::{CAPTURE_CONTROL_ONLY, CAPTURE_RX, CAPTURE_TX};
use crate::protocol::{
    CaptureRequest, Change, Clear, DelayHistogramRow, FdbRow, PfcCounters, PfcPriority,
    PfcwdConfig, PfcwdConfigRow, PfcwdStatsRow, PgCountersRow, PgDropRow, PgWatermarkKind,
    PoolWatermarkRow, PortSummary, PortstatRow, QueueCounters, QueueWatermarkKind, Request,
    Response, RunningConfig, Show, Snapshot, WatermarkRow,
};
use crate::rates::{utilisation_percent, RateInputs, RateMeter, RATE_INTERVAL};
use crate::Running;
use headroom_config::Config;
use headroom_core::counters::DropReason;
use headroom_core::shared::Shared;
use headroom_core::stats::PortStats;
use headroom_core::types::{PortId, PRIORITY_COUNT};
use headroom_io::BackendStats;
use std::io::{self, ErrorKind, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// How often watermarks are folded from the read-and-clear source into the views.
const WATERMARK_POLL: Duration = Duration::from_millis(500);

/// How often the ports' link state is read (a port going down flushes its MAC table entries).
const LINK_POLL: Duration = Duration::from_millis(100);

/// Most requests served per [`ControlPlane::poll`] (bounded work per call).
const REQUESTS_PER_POLL: usize = 16;

/// `show fdb` asks the lcores for their MAC tables at most this often; requests in between are
/// answered from the last dump, so that many clients cannot make the lcores dump on every poll.
pub const FDB_DUMP_INTERVAL: Duration = Duration::from_millis(200);

/// Bytes of capture records buffered per capture client; a client that reads slower than its
/// port is captured loses whole records (counted) rather than stalling the control loop.
const CAPTURE_BUFFER_BYTES: usize = 1 << 20;

pub use crate::ledger::WatchdogTotals;

/// A stopped dataplane's final counters, which the control plane carries into the next one:
/// its shared state, and its ports' backend counters read just before it stopped (they go with
/// the ports).
#[derive(Debug)]
pub struct Retired {
    shared: Arc<Shared>,
    backend: Vec<BackendStats>,
}

impl Retired {
    /// Reads the backends' counters, then stops the dataplane (drain, join).
    #[must_use]
    pub fn stop(running: Running) -> Self {
        let backend = (0..running.shared().params.ports.len())
            .map(|p| running.backend_stats(port_id(p)))
            .collect();
        Self {
            shared: running.stop(),
            backend,
        }
    }

    /// The stopped dataplane's shared state.
    #[must_use]
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Everything it counted about `port`.
    fn tally(&self, port: usize) -> PortTally {
        live_tally(
            &self.shared,
            self.backend.get(port).copied().unwrap_or_default(),
            port,
            headroom_core::time::Instant::MAX,
        )
    }
}

/// What a dataplane counted about `port` at `now` (its sides' counters summed, the watchdog's
/// and the delay histograms of the egress side that owns the port), with `backend` the port's
/// backend counters.
fn live_tally(
    shared: &Shared,
    backend: BackendStats,
    port: usize,
    now: headroom_core::time::Instant,
) -> PortTally {
    let egress = &shared.egress_counters[shared.layout.egress_side_of_port[port]];
    PortTally {
        stats: shared.port_stats(port_id(port), now),
        backend,
        pfcwd: core::array::from_fn(|q| WatchdogTotals::read(&egress.watchdog[port][q])),
        delay: DelayTally(core::array::from_fn(|q| {
            let buckets = &egress.ports[port].queue_delay_buckets[q].0;
            core::array::from_fn(|b| buckets[b].get())
        })),
    }
}

/// SONiC's portstat columns of one port, computed from its tally (the dataplane's drops by
/// class and the backend's counters): the one place `show interfaces counters` and the
/// Prometheus exporter take them from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortstatCounts {
    /// `RX_OK`.
    pub rx_ok: u64,
    /// `RX_ERR`.
    pub rx_err: u64,
    /// `RX_DRP`: ingress discards, plus what the kernel or NIC dropped before the switch saw it
    /// (`backend_rx_missed`, and frames the pool had no buffer for).
    pub rx_drp: u64,
    /// `RX_OVR`.
    pub rx_ovr: u64,
    /// `TX_OK`.
    pub tx_ok: u64,
    /// `TX_ERR`: frames the device refused.
    pub tx_err: u64,
    /// `TX_DRP`.
    pub tx_drp: u64,
}

impl PortstatCounts {
    /// The columns of `t`.
    #[must_use]
    pub fn of(t: &PortTally) -> Self {
        let s = &t.stats;
        Self {
            rx_ok: s.rx_ok_frames,
            rx_err: s.rx_error_frames,
            rx_drp: s.rx_discard_frames + t.backend.rx_missed + t.backend.rx_no_buffer,
            rx_ovr: s.rx_oversize_frames,
            tx_ok: s.tx_frames(),
            tx_err: s.tx_error_frames + t.backend.tx_failed,
            tx_drp: s.tx_discard_frames,
        }
    }
}

/// Per-port watermark views, bytes.
#[derive(Clone, Copy, Debug, Default)]
pub struct PortMarks {
    /// Highest shared use per PG.
    pub pg_shared: [u64; PRIORITY_COUNT],
    /// Highest headroom use per PG.
    pub pg_headroom: [u64; PRIORITY_COUNT],
    /// Highest shared use per queue (above its reserved size: SAI's
    /// `QUEUE_STAT_SHARED_WATERMARK_BYTES`).
    pub queue_shared: [u64; PRIORITY_COUNT],
    /// Highest total use per queue (reserved and shared).
    pub queue_total: [u64; PRIORITY_COUNT],
}

/// A watermark view: SONiC's USER or PERSISTENT table.
#[derive(Clone, Debug, Default)]
pub struct Marks {
    /// Per port.
    pub ports: Vec<PortMarks>,
    /// Per pool: (shared, shared headroom pool).
    pub pools: Vec<(u64, u64)>,
}

impl Marks {
    fn new(ports: usize, pools: usize) -> Self {
        Self {
            ports: vec![PortMarks::default(); ports],
            pools: vec![(0, 0); pools],
        }
    }

    fn fold(&mut self, port: usize, w: &headroom_core::stats::PortWatermarks) {
        let m = &mut self.ports[port];
        for i in 0..PRIORITY_COUNT {
            m.pg_shared[i] = m.pg_shared[i].max(w.pg_shared[i]);
            m.pg_headroom[i] = m.pg_headroom[i].max(w.pg_headroom[i]);
            m.queue_shared[i] = m.queue_shared[i].max(w.queue_shared[i]);
            m.queue_total[i] = m.queue_total[i].max(w.queue_total[i]);
        }
    }
}

struct CaptureSession {
    stream: UnixStream,
    port: u16,
    flags: u8,
    /// Bytes not yet written to the client (whole records only), from `written` on.
    output: Vec<u8>,
    written: usize,
    /// Records that did not fit in the buffer.
    lost: u64,
}

impl CaptureSession {
    /// Writes what the socket takes; `false` when the client is gone.
    fn flush(&mut self) -> bool {
        while self.written < self.output.len() {
            match self.stream.write(&self.output[self.written..]) {
                Ok(0) => return false,
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
        if self.written == self.output.len() {
            self.output.clear();
            self.written = 0;
        }
        true
    }

    /// Appends one record if it fits whole.
    fn push(&mut self, record: &[u8]) {
        if self.output.len() - self.written + record.len() > CAPTURE_BUFFER_BYTES {
            self.lost += 1;
            return;
        }
        if self.written > 0 && self.output.len() + record.len() > CAPTURE_BUFFER_BYTES {
            self.output.drain(..self.written);
            self.written = 0;
        }
        self.output.extend_from_slice(record);
    }
}

/// What serving a request leads to.
enum Outcome {
    /// Answer now.
    Respond(Response),
    /// Answer once the caller applied this change ([`ControlPlane::applied`]).
    Apply(ControlAction),
    /// Answer, then stream this port's frames.
    Capture(CaptureRequest),
    /// Answer `show fdb` from a dump taken after the request arrived.
    Fdb,
}

/// A configuration change the caller must apply by restarting the dataplane.
#[derive(Debug)]
pub enum ControlAction {
    /// Nothing to do.
    None,
    /// Replace the running configuration with this one (already validated); then call
    /// [`ControlPlane::applied`].
    Apply {
        /// The new TOML text.
        text: String,
        /// The validated configuration.
        config: Box<Config>,
        /// What asked for it, for the log.
        reason: String,
    },
}

/// The control plane of one running switch.
pub struct ControlPlane {
    listener: UnixListener,
    socket_path: PathBuf,
    snapshots_dir: PathBuf,
    config_path: PathBuf,
    config_text: String,
    config: Config,
    /// Per port: what replaced dataplanes counted and the last clear's snapshot, for every
    /// counter of the port (`crate::ledger`).
    ledgers: Vec<Ledger<PortTally>>,
    /// FDB updates lost to full learn rings, summed over ingress sides (the layout may change
    /// with a reconfiguration).
    fdb_sync_overflow: Ledger<u64>,
    /// Per port: rates for `show interfaces counters`, sampled every [`RATE_INTERVAL`].
    rates: Vec<RateMeter>,
    last_rate_sample: std::time::Instant,
    user_marks: Marks,
    persistent_marks: Marks,
    last_watermark_poll: std::time::Instant,
    captures: Vec<CaptureSession>,
    /// Connections of the control socket in progress.
    clients: clients::Clients,
    /// The client waiting for a reconfiguration's outcome.
    pending: Option<clients::Client>,
    /// Dumps of the lcores' MAC tables taken for `show fdb`.
    fdb_dumps: u64,
    /// `show fdb` requests waiting for a dump taken after they arrived.
    fdb_waiting: Vec<clients::Client>,
    /// The last `show fdb` dump and when it was taken.
    fdb_cache: Option<(std::time::Instant, Vec<headroom_core::fdb::FdbEntry>)>,
    started: std::time::Instant,
    /// `[port][priority]`: PFC storm-rate alarm active.
    alarms: Vec<[bool; PRIORITY_COUNT]>,
    /// The dataplane was replaced: its capture flags must be set again.
    capture_flags_stale: bool,
    /// Link state of each port at the last link poll (`None`: unknown or not read yet).
    links: Vec<Option<bool>>,
    last_link_poll: std::time::Instant,
    /// The routed ports' host interfaces and the netlink mirror (`None`: no routed port, or
    /// not opened yet).
    host: Option<crate::host_interfaces::HostInterfaces>,
    /// The LLDP/DCBX agent (`crate::lldp`).
    lldp: crate::lldp::Lldp,
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.socket_path);
    }
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("socket", &self.socket_path)
            .finish_non_exhaustive()
    }
}

fn port_id(i: usize) -> PortId {
    PortId(u16::try_from(i).unwrap_or(u16::MAX))
}

impl ControlPlane {
    /// Listens on the configuration's control socket, mode 0600 from the moment it has its
    /// name (it is bound under a temporary name, restricted, then renamed into place). A socket
    /// file nobody listens on (left by a switch that was killed) is replaced; one that a
    /// running switch listens on is refused. `text` is the configuration file's content, kept
    /// for `set` and `show config`.
    ///
    /// # Errors
    /// When the socket cannot be created, or another switch listens on it.
    pub fn bind(config_path: &Path, text: String, config: Config) -> io::Result<Self> {
        let socket_path = config.runtime.control_socket.clone();
        if let Some(dir) = socket_path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let listener = bind_owner_only(&socket_path)?;
        listener.set_nonblocking(true)?;
        let ports = config.ports.len();
        let pools = config.pools.len();
        let mut snapshots_dir = socket_path.clone().into_os_string();
        snapshots_dir.push(".snapshots");
        // A save interrupted by a crash left its temporary file; the snapshot itself is whole.
        let removed = crate::atomic_file::remove_stale_temporaries(Path::new(&snapshots_dir));
        if removed > 0 {
            tracing::info!(
                removed,
                "removed the temporary files of interrupted snapshot saves"
            );
        }
        Ok(Self {
            listener,
            snapshots_dir: PathBuf::from(snapshots_dir),
            socket_path,
            config_path: config_path.to_owned(),
            config_text: text,
            ledgers: vec![Ledger::default(); ports],
            fdb_sync_overflow: Ledger::default(),
            rates: vec![RateMeter::default(); ports],
            // The first poll takes the first sample.
            last_rate_sample: std::time::Instant::now()
                .checked_sub(RATE_INTERVAL)
                .unwrap_or_else(std::time::Instant::now),
            user_marks: Marks::new(ports, pools),
            persistent_marks: Marks::new(ports, pools),
            last_watermark_poll: std::time::Instant::now(),
            captures: Vec::new(),
            clients: clients::Clients::default(),
            pending: None,
            fdb_cache: None,
            fdb_waiting: Vec::new(),
            started: std::time::Instant::now(),
            alarms: vec![[false; PRIORITY_COUNT]; ports],
            capture_flags_stale: false,
            fdb_dumps: 0,
            links: vec![None; ports],
            // The first poll reads the links.
            last_link_poll: std::time::Instant::now()
                .checked_sub(LINK_POLL)
                .unwrap_or_else(std::time::Instant::now),
            lldp: crate::lldp::Lldp::new(&config),
            config,
            host: None,
        })
    }

    /// Creates the host interfaces of `config`'s routed ports and starts the netlink mirror,
    /// or keeps those that exist if they fit (a reconfiguration); closes them when no port is
    /// routed any more. Call before starting the dataplane of `config` (it takes its FIB from
    /// [`ControlPlane::fib`]).
    ///
    /// # Errors
    /// A TAP or the mirror could not be created (see
    /// [`crate::host_interfaces::HostInterfaces::open`]).
    pub fn open_host_interfaces(&mut self, config: &Config) -> Result<(), String> {
        crate::host_interfaces::reconcile(&mut self.host, config)
    }

    /// The FIB a dataplane starts with (`None` without routed ports).
    pub fn fib(&mut self) -> Option<Arc<headroom_core::route::Fib>> {
        self.host
            .as_mut()
            .map(crate::host_interfaces::HostInterfaces::fib)
    }

    /// The host interfaces, if any.
    #[must_use]
    pub fn host_interfaces(&self) -> Option<&crate::host_interfaces::HostInterfaces> {
        self.host.as_ref()
    }

    /// The control loop's wait: up to `timeout` and at most until the LLDP agent's next
    /// deadline, or [`crate::host_interfaces::ROUTED_TURN`] with host interfaces (woken at once
    /// by a TAP or netlink), so that punted frames reach the kernel promptly.
    pub fn wait(&self, timeout: Duration) {
        let timeout = self
            .lldp
            .until_deadline()
            .map_or(timeout, |d| timeout.min(d));
        match &self.host {
            Some(h) => h.wait(timeout.min(crate::host_interfaces::ROUTED_TURN)),
            None if timeout.is_zero() => {}
            None => std::thread::sleep(timeout),
        }
    }

    /// One turn of the frames between the dataplane and the control plane: punted LLDP frames
    /// to the LLDP agent (on ports where it runs), other punted frames to the routed ports' and
    /// VLAN interfaces' host interfaces (what neither takes is counted unconsumed and dropped); the kernel's frames
    /// from the TAPs to the dataplane and its FIB to the lcores; the agent's timers, LLDPDUs
    /// (injected) and events (logged).
    pub fn pump_control_frames(&mut self, running: &mut Running) {
        let (host, lldp) = (&mut self.host, &mut self.lldp);
        running.drain_punts_to(&mut |port, vlan, reason, frame| {
            if reason == headroom_core::punt::PuntReason::Lldp && lldp.owns(port) {
                lldp.handle_punt(port, frame);
                return true;
            }
            host.as_mut()
                .is_some_and(|h| h.deliver_punt(port, vlan, frame))
        });
        if let Some(h) = host {
            h.pump(running);
        }
        lldp.pump(running);
    }

    /// The LLDP/DCBX agent.
    #[must_use]
    pub fn lldp(&self) -> &crate::lldp::Lldp {
        &self.lldp
    }

    /// Sends every transmitting port's shutdown LLDPDU (TTL 0) through `running`; call before
    /// the final stop, which drains them out.
    pub fn shutdown_lldp(&mut self, running: &mut Running) {
        self.lldp.shutdown(running);
    }

    fn port_names(&self) -> Vec<String> {
        self.config.ports.iter().map(|p| p.name.clone()).collect()
    }

    /// The running configuration.
    #[must_use]
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Records what an event means for the views (storm-rate alarms).
    pub fn note_event(&mut self, event: &headroom_core::events::Event) {
        use headroom_core::events::Event;
        match *event {
            Event::PfcRateHigh { port, priority, .. } => {
                if let Some(a) = self.alarms.get_mut(port.index()) {
                    a[priority.index()] = true;
                }
            }
            Event::PfcRateNormal { port, priority, .. } => {
                if let Some(a) = self.alarms.get_mut(port.index()) {
                    a[priority.index()] = false;
                }
            }
            Event::StormDetected { .. } | Event::StormRestored { .. } => {}
        }
    }

    /// Whether the PFC storm-rate alarm of `(port, priority)` is active.
    #[must_use]
    pub fn storm_alarm(&self, port: usize, priority: usize) -> bool {
        self.alarms.get(port).is_some_and(|a| a[priority])
    }

    /// The persistent watermark view, bytes.
    #[must_use]
    pub fn persistent_watermarks(&self) -> &Marks {
        &self.persistent_marks
    }

    /// The running configuration's TOML text.
    #[must_use]
    pub fn config_text(&self) -> &str {
        &self.config_text
    }

    /// The socket path.
    #[must_use]
    pub fn socket_path(&self) -> &Path {
        &self.socket_path
    }

    /// What the running dataplane counted about `port` so far.
    fn live(&self, running: &Running, port: usize) -> PortTally {
        live_tally(
            running.shared(),
            running.backend_stats(port_id(port)),
            port,
            running.clock().now(),
        )
    }

    /// Every counter of `port` since start (carried over reconfigurations), before any clear:
    /// what Prometheus exports.
    #[must_use]
    pub fn port_totals(&self, running: &Running, port: usize) -> PortTally {
        self.ledgers[port].total(&self.live(running, port))
    }

    /// Every counter of `port` as operators see them: since the last `clear counters`.
    #[must_use]
    pub fn port_visible(&self, running: &Running, port: usize) -> PortTally {
        self.ledgers[port].visible(&self.live(running, port))
    }

    /// The dataplane's counters of `port` since start, before any clear.
    #[must_use]
    pub fn total_stats(&self, running: &Running, port: usize) -> PortStats {
        self.port_totals(running, port).stats
    }

    /// Every counter of `port` since start from a stopped dataplane's final state.
    #[must_use]
    pub fn final_totals(&self, old: &Retired, port: usize) -> PortTally {
        self.ledgers[port].total(&old.tally(port))
    }

    /// The dataplane's counters of `port` as operators see them (minus the last clear).
    #[must_use]
    pub fn visible_stats(&self, running: &Running, port: usize) -> PortStats {
        self.port_visible(running, port).stats
    }

    /// FDB updates that an ingress side could not pass to another because the learn ring was
    /// full, summed over ingress sides, since start (carried over reconfigurations). Each loss
    /// is repaired by republishing (see `headroom_core::fdb_sync`); a steadily rising count
    /// means stations are learned faster than the lcores drain their rings.
    #[must_use]
    pub fn fdb_sync_overflow_total(&self, shared: &Shared) -> u64 {
        self.fdb_sync_overflow.total(&fdb_sync_overflow(shared))
    }

    /// The smoothed rates of `port` for `show interfaces counters` (`None` until two samples
    /// a second apart were taken).
    #[must_use]
    pub fn rates(&self, port: usize) -> Option<crate::rates::Rates> {
        self.rates.get(port).and_then(RateMeter::rates)
    }

    /// Takes a rate sample of every port (totals since start: a clear does not disturb rates,
    /// nor does a reconfiguration).
    fn sample_rates(&mut self, running: &Running) {
        let at = std::time::Instant::now();
        for p in 0..self.config.ports.len() {
            let t = self.port_totals(running, p);
            let c = PortstatCounts::of(&t);
            self.rates[p].sample(
                at,
                RateInputs {
                    rx_bytes: t.stats.rx_bytes,
                    tx_bytes: t.stats.tx_bytes(),
                    rx_frames: c.rx_ok,
                    tx_frames: c.tx_ok,
                },
            );
        }
    }

    /// Serves pending requests, folds watermarks, streams captures. Returns a change that needs
    /// a dataplane restart, if a client asked for one.
    pub fn poll(&mut self, running: &mut Running) -> ControlAction {
        if self.last_watermark_poll.elapsed() >= WATERMARK_POLL {
            self.fold_watermarks(running.shared());
            self.last_watermark_poll = std::time::Instant::now();
        }
        if self.last_link_poll.elapsed() >= LINK_POLL {
            self.poll_links(running);
            self.last_link_poll = std::time::Instant::now();
        }
        if self.last_rate_sample.elapsed() >= RATE_INTERVAL {
            self.sample_rates(running);
            self.last_rate_sample = std::time::Instant::now();
        }
        if self.capture_flags_stale {
            // A new dataplane starts with no port captured.
            self.update_capture_flags(running);
            self.capture_flags_stale = false;
        }
        self.pump_captures(running);
        // One reconfiguration at a time: while one is pending, complete requests wait.
        let max = if self.pending.is_some() {
            0
        } else {
            REQUESTS_PER_POLL
        };
        let ready = self.clients.poll(&self.listener, max, true);
        let mut action = ControlAction::None;
        for (mut client, line) in ready {
            if !matches!(action, ControlAction::None) {
                // A reconfiguration was asked for earlier in this poll: the rest wait for the
                // next one, after it is applied.
                client.respond(
                    &Response::error("busy: a reconfiguration is in progress; try again"),
                    std::time::Instant::now(),
                );
                self.clients.push(client);
                continue;
            }
            match self.serve(&line, running) {
                Outcome::Respond(response) => {
                    client.respond(&response, std::time::Instant::now());
                    self.clients.push(client);
                }
                Outcome::Apply(apply) => {
                    self.pending = Some(client);
                    action = apply;
                }
                Outcome::Capture(req) => self.start_capture(req, client, running),
                Outcome::Fdb => self.fdb_waiting.push(client),
            }
        }
        self.answer_fdb_requests(running);
        action
    }

    /// Connections to the control socket open now (reading a request or writing a response;
    /// captures not included).
    #[must_use]
    pub fn clients_connected(&self) -> usize {
        self.clients.len()
    }

    /// What the control socket refused since start: (busy, peer not allowed, deadline missed,
    /// oversized request).
    #[must_use]
    pub fn clients_refused(&self) -> (u64, u64, u64, u64) {
        let c = &self.clients;
        (c.refused_busy, c.refused_peer, c.timed_out, c.oversized)
    }

    /// Dumps of the lcores' MAC tables `show fdb` asked for since start.
    #[must_use]
    pub fn fdb_dumps(&self) -> u64 {
        self.fdb_dumps
    }

    /// Reads every port's link state; a port that went down has its stations forgotten, as a
    /// switch does when a port's MAC becomes non-operational (IEEE 802.1Q 8.8.3: dynamic
    /// entries are removed when their port leaves the forwarding state; SONiC flushes the
    /// port's FDB entries on oper down). Otherwise frames to those stations would keep going
    /// to a dead port until they age out (300 s by default) instead of being flooded.
    fn poll_links(&mut self, running: &mut Running) {
        for p in 0..self.config.ports.len() {
            let now = running.link_up(port_id(p));
            let before = std::mem::replace(&mut self.links[p], now);
            // A routed port's host interface has the port's carrier (reference §1.5).
            if let (Some(up), Some(host)) = (now, &self.host) {
                if before != now {
                    host.set_carrier(port_id(p), up);
                }
            }
            // 802.1AB portEnabled: neighbours forgotten on down, fast LLDPDUs on up.
            match (before, now) {
                (Some(true), Some(false)) => self.lldp.set_link(port_id(p), false),
                (Some(false), Some(true)) => self.lldp.set_link(port_id(p), true),
                _ => {}
            }
            if before == Some(true) && now == Some(false) {
                self.fdb_cache = None;
                running.flush_fdb(Some(port_id(p)));
                tracing::info!(port = %self.config.ports[p].name, "link down: the port's MAC table entries are flushed");
            }
        }
    }

    fn fold_watermarks(&mut self, shared: &Shared) {
        for p in 0..self.config.ports.len() {
            let w = shared.take_port_watermarks(port_id(p));
            self.user_marks.fold(p, &w);
            self.persistent_marks.fold(p, &w);
        }
        for pool in 0..self.config.pools.len() {
            let w = shared.take_pool_watermarks(pool);
            for marks in [&mut self.user_marks, &mut self.persistent_marks] {
                let m = &mut marks.pools[pool];
                m.0 = m.0.max(w.shared);
                m.1 = m.1.max(w.headroom);
            }
        }
    }

    fn serve(&mut self, line: &[u8], running: &mut Running) -> Outcome {
        let request = match crate::protocol::parse_request(line) {
            Ok(r) => r,
            Err(e) => return Outcome::Respond(Response::error(e)),
        };
        match request {
            Request::Show { what: Show::Fdb } => Outcome::Fdb,
            Request::Show { what } => Outcome::Respond(self.show(what, running)),
            Request::Clear { what } => Outcome::Respond(match self.clear(what, running) {
                Ok(()) => Response::ok("cleared"),
                Err(e) => Response::error(e),
            }),
            Request::Set { change } => self.set(change, running),
            Request::ConfigSave { name } => Outcome::Respond(self.save(&name)),
            Request::ConfigRollback { name } => self.rollback(&name),
            Request::ConfigList => Outcome::Respond(self.list()),
            Request::Capture(req) => Outcome::Capture(req),
        }
    }

    fn show(&mut self, what: Show, running: &mut Running) -> Response {
        let ports = &self.config.ports;
        match what {
            Show::PfcCounters => Response::ok(self.pfc_counters(running)),
            Show::PfcPriority => Response::ok(
                ports
                    .iter()
                    .map(|p| PfcPriority {
                        port: p.name.clone(),
                        lossless: p.pfc_enable.to_sonic_string(),
                    })
                    .collect::<Vec<_>>(),
            ),
            Show::QueueCounters | Show::Ecn => Response::ok(self.queue_counters(running)),
            Show::QueueWatermark { persistent, kind } => {
                self.fold_watermarks(running.shared());
                let marks = if persistent {
                    &self.persistent_marks
                } else {
                    &self.user_marks
                };
                Response::ok(self.rows(|p| match kind {
                    QueueWatermarkKind::Shared => marks.ports[p].queue_shared,
                    QueueWatermarkKind::Total => marks.ports[p].queue_total,
                }))
            }
            Show::PgWatermark { kind, persistent } => {
                self.fold_watermarks(running.shared());
                let marks = if persistent {
                    &self.persistent_marks
                } else {
                    &self.user_marks
                };
                Response::ok(self.rows(|p| match kind {
                    PgWatermarkKind::Shared => marks.ports[p].pg_shared,
                    PgWatermarkKind::Headroom => marks.ports[p].pg_headroom,
                }))
            }
            Show::PgDrop => Response::ok(
                (0..ports.len())
                    .map(|p| {
                        let s = self.visible_stats(running, p);
                        PgDropRow {
                            port: ports[p].name.clone(),
                            drops: s.pgs.map(|g| g.drops),
                        }
                    })
                    .collect::<Vec<_>>(),
            ),
            Show::PgCounters => Response::ok(
                (0..ports.len())
                    .map(|p| {
                        let s = self.visible_stats(running, p);
                        PgCountersRow {
                            port: ports[p].name.clone(),
                            packets: s.pgs.map(|g| g.frames),
                            bytes: s.pgs.map(|g| g.bytes),
                            drop_packets: s.pgs.map(|g| g.drops),
                        }
                    })
                    .collect::<Vec<_>>(),
            ),
            Show::InterfacesCounters => Response::ok(self.portstat(running)),
            Show::BufferPoolWatermark { persistent } => {
                self.fold_watermarks(running.shared());
                let marks = if persistent {
                    &self.persistent_marks
                } else {
                    &self.user_marks
                };
                Response::ok(
                    self.config
                        .pools
                        .iter()
                        .zip(&marks.pools)
                        .map(|(pool, (s, h))| PoolWatermarkRow {
                            pool: pool.name.clone(),
                            shared_bytes: *s,
                            headroom_bytes: *h,
                        })
                        .collect::<Vec<_>>(),
                )
            }
            Show::PfcwdConfig => Response::ok(self.pfcwd_config()),
            Show::PfcwdStats => Response::ok(self.pfcwd_stats(running)),
            Show::Ports => Response::ok(self.port_summaries(running)),
            Show::IpRoute => Response::ok(match &self.host {
                Some(h) => h.route_table(&self.port_names()),
                None => crate::protocol::IpRouteTable::default(),
            }),
            Show::IpNeighbors => Response::ok(match &self.host {
                Some(h) => h.neighbors(&self.port_names()),
                None => Vec::new(),
            }),
            Show::HostInterfaces => {
                let unconsumed = running.punted_unconsumed();
                Response::ok(crate::protocol::HostInterfacesView {
                    interfaces: self
                        .host
                        .as_ref()
                        .map(|h| h.rows(&|p| self.total_stats(running, p.index())))
                        .unwrap_or_default(),
                    punted_unconsumed: headroom_core::punt::PuntReason::ALL
                        .iter()
                        .map(|r| (r.name().to_owned(), unconsumed[r.index()]))
                        .collect(),
                })
            }
            Show::Fdb => {
                if self.fdb_cache.is_none() {
                    self.fdb_dumps += 1;
                    self.fdb_cache = Some((std::time::Instant::now(), running.fdb()));
                }
                let ports = &self.config.ports;
                let now = running.clock().now();
                let entries = self.fdb_cache.as_ref().map_or(&[][..], |(_, e)| e);
                let mut rows: Vec<FdbRow> = entries
                    .iter()
                    .map(|e| FdbRow {
                        vlan: e.vid,
                        mac: e
                            .mac
                            .iter()
                            .map(|b| format!("{b:02x}"))
                            .collect::<Vec<_>>()
                            .join(":"),
                        port: ports
                            .get(e.port.index())
                            .map_or_else(|| e.port.to_string(), |p| p.name.clone()),
                        age_s: if e.is_static {
                            0
                        } else {
                            now.saturating_nanos_since(e.last_seen) / 1_000_000_000
                        },
                        kind: if e.is_static { "static" } else { "dynamic" }.into(),
                    })
                    .collect();
                rows.sort_by(|a, b| (a.vlan, &a.mac).cmp(&(b.vlan, &b.mac)));
                Response::ok(rows)
            }
            Show::LldpNeighbors => Response::ok(self.lldp.view()),
            Show::Dcbx => Response::ok(self.lldp.dcbx()),
            Show::Config => Response::ok(RunningConfig {
                file: self.config_path.display().to_string(),
                text: self.config_text.clone(),
                derived: headroom_config::derived(&self.config).to_string(),
            }),
            Show::Snapshot => Response::ok(self.snapshot(running)),
        }
    }

    fn dump_fdb(&mut self, running: &mut Running) {
        self.fdb_dumps += 1;
        self.fdb_cache = Some((std::time::Instant::now(), running.fdb()));
    }

    /// Answers the `show fdb` requests that wait, from one dump of the lcores' tables: a dump
    /// answers every request that arrived before it was taken, and a new dump is taken at most
    /// every [`FDB_DUMP_INTERVAL`] (requests that arrive in between wait for it). Every answer
    /// is thus as fresh as the request, and the lcores dump at most 5 times a second whatever
    /// the number of clients.
    fn answer_fdb_requests(&mut self, running: &mut Running) {
        if self.fdb_waiting.is_empty() {
            return;
        }
        let due = self
            .fdb_cache
            .as_ref()
            .is_none_or(|(at, _)| at.elapsed() >= FDB_DUMP_INTERVAL);
        if due {
            self.dump_fdb(running);
        }
        let Some(dumped_at) = self.fdb_cache.as_ref().map(|(at, _)| *at) else {
            return;
        };
        let mut response = None;
        let now = std::time::Instant::now();
        for mut client in std::mem::take(&mut self.fdb_waiting) {
            if client.ready_at > dumped_at {
                self.fdb_waiting.push(client);
                continue;
            }
            let response = response.get_or_insert_with(|| self.show(Show::Fdb, running));
            client.respond(response, now);
            self.clients.push(client);
        }
    }

    fn rows(&self, f: impl Fn(usize) -> [u64; PRIORITY_COUNT]) -> Vec<WatermarkRow> {
        self.config
            .ports
            .iter()
            .enumerate()
            .map(|(p, port)| WatermarkRow {
                port: port.name.clone(),
                bytes: f(p),
            })
            .collect()
    }

    fn pfc_counters(&self, running: &Running) -> Vec<PfcCounters> {
        self.config
            .ports
            .iter()
            .enumerate()
            .map(|(p, port)| {
                let s = self.visible_stats(running, p);
                PfcCounters {
                    port: port.name.clone(),
                    rx: s.pfc_rx,
                    tx: s.pfc_tx,
                    rx_paused_us: s.paused_ns.map(|ns| ns / 1000),
                    pause_rx: s.pause_rx,
                }
            })
            .collect()
    }

    fn queue_counters(&self, running: &Running) -> Vec<QueueCounters> {
        let mut rows = Vec::new();
        for (p, port) in self.config.ports.iter().enumerate() {
            let s = self.visible_stats(running, p);
            for (q, qs) in s.queues.iter().enumerate() {
                rows.push(QueueCounters {
                    port: port.name.clone(),
                    queue: u8::try_from(q).unwrap_or(0),
                    packets: qs.tx_frames,
                    bytes: qs.tx_bytes,
                    drop_packets: qs.drop_frames,
                    drop_bytes: qs.drop_bytes,
                    ecn_marked: qs.ecn_marked,
                    depth_bytes: qs.depth_bytes,
                    mean_delay_ns: qs.delay_ns_sum.checked_div(qs.tx_frames).unwrap_or(0),
                });
            }
        }
        rows
    }

    fn pfcwd_config(&self) -> PfcwdConfig {
        PfcwdConfig {
            poll_interval_ms: u64::from(self.config.pfcwd.poll_interval_ms),
            big_red_switch: self.config.pfcwd.big_red_switch,
            ports: self
                .config
                .ports
                .iter()
                .map(|p| PfcwdConfigRow {
                    port: p.name.clone(),
                    action: if p.pfcwd.enabled {
                        format!("{:?}", p.pfcwd.action).to_lowercase()
                    } else {
                        "disabled".into()
                    },
                    detection_time_ms: u64::from(p.pfcwd.detection_time_ms),
                    restoration_time_ms: u64::from(p.pfcwd.restoration_time_ms),
                    priorities: p.pfcwd_enable.to_sonic_string(),
                })
                .collect(),
        }
    }

    fn pfcwd_stats(&self, running: &Running) -> Vec<PfcwdStatsRow> {
        let shared = running.shared();
        let mut rows = Vec::new();
        for (p, port) in self.config.ports.iter().enumerate() {
            if !port.pfcwd.enabled {
                continue;
            }
            let visible = self.port_visible(running, p);
            let side = shared.layout.egress_side_of_port[p];
            let params = &shared.params.ports[p];
            for q in 0..PRIORITY_COUNT {
                let watched = headroom_core::types::Priority::ALL.iter().any(|pr| {
                    port.pfcwd_enable.contains(pr.get())
                        && params.maps.pfc_to_queue[pr.index()].index() == q
                });
                if !watched {
                    continue;
                }
                let w = visible.pfcwd[q];
                rows.push(PfcwdStatsRow {
                    queue: format!("{}:{q}", port.name),
                    status: if shared.egress_counters[side].watchdog[p][q].stormed.get() == 1 {
                        "stormed"
                    } else {
                        "operational"
                    }
                    .into(),
                    storm_detected: w.detected,
                    storm_restored: w.restored,
                    tx_ok: w.tx_ok,
                    tx_drop: w.tx_drop,
                    rx_ok: w.rx_ok,
                    rx_drop: w.rx_drop,
                    tx_last_ok: w.last[0],
                    tx_last_drop: w.last[1],
                    rx_last_ok: w.last[2],
                    rx_last_drop: w.last[3],
                });
            }
        }
        rows
    }

    fn port_summaries(&self, running: &Running) -> Vec<PortSummary> {
        self.config
            .ports
            .iter()
            .enumerate()
            .map(|(p, port)| {
                let t = self.port_visible(running, p);
                let (s, backend) = (&t.stats, &t.backend);
                PortSummary {
                    port: port.name.clone(),
                    device: port.device.clone(),
                    speed_mbps: port.speed_mbps,
                    link: match running.link_up(port_id(p)) {
                        Some(true) => "up",
                        Some(false) => "down",
                        None => "unknown",
                    }
                    .to_owned(),
                    tx_enabled: running.shared().tx_enabled(port_id(p)),
                    rx_frames: s.rx_frames,
                    rx_bytes: s.rx_bytes,
                    tx_frames: s.tx_frames(),
                    tx_bytes: s.tx_bytes(),
                    drops: DropReason::ALL
                        .iter()
                        .filter(|r| s.drops[r.index()] > 0)
                        .map(|r| (r.name().to_owned(), s.drops[r.index()]))
                        .collect(),
                    backend_rx_missed: backend.rx_missed,
                    backend_tx_failed: backend.tx_failed,
                    pause_rx_ignored: s.pause_rx_ignored,
                    fdb_learn_table_full: s.fdb_learn_table_full,
                }
            })
            .collect()
    }

    /// SONiC's portstat rows (`show interfaces counters`).
    fn portstat(&self, running: &Running) -> Vec<PortstatRow> {
        self.config
            .ports
            .iter()
            .enumerate()
            .map(|(p, port)| {
                let c = PortstatCounts::of(&self.port_visible(running, p));
                let rates = self.rates(p);
                let util = |bps: f64| utilisation_percent(bps, port.speed_mbps);
                PortstatRow {
                    iface: port.name.clone(),
                    state: match running.link_up(port_id(p)) {
                        Some(true) => "U",
                        Some(false) => "D",
                        None => "N/A",
                    }
                    .to_owned(),
                    rx_ok: c.rx_ok,
                    rx_bps: rates.map(|r| r.rx_bytes_per_s),
                    rx_pps: rates.map(|r| r.rx_frames_per_s),
                    rx_util: rates.map(|r| util(r.rx_bytes_per_s)),
                    rx_err: c.rx_err,
                    rx_drp: c.rx_drp,
                    rx_ovr: c.rx_ovr,
                    tx_ok: c.tx_ok,
                    tx_bps: rates.map(|r| r.tx_bytes_per_s),
                    tx_pps: rates.map(|r| r.tx_frames_per_s),
                    tx_util: rates.map(|r| util(r.tx_bytes_per_s)),
                    tx_err: c.tx_err,
                    tx_drp: c.tx_drp,
                    tx_ovr: None,
                }
            })
            .collect()
    }

    fn snapshot(&self, running: &Running) -> Snapshot {
        let mut delay_histograms = Vec::new();
        for (p, port) in self.config.ports.iter().enumerate() {
            // Since start (not affected by a clear): the histograms are read as differences.
            let delay = self.port_totals(running, p).delay;
            for (q, buckets) in delay.0.iter().enumerate() {
                delay_histograms.push(DelayHistogramRow {
                    port: port.name.clone(),
                    queue: u8::try_from(q).unwrap_or(0),
                    buckets: buckets.to_vec(),
                });
            }
        }
        Snapshot {
            uptime_s: self.started.elapsed().as_secs_f64(),
            ports: self.port_summaries(running),
            pfc: self.pfc_counters(running),
            queues: self.queue_counters(running),
            pg_used: self.rows(|p| self.visible_stats(running, p).pgs.map(|g| g.used_bytes)),
            pfcwd: self.pfcwd_stats(running),
            delay_histograms,
        }
    }

    fn clear(&mut self, what: Clear, running: &mut Running) -> Result<(), String> {
        match what {
            Clear::Counters => {
                for p in 0..self.config.ports.len() {
                    let live = self.live(running, p);
                    self.ledgers[p].clear(&live);
                }
                self.fdb_sync_overflow
                    .clear(&fdb_sync_overflow(running.shared()));
                tracing::info!("counters cleared");
            }
            Clear::Watermarks { persistent } => {
                // Drop what accumulated at the source too, so the next read starts fresh.
                self.fold_watermarks(running.shared());
                self.user_marks = Marks::new(self.config.ports.len(), self.config.pools.len());
                if persistent {
                    self.persistent_marks =
                        Marks::new(self.config.ports.len(), self.config.pools.len());
                }
                tracing::info!(persistent, "watermarks cleared");
            }
            Clear::Fdb { port: None } => {
                self.fdb_cache = None;
                running.flush_fdb(None);
                tracing::info!("MAC table cleared");
            }
            Clear::Fdb { port: Some(name) } => {
                let Some(p) = self.port_index(&name) else {
                    return Err(format!("no port {name:?}"));
                };
                self.fdb_cache = None;
                running.flush_fdb(Some(port_id(p)));
                tracing::info!(port = %name, "MAC table entries of the port cleared");
            }
        }
        Ok(())
    }

    fn port_index(&self, name: &str) -> Option<usize> {
        self.config.ports.iter().position(|p| p.name == name)
    }

    fn set(&mut self, change: Change, running: &mut Running) -> Outcome {
        match change {
            Change::PortTx { port, enable } => {
                let Some(p) = self.port_index(&port) else {
                    return Outcome::Respond(Response::error(format!("no port named {port}")));
                };
                // Applied at once, and written into the configuration so that it survives the
                // next reconfiguration.
                running.shared().set_tx_enable(port_id(p), enable);
                self.config.ports[p].tx_enable = enable;
                if let Ok(text) = edit_key(
                    &self.config_text,
                    // Quoted: a port name may contain dots.
                    &format!("port.\"{port}\".tx_enable"),
                    if enable { "true" } else { "false" },
                ) {
                    self.config_text = text;
                }
                tracing::info!(
                    port,
                    enable,
                    "config change: port transmit {}",
                    if enable { "enabled" } else { "disabled" }
                );
                Outcome::Respond(Response::ok(format!(
                    "port {port} tx {}",
                    if enable { "enabled" } else { "disabled" }
                )))
            }
            Change::BigRedSwitch { on } => {
                running.set_big_red_switch(on);
                self.config.pfcwd.big_red_switch = on;
                if let Ok(text) = edit_key(
                    &self.config_text,
                    "pfcwd.big_red_switch",
                    if on { "true" } else { "false" },
                ) {
                    self.config_text = text;
                }
                tracing::warn!(
                    on,
                    "config change: PFC watchdog big red switch {}",
                    if on { "enabled" } else { "disabled" }
                );
                Outcome::Respond(Response::ok(format!(
                    "big red switch {}",
                    if on { "on" } else { "off" }
                )))
            }
            Change::Key { key, value } => match edit_key(&self.config_text, &key, &value) {
                Ok(text) => self.validate_and_apply(text, format!("set {key} = {value}")),
                Err(e) => Outcome::Respond(Response::error(e)),
            },
        }
    }

    fn validate_and_apply(&mut self, text: String, reason: String) -> Outcome {
        let file = self.config_path.display().to_string();
        match headroom_config::parse(&text, &file) {
            Err(errors) => Outcome::Respond(Response::error(format!("refused: {errors}"))),
            Ok((config, warnings)) => {
                for w in &warnings {
                    tracing::warn!("{w}");
                }
                if config.ports.iter().map(|p| (&p.name, &p.device)).ne(self
                    .config
                    .ports
                    .iter()
                    .map(|p| (&p.name, &p.device)))
                {
                    return Outcome::Respond(Response::error("refused: ports cannot be added, removed or renamed at run time; restart headroom"));
                }
                Outcome::Apply(ControlAction::Apply {
                    text,
                    config: Box::new(config),
                    reason,
                })
            }
        }
    }

    /// Reports the outcome of a [`ControlAction::Apply`]. On success `old` is the previous
    /// dataplane's final state: its counters are carried over.
    pub fn applied(&mut self, result: Result<(String, Config, Option<Retired>), String>) {
        let response = match result {
            Ok((text, config, old)) => {
                match old {
                    Some(old) => self.carry_over(&old, text, config),
                    None => self.replace_config(text, config),
                }
                Response::ok("applied")
            }
            Err(e) => Response::error(format!("not applied: {e}")),
        };
        if let Some(mut client) = self.pending.take() {
            client.respond(&response, std::time::Instant::now());
            self.clients.push(client);
        }
    }

    /// Carries the counters of a dataplane that is being replaced outside the control socket
    /// (SIGHUP reload). `old` must be the dataplane of the configuration running until now.
    pub fn carry_over(&mut self, old: &Retired, text: String, config: Config) {
        // What the old dataplane saw since the last fold would be lost with it.
        self.fold_watermarks(&old.shared);
        self.fdb_sync_overflow
            .retire(&fdb_sync_overflow(&old.shared));
        // A storm still in progress ends with the old dataplane without a restoration; if it
        // persists, the new dataplane detects it again after its detection time. The backend
        // counters of the new dataplane's ports start from zero (AF_PACKET reopens its ports,
        // DPDK counts from the reopening), so the old ones are carried like the rest.
        for (p, ledger) in self.ledgers.iter_mut().enumerate() {
            ledger.retire(&old.tally(p));
        }
        self.replace_config(text, config);
    }

    /// Makes `config` the running configuration. Per-port and per-pool state follows ports and
    /// pools by name: a reload may add, remove or reorder them (a new one starts at zero).
    fn replace_config(&mut self, text: String, config: Config) {
        let port_map: Vec<Option<usize>> = config
            .ports
            .iter()
            .map(|p| self.config.ports.iter().position(|o| o.name == p.name))
            .collect();
        let pool_map: Vec<Option<usize>> = config
            .pools
            .iter()
            .map(|p| self.config.pools.iter().position(|o| o.name == p.name))
            .collect();
        fn remap<T: Clone + Default>(old: &[T], map: &[Option<usize>]) -> Vec<T> {
            map.iter()
                .map(|i| i.and_then(|i| old.get(i).cloned()).unwrap_or_default())
                .collect()
        }
        self.ledgers = remap(&self.ledgers, &port_map);
        self.rates = remap(&self.rates, &port_map);
        self.alarms = remap(&self.alarms, &port_map);
        // A new dataplane on reopened ports: their link state is read afresh.
        self.links = vec![None; config.ports.len()];
        for marks in [&mut self.user_marks, &mut self.persistent_marks] {
            marks.ports = remap(&marks.ports, &port_map);
            marks.pools = remap(&marks.pools, &pool_map);
        }
        // Captures follow their port; a capture of a port that is gone ends.
        self.captures.retain_mut(|s| {
            match port_map
                .iter()
                .position(|m| *m == Some(usize::from(s.port)))
            {
                Some(new) => {
                    s.port = u16::try_from(new).unwrap_or(u16::MAX);
                    true
                }
                None => false,
            }
        });
        self.capture_flags_stale = true;
        self.lldp.reconfigure(&config);
        self.config_text = text;
        self.config = config;
    }

    fn snapshot_path(&self, name: &str) -> Result<PathBuf, String> {
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            || name.starts_with('.')
        {
            return Err(format!(
                "snapshot name {name:?}: use letters, digits, '-', '_' and '.'"
            ));
        }
        Ok(self.snapshots_dir.join(format!("{name}.toml")))
    }

    fn save(&self, name: &str) -> Response {
        let path = match self.snapshot_path(name) {
            Ok(p) => p,
            Err(e) => return Response::error(e),
        };
        let result = std::fs::create_dir_all(&self.snapshots_dir).and_then(|()| {
            crate::atomic_file::write_atomically(&path, self.config_text.as_bytes())
        });
        match result {
            Ok(()) => {
                tracing::info!(name, path = %path.display(), "configuration saved");
                Response::ok(path.display().to_string())
            }
            Err(e) => Response::error(format!("cannot write {}: {e}", path.display())),
        }
    }

    fn rollback(&mut self, name: &str) -> Outcome {
        let text = match self
            .snapshot_path(name)
            .and_then(|p| std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display())))
        {
            Ok(t) => t,
            Err(e) => return Outcome::Respond(Response::error(format!("no snapshot {name}: {e}"))),
        };
        self.validate_and_apply(text, format!("rollback to {name}"))
    }

    fn list(&self) -> Response {
        let mut names: Vec<String> = std::fs::read_dir(&self.snapshots_dir)
            .map(|dir| {
                dir.filter_map(Result::ok)
                    .filter_map(|e| {
                        e.file_name()
                            .to_str()
                            .and_then(|n| n.strip_suffix(".toml"))
                            .map(str::to_owned)
                    })
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        Response::ok(names)
    }

    fn start_capture(
        &mut self,
        req: CaptureRequest,
        mut client: clients::Client,
        running: &Running,
    ) {
        let now = std::time::Instant::now();
        let Some(p) = self.port_index(&req.port) else {
            client.respond(&Response::error(format!("no port named {}", req.port)), now);
            self.clients.push(client);
            return;
        };
        let mut flags = CAPTURE_RX | CAPTURE_TX;
        if req.control_only {
            flags |= CAPTURE_CONTROL_ONLY;
        }
        let mut output = serde_json::to_vec(&Response::ok(format!("capturing on {}", req.port)))
            .unwrap_or_default();
        output.push(b'\n');
        let port = u16::try_from(p).unwrap_or(u16::MAX);
        let mut session = CaptureSession {
            stream: client.stream,
            port,
            flags,
            output,
            written: 0,
            lost: 0,
        };
        if !session.flush() {
            return;
        }
        self.captures.push(session);
        self.update_capture_flags(running);
        tracing::info!(
            port = req.port,
            control_only = req.control_only,
            "capture started"
        );
    }

    /// The mirror flags of port `p` of the running configuration: the union of its captures
    /// (control-only if every one of them is).
    fn capture_flags_of(&self, p: usize) -> u8 {
        let mut flags = 0u8;
        let mut all = false;
        for s in self.captures.iter().filter(|s| usize::from(s.port) == p) {
            flags |= s.flags & (CAPTURE_RX | CAPTURE_TX);
            all |= s.flags & CAPTURE_CONTROL_ONLY == 0;
        }
        if flags != 0 && !all {
            flags |= CAPTURE_CONTROL_ONLY;
        }
        flags
    }

    fn update_capture_flags(&self, running: &Running) {
        let control = running.capture_control();
        for p in 0..self.config.ports.len() {
            control.set(p, self.capture_flags_of(p));
        }
    }

    /// The capture flags a dataplane of `config` must start with (`RuntimeSpec::capture_flags`)
    /// so that running captures see its first frames: captures follow their port by name.
    #[must_use]
    pub fn capture_flags_for(&self, config: &Config) -> Vec<u8> {
        config
            .ports
            .iter()
            .map(|port| {
                self.port_index(&port.name)
                    .map_or(0, |p| self.capture_flags_of(p))
            })
            .collect()
    }

    fn pump_captures(&mut self, running: &mut Running) {
        let before = self.captures.len();
        let mut buf = Vec::with_capacity(32 + crate::mirror::CAPTURE_SNAPLEN);
        for reader in running.mirrors() {
            while let Some(r) = reader.pop() {
                let data = &r.data[..usize::from(r.len)];
                let control = crate::mirror::is_mac_control(data);
                buf.clear();
                buf.extend_from_slice(&r.unix_ns.to_le_bytes());
                buf.extend_from_slice(&r.port.to_le_bytes());
                buf.push(u8::from(r.transmitted));
                buf.extend_from_slice(&r.orig_len.to_le_bytes());
                buf.extend_from_slice(&r.len.to_le_bytes());
                buf.extend_from_slice(data);
                for s in &mut self.captures {
                    if s.port == r.port && (s.flags & CAPTURE_CONTROL_ONLY == 0 || control) {
                        // A slow reader loses whole records rather than stalling the loop.
                        s.push(&buf);
                    }
                }
                // The buffer goes back to the lcore it came from.
                reader.recycle(r);
            }
        }
        // Write what each client takes; drop the ones that went away.
        self.captures.retain_mut(|s| {
            let keep = s.flush() && !peer_closed(&s.stream);
            if !keep && s.lost > 0 {
                tracing::warn!(
                    lost = s.lost,
                    "capture client read too slowly: records were left out"
                );
            }
            keep
        });
        if self.captures.len() != before {
            self.update_capture_flags(running);
            tracing::info!("capture stopped");
        }
    }
}

/// Binds a Unix socket at `path` that only its owner can connect to (mode 0600 from the moment
/// it has that name), replacing a stale socket file there (one nobody listens on, left by a
/// switch that was killed) but never a live one.
fn bind_owner_only(path: &Path) -> io::Result<UnixListener> {
    let in_use = || {
        io::Error::new(
            ErrorKind::AddrInUse,
            format!("{} is in use by another running headroom", path.display()),
        )
    };
    match UnixStream::connect(path) {
        // Refuse to steal the socket of a switch that is still running.
        Ok(_) => return Err(in_use()),
        Err(e) if e.kind() == ErrorKind::NotFound => {}
        Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
            tracing::info!(socket = %path.display(), "removing a stale control socket (nothing listens on it)");
            match std::fs::remove_file(path) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Err(e) => {
            return Err(io::Error::new(
                e.kind(),
                format!(
                    "{}: cannot tell whether a switch listens on it: {e}",
                    path.display()
                ),
            ))
        }
    }
    // Bound under a temporary name, restricted, then moved into place: connect(2) on a socket
    // needs write permission on it, so the name never serves anyone but the owner, whatever
    // the umask. RENAME_NOREPLACE: if another switch placed its socket meanwhile, we lose.
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.binding", std::process::id()));
    let temporary = path.with_file_name(name);
    let _ = std::fs::remove_file(&temporary);
    let listener = UnixListener::bind(&temporary)?;
    let placed = std::fs::set_permissions(&temporary, std::fs::Permissions::from_mode(0o600))
        .and_then(|()| {
            rustix::fs::renameat_with(
                rustix::fs::CWD,
                &temporary,
                rustix::fs::CWD,
                path,
                rustix::fs::RenameFlags::NOREPLACE,
            )
            .map_err(|e| {
                if e == rustix::io::Errno::EXIST {
                    in_use()
                } else {
                    e.into()
                }
            })
        });
    if let Err(e) = placed {
        let _ = std::fs::remove_file(&temporary);
        return Err(e);
    }
    Ok(listener)
}

/// Whether the peer of a non-blocking stream has closed its end.
fn peer_closed(stream: &UnixStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(io::Read::read(&mut &*stream, &mut probe), Ok(0))
}

/// Sets `key` (dotted path) to `value` (a TOML value) in a TOML document, keeping the rest of
/// the document (comments, order) as it is.
///
/// # Errors
/// When the value is not TOML or the path runs into a non-table.
pub fn edit_key(text: &str, key: &str, value: &str) -> Result<String, String> {
    let mut doc: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| format!("the running configuration does not parse: {e}"))?;
    let parsed: toml_edit::Value = value
        .parse()
        .map_err(|e| format!("{value:?} is not a TOML value: {e}"))?;
    let parts = split_key(key)?;
    let (last, path) = parts.split_last().ok_or("empty key")?;
    let mut table = doc.as_table_mut();
    for part in path {
        let entry = table.entry(part).or_insert_with(|| {
            let mut t = toml_edit::Table::new();
            t.set_implicit(true);
            toml_edit::Item::Table(t)
        });
        table = match entry {
            toml_edit::Item::Table(t) => t,
            _ => return Err(format!("{key}: {part} is not a table")),
        };
    }
    table.insert(last, toml_edit::value(parsed));
    Ok(doc.to_string())
}

/// Splits a dotted key, honouring quoted parts (`port."Ethernet0".pfc_enable`,
/// `port.Ethernet0.queue."3-4".scheduler`).
fn split_key(key: &str) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for c in key.chars() {
        match c {
            '"' => quoted = !quoted,
            '.' if !quoted => parts.push(std::mem::take(&mut current)),
            c => current.push(c),
        }
    }
    if quoted {
        return Err(format!("{key}: unbalanced quotes"));
    }
    parts.push(current);
    if parts.iter().any(String::is_empty) {
        return Err(format!("{key}: empty key part"));
    }
    Ok(parts)
}

/// FDB updates lost to full learn rings by the ingress sides of one dataplane.
fn fdb_sync_overflow(shared: &Shared) -> u64 {
    shared
        .ingress_counters
        .iter()
        .map(|side| side.fdb_sync_overflow.get())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edit_key_keeps_the_document_and_sets_nested_keys() {
        let text =
            "# lab\n[switch]\nname = \"lab\" # keep me\n\n[port.Ethernet0]\ndevice = \"sw-p0\"\n";
        let out = edit_key(text, "port.Ethernet0.pfc_enable", "[3]").unwrap();
        assert!(out.contains("# keep me"));
        assert!(out.contains("pfc_enable = [3]"));
        let out = edit_key(&out, "buffer_profile.x.dynamic_th", "-2").unwrap();
        assert!(
            out.contains("[buffer_profile.x]") && out.contains("dynamic_th = -2"),
            "{out}"
        );
        let out = edit_key(
            &out,
            "port.Ethernet0.queue.\"3-4\".scheduler",
            "\"scheduler.1\"",
        )
        .unwrap();
        assert!(out.contains("scheduler = \"scheduler.1\""), "{out}");
        assert!(edit_key(text, "switch.name.x", "1").is_err());
        assert!(edit_key(text, "switch.name", "not toml ]").is_err());
        assert!(edit_key(text, "switch..name", "1").is_err());
    }
}
