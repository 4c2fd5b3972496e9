//! MAC Control frames (EtherType 0x8808, IEEE 802.3 clause 31 and Annex 31A): IEEE 802.3x PAUSE
//! (Annex 31B, opcode 0x0001) and IEEE 802.1Qbb Priority-based Flow Control (802.1Qbb clause 36.1.3 /
//! 802.1Q-2018 clause 36.1.3, opcode 0x0101).
//!
//! Layout (offsets from the start of the frame, no FCS):
//!
//! | offset | len | PFC | PAUSE |
//! |---|---|---|---|
//! | 0 | 6 | 01-80-C2-00-00-01 | 01-80-C2-00-00-01 |
//! | 6 | 6 | source | source |
//! | 12 | 2 | 0x8808 | 0x8808 |
//! | 14 | 2 | opcode 0x0101 | opcode 0x0001 |
//! | 16 | 2 | class-enable vector: high octet reserved (0), bit i of the low octet = priority i | pause_time |
//! | 18 | 16 | time\[0..8\], big-endian quanta | zero padding |
//! | 34 | 26 | zero padding | zero padding |
//!
//! **Length policy.** MAC Control frames are minFrameSize long (802.3 clause 31.4: 64 bytes with the
//! FCS, so 60 without it), and a real MAC discards anything shorter as a runt before software sees it.
//! We therefore refuse frames shorter than 60 bytes with [`Error::Truncated`], even when they are long
//! enough to hold the fields: such a frame can only come from a software sender that forgot to pad
//! (veth does not pad), and accepting it would make our behaviour differ from a hardware port. Longer
//! frames (for example with the FCS still attached) are accepted and the extra bytes ignored.
//!
//! **Destination policy.** PFC and PAUSE frames must be sent to the reserved multicast address
//! 01-80-C2-00-00-01 (802.1Qbb 36.1.3.1, 802.3 Annex 31B.1); anything else is [`Error::BadDestination`].
//! 802.3 Annex 31B.3.3 also lets a station act on a PAUSE addressed to its own unicast address; this
//! parser does not know the port's address and refuses it too (read the view's fields directly if you
//! need that case). Unknown opcodes are carried without a destination check, since other MAC Control
//! protocols (e.g. EPON MPCP) use other addresses.

use crate::ethernet::{EtherType, MacAddress, MIN_FRAME_LEN};
use crate::{Error, Field};

/// The reserved multicast destination of PAUSE and PFC frames, 01-80-C2-00-00-01.
pub const MAC_CONTROL_DST: MacAddress = MacAddress([0x01, 0x80, 0xC2, 0x00, 0x00, 0x01]);

/// Length of every MAC Control frame without FCS (802.3 clause 31.4: minFrameSize).
pub const FRAME_LEN: usize = MIN_FRAME_LEN;

/// Number of priorities a PFC frame addresses.
pub const PRIORITY_COUNT: usize = 8;

enum_with_unknown! {
    /// MAC Control opcodes (802.3 Annex 31A, table 31A-1).
    pub enum MacControlOpcode(u16) {
        /// 802.3x PAUSE (Annex 31B).
        Pause = 0x0001,
        /// 802.1Qbb Priority-based Flow Control, "CBFC" in Wireshark (Annex 31D).
        Pfc = 0x0101,
    }
}

/// Field offsets of a MAC Control frame (the whole Ethernet frame).
pub mod field {
    use crate::Field;
    /// Destination MAC address.
    pub const DESTINATION: Field = 0..6;
    /// Source MAC address.
    pub const SOURCE: Field = 6..12;
    /// EtherType, 0x8808.
    pub const ETHERTYPE: Field = 12..14;
    /// MAC Control opcode.
    pub const OPCODE: Field = 14..16;
    /// 802.3x PAUSE: pause_time in quanta.
    pub const PAUSE_TIME: Field = 16..18;
    /// PFC: priority-enable vector (high octet reserved).
    pub const CLASS_ENABLE: Field = 16..18;
    /// PFC: eight big-endian u16 pause times, priority 0 first.
    pub const PFC_TIMES: Field = 18..34;
    /// Start of the zero padding of a PAUSE frame.
    pub const PAUSE_PAD_START: usize = PAUSE_TIME.end;
    /// Start of the zero padding of a PFC frame.
    pub const PFC_PAD_START: usize = PFC_TIMES.end;
}

/// A read/write view of a whole MAC Control frame (Ethernet header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MacControlFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> MacControlFrame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> MacControlFrame<T> {
        MacControlFrame { buffer }
    }

    /// Wraps a buffer and checks it is at least 60 bytes long.
    pub fn new_checked(buffer: T) -> Result<MacControlFrame<T>, Error> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// `Err(Truncated)` if the buffer is shorter than 60 bytes (see the module's length policy).
    pub fn check_len(&self) -> Result<(), Error> {
        if self.buffer.as_ref().len() < FRAME_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The underlying buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, f: Field) -> u16 {
        let b = &self.buffer.as_ref()[f];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Destination address.
    pub fn dst_addr(&self) -> MacAddress {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[field::DESTINATION]);
        MacAddress(octets)
    }

    /// Source address.
    pub fn src_addr(&self) -> MacAddress {
        let mut octets = [0u8; 6];
        octets.copy_from_slice(&self.buffer.as_ref()[field::SOURCE]);
        MacAddress(octets)
    }

    /// EtherType (0x8808 for a MAC Control frame).
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(self.u16_at(field::ETHERTYPE))
    }

    /// MAC Control opcode.
    pub fn opcode(&self) -> MacControlOpcode {
        MacControlOpcode::from(self.u16_at(field::OPCODE))
    }

    /// 802.3x PAUSE: pause_time in quanta.
    pub fn pause_time(&self) -> u16 {
        self.u16_at(field::PAUSE_TIME)
    }

    /// PFC: the raw 16-bit priority-enable vector, reserved high octet included.
    pub fn class_enable_vector(&self) -> u16 {
        self.u16_at(field::CLASS_ENABLE)
    }

    /// PFC: the eight pause times in quanta, index = priority.
    pub fn pfc_pause_quanta(&self) -> [u16; PRIORITY_COUNT] {
        let times = &self.buffer.as_ref()[field::PFC_TIMES];
        let mut quanta = [0u16; PRIORITY_COUNT];
        for (q, pair) in quanta.iter_mut().zip(times.chunks_exact(2)) {
            *q = u16::from_be_bytes([pair[0], pair[1]]);
        }
        quanta
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> MacControlFrame<T> {
    fn set_u16_at(&mut self, f: Field, value: u16) {
        self.buffer.as_mut()[f].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: MacAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address (the transmitting port's MAC).
    pub fn set_src_addr(&mut self, addr: MacAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.set_u16_at(field::ETHERTYPE, ethertype.into());
    }

    /// Sets the opcode.
    pub fn set_opcode(&mut self, opcode: MacControlOpcode) {
        self.set_u16_at(field::OPCODE, opcode.into());
    }

    /// 802.3x PAUSE: sets pause_time.
    pub fn set_pause_time(&mut self, quanta: u16) {
        self.set_u16_at(field::PAUSE_TIME, quanta);
    }

    /// PFC: sets the raw 16-bit priority-enable vector.
    pub fn set_class_enable_vector(&mut self, vector: u16) {
        self.set_u16_at(field::CLASS_ENABLE, vector);
    }

    /// PFC: sets the eight pause times.
    pub fn set_pfc_pause_quanta(&mut self, quanta: &[u16; PRIORITY_COUNT]) {
        let times = &mut self.buffer.as_mut()[field::PFC_TIMES];
        for (pair, q) in times.chunks_exact_mut(2).zip(quanta) {
            pair.copy_from_slice(&q.to_be_bytes());
        }
    }

    /// Zeroes bytes `from..60` (the padding, 802.3 Annex 31B.2 "reserved, transmitted as zeros").
    fn zero_pad_from(&mut self, from: usize) {
        self.buffer.as_mut()[from..FRAME_LEN].fill(0);
    }
}

/// An 802.1Qbb PFC frame's parameters.
///
/// `pause_quanta[i]` applies to priority `i` only if bit `i` of `class_enable` is set (802.1Qbb
/// 36.1.3.2); 0 quanta on an enabled priority means "resume now" (XON). Times of disabled priorities are
/// carried as received.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PfcRepr {
    /// Bit i set = the time for priority i is valid.
    pub class_enable: u8,
    /// Pause time per priority, in quanta of 512 bit times.
    pub pause_quanta: [u16; PRIORITY_COUNT],
}

impl PfcRepr {
    /// Pauses every priority in the bit set `priorities` for `quanta` (XOFF); the others are not enabled.
    pub const fn xoff(priorities: u8, quanta: u16) -> PfcRepr {
        let mut pause_quanta = [0u16; PRIORITY_COUNT];
        let mut i = 0;
        while i < PRIORITY_COUNT {
            if priorities & (1 << i) != 0 {
                pause_quanta[i] = quanta;
            }
            i += 1;
        }
        PfcRepr {
            class_enable: priorities,
            pause_quanta,
        }
    }

    /// Resumes every priority in the bit set `priorities` (enabled with 0 quanta, XON).
    pub const fn xon(priorities: u8) -> PfcRepr {
        PfcRepr {
            class_enable: priorities,
            pause_quanta: [0; PRIORITY_COUNT],
        }
    }

    /// Enables `priority` with `quanta` (0 = XON). Priorities above 7 are ignored.
    pub fn set_priority(&mut self, priority: u8, quanta: u16) {
        if let Some(slot) = self.pause_quanta.get_mut(usize::from(priority)) {
            *slot = quanta;
            self.class_enable |= 1 << priority;
        }
    }

    /// The pause time the frame gives `priority`, or `None` if that priority is not enabled (or > 7).
    pub fn quanta_for(&self, priority: u8) -> Option<u16> {
        let quanta = *self.pause_quanta.get(usize::from(priority))?;
        (self.class_enable & (1 << priority) != 0).then_some(quanta)
    }

    /// The frame enables `priority` with a time of 0: resume it now.
    pub fn is_xon_for(&self, priority: u8) -> bool {
        self.quanta_for(priority) == Some(0)
    }

    /// The frame enables `priority` with a non-zero time: pause it.
    pub fn is_xoff_for(&self, priority: u8) -> bool {
        matches!(self.quanta_for(priority), Some(q) if q > 0)
    }
}

/// An 802.3x PAUSE frame's parameter (Annex 31B.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PauseRepr {
    /// Pause time in quanta of 512 bit times; 0 resumes.
    pub pause_quanta: u16,
}

/// A parsed MAC Control frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MacControlRepr {
    /// 802.1Qbb PFC (opcode 0x0101).
    Pfc(PfcRepr),
    /// 802.3x PAUSE (opcode 0x0001).
    Pause(PauseRepr),
    /// Any other opcode, carried so the caller can count it.
    Unknown {
        /// The raw opcode.
        opcode: u16,
    },
}

impl MacControlRepr {
    /// Parses a MAC Control frame.
    ///
    /// Errors, in the order they are checked: `Truncated` (shorter than 60 bytes), `WrongEtherType` (not
    /// 0x8808), then for PFC and PAUSE `BadDestination` (not 01-80-C2-00-00-01), and for PFC
    /// `ReservedBitsSet` (high octet of the enable vector non-zero, 802.1Qbb 36.1.3.2). Unknown opcodes
    /// parse to [`MacControlRepr::Unknown`].
    pub fn parse<T: AsRef<[u8]>>(frame: &MacControlFrame<T>) -> Result<MacControlRepr, Error> {
        frame.check_len()?;
        if frame.ethertype() != EtherType::MacControl {
            return Err(Error::WrongEtherType);
        }
        match frame.opcode() {
            MacControlOpcode::Pfc => {
                if frame.dst_addr() != MAC_CONTROL_DST {
                    return Err(Error::BadDestination);
                }
                let vector = frame.class_enable_vector();
                if vector & 0xFF00 != 0 {
                    return Err(Error::ReservedBitsSet);
                }
                Ok(MacControlRepr::Pfc(PfcRepr {
                    class_enable: vector as u8,
                    pause_quanta: frame.pfc_pause_quanta(),
                }))
            }
            MacControlOpcode::Pause => {
                if frame.dst_addr() != MAC_CONTROL_DST {
                    return Err(Error::BadDestination);
                }
                Ok(MacControlRepr::Pause(PauseRepr {
                    pause_quanta: frame.pause_time(),
                }))
            }
            MacControlOpcode::Unknown(opcode) => Ok(MacControlRepr::Unknown { opcode }),
        }
    }

    /// Bytes `emit` writes: always 60.
    pub const fn buffer_len(&self) -> usize {
        FRAME_LEN
    }

    /// Writes the destination (01-80-C2-00-00-01), EtherType, opcode, parameters and zero padding up to
    /// 60 bytes. The **source address is left as is**: set it with [`MacControlFrame::set_src_addr`], or
    /// use [`MacControlRepr::emit_frame`]. Panics if the view is shorter than 60 bytes.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut MacControlFrame<T>) {
        frame.set_dst_addr(MAC_CONTROL_DST);
        frame.set_ethertype(EtherType::MacControl);
        match self {
            MacControlRepr::Pfc(pfc) => {
                frame.set_opcode(MacControlOpcode::Pfc);
                frame.set_class_enable_vector(u16::from(pfc.class_enable));
                frame.set_pfc_pause_quanta(&pfc.pause_quanta);
                frame.zero_pad_from(field::PFC_PAD_START);
            }
            MacControlRepr::Pause(pause) => {
                frame.set_opcode(MacControlOpcode::Pause);
                frame.set_pause_time(pause.pause_quanta);
                frame.zero_pad_from(field::PAUSE_PAD_START);
            }
            MacControlRepr::Unknown { opcode } => {
                frame.set_opcode(MacControlOpcode::from(*opcode));
                frame.zero_pad_from(field::OPCODE.end);
            }
        }
    }

    /// Writes the complete 60-byte frame from `src_addr` into the front of `buf` and returns 60.
    /// `Err(BufferTooSmall)` if `buf` is shorter than 60 bytes.
    pub fn emit_frame(&self, src_addr: MacAddress, buf: &mut [u8]) -> Result<usize, Error> {
        let out = buf.get_mut(..FRAME_LEN).ok_or(Error::BufferTooSmall)?;
        let mut frame = MacControlFrame::new_unchecked(out);
        self.emit(&mut frame);
        frame.set_src_addr(src_addr);
        Ok(FRAME_LEN)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PORT_MAC: MacAddress = MacAddress([0x02, 0, 0, 0, 0, 0x01]);

    /// dcqcn-roce.md §5.1 "Verified frame": PFC, priority 3 paused for 0xFFFF quanta, decoded by tshark.
    fn verified_pfc_frame() -> [u8; 60] {
        let mut frame = [0u8; 60];
        let head = [
            0x01, 0x80, 0xc2, 0x00, 0x00, 0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x88, 0x08,
            0x01, 0x01, 0x00, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, 0x00, 0x00,
            0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        ];
        frame[..34].copy_from_slice(&head);
        frame
    }

    #[test]
    fn pfc_emit_matches_verified_frame() {
        let mut buf = [0xAAu8; 64];
        let repr = MacControlRepr::Pfc(PfcRepr::xoff(1 << 3, 0xFFFF));
        assert_eq!(repr.emit_frame(PORT_MAC, &mut buf), Ok(60));
        assert_eq!(&buf[..60], &verified_pfc_frame());
        assert_eq!(&buf[60..], &[0xAA; 4], "emit must not write past 60 bytes");
    }

    #[test]
    fn pfc_parse_verified_frame() {
        let bytes = verified_pfc_frame();
        let frame = MacControlFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(frame.src_addr(), PORT_MAC);
        let MacControlRepr::Pfc(pfc) = MacControlRepr::parse(&frame).unwrap() else {
            panic!("not PFC");
        };
        assert_eq!(pfc.class_enable, 0x08);
        assert!(pfc.is_xoff_for(3));
        assert!(!pfc.is_xon_for(3));
        assert_eq!(pfc.quanta_for(3), Some(0xFFFF));
        for prio in [0, 1, 2, 4, 5, 6, 7, 8, 200] {
            assert_eq!(pfc.quanta_for(prio), None, "priority {prio}");
            assert!(!pfc.is_xoff_for(prio) && !pfc.is_xon_for(prio));
        }
    }

    #[test]
    fn pfc_helpers() {
        let xon = PfcRepr::xon(0b0001_1000);
        assert!(xon.is_xon_for(3) && xon.is_xon_for(4) && !xon.is_xon_for(5));
        let mut mixed = PfcRepr::xoff(1 << 3, 0xFFFF);
        mixed.set_priority(4, 0x1234);
        mixed.set_priority(8, 1); // ignored
        assert_eq!(mixed.class_enable, 0b0001_1000);
        assert_eq!(mixed.pause_quanta, [0, 0, 0, 0xFFFF, 0x1234, 0, 0, 0]);
        let mut buf = [0u8; 60];
        MacControlRepr::Pfc(mixed)
            .emit_frame(PORT_MAC, &mut buf)
            .unwrap();
        assert_eq!(
            &buf[16..28],
            &[0x00, 0x18, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0x12, 0x34]
        );
    }

    #[test]
    fn pause_emit_and_parse() {
        let mut buf = [0xAAu8; 60];
        let repr = MacControlRepr::Pause(PauseRepr {
            pause_quanta: 0xFFFF,
        });
        repr.emit_frame(PORT_MAC, &mut buf).unwrap();
        assert_eq!(
            &buf[..18],
            &[1, 0x80, 0xc2, 0, 0, 1, 2, 0, 0, 0, 0, 1, 0x88, 0x08, 0, 1, 0xff, 0xff]
        );
        assert_eq!(&buf[18..], &[0u8; 42]);
        let frame = MacControlFrame::new_checked(&buf[..]).unwrap();
        assert_eq!(MacControlRepr::parse(&frame), Ok(repr));
    }

    #[test]
    fn parse_errors() {
        let good = verified_pfc_frame();
        // Short: long enough for the fields (34 bytes) but not padded to 60.
        assert_eq!(
            MacControlFrame::new_checked(&good[..34]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            MacControlFrame::new_checked(&good[..59]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            MacControlRepr::parse(&MacControlFrame::new_unchecked(&good[..59])),
            Err(Error::Truncated)
        );
        // Longer (FCS attached) is fine.
        let mut with_fcs = [0u8; 64];
        with_fcs[..60].copy_from_slice(&good);
        assert!(
            MacControlRepr::parse(&MacControlFrame::new_checked(&with_fcs[..]).unwrap()).is_ok()
        );

        let mut bad_dst = good;
        bad_dst[5] = 0x02;
        assert_eq!(
            MacControlRepr::parse(&MacControlFrame::new_checked(&bad_dst[..]).unwrap()),
            Err(Error::BadDestination)
        );

        let mut reserved = good;
        reserved[16] = 0x01;
        assert_eq!(
            MacControlRepr::parse(&MacControlFrame::new_checked(&reserved[..]).unwrap()),
            Err(Error::ReservedBitsSet)
        );

        let mut wrong_type = good;
        wrong_type[12..14].copy_from_slice(&[0x08, 0x00]);
        assert_eq!(
            MacControlRepr::parse(&MacControlFrame::new_checked(&wrong_type[..]).unwrap()),
            Err(Error::WrongEtherType)
        );

        let mut pause_bad_dst = [0u8; 60];
        MacControlRepr::Pause(PauseRepr { pause_quanta: 1 })
            .emit_frame(PORT_MAC, &mut pause_bad_dst)
            .unwrap();
        pause_bad_dst[0] = 0x02;
        assert_eq!(
            MacControlRepr::parse(&MacControlFrame::new_checked(&pause_bad_dst[..]).unwrap()),
            Err(Error::BadDestination)
        );
    }

    #[test]
    fn unknown_opcode_is_carried() {
        let mut bytes = verified_pfc_frame();
        bytes[14..16].copy_from_slice(&[0x00, 0x02]); // MPCP GATE
        bytes[0] = 0x02; // unicast: no destination check for unknown opcodes
        let frame = MacControlFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(
            MacControlRepr::parse(&frame),
            Ok(MacControlRepr::Unknown { opcode: 2 })
        );
        assert_eq!(frame.opcode(), MacControlOpcode::Unknown(2));
    }

    #[test]
    fn emit_frame_refuses_short_buffer() {
        let mut buf = [0u8; 59];
        assert_eq!(
            MacControlRepr::Pfc(PfcRepr::xon(1)).emit_frame(PORT_MAC, &mut buf),
            Err(Error::BufferTooSmall)
        );
    }

    fn any_repr() -> impl Strategy<Value = MacControlRepr> {
        prop_oneof![
            (any::<u8>(), any::<[u16; 8]>()).prop_map(|(class_enable, pause_quanta)| {
                MacControlRepr::Pfc(PfcRepr {
                    class_enable,
                    pause_quanta,
                })
            }),
            any::<u16>().prop_map(|pause_quanta| MacControlRepr::Pause(PauseRepr { pause_quanta })),
            any::<u16>()
                .prop_filter("named opcode", |op| !matches!(
                    MacControlOpcode::from(*op),
                    MacControlOpcode::Pfc | MacControlOpcode::Pause
                ))
                .prop_map(|opcode| MacControlRepr::Unknown { opcode }),
        ]
    }

    proptest! {
        #[test]
        fn repr_round_trip(repr in any_repr(), src in any::<[u8; 6]>(), junk in any::<u8>()) {
            let mut buf = [junk; 60];
            repr.emit_frame(MacAddress(src), &mut buf).unwrap();
            let frame = MacControlFrame::new_checked(&buf[..]).unwrap();
            prop_assert_eq!(MacControlRepr::parse(&frame), Ok(repr));
            prop_assert_eq!(frame.src_addr(), MacAddress(src));
            // Padding is zero whatever the buffer held before.
            let pad_start = match repr {
                MacControlRepr::Pfc(_) => 34,
                MacControlRepr::Pause(_) => 18,
                MacControlRepr::Unknown { .. } => 16,
            };
            prop_assert!(buf[pad_start..].iter().all(|&b| b == 0));
        }

        #[test]
        fn xoff_xon_semantics(priorities in any::<u8>(), quanta in 1u16.., prio in 0u8..8) {
            let xoff = PfcRepr::xoff(priorities, quanta);
            let xon = PfcRepr::xon(priorities);
            let enabled = priorities & (1 << prio) != 0;
            prop_assert_eq!(xoff.is_xoff_for(prio), enabled);
            prop_assert_eq!(xon.is_xon_for(prio), enabled);
            prop_assert!(!xoff.is_xon_for(prio) && !xon.is_xoff_for(prio));
        }

        #[test]
        fn parse_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..80)) {
            let frame = MacControlFrame::new_unchecked(&bytes[..]);
            if frame.check_len().is_ok() {
                let _ = (frame.dst_addr(), frame.src_addr(), frame.opcode(), frame.pause_time(), frame.pfc_pause_quanta());
            }
            let _ = MacControlRepr::parse(&frame);
        }

        #[test]
        fn parse_mostly_valid_frames_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..80), opcode in prop_oneof![Just(1u16), Just(0x101u16)]) {
            if bytes.len() >= 16 {
                bytes[..6].copy_from_slice(&MAC_CONTROL_DST.0);
                bytes[12..14].copy_from_slice(&[0x88, 0x08]);
                bytes[14..16].copy_from_slice(&opcode.to_be_bytes());
            }
            let result = MacControlRepr::parse(&MacControlFrame::new_unchecked(&bytes[..]));
            if bytes.len() < 60 {
                prop_assert_eq!(result, Err(Error::Truncated));
            }
        }
    }
}
