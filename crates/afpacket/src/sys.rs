//! Thin safe wrappers over the system calls the backend makes. Every `unsafe` block of the crate
//! that talks to the kernel through a syscall lives here.

use std::ffi::c_int;
use std::io;
use std::mem::{size_of, MaybeUninit};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::ptr::NonNull;
use std::time::Duration;

/// The `ETH_P_ALL` protocol number in network byte order, as `socket`/`bind` want it.
pub(crate) const ETH_P_ALL_BE: u16 = (libc::ETH_P_ALL as u16).to_be();

/// `SIOCETHTOOL` (linux/sockios.h); libc only exports it on some targets.
const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// An `AF_PACKET` raw socket, non-blocking, close-on-exec, with protocol 0 so that it receives
/// nothing until it is bound.
pub(crate) fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; the returned descriptor is checked below.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A datagram socket used only as a handle for interface ioctls (ethtool).
pub(crate) fn control_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain syscall with constant arguments; the returned descriptor is checked below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a freshly created descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `setsockopt` with a plain-data value.
///
/// `T` must be a C struct or integer without padding the kernel could misread (all callers pass
/// `c_int` or a `libc` uapi struct).
pub(crate) fn set_option<T: Copy>(
    fd: BorrowedFd<'_>,
    level: c_int,
    name: c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: `value` points to `size_of::<T>()` readable bytes for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            std::ptr::from_ref(value).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads and resets the kernel's counters of a packet socket (`PACKET_STATISTICS`): for a
/// TPACKET_V3 socket `tp_drops` counts frames dropped because the ring was full.
pub(crate) fn packet_statistics(fd: BorrowedFd<'_>) -> io::Result<libc::tpacket_stats_v3> {
    let mut stats = MaybeUninit::<libc::tpacket_stats_v3>::zeroed();
    let mut len = size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
    // SAFETY: `stats` is a writable buffer of `len` bytes; the kernel writes at most `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            stats.as_mut_ptr().cast(),
            &raw mut len,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: zero-initialised and then (partly) written by the kernel; all-zero is a valid
    // `tpacket_stats_v3` (three integers).
    Ok(unsafe { stats.assume_init() })
}

/// Binds a packet socket to one interface and one protocol (network byte order; 0 = none, the
/// socket then only sends).
pub(crate) fn bind_packet(fd: BorrowedFd<'_>, ifindex: c_int, protocol_be: u16) -> io::Result<()> {
    // SAFETY: all-zero is a valid `sockaddr_ll` (integers and a byte array).
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol_be;
    addr.sll_ifindex = ifindex;
    // SAFETY: `addr` is a valid `sockaddr_ll` and the length passed is its size.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            std::ptr::from_ref(&addr).cast(),
            size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sends one frame on a bound packet socket (`send(2)`, no flags).
pub(crate) fn send_frame(fd: BorrowedFd<'_>, frame: &[u8]) -> io::Result<()> {
    // SAFETY: `frame` is a valid buffer of the length given; `fd` is a live descriptor.
    let rc = unsafe { libc::send(fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// An `ifreq` naming one interface, for the `SIOCGIF*` and `SIOCETHTOOL` ioctls.
pub(crate) struct InterfaceRequest {
    req: libc::ifreq,
}

impl InterfaceRequest {
    /// `None` when `name` cannot be an interface name (empty, too long, or holding a NUL).
    pub(crate) fn new(name: &str) -> Option<Self> {
        if name.is_empty() || name.len() >= libc::IFNAMSIZ || name.bytes().any(|b| b == 0) {
            return None;
        }
        // SAFETY: all-zero is a valid `ifreq` (a byte array and a union of plain data).
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        for (dst, src) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *dst = src as libc::c_char;
        }
        Some(Self { req })
    }

    fn ioctl(&mut self, fd: BorrowedFd<'_>, request: libc::c_ulong) -> io::Result<()> {
        // SAFETY: `self.req` is a valid, NUL-terminated `ifreq` the kernel may read and write;
        // every request used with it takes an `ifreq *`.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, &raw mut self.req) };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    pub(crate) fn index(&mut self, fd: BorrowedFd<'_>) -> io::Result<c_int> {
        self.ioctl(fd, libc::SIOCGIFINDEX)?;
        // SAFETY: SIOCGIFINDEX succeeded and wrote `ifru_ifindex`.
        Ok(unsafe { self.req.ifr_ifru.ifru_ifindex })
    }

    pub(crate) fn mtu(&mut self, fd: BorrowedFd<'_>) -> io::Result<c_int> {
        self.ioctl(fd, libc::SIOCGIFMTU)?;
        // SAFETY: SIOCGIFMTU succeeded and wrote `ifru_mtu`.
        Ok(unsafe { self.req.ifr_ifru.ifru_mtu })
    }

    /// The interface flags (`IFF_*`).
    pub(crate) fn flags(&mut self, fd: BorrowedFd<'_>) -> io::Result<c_int> {
        self.ioctl(fd, libc::SIOCGIFFLAGS)?;
        // SAFETY: SIOCGIFFLAGS succeeded and wrote `ifru_flags`.
        Ok(c_int::from(unsafe { self.req.ifr_ifru.ifru_flags }))
    }

    /// The hardware address type (`ARPHRD_*`) and its first six bytes.
    pub(crate) fn hardware_address(&mut self, fd: BorrowedFd<'_>) -> io::Result<(u16, [u8; 6])> {
        self.ioctl(fd, libc::SIOCGIFHWADDR)?;
        // SAFETY: SIOCGIFHWADDR succeeded and wrote `ifru_hwaddr`.
        let hwaddr = unsafe { self.req.ifr_ifru.ifru_hwaddr };
        let mut mac = [0u8; 6];
        for (dst, src) in mac.iter_mut().zip(hwaddr.sa_data.iter()) {
            *dst = *src as u8;
        }
        Ok((hwaddr.sa_family, mac))
    }

    /// Runs one `SIOCETHTOOL` command whose argument is `command` (starting with the command
    /// number). Returns the ioctl's non-negative result (`ETHTOOL_SFEATURES` reports flags in
    /// it).
    ///
    /// # Safety
    /// `command` must be large enough for everything the kernel reads and writes for that
    /// command: the kernel trusts the lengths inside the argument, not the buffer's size.
    pub(crate) unsafe fn ethtool(
        &mut self,
        fd: BorrowedFd<'_>,
        command: &mut [u32],
    ) -> io::Result<c_int> {
        self.req.ifr_ifru.ifru_data = command.as_mut_ptr().cast();
        // SAFETY: `self.req` is a valid `ifreq` whose `ifru_data` points to `command`, which
        // the caller sized for the kernel's request and reply and which outlives the call.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), SIOCETHTOOL as _, &raw mut self.req) };
        self.req.ifr_ifru.ifru_data = std::ptr::null_mut();
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(rc)
    }
}

/// Waits until `fd` is readable or `timeout` passes (rounded up to whole milliseconds, capped
/// at `i32::MAX` ms). Returns whether it is readable; an interrupted wait returns `false`.
pub(crate) fn poll_readable(fd: BorrowedFd<'_>, timeout: Duration) -> io::Result<bool> {
    let timeout_ms = timeout.as_nanos().div_ceil(1_000_000).min(i32::MAX as u128) as c_int;
    let mut pollfd = libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: `pollfd` is one valid `pollfd` and the count passed is 1.
    let rc = unsafe { libc::poll(&raw mut pollfd, 1, timeout_ms) };
    if rc < 0 {
        let error = io::Error::last_os_error();
        if error.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(error);
    }
    Ok(rc > 0 && pollfd.revents & (libc::POLLIN | libc::POLLERR) != 0)
}

/// A shared memory mapping of a packet socket's ring, unmapped on drop.
pub(crate) struct RingMapping {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by this value; moving it to another thread moves the
// only handle (the ring walker that uses it is itself used by one thread at a time).
unsafe impl Send for RingMapping {}

impl RingMapping {
    /// Maps `len` bytes of `fd`'s ring (`PACKET_RX_RING` must have been set).
    pub(crate) fn new(fd: BorrowedFd<'_>, len: usize) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping chosen by the kernel (no fixed address, so nothing
        // existing is replaced); the result is checked against MAP_FAILED below.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap at 0"))?;
        Ok(Self { base, len })
    }

    pub(crate) fn base(&self) -> NonNull<u8> {
        self.base
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for RingMapping {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping created in `new`, and no reference into
        // it outlives `self` (slices handed out borrow the ring walker).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// The outcome of one `sendmmsg` call.
pub(crate) enum SendOutcome {
    /// This many messages, from the first, were sent.
    Sent(usize),
    /// The first message was refused with this error.
    Failed(io::Error),
}

/// Sends each of `frames` (at most [`headroom_io::BURST_MAX`]) as one packet with a single
/// `sendmmsg(MSG_DONTWAIT)`, straight from the frames' buffers.
pub(crate) fn send_frames<'a>(
    fd: BorrowedFd<'_>,
    frames: impl Iterator<Item = &'a [u8]>,
) -> SendOutcome {
    const BATCH: usize = headroom_io::BURST_MAX;
    let mut iovecs = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; BATCH];
    // SAFETY: all-zero is a valid `mmsghdr` (null pointers, zero lengths and flags).
    let mut messages: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
    let mut count = 0;
    for (iovec, frame) in iovecs.iter_mut().zip(frames) {
        // The kernel only reads through `iov_base` for a send.
        iovec.iov_base = frame.as_ptr().cast_mut().cast();
        iovec.iov_len = frame.len();
        count += 1;
    }
    for (message, iovec) in messages.iter_mut().zip(iovecs.iter_mut()).take(count) {
        message.msg_hdr.msg_iov = iovec;
        message.msg_hdr.msg_iovlen = 1;
    }
    if count == 0 {
        return SendOutcome::Sent(0);
    }
    // SAFETY: the first `count` messages each point to one iovec describing a live frame buffer
    // borrowed for this call; the socket is bound, so no destination address is needed.
    let rc = unsafe {
        libc::sendmmsg(
            fd.as_raw_fd(),
            messages.as_mut_ptr(),
            count as _,
            libc::MSG_DONTWAIT,
        )
    };
    if rc < 0 {
        SendOutcome::Failed(io::Error::last_os_error())
    } else {
        SendOutcome::Sent(rc as usize)
    }
}

/// Enters another network namespace on the calling thread (`setns(CLONE_NEWNET)`).
pub(crate) fn set_network_namespace(namespace: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: plain syscall on a valid descriptor; it only changes this thread's namespace.
    let rc = unsafe { libc::setns(namespace.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
