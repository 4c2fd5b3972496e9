//! The one error type of the DPDK backend.
//!
//! Every variant says what was attempted and why it failed in words a user can act on; DPDK's own
//! error codes (negative errno values) are kept and rendered with `rte_strerror`.

use std::fmt;

/// Why an EAL, mempool or port operation failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DpdkError {
    /// An EAL argument cannot be passed to DPDK (a NUL byte, or application arguments after `--`).
    InvalidEalArgument {
        /// The offending argument.
        argument: String,
        /// Why it is refused.
        reason: &'static str,
    },
    /// `rte_eal_init` failed. The EAL log on stderr says why; `rte_errno` is not reliable after a
    /// failed init (it reads 0 on a file-prefix collision), so it is only a hint.
    EalInitFailed {
        /// The full argument vector handed to DPDK (`argv[0]` included).
        args: Vec<String>,
        /// `rte_errno` after the failure, as text.
        errno_hint: String,
    },
    /// EAL is already running with different arguments; it can run only once per process.
    EalAlreadyRunning {
        /// The arguments EAL was started with.
        running_args: Vec<String>,
    },
    /// An earlier `rte_eal_init` in this process failed; DPDK does not support a retry.
    EalFailedEarlier {
        /// The earlier failure.
        earlier: String,
    },
    /// EAL was cleaned up in this process; DPDK does not support initialising it again.
    EalCleanedUp,
    /// `Eal::cleanup` was called while mempools, ports or other `Eal` handles still exist.
    EalInUse {
        /// How many other handles keep EAL alive.
        other_handles: usize,
    },
    /// A mempool's parameters are invalid.
    InvalidMempool {
        /// The pool's name.
        name: String,
        /// What is wrong.
        reason: String,
    },
    /// A mempool does not fit in the EAL memory given with `--no-huge -m <MiB>`.
    MempoolTooLarge {
        /// The pool's name.
        name: String,
        /// Estimated bytes the pool needs.
        needed_bytes: u64,
        /// Bytes already taken by this process's other mempools.
        committed_bytes: u64,
        /// EAL memory (`-m`, 64 MiB without it) in MiB.
        eal_memory_mib: u64,
    },
    /// No port with this name, PCI address or id exists.
    PortNotFound {
        /// What the caller asked for.
        requested: String,
        /// The ports that do exist, by name.
        available: Vec<String>,
    },
    /// The port is already open in this process.
    PortInUse {
        /// The port's id.
        port_id: u16,
    },
    /// The port configuration is invalid for this device.
    InvalidPortConfig {
        /// The port's id.
        port_id: u16,
        /// What is wrong.
        reason: String,
    },
    /// The port's queues were already handed out by `split`.
    AlreadySplit,
    /// A DPDK call failed.
    Call {
        /// The DPDK function.
        call: &'static str,
        /// Port, pool or queue the call was about.
        subject: String,
        /// The negative errno value DPDK returned (or `-rte_errno`).
        code: i32,
        /// `rte_strerror(code)`.
        text: String,
    },
    /// A libc call failed.
    Os {
        /// The libc function.
        call: &'static str,
        /// `errno` as text.
        text: String,
    },
}

const MIB: u64 = 1024 * 1024;

impl fmt::Display for DpdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidEalArgument { argument, reason } => {
                write!(f, "invalid EAL argument {argument:?}: {reason}")
            }
            Self::EalInitFailed { args, errno_hint } => write!(
                f,
                "rte_eal_init failed with arguments {args:?}; see the EAL log above for the cause \
                 (rte_errno, unreliable after a failed init: {errno_hint}). Common causes: another \
                 process uses the same --file-prefix, a --vdev names a missing interface, or the \
                 process lacks CAP_NET_RAW/CAP_NET_ADMIN"
            ),
            Self::EalAlreadyRunning { running_args } => write!(
                f,
                "EAL already runs in this process with arguments {running_args:?}; \
                 it can be initialised only once per process"
            ),
            Self::EalFailedEarlier { earlier } => write!(
                f,
                "EAL initialisation failed earlier in this process and cannot be retried: {earlier}"
            ),
            Self::EalCleanedUp => write!(
                f,
                "EAL was cleaned up in this process; DPDK cannot initialise it again"
            ),
            Self::EalInUse { other_handles } => write!(
                f,
                "EAL cleanup refused: {other_handles} other handle(s) (mempools, ports, Eal clones) \
                 still use it; EAL is cleaned up when the last one is dropped"
            ),
            Self::InvalidMempool { name, reason } => write!(f, "mempool {name:?}: {reason}"),
            Self::MempoolTooLarge {
                name,
                needed_bytes,
                committed_bytes,
                eal_memory_mib,
            } => write!(
                f,
                "mempool {name:?} needs about {} MiB but EAL was started with --no-huge and \
                 -m {eal_memory_mib} MiB ({} MiB already taken by other mempools). Without \
                 hugepages every mbuf with the default 2176-byte data room occupies a whole 4 KiB \
                 page, so a pool of N mbufs needs about N x 4 KiB. Raise -m, use hugepages, or \
                 lower the mbuf count",
                needed_bytes.div_ceil(MIB),
                committed_bytes.div_ceil(MIB),
            ),
            Self::PortNotFound {
                requested,
                available,
            } => write!(
                f,
                "no DPDK port {requested:?} (by name, PCI address or port id); ports found: \
                 {available:?}. Vdevs need --vdev=<name>,... in the EAL arguments, PCI NICs must \
                 be bound to a DPDK-capable driver (vfio-pci) and not excluded by --no-pci"
            ),
            Self::PortInUse { port_id } => {
                write!(f, "DPDK port {port_id} is already open in this process")
            }
            Self::InvalidPortConfig { port_id, reason } => {
                write!(f, "DPDK port {port_id}: {reason}")
            }
            Self::AlreadySplit => write!(f, "the port's queues were already handed out by split()"),
            Self::Call {
                call,
                subject,
                code,
                text,
            } => write!(f, "{call} failed for {subject}: {text} ({code})"),
            Self::Os { call, text } => write!(f, "{call} failed: {text}"),
        }
    }
}

impl std::error::Error for DpdkError {}
