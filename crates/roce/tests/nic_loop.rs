//! The pieces composed the way `rocegen` will drive them: one sending QP (RC requester, DCQCN RP,
//! pacer) on an emulated 100 Gb/s link that honours PFC, a "switch" that marks CE on every data
//! packet during a congestion window, and a receiver (RC responder, NP) whose CNPs reach the RP.
//! Everything runs in virtual time with the public API only.

use headroom_roce::dcqcn::{Rp, RpParams};
use headroom_roce::np::{Np, NpConfig};
use headroom_roce::pacer::{ethernet_wire_bytes, Link, Pacer};
use headroom_roce::pause::{PauseState, Priority};
use headroom_roce::rc::{
    AckDescriptor, Requester, RequesterConfig, Responder, ResponderConfig, RxPacket, TxPacket,
};
use headroom_roce::time::Instant;

use std::collections::VecDeque;

const GBPS: u64 = 1_000_000_000;
const US: u64 = 1_000;
const LINE: u64 = 100 * GBPS;
const QPN: u32 = 0x11;
/// RoCEv2 headers around a payload: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + ICRC 4 (RETH ignored).
const HEADERS: u32 = 58;
const PROPAGATION_NS: u64 = 2 * US;
const MARK_FROM: u64 = 100 * US;
const MARK_UNTIL: u64 = 300 * US;
const PAUSE_AT: u64 = 2_000 * US;
const DATA_PRIORITY: u8 = 3;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

#[derive(Default)]
struct Trace {
    /// (start time, payload bytes) of every data packet.
    sends: Vec<(u64, u32)>,
    rate_samples: Vec<(u64, u64)>,
    cnps: Vec<u64>,
}

#[test]
fn dcqcn_pacing_and_pfc_on_one_qp() {
    let mut requester = Requester::new(RequesterConfig {
        message_queue_capacity: 64,
        ..RequesterConfig::default()
    })
    .unwrap();
    let mut responder = Responder::new(ResponderConfig::default()).unwrap();
    let mut rp = Rp::new(RpParams::paper(), LINE, Instant::ZERO).unwrap();
    let mut np = Np::new(NpConfig::paper(), 16).unwrap();
    let mut link = Link::new(LINE, Instant::ZERO).unwrap();
    let mut pacer = Pacer::new(LINE, 0, Instant::ZERO).unwrap();
    let mut pause = PauseState::new(LINE).unwrap();
    let prio = Priority::new(DATA_PRIORITY).unwrap();

    for wr_id in 0..64 {
        requester.post_write(wr_id, 0x1000, 1, 64 * 1024).unwrap();
    }
    // Packets on the wire towards the receiver (arrival, packet, CE mark), ACKs and CNPs back.
    let mut to_receiver: VecDeque<(u64, TxPacket, bool)> = VecDeque::new();
    let mut acks: VecDeque<(u64, AckDescriptor)> = VecDeque::new();
    let mut cnps: VecDeque<u64> = VecDeque::new();
    let mut pending: Option<TxPacket> = None;
    let mut trace = Trace::default();
    let mut paused_seen = false;

    let mut now = 0u64;
    let end = 4_000 * US;
    while now < end {
        let at = t(now);
        // The upstream switch sends one PFC XOFF for the data priority.
        if now >= PAUSE_AT && !paused_seen {
            let mut quanta = [0u16; 8];
            quanta[usize::from(DATA_PRIORITY)] = 0xFFFF;
            pause.handle_pfc(t(PAUSE_AT), 1 << DATA_PRIORITY, quanta);
            paused_seen = true;
        }
        while cnps.front().is_some_and(|&a| a <= now) {
            cnps.pop_front();
            rp.handle_cnp(at);
        }
        rp.handle_timeout(at);
        pacer.set_rate(at, rp.current_rate_bps()).unwrap();
        trace.rate_samples.push((now, rp.current_rate_bps()));
        while acks.front().is_some_and(|&(a, _)| a <= now) {
            let (_, ack) = acks.pop_front().unwrap();
            requester.handle_ack(at, ack);
        }
        requester.handle_timeout(at);
        // Keep the send queue full.
        while let Some(done) = requester.poll_completion() {
            requester
                .post_write(done.wr_id + 64, 0x1000, 1, 64 * 1024)
                .unwrap();
        }

        // Send at most one packet now, if the QP, the link and PFC allow it.
        if pending.is_none() {
            pending = requester.poll_transmit(at);
        }
        let mut next_send = None;
        if let Some(packet) = pending {
            let frame = packet.payload_len + HEADERS;
            let wire = u64::from(ethernet_wire_bytes(frame));
            let ready = pacer.next_send_time(at, u64::from(frame), &link).max(
                if pause.is_paused(at, prio) {
                    pause.resume_time(prio)
                } else {
                    at
                },
            );
            if ready <= at {
                assert!(!pause.is_paused(at, prio), "no frame starts while paused");
                let free_at = pacer
                    .on_send(at, u64::from(frame), wire, &mut link)
                    .unwrap();
                rp.handle_tx(at, u64::from(frame));
                let marked = (MARK_FROM..MARK_UNTIL).contains(&now);
                to_receiver.push_back((free_at.as_nanos() + PROPAGATION_NS, packet, marked));
                trace.sends.push((now, packet.payload_len));
                pending = None;
                next_send = Some(free_at.as_nanos());
            } else {
                next_send = Some(ready.as_nanos());
            }
        }

        // Receiver side.
        while to_receiver.front().is_some_and(|&(a, _, _)| a <= now) {
            let (_, packet, marked) = to_receiver.pop_front().unwrap();
            responder.handle_packet(&RxPacket::from(&packet));
            if marked {
                np.handle_ce(at, QPN).unwrap();
            }
            while let Some(ack) = responder.poll_ack() {
                acks.push_back((now + PROPAGATION_NS, ack));
            }
        }
        while let Some(cnp) = np.poll_cnp(at) {
            assert_eq!((cnp.dest_qpn, cnp.dscp, cnp.priority), (QPN, 48, 6));
            trace.cnps.push(cnp.at.as_nanos());
            cnps.push_back(now + PROPAGATION_NS);
        }

        // Next event.
        now = [
            next_send,
            to_receiver.front().map(|&(a, _, _)| a),
            acks.front().map(|&(a, _)| a),
            cnps.front().copied(),
            rp.poll_timeout().map(Instant::as_nanos),
            np.poll_timeout().map(Instant::as_nanos),
            requester.poll_timeout().map(Instant::as_nanos),
            (!paused_seen).then_some(PAUSE_AT),
        ]
        .into_iter()
        .flatten()
        .filter(|&n| n > now)
        .min()
        .unwrap_or(end)
        .max(now + 1);
    }

    // CNPs: one at the first mark, then one per 50 us window while marks keep coming.
    assert!(
        (4..=6).contains(&trace.cnps.len()),
        "CNPs at {:?}",
        trace.cnps
    );
    for pair in trace.cnps.windows(2) {
        assert!(pair[1] - pair[0] >= 50 * US);
    }
    // The rate dropped during the congestion window and rises again afterwards (slowly: the
    // paper's R_AI = 40 Mb/s per 55 us was chosen for 40 Gb/s links).
    let lowest = trace.rate_samples.iter().map(|&(_, r)| r).min().unwrap();
    assert!(lowest < LINE / 4, "lowest rate {lowest}");
    let at_end_of_marking = trace
        .rate_samples
        .iter()
        .rev()
        .find(|&&(at, _)| at <= MARK_UNTIL + 10 * US)
        .unwrap()
        .1;
    let final_rate = trace.rate_samples.last().unwrap().1;
    assert!(
        final_rate > at_end_of_marking,
        "{final_rate} <= {at_end_of_marking}"
    );
    assert_eq!(rp.stats().rate_cuts_total, trace.cnps.len() as u64);
    assert!(rp.stats().additive_increase_total > 0);
    let bytes_in = |from: u64, to: u64| -> u64 {
        trace
            .sends
            .iter()
            .filter(|&&(at, _)| at >= from && at < to)
            .map(|&(_, len)| u64::from(len))
            .sum()
    };
    // Goodput at line rate is ~94.6 Gb/s (1024 B payload in 1106 wire bytes); under DCQCN it is
    // far lower.
    let before = bytes_in(0, MARK_FROM) * 8 * 1_000 / MARK_FROM; // Mb/s
    let during =
        bytes_in(MARK_FROM + 50 * US, MARK_UNTIL) * 8 * 1_000 / (MARK_UNTIL - MARK_FROM - 50 * US);
    assert!(before > 90_000, "before: {before} Mb/s");
    assert!(during < before / 2, "during: {during} Mb/s");

    // PFC: nothing started during the pause, which lasted exactly 0xFFFF quanta at 100 Gb/s, and
    // sending resumed at its first nanosecond.
    let resume = PAUSE_AT + 335_540;
    assert_eq!(pause.paused_ns(prio, t(end)), 335_540);
    assert!(trace
        .sends
        .iter()
        .all(|&(at, _)| !(PAUSE_AT..resume).contains(&at)));
    assert!(trace.sends.iter().any(|&(at, _)| at == resume));
    assert_eq!(pause.stats(prio).pfc_frames_rx_total, 1);

    // Lossless: nothing was retransmitted and the responder saw everything in order.
    let s = requester.stats();
    assert_eq!(s.packets_retransmitted_total, 0);
    assert_eq!(responder.stats().out_of_sequence_total, 0);
    assert_eq!(
        responder.stats().packets_accepted_total,
        (trace.sends.len() - to_receiver.len()) as u64,
        "every packet not still on the wire was accepted"
    );
    println!(
        "CNPs at {:?} us; lowest rate {} Mb/s; goodput before {before} Mb/s, during {during} Mb/s; \
         rate at end {} Mb/s",
        trace.cnps.iter().map(|c| c / US).collect::<Vec<_>>(),
        lowest / 1_000_000,
        final_rate / 1_000_000
    );
}
