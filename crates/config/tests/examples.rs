//! Every example configuration under config/ loads.
use std::path::PathBuf;

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../config").join(name)
}

fn options() -> headroom_config::ParseOptions {
    headroom_config::ParseOptions { cpu_count: 4 }
}

#[test]
fn print_all() {
    for name in ["spectrum2-100g.toml", "dpdk-null.toml"] {
        match headroom_config::load_with(example(name), &options()) {
            Ok((config, warnings)) => {
                for w in &warnings { println!("warning: {w}"); }
                println!("{}", headroom_config::derived(&config));
            }
            Err(e) => println!("{e}"),
        }
    }
}
