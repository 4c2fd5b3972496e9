//! `headroom show fabric`: every switch of a fabric in one table, read through the CLI's one
//! control client (a `snapshot` and the persistent queue watermarks of each switch).

use super::plan::Plan;
use crate::client::{emit, Target};
use crate::table::{thousands, Table};
use headroom_runtime::protocol::{QueueWatermarkKind, Request, Show, Snapshot, WatermarkRow};
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

/// One switch port in the fabric view.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct FabricPortRow {
    /// The switch's name in the fabric.
    pub switch: String,
    /// The port.
    pub port: String,
    /// What is at the other end (`spine1 Ethernet0`, `host3`).
    pub peer: String,
    /// PFC frames received per priority.
    pub pfc_rx: [u64; 8],
    /// PFC frames sent per priority.
    pub pfc_tx: [u64; 8],
    /// The deepest any egress queue of the port has been since start (persistent watermark),
    /// bytes, and which queue.
    pub queue_watermark_max_bytes: u64,
    /// The queue of that watermark.
    pub queue_watermark_max_queue: u8,
    /// CE marks on all the port's queues.
    pub ecn_marked: u64,
    /// Drops by reason (ingress and egress of the port).
    pub drops: BTreeMap<String, u64>,
    /// `off` (no watched queue), `operational`, or `stormed q3,q4`.
    pub watchdog: String,
    /// Storms detected on the port's watched queues since start.
    pub storms_detected: u64,
}

/// The whole view.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct FabricView {
    /// The fabric's prefix.
    pub fabric: String,
    /// Per switch and port, in the plan's order.
    pub ports: Vec<FabricPortRow>,
    /// Switches that did not answer, with why.
    pub unreachable: BTreeMap<String, String>,
}

/// The rows of one switch from what it answered.
pub(crate) fn switch_rows(
    plan: &Plan,
    switch: &str,
    snapshot: &Snapshot,
    queue_marks: &[WatermarkRow],
) -> Vec<FabricPortRow> {
    let Some(planned) = plan.switch(switch) else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for summary in &snapshot.ports {
        let name = &summary.port;
        let peer = planned
            .ports
            .iter()
            .find(|p| &p.name == name)
            .map_or_else(String::new, |p| p.peer.to_string());
        let pfc = snapshot.pfc.iter().find(|p| &p.port == name);
        let marks = queue_marks.iter().find(|r| &r.port == name);
        let (queue, deepest) = marks.map_or((0, 0), |r| {
            (0u8..)
                .zip(r.bytes)
                .max_by_key(|&(q, b)| (b, std::cmp::Reverse(q)))
                .unwrap_or((0, 0))
        });
        let watched: Vec<_> = snapshot
            .pfcwd
            .iter()
            .filter(|w| w.queue.rsplit_once(':').is_some_and(|(p, _)| p == name))
            .collect();
        let stormed: Vec<String> = watched
            .iter()
            .filter(|w| w.status == "stormed")
            .filter_map(|w| w.queue.rsplit_once(':').map(|(_, q)| format!("q{q}")))
            .collect();
        let watchdog = if watched.is_empty() {
            "off".to_owned()
        } else if stormed.is_empty() {
            "operational".to_owned()
        } else {
            format!("stormed {}", stormed.join(","))
        };
        rows.push(FabricPortRow {
            switch: switch.to_owned(),
            port: name.clone(),
            peer,
            pfc_rx: pfc.map_or([0; 8], |p| p.rx),
            pfc_tx: pfc.map_or([0; 8], |p| p.tx),
            queue_watermark_max_bytes: deepest,
            queue_watermark_max_queue: queue,
            ecn_marked: snapshot
                .queues
                .iter()
                .filter(|q| &q.port == name)
                .map(|q| q.ecn_marked)
                .sum(),
            drops: summary.drops.clone(),
            watchdog,
            storms_detected: watched.iter().map(|w| w.storm_detected).sum(),
        });
    }
    rows
}

/// Asks every switch of `plan`.
pub(crate) fn collect(plan: &Plan) -> FabricView {
    let mut view = FabricView {
        fabric: plan.spec.prefix.clone(),
        ..FabricView::default()
    };
    for switch in &plan.switches {
        let target = Target::for_socket(super::switch_socket(&plan.spec.prefix, &switch.name));
        let answer = target
            .fetch::<Snapshot>(&Request::Show {
                what: Show::Snapshot,
            })
            .and_then(|(snapshot, _)| {
                let (marks, _) = target.fetch::<Vec<WatermarkRow>>(&Request::Show {
                    // The most each queue held, reserved part included (`--total`).
                    what: Show::QueueWatermark {
                        persistent: true,
                        kind: QueueWatermarkKind::Total,
                    },
                })?;
                Ok((snapshot, marks))
            });
        match answer {
            Ok((snapshot, marks)) => {
                view.ports
                    .extend(switch_rows(plan, &switch.name, &snapshot, &marks));
            }
            Err(e) => {
                view.unreachable.insert(switch.name.clone(), e);
            }
        }
    }
    view
}

fn priorities(counts: &[u64; 8]) -> String {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return "0".into();
    }
    let per: Vec<String> = counts
        .iter()
        .enumerate()
        .filter(|(_, n)| **n > 0)
        .map(|(p, n)| format!("{}@{p}", thousands(*n)))
        .collect();
    per.join(" ")
}

impl FabricView {
    /// The table.
    pub(crate) fn to_text(&self) -> String {
        let mut t = Table::new([
            "Switch",
            "Port",
            "Peer",
            "PFC rx",
            "PFC tx",
            "Queue max B",
            "ECN marks",
            "Drops",
            "Watchdog",
        ]);
        let mut last = "";
        for r in &self.ports {
            let drops: Vec<String> = r
                .drops
                .iter()
                .filter(|(_, n)| **n > 0)
                .map(|(reason, n)| format!("{reason} {}", thousands(*n)))
                .collect();
            t.row([
                if r.switch == last {
                    String::new()
                } else {
                    r.switch.clone()
                },
                r.port.clone(),
                r.peer.clone(),
                priorities(&r.pfc_rx),
                priorities(&r.pfc_tx),
                if r.queue_watermark_max_bytes == 0 {
                    "0".into()
                } else {
                    format!(
                        "{} (UC{})",
                        thousands(r.queue_watermark_max_bytes),
                        r.queue_watermark_max_queue
                    )
                },
                thousands(r.ecn_marked),
                if drops.is_empty() {
                    "0".into()
                } else {
                    drops.join(", ")
                },
                r.watchdog.clone(),
            ]);
            last = &r.switch;
        }
        let mut text = format!(
            "Fabric {:?} (PFC as frames@priority; queue max since start)\n{t}",
            self.fabric
        );
        for (switch, why) in &self.unreachable {
            text.push_str(&format!("{switch}: not answering: {why}\n"));
        }
        text
    }
}

/// `headroom show fabric`.
pub(crate) fn show_fabric(target: &Target) -> Result<ExitCode, String> {
    let prefix = target.fabric_prefix()?;
    let plan = super::read_plan(&prefix)?;
    let view = collect(&plan);
    if target.json() {
        let text = serde_json::to_string_pretty(&view).map_err(|e| e.to_string())?;
        emit(format_args!("{text}\n"));
    } else {
        emit(format_args!("{}", view.to_text()));
    }
    Ok(if view.unreachable.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(test)]
mod tests {
    use super::super::plan::FabricSpec;
    use super::*;
    use headroom_runtime::protocol::{PfcCounters, PfcwdStatsRow, PortSummary, QueueCounters};

    #[test]
    fn rows_carry_each_ports_counters_and_the_watchdog_state() {
        let plan = FabricSpec::new("fab", 2, 2, 2).plan();
        let mut snapshot = Snapshot::default();
        for (k, port) in plan.switch("leaf1").unwrap().ports.iter().enumerate() {
            snapshot.ports.push(PortSummary {
                port: port.name.clone(),
                drops: if k == 2 {
                    BTreeMap::from([("ingress_headroom_exhausted".to_owned(), 5)])
                } else {
                    BTreeMap::new()
                },
                ..PortSummary::default()
            });
            let mut rx = [0; 8];
            rx[3] = 10 * k as u64;
            snapshot.pfc.push(PfcCounters {
                port: port.name.clone(),
                rx,
                ..PfcCounters::default()
            });
            for q in [3u8, 4] {
                snapshot.pfcwd.push(PfcwdStatsRow {
                    queue: format!("{}:{q}", port.name),
                    status: if k == 1 && q == 4 {
                        "stormed"
                    } else {
                        "operational"
                    }
                    .into(),
                    storm_detected: u64::from(k == 1),
                    ..PfcwdStatsRow::default()
                });
            }
            snapshot.queues.push(QueueCounters {
                port: port.name.clone(),
                queue: 3,
                ecn_marked: 7,
                ..QueueCounters::default()
            });
        }
        snapshot
            .pfcwd
            .retain(|w| !w.queue.starts_with("Ethernet3:"));
        let marks = vec![WatermarkRow {
            port: "Ethernet2".into(),
            bytes: [0, 0, 0, 4096, 9000, 0, 0, 0],
        }];
        let rows = switch_rows(&plan, "leaf1", &snapshot, &marks);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].peer, "spine1 Ethernet0");
        assert_eq!(rows[2].peer, "host1");
        assert_eq!(rows[1].pfc_rx[3], 10);
        assert_eq!(rows[1].watchdog, "stormed q4");
        assert_eq!(rows[1].storms_detected, 2);
        assert_eq!(rows[0].watchdog, "operational");
        assert_eq!(rows[3].watchdog, "off");
        assert_eq!(
            (
                rows[2].queue_watermark_max_bytes,
                rows[2].queue_watermark_max_queue
            ),
            (9000, 4)
        );
        assert_eq!(rows[2].drops["ingress_headroom_exhausted"], 5);
        assert_eq!(rows[0].ecn_marked, 7);
        let view = FabricView {
            fabric: "fab".into(),
            ports: rows,
            unreachable: BTreeMap::from([("spine2".to_owned(), "no socket".to_owned())]),
        };
        let text = view.to_text();
        assert!(text.contains("stormed q4"), "{text}");
        assert!(text.contains("9,000 (UC4)"), "{text}");
        assert!(text.contains("ingress_headroom_exhausted 5"), "{text}");
        assert!(text.contains("10@3"), "{text}");
        assert!(text.contains("spine2: not answering: no socket"), "{text}");
    }
}
