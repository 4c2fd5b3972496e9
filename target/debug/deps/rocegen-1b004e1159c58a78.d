/work/main/target/debug/deps/rocegen-1b004e1159c58a78.d: crates/rocegen/src/main.rs

/work/main/target/debug/deps/rocegen-1b004e1159c58a78: crates/rocegen/src/main.rs

crates/rocegen/src/main.rs:
