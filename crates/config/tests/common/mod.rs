//! Helpers shared by the integration tests.
#![allow(dead_code)]

use headroom_config::{Config, ConfigErrors, ParseOptions, Warning};

/// Parse as a process allowed on CPUs 0..=3, file name `t.toml`.
pub fn parse(text: &str) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    parse_on(text, &[0, 1, 2, 3])
}

/// Parse as a process whose affinity mask is `cpus`, file name `t.toml`.
pub fn parse_on(text: &str, cpus: &[usize]) -> Result<(Config, Vec<Warning>), ConfigErrors> {
    headroom_config::parse_with(
        text,
        "t.toml",
        &ParseOptions::with_allowed_cpus(cpus.iter().copied()),
    )
}

/// Parse text that must load; panics with the errors otherwise.
pub fn ok(text: &str) -> (Config, Vec<Warning>) {
    match parse(text) {
        Ok(result) => result,
        Err(errors) => panic!("expected to load, got:\n{errors}"),
    }
}

/// The rendered errors of text that must not load.
pub fn errors(text: &str) -> Vec<String> {
    match parse(text) {
        Ok(_) => panic!("expected errors, the configuration loaded"),
        Err(errors) => errors.errors.iter().map(ToString::to_string).collect(),
    }
}

/// The rendered warnings of text that must load.
pub fn warnings(text: &str) -> Vec<String> {
    ok(text).1.iter().map(ToString::to_string).collect()
}

/// Assert that `list` holds `expected` exactly, showing the list otherwise.
#[track_caller]
pub fn assert_has(list: &[String], expected: &str) {
    assert!(
        list.iter().any(|item| item == expected),
        "missing:\n  {expected}\nin:\n  {}",
        list.join("\n  ")
    );
}

/// Assert that some item of `list` starts with `prefix`.
#[track_caller]
pub fn assert_has_prefix(list: &[String], prefix: &str) {
    assert!(
        list.iter().any(|item| item.starts_with(prefix)),
        "no item starting with:\n  {prefix}\nin:\n  {}",
        list.join("\n  ")
    );
}

/// One 10G port on eth0 (lines 1-3).
pub const PORT: &str = "[port.Ethernet0]\ndevice = \"eth0\"\nspeed = \"10G\"\n";
