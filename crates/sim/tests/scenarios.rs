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

/// Divides the PFC watchdog's times (detection, restoration, poll) of every switch by
/// `divisor`, as `load_reduced` divides the workload's, so that they keep their proportions.
fn scale_watchdog(s: &mut Scenario, divisor: u64) {
    for params in &mut s.switch_params {
        params.watchdog.poll_interval_ns /= divisor;
        for port in &mut params.ports {
            if let Some(wd) = &mut port.watchdog {
                wd.detection_time_ns /= divisor;
                wd.restoration_time_ns /= divisor;
            }
        }
    }
}

/// Times of the events of `events.csv` whose line ends with `what`.
fn event_times(events: &str, what: &str) -> Vec<u64> {
    events
        .lines()
        .filter(|l| l.ends_with(what))
        .map(|l| l.split(',').next().unwrap().parse().unwrap())
        .collect()
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
        scale_watchdog(&mut s, DIVISOR);
        let wd = s.switch_params[0].ports[1].watchdog;
        assert_eq!(wd.is_some(), watchdog, "{name}");
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(&s, dir.path());
        let events = read(dir.path(), "events.csv");
        let at = |what: &str| event_times(&events, what);
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

#[test]
fn the_clockwise_ring_deadlocks_under_pfc_and_the_watchdog_breaks_it() {
    // A fifth of the shipped 1 s, the watchdog's times scaled with it (detection and
    // restoration 40 ms, poll 20 ms). The deadlock itself forms in tens of ms whatever the
    // divisor (it is the time the ring's queues take to fill).
    const DIVISOR: u64 = 5;
    const MS: u64 = 1_000_000;
    // Each switch's ring egress (towards its successor) and ring ingress (from its
    // predecessor), by the ring shape's port order.
    let ring_out = [("s0", "1"), ("s1", "2"), ("s2", "2")];
    let ring_in = [("s0", "2"), ("s1", "1"), ("s2", "1")];
    for (name, watchdog) in [
        ("deadlock-ring3-no-watchdog.toml", false),
        ("deadlock-ring3-watchdog.toml", true),
    ] {
        let mut s = load_reduced(name, DIVISOR);
        scale_watchdog(&mut s, DIVISOR);
        assert!(s.topology.routed && s.topology.routes_one_way, "{name}");
        let dir = tempfile::tempdir().unwrap();
        let r = run_in(&s, dir.path());
        assert_eq!(r.lossless_drops, 0, "{name}: only the watchdog drops");
        // Routed clockwise only: every switch sends to its host and to its successor, and
        // nothing out of its ring ingress port (no route uses it).
        let ecmp = read(dir.path(), "ecmp.csv");
        for ((sw, out), (_, inp)) in ring_out.iter().zip(&ring_in) {
            let hops = rows(&ecmp, 0, sw);
            assert_eq!(hops.len(), 2, "{name}: {ecmp}");
            assert!(
                hops.iter()
                    .any(|h| h[1] == *out && h[4].parse::<u64>().unwrap() > 0),
                "{name}: {ecmp}"
            );
            assert!(hops.iter().all(|h| h[1] != *inp), "{name}: {ecmp}");
        }
        // Every switch paused its predecessor's ring egress: the cycle of XOFFs.
        let events = read(dir.path(), "events.csv");
        for (sw, inp) in ring_in {
            let xoff = event_times(&events, &format!(",{sw},{inp},3,xoff"));
            assert!(!xoff.is_empty(), "{name}: {sw} port {inp} sent no XOFF");
        }
        // Goodput of all flows together, per sample.
        let rates = read(dir.path(), "rates.csv");
        let mut goodput: Vec<(u64, u64)> = Vec::new();
        for row in rates
            .lines()
            .skip(1)
            .map(|l| l.split(',').collect::<Vec<_>>())
        {
            let (t, g) = (row[0].parse().unwrap(), row[5].parse::<u64>().unwrap());
            match goodput.last_mut() {
                Some((last, sum)) if *last == t => *sum += g,
                _ => goodput.push((t, g)),
            }
        }
        let delivered_after = |from: u64| -> u64 {
            goodput
                .iter()
                .filter(|&&(t, _)| t > from)
                .map(|&(_, g)| g)
                .sum()
        };
        assert!(delivered_after(0) > 0, "{name}: traffic flowed first");
        // The stall: the first sample from which nothing is delivered for 10 ms (pauses
        // before the deadlock stop the hosts for 1–2 ms at a time; a deadlock lasts until the
        // end, or until the watchdog acts).
        let stall = goodput
            .iter()
            .map(|&(t, _)| t)
            .find(|&t| {
                t + 10 * MS <= s.duration_ns
                    && goodput
                        .iter()
                        .filter(|&&(u, _)| (t..=t + 10 * MS).contains(&u))
                        .all(|&(_, g)| g == 0)
            })
            .unwrap_or_else(|| panic!("{name}: traffic never stopped for 10 ms"));
        eprintln!("{name}: stalled from {stall} ns; {} drops", r.drops);
        assert!(
            stall < 100 * MS,
            "{name}: the ring deadlocked at {stall} ns"
        );
        let queues = read(dir.path(), "queues.csv");
        let pause = read(dir.path(), "pause.csv");
        let last = s.duration_ns.to_string();
        if !watchdog {
            // Nothing moves from the stall to the end, nothing is dropped, every ring egress
            // queue still holds frames and is held by a pause from its successor.
            assert_eq!(delivered_after(stall), 0, "{name}: it came unstuck");
            assert_eq!(r.drops, 0, "{name}");
            for (sw, out) in ring_out {
                let depth = rows(&queues, 1, sw)
                    .into_iter()
                    .find(|q| q[0] == last && q[2] == out && q[3] == "3")
                    .map(|q| q[4].parse::<u64>().unwrap());
                assert!(depth.is_some_and(|d| d > 0), "{name}: {sw} queue {depth:?}");
                let paused = rows(&pause, 1, sw)
                    .into_iter()
                    .any(|p| p[0] == last && p[2] == out && p[3] == "3" && p[4] == "1");
                assert!(paused, "{name}: {sw} port {out} not paused at the end");
            }
            assert!(event_times(&events, ",storm_detected").is_empty(), "{name}");
        } else {
            // Every ring egress queue is declared stormed after the detection time, at a poll:
            // the queues stuck before the goodput fell to zero (the host queues drain what
            // they held, a few ms at most), so the first detection falls in [stall − 5 ms +
            // detection, stall + detection + poll).
            let wd = s.switch_params[0].ports[0].watchdog.unwrap();
            let poll = s.switch_params[0].watchdog.poll_interval_ns;
            let window = stall + wd.detection_time_ns - 5 * MS..stall + wd.detection_time_ns + poll;
            for (sw, out) in ring_out {
                let detected = event_times(&events, &format!(",{sw},{out},3,storm_detected"));
                assert!(
                    detected
                        .first()
                        .is_some_and(|t| window.contains(t) && t % poll == 0),
                    "{name}: {sw} port {out} detected at {detected:?}, not in {window:?}"
                );
                let restored = event_times(&events, &format!(",{sw},{out},3,storm_restored"));
                assert!(
                    restored.first().is_some_and(|t| t > &detected[0]),
                    "{name}: {sw} port {out} restored at {restored:?}"
                );
            }
            // The watchdog dropped what the stormed queues held and traffic flowed again
            // after the restoration.
            assert!(r.drops > 0, "{name}");
            let restored = event_times(&events, ",storm_restored");
            assert!(
                delivered_after(restored[0]) > 0,
                "{name}: nothing after restoration"
            );
        }
    }
}
