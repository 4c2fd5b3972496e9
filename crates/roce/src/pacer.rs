//! Pacing: a per-QP rate limiter at the DCQCN current rate, behind the emulated NIC link.
//!
//! Both are [`TokenBucket`]s with exact integer arithmetic: tokens are counted in nanobits
//! (10^-9 bit), so a rate of R bit/s adds exactly R tokens per nanosecond and no rounding error
//! accumulates, whatever the rate. The only rounding is of a *wait* up to the next whole
//! nanosecond. The tokens earned during that fraction of a nanosecond are kept: the bucket may
//! hold up to `depth + R - 1` nanobits (its depth plus less than one nanosecond of tokens), which
//! is what integer time needs so that rounding does not lose them. So the long-run rate is exact:
//! back-to-back packets of L bytes at R bit/s start at `ceil(k * 8L / R)` seconds, for every k.
//!
//! * [`Link`] models the emulated port (`--link-speed`): a bucket of depth 0, i.e. a serializer
//!   where a frame may start once the previous one has been clocked out. Give it wire bytes
//!   ([`ethernet_wire_bytes`] adds FCS, preamble and inter-frame gap) so that it runs at the real
//!   frame rate of the speed it emulates. One `Link` is shared by every QP of the port.
//! * [`Pacer`] is one QP's rate limiter. Its rate is set from [`Rp::current_rate_bps`] with
//!   [`Pacer::set_rate`]; its depth (burst) is configurable, 0 for strict pacing.
//!
//! A packet of `bytes` *conforms* to a bucket when the bucket holds at least
//! `min(bytes, depth)` worth of tokens; sending it removes `bytes` worth, which may leave the
//! bucket in debt (so packets larger than the depth still pass, one at a time, and the debt is
//! repaid at the rate).
//!
//! [`Rp::current_rate_bps`]: crate::dcqcn::Rp::current_rate_bps

use core::fmt;

use crate::time::{Instant, NANOS_PER_SECOND};

/// Ethernet overhead on the wire beyond the frame without FCS: FCS 4, preamble 7 + SFD 1
/// (802.3 clause 3.2), inter-frame gap 12 (96 bit times, clause 4.4.2).
pub const ETHERNET_OVERHEAD_BYTES: u32 = 4 + 8 + 12;

/// Smallest Ethernet frame without FCS (64 with FCS, 802.3 clause 4.4.2).
pub const ETHERNET_MIN_FRAME_BYTES: u32 = 60;

/// Bytes a frame of `frame_bytes` (without FCS) occupies on the wire, padding included.
#[must_use]
pub const fn ethernet_wire_bytes(frame_bytes: u32) -> u32 {
    let padded = if frame_bytes < ETHERNET_MIN_FRAME_BYTES {
        ETHERNET_MIN_FRAME_BYTES
    } else {
        frame_bytes
    };
    padded.saturating_add(ETHERNET_OVERHEAD_BYTES)
}

/// Why a pacer call was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacerError {
    /// A rate of zero was given.
    ZeroRate,
    /// The packet does not conform yet; it may be sent at the given time.
    NotReady(Instant),
}

impl fmt::Display for PacerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ZeroRate => f.write_str("rate must be non-zero"),
            Self::NotReady(at) => write!(f, "packet does not conform before {at:?}"),
        }
    }
}

impl std::error::Error for PacerError {}

fn nanobits(bytes: u64) -> i128 {
    i128::from(bytes) * 8 * i128::from(NANOS_PER_SECOND)
}

/// A token bucket with exact integer accounting (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TokenBucket {
    rate_bps: u64,
    depth_nanobits: i128,
    /// `depth + rate - 1`: the most the bucket holds (see the module doc).
    cap_nanobits: i128,
    /// Tokens at `updated_at`; negative while in debt.
    tokens_nanobits: i128,
    updated_at: Instant,
}

impl TokenBucket {
    /// A full bucket of `depth_bytes` filling at `rate_bps`.
    pub fn new(rate_bps: u64, depth_bytes: u64, now: Instant) -> Result<Self, PacerError> {
        if rate_bps == 0 {
            return Err(PacerError::ZeroRate);
        }
        let depth_nanobits = nanobits(depth_bytes);
        Ok(Self {
            rate_bps,
            depth_nanobits,
            cap_nanobits: depth_nanobits + i128::from(rate_bps) - 1,
            tokens_nanobits: depth_nanobits,
            updated_at: now,
        })
    }

    /// The fill rate, bit/s.
    #[must_use]
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Tokens at `now` (nanobits; negative in debt). `now` before the last update counts as it.
    fn tokens_at(&self, now: Instant) -> i128 {
        let elapsed_ns = now.saturating_nanos_since(self.updated_at);
        let earned = i128::from(elapsed_ns) * i128::from(self.rate_bps);
        (self.tokens_nanobits + earned).min(self.cap_nanobits.max(self.tokens_nanobits))
    }

    /// The earliest instant at or after `now` when a packet of `bytes` conforms.
    #[must_use]
    pub fn ready_at(&self, now: Instant, bytes: u64) -> Instant {
        let now = now.max(self.updated_at);
        let need = nanobits(bytes).min(self.depth_nanobits);
        let missing = need - self.tokens_at(now);
        if missing <= 0 {
            return now;
        }
        let wait_ns = missing.div_euclid(i128::from(self.rate_bps))
            + i128::from(missing.rem_euclid(i128::from(self.rate_bps)) != 0);
        now.saturating_add_nanos(u64::try_from(wait_ns).unwrap_or(u64::MAX))
    }

    /// Sends a packet of `bytes` at `now`; refused (with no change) if it does not conform yet.
    pub fn consume(&mut self, now: Instant, bytes: u64) -> Result<(), PacerError> {
        let ready = self.ready_at(now, bytes);
        let now = now.max(self.updated_at);
        if ready > now {
            return Err(PacerError::NotReady(ready));
        }
        self.tokens_nanobits = self.tokens_at(now) - nanobits(bytes);
        self.updated_at = now;
        Ok(())
    }

    /// Changes the fill rate from `now` on (tokens earned before `now` are kept).
    pub fn set_rate(&mut self, now: Instant, rate_bps: u64) -> Result<(), PacerError> {
        if rate_bps == 0 {
            return Err(PacerError::ZeroRate);
        }
        let now = now.max(self.updated_at);
        self.tokens_nanobits = self.tokens_at(now);
        self.updated_at = now;
        self.rate_bps = rate_bps;
        self.cap_nanobits = self.depth_nanobits + i128::from(rate_bps) - 1;
        Ok(())
    }
}

/// The emulated NIC port: a serializer at the link speed, shared by the port's QPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    bucket: TokenBucket,
    bytes_total: u64,
    frames_total: u64,
}

impl Link {
    /// An idle link of `link_rate_bps`.
    pub fn new(link_rate_bps: u64, now: Instant) -> Result<Self, PacerError> {
        Ok(Self {
            bucket: TokenBucket::new(link_rate_bps, 0, now)?,
            bytes_total: 0,
            frames_total: 0,
        })
    }

    /// The link speed, bit/s.
    #[must_use]
    pub fn rate_bps(&self) -> u64 {
        self.bucket.rate_bps()
    }

    /// When the link can start the next frame (at or after `now`).
    #[must_use]
    pub fn ready_at(&self, now: Instant) -> Instant {
        self.bucket.ready_at(now, 0)
    }

    /// Starts a frame of `wire_bytes` at `now`; returns when its last bit has left, which is
    /// also when the link is free again. Refused if the link is still busy.
    pub fn transmit(&mut self, now: Instant, wire_bytes: u64) -> Result<Instant, PacerError> {
        self.bucket.consume(now, wire_bytes)?;
        self.bytes_total = self.bytes_total.saturating_add(wire_bytes);
        self.frames_total += 1;
        Ok(self.ready_at(now))
    }

    /// Wire bytes sent.
    #[must_use]
    pub fn bytes_total(&self) -> u64 {
        self.bytes_total
    }

    /// Frames sent.
    #[must_use]
    pub fn frames_total(&self) -> u64 {
        self.frames_total
    }
}

/// One QP's rate limiter, in front of the shared [`Link`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pacer {
    bucket: TokenBucket,
    packets_total: u64,
    bytes_total: u64,
}

impl Pacer {
    /// A limiter at `rate_bps` allowing bursts of `burst_bytes` (0: strict pacing), full at `now`.
    pub fn new(rate_bps: u64, burst_bytes: u64, now: Instant) -> Result<Self, PacerError> {
        Ok(Self {
            bucket: TokenBucket::new(rate_bps, burst_bytes, now)?,
            packets_total: 0,
            bytes_total: 0,
        })
    }

    /// The enforced rate, bit/s.
    #[must_use]
    pub fn rate_bps(&self) -> u64 {
        self.bucket.rate_bps()
    }

    /// Sets the enforced rate from `now` on (typically [`Rp::current_rate_bps`] after each RP
    /// input or timeout).
    ///
    /// [`Rp::current_rate_bps`]: crate::dcqcn::Rp::current_rate_bps
    pub fn set_rate(&mut self, now: Instant, rate_bps: u64) -> Result<(), PacerError> {
        self.bucket.set_rate(now, rate_bps)
    }

    /// The earliest instant at or after `now` when this QP may start a packet: both its rate
    /// limiter must allow `bytes` and the link must be free.
    ///
    /// `bytes` is what the limiter charges: the caller picks the same measure for every packet
    /// (RoCE frame bytes, or wire bytes); `wire_bytes` goes to the link in [`Pacer::on_send`].
    #[must_use]
    pub fn next_send_time(&self, now: Instant, bytes: u64, link: &Link) -> Instant {
        self.bucket.ready_at(now, bytes).max(link.ready_at(now))
    }

    /// Sends a packet at `now`: charges `bytes` to this QP and `wire_bytes` to the link, and
    /// returns when the link is free again. Refused, with no change to either, if `now` is before
    /// [`Pacer::next_send_time`].
    pub fn on_send(
        &mut self,
        now: Instant,
        bytes: u64,
        wire_bytes: u64,
        link: &mut Link,
    ) -> Result<Instant, PacerError> {
        let ready = self.next_send_time(now, bytes, link);
        if ready > now.max(self.bucket.updated_at) {
            return Err(PacerError::NotReady(ready));
        }
        self.bucket.consume(now, bytes)?;
        let free_at = link.transmit(now, wire_bytes)?;
        self.packets_total += 1;
        self.bytes_total = self.bytes_total.saturating_add(bytes);
        Ok(free_at)
    }

    /// Packets sent through this limiter.
    #[must_use]
    pub fn packets_total(&self) -> u64 {
        self.packets_total
    }

    /// Bytes charged to this limiter.
    #[must_use]
    pub fn bytes_total(&self) -> u64 {
        self.bytes_total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GBPS: u64 = 1_000_000_000;

    fn t(nanos: u64) -> Instant {
        Instant::from_nanos(nanos)
    }

    /// Sends `count` packets as early as allowed from t = 0; returns their start times.
    fn send_asap(pacer: &mut Pacer, link: &mut Link, count: usize, bytes: u64) -> Vec<u64> {
        let mut now = Instant::ZERO;
        let mut starts = Vec::with_capacity(count);
        for _ in 0..count {
            now = pacer.next_send_time(now, bytes, link);
            pacer.on_send(now, bytes, bytes, link).unwrap();
            starts.push(now.as_nanos());
        }
        starts
    }

    #[test]
    fn wire_bytes() {
        assert_eq!(ethernet_wire_bytes(60), 84);
        assert_eq!(ethernet_wire_bytes(14), 84, "padded to the minimum frame");
        assert_eq!(ethernet_wire_bytes(1514), 1538);
    }

    #[test]
    fn strict_pacing_is_exact_at_a_non_dividing_rate() {
        // 1000 B = 8000 bits at 3 Gb/s = 2666.67 ns per packet.
        let mut link = Link::new(100 * GBPS, Instant::ZERO).unwrap();
        let mut pacer = Pacer::new(3 * GBPS, 0, Instant::ZERO).unwrap();
        let starts = send_asap(&mut pacer, &mut link, 3_000, 1_000);
        for (k, &start) in starts.iter().enumerate() {
            let k = k as u64;
            assert_eq!(start, (k * 8_000).div_ceil(3), "packet {k}");
        }
        assert_eq!(pacer.packets_total(), 3_000);
    }

    #[test]
    fn link_runs_at_the_emulated_frame_rate() {
        // 64-byte frames at 100 Gb/s: 84 wire bytes, 6.72 ns each, 148.8 Mpps.
        let mut link = Link::new(100 * GBPS, Instant::ZERO).unwrap();
        let wire = u64::from(ethernet_wire_bytes(60));
        let mut now = Instant::ZERO;
        for _ in 0..1_000_000 {
            now = link.ready_at(now);
            link.transmit(now, wire).unwrap();
        }
        assert_eq!(link.ready_at(now), t(6_720_000), "exactly 1e6 * 6.72 ns");
        assert_eq!(link.frames_total(), 1_000_000);
        // 1500-byte payload frames at 10 Gb/s: 1538 wire bytes = 1230.4 ns each.
        let mut link = Link::new(10 * GBPS, Instant::ZERO).unwrap();
        let mut now = Instant::ZERO;
        for _ in 0..10 {
            now = link.ready_at(now);
            link.transmit(now, 1_538).unwrap();
        }
        assert_eq!(link.ready_at(now), t(12_304));
    }

    #[test]
    fn the_slower_of_qp_rate_and_link_wins() {
        // QP at 40 Gb/s on a 10 Gb/s link: the link limits, 1000 B every 800 ns.
        let mut link = Link::new(10 * GBPS, Instant::ZERO).unwrap();
        let mut pacer = Pacer::new(40 * GBPS, 0, Instant::ZERO).unwrap();
        let starts = send_asap(&mut pacer, &mut link, 100, 1_000);
        assert_eq!(starts[99], 99 * 800);
        // QP at 1 Gb/s on a 100 Gb/s link: the QP limits, every 8000 ns.
        let mut link = Link::new(100 * GBPS, Instant::ZERO).unwrap();
        let mut pacer = Pacer::new(GBPS, 0, Instant::ZERO).unwrap();
        let starts = send_asap(&mut pacer, &mut link, 100, 1_000);
        assert_eq!(starts[99], 99 * 8_000);
    }

    #[test]
    fn burst_then_rate() {
        let mut link = Link::new(100 * GBPS, Instant::ZERO).unwrap();
        let mut pacer = Pacer::new(GBPS, 4_000, Instant::ZERO).unwrap();
        let starts = send_asap(&mut pacer, &mut link, 6, 1_000);
        // Four packets back to back (each waits only for the link: 80 ns), then one per 8 us.
        assert_eq!(starts, vec![0, 80, 160, 240, 8_000, 16_000]);
    }

    #[test]
    fn oversized_packet_passes_on_a_full_bucket_and_leaves_debt() {
        let mut bucket = TokenBucket::new(GBPS, 1_000, Instant::ZERO).unwrap();
        assert_eq!(bucket.ready_at(Instant::ZERO, 4_000), Instant::ZERO);
        bucket.consume(Instant::ZERO, 4_000).unwrap();
        // Debt of 3000 B plus a full 1000 B needed for the next: 32 us at 1 Gb/s.
        assert_eq!(bucket.ready_at(Instant::ZERO, 1_000), t(32_000));
        assert_eq!(
            bucket.consume(t(31_999), 1_000),
            Err(PacerError::NotReady(t(32_000)))
        );
        bucket.consume(t(32_000), 1_000).unwrap();
    }

    #[test]
    fn rate_change_applies_from_now() {
        let mut link = Link::new(100 * GBPS, Instant::ZERO).unwrap();
        let mut pacer = Pacer::new(10 * GBPS, 0, Instant::ZERO).unwrap();
        pacer
            .on_send(Instant::ZERO, 1_000, 1_000, &mut link)
            .unwrap();
        assert_eq!(pacer.next_send_time(Instant::ZERO, 1_000, &link), t(800));
        // Half-way through the debt the rate halves: the remaining 4000 bits take 800 ns.
        pacer.set_rate(t(400), 5 * GBPS).unwrap();
        assert_eq!(pacer.next_send_time(t(400), 1_000, &link), t(1_200));
        assert_eq!(pacer.set_rate(t(500), 0), Err(PacerError::ZeroRate));
        assert_eq!(
            pacer.on_send(t(1_199), 1_000, 1_000, &mut link),
            Err(PacerError::NotReady(t(1_200)))
        );
        assert_eq!(pacer.packets_total(), 1, "a refused send changes nothing");
        assert_eq!(
            pacer.on_send(t(1_200), 1_000, 1_000, &mut link),
            Ok(t(1_280))
        );
    }

    #[test]
    fn busy_link_refuses_without_charging_the_qp() {
        let mut link = Link::new(GBPS, Instant::ZERO).unwrap();
        let mut a = Pacer::new(GBPS, 10_000, Instant::ZERO).unwrap();
        let mut b = Pacer::new(GBPS, 10_000, Instant::ZERO).unwrap();
        assert_eq!(
            a.on_send(Instant::ZERO, 1_000, 1_000, &mut link),
            Ok(t(8_000))
        );
        let b_before = b.clone();
        let link_before = link.clone();
        assert_eq!(
            b.on_send(t(10), 1_000, 1_000, &mut link),
            Err(PacerError::NotReady(t(8_000)))
        );
        assert_eq!((&b, &link), (&b_before, &link_before));
        assert_eq!(b.on_send(t(8_000), 1_000, 1_000, &mut link), Ok(t(16_000)));
    }

    proptest! {
        /// Sending as early as allowed stays inside the token-bucket envelope (bytes sent before a
        /// packet at t, plus min(size, burst), <= burst + rate * (t + 1 ns) - 1 nanobit), and each packet starts at
        /// exactly the first nanosecond at which it conforms.
        #[test]
        fn asap_sending_follows_the_envelope(
            rate in 1_000_000u64..400 * GBPS,
            burst in 0u64..20_000,
            sizes in prop::collection::vec(1u64..9_000, 1..200),
        ) {
            let mut bucket = TokenBucket::new(rate, burst, Instant::ZERO).unwrap();
            let mut now = Instant::ZERO;
            let mut sent_nanobits = 0i128;
            for &size in &sizes {
                let ready = bucket.ready_at(now, size);
                prop_assert!(ready >= now);
                if ready > now {
                    // One nanosecond earlier it does not conform.
                    let early = Instant::from_nanos(ready.as_nanos() - 1);
                    prop_assert!(bucket.clone().consume(early, size).is_err());
                }
                now = ready;
                bucket.consume(now, size).unwrap();
                // Conformance: what was sent before, plus min(size, burst), fits the envelope.
                let allowance =
                    nanobits(burst) + i128::from(now.as_nanos()) * i128::from(rate) + i128::from(rate) - 1;
                prop_assert!(sent_nanobits + nanobits(size.min(burst)) <= allowance);
                sent_nanobits += nanobits(size);
            }
        }
    }
}
