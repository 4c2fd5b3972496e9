//! SONiC CONFIG_DB in and out: the worked examples of the shared reference
//! (sonic-buffer-model.md §1.10 TD3, §1.11 SN2700, §3.1 its pg_profile_lookup.ini, §3.2 the
//! dynamic model's formula) import and give the reference's numbers; import → export → import
//! is a fixed point; bad input is refused at the JSON field.

use headroom_config::sonic::{self, ImportOptions, Imported, PgProfileLookup, SonicErrors};
use headroom_config::{derived, Config, DerivedPg};

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/sonic/");
const PORTS: [&str; 4] = ["Ethernet0", "Ethernet4", "Ethernet8", "Ethernet12"];

fn read(name: &str) -> String {
    std::fs::read_to_string(format!("{DATA}{name}")).unwrap()
}

fn options(source: &str, ports: &[&str]) -> ImportOptions {
    ImportOptions {
        source: source.to_owned(),
        devices: ports
            .iter()
            .enumerate()
            .map(|(i, p)| ((*p).to_owned(), format!("eth{}", i + 1)))
            .collect(),
        ..ImportOptions::default()
    }
}

fn import_ok(json: &str, options: &ImportOptions) -> Imported {
    sonic::import(json, options).unwrap_or_else(|e| panic!("import refused:\n{e}"))
}

fn import_err(json: &str, options: &ImportOptions) -> SonicErrors {
    match sonic::import(json, options) {
        Ok(i) => panic!("expected the import to be refused; got\n{}", i.toml),
        Err(e) => e,
    }
}

fn pg(config: &Config, port: &str, pg: usize) -> DerivedPg {
    let d = derived(config);
    let p = d.ports.iter().find(|p| p.name == port).unwrap();
    p.priority_groups[pg].clone()
}

fn pool(config: &Config, name: &str) -> headroom_config::BufferPool {
    config
        .pools
        .iter()
        .find(|p| p.name == name)
        .unwrap()
        .clone()
}

fn warnings_text(i: &Imported) -> String {
    i.warnings
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// α/(1+α) × shared for dynamic_th n (reference §2.1: the steady state with one congested PG).
fn dynamic_limit(shared: u64, dynamic_th: i32) -> u64 {
    if dynamic_th >= 0 {
        let a = 1u64 << dynamic_th;
        shared * a / (a + 1)
    } else {
        shared / ((1u64 << -dynamic_th) + 1)
    }
}

// ---- §1.10 Broadcom TD3 (Arista-7050CX3-32S-C32), traditional model ----------------------------

#[test]
fn td3_imports_with_the_references_pg_thresholds() {
    let json = read("td3_t1.json");
    let i = import_ok(&json, &options("td3_t1.json", &PORTS[..2]));
    let c = &i.config;
    // Cell 256 B from the platform (qos_params.td3.yaml).
    assert_eq!(c.switch.cell_size_bytes, 256);
    assert_eq!(c.ports.len(), 2);
    assert_eq!(c.ports[0].device, "eth1");
    assert_eq!(c.ports[0].alias.as_deref(), Some("Ethernet1/1"));
    // BUFFER_POOL as given: the SHP is the pool's xoff, 1622016 B = 6336 cells.
    let lossless = pool(c, "ingress_lossless_pool");
    assert_eq!(lossless.size_bytes, 32_712_448);
    assert_eq!(lossless.shared_headroom_pool_bytes, 1_622_016);
    assert_eq!(lossless.shared_headroom_pool_bytes / 256, 6336);
    // Shared = size − Σ reserved (PG 3-4 of two ports × 4608) − SHP (reference §2.1, §2.3).
    let reserved = 2 * 2 * 4608;
    let shared = 32_712_448 - reserved - 1_622_016;
    assert_eq!(lossless.reserved_bytes, reserved);
    assert_eq!(lossless.shared_bytes, shared);
    for port in &PORTS[..2] {
        for g in [3, 4] {
            let p = pg(c, port, g);
            assert_eq!(p.profile, "pg_lossless_100000_300m_profile");
            // size 4608 = 18 cells of PG minimum.
            assert_eq!(p.reserved_bytes, 4608);
            assert_eq!(p.reserved_bytes / 256, 18);
            // xoff 160000 = 625 cells of headroom (qos_params: trig_ingr_drp − trig_pfc ≈ 625).
            assert_eq!(p.headroom_bytes, 160_000);
            assert_eq!(p.headroom_bytes.div_ceil(256), 625);
            // dynamic_th 0: α = 1, XOFF at size + ½ shared.
            let xoff_point = 4608 + dynamic_limit(shared, 0);
            assert_eq!(p.xoff_point_bytes, Some(xoff_point));
            // XON at max(xon, XOFF − xon_offset): 18 cells of hysteresis below XOFF.
            assert_eq!(p.xon_point_bytes, Some(xoff_point - 4608));
            assert_eq!(p.drop_point_bytes, xoff_point + 160_000);
        }
        // PG 0: ingress_lossy_profile, static_th = pool size (a static profile in a dynamic
        // pool, as the TD3 template has it): lossy, drops at the whole shared buffer.
        let p0 = pg(c, port, 0);
        assert_eq!(p0.profile, "ingress_lossy_profile");
        assert!(!p0.lossless);
        assert_eq!(p0.drop_point_bytes, shared);
    }
    // The QoS of qos_config.j2 came through: PFC 3,4, watchdog on 3,4 with drop 200/200.
    let p = &c.ports[0];
    assert_eq!(p.pfc_enable.to_sonic_string(), "3,4");
    assert_eq!(p.pfcwd_enable.to_sonic_string(), "3,4");
    assert!(p.pfcwd.enabled);
    assert_eq!(p.maps.dscp_to_tc[46], 5);
    assert_eq!(
        p.maps.dscp_to_tc[10], 0,
        "DSCP 10 is not in this map: TC 0 (SAI)"
    );
    assert_eq!(p.queues[3].scheduler.name, "scheduler.1");
    assert_eq!(p.queues[3].wred.as_ref().unwrap().name, "AZURE_LOSSLESS");
    // What headroom does not model is named once each, never dropped silently.
    let w = warnings_text(&i);
    assert!(
        w.contains(".VLAN: table VLAN (1 entry) is not modelled"),
        "{w}"
    );
    assert!(w.contains(".BGP_NEIGHBOR: table BGP_NEIGHBOR"), "{w}");
    assert!(
        w.contains(".PORT[].lanes: field not modelled by headroom (2 entries)"),
        "{w}"
    );
    assert_eq!(w.matches(".PORT[].lanes").count(), 1, "{w}");
    assert!(w.contains(".DEVICE_METADATA[].bgp_asn"), "{w}");
}

// ---- §1.11 + §3.1 Mellanox SN2700 (ACS-MSN2700), traditional model ------------------------------

#[test]
fn sn2700_traditional_takes_its_lossless_profiles_from_pg_profile_lookup() {
    let json = read("sn2700_t1_traditional.json");
    let lookup = PgProfileLookup::parse(
        &read("pg_profile_lookup_msn2700.ini"),
        "pg_profile_lookup.ini",
    )
    .unwrap();
    let mut o = options("sn2700.json", &PORTS);
    o.pg_profile_lookup = Some(lookup);
    let i = import_ok(&json, &o);
    let c = &i.config;
    assert_eq!(c.switch.cell_size_bytes, 96, "Spectrum-1 (asic_table.j2)");
    // buffermgrd: BUFFER_PG|<port>|3-4 → pg_lossless_100000_5m_profile from the table's row
    // `100000 5m 50176 19456 30720 0`, threshold in the pool's mode (dynamic_th 0).
    let lossless = pool(c, "ingress_lossless_pool");
    assert_eq!(lossless.size_bytes, 3_302_912);
    assert_eq!(lossless.shared_headroom_pool_bytes, 0);
    let reserved = 4 * 2 * 50_176;
    let private = 4 * 2 * 30_720;
    assert_eq!(lossless.reserved_bytes, reserved);
    assert_eq!(lossless.private_headroom_bytes, private);
    let shared = 3_302_912 - reserved - private;
    assert_eq!(lossless.shared_bytes, shared);
    for port in PORTS {
        for g in [3, 4] {
            let p = pg(c, port, g);
            assert_eq!(p.profile, "pg_lossless_100000_5m_profile");
            // size 50176 = xon 19456 + xoff 30720 (Mellanox independent headroom).
            assert_eq!(p.reserved_bytes, 50_176);
            assert_eq!(p.headroom_bytes, 30_720);
            assert_eq!(p.headroom_bytes / 96, 320);
            let xoff_point = 50_176 + dynamic_limit(shared, 0);
            assert_eq!(p.xoff_point_bytes, Some(xoff_point));
            // No xon_offset: XON at xon.
            assert_eq!(p.xon_point_bytes, Some(19_456));
            assert_eq!(p.drop_point_bytes, xoff_point + 30_720);
        }
        // PG 0 → ingress_lossy_profile, dynamic_th 3 (α = 8) in ingress_lossy_pool.
        let p0 = pg(c, port, 0);
        assert_eq!(p0.pool, "ingress_lossy_pool");
        assert_eq!(p0.drop_point_bytes, dynamic_limit(3_302_912, 3));
    }
    // The lossless profile's formula minimum is above the table's xoff (44032 > 30720): the
    // table is authoritative in the traditional model, so it is a warning, not an error.
    let w = warnings_text(&i);
    assert!(w.contains("pg_profile_lookup.ini:"), "{w}");
    assert!(w.contains("below the 44032 bytes"), "{w}");
    assert!(
        w.contains("BUFFER_PORT_INGRESS_PROFILE_LIST (4 entries): port-level per-pool"),
        "{w}"
    );
}

#[test]
fn sn2700_traditional_without_the_lookup_table_says_what_it_does_instead() {
    let json = read("sn2700_t1_traditional.json");
    let i = import_ok(&json, &options("sn2700.json", &PORTS));
    let w = warnings_text(&i);
    assert!(
        w.contains("no BUFFER_PG for the lossless PGs of ports Ethernet0, Ethernet4, Ethernet8, Ethernet12"),
        "{w}"
    );
    assert!(w.contains("--pg-profile-lookup"), "{w}");
    // Computed with SONiC's formula (Spectrum-1, 100G, 5 m): reference §3.2.
    let p = pg(&i.config, "Ethernet0", 3);
    assert_eq!(p.headroom_bytes, 44_032);
    assert_eq!(p.reserved_bytes, 63_488);
}

#[test]
fn a_missing_lookup_row_is_refused_naming_the_port() {
    let json = read("sn2700_t1_traditional.json").replace("\"5m\"", "\"7m\"");
    let mut o = options("sn2700.json", &PORTS);
    o.pg_profile_lookup =
        Some(PgProfileLookup::parse(&read("pg_profile_lookup_msn2700.ini"), "lookup.ini").unwrap());
    let e = import_err(&json, &o).to_string();
    assert!(
        e.contains(
            ".PORT.Ethernet0: lookup.ini has no row for speed 100000 and cable 7m: buffermgrd \
             creates no lossless PG for port Ethernet0"
        ),
        "{e}"
    );
    let bad = PgProfileLookup::parse("100000 5m 1 2\n", "bad.ini").unwrap_err();
    assert!(bad.to_string().starts_with("error: bad.ini:1: "), "{bad}");
}

// ---- §1.11 + §3.2 Mellanox, dynamic model --------------------------------------------------------

#[test]
fn sn2700_dynamic_computes_the_references_headroom_and_sizes_the_pools() {
    let json = read("sn2700_t1_dynamic.json");
    let i = import_ok(&json, &options("sn2700_dyn.json", &PORTS));
    let c = &i.config;
    // Reference §3.2: Spectrum-1 (cell 96), 100G, 5 m, MTU 9100, lossless MTU 1024, spp 50,
    // no SHP → xoff 44032, size 63488; xon = ceil1k(19 KiB) = 19456.
    for port in PORTS {
        let p = pg(c, port, 3);
        assert_eq!(p.profile, "pg_lossless_100000_5m_profile");
        assert_eq!(p.headroom_bytes, 44_032);
        assert_eq!(p.reserved_bytes, 63_488);
        assert_eq!(p.xon_point_bytes, Some(19_456));
    }
    // Pools without size: MMU (egress_lossless_pool's 13945824, warned) − reserved − per-port
    // reserves − management pool, halved between the two ingress pools (reference §2.3).
    let w = warnings_text(&i);
    assert!(
        w.contains("takes egress_lossless_pool's size 13945824 bytes as the MMU size"),
        "{w}"
    );
    let reserved_pg = 4 * 2 * 63_488;
    let reserved_queue = 4 * 9216; // queue 7 → egress_lossy_profile (headroom binds every queue)
    let available =
        13_945_824 - reserved_pg - reserved_queue - 4 * (19 * 1024 + 10 * 1024) - 256 * 1024;
    let size = available / 2;
    for name in [
        "ingress_lossless_pool",
        "ingress_lossy_pool",
        "egress_lossy_pool",
    ] {
        assert_eq!(pool(c, name).size_bytes, size, "{name}");
    }
    assert_eq!(pool(c, "egress_lossless_pool").size_bytes, 13_945_824);
    let shared = size - reserved_pg - 4 * 2 * 44_032;
    let p = pg(c, "Ethernet0", 4);
    let xoff_point = 63_488 + dynamic_limit(shared, 0);
    assert_eq!(p.xoff_point_bytes, Some(xoff_point));
    assert_eq!(p.drop_point_bytes, xoff_point + 44_032);
    // An explicit MMU size wins.
    let mut o = options("sn2700_dyn.json", &PORTS);
    o.mmu_size_bytes = Some(20_000_000);
    let i = import_ok(&json, &o);
    assert_eq!(
        pool(&i.config, "ingress_lossless_pool").size_bytes,
        (available + 20_000_000 - 13_945_824) / 2
    );
}

#[test]
fn spectrum2_dynamic_headroom_by_cable_length_matches_the_reference() {
    // Reference §3.2: Spectrum-2 (cell 144), 100G: 5 m → xoff 48128 / size 67584, 40 m →
    // 53248 / 72704, 300 m → 94208 / 113664.
    let json = read("sn3800_dynamic_cables.json");
    let i = import_ok(&json, &options("sn3800.json", &PORTS));
    assert_eq!(i.config.switch.cell_size_bytes, 144);
    for (port, xoff, size) in [
        ("Ethernet0", 48_128, 67_584),
        ("Ethernet4", 53_248, 72_704),
        ("Ethernet8", 94_208, 113_664),
    ] {
        let p = pg(&i.config, port, 3);
        assert_eq!((p.headroom_bytes, p.reserved_bytes), (xoff, size), "{port}");
    }
}

#[test]
fn over_subscribe_ratio_enables_a_shared_headroom_pool() {
    let json = read("sn2700_t1_dynamic.json").replace(
        "\"default_dynamic_th\": \"0\"",
        "\"default_dynamic_th\": \"0\", \"over_subscribe_ratio\": \"2\"",
    );
    let i = import_ok(&json, &options("x.json", &PORTS));
    let c = &i.config;
    assert!(c.headroom_calc.constants.shared_headroom_pool);
    // SHP on: computed profiles reserve only xon (reference §3.2), and the SHP is
    // (Σ xoff − 10 KiB per lossless port) / ratio (buffer_pool_mellanox.lua, §2.3).
    let p = pg(c, "Ethernet0", 3);
    assert_eq!(p.reserved_bytes, 19_456);
    let xoff = p.headroom_bytes;
    let shp = (4 * 2 * xoff - 4 * 10 * 1024).div_ceil(2);
    assert_eq!(
        pool(c, "ingress_lossless_pool").shared_headroom_pool_bytes,
        shp
    );
}

// ---- import → export → import ----------------------------------------------------------------------

fn without_file(mut c: Config) -> Config {
    c.file = String::new();
    c
}

fn round_trip(json: &str, o: &ImportOptions) {
    let first = import_ok(json, o);
    let exported = sonic::export(&first.config);
    let second = import_ok(&exported.json, o);
    assert_eq!(
        without_file(first.config.clone()),
        without_file(second.config.clone()),
        "the configuration changed through export and import:\n{}",
        exported.json
    );
    let again = sonic::export(&second.config);
    assert_eq!(exported.json, again.json, "export is not a fixed point");
    let third = import_ok(&again.json, o);
    assert_eq!(second.toml, third.toml, "import is not a fixed point");
}

#[test]
fn import_export_import_is_a_fixed_point_for_every_example() {
    round_trip(&read("td3_t1.json"), &options("td3.json", &PORTS[..2]));
    let mut o = options("sn2700.json", &PORTS);
    o.pg_profile_lookup =
        Some(PgProfileLookup::parse(&read("pg_profile_lookup_msn2700.ini"), "l.ini").unwrap());
    round_trip(&read("sn2700_t1_traditional.json"), &o);
    round_trip(
        &read("sn2700_t1_dynamic.json"),
        &options("sn2700_dyn.json", &PORTS),
    );
    round_trip(
        &read("sn3800_dynamic_cables.json"),
        &options("sn3800.json", &PORTS),
    );
}

#[test]
fn export_writes_config_db_shapes() {
    let i = import_ok(&read("td3_t1.json"), &options("td3.json", &PORTS[..2]));
    let e = sonic::export(&i.config);
    let v: serde_json::Value = serde_json::from_str(&e.json).unwrap();
    assert_eq!(
        v["DEVICE_METADATA"]["localhost"]["buffer_model"],
        "traditional"
    );
    assert_eq!(
        v["DEVICE_METADATA"]["localhost"]["platform"],
        "x86_64-arista_7050cx3_32s"
    );
    assert_eq!(v["PORT"]["Ethernet0"]["speed"], "100000");
    assert_eq!(v["CABLE_LENGTH"]["AZURE"]["Ethernet4"], "300m");
    assert_eq!(
        v["BUFFER_PG"]["Ethernet0|3-4"]["profile"],
        "pg_lossless_100000_300m_profile"
    );
    assert_eq!(
        v["BUFFER_PROFILE"]["pg_lossless_100000_300m_profile"]["xoff"],
        "160000"
    );
    assert_eq!(v["BUFFER_POOL"]["ingress_lossless_pool"]["xoff"], "1622016");
    assert_eq!(v["PORT_QOS_MAP"]["Ethernet0"]["pfc_enable"], "3,4");
    assert_eq!(
        v["QUEUE"]["Ethernet0|3-4"]["wred_profile"],
        "AZURE_LOSSLESS"
    );
    assert_eq!(v["PFC_WD"]["GLOBAL"]["POLL_INTERVAL"], "200");
    assert_eq!(v["DSCP_TO_TC_MAP"]["AZURE"]["46"], "5");
    // Every value is a string, as in CONFIG_DB.
    fn all_strings(v: &serde_json::Value) -> bool {
        match v {
            serde_json::Value::Object(m) => m.values().all(all_strings),
            serde_json::Value::String(_) => true,
            _ => false,
        }
    }
    assert!(all_strings(&v));
    assert!(e.warnings.iter().any(|w| w.contains("--map")));
    // A dynamic-model import exports computed PGs as NULL.
    let i = import_ok(&read("sn2700_t1_dynamic.json"), &options("d.json", &PORTS));
    let v: serde_json::Value = serde_json::from_str(&sonic::export(&i.config).json).unwrap();
    assert_eq!(v["DEVICE_METADATA"]["localhost"]["buffer_model"], "dynamic");
    assert_eq!(v["BUFFER_PG"]["Ethernet0|3-4"]["profile"], "NULL");
    assert_eq!(v["LOSSLESS_TRAFFIC_PATTERN"]["AZURE"]["mtu"], "1024");
}

#[test]
fn a_headroom_configuration_with_its_software_term_exports_as_the_traditional_model() {
    let (config, _) = headroom_config::load(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../config/lab.toml"
    ))
    .unwrap();
    let e = sonic::export(&config);
    assert!(e
        .warnings
        .iter()
        .any(|w| w.contains("software_latency_kib")));
    let v: serde_json::Value = serde_json::from_str(&e.json).unwrap();
    assert_eq!(
        v["DEVICE_METADATA"]["localhost"]["buffer_model"],
        "traditional"
    );
    // The computed profile is written with headroom's values.
    let name = config.ports[0].priority_groups[3].profile.name.clone();
    assert_eq!(
        v["BUFFER_PROFILE"][&name]["xoff"],
        config.ports[0].priority_groups[3]
            .profile
            .xoff_bytes
            .to_string()
    );
}

// ---- bad input ---------------------------------------------------------------------------------

#[test]
fn malformed_json_names_the_line() {
    let e = import_err(
        "{\n  \"PORT\": {\n    \"Ethernet0\": {\"speed\": \"1000\",}\n  }\n}\n",
        &options("bad.json", &["Ethernet0"]),
    );
    assert_eq!(e.errors.len(), 1);
    let text = e.errors[0].to_string();
    assert!(
        text.starts_with("bad.json:3: malformed JSON (column "),
        "{text}"
    );
    let e = import_err("[1, 2]", &options("list.json", &[]));
    assert!(e.to_string().contains("not a CONFIG_DB"), "{e}");
}

#[test]
fn a_value_out_of_range_is_refused_with_its_json_path_and_line() {
    let json = read("td3_t1.json").replace(
        "\"size\": \"4608\", \"dynamic_th\": \"0\"",
        "\"size\": \"4608\", \"dynamic_th\": \"9\"",
    );
    let e = import_err(&json, &options("td3.json", &PORTS[..2]));
    let text = e.to_string();
    assert!(
        text.contains(
            "td3.json:17: .BUFFER_PROFILE.pg_lossless_100000_300m_profile.dynamic_th: 9 is out of \
             range -8..=7"
        ),
        "{text}"
    );
    // A value that is not a number at all.
    let json =
        read("td3_t1.json").replace("\"POLL_INTERVAL\": \"200\"", "\"POLL_INTERVAL\": \"fast\"");
    let text = import_err(&json, &options("td3.json", &PORTS[..2])).to_string();
    assert!(
        text.contains(".PFC_WD.GLOBAL.POLL_INTERVAL: \"fast\" is not a whole number of ms"),
        "{text}"
    );
    // headroom's own range (POLL_INTERVAL 100..=1000), reported at the field.
    let json =
        read("td3_t1.json").replace("\"POLL_INTERVAL\": \"200\"", "\"POLL_INTERVAL\": \"50\"");
    let text = import_err(&json, &options("td3.json", &PORTS[..2])).to_string();
    assert!(
        text.contains("td3.json:50: .PFC_WD.GLOBAL.POLL_INTERVAL: 50 is out of range 100..=1000"),
        "{text}"
    );
    // A reference to a profile that does not exist.
    let json = read("td3_t1.json").replace(
        "\"Ethernet0|0\": {\"profile\": \"ingress_lossy_profile\"}",
        "\"Ethernet0|0\": {\"profile\": \"nope\"}",
    );
    let text = import_err(&json, &options("td3.json", &PORTS[..2])).to_string();
    assert!(
        text.contains(".BUFFER_PG.\"Ethernet0|0\".profile: no BUFFER_PROFILE named \"nope\""),
        "{text}"
    );
}

#[test]
fn a_port_without_a_device_is_refused_unless_only_mapped_ones_are_asked_for() {
    let json = read("td3_t1.json");
    let e = import_err(&json, &options("td3.json", &["Ethernet0"]));
    let text = e.to_string();
    assert!(
        text.contains("td3.json:5: .PORT.Ethernet4: no device for port Ethernet4: give --map Ethernet4=<interface>"),
        "{text}"
    );
    // A mapping that names no port.
    let mut o = options("td3.json", &PORTS[..2]);
    o.devices.push(("Ethernet99".into(), "eth9".into()));
    let text = import_err(&json, &o).to_string();
    assert!(
        text.contains("--map: Ethernet99=eth9: td3.json has no port Ethernet99 in its PORT table"),
        "{text}"
    );
    // --only-mapped: Ethernet4 and its entries are left out, with one warning.
    let mut o = options("td3.json", &["Ethernet0"]);
    o.only_mapped = true;
    let i = import_ok(&json, &o);
    assert_eq!(i.config.ports.len(), 1);
    let w = warnings_text(&i);
    assert!(
        w.contains("--only-mapped: 1 port without a device left out, with their entries in every table: Ethernet4"),
        "{w}"
    );
    // The same device twice is headroom's check, reported at the option.
    let mut o = options("td3.json", &PORTS[..2]);
    o.devices[1].1 = "eth1".into();
    let text = import_err(&json, &o).to_string();
    assert!(
        text.contains("--map: Ethernet4=eth1: device \"eth1\" is already used by port Ethernet0"),
        "{text}"
    );
}

#[test]
fn an_unknown_table_is_a_warning_and_a_malformed_table_an_error() {
    let json = read("td3_t1.json").replace(
        "\"VLAN\": {\"Vlan1000\": {\"vlanid\": \"1000\"}},",
        "\"VLAN\": {\"Vlan1000\": {\"vlanid\": \"1000\"}}, \"FLEX_COUNTER_TABLE\": {\"PFCWD\": {\"FLEX_COUNTER_STATUS\": \"enable\"}},",
    );
    let i = import_ok(&json, &options("td3.json", &PORTS[..2]));
    let w = warnings_text(&i);
    assert!(
        w.contains("td3.json:51: .FLEX_COUNTER_TABLE: table FLEX_COUNTER_TABLE (1 entry) is not modelled by headroom: left out"),
        "{w}"
    );
    let json = read("td3_t1.json").replace(
        "\"VLAN\": {\"Vlan1000\": {\"vlanid\": \"1000\"}},",
        "\"VLAN\": [1],",
    );
    let text = import_err(&json, &options("td3.json", &PORTS[..2])).to_string();
    assert!(
        text.contains(".VLAN: a table must be an object of entries"),
        "{text}"
    );
    let json = read("td3_t1.json").replace(
        "\"type\": \"egress\",  \"mode\": \"static\"",
        "\"type\": \"both\",  \"mode\": \"static\"",
    );
    let text = import_err(&json, &options("td3.json", &PORTS[..2])).to_string();
    assert!(
        text.contains(".BUFFER_POOL.egress_lossless_pool.type: type \"both\" is not modelled"),
        "{text}"
    );
}

#[test]
fn a_dynamic_pool_without_size_and_no_mmu_size_is_refused() {
    let json = read("sn2700_t1_dynamic.json").replace("\"13945824\"", "\"0\"");
    let json = json.replace(
        "\"size\": \"0\",\n            \"type\": \"egress\"",
        "\"type\": \"egress\"",
    );
    let value: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut value = value;
    value["BUFFER_POOL"]["egress_lossless_pool"]
        .as_object_mut()
        .unwrap()
        .remove("size");
    let json = serde_json::to_string_pretty(&value).unwrap();
    let text = import_err(&json, &options("d.json", &PORTS)).to_string();
    assert!(
        text.contains(".BUFFER_POOL.ingress_lossless_pool: no size: the dynamic buffer model computes it from the ASIC's MMU size"),
        "{text}"
    );
    assert!(text.contains("--mmu-size"), "{text}");
}

#[test]
fn interface_entries_make_routed_ports_and_their_addresses_are_left_to_the_kernel() {
    let mut db: serde_json::Value = serde_json::from_str(&read("td3_t1.json")).unwrap();
    db["INTERFACE"] = serde_json::json!({"Ethernet0": {}, "Ethernet0|10.1.0.1/31": {}});
    let json = db.to_string();
    let o = options("td3.json", &PORTS[..2]);
    let imported = import_ok(&json, &o);
    let ports = &imported.config.ports;
    assert_eq!(
        ports[0].vlan,
        headroom_config::Vlan::Routed,
        "{}",
        imported.toml
    );
    assert_eq!(ports[1].vlan, headroom_config::Vlan::Access { vlan_id: 1 });
    let warnings = warnings_text(&imported);
    assert!(
        warnings.contains("ip addr add 10.1.0.1/31 dev Ethernet0"),
        "{warnings}"
    );
    let exported = sonic::export(&imported.config);
    assert!(exported.json.contains("\"INTERFACE\""), "{}", exported.json);
    round_trip(&json, &o);
}
