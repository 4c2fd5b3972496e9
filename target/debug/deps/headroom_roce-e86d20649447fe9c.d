/work/main/target/debug/deps/headroom_roce-e86d20649447fe9c.d: crates/roce/src/lib.rs

/work/main/target/debug/deps/libheadroom_roce-e86d20649447fe9c.rlib: crates/roce/src/lib.rs

/work/main/target/debug/deps/libheadroom_roce-e86d20649447fe9c.rmeta: crates/roce/src/lib.rs

crates/roce/src/lib.rs:
