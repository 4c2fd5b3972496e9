//! headroom-config: the TOML configuration of a headroom switch.
//!
//! The semantics are SONiC's CONFIG_DB (`BUFFER_POOL`, `BUFFER_PROFILE`, `BUFFER_PG`,
//! `BUFFER_QUEUE`, `PORT_QOS_MAP` and the map tables, `WRED_PROFILE`, `SCHEDULER`, `QUEUE`,
//! `PFC_WD`) written as TOML, plus `[lldp]` (the LLDP/DCBX agent); docs/config.md describes every key. [`load`] / [`parse`] return a
//! fully resolved [`Config`]: defaults applied, names resolved, ranges expanded, PG headroom
//! computed with SONiC's formula ([`compute_headroom`]), and cross-checked. Every error names the
//! file, line, column and dotted key. [`derived`] gives the per-PG thresholds an operator reads
//! (`headroom check`).
#![forbid(unsafe_code)]

mod defaults;
mod derived;
mod error;
mod headroom;
mod model;
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
    BufferPool, BufferProfile, Config, Dpdk, Driver, EcnMode, FaultInjection, FrameFaults,
    HeadroomCalc, Lcore, Lldp, LldpAdminStatus, LogFormat, LogLevel, PfcWdAction, PfcWdGlobal,
    Polling, PoolDirection, Port, PortPfcWd, PriorityBits, PriorityGroup, QosMaps, Queue, Runtime,
    Scheduler, SchedulerKind, StaticFdb, Switch, Testing, Threshold, ThresholdMode, Trust, Vlan,
    WredColor, WredProfile, DSCP_COUNT, PRIORITY_COUNT,
};
pub use resolve::lossless_profile_name;

use error::{location_of, Diagnostics, SpanIndex};

/// What parsing needs to know about the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseOptions {
    /// CPUs the process may use; `runtime.lcore.cpu` must be below this.
    pub cpu_count: usize,
}

impl Default for ParseOptions {
    /// The CPUs this process may run on (`std::thread::available_parallelism`, 1 if unknown).
    fn default() -> Self {
        Self {
            cpu_count: std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get),
        }
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
            let location = error.span().map(|span| location_of(text, span.start));
            return Err(single(location, String::new(), tidy(error.message())));
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
            cpu_count: options.cpu_count,
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
