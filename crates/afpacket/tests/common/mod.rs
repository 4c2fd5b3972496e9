//! Shared fixtures of the veth tests: a lab per test, a plain packet socket for the far end
//! (independent of the backend under test), frame builders and deadline-bounded waits.
#![allow(dead_code)] // Each test binary uses a different subset.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use headroom_afpacket::lab::VethLab;
use headroom_afpacket::{AfPacketConfig, AfPacketPort};
use headroom_core::frame::Frame;
use headroom_io::{FramePool, PoolConfig, PoolFrame, RxQueue, BURST_MAX};

/// How long a test waits for frames that should arrive at once.
pub const DEADLINE: Duration = Duration::from_secs(5);

/// IEEE 802 "Local Experimental EtherType 1", so test frames cannot be mistaken for anything.
pub const TEST_ETHERTYPE: u16 = 0x88B5;
pub const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
pub const SWITCH_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// A fresh lab; a test that cannot have one fails (never skips) and says why.
pub fn lab() -> VethLab {
    VethLab::create("hr-afp").unwrap_or_else(|error| {
        panic!(
            "cannot set up the veth lab: {error}. These tests need root and iproute2 (`ip`); \
             they fail rather than skip."
        )
    })
}

pub fn pool(frame_count: usize) -> FramePool {
    FramePool::new(PoolConfig::with_frame_count(frame_count)).expect("pool")
}

/// Opens the backend on `interface` inside the lab's namespace.
pub fn open(
    lab: &VethLab,
    interface: &str,
    pool: FramePool,
    config: &AfPacketConfig,
) -> AfPacketPort {
    let _inside = lab.enter().expect("entering the lab namespace");
    AfPacketPort::open(interface, pool, config)
        .unwrap_or_else(|error| panic!("opening {interface}: {error}"))
}

/// An untagged test frame of exactly `len` bytes (at least 18) whose payload encodes `seq`.
pub fn test_frame(seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 18);
    let mut frame = Vec::with_capacity(len);
    frame.extend_from_slice(&SWITCH_MAC);
    frame.extend_from_slice(&HOST_MAC);
    frame.extend_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    frame.extend_from_slice(&seq.to_be_bytes());
    frame.extend((18..len).map(|i| (i as u32 ^ seq) as u8));
    frame
}

/// A test frame with one tag (`tpid`, PCP, VID) after the MAC addresses, `len` bytes in all.
pub fn tagged_frame(seq: u32, len: usize, tpid: u16, pcp: u8, vid: u16) -> Vec<u8> {
    let untagged = test_frame(seq, len - 4);
    let tci = (u16::from(pcp) << 13) | (vid & 0x0FFF);
    let mut frame = Vec::with_capacity(len);
    frame.extend_from_slice(&untagged[..12]);
    frame.extend_from_slice(&tpid.to_be_bytes());
    frame.extend_from_slice(&tci.to_be_bytes());
    frame.extend_from_slice(&untagged[12..]);
    frame
}

/// Receives until `count` frames arrived or the deadline passed; returns the frames and the
/// largest burst seen.
pub fn receive(rx: &mut headroom_afpacket::AfPacketRx, count: usize) -> (Vec<PoolFrame>, usize) {
    let deadline = Instant::now() + DEADLINE;
    let mut frames = Vec::new();
    let mut largest_burst = 0;
    while frames.len() < count && Instant::now() < deadline {
        let want = (count - frames.len()).min(BURST_MAX);
        let got = rx.rx_burst(&mut frames, want);
        largest_burst = largest_burst.max(got);
        if got == 0 {
            rx.wait_readable(Duration::from_millis(20)).expect("poll");
        }
    }
    (frames, largest_burst)
}

/// Polls `condition` until it holds or the deadline passes; returns whether it held.
pub fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + DEADLINE;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        std::thread::yield_now();
    }
    condition()
}

pub fn bytes_of(frames: &[PoolFrame]) -> Vec<Vec<u8>> {
    frames.iter().map(|f| f.data().to_vec()).collect()
}

/// A plain, blocking AF_PACKET socket on one interface: the "wire" side of a test.
pub struct RawSocket {
    fd: OwnedFd,
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

impl RawSocket {
    /// Opens a raw socket on `interface` in the lab's namespace, bound to all protocols.
    pub fn open(lab: &VethLab, interface: &str) -> Self {
        let _inside = lab.enter().expect("entering the lab namespace");
        let protocol = (libc::ETH_P_ALL as u16).to_be();
        // SAFETY: plain syscall; the descriptor is checked.
        let fd =
            check(unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, i32::from(protocol)) })
                .expect("raw socket");
        // SAFETY: a fresh descriptor nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let name = CString::new(interface).expect("name");
        // SAFETY: `name` is a valid NUL-terminated string.
        let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
        assert_ne!(ifindex, 0, "no interface {interface}");
        // SAFETY: all-zero is a valid sockaddr_ll.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol;
        addr.sll_ifindex = ifindex as i32;
        // SAFETY: `addr` is a valid sockaddr_ll of the length given.
        check(unsafe {
            libc::bind(
                fd.as_raw_fd(),
                std::ptr::from_ref(&addr).cast(),
                size_of::<libc::sockaddr_ll>() as u32,
            )
        })
        .expect("bind raw socket");
        Self { fd }
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: `frame` is a readable buffer of `frame.len()` bytes.
        let sent =
            unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            sent,
            frame.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// The next frame arriving from the wire (frames this socket's interface sends are skipped),
    /// or `None` after the deadline.
    pub fn receive(&self) -> Option<Vec<u8>> {
        let deadline = Instant::now() + DEADLINE;
        let mut buffer = vec![0u8; 65536];
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            let mut pollfd = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            let ready = unsafe { libc::poll(&raw mut pollfd, 1, left.as_millis() as i32 + 1) };
            if ready <= 0 {
                continue;
            }
            // SAFETY: all-zero is a valid sockaddr_ll.
            let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            let mut from_len = size_of::<libc::sockaddr_ll>() as u32;
            // SAFETY: `buffer` and `from` are writable buffers of the lengths given.
            let len = unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    buffer.as_mut_ptr().cast(),
                    buffer.len(),
                    libc::MSG_DONTWAIT,
                    std::ptr::from_mut(&mut from).cast(),
                    &raw mut from_len,
                )
            };
            if len < 0 || from.sll_pkttype == libc::PACKET_OUTGOING {
                continue;
            }
            return Some(buffer[..len as usize].to_vec());
        }
    }
}
