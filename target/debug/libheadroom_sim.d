/work/main/target/debug/libheadroom_sim.rlib: /work/main/crates/sim/src/lib.rs
