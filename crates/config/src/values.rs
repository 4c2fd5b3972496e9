//! Parsers for the value syntaxes the schema accepts (speeds, cable lengths, index ranges, lists,
//! MAC addresses). Each returns the reason in words on failure; the caller adds file, line and key.

use crate::schema::{IntList, IntOrText};

/// The highest port speed accepted, Mb/s (800G, the highest speed in SONiC's pause-quanta table).
pub(crate) const MAX_SPEED_MBPS: u64 = 800_000;

/// The longest cable accepted, metres.
pub(crate) const MAX_CABLE_LENGTH_M: u32 = 100_000;

/// `value` if it lies in `min..=max`, else the SONiC-style complaint.
pub(crate) fn in_range(value: i64, min: i64, max: i64) -> Result<i64, String> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(format!("{value} is out of range {min}..={max}"))
    }
}

/// A speed: an integer in Mb/s as SONiC writes it (`100000`), the same as a string (`"100000"`),
/// or a number with a unit `M` or `G` (`"100G"`, `"2.5G"`, `"100M"`; case-insensitive, an optional
/// trailing `b/s` or `bps` is allowed). Returns Mb/s.
pub(crate) fn parse_speed_mbps(value: &IntOrText) -> Result<u64, String> {
    let mbps = match value {
        IntOrText::Int(mbps) => u64::try_from(*mbps).map_err(|_| format!("{mbps} is negative"))?,
        IntOrText::Text(text) => parse_speed_text(text).ok_or_else(|| {
            format!(
                "{text:?} is not a speed: write Mb/s like 100000, or a string like \"100G\", \
                 \"25G\", \"2.5G\", \"1G\", \"100M\""
            )
        })?,
    };
    if mbps == 0 || mbps > MAX_SPEED_MBPS {
        return Err(format!(
            "{mbps} Mb/s is out of range 1..={MAX_SPEED_MBPS} Mb/s"
        ));
    }
    Ok(mbps)
}

fn parse_speed_text(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let without_suffix = lower
        .strip_suffix("b/s")
        .or_else(|| lower.strip_suffix("bps"))
        .unwrap_or(&lower);
    let (number, multiplier_mbps) = if let Some(n) = without_suffix.strip_suffix('g') {
        (n, 1000)
    } else if let Some(n) = without_suffix.strip_suffix('m') {
        (n, 1)
    } else {
        (without_suffix, 1)
    };
    let (whole, fraction) = match number.split_once('.') {
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    if whole.is_empty() || !whole.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if !fraction.bytes().all(|b| b.is_ascii_digit()) || fraction.len() > 3 {
        return None;
    }
    let whole: u64 = whole.parse().ok()?;
    let mut value = whole.checked_mul(multiplier_mbps)?;
    if !fraction.is_empty() {
        // Fractions must come out as whole Mb/s: "2.5G" = 2500, "2.5M" is refused.
        let scale = 10u64.pow(u32::try_from(fraction.len()).ok()?);
        let fraction: u64 = fraction.parse().ok()?;
        let scaled = fraction.checked_mul(multiplier_mbps)?;
        if scaled % scale != 0 {
            return None;
        }
        value = value.checked_add(scaled / scale)?;
    }
    Some(value)
}

/// A cable length: metres as an integer (`5`) or SONiC's string (`"5m"`, also `"5"`).
pub(crate) fn parse_cable_length_m(value: &IntOrText) -> Result<u32, String> {
    let metres = match value {
        IntOrText::Int(m) => *m,
        IntOrText::Text(text) => {
            let trimmed = text.trim();
            let digits = trimmed.strip_suffix('m').unwrap_or(trimmed);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return Err(format!(
                    "{text:?} is not a cable length: write metres like \"5m\" or 5"
                ));
            }
            digits.parse::<i64>().unwrap_or(i64::MAX)
        }
    };
    let metres = in_range(metres, 0, i64::from(MAX_CABLE_LENGTH_M))
        .map_err(|reason| format!("cable length {reason} metres"))?;
    Ok(u32::try_from(metres).unwrap_or(MAX_CABLE_LENGTH_M))
}

/// An index or an inclusive range of indexes as SONiC keys write them: `"3"` or `"3-4"`.
pub(crate) fn parse_index_range(text: &str, max: u16) -> Result<(u16, u16), String> {
    let parse_one = |s: &str| -> Option<u16> {
        let s = s.trim();
        if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let complaint =
        || format!("{text:?} is not an index or range like \"3\" or \"3-4\" in 0..={max}");
    let (from, to) = match text.split_once('-') {
        Some((from, to)) => (
            parse_one(from).ok_or_else(complaint)?,
            parse_one(to).ok_or_else(complaint)?,
        ),
        None => {
            let one = parse_one(text).ok_or_else(complaint)?;
            (one, one)
        }
    };
    if from > max || to > max {
        return Err(format!("{text:?} is out of range 0..={max}"));
    }
    if from > to {
        return Err(format!(
            "{text:?} is an empty range: write the low end first"
        ));
    }
    Ok((from, to))
}

/// A list of integers, each in `min..=max`, given as an array (`[3, 4]`, elements may be ranges
/// `"100-200"`) or as SONiC's comma string (`"3,4"`, `"100-200,300"`). The empty list is allowed.
/// Duplicates are refused. On error, returns the reason and, for arrays, the element index.
pub(crate) fn parse_int_list(
    list: &IntList,
    min: i64,
    max: i64,
) -> Result<Vec<i64>, (String, Option<usize>)> {
    let mut values: Vec<i64> = Vec::new();
    let push_item = |item: &IntOrText, values: &mut Vec<i64>| -> Result<(), String> {
        let (from, to) = match item {
            IntOrText::Int(v) => (*v, *v),
            IntOrText::Text(text) => parse_text_item(text)?,
        };
        in_range(from, min, max)?;
        in_range(to, min, max)?;
        if from > to {
            return Err(format!(
                "{from}-{to} is an empty range: write the low end first"
            ));
        }
        // Ranges are bounded by min..=max (at most 4095 values), so this loop is bounded.
        for v in from..=to {
            if values.contains(&v) {
                return Err(format!("{v} is listed twice"));
            }
            values.push(v);
        }
        Ok(())
    };
    match list {
        IntList::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                push_item(item, &mut values).map_err(|reason| (reason, Some(i)))?;
            }
        }
        IntList::Text(text) => {
            for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                push_item(&IntOrText::Text(part.to_owned()), &mut values)
                    .map_err(|reason| (reason, None))?;
            }
        }
    }
    Ok(values)
}

fn parse_text_item(text: &str) -> Result<(i64, i64), String> {
    let parse_one = |s: &str| -> Option<i64> {
        let s = s.trim();
        if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        s.parse().ok()
    };
    let complaint = || format!("{text:?} is not a number or a range like \"3-4\"");
    match text.split_once('-') {
        Some((from, to)) => Ok((
            parse_one(from).ok_or_else(complaint)?,
            parse_one(to).ok_or_else(complaint)?,
        )),
        None => {
            let one = parse_one(text).ok_or_else(complaint)?;
            Ok((one, one))
        }
    }
}

/// A unicast MAC address `aa:bb:cc:dd:ee:ff` (or with `-` separators).
pub(crate) fn parse_unicast_mac(text: &str) -> Result<[u8; 6], String> {
    let complaint = || format!("{text:?} is not a MAC address like \"02:00:00:00:00:01\"");
    let parts: Vec<&str> = text.trim().split([':', '-']).collect();
    if parts.len() != 6 {
        return Err(complaint());
    }
    let mut mac = [0u8; 6];
    for (octet, part) in mac.iter_mut().zip(&parts) {
        if part.len() != 2 {
            return Err(complaint());
        }
        *octet = u8::from_str_radix(part, 16).map_err(|_| complaint())?;
    }
    // IEEE 802 I/G bit: a port's source address must be an individual (unicast) address.
    if mac[0] & 1 != 0 {
        return Err(format!(
            "{text:?} is a multicast address; a port needs a unicast one"
        ));
    }
    Ok(mac)
}

/// `mac + n`, carrying into higher octets (wrapping within 48 bits).
pub(crate) fn mac_add(mac: [u8; 6], n: u64) -> [u8; 6] {
    let mut as_u64 = 0u64;
    for octet in mac {
        as_u64 = (as_u64 << 8) | u64::from(octet);
    }
    let sum = as_u64.wrapping_add(n) & 0xFFFF_FFFF_FFFF;
    let bytes = sum.to_be_bytes();
    let mut out = [0u8; 6];
    out.copy_from_slice(&bytes[2..]);
    out
}

/// A Linux interface name usable with AF_PACKET: 1..=15 bytes (IFNAMSIZ 16 with the NUL), no `/`,
/// no whitespace, not `.` or `..` (rules of the kernel's `dev_valid_name`).
pub(crate) fn check_linux_ifname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 15 {
        return Err(format!(
            "{name:?} is not a Linux interface name: 1 to 15 bytes"
        ));
    }
    if name == "." || name == ".." || name.contains('/') || name.contains(char::is_whitespace) {
        return Err(format!(
            "{name:?} is not a Linux interface name: no '/', no whitespace, not '.' or '..'"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(s: &str) -> IntOrText {
        IntOrText::Text(s.to_owned())
    }

    #[test]
    fn speeds_in_every_accepted_spelling() {
        assert_eq!(parse_speed_mbps(&IntOrText::Int(100_000)), Ok(100_000));
        assert_eq!(parse_speed_mbps(&text("100000")), Ok(100_000));
        assert_eq!(parse_speed_mbps(&text("100G")), Ok(100_000));
        assert_eq!(parse_speed_mbps(&text("25g")), Ok(25_000));
        assert_eq!(parse_speed_mbps(&text("1G")), Ok(1_000));
        assert_eq!(parse_speed_mbps(&text("2.5G")), Ok(2_500));
        assert_eq!(parse_speed_mbps(&text("100M")), Ok(100));
        assert_eq!(parse_speed_mbps(&text("10Gb/s")), Ok(10_000));
        assert_eq!(parse_speed_mbps(&text("10Gbps")), Ok(10_000));
    }

    #[test]
    fn bad_speeds_are_refused_with_the_reason() {
        assert!(parse_speed_mbps(&text("100X"))
            .unwrap_err()
            .contains("not a speed"));
        assert!(parse_speed_mbps(&text("2.5M")).is_err());
        assert!(parse_speed_mbps(&text("G")).is_err());
        assert!(parse_speed_mbps(&text("")).is_err());
        assert!(parse_speed_mbps(&text("-1G")).is_err());
        assert_eq!(
            parse_speed_mbps(&IntOrText::Int(0)),
            Err("0 Mb/s is out of range 1..=800000 Mb/s".to_owned())
        );
        assert!(parse_speed_mbps(&text("1000G")).is_err());
        assert!(parse_speed_mbps(&IntOrText::Int(-5)).is_err());
        assert!(parse_speed_mbps(&text("99999999999999999999G")).is_err());
    }

    #[test]
    fn cable_lengths() {
        assert_eq!(parse_cable_length_m(&text("5m")), Ok(5));
        assert_eq!(parse_cable_length_m(&text("300")), Ok(300));
        assert_eq!(parse_cable_length_m(&IntOrText::Int(40)), Ok(40));
        assert_eq!(parse_cable_length_m(&IntOrText::Int(0)), Ok(0));
        assert!(parse_cable_length_m(&text("5 km")).is_err());
        assert!(parse_cable_length_m(&IntOrText::Int(-1)).is_err());
        assert!(parse_cable_length_m(&text("99999999999999999999m")).is_err());
    }

    #[test]
    fn index_ranges() {
        assert_eq!(parse_index_range("3", 7), Ok((3, 3)));
        assert_eq!(parse_index_range("3-4", 7), Ok((3, 4)));
        assert_eq!(parse_index_range("0-7", 7), Ok((0, 7)));
        assert!(parse_index_range("8", 7)
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_index_range("4-3", 7)
            .unwrap_err()
            .contains("empty range"));
        assert!(parse_index_range("a", 7).is_err());
        assert!(parse_index_range("3-", 7).is_err());
        assert!(parse_index_range("1-2-3", 7).is_err());
    }

    #[test]
    fn int_lists_in_both_spellings() {
        let array = IntList::Array(vec![IntOrText::Int(3), IntOrText::Int(4)]);
        assert_eq!(parse_int_list(&array, 0, 7), Ok(vec![3, 4]));
        assert_eq!(
            parse_int_list(&IntList::Text("3,4".into()), 0, 7),
            Ok(vec![3, 4])
        );
        assert_eq!(
            parse_int_list(&IntList::Text(String::new()), 0, 7),
            Ok(vec![])
        );
        let vlans = IntList::Array(vec![IntOrText::Int(1), text("10-12")]);
        assert_eq!(parse_int_list(&vlans, 1, 4094), Ok(vec![1, 10, 11, 12]));
        let bad = IntList::Array(vec![IntOrText::Int(3), IntOrText::Int(9)]);
        assert_eq!(
            parse_int_list(&bad, 0, 7),
            Err(("9 is out of range 0..=7".to_owned(), Some(1)))
        );
        let twice = IntList::Text("3,3".into());
        assert_eq!(
            parse_int_list(&twice, 0, 7),
            Err(("3 is listed twice".to_owned(), None))
        );
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_unicast_mac("02:00:00:00:00:0a"),
            Ok([2, 0, 0, 0, 0, 10])
        );
        assert_eq!(
            parse_unicast_mac("02-00-00-00-00-0A"),
            Ok([2, 0, 0, 0, 0, 10])
        );
        assert!(parse_unicast_mac("01:00:5e:00:00:01")
            .unwrap_err()
            .contains("multicast"));
        assert!(parse_unicast_mac("02:00:00:00:00").is_err());
        assert!(parse_unicast_mac("02:00:00:00:00:0g").is_err());
        assert_eq!(mac_add([2, 0, 0, 0, 0, 0xff], 1), [2, 0, 0, 0, 1, 0]);
    }

    #[test]
    fn linux_interface_names() {
        assert!(check_linux_ifname("sw-p0").is_ok());
        assert!(check_linux_ifname("abcdefghijklmno").is_ok());
        assert!(check_linux_ifname("abcdefghijklmnop").is_err());
        assert!(check_linux_ifname("").is_err());
        assert!(check_linux_ifname("a/b").is_err());
        assert!(check_linux_ifname("a b").is_err());
        assert!(check_linux_ifname("..").is_err());
    }
}
