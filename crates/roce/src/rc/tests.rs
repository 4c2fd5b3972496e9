use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;
use crate::time::Instant;

const US: u64 = 1_000;

fn t(nanos: u64) -> Instant {
    Instant::from_nanos(nanos)
}

// ---- helpers and small types -----------------------------------------------------------------

#[test]
fn psn_arithmetic_wraps_at_24_bits() {
    assert_eq!(psn_add(0xFF_FFFF, 1), 0);
    assert_eq!(psn_add(0xFF_FFF0, 0x20), 0x10);
    assert_eq!(psn_distance(0xFF_FFF0, 0x10), 0x20);
    assert_eq!(psn_distance(0x10, 0xFF_FFF0), -0x20);
    assert_eq!(psn_distance(5, 5), 0);
    assert_eq!(psn_distance(0, PSN_HALF_RANGE - 1), (1 << 23) - 1);
    assert_eq!(psn_distance(0, PSN_HALF_RANGE), -(1 << 23));
}

#[test]
fn opcodes_mtus_and_syndromes() {
    for op in [
        RcOpcode::RdmaWriteFirst,
        RcOpcode::RdmaWriteMiddle,
        RcOpcode::RdmaWriteLast,
        RcOpcode::RdmaWriteOnly,
        RcOpcode::Acknowledge,
    ] {
        assert_eq!(RcOpcode::from_value(op.value()), Some(op));
    }
    assert_eq!(RcOpcode::RdmaWriteOnly.value(), 0x0A);
    assert_eq!(RcOpcode::from_value(0x04), None, "SEND is not handled here");
    assert_eq!(PathMtu::from_bytes(4096), Some(PathMtu::Mtu4096));
    assert_eq!(PathMtu::from_bytes(1500), None);
    assert_eq!(PathMtu::Mtu1024.packets_for(0), 1);
    assert_eq!(PathMtu::Mtu1024.packets_for(1024), 1);
    assert_eq!(PathMtu::Mtu1024.packets_for(1025), 2);
    let ack = |syndrome| AckDescriptor {
        syndrome,
        msn: 0,
        psn: 0,
    };
    assert_eq!(ack(0x1F).kind(), AckKind::Ack { credits: 0x1F });
    assert_eq!(ack(0x23).kind(), AckKind::RnrNak { timer: 3 });
    assert_eq!(ack(0x60).kind(), AckKind::PsnSequenceError);
    assert_eq!(ack(0x62).kind(), AckKind::FatalNak(0x62));
    assert_eq!(ack(0x40).kind(), AckKind::Reserved(0x40));
    assert_eq!(ack(0x80).kind(), AckKind::Reserved(0x80));
}

#[test]
fn configurations_are_validated() {
    let bad = |f: fn(&mut RequesterConfig)| {
        let mut cfg = RequesterConfig::default();
        f(&mut cfg);
        Requester::new(cfg).unwrap_err()
    };
    assert_eq!(
        bad(|c| c.initial_psn = 1 << 24),
        RequesterError::InvalidInitialPsn
    );
    assert_eq!(bad(|c| c.window_packets = 0), RequesterError::InvalidWindow);
    assert_eq!(
        bad(|c| c.window_packets = 1 << 23),
        RequesterError::InvalidWindow
    );
    assert_eq!(
        bad(|c| c.ack_req_interval_packets = 0),
        RequesterError::InvalidAckInterval
    );
    assert_eq!(
        bad(|c| c.retransmit_timeout_ns = 0),
        RequesterError::ZeroTimeout
    );
    assert_eq!(
        bad(|c| c.message_queue_capacity = 0),
        RequesterError::ZeroCapacity
    );
    let cfg = ResponderConfig {
        ack_coalesce_packets: 0,
        ..ResponderConfig::default()
    };
    assert_eq!(
        Responder::new(cfg).unwrap_err(),
        ResponderConfigError::InvalidAckCoalescing
    );
}

// ---- a loopback network in virtual time ------------------------------------------------------

/// Requester and responder joined by two delay lines, driven in virtual time.
struct Net {
    req: Requester,
    resp: Responder,
    now: u64,
    latency_ns: u64,
    /// The requester may send this many packets per `tick_ns`.
    burst: usize,
    tick_ns: u64,
    data: VecDeque<(u64, TxPacket)>,
    acks: VecDeque<(u64, AckDescriptor)>,
    /// Every transmission, in order, with its time.
    sent: Vec<(u64, TxPacket)>,
    responses: Vec<AckDescriptor>,
    outcomes: Vec<(u32, RxOutcome)>,
    max_outstanding: u64,
}

type DropData<'a> = &'a mut dyn FnMut(&TxPacket) -> bool;
type DropAck<'a> = &'a mut dyn FnMut(&AckDescriptor) -> bool;

impl Net {
    fn new(req: RequesterConfig, resp: ResponderConfig) -> Self {
        Self {
            req: Requester::new(req).unwrap(),
            resp: Responder::new(resp).unwrap(),
            now: 0,
            latency_ns: 5 * US,
            burst: 4,
            tick_ns: US,
            data: VecDeque::new(),
            acks: VecDeque::new(),
            sent: Vec::new(),
            responses: Vec::new(),
            outcomes: Vec::new(),
            max_outstanding: 0,
        }
    }

    fn post(&mut self, sizes: &[u32]) {
        for (i, &len) in sizes.iter().enumerate() {
            let i = i as u64;
            self.req
                .post_write(i, 0x1000_0000 + (i << 24), 0x77, len)
                .unwrap();
        }
    }

    /// One event: ACKs due, timer, sending (up to a burst), data due. Returns the next event
    /// time, if any.
    fn step(&mut self, drop_data: DropData<'_>, drop_ack: DropAck<'_>) -> Option<u64> {
        let now = t(self.now);
        while self.acks.front().is_some_and(|&(at, _)| at <= self.now) {
            let (_, ack) = self.acks.pop_front().unwrap();
            self.req.handle_ack(now, ack);
        }
        self.req.handle_timeout(now);
        let mut sent_now = 0;
        while sent_now < self.burst {
            // `can_transmit` predicts `poll_transmit` exactly.
            let can_transmit = self.req.can_transmit();
            let polled = self.req.poll_transmit(now);
            assert_eq!(can_transmit, polled.is_some(), "can_transmit at {now:?}");
            let Some(packet) = polled else {
                break;
            };
            sent_now += 1;
            self.sent.push((self.now, packet));
            self.max_outstanding = self.max_outstanding.max(self.req.outstanding_packets());
            if !drop_data(&packet) {
                self.data.push_back((self.now + self.latency_ns, packet));
            }
        }
        while self.data.front().is_some_and(|&(at, _)| at <= self.now) {
            let (_, packet) = self.data.pop_front().unwrap();
            let outcome = self.resp.handle_packet(&RxPacket::from(&packet));
            self.outcomes.push((packet.psn, outcome));
            while let Some(peeked) = self.resp.peek_ack().copied() {
                // `peek_ack` shows exactly what `poll_ack` then takes.
                let ack = self.resp.poll_ack().unwrap();
                assert_eq!(ack, peeked);
                assert_eq!(self.resp.peek_ack(), None);
                self.responses.push(ack);
                if !drop_ack(&ack) {
                    self.acks.push_back((self.now + self.latency_ns, ack));
                }
            }
        }
        let busy = (sent_now == self.burst).then_some(self.now + self.tick_ns);
        [
            busy,
            self.data.front().map(|&(at, _)| at),
            self.acks.front().map(|&(at, _)| at),
            self.req.poll_timeout().map(Instant::as_nanos),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Steps until nothing is left to do (or `max_steps`); returns whether all work completed.
    fn run(&mut self, drop_data: DropData<'_>, drop_ack: DropAck<'_>, max_steps: usize) -> bool {
        for _ in 0..max_steps {
            match self.step(drop_data, drop_ack) {
                Some(next) => self.now = next.max(self.now + 1),
                None => return self.req.is_idle(),
            }
        }
        false
    }

    fn completions(&mut self) -> Vec<Completion> {
        std::iter::from_fn(|| self.req.poll_completion()).collect()
    }

    fn delivered(&mut self) -> Vec<DeliveredMessage> {
        std::iter::from_fn(|| self.resp.poll_delivered()).collect()
    }

    /// Checks that every posted message completed and was delivered exactly once, in order.
    fn assert_delivered(&mut self, sizes: &[u32]) {
        let completions = self.completions();
        let expected: Vec<Completion> = sizes
            .iter()
            .enumerate()
            .map(|(i, &len)| Completion {
                wr_id: i as u64,
                len,
            })
            .collect();
        assert_eq!(completions, expected);
        let delivered = self.delivered();
        assert_eq!(delivered.len(), sizes.len());
        for (i, (message, &len)) in delivered.iter().zip(sizes).enumerate() {
            let i = i as u64;
            assert_eq!(message.len, len);
            assert_eq!(message.va, 0x1000_0000 + (i << 24));
            assert_eq!(message.msn, (i as u32 + 1) & PSN_MASK);
        }
        let bytes: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
        assert_eq!(self.resp.stats().payload_bytes_received_total, bytes);
        assert_eq!(self.req.stats().msn_mismatch_total, 0);
        assert_eq!(self.req.state(), RequesterState::Ready);
    }
}

fn never<T>(_: &T) -> bool {
    false
}

/// Drops the first transmission of `psn` only.
fn drop_first_of(psn: u32) -> impl FnMut(&TxPacket) -> bool {
    let mut dropped = false;
    move |p: &TxPacket| {
        if p.psn == psn && !dropped {
            dropped = true;
            return true;
        }
        false
    }
}

// ---- scenarios -------------------------------------------------------------------------------

#[test]
fn loss_free_transfer_segments_and_acknowledges() {
    for pmtu in [PathMtu::Mtu1024, PathMtu::Mtu4096] {
        let sizes = [0, 1, 1024, 1025, 3 * 4096 + 7, 100_000, 4096];
        let req_cfg = RequesterConfig {
            pmtu,
            ..RequesterConfig::default()
        };
        let resp_cfg = ResponderConfig {
            pmtu,
            ..ResponderConfig::default()
        };
        let mut net = Net::new(req_cfg, resp_cfg);
        net.post(&sizes);
        assert!(net.run(&mut never, &mut never, 100_000));
        net.assert_delivered(&sizes);

        let s = *net.req.stats();
        assert_eq!(
            (
                s.packets_retransmitted_total,
                s.naks_total,
                s.timeouts_total
            ),
            (0, 0, 0)
        );
        let total_packets: u32 = sizes.iter().map(|&len| pmtu.packets_for(len)).sum();
        assert_eq!(s.packets_sent_total, u64::from(total_packets));
        let r = *net.resp.stats();
        assert_eq!(
            (
                r.duplicates_total,
                r.out_of_sequence_total,
                r.naks_sent_total
            ),
            (0, 0, 0)
        );
        assert_eq!(r.packets_accepted_total, u64::from(total_packets));

        // Packet structure, message by message.
        let mut psn = 0;
        let mut since_ack_req = 0;
        for (wr_id, &len) in sizes.iter().enumerate() {
            let packets: Vec<TxPacket> = net
                .sent
                .iter()
                .map(|&(_, p)| p)
                .filter(|p| p.wr_id == wr_id as u64)
                .collect();
            let n = packets.len();
            assert_eq!(n as u32, pmtu.packets_for(len));
            let mut offset = 0;
            for (k, p) in packets.iter().enumerate() {
                let expected_opcode = match (k == 0, k + 1 == n) {
                    (true, true) => RcOpcode::RdmaWriteOnly,
                    (true, false) => RcOpcode::RdmaWriteFirst,
                    (false, true) => RcOpcode::RdmaWriteLast,
                    (false, false) => RcOpcode::RdmaWriteMiddle,
                };
                assert_eq!(p.opcode, expected_opcode);
                assert_eq!(p.psn, psn);
                psn += 1;
                assert_eq!(p.message_offset, offset);
                if k + 1 < n {
                    assert_eq!(
                        p.payload_len,
                        pmtu.bytes(),
                        "FIRST/MIDDLE carry a full PMTU"
                    );
                }
                offset += p.payload_len;
                let reth = Reth {
                    va: 0x1000_0000 + ((wr_id as u64) << 24),
                    rkey: 0x77,
                    dma_len: len,
                };
                assert_eq!(p.reth, (k == 0).then_some(reth));
                if k + 1 == n {
                    assert!(p.ack_req, "A bit on the last packet of a message");
                }
                since_ack_req = if p.ack_req { 0 } else { since_ack_req + 1 };
                assert!(since_ack_req < 64, "A bit at least every 64 packets");
                assert!(!p.retransmission);
            }
            assert_eq!(offset, len);
        }
    }
}

#[test]
fn one_dropped_packet_gives_one_nak_and_a_tail_retransmission() {
    let sizes = [200 * 1024];
    let mut net = Net::new(RequesterConfig::default(), ResponderConfig::default());
    net.post(&sizes);
    assert!(net.run(&mut drop_first_of(50), &mut never, 100_000));
    net.assert_delivered(&sizes);

    let r = *net.resp.stats();
    assert_eq!(r.naks_sent_total, 1, "exactly one NAK");
    assert_eq!(r.out_of_sequence_episodes_total, 1);
    let naks: Vec<_> = net
        .responses
        .iter()
        .filter(|a| a.kind() == AckKind::PsnSequenceError)
        .collect();
    assert_eq!(naks.len(), 1);
    assert_eq!(naks[0].psn, 50, "NAK carries the expected PSN");
    let s = *net.req.stats();
    assert_eq!((s.naks_total, s.timeouts_total, s.go_back_total), (1, 0, 1));

    // The retransmitted PSNs are exactly the tail from 50 up to what had been sent when the NAK
    // arrived, each once; everything after 50 sent before then arrived out of sequence.
    let retransmitted: Vec<u32> = net
        .sent
        .iter()
        .filter(|(_, p)| p.retransmission)
        .map(|(_, p)| p.psn)
        .collect();
    let tail = retransmitted.len() as u32;
    assert!(tail > 1);
    assert_eq!(retransmitted, (50..50 + tail).collect::<Vec<_>>());
    assert_eq!(s.packets_retransmitted_total, u64::from(tail));
    let first_retransmit_at = net.sent.iter().find(|(_, p)| p.retransmission).unwrap().0;
    let sent_before: u32 = net
        .sent
        .iter()
        .filter(|&&(at, p)| at < first_retransmit_at && !p.retransmission)
        .count() as u32;
    assert_eq!(
        sent_before,
        50 + tail,
        "the whole tail was resent, nothing more"
    );
    assert_eq!(r.out_of_sequence_total, u64::from(tail - 1));
    assert_eq!(s.packets_sent_total, 200 + u64::from(tail));
}

#[test]
fn lost_last_packet_recovers_by_timeout() {
    // 10 packets, A bit only on the last, responder coalesces every 16: nothing is ACKed until
    // the last packet arrives, so losing it means a timeout and a full go-back-N.
    let sizes = [10 * 1024];
    let req_cfg = RequesterConfig {
        retransmit_timeout_ns: 100 * US,
        ..RequesterConfig::default()
    };
    let mut net = Net::new(req_cfg, ResponderConfig::default());
    net.post(&sizes);
    assert!(net.run(&mut drop_first_of(9), &mut never, 100_000));
    net.assert_delivered(&sizes);
    let s = *net.req.stats();
    assert_eq!((s.timeouts_total, s.naks_total), (1, 0));
    assert_eq!(s.packets_retransmitted_total, 10);
    assert_eq!(net.resp.stats().duplicates_total, 9, "0..=8 again");
    let first_retransmit_at = net.sent.iter().find(|(_, p)| p.retransmission).unwrap().0;
    assert_eq!(
        first_retransmit_at,
        100 * US,
        "timer started with the first packet at 0"
    );

    // ACK every packet instead: only the lost one is resent.
    let resp_cfg = ResponderConfig {
        ack_coalesce_packets: 1,
        ..ResponderConfig::default()
    };
    let mut net = Net::new(req_cfg, resp_cfg);
    net.post(&sizes);
    assert!(net.run(&mut drop_first_of(9), &mut never, 100_000));
    net.assert_delivered(&sizes);
    let s = *net.req.stats();
    assert_eq!((s.timeouts_total, s.packets_retransmitted_total), (1, 1));
    assert_eq!(net.resp.stats().duplicates_total, 0);
}

#[test]
fn progress_restarts_the_retransmission_timer() {
    // 2000 packets take 500 us at 4 per us; the timeout is 50 us but ACKs (A bit every 64
    // packets) keep making progress, so it never fires.
    let sizes = [2000 * 1024];
    let req_cfg = RequesterConfig {
        retransmit_timeout_ns: 50 * US,
        ..RequesterConfig::default()
    };
    let mut net = Net::new(req_cfg, ResponderConfig::default());
    net.post(&sizes);
    assert!(net.run(&mut never, &mut never, 100_000));
    net.assert_delivered(&sizes);
    assert!(net.now > 400 * US);
    let s = net.req.stats();
    assert_eq!((s.timeouts_total, s.packets_retransmitted_total), (0, 0));
    assert_eq!(
        net.req.poll_timeout(),
        None,
        "nothing outstanding: timer stopped"
    );
}

#[test]
fn lost_acks_are_recovered_by_duplicates_and_re_acks() {
    let sizes = [4 * 1024, 2 * 1024];
    let req_cfg = RequesterConfig {
        retransmit_timeout_ns: 100 * US,
        ..RequesterConfig::default()
    };
    let mut net = Net::new(req_cfg, ResponderConfig::default());
    net.post(&sizes);
    // Lose the first two responses.
    let mut lost = 0;
    let mut drop_ack = |_: &AckDescriptor| {
        lost += 1;
        lost <= 2
    };
    assert!(net.run(&mut never, &mut drop_ack, 100_000));
    net.assert_delivered(&sizes);
    assert_eq!(net.req.stats().timeouts_total, 1);
    assert_eq!(net.resp.stats().duplicates_total, 6);
    assert!(net.resp.stats().acks_sent_total >= 3);
}

#[test]
fn psn_wraps_around() {
    let sizes = [10 * 1024, 10 * 1024, 10 * 1024];
    let initial_psn = 0xFF_FFF0;
    let req_cfg = RequesterConfig {
        initial_psn,
        ..RequesterConfig::default()
    };
    let resp_cfg = ResponderConfig {
        initial_psn,
        ..ResponderConfig::default()
    };
    let mut net = Net::new(req_cfg, resp_cfg);
    net.post(&sizes);
    // Lose a packet just after the wrap: NAK and go-back-N across it.
    assert!(net.run(&mut drop_first_of(2), &mut never, 100_000));
    net.assert_delivered(&sizes);
    let first: Vec<u32> = net
        .sent
        .iter()
        .filter(|(_, p)| !p.retransmission)
        .map(|(_, p)| p.psn)
        .collect();
    let expected: Vec<u32> = (0..30).map(|k| psn_add(initial_psn, k)).collect();
    assert_eq!(first, expected);
    assert_eq!(first[16], 0);
    assert_eq!(net.req.stats().naks_total, 1);
    assert_eq!(net.resp.expected_psn(), psn_add(initial_psn, 30));
    assert_eq!(net.req.next_psn(), psn_add(initial_psn, 30));
}

#[test]
fn window_bounds_outstanding_packets() {
    let sizes = [300 * 1024];
    let req_cfg = RequesterConfig {
        window_packets: 16,
        ..RequesterConfig::default()
    };
    let mut net = Net::new(req_cfg, ResponderConfig::default());
    net.latency_ns = 50 * US;
    net.post(&sizes);
    // Before the first ACK can come back (100 us round trip), exactly 16 packets go out.
    for _ in 0..20 {
        let next = net.step(&mut never, &mut never).unwrap();
        net.now = next;
        if net.now >= 100 * US {
            break;
        }
    }
    let sent_before_ack = net.sent.iter().filter(|&&(at, _)| at < 100 * US).count();
    assert_eq!(sent_before_ack, 16);
    assert!(
        net.sent[15].1.ack_req,
        "the packet that fills the window asks for an ACK"
    );
    assert!(net.run(&mut never, &mut never, 100_000));
    net.assert_delivered(&sizes);
    assert_eq!(net.max_outstanding, 16);
}

#[test]
fn retries_run_out_into_the_error_state() {
    let req_cfg = RequesterConfig {
        retransmit_timeout_ns: 10 * US,
        retry_count_max: Some(3),
        ..RequesterConfig::default()
    };
    let mut net = Net::new(req_cfg, ResponderConfig::default());
    net.post(&[2048]);
    let mut always = |_: &TxPacket| true;
    assert!(!net.run(&mut always, &mut never, 1_000));
    assert_eq!(net.req.state(), RequesterState::RetryExceeded);
    assert_eq!(
        net.req.stats().timeouts_total,
        4,
        "three retries, then the fourth timeout"
    );
    assert_eq!(net.req.stats().packets_sent_total, 8);
    assert_eq!(net.req.poll_timeout(), None);
    assert_eq!(net.req.post_write(9, 0, 0, 1), Err(PostError::QpInError));
    assert!(net.req.poll_transmit(t(1_000 * US)).is_none());
}

// ---- requester unit checks -------------------------------------------------------------------

#[test]
fn requester_rejects_bad_acks_and_posts() {
    let cfg = RequesterConfig {
        message_queue_capacity: 2,
        ..RequesterConfig::default()
    };
    let mut req = Requester::new(cfg).unwrap();
    req.post_write(1, 0, 0, 3000).unwrap();
    req.post_write(2, 0, 0, 10).unwrap();
    assert_eq!(req.post_write(3, 0, 0, 10), Err(PostError::QueueFull));
    for _ in 0..4 {
        req.poll_transmit(t(0)).unwrap();
    }
    assert!(req.poll_transmit(t(0)).is_none());
    let ack = |psn, msn| AckDescriptor {
        syndrome: syndrome::ACK_UNLIMITED_CREDITS,
        msn,
        psn,
    };
    // Beyond what was sent, or far behind: ignored.
    req.handle_ack(t(1), ack(4, 0));
    req.handle_ack(t(1), ack(0xFF_0000, 0));
    req.handle_ack(t(1), ack(1 << 24, 0));
    assert_eq!(req.stats().acks_invalid_total, 3);
    assert_eq!(req.outstanding_packets(), 4);
    // ACK of the first message's three packets, with a wrong MSN: counted.
    req.handle_ack(t(2), ack(2, 0));
    assert_eq!(req.stats().msn_mismatch_total, 1);
    assert_eq!(
        req.poll_completion(),
        Some(Completion {
            wr_id: 1,
            len: 3000
        })
    );
    // Queue has room again.
    req.post_write(3, 0, 0, 10).unwrap();
    // A duplicate ACK.
    req.handle_ack(t(3), ack(2, 1));
    assert_eq!(req.stats().acks_duplicate_total, 1);
    // A remote access error NAK is fatal.
    req.handle_ack(
        t(4),
        AckDescriptor {
            syndrome: syndrome::NAK_REMOTE_ACCESS_ERROR,
            msn: 1,
            psn: 3,
        },
    );
    assert_eq!(req.state(), RequesterState::RemoteError(0x62));
    assert_eq!(req.poll_timeout(), None);
}

#[test]
fn message_too_long_is_refused() {
    let mut req = Requester::new(RequesterConfig::default()).unwrap();
    assert_eq!(
        req.post_write(1, 0, 0, MESSAGE_LEN_MAX + 1),
        Err(PostError::MessageTooLong)
    );
    req.post_write(1, 0, 0, MESSAGE_LEN_MAX).unwrap();
}

// ---- responder unit checks -------------------------------------------------------------------

fn write(opcode: RcOpcode, psn: u32, payload_len: u32, reth: Option<Reth>) -> RxPacket {
    RxPacket {
        opcode: opcode.value(),
        psn,
        ack_req: false,
        payload_len,
        reth,
    }
}

fn reth(dma_len: u32) -> Option<Reth> {
    Some(Reth {
        va: 0x5000,
        rkey: 1,
        dma_len,
    })
}

#[test]
fn responder_rejects_invalid_sequences() {
    let cases: [(&str, Vec<RxPacket>); 6] = [
        (
            "middle without first",
            vec![write(RcOpcode::RdmaWriteMiddle, 0, 1024, None)],
        ),
        (
            "short first",
            vec![write(RcOpcode::RdmaWriteFirst, 0, 1000, reth(3000))],
        ),
        (
            "only longer than its dma_len",
            vec![write(RcOpcode::RdmaWriteOnly, 0, 100, reth(50))],
        ),
        (
            "first without reth",
            vec![write(RcOpcode::RdmaWriteFirst, 0, 1024, None)],
        ),
        (
            "last with the wrong total",
            vec![
                write(RcOpcode::RdmaWriteFirst, 0, 1024, reth(3000)),
                write(RcOpcode::RdmaWriteLast, 1, 100, None),
            ],
        ),
        (
            "an ACK opcode as a request",
            vec![write(RcOpcode::Acknowledge, 0, 0, None)],
        ),
    ];
    for (name, packets) in cases {
        let mut resp = Responder::new(ResponderConfig::default()).unwrap();
        let (last, init) = packets.split_last().unwrap();
        for p in init {
            assert_eq!(resp.handle_packet(p), RxOutcome::Accepted, "{name}");
        }
        assert_eq!(
            resp.handle_packet(last),
            RxOutcome::InvalidRequest,
            "{name}"
        );
        let nak = resp.poll_ack().unwrap();
        assert_eq!(nak.syndrome, syndrome::NAK_INVALID_REQUEST, "{name}");
        assert_eq!(nak.psn, init.len() as u32);
        assert_eq!(resp.state(), ResponderState::Error);
        assert_eq!(
            resp.handle_packet(&write(RcOpcode::RdmaWriteOnly, nak.psn, 1, reth(1))),
            RxOutcome::Dropped
        );
    }
    // An unknown opcode byte.
    let mut resp = Responder::new(ResponderConfig::default()).unwrap();
    let mut p = write(RcOpcode::RdmaWriteOnly, 0, 1, reth(1));
    p.opcode = 0x04;
    assert_eq!(resp.handle_packet(&p), RxOutcome::InvalidRequest);
}

#[test]
fn responder_coalesces_acks_and_keeps_a_pending_nak() {
    let cfg = ResponderConfig {
        ack_coalesce_packets: 4,
        ..ResponderConfig::default()
    };
    let mut resp = Responder::new(cfg).unwrap();
    // FIRST + 5 MIDDLE of a 10-packet message, no A bit: one ACK after the 4th packet.
    assert_eq!(
        resp.handle_packet(&write(RcOpcode::RdmaWriteFirst, 0, 1024, reth(10 * 1024))),
        RxOutcome::Accepted
    );
    for psn in 1..6 {
        resp.handle_packet(&write(RcOpcode::RdmaWriteMiddle, psn, 1024, None));
        if psn == 3 {
            let ack = resp.poll_ack().unwrap();
            assert_eq!((ack.psn, ack.msn), (3, 0));
        }
    }
    assert_eq!(resp.poll_ack(), None);
    // Out of sequence: PSN 8 while 6 is expected. One NAK for the episode.
    for psn in [8, 9, 7] {
        assert_eq!(
            resp.handle_packet(&write(RcOpcode::RdmaWriteMiddle, psn, 1024, None)),
            RxOutcome::OutOfSequence
        );
    }
    // A duplicate in the meantime must not cancel the pending NAK.
    assert_eq!(
        resp.handle_packet(&write(RcOpcode::RdmaWriteMiddle, 2, 1024, None)),
        RxOutcome::Duplicate
    );
    let nak = resp.poll_ack().unwrap();
    assert_eq!(
        (nak.syndrome, nak.psn),
        (syndrome::NAK_PSN_SEQUENCE_ERROR, 6)
    );
    assert_eq!(resp.poll_ack(), None);
    assert_eq!(resp.stats().naks_sent_total, 1);
    // The expected PSN ends the episode; the message completes with an A-bit LAST.
    for psn in 6..9 {
        assert_eq!(
            resp.handle_packet(&write(RcOpcode::RdmaWriteMiddle, psn, 1024, None)),
            RxOutcome::Accepted
        );
    }
    let mut last = write(RcOpcode::RdmaWriteLast, 9, 1024, None);
    last.ack_req = true;
    assert_eq!(resp.handle_packet(&last), RxOutcome::Accepted);
    let ack = resp.poll_ack().unwrap();
    assert_eq!(
        (ack.psn, ack.msn),
        (9, 1),
        "the newer ACK replaced the coalesced one"
    );
    assert!(resp.stats().responses_coalesced_total >= 2);
    // A new episode gets a new NAK.
    resp.handle_packet(&write(RcOpcode::RdmaWriteOnly, 12, 1, reth(1)));
    resp.handle_packet(&write(RcOpcode::RdmaWriteOnly, 13, 1, reth(1)));
    assert_eq!(resp.poll_ack().unwrap().psn, 10);
    let s = resp.stats();
    assert_eq!(
        (s.out_of_sequence_total, s.out_of_sequence_episodes_total),
        (5, 2)
    );
    assert_eq!(
        resp.poll_delivered(),
        Some(DeliveredMessage {
            msn: 1,
            va: 0x5000,
            rkey: 1,
            len: 10 * 1024
        })
    );
}

#[test]
fn duplicate_is_re_acked_with_the_last_in_order_psn() {
    let mut resp = Responder::new(ResponderConfig {
        initial_psn: 0,
        ..ResponderConfig::default()
    })
    .unwrap();
    resp.handle_packet(&write(RcOpcode::RdmaWriteOnly, 0, 8, reth(8)));
    assert_eq!(
        resp.poll_ack(),
        None,
        "no A bit, coalescing every 16: no ACK yet"
    );
    assert_eq!(
        resp.handle_packet(&write(RcOpcode::RdmaWriteOnly, 0, 8, reth(8))),
        RxOutcome::Duplicate
    );
    let ack = resp.poll_ack().unwrap();
    assert_eq!((ack.syndrome, ack.psn, ack.msn), (0x1F, 0, 1));
    assert_eq!(
        resp.stats().messages_completed_total,
        1,
        "not executed twice"
    );
    // Far behind counts as a duplicate too (2^23 behind).
    assert_eq!(
        resp.handle_packet(&write(
            RcOpcode::RdmaWriteOnly,
            psn_add(1, PSN_HALF_RANGE),
            8,
            reth(8)
        )),
        RxOutcome::Duplicate
    );
}

// ---- property: random loss, everything delivered exactly once, in order ---------------------

/// xorshift64*: deterministic drop decisions from a seed.
struct Rng(u64);

impl Rng {
    fn chance(&mut self, per_mille: u64) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) % 1000 < per_mille
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn random_loss_still_delivers_everything_once_in_order(
        sizes in prop::collection::vec(prop_oneof![Just(0u32), 1u32..5_000, 5_000u32..40_000], 1..16),
        pmtu in prop::sample::select(vec![PathMtu::Mtu256, PathMtu::Mtu1024, PathMtu::Mtu4096]),
        window in 1u32..200,
        ack_interval in 1u32..80,
        coalesce in 1u32..40,
        initial_psn in prop_oneof![Just(0xFF_FF00u32), 0u32..=PSN_MASK],
        data_loss_per_mille in 0u64..250,
        ack_loss_per_mille in 0u64..250,
        burst in 1usize..8,
        seed in 1u64..,
    ) {
        let req_cfg = RequesterConfig {
            pmtu,
            initial_psn,
            window_packets: window,
            ack_req_interval_packets: ack_interval,
            retransmit_timeout_ns: 60 * US,
            retry_count_max: None,
            message_queue_capacity: 16,
        };
        let resp_cfg = ResponderConfig {
            pmtu,
            initial_psn,
            ack_coalesce_packets: coalesce,
            delivered_queue_capacity: 16,
        };
        let mut net = Net::new(req_cfg, resp_cfg);
        net.burst = burst;
        net.post(&sizes);
        let mut rng_data = Rng(seed);
        let mut rng_ack = Rng(seed ^ 0x9E37_79B9_7F4A_7C15);
        let mut drop_data = |_: &TxPacket| rng_data.chance(data_loss_per_mille);
        let mut drop_ack = |_: &AckDescriptor| rng_ack.chance(ack_loss_per_mille);
        prop_assert!(net.run(&mut drop_data, &mut drop_ack, 2_000_000), "did not finish");
        net.assert_delivered(&sizes);
        prop_assert!(net.max_outstanding <= u64::from(window));
        let s = *net.req.stats();
        let total_packets: u64 = sizes.iter().map(|&len| u64::from(pmtu.packets_for(len))).sum();
        prop_assert_eq!(s.packets_sent_total - s.packets_retransmitted_total, total_packets);
        prop_assert_eq!(net.resp.stats().packets_accepted_total, total_packets);
        // Accepted packets arrive in PSN order, each exactly once.
        let accepted: Vec<u32> = net
            .outcomes
            .iter()
            .filter(|(_, o)| *o == RxOutcome::Accepted)
            .map(|&(psn, _)| psn)
            .collect();
        let expected: Vec<u32> = (0..total_packets as u32).map(|k| psn_add(initial_psn, k)).collect();
        prop_assert_eq!(accepted, expected);
    }
}
