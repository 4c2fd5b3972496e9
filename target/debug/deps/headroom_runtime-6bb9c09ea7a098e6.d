/work/main/target/debug/deps/headroom_runtime-6bb9c09ea7a098e6.d: crates/runtime/src/lib.rs

/work/main/target/debug/deps/libheadroom_runtime-6bb9c09ea7a098e6.rlib: crates/runtime/src/lib.rs

/work/main/target/debug/deps/libheadroom_runtime-6bb9c09ea7a098e6.rmeta: crates/runtime/src/lib.rs

crates/runtime/src/lib.rs:
