//! Resolved configuration → CONFIG_DB JSON (docs/sonic.md has the mapping).
//!
//! Everything is written explicitly, as `config save` writes a running SONiC: every pool and
//! profile in use, all eight PGs and queues of every port, the maps by name with all their
//! entries. Keys are sorted (serde_json's map), values are strings, as CONFIG_DB has them.
//!
//! The buffer model is `dynamic` when a profile's headroom is computed and the formula is
//! SONiC's (no `software_latency_kib`): such a PG is written as `"NULL"` (SONiC computes it) and
//! the formula's inputs go to `LOSSLESS_TRAFFIC_PATTERN` and `DEFAULT_LOSSLESS_BUFFER_PARAMETER`.
//! Otherwise it is `traditional`, and computed profiles are written with the values headroom
//! computed (a SONiC switch would compute others: its formula has no software term).

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use crate::model::{
    BufferProfile, Config, EcnMode, PfcWdAction, PoolDirection, Port, SchedulerKind, Threshold,
    Trust, Vlan, WredColor, WredProfile,
};
use crate::resolve::lossless_profile_name;

/// A CONFIG_DB JSON and what it could not say.
#[derive(Clone, Debug)]
pub struct Exported {
    /// CONFIG_DB JSON, indented by four spaces as SONiC's `config save` writes it.
    pub json: String,
    /// Settings CONFIG_DB has no field for, each named once.
    pub warnings: Vec<String>,
}

/// Writes `config` as CONFIG_DB JSON.
#[must_use]
pub fn export(config: &Config) -> Exported {
    let mut warnings = Vec::new();
    let computed = config.ports.iter().any(|p| {
        p.priority_groups
            .iter()
            .any(|g| g.profile.headroom_computed)
    });
    let software_term = config.headroom_calc.constants.software_latency_kib != 0.0;
    let dynamic = computed && !software_term;
    if computed && software_term {
        warnings.push(format!(
            "headroom_calc.software_latency_kib = {} has no SONiC equivalent: the computed \
             lossless profiles are written with headroom's values (traditional buffer model), \
             which SONiC's formula would not give",
            config.headroom_calc.constants.software_latency_kib
        ));
    }
    let mut db: BTreeMap<&str, Map<String, Value>> = BTreeMap::new();

    // DEVICE_METADATA.
    let mut metadata = Map::new();
    metadata.insert("hostname".into(), json!(config.switch.name));
    metadata.insert("mac".into(), json!(mac_text(config.switch.mac)));
    metadata.insert(
        "buffer_model".into(),
        json!(if dynamic { "dynamic" } else { "traditional" }),
    );
    if let Some(p) = &config.switch.platform {
        metadata.insert("platform".into(), json!(p));
    }
    if let Some(h) = &config.switch.hwsku {
        metadata.insert("hwsku".into(), json!(h));
    }
    db.entry("DEVICE_METADATA")
        .or_default()
        .insert("localhost".into(), Value::Object(metadata));

    // BUFFER_POOL.
    for pool in &config.pools {
        let mut fields = Map::new();
        fields.insert(
            "type".into(),
            json!(match pool.direction {
                PoolDirection::Ingress => "ingress",
                PoolDirection::Egress => "egress",
            }),
        );
        fields.insert(
            "mode".into(),
            json!(match pool.mode {
                crate::model::ThresholdMode::Static => "static",
                crate::model::ThresholdMode::Dynamic => "dynamic",
            }),
        );
        fields.insert("size".into(), json!(pool.size_bytes.to_string()));
        if pool.shared_headroom_pool_bytes > 0 {
            fields.insert(
                "xoff".into(),
                json!(pool.shared_headroom_pool_bytes.to_string()),
            );
        }
        db.entry("BUFFER_POOL")
            .or_default()
            .insert(pool.name.clone(), Value::Object(fields));
    }

    // Profiles, by the name each binding is exported under.
    let mut profiles: BTreeMap<String, Value> = BTreeMap::new();
    let mut profile_name = |port: &Port, profile: &BufferProfile, warnings: &mut Vec<String>| {
        let builtin_computed = profile.headroom_computed
            && profile.name
                == lossless_profile_name(port.speed_mbps, port.cable_length_m, port.mtu_bytes);
        if dynamic && builtin_computed {
            return "NULL".to_owned();
        }
        let fields = profile_fields(config, profile, dynamic);
        let mut name = profile.name.clone();
        if profiles.get(&name).is_some_and(|f| *f != fields) {
            // The same computed profile bound to ports of different speeds: one name per port.
            name = format!("{}_{}", profile.name, port.name);
            if !warnings.iter().any(|w| w.contains(&profile.name)) {
                warnings.push(format!(
                    "profile {:?} has different computed values on different ports: written \
                     as {:?} and the like, one per port",
                    profile.name, name
                ));
            }
        }
        profiles.entry(name.clone()).or_insert(fields);
        name
    };

    let mut maps: [BTreeMap<String, Value>; 6] = Default::default();
    let mut wred: BTreeMap<String, Value> = BTreeMap::new();
    let mut schedulers: BTreeMap<String, Value> = BTreeMap::new();
    let mut qos_entries: Vec<(String, Value)> = Vec::new();
    let mut pg_entries: Vec<(String, Value)> = Vec::new();
    let mut queue_buffer_entries: Vec<(String, Value)> = Vec::new();
    let mut queue_entries: Vec<(String, Value)> = Vec::new();
    let mut pfcwd_entries: Vec<(String, Value)> = Vec::new();
    let mut cables = Map::new();
    let mut port_entries: Vec<(String, Value)> = Vec::new();
    let mut not_carried: BTreeMap<&'static str, Vec<&str>> = BTreeMap::new();

    for port in &config.ports {
        // PORT.
        let mut fields = Map::new();
        fields.insert("speed".into(), json!(port.speed_mbps.to_string()));
        fields.insert("mtu".into(), json!(port.mtu_bytes.to_string()));
        if let Some(alias) = &port.alias {
            fields.insert("alias".into(), json!(alias));
        }
        port_entries.push((port.name.clone(), Value::Object(fields)));
        cables.insert(
            port.name.clone(),
            json!(format!("{}m", port.cable_length_m)),
        );

        // BUFFER_PG / BUFFER_QUEUE: consecutive indexes with the same profile share a key.
        let pg_names: Vec<String> = port
            .priority_groups
            .iter()
            .map(|g| profile_name(port, &g.profile, &mut warnings))
            .collect();
        for (range, name) in runs(&pg_names) {
            pg_entries.push((format!("{}|{range}", port.name), json!({ "profile": name })));
        }
        let queue_names: Vec<String> = port
            .queues
            .iter()
            .map(|q| profile_name(port, &q.profile, &mut warnings))
            .collect();
        for (range, name) in runs(&queue_names) {
            queue_buffer_entries
                .push((format!("{}|{range}", port.name), json!({ "profile": name })));
        }

        // QUEUE: scheduler and WRED per run of queues.
        let settings: Vec<String> = port
            .queues
            .iter()
            .map(|q| {
                let mut s = q.scheduler.name.clone();
                if let Some(w) = &q.wred {
                    s.push('\u{0}');
                    s.push_str(&w.name);
                }
                s
            })
            .collect();
        for (range, setting) in runs(&settings) {
            let (scheduler, wred_name) = setting
                .split_once('\u{0}')
                .map_or((setting.as_str(), None), |(s, w)| (s, Some(w)));
            let mut fields = Map::new();
            fields.insert("scheduler".into(), json!(scheduler));
            if let Some(w) = wred_name {
                fields.insert("wred_profile".into(), json!(w));
            }
            queue_entries.push((format!("{}|{range}", port.name), Value::Object(fields)));
        }
        for queue in &port.queues {
            let s = &queue.scheduler;
            schedulers.entry(s.name.clone()).or_insert_with(|| {
                json!({
                    "type": match s.kind {
                        SchedulerKind::Strict => "STRICT",
                        SchedulerKind::Dwrr => "DWRR",
                        SchedulerKind::Wrr => "WRR",
                    },
                    "weight": s.weight.to_string(),
                })
            });
            if let Some(w) = &queue.wred {
                wred.entry(w.name.clone()).or_insert_with(|| wred_fields(w));
            }
        }

        // PORT_QOS_MAP and the maps.
        let mut qos = Map::new();
        let arrays: [&[u8]; 6] = [
            &port.maps.dscp_to_tc,
            &port.maps.dot1p_to_tc,
            &port.maps.tc_to_pg,
            &port.maps.tc_to_queue,
            &port.maps.pfc_to_queue,
            &port.maps.pfc_to_pg,
        ];
        for (k, ((_, field), values)) in super::import::MAP_TABLES.iter().zip(arrays).enumerate() {
            let name = &port.maps.names[k];
            // Under PCP trust the DSCP map is not named: a port with a DOT1P map and no DSCP map
            // trusts PCP (how import-sonic reads it back).
            if *field == "dscp_to_tc_map" && port.trust == Trust::Dot1p {
                continue;
            }
            qos.insert((*field).into(), json!(name));
            maps[k].entry(name.clone()).or_insert_with(|| {
                Value::Object(
                    values
                        .iter()
                        .enumerate()
                        .map(|(from, to)| (from.to_string(), json!(to.to_string())))
                        .collect(),
                )
            });
        }
        qos.insert(
            "pfc_enable".into(),
            json!(port.pfc_enable.to_sonic_string()),
        );
        qos.insert(
            "pfcwd_sw_enable".into(),
            json!(port.pfcwd_enable.to_sonic_string()),
        );
        qos_entries.push((port.name.clone(), Value::Object(qos)));

        // PFC_WD.
        if port.pfcwd.enabled {
            pfcwd_entries.push((
                port.name.clone(),
                json!({
                    "action": match port.pfcwd.action {
                        PfcWdAction::Drop => "drop",
                        PfcWdAction::Forward => "forward",
                        PfcWdAction::Alert => "alert",
                    },
                    "detection_time": port.pfcwd.detection_time_ms.to_string(),
                    "restoration_time": port.pfcwd.restoration_time_ms.to_string(),
                }),
            ));
        }

        // What CONFIG_DB cannot say (SONiC keeps it elsewhere or not at all).
        if port.trust == Trust::Dot1p && port.default_priority != 0 {
            not_carried
                .entry("default_priority")
                .or_default()
                .push(&port.name);
        }
        if port.pause_802_3x {
            not_carried
                .entry("pause_802_3x")
                .or_default()
                .push(&port.name);
        }
        if !port.tx_enable {
            not_carried.entry("tx_enable").or_default().push(&port.name);
        }
        if port.pfc_quanta != 0xFFFF {
            not_carried
                .entry("pfc_quanta")
                .or_default()
                .push(&port.name);
        }
        if port.shaper_rate_bits_per_second != port.speed_bits_per_second {
            not_carried
                .entry("shaper_rate")
                .or_default()
                .push(&port.name);
        }
        if port.vlan.is_routed() {
            // SONiC's router interface: an INTERFACE entry with the port's name (its addresses,
            // `INTERFACE|Ethernet0|10.1.0.1/31`, are the kernel's here, not the file's).
            db.entry("INTERFACE")
                .or_default()
                .insert(port.name.clone(), Value::Object(Map::new()));
        } else if port.vlan != (Vlan::Access { vlan_id: 1 }) {
            not_carried
                .entry("vlan_mode/access_vlan/trunk_vlans")
                .or_default()
                .push(&port.name);
        }
    }
    for (key, names) in not_carried {
        warnings.push(format!(
            "port key {key} of {} has no CONFIG_DB field here: not exported",
            names.join(", ")
        ));
    }
    warnings.push(
        "port devices (Linux interfaces, DPDK devices) are not CONFIG_DB fields: give them again \
         with --map when importing"
            .into(),
    );

    for (name, value) in port_entries {
        db.entry("PORT").or_default().insert(name, value);
    }
    db.entry("CABLE_LENGTH")
        .or_default()
        .insert("AZURE".into(), Value::Object(cables));
    for (name, fields) in profiles {
        db.entry("BUFFER_PROFILE").or_default().insert(name, fields);
    }
    for (key, value) in pg_entries {
        db.entry("BUFFER_PG").or_default().insert(key, value);
    }
    for (key, value) in queue_buffer_entries {
        db.entry("BUFFER_QUEUE").or_default().insert(key, value);
    }
    for (key, value) in qos_entries {
        db.entry("PORT_QOS_MAP").or_default().insert(key, value);
    }
    for (k, (sonic_table, _)) in super::import::MAP_TABLES.iter().enumerate() {
        for (name, value) in std::mem::take(&mut maps[k]) {
            db.entry(sonic_table).or_default().insert(name, value);
        }
    }
    for (name, value) in wred {
        db.entry("WRED_PROFILE").or_default().insert(name, value);
    }
    for (name, value) in schedulers {
        db.entry("SCHEDULER").or_default().insert(name, value);
    }
    for (key, value) in queue_entries {
        db.entry("QUEUE").or_default().insert(key, value);
    }
    let mut global = Map::new();
    global.insert(
        "POLL_INTERVAL".into(),
        json!(config.pfcwd.poll_interval_ms.to_string()),
    );
    if config.pfcwd.big_red_switch {
        global.insert("BIG_RED_SWITCH".into(), json!("enable"));
    }
    db.entry("PFC_WD")
        .or_default()
        .insert("GLOBAL".into(), Value::Object(global));
    for (key, value) in pfcwd_entries {
        db.entry("PFC_WD").or_default().insert(key, value);
    }
    let c = &config.headroom_calc;
    db.entry("LOSSLESS_TRAFFIC_PATTERN").or_default().insert(
        "AZURE".into(),
        json!({
            "mtu": c.constants.lossless_mtu_bytes.to_string(),
            "small_packet_percentage": c.constants.small_packet_percentage.to_string(),
        }),
    );
    let mut parameters = Map::new();
    parameters.insert(
        "default_dynamic_th".into(),
        json!(c.default_dynamic_th.to_string()),
    );
    if c.over_subscribe_ratio > 1 {
        parameters.insert(
            "over_subscribe_ratio".into(),
            json!(c.over_subscribe_ratio.to_string()),
        );
    }
    db.entry("DEFAULT_LOSSLESS_BUFFER_PARAMETER")
        .or_default()
        .insert("AZURE".into(), Value::Object(parameters));

    let root: Map<String, Value> = db
        .into_iter()
        .map(|(name, entries)| (name.to_owned(), Value::Object(entries)))
        .collect();
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    let _ = serde::Serialize::serialize(&Value::Object(root), &mut serializer);
    out.push(b'\n');
    Exported {
        json: String::from_utf8(out).unwrap_or_default(),
        warnings,
    }
}

fn profile_fields(config: &Config, profile: &BufferProfile, dynamic: bool) -> Value {
    let mut fields = Map::new();
    let pool = config
        .pools
        .get(profile.pool_index)
        .map_or("", |p| p.name.as_str());
    fields.insert("pool".into(), json!(pool));
    match profile.threshold {
        Threshold::Dynamic { dynamic_th } => {
            fields.insert("dynamic_th".into(), json!(dynamic_th.to_string()));
        }
        Threshold::Static { static_th_bytes } => {
            fields.insert("static_th".into(), json!(static_th_bytes.to_string()));
        }
    }
    if profile.headroom_computed && dynamic {
        // A named profile whose headroom SONiC computes (sonic-buffer-profile.yang).
        fields.insert("headroom_type".into(), json!("dynamic"));
        return Value::Object(fields);
    }
    fields.insert("size".into(), json!(profile.size_bytes.to_string()));
    if profile.is_lossless() {
        fields.insert("xon".into(), json!(profile.xon_bytes.to_string()));
        fields.insert("xoff".into(), json!(profile.xoff_bytes.to_string()));
    }
    if profile.xon_offset_bytes > 0 {
        fields.insert(
            "xon_offset".into(),
            json!(profile.xon_offset_bytes.to_string()),
        );
    }
    Value::Object(fields)
}

fn wred_fields(w: &WredProfile) -> Value {
    let mut fields = Map::new();
    fields.insert(
        "ecn".into(),
        json!(match w.ecn {
            EcnMode::None => "ecn_none",
            EcnMode::Green => "ecn_green",
            EcnMode::Yellow => "ecn_yellow",
            EcnMode::Red => "ecn_red",
            EcnMode::GreenYellow => "ecn_green_yellow",
            EcnMode::GreenRed => "ecn_green_red",
            EcnMode::YellowRed => "ecn_yellow_red",
            EcnMode::All => "ecn_all",
        }),
    );
    let colours: [(&str, &WredColor); 3] =
        [("green", &w.green), ("yellow", &w.yellow), ("red", &w.red)];
    for (colour, c) in colours {
        fields.insert(
            format!("wred_{colour}_enable"),
            json!(c.wred_enable.to_string()),
        );
        fields.insert(
            format!("{colour}_min_threshold"),
            json!(c.min_threshold_bytes.to_string()),
        );
        fields.insert(
            format!("{colour}_max_threshold"),
            json!(c.max_threshold_bytes.to_string()),
        );
        fields.insert(
            format!("{colour}_drop_probability"),
            json!(c.drop_probability_percent.to_string()),
        );
    }
    Value::Object(fields)
}

/// Runs of equal values over indexes 0..n: `["a", "a", "b"]` → `[("0-1", "a"), ("2", "b")]`.
fn runs(values: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 1..=values.len() {
        if i == values.len() || values[i] != values[start] {
            let range = if i - 1 == start {
                start.to_string()
            } else {
                format!("{start}-{}", i - 1)
            };
            out.push((range, values[start].clone()));
            start = i;
        }
    }
    out
}

fn mac_text(mac: [u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::runs;

    #[test]
    fn runs_group_consecutive_equal_values() {
        let v: Vec<String> = ["a", "a", "b", "a", "a", "a"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        assert_eq!(
            runs(&v),
            [
                ("0-1".to_owned(), "a".to_owned()),
                ("2".to_owned(), "b".to_owned()),
                ("3-5".to_owned(), "a".to_owned())
            ]
        );
        assert!(runs(&[]).is_empty());
    }
}
