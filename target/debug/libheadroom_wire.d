/work/main/target/debug/libheadroom_wire.rlib: /work/main/crates/wire/src/lib.rs
