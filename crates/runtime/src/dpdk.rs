//! DPDK ports for the runtime (`switch.driver = "dpdk"`, cargo feature `dpdk`).
//!
//! `DpdkBackend` (with the `dpdk` feature) opens `port.X.device` (a vdev name such as
//! `net_af_packet0`, a PCI address, or a port id) through headroom-dpdk and lends each port's
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
//!   [`Backend::open`](crate::backend::Backend::open) lends them out again. `[dpdk]` settings
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
//!   [`OpenedPort::stats`](crate::backend::OpenedPort) (ipackets/opackets, imissed plus
//!   multi-segment drops, oerrors, rx_nombuf); `DpdkPortHandle` reads link state, every basic
//!   counter and the extended counters for the control plane.
//! - **NIC flow control** (802.3x PAUSE, NIC-level PFC) is switched off when a port opens, and
//!   MAC Control frames are forwarded to software where the NIC allows it (headroom-dpdk).
//! - **Shutdown:** `DpdkBackend::close_ports` stops and closes every port (their RX rings give
//!   their mbufs back) and checks that every mbuf is back in the pool
//!   (`Mempool::available() == capacity()`).
//!
//! The lab helpers ([`lab_eal_args`] and friends) need no DPDK and are always compiled.

use headroom_config::Config;
use headroom_dpdk::args::estimated_pool_bytes;
use headroom_dpdk::PortConfig;
use std::collections::BTreeMap;
use std::fmt;

/// Bytes a frame may carry beyond the MTU: Ethernet header (14) and one 802.1Q tag (4)
/// (headroom-dpdk's `FRAME_OVERHEAD_BYTES`, repeated here because that constant needs DPDK).
pub const FRAME_OVERHEAD_BYTES: u16 = 18;
/// Bytes DPDK reserves in front of the data of every mbuf (`RTE_PKTMBUF_HEADROOM`).
pub const MBUF_HEADROOM_BYTES: u16 = 128;
/// DPDK's default mbuf data room (`RTE_MBUF_DEFAULT_BUF_SIZE`): a 2048-byte frame after the
/// headroom.
pub const DEFAULT_DATA_ROOM_BYTES: u16 = 2048 + MBUF_HEADROOM_BYTES;
/// MTU of a port the settings do not mention.
pub const DEFAULT_MTU_BYTES: u16 = 1500;
/// EAL memory left for what is not the mempool (descriptor rings, queues, EAL's own heap),
/// added by [`eal_memory_mib_for`].
pub const EAL_MEMORY_MARGIN_MIB: u64 = 64;
/// Mbufs the af_xdp PMD of DPDK 22.11 takes from the pool for its fill ring when an RX queue is
/// set up (2048) and may keep after the port closes (up to the ring's 4096 slots).
pub const AF_XDP_FILL_RING_MBUFS: u32 = 4096;

/// The mbuf data room (headroom included) that holds a frame of `mtu_bytes` plus an Ethernet
/// header and one 802.1Q tag in one segment: at least DPDK's default.
#[must_use]
pub fn data_room_for_mtu(mtu_bytes: u16) -> u16 {
    let needed =
        u32::from(mtu_bytes) + u32::from(FRAME_OVERHEAD_BYTES) + u32::from(MBUF_HEADROOM_BYTES);
    u16::try_from(needed)
        .unwrap_or(u16::MAX)
        .max(DEFAULT_DATA_ROOM_BYTES)
}

/// `-m` (MiB) for EAL without hugepages that holds a pool of `mbufs` mbufs with `data_room`
/// bytes each and a per-lcore cache of `cache_size`, plus [`EAL_MEMORY_MARGIN_MIB`], rounded up
/// to 64 MiB. Without hugepages every mbuf of the default size occupies a 4 KiB page
/// (headroom-dpdk's README has the measurements).
#[must_use]
pub fn eal_memory_mib_for(mbufs: u32, cache_size: u32, data_room: u16) -> u64 {
    let pool_mib = estimated_pool_bytes(mbufs, cache_size, data_room).div_ceil(1024 * 1024);
    (pool_mib + EAL_MEMORY_MARGIN_MIB).next_multiple_of(64)
}

/// What the backend needs from the configuration: `[dpdk]` and each port's MTU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DpdkSettings {
    /// EAL arguments as for `dpdk-testpmd`, without the program name.
    pub eal_args: Vec<String>,
    /// Mbufs in the packet mempool.
    pub mempool_mbufs: u32,
    /// Per-lcore mempool cache, mbufs.
    pub mempool_cache_size: u32,
    /// RX descriptors per queue (the device may round).
    pub rx_descriptors: u16,
    /// TX descriptors per queue (the device may round).
    pub tx_descriptors: u16,
    /// MTU per device; devices not listed get [`DEFAULT_MTU_BYTES`].
    pub mtu_by_device: BTreeMap<String, u16>,
    /// Bytes of the switch's buffer (only for the mempool size warning; 0 = no warning).
    pub switch_buffer_bytes: u64,
    /// Turn off segmentation, receive coalescing and TX checksum offloads on the Linux
    /// interfaces under `net_af_packet`/`net_af_xdp` vdevs before EAL opens them, as the
    /// AF_PACKET backend does for its ports (a packet socket sees the kernel's super-frames and
    /// unfilled checksums otherwise; see `headroom_afpacket::offload`).
    pub disable_vdev_offloads: bool,
}

/// A setting the DPDK backend cannot use, or a change it cannot apply without a restart.
#[derive(Debug)]
pub enum DpdkSetupError {
    /// A value of the configuration does not fit the backend.
    Settings(String),
    /// The change needs a restart of the headroom process (EAL, the mempool and the ports are
    /// set up once per process).
    NeedsRestart(String),
    /// EAL could not start.
    #[cfg(feature = "dpdk")]
    Eal(headroom_dpdk::DpdkError),
    /// The mempool could not be created.
    #[cfg(feature = "dpdk")]
    Mempool {
        /// `[dpdk] mempool_mbufs`.
        mbufs: u32,
        /// Data room per mbuf, bytes.
        data_room_bytes: u16,
        /// Why.
        source: headroom_dpdk::DpdkError,
    },
}

impl fmt::Display for DpdkSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Settings(s) => write!(f, "DPDK backend: {s}"),
            Self::NeedsRestart(s) => write!(
                f,
                "{s}: restart headroom to apply it (DPDK starts EAL, the mempool and the ports \
                 once per process)"
            ),
            #[cfg(feature = "dpdk")]
            Self::Eal(e) => write!(f, "[dpdk] eal_args: {e}"),
            #[cfg(feature = "dpdk")]
            Self::Mempool {
                mbufs,
                data_room_bytes,
                source,
            } => write!(
                f,
                "[dpdk] mempool_mbufs = {mbufs} ({data_room_bytes}-byte mbufs for the largest port \
                 MTU): {source}"
            ),
        }
    }
}

impl std::error::Error for DpdkSetupError {}

impl DpdkSettings {
    /// The settings of a configuration (its `[dpdk]` section and port MTUs).
    ///
    /// # Errors
    /// A port MTU that no mbuf can hold (above 65 535 - 146 bytes).
    pub fn from_config(config: &Config) -> Result<Self, DpdkSetupError> {
        let mut mtu_by_device = BTreeMap::new();
        for port in &config.ports {
            let mtu = u16::try_from(port.mtu_bytes)
                .ok()
                .filter(|m| {
                    u32::from(*m) + u32::from(FRAME_OVERHEAD_BYTES) + u32::from(MBUF_HEADROOM_BYTES)
                        <= u32::from(u16::MAX)
                })
                .ok_or_else(|| {
                    DpdkSetupError::Settings(format!(
                        "port {}: MTU {} does not fit one DPDK mbuf",
                        port.name, port.mtu_bytes
                    ))
                })?;
            mtu_by_device.insert(port.device.clone(), mtu);
        }
        Ok(Self {
            eal_args: config.dpdk.eal_args.clone(),
            mempool_mbufs: config.dpdk.mempool_mbufs,
            mempool_cache_size: config.dpdk.mempool_cache_size,
            rx_descriptors: config.dpdk.rx_descriptors,
            tx_descriptors: config.dpdk.tx_descriptors,
            mtu_by_device,
            switch_buffer_bytes: config.switch.buffer_size_bytes,
            disable_vdev_offloads: true,
        })
    }

    /// The largest MTU of any port.
    #[must_use]
    pub fn max_mtu(&self) -> u16 {
        self.mtu_by_device
            .values()
            .copied()
            .max()
            .unwrap_or(DEFAULT_MTU_BYTES)
    }

    /// The mempool's data room: the largest MTU in one segment.
    #[must_use]
    pub fn data_room_bytes(&self) -> u16 {
        data_room_for_mtu(self.max_mtu())
    }

    /// How to open `device`: one RX and one TX queue, the configured descriptors and MTU,
    /// promiscuous (a switch port receives every destination).
    #[must_use]
    pub fn port_config(&self, device: &str) -> PortConfig {
        PortConfig {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: self.rx_descriptors,
            tx_desc: self.tx_descriptors,
            mtu: self
                .mtu_by_device
                .get(device)
                .copied()
                .unwrap_or(DEFAULT_MTU_BYTES),
            promiscuous: true,
        }
    }

    /// Why `new` cannot replace `self` in a running process, if it cannot: EAL, the mempool and
    /// the descriptor rings are set up once. (MTUs are checked per port when it is lent out.)
    #[must_use]
    pub fn restart_needed_for(&self, new: &Self) -> Option<String> {
        let mut changed = Vec::new();
        if self.eal_args != new.eal_args {
            changed.push("eal_args");
        }
        if self.mempool_mbufs != new.mempool_mbufs {
            changed.push("mempool_mbufs");
        }
        if self.mempool_cache_size != new.mempool_cache_size {
            changed.push("mempool_cache_size");
        }
        if self.rx_descriptors != new.rx_descriptors {
            changed.push("rx_descriptors");
        }
        if self.tx_descriptors != new.tx_descriptors {
            changed.push("tx_descriptors");
        }
        if new.data_room_bytes() > self.data_room_bytes() {
            changed.push("a port MTU beyond what the mempool's mbufs hold");
        }
        (!changed.is_empty()).then(|| format!("[dpdk] change of {}", changed.join(", ")))
    }
}

/// The Linux interfaces under the `net_af_packet` and `net_af_xdp` vdevs of EAL arguments, as
/// (vdev name, interface): `--vdev=net_af_packet0,iface=veth0` and `--vdev net_af_xdp1,iface=x`
/// give `("net_af_packet0", "veth0")` and `("net_af_xdp1", "x")`.
#[must_use]
pub fn vdev_interfaces(eal_args: &[String]) -> Vec<(String, String)> {
    let mut specs = Vec::new();
    let mut args = eal_args.iter();
    while let Some(arg) = args.next() {
        if let Some(spec) = arg.strip_prefix("--vdev=") {
            specs.push(spec.to_owned());
        } else if arg == "--vdev" {
            if let Some(spec) = args.next() {
                specs.push(spec.clone());
            }
        }
    }
    specs
        .iter()
        .filter_map(|spec| {
            let mut parts = spec.split(',');
            let name = parts.next()?;
            if !(name.starts_with("net_af_packet") || name.starts_with("net_af_xdp")) {
                return None;
            }
            let iface = parts.find_map(|kv| kv.strip_prefix("iface="))?;
            Some((name.to_owned(), iface.to_owned()))
        })
        .collect()
}

/// The PMD a lab port uses on its veth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LabVdev {
    /// `net_af_packet`: a PACKET_MMAP socket on the interface (CAP_NET_RAW + CAP_NET_ADMIN).
    AfPacket,
    /// `net_af_xdp`: an AF_XDP socket (native XDP on veth; needs root).
    AfXdp,
}

impl LabVdev {
    /// The PMD's name (`net_af_packet`, `net_af_xdp`).
    #[must_use]
    pub fn driver(self) -> &'static str {
        match self {
            Self::AfPacket => "net_af_packet",
            Self::AfXdp => "net_af_xdp",
        }
    }

    /// The device name of lab port `index`: what `port.X.device` must say
    /// (`net_af_packet0`, ...).
    #[must_use]
    pub fn device_name(self, index: usize) -> String {
        format!("{}{index}", self.driver())
    }

    /// The `--vdev` argument for lab port `index` on interface `iface`.
    #[must_use]
    pub fn vdev_arg(self, index: usize, iface: &str) -> String {
        match self {
            // One queue pair; 2048-byte ring frames hold a 1500-byte MTU frame. 4096 frames
            // per ring (8 MiB of kernel memory each) instead of the PMD's 512: on a shared
            // machine a busy-polling switch is preempted for milliseconds at a time, and 512
            // frames overflowed at 40 kpps in the benchmarks (docs/perf.md).
            Self::AfPacket => format!(
                "--vdev={},iface={iface},qpairs=1,framesz=2048,framecnt=4096",
                self.device_name(index)
            ),
            Self::AfXdp => format!(
                "--vdev={},iface={iface},start_queue=0,queue_count=1",
                self.device_name(index)
            ),
        }
    }
}

/// Mbufs a lab switch with `ports` ports on `vdev` needs: 8191 for traffic (several bursts per
/// port and what the lab's 1G queues hold at 1500 bytes), plus the af_xdp fill rings.
#[must_use]
pub fn lab_mempool_mbufs(vdev: LabVdev, ports: usize) -> u32 {
    let traffic = 8191;
    match vdev {
        LabVdev::AfPacket => traffic,
        LabVdev::AfXdp => {
            let ports = u32::try_from(ports).unwrap_or(u32::MAX);
            traffic.saturating_add(ports.saturating_mul(AF_XDP_FILL_RING_MBUFS))
        }
    }
}

/// EAL arguments for a lab switch whose ports are the veths `ifaces` (switch ends, in port
/// order) through `vdev`: no hugepages, `-m` sized for [`lab_mempool_mbufs`] at the default
/// data room (MTU up to 2030) with a 256-mbuf cache, no PCI scan, main lcore on `main_cpu`,
/// the given `--file-prefix`, and one `--vdev` per interface. Port i is then opened as
/// [`LabVdev::device_name`]`(i)`.
///
/// EAL opens the vdevs' interfaces in the network namespace of the process that starts it, so
/// `headroom run` must run inside the switch's namespace (`ip netns exec <ns> headroom run`).
#[must_use]
pub fn lab_eal_args(
    ifaces: &[&str],
    vdev: LabVdev,
    file_prefix: &str,
    main_cpu: usize,
) -> Vec<String> {
    let mbufs = lab_mempool_mbufs(vdev, ifaces.len());
    let memory_mib = eal_memory_mib_for(mbufs, 256, DEFAULT_DATA_ROOM_BYTES);
    let mut args = vec![
        "--no-huge".to_owned(),
        "-m".to_owned(),
        memory_mib.to_string(),
        "--no-pci".to_owned(),
        "-l".to_owned(),
        main_cpu.to_string(),
        format!("--file-prefix={file_prefix}"),
        "--log-level=notice".to_owned(),
    ];
    args.extend(
        ifaces
            .iter()
            .enumerate()
            .map(|(i, iface)| vdev.vdev_arg(i, iface)),
    );
    args
}

#[cfg(feature = "dpdk")]
pub use backend::{DpdkBackend, DpdkPortHandle, DpdkRx, DpdkTx, PoolCheck, PortStatus};

#[cfg(feature = "dpdk")]
mod backend {
    use super::{DpdkSettings, DpdkSetupError, AF_XDP_FILL_RING_MBUFS};
    use crate::backend::{Backend, BackendError, OpenedPort, StatsReader};
    use headroom_core::frame::Frame;
    use headroom_dpdk::{
        DpdkError, DpdkPort, DpdkRxQueue, DpdkTxQueue, Eal, FlowControlState, LinkStatus,
        MbufFrame, Mempool, NicStats, PromiscuousState,
    };
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
    /// across dataplane restarts). See the [module docs](super).
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
                for (vdev, iface) in super::vdev_interfaces(&settings.eal_args) {
                    let report =
                        headroom_afpacket::offload::disable_offloads(&iface).map_err(|e| {
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

        /// The backend for a configuration: [`DpdkSettings::from_config`], then [`Self::new`].
        ///
        /// # Errors
        /// As those two.
        pub fn from_config(config: &headroom_config::Config) -> Result<Self, DpdkSetupError> {
            Self::new(DpdkSettings::from_config(config)?)
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

        /// [`Self::reconfigure`] from a configuration.
        ///
        /// # Errors
        /// As [`DpdkSettings::from_config`] and [`Self::reconfigure`].
        pub fn reconfigure_from(
            &mut self,
            config: &headroom_config::Config,
        ) -> Result<(), DpdkSetupError> {
            self.reconfigure(DpdkSettings::from_config(config)?)
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
            let mut port = DpdkPort::open(&self.eal, device, &config, &self.pool).map_err(|e| {
                BackendError {
                    device: device.to_owned(),
                    reason: e.to_string(),
                }
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
            info.max_frame_len = usize::from(wanted_mtu) + usize::from(super::FRAME_OVERHEAD_BYTES);
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
            if headroom_dpdk::sys::lcore_id() != headroom_dpdk::sys::LCORE_ID_ANY {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_room_holds_mtu_plus_header_tag_and_headroom() {
        assert_eq!(data_room_for_mtu(1500), DEFAULT_DATA_ROOM_BYTES);
        assert_eq!(data_room_for_mtu(2030), DEFAULT_DATA_ROOM_BYTES);
        assert_eq!(data_room_for_mtu(2031), DEFAULT_DATA_ROOM_BYTES + 1);
        assert_eq!(data_room_for_mtu(9100), 9100 + 18 + 128);
    }

    #[test]
    fn lab_eal_args_have_one_vdev_per_interface_and_enough_memory() {
        let args = lab_eal_args(&["sw-p0", "sw-p1"], LabVdev::AfPacket, "hr-sw", 1);
        assert_eq!(
            &args[..8],
            &[
                "--no-huge",
                "-m",
                "128",
                "--no-pci",
                "-l",
                "1",
                "--file-prefix=hr-sw",
                "--log-level=notice"
            ]
        );
        assert_eq!(
            &args[8..],
            &[
                "--vdev=net_af_packet0,iface=sw-p0,qpairs=1,framesz=2048,framecnt=4096",
                "--vdev=net_af_packet1,iface=sw-p1,qpairs=1,framesz=2048,framecnt=4096"
            ]
        );
        let memory_mib: u64 = args[2].parse().unwrap();
        let mbufs = lab_mempool_mbufs(LabVdev::AfPacket, 2);
        assert!(
            estimated_pool_bytes(mbufs, 256, DEFAULT_DATA_ROOM_BYTES) + (32 << 20)
                <= memory_mib << 20
        );
        assert_eq!(LabVdev::AfPacket.device_name(1), "net_af_packet1");

        let xdp = lab_eal_args(&["a", "b", "c", "d"], LabVdev::AfXdp, "p", 0);
        let memory_mib: u64 = xdp[2].parse().unwrap();
        let mbufs = lab_mempool_mbufs(LabVdev::AfXdp, 4);
        assert_eq!(mbufs, 8191 + 4 * 4096);
        assert!(
            estimated_pool_bytes(mbufs, 256, DEFAULT_DATA_ROOM_BYTES) + (32 << 20)
                <= memory_mib << 20
        );
        assert_eq!(
            xdp[8],
            "--vdev=net_af_xdp0,iface=a,start_queue=0,queue_count=1"
        );
    }

    #[test]
    fn vdev_interfaces_are_found_in_either_argument_form() {
        let args: Vec<String> = [
            "--no-huge",
            "--vdev=net_af_packet0,iface=sw-p0,framecnt=4096",
            "--vdev",
            "net_af_xdp1,start_queue=0,iface=x1",
            "--vdev=net_null0",
            "--vdev=net_af_packet2",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        assert_eq!(
            vdev_interfaces(&args),
            vec![
                ("net_af_packet0".to_owned(), "sw-p0".to_owned()),
                ("net_af_xdp1".to_owned(), "x1".to_owned())
            ]
        );
        let lab = lab_eal_args(&["a", "b"], LabVdev::AfXdp, "p", 0);
        assert_eq!(vdev_interfaces(&lab).len(), 2);
    }

    #[test]
    fn settings_come_from_the_config_and_restarts_are_refused_for_dpdk_changes() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/dpdk-null.toml");
        let (config, _) = headroom_config::load(path).unwrap();
        let settings = DpdkSettings::from_config(&config).unwrap();
        assert_eq!(settings.mempool_mbufs, config.dpdk.mempool_mbufs);
        assert_eq!(settings.eal_args, config.dpdk.eal_args);
        let pc = settings.port_config("net_null0");
        assert_eq!((pc.rx_queues, pc.tx_queues), (1, 1));
        assert_eq!(u32::from(pc.mtu), config.ports[0].mtu_bytes);
        assert_eq!(
            settings.data_room_bytes(),
            data_room_for_mtu(settings.max_mtu())
        );
        assert_eq!(settings.restart_needed_for(&settings), None);

        let mut bigger = settings.clone();
        bigger.mempool_mbufs += 1;
        bigger.eal_args.push("--no-shconf".into());
        let why = settings.restart_needed_for(&bigger).unwrap();
        assert!(
            why.contains("eal_args") && why.contains("mempool_mbufs"),
            "{why}"
        );

        let mut smaller_mtu = settings.clone();
        smaller_mtu.mtu_by_device.insert("net_null0".into(), 1500);
        assert_eq!(settings.restart_needed_for(&smaller_mtu), None);
        let mut jumbo = smaller_mtu.clone();
        jumbo.mtu_by_device.insert("net_null1".into(), 9216);
        let why = smaller_mtu.restart_needed_for(&jumbo).unwrap();
        assert!(why.contains("MTU"), "{why}");
    }
}
