//! Prometheus text exposition over HTTP (`runtime.prometheus_listen`, 127.0.0.1:9464 by
//! default): every counter and gauge of the switch with labels (port, priority, queue, pg,
//! pool, reason), paused time, queueing-delay quantiles per queue, watchdog state, PFC
//! storm-rate alarms. Served from the control loop; each scrape reads the dataplane's atomic
//! counters, nothing is cached.

// Counters are parallel arrays indexed by priority, queue or PG; indexing reads plainer than
// zipping five iterators.
#![allow(clippy::needless_range_loop)]

use headroom_core::counters::{delay_bucket_floor, DropReason, DELAY_BUCKETS};
use headroom_core::stats::{PortStats, QueueStats};
use headroom_runtime::control::{ControlPlane, PortstatCounts, WatchdogTotals};
use headroom_runtime::Running;
use std::fmt::Write as _;
use std::net::SocketAddr;

/// A per-port counter: name, help, how to read it.
type PortMetric = (&'static str, &'static str, fn(&PortStats) -> u64);
/// A per-queue counter: name, help, how to read it.
type QueueMetric = (&'static str, &'static str, fn(&QueueStats) -> u64);

#[path = "metrics/http.rs"]
mod http;

/// The HTTP listener (see [`http`] for its limits).
pub(crate) struct Exporter {
    server: http::HttpServer,
}

impl Exporter {
    pub(crate) fn bind(addr: SocketAddr) -> Result<Self, String> {
        let server = http::HttpServer::bind(addr).map_err(|e| e.to_string())?;
        tracing::info!(%addr, "Prometheus metrics at http://{addr}/metrics");
        Ok(Self { server })
    }

    /// Binds `addr`, or the first free port after it (up to `tries` ports): several labs on one
    /// machine each get their own. The listening socket lives in the network namespace of the
    /// calling thread, whatever namespace the thread enters afterwards.
    pub(crate) fn bind_first_free(addr: SocketAddr, tries: u16) -> Result<Self, String> {
        let mut last = String::new();
        for offset in 0..tries.max(1) {
            let Some(port) = addr.port().checked_add(offset) else {
                break;
            };
            let candidate = SocketAddr::new(addr.ip(), port);
            match http::HttpServer::bind(candidate) {
                Ok(server) => return Ok(Self { server }),
                Err(e) => last = format!("{candidate}: {e}"),
            }
        }
        Err(format!(
            "no free port for the Prometheus exporter from {addr} on ({last})"
        ))
    }

    /// The address it listens on.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.server.local_addr()
    }

    /// Answers every pending scrape (non-blocking; the page is rendered once per call at
    /// most, and only if a client asks for it).
    pub(crate) fn serve(&mut self, control: &ControlPlane, running: &Running) {
        let endpoint = EndpointStats {
            connections: self.server.connections(),
            refused_busy: self.server.refused_busy,
            timed_out: self.server.timed_out,
            evicted: self.server.evicted,
        };
        self.server
            .serve(|| render_with_endpoint(control, running, Some(endpoint)));
    }
}

/// The metrics endpoint's own counters, rendered on its page.
#[derive(Clone, Copy, Debug)]
struct EndpointStats {
    connections: usize,
    refused_busy: u64,
    timed_out: u64,
    evicted: u64,
}

struct Out {
    text: String,
}

impl Out {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(
                    self.text,
                    "{k}=\"{}\"",
                    v.replace('\\', "\\\\")
                        .replace('"', "\\\"")
                        .replace('\n', "\\n")
                );
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }
}

/// The metrics page (without the endpoint's own counters).
#[allow(
    dead_code,
    reason = "used by tests/tooling_metrics.rs, which includes this file"
)]
pub(crate) fn render(control: &ControlPlane, running: &Running) -> String {
    render_with_endpoint(control, running, None)
}

/// The LLDP agent's counters per port (802.1AB LLDP MIB `lldpStats…`), its neighbours, and
/// each port's DCBX verdict as a state set (1 for the current status, 0 for the others). The
/// agent runs from the switch's start (reconfigurations keep it), so its counters are monotonic.
fn render_lldp(o: &mut Out, control: &ControlPlane) {
    let view = control.lldp().view();
    type LldpMetric = (
        &'static str,
        &'static str,
        fn(&headroom_runtime::protocol::LldpPortRow) -> u64,
    );
    let per_port: [LldpMetric; 8] = [
        ("headroom_lldp_tx_frames_total", "LLDPDUs built for the port (lldpStatsTxPortFramesTotal), shutdown LLDPDUs included.", |r| r.tx_frames),
        ("headroom_lldp_tx_inject_refused_total", "LLDPDUs the dataplane could not take (inject ring full): not sent.", |r| r.tx_inject_refused),
        ("headroom_lldp_rx_frames_total", "LLDP frames received on the port (punted to the agent).", |r| r.rx_frames),
        ("headroom_lldp_rx_discarded_total", "LLDP frames not used: invalid, neighbour table full, or LLDP reception off (lldpStatsRxPortFramesDiscardedTotal).", |r| r.rx_discarded),
        ("headroom_lldp_rx_tlvs_discarded_total", "Optional TLVs discarded as malformed or repeated (lldpStatsRxPortTLVsDiscardedTotal).", |r| r.rx_tlvs_discarded),
        ("headroom_lldp_rx_tlvs_unrecognized_total", "TLVs not decoded: reserved types, other OUIs and subtypes (lldpStatsRxPortTLVsUnrecognizedTotal).", |r| r.rx_tlvs_unrecognized),
        ("headroom_lldp_ageouts_total", "Neighbours forgotten because their TTL ran out (lldpStatsRxPortAgeoutsTotal).", |r| r.ageouts),
        ("headroom_lldp_neighbor_inserts_total", "Neighbours added (lldpStatsRemTablesInserts).", |r| r.inserts),
    ];
    for (name, help, f) in per_port {
        o.family(name, "counter", help);
        for r in &view.ports {
            o.sample(name, &[("port", &r.port)], f(r));
        }
    }
    o.family(
        "headroom_lldp_rx_errors_total",
        "counter",
        "Invalid LLDP frames by reason (lldpStatsRxPortFramesErrors).",
    );
    for r in &view.ports {
        for (reason, n) in &r.rx_errors {
            o.sample(
                "headroom_lldp_rx_errors_total",
                &[("port", &r.port), ("reason", reason)],
                *n,
            );
        }
    }
    o.family(
        "headroom_lldp_neighbors",
        "gauge",
        "LLDP neighbours the port hears now.",
    );
    for r in &view.ports {
        let n = view
            .neighbors
            .iter()
            .filter(|n| n.local_port == r.port)
            .count();
        o.sample("headroom_lldp_neighbors", &[("port", &r.port)], n as u64);
    }
    o.family(
        "headroom_dcbx_verdict",
        "gauge",
        "The port's DCBX verdict (docs/operations.md \"DCBX verdicts\"): 1 for its status, 0 for the others.",
    );
    let rows = control.lldp().dcbx();
    for r in &rows {
        for status in headroom_lldp::DcbxStatus::ALL {
            o.sample(
                "headroom_dcbx_verdict",
                &[("port", &r.port), ("status", status.as_str())],
                u64::from(r.status == status.as_str()),
            );
        }
    }
    o.family(
        "headroom_dcbx_mismatch",
        "gauge",
        "1 while the port's DCBX verdict is mismatch (its neighbour disagrees on PFC or RoCE's priority).",
    );
    for r in &rows {
        o.sample(
            "headroom_dcbx_mismatch",
            &[("port", &r.port)],
            u64::from(r.status == "mismatch"),
        );
    }
}

/// Punts by reason, the host interfaces, the routed ports' counters and the netlink mirror.
/// The dataplane's punt and routed counters are its ledgers' totals (carried over
/// reconfigurations); the host interfaces' and the mirror's run since the switch started.
fn render_routing(o: &mut Out, control: &ControlPlane, running: &Running, names: &[&str]) {
    use headroom_core::punt::PuntReason;
    let totals: Vec<PortStats> = (0..names.len())
        .map(|p| control.total_stats(running, p))
        .collect();
    o.family(
        "headroom_port_punt_frames_total",
        "counter",
        "Frames received on the port and punted to the control plane, by punt reason (SONiC trap).",
    );
    for (p, name) in names.iter().enumerate() {
        for r in PuntReason::ALL {
            o.sample(
                "headroom_port_punt_frames_total",
                &[("port", name), ("reason", r.name())],
                totals[p].punt_frames[r.index()],
            );
        }
    }
    o.family(
        "headroom_port_punt_drops_total",
        "counter",
        "Frames for the control plane dropped at the port (CoPP rate limit or punt queue full), by punt reason.",
    );
    for (p, name) in names.iter().enumerate() {
        for r in PuntReason::ALL {
            o.sample(
                "headroom_port_punt_drops_total",
                &[("port", name), ("reason", r.name())],
                totals[p].punt_drops[r.index()],
            );
        }
    }
    o.family(
        "headroom_punted_unconsumed_total",
        "counter",
        "Punted frames dropped because their port has no host interface, by punt reason.",
    );
    let unconsumed = running.punted_unconsumed();
    for r in PuntReason::ALL {
        o.sample(
            "headroom_punted_unconsumed_total",
            &[("reason", r.name())],
            unconsumed[r.index()],
        );
    }
    let Some(host) = control.host_interfaces() else {
        return;
    };
    let rows = host.rows(&|p| totals.get(p.index()).cloned().unwrap_or_default());
    type RowMetric = (
        &'static str,
        &'static str,
        fn(&headroom_runtime::protocol::HostInterfaceRow) -> u64,
    );
    let per_interface: [RowMetric; 10] = [
        ("headroom_host_interface_punt_frames_total", "Punted frames written to the port's host interface (TAP).", |r| r.punt_frames),
        ("headroom_host_interface_punt_tap_full_total", "Punted frames dropped: the host interface's queue towards the kernel was full.", |r| r.punt_tap_full),
        ("headroom_host_interface_punt_errors_total", "Punted frames the host interface refused.", |r| r.punt_errors),
        ("headroom_host_interface_inject_frames_total", "Frames the kernel sent on the host interface, handed to the dataplane.", |r| r.inject_frames),
        ("headroom_host_interface_inject_refused_total", "Frames the kernel sent that the dataplane could not take (inject ring full).", |r| r.inject_refused),
        ("headroom_host_interface_read_errors_total", "Failed reads of the host interface.", |r| r.read_errors),
        ("headroom_rif_in_packets_total", "Packets received on the routed port and routed (SAI ROUTER_INTERFACE_STAT_IN_PACKETS).", |r| r.rif_in_packets),
        ("headroom_rif_in_octets_total", "Bytes of those (ROUTER_INTERFACE_STAT_IN_OCTETS).", |r| r.rif_in_octets),
        ("headroom_rif_out_packets_total", "Packets routed out of the port (ROUTER_INTERFACE_STAT_OUT_PACKETS).", |r| r.rif_out_packets),
        ("headroom_rif_out_octets_total", "Bytes of those (ROUTER_INTERFACE_STAT_OUT_OCTETS).", |r| r.rif_out_octets),
    ];
    for (name, help, f) in per_interface {
        o.family(name, "counter", help);
        for r in &rows {
            o.sample(name, &[("port", &r.interface)], f(r));
        }
    }
    let m = host.mirror_summary();
    let mirror: [(&str, &str, &str, u64); 11] = [
        (
            "headroom_route_mirror_messages_total",
            "counter",
            "Netlink messages the FIB mirror applied (dumps and notifications).",
            m.messages,
        ),
        (
            "headroom_route_mirror_resyncs_total",
            "counter",
            "Full resynchronisations of the FIB mirror (initial dump, link changes, overruns).",
            m.resyncs,
        ),
        (
            "headroom_route_mirror_overruns_total",
            "counter",
            "Netlink overruns (ENOBUFS: notifications lost), each repaired by a resync.",
            m.overruns,
        ),
        (
            "headroom_route_mirror_decode_errors_total",
            "counter",
            "Netlink messages the mirror could not decode.",
            m.decode_errors,
        ),
        (
            "headroom_route_mirror_fib_refused_total",
            "counter",
            "Route changes the FIB refused (a table full).",
            m.fib_refused,
        ),
        (
            "headroom_route_mirror_next_hops",
            "gauge",
            "Next hops in the FIB (the three fixed ones included).",
            m.next_hops,
        ),
        (
            "headroom_route_mirror_ecmp_groups",
            "gauge",
            "ECMP groups in the FIB.",
            m.ecmp_groups,
        ),
        (
            "headroom_fib_published_total",
            "counter",
            "FIB snapshots published to the lcores.",
            m.published,
        ),
        (
            "headroom_fib_publish_waits_total",
            "counter",
            "Control-loop turns a FIB publication waited for an lcore to return the spare copy.",
            m.publish_waits,
        ),
        (
            "headroom_fib_send_refused_total",
            "counter",
            "FIB snapshots an lcore's ring refused (retried).",
            m.send_refused,
        ),
        (
            "headroom_route_mirror_netlink_errors_total",
            "counter",
            "Failed netlink polls of the mirror (retried).",
            m.netlink_errors,
        ),
    ];
    for (name, kind, help, value) in mirror {
        o.family(name, kind, help);
        o.sample(name, &[], value);
    }
    o.family(
        "headroom_route_mirror_routes",
        "gauge",
        "Prefixes installed in the FIB, by family.",
    );
    o.sample(
        "headroom_route_mirror_routes",
        &[("family", "ipv4")],
        m.routes_v4,
    );
    o.sample(
        "headroom_route_mirror_routes",
        &[("family", "ipv6")],
        m.routes_v6,
    );
}

/// The metrics page, with the endpoint's own counters when served over HTTP.
fn render_with_endpoint(
    control: &ControlPlane,
    running: &Running,
    endpoint: Option<EndpointStats>,
) -> String {
    let config = control.config();
    let shared = running.shared();
    let mut o = Out {
        text: String::with_capacity(64 * 1024),
    };
    // Every counter since start (carried over reconfigurations, not affected by `clear`):
    // monotonic for `rate()`.
    let totals: Vec<_> = (0..config.ports.len())
        .map(|p| control.port_totals(running, p))
        .collect();
    let stats: Vec<PortStats> = totals.iter().map(|t| t.stats.clone()).collect();
    let portstat: Vec<PortstatCounts> = totals.iter().map(PortstatCounts::of).collect();
    let names: Vec<&str> = config.ports.iter().map(|p| p.name.as_str()).collect();
    let prio: Vec<String> = (0..8).map(|i| i.to_string()).collect();

    o.family("headroom_up", "gauge", "1 while the switch runs.");
    o.sample("headroom_up", &[], 1);

    let per_port: [PortMetric; 5] = [
        (
            "headroom_port_rx_frames_total",
            "Frames received (all: MAC Control, errored and dropped frames included).",
            |s| s.rx_frames,
        ),
        (
            "headroom_port_rx_bytes_total",
            "Bytes received (all frames; SAI IF_IN_OCTETS).",
            |s| s.rx_bytes,
        ),
        (
            "headroom_port_mac_control_rx_frames_total",
            "MAC Control frames received (PFC, PAUSE, other opcodes, malformed): consumed, never RX_OK.",
            |s| s.mac_control_rx,
        ),
        (
            "headroom_port_tx_frames_total",
            "Data frames sent (SONiC TX_OK; generated PFC frames excluded).",
            PortStats::tx_frames,
        ),
        (
            "headroom_port_tx_bytes_total",
            "Data bytes sent.",
            PortStats::tx_bytes,
        ),
    ];
    for (name, help, f) in per_port {
        o.family(name, "counter", help);
        for (p, s) in stats.iter().enumerate() {
            o.sample(name, &[("port", names[p])], f(s));
        }
    }
    // SONiC's portstat columns (`show interfaces counters`), from the same function as the view.
    type PortstatMetric = (&'static str, &'static str, fn(&PortstatCounts) -> u64);
    let portstat_metrics: [PortstatMetric; 6] = [
        (
            "headroom_port_rx_ok_frames_total",
            "SONiC RX_OK: frames received whole and well-formed, MAC Control excluded, later discards included.",
            |c| c.rx_ok,
        ),
        (
            "headroom_port_rx_error_frames_total",
            "SONiC RX_ERR (SAI IF_IN_ERRORS): runts, oversize frames, malformed MAC Control frames.",
            |c| c.rx_err,
        ),
        (
            "headroom_port_rx_discard_frames_total",
            "SONiC RX_DRP (SAI IF_IN_DISCARDS): frames discarded at ingress, and by the kernel or NIC before the switch saw them.",
            |c| c.rx_drp,
        ),
        (
            "headroom_port_rx_oversize_frames_total",
            "SONiC RX_OVR (SAI ETHER_RX_OVERSIZE_PKTS): frames longer than the port's MTU.",
            |c| c.rx_ovr,
        ),
        (
            "headroom_port_tx_error_frames_total",
            "SONiC TX_ERR (SAI IF_OUT_ERRORS): frames the device refused.",
            |c| c.tx_err,
        ),
        (
            "headroom_port_tx_discard_frames_total",
            "SONiC TX_DRP (SAI IF_OUT_DISCARDS): frames discarded at or in the port's egress queues.",
            |c| c.tx_drp,
        ),
    ];
    for (name, help, f) in portstat_metrics {
        o.family(name, "counter", help);
        for (p, c) in portstat.iter().enumerate() {
            o.sample(name, &[("port", names[p])], f(c));
        }
    }
    o.family(
        "headroom_port_tx_enabled",
        "gauge",
        "1 when the port transmits (SAI PKT_TX_ENABLE).",
    );
    for (p, name) in names.iter().enumerate() {
        let id = headroom_core::types::PortId(u16::try_from(p).unwrap_or(u16::MAX));
        o.sample(
            "headroom_port_tx_enabled",
            &[("port", name)],
            u8::from(shared.tx_enabled(id)),
        );
    }
    o.family(
        "headroom_port_drops_total",
        "counter",
        "Frames dropped, by reason.",
    );
    for (p, s) in stats.iter().enumerate() {
        for r in DropReason::ALL {
            o.sample(
                "headroom_port_drops_total",
                &[("port", names[p]), ("reason", r.name())],
                s.drops[r.index()],
            );
        }
    }
    render_routing(&mut o, control, running, &names);
    render_lldp(&mut o, control);
    o.family(
        "headroom_pfc_rx_frames_total",
        "counter",
        "PFC frames received with the priority's enable bit set (XON included).",
    );
    for (p, s) in stats.iter().enumerate() {
        for (i, v) in s.pfc_rx.iter().enumerate() {
            o.sample(
                "headroom_pfc_rx_frames_total",
                &[("port", names[p]), ("priority", &prio[i])],
                v,
            );
        }
    }
    o.family(
        "headroom_pfc_tx_frames_total",
        "counter",
        "PFC frames sent with the priority's enable bit set (XON included).",
    );
    for (p, s) in stats.iter().enumerate() {
        for (i, v) in s.pfc_tx.iter().enumerate() {
            o.sample(
                "headroom_pfc_tx_frames_total",
                &[("port", names[p]), ("priority", &prio[i])],
                v,
            );
        }
    }
    o.family(
        "headroom_pfc_rx_paused_seconds_total",
        "counter",
        "Time the priority's egress was held by received PFC.",
    );
    for (p, s) in stats.iter().enumerate() {
        for (i, v) in s.paused_ns.iter().enumerate() {
            o.sample(
                "headroom_pfc_rx_paused_seconds_total",
                &[("port", names[p]), ("priority", &prio[i])],
                *v as f64 / 1e9,
            );
        }
    }
    o.family(
        "headroom_pause_rx_frames_total",
        "counter",
        "IEEE 802.3x PAUSE frames received.",
    );
    for (p, s) in stats.iter().enumerate() {
        o.sample(
            "headroom_pause_rx_frames_total",
            &[("port", names[p])],
            s.pause_rx,
        );
    }
    let ignored: [PortMetric; 6] = [
        (
            "headroom_pause_rx_ignored_frames_total",
            "IEEE 802.3x PAUSE frames received and ignored (pause_802_3x off).",
            |s| s.pause_rx_ignored,
        ),
        (
            "headroom_fdb_learn_table_full_total",
            "Source addresses not learned because the MAC table was full (frames still forwarded).",
            |s| s.fdb_learn_table_full,
        ),
        (
            "headroom_rif_in_packets_total",
            "Packets received on the router interface and routed (SAI ROUTER_INTERFACE_STAT_IN_PACKETS).",
            |s| s.rif_in_packets,
        ),
        (
            "headroom_rif_in_octets_total",
            "Bytes of the packets received on the router interface and routed.",
            |s| s.rif_in_octets,
        ),
        (
            "headroom_rif_out_packets_total",
            "Packets routed out of the port, towards its queues (SAI ROUTER_INTERFACE_STAT_OUT_PACKETS).",
            |s| s.rif_out_packets,
        ),
        (
            "headroom_rif_out_octets_total",
            "Bytes of the packets routed out of the port.",
            |s| s.rif_out_octets,
        ),
    ];
    for (name, help, f) in ignored {
        o.family(name, "counter", help);
        for (p, s) in stats.iter().enumerate() {
            o.sample(name, &[("port", names[p])], f(s));
        }
    }
    let queue_counters: [QueueMetric; 5] = [
        (
            "headroom_queue_tx_frames_total",
            "Frames sent from the queue.",
            |q| q.tx_frames,
        ),
        (
            "headroom_queue_tx_bytes_total",
            "Bytes sent from the queue.",
            |q| q.tx_bytes,
        ),
        (
            "headroom_queue_drop_frames_total",
            "Frames dropped for the queue (admission, WRED, watchdog).",
            |q| q.drop_frames,
        ),
        (
            "headroom_queue_drop_bytes_total",
            "Bytes dropped for the queue.",
            |q| q.drop_bytes,
        ),
        (
            "headroom_queue_ecn_marked_frames_total",
            "Frames marked CE in the queue.",
            |q| q.ecn_marked,
        ),
    ];
    for (name, help, f) in queue_counters {
        o.family(name, "counter", help);
        for (p, s) in stats.iter().enumerate() {
            for (q, qs) in s.queues.iter().enumerate() {
                o.sample(name, &[("port", names[p]), ("queue", &prio[q])], f(qs));
            }
        }
    }
    o.family(
        "headroom_queue_depth_bytes",
        "gauge",
        "Queue depth at the last dequeue.",
    );
    for (p, s) in stats.iter().enumerate() {
        for (q, qs) in s.queues.iter().enumerate() {
            o.sample(
                "headroom_queue_depth_bytes",
                &[("port", names[p]), ("queue", &prio[q])],
                qs.depth_bytes,
            );
        }
    }
    o.family("headroom_queue_delay_seconds", "summary", "Queueing delay of sent frames since start (from a log2 histogram: quantiles within a factor of 2).");
    for (p, name) in names.iter().enumerate() {
        for q in 0..8 {
            // Since start, like _sum and _count (carried over reconfigurations).
            let buckets = &totals[p].delay.0[q];
            let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("valid precision");
            for k in 0..DELAY_BUCKETS.min(buckets.len()) {
                let n = buckets[k];
                if n > 0 {
                    // The bucket's midpoint stands for its frames.
                    let v = delay_bucket_floor(k) + delay_bucket_floor(k) / 2;
                    let _ = h.record_n(v.max(1), n);
                }
            }
            for quantile in ["0.5", "0.9", "0.99", "0.999"] {
                // No observation: NaN, as Prometheus client libraries write an empty
                // summary's quantiles (0 would claim a zero delay).
                let seconds = if h.is_empty() {
                    f64::NAN
                } else {
                    h.value_at_quantile(quantile.parse().unwrap_or(0.5)) as f64 / 1e9
                };
                o.sample(
                    "headroom_queue_delay_seconds",
                    &[("port", name), ("queue", &prio[q]), ("quantile", quantile)],
                    seconds,
                );
            }
            let qs = &stats[p].queues[q];
            o.sample(
                "headroom_queue_delay_seconds_sum",
                &[("port", name), ("queue", &prio[q])],
                qs.delay_ns_sum as f64 / 1e9,
            );
            o.sample(
                "headroom_queue_delay_seconds_count",
                &[("port", name), ("queue", &prio[q])],
                qs.tx_frames,
            );
        }
    }
    o.family(
        "headroom_pg_used_bytes",
        "gauge",
        "Bytes held by the ingress priority group now.",
    );
    for (p, s) in stats.iter().enumerate() {
        for (g, pg) in s.pgs.iter().enumerate() {
            o.sample(
                "headroom_pg_used_bytes",
                &[("port", names[p]), ("pg", &prio[g])],
                pg.used_bytes,
            );
        }
    }
    type PgMetric = (
        &'static str,
        &'static str,
        fn(&headroom_core::stats::PgStats) -> u64,
    );
    let pg_counters: [PgMetric; 2] = [
        (
            "headroom_pg_rx_frames_total",
            "Frames that reached admission of the priority group, dropped ones included (SAI INGRESS_PRIORITY_GROUP_STAT_PACKETS).",
            |g| g.frames,
        ),
        (
            "headroom_pg_rx_bytes_total",
            "Bytes of those frames (SAI INGRESS_PRIORITY_GROUP_STAT_BYTES).",
            |g| g.bytes,
        ),
    ];
    for (name, help, f) in pg_counters {
        o.family(name, "counter", help);
        for (p, s) in stats.iter().enumerate() {
            for (g, pg) in s.pgs.iter().enumerate() {
                o.sample(name, &[("port", names[p]), ("pg", &prio[g])], f(pg));
            }
        }
    }
    o.family(
        "headroom_pg_drops_total",
        "counter",
        "Frames dropped by ingress admission of the priority group.",
    );
    for (p, s) in stats.iter().enumerate() {
        for (g, pg) in s.pgs.iter().enumerate() {
            o.sample(
                "headroom_pg_drops_total",
                &[("port", names[p]), ("pg", &prio[g])],
                pg.drops,
            );
        }
    }
    o.family(
        "headroom_pg_xoff_total",
        "counter",
        "XOFF transitions of the priority group.",
    );
    for (p, s) in stats.iter().enumerate() {
        for (g, pg) in s.pgs.iter().enumerate() {
            o.sample(
                "headroom_pg_xoff_total",
                &[("port", names[p]), ("pg", &prio[g])],
                pg.xoff_transitions,
            );
        }
    }
    // Each family's samples follow its own HELP/TYPE lines: the text format requires a
    // family's lines to be one group.
    let marks = control.persistent_watermarks();
    o.family(
        "headroom_pg_watermark_bytes",
        "gauge",
        "Highest priority-group use since start or the last persistent clear.",
    );
    for (p, m) in marks.ports.iter().enumerate() {
        for i in 0..8 {
            o.sample(
                "headroom_pg_watermark_bytes",
                &[("port", names[p]), ("pg", &prio[i]), ("kind", "shared")],
                m.pg_shared[i],
            );
            o.sample(
                "headroom_pg_watermark_bytes",
                &[("port", names[p]), ("pg", &prio[i]), ("kind", "headroom")],
                m.pg_headroom[i],
            );
        }
    }
    o.family(
        "headroom_queue_watermark_bytes",
        "gauge",
        "Highest queue use since start or the last persistent clear (kind: shared, above the queue's reserved size, as SAI's SHARED_WATERMARK_BYTES; or total).",
    );
    for (p, m) in marks.ports.iter().enumerate() {
        for i in 0..8 {
            for (kind, bytes) in [("shared", m.queue_shared[i]), ("total", m.queue_total[i])] {
                o.sample(
                    "headroom_queue_watermark_bytes",
                    &[("port", names[p]), ("queue", &prio[i]), ("kind", kind)],
                    bytes,
                );
            }
        }
    }
    o.family("headroom_pool_watermark_bytes", "gauge", "Highest pool use since start or the last persistent clear (kind: shared, or the shared headroom pool).");
    for (pool, (s, h)) in config.pools.iter().zip(&marks.pools) {
        o.sample(
            "headroom_pool_watermark_bytes",
            &[("pool", &pool.name), ("kind", "shared")],
            s,
        );
        o.sample(
            "headroom_pool_watermark_bytes",
            &[("pool", &pool.name), ("kind", "headroom")],
            h,
        );
    }
    o.family(
        "headroom_pool_used_bytes",
        "gauge",
        "Bytes of the pool in use now (kind: shared, or headroom for an ingress pool's PGs).",
    );
    for (i, pool) in config.pools.iter().enumerate() {
        let (used, headroom) = match pool.direction {
            headroom_config::PoolDirection::Ingress => shared.ingress_pool_used_bytes(i),
            headroom_config::PoolDirection::Egress => (shared.egress_pool_used_bytes(i), 0),
        };
        o.sample(
            "headroom_pool_used_bytes",
            &[("pool", &pool.name), ("kind", "shared")],
            used,
        );
        o.sample(
            "headroom_pool_used_bytes",
            &[("pool", &pool.name), ("kind", "headroom")],
            headroom,
        );
    }
    o.family(
        "headroom_queue_occupancy_bytes",
        "gauge",
        "Bytes waiting in the egress queue now (headroom_queue_depth_bytes is the depth at the last dequeue).",
    );
    for (p, name) in names.iter().enumerate() {
        let id = headroom_core::types::PortId(u16::try_from(p).unwrap_or(u16::MAX));
        for q in 0..8 {
            o.sample(
                "headroom_queue_occupancy_bytes",
                &[("port", name), ("queue", &prio[q])],
                shared.queue_depth_bytes(id, q),
            );
        }
    }
    // The stormed state is the running dataplane's; the storm counts are totals since start,
    // carried over reconfigurations like every counter (monotonic for `rate()`).
    type WatchdogMetric = (
        &'static str,
        &'static str,
        &'static str,
        fn(&headroom_core::shared::WatchdogStats, &WatchdogTotals) -> u64,
    );
    let watchdog: [WatchdogMetric; 3] = [
        (
            "headroom_pfcwd_stormed",
            "gauge",
            "1 while the PFC watchdog holds the queue as stormed.",
            |w, _| w.stormed.get(),
        ),
        (
            "headroom_pfcwd_storms_detected_total",
            "counter",
            "Storms the PFC watchdog detected on the queue.",
            |_, t| t.detected,
        ),
        (
            "headroom_pfcwd_storms_restored_total",
            "counter",
            "Storms the PFC watchdog restored on the queue.",
            |_, t| t.restored,
        ),
    ];
    for (metric, kind, help, read) in watchdog {
        o.family(metric, kind, help);
        for (p, name) in names.iter().enumerate() {
            let side = shared.layout.egress_side_of_port[p];
            for q in 0..8 {
                o.sample(
                    metric,
                    &[("port", name), ("queue", &prio[q])],
                    read(
                        &shared.egress_counters[side].watchdog[p][q],
                        &totals[p].pfcwd[q],
                    ),
                );
            }
        }
    }
    o.family(
        "headroom_fdb_sync_overflow_total",
        "counter",
        "FDB updates an ingress lcore could not pass to another because its learn ring was full (repaired by republishing).",
    );
    o.sample(
        "headroom_fdb_sync_overflow_total",
        &[],
        control.fdb_sync_overflow_total(shared),
    );
    o.family(
        "headroom_control_connections",
        "gauge",
        "Connections to the control socket open now (captures not included).",
    );
    o.sample(
        "headroom_control_connections",
        &[],
        control.clients_connected(),
    );
    let (busy, peer, deadline, oversized) = control.clients_refused();
    o.family(
        "headroom_control_refused_total",
        "counter",
        "Control socket connections refused or cut off: busy (too many open), peer (not the socket's owner), deadline (request or answer too slow), oversized (request line too long).",
    );
    for (reason, n) in [
        ("busy", busy),
        ("peer", peer),
        ("deadline", deadline),
        ("oversized", oversized),
    ] {
        o.sample("headroom_control_refused_total", &[("reason", reason)], n);
    }
    if let Some(e) = endpoint {
        o.family(
            "headroom_metrics_connections",
            "gauge",
            "Connections to this endpoint open now (this scrape's included).",
        );
        o.sample("headroom_metrics_connections", &[], e.connections);
        o.family(
            "headroom_metrics_refused_total",
            "counter",
            "Connections to this endpoint refused (busy: too many open, all answering) or cut off (deadline; evicted: incomplete and the oldest when a new one came).",
        );
        o.sample(
            "headroom_metrics_refused_total",
            &[("reason", "busy")],
            e.refused_busy,
        );
        o.sample(
            "headroom_metrics_refused_total",
            &[("reason", "deadline")],
            e.timed_out,
        );
        o.sample(
            "headroom_metrics_refused_total",
            &[("reason", "evicted")],
            e.evicted,
        );
    }
    o.family("headroom_pfc_storm_alarm", "gauge", "1 while PFC frames for the priority arrive faster than switch.pfc_storm_alarm_frames_per_second.");
    for (p, name) in names.iter().enumerate() {
        for i in 0..8 {
            o.sample(
                "headroom_pfc_storm_alarm",
                &[("port", name), ("priority", &prio[i])],
                u8::from(control.storm_alarm(p, i)),
            );
        }
    }
    o.text
}
