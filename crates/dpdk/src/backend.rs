//! The DPDK backend (`switch.driver = "dpdk"`, cargo feature `dpdk`): headroom-io's [`Backend`]
//! over EAL, one mempool and ethdev ports, with the life cycle DPDK imposes.
//!
//! `DpdkBackend` (with the `dpdk` feature) opens `port.X.device` (a vdev name such as
//! `net_af_packet0`, a PCI address, or a port id) and lends each port's
//! queues to the lcores. Frames stay in their mbufs from `rte_eth_rx_burst` to
//! `rte_eth_tx_burst`: the core holds `MbufFrame` handles and never copies.
//!
//! # Process-wide choices
//!
//! - **EAL once per process.** EAL starts from `[dpdk] eal_args`, written as for `dpdk-testpmd`
//!   (no program name, no `--`), and cannot be restarted (DPDK supports neither a second
//!   `rte_eal_init` nor one after `rte_eal_cleanup`). It is cleaned up when the backend, its
//!   pool and its ports are gone.
//! - **Ports are opened once and kept.** Closing a DPDK port releases it for the rest of the
//!   process, so a dataplane restart (reconfiguration through the control socket or SIGHUP)
//!   does not reopen anything: the lcores of the old dataplane hand their queues back when they
//!   end (`DpdkRx`/`DpdkTx` return them on drop), and the next
//!   [`Backend::open`] lends them out again. `[dpdk]` settings
//!   and a larger MTU therefore need a process restart; the backend refuses such a change with
//!   a message saying so, and the previous configuration keeps running.
//! - **One mempool** of `[dpdk] mempool_mbufs` mbufs per backend, shared by every port's RX
//!   queue and by the frames the switch generates (PFC). Its data room holds the largest port
//!   MTU plus an Ethernet header and one 802.1Q tag in one segment. Without hugepages it must
//!   fit in `-m` (checked; the error names the numbers).
//! - **One RX and one TX queue per port**: the lcore layout has exactly one lcore polling a
//!   port's RX side and one serving its TX side.
//! - **Lcores are the runtime's own pinned std threads, registered with EAL**
//!   (`rte_thread_register`) on their first burst. Registration gives each thread an lcore id
//!   and so a per-lcore mempool cache: mbuf alloc/free (net_null and physical NICs allocate on
//!   every RX burst, TX frees) mostly stay in the cache instead of a compare-and-swap on the
//!   pool's shared ring: +48 % for the backend alone and +17 % for the whole switch on
//!   net_null (docs/perf.md). The costs: DPDK secondary processes (`dpdk-proc-info`, `dpdk-pdump`)
//!   cannot attach to a primary with registered threads, and each lcore's cache holds up to
//!   1.5 x `mempool_cache_size` mbufs that other lcores cannot use. EAL's own worker lcores
//!   (from `-l`) are not used and sit blocked; `-l <one cpu>` is enough. The alternative,
//!   running lcores as EAL workers (`rte_eal_remote_launch`), would tie the runtime's thread
//!   life cycle (restart, join, panics) to EAL's launch API for no speed gain.
//! - **Clock:** the runtime's monotonic clock (`clock_gettime` through the vDSO), read once per
//!   loop iteration, i.e. once per burst, not the TSC clock of headroom-dpdk. Measured on the
//!   benchmark VM (TSC clocksource): 36-38 ns per read against 12-15 ns for `rdtsc`, so the TSC
//!   would save about 0.35 ns per frame at two full 32-frame bursts per iteration; one clock
//!   keeps every backend's timestamps alike and the lcore loop backend-independent.
//! - **Offloads:** before EAL opens `net_af_packet`/`net_af_xdp` vdevs, segmentation, receive
//!   coalescing and TX checksum offloads of their Linux interfaces are turned off, as the
//!   AF_PACKET backend does for its ports.
//! - **Link state, NIC counters and xstats**: the port's counters feed
//!   [`OpenedPort::stats`] (ipackets/opackets, imissed plus
//!   multi-segment drops, oerrors, rx_nombuf); `DpdkPortHandle` reads link state, every basic
//!   counter and the extended counters for the control plane.
//! - **NIC flow control** (802.3x PAUSE, NIC-level PFC) is switched off when a port opens, and
//!   MAC Control frames are forwarded to software where the NIC allows it (headroom-dpdk).
//! - **Shutdown:** `DpdkBackend::close_ports` stops and closes every port (their RX rings give
//!   their mbufs back) and checks that every mbuf is back in the pool
//!   (`Mempool::available() == capacity()`).
//!
//! The settings ([`DpdkSettings`]) and the lab helpers (`crate::lab`) need no DPDK and are always
//! compiled.

use crate::settings::{
    vdev_interfaces, DpdkSettings, DpdkSetupError, AF_XDP_FILL_RING_MBUFS, FRAME_OVERHEAD_BYTES,
};
use crate::{
    DpdkError, DpdkPort, DpdkRxQueue, DpdkTxQueue, Eal, FlowControlState, LinkStatus, MbufFrame,
    Mempool, NicStats, PromiscuousState,
};
use headroom_core::frame::Frame;
use headroom_io::backend::{Backend, BackendError, OpenedPort, StatsReader};
use headroom_io::pool::PoolStats;
use headroom_io::{BackendStats, PortInfo, RxQueue, TxQueue};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// DPDK ports for the runtime: EAL, one mempool, and every port opened so far (kept open
/// across dataplane restarts). See the [module docs](self).
pub struct DpdkBackend {
    eal: Eal,
    pool: Mempool,
    settings: DpdkSettings,
    ports: BTreeMap<String, KeptPort>,
}

/// A port opened by the backend: the control handle and the queues while no lcore has them.
struct KeptPort {
    handle: DpdkPortHandle,
    queues: Arc<QueueSlot>,
}

/// Where a port's queues wait between dataplanes.
#[derive(Default)]
struct QueueSlot {
    rx: Mutex<Option<DpdkRxQueue>>,
    tx: Mutex<Option<DpdkTxQueue>>,
}

impl fmt::Debug for DpdkBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkBackend")
            .field("eal", &self.eal)
            .field("pool", &self.pool)
            .field("ports", &self.ports.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl DpdkBackend {
    /// Starts EAL (or joins the EAL this process already runs with the same arguments) and
    /// creates the mempool. Ports are opened by [`Backend::open`].
    ///
    /// The calling thread keeps its CPU affinity (EAL's pinning is undone), so that threads
    /// it spawns later are not all pinned to the main lcore.
    ///
    /// # Errors
    /// EAL does not start (the EAL log on stderr has the details), or the mempool does not
    /// fit (`-m` without hugepages) or cannot be created.
    pub fn new(settings: DpdkSettings) -> Result<Self, DpdkSetupError> {
        static POOLS: AtomicU32 = AtomicU32::new(0);
        if settings.disable_vdev_offloads {
            for (vdev, iface) in vdev_interfaces(&settings.eal_args) {
                let report = headroom_afpacket::offload::disable_offloads(&iface).map_err(|e| {
                    DpdkSetupError::Settings(format!(
                        "interface {iface} of --vdev {vdev}: cannot turn its offloads off: {e}"
                    ))
                })?;
                if !report.all_disabled() {
                    tracing::warn!(
                        vdev,
                        iface,
                        ?report,
                        "some offloads stay enabled; the PMD may see super-frames"
                    );
                }
            }
        }
        let eal = Eal::init_unpinned(&settings.eal_args).map_err(DpdkSetupError::Eal)?;
        let data_room = settings.data_room_bytes();
        // Unique per backend: DPDK pool names are process-wide.
        let name = format!("headroom-{}", POOLS.fetch_add(1, Ordering::Relaxed));
        let pool = Mempool::new(
            &eal,
            &name,
            settings.mempool_mbufs,
            settings.mempool_cache_size,
            data_room,
        )
        .map_err(|source| DpdkSetupError::Mempool {
            mbufs: settings.mempool_mbufs,
            data_room_bytes: data_room,
            source,
        })?;
        let mtu_frame = u64::from(settings.max_mtu()) + 18;
        let frames_buffer_holds = settings.switch_buffer_bytes / mtu_frame.max(1);
        if u64::from(settings.mempool_mbufs) < frames_buffer_holds {
            tracing::warn!(
                mempool_mbufs = settings.mempool_mbufs,
                buffer_frames = frames_buffer_holds,
                "the mempool holds fewer frames than the switch buffer does at MTU size: when \
                 it runs dry, ports drop on receive (rx_nombuf) before PFC can act; raise \
                 [dpdk] mempool_mbufs"
            );
        }
        tracing::info!(
            eal_args = ?eal.args(),
            eal_lcores = eal.lcore_count(),
            pool = %name,
            mbufs = settings.mempool_mbufs,
            cache = settings.mempool_cache_size,
            data_room_bytes = data_room,
            pool_mib = pool.estimated_bytes().div_ceil(1 << 20),
            "DPDK started"
        );
        Ok(Self {
            eal,
            pool,
            settings,
            ports: BTreeMap::new(),
        })
    }

    /// Prepares the backend for the next dataplane with `settings` (a reconfiguration):
    /// ports stay open and are lent out again.
    ///
    /// # Errors
    /// [`DpdkSetupError::NeedsRestart`] when `[dpdk]` changed or a port MTU grew beyond the
    /// mempool's mbufs; the backend keeps its settings then.
    pub fn reconfigure(&mut self, settings: DpdkSettings) -> Result<(), DpdkSetupError> {
        if let Some(why) = self.settings.restart_needed_for(&settings) {
            return Err(DpdkSetupError::NeedsRestart(why));
        }
        self.settings = settings;
        Ok(())
    }

    /// The EAL this backend runs on.
    #[must_use]
    pub fn eal(&self) -> &Eal {
        &self.eal
    }

    /// The packet mempool.
    #[must_use]
    pub fn mempool(&self) -> &Mempool {
        &self.pool
    }

    /// The settings in use.
    #[must_use]
    pub fn settings(&self) -> &DpdkSettings {
        &self.settings
    }

    /// The control handle of the port opened on `device`.
    #[must_use]
    pub fn port(&self, device: &str) -> Option<&DpdkPortHandle> {
        self.ports.get(device).map(|p| &p.handle)
    }

    /// Every open port as (device, handle), for a control plane that shows link state,
    /// NIC counters and xstats. Handles are cheap clones and may move to another thread.
    #[must_use]
    pub fn ports(&self) -> Vec<(String, DpdkPortHandle)> {
        self.ports
            .iter()
            .map(|(d, p)| (d.clone(), p.handle.clone()))
            .collect()
    }

    /// The extended counters (xstats) of the port on `device`, as (name, value).
    ///
    /// # Errors
    /// No such port is open, or the PMD fails.
    pub fn xstats(&self, device: &str) -> Result<Vec<(String, u64)>, String> {
        self.port(device)
            .ok_or_else(|| format!("no DPDK port open on {device}"))?
            .xstats()
            .map_err(|e| e.to_string())
    }

    /// Writes `template` into every mbuf of the pool that is free right now (taking them
    /// all out, then putting them back).
    ///
    /// For benchmarks on `net_null`: its RX (without `copy=1`) hands out mbufs and sets
    /// their length without writing their bytes (DPDK 22.11 drivers/net/null), so after
    /// this every frame it produces carries `template` (a freshly created pool is all
    /// zeros, which the switch drops: an all-zero source MAC is learned on the port the
    /// all-zero destination then points back to). Frames the switch rewrites (VLAN tags,
    /// CE marks) or generates (PFC) leave their own bytes behind in the mbufs they used.
    ///
    /// Returns how many mbufs were written.
    #[must_use]
    pub fn stamp_free_mbufs(&self, template: &[u8]) -> u32 {
        let mut taken = Vec::new();
        while let Some(mut frame) = self.pool.alloc_frame(template.len()) {
            frame.data_mut().copy_from_slice(template);
            taken.push(frame);
        }
        u32::try_from(taken.len()).unwrap_or(u32::MAX)
    }

    /// Opens `device` (once per process), logs what it reports, keeps it.
    fn open_port(&mut self, device: &str) -> Result<(), BackendError> {
        let config = self.settings.port_config(device);
        let mut port =
            DpdkPort::open(&self.eal, device, &config, &self.pool).map_err(|e| BackendError {
                device: device.to_owned(),
                reason: e.to_string(),
            })?;
        let (mut rx, mut tx) = port.split().map_err(|e| BackendError {
            device: device.to_owned(),
            reason: e.to_string(),
        })?;
        let (rx, tx) = (rx.pop(), tx.pop());
        let link = port.link().ok();
        tracing::info!(
            device,
            port_id = port.port_id(),
            name = %port.info().name,
            mtu = config.mtu,
            descriptors = ?port.descriptors(),
            flow_control = ?port.flow_control(),
            promiscuous = ?port.promiscuous(),
            link_up = link.map(|l| l.up),
            link_mbps = link.and_then(|l| l.speed_mbps),
            "DPDK port open"
        );
        if let FlowControlState::Off {
            mac_control_forwarded: false,
            ..
        } = port.flow_control()
        {
            tracing::warn!(
                device,
                "the NIC refused to forward MAC Control frames: received PFC frames may not \
                 reach headroom"
            );
        }
        if port.promiscuous() == PromiscuousState::Disabled {
            tracing::warn!(device, "promiscuous mode is off");
        }
        if link.is_some_and(|l| !l.up) {
            tracing::warn!(device, "link is down");
        }
        self.ports.insert(
            device.to_owned(),
            KeptPort {
                handle: DpdkPortHandle(Arc::new(PortControl {
                    port: Mutex::new(port),
                    last_stats: Mutex::new(BackendStats::default()),
                })),
                queues: Arc::new(QueueSlot {
                    rx: Mutex::new(rx),
                    tx: Mutex::new(tx),
                }),
            },
        );
        Ok(())
    }

    /// Stops and closes every port (their RX rings give their mbufs back), then checks that
    /// every mbuf is back in the pool and logs the result. Call it after the last
    /// dataplane stopped (its lcores hand the queues back when they end): a port whose
    /// queues are still out stays open until they are dropped. Closing is final for the
    /// process.
    pub fn close_ports(&mut self) -> PoolCheck {
        let mut af_xdp_ports = 0;
        let mut ports_in_use = Vec::new();
        for (device, kept) in std::mem::take(&mut self.ports) {
            if kept.handle.info().name.starts_with("net_af_xdp") {
                af_xdp_ports += 1;
            }
            let rx_back = lock(&kept.queues.rx).is_some();
            let tx_back = lock(&kept.queues.tx).is_some();
            if !(rx_back && tx_back) {
                ports_in_use.push(device);
            }
            // Dropping the handle and the queues (the last references) stops and closes.
        }
        let check = PoolCheck {
            capacity: self.pool.capacity(),
            available: self.pool.available(),
            af_xdp_may_keep: af_xdp_ports * AF_XDP_FILL_RING_MBUFS,
            ports_in_use,
        };
        check.log(self.pool.name());
        check
    }
}

impl Drop for DpdkBackend {
    fn drop(&mut self) {
        // Ports before the pool (fields drop in order, but make it explicit).
        self.ports.clear();
    }
}

/// The pool after [`DpdkBackend::close_ports`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PoolCheck {
    /// Mbufs in the pool.
    pub capacity: u32,
    /// Mbufs back in it (per-lcore caches included).
    pub available: u32,
    /// Mbufs DPDK 22.11's af_xdp PMD may keep after its ports closed (their fill rings; the
    /// PMD does not return them).
    pub af_xdp_may_keep: u32,
    /// Devices whose queues were still lent to lcores (not closed yet).
    pub ports_in_use: Vec<String>,
}

impl PoolCheck {
    /// Every mbuf is back.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.available == self.capacity
    }

    /// Every mbuf is back except what the af_xdp PMD keeps by design.
    #[must_use]
    pub fn is_full_but_af_xdp(&self) -> bool {
        self.ports_in_use.is_empty()
            && self.available.saturating_add(self.af_xdp_may_keep) >= self.capacity
    }

    fn log(&self, pool: &str) {
        let missing = self.capacity - self.available.min(self.capacity);
        if self.is_full() {
            tracing::info!(
                pool,
                capacity = self.capacity,
                "every mbuf is back in the pool"
            );
        } else if self.is_full_but_af_xdp() {
            tracing::info!(
                pool,
                missing,
                "every mbuf is back in the pool except those the af_xdp PMD keeps in its \
                 fill rings (DPDK 22.11 does not return them on close)"
            );
        } else {
            tracing::error!(
                pool,
                missing,
                capacity = self.capacity,
                ports_in_use = ?self.ports_in_use,
                "mbufs are missing from the pool after the ports closed"
            );
        }
    }
}

impl Backend for DpdkBackend {
    type Frame = MbufFrame;
    type Rx = DpdkRx;
    type Tx = DpdkTx;

    fn open(&mut self, device: &str) -> Result<OpenedPort<DpdkRx, DpdkTx>, BackendError> {
        let err = |reason: String| BackendError {
            device: device.to_owned(),
            reason,
        };
        if !self.ports.contains_key(device) {
            self.open_port(device)?;
        }
        let kept = &self.ports[device];
        let wanted_mtu = self.settings.port_config(device).mtu;
        let open_mtu = kept.handle.lock().config().mtu;
        if wanted_mtu > open_mtu {
            return Err(err(format!(
                "MTU {wanted_mtu} is above the MTU {open_mtu} the DPDK port was opened \
                 with: restart headroom to apply it (ports are configured once per process)"
            )));
        }
        let taken = (lock(&kept.queues.rx).take(), lock(&kept.queues.tx).take());
        let (rx, tx) = match taken {
            (Some(rx), Some(tx)) => (rx, tx),
            (rx, tx) => {
                let which = if rx.is_none() { "RX" } else { "TX" };
                if rx.is_some() {
                    *lock(&kept.queues.rx) = rx;
                }
                if tx.is_some() {
                    *lock(&kept.queues.tx) = tx;
                }
                return Err(err(format!(
                    "its {which} queue is in use by a running dataplane (is the device listed \
                     for two ports?)"
                )));
            }
        };
        let mut info: PortInfo = kept.handle.info();
        // The switch sees the MTU it is configured with (at most the port's).
        info.max_frame_len = usize::from(wanted_mtu) + usize::from(FRAME_OVERHEAD_BYTES);
        let handle = kept.handle.clone();
        // Counted from this opening, like a freshly opened AF_PACKET socket: the NIC's
        // counters run on across reconfigurations (the port is kept), and the control
        // plane carries what each dataplane counted over to the next.
        let origin = handle.backend_stats();
        let stats: StatsReader = Arc::new(move || handle.backend_stats().since(&origin));
        Ok(OpenedPort {
            rx: DpdkRx {
                queue: Some(rx),
                home: Arc::clone(&kept.queues),
                lcore: LcoreRegistration::new(&self.eal),
            },
            tx: DpdkTx {
                queue: Some(tx),
                home: Arc::clone(&kept.queues),
                lcore: LcoreRegistration::new(&self.eal),
            },
            info,
            stats,
            link: {
                let handle = kept.handle.clone();
                Arc::new(move || handle.status().link.map(|l| l.up))
            },
        })
    }

    fn pool_stats(&self) -> Option<PoolStats> {
        let rx_no_mbuf: u64 = self
            .ports
            .values()
            .filter_map(|p| p.handle.nic_stats().ok())
            .map(|s| s.rx_no_mbuf)
            .sum();
        Some(PoolStats {
            capacity: self.pool.capacity() as usize,
            available: self.pool.available() as usize,
            alloc_failures: rx_no_mbuf,
        })
    }
}

/// What a port reports, for the control plane.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortStatus {
    /// Name, MAC, largest frame.
    pub info: PortInfo,
    /// Link state (`None` when the PMD cannot tell).
    pub link: Option<LinkStatus>,
    /// Basic NIC counters.
    pub nic: Option<NicStats>,
    /// The NIC's own flow control.
    pub flow_control: FlowControlState,
    /// Promiscuous mode.
    pub promiscuous: PromiscuousState,
    /// RX and TX descriptors per queue.
    pub descriptors: (u16, u16),
}

struct PortControl {
    /// ethdev control calls on one port are not thread-safe: one at a time.
    port: Mutex<DpdkPort>,
    /// Counters of the last successful read (returned if a read fails).
    last_stats: Mutex<BackendStats>,
}

/// A shareable control handle on an open DPDK port: link state, counters, xstats. Every
/// call takes a lock (control plane only; the lcores never do).
#[derive(Clone)]
pub struct DpdkPortHandle(Arc<PortControl>);

impl fmt::Debug for DpdkPortHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DpdkPortHandle")
            .field(&*self.lock())
            .finish()
    }
}

impl DpdkPortHandle {
    fn lock(&self) -> MutexGuard<'_, DpdkPort> {
        lock(&self.0.port)
    }

    /// Name, MAC and largest frame of the port as opened.
    #[must_use]
    pub fn info(&self) -> PortInfo {
        self.lock().info().clone()
    }

    /// The ethdev port id.
    #[must_use]
    pub fn port_id(&self) -> u16 {
        self.lock().port_id()
    }

    /// Link state now (`rte_eth_link_get_nowait`).
    ///
    /// # Errors
    /// When the PMD cannot tell.
    pub fn link(&self) -> Result<LinkStatus, DpdkError> {
        self.lock().link()
    }

    /// Every basic NIC counter.
    ///
    /// # Errors
    /// When the PMD fails.
    pub fn nic_stats(&self) -> Result<NicStats, DpdkError> {
        self.lock().nic_stats()
    }

    /// The extended counters as (name, value). Allocates.
    ///
    /// # Errors
    /// When the PMD fails.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        self.lock().xstats()
    }

    /// Everything at once.
    #[must_use]
    pub fn status(&self) -> PortStatus {
        let port = self.lock();
        PortStatus {
            info: port.info().clone(),
            link: port.link().ok(),
            nic: port.nic_stats().ok(),
            flow_control: port.flow_control(),
            promiscuous: port.promiscuous(),
            descriptors: port.descriptors(),
        }
    }

    /// The counters in the runtime's form (headroom-dpdk's `DpdkPort::stats` mapping); on
    /// a failed read, the last good values.
    #[must_use]
    pub fn backend_stats(&self) -> BackendStats {
        let read = self.lock().stats();
        let mut last = lock(&self.0.last_stats);
        match read {
            Ok(s) => *last = s,
            Err(e) => tracing::debug!(error = %e, "NIC counters unreadable; last values kept"),
        }
        *last
    }
}

thread_local! {
    /// This thread's EAL registration, released when the thread ends.
    static REGISTERED: RefCell<Option<ThreadRegistration>> = const { RefCell::new(None) };
}

struct ThreadRegistration(Eal);

impl Drop for ThreadRegistration {
    fn drop(&mut self) {
        self.0.unregister_current_thread();
    }
}

/// Registers the thread that first uses a queue as an EAL lcore (see the module docs).
struct LcoreRegistration {
    eal: Eal,
    done: bool,
}

impl LcoreRegistration {
    fn new(eal: &Eal) -> Self {
        Self {
            eal: eal.clone(),
            done: false,
        }
    }

    #[inline]
    fn ensure(&mut self) {
        if !self.done {
            self.register();
        }
    }

    #[cold]
    fn register(&mut self) {
        self.done = true;
        if crate::sys::lcore_id() != crate::sys::LCORE_ID_ANY {
            // An EAL lcore or already registered: it has a cache.
            return;
        }
        REGISTERED.with(|slot| {
            let mut slot = slot.borrow_mut();
            if slot.is_some() {
                return;
            }
            match self.eal.register_current_thread() {
                Ok(lcore) => {
                    tracing::debug!(
                        lcore,
                        thread = ?std::thread::current().name(),
                        "thread registered as an EAL lcore (mempool cache)"
                    );
                    *slot = Some(ThreadRegistration(self.eal.clone()));
                }
                Err(e) => tracing::warn!(
                    error = %e,
                    "this lcore runs without a mempool cache (slower mbuf alloc/free)"
                ),
            }
        });
    }
}

/// The receive queue of a DPDK port, lent to one lcore; handed back to the backend when
/// dropped (the lcore ends).
pub struct DpdkRx {
    queue: Option<DpdkRxQueue>,
    home: Arc<QueueSlot>,
    lcore: LcoreRegistration,
}

impl fmt::Debug for DpdkRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkRx")
            .field("queue", &self.queue)
            .finish()
    }
}

impl RxQueue for DpdkRx {
    type Frame = MbufFrame;

    #[inline]
    fn rx_burst(&mut self, out: &mut Vec<MbufFrame>, max: usize) -> usize {
        self.lcore.ensure();
        match self.queue.as_mut() {
            Some(q) => q.rx_burst(out, max),
            None => 0,
        }
    }
}

impl Drop for DpdkRx {
    fn drop(&mut self) {
        if let Some(q) = self.queue.take() {
            *lock(&self.home.rx) = Some(q);
        }
    }
}

/// The transmit queue of a DPDK port, lent to one lcore; handed back when dropped.
pub struct DpdkTx {
    queue: Option<DpdkTxQueue>,
    home: Arc<QueueSlot>,
    lcore: LcoreRegistration,
}

impl fmt::Debug for DpdkTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkTx")
            .field("queue", &self.queue)
            .finish()
    }
}

impl TxQueue for DpdkTx {
    type Frame = MbufFrame;

    #[inline]
    fn tx_burst(&mut self, frames: &mut Vec<MbufFrame>) -> usize {
        self.lcore.ensure();
        match self.queue.as_mut() {
            Some(q) => q.tx_burst(frames),
            None => 0,
        }
    }

    #[inline]
    fn alloc_frame(&mut self, len: usize) -> Option<MbufFrame> {
        self.lcore.ensure();
        self.queue.as_mut()?.alloc_frame(len)
    }
}

impl Drop for DpdkTx {
    fn drop(&mut self) {
        if let Some(q) = self.queue.take() {
            *lock(&self.home.tx) = Some(q);
        }
    }
}
