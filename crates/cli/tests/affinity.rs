//! The real binary under `taskset -c 1` (a process whose CPU affinity mask, like a container's
//! cpuset, excludes CPU 0): `headroom check` and `headroom run` accept `cpu = 1`, refuse
//! `cpu = 0` naming the allowed set (exit 2, file:line:column:key), and without a lcore table
//! the one lcore thread runs pinned to CPU 1, inside the mask.
//!
//! Needs `taskset` (util-linux) and a machine with at least two CPUs; fails (never skips)
//! without them. Memory ports: no root or namespace needed.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const DEADLINE: Duration = Duration::from_secs(20);

/// Fails unless `taskset` exists and CPU 1 is one this test process may use.
fn require_cpu_1() {
    let status = Command::new("taskset")
        .args(["-c", "1", "true"])
        .status()
        .unwrap_or_else(|e| {
            panic!("these tests need taskset (Debian: apt-get install util-linux): {e}")
        });
    assert!(
        status.success(),
        "these tests need CPU 1 in this process's affinity mask (a machine with two CPUs or more)"
    );
}

/// A configuration of two memory ports, control socket in `dir`, `lcores` appended.
fn write_config(dir: &Path, lcores: &str) -> PathBuf {
    let path = dir.join("sw.toml");
    let text = format!(
        "[switch]\nname = \"affinity\"\ndriver = \"memory\"\n\n\
         [port.Ethernet0]\ndevice = \"m0\"\nspeed = \"10G\"\n\n\
         [port.Ethernet4]\ndevice = \"m1\"\nspeed = \"10G\"\n\n\
         [runtime]\ncontrol_socket = \"{}\"\nprometheus_enable = false\n{lcores}",
        dir.join("sw.sock").display()
    );
    std::fs::write(&path, text).expect("write config");
    path
}

const LCORE_ON_CPU_0: &str = "\n[[runtime.lcore]]\ncpu = 0\n\
                              rx_ports = [\"Ethernet0\", \"Ethernet4\"]\n\
                              tx_ports = [\"Ethernet0\", \"Ethernet4\"]\n";

fn lcore_on(cpu: usize) -> String {
    LCORE_ON_CPU_0.replace("cpu = 0", &format!("cpu = {cpu}"))
}

/// `taskset -c 1 headroom <command> -c <config>`, waited for.
fn on_cpu_1(command: &str, config: &Path) -> Output {
    Command::new("taskset")
        .args(["-c", "1", env!("CARGO_BIN_EXE_headroom"), command, "-c"])
        .arg(config)
        .output()
        .expect("taskset headroom")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The refusal of `cpu = 0` at line 18 (the `cpu` key of the lcore table), column 7.
fn assert_refuses_cpu_0(out: &Output, config: &Path) {
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let expected = format!(
        "{}:18:7: runtime.lcore[0].cpu: CPU 0 is not in this process's affinity mask (allowed: 1)",
        config.display()
    );
    assert!(
        text(&out.stderr).contains(&expected),
        "expected {expected:?} in:\n{}",
        text(&out.stderr)
    );
}

#[test]
fn check_accepts_cpu_1_and_refuses_cpu_0_under_taskset() {
    require_cpu_1();
    let dir = tempfile::tempdir().expect("temp dir");
    let config = write_config(dir.path(), &lcore_on(1));
    let out = on_cpu_1("check", &config);
    assert!(
        out.status.success(),
        "cpu = 1 under taskset -c 1: {}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains("valid configuration"));

    let config = write_config(dir.path(), LCORE_ON_CPU_0);
    assert_refuses_cpu_0(&on_cpu_1("check", &config), &config);
}

/// A `taskset -c 1 headroom run`; killed if the test fails before it stops.
struct Run(Option<Child>);

impl Drop for Run {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The `Cpus_allowed_list` of the thread named `name` of the run, read 300 ms after the thread
/// appeared: an lcore pins itself first thing, and until then it has the process's mask (CPU 1
/// under taskset), so reading at once could miss a pin to another CPU.
fn thread_cpus(run: &mut Run, name: &str) -> String {
    let child = run.0.as_mut().expect("running");
    let pid = child.id();
    let end = Instant::now() + DEADLINE;
    let task = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            panic!("headroom run exited before its lcore started: {status}");
        }
        let found = std::fs::read_dir(format!("/proc/{pid}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .map(|task| task.path())
            .find(|dir| {
                std::fs::read_to_string(dir.join("comm")).is_ok_and(|comm| comm.trim_end() == name)
            });
        if let Some(dir) = found {
            break dir;
        }
        assert!(Instant::now() < end, "no thread {name} in process {pid}");
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(300));
    let status = std::fs::read_to_string(task.join("status")).expect("thread status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .map(|v| v.trim().to_owned())
        .expect("Cpus_allowed_list")
}

fn start(config: &Path) -> Run {
    let child = Command::new("taskset")
        .args(["-c", "1", env!("CARGO_BIN_EXE_headroom"), "run", "-c"])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("taskset headroom run");
    Run(Some(child))
}

/// SIGTERM; the run must exit cleanly and report every frame buffer back.
fn stop(mut run: Run) {
    let child = run.0.take().expect("running");
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert!(
        out.status.success(),
        "{}\n{}",
        out.status,
        text(&out.stderr)
    );
    assert!(
        !text(&out.stderr).contains("not all returned"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn run_puts_its_lcores_inside_the_affinity_mask() {
    require_cpu_1();
    let dir = tempfile::tempdir().expect("temp dir");

    // No lcore table: the one lcore goes on the first allowed CPU, not on CPU 0.
    let config = write_config(dir.path(), "");
    let mut run = start(&config);
    assert_eq!(thread_cpus(&mut run, "headroom-lcore0"), "1");
    stop(run);

    // An explicit cpu = 1 runs there.
    let config = write_config(dir.path(), &lcore_on(1));
    let mut run = start(&config);
    assert_eq!(thread_cpus(&mut run, "headroom-lcore0"), "1");
    stop(run);

    // cpu = 0 is refused before anything starts.
    let config = write_config(dir.path(), LCORE_ON_CPU_0);
    assert_refuses_cpu_0(&on_cpu_1("run", &config), &config);
}
