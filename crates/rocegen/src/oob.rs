//! The out-of-band exchange over TCP, perftest's "Ethernet" data exchange method: the client
//! connects to the server (port 18515 by default), each side tells the other its MAC, RoCE
//! address (IPv4, or the IPv6 GID with `--ipv6`: both sides must use the same family) and, per
//! QP, QPN, first PSN, R_Key and virtual address; the client also says what test to run. At the
//! end each side sends its report to the other.
//!
//! Messages are JSON objects, one per line (`serde_json`), split and decoded by
//! [`MessageReader`] (no I/O: fuzzed as `fuzz/fuzz_targets/rocegen_oob.rs`). A line longer than
//! [`MESSAGE_BYTES_MAX`] is refused, so a broken peer cannot make us buffer without bound.
//!
//! The exchange runs over IPv4 or IPv6, whichever address the client was given, independently
//! of the RoCE family: the server listens on both ([`listen`]: one dual-stack socket on `[::]`,
//! or `0.0.0.0` where the kernel has no IPv6), and IPv4 peers of the dual-stack socket, which
//! the kernel shows as IPv4-mapped IPv6 addresses (`::ffff:a.b.c.d`), are unmapped
//! ([`unmapped`]) before anything uses their address.

use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The version of this exchange; both sides must speak the same.
pub const PROTOCOL_VERSION: u32 = 1;

/// Longest message line accepted.
pub const MESSAGE_BYTES_MAX: usize = 4 << 20;

/// One QP's connection data (perftest prints these as "local address" / "remote address").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QpInfo {
    /// QP number (24 bits).
    pub qpn: u32,
    /// First PSN this side sends (24 bits).
    pub psn: u32,
    /// Remote key of this side's buffer.
    pub rkey: u32,
    /// Virtual address of this side's buffer.
    pub va: u64,
}

/// One side of the connection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// MAC address of the RoCE interface, `aa:bb:cc:dd:ee:ff`.
    pub mac: String,
    /// RoCE address of the interface: IPv4, or IPv6 (the GID) with `--ipv6`. JSON: the address
    /// as text, so an IPv4 endpoint is what it always was.
    pub ip: IpAddr,
    /// The QPs, in order: QP i of the client talks to QP i of the server.
    pub qps: Vec<QpInfo>,
}

/// What the client asks the server to run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestShape {
    /// `write_bw` or `write_lat`.
    pub test: String,
    /// Number of QPs.
    pub qps: usize,
    /// Message sizes, in order (one unless `-a`).
    pub sizes: Vec<u32>,
    /// Iterations per QP and size (iteration mode).
    pub iterations: Option<u64>,
    /// Test duration in seconds (duration mode).
    pub duration_s: Option<f64>,
    /// Path MTU in bytes.
    pub mtu: u32,
    /// Messages posted per QP at once.
    pub tx_depth: usize,
}

/// Everything that crosses the TCP connection.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Message {
    /// Client → server: the test and the client's endpoint.
    Hello {
        /// [`PROTOCOL_VERSION`].
        version: u32,
        /// What to run.
        shape: TestShape,
        /// The client.
        endpoint: Endpoint,
    },
    /// Server → client: the server's endpoint; the server is ready to receive.
    Accept {
        /// The server.
        endpoint: Endpoint,
    },
    /// Either way: the other side refuses or failed.
    Error {
        /// Why.
        reason: String,
    },
    /// Either way: this side finished; its report.
    Done {
        /// The sender's report (the JSON `--json` prints).
        report: serde_json::Value,
    },
}

/// Why the exchange failed.
#[derive(Debug)]
pub enum OobError {
    /// The socket failed.
    Io(io::Error),
    /// The peer closed the connection.
    Closed,
    /// The peer sent something that is not a message.
    Malformed(String),
    /// No message arrived in time.
    Timeout,
}

impl std::fmt::Display for OobError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Io(e) => write!(f, "out-of-band connection: {e}"),
            Self::Closed => f.write_str("the peer closed the out-of-band connection"),
            Self::Malformed(why) => write!(f, "malformed out-of-band message: {why}"),
            Self::Timeout => f.write_str("timed out waiting for the peer"),
        }
    }
}

impl std::error::Error for OobError {}

impl From<io::Error> for OobError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`, how a dual-stack socket shows an
/// IPv4 peer) turned back into the IPv4 address; any other address unchanged.
#[must_use]
pub fn unmapped(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::from((v4, v6.port())),
            // Keeps a link-local address's scope.
            None => addr,
        },
        SocketAddr::V4(_) => addr,
    }
}

/// Which socket [`listen`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ListenFamily {
    /// One IPv6 socket on `[::]` with `IPV6_V6ONLY` off: IPv6 and IPv4 clients.
    DualStack,
    /// IPv4 only, on `0.0.0.0`: the kernel refused the IPv6 socket (IPv6 not built in, or
    /// `ipv6.disable=1`).
    Ipv4Only,
}

/// The server's listening socket on TCP `port` (0: any free port) for clients of either family:
/// one IPv6 socket on `[::]` with `IPV6_V6ONLY` off, so that IPv4 clients arrive on it too (as
/// IPv4-mapped addresses, see [`unmapped`]), whatever `net.ipv6.bindv6only` says; where the kernel
/// refuses that socket, `0.0.0.0`. `SO_REUSEADDR` is on, as for [`TcpListener::bind`].
pub fn listen(port: u16) -> io::Result<(TcpListener, ListenFamily)> {
    match listen_dual_stack(port) {
        Ok(listener) => Ok((listener, ListenFamily::DualStack)),
        Err(v6) => match bind_listener(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)), None) {
            Ok(listener) => Ok((listener, ListenFamily::Ipv4Only)),
            Err(v4) if v4.kind() == v6.kind() => Err(v4),
            Err(v4) => Err(io::Error::new(v4.kind(), format!("{v4} (on [::]: {v6})"))),
        },
    }
}

/// The dual-stack socket of [`listen`].
fn listen_dual_stack(port: u16) -> io::Result<TcpListener> {
    bind_listener(SocketAddr::from((Ipv6Addr::UNSPECIFIED, port)), Some(false))
}

/// A listening TCP socket on `addr`; `only_v6`: `IPV6_V6ONLY` for an IPv6 socket.
fn bind_listener(addr: SocketAddr, only_v6: Option<bool>) -> io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if let Some(only_v6) = only_v6 {
        socket.set_only_v6(only_v6)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(128)?;
    Ok(socket.into())
}

/// The exchange's parser, without I/O: splits a byte stream into lines and decodes each as a
/// [`Message`]. Partial lines are kept across calls; a line longer than [`MESSAGE_BYTES_MAX`] is
/// refused (and the reader is then of no further use: the peer is broken).
#[derive(Debug, Default)]
pub struct MessageReader {
    line: Vec<u8>,
}

impl MessageReader {
    /// Takes bytes from the start of `bytes` up to and including the first newline (or all of
    /// them); returns how many it took and, when they completed a line, its message.
    ///
    /// # Errors
    /// The completed line is not a message, or the line grew past [`MESSAGE_BYTES_MAX`].
    pub fn feed(&mut self, bytes: &[u8]) -> (usize, Option<Result<Message, OobError>>) {
        let (consumed, complete) = match bytes.iter().position(|&b| b == b'\n') {
            Some(end) => {
                self.line.extend_from_slice(&bytes[..end]);
                (end + 1, true)
            }
            None => {
                self.line.extend_from_slice(bytes);
                (bytes.len(), false)
            }
        };
        if self.line.len() > MESSAGE_BYTES_MAX {
            self.line = Vec::new();
            return (
                consumed,
                Some(Err(OobError::Malformed(format!(
                    "message longer than {MESSAGE_BYTES_MAX} bytes"
                )))),
            );
        }
        if !complete {
            return (consumed, None);
        }
        let line = std::mem::take(&mut self.line);
        (
            consumed,
            Some(serde_json::from_slice(&line).map_err(|e| OobError::Malformed(e.to_string()))),
        )
    }

    /// Bytes of an incomplete line held.
    #[must_use]
    pub fn pending(&self) -> usize {
        self.line.len()
    }
}

/// A connected exchange channel.
#[derive(Debug)]
pub struct Oob {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    parser: MessageReader,
}

impl Oob {
    /// Wraps a connected stream.
    pub fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(Self {
            reader: BufReader::new(stream),
            writer,
            parser: MessageReader::default(),
        })
    }

    /// Connects to the first of `servers` (the addresses of the server, in order, as a host name
    /// resolves) that answers, as [`TcpStream::connect`] tries each address; retries a round
    /// that was only refused or unreachable until `timeout` (the server may still be starting,
    /// as when a lab starts both at once). The error is the last address's.
    pub fn connect(servers: &[SocketAddr], timeout: Duration) -> Result<Self, OobError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut last = None;
            let mut retry = false;
            for server in servers {
                match TcpStream::connect_timeout(server, Duration::from_secs(1)) {
                    Ok(stream) => return Ok(Self::new(stream)?),
                    Err(e) => {
                        retry |= matches!(
                            e.kind(),
                            ErrorKind::ConnectionRefused
                                | ErrorKind::TimedOut
                                | ErrorKind::HostUnreachable
                                | ErrorKind::NetworkUnreachable
                        );
                        last = Some(io::Error::new(e.kind(), format!("{server}: {e}")));
                    }
                }
            }
            let Some(last) = last else {
                return Err(OobError::Io(io::Error::new(
                    ErrorKind::InvalidInput,
                    "no server address to connect to",
                )));
            };
            if !(retry && Instant::now() < deadline) {
                return Err(OobError::Io(last));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The stream (for its file descriptor).
    #[must_use]
    pub fn stream(&self) -> &TcpStream {
        &self.writer
    }

    /// Our address on the connection, [`unmapped`].
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.writer.local_addr().map(unmapped)
    }

    /// The peer's address on the connection, [`unmapped`].
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.writer.peer_addr().map(unmapped)
    }

    /// Sends one message (blocking; messages are small).
    pub fn send(&mut self, message: &Message) -> Result<(), OobError> {
        let mut bytes =
            serde_json::to_vec(message).map_err(|e| OobError::Malformed(e.to_string()))?;
        bytes.push(b'\n');
        self.writer.set_nonblocking(false)?;
        self.writer.write_all(&bytes)?;
        self.writer.flush()?;
        Ok(())
    }

    /// Waits up to `timeout` for the next message.
    pub fn recv(&mut self, timeout: Duration) -> Result<Message, OobError> {
        self.writer.set_nonblocking(false)?;
        self.reader
            .get_ref()
            .set_read_timeout(Some(timeout.max(Duration::from_millis(1))))?;
        let result = self.read_line();
        self.reader.get_ref().set_read_timeout(None)?;
        match result {
            Err(OobError::Io(e))
                if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) =>
            {
                Err(OobError::Timeout)
            }
            other => other.and_then(|line| line.ok_or(OobError::Closed)),
        }
    }

    /// The next message if a whole one has arrived; never blocks.
    pub fn try_recv(&mut self) -> Result<Option<Message>, OobError> {
        self.writer.set_nonblocking(true)?;
        let result = self.read_line();
        self.writer.set_nonblocking(false)?;
        match result {
            Ok(Some(message)) => Ok(Some(message)),
            Ok(None) => Err(OobError::Closed),
            Err(OobError::Io(e)) if e.kind() == ErrorKind::WouldBlock => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Reads until a newline; partial lines stay buffered across calls. `Ok(None)` at EOF.
    fn read_line(&mut self) -> Result<Option<Message>, OobError> {
        loop {
            let available = match self.reader.fill_buf() {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(OobError::Io(e)),
            };
            if available.is_empty() {
                return Ok(None);
            }
            let (consumed, message) = self.parser.feed(available);
            self.reader.consume(consumed);
            if let Some(message) = message {
                return message.map(Some);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn messages_cross_a_tcp_connection_in_pieces() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let client = std::thread::spawn(move || {
            let mut oob = Oob::connect(&[addr], Duration::from_secs(5)).unwrap();
            let hello = Message::Hello {
                version: PROTOCOL_VERSION,
                shape: TestShape {
                    test: "write_bw".into(),
                    qps: 2,
                    sizes: vec![65536],
                    iterations: Some(10),
                    duration_s: None,
                    mtu: 1024,
                    tx_depth: 128,
                },
                endpoint: Endpoint {
                    mac: "02:00:00:00:00:01".into(),
                    ip: IpAddr::from([10, 0, 0, 1]),
                    qps: vec![QpInfo {
                        qpn: 0x11,
                        psn: 0x22,
                        rkey: 0x33,
                        va: 0x44,
                    }],
                },
            };
            oob.send(&hello).unwrap();
            let reply = oob.recv(Duration::from_secs(5)).unwrap();
            (hello, reply)
        });
        let (stream, _) = listener.accept().unwrap();
        let mut server = Oob::new(stream).unwrap();
        let got = server.recv(Duration::from_secs(5)).unwrap();
        assert!(matches!(got, Message::Hello { version: 1, .. }));
        // Nothing more has arrived: try_recv does not block.
        assert_eq!(server.try_recv().unwrap(), None);
        server
            .send(&Message::Error {
                reason: "no".into(),
            })
            .unwrap();
        let (hello, reply) = client.join().unwrap();
        assert_eq!(got, hello);
        assert_eq!(
            reply,
            Message::Error {
                reason: "no".into()
            }
        );
        // The client is gone: EOF.
        assert!(matches!(
            server.recv(Duration::from_secs(5)),
            Err(OobError::Closed)
        ));
    }

    #[test]
    fn garbage_is_refused() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let writer = std::thread::spawn(move || {
            let mut stream = TcpStream::connect(addr).unwrap();
            stream.write_all(b"{\"type\":\"nonsense\"}\n").unwrap();
        });
        let (stream, _) = listener.accept().unwrap();
        let mut oob = Oob::new(stream).unwrap();
        assert!(matches!(
            oob.recv(Duration::from_secs(5)),
            Err(OobError::Malformed(_))
        ));
        writer.join().unwrap();
    }

    #[test]
    fn mapped_addresses_are_unmapped() {
        let mapped: SocketAddr = "[::ffff:10.0.0.2]:18515".parse().unwrap();
        assert_eq!(unmapped(mapped), "10.0.0.2:18515".parse().unwrap());
        for same in ["10.0.0.2:1", "[fd00::2]:1", "[::1]:1", "[fe80::1%3]:1"] {
            let addr: SocketAddr = same.parse().unwrap();
            assert_eq!(unmapped(addr), addr);
        }
    }

    /// A client connected to `listener` at `to`, and the accepted end: (client, server).
    fn connect_pair(listener: &TcpListener, to: SocketAddr) -> (Oob, Oob) {
        let client = Oob::connect(&[to], Duration::from_secs(5)).unwrap();
        let (stream, _) = listener.accept().unwrap();
        (client, Oob::new(stream).unwrap())
    }

    #[test]
    fn the_listener_takes_ipv4_and_ipv6_clients() {
        let (listener, family) = listen(0).unwrap();
        assert_eq!(family, ListenFamily::DualStack);
        let local = listener.local_addr().unwrap();
        assert_eq!(local.ip(), IpAddr::from(Ipv6Addr::UNSPECIFIED));
        let port = local.port();
        // An IPv4 client: the kernel shows it as ::ffff:127.0.0.1, we as 127.0.0.1.
        let (client, server) = connect_pair(&listener, SocketAddr::from(([127, 0, 0, 1], port)));
        assert!(server.stream().peer_addr().unwrap().ip().is_ipv6());
        assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
        assert_eq!(
            server.peer_addr().unwrap().ip(),
            IpAddr::from([127, 0, 0, 1])
        );
        assert_eq!(
            server.local_addr().unwrap(),
            SocketAddr::from(([127, 0, 0, 1], port))
        );
        // An IPv6 client.
        let (client, server) =
            connect_pair(&listener, SocketAddr::from((Ipv6Addr::LOCALHOST, port)));
        assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
        assert_eq!(
            server.local_addr().unwrap().ip(),
            IpAddr::from(Ipv6Addr::LOCALHOST)
        );
        // The client tries each address in order: the first refuses, the second answers.
        let closed = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let client = Oob::connect(
            &[closed, SocketAddr::from((Ipv6Addr::LOCALHOST, port))],
            Duration::ZERO,
        )
        .unwrap();
        assert_eq!(client.peer_addr().unwrap().port(), port);
        // No address: an error, not a panic.
        assert!(matches!(
            Oob::connect(&[], Duration::ZERO),
            Err(OobError::Io(e)) if e.kind() == ErrorKind::InvalidInput
        ));
        // Only refusals, past the deadline: the last address's error, naming it.
        match Oob::connect(&[closed], Duration::ZERO) {
            Err(OobError::Io(e)) => {
                assert_eq!(e.kind(), ErrorKind::ConnectionRefused);
                assert!(e.to_string().contains(&closed.to_string()), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn without_the_ipv6_socket_the_listener_falls_back_to_ipv4() {
        // [::]:P taken by an IPv6-only listener: the dual-stack socket cannot bind, 0.0.0.0:P can.
        let holder =
            bind_listener(SocketAddr::from((Ipv6Addr::UNSPECIFIED, 0)), Some(true)).unwrap();
        let port = holder.local_addr().unwrap().port();
        let (listener, family) = listen(port).unwrap();
        assert_eq!(family, ListenFamily::Ipv4Only);
        assert_eq!(
            listener.local_addr().unwrap(),
            SocketAddr::from((Ipv4Addr::UNSPECIFIED, port))
        );
        let (client, server) = connect_pair(&listener, SocketAddr::from(([127, 0, 0, 1], port)));
        assert_eq!(server.peer_addr().unwrap(), client.local_addr().unwrap());
        // Both taken: the error says so, for both sockets.
        let error = listen(port).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::AddrInUse);
    }
}
