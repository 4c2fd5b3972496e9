//! Frames as the core handles them: opaque handles owned by a port backend.
//!
//! A frame is an mbuf for DPDK, a slot of a preallocated pool for AF_PACKET and in-memory ports,
//! or a heap buffer in tests. The core reads and marks its bytes in place and never copies them,
//! except to flood a frame to several ports ([`Frame::try_clone`]). Dropping a handle returns
//! the buffer to its owner (an mbuf is freed, a pool slot goes back to its pool).

/// A received or generated Ethernet frame (without FCS), owned through a handle.
pub trait Frame: Send + Sized + 'static {
    /// The frame's bytes, from the destination MAC address on.
    fn data(&self) -> &[u8];

    /// The frame's bytes, writable in place.
    fn data_mut(&mut self) -> &mut [u8];

    /// Grows the frame by `n` bytes at the front (used to insert an 802.1Q tag). The new bytes
    /// are unspecified. Returns `false`, leaving the frame unchanged, when the buffer has no room.
    fn push_front(&mut self, n: usize) -> bool;

    /// Removes `n` bytes from the front (used to strip an 802.1Q tag). Returns `false`, leaving
    /// the frame unchanged, when the frame is shorter than `n`.
    fn pull_front(&mut self, n: usize) -> bool;

    /// A copy of this frame in a new buffer from the same owner, for flooding. `None` when the
    /// owner has no free buffer (the caller counts a drop).
    fn try_clone(&self) -> Option<Self>;

    /// Shortens the frame to its first `len` bytes (nothing happens when it is not longer).
    /// Returns `false`, leaving the frame unchanged, when the owner cannot shorten a frame in
    /// place (the default). Only fault injection (`headroom_io::fault`) cuts frames short.
    fn truncate(&mut self, len: usize) -> bool {
        let _ = len;
        false
    }

    /// Length in bytes.
    fn len(&self) -> usize {
        self.data().len()
    }

    /// Whether the frame holds no byte.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Bytes reserved in front of a [`HeapFrame`]'s data so that tags can be pushed without moving.
pub const HEAP_FRAME_HEADROOM: usize = 64;

/// A frame on the heap, for tests, benchmarks' baselines and the simulator.
///
/// Creating and cloning one allocates; the runtime never uses it on the per-packet path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapFrame {
    buf: Vec<u8>,
    start: usize,
}

impl HeapFrame {
    /// A frame holding a copy of `bytes`.
    #[must_use]
    pub fn new(bytes: &[u8]) -> Self {
        let mut buf = vec![0; HEAP_FRAME_HEADROOM + bytes.len()];
        buf[HEAP_FRAME_HEADROOM..].copy_from_slice(bytes);
        Self {
            buf,
            start: HEAP_FRAME_HEADROOM,
        }
    }
}

impl Frame for HeapFrame {
    fn data(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..]
    }

    fn push_front(&mut self, n: usize) -> bool {
        if n > self.start {
            return false;
        }
        self.start -= n;
        true
    }

    fn pull_front(&mut self, n: usize) -> bool {
        if n > self.buf.len() - self.start {
            return false;
        }
        self.start += n;
        true
    }

    fn try_clone(&self) -> Option<Self> {
        Some(self.clone())
    }

    fn truncate(&mut self, len: usize) -> bool {
        self.buf.truncate(self.start + len);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heap_frame_push_and_pull() {
        let mut f = HeapFrame::new(&[1, 2, 3]);
        assert_eq!(f.len(), 3);
        assert!(f.push_front(4));
        assert_eq!(f.len(), 7);
        f.data_mut()[..4].copy_from_slice(&[9, 9, 9, 9]);
        assert!(f.pull_front(4));
        assert_eq!(f.data(), &[1, 2, 3]);
        assert!(!f.pull_front(4));
        assert!(!f.push_front(HEAP_FRAME_HEADROOM + 1));
        assert_eq!(f.data(), &[1, 2, 3]);
        assert!(f.truncate(5), "not longer: unchanged");
        assert_eq!(f.data(), &[1, 2, 3]);
        assert!(f.truncate(1));
        assert_eq!(f.data(), &[1]);
        assert!(f.truncate(0));
        assert!(f.is_empty());
    }
}
