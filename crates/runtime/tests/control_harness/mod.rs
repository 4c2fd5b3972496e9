//! An in-process switch on memory ports with its control plane, for the `control_*` tests (and
//! the CLI's `tooling_*` tests, which include this file by path).
//!
//! The test thread plays `headroom run`'s main loop: it calls [`ControlPlane::poll`] and applies
//! reconfigurations the same way (stop, restart on fresh ports, `applied`), while a client
//! thread talks to the socket. Frames go in and out through the memory ports' taps.
#![allow(dead_code)] // Each test file uses a different part.

use etherparse::PacketBuilder;
use headroom_config::Config;
use headroom_core::frame::Frame;
use headroom_io::pool::FramePool;
use headroom_io::{MemoryBackend, MemoryTap};
use headroom_runtime::backends::frame_pool_config;
use headroom_runtime::control::{ControlAction, ControlPlane, Retired};
use headroom_runtime::protocol::{CaptureRequest, Request, Response, Show};
use headroom_runtime::{start, Running, RuntimeSpec};
use serde::de::DeserializeOwned;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long any wait in these tests may take before it fails.
pub const DEADLINE: Duration = Duration::from_secs(20);

/// Station A, behind Ethernet0.
pub const A: [u8; 6] = [2, 0, 0, 0, 0, 0xa];
/// Station C, behind Ethernet4.
pub const C: [u8; 6] = [2, 0, 0, 0, 0, 0xc];

/// The standard test switch: two 10G ports with SONiC's defaults (PFC on 3 and 4, lossless
/// PGs/queues 3-4, watchdog on), memory driver, plus `extra` TOML.
pub fn config_text(extra: &str) -> String {
    format!(
        "[switch]\nname = \"ctltest\"\ndriver = \"memory\"\n\n\
         [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
         [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n{extra}"
    )
}

/// A running in-process switch and its control plane.
pub struct Switch {
    /// Holds the socket, the configuration file and the snapshots.
    pub dir: tempfile::TempDir,
    /// The configuration file.
    pub config_path: PathBuf,
    /// The control socket.
    pub socket: PathBuf,
    /// The control plane under test.
    pub control: ControlPlane,
    running: Option<Running>,
    backend: MemoryBackend,
    /// Test-side ends of each port, in port order (replaced on every reconfiguration).
    pub taps: Vec<MemoryTap>,
    /// Reconfigurations applied.
    pub restarts: usize,
    /// Every event the dataplanes reported, as `headroom run` logs it.
    pub events: Vec<headroom_runtime::event_log::EventLine>,
}

fn backend_for(config: &Config) -> MemoryBackend {
    let pool = FramePool::new(frame_pool_config(config)).expect("frame pool");
    MemoryBackend::new(pool, 1024)
}

impl Switch {
    /// Writes `text` (plus a `[runtime]` table pointing the control socket into a temporary
    /// directory) to a file, and starts it. Without an `[lldp]` table in `text` the LLDP agent
    /// is off (`enabled = false`), so that the tests that count what a port sends do not see
    /// its LLDPDUs.
    pub fn start(text: &str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let socket = dir.path().join("ctl.sock");
        let lldp = if text.contains("[lldp]") {
            ""
        } else {
            "\n[lldp]\nenabled = false\n"
        };
        let text = format!(
            "{text}{lldp}\n[runtime]\ncontrol_socket = \"{}\"\nprometheus_enable = false\n",
            socket.display()
        );
        let config_path = dir.path().join("switch.toml");
        std::fs::write(&config_path, &text).expect("write config");
        let (config, _warnings) = headroom_config::parse(&text, &config_path.display().to_string())
            .unwrap_or_else(|e| panic!("test configuration refused:\n{e}"));
        let control = ControlPlane::bind(&config_path, text, config).expect("bind control socket");
        let mut backend = backend_for(control.config());
        let running = start(
            RuntimeSpec::for_config(control.config()).expect("spec"),
            &mut backend,
        )
        .expect("start");
        let taps = control
            .config()
            .ports
            .iter()
            .map(|p| backend.take_tap(&p.device).expect("tap"))
            .collect();
        Self {
            dir,
            config_path,
            socket,
            control,
            running: Some(running),
            backend,
            taps,
            restarts: 0,
            events: Vec::new(),
        }
    }

    /// The running dataplane.
    pub fn running(&self) -> &Running {
        self.running.as_ref().expect("running")
    }

    /// The running dataplane, mutable.
    pub fn running_mut(&mut self) -> &mut Running {
        self.running.as_mut().expect("running")
    }

    /// One turn of the main loop: events, punted and injected frames (the LLDP agent), serve
    /// the control socket, apply a reconfiguration.
    pub fn poll(&mut self) {
        let running = self.running.as_mut().expect("running");
        for event in running.drain_events() {
            self.events.push(headroom_runtime::event_log::render(
                running.shared(),
                &running.clock(),
                &event,
            ));
            self.control.note_event(&event);
        }
        self.control.pump_control_frames(running);
        if let ControlAction::Apply { text, config, .. } = self.control.poll(running) {
            self.apply(text, *config);
        }
    }

    /// What `headroom run` does with [`ControlAction::Apply`]: drain and stop, restart the new
    /// configuration on fresh ports, carry the counters over.
    fn apply(&mut self, text: String, config: Config) {
        let old = Retired::stop(self.running.take().expect("running"));
        self.backend = backend_for(&config);
        let mut spec = RuntimeSpec::for_config(&config).expect("spec");
        // As `headroom run`: running captures mirror the new dataplane from its first frame.
        spec.capture_flags = self.control.capture_flags_for(&config);
        let running = start(spec, &mut self.backend).expect("the new configuration starts");
        self.taps = config
            .ports
            .iter()
            .map(|p| self.backend.take_tap(&p.device).expect("tap"))
            .collect();
        self.running = Some(running);
        self.restarts += 1;
        self.control.applied(Ok((text, config, Some(old))));
    }

    /// Runs the main loop until `client` finishes, and returns what it returned.
    pub fn serve_until<T>(&mut self, client: JoinHandle<T>) -> T {
        let end = Instant::now() + DEADLINE;
        while !client.is_finished() {
            assert!(Instant::now() < end, "the client did not finish in time");
            self.poll();
            std::thread::sleep(Duration::from_millis(1));
        }
        client.join().expect("client thread")
    }

    /// Sends one request from a client thread (as `headroom show …` does) and returns the
    /// response.
    pub fn request(&mut self, request: &Request) -> Response {
        let line = serde_json::to_string(request).expect("serialize");
        self.request_line(&line)
    }

    /// Sends one raw line.
    pub fn request_line(&mut self, line: &str) -> Response {
        let socket = self.socket.clone();
        let line = format!("{line}\n");
        let client = std::thread::spawn(move || {
            let mut stream = UnixStream::connect(&socket).expect("connect");
            stream.write_all(line.as_bytes()).expect("send");
            let mut answer = String::new();
            BufReader::new(&stream)
                .read_line(&mut answer)
                .expect("answer");
            answer
        });
        let answer = self.serve_until(client);
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("bad response {answer:?}: {e}"))
    }

    /// A successful request's data, typed.
    pub fn fetch<T: DeserializeOwned>(&mut self, request: &Request) -> T {
        let response = self.request(request);
        assert!(response.ok, "{request:?} failed: {:?}", response.error);
        serde_json::from_value(response.data).expect("typed response")
    }

    /// `show <what>`, typed.
    pub fn show<T: DeserializeOwned>(&mut self, what: Show) -> T {
        self.fetch(&Request::Show { what })
    }

    /// Puts a frame into port `port`'s receive side (waits while its ring is full).
    pub fn inject(&mut self, port: usize, frame: &[u8]) {
        let end = Instant::now() + DEADLINE;
        while self.taps[port].injector.inject(frame).is_err() {
            assert!(Instant::now() < end, "port {port} does not take frames");
            std::thread::yield_now();
        }
    }

    /// Takes what port `port` transmitted until `want` frames arrived (fails after the deadline).
    pub fn collect(&mut self, port: usize, want: usize) -> Vec<Vec<u8>> {
        let end = Instant::now() + DEADLINE;
        let mut got = Vec::new();
        while got.len() < want {
            match self.taps[port].collector.pop() {
                Some(f) => got.push(f.data().to_vec()),
                None => {
                    assert!(
                        Instant::now() < end,
                        "port {port} sent {} of {want} frames",
                        got.len()
                    );
                    std::thread::yield_now();
                }
            }
        }
        got
    }

    /// Takes whatever port `port` has transmitted so far.
    pub fn drain(&mut self, port: usize) -> Vec<Vec<u8>> {
        let mut got = Vec::new();
        while let Some(f) = self.taps[port].collector.pop() {
            got.push(f.data().to_vec());
        }
        got
    }

    /// Runs the main loop until `done` holds (fails after the deadline).
    pub fn wait_for(&mut self, what: &str, mut done: impl FnMut(&mut Self) -> bool) {
        let end = Instant::now() + DEADLINE;
        loop {
            self.poll();
            if done(self) {
                return;
            }
            assert!(Instant::now() < end, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// C says hello on Ethernet4 (flooded to Ethernet0, where it is taken), so that frames
    /// to C are unicast to Ethernet4.
    pub fn learn_c(&mut self) {
        self.inject(1, &udp_frame(C, [0xff; 6], 0, 0, 64));
        assert_eq!(self.collect(0, 1).len(), 1);
    }

    /// What `headroom run` does before its final stop: the LLDP agent's shutdown LLDPDUs.
    pub fn shutdown_lldp(&mut self) {
        let running = self.running.as_mut().expect("running");
        self.control.shutdown_lldp(running);
    }

    /// Stops the dataplane (as `headroom run` does on SIGTERM).
    pub fn stop(mut self) {
        if let Some(r) = self.running.take() {
            drop(r.stop());
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            drop(r.stop());
        }
    }
}

/// An IPv4/UDP frame of `len` bytes (no FCS) with DSCP `dscp` and ECN field `ecn`.
pub fn udp_frame(src: [u8; 6], dst: [u8; 6], dscp: u8, ecn: u8, len: usize) -> Vec<u8> {
    let mut buf = Vec::with_capacity(len);
    PacketBuilder::ethernet2(src, dst)
        .ipv4([10, 0, 0, 1], [10, 0, 0, 3], 64)
        .udp(49152, 4791)
        .write(&mut buf, &vec![0; len - 42])
        .expect("build frame");
    buf[15] = (dscp << 2) | (ecn & 3);
    buf[24] = 0;
    buf[25] = 0;
    let sum = headroom_wire::checksum::checksum(&buf[14..34]);
    buf[24..26].copy_from_slice(&sum.to_be_bytes());
    buf
}

/// An IEEE 802.1Qbb PFC frame (MAC Control opcode 0x0101) from `src` pausing every priority
/// of `class_enable` for `quanta`, 60 bytes (no FCS).
pub fn pfc_frame(src: [u8; 6], class_enable: u8, quanta: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0x08]);
    f[14..16].copy_from_slice(&[0x01, 0x01]);
    f[16..18].copy_from_slice(&u16::from(class_enable).to_be_bytes());
    for p in 0..8 {
        if class_enable & (1 << p) != 0 {
            f[18 + 2 * p..20 + 2 * p].copy_from_slice(&quanta.to_be_bytes());
        }
    }
    f
}

/// An IEEE 802.3 Annex 31B PAUSE frame (opcode 0x0001), 60 bytes.
pub fn pause_frame(src: [u8; 6], quanta: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&[0x01, 0x80, 0xc2, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0x08]);
    f[14..16].copy_from_slice(&[0x00, 0x01]);
    f[16..18].copy_from_slice(&quanta.to_be_bytes());
    f
}

/// Whether a frame is a PFC frame; returns its class-enable vector and per-priority quanta.
pub fn parse_pfc(frame: &[u8]) -> Option<(u8, [u16; 8])> {
    if frame.len() < 34 || frame[12..16] != [0x88, 0x08, 0x01, 0x01] {
        return None;
    }
    let quanta =
        std::array::from_fn(|p| u16::from_be_bytes([frame[18 + 2 * p], frame[19 + 2 * p]]));
    Some((frame[17], quanta))
}

/// The ECN field of an IPv4 frame.
pub fn ecn_of(frame: &[u8]) -> u8 {
    frame[15] & 3
}

/// One capture record (the control socket's stream format).
#[derive(Debug)]
pub struct Record {
    /// Port index.
    pub port: u16,
    /// Sent by the switch (else received).
    pub transmitted: bool,
    /// Frame length.
    pub orig_len: u32,
    /// The frame (up to the snap length).
    pub data: Vec<u8>,
}

/// A capture client: connects, asks, reports the answer through `started`, then reads records
/// until it has seen an XON for priority 3 (or the deadline passes).
pub fn capture_client(
    socket: PathBuf,
    port: &str,
    started: mpsc::Sender<String>,
) -> JoinHandle<Vec<Record>> {
    let request = serde_json::to_string(&Request::Capture(CaptureRequest {
        port: port.into(),
        control_only: true,
    }))
    .unwrap();
    std::thread::spawn(move || {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream.write_all(format!("{request}\n").as_bytes()).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        let mut reader = BufReader::new(stream);
        let mut answer = String::new();
        reader.read_line(&mut answer).unwrap();
        started.send(answer).unwrap();
        let mut records = Vec::new();
        loop {
            let mut head = [0u8; 17];
            if reader.read_exact(&mut head).is_err() {
                return records;
            }
            let len = u16::from_le_bytes([head[15], head[16]]);
            let mut data = vec![0; usize::from(len)];
            reader.read_exact(&mut data).unwrap();
            let record = Record {
                port: u16::from_le_bytes([head[8], head[9]]),
                transmitted: head[10] == 1,
                orig_len: u32::from_le_bytes(head[11..15].try_into().unwrap()),
                data,
            };
            let xon = parse_pfc(&record.data).is_some_and(|(e, q)| e & 0b1000 != 0 && q[3] == 0);
            records.push(record);
            if xon {
                return records;
            }
        }
    })
}

/// Starts a control-only capture of `port` and waits until the switch accepted it.
pub fn start_capture(sw: &mut Switch, port: &str) -> JoinHandle<Vec<Record>> {
    let (started_tx, started) = mpsc::channel();
    let client = capture_client(sw.socket.clone(), port, started_tx);
    let mut answer = String::new();
    sw.wait_for("the capture to start", |_| match started.try_recv() {
        Ok(a) => {
            answer = a;
            true
        }
        Err(_) => false,
    });
    assert!(answer.contains("\"ok\":true"), "{answer}");
    client
}
