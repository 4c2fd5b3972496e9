//! [`MbufFrame`]: a DPDK mbuf owned as a headroom [`Frame`], without copies.

use std::fmt;
use std::ptr::NonNull;

use dpdk_sys as sys;
use headroom_core::frame::Frame;

/// `RTE_MBUF_F_INDIRECT`: the mbuf's data lives in another mbuf's buffer.
const MBUF_F_INDIRECT: u64 = 1 << 62;
/// `RTE_MBUF_F_EXTERNAL`: the mbuf's data lives in an external, possibly shared, buffer.
const MBUF_F_EXTERNAL: u64 = 1 << 61;

/// One frame in one DPDK mbuf, owned exclusively.
///
/// Invariants (established by every constructor, kept by every method):
/// - the handle owns exactly one reference to a valid mbuf; dropping it frees the mbuf
///   (`rte_pktmbuf_free`), handing it to `rte_eth_tx_burst` consumes it without a free;
/// - the mbuf has one segment, so the frame is `data_len` contiguous bytes at `mtod`.
///
/// `#[repr(transparent)]`: a `[MbufFrame]` has the layout of a `[*mut rte_mbuf]`, so a burst
/// of frames is handed to `rte_eth_tx_burst` as it is, without building a pointer array.
#[repr(transparent)]
pub struct MbufFrame {
    mbuf: NonNull<sys::rte_mbuf>,
}

// SAFETY: the handle owns its mbuf exclusively; mbufs are plain memory that any thread may
// read, write and free (the mempool's ring is multi-producer/multi-consumer).
unsafe impl Send for MbufFrame {}

impl MbufFrame {
    /// Takes ownership of `mbuf`.
    ///
    /// # Safety
    /// `mbuf` must be a valid single-segment packet mbuf that the caller owns and gives up (no
    /// one else frees, transmits or writes it afterwards), from a mempool that outlives it. If
    /// its reference count is above 1 or its buffer is indirect or external, the other holders
    /// must not write the frame's bytes while this handle lives.
    #[must_use]
    pub unsafe fn from_raw(mbuf: NonNull<sys::rte_mbuf>) -> Self {
        Self { mbuf }
    }

    /// Gives up ownership without freeing: the caller now owns the mbuf.
    #[must_use]
    pub fn into_raw(self) -> NonNull<sys::rte_mbuf> {
        let mbuf = self.mbuf;
        std::mem::forget(self);
        mbuf
    }

    /// The mbuf, still owned by this handle.
    #[must_use]
    pub fn as_raw(&self) -> NonNull<sys::rte_mbuf> {
        self.mbuf
    }

    /// A zeroed frame of `len` bytes from `pool`, or `None` when the pool is empty or `len`
    /// does not fit one mbuf after its headroom.
    pub(crate) fn alloc_zeroed(pool: NonNull<sys::rte_mempool>, len: usize) -> Option<Self> {
        let len = u16::try_from(len).ok()?;
        // SAFETY: `pool` is a live packet mempool (the caller holds a handle on it).
        let raw = unsafe { sys::headroom_shim_pktmbuf_alloc(pool.as_ptr()) };
        // SAFETY: a fresh mbuf from rte_pktmbuf_alloc is valid, single-segment, refcnt 1 and
        // owned by us alone.
        let frame = unsafe { Self::from_raw(NonNull::new(raw)?) };
        // SAFETY: the mbuf is valid and exclusively ours; append returns NULL (leaving the
        // mbuf unchanged) or a pointer to `len` writable bytes inside its buffer.
        let data = unsafe { sys::headroom_shim_pktmbuf_append(frame.mbuf.as_ptr(), len) };
        if data.is_null() {
            return None; // `frame` drops and frees the mbuf
        }
        // SAFETY: `data` points at `len` writable bytes of our mbuf.
        unsafe { std::ptr::write_bytes(data, 0, usize::from(len)) };
        Some(frame)
    }

    /// Whether the mbuf holds the whole frame in one segment. RX queues drop (and count) frames
    /// for which this is false before wrapping them.
    pub(crate) fn is_single_segment(mbuf: NonNull<sys::rte_mbuf>) -> bool {
        // SAFETY: the caller passes a valid mbuf it owns; reads one field.
        unsafe { (*mbuf.as_ptr()).nb_segs == 1 }
    }

    /// The port the frame was received on (as DPDK recorded it in the mbuf).
    #[must_use]
    pub fn input_port(&self) -> u16 {
        // SAFETY: valid mbuf (invariant); reads one field.
        unsafe { (*self.mbuf.as_ptr()).port }
    }

    /// Bytes free in front of the frame (what `push_front` can still add).
    #[must_use]
    pub fn headroom(&self) -> usize {
        // SAFETY: valid mbuf (invariant); reads one field.
        usize::from(unsafe { (*self.mbuf.as_ptr()).data_off })
    }

    /// Bytes free after the frame.
    #[must_use]
    pub fn tailroom(&self) -> usize {
        // SAFETY: valid mbuf (invariant).
        usize::from(unsafe { sys::headroom_shim_pktmbuf_tailroom(self.mbuf.as_ptr()) })
    }

    /// Whether this handle's bytes are not shared with anything else (reference count 1 and a
    /// direct buffer); always true for frames from rx_burst, alloc_frame and try_clone.
    #[must_use]
    pub fn is_exclusive(&self) -> bool {
        // SAFETY: valid mbuf (invariant); reads fields.
        unsafe {
            let mbuf = self.mbuf.as_ptr();
            sys::headroom_shim_mbuf_refcnt_read(mbuf) == 1
                && (*mbuf).ol_flags & (MBUF_F_INDIRECT | MBUF_F_EXTERNAL) == 0
        }
    }

    /// A copy of the frame that ignores where the source's data starts: for the rare frame
    /// that extends into its headroom beyond what a fresh mbuf's data room after the default
    /// headroom can hold (so `rte_pktmbuf_copy` would need a second segment). Copies the bytes
    /// and the input port.
    fn copy_by_hand(&self) -> Option<Self> {
        let bytes = self.data();
        let len = u16::try_from(bytes.len()).ok()?;
        // SAFETY: valid mbuf (invariant); its pool outlives it (from_raw contract).
        let pool = unsafe { (*self.mbuf.as_ptr()).pool };
        // SAFETY: `pool` is the live pool this mbuf came from.
        let raw = unsafe { sys::headroom_shim_pktmbuf_alloc(pool) };
        // SAFETY: a fresh mbuf is valid, single-segment and exclusively ours.
        let copy = unsafe { Self::from_raw(NonNull::new(raw)?) };
        let mbuf = copy.mbuf.as_ptr();
        // SAFETY: `mbuf` is valid and ours; the new data offset keeps `len` bytes inside its
        // `buf_len`-byte buffer, so the copy writes only within the buffer.
        unsafe {
            let buf_len = (*mbuf).buf_len;
            let data_off = buf_len.checked_sub(len)?.min((*mbuf).data_off);
            (*mbuf).data_off = data_off;
            (*mbuf).data_len = len;
            (*mbuf).pkt_len = u32::from(len);
            (*mbuf).port = (*self.mbuf.as_ptr()).port;
            let dst = (*mbuf).buf_addr.cast::<u8>().add(usize::from(data_off));
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), dst, bytes.len());
        }
        Some(copy)
    }
}

impl Frame for MbufFrame {
    #[inline]
    fn data(&self) -> &[u8] {
        let mbuf = self.mbuf.as_ptr();
        // SAFETY: single-segment valid mbuf (invariant): `data_len` bytes at
        // `buf_addr + data_off` are initialised and inside the buffer; `&self` keeps writers out
        // (exclusive ownership, see `from_raw`).
        unsafe {
            let start = (*mbuf)
                .buf_addr
                .cast::<u8>()
                .add(usize::from((*mbuf).data_off));
            std::slice::from_raw_parts(start, usize::from((*mbuf).data_len))
        }
    }

    #[inline]
    fn data_mut(&mut self) -> &mut [u8] {
        let mbuf = self.mbuf.as_ptr();
        // SAFETY: as in `data`; `&mut self` plus exclusive ownership of the mbuf make this the
        // only access to these bytes.
        unsafe {
            let start = (*mbuf)
                .buf_addr
                .cast::<u8>()
                .add(usize::from((*mbuf).data_off));
            std::slice::from_raw_parts_mut(start, usize::from((*mbuf).data_len))
        }
    }

    #[inline]
    fn len(&self) -> usize {
        // SAFETY: valid mbuf (invariant); reads one field.
        usize::from(unsafe { (*self.mbuf.as_ptr()).data_len })
    }

    fn push_front(&mut self, n: usize) -> bool {
        let Ok(n) = u16::try_from(n) else {
            return false;
        };
        // SAFETY: valid, exclusively owned mbuf; prepend returns NULL and leaves the mbuf
        // unchanged when `n` exceeds the headroom, else moves data_off back and grows
        // data_len/pkt_len by `n` (the segment stays single).
        !unsafe { sys::headroom_shim_pktmbuf_prepend(self.mbuf.as_ptr(), n) }.is_null()
    }

    fn pull_front(&mut self, n: usize) -> bool {
        let Ok(n) = u16::try_from(n) else {
            return false;
        };
        // SAFETY: valid, exclusively owned mbuf; adj returns NULL and leaves the mbuf unchanged
        // when `n` exceeds data_len, else advances data_off and shrinks the lengths.
        !unsafe { sys::headroom_shim_pktmbuf_adj(self.mbuf.as_ptr(), n) }.is_null()
    }

    fn truncate(&mut self, len: usize) -> bool {
        let mbuf = self.mbuf.as_ptr();
        // SAFETY: valid, exclusively owned, single-segment mbuf (invariant): shrinking
        // `data_len` and `pkt_len` together keeps the bytes it covers initialised and inside
        // the buffer, and the segment single (what rte_pktmbuf_trim does for one segment).
        unsafe {
            if let Ok(len) = u16::try_from(len) {
                if len < (*mbuf).data_len {
                    (*mbuf).data_len = len;
                    (*mbuf).pkt_len = u32::from(len);
                }
            }
        }
        true
    }

    fn try_clone(&self) -> Option<Self> {
        let src = self.mbuf.as_ptr();
        // SAFETY: valid mbuf (invariant); its pool is live (from_raw contract). rte_pktmbuf_copy
        // allocates a new direct mbuf from that pool and copies the bytes and metadata; it
        // returns NULL when the pool is empty.
        let raw = unsafe { sys::rte_pktmbuf_copy(src, (*src).pool, 0, u32::MAX) };
        // SAFETY: a fresh mbuf (chain) from rte_pktmbuf_copy is valid and exclusively ours.
        let copy = unsafe { Self::from_raw(NonNull::new(raw)?) };
        if Self::is_single_segment(copy.mbuf) {
            return Some(copy);
        }
        // The frame uses part of its headroom and is longer than a fresh mbuf's room after the
        // default headroom, so the copy was chained. Free the chain (dropping `copy` frees all
        // its segments) and copy into one mbuf with a smaller headroom.
        drop(copy);
        self.copy_by_hand()
    }
}

impl Drop for MbufFrame {
    fn drop(&mut self) {
        // SAFETY: the handle owns one reference to a valid mbuf and is being destroyed, so the
        // reference is released exactly once (frames handed to the NIC are forgotten instead of
        // dropped).
        unsafe { sys::headroom_shim_pktmbuf_free(self.mbuf.as_ptr()) };
    }
}

impl fmt::Debug for MbufFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MbufFrame")
            .field("mbuf", &self.mbuf)
            .field("len", &self.len())
            .field("headroom", &self.headroom())
            .finish()
    }
}
