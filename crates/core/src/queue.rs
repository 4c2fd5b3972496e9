//! What travels between the two sides: a frame handle and its metadata, through one SPSC ring
//! per (ingress side, egress port, queue).
//!
//! The ingress side ([`crate::ingress`]) is each ring's only producer, the egress side that owns
//! the port ([`crate::egress`]) its only consumer. rtrb publishes a pushed slot with a release
//! store and the consumer reads it after an acquire load, so the egress side sees the frame and
//! its metadata as written. A full ring refuses the frame, which the ingress side counts
//! (`queue_ring_full`) after undoing its admissions.

use crate::types::PRIORITY_COUNT;
use rtrb::{Consumer, Producer, RingBuffer};

/// What travels with a frame handle from the ingress side to the egress side.
///
/// Packed into 16 bytes: every frame's metadata is written into a ring slot and read back, so
/// its size is memory traffic per frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameMeta {
    /// When the frame was enqueued, ns.
    pub enqueued_ns: u64,
    /// Cells charged (ingress PG and egress queue alike).
    pub cells: u32,
    /// Port the frame arrived on; for a frame the control plane injected, the CPU pseudo-port
    /// of the ingress side that injected it ([`crate::inject::cpu_port_index`]).
    pub in_port: u16,
    /// Ingress PG the frame's cells are charged to.
    pub pg: u8,
    /// Bits 0-6: offset of the IPv4/IPv6 header in the frame as enqueued, 0 when not IP (an L3
    /// header starts at most 22 bytes in: Ethernet and two tags); bit 7: it is IPv6.
    l3: u8,
}

impl FrameMeta {
    const IPV6: u8 = 0x80;

    /// Metadata of a frame; an L3 offset beyond 127 bytes is recorded as not IP.
    #[must_use]
    pub fn new(
        in_port: u16,
        pg: u8,
        l3_offset: usize,
        ipv6: bool,
        cells: u32,
        enqueued_ns: u64,
    ) -> Self {
        let l3 = if l3_offset < usize::from(Self::IPV6) {
            // Fits in 7 bits (checked just above).
            l3_offset as u8 | u8::from(ipv6) << 7
        } else {
            0
        };
        Self {
            enqueued_ns,
            cells,
            in_port,
            pg,
            l3,
        }
    }

    /// Offset of the IPv4/IPv6 header in the frame as enqueued, 0 when not IP.
    #[must_use]
    pub fn l3_offset(&self) -> u8 {
        self.l3 & !Self::IPV6
    }

    /// Whether the L3 header is IPv6.
    #[must_use]
    pub fn ipv6(&self) -> bool {
        self.l3 & Self::IPV6 != 0
    }
}

/// A frame in an egress queue's ring.
#[derive(Debug)]
pub struct Queued<F> {
    /// The frame.
    pub frame: F,
    /// Its metadata.
    pub meta: FrameMeta,
}

/// The consuming ends of one ingress side's rings towards every port's queues (`None` once
/// taken by the egress side that owns the port).
pub(crate) type PortConsumers<F> = Vec<[Option<Consumer<Queued<F>>>; PRIORITY_COUNT]>;

/// The producing ends of one ingress side's rings, `[port][queue]`.
pub(crate) type PortProducers<F> = Vec<[Producer<Queued<F>>; PRIORITY_COUNT]>;

/// Every ring of a switch: `ingress_sides × ports × queues`, each holding `capacity` frames.
/// Returns, per ingress side, its producers and the matching consumers (to be handed out to
/// the egress sides that own each port).
pub(crate) fn rings<F>(
    ingress_sides: usize,
    ports: usize,
    capacity: usize,
) -> Vec<(PortProducers<F>, PortConsumers<F>)> {
    (0..ingress_sides)
        .map(|_| {
            let mut producers = Vec::with_capacity(ports);
            let mut consumers = Vec::with_capacity(ports);
            for _ in 0..ports {
                let (p, c): (Vec<_>, Vec<_>) = (0..PRIORITY_COUNT)
                    .map(|_| {
                        let (tx, rx) = RingBuffer::new(capacity);
                        (tx, Some(rx))
                    })
                    .unzip();
                producers.push(p.try_into().unwrap_or_else(|_| unreachable!("eight rings")));
                consumers.push(c.try_into().unwrap_or_else(|_| unreachable!("eight rings")));
            }
            (producers, consumers)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::FrameMeta;

    #[test]
    fn frame_meta_is_sixteen_bytes_and_keeps_what_it_is_given() {
        assert_eq!(size_of::<FrameMeta>(), 16);
        let m = FrameMeta::new(7, 3, 22, true, 6, 1_000);
        assert_eq!(
            (
                m.in_port,
                m.pg,
                m.l3_offset(),
                m.ipv6(),
                m.cells,
                m.enqueued_ns
            ),
            (7, 3, 22, true, 6, 1_000)
        );
        let m = FrameMeta::new(0, 0, 14, false, 1, 0);
        assert_eq!((m.l3_offset(), m.ipv6()), (14, false));
        // Beyond 7 bits the offset cannot be kept: recorded as not IP (never ECN-marked).
        let m = FrameMeta::new(0, 0, 200, true, 1, 0);
        assert_eq!((m.l3_offset(), m.ipv6()), (0, false));
    }
}
