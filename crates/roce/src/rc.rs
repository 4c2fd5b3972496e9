//! Reliable Connected (RC) transport for RDMA WRITE: what the traffic tool needs to prove that a
//! fabric is lossless (or to show what loss costs).
//!
//! * [`Requester`] segments posted RDMA WRITE messages into FIRST / MIDDLE / LAST / ONLY packets
//!   by path MTU, numbers them with 24-bit PSNs, keeps at most a window of unacknowledged packets,
//!   asks for ACKs (the A bit), handles coalesced ACKs, retransmits go-back-N on a PSN-sequence-
//!   error NAK or on its retransmission timeout, and completes messages.
//! * [`Responder`] checks PSN order, accepts in-order packets (re-assembling messages against
//!   their RETH length), re-ACKs duplicates, sends one NAK per out-of-sequence episode and drops
//!   until the expected PSN arrives, coalesces ACKs and tracks the MSN.
//!
//! Both exchange small descriptors ([`TxPacket`], [`RxPacket`], [`AckDescriptor`]); the binary
//! turns them into bytes with `headroom-wire` (BTH, RETH, AETH, ICRC).
//!
//! References: IBTA Vol. 1 ch. 9.7 (reliable service: 9.7.1 PSN, 9.7.5.1 responder PSN checks,
//! 9.7.5.2 coalesced ACKs and NAKs), and Linux rxe (`rxe_req.c`, `rxe_resp.c`, `rxe_comp.c`) for
//! the A-bit rule (last packet of a message, and at least every 64 packets) and the rule that
//! FIRST/MIDDLE payloads equal the path MTU (`dcqcn-roce.md` §4.3).

mod requester;
mod responder;

pub use requester::{
    Completion, PostError, Requester, RequesterConfig, RequesterError, RequesterState,
    RequesterStats,
};
pub use responder::{
    DeliveredMessage, Responder, ResponderConfig, ResponderConfigError, ResponderState,
    ResponderStats, RxOutcome,
};

use core::fmt;

/// Mask of a 24-bit PSN (and of a QPN or an MSN).
pub const PSN_MASK: u32 = 0x00FF_FFFF;

/// Half the PSN space: PSNs less than this far behind the expected PSN are duplicates, less than
/// this far ahead are out of sequence (IBTA 9.7.5.1.2), so a requester may never have this many
/// packets outstanding.
pub const PSN_HALF_RANGE: u32 = 1 << 23;

/// Largest RDMA message, 2^31 bytes (IBTA: the RETH DMA length limit of 2^31).
pub const MESSAGE_LEN_MAX: u32 = 1 << 31;

/// `psn + n` modulo 2^24.
#[must_use]
pub const fn psn_add(psn: u32, n: u32) -> u32 {
    psn.wrapping_add(n) & PSN_MASK
}

/// The signed distance from `from` to `to` in the 24-bit PSN space, in
/// `-2^23 ..= 2^23 - 1`: positive when `to` is ahead of `from`.
#[must_use]
pub const fn psn_distance(from: u32, to: u32) -> i32 {
    let forward = to.wrapping_sub(from) & PSN_MASK;
    if forward >= PSN_HALF_RANGE {
        forward as i32 - (1 << 24)
    } else {
        forward as i32
    }
}

/// The RC opcodes this module sends or receives (`include/rdma/ib_pack.h`, `dcqcn-roce.md`
/// §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum RcOpcode {
    /// RDMA WRITE First (carries a RETH).
    RdmaWriteFirst = 0x06,
    /// RDMA WRITE Middle.
    RdmaWriteMiddle = 0x07,
    /// RDMA WRITE Last.
    RdmaWriteLast = 0x08,
    /// RDMA WRITE Only (carries a RETH).
    RdmaWriteOnly = 0x0A,
    /// Acknowledge (carries an AETH).
    Acknowledge = 0x11,
}

impl RcOpcode {
    /// The BTH opcode byte.
    #[must_use]
    pub const fn value(self) -> u8 {
        self as u8
    }

    /// The opcode for a BTH opcode byte, if this module knows it.
    #[must_use]
    pub const fn from_value(value: u8) -> Option<Self> {
        match value {
            0x06 => Some(Self::RdmaWriteFirst),
            0x07 => Some(Self::RdmaWriteMiddle),
            0x08 => Some(Self::RdmaWriteLast),
            0x0A => Some(Self::RdmaWriteOnly),
            0x11 => Some(Self::Acknowledge),
            _ => None,
        }
    }

    /// Whether the packet carries a RETH.
    #[must_use]
    pub const fn has_reth(self) -> bool {
        matches!(self, Self::RdmaWriteFirst | Self::RdmaWriteOnly)
    }
}

/// The InfiniBand path MTUs (IBTA: 256 to 4096 bytes of payload per packet).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum PathMtu {
    /// 256 bytes.
    Mtu256,
    /// 512 bytes.
    Mtu512,
    /// 1024 bytes (the usual RoCE default on 1500-byte Ethernet).
    #[default]
    Mtu1024,
    /// 2048 bytes.
    Mtu2048,
    /// 4096 bytes (needs jumbo frames).
    Mtu4096,
}

impl PathMtu {
    /// Payload bytes per packet.
    #[must_use]
    pub const fn bytes(self) -> u32 {
        match self {
            Self::Mtu256 => 256,
            Self::Mtu512 => 512,
            Self::Mtu1024 => 1024,
            Self::Mtu2048 => 2048,
            Self::Mtu4096 => 4096,
        }
    }

    /// The path MTU of `bytes`, if it is one.
    #[must_use]
    pub const fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Self::Mtu256),
            512 => Some(Self::Mtu512),
            1024 => Some(Self::Mtu1024),
            2048 => Some(Self::Mtu2048),
            4096 => Some(Self::Mtu4096),
            _ => None,
        }
    }

    /// Packets a message of `len` bytes takes (a zero-length message still takes one).
    #[must_use]
    pub const fn packets_for(self, len: u32) -> u32 {
        if len == 0 {
            1
        } else {
            len.div_ceil(self.bytes())
        }
    }
}

/// RDMA Extended Transport Header fields (16 bytes on the wire: `va`, `rkey`, `dma_len`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Reth {
    /// Remote virtual address of the message.
    pub va: u64,
    /// Remote key.
    pub rkey: u32,
    /// Length of the whole message.
    pub dma_len: u32,
}

/// A request packet the [`Requester`] wants sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TxPacket {
    /// BTH opcode.
    pub opcode: RcOpcode,
    /// BTH PSN (24 bits).
    pub psn: u32,
    /// BTH A bit (AckReq).
    pub ack_req: bool,
    /// Payload bytes (before padding to 4).
    pub payload_len: u32,
    /// RETH, on FIRST and ONLY.
    pub reth: Option<Reth>,
    /// Where this payload starts within the message (to fill it with a checkable pattern).
    pub message_offset: u32,
    /// The work request the packet belongs to.
    pub wr_id: u64,
    /// Whether this PSN was sent before (a go-back-N retransmission).
    pub retransmission: bool,
}

/// A request packet as the [`Responder`] receives it (from the wire: the opcode is a raw byte).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxPacket {
    /// BTH opcode byte.
    pub opcode: u8,
    /// BTH PSN (only the low 24 bits count).
    pub psn: u32,
    /// BTH A bit.
    pub ack_req: bool,
    /// Payload bytes (after removing the pad).
    pub payload_len: u32,
    /// RETH, if the packet carried one.
    pub reth: Option<Reth>,
}

impl From<&TxPacket> for RxPacket {
    fn from(p: &TxPacket) -> Self {
        Self {
            opcode: p.opcode.value(),
            psn: p.psn,
            ack_req: p.ack_req,
            payload_len: p.payload_len,
            reth: p.reth,
        }
    }
}

/// AETH syndrome values (`rxe_hdr.h`, IBTA 9.7.5.2.x).
pub mod syndrome {
    /// Mask of the syndrome type bits.
    pub const TYPE_MASK: u8 = 0xE0;
    /// Type: ACK (low 5 bits: credit count).
    pub const TYPE_ACK: u8 = 0x00;
    /// Type: RNR NAK (low 5 bits: timer).
    pub const TYPE_RNR_NAK: u8 = 0x20;
    /// Type: NAK (low 5 bits: code).
    pub const TYPE_NAK: u8 = 0x60;
    /// ACK with "unlimited" credits (`AETH_ACK_UNLIMITED`), what a responder without
    /// end-to-end credits sends.
    pub const ACK_UNLIMITED_CREDITS: u8 = 0x1F;
    /// NAK: PSN sequence error.
    pub const NAK_PSN_SEQUENCE_ERROR: u8 = 0x60;
    /// NAK: invalid request.
    pub const NAK_INVALID_REQUEST: u8 = 0x61;
    /// NAK: remote access error.
    pub const NAK_REMOTE_ACCESS_ERROR: u8 = 0x62;
    /// NAK: remote operational error.
    pub const NAK_REMOTE_OPERATIONAL_ERROR: u8 = 0x63;
}

/// What an AETH syndrome means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AckKind {
    /// Positive acknowledgement, with its credit field.
    Ack {
        /// Credit count (0x1F: unlimited).
        credits: u8,
    },
    /// Receiver not ready NAK, with its timer field.
    RnrNak {
        /// RNR timer code.
        timer: u8,
    },
    /// PSN sequence error NAK: retransmit from the PSN.
    PsnSequenceError,
    /// Any other NAK (invalid request, remote access or operational error, ...): fatal.
    FatalNak(u8),
    /// A reserved syndrome.
    Reserved(u8),
}

/// An ACK or NAK: the responder's output and the requester's input (BTH PSN, AETH syndrome and
/// MSN).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckDescriptor {
    /// AETH syndrome byte.
    pub syndrome: u8,
    /// AETH MSN (24 bits): messages the responder has completed.
    pub msn: u32,
    /// BTH PSN: for an ACK, the last PSN received in order; for a NAK, the expected PSN.
    pub psn: u32,
}

impl AckDescriptor {
    /// What the syndrome means.
    #[must_use]
    pub const fn kind(&self) -> AckKind {
        let low = self.syndrome & 0x1F;
        match self.syndrome & syndrome::TYPE_MASK {
            syndrome::TYPE_ACK => AckKind::Ack { credits: low },
            syndrome::TYPE_RNR_NAK => AckKind::RnrNak { timer: low },
            syndrome::TYPE_NAK if low == 0 => AckKind::PsnSequenceError,
            syndrome::TYPE_NAK => AckKind::FatalNak(self.syndrome),
            _ => AckKind::Reserved(self.syndrome),
        }
    }

    /// The opcode of the packet that carries it.
    #[must_use]
    pub const fn opcode(&self) -> RcOpcode {
        RcOpcode::Acknowledge
    }
}

impl fmt::Display for AckDescriptor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} psn {:#08x} msn {}",
            self.kind(),
            self.psn,
            self.msn
        )
    }
}

#[cfg(test)]
mod tests;
