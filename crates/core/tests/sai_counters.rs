//! Counters with SAI's meaning, as SONiC's acceptance tests (sonic-mgmt's PFC and QoS-SAI
//! tests) read them: what `RX_OK`, `RX_ERR`, `RX_DRP`, `RX_OVR`, `TX_DRP` count, which port a
//! drop is charged to, what a queue's shared watermark and a PG's packet and byte counters hold.
//! One switch in virtual time; every number is predicted from what the test sent.

mod common;

use common::*;
use headroom_core::counters::DropReason;
use headroom_core::frame::{Frame, HeapFrame};
use headroom_core::params::{presets, SwitchParams, Threshold};
use headroom_core::stats::PortStats;
use headroom_core::time::Instant;
use headroom_core::types::PortId;
use headroom_wire::ip::Ecn;

const GBPS: u64 = 1_000_000_000;
const LOSSLESS_DSCP: u8 = 3;
const LOSSY_DSCP: u8 = 0;

fn stats(lab: &Lab, port: u16) -> PortStats {
    lab.sw.shared().port_stats(PortId(port), Instant::MAX)
}

/// An IEEE 802.3x PAUSE frame (opcode 0x0001), 60 bytes.
fn pause_frame(src: [u8; 6], quanta: u16) -> HeapFrame {
    let mut f = [0u8; 60];
    f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0x08]);
    f[14..16].copy_from_slice(&[0x00, 0x01]);
    f[16..18].copy_from_slice(&quanta.to_be_bytes());
    HeapFrame::new(&f)
}

/// An LLDPDU's frame (nearest-bridge group address, EtherType 0x88CC): for the switch itself.
fn lldp_frame(src: [u8; 6]) -> HeapFrame {
    let mut f = ipv4_frame(src, [0x01, 0x80, 0xC2, 0, 0, 0x0E], 0, Ecn::NotEct, 64)
        .data()
        .to_vec();
    f[12..14].copy_from_slice(&0x88CCu16.to_be_bytes());
    HeapFrame::new(&f)
}

/// sonic-mgmt `test_pfc_frames_not_counted_as_rx_ok`: PFC and PAUSE frames are consumed by the
/// MAC; they are neither RX_OK nor RX_DRP. Data frames and frames for the switch itself (LLDP,
/// which SONiC's tests allow for as background traffic) are RX_OK.
#[test]
fn pfc_and_pause_frames_are_neither_rx_ok_nor_rx_drp() {
    let mut lab = Lab::new(presets::simple(3, GBPS));
    lab.learn(2, HOST_C);
    let base = stats(&lab, 0);
    for _ in 0..5 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 500));
    }
    for p in 0..8u8 {
        // Every priority, XON included, as the test sends them.
        lab.rx(0, pfc_frame(HOST_A, 1 << p, [0xffff; 8]));
        lab.rx(0, pfc_frame(HOST_A, 1 << p, [0; 8]));
    }
    for _ in 0..3 {
        lab.rx(0, pause_frame(HOST_A, 0xffff));
    }
    lab.rx(0, lldp_frame(HOST_A));
    let s = stats(&lab, 0);
    assert_eq!(
        s.rx_frames - base.rx_frames,
        5 + 16 + 3 + 1,
        "every frame is received"
    );
    assert_eq!(s.mac_control_rx - base.mac_control_rx, 16 + 3);
    assert_eq!(
        s.rx_ok_frames - base.rx_ok_frames,
        5 + 1,
        "data and LLDP only"
    );
    assert_eq!(s.rx_discard_frames, 0, "nothing discarded");
    assert_eq!(s.rx_error_frames, 0);
    assert_eq!(s.drops_total(), 0);
    assert_eq!(s.pfc_rx, [2; 8]);
    assert_eq!(s.pause_rx, 3);
}

/// Frames that are not received whole and well-formed are RX_ERR (a runt, an oversize frame —
/// RX_OVR too —, a malformed MAC Control frame), not RX_OK; a well-formed frame the switch
/// then discards is RX_OK and RX_DRP, as an ASIC's MAC and pipeline count it.
#[test]
fn errors_are_rx_err_and_discards_are_rx_ok_and_rx_drp() {
    let mut params = presets::simple(3, GBPS);
    params.ports[0].mtu_bytes = 1500;
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    let base = stats(&lab, 0);
    lab.rx(0, HeapFrame::new(&[0u8; 10]));
    lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 1600));
    let mut malformed = pfc_frame(HOST_A, 0b1000, [0xffff; 8]).data().to_vec();
    malformed[0] = 0x03; // not the MAC Control group address
    lab.rx(0, HeapFrame::new(&malformed));
    // Discards: a multicast source, and a frame to the port it came from.
    lab.rx(
        0,
        ipv4_frame([0x03; 6], HOST_C, LOSSY_DSCP, Ecn::NotEct, 100),
    );
    lab.learn(0, HOST_A);
    let base_discards = stats(&lab, 0);
    lab.rx(0, ipv4_frame(HOST_B, HOST_A, LOSSY_DSCP, Ecn::NotEct, 100));
    let s = stats(&lab, 0);
    assert_eq!(s.drops[DropReason::Runt.index()], 1);
    assert_eq!(s.drops[DropReason::Oversize.index()], 1);
    assert_eq!(s.drops[DropReason::MacControlMalformed.index()], 1);
    assert_eq!(s.rx_error_frames - base.rx_error_frames, 3);
    assert_eq!(s.rx_oversize_frames, 1);
    assert_eq!(s.rx_discard_frames, 2, "source_multicast and same_port");
    assert_eq!(
        s.rx_ok_frames - base_discards.rx_ok_frames,
        1,
        "the discarded frame was received OK"
    );
    // The learning frame from A and the two discarded frames are RX_OK; the three errors not.
    assert_eq!(s.rx_ok_frames - base.rx_ok_frames, 3);
    assert_eq!(s.rx_frames - base.rx_frames, 6);
    assert_eq!(s.tx_discard_frames, 0);
}

/// A lossy queue over its limit: SAI charges the drop to the egress port (`TX_DRP`,
/// `IF_OUT_DISCARDS`) — the sum of that port's queue drops —, not to the port the frame came
/// in on, whose `RX_DRP` stays 0.
#[test]
fn an_egress_queue_drop_is_charged_to_the_egress_port() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    // The egress queue is the limit: no ingress shared limit on the lossy PG.
    params.ports[0].pgs[0].threshold = Threshold::Static { bytes: 0 };
    // And a small one: a static 8 KiB above the 2 KiB reserved.
    params.ports[2].queues[1].profile.threshold = Threshold::Static { bytes: 8192 };
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    // 1024-byte frames (4 cells): the queue takes its 2048 reserved bytes, then shared buffer
    // while its shared use is below 8192 bytes; the frame after that is refused.
    let admitted: u64 = (2048 + 8192) / 1024;
    for _ in 0..admitted + 3 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 1024));
    }
    let rx_port = stats(&lab, 0);
    let tx_port = stats(&lab, 2);
    assert_eq!(tx_port.queues[1].drop_frames, 3);
    assert_eq!(tx_port.drops[DropReason::EgressQueueLimit.index()], 3);
    assert_eq!(tx_port.tx_discard_frames, 3);
    assert_eq!(
        tx_port.tx_discard_frames,
        tx_port.queues.iter().map(|q| q.drop_frames).sum::<u64>()
    );
    assert_eq!(tx_port.rx_discard_frames, 0);
    assert_eq!(
        rx_port.rx_discard_frames, 0,
        "the ingress port discarded nothing"
    );
    assert_eq!(rx_port.tx_discard_frames, 0);
    assert_eq!(rx_port.drops_total(), 0);
    assert_eq!(
        rx_port.rx_ok_frames,
        admitted + 3,
        "received OK, all of them"
    );
}

/// An ingress drop (a lossy PG over its limit) is the ingress port's `RX_DRP`; the egress port
/// shows no discard.
#[test]
fn an_ingress_drop_is_charged_to_the_ingress_port() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    params.ports[0].pgs[0].threshold = Threshold::Static { bytes: 4096 };
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    // 1024-byte frames, 4 cells each: the lossy PG reserves nothing and may take 16 cells.
    for _ in 0..4 + 2 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 1024));
    }
    let rx_port = stats(&lab, 0);
    let tx_port = stats(&lab, 2);
    assert_eq!(rx_port.drops[DropReason::IngressLossyLimit.index()], 2);
    assert_eq!(rx_port.rx_discard_frames, 2);
    assert_eq!(rx_port.pgs[0].drops, 2);
    assert_eq!(tx_port.tx_discard_frames, 0);
    assert_eq!(tx_port.rx_discard_frames, 0);
}

/// SAI's `QUEUE_STAT_SHARED_WATERMARK_BYTES` (SONiC `show queue watermark`) counts only the use
/// above the queue's reserved size, as the PG shared watermark does: 36 one-cell frames into a
/// queue reserving 9216 bytes (36 cells) use no shared buffer; the 37th uses one cell. The
/// total watermark beside it holds everything.
#[test]
fn a_queue_shared_watermark_excludes_its_reserved_part() {
    let mut params = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    params.ports[2].queues[1].profile.reserved_bytes = 9216;
    params.ports[0].pgs[0].reserved_bytes = 2048;
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    let _ = lab.sw.shared().take_port_watermarks(PortId(2));
    for _ in 0..36 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 200));
    }
    let w = lab.sw.shared().take_port_watermarks(PortId(2));
    assert_eq!(w.queue_total[1], 9216);
    assert_eq!(w.queue_shared[1], 0, "all of it in the reserved buffer");
    lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 200));
    let w = lab.sw.shared().take_port_watermarks(PortId(2));
    assert_eq!((w.queue_total[1], w.queue_shared[1]), (9216 + 256, 256));
    // The same rule as the PG shared watermark: PG 0 of the ingress port reserves 2048 bytes
    // (8 cells) of the 37 it holds.
    let pg = lab.sw.shared().take_port_watermarks(PortId(0)).pg_shared[0];
    assert_eq!(pg, (37 - 8) * 256);
}

/// Per-PG packets and bytes (SAI `INGRESS_PRIORITY_GROUP_STAT_PACKETS`, `_BYTES`): every frame
/// classified into the PG, those its admission dropped included (`DROPPED_PACKETS` is a
/// subset).
#[test]
fn pg_packets_and_bytes_count_every_frame_of_the_pg() {
    let mut params: SwitchParams = presets::simple(3, GBPS);
    params.ports[2].tx_enable = false;
    params.ports[0].pgs[0].threshold = Threshold::Static { bytes: 2048 };
    let mut lab = Lab::new(params);
    lab.learn(2, HOST_C);
    let base = stats(&lab, 0);
    for len in [100, 300, 1000] {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSLESS_DSCP, Ecn::Ect0, len));
    }
    // PG 0 takes 8 cells: a 1024-byte frame (4 cells) twice, then the third is dropped.
    for _ in 0..3 {
        lab.rx(0, ipv4_frame(HOST_A, HOST_C, LOSSY_DSCP, Ecn::NotEct, 1024));
    }
    let s = stats(&lab, 0);
    assert_eq!(s.pgs[3].frames, 3);
    assert_eq!(s.pgs[3].bytes, 100 + 300 + 1000);
    assert_eq!(s.pgs[3].drops, 0);
    assert_eq!(s.pgs[0].frames - base.pgs[0].frames, 3);
    assert_eq!(s.pgs[0].bytes - base.pgs[0].bytes, 3 * 1024);
    assert_eq!(s.pgs[0].drops, 1);
}
