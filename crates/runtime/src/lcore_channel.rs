//! The control channel between the control plane and one lcore: a command ring and a reply
//! ring (rtrb, SPSC each way), polled by the lcore between bursts.
//!
//! # Protocol
//!
//! The control plane sends one command at a time and waits, bounded, for its reply. Every
//! command carries a sequence number and its reply carries it back, so a reply that comes after
//! its command timed out (an lcore busy past the deadline) is recognised as stale and discarded
//! by the next request instead of being taken as the answer to it.
//!
//! Memory ordering: a command or reply (an FDB dump is a `Vec`) is a value moved through an
//! rtrb ring, which publishes the slot with a release store of its write index and takes it with
//! an acquire load, so the receiver sees the value whole. Nothing else is shared.

use crate::lcore::{LcoreCommand, LcoreReply};
use std::time::Duration;

/// Commands (and replies) a ring holds. One is outstanding at a time; the rest leaves room for
/// the late replies of requests that timed out.
const CHANNEL_ENTRIES: usize = 4;

/// The lcore's end of its control channel.
#[derive(Debug)]
pub(crate) struct LcoreEnd {
    commands: rtrb::Consumer<(u64, LcoreCommand)>,
    replies: rtrb::Producer<(u64, LcoreReply)>,
}

impl LcoreEnd {
    /// Answers every waiting command with `handle` (the lcore calls this between bursts).
    pub(crate) fn serve(&mut self, mut handle: impl FnMut(LcoreCommand) -> LcoreReply) {
        while let Ok((seq, command)) = self.commands.pop() {
            let reply = handle(command);
            // Full only if the control plane stopped draining late replies; it then no longer
            // waits for this one either.
            let _ = self.replies.push((seq, reply));
        }
    }
}

/// The control plane's end of an lcore's control channel.
#[derive(Debug)]
pub(crate) struct ControlEnd {
    commands: rtrb::Producer<(u64, LcoreCommand)>,
    replies: rtrb::Consumer<(u64, LcoreReply)>,
    last_seq: u64,
}

impl ControlEnd {
    /// Sends `command` and waits up to `timeout` for its reply; `None` if the lcore did not
    /// answer in time (or its command ring is full). Replies to earlier, timed-out requests
    /// are discarded.
    pub(crate) fn request(
        &mut self,
        command: LcoreCommand,
        timeout: Duration,
    ) -> Option<LcoreReply> {
        self.last_seq += 1;
        let seq = self.last_seq;
        if self.commands.push((seq, command)).is_err() {
            return None;
        }
        let deadline = std::time::Instant::now() + timeout;
        loop {
            while let Ok((got, reply)) = self.replies.pop() {
                if got == seq {
                    return Some(reply);
                }
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// A control channel: the control plane's end and the lcore's.
pub(crate) fn channel() -> (ControlEnd, LcoreEnd) {
    let (cmd_tx, cmd_rx) = rtrb::RingBuffer::new(CHANNEL_ENTRIES);
    let (reply_tx, reply_rx) = rtrb::RingBuffer::new(CHANNEL_ENTRIES);
    (
        ControlEnd {
            commands: cmd_tx,
            replies: reply_rx,
            last_seq: 0,
        },
        LcoreEnd {
            commands: cmd_rx,
            replies: reply_tx,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(command: LcoreCommand) -> LcoreReply {
        match command {
            LcoreCommand::DumpFdb => LcoreReply::Fdb(Vec::new()),
            _ => LcoreReply::Done,
        }
    }

    #[test]
    fn a_late_reply_is_not_taken_for_the_next_one() {
        let (mut control, mut lcore) = channel();
        // The lcore is busy: the first request times out.
        assert_eq!(
            control.request(LcoreCommand::DumpFdb, Duration::from_millis(1)),
            None
        );
        let (answered_late, late) = std::sync::mpsc::channel();
        let server = std::thread::spawn(move || {
            // The lcore answers the first request late, then serves until it has answered
            // the next one too.
            lcore.serve(answer);
            answered_late.send(()).unwrap();
            let mut served = 0;
            while served == 0 {
                lcore.serve(|c| {
                    served += 1;
                    answer(c)
                });
                std::thread::yield_now();
            }
        });
        late.recv().unwrap();
        let reply = control.request(LcoreCommand::SetBigRedSwitch(true), Duration::from_secs(60));
        assert_eq!(
            reply,
            Some(LcoreReply::Done),
            "the late FDB dump was taken for the answer"
        );
        server.join().unwrap();
    }

    #[test]
    fn a_full_command_ring_fails_the_request() {
        let (mut control, _lcore) = channel();
        for _ in 0..CHANNEL_ENTRIES {
            assert_eq!(control.request(LcoreCommand::DumpFdb, Duration::ZERO), None);
        }
        // The lcore never answered: the ring is full and the request fails at once.
        assert_eq!(
            control.request(LcoreCommand::DumpFdb, Duration::from_secs(60)),
            None
        );
    }
}
