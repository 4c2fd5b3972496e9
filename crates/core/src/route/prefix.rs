//! IP prefixes as the FIB keys them: the address with its host bits cleared, and the length.

use core::fmt;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a prefix was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrefixError {
    /// The length is longer than the address (more than 32 for IPv4, 128 for IPv6).
    LengthTooLong {
        /// The length asked for.
        len: u8,
        /// The address width.
        max: u8,
    },
}

impl fmt::Display for PrefixError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::LengthTooLong { len, max } => {
                write!(
                    f,
                    "prefix length {len} is longer than the address ({max} bits)"
                )
            }
        }
    }
}

impl std::error::Error for PrefixError {}

macro_rules! prefix_type {
    ($(#[$meta:meta])* $name:ident, $addr:ty, $bits:ty, $width:literal) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name {
            bits: $bits,
            len: u8,
        }

        impl $name {
            /// The address width in bits.
            pub const WIDTH: u8 = $width;

            /// The prefix `addr/len`; host bits of `addr` beyond `len` are cleared (the kernel
            /// reports routes that way too).
            ///
            /// # Errors
            /// [`PrefixError::LengthTooLong`] when `len` exceeds the address width.
            pub fn new(addr: $addr, len: u8) -> Result<Self, PrefixError> {
                if len > $width {
                    return Err(PrefixError::LengthTooLong { len, max: $width });
                }
                Ok(Self { bits: <$bits>::from(addr) & Self::mask(len), len })
            }

            /// The network mask of a `len`-bit prefix as an integer.
            #[must_use]
            pub const fn mask(len: u8) -> $bits {
                if len == 0 {
                    0
                } else {
                    <$bits>::MAX << ($width - len as u32)
                }
            }

            /// The network address (host bits clear).
            #[must_use]
            pub fn addr(self) -> $addr {
                <$addr>::from(self.bits)
            }

            /// The network address as a big-endian integer.
            #[must_use]
            pub const fn bits(self) -> $bits {
                self.bits
            }

            /// The prefix length.
            #[must_use]
            pub const fn prefix_len(self) -> u8 {
                self.len
            }

            /// Whether this is the zero-length prefix (the default route).
            #[must_use]
            pub const fn is_default(self) -> bool {
                self.len == 0
            }

            /// Whether `addr` lies inside this prefix.
            #[must_use]
            pub fn contains(self, addr: $addr) -> bool {
                <$bits>::from(addr) & Self::mask(self.len) == self.bits
            }

            /// The host route of `addr` (`/32` or `/128`).
            #[must_use]
            pub fn host(addr: $addr) -> Self {
                Self { bits: <$bits>::from(addr), len: $width }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}/{}", self.addr(), self.len)
            }
        }
    };
}

prefix_type!(
    /// An IPv4 prefix, e.g. `10.1.0.0/31`.
    Ipv4Prefix,
    Ipv4Addr,
    u32,
    32
);
prefix_type!(
    /// An IPv6 prefix, e.g. `2001:db8::/64`.
    Ipv6Prefix,
    Ipv6Addr,
    u128,
    128
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_bits_are_cleared_and_lengths_checked() {
        let p = Ipv4Prefix::new(Ipv4Addr::new(10, 1, 2, 3), 16).unwrap();
        assert_eq!(p.addr(), Ipv4Addr::new(10, 1, 0, 0));
        assert_eq!(p.to_string(), "10.1.0.0/16");
        assert!(p.contains(Ipv4Addr::new(10, 1, 255, 255)));
        assert!(!p.contains(Ipv4Addr::new(10, 2, 0, 0)));
        assert_eq!(
            Ipv4Prefix::new(Ipv4Addr::UNSPECIFIED, 33),
            Err(PrefixError::LengthTooLong { len: 33, max: 32 })
        );
        let d = Ipv4Prefix::new(Ipv4Addr::new(1, 2, 3, 4), 0).unwrap();
        assert!(d.is_default() && d.contains(Ipv4Addr::BROADCAST));
        let v6 = Ipv6Prefix::new("2001:db8::1".parse().unwrap(), 64).unwrap();
        assert_eq!(v6.to_string(), "2001:db8::/64");
        assert_eq!(Ipv6Prefix::host("::1".parse().unwrap()).prefix_len(), 128);
        assert!(Ipv6Prefix::new(Ipv6Addr::UNSPECIFIED, 129).is_err());
    }
}
