//! PG headroom (xoff), XON threshold and reserved size of a lossless priority group, computed the way
//! SONiC's dynamic buffer model does (`swss:cfgmgr/buffer_headroom_mellanox.lua`, design doc
//! `doc/qos/dynamically-headroom-calculation.md`), so that a port gets the numbers an operator would
//! see in a SONiC `pg_lossless_<speed>_<cable>_profile`.
//!
//! The arithmetic is kept in `f64` exactly as the Lua does it (it runs on doubles), so the results
//! match SONiC to the byte; only the final values, multiples of 1 KiB, are integers.

/// Propagation speed of the signal in the cable used by the formula, m/s (`speed_of_light` in the
/// Lua, which is really the speed in copper/fibre, ≈ 0.66 c).
pub const CABLE_SIGNAL_SPEED_METRES_PER_SECOND: f64 = 198_000_000.0;

/// Pause quanta a peer of this speed may still send after receiving XOFF (IEEE 802.3 Annex 31B.3.7
/// reaction times, as tabulated in the SONiC Lua and design doc). `None` for other speeds, where
/// the formula falls back to [`HeadroomConstants::peer_response_time_kib`].
#[must_use]
pub const fn pause_quanta_for_speed(speed_mbps: u64) -> Option<u32> {
    match speed_mbps {
        100 => Some(1),
        1_000 => Some(2),
        10_000 => Some(67),
        25_000 => Some(80),
        40_000 => Some(118),
        50_000 => Some(147),
        100_000 => Some(394),
        200_000 => Some(453),
        400_000 | 800_000 => Some(905),
        _ => None,
    }
}

/// The ASIC (here: software switch) constants and traffic assumptions of the formula.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeadroomConstants {
    /// Buffer cell size, bytes (`ASIC_TABLE.cell_size`).
    pub cell_size_bytes: u32,
    /// Pipeline latency, KiB; becomes the XON threshold (`ASIC_TABLE.pipeline_latency`).
    pub pipeline_latency_kib: f64,
    /// MAC/PHY delay, KiB (`ASIC_TABLE.mac_phy_delay`).
    pub mac_phy_delay_kib: f64,
    /// Peer response, KiB, used only for speeds without a pause-quanta entry
    /// (`ASIC_TABLE.peer_response_time`).
    pub peer_response_time_kib: f64,
    /// headroom's own extension, KiB, added to the propagation delay: frames that still arrive after
    /// XOFF because software batches them (frames ahead of the PFC frame in our TX path, the peer's
    /// RX/TX bursts). 0 reproduces SONiC exactly.
    pub software_latency_kib: f64,
    /// Size of the lossless packets, bytes (`LOSSLESS_TRAFFIC_PATTERN.mtu`).
    pub lossless_mtu_bytes: u32,
    /// Share of small (64-byte) packets, percent (`LOSSLESS_TRAFFIC_PATTERN.small_packet_percentage`).
    pub small_packet_percentage: u8,
    /// Shared headroom pool enabled: the PG reserves only `xon`, its headroom comes from the pool.
    pub shared_headroom_pool: bool,
}

impl HeadroomConstants {
    /// Spectrum-2/-3 constants (`platform/mellanox/asic_table.j2`), SONiC's default traffic
    /// pattern (mtu 1024, 50 % small packets), SHP off.
    pub const SPECTRUM_2: Self = Self {
        cell_size_bytes: 144,
        pipeline_latency_kib: 19.0,
        mac_phy_delay_kib: 0.8,
        peer_response_time_kib: 3.8,
        software_latency_kib: 0.0,
        lossless_mtu_bytes: 1024,
        small_packet_percentage: 50,
        shared_headroom_pool: false,
    };

    /// Spectrum-1: as Spectrum-2 with 96-byte cells.
    pub const SPECTRUM_1: Self = Self {
        cell_size_bytes: 96,
        ..Self::SPECTRUM_2
    };

    /// headroom's defaults for a software switch: 256-byte cells, Spectrum latencies, plus 32 KiB of
    /// software batching (one burst of 32 lossless frames of 1 KiB).
    pub const SOFTWARE: Self = Self {
        cell_size_bytes: 256,
        software_latency_kib: 32.0,
        ..Self::SPECTRUM_2
    };
}

/// What the formula needs to know about one port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadroomPort {
    /// Port speed, Mb/s (SONiC's unit).
    pub speed_mbps: u64,
    /// Cable length, metres.
    pub cable_length_m: u32,
    /// Port MTU, bytes.
    pub port_mtu_bytes: u32,
}

/// The values of a computed lossless PG profile, bytes (each a multiple of 1024).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadroomValues {
    /// Headroom after XOFF (`BUFFER_PROFILE.xoff`).
    pub xoff_bytes: u64,
    /// XON threshold (`BUFFER_PROFILE.xon`).
    pub xon_bytes: u64,
    /// Reserved size (`BUFFER_PROFILE.size`): `xoff + xon`, or `xon` when the SHP is enabled.
    pub size_bytes: u64,
}

/// `ceil(x / 1024) * 1024`, as the Lua's `math.ceil(x / 1024) * 1024`.
fn ceil_1k(x: f64) -> f64 {
    (x / 1024.0).ceil() * 1024.0
}

/// Bytes (a whole number of KiB) as an integer; the formula never yields negatives or fractions
/// after `ceil_1k`, and the float-to-int `as` saturates, so this cannot wrap.
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn to_bytes(x: f64) -> u64 {
    x.max(0.0) as u64
}

/// Compute xoff, xon and size for a lossless PG of `port` (SONiC's Lua formula, §3.2 of the
/// reference; no gearbox, no 8-lane doubling, no Spectrum-4/5 tile or Spectrum-6 terms).
#[must_use]
pub fn compute_headroom(constants: &HeadroomConstants, port: &HeadroomPort) -> HeadroomValues {
    let cell = f64::from(constants.cell_size_bytes);
    let lossless_mtu = f64::from(constants.lossless_mtu_bytes);
    let spp = f64::from(constants.small_packet_percentage.min(100));
    // Speeds are at most 800 000 Mb/s after validation: exact in f64.
    #[allow(clippy::cast_precision_loss)]
    let speed_mbps = port.speed_mbps as f64;

    let pipeline_latency = constants.pipeline_latency_kib * 1024.0;
    let mac_phy_delay = constants.mac_phy_delay_kib * 1024.0;
    let peer_response = match pause_quanta_for_speed(port.speed_mbps) {
        // One pause quantum is 512 bit times (IEEE 802.3 31B.2).
        Some(quanta) => f64::from(quanta) * 512.0 / 8.0,
        None => constants.peer_response_time_kib * 1024.0,
    };
    let worst_case_factor = if cell > 128.0 {
        (cell / 64.0).ceil()
    } else {
        (2.0 * cell / (1.0 + cell)).ceil()
    };
    let small_packet_percentage_by_byte =
        100.0 * 64.0 / ((spp * 64.0 + (100.0 - spp) * lossless_mtu) / 100.0);
    let cell_occupancy = (100.0 - small_packet_percentage_by_byte
        + small_packet_percentage_by_byte * worst_case_factor)
        / 100.0;
    // Round trip of the cable: XOFF travels to the peer while the peer's data travels back.
    let bytes_on_cable = 2.0 * f64::from(port.cable_length_m) * speed_mbps * 1_000_000_000.0
        / CABLE_SIGNAL_SPEED_METRES_PER_SECOND
        / (8.0 * 1000.0);
    let propagation_delay = f64::from(port.port_mtu_bytes)
        + bytes_on_cable
        + mac_phy_delay
        + peer_response
        + constants.software_latency_kib * 1024.0;

    let mut xoff = ceil_1k(lossless_mtu + propagation_delay * cell_occupancy);
    if !constants.shared_headroom_pool
        && constants.small_packet_percentage != 100
        && xoff + 2048.0 < ceil_1k(lossless_mtu + propagation_delay * worst_case_factor)
    {
        xoff += 2048.0;
    }
    let xon = ceil_1k(pipeline_latency);
    let size = if constants.shared_headroom_pool {
        ceil_1k(xon)
    } else {
        ceil_1k(xoff + xon)
    };
    HeadroomValues {
        xoff_bytes: to_bytes(xoff),
        xon_bytes: to_bytes(xon),
        size_bytes: to_bytes(size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(speed_mbps: u64, cable_length_m: u32) -> HeadroomPort {
        HeadroomPort {
            speed_mbps,
            cable_length_m,
            port_mtu_bytes: 9100,
        }
    }

    fn values(xoff_bytes: u64, xon_bytes: u64, size_bytes: u64) -> HeadroomValues {
        HeadroomValues {
            xoff_bytes,
            xon_bytes,
            size_bytes,
        }
    }

    // Worked examples of the reference §3.2 (Spectrum-2, 100G, port MTU 9100, mtu 1024, spp 50).
    #[test]
    fn spectrum_2_100g_5m() {
        let result = compute_headroom(&HeadroomConstants::SPECTRUM_2, &port(100_000, 5));
        assert_eq!(result, values(48128, 19456, 67584));
    }

    #[test]
    fn spectrum_2_100g_40m() {
        let result = compute_headroom(&HeadroomConstants::SPECTRUM_2, &port(100_000, 40));
        assert_eq!(result, values(53248, 19456, 72704));
    }

    #[test]
    fn spectrum_2_100g_300m() {
        let result = compute_headroom(&HeadroomConstants::SPECTRUM_2, &port(100_000, 300));
        assert_eq!(result, values(94208, 19456, 113664));
    }

    #[test]
    fn spectrum_2_all_small_packets_skips_the_2k_rule() {
        let constants = HeadroomConstants {
            small_packet_percentage: 100,
            ..HeadroomConstants::SPECTRUM_2
        };
        let result = compute_headroom(&constants, &port(100_000, 5));
        assert_eq!(result, values(108544, 19456, 128000));
    }

    #[test]
    fn spectrum_1_100g_5m() {
        let result = compute_headroom(&HeadroomConstants::SPECTRUM_1, &port(100_000, 5));
        assert_eq!(result, values(44032, 19456, 63488));
    }

    #[test]
    fn shared_headroom_pool_reserves_only_xon_and_skips_the_2k_rule() {
        let constants = HeadroomConstants {
            shared_headroom_pool: true,
            ..HeadroomConstants::SPECTRUM_2
        };
        let result = compute_headroom(&constants, &port(100_000, 5));
        // Without the +2 KiB rule xoff stays at ceil1k(45206) = 46080.
        assert_eq!(result, values(46080, 19456, 19456));
    }

    #[test]
    fn unknown_speed_uses_the_peer_response_time() {
        // 2.5G has no pause-quanta entry: peer response = 3.8 KiB = 3891.2 B.
        // prop = 9100 + 2*5*2500e9/1.98e8/8000 (15.78) + 819.2 + 3891.2 = 13826.18;
        // xoff = ceil1k(1024 + 13826.18 * 1.23529) = ceil1k(18103.5) = 18432; +2 KiB rule:
        // ceil1k(1024 + 13826.18*3) = 43008 > 20480 -> 20480.
        let result = compute_headroom(&HeadroomConstants::SPECTRUM_2, &port(2_500, 5));
        assert_eq!(result, values(20480, 19456, 39936));
    }

    // Our own small speeds with the software constants (cell 256, 32 KiB software latency).
    // Arithmetic: wcf = 4, spp_by_byte = 11.7647, occupancy = 1.352941,
    // prop = 9100 + cable + 819.2 + peer + 32768.
    #[test]
    fn software_1g_5m() {
        // cable 6.31, peer 2*64 = 128: prop = 42821.51; xoff = ceil1k(1024 + 57934.98) = 59392;
        // ceil1k(1024 + 171286.04) = 173056 > 61440 -> xoff 61440; size = 61440 + 19456.
        let result = compute_headroom(&HeadroomConstants::SOFTWARE, &port(1_000, 5));
        assert_eq!(result, values(61440, 19456, 80896));
    }

    #[test]
    fn software_10g_5m() {
        // cable 63.13, peer 67*64 = 4288: prop = 47038.33; xoff = ceil1k(1024 + 63640.09) = 65536;
        // +2 KiB -> 67584; size 87040.
        let result = compute_headroom(&HeadroomConstants::SOFTWARE, &port(10_000, 5));
        assert_eq!(result, values(67584, 19456, 87040));
    }

    #[test]
    fn software_25g_5m() {
        // cable 157.83, peer 80*64 = 5120: prop = 47965.03; xoff = ceil1k(1024 + 64893.86) = 66560;
        // +2 KiB -> 68608; size 88064.
        let result = compute_headroom(&HeadroomConstants::SOFTWARE, &port(25_000, 5));
        assert_eq!(result, values(68608, 19456, 88064));
    }

    #[test]
    fn headroom_grows_with_cable_length_and_speed() {
        let constants = HeadroomConstants::SOFTWARE;
        let short = compute_headroom(&constants, &port(25_000, 5));
        let long = compute_headroom(&constants, &port(25_000, 300));
        let faster = compute_headroom(&constants, &port(100_000, 300));
        assert!(long.xoff_bytes > short.xoff_bytes);
        assert!(faster.xoff_bytes > long.xoff_bytes);
        for v in [short, long, faster] {
            assert_eq!(v.xoff_bytes % 1024, 0);
            assert_eq!(v.size_bytes, v.xoff_bytes + v.xon_bytes);
        }
    }
}
