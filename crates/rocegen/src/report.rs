//! Results: perftest's bandwidth and latency figures, the RoCE counters, the printed table and the
//! JSON report.
//!
//! # Figures, as perftest computes them
//!
//! * **BW average** = message size × messages / (last completion − first post).
//! * **BW peak** = message size / min over pairs (i ≤ j) of (completion j − post i) / (j − i + 1),
//!   the best average over any run of consecutive messages (perftest `print_report_bw`). perftest
//!   walks every pair (j in steps of its CQ moderation); we take i and j in steps of
//!   ⌈N / 2048⌉, plus the last completion, which bounds the work to about 2 million pairs.
//!   In duration mode perftest reports no peak (0.00); so do we.
//! * **MsgRate** = messages / the same time, in millions per second.
//! * Units: MB/sec is 2^20 bytes per second and Gb/sec is 10^9 bits per second (perftest's
//!   `0x100000` and `125000000` format factors).
//! * **Latency** (write_lat): each sample is half a round trip (post of a WRITE until the peer's
//!   answering WRITE has arrived). As perftest, the two largest samples are discarded; t_typical
//!   is the median; the 99 % and 99.9 % figures are the samples at index ⌈n × 0.99⌉ and
//!   ⌈n × 0.999⌉ of the sorted remaining n samples (clamped to the largest).
//!
//! # The JSON report is a contract
//!
//! `--json` prints one [`Report`]; readers (`headroom lab incast`) parse it back into the same
//! types with [`Report::from_json`]. Every field must be present, `Option`s included (they are
//! written as `null`): a field renamed or dropped on one side is an error that names its path
//! (`counters.rx_ring_drops`), never a silent zero.

use serde::{Deserialize, Serialize};

/// perftest's MB: 2^20 bytes.
pub const MEBIBYTE: f64 = 1_048_576.0;

/// One bandwidth row.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct BwRow {
    /// Message size.
    pub bytes: u32,
    /// Messages completed (all QPs).
    pub iterations: u64,
    /// Peak bandwidth, MB (2^20 B) per second; 0 in duration mode.
    pub bw_peak_mb_per_sec: f64,
    /// Average bandwidth, MB per second.
    pub bw_average_mb_per_sec: f64,
    /// Peak bandwidth, Gb (10^9 bit) per second.
    pub bw_peak_gbit_per_sec: f64,
    /// Average bandwidth, Gb per second.
    pub bw_average_gbit_per_sec: f64,
    /// Message rate, millions of messages per second.
    pub msg_rate_mpps: f64,
    /// The time the average is taken over, nanoseconds.
    pub measured_ns: u64,
}

/// `messages` messages of `bytes` bytes in `span_ns` nanoseconds (at least 1), in bytes per
/// second: the one expression behind both the average and the peak.
fn bytes_per_sec(bytes: u32, messages: u64, span_ns: u64) -> f64 {
    f64::from(bytes) * messages as f64 / (span_ns.max(1) as f64 / 1e9)
}

impl BwRow {
    /// From the post times (in post order) and completion times (in completion order) of the
    /// messages of one size, in nanoseconds.
    #[must_use]
    pub fn from_iterations(bytes: u32, posted_ns: &[u64], completed_ns: &[u64]) -> Self {
        let n = posted_ns.len().min(completed_ns.len());
        if n == 0 {
            return Self::from_totals(bytes, 0, 0, 0.0);
        }
        let measured_ns = completed_ns[n - 1].saturating_sub(posted_ns[0]).max(1);
        let step = n.div_ceil(2048).max(1);
        // Every window's rate by the very expression of the average (`from_totals`): the whole
        // run is one of the windows, so the peak is never below the average, not even by the
        // last bit of a differently rounded quotient.
        let mut peak_bytes_per_sec = 0.0f64;
        let mut i = 0;
        while i < n {
            let mut consider = |j: usize| {
                let span_ns = completed_ns[j].saturating_sub(posted_ns[i]);
                peak_bytes_per_sec =
                    peak_bytes_per_sec.max(bytes_per_sec(bytes, (j - i + 1) as u64, span_ns));
            };
            let mut j = i;
            while j < n {
                consider(j);
                j += step;
            }
            consider(n - 1);
            i += step;
        }
        Self::from_totals(bytes, n as u64, measured_ns, peak_bytes_per_sec)
    }

    /// From a message count over `measured_ns`, with a given peak (bytes/s; 0 for none).
    #[must_use]
    pub fn from_totals(
        bytes: u32,
        iterations: u64,
        measured_ns: u64,
        peak_bytes_per_sec: f64,
    ) -> Self {
        let seconds = measured_ns.max(1) as f64 / 1e9;
        let avg_bytes_per_sec = if iterations == 0 {
            0.0
        } else {
            bytes_per_sec(bytes, iterations, measured_ns)
        };
        Self {
            bytes,
            iterations,
            bw_peak_mb_per_sec: peak_bytes_per_sec / MEBIBYTE,
            bw_average_mb_per_sec: avg_bytes_per_sec / MEBIBYTE,
            bw_peak_gbit_per_sec: peak_bytes_per_sec * 8.0 / 1e9,
            bw_average_gbit_per_sec: avg_bytes_per_sec * 8.0 / 1e9,
            msg_rate_mpps: if iterations == 0 {
                0.0
            } else {
                iterations as f64 / seconds / 1e6
            },
            measured_ns,
        }
    }
}

/// One latency row, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatRow {
    /// Message size.
    pub bytes: u32,
    /// Round trips measured.
    pub iterations: u64,
    /// Smallest sample.
    pub t_min_usec: f64,
    /// Largest sample kept (after discarding the two largest).
    pub t_max_usec: f64,
    /// Median.
    pub t_typical_usec: f64,
    /// Mean.
    pub t_avg_usec: f64,
    /// Standard deviation.
    pub t_stdev_usec: f64,
    /// 99th percentile.
    pub p99_usec: f64,
    /// 99.9th percentile.
    pub p99_9_usec: f64,
}

impl LatRow {
    /// From one-way latency samples in nanoseconds (half round trips), in any order.
    #[must_use]
    pub fn from_samples(bytes: u32, samples_ns: &[u64]) -> Self {
        let iterations = samples_ns.len() as u64;
        let mut sorted: Vec<u64> = samples_ns.to_vec();
        sorted.sort_unstable();
        // perftest LAT_MEASURE_TAIL: the two largest samples are not counted.
        if sorted.len() > 2 {
            sorted.truncate(sorted.len() - 2);
        }
        let n = sorted.len();
        if n == 0 {
            return Self {
                bytes,
                iterations,
                t_min_usec: 0.0,
                t_max_usec: 0.0,
                t_typical_usec: 0.0,
                t_avg_usec: 0.0,
                t_stdev_usec: 0.0,
                p99_usec: 0.0,
                p99_9_usec: 0.0,
            };
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let median = if n.is_multiple_of(2) {
            (us(sorted[n / 2]) + us(sorted[n / 2 - 1])) / 2.0
        } else {
            us(sorted[n / 2])
        };
        let mean = sorted.iter().map(|&s| us(s)).sum::<f64>() / n as f64;
        let variance = sorted.iter().map(|&s| (us(s) - mean).powi(2)).sum::<f64>() / n as f64;
        let at = |q: f64| us(sorted[((n as f64 * q).ceil() as usize).min(n - 1)]);
        Self {
            bytes,
            iterations,
            t_min_usec: us(sorted[0]),
            t_max_usec: us(sorted[n - 1]),
            t_typical_usec: median,
            t_avg_usec: mean,
            t_stdev_usec: variance.sqrt(),
            p99_usec: at(0.99),
            p99_9_usec: at(0.999),
        }
    }
}

/// PFC counters and paused time of one priority.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityReport {
    /// The priority.
    pub priority: u8,
    /// PFC frames received that enabled this priority (XOFF and XON).
    pub pfc_frames_rx: u64,
    /// Of those, XOFF (non-zero time).
    pub pfc_xoff_rx: u64,
    /// Of those, XON (time 0).
    pub pfc_xon_rx: u64,
    /// Time this priority was paused (PFC or 802.3x), nanoseconds.
    pub paused_ns: u64,
}

/// The RoCE counters of one host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CountersReport {
    /// Per priority 0..=7.
    pub priorities: Vec<PriorityReport>,
    /// 802.3x PAUSE frames received.
    pub pause_frames_rx: u64,
    /// CNPs sent (NP).
    pub cnps_sent: u64,
    /// CNPs received (RP).
    pub cnps_received: u64,
    /// Request packets received CE-marked.
    pub ecn_ce_received: u64,
    /// ACKs/CNPs received CE-marked (not reported to the NP).
    pub ecn_ce_control_received: u64,
    /// Data packets retransmitted (go-back-N).
    pub retransmitted_packets: u64,
    /// Retransmission timeouts.
    pub retransmission_timeouts: u64,
    /// NAKs received.
    pub naks_received: u64,
    /// NAKs sent (one per out-of-sequence episode).
    pub naks_sent: u64,
    /// Request packets received out of sequence (dropped).
    pub out_of_sequence_packets: u64,
    /// Request packets received twice (dropped, re-ACKed).
    pub duplicate_packets: u64,
    /// RoCE packets to us with a bad ICRC (dropped).
    pub icrc_errors: u64,
    /// Data packets sent (retransmissions included).
    pub data_packets_sent: u64,
    /// Data payload bytes sent (retransmissions included).
    pub data_payload_bytes_sent: u64,
    /// ACKs sent.
    pub acks_sent: u64,
    /// ACKs received.
    pub acks_received: u64,
    /// Our WRITEs completed (acknowledged).
    pub messages_completed: u64,
    /// The peer's WRITEs received completely.
    pub messages_delivered: u64,
    /// Payload bytes accepted in order.
    pub payload_bytes_delivered: u64,
    /// Frames received on the port.
    pub rx_frames: u64,
    /// RoCE packets to us with a good ICRC.
    pub rx_roce: u64,
    /// Frames that are neither RoCEv2 nor MAC Control.
    pub rx_non_roce: u64,
    /// RoCE packets to another address.
    pub rx_not_for_us: u64,
    /// RoCE packets to a QPN we do not have.
    pub rx_unknown_qp: u64,
    /// RoCE packets we do not handle.
    pub rx_unsupported: u64,
    /// Request payloads that differ from the sender's pattern.
    pub rx_payload_mismatch: u64,
    /// MAC Control frames that did not parse.
    pub rx_mac_control_errors: u64,
    /// Frames the kernel dropped because our receive ring was full (host loss, not fabric).
    pub rx_ring_drops: u64,
    /// Frames handed to the kernel.
    pub tx_frames: u64,
    /// Wire bytes on the emulated link.
    pub tx_wire_bytes: u64,
    /// Frames the kernel refused.
    pub tx_failed: u64,
    /// Test: request packets discarded (`--drop-every`).
    pub test_dropped: u64,
    /// Test: data packets sent CE-marked (`--mark-ce-every`).
    pub test_ce_marked: u64,
    /// The first retransmission timeouts: when (ns since the traffic started), which QP, how
    /// many packets were outstanding, the oldest unacknowledged PSN.
    pub timeout_events: Vec<TimeoutEventReport>,
}

/// One retransmission timeout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeoutEventReport {
    /// Nanoseconds since the traffic started.
    pub at_ns: u64,
    /// QP index.
    pub qp: usize,
    /// Packets outstanding (all resent).
    pub outstanding_packets: u64,
    /// Oldest unacknowledged PSN.
    pub oldest_unacked_psn: u32,
}

/// One QP's state at the end.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QpReport {
    /// Index.
    pub index: usize,
    /// Our QPN.
    pub local_qpn: u32,
    /// The peer's QPN.
    pub remote_qpn: u32,
    /// UDP source port (flow entropy).
    pub udp_sport: u16,
    /// The rate its limiter enforces at the end, bit/s.
    pub rate_bps: u64,
    /// The lowest rate it enforced, bit/s.
    pub min_rate_bps: u64,
    /// DCQCN target rate, bit/s.
    #[serde(deserialize_with = "required")]
    pub target_rate_bps: Option<u64>,
    /// DCQCN alpha.
    #[serde(deserialize_with = "required")]
    pub alpha: Option<f64>,
    /// DCQCN rate cuts.
    pub rate_cuts: u64,
    /// CNPs the RP handled.
    pub cnps_handled: u64,
    /// Data packets sent.
    pub packets_sent: u64,
    /// Of those, retransmissions.
    pub packets_retransmitted: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Messages completed.
    pub messages_completed: u64,
    /// Requester state: `ready`, `retry_exceeded` or `remote_error`.
    pub state: String,
    /// Packets accepted by the responder.
    pub packets_accepted: u64,
    /// Out-of-sequence packets.
    pub out_of_sequence: u64,
}

/// The loop's own counters, reported under `driver` in JSON.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverStats {
    /// Loop iterations.
    pub loop_iterations: u64,
    /// Sleeps in `ppoll`.
    pub waits: u64,
    /// Iterations that had a deadline already due but nothing to do (should stay near 0).
    pub no_progress_wakeups: u64,
    /// Process CPU time in user mode, nanoseconds.
    pub cpu_user_ns: u64,
    /// Process CPU time in the kernel, nanoseconds.
    pub cpu_system_ns: u64,
    /// Wall time of the traffic phase, nanoseconds.
    pub wall_ns: u64,
    /// Longest time between two loop iterations (a sleep or a descheduled host), nanoseconds.
    pub max_iteration_gap_ns: u64,
    /// Longest sleep asked for, nanoseconds.
    pub max_sleep_requested_ns: u64,
    /// Worst lateness of a timed wake-up (woke this long after the deadline it slept for):
    /// the host's scheduling delay as this process saw it, nanoseconds.
    pub max_wake_lateness_ns: u64,
}

/// An endpoint as reported (perftest's local/remote address lines).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndpointReport {
    /// MAC address.
    pub mac: String,
    /// RoCE address: IPv4, or the IPv6 GID with `--ipv6`.
    pub ip: String,
    /// QPs.
    pub qps: Vec<crate::oob::QpInfo>,
}

/// Everything `--json` prints: one object per run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// `rocegen`.
    pub tool: String,
    /// The crate version.
    pub version: String,
    /// `write_bw` or `write_lat`.
    pub test: String,
    /// `client` or `server`.
    pub role: String,
    /// The interface.
    pub interface: String,
    /// Emulated link speed, bit/s.
    pub link_speed_bps: u64,
    /// Path MTU, bytes.
    pub mtu_bytes: u32,
    /// Number of QPs.
    pub qps: usize,
    /// IP traffic class byte requested (`--tclass`).
    pub tclass: u8,
    /// DSCP of data (tclass >> 2).
    pub dscp: u8,
    /// Priority of data (PCP when tagged; PFC class).
    pub priority: u8,
    /// VLAN ID when tagged.
    #[serde(deserialize_with = "required")]
    pub vlan_id: Option<u16>,
    /// DCQCN mode: `off`, `paper` or `nvidia`.
    pub dcqcn: String,
    /// This side.
    pub local: EndpointReport,
    /// The other side: one entry per peer (a server may have several clients).
    pub remote: Vec<EndpointReport>,
    /// Bandwidth rows (write_bw client; write_bw server: what it received).
    pub bw: Vec<BwRow>,
    /// Latency rows (write_lat client).
    pub latency: Vec<LatRow>,
    /// RoCE counters of this host.
    pub counters: CountersReport,
    /// Per QP.
    pub qp: Vec<QpReport>,
    /// Why the run failed, if it did.
    #[serde(deserialize_with = "required")]
    pub error: Option<String>,
    /// The other side's report as it sent it at the end: the server's for a client, the
    /// client's for a server with one client.
    #[serde(deserialize_with = "required")]
    pub peer: Option<serde_json::Value>,
    /// A server's clients' reports, one per client (empty for a client).
    pub peers: Vec<serde_json::Value>,
    /// The event loop's counters (absent when the run failed before it started).
    #[serde(deserialize_with = "required")]
    pub driver: Option<DriverStats>,
}

/// An `Option` field that must be present (as a value or `null`): serde's derive would take a
/// missing `Option` for `None`, which is the silent default this module exists to avoid.
fn required<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(deserializer)
}

/// Why a report could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportError {
    /// Where in the report: a dotted path (`counters.priorities[3]`), empty for the whole text.
    pub path: String,
    /// What is wrong there (serde's words: "missing field `rx_ring_drops`").
    pub message: String,
}

impl std::fmt::Display for ReportError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() || self.path == "." {
            write!(f, "{}", self.message)
        } else {
            write!(f, "at {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ReportError {}

impl Report {
    /// Parses what `rocegen --json` printed. Every field is required; the error names the path
    /// of the first one that is missing or of the wrong type.
    ///
    /// # Errors
    /// [`ReportError`] with the field's path and serde's reason.
    pub fn from_json(text: &str) -> Result<Self, ReportError> {
        let deserializer = &mut serde_json::Deserializer::from_str(text);
        serde_path_to_error::deserialize(deserializer).map_err(|e| ReportError {
            path: e.path().to_string(),
            message: e.inner().to_string(),
        })
    }

    /// The counters of priority `priority`, if the report has them.
    #[must_use]
    pub fn priority(&self, priority: u8) -> Option<&PriorityReport> {
        self.counters
            .priorities
            .iter()
            .find(|p| p.priority == priority)
    }
}

fn rule() -> &'static str {
    "---------------------------------------------------------------------------------------"
}

fn format_rate(bps: u64) -> String {
    if bps >= 1_000_000_000 {
        format!("{:.3} Gb/s", bps as f64 / 1e9)
    } else {
        format!("{:.3} Mb/s", bps as f64 / 1e6)
    }
}

impl Report {
    /// The human-readable report, shaped like perftest's.
    #[must_use]
    pub fn to_text(&self, report_gbits: bool) -> String {
        use std::fmt::Write as _;
        let mut out = String::new();
        let title = if self.test == "write_lat" {
            "RDMA_Write Latency Test"
        } else {
            "RDMA_Write BW Test"
        };
        let _ = writeln!(out, "{}", rule());
        let _ = writeln!(out, "                    {title} (rocegen, {})", self.role);
        let _ = writeln!(
            out,
            " Interface       : {:<16}Link speed     : {}",
            self.interface,
            crate::flow::format_link_speed(self.link_speed_bps)
        );
        let _ = writeln!(
            out,
            " Number of qps   : {:<16}Transport type : RoCEv2 (emulated, AF_PACKET)",
            self.qps
        );
        let _ = writeln!(
            out,
            " Connection type : {:<16}Mtu            : {}[B]",
            "RC", self.mtu_bytes
        );
        let tag = match self.vlan_id {
            Some(vid) => format!("VLAN {vid} PCP {}", self.priority),
            None => format!("untagged, priority {}", self.priority),
        };
        let _ = writeln!(
            out,
            " Traffic class   : {:<16}DSCP           : {} ({tag})",
            self.tclass, self.dscp
        );
        let _ = writeln!(
            out,
            " DCQCN           : {:<16}Data ex. method: Ethernet (TCP)",
            self.dcqcn
        );
        let _ = writeln!(out, "{}", rule());
        let address = |label: &str, e: &EndpointReport, out: &mut String| {
            for qp in &e.qps {
                let _ = writeln!(
                    out,
                    " {label} address: QPN {:#06x} PSN {:#08x} RKey {:#08x} VAddr {:#016x} MAC {} IP {}",
                    qp.qpn, qp.psn, qp.rkey, qp.va, e.mac, e.ip
                );
            }
        };
        address("local", &self.local, &mut out);
        for remote in &self.remote {
            address("remote", remote, &mut out);
        }
        let _ = writeln!(out, "{}", rule());
        if !self.bw.is_empty() {
            let unit = if report_gbits { "Gb/sec" } else { "MB/sec" };
            let _ = writeln!(
                out,
                " #bytes     #iterations    BW peak[{unit}]    BW average[{unit}]   MsgRate[Mpps]"
            );
            for row in &self.bw {
                let (peak, avg) = if report_gbits {
                    (row.bw_peak_gbit_per_sec, row.bw_average_gbit_per_sec)
                } else {
                    (row.bw_peak_mb_per_sec, row.bw_average_mb_per_sec)
                };
                let _ = writeln!(
                    out,
                    " {:<10} {:<14} {:<18.2} {:<20.2} {:.6}",
                    row.bytes, row.iterations, peak, avg, row.msg_rate_mpps
                );
            }
            let _ = writeln!(out, "{}", rule());
        }
        if !self.latency.is_empty() {
            let _ = writeln!(
                out,
                " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    \
                 t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]"
            );
            for row in &self.latency {
                let _ = writeln!(
                    out,
                    " {:<6} {:<10}     {:<14.2} {:<12.2} {:<18.2} {:<14.2} {:<15.2} {:<22.2} {:.2}",
                    row.bytes,
                    row.iterations,
                    row.t_min_usec,
                    row.t_max_usec,
                    row.t_typical_usec,
                    row.t_avg_usec,
                    row.t_stdev_usec,
                    row.p99_usec,
                    row.p99_9_usec
                );
            }
            let _ = writeln!(out, "{}", rule());
        }
        let c = &self.counters;
        let _ = writeln!(out, " RoCE counters ({})", self.role);
        let paused: Vec<String> = c
            .priorities
            .iter()
            .filter(|p| p.pfc_frames_rx > 0 || p.paused_ns > 0)
            .map(|p| {
                format!(
                    "prio{} {} (xoff {}, xon {}) paused {:.3} ms",
                    p.priority,
                    p.pfc_frames_rx,
                    p.pfc_xoff_rx,
                    p.pfc_xon_rx,
                    p.paused_ns as f64 / 1e6
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "  PFC frames received      : {}",
            if paused.is_empty() {
                "0".to_owned()
            } else {
                paused.join("; ")
            }
        );
        let _ = writeln!(out, "  802.3x PAUSE received    : {}", c.pause_frames_rx);
        let _ = writeln!(
            out,
            "  CNPs sent / received     : {} / {}",
            c.cnps_sent, c.cnps_received
        );
        let _ = writeln!(out, "  ECN-CE received          : {}", c.ecn_ce_received);
        let _ = writeln!(
            out,
            "  Retransmitted packets    : {} (timeouts {}, NAKs received {})",
            c.retransmitted_packets, c.retransmission_timeouts, c.naks_received
        );
        let _ = writeln!(
            out,
            "  Out-of-sequence packets  : {} (NAKs sent {}, duplicates {})",
            c.out_of_sequence_packets, c.naks_sent, c.duplicate_packets
        );
        let _ = writeln!(out, "  ICRC errors              : {}", c.icrc_errors);
        let _ = writeln!(out, "  Host receive-ring drops  : {}", c.rx_ring_drops);
        if c.test_dropped > 0 || c.test_ce_marked > 0 {
            let _ = writeln!(
                out,
                "  Fault injection          : dropped {}, CE-marked {}",
                c.test_dropped, c.test_ce_marked
            );
        }
        for qp in &self.qp {
            if qp.rate_cuts > 0 || qp.cnps_handled > 0 || qp.min_rate_bps < self.link_speed_bps {
                let _ = writeln!(
                    out,
                    "  DCQCN QP {:#08x}        : {} CNPs, {} rate cuts, min rate {}, rate now {}",
                    qp.local_qpn,
                    qp.cnps_handled,
                    qp.rate_cuts,
                    format_rate(qp.min_rate_bps),
                    format_rate(qp.rate_bps)
                );
            }
        }
        if let Some(error) = &self.error {
            let _ = writeln!(out, "  ERROR                    : {error}");
        }
        let _ = writeln!(out, "{}", rule());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bandwidth_from_a_steady_stream() {
        // 100 messages of 1 MiB: posted 10 at a time ahead, one completes every 1 ms.
        let posted: Vec<u64> = (0..100u64)
            .map(|i| i.saturating_sub(10) * 1_000_000)
            .collect();
        let completed: Vec<u64> = (0..100).map(|i| (i + 1) * 1_000_000).collect();
        let row = BwRow::from_iterations(1 << 20, &posted, &completed);
        assert_eq!(row.iterations, 100);
        assert_eq!(row.measured_ns, 100_000_000);
        assert!((row.bw_average_mb_per_sec - 1000.0).abs() < 1e-9);
        assert!((row.msg_rate_mpps - 0.001).abs() < 1e-12);
        // Every run from post 0 to completion j takes (j + 1) ms for j + 1 messages; runs starting
        // later start after a post that came 10 messages early, so they are slower: peak 1 ms
        // per message, the average.
        assert!((row.bw_peak_mb_per_sec - 1000.0).abs() < 1e-6, "{row:?}");
        assert!((row.bw_average_gbit_per_sec - 8.388_608).abs() < 1e-9);
    }

    #[test]
    fn peak_finds_a_fast_burst() {
        // 10 messages completing 1 ms apart, except messages 3..=6 which complete 0.1 ms apart,
        // all posted at 0.
        let posted = vec![0u64; 10];
        let mut completed = Vec::new();
        let mut t = 0;
        for i in 0..10u64 {
            t += if (4..=6).contains(&i) {
                100_000
            } else {
                1_000_000
            };
            completed.push(t);
        }
        let row = BwRow::from_iterations(1000, &posted, &completed);
        // Best: (completed[j] - 0) / (j + 1); j = 6: 4.3 ms / 7 = 0.614 ms per message.
        let best = completed
            .iter()
            .enumerate()
            .map(|(j, &c)| c as f64 / (j + 1) as f64)
            .fold(f64::INFINITY, f64::min);
        let expected = 1000.0 * 1e9 / best / MEBIBYTE;
        assert!((row.bw_peak_mb_per_sec - expected).abs() < 1e-6);
    }

    #[test]
    fn peak_is_never_below_the_average() {
        // The whole run is one of the windows the peak looks at, so peak >= average exactly, also
        // when that window is the best one (a steady stream) and the two are computed from
        // different integers. Seeded, varied streams: uniform and jittered spacings.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |bound: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % bound
        };
        for case in 0..2_000 {
            let n = 1 + next(400) as usize;
            let gap = 1 + next(2_000_000);
            let jitter = if case % 2 == 0 { 0 } else { next(gap) };
            let start = next(1_000_000_000);
            let posted: Vec<u64> = (0..n as u64).map(|i| start + i * gap / 4).collect();
            let completed: Vec<u64> = (0..n as u64)
                .map(|i| start + (i + 1) * gap + if i % 3 == 0 { jitter } else { 0 })
                .scan(0, |last, t| {
                    *last = t.max(*last);
                    Some(*last)
                })
                .collect();
            let bytes = 1 + next(1 << 20) as u32;
            let row = BwRow::from_iterations(bytes, &posted, &completed);
            assert!(
                row.bw_peak_mb_per_sec >= row.bw_average_mb_per_sec
                    && row.bw_peak_gbit_per_sec >= row.bw_average_gbit_per_sec,
                "case {case}: n {n} gap {gap} bytes {bytes}: {row:?}"
            );
        }
    }

    /// A report with every kind of field set (nested structs, vectors, options, the peer).
    fn sample_report() -> Report {
        let endpoint = EndpointReport {
            mac: "02:68:68:00:00:01".into(),
            ip: "10.0.0.1".into(),
            qps: vec![crate::oob::QpInfo {
                qpn: 0x111,
                psn: 0x222,
                rkey: 0x333,
                va: 0x4000,
            }],
        };
        let mut counters = CountersReport {
            priorities: (0..8)
                .map(|p| PriorityReport {
                    priority: p,
                    ..PriorityReport::default()
                })
                .collect(),
            rx_ring_drops: 3,
            timeout_events: vec![TimeoutEventReport::default()],
            ..CountersReport::default()
        };
        counters.priorities[3].pfc_frames_rx = 17;
        Report {
            tool: "rocegen".into(),
            version: "0.1.0".into(),
            test: "write_bw".into(),
            role: "client".into(),
            interface: "eth0".into(),
            link_speed_bps: 100_000_000,
            mtu_bytes: 1024,
            qps: 1,
            tclass: 12,
            dscp: 3,
            priority: 3,
            vlan_id: None,
            dcqcn: "nvidia".into(),
            local: endpoint.clone(),
            remote: vec![endpoint],
            bw: vec![BwRow::from_totals(65_536, 10, 1_000_000, 0.0)],
            latency: Vec::new(),
            counters,
            qp: vec![QpReport {
                index: 0,
                local_qpn: 0x111,
                remote_qpn: 0x999,
                udp_sport: 49_152,
                rate_bps: 1,
                min_rate_bps: 1,
                target_rate_bps: Some(2),
                alpha: Some(0.5),
                rate_cuts: 4,
                cnps_handled: 5,
                packets_sent: 6,
                packets_retransmitted: 0,
                timeouts: 0,
                messages_completed: 10,
                state: "ready".into(),
                packets_accepted: 0,
                out_of_sequence: 0,
            }],
            error: None,
            peer: Some(serde_json::json!({"role": "server"})),
            peers: Vec::new(),
            driver: Some(DriverStats::default()),
        }
    }

    #[test]
    fn the_json_report_reads_back_as_it_was_written() {
        let report = sample_report();
        let text = serde_json::to_string(&report).unwrap();
        assert_eq!(Report::from_json(&text).unwrap(), report);
        assert_eq!(report.priority(3).map(|p| p.pfc_frames_rx), Some(17));
        assert_eq!(report.priority(9), None);
    }

    #[test]
    fn a_renamed_or_missing_field_is_an_error_that_names_it() {
        let mut value = serde_json::to_value(sample_report()).unwrap();
        // Renamed (an older or newer rocegen): the reader's name is missing.
        let counters = value["counters"].as_object_mut().unwrap();
        let drops = counters.remove("rx_ring_drops").unwrap();
        counters.insert("rx_kernel_drops".into(), drops);
        let e = Report::from_json(&value.to_string()).unwrap_err();
        assert_eq!(e.path, "counters");
        assert!(e.message.contains("missing field `rx_ring_drops`"), "{e}");
        assert!(
            e.to_string().starts_with("at counters: missing field"),
            "{e}"
        );

        // Deep inside a vector.
        let mut value = serde_json::to_value(sample_report()).unwrap();
        value["counters"]["priorities"][3]
            .as_object_mut()
            .unwrap()
            .remove("paused_ns");
        let e = Report::from_json(&value.to_string()).unwrap_err();
        assert_eq!(e.path, "counters.priorities[3]");
        assert!(e.message.contains("`paused_ns`"), "{e}");

        // An Option that is absent is not taken for None.
        for field in ["error", "driver", "vlan_id", "peer"] {
            let mut value = serde_json::to_value(sample_report()).unwrap();
            value.as_object_mut().unwrap().remove(field);
            let e = Report::from_json(&value.to_string()).unwrap_err();
            assert!(
                e.message.contains(&format!("missing field `{field}`")),
                "{e}"
            );
        }
        // A wrong type names the field too.
        let mut value = serde_json::to_value(sample_report()).unwrap();
        value["counters"]["cnps_sent"] = serde_json::json!("many");
        let e = Report::from_json(&value.to_string()).unwrap_err();
        assert_eq!(e.path, "counters.cnps_sent");
        // Not JSON at all.
        assert!(Report::from_json("rocegen: error").is_err());
    }

    #[test]
    fn latency_like_perftest() {
        // 1..=100 us, plus two outliers that perftest drops.
        let mut samples: Vec<u64> = (1..=100).map(|us| us * 1_000).collect();
        samples.push(5_000_000);
        samples.push(9_000_000);
        let row = LatRow::from_samples(2, &samples);
        assert_eq!(row.iterations, 102);
        assert_eq!(row.t_min_usec, 1.0);
        assert_eq!(row.t_max_usec, 100.0);
        assert_eq!(row.t_typical_usec, 50.5);
        assert!((row.t_avg_usec - 50.5).abs() < 1e-9);
        // Population standard deviation of 1..=100: sqrt((100^2 - 1) / 12).
        assert!((row.t_stdev_usec - 833.25f64.sqrt()).abs() < 1e-9);
        // ceil(100 * 0.99) = 99 -> the 100th sample; ceil(99.9) = 100 -> clamped to the last.
        assert_eq!(row.p99_usec, 100.0);
        assert_eq!(row.p99_9_usec, 100.0);
        let empty = LatRow::from_samples(2, &[]);
        assert_eq!(empty.iterations, 0);
    }
}
