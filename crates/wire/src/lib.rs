//! headroom-wire: see Cargo.toml for its purpose. Work in progress.
#![forbid(unsafe_code)]
