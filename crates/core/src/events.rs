//! Events the dataplane reports to operators: PFC watchdog storms and PFC storm-rate alarms.
//!
//! Events are structured records pushed by an lcore into a bounded lock-free queue and drained
//! by the control plane, which logs them (with SONiC's wording for watchdog lines). When the
//! queue is full, the event is counted as lost rather than blocking the dataplane.

use crate::counters::Counter;
use crate::params::WatchdogAction;
use crate::time::Instant;
use crate::types::{PortId, Priority, QueueIndex};
use crossbeam_queue::ArrayQueue;

/// Events a log holds before it starts losing them.
pub const EVENT_LOG_CAPACITY: usize = 1024;

/// Something an operator should know about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The PFC watchdog declared a queue stormed.
    StormDetected {
        /// Port.
        port: PortId,
        /// Queue index.
        queue: QueueIndex,
        /// The action now in force.
        action: WatchdogAction,
        /// When.
        at: Instant,
    },
    /// The PFC watchdog restored a queue.
    StormRestored {
        /// Port.
        port: PortId,
        /// Queue index.
        queue: QueueIndex,
        /// When.
        at: Instant,
    },
    /// PFC frames for a priority arrive faster than the configured alarm rate.
    PfcRateHigh {
        /// Port the frames arrive on.
        port: PortId,
        /// Priority.
        priority: Priority,
        /// Frames counted in the last second.
        frames_per_second: u64,
        /// When.
        at: Instant,
    },
    /// The PFC rate of a priority fell back below the alarm rate.
    PfcRateNormal {
        /// Port.
        port: PortId,
        /// Priority.
        priority: Priority,
        /// When.
        at: Instant,
    },
}

/// A bounded queue of events from one side.
#[derive(Debug)]
pub struct EventLog {
    queue: ArrayQueue<Event>,
    /// Events dropped because the queue was full.
    pub lost: Counter,
}

impl Default for EventLog {
    fn default() -> Self {
        Self {
            queue: ArrayQueue::new(EVENT_LOG_CAPACITY),
            lost: Counter::default(),
        }
    }
}

impl EventLog {
    /// Records an event (the producing side only).
    pub fn push(&self, event: Event) {
        if self.queue.push(event).is_err() {
            self.lost.inc();
        }
    }

    /// Takes the oldest event (the control plane).
    pub fn pop(&self) -> Option<Event> {
        self.queue.pop()
    }
}
