/work/main/target/debug/deps/headroom_sim-a9403803377b9339.d: crates/sim/src/lib.rs

/work/main/target/debug/deps/libheadroom_sim-a9403803377b9339.rlib: crates/sim/src/lib.rs

/work/main/target/debug/deps/libheadroom_sim-a9403803377b9339.rmeta: crates/sim/src/lib.rs

crates/sim/src/lib.rs:
