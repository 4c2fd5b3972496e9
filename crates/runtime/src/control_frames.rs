//! Frames between the dataplane and the control thread: frames the core punts (lcore →
//! control thread, [`PuntRings`]) and frames the control plane injects (control thread → lcore,
//! [`Injector`]). Both directions are bounded SPSC rings (rtrb: a release store publishes a
//! slot, the other side's acquire load reads it), and neither side allocates per frame once
//! running: punted frames travel as the backend's frame handles, injected bytes in buffers that
//! come back through a second ring for reuse.
//!
//! [`PuntRings::drain_to`] hands punted frames to a consumer (the routed ports' host
//! interfaces, [`crate::host_interfaces`]); what it does not take (ports without one) is
//! counted by reason as *unconsumed* and dropped. Every loss is counted: a full punt ring in the lcore's
//! `punt_ring_full`, a full inject ring in [`Injector::ring_full`], a frame buffer the lcore
//! could not get in its `inject_no_buffer`, and every refusal by the core in the port's
//! `inject_drops`.

use crate::lcore::InjectRequest;
use headroom_core::frame::Frame;
use headroom_core::punt::{PuntReason, Punted};
use headroom_core::types::PortId;
use std::fmt;

/// Frames each lcore's punt ring holds.
pub const PUNT_RING_FRAMES: usize = 1024;

/// Inject requests the ring towards the inject lcore holds.
pub const INJECT_RING_FRAMES: usize = 256;

/// Longest frame [`Injector::inject`] takes, bytes (the core checks the port's MTU).
pub const INJECT_MAX_BYTES: usize = 16 * 1024;

/// What [`PuntReceiver::pop`] shows a punted frame to: port, VLAN interface, reason, bytes.
pub type PuntVisit<'a> = dyn FnMut(PortId, Option<u16>, PuntReason, &[u8]) + 'a;

/// What [`PuntRings::drain_to`] shows each punted frame to (as [`PuntVisit`]); `false`: not
/// taken (counted unconsumed).
pub type PuntConsumer<'a> = dyn FnMut(PortId, Option<u16>, PuntReason, &[u8]) -> bool + 'a;

/// The control thread's end of one lcore's punt ring, whatever the backend's frame type.
pub trait PuntReceiver: Send {
    /// Takes the oldest punted frame and shows it to `visit` (port, VLAN interface, reason,
    /// bytes); whether there was one. The frame's buffer goes back to its backend afterwards.
    fn pop(&mut self, visit: &mut PuntVisit<'_>) -> bool;
}

impl<F: Frame> PuntReceiver for rtrb::Consumer<Punted<F>> {
    fn pop(&mut self, visit: &mut PuntVisit<'_>) -> bool {
        match rtrb::Consumer::pop(self) {
            Ok(p) => {
                visit(p.port, p.vlan, p.reason, p.frame.data());
                true
            }
            Err(_) => false,
        }
    }
}

/// Every lcore's punt ring, as the control thread holds them.
pub struct PuntRings {
    rings: Vec<Box<dyn PuntReceiver>>,
    unconsumed: [u64; PuntReason::COUNT],
}

impl fmt::Debug for PuntRings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PuntRings")
            .field("rings", &self.rings.len())
            .field("unconsumed", &self.unconsumed)
            .finish()
    }
}

impl PuntRings {
    pub(crate) fn new(rings: Vec<Box<dyn PuntReceiver>>) -> Self {
        Self {
            rings,
            unconsumed: [0; PuntReason::COUNT],
        }
    }

    /// Takes every punted frame waiting and shows it to `consumer`; each it does not take
    /// (`false`) is counted as unconsumed (by reason) and dropped. Returns how many were taken
    /// from the rings.
    pub fn drain_to(&mut self, consumer: &mut PuntConsumer<'_>) -> usize {
        let mut taken = 0;
        let mut dropped = 0;
        let unconsumed = &mut self.unconsumed;
        for ring in &mut self.rings {
            while ring.pop(&mut |port, vlan, reason, frame| {
                if !consumer(port, vlan, reason, frame) {
                    unconsumed[reason.index()] += 1;
                    dropped += 1;
                }
            }) {
                taken += 1;
            }
        }
        if dropped > 0 {
            tracing::debug!(
                dropped,
                "punted frames dropped: their port has no host interface"
            );
        }
        taken
    }

    /// Punted frames the control thread took and dropped, by reason (index of
    /// [`PuntReason`]).
    #[must_use]
    pub fn unconsumed(&self) -> [u64; PuntReason::COUNT] {
        self.unconsumed
    }
}

/// Why [`Injector::inject`] refused a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InjectError {
    /// No lcore both receives (an ingress side enqueues the frame) and transmits (its TX queues
    /// provide the frame buffer).
    NoInjectLcore,
    /// The switch has no such port.
    UnknownPort(PortId),
    /// Longer than [`INJECT_MAX_BYTES`].
    TooLong {
        /// The frame's length.
        len: usize,
    },
    /// The ring towards the lcore is full (counted in [`Injector::ring_full`]).
    RingFull,
}

impl fmt::Display for InjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoInjectLcore => f.write_str(
                "no lcore both receives and transmits: frames cannot be injected in this layout",
            ),
            Self::UnknownPort(p) => write!(f, "{p} does not exist"),
            Self::TooLong { len } => {
                write!(
                    f,
                    "a {len}-byte frame is longer than {INJECT_MAX_BYTES} bytes"
                )
            }
            Self::RingFull => f.write_str("the inject ring is full"),
        }
    }
}

impl std::error::Error for InjectError {}

/// The control thread's end of the inject rings.
#[derive(Debug)]
pub struct Injector {
    requests: rtrb::Producer<InjectRequest>,
    returned: rtrb::Consumer<Vec<u8>>,
    /// Emptied buffers ready for reuse.
    free: Vec<Vec<u8>>,
    /// Buffers made so far (at most the return ring's capacity, so it never overflows).
    made: usize,
    ports: usize,
    ring_full: u64,
}

impl Injector {
    /// The control thread's end and the lcore's end of a pair of inject rings for a switch of
    /// `ports` ports.
    pub(crate) fn pair(ports: usize) -> (Self, crate::lcore::InjectChannel) {
        let (requests, requests_rx) = rtrb::RingBuffer::new(INJECT_RING_FRAMES);
        let (buffers_tx, returned) = rtrb::RingBuffer::new(2 * INJECT_RING_FRAMES);
        (
            Self {
                requests,
                returned,
                free: Vec::with_capacity(2 * INJECT_RING_FRAMES),
                made: 0,
                ports,
                ring_full: 0,
            },
            crate::lcore::InjectChannel {
                requests: requests_rx,
                buffers: buffers_tx,
            },
        )
    }

    /// Queues `bytes` (an Ethernet frame without FCS) to be sent out of `port` through the
    /// normal egress path (see `headroom_core::inject`). Never blocks.
    ///
    /// # Errors
    /// See [`InjectError`]; the core's own refusals (rate, buffer, queue) are counted per port
    /// (`inject_drops`), not returned.
    pub fn inject(&mut self, port: PortId, bytes: &[u8]) -> Result<(), InjectError> {
        if port.index() >= self.ports {
            return Err(InjectError::UnknownPort(port));
        }
        self.request(port, None, bytes)
    }

    /// Queues `bytes` (an untagged Ethernet frame without FCS) to be sent into VLAN `vid` for
    /// its VLAN interface (`LcoreStep::inject_vlan`: the FDB's member port, or flooded to the
    /// members). Never blocks.
    ///
    /// # Errors
    /// As [`Injector::inject`].
    pub fn inject_vlan(&mut self, vid: u16, bytes: &[u8]) -> Result<(), InjectError> {
        self.request(PortId(0), Some(vid), bytes)
    }

    fn request(
        &mut self,
        port: PortId,
        vlan: Option<u16>,
        bytes: &[u8],
    ) -> Result<(), InjectError> {
        if bytes.len() > INJECT_MAX_BYTES {
            return Err(InjectError::TooLong { len: bytes.len() });
        }
        while let Ok(buffer) = self.returned.pop() {
            self.free.push(buffer);
        }
        if self.requests.is_full() {
            self.ring_full += 1;
            return Err(InjectError::RingFull);
        }
        let mut buffer = match self.free.pop() {
            Some(b) => b,
            None if self.made < 2 * INJECT_RING_FRAMES => {
                self.made += 1;
                Vec::with_capacity(2048)
            }
            None => {
                // Every buffer is in flight: as full as the ring.
                self.ring_full += 1;
                return Err(InjectError::RingFull);
            }
        };
        buffer.clear();
        buffer.extend_from_slice(bytes);
        match self.requests.push(InjectRequest {
            port,
            vlan,
            bytes: buffer,
        }) {
            Ok(()) => Ok(()),
            Err(rtrb::PushError::Full(r)) => {
                self.free.push(r.bytes);
                self.ring_full += 1;
                Err(InjectError::RingFull)
            }
        }
    }

    /// Requests in the ring that the lcore has not taken yet.
    #[must_use]
    pub fn pending(&self) -> usize {
        INJECT_RING_FRAMES - self.requests.slots()
    }

    /// Frames refused because the ring was full.
    #[must_use]
    pub fn ring_full(&self) -> u64 {
        self.ring_full
    }
}
