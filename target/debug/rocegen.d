/work/main/target/debug/rocegen: /work/main/crates/rocegen/src/main.rs
