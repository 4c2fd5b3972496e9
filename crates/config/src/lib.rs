//! headroom-config: the TOML configuration of a headroom switch.
//!
//! The semantics are SONiC's CONFIG_DB (`BUFFER_POOL`, `BUFFER_PROFILE`, `BUFFER_PG`,
//! `BUFFER_QUEUE`, `PORT_QOS_MAP` and the map tables, `WRED_PROFILE`, `SCHEDULER`, `QUEUE`,
//! `PFC_WD`) written as TOML, plus `[lldp]` (the LLDP/DCBX agent); docs/config.md describes every key. [`load`] / [`parse`] return a
//! fully resolved [`Config`]: defaults applied, names resolved, ranges expanded, PG headroom
//! computed with SONiC's formula ([`compute_headroom`]), and cross-checked. Every error names the
//! file, line, column and dotted key. [`Config::switch_params`] gives the core's parameters
//! (`headroom_core::params`) of a resolved configuration: every value that would not fit the
//! core's types is refused here, with its key, never clamped. [`derived`] gives the per-PG
//! thresholds an operator reads (`headroom check`).
#![forbid(unsafe_code)]

mod defaults;
mod derived;
mod error;
mod headroom;
mod model;
mod params;
mod resolve;
mod schema;
pub mod sonic;
mod values;

use std::path::Path;

pub use derived::{derived, Derived, DerivedPg, DerivedPool, DerivedPort};
pub use error::{ConfigError, ConfigErrors, Diagnostic, Location, Warning};
pub use headroom::{
    compute_headroom, pause_quanta_for_speed, HeadroomConstants, HeadroomPort, HeadroomValues,
    CABLE_SIGNAL_SPEED_METRES_PER_SECOND,
};
pub use model::{
    BufferPool, BufferProfile, Config, Dpdk, Driver, EcmpHashAlgorithm, EcnMode, FaultInjection,
    FrameFaults, HeadroomCalc, Lcore, Lldp, LldpAdminStatus, LogFormat, LogLevel, PfcWdAction,
    PfcWdGlobal, Polling, PoolDirection, Port, PortPfcWd, PriorityBits, PriorityGroup, QosMaps,
    Queue, Routing, Runtime, Scheduler, SchedulerKind, StaticFdb, Switch, Testing, Threshold,
    ThresholdMode, Trust, Vlan, VlanInterface, WredColor, WredProfile, DSCP_COUNT, PRIORITY_COUNT,
};
pub use params::{
    fdb_aging_ns, FDB_CAPACITY, FRAME_POOL_FRAMES_MAX, FRAME_POOL_FRAMES_MIN, MAX_POOLS, MAX_PORTS,
    QUEUE_RING_FRAMES_MAX,
};
pub use resolve::lossless_profile_name;

use error::{location_of, Diagnostics, SpanIndex};

/// What parsing needs to know about the machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// CPUs this process may run on (its affinity mask, as `taskset` or a container's cpuset
    /// leave it): `runtime.lcore.cpu` must be one of them, and without a lcore table the one
    /// lcore takes the lowest.
    pub allowed_cpus: Vec<usize>,
}

impl ParseOptions {
    /// Options for a process allowed on `cpus` (tests inject a mask this way).
    #[must_use]
    pub fn with_allowed_cpus(cpus: impl IntoIterator<Item = usize>) -> Self {
        let mut allowed_cpus: Vec<usize> = cpus.into_iter().collect();
        allowed_cpus.sort_unstable();
        allowed_cpus.dedup();
        Self { allowed_cpus }
    }
}

impl Default for ParseOptions {
    /// The CPUs in the calling thread's affinity mask (`sched_getaffinity`, which `taskset` and
    /// cgroup cpusets set for the whole process); CPUs `0..available_parallelism` if the mask
    /// cannot be read.
    fn default() -> Self {
        Self::with_allowed_cpus(allowed_cpus())
    }
}

/// The CPUs this thread may run on, ascending (see [`ParseOptions::default`]).
#[must_use]
pub fn allowed_cpus() -> Vec<usize> {
    match core_affinity::get_core_ids() {
        Some(ids) if !ids.is_empty() => {
            let mut cpus: Vec<usize> = ids.into_iter().map(|c| c.id).collect();
            cpus.sort_unstable();
            cpus
        }
        _ => (0..std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get))
            .collect(),
    }
}

/// Read and resolve the configuration file at `path`.
///
/// # Errors
/// Every problem found (I/O, syntax, unknown key, range, cross-check), each with file, line,
/// column and key.
pub fn load(path: impl AsRef<Path>) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    load_with(path, &ParseOptions::default())
}

/// [`load`] with explicit [`ParseOptions`].
///
/// # Errors
/// As [`load`].
pub fn load_with(
    path: impl AsRef<Path>,
    options: &ParseOptions,
) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    let path = path.as_ref();
    let file_name = path.display().to_string();
    match std::fs::read(path) {
        Ok(bytes) => parse_bytes(&bytes, &file_name, options),
        Err(error) => Err(ConfigErrors {
            errors: vec![Diagnostic {
                file: file_name,
                location: None,
                key: String::new(),
                message: format!("cannot read: {error}"),
            }],
            warnings: Vec::new(),
        }),
    }
}

/// Parse and resolve a configuration file's bytes (what [`load_with`] does after reading the
/// file): text that is not UTF-8 is refused with the place of the first bad byte.
///
/// # Errors
/// As [`load`].
pub fn parse_bytes(
    bytes: &[u8],
    file_name: &str,
    options: &ParseOptions,
) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    match std::str::from_utf8(bytes) {
        Ok(text) => parse_with(text, file_name, options),
        Err(error) => {
            let valid = &bytes[..error.valid_up_to()];
            // The valid prefix is UTF-8: locate the bad byte in it, by line and column.
            let prefix = std::str::from_utf8(valid).unwrap_or("");
            Err(ConfigErrors {
                errors: vec![Diagnostic {
                    file: file_name.to_owned(),
                    location: Some(location_of(prefix, prefix.len())),
                    key: String::new(),
                    message: format!(
                        "not UTF-8 text (TOML files are UTF-8): invalid byte 0x{:02x}",
                        bytes[error.valid_up_to()]
                    ),
                }],
                warnings: Vec::new(),
            })
        }
    }
}

/// Parse and resolve configuration `text`; `file_name` is used in messages only.
///
/// # Errors
/// As [`load`].
pub fn parse(text: &str, file_name: &str) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    parse_with(text, file_name, &ParseOptions::default())
}

/// [`parse`] with explicit [`ParseOptions`].
///
/// # Errors
/// As [`load`].
pub fn parse_with(
    text: &str,
    file_name: &str,
    options: &ParseOptions,
) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    let single = |location: Option<Location>, key: String, message: String| ConfigErrors {
        errors: vec![Diagnostic {
            file: file_name.to_owned(),
            location,
            key,
            message,
        }],
        warnings: Vec::new(),
    };
    let document = match toml_edit::ImDocument::parse(text.to_owned()) {
        Ok(document) => document,
        Err(error) => {
            let start = error.span().map(|span| span.start);
            let location = start.map(|start| location_of(text, start));
            let mut message = tidy(error.message());
            if message.is_empty() {
                // toml_edit says nothing for some inputs (a control character in a comment):
                // name what is there.
                message = match start
                    .and_then(|s| text.get(s..))
                    .and_then(|t| t.chars().next())
                {
                    Some(c) if c.is_control() => format!(
                        "control character U+{:04X} is not allowed here (TOML 1.0 allows only tab)",
                        u32::from(c)
                    ),
                    _ => "not valid TOML here".to_owned(),
                };
            }
            return Err(single(location, String::new(), message));
        }
    };
    let spans = SpanIndex::build(&document);
    let raw: schema::RawConfig = match toml_edit::de::from_document(document) {
        Ok(raw) => raw,
        Err(error) => {
            let span = error.span();
            let location = span.clone().map(|span| location_of(text, span.start));
            let mut key = span
                .as_ref()
                .and_then(|span| spans.path_at(span))
                .unwrap_or("")
                .to_owned();
            let mut message = tidy(error.message());
            // "missing field `x`": name the missing key itself, located at its table.
            if let Some(field) = message
                .strip_prefix("missing field `")
                .and_then(|rest| rest.strip_suffix('`'))
            {
                key = error::join_key(&key, field);
                message = "missing (required key)".to_owned();
            }
            return Err(single(location, key, message));
        }
    };
    let mut diagnostics = Diagnostics::new(file_name, text, &spans);
    let config = resolve::resolve(
        &raw,
        &mut diagnostics,
        resolve::Environment {
            allowed_cpus: &options.allowed_cpus,
        },
    );
    match config {
        Some(config) if diagnostics.errors.is_empty() => Ok((config, diagnostics.warnings)),
        _ => Err(ConfigErrors {
            errors: diagnostics.errors,
            warnings: diagnostics.warnings,
        }),
    }
}

/// toml_edit messages end with a newline and sometimes span lines; keep one line.
fn tidy(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}
