//! Durations, sizes and rates as scenario files write them.

use super::IntOrText;

/// `"10ms"`, `"1.5us"`, `"250ns"`, `"2s"` (also `µs`) to nanoseconds. A unit is required.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let bad = || {
        format!("{text:?} is not a duration: a number with a unit ns, us, ms or s (\"10us\", \"1.5ms\")")
    };
    let (number, scale) = if let Some(n) = t.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = t.strip_suffix("us").or_else(|| t.strip_suffix("µs")) {
        (n, 1e3)
    } else if let Some(n) = t.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1e9)
    } else {
        return Err(bad());
    };
    let n = number.trim();
    if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let v: f64 = n.parse().map_err(|_| bad())?;
    let ns = (v * scale).round();
    if !(0.0..=1e15).contains(&ns) {
        return Err(format!("{text:?}: at most 1e6 s"));
    }
    // In range and rounded: exact.
    Ok(ns as u64)
}

/// Bytes as an integer, or `"64KB"` (10^3), `"64KiB"` (2^10), `"1MB"`, `"1MiB"`, `"2GB"`,
/// `"2GiB"`, `"100B"`.
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_bytes(v: &IntOrText) -> Result<u64, String> {
    let text = match v {
        IntOrText::Int(n) => return Ok(*n),
        IntOrText::Text(t) => t.trim(),
    };
    let bad = || {
        format!("{text:?} is not a size: bytes, or a number with B, KB, KiB, MB, MiB, GB or GiB")
    };
    let units: [(&str, f64); 7] = [
        ("KiB", 1024.0),
        ("MiB", 1048576.0),
        ("GiB", 1073741824.0),
        ("KB", 1e3),
        ("MB", 1e6),
        ("GB", 1e9),
        ("B", 1.0),
    ];
    let (number, scale) = units
        .iter()
        .find_map(|(u, s)| text.strip_suffix(u).map(|n| (n.trim(), *s)))
        .unwrap_or((text, 1.0));
    if number.is_empty() || !number.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let n: f64 = number.parse().map_err(|_| bad())?;
    let b = (n * scale).round();
    if !(0.0..=1e15).contains(&b) {
        return Err(format!("{text:?}: at most 1 PB"));
    }
    Ok(b as u64)
}

/// `"40G"`, `"2.5G"`, `"100M"`, `"25Gbps"`, `"100Gb/s"` to bits per second (decimal prefixes).
///
/// # Errors
/// A message saying what is accepted.
pub fn parse_rate_bps(text: &str) -> Result<u64, String> {
    let bad = || format!("{text:?} is not a rate: a number with K, M, G or T (\"40G\", \"2.5G\")");
    let lower = text.trim().to_ascii_lowercase();
    let n = lower
        .trim_end_matches("b/s")
        .trim_end_matches("bps")
        .trim_end_matches('b');
    let (digits, scale) = match n.chars().last() {
        Some('k') => (&n[..n.len() - 1], 1e3),
        Some('m') => (&n[..n.len() - 1], 1e6),
        Some('g') => (&n[..n.len() - 1], 1e9),
        Some('t') => (&n[..n.len() - 1], 1e12),
        _ => (n, 1.0),
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad());
    }
    let v: f64 = digits.parse().map_err(|_| bad())?;
    let bps = (v * scale).round();
    if !(1e3..=1.6e12).contains(&bps) {
        return Err(format!("{text:?}: a rate in 1K ..= 1.6T"));
    }
    Ok(bps as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration_ns("10ms"), Ok(10_000_000));
        assert_eq!(parse_duration_ns("1.5us"), Ok(1_500));
        assert_eq!(parse_duration_ns("2s"), Ok(2_000_000_000));
        assert_eq!(parse_duration_ns("250ns"), Ok(250));
        for bad in ["10", "ms", "-1ms", "1.2.3ms", "fast"] {
            assert!(parse_duration_ns(bad).is_err(), "{bad}");
        }
        assert_eq!(parse_bytes(&IntOrText::Int(5)), Ok(5));
        assert_eq!(parse_bytes(&IntOrText::Text("64KB".into())), Ok(64_000));
        assert_eq!(parse_bytes(&IntOrText::Text("64KiB".into())), Ok(65_536));
        assert_eq!(parse_bytes(&IntOrText::Text("1MiB".into())), Ok(1 << 20));
        assert!(parse_bytes(&IntOrText::Text("lots".into())).is_err());
        assert_eq!(parse_rate_bps("40G"), Ok(40_000_000_000));
        assert_eq!(parse_rate_bps("2.5Gbps"), Ok(2_500_000_000));
        assert!(parse_rate_bps("fast").is_err());
    }
}
