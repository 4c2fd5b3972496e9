//! The netlink sockets: one notification socket joined to the route groups, and short-lived
//! dump sockets (one dump at a time: a second dump on a socket while one runs fails with
//! `EBUSY`). Framing and every message are netlink-packet-core / netlink-packet-route types;
//! only nexthop objects are decoded here ([`crate::message`]).

use crate::kernel::MessageFlags;
use crate::message::RtnlMessage;
use crate::sys;
use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP,
    NLM_F_DUMP_INTR, NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::neighbour::NeighbourMessage;
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::RouteNetlinkMessage;
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
use std::io;
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::time::Duration;

/// Legacy group bits joined at bind: link, neighbour, IPv4/IPv6 addresses and routes.
const GROUPS: u32 = 0x1 | 0x4 | 0x10 | 0x40 | 0x100 | 0x400;
/// `RTNLGRP_NEXTHOP`: above 31, so joined with `NETLINK_ADD_MEMBERSHIP`.
const RTNLGRP_NEXTHOP: u32 = 32;
/// Receive buffer of one `recv` (a dump datagram is at most 32 KiB).
const DATAGRAM_BYTES: usize = 256 * 1024;
/// Times a dump is retried when the kernel says it was interrupted by a change.
const DUMP_ATTEMPTS: usize = 8;

/// A decoded message with its header flags.
pub type Received = (RtnlMessage, MessageFlags);

/// Splits one datagram into messages, decoding each; undecodable ones are counted and skipped.
/// Returns whether the datagram ended a dump (`NLMSG_DONE`) and the dump was interrupted.
fn parse_datagram(
    bytes: &[u8],
    out: &mut Vec<Received>,
    decode_errors: &mut u64,
) -> io::Result<(bool, bool)> {
    let mut at = 0;
    let mut done = false;
    let mut interrupted = false;
    while at + 16 <= bytes.len() {
        let Ok(buffer) = NetlinkBuffer::new_checked(&bytes[at..]) else {
            *decode_errors += 1;
            break;
        };
        let len = buffer.length() as usize;
        if len < 16 || at + len > bytes.len() {
            *decode_errors += 1;
            break;
        }
        if buffer.flags() & NLM_F_DUMP_INTR != 0 {
            interrupted = true;
        }
        match NetlinkMessage::<RtnlMessage>::deserialize(&bytes[at..at + len]) {
            Ok(message) => {
                let flags = MessageFlags::from_netlink(message.header.flags);
                match message.payload {
                    NetlinkPayload::InnerMessage(inner) => out.push((inner, flags)),
                    NetlinkPayload::Done(_) => done = true,
                    NetlinkPayload::Error(e) => {
                        if let Some(code) = e.code {
                            return Err(io::Error::from_raw_os_error(-code.get()));
                        }
                        // An acknowledgement.
                        done = true;
                    }
                    _ => {}
                }
            }
            Err(_) => *decode_errors += 1,
        }
        at += (len + 3) & !3;
    }
    Ok((done, interrupted))
}

/// The notification socket.
#[derive(Debug)]
pub struct Notifications {
    socket: Socket,
    buffer: Vec<u8>,
    receive_buffer_bytes: usize,
}

/// What one read of the notification socket found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadStatus {
    /// The socket is empty (for now).
    Drained,
    /// More messages wait: the read stopped at its bound.
    More,
    /// The kernel dropped notifications (`ENOBUFS`): the model is out of date.
    Overrun,
}

impl Notifications {
    /// Opens and joins the notification socket in the calling thread's namespace, non-blocking,
    /// with a receive buffer of `receive_buffer_bytes` (forced past `rmem_max` when allowed).
    ///
    /// # Errors
    /// The socket calls failed.
    pub fn open(receive_buffer_bytes: usize) -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        let actual = sys::set_receive_buffer(socket.as_fd(), receive_buffer_bytes)?;
        socket.bind(&SocketAddr::new(0, GROUPS))?;
        socket.add_membership(RTNLGRP_NEXTHOP)?;
        socket.set_non_blocking(true)?;
        Ok(Self {
            socket,
            buffer: vec![0; DATAGRAM_BYTES],
            receive_buffer_bytes: actual,
        })
    }

    /// The receive buffer the kernel granted (bytes, as `SO_RCVBUF` reports it).
    #[must_use]
    pub fn receive_buffer_bytes(&self) -> usize {
        self.receive_buffer_bytes
    }

    /// The socket, for `poll(2)`.
    #[must_use]
    pub fn raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }

    /// The socket, borrowed, for a `poll(2)` with other descriptors.
    #[must_use]
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.socket.as_fd()
    }

    /// Reads up to `max_datagrams` datagrams into `out`.
    ///
    /// # Errors
    /// A receive error other than `EAGAIN` and `ENOBUFS`.
    pub fn read(
        &mut self,
        out: &mut Vec<Received>,
        max_datagrams: usize,
        decode_errors: &mut u64,
    ) -> io::Result<ReadStatus> {
        for _ in 0..max_datagrams {
            let n = match self
                .socket
                .recv(&mut &mut self.buffer[..], libc::MSG_DONTWAIT)
            {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(ReadStatus::Drained),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    return Ok(ReadStatus::Overrun)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            let n = n.min(self.buffer.len());
            // A notification is never an error reply; ignore what an error would say.
            let _ = parse_datagram(&self.buffer[..n], out, decode_errors);
        }
        Ok(ReadStatus::More)
    }

    /// Discards everything queued (before a resync: queued notifications are older than the
    /// dump and some between them were lost). Returns the datagrams dropped.
    ///
    /// # Errors
    /// As [`Notifications::read`].
    pub fn discard(&mut self) -> io::Result<usize> {
        let mut dropped = 0;
        loop {
            match self
                .socket
                .recv(&mut &mut self.buffer[..], libc::MSG_DONTWAIT)
            {
                Ok(_) => dropped += 1,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(dropped),
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until a notification arrives or `timeout` passes.
    ///
    /// # Errors
    /// `poll(2)` failed.
    pub fn wait(&self, timeout: Duration) -> io::Result<bool> {
        sys::wait_readable(self.raw_fd(), timeout)
    }
}

/// What to dump.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DumpKind {
    /// `RTM_GETLINK`.
    Links,
    /// `RTM_GETADDR`.
    Addresses,
    /// `RTM_GETNEIGH`.
    Neighbours,
    /// `RTM_GETNEXTHOP`.
    Nexthops,
    /// `RTM_GETROUTE`.
    Routes,
}

impl DumpKind {
    /// VPP's order (reference §2.6): what later objects refer to comes first.
    pub const ALL: [Self; 5] = [
        Self::Links,
        Self::Addresses,
        Self::Neighbours,
        Self::Nexthops,
        Self::Routes,
    ];

    fn request(self) -> RtnlMessage {
        match self {
            Self::Links => RtnlMessage::Route(RouteNetlinkMessage::GetLink(LinkMessage::default())),
            Self::Addresses => {
                RtnlMessage::Route(RouteNetlinkMessage::GetAddress(AddressMessage::default()))
            }
            Self::Neighbours => RtnlMessage::Route(RouteNetlinkMessage::GetNeighbour(
                NeighbourMessage::default(),
            )),
            Self::Nexthops => RtnlMessage::GetNexthops,
            Self::Routes => {
                RtnlMessage::Route(RouteNetlinkMessage::GetRoute(RouteMessage::default()))
            }
        }
    }
}

/// A socket for requests and dumps.
#[derive(Debug)]
pub struct RequestSocket {
    socket: Socket,
    buffer: Vec<u8>,
    sequence: u32,
}

impl RequestSocket {
    /// Opens one in the calling thread's namespace (blocking).
    ///
    /// # Errors
    /// The socket calls failed.
    pub fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&SocketAddr::new(0, 0))?;
        Ok(Self {
            socket,
            buffer: vec![0; DATAGRAM_BYTES],
            sequence: 0,
        })
    }

    fn send(&mut self, message: RtnlMessage, flags: u16) -> io::Result<()> {
        self.sequence = self.sequence.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.sequence;
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(message));
        packet.finalize();
        let mut bytes = vec![0; packet.buffer_len()];
        packet.serialize(&mut bytes);
        self.socket.send(&bytes, 0)?;
        Ok(())
    }

    fn receive_until_done(
        &mut self,
        out: &mut Vec<Received>,
        decode_errors: &mut u64,
    ) -> io::Result<bool> {
        let mut interrupted = false;
        loop {
            let n = match self.socket.recv(&mut &mut self.buffer[..], 0) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if n > self.buffer.len() {
                return Err(io::Error::other("netlink datagram larger than the buffer"));
            }
            let (done, intr) = parse_datagram(&self.buffer[..n], out, decode_errors)?;
            interrupted |= intr;
            if done {
                return Ok(interrupted);
            }
        }
    }

    /// Dumps `kind` into `out`, again when the kernel flags the dump as interrupted.
    ///
    /// # Errors
    /// The kernel refused the dump, or a socket error.
    pub fn dump(
        &mut self,
        kind: DumpKind,
        out: &mut Vec<Received>,
        decode_errors: &mut u64,
    ) -> io::Result<()> {
        for _ in 0..DUMP_ATTEMPTS {
            let start = out.len();
            self.send(kind.request(), NLM_F_REQUEST | NLM_F_DUMP)?;
            match self.receive_until_done(out, decode_errors) {
                Ok(false) => return Ok(()),
                Ok(true) => out.truncate(start),
                Err(e) if e.raw_os_error() == Some(libc::EINTR) => out.truncate(start),
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other(format!(
            "{kind:?} dump interrupted {DUMP_ATTEMPTS} times in a row"
        )))
    }

    /// Sends a request and waits for the kernel's acknowledgement.
    ///
    /// # Errors
    /// The kernel's error (e.g. `EEXIST`, `ENODEV`), or a socket error.
    pub fn request(&mut self, message: RouteNetlinkMessage) -> io::Result<()> {
        self.send(RtnlMessage::Route(message), NLM_F_REQUEST | NLM_F_ACK)?;
        let mut ignored = Vec::new();
        let mut errors = 0;
        self.receive_until_done(&mut ignored, &mut errors)?;
        Ok(())
    }
}
