//! Crash safety and a control socket for its owner only, through the real binary (`headroom run`
//! on the memory driver): a non-root `headroom show` is told to run as root (mode 0600, and the
//! peer credential check when the mode was loosened by hand); the socket is 0600 whatever the
//! umask; a restart after `kill -9` replaces the stale socket, but a second switch never steals
//! a live one; `kill -9` during snapshot saves leaves the old or the new snapshot, never a torn
//! one.
//!
//! Needs root (CI is root) and `setpriv` (util-linux); fails, never skips, without them.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const HEADROOM: &str = env!("CARGO_BIN_EXE_headroom");
const DEADLINE: Duration = Duration::from_secs(30);
/// The user a non-root operator is played by.
const NOBODY: &str = "65534";

fn require_root() {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    assert_eq!(
        euid, 0,
        "these tests start switches as root and play a non-root user with setpriv; run them \
         as root (scripts/test.sh does). They fail rather than skip."
    );
    assert!(
        Command::new("setpriv").arg("--help").output().is_ok(),
        "setpriv (util-linux) is missing"
    );
}

fn config_text(socket: &Path, extra: &str) -> String {
    format!(
        "[switch]\nname = \"reliability\"\ndriver = \"memory\"\n\n\
         [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
         [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\ncable_length = \"5m\"\n\n\
         [runtime]\ncontrol_socket = \"{}\"\nprometheus_enable = false\n{extra}",
        socket.display()
    )
}

/// A `headroom run` child, killed (SIGKILL) when dropped.
struct Switch {
    child: Option<Child>,
}

impl Drop for Switch {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Switch {
    /// Starts `headroom run -c config` through `sh -c` with `umask` set.
    fn start_with_umask(config: &Path, umask: &str) -> Self {
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" run -c \"$1\""))
            .arg(HEADROOM)
            .arg(config)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("headroom run");
        Self { child: Some(child) }
    }

    fn start(config: &Path) -> Self {
        Self::start_with_umask(config, "022")
    }

    /// Waits until something listens on `socket`.
    fn wait_listening(&mut self, socket: &Path) {
        let end = Instant::now() + DEADLINE;
        while UnixStream::connect(socket).is_err() {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                let mut err = String::new();
                let _ = std::io::Read::read_to_string(
                    self.child.as_mut().unwrap().stderr.as_mut().unwrap(),
                    &mut err,
                );
                panic!("headroom run exited ({status}): {err}");
            }
            assert!(Instant::now() < end, "the control socket did not appear");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill_9(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }
}

fn headroom_as(uid: Option<&str>, args: &[&str]) -> Output {
    let mut command = match uid {
        Some(uid) => {
            let mut c = Command::new("setpriv");
            c.args([
                &format!("--reuid={uid}"),
                &format!("--regid={uid}"),
                "--clear-groups",
                HEADROOM,
            ]);
            c
        }
        None => Command::new(HEADROOM),
    };
    command.args(args).output().expect("run headroom")
}

/// One request over the socket, as the CLI sends it.
fn request(socket: &Path, line: &str) -> Result<serde_json::Value, String> {
    let mut s = UnixStream::connect(socket).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(DEADLINE))
        .map_err(|e| e.to_string())?;
    writeln!(s, "{line}").map_err(|e| e.to_string())?;
    let mut answer = String::new();
    BufReader::new(&s)
        .read_line(&mut answer)
        .map_err(|e| e.to_string())?;
    serde_json::from_str(&answer).map_err(|e| format!("{answer:?}: {e}"))
}

/// A temporary directory a non-root user may traverse (but not list or write).
fn traversable_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    dir
}

#[test]
fn a_non_root_show_is_told_to_run_as_root() {
    require_root();
    let dir = traversable_dir();
    let socket = dir.path().join("sw.sock");
    let config = dir.path().join("sw.toml");
    std::fs::write(&config, config_text(&socket, "")).unwrap();
    let mut sw = Switch::start(&config);
    sw.wait_listening(&socket);
    let socket_arg = socket.to_str().unwrap();

    // Root may.
    let out = headroom_as(None, &["show", "ports", "--socket", socket_arg]);
    assert!(out.status.success(), "{out:?}");

    // Anyone else: the socket is 0600, connect(2) refuses.
    let out = headroom_as(Some(NOBODY), &["show", "ports", "--socket", socket_arg]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("permission denied: run as root"),
        "{stderr}"
    );

    // An operator loosened the mode by hand: the peer credential check still refuses.
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = headroom_as(Some(NOBODY), &["show", "ports", "--socket", socket_arg]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a non-owner was served: {out:?}");
    assert!(
        stderr.contains("permission denied: run as root"),
        "{stderr}"
    );
    assert!(stderr.contains("you are uid 65534"), "{stderr}");
    // And it still serves root.
    let out = headroom_as(None, &["show", "ports", "--socket", socket_arg]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn the_control_socket_is_0600_whatever_the_umask() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sw.sock");
    let config = dir.path().join("sw.toml");
    std::fs::write(&config, config_text(&socket, "")).unwrap();
    let mut sw = Switch::start_with_umask(&config, "000");
    sw.wait_listening(&socket);
    let mode = std::fs::metadata(&socket).unwrap().mode() & 0o777;
    assert_eq!(mode, 0o600, "control socket mode {mode:o} under umask 000");
    // No temporary name is left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".binding")), "{names:?}");
}

#[test]
fn a_restart_after_kill_9_replaces_the_stale_socket_but_never_a_live_one() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sw.sock");
    let config = dir.path().join("sw.toml");
    std::fs::write(&config, config_text(&socket, "")).unwrap();
    let mut first = Switch::start(&config);
    first.wait_listening(&socket);
    first.kill_9();
    assert!(socket.exists(), "kill -9 leaves the socket file behind");
    assert!(
        UnixStream::connect(&socket).is_err(),
        "and nothing listens on it"
    );

    let mut second = Switch::start(&config);
    second.wait_listening(&socket);
    let answer = request(&socket, r#"{"request":"show","what":"ports"}"#).unwrap();
    assert_eq!(answer["ok"], true, "{answer}");

    // A third switch on the same socket while the second runs: refused, the second unharmed.
    // Spawned with a deadline: a third switch that took the live socket would run on, and the
    // test must fail saying so, not hang.
    let mut child = Command::new(HEADROOM)
        .args(["run", "-c"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("a third switch started on the live socket and ran for 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let third = child.wait_with_output().unwrap();
    assert!(!third.status.success());
    let stderr = String::from_utf8_lossy(&third.stderr);
    assert!(
        stderr.contains("in use by another running headroom"),
        "{stderr}"
    );
    let answer = request(&socket, r#"{"request":"show","what":"ports"}"#).unwrap();
    assert_eq!(
        answer["ok"], true,
        "the running switch still answers: {answer}"
    );
    drop(second);
}

/// A configuration of about 4 MiB (a large comment), distinct per generation: a torn copy is
/// a prefix of one, and cannot equal any.
fn generation_text(socket: &Path, generation: u32, padding: &str) -> String {
    format!(
        "# generation {generation}\n{}{padding}# end of generation {generation}\n",
        config_text(socket, "")
    )
}

#[test]
fn kill_9_during_snapshot_saves_leaves_the_old_or_the_new_snapshot_never_a_torn_one() {
    require_root();
    const ROUNDS: u32 = 12;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sw.sock");
    let config = dir.path().join("sw.toml");
    let snapshot = dir.path().join("sw.sock.snapshots").join("snap.toml");
    let padding =
        "# padding padding padding padding padding padding padding padding\n".repeat(4 << 20 >> 6);
    let texts: Vec<String> = (0..ROUNDS)
        .map(|g| generation_text(&socket, g, &padding))
        .collect();
    let mut seed = 0x9E37_79B9_u64;
    let mut total_saves = 0;
    for (g, text) in texts.iter().enumerate() {
        std::fs::write(&config, text).unwrap();
        let mut sw = Switch::start(&config);
        sw.wait_listening(&socket);
        let stop = Arc::new(AtomicBool::new(false));
        let saves = Arc::new(AtomicU64::new(0));
        let saver = {
            let (stop, saves, socket) = (Arc::clone(&stop), Arc::clone(&saves), socket.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match request(&socket, r#"{"request":"config_save","name":"snap"}"#) {
                        Ok(a) if a["ok"] == true => {
                            saves.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(a) => panic!("save refused: {a}"),
                        Err(_) => return, // killed
                    }
                }
            })
        };
        // Wait for a first save of this generation, then kill at a random moment of the next
        // few (xorshift: reproducible).
        let end = Instant::now() + DEADLINE;
        while saves.load(Ordering::Relaxed) == 0 {
            assert!(Instant::now() < end, "no save completed");
            std::thread::sleep(Duration::from_millis(1));
        }
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(Duration::from_millis(20 + seed % 300));
        sw.kill_9();
        stop.store(true, Ordering::Relaxed);
        saver.join().unwrap();
        total_saves += saves.load(Ordering::Relaxed);

        let saved = std::fs::read(&snapshot).unwrap();
        let whole = texts[..=g]
            .iter()
            .position(|t| t.as_bytes() == saved.as_slice());
        assert!(
            whole.is_some(),
            "round {g}: the snapshot is torn ({} bytes, not any generation's {} bytes)",
            saved.len(),
            text.len()
        );
        assert_eq!(
            whole,
            Some(g),
            "round {g}: a save of this generation completed"
        );
    }
    // A restart clears what an interrupted save left (its temporary file).
    let mut sw = Switch::start(&config);
    sw.wait_listening(&socket);
    let leftovers: Vec<String> = std::fs::read_dir(snapshot.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "snap.toml")
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let answer = request(&socket, r#"{"request":"config_list"}"#).unwrap();
    assert_eq!(answer["data"], serde_json::json!(["snap"]));
    eprintln!("{total_saves} saves of 4 MiB over {ROUNDS} kills");
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn threads_of(pid: u32) -> usize {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Sends `bytes` (ignoring a reset midway) and reads whatever answer comes back.
fn http_exchange(addr: &str, bytes: &[u8]) -> String {
    use std::io::Read;
    let Ok(mut s) = std::net::TcpStream::connect(addr) else {
        return "connect failed".into();
    };
    s.set_read_timeout(Some(DEADLINE)).unwrap();
    let _ = s.write_all(bytes);
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer).into_owned()
}

#[test]
fn the_metrics_endpoint_survives_slowloris_garbage_and_huge_headers_without_a_thread_each() {
    require_root();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("sw.sock");
    let config = dir.path().join("sw.toml");
    let addr = format!("127.0.0.1:{}", free_port());
    let text = config_text(&socket, "").replace(
        "prometheus_enable = false\n",
        &format!("prometheus_listen = \"{addr}\"\n"),
    );
    std::fs::write(&config, text).unwrap();
    let mut sw = Switch::start(&config);
    sw.wait_listening(&socket);
    let scrape = format!("GET /metrics HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let end = Instant::now() + DEADLINE;
    while !http_exchange(&addr, scrape.as_bytes()).starts_with("HTTP/1.1 200") {
        assert!(Instant::now() < end, "the metrics endpoint did not come up");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = sw.child.as_ref().unwrap().id();
    let threads_before = threads_of(pid);

    let attack_over = Arc::new(AtomicBool::new(false));
    let mut attackers = Vec::new();
    // Slowloris: 200 connections, each sending a header line every 200 ms and never the end.
    for _ in 0..200 {
        let (addr, over) = (addr.clone(), Arc::clone(&attack_over));
        attackers.push(std::thread::spawn(move || {
            use std::io::Read;
            let Ok(mut s) = std::net::TcpStream::connect(&addr) else {
                return String::from("connect failed");
            };
            let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n");
            s.set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let mut answer = Vec::new();
            while !over.load(Ordering::Relaxed) {
                if s.write_all(b"X-Slow: 1\r\n").is_err() {
                    break;
                }
                let mut buf = [0u8; 512];
                match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => answer.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
            String::from_utf8_lossy(&answer).into_owned()
        }));
    }
    // Huge headers, garbage, wrong methods and paths.
    let mut huge = b"GET /metrics HTTP/1.1\r\n".to_vec();
    while huge.len() < 1 << 20 {
        huge.extend_from_slice(
            b"X-Big: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n",
        );
    }
    // One header whose value alone is 1 MiB: the byte limit, not the header count.
    let mut one_huge = b"GET /metrics HTTP/1.1\r\nX-Big: ".to_vec();
    one_huge.resize(1 << 20, b'a');
    let bad: Vec<(Vec<u8>, &str)> = vec![
        (huge, "HTTP/1.1 431"),
        (one_huge, "HTTP/1.1 431"),
        (
            b"\x16\x03\x01\x02\x00 not http\r\n\r\n".to_vec(),
            "HTTP/1.1 400",
        ),
        (b"POST /metrics HTTP/1.1\r\n\r\n".to_vec(), "HTTP/1.1 405"),
        (
            b"GET /../../etc/passwd HTTP/1.1\r\n\r\n".to_vec(),
            "HTTP/1.1 404",
        ),
    ];
    // A bad client may be evicted (408 "evicted") when the slowloris connections arriving
    // with it find every slot taken before the server has read its bytes: that is the
    // documented policy, not a failure (on a loaded 2-core CI machine a thread can be
    // descheduled between connect and write). Such a client tries again; each must get its own
    // status before the attack is over, and every other answer is a failure.
    let bad_clients_end = Instant::now() + Duration::from_secs(7);
    let mut bad_clients = Vec::new();
    for (bytes, expect) in bad {
        for _ in 0..4 {
            let (addr, bytes) = (addr.clone(), bytes.clone());
            bad_clients.push(std::thread::spawn(move || {
                let mut evictions = 0u32;
                loop {
                    let answer = http_exchange(&addr, &bytes);
                    if answer.starts_with(expect) {
                        return (String::new(), evictions);
                    }
                    let evicted = answer.starts_with("HTTP/1.1 408")
                        && answer
                            .ends_with("evicted: too slow to send a request while others waited\n");
                    if !evicted || Instant::now() >= bad_clients_end {
                        let failure = format!(
                            "expected {expect}, got {:?}",
                            &answer[..answer.len().min(80)]
                        );
                        return (failure, evictions);
                    }
                    evictions += 1;
                    std::thread::sleep(Duration::from_millis(50));
                }
            }));
        }
    }
    // A scraper during the attack: every scrape answered, promptly.
    let mut slowest = Duration::ZERO;
    let mut threads_max = 0;
    let attack_end = Instant::now() + Duration::from_secs(8);
    let mut scrapes = 0;
    while Instant::now() < attack_end {
        let t = Instant::now();
        let answer = http_exchange(&addr, scrape.as_bytes());
        slowest = slowest.max(t.elapsed());
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.contains("\nheadroom_up 1\n"),
            "a scrape during the attack got {:?}",
            &answer[..answer.len().min(120)]
        );
        scrapes += 1;
        threads_max = threads_max.max(threads_of(pid));
        std::thread::sleep(Duration::from_millis(100));
    }
    attack_over.store(true, Ordering::Relaxed);
    let slow_answers: Vec<String> = attackers.into_iter().map(|h| h.join().unwrap()).collect();
    let bad_answers: Vec<(String, u32)> =
        bad_clients.into_iter().map(|h| h.join().unwrap()).collect();
    let bad_evictions: u32 = bad_answers.iter().map(|(_, e)| e).sum();
    let failures: Vec<&String> = bad_answers
        .iter()
        .map(|(f, _)| f)
        .filter(|f| !f.is_empty())
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
    let cut_off = slow_answers
        .iter()
        .filter(|a| a.starts_with("HTTP/1.1 408"))
        .count();
    let final_page = http_exchange(&addr, scrape.as_bytes());
    eprintln!(
        "{scrapes} scrapes during the attack, slowest {slowest:?}; threads {threads_before} \
         before, at most {threads_max} during; {cut_off} of 200 slow connections answered 408; \
         bad clients evicted and retried {bad_evictions} times"
    );
    assert!(scrapes >= 20);
    assert!(
        slowest < Duration::from_secs(2),
        "a scrape took {slowest:?}"
    );
    assert!(
        threads_max <= threads_before + 1,
        "threads grew from {threads_before} to {threads_max}: a thread per connection?"
    );
    // Every slow connection was cut off (evicted for a newer one, or at its 5 s deadline)
    // before the 8 s attack ended.
    assert_eq!(
        cut_off, 200,
        "slow connections cut off before the attack ended"
    );
    assert!(
        final_page.contains("headroom_metrics_refused_total{reason=\"evicted\"}"),
        "{final_page}"
    );
}
