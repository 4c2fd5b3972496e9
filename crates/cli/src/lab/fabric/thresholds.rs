//! The lossless PG thresholds of a fabric switch's ports, from its running configuration: the
//! values the switch itself derives (`headroom_config::derived`, what `headroom check` prints),
//! so that a scenario compares what it measures with what the switch computed, never with a
//! re-derivation of its own.

use super::plan::Plan;
use super::switch_socket;
use crate::client::Target;
use crate::lab::LabError;
use headroom_runtime::protocol::{Request, RunningConfig, Show};
use serde::Serialize;

/// The lossless PG's thresholds on one port of a switch, from its running configuration
/// (`headroom_config::derived`).
#[derive(Clone, Debug, Serialize)]
pub(crate) struct PgThresholds {
    /// The switch.
    pub switch: String,
    /// Its port.
    pub port: String,
    /// What is at the other end.
    pub peer: String,
    /// The PG priority 3 maps to.
    pub pg: u8,
    /// Reserved (profile `size`), bytes.
    pub reserved_bytes: u64,
    /// Shared bytes this PG may use when it alone is congested.
    pub shared_limit_bytes: u64,
    /// Occupancy at which the PG sends XOFF (reserved + shared limit), bytes.
    pub xoff_point_bytes: u64,
    /// Headroom after XOFF (the formula's `xoff`), bytes.
    pub headroom_bytes: u64,
    /// XOFF point + headroom, bytes: arrivals beyond are dropped.
    pub drop_point_bytes: u64,
}

/// The thresholds of the PG that `dscp` maps to, on every port of `switch`, computed from its
/// running configuration by the configuration crate. A port where that PG is not lossless is
/// refused: every scenario that asks runs lossless traffic on it.
pub(super) fn lossless_pg_thresholds(
    plan: &Plan,
    switch: &str,
    dscp: usize,
) -> Result<Vec<PgThresholds>, LabError> {
    let target = Target::for_socket(switch_socket(&plan.spec.prefix, switch));
    let (running, _) = target
        .fetch::<RunningConfig>(&Request::Show { what: Show::Config })
        .map_err(|e| LabError::Failed(format!("{switch}: {e}")))?;
    let (config, _) = headroom_config::parse(&running.text, &running.file)
        .map_err(|e| LabError::Failed(format!("{switch}'s running configuration: {e}")))?;
    let derived = headroom_config::derived(&config);
    let planned = plan
        .switch(switch)
        .ok_or_else(|| LabError::Failed(format!("no switch {switch}")))?;
    let mut rows = Vec::new();
    for (port, values) in config.ports.iter().zip(&derived.ports) {
        let tc = port.maps.dscp_to_tc[dscp & 63];
        let pg = port.maps.tc_to_pg[usize::from(tc & 7)];
        let Some(group) = values.priority_groups.get(usize::from(pg)) else {
            continue;
        };
        let Some(xoff_point_bytes) = group.xoff_point_bytes else {
            return Err(LabError::Failed(format!(
                "{switch} {}: PG {pg} is not lossless",
                port.name
            )));
        };
        let peer = planned
            .ports
            .iter()
            .find(|p| p.name == port.name)
            .map_or_else(String::new, |p| p.peer.to_string());
        rows.push(PgThresholds {
            switch: switch.to_owned(),
            port: port.name.clone(),
            peer,
            pg,
            reserved_bytes: group.reserved_bytes,
            shared_limit_bytes: group.shared_limit_bytes,
            xoff_point_bytes,
            headroom_bytes: group.headroom_bytes,
            drop_point_bytes: group.drop_point_bytes,
        });
    }
    Ok(rows)
}
