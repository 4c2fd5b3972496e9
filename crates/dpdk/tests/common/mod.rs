//! Shared helpers of the DPDK backend tests: one EAL per test process, test frames, polling
//! with a deadline.
//!
//! cargo runs each `tests/*.rs` file as its own process and EAL starts once per process, so
//! each file calls [`eal`] with its own devices and all its tests share the EAL.
#![allow(dead_code)] // each test binary uses a different subset

pub mod veth;

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use headroom_core::frame::Frame;
use headroom_dpdk::{DpdkRxQueue, DpdkTxQueue, Eal, MbufFrame, Mempool};
use headroom_io::{RxQueue, TxQueue};

/// How long a test polls for frames that should already be there. Ring and null ports hand
/// frames over synchronously and veth within microseconds; this only bounds a failure.
pub const POLL_DEADLINE: Duration = Duration::from_secs(3);

/// EAL memory for the tests, without hugepages.
pub const EAL_MEMORY_MIB: u64 = 512;

/// The EAL arguments of a test process: no hugepages, 512 MiB, no PCI scan, no shared config,
/// a file prefix unique to the process, plus `extra` (vdevs).
pub fn eal_args(extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--no-huge",
        "-m",
        "512",
        "--no-pci",
        "--no-shconf",
        "--log-level=notice",
    ]
    .iter()
    .map(|arg| (*arg).to_owned())
    .collect();
    args.push(format!(
        "--file-prefix=headroom-dpdk-test-{}",
        std::process::id()
    ));
    args.extend(extra.iter().map(|arg| (*arg).to_owned()));
    args
}

/// The process's EAL, started on first use with [`eal_args`]`(extra)` on the calling thread,
/// whose CPU affinity is restored afterwards. Panics (failing the test) if EAL does not start.
pub fn eal(extra: &[&str]) -> &'static Eal {
    static EAL: OnceLock<Result<Eal, String>> = OnceLock::new();
    let eal = EAL.get_or_init(|| Eal::init_unpinned(&eal_args(extra)).map_err(|e| e.to_string()));
    match eal {
        Ok(eal) => eal,
        Err(message) => panic!("{message}"),
    }
}

/// ethdev control calls are not thread-safe and libtest runs tests on parallel threads: tests
/// that open ports hold this lock for their whole body.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A test frame of `len` bytes: locally administered unicast MACs, the IEEE 802 local
/// experimental EtherType 0x88B5, a 2-byte sequence number, then bytes derived from the
/// sequence number and position.
pub fn test_frame(seq: u16, len: usize) -> Vec<u8> {
    assert!(len >= 60, "a frame without FCS has at least 60 bytes");
    let mut bytes = Vec::with_capacity(len);
    bytes.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    bytes.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    bytes.extend_from_slice(&[0x88, 0xB5]);
    bytes.extend_from_slice(&seq.to_be_bytes());
    while bytes.len() < len {
        let position = bytes.len();
        bytes.push((position as u8) ^ (seq as u8).rotate_left(3));
    }
    bytes
}

/// The sequence number of a [`test_frame`], if `bytes` is one.
pub fn test_frame_seq(bytes: &[u8]) -> Option<u16> {
    (bytes.len() >= 16 && bytes[12..14] == [0x88, 0xB5])
        .then(|| u16::from_be_bytes([bytes[14], bytes[15]]))
}

/// Lengths from the minimum frame (60) to a full 1514-byte frame, spread out.
pub fn varied_lengths(count: usize) -> Vec<usize> {
    (0..count)
        .map(|i| 60 + (i * 97) % (1514 - 60 + 1))
        .collect()
}

/// An `MbufFrame` holding `bytes`, allocated through the TX queue's `alloc_frame`.
pub fn mbuf_frame(tx: &mut DpdkTxQueue, bytes: &[u8]) -> MbufFrame {
    let mut frame = tx
        .alloc_frame(bytes.len())
        .expect("the pool has a free mbuf");
    assert_eq!(frame.len(), bytes.len());
    assert!(
        frame.data().iter().all(|&b| b == 0),
        "alloc_frame zeroes the frame"
    );
    frame.data_mut().copy_from_slice(bytes);
    frame
}

/// Polls `rx` until `want` frames arrived or [`POLL_DEADLINE`] passed; returns what arrived.
pub fn rx_until(rx: &mut DpdkRxQueue, want: usize) -> Vec<MbufFrame> {
    let deadline = Instant::now() + POLL_DEADLINE;
    let mut frames = Vec::with_capacity(want);
    while frames.len() < want && Instant::now() < deadline {
        let room = want - frames.len();
        if rx.rx_burst(&mut frames, room) == 0 {
            std::hint::spin_loop();
        }
    }
    frames
}

/// Polls `rx` until `want` frames matching `keep` arrived or [`POLL_DEADLINE`] passed,
/// dropping the others (kernel noise on a veth); returns the matching ones.
pub fn rx_matching(
    rx: &mut DpdkRxQueue,
    want: usize,
    keep: impl Fn(&MbufFrame) -> bool,
) -> Vec<MbufFrame> {
    let deadline = Instant::now() + POLL_DEADLINE;
    let mut kept = Vec::with_capacity(want);
    let mut burst = Vec::with_capacity(headroom_io::BURST_MAX);
    while kept.len() < want && Instant::now() < deadline {
        rx.rx_burst(&mut burst, headroom_io::BURST_MAX);
        kept.extend(burst.drain(..).filter(|frame| keep(frame)));
    }
    kept
}

/// Asserts every mbuf of `pool` is back: available == capacity, none in use. For a pool
/// without a per-lcore cache it also takes every mbuf out once: a double free would have put
/// an mbuf into the pool twice (the counts cap at the capacity and cannot show it), so
/// `capacity` distinct mbufs and not one more must come out.
pub fn assert_pool_full(pool: &Mempool, context: &str) {
    assert_eq!(
        (pool.available(), pool.in_use()),
        (pool.capacity(), 0),
        "{context}: every mbuf of pool {:?} must be back",
        pool.name()
    );
    if pool.cache_size() > 0 {
        return;
    }
    let all: Vec<MbufFrame> = std::iter::from_fn(|| pool.alloc_frame(0)).collect();
    let distinct: std::collections::BTreeSet<_> = all.iter().map(|frame| frame.as_raw()).collect();
    assert_eq!(
        (all.len(), distinct.len()),
        (pool.capacity() as usize, pool.capacity() as usize),
        "{context}: pool {:?} must hand out each of its mbufs exactly once (double free?)",
        pool.name()
    );
}
