/work/main/target/debug/deps/headroom_dpdk-b81f20953e6f7390.d: crates/dpdk/src/lib.rs

/work/main/target/debug/deps/libheadroom_dpdk-b81f20953e6f7390.rlib: crates/dpdk/src/lib.rs

/work/main/target/debug/deps/libheadroom_dpdk-b81f20953e6f7390.rmeta: crates/dpdk/src/lib.rs

crates/dpdk/src/lib.rs:
