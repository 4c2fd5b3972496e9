/work/main/target/debug/libheadroom_dpdk_sys.rlib: /work/main/crates/dpdk-sys/src/lib.rs
