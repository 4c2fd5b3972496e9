//! A hostile host on one port: PFC on every priority at line rate, a MAC flood that fills the
//! table, frames above the MTU, runts, bad VLAN tags, malformed MAC Control and 802.3x PAUSE
//! while PAUSE is off. Each is counted by its reason, the table stays bounded (stations it has no
//! room for are flooded to), and a lossless flow between two other hosts loses nothing.

mod common;

use common::*;
use headroom_core::counters::DropReason;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::params::presets;
use headroom_core::time::Duration;
use headroom_wire::ethernet::MacAddress;
use headroom_wire::ip::Ecn;
use headroom_wire::mac_control::{MacControlRepr, PauseRepr};

const GBPS: u64 = 1_000_000_000;
const ATTACKER: u16 = 0;
const HOST_D: [u8; 6] = [0x02, 0xaa, 0, 0, 0, 0x0d];
const LOSSLESS_DSCP: u8 = 3;
const FDB_CAPACITY: u32 = 256;

fn flood_source(i: u32) -> [u8; 6] {
    let b = i.to_be_bytes();
    [0x02, 0xf1, b[0], b[1], b[2], b[3]]
}

/// A frame with an 802.1Q tag of `vid` (or two tags).
fn tagged(src: [u8; 6], dst: [u8; 6], vid: u16, double: bool) -> HeapFrame {
    let mut b = Vec::new();
    b.extend_from_slice(&dst);
    b.extend_from_slice(&src);
    b.extend_from_slice(&[0x81, 0x00]);
    b.extend_from_slice(&vid.to_be_bytes());
    if double {
        b.extend_from_slice(&[0x81, 0x00, 0x00, 0x01]);
    }
    b.extend_from_slice(&[0x88, 0xB5]);
    b.resize(64, 0x5A);
    HeapFrame::new(&b)
}

fn pause_frame(src: [u8; 6]) -> HeapFrame {
    let mut b = [0u8; 60];
    MacControlRepr::Pause(PauseRepr {
        pause_quanta: 0xFFFF,
    })
    .emit_frame(MacAddress(src), &mut b)
    .expect("60 bytes");
    HeapFrame::new(&b)
}

#[test]
fn every_attack_is_counted_by_reason_and_the_lossless_flow_loses_nothing() {
    let mut params = presets::simple(4, GBPS);
    params.fdb_capacity = FDB_CAPACITY;
    let mut lab = Lab::new(params);
    lab.learn(1, HOST_B);
    lab.learn(2, HOST_C);

    let rounds = 3000u32;
    let mut counts = [0u64; 8];
    let (mut lossless_sent, mut lossless_received) = (0u64, 0u64);
    let mut to_d = (0u64, 0u64);
    let mut flood_index = 0u32;
    let mut b_paused_until = lab.now;
    let mut b_pauses = 0u64;
    for round in 0..rounds {
        // The lossless flow: B → C, one 1000-byte frame per 10 µs (0.8 Gb/s of a 1 Gb/s port,
        // which the flood congests): B honours the PFC the switch sends it, as a RoCE NIC does.
        if lab.now >= b_paused_until {
            lab.rx(
                1,
                ipv4_frame(HOST_B, HOST_C, LOSSLESS_DSCP, Ecn::NotEct, 1000),
            );
            lossless_sent += 1;
        }
        // The attacker, every round: PFC XOFF on all eight priorities, and new sources.
        lab.rx(ATTACKER, pfc_frame(HOST_A, 0xFF, [0xFFFF; 8]));
        counts[0] += 1;
        for _ in 0..4 {
            let src = flood_source(flood_index);
            flood_index += 1;
            lab.rx(ATTACKER, ipv4_frame(src, [0xff; 6], 0, Ecn::NotEct, 64));
        }
        match round % 6 {
            0 => {
                // Above the 9100-byte MTU.
                lab.rx(ATTACKER, ipv4_frame(HOST_A, HOST_C, 0, Ecn::NotEct, 9200));
                counts[1] += 1;
            }
            1 => {
                // Shorter than an Ethernet header.
                lab.rx(ATTACKER, HeapFrame::new(&[0xff; 9]));
                counts[2] += 1;
            }
            2 => {
                // VLAN 99 on an access port of VLAN 1, then two tags.
                lab.rx(ATTACKER, tagged(HOST_A, HOST_C, 99, false));
                lab.rx(ATTACKER, tagged(HOST_A, HOST_C, 1, true));
                counts[3] += 2;
            }
            3 => {
                lab.rx(ATTACKER, pause_frame(HOST_A));
                counts[4] += 1;
            }
            4 => {
                // A PFC frame to a unicast address (802.1Qbb wants 01-80-C2-00-00-01).
                let mut f = pfc_frame(HOST_A, 0xFF, [0xFFFF; 8]);
                f.data_mut()[..6].copy_from_slice(&HOST_C);
                lab.rx(ATTACKER, f);
                counts[5] += 1;
            }
            _ => {
                // D appears after the table is full: its frames are flooded, and still arrive.
                lab.rx(3, ipv4_frame(HOST_D, HOST_C, 0, Ecn::NotEct, 64));
                lab.rx(1, ipv4_frame(HOST_B, HOST_D, 0, Ecn::NotEct, 64));
                to_d.0 += 1;
            }
        }
        for port in 0..4u16 {
            for f in lab.tx(port, 64) {
                if let Some(pfc) = as_pfc(&f) {
                    if port == 1 && pfc.class_enable & 1 << LOSSLESS_DSCP != 0 {
                        // 802.1Qbb: quanta of 512 bit times, at 1 Gb/s 512 ns each.
                        let quanta = u64::from(pfc.pause_quanta[usize::from(LOSSLESS_DSCP)]);
                        b_paused_until = lab.now + Duration::from_nanos(quanta * 512);
                        b_pauses += u64::from(quanta > 0);
                    }
                    continue;
                }
                if port == 2 && dscp_of(&f) == LOSSLESS_DSCP {
                    lossless_received += 1;
                }
                if port == 3 && f.data()[..6] == HOST_D {
                    to_d.1 += 1;
                }
            }
        }
        lab.advance_ns(10_000);
        lab.sw.check_invariants();
    }
    for _ in 0..1000 {
        for f in lab.tx(2, 64) {
            if as_pfc(&f).is_none() && dscp_of(&f) == LOSSLESS_DSCP {
                lossless_received += 1;
            }
        }
        lab.advance_ns(10_000);
    }

    let a = lab.rx_counters(ATTACKER);
    let drops =
        |c: &headroom_core::counters::IngressPortCounters, r: DropReason| c.drops[r.index()].get();
    // PFC on every priority: each frame counted once, per priority, ignored where PFC is off.
    assert_eq!(a.pfc_frames_rx.get(), counts[0]);
    for p in 0..8 {
        assert_eq!(a.pfc_rx[p].get(), counts[0], "priority {p}");
        let ignored = if p == 3 || p == 4 { 0 } else { counts[0] };
        assert_eq!(a.pfc_rx_ignored[p].get(), ignored, "priority {p}");
    }
    assert_eq!(drops(a, DropReason::Oversize), counts[1]);
    assert_eq!(drops(a, DropReason::Runt), counts[2]);
    assert_eq!(drops(a, DropReason::VlanFiltered), counts[3]);
    assert_eq!(
        (a.pause_rx.get(), a.pause_rx_ignored.get()),
        (counts[4], counts[4])
    );
    assert_eq!(drops(a, DropReason::MacControlMalformed), counts[5]);
    // 802.3x was never honoured: nothing holds port 0's egress as a whole.
    assert!(lab.sw.shared().pfc.port_paused_until(0) <= lab.now);

    // The MAC flood: bounded table, learn failures counted, the late station flooded to.
    let entries = lab.sw.fdb_entries(lab.now).count();
    assert!(
        entries <= FDB_CAPACITY as usize,
        "{entries} entries in a table of {FDB_CAPACITY}"
    );
    assert!(
        a.fdb_learn_table_full.get() > u64::from(flood_index) / 2,
        "{} of {flood_index} sources counted as not learned",
        a.fdb_learn_table_full.get()
    );
    assert_eq!(
        to_d.1, to_d.0,
        "frames to the unlearned station are flooded to it"
    );

    // The lossless flow between the other hosts: everything arrived, nothing dropped anywhere.
    assert_eq!(lossless_received, lossless_sent);
    assert!(b_pauses > 0, "the flood congested C's port: B was paused");
    assert!(
        lossless_sent > u64::from(rounds) / 2,
        "B still sent: {lossless_sent}"
    );
    for p in 1..4u16 {
        assert_eq!(lab.rx_counters(p).pg_drops[3].get(), 0, "port {p} PG 3");
        assert_eq!(
            drops(lab.rx_counters(p), DropReason::IngressHeadroomExhausted),
            0
        );
    }
}

#[test]
fn the_mac_table_never_grows_past_its_capacity_and_floods_to_what_it_cannot_learn() {
    let mut params = presets::simple(3, GBPS);
    params.fdb_capacity = FDB_CAPACITY;
    let mut lab = Lab::new(params);
    lab.learn(1, HOST_B);
    for i in 0..20_000 {
        lab.rx(0, ipv4_frame(flood_source(i), HOST_B, 0, Ecn::NotEct, 64));
        if i % 64 == 0 {
            lab.tx(1, 64);
        }
    }
    lab.tx(1, 64);
    let entries = lab.sw.fdb_entries(lab.now).count();
    assert!(entries <= FDB_CAPACITY as usize);
    assert!(
        entries >= FDB_CAPACITY as usize / 2,
        "the table filled: {entries}"
    );
    let full = lab.rx_counters(0).fdb_learn_table_full.get();
    assert_eq!(
        full,
        20_000 + 1 - entries as u64,
        "every source not learned is counted"
    );

    // A station the table has no room for: its frames are flooded, so it is still reached.
    let unlearned = (20_000..30_000)
        .map(flood_source)
        .find(|&mac| {
            lab.rx(2, ipv4_frame(mac, HOST_B, 0, Ecn::NotEct, 64));
            lab.tx(1, 64);
            lab.rx_counters(2).fdb_learn_table_full.get() > 0
        })
        .expect("a full table refuses some station");
    assert_eq!(
        lab.sw
            .ingress()
            .expect("an ingress side")
            .fdb()
            .lookup(1, unlearned, lab.now),
        None
    );
    lab.rx(1, ipv4_frame(HOST_B, unlearned, 0, Ecn::NotEct, 64));
    let to = |lab: &mut Lab, port| {
        lab.tx(port, 64)
            .iter()
            .filter(|f| f.data()[..6] == unlearned)
            .count()
    };
    assert_eq!(
        (to(&mut lab, 0), to(&mut lab, 2)),
        (1, 1),
        "flooded to both other ports"
    );
}
