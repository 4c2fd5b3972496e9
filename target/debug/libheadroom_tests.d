/work/main/target/debug/libheadroom_tests.rlib: /work/main/tests/src/lib.rs
