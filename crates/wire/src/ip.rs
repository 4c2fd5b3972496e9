//! Definitions shared by IPv4 and IPv6: the ECN codepoint (RFC 3168) and IP protocol numbers.

/// IP Explicit Congestion Notification codepoint (RFC 3168 §5: the two low bits of the IPv4 TOS byte and
/// of the IPv6 Traffic Class).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Ecn {
    /// `00`: Not ECN-Capable Transport.
    NotEct,
    /// `01`: ECN Capable Transport, ECT(1).
    Ect1,
    /// `10`: ECN Capable Transport, ECT(0).
    Ect0,
    /// `11`: Congestion Experienced.
    Ce,
}

impl Ecn {
    /// The codepoint of the two low bits of `bits` (the upper bits are ignored).
    pub const fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// The two-bit codepoint.
    pub const fn to_bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }

    /// ECT(0) or ECT(1): a router may mark this packet CE instead of dropping it (RFC 3168 §5).
    pub const fn is_ecn_capable(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1)
    }
}

/// Outcome of an in-place Congestion Experienced mark (RFC 3168 §6.1.1.1: a router sets CE only on
/// ECN-capable packets; a Not-ECT packet must be dropped instead of marked, which is the caller's decision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CeMark {
    /// The packet was ECT(0) or ECT(1) and is now CE (checksum updated where there is one).
    Marked,
    /// The packet was already CE; nothing was written.
    AlreadyMarked,
    /// The packet is Not-ECT; nothing was written.
    NotEcnCapable,
}

enum_with_unknown! {
    /// IP protocol numbers / IPv6 next-header values (IANA "Assigned Internet Protocol Numbers").
    pub enum IpProtocol(u8) {
        /// IPv6 Hop-by-Hop Options extension header (RFC 8200 §4.3).
        HopByHop = 0,
        /// ICMP (RFC 792).
        Icmp = 1,
        /// TCP (RFC 9293).
        Tcp = 6,
        /// UDP (RFC 768), which carries RoCEv2.
        Udp = 17,
        /// IPv6 Routing extension header (RFC 8200 §4.4).
        Ipv6Route = 43,
        /// IPv6 Fragment extension header (RFC 8200 §4.5).
        Ipv6Frag = 44,
        /// ICMPv6 (RFC 4443).
        Icmpv6 = 58,
        /// IPv6 No Next Header (RFC 8200 §4.7).
        Ipv6NoNxt = 59,
        /// IPv6 Destination Options extension header (RFC 8200 §4.6).
        Ipv6Opts = 60,
    }
}
