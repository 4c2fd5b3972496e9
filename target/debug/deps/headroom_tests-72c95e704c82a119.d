/work/main/target/debug/deps/headroom_tests-72c95e704c82a119.d: tests/src/lib.rs

/work/main/target/debug/deps/libheadroom_tests-72c95e704c82a119.rlib: tests/src/lib.rs

/work/main/target/debug/deps/libheadroom_tests-72c95e704c82a119.rmeta: tests/src/lib.rs

tests/src/lib.rs:
