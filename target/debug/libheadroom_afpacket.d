/work/main/target/debug/libheadroom_afpacket.rlib: /work/main/crates/afpacket/src/lib.rs
