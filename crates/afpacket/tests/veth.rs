//! The AF_PACKET backend against real kernel veth pairs, each test in its own network namespace.
//!
//! These tests need root and iproute2 and fail (never skip) without them. The far end of the
//! pair is driven by a plain packet socket ([`common::RawSocket`]) unless a test says otherwise.

mod common;

use std::time::{Duration, Instant};

use common::{bytes_of, eventually, lab, open, pool, receive, tagged_frame, test_frame, RawSocket};
use headroom_afpacket::lab::VethLab;
use headroom_afpacket::offload::{disable_offloads, is_offload_feature};
use headroom_afpacket::{AfPacketConfig, AfPacketError, AfPacketPort, RingVersion};
use headroom_core::frame::Frame;
use headroom_io::{FramePool, PoolConfig, RxQueue, TxQueue, BURST_MAX};

/// Both receive ring layouts; tests of the receive path run once with each.
const RING_VERSIONS: [RingVersion; 2] = [RingVersion::V2, RingVersion::V3];

fn config(ring_version: RingVersion) -> AfPacketConfig {
    AfPacketConfig {
        ring_version,
        ..AfPacketConfig::default()
    }
}

/// Defines a `#[test]` running `body(version)` for each ring version.
macro_rules! for_each_ring_version {
    ($name:ident, $body:ident) => {
        #[test]
        fn $name() {
            for version in RING_VERSIONS {
                eprintln!("ring version {version:?}");
                $body(version);
            }
        }
    };
}

#[test]
fn port_info_reports_the_interface_mac_and_mtu() {
    let lab = lab();
    lab.ip(&[
        "link",
        "set",
        VethLab::SWITCH_END,
        "address",
        "02:11:22:33:44:55",
    ])
    .expect("mac");
    lab.ip(&["link", "set", VethLab::SWITCH_END, "mtu", "1600"])
        .expect("mtu");
    let port = open(
        &lab,
        VethLab::SWITCH_END,
        pool(8),
        &AfPacketConfig::default(),
    );
    assert_eq!(port.info().name, VethLab::SWITCH_END);
    assert_eq!(port.info().mac, [0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    assert_eq!(port.info().max_frame_len, 1600 + 14 + 4);
}

#[test]
fn missing_and_non_ethernet_interfaces_are_typed_errors() {
    let lab = lab();
    let _inside = lab.enter().expect("enter");
    let config = AfPacketConfig::default();
    let missing = AfPacketPort::open("nope0", pool(1), &config).expect_err("no such interface");
    assert!(matches!(missing, AfPacketError::NoSuchInterface(ref name) if name == "nope0"));
    let loopback = AfPacketPort::open("lo", pool(1), &config).expect_err("loopback");
    assert!(
        matches!(
            loopback,
            AfPacketError::NotEthernet {
                hardware_type: 772,
                ..
            }
        ),
        "{loopback}"
    );
}

#[test]
fn the_lab_namespace_has_ipv6_off() {
    // The other tests rely on a silent link: no router solicitations or MLD reports.
    let lab = lab();
    let value = lab
        .exec("cat", &["/proc/sys/net/ipv6/conf/host0/disable_ipv6"])
        .expect("cat");
    assert_eq!(value.trim(), "1");
}

for_each_ring_version!(
    received_frames_are_byte_identical_in_order_and_in_bursts,
    check_received_frames_are_byte_identical_in_order_and_in_bursts
);
fn check_received_frames_are_byte_identical_in_order_and_in_bursts(version: RingVersion) {
    let lab = lab();
    let port = open(&lab, VethLab::SWITCH_END, pool(512), &config(version));
    let stats = port.stats_handle();
    let (mut rx, _tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let sent: Vec<Vec<u8>> = (0..200u32)
        .map(|seq| test_frame(seq, 60 + (seq as usize * 37) % 1455))
        .collect();
    for frame in &sent {
        host.send(frame);
    }
    let (received, largest_burst) = receive(&mut rx, sent.len());
    assert_eq!(bytes_of(&received), sent);
    assert!(
        largest_burst > 1,
        "frames sent back to back should arrive in bursts"
    );
    assert!(largest_burst <= BURST_MAX);

    let stats = stats.stats();
    assert_eq!(stats.rx_frames, 200);
    assert_eq!(
        stats.rx_bytes,
        sent.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(
        stats.rx_kernel_drops + stats.rx_oversize + stats.rx_no_buffer,
        0
    );
}

for_each_ring_version!(
    an_idle_port_returns_at_once_and_wait_readable_wakes_on_traffic,
    check_an_idle_port_returns_at_once_and_wait_readable_wakes_on_traffic
);
fn check_an_idle_port_returns_at_once_and_wait_readable_wakes_on_traffic(version: RingVersion) {
    let lab = lab();
    let (mut rx, _tx) = open(&lab, VethLab::SWITCH_END, pool(8), &config(version)).split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);
    let mut frames = Vec::new();

    let started = Instant::now();
    assert_eq!(rx.rx_burst(&mut frames, BURST_MAX), 0);
    assert!(!rx.wait_readable(Duration::from_millis(10)).expect("poll"));
    // Generous bound: this only catches a call that blocks until traffic comes.
    assert!(started.elapsed() < Duration::from_secs(2));

    host.send(&test_frame(1, 64));
    assert!(
        rx.wait_readable(common::DEADLINE).expect("poll"),
        "woken by the frame"
    );
    assert_eq!(rx.rx_burst(&mut frames, BURST_MAX), 1);
    assert_eq!(frames[0].data(), test_frame(1, 64));
}

fn transmit_and_check_no_echo(config: &AfPacketConfig) {
    let lab = lab();
    let pool = pool(256);
    let port = open(&lab, VethLab::SWITCH_END, pool.clone(), config);
    let stats = port.stats_handle();
    let (mut rx, mut tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let sent: Vec<Vec<u8>> = (0..50u32)
        .map(|seq| test_frame(seq, 64 + seq as usize * 20))
        .collect();
    let mut frames: Vec<_> = sent
        .iter()
        .map(|b| pool.alloc_copy(b).expect("buffer"))
        .collect();
    assert!(eventually(|| {
        tx.tx_burst(&mut frames);
        frames.is_empty()
    }));
    for expected in &sent {
        assert_eq!(
            host.receive().as_ref(),
            Some(expected),
            "the peer receives what we sent"
        );
    }

    // The switch's own frames would be in its ring before anything the peer sends afterwards,
    // so receiving the marker first proves they were not received back.
    let marker = test_frame(0xFFFF_FFFF, 60);
    host.send(&marker);
    let (received, _) = receive(&mut rx, 1);
    assert_eq!(bytes_of(&received), vec![marker]);
    let stats = stats.stats();
    assert_eq!(stats.tx_frames, 50);
    assert_eq!(
        stats.tx_bytes,
        sent.iter().map(|f| f.len() as u64).sum::<u64>()
    );
    assert_eq!(stats.rx_frames, 1);
    assert_eq!(
        pool.stats().available,
        256 - 1,
        "sent frames went back to the pool"
    );
}

#[test]
fn transmitted_frames_reach_the_peer_and_are_not_received_back() {
    for version in RING_VERSIONS {
        transmit_and_check_no_echo(&config(version));
    }
}

#[test]
fn without_qdisc_bypass_own_frames_are_still_not_received_back() {
    // Through the qdisc path the kernel shows outgoing frames to packet taps; only
    // PACKET_IGNORE_OUTGOING / the PACKET_OUTGOING check keep them out of the ring.
    for version in RING_VERSIONS {
        transmit_and_check_no_echo(&AfPacketConfig {
            qdisc_bypass: false,
            ..config(version)
        });
    }
}

for_each_ring_version!(
    tagged_frames_keep_their_tag,
    check_tagged_frames_keep_their_tag
);
fn check_tagged_frames_keep_their_tag(version: RingVersion) {
    let lab = lab();
    let (mut rx, _tx) = open(&lab, VethLab::SWITCH_END, pool(64), &config(version)).split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let customer_tagged = tagged_frame(1, 128, 0x8100, 3, 100);
    let priority_tagged = tagged_frame(2, 64, 0x8100, 5, 0);
    let mut double_tagged = tagged_frame(3, 100, 0x8100, 1, 300);
    double_tagged.splice(12..12, [0x88, 0xA8, 0x00, 0xC8]); // 802.1ad S-tag, VID 200
    let untagged = test_frame(4, 80);
    let sent = vec![customer_tagged, priority_tagged, double_tagged, untagged];
    for frame in &sent {
        host.send(frame);
    }
    let (received, _) = receive(&mut rx, sent.len());
    assert_eq!(bytes_of(&received), sent);

    let parsed = etherparse::SlicedPacket::from_ethernet(received[0].data()).expect("parse");
    let Some(etherparse::VlanSlice::SingleVlan(vlan)) = parsed.vlan else {
        panic!("expected one 802.1Q tag, got {:?}", parsed.vlan);
    };
    assert_eq!(
        (
            vlan.priority_code_point().value(),
            vlan.vlan_identifier().value()
        ),
        (3, 100)
    );
}

for_each_ring_version!(
    tagged_frames_sent_by_the_switch_arrive_tagged,
    check_tagged_frames_sent_by_the_switch_arrive_tagged
);
fn check_tagged_frames_sent_by_the_switch_arrive_tagged(version: RingVersion) {
    let lab = lab();
    let pool = pool(64);
    let (_switch_rx, mut switch_tx) =
        open(&lab, VethLab::SWITCH_END, pool.clone(), &config(version)).split();
    // The far end uses a second backend instance: a plain socket would see the tag stripped.
    let (mut host_rx, _host_tx) =
        open(&lab, VethLab::HOST_END, pool.clone(), &config(version)).split();

    let sent = vec![
        tagged_frame(7, 1518, 0x8100, 3, 4094),
        tagged_frame(8, 64, 0x88A8, 0, 5),
    ];
    let mut frames: Vec<_> = sent
        .iter()
        .map(|b| pool.alloc_copy(b).expect("buffer"))
        .collect();
    assert_eq!(switch_tx.tx_burst(&mut frames), 2);
    let (received, _) = receive(&mut host_rx, 2);
    assert_eq!(bytes_of(&received), sent);
}

for_each_ring_version!(
    oversize_frames_are_counted_and_dropped,
    check_oversize_frames_are_counted_and_dropped
);
fn check_oversize_frames_are_counted_and_dropped(version: RingVersion) {
    let lab = lab();
    let small_pool = FramePool::new(PoolConfig {
        frame_count: 16,
        data_room_bytes: 256,
        headroom_bytes: 128,
        magazine_frames: 0,
    })
    .expect("pool");
    let port = open(&lab, VethLab::SWITCH_END, small_pool, &config(version));
    let stats = port.stats_handle();
    let (mut rx, _tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let fits = test_frame(1, 256);
    let fits_with_tag = tagged_frame(2, 256, 0x8100, 0, 10);
    host.send(&test_frame(3, 257));
    host.send(&fits);
    host.send(&tagged_frame(4, 257, 0x8100, 0, 10)); // 253 bytes without its tag: still too long
                                                     // Longer than a V2 slot (256 + 128 bytes), so the kernel truncates it there.
    host.send(&test_frame(5, 1000));
    host.send(&fits_with_tag);
    let (received, _) = receive(&mut rx, 2);
    assert_eq!(bytes_of(&received), vec![fits, fits_with_tag]);
    let stats = stats.stats();
    assert_eq!(stats.rx_oversize, 3);
    assert_eq!(stats.rx_frames, 2);
    assert_eq!(stats.to_backend_stats().rx_missed, 3);
}

for_each_ring_version!(
    an_empty_pool_drops_and_counts_then_recovers,
    check_an_empty_pool_drops_and_counts_then_recovers
);
fn check_an_empty_pool_drops_and_counts_then_recovers(version: RingVersion) {
    let lab = lab();
    let pool = pool(4);
    let port = open(&lab, VethLab::SWITCH_END, pool.clone(), &config(version));
    let stats = port.stats_handle();
    let (mut rx, _tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let held: Vec<_> = (0..4).map(|_| pool.alloc(60).expect("buffer")).collect();
    for seq in 0..3 {
        host.send(&test_frame(seq, 60));
    }
    let mut frames = Vec::new();
    assert!(eventually(|| {
        rx.rx_burst(&mut frames, BURST_MAX);
        stats.stats().rx_no_buffer == 3
    }));
    assert!(frames.is_empty());
    drop(held);
    host.send(&test_frame(9, 60));
    let (received, _) = receive(&mut rx, 1);
    assert_eq!(bytes_of(&received), vec![test_frame(9, 60)]);
}

for_each_ring_version!(
    kernel_ring_drops_are_counted_exactly,
    check_kernel_ring_drops_are_counted_exactly
);
fn check_kernel_ring_drops_are_counted_exactly(version: RingVersion) {
    let lab = lab();
    // The smallest ring: two one-page blocks (V3: about 50 short frames; V2: 2 slots).
    let tiny = AfPacketConfig {
        block_size_bytes: 4096,
        block_count: 2,
        ..config(version)
    };
    let port = open(&lab, VethLab::SWITCH_END, pool(512), &tiny);
    let stats = port.stats_handle();
    let (mut rx, _tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    const SENT: u64 = 300;
    for seq in 0..SENT as u32 {
        host.send(&test_frame(seq, 60));
    }
    let mut frames = Vec::new();
    let accounted = eventually(|| {
        rx.rx_burst(&mut frames, BURST_MAX);
        frames.len() as u64 + stats.stats().rx_kernel_drops == SENT
    });
    let stats = stats.stats();
    assert!(
        accounted,
        "received {} + dropped {} != sent {SENT}",
        frames.len(),
        stats.rx_kernel_drops
    );
    assert!(
        stats.rx_kernel_drops > 0,
        "the ring cannot hold {SENT} frames"
    );
    assert_eq!(stats.to_backend_stats().rx_missed, stats.rx_kernel_drops);
    // What was received is in order, without gaps inside what the ring kept.
    let seqs: Vec<u32> = frames
        .iter()
        .map(|f| u32::from_be_bytes(f.data()[14..18].try_into().expect("seq")))
        .collect();
    assert!(seqs.windows(2).all(|pair| pair[0] < pair[1]), "{seqs:?}");
}

#[test]
fn frames_the_kernel_refuses_are_dropped_and_counted() {
    let lab = lab();
    let pool = pool(16);
    let port = open(
        &lab,
        VethLab::SWITCH_END,
        pool.clone(),
        &AfPacketConfig::default(),
    );
    let stats = port.stats_handle();
    let (_rx, mut tx) = port.split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);

    let first = test_frame(1, 100);
    let last = test_frame(3, 100);
    let too_long = test_frame(2, 1500 + 14 + 1); // over the MTU, untagged: EMSGSIZE
    let mut frames: Vec<_> = [&first, &too_long, &last]
        .iter()
        .map(|b| pool.alloc_copy(b).expect("buffer"))
        .collect();
    assert_eq!(
        tx.tx_burst(&mut frames),
        3,
        "the refused frame counts as taken"
    );
    assert!(frames.is_empty());
    assert_eq!(host.receive(), Some(first));
    assert_eq!(host.receive(), Some(last));
    let stats = stats.stats();
    assert_eq!((stats.tx_frames, stats.tx_failed), (2, 1));
    assert_eq!(pool.stats().available, 16);
}

#[test]
fn alloc_frame_gives_zeroed_frames_from_the_pool() {
    let lab = lab();
    let pool = pool(2);
    let (_rx, mut tx) = open(
        &lab,
        VethLab::SWITCH_END,
        pool.clone(),
        &AfPacketConfig::default(),
    )
    .split();
    let frame = tx.alloc_frame(64).expect("buffer");
    assert_eq!(frame.data(), &[0; 64]);
    assert_eq!(pool.stats().available, 1);
}

#[test]
fn rx_and_tx_halves_work_from_other_threads() {
    let lab = lab();
    let pool = pool(256);
    let (mut rx, mut tx) = open(
        &lab,
        VethLab::SWITCH_END,
        pool.clone(),
        &AfPacketConfig::default(),
    )
    .split();
    let host = RawSocket::open(&lab, VethLab::HOST_END);
    // A forwarding thread: every frame received on swp0 goes straight back out of it.
    let forwarder = std::thread::spawn(move || {
        let mut burst = Vec::with_capacity(BURST_MAX);
        let mut forwarded = 0;
        let deadline = Instant::now() + common::DEADLINE;
        while forwarded < 20 && Instant::now() < deadline {
            rx.rx_burst(&mut burst, BURST_MAX);
            forwarded += tx.tx_burst(&mut burst);
            let _ = rx.wait_readable(Duration::from_millis(5));
        }
        forwarded
    });
    for seq in 0..20 {
        let frame = test_frame(seq, 70);
        host.send(&frame);
        assert_eq!(
            host.receive(),
            Some(frame),
            "frame {seq} comes back through the forwarder"
        );
    }
    assert_eq!(forwarder.join().expect("forwarder"), 20);
    assert_eq!(pool.stats().available, 256);
}

#[test]
fn disable_offloads_turns_off_segmentation_coalescing_and_checksum_offload() {
    let lab = lab();
    let before = lab
        .exec("ethtool", &["-k", VethLab::HOST_END])
        .expect("ethtool -k");
    assert!(
        before.contains("tcp-segmentation-offload: on"),
        "veth starts with TSO on:\n{before}"
    );
    let report = {
        let _inside = lab.enter().expect("enter");
        disable_offloads(VethLab::HOST_END).expect("disable offloads")
    };
    assert!(report.all_disabled(), "{report:?}");
    assert!(
        report
            .turned_off
            .iter()
            .any(|name| name == "tx-tcp-segmentation"),
        "{report:?}"
    );
    assert!(
        report
            .turned_off
            .iter()
            .any(|name| name == "tx-checksum-ip-generic"),
        "{report:?}"
    );
    assert!(report
        .turned_off
        .iter()
        .chain(&report.already_off)
        .all(|n| is_offload_feature(n)));

    let after = lab
        .exec("ethtool", &["-k", VethLab::HOST_END])
        .expect("ethtool -k");
    for feature in [
        "tcp-segmentation-offload: off",
        "generic-segmentation-offload: off",
        "generic-receive-offload: off",
        "large-receive-offload: off",
        "tx-checksumming: off",
    ] {
        assert!(after.contains(feature), "expected `{feature}` in:\n{after}");
    }
    for line in after
        .lines()
        .filter(|line| line.contains("segmentation") || line.contains("gro"))
    {
        assert!(line.contains(": off"), "still on: `{line}` in:\n{after}");
    }
    // Features outside the list are left alone.
    assert!(after.contains("scatter-gather: on"), "{after}");

    let (missing, again) = {
        let _inside = lab.enter().expect("enter");
        (
            disable_offloads("nope0"),
            disable_offloads(VethLab::HOST_END).expect("again"),
        )
    };
    assert!(
        matches!(missing, Err(AfPacketError::NoSuchInterface(_))),
        "{missing:?}"
    );
    assert!(
        again.turned_off.is_empty() && again.all_disabled(),
        "idempotent: {again:?}"
    );
}
