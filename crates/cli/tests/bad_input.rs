//! Bad input into a port: malformed MAC Control frames, bad tags, oversize frames and seeded
//! garbage are dropped and counted by reason — exactly as many of each as were sent — while
//! forwarding goes on (a ping through the same port loses nothing, during and after).

mod common;

use common::lab_config::{host_ipv4, host_mac, switch_device, HOST_DEVICE};
use common::{pfc_frame, run_ok, Background, Lab, RawSocket};
use headroom_wire::ethernet::{parse_l2, EtherType};
use headroom_wire::mac_control::{MacControlFrame, MacControlRepr};
use std::collections::{BTreeMap, HashSet};
use std::process::Command;
use std::time::Duration;

/// The switch port MTU of the generated configuration.
const PORT_MTU: usize = 1500;
/// The MTU this test gives both ends of h0's pair, so that oversize frames reach the switch.
const WIDE_MTU: usize = 2000;

/// What the switch should do with a frame arriving on port 0, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fate {
    /// The kernel never delivers it to the switch's socket.
    KernelDrops,
    /// Dropped by the switch for this reason.
    Dropped(&'static str),
    /// A MAC Control frame acted on (or counted as unknown), not forwarded.
    MacControl,
    /// For the switch itself (a reserved group address, 802.1Q-2018 Table 8-1): punted to the
    /// control plane in any VLAN, never relayed (or dropped by the punt path's rate limit).
    Punted,
    /// Forwarded.
    Forwarded,
}

/// The expected fate of `frame`, from the standards the switch follows and what Linux does to a
/// frame on its way to a packet socket. `learned`: MAC addresses the switch learned on port 0.
fn fate(frame: &[u8], learned: &mut HashSet<[u8; 6]>) -> Fate {
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    // Linux removes the outer 802.1Q/802.1ad tag before packet sockets see the frame and drops
    // a tagged frame shorter than 20 bytes (`skb_vlan_untag` reads two bytes past the tag).
    if matches!(ethertype, 0x8100 | 0x88A8) && frame.len() < 20 {
        return Fate::KernelDrops;
    }
    let l2 = match parse_l2(frame) {
        Ok(l2) => l2,
        Err(headroom_wire::Error::DoubleTag) => return Fate::Dropped("vlan_filtered"),
        Err(_) => return Fate::Dropped("runt"),
    };
    if l2.ethertype == EtherType::MacControl {
        // 802.3 31.4: MAC Control frames are untagged; 802.1Qbb 36.1.3: PFC goes to
        // 01-80-C2-00-00-01 with a zero high octet, in a minimum-size frame.
        let ok = l2.vlan.is_none()
            && MacControlFrame::new_checked(frame)
                .and_then(|f| MacControlRepr::parse(&f))
                .is_ok();
        return if ok {
            Fate::MacControl
        } else {
            Fate::Dropped("mac_control_malformed")
        };
    }
    if frame.len() - l2.payload_offset > PORT_MTU {
        return Fate::Dropped("oversize");
    }
    if l2.src_addr.is_multicast() {
        return Fate::Dropped("source_multicast");
    }
    if l2.dst_addr.0[..5] == [0x01, 0x80, 0xC2, 0, 0] && l2.dst_addr.0[5] < 0x10 {
        return Fate::Punted;
    }
    // Access port in VLAN 1: untagged, priority-tagged (VID 0) and VID 1 are members.
    if l2.vlan.is_some_and(|tci| !matches!(tci.vid(), 0 | 1)) {
        return Fate::Dropped("vlan_filtered");
    }
    let destination = l2.dst_addr.0;
    learned.insert(l2.src_addr.0);
    if !l2.dst_addr.is_multicast() && learned.contains(&destination) {
        return Fate::Dropped("same_port");
    }
    Fate::Forwarded
}

/// xorshift64*: a seeded generator for reproducible garbage.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Random frames of 14..=200 bytes whose EtherType is often one the switch parses (tags, MAC
/// Control, IPv4/IPv6), so that the garbage reaches every check. Never a lab host's MAC as
/// source (a garbage frame could otherwise move a host in the switch's MAC table).
fn garbage(count: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let hosts: Vec<[u8; 6]> = (0..3).map(host_mac).collect();
    let mut frames = Vec::with_capacity(count);
    while frames.len() < count {
        let len = 14 + rng.below(187) as usize;
        let mut f: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        let types = [0x8100u16, 0x88A8, 0x8808, 0x0800, 0x86DD];
        if rng.below(3) > 0 {
            let t = types[rng.below(types.len() as u64) as usize];
            f[12..14].copy_from_slice(&t.to_be_bytes());
        }
        if f.len() >= 18 && f[12..14] == [0x81, 0x00] && rng.below(2) == 0 {
            let t = types[rng.below(types.len() as u64) as usize];
            f[16..18].copy_from_slice(&t.to_be_bytes());
        }
        if rng.below(4) == 0 {
            // A MAC Control destination makes malformed-PFC checks past the address.
            f[..6].copy_from_slice(&[0x01, 0x80, 0xC2, 0, 0, 1]);
        }
        if hosts.iter().any(|h| f[6..12] == h[..]) {
            continue;
        }
        frames.push(f);
    }
    frames
}

/// The hand-made malformed frames, each with the reason it must be dropped for.
fn crafted() -> Vec<(Vec<u8>, &'static str)> {
    let me = host_mac(0);
    let mut frames = Vec::new();
    // PFC with a non-zero high octet of the class-enable vector (802.1Qbb 36.1.3.2: reserved).
    frames.push((
        pfc_frame(me, 0x0108, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]),
        "mac_control_malformed",
    ));
    // PFC to a unicast address instead of 01-80-C2-00-00-01.
    let mut unicast = pfc_frame(me, 0x08, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]);
    unicast[..6].copy_from_slice(&[0x02, 0x68, 0x72, 0, 0, 1]);
    frames.push((unicast, "mac_control_malformed"));
    // PFC cut short: all fields present (34 bytes) but below the 60-byte minimum.
    let short = pfc_frame(me, 0x08, [0, 0, 0, 0xFFFF, 0, 0, 0, 0])[..34].to_vec();
    frames.push((short, "mac_control_malformed"));
    // PFC in an 802.1Q tag (MAC Control frames are never tagged).
    let mut tagged = pfc_frame(me, 0x08, [0, 0, 0, 0xFFFF, 0, 0, 0, 0]);
    tagged.splice(12..12, [0x81, 0x00, 0x60, 0x01]);
    frames.push((tagged, "mac_control_malformed"));
    // 802.3x PAUSE to a unicast address.
    let mut pause = vec![0u8; 60];
    pause[..6].copy_from_slice(&[0x02, 0x68, 0x72, 0, 0, 1]);
    pause[6..12].copy_from_slice(&me);
    pause[12..18].copy_from_slice(&[0x88, 0x08, 0x00, 0x01, 0xFF, 0xFF]);
    frames.push((pause, "mac_control_malformed"));
    // Two tags: 802.1ad outside 802.1Q, and 802.1Q twice.
    let inner = common::udp_frame(0, 1, 0, 9, 64);
    for outer in [[0x88, 0xA8], [0x81, 0x00]] {
        let mut f = inner.clone();
        f.splice(12..12, [outer[0], outer[1], 0, 5, 0x81, 0x00, 0, 7]);
        frames.push((f, "vlan_filtered"));
    }
    // A VLAN the access port is not in.
    let mut f = inner.clone();
    f.splice(12..12, [0x81, 0x00, 0, 5]);
    frames.push((f, "vlan_filtered"));
    // A multicast source address (802.1Q 8.7.1: never learned, never forwarded).
    let mut f = inner.clone();
    f[6] |= 0x01;
    frames.push((f, "source_multicast"));
    // Longer than the port MTU allows.
    let f = common::udp_frame(0, 1, 0, 9, PORT_MTU - 28 + 100);
    frames.push((f, "oversize"));
    frames
}

#[test]
fn bad_frames_are_counted_by_reason_and_dropped_while_forwarding_continues() {
    common::require(&["ping"]);
    let lab = Lab::up(3, "1G");
    // Wide MTU on both ends of h0's pair (before the switch opens its port), so that the kernel
    // carries frames longer than the port MTU to the switch, which must drop them.
    let mtu = WIDE_MTU.to_string();
    run_ok(Command::new("ip").args([
        "-n",
        &lab.switch_ns(),
        "link",
        "set",
        &switch_device(0),
        "mtu",
        &mtu,
    ]));
    lab.host_run(0, "ip", &["link", "set", HOST_DEVICE, "mtu", &mtu]);
    let switch = lab.start_switch();
    let h1 = host_ipv4(1).to_string();

    // h0's MAC is learned from its first ping: the oracle must know it.
    let mut learned: HashSet<[u8; 6]> = HashSet::from([host_mac(0)]);
    let pinger =
        Background::spawn(lab.host_cmd(0, "ping", &["-c", "60", "-i", "0.05", "-W", "5", &h1]));
    let socket = RawSocket::open(&lab.host_ns(0), HOST_DEVICE, 0);
    let crafted = crafted();
    let garbage = garbage(1500, 0x00C0_FFEE);
    let mut expected: BTreeMap<Fate, u64> = BTreeMap::new();
    for (frame, reason) in &crafted {
        let f = fate(frame, &mut learned);
        assert_eq!(f, Fate::Dropped(reason), "oracle disagrees on {frame:02x?}");
        *expected.entry(f).or_default() += 1;
    }
    for frame in &garbage {
        *expected.entry(fate(frame, &mut learned)).or_default() += 1;
    }
    eprintln!("expected fates: {expected:?}");
    // The crafted frames, then the garbage, paced so that no queue on the way overflows.
    let all: Vec<&Vec<u8>> = crafted.iter().map(|(f, _)| f).chain(&garbage).collect();
    for (n, frame) in all.iter().enumerate() {
        socket
            .send(frame)
            .unwrap_or_else(|e| panic!("sending {frame:02x?}: {e}"));
        if n % 20 == 19 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    let during = pinger.finish(Duration::from_secs(30));
    assert!(
        during.contains(" 0% packet loss"),
        "ping lost replies during the garbage:\n{during}"
    );
    let after = lab.host_run(0, "ping", &["-c", "5", "-i", "0.1", "-W", "5", &h1]);
    assert!(after.contains(" 0% packet loss"), "{after}");
    let report = switch.stop();

    let port = report.port(0);
    for (fate, n) in &expected {
        if let Fate::Dropped(reason) = fate {
            assert_eq!(
                port.drop_count(reason),
                *n,
                "{reason}: {} counted, {n} expected\n{}",
                port.drop_count(reason),
                report.text
            );
        }
    }
    let expected_drops: u64 = expected
        .iter()
        .filter(|(f, _)| matches!(f, Fate::Dropped(_)))
        .map(|(_, n)| n)
        .sum();
    // Punted frames are dropped only by the punt path's own limits, and counted as such.
    let punted = expected.get(&Fate::Punted).copied().unwrap_or(0);
    let punt_drops = port.drop_count("punt_rate_limit") + port.drop_count("punt_queue_full");
    assert!(
        punt_drops <= punted,
        "{punt_drops} punt drops of {punted} punted\n{}",
        report.text
    );
    assert_eq!(
        port.drops_total,
        expected_drops + punt_drops,
        "{}",
        report.text
    );
    // Everything that reached the switch was counted as received: the bad frames, plus the 65
    // echo requests (the only frames h0's kernel sends on this lab).
    let delivered: u64 = expected
        .iter()
        .filter(|(f, _)| **f != Fate::KernelDrops)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(port.rx_frames, delivered + 65, "{}", report.text);
    // Valid but unexpected MAC Control frames in the garbage were not forwarded either, and no
    // bad frame made another port drop anything.
    for i in [1, 2] {
        assert_eq!(report.port(i).drops_total, 0, "{}", report.text);
    }
}
