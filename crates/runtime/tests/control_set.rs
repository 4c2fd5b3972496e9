//! `set`, `config save|rollback|list` through the control socket: changes are validated like
//! the file, applied by a drained restart, and a rollback restores the running configuration
//! text exactly and the dataplane behaviour with it.

mod control_harness;

use control_harness::{config_text, udp_frame, Switch, A, C};
use headroom_runtime::control::edit_key;
use headroom_runtime::protocol::{
    Change, PfcwdConfig, PortSummary, QueueCounters, Request, Response, RunningConfig, Show,
};

fn key(sw: &mut Switch, key: &str, value: &str) -> Response {
    sw.request(&Request::Set {
        change: Change::Key {
            key: key.into(),
            value: value.into(),
        },
    })
}

fn running_text(sw: &mut Switch) -> String {
    sw.show::<RunningConfig>(Show::Config).text
}

/// Sends one untagged DSCP 3 frame A → C and returns the queue of Ethernet4 it left by.
fn queue_of_dscp3(sw: &mut Switch) -> u8 {
    let before: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    sw.inject(0, &udp_frame(A, C, 3, 0, 128));
    assert_eq!(sw.collect(1, 1).len(), 1);
    let after: Vec<QueueCounters> = sw.show(Show::QueueCounters);
    let moved: Vec<u8> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| a.port == "Ethernet4" && a.packets == b.packets + 1)
        .map(|(_, a)| a.queue)
        .collect();
    assert_eq!(moved.len(), 1, "one queue sent the frame: {moved:?}");
    moved[0]
}

#[test]
fn save_set_rollback_restores_text_and_behaviour() {
    let mut sw = Switch::start(&config_text(""));
    let original = running_text(&mut sw);
    assert_eq!(original, std::fs::read_to_string(&sw.config_path).unwrap());
    sw.learn_c();
    assert_eq!(
        queue_of_dscp3(&mut sw),
        3,
        "DSCP trust: DSCP 3 → TC 3 → queue 3"
    );

    let r = sw.request(&Request::ConfigSave {
        name: "before".into(),
    });
    assert!(r.ok, "{:?}", r.error);
    let saved_path = r.data.as_str().unwrap().to_owned();
    assert_eq!(std::fs::read_to_string(&saved_path).unwrap(), original);

    // dot1p trust: untagged frames take default_priority 0 → TC 0 → queue 0.
    let r = key(&mut sw, "port.Ethernet0.trust", "\"dot1p\"");
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(r.data, "applied");
    assert_eq!(sw.restarts, 1);
    let changed = running_text(&mut sw);
    assert_eq!(
        changed,
        edit_key(&original, "port.Ethernet0.trust", "\"dot1p\"").unwrap()
    );
    assert!(changed.contains("trust = \"dot1p\""));
    sw.learn_c();
    assert_eq!(queue_of_dscp3(&mut sw), 0);

    let names: Vec<String> = sw.fetch(&Request::ConfigList);
    assert_eq!(names, ["before"]);
    let r = sw.request(&Request::ConfigRollback {
        name: "before".into(),
    });
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(r.data, "applied");
    assert_eq!(sw.restarts, 2);
    assert_eq!(running_text(&mut sw), original, "exactly the saved text");
    sw.learn_c();
    assert_eq!(queue_of_dscp3(&mut sw), 3, "behaviour restored");
    sw.stop();
}

#[test]
fn invalid_changes_are_refused_with_the_config_error_and_change_nothing() {
    let mut sw = Switch::start(&config_text(""));
    let original = running_text(&mut sw);
    let file = sw.config_path.display().to_string();
    sw.learn_c();

    // Out of range: the exact error `headroom check` gives for the edited file.
    let r = key(&mut sw, "port.Ethernet0.pfc_quanta", "0");
    assert!(!r.ok);
    let edited = edit_key(&original, "port.Ethernet0.pfc_quanta", "0").unwrap();
    let errors = headroom_config::parse(&edited, &file).expect_err("invalid");
    assert_eq!(
        r.error.as_deref(),
        Some(format!("refused: {errors}").as_str())
    );
    assert!(
        r.error.as_deref().unwrap().contains("pfc_quanta"),
        "{:?}",
        r.error
    );

    // A cross-check: watched priorities must be PFC-enabled.
    let r = key(&mut sw, "port.Ethernet0.pfcwd_enable", "[5]");
    assert!(!r.ok);
    assert!(r.error.as_deref().unwrap().starts_with("refused: "));
    assert!(r.error.as_deref().unwrap().contains("pfcwd_enable"));

    // Unknown key (typos are errors).
    let r = key(&mut sw, "port.Ethernet0.pfc_enabel", "[3]");
    assert!(!r.ok);
    assert!(r.error.as_deref().unwrap().contains("pfc_enabel"));

    // Not a TOML value; a path through a non-table.
    let r = key(&mut sw, "port.Ethernet0.pfc_quanta", "1 2");
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("is not a TOML value"));
    let r = key(&mut sw, "port.Ethernet0.speed.x", "1");
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("is not a table"));

    // Valid as a file, but a port cannot move to another device at run time.
    let r = key(&mut sw, "port.Ethernet0.device", "\"m9\"");
    assert!(!r.ok);
    assert!(
        r.error
            .as_deref()
            .unwrap()
            .contains("ports cannot be added"),
        "{:?}",
        r.error
    );

    // Rollback to nothing, names that would escape the snapshot directory.
    let r = sw.request(&Request::ConfigRollback {
        name: "nope".into(),
    });
    assert!(r.error.unwrap().starts_with("no snapshot nope"));
    for bad in ["../etc", ".hidden", "", "a/b"] {
        let r = sw.request(&Request::ConfigSave { name: bad.into() });
        assert!(!r.ok, "{bad:?} accepted");
    }

    assert_eq!(sw.restarts, 0, "nothing was applied");
    assert_eq!(running_text(&mut sw), original, "running config unchanged");
    assert_eq!(queue_of_dscp3(&mut sw), 3, "dataplane unchanged");
    sw.stop();
}

#[test]
fn immediate_changes_are_written_into_the_running_config_and_survive_a_restart() {
    let mut sw = Switch::start(&config_text(""));
    let r = sw.request(&Request::Set {
        change: Change::PortTx {
            port: "Ethernet4".into(),
            enable: false,
        },
    });
    assert!(r.ok);
    assert_eq!(r.data, "port Ethernet4 tx disabled");
    let r = sw.request(&Request::Set {
        change: Change::BigRedSwitch { on: true },
    });
    assert!(r.ok);
    let wd: PfcwdConfig = sw.show(Show::PfcwdConfig);
    assert!(wd.big_red_switch);
    let text = running_text(&mut sw);
    assert!(text.contains("tx_enable = false"), "{text}");
    assert!(text.contains("big_red_switch = true"), "{text}");

    // A restart for another change keeps the port held.
    let r = key(&mut sw, "pfcwd.poll_interval", "100");
    assert!(r.ok, "{:?}", r.error);
    assert_eq!(sw.restarts, 1);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert!(!ports[1].tx_enabled, "still held after the restart");
    let wd: PfcwdConfig = sw.show(Show::PfcwdConfig);
    assert_eq!((wd.poll_interval_ms, wd.big_red_switch), (100, true));

    let r = sw.request(&Request::Set {
        change: Change::PortTx {
            port: "Ethernet4".into(),
            enable: true,
        },
    });
    assert!(r.ok);
    let ports: Vec<PortSummary> = sw.show(Show::Ports);
    assert!(ports[1].tx_enabled);
    sw.stop();
}
