//! Host interfaces: one TAP netdev per switch port, named and addressed like the port (SONiC's
//! `Ethernet0`), in the namespace of the calling thread (VPP linux-cp's model, reference §1.1).
//!
//! What the kernel sends on the TAP (ARP, ND, BGP, ICMP errors, …) is read with
//! [`TapInterface::read_frame`] and injected out of the port by the dataplane; what the dataplane
//! punts is written with [`TapInterface::write_frame`] and the kernel receives it as if from the
//! wire. The TAP's carrier follows the port's link ([`TapInterface::set_carrier`],
//! `TUNSETCARRIER`): without it the kernel keeps routes over a dead port (reference §1.5).
//!
//! The interface is not persistent: closing the descriptor (dropping the value) removes it, with
//! its addresses and routes.

use crate::netlink::RequestSocket;
use crate::sys;
use headroom_wire::ethernet::MacAddress;
use netlink_packet_route::link::{LinkAttribute, LinkFlags, LinkMessage};
use netlink_packet_route::RouteNetlinkMessage;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

/// A TAP host interface (module docs).
#[derive(Debug)]
pub struct TapInterface {
    file: File,
    name: String,
    ifindex: u32,
}

impl TapInterface {
    /// Creates the TAP `name` with `mac` (and `mtu`, if given), sets it up, and returns it with
    /// carrier on. Needs `CAP_NET_ADMIN` in the namespace.
    ///
    /// # Errors
    /// `/dev/net/tun` missing, the name taken or invalid, or a refused netlink request.
    pub fn create(name: &str, mac: MacAddress, mtu: Option<u32>) -> io::Result<Self> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open("/dev/net/tun")?;
        sys::tun_set_iff(file.as_fd(), name, sys::IFF_TAP | sys::IFF_NO_PI)?;
        let ifindex = sys::if_index(name)?;
        let mut link = LinkMessage::default();
        link.header.index = ifindex;
        link.header.flags = LinkFlags::Up;
        link.header.change_mask = LinkFlags::Up;
        link.attributes.push(LinkAttribute::Address(mac.0.to_vec()));
        if let Some(mtu) = mtu {
            link.attributes.push(LinkAttribute::Mtu(mtu));
        }
        RequestSocket::open()?.request(RouteNetlinkMessage::SetLink(link))?;
        Ok(Self {
            file,
            name: name.to_owned(),
            ifindex,
        })
    }

    /// The interface name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its ifindex.
    #[must_use]
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The descriptor, for `poll(2)`.
    #[must_use]
    pub fn raw_fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }

    /// The descriptor, borrowed, for a `poll(2)` with other descriptors.
    #[must_use]
    pub fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.file.as_fd()
    }

    /// Carrier on or off (the port's link state).
    ///
    /// # Errors
    /// The ioctl failed.
    pub fn set_carrier(&self, up: bool) -> io::Result<()> {
        sys::tun_set_carrier(self.file.as_fd(), up)
    }

    /// Reads one frame the kernel sent, if any: `Ok(None)` when there is none now. A frame
    /// longer than `buffer` is truncated (the length returned is what was kept).
    ///
    /// # Errors
    /// A read error other than "would block".
    pub fn read_frame(&self, buffer: &mut [u8]) -> io::Result<Option<usize>> {
        match (&self.file).read(buffer) {
            Ok(n) => Ok(Some(n)),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Hands one frame to the kernel as received on the interface. `Ok(false)` when the
    /// kernel's queue is full (the caller counts the drop).
    ///
    /// # Errors
    /// A write error other than "would block" (e.g. `EINVAL` for a runt frame).
    pub fn write_frame(&self, frame: &[u8]) -> io::Result<bool> {
        match (&self.file).write(frame) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(false),
            Err(e) => Err(e),
        }
    }
}
