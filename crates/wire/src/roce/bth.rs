//! The InfiniBand Base Transport Header (IBTA Vol. 1 §9.2; Linux `rxe_hdr.h`), 12 bytes big-endian.

use super::{Opcode, MAX_24BIT};
use crate::{Error, Field, Rest};

/// Field offsets of the BTH (dcqcn-roce.md §4.2).
pub mod field {
    use crate::{Field, Rest};
    /// OpCode.
    pub const OPCODE: usize = 0;
    /// SE (0x80), M (0x40), PadCnt (0x30), TVer (0x0F).
    pub const FLAGS: usize = 1;
    /// Partition key.
    pub const PKEY: Field = 2..4;
    /// FECN (0x80), BECN (0x40), reserved (0x3F). Masked in full in the ICRC.
    pub const FECN_BECN: usize = 4;
    /// Destination QP, 24 bits.
    pub const DEST_QP: Field = 5..8;
    /// AckReq (0x80) and 7 reserved bits.
    pub const ACK_REQ: usize = 8;
    /// Packet sequence number, 24 bits.
    pub const PSN: Field = 9..12;
    /// Extended headers and payload.
    pub const PAYLOAD: Rest = 12..;
}

/// Length of the BTH.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

const SE: u8 = 0x80;
const MIG_REQ: u8 = 0x40;
const PAD_SHIFT: u8 = 4;
const PAD_MASK: u8 = 0x30;
const TVER_MASK: u8 = 0x0F;
const FECN: u8 = 0x80;
const BECN: u8 = 0x40;
const ACK_REQ: u8 = 0x80;

/// A read/write view of a BTH and what follows it (the UDP payload of a RoCEv2 packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BthPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> BthPacket<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> BthPacket<T> {
        BthPacket { buffer }
    }

    /// Wraps a buffer and checks it holds a BTH.
    pub fn new_checked(buffer: T) -> Result<BthPacket<T>, Error> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// `Err(Truncated)` if the buffer is shorter than 12 bytes.
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn byte(&self, index: usize) -> u8 {
        self.buffer.as_ref()[index]
    }

    fn u24_at(&self, f: Field) -> u32 {
        let b = &self.buffer.as_ref()[f];
        u32::from_be_bytes([0, b[0], b[1], b[2]])
    }

    /// OpCode.
    pub fn opcode(&self) -> Opcode {
        Opcode::from(self.byte(field::OPCODE))
    }

    /// Solicited Event.
    pub fn solicited_event(&self) -> bool {
        self.byte(field::FLAGS) & SE != 0
    }

    /// MigReq.
    pub fn mig_req(&self) -> bool {
        self.byte(field::FLAGS) & MIG_REQ != 0
    }

    /// PadCnt: pad bytes (0..=3) between the payload and the ICRC.
    pub fn pad_count(&self) -> u8 {
        (self.byte(field::FLAGS) & PAD_MASK) >> PAD_SHIFT
    }

    /// Transport header version (0 today).
    pub fn tver(&self) -> u8 {
        self.byte(field::FLAGS) & TVER_MASK
    }

    /// Partition key.
    pub fn pkey(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::PKEY];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Forward ECN (set by a congested switch on InfiniBand; RoCEv2 uses IP ECN instead).
    pub fn fecn(&self) -> bool {
        self.byte(field::FECN_BECN) & FECN != 0
    }

    /// Backward ECN (set in CNPs).
    pub fn becn(&self) -> bool {
        self.byte(field::FECN_BECN) & BECN != 0
    }

    /// The six reserved bits after FECN/BECN (resv6a).
    pub fn reserved6(&self) -> u8 {
        self.byte(field::FECN_BECN) & 0x3F
    }

    /// Destination QP number (24 bits).
    pub fn dest_qp(&self) -> u32 {
        self.u24_at(field::DEST_QP)
    }

    /// AckReq.
    pub fn ack_req(&self) -> bool {
        self.byte(field::ACK_REQ) & ACK_REQ != 0
    }

    /// The seven reserved bits after AckReq (resv7).
    pub fn reserved7(&self) -> u8 {
        self.byte(field::ACK_REQ) & 0x7F
    }

    /// Packet sequence number (24 bits).
    pub fn psn(&self) -> u32 {
        self.u24_at(field::PSN)
    }

    /// What follows the BTH: extended headers, payload, pad and ICRC.
    pub fn payload(&self) -> &[u8] {
        let rest: Rest = field::PAYLOAD;
        &self.buffer.as_ref()[rest]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> BthPacket<T> {
    fn set_flag(&mut self, index: usize, mask: u8, on: bool) {
        let b = &mut self.buffer.as_mut()[index];
        if on {
            *b |= mask;
        } else {
            *b &= !mask;
        }
    }

    fn set_u24_at(&mut self, f: Field, value: u32) {
        let bytes = (value & MAX_24BIT).to_be_bytes();
        self.buffer.as_mut()[f].copy_from_slice(&bytes[1..]);
    }

    /// Sets the OpCode.
    pub fn set_opcode(&mut self, opcode: Opcode) {
        self.buffer.as_mut()[field::OPCODE] = opcode.into();
    }

    /// Sets Solicited Event.
    pub fn set_solicited_event(&mut self, on: bool) {
        self.set_flag(field::FLAGS, SE, on);
    }

    /// Sets MigReq.
    pub fn set_mig_req(&mut self, on: bool) {
        self.set_flag(field::FLAGS, MIG_REQ, on);
    }

    /// Sets PadCnt (masked to 2 bits).
    pub fn set_pad_count(&mut self, pad: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !PAD_MASK) | ((pad << PAD_SHIFT) & PAD_MASK);
    }

    /// Sets TVer (masked to 4 bits).
    pub fn set_tver(&mut self, tver: u8) {
        let b = &mut self.buffer.as_mut()[field::FLAGS];
        *b = (*b & !TVER_MASK) | (tver & TVER_MASK);
    }

    /// Sets the partition key.
    pub fn set_pkey(&mut self, pkey: u16) {
        self.buffer.as_mut()[field::PKEY].copy_from_slice(&pkey.to_be_bytes());
    }

    /// Sets FECN.
    pub fn set_fecn(&mut self, on: bool) {
        self.set_flag(field::FECN_BECN, FECN, on);
    }

    /// Sets BECN.
    pub fn set_becn(&mut self, on: bool) {
        self.set_flag(field::FECN_BECN, BECN, on);
    }

    /// Sets the destination QP (masked to 24 bits).
    pub fn set_dest_qp(&mut self, qpn: u32) {
        self.set_u24_at(field::DEST_QP, qpn);
    }

    /// Sets AckReq.
    pub fn set_ack_req(&mut self, on: bool) {
        self.set_flag(field::ACK_REQ, ACK_REQ, on);
    }

    /// Sets the PSN (masked to 24 bits).
    pub fn set_psn(&mut self, psn: u32) {
        self.set_u24_at(field::PSN, psn);
    }

    /// What follows the BTH, mutable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// The fields of a BTH. Reserved bits are ignored on parse and written as zero on emit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BthRepr {
    /// OpCode.
    pub opcode: Opcode,
    /// Solicited Event.
    pub solicited_event: bool,
    /// MigReq.
    pub mig_req: bool,
    /// PadCnt, 0..=3 (masked on emit).
    pub pad_count: u8,
    /// Transport header version, 0..=15 (masked on emit). Carried, not checked: IBTA receivers drop
    /// TVer != 0, which is the consumer's decision.
    pub tver: u8,
    /// Partition key.
    pub pkey: u16,
    /// Forward ECN.
    pub fecn: bool,
    /// Backward ECN.
    pub becn: bool,
    /// Destination QP, 24 bits (masked on emit).
    pub dest_qp: u32,
    /// AckReq.
    pub ack_req: bool,
    /// PSN, 24 bits (masked on emit).
    pub psn: u32,
}

impl BthRepr {
    /// Reads a BTH (only the length is checked).
    pub fn parse<T: AsRef<[u8]>>(packet: &BthPacket<T>) -> Result<BthRepr, Error> {
        packet.check_len()?;
        Ok(BthRepr {
            opcode: packet.opcode(),
            solicited_event: packet.solicited_event(),
            mig_req: packet.mig_req(),
            pad_count: packet.pad_count(),
            tver: packet.tver(),
            pkey: packet.pkey(),
            fecn: packet.fecn(),
            becn: packet.becn(),
            dest_qp: packet.dest_qp(),
            ack_req: packet.ack_req(),
            psn: packet.psn(),
        })
    }

    /// Bytes `emit` writes: 12.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the 12-byte BTH, reserved bits zero. Panics if the view is shorter than 12 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut BthPacket<T>) {
        let buf = packet.buffer.as_mut();
        buf[field::FLAGS] = 0;
        buf[field::FECN_BECN] = 0;
        buf[field::ACK_REQ] = 0;
        packet.set_opcode(self.opcode);
        packet.set_solicited_event(self.solicited_event);
        packet.set_mig_req(self.mig_req);
        packet.set_pad_count(self.pad_count);
        packet.set_tver(self.tver);
        packet.set_pkey(self.pkey);
        packet.set_fecn(self.fecn);
        packet.set_becn(self.becn);
        packet.set_dest_qp(self.dest_qp);
        packet.set_ack_req(self.ack_req);
        packet.set_psn(self.psn);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reads_vector_bths() {
        // dcqcn-roce.md §4.4 vector 1 (CNP): 81 00 ffff 40 000118 00 000000
        let cnp = [
            0x81, 0x00, 0xff, 0xff, 0x40, 0x00, 0x01, 0x18, 0x00, 0x00, 0x00, 0x00,
        ];
        let repr = BthRepr::parse(&BthPacket::new_checked(&cnp[..]).unwrap()).unwrap();
        assert_eq!(repr.opcode, Opcode::Cnp);
        assert!(repr.becn && !repr.fecn && !repr.ack_req && !repr.solicited_event);
        assert_eq!((repr.pkey, repr.dest_qp, repr.psn), (0xFFFF, 0x118, 0));

        // Vector 3 (RC WRITE ONLY): 0a 80 0000 00 000002 80 000000
        let write = [
            0x0a, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x80, 0x00, 0x00, 0x00,
        ];
        let repr = BthRepr::parse(&BthPacket::new_checked(&write[..]).unwrap()).unwrap();
        assert_eq!(repr.opcode, Opcode::RdmaWriteOnly);
        assert!(repr.solicited_event && repr.ack_req && !repr.mig_req);
        assert_eq!(
            (repr.pkey, repr.dest_qp, repr.psn, repr.pad_count),
            (0, 2, 0, 0)
        );

        // Vector 2 (UC SEND_ONLY): opcode 0x24, MigReq, PadCnt 2, QP 211, PSN 13571856.
        let send = [
            0x24, 0x60, 0xff, 0xff, 0x00, 0x00, 0x00, 0xd3, 0x00, 0xcf, 0x17, 0x10,
        ];
        let repr = BthRepr::parse(&BthPacket::new_checked(&send[..]).unwrap()).unwrap();
        assert_eq!(repr.opcode, Opcode::Unknown(0x24));
        assert!(repr.mig_req);
        assert_eq!(
            (repr.pad_count, repr.dest_qp, repr.psn),
            (2, 211, 13_571_856)
        );
    }

    #[test]
    fn reserved_bits_are_readable_but_ignored() {
        let bytes = [0x11, 0x0f, 0, 0, 0x3f, 0, 0, 1, 0x7f, 0, 0, 1];
        let p = BthPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.tver(), p.reserved6(), p.reserved7()), (0x0f, 0x3f, 0x7f));
        let repr = BthRepr::parse(&p).unwrap();
        assert!(!repr.fecn && !repr.becn && !repr.ack_req);
        let mut out = [0xFFu8; 12];
        repr.emit(&mut BthPacket::new_unchecked(&mut out[..]));
        assert_eq!(out, [0x11, 0x0f, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1]);
        assert_eq!(
            BthPacket::new_checked(&bytes[..11]).unwrap_err(),
            Error::Truncated
        );
    }

    pub(crate) fn any_bth() -> impl Strategy<Value = BthRepr> {
        (
            any::<u8>(),
            any::<[bool; 5]>(),
            0u8..4,
            0u8..16,
            any::<u16>(),
            0u32..=MAX_24BIT,
            0u32..=MAX_24BIT,
        )
            .prop_map(
                |(opcode, [se, m, fecn, becn, ack], pad, tver, pkey, qp, psn)| BthRepr {
                    opcode: Opcode::from(opcode),
                    solicited_event: se,
                    mig_req: m,
                    pad_count: pad,
                    tver,
                    pkey,
                    fecn,
                    becn,
                    dest_qp: qp,
                    ack_req: ack,
                    psn,
                },
            )
    }

    proptest! {
        #[test]
        fn repr_round_trip(repr in any_bth(), junk in any::<u8>()) {
            let mut buf = [junk; HEADER_LEN];
            repr.emit(&mut BthPacket::new_unchecked(&mut buf[..]));
            prop_assert_eq!(BthRepr::parse(&BthPacket::new_checked(&buf[..]).unwrap()), Ok(repr));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..40)) {
            let p = BthPacket::new_unchecked(&bytes[..]);
            if p.check_len().is_ok() {
                let _ = (p.payload(), p.reserved6(), p.reserved7(), p.opcode().ext_headers());
            }
            let _ = BthRepr::parse(&p);
        }
    }
}
