//! `[testing.fault_injection]`: off unless present and acknowledged; every value checked with
//! its key; a loud warning when on.
mod common;

use common::{assert_has_prefix, errors, ok, warnings, PORT};

const TWO_PORTS: &str = "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n\
                         [port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\n";

#[test]
fn absent_means_off() {
    let (config, _) = ok(PORT);
    assert_eq!(config.testing.fault_injection, None);
}

#[test]
fn refused_without_the_acknowledgement() {
    let text = format!("{PORT}[testing.fault_injection]\nseed = 1\n");
    assert_has_prefix(
        &errors(&text),
        "t.toml:4:1: testing.fault_injection.i_understand_this_breaks_traffic: fault injection \
         drops, corrupts and delays frames on purpose",
    );
    let text =
        format!("{PORT}[testing.fault_injection]\ni_understand_this_breaks_traffic = false\n");
    assert_has_prefix(
        &errors(&text),
        "t.toml:5:36: testing.fault_injection.i_understand_this_breaks_traffic:",
    );
}

#[test]
fn an_acknowledged_section_is_resolved_and_warned_about() {
    let text = format!(
        "{TWO_PORTS}[testing.fault_injection]\ni_understand_this_breaks_traffic = true\n\
         seed = 42\nports = [\"Ethernet4\"]\ntx_stalls_per_second = 0.5\ntx_stall_ms = 20\n\
         link_flaps_per_second = 0.1\nlink_down_ms = 300\nhold_frames = 16\n\
         [testing.fault_injection.rx]\ndrop_rate = 0.01\ncorrupt_rate = 0.001\ndelay_rate = 0.1\n\
         delay_max_us = 250\n[testing.fault_injection.tx]\nduplicate_rate = 0.5\nreorder_rate = 0.5\n"
    );
    let (config, warned) = ok(&text);
    let f = config.testing.fault_injection.expect("on");
    assert_eq!(f.seed, 42);
    assert_eq!(f.ports, [1]);
    assert_eq!((f.tx_stalls_per_second, f.tx_stall_ns), (0.5, 20_000_000));
    assert_eq!(
        (f.link_flaps_per_second, f.link_down_ns),
        (0.1, 300_000_000)
    );
    assert_eq!(f.hold_frames, 16);
    assert_eq!(
        (
            f.rx.drop_rate,
            f.rx.corrupt_rate,
            f.rx.delay_rate,
            f.rx.delay_max_ns
        ),
        (0.01, 0.001, 0.1, 250_000)
    );
    assert_eq!(
        (f.tx.duplicate_rate, f.tx.reorder_rate, f.tx.drop_rate),
        (0.5, 0.5, 0.0)
    );
    assert!(
        warned
            .iter()
            .any(|w| w.to_string().contains("FAULT INJECTION IS ON")),
        "{warned:?}"
    );
    // Every port by default.
    let text =
        format!("{TWO_PORTS}[testing.fault_injection]\ni_understand_this_breaks_traffic = true\n");
    assert_eq!(
        ok(&text).0.testing.fault_injection.expect("on").ports,
        [0, 1]
    );
    assert!(warnings(&text)
        .iter()
        .any(|w| w.contains("FAULT INJECTION IS ON")));
}

#[test]
fn bad_values_name_their_key() {
    let head =
        format!("{PORT}[testing.fault_injection]\ni_understand_this_breaks_traffic = true\n");
    for (line, key, reason) in [
        (
            "ports = [\"Ethernet9\"]",
            "testing.fault_injection.ports[0]",
            "no port named \"Ethernet9\"",
        ),
        (
            "ports = [\"Ethernet0\", \"Ethernet0\"]",
            "testing.fault_injection.ports[1]",
            "listed twice",
        ),
        ("seed = -1", "testing.fault_injection.seed", "out of range"),
        (
            "hold_frames = 0",
            "testing.fault_injection.hold_frames",
            "out of range",
        ),
        (
            "link_down_ms = -5",
            "testing.fault_injection.link_down_ms",
            "out of range",
        ),
        (
            "tx_stalls_per_second = nan",
            "testing.fault_injection.tx_stalls_per_second",
            "out of range",
        ),
        (
            "[testing.fault_injection.rx]\ndrop_rate = 1.5",
            "testing.fault_injection.rx.drop_rate",
            "1.5 is out of range 0..=1",
        ),
        (
            "[testing.fault_injection.tx]\ndrop_rate = 0.6\ncorrupt_rate = 0.6",
            "testing.fault_injection.tx",
            "the rates sum to 1.2",
        ),
        (
            "[testing.fault_injection.rx]\nlose_rate = 0.1",
            "testing.fault_injection.rx.lose_rate",
            "unknown field",
        ),
    ] {
        let errors = errors(&format!("{head}{line}\n"));
        assert!(
            errors
                .iter()
                .any(|e| e.contains(&format!(": {key}: ")) && e.contains(reason)),
            "{line}: {errors:#?}"
        );
    }
}
