//! The out-of-band exchange over TCP, perftest's "Ethernet" data exchange method: the client
//! connects to the server (port 18515 by default), each side tells the other its MAC, RoCE
//! address (IPv4, or the IPv6 GID with `--ipv6`: both sides must use the same family) and, per
//! QP, QPN, first PSN, R_Key and virtual address; the client also says what test to run. At the
//! end each side sends its report to the other.
//!
//! Messages are JSON objects, one per line (`serde_json`). A line longer than
//! [`MESSAGE_BYTES_MAX`] is refused, so a broken peer cannot make us buffer without bound.

use std::io::{self, BufRead, BufReader, ErrorKind, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
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

/// A connected exchange channel.
#[derive(Debug)]
pub struct Oob {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    line: Vec<u8>,
}

impl Oob {
    /// Wraps a connected stream.
    pub fn new(stream: TcpStream) -> io::Result<Self> {
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(Self {
            reader: BufReader::new(stream),
            writer,
            line: Vec::new(),
        })
    }

    /// Connects to `server`, retrying refused connections until `timeout` (the server may still be
    /// starting, as when a lab starts both at once).
    pub fn connect(server: SocketAddr, timeout: Duration) -> Result<Self, OobError> {
        let deadline = Instant::now() + timeout;
        loop {
            match TcpStream::connect_timeout(&server, Duration::from_secs(1)) {
                Ok(stream) => return Ok(Self::new(stream)?),
                Err(e)
                    if Instant::now() < deadline
                        && matches!(
                            e.kind(),
                            ErrorKind::ConnectionRefused
                                | ErrorKind::TimedOut
                                | ErrorKind::HostUnreachable
                                | ErrorKind::NetworkUnreachable
                        ) =>
                {
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => return Err(OobError::Io(e)),
            }
        }
    }

    /// The stream (for its addresses and its file descriptor).
    #[must_use]
    pub fn stream(&self) -> &TcpStream {
        &self.writer
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
            let (consumed, complete) = match available.iter().position(|&b| b == b'\n') {
                Some(end) => {
                    self.line.extend_from_slice(&available[..end]);
                    (end + 1, true)
                }
                None => {
                    self.line.extend_from_slice(available);
                    (available.len(), false)
                }
            };
            self.reader.consume(consumed);
            if self.line.len() > MESSAGE_BYTES_MAX {
                return Err(OobError::Malformed(format!(
                    "message longer than {MESSAGE_BYTES_MAX} bytes"
                )));
            }
            if complete {
                let line = std::mem::take(&mut self.line);
                return serde_json::from_slice(&line)
                    .map(Some)
                    .map_err(|e| OobError::Malformed(e.to_string()));
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
            let mut oob = Oob::connect(addr, Duration::from_secs(5)).unwrap();
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
}
