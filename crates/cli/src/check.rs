//! `headroom check`: validate and explain a configuration.

use std::path::Path;
use std::process::ExitCode;

/// Exit code for a refused configuration or bad arguments.
pub(crate) const EXIT_BAD_INPUT: u8 = 2;

/// Loads `path`; on error prints every diagnostic and returns `Err(exit code 2)`.
pub(crate) fn load(path: &Path) -> Result<headroom_config::Config, ExitCode> {
    match headroom_config::load(path) {
        Ok((config, warnings)) => {
            for w in &warnings {
                eprintln!("warning: {w}");
            }
            Ok(config)
        }
        Err(errors) => {
            eprintln!("{errors}");
            Err(ExitCode::from(EXIT_BAD_INPUT))
        }
    }
}

pub(crate) fn check(path: &Path) -> ExitCode {
    let config = match load(path) {
        Ok(c) => c,
        Err(code) => return code,
    };
    crate::client::emit(format_args!(
        "{}: valid configuration of switch {:?}, {} ports, driver {:?}\n\n{}",
        path.display(),
        config.switch.name,
        config.ports.len(),
        config.switch.driver,
        headroom_config::derived(&config)
    ));
    ExitCode::SUCCESS
}
