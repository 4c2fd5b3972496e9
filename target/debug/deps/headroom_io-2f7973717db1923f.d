/work/main/target/debug/deps/headroom_io-2f7973717db1923f.d: crates/io/src/lib.rs

/work/main/target/debug/deps/libheadroom_io-2f7973717db1923f.rlib: crates/io/src/lib.rs

/work/main/target/debug/deps/libheadroom_io-2f7973717db1923f.rmeta: crates/io/src/lib.rs

crates/io/src/lib.rs:
