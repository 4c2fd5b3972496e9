//! The control socket's connections, served without ever blocking the control loop.
//!
//! Every connection is non-blocking and bounded: its request line may be at most
//! [`REQUEST_BYTES_MAX`] bytes and must arrive within [`REQUEST_DEADLINE`]; its response must be
//! taken within [`RESPONSE_DEADLINE`]; at most [`CLIENTS_MAX`] connections are open at once
//! (more are answered "busy" and closed). Each [`Clients::poll`] does a bounded amount of work
//! (accepts, bytes read per connection, requests served), so that slow, silent, oversized or
//! numerous clients cost each other and the dataplane nothing but their share of that work.
//!
//! Only the socket's owner may use it: the socket file is mode 0600, and each connection's peer
//! credentials (`SO_PEERCRED`) are checked against the process's effective uid (root is always
//! allowed), so that a socket whose mode was loosened by hand still serves nobody else.

use crate::protocol::Response;
use std::io::{self, ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Longest request line accepted, newline excluded.
pub const REQUEST_BYTES_MAX: usize = 64 * 1024;

/// A client must have sent its whole request line this long after connecting.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// A client must have taken its whole response this long after it was ready.
pub const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);

/// Connections open at once (reading a request or writing a response); more are refused.
pub const CLIENTS_MAX: usize = 256;

/// Connections accepted per poll.
const ACCEPTS_PER_POLL: usize = 64;

/// Bytes read from one connection per poll (a 1 MiB line is refused after 64 KiB anyway).
const READ_BYTES_PER_POLL: usize = 2 * REQUEST_BYTES_MAX;

/// What a connection is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for its request line.
    Reading,
    /// Its request is complete and waits to be served.
    Ready,
    /// Writing its response; then closed.
    Writing,
}

/// One connection to the control socket.
#[derive(Debug)]
pub(crate) struct Client {
    pub(crate) stream: UnixStream,
    input: Vec<u8>,
    /// Bytes of `input` already searched for a newline.
    scanned: usize,
    output: Vec<u8>,
    written: usize,
    deadline: Instant,
    phase: Phase,
    /// Keep reading (and discarding) what the client sends until it closes, so that a client
    /// still writing an oversized request reads our answer instead of a reset.
    discard_input: bool,
    input_closed: bool,
    /// When its request line was complete.
    pub(crate) ready_at: Instant,
}

impl Client {
    fn new(stream: UnixStream, now: Instant) -> Self {
        Self {
            stream,
            input: Vec::new(),
            scanned: 0,
            output: Vec::new(),
            written: 0,
            deadline: now + REQUEST_DEADLINE,
            phase: Phase::Reading,
            discard_input: false,
            input_closed: false,
            ready_at: now,
        }
    }

    /// Queues `response` and switches to writing it.
    pub(crate) fn respond(&mut self, response: &Response, now: Instant) {
        self.output.clear();
        self.written = 0;
        append_line(&mut self.output, response);
        self.phase = Phase::Writing;
        self.deadline = now + RESPONSE_DEADLINE;
    }

    /// The request line, if complete (without its newline).
    fn take_line(&mut self) -> Option<Vec<u8>> {
        if self.phase != Phase::Ready {
            return None;
        }
        let mut line = std::mem::take(&mut self.input);
        if let Some(end) = line.iter().position(|&b| b == b'\n') {
            line.truncate(end);
        }
        self.scanned = 0;
        Some(line)
    }

    /// Reads what has arrived; moves to `Ready` on a newline (or on end of input after some
    /// bytes), or answers and closes on an oversized line.
    fn read(&mut self, now: Instant) -> io::Result<()> {
        let mut chunk = [0u8; 4096];
        let mut budget = READ_BYTES_PER_POLL;
        while budget > 0 && !self.input_closed {
            let n = match (&self.stream).read(&mut chunk) {
                Ok(0) => {
                    self.input_closed = true;
                    break;
                }
                Ok(n) => n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            budget = budget.saturating_sub(n);
            if self.discard_input || self.phase != Phase::Reading {
                continue;
            }
            self.input.extend_from_slice(&chunk[..n]);
            if self.input[self.scanned..].contains(&b'\n') {
                self.phase = Phase::Ready;
                self.ready_at = now;
                continue;
            }
            self.scanned = self.input.len();
            if self.input.len() > REQUEST_BYTES_MAX {
                self.input = Vec::new();
                self.discard_input = true;
                self.respond(
                    &Response::error(format!(
                        "request refused: longer than {REQUEST_BYTES_MAX} bytes without a newline"
                    )),
                    now,
                );
            }
        }
        if self.input_closed && self.phase == Phase::Reading && !self.input.is_empty() {
            // A client that half-closed after an unterminated line: that line is its request.
            self.phase = Phase::Ready;
            self.ready_at = now;
        }
        Ok(())
    }

    /// Writes what the socket takes. `Ok(true)` when the response is all written.
    fn write(&mut self) -> io::Result<bool> {
        while self.written < self.output.len() {
            match (&self.stream).write(&self.output[self.written..]) {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => self.written += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }
}

fn append_line(out: &mut Vec<u8>, response: &Response) {
    match serde_json::to_writer(&mut *out, response) {
        Ok(()) => {}
        Err(e) => {
            out.clear();
            let _ = serde_json::to_writer(
                &mut *out,
                &Response::error(format!("cannot encode the response: {e}")),
            );
        }
    }
    out.push(b'\n');
}

/// Who may use the control socket: the effective uid of this process, and root.
fn peer_allowed(stream: &UnixStream) -> Result<(), String> {
    let own = rustix::process::geteuid();
    match rustix::net::sockopt::socket_peercred(stream) {
        Ok(cred) if cred.uid == own || cred.uid.is_root() => Ok(()),
        Ok(cred) => Err(if own.is_root() {
            format!(
                "permission denied: run as root (this switch's control socket serves its owner, \
                 root; you are uid {})",
                cred.uid.as_raw()
            )
        } else {
            format!(
                "permission denied: this switch's control socket serves uid {} only (you are \
                 uid {})",
                own.as_raw(),
                cred.uid.as_raw()
            )
        }),
        Err(e) => Err(format!(
            "permission denied: cannot read the peer's credentials: {e}"
        )),
    }
}

/// Every open connection of the control socket.
#[derive(Debug, Default)]
pub(crate) struct Clients {
    open: Vec<Client>,
    /// Connections refused because [`CLIENTS_MAX`] were open.
    pub(crate) refused_busy: u64,
    /// Connections refused by the peer credential check.
    pub(crate) refused_peer: u64,
    /// Connections closed because their request or response missed its deadline.
    pub(crate) timed_out: u64,
    /// Requests refused as longer than [`REQUEST_BYTES_MAX`].
    pub(crate) oversized: u64,
}

impl Clients {
    /// Connections open now.
    pub(crate) fn len(&self) -> usize {
        self.open.len()
    }

    /// Accepts new connections, reads requests, writes responses, closes what is done or late.
    /// Returns the connections whose request is complete, at most `max`, for the caller to
    /// serve (and give back with [`Clients::push`] once answered).
    pub(crate) fn poll(
        &mut self,
        listener: &UnixListener,
        max: usize,
        accept: bool,
    ) -> Vec<(Client, Vec<u8>)> {
        let now = Instant::now();
        if accept {
            self.accept(listener, now);
        }
        let mut ready = Vec::new();
        let mut i = 0;
        while i < self.open.len() {
            let c = &mut self.open[i];
            let keep = match c.phase {
                Phase::Reading | Phase::Ready => match c.read(now) {
                    Err(_) => false,
                    Ok(()) if c.phase == Phase::Writing => {
                        // Refused while reading (oversized).
                        self.oversized += 1;
                        true
                    }
                    Ok(()) if c.phase == Phase::Reading && now >= c.deadline => {
                        self.timed_out += 1;
                        c.discard_input = true;
                        c.respond(
                            &Response::error(format!(
                                "request refused: no complete request line within {} s",
                                REQUEST_DEADLINE.as_secs()
                            )),
                            now,
                        );
                        true
                    }
                    Ok(()) if c.phase == Phase::Reading && c.input_closed => false,
                    Ok(()) => true,
                },
                Phase::Writing => {
                    if c.discard_input && !c.input_closed {
                        // Keep taking what it sends, so that it can finish and read our answer.
                        let _ = c.read(now);
                    }
                    true
                }
            };
            if !keep {
                self.open.swap_remove(i);
                continue;
            }
            let c = &mut self.open[i];
            if c.phase == Phase::Ready && ready.len() < max {
                let mut client = self.open.swap_remove(i);
                if let Some(line) = client.take_line() {
                    ready.push((client, line));
                }
                continue;
            }
            i += 1;
        }
        self.write_all(now);
        ready
    }

    /// Takes a served connection back (with its response queued).
    pub(crate) fn push(&mut self, mut client: Client) {
        // Try at once: most responses fit in the socket buffer, and the client is waiting.
        match client.write() {
            Ok(true) if !client.discard_input || client.input_closed => {}
            Ok(_) => self.open.push(client),
            Err(_) => {}
        }
    }

    fn accept(&mut self, listener: &UnixListener, now: Instant) {
        for _ in 0..ACCEPTS_PER_POLL {
            let stream = match listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(error = %e, "control socket accept failed");
                    break;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.open.len() >= CLIENTS_MAX {
                // One attempt, no buffering: an empty socket buffer takes one short line.
                self.refused_busy += 1;
                let mut out = Vec::new();
                append_line(
                    &mut out,
                    &Response::error(format!(
                        "busy: {CLIENTS_MAX} control connections are open; try again"
                    )),
                );
                let _ = (&stream).write(&out);
                continue;
            }
            let mut client = Client::new(stream, now);
            if let Err(why) = peer_allowed(&client.stream) {
                self.refused_peer += 1;
                tracing::warn!("control socket: {why}");
                client.discard_input = true;
                client.respond(&Response::error(why), now);
            }
            self.open.push(client);
        }
    }

    fn write_all(&mut self, now: Instant) {
        let timed_out = &mut self.timed_out;
        self.open.retain_mut(|c| {
            if c.phase != Phase::Writing {
                return true;
            }
            if now >= c.deadline {
                *timed_out += 1;
                return false;
            }
            match c.write() {
                // Done; a client we are discarding input from is closed once it closes.
                Ok(true) => c.discard_input && !c.input_closed,
                Ok(false) => true,
                Err(_) => false,
            }
        });
    }
}
