use core::fmt;

/// Why a buffer could not be parsed or emitted. Small and `Copy`, so that a dropped packet costs one
/// counter increment and no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says the packet is.
    Truncated,
    /// The buffer handed to an emit helper is shorter than the bytes it must write.
    BufferTooSmall,
    /// A version field holds a value this format does not define (IPv4 version != 4, IPv6 version != 6).
    BadVersion,
    /// A header length field is below the minimum (IPv4 IHL < 5).
    BadHeaderLength,
    /// A length field is inconsistent (IPv4 total length < header length, UDP length < 8).
    BadLength,
    /// A header checksum does not verify.
    BadChecksum,
    /// The destination address is not the one the format requires (MAC Control frames:
    /// 01-80-C2-00-00-01).
    BadDestination,
    /// A field the standard reserves as zero is not zero (high octet of the PFC class-enable vector).
    ReservedBitsSet,
    /// A second 802.1Q/802.1ad tag, or an outer 802.1ad (0x88A8) S-tag: not supported.
    DoubleTag,
    /// The EtherType is not the one this parser handles.
    WrongEtherType,
    /// The IP protocol / IPv6 next header is not the one this parser handles (for IPv6 this includes any
    /// extension header, which are not walked).
    WrongProtocol,
    /// The opcode is not the one this parser handles.
    WrongOpcode,
    /// The RoCEv2 invariant CRC does not verify.
    BadIcrc,
    /// A mandatory TLV is missing or out of order (LLDP: Chassis ID, Port ID, TTL must come first,
    /// in that order).
    MissingTlv,
    /// A TLV that may appear only once appears again (LLDP: Chassis ID, Port ID, TTL).
    DuplicateTlv,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Error::Truncated => "buffer shorter than the header or its length field",
            Error::BufferTooSmall => "output buffer too small",
            Error::BadVersion => "unsupported version field",
            Error::BadHeaderLength => "header length field below minimum",
            Error::BadLength => "inconsistent length field",
            Error::BadChecksum => "header checksum mismatch",
            Error::BadDestination => "wrong destination address",
            Error::ReservedBitsSet => "reserved bits set",
            Error::DoubleTag => "double VLAN tag or 802.1ad S-tag not supported",
            Error::WrongEtherType => "unexpected EtherType",
            Error::WrongProtocol => "unexpected IP protocol or IPv6 next header",
            Error::WrongOpcode => "unexpected opcode",
            Error::BadIcrc => "RoCEv2 ICRC mismatch",
            Error::MissingTlv => "mandatory TLV missing or out of order",
            Error::DuplicateTlv => "TLV repeated",
        };
        f.write_str(text)
    }
}

impl core::error::Error for Error {}
