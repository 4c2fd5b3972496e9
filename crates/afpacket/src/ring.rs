//! Walking a memory-mapped receive ring (Documentation/networking/packet_mmap.rst), in either of
//! the two layouts the backend supports.
//!
//! **TPACKET_V2** ([`FrameRing`]): the ring is fixed-size frame slots, each starting with a
//! `tpacket2_hdr` whose `tp_status` the kernel sets to `TP_STATUS_USER` as soon as it has copied
//! a packet in; user space reads the slot and writes `TP_STATUS_KERNEL` back. Slots are filled in
//! ring order, so the walk only ever looks at the next slot.
//!
//! **TPACKET_V3** ([`BlockRing`]): the ring is `block_count` blocks of `block_size` bytes. The kernel fills one block at a time
//! with packets, each behind a `tpacket3_hdr`, and hands the whole block to user space by setting
//! `TP_STATUS_USER` in the block descriptor, either when the block is full or when the block's
//! retire timer (`tp_retire_blk_tov`) fires. User space reads every packet of the block and gives
//! it back by writing `TP_STATUS_KERNEL`. Blocks are handed over in ring order.
//!
//! While a block is ours the kernel does not touch it, so its packets can be read as ordinary
//! memory; only the status word is shared, and it is accessed atomically with acquire/release
//! ordering (the kernel pairs it with `smp_wmb`/`smp_rmb` around its own status accesses).
//!
//! Offsets inside a block come from the kernel; they are still checked against the block's
//! bounds, so a corrupt descriptor ends the walk of that block instead of reading out of bounds.

use std::mem::{offset_of, size_of};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::sys::RingMapping;

const BLOCK_STATUS_OFFSET: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
const NUM_PACKETS_OFFSET: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
const FIRST_PACKET_OFFSET: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);
const BLOCK_HEADER_LEN: usize = size_of::<libc::tpacket_block_desc>();

const PACKET_HEADER_LEN: usize = size_of::<libc::tpacket3_hdr>();
/// Where the kernel puts the packet's `sockaddr_ll`: right after the `tpacket3_hdr`, aligned to
/// `TPACKET_ALIGNMENT`.
const PACKET_ADDRESS_OFFSET: usize = PACKET_HEADER_LEN.next_multiple_of(libc::TPACKET_ALIGNMENT);
const PACKET_TYPE_OFFSET: usize =
    PACKET_ADDRESS_OFFSET + offset_of!(libc::sockaddr_ll, sll_pkttype);

/// One packet of a block we own.
#[derive(Debug)]
pub(crate) struct RingPacket<'ring> {
    /// The captured bytes, from the destination MAC on (without an 802.1Q tag the kernel took
    /// out into `vlan_tci`).
    pub(crate) data: &'ring [u8],
    /// The packet's length as received (longer than `data` when the ring truncated it).
    pub(crate) wire_len: usize,
    /// `tp_status` (`TP_STATUS_VLAN_VALID`, `TP_STATUS_CSUMNOTREADY`...).
    pub(crate) status: u32,
    pub(crate) vlan_tci: u16,
    pub(crate) vlan_tpid: u16,
    /// `sll_pkttype` (`PACKET_HOST`, `PACKET_OUTGOING`...).
    pub(crate) packet_type: u8,
}

/// What the ring holds next.
#[derive(Debug)]
pub(crate) enum RingEntry<'ring> {
    /// A packet; the next call moves past it.
    Packet(RingPacket<'ring>),
    /// Nothing ready.
    Empty,
    /// The block descriptor or a packet header pointed out of the block; the rest of that block
    /// is skipped.
    Malformed,
}

/// A receive ring of either layout.
pub(crate) enum RxRing {
    /// TPACKET_V2: per-frame hand-over.
    Frames(FrameRing),
    /// TPACKET_V3: per-block hand-over.
    Blocks(BlockRing),
}

impl RxRing {
    /// Whether a packet is ready without a syscall.
    pub(crate) fn has_ready_packet(&self) -> bool {
        match self {
            Self::Frames(ring) => ring.has_ready_packet(),
            Self::Blocks(ring) => ring.has_ready_block(),
        }
    }

    /// Takes and clears the "kernel dropped frames" hint (`TP_STATUS_LOSING`).
    pub(crate) fn take_losing(&mut self) -> bool {
        match self {
            Self::Frames(ring) => std::mem::take(&mut ring.losing),
            Self::Blocks(ring) => std::mem::take(&mut ring.losing),
        }
    }

    /// Returns what has been read to the kernel.
    pub(crate) fn release_if_done(&mut self) {
        match self {
            Self::Frames(ring) => ring.release_pending(),
            Self::Blocks(ring) => ring.release_if_done(),
        }
    }

    /// The next packet, or why there is none. Each call moves past the entry it returns.
    pub(crate) fn next_entry(&mut self) -> RingEntry<'_> {
        match self {
            Self::Frames(ring) => ring.next_entry(),
            Self::Blocks(ring) => ring.next_entry(),
        }
    }
}

const FRAME_HEADER_LEN: usize = size_of::<libc::tpacket2_hdr>();
/// Where the kernel puts a V2 packet's `sockaddr_ll`: after the header, aligned.
const FRAME_ADDRESS_OFFSET: usize = FRAME_HEADER_LEN.next_multiple_of(libc::TPACKET_ALIGNMENT);
const FRAME_PACKET_TYPE_OFFSET: usize =
    FRAME_ADDRESS_OFFSET + offset_of!(libc::sockaddr_ll, sll_pkttype);

/// A TPACKET_V2 receive ring and the position of the walk through it.
pub(crate) struct FrameRing {
    mapping: RingMapping,
    block_size: usize,
    frame_size: usize,
    frames_per_block: usize,
    frame_count: usize,
    current_frame: usize,
    /// Whether `current_frame` was returned by `next_entry` and is still ours.
    pending_release: bool,
    losing: bool,
}

impl FrameRing {
    /// Walks `mapping`, which must be a TPACKET_V2 ring of `block_count` blocks of `block_size`
    /// bytes cut into frames of `frame_size` bytes.
    pub(crate) fn new(
        mapping: RingMapping,
        block_size: usize,
        block_count: usize,
        frame_size: usize,
    ) -> Self {
        let frames_per_block = block_size / frame_size;
        assert!(
            frame_size >= FRAME_ADDRESS_OFFSET + size_of::<libc::sockaddr_ll>()
                && frames_per_block > 0
                && block_size.checked_mul(block_count) == Some(mapping.len())
        );
        Self {
            mapping,
            block_size,
            frame_size,
            frames_per_block,
            frame_count: frames_per_block * block_count,
            current_frame: 0,
            pending_release: false,
            losing: false,
        }
    }

    fn frame_base(&self) -> *mut u8 {
        let offset = (self.current_frame / self.frames_per_block) * self.block_size
            + (self.current_frame % self.frames_per_block) * self.frame_size;
        // SAFETY: `current_frame < frame_count`, so the slot lies inside its block, inside the
        // mapping (checked in `new`).
        unsafe { self.mapping.base().as_ptr().add(offset) }
    }

    fn frame_status(&self) -> &AtomicU32 {
        // SAFETY: `tp_status` is the first field of the slot's `tpacket2_hdr`, 16-byte aligned
        // (slots are multiples of TPACKET_ALIGNMENT from a page boundary), inside the mapping,
        // which lives as long as `self`. The kernel accesses it concurrently, hence atomic.
        unsafe { AtomicU32::from_ptr(self.frame_base().cast()) }
    }

    fn has_ready_packet(&self) -> bool {
        let slot = if self.pending_release {
            // The slot after the one still held.
            let next = (self.current_frame + 1) % self.frame_count;
            let offset = (next / self.frames_per_block) * self.block_size
                + (next % self.frames_per_block) * self.frame_size;
            // SAFETY: as in `frame_status`, for slot `next < frame_count`.
            unsafe {
                AtomicU32::from_ptr(self.mapping.base().as_ptr().add(offset).cast())
                    .load(Ordering::Acquire)
            }
        } else {
            self.frame_status().load(Ordering::Acquire)
        };
        slot & libc::TP_STATUS_USER != 0
    }

    /// Returns the slot last handed out to the kernel and moves to the next one.
    fn release_pending(&mut self) {
        if self.pending_release {
            self.frame_status()
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.pending_release = false;
            self.current_frame = (self.current_frame + 1) % self.frame_count;
        }
    }

    fn next_entry(&mut self) -> RingEntry<'_> {
        self.release_pending();
        let status = self.frame_status().load(Ordering::Acquire);
        if status & libc::TP_STATUS_USER == 0 {
            return RingEntry::Empty;
        }
        self.losing |= status & libc::TP_STATUS_LOSING != 0;
        self.pending_release = true;
        // SAFETY: the slot is ours (TP_STATUS_USER) and `FRAME_HEADER_LEN <= frame_size`
        // (checked in `new`); the kernel does not write a user-owned slot.
        let header: libc::tpacket2_hdr = unsafe {
            self.frame_base()
                .cast::<libc::tpacket2_hdr>()
                .read_unaligned()
        };
        // SAFETY: as above; the `sockaddr_ll` lies inside the slot (checked in `new`).
        let packet_type = unsafe { self.frame_base().add(FRAME_PACKET_TYPE_OFFSET).read() };
        let data_start = header.tp_mac as usize;
        let data_len = header.tp_snaplen as usize;
        if data_start < FRAME_HEADER_LEN
            || data_start
                .checked_add(data_len)
                .is_none_or(|end| end > self.frame_size)
        {
            return RingEntry::Malformed;
        }
        // SAFETY: `data_start..data_start + data_len` is inside a slot we own (checked above),
        // which stays ours, unmodified, until `release_pending` runs, and that needs `&mut self`,
        // which the returned borrow prevents.
        let data = unsafe {
            std::slice::from_raw_parts(self.frame_base().add(data_start).cast_const(), data_len)
        };
        RingEntry::Packet(RingPacket {
            data,
            wire_len: header.tp_len as usize,
            status: header.tp_status,
            vlan_tci: header.tp_vlan_tci,
            vlan_tpid: header.tp_vlan_tpid,
            packet_type,
        })
    }
}

/// A TPACKET_V3 receive ring and the position of the walk through it.
pub(crate) struct BlockRing {
    mapping: RingMapping,
    block_size: usize,
    block_count: usize,
    current_block: usize,
    /// Whether `current_block` is ours (its status said `TP_STATUS_USER`).
    block_owned: bool,
    /// Packets of the owned block not yet returned.
    packets_left: u32,
    /// Offset in the owned block of the next packet's header.
    next_packet_offset: usize,
    /// Whether the kernel set `TP_STATUS_LOSING` on a block since this flag was last taken.
    losing: bool,
}

impl BlockRing {
    /// Walks `mapping`, which must be a TPACKET_V3 ring of `block_count` blocks of `block_size`.
    pub(crate) fn new(mapping: RingMapping, block_size: usize, block_count: usize) -> Self {
        assert!(
            block_size >= BLOCK_HEADER_LEN
                && block_size.checked_mul(block_count) == Some(mapping.len())
        );
        Self {
            mapping,
            block_size,
            block_count,
            current_block: 0,
            block_owned: false,
            packets_left: 0,
            next_packet_offset: 0,
            losing: false,
        }
    }

    fn block_base(&self) -> *mut u8 {
        // SAFETY: `current_block < block_count`, so the offset stays inside the mapping whose
        // length is `block_size * block_count` (checked in `new`).
        unsafe {
            self.mapping
                .base()
                .as_ptr()
                .add(self.current_block * self.block_size)
        }
    }

    fn block_status(&self) -> &AtomicU32 {
        // SAFETY: the status word is a 4-byte-aligned `u32` (blocks start on page boundaries and
        // the offset is a multiple of 4) inside the mapping, which lives as long as `self`. The
        // kernel accesses it concurrently, hence the atomic view.
        unsafe { AtomicU32::from_ptr(self.block_base().add(BLOCK_STATUS_OFFSET).cast()) }
    }

    fn read_block_u32(&self, offset: usize) -> u32 {
        debug_assert!(offset + 4 <= BLOCK_HEADER_LEN);
        // SAFETY: inside the block header, in a block we own (the kernel does not write it).
        unsafe { self.block_base().add(offset).cast::<u32>().read_unaligned() }
    }

    /// Whether a block (the one being walked or the next one) is ready without a syscall.
    pub(crate) fn has_ready_block(&self) -> bool {
        (self.block_owned && self.packets_left > 0)
            || self.block_status().load(Ordering::Acquire) & libc::TP_STATUS_USER != 0
    }

    /// Returns the walked block to the kernel if all its packets have been read.
    pub(crate) fn release_if_done(&mut self) {
        if self.block_owned && self.packets_left == 0 {
            self.block_status()
                .store(libc::TP_STATUS_KERNEL, Ordering::Release);
            self.block_owned = false;
            self.current_block = (self.current_block + 1) % self.block_count;
        }
    }

    /// The next packet, or why there is none. Each call moves past the entry it returns, and
    /// returns the previous block to the kernel once all its packets have been returned.
    pub(crate) fn next_entry(&mut self) -> RingEntry<'_> {
        self.release_if_done();
        // Retired empty blocks (a retire timeout on an idle link can close one) are handed back
        // at once; at most one lap of the ring is skipped so the call stays bounded.
        let mut empty_blocks_skipped = 0;
        while !self.block_owned {
            let status = self.block_status().load(Ordering::Acquire);
            if status & libc::TP_STATUS_USER == 0 || empty_blocks_skipped == self.block_count {
                return RingEntry::Empty;
            }
            self.losing |= status & libc::TP_STATUS_LOSING != 0;
            self.block_owned = true;
            self.packets_left = self.read_block_u32(NUM_PACKETS_OFFSET);
            self.next_packet_offset = self.read_block_u32(FIRST_PACKET_OFFSET) as usize;
            if self.packets_left == 0 {
                self.release_if_done();
                empty_blocks_skipped += 1;
            }
        }
        self.read_packet()
    }

    fn read_packet(&mut self) -> RingEntry<'_> {
        let offset = self.next_packet_offset;
        let header_end = offset.checked_add(PACKET_ADDRESS_OFFSET + size_of::<libc::sockaddr_ll>());
        if offset < BLOCK_HEADER_LEN || header_end.is_none_or(|end| end > self.block_size) {
            self.packets_left = 0;
            return RingEntry::Malformed;
        }
        // SAFETY: the header lies inside a block we own (checked just above); the kernel does
        // not write a user-owned block, and `read_unaligned` has no alignment requirement.
        let header: libc::tpacket3_hdr = unsafe {
            self.block_base()
                .add(offset)
                .cast::<libc::tpacket3_hdr>()
                .read_unaligned()
        };
        // SAFETY: as above; `PACKET_TYPE_OFFSET` is inside the checked header span.
        let packet_type = unsafe { self.block_base().add(offset + PACKET_TYPE_OFFSET).read() };
        let data_start = offset + header.tp_mac as usize;
        let data_len = header.tp_snaplen as usize;
        if (header.tp_mac as usize) < PACKET_HEADER_LEN
            || data_start
                .checked_add(data_len)
                .is_none_or(|end| end > self.block_size)
        {
            self.packets_left = 0;
            return RingEntry::Malformed;
        }
        self.packets_left -= 1;
        if self.packets_left > 0 {
            if header.tp_next_offset == 0 {
                // The kernel always links the next packet; a zero link would loop on this one.
                self.packets_left = 0;
            }
            self.next_packet_offset = offset + header.tp_next_offset as usize;
        }
        // SAFETY: `data_start..data_start + data_len` is inside a block we own (checked above),
        // which stays ours, unmodified, until `release_if_done` runs, and that needs `&mut self`,
        // which the returned borrow prevents.
        let data = unsafe {
            std::slice::from_raw_parts(self.block_base().add(data_start).cast_const(), data_len)
        };
        RingEntry::Packet(RingPacket {
            data,
            wire_len: header.tp_len as usize,
            status: header.tp_status,
            vlan_tci: header.hv1.tp_vlan_tci as u16,
            vlan_tpid: header.hv1.tp_vlan_tpid,
            packet_type,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_the_uapi_headers() {
        // linux/if_packet.h: struct tpacket_block_desc { __u32 version; __u32 offset_to_priv;
        // union tpacket_bd_header_u hdr; }, with hdr.bh1 = { __u32 block_status; __u32 num_pkts;
        // __u32 offset_to_first_pkt; ... } aligned to 8.
        assert_eq!(BLOCK_STATUS_OFFSET, 8);
        assert_eq!(NUM_PACKETS_OFFSET, 12);
        assert_eq!(FIRST_PACKET_OFFSET, 16);
        assert_eq!(PACKET_HEADER_LEN, 48);
        assert_eq!(PACKET_ADDRESS_OFFSET, 48);
        assert_eq!(PACKET_TYPE_OFFSET, 58);
        // struct tpacket2_hdr is 32 bytes; its sockaddr_ll follows at TPACKET_ALIGN(32).
        assert_eq!(FRAME_HEADER_LEN, 32);
        assert_eq!(FRAME_PACKET_TYPE_OFFSET, 42);
    }
}
