//! The Prometheus exposition of a running in-process switch with traffic: `promtool check
//! metrics` accepts it, every family is well formed (HELP, TYPE, one group, counters end in
//! `_total`, summaries complete), the values match the traffic, and every metric and label the
//! Grafana dashboard (docs/grafana-dashboard.json) uses exists in it.

#[path = "../../runtime/tests/control_harness/mod.rs"]
mod control_harness;
#[allow(dead_code)] // The HTTP exporter is not used here.
#[path = "../src/metrics.rs"]
mod metrics;

use control_harness::{config_text, pfc_frame, udp_frame, Switch, A, C};
use headroom_runtime::protocol::{Change, Request, Show};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::process::{Command, Stdio};

const LEN: usize = 1000;

/// One sample line.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

/// Label pairs of a series, sorted.
type Labels = Vec<(String, String)>;
/// One summary series: (quantile, value) pairs, and how many of `_sum`/`_count` were seen.
type SummarySeries = (Vec<(f64, f64)>, usize);

/// One metric family: its TYPE and samples.
#[derive(Debug, Default)]
struct Family {
    kind: String,
    help: bool,
    samples: Vec<Sample>,
}

fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut labels = BTreeMap::new();
    let mut chars = text.chars().peekable();
    loop {
        let name: String = chars.by_ref().take_while(|c| *c != '=').collect();
        if name.is_empty() {
            return labels;
        }
        assert_eq!(chars.next(), Some('"'), "label {name} value is not quoted");
        let mut value = String::new();
        loop {
            match chars.next().expect("unterminated label value") {
                '\\' => match chars.next().expect("dangling escape") {
                    'n' => value.push('\n'),
                    c @ ('\\' | '"') => value.push(c),
                    c => panic!("bad escape \\{c}"),
                },
                '"' => break,
                c => value.push(c),
            }
        }
        let name = name.trim_start_matches(',').to_owned();
        assert!(
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "label name {name:?}"
        );
        assert!(
            labels.insert(name.clone(), value).is_none(),
            "label {name} twice"
        );
        if chars.peek() == Some(&',') {
            chars.next();
        }
    }
}

/// Parses the text format strictly: HELP and TYPE once per family before its samples, and
/// every family's lines in one group.
fn parse_exposition(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    let mut current: Option<String> = None;
    let mut closed: BTreeSet<String> = BTreeSet::new();
    let mut open =
        |families: &mut BTreeMap<String, Family>, name: &str, current: &mut Option<String>| {
            if current.as_deref() != Some(name) {
                if let Some(previous) = current.take() {
                    closed.insert(previous);
                }
                assert!(
                    !closed.contains(name),
                    "family {name} is split into two groups"
                );
                *current = Some(name.to_owned());
            }
            families.entry(name.to_owned()).or_default();
        };
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP text");
            assert!(!help.trim().is_empty(), "{name}: empty HELP");
            open(&mut families, name, &mut current);
            let f = families.get_mut(name).unwrap();
            assert!(
                !f.help && f.kind.is_empty() && f.samples.is_empty(),
                "{name}: HELP late or twice"
            );
            f.help = true;
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE kind");
            open(&mut families, name, &mut current);
            let f = families.get_mut(name).unwrap();
            assert!(
                f.kind.is_empty() && f.samples.is_empty(),
                "{name}: TYPE late or twice"
            );
            assert!(
                ["counter", "gauge", "summary", "histogram", "untyped"].contains(&kind),
                "{name}: TYPE {kind}"
            );
            f.kind = kind.to_owned();
        } else if line.starts_with('#') || line.is_empty() {
            continue;
        } else {
            let (series, value) = line.rsplit_once(' ').expect("sample value");
            let (name, labels) = match series.split_once('{') {
                Some((n, l)) => (n, parse_labels(l.strip_suffix('}').expect("closing brace"))),
                None => (series, BTreeMap::new()),
            };
            let value: f64 = value
                .parse()
                .unwrap_or_else(|e| panic!("{line}: value: {e}"));
            let family = current.clone().expect("a sample before any TYPE");
            let f = &families[&family];
            let belongs = name == family
                || (f.kind == "summary"
                    && [format!("{family}_sum"), format!("{family}_count")]
                        .contains(&name.to_owned()));
            assert!(
                belongs,
                "sample {name} outside its family group (in {family})"
            );
            families.get_mut(&family).unwrap().samples.push(Sample {
                name: name.to_owned(),
                labels,
                value,
            });
        }
    }
    families
}

fn value(families: &BTreeMap<String, Family>, name: &str, labels: &[(&str, &str)]) -> f64 {
    let family = families
        .get(name)
        .or_else(|| families.get(name.trim_end_matches("_sum").trim_end_matches("_count")))
        .unwrap_or_else(|| panic!("no family {name}"));
    let found: Vec<&Sample> = family
        .samples
        .iter()
        .filter(|s| {
            s.name == name
                && labels.len() == s.labels.len()
                && labels
                    .iter()
                    .all(|(k, v)| s.labels.get(*k).map(String::as_str) == Some(*v))
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {labels:?}");
    found[0].value
}

/// A switch that saw traffic, PFC both ways and a congestion episode.
fn busy_switch() -> (Switch, u64) {
    let mut sw = Switch::start(&config_text(""));
    sw.learn_c();
    // Congest PG 3 of Ethernet0 behind a held Ethernet4: PFC out of Ethernet0.
    let config = sw.control.config().clone();
    let derived = headroom_config::derived(&config);
    let xoff_point = derived.ports[0].priority_groups[3]
        .xoff_point_bytes
        .unwrap();
    let set_tx = |sw: &mut Switch, enable: bool| {
        let r = sw.request(&Request::Set {
            change: Change::PortTx {
                port: "Ethernet4".into(),
                enable,
            },
        });
        assert!(r.ok);
    };
    set_tx(&mut sw, false);
    let n = xoff_point.div_ceil(1024) + 4;
    for _ in 0..n {
        sw.inject(0, &udp_frame(A, C, 3, 0, LEN));
    }
    sw.collect(0, 1);
    set_tx(&mut sw, true);
    assert_eq!(sw.collect(1, n as usize).len(), n as usize);
    // PFC received on Ethernet4.
    for _ in 0..3 {
        sw.inject(1, &pfc_frame(C, 0b1_1000, 0));
    }
    sw.wait_for("PFC received", |sw| {
        sw.control.total_stats(sw.running(), 1).pfc_rx[4] == 3
    });
    (sw, n)
}

fn promtool_check(exposition: &str) -> std::process::Output {
    let mut child = match Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    {
        Ok(c) => c,
        Err(e) => panic!(
            "promtool is needed to check the exposition and could not run ({e}): \
             apt-get install prometheus (scripts/test.sh installs it)"
        ),
    };
    child
        .stdin
        .take()
        .unwrap()
        .write_all(exposition.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn promtool_accepts_the_exposition_and_families_are_well_formed() {
    let (mut sw, n) = busy_switch();
    // A watermark `show` folds the dataplane's read-and-clear watermarks into the views now
    // (else the control loop does it every 500 ms).
    let _: Vec<headroom_runtime::protocol::WatermarkRow> = sw.show(Show::QueueWatermark {
        persistent: true,
        kind: headroom_runtime::protocol::QueueWatermarkKind::Total,
    });
    let text = metrics::render(&sw.control, sw.running());

    let out = promtool_check(&text);
    assert!(
        out.status.success() && out.stdout.is_empty() && out.stderr.is_empty(),
        "promtool check metrics: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // A negative control: promtool does complain about a bad counter name.
    let bad = promtool_check("# HELP x_frames Frames.\n# TYPE x_frames counter\nx_frames 1\n");
    assert!(!bad.status.success() || !bad.stdout.is_empty() || !bad.stderr.is_empty());

    let families = parse_exposition(&text);
    assert!(families.len() >= 25, "{} families", families.len());
    let mut series = BTreeSet::new();
    for (name, f) in &families {
        assert!(name.starts_with("headroom_"), "{name}");
        assert!(f.help && !f.kind.is_empty(), "{name}: HELP and TYPE");
        assert!(!f.samples.is_empty(), "{name}: no samples");
        match f.kind.as_str() {
            "counter" => {
                assert!(
                    name.ends_with("_total"),
                    "counter {name} must end in _total"
                );
                assert!(f
                    .samples
                    .iter()
                    .all(|s| s.value.is_finite() && s.value >= 0.0));
            }
            "gauge" => assert!(!name.ends_with("_total"), "gauge {name} ends in _total"),
            "summary" => {
                // Per label set: the quantiles, non-decreasing, then _sum and _count.
                let mut sets: BTreeMap<Labels, SummarySeries> = BTreeMap::new();
                for s in &f.samples {
                    let mut key: Vec<(String, String)> = s
                        .labels
                        .iter()
                        .filter(|(k, _)| *k != "quantile")
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    key.sort();
                    let entry = sets.entry(key).or_default();
                    if s.name == *name {
                        let q: f64 = s.labels["quantile"].parse().unwrap();
                        assert!((0.0..=1.0).contains(&q));
                        entry.0.push((q, s.value));
                    } else {
                        assert!(s.value.is_finite() && s.value >= 0.0, "{s:?}");
                        entry.1 += 1;
                    }
                }
                for (labels, (quantiles, sum_count)) in sets {
                    assert_eq!(sum_count, 2, "{name} {labels:?}: _sum and _count");
                    assert_eq!(quantiles.len(), 4, "{name} {labels:?}");
                    let values: Vec<f64> = quantiles.iter().map(|q| q.1).collect();
                    assert!(
                        values.iter().all(|v| v.is_nan())
                            || values.windows(2).all(|w| w[0] <= w[1]),
                        "{name} {labels:?}: quantiles {values:?}"
                    );
                }
            }
            other => panic!("{name}: unexpected type {other}"),
        }
        for s in &f.samples {
            assert!(
                series.insert((s.name.clone(), format!("{:?}", s.labels))),
                "duplicate series {s:?}"
            );
        }
    }

    // The values are the switch's.
    let rx0 = value(
        &families,
        "headroom_port_rx_frames_total",
        &[("port", "Ethernet0")],
    );
    assert_eq!(rx0, n as f64);
    assert_eq!(
        value(
            &families,
            "headroom_port_rx_bytes_total",
            &[("port", "Ethernet0")]
        ),
        (n as usize * LEN) as f64
    );
    assert_eq!(
        value(
            &families,
            "headroom_queue_tx_frames_total",
            &[("port", "Ethernet4"), ("queue", "3")]
        ),
        n as f64
    );
    assert_eq!(
        value(
            &families,
            "headroom_pfc_rx_frames_total",
            &[("port", "Ethernet4"), ("priority", "4")]
        ),
        3.0
    );
    let pfc_tx = sw.control.total_stats(sw.running(), 0).pfc_tx[3];
    assert!(pfc_tx >= 2, "XOFF then XON at least");
    assert_eq!(
        value(
            &families,
            "headroom_pfc_tx_frames_total",
            &[("port", "Ethernet0"), ("priority", "3")]
        ),
        pfc_tx as f64
    );
    assert!(
        value(
            &families,
            "headroom_pg_xoff_total",
            &[("port", "Ethernet0"), ("pg", "3")]
        ) >= 1.0
    );
    // SONiC's portstat on SAI's counters: Ethernet4 received C's hello and 3 PFC frames; the
    // PFC frames are MAC Control, not RX_OK. PG 3 of Ethernet0 saw every frame of the burst.
    let e4 = [("port", "Ethernet4")];
    assert_eq!(value(&families, "headroom_port_rx_frames_total", &e4), 4.0);
    assert_eq!(
        value(&families, "headroom_port_mac_control_rx_frames_total", &e4),
        3.0
    );
    assert_eq!(
        value(&families, "headroom_port_rx_ok_frames_total", &e4),
        1.0
    );
    assert_eq!(
        value(&families, "headroom_port_rx_discard_frames_total", &e4),
        0.0
    );
    let pg3 = [("port", "Ethernet0"), ("pg", "3")];
    assert_eq!(
        value(&families, "headroom_pg_rx_frames_total", &pg3),
        n as f64
    );
    assert_eq!(
        value(&families, "headroom_pg_rx_bytes_total", &pg3),
        (n as usize * LEN) as f64
    );
    // The lossless queue reserves nothing: its shared watermark is its total.
    let wm = |kind| {
        value(
            &families,
            "headroom_queue_watermark_bytes",
            &[("port", "Ethernet4"), ("queue", "3"), ("kind", kind)],
        )
    };
    assert!(wm("total") > 0.0);
    assert_eq!(wm("shared"), wm("total"));
    assert_eq!(value(&families, "headroom_up", &[]), 1.0);
    assert_eq!(
        value(
            &families,
            "headroom_port_tx_enabled",
            &[("port", "Ethernet4")]
        ),
        1.0
    );
    // Delay summary of the busy queue: count = frames sent, quantiles known; idle: NaN.
    let q3 = [("port", "Ethernet4"), ("queue", "3")];
    assert_eq!(
        value(&families, "headroom_queue_delay_seconds_count", &q3),
        n as f64
    );
    assert!(value(&families, "headroom_queue_delay_seconds_sum", &q3) > 0.0);
    let p99 = value(
        &families,
        "headroom_queue_delay_seconds",
        &[("port", "Ethernet4"), ("queue", "3"), ("quantile", "0.99")],
    );
    assert!(p99.is_finite() && p99 > 0.0);
    assert!(value(
        &families,
        "headroom_queue_delay_seconds",
        &[("port", "Ethernet4"), ("queue", "6"), ("quantile", "0.5")]
    )
    .is_nan());
    sw.stop();
}

/// Metric names and label names a PromQL expression refers to.
fn promql_references(expr: &str) -> (Vec<String>, Vec<String>) {
    let mut metrics = Vec::new();
    let mut labels = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(at) = expr[i..].find("headroom_") {
        let start = i + at;
        let end = expr[start..]
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .map_or(expr.len(), |e| start + e);
        metrics.push(expr[start..end].to_owned());
        if bytes.get(end) == Some(&b'{') {
            let close = expr[end..].find('}').unwrap() + end;
            for matcher in expr[end + 1..close].split(',') {
                let name: String = matcher
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                labels.push(name);
            }
            i = close;
        } else {
            i = end;
        }
    }
    let mut rest = expr;
    while let Some(at) = rest.find("by (") {
        let close = rest[at..].find(')').unwrap() + at;
        labels.extend(rest[at + 4..close].split(',').map(|l| l.trim().to_owned()));
        rest = &rest[close..];
    }
    (metrics, labels)
}

/// `{{label}}` references of a legend or annotation text.
fn template_labels(text: &str) -> Vec<String> {
    text.split("{{")
        .skip(1)
        .filter_map(|p| p.split_once("}}").map(|(l, _)| l.trim().to_owned()))
        .filter(|l| l != "value")
        .collect()
}

#[test]
fn grafana_dashboard_is_importable_and_uses_only_exported_metrics() {
    let (sw, _) = busy_switch();
    let families = parse_exposition(&metrics::render(&sw.control, sw.running()));
    sw.stop();
    // Family name → label names its samples carry (Prometheus adds instance and job).
    let mut label_sets: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, f) in &families {
        for s in &f.samples {
            let mut labels: BTreeSet<String> = s.labels.keys().cloned().collect();
            labels.extend(["instance".to_owned(), "job".to_owned()]);
            label_sets
                .entry(s.name.clone())
                .or_default()
                .extend(labels.iter().cloned());
            label_sets.entry(name.clone()).or_default().extend(labels);
        }
    }

    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/grafana-dashboard.json"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let dash: serde_json::Value = serde_json::from_str(&text).expect("well-formed JSON");
    assert!(dash["title"].as_str().is_some_and(|t| !t.is_empty()));
    assert!(dash["uid"].as_str().is_some());
    assert!(dash["schemaVersion"].as_u64().is_some());
    assert!(
        dash.get("id").is_none_or(serde_json::Value::is_null),
        "no instance id"
    );

    // The data source is a variable, so that the import asks for it.
    let vars = dash["templating"]["list"].as_array().unwrap();
    let ds = vars
        .iter()
        .find(|v| v["type"] == "datasource")
        .expect("a data source variable");
    assert_eq!(ds["query"], "prometheus");
    let ds_ref = format!("${{{}}}", ds["name"].as_str().unwrap());

    // Every query: panels, variables, annotations.
    let mut queries: Vec<(String, String, Vec<String>)> = Vec::new(); // (where, expr, legend labels)
    let panels = dash["panels"].as_array().unwrap();
    let mut ids = BTreeSet::new();
    let mut kinds = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().unwrap().to_owned();
        assert!(
            ids.insert(p["id"].as_u64().unwrap()),
            "{title}: duplicate id"
        );
        let grid = &p["gridPos"];
        assert!(
            grid["w"].as_u64().unwrap() + grid["x"].as_u64().unwrap() <= 24,
            "{title}: wider than the grid"
        );
        let kind = p["type"].as_str().unwrap();
        kinds.insert(kind.to_owned());
        if kind == "row" {
            continue;
        }
        assert_eq!(p["datasource"]["uid"], ds_ref.as_str(), "{title}");
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "{title}: no query");
        let mut refs = BTreeSet::new();
        for t in targets {
            assert_eq!(t["datasource"]["uid"], ds_ref.as_str(), "{title}");
            assert!(refs.insert(t["refId"].as_str().unwrap().to_owned()));
            queries.push((
                title.clone(),
                t["expr"].as_str().unwrap().to_owned(),
                template_labels(t["legendFormat"].as_str().unwrap_or("")),
            ));
        }
    }
    for want in ["timeseries", "heatmap", "state-timeline", "stat"] {
        assert!(kinds.contains(want), "a {want} panel");
    }
    for v in vars.iter().filter(|v| v["type"] == "query") {
        assert_eq!(v["datasource"]["uid"], ds_ref.as_str());
        queries.push((
            format!("variable {}", v["name"]),
            v["query"]["query"].as_str().unwrap().to_owned(),
            Vec::new(),
        ));
    }
    let annotations = dash["annotations"]["list"].as_array().unwrap();
    let mut pfc_annotation = false;
    for a in annotations.iter().filter(|a| a.get("expr").is_some()) {
        assert_eq!(a["datasource"]["uid"], ds_ref.as_str());
        let expr = a["expr"].as_str().unwrap().to_owned();
        pfc_annotation |= expr.contains("headroom_pfc_tx_frames_total");
        let mut legend = template_labels(a["textFormat"].as_str().unwrap_or(""));
        legend.extend(
            a["tagKeys"]
                .as_str()
                .unwrap_or("")
                .split(',')
                .filter(|k| !k.is_empty())
                .map(str::to_owned),
        );
        queries.push((format!("annotation {}", a["name"]), expr, legend));
    }
    assert!(pfc_annotation, "PFC events are annotations");

    let mut used = BTreeSet::new();
    for (place, expr, legend) in &queries {
        let (metrics, labels) = promql_references(expr);
        assert!(!metrics.is_empty(), "{place}: no headroom metric in {expr}");
        let mut available = BTreeSet::new();
        for m in &metrics {
            let set = label_sets
                .get(m)
                .unwrap_or_else(|| panic!("{place}: {m} is not exported"));
            available.extend(set.iter().cloned());
            used.insert(m.clone());
        }
        for l in labels.iter().chain(legend) {
            assert!(
                available.contains(l),
                "{place}: label {l} not on {metrics:?}"
            );
        }
    }
    // The panels the dashboard promises.
    for m in [
        "headroom_queue_depth_bytes",
        "headroom_pfc_tx_frames_total",
        "headroom_pfc_rx_frames_total",
        "headroom_queue_ecn_marked_frames_total",
        "headroom_port_drops_total",
        "headroom_pfcwd_stormed",
        "headroom_queue_delay_seconds",
    ] {
        assert!(used.contains(m), "the dashboard does not show {m}");
    }
}
