//! Per-flow header values a RoCE NIC derives: UDP source port entropy, priority from DSCP, IBTA
//! timeouts, and the parsing of link speeds.

use core::fmt;

pub use headroom_rnic::qp_hash::{flow_label, flow_label_to_udp_sport, udp_sport};

/// How an untagged frame's priority (the PFC class that pauses it) is derived from its DSCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PriorityMap {
    /// SONiC's default `DSCP_TO_TC_MAP|AZURE` with the identity TC → priority of the AZURE PFC
    /// maps (`sonic-buffer-model.md` §1.9): 3→3, 4→4, 5→2, 8→0, 46→5, 48→6, every other DSCP → 1.
    /// The default: it is what a headroom switch with the SONiC default QoS pauses.
    #[default]
    Azure,
    /// IP precedence, `priority = DSCP / 8`: the mlx5 default `dscp2prio` table of a ConnectX in
    /// trust-DSCP mode (DSCP 26 → 3, DSCP 48 → 6).
    Precedence,
}

impl PriorityMap {
    /// The priority (0..=7) of `dscp` (0..=63; higher bits are ignored).
    #[must_use]
    pub const fn priority(self, dscp: u8) -> u8 {
        let dscp = dscp & 0x3F;
        match self {
            Self::Azure => match dscp {
                3 => 3,
                4 => 4,
                5 => 2,
                8 => 0,
                46 => 5,
                48 => 6,
                _ => 1,
            },
            Self::Precedence => dscp >> 3,
        }
    }
}

/// The IBTA local ACK timeout of a QP: 4.096 us × 2^`timeout` (IBTA Vol. 1 §9.7.6.1.3, the
/// `timeout` QP attribute; perftest `-u`: 14 = 67.1 ms, rocegen's default 18 = 1.07 s).
/// `timeout` 0 means "infinite" in IBTA; the CLI refuses it, so this only sees 1..=31.
#[must_use]
pub const fn local_ack_timeout_ns(timeout: u8) -> u64 {
    4_096u64 << (timeout as u32 & 31)
}

/// Why a link speed could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkSpeedError(String);

impl fmt::Display for LinkSpeedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid link speed {:?}: expected a number of bit/s with an optional K, M, G or T \
             suffix (decimal), e.g. 1G, 2.5G, 100M, 10000000000",
            self.0
        )
    }
}

impl std::error::Error for LinkSpeedError {}

/// Parses `1G`, `2.5G`, `100M`, `25g`, `10000000000`, `40Gbps`, `100Gb/s` into bit/s (decimal
/// prefixes, as link speeds are quoted). The result must be in 1 bit/s ..= 1 Pb/s.
pub fn parse_link_speed(text: &str) -> Result<u64, LinkSpeedError> {
    let error = || LinkSpeedError(text.to_owned());
    let lower = text.trim().to_ascii_lowercase();
    let number_part = lower
        .trim_end_matches("bit/s")
        .trim_end_matches("b/s")
        .trim_end_matches("bps")
        .trim_end_matches('b');
    let (digits, multiplier) = match number_part.chars().last() {
        Some('k') => (&number_part[..number_part.len() - 1], 1e3),
        Some('m') => (&number_part[..number_part.len() - 1], 1e6),
        Some('g') => (&number_part[..number_part.len() - 1], 1e9),
        Some('t') => (&number_part[..number_part.len() - 1], 1e12),
        _ => (number_part, 1.0),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(error());
    }
    let value: f64 = digits.parse().map_err(|_| error())?;
    let bps = (value * multiplier).round();
    if !(1.0..=1e15).contains(&bps) {
        return Err(error());
    }
    // In range and rounded: the conversion is exact.
    Ok(bps as u64)
}

/// `bps` as a short human string (`1G`, `2.5G`, `100M`).
#[must_use]
pub fn format_link_speed(bps: u64) -> String {
    let (value, suffix) = if bps >= 1_000_000_000_000 {
        (bps as f64 / 1e12, "T")
    } else if bps >= 1_000_000_000 {
        (bps as f64 / 1e9, "G")
    } else if bps >= 1_000_000 {
        (bps as f64 / 1e6, "M")
    } else if bps >= 1_000 {
        (bps as f64 / 1e3, "K")
    } else {
        (bps as f64, "")
    };
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_maps() {
        assert_eq!(PriorityMap::Azure.priority(3), 3);
        assert_eq!(PriorityMap::Azure.priority(26), 1);
        assert_eq!(PriorityMap::Azure.priority(48), 6);
        assert_eq!(PriorityMap::Azure.priority(0), 1);
        assert_eq!(PriorityMap::Precedence.priority(26), 3);
        assert_eq!(PriorityMap::Precedence.priority(48), 6);
        assert_eq!(PriorityMap::Precedence.priority(63), 7);
    }

    #[test]
    fn ack_timeout() {
        assert_eq!(local_ack_timeout_ns(14), 67_108_864);
        assert_eq!(local_ack_timeout_ns(10), 4_194_304);
    }

    #[test]
    fn link_speeds() {
        assert_eq!(parse_link_speed("1G"), Ok(1_000_000_000));
        assert_eq!(parse_link_speed("2.5g"), Ok(2_500_000_000));
        assert_eq!(parse_link_speed("100M"), Ok(100_000_000));
        assert_eq!(parse_link_speed("40Gbps"), Ok(40_000_000_000));
        assert_eq!(parse_link_speed("100Gb/s"), Ok(100_000_000_000));
        assert_eq!(parse_link_speed("10000000000"), Ok(10_000_000_000));
        for bad in ["", "G", "fast", "-1G", "0", "1.2.3G", "2000T"] {
            assert!(parse_link_speed(bad).is_err(), "{bad}");
        }
        assert_eq!(format_link_speed(1_000_000_000), "1G");
        assert_eq!(format_link_speed(2_500_000_000), "2.5G");
        assert_eq!(format_link_speed(100_000_000), "100M");
    }
}
