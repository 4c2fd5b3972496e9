//! Shared fixtures of the runtime's DPDK tests (`tests/dpdk_*.rs`): EAL arguments unique to the
//! test process, ring "cables" (ports from `rte_eth_from_rings`), a namespace/veth topology with
//! hosts, test frames, PFC frames built byte by byte from IEEE 802.1Qbb, and deadline-bounded
//! polling.
//!
//! cargo runs each `tests/*.rs` file as its own process, and EAL runs once per process: each file
//! starts one EAL with its own `--file-prefix`.
#![allow(dead_code)] // each test binary uses a different subset

use std::ffi::CString;
use std::process::Command;
use std::ptr::NonNull;
use std::time::{Duration, Instant};

use etherparse::PacketBuilder;
use headroom_afpacket::lab::NetnsGuard;
use headroom_afpacket::{AfPacketConfig, AfPacketPort, AfPacketRx, AfPacketTx};
use headroom_core::frame::Frame;
use headroom_dpdk::{sys, DpdkRxQueue};
use headroom_io::pool::{FramePool, PoolConfig};
use headroom_io::{RxQueue, TxQueue, BURST_MAX};

/// How long a test waits for something that should happen at once (frames over a ring or a
/// veth take microseconds; this only bounds a failure).
pub const DEADLINE: Duration = Duration::from_secs(5);

/// EAL arguments for this test process: no hugepages, 256 MiB, no PCI, no shared config, a
/// file prefix unique to the process, plus `extra`.
pub fn eal_args(tag: &str, extra: &[String]) -> Vec<String> {
    let mut args: Vec<String> = ["--no-huge", "-m", "256", "--no-pci", "--no-shconf"]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
    args.push("--log-level=notice".to_owned());
    args.push(format!("--file-prefix=hr-rt-{tag}-{}", std::process::id()));
    args.extend(extra.iter().cloned());
    args
}

/// Polls `condition` until it holds or [`DEADLINE`] passes; returns whether it held.
pub fn eventually(mut condition: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + DEADLINE;
    while Instant::now() < end {
        if condition() {
            return true;
        }
        std::thread::yield_now();
    }
    condition()
}

/// Source and destination MACs of the test hosts (locally administered unicast).
pub fn host_mac(i: u8) -> [u8; 6] {
    [0x02, 0x68, 0x74, 0, 0, i + 1]
}

/// An IPv4/UDP frame to the RoCEv2 port 4791 of exactly `len` bytes (at least 60), with `dscp`
/// and `ecn` in the TOS byte and `seq` in the first payload bytes.
pub fn udp_frame(src: [u8; 6], dst: [u8; 6], dscp: u8, ecn: u8, seq: u32, len: usize) -> Vec<u8> {
    assert!(len >= 60);
    let mut payload = vec![0u8; len - 42];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    let mut buf = Vec::with_capacity(len);
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 2], 64)
        .udp(49152, 4791)
        .write(&mut buf, &payload)
        .expect("frame");
    buf[15] = (dscp << 2) | (ecn & 0b11);
    // The TOS byte changed: recompute the IPv4 header checksum (RFC 791).
    buf[24] = 0;
    buf[25] = 0;
    let sum = headroom_wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&sum.to_be_bytes());
    buf
}

/// The sequence number of a [`udp_frame`].
pub fn udp_seq(frame: &[u8]) -> Option<u32> {
    (frame.len() >= 46 && frame[12..14] == [0x08, 0x00] && frame[36..38] == [0x12, 0xb7])
        .then(|| u32::from_be_bytes([frame[42], frame[43], frame[44], frame[45]]))
}

/// Whether the IPv4 header checksum of a [`udp_frame`] verifies (RFC 1071: the sum over the
/// header, checksum included, is 0xFFFF).
pub fn ipv4_checksum_ok(frame: &[u8]) -> bool {
    headroom_wire::checksum::checksum(&frame[14..34]) == 0
}

/// A PFC frame exactly as IEEE 802.1Qbb clause 36.1.3 and 802.3 Annex 31D lay it out, padded
/// to the 60-byte minimum (no FCS): destination 01-80-C2-00-00-01, `src`, EtherType 0x8808,
/// opcode 0x0101, the priority-enable vector (bit n = priority n), eight 2-byte pause times
/// in quanta.
pub fn pfc_frame(src: [u8; 6], enable_vector: u8, quanta: [u16; 8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&[0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&[0x88, 0x08, 0x01, 0x01, 0x00, enable_vector]);
    for q in quanta {
        f.extend_from_slice(&q.to_be_bytes());
    }
    f.resize(60, 0);
    f
}

/// Whether `frame` is a MAC Control frame (PFC, PAUSE).
pub fn is_mac_control(frame: &[u8]) -> bool {
    frame.len() >= 14 && frame[12..14] == [0x88, 0x08]
}

/// Two crossed rings and a port on each end, made with `rte_eth_from_rings`: what the switch
/// side transmits the test side receives, and back. Ring memory is freed on drop, so a cable
/// must outlive the ports on it (create it first, drop it last).
pub struct Cable {
    rings: [NonNull<sys::rte_ring>; 2],
    /// The switch's end (`net_ring_<tag>_sw`).
    pub switch_end: String,
    /// The test's end (`net_ring_<tag>_host`).
    pub host_end: String,
}

impl Cable {
    /// A cable whose rings hold `slots` - 1 frames each. EAL must be running.
    pub fn new(tag: &str, slots: u32) -> Self {
        let ring = |name: String| {
            let c_name = CString::new(name.clone()).expect("no NUL");
            // SAFETY: EAL is running; c_name is a valid C string that DPDK copies.
            let raw = unsafe {
                sys::rte_ring_create(
                    c_name.as_ptr(),
                    slots,
                    sys::SOCKET_ID_ANY,
                    sys::RING_F_SP_ENQ | sys::RING_F_SC_DEQ,
                )
            };
            NonNull::new(raw).unwrap_or_else(|| {
                panic!("rte_ring_create({name}): {}", sys::strerror(sys::errno()))
            })
        };
        let to_host = ring(format!("{tag}_th"));
        let to_switch = ring(format!("{tag}_ts"));
        for (side, rx, tx) in [("sw", to_switch, to_host), ("host", to_host, to_switch)] {
            let name = CString::new(format!("{tag}_{side}")).expect("no NUL");
            let rx_rings = [rx.as_ptr()];
            let tx_rings = [tx.as_ptr()];
            // SAFETY: each array holds one live ring and outlives the call; the rings outlive
            // the port (see the type's docs).
            let id = unsafe {
                sys::rte_eth_from_rings(
                    name.as_ptr(),
                    rx_rings.as_ptr(),
                    1,
                    tx_rings.as_ptr(),
                    1,
                    0,
                )
            };
            assert!(
                id >= 0,
                "rte_eth_from_rings: {}",
                sys::strerror(sys::errno())
            );
        }
        Self {
            rings: [to_host, to_switch],
            switch_end: format!("net_ring_{tag}_sw"),
            host_end: format!("net_ring_{tag}_host"),
        }
    }
}

impl Drop for Cable {
    fn drop(&mut self) {
        for ring in self.rings {
            // SAFETY: the ports on these rings are closed (dropped before the cable); nothing
            // else refers to the rings.
            unsafe { sys::rte_ring_free(ring.as_ptr()) };
        }
    }
}

/// Polls a DPDK queue until `want` frames arrived or [`DEADLINE`] passed; returns their bytes.
pub fn dpdk_receive(rx: &mut DpdkRxQueue, want: usize) -> Vec<Vec<u8>> {
    let end = Instant::now() + DEADLINE;
    let mut burst = Vec::with_capacity(BURST_MAX);
    let mut got = Vec::new();
    while got.len() < want && Instant::now() < end {
        if rx.rx_burst(&mut burst, BURST_MAX) == 0 {
            std::thread::yield_now();
        }
        got.extend(burst.drain(..).map(|f| f.data().to_vec()));
    }
    got
}

/// Everything a DPDK queue holds right now (drains it).
pub fn dpdk_drain(rx: &mut DpdkRxQueue) -> Vec<Vec<u8>> {
    let mut burst = Vec::with_capacity(BURST_MAX);
    let mut got = Vec::new();
    while rx.rx_burst(&mut burst, BURST_MAX) > 0 {
        got.extend(burst.drain(..).map(|f| f.data().to_vec()));
    }
    got
}

fn run(program: &str, args: &[&str]) {
    let output = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{program}` (apt install iproute2): {e}"));
    assert!(
        output.status.success(),
        "{program} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A switch namespace holding the switch ends `sw0`..`sw{n-1}` and one namespace per host
/// holding `eth0`, the far end of its `sw{i}`. IPv6 off everywhere (no router or neighbour
/// solicitations on the links), no addresses, links up. Deleted on drop.
///
/// Needs root and iproute2: without them it panics with a message saying so (the tests fail,
/// they are never skipped).
pub struct Topology {
    /// The switch's namespace.
    pub switch_ns: String,
    /// The hosts' namespaces, in port order.
    pub host_ns: Vec<String>,
}

impl Topology {
    /// A topology `hr<tag>-<pid>-*` with `hosts` hosts.
    pub fn create(tag: &str, hosts: usize) -> Self {
        let uid = Command::new("id").arg("-u").output().expect("id -u");
        assert_eq!(
            String::from_utf8_lossy(&uid.stdout).trim(),
            "0",
            "this test needs root: it creates network namespaces and veth pairs, and DPDK's \
             net_af_packet/net_af_xdp need CAP_NET_RAW and CAP_NET_ADMIN. Run it as root \
             (scripts/test.sh does); it is not skipped"
        );
        let pid = std::process::id();
        let topology = Self {
            switch_ns: format!("hr{tag}-{pid}-sw"),
            host_ns: (0..hosts).map(|i| format!("hr{tag}-{pid}-h{i}")).collect(),
        };
        run("ip", &["netns", "add", &topology.switch_ns]);
        for ns in &topology.host_ns {
            run("ip", &["netns", "add", ns]);
        }
        for ns in std::iter::once(&topology.switch_ns).chain(&topology.host_ns) {
            sysctl(ns, "net/ipv6/conf/all/disable_ipv6", "1");
            sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1");
        }
        for (i, ns) in topology.host_ns.iter().enumerate() {
            let sw = format!("sw{i}");
            run(
                "ip",
                &[
                    "-n",
                    &topology.switch_ns,
                    "link",
                    "add",
                    &sw,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    "eth0",
                    "netns",
                    ns,
                ],
            );
            run("ip", &["-n", &topology.switch_ns, "link", "set", &sw, "up"]);
            run("ip", &["-n", ns, "link", "set", "eth0", "up"]);
        }
        topology
    }

    /// The switch ends, in port order.
    pub fn switch_ifaces(&self) -> Vec<String> {
        (0..self.host_ns.len()).map(|i| format!("sw{i}")).collect()
    }

    /// Moves the calling thread into the switch's namespace until the guard is dropped.
    pub fn enter_switch(&self) -> NetnsGuard {
        NetnsGuard::enter(&self.switch_ns).expect("entering the switch namespace")
    }

    /// Opens host `i`'s `eth0` (AF_PACKET, independent of the backend under test).
    pub fn host(&self, i: usize) -> Host {
        let _inside = NetnsGuard::enter(&self.host_ns[i]).expect("entering a host namespace");
        let pool = FramePool::new(PoolConfig::with_frame_count(4096)).expect("pool");
        let port = AfPacketPort::open("eth0", pool, &AfPacketConfig::default())
            .unwrap_or_else(|e| panic!("opening eth0 of host {i}: {e}"));
        let (rx, tx) = port.split();
        Host { rx, tx }
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth ends in it, and with them their peers.
        for ns in std::iter::once(&self.switch_ns).chain(&self.host_ns) {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

fn sysctl(ns: &str, key: &str, value: &str) {
    // A scoped thread, so that the caller's thread never changes namespace.
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let _inside = NetnsGuard::enter(ns).expect("entering a namespace");
                std::fs::write(format!("/proc/sys/{key}"), value)
                    .unwrap_or_else(|e| panic!("{ns}: {key}: {e}"));
            })
            .join()
            .expect("sysctl thread");
    });
}

/// A host's end of the wire.
pub struct Host {
    rx: AfPacketRx,
    tx: AfPacketTx,
}

impl Host {
    /// Sends one frame.
    pub fn send(&mut self, bytes: &[u8]) {
        let mut frame = self.tx.alloc_frame(bytes.len()).expect("a host buffer");
        frame.data_mut().copy_from_slice(bytes);
        let mut frames = vec![frame];
        let end = Instant::now() + DEADLINE;
        while !frames.is_empty() {
            self.tx.tx_burst(&mut frames);
            self.tx.flush();
            assert!(
                Instant::now() < end,
                "the host socket would not take a frame"
            );
        }
    }

    /// Receives until `want` frames matching `keep` arrived or [`DEADLINE`] passed.
    pub fn receive(&mut self, want: usize, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        let end = Instant::now() + DEADLINE;
        let mut burst = Vec::with_capacity(BURST_MAX);
        let mut got = Vec::new();
        while got.len() < want && Instant::now() < end {
            if self.rx.rx_burst(&mut burst, BURST_MAX) == 0 {
                let _ = self.rx.wait_readable(Duration::from_millis(10));
            }
            got.extend(
                burst
                    .drain(..)
                    .map(|f| f.data().to_vec())
                    .filter(|f| keep(f)),
            );
        }
        got
    }

    /// Whatever arrived so far (drains the socket).
    pub fn drain(&mut self) -> Vec<Vec<u8>> {
        let mut burst = Vec::with_capacity(BURST_MAX);
        let mut got = Vec::new();
        while self.rx.rx_burst(&mut burst, BURST_MAX) > 0 {
            got.extend(burst.drain(..).map(|f| f.data().to_vec()));
        }
        got
    }
}

pub mod e2e;
