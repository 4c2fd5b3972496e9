//! Turning off the offloads that make AF_PACKET see frames that are not on any wire.
//!
//! A packet socket sees the kernel's `sk_buff`s, not wire frames. With offloads on:
//! - TSO/GSO on the *sending* side (a host's end of a veth pair, or the switch host's own stack)
//!   hand veth a 64 KiB TCP "super-frame", which the switch's port receives as one frame: it is
//!   longer than the frame pool's data room and is dropped as oversize;
//! - GRO/LRO on the *receiving* side merge frames before the packet socket sees them;
//! - TX checksum offload on the sending side leaves the TCP/UDP checksum unfilled
//!   (`TP_STATUS_CSUMNOTREADY`, counted in `rx_checksum_incomplete`), so the frame the switch
//!   forwards carries a wrong checksum.
//!
//! [`disable_offloads`] turns these off with the legacy `SIOCETHTOOL` set commands (the same as
//! `ethtool -K IF tso off gso off gro off lro off tx off`). Call it for every interface the
//! switch uses **and** for the far ends of veth pairs whose hosts send traffic. It needs
//! `CAP_NET_ADMIN` and acts in the calling thread's network namespace. UDP GSO
//! (`tx-udp-segmentation`) has no legacy command; it depends on TX checksumming, which this turns
//! off, and otherwise `ethtool -K IF tx-udp-segmentation off` does it.

use std::fmt;
use std::io;
use std::os::fd::AsFd;

use crate::port::{os_error, AfPacketError};
use crate::sys::{self, InterfaceRequest};

// Legacy ethtool commands taking a `struct ethtool_value` (linux/ethtool.h).
const ETHTOOL_STXCSUM: u32 = 0x17;
const ETHTOOL_STSO: u32 = 0x1f;
const ETHTOOL_GFLAGS: u32 = 0x25;
const ETHTOOL_SFLAGS: u32 = 0x26;
const ETHTOOL_SGSO: u32 = 0x24;
const ETHTOOL_SGRO: u32 = 0x2c;
/// `ETH_FLAG_LRO` in the `ETHTOOL_GFLAGS`/`ETHTOOL_SFLAGS` word.
const ETH_FLAG_LRO: u32 = 1 << 15;

/// An offload [`disable_offloads`] turns off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Offload {
    /// TCP segmentation offload (`tso`).
    TcpSegmentation,
    /// Generic segmentation offload (`gso`).
    GenericSegmentation,
    /// Generic receive offload (`gro`).
    GenericReceive,
    /// Large receive offload (`lro`).
    LargeReceive,
    /// TX checksum offload (`tx`), which also drops the segmentation offloads that need it.
    TxChecksum,
}

impl Offload {
    /// Every offload, in the order they are turned off.
    pub const ALL: [Self; 5] = [
        Self::TcpSegmentation,
        Self::GenericSegmentation,
        Self::GenericReceive,
        Self::LargeReceive,
        Self::TxChecksum,
    ];

    /// The feature's name in `ethtool -K`.
    #[must_use]
    pub fn ethtool_name(self) -> &'static str {
        match self {
            Self::TcpSegmentation => "tso",
            Self::GenericSegmentation => "gso",
            Self::GenericReceive => "gro",
            Self::LargeReceive => "lro",
            Self::TxChecksum => "tx",
        }
    }
}

impl fmt::Display for Offload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ethtool_name())
    }
}

/// What happened to each offload. A driver that cannot change a feature (it is fixed off, or
/// fixed on) answers `EOPNOTSUPP`; that is reported, not treated as a failure of the whole call.
#[derive(Debug)]
pub struct OffloadReport {
    /// One outcome per entry of [`Offload::ALL`].
    pub outcomes: Vec<(Offload, io::Result<()>)>,
}

impl OffloadReport {
    /// Whether every offload was turned off (or already was).
    #[must_use]
    pub fn all_disabled(&self) -> bool {
        self.outcomes.iter().all(|(_, outcome)| outcome.is_ok())
    }
}

/// Turns off TSO, GSO, GRO, LRO and TX checksum offload on `interface` (see the module docs).
///
/// # Errors
/// [`AfPacketError`] when the name is invalid or no control socket could be made; per-feature
/// failures are in the report.
pub fn disable_offloads(interface: &str) -> Result<OffloadReport, AfPacketError> {
    let mut request = InterfaceRequest::new(interface)
        .ok_or_else(|| AfPacketError::InvalidInterfaceName(interface.to_owned()))?;
    let socket = sys::control_socket().map_err(os_error("creating an ethtool control socket"))?;
    let fd = socket.as_fd();
    let mut outcomes = Vec::with_capacity(Offload::ALL.len());
    for offload in Offload::ALL {
        let outcome = match offload {
            Offload::TcpSegmentation => request.ethtool_value(fd, ETHTOOL_STSO, 0).map(drop),
            Offload::GenericSegmentation => request.ethtool_value(fd, ETHTOOL_SGSO, 0).map(drop),
            Offload::GenericReceive => request.ethtool_value(fd, ETHTOOL_SGRO, 0).map(drop),
            Offload::TxChecksum => request.ethtool_value(fd, ETHTOOL_STXCSUM, 0).map(drop),
            Offload::LargeReceive => request
                .ethtool_value(fd, ETHTOOL_GFLAGS, 0)
                .and_then(|flags| request.ethtool_value(fd, ETHTOOL_SFLAGS, flags & !ETH_FLAG_LRO))
                .map(drop),
        };
        if outcome
            .as_ref()
            .is_err_and(|e| e.raw_os_error() == Some(libc::ENODEV))
        {
            return Err(AfPacketError::NoSuchInterface(interface.to_owned()));
        }
        outcomes.push((offload, outcome));
    }
    Ok(OffloadReport { outcomes })
}
