/work/main/target/debug/libheadroom_config.rlib: /work/main/crates/config/src/lib.rs
