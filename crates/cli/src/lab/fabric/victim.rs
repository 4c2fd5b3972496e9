//! A victim flow: a small lossless (DSCP 3 → priority 3) UDP flow between two hosts that are
//! not part of a scenario's congestion (neither the incast's receiver nor the stormed host), but
//! whose path crosses the links that congestion pauses. PFC pauses a priority, not a flow, so
//! every frame of that priority behind a paused link waits (head-of-line blocking, reference
//! routing-fabric-dcbx.md §6.3): the victim's delay and goodput show what the pause costs flows
//! that have nothing to do with the congestion.
//!
//! The flow is sent from the hosts' kernels, one datagram every `interval`; each carries its
//! sequence number and its send time on this process's monotonic clock, and the receiver (a
//! thread of the same process, in the destination host's namespace) records its receive time
//! on the same clock, so a datagram's delay is one-way: sender's `send` to receiver's `recv`,
//! both kernels' stacks, the switches and their queues included.

use super::plan::Host;
use crate::lab::{in_namespace, LabError};
use serde::Serialize;
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The first victim flow's UDP destination port (not RoCEv2's 4791: the hosts' rocegens read
/// that one); flow `k` sends to `VICTIM_PORT + k`.
const VICTIM_PORT: u16 = 5001;
/// The first victim flow's UDP source port; flow `k` sends from `VICTIM_SOURCE_PORT + k`. Fixed
/// (not an ephemeral port), so that each flow's 5-tuple, and so the spine ECMP hashes it to,
/// is the same in every run.
const VICTIM_SOURCE_PORT: u16 = 50_000;
/// DSCP 3 → priority 3, lossless in the fabric's template (the incast's and the storm's).
const VICTIM_DSCP: u8 = 3;
/// Bytes of UDP payload per datagram: small, so that the victim itself congests nothing (at one
/// datagram a millisecond, 2 Mb/s).
pub(crate) const VICTIM_PAYLOAD_BYTES: usize = 256;

/// A running victim flow.
pub(crate) struct Victim {
    base: Instant,
    stop: Arc<AtomicBool>,
    sender: std::thread::JoinHandle<Vec<u64>>,
    receiver: std::thread::JoinHandle<Vec<Arrival>>,
}

/// One datagram received: its send and receive time, ns since the flow started.
#[derive(Clone, Copy, Debug)]
struct Arrival {
    sent_ns: u64,
    received_ns: u64,
}

/// What the victim saw over a window.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub(crate) struct VictimWindow {
    /// Start and end of the window, ms since the flow started.
    pub from_ms: u64,
    /// See [`Self::from_ms`].
    pub to_ms: u64,
    /// Datagrams sent in the window.
    pub sent: u64,
    /// Datagrams received in the window (whenever they were sent).
    pub received: u64,
    /// UDP payload received in the window over its length, Mb/s.
    pub goodput_mbps: f64,
    /// One-way delay of the datagrams received in the window: median, 99th percentile and
    /// maximum, µs (`None`: nothing received).
    pub delay_p50_us: Option<u64>,
    /// See [`Self::delay_p50_us`].
    pub delay_p99_us: Option<u64>,
    /// See [`Self::delay_p50_us`].
    pub delay_max_us: Option<u64>,
}

/// A finished victim flow.
pub(crate) struct VictimRecord {
    sent_ns: Vec<u64>,
    arrivals: Vec<Arrival>,
    /// Datagrams sent in all and never received.
    pub lost: u64,
}

impl Victim {
    /// Starts flow number `flow` `from` → `to`, one datagram every `interval`; its times are
    /// counted from `base` (several flows given one base share a time line).
    pub(super) fn start(
        from: &Host,
        to: &Host,
        interval: Duration,
        flow: u16,
        base: Instant,
    ) -> Result<Self, LabError> {
        let (source_port, destination_port) = Self::ports(flow);
        let receive = in_namespace(&to.namespace, || {
            let socket = UdpSocket::bind(SocketAddrV4::new(to.address, destination_port))?;
            socket.set_read_timeout(Some(Duration::from_millis(50)))?;
            Ok(socket)
        })?;
        let send = in_namespace(&from.namespace, || {
            let socket = UdpSocket::bind(SocketAddrV4::new(from.address, source_port))?;
            rustix::net::sockopt::set_ip_tos(&socket, VICTIM_DSCP << 2)?;
            Ok(socket)
        })?;
        let stop = Arc::new(AtomicBool::new(false));
        let to_address = SocketAddrV4::new(to.address, destination_port);
        let stop_sender = Arc::clone(&stop);
        let sender = std::thread::Builder::new()
            .name("victim-send".into())
            .spawn(move || {
                let mut sent = Vec::new();
                let mut payload = [0u8; VICTIM_PAYLOAD_BYTES];
                let mut next = Instant::now();
                while !stop_sender.load(Ordering::Relaxed) {
                    let now_ns = elapsed_ns(base);
                    payload[..8].copy_from_slice(&(sent.len() as u64).to_be_bytes());
                    payload[8..16].copy_from_slice(&now_ns.to_be_bytes());
                    if send.send_to(&payload, to_address).is_ok() {
                        sent.push(now_ns);
                    }
                    // A fixed schedule, so that a late wake-up does not lower the rate.
                    next += interval;
                    if let Some(wait) = next.checked_duration_since(Instant::now()) {
                        std::thread::sleep(wait);
                    }
                }
                sent
            })
            .map_err(|e| LabError::Failed(format!("starting the victim's sender: {e}")))?;
        let stop_receiver = Arc::clone(&stop);
        let receiver = std::thread::Builder::new()
            .name("victim-recv".into())
            .spawn(move || {
                let mut arrivals = Vec::new();
                let mut buf = [0u8; 2048];
                // After the stop, whatever is still queued in the fabric has 500 ms to arrive.
                let mut stopped_at: Option<Instant> = None;
                loop {
                    if stop_receiver.load(Ordering::Relaxed) {
                        let at = *stopped_at.get_or_insert_with(Instant::now);
                        if at.elapsed() > Duration::from_millis(500) {
                            break;
                        }
                    }
                    let Ok(n) = receive.recv(&mut buf) else {
                        continue;
                    };
                    if n < 16 {
                        continue;
                    }
                    let mut sent = [0u8; 8];
                    sent.copy_from_slice(&buf[8..16]);
                    arrivals.push(Arrival {
                        sent_ns: u64::from_be_bytes(sent),
                        received_ns: elapsed_ns(base),
                    });
                }
                arrivals
            })
            .map_err(|e| LabError::Failed(format!("starting the victim's receiver: {e}")))?;
        Ok(Self {
            base,
            stop,
            sender,
            receiver,
        })
    }

    /// Flow `flow`'s UDP source and destination ports.
    pub(crate) fn ports(flow: u16) -> (u16, u16) {
        (VICTIM_SOURCE_PORT + flow, VICTIM_PORT + flow)
    }

    /// Ms since the flow's base.
    pub(crate) fn now_ms(&self) -> u64 {
        elapsed_ns(self.base) / 1_000_000
    }

    /// Stops the flow (waits up to 500 ms for what is still in flight).
    pub(crate) fn finish(self) -> VictimRecord {
        self.stop.store(true, Ordering::Relaxed);
        let sent_ns = self.sender.join().unwrap_or_default();
        let arrivals = self.receiver.join().unwrap_or_default();
        VictimRecord {
            lost: (sent_ns.len() as u64).saturating_sub(arrivals.len() as u64),
            sent_ns,
            arrivals,
        }
    }
}

impl VictimRecord {
    /// What the flow saw in `[from_ms, to_ms)`.
    pub(crate) fn window(&self, from_ms: u64, to_ms: u64) -> VictimWindow {
        let (from_ns, to_ns) = (from_ms * 1_000_000, to_ms * 1_000_000);
        let inside = |t: u64| (from_ns..to_ns).contains(&t);
        let mut delays_us: Vec<u64> = self
            .arrivals
            .iter()
            .filter(|a| inside(a.received_ns))
            .map(|a| a.received_ns.saturating_sub(a.sent_ns) / 1000)
            .collect();
        delays_us.sort_unstable();
        let received = delays_us.len() as u64;
        let seconds = to_ms.saturating_sub(from_ms) as f64 / 1000.0;
        let at = |q: f64| -> Option<u64> {
            let last = delays_us.len().checked_sub(1)?;
            delays_us.get(((last as f64) * q).round() as usize).copied()
        };
        VictimWindow {
            from_ms,
            to_ms,
            sent: self.sent_ns.iter().filter(|&&t| inside(t)).count() as u64,
            received,
            goodput_mbps: if seconds > 0.0 {
                (received * VICTIM_PAYLOAD_BYTES as u64 * 8) as f64 / seconds / 1e6
            } else {
                0.0
            },
            delay_p50_us: at(0.5),
            delay_p99_us: at(0.99),
            delay_max_us: delays_us.last().copied(),
        }
    }
}

fn elapsed_ns(base: Instant) -> u64 {
    u64::try_from(base.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// The victim of a scenario whose congestion is at the last host of the last leaf: the first
/// host of the first leaf → the first host of the last leaf. Its path crosses the first leaf's
/// uplinks and the spines' links to the last leaf (the links the congestion pauses) but not
/// the congested port.
pub(super) fn victim_hosts(plan: &super::plan::Plan) -> Result<(Host, Host), LabError> {
    let (first, last) = super::scenario::ends(plan);
    let from = plan
        .hosts_of(&first)
        .next()
        .cloned()
        .ok_or_else(|| LabError::Failed(format!("{first} has no host")))?;
    let mut on_last = plan.hosts_of(&last);
    let to = on_last.next().cloned();
    let congested = on_last.last().cloned();
    match (to, congested) {
        (Some(to), Some(_)) if to.name != from.name => Ok((from, to)),
        _ => Err(LabError::Failed(format!(
            "a victim flow needs two hosts on {last} (--hosts-per-leaf 2 or more)"
        ))),
    }
}

/// One line of a report: goodput, received of sent, the delays in ms.
pub(crate) fn describe_window(w: &VictimWindow) -> String {
    let ms = |v: Option<u64>| {
        v.map_or_else(|| "-".to_owned(), |us| format!("{:.1}", us as f64 / 1000.0))
    };
    format!(
        "{:.2} Mb/s, {} of {} received, delay p50 {} ms, p99 {} ms, max {} ms",
        w.goodput_mbps,
        w.received,
        w.sent,
        ms(w.delay_p50_us),
        ms(w.delay_p99_us),
        ms(w.delay_max_us)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_counts_what_arrived_in_it_and_its_delays() {
        let record = VictimRecord {
            sent_ns: (0..10).map(|k| k * 1_000_000).collect(),
            arrivals: (0..8)
                .map(|k| Arrival {
                    sent_ns: k * 1_000_000,
                    // Datagram k takes (k + 1) ms.
                    received_ns: k * 1_000_000 + (k + 1) * 1_000_000,
                })
                .collect(),
            lost: 2,
        };
        // Datagram k arrives at 2k + 1 ms: k = 0..=4 inside the first 10 ms.
        let w = record.window(0, 10);
        assert_eq!((w.sent, w.received), (10, 5), "{w:?}");
        assert_eq!(w.delay_p50_us, Some(3000));
        assert_eq!(w.delay_max_us, Some(5000));
        // 5 datagrams of 256 bytes in 10 ms.
        assert!((w.goodput_mbps - 5.0 * 256.0 * 8.0 / 0.01 / 1e6).abs() < 1e-9);
        let empty = record.window(100, 200);
        assert_eq!(
            (empty.sent, empty.received, empty.delay_p99_us),
            (0, 0, None)
        );
    }
}
