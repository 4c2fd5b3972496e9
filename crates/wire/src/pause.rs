//! Pause quanta and time (IEEE 802.3 Annex 31B.2: one pause_quantum is 512 bit times at the speed of
//! the link; IEEE 802.1Qbb uses the same unit for its eight per-priority times).
//!
//! Conversions use exact integer arithmetic and **round up**: a transmitter that honours a PAUSE never
//! resumes early, and a switch that asks for "at least N ns" of silence gets at least N ns.
//! A `link_bps` of 0 never panics: a non-zero number of quanta then lasts `u64::MAX` ns (for ever), and
//! any duration is 0 quanta.

/// Bit times in one pause quantum (IEEE 802.3 Annex 31B.2).
pub const BIT_TIMES_PER_QUANTUM: u64 = 512;

/// The largest pause time a frame can carry, in quanta.
pub const MAX_QUANTA: u16 = u16::MAX;

const NANOS_PER_SECOND: u64 = 1_000_000_000;

/// Duration of `quanta` pause quanta on a link of `link_bps` bits per second, in nanoseconds, rounded
/// up. Example: 0xFFFF quanta at 10 Gb/s = 3,355,392 ns.
pub const fn quanta_to_nanos(quanta: u16, link_bps: u64) -> u64 {
    if quanta == 0 {
        return 0;
    }
    if link_bps == 0 {
        return u64::MAX;
    }
    // 65535 * 512 * 1e9 < 3.4e16: no overflow in u64.
    let bit_nanos = quanta as u64 * BIT_TIMES_PER_QUANTUM * NANOS_PER_SECOND;
    bit_nanos.div_ceil(link_bps)
}

/// The number of pause quanta that last at least `nanos` nanoseconds on a link of `link_bps` bits per
/// second (rounded up), saturated at [`MAX_QUANTA`].
pub const fn nanos_to_quanta(nanos: u64, link_bps: u64) -> u16 {
    // nanos * link_bps can exceed u64 (e.g. 1 s at 400 Gb/s); u128 cannot overflow here.
    let bits_times_1e9 = nanos as u128 * link_bps as u128;
    let quanta = bits_times_1e9.div_ceil(BIT_TIMES_PER_QUANTUM as u128 * NANOS_PER_SECOND as u128);
    if quanta > MAX_QUANTA as u128 {
        MAX_QUANTA
    } else {
        quanta as u16
    }
}

/// Bit times covered by `quanta` pause quanta (independent of the link speed).
pub const fn quanta_to_bit_times(quanta: u16) -> u64 {
    quanta as u64 * BIT_TIMES_PER_QUANTUM
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GBPS: u64 = 1_000_000_000;

    /// dcqcn-roce.md §5.1: duration of one quantum and of 0xFFFF quanta per link speed. The table gives
    /// 0.1 us precision; the exact values (in ns, rounded up) are `65535 * 512 / speed_gbps`.
    #[test]
    fn reproduces_reference_table() {
        let table: [(u64, u64, u64); 7] = [
            // (Gb/s, ps per quantum, ns for 0xFFFF quanta rounded up)
            (10, 51_200, 3_355_392),
            (25, 20_480, 1_342_157),
            (40, 12_800, 838_848),
            (50, 10_240, 671_079),
            (100, 5_120, 335_540),
            (200, 2_560, 167_770),
            (400, 1_280, 83_885),
        ];
        for (gbps, ps_per_quantum, ns_max) in table {
            let bps = gbps * GBPS;
            assert_eq!(quanta_to_nanos(0xFFFF, bps), ns_max, "{gbps}G");
            // 1000 quanta = 1000 * one quantum, exact in ns because ps_per_quantum * 1000 / 1000.
            assert_eq!(quanta_to_nanos(1000, bps), ps_per_quantum, "{gbps}G");
            assert_eq!(nanos_to_quanta(ns_max, bps), 0xFFFF, "{gbps}G");
        }
        // The table's rounded microsecond figures.
        let us_tenths = |gbps: u64| (quanta_to_nanos(0xFFFF, gbps * GBPS) + 50) / 100;
        assert_eq!(us_tenths(10), 33_554); // 3355.4 us
        assert_eq!(us_tenths(25), 13_422); // 1342.2 us
        assert_eq!(us_tenths(40), 8_388); //   838.8 us (838.848; table rounds to 838.9)
        assert_eq!(us_tenths(50), 6_711); //   671.1 us
        assert_eq!(us_tenths(100), 3_355); //  335.5 us
        assert_eq!(us_tenths(200), 1_678); //  167.8 us
        assert_eq!(us_tenths(400), 839); //     83.9 us
    }

    #[test]
    fn rounding_is_up() {
        // One quantum at 100G is 5.12 ns -> 6 ns.
        assert_eq!(quanta_to_nanos(1, 100 * GBPS), 6);
        // 5 ns at 100G is 500 bit times -> 1 quantum; 6 ns is 600 bit times -> 2 quanta.
        assert_eq!(nanos_to_quanta(5, 100 * GBPS), 1);
        assert_eq!(nanos_to_quanta(6, 100 * GBPS), 2);
        assert_eq!(nanos_to_quanta(0, 100 * GBPS), 0);
        assert_eq!(quanta_to_nanos(0, 100 * GBPS), 0);
    }

    #[test]
    fn saturates_and_never_divides_by_zero() {
        assert_eq!(nanos_to_quanta(u64::MAX, 400 * GBPS), MAX_QUANTA);
        assert_eq!(nanos_to_quanta(1_000_000_000, 10 * GBPS), MAX_QUANTA);
        assert_eq!(quanta_to_nanos(1, 0), u64::MAX);
        assert_eq!(quanta_to_nanos(0, 0), 0);
        assert_eq!(nanos_to_quanta(1_000, 0), 0);
        assert_eq!(quanta_to_bit_times(0xFFFF), 33_553_920);
    }

    proptest! {
        /// Both directions round up, so a round trip gives back `quanta` when the duration is a whole
        /// number of nanoseconds and at most one quantum more otherwise (up to 512 Gb/s, where a
        /// nanosecond is at most one quantum).
        #[test]
        fn quanta_round_trip(quanta in any::<u16>(), bps in 1_000_000u64..=512_000_000_000) {
            let back = nanos_to_quanta(quanta_to_nanos(quanta, bps), bps);
            let exact = (u64::from(quanta) * 512 * 1_000_000_000) % bps == 0;
            if exact {
                prop_assert_eq!(back, quanta);
            } else {
                prop_assert!(back == quanta || back == quanta.saturating_add(1), "{} -> {}", quanta, back);
            }
        }

        /// The quanta chosen for a duration last at least that long (unless saturated).
        #[test]
        fn quanta_cover_the_duration(nanos in 0u64..10_000_000, bps in 1u64..1_000_000_000_000) {
            let quanta = nanos_to_quanta(nanos, bps);
            if quanta < MAX_QUANTA {
                prop_assert!(quanta_to_nanos(quanta, bps) >= nanos);
                if quanta > 0 {
                    // ... and one quantum fewer would not.
                    prop_assert!(u128::from(quanta - 1) * 512 * 1_000_000_000 < u128::from(nanos) * u128::from(bps));
                }
            }
        }
    }
}
