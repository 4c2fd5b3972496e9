//! The RC requester: posts RDMA WRITEs, sends their packets, handles ACKs, NAKs and timeouts.

use std::collections::VecDeque;

use core::fmt;

use super::{
    psn_distance, AckDescriptor, AckKind, PathMtu, RcOpcode, Reth, TxPacket, MESSAGE_LEN_MAX,
    PSN_HALF_RANGE, PSN_MASK,
};
use crate::time::Instant;

/// Requester configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequesterConfig {
    /// Payload bytes per packet.
    pub pmtu: PathMtu,
    /// PSN of the first packet (24 bits).
    pub initial_psn: u32,
    /// Most unacknowledged packets in flight, 1 ..= 2^23 - 1. Default 1024.
    pub window_packets: u32,
    /// Set the A bit at least once per this many packets (rxe `RXE_MAX_PKT_PER_ACK` = 64).
    /// Default 64; at least 1.
    pub ack_req_interval_packets: u32,
    /// Retransmission timeout: go back N when no ACK made progress for this long while packets
    /// are outstanding. Default 4,194,304 ns (IBTA local ACK timeout 4.096 us × 2^10).
    pub retransmit_timeout_ns: u64,
    /// Retries (timeouts or NAKs without progress in between) before the QP goes to the error
    /// state; `None` retries for ever. Default `Some(7)`, the IBTA maximum of `retry_cnt`.
    pub retry_count_max: Option<u8>,
    /// Posted messages (not yet completed, or completed but not yet polled) the requester holds.
    /// Default 256.
    pub message_queue_capacity: usize,
}

impl Default for RequesterConfig {
    fn default() -> Self {
        Self {
            pmtu: PathMtu::Mtu1024,
            initial_psn: 0,
            window_packets: 1024,
            ack_req_interval_packets: 64,
            retransmit_timeout_ns: 4_194_304,
            retry_count_max: Some(7),
            message_queue_capacity: 256,
        }
    }
}

/// Why a configuration or a post was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PostError {
    /// The message queue is full; poll completions first.
    QueueFull,
    /// The message is longer than 2^31 bytes.
    MessageTooLong,
    /// The QP is in the error state.
    QpInError,
}

impl fmt::Display for PostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::QueueFull => "message queue full",
            Self::MessageTooLong => "message longer than 2^31 bytes",
            Self::QpInError => "queue pair in error state",
        })
    }
}

impl std::error::Error for PostError {}

/// Why [`Requester::new`] refused its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequesterError {
    /// `initial_psn` above 24 bits.
    InvalidInitialPsn,
    /// `window_packets` is 0 or at least 2^23.
    InvalidWindow,
    /// `ack_req_interval_packets` is 0.
    InvalidAckInterval,
    /// `retransmit_timeout_ns` is 0.
    ZeroTimeout,
    /// `message_queue_capacity` is 0.
    ZeroCapacity,
}

impl fmt::Display for RequesterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidInitialPsn => "initial PSN must fit in 24 bits",
            Self::InvalidWindow => "window must be in 1 ..= 2^23 - 1 packets",
            Self::InvalidAckInterval => "A-bit interval must be at least 1",
            Self::ZeroTimeout => "retransmission timeout must be non-zero",
            Self::ZeroCapacity => "message queue capacity must be non-zero",
        })
    }
}

impl std::error::Error for RequesterError {}

/// The requester's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequesterState {
    /// Working.
    Ready,
    /// Retries exhausted without progress.
    RetryExceeded,
    /// The responder sent a fatal NAK (the syndrome).
    RemoteError(u8),
}

/// A completed RDMA WRITE (all its packets acknowledged).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The work request id given to [`Requester::post_write`].
    pub wr_id: u64,
    /// Message length.
    pub len: u32,
}

/// Requester counters. All are monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RequesterStats {
    /// Messages posted.
    pub messages_posted_total: u64,
    /// Messages completed.
    pub messages_completed_total: u64,
    /// Packets handed out by [`Requester::poll_transmit`], retransmissions included.
    pub packets_sent_total: u64,
    /// Of those, retransmissions.
    pub packets_retransmitted_total: u64,
    /// Payload bytes sent, retransmissions included.
    pub payload_bytes_sent_total: u64,
    /// Positive ACKs handled.
    pub acks_total: u64,
    /// Of those, ACKs that acknowledged nothing new.
    pub acks_duplicate_total: u64,
    /// PSN sequence error NAKs handled.
    pub naks_total: u64,
    /// RNR NAKs handled (retransmitted like a sequence error; no RNR timer is modelled).
    pub rnr_naks_total: u64,
    /// Fatal NAKs.
    pub naks_fatal_total: u64,
    /// ACKs/NAKs ignored: PSN outside the outstanding range, reserved syndrome, or in error.
    pub acks_invalid_total: u64,
    /// ACKs whose MSN disagrees with the messages their PSN completes.
    pub msn_mismatch_total: u64,
    /// Retransmission timeouts.
    pub timeouts_total: u64,
    /// Go-back-N restarts (NAKs and timeouts).
    pub go_back_total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Message {
    wr_id: u64,
    va: u64,
    rkey: u32,
    len: u32,
    /// Sequence number of the first packet (see `Requester`: 64-bit, never wraps).
    first_seq: u64,
    packets: u32,
}

impl Message {
    fn end_seq(&self) -> u64 {
        self.first_seq + u64::from(self.packets)
    }
}

/// The requester side of one RC queue pair.
///
/// Internally packets are numbered with 64-bit sequence numbers that never wrap; the PSN on the
/// wire is the low 24 bits plus the initial PSN. Incoming PSNs are mapped back relative to the
/// oldest unacknowledged packet, which is unambiguous because fewer than 2^23 packets are ever
/// outstanding.
#[derive(Clone, Debug)]
pub struct Requester {
    cfg: RequesterConfig,
    /// Posted, not yet completed, in PSN order.
    messages: VecDeque<Message>,
    completions: VecDeque<Completion>,
    /// Oldest unacknowledged packet.
    una: u64,
    /// Next packet to send.
    next: u64,
    /// One past the highest packet ever sent.
    sent_end: u64,
    /// One past the last packet of the posted messages.
    posted_end: u64,
    /// `next` as (index into `messages`, packet within it).
    cursor_message: usize,
    cursor_packet: u32,
    packets_since_ack_req: u32,
    timer: Option<Instant>,
    retries: u8,
    state: RequesterState,
    stats: RequesterStats,
}

impl Requester {
    /// A requester with nothing posted.
    pub fn new(cfg: RequesterConfig) -> Result<Self, RequesterError> {
        if cfg.initial_psn > PSN_MASK {
            return Err(RequesterError::InvalidInitialPsn);
        }
        if cfg.window_packets == 0 || cfg.window_packets >= PSN_HALF_RANGE {
            return Err(RequesterError::InvalidWindow);
        }
        if cfg.ack_req_interval_packets == 0 {
            return Err(RequesterError::InvalidAckInterval);
        }
        if cfg.retransmit_timeout_ns == 0 {
            return Err(RequesterError::ZeroTimeout);
        }
        if cfg.message_queue_capacity == 0 {
            return Err(RequesterError::ZeroCapacity);
        }
        Ok(Self {
            messages: VecDeque::with_capacity(cfg.message_queue_capacity),
            completions: VecDeque::with_capacity(cfg.message_queue_capacity),
            una: 0,
            next: 0,
            sent_end: 0,
            posted_end: 0,
            cursor_message: 0,
            cursor_packet: 0,
            packets_since_ack_req: 0,
            timer: None,
            retries: 0,
            state: RequesterState::Ready,
            stats: RequesterStats::default(),
            cfg,
        })
    }

    /// The configuration.
    #[must_use]
    pub fn config(&self) -> &RequesterConfig {
        &self.cfg
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &RequesterStats {
        &self.stats
    }

    /// The state.
    #[must_use]
    pub fn state(&self) -> RequesterState {
        self.state
    }

    /// Packets sent and not yet acknowledged (at most the window).
    #[must_use]
    pub fn outstanding_packets(&self) -> u64 {
        self.sent_end - self.una
    }

    /// PSN of the oldest unacknowledged packet.
    #[must_use]
    pub fn oldest_unacked_psn(&self) -> u32 {
        self.psn_of(self.una)
    }

    /// PSN the next new or retransmitted packet will carry.
    #[must_use]
    pub fn next_psn(&self) -> u32 {
        self.psn_of(self.next)
    }

    /// Whether every posted message has completed.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.messages.is_empty()
    }

    /// Whether [`Requester::poll_transmit`] would hand out a packet now: the QP is ready, a posted
    /// packet is waiting to be sent (or resent) and the window has room. Lets a driver that paces
    /// packets decide when to send before taking one (taking a packet assigns its PSN).
    #[must_use]
    pub fn can_transmit(&self) -> bool {
        self.state == RequesterState::Ready
            && self.next < self.posted_end
            && self.next - self.una < u64::from(self.cfg.window_packets)
    }

    /// Posts an RDMA WRITE of `len` bytes to (`va`, `rkey`).
    pub fn post_write(
        &mut self,
        wr_id: u64,
        va: u64,
        rkey: u32,
        len: u32,
    ) -> Result<(), PostError> {
        if self.state != RequesterState::Ready {
            return Err(PostError::QpInError);
        }
        if len > MESSAGE_LEN_MAX {
            return Err(PostError::MessageTooLong);
        }
        if self.messages.len() + self.completions.len() >= self.cfg.message_queue_capacity {
            return Err(PostError::QueueFull);
        }
        let packets = self.cfg.pmtu.packets_for(len);
        // Within capacity (checked above): no reallocation.
        self.messages.push_back(Message {
            wr_id,
            va,
            rkey,
            len,
            first_seq: self.posted_end,
            packets,
        });
        self.posted_end += u64::from(packets);
        self.stats.messages_posted_total += 1;
        Ok(())
    }

    /// The next completed message, in posting order.
    pub fn poll_completion(&mut self) -> Option<Completion> {
        self.completions.pop_front()
    }

    /// When [`Requester::handle_timeout`] must next be called: the retransmission deadline.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        match self.state {
            RequesterState::Ready => self.timer,
            _ => None,
        }
    }

    /// The next packet to send at `now`, if the window and the posted work allow one.
    pub fn poll_transmit(&mut self, now: Instant) -> Option<TxPacket> {
        if self.state != RequesterState::Ready || self.next >= self.posted_end {
            return None;
        }
        if self.next - self.una >= u64::from(self.cfg.window_packets) {
            return None;
        }
        let message = *self.messages.get(self.cursor_message)?;
        let index = self.cursor_packet;
        debug_assert_eq!(message.first_seq + u64::from(index), self.next);
        let last = index + 1 == message.packets;
        let opcode = match (index == 0, last) {
            (true, true) => RcOpcode::RdmaWriteOnly,
            (true, false) => RcOpcode::RdmaWriteFirst,
            (false, true) => RcOpcode::RdmaWriteLast,
            (false, false) => RcOpcode::RdmaWriteMiddle,
        };
        let pmtu = self.cfg.pmtu.bytes();
        let message_offset = index * pmtu;
        let payload_len = if last {
            message.len - message_offset
        } else {
            pmtu
        };
        // A bit: on the last packet of a message, at least every `ack_req_interval_packets`,
        // and on the packet that fills the window (else a window smaller than the interval would
        // wait for the timeout).
        let fills_window = self.next + 1 - self.una >= u64::from(self.cfg.window_packets);
        let ack_req = last
            || fills_window
            || self.packets_since_ack_req + 1 >= self.cfg.ack_req_interval_packets;
        self.packets_since_ack_req = if ack_req {
            0
        } else {
            self.packets_since_ack_req + 1
        };
        let retransmission = self.next < self.sent_end;
        let packet = TxPacket {
            opcode,
            psn: self.psn_of(self.next),
            ack_req,
            payload_len,
            reth: opcode.has_reth().then_some(Reth {
                va: message.va,
                rkey: message.rkey,
                dma_len: message.len,
            }),
            message_offset,
            wr_id: message.wr_id,
            retransmission,
        };
        self.next += 1;
        if last {
            self.cursor_message += 1;
            self.cursor_packet = 0;
        } else {
            self.cursor_packet += 1;
        }
        self.sent_end = self.sent_end.max(self.next);
        if self.timer.is_none() {
            self.timer = Some(now.saturating_add_nanos(self.cfg.retransmit_timeout_ns));
        }
        self.stats.packets_sent_total += 1;
        self.stats.payload_bytes_sent_total += u64::from(payload_len);
        if retransmission {
            self.stats.packets_retransmitted_total += 1;
        }
        Some(packet)
    }

    /// An ACK or NAK arrived at `now`.
    pub fn handle_ack(&mut self, now: Instant, ack: AckDescriptor) {
        if self.state != RequesterState::Ready || ack.psn > PSN_MASK {
            self.stats.acks_invalid_total += 1;
            return;
        }
        // Relative to the oldest unacknowledged packet; fewer than 2^23 are outstanding.
        let seq = self
            .una
            .checked_add_signed(i64::from(psn_distance(self.psn_of(self.una), ack.psn)));
        let Some(seq) = seq else {
            self.stats.acks_invalid_total += 1;
            return;
        };
        match ack.kind() {
            AckKind::Ack { .. } => {
                // Acknowledges every packet up to and including `seq`.
                if seq + 1 < self.una || seq >= self.sent_end {
                    self.stats.acks_invalid_total += 1;
                    return;
                }
                self.stats.acks_total += 1;
                if seq + 1 == self.una {
                    self.stats.acks_duplicate_total += 1;
                }
                self.acknowledge_through(now, seq + 1);
                self.check_msn(ack.msn);
            }
            AckKind::PsnSequenceError | AckKind::RnrNak { .. } => {
                // Everything before `seq` arrived; retransmit from `seq`.
                if seq < self.una || seq >= self.sent_end {
                    self.stats.acks_invalid_total += 1;
                    return;
                }
                if matches!(ack.kind(), AckKind::PsnSequenceError) {
                    self.stats.naks_total += 1;
                } else {
                    self.stats.rnr_naks_total += 1;
                }
                self.acknowledge_through(now, seq);
                self.check_msn(ack.msn);
                if self.spend_retry() {
                    self.go_back(seq);
                    self.timer = Some(now.saturating_add_nanos(self.cfg.retransmit_timeout_ns));
                }
            }
            AckKind::FatalNak(syndrome) => {
                self.stats.naks_fatal_total += 1;
                self.state = RequesterState::RemoteError(syndrome);
                self.timer = None;
            }
            AckKind::Reserved(_) => self.stats.acks_invalid_total += 1,
        }
    }

    /// Processes the retransmission timer: go back N if it expired at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        let Some(deadline) = self.timer else {
            return;
        };
        if self.state != RequesterState::Ready || deadline > now {
            return;
        }
        if self.una == self.sent_end {
            self.timer = None;
            return;
        }
        self.stats.timeouts_total += 1;
        if self.spend_retry() {
            self.go_back(self.una);
            self.timer = Some(now.saturating_add_nanos(self.cfg.retransmit_timeout_ns));
        }
    }

    fn psn_of(&self, seq: u64) -> u32 {
        // Truncation to 24 bits is the point.
        (seq as u32).wrapping_add(self.cfg.initial_psn) & PSN_MASK
    }

    /// Marks every packet before `new_una` acknowledged and completes the messages that ends.
    fn acknowledge_through(&mut self, now: Instant, new_una: u64) {
        if new_una <= self.una {
            return;
        }
        self.una = new_una;
        self.retries = 0;
        while let Some(front) = self.messages.front() {
            if front.end_seq() > self.una {
                break;
            }
            let done = *front;
            self.messages.pop_front();
            // Room is guaranteed: messages + completions <= capacity.
            self.completions.push_back(Completion {
                wr_id: done.wr_id,
                len: done.len,
            });
            self.stats.messages_completed_total += 1;
            self.cursor_message = self.cursor_message.saturating_sub(1);
        }
        if self.next < self.una {
            // The ACK covers packets we were about to retransmit: skip them.
            self.move_next_to(self.una);
        }
        self.timer = (self.una < self.sent_end)
            .then(|| now.saturating_add_nanos(self.cfg.retransmit_timeout_ns));
    }

    /// The responder's MSN counts the messages whose last packet it accepted; after an ACK up
    /// to the acknowledged PSN those are exactly the messages completed here.
    fn check_msn(&mut self, msn: u32) {
        // Truncation to 24 bits is the point.
        if msn != (self.stats.messages_completed_total as u32) & PSN_MASK {
            self.stats.msn_mismatch_total += 1;
        }
    }

    /// Counts one retry; moves to the error state (and returns false) when none is left.
    fn spend_retry(&mut self) -> bool {
        if let Some(max) = self.cfg.retry_count_max {
            if self.retries >= max {
                self.state = RequesterState::RetryExceeded;
                self.timer = None;
                return false;
            }
        }
        self.retries = self.retries.saturating_add(1);
        true
    }

    /// Restarts sending at `seq` (go-back-N).
    fn go_back(&mut self, seq: u64) {
        self.stats.go_back_total += 1;
        self.packets_since_ack_req = 0;
        self.move_next_to(seq);
    }

    fn move_next_to(&mut self, seq: u64) {
        debug_assert!(seq >= self.una && seq <= self.posted_end);
        self.next = seq;
        // Messages are in sequence order and contiguous: find the one holding `seq`.
        let index = self
            .messages
            .iter()
            .position(|m| m.end_seq() > seq)
            .unwrap_or(self.messages.len());
        self.cursor_message = index;
        self.cursor_packet = self.messages.get(index).map_or(0, |m| {
            // Fewer than 2^31 packets per message.
            (seq - m.first_seq) as u32
        });
    }
}
