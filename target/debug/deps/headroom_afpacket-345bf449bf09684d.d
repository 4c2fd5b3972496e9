/work/main/target/debug/deps/headroom_afpacket-345bf449bf09684d.d: crates/afpacket/src/lib.rs

/work/main/target/debug/deps/libheadroom_afpacket-345bf449bf09684d.rlib: crates/afpacket/src/lib.rs

/work/main/target/debug/deps/libheadroom_afpacket-345bf449bf09684d.rmeta: crates/afpacket/src/lib.rs

crates/afpacket/src/lib.rs:
