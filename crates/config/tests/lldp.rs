//! `[lldp]` and the per-port `lldp_admin_status`: defaults, overrides and refusals.
mod common;

use common::{assert_has, assert_has_prefix, errors, ok, PORT};
use headroom_config::LldpAdminStatus;

#[test]
fn defaults() {
    let (config, _) = ok(PORT);
    let lldp = &config.lldp;
    assert!(lldp.enabled);
    assert_eq!(lldp.tx_interval_s, 30);
    assert_eq!(lldp.tx_hold, 4);
    assert_eq!(lldp.ttl_s(), 120);
    assert_eq!(lldp.tx_fast_init, 4);
    assert_eq!(lldp.tx_fast_interval_s, 1);
    assert_eq!(lldp.system_name, "headroom", "defaults to switch.name");
    assert!(lldp.system_description.starts_with("headroom "));
    assert_eq!(lldp.roce_priority, None);
    assert_eq!(config.ports[0].lldp_admin_status, LldpAdminStatus::RxAndTx);
}

#[test]
fn settings_and_port_overrides() {
    let text = format!(
        "[switch]\nname = \"leaf1\"\n{PORT}lldp_admin_status = \"rx_only\"\n\
         [port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\n\
         [port.Ethernet8]\ndevice = \"eth2\"\nspeed = \"10G\"\nlldp_admin_status = \"rx_and_tx\"\n\
         [port_defaults]\nlldp_admin_status = \"tx_only\"\n\
         [lldp]\ntx_interval_s = 10\ntx_hold = 3\ntx_fast_init = 2\ntx_fast_interval_s = 2\n\
         system_description = \"lab leaf\"\nroce_priority = 4\n"
    );
    let (config, _) = ok(&text);
    assert_eq!(config.lldp.ttl_s(), 30);
    assert_eq!(config.lldp.tx_fast_init, 2);
    assert_eq!(config.lldp.tx_fast_interval_s, 2);
    assert_eq!(config.lldp.system_name, "leaf1");
    assert_eq!(config.lldp.system_description, "lab leaf");
    assert_eq!(config.lldp.roce_priority, Some(4));
    let status: Vec<LldpAdminStatus> = config.ports.iter().map(|p| p.lldp_admin_status).collect();
    assert_eq!(
        status,
        [
            LldpAdminStatus::RxOnly,
            LldpAdminStatus::TxOnly,
            LldpAdminStatus::RxAndTx
        ]
    );
}

#[test]
fn disabled_globally_unless_a_port_says_otherwise() {
    let text = format!(
        "{PORT}[port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\nlldp_admin_status = \"rx_and_tx\"\n\
         [lldp]\nenabled = false\nsystem_name = \"sw\"\n"
    );
    let (config, _) = ok(&text);
    assert_eq!(config.ports[0].lldp_admin_status, LldpAdminStatus::Disabled);
    assert_eq!(config.ports[1].lldp_admin_status, LldpAdminStatus::RxAndTx);
    assert_eq!(config.lldp.system_name, "sw");
}

#[test]
fn ttl_saturates_at_65535() {
    let (config, _) = ok(&format!(
        "{PORT}[lldp]\ntx_interval_s = 3600\ntx_hold = 100\n"
    ));
    assert_eq!(config.lldp.ttl_s(), 65535);
}

#[test]
fn ranges_are_refused_with_key_and_line() {
    let errors = errors(&format!(
        "{PORT}[lldp]\ntx_interval_s = 0\ntx_hold = 101\ntx_fast_init = 9\ntx_fast_interval_s = 0\nroce_priority = 8\n"
    ));
    assert_has_prefix(
        &errors,
        "t.toml:5:17: lldp.tx_interval_s: 0 is out of range",
    );
    assert_has_prefix(&errors, "t.toml:6:11: lldp.tx_hold: 101 is out of range");
    assert_has_prefix(&errors, "t.toml:7:16: lldp.tx_fast_init: 9 is out of range");
    assert_has_prefix(
        &errors,
        "t.toml:8:22: lldp.tx_fast_interval_s: 0 is out of range",
    );
    assert_has_prefix(
        &errors,
        "t.toml:9:17: lldp.roce_priority: 8 is out of range",
    );
}

#[test]
fn fast_interval_longer_than_interval_is_refused() {
    let errors = errors(&format!(
        "{PORT}[lldp]\ntx_interval_s = 5\ntx_fast_interval_s = 6\n"
    ));
    assert_has_prefix(
        &errors,
        "t.toml:6:22: lldp.tx_fast_interval_s: 6 s is longer than lldp.tx_interval_s (5 s)",
    );
}

#[test]
fn bad_strings_and_statuses_are_refused() {
    let long = "x".repeat(256);
    let found = errors(&format!(
        "{PORT}[lldp]\nsystem_name = \"{long}\"\nsystem_description = \"a\\nb\"\n"
    ));
    assert_has_prefix(&found, "t.toml:5:15: lldp.system_name: ");
    assert_has_prefix(&found, "t.toml:6:22: lldp.system_description: ");
    let found = errors(&format!("{PORT}lldp_admin_status = \"rxtx\"\n"));
    assert_has_prefix(
        &found,
        "t.toml:4:21: port.Ethernet0.lldp_admin_status: unknown variant `rxtx`",
    );
    let found = errors(&format!("{PORT}[lldp]\nenable = true\n"));
    assert_has_prefix(&found, "t.toml:5:1: lldp.enable: unknown field `enable`");
}

#[test]
fn roce_priority_must_be_lossless_where_advertised() {
    // pfc_enable defaults to 3,4: priority 5 would advertise RoCE on a lossy priority.
    let errors = errors(&format!("{PORT}[lldp]\nroce_priority = 5\n"));
    assert_has(
        &errors,
        "t.toml:5:17: lldp.roce_priority: priority 5 is not in pfc_enable of port Ethernet0 (3,4): \
         the RoCEv2 application entry would send RoCE to a lossy priority (set lldp_admin_status \
         = \"rx_only\" or \"disabled\" on ports without PFC there)",
    );
    // A port that does not send LLDP does not advertise it.
    ok(&format!(
        "{PORT}lldp_admin_status = \"rx_only\"\n[lldp]\nroce_priority = 5\n"
    ));
}
