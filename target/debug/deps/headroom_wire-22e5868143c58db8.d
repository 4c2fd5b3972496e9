/work/main/target/debug/deps/headroom_wire-22e5868143c58db8.d: crates/wire/src/lib.rs

/work/main/target/debug/deps/libheadroom_wire-22e5868143c58db8.rlib: crates/wire/src/lib.rs

/work/main/target/debug/deps/libheadroom_wire-22e5868143c58db8.rmeta: crates/wire/src/lib.rs

crates/wire/src/lib.rs:
