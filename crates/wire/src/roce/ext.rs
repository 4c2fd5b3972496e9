//! Extended transport headers: RETH, AETH (IBTA Vol. 1 chapter 9; Linux `rxe_hdr.h`) and the body of the
//! RoCEv2 CNP (IBTA Annex A17: BTH with opcode 0x81 and BECN set, then 16 reserved bytes).

use super::bth::{BthPacket, BthRepr};
use super::{Opcode, DEFAULT_PKEY, MAX_24BIT};
use crate::{Error, Field};

/// Length of the RDMA Extended Transport Header.
pub const RETH_LEN: usize = 16;
/// Length of the ACK Extended Transport Header.
pub const AETH_LEN: usize = 4;
/// Length of the Immediate Data header.
pub const IMMDT_LEN: usize = 4;
/// Reserved bytes after the BTH of a CNP.
pub const CNP_RESERVED_LEN: usize = 16;
/// ACK credit count meaning "no credit information / unlimited" (rxe `AETH_ACK_UNLIMITED`).
pub const AETH_CREDIT_UNLIMITED: u8 = 0x1F;

mod reth_field {
    use crate::Field;
    pub const VA: Field = 0..8;
    pub const RKEY: Field = 8..12;
    pub const DMA_LEN: Field = 12..16;
}

mod aeth_field {
    use crate::Field;
    pub const SYNDROME: usize = 0;
    pub const MSN: Field = 1..4;
}

/// A read/write view of a RETH: virtual address, R_Key, DMA length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> RethPacket<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> RethPacket<T> {
        RethPacket { buffer }
    }

    /// Wraps a buffer and checks it holds 16 bytes.
    pub fn new_checked(buffer: T) -> Result<RethPacket<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 16 bytes.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < RETH_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Virtual address of the remote buffer.
    pub fn virtual_addr(&self) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.buffer.as_ref()[reth_field::VA]);
        u64::from_be_bytes(b)
    }

    fn u32_at(&self, f: Field) -> u32 {
        let b = &self.buffer.as_ref()[f];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// Remote key.
    pub fn rkey(&self) -> u32 {
        self.u32_at(reth_field::RKEY)
    }

    /// DMA length in bytes (the whole message for WRITE FIRST/ONLY and READ REQUEST).
    pub fn dma_len(&self) -> u32 {
        self.u32_at(reth_field::DMA_LEN)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> RethPacket<T> {
    /// Sets the virtual address.
    pub fn set_virtual_addr(&mut self, va: u64) {
        self.buffer.as_mut()[reth_field::VA].copy_from_slice(&va.to_be_bytes());
    }

    /// Sets the remote key.
    pub fn set_rkey(&mut self, rkey: u32) {
        self.buffer.as_mut()[reth_field::RKEY].copy_from_slice(&rkey.to_be_bytes());
    }

    /// Sets the DMA length.
    pub fn set_dma_len(&mut self, len: u32) {
        self.buffer.as_mut()[reth_field::DMA_LEN].copy_from_slice(&len.to_be_bytes());
    }
}

/// The fields of a RETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RethRepr {
    /// Virtual address.
    pub virtual_addr: u64,
    /// Remote key.
    pub rkey: u32,
    /// DMA length in bytes.
    pub dma_len: u32,
}

impl RethRepr {
    /// Reads a RETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &RethPacket<T>) -> Result<RethRepr, Error> {
        packet.check_len()?;
        Ok(RethRepr {
            virtual_addr: packet.virtual_addr(),
            rkey: packet.rkey(),
            dma_len: packet.dma_len(),
        })
    }

    /// Bytes `emit` writes: 16.
    pub const fn buffer_len(&self) -> usize {
        RETH_LEN
    }

    /// Writes the RETH. Panics if the view is shorter than 16 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut RethPacket<T>) {
        packet.set_virtual_addr(self.virtual_addr);
        packet.set_rkey(self.rkey);
        packet.set_dma_len(self.dma_len);
    }
}

enum_with_unknown! {
    /// NAK codes: the low five bits of an AETH syndrome of type NAK (IBTA Vol. 1 chapter 9, AETH;
    /// rxe `AETH_NAK_*`).
    pub enum NakCode(u8) {
        /// PSN sequence error (syndrome 0x60): the responder saw a gap, the requester must go back.
        PsnSequenceError = 0,
        /// Invalid request (0x61).
        InvalidRequest = 1,
        /// Remote access error (0x62).
        RemoteAccessError = 2,
        /// Remote operational error (0x63).
        RemoteOperationalError = 3,
        /// Invalid RD request (0x64).
        InvalidRdRequest = 4,
    }
}

/// An AETH syndrome, decoded (IBTA Vol. 1 chapter 9, AETH; rxe `AETH_TYPE_MASK` 0xE0). Conversion from `u8`
/// is lossless for every byte value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AethSyndrome {
    /// Type 000: ACK, low five bits = credit count ([`AETH_CREDIT_UNLIMITED`] = no credit information).
    Ack {
        /// Credit count, 0..=31.
        credit_count: u8,
    },
    /// Type 001: receiver not ready NAK, low five bits = RNR timer code.
    RnrNak {
        /// Encoded minimum RNR NAK timer, 0..=31.
        timer: u8,
    },
    /// Type 011: NAK with a code.
    Nak(NakCode),
    /// Type 010 or 1xx: reserved, carried as the raw syndrome byte.
    Reserved(u8),
}

impl From<u8> for AethSyndrome {
    fn from(raw: u8) -> Self {
        let low = raw & 0x1F;
        match raw >> 5 {
            0b000 => AethSyndrome::Ack { credit_count: low },
            0b001 => AethSyndrome::RnrNak { timer: low },
            0b011 => AethSyndrome::Nak(NakCode::from(low)),
            _ => AethSyndrome::Reserved(raw),
        }
    }
}

impl From<AethSyndrome> for u8 {
    fn from(syndrome: AethSyndrome) -> u8 {
        match syndrome {
            AethSyndrome::Ack { credit_count } => credit_count & 0x1F,
            AethSyndrome::RnrNak { timer } => 0x20 | (timer & 0x1F),
            AethSyndrome::Nak(code) => 0x60 | (u8::from(code) & 0x1F),
            AethSyndrome::Reserved(raw) => raw,
        }
    }
}

/// A read/write view of an AETH: syndrome and message sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AethPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> AethPacket<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> AethPacket<T> {
        AethPacket { buffer }
    }

    /// Wraps a buffer and checks it holds 4 bytes.
    pub fn new_checked(buffer: T) -> Result<AethPacket<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 4 bytes.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < AETH_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Raw syndrome byte.
    pub fn syndrome_raw(&self) -> u8 {
        self.buffer.as_ref()[aeth_field::SYNDROME]
    }

    /// Decoded syndrome.
    pub fn syndrome(&self) -> AethSyndrome {
        AethSyndrome::from(self.syndrome_raw())
    }

    /// Message sequence number (24 bits).
    pub fn msn(&self) -> u32 {
        let b = &self.buffer.as_ref()[aeth_field::MSN];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> AethPacket<T> {
    /// Sets the syndrome.
    pub fn set_syndrome(&mut self, syndrome: AethSyndrome) {
        self.buffer.as_mut()[aeth_field::SYNDROME] = syndrome.into();
    }

    /// Sets the MSN (masked to 24 bits).
    pub fn set_msn(&mut self, msn: u32) {
        let bytes = (msn & MAX_24BIT).to_be_bytes();
        self.buffer.as_mut()[aeth_field::MSN].copy_from_slice(&bytes[1..]);
    }
}

/// The fields of an AETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AethRepr {
    /// Syndrome: ACK, RNR NAK, NAK or reserved.
    pub syndrome: AethSyndrome,
    /// Message sequence number, 24 bits (masked on emit).
    pub msn: u32,
}

impl AethRepr {
    /// A positive ACK carrying `credit_count` (use [`AETH_CREDIT_UNLIMITED`] for none).
    pub const fn ack(msn: u32, credit_count: u8) -> AethRepr {
        AethRepr {
            syndrome: AethSyndrome::Ack { credit_count },
            msn,
        }
    }

    /// A receiver-not-ready NAK with the encoded `timer`.
    pub const fn rnr_nak(msn: u32, timer: u8) -> AethRepr {
        AethRepr {
            syndrome: AethSyndrome::RnrNak { timer },
            msn,
        }
    }

    /// A NAK with `code` (e.g. [`NakCode::PsnSequenceError`], syndrome 0x60).
    pub const fn nak(msn: u32, code: NakCode) -> AethRepr {
        AethRepr {
            syndrome: AethSyndrome::Nak(code),
            msn,
        }
    }

    /// A positive ACK.
    pub const fn is_ack(&self) -> bool {
        matches!(self.syndrome, AethSyndrome::Ack { .. })
    }

    /// A NAK or an RNR NAK.
    pub const fn is_nak(&self) -> bool {
        matches!(
            self.syndrome,
            AethSyndrome::Nak(_) | AethSyndrome::RnrNak { .. }
        )
    }

    /// Reads an AETH.
    pub fn parse<T: AsRef<[u8]>>(packet: &AethPacket<T>) -> Result<AethRepr, Error> {
        packet.check_len()?;
        Ok(AethRepr {
            syndrome: packet.syndrome(),
            msn: packet.msn(),
        })
    }

    /// Bytes `emit` writes: 4.
    pub const fn buffer_len(&self) -> usize {
        AETH_LEN
    }

    /// Writes the AETH. Panics if the view is shorter than 4 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut AethPacket<T>) {
        packet.set_syndrome(self.syndrome);
        packet.set_msn(self.msn);
    }
}

/// A RoCEv2 Congestion Notification Packet: BTH with opcode 0x81 and BECN = 1, then 16 reserved zero
/// bytes (IBTA Annex A17; scapy `cnp()`; the ConnectX-4 Lx capture of dcqcn-roce.md §4.4).
///
/// The DestQP is the QP of the reaction point that must slow down. Parse accepts any BECN value and any
/// reserved bytes (they are ignored, not checked); emit always writes BECN = 1, PSN 0 and zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CnpRepr {
    /// QP of the reaction point, 24 bits.
    pub dest_qp: u32,
    /// Partition key (real NICs send [`DEFAULT_PKEY`]).
    pub pkey: u16,
}

impl CnpRepr {
    /// Bytes of BTH + reserved.
    pub const LEN: usize = super::bth::HEADER_LEN + CNP_RESERVED_LEN;

    /// A CNP for `dest_qp` with the default partition key.
    pub const fn new(dest_qp: u32) -> CnpRepr {
        CnpRepr {
            dest_qp,
            pkey: DEFAULT_PKEY,
        }
    }

    /// Reads a CNP from a view over the BTH and what follows. `WrongOpcode` if the opcode is not 0x81,
    /// `Truncated` if fewer than 28 bytes.
    pub fn parse<T: AsRef<[u8]>>(packet: &BthPacket<T>) -> Result<CnpRepr, Error> {
        packet.check_len()?;
        if packet.opcode() != Opcode::Cnp {
            return Err(Error::WrongOpcode);
        }
        if packet.payload().len() < CNP_RESERVED_LEN {
            return Err(Error::Truncated);
        }
        Ok(CnpRepr {
            dest_qp: packet.dest_qp(),
            pkey: packet.pkey(),
        })
    }

    /// The BTH a CNP carries.
    pub const fn bth(&self) -> BthRepr {
        BthRepr {
            opcode: Opcode::Cnp,
            solicited_event: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: self.pkey,
            fecn: false,
            becn: true,
            dest_qp: self.dest_qp,
            ack_req: false,
            psn: 0,
        }
    }

    /// Bytes `emit` writes: 28.
    pub const fn buffer_len(&self) -> usize {
        Self::LEN
    }

    /// Writes BTH + 16 zero bytes. Panics if the view is shorter than 28 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut BthPacket<T>) {
        self.bth().emit(packet);
        packet.payload_mut()[..CNP_RESERVED_LEN].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reth_vector3() {
        // dcqcn-roce.md §4.4 vector 3: va 0x00007f7e91000000, rkey 0x01709a33, len 128.
        let bytes = [
            0x00, 0x00, 0x7f, 0x7e, 0x91, 0x00, 0x00, 0x00, 0x01, 0x70, 0x9a, 0x33, 0x00, 0x00,
            0x00, 0x80,
        ];
        let repr = RethRepr::parse(&RethPacket::new_checked(&bytes[..]).unwrap()).unwrap();
        assert_eq!(
            repr,
            RethRepr {
                virtual_addr: 0x0000_7f7e_9100_0000,
                rkey: 0x0170_9a33,
                dma_len: 128
            }
        );
        let mut out = [0u8; 16];
        repr.emit(&mut RethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, bytes);
        assert_eq!(
            RethPacket::new_checked(&bytes[..15]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn aeth_syndromes() {
        assert_eq!(
            AethSyndrome::from(0x1F),
            AethSyndrome::Ack {
                credit_count: AETH_CREDIT_UNLIMITED
            }
        );
        assert_eq!(
            AethSyndrome::from(0x00),
            AethSyndrome::Ack { credit_count: 0 }
        );
        assert_eq!(
            AethSyndrome::from(0x2E),
            AethSyndrome::RnrNak { timer: 0x0E }
        );
        assert_eq!(
            AethSyndrome::from(0x60),
            AethSyndrome::Nak(NakCode::PsnSequenceError)
        );
        assert_eq!(
            AethSyndrome::from(0x61),
            AethSyndrome::Nak(NakCode::InvalidRequest)
        );
        assert_eq!(
            AethSyndrome::from(0x62),
            AethSyndrome::Nak(NakCode::RemoteAccessError)
        );
        assert_eq!(
            AethSyndrome::from(0x63),
            AethSyndrome::Nak(NakCode::RemoteOperationalError)
        );
        assert_eq!(
            AethSyndrome::from(0x65),
            AethSyndrome::Nak(NakCode::Unknown(5))
        );
        assert_eq!(AethSyndrome::from(0x40), AethSyndrome::Reserved(0x40));
        assert_eq!(AethSyndrome::from(0x9F), AethSyndrome::Reserved(0x9F));
        for raw in 0..=255u8 {
            assert_eq!(u8::from(AethSyndrome::from(raw)), raw);
        }
        assert_eq!(
            u8::from(AethRepr::nak(0, NakCode::PsnSequenceError).syndrome),
            0x60
        );
        assert!(AethRepr::ack(1, 3).is_ack() && !AethRepr::ack(1, 3).is_nak());
        assert!(
            AethRepr::rnr_nak(1, 3).is_nak() && AethRepr::nak(1, NakCode::InvalidRequest).is_nak()
        );

        let mut out = [0u8; 4];
        AethRepr::ack(0x0012_3456, AETH_CREDIT_UNLIMITED)
            .emit(&mut AethPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, [0x1F, 0x12, 0x34, 0x56]);
        assert_eq!(
            AethPacket::new_checked(&out[..3]).unwrap_err(),
            Error::Truncated
        );
    }

    #[test]
    fn cnp_vector1_layout() {
        // dcqcn-roce.md §4.4 vector 1: BTH 8100ffff 40000118 00000000 + 16 zero bytes.
        let mut out = [0xAAu8; 28];
        CnpRepr::new(0x118).emit(&mut BthPacket::new_unchecked(&mut out[..]));
        let mut expected = [0u8; 28];
        expected[..12]
            .copy_from_slice(&[0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0, 0, 0, 0]);
        assert_eq!(out, expected);
        let parsed = CnpRepr::parse(&BthPacket::new_checked(&out[..]).unwrap()).unwrap();
        assert_eq!(parsed, CnpRepr::new(0x118));
        assert_eq!(
            CnpRepr::parse(&BthPacket::new_checked(&out[..27]).unwrap()),
            Err(Error::Truncated)
        );
        out[0] = 0x11;
        assert_eq!(
            CnpRepr::parse(&BthPacket::new_checked(&out[..]).unwrap()),
            Err(Error::WrongOpcode)
        );
    }

    proptest! {
        #[test]
        fn reth_round_trip(virtual_addr in any::<u64>(), rkey in any::<u32>(), dma_len in any::<u32>()) {
            let repr = RethRepr { virtual_addr, rkey, dma_len };
            let mut buf = [0u8; RETH_LEN];
            repr.emit(&mut RethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(RethRepr::parse(&RethPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn aeth_round_trip(raw in any::<u8>(), msn in 0u32..=MAX_24BIT) {
            let repr = AethRepr { syndrome: AethSyndrome::from(raw), msn };
            let mut buf = [0u8; AETH_LEN];
            repr.emit(&mut AethPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(buf[0], raw);
            prop_assert_eq!(AethRepr::parse(&AethPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn cnp_round_trip(dest_qp in 0u32..=MAX_24BIT, pkey in any::<u16>(), junk in any::<u8>()) {
            let repr = CnpRepr { dest_qp, pkey };
            let mut buf = [junk; CnpRepr::LEN];
            repr.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
            let packet = BthPacket::new_checked(&buf[..]).unwrap();
            prop_assert!(packet.becn());
            prop_assert!(packet.payload().iter().all(|&b| b == 0));
            prop_assert_eq!(CnpRepr::parse(&packet), Ok(repr));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let _ = RethRepr::parse(&RethPacket::new_unchecked(&bytes[..]));
            let _ = AethRepr::parse(&AethPacket::new_unchecked(&bytes[..]));
            let _ = CnpRepr::parse(&BthPacket::new_unchecked(&bytes[..]));
        }
    }
}
