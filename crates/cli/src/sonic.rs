//! `headroom config import-sonic` / `export-sonic`: SONiC CONFIG_DB JSON in and out. The mapping
//! is `headroom_config::sonic`'s; this reads files and options and prints what it found.

use crate::check::EXIT_BAD_INPUT;
use crate::client::{emit, Target};
use clap::Args;
use headroom_config::sonic::{self, ImportOptions, PgProfileLookup, SonicDiagnostic};
use headroom_runtime::protocol::{Request, RunningConfig, Show};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `headroom config import-sonic config_db.json [-o FILE] [--map Ethernet0=eth1 …|--map-file F]`.
#[derive(Debug, Args)]
pub(crate) struct ImportArgs {
    /// SONiC CONFIG_DB JSON (`/etc/sonic/config_db.json`, or `sonic-cfggen -d --print-data`).
    #[arg(value_name = "CONFIG_DB.json")]
    file: PathBuf,
    /// Write the headroom TOML here (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The device of a SONiC port: `--map Ethernet0=eth1` (Linux interface or DPDK device);
    /// repeat for each port. CONFIG_DB does not say which interface a port is.
    #[arg(long, value_name = "PORT=DEVICE")]
    map: Vec<String>,
    /// A file of port mappings, one `PORT DEVICE` (or `PORT=DEVICE`) per line, `#` comments.
    #[arg(long, value_name = "FILE")]
    map_file: Option<PathBuf>,
    /// Import only the mapped ports (the others, and their entries in every table, are left
    /// out); without it a port without a device is an error.
    #[arg(long)]
    only_mapped: bool,
    /// The SKU's pg_profile_lookup.ini (traditional buffer model: buffermgrd makes the lossless
    /// profiles from it; a rendered CONFIG_DB does not hold them).
    #[arg(long, value_name = "FILE")]
    pg_profile_lookup: Option<PathBuf>,
    /// The ASIC's MMU size, bytes (STATE_DB BUFFER_MAX_PARAM_TABLE|global mmu_size): sizes the
    /// pools the dynamic model leaves without `size`. Default: egress_lossless_pool's size.
    #[arg(long, value_name = "BYTES")]
    mmu_size: Option<u64>,
    /// The ASIC's buffer cell, bytes. Default: from DEVICE_METADATA's platform (Spectrum-1 96,
    /// Spectrum-2/3 144, Spectrum-4 192, Trident3 256), else 256.
    #[arg(long, value_name = "BYTES")]
    cell_size: Option<u32>,
}

/// `headroom config export-sonic [-c FILE] [-o FILE]`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Write the CONFIG_DB JSON here (default: standard output).
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

fn print_diagnostics(kind: &str, list: &[SonicDiagnostic]) {
    for d in list {
        eprintln!("{kind}: {d}");
    }
}

fn refused(message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(EXIT_BAD_INPUT)
}

/// `PORT=DEVICE` or `PORT DEVICE`.
fn parse_mapping(text: &str) -> Option<(String, String)> {
    let (port, device) = text
        .split_once('=')
        .or_else(|| text.trim().split_once(char::is_whitespace))?;
    let (port, device) = (port.trim(), device.trim());
    (!port.is_empty() && !device.is_empty() && !device.contains(char::is_whitespace))
        .then(|| (port.to_owned(), device.to_owned()))
}

fn mappings(args: &ImportArgs) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut push = |port: String, device: String, place: String| -> Result<(), String> {
        if let Some((_, d)) = out.iter().find(|(p, _)| *p == port) {
            return Err(format!(
                "{place}: port {port} is mapped twice (to {d} and to {device})"
            ));
        }
        out.push((port, device));
        Ok(())
    };
    if let Some(path) = &args.map_file {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        for (i, line) in text.lines().enumerate() {
            let content = line.split('#').next().unwrap_or("").trim();
            if content.is_empty() {
                continue;
            }
            let place = format!("{}:{}", path.display(), i + 1);
            let (port, device) = parse_mapping(content).ok_or_else(|| {
                format!("{place}: {content:?} is not `PORT DEVICE` (e.g. `Ethernet0 eth1`)")
            })?;
            push(port, device, place)?;
        }
    }
    for m in &args.map {
        let (port, device) = parse_mapping(m)
            .ok_or_else(|| format!("--map {m:?}: write PORT=DEVICE, e.g. --map Ethernet0=eth1"))?;
        push(port, device, format!("--map {m}"))?;
    }
    Ok(out)
}

fn write_output(output: Option<&Path>, text: &str) -> Result<(), String> {
    match output {
        Some(path) => {
            std::fs::write(path, text).map_err(|e| format!("writing {}: {e}", path.display()))
        }
        None => {
            emit(format_args!("{text}"));
            Ok(())
        }
    }
}

pub(crate) fn import(args: &ImportArgs) -> ExitCode {
    let source = args.file.display().to_string();
    let json = match std::fs::read_to_string(&args.file) {
        Ok(t) => t,
        Err(e) => return refused(&format!("{source}: {e}")),
    };
    let devices = match mappings(args) {
        Ok(d) => d,
        Err(e) => return refused(&e),
    };
    let pg_profile_lookup = match &args.pg_profile_lookup {
        None => None,
        Some(path) => {
            let name = path.display().to_string();
            match std::fs::read_to_string(path) {
                Err(e) => return refused(&format!("{name}: {e}")),
                Ok(text) => match PgProfileLookup::parse(&text, &name) {
                    Ok(l) => Some(l),
                    Err(e) => {
                        eprintln!("{e}");
                        return ExitCode::from(EXIT_BAD_INPUT);
                    }
                },
            }
        }
    };
    let options = ImportOptions {
        source: source.clone(),
        devices,
        only_mapped: args.only_mapped,
        mmu_size_bytes: args.mmu_size,
        cell_size_bytes: args.cell_size,
        pg_profile_lookup,
    };
    match sonic::import(&json, &options) {
        Ok(imported) => {
            print_diagnostics("warning", &imported.warnings);
            if let Err(e) = write_output(args.output.as_deref(), &imported.toml) {
                return refused(&e);
            }
            if let Some(path) = &args.output {
                eprintln!(
                    "{}: {} ports imported from {source}; `headroom check -c {}` explains it",
                    path.display(),
                    imported.config.ports.len(),
                    path.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(errors) => {
            print_diagnostics("warning", &errors.warnings);
            eprintln!("{errors}");
            eprintln!("{source}: not imported");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

pub(crate) fn export(target: &Target, args: &ExportArgs) -> ExitCode {
    let config = match target.config_file() {
        Some(path) => match headroom_config::load(path) {
            Ok((config, _)) => config,
            Err(errors) => {
                eprintln!("{errors}");
                return ExitCode::from(EXIT_BAD_INPUT);
            }
        },
        None => {
            // The running switch's configuration, run-time changes included.
            let running: RunningConfig = match target.fetch(&Request::Show { what: Show::Config }) {
                Ok((running, _)) => running,
                Err(e) => {
                    eprintln!("error: {e} (or give -c FILE to export a configuration file)");
                    return ExitCode::FAILURE;
                }
            };
            match headroom_config::parse(&running.text, &running.file) {
                Ok((config, _)) => config,
                Err(errors) => {
                    eprintln!("{errors}");
                    return ExitCode::from(EXIT_BAD_INPUT);
                }
            }
        }
    };
    let exported = sonic::export(&config);
    for w in &exported.warnings {
        eprintln!("warning: {w}");
    }
    match write_output(args.output.as_deref(), &exported.json) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => refused(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_mapping;

    #[test]
    fn mappings_are_port_equals_device_or_two_words() {
        assert_eq!(
            parse_mapping("Ethernet0=eth1"),
            Some(("Ethernet0".into(), "eth1".into()))
        );
        assert_eq!(
            parse_mapping("  Ethernet4   sw-p1 "),
            Some(("Ethernet4".into(), "sw-p1".into()))
        );
        assert_eq!(parse_mapping("Ethernet0"), None);
        assert_eq!(parse_mapping("Ethernet0="), None);
        assert_eq!(parse_mapping("=eth1"), None);
        assert_eq!(parse_mapping("Ethernet0 eth1 extra"), None);
    }
}
