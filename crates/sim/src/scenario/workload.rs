//! Workload generation: flow-size distributions (CDF files) and Poisson arrivals at a load
//! factor, as HPCC's traffic generator (`traffic_gen.py`) draws them.
//!
//! A CDF file has one `<size in bytes> <cumulative percent>` pair per line (`#` starts a
//! comment), sizes and percents non-decreasing, the last percent 100. A size is drawn by
//! inverting the CDF with linear interpolation between points. For a load `L`, each host
//! starts flows as a Poisson process of rate `L × link rate / (8 × mean size)`, each to a
//! destination drawn uniformly among the other hosts, so that on average every host sends at
//! `L` times its link rate. Draws come from a xoshiro256** generator seeded by the scenario's
//! seed: the same seed gives the same flows.

use crate::rdma::RdmaFlowSpec;
use crate::HostId;
use headroom_core::time::Instant;
use rand_core::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256StarStar;
use std::path::Path;

/// Where a scenario flow came from: the index of its `[[flow]]`, `[[incast]]`, `[[onoff]]` or
/// `[[random]]` table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// `flow[i]`.
    Flow(usize),
    /// `incast[i]`.
    Incast(usize),
    /// `onoff[i]`.
    OnOff(usize),
    /// `random[i]`.
    Random(usize),
}

impl FlowKind {
    /// `flow[0]`, `incast[1]`, ...
    #[must_use]
    pub fn label(&self) -> String {
        match self {
            Self::Flow(i) => format!("flow[{i}]"),
            Self::Incast(i) => format!("incast[{i}]"),
            Self::OnOff(i) => format!("onoff[{i}]"),
            Self::Random(i) => format!("random[{i}]"),
        }
    }
}

/// A flow-size distribution.
#[derive(Clone, Debug, PartialEq)]
pub struct CdfFile {
    /// (bytes, cumulative probability 0..=1), non-decreasing in both.
    pub points: Vec<(f64, f64)>,
}

/// The WebSearch distribution (config/sim/cdf/websearch.cdf).
pub const WEBSEARCH: &str = include_str!("../../../../config/sim/cdf/websearch.cdf");
/// The FB_Hadoop distribution (config/sim/cdf/fb_hadoop.cdf).
pub const FB_HADOOP: &str = include_str!("../../../../config/sim/cdf/fb_hadoop.cdf");

/// `"websearch"` and `"fb_hadoop"`: the shipped distributions.
#[must_use]
pub fn builtin_cdf(name: &str) -> Option<CdfFile> {
    match name {
        "websearch" => CdfFile::parse(WEBSEARCH).ok(),
        "fb_hadoop" => CdfFile::parse(FB_HADOOP).ok(),
        _ => None,
    }
}

impl CdfFile {
    /// Reads a CDF file.
    ///
    /// # Errors
    /// Unreadable, or not a CDF (with the line).
    pub fn load(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            format!(
                "{}: cannot read ({e}); or use \"websearch\" or \"fb_hadoop\"",
                path.display()
            )
        })?;
        Self::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parses CDF text.
    ///
    /// # Errors
    /// A message naming the line.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut points: Vec<(f64, f64)> = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut it = line.split_whitespace();
            let (Some(a), Some(b), None) = (it.next(), it.next(), it.next()) else {
                return Err(format!("line {}: expected \"<bytes> <percent>\"", n + 1));
            };
            let (Ok(size), Ok(pct)) = (a.parse::<f64>(), b.parse::<f64>()) else {
                return Err(format!("line {}: not two numbers", n + 1));
            };
            if !(size >= 0.0 && (0.0..=100.0).contains(&pct)) {
                return Err(format!("line {}: size ≥ 0 and percent in 0..=100", n + 1));
            }
            if let Some(&(ps, pp)) = points.last() {
                if size < ps || pct / 100.0 < pp {
                    return Err(format!("line {}: sizes and percents never decrease", n + 1));
                }
            }
            points.push((size, pct / 100.0));
        }
        match points.last() {
            Some(&(_, p)) if (p - 1.0).abs() < 1e-9 => Ok(Self { points }),
            _ => Err("the last percent must be 100".into()),
        }
    }

    /// The mean size, bytes (the CDF is piecewise linear, so each segment contributes its
    /// midpoint times its probability).
    #[must_use]
    pub fn mean(&self) -> f64 {
        let mut mean = 0.0;
        let mut prev = (0.0, 0.0);
        for &(s, p) in &self.points {
            mean += (s + prev.0) / 2.0 * (p - prev.1);
            prev = (s, p);
        }
        mean
    }

    /// The size at cumulative probability `u` in [0, 1), at least 1 byte.
    #[must_use]
    pub fn sample(&self, u: f64) -> u64 {
        let mut prev = (0.0, 0.0);
        for &(s, p) in &self.points {
            if u < p {
                let f = if p > prev.1 {
                    (u - prev.1) / (p - prev.1)
                } else {
                    0.0
                };
                let v = prev.0 + f * (s - prev.0);
                return (v.round() as u64).max(1);
            }
            prev = (s, p);
        }
        (prev.0.round() as u64).max(1)
    }
}

/// A uniform draw in [0, 1) with 53 bits.
fn unit(rng: &mut Xoshiro256StarStar) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Poisson flows among `hosts` (link rates `rates`) at `load`, starting in [start, stop).
///
/// # Errors
/// When the expected number of flows is over 1,000,000.
pub fn poisson(
    cdf: &CdfFile,
    load: f64,
    hosts: &[usize],
    rates: &[u64],
    start_ns: u64,
    stop_ns: u64,
    seed: u64,
) -> Result<Vec<RdmaFlowSpec>, String> {
    let mean = cdf.mean().max(1.0);
    let span = stop_ns.saturating_sub(start_ns) as f64;
    let expected: f64 = rates
        .iter()
        .map(|&r| load * r as f64 / (8.0 * mean) * span / 1e9)
        .sum();
    if expected > 1e6 {
        return Err(format!(
            "about {expected:.0} flows: at most 1000000 (shorten the window or lower the load)"
        ));
    }
    let mut rng = Xoshiro256StarStar::seed_from_u64(seed);
    let mut flows = Vec::new();
    for (k, &src) in hosts.iter().enumerate() {
        // Flows per ns.
        let lambda = load * rates[k] as f64 / (8.0 * mean) / 1e9;
        let mut t = start_ns as f64;
        loop {
            t += -(1.0 - unit(&mut rng)).ln() / lambda;
            if t >= stop_ns as f64 {
                break;
            }
            let size = cdf.sample(unit(&mut rng));
            let mut d = (rng.next_u64() % (hosts.len() as u64 - 1)) as usize;
            if d >= k {
                d += 1;
            }
            flows.push(RdmaFlowSpec {
                src: HostId(src),
                dst: HostId(hosts[d]),
                bytes: Some(size),
                start: Instant::from_nanos(t as u64),
                stop: None,
                message_bytes: u32::try_from(size.min(1 << 20)).unwrap_or(1 << 20),
                vlan_id: None,
            });
        }
    }
    // In start order (ties: by source), as a trace file lists them.
    flows.sort_by_key(|f| (f.start, f.src));
    Ok(flows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_cdfs_parse_and_have_their_published_means() {
        let w = builtin_cdf("websearch").unwrap();
        // Piecewise-linear mean of the WebSearch points (Σ segment midpoint × probability):
        // 1,711,250 bytes.
        assert!((w.mean() - 1_711_250.0).abs() < 1e-6, "{}", w.mean());
        let h = builtin_cdf("fb_hadoop").unwrap();
        assert!(h.mean() > 100_000.0 && h.mean() < 400_000.0, "{}", h.mean());
        assert_eq!(w.sample(0.0), 1);
        assert_eq!(w.sample(0.15), 10_000);
        assert_eq!(w.sample(0.999_999), 29_999_333);
    }

    #[test]
    fn bad_cdfs_are_refused_with_the_line() {
        assert!(CdfFile::parse("0 0\n10 50\n").unwrap_err().contains("100"));
        assert!(CdfFile::parse("0 0\n10 50\n5 100\n")
            .unwrap_err()
            .contains("line 3"));
        assert!(CdfFile::parse("x y\n").unwrap_err().contains("line 1"));
    }

    #[test]
    fn poisson_load_is_the_requested_one_and_seeded() {
        let cdf = builtin_cdf("fb_hadoop").unwrap();
        let hosts = [0, 1, 2, 3];
        let rates = [10_000_000_000; 4];
        let a = poisson(&cdf, 0.5, &hosts, &rates, 0, 2_000_000_000, 7).unwrap();
        let b = poisson(&cdf, 0.5, &hosts, &rates, 0, 2_000_000_000, 7).unwrap();
        assert_eq!(a, b);
        let c = poisson(&cdf, 0.5, &hosts, &rates, 0, 2_000_000_000, 8).unwrap();
        assert_ne!(a, c);
        // Offered bytes ≈ 0.5 × 4 × 10 Gb/s × 2 s = 5 GB, within 10 % (the distribution's
        // tail makes shorter windows noisier).
        let bytes: u64 = a.iter().filter_map(|f| f.bytes).sum();
        assert!((4.5e9..5.5e9).contains(&(bytes as f64)), "{bytes}");
        assert!(a.iter().all(|f| f.src != f.dst));
    }
}
