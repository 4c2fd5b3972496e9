//! Port mirroring for `headroom capture`: what a port receives and sends (PFC frames the switch
//! generates included), copied by the lcore into a bounded ring the control plane drains.
//!
//! Copying happens only while a capture is active on the port (one relaxed load per burst
//! otherwise). When the ring is full the record is dropped and counted: a capture never slows
//! the dataplane down.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

/// Bytes of a frame a capture record keeps.
pub const CAPTURE_SNAPLEN: usize = 2048;
/// Records one lcore's capture ring holds.
pub const CAPTURE_RING_RECORDS: usize = 512;

/// Capture the port's received frames.
pub const CAPTURE_RX: u8 = 1;
/// Capture the port's transmitted frames.
pub const CAPTURE_TX: u8 = 2;
/// Capture MAC Control frames (PFC, PAUSE) only.
pub const CAPTURE_CONTROL_ONLY: u8 = 4;

/// One captured frame.
#[derive(Clone)]
pub struct CaptureRecord {
    /// Capture time, ns since the Unix epoch.
    pub unix_ns: u64,
    /// Port index.
    pub port: u16,
    /// Sent (true) or received (false) by the switch.
    pub transmitted: bool,
    /// Length of the frame.
    pub orig_len: u32,
    /// Bytes kept in `data`.
    pub len: u16,
    /// The first `len` bytes of the frame.
    pub data: Box<[u8; CAPTURE_SNAPLEN]>,
}

impl std::fmt::Debug for CaptureRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureRecord")
            .field("port", &self.port)
            .field("len", &self.len)
            .finish()
    }
}

/// Which ports are being captured, and how (set by the control plane, read by lcores).
///
/// Memory ordering: the flags are relaxed. Each is one byte with one writer (the control
/// plane), an lcore acts on the value alone (it reads nothing the control plane wrote because of
/// it), and a capture that starts or stops a burst late is what a capture is anyway. Records go
/// to the control plane through rtrb rings (release on push, acquire on pop), buffers and all.
#[derive(Debug)]
pub struct CaptureControl {
    flags: Vec<AtomicU8>,
    /// Records dropped because a ring was full. Every lcore adds to it, so with a locked
    /// `fetch_add`: it is touched only while a capture is running and its ring is full, never on
    /// the per-packet path of a switch that is not capturing.
    pub dropped: AtomicU64,
}

impl CaptureControl {
    /// Nothing captured on `ports` ports.
    #[must_use]
    pub fn new(ports: usize) -> Self {
        Self {
            flags: (0..ports).map(|_| AtomicU8::new(0)).collect(),
            dropped: AtomicU64::new(0),
        }
    }

    /// Sets the capture flags of a port (0 stops).
    pub fn set(&self, port: usize, flags: u8) {
        if let Some(f) = self.flags.get(port) {
            // Relaxed: see the type's docs.
            f.store(flags, Ordering::Relaxed);
        }
    }

    /// The capture flags of a port.
    #[inline]
    #[must_use]
    pub fn get(&self, port: usize) -> u8 {
        self.flags
            .get(port)
            .map_or(0, |f| f.load(Ordering::Relaxed))
    }
}

/// Whether a frame is a MAC Control frame (EtherType 0x8808, untagged).
#[must_use]
pub fn is_mac_control(data: &[u8]) -> bool {
    data.len() >= 14 && data[12] == 0x88 && data[13] == 0x08
}

/// The lcore's side of its capture ring, with preallocated record buffers.
pub(crate) struct Mirror {
    ring: rtrb::Producer<CaptureRecord>,
    spare: rtrb::Consumer<Box<[u8; CAPTURE_SNAPLEN]>>,
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mirror").finish_non_exhaustive()
    }
}

/// The control plane's side of one lcore's capture ring.
pub struct MirrorReader {
    ring: rtrb::Consumer<CaptureRecord>,
    spare: rtrb::Producer<Box<[u8; CAPTURE_SNAPLEN]>>,
}

impl std::fmt::Debug for MirrorReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorReader").finish_non_exhaustive()
    }
}

impl MirrorReader {
    /// Takes the next record; give its buffer back with [`MirrorReader::recycle`].
    pub fn pop(&mut self) -> Option<CaptureRecord> {
        self.ring.pop().ok()
    }

    /// Returns a record's buffer to the lcore.
    pub fn recycle(&mut self, record: CaptureRecord) {
        let _ = self.spare.push(record.data);
    }
}

/// A ring pair between one lcore and the control plane, buffers allocated up front.
pub(crate) fn mirror_pair() -> (Mirror, MirrorReader) {
    let (ring_tx, ring_rx) = rtrb::RingBuffer::new(CAPTURE_RING_RECORDS);
    let (mut spare_tx, spare_rx) = rtrb::RingBuffer::new(CAPTURE_RING_RECORDS);
    for _ in 0..CAPTURE_RING_RECORDS {
        let _ = spare_tx.push(Box::new([0u8; CAPTURE_SNAPLEN]));
    }
    (
        Mirror {
            ring: ring_tx,
            spare: spare_rx,
        },
        MirrorReader {
            ring: ring_rx,
            spare: spare_tx,
        },
    )
}

impl Mirror {
    /// Copies `frames` of `port` if its flags ask for this direction.
    #[inline]
    pub(crate) fn record<'a>(
        &mut self,
        control: &CaptureControl,
        port: u16,
        transmitted: bool,
        frames: impl Iterator<Item = &'a [u8]>,
    ) {
        let flags = control.get(usize::from(port));
        let want = if transmitted { CAPTURE_TX } else { CAPTURE_RX };
        if flags & want == 0 {
            return;
        }
        let unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        for data in frames {
            if flags & CAPTURE_CONTROL_ONLY != 0 && !is_mac_control(data) {
                continue;
            }
            let Ok(mut buf) = self.spare.pop() else {
                control.dropped.fetch_add(1, Ordering::Relaxed);
                continue;
            };
            let len = data.len().min(CAPTURE_SNAPLEN);
            buf[..len].copy_from_slice(&data[..len]);
            let record = CaptureRecord {
                unix_ns,
                port,
                transmitted,
                orig_len: u32::try_from(data.len()).unwrap_or(u32::MAX),
                len: u16::try_from(len).unwrap_or(u16::MAX),
                data: buf,
            };
            if self.ring.push(record).is_err() {
                control.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}
