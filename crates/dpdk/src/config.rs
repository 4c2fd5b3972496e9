//! Plain data of the DPDK backend: port configuration and what a port reports. Available
//! without the `dpdk` feature, so that configuration code compiles everywhere.

/// How to open a DPDK port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// RX queues: one per lcore that receives from the port.
    pub rx_queues: u16,
    /// TX queues: one per lcore that transmits on the port.
    pub tx_queues: u16,
    /// RX descriptors per queue (the device may round it to its limits).
    pub rx_desc: u16,
    /// TX descriptors per queue (the device may round it to its limits).
    pub tx_desc: u16,
    /// MTU in bytes (L3 payload; frames may be 18 bytes longer: Ethernet header and one
    /// 802.1Q tag, without FCS).
    pub mtu: u16,
    /// Receive every unicast destination (a switch port must).
    pub promiscuous: bool,
}

impl Default for PortConfig {
    /// One queue each way, 1024 descriptors each, MTU 1500, promiscuous.
    fn default() -> Self {
        Self {
            rx_queues: 1,
            tx_queues: 1,
            rx_desc: 1024,
            tx_desc: 1024,
            mtu: 1500,
            promiscuous: true,
        }
    }
}

/// What became of the NIC's own flow control (IEEE 802.3 Annex 31B PAUSE / 802.1Qbb PFC
/// generated and honoured by the hardware) when the port was opened. headroom does PFC in
/// software, so the NIC must neither pause the link on its own nor swallow the MAC Control
/// frames (EtherType 0x8808) headroom has to see.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowControlState {
    /// The NIC's flow control is off.
    Off {
        /// It was on and this backend switched it off.
        was_on: bool,
        /// The NIC accepted `mac_ctrl_frame_fwd`: received MAC Control frames are handed to
        /// software instead of being dropped by the MAC. When false, whether PFC frames reach
        /// headroom depends on the NIC's default.
        mac_control_forwarded: bool,
    },
    /// The PMD has no flow-control operation (virtual devices: ring, null, af_packet, af_xdp):
    /// there is nothing to switch off, and MAC Control frames are ordinary frames.
    NotSupported,
}

/// Promiscuous mode of an open port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PromiscuousState {
    /// Enabled as configured.
    Enabled,
    /// Not requested.
    Disabled,
    /// Requested, but the PMD has no such mode (it receives everything anyway or nothing
    /// filters, as with ring and null devices).
    NotSupported,
}

/// Link state of a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkStatus {
    /// Whether the link is up.
    pub up: bool,
    /// Speed in Mbit/s; `None` when the device does not know.
    pub speed_mbps: Option<u32>,
    /// Full duplex.
    pub full_duplex: bool,
    /// Speed and duplex were autonegotiated.
    pub autoneg: bool,
}

/// A port's basic counters (`struct rte_eth_stats`) and the backend's own RX drops.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NicStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Frames the NIC dropped because the RX ring was full (`imissed`).
    pub rx_missed: u64,
    /// Erroneous frames received (`ierrors`).
    pub rx_errors: u64,
    /// Failed transmissions (`oerrors`).
    pub tx_errors: u64,
    /// RX mbuf allocation failures (`rx_nombuf`).
    pub rx_no_mbuf: u64,
    /// Frames the backend dropped because they spanned several mbufs.
    pub rx_multi_segment_dropped: u64,
}
