//! Opening an interface and the two halves of an AF_PACKET port.

use std::ffi::c_int;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

use headroom_core::frame::Frame;
use headroom_io::{FramePool, PoolFrame, PortInfo, RxQueue, TxQueue, BURST_MAX};

use crate::ring::{BlockRing, FrameRing, RingEntry, RxRing};
use crate::stats::{add, AfPacketStatsHandle, Counters};
use crate::sys::{self, InterfaceRequest, RingMapping, SendOutcome};

/// The 802.1Q TPID, used when the kernel reports a stripped tag without its TPID.
const TPID_8021Q: u16 = 0x8100;
/// Bytes of an 802.1Q/802.1ad tag (TPID + TCI), IEEE 802.1Q-2018 clause 9.
const VLAN_TAG_LEN: usize = 4;
/// Bytes of the two MAC addresses in front of the tag.
const MAC_ADDRESSES_LEN: usize = 12;
/// Ethernet header (14) plus one VLAN tag (4): the frame overhead on top of the MTU that the
/// kernel lets a packet socket send (`packet_extra_vlan_len_allowed`).
const FRAME_OVERHEAD_BYTES: usize = 18;
/// `tp_frame_size` of a TPACKET_V3 ring. V3 packs packets of any size into a block, so this
/// only has to satisfy the kernel's sanity checks (aligned, at least one per block).
const V3_FRAME_SIZE: usize = 2048;
/// Bytes of a TPACKET_V2 slot in front of the frame data: the kernel puts the MAC header at
/// `TPACKET_ALIGN(TPACKET2_HDRLEN + 16) - 14` = 66 bytes; 128 leaves room for longer link
/// headers.
const V2_SLOT_OVERHEAD: usize = 128;

/// Which memory-mapped receive ring layout to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingVersion {
    /// TPACKET_V2: one fixed-size slot per frame, handed to user space as soon as the kernel
    /// has copied the frame in. Latency is that of the wakeup; slots are sized for the pool's
    /// data room, so a ring of a given size holds fewer small frames than V3.
    V2,
    /// TPACKET_V3: frames packed into blocks, a block handed over when full or when its retire
    /// timer ([`AfPacketConfig::block_timeout_ms`]) fires. Fewer status checks and denser
    /// packing, but at low rates a frame waits up to the timeout (1 ms at least).
    V3,
}

/// How an AF_PACKET port is set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AfPacketConfig {
    /// The receive ring's layout. Default V2: a lossless switch must see a PFC frame as soon
    /// as it arrives, and V3 delays frames on a quiet link by its block timeout.
    pub ring_version: RingVersion,
    /// Bytes per ring block: a power of two, at least one page and 2048 bytes. With V2 a block
    /// must also hold one slot (the pool's data room + 128 bytes). With V3 a frame longer than
    /// a block (minus ~80 bytes of headers) is truncated by the kernel and counted as oversize.
    pub block_size_bytes: usize,
    /// Blocks in the receive ring. The ring holds `block_size_bytes * block_count` bytes of
    /// frames while the switch is not reading; beyond that the kernel drops and counts.
    pub block_count: usize,
    /// V3 only: the kernel hands a partly filled block over after this many milliseconds
    /// (`tp_retire_blk_tov`); 0 lets the kernel pick from the link speed. This bounds the extra
    /// latency TPACKET_V3 adds at low packet rates.
    pub block_timeout_ms: u32,
    /// Put the interface in promiscuous mode (`PACKET_MR_PROMISC`) while the port is open, so
    /// the switch sees frames for every destination MAC.
    pub promiscuous: bool,
    /// Send straight to the driver (`PACKET_QDISC_BYPASS`), skipping the qdisc layer. Frames
    /// sent this way are also not shown to other packet sockets on the interface (tcpdump on
    /// the switch's own port does not see them; capture on the link's far end).
    pub qdisc_bypass: bool,
}

impl Default for AfPacketConfig {
    fn default() -> Self {
        Self {
            ring_version: RingVersion::V2,
            block_size_bytes: 1 << 15,
            block_count: 128,
            block_timeout_ms: 1,
            promiscuous: true,
            qdisc_bypass: true,
        }
    }
}

/// Why a port could not be opened.
#[derive(Debug)]
pub enum AfPacketError {
    /// The name cannot be an interface name (empty, 16 bytes or more, or holding a NUL).
    InvalidInterfaceName(String),
    /// No interface of that name in the calling thread's network namespace.
    NoSuchInterface(String),
    /// The interface is not Ethernet (`ARPHRD_ETHER`); its hardware type is given.
    NotEthernet {
        /// The interface name.
        interface: String,
        /// Its `ARPHRD_*` hardware type.
        hardware_type: u16,
    },
    /// The configuration is not usable; the text says which field and why.
    InvalidConfig(&'static str),
    /// A system call failed.
    Os {
        /// What was being done.
        operation: &'static str,
        /// The error the kernel returned.
        source: io::Error,
    },
}

impl fmt::Display for AfPacketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidInterfaceName(name) => write!(f, "invalid interface name {name:?}"),
            Self::NoSuchInterface(name) => write!(f, "no interface named {name:?}"),
            Self::NotEthernet {
                interface,
                hardware_type,
            } => {
                write!(
                    f,
                    "interface {interface:?} is not Ethernet (hardware type {hardware_type})"
                )
            }
            Self::InvalidConfig(reason) => write!(f, "invalid AF_PACKET configuration: {reason}"),
            Self::Os { operation, source } => write!(f, "{operation}: {source}"),
        }
    }
}

impl std::error::Error for AfPacketError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Os { source, .. } => Some(source),
            _ => None,
        }
    }
}

pub(crate) fn os_error(operation: &'static str) -> impl FnOnce(io::Error) -> AfPacketError {
    move |source| AfPacketError::Os { operation, source }
}

/// An open AF_PACKET port: split it into its halves with [`AfPacketPort::split`].
#[derive(Debug)]
pub struct AfPacketPort {
    info: PortInfo,
    rx: AfPacketRx,
    tx: AfPacketTx,
    stats: AfPacketStatsHandle,
}

impl AfPacketPort {
    /// Opens `interface` (in the calling thread's network namespace) with two packet sockets:
    /// one with a TPACKET_V3 receive ring, bound to all protocols, promiscuous, ignoring frames
    /// leaving the interface; and one that only sends. Received frames are copied into frames
    /// of `pool`; `alloc_frame` takes from it too.
    ///
    /// Needs `CAP_NET_RAW`. The interface should be up; frames are received once it is.
    ///
    /// # Errors
    /// [`AfPacketError`] says what failed; nothing stays open then.
    pub fn open(
        interface: &str,
        pool: FramePool,
        config: &AfPacketConfig,
    ) -> Result<Self, AfPacketError> {
        validate(config, pool.data_room_bytes())?;
        let mut request = InterfaceRequest::new(interface)
            .ok_or_else(|| AfPacketError::InvalidInterfaceName(interface.to_owned()))?;

        let rx_socket = sys::packet_socket().map_err(os_error("creating the RX packet socket"))?;
        let ifindex = request.index(rx_socket.as_fd()).map_err(|error| {
            if error.raw_os_error() == Some(libc::ENODEV) {
                AfPacketError::NoSuchInterface(interface.to_owned())
            } else {
                os_error("SIOCGIFINDEX")(error)
            }
        })?;
        let (hardware_type, mac) = request
            .hardware_address(rx_socket.as_fd())
            .map_err(os_error("SIOCGIFHWADDR"))?;
        if hardware_type != libc::ARPHRD_ETHER {
            return Err(AfPacketError::NotEthernet {
                interface: interface.to_owned(),
                hardware_type,
            });
        }
        let mtu = request
            .mtu(rx_socket.as_fd())
            .map_err(os_error("SIOCGIFMTU"))?;
        let info = PortInfo {
            name: interface.to_owned(),
            mac,
            max_frame_len: usize::try_from(mtu).unwrap_or(0) + FRAME_OVERHEAD_BYTES,
        };

        let ring = setup_rx_ring(&rx_socket, config, pool.data_room_bytes())?;
        // Frames leaving the interface (our own transmissions, or another local sender's) are
        // not ingress traffic. Kernels before 4.20 lack the option; the ring walk also skips
        // PACKET_OUTGOING frames, so its absence is not fatal.
        let _ = sys::set_option(
            rx_socket.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &1 as &c_int,
        );
        // Bound only now: until here the socket had protocol 0 and received nothing, so no frame
        // of another interface can be in the ring.
        sys::bind_packet(rx_socket.as_fd(), ifindex, sys::ETH_P_ALL_BE)
            .map_err(os_error("binding the RX packet socket"))?;
        if config.promiscuous {
            let membership = libc::packet_mreq {
                mr_ifindex: ifindex,
                mr_type: libc::PACKET_MR_PROMISC as u16,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            // The membership ends, and promiscuity with it, when the socket closes.
            sys::set_option(
                rx_socket.as_fd(),
                libc::SOL_PACKET,
                libc::PACKET_ADD_MEMBERSHIP,
                &membership,
            )
            .map_err(os_error("PACKET_ADD_MEMBERSHIP (promiscuous)"))?;
        }

        let tx_socket = sys::packet_socket().map_err(os_error("creating the TX packet socket"))?;
        if config.qdisc_bypass {
            sys::set_option(
                tx_socket.as_fd(),
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &1 as &c_int,
            )
            .map_err(os_error("PACKET_QDISC_BYPASS"))?;
        }
        // Protocol 0: the TX socket never receives, so it never queues copies of traffic.
        sys::bind_packet(tx_socket.as_fd(), ifindex, 0)
            .map_err(os_error("binding the TX packet socket"))?;

        let counters = Arc::new(Counters::default());
        let rx_socket = Arc::new(rx_socket);
        Ok(Self {
            info,
            rx: AfPacketRx {
                socket: Arc::clone(&rx_socket),
                ring,
                pool: pool.clone(),
                cache_attached: false,
                counters: Arc::clone(&counters),
            },
            tx: AfPacketTx {
                socket: tx_socket,
                pool,
                cache_attached: false,
                counters: Arc::clone(&counters),
            },
            stats: AfPacketStatsHandle {
                counters,
                rx_socket,
            },
        })
    }

    /// The interface's name, MAC address and largest frame (MTU + 14 + one 4-byte VLAN tag).
    #[must_use]
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// A handle reading the port's counters from any thread.
    #[must_use]
    pub fn stats_handle(&self) -> AfPacketStatsHandle {
        self.stats.clone()
    }

    /// The receive and transmit halves, to be polled from any thread(s).
    #[must_use]
    pub fn split(self) -> (AfPacketRx, AfPacketTx) {
        (self.rx, self.tx)
    }
}

/// The slot size of a TPACKET_V2 ring for frames of up to `data_room` bytes.
fn v2_frame_size(data_room: usize) -> usize {
    (data_room + V2_SLOT_OVERHEAD).next_multiple_of(libc::TPACKET_ALIGNMENT)
}

fn validate(config: &AfPacketConfig, data_room: usize) -> Result<(), AfPacketError> {
    // SAFETY: sysconf has no preconditions.
    let page_size = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    let block = config.block_size_bytes;
    if !block.is_power_of_two() || block < page_size || block < V3_FRAME_SIZE {
        return Err(AfPacketError::InvalidConfig(
            "block_size_bytes must be a power of two of at least one page and 2048 bytes",
        ));
    }
    if config.ring_version == RingVersion::V2 && block < v2_frame_size(data_room) {
        return Err(AfPacketError::InvalidConfig(
            "with TPACKET_V2, block_size_bytes must hold one frame slot (data room + 128 bytes)",
        ));
    }
    if config.block_count == 0 {
        return Err(AfPacketError::InvalidConfig(
            "block_count must be at least 1",
        ));
    }
    let ring_bytes = block.checked_mul(config.block_count);
    if ring_bytes.is_none_or(|bytes| bytes > u32::MAX as usize) {
        return Err(AfPacketError::InvalidConfig(
            "the ring must be smaller than 4 GiB",
        ));
    }
    Ok(())
}

fn setup_rx_ring(
    socket: &OwnedFd,
    config: &AfPacketConfig,
    data_room: usize,
) -> Result<RxRing, AfPacketError> {
    let (version, frame_size) = match config.ring_version {
        RingVersion::V2 => (libc::tpacket_versions::TPACKET_V2, v2_frame_size(data_room)),
        RingVersion::V3 => (libc::tpacket_versions::TPACKET_V3, V3_FRAME_SIZE),
    };
    sys::set_option(
        socket.as_fd(),
        libc::SOL_PACKET,
        libc::PACKET_VERSION,
        &(version as c_int),
    )
    .map_err(os_error("PACKET_VERSION"))?;
    // Sizes were validated to fit u32.
    let frame_count = (config.block_size_bytes / frame_size) * config.block_count;
    let request = libc::tpacket_req3 {
        tp_block_size: config.block_size_bytes as u32,
        tp_block_nr: config.block_count as u32,
        tp_frame_size: frame_size as u32,
        tp_frame_nr: frame_count as u32,
        tp_retire_blk_tov: config.block_timeout_ms,
        tp_sizeof_priv: 0,
        tp_feature_req_word: 0,
    };
    let set_ring = match config.ring_version {
        // V2 takes the shorter `struct tpacket_req`, the first four fields of `tpacket_req3`.
        RingVersion::V2 => sys::set_option(
            socket.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &libc::tpacket_req {
                tp_block_size: request.tp_block_size,
                tp_block_nr: request.tp_block_nr,
                tp_frame_size: request.tp_frame_size,
                tp_frame_nr: request.tp_frame_nr,
            },
        ),
        RingVersion::V3 => sys::set_option(
            socket.as_fd(),
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &request,
        ),
    };
    set_ring.map_err(os_error("PACKET_RX_RING"))?;
    let ring_bytes = config.block_size_bytes * config.block_count;
    let mapping =
        RingMapping::new(socket.as_fd(), ring_bytes).map_err(os_error("mmap of the RX ring"))?;
    Ok(match config.ring_version {
        RingVersion::V2 => RxRing::Frames(FrameRing::new(
            mapping,
            config.block_size_bytes,
            config.block_count,
            frame_size,
        )),
        RingVersion::V3 => RxRing::Blocks(BlockRing::new(
            mapping,
            config.block_size_bytes,
            config.block_count,
        )),
    })
}

/// The receive half of an AF_PACKET port.
pub struct AfPacketRx {
    socket: Arc<OwnedFd>,
    ring: RxRing,
    pool: FramePool,
    /// Whether the thread of the first burst has its frame cache (frames are copied into pool
    /// buffers there, and dropped there).
    cache_attached: bool,
    counters: Arc<Counters>,
}

impl fmt::Debug for AfPacketRx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfPacketRx")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

impl AfPacketRx {
    /// Waits until a frame is ready or `timeout` passes (millisecond resolution); returns
    /// whether one is ready. Returns at once when the ring already holds one. For the
    /// runtime's adaptive polling: sleep here instead of spinning on an idle port.
    ///
    /// With TPACKET_V3 the kernel signals a block, not a frame: after the first frame of an
    /// idle period this returns within `block_timeout_ms`.
    ///
    /// # Errors
    /// The `poll` system call failed.
    pub fn wait_readable(&mut self, timeout: Duration) -> io::Result<bool> {
        if self.ring.has_ready_packet() {
            return Ok(true);
        }
        sys::poll_readable(self.socket.as_fd(), timeout)
    }

    /// Copies one ring packet into a pool frame, putting back the 802.1Q tag the kernel took
    /// out (so the switch sees the frame as it was on the wire).
    fn frame_from_ring(
        pool: &FramePool,
        data: &[u8],
        vlan_tag: Option<[u8; VLAN_TAG_LEN]>,
    ) -> Result<PoolFrame, RxDrop> {
        let Some(tag) = vlan_tag else {
            return pool.alloc_copy(data).ok_or(RxDrop::NoBuffer);
        };
        if data.len() < MAC_ADDRESSES_LEN {
            return Err(RxDrop::RingError);
        }
        let mut frame = pool
            .alloc_unzeroed(data.len() + VLAN_TAG_LEN)
            .ok_or(RxDrop::NoBuffer)?;
        let bytes = frame.data_mut();
        bytes[..MAC_ADDRESSES_LEN].copy_from_slice(&data[..MAC_ADDRESSES_LEN]);
        bytes[MAC_ADDRESSES_LEN..MAC_ADDRESSES_LEN + VLAN_TAG_LEN].copy_from_slice(&tag);
        bytes[MAC_ADDRESSES_LEN + VLAN_TAG_LEN..].copy_from_slice(&data[MAC_ADDRESSES_LEN..]);
        Ok(frame)
    }
}

enum RxDrop {
    NoBuffer,
    RingError,
}

#[derive(Default)]
struct RxBurstCounts {
    bytes: u64,
    oversize: u64,
    no_buffer: u64,
    checksum_incomplete: u64,
    ring_errors: u64,
    outgoing: u64,
}

impl RxQueue for AfPacketRx {
    fn wait_fd(&self) -> Option<BorrowedFd<'_>> {
        Some(self.as_fd())
    }

    type Frame = PoolFrame;

    fn rx_burst(&mut self, out: &mut Vec<PoolFrame>, max: usize) -> usize {
        if !self.cache_attached {
            self.pool.attach_thread_cache();
            self.cache_attached = true;
        }
        let data_room = self.pool.data_room_bytes();
        let mut received = 0;
        let mut counts = RxBurstCounts::default();
        while received < max {
            let packet = match self.ring.next_entry() {
                RingEntry::Empty => break,
                RingEntry::Malformed => {
                    counts.ring_errors += 1;
                    continue;
                }
                RingEntry::Packet(packet) => packet,
            };
            if packet.packet_type == libc::PACKET_OUTGOING {
                counts.outgoing += 1;
                continue;
            }
            let vlan_tag = (packet.status & libc::TP_STATUS_VLAN_VALID != 0).then(|| {
                let tpid = if packet.status & libc::TP_STATUS_VLAN_TPID_VALID != 0
                    && packet.vlan_tpid != 0
                {
                    packet.vlan_tpid
                } else {
                    TPID_8021Q
                };
                let [tpid_high, tpid_low] = tpid.to_be_bytes();
                let [tci_high, tci_low] = packet.vlan_tci.to_be_bytes();
                [tpid_high, tpid_low, tci_high, tci_low]
            });
            let frame_len = packet.data.len() + vlan_tag.map_or(0, |tag| tag.len());
            if packet.data.len() < packet.wire_len || frame_len > data_room {
                counts.oversize += 1;
                continue;
            }
            if packet.status & libc::TP_STATUS_CSUMNOTREADY != 0 {
                counts.checksum_incomplete += 1;
            }
            match Self::frame_from_ring(&self.pool, packet.data, vlan_tag) {
                Ok(frame) => {
                    out.push(frame);
                    received += 1;
                    counts.bytes += frame_len as u64;
                }
                Err(RxDrop::NoBuffer) => counts.no_buffer += 1,
                Err(RxDrop::RingError) => counts.ring_errors += 1,
            }
        }
        // Hand a fully read block back now rather than on the next call: the kernel may be
        // waiting for it.
        self.ring.release_if_done();
        if self.ring.take_losing() {
            self.counters.collect_kernel_drops(&self.socket);
        }
        let counters = &self.counters;
        add(&counters.rx_frames, received as u64);
        add(&counters.rx_bytes, counts.bytes);
        add(&counters.rx_oversize, counts.oversize);
        add(&counters.rx_no_buffer, counts.no_buffer);
        add(&counters.rx_checksum_incomplete, counts.checksum_incomplete);
        add(&counters.rx_ring_errors, counts.ring_errors);
        add(&counters.rx_outgoing_skipped, counts.outgoing);
        received
    }
}

impl AsFd for AfPacketRx {
    /// The receive socket, for a caller that waits on several ports with its own `epoll`.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

/// The transmit half of an AF_PACKET port.
pub struct AfPacketTx {
    socket: OwnedFd,
    pool: FramePool,
    /// Whether the thread of the first burst has its frame cache (sent frames are freed there).
    cache_attached: bool,
    counters: Arc<Counters>,
}

impl fmt::Debug for AfPacketTx {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AfPacketTx")
            .field("socket", &self.socket)
            .finish_non_exhaustive()
    }
}

/// Whether a send error means "no room now, try again later" rather than "never".
fn is_transient(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EAGAIN | libc::ENOBUFS | libc::EINTR | libc::ENOMEM)
    )
}

impl TxQueue for AfPacketTx {
    type Frame = PoolFrame;

    /// Sends with `sendmmsg`, up to [`BURST_MAX`] frames per system call, straight from the
    /// frames' buffers. Stops when the kernel has no room (`EAGAIN`/`ENOBUFS`), leaving the rest
    /// with the caller. A frame the kernel refuses for good (`EMSGSIZE` for a frame over the
    /// MTU, `EINVAL` for one shorter than an Ethernet header, `ENETDOWN`...) is dropped, counted
    /// in `tx_failed`, and counts as taken in the return value.
    fn tx_burst(&mut self, frames: &mut Vec<PoolFrame>) -> usize {
        if !self.cache_attached {
            self.pool.attach_thread_cache();
            self.cache_attached = true;
        }
        let mut taken = 0;
        let mut sent_bytes = 0u64;
        let mut failed = 0u64;
        let mut would_block = 0u64;
        // Every round either removes at least one frame or ends the loop.
        while !frames.is_empty() {
            let batch = frames.iter().take(BURST_MAX).map(Frame::data);
            match sys::send_frames(self.socket.as_fd(), batch) {
                SendOutcome::Sent(0) => break,
                SendOutcome::Sent(sent) => {
                    sent_bytes += frames[..sent].iter().map(|f| f.len() as u64).sum::<u64>();
                    frames.drain(..sent);
                    taken += sent;
                    add(&self.counters.tx_frames, sent as u64);
                }
                SendOutcome::Failed(error) if is_transient(&error) => {
                    would_block += 1;
                    break;
                }
                SendOutcome::Failed(_) => {
                    drop(frames.remove(0));
                    taken += 1;
                    failed += 1;
                }
            }
        }
        add(&self.counters.tx_bytes, sent_bytes);
        add(&self.counters.tx_failed, failed);
        add(&self.counters.tx_would_block, would_block);
        taken
    }

    fn alloc_frame(&mut self, len: usize) -> Option<PoolFrame> {
        self.pool.alloc(len)
    }
}

impl AsFd for AfPacketTx {
    /// The transmit socket (for `POLLOUT` waits).
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.socket.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation() {
        assert!(validate(&AfPacketConfig::default(), 2048).is_ok());
        let small_v2 = AfPacketConfig {
            block_size_bytes: 4096,
            ..AfPacketConfig::default()
        };
        assert!(validate(&small_v2, 2048).is_ok());
        assert!(matches!(
            validate(&small_v2, 4000),
            Err(AfPacketError::InvalidConfig(_))
        ));
        let v3 = AfPacketConfig {
            ring_version: RingVersion::V3,
            ..small_v2
        };
        assert!(validate(&v3, 4000).is_ok());
        for bad in [
            AfPacketConfig {
                block_size_bytes: 3 * 4096,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                block_size_bytes: 1024,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                block_count: 0,
                ..AfPacketConfig::default()
            },
            AfPacketConfig {
                block_size_bytes: 1 << 30,
                block_count: 8,
                ..AfPacketConfig::default()
            },
        ] {
            assert!(
                matches!(validate(&bad, 2048), Err(AfPacketError::InvalidConfig(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn invalid_interface_names_are_refused_before_any_syscall() {
        let pool = FramePool::new(headroom_io::PoolConfig::with_frame_count(1)).expect("pool");
        for name in ["", "a-name-that-is-too-long", "nul\0"] {
            let error = AfPacketPort::open(name, pool.clone(), &AfPacketConfig::default())
                .expect_err("must fail");
            assert!(
                matches!(error, AfPacketError::InvalidInterfaceName(_)),
                "{error}"
            );
        }
    }
}
