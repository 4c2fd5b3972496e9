/work/main/target/debug/deps/headroom_config-b0e5835e2466a025.d: crates/config/src/lib.rs

/work/main/target/debug/deps/libheadroom_config-b0e5835e2466a025.rlib: crates/config/src/lib.rs

/work/main/target/debug/deps/libheadroom_config-b0e5835e2466a025.rmeta: crates/config/src/lib.rs

crates/config/src/lib.rs:
