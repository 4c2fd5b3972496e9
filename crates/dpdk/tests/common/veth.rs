//! A veth pair with a DPDK vdev on one end and a raw AF_PACKET socket on the other: frames
//! injected into the socket must arrive through rx_burst, and frames sent with tx_burst must
//! arrive at the socket, byte for byte.
//!
//! Needs root (creating the veth; af_packet and af_xdp need CAP_NET_RAW and CAP_NET_ADMIN) and
//! iproute2's `ip`. Without them the tests FAIL with a message saying so: never skipped.

use std::ffi::CString;
use std::process::Command;
use std::time::Instant;

use headroom_core::frame::Frame;
use headroom_dpdk::{
    DpdkPort, FlowControlState, Mempool, PortConfig, PromiscuousState, DEFAULT_DATA_ROOM_BYTES,
};
use headroom_io::TxQueue;

use super::{assert_pool_full, mbuf_frame, rx_matching, test_frame, test_frame_seq};

/// The IEEE 802 local experimental EtherType the test frames carry.
const TEST_ETHERTYPE: u16 = 0x88B5;
/// IFF_PROMISC in /sys/class/net/<if>/flags.
const IFF_PROMISC: u32 = 0x100;

fn ip(args: &[&str]) {
    let output = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `ip` (apt install iproute2): {e}"));
    assert!(
        output.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A veth pair in the root network namespace with names unique to this process; deleted on
/// drop (deleting one end deletes both), also when the test fails.
struct Veth {
    dpdk_end: String,
    socket_end: String,
}

impl Veth {
    fn create() -> Self {
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        assert_eq!(
            euid, 0,
            "this test needs root: it creates a veth pair, and net_af_packet needs CAP_NET_RAW \
             and CAP_NET_ADMIN. Run it as root (scripts/test.sh does); it is not skipped"
        );
        assert!(
            Command::new("ip").arg("-V").output().is_ok(),
            "this test needs iproute2's `ip` (apt install iproute2); it is not skipped"
        );
        let tag = std::process::id() % 1_000_000;
        let veth = Self {
            dpdk_end: format!("hrdp{tag}d"),
            socket_end: format!("hrdp{tag}s"),
        };
        ip(&[
            "link",
            "add",
            &veth.dpdk_end,
            "type",
            "veth",
            "peer",
            "name",
            &veth.socket_end,
        ]);
        for end in [&veth.dpdk_end, &veth.socket_end] {
            // No IPv6 on the test link: the kernel would send router and neighbour
            // solicitations into it (they are filtered out anyway, this keeps it quiet).
            let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{end}/disable_ipv6"), "1");
            ip(&["link", "set", "dev", end, "up"]);
        }
        veth
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["link", "del", "dev", &self.dpdk_end])
            .output();
    }
}

/// A raw AF_PACKET socket bound to one interface and one EtherType: it receives only incoming
/// frames of that type (not its own transmissions) and sends raw frames.
struct RawSocket {
    fd: libc::c_int,
}

impl RawSocket {
    fn bind(interface: &str, ethertype: u16) -> Self {
        let protocol = ethertype.to_be();
        // SAFETY: plain socket(2) call.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW | libc::SOCK_NONBLOCK,
                libc::c_int::from(protocol),
            )
        };
        assert!(
            fd >= 0,
            "socket(AF_PACKET): {}",
            std::io::Error::last_os_error()
        );
        let socket = Self { fd };
        let c_name = CString::new(interface).expect("no NUL");
        // SAFETY: c_name is a valid C string.
        let ifindex = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        assert_ne!(ifindex, 0, "no interface {interface}");
        // SAFETY: all-zero is a valid sockaddr_ll to fill in.
        let mut address: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        address.sll_family = libc::AF_PACKET as u16;
        address.sll_protocol = protocol;
        address.sll_ifindex = i32::try_from(ifindex).expect("ifindex");
        // SAFETY: address is a live sockaddr_ll of the given size; fd is our socket.
        let rc = unsafe {
            libc::bind(
                fd,
                (&raw const address).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        socket
    }

    fn send(&self, frame: &[u8]) {
        // SAFETY: frame is a live buffer of frame.len() bytes; the socket is bound.
        let sent = unsafe { libc::send(self.fd, frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            sent,
            frame.len() as isize,
            "send: {}",
            std::io::Error::last_os_error()
        );
    }

    /// Receives frames until `want` test frames arrived or the deadline passed.
    fn receive(&self, want: usize) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + super::POLL_DEADLINE;
        let mut frames = Vec::new();
        let mut buf = vec![0_u8; 4096];
        while frames.len() < want && Instant::now() < deadline {
            // SAFETY: buf is a live buffer of buf.len() bytes; non-blocking socket.
            let got = unsafe { libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            match usize::try_from(got) {
                Ok(len) if test_frame_seq(&buf[..len]).is_some() => {
                    frames.push(buf[..len].to_vec());
                }
                _ => std::hint::spin_loop(),
            }
        }
        frames
    }
}

impl Drop for RawSocket {
    fn drop(&mut self) {
        // SAFETY: fd is our open socket, closed once.
        unsafe { libc::close(self.fd) };
    }
}

/// The round trip through `driver` (`net_af_packet` or `net_af_xdp`) on a fresh veth pair.
pub fn frames_cross_a_veth(driver: &str) {
    let veth = Veth::create();
    let port_name = format!("{driver}0");
    let vdev = format!("--vdev={port_name},iface={}", veth.dpdk_end);
    let eal = super::eal(&[&vdev]);
    let pool = Mempool::new(
        eal,
        "veth_pool",
        // af_xdp fills its 4096-slot fill ring from the pool when the RX queue is set up.
        8191,
        32,
        DEFAULT_DATA_ROOM_BYTES,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    if driver == "net_af_xdp" {
        // Too small for af_xdp's fill ring: the open fails with an error that says so, and the
        // port opens afterwards with a large enough pool.
        let small = Mempool::new(eal, "veth_small", 1023, 0, DEFAULT_DATA_ROOM_BYTES)
            .unwrap_or_else(|e| panic!("{e}"));
        let error = DpdkPort::open(eal, &port_name, &PortConfig::default(), &small)
            .expect_err("af_xdp needs 2048 free mbufs per RX queue");
        let message = error.to_string();
        assert!(
            message.contains("rte_eth_rx_queue_setup")
                && message.contains("1023 of 1023 mbufs free")
                && message.contains("net_af_xdp takes 2048"),
            "{message}"
        );
        assert_pool_full(&small, "after the refused open");
    }
    let mut port = DpdkPort::open(eal, &port_name, &PortConfig::default(), &pool)
        .unwrap_or_else(|e| panic!("{e}"));
    let socket = RawSocket::bind(&veth.socket_end, TEST_ETHERTYPE);

    let sysfs = |attribute: &str| {
        std::fs::read_to_string(format!("/sys/class/net/{}/{attribute}", veth.dpdk_end))
            .expect("sysfs attribute")
            .trim()
            .to_owned()
    };
    let mac = port
        .info()
        .mac
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    assert_eq!(mac, sysfs("address"), "PortInfo.mac is the interface's MAC");
    assert_eq!(port.flow_control(), FlowControlState::NotSupported);
    assert_eq!(port.promiscuous(), PromiscuousState::Enabled);
    let flags = u32::from_str_radix(sysfs("flags").trim_start_matches("0x"), 16).expect("flags");
    assert_ne!(flags & IFF_PROMISC, 0, "the interface is promiscuous");
    let deadline = Instant::now() + super::POLL_DEADLINE;
    while !port.link().expect("link").up {
        assert!(Instant::now() < deadline, "the veth link never came up");
        std::hint::spin_loop();
    }

    let (mut rx_queues, mut tx_queues) = port.split().expect("split");
    let (rx, tx) = (&mut rx_queues[0], &mut tx_queues[0]);

    // Kernel -> DPDK.
    let injected: Vec<Vec<u8>> = super::varied_lengths(16)
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(i as u16, len))
        .collect();
    for frame in &injected {
        socket.send(frame);
    }
    let received = rx_matching(rx, injected.len(), |frame| {
        test_frame_seq(frame.data()).is_some_and(|seq| seq < 16)
    });
    assert_eq!(
        received.len(),
        injected.len(),
        "frames lost between socket and rx_burst"
    );
    for (index, (frame, expected)) in received.iter().zip(&injected).enumerate() {
        assert_eq!(
            frame.data(),
            &expected[..],
            "received frame {index} differs"
        );
    }
    drop(received);

    // DPDK -> kernel.
    let outgoing: Vec<Vec<u8>> = super::varied_lengths(16)
        .into_iter()
        .enumerate()
        .map(|(i, len)| test_frame(500 + i as u16, len + 3))
        .collect();
    let mut frames: Vec<_> = outgoing.iter().map(|f| mbuf_frame(tx, f)).collect();
    let deadline = Instant::now() + super::POLL_DEADLINE;
    while !frames.is_empty() {
        assert!(
            Instant::now() < deadline,
            "net_af_packet would not take the frames"
        );
        tx.tx_burst(&mut frames);
    }
    let arrived = socket.receive(outgoing.len());
    assert_eq!(
        arrived.len(),
        outgoing.len(),
        "frames lost between tx_burst and socket"
    );
    assert_eq!(arrived, outgoing, "frames arrive in order, byte for byte");

    let stats = port.stats().expect("stats");
    assert!(stats.rx_frames >= 16, "{stats:?}");
    assert_eq!(stats.tx_frames, 16, "{stats:?}");
    let xstats = port.xstats().expect("xstats");
    assert!(xstats
        .iter()
        .any(|(name, value)| name == "tx_good_packets" && *value == 16));
    drop((rx_queues, tx_queues, port));
    if driver == "net_af_xdp" {
        // DPDK 22.11's af_xdp PMD does not return the mbufs in its fill ring (2048 reserved at
        // queue setup, 4096 slots) to the pool when the port closes. The pool therefore still
        // counts them in use, and dropping it leaks it instead of freeing it.
        assert!(
            pool.in_use() <= 4096,
            "af_xdp kept more than its fill ring: {} mbufs in use",
            pool.in_use()
        );
    } else {
        assert_pool_full(&pool, "after closing the port");
    }
    drop(socket);
    drop(veth);
}
