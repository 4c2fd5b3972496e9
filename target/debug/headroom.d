/work/main/target/debug/headroom: /work/main/crates/cli/src/main.rs
