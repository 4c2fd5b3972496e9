//! The system calls this crate makes directly (everything else goes through `netlink-sys`):
//! a forced socket receive buffer, `poll(2)`, and the TUN/TAP ioctls. Each `unsafe` block says
//! why it is sound.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::time::Duration;

/// `SO_RCVBUFFORCE` (needs `CAP_NET_ADMIN`), falling back to `SO_RCVBUF` (capped by
/// `net.core.rmem_max`). Returns the size the kernel reports afterwards (it doubles requests).
pub fn set_receive_buffer(fd: BorrowedFd<'_>, bytes: usize) -> io::Result<usize> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    for option in [libc::SO_RCVBUFFORCE, libc::SO_RCVBUF] {
        // SAFETY: `value` is a live `c_int` and its size is passed; the fd is open (borrowed).
        let rc = unsafe {
            libc::setsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                option,
                (&raw const value).cast(),
                size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            break;
        }
        if option == libc::SO_RCVBUF {
            return Err(io::Error::last_os_error());
        }
    }
    let mut actual: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `actual` and `len` are live and writable, `len` holds `actual`'s size.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&raw mut actual).cast(),
            &raw mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(actual).unwrap_or(0))
}

/// Waits until `fd` is readable or `timeout` passes; returns whether it is readable.
pub fn wait_readable(fd: RawFd, timeout: Duration) -> io::Result<bool> {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    // SAFETY: one live, writable `pollfd`, count 1.
    let rc = unsafe { libc::poll(&raw mut pfd, 1, ms) };
    if rc < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(rc > 0 && pfd.revents & libc::POLLIN != 0)
}

/// `IFF_TAP` (`linux/if_tun.h`).
pub const IFF_TAP: libc::c_short = 0x0002;
/// `IFF_NO_PI`: frames without the 4-byte packet-information header.
pub const IFF_NO_PI: libc::c_short = 0x1000;
/// `TUNSETIFF` = `_IOW('T', 202, int)`.
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
/// `TUNSETCARRIER` = `_IOW('T', 226, int)` (Linux 5.0).
const TUNSETCARRIER: libc::c_ulong = 0x4004_54e2;

/// `struct ifreq` as `TUNSETIFF` reads it: the name, then the flags (the union is 24 bytes).
#[repr(C)]
struct IfreqFlags {
    name: [libc::c_char; libc::IFNAMSIZ],
    flags: libc::c_short,
    _pad: [u8; 22],
}

/// Attaches the open `/dev/net/tun` descriptor to a new TAP interface `name` (at most 15
/// bytes) with `flags`.
pub fn tun_set_iff(fd: BorrowedFd<'_>, name: &str, flags: libc::c_short) -> io::Result<()> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("interface name {name:?}: 1 to 15 bytes, no NUL"),
        ));
    }
    let mut req = IfreqFlags {
        name: [0; libc::IFNAMSIZ],
        flags,
        _pad: [0; 22],
    };
    for (dst, &src) in req.name.iter_mut().zip(bytes) {
        *dst = src as libc::c_char;
    }
    // SAFETY: TUNSETIFF reads (and writes back the name into) a `struct ifreq`; `req` is a live,
    // writable, correctly laid out and NUL-terminated one of the kernel's size (40 bytes).
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &raw mut req) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Sets the TAP's carrier (`TUNSETCARRIER`).
pub fn tun_set_carrier(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    let value: libc::c_int = libc::c_int::from(on);
    // SAFETY: TUNSETCARRIER reads one `int` through the pointer; `value` is live.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETCARRIER, &raw const value) };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

const _: () = assert!(size_of::<IfreqFlags>() == 40);

/// The ifindex of an interface of the calling thread's namespace.
pub fn if_index(name: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in interface name"))?;
    // SAFETY: `c` is a live NUL-terminated string; if_nametoindex only reads it.
    let index = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if index == 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(index)
}
