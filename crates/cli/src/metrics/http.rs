//! The metrics endpoint's HTTP/1.1 server: non-blocking, served from the control loop, bounded
//! in every dimension, so that a hostile or broken client (slowloris, garbage, huge headers,
//! thousands of connections) costs the switch a bounded amount of memory and work and no thread.
//!
//! Each connection carries one request (`Connection: close`; Prometheus reconnects per scrape):
//! its head (request line and headers, parsed by `httparse`) may be at most
//! [`REQUEST_HEAD_BYTES_MAX`] and must arrive within [`REQUEST_DEADLINE`]; its answer must be
//! taken within [`RESPONSE_DEADLINE`]; at most [`CONNECTIONS_MAX`] are open at once. When all
//! are taken, a new connection evicts the oldest one that has not sent its whole head yet
//! (answered 408): a slowloris attacker holding every slot cannot lock scrapers out, since a
//! scraper's head arrives with its connection and is answered in the same poll. Only when every
//! open connection is already being answered is a new one refused (503). `GET` and `HEAD` of `/metrics` (or `/`) are served; anything else
//! gets the status that says why (400, 404, 405, 408, 431, 503).

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// Longest request head (request line and headers) accepted, bytes.
pub(crate) const REQUEST_HEAD_BYTES_MAX: usize = 16 * 1024;

/// A client must have sent its whole request head this long after connecting.
pub(crate) const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// A client must have taken its whole answer this long after it was ready.
pub(crate) const RESPONSE_DEADLINE: Duration = Duration::from_secs(10);

/// Connections open at once.
pub(crate) const CONNECTIONS_MAX: usize = 64;

/// Connections accepted per poll.
const ACCEPTS_PER_POLL: usize = 64;

/// Headers parsed per request (more: 431).
const HEADERS_MAX: usize = 64;

#[derive(Debug)]
struct Connection {
    stream: TcpStream,
    input: Vec<u8>,
    output: Vec<u8>,
    written: usize,
    deadline: Instant,
    /// The answer is queued: write it, then close.
    answered: bool,
    /// The answer is written and our side shut down: discard what the client still sends until
    /// it closes (closing with unread data would reset the connection, and the client could
    /// lose the answer).
    draining: bool,
}

/// What a complete request head asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Metrics { head_only: bool },
    NotFound,
    MethodNotAllowed,
    BadRequest,
    HeadTooLarge,
}

/// Parses a request head; `None` while it is incomplete.
fn route(input: &[u8]) -> Option<Route> {
    let mut headers = [httparse::EMPTY_HEADER; HEADERS_MAX];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(input) {
        Ok(httparse::Status::Partial) => None,
        Err(httparse::Error::TooManyHeaders) => Some(Route::HeadTooLarge),
        Err(_) => Some(Route::BadRequest),
        Ok(httparse::Status::Complete(_)) => {
            let path = request.path.unwrap_or("");
            let path = path.split('?').next().unwrap_or(path);
            let head_only = match request.method {
                Some("GET") => false,
                Some("HEAD") => true,
                _ => return Some(Route::MethodNotAllowed),
            };
            Some(if path == "/metrics" || path == "/" {
                Route::Metrics { head_only }
            } else {
                Route::NotFound
            })
        }
    }
}

fn response(status: &str, content_type: &str, body: &[u8], head_only: bool) -> Vec<u8> {
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        out.extend_from_slice(body);
    }
    out
}

fn text_response(status: &str, body: &str) -> Vec<u8> {
    response(status, "text/plain; charset=utf-8", body.as_bytes(), false)
}

/// The listener and its connections.
#[derive(Debug)]
pub(crate) struct HttpServer {
    listener: TcpListener,
    connections: Vec<Connection>,
    /// Connections refused because [`CONNECTIONS_MAX`] were open.
    pub(crate) refused_busy: u64,
    /// Connections closed because they missed a deadline.
    pub(crate) timed_out: u64,
    /// Incomplete connections closed to make room for a new one.
    pub(crate) evicted: u64,
}

impl HttpServer {
    pub(crate) fn bind(addr: SocketAddr) -> std::io::Result<Self> {
        let listener = TcpListener::bind(addr)?;
        listener.set_nonblocking(true)?;
        Ok(Self {
            listener,
            connections: Vec::new(),
            refused_busy: 0,
            timed_out: 0,
            evicted: 0,
        })
    }

    /// The address it listens on.
    pub(crate) fn local_addr(&self) -> Option<SocketAddr> {
        self.listener.local_addr().ok()
    }

    /// Connections open now.
    pub(crate) fn connections(&self) -> usize {
        self.connections.len()
    }

    /// Accepts, reads, answers (rendering the page at most once per call, and only when a
    /// client asks for it), writes, and closes what is done or late. Never blocks.
    pub(crate) fn serve(&mut self, mut render: impl FnMut() -> String) {
        let now = Instant::now();
        self.accept(now);
        let mut page: Option<String> = None;
        let timed_out = &mut self.timed_out;
        self.connections.retain_mut(|c| {
            if !c.answered {
                let mut chunk = [0u8; 4096];
                loop {
                    match c.stream.read(&mut chunk) {
                        Ok(0) => {
                            // The client closed before a complete head: nothing to answer.
                            if route(&c.input).is_none() {
                                return false;
                            }
                            break;
                        }
                        Ok(n) => {
                            c.input.extend_from_slice(&chunk[..n]);
                            if c.input.len() > REQUEST_HEAD_BYTES_MAX || route(&c.input).is_some() {
                                break;
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                let routed = match route(&c.input) {
                    Some(r) => Some(r),
                    None if c.input.len() > REQUEST_HEAD_BYTES_MAX => Some(Route::HeadTooLarge),
                    None => None,
                };
                c.output = match routed {
                    Some(Route::Metrics { head_only }) => {
                        let body = page.get_or_insert_with(&mut render);
                        response(
                            "200 OK",
                            "text/plain; version=0.0.4; charset=utf-8",
                            body.as_bytes(),
                            head_only,
                        )
                    }
                    Some(Route::NotFound) => {
                        text_response("404 Not Found", "not found: try /metrics\n")
                    }
                    Some(Route::MethodNotAllowed) => {
                        text_response("405 Method Not Allowed", "only GET and HEAD\n")
                    }
                    Some(Route::BadRequest) => {
                        text_response("400 Bad Request", "not an HTTP request\n")
                    }
                    Some(Route::HeadTooLarge) => text_response(
                        "431 Request Header Fields Too Large",
                        "request head longer than 16 KiB or more than 64 headers\n",
                    ),
                    None if now >= c.deadline => {
                        *timed_out += 1;
                        text_response("408 Request Timeout", "no complete request within 5 s\n")
                    }
                    None => return true,
                };
                c.input = Vec::new();
                c.answered = true;
                c.deadline = now + RESPONSE_DEADLINE;
            }
            if now >= c.deadline {
                *timed_out += 1;
                return false;
            }
            if c.draining {
                let mut chunk = [0u8; 4096];
                for _ in 0..16 {
                    match c.stream.read(&mut chunk) {
                        Ok(0) => return false,
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => return false,
                    }
                }
                return true;
            }
            while c.written < c.output.len() {
                match c.stream.write(&c.output[c.written..]) {
                    Ok(0) => return false,
                    Ok(n) => c.written += n,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(_) => return false,
                }
            }
            // All written: no more from us; close once the client has closed too.
            c.output = Vec::new();
            c.draining = c.stream.shutdown(std::net::Shutdown::Write).is_ok();
            c.draining
        });
    }

    fn accept(&mut self, now: Instant) {
        for _ in 0..ACCEPTS_PER_POLL {
            let stream = match self.listener.accept() {
                Ok((s, _)) => s,
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) => {
                    tracing::warn!(error = %e, "metrics endpoint accept failed");
                    break;
                }
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            if self.connections.len() >= CONNECTIONS_MAX {
                let oldest_incomplete = self
                    .connections
                    .iter()
                    .enumerate()
                    .filter(|(_, c)| !c.answered)
                    .min_by_key(|(_, c)| c.deadline)
                    .map(|(i, _)| i);
                let Some(i) = oldest_incomplete else {
                    self.refused_busy += 1;
                    let _ = (&stream).write(&text_response(
                        "503 Service Unavailable",
                        "too many connections to the metrics endpoint\n",
                    ));
                    continue;
                };
                let evicted = self.connections.swap_remove(i);
                self.evicted += 1;
                let _ = (&evicted.stream).write(&text_response(
                    "408 Request Timeout",
                    "evicted: too slow to send a request while others waited\n",
                ));
                // Closing with unread input would reset the connection and the client could
                // lose the 408: take what has arrived (bounded, never blocking) before closing.
                let mut chunk = [0u8; 4096];
                for _ in 0..4 {
                    if !matches!((&evicted.stream).read(&mut chunk), Ok(n) if n > 0) {
                        break;
                    }
                }
            }
            self.connections.push(Connection {
                stream,
                input: Vec::new(),
                output: Vec::new(),
                written: 0,
                deadline: now + REQUEST_DEADLINE,
                answered: false,
                draining: false,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A client whose bytes arrived after the last read but before it was evicted still gets
    /// the whole 408 (a close with unread input would reset the connection instead).
    #[test]
    fn an_evicted_client_with_unread_input_reads_its_408() {
        let mut server = HttpServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = server.local_addr().unwrap();
        let mut first = TcpStream::connect(addr).unwrap();
        server.serve(String::new);
        let mut slow = Vec::new();
        while server.connections() < CONNECTIONS_MAX {
            let mut s = TcpStream::connect(addr).unwrap();
            s.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
            slow.push(s);
            server.serve(String::new);
        }
        // Enough that the server's socket still holds some when it closes; less than its
        // receive buffer, so the write does not block.
        first.write_all(&[b'x'; 8 * 1024]).unwrap();
        first
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        // Over loopback the bytes are in the server's socket when write_all returns.
        let _newcomer = TcpStream::connect(addr).unwrap();
        let evicted_before = server.evicted;
        for _ in 0..1000 {
            server.serve(String::new);
            if server.evicted > evicted_before {
                break;
            }
        }
        assert_eq!(server.evicted, evicted_before + 1, "the oldest was evicted");
        let mut answer = Vec::new();
        let read = first.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(read.is_ok(), "{read:?} after {answer:?}");
        assert!(
            answer.starts_with("HTTP/1.1 408")
                && answer.ends_with("evicted: too slow to send a request while others waited\n"),
            "{answer:?}"
        );
    }

    #[test]
    fn routes_what_prometheus_sends_and_refuses_the_rest() {
        let get = b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain\r\n\r\n";
        assert_eq!(route(get), Some(Route::Metrics { head_only: false }));
        assert_eq!(route(&get[..20]), None, "incomplete");
        assert_eq!(
            route(b"HEAD / HTTP/1.0\r\n\r\n"),
            Some(Route::Metrics { head_only: true })
        );
        assert_eq!(
            route(b"GET /metrics?x=1 HTTP/1.1\r\n\r\n"),
            Some(Route::Metrics { head_only: false })
        );
        assert_eq!(
            route(b"GET /nothing HTTP/1.1\r\n\r\n"),
            Some(Route::NotFound)
        );
        assert_eq!(
            route(b"POST /metrics HTTP/1.1\r\n\r\n"),
            Some(Route::MethodNotAllowed)
        );
        assert_eq!(route(b"\x00\xff garbage\r\n\r\n"), Some(Route::BadRequest));
        let many: String = (0..100).map(|i| format!("X-{i}: y\r\n")).collect();
        assert_eq!(
            route(format!("GET / HTTP/1.1\r\n{many}\r\n").as_bytes()),
            Some(Route::HeadTooLarge)
        );
    }
}
