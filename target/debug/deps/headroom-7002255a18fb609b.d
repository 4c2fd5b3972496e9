/work/main/target/debug/deps/headroom-7002255a18fb609b.d: crates/cli/src/main.rs

/work/main/target/debug/deps/headroom-7002255a18fb609b: crates/cli/src/main.rs

crates/cli/src/main.rs:
