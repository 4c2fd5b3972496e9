//! The thresholds an operator wants to read per pool, port and priority group (`headroom check`):
//! headroom, XOFF point, XON point and drop point, in bytes and cells.
//!
//! Semantics (reference §2): a PG first fills its reserved `size`, then draws shared buffer up to
//! its shared limit; reaching it asserts XOFF. For dynamic thresholds the limit shown is the one
//! reached when this PG is the only congested one, `α/(1+α) × shared` (as SONiC's tests compute
//! it); with more congestion it is lower. After XOFF the PG takes up to `xoff` bytes of headroom,
//! then drops. XON is sent at `max(xon, XOFF point − xon_offset)` when `xon_offset > 0`, else at
//! `xon` (SAI `XON_OFFSET_TH`, SONiC dynamic-headroom design doc).

use core::fmt;

use crate::headroom::HeadroomValues;
use crate::model::{Config, PoolDirection, PriorityBits, ThresholdMode};

/// Derived values of a whole configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Derived {
    /// Cell size, bytes (cells = ceil(bytes / cell)).
    pub cell_size_bytes: u32,
    /// Every pool.
    pub pools: Vec<DerivedPool>,
    /// Every port.
    pub ports: Vec<DerivedPort>,
}

/// A pool's carve-up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedPool {
    /// Pool name.
    pub name: String,
    /// Ingress or egress.
    pub direction: PoolDirection,
    /// Threshold mode.
    pub mode: ThresholdMode,
    /// Pool size, bytes.
    pub size_bytes: u64,
    /// Σ reserved sizes bound to it, bytes.
    pub reserved_bytes: u64,
    /// Σ private headroom (xoff of lossless PGs, when no SHP), bytes.
    pub private_headroom_bytes: u64,
    /// Shared headroom pool, bytes.
    pub shared_headroom_pool_bytes: u64,
    /// Shared buffer, bytes.
    pub shared_bytes: u64,
}

/// A port's PGs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedPort {
    /// Port name.
    pub name: String,
    /// Speed, Mb/s.
    pub speed_mbps: u64,
    /// Cable length, metres.
    pub cable_length_m: u32,
    /// MTU, bytes.
    pub mtu_bytes: u32,
    /// PFC-enabled priorities.
    pub pfc_enable: PriorityBits,
    /// What the headroom formula gives for the port.
    pub computed_headroom: HeadroomValues,
    /// PGs 0..=7.
    pub priority_groups: Vec<DerivedPg>,
}

/// One PG's thresholds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DerivedPg {
    /// PG index.
    pub pg: u8,
    /// Bound profile.
    pub profile: String,
    /// Its pool.
    pub pool: String,
    /// Has headroom.
    pub lossless: bool,
    /// Reserved size, bytes.
    pub reserved_bytes: u64,
    /// Headroom after XOFF (profile xoff), bytes.
    pub headroom_bytes: u64,
    /// Shared bytes this PG may use when it alone is congested, bytes.
    pub shared_limit_bytes: u64,
    /// Occupancy at which XOFF is sent (reserved + shared limit), lossless PGs only, bytes.
    pub xoff_point_bytes: Option<u64>,
    /// Occupancy at or below which XON is sent, lossless PGs only, bytes.
    pub xon_point_bytes: Option<u64>,
    /// Occupancy above which arrivals are dropped (XOFF point + headroom; lossy: reserved +
    /// shared limit), bytes.
    pub drop_point_bytes: u64,
}

/// Compute the derived values of `config`.
#[must_use]
pub fn derived(config: &Config) -> Derived {
    let pools = config
        .pools
        .iter()
        .map(|pool| DerivedPool {
            name: pool.name.clone(),
            direction: pool.direction,
            mode: pool.mode,
            size_bytes: pool.size_bytes,
            reserved_bytes: pool.reserved_bytes,
            private_headroom_bytes: pool.private_headroom_bytes,
            shared_headroom_pool_bytes: pool.shared_headroom_pool_bytes,
            shared_bytes: pool.shared_bytes,
        })
        .collect();
    let ports = config
        .ports
        .iter()
        .map(|port| DerivedPort {
            name: port.name.clone(),
            speed_mbps: port.speed_mbps,
            cable_length_m: port.cable_length_m,
            mtu_bytes: port.mtu_bytes,
            pfc_enable: port.pfc_enable,
            computed_headroom: port.computed_headroom,
            priority_groups: port
                .priority_groups
                .iter()
                .zip(0u8..)
                .map(|(pg, index)| {
                    let profile = &pg.profile;
                    let pool = config.pools.get(profile.pool_index);
                    let shared = pool.map_or(0, |pool| pool.shared_bytes);
                    let shared_limit_bytes = profile.threshold.single_congested_limit_bytes(shared);
                    let limit_point = profile.size_bytes.saturating_add(shared_limit_bytes);
                    let lossless = profile.is_lossless();
                    let xon_point = if profile.xon_offset_bytes > 0 {
                        profile
                            .xon_bytes
                            .max(limit_point.saturating_sub(profile.xon_offset_bytes))
                    } else {
                        profile.xon_bytes
                    };
                    DerivedPg {
                        pg: index,
                        profile: profile.name.clone(),
                        pool: pool.map_or_else(String::new, |pool| pool.name.clone()),
                        lossless,
                        reserved_bytes: profile.size_bytes,
                        headroom_bytes: profile.xoff_bytes,
                        shared_limit_bytes,
                        xoff_point_bytes: lossless.then_some(limit_point),
                        xon_point_bytes: lossless.then_some(xon_point),
                        drop_point_bytes: limit_point.saturating_add(profile.xoff_bytes),
                    }
                })
                .collect(),
        })
        .collect();
    Derived {
        cell_size_bytes: config.switch.cell_size_bytes,
        pools,
        ports,
    }
}

/// Renders left-aligned text columns and right-aligned number columns, SONiC CLI style (header,
/// dashes, rows).
struct Table {
    header: Vec<&'static str>,
    right_aligned: Vec<bool>,
    rows: Vec<Vec<String>>,
}

impl Table {
    fn new(columns: &[(&'static str, bool)]) -> Self {
        Self {
            header: columns.iter().map(|(name, _)| *name).collect(),
            right_aligned: columns.iter().map(|(_, right)| *right).collect(),
            rows: Vec::new(),
        }
    }

    fn render(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|c| {
                self.rows
                    .iter()
                    .map(|row| row[c].chars().count())
                    .chain([self.header[c].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            let mut out = String::new();
            for (c, cell) in cells.iter().enumerate() {
                if c > 0 {
                    out.push_str("  ");
                }
                let pad = widths[c].saturating_sub(cell.chars().count());
                if self.right_aligned[c] {
                    out.extend(core::iter::repeat_n(' ', pad));
                    out.push_str(cell);
                } else {
                    out.push_str(cell);
                    out.extend(core::iter::repeat_n(' ', pad));
                }
            }
            writeln!(f, "{}", out.trim_end())
        };
        let header: Vec<String> = self.header.iter().map(|h| (*h).to_owned()).collect();
        line(f, &header)?;
        let dashes: Vec<String> = widths.iter().map(|&w| "-".repeat(w)).collect();
        line(f, &dashes)?;
        for row in &self.rows {
            line(f, row)?;
        }
        Ok(())
    }
}

impl Derived {
    /// `bytes (cells)`.
    fn amount(&self, bytes: u64) -> String {
        let cells = bytes.div_ceil(u64::from(self.cell_size_bytes.max(1)));
        format!("{bytes} ({cells})")
    }
}

impl fmt::Display for Derived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "Buffer pools (bytes (cells of {} bytes)):",
            self.cell_size_bytes
        )?;
        let mut pools = Table::new(&[
            ("Pool", false),
            ("Type", false),
            ("Mode", false),
            ("Size", true),
            ("Reserved", true),
            ("Private headroom", true),
            ("SHP", true),
            ("Shared", true),
        ]);
        for pool in &self.pools {
            pools.rows.push(vec![
                pool.name.clone(),
                match pool.direction {
                    PoolDirection::Ingress => "ingress".to_owned(),
                    PoolDirection::Egress => "egress".to_owned(),
                },
                match pool.mode {
                    ThresholdMode::Static => "static".to_owned(),
                    ThresholdMode::Dynamic => "dynamic".to_owned(),
                },
                self.amount(pool.size_bytes),
                self.amount(pool.reserved_bytes),
                self.amount(pool.private_headroom_bytes),
                self.amount(pool.shared_headroom_pool_bytes),
                self.amount(pool.shared_bytes),
            ]);
        }
        pools.render(f)?;
        for port in &self.ports {
            writeln!(f)?;
            let pfc = port.pfc_enable.to_sonic_string();
            writeln!(
                f,
                "{}: {} Mb/s, {} m, MTU {}, PFC on {}; formula: xoff {}, xon {}, size {}",
                port.name,
                port.speed_mbps,
                port.cable_length_m,
                port.mtu_bytes,
                if pfc.is_empty() { "none" } else { &pfc },
                port.computed_headroom.xoff_bytes,
                port.computed_headroom.xon_bytes,
                port.computed_headroom.size_bytes
            )?;
            let mut table = Table::new(&[
                ("PG", true),
                ("Profile", false),
                ("Pool", false),
                ("Reserved", true),
                ("Shared limit", true),
                ("Headroom", true),
                ("XOFF point", true),
                ("XON point", true),
                ("Drop point", true),
            ]);
            for pg in &port.priority_groups {
                let optional =
                    |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |v| self.amount(v));
                table.rows.push(vec![
                    pg.pg.to_string(),
                    pg.profile.clone(),
                    pg.pool.clone(),
                    self.amount(pg.reserved_bytes),
                    self.amount(pg.shared_limit_bytes),
                    self.amount(pg.headroom_bytes),
                    optional(pg.xoff_point_bytes),
                    optional(pg.xon_point_bytes),
                    self.amount(pg.drop_point_bytes),
                ]);
            }
            table.render(f)?;
        }
        Ok(())
    }
}
