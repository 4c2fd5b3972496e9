//! The DPDK environment abstraction layer (EAL): started once per process.

use std::ffi::{c_char, c_int, CString};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use dpdk_sys as sys;

use crate::args;
use crate::error::DpdkError;

/// A handle on the running EAL. Cheap to clone; mempools and ports hold one, so EAL is cleaned
/// up (`rte_eal_cleanup`) only when the last handle is dropped or [`Eal::cleanup`] is called on
/// it.
///
/// EAL runs once per process: a second [`Eal::init`] with the same arguments returns the same
/// EAL, with other arguments it fails ([`DpdkError::EalAlreadyRunning`]), and after cleanup or a
/// failed init it fails too (DPDK supports neither).
#[derive(Clone)]
pub struct Eal(Arc<EalInner>);

struct EalInner {
    user_args: Vec<String>,
    args: Vec<String>,
    caller_affinity: Option<CpuSet>,
    no_huge_memory_mib: Option<u64>,
    /// Sum of [`args::estimated_pool_bytes`] over live mempools.
    pool_bytes_committed: AtomicU64,
    cleaned_up: AtomicBool,
}

enum EalState {
    Uninitialised,
    Running(Weak<EalInner>),
    Failed(String),
    CleanedUp,
}

static EAL_STATE: Mutex<EalState> = Mutex::new(EalState::Uninitialised);

fn lock_state() -> std::sync::MutexGuard<'static, EalState> {
    EAL_STATE.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Eal {
    /// Starts EAL with `args` as a user writes them for `dpdk-testpmd` (without the program
    /// name and without `--`), for example
    /// `["--no-huge", "-m", "1024", "--no-pci", "--vdev=net_af_packet0,iface=veth0"]`, or
    /// `["-l", "0-3", "-a", "0000:3b:00.0"]` on a machine with hugepages and a NIC bound to
    /// vfio-pci.
    ///
    /// - `argv[0]` is [`args::PROGRAM_NAME`].
    /// - Without `--file-prefix`, `--file-prefix=headroom-<pid>` is added, so that two headroom
    ///   processes never collide on DPDK's runtime directory. Pass your own unique prefix if
    ///   other DPDK tools (`dpdk-proc-info`) must attach.
    /// - `rte_eal_init` pins the calling thread to the main lcore's CPUs, and threads spawned
    ///   from it afterwards inherit that. The affinity the thread had before is saved:
    ///   [`Eal::restore_caller_affinity`] puts it back ([`Eal::init_unpinned`] does both).
    /// - EAL installs no SIGINT/SIGTERM handler; the application installs its own.
    ///
    /// # Errors
    /// [`DpdkError::InvalidEalArgument`], [`DpdkError::EalInitFailed`] (the EAL log on stderr
    /// has the cause), or one of the once-per-process errors above.
    pub fn init(args: &[String]) -> Result<Self, DpdkError> {
        // Never drop an `Arc<EalInner>` while holding the state lock: its Drop takes the lock.
        let existing = {
            let state = lock_state();
            match &*state {
                EalState::Uninitialised => None,
                EalState::Running(weak) => match weak.upgrade() {
                    Some(inner) => Some(inner),
                    // The last handle is being dropped right now: EAL is being cleaned up.
                    None => return Err(DpdkError::EalCleanedUp),
                },
                EalState::Failed(earlier) => {
                    return Err(DpdkError::EalFailedEarlier {
                        earlier: earlier.clone(),
                    })
                }
                EalState::CleanedUp => return Err(DpdkError::EalCleanedUp),
            }
        };
        if let Some(inner) = existing {
            if inner.user_args == args {
                return Ok(Self(inner));
            }
            return Err(DpdkError::EalAlreadyRunning {
                running_args: inner.args.clone(),
            });
        }
        let mut state = lock_state();
        if !matches!(*state, EalState::Uninitialised) {
            // Another thread initialised EAL between the two locks: start over.
            drop(state);
            return Self::init(args);
        }
        let effective = args::effective_eal_args(args, std::process::id())?;
        let caller_affinity = CpuSet::of_current_thread().ok();
        // rte_eal_init keeps pointers into argv (and permutes it), so it gets leaked,
        // process-lifetime strings; this happens once per process.
        let argv: &'static mut [*mut c_char] = Box::leak(
            effective
                .iter()
                .map(|arg| {
                    CString::new(arg.as_str())
                        .map(CString::into_raw)
                        .map_err(|_| DpdkError::InvalidEalArgument {
                            argument: arg.clone(),
                            reason: "contains a NUL byte",
                        })
                })
                .collect::<Result<Vec<_>, _>>()?
                .into_boxed_slice(),
        );
        let argc = c_int::try_from(argv.len()).map_err(|_| DpdkError::InvalidEalArgument {
            argument: format!("{} arguments", argv.len()),
            reason: "too many arguments",
        })?;
        // SAFETY: argv holds argc valid NUL-terminated strings that live for the rest of the
        // process; the state lock guarantees this runs at most once per process.
        let parsed = unsafe { sys::rte_eal_init(argc, argv.as_mut_ptr()) };
        if parsed < 0 {
            let error = DpdkError::EalInitFailed {
                args: effective,
                errno_hint: format!("{} ({})", sys::errno(), sys::strerror(sys::errno())),
            };
            *state = EalState::Failed(error.to_string());
            return Err(error);
        }
        let argc_parsed = usize::try_from(parsed).unwrap_or(0) + 1;
        if argc_parsed < argv.len() {
            // EAL stops at (and getopt moves to the end) arguments that are not options; they
            // would be silently ignored, so refuse them. EAL is up at this point and cannot be
            // started again, so it is cleaned up and the process must restart.
            let ignored: Vec<String> = argv[argc_parsed..]
                .iter()
                .map(|&arg| {
                    // SAFETY: every argv entry is one of the leaked CStrings above (rte_eal_init
                    // only permutes the pointer array).
                    unsafe { std::ffi::CStr::from_ptr(arg) }
                        .to_string_lossy()
                        .into_owned()
                })
                .collect();
            // SAFETY: EAL was initialised above and nothing of ours uses it yet.
            unsafe { sys::rte_eal_cleanup() };
            let error = DpdkError::InvalidEalArgument {
                argument: ignored.join(" "),
                reason: "not an EAL option (EAL would have ignored it); check for a missing '=' \
                         or a stray value",
            };
            *state = EalState::Failed(error.to_string());
            return Err(error);
        }
        let inner = Arc::new(EalInner {
            user_args: args.to_vec(),
            no_huge_memory_mib: args::no_huge_memory_mib(&effective),
            args: effective,
            caller_affinity,
            pool_bytes_committed: AtomicU64::new(0),
            cleaned_up: AtomicBool::new(false),
        });
        *state = EalState::Running(Arc::downgrade(&inner));
        Ok(Self(inner))
    }

    /// [`Eal::init`], then [`Eal::restore_caller_affinity`]: the calling thread keeps the CPUs
    /// it had (useful when it is a control thread that spawns others).
    ///
    /// # Errors
    /// As [`Eal::init`] and [`Eal::restore_caller_affinity`].
    pub fn init_unpinned(args: &[String]) -> Result<Self, DpdkError> {
        let eal = Self::init(args)?;
        eal.restore_caller_affinity()?;
        Ok(eal)
    }

    /// Sets the calling thread's CPU affinity to what the thread that called [`Eal::init`] had
    /// before `rte_eal_init` pinned it. Call it on that thread to undo the pinning, or on any
    /// thread that should run on the original CPUs. Does nothing if the affinity could not be
    /// read at init.
    ///
    /// # Errors
    /// [`DpdkError::Os`] if `sched_setaffinity` fails.
    pub fn restore_caller_affinity(&self) -> Result<(), DpdkError> {
        match &self.0.caller_affinity {
            Some(set) => set.apply_to_current_thread(),
            None => Ok(()),
        }
    }

    /// CPUs the thread calling [`Eal::init`] could run on before EAL pinned it (empty if
    /// unknown).
    #[must_use]
    pub fn caller_cpus(&self) -> Vec<usize> {
        self.0
            .caller_affinity
            .as_ref()
            .map(CpuSet::cpus)
            .unwrap_or_default()
    }

    /// The full argument vector EAL was started with (`argv[0]` and an added `--file-prefix`
    /// included).
    #[must_use]
    pub fn args(&self) -> &[String] {
        &self.0.args
    }

    /// EAL memory in MiB when running without hugepages (`-m`, 64 by default); `None` with
    /// hugepages.
    #[must_use]
    pub fn no_huge_memory_mib(&self) -> Option<u64> {
        self.0.no_huge_memory_mib
    }

    /// Number of lcores EAL runs (`-l`/`--lcores`), main lcore included.
    #[must_use]
    pub fn lcore_count(&self) -> u32 {
        // SAFETY: EAL is initialised (this handle exists); reads EAL's lcore config.
        unsafe { sys::rte_lcore_count() }
    }

    /// The main lcore's id.
    #[must_use]
    pub fn main_lcore(&self) -> u32 {
        // SAFETY: EAL is initialised; reads EAL's lcore config.
        unsafe { sys::rte_get_main_lcore() }
    }

    /// TSC ticks per second as EAL measured them at init.
    #[must_use]
    pub fn tsc_hz(&self) -> u64 {
        // SAFETY: EAL is initialised; reads a value EAL computed at init.
        unsafe { sys::rte_get_tsc_hz() }
    }

    /// Cleans EAL up now (`rte_eal_cleanup`) if this is the last handle. DPDK cannot start EAL
    /// again in this process afterwards.
    ///
    /// # Errors
    /// [`DpdkError::EalInUse`] while mempools, ports or clones still hold EAL (it is then
    /// cleaned up when the last of them is dropped); [`DpdkError::Call`] if the cleanup fails.
    pub fn cleanup(self) -> Result<(), DpdkError> {
        let others = Arc::strong_count(&self.0) - 1;
        match Arc::try_unwrap(self.0) {
            Ok(inner) => {
                let result = inner.cleanup_now();
                drop(inner);
                result
            }
            Err(_still_shared) => Err(DpdkError::EalInUse {
                other_handles: others,
            }),
        }
    }

    /// Registers the calling thread with EAL as a non-EAL lcore (`rte_thread_register`) and
    /// returns its new lcore id. A registered thread gets a per-lcore mempool cache, so mbuf
    /// alloc/free mostly stay in that cache instead of going to the pool's shared ring (a
    /// compare-and-swap per operation). Returns the current id if the thread already has one
    /// (an EAL lcore, or registered before). Undo with [`Eal::unregister_current_thread`]
    /// before the thread ends, so that the lcore id can be reused.
    ///
    /// Cost (DPDK's documented limitation): a primary process that registered a thread cannot
    /// be joined by secondary processes (`dpdk-proc-info`, `dpdk-pdump`).
    ///
    /// # Errors
    /// [`DpdkError::Call`] when no lcore id is free (`RTE_MAX_LCORE` = 128 minus the EAL
    /// lcores) or EAL refuses.
    pub fn register_current_thread(&self) -> Result<u32, DpdkError> {
        let current = sys::lcore_id();
        if current != sys::LCORE_ID_ANY {
            return Ok(current);
        }
        // SAFETY: EAL is initialised (this handle exists); registers only the calling thread.
        let rc = unsafe { rte_thread_register() };
        let lcore = sys::lcore_id();
        if rc != 0 || lcore == sys::LCORE_ID_ANY {
            let errno = sys::errno();
            return Err(DpdkError::Call {
                call: "rte_thread_register",
                subject: "the calling thread".to_owned(),
                code: -errno,
                text: format!(
                    "{} (no free lcore id: RTE_MAX_LCORE is {}, minus the EAL lcores)",
                    sys::strerror(errno),
                    args::MAX_LCORE
                ),
            });
        }
        Ok(lcore)
    }

    /// Releases the lcore id of a thread registered with [`Eal::register_current_thread`]
    /// (`rte_thread_unregister`). Mbufs left in that lcore's mempool cache stay there and are
    /// still counted as available; the next thread given the id uses them.
    pub fn unregister_current_thread(&self) {
        // SAFETY: EAL is initialised; unregistering an unregistered thread is a no-op.
        unsafe { rte_thread_unregister() };
    }

    /// Reserves `bytes` of the no-hugepage memory budget for a mempool, or says how much is
    /// already taken when they do not fit.
    pub(crate) fn reserve_pool_bytes(&self, bytes: u64) -> Result<(), u64> {
        let Some(memory_mib) = self.0.no_huge_memory_mib else {
            return Ok(());
        };
        let limit = memory_mib.saturating_mul(1024 * 1024);
        self.0
            .pool_bytes_committed
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |committed| {
                let total = committed.checked_add(bytes)?;
                (total <= limit).then_some(total)
            })
            .map(|_| ())
    }

    /// Returns `bytes` reserved with [`Eal::reserve_pool_bytes`].
    pub(crate) fn release_pool_bytes(&self, bytes: u64) {
        if self.0.no_huge_memory_mib.is_some() {
            self.0
                .pool_bytes_committed
                .fetch_sub(bytes, Ordering::AcqRel);
        }
    }

    /// Bytes of the no-hugepage memory budget taken by live mempools.
    #[must_use]
    pub fn committed_pool_bytes(&self) -> u64 {
        self.0.pool_bytes_committed.load(Ordering::Acquire)
    }
}

impl fmt::Debug for Eal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Eal")
            .field("args", &self.0.args)
            .field("no_huge_memory_mib", &self.0.no_huge_memory_mib)
            .field("caller_cpus", &self.caller_cpus())
            .finish()
    }
}

impl EalInner {
    fn cleanup_now(&self) -> Result<(), DpdkError> {
        if self.cleaned_up.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // SAFETY: no handle on EAL is left (this is the last reference being consumed or
        // dropped), so no mempool, port or mbuf of ours refers to EAL memory any more: mempools
        // with mbufs still out keep an EAL handle forever instead of being freed.
        let rc = unsafe { sys::rte_eal_cleanup() };
        *lock_state() = EalState::CleanedUp;
        if rc < 0 {
            return Err(DpdkError::Call {
                call: "rte_eal_cleanup",
                subject: "EAL".to_owned(),
                code: rc,
                text: sys::strerror(rc),
            });
        }
        Ok(())
    }
}

impl Drop for EalInner {
    fn drop(&mut self) {
        // Errors cannot be reported from Drop; the explicit `Eal::cleanup` reports them.
        let _ = self.cleanup_now();
    }
}

// Not in dpdk-sys's allowlist; stable API of librte_eal since DPDK 20.11 (rte_lcore.h).
extern "C" {
    fn rte_thread_register() -> c_int;
    fn rte_thread_unregister();
}

/// A thread's CPU affinity mask.
#[derive(Clone)]
struct CpuSet(libc::cpu_set_t);

impl CpuSet {
    fn of_current_thread() -> Result<Self, DpdkError> {
        // SAFETY: cpu_set_t is a plain bit array; all-zero is a valid empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; set is a live, correctly sized cpu_set_t.
        let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut set) };
        if rc != 0 {
            return Err(DpdkError::Os {
                call: "sched_getaffinity",
                text: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(Self(set))
    }

    fn apply_to_current_thread(&self) -> Result<(), DpdkError> {
        // SAFETY: pid 0 is the calling thread; the set is a valid cpu_set_t read by the kernel.
        let rc = unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), &self.0) };
        if rc != 0 {
            return Err(DpdkError::Os {
                call: "sched_setaffinity",
                text: std::io::Error::last_os_error().to_string(),
            });
        }
        Ok(())
    }

    fn cpus(&self) -> Vec<usize> {
        let max_cpus = 8 * size_of::<libc::cpu_set_t>();
        // SAFETY: CPU_ISSET only reads the bit array; every index is below its capacity.
        (0..max_cpus)
            .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &self.0) })
            .collect()
    }
}

/// The CPUs the calling thread may run on (for tests and diagnostics).
///
/// # Errors
/// [`DpdkError::Os`] if `sched_getaffinity` fails.
pub fn current_thread_cpus() -> Result<Vec<usize>, DpdkError> {
    CpuSet::of_current_thread().map(|set| set.cpus())
}
