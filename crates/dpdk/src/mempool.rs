//! Packet mbuf pools (`rte_pktmbuf_pool_create`).

use std::ffi::CString;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use dpdk_sys as sys;

use crate::args;
use crate::eal::Eal;
use crate::error::DpdkError;
use crate::mbuf::MbufFrame;

pub use crate::settings::{DEFAULT_DATA_ROOM_BYTES, MBUF_HEADROOM_BYTES};

// The plain copies in `settings` (compiled without DPDK) are DPDK's own values.
const _: () = assert!(DEFAULT_DATA_ROOM_BYTES == sys::RTE_MBUF_DEFAULT_BUF_SIZE);
const _: () = assert!(MBUF_HEADROOM_BYTES == sys::RTE_PKTMBUF_HEADROOM);

/// Longest mempool name DPDK accepts (`RTE_MEMPOOL_NAMESIZE` - 1).
pub const MEMPOOL_NAME_MAX_LEN: usize = 25;

/// A pool of packet mbufs. Cheap to clone (a shared handle); ports keep the pool of their RX
/// queues and of `alloc_frame` alive.
///
/// The pool is freed when the last handle is dropped and every mbuf is back in it. If mbufs are
/// still out at that point ([`MbufFrame`]s alive, or frames stuck in a ring), the pool and EAL
/// are deliberately leaked instead, so that those mbufs never point into freed memory.
#[derive(Clone)]
pub struct Mempool(Arc<MempoolInner>);

struct MempoolInner {
    pool: NonNull<sys::rte_mempool>,
    name: String,
    capacity: u32,
    cache_size: u32,
    data_room_bytes: u16,
    estimated_bytes: u64,
    eal: Eal,
}

// SAFETY: a packet mempool uses DPDK's default multi-producer/multi-consumer ring ops, so
// allocation, freeing and the count queries are safe from any thread; the other fields are
// immutable.
unsafe impl Send for MempoolInner {}
// SAFETY: as above; `&MempoolInner` only gives access to thread-safe DPDK calls.
unsafe impl Sync for MempoolInner {}

impl Mempool {
    /// Creates a pool of `n_mbufs` mbufs with a per-lcore cache of `cache_size` and
    /// `data_room_bytes` of buffer per mbuf, headroom included (DPDK's `data_room_size`;
    /// [`DEFAULT_DATA_ROOM_BYTES`] holds a 2048-byte frame). DPDK pools are most memory-efficient
    /// with `n_mbufs` = 2^k - 1.
    ///
    /// Without hugepages the pool must fit in EAL's fixed `-m` memory: one mbuf of the default
    /// size takes a whole 4 KiB page there, and a pool that obviously does not fit (with the
    /// process's other pools) is refused with [`DpdkError::MempoolTooLarge`] instead of DPDK's
    /// bare ENOMEM. Leave a few MiB for the ports' queues too.
    ///
    /// # Errors
    /// [`DpdkError::InvalidMempool`] for a bad name or size, [`DpdkError::MempoolTooLarge`],
    /// or [`DpdkError::Call`] when DPDK fails.
    pub fn new(
        eal: &Eal,
        name: &str,
        n_mbufs: u32,
        cache_size: u32,
        data_room_bytes: u16,
    ) -> Result<Self, DpdkError> {
        let invalid = |reason: String| DpdkError::InvalidMempool {
            name: name.to_owned(),
            reason,
        };
        if name.is_empty() || name.len() > MEMPOOL_NAME_MAX_LEN || name.contains('\0') {
            return Err(invalid(format!(
                "the name must have 1 to {MEMPOOL_NAME_MAX_LEN} bytes and no NUL"
            )));
        }
        if n_mbufs == 0 {
            return Err(invalid("a pool needs at least one mbuf".to_owned()));
        }
        if data_room_bytes <= MBUF_HEADROOM_BYTES {
            return Err(invalid(format!(
                "data room {data_room_bytes} leaves no room after the {MBUF_HEADROOM_BYTES}-byte \
                 headroom"
            )));
        }
        // DPDK's rule: the cache flush threshold (1.5 x cache) must not exceed the pool.
        if cache_size > sys::RTE_MEMPOOL_CACHE_MAX_SIZE
            || u64::from(cache_size) * 3 / 2 > u64::from(n_mbufs)
        {
            return Err(invalid(format!(
                "cache size {cache_size} must be at most {} and at most n_mbufs / 1.5 ({})",
                sys::RTE_MEMPOOL_CACHE_MAX_SIZE,
                u64::from(n_mbufs) * 2 / 3
            )));
        }
        let estimated_bytes = args::estimated_pool_bytes(n_mbufs, cache_size, data_room_bytes);
        if let Err(committed_bytes) = eal.reserve_pool_bytes(estimated_bytes) {
            return Err(DpdkError::MempoolTooLarge {
                name: name.to_owned(),
                needed_bytes: estimated_bytes,
                committed_bytes,
                eal_memory_mib: eal.no_huge_memory_mib().unwrap_or(0),
            });
        }
        let c_name = CString::new(name).map_err(|_| invalid("NUL in name".to_owned()))?;
        // SAFETY: EAL is initialised (`eal` exists); c_name is a valid C string that DPDK
        // copies.
        let raw = unsafe {
            sys::rte_pktmbuf_pool_create(
                c_name.as_ptr(),
                n_mbufs,
                cache_size,
                0,
                data_room_bytes,
                sys::SOCKET_ID_ANY,
            )
        };
        let Some(pool) = NonNull::new(raw) else {
            let errno = sys::errno();
            eal.release_pool_bytes(estimated_bytes);
            if errno == libc::ENOMEM {
                if let Some(eal_memory_mib) = eal.no_huge_memory_mib() {
                    return Err(DpdkError::MempoolTooLarge {
                        name: name.to_owned(),
                        needed_bytes: estimated_bytes,
                        committed_bytes: eal.committed_pool_bytes(),
                        eal_memory_mib,
                    });
                }
            }
            let text = match errno {
                libc::EEXIST => "a mempool with this name already exists".to_owned(),
                libc::ENOMEM => "not enough hugepage memory".to_owned(),
                _ => sys::strerror(errno),
            };
            return Err(DpdkError::Call {
                call: "rte_pktmbuf_pool_create",
                subject: format!("mempool {name:?} ({n_mbufs} mbufs)"),
                code: -errno,
                text,
            });
        };
        Ok(Self(Arc::new(MempoolInner {
            pool,
            name: name.to_owned(),
            capacity: n_mbufs,
            cache_size,
            data_room_bytes,
            estimated_bytes,
            eal: eal.clone(),
        })))
    }

    /// The pool's name.
    #[must_use]
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// Number of mbufs in the pool.
    #[must_use]
    pub fn capacity(&self) -> u32 {
        self.0.capacity
    }

    /// Mbufs each lcore may keep in its private cache.
    #[must_use]
    pub fn cache_size(&self) -> u32 {
        self.0.cache_size
    }

    /// Mbufs free in the pool right now, per-lcore caches included (`rte_mempool_avail_count`).
    #[must_use]
    pub fn available(&self) -> u32 {
        // SAFETY: the pool is live while this handle exists; the count is thread-safe.
        unsafe { sys::rte_mempool_avail_count(self.0.pool.as_ptr()) }
    }

    /// Mbufs out of the pool right now: held as frames, sitting in NIC RX/TX rings or rings
    /// between ports (`rte_mempool_in_use_count`).
    #[must_use]
    pub fn in_use(&self) -> u32 {
        // SAFETY: as in `available`.
        unsafe { sys::rte_mempool_in_use_count(self.0.pool.as_ptr()) }
    }

    /// Buffer bytes per mbuf, headroom included.
    #[must_use]
    pub fn data_room_bytes(&self) -> u16 {
        self.0.data_room_bytes
    }

    /// Longest frame one mbuf holds after the default headroom.
    #[must_use]
    pub fn max_frame_len(&self) -> usize {
        usize::from(self.0.data_room_bytes - MBUF_HEADROOM_BYTES)
    }

    /// The EAL memory this pool was estimated to take (used for the no-hugepage check).
    #[must_use]
    pub fn estimated_bytes(&self) -> u64 {
        self.0.estimated_bytes
    }

    /// The EAL this pool lives in.
    #[must_use]
    pub fn eal(&self) -> &Eal {
        &self.0.eal
    }

    /// A zeroed frame of `len` bytes, or `None` when the pool is empty or `len` does not fit
    /// one mbuf.
    #[must_use]
    pub fn alloc_frame(&self, len: usize) -> Option<MbufFrame> {
        MbufFrame::alloc_zeroed(self.0.pool, len)
    }

    /// The raw pool, for RX queue setup. Valid while this handle lives.
    pub(crate) fn as_ptr(&self) -> NonNull<sys::rte_mempool> {
        self.0.pool
    }
}

impl fmt::Debug for Mempool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Mempool")
            .field("name", &self.0.name)
            .field("capacity", &self.0.capacity)
            .field("available", &self.available())
            .field("data_room_bytes", &self.0.data_room_bytes)
            .finish()
    }
}

impl Drop for MempoolInner {
    fn drop(&mut self) {
        // SAFETY: the pool is live; no other handle exists (this is the last one).
        let in_use = unsafe { sys::rte_mempool_in_use_count(self.pool.as_ptr()) };
        if in_use == 0 {
            // SAFETY: no handle and no mbuf of this pool exists any more (frames hold an mbuf
            // each, which would count as in use, and ports hold a handle), so nothing can touch
            // the pool after this.
            unsafe { sys::rte_mempool_free(self.pool.as_ptr()) };
            self.eal.release_pool_bytes(self.estimated_bytes);
        } else {
            // Mbufs are still out: freeing the pool (or cleaning EAL up) would leave them
            // dangling. Leak both; the process is most likely exiting anyway.
            tracing::warn!(
                pool = %self.name,
                in_use,
                "mempool dropped with mbufs still out; leaking it and keeping EAL alive"
            );
            std::mem::forget(self.eal.clone());
        }
    }
}
