//! The few system calls `rocegen` makes itself: interface addresses, a nanosecond `ppoll`, the
//! timer slack, and the interface MTU and index.

use std::ffi::CStr;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// The IPv4 addresses configured on `interface` (in the calling thread's network namespace).
pub fn interface_ipv4_addrs(interface: &str) -> io::Result<Vec<Ipv4Addr>> {
    Ok(interface_addrs(interface)?
        .into_iter()
        .filter_map(|a| match a {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .collect())
}

/// The IPv6 addresses configured on `interface`, in the kernel's order (none when the kernel's
/// IPv6 is disabled there).
pub fn interface_ipv6_addrs(interface: &str) -> io::Result<Vec<Ipv6Addr>> {
    Ok(interface_addrs(interface)?
        .into_iter()
        .filter_map(|a| match a {
            IpAddr::V6(v6) => Some(v6),
            IpAddr::V4(_) => None,
        })
        .collect())
}

/// The IPv4 and IPv6 addresses configured on `interface`.
fn interface_addrs(interface: &str) -> io::Result<Vec<IpAddr>> {
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: `head` is a valid out-pointer; on success the list is freed below.
    if unsafe { libc::getifaddrs(&raw mut head) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut addrs = Vec::new();
    let mut entry = head;
    while !entry.is_null() {
        // SAFETY: `entry` is a node of the list getifaddrs returned, not yet freed.
        let node = unsafe { &*entry };
        entry = node.ifa_next;
        if node.ifa_name.is_null() || node.ifa_addr.is_null() {
            continue;
        }
        // SAFETY: `ifa_name` is a NUL-terminated string owned by the list.
        let name = unsafe { CStr::from_ptr(node.ifa_name) };
        if name.to_bytes() != interface.as_bytes() {
            continue;
        }
        // SAFETY: `ifa_addr` points to a sockaddr owned by the list; its family says its type.
        let family = i32::from(unsafe { (*node.ifa_addr).sa_family });
        if family == libc::AF_INET {
            // SAFETY: the family is AF_INET, so the sockaddr is a sockaddr_in.
            let sin = unsafe { &*node.ifa_addr.cast::<libc::sockaddr_in>() };
            addrs.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                sin.sin_addr.s_addr,
            ))));
        } else if family == libc::AF_INET6 {
            // SAFETY: the family is AF_INET6, so the sockaddr is a sockaddr_in6.
            let sin6 = unsafe { &*node.ifa_addr.cast::<libc::sockaddr_in6>() };
            addrs.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
        }
    }
    // SAFETY: `head` came from a successful getifaddrs and is freed once.
    unsafe { libc::freeifaddrs(head) };
    Ok(addrs)
}

/// The MTU of `interface`, from sysfs.
pub fn interface_mtu(interface: &str) -> io::Result<usize> {
    interface_attribute(interface, "mtu")
}

/// The index of `interface` (an IPv6 link-local address's scope), from sysfs.
pub fn interface_index(interface: &str) -> io::Result<u32> {
    interface_attribute(interface, "ifindex")
}

/// A number in `/sys/class/net/INTERFACE/NAME`.
fn interface_attribute<T: std::str::FromStr>(interface: &str, name: &str) -> io::Result<T> {
    if interface.is_empty() || interface.contains('/') || interface.starts_with('.') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "invalid interface name",
        ));
    }
    let text = std::fs::read_to_string(format!("/sys/class/net/{interface}/{name}"))?;
    text.trim()
        .parse()
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, format!("unreadable {name}")))
}

/// What [`PollSet::wait`] saw on each descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ready {
    /// The descriptor is readable (or has an error or hang-up to report).
    pub readable: bool,
    /// The descriptor is writable.
    pub writable: bool,
}

/// A `ppoll` set of any size, allocated once: the event loop's wait over its ring, its TX
/// socket and one TCP connection per peer.
#[derive(Debug, Default)]
pub struct PollSet {
    fds: Vec<libc::pollfd>,
}

impl PollSet {
    /// An empty set with room for `capacity` descriptors.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            fds: Vec::with_capacity(capacity),
        }
    }

    /// Empties the set (keeps its memory).
    pub fn clear(&mut self) {
        self.fds.clear();
    }

    /// Adds `fd`, waiting for it to be readable and/or writable; returns its index.
    pub fn push(&mut self, fd: BorrowedFd<'_>, read: bool, write: bool) -> usize {
        self.fds.push(libc::pollfd {
            fd: fd.as_raw_fd(),
            events: (if read { libc::POLLIN } else { 0 }) | (if write { libc::POLLOUT } else { 0 }),
            revents: 0,
        });
        self.fds.len() - 1
    }

    /// Waits until a descriptor is ready or `timeout` passes (`None`: no timeout), with
    /// nanosecond resolution (`ppoll`), unlike `poll`'s milliseconds: the emulated link paces
    /// frames microseconds apart. `EINTR` counts as a timeout. Then [`PollSet::ready`] tells what
    /// each descriptor showed. Returns whether any descriptor is ready (false: the timeout
    /// passed).
    pub fn wait(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        for p in &mut self.fds {
            p.revents = 0;
        }
        let spec = timeout.map(|t| libc::timespec {
            tv_sec: libc::time_t::try_from(t.as_secs()).unwrap_or(libc::time_t::MAX),
            // Below 1e9: fits.
            tv_nsec: t.subsec_nanos() as libc::c_long,
        });
        let spec_ptr = spec.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
        // SAFETY: `fds` holds `len` valid pollfd; `spec_ptr` is null or points to a timespec
        // alive for the call; a null signal mask leaves the mask unchanged.
        let rc = unsafe {
            libc::ppoll(
                self.fds.as_mut_ptr(),
                self.fds.len() as libc::nfds_t,
                spec_ptr,
                std::ptr::null(),
            )
        };
        if rc < 0 {
            let error = io::Error::last_os_error();
            if error.kind() == io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(error);
        }
        Ok(rc > 0)
    }

    /// What descriptor `index` showed in the last [`PollSet::wait`].
    #[must_use]
    pub fn ready(&self, index: usize) -> Ready {
        self.fds.get(index).map_or(Ready::default(), |p| Ready {
            readable: p.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0,
            writable: p.revents & libc::POLLOUT != 0,
        })
    }
}

/// Sets this thread's timer slack (`PR_SET_TIMERSLACK`): by default the kernel may extend a
/// sleep by 50 us to batch wake-ups, which at 1 Gb/s is six 1 KiB frames of pacing error.
pub fn set_timer_slack(slack: Duration) -> io::Result<()> {
    let nanos = libc::c_ulong::try_from(slack.as_nanos().max(1)).unwrap_or(libc::c_ulong::MAX);
    // SAFETY: PR_SET_TIMERSLACK takes one unsigned long argument and touches no memory.
    let rc = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, nanos, 0, 0, 0) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::os::fd::AsFd;

    #[test]
    fn loopback_has_its_address() {
        let addrs = interface_ipv4_addrs("lo").unwrap();
        assert!(addrs.contains(&Ipv4Addr::LOCALHOST), "{addrs:?}");
        assert!(interface_ipv4_addrs("no-such-if0").unwrap().is_empty());
        assert!(interface_ipv6_addrs("no-such-if0").unwrap().is_empty());
        // IPv4 only in the IPv4 list; ::1 is lo's if the kernel's IPv6 is on here.
        let v6 = interface_ipv6_addrs("lo").unwrap();
        let ipv6_on = std::fs::read_to_string("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
            .is_ok_and(|v| v.trim() == "0");
        assert_eq!(v6.contains(&Ipv6Addr::LOCALHOST), ipv6_on, "{v6:?}");
        assert!(interface_mtu("lo").unwrap() >= 1500);
        assert!(interface_mtu("../x").is_err());
    }

    #[test]
    fn poll_set_times_out_and_sees_readiness() {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut set = PollSet::with_capacity(2);
        set.push(a.as_fd(), true, false);
        let start = std::time::Instant::now();
        assert!(!set.wait(Some(Duration::from_micros(300))).unwrap());
        assert!(start.elapsed() >= Duration::from_micros(300));
        assert!(!set.ready(0).readable);
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        set.clear();
        set.push(a.as_fd(), true, false);
        set.push(b.as_fd(), false, true);
        assert!(set.wait(Some(Duration::from_secs(5))).unwrap());
        assert!(set.ready(0).readable);
        assert!(set.ready(1).writable);
        assert_eq!(set.ready(7), Ready::default());
        set_timer_slack(Duration::from_nanos(1)).unwrap();
    }
}
