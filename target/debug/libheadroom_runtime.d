/work/main/target/debug/libheadroom_runtime.rlib: /work/main/crates/runtime/src/lib.rs
