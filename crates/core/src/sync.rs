//! The atomics every cross-thread protocol of the core is built from, in one place so that the
//! loom model checker can stand in for them.
//!
//! Under `--cfg loom` (only `scripts/test.sh`'s loom step builds that way) these are
//! `loom::sync::atomic`'s types, which record every load, store and fence so that loom can run
//! the model-checked protocols (`src/loom_checks.rs`) under every interleaving and every value a
//! weak-memory CPU may return; otherwise they are `core::sync::atomic`'s, at no cost. Which
//! ordering each protocol uses, and why it suffices, is written next to it and summed up in
//! `docs/ARCHITECTURE.md` ("Where the two sides meet") and `docs/memory-ordering.md`.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicU8, Ordering};

/// Reads back a word that only the calling thread writes: its own last store.
///
/// Normally a relaxed load (coherence returns the thread's own last store, since nobody else
/// stores to the word). Under loom, a read-modify-write that adds nothing, which returns the
/// same value and orders nothing more (relaxed), but which loom counts as a write: loom keeps
/// only the last access of each atomic to decide which interleavings to try, so a load followed
/// by a store of the same word by one thread hides another thread's earlier load of it, and loom
/// would never try running that load after the store (it then checks a single interleaving).
/// With this the writer's access is one loom sees conflict with the reader's load.
#[inline]
pub(crate) fn load_own(word: &AtomicU64) -> u64 {
    #[cfg(not(loom))]
    return word.load(Ordering::Relaxed);
    #[cfg(loom)]
    return word.fetch_add(0, Ordering::Relaxed);
}

/// Tells the CPU (or, under loom, the model checker) that this thread waits for another one.
#[inline]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    // Loom must know that the thread cannot progress until another does, or it would explore
    // the spin forever.
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// The bounded single-producer single-consumer ring of the FDB learn rings (`fdb_sync`).
///
/// Normally rtrb's. rtrb's own atomics are not loom's, so under `--cfg loom` a ring with the
/// same contract stands in for it, one that loom can see: FIFO, bounded, a push into a full
/// ring hands the value back, a pop of an empty ring says so, and a popped value is seen whole
/// (rtrb: a release store of the write index after the slot is written, an acquire load of it
/// before the slot is read; here a lock, which gives the pop the same happens-before edge). What
/// loom then checks is the learn-ring protocol built on top (`loom_checks::fdb_sync`), not
/// rtrb, whose correctness is rtrb's.
pub(crate) mod spsc {
    #[cfg(not(loom))]
    pub(crate) use rtrb::{Consumer, Producer, RingBuffer};

    #[cfg(loom)]
    pub(crate) use model::{Consumer, Producer, RingBuffer};

    #[cfg(loom)]
    mod model {
        use loom::sync::{Arc, Mutex};
        use std::collections::VecDeque;

        #[derive(Debug)]
        struct Ring<T> {
            capacity: usize,
            slots: Mutex<VecDeque<T>>,
        }

        /// Makes rings (rtrb's `RingBuffer::new`).
        #[derive(Debug)]
        pub(crate) struct RingBuffer;

        impl RingBuffer {
            /// A ring of `capacity` slots: its producer and its consumer.
            // The shape of rtrb's `RingBuffer::new`, which the learn rings call.
            #[allow(clippy::new_ret_no_self)]
            pub(crate) fn new<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
                let ring = Arc::new(Ring {
                    capacity,
                    slots: Mutex::new(VecDeque::with_capacity(capacity)),
                });
                (
                    Producer {
                        ring: Arc::clone(&ring),
                    },
                    Consumer { ring },
                )
            }
        }

        /// The pushing end.
        #[derive(Debug)]
        pub(crate) struct Producer<T> {
            ring: Arc<Ring<T>>,
        }

        impl<T> Producer<T> {
            /// Appends `value`, or hands it back if the ring is full.
            pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
                let mut slots = self.ring.slots.lock().unwrap_or_else(|e| e.into_inner());
                if slots.len() == self.ring.capacity {
                    return Err(value);
                }
                slots.push_back(value);
                Ok(())
            }
        }

        /// The popping end.
        #[derive(Debug)]
        pub(crate) struct Consumer<T> {
            ring: Arc<Ring<T>>,
        }

        impl<T> Consumer<T> {
            /// Takes the oldest value, if any.
            pub(crate) fn pop(&mut self) -> Result<T, ()> {
                let mut slots = self.ring.slots.lock().unwrap_or_else(|e| e.into_inner());
                slots.pop_front().ok_or(())
            }

            /// Whether the ring holds nothing (rtrb's `Consumer::is_empty`).
            pub(crate) fn is_empty(&self) -> bool {
                let slots = self.ring.slots.lock().unwrap_or_else(|e| e.into_inner());
                slots.is_empty()
            }
        }
    }
}
