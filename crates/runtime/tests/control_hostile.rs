//! A hostile control plane: while the dataplane forwards a steady lossless flow, the control
//! socket is abused by slow clients (a byte every 50 ms, never a newline), oversized requests
//! (1 MiB, with and without a newline), garbage (not UTF-8, not JSON, unknown requests, JSON
//! nested 20 000 deep), clients that never read their answer, clients that connect and leave,
//! and 64 well-behaved clients asking `show` in a loop. Measured: every well-behaved request
//! is answered, and promptly; every bad one gets an error saying why; every abusive connection
//! is closed by its deadline; the lcore keeps iterating and forwarding, loses no frame, and is
//! asked for MAC table dumps at a bounded rate whatever the number of clients.

mod control_harness;

use control_harness::{config_text, udp_frame, Switch, A, C};
use headroom_core::frame::Frame;
use headroom_runtime::control::{CLIENTS_MAX, FDB_DUMP_INTERVAL, REQUEST_DEADLINE};
use headroom_runtime::protocol::{Request, Response, Show};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Longest a well-behaved `show` may take while the socket is abused. Generous: a poll of the
/// control loop takes about a millisecond here and serves every ready client, but this is a
/// shared 2-vCPU machine. What it catches is serial service: with the former design (one
/// connection at a time, 250 ms read timeout each) the 16 slow clients alone delayed everyone
/// else by 4 s per round.
const PROMPT: Duration = Duration::from_secs(2);

/// Longest loop iteration the lcore may show while the socket is abused. The lcore shares
/// nothing with the control loop but atomics and its command ring, so this only catches a
/// coupling that makes it wait (a lock, a blocking command); the bound is far above the
/// scheduler's worst preemption of a runnable thread on a loaded 2-vCPU VM, and the test
/// prints the baseline it measured without abuse.
const LCORE_ITERATION_MAX: Duration = Duration::from_millis(250);

fn request_line(request: &Request) -> String {
    format!("{}\n", serde_json::to_string(request).expect("serialize"))
}

fn read_answer(stream: &UnixStream) -> Result<Response, String> {
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .map_err(|e| e.to_string())?;
    let mut line = String::new();
    BufReader::new(stream)
        .read_line(&mut line)
        .map_err(|e| format!("reading the answer: {e}"))?;
    serde_json::from_str(&line).map_err(|e| format!("bad answer {line:?}: {e}"))
}

/// Connects, sends `bytes`, reads one answer.
fn ask(socket: &Path, bytes: &[u8]) -> Result<Response, String> {
    let mut stream = UnixStream::connect(socket).map_err(|e| format!("connect: {e}"))?;
    stream
        .write_all(bytes)
        .map_err(|e| format!("sending: {e}"))?;
    read_answer(&stream)
}

/// A client that is expected to get an error answer containing `expect`.
fn bad_client(socket: PathBuf, bytes: Vec<u8>, expect: &'static str) -> JoinHandle<String> {
    std::thread::spawn(move || match ask(&socket, &bytes) {
        Ok(r) if !r.ok && r.error.as_deref().unwrap_or("").contains(expect) => String::new(),
        Ok(r) => format!("expected an error with {expect:?}, got {r:?}"),
        Err(e) => format!("expected an error with {expect:?}: {e}"),
    })
}

#[test]
fn hostile_clients_delay_neither_the_lcore_nor_other_clients() {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    let socket = sw.socket.clone();

    // A steady flow A → C on the lossless priority 3, forwarded by the lcore throughout.
    let mut tap_a = sw.taps.remove(0);
    let mut tap_c = sw.taps.remove(0);
    let stop_traffic = Arc::new(AtomicBool::new(false));
    let traffic = {
        let stop = Arc::clone(&stop_traffic);
        std::thread::spawn(move || {
            let frame = udp_frame(A, C, 3, 0, 256);
            let (mut sent, mut received) = (0u64, 0u64);
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..8 {
                    if tap_a.injector.inject(&frame).is_ok() {
                        sent += 1;
                    }
                }
                while let Some(f) = tap_c.collector.pop() {
                    assert_eq!(f.data(), &frame[..]);
                    received += 1;
                }
                std::thread::sleep(Duration::from_micros(500));
            }
            let end = Instant::now() + Duration::from_secs(5);
            while received < sent && Instant::now() < end {
                while tap_c.collector.pop().is_some() {
                    received += 1;
                }
                std::thread::yield_now();
            }
            (sent, received)
        })
    };

    let lcore = Arc::clone(&sw.running().lcore_stats()[0]);
    // Baseline: one second of forwarding, no abuse.
    let _ = lcore.longest_iteration_ns.take();
    let end = Instant::now() + Duration::from_secs(1);
    while Instant::now() < end {
        sw.poll();
        std::thread::sleep(Duration::from_millis(1));
    }
    let baseline_ns = lcore.longest_iteration_ns.take();
    let iterations_before = lcore.iterations.load(Ordering::Relaxed);
    let commands_before = lcore.commands.load(Ordering::Relaxed);
    let dumps_before = sw.control.fdb_dumps();

    let started = Instant::now();
    let mut abusers: Vec<JoinHandle<String>> = Vec::new();
    // Slow clients: a byte every 50 ms, never a newline; closed with an error after 5 s.
    for _ in 0..16 {
        let socket = socket.clone();
        abusers.push(std::thread::spawn(move || {
            let Ok(mut stream) = UnixStream::connect(&socket) else {
                return "slow client: cannot connect".into();
            };
            stream.set_nonblocking(true).unwrap();
            let deadline = Instant::now() + REQUEST_DEADLINE + Duration::from_secs(5);
            let mut answer = Vec::new();
            while Instant::now() < deadline {
                let _ = stream.write(b"{");
                let mut buf = [0u8; 512];
                match stream.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
                if answer.contains(&b'\n') {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let answer = String::from_utf8_lossy(&answer);
            if answer.contains("no complete request line within") {
                String::new()
            } else {
                format!("slow client: expected the deadline error, got {answer:?}")
            }
        }));
    }
    // Oversized: 1 MiB without a newline, and 1 MiB with one.
    for i in 0..8 {
        let mut bytes = vec![b'a'; 1 << 20];
        if i % 2 == 1 {
            bytes.push(b'\n');
        }
        abusers.push(bad_client(socket.clone(), bytes, "longer than 65536 bytes"));
    }
    // Garbage.
    let nested = format!("{}{}\n", "[".repeat(20_000), "]".repeat(20_000));
    for bytes in [
        b"\xff\xfe\x00garbage\n".to_vec(),
        b"not json at all\n".to_vec(),
        b"{\"request\":\"reboot\"}\n".to_vec(),
        b"{\"request\":\"show\",\"what\":\"everything\"}\n".to_vec(),
        b"{\"request\":\"show\"}\n".to_vec(),
        nested.into_bytes(),
        b"\n".to_vec(),
    ] {
        for _ in 0..2 {
            abusers.push(bad_client(socket.clone(), bytes.clone(), "bad request"));
        }
    }
    // Clients that ask for the largest answer and never read it.
    for _ in 0..8 {
        let socket = socket.clone();
        abusers.push(std::thread::spawn(move || {
            let Ok(mut stream) = UnixStream::connect(&socket) else {
                return "non-reader: cannot connect".into();
            };
            let _ = stream.write_all(
                request_line(&Request::Show {
                    what: Show::Snapshot,
                })
                .as_bytes(),
            );
            std::thread::sleep(Duration::from_secs(3));
            String::new()
        }));
    }
    // Clients that connect and leave at once.
    {
        let socket = socket.clone();
        abusers.push(std::thread::spawn(move || {
            for _ in 0..200 {
                drop(UnixStream::connect(&socket));
            }
            String::new()
        }));
    }
    // 64 well-behaved clients, each asking 10 times.
    let mut clients: Vec<JoinHandle<Result<Duration, String>>> = Vec::new();
    for i in 0..64 {
        let socket = socket.clone();
        clients.push(std::thread::spawn(move || {
            let whats = [Show::Ports, Show::Fdb, Show::Snapshot, Show::PfcCounters];
            let mut slowest = Duration::ZERO;
            for k in 0..10 {
                let what = whats[(i + k) % whats.len()];
                let t = Instant::now();
                let r = ask(&socket, request_line(&Request::Show { what }).as_bytes())?;
                slowest = slowest.max(t.elapsed());
                if !r.ok {
                    return Err(format!("show {what:?} failed: {:?}", r.error));
                }
                if what == Show::Fdb && r.data.as_array().map_or(0, Vec::len) != 2 {
                    return Err(format!("show fdb lost its entries: {}", r.data));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Ok(slowest)
        }));
    }

    // The main loop, as `headroom run` (1 ms instead of 20 ms between polls), sampling the lcore.
    let mut longest_ns = 0u64;
    let mut stalled_windows = 0;
    let mut last_iterations = lcore.iterations.load(Ordering::Relaxed);
    let mut next_sample = Instant::now() + Duration::from_millis(100);
    let limit = Instant::now() + Duration::from_secs(60);
    while !(abusers.iter().all(JoinHandle::is_finished)
        && clients.iter().all(JoinHandle::is_finished))
    {
        assert!(Instant::now() < limit, "the clients did not finish");
        sw.poll();
        std::thread::sleep(Duration::from_millis(1));
        if Instant::now() >= next_sample {
            next_sample += Duration::from_millis(100);
            longest_ns = longest_ns.max(lcore.longest_iteration_ns.take());
            let iterations = lcore.iterations.load(Ordering::Relaxed);
            if iterations == last_iterations {
                stalled_windows += 1;
            }
            last_iterations = iterations;
        }
    }
    let abuse = started.elapsed();
    longest_ns = longest_ns.max(lcore.longest_iteration_ns.take());

    let failures: Vec<String> = abusers
        .into_iter()
        .map(|h| h.join().expect("abuser thread"))
        .filter(|f| !f.is_empty())
        .collect();
    assert!(
        failures.is_empty(),
        "bad clients not answered as they should: {failures:#?}"
    );
    let mut slowest = Duration::ZERO;
    for c in clients {
        slowest = slowest.max(
            c.join()
                .expect("client thread")
                .expect("a well-behaved client"),
        );
    }

    // Every connection is closed once its deadline passed: nothing lingers.
    sw.wait_for("every connection to be closed", |sw| {
        sw.control.clients_connected() == 0
    });
    stop_traffic.store(true, Ordering::Relaxed);
    let (sent, received) = traffic.join().expect("traffic thread");
    let (busy, peer, timed_out, oversized) = sw.control.clients_refused();
    let iterations = lcore.iterations.load(Ordering::Relaxed) - iterations_before;
    let commands = lcore.commands.load(Ordering::Relaxed) - commands_before;
    let dumps = sw.control.fdb_dumps() - dumps_before;
    eprintln!(
        "abuse for {abuse:?}: slowest well-behaved show {slowest:?}; lcore: longest iteration \
         {:.2} ms (baseline without abuse {:.2} ms), {iterations} iterations, {stalled_windows} \
         100 ms windows without one, {commands} commands, {dumps} MAC table dumps for 160 \
         `show fdb`; {sent} frames sent, {received} received; refused: busy {busy}, peer \
         {peer}, deadline {timed_out}, oversized {oversized}",
        longest_ns as f64 / 1e6,
        baseline_ns as f64 / 1e6,
    );
    assert!(slowest < PROMPT, "a well-behaved client waited {slowest:?}");
    assert!(sent > 10_000, "the flow ran ({sent} frames)");
    assert_eq!(
        received, sent,
        "the lossless flow lost frames while the socket was abused"
    );
    assert!(
        longest_ns < LCORE_ITERATION_MAX.as_nanos() as u64,
        "an lcore iteration took {:.1} ms while the socket was abused",
        longest_ns as f64 / 1e6
    );
    assert_eq!(stalled_windows, 0, "the lcore stopped iterating");
    // 160 `show fdb` requests; one dump per interval at most (plus the first).
    let dump_bound = 1 + abuse.as_millis() as u64 / FDB_DUMP_INTERVAL.as_millis() as u64;
    assert!(dumps <= dump_bound, "{dumps} MAC table dumps in {abuse:?}");
    assert!(dumps < 160, "the dumps were shared");
    assert_eq!(commands, dumps, "one command per dump per lcore");
    assert!(
        timed_out >= 16,
        "the slow clients were cut off ({timed_out})"
    );
    assert!(
        oversized >= 8,
        "the oversized requests were refused ({oversized})"
    );
    assert_eq!((busy, peer), (0, 0));
    sw.stop();
}

#[test]
fn connections_beyond_the_limit_are_told_the_switch_is_busy() {
    let mut sw = Switch::start(&config_text(""));
    let socket = sw.socket.clone();
    // Idle connections up to the limit (the kernel queues them; the control loop accepts them).
    let mut idle = Vec::new();
    for _ in 0..CLIENTS_MAX {
        idle.push(UnixStream::connect(&socket).expect("connect"));
        if idle.len() % 64 == 0 {
            sw.poll();
        }
    }
    sw.wait_for("the idle connections to be accepted", |sw| {
        sw.control.clients_connected() == CLIENTS_MAX
    });
    let extra: Vec<JoinHandle<Result<Response, String>>> = (0..8)
        .map(|_| {
            let socket = socket.clone();
            std::thread::spawn(move || {
                ask(
                    &socket,
                    request_line(&Request::Show { what: Show::Ports }).as_bytes(),
                )
            })
        })
        .collect();
    let answers: Vec<Response> = extra
        .into_iter()
        .map(|h| sw.serve_until(h).expect("an answer"))
        .collect();
    for a in &answers {
        assert!(!a.ok);
        assert!(
            a.error.as_deref().unwrap_or("").starts_with("busy"),
            "{a:?}"
        );
    }
    assert_eq!(sw.control.clients_refused().0, 8);
    // Once the idle ones leave, requests are served again.
    drop(idle);
    sw.wait_for("the idle connections to be closed", |sw| {
        sw.control.clients_connected() == 0
    });
    let r = sw.request(&Request::Show { what: Show::Ports });
    assert!(r.ok, "{r:?}");
    sw.stop();
}
