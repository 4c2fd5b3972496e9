//! EAL lifecycle in one process: pinning and restoring the caller's CPU affinity, once per
//! process, cleanup refused while in use, no restart after cleanup; the TSC clock.
#![cfg(feature = "dpdk")]

mod common;

use std::time::{Duration, Instant};

use headroom_dpdk::{current_thread_cpus, DpdkError, Eal, Mempool, TscClock};

/// One test: EAL can start only once per process, and this test ends by cleaning it up.
#[test]
fn eal_starts_once_restores_affinity_refuses_early_cleanup_and_cannot_restart() {
    let args = common::eal_args(&["--vdev=net_null0"]);
    let before = current_thread_cpus().expect("affinity");
    let eal = Eal::init(&args).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(eal.args()[0], "headroom");
    assert_eq!(
        &eal.args()[1..],
        &args[..],
        "our --file-prefix is kept, none added"
    );
    assert_eq!(eal.no_huge_memory_mib(), Some(common::EAL_MEMORY_MIB));
    assert_eq!(eal.caller_cpus(), before);

    // rte_eal_init pinned this thread to the main lcore's CPU.
    let pinned = current_thread_cpus().expect("affinity");
    if before.len() > 1 {
        assert_eq!(
            pinned.len(),
            1,
            "EAL pins the main lcore to one CPU: {pinned:?}"
        );
    } else {
        eprintln!("note: one CPU only ({before:?}); pinning cannot be observed");
    }
    eal.restore_caller_affinity().expect("restore");
    assert_eq!(current_thread_cpus().expect("affinity"), before);

    // Once per process: the same arguments give the same EAL, others are refused.
    let same = Eal::init(&args).expect("same arguments, same EAL");
    let mut other_args = args.clone();
    other_args.push("--vdev=net_null1".to_owned());
    let refused = Eal::init(&other_args).expect_err("other arguments");
    assert!(
        matches!(refused, DpdkError::EalAlreadyRunning { .. }),
        "{refused}"
    );

    // The TSC clock agrees with the OS clock to 5 % over a 50 ms polled interval and never
    // goes backwards.
    let clock = TscClock::new(&eal).expect("TSC clock");
    assert_eq!(clock.hz(), eal.tsc_hz());
    let tsc_start = clock.now();
    let os_start = Instant::now();
    let mut last = tsc_start;
    while os_start.elapsed() < Duration::from_millis(50) {
        let now = clock.now();
        assert!(now >= last, "TSC clock went backwards");
        last = now;
    }
    let os_nanos = os_start.elapsed().as_nanos() as u64;
    let tsc_nanos = clock.now().saturating_nanos_since(tsc_start);
    let error = tsc_nanos.abs_diff(os_nanos);
    assert!(
        error * 20 < os_nanos,
        "TSC {tsc_nanos} ns vs OS {os_nanos} ns over the same interval"
    );

    // Cleanup is refused while a pool and another handle use EAL.
    let pool = Mempool::new(&eal, "eal_pool", 63, 0, 2176).expect("pool");
    let in_use = eal.cleanup().expect_err("a pool and a clone use EAL");
    assert_eq!(in_use, DpdkError::EalInUse { other_handles: 2 });
    drop(pool);
    same.cleanup().expect("the last handle cleans EAL up");
    let restart = Eal::init(&args).expect_err("DPDK cannot restart EAL");
    assert_eq!(restart, DpdkError::EalCleanedUp);
}
