//! The configuration loader end to end, from a file's bytes: UTF-8 check, TOML, schema,
//! defaults, resolution and cross-checks (`headroom_config::parse_bytes`, what `load` does
//! after reading the file). Whatever the bytes: no panic; a refusal names the file and says
//! why; an accepted configuration has ports, renders its derived values, and yields core
//! parameters the core accepts (the config crate must refuse what the core would).
#![no_main]

use headroom_config::{parse_bytes, ParseOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = ParseOptions::with_allowed_cpus(0..4);
    match parse_bytes(data, "fuzz.toml", &options) {
        Ok((config, warnings)) => {
            assert!(!config.ports.is_empty());
            assert!(warnings.iter().all(|w| w.file == "fuzz.toml"));
            let _ = headroom_config::derived(&config).to_string();
            let params = match config.switch_params() {
                Ok(p) => p,
                Err(e) => panic!("the configuration was accepted but has no core parameters: {e}"),
            };
            if let Err(e) = params.validate() {
                panic!("the configuration was accepted but the core refuses it: {e}");
            }
        }
        Err(errors) => {
            assert!(!errors.errors.is_empty());
            for e in &errors.errors {
                assert_eq!(e.file, "fuzz.toml");
                assert!(!e.message.is_empty());
            }
            let _ = errors.to_string();
        }
    }
});
