//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! All sums are 16-bit one's-complement sums of big-endian words, folded with end-around carry. The
//! functions here never allocate, so they can run on the per-packet path.

use core::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` as big-endian 16-bit words to the 32-bit accumulator `acc` (RFC 1071 §4.1). An odd
/// trailing byte is padded with a zero byte. The result is not folded.
pub fn sum_words(mut acc: u32, data: &[u8]) -> u32 {
    let mut chunks = data.chunks_exact(2);
    for pair in &mut chunks {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([pair[0], pair[1]])));
        // Fold early so that the accumulator never wraps, however long `data` is.
        if acc > 0xFFFF_0000 {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
    }
    if let [last] = chunks.remainder() {
        acc = acc.wrapping_add(u32::from(u16::from_be_bytes([*last, 0])));
    }
    acc
}

/// Folds a 32-bit accumulator into a 16-bit one's-complement sum (end-around carry).
pub const fn fold(mut acc: u32) -> u16 {
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    acc as u16
}

/// The Internet checksum of `data`: the one's complement of the one's-complement sum (RFC 1071).
/// Over a header whose checksum field holds the correct value the sum is 0xFFFF, so
/// `checksum(header) == 0` verifies it.
pub fn checksum(data: &[u8]) -> u16 {
    !fold(sum_words(0, data))
}

/// RFC 1624 eqn. 3: the new checksum `HC' = ~(~HC + ~m + m')` after the 16-bit word `m` covered by the
/// checksum `HC` was changed to `m'`. Unlike eqn. 2 it never yields the negative zero 0xFFFF when the new
/// sum is 0xFFFF, so it matches a full recomputation (property-tested in `ipv4`).
pub const fn incremental_update(checksum: u16, old_word: u16, new_word: u16) -> u16 {
    let acc = (!checksum) as u32 + (!old_word) as u32 + new_word as u32;
    !fold(acc)
}

/// One's-complement sum (unfolded) of the IPv4 pseudo-header for a transport checksum
/// (RFC 768: source, destination, zero, protocol, UDP length).
pub fn pseudo_header_sum_ipv4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u32 {
    let mut acc = sum_words(0, &src.octets());
    acc = sum_words(acc, &dst.octets());
    acc + u32::from(protocol) + u32::from(length)
}

/// One's-complement sum (unfolded) of the IPv6 pseudo-header (RFC 8200 §8.1: source, destination,
/// upper-layer packet length as 32 bits, three zero bytes, next header).
pub fn pseudo_header_sum_ipv6(src: Ipv6Addr, dst: Ipv6Addr, next_header: u8, length: u32) -> u32 {
    let mut acc = sum_words(0, &src.octets());
    acc = sum_words(acc, &dst.octets());
    acc = sum_words(acc, &length.to_be_bytes());
    acc + u32::from(next_header)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 §3 worked example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(sum_words(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_is_zero_padded() {
        assert_eq!(fold(sum_words(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }

    #[test]
    fn long_input_does_not_overflow() {
        let data = [0xFFu8; 200_000];
        assert_eq!(fold(sum_words(0, &data)), 0xFFFF);
    }

    #[test]
    fn incremental_matches_rfc1624_example() {
        // RFC 1624 §4: HC = 0xDD2F, m = 0x5555 changed to m' = 0x3285 gives HC' = 0x0000 with eqn. 3.
        assert_eq!(incremental_update(0xDD2F, 0x5555, 0x3285), 0x0000);
    }
}
