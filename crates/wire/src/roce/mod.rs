//! RoCEv2 (InfiniBand transport over UDP/IP, IBTA Vol. 1 Annex A17): the Base Transport Header and the
//! extended transport headers a switch and a traffic generator need (RETH, AETH, ImmDt, CNP), the
//! invariant CRC, a one-shot packet parser and a no-allocation packet builder.
//!
//! Wire layout (dcqcn-roce.md §4.1): Ethernet [802.1Q] | IPv4/IPv6 | UDP (dport 4791) | BTH (12) |
//! extended headers | payload | pad (0..3, BTH PadCnt) | ICRC (4, least significant byte first).

mod bth;
mod ext;
mod icrc;
mod packet;

pub use bth::{field as bth_field, BthPacket, BthRepr, HEADER_LEN as BTH_LEN};
pub use ext::{
    AethPacket, AethRepr, AethSyndrome, CnpRepr, NakCode, RethPacket, RethRepr,
    AETH_CREDIT_UNLIMITED, AETH_LEN, CNP_RESERVED_LEN, IMMDT_LEN, RETH_LEN,
};
pub use icrc::{compute_icrc, fill_icrc, verify_icrc, verify_icrc_frame, ICRC_LEN};
pub use packet::{parse_rocev2, ExtRepr, RoceIpRepr, RoceV2Headers, RoceV2PacketRepr};

/// UDP destination port of RoCEv2 (IANA "roce", IBTA Vol. 1 Annex A17; rxe `ROCE_V2_UDP_DPORT`).
pub const ROCEV2_UDP_PORT: u16 = 4791;

/// Default partition key (full-membership default partition; rxe `BTH_DEF_PKEY`).
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// Largest value of the 24-bit DestQP and PSN fields.
pub const MAX_24BIT: u32 = 0x00FF_FFFF;

enum_with_unknown! {
    /// BTH opcodes (IBTA Vol. 1 §9.2, table 38; Linux `include/rdma/ib_pack.h`). The named ones are the
    /// Reliable Connected (RC) opcodes plus the RoCEv2 CNP; every other value (UC = RC + 0x20, UD, RD,
    /// XRC, reserved) is carried as `Unknown(raw)`, and [`Opcode::ext_headers`] still knows the UC and UD
    /// layouts.
    pub enum Opcode(u8) {
        /// RC SEND First.
        SendFirst = 0x00,
        /// RC SEND Middle.
        SendMiddle = 0x01,
        /// RC SEND Last.
        SendLast = 0x02,
        /// RC SEND Last with Immediate (ImmDt).
        SendLastWithImmediate = 0x03,
        /// RC SEND Only.
        SendOnly = 0x04,
        /// RC SEND Only with Immediate (ImmDt).
        SendOnlyWithImmediate = 0x05,
        /// RC RDMA WRITE First (RETH).
        RdmaWriteFirst = 0x06,
        /// RC RDMA WRITE Middle.
        RdmaWriteMiddle = 0x07,
        /// RC RDMA WRITE Last.
        RdmaWriteLast = 0x08,
        /// RC RDMA WRITE Last with Immediate (ImmDt).
        RdmaWriteLastWithImmediate = 0x09,
        /// RC RDMA WRITE Only (RETH).
        RdmaWriteOnly = 0x0A,
        /// RC RDMA WRITE Only with Immediate (RETH + ImmDt).
        RdmaWriteOnlyWithImmediate = 0x0B,
        /// RC RDMA READ Request (RETH).
        RdmaReadRequest = 0x0C,
        /// RC RDMA READ Response First (AETH).
        RdmaReadResponseFirst = 0x0D,
        /// RC RDMA READ Response Middle.
        RdmaReadResponseMiddle = 0x0E,
        /// RC RDMA READ Response Last (AETH).
        RdmaReadResponseLast = 0x0F,
        /// RC RDMA READ Response Only (AETH).
        RdmaReadResponseOnly = 0x10,
        /// RC Acknowledge (AETH).
        Acknowledge = 0x11,
        /// RC ATOMIC Acknowledge (AETH + AtomicAckETH).
        AtomicAcknowledge = 0x12,
        /// RC CmpSwap (AtomicETH).
        CompareSwap = 0x13,
        /// RC FetchAdd (AtomicETH).
        FetchAdd = 0x14,
        /// RC SEND Last with Invalidate (IETH).
        SendLastWithInvalidate = 0x16,
        /// RC SEND Only with Invalidate (IETH).
        SendOnlyWithInvalidate = 0x17,
        /// RoCEv2 Congestion Notification Packet (IBTA Annex A17; 16 reserved bytes follow the BTH).
        Cnp = 0x81,
    }
}

/// The transport service of an opcode: its three high bits (IBTA Vol. 1 §9.2, table 38).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Transport {
    /// Reliable Connected, 0x00..=0x1F.
    Rc,
    /// Unreliable Connected, 0x20..=0x3F.
    Uc,
    /// Reliable Datagram, 0x40..=0x5F.
    Rd,
    /// Unreliable Datagram, 0x60..=0x7F.
    Ud,
    /// Congestion notification, 0x80..=0x9F.
    Cnp,
    /// Extended Reliable Connected, 0xA0..=0xBF.
    Xrc,
    /// Manufacturer-specific or reserved, 0xC0..=0xFF.
    Other,
}

/// Which extended transport headers follow the BTH, in IBTA order (Vol. 1 §9.2: DETH, RETH,
/// AtomicETH, AETH, AtomicAckETH, ImmDt, IETH), plus the 16 reserved bytes of a CNP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtHeaders {
    /// Datagram ETH, 8 bytes (UD).
    pub deth: bool,
    /// RDMA ETH, 16 bytes.
    pub reth: bool,
    /// Atomic ETH, 28 bytes.
    pub atomic_eth: bool,
    /// ACK ETH, 4 bytes.
    pub aeth: bool,
    /// Atomic ACK ETH, 8 bytes.
    pub atomic_ack_eth: bool,
    /// Immediate data, 4 bytes.
    pub immdt: bool,
    /// Invalidate ETH, 4 bytes.
    pub ieth: bool,
    /// CNP reserved bytes, 16.
    pub cnp_reserved: bool,
}

impl ExtHeaders {
    const fn sizes(&self) -> [(bool, usize); 8] {
        [
            (self.deth, 8),
            (self.reth, RETH_LEN),
            (self.atomic_eth, 28),
            (self.aeth, AETH_LEN),
            (self.atomic_ack_eth, 8),
            (self.immdt, IMMDT_LEN),
            (self.ieth, 4),
            (self.cnp_reserved, CNP_RESERVED_LEN),
        ]
    }

    /// Total length of the extended headers.
    pub const fn len(&self) -> usize {
        let sizes = self.sizes();
        let mut total = 0;
        let mut i = 0;
        while i < sizes.len() {
            if sizes[i].0 {
                total += sizes[i].1;
            }
            i += 1;
        }
        total
    }

    /// No extended header at all.
    pub const fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Offset (from the end of the BTH) of the header at `index` in IBTA order.
    const fn offset_of(&self, index: usize) -> usize {
        let sizes = self.sizes();
        let mut total = 0;
        let mut i = 0;
        while i < index {
            if sizes[i].0 {
                total += sizes[i].1;
            }
            i += 1;
        }
        total
    }

    /// Offset of the RETH after the BTH, if present.
    pub const fn reth_offset(&self) -> Option<usize> {
        if self.reth {
            Some(self.offset_of(1))
        } else {
            None
        }
    }

    /// Offset of the AETH after the BTH, if present.
    pub const fn aeth_offset(&self) -> Option<usize> {
        if self.aeth {
            Some(self.offset_of(3))
        } else {
            None
        }
    }

    /// Offset of the ImmDt after the BTH, if present.
    pub const fn immdt_offset(&self) -> Option<usize> {
        if self.immdt {
            Some(self.offset_of(5))
        } else {
            None
        }
    }
}

impl Opcode {
    /// The transport service (three high bits).
    pub fn transport(self) -> Transport {
        match u8::from(self) >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            4 => Transport::Cnp,
            5 => Transport::Xrc,
            _ => Transport::Other,
        }
    }

    /// The extended headers this opcode carries, for RC, UC, UD SEND and CNP; `None` for reserved
    /// opcodes and for RD/XRC (not supported: their RDETH/XRCETH layouts are not modelled).
    pub fn ext_headers(self) -> Option<ExtHeaders> {
        let raw = u8::from(self);
        let op = raw & 0x1F;
        let none = ExtHeaders::default();
        match self.transport() {
            Transport::Rc | Transport::Uc => {
                let uc = self.transport() == Transport::Uc;
                let headers = match op {
                    0x00..=0x02 | 0x04 | 0x07 | 0x08 => none,
                    0x03 | 0x05 | 0x09 => ExtHeaders {
                        immdt: true,
                        ..none
                    },
                    0x06 | 0x0A => ExtHeaders { reth: true, ..none },
                    0x0B => ExtHeaders {
                        reth: true,
                        immdt: true,
                        ..none
                    },
                    // Below: RC only (UC has no READ, ACK, ATOMIC or invalidate, table 38).
                    _ if uc => return None,
                    0x0C => ExtHeaders { reth: true, ..none },
                    0x0D | 0x0F | 0x10 | 0x11 => ExtHeaders { aeth: true, ..none },
                    0x0E => none,
                    0x12 => ExtHeaders {
                        aeth: true,
                        atomic_ack_eth: true,
                        ..none
                    },
                    0x13 | 0x14 => ExtHeaders {
                        atomic_eth: true,
                        ..none
                    },
                    0x16 | 0x17 => ExtHeaders { ieth: true, ..none },
                    _ => return None,
                };
                Some(headers)
            }
            Transport::Ud => match op {
                0x04 => Some(ExtHeaders { deth: true, ..none }),
                0x05 => Some(ExtHeaders {
                    deth: true,
                    immdt: true,
                    ..none
                }),
                _ => None,
            },
            Transport::Cnp if raw == 0x81 => Some(ExtHeaders {
                cnp_reserved: true,
                ..none
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opcode_values() {
        assert_eq!(u8::from(Opcode::RdmaWriteOnly), 0x0A);
        assert_eq!(u8::from(Opcode::Acknowledge), 0x11);
        assert_eq!(u8::from(Opcode::SendOnlyWithInvalidate), 0x17);
        assert_eq!(Opcode::from(0x81), Opcode::Cnp);
        assert_eq!(Opcode::from(0x24), Opcode::Unknown(0x24));
        assert_eq!(Opcode::from(0x15), Opcode::Unknown(0x15));
        for raw in 0..=255u8 {
            assert_eq!(u8::from(Opcode::from(raw)), raw);
        }
    }

    #[test]
    fn ext_headers_by_opcode() {
        let reth = Opcode::RdmaWriteOnly.ext_headers().unwrap();
        assert!(reth.reth && reth.len() == 16 && reth.reth_offset() == Some(0));
        let reth_imm = Opcode::RdmaWriteOnlyWithImmediate.ext_headers().unwrap();
        assert_eq!((reth_imm.len(), reth_imm.immdt_offset()), (20, Some(16)));
        assert_eq!(
            Opcode::Acknowledge.ext_headers().unwrap().aeth_offset(),
            Some(0)
        );
        assert_eq!(Opcode::AtomicAcknowledge.ext_headers().unwrap().len(), 12);
        assert_eq!(Opcode::CompareSwap.ext_headers().unwrap().len(), 28);
        assert_eq!(Opcode::Cnp.ext_headers().unwrap().len(), 16);
        assert!(Opcode::SendOnly.ext_headers().unwrap().is_empty());
        // UC SEND_ONLY (0x24) and UC WRITE ONLY (0x2A) are known layouts; UC READ (0x2C) is not.
        assert!(Opcode::from(0x24).ext_headers().unwrap().is_empty());
        assert!(Opcode::from(0x2A).ext_headers().unwrap().reth);
        assert_eq!(Opcode::from(0x2C).ext_headers(), None);
        // UD SEND_ONLY carries a DETH; RD/XRC/reserved are not modelled.
        assert_eq!(Opcode::from(0x64).ext_headers().unwrap().len(), 8);
        assert_eq!(
            Opcode::from(0x65).ext_headers().unwrap().immdt_offset(),
            Some(8)
        );
        assert_eq!(Opcode::from(0x44).ext_headers(), None);
        assert_eq!(Opcode::from(0xA4).ext_headers(), None);
        assert_eq!(Opcode::from(0x15).ext_headers(), None);
        assert_eq!(Opcode::from(0x80).ext_headers(), None);
        assert_eq!(Opcode::from(0x24).transport(), Transport::Uc);
        assert_eq!(Opcode::Cnp.transport(), Transport::Cnp);
    }
}
