//! The C shim against the mbuf fields bindgen generated, and the EAL lcore /
//! time functions (one EAL for this file, no ports).
#![cfg(feature = "dpdk")]

mod common;

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU32, Ordering};

use dpdk_sys as sys;

fn setup() -> std::sync::MutexGuard<'static, ()> {
    let guard = common::serial();
    common::eal(&[]);
    guard
}

#[test]
fn shim_accessors_agree_with_bindgen_fields_and_track_prepend_adj_trim() {
    let _serial = setup();
    const POOL_SIZE: u32 = 255;
    let pool = common::pool("accessor_pool", POOL_SIZE);
    // SAFETY: pool is live; the mbuf is exclusively ours until freed at the
    // end; every pointer dereferenced is inside the mbuf's buffer, as the
    // shim functions return NULL rather than out-of-range pointers.
    unsafe {
        let m = sys::headroom_shim_pktmbuf_alloc(pool);
        assert!(!m.is_null());
        let headroom: u16 = sys::RTE_PKTMBUF_HEADROOM;
        let room = sys::RTE_MBUF_DEFAULT_BUF_SIZE - headroom;
        assert_eq!(sys::headroom_shim_pktmbuf_headroom(m), headroom);
        assert_eq!(sys::headroom_shim_pktmbuf_tailroom(m), room);
        assert_eq!(sys::headroom_shim_pktmbuf_data_len(m), 0);
        assert_eq!((*m).data_off, headroom);
        assert_eq!((*m).buf_len, sys::RTE_MBUF_DEFAULT_BUF_SIZE);
        // rte_pktmbuf_mtod is buf_addr + data_off.
        let expected_data = (*m).buf_addr.cast::<u8>().add(usize::from((*m).data_off));
        assert_eq!(sys::headroom_shim_pktmbuf_mtod(m), expected_data);

        // append: data grows at the tail.
        let tail = sys::headroom_shim_pktmbuf_append(m, 100);
        assert_eq!(tail, expected_data);
        std::ptr::write_bytes(tail, 0xAB, 100);
        assert_eq!(((*m).data_len, (*m).pkt_len), (100, 100));
        assert_eq!(sys::headroom_shim_pktmbuf_tailroom(m), room - 100);

        // prepend: e.g. pushing a 4-byte VLAN tag's worth of header.
        let front = sys::headroom_shim_pktmbuf_prepend(m, 4);
        assert_eq!(front, expected_data.sub(4));
        assert_eq!(sys::headroom_shim_pktmbuf_mtod(m), front);
        assert_eq!(sys::headroom_shim_pktmbuf_headroom(m), headroom - 4);
        assert_eq!(
            (
                sys::headroom_shim_pktmbuf_data_len(m),
                sys::headroom_shim_pktmbuf_pkt_len(m)
            ),
            (104, 104)
        );

        // adj: drop it again; trim: drop 30 bytes at the tail.
        assert_eq!(sys::headroom_shim_pktmbuf_adj(m, 4), expected_data);
        assert_eq!(sys::headroom_shim_pktmbuf_trim(m, 30), 0);
        assert_eq!(((*m).data_len, (*m).pkt_len), (70, 70));
        assert_eq!(
            std::slice::from_raw_parts(expected_data, 70),
            &[0xAB; 70][..]
        );

        // Out-of-range requests fail without touching the mbuf.
        assert!(sys::headroom_shim_pktmbuf_prepend(m, headroom + 1).is_null());
        assert!(sys::headroom_shim_pktmbuf_append(m, room).is_null());
        assert!(sys::headroom_shim_pktmbuf_adj(m, 71).is_null());
        assert_eq!(sys::headroom_shim_pktmbuf_trim(m, 71), -1);
        assert_eq!(
            ((*m).data_len, (*m).pkt_len, (*m).data_off),
            (70, 70, headroom)
        );

        // Setters write the same fields the getters and bindgen read.
        sys::headroom_shim_pktmbuf_set_data_len(m, 60);
        sys::headroom_shim_pktmbuf_set_pkt_len(m, 60);
        assert_eq!(((*m).data_len, (*m).pkt_len), (60, 60));

        sys::headroom_shim_pktmbuf_free(m);
    }
    assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));
    // SAFETY: no mbuf of this pool is referenced any more.
    unsafe { sys::rte_mempool_free(pool) };
}

#[test]
fn refcount_clone_and_copy_release_every_mbuf() {
    let _serial = setup();
    const POOL_SIZE: u32 = 255;
    let pool = common::pool("refcnt_pool", POOL_SIZE);
    let original_bytes = common::frame(7, 128);
    let original = common::mbufs_from_frames(pool, std::slice::from_ref(&original_bytes))[0];
    // SAFETY: `original` is ours; each reference taken below is dropped by
    // exactly one free; clone/copy results are checked for NULL.
    unsafe {
        // Flooding to 3 ports: 2 extra references, then 3 frees (as 3 TX would do).
        assert_eq!(sys::headroom_shim_mbuf_refcnt_read(original), 1);
        sys::headroom_shim_pktmbuf_refcnt_update(original, 2);
        assert_eq!(sys::headroom_shim_mbuf_refcnt_read(original), 3);
        sys::headroom_shim_pktmbuf_free(original);
        sys::headroom_shim_pktmbuf_free(original);
        assert_eq!(sys::headroom_shim_mbuf_refcnt_read(original), 1);
        assert_eq!(common::pool_counts(pool).1, 1);

        // clone: an indirect mbuf sharing the original's data buffer.
        let clone = sys::rte_pktmbuf_clone(original, pool);
        assert!(!clone.is_null());
        assert_eq!(
            sys::headroom_shim_pktmbuf_mtod(clone),
            sys::headroom_shim_pktmbuf_mtod(original)
        );
        assert_eq!(sys::headroom_shim_mbuf_refcnt_read(original), 2);
        // copy: a fresh buffer with the same bytes.
        let copy = sys::rte_pktmbuf_copy(original, pool, 0, u32::MAX);
        assert!(!copy.is_null());
        assert_ne!(
            sys::headroom_shim_pktmbuf_mtod(copy),
            sys::headroom_shim_pktmbuf_mtod(original)
        );
        assert_eq!(common::mbuf_bytes(copy), original_bytes);
        assert_eq!(common::mbuf_bytes(clone), original_bytes);
        assert_eq!(common::pool_counts(pool).1, 3);

        let mut all = [clone, copy, original];
        common::free_all(&mut all);
    }
    assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));
    // SAFETY: no mbuf of this pool is referenced any more.
    unsafe { sys::rte_mempool_free(pool) };
}

#[test]
fn alloc_bulk_fails_cleanly_when_the_pool_is_exhausted() {
    let _serial = setup();
    const POOL_SIZE: u32 = 63;
    let pool = common::pool("exhaust_pool", POOL_SIZE);
    let mut mbufs = vec![std::ptr::null_mut::<sys::rte_mbuf>(); POOL_SIZE as usize + 1];
    // SAFETY: the vector has room for the requested counts.
    unsafe {
        // One more than the pool holds: all-or-nothing failure.
        assert_ne!(
            sys::headroom_shim_pktmbuf_alloc_bulk(pool, mbufs.as_mut_ptr(), POOL_SIZE + 1),
            0
        );
        assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));
        assert_eq!(
            sys::headroom_shim_pktmbuf_alloc_bulk(pool, mbufs.as_mut_ptr(), POOL_SIZE),
            0
        );
        assert_eq!(common::pool_counts(pool), (0, POOL_SIZE));
        assert!(sys::headroom_shim_pktmbuf_alloc(pool).is_null());
    }
    common::free_all(&mut mbufs[..POOL_SIZE as usize]);
    assert_eq!(common::pool_counts(pool), (POOL_SIZE, 0));
    // SAFETY: no mbuf of this pool is referenced any more.
    unsafe { sys::rte_mempool_free(pool) };
}

/// Runs on the worker lcore: records the lcore id the shim reports.
extern "C" fn record_lcore_id(arg: *mut c_void) -> c_int {
    // SAFETY: the launcher passes a pointer to an AtomicU32 that outlives
    // the wait for this function.
    let seen = unsafe { &*arg.cast::<AtomicU32>() };
    seen.store(sys::lcore_id(), Ordering::SeqCst);
    42
}

#[test]
fn remote_launch_runs_on_the_worker_lcore() {
    let _serial = setup();
    // SAFETY: EAL is up; these only read EAL's lcore configuration.
    let (count, main, worker) = unsafe {
        (
            sys::rte_lcore_count(),
            sys::rte_get_main_lcore(),
            sys::rte_get_next_lcore(u32::MAX, 1, 0),
        )
    };
    assert_eq!(count, 2, "--lcores=0@0,1@0");
    assert_eq!(main, 0);
    assert_eq!(worker, 1);
    // This libtest thread is not an EAL thread.
    assert_eq!(sys::lcore_id(), sys::LCORE_ID_ANY);

    let seen = AtomicU32::new(u32::MAX - 1);
    // SAFETY: `seen` outlives the launched function: rte_eal_wait_lcore
    // below returns only after it finished.
    let returned = unsafe {
        let arg = std::ptr::from_ref(&seen).cast_mut().cast::<c_void>();
        assert_eq!(
            sys::rte_eal_remote_launch(Some(record_lcore_id), arg, worker),
            0
        );
        sys::rte_eal_wait_lcore(worker)
    };
    assert_eq!(returned, 42);
    assert_eq!(seen.load(Ordering::SeqCst), worker);
}

#[test]
fn tsc_frequency_is_known_after_init() {
    let _serial = setup();
    // SAFETY: valid after EAL init.
    let hz = unsafe { sys::rte_get_tsc_hz() };
    assert!(hz >= 1_000_000, "TSC at {hz} Hz");
    let start = sys::tsc_cycles();
    let mut now = start;
    // Poll (no sleep) until the TSC moved by 1 ms worth of cycles.
    let deadline = std::time::Instant::now() + common::POLL_DEADLINE;
    while now - start < hz / 1000 && std::time::Instant::now() < deadline {
        now = sys::tsc_cycles();
    }
    assert!(
        now - start >= hz / 1000,
        "TSC advanced only {} cycles",
        now - start
    );
}
