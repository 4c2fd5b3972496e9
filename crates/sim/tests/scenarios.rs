//! Every shipped scenario (config/sim/*.toml) runs at reduced size and shows what it is for;
//! the same scenario and seed give byte-identical results.

use headroom_sim::output::{run, RunReport};
use headroom_sim::scenario::{load, LoadOptions, Scenario};
use std::path::{Path, PathBuf};

fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../config/sim")
        .join(name)
}

fn load_reduced(name: &str, divisor: u64) -> Scenario {
    load(
        &scenario_path(name),
        &LoadOptions {
            seed: None,
            time_divisor: Some(divisor),
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn run_in(s: &Scenario, dir: &Path) -> RunReport {
    let report = run(s, dir, &mut |_| {}).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        report.conservation.holds(),
        "{}: {:?}",
        s.file,
        report.conservation
    );
    report
}

fn read(dir: &Path, file: &str) -> String {
    std::fs::read_to_string(dir.join(file)).unwrap()
}

/// Rows of a CSV whose column `col` equals `value`.
fn rows<'a>(csv: &'a str, col: usize, value: &str) -> Vec<Vec<&'a str>> {
    csv.lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r.get(col) == Some(&value))
        .collect()
}

#[test]
fn same_scenario_and_seed_give_byte_identical_results() {
    let s = load_reduced("incast-8to1-40g-dcqcn.toml", 8);
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let ra = run_in(&s, a.path());
    let rb = run_in(&s, b.path());
    assert_eq!(ra, rb.clone_with_dir(&ra));
    for f in &ra.files {
        let name = f.file_name().unwrap();
        let x = std::fs::read(a.path().join(name)).unwrap();
        let y = std::fs::read(b.path().join(name)).unwrap();
        assert!(x == y, "{name:?} differs between two runs");
    }
    // Every plot as SVG and as PNG (the PNGs byte-identical too, above).
    for plot in [
        "queue_depth",
        "flow_rates",
        "fct_slowdown",
        "pause_timeline",
    ] {
        let svg = read(a.path(), &format!("{plot}.svg"));
        assert!(svg.starts_with("<svg"), "{plot}.svg");
        let png = std::fs::read(a.path().join(format!("{plot}.png"))).unwrap();
        assert_eq!(png.get(..8), Some(&b"\x89PNG\r\n\x1a\n"[..]), "{plot}.png");
    }
    // The seed drives the random workload: another seed, other flows.
    let random = |seed| {
        let text = std::fs::read_to_string(scenario_path("incast-2to1-40g.toml")).unwrap()
            + "\n[[random]]\ncdf = \"websearch\"\nload = 0.5\nstop = \"5ms\"\n";
        headroom_sim::scenario::parse(
            &text,
            "r.toml",
            &scenario_path(""),
            &LoadOptions {
                seed: Some(seed),
                time_divisor: None,
            },
        )
        .unwrap()
        .flows
    };
    assert_eq!(random(1), random(1));
    assert_ne!(random(1), random(2));
}

trait CloneWithDir {
    fn clone_with_dir(&self, other: &RunReport) -> RunReport;
}

impl CloneWithDir for RunReport {
    /// The report with the other run's file paths (the directories differ, nothing else may).
    fn clone_with_dir(&self, other: &RunReport) -> RunReport {
        RunReport {
            files: other.files.clone(),
            ..self.clone()
        }
    }
}

#[test]
fn incast_2to1_is_lossless_and_dcqcn_shares_the_bottleneck() {
    let s = load_reduced("incast-2to1-40g.toml", 4);
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(&s, dir.path());
    assert_eq!(r.drops, 0);
    let rates = read(dir.path(), "rates.csv");
    // Goodput of each flow over the second half of the run: both get a share and together they
    // never exceed the 40 Gb/s port (1024 B payloads in 1106 B on the wire: ≤ 37 Gb/s). At
    // this reduced length DCQCN (paper mode, R_AI = 40 Mb/s) is still recovering from its
    // first cuts; the full 20 ms run fills ~35 Gb/s (docs/sim.md).
    let half = s.duration_ns / 2;
    let mean = |flow: &str| {
        let r: Vec<f64> = rows(&rates, 1, flow)
            .iter()
            .filter(|r| r[0].parse::<u64>().unwrap() > half)
            .map(|r| r[5].parse::<f64>().unwrap())
            .collect();
        r.iter().sum::<f64>() / r.len() as f64 / 1e9
    };
    let (a, b) = (mean("0"), mean("1"));
    assert!(a > 5.0 && b > 5.0, "{a} {b}");
    assert!(a + b > 20.0 && a + b < 37.1, "{a} + {b}");
    assert!((a - b).abs() < 0.25 * (a + b), "a fair share: {a} vs {b}");
    let hosts = read(dir.path(), "hosts.csv");
    let last = rows(&hosts, 1, "h2").last().unwrap().clone();
    assert!(
        last[4].parse::<u64>().unwrap() > 0,
        "the receiver sent CNPs"
    );
}

#[test]
fn incast_8to1_pfc_only_pauses_every_sender_and_dcqcn_pauses_less() {
    let mut xoffs = Vec::new();
    for name in ["incast-8to1-40g-nodcqcn.toml", "incast-8to1-40g-dcqcn.toml"] {
        let s = load_reduced(name, 4);
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(&s, dir.path());
        assert_eq!(r.lossless_drops, 0, "{name}");
        let events = read(dir.path(), "events.csv");
        let n = events.lines().filter(|l| l.ends_with(",xoff")).count();
        xoffs.push(n);
        let fct = read(dir.path(), "fct.csv");
        assert_eq!(fct.lines().count(), 1 + r.flows_bounded);
    }
    assert!(xoffs[0] > 0, "PFC paused the senders");
    assert!(xoffs[1] < xoffs[0], "DCQCN needs fewer pauses: {xoffs:?}");
}

#[test]
fn the_victim_flow_is_paused_by_pfc_though_its_path_is_free() {
    let s = load_reduced("victim-flow.toml", 2);
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(&s, dir.path());
    assert_eq!(r.lossless_drops, 0);
    let events = read(dir.path(), "events.csv");
    // s1 pauses s0 on the inter-switch link (port 0 of s1 faces s0).
    assert!(
        events
            .lines()
            .any(|l| l.starts_with(|c: char| c.is_ascii_digit()) && l.contains(",s1,0,3,xoff")),
        "{events}"
    );
    let rates = read(dir.path(), "rates.csv");
    // The victim (flow 0, h18 → h17) runs near line rate before the burst and far slower once
    // s1's PG from s0 is in XOFF.
    let goodput = |from: u64, to: u64| {
        let v: Vec<f64> = rows(&rates, 1, "0")
            .iter()
            .filter(|r| (from..to).contains(&r[0].parse::<u64>().unwrap()))
            .map(|r| r[5].parse::<f64>().unwrap())
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64 / 1e9
    };
    let burst = 500_000; // 1 ms / 2
    let before = goodput(200_000, burst);
    let during = goodput(burst + 1_500_000, burst + 2_400_000);
    assert!(before > 30.0, "victim before: {before} Gb/s");
    assert!(
        during < before * 0.5,
        "victim during the burst: {during} vs {before} Gb/s"
    );
}

#[test]
fn a_pfc_storm_stalls_the_port_and_the_watchdog_breaks_it() {
    // A twentieth of the shipped 1 s (the full run is for `headroom sim` in release: once the
    // watchdog drops, go-back-N resends at line rate into the stormed queue, ~2 M frames). The
    // watchdog's times (200 ms detection and restoration, 100 ms poll: the configuration's
    // minimum is 100 ms, as SONiC's) are scaled with the workload here, in the core's
    // parameters, so that the storm, the detection and the restoration keep their proportions.
    const DIVISOR: u64 = 20;
    for (name, watchdog) in [
        ("pfc-storm-no-watchdog.toml", false),
        ("pfc-storm-watchdog.toml", true),
    ] {
        let mut s = load_reduced(name, DIVISOR);
        for params in &mut s.switch_params {
            params.watchdog.poll_interval_ns /= DIVISOR;
            for port in &mut params.ports {
                if let Some(wd) = &mut port.watchdog {
                    wd.detection_time_ns /= DIVISOR;
                    wd.restoration_time_ns /= DIVISOR;
                }
            }
        }
        let wd = s.switch_params[0].ports[1].watchdog;
        assert_eq!(wd.is_some(), watchdog, "{name}");
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(&s, dir.path());
        let events = read(dir.path(), "events.csv");
        let at = |what: &str| -> Vec<u64> {
            events
                .lines()
                .filter(|l| l.ends_with(what))
                .map(|l| l.split(',').next().unwrap().parse().unwrap())
                .collect()
        };
        let detected = at(",storm_detected");
        if let Some(wd) = wd {
            // The queue to h1 (s0 port 1, queue 3) sticks when the storm starts (50 ms / 20,
            // as h0's second burst arrives); declared after the detection time, at the next
            // poll: in [start + detection, start + detection + poll).
            let start = 50_000_000 / DIVISOR;
            let poll = s.switch_params[0].watchdog.poll_interval_ns;
            let window = start + wd.detection_time_ns..start + wd.detection_time_ns + poll;
            assert!(!detected.is_empty(), "{events}");
            assert!(
                window.contains(&detected[0]),
                "{detected:?} not in {window:?}"
            );
            assert!(events.contains(",s0,1,3,storm_detected"), "{events}");
            // Restored once the storm (until 650 ms / 20) has been silent for the restoration
            // time, at the poll after.
            let stop = 650_000_000 / DIVISOR;
            let restored = at(",storm_restored");
            assert!(events.contains(",s0,1,3,storm_restored"), "{events}");
            assert!(
                restored.iter().any(|&t| (stop + wd.restoration_time_ns
                    ..stop + wd.restoration_time_ns + 2 * poll)
                    .contains(&t)),
                "{restored:?}"
            );
            assert!(r.drops > 0, "the watchdog dropped for the stormed queue");
        } else {
            assert!(detected.is_empty(), "{events}");
            assert_eq!(r.drops, 0);
        }
    }
}

#[test]
fn the_k4_fat_tree_routes_websearch_flows_over_every_core_switch_without_loss() {
    for name in [
        "fat-tree-k4-websearch-0.3.toml",
        "fat-tree-k4-websearch-0.5.toml",
    ] {
        let s = load_reduced(name, 8);
        assert!(s.topology.routed, "{name}");
        assert_eq!(
            (s.topology.hosts.len(), s.topology.switches.len()),
            (16, 20)
        );
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(&s, dir.path());
        assert_eq!((r.drops, r.lossless_drops), (0, 0), "{name}");
        assert!(
            r.flows_bounded >= 5 && r.flows_completed * 2 >= r.flows_bounded,
            "{name}: {} of {} flows completed",
            r.flows_completed,
            r.flows_bounded
        );
        // Flows between pods crossed every core switch (ECMP over the four paths up).
        let ports = read(dir.path(), "ports.csv");
        let last_time = ports.lines().last().unwrap().split(',').next().unwrap();
        for c in 0..4 {
            let core = format!("core{c}");
            let rx: u64 = rows(&ports, 1, &core)
                .iter()
                .filter(|r| r[0] == last_time)
                .map(|r| r[3].parse::<u64>().unwrap())
                .sum();
            assert!(rx > 0, "{name}: {core} carried nothing");
        }
        // Every frame a switch received (but PFC) was routed through one of its next hops.
        let ecmp = read(dir.path(), "ecmp.csv");
        let mut through_members = 0;
        for (i, sw) in s.topology.switches.iter().enumerate() {
            let routed: u64 = rows(&ecmp, 0, sw)
                .iter()
                .map(|r| r[4].parse::<u64>().unwrap())
                .sum();
            let received: u64 = rows(&ports, 1, sw)
                .iter()
                .filter(|r| r[0] == last_time)
                .map(|r| r[3].parse::<u64>().unwrap() - r[8].parse::<u64>().unwrap())
                .sum();
            assert_eq!(
                routed, received,
                "{name}: {sw} (switch {i}): routed vs received"
            );
            through_members += rows(&ecmp, 0, sw)
                .iter()
                .filter(|r| r[3] == "true")
                .map(|r| r[4].parse::<u64>().unwrap())
                .sum::<u64>();
        }
        assert!(through_members > 0, "{name}: no packet took an ECMP member");
        // Slowdowns are at least 1 (the ideal FCT is a lower bound on the routed path too).
        let fct = read(dir.path(), "fct.csv");
        for row in fct.lines().skip(1) {
            let slowdown = row.rsplit(',').next().unwrap();
            if let Ok(v) = slowdown.parse::<f64>() {
                assert!(v >= 0.99, "{name}: {row}");
            }
        }
    }
}

#[test]
fn the_k8_fat_tree_builds_its_80_switches_and_routes_between_pods() {
    // A fiftieth of the shipped 1 ms (the scale case is for `headroom sim` in release).
    let s = load_reduced("fat-tree-k8-websearch-0.5.toml", 50);
    assert_eq!(
        (s.topology.hosts.len(), s.topology.switches.len()),
        (128, 80)
    );
    let dir = tempfile::tempdir().unwrap();
    let r = run_in(&s, dir.path());
    assert_eq!((r.drops, r.lossless_drops), (0, 0));
    assert!(r.flows_bounded > 0, "{r:?}");
    // Some flow went between pods: through a core switch.
    let ports = read(dir.path(), "ports.csv");
    let last_time = ports.lines().last().unwrap().split(',').next().unwrap();
    let core_rx: u64 = ports
        .lines()
        .skip(1)
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r[0] == last_time && r[1].starts_with("core"))
        .map(|r| r[3].parse::<u64>().unwrap())
        .sum();
    assert!(core_rx > 0, "nothing crossed the core");
}
