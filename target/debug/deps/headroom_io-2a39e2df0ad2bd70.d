/work/main/target/debug/deps/headroom_io-2a39e2df0ad2bd70.d: crates/io/src/lib.rs

/work/main/target/debug/deps/libheadroom_io-2a39e2df0ad2bd70.rlib: crates/io/src/lib.rs

/work/main/target/debug/deps/libheadroom_io-2a39e2df0ad2bd70.rmeta: crates/io/src/lib.rs

crates/io/src/lib.rs:
