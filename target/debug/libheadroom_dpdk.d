/work/main/target/debug/libheadroom_dpdk.rlib: /work/main/crates/dpdk/src/lib.rs
