//! What the DPDK backend is set up with ([`DpdkSettings`]), why a setup or a change can fail
//! ([`DpdkSetupError`]), and the sizes it derives (data room for an MTU, EAL memory for a
//! pool). Plain data: compiled and tested without DPDK.

use crate::{DpdkError, PortConfig};
use std::collections::BTreeMap;
use std::fmt;

/// Bytes a frame may carry beyond the MTU: Ethernet header (14) and one 802.1Q tag (4).
pub const FRAME_OVERHEAD_BYTES: u16 = 18;
/// Bytes DPDK reserves in front of the data of every mbuf (`RTE_PKTMBUF_HEADROOM`; with the
/// `dpdk` feature a compile-time check holds it equal to the bindings').
pub const MBUF_HEADROOM_BYTES: u16 = 128;
/// DPDK's default mbuf data room (`RTE_MBUF_DEFAULT_BUF_SIZE`): a 2048-byte frame after the
/// headroom (checked against the bindings like [`MBUF_HEADROOM_BYTES`]).
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
    let pool_mib =
        crate::args::estimated_pool_bytes(mbufs, cache_size, data_room).div_ceil(1024 * 1024);
    (pool_mib + EAL_MEMORY_MARGIN_MIB).next_multiple_of(64)
}

/// What the backend needs from the configuration: `[dpdk]` and each port's MTU (the runtime
/// fills it from a configuration file).
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
    Eal(DpdkError),
    /// The mempool could not be created.
    Mempool {
        /// `[dpdk] mempool_mbufs`.
        mbufs: u32,
        /// Data room per mbuf, bytes.
        data_room_bytes: u16,
        /// Why.
        source: DpdkError,
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
            Self::Eal(e) => write!(f, "[dpdk] eal_args: {e}"),
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
        let lab = crate::lab::lab_eal_args(&["a", "b"], crate::lab::LabVdev::AfXdp, "p", 0);
        assert_eq!(vdev_interfaces(&lab).len(), 2);
    }
}
