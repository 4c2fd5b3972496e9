//! The RC responder for RDMA WRITE: PSN checks, message re-assembly, ACK coalescing, NAKs.

use std::collections::VecDeque;

use core::fmt;

use super::{
    psn_add, psn_distance, syndrome, AckDescriptor, AckKind, PathMtu, RcOpcode, Reth, RxPacket,
    PSN_MASK,
};

/// Responder configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ResponderConfig {
    /// Payload bytes per packet; FIRST and MIDDLE packets must carry exactly this many.
    pub pmtu: PathMtu,
    /// The PSN expected first (the requester's initial PSN).
    pub initial_psn: u32,
    /// ACK after this many packets accepted without an ACK, even without an A bit (1: ACK every
    /// packet). Default 16. At least 1.
    pub ack_coalesce_packets: u32,
    /// Completed messages kept for [`Responder::poll_delivered`]; older ones are dropped (and
    /// counted) when it is full. Default 256.
    pub delivered_queue_capacity: usize,
}

impl Default for ResponderConfig {
    fn default() -> Self {
        Self {
            pmtu: PathMtu::Mtu1024,
            initial_psn: 0,
            ack_coalesce_packets: 16,
            delivered_queue_capacity: 256,
        }
    }
}

/// Why [`Responder::new`] refused its configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponderConfigError {
    /// `initial_psn` above 24 bits.
    InvalidInitialPsn,
    /// `ack_coalesce_packets` is 0.
    InvalidAckCoalescing,
}

impl fmt::Display for ResponderConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::InvalidInitialPsn => "initial PSN must fit in 24 bits",
            Self::InvalidAckCoalescing => "ACK coalescing must be at least 1 packet",
        })
    }
}

impl std::error::Error for ResponderConfigError {}

/// The responder's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResponderState {
    /// Working.
    Ready,
    /// An invalid request was NAKed; every later packet is dropped (IBTA: the QP goes to the
    /// error state).
    Error,
}

/// What [`Responder::handle_packet`] did with a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RxOutcome {
    /// In order and valid: accepted.
    Accepted,
    /// Already received (PSN behind the expected one): dropped, re-ACKed.
    Duplicate,
    /// Ahead of the expected PSN: dropped; NAKed if it starts an episode.
    OutOfSequence,
    /// In order but not a valid continuation (opcode sequence, length or header): NAKed
    /// (invalid request) and the responder went to the error state.
    InvalidRequest,
    /// The responder is in the error state: dropped.
    Dropped,
}

/// A message whose last packet was accepted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveredMessage {
    /// MSN after this message (24 bits).
    pub msn: u32,
    /// RETH virtual address.
    pub va: u64,
    /// RETH remote key.
    pub rkey: u32,
    /// Message length.
    pub len: u32,
}

/// Responder counters. All are monotonic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ResponderStats {
    /// Packets accepted in order.
    pub packets_accepted_total: u64,
    /// Payload bytes accepted.
    pub payload_bytes_received_total: u64,
    /// Messages completed (the MSN, without the 24-bit wrap).
    pub messages_completed_total: u64,
    /// Duplicate packets (dropped and re-ACKed).
    pub duplicates_total: u64,
    /// Out-of-sequence packets (dropped).
    pub out_of_sequence_total: u64,
    /// Out-of-sequence episodes (one NAK each).
    pub out_of_sequence_episodes_total: u64,
    /// Invalid requests (NAKed, then error state).
    pub invalid_requests_total: u64,
    /// Packets dropped in the error state.
    pub dropped_in_error_total: u64,
    /// ACKs handed out by [`Responder::poll_ack`].
    pub acks_sent_total: u64,
    /// PSN sequence error NAKs handed out.
    pub naks_sent_total: u64,
    /// Invalid request NAKs handed out.
    pub naks_invalid_request_sent_total: u64,
    /// Responses superseded by a newer one before being polled (ACKs are cumulative).
    pub responses_coalesced_total: u64,
    /// Delivered-message records dropped because nobody polled them.
    pub delivered_overflow_total: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InMessage {
    reth: Reth,
    received: u32,
}

/// The responder side of one RC queue pair (RDMA WRITE only).
#[derive(Clone, Debug)]
pub struct Responder {
    cfg: ResponderConfig,
    expected_psn: u32,
    msn: u32,
    in_message: Option<InMessage>,
    /// A NAK was sent for the current out-of-sequence episode.
    nak_episode: bool,
    packets_since_ack: u32,
    /// The response to send next; a newer one replaces it (all responses are cumulative).
    response: Option<AckDescriptor>,
    delivered: VecDeque<DeliveredMessage>,
    state: ResponderState,
    stats: ResponderStats,
}

impl Responder {
    /// A responder expecting `cfg.initial_psn`.
    pub fn new(cfg: ResponderConfig) -> Result<Self, ResponderConfigError> {
        if cfg.initial_psn > PSN_MASK {
            return Err(ResponderConfigError::InvalidInitialPsn);
        }
        if cfg.ack_coalesce_packets == 0 {
            return Err(ResponderConfigError::InvalidAckCoalescing);
        }
        Ok(Self {
            expected_psn: cfg.initial_psn,
            msn: 0,
            in_message: None,
            nak_episode: false,
            packets_since_ack: 0,
            response: None,
            delivered: VecDeque::with_capacity(cfg.delivered_queue_capacity),
            state: ResponderState::Ready,
            stats: ResponderStats::default(),
            cfg,
        })
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> &ResponderStats {
        &self.stats
    }

    /// The state.
    #[must_use]
    pub fn state(&self) -> ResponderState {
        self.state
    }

    /// The PSN expected next.
    #[must_use]
    pub fn expected_psn(&self) -> u32 {
        self.expected_psn
    }

    /// Messages completed, modulo 2^24.
    #[must_use]
    pub fn msn(&self) -> u32 {
        self.msn
    }

    /// The ACK or NAK [`Responder::poll_ack`] would hand out, left in place: a driver that paces
    /// its link looks before it sends, so that later packets can still coalesce into the response.
    #[must_use]
    pub fn peek_ack(&self) -> Option<&AckDescriptor> {
        self.response.as_ref()
    }

    /// The ACK or NAK to send, if any.
    pub fn poll_ack(&mut self) -> Option<AckDescriptor> {
        let response = self.response.take()?;
        match response.kind() {
            AckKind::Ack { .. } => self.stats.acks_sent_total += 1,
            AckKind::PsnSequenceError => self.stats.naks_sent_total += 1,
            _ => self.stats.naks_invalid_request_sent_total += 1,
        }
        Some(response)
    }

    /// The next completed message, oldest first.
    pub fn poll_delivered(&mut self) -> Option<DeliveredMessage> {
        self.delivered.pop_front()
    }

    /// A request packet arrived.
    pub fn handle_packet(&mut self, packet: &RxPacket) -> RxOutcome {
        if self.state == ResponderState::Error {
            self.stats.dropped_in_error_total += 1;
            return RxOutcome::Dropped;
        }
        let distance = psn_distance(self.expected_psn, packet.psn & PSN_MASK);
        if distance < 0 {
            // IBTA 9.7.5.1.2: a duplicate WRITE is not re-executed but acknowledged again
            // (rxe `duplicate_request`: ACK with the PSN before the expected one).
            self.stats.duplicates_total += 1;
            self.respond(self.ack());
            return RxOutcome::Duplicate;
        }
        if distance > 0 {
            // IBTA 9.7.5.1.1: out of sequence: drop; one NAK per episode, until a packet with
            // the expected PSN arrives.
            self.stats.out_of_sequence_total += 1;
            if !self.nak_episode {
                self.nak_episode = true;
                self.stats.out_of_sequence_episodes_total += 1;
                self.respond(AckDescriptor {
                    syndrome: syndrome::NAK_PSN_SEQUENCE_ERROR,
                    msn: self.msn,
                    psn: self.expected_psn,
                });
            }
            return RxOutcome::OutOfSequence;
        }
        let Some(completes) = self.validate_and_apply(packet) else {
            self.stats.invalid_requests_total += 1;
            self.state = ResponderState::Error;
            self.respond(AckDescriptor {
                syndrome: syndrome::NAK_INVALID_REQUEST,
                msn: self.msn,
                psn: self.expected_psn,
            });
            return RxOutcome::InvalidRequest;
        };
        self.expected_psn = psn_add(self.expected_psn, 1);
        self.nak_episode = false;
        self.stats.packets_accepted_total += 1;
        self.stats.payload_bytes_received_total += u64::from(packet.payload_len);
        if let Some(reth) = completes {
            self.msn = psn_add(self.msn, 1);
            self.stats.messages_completed_total += 1;
            if self.delivered.len() == self.cfg.delivered_queue_capacity {
                self.delivered.pop_front();
                self.stats.delivered_overflow_total += 1;
            }
            if self.cfg.delivered_queue_capacity > 0 {
                self.delivered.push_back(DeliveredMessage {
                    msn: self.msn,
                    va: reth.va,
                    rkey: reth.rkey,
                    len: reth.dma_len,
                });
            }
        }
        self.packets_since_ack += 1;
        if packet.ack_req || self.packets_since_ack >= self.cfg.ack_coalesce_packets {
            self.packets_since_ack = 0;
            self.respond(self.ack());
        }
        RxOutcome::Accepted
    }

    /// A positive ACK of everything received in order.
    fn ack(&self) -> AckDescriptor {
        AckDescriptor {
            syndrome: syndrome::ACK_UNLIMITED_CREDITS,
            msn: self.msn,
            psn: psn_add(self.expected_psn, PSN_MASK), // expected - 1
        }
    }

    /// Queues a response, replacing an older one, except that an ACK which acknowledges nothing
    /// beyond a pending NAK does not replace the NAK (it would cancel the retransmit request).
    fn respond(&mut self, response: AckDescriptor) {
        if let Some(pending) = self.response {
            let pending_is_nak = !matches!(pending.kind(), AckKind::Ack { .. });
            let new_is_ack = matches!(response.kind(), AckKind::Ack { .. });
            self.stats.responses_coalesced_total += 1;
            if pending_is_nak && new_is_ack && psn_add(response.psn, 1) == pending.psn {
                return;
            }
        }
        self.response = Some(response);
    }

    /// Checks that an in-order packet continues the message stream correctly (IBTA 9.7.4.1.x;
    /// rxe `check_op_seq`, `check_length`) and applies it. Returns `None` if invalid, else
    /// `Some(Some(reth))` when it completes a message, `Some(None)` otherwise.
    #[allow(clippy::option_option)]
    fn validate_and_apply(&mut self, packet: &RxPacket) -> Option<Option<Reth>> {
        let pmtu = self.cfg.pmtu.bytes();
        let opcode = RcOpcode::from_value(packet.opcode)?;
        match (opcode, self.in_message) {
            (RcOpcode::RdmaWriteOnly, None) => {
                let reth = packet.reth?;
                (packet.payload_len == reth.dma_len && reth.dma_len <= pmtu).then_some(Some(reth))
            }
            (RcOpcode::RdmaWriteFirst, None) => {
                let reth = packet.reth?;
                if packet.payload_len != pmtu || reth.dma_len <= pmtu {
                    return None;
                }
                self.in_message = Some(InMessage {
                    reth,
                    received: pmtu,
                });
                Some(None)
            }
            (RcOpcode::RdmaWriteMiddle, Some(mut message)) => {
                let received = message.received.checked_add(pmtu)?;
                if packet.reth.is_some()
                    || packet.payload_len != pmtu
                    || received >= message.reth.dma_len
                {
                    return None;
                }
                message.received = received;
                self.in_message = Some(message);
                Some(None)
            }
            (RcOpcode::RdmaWriteLast, Some(message)) => {
                let received = message.received.checked_add(packet.payload_len)?;
                if packet.reth.is_some()
                    || packet.payload_len == 0
                    || packet.payload_len > pmtu
                    || received != message.reth.dma_len
                {
                    return None;
                }
                self.in_message = None;
                Some(Some(message.reth))
            }
            _ => None,
        }
    }
}
