//! The log lines of the dataplane's events.
//!
//! Watchdog lines are SONiC's sentences word for word (`sonic-buffer-model.md` §4.5,
//! orchagent's `pfcactionhandler.cpp`), which sonic-mgmt and operators match on:
//!
//! ```text
//! PFC Watchdog detected PFC storm on port Ethernet0, queue index 3, queue id 0x15000000000003 and port id 0x1000000000000.
//! PFC Watchdog storm restored on port Ethernet0, queue index 3, queue id 0x15000000000003 and port id 0x1000000000000.
//! ```
//!
//! headroom has no SAI object ids; it prints ids shaped like the ones SONiC's virtual switch
//! SAI hands out, the object type in bits 48–55 above an index ([`sai_port_id`],
//! [`sai_queue_id`]): stable for a configuration, distinct per port and queue.
//!
//! Every line carries the event's time as wall-clock time (`at`, RFC 3339 UTC, and
//! `at_unix_ns`): the core reports monotonic instants ([`headroom_core::time::Instant`]) and
//! the runtime maps them with [`MonotonicClock::wall_time`] when it logs, so that a storm lines
//! up with the frames of a capture (whose records carry wall-clock time too).

use crate::clock::MonotonicClock;
use headroom_core::events::Event;
use headroom_core::params::WatchdogAction;
use headroom_core::shared::Shared;
use headroom_core::time::Instant;
use headroom_core::types::{PortId, PRIORITY_COUNT};
use std::time::{SystemTime, UNIX_EPOCH};

/// SAI's object type of a port (`SAI_OBJECT_TYPE_PORT`, saitypes.h).
const SAI_OBJECT_TYPE_PORT: u64 = 1;
/// SAI's object type of a queue (`SAI_OBJECT_TYPE_QUEUE`).
const SAI_OBJECT_TYPE_QUEUE: u64 = 21;

/// The id printed as a port's "port id": its index under SAI's port object type.
#[must_use]
pub fn sai_port_id(port: usize) -> u64 {
    (SAI_OBJECT_TYPE_PORT << 48) | port as u64
}

/// The id printed as a queue's "queue id": port index × 8 + queue index under SAI's queue
/// object type.
#[must_use]
pub fn sai_queue_id(port: usize, queue: usize) -> u64 {
    (SAI_OBJECT_TYPE_QUEUE << 48) | (port * PRIORITY_COUNT + queue) as u64
}

/// SONiC's line for a storm the watchdog detected.
#[must_use]
pub fn storm_detected_line(port_name: &str, port: usize, queue: usize) -> String {
    format!(
        "PFC Watchdog detected PFC storm on port {port_name}, queue index {queue}, queue id {:#x} and port id {:#x}.",
        sai_queue_id(port, queue),
        sai_port_id(port)
    )
}

/// SONiC's line for a storm the watchdog restored.
#[must_use]
pub fn storm_restored_line(port_name: &str, port: usize, queue: usize) -> String {
    format!(
        "PFC Watchdog storm restored on port {port_name}, queue index {queue}, queue id {:#x} and port id {:#x}.",
        sai_queue_id(port, queue),
        sai_port_id(port)
    )
}

/// An event as it is logged.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventLine {
    /// Logged as a warning (else as information).
    pub warning: bool,
    /// The sentence.
    pub message: String,
    /// The port's name.
    pub port: String,
    /// Queue (watchdog) or priority (storm-rate alarm).
    pub index: u8,
    /// The watchdog's action, for a detected storm.
    pub action: Option<&'static str>,
    /// When it happened, wall clock.
    pub at: SystemTime,
}

impl EventLine {
    /// `at` in RFC 3339, UTC, nanoseconds.
    #[must_use]
    pub fn at_rfc3339(&self) -> String {
        humantime::format_rfc3339_nanos(self.at).to_string()
    }

    /// `at` in nanoseconds since the Unix epoch.
    #[must_use]
    pub fn at_unix_ns(&self) -> u64 {
        self.at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }
}

fn action_name(action: WatchdogAction) -> &'static str {
    match action {
        WatchdogAction::Drop => "drop",
        WatchdogAction::Forward => "forward",
        WatchdogAction::Alert => "alert",
    }
}

/// What [`log_event`] writes for `event` of the dataplane `shared`, whose instants are
/// `clock`'s.
#[must_use]
pub fn render(shared: &Shared, clock: &MonotonicClock, event: &Event) -> EventLine {
    let name = |p: PortId| {
        shared
            .params
            .ports
            .get(p.index())
            .map_or_else(|| p.to_string(), |x| x.name.clone())
    };
    let wall = |at: Instant| clock.wall_time(at);
    match *event {
        Event::StormDetected {
            port,
            queue,
            action,
            at,
        } => EventLine {
            warning: true,
            message: storm_detected_line(&name(port), port.index(), queue.index()),
            port: name(port),
            index: queue.get(),
            action: Some(action_name(action)),
            at: wall(at),
        },
        Event::StormRestored { port, queue, at } => EventLine {
            warning: true,
            message: storm_restored_line(&name(port), port.index(), queue.index()),
            port: name(port),
            index: queue.get(),
            action: None,
            at: wall(at),
        },
        Event::PfcRateHigh {
            port,
            priority,
            frames_per_second,
            at,
        } => EventLine {
            warning: true,
            message: format!(
                "PFC storm rate alarm on port {}, priority {}: {} PFC frames/s.",
                name(port),
                priority.get(),
                frames_per_second
            ),
            port: name(port),
            index: priority.get(),
            action: None,
            at: wall(at),
        },
        Event::PfcRateNormal { port, priority, at } => EventLine {
            warning: false,
            message: format!(
                "PFC storm rate back to normal on port {}, priority {}.",
                name(port),
                priority.get()
            ),
            port: name(port),
            index: priority.get(),
            action: None,
            at: wall(at),
        },
    }
}

/// Logs one event through `tracing` (see the module documentation).
pub fn log_event(shared: &Shared, clock: &MonotonicClock, event: &Event) {
    let line = render(shared, clock, event);
    let at = line.at_rfc3339();
    let at_unix_ns = line.at_unix_ns();
    let action = line.action.unwrap_or("");
    if line.warning {
        tracing::warn!(port = %line.port, index = line.index, action, at, at_unix_ns, "{}", line.message);
    } else {
        tracing::info!(port = %line.port, index = line.index, at, at_unix_ns, "{}", line.message);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchdog_lines_are_sonics_sentences() {
        assert_eq!(
            storm_detected_line("Ethernet4", 1, 3),
            "PFC Watchdog detected PFC storm on port Ethernet4, queue index 3, \
             queue id 0x1500000000000b and port id 0x1000000000001."
        );
        assert_eq!(
            storm_restored_line("Ethernet4", 1, 3),
            "PFC Watchdog storm restored on port Ethernet4, queue index 3, \
             queue id 0x1500000000000b and port id 0x1000000000001."
        );
        // Distinct per port and per queue.
        assert_eq!(sai_queue_id(1, 0), sai_queue_id(0, 7) + 1);
        assert_ne!(sai_port_id(0), sai_port_id(1));
    }

    #[test]
    fn an_event_is_logged_with_the_port_name_and_its_wall_clock_time() {
        use headroom_core::frame::HeapFrame;
        use headroom_core::params::presets;
        use headroom_core::step::LcoreStep;
        use headroom_core::types::QueueIndex;
        use std::time::Duration;
        let clock = MonotonicClock::new();
        let step = LcoreStep::<HeapFrame>::single(presets::simple(2, 10_000_000_000), clock.now())
            .expect("valid parameters");
        let shared = step.shared();
        // Half a second ago on the dataplane's clock (it starts at 1 s, so that exists).
        let at = Instant::from_nanos(clock.now().as_nanos() - 500_000_000);
        let line = render(
            shared,
            &clock,
            &Event::StormDetected {
                port: PortId(1),
                queue: QueueIndex::from_low_bits(3),
                action: WatchdogAction::Drop,
                at,
            },
        );
        let name = &shared.params.ports[1].name;
        assert_eq!(line.message, storm_detected_line(name, 1, 3));
        assert_eq!((line.port.as_str(), line.index), (name.as_str(), 3));
        assert_eq!(line.action, Some("drop"));
        let ago = SystemTime::now().duration_since(line.at).unwrap();
        assert!(
            ago > Duration::from_millis(250) && ago < Duration::from_millis(750),
            "{ago:?}"
        );
        assert!(line.at_rfc3339().ends_with('Z'), "{}", line.at_rfc3339());
        assert_eq!(
            line.at_unix_ns(),
            u64::try_from(line.at.duration_since(UNIX_EPOCH).unwrap().as_nanos()).unwrap()
        );
    }
}
