//! `config_db.json` → headroom TOML (docs/sonic.md has the mapping).
//!
//! One pass over the tables writes a TOML document and records, for every key it writes, the
//! JSON field (or option, or `pg_profile_lookup.ini` line) it came from. The document is then
//! parsed and checked by headroom's own configuration parser; each of its findings is reported
//! at the origin of its key. SONiC writes every value as a string; numbers are parsed here (a
//! value that is not a number is refused here), ranges and cross-checks are headroom's.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use indexmap::IndexMap;
use serde_json::{Map, Value};
use toml_edit::{DocumentMut, Item, Table};

use super::{jq_path, line_of, port_order, SonicDiagnostic, SonicErrors};
use crate::error::join_key;
use crate::model::PoolDirection;
use crate::{Config, Diagnostic, ParseOptions};

/// What an import needs besides the JSON text.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// File name of the JSON, used in messages.
    pub source: String,
    /// SONiC port name → device (Linux interface, DPDK device), in the order given
    /// (`--map Ethernet0=eth1`, `--map-file`). CONFIG_DB does not say which interface a port is.
    pub devices: Vec<(String, String)>,
    /// Import only the ports in [`Self::devices`]; the others and their entries are left out
    /// (named once in a warning). Without it a port without a device is an error.
    pub only_mapped: bool,
    /// The ASIC's MMU size, bytes (SONiC's STATE_DB `BUFFER_MAX_PARAM_TABLE|global.mmu_size`,
    /// which CONFIG_DB does not hold): sizes the pools the dynamic buffer model leaves without
    /// `size`. Default: the `egress_lossless_pool` size (SONiC templates make it the whole MMU).
    pub mmu_size_bytes: Option<u64>,
    /// The ASIC's buffer cell, bytes. Default: from `DEVICE_METADATA|localhost.platform`.
    pub cell_size_bytes: Option<u32>,
    /// The SKU's `pg_profile_lookup.ini`: the traditional model's lossless profiles, which
    /// buffermgrd creates from it (they are not in a rendered CONFIG_DB).
    pub pg_profile_lookup: Option<PgProfileLookup>,
}

/// A successful import.
#[derive(Clone, Debug)]
pub struct Imported {
    /// The headroom configuration, TOML.
    pub toml: String,
    /// It, resolved (what `headroom check` explains).
    pub config: Config,
    /// Tables and fields left out, assumptions made, and headroom's own warnings, each at the
    /// JSON field it concerns.
    pub warnings: Vec<SonicDiagnostic>,
}

/// A `pg_profile_lookup.ini`: `speed cable size xon xoff threshold [xon_offset]` per line,
/// `#` comments (SONiC `buffermgrd -l`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PgProfileLookup {
    file: String,
    rows: Vec<LookupRow>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct LookupRow {
    line: usize,
    speed_mbps: u64,
    cable_m: u32,
    size: u64,
    xon: u64,
    xoff: u64,
    threshold: i64,
    xon_offset: Option<u64>,
}

impl PgProfileLookup {
    /// Parses the text of a `pg_profile_lookup.ini`; `file` names it in messages.
    ///
    /// # Errors
    /// A line that is not six or seven numbers (cable with its `m`), with its line number.
    pub fn parse(text: &str, file: &str) -> Result<Self, SonicErrors> {
        let mut rows = Vec::new();
        let mut errors = Vec::new();
        for (index, line) in text.lines().enumerate() {
            let line_no = index + 1;
            let content = line.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let fields: Vec<&str> = content.split_whitespace().collect();
            let number = |s: &str| s.parse::<u64>().ok();
            let parsed = (fields.len() == 6 || fields.len() == 7)
                .then(|| {
                    Some(LookupRow {
                        line: line_no,
                        speed_mbps: number(fields[0])?,
                        cable_m: fields[1]
                            .strip_suffix('m')
                            .unwrap_or(fields[1])
                            .parse()
                            .ok()?,
                        size: number(fields[2])?,
                        xon: number(fields[3])?,
                        xoff: number(fields[4])?,
                        threshold: fields[5].parse().ok()?,
                        xon_offset: match fields.get(6) {
                            Some(s) => Some(number(s)?),
                            None => None,
                        },
                    })
                })
                .flatten();
            match parsed {
                Some(row) => rows.push(row),
                None => errors.push(SonicDiagnostic {
                    file: file.to_owned(),
                    line: Some(line_no),
                    path: String::new(),
                    message: format!(
                        "{content:?} is not a row `speed cable size xon xoff threshold \
                         [xon_offset]` (e.g. `100000 5m 50176 19456 30720 0`)"
                    ),
                }),
            }
        }
        if errors.is_empty() {
            Ok(Self {
                file: file.to_owned(),
                rows,
            })
        } else {
            Err(SonicErrors {
                errors,
                warnings: Vec::new(),
            })
        }
    }

    fn find(&self, speed_mbps: u64, cable_m: u32) -> Option<&LookupRow> {
        self.rows
            .iter()
            .find(|r| r.speed_mbps == speed_mbps && r.cable_m == cable_m)
    }
}

/// Where a TOML key came from.
#[derive(Clone, Debug)]
enum Origin {
    /// A field (or entry, or table) of the JSON, by its keys.
    Json(Vec<String>),
    /// Something else: an option (`--map Ethernet0=eth1`) or a line of another file.
    Other {
        file: String,
        line: Option<usize>,
        path: String,
    },
}

/// The tables the importer reads; any other is named in a warning.
const KNOWN_TABLES: [&str; 23] = [
    "DEVICE_METADATA",
    "PORT",
    "INTERFACE",
    "CABLE_LENGTH",
    "BUFFER_POOL",
    "BUFFER_PROFILE",
    "BUFFER_PG",
    "BUFFER_QUEUE",
    "BUFFER_PORT_INGRESS_PROFILE_LIST",
    "BUFFER_PORT_EGRESS_PROFILE_LIST",
    "PORT_QOS_MAP",
    "DSCP_TO_TC_MAP",
    "DOT1P_TO_TC_MAP",
    "TC_TO_PRIORITY_GROUP_MAP",
    "TC_TO_QUEUE_MAP",
    "MAP_PFC_PRIORITY_TO_QUEUE",
    "PFC_PRIORITY_TO_PRIORITY_GROUP_MAP",
    "WRED_PROFILE",
    "SCHEDULER",
    "QUEUE",
    "PFC_WD",
    "LOSSLESS_TRAFFIC_PATTERN",
    "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
];

/// CONFIG_DB map tables, the headroom table and `PORT_QOS_MAP` field of each.
pub(super) const MAP_TABLES: [(&str, &str); 6] = [
    ("DSCP_TO_TC_MAP", "dscp_to_tc_map"),
    ("DOT1P_TO_TC_MAP", "dot1p_to_tc_map"),
    ("TC_TO_PRIORITY_GROUP_MAP", "tc_to_pg_map"),
    ("TC_TO_QUEUE_MAP", "tc_to_queue_map"),
    ("MAP_PFC_PRIORITY_TO_QUEUE", "pfc_to_queue_map"),
    ("PFC_PRIORITY_TO_PRIORITY_GROUP_MAP", "pfc_to_pg_map"),
];

/// Buffer cells of ASICs whose SONiC platforms are recognised (`DEVICE_METADATA.platform`):
/// Mellanox/NVIDIA Spectrum-1 96 B, Spectrum-2 and -3 144 B, Spectrum-4 192 B (SONiC
/// `platform/mellanox/asic_table.j2`), Broadcom Trident3 256 B (sonic-mgmt `qos_params.td3.yaml`).
const PLATFORM_CELLS: [(&str, u32, &str); 8] = [
    ("mlnx_msn2", 96, "Spectrum-1"),
    ("mlnx_msn3", 144, "Spectrum-2"),
    ("mlnx_msn4", 144, "Spectrum-3"),
    ("mlnx_sn2", 96, "Spectrum-1"),
    ("mlnx_sn3", 144, "Spectrum-2"),
    ("mlnx_sn4", 144, "Spectrum-3"),
    ("mlnx_sn5", 192, "Spectrum-4"),
    ("arista_7050cx3", 256, "Trident3"),
];

/// The cell size and ASIC name of a SONiC platform string, if known.
fn platform_cell(platform: &str) -> Option<(u32, &'static str)> {
    PLATFORM_CELLS
        .iter()
        .find(|(needle, _, _)| platform.contains(needle))
        .map(|&(_, cell, asic)| (cell, asic))
}

/// SONiC's lossy-PG reserve per port (pipeline latency, 19 KiB), egress mirror headroom per port
/// (10 KiB), private headroom per lossless port with an SHP (10 KiB) and management pool
/// (256 KiB), as `buffer_pool_mellanox.lua` subtracts them (reference §2.3).
const LOSSY_PG_RESERVE_BYTES: u64 = 19 * 1024;
const EGRESS_MIRROR_BYTES: u64 = 10 * 1024;
const PRIVATE_HEADROOM_BYTES: u64 = 10 * 1024;
const MGMT_POOL_BYTES: u64 = 256 * 1024;
/// SHP size when the over-subscription formula gives nothing (`buffer_pool_mellanox.lua`).
const MIN_SHP_BYTES: u64 = 655_360;

/// How many entries of a table have a field headroom does not model, and the first one's keys.
type LeftOut = (usize, Vec<String>);

#[derive(Debug, Default)]
struct PortInfo {
    speed_mbps: u64,
    cable_m: Option<u32>,
    pfc_enable: Option<Vec<u8>>,
    pgs_bound: [bool; 8],
    qos_fields: BTreeSet<String>,
    has_pfcwd: bool,
}

#[derive(Debug)]
struct SizelessPool {
    name: String,
    percentage: Option<u64>,
}

struct Importer<'a> {
    text: &'a str,
    options: &'a ImportOptions,
    errors: Vec<SonicDiagnostic>,
    warnings: Vec<SonicDiagnostic>,
    doc: DocumentMut,
    /// Every TOML key written, with its origin.
    provenance: Vec<(String, Origin)>,
    /// table → field → (entries that have it, keys of the first).
    unmodelled: IndexMap<String, IndexMap<String, LeftOut>>,
    /// The imported ports, in SONiC's order.
    ports: IndexMap<String, PortInfo>,
    /// Ports of PORT left out (`only_mapped`).
    skipped: BTreeSet<String>,
    /// (table, port) pairs naming a port PORT does not have.
    unknown_ports: IndexMap<String, BTreeSet<String>>,
    dynamic: bool,
    global_qos_fields: BTreeSet<String>,
    global_pfc_enable: bool,
    pools: IndexMap<String, (PoolDirection, bool /* dynamic mode */)>,
    sizeless: Vec<SizelessPool>,
    lossless_pool_has_xoff: bool,
    over_subscribe_ratio: Option<u64>,
    profiles: BTreeSet<String>,
}

fn keys(parts: &[&str]) -> Vec<String> {
    parts.iter().map(|p| (*p).to_owned()).collect()
}

/// `TABLE|a|b` splits: the ports of a key `Ethernet0,Ethernet4|3-4` and the rest.
fn split_port_key(key: &str) -> (Vec<&str>, Option<&str>) {
    match key.split_once('|') {
        Some((ports, rest)) => (ports.split(',').map(str::trim).collect(), Some(rest)),
        None => (key.split(',').map(str::trim).collect(), None),
    }
}

/// Consecutive indexes as SONiC keys write them: [3, 4, 6] → ["3-4", "6"].
fn ranges(indexes: &[u8]) -> Vec<String> {
    let mut sorted: Vec<u8> = indexes.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        let mut end = start;
        while i + 1 < sorted.len() && sorted[i + 1] == end + 1 {
            i += 1;
            end = sorted[i];
        }
        out.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    out
}

/// The indexes of a key like `"3"` or `"3-4"` in 0..=7 (`None` when it is not one: headroom's
/// parser will say why).
fn index_range(text: &str) -> Option<(u8, u8)> {
    let one = |s: &str| s.trim().parse::<u8>().ok().filter(|v| *v < 8);
    match text.split_once('-') {
        Some((a, b)) => Some((one(a)?, one(b)?)).filter(|(a, b)| a <= b),
        None => one(text).map(|v| (v, v)),
    }
}

/// A priority list as SONiC writes it (`"3,4"`), leniently (headroom's parser checks it).
fn priority_list(text: &str) -> Vec<u8> {
    text.split(',')
        .filter_map(|s| s.trim().parse::<u8>().ok())
        .filter(|p| *p < 8)
        .collect()
}

/// Imports the CONFIG_DB JSON `json` into a headroom configuration.
///
/// # Errors
/// Malformed JSON, a value that is not what its field needs, a port without a device, and every
/// error headroom's configuration checks find, each with the JSON path of its field.
pub fn import(json: &str, options: &ImportOptions) -> Result<Imported, SonicErrors> {
    let source = options.source.clone();
    let root: Value = serde_json::from_str(json).map_err(|e| {
        let message = e.to_string();
        let message = message
            .rsplit_once(" at line ")
            .map_or(message.as_str(), |(m, _)| m)
            .to_owned();
        SonicErrors {
            errors: vec![SonicDiagnostic {
                file: source.clone(),
                line: Some(e.line()),
                path: String::new(),
                message: format!("malformed JSON (column {}): {message}", e.column()),
            }],
            warnings: Vec::new(),
        }
    })?;
    let Some(tables) = root.as_object() else {
        return Err(SonicErrors {
            errors: vec![SonicDiagnostic {
                file: source,
                line: Some(1),
                path: String::new(),
                message: "not a CONFIG_DB: the top level must be an object of tables \
                          (\"PORT\": {...}, \"BUFFER_POOL\": {...}, ...)"
                    .into(),
            }],
            warnings: Vec::new(),
        });
    };
    let importer = Importer {
        text: json,
        options,
        errors: Vec::new(),
        warnings: Vec::new(),
        doc: DocumentMut::new(),
        provenance: Vec::new(),
        unmodelled: IndexMap::new(),
        ports: IndexMap::new(),
        skipped: BTreeSet::new(),
        unknown_ports: IndexMap::new(),
        dynamic: false,
        global_qos_fields: BTreeSet::new(),
        global_pfc_enable: false,
        pools: IndexMap::new(),
        sizeless: Vec::new(),
        lossless_pool_has_xoff: false,
        over_subscribe_ratio: None,
        profiles: BTreeSet::new(),
    };
    importer.run(tables)
}

impl Importer<'_> {
    // ---- diagnostics ----------------------------------------------------------------------------

    fn at(&self, json_keys: &[String], message: String) -> SonicDiagnostic {
        SonicDiagnostic {
            file: self.options.source.clone(),
            line: line_of(self.text, json_keys),
            path: jq_path(json_keys),
            message,
        }
    }

    fn error(&mut self, json_keys: &[String], message: impl Into<String>) {
        let d = self.at(json_keys, message.into());
        self.errors.push(d);
    }

    fn warning(&mut self, json_keys: &[String], message: impl Into<String>) {
        let d = self.at(json_keys, message.into());
        self.warnings.push(d);
    }

    fn unmodelled_field(&mut self, table: &str, entry: &str, field: &str) {
        let fields = self.unmodelled.entry(table.to_owned()).or_default();
        let slot = fields
            .entry(field.to_owned())
            .or_insert_with(|| (0, keys(&[table, entry, field])));
        slot.0 += 1;
    }

    fn origin_diagnostic(&self, origin: &Origin, message: String) -> SonicDiagnostic {
        match origin {
            Origin::Json(json_keys) => self.at(json_keys, message),
            Origin::Other { file, line, path } => SonicDiagnostic {
                file: file.clone(),
                line: *line,
                path: path.clone(),
                message,
            },
        }
    }

    /// A finding of headroom's parser, at the origin of its key.
    fn translate(&self, d: &Diagnostic) -> SonicDiagnostic {
        let best = self
            .provenance
            .iter()
            .filter(|(key, _)| {
                d.key == *key
                    || d.key.starts_with(&format!("{key}."))
                    || d.key.starts_with(&format!("{key}["))
            })
            .max_by_key(|(key, _)| key.len());
        match best {
            Some((_, origin)) => self.origin_diagnostic(origin, d.message.clone()),
            None => SonicDiagnostic {
                file: self.options.source.clone(),
                line: None,
                path: String::new(),
                message: if d.key.is_empty() {
                    d.message.clone()
                } else {
                    format!(
                        "{} (headroom key {}, which takes its default)",
                        d.message, d.key
                    )
                },
            },
        }
    }

    // ---- writing TOML ---------------------------------------------------------------------------

    /// Writes `value` at the TOML path `toml_keys`, remembering where it came from.
    fn put(&mut self, toml_keys: &[&str], value: impl Into<toml_edit::Value>, origin: Origin) {
        let Some((last, parents)) = toml_keys.split_last() else {
            return;
        };
        let mut table: &mut Table = self.doc.as_table_mut();
        for key in parents {
            let item = table.entry(key).or_insert_with(|| {
                let mut t = Table::new();
                t.set_implicit(true);
                Item::Table(t)
            });
            let Some(inner) = item.as_table_mut() else {
                return;
            };
            table = inner;
        }
        table.insert(last, Item::Value(value.into()));
        self.note(toml_keys, origin);
    }

    /// Remembers the origin of a TOML table or key written (or about to be).
    fn note(&mut self, toml_keys: &[&str], origin: Origin) {
        let key = toml_keys
            .iter()
            .fold(String::new(), |acc, k| join_key(&acc, k));
        self.provenance.push((key, origin));
    }

    // ---- reading JSON values --------------------------------------------------------------------

    fn text(&mut self, value: &Value, at: &[String]) -> Option<String> {
        match value {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => {
                self.error(at, format!("expected a string, got {value}"));
                None
            }
        }
    }

    /// A non-negative whole number (SONiC writes `"4608"`).
    fn uint(&mut self, value: &Value, at: &[String], what: &str) -> Option<i64> {
        let text = self.text(value, at)?;
        match text.trim().parse::<u64>() {
            Ok(v) => match i64::try_from(v) {
                Ok(v) => Some(v),
                Err(_) => {
                    self.error(at, format!("{v} is too large"));
                    None
                }
            },
            Err(_) => {
                self.error(at, format!("{text:?} is not a whole number of {what}"));
                None
            }
        }
    }

    /// A whole number, maybe negative (`dynamic_th` `"-2"`).
    fn int(&mut self, value: &Value, at: &[String]) -> Option<i64> {
        let text = self.text(value, at)?;
        text.trim().parse::<i64>().map_or_else(
            |_| {
                self.error(at, format!("{text:?} is not a whole number"));
                None
            },
            Some,
        )
    }

    fn boolean(&mut self, value: &Value, at: &[String]) -> Option<bool> {
        let text = self.text(value, at)?;
        match text.trim() {
            "true" | "True" => Some(true),
            "false" | "False" => Some(false),
            other => {
                self.error(at, format!("{other:?} is not true or false"));
                None
            }
        }
    }

    /// A reference to an entry of `table`: a plain name, or the older `[TABLE|name]` form.
    fn reference(&mut self, value: &Value, table: &str, at: &[String]) -> Option<String> {
        let text = self.text(value, at)?;
        let Some(inner) = text
            .trim()
            .strip_prefix('[')
            .and_then(|r| r.strip_suffix(']'))
        else {
            return Some(text.trim().to_owned());
        };
        match inner.split_once('|') {
            Some((t, name)) if t == table => Some(name.to_owned()),
            Some((t, _)) => {
                self.error(
                    at,
                    format!("{text:?} refers to table {t}; this field refers to {table}"),
                );
                None
            }
            None => {
                self.error(
                    at,
                    format!("{text:?} is not a reference: write a name or \"[{table}|name]\""),
                );
                None
            }
        }
    }

    /// The entries of `table`, each an object of fields; anything else is an error.
    fn entries<'v>(
        &mut self,
        tables: &'v Map<String, Value>,
        table: &str,
    ) -> Vec<(&'v str, &'v Map<String, Value>)> {
        let Some(Value::Object(entries)) = tables.get(table) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in entries {
            match value {
                Value::Object(fields) => out.push((key.as_str(), fields)),
                _ => self.error(
                    &keys(&[table, key]),
                    "an entry must be an object of fields (\"field\": \"value\")",
                ),
            }
        }
        out
    }

    /// Whether `port` (named by `table|key`) is imported; a port not in PORT is noted.
    fn kept(&mut self, table: &str, port: &str) -> bool {
        if self.ports.contains_key(port) {
            return true;
        }
        if !self.skipped.contains(port) {
            self.unknown_ports
                .entry(table.to_owned())
                .or_default()
                .insert(port.to_owned());
        }
        false
    }

    // ---- the tables -----------------------------------------------------------------------------

    /// `INTERFACE`: a port with an entry (`Ethernet0`, or an address key `Ethernet0|10.1.0.1/31`)
    /// is a router interface: `vlan_mode = "routed"`. Its addresses are the kernel's (on the
    /// port's host interface), not the configuration's: named in a warning.
    fn interfaces(&mut self, tables: &Map<String, Value>) {
        let entries = self.entries(tables, "INTERFACE");
        let mut addresses: Vec<String> = Vec::new();
        let mut routed: BTreeSet<&str> = BTreeSet::new();
        for (key, _) in &entries {
            let (port, address) = match key.split_once('|') {
                Some((port, address)) => (port, Some(address)),
                None => (*key, None),
            };
            if !self.kept("INTERFACE", port) {
                continue;
            }
            if let Some(address) = address {
                addresses.push(format!("ip addr add {address} dev {port}"));
            }
            if routed.insert(port) {
                self.put(
                    &["port", port, "vlan_mode"],
                    "routed",
                    Origin::Json(keys(&["INTERFACE", key])),
                );
            }
        }
        if !addresses.is_empty() {
            self.warning(
                &keys(&["INTERFACE"]),
                format!(
                    "router interface addresses are the kernel's, on the ports' host interfaces, \
                     not configuration keys: once headroom runs, {}",
                    addresses.join("; ")
                ),
            );
        }
    }

    fn run(mut self, tables: &Map<String, Value>) -> Result<Imported, SonicErrors> {
        for (name, value) in tables {
            if !value.is_object() {
                self.error(
                    &keys(&[name]),
                    "a table must be an object of entries (\"key\": {...})",
                );
                continue;
            }
            if !KNOWN_TABLES.contains(&name.as_str()) {
                let n = value.as_object().map_or(0, Map::len);
                self.warning(
                    &keys(&[name]),
                    format!(
                        "table {name} ({n} entr{}) is not modelled by headroom: left out",
                        if n == 1 { "y" } else { "ies" }
                    ),
                );
            }
        }
        let platform = self.device_metadata(tables);
        self.port_table(tables);
        self.interfaces(tables);
        self.cable_length(tables);
        self.buffer_pools(tables);
        self.buffer_profiles(tables);
        self.map_tables(tables);
        self.port_qos_map(tables);
        self.buffer_bindings(tables, "BUFFER_PG", "buffer_pg");
        self.buffer_bindings(tables, "BUFFER_QUEUE", "buffer_queue");
        self.port_profile_lists(tables);
        self.wred_profiles(tables);
        self.schedulers(tables);
        self.queues(tables);
        self.pfc_wd(tables);
        self.lossless_parameters(tables);
        self.traditional_lossless_pgs();
        self.port_defaults();
        self.headroom_constants(platform.as_deref());
        self.report_left_out();
        if !self.errors.is_empty() {
            return Err(SonicErrors {
                errors: self.errors,
                warnings: self.warnings,
            });
        }
        self.resolve()
    }

    /// `DEVICE_METADATA|localhost`: buffer model, platform, hwsku, hostname, MAC. Returns the
    /// platform.
    fn device_metadata(&mut self, tables: &Map<String, Value>) -> Option<String> {
        let mut platform = None;
        for (entry, fields) in self.entries(tables, "DEVICE_METADATA") {
            if entry != "localhost" {
                self.unmodelled_field("DEVICE_METADATA", entry, "*");
                continue;
            }
            for (field, value) in fields {
                let at = keys(&["DEVICE_METADATA", entry, field]);
                let origin = Origin::Json(at.clone());
                match field.as_str() {
                    "buffer_model" => match self.text(value, &at).as_deref() {
                        Some("traditional") => self.dynamic = false,
                        Some("dynamic") => self.dynamic = true,
                        Some(other) => self.error(
                            &at,
                            format!("{other:?} is not a buffer model: traditional or dynamic"),
                        ),
                        None => {}
                    },
                    "platform" | "hwsku" => {
                        if let Some(text) = self.text(value, &at) {
                            if field == "platform" {
                                platform = Some(text.clone());
                            }
                            self.put(&["switch", field], text, origin);
                        }
                    }
                    "hostname" => {
                        if let Some(text) = self.text(value, &at) {
                            self.put(&["switch", "name"], text, origin);
                        }
                    }
                    "mac" => {
                        if let Some(text) = self.text(value, &at) {
                            self.put(&["switch", "mac"], text, origin);
                        }
                    }
                    _ => self.unmodelled_field("DEVICE_METADATA", entry, field),
                }
            }
        }
        platform
    }

    fn port_table(&mut self, tables: &Map<String, Value>) {
        let devices: HashMap<&str, &str> = self
            .options
            .devices
            .iter()
            .map(|(p, d)| (p.as_str(), d.as_str()))
            .collect();
        let mut entries = self.entries(tables, "PORT");
        entries.sort_by(|a, b| port_order(a.0, b.0));
        if entries.is_empty() {
            self.error(
                &keys(&["PORT"]),
                "no PORT table (or no port in it): headroom needs at least one port",
            );
        }
        for (name, fields) in &entries {
            let name = *name;
            let Some(device) = devices.get(name) else {
                // Left out either way: its entries in other tables are not "unknown ports".
                self.skipped.insert(name.to_owned());
                if !self.options.only_mapped {
                    self.error(
                        &keys(&["PORT", name]),
                        format!(
                            "no device for port {name}: give --map {name}=<interface> (or a line \
                             \"{name} <interface>\" in --map-file), or --only-mapped to leave \
                             unmapped ports out"
                        ),
                    );
                }
                continue;
            };
            let entry_origin = Origin::Json(keys(&["PORT", name]));
            self.note(&["port", name], entry_origin);
            self.put(
                &["port", name, "device"],
                *device,
                Origin::Other {
                    file: "--map".into(),
                    line: None,
                    path: format!("{name}={device}"),
                },
            );
            let mut info = PortInfo::default();
            let mut has_speed = false;
            for (field, value) in *fields {
                let at = keys(&["PORT", name, field]);
                let origin = Origin::Json(at.clone());
                match field.as_str() {
                    "speed" => {
                        if let Some(v) = self.uint(value, &at, "Mb/s") {
                            has_speed = true;
                            info.speed_mbps = u64::try_from(v).unwrap_or(0);
                            self.put(&["port", name, "speed"], v, origin);
                        }
                    }
                    "mtu" => {
                        if let Some(v) = self.uint(value, &at, "bytes") {
                            self.put(&["port", name, "mtu"], v, origin);
                        }
                    }
                    "alias" => {
                        if let Some(v) = self.text(value, &at) {
                            self.put(&["port", name, "alias"], v, origin);
                        }
                    }
                    _ => self.unmodelled_field("PORT", name, field),
                }
            }
            if !has_speed && !self.errors.iter().any(|e| e.path.contains(name)) {
                self.error(
                    &keys(&["PORT", name]),
                    "missing speed (Mb/s, as SONiC writes it: \"100000\")",
                );
            }
            self.ports.insert(name.to_owned(), info);
        }
        let in_port: BTreeSet<&str> = entries.iter().map(|(n, _)| *n).collect();
        for (port, device) in &self.options.devices {
            if !in_port.contains(port.as_str()) {
                self.errors.push(SonicDiagnostic {
                    file: "--map".into(),
                    line: None,
                    path: format!("{port}={device}"),
                    message: format!(
                        "{} has no port {port} in its PORT table",
                        self.options.source
                    ),
                });
            }
        }
        if self.options.only_mapped && !self.skipped.is_empty() {
            let names: Vec<&str> = self.skipped.iter().map(String::as_str).collect();
            self.warning(
                &keys(&["PORT"]),
                format!(
                    "--only-mapped: {} port{} without a device left out, with their entries in \
                     every table: {}",
                    names.len(),
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                ),
            );
        }
    }

    fn cable_length(&mut self, tables: &Map<String, Value>) {
        for (entry, fields) in self.entries(tables, "CABLE_LENGTH") {
            for (port, value) in fields {
                let at = keys(&["CABLE_LENGTH", entry, port]);
                if !self.kept("CABLE_LENGTH", port) {
                    continue;
                }
                let Some(text) = self.text(value, &at) else {
                    continue;
                };
                let metres = text.trim().strip_suffix('m').unwrap_or(text.trim());
                match metres.parse::<u32>() {
                    Ok(m) => {
                        if let Some(info) = self.ports.get_mut(port.as_str()) {
                            info.cable_m = Some(m);
                        }
                        self.put(&["port", port, "cable_length"], text, Origin::Json(at));
                    }
                    Err(_) => self.error(
                        &at,
                        format!("{text:?} is not a cable length: SONiC writes \"5m\", \"40m\""),
                    ),
                }
            }
        }
    }

    fn buffer_pools(&mut self, tables: &Map<String, Value>) {
        for (name, fields) in self.entries(tables, "BUFFER_POOL") {
            self.note(
                &["buffer_pool", name],
                Origin::Json(keys(&["BUFFER_POOL", name])),
            );
            let mut direction = None;
            let mut dynamic_mode = true;
            let mut has_size = false;
            let mut percentage = None;
            for (field, value) in fields {
                let at = keys(&["BUFFER_POOL", name, field]);
                let origin = Origin::Json(at.clone());
                match field.as_str() {
                    "type" => match self.text(value, &at).as_deref() {
                        Some(t @ ("ingress" | "egress")) => {
                            direction = Some(if t == "ingress" {
                                PoolDirection::Ingress
                            } else {
                                PoolDirection::Egress
                            });
                            self.put(&["buffer_pool", name, "type"], t, origin);
                        }
                        Some("both") => self.error(
                            &at,
                            "type \"both\" is not modelled: headroom accounts ingress and egress \
                             pools separately (SAI_BUFFER_POOL_TYPE_BOTH has no equivalent)",
                        ),
                        Some(other) => self.error(
                            &at,
                            format!("{other:?} is not a pool type: ingress or egress"),
                        ),
                        None => {}
                    },
                    "mode" => {
                        if let Some(mode) = self.text(value, &at) {
                            dynamic_mode = mode != "static";
                            self.put(&["buffer_pool", name, "mode"], mode, origin);
                        }
                    }
                    "size" => {
                        if let Some(v) = self.uint(value, &at, "bytes") {
                            has_size = true;
                            self.put(&["buffer_pool", name, "size"], v, origin);
                        }
                    }
                    "xoff" => {
                        if let Some(v) = self.uint(value, &at, "bytes") {
                            if v > 0 && name == "ingress_lossless_pool" {
                                self.lossless_pool_has_xoff = true;
                            }
                            self.put(&["buffer_pool", name, "xoff"], v, origin);
                        }
                    }
                    "percentage" => {
                        if let Some(v) = self.uint(value, &at, "percent") {
                            if !(1..=100).contains(&v) {
                                self.error(&at, format!("{v} is out of range 1..=100 %"));
                            }
                            percentage = u64::try_from(v).ok();
                        }
                    }
                    _ => self.unmodelled_field("BUFFER_POOL", name, field),
                }
            }
            let at = keys(&["BUFFER_POOL", name]);
            if direction.is_none() && !fields.contains_key("type") {
                self.error(&at, "missing type (ingress or egress)");
            }
            if !fields.contains_key("mode") {
                self.error(&at, "missing mode (static or dynamic)");
            }
            if has_size && percentage.is_some() {
                self.error(
                    &at,
                    "size and percentage together: SONiC allows one of the two",
                );
            }
            if !has_size {
                if self.dynamic || percentage.is_some() {
                    self.sizeless.push(SizelessPool {
                        name: name.to_owned(),
                        percentage,
                    });
                } else {
                    self.error(
                        &at,
                        "missing size (the traditional buffer model needs every pool's size)",
                    );
                }
            }
            if let Some(direction) = direction {
                self.pools
                    .insert(name.to_owned(), (direction, dynamic_mode));
            }
        }
    }

    fn buffer_profiles(&mut self, tables: &Map<String, Value>) {
        let pools: BTreeSet<String> = tables
            .get("BUFFER_POOL")
            .and_then(Value::as_object)
            .map(|m| m.keys().cloned().collect())
            .unwrap_or_default();
        for (name, fields) in self.entries(tables, "BUFFER_PROFILE") {
            self.profiles.insert(name.to_owned());
            self.note(
                &["buffer_profile", name],
                Origin::Json(keys(&["BUFFER_PROFILE", name])),
            );
            let computed = fields.get("headroom_type").and_then(Value::as_str) == Some("dynamic");
            for (field, value) in fields {
                let at = keys(&["BUFFER_PROFILE", name, field]);
                let origin = Origin::Json(at.clone());
                match field.as_str() {
                    "pool" => {
                        if let Some(pool) = self.reference(value, "BUFFER_POOL", &at) {
                            if !pools.contains(&pool) {
                                self.error(&at, format!("no BUFFER_POOL named {pool:?}"));
                            }
                            self.put(&["buffer_profile", name, "pool"], pool, origin);
                        }
                    }
                    "size" | "xon" | "xoff" if computed => self.warning(
                        &at,
                        format!(
                            "left out: headroom_type dynamic computes {field} for each port \
                             (the formula of the dynamic model)"
                        ),
                    ),
                    "size" | "static_th" | "xon" | "xoff" | "xon_offset" => {
                        if let Some(v) = self.uint(value, &at, "bytes") {
                            self.put(&["buffer_profile", name, field], v, origin);
                        }
                    }
                    "dynamic_th" => {
                        if let Some(v) = self.int(value, &at) {
                            self.put(&["buffer_profile", name, "dynamic_th"], v, origin);
                        }
                    }
                    "headroom_type" => match self.text(value, &at).as_deref() {
                        Some("dynamic") => {
                            self.put(&["buffer_profile", name, "headroom"], "computed", origin);
                        }
                        Some("static") | None => {}
                        Some(other) => self.error(
                            &at,
                            format!("{other:?} is not a headroom type: static or dynamic"),
                        ),
                    },
                    "packet_discard_action"
                        if fields.get(field).and_then(Value::as_str) == Some("drop") => {}
                    _ => self.unmodelled_field("BUFFER_PROFILE", name, field),
                }
            }
            if !computed && !fields.contains_key("size") {
                self.error(
                    &keys(&["BUFFER_PROFILE", name]),
                    "missing size (the reserved bytes; SONiC requires it)",
                );
            }
            if !fields.contains_key("pool") {
                self.error(&keys(&["BUFFER_PROFILE", name]), "missing pool");
            }
        }
    }

    fn map_tables(&mut self, tables: &Map<String, Value>) {
        for (table, toml_table) in MAP_TABLES {
            for (name, fields) in self.entries(tables, table) {
                self.note(&[toml_table, name], Origin::Json(keys(&[table, name])));
                let mut sorted: Vec<(&String, &Value)> = fields.iter().collect();
                sorted.sort_by(|a, b| port_order(a.0, b.0));
                for (from, value) in sorted {
                    let at = keys(&[table, name, from]);
                    if let Some(to) = self.uint(value, &at, "(a class, group or queue)") {
                        self.put(&[toml_table, name, from], to, Origin::Json(at));
                    }
                }
            }
        }
    }

    fn port_qos_map(&mut self, tables: &Map<String, Value>) {
        for (key, fields) in self.entries(tables, "PORT_QOS_MAP") {
            let targets: Vec<String> = if key == "global" {
                vec![String::new()]
            } else {
                split_port_key(key)
                    .0
                    .into_iter()
                    .filter(|p| self.kept("PORT_QOS_MAP", p))
                    .map(str::to_owned)
                    .collect()
            };
            for target in targets {
                let table: Vec<&str> = if target.is_empty() {
                    vec!["port_defaults"]
                } else {
                    vec!["port", &target]
                };
                for (field, value) in fields {
                    let at = keys(&["PORT_QOS_MAP", key, field]);
                    let origin = Origin::Json(at.clone());
                    let mut path = table.clone();
                    path.push(field);
                    if let Some((map_table, toml_field)) =
                        MAP_TABLES.iter().find(|(_, f)| f == field)
                    {
                        let Some(name) = self.reference(value, map_table, &at) else {
                            continue;
                        };
                        let defined = tables.get(*map_table).and_then(|t| t.get(&name)).is_some();
                        if !defined {
                            self.error(&at, format!("no {map_table} named {name:?}"));
                        }
                        self.put(&path, name, origin);
                        let toml_field = (*toml_field).to_owned();
                        if target.is_empty() {
                            self.global_qos_fields.insert(toml_field);
                        } else if let Some(info) = self.ports.get_mut(&target) {
                            info.qos_fields.insert(toml_field);
                        }
                        continue;
                    }
                    match field.as_str() {
                        "pfc_enable" => {
                            if let Some(text) = self.text(value, &at) {
                                if target.is_empty() {
                                    self.global_pfc_enable = true;
                                } else if let Some(info) = self.ports.get_mut(&target) {
                                    info.pfc_enable = Some(priority_list(&text));
                                }
                                self.put(&path, text, origin);
                            }
                        }
                        "pfcwd_sw_enable" => {
                            if let Some(text) = self.text(value, &at) {
                                path.pop();
                                path.push("pfcwd_enable");
                                self.put(&path, text, origin);
                            }
                        }
                        _ => self.unmodelled_field("PORT_QOS_MAP", key, field),
                    }
                }
            }
        }
    }

    /// `BUFFER_PG|<ports>|<pgs>` or `BUFFER_QUEUE|<ports>|<queues>` → `port.X.<toml_field>`.
    fn buffer_bindings(&mut self, tables: &Map<String, Value>, table: &str, toml_field: &str) {
        for (key, fields) in self.entries(tables, table) {
            let (ports, indexes) = split_port_key(key);
            let Some(indexes) = indexes else {
                self.error(
                    &keys(&[table, key]),
                    "the key must be <port>|<index or range>, e.g. \"Ethernet0|3-4\"",
                );
                continue;
            };
            for (field, value) in fields {
                let at = keys(&[table, key, field]);
                if field != "profile" {
                    self.unmodelled_field(table, key, field);
                    continue;
                }
                let Some(profile) = self.reference(value, "BUFFER_PROFILE", &at) else {
                    continue;
                };
                if profile != "NULL" && !self.profiles.contains(&profile) {
                    self.error(&at, format!("no BUFFER_PROFILE named {profile:?}"));
                }
                if profile == "NULL" && !self.dynamic {
                    self.warning(
                        &at,
                        "\"NULL\" (calculate the headroom) belongs to the dynamic buffer model: \
                         headroom computes this PG's profile with SONiC's formula",
                    );
                }
                for port in &ports {
                    if !self.kept(table, port) {
                        continue;
                    }
                    if table == "BUFFER_PG" {
                        if let (Some((from, to)), Some(info)) =
                            (index_range(indexes), self.ports.get_mut(*port))
                        {
                            for pg in from..=to {
                                info.pgs_bound[usize::from(pg)] = true;
                            }
                        }
                    }
                    self.put(
                        &["port", port, toml_field, indexes],
                        profile.as_str(),
                        Origin::Json(at.clone()),
                    );
                }
            }
        }
    }

    /// `BUFFER_PORT_INGRESS_PROFILE_LIST` / `BUFFER_PORT_EGRESS_PROFILE_LIST`: checked, not
    /// modelled.
    fn port_profile_lists(&mut self, tables: &Map<String, Value>) {
        for table in [
            "BUFFER_PORT_INGRESS_PROFILE_LIST",
            "BUFFER_PORT_EGRESS_PROFILE_LIST",
        ] {
            let entries = self.entries(tables, table);
            let Some((first, _)) = entries.first() else {
                continue;
            };
            let first_keys = keys(&[table, first]);
            for (key, fields) in &entries {
                for (field, value) in *fields {
                    let at = keys(&[table, key, field]);
                    if field != "profile_list" {
                        self.unmodelled_field(table, key, field);
                        continue;
                    }
                    let Some(list) = self.text(value, &at) else {
                        continue;
                    };
                    for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                        let name = item
                            .strip_prefix("[BUFFER_PROFILE|")
                            .and_then(|r| r.strip_suffix(']'))
                            .unwrap_or(item);
                        if !self.profiles.contains(name) {
                            self.error(&at, format!("no BUFFER_PROFILE named {name:?}"));
                        }
                    }
                }
            }
            self.warning(
                &first_keys,
                format!(
                    "{table} ({} entr{}): port-level per-pool profiles are not modelled: headroom \
                     limits each PG and queue by its own profile only (SONiC's two-level Mellanox \
                     limit is not applied); left out",
                    entries.len(),
                    if entries.len() == 1 { "y" } else { "ies" }
                ),
            );
        }
    }

    fn wred_profiles(&mut self, tables: &Map<String, Value>) {
        for (name, fields) in self.entries(tables, "WRED_PROFILE") {
            self.note(
                &["wred_profile", name],
                Origin::Json(keys(&["WRED_PROFILE", name])),
            );
            for (field, value) in fields {
                let at = keys(&["WRED_PROFILE", name, field]);
                let origin = Origin::Json(at.clone());
                let toml_keys = ["wred_profile", name, field.as_str()];
                match field.as_str() {
                    "ecn" => {
                        if let Some(v) = self.text(value, &at) {
                            self.put(&toml_keys, v, origin);
                        }
                    }
                    "wred_green_enable" | "wred_yellow_enable" | "wred_red_enable" => {
                        if let Some(v) = self.boolean(value, &at) {
                            self.put(&toml_keys, v, origin);
                        }
                    }
                    f if ["green_", "yellow_", "red_"]
                        .iter()
                        .any(|c| f.starts_with(c))
                        && (f.ends_with("_min_threshold")
                            || f.ends_with("_max_threshold")
                            || f.ends_with("_drop_probability")) =>
                    {
                        if let Some(v) = self.uint(value, &at, "bytes or percent") {
                            self.put(&toml_keys, v, origin);
                        }
                    }
                    _ => self.unmodelled_field("WRED_PROFILE", name, field),
                }
            }
        }
    }

    fn schedulers(&mut self, tables: &Map<String, Value>) {
        for (name, fields) in self.entries(tables, "SCHEDULER") {
            self.note(
                &["scheduler", name],
                Origin::Json(keys(&["SCHEDULER", name])),
            );
            for (field, value) in fields {
                let at = keys(&["SCHEDULER", name, field]);
                let origin = Origin::Json(at.clone());
                match field.as_str() {
                    "type" => {
                        if let Some(v) = self.text(value, &at) {
                            self.put(&["scheduler", name, "type"], v, origin);
                        }
                    }
                    "weight" => {
                        if let Some(v) = self.uint(value, &at, "(a weight)") {
                            self.put(&["scheduler", name, "weight"], v, origin);
                        }
                    }
                    _ => self.unmodelled_field("SCHEDULER", name, field),
                }
            }
        }
    }

    fn queues(&mut self, tables: &Map<String, Value>) {
        for (key, fields) in self.entries(tables, "QUEUE") {
            let (ports, indexes) = split_port_key(key);
            let Some(indexes) = indexes else {
                self.error(
                    &keys(&["QUEUE", key]),
                    "the key must be <port>|<queue or range>, e.g. \"Ethernet0|3\"",
                );
                continue;
            };
            for (field, value) in fields {
                let at = keys(&["QUEUE", key, field]);
                let table = match field.as_str() {
                    "scheduler" => "SCHEDULER",
                    "wred_profile" => "WRED_PROFILE",
                    _ => {
                        self.unmodelled_field("QUEUE", key, field);
                        continue;
                    }
                };
                let Some(name) = self.reference(value, table, &at) else {
                    continue;
                };
                let defined = tables.get(table).and_then(|t| t.get(&name)).is_some();
                if !defined {
                    self.error(&at, format!("no {table} named {name:?}"));
                }
                for port in &ports {
                    if self.kept("QUEUE", port) {
                        self.put(
                            &["port", port, "queue", indexes, field],
                            name.as_str(),
                            Origin::Json(at.clone()),
                        );
                    }
                }
            }
        }
    }

    fn pfc_wd(&mut self, tables: &Map<String, Value>) {
        for (key, fields) in self.entries(tables, "PFC_WD") {
            if key == "GLOBAL" {
                for (field, value) in fields {
                    let at = keys(&["PFC_WD", key, field]);
                    let origin = Origin::Json(at.clone());
                    match field.as_str() {
                        "POLL_INTERVAL" => {
                            if let Some(v) = self.uint(value, &at, "ms") {
                                self.put(&["pfcwd", "poll_interval"], v, origin);
                            }
                        }
                        "BIG_RED_SWITCH" => match self.text(value, &at).as_deref() {
                            Some("enable") => self.put(&["pfcwd", "big_red_switch"], true, origin),
                            Some("disable") => {
                                self.put(&["pfcwd", "big_red_switch"], false, origin);
                            }
                            Some(other) => {
                                self.error(&at, format!("{other:?} is not enable or disable"));
                            }
                            None => {}
                        },
                        _ => self.unmodelled_field("PFC_WD", key, field),
                    }
                }
                continue;
            }
            for port in split_port_key(key).0 {
                if !self.kept("PFC_WD", port) {
                    continue;
                }
                if let Some(info) = self.ports.get_mut(port) {
                    info.has_pfcwd = true;
                }
                self.note(
                    &["port", port, "pfcwd"],
                    Origin::Json(keys(&["PFC_WD", key])),
                );
                for (field, value) in fields {
                    let at = keys(&["PFC_WD", key, field]);
                    let origin = Origin::Json(at.clone());
                    match field.as_str() {
                        "action" => {
                            if let Some(v) = self.text(value, &at) {
                                self.put(&["port", port, "pfcwd", "action"], v, origin);
                            }
                        }
                        "detection_time" | "restoration_time" => {
                            if let Some(v) = self.uint(value, &at, "ms") {
                                self.put(&["port", port, "pfcwd", field], v, origin);
                            }
                        }
                        "pfc_stat_history"
                            if fields.get(field).and_then(Value::as_str) == Some("disable") => {}
                        _ => self.unmodelled_field("PFC_WD", key, field),
                    }
                }
            }
        }
    }

    /// `LOSSLESS_TRAFFIC_PATTERN|AZURE` and `DEFAULT_LOSSLESS_BUFFER_PARAMETER|AZURE`: inputs of
    /// the dynamic model's headroom formula and SHP.
    fn lossless_parameters(&mut self, tables: &Map<String, Value>) {
        for (entry, fields) in self.entries(tables, "LOSSLESS_TRAFFIC_PATTERN") {
            for (field, value) in fields {
                let at = keys(&["LOSSLESS_TRAFFIC_PATTERN", entry, field]);
                let toml_field = match field.as_str() {
                    "mtu" => "lossless_mtu",
                    "small_packet_percentage" => "small_packet_percentage",
                    _ => {
                        self.unmodelled_field("LOSSLESS_TRAFFIC_PATTERN", entry, field);
                        continue;
                    }
                };
                if let Some(v) = self.uint(value, &at, "bytes or percent") {
                    self.put(&["headroom_calc", toml_field], v, Origin::Json(at));
                }
            }
        }
        for (entry, fields) in self.entries(tables, "DEFAULT_LOSSLESS_BUFFER_PARAMETER") {
            for (field, value) in fields {
                let at = keys(&["DEFAULT_LOSSLESS_BUFFER_PARAMETER", entry, field]);
                match field.as_str() {
                    "default_dynamic_th" => {
                        if let Some(v) = self.int(value, &at) {
                            self.put(
                                &["headroom_calc", "default_dynamic_th"],
                                v,
                                Origin::Json(at),
                            );
                        }
                    }
                    "over_subscribe_ratio" => {
                        if let Some(v) = self.uint(value, &at, "(a ratio)") {
                            // 0 leaves the SHP off (SONiC enables it for a ratio > 0).
                            if v > 0 {
                                self.over_subscribe_ratio = u64::try_from(v).ok();
                                self.put(
                                    &["headroom_calc", "over_subscribe_ratio"],
                                    v,
                                    Origin::Json(at),
                                );
                            }
                        }
                    }
                    _ => self.unmodelled_field("DEFAULT_LOSSLESS_BUFFER_PARAMETER", entry, field),
                }
            }
        }
    }

    /// The traditional model's lossless PGs, which buffermgrd creates: `BUFFER_PG|<port>|<pfc
    /// priorities>` → `pg_lossless_<speed>_<cable>_profile` from pg_profile_lookup.ini
    /// (`buffermgr.cpp` `doSpeedUpdateTask`).
    fn traditional_lossless_pgs(&mut self) {
        if self.dynamic {
            return;
        }
        let lossless_mode_dynamic = self
            .pools
            .get("ingress_lossless_pool")
            .is_none_or(|(_, dynamic)| *dynamic);
        let mut computed_instead: Vec<String> = Vec::new();
        let port_names: Vec<String> = self.ports.keys().cloned().collect();
        for name in port_names {
            let Some(info) = self.ports.get(&name) else {
                continue;
            };
            let missing: Vec<u8> = info
                .pfc_enable
                .clone()
                .unwrap_or_default()
                .into_iter()
                .filter(|&p| !info.pgs_bound[usize::from(p)])
                .collect();
            if missing.is_empty() {
                continue;
            }
            let speed = info.speed_mbps;
            let Some(cable) = info.cable_m else {
                computed_instead.push(name);
                continue;
            };
            if cable == 0 {
                // buffermgrd: cable 0m → no lossless PG (headroom's checks then say PFC has no
                // lossless PG to generate it).
                continue;
            }
            let profile = format!("pg_lossless_{speed}_{cable}m_profile");
            let origin = if let Some(lookup) = &self.options.pg_profile_lookup {
                let Some(row) = lookup.find(speed, cable) else {
                    let message = format!(
                        "{} has no row for speed {speed} and cable {cable}m: buffermgrd creates no \
                         lossless PG for port {name} (add the row, or BUFFER_PG entries)",
                        lookup.file
                    );
                    self.error(&keys(&["PORT", &name]), message);
                    continue;
                };
                let origin = Origin::Other {
                    file: lookup.file.clone(),
                    line: Some(row.line),
                    path: String::new(),
                };
                if !self.profiles.contains(&profile) {
                    self.profiles.insert(profile.clone());
                    let p = ["buffer_profile", profile.as_str()];
                    self.note(&p, origin.clone());
                    let row = row.clone();
                    for (field, v) in [("size", row.size), ("xon", row.xon), ("xoff", row.xoff)] {
                        self.put(
                            &[p[0], p[1], field],
                            i64::try_from(v).unwrap_or(i64::MAX),
                            origin.clone(),
                        );
                    }
                    if let Some(v) = row.xon_offset {
                        self.put(
                            &[p[0], p[1], "xon_offset"],
                            i64::try_from(v).unwrap_or(i64::MAX),
                            origin.clone(),
                        );
                    }
                    self.put(
                        &[p[0], p[1], "pool"],
                        "ingress_lossless_pool",
                        origin.clone(),
                    );
                    if lossless_mode_dynamic {
                        self.put(&[p[0], p[1], "dynamic_th"], row.threshold, origin.clone());
                    } else {
                        self.put(&[p[0], p[1], "static_th"], row.threshold, origin.clone());
                    }
                }
                origin
            } else if self.profiles.contains(&profile) {
                Origin::Json(keys(&["BUFFER_PROFILE", &profile]))
            } else {
                computed_instead.push(name);
                continue;
            };
            for range in ranges(&missing) {
                self.put(
                    &["port", &name, "buffer_pg", &range],
                    profile.as_str(),
                    origin.clone(),
                );
            }
        }
        if !computed_instead.is_empty() {
            self.warning(
                &keys(&["BUFFER_PG"]),
                format!(
                    "traditional buffer model: no BUFFER_PG for the lossless PGs of port{} {} and \
                     no pg_lossless_<speed>_<cable>_profile (buffermgrd creates them from the \
                     SKU's pg_profile_lookup.ini, or needs a CABLE_LENGTH): headroom computes \
                     their headroom with SONiC's formula instead; give --pg-profile-lookup FILE \
                     for buffermgrd's values",
                    if computed_instead.len() == 1 { "" } else { "s" },
                    computed_instead.join(", ")
                ),
            );
        }
    }

    /// SONiC's meaning of what a port does not say, where headroom's default differs: no
    /// `pfc_enable` = no PFC, no `PFC_WD` entry = no watchdog, a DOT1P map without a DSCP map =
    /// PCP trust; a map a port does not name is headroom's built-in AZURE one (warned).
    fn port_defaults(&mut self) {
        let names: Vec<String> = self.ports.keys().cloned().collect();
        let mut unnamed_maps: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        let mut no_cable: Vec<String> = Vec::new();
        for name in &names {
            let Some(info) = self.ports.get(name) else {
                continue;
            };
            let has = |field: &str| {
                info.qos_fields.contains(field) || self.global_qos_fields.contains(field)
            };
            let dot1p_trust = has("dot1p_to_tc_map") && !has("dscp_to_tc_map");
            for (_, field) in MAP_TABLES {
                // SONiC emits pfc_to_pg_map only on some platforms; the DOT1P map matters only
                // under PCP trust.
                let needed = match field {
                    "pfc_to_pg_map" => false,
                    "dot1p_to_tc_map" => dot1p_trust,
                    "dscp_to_tc_map" => !dot1p_trust,
                    _ => true,
                };
                if needed && !has(field) {
                    unnamed_maps.entry(field).or_default().push(name.clone());
                }
            }
            let pfc_missing = info.pfc_enable.is_none() && !self.global_pfc_enable;
            let has_pfcwd = info.has_pfcwd;
            let cable_missing = info.cable_m.is_none();
            let any_pfc = info.pfc_enable.as_ref().is_some_and(|p| !p.is_empty());
            if dot1p_trust {
                self.put(
                    &["port", name, "trust"],
                    "dot1p",
                    Origin::Json(keys(&["PORT_QOS_MAP", name, "dot1p_to_tc_map"])),
                );
            }
            if pfc_missing {
                self.put(
                    &["port", name, "pfc_enable"],
                    "",
                    Origin::Json(keys(&["PORT_QOS_MAP", name])),
                );
            }
            if !has_pfcwd {
                self.put(
                    &["port", name, "pfcwd", "enabled"],
                    false,
                    Origin::Json(keys(&["PFC_WD", name])),
                );
            }
            if cable_missing && any_pfc {
                no_cable.push(name.clone());
            }
        }
        for (field, ports) in unnamed_maps {
            self.warning(
                &keys(&["PORT_QOS_MAP"]),
                format!(
                    "no {field} for port{} {}: headroom uses its built-in AZURE map (SONiC's \
                     qos_config.j2 content; docs/config.md)",
                    if ports.len() == 1 { "" } else { "s" },
                    ports.join(", ")
                ),
            );
        }
        if !no_cable.is_empty() {
            self.warning(
                &keys(&["CABLE_LENGTH"]),
                format!(
                    "no cable length for lossless port{} {}: headroom assumes 5m",
                    if no_cable.len() == 1 { "" } else { "s" },
                    no_cable.join(", ")
                ),
            );
        }
        let kinds: Vec<(String, BTreeSet<String>)> = self.unknown_ports.drain(..).collect();
        for (table, ports) in kinds {
            let list: Vec<&str> = ports.iter().map(String::as_str).collect();
            self.warning(
                &keys(&[&table]),
                format!(
                    "entries for port{} {} that PORT does not have: left out",
                    if list.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            );
        }
    }

    /// The ASIC's cell and the headroom formula's constants: SONiC's (no software latency).
    fn headroom_constants(&mut self, platform: Option<&str>) {
        let platform_keys = keys(&["DEVICE_METADATA", "localhost", "platform"]);
        let (cell, origin) = match (self.options.cell_size_bytes, platform) {
            (Some(cell), _) => (
                cell,
                Origin::Other {
                    file: "--cell-size".into(),
                    line: None,
                    path: cell.to_string(),
                },
            ),
            (None, Some(platform)) => match platform_cell(platform) {
                Some((cell, _)) => (cell, Origin::Json(platform_keys)),
                None => {
                    self.warning(
                        &platform_keys,
                        format!(
                            "the buffer cell of platform {platform:?} is not known to headroom: \
                             it uses 256 bytes; give --cell-size BYTES"
                        ),
                    );
                    (256, Origin::Json(platform_keys))
                }
            },
            (None, None) => (256, Origin::Json(keys(&["DEVICE_METADATA"]))),
        };
        self.put(
            &["switch", "cell_size_bytes"],
            i64::from(cell),
            origin.clone(),
        );
        self.put(
            &["headroom_calc", "cell_size_bytes"],
            i64::from(cell),
            origin.clone(),
        );
        // SONiC's ASIC_TABLE delays (the same on every Spectrum) and no software term: the
        // formula gives SONiC's numbers exactly.
        let model = Origin::Json(keys(&["DEVICE_METADATA", "localhost", "buffer_model"]));
        for (key, value) in [
            ("pipeline_latency_kib", 19.0),
            ("mac_phy_delay_kib", 0.8),
            ("peer_response_time_kib", 3.8),
            ("software_latency_kib", 0.0),
        ] {
            self.put(&["headroom_calc", key], value, model.clone());
        }
        if self.over_subscribe_ratio.is_some() && !self.lossless_pool_has_xoff {
            self.put(
                &["headroom_calc", "shared_headroom_pool"],
                true,
                Origin::Json(keys(&[
                    "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
                    "AZURE",
                    "over_subscribe_ratio",
                ])),
            );
        }
        if !self.dynamic {
            // buffermgrd's table is authoritative in the traditional model: a profile below
            // the formula's headroom is a warning, not an error.
            self.put(
                &["headroom_calc", "allow_headroom_below_minimum"],
                true,
                model,
            );
        }
    }

    fn report_left_out(&mut self) {
        let unmodelled = std::mem::take(&mut self.unmodelled);
        for fields in unmodelled.into_values() {
            for (field, (count, first)) in fields {
                let d = SonicDiagnostic {
                    file: self.options.source.clone(),
                    line: line_of(self.text, &first),
                    path: if field == "*" {
                        jq_path(&first[..2])
                    } else {
                        format!("{}[].{field}", jq_path(&first[..1]))
                    },
                    message: if field == "*" {
                        "entry not modelled by headroom: left out".into()
                    } else {
                        format!(
                            "field not modelled by headroom ({count} entr{}): left out",
                            if count == 1 { "y" } else { "ies" }
                        )
                    },
                };
                self.warnings.push(d);
            }
        }
    }

    // ---- checking the result --------------------------------------------------------------------

    fn parse(&self) -> Result<(Config, Vec<Diagnostic>), crate::ConfigErrors> {
        crate::parse_with(
            &self.doc.to_string(),
            "(imported)",
            &ParseOptions::default(),
        )
    }

    /// headroom's refusal of the generated configuration, at the JSON fields.
    fn fail(&mut self, refused: crate::ConfigErrors) -> SonicErrors {
        let errors = refused.errors.iter().map(|d| self.translate(d)).collect();
        let mut warnings = std::mem::take(&mut self.warnings);
        warnings.extend(refused.warnings.iter().map(|d| self.translate(d)));
        SonicErrors { errors, warnings }
    }

    fn resolve(mut self) -> Result<Imported, SonicErrors> {
        if !self.sizeless.is_empty() {
            self.size_dynamic_pools()?;
        }
        match self.parse() {
            Ok((config, warnings)) => {
                let mut all = self.warnings.clone();
                all.extend(warnings.iter().map(|w| self.translate(w)));
                let header = format!(
                    "# headroom configuration imported from SONiC CONFIG_DB {} \
                     (`headroom config import-sonic`; buffer model: {}).\n\
                     # Every key below came from a CONFIG_DB field; docs/sonic.md has the mapping.\n\n",
                    self.options.source,
                    if self.dynamic { "dynamic" } else { "traditional" }
                );
                Ok(Imported {
                    toml: format!("{header}{}", self.doc),
                    config,
                    warnings: all,
                })
            }
            Err(refused) => Err(self.fail(refused)),
        }
    }

    /// Pools the dynamic model leaves without `size`: what the MMU has left after every reserve,
    /// split as `buffer_pool_mellanox.lua` splits it (reference §2.3): `available = mmu − Σ
    /// reserved sizes − 19 KiB lossy-PG reserve per port − 10 KiB egress mirror per port −
    /// private headroom (10 KiB per lossless port, with an SHP) − 256 KiB management pool − SHP`;
    /// a pool gets `available × percentage / 100`, else `available / number of ingress pools`.
    /// The SHP, when `over_subscribe_ratio` asks for one and the pool gives no `xoff`, is `Σ
    /// lossless PG (xon + xoff − size) − private headroom`, divided by the ratio (655360 bytes
    /// when that is not positive).
    fn size_dynamic_pools(&mut self) -> Result<(), SonicErrors> {
        let egress_lossless_keys = keys(&["BUFFER_POOL", "egress_lossless_pool", "size"]);
        let (mmu, mmu_origin) = if let Some(mmu) = self.options.mmu_size_bytes {
            (
                mmu,
                Origin::Other {
                    file: "--mmu-size".into(),
                    line: None,
                    path: mmu.to_string(),
                },
            )
        } else if let Some(size) = self
            .doc
            .get("buffer_pool")
            .and_then(|p| p.get("egress_lossless_pool"))
            .and_then(|p| p.get("size"))
            .and_then(Item::as_integer)
        {
            let first = self.sizeless[0].name.clone();
            self.warning(
                &keys(&["BUFFER_POOL", &first]),
                format!(
                    "the dynamic buffer model sizes this pool from the ASIC's MMU size, which \
                     CONFIG_DB does not hold: headroom takes egress_lossless_pool's size {size} \
                     bytes as the MMU size (SONiC templates make it the whole MMU); give \
                     --mmu-size BYTES for the real one"
                ),
            );
            (
                u64::try_from(size).unwrap_or(0),
                Origin::Json(egress_lossless_keys),
            )
        } else {
            let sizeless: Vec<SizelessPool> = self.sizeless.drain(..).collect();
            for pool in sizeless {
                self.error(
                    &keys(&["BUFFER_POOL", &pool.name]),
                    "no size: the dynamic buffer model computes it from the ASIC's MMU size, \
                     which CONFIG_DB does not hold: give --mmu-size BYTES (STATE_DB \
                     BUFFER_MAX_PARAM_TABLE|global mmu_size)",
                );
            }
            return Err(SonicErrors {
                errors: std::mem::take(&mut self.errors),
                warnings: std::mem::take(&mut self.warnings),
            });
        };
        let placeholder = i64::try_from(mmu).unwrap_or(i64::MAX);
        let sizeless: Vec<(String, Option<u64>)> = self
            .sizeless
            .iter()
            .map(|p| (p.name.clone(), p.percentage))
            .collect();
        for (name, _) in &sizeless {
            self.put(
                &["buffer_pool", name, "size"],
                placeholder,
                Origin::Json(keys(&["BUFFER_POOL", name])),
            );
        }
        let first = match self.parse() {
            Ok((config, _)) => config,
            Err(refused) => return Err(self.fail(refused)),
        };
        let ports = u64::try_from(first.ports.len()).unwrap_or(0);
        let lossless_ports = u64::try_from(
            first
                .ports
                .iter()
                .filter(|p| p.priority_groups.iter().any(|g| g.is_lossless()))
                .count(),
        )
        .unwrap_or(0);
        let reserved: u64 = first.pools.iter().map(|p| p.reserved_bytes).sum();
        let lossless_pool = first
            .pools
            .iter()
            .find(|p| p.name == first.headroom_calc.lossless_pool);
        let mut shp = lossless_pool.map_or(0, |p| p.shared_headroom_pool_bytes);
        if let (Some(ratio), false) = (self.over_subscribe_ratio, self.lossless_pool_has_xoff) {
            let accumulated: u64 = first
                .ports
                .iter()
                .flat_map(|p| p.priority_groups.iter())
                .filter(|g| g.is_lossless())
                .map(|g| {
                    (g.profile.xon_bytes + g.profile.xoff_bytes)
                        .saturating_sub(g.profile.size_bytes)
                })
                .sum();
            let net = accumulated.saturating_sub(lossless_ports * PRIVATE_HEADROOM_BYTES);
            shp = if net == 0 {
                MIN_SHP_BYTES
            } else {
                net.div_ceil(ratio.max(1))
            };
            let pool = first.headroom_calc.lossless_pool.clone();
            self.put(
                &["buffer_pool", &pool, "xoff"],
                i64::try_from(shp).unwrap_or(i64::MAX),
                Origin::Json(keys(&[
                    "DEFAULT_LOSSLESS_BUFFER_PARAMETER",
                    "AZURE",
                    "over_subscribe_ratio",
                ])),
            );
        }
        let private = if shp > 0 {
            lossless_ports * PRIVATE_HEADROOM_BYTES
        } else {
            0
        };
        let carved = reserved
            + ports * (LOSSY_PG_RESERVE_BYTES + EGRESS_MIRROR_BYTES)
            + private
            + MGMT_POOL_BYTES
            + shp;
        let Some(available) = mmu.checked_sub(carved).filter(|a| *a > 0) else {
            let d = self.origin_diagnostic(
                &mmu_origin,
                format!(
                    "an MMU of {mmu} bytes cannot hold what the dynamic model carves from it: \
                     {carved} bytes (reserved sizes, per-port reserves, SHP)"
                ),
            );
            return Err(SonicErrors {
                errors: vec![d],
                warnings: std::mem::take(&mut self.warnings),
            });
        };
        let ingress_pools = u64::try_from(
            self.pools
                .values()
                .filter(|(d, _)| *d == PoolDirection::Ingress)
                .count(),
        )
        .unwrap_or(1)
        .max(1);
        for (name, percentage) in &sizeless {
            let size = percentage.map_or(available / ingress_pools, |p| available * p / 100);
            self.put(
                &["buffer_pool", name, "size"],
                i64::try_from(size).unwrap_or(i64::MAX),
                Origin::Json(keys(&["BUFFER_POOL", name])),
            );
        }
        Ok(())
    }
}
