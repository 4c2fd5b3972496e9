/work/main/target/debug/libheadroom_roce.rlib: /work/main/crates/roce/src/lib.rs
