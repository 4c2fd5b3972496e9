/work/main/target/debug/deps/headroom_core-f0eb28e9d6cefafd.d: crates/core/src/lib.rs crates/core/src/buffer.rs crates/core/src/counters.rs crates/core/src/frame.rs crates/core/src/params.rs crates/core/src/time.rs crates/core/src/types.rs

/work/main/target/debug/deps/libheadroom_core-f0eb28e9d6cefafd.rlib: crates/core/src/lib.rs crates/core/src/buffer.rs crates/core/src/counters.rs crates/core/src/frame.rs crates/core/src/params.rs crates/core/src/time.rs crates/core/src/types.rs

/work/main/target/debug/deps/libheadroom_core-f0eb28e9d6cefafd.rmeta: crates/core/src/lib.rs crates/core/src/buffer.rs crates/core/src/counters.rs crates/core/src/frame.rs crates/core/src/params.rs crates/core/src/time.rs crates/core/src/types.rs

crates/core/src/lib.rs:
crates/core/src/buffer.rs:
crates/core/src/counters.rs:
crates/core/src/frame.rs:
crates/core/src/params.rs:
crates/core/src/time.rs:
crates/core/src/types.rs:
