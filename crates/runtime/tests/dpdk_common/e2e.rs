//! End-to-end checks of the switch on DPDK vdevs attached to veths: hosts in their own network
//! namespaces send and capture raw frames through AF_PACKET sockets (independent of DPDK), the
//! switch runs in its namespace on `net_af_packet`/`net_af_xdp` ports, configured from TOML
//! exactly as `headroom lab --driver dpdk` would (`lab_eal_args`).
//!
//! Scenarios, each on a fresh dataplane over the same backend (its ports stay open across the
//! restarts):
//! - forward and learn;
//! - PFC out: a lossless flow into a port that does not transmit makes the switch send XOFF
//!   (exact IEEE 802.1Qbb bytes) out of the source's port; when the port transmits again every
//!   frame arrives in order (none lost) and XON follows;
//! - PFC in: a received XOFF pauses only the paused priority's queue (lossy traffic passes),
//!   XON releases the held frames;
//! - ECN: ECT frames through a congested queue are CE-marked with valid IPv4 checksums, Not-ECT
//!   frames never are, none is lost, and the switch's marking counter agrees;
//! - bad input: multicast-source, malformed MAC Control and double/wrongly tagged frames are
//!   counted per reason and dropped, a truncated IPv4 header is forwarded as non-IP, and the
//!   switch keeps forwarding;
//! - after the last stop, closing the ports gives every mbuf back (for af_xdp: all but the fill
//!   rings the PMD keeps).

use super::{
    host_mac, ipv4_checksum_ok, is_mac_control, pfc_frame, udp_frame, udp_seq, Host, Topology,
};
use headroom_core::counters::DropReason;
use headroom_core::stats::PortStats;
use headroom_core::time::Instant as CoreInstant;
use headroom_core::types::PortId;
use headroom_dpdk::lab::{lab_eal_args, lab_mempool_mbufs, LabVdev};
use headroom_dpdk::DpdkBackend;
use headroom_runtime::backends::dpdk_settings;
use headroom_runtime::{start, Running, RuntimeSpec};

const HOSTS: usize = 3;
/// Port 2's speed: slow, so that a queue builds behind it (ECN) and a PFC pause of 0xFFFF
/// quanta lasts 65535 × 512 bits / 10 Mb/s = 3.36 s, long enough to observe.
const SLOW_PORT: usize = 2;
const A: u8 = 0;
const B: u8 = 1;
const C: u8 = 2;
/// DSCP 3 → TC 3 (lossless, PFC priority 3) and DSCP 8 → TC 0 (lossy) in SONiC's AZURE map.
const DSCP_LOSSLESS: u8 = 3;
const DSCP_LOSSY: u8 = 8;

fn config_toml(vdev: LabVdev, topology: &Topology) -> String {
    let ifaces = topology.switch_ifaces();
    let iface_refs: Vec<&str> = ifaces.iter().map(String::as_str).collect();
    let prefix = format!("{}-dpdk", topology.switch_ns);
    let mut eal = lab_eal_args(&iface_refs, vdev, &prefix, 0);
    eal.push("--no-shconf".to_owned());
    let eal = eal
        .iter()
        .map(|a| format!("{a:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mbufs = lab_mempool_mbufs(vdev, HOSTS);
    let ports: String = (0..HOSTS)
        .map(|i| {
            let speed = if i == SLOW_PORT {
                "\nspeed = \"10M\""
            } else {
                ""
            };
            format!(
                "\n[port.Ethernet{i}]\ndevice = {:?}{speed}\n",
                vdev.device_name(i)
            )
        })
        .collect();
    format!(
        r#"
[switch]
name = "e2e"
driver = "dpdk"
log_level = "warn"

[dpdk]
eal_args = [{eal}]
mempool_mbufs = {mbufs}
mempool_cache_size = 256

[port_defaults]
speed = "1G"
cable_length = "5m"
mtu = 1500
trust = "dscp"
pfc_enable = [3, 4]

# The watchdog would call the long pause of the PFC-in scenario a storm.
[port_defaults.pfcwd]
enabled = false

# Mark early: every ECT frame above 6000 bytes of queue.
[wred_profile.E2E]
ecn = "ecn_all"
wred_green_enable = false
green_min_threshold = 3000
green_max_threshold = 6000
green_drop_probability = 100

[port_defaults.queue."3-4"]
wred_profile = "E2E"
{ports}
[runtime]
polling = "adaptive"
burst_size = 32

[[runtime.lcore]]
cpu = 1
rx_ports = ["Ethernet0", "Ethernet1", "Ethernet2"]
tx_ports = ["Ethernet0", "Ethernet1", "Ethernet2"]
"#
    )
}

fn stats(running: &Running, port: usize) -> PortStats {
    running
        .shared()
        .port_stats(PortId(port as u16), CoreInstant::MAX)
}

/// Host `from` announces itself with a broadcast; every other host receives it.
fn announce(hosts: &mut [Host], from: u8) {
    let hello = udp_frame(
        host_mac(from),
        [0xff; 6],
        0,
        0,
        0xffff_0000 | u32::from(from),
        60,
    );
    hosts[usize::from(from)].send(&hello);
    for (i, host) in hosts.iter_mut().enumerate() {
        if i != usize::from(from) {
            assert_eq!(
                host.receive(1, |f| f == hello.as_slice()),
                vec![hello.clone()],
                "host {i} receives host {from}'s broadcast"
            );
        }
    }
}

fn frames_of(frames: &[Vec<u8>], src: u8) -> Vec<u32> {
    frames
        .iter()
        .filter(|f| f.len() >= 12 && f[6..12] == host_mac(src))
        .filter_map(|f| udp_seq(f))
        .collect()
}

/// Asserts `got` is exactly `want`, printing only the counts and the first difference.
fn assert_seqs(got: &[u32], want: std::ops::Range<u32>, what: &str) {
    let want: Vec<u32> = want.collect();
    if got != want.as_slice() {
        let first = got.iter().zip(&want).position(|(g, w)| g != w);
        panic!(
            "{what}: got {} frames, want {}; first difference at index {first:?}; last got {:?}",
            got.len(),
            want.len(),
            got.last()
        );
    }
}

/// Runs every scenario on `vdev` ports; panics on the first failure.
pub fn run(vdev: LabVdev, tag: &str) {
    let topology = Topology::create(tag, HOSTS);
    // EAL opens the vdevs' interfaces, and the PMDs set promiscuous mode, in the namespace of
    // the calling thread: this thread lives in the switch's namespace (as `ip netns exec` would
    // put `headroom run`) until the end.
    let _in_switch = topology.enter_switch();
    let (config, warnings) = headroom_config::parse(&config_toml(vdev, &topology), "e2e.toml")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(warnings.is_empty(), "{warnings:?}");
    let mut backend = DpdkBackend::new(dpdk_settings(&config).unwrap_or_else(|e| panic!("{e}")))
        .unwrap_or_else(|e| panic!("{e}"));
    // The backend turned the switch ends' offloads off before EAL opened them (a child process
    // forked from this thread runs in the switch's namespace too).
    for iface in topology.switch_ifaces() {
        let out = std::process::Command::new("ethtool")
            .args(["-k", &iface])
            .output()
            .expect("ethtool (apt install ethtool)");
        let text = String::from_utf8_lossy(&out.stdout);
        for feature in [
            "generic-segmentation-offload: off",
            "generic-receive-offload: off",
            "tx-checksumming: off",
        ] {
            assert!(text.contains(feature), "{iface}: want {feature}:\n{text}");
        }
    }
    let mut hosts: Vec<Host> = (0..HOSTS).map(|i| topology.host(i)).collect();
    let start_dataplane = |backend: &mut DpdkBackend, config: &headroom_config::Config| {
        backend
            .reconfigure(dpdk_settings(config).unwrap_or_else(|e| panic!("{e}")))
            .unwrap_or_else(|e| panic!("{e}"));
        start(RuntimeSpec::for_config(config).expect("spec"), backend)
            .unwrap_or_else(|e| panic!("{e}"))
    };

    // --- forward and learn ------------------------------------------------------------------
    let running = start_dataplane(&mut backend, &config);
    for port in backend.ports() {
        let status = port.1.status();
        assert!(
            status.link.is_some_and(|l| l.up),
            "{}: link up: {status:?}",
            port.0
        );
    }
    announce(&mut hosts, C);
    announce(&mut hosts, A);
    let to_c = udp_frame(host_mac(A), host_mac(C), DSCP_LOSSY, 0, 1, 200);
    hosts[usize::from(A)].send(&to_c);
    assert_eq!(
        hosts[usize::from(C)].receive(1, |f| f == to_c.as_slice()),
        vec![to_c.clone()]
    );
    let back = udp_frame(host_mac(C), host_mac(A), DSCP_LOSSY, 0, 2, 200);
    hosts[usize::from(C)].send(&back);
    assert_eq!(
        hosts[usize::from(A)].receive(1, |f| f == back.as_slice()),
        vec![back]
    );
    // Both unicast frames were learned, not flooded: B saw neither (the second arrived after
    // the first was handled, on the same lcore).
    assert_eq!(
        frames_of(&hosts[usize::from(B)].drain(), A),
        Vec::<u32>::new()
    );
    assert_eq!(
        frames_of(&hosts[usize::from(B)].drain(), C),
        Vec::<u32>::new()
    );
    drop(running.stop());

    pfc_out(&mut backend, &config, &mut hosts, start_dataplane);
    pfc_in(&mut backend, &config, &mut hosts, start_dataplane);
    ecn(&mut backend, &config, &mut hosts, start_dataplane);
    bad_input(&mut backend, &config, &mut hosts, start_dataplane);

    let check = backend.close_ports();
    match vdev {
        LabVdev::AfPacket => assert!(check.is_full(), "every mbuf back: {check:?}"),
        LabVdev::AfXdp => assert!(
            check.is_full_but_af_xdp(),
            "every mbuf back but the af_xdp fill rings: {check:?}"
        ),
    }
    drop(backend);
    drop(hosts);
}

fn pfc_out(
    backend: &mut DpdkBackend,
    config: &headroom_config::Config,
    hosts: &mut [Host],
    start_dataplane: impl Fn(&mut DpdkBackend, &headroom_config::Config) -> Running,
) {
    let mut config = config.clone();
    config.ports[SLOW_PORT].tx_enable = false;
    let running = start_dataplane(backend, &config);
    // C's hello is flooded and learned, but port 2 does not transmit: A sees it, and A's
    // lossless frames to C queue on port 2 until port 0's PG 3 crosses XOFF.
    let hello = udp_frame(host_mac(C), [0xff; 6], 0, 0, 7, 60);
    hosts[usize::from(C)].send(&hello);
    assert_eq!(
        hosts[usize::from(A)]
            .receive(1, |f| f == hello.as_slice())
            .len(),
        1
    );
    // Like a well-behaved sender, stop as soon as the switch has gone XOFF: send one frame at a
    // time and wait until the switch has taken it. (A host that kept sending until it saw the
    // PFC frame would overrun the PG's headroom by what it sends in that round trip.)
    let mut sent = 0u32;
    while stats(&running, 0).pgs[3].xoff_transitions == 0 {
        assert!(sent < 20_000, "no XOFF after {sent} lossless frames");
        hosts[usize::from(A)].send(&udp_frame(
            host_mac(A),
            host_mac(C),
            DSCP_LOSSLESS,
            0,
            sent,
            1000,
        ));
        sent += 1;
        let want = u64::from(sent);
        assert!(
            super::eventually(|| stats(&running, 0).rx_frames >= want),
            "the switch took frame {sent}"
        );
    }
    let pfc = hosts[usize::from(A)].receive(1, is_mac_control);
    let mac0 = config.ports[0].mac;
    let mut xoff_times = [0u16; 8];
    xoff_times[3] = config.ports[0].pfc_quanta;
    let xoff = pfc_frame(mac0, 0b1000, xoff_times);
    assert_eq!(
        pfc[0], xoff,
        "PFC XOFF for priority 3 out of port 0 (802.1Qbb bytes)"
    );
    let pg = stats(&running, 0).pgs[3];
    assert!(pg.xoff_transitions >= 1, "{pg:?}");

    running
        .shared()
        .set_tx_enable(PortId(SLOW_PORT as u16), true);
    let delivered = hosts[usize::from(C)].receive(sent as usize, |f| f[6..12] == host_mac(A));
    assert_seqs(
        &frames_of(&delivered, A),
        0..sent,
        "every lossless frame arrives, in order, none lost",
    );
    let xon = pfc_frame(mac0, 0b1000, [0; 8]);
    let later = hosts[usize::from(A)].receive(1, |f| f == xon.as_slice());
    assert_eq!(later, vec![xon.clone()], "XON once the PG drained");
    let shared = running.stop();
    let s = shared.port_stats(PortId(0), CoreInstant::MAX);
    assert!(
        s.pfc_tx[3] >= 2 && s.drops.iter().sum::<u64>() == 0,
        "{s:?}"
    );
    // Every PFC frame that reached A was that XOFF (refreshed while paused) or the XON.
    for f in hosts[usize::from(A)]
        .drain()
        .into_iter()
        .filter(|f| is_mac_control(f))
    {
        assert!(
            f == xoff || f == xon,
            "unexpected MAC Control frame {f:02x?}"
        );
    }
}

fn pfc_in(
    backend: &mut DpdkBackend,
    config: &headroom_config::Config,
    hosts: &mut [Host],
    start_dataplane: impl Fn(&mut DpdkBackend, &headroom_config::Config) -> Running,
) {
    let running = start_dataplane(backend, config);
    announce(hosts, C);
    announce(hosts, A);
    // C pauses priority 3 for 0xFFFF quanta (3.36 s at 10 Mb/s) with a PFC frame of its own.
    let mut times = [0u16; 8];
    times[3] = 0xFFFF;
    hosts[usize::from(C)].send(&pfc_frame(host_mac(C), 0b1000, times));
    assert!(
        super::eventually(|| stats(&running, SLOW_PORT).pfc_rx[3] == 1),
        "the switch counted the XOFF"
    );
    // Lossless frames first, then lossy: the lossy ones pass the paused queue.
    for seq in 0..5 {
        hosts[usize::from(A)].send(&udp_frame(
            host_mac(A),
            host_mac(C),
            DSCP_LOSSLESS,
            0,
            seq,
            200,
        ));
    }
    for seq in 100..105 {
        hosts[usize::from(A)].send(&udp_frame(
            host_mac(A),
            host_mac(C),
            DSCP_LOSSY,
            0,
            seq,
            200,
        ));
    }
    let passed = hosts[usize::from(C)].receive(5, |f| f[6..12] == host_mac(A));
    assert_eq!(
        frames_of(&passed, A),
        (100..105).collect::<Vec<_>>(),
        "lossy frames pass"
    );
    assert_eq!(
        frames_of(&hosts[usize::from(C)].drain(), A),
        Vec::<u32>::new(),
        "lossless frames are held while priority 3 is paused"
    );
    // XON (quanta 0) releases them.
    hosts[usize::from(C)].send(&pfc_frame(host_mac(C), 0b1000, [0; 8]));
    let released = hosts[usize::from(C)].receive(5, |f| f[6..12] == host_mac(A));
    assert_eq!(
        frames_of(&released, A),
        (0..5).collect::<Vec<_>>(),
        "released by XON"
    );
    let shared = running.stop();
    let s = shared.port_stats(PortId(SLOW_PORT as u16), CoreInstant::MAX);
    assert_eq!(s.pfc_rx[3], 2, "XOFF and XON counted");
    assert!(s.paused_ns[3] > 0, "pause time accounted");
}

fn ecn(
    backend: &mut DpdkBackend,
    config: &headroom_config::Config,
    hosts: &mut [Host],
    start_dataplane: impl Fn(&mut DpdkBackend, &headroom_config::Config) -> Running,
) {
    let running = start_dataplane(backend, config);
    announce(hosts, C);
    const FRAMES: u32 = 60;
    // Alternating ECT(0) and Not-ECT lossless frames, as fast as the host sends: port 2 drains
    // 1000 bytes per 0.8 ms, so its queue 3 grows far beyond the 6000-byte marking point.
    for seq in 0..FRAMES {
        let ecn = if seq.is_multiple_of(2) { 0b10 } else { 0b00 };
        hosts[usize::from(A)].send(&udp_frame(
            host_mac(A),
            host_mac(C),
            DSCP_LOSSLESS,
            ecn,
            seq,
            1000,
        ));
    }
    let got = hosts[usize::from(C)].receive(FRAMES as usize, |f| f[6..12] == host_mac(A));
    assert_eq!(
        frames_of(&got, A),
        (0..FRAMES).collect::<Vec<_>>(),
        "none lost, in order"
    );
    let mut marked = 0u64;
    for f in &got {
        let seq = udp_seq(f).expect("a test frame");
        let ecn = f[15] & 0b11;
        assert!(
            ipv4_checksum_ok(f),
            "frame {seq}: IPv4 checksum still valid (RFC 1624)"
        );
        assert_eq!(f[15] >> 2, DSCP_LOSSLESS, "frame {seq}: DSCP kept");
        if seq.is_multiple_of(2) {
            assert!(
                ecn == 0b10 || ecn == 0b11,
                "frame {seq}: ECT(0) or CE, got {ecn:02b}"
            );
            marked += u64::from(ecn == 0b11);
        } else {
            assert_eq!(ecn, 0, "frame {seq}: a Not-ECT frame is never marked");
        }
        assert_eq!(
            &f[16..],
            &udp_frame(host_mac(A), host_mac(C), DSCP_LOSSLESS, ecn, seq, 1000)[16..],
            "frame {seq}: nothing else changed"
        );
    }
    assert!(
        marked >= u64::from(FRAMES / 4),
        "most ECT frames crossed a queue above 6000 bytes: {marked} of {} marked",
        FRAMES / 2
    );
    let shared = running.stop();
    let s = shared.port_stats(PortId(SLOW_PORT as u16), CoreInstant::MAX);
    assert_eq!(
        s.queues[3].ecn_marked, marked,
        "the switch counted what it marked"
    );
}

fn bad_input(
    backend: &mut DpdkBackend,
    config: &headroom_config::Config,
    hosts: &mut [Host],
    start_dataplane: impl Fn(&mut DpdkBackend, &headroom_config::Config) -> Running,
) {
    let running = start_dataplane(backend, config);
    announce(hosts, A);
    let b = usize::from(B);
    let good = udp_frame(host_mac(B), host_mac(A), DSCP_LOSSY, 0, 9, 100);
    // An IPv4 EtherType with half an IPv4 header: not droppable (it is a valid Ethernet
    // frame), classified as non-IP and forwarded unchanged. (Frames shorter than their
    // Ethernet header or announced tag, the core's "runt" drops, never cross a veth: the
    // kernel drops them first. The core's own tests cover them.)
    let mut truncated_ipv4 = good[..24].to_vec();
    truncated_ipv4[14] = 0x45;
    // A multicast source address (IEEE 802.1Q 8.7.1: never learned, never forwarded).
    let mut multicast_source = good.clone();
    multicast_source[6] |= 0x01;
    // A PFC frame cut short after its opcode.
    let truncated_pfc = pfc_frame(host_mac(B), 0b1000, [0xFFFF; 8])[..16].to_vec();
    // A PFC frame to a unicast destination (802.1Qbb: only 01-80-C2-00-00-01).
    let mut unicast_pfc = pfc_frame(host_mac(B), 0b1000, [0xFFFF; 8]);
    unicast_pfc[..6].copy_from_slice(&host_mac(A));
    // Two tags (QinQ) and a tag of a VLAN the access port is not in.
    let tag = |tpid: [u8; 2], vid: u8| [tpid[0], tpid[1], 0x00, vid];
    let mut double_tagged = good[..12].to_vec();
    double_tagged.extend_from_slice(&tag([0x88, 0xa8], 10));
    double_tagged.extend_from_slice(&tag([0x81, 0x00], 20));
    double_tagged.extend_from_slice(&good[12..]);
    let mut other_vlan = good[..12].to_vec();
    other_vlan.extend_from_slice(&tag([0x81, 0x00], 100));
    other_vlan.extend_from_slice(&good[12..]);
    for bad in [
        &multicast_source,
        &truncated_pfc,
        &unicast_pfc,
        &double_tagged,
        &other_vlan,
    ] {
        hosts[b].send(bad);
    }
    hosts[b].send(&truncated_ipv4);
    hosts[b].send(&good);
    assert_eq!(
        hosts[usize::from(A)].receive(2, |f| f.len() >= 12 && f[6..12] == host_mac(B)),
        vec![truncated_ipv4, good.clone()],
        "the truncated IPv4 frame is forwarded unchanged, and the switch still forwards"
    );
    let s = stats(&running, b);
    let drops = |r: DropReason| s.drops[r.index()];
    assert_eq!(drops(DropReason::SourceMulticast), 1, "{:?}", s.drops);
    assert_eq!(drops(DropReason::MacControlMalformed), 2, "{:?}", s.drops);
    assert_eq!(drops(DropReason::VlanFiltered), 2, "{:?}", s.drops);
    assert_eq!(s.drops.iter().sum::<u64>(), 5, "nothing else dropped");
    assert_eq!(s.rx_frames, 7);
    assert_eq!(
        s.pfc_rx.iter().sum::<u64>(),
        0,
        "malformed PFC is not honoured"
    );
    // None of them reached another host.
    for h in [A, C] {
        let leaked: Vec<_> = hosts[usize::from(h)]
            .drain()
            .into_iter()
            .filter(|f| f.len() >= 12 && f[6..12] == host_mac(B) || is_mac_control(f))
            .collect();
        assert!(leaked.is_empty(), "host {h} got {leaked:02x?}");
    }
    drop(running.stop());
}
