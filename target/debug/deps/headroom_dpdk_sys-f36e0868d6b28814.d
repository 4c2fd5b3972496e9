/work/main/target/debug/deps/headroom_dpdk_sys-f36e0868d6b28814.d: crates/dpdk-sys/src/lib.rs

/work/main/target/debug/deps/libheadroom_dpdk_sys-f36e0868d6b28814.rlib: crates/dpdk-sys/src/lib.rs

/work/main/target/debug/deps/libheadroom_dpdk_sys-f36e0868d6b28814.rmeta: crates/dpdk-sys/src/lib.rs

crates/dpdk-sys/src/lib.rs:
