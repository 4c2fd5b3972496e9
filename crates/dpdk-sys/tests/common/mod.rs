//! Shared test helpers: one EAL per test process, built frames, polling.
//!
//! cargo runs each `tests/*.rs` file as its own process, and EAL can be
//! initialised only once per process, so each file calls [`eal`] with its
//! own device arguments and all tests of that file share the result.
#![allow(dead_code)] // each test binary uses a different subset

use std::ffi::{c_char, CString};
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use dpdk_sys as sys;

/// How long a test polls a queue for frames that should already be there
/// (ring ports hand frames over synchronously; this only bounds a failure).
pub const POLL_DEADLINE: Duration = Duration::from_secs(2);

/// Initialise EAL once for this process with `--no-huge -m 512`, a file
/// prefix unique to this process, and the given extra arguments (vdevs).
/// Panics (failing the test) if EAL does not come up.
pub fn eal(extra_args: &[&str]) {
    static EAL: OnceLock<Result<(), String>> = OnceLock::new();
    let outcome = EAL.get_or_init(|| {
        let prefix = format!("--file-prefix=headroom-dpdk-sys-{}", std::process::id());
        let mut args: Vec<String> = [
            "headroom-dpdk-sys-test",
            "--no-huge",
            "-m",
            "512",
            "--no-pci",
            "--no-shconf",
            // Two lcores mapped onto CPU 0: a worker for remote-launch tests
            // that works on any machine with at least one CPU.
            "--lcores=0@0,1@0",
            "--log-level=notice",
        ]
        .iter()
        .map(|arg| (*arg).to_owned())
        .collect();
        args.push(prefix);
        args.extend(extra_args.iter().map(|arg| (*arg).to_owned()));
        // rte_eal_init may keep pointers into argv and permutes it: hand it
        // leaked, process-lifetime strings.
        let argv: &'static mut [*mut c_char] = Box::leak(
            args.iter()
                .map(|arg| {
                    CString::new(arg.as_str())
                        .expect("no NUL in EAL args")
                        .into_raw()
                })
                .collect::<Vec<_>>()
                .into_boxed_slice(),
        );
        let argc = i32::try_from(argv.len()).expect("few EAL args");
        let argv_addr = argv.as_mut_ptr() as usize;
        // rte_eal_init makes its calling thread the main lcore and pins it to
        // CPU 0. Run it on a throwaway thread so that every libtest thread is
        // a plain non-EAL thread (lcore id LCORE_ID_ANY, no pinning), whatever
        // order the tests run in.
        let parsed = std::thread::spawn(move || {
            let argv = argv_addr as *mut *mut c_char;
            // SAFETY: argv holds argc valid NUL-terminated strings that live
            // for the rest of the process; this runs once per process.
            unsafe { sys::rte_eal_init(argc, argv) }
        })
        .join()
        .expect("EAL init thread");
        if parsed < 0 {
            Err(format!(
                "rte_eal_init({args:?}) failed: rte_errno {} ({})",
                sys::errno(),
                sys::strerror(sys::errno())
            ))
        } else {
            Ok(())
        }
    });
    if let Err(message) = outcome {
        panic!("{message}");
    }
}

/// DPDK's ethdev and mempool control paths are not documented as
/// thread-safe; libtest runs tests on parallel threads, so tests take this
/// lock around their whole body.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A packet mbuf pool of `count` mbufs with the default 2176-byte buffers
/// (2048 data room + 128 headroom) and a small per-lcore cache.
pub fn pool(name: &str, count: u32) -> *mut sys::rte_mempool {
    let name = CString::new(name).expect("no NUL in pool name");
    // SAFETY: name is a valid C string for the duration of the call; DPDK
    // copies it. EAL is initialised by the caller.
    let pool = unsafe {
        sys::rte_pktmbuf_pool_create(
            name.as_ptr(),
            count,
            32,
            0,
            sys::RTE_MBUF_DEFAULT_BUF_SIZE,
            sys::SOCKET_ID_ANY,
        )
    };
    assert!(
        !pool.is_null(),
        "rte_pktmbuf_pool_create({name:?}, {count}) failed: {}",
        sys::strerror(sys::errno())
    );
    pool
}

/// Configure `port` with one RX and one TX queue (zeroed rte_eth_conf, as C
/// code does), RX buffers from `pool`, and start it.
pub fn configure_and_start(port: u16, pool: *mut sys::rte_mempool) {
    // SAFETY: all-zero is the documented default for rte_eth_conf.
    let conf: sys::rte_eth_conf = unsafe { std::mem::zeroed() };
    let mut rx_descriptors: u16 = 512;
    let mut tx_descriptors: u16 = 512;
    // SAFETY: port is a valid port id (checked by callers via lookups); the
    // pointers passed are to live locals; NULL rx/tx conf means "PMD default".
    unsafe {
        assert_eq!(
            sys::rte_eth_dev_configure(port, 1, 1, &conf),
            0,
            "configure port {port}"
        );
        assert_eq!(
            sys::rte_eth_dev_adjust_nb_rx_tx_desc(port, &mut rx_descriptors, &mut tx_descriptors),
            0
        );
        let socket = u32::try_from(sys::rte_eth_dev_socket_id(port)).unwrap_or(0);
        assert_eq!(
            sys::rte_eth_rx_queue_setup(port, 0, rx_descriptors, socket, std::ptr::null(), pool),
            0,
            "rx queue setup port {port}"
        );
        assert_eq!(
            sys::rte_eth_tx_queue_setup(port, 0, tx_descriptors, socket, std::ptr::null()),
            0,
            "tx queue setup port {port}"
        );
        assert_eq!(sys::rte_eth_dev_start(port), 0, "start port {port}");
    }
}

/// Stop and close `port`, asserting both succeed.
pub fn stop_and_close(port: u16) {
    // SAFETY: port is a valid, started port id.
    unsafe {
        assert_eq!(sys::rte_eth_dev_stop(port), 0, "stop port {port}");
        assert_eq!(sys::rte_eth_dev_close(port), 0, "close port {port}");
    }
}

/// Port id of the ethdev called `name`.
pub fn port_by_name(name: &str) -> u16 {
    let c_name = CString::new(name).expect("no NUL in port name");
    let mut port: u16 = u16::MAX;
    // SAFETY: c_name is a valid C string; port is a live local.
    let rc = unsafe { sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut port) };
    assert_eq!(rc, 0, "no ethdev named {name}: {}", sys::strerror(rc));
    port
}

/// A test frame: broadcast-free unicast Ethernet header with the IEEE 802
/// local experimental EtherType 0x88B5, then a payload that encodes `seq`
/// and the byte position, padded to `len_bytes` (>= 60, the minimum frame
/// without FCS).
pub fn frame(seq: u16, len_bytes: usize) -> Vec<u8> {
    assert!(len_bytes >= 60);
    let mut bytes = Vec::with_capacity(len_bytes);
    bytes.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // dst: locally administered
    bytes.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // src
    bytes.extend_from_slice(&[0x88, 0xB5]);
    bytes.extend_from_slice(&seq.to_be_bytes());
    while bytes.len() < len_bytes {
        let position = bytes.len();
        bytes.push((position as u8) ^ (seq as u8));
    }
    bytes
}

/// Allocate one mbuf per frame and copy the frame in through
/// `headroom_shim_pktmbuf_append` (so data_len and pkt_len are set by DPDK).
pub fn mbufs_from_frames(
    pool: *mut sys::rte_mempool,
    frames: &[Vec<u8>],
) -> Vec<*mut sys::rte_mbuf> {
    let mut mbufs = vec![std::ptr::null_mut::<sys::rte_mbuf>(); frames.len()];
    let count = u32::try_from(mbufs.len()).expect("small burst");
    // SAFETY: mbufs has room for `count` pointers; pool is a live pool.
    let rc = unsafe { sys::headroom_shim_pktmbuf_alloc_bulk(pool, mbufs.as_mut_ptr(), count) };
    assert_eq!(rc, 0, "alloc_bulk of {count} mbufs");
    for (mbuf, bytes) in mbufs.iter().zip(frames) {
        let len = u16::try_from(bytes.len()).expect("frame fits one mbuf");
        // SAFETY: mbuf is a freshly allocated, exclusively owned mbuf; append
        // returns either NULL or a pointer to `len` writable bytes inside it.
        unsafe {
            let data = sys::headroom_shim_pktmbuf_append(*mbuf, len);
            assert!(!data.is_null(), "append {len} bytes");
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), data, bytes.len());
        }
    }
    mbufs
}

/// The bytes of a single-segment mbuf, read through the shim.
pub fn mbuf_bytes(mbuf: *mut sys::rte_mbuf) -> Vec<u8> {
    // SAFETY: mbuf is a valid mbuf owned by the caller; for a single-segment
    // mbuf, mtod points at data_len readable bytes.
    unsafe {
        assert_eq!(sys::headroom_shim_pktmbuf_is_contiguous(mbuf), 1);
        let data = sys::headroom_shim_pktmbuf_mtod(mbuf);
        let len = usize::from(sys::headroom_shim_pktmbuf_data_len(mbuf));
        std::slice::from_raw_parts(data, len).to_vec()
    }
}

/// Transmit all of `mbufs` on queue 0 of `port`, asserting the PMD accepted
/// every one (the PMD then owns them).
pub fn tx_all(port: u16, mbufs: &mut [*mut sys::rte_mbuf]) {
    let count = u16::try_from(mbufs.len()).expect("small burst");
    // SAFETY: mbufs holds `count` valid mbufs owned by us; queue 0 is set up.
    let sent = unsafe { sys::headroom_shim_eth_tx_burst(port, 0, mbufs.as_mut_ptr(), count) };
    assert_eq!(
        sent, count,
        "tx_burst on port {port} accepted {sent} of {count}"
    );
}

/// Poll queue 0 of `port` until `want` mbufs arrived or [`POLL_DEADLINE`]
/// passed; returns what arrived (the caller owns and must free it).
pub fn rx_until(port: u16, want: usize) -> Vec<*mut sys::rte_mbuf> {
    let deadline = Instant::now() + POLL_DEADLINE;
    let mut received = Vec::with_capacity(want);
    let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); 32];
    while received.len() < want && Instant::now() < deadline {
        let room = u16::try_from((want - received.len()).min(burst.len())).expect("<= 32");
        // SAFETY: burst has room for `room` pointers; queue 0 is set up.
        let got = unsafe { sys::headroom_shim_eth_rx_burst(port, 0, burst.as_mut_ptr(), room) };
        received.extend_from_slice(&burst[..usize::from(got)]);
        if got == 0 {
            std::hint::spin_loop();
        }
    }
    received
}

/// One rx_burst on queue 0 of `port`; frees whatever arrived and returns
/// how many that was.
pub fn rx_once(port: u16) -> usize {
    let mut burst = [std::ptr::null_mut::<sys::rte_mbuf>(); 32];
    // SAFETY: burst has room for 32 pointers; queue 0 is set up.
    let got = unsafe { sys::headroom_shim_eth_rx_burst(port, 0, burst.as_mut_ptr(), 32) };
    free_all(&mut burst[..usize::from(got)]);
    usize::from(got)
}

/// Free mbufs with the real (non-inline) `rte_pktmbuf_free_bulk`.
pub fn free_all(mbufs: &mut [*mut sys::rte_mbuf]) {
    let count = u32::try_from(mbufs.len()).expect("small burst");
    // SAFETY: mbufs holds `count` valid mbufs owned by us, none used after.
    unsafe { sys::rte_pktmbuf_free_bulk(mbufs.as_mut_ptr(), count) };
}

/// (available, in use) counts of `pool`.
pub fn pool_counts(pool: *mut sys::rte_mempool) -> (u32, u32) {
    // SAFETY: pool is a live mempool.
    unsafe {
        (
            sys::rte_mempool_avail_count(pool),
            sys::rte_mempool_in_use_count(pool),
        )
    }
}
