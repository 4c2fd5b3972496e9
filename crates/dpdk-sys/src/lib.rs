//! Raw bindings to the system DPDK (>= 22.11) for headroom.
//!
//! Everything is behind the cargo feature `dpdk` (off by default). Without it
//! this crate is empty, so the workspace builds and tests on machines with no
//! DPDK installed. With it, `build.rs` runs bindgen over the system headers
//! (found with pkg-config) and compiles a small C shim; see README.md for what
//! is bound and the apt packages needed.
//!
//! What the feature provides:
//! - bindgen declarations for an allowlist of EAL, mempool/mbuf, ring and
//!   ethdev functions, types and constants (`rte_*`);
//! - `headroom_shim_*`: real functions wrapping what DPDK only has as static
//!   inline functions, macros or thread-locals (rx/tx burst, mbuf alloc/free,
//!   data pointer, lengths, prepend/append/adj/trim, refcounts, `rte_errno`,
//!   `rte_lcore_id`, `rte_get_tsc_cycles`);
//! - a few safe helpers (`errno`, `lcore_id`, `tsc_cycles`, `strerror`).
//!
//! Everything else is `unsafe` raw FFI; the safe port API lives in the
//! `headroom-dpdk` crate.
#![cfg_attr(not(feature = "dpdk"), forbid(unsafe_code))]

#[cfg(feature = "dpdk")]
mod bindings {
    #![allow(
        non_upper_case_globals,
        non_camel_case_types,
        non_snake_case,
        dead_code,
        unused_qualifications,
        missing_debug_implementations,
        rust_2018_idioms,
        unnecessary_transmutes,
        clippy::all,
        clippy::undocumented_unsafe_blocks
    )]
    include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
}

#[cfg(feature = "dpdk")]
pub use bindings::*;

/// `rte_errno` of the calling thread: the error code of the last failed DPDK
/// call on this thread (a positive errno value).
///
/// Note that after a failed `rte_eal_init` it may read 0 (see dpdk.md).
#[cfg(feature = "dpdk")]
#[must_use]
pub fn errno() -> i32 {
    // SAFETY: reads a thread-local int owned by DPDK; valid at any time, even
    // before rte_eal_init, and from any thread.
    unsafe { headroom_shim_errno() }
}

/// The calling thread's lcore id, or [`LCORE_ID_ANY`] on a thread that EAL
/// did not create or register.
#[cfg(feature = "dpdk")]
#[must_use]
pub fn lcore_id() -> u32 {
    // SAFETY: reads a thread-local unsigned owned by EAL; valid at any time.
    unsafe { headroom_shim_lcore_id() }
}

/// The current TSC value (`rte_get_tsc_cycles`): a cycle counter, not
/// wall-clock time. Divide by `rte_get_tsc_hz()` (valid after EAL init) for
/// seconds.
#[cfg(feature = "dpdk")]
#[must_use]
pub fn tsc_cycles() -> u64 {
    // SAFETY: executes rdtsc; no memory is touched.
    unsafe { headroom_shim_get_tsc_cycles() }
}

/// Human-readable text for a DPDK or libc error code, via `rte_strerror`.
///
/// Accepts either sign: DPDK functions return `-errno`, `rte_errno` holds
/// `+errno`. Allocates; meant for error paths and logs, not the packet path.
#[cfg(feature = "dpdk")]
#[must_use]
pub fn strerror(errnum: i32) -> String {
    let code = errnum.checked_abs().unwrap_or(i32::MAX);
    // SAFETY: rte_strerror accepts any int and returns a non-null,
    // NUL-terminated string, either static or in a thread-local buffer that
    // stays valid until the next rte_strerror call on this thread; it is
    // copied out before returning.
    unsafe {
        let text = rte_strerror(code);
        std::ffi::CStr::from_ptr(text)
            .to_string_lossy()
            .into_owned()
    }
}
