//! Every validation error names file, line, column, key and reason; warnings likewise.
mod common;

use common::{assert_has, assert_has_prefix, errors, ok, parse, parse_on, warnings, PORT};

// ---- syntax and schema -------------------------------------------------------------------------

#[test]
fn syntax_error_has_a_location() {
    let errors = errors("[port.Ethernet0]\ndevice = \"eth0\nspeed = 1\n");
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with("t.toml:2:"), "{}", errors[0]);
}

#[test]
fn unknown_top_level_key_is_refused() {
    let text = format!("{PORT}\n[swtich]\nname = \"x\"\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:5:2: swtich: unknown field `swtich`, expected one of",
    );
}

#[test]
fn unknown_port_key_is_refused() {
    let text = format!("{PORT}cable = \"5m\"\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:4:1: port.Ethernet0.cable: unknown field `cable`",
    );
}

#[test]
fn unknown_nested_key_is_refused() {
    let text = format!("{PORT}[port.Ethernet0.pfcwd]\ndetection = 300\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:5:1: port.Ethernet0.pfcwd.detection: unknown field `detection`",
    );
}

#[test]
fn unknown_key_in_inline_table_is_refused() {
    let text = format!("{PORT}pfcwd = {{ action = \"drop\", acton = \"x\" }}\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:4:28: port.Ethernet0.pfcwd.acton: unknown field `acton`",
    );
}

#[test]
fn unknown_keys_refused_in_every_section() {
    for (section, line) in [
        ("[switch]", "colour = 1"),
        ("[pfcwd]", "interval = 1"),
        ("[runtime]", "threads = 1"),
        ("[dpdk]", "args = []"),
        ("[headroom_calc]", "cell = 1"),
        (
            "[buffer_pool.p]",
            "type = \"ingress\"\nmode = \"dynamic\"\nsize = 1\nshp = 1",
        ),
        (
            "[buffer_profile.p]",
            "pool = \"ingress_lossy_pool\"\nsize = 0\ndynamic_th = 0\nth = 1",
        ),
        ("[wred_profile.w]", "green_min = 1"),
        ("[scheduler.s]", "prio = 1"),
        ("[port_defaults]", "speeed = 1"),
    ] {
        let text = format!("{PORT}{section}\n{line}\n");
        let errors = errors(&text);
        assert!(
            errors.iter().any(|e| e.contains("unknown field")),
            "{section}: {errors:?}"
        );
    }
}

#[test]
fn wrong_type_names_the_key() {
    let text = format!("{PORT}mtu = \"big\"\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:4:7: port.Ethernet0.mtu: invalid type: string \"big\"",
    );
}

#[test]
fn unknown_enum_value_names_the_key() {
    let text = format!("{PORT}trust = \"pcp\"\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:4:9: port.Ethernet0.trust: unknown variant `pcp`, expected `dscp` or `dot1p`",
    );
}

#[test]
fn missing_required_pool_field_names_the_key() {
    let text = format!("{PORT}[buffer_pool.p]\ntype = \"ingress\"\nsize = 1000\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:4:1: buffer_pool.p.mode: missing (required key)",
    );
}

// ---- buffer profiles ----------------------------------------------------------------------------

fn profile(body: &str) -> String {
    // Lines 1-3: PORT; 4: header; body from line 5.
    format!("{PORT}[buffer_profile.pg_lossless]\n{body}")
}

#[test]
fn fdb_aging_out_of_range_and_in_range() {
    let text = |v: &str| format!("[switch]\nfdb_aging_s = {v}\n{PORT}");
    assert_has(
        &errors(&text("-1")),
        "t.toml:2:15: switch.fdb_aging_s: -1 is out of range 0..=1000000",
    );
    assert_has(
        &errors(&text("1000001")),
        "t.toml:2:15: switch.fdb_aging_s: 1000001 is out of range 0..=1000000",
    );
    assert_eq!(ok(&text("0")).0.switch.fdb_aging_s, 0);
    assert_eq!(ok(&text("1000000")).0.switch.fdb_aging_s, 1_000_000);
}

#[test]
fn dynamic_th_out_of_range() {
    let errors = errors(&profile(
        "pool = \"ingress_lossless_pool\"\nsize = 0\ndynamic_th = 9\n",
    ));
    assert_has(
        &errors,
        "t.toml:7:14: buffer_profile.pg_lossless.dynamic_th: 9 is out of range -8..=7",
    );
}

#[test]
fn a_profile_threshold_mode_is_the_field_it_gives_whatever_its_pool_mode() {
    // SAI's THRESHOLD_MODE is a profile attribute: SONiC's TD3 template has a static_th profile
    // in a dynamic pool (ingress_lossy_profile in ingress_lossless_pool), and the reverse loads
    // too.
    for (pool, threshold) in [
        ("ingress_lossless_pool", "static_th = 5000"),
        ("egress_lossless_pool", "dynamic_th = 1"),
    ] {
        let direction_ok = if pool.starts_with("ingress") {
            "[port.Ethernet0.buffer_pg]\n\"0\" = \"p\"\n"
        } else {
            "[port.Ethernet0.buffer_queue]\n\"0\" = \"p\"\n"
        };
        let text = format!(
            "{PORT}{direction_ok}[buffer_profile.p]\npool = \"{pool}\"\nsize = 0\n{threshold}\n"
        );
        let (config, _) = ok(&text);
        let profile = if pool.starts_with("ingress") {
            &config.ports[0].priority_groups[0].profile
        } else {
            &config.ports[0].queues[0].profile
        };
        assert_eq!(profile.name, "p");
        match profile.threshold {
            headroom_config::Threshold::Static { static_th_bytes } => {
                assert_eq!(static_th_bytes, 5000)
            }
            headroom_config::Threshold::Dynamic { dynamic_th } => assert_eq!(dynamic_th, 1),
        }
    }
}

#[test]
fn both_thresholds_refused() {
    let errors = errors(&profile(
        "pool = \"ingress_lossless_pool\"\nsize = 0\ndynamic_th = 1\nstatic_th = 5\n",
    ));
    assert_has(
        &errors,
        "t.toml:8:1: buffer_profile.pg_lossless.static_th: give exactly one of static_th and \
         dynamic_th",
    );
}

#[test]
fn missing_threshold() {
    let errors = errors(&profile("pool = \"ingress_lossless_pool\"\nsize = 0\n"));
    assert_has(
        &errors,
        "t.toml:4:1: buffer_profile.pg_lossless: missing dynamic_th (pool \
         \"ingress_lossless_pool\" is dynamic)",
    );
}

#[test]
fn missing_size() {
    let errors = errors(&profile(
        "pool = \"ingress_lossless_pool\"\ndynamic_th = 0\n",
    ));
    assert_has(
        &errors,
        "t.toml:4:1: buffer_profile.pg_lossless: missing size (reserved bytes), or set headroom \
         = \"computed\"",
    );
}

#[test]
fn unknown_pool() {
    let errors = errors(&profile("pool = \"nope\"\nsize = 0\ndynamic_th = 0\n"));
    assert_has_prefix(
        &errors,
        "t.toml:5:8: buffer_profile.pg_lossless.pool: no buffer_pool named \"nope\" (pools: ",
    );
}

#[test]
fn computed_profile_refuses_explicit_xoff() {
    let errors = errors(&profile(
        "pool = \"ingress_lossless_pool\"\nheadroom = \"computed\"\nxoff = 1000\n",
    ));
    assert_has(
        &errors,
        "t.toml:7:1: buffer_profile.pg_lossless.xoff: computed by the headroom formula (headroom \
         = \"computed\"): remove it, or remove headroom = \"computed\"",
    );
}

#[test]
fn xon_on_an_egress_profile() {
    let errors = errors(&profile(
        "pool = \"egress_lossy_pool\"\nsize = 0\ndynamic_th = 0\nxon = 10\n",
    ));
    assert_has_prefix(
        &errors,
        "t.toml:8:7: buffer_profile.pg_lossless.xon: pool \"egress_lossy_pool\" is an egress pool",
    );
}

/// A lossless profile bound to PG 3-4 of the port (10G, 5 m: the formula asks 67584 bytes).
fn lossless(xon: u64, xoff: u64, extra: &str) -> String {
    format!(
        "{PORT}[port.Ethernet0.buffer_pg]\n\"3-4\" = \"pg_lossless\"\n\
         [buffer_profile.pg_lossless]\npool = \"ingress_lossless_pool\"\nsize = 1024\n\
         xon = {xon}\nxoff = {xoff}\ndynamic_th = 0\n{extra}"
    )
}

#[test]
fn headroom_below_the_formula_is_an_error() {
    let errors = errors(&lossless(19456, 30000, ""));
    assert_has(
        &errors,
        "t.toml:10:8: buffer_profile.pg_lossless.xoff: 30000 bytes of headroom is below the 67584 \
         bytes the headroom formula requires for port Ethernet0; raise xoff, use headroom = \
         \"computed\", or set headroom_calc.allow_headroom_below_minimum = true",
    );
}

#[test]
fn headroom_below_the_formula_is_a_warning_when_allowed() {
    let warnings = warnings(&lossless(
        19456,
        30000,
        "[headroom_calc]\nallow_headroom_below_minimum = true\n",
    ));
    assert_has_prefix(
        &warnings,
        "t.toml:10:8: buffer_profile.pg_lossless.xoff: 30000 bytes of headroom is below the 67584",
    );
}

#[test]
fn headroom_at_the_formula_loads() {
    let (config, _) = ok(&lossless(19456, 67584, ""));
    let pg = &config.ports[0].priority_groups[3];
    assert_eq!(pg.profile.name, "pg_lossless");
    assert_eq!(pg.profile.xoff_bytes, 67584);
    assert!(!pg.profile.headroom_computed);
}

#[test]
fn xon_above_the_xoff_point() {
    // A tiny lossless pool: shared = 200000 - (1024*2 reserved + 67584*2 headroom) = 62784,
    // α = 1: XOFF point = 1024 + 62784/2 = 32416 < xon 50000.
    let text = lossless(
        50000,
        67584,
        "[buffer_pool.ingress_lossless_pool]\ntype = \"ingress\"\nmode = \"dynamic\"\nsize = 200000\n",
    );
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:9:7: buffer_profile.pg_lossless.xon: xon 50000 bytes is above the XOFF point \
         32416 bytes (size + shared limit) of port Ethernet0: XON would be sent while the PG is \
         still above XOFF",
    );
}

#[test]
fn pool_too_small_for_what_is_carved_from_it() {
    let text = format!(
        "{PORT}[buffer_pool.ingress_lossless_pool]\ntype = \"ingress\"\nmode = \"dynamic\"\nsize = 100000\n"
    );
    let errors = errors(&text);
    // Two computed lossless PGs of 10G/5m: reserved 2 x 87040, headroom 2 x 67584.
    assert_has(
        &errors,
        "t.toml:7:8: buffer_pool.ingress_lossless_pool.size: pool \"ingress_lossless_pool\" of \
         100000 bytes cannot hold what is carved from it: 174080 reserved (Σ size of bound \
         PGs/queues) + 135168 headroom (Σ xoff of its lossless PGs) = 309248 bytes",
    );
}

#[test]
fn built_in_pools_too_small_blame_the_buffer_size() {
    let text = format!("{PORT}[switch]\nbuffer_size_bytes = 300000\n");
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:5:21: switch.buffer_size_bytes: pool \"ingress_lossless_pool\" of 149760 bytes \
         (built-in pool",
    );
}

#[test]
fn shared_headroom_pool_cannot_be_both_off_and_sized() {
    let text = format!(
        "{PORT}[buffer_pool.ingress_lossless_pool]\ntype = \"ingress\"\nmode = \"dynamic\"\n\
         size = 8000000\nxoff = 1000000\n[headroom_calc]\nshared_headroom_pool = false\n"
    );
    let errors = errors(&text);
    assert_has_prefix(
        &errors,
        "t.toml:10:24: headroom_calc.shared_headroom_pool: false, but pool",
    );
}

#[test]
fn shp_on_egress_pool_refused() {
    let text = format!(
        "{PORT}[buffer_pool.e]\ntype = \"egress\"\nmode = \"dynamic\"\nsize = 8000000\nxoff = 1000\n"
    );
    assert_has(
        &errors(&text),
        "t.toml:8:8: buffer_pool.e.xoff: a shared headroom pool (xoff) exists only on ingress pools",
    );
}

// ---- bindings -----------------------------------------------------------------------------------

#[test]
fn egress_profile_bound_to_a_pg() {
    let text = format!("{PORT}[port.Ethernet0.buffer_pg]\n\"0\" = \"egress_lossy_profile\"\n");
    assert_has(
        &errors(&text),
        "t.toml:5:7: port.Ethernet0.buffer_pg.0: PG 0: profile \"egress_lossy_profile\" is in \
         pool \"egress_lossy_pool\", but buffer_pg needs an ingress pool",
    );
}

#[test]
fn unknown_profile_bound_to_a_queue() {
    let text = format!("{PORT}[port.Ethernet0.buffer_queue]\n\"5-6\" = \"nope\"\n");
    assert_has_prefix(
        &errors(&text),
        "t.toml:5:9: port.Ethernet0.buffer_queue.5-6: queue 5: no buffer_profile named \"nope\"",
    );
}

#[test]
fn bad_binding_range() {
    let text = format!("{PORT}[port.Ethernet0.buffer_pg]\n\"4-3\" = \"ingress_lossy_profile\"\n");
    assert_has(
        &errors(&text),
        "t.toml:5:1: port.Ethernet0.buffer_pg.4-3: \"4-3\" is an empty range: write the low end first",
    );
    let text = format!("{PORT}[port.Ethernet0.buffer_queue]\n\"8\" = \"egress_lossy_profile\"\n");
    assert_has(
        &errors(&text),
        "t.toml:5:1: port.Ethernet0.buffer_queue.8: \"8\" is out of range 0..=7",
    );
}

#[test]
fn overlapping_binding_keys() {
    let text = format!(
        "{PORT}[port.Ethernet0.buffer_queue]\n\"0-2\" = \"egress_lossy_profile\"\n\"2\" = \"egress_lossy_profile\"\n"
    );
    assert_has(
        &errors(&text),
        "t.toml:6:1: port.Ethernet0.buffer_queue.2: 2 is already bound by another key of this table",
    );
}

#[test]
fn unknown_scheduler_and_wred_on_a_queue() {
    let text = format!(
        "{PORT}[port.Ethernet0.queue.\"3\"]\nscheduler = \"sched9\"\nwred_profile = \"W\"\n"
    );
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:5:13: port.Ethernet0.queue.3.scheduler: no scheduler named \"sched9\"",
    );
    assert_has(
        &errors,
        "t.toml:6:16: port.Ethernet0.queue.3.wred_profile: no wred_profile named \"W\"",
    );
}

// ---- PFC mapping ----------------------------------------------------------------------------------

#[test]
fn pfc_priority_whose_pg_is_lossy() {
    // PFC 3 is generated by PG 3 (pfc_to_pg AZURE), but PG 3 is rebound to a lossy profile.
    let text = format!("{PORT}[port.Ethernet0.buffer_pg]\n\"3\" = \"ingress_lossy_profile\"\n");
    assert_has(
        &errors(&text),
        "t.toml:1:1: port.Ethernet0.pfc_enable: priority 3: pfc_to_pg_map \"AZURE\" gives PG 3, \
         whose profile \"ingress_lossy_profile\" has no headroom (xoff 0): no PFC would be \
         generated for it",
    );
}

#[test]
fn a_shared_setting_that_fails_for_several_ports_is_reported_once_naming_them() {
    // Issue 17: `port_defaults.pfc_enable = [3, 4, 7]` fails the same way on both ports (PFC 7
    // is generated by PG 0, which is lossy): one line naming both ports, not the same line twice.
    let text = "[port_defaults]\npfc_enable = [3, 4, 7]\nspeed = \"10G\"\n\
                [port.Ethernet0]\ndevice = \"eth0\"\n[port.Ethernet4]\ndevice = \"eth1\"\n";
    let found = errors(text);
    let priority_7: Vec<&String> = found.iter().filter(|e| e.contains("priority 7")).collect();
    assert_eq!(priority_7.len(), 1, "{found:#?}");
    assert_eq!(
        priority_7[0],
        "t.toml:2:14: port_defaults.pfc_enable: ports Ethernet0, Ethernet4: priority 7: \
         pfc_to_pg_map \"AZURE\" gives PG 0, whose profile \"ingress_lossy_profile\" has no \
         headroom (xoff 0): no PFC would be generated for it"
    );
    // No two errors are the same line.
    let mut unique = found.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), found.len(), "{found:#?}");
    // A shared key that fails for one port names that port; a port's own key names it already.
    let text = "[port_defaults]\npfc_enable = [3, 4, 7]\nspeed = \"10G\"\n\
                [port.Ethernet0]\ndevice = \"eth0\"\n\
                [port.Ethernet4]\ndevice = \"eth1\"\npfc_enable = [3, 4, 7]\n";
    let errors = errors(text);
    assert_has_prefix(
        &errors,
        "t.toml:2:14: port_defaults.pfc_enable: port Ethernet0: priority 7: pfc_to_pg_map",
    );
    assert_has_prefix(
        &errors,
        "t.toml:8:14: port.Ethernet4.pfc_enable: priority 7: pfc_to_pg_map",
    );
}

#[test]
fn pfc_priority_generated_by_another_pg_than_its_traffic() {
    let text = format!(
        "{PORT}pfc_enable = [3, 4]\npfc_to_pg_map = \"SWAP\"\n[pfc_to_pg_map.SWAP]\n3 = 4\n4 = 3\n"
    );
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:4:14: port.Ethernet0.pfc_enable: priority 3: its traffic (TC 3) lands in PG 3 \
         (tc_to_pg_map \"AZURE\") but PFC for it is generated by PG 4 (pfc_to_pg_map \"SWAP\")",
    );
}

#[test]
fn pfc_pausing_another_queue_than_its_traffic() {
    let text = format!(
        "{PORT}pfc_to_queue_map = \"Q\"\n[pfc_to_queue_map.Q]\ndefault = 0\n3 = 3\n4 = 5\n"
    );
    assert_has(
        &errors(&text),
        "t.toml:1:1: port.Ethernet0.pfc_enable: priority 4: a received PFC frame pauses queue 5 \
         (pfc_to_queue_map \"Q\") but its traffic (TC 4) leaves by queue 4 (tc_to_queue_map \
         \"AZURE\")",
    );
}

#[test]
fn lossy_traffic_in_a_lossless_pg_is_a_warning() {
    // DSCP 0 -> TC 1 -> PG 3 (lossless): lossy TC 1 can trigger PFC.
    let text = format!("{PORT}tc_to_pg_map = \"M\"\n[tc_to_pg_map.M]\n1 = 3\n3 = 3\n4 = 4\n");
    assert_has(
        &warnings(&text),
        "t.toml:1:1: port.Ethernet0.pfc_enable: lossy TC 1 shares lossless PG 3: its traffic can \
         trigger PFC for the lossless priorities",
    );
}

#[test]
fn pfcwd_enable_must_be_within_pfc_enable() {
    let text = format!("{PORT}pfcwd_enable = [3, 5]\n");
    assert_has(
        &errors(&text),
        "t.toml:4:16: port.Ethernet0.pfcwd_enable: priority 5 is not in pfc_enable (3,4): the \
         watchdog can only watch PFC-enabled priorities",
    );
}

#[test]
fn pfc_enable_element_out_of_range() {
    let text = format!("{PORT}pfc_enable = [3, 8]\n");
    assert_has(
        &errors(&text),
        "t.toml:4:18: port.Ethernet0.pfc_enable[1]: 8 is out of range 0..=7",
    );
    let text = format!("{PORT}pfc_enable = \"3,3\"\n");
    assert_has(
        &errors(&text),
        "t.toml:4:14: port.Ethernet0.pfc_enable: 3 is listed twice",
    );
}

#[test]
fn pfc_refresh_longer_than_the_pause() {
    // 0xFFFF quanta at 10G = 65535 * 512 / 1e10 s = 3355 µs.
    let text = format!("{PORT}pfc_refresh_us = 4000\n");
    assert_has(
        &errors(&text),
        "t.toml:4:18: port.Ethernet0.pfc_refresh_us: 4000 µs: must be > 0 and shorter than the \
         pause it refreshes (65535 quanta at 10000 Mb/s = 3355 µs), or the peer resumes in between",
    );
}

// ---- maps ---------------------------------------------------------------------------------------

#[test]
fn map_key_out_of_range() {
    let text = format!("{PORT}[dscp_to_tc_map.M]\n64 = 1\n");
    assert_has(
        &errors(&text),
        "t.toml:5:1: dscp_to_tc_map.M.64: \"64\" is out of range 0..=63",
    );
}

#[test]
fn map_value_out_of_range() {
    let text = format!("{PORT}[tc_to_queue_map.M]\n3 = 8\n");
    assert_has(
        &errors(&text),
        "t.toml:5:5: tc_to_queue_map.M.3: 8 is out of range 0..=7",
    );
}

#[test]
fn map_keys_overlap() {
    let text = format!("{PORT}[dscp_to_tc_map.M]\n\"0-10\" = 1\n8 = 0\n");
    assert_has(
        &errors(&text),
        "t.toml:6:1: dscp_to_tc_map.M.8: 8 is already mapped by key \"0-10\"",
    );
}

#[test]
fn unknown_map_name_on_a_port() {
    let text = format!("{PORT}dscp_to_tc_map = \"LAB\"\n");
    assert_has(
        &errors(&text),
        "t.toml:4:18: port.Ethernet0.dscp_to_tc_map: no dscp_to_tc_map named \"LAB\" (defined: AZURE)",
    );
}

#[test]
fn unknown_map_name_in_port_defaults() {
    let text = format!("{PORT}[port_defaults]\ntc_to_pg_map = \"LAB\"\n");
    assert_has(
        &errors(&text),
        "t.toml:5:16: port_defaults.tc_to_pg_map: port Ethernet0: no tc_to_pg_map named \"LAB\" (defined: AZURE)",
    );
}

// ---- ports --------------------------------------------------------------------------------------

#[test]
fn missing_device_and_speed() {
    let errors = errors("[port.Ethernet0]\nmtu = 9100\n");
    assert_has(
        &errors,
        "t.toml:1:1: port.Ethernet0: missing device (Linux interface or DPDK device)",
    );
    assert_has(
        &errors,
        "t.toml:1:1: port.Ethernet0: missing speed (Mb/s like 100000, or \"100G\", \"1G\")",
    );
}

#[test]
fn bad_speed_and_cable() {
    let text = "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10Q\"\ncable_length = \"5km\"\n";
    let errors = errors(text);
    assert_has(
        &errors,
        "t.toml:3:9: port.Ethernet0.speed: \"10Q\" is not a speed: write Mb/s like 100000, or a \
         string like \"100G\", \"25G\", \"2.5G\", \"1G\", \"100M\"",
    );
    assert_has(
        &errors,
        "t.toml:4:16: port.Ethernet0.cable_length: \"5km\" is not a cable length: write metres \
         like \"5m\" or 5",
    );
}

#[test]
fn mtu_out_of_range() {
    let text = format!("{PORT}mtu = 10000\n");
    assert_has(
        &errors(&text),
        "t.toml:4:7: port.Ethernet0.mtu: 10000 is out of range 68..=9216",
    );
}

#[test]
fn devices_must_be_unique() {
    let text = format!("{PORT}[port.Ethernet4]\ndevice = \"eth0\"\nspeed = 10000\n");
    assert_has(
        &errors(&text),
        "t.toml:5:10: port.Ethernet4.device: device \"eth0\" is already used by port Ethernet0",
    );
}

#[test]
fn afpacket_device_must_be_a_linux_interface_name() {
    let text = "[port.Ethernet0]\ndevice = \"0000:03:00.0/extra\"\nspeed = 1000\n";
    assert_has(
        &errors(text),
        "t.toml:2:10: port.Ethernet0.device: \"0000:03:00.0/extra\" is not a Linux interface \
         name: 1 to 15 bytes",
    );
}

#[test]
fn device_and_mac_refused_in_port_defaults() {
    let text = format!("{PORT}[port_defaults]\ndevice = \"eth9\"\nmac = \"02:00:00:00:00:01\"\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:5:1: port_defaults.device: a device belongs to one port: set it in [port.<name>]",
    );
    assert_has(
        &errors,
        "t.toml:6:1: port_defaults.mac: a MAC address belongs to one port: set it in [port.<name>]",
    );
}

#[test]
fn multicast_mac_refused() {
    let text = format!("{PORT}mac = \"01:80:c2:00:00:01\"\n");
    assert_has(
        &errors(&text),
        "t.toml:4:7: port.Ethernet0.mac: \"01:80:c2:00:00:01\" is a multicast address; a port \
         needs a unicast one",
    );
}

#[test]
fn no_ports() {
    assert_has(
        &errors("[switch]\nname = \"x\"\n"),
        "t.toml: port: no ports: add at least one [port.<name>] table",
    );
}

#[test]
fn vlan_settings_must_match_the_mode() {
    let text = format!("{PORT}vlan_mode = \"trunk\"\naccess_vlan = 10\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:5:1: port.Ethernet0.access_vlan: only for vlan_mode = \"access\" (use trunk_vlans \
         and native_vlan)",
    );
    assert_has(
        &errors,
        "t.toml:1:1: port.Ethernet0.trunk_vlans: missing: a trunk port needs trunk_vlans",
    );
    let text = format!("{PORT}trunk_vlans = [10]\n");
    assert_has_prefix(
        &errors_of(&text),
        "t.toml:4:1: port.Ethernet0.trunk_vlans: only for vlan_mode = \"trunk\"",
    );
    let text = format!("{PORT}vlan_mode = \"trunk\"\ntrunk_vlans = [10, \"4000-4095\"]\n");
    assert_has(
        &errors_of(&text),
        "t.toml:5:20: port.Ethernet0.trunk_vlans[1]: 4095 is out of range 1..=4094",
    );
}

fn errors_of(text: &str) -> Vec<String> {
    errors(text)
}

// ---- watchdog -----------------------------------------------------------------------------------

#[test]
fn pfcwd_times_out_of_range() {
    let text =
        format!("{PORT}[port.Ethernet0.pfcwd]\ndetection_time = 50\nrestoration_time = 70000\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:5:18: port.Ethernet0.pfcwd.detection_time: 50 is out of range 100..=5000",
    );
    assert_has(
        &errors,
        "t.toml:6:20: port.Ethernet0.pfcwd.restoration_time: 70000 is out of range 100..=60000",
    );
}

#[test]
fn pfcwd_times_below_the_poll_interval() {
    let text = format!(
        "{PORT}[pfcwd]\npoll_interval = 500\n[port_defaults.pfcwd]\ndetection_time = 300\n"
    );
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:7:18: port_defaults.pfcwd.detection_time: port Ethernet0: detection_time 300 ms is shorter than \
         pfcwd.poll_interval 500 ms (SONiC requires >= the poll interval)",
    );
    // The default restoration time (200 ms) is below 500 too; nothing is written for it, so the
    // error names the port's key and points at the port's table.
    assert_has(
        &errors,
        "t.toml:1:1: port.Ethernet0.pfcwd.restoration_time: restoration_time 200 ms is shorter \
         than pfcwd.poll_interval 500 ms (SONiC requires >= the poll interval)",
    );
}

#[test]
fn poll_interval_out_of_range() {
    let text = format!("{PORT}[pfcwd]\npoll_interval = 2000\n");
    assert_has(
        &errors(&text),
        "t.toml:5:17: pfcwd.poll_interval: 2000 is out of range 100..=1000",
    );
}

#[test]
fn bad_pfcwd_action() {
    let text = format!("{PORT}pfcwd = {{ action = \"shutdown\" }}\n");
    assert_has(
        &errors(&text),
        "t.toml:4:20: port.Ethernet0.pfcwd.action: unknown variant `shutdown`, expected one of \
         `drop`, `forward`, `alert`",
    );
}

// ---- WRED and schedulers ------------------------------------------------------------------------

#[test]
fn wred_max_below_min() {
    let text = format!(
        "{PORT}[wred_profile.W]\necn = \"ecn_all\"\ngreen_min_threshold = 2000\ngreen_max_threshold = 1000\n"
    );
    assert_has(
        &errors(&text),
        "t.toml:7:23: wred_profile.W.green_max_threshold: 1000 is below green_min_threshold 2000: \
         max must be >= min",
    );
}

#[test]
fn wred_thresholds_needed_when_marking() {
    let text = format!("{PORT}[wred_profile.W]\necn = \"ecn_green\"\n");
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:4:1: wred_profile.W.green_min_threshold: missing: ecn marks green packets",
    );
}

#[test]
fn wred_probability_out_of_range() {
    let text = format!("{PORT}[wred_profile.W]\ngreen_drop_probability = 101\n");
    assert_has(
        &errors(&text),
        "t.toml:5:26: wred_profile.W.green_drop_probability: 101 is out of range 0..=100",
    );
}

#[test]
fn scheduler_weight_out_of_range() {
    let text = format!("{PORT}[scheduler.s]\ntype = \"DWRR\"\nweight = 0\n");
    assert_has(
        &errors(&text),
        "t.toml:6:10: scheduler.s.weight: 0 is out of range 1..=100",
    );
}

#[test]
fn ecn_that_cannot_fire_before_pfc_is_a_warning() {
    // One 10G port, default 8 MiB buffer: ingress_lossless_pool 4 MiB, shared = 4194304 -
    // 2 x 87040 reserved - 2 x 67584 headroom = 3885056; XOFF point = 87040 + 3885056 / 2.
    let text = format!(
        "{PORT}[wred_profile.LATE]\necn = \"ecn_all\"\ngreen_min_threshold = 3000000\n\
         green_max_threshold = 4000000\n[port.Ethernet0.queue.\"3-4\"]\nwred_profile = \"LATE\"\n"
    );
    let warnings = warnings(&text);
    assert_has(
        &warnings,
        "t.toml:6:23: wred_profile.LATE.green_min_threshold: port Ethernet0 queue 3: ECN starts \
         marking at 3000000 bytes, at or above the XOFF point 2029568 bytes of lossless PG 3 \
         feeding it: PFC will pause the peer before any packet is marked",
    );
}

// ---- runtime ------------------------------------------------------------------------------------

fn two_ports() -> String {
    format!("{PORT}[port.Ethernet4]\ndevice = \"eth1\"\nspeed = \"10G\"\n")
}

#[test]
fn lcore_on_a_cpu_outside_the_affinity_mask() {
    let text = format!(
        "{}[[runtime.lcore]]\ncpu = 7\nrx_ports = [\"Ethernet0\", \"Ethernet4\"]\ntx_ports = [\"Ethernet0\", \"Ethernet4\"]\n",
        two_ports()
    );
    assert_has(
        &errors(&text),
        "t.toml:8:7: runtime.lcore[0].cpu: CPU 7 is not in this process's affinity mask (allowed: 0-3)",
    );
    let negative = text.replace("cpu = 7", "cpu = -1");
    assert_has(
        &errors(&negative),
        "t.toml:8:7: runtime.lcore[0].cpu: CPU -1 is not in this process's affinity mask (allowed: 0-3)",
    );
}

/// Under `taskset -c 1` (or a cpuset of CPU 1): CPU 1 is accepted, CPU 0 refused naming the
/// allowed set, and the default lcore goes on CPU 1.
#[test]
fn lcore_cpus_follow_an_affinity_mask_that_excludes_cpu_0() {
    let on_cpu = |cpu: i64| {
        format!(
            "{}[[runtime.lcore]]\ncpu = {cpu}\nrx_ports = [\"Ethernet0\", \"Ethernet4\"]\ntx_ports = [\"Ethernet0\", \"Ethernet4\"]\n",
            two_ports()
        )
    };
    let (config, _) = parse_on(&on_cpu(1), &[1]).expect("CPU 1 is allowed");
    assert_eq!(config.runtime.lcores[0].cpu, 1);
    let refused: Vec<String> = parse_on(&on_cpu(0), &[1])
        .expect_err("CPU 0 is outside the mask")
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        refused,
        ["t.toml:8:7: runtime.lcore[0].cpu: CPU 0 is not in this process's affinity mask (allowed: 1)"]
    );
    let (config, _) = parse_on(&two_ports(), &[1]).expect("no lcore table");
    assert_eq!(config.runtime.lcores.len(), 1);
    assert_eq!(
        config.runtime.lcores[0].cpu, 1,
        "the default lcore on the first allowed CPU"
    );
    let (config, _) = parse_on(&two_ports(), &[5, 3, 6]).expect("no lcore table");
    assert_eq!(config.runtime.lcores[0].cpu, 3);
    let refused: Vec<String> = parse_on(&on_cpu(4), &[0, 1, 2, 5, 7, 8])
        .expect_err("CPU 4 is outside the mask")
        .errors
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        refused,
        ["t.toml:8:7: runtime.lcore[0].cpu: CPU 4 is not in this process's affinity mask (allowed: 0-2,5,7-8)"]
    );
}

// ---- what the core's types can hold -------------------------------------------------------------

/// The core numbers pools with one byte: a 256th pool is refused at its key, not clamped onto
/// pool 255 (as the runtime's translation once did).
#[test]
fn more_than_255_buffer_pools_are_refused_at_the_first_one_too_many() {
    let pools = |n: usize| {
        let mut text = String::from(PORT);
        for i in 0..n {
            text.push_str(&format!(
                "[buffer_pool.p{i:03}]\ntype = \"ingress\"\nmode = \"dynamic\"\nsize = 100000\n"
            ));
        }
        text
    };
    // 251 user pools and the 4 built-in ones in use: 255, the most there may be.
    let (config, _) = ok(&pools(251));
    assert_eq!(config.pools.len(), 255);
    let params = config.switch_params().expect("255 pools fit");
    assert_eq!(params.pools.len(), 255);
    // The 256th user pool (p255) starts on line 4 + 4 x 255.
    assert_eq!(
        errors(&pools(256)),
        [format!(
            "t.toml:{}:14: buffer_pool.p255: 260 buffer pools (built-in pools in use included): at \
             most 255 (the core numbers pools with one byte)",
            4 + 4 * 255
        )]
    );
    // 252 user pools: the built-ins in use push the count over; the error names the table.
    assert_has_prefix(
        &errors(&pools(252)),
        "t.toml:4:2: buffer_pool: 256 buffer pools",
    );
}

/// The core numbers ports with 16 bits: a 65 536th port is refused at its key.
#[test]
fn more_than_65535_ports_are_refused_at_the_first_one_too_many() {
    let mut text =
        String::from("[switch]\ndriver = \"memory\"\n[port_defaults]\nspeed = \"10G\"\n");
    for i in 0..65_536 {
        text.push_str(&format!("[port.p{i:05}]\ndevice = \"d{i}\"\n"));
    }
    assert_eq!(
        errors(&text),
        [format!(
            "t.toml:{}:7: port.p65535: 65536 ports: at most 65535 (the core numbers ports with \
             16 bits)",
            5 + 2 * 65_535
        )]
    );
}

#[test]
fn lcore_port_errors() {
    let text = format!(
        "{}[[runtime.lcore]]\ncpu = 0\nrx_ports = [\"Ethernet0\", \"Ethernet8\"]\ntx_ports = [\"Ethernet0\"]\n\
         [[runtime.lcore]]\ncpu = 0\nrx_ports = [\"Ethernet0\"]\ntx_ports = []\n",
        two_ports()
    );
    let errors = errors(&text);
    assert_has(
        &errors,
        "t.toml:9:26: runtime.lcore[0].rx_ports[1]: no port named \"Ethernet8\"",
    );
    assert_has(
        &errors,
        "t.toml:12:7: runtime.lcore[1].cpu: CPU 0 already runs another lcore",
    );
    assert_has(
        &errors,
        "t.toml:13:13: runtime.lcore[1].rx_ports[0]: port \"Ethernet0\" is already in rx_ports of \
         runtime.lcore[0]: each port is served by exactly one lcore per direction",
    );
    assert_has(
        &errors,
        "t.toml:7:1: runtime.lcore: port \"Ethernet4\" is in no lcore's rx_ports: nothing would serve it",
    );
    assert_has(
        &errors,
        "t.toml:7:1: runtime.lcore: port \"Ethernet4\" is in no lcore's tx_ports: nothing would serve it",
    );
}

#[test]
fn bad_prometheus_address() {
    let text = format!("{PORT}[runtime]\nprometheus_listen = \"localhost\"\n");
    assert_has(
        &errors(&text),
        "t.toml:5:21: runtime.prometheus_listen: \"localhost\" is not an address like \
         \"127.0.0.1:9464\" or \"[::1]:9464\"",
    );
}

#[test]
fn dpdk_section_ignored_without_the_dpdk_driver() {
    let text = format!("{PORT}[dpdk]\neal_args = []\n");
    assert_has(
        &warnings(&text),
        "t.toml:4:1: dpdk: ignored: switch.driver is not \"dpdk\"",
    );
}

#[test]
fn unused_definitions_are_warnings() {
    let text = format!("{PORT}[scheduler.s]\ntype = \"STRICT\"\n[dscp_to_tc_map.M]\n0 = 0\n");
    let warnings = warnings(&text);
    assert_has(
        &warnings,
        "t.toml:4:1: scheduler.s: unused: no queue uses this scheduler",
    );
    assert_has(
        &warnings,
        "t.toml:6:1: dscp_to_tc_map.M: unused: no port uses this map",
    );
}

// ---- several at once ------------------------------------------------------------------------------

#[test]
fn several_errors_are_reported_together() {
    let text = format!(
        "{PORT}mtu = 1\npfc_quanta = 0\n[pfcwd]\npoll_interval = 5\n[switch]\ncell_size_bytes = 1\n"
    );
    let result = parse(&text).expect_err("must fail");
    let rendered: Vec<String> = result.errors.iter().map(ToString::to_string).collect();
    assert!(rendered.len() >= 4, "{rendered:?}");
    assert_has(
        &rendered,
        "t.toml:4:7: port.Ethernet0.mtu: 1 is out of range 68..=9216",
    );
    assert_has(
        &rendered,
        "t.toml:5:14: port.Ethernet0.pfc_quanta: 0 is out of range 1..=65535",
    );
    assert_has(
        &rendered,
        "t.toml:7:17: pfcwd.poll_interval: 5 is out of range 100..=1000",
    );
    assert_has(
        &rendered,
        "t.toml:9:19: switch.cell_size_bytes: 1 is out of range 32..=4096",
    );
    // The whole set renders one "error: ..." line per error.
    let text = result.to_string();
    assert_eq!(text.lines().count(), result.errors.len());
    assert!(text.lines().all(|line| line.starts_with("error: t.toml:")));
}

#[test]
fn errors_carry_structured_fields() {
    let result = parse(&profile(
        "pool = \"ingress_lossless_pool\"\nsize = 0\ndynamic_th = -9\n",
    ))
    .expect_err("must fail");
    let error = &result.errors[0];
    assert_eq!(error.file, "t.toml");
    assert_eq!(error.key, "buffer_profile.pg_lossless.dynamic_th");
    assert_eq!(
        error.location,
        Some(headroom_config::Location {
            line: 7,
            column: 14
        })
    );
    assert_eq!(error.message, "-9 is out of range -8..=7");
}

#[test]
fn load_names_the_file_it_cannot_read() {
    let errors = headroom_config::load("/nonexistent/headroom.toml").expect_err("must fail");
    assert_eq!(errors.errors.len(), 1);
    assert!(
        errors.errors[0]
            .to_string()
            .starts_with("/nonexistent/headroom.toml: cannot read: "),
        "{}",
        errors.errors[0]
    );
}

#[test]
fn findings_shared_by_several_ports_are_reported_once() {
    // Three 10G ports share a profile with too little headroom and a too-late ECN threshold.
    let text = "[port_defaults]\nspeed = \"10G\"\n\
                [port_defaults.buffer_pg]\n\"3-4\" = \"small\"\n\
                [port_defaults.queue.\"3-4\"]\nwred_profile = \"LATE\"\n\
                [buffer_profile.small]\npool = \"ingress_lossless_pool\"\nsize = 1024\nxon = 1024\n\
                xoff = 4096\ndynamic_th = 0\n\
                [wred_profile.LATE]\necn = \"ecn_all\"\ngreen_min_threshold = 9000000\n\
                green_max_threshold = 9000000\n\
                [headroom_calc]\nallow_headroom_below_minimum = true\n\
                [port.a]\ndevice = \"eth0\"\n[port.b]\ndevice = \"eth1\"\n[port.c]\ndevice = \"eth2\"\n";
    let warnings = warnings(text);
    let headroom: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("headroom formula"))
        .collect();
    assert_eq!(headroom.len(), 1, "{warnings:?}");
    assert!(
        headroom[0].starts_with(
            "t.toml:11:8: buffer_profile.small.xoff: 4096 bytes of headroom is below the 67584 \
             bytes the headroom formula requires for ports a, b, c;"
        ),
        "{}",
        headroom[0]
    );
    let ecn: Vec<&String> = warnings
        .iter()
        .filter(|w| w.contains("ECN starts"))
        .collect();
    // Queues 3 and 4: one warning each, naming every port.
    assert_eq!(ecn.len(), 2, "{warnings:?}");
    assert!(
        ecn[0].starts_with(
            "t.toml:15:23: wred_profile.LATE.green_min_threshold: ports a, b, c queue 3: \
             ECN starts marking at 9000000 bytes"
        ),
        "{}",
        ecn[0]
    );
}

#[test]
fn port_names_are_unique_by_construction() {
    let text = format!("{PORT}[port.Ethernet0]\ndevice = \"eth1\"\n");
    let errors = errors(&text);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].starts_with("t.toml:4:1: ") && errors[0].contains("Ethernet0"),
        "{}",
        errors[0]
    );
}

// ---- static FDB ----------------------------------------------------------------------------------

#[test]
fn static_fdb_entries_are_checked() {
    let ok_text =
        format!("{PORT}[[fdb.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"Ethernet0\"\n");
    let (config, _) = ok(&ok_text);
    assert_eq!(config.fdb_static.len(), 1);
    assert_eq!(config.fdb_static[0].vlan_id, 1, "the port's access VLAN");
    assert_eq!(config.fdb_static[0].port, 0);
    for (entry, expected) in [
        (
            "mac = \"01:00:5e:00:00:01\"\nport = \"Ethernet0\"\n",
            "t.toml:5:7: fdb.static[0].mac: ",
        ),
        (
            "mac = \"02:00:00:00:00:01\"\nport = \"Ethernet9\"\n",
            "t.toml:6:8: fdb.static[0].port: no port named \"Ethernet9\"",
        ),
        (
            "mac = \"02:00:00:00:00:01\"\nport = \"Ethernet0\"\nvlan = 7\n",
            "t.toml:7:8: fdb.static[0].vlan: port Ethernet0 is not a member of VLAN 7",
        ),
        (
            "mac = \"02:00:00:00:00:01\"\nport = \"Ethernet0\"\nvlan = 5000\n",
            "t.toml:7:8: fdb.static[0].vlan: 5000 is out of range 1..=4094",
        ),
    ] {
        let text = format!("{PORT}[[fdb.static]]\n{entry}");
        assert_has_prefix(&errors(&text), expected);
    }
    let twice = format!(
        "{PORT}[[fdb.static]]\nmac = \"02:00:00:00:00:01\"\nport = \"Ethernet0\"\n\
         [[fdb.static]]\nmac = \"02-00-00-00-00-01\"\nport = \"Ethernet0\"\n"
    );
    assert_has(
        &errors(&twice),
        "t.toml:8:7: fdb.static[1].mac: 02-00-00-00-00-01 in VLAN 1 is already fdb.static[0]",
    );
}

#[test]
fn a_control_character_in_a_comment_is_refused_with_a_reason() {
    // Found by the `config` fuzz target: toml_edit gives no message for it.
    let errors =
        headroom_config::parse_bytes(b"#\0t", "t.toml", &headroom_config::ParseOptions::default())
            .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "error: t.toml:1:2: control character U+0000 is not allowed here (TOML 1.0 allows only tab)"
    );
}

#[test]
fn bytes_that_are_not_utf8_are_refused_with_their_place() {
    let bytes = b"[switch]\nname = \"a\xffb\"\n";
    let errors =
        headroom_config::parse_bytes(bytes, "t.toml", &headroom_config::ParseOptions::default())
            .unwrap_err();
    assert_eq!(
        errors.to_string(),
        "error: t.toml:2:10: not UTF-8 text (TOML files are UTF-8): invalid byte 0xff"
    );
}
