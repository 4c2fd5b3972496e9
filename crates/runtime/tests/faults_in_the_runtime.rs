//! `[testing.fault_injection]` in the runtime: lcore threads, the real clock, memory ports
//! opened through the fault backend. What the injectors lose is counted by them, what the
//! switch receives is forwarded, dropped with a reason or consumed, and a flapping link is seen
//! down by the control plane's link reader; ports not listed are untouched.

use etherparse::PacketBuilder;
use headroom_core::types::PortId;
use headroom_io::pool::FramePool;
use headroom_io::MemoryBackend;
use headroom_runtime::backends::frame_pool_config;
use headroom_runtime::fault::FaultBackend;
use headroom_runtime::{start, RuntimeSpec};
use std::time::{Duration, Instant};

const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];

fn frame(src: [u8; 6], dst: [u8; 6], len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 3], 64)
        .udp(49152, 4791)
        .write(&mut buf, &vec![0; len - 42])
        .expect("build frame");
    buf
}

fn config(faults: &str) -> headroom_config::Config {
    let text = format!(
        "[switch]\nname = \"faults\"\ndriver = \"memory\"\n\n\
         [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
         [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
         [runtime]\nprometheus_enable = false\n\n\
         [testing.fault_injection]\ni_understand_this_breaks_traffic = true\nseed = 5\n{faults}"
    );
    headroom_config::parse(&text, "faults.toml")
        .unwrap_or_else(|e| panic!("{e}"))
        .0
}

#[test]
fn received_frames_are_lost_to_counted_faults_or_accounted_by_the_switch() {
    let config = config(
        "ports = [\"Ethernet0\"]\n[testing.fault_injection.rx]\ndrop_rate = 0.3\ncorrupt_rate = 0.1\n\
         duplicate_rate = 0.05\nreorder_rate = 0.05\ndelay_rate = 0.05\ndelay_max_us = 200\n",
    );
    let pool = FramePool::new(frame_pool_config(&config)).unwrap();
    let mut backend = MemoryBackend::new(pool, 1024);
    let mut faulty = FaultBackend::new(&mut backend, &config);
    let running =
        start(RuntimeSpec::for_config(&config).expect("spec"), &mut faulty).expect("start");
    let stats = faulty.stats().to_vec();
    assert_eq!(stats.len(), 1, "only Ethernet0 has faults");
    assert_eq!(stats[0].port, "Ethernet0");
    let mut tap0 = backend.take_tap("m0").unwrap();
    let mut tap1 = backend.take_tap("m1").unwrap();

    // C is learned through the clean port, then A sends through the faulty one.
    tap1.injector.inject(&frame(C, [0xff; 6], 64)).unwrap();
    let end = Instant::now() + Duration::from_secs(10);
    while tap0.collector.pop().is_none() {
        assert!(Instant::now() < end, "C's hello was not flooded");
        std::thread::sleep(Duration::from_millis(1));
    }
    const SENT: u64 = 5000;
    let mut collected = 0u64;
    let data = frame(A, C, 200);
    for i in 0..SENT {
        while tap0.injector.inject(&data).is_err() {
            std::thread::yield_now();
        }
        if i % 32 == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
        while tap1.collector.pop().is_some() {
            collected += 1;
        }
    }
    // Wait until the switch has taken everything and the injectors hold nothing.
    let end = Instant::now() + Duration::from_secs(10);
    loop {
        while tap1.collector.pop().is_some() {
            collected += 1;
        }
        let rx = &stats[0].rx;
        if rx.frames_in.get() == SENT && rx.held.get() == 0 {
            std::thread::sleep(Duration::from_millis(50));
            while tap1.collector.pop().is_some() {
                collected += 1;
            }
            break;
        }
        assert!(
            Instant::now() < end,
            "the faulty port did not take every frame"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let shared = running.stop();
    while tap1.collector.pop().is_some() {
        collected += 1;
    }
    let rx = &stats[0].rx;
    assert!(rx.conserved());
    let lost = rx.lost();
    assert!(
        (1200..=1800).contains(&lost),
        "about 30 % of {SENT} lost: {lost}"
    );
    assert!(rx.corrupted.get() > 300 && rx.duplicated.get() > 100);
    let s = shared.port_stats(PortId(0), headroom_core::time::Instant::MAX);
    assert_eq!(
        s.rx_frames,
        rx.frames_out.get(),
        "the switch saw what the injector let through"
    );
    // Two ports: every frame received on Ethernet0 is forwarded to Ethernet4 (whatever its
    // corrupted destination says), dropped with a reason, or consumed as MAC Control.
    let dropped: u64 = s.drops.iter().sum();
    let consumed = s.pfc_frames_rx + s.pause_rx;
    let accounted = collected + dropped + consumed;
    // MAC Control with an unknown opcode is the one outcome PortStats does not list: a flip
    // would have to make the EtherType 0x8808 and keep a parseable frame, rare but possible.
    assert!(
        accounted <= s.rx_frames && s.rx_frames - accounted < 5,
        "received {} = forwarded {collected} + dropped {dropped} + consumed {consumed}",
        s.rx_frames
    );
    // The clean port was untouched: C's hello arrived and was counted once.
    assert_eq!(
        shared
            .port_stats(PortId(1), headroom_core::time::Instant::MAX)
            .rx_frames,
        1
    );
}

#[test]
fn a_flapping_link_is_seen_down_and_loses_traffic_while_down() {
    let config =
        config("ports = [\"Ethernet4\"]\nlink_flaps_per_second = 20\nlink_down_ms = 100\n");
    let pool = FramePool::new(frame_pool_config(&config)).unwrap();
    let mut backend = MemoryBackend::new(pool, 1024);
    let mut faulty = FaultBackend::new(&mut backend, &config);
    let running =
        start(RuntimeSpec::for_config(&config).expect("spec"), &mut faulty).expect("start");
    let stats = faulty.stats().to_vec();
    let mut tap1 = backend.take_tap("m1").unwrap();
    let (mut seen_down, mut seen_up) = (false, false);
    let end = Instant::now() + Duration::from_secs(10);
    while !(seen_down && seen_up) {
        assert!(
            Instant::now() < end,
            "no flap seen in 10 s at 20 flaps a second"
        );
        let _ = tap1.injector.inject(&frame(C, [0xff; 6], 64));
        match running.link_up(PortId(1)) {
            Some(false) => seen_down = true,
            Some(true) => seen_up |= seen_down,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    assert_eq!(
        running.link_up(PortId(0)),
        Some(true),
        "the other port never flaps"
    );
    drop(running.stop());
    let rx = &stats[0].rx;
    assert!(rx.link_flaps.get() > 0);
    assert!(
        rx.link_down_dropped.get() > 0,
        "frames received while down were lost"
    );
    assert!(rx.conserved());
}
