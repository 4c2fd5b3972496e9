//! DPDK ethdev ports: open, configure, split into per-queue halves, stats.

use std::collections::BTreeSet;
use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use dpdk_sys as sys;
use headroom_io::{BackendStats, PortInfo, RxQueue, TxQueue, BURST_MAX};

use crate::config::{FlowControlState, LinkStatus, NicStats, PortConfig, PromiscuousState};
use crate::eal::Eal;
use crate::error::DpdkError;
use crate::mbuf::MbufFrame;
use crate::mempool::Mempool;

pub use crate::settings::FRAME_OVERHEAD_BYTES;

/// RSS hash types requested when a port has several RX queues (IPv4/IPv6 addresses and
/// TCP/UDP ports), masked with what the device supports. Values of `RTE_ETH_RSS_*` in
/// rte_ethdev.h (RTE_BIT64 macros, not emitted by bindgen).
const RSS_HASH_TYPES: u64 = (1 << 2) // IPV4
    | (1 << 3) // FRAG_IPV4
    | (1 << 4) // NONFRAG_IPV4_TCP
    | (1 << 5) // NONFRAG_IPV4_UDP
    | (1 << 7) // NONFRAG_IPV4_OTHER
    | (1 << 8) // IPV6
    | (1 << 9) // FRAG_IPV6
    | (1 << 10) // NONFRAG_IPV6_TCP
    | (1 << 11) // NONFRAG_IPV6_UDP
    | (1 << 13); // NONFRAG_IPV6_OTHER

/// Ports open in this process: ethdev control calls on one port are not thread-safe, and a
/// port must be configured by one owner.
static OPEN_PORTS: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

fn open_ports() -> std::sync::MutexGuard<'static, BTreeSet<u16>> {
    OPEN_PORTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An open, started DPDK port: the control-plane handle (info, link, stats) and, until
/// [`DpdkPort::split`], its queues.
///
/// The port is stopped and closed (`rte_eth_dev_stop`, `rte_eth_dev_close`) when this handle
/// and every queue from `split` are dropped; queues keep it open, so a queue can never poll a
/// closed port. Closing is final for the process (DPDK releases the port).
pub struct DpdkPort {
    shared: Arc<PortShared>,
    queues: Option<(Vec<DpdkRxQueue>, Vec<DpdkTxQueue>)>,
}

/// What the port and its queues share. Dropped when the last of them goes.
struct PortShared {
    port_id: u16,
    info: PortInfo,
    config: PortConfig,
    rx_desc: u16,
    tx_desc: u16,
    rss_hash_types: u64,
    flow_control: FlowControlState,
    promiscuous: PromiscuousState,
    /// Per RX queue: multi-segment frames dropped by `rx_burst`.
    rx_multi_segment_dropped: Box<[AtomicU64]>,
    mempool: Mempool,
}

/// Guard for a port being opened: stops it if started and releases the registry slot unless
/// the open completes.
struct OpeningPort {
    port_id: u16,
    started: bool,
}

impl Drop for OpeningPort {
    fn drop(&mut self) {
        if self.started {
            // SAFETY: the port was started by this open and is not used by anyone else.
            unsafe { sys::rte_eth_dev_stop(self.port_id) };
        }
        open_ports().remove(&self.port_id);
    }
}

fn call_error(call: &'static str, port_id: u16, code: i32) -> DpdkError {
    DpdkError::Call {
        call,
        subject: format!("port {port_id}"),
        code,
        text: sys::strerror(code),
    }
}

fn check(call: &'static str, port_id: u16, rc: i32) -> Result<(), DpdkError> {
    if rc < 0 {
        Err(call_error(call, port_id, rc))
    } else {
        Ok(())
    }
}

/// Name of `port_id` as DPDK knows it (vdev name or PCI address).
fn port_name(port_id: u16) -> Option<String> {
    let mut buf = [0 as c_char; sys::RTE_ETH_NAME_MAX_LEN as usize];
    // SAFETY: buf has RTE_ETH_NAME_MAX_LEN bytes, as the call requires; DPDK NUL-terminates.
    let rc = unsafe { sys::rte_eth_dev_get_name_by_port(port_id, buf.as_mut_ptr()) };
    (rc == 0).then(|| {
        // SAFETY: on success buf holds a NUL-terminated name.
        unsafe { CStr::from_ptr(buf.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    })
}

fn port_by_name(name: &str) -> Option<u16> {
    let c_name = CString::new(name).ok()?;
    let mut port_id = u16::MAX;
    // SAFETY: c_name is a valid C string; port_id is a live local.
    let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut port_id) };
    (rc == 0).then_some(port_id)
}

/// Every port EAL probed, as (port id, name).
#[must_use]
pub fn available_ports(_eal: &Eal) -> Vec<(u16, String)> {
    (0..u16::try_from(sys::RTE_MAX_ETHPORTS).unwrap_or(u16::MAX))
        .filter(|&port_id| {
            // SAFETY: EAL is up (`_eal` exists); any id is a valid argument.
            unsafe { sys::rte_eth_dev_is_valid_port(port_id) == 1 }
        })
        .filter_map(|port_id| port_name(port_id).map(|name| (port_id, name)))
        .collect()
}

/// Resolves a port by ethdev name (`net_af_packet0`, `0000:3b:00.0`), short PCI address
/// (`3b:00.0`) or numeric port id.
fn resolve_port(eal: &Eal, requested: &str) -> Result<u16, DpdkError> {
    let by_pci_short = || {
        let looks_short_pci = requested.len() == 7
            && requested.as_bytes()[2] == b':'
            && requested.as_bytes()[5] == b'.';
        looks_short_pci
            .then(|| port_by_name(&format!("0000:{requested}")))
            .flatten()
    };
    let by_id = || {
        requested.parse::<u16>().ok().filter(|&id| {
            // SAFETY: any id is a valid argument; the call checks the port table.
            unsafe { sys::rte_eth_dev_is_valid_port(id) == 1 }
        })
    };
    port_by_name(requested)
        .or_else(by_pci_short)
        .or_else(by_id)
        .ok_or_else(|| DpdkError::PortNotFound {
            requested: requested.to_owned(),
            available: available_ports(eal)
                .into_iter()
                .map(|(_, name)| name)
                .collect(),
        })
}

impl DpdkPort {
    /// Opens port `name_or_id` (an ethdev name such as `net_af_packet0` or `0000:3b:00.0`, a
    /// short PCI address `3b:00.0`, or a numeric port id) with `config`:
    ///
    /// 1. configures `rx_queues` RX and `tx_queues` TX queues (RSS over IP addresses and TCP/UDP
    ///    ports spreads flows over several RX queues when the device supports it) and the MTU;
    /// 2. sets the RX queues up with buffers from `mempool`, whose mbufs must hold a whole
    ///    frame of `mtu + 18` bytes (multi-segment frames are not supported);
    /// 3. starts the port;
    /// 4. switches the NIC's own flow control (802.3 PAUSE) off and asks it to hand received
    ///    MAC Control frames to software: headroom generates and honours PFC (802.1Qbb) itself,
    ///    and NIC pause would stop the wire behind its back. A device without flow-control
    ///    support (every virtual PMD) records [`FlowControlState::NotSupported`];
    /// 5. enables promiscuous mode when asked (recorded as [`PromiscuousState::NotSupported`]
    ///    where the PMD has no such mode).
    ///
    /// On failure the port is stopped but not closed, so it can be opened again with a
    /// corrected configuration.
    ///
    /// # Errors
    /// [`DpdkError::PortNotFound`], [`DpdkError::PortInUse`], [`DpdkError::InvalidPortConfig`],
    /// or [`DpdkError::Call`] naming the DPDK call that failed.
    pub fn open(
        eal: &Eal,
        name_or_id: &str,
        config: &PortConfig,
        mempool: &Mempool,
    ) -> Result<Self, DpdkError> {
        let port_id = resolve_port(eal, name_or_id)?;
        if !open_ports().insert(port_id) {
            return Err(DpdkError::PortInUse { port_id });
        }
        let mut opening = OpeningPort {
            port_id,
            started: false,
        };
        let invalid = |reason: String| DpdkError::InvalidPortConfig { port_id, reason };

        // SAFETY: all-zero is a valid rte_eth_dev_info to be filled in.
        let mut dev_info: sys::rte_eth_dev_info = unsafe { std::mem::zeroed() };
        // SAFETY: port_id is valid (resolved above); dev_info is a live local.
        check("rte_eth_dev_info_get", port_id, unsafe {
            sys::rte_eth_dev_info_get(port_id, &mut dev_info)
        })?;
        if config.rx_queues == 0 || config.rx_queues > dev_info.max_rx_queues {
            return Err(invalid(format!(
                "{} RX queues requested; the device supports 1 to {}",
                config.rx_queues, dev_info.max_rx_queues
            )));
        }
        if config.tx_queues == 0 || config.tx_queues > dev_info.max_tx_queues {
            return Err(invalid(format!(
                "{} TX queues requested; the device supports 1 to {}",
                config.tx_queues, dev_info.max_tx_queues
            )));
        }
        if config.mtu < dev_info.min_mtu || config.mtu > dev_info.max_mtu {
            return Err(invalid(format!(
                "MTU {} outside the device's range {}..={}",
                config.mtu, dev_info.min_mtu, dev_info.max_mtu
            )));
        }
        let max_frame_len = usize::from(config.mtu) + usize::from(FRAME_OVERHEAD_BYTES);
        if max_frame_len > mempool.max_frame_len() {
            return Err(invalid(format!(
                "MTU {} needs {max_frame_len}-byte frames but mempool {:?} holds at most {} bytes \
                 per mbuf after the headroom (multi-segment frames are not supported): create \
                 the pool with a data room of at least {} bytes",
                config.mtu,
                mempool.name(),
                mempool.max_frame_len(),
                max_frame_len + usize::from(crate::mempool::MBUF_HEADROOM_BYTES)
            )));
        }

        // SAFETY: all-zero is DPDK's documented default rte_eth_conf (no offloads, no
        // multi-queue mode, no NIC loopback, no interrupts).
        let mut conf: sys::rte_eth_conf = unsafe { std::mem::zeroed() };
        conf.rxmode.mtu = u32::from(config.mtu);
        let rss_hash_types = if config.rx_queues > 1 {
            RSS_HASH_TYPES & dev_info.flow_type_rss_offloads
        } else {
            0
        };
        if rss_hash_types != 0 {
            conf.rxmode.mq_mode = sys::rte_eth_rx_mq_mode::RTE_ETH_MQ_RX_RSS;
            conf.rx_adv_conf.rss_conf.rss_hf = rss_hash_types;
        }
        // SAFETY: port_id is valid and stopped (not started by anyone: registry); conf is live.
        check("rte_eth_dev_configure", port_id, unsafe {
            sys::rte_eth_dev_configure(port_id, config.rx_queues, config.tx_queues, &conf)
        })?;
        let mut rx_desc = config.rx_desc;
        let mut tx_desc = config.tx_desc;
        // SAFETY: port_id is valid and configured; both pointers are live locals.
        check("rte_eth_dev_adjust_nb_rx_tx_desc", port_id, unsafe {
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(port_id, &mut rx_desc, &mut tx_desc)
        })?;
        // SAFETY: port_id is valid.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        // SOCKET_ID_ANY (-1) wraps to u32::MAX, which queue setup reads as "any socket".
        let socket = socket as u32;
        for queue in 0..config.rx_queues {
            // SAFETY: port configured with `rx_queues` queues; NULL rxconf selects the PMD's
            // defaults; the pool outlives the port (PortShared keeps a handle).
            let rc = unsafe {
                sys::rte_eth_rx_queue_setup(
                    port_id,
                    queue,
                    rx_desc,
                    socket,
                    std::ptr::null(),
                    mempool.as_ptr().as_ptr(),
                )
            };
            if rc < 0 {
                // PMDs often fill their RX ring from the pool here (af_xdp takes 2048 mbufs per
                // queue): say how full the pool is.
                let driver = if dev_info.driver_name.is_null() {
                    "?".into()
                } else {
                    // SAFETY: dev_info_get set driver_name to the PMD's static C string.
                    unsafe { CStr::from_ptr(dev_info.driver_name) }.to_string_lossy()
                };
                return Err(DpdkError::Call {
                    call: "rte_eth_rx_queue_setup",
                    subject: format!(
                        "port {port_id} ({driver}) RX queue {queue} with {rx_desc} descriptors; \
                         mempool {:?} has {} of {} mbufs free (some PMDs fill their ring from \
                         it here, net_af_xdp takes 2048 per queue; see the EAL log)",
                        mempool.name(),
                        mempool.available(),
                        mempool.capacity()
                    ),
                    code: rc,
                    text: sys::strerror(rc),
                });
            }
        }
        for queue in 0..config.tx_queues {
            // SAFETY: port configured with `tx_queues` queues; NULL txconf selects defaults
            // (no MBUF_FAST_FREE, which would be wrong for frames from several pools).
            check("rte_eth_tx_queue_setup", port_id, unsafe {
                sys::rte_eth_tx_queue_setup(port_id, queue, tx_desc, socket, std::ptr::null())
            })?;
        }
        // SAFETY: port configured with all queues set up.
        check("rte_eth_dev_start", port_id, unsafe {
            sys::rte_eth_dev_start(port_id)
        })?;
        opening.started = true;

        let flow_control = switch_flow_control_off(port_id)?;
        let promiscuous = if config.promiscuous {
            // SAFETY: port is valid and started.
            match unsafe { sys::rte_eth_promiscuous_enable(port_id) } {
                0 => PromiscuousState::Enabled,
                rc if rc == -libc::ENOTSUP => PromiscuousState::NotSupported,
                rc => return Err(call_error("rte_eth_promiscuous_enable", port_id, rc)),
            }
        } else {
            PromiscuousState::Disabled
        };

        let mut mac = sys::rte_ether_addr::default();
        // SAFETY: port valid; mac is a live local.
        check("rte_eth_macaddr_get", port_id, unsafe {
            sys::rte_eth_macaddr_get(port_id, &mut mac)
        })?;
        let info = PortInfo {
            name: port_name(port_id).unwrap_or_else(|| name_or_id.to_owned()),
            mac: mac.addr_bytes,
            max_frame_len,
        };
        let shared = Arc::new(PortShared {
            port_id,
            info,
            config: *config,
            rx_desc,
            tx_desc,
            rss_hash_types,
            flow_control,
            promiscuous,
            rx_multi_segment_dropped: (0..config.rx_queues).map(|_| AtomicU64::new(0)).collect(),
            mempool: mempool.clone(),
        });
        // The port is fully open: from here on PortShared's Drop stops and closes it.
        std::mem::forget(opening);
        let rx = (0..config.rx_queues)
            .map(|queue_id| DpdkRxQueue {
                shared: Arc::clone(&shared),
                port_id,
                queue_id,
            })
            .collect();
        let tx = (0..config.tx_queues)
            .map(|queue_id| DpdkTxQueue {
                shared: Arc::clone(&shared),
                port_id,
                queue_id,
                pool: mempool.as_ptr(),
            })
            .collect();
        Ok(Self {
            shared,
            queues: Some((rx, tx)),
        })
    }

    /// Hands out the port's queues, one value per RX and per TX queue, each to be polled by
    /// one lcore. Only once: every queue has exactly one owner.
    ///
    /// # Errors
    /// [`DpdkError::AlreadySplit`] on a second call.
    pub fn split(&mut self) -> Result<(Vec<DpdkRxQueue>, Vec<DpdkTxQueue>), DpdkError> {
        self.queues.take().ok_or(DpdkError::AlreadySplit)
    }

    /// The ethdev port id.
    #[must_use]
    pub fn port_id(&self) -> u16 {
        self.shared.port_id
    }

    /// Name, MAC address and largest frame (MTU + Ethernet header + one 802.1Q tag).
    #[must_use]
    pub fn info(&self) -> &PortInfo {
        &self.shared.info
    }

    /// The configuration the port was opened with.
    #[must_use]
    pub fn config(&self) -> &PortConfig {
        &self.shared.config
    }

    /// RX and TX descriptors per queue after the device's limits were applied.
    #[must_use]
    pub fn descriptors(&self) -> (u16, u16) {
        (self.shared.rx_desc, self.shared.tx_desc)
    }

    /// RSS hash types in use (`RTE_ETH_RSS_*` bits); 0 with one RX queue or no RSS support.
    #[must_use]
    pub fn rss_hash_types(&self) -> u64 {
        self.shared.rss_hash_types
    }

    /// What became of the NIC's own flow control.
    #[must_use]
    pub fn flow_control(&self) -> FlowControlState {
        self.shared.flow_control
    }

    /// Whether promiscuous mode is on.
    #[must_use]
    pub fn promiscuous(&self) -> PromiscuousState {
        self.shared.promiscuous
    }

    /// The pool the RX queues and `alloc_frame` take mbufs from.
    #[must_use]
    pub fn mempool(&self) -> &Mempool {
        &self.shared.mempool
    }

    /// Link state without waiting (`rte_eth_link_get_nowait`).
    ///
    /// # Errors
    /// [`DpdkError::Call`] when the PMD cannot tell.
    pub fn link(&self) -> Result<LinkStatus, DpdkError> {
        let port_id = self.shared.port_id;
        let mut link = sys::rte_eth_link::default();
        // SAFETY: port is open; link is a live local.
        check("rte_eth_link_get_nowait", port_id, unsafe {
            sys::rte_eth_link_get_nowait(port_id, &mut link)
        })?;
        Ok(LinkStatus {
            up: u32::from(link.link_status()) == sys::RTE_ETH_LINK_UP,
            speed_mbps: (link.link_speed != sys::RTE_ETH_SPEED_NUM_UNKNOWN && link.link_speed != 0)
                .then_some(link.link_speed),
            full_duplex: u32::from(link.link_duplex()) == sys::RTE_ETH_LINK_FULL_DUPLEX,
            autoneg: u32::from(link.link_autoneg()) == sys::RTE_ETH_LINK_AUTONEG,
        })
    }

    /// The NIC's basic counters (`rte_eth_stats_get`) plus this backend's own RX drops.
    ///
    /// # Errors
    /// [`DpdkError::Call`] when the PMD fails.
    pub fn nic_stats(&self) -> Result<NicStats, DpdkError> {
        let port_id = self.shared.port_id;
        let mut stats = sys::rte_eth_stats::default();
        // SAFETY: port is open; stats is a live local. Safe while queues are polled: the PMD
        // only reads its counters.
        check("rte_eth_stats_get", port_id, unsafe {
            sys::rte_eth_stats_get(port_id, &mut stats)
        })?;
        Ok(NicStats {
            rx_packets: stats.ipackets,
            tx_packets: stats.opackets,
            rx_bytes: stats.ibytes,
            tx_bytes: stats.obytes,
            rx_missed: stats.imissed,
            rx_errors: stats.ierrors,
            tx_errors: stats.oerrors,
            rx_no_mbuf: stats.rx_nombuf,
            rx_multi_segment_dropped: self.rx_multi_segment_dropped(),
        })
    }

    /// Counters in headroom's backend-independent form:
    /// `rx_frames` = ipackets, `tx_frames` = opackets, `rx_missed` = imissed (RX ring full) +
    /// multi-segment frames this backend dropped, `tx_failed` = oerrors, `rx_no_buffer` =
    /// rx_nombuf.
    ///
    /// # Errors
    /// [`DpdkError::Call`] when the PMD fails.
    pub fn stats(&self) -> Result<BackendStats, DpdkError> {
        self.nic_stats().map(|nic| BackendStats {
            rx_frames: nic.rx_packets,
            tx_frames: nic.tx_packets,
            rx_missed: nic.rx_missed.saturating_add(nic.rx_multi_segment_dropped),
            tx_failed: nic.tx_errors,
            rx_no_buffer: nic.rx_no_mbuf,
        })
    }

    /// Resets the NIC's basic counters (not the backend's own).
    ///
    /// # Errors
    /// [`DpdkError::Call`] when the PMD fails.
    pub fn reset_stats(&self) -> Result<(), DpdkError> {
        // SAFETY: port is open.
        check("rte_eth_stats_reset", self.shared.port_id, unsafe {
            sys::rte_eth_stats_reset(self.shared.port_id)
        })
    }

    /// The device's extended statistics as (name, value) pairs, for the control plane.
    /// Allocates; not for the packet path.
    ///
    /// # Errors
    /// [`DpdkError::Call`] when the PMD fails.
    pub fn xstats(&self) -> Result<Vec<(String, u64)>, DpdkError> {
        let port_id = self.shared.port_id;
        // Counters may appear between the two calls (queue stats); retry a few times.
        for _ in 0..4 {
            // SAFETY: NULL/0 asks only for the number of counters.
            let count = unsafe { sys::rte_eth_xstats_get_names(port_id, std::ptr::null_mut(), 0) };
            check("rte_eth_xstats_get_names", port_id, count)?;
            let len = usize::try_from(count).unwrap_or(0);
            let size = u32::try_from(count).unwrap_or(0);
            let mut names = vec![sys::rte_eth_xstat_name::default(); len];
            let mut values = vec![sys::rte_eth_xstat::default(); len];
            // SAFETY: both vectors have room for `size` entries.
            let got_names =
                unsafe { sys::rte_eth_xstats_get_names(port_id, names.as_mut_ptr(), size) };
            check("rte_eth_xstats_get_names", port_id, got_names)?;
            // SAFETY: as above.
            let got_values = unsafe { sys::rte_eth_xstats_get(port_id, values.as_mut_ptr(), size) };
            check("rte_eth_xstats_get", port_id, got_values)?;
            if got_names != count || got_values != count {
                continue;
            }
            return Ok(values
                .iter()
                .filter_map(|value| {
                    let name = names.get(usize::try_from(value.id).ok()?)?;
                    // SAFETY: DPDK NUL-terminates xstat names within their fixed array.
                    let name = unsafe { CStr::from_ptr(name.name.as_ptr()) };
                    Some((name.to_string_lossy().into_owned(), value.value))
                })
                .collect());
        }
        Err(DpdkError::Call {
            call: "rte_eth_xstats_get",
            subject: format!("port {port_id}"),
            code: -libc::EAGAIN,
            text: "the number of extended counters kept changing".to_owned(),
        })
    }

    fn rx_multi_segment_dropped(&self) -> u64 {
        self.shared
            .rx_multi_segment_dropped
            .iter()
            .map(|count| count.load(Ordering::Relaxed))
            .sum()
    }
}

/// Switches the NIC's link-level pause (IEEE 802.3 Annex 31B) off and asks it to forward
/// received MAC Control frames to software, so that PFC frames (802.1Qbb) from the link partner
/// reach headroom. NIC-level PFC stays off because no DCB mode is configured.
fn switch_flow_control_off(port_id: u16) -> Result<FlowControlState, DpdkError> {
    let mut current = sys::rte_eth_fc_conf::default();
    // SAFETY: port is valid; `current` is a live local.
    let rc = unsafe { sys::rte_eth_dev_flow_ctrl_get(port_id, &mut current) };
    if rc == -libc::ENOTSUP {
        return Ok(FlowControlState::NotSupported);
    }
    check("rte_eth_dev_flow_ctrl_get", port_id, rc)?;
    let was_on = current.mode != sys::rte_eth_fc_mode::RTE_ETH_FC_NONE;
    let set = |forward_mac_control: bool| {
        let mut wanted = current;
        wanted.mode = sys::rte_eth_fc_mode::RTE_ETH_FC_NONE;
        wanted.autoneg = 0;
        wanted.mac_ctrl_frame_fwd = u8::from(forward_mac_control);
        // SAFETY: port is valid; `wanted` holds the device's settings with the mode changed.
        unsafe { sys::rte_eth_dev_flow_ctrl_set(port_id, &mut wanted) }
    };
    match set(true) {
        0 => {
            return Ok(FlowControlState::Off {
                was_on,
                mac_control_forwarded: true,
            })
        }
        rc if rc == -libc::ENOTSUP => return Ok(FlowControlState::NotSupported),
        _ => {}
    }
    // Some NICs refuse MAC Control forwarding: switch pause off without it.
    match set(false) {
        0 => Ok(FlowControlState::Off {
            was_on,
            mac_control_forwarded: false,
        }),
        rc if rc == -libc::ENOTSUP => Ok(FlowControlState::NotSupported),
        rc if !was_on => {
            // Already off; only the forwarding request failed.
            tracing::warn!(port = port_id, error = %sys::strerror(rc), "flow control set failed");
            Ok(FlowControlState::Off {
                was_on,
                mac_control_forwarded: false,
            })
        }
        rc => Err(call_error("rte_eth_dev_flow_ctrl_set", port_id, rc)),
    }
}

impl fmt::Debug for DpdkPort {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkPort")
            .field("port_id", &self.shared.port_id)
            .field("info", &self.shared.info)
            .field("flow_control", &self.shared.flow_control)
            .field("queues_split", &self.queues.is_none())
            .finish()
    }
}

impl Drop for PortShared {
    fn drop(&mut self) {
        // SAFETY: the last handle on the port (control handle or queue) is gone, so no queue
        // is polled any more. Stop frees the mbufs in the device's rings; close releases the
        // port. The mempool handle is dropped only after this (fields drop after `drop`).
        unsafe {
            let stop = sys::rte_eth_dev_stop(self.port_id);
            let close = sys::rte_eth_dev_close(self.port_id);
            if stop < 0 || close < 0 {
                tracing::warn!(
                    port = self.port_id,
                    stop = %sys::strerror(stop),
                    close = %sys::strerror(close),
                    "stopping/closing the DPDK port failed"
                );
            }
        }
        open_ports().remove(&self.port_id);
    }
}

/// The receive half of one queue of a [`DpdkPort`]. There is one value per queue and polling
/// takes `&mut self`, so one lcore at a time polls it; it can move between threads (Send).
pub struct DpdkRxQueue {
    shared: Arc<PortShared>,
    port_id: u16,
    queue_id: u16,
}

impl DpdkRxQueue {
    /// The queue's index on its port.
    #[must_use]
    pub fn queue_id(&self) -> u16 {
        self.queue_id
    }

    /// The port's id.
    #[must_use]
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Multi-segment frames this queue dropped (none unless the PMD chains mbufs).
    #[must_use]
    pub fn multi_segment_dropped(&self) -> u64 {
        self.shared.rx_multi_segment_dropped[usize::from(self.queue_id)].load(Ordering::Relaxed)
    }
}

impl RxQueue for DpdkRxQueue {
    type Frame = MbufFrame;

    /// Receives up to `max` frames straight from `rte_eth_rx_burst` (in bursts of at most
    /// [`BURST_MAX`]) and appends them to `out` without copying. A frame spread over several
    /// mbufs (which needs a PMD that chains, e.g. with LRO or scatter, neither of which is
    /// configured) is freed and counted in [`DpdkRxQueue::multi_segment_dropped`]. Appending
    /// allocates only if `out` lacks capacity.
    fn rx_burst(&mut self, out: &mut Vec<MbufFrame>, max: usize) -> usize {
        let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); BURST_MAX];
        let mut received = 0;
        let mut remaining = max;
        while remaining > 0 {
            let ask = remaining.min(BURST_MAX);
            // SAFETY: the queue is set up on a started port (kept open by `shared`); `burst`
            // has room for `ask` pointers; only this value polls this queue (one value per
            // queue, `&mut self`).
            let got = unsafe {
                sys::headroom_shim_eth_rx_burst(
                    self.port_id,
                    self.queue_id,
                    burst.as_mut_ptr(),
                    ask as u16,
                )
            };
            let got = usize::from(got);
            for &raw in &burst[..got] {
                let Some(mbuf) = NonNull::new(raw) else {
                    continue;
                };
                if MbufFrame::is_single_segment(mbuf) {
                    // SAFETY: rx_burst hands us ownership of each returned mbuf; it is a
                    // fresh direct single-segment mbuf from the queue's pool, which the port
                    // keeps alive.
                    out.push(unsafe { MbufFrame::from_raw(mbuf) });
                    received += 1;
                } else {
                    // SAFETY: we own the chain; freeing it releases every segment once.
                    unsafe { sys::headroom_shim_pktmbuf_free(mbuf.as_ptr()) };
                    let counter = &self.shared.rx_multi_segment_dropped[usize::from(self.queue_id)];
                    // Single writer (this queue): a plain load + store, no atomic RMW.
                    counter.store(counter.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
                }
            }
            remaining -= ask;
            if got < ask {
                break;
            }
        }
        received
    }
}

impl fmt::Debug for DpdkRxQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkRxQueue")
            .field("port_id", &self.port_id)
            .field("queue_id", &self.queue_id)
            .finish()
    }
}

/// The transmit half of one queue of a [`DpdkPort`]. One value per queue, used through
/// `&mut self` by one lcore at a time; Send, not Sync.
pub struct DpdkTxQueue {
    shared: Arc<PortShared>,
    port_id: u16,
    queue_id: u16,
    pool: NonNull<sys::rte_mempool>,
}

// SAFETY: `pool` is the pool kept alive by `shared.mempool`, usable from any thread; the queue
// itself is used by one thread at a time (Send, not Sync).
unsafe impl Send for DpdkTxQueue {}

impl DpdkTxQueue {
    /// The queue's index on its port.
    #[must_use]
    pub fn queue_id(&self) -> u16 {
        self.queue_id
    }

    /// The port's id.
    #[must_use]
    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// The port's pool.
    #[must_use]
    pub fn mempool(&self) -> &Mempool {
        &self.shared.mempool
    }
}

impl TxQueue for DpdkTxQueue {
    type Frame = MbufFrame;

    /// Hands the frames to `rte_eth_tx_burst` in place, without copying: `MbufFrame` is a
    /// transparent mbuf pointer, so the Vec's buffer is the pointer array DPDK wants. The NIC
    /// takes ownership of the first `sent` mbufs (it frees them after transmission), so their
    /// handles are forgotten, not dropped; the rest stay in `frames`, in order, owned by the
    /// caller.
    fn tx_burst(&mut self, frames: &mut Vec<MbufFrame>) -> usize {
        let count = u16::try_from(frames.len()).unwrap_or(u16::MAX);
        if count == 0 {
            return 0;
        }
        // SAFETY: MbufFrame is repr(transparent) over NonNull<rte_mbuf>, which has the layout
        // of *mut rte_mbuf, so the first `count` elements form a valid `rte_mbuf *[count]`.
        // The queue is set up on a started port kept open by `shared`, and only this value
        // uses it. rte_eth_tx_burst takes ownership of the first `sent` mbufs and leaves the
        // array entries themselves unchanged.
        let sent = unsafe {
            sys::headroom_shim_eth_tx_burst(
                self.port_id,
                self.queue_id,
                frames.as_mut_ptr().cast::<*mut sys::rte_mbuf>(),
                count,
            )
        };
        let sent = usize::from(sent).min(frames.len());
        // The NIC owns these mbufs now: release the handles without freeing.
        frames.drain(..sent).for_each(std::mem::forget);
        sent
    }

    fn alloc_frame(&mut self, len: usize) -> Option<MbufFrame> {
        MbufFrame::alloc_zeroed(self.pool, len)
    }
}

impl fmt::Debug for DpdkTxQueue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DpdkTxQueue")
            .field("port_id", &self.port_id)
            .field("queue_id", &self.queue_id)
            .finish()
    }
}
